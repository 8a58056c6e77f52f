"""``rollax.design``: which experiment to run next, ranked by the information it is expected to give.

A candidate experiment is an initial state ``y0`` of a system observed at the times ``t`` with
the noise levels ``sigma`` (a record length and a frame rate; a shorter record per candidate
with ``duration``). Its **Fisher information** about the fitted quantities ``x = (theta, y0_f)``
(the named parameters, and the initial-state components the fit must also find: nuisance
quantities of that record) is ``F = J^T J``, ``J`` the Jacobian of the weighted residuals
``(h(y(t_i; theta, y0)) - d_i) / sigma`` of :func:`rollax.identify`, computed exactly in
forward mode through :func:`rollax.solve` (``diffrax.ForwardMode``), for many candidates in
one vmapped batch. With the current knowledge as a Gaussian prior on ``theta`` (precision
``P``: a previous :class:`rollax.Fit`'s covariance, stated standard deviations, or none), the
posterior precision is ``Lambda = F + diag(P, 0)``, and the parameters' own posterior
covariance is the inverse of its Schur complement ``S = Lambda_tt - Lambda_tn Lambda_nn^-1
Lambda_nt`` (the nuisance components integrated out). The candidates are ranked by a loss:

* ``"D"`` (D-optimal): ``log det S^-1``, the log volume of the error ellipsoid;
* ``"A"`` (A-optimal): ``trace S^-1``, the sum of the variances (in the parameters' units);
* a parameter's name: its variance alone.

**The guarantee is local.** ``F`` is evaluated at the current estimate: it is the expected
information when the truth is near it (the Cramer-Rao bound of a fit of that record). Where the
outcome switches (the system's event, e.g. the ball leaving the rim, ends the record before
``t[-1]``), the information jumps with the start and the estimate: such a candidate is marked
``ends_early`` (and ranked last with ``require_full``, the default: a feasible record is as
long as asked). With ``samples=k`` and a prior, every candidate is also evaluated at ``k``
parameter sets drawn from the prior; a candidate whose record length changes across them is
marked ``switches`` and ranked by its loss averaged over the draws (the sampling fallback),
the others by the local loss.

:func:`refine_design` improves a candidate by projected gradient descent on the loss over
chosen initial-state components in a box (the gradient exact: forward mode over the
forward-mode Jacobian; each line search one batch of step sizes), keeping the record full.
:func:`sequential_design` runs the loop: design, "run" the experiment (simulated with a hidden
truth and noise), fit, update the knowledge, and records how the error bars shrink.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import warnings
from typing import Any, Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax._core._solution import Status
from rollax._core._system import AbstractSystem
from rollax._drivers._identify import (
    Fit,
    Observations,
    _bounds_of,
    _check_observe,
    _get,
    _problem,
    identify,
    number_pair,
    parameter_path,
    y0_indices,
)
from rollax._integrate._solve import solve

#: the losses :func:`design` ranks by (or a parameter's name: its variance)
CRITERIA = ("D", "A")
#: candidates per compiled batch (a new batch width compiles again)
CHUNK = 32
#: the ridge added to the nuisance block before it is inverted, relative to its diagonal: a
#: nuisance component the record cannot see (zero information) drops out instead of failing
_RIDGE = 1e-12


# ---------------------------------------------------------------------- the result
@dataclasses.dataclass
class Design:
    """Result of :func:`design`: the candidates ranked by expected information.

    ``params``: the parameters to learn; ``criterion``; ``candidates`` ``(m, n)`` the initial
    states; ``loss`` ``(m,)`` (smaller is better; ``inf`` for an infeasible candidate);
    ``order``: the candidates best first; ``best``: the index of the best. Per candidate:
    ``covariance`` ``(m, p, p)``, ``std_errors`` ``(m, p)`` and ``correlation`` of the
    parameters after that record with the prior; ``std_errors_record``: from that record
    alone (what its fit's Gauss-Newton errors will be, near the estimate); ``rows``: the
    observation times the record has before the system's event (``n_times`` asked), with
    finite values; ``bad_rows``: those with a non-finite prediction or derivative (left out,
    and said in ``notes``); ``failed``: the solve failed (non-finite state, the step limit):
    infeasible; ``ends_early``: the event ends the record before ``t[-1]`` (or its
    ``duration``) at the estimate; ``switches``: the record's length changes across the prior draws (ranked by
    the loss averaged over them: ``loss_sampled``). ``estimate`` and ``prior_std`` (the
    prior's marginal standard deviations; ``inf``: nothing known): the knowledge the design
    was made at; ``units``: the parameters' declared units; ``settings``: the per-candidate
    experiment settings (:func:`design`'s ``settings``). ``notes``: what the ranking rests
    on; ``rate``: candidates evaluated per second (a first call's compile included).
    """

    params: tuple[str, ...]
    criterion: str
    candidates: np.ndarray
    loss: np.ndarray
    order: np.ndarray
    covariance: np.ndarray
    std_errors: np.ndarray
    correlation: np.ndarray
    std_errors_record: np.ndarray
    rows: np.ndarray
    bad_rows: np.ndarray
    n_times: int
    failed: np.ndarray
    ends_early: np.ndarray
    switches: np.ndarray
    loss_sampled: np.ndarray
    estimate: np.ndarray
    prior_std: np.ndarray
    notes: list[str]
    wall_time: float
    rate: float
    units: tuple[str, ...] = ()
    settings: dict = dataclasses.field(default_factory=dict)  # {name: values (m,)}

    @property
    def best(self) -> int:
        return int(self.order[0])

    @property
    def feasible(self) -> np.ndarray:
        """Candidates with a finite loss (a full record, where ``require_full``)."""
        return np.isfinite(self.loss)

    def summary(self, k: int = 5) -> str:
        """The best ``k`` candidates, one line each (index, initial state, loss, the standard
        errors from that record alone and with the prior), and the notes."""
        what = {"D": "log det of the parameters' covariance", "A": "the sum of their variances"}
        u = self.units or ("",) * len(self.params)
        lines = [
            f"design ({self.criterion}-optimal for {', '.join(self.params)}; loss: "
            f"{what.get(self.criterion, f'the variance of {self.criterion}')}, smaller is "
            f"better): {int(self.feasible.sum())} of {self.loss.shape[0]} candidates feasible, "
            f"records of {self.n_times} times"
        ]
        for i in self.order[:k]:
            if not np.isfinite(self.loss[i]):
                break
            se = ", ".join(
                f"{n} +- {a:.3g} (with the prior {b:.3g}){' ' + un if un else ''}"
                for n, a, b, un in zip(
                    self.params, self.std_errors_record[i], self.std_errors[i], u
                )
            )
            y0 = np.array2string(
                self.candidates[i], precision=4, separator=", ", max_line_width=10**6
            )
            lines.append(f"  #{int(i)} y0 = {y0}: loss {self.loss[i]:.6g}; {se}")
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])

    def to_dict(self) -> dict:
        """A JSON-ready summary (non-finite numbers become ``None``)."""
        f = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        return {
            "params": list(self.params),
            "criterion": self.criterion,
            "best": self.best,
            "order": [int(i) for i in self.order],
            "loss": [f(v) for v in self.loss],
            "std_errors": [[f(v) for v in row] for row in self.std_errors],
            "std_errors_record": [[f(v) for v in row] for row in self.std_errors_record],
            "candidates": [[f(v) for v in row] for row in self.candidates],
            "units": list(self.units),
            "correlation": [[[f(v) for v in r] for r in c] for c in self.correlation],
            "rows": [int(v) for v in self.rows],
            "bad_rows": [int(v) for v in self.bad_rows],
            "n_times": self.n_times,
            "failed": [bool(b) for b in self.failed],
            "ends_early": [bool(b) for b in self.ends_early],
            "switches": [bool(b) for b in self.switches],
            "loss_sampled": [f(v) for v in self.loss_sampled],
            "estimate": [f(v) for v in self.estimate],
            # (None: nothing known of that parameter before this record)
            "prior_std": [f(v) for v in self.prior_std],
            "notes": list(self.notes),
            "wall_time_s": f(self.wall_time),
            "candidates_per_s": f(self.rate),
        }


# ---------------------------------------------------------------------- the knowledge
@dataclasses.dataclass(frozen=True)
class Knowledge:
    """What is known of the parameters: the estimate ``theta`` (p,) and the precision ``P``
    (p, p; zero rows: nothing known), the Gaussian approximation :func:`combine` updates."""

    theta: np.ndarray
    P: np.ndarray


def _knowledge(system, params, paths, prior) -> tuple[np.ndarray, np.ndarray]:
    """The estimate ``theta`` and the prior precision ``P`` (p x p) of the parameters."""
    p = len(params)
    theta = np.array([float(_get(system, path)) for path in paths])
    if prior is None:
        return theta, np.zeros((p, p))
    if isinstance(prior, Knowledge):
        th, P = np.asarray(prior.theta, float), np.asarray(prior.P, float)
        if th.shape != (p,) or P.shape != (p, p):
            raise ValueError(f"prior: a Knowledge of shapes {th.shape}, {P.shape} for {p} params")
        return th.copy(), P.copy()
    if isinstance(prior, Fit):
        missing = [n for n in params if n not in prior.names]
        if missing:
            raise ValueError(
                f"prior: the Fit has no {missing[0]!r}; it fitted {', '.join(prior.names)}"
            )
        idx = [prior.names.index(n) for n in params]
        theta = np.asarray(prior.values, float)[idx]
        C = np.asarray(prior.covariance, float)[np.ix_(idx, idx)]
        known = np.all(np.isfinite(C), axis=1) & np.isfinite(np.diag(C))
        P = np.zeros((p, p))
        if known.any():
            P[np.ix_(known, known)] = np.linalg.pinv(C[np.ix_(known, known)])
        return theta, P
    if isinstance(prior, dict):
        unknown = [k for k in prior if k not in params]
        if unknown:
            raise ValueError(f"prior: {unknown[0]!r} is not among params {list(params)!r}")
        P = np.zeros((p, p))
        for k, v in prior.items():
            m, s = number_pair(f"prior[{k!r}]", v, "(mean, standard deviation)")
            if not math.isfinite(m) or not (s > 0):
                raise ValueError(
                    f"prior[{k!r}] = {v!r}: the mean must be finite and the standard "
                    f"deviation > 0 (inf: nothing known)"
                )
            i = params.index(k)
            theta[i] = m
            P[i, i] = 0.0 if math.isinf(s) else 1.0 / s**2
        return theta, P
    raise ValueError(
        f"prior = {type(prior).__name__} must be None, a rollax.Fit or a dict "
        f"{{name: (mean, standard deviation)}}"
    )


def _marginal(F, P, p):
    """The parameters' posterior covariance from the information ``F`` (..., q, q) of
    ``(theta, nuisance)`` and the prior precision ``P`` (p, p) of theta: the inverse of the
    Schur complement of the nuisance block of ``F + diag(P, 0)``. ``nan`` where singular."""
    L = np.array(F, float, copy=True)
    L[..., :p, :p] += P
    A, B, D = L[..., :p, :p], L[..., :p, p:], L[..., p:, p:]
    if D.shape[-1]:
        d = np.diagonal(D, axis1=-2, axis2=-1)
        ridge = _RIDGE * np.maximum(d, 1e-300)
        D = D + np.eye(D.shape[-1]) * ridge[..., None, :]
        S = A - B @ np.linalg.solve(D, np.swapaxes(B, -1, -2))
    else:
        S = A
    S = 0.5 * (S + np.swapaxes(S, -1, -2))
    out = np.full(S.shape, np.nan)
    # a positive definite S only (an unidentifiable parameter gives a singular one)
    w = np.linalg.eigvalsh(S)
    scale = np.maximum(np.abs(w).max(axis=-1), 1e-300)
    ok = np.all(w > 1e-12 * scale[..., None], axis=-1)
    if ok.any():
        out[ok] = np.linalg.inv(S[ok])
    return out


def _loss(cov, criterion, params):
    """The loss of each covariance (..., p, p): smaller is better; ``inf`` where singular."""
    bad = ~np.all(np.isfinite(cov), axis=(-1, -2))
    c = np.where(bad[..., None, None], np.eye(cov.shape[-1]), cov)
    if criterion == "D":
        sign, ld = np.linalg.slogdet(c)
        out = np.where(sign > 0, ld, np.inf)
    elif criterion == "A":
        out = np.trace(c, axis1=-2, axis2=-1)
    else:
        i = params.index(criterion)
        out = c[..., i, i]
    return np.where(bad, np.inf, out)


def _std_corr(cov):
    se = np.sqrt(np.abs(np.diagonal(cov, axis1=-2, axis2=-1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / (se[..., :, None] * se[..., None, :])
    return se, corr


# ---------------------------------------------------------------------- the batched information
def _record_end(problem, x, with_status=False):
    """When the system's first event ends the record (``inf``: it runs to ``t[-1]``), and with
    ``with_status`` the run's :class:`rollax.Status` code; primal."""
    system, y0 = problem.build(jax.lax.stop_gradient(x))
    sol = solve(
        system,
        y0,
        problem.t[0],
        problem.t[-1],
        rtol=problem.rtol,
        atol=problem.atol,
        max_steps=problem.max_steps,
    )
    end = jnp.where(sol.status == Status.EVENT, sol.t, jnp.inf)
    return (end, sol.status) if with_status else end


def _information_one(x, end, problem, cols):
    """``(F, rows, bad, status)``: the information ``J^T J`` of the columns ``cols`` of ``x``
    from the observations up to ``end`` and the record's own end; how many observation times
    that leaves with finite values (``rows``) and with a non-finite prediction or derivative
    (``bad``: dropped, and said); the run's :class:`rollax.Status` code."""
    r_fn = lambda z: (problem.residuals(z),) * 2  # noqa: E731
    J, r = jax.jacfwd(r_fn, has_aux=True)(x)
    k = problem.inv_sigma.shape[0]
    t_rows = jnp.repeat(problem.t, k)
    w_rows = jnp.repeat(problem.weight, k)
    t_end, status = _record_end(problem, x, with_status=True)
    stop = jnp.minimum(end, t_end)
    live = (w_rows > 0) & (t_rows <= stop)
    finite = jnp.isfinite(r) & jnp.all(jnp.isfinite(J), axis=1)
    ok = live & finite
    Jc = jnp.where(ok[:, None], J[:, jnp.asarray(cols)], 0.0)
    per_time = jnp.all(finite.reshape(-1, k), axis=1)
    live_t = (problem.weight > 0) & (problem.t <= stop)
    return Jc.T @ Jc, jnp.sum(live_t & per_time), jnp.sum(live_t & ~per_time), status


@eqx.filter_jit
def _batch_information(xs, ends, problem, cols):
    return jax.vmap(lambda x, e: _information_one(x, e, problem, cols))(xs, ends)


def _evaluate(problem, xs, ends, cols, chunk, report=None):
    """``_batch_information`` on the rows of ``xs`` in batches of ``chunk`` (padded)."""
    Fs, rows, bad, status = [], [], [], []
    m = xs.shape[0]
    for a in range(0, m, chunk):
        xb, eb = xs[a : a + chunk], ends[a : a + chunk]
        n = xb.shape[0]
        if n < chunk:
            xb = np.concatenate([xb, np.repeat(xb[:1], chunk - n, axis=0)])
            eb = np.concatenate([eb, np.repeat(eb[:1], chunk - n)])
        F, r, b, st = _batch_information(jnp.asarray(xb), jnp.asarray(eb), problem, cols)
        Fs.append(np.asarray(F)[:n])
        rows.append(np.asarray(r)[:n])
        bad.append(np.asarray(b)[:n])
        status.append(np.asarray(st)[:n])
        if report is not None:
            report(min(a + chunk, m), m)
    return np.concatenate(Fs), np.concatenate(rows), np.concatenate(bad), np.concatenate(status)


#: run statuses that mean the solve failed (the record is not the model's)
_FAILED = (int(Status.NONFINITE), int(Status.MAX_STEPS), int(Status.REPEATED))


# ---------------------------------------------------------------------- checks
def _check_int(name, v, lo):
    if not (isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= lo):
        raise ValueError(f"{name} = {v!r} must be an integer >= {lo}")
    return int(v)


def _setup(system, params, t, observe, sigma, fit_y0, criterion, rtol, atol, max_steps,
           need_params=True):  # fmt: skip
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a rollax.AbstractSystem, got {type(system).__name__}")
    params = (params,) if isinstance(params, str) else tuple(params)
    if need_params and not params:
        raise ValueError("params is empty: name the parameters to learn")
    if len(set(params)) != len(params):
        raise ValueError(f"params = {list(params)!r} names a parameter twice")
    paths = tuple(parameter_path(system, p) for p in params)
    _check_observe(system, observe)
    if need_params and not (criterion in CRITERIA or criterion in params):
        raise ValueError(
            f"criterion = {criterion!r} is not allowed: 'D', 'A' or one of params "
            f"({', '.join(params)})"
        )
    names_state = tuple(system.state_names)
    y0_index = y0_indices(system, fit_y0)
    t = np.asarray(t, float)
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(f"t has shape {t.shape}; the record's times must be a 1-d array of >= 2")
    y_probe = np.zeros(len(names_state))
    h = (lambda tt, y: observe(system, tt, y)) if callable(observe) else getattr(system, observe)
    k = int(np.prod(jax.eval_shape(h, jnp.asarray(t[0]), jnp.asarray(y_probe)).shape))
    names = tuple(getattr(system, "observables", None) or (f"h{i}" for i in range(k)))
    if len(names) != k:
        names = tuple(f"h{i}" for i in range(k))
    try:
        s = np.broadcast_to(np.asarray(sigma, dtype=float), (k,)).copy()
    except (TypeError, ValueError):
        raise ValueError(
            f"sigma = {sigma!r} must be one noise level or one per observable ({k})"
        ) from None
    if not np.all(np.isfinite(s) & (s > 0)):
        raise ValueError(f"sigma = {s.tolist()!r}; noise levels must be finite and > 0")
    # (Observations checks the times: finite, strictly increasing, not too many)
    obs = Observations(t, np.zeros((t.shape[0], k)), observe, names, sigma=s)
    for name, v in (("rtol", rtol), ("atol", atol)):
        if not (isinstance(v, (int, float)) and 0 < v < 1):
            raise ValueError(f"{name} = {v!r} is outside the allowed range (0, 1)")
    _check_int("max_steps", max_steps, 1)
    return params, paths, y0_index, obs, s


def _check_candidates(system, candidates, name="candidates"):
    try:
        C = np.asarray(candidates, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} = {candidates!r:.60} must be initial states: numbers of shape (m, "
            f"{len(system.state_names)})"
        ) from None
    n = len(system.state_names)
    if C.ndim == 1:
        C = C[None]
    if C.ndim != 2 or C.shape[1] != n:
        raise ValueError(
            f"{name} has shape {np.shape(candidates)}; it must be (m, {n}): initial "
            f"states ({', '.join(system.state_names)})"
        )
    if C.shape[0] == 0:
        raise ValueError(f"{name} is empty: give at least one initial state")
    if not np.all(np.isfinite(C)):
        i = int(np.argwhere(~np.isfinite(C))[0][0])
        raise ValueError(f"{name}[{i}] = {C[i].tolist()!r} is not finite")
    return C


def _per_candidate(name, v, m, what):
    """``v`` broadcast to one float per candidate ``(m,)``, or a one-line error."""
    try:
        return np.broadcast_to(np.asarray(v, float), (m,)).copy()
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} = {v!r:.60} must be one {what} or one per candidate ({m})"
        ) from None


def _ends(duration, t, m):
    if duration is None:
        return np.full(m, np.inf)
    d = _per_candidate("duration", duration, m, "record length [s]")
    if not np.all(np.isfinite(d) & (d > 0)):
        i = int(np.argmax(~(np.isfinite(d) & (d > 0))))
        raise ValueError(f"duration[{i}] = {float(d[i])!r} must be finite and > 0 [s]")
    return t[0] + d * (1 + 1e-12)


def _with(system, paths, theta):
    for path, v in zip(paths, theta):
        system = eqx.tree_at(lambda s, path=path: _get(s, path), system, jnp.asarray(float(v)))
    return system


def _progress(progress, what):
    if not progress:
        return None
    t0 = time.perf_counter()
    print(f"design: {what}: compiling the batched information (the first batch waits for it)",
          file=sys.stderr, flush=True)  # fmt: skip
    state = {"last": -1.0}

    def show(done, total):
        el = time.perf_counter() - t0
        if done == total or el - state["last"] >= 5.0:
            state["last"] = el
            print(f"design: {what}: {done}/{total} ({el:.0f} s)", file=sys.stderr, flush=True)

    return show


# ---------------------------------------------------------------------- design
def design(
    system: AbstractSystem,
    params: Sequence[str] | str,
    candidates,
    t,
    *,
    observe: Callable | str,
    sigma,
    prior: Fit | dict | Knowledge | None = None,
    fit_y0: bool | Sequence[str] = True,
    criterion: str = "D",
    duration=None,
    samples: int = 0,
    require_full: bool = True,
    settings: dict | None = None,
    seed: int = 0,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 16_384,
    chunk: int = CHUNK,
    progress: bool = True,
) -> Design:
    """Rank the initial states ``candidates`` ``(m, n)`` of ``system`` by the information a
    record of them gives about ``params`` (see the module's text for the mathematics).

    The record: the observables ``observe`` (a method name or ``observe(system, t, y)``) at the
    times ``t`` with the noise levels ``sigma`` (one, or one per observable), cut per candidate
    to ``duration`` [s] where given. The fit of such a record finds ``params`` and the
    initial-state components ``fit_y0`` (all by default). ``prior``: what is known already (a
    :class:`rollax.Fit` of an earlier record, ``{name: (mean, sd)}``, or ``None``: nothing);
    the design is made at its estimate (``system``'s values where none). ``criterion``:
    ``"D"``, ``"A"`` or a parameter's name. ``samples``: prior draws at which each candidate is
    also evaluated, to find the candidates whose outcome switches (needs a prior).
    ``require_full``: a record the system's event ends early is infeasible (ranked last).
    ``settings``: ``{name: values (m,)}``, per candidate the values of system parameters that
    are part of the experiment, not learned (a control's amplitude, a release condition held
    in a parameter field): each candidate runs with its own. Returns a :class:`Design`.
    """
    t_start = time.perf_counter()
    params, paths, y0_index, obs, s = _setup(
        system, params, t, observe, sigma, fit_y0, criterion, rtol, atol, max_steps
    )
    C = _check_candidates(system, candidates)
    m = C.shape[0]
    samples = _check_int("samples", samples, 0)
    chunk = _check_int("chunk", chunk, 1)
    if not isinstance(require_full, bool):
        raise ValueError(f"require_full = {require_full!r} must be True or False")
    theta, P = _knowledge(system, params, paths, prior)
    if samples and not np.any(np.diag(P) > 0):
        raise ValueError(
            f"samples = {samples} needs a prior to draw from (prior is {prior!r}); give a "
            f"Fit or {{name: (mean, sd)}}, or samples = 0"
        )
    ends = _ends(duration, obs.t, m)
    p = len(params)
    n_state = C.shape[1]
    s_names, s_paths, U = _settings(system, settings, params, m)
    q = len(s_paths)
    # x = (theta, the settings, the whole y0): the Jacobian's columns are theta and the
    # fitted components (the settings are written in by the problem's paths, not fitted)
    all_idx = tuple(range(n_state))
    cols = tuple(range(p)) + tuple(p + q + i for i in y0_index)
    base = _with(system, paths, theta)
    problem = dataclasses.replace(
        _problem(base, C[0], obs, s, rtol, atol, paths + s_paths, all_idx, max_steps),
        with_event=False,
    )
    report = _progress(progress, f"{m} candidates")
    xs = np.concatenate([np.repeat(theta[None], m, axis=0), U, C], axis=1)
    t_eval = time.perf_counter()
    F, rows, bad, status = _evaluate(problem, xs, ends, cols, chunk, report)
    t_eval = time.perf_counter() - t_eval
    asked = np.array([int(np.sum(obs.t <= e)) for e in ends])
    failed = np.isin(status, _FAILED)
    ends_early = (rows + bad < asked) & ~failed
    cov = _marginal(F, P, p)
    cov_rec = _marginal(F, np.zeros((p, p)), p)
    loss = _loss(cov, criterion, params)
    se, corr = _std_corr(cov)
    se_rec, _ = _std_corr(cov_rec)
    notes = [
        "local: the information is the Cramer-Rao bound at the estimate "
        + ", ".join(f"{n} = {v:.6g}" for n, v in zip(params, theta))
        + "; it holds for a truth near it"
    ]
    switches = np.zeros(m, bool)
    loss_sampled = np.full(m, np.nan)
    if samples:
        rng = np.random.default_rng(seed)
        draws = _draws(rng, theta, P, samples, system, paths)
        losses, rows_s = [], []
        for th in draws:
            xs_s = np.concatenate([np.repeat(th[None], m, axis=0), U, C], axis=1)
            prob_s = dataclasses.replace(problem, system=_with(system, paths, th))
            F_s, r_s, _, _ = _evaluate(prob_s, xs_s, ends, cols, chunk)
            losses.append(_loss(_marginal(F_s, P, p), criterion, params))
            rows_s.append(r_s)
        rows_s = np.array(rows_s)
        switches = np.any(rows_s != rows[None], axis=0)
        with np.errstate(invalid="ignore"):
            loss_sampled = np.mean(np.concatenate([loss[None], np.array(losses)]), axis=0)
        loss = np.where(switches, loss_sampled, loss)
        if switches.any():
            notes.append(
                f"{int(switches.sum())} of {m} candidates switch outcome across {samples} "
                f"prior draws (the record's length changes): they are ranked by the loss "
                f"averaged over the draws, not the local one"
            )
    if ends_early.any():
        notes.append(
            f"{int(ends_early.sum())} of {m} candidates end early (the system's event "
            f"'{system.events[0].name}' before the record's end at the estimate)"
            + ("; they are infeasible (require_full)" if require_full else "")
        )
        if require_full:
            loss = np.where(ends_early, np.inf, loss)
    if failed.any():
        from rollax._core._solution import code_names

        i = int(np.argmax(failed))
        notes.append(
            f"{int(failed.sum())} of {m} candidates could not be run (the solve ended with "
            f"{code_names(int(status[i]), Status)}, e.g. candidate {i}): infeasible; see "
            f"max_steps, rtol and the starts"
        )
        loss = np.where(failed, np.inf, loss)
    if (bad > 0).any():
        i = int(np.argmax(bad > 0))
        notes.append(
            f"{int((bad > 0).sum())} of {m} candidates have observation times with a "
            f"non-finite prediction or derivative (candidate {i}: {int(bad[i])} of "
            f"{int(asked[i])}); those times are left out of their information (bad_rows)"
        )
    singular = ~np.all(np.isfinite(cov), axis=(1, 2)) & ~failed & ~(ends_early & require_full)
    if singular.any():
        notes.append(
            f"{int(singular.sum())} of {m} candidates cannot determine every parameter (a "
            f"singular information matrix): infinite loss"
        )
    loss = np.where(np.isnan(loss), np.inf, loss)
    order = np.argsort(loss, kind="stable")
    if not np.isfinite(loss).any():
        notes.append("no candidate is feasible and informative: every loss is infinite")
        warnings.warn(f"design: {notes[-1]}", stacklevel=2)
    wall = time.perf_counter() - t_start
    return Design(
        params=params,
        criterion=criterion,
        candidates=C,
        loss=loss,
        order=order,
        covariance=cov,
        std_errors=se,
        correlation=corr,
        std_errors_record=se_rec,
        rows=rows,
        bad_rows=bad,
        n_times=int(obs.t.shape[0]),
        failed=failed,
        ends_early=ends_early,
        switches=switches,
        loss_sampled=loss_sampled,
        estimate=theta,
        prior_std=_prior_std(P),
        units=_units(system, paths),
        settings={k: U[:, i].copy() for i, k in enumerate(s_names)},
        notes=notes,
        wall_time=wall,
        rate=m / max(t_eval, 1e-9),
    )


def _settings(system, settings, params, m):
    """``(names, paths, values (m, q))`` of the per-candidate experiment settings."""
    if settings is None:
        return (), (), np.zeros((m, 0))
    if not isinstance(settings, dict):
        raise ValueError(f"settings = {settings!r:.60} must be a dict {{name: values (m,)}}")
    names, paths, cols = [], [], []
    for k, v in settings.items():
        if k in params:
            raise ValueError(f"settings: {k!r} is among params: a setting is not learned")
        path = parameter_path(system, k)
        a = _per_candidate(f"settings[{k!r}]", v, m, "value")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"settings[{k!r}] has a non-finite value; they must be finite")
        names.append(k)
        paths.append(path)
        cols.append(a)
    return tuple(names), tuple(paths), np.stack(cols, 1)


def _prior_std(P):
    """The prior's marginal standard deviations (``inf``: nothing known of that parameter)."""
    known = np.diag(P) > 0
    out = np.full(P.shape[0], np.inf)
    if known.any():
        out[known] = np.sqrt(np.abs(np.diag(np.linalg.pinv(P[np.ix_(known, known)]))))
    return out


def _units(system, paths) -> tuple[str, ...]:
    """Each parameter's declared units (``rollax.parameter(..., units=...)``; ``""``: none)."""
    out = []
    for path in paths:
        owner = _get(system, path[:-1])
        f = {f.name: f for f in dataclasses.fields(owner)}.get(path[-1])
        out.append(str(f.metadata.get("units", "")) if f is not None else "")
    return tuple(out)


def _draws(rng, theta, P, k, system, paths):
    """``k`` parameter sets from the Gaussian prior (mean ``theta``, precision ``P``; the
    parameters it does not know stay at theta), clipped into the models' bounds."""
    known = np.diag(P) > 0
    out = np.repeat(theta[None], k, axis=0)
    Ck = np.linalg.pinv(P[np.ix_(known, known)])
    Lc = np.linalg.cholesky(0.5 * (Ck + Ck.T) + 1e-300 * np.eye(Ck.shape[0]))
    out[:, known] = theta[known] + rng.standard_normal((k, int(known.sum()))) @ Lc.T
    for i, path in enumerate(paths):
        lo, hi = _bounds_of(system, path)
        out[:, i] = np.clip(out[:, i], lo, hi)
    return out


# ---------------------------------------------------------------------- refine by gradient
@dataclasses.dataclass
class Refined:
    """Result of :func:`refine_design`: the initial state ``y0`` found, its ``loss`` against the
    start's ``loss_start``, the ``std_errors`` after it, the ``history`` of losses, the
    ``iterations`` and ``status`` (``"converged"``: the step fell below ``xtol`` of the box;
    ``"max_iter"``; ``"ends_early"``: the start itself is not a full record; ``"singular"``:
    the start's record cannot determine every parameter, so there is no finite loss to
    descend)."""

    y0: np.ndarray
    loss: float
    loss_start: float
    std_errors: np.ndarray
    history: list[float]
    iterations: int
    status: str
    wall_time: float


def _scalar_loss(x, end, problem, cols, P, p, criterion_code, ci):
    """The loss of one record as a traced scalar (``criterion_code`` 0: D, 1: A, 2: the
    variance of parameter ``ci``), and its row count."""
    F, rows, _, _ = _information_one(x, end, problem, cols)
    L = F.at[:p, :p].add(P)
    A, B, D = L[:p, :p], L[:p, p:], L[p:, p:]
    if D.shape[0]:
        D = D + jnp.diag(_RIDGE * jnp.maximum(jnp.diag(D), 1e-300))
        S = A - B @ jnp.linalg.solve(D, B.T)
    else:
        S = A
    S = 0.5 * (S + S.T)
    if criterion_code == 0:
        return -jnp.linalg.slogdet(S)[1], rows
    cov = jnp.linalg.inv(S)
    return (jnp.trace(cov) if criterion_code == 1 else cov[ci, ci]), rows


@eqx.filter_jit
def _loss_and_grad(u, y0, free, end, problem, cols, P, p, code, ci):
    """The loss at the free components ``u`` of ``y0`` and its gradient (forward over forward)."""

    def f(u):
        val, rows = _loss_of(u, y0, free, end, problem, cols, P, p, code, ci)
        return val, (val, rows)

    g, (val, rows) = jax.jacfwd(f, has_aux=True)(u)
    return val, g, rows


@eqx.filter_jit
def _batch_loss(us, y0, free, end, problem, cols, P, p, code, ci):
    return jax.vmap(lambda u: _loss_of(u, y0, free, end, problem, cols, P, p, code, ci))(us)


def _loss_of(u, y0, free, end, problem, cols, P, p, code, ci):
    """:func:`_scalar_loss` of ``y0`` with its components ``free`` set to ``u``."""
    x = jnp.concatenate([_theta(problem), y0.at[free].set(u)])
    return _scalar_loss(x, end, problem, cols, P, p, code, ci)


def _theta(problem):
    return jnp.stack([jnp.asarray(_get(problem.system, path), float) for path in problem.paths])


def refine_design(
    system: AbstractSystem,
    params: Sequence[str] | str,
    y0,
    t,
    bounds: dict[str, tuple[float, float]],
    *,
    observe: Callable | str,
    sigma,
    prior: Fit | dict | None = None,
    fit_y0: bool | Sequence[str] = True,
    criterion: str = "D",
    duration: float | None = None,
    max_iter: int = 30,
    xtol: float = 1e-4,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 16_384,
    progress: bool = True,
) -> Refined:
    """Improve the initial state ``y0`` of an experiment by gradient descent on the design loss
    over the components named in ``bounds`` (``{state name: (lo, hi)}``), the record kept full.

    Each iteration takes the exact gradient (forward mode over the forward-mode Jacobian),
    scales it to the box, and tries 8 step lengths (from a quarter of the box down, halving)
    as one batch, keeping the best that lowers the loss with a full record; it stops when no
    step of at least ``xtol`` of the box lowers it, or after ``max_iter`` iterations. The
    optimum is local: start it from the best of :func:`design`'s candidates."""
    t_start = time.perf_counter()
    params, paths, y0_index, obs, s = _setup(
        system, params, t, observe, sigma, fit_y0, criterion, rtol, atol, max_steps
    )
    y0 = _check_candidates(system, y0)
    if y0.shape[0] != 1:
        raise ValueError(f"y0 has shape {y0.shape}; refine_design improves one initial state")
    y0 = y0[0]
    names = tuple(system.state_names)
    if not isinstance(bounds, dict) or not bounds:
        raise ValueError(f"bounds = {bounds!r} must be a dict {{state name: (lo, hi)}}")
    free, lo, hi = [], [], []
    for k, b in bounds.items():
        if k not in names:
            raise ValueError(
                f"bounds: {k!r} is not a state component of {type(system).__name__} "
                f"({', '.join(names)})"
            )
        try:
            a, c = float(b[0]), float(b[1])
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"bounds[{k!r}] = {b!r} must be a pair (lo, hi)") from None
        if not (math.isfinite(a) and math.isfinite(c) and a < c):
            raise ValueError(f"bounds[{k!r}] = {b!r} must be finite with lo < hi")
        i = names.index(k)
        if not a <= y0[i] <= c:
            raise ValueError(f"y0's {k} = {float(y0[i])!r} is outside bounds[{k!r}] = {b!r}")
        free.append(i)
        lo.append(a)
        hi.append(c)
    max_iter = _check_int("max_iter", max_iter, 1)
    if not (isinstance(xtol, (int, float)) and not isinstance(xtol, bool) and 0 < xtol < 1):
        raise ValueError(f"xtol = {xtol!r} is outside the allowed range (0, 1) (of the box)")
    free_a, lo_a, hi_a = np.array(free), np.array(lo), np.array(hi)
    theta, P = _knowledge(system, params, paths, prior)
    p = len(params)
    cols = tuple(range(p)) + tuple(p + i for i in y0_index)
    problem = dataclasses.replace(
        _problem(_with(system, paths, theta), y0, obs, s, rtol, atol, paths,
                 tuple(range(len(names))), max_steps),
        with_event=False,
    )  # fmt: skip
    code = 0 if criterion == "D" else 1 if criterion == "A" else 2
    ci = params.index(criterion) if code == 2 else 0
    end = jnp.asarray(float(_ends(duration, obs.t, 1)[0]))
    asked = int(np.sum(obs.t <= float(end)))
    args = (jnp.asarray(y0), jnp.asarray(free_a), end, problem, cols, jnp.asarray(P), p, code, ci)
    if progress:
        print("refine_design: compiling the loss's gradient (forward over forward mode)",
              file=sys.stderr, flush=True)  # fmt: skip
    u = y0[free_a].copy()
    val, g, rows = _loss_and_grad(jnp.asarray(u), *args)
    val, g = float(val), np.asarray(g)
    start = val
    hist = [val]
    if int(rows) < asked:
        return Refined(y0, math.inf, math.inf, np.full(p, np.nan), hist, 0, "ends_early",
                       time.perf_counter() - t_start)  # fmt: skip
    F0, _, _, _ = _evaluate(problem, np.concatenate([theta, y0])[None], np.array([float(end)]),
                            cols, 1)  # fmt: skip
    singular = not np.all(np.isfinite(_marginal(F0, P, p)))
    if singular or not (np.isfinite(val) and np.all(np.isfinite(g))):
        # a start that cannot determine every parameter: no gradient to follow
        return Refined(y0, math.inf, math.inf, np.full(p, np.nan), hist, 0, "singular",
                       time.perf_counter() - t_start)  # fmt: skip
    status = "max_iter"
    width = hi_a - lo_a
    it = 0
    for it in range(1, max_iter + 1):
        gs = g * width  # the gradient in box units
        norm = float(np.linalg.norm(gs))
        if not np.isfinite(norm) or norm == 0:
            status = "converged"
            break
        steps = 0.25 * 0.5 ** np.arange(8)
        trials = np.clip(u[None] - (steps[:, None] * gs[None] / norm) * width[None], lo_a, hi_a)
        vals, rws = _batch_loss(jnp.asarray(trials), *args)
        vals = np.where(np.asarray(rws) >= asked, np.asarray(vals), np.inf)
        j = int(np.argmin(vals))
        if not vals[j] < val:
            status = "converged"
            break
        moved = float(np.max(np.abs(trials[j] - u) / width))
        u = trials[j]
        val, g, rows = _loss_and_grad(jnp.asarray(u), *args)
        val, g = float(val), np.asarray(g)
        hist.append(val)
        if progress:
            print(f"refine_design: iteration {it:3d}  loss {val:.8g}", file=sys.stderr, flush=True)
        if moved < xtol:
            status = "converged"
            break
    y_new = y0.copy()
    y_new[free_a] = u
    F, _, _, _ = _evaluate(problem, np.concatenate([theta, y_new])[None], np.array([float(end)]),
                     cols, 1)  # fmt: skip
    se, _ = _std_corr(_marginal(F, P, p)[0])
    return Refined(y_new, val, start, se, hist, it, status, time.perf_counter() - t_start)


# ---------------------------------------------------------------------- which model: T-optimal
@dataclasses.dataclass
class Discrimination:
    """Result of :func:`discriminate`: per candidate the expected chi^2 by which a record tells
    ``truth``'s model from the ``rival`` (``delta_chi2``, the rival refitted: T-optimality;
    a likelihood ratio of ``exp(delta_chi2 / 2)``; ``nan`` where a solve failed), best first
    in ``order``; ``rows``: the observation times both models have; ``converged``: the
    rival's refit settled (its last Gauss-Newton step changed delta_chi2 by less than 1e-3
    relative) and both runs succeeded."""

    candidates: np.ndarray
    delta_chi2: np.ndarray
    order: np.ndarray
    rows: np.ndarray
    converged: np.ndarray
    wall_time: float

    @property
    def best(self) -> int:
        return int(self.order[0])


@eqx.filter_jit
def _batch_rival(xa, xb, pa, pb, cols, cut):
    """Per lane: the weighted difference ``d`` of the two models' records (0 where either has
    none) and the rival's Jacobian ``J`` in the columns ``cols``."""

    def one(xa, xb):
        ra = pa.residuals(xa)
        r_fn = lambda z: (pb.residuals(z),) * 2  # noqa: E731
        J, rb = jax.jacfwd(r_fn, has_aux=True)(xb)
        k = pa.inv_sigma.shape[0]
        ends, failed = [jnp.inf, jnp.inf], jnp.array(False)
        for i, (p, x) in enumerate(((pa, xa), (pb, xb))):
            e, st = _record_end(p, x, with_status=True)
            ends[i] = pa.t[0] + cut * (e - pa.t[0])
            failed = failed | jnp.isin(st, jnp.asarray(_FAILED))
        t_rows = jnp.repeat(pa.t, k)
        ok = (jnp.repeat(pa.weight, k) > 0) & (t_rows <= jnp.minimum(ends[0], ends[1]))
        ok = ok & jnp.isfinite(ra) & jnp.isfinite(rb) & jnp.all(jnp.isfinite(J), axis=1)
        d = jnp.where(ok, ra - rb, 0.0)
        Jc = jnp.where(ok[:, None], J[:, jnp.asarray(cols)], 0.0)
        return d, Jc, jnp.sum(ok) // k, failed

    return jax.vmap(one)(xa, xb)


def discriminate(
    truth: AbstractSystem,
    rival: AbstractSystem,
    params: Sequence[str] | str,
    candidates,
    t,
    *,
    observe: Callable | str,
    sigma,
    fit_y0: bool | Sequence[str] = True,
    rival_candidates=None,
    iterations: int = 4,
    event_cut: float = 1.0,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 16_384,
    chunk: int = CHUNK,
) -> Discrimination:
    """Rank the initial states ``candidates`` by how well a record tells the model ``truth``
    from the model ``rival`` (T-optimal design, Atkinson and Fedorov 1975).

    For each candidate, the record ``truth`` would give (noise-free, weighted by ``sigma``) is
    fitted by the rival over its ``params`` and the initial-state components ``fit_y0``
    (``iterations`` Gauss-Newton steps from the rival's values and its start
    ``rival_candidates``, default the same states: give them where the two models' states
    measure the same start differently, batched over the candidates); what remains, ``delta_chi2 = min |h_truth - h_rival|^2 / sigma^2``,
    is the expected chi^2 difference between the two fits of a real record (noise adds about
    the same to both). Both systems must have the same state and observables. To be sure of
    telling them apart whichever is true, take the smaller of the two directions.
    ``event_cut``: the record is used up to this fraction of the way to either model's event
    (a sliding record is cut before the stop, where the friction force jumps)."""
    t_start = time.perf_counter()
    if not isinstance(truth, AbstractSystem):
        raise TypeError(f"truth must be a rollax.AbstractSystem, got {type(truth).__name__}")
    params, paths, y0_index, obs, s = _setup(
        rival, params, t, observe, sigma, fit_y0, "D", rtol, atol, max_steps
    )
    if tuple(truth.state_names) != tuple(rival.state_names):
        raise ValueError(
            f"truth ({type(truth).__name__}) and rival ({type(rival).__name__}) must have the "
            f"same state; they have {truth.state_names} and {rival.state_names}"
        )
    _check_observe(truth, observe)
    C = _check_candidates(truth, candidates)
    Cb = C if rival_candidates is None else _check_candidates(rival, rival_candidates)
    if Cb.shape != C.shape:
        raise ValueError(
            f"rival_candidates has shape {Cb.shape}; it must be that of candidates, {C.shape}"
        )
    iterations = _check_int("iterations", iterations, 1)
    chunk = _check_int("chunk", chunk, 1)
    if not (isinstance(event_cut, (int, float)) and 0 < event_cut <= 1):
        raise ValueError(f"event_cut = {event_cut!r} is outside the allowed range (0, 1]")
    m, n_state, p = C.shape[0], C.shape[1], len(params)
    all_idx = tuple(range(n_state))
    cols = tuple(range(p)) + tuple(p + i for i in y0_index)
    pa = dataclasses.replace(
        _problem(truth, C[0], obs, s, rtol, atol, (), all_idx, max_steps), with_event=False
    )
    pb = dataclasses.replace(
        _problem(rival, C[0], obs, s, rtol, atol, paths, all_idx, max_steps), with_event=False
    )
    theta = np.array([float(_get(rival, path)) for path in paths])
    xa = C.copy()
    xb = np.concatenate([np.repeat(theta[None], m, axis=0), Cb], axis=1)
    lo = np.array([_bounds_of(rival, path)[0] for path in paths])
    hi = np.array([_bounds_of(rival, path)[1] for path in paths])
    col_idx = np.array(cols)
    T_prev = np.full(m, np.inf)
    T = np.full(m, np.inf)
    best = np.full(m, np.inf)  # every rival tried is a fit: the least is the bound
    failed = np.zeros(m, bool)
    rows = np.zeros(m, int)
    for _ in range(iterations + 1):
        ds, Js, rs, fs = [], [], [], []
        for a in range(0, m, chunk):
            n = min(chunk, m - a)
            pad = lambda v: np.concatenate([v, np.repeat(v[:1], chunk - n, 0)]) if n < chunk else v  # noqa: E731
            d, J, r, fl = _batch_rival(jnp.asarray(pad(xa[a : a + n])), jnp.asarray(pad(xb[a : a + n])),
                                   pa, pb, cols, jnp.asarray(float(event_cut)))  # fmt: skip
            ds.append(np.asarray(d)[:n])
            Js.append(np.asarray(J)[:n])
            rs.append(np.asarray(r)[:n])
            fs.append(np.asarray(fl)[:n])
        d, J, rows = np.concatenate(ds), np.concatenate(Js), np.concatenate(rs)
        failed = np.concatenate(fs)
        T_prev, T = T, np.sum(d * d, axis=1)
        best = np.minimum(best, np.where(np.isfinite(T), T, np.inf))
        if _ == iterations:
            break
        # the Gauss-Newton step of the rival (a small ridge: a direction the record cannot
        # see does not move), projected into the parameters' bounds
        A = np.swapaxes(J, 1, 2) @ J
        ridge = 1e-10 * np.maximum(np.einsum("mii->mi", A), 1e-300)
        g = np.einsum("mrq,mr->mq", J, d)[..., None]
        step = np.linalg.solve(A + ridge[:, :, None] * np.eye(A.shape[1]), g)[..., 0]
        xb[:, col_idx] += step
        xb[:, :p] = np.clip(xb[:, :p], lo, hi)
    converged = (np.abs(T - T_prev) <= 1e-3 * np.maximum(T, 1e-12)) & ~failed
    # (a failed run says nothing: nan, ranked last, never "cannot tell them apart")
    T = np.where(failed, np.nan, np.where(np.isfinite(best), best, 0.0))
    if failed.any():
        warnings.warn(
            f"discriminate: {int(failed.sum())} of {m} candidates could not be run (a solve "
            f"failed: non-finite state or the step limit); their delta_chi2 is nan",
            stacklevel=2,
        )
    return Discrimination(
        candidates=C,
        delta_chi2=T,
        order=np.argsort(np.where(np.isnan(T), np.inf, -T), kind="stable"),
        rows=rows,
        converged=converged,
        wall_time=time.perf_counter() - t_start,
    )


# ---------------------------------------------------------------------- simulate a record
@eqx.filter_jit
def _observed(x, problem):
    """The observables at the record's times, the record's end (the system's event; ``inf``:
    none) and the run's status."""
    pred = problem.predict(x)[0]
    k = problem.inv_sigma.shape[0]
    stop, status = _record_end(problem, x, with_status=True)
    return pred.reshape(-1, k), stop, status


def simulate_record(system, y0, t, *, observe, sigma, seed=0, rtol=1e-10, atol=1e-10):
    """A noisy record of ``system`` from ``y0``: the observables ``observe`` (a method name or
    ``observe(system, t, y)``) at the times ``t`` before the system's first event, plus
    Gaussian noise of standard deviation ``sigma`` (one, or one per observable; ``seed``).
    Returns :class:`rollax.Observations` (with ``sigma``), ready for :func:`rollax.identify`.
    The record ends where the event ends the run (the ball leaves the rim)."""
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a rollax.AbstractSystem, got {type(system).__name__}")
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0):
        raise ValueError(f"seed = {seed!r} must be an integer >= 0")
    _, _, _, obs, s = _setup(system, (), t, observe, sigma, True, "D", rtol, atol, 16_384,
                             need_params=False)  # fmt: skip
    y0 = _check_candidates(system, y0, "y0")
    if y0.shape[0] != 1:
        raise ValueError(f"y0 has shape {y0.shape}; a record has one initial state")
    y0 = y0[0]
    problem = _problem(system, y0, obs, s, rtol, atol, (), tuple(range(y0.shape[0])))
    clean, stop, status = _observed(jnp.asarray(y0), problem)
    clean = np.asarray(clean)[: obs.t.shape[0]]
    if int(status) in _FAILED:
        from rollax._core._solution import code_names

        raise ValueError(
            f"the run from y0 = {y0.tolist()!r} failed ({code_names(int(status), Status)}): "
            f"no record; see rtol, atol and the start"
        )
    before = obs.t <= float(stop)
    keep = np.all(np.isfinite(clean), axis=1) & before
    if (~keep & before).any():
        warnings.warn(
            f"simulate_record: {int((~keep & before).sum())} of {int(before.sum())} "
            f"observation times before the record's end have a non-finite observable; "
            f"they are left out",
            stacklevel=2,
        )
    if keep.sum() < 2:
        ev = f" (event '{system.events[0].name}')" if system.events else ""
        raise ValueError(
            f"the run from y0 = {y0.tolist()!r} ends{ev} before the second observation "
            f"time: no record"
        )
    rng = np.random.default_rng(seed)
    vals = clean + rng.standard_normal(clean.shape) * s
    return Observations(obs.t[keep], vals[keep], observe, obs.names, sigma=s)


# ---------------------------------------------------------------------- the sequential loop
@dataclasses.dataclass
class Sequential:
    """Result of :func:`sequential_design`: per round (``rounds`` of them) the chosen start,
    the fit's status, and the knowledge after it: ``estimates`` and ``std_errors``
    ``(rounds, p)``, ``correlations`` ``(rounds, p, p)``; ``predicted``: the standard errors
    the design predicted for that round's record alone, against ``fitted``: its fit's own;
    ``errors``: estimate - truth; ``strategy``; ``history``: one dict per round."""

    params: tuple[str, ...]
    strategy: str
    truth: np.ndarray
    estimates: np.ndarray
    std_errors: np.ndarray
    correlations: np.ndarray
    predicted: np.ndarray
    fitted: np.ndarray
    errors: np.ndarray
    starts: np.ndarray
    statuses: list[str]
    history: list[dict]


def combine(theta0, P0, theta1, C1):
    """The Gaussian update of knowledge ``(theta0, precision P0)`` with a new estimate
    ``theta1`` of covariance ``C1`` (its finite part): ``(theta, P, C)``."""
    known = np.all(np.isfinite(C1), axis=1)
    P1 = np.zeros_like(P0)
    if known.any():
        P1[np.ix_(known, known)] = np.linalg.pinv(C1[np.ix_(known, known)])
    P = P0 + P1
    C = np.linalg.pinv(P)
    theta = C @ (P0 @ theta0 + P1 @ np.where(np.isfinite(theta1), theta1, 0.0))
    return theta, P, C


def sequential_design(
    system: AbstractSystem,
    params: Sequence[str] | str,
    propose: Callable[[np.random.Generator, int], Any],
    t,
    *,
    observe: Callable | str,
    sigma,
    truth: AbstractSystem,
    rounds: int = 5,
    strategy: str = "design",
    criterion: str = "D",
    prior: Fit | dict | None = None,
    seed: int = 0,
    fit_kw: dict | None = None,
    progress: bool = True,
) -> Sequential:
    """Design, run, fit, update, ``rounds`` times, from ``prior`` (a :class:`rollax.Fit`,
    ``{name: (mean, sd)}`` or ``None``: vague; the first round is then designed at
    ``system``'s values). The rounds stop early where no candidate is feasible (the last
    ``statuses`` entry says so).

    Each round ``propose(rng, round)`` gives candidate initial states ``(m, n)``; the round's
    experiment is the :func:`design` optimum (``strategy="design"``) or a random feasible one
    (``"random"``: the baseline); it is "run" by :func:`simulate_record` with the hidden
    ``truth`` (a system with the true parameter values) and noise ``sigma``, and fitted by
    :func:`rollax.identify` (params and the whole initial state, from the chosen start; a real
    experimentalist knows the start they threw, up to the fit); the knowledge is updated by
    :func:`combine` (precisions add: the records are independent). A fit that is not
    converged leaves the knowledge unchanged (and says so in ``statuses``)."""
    if strategy not in ("design", "random"):
        raise ValueError(f"strategy = {strategy!r} is not allowed: 'design' or 'random'")
    if not callable(propose):
        raise ValueError(
            f"propose = {propose!r:.60} must be a function propose(rng, round) -> candidate "
            f"initial states (m, n)"
        )
    if fit_kw is not None and not isinstance(fit_kw, dict):
        raise ValueError(f"fit_kw = {fit_kw!r} must be a dict of rollax.identify's options")
    rounds = _check_int("rounds", rounds, 1)
    params = (params,) if isinstance(params, str) else tuple(params)
    paths = tuple(parameter_path(system, p) for p in params)
    if not isinstance(truth, type(system)):
        raise ValueError(
            f"truth = {type(truth).__name__} must be a {type(system).__name__} (the same system "
            f"with the true parameter values)"
        )
    true = np.array([float(_get(truth, path)) for path in paths])
    theta, P = _knowledge(system, params, paths, prior)
    p = len(params)
    rng = np.random.default_rng(seed)
    fit_kw = {"robust": False, "profile": False, **(fit_kw or {})}
    est, ses, cors, pred, fitted, starts, statuses, hist = [], [], [], [], [], [], [], []
    for k in range(rounds):
        C = _check_candidates(system, propose(rng, k))
        d = design(
            _with(system, paths, theta), params, C, t, observe=observe, sigma=sigma,
            prior=Knowledge(theta, P), criterion=criterion, progress=False,
        )  # fmt: skip
        feas = np.flatnonzero(d.feasible)
        if feas.size == 0:
            statuses.append("no_feasible_candidate")
            break
        i = d.best if strategy == "design" else int(rng.choice(feas))
        obs = simulate_record(truth, C[i], t, observe=observe, sigma=sigma,
                              seed=int(rng.integers(2**31)))  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = identify(_with(system, paths, theta), obs, params, y0=C[i], progress=False,
                         **fit_kw)  # fmt: skip
        fit_cov = np.asarray(f.covariance)[:p, :p]
        if f.status == "converged":
            theta, P, Cp = combine(theta, P, np.asarray(f.values[:p]), fit_cov)
        else:
            Cp = np.linalg.pinv(P) if np.any(P) else np.full((p, p), np.nan)
        se, corr = _std_corr(Cp)
        est.append(theta.copy())
        ses.append(se)
        cors.append(corr)
        pred.append(d.std_errors_record[i])
        fitted.append(np.asarray(f.std_errors[:p]))
        starts.append(C[i])
        statuses.append(f.status)
        hist.append({"round": k, "candidate": i, "status": f.status,
                     "estimate": theta.tolist(), "std_errors": se.tolist()})  # fmt: skip
        if progress:
            print(f"sequential_design ({strategy}): round {k + 1}/{rounds}: "
                  + ", ".join(f"{n} = {v:.4g} +- {e:.2g}" for n, v, e in zip(params, theta, se))
                  + f" ({f.status})", file=sys.stderr, flush=True)  # fmt: skip
    est_a = np.array(est).reshape(-1, p)
    return Sequential(
        params=params, strategy=strategy, truth=true, estimates=est_a,
        std_errors=np.array(ses).reshape(-1, p), correlations=np.array(cors).reshape(-1, p, p),
        predicted=np.array(pred).reshape(-1, p), fitted=np.array(fitted).reshape(-1, p),
        errors=est_a - true[None], starts=np.array(starts), statuses=statuses, history=hist,
    )  # fmt: skip
