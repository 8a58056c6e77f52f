"""Outcome codes of the rim sweeps, shared by the rolling (:mod:`rollax.basin`) and the
rolling/slipping (:mod:`rollax.slip`) simulations and by the figures (:mod:`rollax.plotting`).

The code of an outcome is its index in :data:`OUTCOMES`; ``basin.npz`` stores them as int8.
"""

from __future__ import annotations

PERIODIC, IN, OUT, UNDECIDED, FAILED, CHATTERING = 0, 1, 2, 3, 4, 5
OUTCOMES = ("periodic", "in", "out", "undecided", "failed", "chattering")

__all__ = ["CHATTERING", "FAILED", "IN", "OUT", "OUTCOMES", "PERIODIC", "UNDECIDED"]
