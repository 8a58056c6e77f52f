"""The ball rolling on the rim as a system: events and outcomes of the basin maps (Sect. 5.1).

From each start x0 = (beta, w1, w2, w3) the rolling equations (33)-(36) (with the dissipation
of (83)) run until

* ``F2`` reaches zero (a boundary event): the ball separates and flies; **in** if its centre
  then reaches the rim plane closer to the rim axis than R, else **out**;
* ``w1`` has changed sign transversally ``w1_target`` times (default 2, Proposition 4):
  **periodic**; with dissipation the proposition no longer holds, so the basin preset counts
  the zeros without ending the run (``w1_target = 0``);
* the final time comes first: **undecided**; a failed solve: **failed**.
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp

from rollax._solution import Status
from rollax._system import AbstractSystem, boundary, crossing
from rollax.rim import Rim


class RimOutcome(enum.IntEnum):
    """Outcomes of a start on the rim (the codes of ``basin.npz``)."""

    PERIODIC = 0
    IN = 1
    OUT = 2
    UNDECIDED = 3
    FAILED = 4
    CHATTERING = 5  # slipping sweeps only


def _arrays(rim: Rim) -> Rim:
    # parameters as float64 arrays: traced (not static) under jit, so new values do not recompile
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=float), rim)


class RimRolling(AbstractSystem):
    """The rolling ball on the rim (no slipping) with the basin events of Sect. 5.1.1.

    ``rim``: the parameters (any field may carry a leading batch axis for per-start values in
    :func:`rollax.solve_ensemble`). ``w1_target``: the transversal zero of w1 that ends the run
    as periodic (0: count only).
    """

    rim: Rim = eqx.field(default_factory=Rim, converter=_arrays)
    w1_target: int = eqx.field(static=True, default=2)

    state_names = ("beta", "omega1", "omega2", "omega3")
    outcomes = RimOutcome

    def __check_init__(self):
        if not (isinstance(self.w1_target, int) and self.w1_target >= 0):
            raise ValueError(f"w1_target = {self.w1_target!r} must be an integer >= 0")

    @property
    def events(self):
        return (boundary("separation"), crossing("omega1", target=self.w1_target))

    def vector_field(self, t, y, mode):
        return self.rim.vector_field(y)

    def event_values(self, t, y, mode):
        # F2/m: the ball separates at F2 = 0; w1: Proposition 4
        return jnp.stack([self.rim.normal_force(y) / self.rim.m, y[1]])

    def outcome(self, sol):
        """:class:`RimOutcome` of one run; a separation is classified by the flight of the centre."""
        inside, _, _ = self.rim.flight(sol.y)
        fell = (sol.status == Status.EVENT) & (sol.event == 0)
        periodic = (sol.status == Status.EVENT) & (sol.event == 1)
        return jnp.select(
            [fell & inside, fell, periodic, sol.status == Status.T_MAX],
            [RimOutcome.IN, RimOutcome.OUT, RimOutcome.PERIODIC, RimOutcome.UNDECIDED],
            RimOutcome.FAILED,
        ).astype(jnp.int8)
