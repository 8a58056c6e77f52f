"""Optimal rest-to-rest manoeuvres of ball and disk robots inside a contact envelope.

Direct optimal control by gradient through :func:`rollax.solve`. The robot (Putkaradze &
Rogers, *On the normal force and static friction acting on a rolling ball actuated by internal
point masses*, Sects. 3-6) starts at rest; the rail accelerations ``u_i = theta_i''`` are
cubic splines on ``K`` uniform knots of the normalised time ``s = t / T`` with ``int_0^T u_i
dt = 0`` (:class:`~rollax.robot.RestToRestControl`), so the masses end at rest exactly. The
problem is

    min  C                                                  (or the least mu, see least_mu)
    s.t. disk: phi(T) = phi_T, phi'(T) = 0;  ball: (x, y)(T) = target, Omega(T) = 0
         N(t) >= N_min, |f_s(t)| <= mu N(t)   on a uniform grid of n_grid times,
         theta_i(t) inside the rail's domain  (rails with ends: SegmentRail, CurveRail),

with N from (3.3) / (4.3) and f_s from (3.4) / (4.4), and the cost ``C`` one of

* ``effort``: ``J = int_0^T sum_i u_i^2 dt`` (exact, a quadratic form of the knot values);
* ``energy``: ``E + ENERGY_EFFORT J`` with ``E = int_0^T sum_i m_i |v_i|^2 dt``, ``v_i =
  zeta_i'(theta_i) theta_i'`` mass i's velocity relative to the body. ``E`` is twice the time
  integral of the masses' kinetic energy relative to the body, and ``c E`` the energy that a
  viscous drag ``-c m_i v_i`` along the rails dissipates: what moving the masses costs. (The
  net work of the drives measures nothing of the kind: with everything at rest at both ends
  it is the change of potential energy, whatever the motion in between.) It is a sum of
  squares, integrated by 5 Gauss-Legendre points per knot interval with ``theta'``,
  ``theta`` from the spline's exact integrals (exact on circular rails: ``theta'`` is
  quartic in t there). ``E`` alone is least for rates that jump at 0 and T (unbounded
  accelerations, resolved only by the knots): the effort term makes the optimum smooth and
  unique, and raises ``E`` above the least ``E`` by at most ``ENERGY_EFFORT`` times the
  effort of the least-``E`` control (both on the same knots). Measured on the disk below,
  K = 8: E = 0.9082 with J = 5.80 (so E is within 0.006 of its least value), against
  E = 1.3841, J = 1.2900 at the least effort.
* ``time``: ``T + TIME_EFFORT J``, ``T`` a variable, ``log(T / T_0)`` within ``+-
  log(TIME_RANGE)`` (``T_0``: the manoeuvre's T, the first guess), the knot values scaled by
  ``(T_0 / T)^2`` so that a change of T runs the masses along the same paths, faster or
  slower. The effort term picks one control among the many that reach the least T, and
  raises T above the least T by at most ``TIME_EFFORT`` times the effort of a least-T
  control. Measured on the disk below, K = 8: T = 7.4761 (J = 25.0; 135 SQP iterations, 89
  more on the refined grid) against T = 7.4596 (J = 87.4; 500 iterations, the limit, and
  500 more) with no effort term; the momentum bound is T >= 6.96.

The energy and time costs start from the least-effort manoeuvres in ``T_0``: feasible points,
near a good optimum. Measured: from no motion, the time cost's first SQP step shortens T to
T_0 / e (the constraints do not depend on T to first order there) and the run ends
infeasible (violation 1.75 after 500 iterations); the energy cost (K = 4, 51 grid times)
ends at a local optimum with E = 4.20, against E = 1.33 from the least-effort manoeuvre
(E = 1.75 there). "The disk below": the Sect. 5 disk turned by ``-pi`` in ``T_0 = 8`` with
``mu = 0.2``, ``N >= 0.5``.

Before any solve, :func:`optimize` and :func:`least_mu` check the necessary conditions of
:mod:`rollax.analysis.robot.feasibility` (the friction impulse bound on the CM's travel,
``n_min <= M g``, rail starts), in plain NumPy; a request that fails one is answered at once
``infeasible`` with the bound in ``Optimum.message``. ``time_limit`` stops the SQP early
(``not converged``, the best point so far).

The problem is solved by sequential quadratic programming (SciPy's SLSQP on JAX-compiled
values and forward-mode Jacobians; see :mod:`rollax._drivers._nlp` for why, with the measurements).
The dynamics are the rolling equations throughout (:class:`rollax.systems.RollingRobot`), run
in ``s`` (so the kinks of the control stay at ``s = k / K`` when T varies): a control that
would make the body hop violates ``N >= N_min`` and the optimiser removes it.

The authors solved this optimal control problem (without the contact envelope) by Pontryagin's
principle and continuation (Putkaradze & Rogers 2017, arXiv:1708.03829).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax._drivers import _nlp
from rollax.analysis.robot._problem import (  # noqa: F401  (re-exported: tests and robust use them)
    CHANCE_TAU,
    COSTS,
    ENERGY_EFFORT,
    LEAST_MU_EFFORT,
    STATUSES,
    TIME_EFFORT,
    TIME_RANGE,
    Manoeuvre,
    _check_cost,
    _cost,
    _fun,
    _NLPProblem,
    _one,
    _rolling,
    _whitening,
    ball_manoeuvre,
    disk_manoeuvre,
    evaluate,
)
from rollax.analysis.robot.feasibility import necessary_conditions
from rollax.analysis.robot.robust import _robust_rounds
from rollax._core._validate import check_integer, check_range
from rollax._integrate._solve import solve
from rollax.models.robot.controls import RestToRestControl, _rest_basis
from rollax.models.robot.disk import Disk


class Optimum(eqx.Module):
    """The result of :func:`optimize` (or :func:`least_mu`): the best start's control and how
    the optimisation went. :meth:`sample` re-simulates it on a dense grid."""

    manoeuvre: Manoeuvre  # with the optimal T for the time cost
    control: RestToRestControl
    cost_kind: str  # "effort", "energy" or "time" (least_mu: "effort", its regularisation)
    cost: float  # of the best start: J (effort), E (energy) or T (time), unregularised
    effort: float  # J = int sum u^2 dt
    energy: float  # E = int sum m_i |zeta_i'|^2 theta_i'^2 dt
    mu: float  # the friction coefficient of the envelope (the least mu for least_mu)
    converged: bool
    feasible: bool
    status: str  # one of STATUSES: "converged", "infeasible" or "not converged"
    violation: float  # max constraint violation (per unit weight for the path constraints)
    kkt: float  # |grad of the Lagrangian|_inf / max(1, |f|)
    iterations: int  # SQP iterations of the best start
    evaluations: int  # simulations (each with its Jacobian) of the best start
    wall_time: float  # seconds, all starts
    message: str  # SLSQP's exit message, "time limit reached", or the necessary condition failed
    start_costs: np.ndarray  # the cost of every start (nan: not feasible)
    start_converged: np.ndarray
    history: Any  # rollax._drivers._nlp.History of the best start's run
    # the distinct local optima the starts reached, best first: dicts of cost, starts (how
    # many reached it) and converged (how many of those converged); see _distinct
    optima: tuple = ()
    # robust problems (optimize(uncertain=...)): the box, samples, the nominal optimum's cost,
    # the worst case found and the rounds (rollax.analysis.robot.robust); None otherwise
    robust: Any = None

    def sample(self, n: int = 1001, rtol: float = 1e-10) -> dict:
        """Re-simulate on ``n`` uniform times of ``[0, T]``: ``t``, ``theta``, ``theta_dot``,
        ``theta_ddot`` (shape ``(n, masses)``), ``N``, ``f_s``, ``ratio`` (``|f_s|/N``), the
        body's state (disk: ``phi``, ``phi_dot``, ``x = -r phi``; ball: ``x``, ``y``,
        ``Omega``) and the final state ``y_T``."""
        n = check_integer("n", n, 2)
        man, c = self.manoeuvre, self.control
        ts = man.T * jnp.linspace(0.0, 1.0, n)
        sol = solve(
            _rolling(man.model, c), man.y0, 0.0, man.T, ts=ts, rtol=rtol, atol=rtol, max_steps=65536
        )
        ys = sol.ys
        assert ys is not None  # (saved at ts)
        N, F_h = jax.vmap(lambda t, y: man.model.contact_forces(t, y, c))(ts, ys)
        fs = jnp.sqrt(jnp.sum(F_h**2, axis=1))
        m = man.model.n
        out = dict(
            t=ts,
            theta=ys[:, :m],
            theta_dot=ys[:, m : 2 * m],
            theta_ddot=jax.vmap(c)(ts),
            N=N,
            f_s=fs,
            ratio=fs / N,
            y_T=sol.y,
        )
        if isinstance(man.model, Disk):
            out.update(
                phi=ys[:, 2 * m],
                phi_dot=ys[:, 2 * m + 1],
                x=-man.model.radius * ys[:, 2 * m],
                F_h=F_h[:, 0],
            )
        else:
            out.update(x=ys[:, -2], y=ys[:, -1], Omega=ys[:, 2 * m + 4 : 2 * m + 7], F_h=F_h)
        return {k: np.asarray(v) for k, v in out.items()}

    def to_dict(self, n: int = 1001) -> dict:
        """Everything needed to re-simulate the manoeuvre with another integrator (JSON-ready
        after :func:`rollax.cli._args.dumps`): the samples of :meth:`sample`, the knot values
        of ``u``, the problem, the cost and the convergence report."""
        s = self.sample(n)
        man = self.manoeuvre
        body = "disk" if isinstance(man.model, Disk) else "ball"
        extra = {k: s[k] for k in ("phi", "phi_dot", "x", "y", "Omega") if k in s}
        return dict(
            body=body,
            T=float(man.T),
            target=np.asarray(man.target).tolist(),
            mu=float(self.mu),
            n_min=float(man.n_min),
            slope=np.asarray(man.model.slope).tolist(),
            knots=self.control.K,
            theta0=np.asarray(man.theta0).tolist(),
            t=s["t"],
            theta=s["theta"],
            theta_dot=s["theta_dot"],
            theta_ddot=s["theta_ddot"],
            u_knots=np.asarray(self.control.values()),
            N=s["N"],
            f_s=s["f_s"],
            cost_kind=self.cost_kind,
            cost=self.cost,
            effort=self.effort,
            energy=self.energy,
            final_state=s["y_T"],
            min_N=float(np.min(s["N"])),
            max_friction_ratio=float(np.max(s["ratio"])),
            converged=self.converged,
            feasible=self.feasible,
            status=self.status,
            violation=self.violation,
            kkt=self.kkt,
            iterations=self.iterations,
            evaluations=self.evaluations,
            wall_time=self.wall_time,
            message=self.message,
            history=dict(cost=self.history.f, violation=self.history.violation),
            **extra,
            start_costs=self.start_costs,
            start_converged=self.start_converged,
            optima=list(self.optima),
            robust=None
            if self.robust is None
            else {k: v for k, v in self.robust.items() if k not in ("box_object", "nominal")},
        )


#: The structured starts' rail swings ``Delta theta`` [rad] (module docstring of _starts).
START_SWINGS = (1.0, 0.5, 2.0)


def _shaped(prob: _NLPProblem) -> list[np.ndarray]:
    """Structured starts (whitened knot values, rows of ``K n``): every mass accelerated
    along a low-order polynomial ``u_i(t) = a_i P_j(t / T)`` (shifted Legendre ``P_1, P_2,
    P_3``: zero integral, so rest to rest), ``a_i = +-6 Delta theta / T^2`` (``P_1`` swings
    the rail coordinate by ``Delta theta``), all masses one way or alternating, for each
    swing of ``START_SWINGS``."""
    K, n = prob.K, prob.man.model.n
    s = np.linspace(0.0, 1.0, K + 1)
    shapes = (1 - 2 * s, 6 * s**2 - 6 * s + 1, 20 * s**3 - 30 * s**2 + 12 * s - 1)
    B = _rest_basis(K)
    to_w = np.linalg.inv(_whitening(K))  # w = C^T z
    T = float(prob.man.T)
    signs = (np.ones(n), -np.ones(n), (-1.0) ** np.arange(n), -((-1.0) ** np.arange(n)))
    out = []
    for swing in START_SWINGS:
        for shape in shapes:
            for sign in signs:
                V = (6 * swing / T**2) * shape[:, None] * sign[None, :]  # (K + 1, n)
                out.append((to_w @ (B.T @ V)).ravel())
    return out


def _starts(prob: _NLPProblem, starts: int, seed: int):
    """``starts`` rows of starting variables: no motion first, then structured starts
    (:func:`_shaped`) and random ones (``0.1`` standard normal whitened knot values, from
    ``seed``) in turn."""
    n = prob.K * prob.man.model.n
    rng = np.random.default_rng(seed)
    shaped = _shaped(prob)
    rows = [np.zeros(n)]
    while len(rows) < starts:
        if len(rows) % 2 == 1 and shaped:
            rows.append(shaped.pop(0))
        else:
            rows.append(0.1 * rng.standard_normal(n))
    z = np.stack(rows)
    if prob.free_mu:
        z = np.concatenate([z, np.ones((starts, 1))], axis=1)  # mu = 1: a generous envelope
    return z


#: Continuation (:func:`_continued`): the easier problems' friction and time factors
CONTINUATION_MU = 2.0
CONTINUATION_T = 1.25


def _continued(prob: _NLPProblem, phase, tol: float, n_grid: int) -> np.ndarray:
    """Two starting rows from continuation: the least-effort problem with the envelope's mu
    x :data:`CONTINUATION_MU` (where mu is finite) and with T x :data:`CONTINUATION_T`, each
    solved from no motion and the first three structured starts; the best feasible optimum
    of each is mapped back (the longer one's knot values x ``(T'/T)^2``: the control is a
    spline in ``t / T`` and a rail's swing goes as ``u T^2``). Where an easier problem has
    no feasible optimum its least violation is taken."""
    man = prob.man
    X = np.stack([np.zeros(prob.K * man.model.n)] + _shaped(prob)[:3])
    rows = []
    mu = float(man.mu)
    relaxed = [("mu", eqx.tree_at(lambda m: m.mu, man, jnp.asarray(CONTINUATION_MU * mu)), 1.0)]
    if not math.isfinite(mu):
        relaxed = []
    T = float(man.T)
    relaxed.append(("T", eqx.tree_at(lambda m: m.T, man, jnp.asarray(CONTINUATION_T * T)),
                    CONTINUATION_T**2))  # fmt: skip
    for what, m, scale in relaxed:
        p = dataclasses.replace(prob, man=m, cost="effort")
        res = phase(p, X, range(len(X)), f"SQP, continuation in {what}")
        ok = [r for r in res if r.feasible]
        best = min(ok, key=lambda r: r.f) if ok else min(res, key=lambda r: r.violation)
        rows.append(np.asarray(best.x) * scale)
    return np.stack(rows)


def _progress_printer(enabled, starts, n, max_iter: int | None = None, desc: str = "SQP"):
    """``(progress, close)``: ``progress`` for :func:`rollax._drivers._nlp.minimize` run on the
    rows ``starts`` of ``n`` starts (``info["start"]`` made the start's index among all ``n``),
    and ``close()`` to end its display. ``enabled=True``: a tqdm bar on stderr named ``desc``,
    its count the iterations of the furthest start out of ``max_iter`` (SLSQP usually stops
    well before), then the time so far and the latest start's iteration, objective and
    constraint violation; the first iteration includes compiling the problem."""
    if not enabled:
        return None, lambda: None
    starts = list(starts)
    if enabled is True:
        import threading

        from tqdm.auto import tqdm

        bar = tqdm(
            total=max_iter,
            desc=f"{desc} ({len(starts)} start{'s' if len(starts) > 1 else ''}; the first "
            "iteration compiles)",
            unit="it",
            bar_format="{desc}: iteration {n} of at most {total} [{elapsed}{postfix}]",
            mininterval=0.5,
        )
        lock = threading.Lock()

        def show(k, info):
            with lock:
                if k + 1 > bar.n:
                    bar.update(k + 1 - bar.n)
                bar.set_postfix_str(
                    f"start {info['start'] + 1}/{n}: iteration {k + 1}, objective "
                    f"{info['f']:.6g}, violation {info['violation']:.2e}"
                )

        close = bar.close
    else:
        show, close = enabled, lambda: None
    return (lambda k, info: show(k, {**info, "start": starts[info["start"]]})), close


@eqx.filter_jit
def _batch_values(X, prob):
    """``(r, h, g)`` at every row of ``X`` (one compiled call)."""
    return jax.vmap(lambda x: _fun(x, prob))(jnp.asarray(X))


def _refused(man: Manoeuvre, cost: str, K: int, free_mu: bool, why: str, wall: float):
    """The :class:`Optimum` of a manoeuvre that fails a necessary condition: ``infeasible``
    with no iteration, ``why`` the message, the control no motion (``cost``, ``effort``,
    ``energy``, ``violation`` and ``kkt`` nan: nothing was solved)."""
    nan = math.nan
    empty = np.zeros(0)
    return Optimum(
        manoeuvre=man,
        control=RestToRestControl(jnp.zeros((K, man.model.n)), man.T),
        cost_kind=cost,
        cost=nan,
        effort=nan,
        energy=nan,
        mu=nan if free_mu else float(man.mu),
        converged=False,
        feasible=False,
        status="infeasible",
        violation=nan,
        kkt=nan,
        iterations=0,
        evaluations=0,
        wall_time=wall,
        message=why,
        start_costs=empty,
        start_converged=np.zeros(0, dtype=bool),
        history=_nlp.History(empty, empty),
    )


#: Two starts reached the same local optimum when their costs agree to this (relative) part.
SAME_OPTIMUM = 1e-3


def _distinct(costs, converged) -> tuple[dict, ...]:
    """The distinct local optima among the starts' feasible ``costs`` (nan: not feasible),
    best first: ``{"cost", "starts", "converged"}`` (costs within ``SAME_OPTIMUM`` of the
    group's best are one optimum)."""
    order = [i for i in np.argsort(costs) if np.isfinite(costs[i])]
    groups: list[dict] = []
    for i in order:
        c = float(costs[i])
        if groups and abs(c - groups[-1]["cost"]) <= SAME_OPTIMUM * max(
            1.0, abs(groups[-1]["cost"])
        ):
            groups[-1]["starts"] += 1
            groups[-1]["converged"] += int(converged[i])
        else:
            groups.append({"cost": c, "starts": 1, "converged": int(converged[i])})
    return tuple(groups)


def _search_note(optima: tuple, starts: int) -> str:
    """What the starts say about the best optimum (appended to ``Optimum.message``)."""
    if starts == 1:
        return "a local optimum from 1 start (starts > 1 searches for better ones)"
    if not optima:
        return f"no start of {starts} ended feasible"
    best = optima[0]["starts"]
    more = f"{len(optima)} distinct local optima among {starts} starts; the best reached by {best}"
    if best == 1:
        more += " start only: more starts may find a better one"
    return more


def _solve(prob: _NLPProblem, X, phase, tol: float, n_grid: int):
    """SQP from the rows of ``X`` on ``prob``: the least-effort (or least-mu) phase, then
    the energy or time cost from its results (rows as wide as the time cost's variables skip
    the first phase), then, once, a 4x finer grid for the starts whose constraints dip
    between the grid's times by more than ``tol`` (module docstring). ``(results,
    stopped)``."""
    first = dataclasses.replace(prob, cost="effort")
    n_first = prob.K * prob.man.model.n + int(prob.free_mu)
    stopped = False
    results: list = []
    X = np.atleast_2d(np.asarray(X, float))
    label = "least mu" if prob.free_mu else "effort"
    robust = " (robust)" if prob.paths else ""
    if X.shape[1] == n_first:
        results = phase(first, X, range(len(X)), f"SQP, {label}{robust}")
        stopped = any(r.stopped for r in results)
        X = np.stack([r.x for r in results])
        if prob.cost == "time":
            X = np.concatenate([X, np.zeros((len(X), 1))], axis=1)  # T = T_0
    if prob.cost != first.cost and not stopped:
        results = phase(prob, X, range(len(X)), f"SQP, {prob.cost}{robust}")
        stopped = any(r.stopped for r in results)
    if prob.cost == "time" and len(results[0].x) == n_first:  # stopped in the first phase
        for i, r in enumerate(results):
            results[i] = r._replace(x=np.concatenate([r.x, [0.0]]))
    X = np.stack([r.x for r in results])
    if not stopped:
        _, h, g = _batch_values(X, dataclasses.replace(prob, n_grid=8 * (n_grid - 1) + 1))
        dips = np.maximum(np.max(np.asarray(g), axis=1), np.max(np.abs(np.asarray(h)), axis=1))
        redo = [i for i, r in enumerate(results) if r.feasible and dips[i] > tol]
        if redo:
            finer = dataclasses.replace(prob, n_grid=4 * (n_grid - 1) + 1)
            again = phase(finer, X[redo], redo, f"SQP, refined grid{robust}")
            for i, r in zip(redo, again):
                results[i] = r
    return results, stopped


def _optimum(prob: _NLPProblem, results, cost: str, wall: float, starts: int, robust=None):
    """The :class:`Optimum` of the best feasible result (or the least violation)."""
    man = prob.man
    feasible = np.array([r.feasible for r in results])
    costs = np.array([float(_cost(cost, man, prob.control(jnp.asarray(r.x)))) for r in results])
    score = np.where(feasible, [r.f for r in results], np.inf)
    best = (
        int(np.argmin(score)) if feasible.any() else int(np.argmin([r.violation for r in results]))
    )
    res = results[best]
    x = jnp.asarray(res.x)
    control = prob.control(x)
    man = eqx.tree_at(lambda m: m.T, man, control.T)
    if prob.free_mu:  # the least mu found: the envelope the control was found in
        man = eqx.tree_at(lambda m: m.mu, man, jnp.asarray(prob.mu(x), float))
    if res.converged:
        status = "converged"
    elif res.feasible or any(r.stopped for r in results):
        status = "not converged"  # (stopped by the time limit: not known to be infeasible)
    else:
        status = "infeasible"
    start_costs = np.where(feasible, costs, np.nan)
    start_converged = np.array([r.converged for r in results])
    optima = _distinct(start_costs, start_converged)
    message = res.message
    stopped = any(r.stopped for r in results)  # (the time limit: the message says so alone)
    if not stopped and (starts > 1 or robust is None):
        message = f"{message}; {_search_note(optima, starts)}"
    return Optimum(
        manoeuvre=man,
        control=control,
        cost_kind=cost,
        cost=float(_cost(cost, man, control)),
        effort=float(control.effort()),
        energy=float(_cost("energy", man, control)),
        mu=float(prob.mu(x)),
        converged=res.converged,
        feasible=res.feasible,
        status=status,
        violation=res.violation,
        kkt=res.kkt,
        iterations=res.iterations,
        evaluations=res.evaluations,
        wall_time=wall,
        message=message,
        start_costs=start_costs,
        start_converged=start_converged,
        history=res.history,
        optima=optima,
        robust=robust,
    )


def _run(
    man: Manoeuvre,
    *,
    free_mu: bool,
    cost: str,
    knots: int,
    starts: int,
    seed: int,
    n_grid: int,
    rtol: float,
    tol: float,
    kkt_tol: float,
    max_iter: int,
    progress,
    x0=None,
    time_limit=None,
    uncertain=None,
    samples: int = 16,
    probability=None,
    terminal: str = "mean",
    rounds: int = 4,
    continuation: bool = False,
) -> Optimum:
    if not isinstance(man, Manoeuvre):
        raise ValueError(
            f"manoeuvre = {type(man).__name__} is not allowed: it must be a rollax.robot.Manoeuvre"
        )
    K = check_integer("knots", knots, 2, 512)
    starts = check_integer("starts", starts, 1, 4096)
    n_grid = check_integer("n_grid", n_grid, 2)
    max_iter = check_integer("max_iter", max_iter, 1)
    check_range("rtol", rtol, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range("tol", tol, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range("kkt_tol", kkt_tol, 0.0, math.inf, lo_open=True)
    cost = _check_cost(cost)
    if time_limit is not None:
        time_limit = check_range("time_limit", time_limit, 0.0, math.inf, lo_open=True)
    box = None
    if uncertain is not None:
        from rollax.analysis.robot.uncertain import parameter_box

        box = parameter_box(man, uncertain)
        samples = check_integer("samples", samples, 1, 4096)
        rounds = check_integer("rounds", rounds, 0, 64)
        if probability is not None:
            check_range("probability", probability, 0.0, 1.0, lo_open=True, hi_open=True)
        if terminal not in ("nominal", "mean", "every"):
            raise ValueError(
                f"terminal = {terminal!r} is not allowed: it must be 'nominal', 'mean' or 'every'"
            )
    t_start = time.perf_counter()
    # necessary conditions first (rollax.analysis.robot.feasibility): no solve, no compile
    failed = necessary_conditions(
        man, cost=cost, free_mu=free_mu, tol=float(tol), time_range=TIME_RANGE
    )
    if not failed and box is not None and probability is None:  # every sample required
        from rollax.analysis.robot.robust import box_necessary

        failed = box_necessary(man, box, cost=cost, free_mu=free_mu, tol=float(tol))
    if failed:
        return _refused(man, cost, K, free_mu, "; ".join(failed), time.perf_counter() - t_start)
    deadline = None if time_limit is None else t_start + float(time_limit)
    prob = _NLPProblem(man, K, n_grid, free_mu, float(rtol), 16384, cost=cost)
    # the energy and time costs start from the least-effort manoeuvres (module docstring)
    x0 = _starts(prob, starts, seed) if x0 is None else np.atleast_2d(np.asarray(x0, float))
    width = K * man.model.n + int(free_mu)
    if x0.ndim != 2 or x0.shape[1] != width:
        raise ValueError(
            f"x0 has shape {x0.shape}; allowed: rows of {width} starting variables (K n"
            + (" + 1, the last sqrt(mu))" if free_mu else ")")
        )

    def phase(fn_prob, X, rows, desc):
        if time_limit is not None and math.isfinite(time_limit):
            desc += f", time limit {time_limit:g} s"
        show, close = _progress_printer(progress, rows, len(X), max_iter, desc)
        try:
            return cast(  # (a list: one Result per row of the 2-d starts)
                list[_nlp.Result],
                _nlp.minimize(
                    _fun,
                    X,
                    fn_prob,
                    tol=tol,
                    kkt_tol=kkt_tol,
                    max_iter=max_iter,
                    progress=show,
                    deadline=deadline,
                ),
            )
        finally:
            close()

    if not isinstance(continuation, bool):
        raise ValueError(f"continuation = {continuation!r} must be True or False")
    if continuation and x0.shape[1] == K * man.model.n and not free_mu:
        x0 = np.concatenate([x0, _continued(prob, phase, tol, n_grid)])
    results, stopped = _solve(prob, x0, phase, tol, n_grid)
    nominal = _optimum(prob, results, cost, time.perf_counter() - t_start, len(x0))
    if box is None or stopped or not nominal.feasible:
        return nominal
    return _robust_rounds(
        prob, nominal, results, box, phase, _solve, _optimum, samples=samples, seed=seed,
        probability=probability, terminal=terminal, rounds=rounds, tol=tol, n_grid=n_grid,
        t_start=t_start, progress=progress,
    )  # fmt: skip


def optimize(
    manoeuvre: Manoeuvre,
    *,
    cost: str = "effort",
    knots: int = 16,
    starts: int = 1,
    seed: int = 0,
    n_grid: int = 201,
    rtol: float = 1e-8,
    tol: float = 1e-6,
    kkt_tol: float = 1e-4,
    max_iter: int = 500,
    progress=True,
    x0=None,
    time_limit: float | None = None,
    uncertain: dict | None = None,
    samples: int = 16,
    probability: float | None = None,
    terminal: str = "mean",
    rounds: int = 4,
    continuation: bool = False,
) -> Optimum:
    """The optimal control of ``manoeuvre`` (module docstring) for ``cost``: ``"effort"``
    (``min int_0^T sum_i u_i^2 dt``), ``"energy"`` (``min E + ENERGY_EFFORT * J``) or
    ``"time"`` (``min T + TIME_EFFORT * J``, the manoeuvre's T the first guess and ``T`` in
    ``[T / TIME_RANGE, TIME_RANGE * T]``), from ``starts`` initial guesses at once (the
    first: no motion; the others: random, from ``seed``; their SQP iterations run side by
    side, with the simulations of all starts batched by ``jax.vmap``); the best feasible start
    is returned with every start's cost.

    ``knots``: K, the spline intervals of each ``u_i``; ``n_grid``: the times on which the path
    constraints are imposed; ``rtol``: the solver's tolerance; ``tol``: the allowed constraint
    violation; ``kkt_tol``: the allowed (relative) stationarity residual. ``progress`` (on by
    default: a first optimisation compiles for a minute or more) shows the SQP's iterations on
    stderr, ``False`` nothing (or give a callable ``(k,
    info)``; ``info["start"]`` is the start). ``x0``: starting points instead (one row a
    start, ``K n`` whitened knot values as the generated starts; for the time cost, the
    starts of its least-effort phase). A manoeuvre that cannot be done inside the envelope
    ends with ``status = "infeasible"`` and the least violation found.

    Before any solve (plain NumPy, nothing compiled: milliseconds) the necessary conditions
    of :mod:`rollax.analysis.robot.feasibility` are checked: ``n_min <= M g`` (N averages the
    weight over any rest-to-rest manoeuvre), the friction impulse bound (the CM's travel in
    T needs ``mu >= ...``; for the time cost, ``T >= ...`` within ``TIME_RANGE`` times the
    given T) and the starts of rails with ends inside their domains. One that fails returns
    at once ``status = "infeasible"``, ``iterations = 0``, nan costs, the no-motion control
    and, in ``message``, the bound with its numbers (e.g. ``needs mu >= 0.555 for phi_T =
    -6.2832 in T = 6 (or T >= 10.55 at mu = 0.2; ...)``).

    ``time_limit``: seconds (> 0; ``None``, the default: none) after which the SQP stops at
    the end of its current iteration (the first includes compiling, and is not interrupted)
    and returns the best point met so far with ``status = "not converged"`` and ``message =
    "time limit reached"``; the later phases (the energy or time cost after the least-effort
    one, the finer grid) are then skipped.

    **Several starts** (``starts > 1``): no motion, structured starts (every mass driven by a
    low-order polynomial acceleration of several sizes, all one way or alternating; see
    :func:`_shaped`) and random ones in turn, run side by side. The problem is multimodal:
    ``Optimum.optima`` lists the distinct local optima reached (cost, how many starts reached
    it, how many converged), and ``message`` says how many starts reached the best (a best
    reached by one start only: more starts may find a better one).

    **Robust** (``uncertain``, :mod:`rollax.analysis.robot.robust`): ``{"mu": (0.15, 0.25),
    "masses": 0.02, ...}`` (names and forms in :mod:`rollax.analysis.robot.uncertain`); the
    contact constraints are required for ``samples`` parameter sets of that box (the nominal
    first) evaluated as one batch, for every sample (``probability=None``; followed by a
    search for the worst parameter set, whose violations are put in and solved again, at most
    ``rounds`` times) or for all but a fraction ``1 - probability`` of them (a CVaR chance
    constraint); the end conditions at the nominal values, in the mean or for every sample
    (``terminal``). It starts from the nominal optimum (found first, as without
    ``uncertain``). ``Optimum.robust`` holds the box, the samples, the rounds, the worst case
    found and the ``price``: the robust cost over the nominal one. With every sample
    required, a box holding a parameter set that no control serves is answered
    ``infeasible`` naming the set: at once where a vertex fails a necessary condition, else
    when a worst set found cannot be solved for alone. Check the result on fresh samples with
    :func:`rollax.robot.validate` and :func:`rollax.robot.worst_case`.

    **Continuation** (``continuation=True``): two more starts, the optima of easier problems
    mapped back (:func:`_continued`): the friction envelope widened (``mu`` x
    :data:`CONTINUATION_MU`) and the time lengthened (``T`` x :data:`CONTINUATION_T`, the
    accelerations rescaled by ``(T'/T)^2`` so that the rails swing as far), each solved from
    no motion and the first structured starts.
    """
    return _run(
        manoeuvre,
        free_mu=False,
        cost=cost,
        knots=knots,
        starts=starts,
        seed=seed,
        n_grid=n_grid,
        rtol=rtol,
        tol=tol,
        kkt_tol=kkt_tol,
        max_iter=max_iter,
        progress=progress,
        x0=x0,
        time_limit=time_limit,
        uncertain=uncertain,
        samples=samples,
        probability=probability,
        terminal=terminal,
        rounds=rounds,
        continuation=continuation,
    )


def least_mu(
    manoeuvre: Manoeuvre,
    *,
    knots: int = 16,
    starts: int = 1,
    seed: int = 0,
    n_grid: int = 201,
    rtol: float = 1e-8,
    tol: float = 1e-6,
    kkt_tol: float = 1e-4,
    max_iter: int = 1500,
    progress=True,
    x0=None,
    time_limit: float | None = None,
    uncertain: dict | None = None,
    samples: int = 16,
    rounds: int = 4,
) -> Optimum:
    """The least friction coefficient with which ``manoeuvre`` can be done (its ``mu`` is
    ignored; ``N >= n_min`` and the terminal conditions still hold): ``mu`` becomes a variable
    and ``mu + LEAST_MU_EFFORT * J`` is minimised. ``Optimum.mu`` is the answer and
    ``Optimum.cost`` the effort of the control that reaches it.

    This problem converges slowly, hence the larger default ``max_iter``. At the least mu the
    ratio ``|f_s| / N`` touches ``mu`` at many peaks (a minimax: about 30 on the disk at T =
    12), each between two grid times that are then both active: some 65 nearly dependent
    active constraints for the 65 variables. SLSQP's active set changes as the peaks slide
    between grid times, and after mu has settled to 4-5 digits (a few hundred iterations) the
    rest of the run creeps along it. Measured on the disk of Sect. 5 turned by ``-pi`` (N >=
    0.5, K = 16; experiments/robot_control): T = 7 converged in 358 iterations, T = 8 in 1104,
    T = 10 at the limit of 1500 with a KKT residual of 3e-6; with 300 iterations T = 8, 10
    ended not converged and T = 12 infeasible (violation 1e-2 to 4e-2 in the terminal angle
    along most of the run, the best point met just outside ``tol``). The KKT residual is
    measured with the best-fitting multipliers (:mod:`rollax._drivers._nlp`): SLSQP's own left it at
    ~1e-3 on such points.

    As :func:`optimize`, the necessary conditions that do not involve mu (``n_min <= M g``,
    rail starts) are checked first, and ``time_limit`` stops the SQP early.

    ``uncertain`` (without ``mu``, which is the answer): the least mu for which one control
    keeps the contact for every parameter set of the box (as :func:`optimize`'s robust
    problem: ``samples`` samples, then a worst-case search and at most ``rounds`` more
    solves); the end conditions hold in the mean over the samples."""
    if uncertain is not None and isinstance(uncertain, dict) and "mu" in uncertain:
        raise ValueError(
            "uncertain['mu'] is not allowed in least_mu: the least mu is the answer; give "
            "the other uncertain parameters"
        )
    return _run(
        manoeuvre,
        free_mu=True,
        cost="effort",
        knots=knots,
        starts=starts,
        seed=seed,
        n_grid=n_grid,
        rtol=rtol,
        tol=tol,
        kkt_tol=kkt_tol,
        max_iter=max_iter,
        progress=progress,
        x0=x0,
        time_limit=time_limit,
        uncertain=uncertain,
        samples=samples,
        rounds=rounds,
    )
