"""The note a run's last starts leave for the bar (rollax._core._tail); the queue writing it
and the bar showing it are tested in tests/integrate/test_ensemble.py and
tests/drivers/test_progress.py."""

from collections import Counter

import numpy as np

from rollax._core import _tail


def test_the_note_names_the_modes_most_common_first_and_the_most_steps():
    rng = np.random.default_rng(58)
    for _ in range(20):
        k = rng.integers(0, 5, 3)
        modes = Counter({"rolling": int(k[0]), "slipping": int(k[1]), "leaving": int(k[2])})
        modes = +modes  # (no zero counts)
        steps = int(rng.integers(1, 10**6))
        _tail.report(sum(modes.values()), steps, modes or None)
        text = _tail.text()
        assert text.endswith(f"up to {steps:.3g} steps")
        shown = [part.split(" ", 1) for part in text.split("; ")[0].split(", ")] if modes else []
        assert [(name, int(n)) for n, name in shown] == modes.most_common()
    _tail.clear()
    assert _tail.text() == ""


def test_a_system_without_modes_gets_the_steps_only():
    _tail.report(2, 41_000, None)
    assert _tail.text() == "up to 4.1e+04 steps"
    _tail.clear()
