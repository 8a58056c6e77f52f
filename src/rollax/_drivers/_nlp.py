"""Nonlinear programming for trajectory optimisation: SQP (SciPy's SLSQP) on values and
Jacobians compiled by JAX.

Solves ``min |r(x)|^2`` subject to ``h(x) = 0`` and ``g(x) <= 0`` for ``x`` in R^d, given a
pure JAX function ``fun(x, args) -> (r, h, g)`` (the objective as residuals: an effort
``int u^2 dt`` is a sum of squares exactly). Values and the Jacobians of ``r``, ``h`` and ``g``
come from one compiled call (forward mode: one pass per variable, vectorised), cached per
point, and SciPy's SLSQP (Kraft 1988, *A software package for sequential quadratic
programming*, DFVLR-FB 88-28) takes the steps.

Why SQP, and this one. The problems are small in variables (``K`` knots times the masses,
tens to a hundred) and large in constraints (the path constraints on a time grid: hundreds),
and strongly nonlinear in the terminal conditions. Measured on the disk of Sect. 5 turned by
``-pi`` in ``T = 5`` with only the terminal conditions (64 variables, the same optimum J =
549.69 found by both): an augmented Lagrangian with ``optax.lbfgs`` inside needed 13 outer and
~4000 inner iterations (196 s on 2 cores); with ``optimistix.LevenbergMarquardt`` inside it
stalled at violation 0.1; SLSQP converged in 367 iterations (25 s), and in 35-51 iterations
(1-3 s) on the feasible manoeuvres of the tests. SLSQP is maintained in SciPy, returns the
Lagrange multipliers (so the KKT residual is reported), and needs only first derivatives. No
maintained JAX library solves constrained nonlinear programmes.

Several starts run together. Each start is one SLSQP run in its own thread (SciPy's SLSQP
keeps its state per call), and their evaluations are batched: once every running start has
asked for its point's values, the calling thread evaluates the posted points in compiled
calls of a fixed size, ``n_dev`` devices (one per core after :func:`rollax.configure`) times
``rows`` points (``vmap`` over the rows; finished starts padded with a posted point, so each
problem compiles once), and hands each start its values. The results are those of the
starts run one at a time: to the bit on the test problem of ``tests/drivers/test_nlp.py``, to 1e-12
in the cost on the disk (XLA may round a batched call differently). Measured on the disk of
Sect. 5 turned by ``-pi`` in ``T = 8`` with ``mu = 0.2``, ``N >= 0.5``, K = 16, 4 starts (no
motion and 3 random; best J = 1.2394056 in every variant), warm, on a 2-core CPU that another
job kept busy (load 5: about one core was ours): one at a time 56-69 s (1025 calls);
together, one point per device and call (``rows=1``, the CPU default) 53-63 s (585 calls, the
same CPU time); together in one ``vmap``-ed call (``rows=None``) 85-90 s (413 calls). One
evaluation of the 4 points with the CPU idle (201 grid times; 801 on the refined grid): one
at a time 49-55 (106-108) ms; one ``vmap``-ed call on one device 73-77 (185-201) ms, on two
39 (138) ms. On a CPU the ``vmap``-ed call loses: the batched adaptive solves step in lock
step until the slowest lane is done, finished starts are padded, and XLA's CPU code for the
batched loop is slower per lane; so there each device takes one point per call, the devices
running side by side when the cores are free. On an accelerator one ``vmap``-ed call for all
the starts is the default (not measured here).

Convergence (reported, and checked after SLSQP stops): the constraint violation
``max(|h|, max(g, 0))`` at most ``tol`` and the KKT residual ``max(|grad f + J_h^T nu +
J_g^T lam|_inf, max_i lam_i |g_i|) / max(1, |f|)`` (``lam >= 0`` the inequality
multipliers; stationarity and complementarity) at most ``kkt_tol``. The multipliers are
SLSQP's, or, where those leave a residual above ``kkt_tol`` or belong to another point, the
best fit at the reported point (bounded least squares over the constraints within ``10
tol`` of their bounds): SLSQP's are those of its last quadratic subproblem, and where many
active constraints are nearly dependent (a path constraint touching its bound at the two
grid times either side of each of its peaks, as in the least-mu problem of
:mod:`rollax.analysis.robot.optimal`) they can be far from the best ones. A start that stops with the
violation above ``tol`` is reported at the feasible point of least objective met on the way
(not converged), or, if none was feasible, at the least violation met (infeasible).

A time limit (``deadline``, a :func:`time.perf_counter` time) stops every start at the end
of the first iteration that finishes after it (SciPy's callback raises ``StopIteration``);
such a start is reported at its best point met, as above, with ``stopped = True`` and never
converged. An iteration is not interrupted: the first one includes compiling the problem.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class History(NamedTuple):
    """Per iteration of one start: the objective, the violation and the KKT residual."""

    f: np.ndarray
    violation: np.ndarray


class Result(NamedTuple):
    """The outcome for one start."""

    x: np.ndarray
    f: float
    violation: float
    kkt: float
    converged: bool
    feasible: bool
    iterations: int
    evaluations: int
    message: str
    multipliers_eq: np.ndarray
    multipliers_ineq: np.ndarray  # >= 0, for g <= 0
    history: History
    stopped: bool = False  # by the time limit (then never converged)


@eqx.filter_jit
def _values_and_jacobians(fun, X, args, n_dev: int):
    """``(r, h, g)`` and their Jacobians at every row of ``X``: one compiled call, ``vmap``
    over the rows, the rows dealt in equal blocks to ``n_dev`` local devices (``shard_map``,
    no collectives: on a CPU split into one device per core, one block per core)."""
    dyn, static = eqx.partition(args, eqx.is_array)

    def block(X, dyn):
        a = eqx.combine(dyn, static)
        return jax.vmap(lambda x: (fun(x, a), jax.jacfwd(lambda x: fun(x, a))(x)))(X)

    if n_dev == 1:
        return block(X, dyn)
    mesh = jax.sharding.Mesh(np.array(jax.local_devices()[:n_dev]), ("d",))
    P = jax.sharding.PartitionSpec
    return jax.shard_map(
        block, mesh=mesh, in_specs=(P("d"), P()), out_specs=P("d"), check_vma=False
    )(X, dyn)


def _violation(h, g) -> float:
    v = max(float(np.max(np.abs(h), initial=0.0)), float(np.max(g, initial=0.0)))
    return v if np.isfinite(v) else np.inf


class _Cancelled(Exception):
    """Raised in a start's thread when the run is abandoned (an error or an interrupt)."""


class _Batch:
    """The evaluations of all starts, batched: each start's thread posts its point and waits;
    once every running start has posted, the calling thread evaluates the posted points in
    calls of fixed size (``n_dev`` devices times ``rows`` rows each; padded with a posted
    point, so the call compiles once) and hands each start its values. ``rows``: all the
    starts (one ``vmap``-ed call for them all) or, with ``rows=1``, one point per device and
    call (on CPUs, measured faster: module docstring)."""

    def __init__(self, fun, args, starts: int, rows: int | None):
        self.fun, self.args = fun, args
        self.n_dev = min(starts, jax.local_device_count())
        rows = -(-starts // self.n_dev) if rows is None else rows
        self.size = self.n_dev * rows
        self.cond = threading.Condition()
        self.posted: dict[int, np.ndarray] = {}
        self.answers: dict[int, list] = {}
        self.running = starts
        self.failed = False

    def __call__(self, i: int, x: np.ndarray) -> list:
        """In start ``i``'s thread: ``[r, h, g, J_r, J_h, J_g]`` at ``x`` (NumPy)."""
        with self.cond:
            if self.failed:
                raise _Cancelled
            self.posted[i] = x
            self.cond.notify_all()
            while i not in self.answers and not self.failed:
                self.cond.wait()
            if self.failed:
                raise _Cancelled
            return self.answers.pop(i)

    def finished(self, failed: bool = False) -> None:
        """Start's thread ends (``failed``: with an error; then the other starts stop too)."""
        with self.cond:
            self.running -= 1
            self.failed = self.failed or failed
            self.cond.notify_all()

    def serve(self) -> None:
        """In the calling thread: evaluate the posted points until every start has finished;
        on an error or an interrupt, cancel the starts and raise it."""
        try:
            while True:
                with self.cond:
                    while self.running and len(self.posted) < self.running:
                        self.cond.wait()
                    if not self.running:
                        return
                    posted, self.posted = self.posted, {}
                starts = sorted(posted)
                chunks = [starts[c : c + self.size] for c in range(0, len(starts), self.size)]
                outs = [
                    _values_and_jacobians(  # dispatched together, run asynchronously
                        self.fun,
                        jnp.asarray(
                            np.stack([posted[c[min(k, len(c) - 1)]] for k in range(self.size)])
                        ),
                        self.args,
                        self.n_dev,
                    )
                    for c in chunks
                ]
                with self.cond:
                    for c, out in zip(chunks, outs):
                        vals = [np.asarray(a) for a in jax.tree_util.tree_leaves(out)]
                        for k, i in enumerate(c):
                            row = [a[k] for a in vals]
                            if not all(np.all(np.isfinite(a)) for a in row):  # failed solve
                                row = [np.where(np.isfinite(a), a, 1e10) for a in row]
                            self.answers[i] = row
                    self.cond.notify_all()
        except BaseException:
            with self.cond:
                self.failed = True
                self.cond.notify_all()
            raise


def minimize(
    fun: Callable[[Any, Any], tuple],
    x0,
    args: Any = None,
    *,
    tol: float = 1e-6,
    kkt_tol: float = 1e-5,
    max_iter: int = 300,
    progress: Callable[[int, dict], None] | None = None,
    rows: int | None | Literal["auto"] = "auto",
    deadline: float | None = None,
) -> Result | list[Result]:
    """Minimise ``|r|^2`` subject to ``h = 0``, ``g <= 0`` from ``x0`` (module docstring):
    from one point (shape ``(d,)``: one :class:`Result`) or from each row of ``x0`` (shape
    ``(starts, d)``: a list), all starts at once with their evaluations batched: ``rows``
    points per device and compiled call (``None``: all the starts in one ``vmap``-ed call;
    ``"auto"``: 1 on a CPU, else ``None``).

    ``fun(x, args) -> (r, h, g)`` must be a pure JAX function, best a module-level one (the
    compiled code is keyed by it; ``args`` is traced, so new problem data reuse it).
    ``progress(k, info)`` is called after every iteration of every start with ``start`` (the
    row of ``x0``), ``f`` and ``violation`` (from the starts' threads). ``deadline``: a
    :func:`time.perf_counter` time after which every start stops at the end of its current
    iteration (module docstring; ``Result.stopped``)."""
    x0 = np.asarray(x0, dtype=float)
    X0 = np.atleast_2d(x0)
    has_ineq = jax.eval_shape(lambda x: fun(x, args), jnp.asarray(X0[0]))[2].shape[0] > 0
    if rows == "auto":
        rows = 1 if jax.default_backend() == "cpu" else None
    if rows is not None and (
        isinstance(rows, (bool, str)) or not isinstance(rows, int) or rows < 1
    ):
        raise ValueError(
            f"rows = {rows!r} is not allowed: it must be 'auto', None or an integer >= 1"
        )
    batch = _Batch(fun, args, X0.shape[0], rows)
    results: list = [None] * X0.shape[0]
    errors: list = []

    def work(i):
        try:
            results[i] = _start(
                lambda x: batch(i, x),
                X0[i],
                has_ineq,
                i,
                tol=tol,
                kkt_tol=kkt_tol,
                max_iter=max_iter,
                progress=progress,
                deadline=deadline,
            )
        except _Cancelled:
            batch.finished()
        except BaseException as err:  # noqa: BLE001 (re-raised in the calling thread)
            errors.append(err)
            batch.finished(failed=True)
        else:
            batch.finished()

    threads = [
        threading.Thread(target=work, args=(i,), daemon=True, name=f"start {i}")
        for i in range(X0.shape[0])
    ]
    for t in threads:
        t.start()
    batch.serve()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results[0] if x0.ndim == 1 else results


def _start(
    evaluate, x0, has_ineq: bool, start: int, *, tol, kkt_tol, max_iter, progress, deadline=None
) -> Result:
    """One start: SciPy's SLSQP from ``x0``, values from ``evaluate(x)`` (cached per point)."""
    from scipy.optimize import minimize as scipy_minimize

    cache: dict = {}
    # the least f if feasible, else the least violation
    best: dict[str, Any] = dict(rank=(True, np.inf), x=None)

    def rank(r, h, g):
        v = _violation(h, g)
        return (False, float(r @ r)) if v <= tol else (True, v)

    def ev(x):
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = vals = evaluate(np.array(x, dtype=float))
            if rank(*vals[:3]) < best["rank"]:
                best.update(rank=rank(*vals[:3]), x=x.copy())
        return cache[key]

    rows = []
    stopped = [False]

    def callback(xk):
        r, h, g = ev(xk)[:3]
        f, v = float(r @ r), _violation(h, g)
        rows.append((f, v))
        if progress is not None:
            progress(len(rows) - 1, dict(start=start, f=f, violation=v))
        if deadline is not None and time.perf_counter() >= deadline:
            stopped[0] = True
            raise StopIteration  # SciPy ends the run at this point

    cons = [dict(type="eq", fun=lambda x: ev(x)[1], jac=lambda x: ev(x)[4])]
    if has_ineq:
        cons.append(dict(type="ineq", fun=lambda x: -ev(x)[2], jac=lambda x: -ev(x)[5]))
    res = scipy_minimize(
        lambda x: float(ev(x)[0] @ ev(x)[0]),
        x0,
        jac=lambda x: 2.0 * ev(x)[3].T @ ev(x)[0],
        constraints=cons,
        method="SLSQP",
        callback=callback,
        options=dict(maxiter=max_iter, ftol=1e-14),
    )
    x = np.asarray(res.x)
    r, h, g, Jr, Jh, Jg = ev(x)
    f, v = float(r @ r), _violation(h, g)
    moved = v > tol and best["x"] is not None and best["rank"] < rank(r, h, g)
    if moved:
        x = cast(np.ndarray, best["x"])  # (moved: not None)
        r, h, g, Jr, Jh, Jg = ev(x)
        f, v = float(r @ r), _violation(h, g)
    p = h.shape[0]
    mult = np.asarray(
        getattr(res, "multipliers", None)
        if getattr(res, "multipliers", None) is not None
        else np.zeros(p + g.shape[0])
    )
    # SciPy's convention: grad f = J_eq^T nu + J_c^T lam with c = -g >= 0
    nu, lam = -mult[:p], np.maximum(mult[p:], 0.0)
    kkt = _kkt(2.0 * Jr.T @ r, Jh, Jg, g, nu, lam) / max(1.0, abs(f))
    if moved or kkt > kkt_tol:  # SLSQP's multipliers: those of its last QP (_multipliers)
        nu2, lam2 = _multipliers(2.0 * Jr.T @ r, Jh, Jg, g, tol)
        kkt2 = _kkt(2.0 * Jr.T @ r, Jh, Jg, g, nu2, lam2) / max(1.0, abs(f))
        if kkt2 < kkt or moved:
            nu, lam, kkt = nu2, lam2, kkt2
    hist = (
        History(*(np.asarray(c) for c in zip(*rows)))
        if rows
        else History(np.array([f]), np.array([v]))
    )
    return Result(
        x=x,
        f=f,
        violation=v,
        kkt=kkt,
        converged=bool(v <= tol and kkt <= kkt_tol and not stopped[0]),
        feasible=bool(v <= tol),
        iterations=int(res.nit),
        evaluations=int(res.nfev),
        message="time limit reached" if stopped[0] else str(res.message),
        multipliers_eq=nu,
        multipliers_ineq=lam,
        history=hist,
        stopped=stopped[0],
    )


def _kkt(grad_f, Jh, Jg, g, nu, lam) -> float:
    """The KKT residual with multipliers ``nu`` (of ``h = 0``) and ``lam >= 0`` (of ``g <=
    0``): ``max(|grad f + J_h^T nu + J_g^T lam|_inf, max_i lam_i |g_i|)`` (stationarity and
    complementarity)."""
    stat = np.max(np.abs(grad_f + Jh.T @ nu + Jg.T @ lam), initial=0.0)
    return float(max(stat, np.max(lam * np.abs(g), initial=0.0)))


def _multipliers(grad_f, Jh, Jg, g, tol):
    """The multipliers that fit stationarity best at a point: ``nu`` free, ``lam >= 0`` on the
    constraints within ``max(10 tol, 1e-6 ...)`` of their bound (zero on the others), by
    bounded least squares. Why: SLSQP's multipliers are those of its last quadratic
    subproblem, at the point before its last step (or at another point altogether when the
    best point met is reported), and on problems whose active constraints are nearly
    dependent (a friction ratio touching its bound at the two grid times either side of each
    of its peaks) they can be far from the best ones while a good set exists: the KKT
    conditions ask only that some multipliers fit."""
    from scipy.optimize import lsq_linear

    near = np.flatnonzero(g >= -max(10.0 * tol, 1e-6))
    A = np.concatenate([Jh.T, Jg[near].T], axis=1)
    p = Jh.shape[0]
    lo = np.concatenate([np.full(p, -np.inf), np.zeros(len(near))])
    if A.shape[1] == 0:
        return np.zeros(p), np.zeros(g.shape[0])
    sol = lsq_linear(A, -grad_f, bounds=(lo, np.full(A.shape[1], np.inf)), method="bvls")
    lam = np.zeros(g.shape[0])
    lam[near] = np.maximum(sol.x[p:], 0.0)
    return sol.x[:p], lam
