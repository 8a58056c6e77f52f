"""Optimal rest-to-rest manoeuvres of ball and disk robots inside a contact envelope.

Direct optimal control by gradient through :func:`rollax.solve`. The robot (Putkaradze &
Rogers, *On the normal force and static friction acting on a rolling ball actuated by internal
point masses*, Sects. 3-6) starts at rest; the rail accelerations ``u_i = theta_i''`` are
cubic splines on ``K`` uniform knots with ``int_0^T u_i dt = 0``
(:class:`~rollax.robot.RestToRestControl`), so the masses end at rest exactly. The problem is

    min  J = int_0^T sum_i u_i^2 dt                         (or the least mu, see least_mu)
    s.t. disk: phi(T) = phi_T, phi'(T) = 0;  ball: (x, y)(T) = target, Omega(T) = 0
         N(t) >= N_min, |f_s(t)| <= mu N(t)   on a uniform grid of n_grid times,
         theta_i(t) inside the rail's domain  (rails with ends: SegmentRail, CurveRail),

with N from (3.3) / (4.3) and f_s from (3.4) / (4.4), solved by sequential quadratic
programming (SciPy's SLSQP on JAX-compiled values and forward-mode Jacobians; see
:mod:`rollax._nlp` for why, with the measurements). The dynamics are the rolling
equations throughout (:class:`rollax.systems.RollingRobot`): a control that would make the
body hop violates ``N >= N_min`` and the optimiser removes it.

The authors solved this optimal control problem (without the contact envelope) by Pontryagin's
principle and continuation (Putkaradze & Rogers 2017, arXiv:1708.03829).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax import _nlp
from rollax._solution import Status
from rollax._solve import solve
from rollax._validate import check_integer, check_range, real_array
from rollax.robot.ball import Ball
from rollax.robot.controls import RestToRestControl, _rest_basis, _spline_operators
from rollax.robot.disk import Disk
from rollax.robot.quaternion import rotation_matrix
from rollax.robot.rails import CurveRail, SegmentRail

#: Regularisation of the least-mu problem: mu + LEAST_MU_EFFORT * J (picks one control among
#: the many that reach the least mu; shifts mu by ~1e-4 J / (dmu/dJ), far below the tolerances).
LEAST_MU_EFFORT = 1e-5


class Manoeuvre(eqx.Module):
    """A rest-to-rest manoeuvre of ``model`` (a :class:`Disk` or :class:`Ball`) in time ``T``
    from rail coordinates ``theta0``, inside the contact envelope ``N >= n_min``,
    ``|f_s| <= mu N``.

    ``target``: the disk's rotation angle ``(phi_T,)``; the ball's contact point ``(x, y)``,
    optionally with a heading ``(x, y, psi)`` (the angle of the body axis E1 projected on the
    floor, from e1). ``mu = inf`` drops the friction constraint, ``n_min = -inf`` the normal
    force constraint.
    """

    model: Ball | Disk
    theta0: Float[Array, " n"] = eqx.field(converter=real_array("theta0"))
    T: Float[Array, ""] = eqx.field(converter=real_array("T"))
    target: Float[Array, " k"] = eqx.field(converter=real_array("target"))
    mu: Float[Array, ""] = eqx.field(converter=real_array("mu"), default=math.inf)
    n_min: Float[Array, ""] = eqx.field(converter=real_array("n_min"), default=-math.inf)

    def __check_init__(self):
        if not isinstance(self.model, (Ball, Disk)):
            raise ValueError(f"model = {type(self.model).__name__} is not allowed: it must be a "
                             "rollax.robot.Ball or Disk")
        n = self.model.n
        if jnp.shape(self.theta0) != (n,):
            raise ValueError(f"theta0 has shape {jnp.shape(self.theta0)}; the model has {n} "
                             f"masses (allowed: shape ({n},))")
        check_range("theta0", self.theta0, -math.inf, math.inf, lo_open=True, hi_open=True)
        check_range("T", self.T, 0.0, math.inf, lo_open=True, hi_open=True)
        shapes = ((1,),) if isinstance(self.model, Disk) else ((2,), (3,))
        if jnp.shape(self.target) not in shapes:
            what = "(phi_T,)" if isinstance(self.model, Disk) else "(x, y) or (x, y, heading)"
            raise ValueError(f"target has shape {jnp.shape(self.target)}; allowed: {what}")
        check_range("target", self.target, -math.inf, math.inf, lo_open=True, hi_open=True)
        check_range("mu", self.mu, 0.0, math.inf)
        if not isinstance(self.model.total_mass, jax.core.Tracer):
            W = float(self.model.total_mass * self.model.g)
            v = check_range("n_min", self.n_min, -math.inf, math.inf)
            if not v < W:
                raise ValueError(f"n_min = {v!r} is not allowed: it must be below the static "
                                 f"weight M g = {W:g} (N averages M g over any rest-to-rest "
                                 "manoeuvre)")
            if float(self.model.g) == 0.0 and math.isfinite(float(self.n_min)):
                raise ValueError(f"n_min = {float(self.n_min)!r} is not allowed with g = 0 (no "
                                 "weight): use n_min = -inf")

    @property
    def weight(self):
        """The static weight ``M g`` (the mean of N over any rest-to-rest manoeuvre)."""
        return self.model.total_mass * self.model.g

    @property
    def y0(self) -> Float[Array, " d"]:
        return self.model.initial_state(self.theta0)


def disk_manoeuvre(phi_T: float = -math.pi, T: float = 5.0, mu: float = 0.3,
                   n_min: float = 0.5) -> Manoeuvre:
    """The disk of Sect. 5 (r = m0 = d2 = g = 1, four unit masses on circles of radii 0.9,
    0.6333, 0.3667, 0.1) at rest with ``theta_i = -pi/2`` (5.6), turned to ``phi_T`` in ``T``."""
    from rollax.robot.examples import paper_disk

    ex = paper_disk()
    return Manoeuvre(ex.model, ex.y0[: ex.model.n], T, (phi_T,), mu, n_min)


def ball_manoeuvre(target=(1.0, 0.5), T: float = 5.0, mu: float = 0.3,
                   n_min: float = 0.5) -> Manoeuvre:
    """The ball of Sect. 6 (r = m0 = g = 1, d = (0.9, 1, 1.1), zeta0 = (0, 0, -0.05), three unit
    masses on the rails (6.8)-(6.10)) at rest at the angles of Table 6.2, moved to ``target``."""
    from rollax.robot.examples import paper_ball

    ex = paper_ball()
    return Manoeuvre(ex.model, ex.y0[: ex.model.n], T, target, mu, n_min)


def _rolling(model, control):
    # imported here: rollax.systems imports rollax.robot's models (a module-level import cycles)
    from rollax.systems.robot import RollingRobot

    return RollingRobot(model, control)


class _Problem(eqx.Module):
    """What :func:`_fun` needs: the manoeuvre (traced) and the discretisation (static)."""

    man: Manoeuvre
    K: int = eqx.field(static=True)
    n_grid: int = eqx.field(static=True)
    free_mu: bool = eqx.field(static=True)
    rtol: float = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    forward: bool = eqx.field(static=True, default=True)  # forward-mode differentiation

    def control(self, x) -> RestToRestControl:
        """The control of the variables ``x = (w, [s])``: ``z = C^{-T} w`` with ``C C^T`` the
        Gram matrix of the effort, so that ``J = T |w|^2`` (a well-conditioned objective)."""
        n = self.man.model.n
        w = x[: self.K * n].reshape(self.K, n)
        return RestToRestControl(jnp.asarray(_whitening(self.K)) @ w, self.man.T)

    def mu(self, x):
        return x[-1] ** 2 if self.free_mu else self.man.mu

    def objective(self, x):
        """Residuals whose squares sum to the objective: ``J`` (or ``mu + eps J``)."""
        w = x[: self.K * self.man.model.n]
        r = jnp.sqrt(self.man.T) * w
        if self.free_mu:
            return jnp.concatenate([x[-1:], math.sqrt(LEAST_MU_EFFORT) * r])
        return r

    def run(self, control, ts):
        system = _rolling(self.man.model, control)
        # forward mode: SQP needs the Jacobian of every constraint (one pass per variable)
        adjoint = diffrax.ForwardMode() if self.forward else diffrax.RecursiveCheckpointAdjoint()
        return solve(system, self.man.y0, 0.0, self.man.T, ts=ts, rtol=self.rtol,
                     atol=self.rtol, max_steps=self.max_steps, adjoint=adjoint)


@functools.lru_cache(maxsize=None)
def _whitening(K: int) -> np.ndarray:
    """``C^{-T}`` (NumPy, ``(K, K)``) with ``C C^T = B^T Q B``: the Gram matrix of the effort
    in the rest-to-rest coordinates of :class:`RestToRestControl`."""
    _, _, Q = _spline_operators(K)
    B = _rest_basis(K)
    C = np.linalg.cholesky(B.T @ Q @ B)
    return np.linalg.inv(C.T)


def _terminal(man: Manoeuvre, y):
    """The terminal equality constraints at ``y = y(T)``."""
    model, n = man.model, man.model.n
    if isinstance(model, Disk):
        _, _, phi, phid = model.split(y)
        return jnp.stack([phi - man.target[0], phid])
    _, _, q, Om, z = model.split(y)
    out = [z - man.target[:2], Om]
    if man.target.shape[0] == 3:
        e1 = rotation_matrix(q)[:, 0]  # body E1 in space
        psi = man.target[2]
        out.append((e1[0] * jnp.sin(psi) - e1[1] * jnp.cos(psi))[None])
    return jnp.concatenate(out)


def _path(man: Manoeuvre, control, mu, ts, ys):
    """Path constraints ``<= 0`` on the grid, per unit weight: ``N_min - N``, ``|f_s| - mu N``,
    and the rail limits (rails with ends)."""
    W = man.weight
    N, F_h = jax.vmap(lambda t, y: man.model.contact_forces(t, y, control))(ts, ys)
    fs = jnp.sqrt(jnp.sum(F_h**2, axis=1) + (1e-9 * W) ** 2)  # smooth at f_s = 0 (inactive)
    off = -jnp.ones_like(N)
    g_N = jnp.where(jnp.isfinite(man.n_min), (man.n_min - N) / W, off)
    g_f = jnp.where(jnp.isfinite(mu), (fs - jnp.where(jnp.isfinite(mu), mu, 0.0) * N) / W, off)
    out = [g_N, g_f]
    theta = ys[:, : man.model.n]
    for i, rail in enumerate(man.model.rails):
        if isinstance(rail, (SegmentRail, CurveRail)):
            lo, hi = rail.domain
            out += [(lo - theta[:, i]) / (hi - lo), (theta[:, i] - hi) / (hi - lo)]
    return jnp.concatenate(out)


def _values(prob: _Problem, control, mu):
    man = prob.man
    ts = man.T * jnp.linspace(0.0, 1.0, prob.n_grid)
    sol = prob.run(control, ts)
    bad = jnp.where(sol.status == Status.T_MAX, 0.0, jnp.nan)  # a failed solve: nan, rejected
    return _terminal(man, sol.y) + bad, _path(man, control, mu, ts, sol.ys) + bad


def _fun(x, prob: _Problem):
    """``(r, h, g)`` of the nonlinear programme (objective ``|r|^2``) for
    :func:`rollax._nlp.minimize`."""
    h, g = _values(prob, prob.control(x), prob.mu(x))
    return prob.objective(x), h, g


def evaluate(manoeuvre: Manoeuvre, control: RestToRestControl, *, n_grid: int = 201,
             rtol: float = 1e-8, forward_mode: bool = True):
    """``(J, h, g)`` of a control for ``manoeuvre``: the effort ``int sum u^2 dt``, the terminal
    conditions (disk: ``phi(T) - phi_T``, ``phi'(T)``; ball: ``z(T) - target``, ``Omega(T)``
    [, heading]) and the path constraints ``<= 0`` on ``n_grid`` uniform times (per unit
    weight: ``N_min - N``, ``|f_s| - mu N``, rail limits). Differentiable with respect to the
    control and the manoeuvre's arrays: ``forward_mode=True`` for ``jax.jacfwd`` (what the
    optimiser uses), ``False`` for reverse mode (``jax.grad``)."""
    prob = _Problem(manoeuvre, control.K, n_grid, False, float(rtol), 16384, forward_mode)
    h, g = _values(prob, control, manoeuvre.mu)
    return control.effort(), h, g


class Optimum(eqx.Module):
    """The result of :func:`optimize` (or :func:`least_mu`): the best start's control and how
    the optimisation went. :meth:`sample` re-simulates it on a dense grid."""

    manoeuvre: Manoeuvre
    control: RestToRestControl
    cost: float  # J = int sum u^2 dt of the best start
    mu: float  # the friction coefficient of the envelope (the least mu for least_mu)
    converged: bool
    feasible: bool
    status: str  # "converged", "infeasible" or "not converged"
    violation: float  # max constraint violation (per unit weight for the path constraints)
    kkt: float  # |grad of the Lagrangian|_inf / max(1, |f|)
    iterations: int  # SQP iterations of the best start
    evaluations: int  # simulations (each with its Jacobian) of the best start
    wall_time: float  # seconds, all starts
    message: str  # SLSQP's exit message
    start_costs: np.ndarray  # J of every start (nan: not feasible)
    start_converged: np.ndarray
    history: Any  # rollax._nlp.History of the best start's run

    def sample(self, n: int = 1001, rtol: float = 1e-10) -> dict:
        """Re-simulate on ``n`` uniform times of ``[0, T]``: ``t``, ``theta``, ``theta_dot``,
        ``theta_ddot`` (shape ``(n, masses)``), ``N``, ``f_s``, ``ratio`` (``|f_s|/N``), the
        body's state (disk: ``phi``, ``phi_dot``, ``x = -r phi``; ball: ``x``, ``y``,
        ``Omega``) and the final state ``y_T``."""
        n = check_integer("n", n, 2)
        man, c = self.manoeuvre, self.control
        ts = man.T * jnp.linspace(0.0, 1.0, n)
        sol = solve(_rolling(man.model, c), man.y0, 0.0, man.T, ts=ts, rtol=rtol,
                    atol=rtol, max_steps=65536)
        ys = sol.ys
        N, F_h = jax.vmap(lambda t, y: man.model.contact_forces(t, y, c))(ts, ys)
        fs = jnp.sqrt(jnp.sum(F_h**2, axis=1))
        m = man.model.n
        out = dict(t=ts, theta=ys[:, :m], theta_dot=ys[:, m:2 * m],
                   theta_ddot=jax.vmap(c)(ts), N=N, f_s=fs, ratio=fs / N, y_T=sol.y)
        if isinstance(man.model, Disk):
            out.update(phi=ys[:, 2 * m], phi_dot=ys[:, 2 * m + 1],
                       x=-man.model.radius * ys[:, 2 * m], F_h=F_h[:, 0])
        else:
            out.update(x=ys[:, -2], y=ys[:, -1], Omega=ys[:, 2 * m + 4:2 * m + 7], F_h=F_h)
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
            body=body, T=float(man.T), target=np.asarray(man.target).tolist(),
            mu=float(self.mu), n_min=float(man.n_min), knots=self.control.K,
            theta0=np.asarray(man.theta0).tolist(),
            t=s["t"], theta=s["theta"], theta_dot=s["theta_dot"], theta_ddot=s["theta_ddot"],
            u_knots=np.asarray(self.control.values()),
            N=s["N"], f_s=s["f_s"], cost=self.cost, final_state=s["y_T"],
            min_N=float(np.min(s["N"])), max_friction_ratio=float(np.max(s["ratio"])),
            converged=self.converged, feasible=self.feasible, status=self.status,
            violation=self.violation, kkt=self.kkt, iterations=self.iterations,
            evaluations=self.evaluations, wall_time=self.wall_time, message=self.message,
            history=dict(cost=self.history.f, violation=self.history.violation), **extra,
            start_costs=self.start_costs, start_converged=self.start_converged,
        )


def _starts(man: Manoeuvre, K: int, starts: int, seed: int, free_mu: bool):
    n = man.model.n
    rng = np.random.default_rng(seed)
    z = np.concatenate([np.zeros((1, K * n)), 0.1 * rng.standard_normal((starts - 1, K * n))])
    if free_mu:
        z = np.concatenate([z, np.ones((starts, 1))], axis=1)  # mu = 1: a generous envelope
    return z


def _progress_printer(enabled, start, starts):
    if not enabled:
        return None
    if enabled is not True:
        return enabled
    import sys

    def show(k, info):
        if k % 10 == 0:
            print(f"  start {start + 1}/{starts}, iteration {k + 1}: J = {info['f']:.6g}, "
                  f"violation = {info['violation']:.2e}", file=sys.stderr, flush=True)

    return show


def _run(man: Manoeuvre, *, free_mu: bool, knots: int, starts: int, seed: int, n_grid: int,
         rtol: float, tol: float, kkt_tol: float, max_iter: int, progress, x0=None) -> Optimum:
    if not isinstance(man, Manoeuvre):
        raise ValueError(f"manoeuvre = {type(man).__name__} is not allowed: it must be a "
                         "rollax.robot.Manoeuvre")
    K = check_integer("knots", knots, 2, 512)
    starts = check_integer("starts", starts, 1, 4096)
    n_grid = check_integer("n_grid", n_grid, 2)
    max_iter = check_integer("max_iter", max_iter, 1)
    check_range("rtol", rtol, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range("tol", tol, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range("kkt_tol", kkt_tol, 0.0, math.inf, lo_open=True)
    prob = _Problem(man, K, n_grid, free_mu, float(rtol), 16384)
    x0 = _starts(man, K, starts, seed, free_mu) if x0 is None else np.atleast_2d(x0)
    t_start = time.perf_counter()
    results = [_nlp.minimize(_fun, xs, prob, tol=tol, kkt_tol=kkt_tol, max_iter=max_iter,
                             progress=_progress_printer(progress, i, len(x0)))
               for i, xs in enumerate(x0)]
    # between the grid's times a constraint can dip below its bound: check on an 8x finer
    # grid and, if it does by more than tol, solve again from there on a 4x finer grid (once)
    for i, r in enumerate(results):
        fine = dataclasses.replace(prob, n_grid=8 * (n_grid - 1) + 1)
        _, h, g = _fun(jnp.asarray(r.x), fine)
        if r.feasible and max(float(jnp.max(g)), float(jnp.max(jnp.abs(h)))) > tol:
            finer = dataclasses.replace(prob, n_grid=4 * (n_grid - 1) + 1)
            results[i] = _nlp.minimize(_fun, r.x, finer, tol=tol, kkt_tol=kkt_tol,
                                       max_iter=max_iter,
                                       progress=_progress_printer(progress, i, len(x0)))
    wall = time.perf_counter() - t_start
    feasible = np.array([r.feasible for r in results])
    costs = np.array([float(prob.control(jnp.asarray(r.x)).effort()) for r in results])
    score = np.where(feasible, [r.f for r in results], np.inf)
    best = int(np.argmin(score)) if feasible.any() else \
        int(np.argmin([r.violation for r in results]))
    res = results[best]
    x = jnp.asarray(res.x)
    control = prob.control(x)
    status = "converged" if res.converged else ("not converged" if res.feasible else "infeasible")
    return Optimum(
        manoeuvre=man, control=control, cost=float(control.effort()),
        mu=float(prob.mu(x)), converged=res.converged, feasible=res.feasible, status=status,
        violation=res.violation, kkt=res.kkt, iterations=res.iterations,
        evaluations=res.evaluations, wall_time=wall, message=res.message,
        start_costs=np.where(feasible, costs, np.nan),
        start_converged=np.array([r.converged for r in results]), history=res.history)


def optimize(manoeuvre: Manoeuvre, *, knots: int = 16, starts: int = 1, seed: int = 0,
             n_grid: int = 201, rtol: float = 1e-8, tol: float = 1e-6, kkt_tol: float = 1e-4,
             max_iter: int = 500, progress=False, x0=None) -> Optimum:
    """The least-effort control (``min int_0^T sum_i u_i^2 dt``) of ``manoeuvre`` (module
    docstring), from ``starts`` initial guesses at once (the first: no motion; the others:
    random, from ``seed``); the best feasible start is returned with every start's cost.

    ``knots``: K, the spline intervals of each ``u_i``; ``n_grid``: the times on which the path
    constraints are imposed; ``rtol``: the solver's tolerance; ``tol``: the allowed constraint
    violation; ``kkt_tol``: the allowed (relative) stationarity residual. ``progress=True``
    prints a line every 10 iterations to stderr (or give a callable ``(k, info)``).
    A manoeuvre that cannot be done inside the envelope ends with ``status = "infeasible"``
    and the least violation found.
    """
    return _run(manoeuvre, free_mu=False, knots=knots, starts=starts, seed=seed,
                n_grid=n_grid, rtol=rtol, tol=tol, kkt_tol=kkt_tol, max_iter=max_iter,
                progress=progress, x0=x0)


def least_mu(manoeuvre: Manoeuvre, *, knots: int = 16, starts: int = 1, seed: int = 0,
             n_grid: int = 201, rtol: float = 1e-8, tol: float = 1e-6, kkt_tol: float = 1e-4,
             max_iter: int = 500, progress=False, x0=None) -> Optimum:
    """The least friction coefficient with which ``manoeuvre`` can be done (its ``mu`` is
    ignored; ``N >= n_min`` and the terminal conditions still hold): ``mu`` becomes a variable
    and ``mu + LEAST_MU_EFFORT * J`` is minimised. ``Optimum.mu`` is the answer and
    ``Optimum.cost`` the effort of the control that reaches it."""
    return _run(manoeuvre, free_mu=True, knots=knots, starts=starts, seed=seed,
                n_grid=n_grid, rtol=rtol, tol=tol, kkt_tol=kkt_tol, max_iter=max_iter,
                progress=progress, x0=x0)
