"""The ball on the rim with finite friction: slipping, and rolling <-> slipping transitions.

Equations follow Sects. 2.5 and 5.2 of *Basketball rolling on the rim*
([rim paper], ``docs/references.md``); the theory of limit directions is Sect. 7.2 of the
[friction paper]. The slipping state is the 6-D

    y = (beta, w1, w2, w3, u1, u3)                                            (44)

(the paper prints ``u2`` for the last entry; it means ``u3``, ``docs/physics-notes.md``), where ``(u1, u3)`` is
the velocity of the contact point (17). Rolling is the 4-D subspace ``u1 = u3 = 0``, a
codimension-2 discontinuity of the slipping vector field (42).

Near that set the slip speed ``u`` and direction ``phi`` (77) obey the directional limits
(75)-(79): ``u-dot* = B1 cos(phi) + B3 sin(phi) - C`` with the two limit directions (81),
``phi_1 = atan2(B3, B1)`` (``u-dot* = |B| - C``) and ``phi_2 = phi_1 + pi``
(``u-dot* = -|B| - C``, always attracting while ``F2 > 0``). Since ``|B| = (1+j)/(j m) |F_t|``
and ``C = (1+j)/(j m) mu F2`` with the rolling forces (30)-(32), ``phi_1`` is repelling exactly
when the no-slip condition (39) fails. On the circle of directions ``phi_1`` is a stable node
(``u phi-dot* = |B| sin(phi_1 - phi)``), so a slipping ball that comes back to rolling does so
along ``phi_1``, in finite time, with ``u`` falling linearly.

The hybrid simulation follows the algorithm of Sect. 5.2.2, with three modes (``ROLLING``,
``SLIPPING`` and ``LEAVING``, a slip near u = 0 on its slow manifold):

* **rolling -> slipping** when the margin (39) reaches zero (a boundary event): the state leaves
  the discontinuity along the repelling ``phi_1`` with the slip speed ``delta``. Near u = 0 the
  full field (42) is stiff (the direction relaxes to ``phi_1`` at the rate ``|B|/u``, so an
  explicit integrator needs ~``|B| / sqrt(delta a)`` steps to leave, ~1700 for delta = 1e-6 and
  ~15000 for 1e-8). Up to ``u_layer`` (1e-3 m/s) the slip is therefore followed on its
  first-order slow manifold, ``phi = phi_1 + u theta_1`` (:func:`layer_direction`,
  :func:`layer_vector_field`, mode ``LEAVING``), where it is not stiff, and then by (42).
  Against (42) integrated from delta = 1e-8 at tolerance 1e-12 this is accurate to ~3e-7 in the
  state after 0.02 s, better than launching (42) itself with delta = 1e-6 (~5e-6), and takes
  ~70 steps instead of ~1700 (``tests/models/test_slip.py``);
* **slipping -> rolling** when the slip is 'about to stick' (a boundary event,
  :func:`stick_function`): the direction has converged to a limit direction and the time to
  u = 0 extrapolated from u and u-dot* is below ``tau_stick``; then time advances by that
  time, the rolling state by the trapezoidal rule (:func:`stick`), and rolling resumes with
  u = 0 exactly. Where the slow manifold of ``phi_1`` exists and the slip is on it (C < 1.5 |B|,
  where (42) is stiff) the slip hands over to the ``LEAVING`` layer at u = u_layer/2 instead,
  which integrates it to u = 0 exactly (:func:`arrival_value`);
* the ball separates when ``F2`` ((31) rolling, (41) slipping) reaches zero, and flies 'in' or
  'out' as in :mod:`rollax.analysis.basin` (from :func:`rolling_equivalent`); two transversal zeros of
  ``w1`` within one rolling phase mean periodic rolling (Proposition 4; the margin (39) is
  symmetric under the time reversal (61), so the whole periodic orbit is realisable);
* repeated switching is cut off: more than ``max_switches`` roll/slip switches, or
  ``max_short`` consecutive switches less than ``min_dwell`` apart (Zeno-like chattering), or a
  slip that runs out of steps without converging (a failed solve while slipping) end the run
  with the outcome ``CHATTERING``.

This module is the model: the fields, events and transition maps. The hybrid system built
from them is :class:`rollax.systems.RimSlipping` (its reset map is :func:`transition` with the
switch bookkeeping); it runs on both integrators (:func:`rollax.solve`,
:func:`rollax.solve_ensemble`), and :func:`rollax.analysis.slip.simulate_slip` and
``rollax.analysis.basin.simulate(..., slip=...)`` summarise its runs.

**The slip speed delta.** Leaving the discontinuity, ``u-dot = |B| - C + O(delta)``, and
``|B| - C`` grows linearly in time from zero at the event, so the ``O(delta)`` terms are
overtaken at once; the initial slip kinetic energy and the state error are O(delta). With the
layer, delta costs nothing (the layer is not stiff), so it can be far below the tolerance of
what matters: the default 1e-6 m/s is 1e-6 of the slip speeds that develop (~1 m/s) and three
orders above the absolute tolerance. ``experiments/rim_slip`` shows that delta = 1e-6 and
1e-8 m/s give identical outcomes on all 86,400 starts of each of Figs. 11-13 (switch counts
differ on 0, 8 and 0 starts: long roll/slip cycles), and ``tests/models/test_slip.py`` the same on a
sample.

Dissipation (82)-(83) is only defined for rolling in the paper; the hybrid refuses a
dissipative :class:`~rollax.models.rim.Rim`.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from rollax._core._validate import (
    check_integer,
    check_less,
    check_positive,
    check_range,
    check_shape,
    check_where_concrete,
)
from rollax.models.outcomes import CHATTERING, FAILED, IN, OUT, PERIODIC, UNDECIDED
from rollax._core.fastmath import sincos
from rollax._core.events import BOUNDARY, CROSSING, EventSet
from rollax.models.rim import Rim

SlipState = Float[Array, "6"]
RollState = Float[Array, "4"]

_Y = " = (beta, w1, w2, w3, u1, u3)"
_X = " = (beta, w1, w2, w3)"


def _slip_state(fn: str, y, name: str = "y"):
    """``y`` if it is one slipping state (shape (6,)), else a one-line ``ValueError``."""
    return check_shape(f"{fn}: {name}", y, (6,), _Y)


def _roll_state(fn: str, x, name: str = "x"):
    """``x`` if it is one rolling state (shape (4,)), else a one-line ``ValueError``."""
    return check_shape(f"{fn}: {name}", x, (4,), _X)


_TAU_DIR = 1e-8  # s: below this time to u = 0 the direction test of stick_function is waived


# ---------------------------------------------------------------------------------- slipping
def _speed(u1, u3):
    """Slip speed u of (77) and a safe divisor (1 where u = 0)."""
    u = jnp.hypot(u1, u3)
    return u, jnp.where(u > 0, u, 1.0)


def slip_normal_force(rim: Rim, y: SlipState) -> Float[Array, ""]:
    """Normal contact force F2 while slipping, eq. (41); equals (31) at u1 = u3 = 0."""
    _slip_state("slip_normal_force", y)
    beta, w1, w3, u1, u3 = y[0], y[1], y[3], y[4], y[5]
    s, c = sincos(beta)
    r, rho = rim.r, rim.rho
    return rim.m * (
        (u1 - r * w3) ** 2 * c / (rim.R - rho * c) - (u3 + r * w1) ** 2 / rho + rim.g * s
    )


def _newton_euler(rim: Rim, y: SlipState, F1, F3) -> SlipState:
    """dy/dt from the Newton-Euler equations (24)-(27) for a given friction force (F1, F3),
    the normal force being (41): eq. (42) with -mu F2 (u1, u3)/u replaced by (F1, F3).

    With the slipping friction (29) this is (20) + (42); with the rolling forces (30), (32) at
    u = 0 it is the rolling field (33)-(36) with u-dot = 0."""
    beta, w1, w2, w3, u1, u3 = y[0], y[1], y[2], y[3], y[4], y[5]
    r, j, g, rho, m = rim.r, rim.j, rim.g, rim.rho, rim.m
    s, c = sincos(beta)
    D = rim.R - rho * c
    da = (u1 - r * w3) / D  # (19)
    db = (u3 + r * w1) / rho  # (20)
    dw1 = da * (-w3 * s + w2 * c) - F3 / (m * r * j)
    dw2 = -da * w1 * c + db * w3
    dw3 = da * w1 * s - db * w2 + F1 / (m * r * j)
    du1 = -da * u3 * s - db * r * w2 + (1 + j) * F1 / (m * j)
    du3 = da * (-r * w2 * c + u1 * s) + (1 + j) * F3 / (m * j) - g * c
    return jnp.stack([db, dw1, dw2, dw3, du1, du3])


def _slip_rhs(rim: Rim, y: SlipState, c_phi, s_phi) -> SlipState:
    """(20) and (42) with the slip direction (cos phi, sin phi) given separately (so the
    directional limit u -> 0 is the same formula with u1 = u3 = 0)."""
    muF2 = rim.mu * slip_normal_force(rim, y)
    return _newton_euler(rim, y, -muF2 * c_phi, -muF2 * s_phi)


def slip_vector_field(rim: Rim, y: SlipState) -> SlipState:
    """Slipping equations of motion dy/dt = g(y), eqs. (20) and (42) with (41), (43)-(44).

    Not defined at u1 = u3 = 0 (the rolling set); there it returns the limit from phi = 0.
    """
    _slip_state("slip_vector_field", y)
    u, us = _speed(y[4], y[5])
    return _slip_rhs(rim, y, jnp.where(u > 0, y[4] / us, 1.0), y[5] / us)


def slip_energy(rim: Rim, y: SlipState) -> Float[Array, ""]:
    """Mechanical energy of the slipping ball (kinetic from (13), (16), (19)-(20); potential
    m g rho sin(beta), ``docs/physics-notes.md``). Its rate is the friction power -mu F2 u <= 0; at u = 0 it is
    :meth:`Rim.energy`."""
    _slip_state("slip_energy", y)
    beta, w1, w2, w3, u1, u3 = y[0], y[1], y[2], y[3], y[4], y[5]
    m, r = rim.m, rim.r
    return (
        0.5 * m * ((u1 - r * w3) ** 2 + (u3 + r * w1) ** 2)
        + 0.5 * m * rim.j * r**2 * (w1**2 + w2**2 + w3**2)
        + m * rim.g * rim.rho * jnp.sin(beta)
    )


def rolling_equivalent(rim: Rim, y: SlipState) -> RollState:
    """The rolling state with the same centre position and velocity as the slipping ``y``:
    ``(beta, w1 + u3/r, w2, w3 - u1/r)`` (from (13), (19)-(20)). The free flight after a
    separation depends on these only, so :meth:`Rim.flight` of it is the flight of ``y``."""
    _slip_state("rolling_equivalent", y)
    r = rim.r
    return jnp.stack([y[0], y[1] + y[5] / r, y[2], y[3] - y[4] / r])


# ---------------------------------------------------------------------- limit directions
def limit_coefficients(rim: Rim, x: RollState) -> Float[Array, "3"]:
    """(B1, B3, C) of eq. (76) at the rolling state ``x`` (C is mu (1+j)/j times F2/m of (31))."""
    _roll_state("limit_coefficients", x)
    beta, w1, w2, w3 = x[0], x[1], x[2], x[3]
    r, rho, g, j = rim.r, rim.rho, rim.g, rim.j
    s, c = sincos(beta)
    D = rim.R - rho * c
    B1 = -(r**2) * w1 * w2 / rho
    B3 = r**2 * w2 * w3 * c / D - g * c
    C = rim.mu * (1 + j) / j * (r**2 * w3**2 * c / D - r**2 * w1**2 / rho + g * s)
    return jnp.stack([B1, B3, C])


def limit_slip_acceleration(rim: Rim, x: RollState, phi) -> Float[Array, "2"]:
    """Directional limit (u1-dot*, u3-dot*) of (42) at ``x`` from the direction ``phi``, eq. (75)."""
    _roll_state("limit_slip_acceleration", x)
    B1, B3, C = limit_coefficients(rim, x)
    sp, cp = sincos(phi)
    return jnp.stack([B1 - C * cp, B3 - C * sp])


def limit_speed_rate(rim: Rim, x: RollState, phi) -> Float[Array, ""]:
    """u-dot*(x, phi) = B1 cos(phi) + B3 sin(phi) - C, eq. (79)."""
    _roll_state("limit_speed_rate", x)
    B1, B3, C = limit_coefficients(rim, x)
    sp, cp = sincos(phi)
    return B1 * cp + B3 * sp - C


def limit_vector_field(rim: Rim, x: RollState, phi) -> SlipState:
    """The whole directional limit g*(x, phi) of the slipping field at u = 0 (eq. (104) of the
    friction paper); its last two entries are (75)."""
    _roll_state("limit_vector_field", x)
    y = jnp.concatenate([x, jnp.zeros(2, x.dtype)])
    sp, cp = sincos(phi)
    return _slip_rhs(rim, y, cp, sp)


class LimitDirections(NamedTuple):
    """Limit directions (81) at a rolling state with their radial rates (79)."""

    phi1: Float[Array, ""]  # atan2(B3, B1)
    phi2: Float[Array, ""]  # phi1 + pi
    rate1: Float[Array, ""]  # u-dot*(phi1) = |B| - C
    rate2: Float[Array, ""]  # u-dot*(phi2) = -|B| - C
    attracting1: Bool[Array, ""]  # rate1 < 0 (Definition 2 of the friction paper)
    attracting2: Bool[Array, ""]  # rate2 < 0


def limit_directions(rim: Rim, x: RollState) -> LimitDirections:
    """The two limit directions phi_1, phi_2 of eq. (81) at ``x``, their slip rates u-dot* (79)
    and whether each is (radially) attracting, u-dot* < 0 (Definition 2 of the friction paper).

    phi_1 is repelling exactly when the no-slip condition (39) fails; phi_2 is attracting
    whenever F2 > 0. (When B = 0 every direction is a limit direction; then phi_1 = 0.)
    """
    _roll_state("limit_directions", x)
    B1, B3, C = limit_coefficients(rim, x)
    Bn = jnp.hypot(B1, B3)
    phi1 = jnp.arctan2(B3, B1)
    rate1, rate2 = Bn - C, -Bn - C
    return LimitDirections(phi1, phi1 + jnp.pi, rate1, rate2, rate1 < 0, rate2 < 0)


# ------------------------------------------------------------------- leaving layer
def layer_direction(rim: Rim, x: RollState, w) -> Float[Array, ""]:
    """Slip direction phi on the slow manifold of a slip that leaves the rolling set along
    phi_1, to first order in the slip speed ``w``: ``phi_1 + w theta_1`` (Sect. 7.2.4-7.2.7 of
    the friction paper).

    Near u = 0 the direction relaxes to phi_1 at the fast rate ``|B|/u`` (phi_1 is a stable node
    of the fast dynamics (115)). Balancing ``u phi-dot = |B| sin(phi_1 - phi) + u e_perp.M``
    (M = d(u-dot)/du at u = 0) against the motion of phi_1 itself gives
    ``theta_1 = (e_perp.M - phi_1-dot) / (|B| + u-dot*)`` with ``u-dot* = |B| - C`` (79).
    """
    _roll_state("layer_direction", x)
    B1, B3, C = limit_coefficients(rim, x)
    Bn = jnp.hypot(B1, B3)
    Bs = jnp.where(Bn > 0, Bn, 1.0)
    e1, e3 = jnp.where(Bn > 0, B1 / Bs, 1.0), B3 / Bs
    phi1 = jnp.arctan2(B3, B1)
    beta, w2, w3 = x[0], x[2], x[3]
    r, rho = rim.r, rim.rho
    sb, cb = sincos(beta)
    D = rim.R - rho * cb
    # e_perp . M, from differentiating the u-dot rows of (42) along (e1, e3) at u = 0
    eM = -r * w3 * sb / D + r * w2 * (e3**2 / rho - e1**2 * cb / D)
    # phi_1-dot = (B1 B3' - B3 B1') / |B|^2 along the limit field
    xdot = limit_vector_field(rim, x, phi1)[:4]
    _, dB = jax.jvp(lambda z: limit_coefficients(rim, z)[:2], (x,), (xdot,))
    dphi1 = (B1 * dB[1] - B3 * dB[0]) / Bs**2
    den = jnp.maximum(2.0 * Bn - C, 0.5 * Bn)  # |B| + u-dot*; kept away from 0 (see docstring)
    theta1 = jnp.where(Bn > 0, (eM - dphi1) / jnp.where(den > 0, den, 1.0), 0.0)
    return phi1 + w * theta1


def layer_slip(rim: Rim, y: SlipState) -> SlipState:
    """The physical slipping state of a layer state ``(x, w, 0)``: ``u = w e(phi)`` with phi of
    :func:`layer_direction`."""
    _slip_state("layer_slip", y)
    phi = layer_direction(rim, y[:4], y[4])
    sp, cp = sincos(phi)
    return jnp.concatenate([y[:4], y[4] * jnp.stack([cp, sp])])


def layer_vector_field(rim: Rim, y: SlipState) -> SlipState:
    """The slip leaving the rolling set, restricted to its slow manifold: the state is
    ``(x, w, 0)`` with slip speed ``w`` in the direction of :func:`layer_direction`; returns
    ``(x-dot, w-dot, 0)`` from (42), ``w-dot`` being the radial rate ``e . u-dot`` of (78).

    The full field (42) is stiff there (the direction relaxes at rate ``|B|/u``); on the slow
    manifold it is not, and the error is O(w^2) per unit time."""
    _slip_state("layer_vector_field", y)
    phi = layer_direction(rim, y[:4], y[4])
    s, c = sincos(phi)
    f = _slip_rhs(rim, jnp.concatenate([y[:4], y[4] * jnp.stack([c, s])]), c, s)
    return jnp.concatenate([f[:4], jnp.stack([c * f[4] + s * f[5], 0.0 * f[5]])])


# --------------------------------------------------------------------------- transitions
def start_slip(rim: Rim, x: RollState, delta) -> SlipState:
    """Rolling -> slipping (Sect. 5.2.2, step 1): leave along the repelling limit direction
    phi_1 of (81), ``(u1, u3) = delta (cos phi_1, sin phi_1)``."""
    _roll_state("start_slip", x)
    B1, B3, _ = limit_coefficients(rim, x)
    Bn = jnp.hypot(B1, B3)
    c = jnp.where(Bn > 0, B1 / jnp.where(Bn > 0, Bn, 1.0), 1.0)
    s = jnp.where(Bn > 0, B3 / jnp.where(Bn > 0, Bn, 1.0), 0.0)
    return jnp.concatenate([x[:4], delta * jnp.stack([c, s])])


def stick_function(rim: Rim, y: SlipState, tau_stick, dir_tol) -> Float[Array, ""]:
    """The 'about to stick' event function of a slipping state (boundary: fires at <= 0).

    With ``u-dot* = u-dot*(x, phi)`` of (79) at the current slip direction phi, it is
    ``max(|B sin(phi - phi_1)| - dir_tol |u-dot*|, u / tau_stick + u-dot*)`` (both in m/s^2).
    It is <= 0 when (a) phi has converged to a limit direction: the direction still turns by
    about ``|B sin(phi - phi_1)| / |u-dot*|`` rad before u = 0 (from ``u phi-dot`` of (78)),
    at most ``dir_tol`` (waived once the time to u = 0 is below 1e-8 s: when |B| << C the
    direction converges only as a small power of u, while its effect on the state vanishes
    with that time); and (b) the time to u = 0 extrapolated from u and u-dot*,
    ``u / (-u-dot*)``, is at most ``tau_stick`` (Sect. 5.2.2, step 2).
    """
    _slip_state("stick_function", y)
    u, us = _speed(y[4], y[5])
    B1, B3, C = limit_coefficients(rim, y[:4])
    rate = (y[4] * B1 + y[5] * B3) / us - C  # (79)
    turn = jnp.abs(y[4] * B3 - y[5] * B1) / us  # |B sin(phi - phi_1)|
    converged = jnp.minimum(turn - dir_tol * jnp.abs(rate), u / _TAU_DIR + rate)
    return jnp.maximum(converged, u / tau_stick + rate)


def stick(rim: Rim, y: SlipState) -> tuple[Float[Array, ""], SlipState]:
    """Slipping -> rolling (Sect. 5.2.2, step 2) from a state that is about to stick.

    The slip ends along the nearest limit direction phi_i of (81). Returns ``(tau, y_roll)``:
    the time to u = 0, ``tau = u / (-(u-dot + u-dot*(phi_i)) / 2)``, extrapolated from u, its
    current rate (78) and the limit rate (79), and the rolling state there with u1 = u3 = 0
    exactly, advanced by ``tau`` times the mean of the slipping field at ``y`` and its
    directional limit (75) from phi_i (trapezoidal rule).
    """
    _slip_state("stick", y)
    u, us = _speed(y[4], y[5])
    x = y[:4]
    B1, B3, _ = limit_coefficients(rim, x)
    phi1 = jnp.arctan2(B3, B1)
    near1 = y[4] * B1 + y[5] * B3 >= 0
    phi_i = jnp.where(near1, phi1, phi1 + jnp.pi)
    f_now = slip_vector_field(rim, y)
    f_lim = limit_vector_field(rim, x, phi_i)
    rate_now = (y[4] * f_now[4] + y[5] * f_now[5]) / us  # (78)
    rate_lim = limit_speed_rate(rim, x, phi_i)  # (79)
    mean = 0.5 * (rate_now + rate_lim)
    tau = jnp.where(mean < 0, u / jnp.where(mean < 0, -mean, 1.0), 0.0)
    x_new = x + tau * 0.5 * (f_now[:4] + f_lim[:4])
    return tau, jnp.concatenate([x_new, jnp.zeros(2, y.dtype)])


# ------------------------------------------------------------------------------ hybrid
ROLLING, SLIPPING, LEAVING = 0, 1, 2
MODES = ("rolling", "slipping", "leaving")


class HybridArgs(NamedTuple):
    """What the hybrid vector field and events see (a pytree of arrays)."""

    rim: Rim
    mode: Int[Array, ""]
    tau_stick: Float[Array, ""]
    dir_tol: Float[Array, ""]
    u_layer: Float[Array, ""]


def _shared(one, *xs):
    """Values used by several outputs of a fused field, divided by a run-time 1 (exact).

    XLA's CPU backend fuses cheap element-wise producers into every consumer, so a value that
    feeds the six components of the vmapped field is recomputed for each of them; a division
    counts as expensive and is not duplicated, so the value is computed once. Measured on one
    DOPRI5 step with the hybrid events, 512 lanes: 1030 -> 740 ns per lane
    (``benchmarks/RESULTS.md``)."""
    return tuple(x / one for x in xs)


def _limit_geometry(w1, w2, w3, s, c, rim: Rim):
    """(B1, B3, |B|, B1/|B|, B3/|B|, F2/m of (31), theta_1 of :func:`layer_direction`) at a
    rolling state with sin/cos(beta) = (s, c); phi_1-dot in closed form."""
    r, j, g, rho, R, mu = rim.r, rim.j, rim.g, rim.rho, rim.R, rim.mu
    D = R - rho * c
    F2_0 = r**2 * w3**2 * c / D - r**2 * w1**2 / rho + g * s  # (31) / m
    B1 = -(r**2) * w1 * w2 / rho
    B3 = r**2 * w2 * w3 * c / D - g * c
    Bn = jnp.sqrt(B1**2 + B3**2)
    Bs = jnp.where(Bn > 0, Bn, 1.0)
    e1, e3 = jnp.where(Bn > 0, B1 / Bs, 1.0), B3 / Bs
    Cc = mu * (1 + j) / j * F2_0
    # the limit field (75) from phi_1 and the rate of phi_1 along it
    da0, db0 = -r * w3 / D, r * w1 / rho
    K0 = mu * F2_0 / (r * j)
    dw1 = da0 * (-w3 * s + w2 * c) + K0 * e3
    dw2 = -da0 * w1 * c + db0 * w3
    dw3 = da0 * w1 * s - db0 * w2 - K0 * e1
    dB1 = -(r**2) * (dw1 * w2 + w1 * dw2) / rho
    dB3 = r**2 * (dw2 * w3 + w2 * dw3) * c / D - r**2 * w2 * w3 * s * R * db0 / D**2 + g * s * db0
    eM = -r * w3 * s / D + r * w2 * (e3**2 / rho - e1**2 * c / D)
    den = jnp.maximum(2.0 * Bn - Cc, 0.5 * Bn)
    theta1 = jnp.where(
        Bn > 0, (eM - (B1 * dB3 - B3 * dB1) / Bs**2) / jnp.where(den > 0, den, 1.0), 0.0
    )
    return B1, B3, Bn, e1, e3, F2_0, theta1


def _hybrid_rhs(y: SlipState, mode, rim: Rim) -> SlipState:
    """Fused evaluation of the mode's vector field (one sin/cos pair; the layer direction's
    phi_1-dot in closed form). Equal to :meth:`Rim.vector_field` (+ u-dot = 0),
    :func:`slip_vector_field` and :func:`layer_vector_field` (checked in the tests)."""
    return _hybrid_rhs_and_alpha_rate(y, mode, rim)[0]


def _hybrid_rhs_and_alpha_rate(y: SlipState, mode, rim: Rim) -> tuple[SlipState, Array]:
    """:func:`_hybrid_rhs` and alpha-dot of (19) with the mode's physical slip (the cyclic
    angle around the rim, for a ball whose position is tracked: :class:`rollax.systems.Shot`)."""
    beta, w1, w2, w3, y4, y5 = y[0], y[1], y[2], y[3], y[4], y[5]
    r, j, g, rho, R, mu = rim.r, rim.j, rim.g, rim.rho, rim.R, rim.mu
    one = 1.0 + 0.0 * beta
    s, c = _shared(one, *sincos(beta))
    D = R - rho * c
    roll, leave = mode == ROLLING, mode == LEAVING
    B1, B3, Bn, e1, e3, F2_0, theta1 = _shared(one, *_limit_geometry(w1, w2, w3, s, c, rim))
    # rotate (e1, e3) by w theta1 (the slow-manifold angle is small)
    sl, cl = _shared(one, *sincos(y4 * theta1))
    le1, le3 = e1 * cl - e3 * sl, e3 * cl + e1 * sl
    u = jnp.sqrt(y4**2 + y5**2)
    us = jnp.where(u > 0, u, 1.0)
    D, u, us = _shared(one, D, u, us)
    ce = jnp.where(leave, le1, jnp.where(u > 0, y4 / us, 1.0))
    se = jnp.where(leave, le3, y5 / us)
    u1 = jnp.where(roll, 0.0, jnp.where(leave, y4 * ce, y4))
    u3 = jnp.where(roll, 0.0, jnp.where(leave, y4 * se, y5))
    ce, se, u1, u3 = _shared(one, ce, se, u1, u3)
    # Newton-Euler (42) with friction per mode: rolling (30), (32) or Coulomb (29)
    a1, a3 = u1 - r * w3, u3 + r * w1
    F2 = a1**2 * c / D - a3**2 / rho + g * s  # (41) / m
    F1 = jnp.where(roll, j * r**2 * w1 * w2 / (rho * (1 + j)), -mu * F2 * ce)
    F3 = jnp.where(
        roll, j * g * c / (1 + j) - j * r**2 * w2 * w3 * c / ((1 + j) * D), -mu * F2 * se
    )
    da, db = a1 / D, a3 / rho
    F1, F3, da, db = _shared(one, F1, F3, da, db)
    fw1 = da * (-w3 * s + w2 * c) - F3 / (r * j)
    fw2 = -da * w1 * c + db * w3
    fw3 = da * w1 * s - db * w2 + F1 / (r * j)
    fu1 = -da * u3 * s - db * r * w2 + (1 + j) * F1 / j
    fu3 = da * (-r * w2 * c + u1 * s) + (1 + j) * F3 / j - g * c
    fw1, fw2, fw3, fu1, fu3 = _shared(one, fw1, fw2, fw3, fu1, fu3)
    zero = 0.0 * fu1
    du1 = jnp.where(roll, zero, jnp.where(leave, ce * fu1 + se * fu3, fu1))
    du3 = jnp.where(roll | leave, zero, fu3)
    return jnp.stack([db, fw1, fw2, fw3, du1, du3]), da


def hybrid_vector_field(t, y: SlipState, args: HybridArgs) -> SlipState:
    """The vector field of the current mode on the 6-D state (diffrax convention):

    * ``ROLLING``: rolling (33)-(36) with u-dot = 0 (Newton-Euler with the forces (30), (32));
    * ``SLIPPING``: (20), (42);
    * ``LEAVING``: the state is ``(x, w, 0)``, :func:`layer_vector_field`.
    """
    _slip_state("hybrid_vector_field", y)
    return _hybrid_rhs(y, args.mode, args.rim)


def physical_state(y: SlipState, mode, rim: Rim) -> SlipState:
    """The slipping state ``(x, u1, u3)`` of a hybrid state in any mode."""
    _slip_state("physical_state", y)
    return jnp.where(mode == LEAVING, layer_slip(rim, y), y)


def _arrival_function(y4, y5, u, us, B1, B3, Bn, e1, e3, theta1, rate, C, u_layer):
    """<= 0 when a slip may hand over to the slow-manifold layer on its way to rolling: u at
    most u_layer/2, decreasing (u-dot* < 0), near phi_1, C < 1.5 |B| (where the first-order
    manifold of :func:`layer_direction` exists and the full field is stiff), and the direction
    within 1e-3 rad of the manifold's ``phi_1 + u theta_1``."""
    # sin of the angle between the slip and the manifold direction
    sl, cl = sincos(u * theta1)
    m1, m3 = e1 * cl - e3 * sl, e3 * cl + e1 * sl
    off = jnp.abs(y4 * m3 - y5 * m1) / us
    near = -(y4 * B1 + y5 * B3) / us  # < 0 near phi_1
    return jnp.maximum(
        jnp.maximum(u / (0.5 * u_layer) - 1.0, jnp.maximum(rate, near)),
        jnp.maximum(C / (1.5 * jnp.where(Bn > 0, Bn, 1.0)) - 1.0, off / 1e-3 - 1.0),
    )


def arrival_value(rim: Rim, y: SlipState, u_layer) -> Float[Array, ""]:
    """The slow-manifold hand-over test of a slipping state (<= 0: hand over), the second
    part of the stick event (see :func:`_arrival_function`)."""
    _slip_state("arrival_value", y)
    s, c = sincos(y[0])
    B1, B3, Bn, e1, e3, F2_0, theta1 = _limit_geometry(y[1], y[2], y[3], s, c, rim)
    u, us = _speed(y[4], y[5])
    C = rim.mu * (1 + rim.j) / rim.j * F2_0
    rate = (y[4] * B1 + y[5] * B3) / us - C
    return _arrival_function(y[4], y[5], u, us, B1, B3, Bn, e1, e3, theta1, rate, C, u_layer)


def _hybrid_event_values(y: SlipState, mode, rim: Rim, tau_stick, dir_tol, u_layer):
    """The five event functions of :data:`HYBRID_EVENTS` (fused, one sin/cos pair)."""
    beta, w1, w2, w3, y4, y5 = y[0], y[1], y[2], y[3], y[4], y[5]
    r, j, g, rho, mu = rim.r, rim.j, rim.g, rim.rho, rim.mu
    one = 1.0 + 0.0 * beta
    # no _shared values here (unlike the field): alone, 512 lanes, 28.4 -> 23.6 ns per lane;
    # fused with the field (the step's last stage) the same 53 ns; the Fig. 11 mu = 1 panel,
    # where each step samples the events 3 times more, 4.19-4.27 -> 4.07-4.14 s
    s, c = sincos(beta)
    D = rim.R - rho * c
    roll, slip, leave = mode == ROLLING, mode == SLIPPING, mode == LEAVING
    B1, B3, Bn, e1, e3, F2_0, theta1 = _limit_geometry(w1, w2, w3, s, c, rim)
    # physical slip; in the layer along B (the slow-manifold angle changes F2 by O(w^2))
    u1 = jnp.where(roll, 0.0, jnp.where(leave, y4 * e1, y4))
    u3 = jnp.where(roll, 0.0, jnp.where(leave, y4 * e3, y5))
    F2 = (u1 - r * w3) ** 2 * c / D - (u3 + r * w1) ** 2 / rho + g * s  # (41) / m
    # (39) / m with (30)-(32): |F_t| = j/(1+j) |B|
    margin = mu * F2 - j / (1 + j) * Bn
    u = jnp.sqrt(y4**2 + y5**2)
    us = jnp.where(u > 0, u, 1.0)
    rate = (y4 * B1 + y5 * B3) / us - mu * (1 + j) / j * F2_0  # (79)
    turn = jnp.abs(y4 * B3 - y5 * B1) / us
    # the direction test is waived once u = 0 is nearer than _TAU_DIR (a slowly converging
    # direction, |B| << C, then changes the state by at most C tau / r)
    converged = jnp.minimum(turn - dir_tol * jnp.abs(rate), u / _TAU_DIR + rate)
    extrapolate = jnp.maximum(converged, u / tau_stick + rate)
    arrive = _arrival_function(
        y4, y5, u, us, B1, B3, Bn, e1, e3, theta1, rate, mu * (1 + j) / j * F2_0, u_layer
    )
    stick_fn = jnp.minimum(extrapolate, arrive)
    return jnp.stack(
        (
            F2,  # separation
            jnp.where(roll, margin, one),  # (39): start slipping
            jnp.where(slip, stick_fn, jnp.where(leave, y4, one)),  # back to rolling
            jnp.where(roll, w1, one),  # w1 zeros while rolling (Proposition 4)
            jnp.where(leave, u_layer - y4, one),  # the leaving slip joins (42)
        )
    )


def _hybrid_events(t, y, args: HybridArgs):
    return _hybrid_event_values(y, args.mode, args.rim, args.tau_stick, args.dir_tol, args.u_layer)


FALL, SLIP_ONSET, STICK, W1_ZERO, LAYER_EXIT = 0, 1, 2, 3, 4
HYBRID_EVENTS = EventSet(
    _hybrid_events, (BOUNDARY, BOUNDARY, BOUNDARY, CROSSING, BOUNDARY), (1, 1, 1, 2, 1)
)


class SlipSettings(eqx.Module):
    """Parameters of the rolling <-> slipping transitions (Sect. 5.2.2).

    ``delta`` [m/s]: slip speed given when rolling turns into slipping (module docstring);
    ``u_layer`` [m/s]: slip speed up to which a slip leaving the rolling set is followed on its
    slow manifold (:func:`layer_vector_field`) before (42) takes over;
    ``tau_stick`` [s]: largest extrapolated time to u = 0 at which a slip is switched to
    rolling; ``dir_tol``: tolerance of the slip direction's convergence to a limit
    direction (see :func:`stick_function`); ``max_switches``: cap on roll/slip switches;
    ``min_dwell`` [s] and ``max_short``: that many consecutive phases shorter than
    ``min_dwell`` are Zeno-like chattering.
    """

    delta: float = 1e-6
    u_layer: float = 1e-3
    tau_stick: float = 1e-5
    dir_tol: float = 1e-2
    max_switches: int = 512
    min_dwell: float = 1e-7
    max_short: int = 4

    def __check_init__(self):
        check_positive("delta", self.delta)
        check_positive("u_layer", self.u_layer)
        check_less("delta", self.delta, "u_layer", self.u_layer, "0 < delta < u_layer")
        check_positive("tau_stick", self.tau_stick)
        check_range("dir_tol", self.dir_tol, 0.0, 1.0, lo_open=True, hi_open=True)
        check_positive("min_dwell", self.min_dwell)
        check_integer("max_switches", self.max_switches, 1)
        check_integer("max_short", self.max_short, 2)


class HybridResult(NamedTuple):
    """Per-start result of :func:`simulate` (arrays; a leading batch axis under vmap)."""

    outcome: Int[Array, ""]  # PERIODIC, IN, OUT, UNDECIDED, FAILED or CHATTERING
    t_end: Float[Array, ""]  # time of the fall / second w1 zero / cap / cut-off
    y_end: Float[Array, " 6"]  # state there, (x, u1, u3)
    mode: Int[Array, ""]  # mode at the end (ROLLING, SLIPPING or LEAVING)
    switches: Int[Array, ""]  # roll -> slip and slip -> roll switches
    t_slip: Float[Array, ""]  # total time spent slipping
    recontact: Bool[Array, ""]  # the flight after a fall comes back within rho of the rim
    period: Float[Array, ""]  # period of final periodic rolling, nan otherwise
    steps: Int[Array, ""]  # accepted integration steps


def check_hybrid_rim(rim: Rim) -> None:
    """Raise ``ValueError`` for rims the hybrid does not model: infinite mu (use the rolling
    path of :mod:`rollax.analysis.basin`) or dissipation (82)-(83), which the paper defines for rolling
    only. Per-start (batched) values are checked row by row; traced ones where concrete."""
    check_where_concrete(
        "mu",
        rim.mu,
        lambda m: np.isfinite(m) & (m > 0),
        "mu must be finite and > 0 for slipping (allowed range: (0, inf))",
    )
    try:
        float(rim.k_d), float(rim.k_r)  # pyright: ignore[reportUnusedExpression]  (may raise)
    except TypeError:  # traced or per-start dissipation: refused only where concrete and > 0
        k = [np.asarray(v) for v in (rim.k_d, rim.k_r) if not isinstance(v, Tracer)]
        if any(np.any(v > 0) for v in k):
            raise ValueError(
                "k_d, k_r > 0: slipping with the dissipative moment (82) is not "
                "modelled (allowed: k_d = k_r = 0)"
            ) from None
        return
    if rim.dissipative:
        raise ValueError(
            f"k_d = {float(rim.k_d)!r}, k_r = {float(rim.k_r)!r}: slipping with the dissipative "
            "moment (82) is not modelled (allowed: k_d = k_r = 0)"
        )


def transition(rim: Rim, mode, event, y: SlipState, delta, u_layer):
    """The reset map at a non-terminal event of :data:`HYBRID_EVENTS` (Sect. 5.2.2).

    A slip that is about to stick either hands over to the layer (when
    :func:`arrival_value` <= 0: the slow manifold of phi_1 exists and the slip is on it, and
    the layer then integrates it to u = 0 exactly) or is extrapolated to u = 0 with :func:`stick`.

    Returns ``(mode, y, dt, switched, terminal)``: the new mode and state, the time ``dt`` the
    state was moved ahead (the extrapolated time to stick), whether a roll/slip switch
    happened, and whether the event ends the run (separation, periodic rolling, or an event
    this map does not handle). Rolling -> leaving at the slip onset, ``y = (x, delta, 0)``;
    leaving -> slipping at ``w = u_layer``, ``y = (x, u)`` on the slow manifold; leaving ->
    rolling when ``w`` falls back to 0; slipping -> rolling with :func:`stick`.
    """
    _slip_state("transition", y)
    x = y[:4]
    zero2 = jnp.zeros(2, y.dtype)
    onset = (mode == ROLLING) & (event == SLIP_ONSET)
    exit_ = (mode == LEAVING) & (event == LAYER_EXIT)
    back = (mode == LEAVING) & (event == STICK)
    stick_ev = (mode == SLIPPING) & (event == STICK)
    arrives = stick_ev & (arrival_value(rim, y, u_layer) <= 0)
    sticks = stick_ev & ~arrives
    tau, y_stick = stick(rim, y)
    u = jnp.hypot(y[4], y[5])
    y_new = jnp.select(
        [onset, exit_, back, sticks, arrives],
        [
            jnp.concatenate([x, jnp.stack([delta, 0.0 * delta])]),
            layer_slip(rim, y),
            jnp.concatenate([x, zero2]),
            y_stick,
            jnp.concatenate([x, jnp.stack([u, 0.0 * u])]),
        ],
        y,
    )
    mode_new = jnp.select(
        [onset | arrives, exit_, back | sticks], [LEAVING, SLIPPING, ROLLING], mode
    )
    dt = jnp.where(sticks, tau, 0.0)
    switched = onset | back | sticks
    terminal = ~(switched | exit_ | arrives)
    return mode_new.astype(jnp.int32), y_new, dt, switched, terminal


def classify_end(rim: Rim, mode, event, y: SlipState, failed):
    """Outcome of a run that ended (terminal) with ``event`` in ``mode`` at state ``y``:
    separation -> IN/OUT by the flight of :func:`rolling_equivalent` (with ``recontact``),
    w1 zeros -> PERIODIC, no event (t_max) -> UNDECIDED; a failed solve while slipping is a
    slip that does not converge (CHATTERING), while rolling FAILED. Returns
    ``(outcome, recontact)``."""
    _slip_state("classify_end", y)
    yp = physical_state(y, mode, rim)
    inside, recontact, _ = rim.flight(rolling_equivalent(rim, yp))
    fell = ~failed & (event == FALL)
    outcome = jnp.select(
        [failed & (mode != ROLLING), failed, fell & inside, fell, event == W1_ZERO, event == -1],
        [CHATTERING, FAILED, IN, OUT, PERIODIC, UNDECIDED],
        FAILED,
    )
    return outcome.astype(jnp.int32), fell & recontact
