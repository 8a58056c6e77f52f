"""The basketball shot as a hybrid system: flight, rim and board impacts, in or out.

The ball flies (:mod:`rollax.models.shot`: gravity, drag, Magnus lift) from its release until

* it touches the rim (the torus) or the board (the rectangle) — crossing events on the exact
  distances, downwards: the impact map of :func:`rollax.models.shot.impact` (restitution and
  friction with stick and slip) acts on the velocity and the spin and the flight goes on;
* a rim impact leaves the ball slower than ``v_roll`` along the normal: the ball stays on the
  rim. If its contact point is then at rest (slower than ``v_roll``: the impact stuck), it rolls
  on in the rim paper's rolling model (mode ``rolling``: :class:`rollax.models.rim.Rim`'s
  equations (33)-(36) with the angle alpha of (19), the state ``(beta, omega1, omega2, omega3,
  alpha)`` in the first five components, mapped from the 3-D state by eqs. (1)-(4): the normal
  velocity left is dropped) until the normal force F2 reaches zero, where it flies again from
  the rolling ball's centre, velocity (13) and spin, or until it meets the board (the board's
  impact on that flight state); if it still slips, the run ends as **on_rim** (the rim's
  slipping model is not joined yet);
* its centre passes down through the plane ``r + a`` below the rim plane, below which it can no
  longer touch the rim: **made** if it is then within the rim's core circle (it went through the
  hoop), else **missed**; or it reaches the floor: **missed**;
* the final time comes first: **undecided**; a failed solve: **failed**.

The auxiliary record counts the rim and board impacts, keeps the time of the first contact
(``-1``: none) and the time spent rolling on the rim; a made shot with no contact is a swish
(:func:`shot_summary`).
"""

from __future__ import annotations

import enum

import jax.numpy as jnp
from jax.core import Tracer

from rollax._core._solution import Status
from rollax._core._system import AbstractSystem, boundary, crossing, parameter
from rollax.models import rim as _rim
from rollax.models import shot as _shot

RIM, BOARD, BELOW, FLOOR, SEPARATION = range(5)
N_RIM, N_BOARD, ON_RIM, T_CONTACT, T_ROLL, T_ROLL_START = range(6)
FLIGHT, ROLLING = 0, 1


class ShotOutcome(enum.IntEnum):
    MADE = 0  # through the hoop
    MISSED = 1  # below the rim plane outside the hoop, or the floor
    ON_RIM = 2  # settled on the rim slipping (the rim's slipping model is not joined yet)
    UNDECIDED = 3  # still flying at the final time
    FAILED = 4  # the solve failed


class Shot(AbstractSystem):
    """The shot from release to in or out (module docstring; geometry and coefficients in
    :mod:`rollax.models.shot`, SI units). Every parameter may be swept or batched."""

    r: float = parameter(_shot.BALL_RADIUS, units="m")
    m: float = parameter(_shot.BALL_MASS, units="kg")
    j: float = parameter(_shot.BALL_J, units="1")  # I = j m r^2
    g: float = parameter(_shot.GRAVITY, units="m/s^2")
    rho_air: float = parameter(_shot.AIR_DENSITY, units="kg/m^3")  # 0: vacuum
    c_d: float = parameter(_shot.DRAG_COEFFICIENT, units="1")
    c_m: float = parameter(_shot.MAGNUS_COEFFICIENT, units="1")
    rim_inner_radius: float = parameter(_shot.RIM_INNER_RADIUS, units="m")
    a: float = parameter(_shot.RIM_TUBE_RADIUS, units="m")
    rim_height: float = parameter(_shot.RIM_HEIGHT, units="m")
    board_offset: float = parameter(_shot.BOARD_OFFSET, units="m")  # behind the rim's inner edge
    board_width: float = parameter(_shot.BOARD_WIDTH, units="m")
    board_height: float = parameter(_shot.BOARD_HEIGHT, units="m")
    board_below_rim: float = parameter(_shot.BOARD_BELOW_RIM, units="m")
    e_rim: float = parameter(0.6, units="1")
    mu_rim: float = parameter(0.3, finite=False, units="1")  # inf: every impact sticks
    e_board: float = parameter(0.75, units="1")
    mu_board: float = parameter(0.3, units="1")
    v_roll: float = parameter(0.05, units="m/s")  # a rim impact leaving slower: on_rim

    state_names = ("x", "y", "z", "v_x", "v_y", "v_z", "omega_x", "omega_y", "omega_z")
    state_units = ("m", "m", "m", "m/s", "m/s", "m/s", "rad/s", "rad/s", "rad/s")
    events = (
        crossing("rim", target=1, direction=-1),
        crossing("board", target=1, direction=-1),
        crossing("below", target=1, direction=-1),
        crossing("floor", target=1, direction=-1),
        boundary("separation"),  # rolling on the rim: valid while F2 > 0
    )
    modes = ("flight", "rolling")
    n_aux = 6
    outcomes = ShotOutcome
    # a vacuum flight is a parabola, which DOPRI5 steps in a few long steps (4 for a free
    # throw), and 8 samples of such a step stepped over a rim graze; 0.01 s is 7 cm of flight
    # at 7 m/s between steps, under 1 cm between samples
    dt_max = 0.01

    def __check_init__(self):
        def shown(v):
            return repr(float(v)) if jnp.ndim(v) == 0 else repr(v)

        for name in ("r", "m", "j", "g", "a", "rim_inner_radius", "rim_height"):
            v = getattr(self, name)
            if not isinstance(v, Tracer) and not jnp.all(jnp.asarray(v) > 0):
                raise ValueError(f"{name} = {shown(v)} is not allowed: it must be > 0")
        for name in ("e_rim", "e_board"):
            v = getattr(self, name)
            if not isinstance(v, Tracer) and not jnp.all(
                (jnp.asarray(v) >= 0) & (jnp.asarray(v) <= 1)
            ):
                raise ValueError(f"{name} = {shown(v)} is not allowed: it must be in [0, 1]")
        for name in ("mu_rim", "mu_board", "rho_air", "c_d", "v_roll"):
            v = getattr(self, name)
            if not isinstance(v, Tracer) and not jnp.all(jnp.asarray(v) >= 0):
                raise ValueError(f"{name} = {shown(v)} is not allowed: it must be >= 0")

    # geometry in the hoop's frame
    @property
    def R(self):
        """Radius of the rim's core circle (inner radius + tube radius)."""
        return self.rim_inner_radius + self.a

    def _board(self):
        x_b = self.rim_inner_radius + self.board_offset
        z_lo = -self.board_below_rim
        return x_b, self.board_width, z_lo, z_lo + self.board_height

    @property
    def rim(self) -> _rim.Rim:
        """The rim model of the rolling mode, with this shot's ball and rim (no slipping, no
        rolling dissipation)."""
        return _rim.Rim(r=self.r, a=self.a, R=self.R, j=self.j, g=self.g, mu=float("inf"))

    def vector_field(self, t, y, mode):
        v, omega = y[3:6], y[6:9]
        acc = _shot.acceleration(v, omega, self.r, self.m, self.g, self.rho_air, self.c_d, self.c_m)
        flying = jnp.concatenate([v, acc, jnp.zeros_like(omega)])
        rolling = jnp.concatenate([self.rim.vector_field_with_alpha(y[:5]), jnp.zeros_like(y[5:])])
        return jnp.where(mode == ROLLING, rolling, flying)

    def event_values(self, t, y, mode):
        c = y[:3]
        x_b, w, z_lo, z_hi = self._board()
        one = jnp.ones((), y.dtype)
        flying = jnp.stack(
            [
                _shot.rim_gap(c, self.R, self.a, self.r),
                _shot.board_gap(c, x_b, w, z_lo, z_hi, self.r),
                c[2] + self.r + self.a,
                c[2] + self.rim_height - self.r,
                one,
            ]
        )
        # (F2 per unit mass: the rim model's normal force is for its mass m); a ball rolling
        # over the back of the rim meets the board
        f2 = self.rim.normal_force(y[:4]) / self.rim.m
        on_rim = self.rim.centre(y[:4], y[4])
        rolling = jnp.stack(
            [one, _shot.board_gap(on_rim, x_b, w, z_lo, z_hi, self.r), one, one, f2]
        )
        return jnp.where(mode == ROLLING, rolling, flying)

    def to_rolling(self, y):
        """The rolling state ``(beta, omega1, omega2, omega3, alpha)`` of a 3-D state on the rim
        (eqs. (1)-(4): alpha and beta from the centre, the spin's components on n1, n2, n3)."""
        c, omega = y[:3], y[6:9]
        rho_h = jnp.sqrt(c[0] ** 2 + c[1] ** 2)
        alpha = jnp.arctan2(c[0], -c[1])  # the outward horizontal is (sin a, -cos a, 0)
        beta = jnp.arctan2(c[2], self.R - rho_h)
        n1, n2, n3 = _rim._n1(alpha), _rim._n2(alpha, beta), _rim._n3(alpha, beta)
        return jnp.stack([beta, omega @ n1, omega @ n2, omega @ n3, alpha])

    def to_flight(self, z):
        """The 3-D state of a rolling state ``z = (beta, omega1, omega2, omega3, alpha)``: the
        centre (12), its velocity (13) and the spin (16)."""
        x, alpha = z[:4], z[4]
        rim = self.rim
        beta = x[0]
        n1, n2, n3 = _rim._n1(alpha), _rim._n2(alpha, beta), _rim._n3(alpha, beta)
        omega = x[1] * n1 + x[2] * n2 + x[3] * n3
        return jnp.concatenate([rim.centre(x, alpha), rim.centre_velocity(x, alpha), omega])

    def reset(self, t, y, mode, aux, event):
        flying = mode == FLIGHT
        rolling_now = mode == ROLLING
        # a rolling ball leaves the rim at the separation, or where it meets the board (then
        # the board's impact acts on its flight state)
        separated = rolling_now & (event == SEPARATION)
        left = separated | (rolling_now & (event == BOARD))
        y_pre = jnp.where(rolling_now, self.to_flight(y[:5]), y)
        c, v, omega = y_pre[:3], y_pre[3:6], y_pre[6:9]
        x_b, w, z_lo, z_hi = self._board()
        on_board = event == BOARD
        on_rim = flying & (event == RIM)
        n = jnp.where(
            on_board,
            _shot.board_normal(c, x_b, w, z_lo, z_hi),
            _shot.rim_normal(c, self.R),
        )
        e = jnp.where(on_board, self.e_board, self.e_rim)
        mu = jnp.where(on_board, self.mu_board, self.mu_rim)
        v2, omega2, _, _ = _shot.impact(v, omega, n, e, mu, self.r, self.j)
        contact = on_rim | on_board
        y_impact = jnp.concatenate([c, v2, omega2])
        z = self.to_rolling(y_impact)
        # the rim holds the ball if it leaves slower than v_roll along the normal and the
        # rolling ball's normal force is positive (else it flies on: just after a separation
        # the flight may touch the rim again within rounding, with no speed to lose)
        held = self.rim.normal_force(z[:4]) > 0
        settled = on_rim & (jnp.dot(v2, n) < self.v_roll) & held
        # the contact point's slip left after the impact: the ball rolls on if it stuck
        u2 = v2 - self.r * jnp.cross(omega2, n)
        slip = jnp.linalg.norm(u2 - jnp.dot(u2, n) * n)
        rolls = settled & (slip < self.v_roll)
        y_roll = jnp.concatenate([z, jnp.zeros_like(y[5:])])
        y2 = jnp.where(rolls, y_roll, jnp.where(contact, y_impact, jnp.where(separated, y_pre, y)))
        mode2 = jnp.where(rolls, ROLLING, jnp.where(left, FLIGHT, mode)).astype(mode.dtype)
        aux = aux.at[N_RIM].add(jnp.where(on_rim, 1.0, 0.0))
        aux = aux.at[N_BOARD].add(jnp.where(on_board, 1.0, 0.0))
        aux = aux.at[ON_RIM].set(jnp.where(settled & ~rolls, 1.0, aux[ON_RIM]))
        aux = aux.at[T_CONTACT].set(jnp.where(contact & (aux[T_CONTACT] < 0), t, aux[T_CONTACT]))
        aux = aux.at[T_ROLL].add(jnp.where(left, t - aux[T_ROLL_START], 0.0))
        aux = aux.at[T_ROLL_START].set(jnp.where(rolls, t, aux[T_ROLL_START]))
        terminal = flying & ((event == BELOW) | (event == FLOOR) | (settled & ~rolls))
        return t, y2, mode2, aux, terminal

    def initial_aux(self, y0, mode):
        return jnp.array([0.0, 0.0, 0.0, -1.0, 0.0, 0.0], dtype=jnp.result_type(y0))

    def outcome(self, sol):  # pyright: ignore[reportIncompatibleMethodOverride]  (called positionally)
        c = sol.y[..., :3]
        inside = jnp.sqrt(c[..., 0] ** 2 + c[..., 1] ** 2) < self.R
        through = (sol.status == Status.EVENT) & (sol.event == BELOW) & inside
        return jnp.select(
            [
                sol.failed,
                through,
                (sol.status == Status.EVENT) & ((sol.event == BELOW) | (sol.event == FLOOR)),
                sol.aux[..., ON_RIM] > 0,
            ],
            [ShotOutcome.FAILED, ShotOutcome.MADE, ShotOutcome.MISSED, ShotOutcome.ON_RIM],
            ShotOutcome.UNDECIDED,
        ).astype(jnp.int8)


def shot_summary(system: Shot, sol) -> dict:
    """Per-run quantities of a shot besides its outcome (:meth:`Shot.outcome`): rim and board
    contacts, swish (made without any contact), the time of the first contact (NaN: none), the
    time rolling on the rim and the end time."""
    outcome = system.outcome(sol)
    n_rim = sol.aux[..., N_RIM].astype(jnp.int32)
    n_board = sol.aux[..., N_BOARD].astype(jnp.int32)
    t_c = sol.aux[..., T_CONTACT]
    rolling_now = sol.mode == ROLLING
    t_rim = sol.aux[..., T_ROLL] + jnp.where(rolling_now, sol.t - sol.aux[..., T_ROLL_START], 0.0)
    return dict(
        rim_contacts=n_rim,
        board_contacts=n_board,
        swish=(outcome == ShotOutcome.MADE) & (n_rim == 0) & (n_board == 0),
        t_contact=jnp.where(t_c >= 0, t_c, jnp.nan),
        t_rim=t_rim,
        t_end=sol.t,
    )


shot_summary.units = {"t_contact": "s", "t_rim": "s", "t_end": "s", "swish": "1"}  # pyright: ignore[reportFunctionMemberAccess]
shot_summary.long_names = {  # pyright: ignore[reportFunctionMemberAccess]
    "rim_contacts": "impacts on the rim",
    "board_contacts": "impacts on the board",
    "swish": "made without touching the rim or the board",
    "t_contact": "time of the first impact (NaN: none)",
    "t_rim": "time rolling on the rim",
    "t_end": "time at the end of the run",
}
