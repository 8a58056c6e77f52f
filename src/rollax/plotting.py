"""Figures of rollax results (matplotlib, Agg backend: files, never windows).

The plotting layer draws data it is given (arrays, or a result object such as a
:class:`rollax.basin.BasinMap`); it computes no physics and imports no analysis module.
"""

from __future__ import annotations

import os
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from rollax.outcomes import OUTCOMES  # noqa: E402

# periodic, in, out, undecided, failed, chattering
OUTCOME_COLOURS = ("#2ca02c", "#1f77b4", "#d62728", "#bbbbbb", "#000000", "#ff7f0e")
LABELS = {"beta": r"$\beta$ [rad]", "omega1": r"$\omega_1$ [1/s]", "omega2": r"$\omega_2$ [1/s]",
          "omega3": r"$\omega_3$ [1/s]"}


def plot_basin(bmap, path: str | os.PathLike, title: str | None = None,
               steady: Sequence[float] | None = None) -> None:
    """Draw the outcome map of a :class:`rollax.basin.BasinMap` with a legend and the steady
    motions of the section marked (when the section is a (beta, omega1) plane).

    ``steady``: the angles beta0 of those steady motions (default: ``bmap.steady_betas()``).
    """
    xs, ys = bmap.x.values, bmap.y.values
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    ax.pcolormesh(xs, ys, bmap.outcome.T, cmap=ListedColormap(OUTCOME_COLOURS), vmin=-0.5,
                  vmax=len(OUTCOMES) - 0.5, shading="nearest", rasterized=True)
    counts = bmap.counts()
    handles = [Patch(color=c, label=f"{n} ({counts[n]})") for c, n in zip(OUTCOME_COLOURS, OUTCOMES)
               if counts[n] > 0]
    if {bmap.x.name, bmap.y.name} == {"beta", "omega1"}:
        for b0 in bmap.steady_betas() if steady is None else steady:
            pt = (b0, 0.0) if bmap.x.name == "beta" else (0.0, b0)
            ax.plot(*pt, marker="*", color="yellow", markeredgecolor="k", markersize=14)
        handles.append(plt.Line2D([], [], marker="*", color="yellow", markeredgecolor="k",
                                  linestyle="", markersize=12, label="steady motion (47)"))
    ax.set_xlabel(LABELS[bmap.x.name])
    ax.set_ylabel(LABELS[bmap.y.name])
    fixed = ", ".join(f"{LABELS[k].split(' ')[0]} = {v:g}" for k, v in bmap.fixed.items())
    diss = ""
    if float(bmap.rim.k_d) > 0 or float(bmap.rim.k_r) > 0:
        diss = f", $k_d$ = {float(bmap.rim.k_d):g}, $k_r$ = {float(bmap.rim.k_r):g} 1/s"
    ax.set_title(title or f"Ball on the rim: {fixed}{diss}", fontsize=10)
    ax.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.85)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
