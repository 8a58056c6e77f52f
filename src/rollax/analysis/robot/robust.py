"""Controls that hold on a real floor: robust optimisation over uncertain parameters, the
worst parameter set inside their box, and failure rates on fresh samples.

A control computed for one friction coefficient and one set of masses sits on its contact
constraints (that is what makes it optimal) and slips or lifts off at the first deviation.
``rollax.robot.optimize(manoeuvre, uncertain={...})`` instead requires the contact constraints
``N >= N_min``, ``|f_s| <= mu N`` for a set of parameter samples ``p_s`` drawn from the box
of :mod:`rollax.analysis.robot.uncertain` (row 0: the nominal values), evaluated as one
``vmap``-ed batch with exact forward-mode Jacobians:

* **every sample** (``probability=None``, the default): ``g_s(t) <= 0`` for every sample and
  grid time. The samples alone do not cover the box, so the result is checked by a search for
  the worst parameter set (:func:`worst_case`: the constraints' maximum screened on random
  parameter sets, then raised by projected gradient ascent in the box); where that search
  finds a violation, its parameter set replaces the sample with the most slack and the
  problem is solved again from the last control (an outer approximation; at most ``rounds``
  times). The rounds, the worst case found and the cost against the nominal optimum's are in
  ``Optimum.robust``. A box may hold parameter sets that no control serves (a low mu on a
  steep floor): the necessary conditions of :mod:`rollax.analysis.robot.feasibility` are
  checked at the box's vertices before any solve, and each worst set, before it goes in, is
  solved for alone (from the last control and the nominal optimum); where it fails a
  condition or the SQP finds no control for it, the answer is ``infeasible``, naming the set,
  instead of rounds that chase it.
* **a chance constraint** (``probability=p``): with ``G_s`` a smooth maximum of sample s's
  path constraints (log-sum-exp, ``CHANCE_TAU``: above the maximum, so conservative), the
  mean of the ``k = ceil((1 - p) S)`` largest ``G_s`` (the samples' CVaR) is required
  ``<= 0``, so fewer than ``k`` of the ``S`` samples fail: a smooth, conservative
  approximation of ``P(fail) <= 1 - p`` on the samples. No search follows (the worst case is
  reported, not removed).

The end conditions (``terminal``) hold at the nominal values (``"nominal"``), in the mean over
the samples (``"mean"``, the default) or for every sample (``"every"``: only possible where the
uncertain parameters do not change the motion, as for ``mu``).

:func:`validate` runs a control under fresh samples (not the ones optimised over) and gives
its failure rates (slip, normal force below ``N_min``, lift-off ``N <= 0``) with their 95 %
upper bounds and margins.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax._core._validate import check_integer
from rollax.analysis.robot._problem import TIME_RANGE, _NLPProblem, _one
from rollax.analysis.robot.feasibility import necessary_conditions
from rollax.analysis.robot.uncertain import ParameterBox, apply_paths, parameter_box

#: Sharpness of the smooth maximum the worst-case search climbs (per unit weight): its
#: gradient follows the largest constraints; the search keeps the exact maximum it meets.
SEARCH_TAU = 1e-3


@dataclasses.dataclass(frozen=True)
class WorstCase:
    """The worst parameter set :func:`worst_case` found: ``params`` (name -> value), ``p``
    (array), ``violation`` (the largest contact or rail constraint there, per unit weight:
    ``> 0`` violates), ``what`` (``"slip"``, ``"normal force"`` or ``"rail"``), ``t`` (its
    time), ``found`` (``violation > tol``) and ``evaluations`` (simulations run)."""

    params: dict
    p: np.ndarray
    violation: float
    what: str
    t: float
    found: bool
    evaluations: int

    def to_dict(self) -> dict:
        return dict(
            params=self.params,
            violation=self.violation,
            what=self.what,
            t=self.t,
            found=self.found,
            evaluations=self.evaluations,
        )


@dataclasses.dataclass(frozen=True)
class Validation:
    """A control run under ``n`` fresh parameter samples (:func:`validate`). ``failures``:
    counts of ``slip`` (``|f_s| > mu N``), ``normal`` (``N < N_min``), ``lift_off``
    (``N <= 0``), ``rail`` (a rail's end passed) and ``any``; ``rate`` and ``upper`` (the
    95 % Clopper-Pearson upper bound) of ``any``; ``margins``: the least friction margin
    ``min (mu N - |f_s|) / (M g)`` and normal margin ``min (N - N_min) / (M g)`` over all
    samples and times, and their 1 % quantiles over samples; ``terminal``: the largest end
    condition error over the samples."""

    n: int
    failures: dict
    rate: float
    upper: float
    margins: dict
    terminal: float
    tol: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _box(optimum, uncertain) -> ParameterBox:
    if isinstance(uncertain, ParameterBox):
        return uncertain
    if uncertain is None:
        robust = getattr(optimum, "robust", None)
        if robust is None:
            raise ValueError(
                "uncertain = None is not allowed for a nominal optimum: give the uncertain "
                "parameters, e.g. {'mu': (0.15, 0.25), 'masses': 0.02}"
            )
        return robust["box_object"]
    return parameter_box(optimum.manoeuvre, uncertain)


def _problem(optimum, n_grid: int, rtol: float):
    return _NLPProblem(optimum.manoeuvre, optimum.control.K, n_grid, False, float(rtol), 16384)


@eqx.filter_jit
def _rows(prob, control, paths, P):
    """Every sample's ``(h, g)`` on the problem's grid (one compiled, ``vmap``-ed call)."""

    def one(p):
        man = apply_paths(paths, prob.man, p)
        return _one(prob, control, man.mu, man)

    return jax.vmap(one)(P)


@eqx.filter_jit
def _climb(prob, control, paths, lo, hi, U):
    """The smooth maximum's value and gradient in the unit coordinates ``U`` (rows), with
    the exact maximum and its row."""

    def smooth(u):
        man = apply_paths(paths, prob.man, lo + u * (hi - lo))
        _, g = _one(prob, control, man.mu, man)
        return SEARCH_TAU * jax.scipy.special.logsumexp(g / SEARCH_TAU), (jnp.max(g), jnp.argmax(g))

    def one(u):
        grad, aux = jax.jacfwd(smooth, has_aux=True)(u)
        return grad, aux

    return jax.vmap(one)(U)


def _chunks(fn, P, chunk: int):
    """``fn`` on the rows of ``P`` in calls of ``chunk`` rows (the last padded: one compile)."""
    outs = []
    for a in range(0, len(P), chunk):
        part = P[a : a + chunk]
        pad = chunk - len(part)
        full = np.concatenate([part, np.repeat(part[-1:], pad, axis=0)]) if pad else part
        res = fn(jnp.asarray(full))
        outs.append(jax.tree.map(lambda x: np.asarray(x)[: len(part)], res))
    return jax.tree.map(lambda *xs: np.concatenate(xs), *outs)


def _what(row: int, n_grid: int) -> str:
    return "normal force" if row < n_grid else "slip" if row < 2 * n_grid else "rail"


def worst_case(
    optimum,
    uncertain=None,
    *,
    starts: int = 8,
    steps: int = 30,
    screen: int = 128,
    seed: int = 0,
    n_grid: int = 801,
    rtol: float = 1e-8,
    tol: float = 1e-6,
) -> WorstCase:
    """The parameter set inside the box of ``uncertain`` (a dict as for
    :func:`rollax.analysis.robot.uncertain.parameter_box`, a ``ParameterBox``, or ``None``:
    the robust optimum's own box) at which ``optimum``'s control comes closest to breaking a
    contact or rail constraint, or breaks it most: the largest constraint (per unit weight, on
    ``n_grid`` times) is screened on ``screen`` uniform samples, the box's two extreme corners
    and the nominal values, and from the ``starts`` worst of them raised by ``steps`` steps of
    projected gradient ascent (Adam, in the box scaled to the unit cube) on its smooth maximum
    (``SEARCH_TAU``); the largest exact value met is returned. A local search: it finds the
    violations sampling misses near the box's faces and corners, but proves nothing."""
    import optax

    starts = check_integer("starts", starts, 1, 1024)
    steps = check_integer("steps", steps, 0, 10_000)
    screen = check_integer("screen", screen, 0, 1_000_000)
    n_grid = check_integer("n_grid", n_grid, 2)
    box = _box(optimum, uncertain)
    prob = _problem(optimum, n_grid, rtol)
    control = optimum.control
    lo, hi = jnp.asarray(box.lo), jnp.asarray(box.hi)
    width = np.where(box.hi > box.lo, box.hi - box.lo, 1.0)
    rng = np.random.default_rng(seed)
    U = np.concatenate(
        [
            np.zeros((1, box.d)),
            np.ones((1, box.d)),
            ((box.nominal - box.lo) / width)[None],
            rng.uniform(size=(screen, box.d)),
        ]
    )
    _, g = _chunks(lambda P: _rows(prob, control, box.paths, P), box.at(U), 64)
    top = np.nan_to_num(np.max(g, axis=1), nan=np.inf)
    evaluations = len(U)
    best_v, best_u, best_row = (
        float(top.max()),
        U[int(np.argmax(top))],
        int(np.argmax(g[np.argmax(top)])),
    )
    if steps and box.d:
        u = jnp.asarray(U[np.argsort(-top)[:starts]])
        opt = optax.adam(0.05)
        state = opt.init(u)
        for _ in range(steps):
            grad, (vmax, row) = _climb(prob, control, box.paths, lo, hi, u)
            evaluations += len(u)
            vmax = np.nan_to_num(np.asarray(vmax), nan=np.inf)
            i = int(np.argmax(vmax))
            if vmax[i] > best_v:
                best_v, best_u, best_row = float(vmax[i]), np.asarray(u[i]), int(row[i])
            upd, state = opt.update(-jnp.nan_to_num(grad), state)
            u = jnp.clip(cast(jax.Array, optax.apply_updates(u, upd)), 0.0, 1.0)
    p = box.at(best_u)
    t = (
        float(optimum.manoeuvre.T) * (best_row % n_grid) / (n_grid - 1)
        if best_row < 2 * n_grid
        else math.nan
    )
    return WorstCase(
        params=box.to_dict(p),
        p=p,
        violation=best_v,
        what=_what(best_row, n_grid),
        t=t,
        found=bool(best_v > tol),
        evaluations=evaluations,
    )


def _upper(k: int, n: int, level: float = 0.95) -> float:
    """The one-sided Clopper-Pearson upper bound of a rate with ``k`` of ``n``."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(level, k + 1, n - k))


def validate(
    optimum,
    uncertain=None,
    *,
    n: int = 10_000,
    seed: int = 1,
    n_grid: int = 801,
    rtol: float = 1e-8,
    tol: float = 1e-6,
    chunk: int = 256,
) -> Validation:
    """Run ``optimum``'s control under ``n`` fresh parameter samples drawn uniformly from the
    box of ``uncertain`` (as for :func:`worst_case`; ``seed`` different from the one the
    robust optimisation drew its samples with) and count its failures: a contact constraint
    broken by more than ``tol`` (per unit weight) at any of ``n_grid`` times. The samples run
    in ``vmap``-ed calls of ``chunk``."""
    n = check_integer("n", n, 1, 10**8)
    n_grid = check_integer("n_grid", n_grid, 2)
    chunk = check_integer("chunk", chunk, 1, 65536)
    box = _box(optimum, uncertain)
    prob = _problem(optimum, n_grid, rtol)
    P = box.sample(n, seed)
    h, g = _chunks(lambda Q: _rows(prob, optimum.control, box.paths, Q), P, min(chunk, n))
    g_N, g_f, g_r = g[:, :n_grid], g[:, n_grid : 2 * n_grid], g[:, 2 * n_grid :]
    bad = ~np.isfinite(g).all(axis=1)
    slip = (g_f.max(axis=1) > tol) | bad
    normal = (g_N.max(axis=1) > tol) | bad
    rail = (g_r.max(axis=1) > tol) if g_r.shape[1] else np.zeros(n, bool)
    man = optimum.manoeuvre
    n_min = float(man.n_min)
    # N / (M g) at the nominal weight (apply_paths changes the masses per sample: see below)
    if math.isfinite(n_min):
        weight = np.asarray(
            jax.vmap(lambda p: apply_paths(box.paths, man, p).weight)(jnp.asarray(P))
        )
        N_over_W = n_min / weight[:, None] - g_N  # g_N = (N_min - N) / W
        lift = (N_over_W.min(axis=1) <= 0.0) | bad
    else:
        lift = bad
    anyf = slip | normal | rail | lift
    k = int(anyf.sum())
    fmarg = -g_f.max(axis=1)
    nmarg = -g_N.max(axis=1)
    margins = {
        "friction_min": float(np.min(fmarg)) if math.isfinite(float(man.mu)) else math.inf,
        "friction_q01": float(np.quantile(fmarg, 0.01))
        if math.isfinite(float(man.mu))
        else math.inf,
        "normal_min": float(np.min(nmarg)) if math.isfinite(n_min) else math.inf,
        "normal_q01": float(np.quantile(nmarg, 0.01)) if math.isfinite(n_min) else math.inf,
    }
    return Validation(
        n=n,
        failures={
            "slip": int(slip.sum()),
            "normal": int(normal.sum()),
            "lift_off": int(lift.sum()),
            "rail": int(rail.sum()),
            "any": k,
        },
        rate=k / n,
        upper=_upper(k, n),
        margins=margins,
        terminal=float(np.nanmax(np.abs(h))) if h.size else 0.0,
        tol=float(tol),
    )


def _named(params: dict) -> str:
    """``"mu 0.198, slope -0.0373"``: a parameter set (name -> value) in one line."""

    def fmt(v) -> str:
        a = np.asarray(v, float)
        return (
            f"{float(a):.4g}"
            if a.ndim == 0
            else "(" + ", ".join(f"{u:.4g}" for u in a.ravel()) + ")"
        )

    return ", ".join(f"{k} {fmt(v)}" for k, v in params.items())


def _necessary(man, paths, p, *, cost: str, free_mu: bool, tol: float) -> list[str]:
    """The necessary conditions (:mod:`rollax.analysis.robot.feasibility`) that ``man`` with
    the parameter set ``p`` fails: each holds for every control, so one that fails proves
    that no control serves ``p``."""
    return necessary_conditions(
        apply_paths(paths, man, jnp.asarray(p)), cost=cost, free_mu=free_mu, tol=tol,
        time_range=TIME_RANGE,
    )  # fmt: skip


def box_necessary(man, box: ParameterBox, *, cost: str, free_mu: bool, tol: float) -> list[str]:
    """The necessary conditions that fail at a vertex of ``box`` (the first such vertex,
    named; empty: none fails): with every sample required, a robust request that fails one
    cannot be done, and :func:`rollax.robot.optimize` answers it before any solve."""
    for p in _corners(box):
        failed = _necessary(man, box.paths, p, cost=cost, free_mu=free_mu, tol=tol)
        if failed:
            named = _named(box.to_dict(p))
            return [f"at the uncertain box's vertex {named}: {line}" for line in failed]
    return []


def _corners(box: ParameterBox, limit: int = 1024) -> np.ndarray:
    """The box's vertices (none past ``limit``): where a necessary condition's bound moves
    monotonically with each parameter (mu, the slope; the masses nearly so), its worst lies
    at one. (Sets inside the box are checked too, as the rounds' worst cases.)"""
    d = len(box.lo)
    if 2**d > limit:
        return np.zeros((0, d))
    bits = (np.arange(2**d)[:, None] >> np.arange(d)[None]) & 1
    return np.where(bits == 1, box.hi, box.lo)


def _alone_fails(rp, p, X, solve, phase, tol, grid) -> str | None:
    """Why no control serves the parameter set ``p`` alone: a necessary condition it fails,
    or the SQP, from the rows of ``X`` (the last robust control and the nominal optimum),
    finding none (a time limit that stops it is not a failure: nothing is known). ``None``:
    a control was found."""
    failed = _necessary(rp.man, rp.paths, p, cost=rp.cost, free_mu=rp.free_mu, tol=tol)
    if failed:
        return "; ".join(failed)
    alone = dataclasses.replace(rp, P=jnp.asarray(np.asarray(p)[None]), probability=None)
    res, stopped = solve(alone, X, phase, tol, grid)
    if stopped or any(r.feasible for r in res):
        return None
    best = min(res, key=lambda r: r.violation)
    return f"the SQP found none from {len(X)} starts (least violation {best.violation:.2e})"


def _robust_rounds(
    prob, nominal, results, box: ParameterBox, phase, solve, optimum_of, *, samples, seed,
    probability, terminal, rounds, tol, n_grid, t_start, progress,
):  # fmt: skip
    """The robust optimisation of :func:`rollax.robot.optimize` (module docstring): from the
    nominal optimum, solve over the samples; with every sample required, search for the worst
    parameter set and, where it violates, put it in for the sample with the most slack and
    solve again (at most ``rounds`` times)."""
    import time

    P = np.concatenate([box.nominal[None], box.sample(samples - 1, seed)])
    feasible = [i for i, r in enumerate(results) if r.feasible]
    start = min(feasible, key=lambda i: results[i].f)
    x = np.asarray(results[start].x)
    x_nominal = x
    refused = None
    log: list[dict[str, Any]] = []
    opt = nominal
    worst = None
    grid = n_grid
    fine = 8 * (n_grid - 1) + 1  # the worst-case search's grid
    for rnd in range(rounds + 1):
        rp = dataclasses.replace(
            prob,
            n_grid=grid,
            paths=box.paths,
            P=jnp.asarray(P),
            probability=probability,
            terminal=terminal,
        )
        X = x[None]
        if rnd == 0:  # the nominal optimum, and no motion: the robust optimum may lie far off
            zero = np.zeros_like(x)
            if prob.free_mu:
                zero[-1] = 1.0  # mu = 1, a generous envelope (as the nominal starts)
            X = np.stack([x, zero])
        res, stopped = solve(rp, X, phase, tol, grid)
        ok = [i for i, r in enumerate(res) if r.feasible]
        pick = (
            min(ok, key=lambda i: res[i].f)
            if ok
            else min(range(len(res)), key=lambda i: res[i].violation)
        )
        x = np.asarray(res[pick].x)
        opt = optimum_of(rp, res, prob.cost, time.perf_counter() - t_start, 1, robust={})
        worst = worst_case(opt, box, seed=seed + 1000 + rnd, n_grid=fine, tol=tol)
        log.append(
            dict(
                round=rnd,
                status=opt.status,
                cost=opt.cost,
                samples=len(P),
                grid=grid,
                worst_violation=worst.violation,
                worst=worst.params,
            )
        )
        if progress:
            from rollax._core._announce import LOG

            LOG.info(
                f"robust round {rnd}: {opt.status}, cost {opt.cost:.6g}; the worst case found "
                f"breaks a constraint by {worst.violation:.2e} ({worst.what})"
            )
        if stopped or probability is not None or not opt.feasible or not worst.found:
            break
        if rnd == rounds:
            break
        scale = np.where(box.hi > box.lo, box.hi - box.lo, 1.0)
        if np.min(np.max(np.abs(P - worst.p) / scale, axis=1)) < 1e-6:
            # the worst set is a sample already: the constraint dips between the grid's
            # times, so the grid is refined (up to the search's) instead
            if grid >= fine:
                break
            grid = min(fine, 2 * (grid - 1) + 1)
            continue
        if not prob.free_mu:
            why = _alone_fails(rp, worst.p, np.stack([x, x_nominal]), solve, phase, tol, grid)
            log[-1]["alone"] = "served" if why is None else why
            if why is not None:  # no control serves the worst set alone, so none the box
                refused = (worst.params, why)
                break
        # the sample with the most slack (never the nominal, row 0) makes way for the worst
        _, g = _rows(dataclasses.replace(prob, n_grid=grid), opt.control, box.paths, jnp.asarray(P))
        slack = np.nan_to_num(np.max(np.asarray(g), axis=1), nan=np.inf)
        if len(P) > 1:
            P[1 + int(np.argmin(slack[1:]))] = worst.p
        else:
            P = np.concatenate([P, worst.p[None]])
    assert worst is not None
    held = probability is not None or not worst.found
    robust = dict(
        box=box.describe(),
        box_object=box,
        nominal=nominal,
        samples=P,
        probability=probability,
        terminal=terminal,
        rounds=log,
        worst=worst.to_dict(),
        nominal_cost=nominal.cost,
        # the robust optimum's cost over the nominal one (least mu: its mu over the nominal)
        price=(opt.mu / nominal.mu if prob.free_mu else opt.cost / nominal.cost)
        if (nominal.mu if prob.free_mu else nominal.cost)
        else math.nan,
        held=held,
    )
    note = (
        f"robust over {len(P)} samples; the worst case found breaks a constraint by "
        f"{worst.violation:.2e} ({worst.what})"
    )
    status = opt.status
    if refused is not None:
        status = "infeasible"
        note += (
            f"; no control serves the parameter set {_named(refused[0])} alone ({refused[1]}), so none "
            "holds over the whole box: narrow the uncertainty, or ask for a probability"
        )
    elif status == "converged" and not held:
        status = "not converged"  # the samples did not cover the box in the rounds given
        note += f": not robust after {rounds} rounds (rounds > {rounds} may remove it)"
    return dataclasses.replace(
        opt,
        robust=robust,
        status=status,
        converged=status == "converged",
        message=f"{opt.message}; {note}",
    )
