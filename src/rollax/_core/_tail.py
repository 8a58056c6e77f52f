"""What the last starts of a run are doing, for its progress bar (issue 56).

A sweep's bar near its end used to read "3 starts still running" and nothing more while a few
slipping starts took minutes. The work queue (:func:`rollax._integrate.queue.run`) writes here,
once a slice, when few starts are left, how many lanes are in flight, their modes and the most
steps one of them has taken; the sweep's bar (:mod:`rollax._drivers._chunks`) reads it. One
note per process (the last run's), read on the thread that shows the bar.
"""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_note: dict = {}


def clear() -> None:
    with _lock:
        _note.clear()


def report(live: int, steps: int, modes: Counter | None = None) -> None:
    """``live`` starts in flight, the longest at ``steps`` steps, ``modes`` (name -> count) of
    the starts in flight (None: a system without modes)."""
    with _lock:
        _note.clear()
        _note.update(live=int(live), steps=int(steps), modes=modes)


def text() -> str:
    """ "2 slipping, 1 rolling; up to 2.1e+05 steps", or "" with no note."""
    with _lock:
        if not _note:
            return ""
        modes, steps = _note["modes"], _note["steps"]
    parts = []
    if modes:
        parts.append(", ".join(f"{k} {name}" for name, k in modes.most_common()))
    parts.append(f"up to {steps:.3g} steps")
    return "; ".join(parts)
