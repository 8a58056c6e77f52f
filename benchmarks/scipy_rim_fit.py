"""Independent reference fit of the rim's dissipation rates and initial state (numpy + SciPy).

Fits ``k_d``, ``k_r`` (any subset; the others fixed) and the initial state
``(beta, w1, w2, w3, alpha)`` to camera records ``(d, z, alpha)`` by
``scipy.optimize.least_squares`` ("trf", rates >= 0), residuals weighted by the noise levels,
with the exact Jacobian from forward sensitivities: the variational equations
``S' = (df/dz) S + df/dp`` integrated with the state by ``solve_ivp`` (DOP853). The fit grows
over windows of the record (t <= 0.5, 1, 2, ... s, then all of it), each started from the
previous solution. Standard errors from ``(J^T J)^-1`` at the solution (the noise levels are
known, so no chi-square rescaling).

The model is the numpy one of ``tests/rim_records.py`` (checked against rollax's equations in
``tests/test_rim_records.py``); nothing here uses rollax or JAX. It is the reference that
``rollax.identify`` / ``fit_rim`` is compared against.

    python benchmarks/scipy_rim_fit.py [seed ...]      # default seeds 0 1 2

``--smoke``: record 0 cut to 1 s (tests/test_scripts_smoke.py); ``--out DIR`` is accepted and
unused (the results are printed only).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares


def _load_records():
    name = "rim_records"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parent.parent / "tests" / "rim_records.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


rr = _load_records()
RATES = ("k_d", "k_r")
STATE = ("beta", "w1", "w2", "w3", "alpha")


def initial_guess(t, values, k_r=0.01, span=0.2):
    """(beta, w1, w2, w3, alpha) at t[0] from cubic fits of beta and alpha over the first
    ``span`` s of the record."""
    t = np.asarray(t, float)
    m = t <= t[0] + span
    tt = t[m] - t[0]
    d, zc, al = values[m, 0], values[m, 1], values[m, 2]
    beta = np.arctan2(zc, rr.R - d)
    cb = np.polynomial.polynomial.polyfit(tt, beta, 3)
    ca = np.polynomial.polynomial.polyfit(tt, al, 3)
    b, db, ddb = cb[0], cb[1], 2 * cb[2]
    s, c = math.sin(b), math.cos(b)
    D = rr.R - rr.rho * c
    r, j, g = rr.r, rr.j, rr.g
    w1 = rr.rho / r * db
    w3 = -ca[1] * D / r
    dw1 = rr.rho / r * ddb
    w2 = (
        (r * w3**2 * s / D - g * c / (r * (1 + j)) - k_r * w1 - dw1)
        * (1 + j)
        * D
        / (j * r * w3 * c)
    )
    return np.array([b, w1, w2, w3, ca[0]])


class _Model:
    """Residuals and their Jacobian for parameters p = (fitted rates..., y0)."""

    def __init__(self, t, values, sigma, fit, fixed, rtol, atol):
        self.t, self.values, self.sigma = t, values, np.asarray(sigma, float)
        self.fit = tuple(fit)
        self.ifit = [RATES.index(n) for n in self.fit]
        self.fixed = np.array([fixed.get(n, 0.0) for n in RATES], float)
        self.nk = len(self.fit)
        self.np = self.nk + 5
        self.rtol, self.atol = rtol, atol
        self.nfev = self.njev = 0
        self._cache = None

    def rates(self, p):
        k = self.fixed.copy()
        k[self.ifit] = p[: self.nk]
        return k

    def _aug(self, t, u, k_d, k_r):
        y = u[:5]
        S = u[5:].reshape(5, self.np)
        dS = rr.jac(y, k_d, k_r) @ S
        if self.nk:
            dS[:, : self.nk] += rr.jac_rates(y)[:, self.ifit]
        return np.concatenate([rr.rhs(t, y, k_d, k_r), dS.ravel()])

    def solve(self, p, n):
        """Residuals (3n,) and Jacobian (3n, np) on the first n samples."""
        key = (n, p.tobytes())
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        k_d, k_r = self.rates(p)
        S0 = np.zeros((5, self.np))
        S0[:, self.nk :] = np.eye(5)
        u0 = np.concatenate([p[self.nk :], S0.ravel()])
        ts = self.t[:n] - self.t[0]
        if ts[-1] > 0:
            sol = solve_ivp(
                self._aug,
                (0.0, ts[-1]),
                u0,
                method="DOP853",
                t_eval=ts,
                rtol=self.rtol,
                atol=self.atol,
                args=(k_d, k_r),
            )
            if sol.status != 0:
                raise RuntimeError(sol.message)
            U = sol.y.T
        else:
            U = u0[None]
        y = U[:, :5]
        S = U[:, 5:].reshape(-1, 5, self.np)
        beta = y[:, 0]
        pred = np.stack([rr.R - rr.rho * np.cos(beta), rr.rho * np.sin(beta), y[:, 4]], 1)
        res = ((pred - self.values[:n]) / self.sigma).ravel()
        # d(d, z, alpha)/dy: rows (rho sin b, 0..), (rho cos b, 0..), (0, 0, 0, 0, 1)
        Jm = np.empty((n, 3, self.np))
        Jm[:, 0] = (rr.rho * np.sin(beta))[:, None] * S[:, 0]
        Jm[:, 1] = (rr.rho * np.cos(beta))[:, None] * S[:, 0]
        Jm[:, 2] = S[:, 4]
        Jm /= self.sigma[None, :, None]
        J = Jm.reshape(3 * n, self.np)
        self._cache = (key, res, J)
        return res, J

    def fun(self, p, n):
        self.nfev += 1
        return self.solve(p, n)[0]

    def jac(self, p, n):
        self.njev += 1
        return self.solve(p, n)[1]


def scipy_fit(
    t,
    values,
    sigma,
    *,
    fit=("k_d", "k_r"),
    y0_guess=None,
    windows=(0.5, 1, 2, 3.5, 5, 7.5, 11, 16),
    fixed=None,
    rates_guess=0.01,
    rtol=1e-10,
    atol=1e-10,
    tol=1e-10,
    verbose=False,
) -> dict:
    """Least-squares fit of the rates ``fit`` and the initial state to a camera record.

    ``t`` (n,), ``values`` (n, 3) = (d, z, alpha), ``sigma`` (3,) their noise levels. Rates not
    in ``fit`` are held at ``fixed[name]`` (default 0). ``y0_guess``: the initial state to start
    from (default: :func:`initial_guess` from the first 0.2 s). Returns ``dict(values,
    std_errors, names, wall_time, chi2, nfev, njev, dof, cov, success)`` with ``names`` =
    fitted rates then beta, w1, w2, w3, alpha (the state at t[0]).
    """
    start = time.perf_counter()
    t = np.asarray(t, float)
    values = np.asarray(values, float)
    fit = tuple(fit)
    for name in fit:
        if name not in RATES:
            raise ValueError(f"fit: {name!r} is not one of {RATES}")
    model = _Model(t, values, sigma, fit, dict(fixed or {}), rtol, atol)
    y0 = initial_guess(t, values) if y0_guess is None else np.asarray(y0_guess, float)
    p = np.concatenate([np.full(len(fit), rates_guess), y0])
    lo = np.concatenate([np.zeros(len(fit)), np.full(5, -np.inf)])
    hi = np.full(p.size, np.inf)
    ends = [w for w in windows if t[0] + w < t[-1]] + [None]
    for w in ends:
        n = t.size if w is None else int(np.searchsorted(t, t[0] + w, side="right"))
        final = w is None
        p = np.maximum(p, lo + 1e-12 * (lo == 0))  # strictly feasible start for trf
        ls = least_squares(
            model.fun,
            p,
            jac=model.jac,
            bounds=(lo, hi),
            method="trf",
            x_scale="jac",
            args=(n,),
            ftol=tol if final else 1e-8,
            xtol=tol if final else 1e-8,
            gtol=tol if final else 1e-8,
            max_nfev=200,
        )
        p = ls.x
        if verbose:
            print(
                f"  window {'all' if final else w} s ({n} samples): chi2/dof "
                f"{2 * ls.cost / (3 * n - p.size):.3f}, nfev {ls.nfev}, "
                f"{time.perf_counter() - start:.1f} s",
                flush=True,
            )
    res, J = model.solve(p, t.size)
    cov = np.linalg.pinv(J.T @ J)
    return {
        "values": p,
        "std_errors": np.sqrt(np.diag(cov)),
        "names": fit + STATE,
        "wall_time": time.perf_counter() - start,
        "chi2": float(res @ res),
        "nfev": model.nfev,
        "njev": model.njev,
        "dof": res.size - p.size,
        "cov": cov,
        "success": bool(ls.success),
    }


def _main(seeds, **record_kw):
    for seed in seeds:
        t0 = time.perf_counter()
        rec = rr.make_record(seed, **record_kw)
        gen = time.perf_counter() - t0
        print(
            f"record {seed}: {rec['t'].size} samples, {rec['t_end']:.2f} s"
            f"{' (separated)' if rec['separated'] else ''}, generated in {gen:.2f} s"
        )
        out = scipy_fit(rec["t"], rec["values"], rec["sigma"], verbose=True)
        truth = np.concatenate([[rec["k_d"], rec["k_r"]], rec["y0"]])
        print(
            f"  fit: {out['wall_time']:.1f} s, nfev {out['nfev']}, njev {out['njev']}, "
            f"chi2/dof {out['chi2'] / out['dof']:.3f}"
        )
        for name, tv, v, se in zip(out["names"], truth, out["values"], out["std_errors"]):
            print(
                f"  {name:6s} truth {tv:+.6f}  est {v:+.6f} +- {se:.1e}  ({(v - tv) / se:+.2f} SE)"
            )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seeds", type=int, nargs="*", help="records to fit (default 0 1 2)")
    ap.add_argument("--out", default=None, help="unused: the results are printed only")
    ap.add_argument("--smoke", action="store_true", help="record 0 cut to 1 s (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        _main(args.seeds or [0], t_max=1.0)
    else:
        _main(args.seeds or [0, 1, 2])
