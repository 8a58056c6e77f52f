"""The bouncing penny billiard (Clark & Bloch, Sects. V-VI) as a hybrid system.

The penny's flight between impacts is the first-order form of (25) on the 8-D state
``(x, y, theta, phi, x', y', theta', phi')`` (:meth:`rollax.penny.Penny.vector_field`, whose
solution is the closed-form flow (26)). Two crossing events watch the table edge at the
penny's front (27) and back (34): ``-h`` of the end, crossing downwards when the end reaches
the edge from the table (a crossing, not a boundary, because right after an impact the end
sits on the edge moving inwards). The reset map is the billiard's impact law
(:meth:`rollax.penny.PennyBilliard.impact`: elastic, plastic or restitution), ``aux`` counts the
impacts, and the run ends at the ``n_impacts``-th.
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax.numpy as jnp

from rollax._solution import Status
from rollax._system import AbstractSystem, crossing
from rollax.penny import PennyBilliard


class PennyOutcome(enum.IntEnum):
    DONE = 0  # made all its impacts
    FLYING = 1  # fewer impacts by the final time (at rest, or circling inside the table)
    FAILED = 2


class PennySystem(AbstractSystem):
    """The penny billiard ``billiard`` run until its ``n_impacts``-th impact."""

    billiard: PennyBilliard = eqx.field(default_factory=PennyBilliard)
    n_impacts: int = eqx.field(static=True, default=1)

    state_names = ("x", "y", "theta", "phi", "x_dot", "y_dot", "theta_dot", "phi_dot")
    events = (crossing("front", target=1, direction=-1), crossing("back", target=1, direction=-1))
    n_aux = 1
    outcomes = PennyOutcome

    def __check_init__(self):
        if isinstance(self.n_impacts, bool) or not (isinstance(self.n_impacts, int)
                                                    and self.n_impacts >= 1):
            raise ValueError(f"n_impacts = {self.n_impacts!r} is not allowed: it must be an "
                             "integer >= 1")
        if not isinstance(self.billiard, PennyBilliard):
            raise ValueError(f"billiard = {type(self.billiard).__name__} is not allowed: it must "
                             "be a rollax.penny.PennyBilliard")

    def vector_field(self, t, y, mode):
        return self.billiard.penny.vector_field(t, y)

    def event_values(self, t, y, mode):
        return -self.billiard.edge_values(y)

    def reset(self, t, y, mode, aux, event):
        n = aux[0] + 1
        return t, self.billiard.impact(y, event), mode, aux.at[0].set(n), n >= self.n_impacts

    def outcome(self, sol):
        return jnp.select([sol.failed, sol.status == Status.EVENT],
                          [PennyOutcome.FAILED, PennyOutcome.DONE],
                          PennyOutcome.FLYING).astype(jnp.int8)
