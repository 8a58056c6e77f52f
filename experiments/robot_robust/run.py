"""Robust robot control (issue 59): how the nominal and the robust controls of one disk
manoeuvre fare as the floor's friction (or its slope) and the masses grow uncertain.

The disk of Sect. 5 turned by ``-pi`` in ``T = 8`` with ``mu = 0.25`` and ``N >= 0.5``
(splines of 8 intervals, 101 grid times). For each size ``s`` of the friction's uncertainty
(``mu`` within ``0.25 (1 +- s)``, the masses within ``+- 3 %``):

* the robust control (``optimize(..., uncertain=...)``, 16 samples, worst-case rounds);
* both controls' failure rates on 10,000 fresh samples (``validate``, seed 1; the
  optimisation drew with seed 0), with their 95 % upper bounds, and the robust cost's price
  over the nominal one;
* the worst parameter set found for each control (``worst_case``).

Writes summary.json, table.md, failure.png (failure rate and price against the size) and
margins.png (the friction and normal-force margins over time, per unit weight, for both
controls at the nominal parameters and at the robust control's worst set, for the largest
size).

``--vary slope``: the floor's slope is uncertain instead, within ``+- s`` (rise over run) of
level for ``s`` in ``SLOPES``, with mu within ``0.25 (1 +- 0.1)`` and the masses within
``+- 3 %``; the files are named ``slope_summary.json``, ``slope_table.md``,
``slope_failure.png`` and ``slope_margins.png``.

    python experiments/robot_robust/run.py [--out DIR] [--vary mu|slope] [--smoke]

``--smoke``: two sizes, 4 knots, 31 grid times, 60 SQP iterations, 200 fresh samples.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from rollax.robot import disk_manoeuvre, optimize, validate, worst_case

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (0.05, 0.1, 0.2, 0.3)
SLOPES = (0.005, 0.01, 0.02, 0.04)
MASSES = 0.03
MU_WITH_SLOPE = 0.1


def _margins(opt, man, n=801):
    """Friction and normal-force margins over time, per unit weight, of ``opt``'s control
    run on ``man``."""
    o = eqx.tree_at(lambda o: o.manoeuvre, opt, man)
    s = o.sample(n)
    W = float(man.weight)
    mu = float(man.mu)
    N, fs = np.asarray(s["N"]), np.asarray(s["f_s"])
    return np.asarray(s["t"]), (mu * N - fs) / W, (N - float(man.n_min)) / W


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--vary", choices=("mu", "slope"), default="mu")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    slope = args.vary == "slope"
    sizes, knots, n_grid, fresh, max_iter = SLOPES if slope else SIZES, 8, 101, 10_000, 500
    if args.smoke:
        sizes, knots, n_grid, fresh, max_iter = sizes[:2], 4, 31, 200, 60
    prefix = "slope_" if slope else ""
    os.makedirs(args.out, exist_ok=True)
    man = disk_manoeuvre(phi_T=-np.pi, T=8.0, mu=0.25, n_min=0.5)
    rows, keep = [], None
    t_all = time.perf_counter()
    for size in sizes:
        unc = {"mu": size, "masses": MASSES}
        if slope:
            unc = {"mu": MU_WITH_SLOPE, "masses": MASSES, "slope": (-size, size)}
        t0 = time.perf_counter()
        rob = optimize(man, knots=knots, n_grid=n_grid, uncertain=unc, samples=16,
                       max_iter=max_iter, progress=False)  # fmt: skip
        wall = time.perf_counter() - t0
        assert rob.robust is not None, rob.message
        nom = rob.robust["nominal"]
        box = rob.robust["box_object"]
        v_rob = validate(rob, box, n=fresh, seed=1)
        v_nom = validate(nom, box, n=fresh, seed=1)
        w_rob = worst_case(rob, box, seed=7)
        w_nom = worst_case(nom, box, seed=7)
        rows.append(
            dict(
                size=size,
                status=rob.status,
                nominal_cost=nom.cost,
                robust_cost=rob.cost,
                price=rob.robust["price"],
                rounds=len(rob.robust["rounds"]),
                wall_s=wall,
                failure_nominal=v_nom.to_dict(),
                failure_robust=v_rob.to_dict(),
                worst_nominal=w_nom.to_dict(),
                worst_robust=w_rob.to_dict(),
            )
        )
        print(f"{args.vary} +-{size:.3g}: J {nom.cost:.4g} -> {rob.cost:.4g} (x{rob.robust['price']:.3f}, "
              f"{rob.status}, {wall:.0f} s); failures nominal {v_nom.rate:.4f}, robust "
              f"{v_rob.rate:.4f} (<= {v_rob.upper:.4f}); worst found: nominal "
              f"{w_nom.violation:+.2e}, robust {w_rob.violation:+.2e}", flush=True)  # fmt: skip
        keep = (rob, nom, box, w_rob)
    summary = dict(
        manoeuvre="disk of Sect. 5 turned by -pi in T = 8, mu = 0.25, N >= 0.5 (r = g = 1)",
        knots=knots,
        n_grid=n_grid,
        samples=16,
        masses=MASSES,
        varied=args.vary,
        mu_uncertainty=MU_WITH_SLOPE if slope else "the size",
        slope_uncertainty="the size (rise over run)" if slope else "level floor",
        fresh_samples=fresh,
        rows=rows,
        wall_s=time.perf_counter() - t_all,
    )
    with open(os.path.join(args.out, prefix + "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=float)
    with open(os.path.join(args.out, prefix + "table.md"), "w") as fh:
        fh.write(
            ("| slope +- | mu +- " if slope else "| mu +- ")
            + "| masses +- | J nominal | J robust | price | failures nominal | "
            "failures robust (95 % upper) | worst found, robust |\n|---|---|---|---|---|---|---|---|"
            + ("---|\n" if slope else "\n")
        )
        for r in rows:
            fn, fr = r["failure_nominal"], r["failure_robust"]
            first = f"| {r['size']:.3g} | {MU_WITH_SLOPE:.0%} " if slope else f"| {r['size']:.0%} "
            fh.write(
                first + f"| {MASSES:.0%} | {r['nominal_cost']:.4g} | "
                f"{r['robust_cost']:.4g} | {r['price']:.3f} | {fn['rate']:.4f} | "
                f"{fr['rate']:.4f} ({fr['upper']:.4f}) | "
                f"{r['worst_robust']['violation']:+.1e} |\n"
            )
    _figures(rows, keep, args.out, slope)


def _figures(rows, keep, out, slope=False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prefix = "slope_" if slope else ""
    s = np.array([r["size"] for r in rows]) * 100
    what = (
        f"uncertainty of the slope [% grade, +-] (mu +-{MU_WITH_SLOPE:.0%}, masses +-3 %)"
        if slope
        else "uncertainty of mu [% of 0.25] (masses +-3 %)"
    )
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4), dpi=110)
    for key, label, c in (
        ("failure_nominal", "nominal", "#d62728"),
        ("failure_robust", "robust", "#1f77b4"),
    ):
        rate = np.array([r[key]["rate"] for r in rows])
        up = np.array([r[key]["upper"] for r in rows])
        ax[0].errorbar(s, rate, yerr=[np.zeros_like(rate), up - rate], fmt="o-", color=c,
                       capsize=3, label=f"{label} control")  # fmt: skip
    ax[0].set_xlabel(what)
    ax[0].set_ylabel("failure rate (bar: 95 % upper bound)")
    ax[0].legend(fontsize=7)
    ax[1].plot(s, [r["price"] for r in rows], "o-", color="k")
    for x, r in zip(s, rows):  # a robust solve that did not converge is marked, not hidden
        if r["status"] != "converged":
            for a, y in ((ax[0], r["failure_robust"]["rate"]), (ax[1], r["price"])):
                a.annotate(r["status"], (x, y), fontsize=7, color="#1f77b4",
                           xytext=(4, 4), textcoords="offset points")  # fmt: skip
    ax[1].set_xlabel(what.split(" (")[0])
    ax[1].set_ylabel("robust effort / nominal effort")
    fn = rows[0]["failure_robust"]["n"]
    fig.suptitle(f"disk, phi_T = -pi, T = 8, N >= 0.5; {fn} fresh samples per point", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, prefix + "failure.png"))
    plt.close(fig)

    rob, nom, box, w_rob = keep
    worst = box.apply(rob.manoeuvre, jnp.asarray(w_rob.p))
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4), dpi=110)
    for opt, label, c in ((nom, "nominal", "#d62728"), (rob, "robust", "#1f77b4")):
        for man, ls, where in (
            (nom.manoeuvre, "-", "nominal parameters"),
            (worst, "--", "robust's worst set"),
        ):
            t, fm, nm = _margins(opt, man)
            ax[0].plot(t, fm, ls, color=c, lw=1, label=f"{label} control, {where}")
            ax[1].plot(t, nm, ls, color=c, lw=1)
    for a in ax:
        a.axhline(0, color="k", lw=0.6)
        a.set_xlabel("t [sqrt(r/g)]")
    ax[0].set_ylabel("friction margin (mu N - |f_s|) / (M g)")
    ax[1].set_ylabel("normal margin (N - N_min) / (M g)")
    ax[0].legend(fontsize=6)
    size = rows[-1]["size"]
    head = (
        f"slope +- {size:.3g}, mu = 0.25 +- {MU_WITH_SLOPE:.0%}"
        if slope
        else f"mu = 0.25 +- {size:.0%}"
    )
    fig.suptitle(f"{head}, masses +- {MASSES:.0%}; worst set: "
                 + ", ".join(f"{k} {v:.4g}" for k, v in w_rob.params.items()), fontsize=7)  # fmt: skip
    fig.tight_layout()
    fig.savefig(os.path.join(out, prefix + "margins.png"))
    plt.close(fig)


if __name__ == "__main__":
    main()
