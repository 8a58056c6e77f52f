"""Bouncing penny (Clark & Bloch, Sect. VI): Figs. 1-4, Fig. 5 and finite-time Lyapunov exponents.

Writes into this folder:
  fig1_elastic_circle.png, fig2_plastic_circle.png, fig3_elastic_ellipse.png, fig4_plastic_ellipse.png
      first 20 impacts from x = y = theta = 0, phi = pi/2, theta_dot = 10, phi_dot = 0.2 (Table I)
  sequences.json   impact times, post-impact states and energies of those four runs
  fig5_<law>_<table>.png   100 initial conditions (theta_dot, phi_dot perturbed by < 0.005) at
      several times
  ftle.json        FTLE of the impact map (autodiff through the impact sequence), elastic vs
      plastic, circle vs ellipse
  summary.md       the numbers in a table
Run: python experiments/penny/run.py [--out DIR] [--smoke]   (about 2 minutes on 2 CPU cores)
``--out``: the folder written into (default this one); ``--smoke``: 2 impacts and 2 samples, for
tests/test_scripts_smoke.py.
"""

import argparse
import json
import os

from rollax.analysis.penny import chaos, paper_billiard, sequence_records, simulate
from rollax.plot import plot_penny_chaos, plot_penny_sequence

HERE = os.path.dirname(os.path.abspath(__file__))
FIGS = {
    ("elastic", "circle"): "fig1",
    ("plastic", "circle"): "fig2",
    ("elastic", "ellipse"): "fig3",
    ("plastic", "ellipse"): "fig4",
}


def main(out: str = HERE, smoke: bool = False) -> None:
    n_impacts = 2 if smoke else 20
    seqs = {}
    for (law, table), fig in FIGS.items():
        b = paper_billiard(table, law, 1.0, 1e-6)
        s0 = b.penny.state()
        seq = simulate(b, s0, n_impacts)
        seqs[f"{law}_{table}"] = {"figure": fig, **sequence_records(b, s0, seq)}
        plot_penny_sequence(
            b,
            s0,
            b.path(s0, seq, 60),
            seq.pre_states,
            os.path.join(out, f"{fig}_{law}_{table}.png"),
            f"Fig. {fig[-1]}: {law} impacts, {table} table, first {n_impacts} impacts",
        )
    with open(os.path.join(out, "sequences.json"), "w") as fh:
        json.dump(seqs, fh, indent=1)
    if smoke:
        result = chaos(n_samples=2, seed=0, n_impacts=2, n_ftle=2)
    else:
        result = chaos(n_samples=100, seed=0)
    plot_penny_chaos(result, out)
    res = result.summary
    with open(os.path.join(out, "ftle.json"), "w") as fh:
        json.dump(res, fh, indent=1)

    lines = [
        "# Bouncing penny: results of run.py",
        "",
        "## First 20 impacts (Sect. VI-A)",
        "",
        "| run | status | impacts done | t_1 (s) | t_20 or last (s) | E_0 (J) | E after last (J) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in seqs.items():
        done = [r for r in s["impacts"] if r["status"] == "impact"]
        lines.append(
            f"| {name} | {s['status']} | {s['n_completed']} | {done[0]['time']:.12f} | "
            f"{done[-1]['time']:.12f} | {s['initial_energy']:.6e} | {done[-1]['energy']:.6e} |"
        )
    lines += [
        "",
        "## FTLE of the impact map (per impact; per second), 100 impacts",
        "",
        "| case | nominal /impact | nominal /s | impacts used | ensemble mean /impact | std |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, c in res["cases"].items():
        lines.append(
            f"| {name} | {c['ftle_per_impact_nominal']:.4f} | {c['ftle_per_second_nominal']:.4f} | "
            f"{c['impacts_used_nominal']} | {c['ftle_per_impact_ensemble_mean']:.4f} | "
            f"{c['ftle_per_impact_ensemble_std']:.4f} |"
        )
    lines += [
        "",
        "FTLE after n impacts (nominal state): "
        + "; ".join(
            f"{k}: "
            + ", ".join(f"n={n}: {v:.3f}" for n, v in c["ftle_per_impact_nominal_after_n"].items())
            for k, c in res["cases"].items()
        ),
        "",
        "RMS spread of the ensemble's positions (m) at the Fig. 5 times: "
        + "; ".join(
            f"{k} at t={c['times']}: "
            + ", ".join("-" if v is None else f"{v:.2g}" for v in c["position_spread_rms_m"])
            for k, c in res["cases"].items()
        ),
        "",
        "Reading: elastic/circle has an FTLE that decays like log(n)/n (regular motion); elastic/ellipse",
        "keeps about 0.5 per impact and its ensemble spreads over the whole table by t = 30 s (chaos).",
        "Plastic runs converge, the normal approach shrinking by about e_p = 1/3 per impact, to a penny",
        "spinning in place whose ends graze the edge; after 15 impacts the approach is below the glancing",
        "tolerance 1e-6 and the sequence stops with status 'glancing'. Their positive FTLE comes from",
        "the grazing singularity of the impact time (d tau ~ 1/approach), not from mixing: the ensemble",
        "spread stays at about 1e-3 m over the 6 s shown.",
        "",
        "Reproducibility: at about 0.5 per impact, a rounding difference of 1e-13 in the impact times",
        "grows to O(1) by impact 50-60 on the elastic ellipse, so its nominal 100-impact FTLE is one",
        "draw from the ensemble's distribution (mean and std above), not a digit-stable number: moving",
        "the flights from the closed-form search to rollax.solve (2026-11-25) changed it from 0.611 to",
        "0.464, and the ensemble mean from 0.521 to 0.539 (std 0.11). The other cases agree to 1e-9.",
    ]
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=HERE, help="folder to write into (default: beside this script)"
    )
    ap.add_argument("--smoke", action="store_true", help="2 impacts, 2 samples (the smoke test)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    main(args.out, args.smoke)
