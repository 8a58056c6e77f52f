"""What a fit of :func:`rollax.identify` can be trusted for: goodness of fit, whiteness of the
residuals, and profile-likelihood intervals.

* **chi^2** of the weighted residuals with ``dof = residuals - fitted quantities``, its value
  per degree of freedom (~1 for a good fit with the right noise levels) and its p-value
  ``P(chi^2_dof >= chi^2)``.
* **Whiteness**, per observable: the lag-1 autocorrelation of the residuals (``~N(0, 1/n)``
  for white noise; a model that does not follow the data leaves slow, strongly correlated
  residuals, near 1) and the Wald-Wolfowitz runs test's z (signs of the residuals; ``~N(0,
  1)`` for white noise, strongly negative for too few runs).
* **Profile likelihood** (Venzon and Moolgavkar 1988; Raue et al. 2009): for a parameter
  ``theta_i`` fixed at values ``v`` around its estimate, the other fitted quantities are
  fitted again; ``delta chi^2(v) = chi^2(v) - chi^2_min``; the 95 % interval is where it stays
  below 3.84 (the chi^2 quantile with one degree of freedom). Unlike ``+- 1.96`` Gauss-Newton
  standard errors it follows curved, strongly correlated valleys and stops at bounds. Where the
  noise levels were estimated from the same residuals, ``delta chi^2`` is ``F(1, nu)``
  rather than ``chi^2_1`` distributed (``nu`` the degrees of freedom of each noise level's
  estimate), and the level is its 95 % quantile (:func:`profile_level`): 4.35 at ``nu = 20``,
  the t-interval of a linear fit; with 3.84 such intervals cover 93.6 % there.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from rollax._drivers import _lm

CHI2_95 = 3.841458820694124  # the 95 % quantile of chi^2 with 1 degree of freedom


def profile_level(noise_dof: float | None = None) -> float:
    """The rise of chi^2 that ends a 95 % profile interval: 3.84 with the noise levels given,
    the 95 % quantile of ``F(1, noise_dof)`` with them estimated from the residuals (each with
    ``noise_dof`` degrees of freedom; ``t_nu(0.975)^2``, so a linear fit's interval is the
    t-interval)."""
    if noise_dof is None or not math.isfinite(noise_dof):
        return CHI2_95
    from scipy import stats

    return float(stats.f.ppf(0.95, 1, max(float(noise_dof), 1.0)))


POOR_CHI2 = 2.0  # chi^2 per degree of freedom above which a fit with given noise is poor
POOR_LAG1 = 0.5  # |lag-1 autocorrelation| above which residuals are not noise


def goodness(
    r: np.ndarray, shape: tuple[int, int], names: Sequence[str], n_fit: int, J=None
) -> dict:
    """chi^2, dof, chi^2 per dof, p-value and per-observable whiteness of weighted residuals
    ``r`` (the first ``shape[0] * shape[1]`` are the observations ``(samples, observables)``).

    ``J``: the weighted Jacobian of ``r``. The fit itself correlates its residuals: with the
    hat matrix ``H = J (J^T J)^+ J^T``, white noise leaves residuals ``(I - H) e`` whose lag-1
    autocorrelation is about ``-sum_t H_(t,t+1) / sum_t (1 - H_tt)`` (per observable; ~0 on a
    long record, -0.2 to -0.4 on a filmed bounce of 30-60 frames with 11 fitted numbers).
    ``lag1_expected`` holds it, and a fit is judged on ``lag1 - lag1_expected``."""
    r = np.asarray(r, dtype=float)
    from scipy import stats  # here: importing it costs 0.5 s of every `import rollax`

    chi2 = float(r @ r)
    dof = int(r.shape[0] - n_fit)
    per = r[: shape[0] * shape[1]].reshape(shape)
    expected = _fit_lag1(J, shape) if J is not None else np.zeros(shape[1])
    white = {}
    for k, name in enumerate(names):
        white[name] = {
            "lag1": lag1(per[:, k]),
            "lag1_expected": float(expected[k]),
            "runs_z": runs_z(per[:, k]),
        }
    return {
        "chi2": chi2,
        "dof": dof,
        "chi2_per_dof": chi2 / max(dof, 1),
        "p_value": float(stats.chi2.sf(chi2, max(dof, 1))),
        "whiteness": white,
    }


def _fit_lag1(J, shape: tuple[int, int]) -> np.ndarray:
    """The lag-1 autocorrelation that fitting alone gives white noise's residuals, per
    observable (:func:`goodness`): O(rows x parameters), the hat matrix never formed."""
    n, m = shape
    J = np.asarray(J, float)
    if J.ndim != 2 or J.shape[0] < n * m or n < 3 or not np.all(np.isfinite(J)):
        return np.zeros(m)
    A = J[: n * m] @ np.linalg.pinv(J.T @ J)  # rows a_i = J_i M (M from every row)
    J = J[: n * m]
    out = np.zeros(m)
    for k in range(m):
        Jk, Ak = J[k::m], A[k::m]  # the rows of observable k, in time order
        diag = np.einsum("ij,ij->i", Ak, Jk)
        off = np.einsum("ij,ij->i", Ak[:-1], Jk[1:])
        den = float(np.sum(1.0 - diag))
        out[k] = -float(np.sum(off)) / den if den > 0 else 0.0
    return out


def lag1(e: np.ndarray) -> float:
    """Lag-1 autocorrelation ``sum e_i e_(i+1) / sum e_i^2`` (about the mean)."""
    e = np.asarray(e, float) - np.mean(e)
    den = float(e @ e)
    return float(e[1:] @ e[:-1] / den) if den > 0 and e.shape[0] > 2 else math.nan


def runs_z(e: np.ndarray) -> float:
    """The Wald-Wolfowitz runs test's z for the signs of ``e`` (zeros left out)."""
    s = np.sign(np.asarray(e, float))
    s = s[s != 0]
    n1, n2 = int((s > 0).sum()), int((s < 0).sum())
    n = n1 + n2
    if n1 == 0 or n2 == 0:
        return math.nan
    runs = 1 + int(np.sum(s[1:] != s[:-1]))
    mu = 2.0 * n1 * n2 / n + 1.0
    var = (mu - 1.0) * (mu - 2.0) / (n - 1.0)
    return float((runs - mu) / math.sqrt(var)) if var > 0 else math.nan


def poor_fit(diag: dict, *, sigma_given: bool) -> str:
    """Why a fit is poor ('' if it is not): chi^2 per dof above :data:`POOR_CHI2` with the
    noise levels given, or residuals with |lag-1 autocorrelation| above :data:`POOR_LAG1`."""
    why = []
    if sigma_given and diag["chi2_per_dof"] > POOR_CHI2:
        why.append(
            f"chi^2 per degree of freedom = {diag['chi2_per_dof']:.3g} with the noise "
            f"levels given (p = {diag['p_value']:.2g}; a good fit has ~1)"
        )
    for name, w in diag["whiteness"].items():
        expected = w.get("lag1_expected", 0.0)
        if abs(w["lag1"] - expected) > POOR_LAG1:
            why.append(
                f"the residuals of {name} are correlated (lag-1 autocorrelation "
                f"{w['lag1']:.2f}; white noise has {expected:.2f} after the fit)"
            )
    return "; ".join(why)


# the offsets of the profile points, in Gauss-Newton standard errors (a second, wider set on a
# side where the first did not reach the 95 % level)
_GRID = (1.0, 2.5)
_WIDE = (6.0, 9.0, 14.0, 20.0)


def profile(
    x,
    cost_min,
    cov,
    lo,
    hi,
    which: Sequence[int],
    names: Sequence[str],
    rj: Callable,
    cost: Callable | None,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
    cost_atol: float = 0.0,
    report: Callable | None = None,
    level: float = CHI2_95,
) -> dict:
    """Profile likelihoods of the fitted quantities ``which`` (indices into ``x``), all points
    as lanes of one batched LM (:mod:`rollax._drivers._lm`). Each point is fitted from two
    starts, the linear prediction of the conditional optimum, ``x + cov[:, i] / cov[i, i] (v -
    x_i)``, and the optimum with only ``x_i`` moved, and keeps the lower chi^2 (a cost with a
    step, e.g. a filmed spin that jumps at an impact, can hold the first beyond the step).

    Returns ``{name: {"values", "delta_chi2", "interval": (lo, hi), "closed": (bool, bool),
    "estimate", "level"}}``; an end of the interval is ``None`` (and not ``closed``) where delta
    chi^2 stayed below ``level`` (3.84, or :func:`profile_level` of the noise's degrees of
    freedom where the noise was estimated) over the points tried, and is the bound where the
    profile reaches a bound first."""
    x = np.asarray(x, float)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    pts: dict[int, list] = {i: [] for i in which}

    def run(offsets_of):
        lanes, meta = [], []
        for i in which:
            for side, ks in offsets_of(i):
                for k in ks:
                    v = float(np.clip(x[i] + side * k * se[i], lo[i], hi[i]))
                    seen = [p[0] for p in pts[i]] + [s[i] for s, m in zip(lanes, meta) if m == i]
                    if v == x[i] or any(abs(v - u) <= 1e-12 * max(1.0, abs(v)) for u in seen):
                        continue
                    start = x + cov[:, i] / cov[i, i] * (v - x[i])
                    start = np.clip(start, lo, hi)
                    start[i] = v
                    # and a second start with the others held at the optimum: the linear
                    # prediction can cross a step of the cost that the optimum lies against
                    # (a filmed spin jumps at the impact, so chi^2 steps where the impact
                    # time crosses a sample time), and a lane started beyond the step stays
                    # there (a profile point 10-170 too high: an interval end far too near)
                    held = x.copy()
                    held[i] = v
                    lanes += [start, held]
                    meta += [i, i]
        if not lanes:
            return False
        xs = np.stack(lanes)
        fixed = np.zeros_like(xs, bool)
        fixed[np.arange(len(meta)), meta] = True
        # each lane starts near its conditional optimum: a small damping
        out = _lm.solve(
            xs,
            rj,
            cost,
            lo,
            hi,
            fixed=fixed,
            max_iter=max_iter,
            tol=tol,
            cost_atol=cost_atol,
            lam0=1e-6,
            report=report,
            stage="profile",
        )
        # each point is the better of its two lanes (a profile is a minimum over the others)
        for lane in range(0, len(meta), 2):
            i = meta[lane]
            c = [float(out.cost[k]) for k in (lane, lane + 1)]
            c = [v if math.isfinite(v) else math.inf for v in c]
            pts[i].append((float(out.x[lane, i]), 2.0 * (min(c) - cost_min)))
        return True

    run(lambda i: ((-1, _GRID), (1, _GRID)))
    # then, per side: a wider set where the grid stayed below the 95 % level short of a
    # bound; a point at the interpolated crossing where it was crossed (a coarse bracket:
    # a parameter held near a bound by a correlated one has a far narrower profile than its
    # Gauss-Newton error says)
    refined: set = set()
    for _ in range(2):
        res = {i: _interval(x[i], pts[i], lo[i], hi[i], level) for i in which}

        def more(i):
            (a, b), closed = res[i]
            out = []
            for side, end, ok in ((-1, a, closed[0]), (1, b, closed[1])):
                if not ok:
                    out.append((side, _WIDE))
                elif (
                    end is not None
                    and end not in (lo[i], hi[i])
                    and se[i] > 0
                    and (i, side) not in refined
                ):
                    refined.add((i, side))
                    out.append((side, (abs(end - x[i]) / se[i],)))
            return tuple(out)

        if not run(more):
            break
    out = {}
    for i in which:
        (a, b), closed = _interval(x[i], pts[i], lo[i], hi[i], level)
        p = sorted(pts[i] + [(float(x[i]), 0.0)])
        out[names[i]] = {
            "values": [v for v, _ in p],
            "delta_chi2": [d for _, d in p],
            "interval": (a, b),
            "closed": closed,
            "estimate": float(x[i]),
            "level": float(level),
        }
    return out


def _interval(xi, pts, lo, hi, level=CHI2_95):
    """The 95 % interval from profile points ``[(v, delta chi^2)]`` around the estimate: where
    delta chi^2 reaches ``level``."""
    ends, closed = [], []
    for side, bound in ((-1, lo), (1, hi)):
        if xi == bound:  # the estimate on a bound: the interval ends there
            ends.append(float(bound))
            closed.append(True)
            continue
        seq = sorted((p for p in pts if side * (p[0] - xi) > 0), key=lambda p: abs(p[0] - xi))
        prev_v, prev_d = xi, 0.0
        end, ok = None, False
        for v, d in seq:
            if not math.isfinite(d):
                break
            if d >= level:
                # linear in sqrt(delta chi^2), exact for a quadratic profile
                q0, q1, q = math.sqrt(prev_d), math.sqrt(d), math.sqrt(level)
                f = (q - q0) / (q1 - q0) if q1 > q0 else 1.0
                end, ok = prev_v + f * (v - prev_v), True
                break
            prev_v, prev_d = v, max(d, 0.0)
        if (
            not ok
            and seq
            and math.isfinite(bound)
            and abs(seq[-1][0] - bound) <= 1e-12 * max(1.0, abs(bound))
            and math.isfinite(seq[-1][1])
        ):
            end, ok = float(bound), True  # below the level up to the bound: the box ends it
        ends.append(end)
        closed.append(ok)
    return (ends[0], ends[1]), (closed[0], closed[1])
