"""Limit directions, bifurcations (Sect. 7.2-7.5) and the disc/ball stop simulations."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.friction import ExactHertz, ExactUniform, HarmonicModel, LinearModel
from rollax.models.friction.limit_directions import (
    PlanarBody,
    classify,
    find_limit_directions,
    fold_N2,
    force_free_eps,
)
from rollax.analysis.friction import simulate_stop
from rollax.models.friction.sliding import SlidingBody

U = ExactUniform()
H2 = HarmonicModel.from_law(U, 2)


def test_disc_N2_bifurcation_forces_130_133_138():
    body = PlanarBody.disc(H2)
    assert float(body.b) == pytest.approx(8 / 9)  # (126)
    C, S = np.asarray(H2.C_coeffs()), np.asarray(H2.S_coeffs())
    bif = body.bifurcations()
    assert bif["F_T"] == pytest.approx(C[0], abs=1e-14)  # (130)
    assert bif["F_P"] == pytest.approx(C[0] - 8 / 9 * S[0], abs=1e-14)  # (133)
    w3_F, F_F = fold_N2(C, S, 1.0, 8 / 9)  # (138) closed form
    assert len(bif["folds"]) == 1
    assert bif["folds"][0]["F"] == pytest.approx(F_F, abs=1e-10)
    assert bif["folds"][0]["w3"] == pytest.approx(w3_F, abs=1e-7)
    assert F_F < bif["F_P"] < bif["F_T"]
    # values measured here (uniform pressure, rho = kappa), for the report
    assert (bif["F_T"], bif["F_P"], F_F) == pytest.approx((1.04732, 0.39022, 0.04904), abs=1e-5)


def test_cases_1_to_4_and_generic_solver_agrees():
    """Number/type of limit directions in the four regions of Fig. 14, and Newton on (125)."""
    bif = PlanarBody.disc(H2).bifurcations()
    F_T, F_P, F_F = bif["F_T"], bif["F_P"], bif["folds"][0]["F"]
    expect = {(F_T + 0.1): 2, (F_P + F_T) / 2: 2, (F_F + F_P) / 2: 4, F_F / 2: 8}
    for f, n in expect.items():
        body = PlanarBody.disc(H2, f=f)
        dirs = body.limit_directions()
        assert len(dirs) == n, (f, dirs)
        w_plus = dirs[0]
        # trivial w1 = (1,0,0): repelling iff F > F_T (tangency (130))
        assert w_plus["radial"] == ("repelling" if f > F_T else "attracting")
        # every nontrivial direction is attracting (Sect. 7.4.2)
        assert all(d["radial"] == "attracting" for d in dirs[2:])
        generic = find_limit_directions(body.F, n_starts=200)
        assert len(generic) == n
        for d in dirs:
            assert np.min(np.linalg.norm(generic - np.array(d["w"]), axis=1)) < 1e-8
    # case 2: (1,0,0) is a stable node (stick along pure translation)
    d = PlanarBody.disc(H2, f=(F_P + F_T) / 2).limit_directions()[0]
    assert d["sphere"] == "node" and d["stability"] == "stable"


def test_force_free_linear_vs_second_order_figs_15_16():
    lin = PlanarBody.disc(HarmonicModel.from_law(U, 1)).limit_directions()
    poles = [d for d in lin if abs(d["w"][2]) == 1.0]
    # linear model: attracting stable poles -> stick along pure spin (wrong, Fig. 15)
    assert all(
        d["radial"] == "attracting" and d["sphere"] == "node" and d["stability"] == "stable"
        for d in poles
    )
    assert not [d for d in lin if d["circle"] and 0 < abs(d["w"][2]) < 1]
    assert force_free_eps(PlanarBody.disc(LinearModel("uniform"))) == []
    # second order: poles unstable, circles of combined slip-spin at w3 = sqrt(-k1/k2) stable (Fig. 16)
    body = PlanarBody.disc(H2)
    sec = body.limit_directions()
    poles = [d for d in sec if abs(d["w"][2]) == 1.0]
    assert all(d["stability"] == "unstable" for d in poles)
    circles = [d for d in sec if d["circle"] and 0 < abs(d["w"][2]) < 1]
    C, S = np.asarray(H2.C_coeffs()), np.asarray(H2.S_coeffs())
    k1, k2 = C[0] - 8 / 9 * S[0], C[1] - 8 / 9 * S[1]
    for d in circles:
        assert abs(d["w"][2]) == pytest.approx(math.sqrt(-k1 / k2), abs=1e-10)
        assert d["radial"] == "attracting" and d["stability"] == "stable"
    eq = [d for d in sec if d["circle"] and d["w"][2] == 0.0][0]
    assert eq["stability"] == "unstable"  # the equator repels on the sphere


def test_ball_lambda5_has_no_fold_for_N_1_to_4():
    for N in range(1, 5):
        body = PlanarBody.ball(HarmonicModel.from_law(ExactHertz(), N), lam=5.0)
        assert float(body.a) == pytest.approx(3.5) and float(body.b) == pytest.approx(
            45 * math.pi**2 / (512 * 25)
        )
        assert body.folds() == []
    # while the disc has one from N = 2 on
    assert all(len(PlanarBody.disc(HarmonicModel.from_law(U, N)).folds()) >= 1 for N in (2, 3))


def test_classification_on_a_known_field():
    """A linear field F = A w: limit directions are A's eigenvectors; R* = eigenvalue."""
    A = jnp.diag(jnp.array([-1.0, -2.0, -3.0]))
    F = lambda w: A @ w  # noqa: E731
    d = classify(F, jnp.array([0.0, 0.0, 1.0]))
    assert d["rdot"] == pytest.approx(-3.0)
    # tangent eigenvalues: (lambda_i - lambda_3) = 2, 1 -> unstable node on the sphere
    assert sorted(v[0] for v in d["eigenvalues"]) == pytest.approx([1.0, 2.0])
    assert d["stability"] == "unstable" and d["sphere"] == "node"
    assert classify(F, jnp.array([0.0, 1.0, 0.0]))["sphere"] == "saddle"
    assert len(find_limit_directions(F, n_starts=100)) == 6


# ------------------------------------------------------------------------ stop simulations
_stop = eqx.filter_jit(jax.vmap(simulate_stop, in_axes=(None, 0)))


def test_force_free_disc_exact_law_stops_with_definite_eps():
    body = SlidingBody(U)  # m = g = mu = 1, j = 1/2, R_bar = R, rho = kappa
    x0 = jnp.array(
        [[1.0, 0.0, 1.0], [0.3, -0.4, 2.0], [2.0, 1.0, -0.3], [0.7, 0.0, 0.0], [0.0, 0.0, 0.7]]
    )
    res = _stop(body, x0)
    assert bool(np.all(res.stopped))
    eps_root = force_free_eps(PlanarBody.disc(U))[0]
    # literature (Farkas et al. 2003; Weidman & Malhotra 2005): eps -> 0.653 for a uniform disc
    assert eps_root == pytest.approx(0.653, abs=5e-4)
    np.testing.assert_allclose(res.eps[:3], eps_root, atol=2e-6)
    # pure sliding stops at t = u0/(mu g) with eps = inf; pure spin at omega0 j R^2/(mu g kappa)
    assert float(res.t_stop[3]) == pytest.approx(0.7, abs=1e-9) and np.isinf(res.eps[3])
    assert float(res.t_stop[4]) == pytest.approx(0.7 * 0.5 / (U.rho * U.kappa), abs=1e-9)
    assert float(res.eps[4]) == 0.0


def test_stop_with_second_order_model_and_force_above_F_T():
    eps2 = force_free_eps(PlanarBody.disc(H2))[0]
    F_T = PlanarBody.disc(H2).F_T()
    run = eqx.filter_jit(
        jax.vmap(
            lambda F: simulate_stop(SlidingBody(H2, F=F), jnp.array([1.0, 0.0, 1.0]), tau_max=60.0)
        )
    )
    res = run(jnp.array([0.0, 1.2 * F_T]))
    assert bool(res.stopped[0]) and float(res.eps[0]) == pytest.approx(eps2, abs=1e-4)
    assert not bool(res.stopped[1])  # pushed above F_T (130) the disc never sticks
    with pytest.raises(ValueError, match="kind"):
        SlidingBody(U, kind="cube")
    with pytest.raises(ValueError, match="j"):
        SlidingBody(U, j=0.0)
