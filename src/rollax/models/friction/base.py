"""Common interface of the axisymmetric friction laws of a circular contact patch.

A law maps the slip variables x_o = (u_x, u_y, rho*omega_z) (5) to the friction vector
Q = (Q_x, Q_y, T_z/rho) (6). For an axisymmetric pressure every law has the form (46)

    Q_x = -mu P w_1 C(w_3),   Q_y = -mu P w_2 C(w_3),   T_z = -mu P kappa w_3 S(w_3),

with w = x_o/|x_o| the slip direction (27), C = Q_w/sqrt(1 - w_3^2) and S = T_w/w_3 (84)-(86).
Two families implement it:

* :class:`EpsLaw` - laws given in the slip-spin ratio eps (35), (53): the exact laws, the
  Pade models. They supply the two branches of (57)-(58): eps <= 1 as (Q/eps, T)(eps) and
  eps >= 1 as (Q, T*eps)(y) with y = 1/eps, which stays finite at pure slip and pure spin.
* :class:`DirectionLaw` - laws polynomial in w (linear (69), harmonic (84)-(88)): C and S.

Zero slip. At x_o = 0 the direction w is undefined and so is every law (Coulomb's friction is
set-valued there): ``force`` returns NaN at x_o = 0 on purpose. The stick/slip behaviour near
x_o = 0 is the subject of :mod:`rollax.models.friction.limit_directions`.
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from rollax._core._system import parameter
from rollax._core._validate import check_positive, check_where_concrete


def _check_eps(eps) -> None:
    # the slip-spin ratio (35) is a magnitude: eps in [0, inf] (inf: pure slip)
    check_where_concrete(
        "eps", eps, lambda e: e >= 0, "the slip-spin ratio eps of (35) is a magnitude in [0, inf]"
    )


#: kappa/R of the two pressure distributions, (76) and (77).
KAPPA_OVER_R = {"uniform": 2.0 / 3.0, "hertz": 3.0 * math.pi / 16.0}


def kappa_for(pressure: str, R: float) -> float:
    """kappa (39) of the named axisymmetric pressure: 2R/3 (uniform, (76)), 3 pi R/16 (Hertz, (77))."""
    if pressure not in KAPPA_OVER_R:
        raise ValueError(f"pressure = {pressure!r} must be one of {sorted(KAPPA_OVER_R)}")
    return float(KAPPA_OVER_R[pressure]) * R


def resolve_rho(rho, R: float, kappa: float) -> float:
    """The scaling length rho of (5): a number, or the choices 'R' / 'kappa' of Sect. 5.2."""
    if isinstance(rho, str):
        if rho == "R":
            return R
        if rho == "kappa":
            return kappa
        raise ValueError(f"rho = {rho!r} must be a positive number, 'R' or 'kappa'")
    return check_positive("rho", rho)


class AxisymmetricLaw(eqx.Module):
    """Friction law of a circular contact of radius R with an axisymmetric pressure (37).

    Fields: friction coefficient ``mu``, normal load ``P``, contact radius ``R``, scaling
    length ``rho`` of (5) and the pressure moment ``kappa`` (39).
    """

    mu: float = parameter(convert=False)
    P: float = parameter(convert=False)
    R: float = parameter(convert=False)
    rho: float = parameter(convert=False)
    kappa: float = parameter(convert=False)

    def __check_init__(self):
        check_positive("mu", self.mu)
        check_positive("P", self.P)
        check_positive("R", self.R)
        check_positive("rho", self.rho)
        check_positive("kappa", self.kappa)

    # --- the two profile functions C(w3) = Q_w/w12 and S(w3) = T_w/w3 of (84)-(86) -------------
    @abc.abstractmethod
    def C_w(self, w3: ArrayLike) -> Float[Array, "..."]:
        """C(w_3) = Q_w(w_3)/sqrt(1 - w_3^2) (84)-(85), finite on [-1, 1]."""

    @abc.abstractmethod
    def S_w(self, w3: ArrayLike) -> Float[Array, "..."]:
        """S(w_3) = T_w(w_3)/w_3 (84)-(85), finite on [-1, 1]."""

    @abc.abstractmethod
    def force(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """(Q_x, Q_y, T_z/rho) (6) at the slip x_o = (u_x, u_y, rho omega_z) (5); NaN at 0."""

    def __call__(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        return self.force(x_o)

    # --- normalised forms (46), (49), (53) ----------------------------------------------------
    def Q_w(self, w3: ArrayLike) -> Float[Array, "..."]:
        """Normalised force Q_w(w_3) of (46)."""
        w3 = jnp.asarray(w3, dtype=jnp.float64)
        return jnp.sqrt(jnp.clip(1.0 - w3 * w3, 0.0)) * self.C_w(w3)

    def T_w(self, w3: ArrayLike) -> Float[Array, "..."]:
        """Normalised torque T_w(w_3) of (46)."""
        w3 = jnp.asarray(w3, dtype=jnp.float64)
        return w3 * self.S_w(w3)

    def Q_theta(self, theta: ArrayLike) -> Float[Array, "..."]:
        """Normalised force Q(theta) = Q_w(sin theta) of (49)-(50)."""
        theta = jnp.asarray(theta, dtype=jnp.float64)
        return jnp.cos(theta) * self.C_w(jnp.sin(theta))

    def T_theta(self, theta: ArrayLike) -> Float[Array, "..."]:
        """Normalised torque T(theta) = T_w(sin theta) of (49)-(50)."""
        theta = jnp.asarray(theta, dtype=jnp.float64)
        return jnp.sin(theta) * self.S_w(jnp.sin(theta))

    def w3_of_eps(self, eps: ArrayLike) -> Float[Array, "..."]:
        """|w_3| of the slip-spin ratio eps, (36)."""
        eps = jnp.asarray(eps, dtype=jnp.float64)
        return 1.0 / jnp.sqrt(1.0 + (eps * self.R / self.rho) ** 2)

    def Q_eps(self, eps: ArrayLike) -> Float[Array, "..."]:
        """Normalised force magnitude Q_eps(eps) of (53): |Q_xy| / (mu P)."""
        _check_eps(eps)
        eps = jnp.asarray(eps, dtype=jnp.float64)
        w3 = self.w3_of_eps(eps)
        w12 = jnp.where(jnp.isinf(eps), 1.0, eps * (self.R / self.rho) * w3)
        return w12 * self.C_w(w3)

    def T_eps(self, eps: ArrayLike) -> Float[Array, "..."]:
        """Normalised torque magnitude T_eps(eps) of (53): |T_z| / (mu P kappa)."""
        _check_eps(eps)
        w3 = self.w3_of_eps(eps)
        return w3 * self.S_w(w3)


def _nan_at_zero(x_o: Float[Array, "3"], out: Float[Array, "3"]) -> Float[Array, "3"]:
    return jnp.where(jnp.all(x_o == 0.0), jnp.nan, out)


class DirectionLaw(AxisymmetricLaw):
    """Axisymmetric law polynomial in the slip direction w, (86)-(87): subclasses give C, S."""

    def force(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """(Q_x, Q_y, T_z/rho) = -mu P (w1 C, w2 C, kappa/rho w3 S), (86)-(87); NaN at x_o = 0."""
        x_o = jnp.asarray(x_o, dtype=jnp.float64)
        r2 = jnp.sum(x_o * x_o)
        r = jnp.sqrt(jnp.where(r2 > 0, r2, 1.0))
        w = x_o / r
        c = self.C_w(w[2])
        s = self.S_w(w[2])
        out = -self.mu * self.P * jnp.stack([w[0] * c, w[1] * c, self.kappa / self.rho * w[2] * s])
        return _nan_at_zero(x_o, out)


class EpsLaw(AxisymmetricLaw):
    """Axisymmetric law given by its two branches in eps, (53) and (57)-(58).

    Subclasses implement ``small(eps) -> (Q/eps, T)`` for eps in [0, 1] and
    ``large(y) -> (Q, T/y)`` for y = 1/eps in [0, 1].
    """

    @abc.abstractmethod
    def small(self, eps: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
        """(Q_eps/eps, T_eps) on 0 <= eps <= 1."""

    @abc.abstractmethod
    def large(self, y: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
        """(Q_eps, T_eps * eps) as functions of y = 1/eps on 0 <= y <= 1."""

    def _split(self, s, v):
        """Branch selection with safe arguments (no NaN leaks into gradients of the other)."""
        is_small = s <= v
        # the unused branch sees 0.5, a regular point of every law (finite derivatives)
        eps = jnp.where(is_small, s / jnp.where(is_small & (v > 0), v, 1.0), 0.5)
        y = jnp.where(is_small, 0.5, v / jnp.where(is_small, 1.0, s))
        return is_small, eps, y

    def C_w(self, w3: ArrayLike) -> Float[Array, "..."]:
        """C(w_3) = Q_w/w_12 from the eps-branches via (35)."""
        w3 = jnp.asarray(w3, dtype=jnp.float64)
        w12 = jnp.sqrt(jnp.clip(1.0 - w3 * w3, 0.0))
        v = self.R / self.rho * jnp.abs(w3)
        is_small, eps, y = self._split(w12, v)
        qs, _ = self.small(eps)
        ql, _ = self.large(y)
        c_small = qs * self.rho / (self.R * jnp.where(is_small, jnp.abs(w3), 1.0))
        c_large = ql / jnp.where(is_small, 1.0, w12)
        return jnp.where(is_small, c_small, c_large)

    def S_w(self, w3: ArrayLike) -> Float[Array, "..."]:
        """S(w_3) = T_w/w_3 from the eps-branches via (35)."""
        w3 = jnp.asarray(w3, dtype=jnp.float64)
        w12 = jnp.sqrt(jnp.clip(1.0 - w3 * w3, 0.0))
        v = self.R / self.rho * jnp.abs(w3)
        is_small, eps, y = self._split(w12, v)
        _, ts = self.small(eps)
        _, tl = self.large(y)
        s_small = ts / jnp.where(is_small, jnp.abs(w3), 1.0)
        s_large = tl * self.R / (self.rho * jnp.where(is_small, 1.0, w12))
        return jnp.where(is_small, s_small, s_large)

    def Q_eps(self, eps: ArrayLike) -> Float[Array, "..."]:
        """Q_eps(eps) of (53) directly from the branches (57)."""
        _check_eps(eps)
        eps = jnp.asarray(eps, dtype=jnp.float64)
        is_small, e, y = self._split(eps, jnp.ones_like(eps))
        qs, _ = self.small(e)
        ql, _ = self.large(y)
        return jnp.where(is_small, e * qs, ql)

    def T_eps(self, eps: ArrayLike) -> Float[Array, "..."]:
        """T_eps(eps) of (53) directly from the branches (58)."""
        _check_eps(eps)
        eps = jnp.asarray(eps, dtype=jnp.float64)
        is_small, e, y = self._split(eps, jnp.ones_like(eps))
        _, ts = self.small(e)
        _, tl = self.large(y)
        return jnp.where(is_small, ts, y * tl)

    def force(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """(Q_x, Q_y, T_z/rho) from (53)-(58): Q_xy = -mu P Q_eps u/|u|, T_z = -mu P kappa T_eps sgn(omega).

        NaN at x_o = 0, where the law is undefined.
        """
        x_o = jnp.asarray(x_o, dtype=jnp.float64)
        ux, uy, x3 = x_o[0], x_o[1], x_o[2]
        s2 = ux * ux + uy * uy
        s = jnp.sqrt(jnp.where(s2 > 0, s2, 1.0)) * (s2 > 0)
        v = self.R / self.rho * jnp.abs(x3)
        is_small, eps, y = self._split(s, v)
        qs, ts = self.small(eps)
        ql, tl = self.large(y)
        v_safe = jnp.where(is_small & (v > 0), v, 1.0)
        s_safe = jnp.where(is_small, 1.0, s)
        # small branch: Q_xy = -mu P (u/v) (Q/eps); large: -mu P (u/s) Q
        fac = jnp.where(is_small, qs / v_safe, ql / s_safe)
        # torque: sgn(omega) T; on the large branch T = y tl with y = R|omega|/(s) signed by omega
        x3_safe = jnp.where(is_small, x3, 0.0)
        t_small = jnp.sign(x3_safe) * ts
        t_large = (self.R / self.rho) * x3 / s_safe * tl
        tz = jnp.where(is_small, t_small, t_large)
        out = -self.mu * self.P * jnp.stack([ux * fac, uy * fac, self.kappa / self.rho * tz])
        return _nan_at_zero(x_o, out)
