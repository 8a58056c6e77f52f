"""The global search of rollax.robot.optimize (issue 59): structured and random starts run as one
batch, the distinct local optima they reach, and the best against an independent multi-start
reference (SciPy's SLSQP on rollax.robot.evaluate in the raw spline coordinates, its own
random starts) on generated feasible manoeuvres of the disk and the ball."""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from rollax.analysis.robot.feasibility import necessary_conditions
from rollax.analysis.robot.optimal import (
    _distinct,
    CONTINUATION_MU,
    CONTINUATION_T,
    _continued,
    _NLPProblem,
    _search_note,
    _shaped,
    _starts,
    _whitening,
)
from rollax.robot import RestToRestControl, ball_manoeuvre, disk_manoeuvre, evaluate, optimize


def test_distinct_optima_are_grouped_and_counted():
    costs = np.array([2.0, 1.0, 1.0005, np.nan, 3.0, 1.0001, 2.001])
    conv = np.array([1, 1, 0, 0, 1, 1, 1], bool)
    groups = _distinct(costs, conv)
    assert [g["starts"] for g in groups] == [3, 2, 1]
    assert groups[0] == {"cost": 1.0, "starts": 3, "converged": 2}
    assert "the best reached by 3" in _search_note(groups, 7)
    single = _distinct(np.array([1.0, 2.0, 2.0]), np.ones(3, bool))
    assert "start only: more starts may find a better one" in _search_note(single, 3)
    assert "1 start" in _search_note(single[:1], 1) and "no start of 4" in _search_note((), 4)


def test_continuation_solves_easier_problems_and_maps_their_optima_back():
    # the SQP replaced by a stand-in that records the problems and returns its starts scaled
    # (a known "optimum"): the mapping back is checked, not the solver
    from types import SimpleNamespace

    man = disk_manoeuvre(T=8.0, mu=0.3)
    prob = _NLPProblem(man, 8, 51, False, 1e-8, 16384)
    seen = []

    def phase(p, X, rows, desc):
        seen.append((float(p.man.mu), float(p.man.T), p.cost, X.shape, desc))
        return [SimpleNamespace(x=2.0 * x, f=float(i), feasible=i > 0, violation=0.0)
                for i, x in enumerate(X)]  # fmt: skip

    rows = _continued(prob, phase, 1e-6, 51)
    assert [s[:3] for s in seen] == [(CONTINUATION_MU * 0.3, 8.0, "effort"),
                                     (0.3, CONTINUATION_T * 8.0, "effort")]  # fmt: skip
    assert seen[0][3] == (4, 32) and "continuation in mu" in seen[0][4]
    first = 2.0 * _shaped(prob)[0]  # the best feasible: f = 1, the first structured start
    np.testing.assert_allclose(rows[0], first)
    np.testing.assert_allclose(rows[1], first * CONTINUATION_T**2)
    # a manoeuvre with no friction envelope: continuation in T only
    seen.clear()
    free = disk_manoeuvre(T=8.0, mu=math.inf)
    rows = _continued(_NLPProblem(free, 8, 51, False, 1e-8, 16384), phase, 1e-6, 51)
    assert rows.shape == (1, 32) and len(seen) == 1


def test_structured_starts_are_rest_to_rest_polynomials_of_several_sizes():
    man = disk_manoeuvre(T=8.0)
    prob = _NLPProblem(man, 8, 51, False, 1e-8, 16384)
    shaped = _shaped(prob)
    assert len(shaped) == 36
    W = _whitening(8)
    swings = []
    for w in shaped:
        c = RestToRestControl(jnp.asarray(W @ w.reshape(8, 4)), 8.0)
        V = np.asarray(c.values())
        # a polynomial of degree <= 3 in s at the knots (to the projection on the splines of
        # zero integral, ~1e-3), the same shape for every mass
        s = np.linspace(0, 1, 9)
        fit = np.polynomial.polynomial.polyfit(s, V[:, 0], 3)
        scale = np.max(np.abs(V))
        np.testing.assert_allclose(
            np.polynomial.polynomial.polyval(s, fit), V[:, 0], atol=1e-3 * scale
        )
        assert np.allclose(np.abs(V[:, 1]), np.abs(V[:, 0]))
        swings.append(np.max(np.abs(V)))
    assert len(set(np.round(swings, 9))) >= 6  # several sizes and shapes
    X = _starts(prob, 6, 0)
    assert np.all(X[0] == 0) and any(np.allclose(X[1], w) for w in shaped)
    assert not any(np.allclose(X[2], w) for w in shaped)  # random between the structured


def _reference(man, K: int, n_grid: int, starts: int = 12, seed: int = 0):
    """The best feasible effort of SciPy's SLSQP on rollax.robot.evaluate from ``starts`` of
    its own random starts (raw coordinates z, normal of three scales)."""
    n = man.model.n
    T = float(man.T)

    def fun(z):
        C, h, g = evaluate(man, RestToRestControl(z.reshape(K, n), T), n_grid=n_grid)
        return C, h, g

    f = jax.jit(fun)
    jac = jax.jit(jax.jacfwd(fun))
    rng = np.random.default_rng([seed, 59])
    best = math.inf
    t0 = time.perf_counter()
    for i in range(starts):
        z0 = rng.normal(size=K * n) * (0.02, 0.1, 0.5)[i % 3]
        r = minimize(
            lambda z: float(f(jnp.asarray(z))[0]),
            z0,
            jac=lambda z: np.asarray(jac(jnp.asarray(z))[0]),
            constraints=[
                dict(type="eq", fun=lambda z: np.asarray(f(jnp.asarray(z))[1]),
                     jac=lambda z: np.asarray(jac(jnp.asarray(z))[1])),
                dict(type="ineq", fun=lambda z: -np.asarray(f(jnp.asarray(z))[2]),
                     jac=lambda z: -np.asarray(jac(jnp.asarray(z))[2])),
            ],
            method="SLSQP",
            options=dict(maxiter=500, ftol=1e-10),
        )  # fmt: skip
        _, h, g = f(jnp.asarray(r.x))
        ok = max(float(np.max(np.abs(h))), float(np.max(g))) <= 1e-6
        if ok:
            best = min(best, float(r.fun))
    return best, time.perf_counter() - t0


def search_case(seed: int, body: str):
    """A generated manoeuvre that passes the necessary conditions: the disk turned by
    0.5..2 pi in T = 8..12 with mu 0.25..0.4; the ball moved 0.5..1.5 r in T = 6..9."""
    rng = np.random.default_rng([59, 1, seed, 0 if body == "disk" else 1])
    while True:
        mu = float(rng.uniform(0.25, 0.4))
        if body == "disk":
            man = disk_manoeuvre(phi_T=-math.pi * float(rng.uniform(0.5, 2.0)),
                                 T=float(rng.uniform(8.0, 12.0)), mu=mu, n_min=0.5)  # fmt: skip
        else:
            r, a = float(rng.uniform(0.5, 1.5)), float(rng.uniform(0, 2 * math.pi))
            man = ball_manoeuvre(target=(r * math.cos(a), r * math.sin(a)),
                                 T=float(rng.uniform(6.0, 9.0)), mu=mu, n_min=0.5)  # fmt: skip
        if not necessary_conditions(man):
            return man


@pytest.mark.slow  # 2-6 min each: 12 starts, one start, and the reference's 12
@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("body", ["disk", "ball"])
def test_the_batched_search_finds_the_best_of_an_independent_multi_start(body, seed):
    K, n_grid = 6, 61
    man = search_case(seed, body)
    ref, t_ref = _reference(man, K, n_grid)
    t0 = time.perf_counter()
    one = optimize(man, knots=K, n_grid=n_grid, progress=False)
    t_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    opt = optimize(man, knots=K, n_grid=n_grid, starts=12, progress=False)
    t_all = time.perf_counter() - t0
    print(f"{body} {seed}: reference {ref:.5g} ({t_ref:.0f} s); one start {one.cost:.5g} "
          f"({t_one:.0f} s); 12 starts {opt.cost:.5g} ({t_all:.0f} s), "
          f"{len(opt.optima)} optima", flush=True)  # fmt: skip
    if not math.isfinite(ref):
        pytest.skip(f"the reference found no feasible control (ours: {opt.status})")
    assert opt.feasible and opt.cost <= 1.01 * ref, (ref, opt.cost, opt.message)
