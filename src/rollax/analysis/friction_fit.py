"""Gradient fitting (optax) of the harmonic (82) and Pade models, and parameter identification.

Objective for a law: the L2 distance of the normalised force and torque over the latitude
theta in [0, pi/2] (49), J = int (Q_model - Q)^2 + (T_model - T)^2 dtheta, discretised by
Gauss-Legendre split at eps = 1. For the harmonic model this is exactly the least-squares
problem whose minimiser is the Fourier coefficients (83) (the odd harmonics are orthogonal on
[0, pi/2]), so the gradient fit must reproduce the quadrature coefficients. Sampled force
data (theta_k, Q_k, T_k) can be fitted instead with :func:`fit_harmonic_samples`.

:func:`identify_disc` recovers mu and the harmonic coefficients from a noisy disc trajectory
(13) by gradient through the diffrax solver.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from rollax._core._validate import check_integer
from rollax.models.friction.harmonic import HarmonicModel, check_degree
from rollax.models.friction.pade import PadeModel, n_free
from rollax.models.friction.sliding import SlidingBody


def theta_nodes(law, n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes/weights on [0, pi/2], split at theta_1 = atan(rho/R) (eps = 1)."""
    th1 = math.atan(float(law.rho) / float(law.R))
    x, w = np.polynomial.legendre.leggauss(n)
    th, wt = [], []
    for a, b in ((0.0, th1), (th1, 0.5 * math.pi)):
        th.append(0.5 * (b - a) * (x + 1) + a)
        wt.append(0.5 * (b - a) * w)
    return np.concatenate(th), np.concatenate(wt)


def _minimise(loss, params, iters: int):
    """Run optax L-BFGS (with its zoom line search) for ``iters`` iterations under jit."""
    opt = optax.lbfgs()
    vg = optax.value_and_grad_from_state(loss)

    @jax.jit
    def run(params):
        def step(carry, _):
            p, st = carry
            value, grad = vg(p, state=st)
            upd, st = opt.update(grad, st, p, value=value, grad=grad, value_fn=loss)
            return (optax.apply_updates(p, upd), st), value

        (p, _), hist = jax.lax.scan(step, (params, opt.init(params)), None, length=iters)
        return p, hist

    return run(params)


def fit_harmonic_samples(
    theta, Q, T, weights, N: int, iters: int = 60, **model_kw
) -> tuple[HarmonicModel, float]:
    """Fit the degree-N harmonic model (82) to samples (theta_k, Q_k, T_k) with weights w_k.

    Minimises sum_k w_k [(Q(theta_k) - Q_k)^2 + (T(theta_k) - T_k)^2] by L-BFGS (optax).
    Returns the model (built with ``model_kw``) and the final objective.
    """
    N = check_degree("N", N)
    iters = check_integer("iters", iters, 1)
    theta, Q, T, weights = (jnp.asarray(v, dtype=jnp.float64) for v in (theta, Q, T, weights))
    k = 2 * jnp.arange(1, N + 1) - 1
    cosm = jnp.cos(k[None, :] * theta[:, None])
    sinm = jnp.sin(k[None, :] * theta[:, None])

    def loss(p):
        c, s = p
        return jnp.sum(weights * ((cosm @ c - Q) ** 2 + (sinm @ s - T) ** 2))

    p0 = (jnp.zeros(N).at[0].set(1.0), jnp.zeros(N).at[0].set(1.0))
    (c, s), hist = _minimise(loss, p0, iters)
    return HarmonicModel(c, s, **model_kw), float(hist[-1])


def fit_harmonic(law, N: int, n_nodes: int = 64, iters: int = 60) -> tuple[HarmonicModel, float]:
    """Gradient fit of the degree-N harmonic model to an axisymmetric ``law`` (objective above)."""
    N = check_degree("N", N)
    n_nodes = check_integer("n_nodes", n_nodes, 1)
    iters = check_integer("iters", iters, 1)
    th, wt = theta_nodes(law, n_nodes)
    q, t = _profile(law, jnp.asarray(th))
    kw = dict(mu=law.mu, P=law.P, R=law.R, rho=law.rho, kappa=law.kappa)
    return fit_harmonic_samples(th, q, t, wt, N, iters, **kw)


@eqx.filter_jit
def _profile(law, th):
    return law.Q_theta(th), law.T_theta(th)


def fit_pade(law, degree: int, n_nodes: int = 64, iters: int = 200) -> tuple[PadeModel, float]:
    """Gradient fit of the free parameters of a degree-n Pade model to an exact eps-``law``.

    The end conditions (values and slopes at eps = 0 and eps = inf) are imposed exactly
    (:mod:`.pade`); the 2n - 3 free parameters per function minimise the theta-objective.
    Degree 2 starts from the eps = 1 collocation, higher degrees from the fit one lower
    (the new denominator terms start at a small positive value).
    """
    degree = check_degree("degree", degree, 2)  # degree 1 has no free parameter
    n_nodes = check_integer("n_nodes", n_nodes, 1)
    iters = check_integer("iters", iters, 1)
    th, wt = theta_nodes(law, n_nodes)
    q, t = _profile(law, jnp.asarray(th))
    wt = jnp.asarray(wt)
    alpha, beta, gamma, delta = PadeModel.end_conditions(law)
    kw = dict(mu=law.mu, P=law.P, R=law.R, rho=law.rho, kappa=law.kappa)

    def build(p):
        return PadeModel(p[0], p[1], alpha, beta, gamma, delta, **kw)

    if degree == 2:
        m0 = PadeModel.from_law(law, 2)
        p0 = (m0.free_q, m0.free_t)
    else:
        prev, _ = fit_pade(law, degree - 1, n_nodes, iters)
        p0 = (_grow(prev.free_q, degree, "q"), _grow(prev.free_t, degree, "t"))

    def loss(p):
        m = build(p)
        return jnp.sum(wt * ((m.Q_theta(th) - q) ** 2 + (m.T_theta(th) - t) ** 2))

    p, hist = _minimise(loss, p0, iters)
    return build(p), float(hist[-1])


def _grow(free, degree, which):
    """Initial free parameters of degree n from those of degree n - 1 (approximately the same law)."""
    k = n_free(degree)
    out = np.full(k, 0.1)
    old = np.asarray(free)
    if degree == 3:  # from (q2) to (q1, q2, q3): keep q2 as the leading denominator term
        out[:] = [0.5, old[0], 0.1]
        return jnp.asarray(out)
    n_old = degree - 1
    out[:n_old] = old[:n_old]  # q_1..q_{n-1}
    out[degree - 1] = 0.1  # q_n
    out[degree:] = np.concatenate([old[n_old:], [0.1]])[: k - degree]
    return jnp.asarray(out)


def fit_error(model, law, n_nodes: int = 64) -> dict:
    """RMS and max errors of Q and T of ``model`` against ``law`` over theta in [0, pi/2]."""
    th, wt = theta_nodes(law, n_nodes)
    th = jnp.asarray(th)
    q, t = _profile(law, th)
    qm, tm = _profile(model, th)
    dq, dt = np.asarray(qm - q), np.asarray(tm - t)
    scale = 2.0 / math.pi
    return {
        "rms_Q": float(np.sqrt(scale * np.sum(wt * dq**2))),
        "rms_T": float(np.sqrt(scale * np.sum(wt * dt**2))),
        "max_Q": float(np.abs(dq).max()),
        "max_T": float(np.abs(dt).max()),
    }


# ------------------------------------------------------------------ parameter identification
def constrained_harmonic(mu, c_free, s_free, **kw) -> HarmonicModel:
    """Harmonic model whose pure-slip and pure-spin values are exact, Q(0) = T(pi/2) = 1 (51):
    c_1 = 1 - sum_{i>=2} c_i, s_1 = 1 - sum_{i>=2} (-1)^(i-1) s_i. With this normalisation mu is
    identifiable separately from the coefficients (otherwise only mu*c_i, mu*s_i are)."""
    c_free = jnp.atleast_1d(c_free)
    s_free = jnp.atleast_1d(s_free)
    sign = (-1.0) ** jnp.arange(1, s_free.shape[0] + 1)
    c = jnp.concatenate([jnp.stack([1.0 - jnp.sum(c_free)]), c_free])
    s = jnp.concatenate([jnp.stack([1.0 - jnp.sum(sign * s_free)]), s_free])
    return HarmonicModel(c, s, mu=mu, **kw)


def disc_trajectory(body: SlidingBody, x0, ts, rtol: float = 1e-10, atol: float = 1e-12):
    """x_o(t) of the disc/ball (13)/(18) at the times ``ts`` (before the stop), on
    :func:`rollax.solve` (DOPRI5)."""
    from rollax._drivers._flows import run

    sol = run(
        lambda t, x, b: b.rhs(x),
        x0,
        0.0,
        ts[-1],
        args=body,
        ts=ts,
        rtol=rtol,
        atol=atol,
        max_steps=4096,
        solver="dopri5",
    )
    assert sol.ys is not None  # (saved at ts)
    return sol.ys


def identify_disc(
    ts: Float[Array, " n"],
    xs: Float[Array, "n 3"],
    x0: Float[Array, "3"],
    N: int,
    mu0: float = 0.5,
    law_kw: dict | None = None,
    iters: int = 40,
    F: float = 0.0,
) -> tuple[float, np.ndarray, np.ndarray, float]:
    """Recover mu and the harmonic coefficients (c, s) of degree N from disc trajectories.

    ``x0`` is one initial slip (3,) with ``xs`` (n, 3), or several (k, 3) with ``xs`` (k, n, 3);
    trajectories that start at different slip-spin ratios make the problem well conditioned
    (one trajectory leaves a shallow valley between mu and the coefficients).

    Least squares of the simulated x_o(t_k) against the data ``xs``, gradient through the
    diffrax solver, L-BFGS (optax). The model is :func:`constrained_harmonic` (identifiable);
    ``law_kw`` gives P, R, rho, kappa (P = m g with m = 1). Returns (mu, c, s, final loss).
    """
    law_kw = dict(law_kw or {})
    ts = jnp.asarray(ts, dtype=jnp.float64)
    xs = jnp.asarray(xs, dtype=jnp.float64)

    def model(p):
        return constrained_harmonic(p[0], p[1], p[2], **law_kw)

    x0 = jnp.asarray(x0, dtype=jnp.float64)
    batch = x0.ndim == 2  # several trajectories: x0 (k, 3), xs (k, n, 3)

    def loss(p):
        body = SlidingBody(model(p), F=F)
        sim = lambda x: disc_trajectory(body, x, ts, rtol=1e-8, atol=1e-10)  # noqa: E731
        pred = jax.vmap(sim)(x0) if batch else sim(x0)
        return jnp.mean((pred - xs) ** 2)

    p0 = (jnp.float64(mu0), jnp.zeros(N - 1), jnp.zeros(N - 1))
    p, hist = _minimise(loss, p0, iters)
    m = model(p)
    return float(p[0]), np.asarray(m.c), np.asarray(m.s), float(hist[-1])
