"""The basketball shot as a hybrid system: flight, rim and board impacts, rolling and slipping
on the rim, in or out.

The ball flies (:mod:`rollax.models.shot`: gravity, drag, Magnus lift) from its release until

* it touches the rim (the torus) or the board (the rectangle) — crossing events on the exact
  distances, downwards: the impact map of :func:`rollax.models.shot.impact` (restitution and
  friction with stick and slip) acts on the velocity and the spin and the flight goes on;
* a rim impact leaves the ball slower than ``v_roll`` along the normal, pressed on the rim
  (normal force (41) > 0): the ball stays on the rim, in the rim paper's model with friction
  ``mu_rim`` (Sect. 5.2, :mod:`rollax.models.slip`, as :class:`rollax.systems.RimSlipping`).
  The 3-D state maps to the rim's by eqs. (1)-(4) and (17): ``(beta, omega1, omega2, omega3,
  u1, u3)``, the spin's components on n1, n2, n3 and the contact point's velocity on n1, n3, in
  the first six components and the angle ``alpha`` around the rim (19) in the seventh; the
  normal velocity left (below ``v_roll``) is dropped. If the contact point is at rest (slower
  than ``delta``: the impact stuck) the ball **rolls** (33)-(36), else it **slips** (42).
  Rolling turns to slipping where the no-slip margin (39) reaches zero, slipping back to
  rolling where the slip stops (mode ``leaving``: the slip near u = 0 on its slow manifold),
  with :func:`rollax.models.slip.transition`. The ball leaves the rim where the normal force F2
  ((31) rolling, (41) slipping) reaches zero, and flies from the centre (12) with the velocity
  (13) of :func:`rollax.models.slip.rolling_equivalent` and the spin (16), or where it meets
  the board (the board's impact on that flight state);
* its centre passes down through the plane ``r + a`` below the rim plane, below which it can no
  longer touch the rim: **made** if it is then within the rim's core circle (it went through the
  hoop), else **missed**; or it reaches the floor: **missed**;
* the final time comes first: **on_rim** if the ball is then on the rim, else **undecided**;
  roll/slip switching cut off as chattering (more than ``max_switches`` switches, or
  ``max_short`` consecutive phases shorter than ``min_dwell``, as ``RimSlipping``), a ball on
  the rim that meets the board slower than ``v_roll`` (wedged between the two: a two-contact
  state not modelled, where the model would otherwise bounce between them in ever shorter
  flights) or a failed solve while slipping: **on_rim** (``aux[STUCK]`` says which: 1
  chattering, 2 wedged); another failed solve: **failed**.

The auxiliary record counts the rim and board impacts, keeps the time of the first contact
(``-1``: none), the time on the rim and the time slipping there, and the switch bookkeeping; a
made shot with no contact is a swish (:func:`shot_summary`).
"""

from __future__ import annotations

import enum
import math
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jax.core import Tracer

from rollax._core._solution import Status
from rollax._core._system import AbstractSystem, boundary, crossing, parameter
from rollax._core.fastmath import sincos
from rollax.models import rim as _rim
from rollax.models import shot as _shot
from rollax.models import slip as _slip

RIM, BOARD, BELOW, FLOOR, SEPARATION, SLIP_ONSET, STICK, LAYER_EXIT = range(8)
# the rim model's events (rollax.models.slip.HYBRID_EVENTS) of the shot's rim events
_SLIP_EVENT = {SEPARATION: _slip.FALL, SLIP_ONSET: _slip.SLIP_ONSET, STICK: _slip.STICK}
_SLIP_EVENT[LAYER_EXIT] = _slip.LAYER_EXIT
(N_RIM, N_BOARD, STUCK, T_CONTACT, T_RIM, T_RIM_START, T_SLIP, T_PHASE, SWITCHES, SHORT,
 T_SWITCH) = range(11)  # fmt: skip
# the shot's modes; a rim mode is the rim model's mode + 1
FLIGHT, ROLLING, SLIPPING, LEAVING = 0, 1, 2, 3
ALPHA = 6  # the angle around the rim in a rim mode's state
# aux[STUCK]: why a run ended on the rim before the final time (SETTLED: rim_modes=False, a
# rim impact that would keep the ball on the rim, not followed)
CHATTERED, WEDGED, SETTLED = 1.0, 2.0, 3.0
MU_CAP = 1e6  # mu_rim = inf (every impact sticks) is this in the rim model's arithmetic

# The contact parameters' defaults and declared ranges (docs/guide/shot.md, "Contact
# parameters", derives them; rollax.parameter_ranges(Shot()) reads them):
# * the ball on a rigid floor: the NCAA rule (men's ball) drops it from 72 in (1.83 m) and
#   requires a rebound to 49-54 in (1.24-1.37 m): e_ball = sqrt(h'/h) = 0.825-0.866;
# * the rim: the FIBA and NCAA equipment rules require the ring's support to absorb 35-50 % of
#   the impact energy, so e_rim = e_ball sqrt(1 - absorbed) = 0.825 sqrt(0.5) .. 0.866
#   sqrt(0.65) = 0.583-0.698; the default is the middle, e_ball 0.845 with 42.5 % absorbed;
# * the board: a glass board absorbs little (an assumption, stated): the ball's own band;
# * friction (ball on steel, on glass): no rule bounds it; 0.1-0.6 is assumed, to identify
#   from filmed bounces (rollax identify shot); the drag coefficient: about 0.5 (Okubo &
#   Hubbard 2006), 0.4-0.6 assumed.
E_BALL_RANGE = (math.sqrt(49 / 72), math.sqrt(54 / 72))
ABSORBED_RANGE = (0.35, 0.50)
E_RIM_RANGE = (
    E_BALL_RANGE[0] * math.sqrt(1 - ABSORBED_RANGE[1]),
    E_BALL_RANGE[1] * math.sqrt(1 - ABSORBED_RANGE[0]),
)
E_BALL = 0.5 * (E_BALL_RANGE[0] + E_BALL_RANGE[1])
E_RIM = round(E_BALL * math.sqrt(1 - 0.5 * sum(ABSORBED_RANGE)), 3)  # 0.641
E_BOARD = round(E_BALL, 3)  # 0.845
MU_RANGE = (0.1, 0.6)
MU_RIM = MU_BOARD = 0.3
C_D_RANGE = (0.4, 0.6)


class ShotOutcome(enum.IntEnum):
    MADE = 0  # through the hoop
    MISSED = 1  # below the rim plane outside the hoop, or the floor
    ON_RIM = 2  # on the rim at the final time, or stuck there (chattering, wedged at the board)
    UNDECIDED = 3  # still flying at the final time
    FAILED = 4  # the solve failed


class Shot(AbstractSystem):
    """The shot from release to in or out (module docstring; geometry and coefficients in
    :mod:`rollax.models.shot`, SI units). Every parameter may be swept or batched.

    ``e_rim``, ``mu_rim``, ``e_board``, ``mu_board`` and ``c_d`` declare their ranges
    (:func:`rollax.parameter_ranges`): the restitutions from the NCAA ball rebound and the
    FIBA/NCAA rim absorption, friction and drag assumed (docs/guide/shot.md, "Contact
    parameters"). ``rim_modes=False``: flight and impacts only, for filmed bounces (a rim
    impact that would keep the ball on the rim ends the run, ``aux[STUCK] = SETTLED``).

    ``delta``, ``u_layer``, ``tau_stick``, ``dir_tol``, ``min_dwell``, ``max_switches`` and
    ``max_short`` are the rim model's transition settings
    (:class:`rollax.models.slip.SlipSettings`, with its defaults but ``max_switches``)."""

    r: float = parameter(_shot.BALL_RADIUS, units="m")
    m: float = parameter(_shot.BALL_MASS, units="kg")
    j: float = parameter(_shot.BALL_J, units="1")  # I = j m r^2
    g: float = parameter(_shot.GRAVITY, units="m/s^2")
    rho_air: float = parameter(_shot.AIR_DENSITY, units="kg/m^3")  # 0: vacuum
    c_d: float = parameter(
        _shot.DRAG_COEFFICIENT,
        units="1",
        uncertain=C_D_RANGE,
        source="assumed (Okubo & Hubbard 2006: about 0.5)",
    )
    c_m: float = parameter(_shot.MAGNUS_COEFFICIENT, units="1")
    rim_inner_radius: float = parameter(_shot.RIM_INNER_RADIUS, units="m")
    a: float = parameter(_shot.RIM_TUBE_RADIUS, units="m")
    rim_height: float = parameter(_shot.RIM_HEIGHT, units="m")
    board_offset: float = parameter(_shot.BOARD_OFFSET, units="m")  # behind the rim's inner edge
    board_width: float = parameter(_shot.BOARD_WIDTH, units="m")
    board_height: float = parameter(_shot.BOARD_HEIGHT, units="m")
    board_below_rim: float = parameter(_shot.BOARD_BELOW_RIM, units="m")
    e_rim: float = parameter(
        E_RIM,
        units="1",
        uncertain=E_RIM_RANGE,
        source="NCAA ball rebound x FIBA/NCAA rim absorption",
    )
    mu_rim: float = parameter(  # inf: every impact sticks
        MU_RIM, finite=False, units="1", uncertain=MU_RANGE, source="assumed (no rule bounds it)"
    )
    e_board: float = parameter(
        E_BOARD, units="1", uncertain=E_BALL_RANGE, source="NCAA ball rebound, rigid board"
    )
    mu_board: float = parameter(
        MU_BOARD, units="1", uncertain=MU_RANGE, source="assumed (no rule bounds it)"
    )
    v_roll: float = parameter(0.05, units="m/s")  # a rim impact leaving slower: on the rim
    delta: float = parameter(1e-6, units="m/s")
    u_layer: float = parameter(1e-3, units="m/s")
    tau_stick: float = parameter(1e-5, units="s")
    dir_tol: float = parameter(1e-2, units="1")
    min_dwell: float = parameter(1e-7, units="s")
    # a shot's stay on the rim is short: 64 switches (3 resets each) keep a run within
    # rollax.solve's default 1000 resets
    max_switches: int = eqx.field(static=True, default=64)
    max_short: int = eqx.field(static=True, default=4)
    # False: flight and impacts only (a filmed bounce); a rim impact that would keep the ball on
    # the rim ends the run there (aux[STUCK] = SETTLED). The rim modes' rolling and slipping
    # make a forward-mode Jacobian of a bounce compile 7.5x longer (81.9 s against 10.9 s) and
    # run 4.4x longer (3.08 against 0.70 ms: benchmarks/bench_bounce_fit.py, RESULTS.md stop 62)
    rim_modes: bool = eqx.field(static=True, default=True)

    state_names = ("x", "y", "z", "v_x", "v_y", "v_z", "omega_x", "omega_y", "omega_z")
    state_units = ("m", "m", "m", "m/s", "m/s", "m/s", "rad/s", "rad/s", "rad/s")
    events = (
        crossing("rim", target=1, direction=-1),
        crossing("board", target=1, direction=-1),
        crossing("below", target=1, direction=-1),
        crossing("floor", target=1, direction=-1),
        boundary("separation"),  # on the rim: valid while F2 > 0
        boundary("slip_onset"),  # rolling: valid while the margin (39) > 0
        boundary("stick"),  # slipping: the slip is about to stop; leaving: w > 0
        boundary("layer_exit"),  # leaving: w < u_layer
    )
    modes = ("flight", "rolling", "slipping", "leaving")
    n_aux = 11
    aux_names = ("rim_impacts", "board_impacts", "stuck", "t_contact", "t_rim", "t_rim_start",
                 "t_slip", "t_phase", "switches", "short_phases", "t_switch")  # fmt: skip
    aux_units = ("1", "1", "1", "s", "s", "s", "s", "s", "1", "1", "s")
    outcomes = ShotOutcome
    # a vacuum flight is a parabola, which DOPRI5 steps in a few long steps (4 for a free
    # throw), and 8 samples of such a step stepped over a rim graze; 0.01 s is 7 cm of flight
    # at 7 m/s between steps, under 1 cm between samples
    dt_max = 0.01

    def __check_init__(self):
        def shown(v):
            return repr(float(v)) if jnp.ndim(v) == 0 else repr(v)

        def check(names, ok, allowed):
            for name in names:
                v = getattr(self, name)
                if isinstance(v, Tracer):
                    continue
                try:
                    x = jnp.asarray(v, dtype=float)
                except (TypeError, ValueError):
                    raise ValueError(
                        f"{name} = {v!r} is not allowed: it must be a number"
                    ) from None
                if not jnp.all(ok(x)):
                    raise ValueError(f"{name} = {shown(v)} is not allowed: it must be {allowed}")

        positive = ("r", "m", "j", "g", "a", "rim_inner_radius", "rim_height")
        check(positive + ("board_width", "board_height"), lambda v: v > 0, "> 0")
        check(("board_below_rim", "c_m"), jnp.isfinite, "finite")
        check(("e_rim", "e_board"), lambda v: (v >= 0) & (v <= 1), "in [0, 1]")
        check(("mu_rim", "mu_board", "rho_air", "c_d", "v_roll"), lambda v: v >= 0, ">= 0")
        check(("delta", "u_layer", "tau_stick", "min_dwell"), lambda v: v > 0, "> 0")
        check(("dir_tol",), lambda v: (v > 0) & (v < 1), "in (0, 1)")
        if not any(isinstance(v, Tracer) for v in (self.delta, self.u_layer)) and not jnp.all(
            jnp.asarray(self.delta) < jnp.asarray(self.u_layer)
        ):
            raise ValueError(
                f"delta = {shown(self.delta)} is not allowed: it must be < u_layer "
                f"({shown(self.u_layer)})"
            )
        # the board's face behind the rim's outer edge (2 a behind its inner edge)
        if not any(isinstance(v, Tracer) for v in (self.board_offset, self.a)) and not jnp.all(
            jnp.asarray(self.board_offset) > 2 * jnp.asarray(self.a)
        ):
            raise ValueError(
                f"board_offset = {shown(self.board_offset)} is not allowed: it must be > 2 a = "
                f"{shown(2 * jnp.asarray(self.a))} (the board's face behind the rim's outer edge)"
            )
        if not isinstance(self.rim_modes, bool):
            raise ValueError(
                f"rim_modes = {self.rim_modes!r} is not allowed: it must be True or False"
            )
        for name, lo in (("max_switches", 1), ("max_short", 2)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} = {v!r} is not allowed: it must be an integer >= {lo}")

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
        """The rim model of the rim modes, with this shot's ball, rim and ``mu_rim`` (``inf``
        as ``MU_CAP``) and no rolling dissipation."""
        mu: Any = jnp.minimum(self.mu_rim, MU_CAP)
        return _rim.Rim(r=self.r, a=self.a, R=self.R, j=self.j, g=self.g, mu=mu)

    def vector_field(self, t, y, mode):
        v, omega = y[3:6], y[6:9]
        acc = _shot.acceleration(v, omega, self.r, self.m, self.g, self.rho_air, self.c_d, self.c_m)
        flying = jnp.concatenate([v, acc, jnp.zeros_like(omega)])
        if not self.rim_modes:
            return flying
        f6, alpha_dot = _slip._hybrid_rhs_and_alpha_rate(y[:6], jnp.maximum(mode - 1, 0), self.rim)
        on_rim = jnp.concatenate([f6, alpha_dot[None], jnp.zeros_like(y[7:])])
        return jnp.where(mode == FLIGHT, flying, on_rim)

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
                one,
                one,
                one,
            ]
        )
        if not self.rim_modes:
            return flying
        # F2 per unit mass, the margin (39), stick and layer exit of the rim model; a ball on
        # the rim (rolling over its back, say) meets the board
        f2, margin, stick, _, exit_ = _slip._hybrid_event_values(
            y[:6], jnp.maximum(mode - 1, 0), self.rim, self.tau_stick, self.dir_tol, self.u_layer
        )
        board = _shot.board_gap(self._centre_on_rim(y[0], y[ALPHA]), x_b, w, z_lo, z_hi, self.r)
        # (mu_rim = inf: rolling never turns to slipping; the model's MU_CAP would let the
        # margin reach zero a hair before F2 does)
        margin = jnp.where(jnp.isinf(self.mu_rim), one, margin)
        on_rim = jnp.stack([one, board, one, one, f2, margin, stick, exit_])
        return jnp.where(mode == FLIGHT, flying, on_rim)

    def to_rim(self, y):
        """The rim state ``(beta, omega1, omega2, omega3, u1, u3, alpha)`` of a 3-D state
        touching the rim (eqs. (1)-(4): alpha and beta from the centre, the spin's components
        on n1, n2, n3, and the contact point's velocity (17) on n1, n3)."""
        c, v, omega = y[:3], y[3:6], y[6:9]
        rho_h = jnp.sqrt(c[0] ** 2 + c[1] ** 2)
        alpha = jnp.arctan2(c[0], -c[1])  # the outward horizontal is (sin a, -cos a, 0)
        beta = jnp.arctan2(c[2], self.R - rho_h)
        n1, n2, n3 = _rim._n1(alpha), _rim._n2(alpha, beta), _rim._n3(alpha, beta)
        u = v - self.r * jnp.cross(omega, n2)  # the contact point P = G - r n2
        return jnp.stack([beta, omega @ n1, omega @ n2, omega @ n3, u @ n1, u @ n3, alpha])

    def to_flight(self, z):
        """The 3-D state of a rim state ``z = (beta, omega1, omega2, omega3, u1, u3, alpha)``:
        the centre (12), its velocity (13) with (19)-(20) (that of
        :func:`rollax.models.slip.rolling_equivalent`) and the spin (16)."""
        rim, alpha = self.rim, z[ALPHA]
        beta = z[0]
        n1, n2, n3 = _rim._n1(alpha), _rim._n2(alpha, beta), _rim._n3(alpha, beta)
        omega = z[1] * n1 + z[2] * n2 + z[3] * n3
        x_eq = _slip.rolling_equivalent(rim, z[:6])
        return jnp.concatenate([rim.centre(z[:4], alpha), rim.centre_velocity(x_eq, alpha), omega])

    def _centre_on_rim(self, beta, alpha):
        """The centre (12) of a ball on the rim, ``((R - rho cos b) sin a, -(R - rho cos b)
        cos a, rho sin b)``: :meth:`rollax.models.rim.Rim.centre` with one fast sin/cos pair per
        angle. (It is in every event sample of every lane: the eight jnp.sin/cos of
        ``Rim.centre`` made the shot map's step 2.3x dearer, benchmarks/RESULTS.md, stop 42.)"""
        sb, cb = sincos(beta)
        sa, ca = sincos(alpha)
        rho = self.rim.rho
        D = self.R - rho * cb
        return jnp.stack([D * sa, -D * ca, rho * sb])

    def flight_state(self, y, mode):
        """The 3-D state (centre, velocity, spin) of a state ``y`` in any mode: ``y`` itself in
        flight, :meth:`to_flight` of its physical rim state on the rim (a run that ends on the
        rim, ``on_rim``, ends in a rim mode's state)."""
        y6 = _slip.physical_state(y[:6], jnp.maximum(mode - 1, 0), self.rim)
        on_rim = self.to_flight(jnp.concatenate([y6, y[ALPHA : ALPHA + 1]]))
        return jnp.where(mode == FLIGHT, y, on_rim)

    def _alpha_rate(self, y6):
        """alpha-dot (19) of a physical rim state ``(x, u1, u3)``."""
        return (y6[4] - self.r * y6[3]) / (self.R - self.rim.rho * jnp.cos(y6[0]))

    def _flight_reset(self, t, y, mode, aux, event):
        """:meth:`reset` without the rim modes (``rim_modes=False``): impacts on the rim and
        the board, the end below the rim or on the floor, and a rim impact that would keep the
        ball on the rim (slower than ``v_roll`` along the normal) ends the run there."""
        c, v, omega = y[:3], y[3:6], y[6:9]
        x_b, w, z_lo, z_hi = self._board()
        on_board = event == BOARD
        on_rim = event == RIM
        n = jnp.where(
            on_board, _shot.board_normal(c, x_b, w, z_lo, z_hi), _shot.rim_normal(c, self.R)
        )
        e = jnp.where(on_board, self.e_board, self.e_rim)
        mu = jnp.where(on_board, self.mu_board, self.mu_rim)
        v2, omega2, _, _ = _shot.impact(v, omega, n, e, mu, self.r, self.j)
        settled = on_rim & (jnp.dot(v2, n) < self.v_roll)
        counts = -jnp.dot(v, n) >= self.delta
        aux = aux.at[N_RIM].add(jnp.where(on_rim & counts, 1.0, 0.0))
        aux = aux.at[N_BOARD].add(jnp.where(on_board & counts, 1.0, 0.0))
        aux = aux.at[STUCK].set(jnp.where(settled, SETTLED, aux[STUCK]))
        first = (on_rim | on_board) & counts & (aux[T_CONTACT] < 0)
        aux = aux.at[T_CONTACT].set(jnp.where(first, t, aux[T_CONTACT]))
        y2 = jnp.where(on_rim | on_board, jnp.concatenate([c, v2, omega2]), y)
        terminal = (event == BELOW) | (event == FLOOR) | settled
        return t, y2, mode, aux, terminal

    def reset(self, t, y, mode, aux, event):
        if not self.rim_modes:
            return self._flight_reset(t, y, mode, aux, event)
        rim = self.rim
        flying = mode == FLIGHT
        on_rim_now = ~flying
        rim_mode = jnp.maximum(mode - 1, 0)
        # the physical rim state (the layer's slip made explicit), and the 3-D state of any mode
        y6 = _slip.physical_state(y[:6], rim_mode, rim)
        y_pre = self.flight_state(y, mode)
        # a ball on the rim leaves it at the separation, or where it meets the board (then the
        # board's impact acts on its flight state)
        separated = on_rim_now & (event == SEPARATION)
        left = separated | (on_rim_now & (event == BOARD))
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
        # the rim holds the ball if it leaves slower than v_roll along the normal and is
        # pressed on the rim (F2 (41) > 0; else it flies on: just after a separation the flight
        # may touch the rim again within rounding, with no speed to lose)
        z = self.to_rim(y_impact)
        held = _slip.slip_normal_force(rim, z[:6]) > 0
        settled = on_rim & (jnp.dot(v2, n) < self.v_roll) & held
        # it rolls if the impact stuck (the contact point at rest), else slips
        sticks = jnp.hypot(z[4], z[5]) < self.delta
        z = jnp.where(sticks, z.at[4:6].set(0.0), z)
        land_mode = jnp.where(sticks, ROLLING, SLIPPING)
        # the rim model's transitions (slip onset, stick, the layer), moving alpha with them
        switch_ev = on_rim_now & ((event == SLIP_ONSET) | (event == STICK) | (event == LAYER_EXIT))
        slip_event = jnp.select(
            [event == k for k in _SLIP_EVENT], list(_SLIP_EVENT.values()), _slip.FALL
        )
        mode_s, y6_s, dt, switched, _ = _slip.transition(
            rim, rim_mode, slip_event, y[:6], self.delta, self.u_layer
        )
        switched = switch_ev & switched
        # (dt > 0 only for a slip extrapolated to rolling, trapezoidal as the state's)
        alpha_s = y[ALPHA] + dt * 0.5 * (self._alpha_rate(y6) + self._alpha_rate(y6_s))
        y_switch = jnp.concatenate([y6_s, alpha_s[None], jnp.zeros_like(y[7:])])
        # chattering: too many switches, or too many short phases in a row (as RimSlipping)
        sw = aux[SWITCHES] + switched
        short = jnp.where(
            switched, jnp.where(t - aux[T_SWITCH] < self.min_dwell, aux[SHORT] + 1, 0), aux[SHORT]
        )
        chatter = switched & ((sw > self.max_switches) | (short >= self.max_short))
        t_new = jnp.where(switch_ev & ~chatter, t + dt, t)
        # a ball on the rim that meets the board slower than v_roll rests against both: wedged
        # between the rim and the board (a two-contact state this model does not follow; it
        # ends the run on the rim, where the alternative is a Zeno sequence of ever smaller
        # bounces between the two)
        wedged = on_rim_now & on_board & (jnp.abs(jnp.dot(v, n)) < self.v_roll)
        chatter = chatter | wedged
        left = left & ~wedged

        y_land = jnp.concatenate([z, jnp.zeros_like(y[7:])])
        y2 = jnp.select(
            [chatter, switch_ev, settled, contact, separated],
            [y, y_switch, y_land, y_impact, y_pre],
            y,
        )
        mode2 = jnp.select(
            [chatter, switch_ev, settled, left],
            [mode, mode_s + 1, land_mode, FLIGHT],
            mode,
        ).astype(mode.dtype)
        slipping_now = on_rim_now & (mode != ROLLING)
        # a contact counts if the ball comes in faster than delta: right after a separation the
        # flight may graze the rim again within rounding (an impulse of ~1e-9 m/s), no impact
        counts = -jnp.dot(v, n) >= self.delta
        aux = aux.at[N_RIM].add(jnp.where(on_rim & counts, 1.0, 0.0))
        aux = aux.at[N_BOARD].add(jnp.where(on_board & counts, 1.0, 0.0))
        stuck = jnp.where(wedged, WEDGED, jnp.where(chatter, CHATTERED, aux[STUCK]))
        aux = aux.at[STUCK].set(stuck)
        first = contact & counts & (aux[T_CONTACT] < 0)
        aux = aux.at[T_CONTACT].set(jnp.where(first, t, aux[T_CONTACT]))
        aux = aux.at[T_RIM].add(jnp.where(left, t - aux[T_RIM_START], 0.0))
        aux = aux.at[T_RIM_START].set(jnp.where(settled, t, aux[T_RIM_START]))
        aux = aux.at[T_SLIP].add(jnp.where(slipping_now, t_new - aux[T_PHASE], 0.0))
        aux = aux.at[T_PHASE].set(t_new)
        aux = aux.at[SWITCHES].set(sw)
        aux = aux.at[SHORT].set(short)
        aux = aux.at[T_SWITCH].set(jnp.where(switched, t, aux[T_SWITCH]))
        terminal = (flying & ((event == BELOW) | (event == FLOOR))) | chatter
        return t_new, y2, mode2, aux, terminal

    # ------------------------------------------------------------- a filmed bounce
    def camera(self, t, y):
        """The ball centre ``(x, y, z)`` (m, the hoop's frame) of a flight state: what a camera
        films of a bounce (:func:`rollax.analysis.identification.fit_bounce`)."""
        return y[:3]

    def camera_spin(self, t, y):
        """The centre and the spin ``(x, y, z, omega_x, omega_y, omega_z)`` of a flight state:
        a filmed bounce of a marked ball, whose spin is read off the film too."""
        return jnp.concatenate([y[:3], y[6:9]])

    def guess_state(self, observations):
        """The flight state at the first sample of a filmed bounce, and candidates: the
        centre and velocity of a least-squares parabola (gravity ``g`` known, drag neglected)
        through the samples before the bounce, the spin as filmed (its mean before the
        bounce) or, unfilmed, 0 with candidates of +-10 and +-25 rad/s of backspin and
        sidespin. The bounce is the split of the record into two such parabolas with the
        least squared residual (:func:`bounce_split`)."""
        import numpy as np

        t = np.asarray(observations.t, float)
        v = np.asarray(observations.values, float)
        k = bounce_split(t, v[:, :3], float(self.g))
        c0, v0 = _parabola(t[:k] - t[0], v[:k, :3], float(self.g))[:2]
        if v.shape[1] >= 6:
            w0 = v[:k, 3:6].mean(axis=0)
            return np.concatenate([c0, v0, w0]), None
        y0 = np.concatenate([c0, v0, np.zeros(3)])
        # the horizontal axis across the flight (backspin) and the vertical (sidespin)
        h = np.array([v0[1], -v0[0], 0.0]) / max(float(np.hypot(v0[0], v0[1])), 1e-9)
        cands = [y0]
        for axis in (h, np.array([0.0, 0.0, 1.0])):
            for w in (-25.0, -10.0, 10.0, 25.0):
                cands.append(np.concatenate([c0, v0, w * axis]))
        return y0, np.array(cands)

    def initial_aux(self, y0, mode):
        aux = jnp.zeros(self.n_aux, dtype=jnp.result_type(y0))
        return aux.at[T_CONTACT].set(-1.0)

    def outcome(self, sol):  # pyright: ignore[reportIncompatibleMethodOverride]  (called positionally)
        c = sol.y[..., :3]
        inside = jnp.sqrt(c[..., 0] ** 2 + c[..., 1] ** 2) < self.R
        ended = sol.status == Status.EVENT
        flying = sol.mode == FLIGHT
        through = ended & flying & (sol.event == BELOW) & inside
        slipping = (sol.mode == SLIPPING) | (sol.mode == LEAVING)
        return jnp.select(
            [
                sol.aux[..., STUCK] > 0,
                sol.failed & slipping,
                sol.failed,
                through,
                ended & flying & ((sol.event == BELOW) | (sol.event == FLOOR)),
                ~flying,
            ],
            [
                ShotOutcome.ON_RIM,
                ShotOutcome.ON_RIM,
                ShotOutcome.FAILED,
                ShotOutcome.MADE,
                ShotOutcome.MISSED,
                ShotOutcome.ON_RIM,
            ],
            ShotOutcome.UNDECIDED,
        ).astype(jnp.int8)


def _parabola(t, c, g):
    """Centre, velocity and the squared residual of the least-squares flight ``c0 + v0 t - g t^2
    / 2 e_z`` through the centres ``c`` (n, 3) at the times ``t`` (from the first)."""
    import numpy as np

    c = np.array(c, float)
    c[:, 2] += 0.5 * g * t**2
    A = np.stack([np.ones_like(t), t], 1)
    coef, *_ = np.linalg.lstsq(A, c, rcond=None)
    res = c - A @ coef
    return coef[0], coef[1], float(np.sum(res**2))


def bounce_split(t, c, g: float = _shot.GRAVITY) -> int:
    """The index of the first sample after a filmed bounce: the split of the centres ``c``
    (n, 3) at the times ``t`` into two flights (parabolas under gravity ``g``, at least 4
    samples each) with the least total squared residual. A record without a bounce is split
    somewhere too: :func:`rollax.analysis.identification.fit_bounce` checks that the split
    is one (the velocities either side differ by more than their noise)."""
    import numpy as np

    t = np.asarray(t, float)
    n = t.shape[0]
    if n < 8:
        raise ValueError(f"a bounce record needs at least 8 samples (4 either side), got {n}")
    best, k_best = np.inf, n // 2
    for k in range(4, n - 3):
        cost = _parabola(t[:k] - t[0], c[:k], g)[2] + _parabola(t[k:] - t[k], c[k:], g)[2]
        if cost < best:
            best, k_best = cost, k
    return k_best


def shot_summary(system: Shot, sol) -> dict:
    """Per-run quantities of a shot besides its outcome (:meth:`Shot.outcome`): rim and board
    contacts, swish (made without any contact), the time of the first contact (NaN: none), the
    time on the rim (rolling or slipping), the time slipping there and the end time."""
    outcome = system.outcome(sol)
    n_rim = sol.aux[..., N_RIM].astype(jnp.int32)
    n_board = sol.aux[..., N_BOARD].astype(jnp.int32)
    t_c = sol.aux[..., T_CONTACT]
    on_rim = sol.mode != FLIGHT
    t_rim = sol.aux[..., T_RIM] + jnp.where(on_rim, sol.t - sol.aux[..., T_RIM_START], 0.0)
    slipping = (sol.mode == SLIPPING) | (sol.mode == LEAVING)
    t_slip = sol.aux[..., T_SLIP] + jnp.where(slipping, sol.t - sol.aux[..., T_PHASE], 0.0)
    return dict(
        rim_contacts=n_rim,
        board_contacts=n_board,
        swish=(outcome == ShotOutcome.MADE) & (n_rim == 0) & (n_board == 0),
        t_contact=jnp.where(t_c >= 0, t_c, jnp.nan),
        t_rim=t_rim,
        t_slip=t_slip,
        t_end=sol.t,
    )


shot_summary.units = {"t_contact": "s", "t_rim": "s", "t_slip": "s", "t_end": "s", "swish": "1"}  # pyright: ignore[reportFunctionMemberAccess]
shot_summary.long_names = {  # pyright: ignore[reportFunctionMemberAccess]
    "rim_contacts": "impacts on the rim",
    "board_contacts": "impacts on the board",
    "swish": "made without touching the rim or the board",
    "t_contact": "time of the first impact (NaN: none)",
    "t_rim": "time on the rim, rolling or slipping",
    "t_slip": "time slipping on the rim",
    "t_end": "time at the end of the run",
}
