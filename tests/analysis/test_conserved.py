"""Conserved quantities of the rolling ball (Sect. 4.4): energy (60), P_I and P_II (65)-(68),
and the closed forms of the limits R -> infinity (69)-(70) and R -> 0 (72)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.analysis import conserved as C
from rollax.analysis.floquet import FloquetSystem
from rollax.models.rim import Rim

RIM = Rim()
MI = C.MomentumIntegrals.from_rim(RIM)
K = np.sqrt(RIM.j / (1 + RIM.j))


def _rel_drift(q):
    q = np.asarray(q)
    return np.max(np.abs(q - q[0]), axis=0) / np.abs(q[0])


# Rolling trajectories of Rim.vector_field: oscillations about steady motions of regions A and C,
# and one where beta winds through more than a period of (66) (w1 keeps its sign).
CASES = {
    "A": (RIM.steady_state(0.8, 20.0) + jnp.array([0.0, 3.0, 0.0, 0.0]), 3.0),
    "C": (RIM.steady_state(2.2, 8.0) + jnp.array([0.0, 2.0, 0.0, 0.0]), 3.0),
    "winding": (jnp.array([0.0, 40.0, 3.0, 2.0]), 0.25),
}


@pytest.mark.parametrize("case", list(CASES))
def test_conserved_along_rolling_trajectories(case):
    """E, P_I, P_II constant along trajectories of (33)-(36) to 1e-8 relative."""
    x0, t1 = CASES[case]
    _, xs = C.rolling_trajectory(RIM, x0, t1, n_save=101)
    beta = np.asarray(xs[:, 0])
    if case == "winding":
        assert beta.max() - beta.min() > 2 * np.pi  # uses Psi(b + 2 pi k) = Psi(b) N^k
    else:
        assert np.ptp(np.asarray(xs[:, 1])) > 1.0  # a real oscillation, not a steady motion
    E = jax.vmap(C.energy, (None, 0))(RIM, xs)
    P = jax.vmap(MI.of_state)(xs)
    assert _rel_drift(E) < 1e-8
    assert np.all(_rel_drift(P) < 1e-8)
    # the general integral (68) for another c is the same linear combination
    c = jnp.array([0.3, -1.7])
    Pc = jax.vmap(lambda x: MI.integral(x[0], x[2], x[3], c))(xs)
    np.testing.assert_allclose(np.asarray(Pc), np.asarray(P) @ np.asarray(c), rtol=1e-12)
    if case == "A":
        # the printed energy (60), with m g r sin(beta), is not conserved (docs/physics-notes.md)
        m, r, j, g = RIM.m, RIM.r, RIM.j, RIM.g
        x = np.asarray(xs)
        E_printed = (
            0.5 * m * j * r**2 * x[:, 2] ** 2
            + 0.5 * m * (1 + j) * r**2 * (x[:, 1] ** 2 + x[:, 3] ** 2)
            + m * g * r * np.sin(x[:, 0])
        )
        assert _rel_drift(E_printed) > 1e-4


def test_fundamental_matrix_any_beta():
    """Psi(beta) for any real beta (periodic reduction) equals direct integration of (66)
    and is the inverse transpose of the fundamental matrix of (62) (adjoint systems)."""
    direct_psi = jax.jit(lambda b: MI._psi(b))  # one integration of (66) from 0 to b
    for b in (0.0, 1.3, 7.5, -3.0, 20.0, -15.0):
        Psi = np.asarray(MI.fundamental_matrix(b))
        direct = np.asarray(direct_psi(jnp.asarray(b)))
        np.testing.assert_allclose(Psi, direct, rtol=1e-9, atol=1e-9)
        Phi = np.asarray(FloquetSystem.from_rim(RIM).fundamental_matrix(b))
        scale = np.linalg.norm(Psi) * np.linalg.norm(Phi)  # both grow with |beta| (unstable)
        np.testing.assert_allclose(Psi.T @ Phi, np.eye(2), atol=1e-11 * scale)
        # Liouville for (66): det Psi = D(beta)/D(0)
        D = lambda x: RIM.R - RIM.rho * np.cos(x)  # noqa: E731
        assert np.linalg.det(Psi) == pytest.approx(D(b) / D(0.0), rel=1e-9)


def test_limit_closed_forms_conserved():
    """(69), (70) on the cylinder limit and (72) on the sphere limit are conserved to 1e-8."""
    cyl = C.LimitRim("cylinder")
    _, xs = C.rolling_trajectory(cyl, jnp.array([0.3, 5.0, 10.0, -4.0]), 3.0, n_save=101)
    assert np.ptp(np.asarray(xs[:, 0])) > 1.0
    assert np.all(_rel_drift(jax.vmap(cyl.integrals)(xs)) < 1e-8)
    assert _rel_drift(jax.vmap(cyl.energy)(xs)) < 1e-8
    Pt = np.asarray(jax.vmap(lambda x: C.cylinder_integrals_tilde(cyl.j, x[0], x[2], x[3]))(xs))
    assert _rel_drift(Pt[:, :1])[0] < 1e-8
    period = 2 * np.pi / K  # P~_II is an angle divided by k
    d = (Pt[:, 1] - Pt[0, 1] + period / 2) % period - period / 2
    assert np.max(np.abs(d)) < 1e-8 * abs(Pt[0, 1])
    # (69) and (70) are equivalent: P_I^2 + P_II^2 = P~_I / (1 + j)
    P = np.asarray(jax.vmap(cyl.integrals)(xs))
    np.testing.assert_allclose(np.sum(P**2, 1), Pt[:, 0] / (1 + cyl.j), rtol=1e-12)

    sph = C.LimitRim("sphere")
    _, xs = C.rolling_trajectory(sph, jnp.array([0.3, 2.0, 2.0, 15.0]), 2.0, n_save=101)
    beta = np.asarray(xs[:, 0])
    assert np.ptp(beta) > 0.1 and np.max(np.abs(beta)) < 1.4
    assert np.all(_rel_drift(jax.vmap(sph.integrals)(xs)) < 1e-8)
    assert _rel_drift(jax.vmap(sph.energy)(xs)) < 1e-8


def test_general_integrals_tend_to_closed_forms():
    """P from the fundamental matrix of (66) -> (69) as R -> inf and -> (72) as R -> 0, error O(rho/R), O(R/rho)."""
    rho, j = RIM.rho, RIM.j
    w2, w3 = 3.0, -2.0
    errs = []
    for p in (2, 4, 6):
        mi = C.MomentumIntegrals(R=rho * 10.0**p, rho=rho, j=j)
        e = 0.0
        for b in (0.7, -2.5, 9.0):
            ref = np.asarray(C.cylinder_integrals(j, b, w2, w3))
            got = [float(mi.integral(b, w2, w3, jnp.array(c))) for c in ((0.0, 1.0), (-K, 0.0))]
            e = max(e, np.max(np.abs(np.array(got) - ref)) / np.max(np.abs(ref)))
        errs.append(e)
    assert errs[2] < 1e-4 and errs[1] < errs[0] / 30 and errs[2] < errs[1] / 30
    errs = []
    for p in (2, 4, 6):
        mi = C.MomentumIntegrals(R=rho * 10.0**-p, rho=rho, j=j)
        e = 0.0
        for b in (0.7, -1.2, 1.4):
            ref = np.asarray(C.sphere_integrals(j, b, w2, w3))
            got = [float(mi.integral(b, w2, w3, jnp.array(c))) for c in ((1.0, 0.0), (0.0, 1 + j))]
            e = max(e, np.max(np.abs(np.array(got) - ref)) / np.max(np.abs(ref)))
        errs.append(e)
    assert errs[2] < 1e-4 and errs[1] < errs[0] / 30 and errs[2] < errs[1] / 30
    # R < rho: (66) is singular where R = rho cos(beta); beyond it the integrals are NaN
    mi = C.MomentumIntegrals(R=0.01, rho=rho, j=j)
    assert np.all(np.isnan(np.asarray(mi.fundamental_matrix(1.6))))
    assert np.all(np.isfinite(np.asarray(mi.fundamental_matrix(-1.4))))


def test_bad_inputs():
    with pytest.raises(ValueError, match="R"):
        C.MomentumIntegrals(R=-1.0, rho=0.13, j=0.5)
    with pytest.raises(ValueError, match="j"):
        C.MomentumIntegrals(R=0.3, rho=0.13, j=0.0)
    with pytest.raises(ValueError, match="singular"):
        C.MomentumIntegrals(R=0.13, rho=0.13, j=0.5)
    with pytest.raises(ValueError, match="limit"):
        C.LimitRim("torus")
    with pytest.raises(ValueError, match="r"):
        C.LimitRim("sphere", r=0.0)
    with pytest.raises(ValueError, match="t1"):
        C.rolling_trajectory(RIM, jnp.zeros(4), -1.0)
