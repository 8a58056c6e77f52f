"""The least friction a disk manoeuvre needs, nominal and robust, against its time (issue 59).

The disk of Sect. 5 turned by ``-pi`` with ``N >= 0.5`` (4 knots, 51 grid times), for each
manoeuvre time ``T``: the nominal least mu (``least_mu``) and the robust one over the internal
masses and their rails within ``+- 3 %`` (``least_mu(..., uncertain=...)``, 4 samples and the
worst-case rounds), each with its status. The robust control is then validated on 2,000
fresh parameter sets at its own least mu (``validate``: the failure rate, which should be 0).

Writes summary.json, table.md and least_mu.png (both curves against T, the price between
them).

    python experiments/robot_least_mu_robust/run.py [--out DIR] [--smoke]

``--smoke``: two times, 200 fresh samples.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from rollax.robot import disk_manoeuvre, least_mu, validate

HERE = os.path.dirname(os.path.abspath(__file__))
TIMES = (6.0, 8.0, 10.0, 12.0)
UNCERTAIN = {"masses": 0.03, "rails": 0.03}


def figure(out_dir, rows):
    """least_mu.png: both curves against T; a robust point whose worst-case search still found
    a violation (not converged) is drawn open, with its fresh failure rate written beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    T = [r["T"] for r in rows]
    ax.plot(T, [r["nominal_mu"] if r["nominal_status"] == "converged" else None for r in rows],
            "o-", label="nominal masses and rails (converged)")  # fmt: skip
    rob = [(r["T"], r["robust_mu"], r) for r in rows if r["robust_mu"] is not None]
    ax.plot([t for t, _, _ in rob], [m for _, m, _ in rob], "-", color="C1")
    for t, m, r in rob:
        ok = r["robust_status"] == "converged"
        ax.plot(t, m, "s", color="C1", mfc="C1" if ok else "white")
        ax.annotate(f"fails {100 * r['fresh_failures']:.1f} %", (t, m), textcoords="offset points",
                    xytext=(4, 6), fontsize=7)  # fmt: skip
    ax.plot([], [], "s", color="C1", mfc="white",
            label="robust, masses and rails +- 3 % (open: not converged)")  # fmt: skip
    ax.set_xlabel("manoeuvre time T [s]")
    ax.set_ylabel("least friction coefficient mu [-]")
    ax.set_title("Disk turned by -pi, N >= 0.5 (4 knots): the friction it needs\n"
                 "(fails: share of 2,000 fresh parameter sets where the contact fails: slip, N < N_min)", fontsize=9)  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "least_mu.png"), dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    times, fresh = (TIMES, 2000) if not args.smoke else ((8.0, 10.0), 200)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    t_all = time.perf_counter()
    for T in times:
        man = disk_manoeuvre(T=T, n_min=0.5)
        t0 = time.perf_counter()
        rob = least_mu(man, knots=4, n_grid=51, uncertain=UNCERTAIN, samples=4, progress=False)
        nom = rob.robust["nominal"] if rob.robust else None
        if nom is None:  # (the robust run stops where the nominal one fails: say how)
            nom = least_mu(man, knots=4, n_grid=51, progress=False)
        v = validate(rob, n=fresh, seed=3) if rob.feasible else None
        row = {
            "T": T,
            "nominal_mu": None if nom is None else float(nom.mu),
            "nominal_status": None if nom is None else nom.status,
            "robust_mu": float(rob.mu) if rob.feasible else None,
            "robust_status": rob.status,
            "message": rob.message,
            "price": None if nom is None or not rob.feasible else float(rob.mu / nom.mu),
            "fresh_failures": None if v is None else float(v.rate),
            "fresh_upper_95": None if v is None else float(v.upper),
            "seconds": time.perf_counter() - t0,
        }
        rows.append(row)
        print(f"T = {T:g}: nominal mu {row['nominal_mu']}, robust {row['robust_mu']} "
              f"({rob.status}), fresh failures {row['fresh_failures']} "
              f"({row['seconds']:.0f} s)", flush=True)  # fmt: skip
    summary = {"uncertain": UNCERTAIN, "knots": 4, "n_grid": 51, "samples": 4, "fresh": fresh,
               "rows": rows, "wall_time_s": time.perf_counter() - t_all}  # fmt: skip
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    lines = ["| T [s] | nominal least mu | robust least mu | price | status | fresh failures |",
             "| ---: | ---: | ---: | ---: | --- | ---: |"]  # fmt: skip
    fmt = lambda v, f="{:.4f}": "-" if v is None else f.format(v)  # noqa: E731
    for r in rows:
        lines.append(f"| {r['T']:g} | {fmt(r['nominal_mu'])} | {fmt(r['robust_mu'])} | "
                     f"{fmt(r['price'], '{:.3f}')} | {r['robust_status']} | "
                     f"{fmt(r['fresh_failures'])} (<= {fmt(r['fresh_upper_95'])}) |")  # fmt: skip
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

    figure(args.out, rows)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
