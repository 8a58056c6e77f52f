"""Experiment design on the rim (issue 60): which throw to film to learn k_d and k_r.

The Table 1 ball, filmed for 3 s at 60 frames/s with camera noise (1 mm, 1 mm, 2 mrad). The
hidden truths: k_d and k_r uniform in [0, 0.05] /s (seeds 0..n-1).

* **One designed record** (``rim_study``): a pilot throw (random, feasible) is filmed and
  fitted; at its estimate 200 throws near steady motions (``rim_starts``) are ranked by
  D-optimality (``design_rim``); the best and 20 random feasible throws are filmed and
  fitted. Per truth: the designed record's errors and standard errors against the median of
  the random ones, its correlation, and its predicted standard errors against its fit's.
* **Sequential study** (``sequential_design``): 5 rounds from a vague prior (the first
  designed at k_d = k_r = 0.02), 100 fresh throws proposed each round, designed against
  random, on the first 6 truths; the knowledge is combined by precision.

Writes summary.json, table.md, one_record.png (designed against random standard errors and
errors, per truth) and sequential.png (the standard errors per round).

    python experiments/design_rim/run.py [--out DIR] [--smoke]

``--smoke``: 2 truths, 40 throws, 4 random records, 2 sequential rounds on 1 truth.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import rollax
from rollax.analysis.design import CAMERA_SIGMA, rim_starts, rim_study, rim_times
from rollax.models.rim import Rim
from rollax.systems.rim import RimTracked

HERE = os.path.dirname(os.path.abspath(__file__))
PARAMS = ("k_d", "k_r")


def _truth(seed):
    rng = np.random.default_rng(seed)
    return Rim(k_d=float(rng.uniform(0.0, 0.05)), k_r=float(rng.uniform(0.0, 0.05)))


def one_record(n_truths, n_throws, n_random):
    rows = []
    for k in range(n_truths):
        t0 = time.perf_counter()
        out = rim_study(_truth(k), rim_starts(n_throws, seed=k), n_random=n_random, seed=k)
        D, R = out["designed"], out["random"]
        row = {
            "truth": {n: float(getattr(_truth(k), n)) for n in PARAMS},
            "designed": {
                "error": D["error"].tolist(),
                "se_fit": D["se_fit"].tolist(),
                "se_predicted": D["se_predicted"].tolist(),
                "corr": D["corr_fit"],
                "status": D["status"],
            },
            "random_median": {
                "abs_error": np.median([np.abs(r["error"]) for r in R], 0).tolist(),
                "se_fit": np.median([r["se_fit"] for r in R], 0).tolist(),
                "abs_corr": float(np.median([abs(r["corr_fit"]) for r in R])),
            },
            "random_converged": sum(r["status"] == "converged" for r in R),
            "n_random": len(R),
            "feasible": int(out["design"].feasible.sum()),
            "seconds": time.perf_counter() - t0,
        }
        rows.append(row)
        print(f"truth {k}: designed se {np.round(D['se_fit'], 6)} vs random median "
              f"{np.round(row['random_median']['se_fit'], 6)} ({row['seconds']:.0f} s)",
              flush=True)  # fmt: skip
    return rows


def sequential(n_truths, rounds, n_throws):
    out = []
    t = rim_times(3.0, 60.0)

    def propose(rng, k):
        return rim_starts(n_throws, seed=int(rng.integers(2**31)))

    for k in range(n_truths):
        res = {}
        for strategy in ("design", "random"):
            s = rollax.sequential_design(
                RimTracked(Rim(k_d=0.02, k_r=0.02)), PARAMS, propose, t, observe="camera",
                sigma=CAMERA_SIGMA, truth=RimTracked(_truth(k)), rounds=rounds,
                strategy=strategy, seed=k, progress=False,
            )  # fmt: skip
            res[strategy] = {
                "std_errors": s.std_errors.tolist(),
                "errors": s.errors.tolist(),
                "corr": [float(c[0, 1]) for c in s.correlations],
                "statuses": s.statuses,
            }
        out.append(res)
        print(f"sequential truth {k}: last se designed {np.round(res['design']['std_errors'][-1], 6)}"
              f" random {np.round(res['random']['std_errors'][-1], 6)}", flush=True)  # fmt: skip
    return out


def figures(out_dir, rows, seq):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 4.2))
    for j, n in enumerate(PARAMS):
        d = np.array([r["designed"]["se_fit"][j] for r in rows])
        m = np.array([r["random_median"]["se_fit"][j] for r in rows])
        de = np.array([abs(r["designed"]["error"][j]) for r in rows])
        me = np.array([r["random_median"]["abs_error"][j] for r in rows])
        ax[0].loglog(m, d, "o", label=f"{n}: standard error")
        ax[1].loglog(me, de, "o", label=f"{n}: |error|")
    for a, what in zip(ax, ("standard error", "|error|")):
        lim = [min(a.get_xlim()[0], a.get_ylim()[0]), max(a.get_xlim()[1], a.get_ylim()[1])]
        a.plot(lim, lim, "k--", lw=0.8, label="equal")
        a.set_xlabel(f"median of 20 random records: {what} [1/s]")
        a.set_ylabel(f"designed record: {what} [1/s]")
        a.legend(fontsize=8)
    fig.suptitle(f"One designed record against random ones, {len(rows)} hidden truths "
                 "(3 s at 60 Hz, noise 1 mm / 1 mm / 2 mrad, D-optimal)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "one_record.png"), dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(1, 2, figsize=(10, 4.2))
    for j, n in enumerate(PARAMS):
        for strategy, c in (("design", "C0"), ("random", "C3")):
            se = np.array([s[strategy]["std_errors"] for s in seq])[:, :, j]
            r = np.arange(1, se.shape[1] + 1)
            for row in se:
                ax[j].semilogy(r, row, color=c, alpha=0.25, lw=0.8)
            ax[j].semilogy(r, np.median(se, 0), color=c, lw=2.5, marker="o",
                           label=f"{strategy} (median of {se.shape[0]} truths)")  # fmt: skip
        ax[j].set_xticks(np.arange(1, se.shape[1] + 1))
        ax[j].set_xlabel("round (one 3 s record each)")
        ax[j].set_ylabel(f"standard error of {n} [1/s]")
        ax[j].legend(fontsize=8)
    fig.suptitle("Sequential design from a vague prior: error bars per round", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "sequential.png"), dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    n_truths, n_throws, n_random, seq_truths, rounds = 20, 200, 20, 6, 5
    if args.smoke:
        n_truths, n_throws, n_random, seq_truths, rounds = 2, 40, 4, 1, 2
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    rows = one_record(n_truths, n_throws, n_random)
    seq = sequential(seq_truths, rounds, max(n_throws // 2, 20))
    ratio_se = np.array([np.array(r["designed"]["se_fit"]) / r["random_median"]["se_fit"]
                         for r in rows])  # fmt: skip
    ratio_err = np.array([np.abs(r["designed"]["error"]) / r["random_median"]["abs_error"]
                          for r in rows])  # fmt: skip
    agree = np.array([np.max(np.abs(np.array(r["designed"]["se_predicted"])
                                    / r["designed"]["se_fit"] - 1)) for r in rows])  # fmt: skip
    last = {
        s: np.median([np.prod(q[s]["std_errors"][-1]) for q in seq]) for s in ("design", "random")
    }
    summary = {
        "setup": {
            "duration_s": 3.0,
            "hz": 60.0,
            "sigma": list(CAMERA_SIGMA),
            "criterion": "D",
            "throws": n_throws,
            "random_records": n_random,
            "truths": n_truths,
            "sequential_truths": seq_truths,
            "rounds": rounds,
        },  # fmt: skip
        "one_record": rows,
        "sequential": seq,
        "aggregate": {
            "median_se_ratio_designed_over_random": np.median(ratio_se, 0).tolist(),
            "median_error_ratio_designed_over_random": np.median(ratio_err, 0).tolist(),
            "designed_error_below_random_median": (ratio_err < 1).sum(0).tolist(),
            "max_predicted_vs_fit_se_deviation": float(agree.max()),
            "median_abs_corr_designed": float(
                np.median([abs(r["designed"]["corr"]) for r in rows])
            ),
            "median_abs_corr_random": float(
                np.median([r["random_median"]["abs_corr"] for r in rows])
            ),
            "designed_converged": sum(r["designed"]["status"] == "converged" for r in rows),
            "sequential_last_round_median_se_product": last,
        },
        "wall_time_s": time.perf_counter() - t0,
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    a = summary["aggregate"]
    lines = [
        "| quantity | k_d | k_r |",
        "| --- | --- | --- |",
        "| median SE ratio, designed / random median | "
        + " | ".join(f"{v:.3f}" for v in a["median_se_ratio_designed_over_random"])
        + " |",
        "| median abs error ratio, designed / random median | "
        + " | ".join(f"{v:.3f}" for v in a["median_error_ratio_designed_over_random"])
        + " |",
        f"| truths where the designed error is below the random median (of {n_truths}) | "
        + " | ".join(str(v) for v in a["designed_error_below_random_median"])
        + " |",
        f"| median correlation of k_d and k_r (designed; random) | "
        f"{a['median_abs_corr_designed']:.5f} | {a['median_abs_corr_random']:.5f} |",
        "",
        f"Predicted against fitted standard errors of the designed records: at most "
        f"{a['max_predicted_vs_fit_se_deviation'] * 100:.1f} % apart. Sequential, last round, "
        f"median SE(k_d) SE(k_r): designed {last['design']:.3g}, random {last['random']:.3g} /s^2.",
    ]
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    figures(args.out, rows, seq)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
