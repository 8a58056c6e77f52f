"""Disc (13) and ball (18) sliding and spinning on a plane under a constant force, to a stop.

The orthogonal state is x_o = (u_x, u_y, rho omega_z) (10)/(15); with any friction law
``law.force(x_o) = (Q_x, Q_y, T_z/rho)`` (its load P is the weight m g):

    disc (13):  x_o' = (Q_x/m + F/m,  Q_y/m,  rho^2/(j m R_bar^2) T_z/rho)
    ball (18):  x_o' = ((1+j)/(j m) Q_x + F/m,  (1+j)/(j m) Q_y,  rho^2/(j m R_bar^2) T_z/rho)

The vector field is bounded but discontinuous at x_o = 0, which is reached in finite time
(Theorem 1) along an attracting limit direction. The stop is integrated in the rescaled time
tau of (114), d/dt = r d/dtau: x_o' = r F_o(x_o), t' = r, a regular ODE in which r decays
exponentially and t converges to the stop time. The run ends (event) when r falls below
``r_stop`` times its initial value; the slip-spin ratio eps (35) there is the final slip
direction. ``rollax._integrate.legacy.solve`` does the event-terminated integration.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax._core._validate import check_nonnegative, check_positive, check_range
from rollax._core.events import Event
from rollax._integrate.legacy import solve


class SlidingBody(eqx.Module):
    """A disc or ball on a plane with friction ``law`` and a constant force F along x, (13)/(18).

    Fields: mass ``m``, dimensionless inertia ``j`` = J/(m R_bar^2) (1/2 solid disc, 2/5 ball),
    body radius ``R_bar``, force ``F``. ``kind`` is 'disc' or 'ball'.
    """

    law: object
    m: float = 1.0
    j: float = 0.5
    R_bar: float = 1.0
    F: float = 0.0
    kind: str = eqx.field(static=True, default="disc")

    def __check_init__(self):
        check_positive("m", self.m)
        check_range("j", self.j, 0.0, 1.0, lo_open=True)
        check_positive("R_bar", self.R_bar)
        check_nonnegative("F", self.F)
        if self.kind not in ("disc", "ball"):
            raise ValueError(f"kind = {self.kind!r} must be 'disc' or 'ball'")

    def rhs(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """x_o' of (13) (disc) or (18) (ball)."""
        Q = self.law.force(x_o)
        rho = self.law.rho
        lin = 1.0 / self.m if self.kind == "disc" else (1.0 + self.j) / (self.j * self.m)
        rot = rho**2 / (self.j * self.m * self.R_bar**2)
        return jnp.stack([lin * Q[0] + self.F / self.m, lin * Q[1], rot * Q[2]])

    def eps(self, x_o: Float[Array, "3"]) -> Float[Array, ""]:
        """Slip-spin ratio (35): |u| / (R |omega_z|)."""
        return jnp.hypot(x_o[0], x_o[1]) / (self.law.R * jnp.abs(x_o[2]) / self.law.rho)


class Stop(eqx.Module):
    """Result of :func:`simulate_stop`."""

    t_stop: Float[Array, ""]  # time at which r reached r_stop * r0 (~ the stop time)
    x_o: Float[Array, "3"]  # slip there
    eps: Float[Array, ""]  # slip-spin ratio (35) there
    stopped: Float[Array, ""]  # True if the stop event fired before tau_max


def _rescaled(tau, y, body):
    x = y[:3]
    r = jnp.sqrt(jnp.sum(x * x))
    return jnp.concatenate([r * body.rhs(x), jnp.stack([r])])


def simulate_stop(
    body: SlidingBody,
    x0: Float[Array, "3"],
    r_stop: float = 1e-12,
    tau_max: float = 400.0,
    rtol: float = 1e-10,
    atol: float = 1e-13,
) -> Stop:
    """Slide and spin from slip ``x0`` until the slip magnitude is ``r_stop * |x0|``.

    Integrates the time-rescaled system (114) with the stop as a boundary event of
    :func:`rollax._integrate.legacy.solve`; jit/vmap/grad-compatible. Returns the stop time, the final
    slip and its slip-spin ratio eps.
    """
    x0 = jnp.asarray(x0, dtype=jnp.float64)
    r0 = jnp.sqrt(jnp.sum(x0 * x0))
    ev = Event(lambda tau, y, args: jnp.sqrt(jnp.sum(y[:3] ** 2)) / r0 - r_stop)
    y0 = jnp.concatenate([x0, jnp.zeros(1)])
    sol = solve(
        _rescaled, y0, 0.0, tau_max, args=body, events=(ev,), rtol=rtol, atol=atol, max_steps=8192
    )
    x = sol.y[:3]
    return Stop(sol.y[3], x, body.eps(x), (sol.event == 0) & ~sol.failed)
