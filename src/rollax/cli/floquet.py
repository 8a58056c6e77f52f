"""``rollax floquet``: Floquet stability of the linear periodic system (62), Fig. 9.

    rollax floquet [--out DIR] [--n-rho 120 --n-j 80] [--r R --a A --R R --j J]
"""

from __future__ import annotations

import json
import os

import numpy as np


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "floquet",
        help="Floquet multipliers of (62) and the stability map over (rho/R, j) (Fig. 9)",
        description="Monodromy matrix of the 2 pi-periodic system (62) for (w2, w3), its "
        "multipliers for the given ball and rim, and the stability map of Fig. 9.",
    )
    p.add_argument("--out", help="output directory: fig9.png, fig9.npz, floquet_summary.json")
    p.add_argument("--json", action="store_true", help="print the summary JSON (always printed)")
    p.add_argument("--n-rho", type=int, default=120, help="grid points in rho/R")
    p.add_argument("--n-j", type=int, default=80, help="grid points in j")
    p.add_argument("--j-max", type=float, default=1.0, help="largest j of the map")
    p.add_argument("--r", type=float, default=0.12, help="ball radius [m]")
    p.add_argument("--a", type=float, default=0.01, help="rim tube radius [m]")
    p.add_argument("--R", type=float, default=0.225, help="rim major radius [m]")
    p.add_argument("--j", type=float, default=2.0 / 3.0, help="J / (m r^2)")
    p.set_defaults(func=run)


def summary(rim) -> dict:
    """Monodromy matrix, multipliers and stability of (62) for ``rim`` (Props. 7-8)."""
    import jax.numpy as jnp

    from rollax.floquet import FloquetSystem, multipliers_of

    fs = FloquetSystem.from_rim(rim)
    M = np.asarray(fs.monodromy())
    mu = np.asarray(multipliers_of(jnp.asarray(M)))
    tr = float(np.trace(M))
    return {
        "rho_over_R": float(rim.rho / rim.R),
        "j": float(rim.j),
        "monodromy": M.tolist(),
        "trace": tr,
        "det": float(np.linalg.det(M)),
        "multipliers": [[float(m.real), float(m.imag)] for m in mu],
        "abs_multipliers": [float(abs(m)) for m in mu],
        "stable": bool(abs(tr) < 2.0),
    }


def stability_data(n_rho: int, n_j: int, j_max: float = 1.0) -> dict:
    """tr M on the (rho/R, j) grid of Fig. 9 (cell centres, avoiding the excluded edges)."""
    from rollax.floquet import stability_map

    if n_rho < 2 or n_j < 2:
        raise ValueError("--n-rho and --n-j must be >= 2")
    rho_R = (np.arange(n_rho) + 0.5) / n_rho
    j = (np.arange(n_j) + 0.5) / n_j * j_max
    tr = np.asarray(stability_map(rho_R, j))
    return {"rho_over_R": rho_R, "j": j, "trace": tr, "stable": np.abs(tr) < 2.0}


def make_figure(data: dict, summ: dict, a_over_R: float, out: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, y = data["rho_over_R"], data["j"]
    fig, ax = plt.subplots(figsize=(5.6, 4.4), dpi=100)
    ax.contourf(x, y, data["stable"].astype(float), levels=[0.5, 1.5], colors=["0.75"])
    ax.contour(x, y, np.abs(data["trace"]) - 2.0, levels=[0.0], colors="k", linewidths=0.8)
    # physically excluded: rho/R > 1 - a/R (ball centre inside the tube circle) and j > 2/3
    ax.fill_betweenx([0, y.max()], 1 - a_over_R, 1.0, hatch="///", facecolor="none",
                     edgecolor="0.4", lw=0)
    ax.fill_between([0, 1], 2 / 3, y.max(), hatch="\\\\\\", facecolor="none",
                    edgecolor="0.4", lw=0)
    ax.plot(summ["rho_over_R"], summ["j"], "o", mfc="w", mec="C3", ms=8, mew=2)
    ax.text(summ["rho_over_R"] + 0.02, summ["j"] + 0.02, "standard ball", color="C3",
            fontsize=8)
    ax.text(0.99, 0.99, "hatched: outside the physical range\n(j > 2/3 or rho/R > 1 - a/R)",
            transform=ax.transAxes, ha="right", va="top", fontsize=7,
            bbox=dict(facecolor="w", edgecolor="none", alpha=0.8))
    ax.text(0.05, 0.1, "S", fontsize=14, weight="bold")
    ax.text(0.6, 0.4, "U", fontsize=14, weight="bold")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, y.max())
    ax.set_xlabel(r"$\rho/R$")
    ax.set_ylabel(r"$j$")
    ax.set_title("Fig. 9: Floquet stability of (62); grey: |tr M| < 2 (stable)", fontsize=10)
    fig.tight_layout()
    png = os.path.join(out, "fig9.png")
    fig.savefig(png, dpi=100)
    plt.close(fig)
    np.savez_compressed(os.path.join(out, "fig9.npz"), **data)
    return png


def run(args) -> int:
    from rollax.rim import Rim

    rim = Rim(r=args.r, a=args.a, R=args.R, j=args.j)
    summ = summary(rim)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        data = stability_data(args.n_rho, args.n_j, args.j_max)
        make_figure(data, summ, float(rim.a / rim.R), args.out)
        summ["map"] = {
            "n_rho": args.n_rho,
            "n_j": args.n_j,
            "stable_fraction": float(np.mean(data["stable"])),
        }
        with open(os.path.join(args.out, "floquet_summary.json"), "w") as f:
            json.dump(summ, f, indent=2)
    print(json.dumps(summ, indent=2))
    return 0
