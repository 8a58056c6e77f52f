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
direction. The model only: the run is :func:`rollax.analysis.friction.simulate_stop` on the
system :class:`rollax.systems.SlidingStop`.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax._core._system import parameter
from rollax._core._validate import check_nonnegative, check_positive, check_range


class SlidingBody(eqx.Module):
    """A disc or ball on a plane with friction ``law`` and a constant force F along x, (13)/(18).

    Fields: mass ``m``, dimensionless inertia ``j`` = J/(m R_bar^2) (1/2 solid disc, 2/5 ball),
    body radius ``R_bar``, force ``F``. ``kind`` is 'disc' or 'ball'.
    """

    law: object
    m: float = parameter(1.0, convert=False)
    j: float = parameter(0.5, convert=False)
    R_bar: float = parameter(1.0, convert=False)
    F: float = parameter(0.0, convert=False)
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
        Q = self.law.force(x_o)  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)
        rho = self.law.rho  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)
        lin = 1.0 / self.m if self.kind == "disc" else (1.0 + self.j) / (self.j * self.m)
        rot = rho**2 / (self.j * self.m * self.R_bar**2)
        return jnp.stack([lin * Q[0] + self.F / self.m, lin * Q[1], rot * Q[2]])

    def eps(self, x_o: Float[Array, "3"]) -> Float[Array, ""]:
        """Slip-spin ratio (35): |u| / (R |omega_z|)."""
        return jnp.hypot(x_o[0], x_o[1]) / (self.law.R * jnp.abs(x_o[2]) / self.law.rho)  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)
