"""Prescribed accelerations of the internal masses, ``u(t) = theta''(t)`` (Sect. 5-6).

Each control is an equinox module: its numeric parameters are array fields (so gradients with
respect to them work), and its break points are static ``kinks``: times where ``u`` or one of
its derivatives jumps. The integrators stop and restart there (diffrax ``jump_ts``), so no
Runge-Kutta step straddles a kink.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax._core._system import check_parameters, parameter
from rollax._core._validate import check_range


def _as_array(x):
    return jnp.asarray(x, dtype=float)


def _check_increasing(name: str, ts: tuple[float, ...]) -> None:
    if len(ts) < 2 or any(not b > a for a, b in zip(ts[:-1], ts[1:])):
        raise ValueError(f"{name} = {ts} must be at least two strictly increasing times")


class Control(eqx.Module):
    """Base class: ``control(t) -> u(t)``, one acceleration per mass."""

    def __check_init__(self):
        check_parameters(self)

    @abc.abstractmethod
    def __call__(self, t: Float[Array, ""]) -> Float[Array, " n"]:
        """``u(t) = theta''(t)`` (5.2), (6.4)."""

    @property
    @abc.abstractmethod
    def n(self) -> int:
        """Number of masses driven."""

    @property
    @abc.abstractmethod
    def kinks(self) -> tuple[float | Float[Array, ""], ...] | Float[Array, " k"]:
        """Times at which ``u`` is not smooth (integration stops and restarts there)."""


class ZeroControl(Control):
    """Masses moving at constant rate along their rails (``u = 0``); frozen if ``theta' = 0``."""

    size: int = eqx.field(static=True)

    def __call__(self, t):
        return jnp.zeros(self.size)

    @property
    def n(self):
        return self.size

    @property
    def kinks(self):
        return ()


class RampControl(Control):
    """The paper's ramp (5.5)/(6.11): ``u_i = a_i`` for ``start <= t <= t_flat``, falling
    linearly to 0 at ``t_end``, and 0 afterwards (and before ``start``).

    The disk example uses ``a = (-1)^i`` (5.5); the ball example ``a = 1`` (6.11); both with
    ``t_flat = 0.1``, ``t_end = 0.2``.
    """

    amplitude: Float[Array, " n"] = parameter(shape=("n",))
    t_flat: float = eqx.field(static=True, default=0.1)
    t_end: float = eqx.field(static=True, default=0.2)
    start: float = eqx.field(static=True, default=0.0)

    def __check_init__(self):
        if jnp.ndim(self.amplitude) != 1:
            raise ValueError(
                f"amplitude must be a 1-d array, got shape {jnp.shape(self.amplitude)}"
            )
        check_range("t_flat", self.t_flat, self.start, float("inf"), lo_open=True)
        check_range("t_end", self.t_end, self.t_flat, float("inf"), lo_open=True)

    def profile(self, t):
        """The scalar ramp of Fig. 5.1 (1, then linear down to 0, then 0)."""
        down = (self.t_end - t) / (self.t_end - self.t_flat)
        return jnp.where(
            t < self.start, 0.0, jnp.where(t <= self.t_flat, 1.0, jnp.clip(down, 0.0, 1.0))
        )

    def __call__(self, t):
        return self.amplitude * self.profile(t)

    @property
    def n(self):
        return self.amplitude.shape[0]

    @property
    def kinks(self):
        return (self.start, self.t_flat, self.t_end)


class PiecewisePolynomialControl(Control):
    """``u(t) = sum_p coeffs[k, p] (t - breaks[k])^p`` on ``[breaks[k], breaks[k+1])``, zero
    outside ``[breaks[0], breaks[-1]]``. ``coeffs`` has shape ``(K, P, n)``."""

    coeffs: Float[Array, "K P n"] = parameter(shape=("K", "P", "n"))
    breaks: tuple[float, ...] = eqx.field(  # pyright: ignore[reportGeneralTypeIssues]  (the parameters above have no default)
        static=True, converter=lambda b: tuple(float(x) for x in b)
    )

    def __check_init__(self):
        _check_increasing("breaks", self.breaks)
        if jnp.ndim(self.coeffs) != 3 or self.coeffs.shape[0] != len(self.breaks) - 1:
            raise ValueError(
                f"coeffs must have shape (K, P, n) with K = len(breaks) - 1 = "
                f"{len(self.breaks) - 1}, got {jnp.shape(self.coeffs)}"
            )

    def __call__(self, t):
        b = jnp.asarray(self.breaks)
        K = len(self.breaks) - 1
        k = jnp.clip(jnp.searchsorted(b, t, side="right") - 1, 0, K - 1)
        tau = t - b[k]
        c = self.coeffs[k]  # (P, n)
        u = c[-1]
        for p in range(c.shape[0] - 2, -1, -1):  # Horner
            u = u * tau + c[p]
        inside = (t >= b[0]) & (t <= b[-1])
        return jnp.where(inside, u, 0.0)

    @property
    def n(self):
        return self.coeffs.shape[2]

    @property
    def kinks(self):
        return self.breaks


class SplineControl(Control):
    """Natural cubic spline through ``values[k]`` at ``knots[k]`` (``values`` shape ``(K+1, n)``),
    zero outside ``[knots[0], knots[-1]]``. Differentiable with respect to ``values``."""

    values: Float[Array, "K1 n"] = parameter(shape=("K1", "n"))
    knots: tuple[float, ...] = eqx.field(  # pyright: ignore[reportGeneralTypeIssues]  (the parameters above have no default)
        static=True, converter=lambda b: tuple(float(x) for x in b)
    )

    def __check_init__(self):
        _check_increasing("knots", self.knots)
        if jnp.ndim(self.values) != 2 or self.values.shape[0] != len(self.knots):
            raise ValueError(
                f"values must have shape (len(knots), n) = ({len(self.knots)}, n), "
                f"got {jnp.shape(self.values)}"
            )

    def second_derivatives(self) -> Float[Array, "K1 n"]:
        """Spline second derivatives at the knots (natural end conditions M_0 = M_K = 0)."""
        x = jnp.asarray(self.knots)
        y = self.values
        K = x.shape[0] - 1
        if K < 2:
            return jnp.zeros_like(y)
        h = jnp.diff(x)
        slope = jnp.diff(y, axis=0) / h[:, None]
        rhs = 6.0 * (slope[1:] - slope[:-1])  # (K-1, n)
        A = jnp.diag(2.0 * (h[:-1] + h[1:])) + jnp.diag(h[1:-1], 1) + jnp.diag(h[1:-1], -1)
        M = jnp.linalg.solve(A, rhs)
        z = jnp.zeros((1, y.shape[1]))
        return jnp.concatenate([z, M, z], axis=0)

    def __call__(self, t):
        x = jnp.asarray(self.knots)
        K = x.shape[0] - 1
        M = self.second_derivatives()
        k = jnp.clip(jnp.searchsorted(x, t, side="right") - 1, 0, K - 1)
        h = x[k + 1] - x[k]
        a, b = x[k + 1] - t, t - x[k]
        y0, y1, M0, M1 = self.values[k], self.values[k + 1], M[k], M[k + 1]
        s = (
            (M0 * a**3 + M1 * b**3) / (6 * h)
            + (y0 / h - M0 * h / 6) * a
            + (y1 / h - M1 * h / 6) * b
        )
        inside = (t >= x[0]) & (t <= x[-1])
        return jnp.where(inside, s, 0.0)

    @property
    def n(self):
        return self.values.shape[1]

    @property
    def kinks(self):
        return self.knots


def _second_derivatives(K: int):
    """``S`` (NumPy, ``(K + 1, K + 1)``) with ``M = S y``: the second derivatives in ``s`` of
    the natural cubic spline through ``y`` on ``K + 1`` uniform knots of ``[0, 1]``."""
    import numpy as np

    h = 1.0 / K
    S = np.zeros((K + 1, K + 1))
    if K >= 2:
        A = (
            np.diag(np.full(K - 1, 4.0 * h))
            + np.diag(np.full(K - 2, h), 1)
            + np.diag(np.full(K - 2, h), -1)
        )
        D = np.zeros((K - 1, K + 1))  # 6 (slope_{k+1} - slope_k)
        for k in range(K - 1):
            D[k, k : k + 3] = 6.0 / h * np.array([1.0, -2.0, 1.0])
        S[1:-1] = np.linalg.solve(A, D)
    return S


def _cardinal(K: int, s):
    """``E`` (NumPy, ``(len(s), K + 1)``) with ``spline(s) = E y``: the cardinal functions of
    the natural cubic spline on ``K + 1`` uniform knots of ``[0, 1]`` at the points ``s``."""
    import numpy as np

    S = _second_derivatives(K)
    s = np.asarray(s, dtype=float)
    k = np.clip(np.floor(s * K).astype(int), 0, K - 1)
    b = s * K - k
    a = 1.0 - b
    E = ((a**3 - a)[:, None] * S[k] + (b**3 - b)[:, None] * S[k + 1]) / (6 * K**2)
    E[np.arange(s.size), k] += a
    E[np.arange(s.size), k + 1] += b
    return E


def _spline_operators(K: int) -> tuple:
    """For a natural cubic spline on ``K + 1`` uniform knots of ``[0, 1]`` (values ``y``):
    ``S`` with ``M = S y`` (the second derivatives, ``M_0 = M_K = 0``), the integral weights
    ``w`` (``int_0^1 s = w . y``) and the Gram matrix ``Q`` (``int_0^1 s^2 = y . Q y``), all in
    NumPy (static; built once per ``K``)."""
    import numpy as np

    # the cardinal functions at 4 Gauss-Legendre points per interval (exact for the degree-6
    # Gram matrix)
    g, gw = np.polynomial.legendre.leggauss(4)
    s = ((np.arange(K)[:, None] + (g + 1) / 2) / K).ravel()
    wq = np.tile(gw / (2 * K), K)
    E = _cardinal(K, s)
    return _second_derivatives(K), wq @ E, E.T @ (wq[:, None] * E)


def _integrals(K: int, s):
    """``(A1, A2)`` (NumPy, ``(len(s), K + 1)`` each): ``int_0^s spline`` and
    ``int_0^s int_0^s' spline = int_0^s (s - q) spline(q) dq`` at the points ``s`` in
    ``[0, 1]``, for the natural cubic spline through ``y`` on ``K + 1`` uniform knots
    (``A1 y``, ``A2 y``; exact: Gauss-Legendre on each interval)."""
    import numpy as np

    g, gw = np.polynomial.legendre.leggauss(4)
    s = np.asarray(s, dtype=float)
    # whole intervals: int E and int q E, summed up to each knot
    q = (np.arange(K)[:, None] + (g + 1) / 2) / K
    E = _cardinal(K, q.ravel()).reshape(K, 4, K + 1)
    w = gw / (2 * K)
    P0 = np.concatenate([np.zeros((1, K + 1)), np.cumsum(np.einsum("j,kjn->kn", w, E), 0)])
    P1 = np.concatenate([np.zeros((1, K + 1)), np.cumsum(np.einsum("j,kj,kjn->kn", w, q, E), 0)])
    # the part of the interval that holds s
    k = np.clip(np.floor(s * K).astype(int), 0, K - 1)
    lo = k / K
    qp = lo[:, None] + (s - lo)[:, None] * (g + 1) / 2
    wp = (s - lo)[:, None] * gw / 2
    Ep = _cardinal(K, qp.ravel()).reshape(s.size, 4, K + 1)
    I0 = P0[k] + np.einsum("mj,mjn->mn", wp, Ep)
    I1 = P1[k] + np.einsum("mj,mj,mjn->mn", wp, qp, Ep)
    return I0, s[:, None] * I0 - I1


def _rest_basis(K: int):
    """Orthonormal ``(K + 1, K)`` basis of the knot values whose spline integrates to 0."""
    import numpy as np

    _, w, _ = _spline_operators(K)
    _, _, vt = np.linalg.svd(w[None, :])
    return vt[1:].T


class RestToRestControl(Control):
    """Rail accelerations for a rest-to-rest manoeuvre on ``[0, T]``: ``u_i(t)`` is the natural
    cubic spline through values at ``K + 1`` uniform knots, restricted to the ``K``-dimensional
    subspace with ``int_0^T u_i dt = 0``, so a mass that starts at rest (``theta_i'(0) = 0``)
    ends at rest (``theta_i'(T) = 0``) exactly, for any coordinates ``z`` (shape ``(K, n)``).
    Zero outside ``[0, T]``.

    The effort ``int_0^T sum_i u_i^2 dt`` is the exact quadratic form :meth:`effort`.
    """

    z: Float[Array, "K n"] = parameter(shape=("K", "n"))
    T: Float[Array, ""] = parameter()  # traced: one compile for every T

    def __check_init__(self):
        if jnp.ndim(self.z) != 2 or self.z.shape[0] < 2:
            raise ValueError(
                f"z must have shape (K, n) with K >= 2 knot intervals, got {jnp.shape(self.z)}"
            )
        if jnp.ndim(self.T) != 0:
            raise ValueError(f"T must be one number, got shape {jnp.shape(self.T)}")
        check_range("T", self.T, 0.0, float("inf"), lo_open=True, hi_open=True)

    @property
    def K(self) -> int:
        return self.z.shape[0]

    @property
    def n(self):
        return self.z.shape[1]

    @property
    def knots(self) -> tuple[Float[Array, ""], ...]:
        return tuple(self.T * (k / self.K) for k in range(self.K + 1))

    @property
    def kinks(self):
        return self.knots

    def values(self) -> Float[Array, "K1 n"]:
        """``u`` at the knots."""
        return jnp.asarray(_rest_basis(self.K)) @ self.z

    def effort(self) -> Float[Array, ""]:
        """``int_0^T sum_i u_i(t)^2 dt`` (exact)."""
        _, _, Q = _spline_operators(self.K)
        V = self.values()
        return self.T * jnp.sum(V * (jnp.asarray(Q) @ V))

    def __call__(self, t):
        K = self.K
        S = _second_derivatives(K)
        V = self.values()
        M = jnp.asarray(S) @ V  # d2u/ds2 in s = t / T
        s = t / self.T
        k = jnp.clip(jnp.floor(s * K).astype(jnp.int32), 0, K - 1)
        b = s * K - k
        a = 1.0 - b
        u = a * V[k] + b * V[k + 1] + ((a**3 - a) * M[k] + (b**3 - b) * M[k + 1]) / (6 * K**2)
        inside = (t >= 0.0) & (t <= self.T)
        return jnp.where(inside, u, 0.0)
