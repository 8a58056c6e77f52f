"""Nonlinear harmonic friction model of degree N, (82)-(88).

Q(theta) ~ sum_i c_i cos((2i-1) theta), T(theta) ~ sum_i s_i sin((2i-1) theta)   (82)

with theta the latitude of the slip direction (32). In the direction variables it is the
polynomial model (84)-(88): Q = -mu P (w1 C(w3), w2 C(w3), kappa/rho w3 S(w3)) with
C(w3) = sum C_i w3^(2i-2), S(w3) = sum S_i w3^(2i-2). The conversion c -> C, s -> S uses
cos((2i-1)theta) = cos(theta) (-1)^(i-1) U_{2i-2}(sin theta) and
sin((2i-1)theta) = (-1)^(i-1) T_{2i-1}(sin theta) (Chebyshev polynomials), which gives (94)
for N = 2. (docs/physics-notes.md: (96) is misprinted; the polynomial form is used throughout.)
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax._core._system import parameter
from rollax._core._validate import check_integer, check_positive
from rollax.models.friction.base import DirectionLaw


#: Largest degree N of the harmonic model: the power-basis coefficients of (84) grow like
#: 4^N, so higher degrees lose all accuracy in double precision (the CLI's ``--degree`` range).
MAX_DEGREE = 32


def check_degree(name: str, N, lo: int = 1) -> int:
    """``N`` as an ``int`` if it is an integer in ``[lo, MAX_DEGREE]``, else a ``ValueError``."""
    return check_integer(name, N, lo, MAX_DEGREE)


def _cheb(n_max: int):
    """Integer power-basis coefficients of T_n and U_n, n = 0..n_max."""
    T = [np.array([1.0]), np.array([0.0, 1.0])]
    U = [np.array([1.0]), np.array([0.0, 2.0])]
    for P in (T, U):
        for n in range(1, n_max):
            nxt = np.zeros(n + 2)
            nxt[1:] += 2.0 * P[n]
            nxt[:n] -= P[n - 1]
            P.append(nxt)
    return T, U


def conversion_matrices(N: int) -> tuple[np.ndarray, np.ndarray]:
    """Matrices M_C, M_S with C = M_C c and S = M_S s (C_k, S_k the coefficients of w3^(2k-2)), (84)."""
    T, U = _cheb(2 * N)
    MC = np.zeros((N, N))
    MS = np.zeros((N, N))
    for i in range(1, N + 1):
        sgn = (-1.0) ** (i - 1)
        u = U[2 * i - 2]  # even polynomial
        t = T[2 * i - 1]  # odd polynomial
        for k in range(1, i + 1):
            MC[k - 1, i - 1] = sgn * u[2 * k - 2]
            MS[k - 1, i - 1] = sgn * t[2 * k - 1]
    return MC, MS


def _polyval_even(coeffs: Float[Array, " N"], w3: Float[Array, "..."]) -> Float[Array, "..."]:
    z = w3 * w3
    acc = jnp.zeros_like(z) + coeffs[-1]
    for k in range(coeffs.shape[0] - 2, -1, -1):
        acc = acc * z + coeffs[k]
    return acc


@eqx.filter_jit
def _profile(law, th):
    return law.Q_theta(th), law.T_theta(th)


def harmonic_coefficients(law, N: int, n_quad: int = 96) -> tuple[np.ndarray, np.ndarray]:
    """The coefficients c_i, s_i (i = 1..N) of (83) for an axisymmetric ``law``, by quadrature.

    Gauss-Legendre with ``n_quad`` nodes on each side of theta_1 = atan(rho/R) (eps = 1, where
    the exact laws are only C^1); the integrand is analytic on each piece apart from that end.
    """
    N = check_degree("N", N)
    n_quad = check_integer("n_quad", n_quad, 1)
    th1 = math.atan(float(law.rho) / float(law.R))
    x, wq = np.polynomial.legendre.leggauss(n_quad)
    nodes, weights = [], []
    for a, b in ((0.0, th1), (th1, 0.5 * math.pi)):
        nodes.append(0.5 * (b - a) * (x + 1.0) + a)
        weights.append(0.5 * (b - a) * wq)
    th = jnp.asarray(np.concatenate(nodes))
    wt = jnp.asarray(np.concatenate(weights))
    q, t = _profile(law, th)
    k = jnp.arange(1, N + 1)[:, None] * 2 - 1
    c = 4.0 / math.pi * jnp.sum(wt * q * jnp.cos(k * th), axis=1)
    s = 4.0 / math.pi * jnp.sum(wt * t * jnp.sin(k * th), axis=1)
    return np.asarray(c), np.asarray(s)


class HarmonicModel(DirectionLaw):
    """Harmonic model of degree N = len(c), (82)-(88), as a polynomial law in w (87).

    ``HarmonicModel(c, s, mu=1, P=1, R=1, rho=..., kappa=...)`` or :meth:`from_law`.
    """

    c: Float[Array, " N"] = parameter(shape=("N",), convert=False)
    s: Float[Array, " N"] = parameter(shape=("N",), convert=False)

    def __init__(self, c, s, mu=1.0, P=1.0, R=1.0, rho=None, kappa=None):
        self.c = jnp.asarray(c, dtype=jnp.float64)
        self.s = jnp.asarray(s, dtype=jnp.float64)
        if self.c.ndim != 1 or self.c.shape != self.s.shape or self.c.shape[0] < 1:
            raise ValueError(
                f"c and s must be 1-d of equal length >= 1, got {self.c.shape}, {self.s.shape}"
            )
        self.mu, self.P, self.R = mu, P, R
        self.kappa = check_positive("kappa", kappa if kappa is not None else 2.0 * R / 3.0)
        self.rho = self.kappa if rho is None else rho

    @staticmethod
    def from_law(law, N: int, n_quad: int = 96) -> "HarmonicModel":
        """Degree-N model with the Fourier coefficients (83) of ``law`` (same mu, P, R, rho, kappa)."""
        N = check_degree("N", N)
        c, s = harmonic_coefficients(law, N, n_quad)
        return HarmonicModel(c, s, mu=law.mu, P=law.P, R=law.R, rho=law.rho, kappa=law.kappa)

    @property
    def N(self) -> int:
        """Degree of the expansion."""
        return int(self.c.shape[0])

    def C_coeffs(self) -> Float[Array, " N"]:
        """C_1..C_N of (84)-(85) (coefficients of w3^(2i-2)); (94) for N = 2."""
        MC, _ = conversion_matrices(self.N)
        return jnp.asarray(MC) @ self.c

    def S_coeffs(self) -> Float[Array, " N"]:
        """S_1..S_N of (84)-(85); (94) for N = 2."""
        _, MS = conversion_matrices(self.N)
        return jnp.asarray(MS) @ self.s

    def C_w(self, w3):
        """C(w3) = sum C_i w3^(2i-2), (85)."""
        return _polyval_even(self.C_coeffs(), jnp.asarray(w3, dtype=jnp.float64))

    def S_w(self, w3):
        """S(w3) = sum S_i w3^(2i-2), (85)."""
        return _polyval_even(self.S_coeffs(), jnp.asarray(w3, dtype=jnp.float64))

    def Q_theta_series(self, theta):
        """Q(theta) = sum c_i cos((2i-1) theta), the trigonometric form (82)."""
        theta = jnp.asarray(theta, dtype=jnp.float64)
        k = 2 * jnp.arange(1, self.N + 1) - 1
        return jnp.sum(self.c * jnp.cos(k * theta[..., None]), axis=-1)

    def T_theta_series(self, theta):
        """T(theta) = sum s_i sin((2i-1) theta), the trigonometric form (82)."""
        theta = jnp.asarray(theta, dtype=jnp.float64)
        k = 2 * jnp.arange(1, self.N + 1) - 1
        return jnp.sum(self.s * jnp.sin(k * theta[..., None]), axis=-1)
