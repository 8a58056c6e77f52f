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
maintained JAX library solves constrained nonlinear programmes. The cost: starts run one after
the other (SciPy's loop is sequential), each with compiled JAX evaluations.

Convergence (reported, and checked after SLSQP stops): the constraint violation
``max(|h|, max(g, 0))`` at most ``tol`` and the KKT residual ``|grad f + J_h^T nu + J_g^T
lam|_inf / max(1, |f|)`` (``lam >= 0`` the inequality multipliers) at most ``kkt_tol``. A
start that stops with the violation above ``tol`` is reported infeasible, with the least
violation met on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

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


@eqx.filter_jit
def _values_and_jacobians(fun, x, args):
    out = fun(x, args)
    jac = jax.jacfwd(lambda x: fun(x, args))(x)
    return out, jac


def _violation(h, g) -> float:
    v = max(float(np.max(np.abs(h), initial=0.0)), float(np.max(g, initial=0.0)))
    return v if np.isfinite(v) else np.inf


def minimize(fun: Callable[[Any, Any], tuple], x0, args: Any = None, *, tol: float = 1e-6,
             kkt_tol: float = 1e-5, max_iter: int = 300,
             progress: Callable[[int, dict], None] | None = None) -> Result:
    """Minimise ``|r|^2`` subject to ``h = 0``, ``g <= 0`` from ``x0`` (module docstring).

    ``fun(x, args) -> (r, h, g)`` must be a pure JAX function, best a module-level one (the
    compiled code is keyed by it; ``args`` is traced, so new problem data reuse it).
    ``progress(k, info)`` is called after every iteration with ``f`` and ``violation``."""
    from scipy.optimize import minimize as scipy_minimize

    cache: dict = {}
    best = dict(v=np.inf, x=None)

    def ev(x):
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            (r, h, g), (Jr, Jh, Jg) = _values_and_jacobians(fun, jnp.asarray(x), args)
            vals = [np.asarray(a) for a in (r, h, g, Jr, Jh, Jg)]
            if not all(np.all(np.isfinite(a)) for a in vals):  # a failed solve: a bad point
                vals = [np.where(np.isfinite(a), a, 1e10) for a in vals]
            cache[key] = vals
            v = _violation(vals[1], vals[2])
            if v < best["v"]:
                best.update(v=v, x=x.copy())
        return cache[key]

    rows = []

    def callback(xk):
        r, h, g = ev(xk)[:3]
        f, v = float(r @ r), _violation(h, g)
        rows.append((f, v))
        if progress is not None:
            progress(len(rows) - 1, dict(f=f, violation=v))

    x0 = np.asarray(x0, dtype=float)
    cons = [dict(type="eq", fun=lambda x: ev(x)[1], jac=lambda x: ev(x)[4])]
    if jax.eval_shape(lambda x: fun(x, args), jnp.asarray(x0))[2].shape[0]:
        cons.append(dict(type="ineq", fun=lambda x: -ev(x)[2], jac=lambda x: -ev(x)[5]))
    res = scipy_minimize(lambda x: float(ev(x)[0] @ ev(x)[0]), x0,
                         jac=lambda x: 2.0 * ev(x)[3].T @ ev(x)[0], constraints=cons,
                         method="SLSQP", callback=callback,
                         options=dict(maxiter=max_iter, ftol=1e-14))
    x = np.asarray(res.x)
    r, h, g, Jr, Jh, Jg = ev(x)
    f, v = float(r @ r), _violation(h, g)
    if v > tol and best["x"] is not None and best["v"] < v:  # report the least violation met
        x = best["x"]
        r, h, g, Jr, Jh, Jg = ev(x)
        f, v = float(r @ r), _violation(h, g)
    p = h.shape[0]
    mult = np.asarray(getattr(res, "multipliers", None) if getattr(res, "multipliers", None)
                      is not None else np.zeros(p + g.shape[0]))
    nu, lam = mult[:p], mult[p:]
    # SciPy's convention: grad f = J_eq^T nu + J_c^T lam with c = -g >= 0
    grad_L = 2.0 * Jr.T @ r - Jh.T @ nu + Jg.T @ lam
    kkt = float(np.max(np.abs(grad_L), initial=0.0)) / max(1.0, abs(f))
    hist = History(*(np.asarray(c) for c in zip(*rows))) if rows else \
        History(np.array([f]), np.array([v]))
    return Result(x=x, f=f, violation=v, kkt=kkt, converged=bool(v <= tol and kkt <= kkt_tol),
                  feasible=bool(v <= tol), iterations=int(res.nit), evaluations=int(res.nfev),
                  message=str(res.message), multipliers_eq=-nu, multipliers_ineq=lam,
                  history=hist)
