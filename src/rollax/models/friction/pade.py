"""Pade (rational) friction model in the slip-spin ratio eps, Kireenkov/Zhuravlev type.

Degree n >= 2 (Zhuravlev & Kireenkov's construction, cf. the paper's Fig. 10 and [50]):

    Q(eps) = eps (p_0 + p_1 eps + ... + p_{n-1} eps^(n-1)) / (1 + q_1 eps + ... + q_n eps^n)
    T(eps) = (1 + r_1 eps + ... + r_{n-1} eps^(n-1)) / (1 + s_1 eps + ... + s_n eps^n)

constrained to reproduce the exact law's values *and slopes* at pure spin (eps = 0) and at pure
slip (eps -> inf): Q(0) = 0, Q'(0) = alpha, Q(inf) = 1, eps (Q - 1) -> beta; T(0) = 1,
T'(0) = delta, T(inf) = 0, eps T -> gamma. That leaves 2n - 3 free parameters per function
(``free_q``, ``free_t``): for n = 2, q_2 and s_2; for n >= 3, (q_1..q_n, p_1..p_{n-3}) and
(s_1..s_n, r_2..r_{n-2}). Degree 1 is Zhuravlev's Q = alpha eps/(1 + alpha eps),
T = 1/(1 + eps/gamma) (no free parameter; slopes matched only at eps = 0 for Q, eps = inf for T).

:meth:`PadeModel.from_law` fixes the free parameters by collocation at eps = 1 (n = 2); other
degrees are fitted by gradient in :mod:`rollax.analysis.friction_fit`. The rational functions have no
pole on eps >= 0 as long as the denominators stay positive (checked by :meth:`poles_free`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax._core._system import parameter
from rollax.models.friction.base import EpsLaw


def n_free(degree: int) -> int:
    """Number of free parameters per function (force or torque) of a degree-n Pade model."""
    return 0 if degree == 1 else (1 if degree == 2 else 2 * degree - 3)


def _q_coeffs(n, free, alpha, beta):
    """(p_0..p_{n-1}), (1, q_1..q_n) from the free parameters and the end conditions."""
    if n == 1:
        return jnp.stack([alpha]), jnp.stack([1.0, alpha])
    if n == 2:
        q2 = free[0]
        q1 = alpha - beta * q2
        return jnp.stack([alpha, q2]), jnp.stack([1.0, q1, q2])
    q = free[:n]
    pm = free[n:]  # p_1..p_{n-3}
    p = jnp.concatenate([jnp.stack([alpha]), pm, jnp.stack([q[n - 2] + beta * q[n - 1], q[n - 1]])])
    return p, jnp.concatenate([jnp.ones(1), q])


def _t_coeffs(n, free, gamma, delta):
    """(1, r_1..r_{n-1}), (1, s_1..s_n) from the free parameters and the end conditions."""
    if n == 1:
        return jnp.ones(1), jnp.stack([1.0, 1.0 / gamma])
    if n == 2:
        s2 = free[0]
        r1 = gamma * s2
        return jnp.stack([1.0, r1]), jnp.stack([1.0, r1 - delta, s2])
    s = free[:n]
    rm = free[n:]  # r_2..r_{n-2}
    r = jnp.concatenate([jnp.ones(1), jnp.stack([s[0] + delta]), rm, jnp.stack([gamma * s[n - 1]])])
    if n == 3:
        r = jnp.stack([1.0, s[0] + delta, gamma * s[2]])
    return r, jnp.concatenate([jnp.ones(1), s])


def _poly(c, x):
    acc = jnp.zeros_like(x) + c[-1]
    for k in range(c.shape[0] - 2, -1, -1):
        acc = acc * x + c[k]
    return acc


class PadeModel(EpsLaw):
    """Rational (Pade) law of degree ``n`` in eps, matching values and slopes at both ends."""

    free_q: Float[Array, " k"] = parameter(shape=("k",), convert=False)
    free_t: Float[Array, " k"] = parameter(shape=("k",), convert=False)
    alpha: float = parameter(convert=False)
    beta: float = parameter(convert=False)
    gamma: float = parameter(convert=False)
    delta: float = parameter(convert=False)

    def __init__(
        self, free_q, free_t, alpha, beta, gamma, delta, mu=1.0, P=1.0, R=1.0, rho=None, kappa=None
    ):
        self.free_q = jnp.atleast_1d(jnp.asarray(free_q, dtype=jnp.float64))
        self.free_t = jnp.atleast_1d(jnp.asarray(free_t, dtype=jnp.float64))
        if self.free_q.shape != self.free_t.shape or self.free_q.ndim != 1:
            raise ValueError(
                f"free_q and free_t must be 1-d of equal length, got {self.free_q.shape}, {self.free_t.shape}"
            )
        if self.free_q.shape[0] not in (0, 1) and (self.free_q.shape[0] + 3) % 2:
            raise ValueError(
                f"{self.free_q.shape[0]} free parameters match no degree (0, 1 or 2n-3)"
            )
        self.alpha, self.beta, self.gamma, self.delta = alpha, beta, gamma, delta
        self.mu, self.P, self.R = mu, P, R
        self.kappa = kappa if kappa is not None else 2.0 * R / 3.0
        self.rho = self.kappa if rho is None else rho

    @property
    def degree(self) -> int:
        """The degree n."""
        k = int(self.free_q.shape[0])
        return {0: 1, 1: 2}.get(k, (k + 3) // 2)

    @staticmethod
    def end_conditions(law) -> tuple[float, float, float, float]:
        """(alpha, beta, gamma, delta) of ``law``: Q'(0), lim eps(Q-1), lim eps T, T'(0), by autodiff."""
        alpha = law.small(jnp.float64(0.0))[0]
        beta = -jax.grad(lambda y: law.large(y)[0])(jnp.float64(0.0))
        gamma = law.large(jnp.float64(0.0))[1]
        delta = jax.grad(lambda e: law.small(e)[1])(jnp.float64(0.0))
        return float(alpha), float(beta), float(gamma), float(delta)

    @staticmethod
    def from_law(law, degree: int = 2) -> "PadeModel":
        """Degree 1 or 2 Pade model of an eps-law: end conditions exact, free parameter by
        collocation at eps = 1 (n = 2). Higher degrees: :func:`rollax.analysis.friction_fit.fit_pade`."""
        if degree not in (1, 2):
            raise ValueError(
                f"degree = {degree!r}: from_law builds degree 1 or 2; use fit_pade for more"
            )
        alpha, beta, gamma, delta = PadeModel.end_conditions(law)
        kw = dict(mu=law.mu, P=law.P, R=law.R, rho=law.rho, kappa=law.kappa)
        if degree == 1:
            return PadeModel(jnp.zeros(0), jnp.zeros(0), alpha, beta, gamma, delta, **kw)
        q1 = float(law.Q_eps(1.0))
        t1 = float(law.T_eps(1.0))
        q2 = (q1 * (1.0 + alpha) - alpha) / (1.0 - q1 * (1.0 - beta))
        s2 = (t1 * (1.0 - delta) - 1.0) / (gamma - t1 * (1.0 + gamma))
        return PadeModel([q2], [s2], alpha, beta, gamma, delta, **kw)

    def coefficients(self):
        """((p), (1, q), (1, r), (1, s)) of the rational functions, lowest power first."""
        n = self.degree
        p, q = _q_coeffs(n, self.free_q, self.alpha, self.beta)
        r, s = _t_coeffs(n, self.free_t, self.gamma, self.delta)
        return p, q, r, s

    def small(self, eps):
        """(Q/eps, T) on eps <= 1 from the rational forms."""
        p, q, r, s = self.coefficients()
        return _poly(p, eps) / _poly(q, eps), _poly(r, eps) / _poly(s, eps)

    def large(self, y):
        """(Q, T eps) at y = 1/eps: the rational forms multiplied through by y^n."""
        p, q, r, s = self.coefficients()
        # eps p(eps)/q(eps) = (y^(n-1) p(1/y)) / (y^n q(1/y)); reversed coefficient order.
        qq = _poly(p[::-1], y) / _poly(q[::-1], y)
        tt = _poly(r[::-1], y) / _poly(s[::-1], y)
        return qq, tt

    def poles_free(self, n_check: int = 2001) -> bool:
        """True when both denominators stay positive on eps in [0, inf) (checked on a grid)."""
        x = jnp.linspace(0.0, 1.0, n_check)
        _, q, _, s = self.coefficients()
        ok = (_poly(q, x) > 0).all() & (_poly(q[::-1], x[1:]) > 0).all()
        ok = ok & (_poly(s, x) > 0).all() & (_poly(s[::-1], x[1:]) > 0).all()
        return bool(ok)
