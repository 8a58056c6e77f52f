"""Point-contact Coulomb friction in three dimensions, (75)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax._core._system import parameter
from rollax._core._validate import check_positive


class Coulomb(eqx.Module):
    """Coulomb's law of a single contact point (75): Q_xy = -mu P u/|u|, T_z = 0.

    It is the R -> 0 limit of every finite-contact law (kappa -> 0). It does not depend on the
    spin; it is undefined (NaN) where the sliding velocity u = (u_x, u_y) vanishes.
    """

    mu: float = parameter(1.0, convert=False)
    P: float = parameter(1.0, convert=False)

    def __check_init__(self):
        check_positive("mu", self.mu)
        check_positive("P", self.P)

    def force(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """(Q_x, Q_y, T_z/rho) = (-mu P u_x/|u|, -mu P u_y/|u|, 0) of (75); NaN at u = 0."""
        x_o = jnp.asarray(x_o, dtype=jnp.float64)
        u2 = x_o[0] ** 2 + x_o[1] ** 2
        s = jnp.sqrt(jnp.where(u2 > 0, u2, 1.0))
        out = -self.mu * self.P * jnp.stack([x_o[0] / s, x_o[1] / s, 0.0 * x_o[2]])
        return jnp.where(u2 > 0, out, jnp.nan)

    def __call__(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        return self.force(x_o)

    def Q_eps(self, eps):
        """Normalised force (53): 1 for every eps > 0 (no coupling with spin)."""
        eps = jnp.asarray(eps, dtype=jnp.float64)
        return jnp.where(eps > 0, 1.0, jnp.nan)

    def T_eps(self, eps):
        """Normalised torque (53): 0 (a point transmits no spin torque)."""
        eps = jnp.asarray(eps, dtype=jnp.float64)
        return jnp.zeros_like(eps)
