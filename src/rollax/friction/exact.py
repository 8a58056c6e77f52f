"""Exact friction laws of a circular contact for uniform (56) and Hertz (61) pressure.

Uniform pressure: (57)-(60) with the complete elliptic integrals K, E (NOTES.md errata: the
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
* eps = 1 exactly, uniform: the closed forms are 0*inf there; within 1e-9 of eps = 1 the
  branches use their first-order Taylor polynomial (values 8/(3 pi), 4/(3 pi), slopes
  Q' = 4/(3 pi), T' = -2/pi, derived from dE/dm, dK/dm).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax.friction.base import EpsLaw, kappa_for, resolve_rho
from rollax.friction.elliptic import ellipkde

_NSERIES = 30
_Y_SWITCH = 0.5  # series in y = 1/eps below this (eps > 2)
_PATCH = 1e-9  # half-width of the Taylor patch around eps = 1 (uniform law)


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
    t = [3 * a[k + 2] - 8 * a[k + 1] + 8 * a[k] + 6 * b[k + 1] - 3 * b[k + 2] for k in range(_NSERIES)]
    # Q = 3/16 sum q_k y^(2k);  T*eps = 1/(4 pi) sum t_k y^(2k)
    return tuple(float(3 * c / 16) for c in q), tuple(float(c) / (4 * jnp.pi) for c in t)


def _binom_half(n):
    out = Fraction(1)
    for j in range(n):
        out *= (Fraction(1, 2) - j) / (j + 1)
    return out


_U_TL = _uniform_tl_coeffs()
_H_Q, _H_TL = _hertz_coeffs()


def uniform_small(eps: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Uniform pressure, eps <= 1: (Q_eps1/eps, T_eps1) of (59)-(60)."""
    near = jnp.abs(eps - 1.0) < _PATCH
    e = jnp.where(near, 0.5, eps)
    m = e * e
    K, E, D = ellipkde(m)
    qs = 4.0 / (3.0 * jnp.pi) * (E + K - D)
    ts = 2.0 / (3.0 * jnp.pi) * ((4.0 - 2.0 * m) * E + (m - 1.0) * K)
    d = eps - 1.0
    qs1 = 8.0 / (3.0 * jnp.pi) - 4.0 / (3.0 * jnp.pi) * d  # d/deps (Q/eps) = Q' - Q at 1
    ts1 = 4.0 / (3.0 * jnp.pi) - 2.0 / jnp.pi * d
    return jnp.where(near, qs1, qs), jnp.where(near, ts1, ts)


def uniform_large(y: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Uniform pressure, eps >= 1, as functions of y = 1/eps: (Q_eps2, T_eps2 * eps) of (59)-(60)."""
    near = jnp.abs(y - 1.0) < _PATCH
    series = y < _Y_SWITCH
    mq = jnp.where(near, 0.25, y * y)
    mt = jnp.where(near | series, 0.5625, y * y)
    K, E, D = ellipkde(jnp.stack([mq, mt]))  # one AGM for both arguments
    ql = 4.0 / (3.0 * jnp.pi) * (E[0] + K[0] - D[0])
    K, E, D = K[1], E[1], D[1]
    tl_closed = 2.0 / (3.0 * jnp.pi) * (4.0 * E - 5.0 * K + 3.0 * mt * K + 2.0 * D) / mt
    tl = jnp.where(series, _horner(_U_TL, y * y), tl_closed)
    d = 1.0 - y  # eps - 1 to first order
    ql1 = 8.0 / (3.0 * jnp.pi) + 4.0 / (3.0 * jnp.pi) * d
    tl1 = 4.0 / (3.0 * jnp.pi) - 2.0 / (3.0 * jnp.pi) * d  # d/deps (T eps) = T' + T at 1
    return jnp.where(near, ql1, ql), jnp.where(near, tl1, tl)


def hertz_small(eps: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Hertz pressure, eps <= 1: (Q_eps1/eps, T_eps1) of (62)-(63)."""
    e2 = eps * eps
    return 3.0 * jnp.pi / 32.0 * (4.0 - e2), (3.0 * e2 * e2 - 8.0 * e2 + 8.0) / 8.0


def hertz_large(y: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """Hertz pressure, eps >= 1, as functions of y = 1/eps: (Q_eps2, T_eps2 * eps) of (62)-(63)."""
    series = y < _Y_SWITCH
    x = jnp.where(series | (y >= 1.0), 0.75, y)
    x2 = x * x
    root = jnp.sqrt(1.0 - x2)
    asn = jnp.arcsin(x)
    ql_c = 3.0 / 16.0 * ((4.0 * x2 - 1.0) / (x2 * x) * asn + (1.0 + 2.0 * x2) / x2 * root)
    tl_c = ((3.0 - 8.0 * x2 + 8.0 * x2 * x2) / (x2 * x2 * x) * asn + (6.0 * x2 - 3.0) / (x2 * x2) * root) / (
        4.0 * jnp.pi
    )
    y2 = y * y
    ql = jnp.where(series, _horner(_H_Q, y2), ql_c)
    tl = jnp.where(series, _horner(_H_TL, y2), tl_c)
    # y = 1 (eps = 1): values of the eps <= 1 branch, Q = 9 pi/32, T = 3/8
    ql = jnp.where(y >= 1.0, 9.0 * jnp.pi / 32.0, ql)
    tl = jnp.where(y >= 1.0, 3.0 / 8.0, tl)
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
