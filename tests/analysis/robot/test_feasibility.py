"""The necessary conditions checked before any solve (rollax.analysis.robot.feasibility).

Requests are generated with fixed seeds so that exactly one condition fails: the friction
impulse bound (``mu >= (D - d - e . h_0) / (g T^2 / 4 + 3 d - z(0))``), the time cost's
range (``T <= TIME_RANGE T_0``), the mean normal force (``n_min <= M g``) or a start outside
a rail with ends. The bound's constants are computed here by another route: the CM offset
at the start from the models' own ``mass_positions`` (the disk through its ball form), and
``d`` from the rails' radii. Each request is answered ``infeasible`` naming the right bound,
with no solve (the SQP and the integrator replaced by traps); requests just inside the
bounds pass the check and reach the SQP.
"""

from __future__ import annotations

import math
import re

import jax.numpy as jnp
import numpy as np
import pytest

import rollax.analysis.robot.optimal as optimal
from rollax.analysis.robot.feasibility import necessary_conditions, rail_reach
from rollax.analysis.robot.optimal import (
    TIME_RANGE,
    Manoeuvre,
    least_mu,
    optimize,
)
from rollax.models.robot.examples import paper_ball, paper_disk
from rollax.robot import CircleRail, Disk, EllipseRail, FigureEightRail, SegmentRail


def _rail_disk():
    """A disk with a straight rail (ends at theta = 0, 1) and a circle."""
    return Disk(
        radius=1.0,
        m0=1.0,
        d2=1.0,
        zeta0=jnp.zeros(3),
        masses=jnp.array([1.0, 2.0]),
        rails=(CircleRail(0.5), SegmentRail(p0=(-0.6, 0.0, -0.5), p1=(0.6, 0.0, -0.5))),
        g=1.0,
    )


def _start_offsets(model, theta0):
    """``(h0, z0, d)``: the CM's horizontal offset and height from the GC at the start, from
    the model's mass positions, and the farthest the CM can be from the GC (the rails' radii)."""
    ball = model.as_ball() if isinstance(model, Disk) else model
    y0 = ball.initial_state(theta0)
    pos = np.asarray(ball.mass_positions(y0))
    m = np.asarray(ball.all_masses())
    cm = m @ pos / m.sum()
    far = [float(np.linalg.norm(model.zeta0))]
    for rail in model.rails:
        if isinstance(rail, CircleRail):  # (about the GC here): its radius
            far.append(float(rail.radius))
        else:  # the segment: its farther end
            far.append(max(np.linalg.norm(rail.p0), np.linalg.norm(rail.p1)))
    return cm[:2] - np.asarray(y0[-2:]), float(cm[2]), float(m @ np.array(far) / m.sum())


def _request(rng, body: str, kind: str, scale: float):
    """A manoeuvre of ``body`` with ``kind``'s condition at ``scale`` times its bound (> 1:
    failing, < 1: inside) and the others comfortably met; and the cost to ask for."""
    rails = body == "rail-disk"
    model = _rail_disk() if rails else (paper_disk() if body == "disk" else paper_ball()).model
    n = model.n
    if rails:
        theta0 = np.array([rng.uniform(-np.pi, np.pi), rng.uniform(0.1, 0.9)])
    else:
        theta0 = np.asarray(
            (paper_disk() if body == "disk" else paper_ball()).y0[:n]
        ) + rng.uniform(-0.5, 0.5, n)
    h0, z0, d = _start_offsets(model, theta0)
    W = float(model.total_mass * model.g)
    T = float(rng.uniform(2.0, 10.0))
    mu = float(rng.uniform(0.05, 0.5))
    n_min = float(rng.uniform(-1.0, 0.9) * W)
    cost = "effort"
    if kind == "time":
        cost = "time"
        T = float(rng.uniform(0.5, 2.5))
    big = TIME_RANGE * T if kind == "time" else T
    A = big**2 / 4 + 3 * d - z0  # g = 1
    # the CM's least travel: scale x the most the friction allows (else well inside)
    travel = (scale if kind in ("mu", "time") else 0.5) * mu * A
    if kind == "n_min":
        n_min = float(scale * W)
    if kind == "rail":
        theta0[1] = 1.0 + (scale - 1.0) if scale > 1 else scale * 0.9
    a = rng.uniform(0, 2 * np.pi)
    if isinstance(model, Disk):
        sign = rng.choice([-1.0, 1.0])
        e = np.array([-sign, 0.0])  # x_GC = -r phi
        target = (sign * (travel + d + e @ h0) / float(model.radius),)
    else:
        e = np.array([math.cos(a), math.sin(a)])
        target = tuple((travel + d + e @ h0) * e)
    man = Manoeuvre(model, theta0, T, target, mu, n_min)
    return man, cost, dict(A=A, d=d, z0=z0, h0=h0, e=e, mu=mu, W=W, T=T)


KINDS = ("mu", "mu", "time", "n_min", "rail")


def _generated(scales, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(20):
        kind = KINDS[i % 5]
        body = "rail-disk" if kind == "rail" else ("disk", "ball")[(i // 5) % 2]
        scale = float(rng.uniform(*scales))
        if kind == "n_min":
            scale = float(rng.uniform(1.01, 3.0)) if scales[0] > 1 else float(rng.uniform(0, 0.99))
        if kind == "rail" and scales[0] > 1:
            scale = float(rng.uniform(1.01, 1.5))
        out.append((i, body, kind) + _request(rng, body, kind, scale))
    return out


INFEASIBLE = _generated((1.02, 3.0), seed=56)
INSIDE = _generated((0.9, 0.995), seed=57)
WORDS = {
    "mu": "needs mu >= ",
    "time": "beyond the time cost's range",
    "n_min": "needs n_min <= M g",
    "rail": "needs theta0[1] in [0, 1]",
}


@pytest.fixture
def no_solve(monkeypatch):
    """Traps: any SQP run or simulation fails the test."""

    def trap(*args, **kwargs):
        raise AssertionError("a solve was started")

    monkeypatch.setattr(optimal._nlp, "minimize", trap)
    monkeypatch.setattr(optimal, "solve", trap)
    monkeypatch.setattr(optimal, "_batch_values", trap)


@pytest.mark.parametrize("case", INFEASIBLE, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_generated_infeasible_requests_are_refused_naming_the_bound(case, no_solve):
    i, body, kind, man, cost, k = case
    fails = necessary_conditions(man, cost=cost)
    assert len(fails) == 1 and WORDS[kind] in fails[0], fails  # exactly the right one
    opt = optimize(man, cost=cost, knots=4)
    assert opt.status == "infeasible" and not opt.converged and not opt.feasible
    assert opt.iterations == 0 and opt.evaluations == 0 and opt.message == fails[0]
    assert math.isnan(opt.cost) and "\n" not in opt.message
    if kind == "mu":  # the number: the least mu of the bound, recomputed here
        mu_least = float(re.search(r"needs mu >= ([0-9.e+-]+)", fails[0])[1])
        D = (
            float(man.model.radius) * abs(float(man.target[0]))
            if isinstance(man.model, Disk)
            else float(np.linalg.norm(man.target))
        )
        expect = (D - k["d"] - k["e"] @ k["h0"]) / (k["T"] ** 2 / 4 + 3 * k["d"] - k["z0"])
        assert mu_least == pytest.approx(expect, rel=1e-3) and mu_least > k["mu"]
        assert f"in T = {k['T']:.6g}" in fails[0]
    if kind == "time":
        T_least = float(re.search(r"needs T >= ([0-9.e+-]+)", fails[0])[1])
        assert T_least > TIME_RANGE * k["T"]
    if kind in ("n_min", "rail"):  # mu is not involved: least_mu refuses them too
        assert least_mu(man, knots=4).status == "infeasible"


@pytest.mark.parametrize("case", INSIDE, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_generated_requests_just_inside_the_bounds_reach_the_solver(case, monkeypatch):
    i, body, kind, man, cost, k = case
    assert necessary_conditions(man, cost=cost) == []

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(optimal._nlp, "minimize", reached)
    with pytest.raises(Reached):
        optimize(man, cost=cost, knots=4)


def test_the_issue_request_and_the_documented_numbers():
    from rollax.robot import disk_manoeuvre

    (msg,) = necessary_conditions(disk_manoeuvre(-6.2832, 6.0, 0.2, 0.5))
    assert msg.startswith("needs mu >= 0.555 for phi_T = -6.2832 in T = 6 (or T >= 10.55")
    # docs/physics-notes.md: 0.349 at T = 5 (T >= 5.49 at mu = 0.3), 0.156 at T = 8
    (msg,) = necessary_conditions(disk_manoeuvre(-math.pi, 5.0, 0.3, 0.5))
    assert "needs mu >= 0.3492" in msg and "T >= 5.491" in msg
    assert necessary_conditions(disk_manoeuvre(-math.pi, 8.0, 0.155, 0.5)) != []  # bound 0.1558
    assert necessary_conditions(disk_manoeuvre(-math.pi, 8.0, 0.1596, 0.5)) == []  # least mu
    # least_mu skips the friction bound; mu = inf drops it; the time cost looks up to 4 T
    assert necessary_conditions(disk_manoeuvre(-math.pi, 5.0, 0.3, 0.5), free_mu=True) == []
    assert necessary_conditions(disk_manoeuvre(-math.pi, 5.0, math.inf, 0.5)) == []
    assert necessary_conditions(disk_manoeuvre(-math.pi, 5.0, 0.3, 0.5), cost="time") == []


def test_n_min_at_the_weight_is_left_to_the_solver():
    from rollax.robot import disk_manoeuvre

    assert necessary_conditions(disk_manoeuvre(T=8.0, n_min=5.0)) == []  # N = M g throughout: maybe
    assert necessary_conditions(disk_manoeuvre(T=8.0, n_min=5.01)) != []


def test_rail_reach_bounds_every_sampled_point():
    rails = [
        CircleRail(0.4, center=(0.1, 0.0, 0.2)),
        EllipseRail(0.3, 0.5, center=(0.0, 0.0, -0.1)),
        FigureEightRail(0.4, center=(0.2, 0.0, 0.0)),
        SegmentRail(p0=(-0.3, 0.0, 0.1), p1=(0.5, 0.0, -0.2)),
    ]
    for rail in rails:
        lo, hi = rail.domain
        ths = np.linspace(lo, hi, 4001)
        sampled = max(float(np.linalg.norm(rail.zeta(t))) for t in ths)
        assert sampled <= rail_reach(rail, 1.0) + 1e-12
        assert rail_reach(rail, 1.0) <= sampled + 0.3  # and not absurdly loose


def test_a_forced_model_is_not_prechecked():
    from rollax.robot import ConstantForce, disk_manoeuvre

    man = disk_manoeuvre(-6.2832, 6.0, 0.2, 0.5)
    forced = Manoeuvre(
        Disk(**{**_fields(man.model), "F_e": ConstantForce(jnp.array([0.1, 0.0, 0.0]))}),
        man.theta0,
        man.T,
        man.target,
        man.mu,
        man.n_min,
    )
    assert necessary_conditions(forced) == []


def _fields(model):
    import dataclasses

    return {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}


def _least_mu(man, cost):
    """The friction bound's least mu for ``man`` (from the refusal of mu = 1e-9)."""
    import equinox as eqx

    fails = necessary_conditions(eqx.tree_at(lambda m: m.mu, man, 1e-9), cost=cost)
    return float(re.search(r"needs mu >= ([0-9.e+-]+)", fails[0])[1])


@pytest.mark.parametrize(
    "case", [c for c in INSIDE if c[2] == "mu"], ids=lambda c: f"{c[0]}-{c[1]}"
)
def test_a_robust_request_failing_a_bound_at_a_vertex_is_refused_at_once(case, monkeypatch):
    """With every sample required, a box whose low mu fails the friction bound (the nominal
    mu meets it) is refused before any solve, naming the vertex; a box just inside the bound,
    or a chance constraint over the failing box, reaches the solver."""
    i, body, kind, man, cost, k = case
    mu, least = k["mu"], _least_mu(man, cost)
    assert least < mu
    failing = {"mu": (least * 0.98, mu * 1.1)}
    trap = pytest.MonkeyPatch()

    def no_solve(*args, **kwargs):
        raise AssertionError("a solve was started")

    trap.setattr(optimal._nlp, "minimize", no_solve)
    trap.setattr(optimal, "solve", no_solve)
    try:
        opt = optimize(man, cost=cost, knots=4, uncertain=failing, samples=4)
    finally:
        trap.undo()
    assert opt.status == "infeasible" and opt.iterations == 0 and not opt.feasible
    lo = re.search(r"vertex mu ([0-9.e+-]+)", opt.message)
    assert lo and float(lo[1]) == pytest.approx(least * 0.98, rel=1e-3), opt.message
    assert "needs mu >= " in opt.message and "\n" not in opt.message

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(optimal._nlp, "minimize", reached)
    inside = {"mu": ((least + mu) / 2, mu * 1.1)}
    with pytest.raises(Reached):
        optimize(man, cost=cost, knots=4, uncertain=inside, samples=4)
    with pytest.raises(Reached):  # a chance constraint: some samples may fail
        optimize(man, cost=cost, knots=4, uncertain=failing, samples=4, probability=0.9)


@pytest.mark.parametrize(
    "case", [c for c in INSIDE if c[2] == "n_min"], ids=lambda c: f"{c[0]}-{c[1]}"
)
def test_a_robust_request_whose_light_vertex_cannot_press_n_min_is_refused(case, no_solve):
    """Lighter masses lower the mean normal force M g below n_min at the box's light vertex."""
    i, body, kind, man, cost, k = case
    model = man.model
    m = np.asarray(model.masses, float)
    n_min = float(man.n_min)
    # the relative size at which the light vertex's weight is n_min, and 1.5x that
    r = (k["W"] - n_min) / (float(np.sum(m)) * float(model.g))
    if r * 1.5 >= 0.9:
        pytest.skip("n_min too far below the weight for a mass uncertainty under 90 %")
    opt = optimize(man, cost=cost, knots=4, uncertain={"masses": 1.5 * r}, samples=4)
    assert opt.status == "infeasible" and opt.iterations == 0, opt.message
    assert "vertex" in opt.message and "needs n_min <= M g" in opt.message
