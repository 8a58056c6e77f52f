"""Generic impact maps of rollax.models.impacts (Clark & Bloch, eqs. (5)-(6), (15)-(21))."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import fsolve

from rollax.models.impacts import (
    ImpactMap,
    constraint_projection,
    elastic_quadratic,
    holonomic_elastic,
    holonomic_plastic,
    holonomic_restitution,
    kinetic_energy,
    nonholonomic_elastic,
    nonholonomic_elastic_root,
    nonholonomic_plastic,
    nonholonomic_restitution,
    plastic_equivalent_restitution,
)


def random_system(seed, n=5, m=2):
    """SPD mass matrix, m constraint forms, dh, and a velocity in Delta with dh(qdot) != 0."""
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, n))
    M = B @ B.T + n * np.eye(n)
    A = rng.normal(size=(m, n))
    dh = rng.normal(size=n)
    v = np.asarray(constraint_projection(M, A)) @ rng.normal(size=n)
    return M, A, dh, v


# jitted once, reused by the property tests (shapes fixed)
_elastic = jax.jit(lambda M, A, dh, v: nonholonomic_elastic_root(M, A, dh, v).qdot)
_plastic = jax.jit(nonholonomic_plastic)
_restitution = jax.jit(lambda M, A, dh, v, e: nonholonomic_restitution(M, A, dh, v, e))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_elastic_conserves_energy_and_constraints(seed):
    M, A, dh, v = random_system(seed)
    w = np.asarray(_elastic(M, A, dh, v))
    E0 = float(kinetic_energy(M, v))
    assert abs(float(kinetic_energy(M, w)) - E0) <= 1e-12 * E0
    scale = np.abs(A).max() * np.abs(w).max()
    assert np.abs(A @ w).max() <= 1e-12 * scale
    # the normal velocity is reversed exactly, and the map is an involution
    assert dh @ w == pytest.approx(-(dh @ v), rel=1e-10)
    np.testing.assert_allclose(
        np.asarray(_elastic(M, A, dh, w)), v, rtol=0, atol=1e-12 * np.abs(v).max()
    )


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_plastic_satisfies_constraints_and_never_gains_energy(seed):
    M, A, dh, v = random_system(seed)
    w = np.asarray(_plastic(M, A, dh, v))
    assert np.abs(A @ w).max() <= 1e-12 * np.abs(A).max() * np.abs(w).max()
    assert float(kinetic_energy(M, w)) <= float(kinetic_energy(M, v)) * (1 + 1e-14)
    # it is (20), and the restitution family at its equivalent coefficient
    grad_h = np.linalg.solve(M, dh)
    P = np.asarray(constraint_projection(M, A))
    w20 = v - 2 * (dh @ v) / (dh @ grad_h) * (P @ grad_h)
    np.testing.assert_allclose(w, w20, rtol=1e-12, atol=1e-13 * np.abs(v).max())
    e_p = float(plastic_equivalent_restitution(M, A, dh))
    assert -1.0 <= e_p <= 1.0
    np.testing.assert_allclose(
        w, np.asarray(_restitution(M, A, dh, v, e_p)), atol=1e-12 * np.abs(v).max()
    )


def test_projection_is_idempotent_and_M_orthogonal():
    M, A, dh, _ = random_system(1, n=6, m=3)
    P = np.asarray(constraint_projection(M, A))
    np.testing.assert_allclose(P @ P, P, atol=1e-13)
    np.testing.assert_allclose(M @ P, (M @ P).T, atol=1e-12)  # self-adjoint in g
    np.testing.assert_allclose(A @ P, 0.0, atol=1e-13)  # range in Delta
    # kernel g-orthogonal to Delta: (v - Pv) . M (Pw) = 0
    rng = np.random.default_rng(2)
    v, w = rng.normal(size=6), rng.normal(size=6)
    assert (
        abs((v - P @ v) @ M @ (P @ w))
        <= 1e-12 * np.linalg.norm(v) * np.linalg.norm(w) * np.abs(M).max()
    )
    # the e = 0 holonomic map is the g-orthogonal projection onto ker dh
    Pe0 = np.stack([np.asarray(holonomic_plastic(M, dh, c)) for c in np.eye(6)], axis=1)
    np.testing.assert_allclose(Pe0 @ Pe0, Pe0, atol=1e-13)
    np.testing.assert_allclose(M @ Pe0, (M @ Pe0).T, atol=1e-12)
    np.testing.assert_allclose(dh @ Pe0, 0.0, atol=1e-13)


def test_elastic_matches_numerical_solution_of_corner_conditions():
    """(15) solved as n + m + 1 nonlinear equations by scipy vs. the quadratic of Prop. IV.1."""
    M, A, dh, v = random_system(3)
    n, m = 5, 2

    def eqs(z, deflate=True):
        w, lam, alpha = z[:n], z[n : n + m], z[-1]
        dE = 0.5 * w @ M @ w - 0.5 * v @ M @ v
        # energy equation divided by alpha: deflates the trivial root alpha = 0
        return np.concatenate(
            [M @ (w - v) - A.T @ lam - alpha * dh, [dE / alpha if deflate else dE], A @ w]
        )

    a_hol = -2 * (dh @ v) / (dh @ np.linalg.solve(M, dh))
    guess = np.concatenate([np.asarray(holonomic_elastic(M, dh, v)), np.zeros(m), [a_hol]])
    z = fsolve(eqs, guess, xtol=1e-12)
    assert np.abs(eqs(z, deflate=False)).max() < 1e-11
    root = nonholonomic_elastic_root(M, A, dh, v)
    assert bool(root.exists)
    np.testing.assert_allclose(np.asarray(root.qdot), z[:n], rtol=1e-9)
    np.testing.assert_allclose(float(root.alpha), z[-1], rtol=1e-9)
    np.testing.assert_allclose(np.asarray(root.lam), z[n : n + m], rtol=1e-8)
    # the quadratic has alpha = 0 as a root and alpha* as the other
    c2, c1, _ = elastic_quadratic(M, A, dh, v)
    assert float(c2 * root.alpha**2 + c1 * root.alpha) == pytest.approx(
        0.0, abs=1e-12 * abs(float(c1 * root.alpha))
    )


def test_restitution_family_endpoints_and_energy_loss():
    M, A, dh, v = random_system(4)
    np.testing.assert_allclose(
        np.asarray(nonholonomic_restitution(M, A, dh, v, 1.0)),
        np.asarray(nonholonomic_elastic(M, A, dh, v)),
        atol=1e-14,
    )
    c2, c1, _ = elastic_quadratic(M, A, dh, v)
    E0 = float(kinetic_energy(M, v))
    losses = []
    for e in (0.0, 0.3, 0.7, 1.0):
        w = np.asarray(nonholonomic_restitution(M, A, dh, v, e))
        assert np.abs(A @ w).max() < 1e-12
        assert dh @ w == pytest.approx(-e * (dh @ v), abs=1e-12)
        loss = E0 - float(kinetic_energy(M, w))
        assert loss == pytest.approx(
            (1 - e**2) * (dh @ v) ** 2 / (2 * float(c2)), rel=1e-9, abs=1e-13 * E0
        )
        losses.append(loss)
    assert losses == sorted(losses, reverse=True)
    # e = 0 is the g-orthogonal projection onto Delta intersected with ker dh: idempotent
    w0 = np.asarray(nonholonomic_restitution(M, A, dh, v, 0.0))
    np.testing.assert_allclose(np.asarray(holonomic_plastic(M, dh, w0)), w0, atol=1e-14)


def test_holonomic_limits_e1_e0():
    """With no constraint forms the nonholonomic maps reduce to (5) and (6); e=1, e=0 are the
    elastic and plastic holonomic maps."""
    M, _, dh, _ = random_system(5)
    v = np.random.default_rng(6).normal(size=5)
    A0 = np.zeros((0, 5))
    e1 = np.asarray(holonomic_restitution(M, dh, v, 1.0))
    e0 = np.asarray(holonomic_restitution(M, dh, v, 0.0))
    np.testing.assert_allclose(e1, np.asarray(holonomic_elastic(M, dh, v)), atol=0)
    np.testing.assert_allclose(e0, np.asarray(holonomic_plastic(M, dh, v)), atol=0)
    assert float(kinetic_energy(M, e1)) == pytest.approx(float(kinetic_energy(M, v)), rel=1e-13)
    assert dh @ e0 == pytest.approx(0.0, abs=1e-14)
    np.testing.assert_allclose(np.asarray(nonholonomic_elastic(M, A0, dh, v)), e1, rtol=1e-13)
    np.testing.assert_allclose(
        np.asarray(nonholonomic_restitution(M, A0, dh, v, 0.0)), e0, atol=1e-14
    )
    np.testing.assert_allclose(
        np.asarray(nonholonomic_restitution(M, A0, dh, v, 0.4)),
        np.asarray(holonomic_restitution(M, dh, v, 0.4)),
        atol=1e-14,
    )
    np.testing.assert_allclose(np.asarray(nonholonomic_plastic(M, A0, dh, v)), e1, atol=1e-14)


def test_free_particle_wall_is_specular_reflection():
    m = 2.5
    M = m * np.eye(3)
    n_wall = np.array([0.6, 0.8, 0.0])  # wall h = n.x - c
    v = np.array([1.3, 0.4, 0.0])
    spec = v - 2 * (n_wall @ v) * n_wall
    for w in (
        holonomic_elastic(M, n_wall, v),
        nonholonomic_elastic(M, np.zeros((0, 3)), n_wall, v),
        nonholonomic_plastic(M, np.zeros((0, 3)), n_wall, v),
        # a particle constrained to z_dot = 0 (a nonholonomic-form constraint) hitting a vertical wall
        nonholonomic_elastic(M, np.array([[0.0, 0.0, 1.0]]), n_wall, v),
        nonholonomic_plastic(M, np.array([[0.0, 0.0, 1.0]]), n_wall, v),
    ):
        np.testing.assert_allclose(np.asarray(w), spec, atol=1e-15)


def test_jacobian_autodiff_matches_finite_differences():
    """d qdot+/d(q, qdot-) of ImpactMap by jacfwd vs. central differences (penny-like system)."""
    R, m, I, J = 0.01, 0.0025, 1.25e-7, 6.25e-8
    mass = lambda q: jnp.diag(jnp.array([m, m, I, J]))
    cons = lambda q: jnp.array(
        [[1.0, 0.0, -R * jnp.cos(q[3]), 0.0], [0.0, 1.0, -R * jnp.sin(q[3]), 0.0]]
    )
    surf = lambda q: (
        (q[0] + R * jnp.cos(q[3])) ** 2 / 0.15**2 + (q[1] + R * jnp.sin(q[3])) ** 2 / 0.2**2 - 1
    )
    q = np.array([0.1, 0.08, 0.3, 0.9])
    qd = np.array([R * 7 * np.cos(0.9), R * 7 * np.sin(0.9), 7.0, 0.4])
    for law in ("elastic", "plastic"):
        imp = ImpactMap(mass, cons, surf, law=law, e=0.5)
        Jq, Jv = eqx.filter_jit(imp.jacobian)(q, qd)
        call = eqx.filter_jit(imp)
        f = lambda qq, vv: np.asarray(call(qq, vv))
        for which, Jad in ((0, Jq), (1, Jv)):
            base = (q, qd)[which]
            fd = np.zeros((4, 4))
            for i in range(4):
                h = 1e-6 * max(1.0, abs(base[i]))
                d = np.zeros(4)
                d[i] = h
                args_p = [q, qd]
                args_m = [q, qd]
                args_p[which] = base + d
                args_m[which] = base - d
                fd[:, i] = (f(*args_p) - f(*args_m)) / (2 * h)
            np.testing.assert_allclose(np.asarray(Jad), fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


def test_no_root_raises_and_flags():
    M, A, dh, v = random_system(7)
    P = np.asarray(constraint_projection(M, A))
    u = P @ np.linalg.solve(M, dh)
    tangent = v - (dh @ v) / (dh @ u) * u  # in Delta with dh(qdot) = 0: glancing
    with pytest.raises(ValueError, match="glancing"):
        nonholonomic_elastic(M, A, dh, tangent)
    with pytest.raises(ValueError, match="linearly dependent"):
        nonholonomic_elastic(M, A, A[0] + 2 * A[1], v)
    root = jax.jit(nonholonomic_elastic_root)(M, A, dh, tangent)
    assert not bool(root.exists)
    np.testing.assert_allclose(np.asarray(root.qdot), tangent)  # trivial root, no NaN
    assert np.all(np.isnan(np.asarray(jax.jit(nonholonomic_elastic)(M, A, dh, tangent))))


def test_bad_inputs_raise():
    M, A, dh, v = random_system(8)
    with pytest.raises(ValueError, match="e = 1.5"):
        holonomic_restitution(M, dh, v, 1.5)
    with pytest.raises(ValueError, match="e = -0.1"):
        nonholonomic_restitution(M, A, dh, v, -0.1)
    with pytest.raises(ValueError, match="M must have shape"):
        nonholonomic_plastic(M[:4, :4], A, dh, v)
    with pytest.raises(ValueError, match="A must have shape"):
        nonholonomic_plastic(M, A[:, :3], dh, v)
    with pytest.raises(ValueError, match="law"):
        ImpactMap(lambda q: M, lambda q: A, lambda q: q @ q, law="sticky")
