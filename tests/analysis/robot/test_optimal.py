"""Trajectory optimisation of the ball and disk robots (rollax.robot.optimize, least_mu).

The optima are re-simulated with SciPy's ``solve_ivp`` (DOP853) from the knot values of ``u``
through SciPy's own natural cubic spline, so neither our spline nor our integrator is trusted.

Feasibility of the issue's disk case (T = 5, mu = 0.3): impossible, by momentum. With
``X = x_cm(T) - x_cm(0)``, ``|M x_cm''| <= mu N`` and ``int (N - M g) dt = M (z_cm'(t) -
z_cm'(0))``, the masses at rest at both ends give ``X <= mu (g T^2 / 4 + 2 z(T/2) - z(0) -
z(T))``; the CM of this disk stays within 0.4 of the GC and starts at its lowest point, so
``X <= mu (T^2 / 4 + 1.6)``, while rolling by pi needs ``X >= pi - 0.4``: mu >= 0.349 at T = 5
(and T >= 5.49 at mu = 0.3). The tests use T = 8, mu = 0.2 (bound 0.156).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.interpolate import CubicSpline

from rollax.robot import RestToRestControl
from rollax.models.robot.controls import _integrals
from rollax.analysis.robot.optimal import (
    Manoeuvre,
    _fun,
    _NLPProblem,
    _starts,
    ball_manoeuvre,
    disk_manoeuvre,
    evaluate,
    least_mu,
    optimize,
)


def _bound_mu(T):
    return (math.pi - 0.4) / (T**2 / 4 + 1.6)


def _bound_T(mu):
    return 2.0 * math.sqrt((math.pi - 0.4) / mu - 1.6)


def _resimulate(opt, n=2001, ts=None):
    """SciPy DOP853 on the model's rolling equations, u from SciPy's natural spline: the final
    state, and N and |f_s| / N on about ``n`` times (or at the sorted times ``ts``)."""
    man = opt.manoeuvre
    T = float(man.T)
    V = np.asarray(opt.control.values())
    spline = CubicSpline(np.linspace(0.0, T, V.shape[0]), V, bc_type="natural")

    class U:  # the control as the model sees it
        def __call__(self, t):
            return jnp.asarray(spline(float(t)))

    model = man.model
    f = jax.jit(lambda t, y, u: model.vector_field(t, y, lambda _: u))
    forces = jax.jit(lambda t, y, u: model.contact_forces(t, y, lambda _: u))
    knots = np.linspace(0.0, T, V.shape[0])
    y = np.asarray(man.y0)
    ts_all, ys_all = [], []
    for a, b in zip(knots[:-1], knots[1:]):  # restart at the knots (u''' jumps there)
        sol = solve_ivp(
            lambda t, y: np.asarray(f(t, y, jnp.asarray(spline(t)))),
            (a, b),
            y,
            method="DOP853",
            rtol=1e-11,
            atol=1e-11,
            dense_output=True,
        )
        if ts is None:
            tt = np.linspace(a, b, n // V.shape[0] + 2)
        else:  # each time once, in the first interval that holds it
            tt = ts[(ts >= a) & ((ts < b) | (b == knots[-1]))]
        ts_all.append(tt)
        ys_all.append(sol.sol(tt).T)
        y = sol.y[:, -1]
    ts, ys = np.concatenate(ts_all), np.concatenate(ys_all)
    NF = [forces(t, yy, jnp.asarray(spline(t))) for t, yy in zip(ts, ys)]
    N = np.array([float(a) for a, _ in NF])
    fs = np.array([float(np.linalg.norm(np.asarray(b))) for _, b in NF])
    return y, N, fs / N


def test_rest_to_rest_control_is_scipys_natural_spline_with_zero_integral():
    z = np.random.default_rng(0).normal(size=(8, 3))
    c = RestToRestControl(z, 5.0)
    V = np.asarray(c.values())
    cs = CubicSpline(np.linspace(0, 5, 9), V, bc_type="natural")
    ts = np.linspace(0, 5, 301)
    np.testing.assert_allclose(np.asarray(jax.vmap(c)(jnp.asarray(ts))), cs(ts), atol=1e-13)
    np.testing.assert_allclose(cs.integrate(0, 5), 0.0, atol=1e-13)  # ends at rest
    fine = np.linspace(0, 5, 200001)
    effort = np.trapezoid(np.sum(cs(fine) ** 2, axis=1), fine)
    np.testing.assert_allclose(float(c.effort()), effort, rtol=1e-8)
    assert float(c(5.5)[0]) == 0.0 and float(c(-0.1)[0]) == 0.0


def test_spline_integrals_are_scipys_antiderivatives():
    rng = np.random.default_rng(4)
    s = np.concatenate([rng.uniform(0, 1, 9), [0.0, 0.5, 1.0]])
    for K in (2, 3, 8):
        y = rng.normal(size=K + 1)
        cs = CubicSpline(np.linspace(0, 1, K + 1), y, bc_type="natural")
        A1, A2 = _integrals(K, s)
        np.testing.assert_allclose(A1 @ y, cs.antiderivative(1)(s), atol=1e-14)
        np.testing.assert_allclose(A2 @ y, cs.antiderivative(2)(s), atol=1e-14)


@pytest.mark.parametrize(
    "build, cost",
    [
        (disk_manoeuvre, "effort"),
        (ball_manoeuvre, "effort"),
        (disk_manoeuvre, "energy"),
        (disk_manoeuvre, "time"),
    ],
)
def test_gradients_of_cost_and_constraints_match_finite_differences(build, cost):
    man = build(T=3.0, mu=0.3, n_min=0.5)
    K = 4
    prob = _NLPProblem(man, K, 21, False, 1e-12, 16384, cost=cost)
    x = 0.3 * np.random.default_rng(1).standard_normal(K * man.model.n + (cost == "time"))
    F = jax.jit(
        lambda x: jnp.concatenate([jnp.stack([jnp.sum(_fun(x, prob)[0] ** 2)]), *_fun(x, prob)[1:]])
    )
    J = np.asarray(jax.jit(jax.jacfwd(F))(jnp.asarray(x)))
    rng = np.random.default_rng(2)
    for _ in range(3):
        d = rng.standard_normal(x.shape)
        if cost == "time":
            d[-1] = 1.0  # T moves: the kinks, the grid and the end move with it
        d /= np.linalg.norm(d)
        e = 1e-5
        fd = (np.asarray(F(jnp.asarray(x + e * d))) - np.asarray(F(jnp.asarray(x - e * d)))) / (
            2 * e
        )
        ad = J @ d
        scale = np.maximum(np.abs(ad), 1e-3 * np.max(np.abs(ad)))
        assert np.max(np.abs(fd - ad) / scale) < 1e-6


@pytest.fixture(scope="module")
def disk_optimum():
    return optimize(disk_manoeuvre(T=8.0, mu=0.2, n_min=0.5), knots=16, starts=3)


def test_disk_optimum_resimulated_with_scipy_meets_target_rest_and_envelope(disk_optimum):
    opt = disk_optimum
    assert opt.status == "converged" and opt.kkt < 1e-4 and opt.violation < 1e-6
    y, N, ratio = _resimulate(opt)
    n = 4
    assert abs(y[2 * n] + math.pi) < 1e-3  # phi(T)
    assert abs(y[2 * n + 1]) < 1e-3 and np.max(np.abs(y[n : 2 * n])) < 1e-3  # at rest
    assert N.min() >= 0.5 - 1e-3 and ratio.max() <= 0.2 + 1e-3
    assert ratio.max() > 0.2 - 1e-3  # the friction constraint is active
    # several starts agree on the optimum
    costs = opt.start_costs
    assert np.all(np.isfinite(costs)) and np.ptp(costs) < 1e-6 * costs.min()


@pytest.mark.slow  # ~100 s (CI budget: CI ran 1409 s of its 1500 s in stop 35)
def test_unconstrained_disk_optimum_breaks_the_envelope(disk_optimum):
    free = optimize(disk_manoeuvre(T=8.0, mu=math.inf, n_min=-math.inf), knots=16)
    assert free.status == "converged"
    s = free.sample()
    assert s["ratio"].max() > 0.2 + 0.05  # 0.298: friction would not hold
    assert free.cost < disk_optimum.cost  # the envelope costs effort (0.455 vs 1.239)


@pytest.mark.slow  # K = 32 with the refined constraint grid: several minutes (CI budget)
def test_doubling_the_knots_changes_the_cost_by_less_than_one_percent(disk_optimum):
    fine = optimize(disk_manoeuvre(T=8.0, mu=0.2, n_min=0.5), knots=32)
    assert fine.status == "converged"
    assert abs(fine.cost - disk_optimum.cost) < 0.01 * disk_optimum.cost


@pytest.mark.slow  # ~12 min: 1104 SQP iterations (experiments/robot_control, T = 8)
def test_least_mu_is_above_the_momentum_bound_and_reaches_it():
    man = disk_manoeuvre(T=8.0, mu=0.3, n_min=0.5)
    opt = least_mu(man, knots=16)
    assert opt.status == "converged"
    assert _bound_mu(8.0) <= opt.mu < 0.2  # 0.156 <= least mu; mu = 0.2 was feasible
    s = opt.sample()
    assert s["ratio"].max() <= opt.mu + 1e-3 and s["N"].min() >= 0.5 - 1e-3


@pytest.mark.slow  # ~35 s on 2 cores (65-95 SQP iterations, the refined grid, compilation)
def test_least_mu_on_four_knots_converges_and_scipy_confirms_the_envelope():
    opt = least_mu(disk_manoeuvre(T=8.0, mu=0.3, n_min=0.5), knots=4, n_grid=51)
    assert opt.status == "converged" and opt.kkt < 1e-4 and opt.violation < 1e-6
    # measured 0.1882: above the bound that holds for every control, and above K = 16's 0.1596
    assert _bound_mu(8.0) <= 0.1596 <= opt.mu < 0.2
    y, N, ratio = _resimulate(opt)
    assert abs(y[-2] + math.pi) < 1e-5 and abs(y[-1]) < 1e-5  # phi(T) = -pi, phi'(T) = 0
    assert ratio.max() <= opt.mu + 1e-3 and N.min() >= 0.5 - 1e-3


def test_an_impossible_manoeuvre_is_reported_infeasible(monkeypatch):
    # mu = 0.1 in T = 3: the momentum bound allows X <= 0.39, rolling by pi needs 2.74;
    # refused before any solve (tests/analysis/robot/test_feasibility.py) ...
    man = disk_manoeuvre(T=3.0, mu=0.1, n_min=0.5)
    opt = optimize(man, knots=8, max_iter=25)
    assert opt.status == "infeasible" and opt.iterations == 0 and "needs mu >= 0.712" in opt.message
    # ... and by the SQP, which meets no feasible point, without that check
    import rollax.analysis.robot.optimal as optimal

    monkeypatch.setattr(optimal, "necessary_conditions", lambda *a, **k: [])
    opt = optimize(man, knots=8, max_iter=25)
    assert opt.status == "infeasible" and not opt.converged and opt.iterations > 0
    assert opt.violation > 1e-2


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(T=0.0), "T = 0.0"),
        (dict(T=-1.0), "T = -1.0"),
        (dict(mu=-0.1), "mu = -0.1"),
        (dict(n_min=math.inf), "n_min = inf"),
        (dict(n_min=math.nan), "n_min must be a real number"),
    ],
)
def test_bad_requests_are_one_line_errors(kw, msg):
    with pytest.raises(ValueError, match=msg.replace(".", r"\.")) as e:
        disk_manoeuvre(**kw)
    assert "\n" not in str(e.value)


def test_bad_targets_and_options_are_refused():
    man = disk_manoeuvre()
    with pytest.raises(ValueError, match="target"):
        Manoeuvre(man.model, man.theta0, 5.0, (1.0, 2.0))
    with pytest.raises(ValueError, match="theta0"):
        Manoeuvre(man.model, (0.0, 0.0), 5.0, (1.0,))
    with pytest.raises(ValueError, match="knots"):
        optimize(man, knots=1)
    with pytest.raises(ValueError, match="starts"):
        optimize(man, starts=0)
    for cost in ("foo", 3, None):
        with pytest.raises(
            ValueError,
            match=f"cost = {cost!r} is not allowed: it must be one of 'effort', 'energy', 'time'",
        ) as e:
            optimize(man, cost=cost)
        assert "\n" not in str(e.value)


@pytest.mark.slow  # ~4 min with the refined constraint grid (CI budget); run with -m slow
def test_ball_optimum_resimulated_with_scipy():
    opt = optimize(ball_manoeuvre(target=(1.0, 0.5), T=8.0, mu=0.08, n_min=0.5), knots=12)
    assert opt.status == "converged"
    y, N, ratio = _resimulate(opt)
    n = 3
    assert np.max(np.abs(y[-2:] - [1.0, 0.5])) < 1e-3
    assert np.max(np.abs(y[2 * n + 4 : 2 * n + 7])) < 1e-3 and np.max(np.abs(y[n : 2 * n])) < 1e-3
    assert N.min() >= 0.5 - 1e-3 and 0.08 - 1e-3 < ratio.max() <= 0.08 + 1e-3


# The costs and the batched starts on a small problem: K = 4, 51 grid times (each compiled
# function serves several tests: keep them together, in this order).
SMALL = dict(knots=4, n_grid=51)


@pytest.fixture(scope="module")
def small_optima():
    """The disk turned by -pi with mu = 0.2, N >= 0.5: the least effort and the least energy in
    T = 8, the least time from T = 9."""
    man = disk_manoeuvre(T=8.0, mu=0.2, n_min=0.5)
    out = {cost: optimize(man, cost=cost, **SMALL) for cost in ("effort", "energy")}
    out["time"] = optimize(disk_manoeuvre(T=9.0, mu=0.2, n_min=0.5), cost="time", **SMALL)
    return out


def _meets_target_rest_and_envelope(opt, mu):
    y, N, ratio = _resimulate(opt)
    n = 4
    assert abs(y[2 * n] + math.pi) < 1e-3  # phi(T)
    assert abs(y[2 * n + 1]) < 1e-3 and np.max(np.abs(y[n : 2 * n])) < 1e-3  # at rest
    assert N.min() >= 0.5 - 1e-3 and ratio.max() <= mu + 1e-3
    return ratio.max()


# the three small optima: ~135 s to compute (CI budget); the disk optimum above, the robot
# CLI's optimize and the cost gradients keep the optimiser in CI
@pytest.mark.slow
def test_energy_and_effort_optima_each_win_on_their_own_cost(small_optima):
    eff, en = small_optima["effort"], small_optima["energy"]
    assert eff.status == en.status == "converged"
    assert en.cost_kind == "energy" and en.cost == en.energy
    assert eff.cost_kind == "effort" and eff.cost == eff.effort
    assert en.energy < eff.energy and eff.effort < en.effort  # E: 1.33 < 1.75; J: 1.63 < 13.9
    _meets_target_rest_and_envelope(en, 0.2)


@pytest.mark.slow  # the small optima (above)
def test_energy_is_the_drag_integral_of_the_simulated_rates(small_optima):
    # E = int sum m_i R_i^2 theta_i'^2 dt on the disk's circular rails, theta' from the ODE
    from scipy.integrate import simpson

    for opt in small_optima.values():
        s = opt.sample(8001)
        R = np.array([float(r.radius) for r in opt.manoeuvre.model.rails])
        m = np.asarray(opt.manoeuvre.model.masses)
        E = simpson(np.sum(m * R**2 * s["theta_dot"] ** 2, axis=1), x=s["t"])
        assert abs(E - opt.energy) < 1e-7 * opt.energy
        J, _, _ = evaluate(opt.manoeuvre, opt.control, cost="energy")
        assert float(J) == pytest.approx(opt.energy, rel=1e-12)


@pytest.mark.slow  # the small optima (above)
def test_least_time_beats_a_feasible_duration(small_optima):
    fast = small_optima["time"]
    assert fast.status == "converged" and fast.cost_kind == "time"
    T = float(fast.manoeuvre.T)
    assert fast.cost == T == float(fast.control.T)
    # the least-effort manoeuvre in T = 8 keeps the same envelope: the least T is below 8
    assert small_optima["effort"].feasible and _bound_T(0.2) <= T < 8.0  # 6.96 <= 7.81 < 8
    assert _meets_target_rest_and_envelope(fast, 0.2) > 0.2 - 1e-3  # friction at its bound


@pytest.mark.slow  # ~55 s (CI budget): one more least-time optimisation
def test_least_time_grows_as_the_envelope_tightens(small_optima):
    T = float(small_optima["time"].manoeuvre.T)
    # the same first guess with less friction
    tight = optimize(disk_manoeuvre(T=9.0, mu=0.18, n_min=0.5), cost="time", **SMALL)
    assert tight.status == "converged"
    assert float(tight.manoeuvre.T) >= max(T, _bound_T(0.18))  # 8.14 >= max(7.81, 7.38)
    _meets_target_rest_and_envelope(tight, 0.18)


@pytest.mark.slow  # ~60 s (CI budget); tests/drivers/test_nlp.py checks the batching on a toy problem
def test_starts_run_together_give_what_they_give_one_at_a_time():
    # after the tests above: the single start reuses their compiled effort problem
    man = disk_manoeuvre(T=8.0, mu=math.inf, n_min=-math.inf)
    X = _starts(_NLPProblem(man, 4, 51, False, 1e-8, 16384), 3, 0)
    seen = set()
    together = optimize(man, x0=X, progress=lambda k, info: seen.add(info["start"]), **SMALL)
    alone = [optimize(man, x0=x, **SMALL) for x in X]
    assert seen == {0, 1, 2}
    assert together.start_converged.all() and all(a.converged for a in alone)
    np.testing.assert_allclose(together.start_costs, [a.cost for a in alone], rtol=1e-12)
    best = int(np.argmin(together.start_costs))
    np.testing.assert_allclose(together.control.z, alone[best].control.z, atol=1e-8)
    assert together.iterations == alone[best].iterations


def test_every_optimum_figure_carries_the_parameters(tmp_path, monkeypatch):
    import matplotlib.figure

    from rollax.plot.robot import optimum_figures

    titles = {}
    save = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(
        matplotlib.figure.Figure,
        "savefig",
        lambda fig, path, **kw: (
            titles.__setitem__(path.split("/")[-1], fig._suptitle.get_text()),
            save(fig, path, **kw),
        ),
    )
    t = np.linspace(0.0, 8.0, 5)
    res = dict(
        body="disk",
        T=8.0,
        target=[-math.pi],
        mu=0.2,
        n_min=0.5,
        knots=16,
        cost_kind="effort",
        cost=1.25,
        status="converged",
        t=t,
        phi=-t,
        phi_dot=t,
        theta=np.zeros((5, 2)),
        theta_dot=np.zeros((5, 2)),
        theta_ddot=np.zeros((5, 2)),
        N=np.full(5, 5.0),
        f_s=np.ones(5),
        violation=1e-15,
        kkt=1e-8,
        iterations=3,
        message="done",
        history=dict(cost=[2.0, 1.5, 1.25], violation=[1.0, 1e-3, 0]),
    )
    files = optimum_figures(res, str(tmp_path))
    assert sorted(titles) == sorted(f.split("/")[-1] for f in files) and len(files) == 5
    for name, title in titles.items():
        assert "T = 8" in title and "mu = 0.2" in title and "N_min = 0.5" in title, name
    # an infeasible request read back from strict JSON (inf and nan written as None): the
    # figures are still drawn (robot_control/run.py --smoke failed on its disk_T5 case)
    titles.clear()
    res.update(mu=None, cost=None, violation=None, kkt=None, status="infeasible")
    res["history"] = dict(cost=[None], violation=[None])
    files = optimum_figures(res, str(tmp_path / "refused"))
    assert len(files) == 5 and all("mu = none" in t for t in titles.values()), titles


def test_a_time_limit_stops_the_sqp_not_converged():
    # a real run, stopped at the end of its first iteration (which includes compiling)
    import time

    man = disk_manoeuvre(T=8.0, mu=0.2, n_min=0.5)
    t0 = time.perf_counter()
    opt = optimize(man, knots=4, n_grid=21, time_limit=1e-3)
    wall = time.perf_counter() - t0
    assert opt.status == "not converged" and not opt.converged
    assert opt.message == "time limit reached" and opt.iterations <= 1
    assert wall < 120  # (the compile; the limit itself stops at once)
    # the time cost stopped in its least-effort phase: reported at T = T_0
    opt = optimize(man, cost="time", knots=4, n_grid=21, time_limit=1e-3)
    assert opt.status == "not converged" and float(opt.manoeuvre.T) == 8.0
    for bad in (0.0, -1.0, math.nan, "1"):
        with pytest.raises(ValueError, match="time_limit") as e:
            optimize(man, time_limit=bad)
        assert "\n" not in str(e.value)
