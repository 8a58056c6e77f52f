"""Outcome codes of the rim sweeps, shared by the rolling (:mod:`rollax.analysis.basin`) and the
rolling/slipping (:mod:`rollax.models.slip`) simulations and by the figures (:mod:`rollax.plot`).

The code of an outcome is its index in :data:`OUTCOMES`; a basin map's dataset (``basin.zarr``) stores them as int8, with CF ``flag_values`` and ``flag_meanings``.
"""

from __future__ import annotations

import enum


class RimOutcome(enum.IntEnum):
    """Outcomes of a start on the rim (the codes of a basin map's ``outcome``); the one source of the
    codes and names below and of :class:`rollax.systems.RimOutcome`."""

    PERIODIC = 0
    IN = 1
    OUT = 2
    UNDECIDED = 3
    FAILED = 4
    CHATTERING = 5  # slipping sweeps only


# the codes as plain ints and the names in code order, for arrays and figures
PERIODIC, IN, OUT, UNDECIDED, FAILED, CHATTERING = (int(m) for m in RimOutcome)
OUTCOMES = tuple(m.name.lower() for m in RimOutcome)

__all__ = ["CHATTERING", "FAILED", "IN", "OUT", "OUTCOMES", "PERIODIC", "RimOutcome", "UNDECIDED"]
