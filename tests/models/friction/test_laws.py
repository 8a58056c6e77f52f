"""Friction laws of a circular contact: elliptic integrals, exact laws, quadrature, models."""

import math

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from rollax.friction import (
    Coulomb,
    ExactHertz,
    ExactUniform,
    HarmonicModel,
    LinearEllipsoidal,
    LinearModel,
    PadeModel,
    QuadratureLaw,
    pressure_for,
)
from rollax.models.friction.elliptic import ellipd, ellipe, ellipk


# ---------------------------------------------------------------- elliptic integrals
def test_elliptic_matches_scipy_and_derivatives():
    m = np.concatenate(
        [np.linspace(0, 0.999, 1001), 1 - np.logspace(-15, -3, 60), np.logspace(-200, -3, 30)]
    )
    assert np.max(np.abs(ellipk(m) - sp.ellipk(m)) / sp.ellipk(m)) < 1e-12
    assert np.max(np.abs(ellipe(m) - sp.ellipe(m)) / sp.ellipe(m)) < 1e-12
    mm = m[(m > 1e-2) & (m < 1 - 1e-6)]
    assert np.max(np.abs(ellipd(mm) - (sp.ellipk(mm) - sp.ellipe(mm)) / mm)) < 1e-11
    assert float(ellipe(1.0)) == 1.0
    # autodiff against dK/dm = (E - (1-m) K)/(2 m (1-m)), dE/dm = (E - K)/(2m)
    x = np.array([0.05, 0.3, 0.7, 0.95])
    gk = jax.vmap(jax.grad(ellipk))(jnp.asarray(x))
    ge = jax.vmap(jax.grad(ellipe))(jnp.asarray(x))
    K, E = sp.ellipk(x), sp.ellipe(x)
    np.testing.assert_allclose(gk, (E - (1 - x) * K) / (2 * x * (1 - x)), rtol=1e-12)
    np.testing.assert_allclose(ge, (E - K) / (2 * x), rtol=1e-12)


# ---------------------------------------------------------------- exact laws vs closed forms
mp.mp.dps = 80


def _ref_uniform(e):
    e = mp.mpf(e)
    if e <= 1:
        m = e**2
        q = 4 / (3 * mp.pi) * ((e**2 + 1) * mp.ellipe(m) + (e**2 - 1) * mp.ellipk(m)) / e
        t = 2 / (3 * mp.pi) * ((4 - 2 * e**2) * mp.ellipe(m) + (e**2 - 1) * mp.ellipk(m))
        return q, t
    m = 1 / e**2  # (58) second branch is T_eps2 (docs/physics-notes.md erratum)
    q = 4 / (3 * mp.pi) * ((e**2 + 1) * mp.ellipe(m) - (e**2 - 1) * mp.ellipk(m))
    t = (
        2
        / (3 * mp.pi)
        * ((4 - 2 * e**2) * mp.ellipe(m) + (2 * e**2 - 5 + 3 / e**2) * mp.ellipk(m))
        * e
    )
    return q, t


def _ref_hertz(e):
    e = mp.mpf(e)
    if e <= 1:
        return 3 * mp.pi / 32 * e * (4 - e**2), (3 * e**4 - 8 * e**2 + 8) / 8
    q = 3 / (16 * e) * (e**2 * (4 - e**2) * mp.asin(1 / e) + (e**2 + 2) * mp.sqrt(e**2 - 1))
    t = ((3 * e**4 - 8 * e**2 + 8) * mp.asin(1 / e) + (6 - 3 * e**2) * mp.sqrt(e**2 - 1)) / (
        4 * mp.pi
    )
    return q, t


@pytest.mark.parametrize("law,ref", [(ExactUniform(), _ref_uniform), (ExactHertz(), _ref_hertz)])
def test_exact_laws_match_high_precision_closed_forms(law, ref):
    eps = [1e-6, 0.05, 0.3, 0.7, 0.99, 0.999999, 1.000001, 1.01, 1.5, 2.0, 2.5, 10.0, 1e3, 1e5]
    q = np.asarray(law.Q_eps(jnp.asarray(eps)))
    t = np.asarray(law.T_eps(jnp.asarray(eps)))
    for i, e in enumerate(eps):
        rq, rt = ref(e)
        assert abs(q[i] - float(rq)) < 1e-14 * max(1.0, abs(float(rq))) + 4e-15, (e, q[i], rq)
        assert abs(t[i] - float(rt)) < 1e-14 * abs(float(rt)) + 4e-15, (e, t[i], rt)


def test_uniform_series_with_corrected_coefficients():
    """(78)-(79) with the errata of docs/physics-notes.md (5/384 at eps^6, 3/512 at eps^-5)."""
    law = ExactUniform()
    e = 0.05
    assert abs(float(law.Q_eps(e)) - (e - e**3 / 8 - e**5 / 64)) < 1e-9
    assert (
        abs(float(law.T_eps(e)) - 1.5 * (2 / 3 - e**2 / 2 + 3 * e**4 / 32 + 5 * e**6 / 384)) < 1e-11
    )
    e = 20.0
    assert (
        abs(float(law.Q_eps(e)) - (1 - 1 / (8 * e**2) - 1 / (64 * e**4) - 5 / (1024 * e**6)))
        < 1e-11
    )
    assert (
        abs(float(law.T_eps(e)) - 1.5 * (1 / (4 * e) + 1 / (48 * e**3) + 3 / (512 * e**5))) < 1e-11
    )
    # the printed 1/512 would be off by 2/512 * 1.5 / e^5 = 1.8e-9, far above the tolerance
    assert (
        abs(float(law.T_eps(e)) - 1.5 * (1 / (4 * e) + 1 / (48 * e**3) + 1 / (512 * e**5))) > 1e-9
    )


def test_exact_laws_continuous_and_differentiable_at_eps_one():
    for law in (ExactUniform(), ExactHertz()):
        for f in (law.Q_eps, law.T_eps):
            below, at, above = (float(f(1.0 + d)) for d in (-1e-7, 0.0, 1e-7))
            assert abs(below - at) < 1e-6 and abs(above - at) < 1e-6
            g = jax.vmap(jax.grad(f))(jnp.array([1 - 1e-6, 1.0, 1 + 1e-6]))
            assert np.all(np.isfinite(g)) and np.ptp(np.asarray(g)) < 1e-4
    law = ExactUniform()
    assert abs(float(law.Q_eps(1.0)) - 8 / (3 * math.pi)) < 1e-15
    assert abs(float(law.T_eps(1.0)) - 4 / (3 * math.pi)) < 1e-15


def test_the_two_branches_of_each_exact_law_meet_at_eps_one():
    # issue 63's mutation check: the law takes eps = 1 from its small-eps branch, so the large
    # branch's own value there (x = 1/eps = 1: Hertz's closed form is set to 9 pi/32 and 3/8
    # as limits) went unchecked; ExactHertz().large(1) is public and must meet small(1)
    for law in (ExactUniform(), ExactHertz()):
        small, large = law.small(jnp.asarray(1.0)), law.large(jnp.asarray(1.0))
        np.testing.assert_allclose(np.asarray(large), np.asarray(small), rtol=1e-12)
        near = law.large(jnp.asarray(1.0 - 1e-9))
        np.testing.assert_allclose(np.asarray(near), np.asarray(small), rtol=1e-6)


def _ref_slopes(ref, e, h=mp.mpf("1e-30")):
    """d/deps of (Q_eps, T_eps) from the 80-digit closed forms (central difference, error ~1e-15
    at eps = 1 where the branches meet, ~1e-50 elsewhere)."""
    e = mp.mpf(e)
    hi, lo = ref(e + h), ref(e - h)
    return [float((hi[k] - lo[k]) / (2 * h)) for k in range(2)]


@pytest.mark.parametrize(
    "law,ref",
    [
        (ExactUniform(mu=0.5, P=2.0, rho="R"), _ref_uniform),
        (ExactHertz(mu=0.5, P=2.0, rho="R"), _ref_hertz),
    ],
)
def test_exact_law_gradients_near_eps_one(law, ref):
    """jax.grad in eps and jacfwd / jacrev in the slip variables against 80-digit derivatives of the
    closed forms, within 1e-9 of eps = 1 (where autodiff through the closed forms cancels) and away."""
    eps = np.array([1 - 1e-9, 1 - 1e-6, 1.0, 1 + 1e-9, 1 + 1e-6, 0.5, 2.0])
    gq = np.asarray(jax.vmap(jax.grad(law.Q_eps))(jnp.asarray(eps)))
    gt = np.asarray(jax.vmap(jax.grad(law.T_eps))(jnp.asarray(eps)))
    # slips with |omega| = 1.3 (rho = R: eps = |u|/|omega|); eps = 1 along u_x so that it is exact
    w = np.where(np.arange(eps.size) % 2 == 0, 1.3, -1.3)
    c, s = np.where(eps == 1.0, 1.0, 0.6), np.where(eps == 1.0, 0.0, 0.8)
    x = np.stack([eps * 1.3 * c, eps * 1.3 * s, w], axis=1)
    Jf = np.asarray(jax.vmap(jax.jacfwd(law.force))(jnp.asarray(x)))
    Jr = np.asarray(jax.vmap(jax.jacrev(law.force))(jnp.asarray(x)))
    muP, kr = 0.5 * 2.0, law.kappa / law.rho
    for i, xi in enumerate(x):
        e_in = mp.sqrt(mp.mpf(xi[0]) ** 2 + mp.mpf(xi[1]) ** 2) / abs(
            mp.mpf(xi[2])
        )  # eps of the float slip
        dq, dt = _ref_slopes(ref, eps[i])
        assert abs(gq[i] - dq) < 1e-10 * max(1.0, abs(dq)), (eps[i], gq[i], dq)
        assert abs(gt[i] - dt) < 1e-10 * max(1.0, abs(dt)), (eps[i], gt[i], dt)
        q = float(
            ref(e_in - mp.mpf("1e-60") * (e_in == 1))[0]
        )  # the uniform closed form is 0*inf at 1
        dq, dt = _ref_slopes(ref, e_in)
        u, om, e = xi[:2], xi[2], float(e_in)
        sn = np.hypot(*u)
        de_du, de_dw = e * u / sn**2, -e / om
        J = np.zeros((3, 3))
        J[:2, :2] = -muP * (
            dq * np.outer(u / sn, de_du) + q * (np.eye(2) / sn - np.outer(u, u) / sn**3)
        )
        J[:2, 2] = -muP * dq * u / sn * de_dw
        J[2, :2] = -muP * kr * np.sign(om) * dt * de_du
        J[2, 2] = -muP * kr * np.sign(om) * dt * de_dw
        np.testing.assert_allclose(
            Jf[i], J, rtol=0, atol=1e-10 * np.abs(J).max(), err_msg=f"jacfwd eps={eps[i]}"
        )
        np.testing.assert_allclose(
            Jr[i], J, rtol=0, atol=1e-10 * np.abs(J).max(), err_msg=f"jacrev eps={eps[i]}"
        )


# ---------------------------------------------------------------- quadrature (23) vs exact
@pytest.mark.parametrize(
    "name,exact", [("uniform", ExactUniform(rho=1.0)), ("hertz", ExactHertz(rho=1.0))]
)
def test_exact_against_quadrature_of_23(name, exact):
    """Every eps, the ICR on or near the edge (eps ~ 1) and the switch of rules at eps = 4 included."""
    quad = QuadratureLaw(pressure_for(name), rho=1.0)
    assert abs(float(quad.total_load()) - 1.0) < 1e-12  # (19)
    assert abs(float(quad.kappa()) - exact.kappa) < 1e-12  # (39): (76), (77)
    rng = np.random.default_rng(0)
    near = [
        0.97,
        0.99,
        0.999,
        1 - 1e-6,
        1 - 1e-12,
        1.0,
        1 + 1e-12,
        1 + 1e-6,
        1.001,
        1.01,
        1.05,
        1.1,
    ]
    eps = np.array(
        [0.0, 0.05, 0.2, 0.5, 0.8, 0.95, *near, 1.2, 1.5, 2.0, 4.0, 4.0001, 20.0, 1e4, np.inf]
    )
    phi = rng.uniform(-np.pi, np.pi, eps.size)
    om = rng.choice([-1.0, 1.0], eps.size) * rng.uniform(0.2, 3.0, eps.size)
    fin = np.isfinite(eps)
    u = np.where(fin, eps, 1.0) * np.abs(om)
    om = np.where(fin, om, 0.0)
    x = jnp.asarray(np.stack([u * np.cos(phi), u * np.sin(phi), om], axis=1))
    d = np.abs(np.asarray(jax.vmap(quad.force)(x)) - np.asarray(jax.vmap(exact.force)(x)))
    assert d.max() < 1e-11, dict(zip(eps, d.max(axis=1)))  # load P = mu = 1: relative to mu P


def _adaptive_lines_reference(poly, edge, x_o):
    """(23) for p = poly(x, y) [* sqrt(1 - x^2 - y^2) if edge] on the unit disc, independently:
    lines through the ICR, scipy's adaptive quad in their angle, exact Gauss rules on each chord."""
    from scipy.integrate import quad as squad

    ux, uy, om = x_o
    c = np.array([-uy, ux]) / om
    a, th0 = np.hypot(*c), np.arctan2(c[1], c[0])
    n = 12
    if edge:  # Gauss-Chebyshev of the 2nd kind: sqrt((r+ - r)(r - r-)) is the edge factor
        bt = np.arange(1, n + 1) * np.pi / (n + 1)
        nodes = lambda lo, hw: (
            lo + hw - hw * np.cos(bt),
            hw * hw * np.pi / (n + 1) * np.sin(bt) ** 2,
        )
    else:
        s, w = np.polynomial.legendre.leggauss(n)
        nodes = lambda lo, hw: (lo + hw + hw * s, hw * w)

    def g(psi, k):
        e = np.array([np.cos(th0 + psi), np.sin(th0 + psi)])
        ce, h2 = c @ e, 1.0 - (c[0] * e[1] - c[1] * e[0]) ** 2
        if h2 <= 0.0:
            return 0.0
        r, w = nodes(-ce - np.sqrt(h2), np.sqrt(h2))
        pw = poly(c[0] + r * e[0], c[1] + r * e[1]) * r * w
        return (-np.sum(pw) * e[1], np.sum(pw) * e[0], np.sum(pw * (ce + r)))[k]

    lim = np.pi / 2 if a < 1.0 else np.arcsin(1.0 / a)
    kw = dict(epsabs=1e-11, epsrel=1e-11, limit=400)
    return -np.sign(om) * np.array(
        [squad(g, -lim, 0.0, (k,), **kw)[0] + squad(g, 0.0, lim, (k,), **kw)[0] for k in range(3)]
    )


@pytest.mark.parametrize("edge", [False, True])
def test_quadrature_non_axisymmetric_pressure_against_adaptive(edge):
    """A pressure without symmetry, with a jump or a square-root edge, near and far from eps = 1,
    against an adaptive integration; gradients against central differences at eps = 1."""
    poly = lambda x, y: 1.0 + 0.4 * x - 0.3 * y + 0.25 * x * y
    if edge:
        p = lambda x, y: poly(x, y) * jnp.sqrt(jnp.clip(1.0 - x * x - y * y, 0.0))
    else:
        p = lambda x, y: poly(x, y) * (x * x + y * y <= 1.0)
    law = QuadratureLaw(p)
    eps = np.array([0.3, 0.97, 0.999, 1.0, 1.001, 1.03, 2.5, 6.0])
    ang = np.linspace(0.3, 5.0, eps.size)
    om = np.array([-1.5, 0.7, -0.4, 1.2, 2.0, -0.9, 1.1, -2.0])
    x = np.stack([eps * np.cos(ang), eps * np.sin(ang), om], axis=1)
    x[:, :2] *= np.abs(x[:, 2:])
    x0, h = np.array([0.6, 0.8, 1.0]), 1e-6  # eps = 1, for central differences
    xs = np.concatenate([x, x0 + h * np.eye(3), x0 - h * np.eye(3)])
    got = np.asarray(jax.jit(jax.vmap(law.force))(jnp.asarray(xs)))
    assert np.all(np.isfinite(got))
    for i in range(eps.size):
        np.testing.assert_allclose(
            got[i], _adaptive_lines_reference(poly, edge, x[i]), atol=1e-10, err_msg=str(eps[i])
        )
    if not edge:
        return
    J = np.asarray(jax.jit(jax.jacfwd(law.force))(jnp.asarray(x0)))
    fd = ((got[-6:-3] - got[-3:]) / (2 * h)).T
    np.testing.assert_allclose(J, fd, atol=1e-7)


def test_kappa_values_76_77():
    assert LinearModel("uniform", R=3.0).kappa == pytest.approx(2.0)
    assert LinearModel("hertz", R=16.0).kappa == pytest.approx(3 * math.pi)
    assert ExactUniform(R=1.5).kappa == pytest.approx(1.0)


# ---------------------------------------------------------------- property tests on every law
_U = ExactUniform()
_LAWS = {
    "exact-uniform": _U,
    "exact-hertz": ExactHertz(rho="R"),
    "linear": LinearModel("uniform"),
    "harmonic": HarmonicModel.from_law(_U, 3),
    "pade": PadeModel.from_law(_U, 2),
    "quadrature": QuadratureLaw(pressure_for("hertz"), rho=0.7),
    "coulomb": Coulomb(mu=0.3, P=2.0),
}


def _transforms(x, lam, alpha):
    ca, sa = jnp.cos(alpha), jnp.sin(alpha)
    rot = jnp.array([x[0] * ca - x[1] * sa, x[0] * sa + x[1] * ca, x[2]])
    return jnp.stack([x, lam * x, x * jnp.array([1, 1, -1.0]), x * jnp.array([-1, -1, 1.0]), rot])


_EVAL = {
    k: jax.jit(lambda x, lam, a, law=law: jax.vmap(law.force)(_transforms(x, lam, a)))
    for k, law in _LAWS.items()
}

_coord = st.floats(-3, 3, allow_nan=False).filter(lambda v: abs(v) > 1e-3)


@pytest.mark.parametrize("name", list(_LAWS))
@settings(max_examples=25, deadline=None)
@given(ux=_coord, uy=_coord, w=_coord, lam=st.floats(1e-3, 1e3), alpha=st.floats(-3.14, 3.14))
def test_homogeneity_and_symmetries(name, ux, uy, w, lam, alpha):
    """(24), (42), (43), (44), (45) on random slips."""
    x = jnp.array([ux, uy, w])
    out = np.asarray(_EVAL[name](x, lam, alpha))
    tol = 1e-12 * max(1.0, np.abs(out).max())
    q, q_lam, q_negw, q_negu, q_rot = out
    np.testing.assert_allclose(q_lam, q, atol=tol)  # (24)
    np.testing.assert_allclose(q_negw, q * np.array([1, 1, -1]), atol=tol)  # (42)
    np.testing.assert_allclose(q_negu, q * np.array([-1, -1, 1]), atol=tol)  # (43)
    assert abs(q[0] * uy - q[1] * ux) < tol * 10  # (44)
    ca, sa = math.cos(alpha), math.sin(alpha)
    np.testing.assert_allclose(
        q_rot, [q[0] * ca - q[1] * sa, q[0] * sa + q[1] * ca, q[2]], atol=tol
    )  # (45)
    # dissipation: friction opposes the slip
    assert q @ np.asarray(x) < 0


@pytest.mark.parametrize("name", [k for k in _LAWS if k != "coulomb"])
def test_limits_40_41_47_51_55(name):
    law = _LAWS[name]
    mu, P = float(law.mu), float(getattr(law, "P", 1.0))
    kappa = float(law.kappa()) if name == "quadrature" else float(law.kappa)
    P = float(law.total_load()) if name == "quadrature" else P
    f = jax.vmap(law.force)
    x = jnp.array([[0.6, -0.8, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, -0.5]])
    q = np.asarray(f(x))
    exact_ends = name not in ("harmonic",)
    tol = 1e-12 if exact_ends else 0.05
    np.testing.assert_allclose(q[0], [-mu * P * 0.6, mu * P * 0.8, 0.0], atol=tol)  # (40)
    np.testing.assert_allclose(q[1], [0.0, 0.0, -mu * P * kappa / law.rho], atol=tol)  # (41)
    np.testing.assert_allclose(q[2], [0.0, 0.0, mu * P * kappa / law.rho], atol=tol)
    if name == "quadrature":
        return
    # (47), (51), (55): pure slip / pure spin in every parametrisation
    np.testing.assert_allclose(law.Q_w(jnp.array([0.0, 1.0])), [1.0, 0.0], atol=tol)
    np.testing.assert_allclose(law.T_w(jnp.array([0.0, 1.0])), [0.0, 1.0], atol=tol)
    np.testing.assert_allclose(law.Q_theta(jnp.array([0.0, math.pi / 2])), [1.0, 0.0], atol=tol)
    np.testing.assert_allclose(law.T_theta(jnp.array([0.0, math.pi / 2])), [0.0, 1.0], atol=tol)
    np.testing.assert_allclose(law.Q_eps(jnp.array([0.0, 1e12])), [0.0, 1.0], atol=max(tol, 1e-11))
    np.testing.assert_allclose(law.T_eps(jnp.array([0.0, 1e12])), [1.0, 0.0], atol=max(tol, 1e-11))
    # structural zeros hold exactly for every law, (47)
    assert float(law.Q_w(1.0)) == 0.0 and float(law.T_w(0.0)) == 0.0
    # symmetry (48) of the w-parametrisation
    w3 = jnp.linspace(-0.99, 0.99, 11)
    np.testing.assert_allclose(law.Q_w(-w3), law.Q_w(w3), atol=1e-15)
    np.testing.assert_allclose(law.T_w(-w3), -law.T_w(w3), atol=1e-15)


def test_parametrisations_agree_and_gradients_finite():
    law = ExactHertz(rho="R")
    eps = jnp.array([0.1, 0.7, 1.0, 1.3, 6.0])
    w3 = law.w3_of_eps(eps)
    w12 = jnp.sqrt(1 - w3**2)
    np.testing.assert_allclose(law.Q_w(w3), law.Q_eps(eps), atol=1e-14)
    np.testing.assert_allclose(law.T_w(w3), law.T_eps(eps), atol=1e-14)
    np.testing.assert_allclose(law.Q_theta(jnp.arcsin(w3)), law.Q_eps(eps), atol=1e-14)
    # full vector law vs normalised (53)
    x = jnp.stack([w12 * 0.6, w12 * 0.8, w3], axis=1)
    F = jax.vmap(law.force)(x)
    np.testing.assert_allclose(jnp.hypot(F[:, 0], F[:, 1]), law.Q_eps(eps), atol=1e-14)
    np.testing.assert_allclose(-F[:, 2] * law.rho / law.kappa, law.T_eps(eps), atol=1e-14)
    # autodiff of the vector law vs central differences, including pure slip/spin and eps = 1
    for lw in (ExactUniform(), law, _LAWS["harmonic"], _LAWS["pade"]):
        for x0 in (
            [0.3, -0.2, 0.5],
            [1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0],
            [float(lw.R / lw.rho), 0.0, 1.0],
        ):
            x0 = jnp.asarray(x0)
            J = jax.jacfwd(lw.force)(x0)
            assert np.all(np.isfinite(J))
            h = 1e-6
            fd = np.stack(
                [(lw.force(x0 + h * e) - lw.force(x0 - h * e)) / (2 * h) for e in jnp.eye(3)], 1
            )
            np.testing.assert_allclose(J, fd, atol=2e-5)


def test_zero_slip_is_undefined_and_bad_inputs_raise():
    for law in _LAWS.values():
        assert np.all(np.isnan(np.asarray(law.force(jnp.zeros(3)))))
    assert np.all(np.isnan(np.asarray(Coulomb().force(jnp.array([0.0, 0.0, 1.0])))))
    with pytest.raises(ValueError, match="mu"):
        ExactUniform(mu=-1.0)
    with pytest.raises(ValueError, match="R"):
        ExactHertz(R=0.0)
    with pytest.raises(ValueError, match="rho"):
        ExactUniform(rho="diameter")
    with pytest.raises(ValueError, match="pressure"):
        LinearModel("triangular")
    with pytest.raises(ValueError, match="c and s"):
        HarmonicModel([1.0, 0.1], [1.0])
    with pytest.raises(ValueError, match="n_r"):
        QuadratureLaw(pressure_for("uniform"), n_r=1)


def test_linear_model_from_elementary_directions_66_67():
    """(66) applied to the quadrature law of uniform pressure gives the diagonal (67)."""
    quad = QuadratureLaw(pressure_for("uniform", P=2.0), mu=0.4, rho=2.0 / 3.0)
    lin = LinearEllipsoidal.from_law(quad)
    np.testing.assert_allclose(
        lin.Pi_hat, np.diag([-0.8, -0.8, -0.8 * (2 / 3) / (2 / 3)]), atol=1e-12
    )
    model = LinearModel("uniform", mu=0.4, P=2.0)  # rho = kappa
    x = jnp.array([0.3, -1.1, 0.7])
    np.testing.assert_allclose(lin.force(x), model.force(x), atol=1e-12)
    # (69) spelled out
    r = float(jnp.linalg.norm(x))
    np.testing.assert_allclose(model.force(x), -0.8 * np.array([0.3, -1.1, 0.7]) / r, atol=1e-15)
    # (72) with rho = R
    lr = LinearModel("uniform", rho="R")
    e = jnp.array([0.5, 2.0])
    np.testing.assert_allclose(lr.Q_eps(e), e / jnp.sqrt(e**2 + 1), atol=1e-15)
    np.testing.assert_allclose(lr.T_eps(e), 1 / jnp.sqrt(e**2 + 1), atol=1e-15)
    # Coulomb (75) is the R -> 0 limit of (69)
    small = LinearModel("uniform", R=1e-9, rho="R")
    np.testing.assert_allclose(
        small.force(jnp.array([0.3, 0.4, 1e-9 * 0.2]))[:2],
        Coulomb().force(jnp.array([0.3, 0.4, 0.2]))[:2],
        atol=1e-9,
    )
