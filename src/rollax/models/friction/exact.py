"""Exact friction laws of a circular contact for uniform (56) and Hertz (61) pressure.

Uniform pressure: (57)-(60) with the complete elliptic integrals K, E (docs/physics-notes.md errata: the
second branch of (58) is T_eps2; K, E are complete). Hertz pressure: (61)-(63).

Numerical stability. The closed forms cancel badly for large eps (the leading terms of T_eps2
and of both Hertz branches cancel to O(eps^-1) from O(eps^3)). Here:

* uniform, eps <= 1: Q/eps = 4/(3 pi) (E + K - D)(eps^2) and T from (60), where
  D = (K - E)/m is computed without cancellation (:mod:`.elliptic`);
* uniform, eps >= 1: Q = 4/(3 pi) (E + K - D)(eps^-2) (a rearrangement of (59), exact);
  T*eps = 2/(3 pi) (4E - 5K + 3mK + 2D)(m)/m with m = eps^-2, summed from its exact power series
  in m for eps > 2 (30 terms, truncation < 1e-17) and from the closed form otherwise;
* Hertz, eps >= 2: Q and T*eps from their power series in y = 1/eps (exact rational
  coefficients built from the series of arcsin and sqrt(1 - y^2)); closed forms (62)-(63) below.
* eps = 1 exactly, uniform: the closed forms are 0*inf there; the branches return their limits
  8/(3 pi), 4/(3 pi) and 4/(3 pi) (Q/eps, T, T*eps) and the limiting slopes.

Derivatives. Autodiff through the closed forms cancels near eps = 1: the derivatives of K, D
(uniform) and of arcsin, sqrt(1 - x^2) (Hertz) grow like 1/(1 - m) and 1/sqrt(1 - x^2) there,
while the laws themselves are C^1 (a (1 - m) log(1 - m) resp. (1 - x^2)^(3/2) term). The closed
forms therefore carry a ``jax.custom_jvp`` with their derivatives written in forms where the
singular parts cancel analytically (K, E, D, G of :func:`.elliptic.ellipkdeg`; arcsin and
sqrt(1 - x^2) with polynomial weights), accurate to ~1e-14 up to and including eps = 1.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax.models.friction.base import EpsLaw, kappa_for, resolve_rho
from rollax.models.friction.elliptic import ellipkdeg

_NSERIES = 30
_Y_SWITCH = 0.5  # series in y = 1/eps below this (eps > 2)
_M_CLOSED = 0.25  # uniform T*eps: closed form for m = eps^-2 >= this, series below


def _horner(coeffs, x):
    acc = jnp.zeros_like(x) + coeffs[-1]
    for c in coeffs[-2::-1]:
        acc = acc * x + c
    return acc


def _uniform_tl_coeffs():
    # K = pi/2 sum k_n m^n, E = pi/2 sum e_n m^n (hypergeometric series), exact rationals.
    n_max = _NSERIES + 3
    k = [Fraction(comb(2 * n, n), 4**n) ** 2 for n in range(n_max)]
    e = [k[n] / (1 - 2 * n) for n in range(n_max)]
    g = []
    for n in range(n_max - 1):
        km1 = k[n - 1] if n >= 1 else Fraction(0)
        g.append(4 * e[n] - 5 * k[n] + 3 * km1 + 2 * (k[n + 1] - e[n + 1]))
    assert g[0] == 0
    # T*eps = (1/3) sum_{n>=1} g_n m^(n-1)
    return tuple(float(g[n] / 3) for n in range(1, _NSERIES + 1))


def _hertz_coeffs():
    n_max = _NSERIES + 3
    a = [Fraction(comb(2 * n, n), 4**n * (2 * n + 1)) for n in range(n_max)]  # arcsin x
    b = [Fraction(-1) ** n * _binom_half(n) for n in range(n_max)]  # sqrt(1 - x^2)
    q = [4 * a[k] - a[k + 1] + b[k + 1] + 2 * b[k] for k in range(_NSERIES)]
    t = [
        3 * a[k + 2] - 8 * a[k + 1] + 8 * a[k] + 6 * b[k + 1] - 3 * b[k + 2]
        for k in range(_NSERIES)
    ]
    # Q = 3/16 sum q_k y^(2k);  T*eps = 1/(4 pi) sum t_k y^(2k)
    return tuple(float(3 * c / 16) for c in q), tuple(float(c) / (4 * jnp.pi) for c in t)


def _binom_half(n):
    out = Fraction(1)
    for j in range(n):
        out *= (Fraction(1, 2) - j) / (j + 1)
    return out


_U_TL = _uniform_tl_coeffs()
_H_Q, _H_TL = _hertz_coeffs()


_C1 = 4.0 / (3.0 * jnp.pi)
_C2 = 2.0 / (3.0 * jnp.pi)


@jax.custom_jvp
def _uniform_closed(m) -> tuple[Array, Array, Array]:
    """(E + K - D, (4 - 2m) E + (m - 1) K, (4E - 5K + 3mK + 2D)/m) scaled as in (59)-(60), m in [0, 1].

    The third is used only for m >= _M_CLOSED (finite filler below). m = 1: the limits.
    """
    return _uniform_closed_jvp((m,), (jnp.zeros_like(m),))[0]


@_uniform_closed.defjvp
def _uniform_closed_jvp(primals, tangents):
    (m,), (dm,) = primals, tangents
    one = m >= 1.0
    ms = jnp.where(one, 0.5, m)
    K, E, D, G = ellipkdeg(ms)
    q = _C1 * (E + K - D)
    t = _C2 * ((4.0 - 2.0 * ms) * E + (ms - 1.0) * K)
    mt = jnp.where(ms < _M_CLOSED, 1.0, ms)
    tl = _C2 * (4.0 * E - 5.0 * K + 3.0 * ms * K + 2.0 * D) / mt
    # d/dm, with K' = (K - D)/(2(1-m)), E' = -D/2, D' = (D - 2G)/(2(1-m)) combined analytically
    dq = _C1 * (G - 0.5 * D)
    dt = _C2 * (-2.0 * E + 0.5 * (K - D) - (1.0 - ms) * D)
    dtl = (_C2 * (1.5 * K - 0.5 * D - 2.0 * G) - tl) / mt
    # eps = 1 (m = 1): K - D -> E = 1, G - D/2 -> (D - K)/2 = -1/2
    q, t, tl = (jnp.where(one, v, x) for v, x in ((2.0 * _C1, q), (2.0 * _C2, t), (2.0 * _C2, tl)))
    dq, dt, dtl = (
        jnp.where(one, v, x) for v, x in ((-0.5 * _C1, dq), (-1.5 * _C2, dt), (0.5 * _C2, dtl))
    )
    return (q, t, tl), (dq * dm, dt * dm, dtl * dm)


def uniform_small(eps: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Uniform pressure, eps <= 1: (Q_eps1/eps, T_eps1) of (59)-(60)."""
    qs, ts, _ = _uniform_closed(eps * eps)
    return qs, ts


def uniform_large(y: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Uniform pressure, eps >= 1, as functions of y = 1/eps: (Q_eps2, T_eps2 * eps) of (59)-(60)."""
    m = y * y
    ql, _, tl_closed = _uniform_closed(m)
    tl = jnp.where(m < _M_CLOSED, _horner(_U_TL, m), tl_closed)
    return ql, tl


def hertz_small(eps: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Hertz pressure, eps <= 1: (Q_eps1/eps, T_eps1) of (62)-(63)."""
    e2 = eps * eps
    return 3.0 * jnp.pi / 32.0 * (4.0 - e2), (3.0 * e2 * e2 - 8.0 * e2 + 8.0) / 8.0


@jax.custom_jvp
def _hertz_closed(x) -> tuple[Array, Array]:
    """(Q_eps2, T_eps2 * eps) of (62)-(63) at x = y = 1/eps in (0, 1], by the closed forms."""
    return _hertz_closed_jvp((x,), (jnp.zeros_like(x),))[0]


@_hertz_closed.defjvp
def _hertz_closed_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    x2 = x * x
    root = jnp.sqrt(jnp.clip(1.0 - x2, 0.0))
    asn = jnp.arcsin(x)
    ql = 3.0 / 16.0 * ((4.0 * x2 - 1.0) / (x2 * x) * asn + (1.0 + 2.0 * x2) / x2 * root)
    tl = (
        (3.0 - 8.0 * x2 + 8.0 * x2 * x2) / (x2 * x2 * x) * asn + (6.0 * x2 - 3.0) / (x2 * x2) * root
    ) / (4.0 * jnp.pi)
    # d/dx with the 1/sqrt(1 - x^2) terms of arcsin' and sqrt' cancelled analytically
    dql = 3.0 / 16.0 * ((3.0 - 4.0 * x2) / (x2 * x2) * asn + (2.0 * x2 - 3.0) / (x2 * x) * root)
    dtl = (
        (-15.0 + 24.0 * x2 - 8.0 * x2 * x2) / (x2 * x2 * x2) * asn
        + (15.0 - 14.0 * x2) / (x2 * x2 * x) * root
    ) / (4.0 * jnp.pi)
    # x = 1 (eps = 1): values of the eps <= 1 branch, Q = 9 pi/32, T = 3/8
    one = x >= 1.0
    ql = jnp.where(one, 9.0 * jnp.pi / 32.0, ql)
    tl = jnp.where(one, 3.0 / 8.0, tl)
    return (ql, tl), (dql * dx, dtl * dx)


def hertz_large(y: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Hertz pressure, eps >= 1, as functions of y = 1/eps: (Q_eps2, T_eps2 * eps) of (62)-(63)."""
    series = y < _Y_SWITCH
    ql_c, tl_c = _hertz_closed(jnp.where(series, 0.75, jnp.minimum(y, 1.0)))
    y2 = y * y
    ql = jnp.where(series, _horner(_H_Q, y2), ql_c)
    tl = jnp.where(series, _horner(_H_TL, y2), tl_c)
    return ql, tl


class ExactUniform(EpsLaw):
    """Exact law of a circular contact with uniform pressure (56): (57)-(60), kappa = 2R/3 (76).

    ``ExactUniform(mu=1, P=1, R=1, rho="kappa")``; rho may be a number, 'R' or 'kappa'.
    """

    def __init__(self, mu=1.0, P=1.0, R=1.0, rho="kappa"):
        self.mu, self.P, self.R = mu, P, R
        self.kappa = kappa_for("uniform", R)
        self.rho = resolve_rho(rho, R, self.kappa)

    def small(self, eps):
        """(Q_eps1/eps, T_eps1) of (59)-(60)."""
        return uniform_small(eps)

    def large(self, y):
        """(Q_eps2, T_eps2*eps) of (59)-(60) at y = 1/eps."""
        return uniform_large(y)


class ExactHertz(EpsLaw):
    """Exact law of a circular contact with Hertz pressure (61): (62)-(63), kappa = 3 pi R/16 (77)."""

    def __init__(self, mu=1.0, P=1.0, R=1.0, rho="kappa"):
        self.mu, self.P, self.R = mu, P, R
        self.kappa = kappa_for("hertz", R)
        self.rho = resolve_rho(rho, R, self.kappa)

    def small(self, eps):
        """(Q_eps1/eps, T_eps1) of (62)-(63)."""
        return hertz_small(eps)

    def large(self, y):
        """(Q_eps2, T_eps2*eps) of (62)-(63) at y = 1/eps."""
        return hertz_large(y)


def exact_law(pressure: str, **kw) -> EpsLaw:
    """The exact law for ``pressure`` = 'uniform' (57)-(60) or 'hertz' (61)-(63)."""
    if pressure == "uniform":
        return ExactUniform(**kw)
    if pressure == "hertz":
        return ExactHertz(**kw)
    raise ValueError(f"pressure = {pressure!r} must be 'uniform' or 'hertz'")
