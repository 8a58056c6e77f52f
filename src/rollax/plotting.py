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


# ------------------------------------------------------------------------ bouncing penny
def _table_outline(ax, billiard) -> None:
    u = np.linspace(0, 2 * np.pi, 400)
    ax.plot(float(billiard.table.a) * np.cos(u), float(billiard.table.b) * np.sin(u), "k-", lw=1.2)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")


def plot_penny_sequence(billiard, state0, dense, pre_states, path: str | os.PathLike,
                        title: str) -> None:
    """Figs. 1-4 of the penny paper: the contact point's path between impacts ``dense``
    (``(n_flights, n_points, >= 2)``, e.g. ``billiard.path(state0, seq, 60)``), the penny at
    each impact (``pre_states``, NaN rows skipped) and the table edge."""
    dense = np.asarray(dense)
    fig, ax = plt.subplots(figsize=(4.6, 5.2), dpi=100)
    _table_outline(ax, billiard)
    n = dense.shape[0]
    cmap = plt.get_cmap("viridis")
    for k in range(n):
        ax.plot(dense[k, :, 0], dense[k, :, 1], "-", color=cmap(k / max(n - 1, 1)), lw=1.0)
    pre = np.asarray(pre_states)
    ok = np.isfinite(pre[:, 0])
    R = float(billiard.penny.R)
    for st in pre[ok]:
        e = R * np.array([np.cos(st[3]), np.sin(st[3])])
        ax.plot([st[0] - e[0], st[0] + e[0]], [st[1] - e[1], st[1] + e[1]], "r-", lw=2.0)
    ax.plot(float(state0[0]), float(state0[1]), "ko", ms=4)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_penny_ensemble(billiard, positions, times, path: str | os.PathLike, title: str) -> None:
    """Fig. 5 of the penny paper: an ensemble's positions ``(n_samples, len(times), 2)`` at
    several times, one panel per time (NaN positions are left out and counted)."""
    pos = np.asarray(positions)
    fig, axes = plt.subplots(1, len(times), figsize=(2.6 * len(times), 3.2), dpi=100)
    for j, ax in enumerate(np.atleast_1d(axes)):
        _table_outline(ax, billiard)
        ax.plot(pos[:, j, 0], pos[:, j, 1], ".", ms=3, color="C3")
        n_ok = int(np.sum(np.isfinite(pos[:, j, 0])))
        ax.set_title(f"t = {times[j]:g} s" + ("" if n_ok == pos.shape[0] else f" ({n_ok} valid)"), fontsize=9)
        ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_penny_chaos(chaos, out: str | os.PathLike) -> list[str]:
    """The four Fig. 5 panels of a :func:`rollax.penny.chaos` result, ``fig5_<law>_<table>.png``
    in ``out``; returns their paths."""
    os.makedirs(out, exist_ok=True)
    n = chaos.summary["n_samples"]
    paths = []
    for name, case in chaos.cases.items():
        law, table = name.split("_")
        path = os.path.join(out, f"fig5_{name}.png")
        plot_penny_ensemble(case.billiard, case.positions, case.times, path,
                            f"{law} impacts, {table} table: {n} initial conditions "
                            f"(theta_dot, phi_dot perturbed < 0.005)")
        paths.append(path)
    return paths
