"""Projected Levenberg-Marquardt on a batch of lanes (starts, profile points) for
:func:`rollax.identify`.

Each lane is its own least-squares problem ``min 1/2 |r(x)|^2`` over a box, with some
components held fixed (a profile point fixes one parameter). The residuals and Jacobians of
all lanes come from one batched call per iteration (``rj(xs)``: one ``vmap`` of
:func:`rollax.solve`), the damped steps are solved on the host per lane (a few unknowns).

The damping follows the gain ratio (Nielsen 1999: ``lambda *= max(1/3, 1 - (2 rho - 1)^3)``
after a step, doubling factors after a failure), which crosses the narrow curved valleys of
correlated rates far faster than a fixed /3, x4 rule (measured: 100+ iterations -> ~10 on 2 s
of rim data). A lane is done when a step lowers its cost by less than ``tol`` relative
(converged), when no damping gives descent (converged at machine precision), or after
``max_iter`` iterations (not converged).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np


@dataclasses.dataclass
class Lanes:
    """The state of every lane after :func:`solve`."""

    x: np.ndarray  # (L, n)
    cost: np.ndarray  # (L,) 1/2 |r|^2 (inf: the model cannot be evaluated there)
    r: np.ndarray  # (L, m)
    J: np.ndarray  # (L, m, n)
    converged: np.ndarray  # (L,) bool
    iterations: np.ndarray  # (L,) int
    lam: np.ndarray  # (L,) the damping at the end (a continued fit starts from it)


def _finite_cost(r: np.ndarray) -> np.ndarray:
    c = 0.5 * np.sum(r * r, axis=-1)
    return np.where(np.isfinite(c), c, np.inf)


def solve(
    xs,
    rj: Callable,
    cost: Callable | None,
    lo,
    hi,
    *,
    fixed=None,
    max_iter: int = 100,
    tol: float = 1e-10,
    cost_atol: float = 0.0,
    lam0: float | np.ndarray = 1e-3,
    report: Callable[[dict], None] | None = None,
    stage: str = "",
) -> Lanes:
    """Run projected LM on every lane of ``xs`` ``(L, n)``. ``rj(xs) -> (r (L, m), J (L, m,
    n))``, ``cost(xs) -> (L,)`` (``None``: trials are evaluated with ``rj``, whose Jacobian
    an accepted step then keeps: one compiled function instead of two, and with few
    rejections as cheap); ``lo``, ``hi`` ``(n,)`` bounds; ``fixed`` ``(L, n)`` bool:
    components a lane keeps at their start values. ``report`` gets one record per iteration
    (of the best lane). ``lam0``: the starting damping (per lane or one; a fit continued
    from a converged one starts low: the curved valleys of correlated rates took ~10 small
    steps per window from 1e-3). A lane has converged when a step lowers its cost by less than ``tol``
    relative or ``cost_atol`` absolute (the cost is chi^2 / 2: 1e-3 is far below what moves
    an estimate by a fraction of its standard error)."""
    x = np.array(xs, dtype=float)
    L, n = x.shape
    fixed = np.zeros((L, n), bool) if fixed is None else np.asarray(fixed, bool)
    r, J = (np.array(a) for a in rj(x))
    c = _finite_cost(r)
    lam = np.broadcast_to(np.asarray(lam0, float), (L,)).copy()
    nu = np.full(L, 2.0)
    done = ~np.isfinite(c)  # a lane whose start cannot be evaluated takes no steps
    converged = np.zeros(L, bool)
    iters = np.zeros(L, int)
    for it in range(1, max_iter + 1):
        active = ~done
        if not active.any():
            break
        x_try = x.copy()
        pred = np.zeros(L)
        for i in np.flatnonzero(active):
            # what the undamped Gauss-Newton step could gain at most, by the linear model:
            # below cost_atol, the lane has converged (no trial needed: trials that only
            # raise the damping were half of all evaluations)
            if cost_atol > 0 and _step(r[i], J[i], x[i], lo, hi, fixed[i], 1e-12)[1] < cost_atol:
                done[i] = converged[i] = True
                iters[i] = it
                continue
            step, pred[i] = _step(r[i], J[i], x[i], lo, hi, fixed[i], lam[i])
            x_try[i] = x[i] + step
        active = ~done
        if not active.any():
            break
        if cost is None:  # the trial's Jacobian too: an accepted step needs no second call
            r_try, J_try = (np.asarray(a) for a in rj(x_try))
            c_try = _finite_cost(r_try)
        else:
            c_try = np.asarray(cost(x_try), dtype=float)
            c_try = np.where(np.isfinite(c_try), c_try, np.inf)
        moved = np.zeros(L, bool)
        for i in np.flatnonzero(active):
            iters[i] = it
            if c_try[i] < c[i] and pred[i] > 0:
                gain = (c[i] - c_try[i]) / pred[i]
                lam[i] *= max(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
                nu[i] = 2.0
                rel = (c[i] - c_try[i]) / max(c[i], 1e-300)
                x[i] = x_try[i]
                moved[i] = True
                if rel < tol or c[i] - c_try[i] < cost_atol:
                    done[i] = converged[i] = True
            else:
                lam[i] *= nu[i]
                nu[i] *= 2.0
                if lam[i] >= 1e16:  # no descent left at machine precision
                    done[i] = converged[i] = True
        if cost is None:
            r[moved], J[moved] = r_try[moved], J_try[moved]  # pyright: ignore[reportPossiblyUnboundVariable]  (set above: cost is None)
            c = np.where(moved, c_try, c)
        elif moved.any():
            r_new, J_new = (np.asarray(a) for a in rj(x))
            r[moved], J[moved] = r_new[moved], J_new[moved]
            c = np.where(moved, _finite_cost(r), c)
        if report is not None:
            b = int(np.argmin(c))
            g = J[b].T @ r[b]
            d = np.sqrt(np.maximum(np.einsum("mi,mi->i", J[b], J[b]), 1e-300))
            report(
                {
                    "stage": stage,
                    "iteration": it,
                    "cost": float(c[b]),
                    "lambda": float(lam[b]),
                    "lanes": int(active.sum()),
                    "gradient": float(np.max(np.abs(g) / d)) if n else 0.0,
                }
            )
    return Lanes(x=x, cost=c, r=r, J=J, converged=converged, iterations=iters, lam=lam)


def _step(r, J, x, lo, hi, fixed, lam) -> tuple[np.ndarray, float]:
    """One damped Gauss-Newton step of a lane (Marquardt's diagonal scaling), kept in the box;
    returns the step and the cost decrease the linear model predicts for it."""
    g = J.T @ r
    A = J.T @ J
    free = ~fixed & ~(((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0)))
    d = np.maximum(np.diag(A), 1e-30 * max(1.0, float(np.diag(A).max(initial=0.0))))
    try:
        step = _bounded_step(A + lam * np.diag(d), g, x, lo, hi, free)
    except np.linalg.LinAlgError:
        return np.zeros_like(x), 0.0
    step = np.clip(x + step, lo, hi) - x
    step[fixed] = 0.0
    pred = -(g @ step) - 0.5 * step @ A @ step
    return step, float(pred) if math.isfinite(pred) else 0.0


def _bounded_step(M, g, x, lo, hi, free):
    """The damped Gauss-Newton step ``M step = -g`` with the box kept: a component that would
    leave it is put on its bound and the others are solved again (clipping the full step
    instead stalls in the valley of two correlated rates, one of them at its bound)."""
    free = free.copy()
    step = np.zeros_like(x)
    for _ in range(x.shape[0]):
        fixed = ~free
        rhs = -g[free] - M[np.ix_(free, fixed)] @ step[fixed]
        step[free] = np.linalg.solve(M[np.ix_(free, free)], rhs) if free.any() else step[free]
        x_try = x + step
        out = free & ((x_try < lo) | (x_try > hi))
        if not out.any():
            break
        step[out] = np.clip(x_try[out], lo[out], hi[out]) - x[out]
        free &= ~out
    return step
