"""The ball and disk robots as one hybrid system: roll -> detach -> fly -> land -> roll again.

The robot of the normal-force paper (Sects. 3-6 and Appendix B), moved by point masses on rails
with the prescribed accelerations of ``control``. The state is the flight state of
:class:`rollax.robot.BallFlight` (``[theta, theta', q, Omega, z_GC (3), z_GC' (3)]``) or
:class:`rollax.robot.DiskFlight` (``[theta, theta', phi, phi', x, z, x', z']``) in both modes:

* ``rolling``: the rolling equations (6.4) / (5.1) of the rolling components; the contact point
  moves with the rolling (ball: ``z``; disk: ``x' = -r phi'``); the GC's height and velocity are
  passive (they are recomputed at detachment);
* ``flying``: the flight equations (B.17), (B.6) / (B.18)-(B.19).

Events: **detach** (a boundary: the normal force N of (3.3) / (4.3), per unit weight, reaches 0
while rolling) and **touchdown** (the GC's height crosses its rolling height downwards while
flying). At detachment the flight starts from the rolling state with a continuous GC velocity
(2.3); if the flight's initial vertical acceleration is not upward the body cannot leave the
surface and the run ends (``RobotOutcome.NO_LIFTOFF``). At touchdown the perfectly plastic,
no-slip landing map (:func:`rollax.robot.plastic_landing`) gives the rolling state after it.
``aux`` counts detachments and landings.
"""

from __future__ import annotations

import enum
from typing import cast

import jax.numpy as jnp

from rollax._core._solution import Status
from rollax._core._system import AbstractSystem, boundary, crossing
from rollax.models.robot.ball import Ball
from rollax.models.robot.controls import Control
from rollax.models.robot.disk import Disk
from rollax.models.robot.flight import BallFlight, DiskFlight

ROLLING, FLYING = 0, 1
DETACHMENTS, LANDINGS = 0, 1


class RobotOutcome(enum.IntEnum):
    ROLLING = 0  # rolling at the final time
    FLYING = 1  # in flight at the final time
    NO_LIFTOFF = 2  # N reached 0 but the body cannot leave the surface
    FAILED = 3


class Robot(AbstractSystem):
    """A ball or disk robot (``model``) driven by ``control``, rolling, flying and landing."""

    model: Ball | Disk
    control: Control

    modes = ("rolling", "flying")
    n_aux = 2
    aux_names = ("detachments", "landings")
    aux_units = ("1", "1")
    outcomes = RobotOutcome
    events = (boundary("detach"), crossing("touchdown", target=1, direction=-1))

    def __check_init__(self):
        if not isinstance(self.model, (Ball, Disk)):
            raise ValueError(
                f"model = {type(self.model).__name__} must be a rollax.robot.Ball or Disk"
            )
        if not isinstance(self.control, Control):
            raise ValueError(
                f"control = {type(self.control).__name__} is not allowed: it must be "
                "a rollax.robot.Control (e.g. RampControl)"
            )
        if self.control.n != self.model.n:
            raise ValueError(
                f"control drives {self.control.n} masses; the model has "
                f"{self.model.n} (allowed: the same number)"
            )

    @property
    def flight(self):
        return BallFlight(self.model) if isinstance(self.model, Ball) else DiskFlight(self.model)

    @property
    def is_ball(self) -> bool:
        return isinstance(self.model, Ball)

    @property
    def state_names(self):
        n = self.model.n
        th = tuple(f"theta{i + 1}" for i in range(n)) + tuple(f"theta{i + 1}_dot" for i in range(n))
        if self.is_ball:
            return th + (
                "q0",
                "q1",
                "q2",
                "q3",
                "Omega1",
                "Omega2",
                "Omega3",
                "x",
                "y",
                "z",
                "vx",
                "vy",
                "vz",
            )
        return th + ("phi", "phi_dot", "x", "z", "vx", "vz")

    def jump_times(self):
        return self.control.kinks

    # ----------------------------------------------------------------- the two embeddings
    def rolling_state(self, y):
        """The rolling state (6.1) / (5.1) inside the hybrid state."""
        n = self.model.n
        if self.is_ball:
            return jnp.concatenate([y[: 2 * n + 7], y[2 * n + 7 : 2 * n + 9]])
        return y[: 2 * n + 2]

    def from_rolling(self, y_roll, x=None):
        """The hybrid state of a rolling state (ball: contact point from ``z``; disk: ``x``
        defaults to ``-r phi``), with the GC velocity of rolling (2.3)."""
        if self.is_ball:
            return self.flight.from_rolling(y_roll)
        return cast(DiskFlight, self.flight).from_rolling(y_roll, x)

    # ----------------------------------------------------------------- dynamics
    def vector_field(self, t, y, mode):
        n = self.model.n
        f_fly = self.flight.vector_field(t, y, self.control)
        f_roll = self.model.vector_field(t, self.rolling_state(y), self.control)
        if self.is_ball:
            f_r = jnp.concatenate([f_roll[: 2 * n + 7], f_roll[2 * n + 7 :], jnp.zeros(4)])
        else:
            phid = y[2 * n + 1]
            f_r = jnp.concatenate([f_roll, jnp.stack([-self.model.radius * phid]), jnp.zeros(3)])
        return jnp.where(mode == FLYING, f_fly, f_r)

    def normal_force(self, t, y):
        """N per unit weight (``M g_n``: its normal part on a slope) while rolling."""
        N = self.model.contact_forces(t, self.rolling_state(y), self.control)[0]
        return N / (self.model.total_mass * self.model.gravity()[-1])

    def event_values(self, t, y, mode):
        one = jnp.ones((), y.dtype)
        rolling = mode == ROLLING
        return jnp.stack(
            [
                jnp.where(rolling, self.normal_force(t, y), one),
                jnp.where(rolling, one, self.flight.height(y)),
            ]
        )

    def contact_point(self, t, y):
        """What a camera above the floor sees (for :func:`rollax.identify`): the contact point
        (the point of the floor under the geometric centre) ``(x, y)`` for the ball, ``(x,)``
        for the disk, in the units of the model."""
        n = self.model.n
        if self.is_ball:
            return y[2 * n + 7 : 2 * n + 9]
        return y[2 * n + 2 : 2 * n + 3]

    def reset(self, t, y, mode, aux, event):
        n = self.model.n
        detach = (mode == ROLLING) & (event == 0)
        x_roll = None if self.is_ball else y[2 * n + 2]
        y_fly = self.from_rolling(self.rolling_state(y), x_roll)
        lifts = self.flight.vector_field(t, y_fly, self.control)[-1] > 0
        land = self.flight.land(y)
        if self.is_ball:
            y_land = self.from_rolling(land.y)
        else:
            y_land = self.from_rolling(land.y, self.flight.split(y)[4][0])
        y_new = jnp.where(detach, y_fly, y_land)
        mode_new = jnp.where(detach, FLYING, ROLLING).astype(mode.dtype)
        aux_new = aux + jnp.stack([detach, ~detach]).astype(aux.dtype)
        return t, y_new, mode_new, aux_new, detach & ~lifts

    def outcome(self, sol):  # pyright: ignore[reportIncompatibleMethodOverride]  (called positionally)
        return jnp.select(
            [sol.failed, sol.status == Status.EVENT, sol.mode == FLYING],
            [RobotOutcome.FAILED, RobotOutcome.NO_LIFTOFF, RobotOutcome.FLYING],
            RobotOutcome.ROLLING,
        ).astype(jnp.int8)


class RollingRobot(AbstractSystem):
    """A ball or disk robot (``model``) held to the rolling equations (6.4) / (5.2) throughout.

    The state is the rolling state (6.1) / (5.1); there are no events. This is the system of
    trajectory optimisation (:func:`rollax.robot.optimize`): there ``N >= N_min > 0`` is a
    constraint of the problem, so an iterate that would detach is a constraint violation that
    the optimiser removes, and the map from the control to the constraint values stays smooth
    (a detach event would make it jump). Use :class:`Robot` to simulate what really happens
    when N reaches 0."""

    model: Ball | Disk
    control: Control

    def __check_init__(self):
        Robot.__check_init__(self)  # pyright: ignore[reportArgumentType]  (model and control)

    @property
    def state_names(self):
        n = self.model.n
        th = tuple(f"theta{i + 1}" for i in range(n)) + tuple(f"theta{i + 1}_dot" for i in range(n))
        if isinstance(self.model, Ball):
            return th + ("q0", "q1", "q2", "q3", "Omega1", "Omega2", "Omega3", "x", "y")
        return th + ("phi", "phi_dot")

    def jump_times(self):
        return self.control.kinks

    def vector_field(self, t, y, mode):
        return self.model.vector_field(t, y, self.control)

    def contact_forces(self, t, y):
        """``(N, F_h)``: the normal force (3.3) / (4.3) and the horizontal contact force (3.4) /
        (4.4) as a 2-vector."""
        return self.model.contact_forces(t, y, self.control)
