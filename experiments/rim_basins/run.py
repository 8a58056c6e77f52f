"""Rolling panels of Figs. 11-13 of the rim paper: no dissipation, drilling (k_d = 0.02 1/s) and
rolling resistance (k_r = 0.02 1/s), 360 x 240 starts each, plus the period of periodic rolling
(it grows without bound at the separatrix-type boundaries, Sect. 5.1).

    python experiments/rim_basins/run.py [--grid NB NW] [--out DIR] [--smoke]

Writes, beside this script (or into ``--out``): <fig>_<dissipation>.png and .npz (outcome,
t_end, recontact, period), panels.png (all nine), periods.png and summary.json. ``--smoke``: a
3 x 3 grid, for tests/test_scripts_smoke.py.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import rollax
from rollax.analysis.basin import OUTCOMES, PERIODIC, Axis, basin_map, preset
from rollax.plot import OUTCOME_COLOURS, plot_basin

rollax.configure()  # one JAX CPU device per core, compile cache (before any JAX work)

HERE = Path(__file__).resolve().parent


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

    summary = {}
    maps = {}
    for fig in ("fig11", "fig12", "fig13"):
        for diss in ("none", "drilling", "rolling"):
            rim, kw = preset(fig, diss)
            kw["x"] = Axis("beta", 0.8, 1.8, args.grid[0])
            kw["y"] = Axis("omega1", -20.0, 20.0, args.grid[1])
            t0 = time.perf_counter()
            m = basin_map(rim, progress=False, **kw)
            dt = time.perf_counter() - t0
            maps[fig, diss] = m
            name = f"{fig}_{diss}"
            plot_basin(m, out / f"{name}.png")
            np.savez_compressed(
                out / f"{name}.npz",
                outcome=m.outcome,
                t_end=m.t_end.astype(np.float32),
                recontact=m.recontact,
                period=m.period.astype(np.float32),
                beta=m.x.values,
                omega1=m.y.values,
                omega2=m.fixed["omega2"],
                omega3=m.fixed["omega3"],
                k_d=float(rim.k_d),
                k_r=float(rim.k_r),
            )
            summary[name] = dict(
                counts=m.counts(), seconds=round(dt, 2), max_t_end=float(np.max(m.t_end))
            )
            print(name, summary[name], flush=True)

    # what happens to the formerly periodic starts under dissipation (Sect. 5.3.2)
    for fig in ("fig11", "fig12", "fig13"):
        per = maps[fig, "none"].outcome == PERIODIC
        for diss in ("drilling", "rolling"):
            o = maps[fig, diss].outcome[per]
            summary[f"{fig}_{diss}"]["formerly_periodic"] = {
                OUTCOMES[k]: int(np.sum(o == k)) for k in range(len(OUTCOMES)) if np.any(o == k)
            }

    cmap = ListedColormap(OUTCOME_COLOURS)
    fig_, axes = plt.subplots(3, 3, figsize=(12, 10), dpi=80, sharex=True, sharey=True)
    for i, fig in enumerate(("fig11", "fig12", "fig13")):
        for k, diss in enumerate(("none", "drilling", "rolling")):
            m = maps[fig, diss]
            ax = axes[i, k]
            ax.pcolormesh(
                m.x.values,
                m.y.values,
                m.outcome.T,
                cmap=cmap,
                vmin=-0.5,
                vmax=len(OUTCOMES) - 0.5,
                shading="nearest",
                rasterized=True,
            )
            ax.set_title(f"{fig}: $\\omega_2$ = {m.fixed['omega2']:g}, {diss}", fontsize=9)
            if i == 2:
                ax.set_xlabel(r"$\beta$ [rad]")
            if k == 0:
                ax.set_ylabel(r"$\omega_1$ [1/s]")
    from matplotlib.patches import Patch

    fig_.legend(
        handles=[Patch(color=c, label=n) for c, n in zip(OUTCOME_COLOURS, OUTCOMES)],
        loc="lower center",
        ncol=5,
    )
    fig_.tight_layout(rect=(0, 0.04, 1, 1))
    fig_.savefig(out / "panels.png")
    plt.close(fig_)

    fig_, axes = plt.subplots(1, 3, figsize=(13, 4), dpi=80)
    for ax, fig in zip(axes, ("fig11", "fig12", "fig13")):
        m = maps[fig, "none"]
        im = ax.pcolormesh(
            m.x.values,
            m.y.values,
            np.log10(m.period.T),
            shading="nearest",
            cmap="viridis",
            rasterized=True,
        )
        ax.set_title(f"{fig}: log10 period [s] of periodic rolling", fontsize=9)
        ax.set_xlabel(r"$\beta$ [rad]")
        ax.set_ylabel(r"$\omega_1$ [1/s]")
        fig_.colorbar(im, ax=ax)
    fig_.tight_layout()
    fig_.savefig(out / "periods.png")
    plt.close(fig_)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
