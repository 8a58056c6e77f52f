"""The mu = 1 (top-right) panels of Figs. 11-13 of the rim paper: the ball may slip (Sect. 5.2).

    python experiments/rim_slip/run.py [--grid NB NW] [--out DIR] [--smoke]

For each section (w2 = 35, 65, 105 1/s; w3 = 10 1/s; beta in [0.8, 1.8]; w1 in [-20, 20]) it
computes the no-slip map and the mu = 1 map with the hybrid rolling/slipping sweep of
``rollax.models.slip`` (delta = 1e-6 m/s), and the mu = 1 map again with delta = 1e-8 m/s to show that
the onset slip speed does not matter. Writes, beside this script (or into ``--out``):
<fig>_mu1.npz (outcome, switches, t_slip, t_end), <fig>.png (no slip | mu = 1 | slipping
time), panels.png and summary.json (counts, timings, differences, the checks of the paper's
observations). ``--smoke``: a 3 x 3 grid, for tests/test_scripts_smoke.py.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import rollax
from rollax.analysis.basin import OUTCOMES, PERIODIC, Axis, basin_map, preset
from rollax.plot import OUTCOME_COLOURS
from rollax.models.slip import SlipSettings

rollax.configure()  # one JAX CPU device per core, compile cache (before any JAX work)

HERE = Path(__file__).resolve().parent


def _neighbours(mask: np.ndarray) -> np.ndarray:
    """Cells 4-adjacent to ``mask`` but not in it."""
    n = np.zeros_like(mask)
    n[1:] |= mask[:-1]
    n[:-1] |= mask[1:]
    n[:, 1:] |= mask[:, :-1]
    n[:, :-1] |= mask[:, 1:]
    return n & ~mask


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, nargs=2, default=(360, 240))
    ap.add_argument("--out", type=Path, default=HERE, help="folder to write into (default: here)")
    ap.add_argument("--smoke", action="store_true", help="a 3 x 3 grid (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.grid = (3, 3)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    cmap = ListedColormap(OUTCOME_COLOURS)
    summary = {}
    fig_all, axes_all = plt.subplots(2, 3, figsize=(12, 6.4), dpi=100, sharex=True, sharey=True)
    for col, fig in enumerate(("fig11", "fig12", "fig13")):
        rim, kw = preset(fig, "none")
        kw["x"] = Axis("beta", 0.8, 1.8, args.grid[0])
        kw["y"] = Axis("omega1", -20.0, 20.0, args.grid[1])
        runs = {}
        for name, slip in (
            ("noslip", None),
            ("mu1", SlipSettings(delta=1e-6)),
            ("mu1_delta1e-8", SlipSettings(delta=1e-8)),
        ):
            if fig == "fig11" or slip is None:
                basin_map(rim, progress=False, slip=slip, **kw)  # warm (compile) for the timing
            t0 = time.perf_counter()
            runs[name] = basin_map(rim, progress=False, slip=slip, **kw)
            runs[name + "_seconds"] = time.perf_counter() - t0
        a, b, c = runs["noslip"], runs["mu1"], runs["mu1_delta1e-8"]
        np.savez_compressed(
            out / f"{fig}_mu1.npz",
            outcome=b.outcome,
            switches=b.switches,
            t_slip=b.t_slip.astype(np.float32),
            t_end=b.t_end.astype(np.float32),
            outcome_delta1e8=c.outcome,
            outcome_noslip=a.outcome,
            beta=b.x.values,
            omega1=b.y.values,
            omega2=b.fixed["omega2"],
            omega3=b.fixed["omega3"],
            mu=1.0,
        )
        per_a, per_b = a.outcome == PERIODIC, b.outcome == PERIODIC
        nb_a, nb_b = _neighbours(per_a), _neighbours(per_b)
        s = dict(
            counts_noslip=a.counts(),
            counts_mu1=b.counts(),
            seconds_noslip=round(runs["noslip_seconds"], 3),
            seconds_mu1=round(runs["mu1_seconds"], 3),  # fig12/13: includes new kernel shapes
            slowdown=round(runs["mu1_seconds"] / runs["noslip_seconds"], 2),
            changed_by_slip=int(np.sum(a.outcome != b.outcome)),
            changed_fraction=round(float(np.mean(a.outcome != b.outcome)), 4),
            periodic_kept=int(np.sum(per_a & per_b)),
            periodic_lost=int(np.sum(per_a & ~per_b)),
            periodic_new=int(np.sum(~per_a & per_b)),
            neighbours_of_periodic_noslip={
                OUTCOMES[k]: int(np.sum(a.outcome[nb_a] == k)) for k in range(len(OUTCOMES))
            },
            neighbours_of_periodic_mu1={
                OUTCOMES[k]: int(np.sum(b.outcome[nb_b] == k)) for k in range(len(OUTCOMES))
            },
            slipped=int(np.sum(b.switches > 0)),
            max_switches=int(b.switches.max()),
            delta_1e6_vs_1e8_differ=int(np.sum(b.outcome != c.outcome)),
            delta_1e6_vs_1e8_switches_differ=int(np.sum(b.switches != c.switches)),
        )
        summary[fig] = s
        print(fig, json.dumps(s), flush=True)

        ext = (0.8, 1.8, -20.0, 20.0)
        f, axs = plt.subplots(1, 3, figsize=(13, 4.0), dpi=100, sharey=True)
        for ax, m, title in ((axs[0], a, "no slipping"), (axs[1], b, r"$\mu$ = 1")):
            ax.imshow(
                m.outcome.T,
                origin="lower",
                extent=ext,
                aspect="auto",
                cmap=cmap,
                vmin=-0.5,
                vmax=len(OUTCOMES) - 0.5,
                interpolation="nearest",
            )
            ax.set_title(f"{fig}, w2 = {b.fixed['omega2']:g}: {title}", fontsize=9)
            ax.set_xlabel(r"$\beta$ [rad]")
        axs[0].set_ylabel(r"$\omega_1$ [1/s]")
        im = axs[2].imshow(
            np.log10(np.maximum(b.t_slip, 1e-4)).T,
            origin="lower",
            extent=ext,
            aspect="auto",
            cmap="magma",
            vmin=-4,
            vmax=1,
            interpolation="nearest",
        )
        axs[2].set_title(r"$\mu$ = 1: log10 total slipping time [s]", fontsize=9)
        axs[2].set_xlabel(r"$\beta$ [rad]")
        f.colorbar(im, ax=axs[2])
        axs[1].legend(
            handles=[
                Patch(color=cc, label=n)
                for cc, n in zip(OUTCOME_COLOURS, OUTCOMES)
                if np.any(b.outcome == OUTCOMES.index(n)) or n in ("periodic", "in", "out")
            ],
            fontsize=7,
            loc="upper right",
        )
        f.tight_layout()
        f.savefig(out / f"{fig}.png")
        plt.close(f)
        for row, m in enumerate((a, b)):
            axes_all[row, col].imshow(
                m.outcome.T,
                origin="lower",
                extent=ext,
                aspect="auto",
                cmap=cmap,
                vmin=-0.5,
                vmax=len(OUTCOMES) - 0.5,
                interpolation="nearest",
            )
            axes_all[row, col].set_title(
                f"w2 = {b.fixed['omega2']:g}, " + ("no slip" if row == 0 else r"$\mu$ = 1"),
                fontsize=9,
            )
    for ax in axes_all[1]:
        ax.set_xlabel(r"$\beta$ [rad]")
    for ax in axes_all[:, 0]:
        ax.set_ylabel(r"$\omega_1$ [1/s]")
    fig_all.legend(
        handles=[Patch(color=cc, label=n) for cc, n in zip(OUTCOME_COLOURS, OUTCOMES)],
        loc="lower center",
        ncol=6,
        fontsize=8,
    )
    fig_all.tight_layout(rect=(0, 0.05, 1, 1))
    fig_all.savefig(out / "panels.png")
    plt.close(fig_all)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
