"""Linear-ellipsoidal friction model, (64)-(69)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax._core._system import parameter
from rollax.models.friction.base import DirectionLaw, kappa_for, resolve_rho

_DIRECTIONS = np.eye(3)  # w_i, w_ii, w_iii of (65); numpy so that import starts no backend


class LinearEllipsoidal(eqx.Module):
    """General linear-ellipsoidal model Q(w) = Pi_hat w, (64), with a 3x3 matrix Pi_hat.

    Maps the unit sphere of slip directions onto an ellipsoid. Build it from any law by the
    fit (65)-(66) at the three elementary slip directions with :meth:`from_law`.
    """

    Pi_hat: Float[Array, "3 3"] = parameter(shape=(3, 3), convert=False)

    def __check_init__(self):
        # (np.shape: jnp.shape(None) is deprecated in JAX)
        if np.shape(self.Pi_hat) != (3, 3):
            raise ValueError(f"Pi_hat must have shape (3, 3), got {np.shape(self.Pi_hat)}")

    @staticmethod
    def from_law(law) -> "LinearEllipsoidal":
        """Pi_hat = [Q(w_i) Q(w_ii) Q(w_iii)], (66), for any law with a ``force`` method."""
        cols = jax.vmap(law.force)(_DIRECTIONS)
        return LinearEllipsoidal(cols.T)

    def force(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """Q = Pi_hat w with w = x_o/|x_o| (64); NaN at x_o = 0."""
        x_o = jnp.asarray(x_o, dtype=jnp.float64)
        r2 = jnp.sum(x_o * x_o)
        w = x_o / jnp.sqrt(jnp.where(r2 > 0, r2, 1.0))
        return jnp.where(r2 > 0, self.Pi_hat @ w, jnp.nan)

    def __call__(self, x_o):
        return self.force(x_o)


class LinearModel(DirectionLaw):
    """Axisymmetric linear-ellipsoidal model (67)-(69): Q = -mu P (w1, w2, kappa/rho w3).

    ``LinearModel(pressure="uniform", mu=1, P=1, R=1, rho="kappa")``: kappa from (76)/(77)
    (or pass ``kappa`` explicitly), rho a number or the choices 'R' / 'kappa' of Sect. 5.2.
    """

    def __init__(self, pressure="uniform", mu=1.0, P=1.0, R=1.0, rho="kappa", kappa=None):
        self.mu, self.P, self.R = mu, P, R
        self.kappa = kappa_for(pressure, R) if kappa is None else kappa
        self.rho = resolve_rho(rho, R, self.kappa)

    def C_w(self, w3):
        """C = 1, (70)."""
        return jnp.ones_like(jnp.asarray(w3, dtype=jnp.float64))

    def S_w(self, w3):
        """S = 1, (70)."""
        return jnp.ones_like(jnp.asarray(w3, dtype=jnp.float64))
