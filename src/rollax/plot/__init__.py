"""Figures of rollax results (matplotlib, Agg backend: files, never windows).

The plotting layer draws data it is given (arrays, or a result object such as a
:class:`rollax.analysis.basin.BasinMap`); it computes no physics and imports no analysis module.
"""

from __future__ import annotations

import os
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from rollax.models.outcomes import OUTCOMES  # noqa: E402

# periodic, in, out, undecided, failed, chattering
#: periodic, in, out, undecided, failed, chattering: the Okabe-Ito colours (bluish green, blue,
#: vermillion, grey, black, orange), told apart by readers with any common colour-vision
#: deficiency (the previous green and red were not, for deuteranopes)
OUTCOME_COLOURS = ("#009E73", "#0072B2", "#D55E00", "#BBBBBB", "#000000", "#E69F00")
LABELS = {
    "beta": r"$\beta$ [rad]",
    "omega1": r"$\omega_1$ [1/s]",
    "omega2": r"$\omega_2$ [1/s]",
    "omega3": r"$\omega_3$ [1/s]",
}


#: the units of the rim's parameters, for titles
_RIM_UNITS = {
    "r": "m",
    "a": "m",
    "R": "m",
    "j": "",
    "g": "m/s$^2$",
    "mu": "",
    "m": "kg",
    "k_d": "1/s",
    "k_r": "1/s",
}


def _with_unit(name: str, v: float) -> str:
    """``"$\\omega_2$ = 35 1/s"``: a state component's label (:data:`LABELS`), value and unit."""
    label = LABELS.get(name, name)
    symbol, _, unit = label.partition(" [")
    return f"{symbol} = {v:g}" + (f" {unit.rstrip(']')}" if unit else "")


def rim_parameters(rim, names: Sequence[str] | None = None) -> str:
    """The rim model's parameters with units, one line for a figure: what the figure was
    computed with (``r = 0.12 m, a = 0.01 m, ...``; the friction coefficient as ``mu``);
    ``names``: only these (default: all with a unit in :data:`_RIM_UNITS`)."""
    import dataclasses

    parts = []
    for f in dataclasses.fields(rim):
        if f.name not in _RIM_UNITS or (names is not None and f.name not in names):
            continue
        v = float(getattr(rim, f.name))
        unit = _RIM_UNITS[f.name]
        name = {"mu": r"$\mu$", "k_d": "$k_d$", "k_r": "$k_r$"}.get(f.name, f.name)
        parts.append(f"{name} = {v:.4g}" + (f" {unit}" if unit else ""))
    return ", ".join(parts)


def basin_title(bmap) -> str:
    """The fixed state components, the dissipation rates, every rim parameter that differs
    from :class:`rollax.models.rim.Rim`'s defaults (with units) and, when slipping was simulated, the
    friction coefficient: what a reader needs to know which map this is."""
    import dataclasses

    from rollax.models.rim import Rim

    parts = [_with_unit(k, v) for k, v in bmap.fixed.items()]
    parts.append(rf"$t_{{max}}$ = {float(bmap.t_max):g} s")
    default = Rim()
    shown = {"k_d", "k_r"} if (float(bmap.rim.k_d) > 0 or float(bmap.rim.k_r) > 0) else set()
    for f in dataclasses.fields(Rim):
        v = float(getattr(bmap.rim, f.name))
        if f.name in shown or (f.name != "mu" and v != float(getattr(default, f.name))):
            unit = _RIM_UNITS.get(f.name, "")
            name = {"mu": r"$\mu$", "k_d": "$k_d$", "k_r": "$k_r$"}.get(f.name, f.name)
            parts.append(f"{name} = {v:g}" + (f" {unit}" if unit else ""))
    if getattr(bmap, "slip", None) is not None:
        parts.append(rf"slipping, $\mu$ = {float(bmap.rim.mu):g}")
    return "Ball on the rim: " + ", ".join(parts)


#: the most starts along an axis that a map's figure draws (every k-th beyond that)
MAX_PIXELS = 2000


def _uniform(v) -> bool:
    """Whether the values are evenly spaced (an axis of ``numpy.linspace``)."""
    d = np.diff(np.asarray(v, float))
    return bool(np.all(d > 0) and np.allclose(d, d[0], rtol=1e-9, atol=0))


def plot_basin(
    bmap, path: str | os.PathLike, title: str | None = None, steady: Sequence[float] | None = None
) -> None:
    """Draw the outcome map of a :class:`rollax.analysis.basin.BasinMap` with a legend and the steady
    motions of the section marked (when the section is a (beta, omega1) plane).

    ``steady``: the angles beta0 of those steady motions (default: ``bmap.steady_betas()``).
    """
    xs, ys = bmap.x.values, bmap.y.values
    # a map finer than the figure's pixels is drawn from every k-th start (a strided read of
    # a map in a store: a billion-start map is drawn without loading it)
    kx, ky = max(1, -(-xs.size // MAX_PIXELS)), max(1, -(-ys.size // MAX_PIXELS))
    outcome = np.asarray(bmap.outcome[::kx, ::ky])
    xs, ys = xs[::kx], ys[::ky]
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    cmap, vmin, vmax = ListedColormap(OUTCOME_COLOURS), -0.5, len(OUTCOMES) - 0.5
    if xs.size > 1 and ys.size > 1 and _uniform(xs) and _uniform(ys):
        # an image, not a mesh: a 2000 x 2000 pcolormesh took 400 MB to draw (measured)
        dx, dy = (xs[-1] - xs[0]) / (xs.size - 1), (ys[-1] - ys[0]) / (ys.size - 1)
        ax.imshow(
            outcome.T,
            origin="lower",
            extent=(xs[0] - dx / 2, xs[-1] + dx / 2, ys[0] - dy / 2, ys[-1] + dy / 2),
            aspect="auto",
            interpolation="nearest",
            cmap=cmap,
            vmin=vmin,
            vmax=vmax,
        )
    else:
        ax.pcolormesh(
            xs, ys, outcome.T, shading="nearest", rasterized=True, cmap=cmap, vmin=vmin, vmax=vmax
        )
    counts = bmap.counts()
    handles: list[Artist] = [
        Patch(color=c, label=f"{n} ({counts[n]})")
        for c, n in zip(OUTCOME_COLOURS, OUTCOMES)
        if counts[n] > 0
    ]
    if {bmap.x.name, bmap.y.name} == {"beta", "omega1"}:
        for b0 in bmap.steady_betas() if steady is None else steady:
            pt = (b0, 0.0) if bmap.x.name == "beta" else (0.0, b0)
            ax.plot(*pt, marker="*", color="yellow", markeredgecolor="k", markersize=14)
        handles.append(
            Line2D(
                [],
                [],
                marker="*",
                color="yellow",
                markeredgecolor="k",
                linestyle="",
                markersize=12,
                label="steady motion, eq. (47)",
            )
        )
    ax.set_xlabel(LABELS[bmap.x.name])
    ax.set_ylabel(LABELS[bmap.y.name])
    ax.set_title(title or basin_title(bmap), fontsize=10)
    if kx > 1 or ky > 1:  # say so: the legend's counts are of every start
        ax.text(
            0.01,
            0.01,
            f"drawn: every {kx}th x {ky}th start of {bmap.x.values.size} x {bmap.y.values.size}",
            transform=ax.transAxes,
            fontsize=7,
            va="bottom",
        )
    ax.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.85)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------ bouncing penny
def _table_outline(ax, billiard) -> None:
    table = billiard.table
    if hasattr(table, "a"):  # an ellipse
        u = np.linspace(0, 2 * np.pi, 400)
        ax.plot(float(table.a) * np.cos(u), float(table.b) * np.sin(u), "k-", lw=1.2)
    else:  # a custom table: its edge h(x, y) = 0, drawn as a contour over its diameter
        r = float(table.diameter)
        import jax
        import jax.numpy as jnp

        x, y = np.meshgrid(np.linspace(-r, r, 301), np.linspace(-r, r, 301))
        pts = jnp.stack([x.ravel(), y.ravel()], axis=1)
        h = np.asarray(jax.vmap(table.h)(pts)).reshape(x.shape)
        ax.contour(x, y, h, levels=[0.0], colors="k", linewidths=1.2)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")


def plot_penny_sequence(
    billiard, state0, dense, pre_states, path: str | os.PathLike, title: str
) -> None:
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
        ax.set_title(
            f"t = {times[j]:g} s" + ("" if n_ok == pos.shape[0] else f" ({n_ok} valid)"), fontsize=9
        )
        ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_penny_chaos(chaos, out: str | os.PathLike) -> list[str]:
    """The four Fig. 5 panels of a :func:`rollax.analysis.penny.chaos` result, ``fig5_<law>_<table>.png``
    in ``out``; returns their paths."""
    os.makedirs(out, exist_ok=True)
    n = chaos.summary["n_samples"]
    paths = []
    for name, case in chaos.cases.items():
        law, table = name.split("_")
        path = os.path.join(out, f"fig5_{name}.png")
        plot_penny_ensemble(
            case.billiard,
            case.positions,
            case.times,
            path,
            f"{law} impacts, {table} table: {n} initial conditions "
            f"(theta_dot, phi_dot perturbed < 0.005)",
        )
        paths.append(path)
    return paths


# ------------------------------------------------------ steady motions (rim, Figs. 3-8)
def _steady_axes(ax, title):
    ax.set_xlabel(r"$\beta_0$ [rad]")
    ax.set_ylabel(r"$\omega_{30}$ [1/s]")
    ax.set_title(title, fontsize=10)
    for x in (-np.pi / 2, np.pi / 2):
        ax.axvline(x, color="k", lw=2)
    ax.axhline(0.0, color="k", lw=2)
    ax.set_xlim(-np.pi, np.pi)


def plot_steady_figure(
    n: int,
    d: dict,
    path: str | os.PathLike,
    *,
    rim_mu: float,
    v_throw: float = 10.0,
    regions: dict | None = None,
    omega30_h_min: float | None = None,
    parameters: str | None = None,
) -> None:
    """Figs. 3, 5, 6, 7, 8 of the rim paper from :func:`rollax.analysis.steady.figure_data` ``d``.
    ``parameters``: a line under the plot saying what it was computed with
    (:func:`rim_parameters`).

    ``rim_mu``: the rim's friction coefficient (Fig. 6, 8 titles); ``regions``: the beta0 ranges of
    the realisable regions (Fig. 8, :data:`rollax.analysis.steady.REGIONS`); ``omega30_h_min``: the
    |omega30| minimising h at beta-hat (Fig. 5, :func:`rollax.analysis.steady.h_min_omega3`).
    """
    if n == 5 and omega30_h_min is None:
        raise ValueError(
            "omega30_h_min is needed for Fig. 5 (the |omega30| minimising h at beta-hat: "
            "rollax.analysis.steady.h_min_omega3)"
        )
    B, W = d["beta0"], d["omega30"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=100)
    if n == 3:
        z = d["omega20"]
        lev = np.sign(z) * np.log10(1 + np.abs(z))
        im = ax.pcolormesh(
            B, W, lev, cmap="RdBu_r", vmin=-3, vmax=3, shading="auto", rasterized=True
        )
        cb = fig.colorbar(im, ax=ax)
        cb.set_label(r"sign$(\omega_{20})\log_{10}(1+|\omega_{20}|)$")
        ax.contour(B, W, z, levels=[0.0], colors="k", linestyles=":")
        for x, txt in (
            (-3 * np.pi / 4, "outside\nbelow"),
            (-np.pi / 4, "inside\nbelow"),
            (np.pi / 4, "inside\nabove"),
            (3 * np.pi / 4, "outside\nabove"),
        ):
            ax.text(x, 0.8 * W.max(), txt, ha="center", va="top", fontsize=8)
        ax.plot([-np.pi / 2, np.pi / 2], [0, 0], "o", mfc="w", mec="k", ms=7)
        _steady_axes(
            ax, r"Fig. 3: steady motions (47)-(48), colour = $\omega_{20}$; dotted: $\omega_{20}=0$"
        )
    elif n == 5:
        ax.contourf(B, W, (d["h"] < 0).astype(float), levels=[0.5, 1.5], colors=["0.75"])
        ax.contour(B, W, d["h"], levels=[0.0], colors="k", linewidths=0.8)
        bs, bh = d["beta_star"], d["beta_hat"]
        for x in (-bs, bs):
            ax.axvline(x, color="C3", ls="--", lw=1)
        wh = omega30_h_min
        ax.plot([bh, bh], [wh, -wh], "ko", ms=5)  # pyright: ignore[reportOptionalOperand, reportArgumentType]
        ax.text(bs + 0.05, -0.9 * W.max(), rf"$\beta^*$={bs:.4f}", color="C3", fontsize=8)
        ax.text(bh + 0.05, wh + 3, rf"$\hat\beta$={bh:.4f}", fontsize=8)  # pyright: ignore[reportOptionalOperand]
        ax.text(0.02, 0.03, "grey: S (h<0), white: U", transform=ax.transAxes, fontsize=8)
        _steady_axes(ax, "Fig. 5: stability of the steady motions, h of (54)")
    elif n == 6:
        ax.contourf(
            B, W, (d["margin_rim_mu"] >= 0).astype(float), levels=[0.5, 1.5], colors=["0.8"]
        )
        handles = []
        for i, mu in enumerate(d["mu"]):
            ax.contour(B, W, d["margin"][i], levels=[0.0], colors=[f"C{i}"], linewidths=0.8)
            handles.append(Line2D([], [], color=f"C{i}", lw=0.8, label=rf"$\mu$={mu:g}"))
        ax.contour(
            B, W, d["fall_margin"], levels=[0.0], colors="k", linewidths=1.5, linestyles="--"
        )
        handles.append(
            Line2D([], [], color="k", lw=1.5, ls="--", label=r"$\mu\to\infty$ (falling, (57))")
        )
        ax.legend(handles=handles, loc="lower left", fontsize=7, ncol=2)
        _steady_axes(
            ax,
            rf"Fig. 6: no-slip (56), shaded $\mu$={rim_mu:g}, "
            rf"$\tilde\beta$={d['beta_tilde']:.3f}",
        )
    elif n == 7:
        v = d["v_required"]
        ax.contourf(B, W, (v <= v_throw).astype(float), levels=[0.5, 1.5], colors=["0.8"])
        cs = ax.contour(B, W, v, levels=d["v_levels"], cmap="viridis", linewidths=0.9)
        ax.clabel(cs, fmt="%g m/s", fontsize=7)
        _steady_axes(
            ax, rf"Fig. 7: kinetic-energy bound (59), shaded $v_{{throw}}$={v_throw:g} m/s"
        )
    elif n == 8:
        ok = d["realisable"]
        ax.contourf(B, W, ok.astype(float), levels=[0.5, 1.5], colors=["0.7"])
        ax.contour(
            B, W, np.where(ok, d["omega20"], np.nan), levels=[0.0], colors="k", linestyles=":"
        )
        for name, (lo, hi) in (regions or {}).items():
            sel = ok & (B > lo) & (B < hi) & (W > 0)
            if not sel.any():
                continue
            bc, wc = B[sel].mean(), W[sel].mean()
            ax.text(bc, wc, name, fontsize=12, weight="bold", ha="center", va="center")
            ax.text(bc, -wc, name, fontsize=12, weight="bold", ha="center", va="center")
            for sgn, mk in ((1, "+"), (-1, "−")):
                s2 = sel & (np.sign(d["omega20"]) == sgn)
                if s2.sum() > 20:
                    ax.text(
                        B[s2].mean(), W[s2].mean() + 6, mk, color="C3", fontsize=11, ha="center"
                    )
            if f"argmin_{name}" in d:
                bm, wm = d[f"argmin_{name}"]
                ax.plot([bm, bm], [wm, -wm], "x", color="C0", ms=6)
                ax.text(
                    bm,
                    -wm - 6,
                    f"{d[f'v_min_{name}']:.3f} m/s",
                    fontsize=7,
                    ha="center",
                    color="C0",
                )
        _steady_axes(
            ax,
            rf"Fig. 8: realisable steady motions ($\mu$={rim_mu:g}, "
            rf"$v_{{throw}}$={v_throw:g} m/s); x: minimum throw speed",
        )
    ax.title.set_fontsize(9)
    if parameters:
        fig.text(0.01, 0.005, parameters, fontsize=7, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1) if parameters else (0, 0, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------- Floquet map (rim, Fig. 9)
def plot_floquet_map(
    data: dict,
    summ: dict,
    a_over_R: float,
    path: str | os.PathLike,
    parameters: str | None = None,
) -> None:
    """Fig. 9 of the rim paper: the Floquet stability map ``data`` of
    :func:`rollax.analysis.floquet.stability_data` with the ball of ``summ``
    (:func:`rollax.analysis.floquet.summary`) marked and the unphysical ranges hatched;
    ``parameters``: a line under the plot naming the marked ball (:func:`rim_parameters`)."""
    x, y = data["rho_over_R"], data["j"]
    fig, ax = plt.subplots(figsize=(5.6, 4.4), dpi=100)
    ax.contourf(x, y, data["stable"].astype(float), levels=[0.5, 1.5], colors=["0.75"])
    ax.contour(x, y, np.abs(data["trace"]) - 2.0, levels=[0.0], colors="k", linewidths=0.8)
    # physically excluded: rho/R > 1 - a/R (ball centre inside the tube circle) and j > 2/3
    ax.fill_betweenx(
        [0, y.max()], 1 - a_over_R, 1.0, hatch="///", facecolor="none", edgecolor="0.4", lw=0
    )
    ax.fill_between([0, 1], 2 / 3, y.max(), hatch="\\\\\\", facecolor="none", edgecolor="0.4", lw=0)
    ax.plot(summ["rho_over_R"], summ["j"], "o", mfc="w", mec="C3", ms=8, mew=2)
    ax.text(summ["rho_over_R"] + 0.02, summ["j"] + 0.02, "the ball", color="C3", fontsize=8)
    ax.text(
        0.99,
        0.99,
        "hatched: outside the physical range\n(j > 2/3 or rho/R > 1 - a/R)",
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=7,
        bbox=dict(facecolor="w", edgecolor="none", alpha=0.8),
    )
    ax.text(0.05, 0.1, "S", fontsize=14, weight="bold")
    ax.text(0.6, 0.4, "U", fontsize=14, weight="bold")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, y.max())
    ax.set_xlabel(r"$\rho/R$")
    ax.set_ylabel(r"$j$")
    ax.set_title("Fig. 9: Floquet stability of (62); grey: |tr M| < 2 (stable)", fontsize=10)
    if parameters:
        fig.text(0.01, 0.005, "marked ball: " + parameters, fontsize=7, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1) if parameters else (0, 0, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------ finite contact friction
def plot_friction_law(curves, data: dict, path: str | os.PathLike) -> None:
    """Q_eps and T_eps of an exact law: ``curves = (eps, Q, T)`` and the points of ``data``
    (``eps``, ``Q``, ``T``, ``pressure``), as from :mod:`rollax.analysis.friction`."""
    e, Q, T = curves
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    ax.semilogx(e, Q, label="Q_eps")
    ax.semilogx(e, T, label="T_eps")
    ax.plot(data["eps"], data["Q"], "k.", data["eps"], data["T"], "k.")
    ax.set_xlabel("eps")
    ax.set_title(f"exact law, {data['pressure']} pressure (53)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_friction_fit(
    curves: dict, label: str, path: str | os.PathLike, title: str | None = None
) -> None:
    """Q and T over theta of the exact law (dotted) and a fitted model (``label``); ``title``:
    the pressure and the scaling length rho the fit was made with."""
    th = curves["theta"]
    fig, ax = plt.subplots(1, 2, figsize=(8, 3.4), dpi=100)
    for a, name in ((ax[0], "Q"), (ax[1], "T")):
        a.plot(th, curves[f"{name}_law"], "k:", label="exact")
        a.plot(th, curves[f"{name}_model"], label=label)
        a.set_xlabel(r"$\theta$ [rad] (slip-spin angle)")
        a.set_ylabel(f"{name} (normalised)")
    ax[0].legend()
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_bifurcations(diagram: dict, title: str, path: str | os.PathLike) -> None:
    """w3 of the nontrivial limit directions against the force, with F_T, F_P and the folds
    (:func:`rollax.analysis.friction.bifurcation_diagram`)."""
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    for f, w3 in zip(diagram["force"], diagram["w3"]):
        ax.plot(f, w3, "b.", ms=2)
    ax.axvline(diagram["F_T"], color="purple", ls="--", label="F_T")
    ax.axvline(diagram["F_P"], color="green", ls="--", label="F_P")
    for fo in diagram["folds"]:
        ax.axvline(fo, color="brown", ls=":", label="F_F")
    ax.set_xlabel("F/(mu m g)")
    ax.set_ylabel("w3 of nontrivial limit directions")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_stop(t, u, rho_omega, path: str | os.PathLike, title: str | None = None) -> None:
    """|u| and rho |omega| of a body sliding and spinning to a stop, in the friction models'
    normalised units (m = mu P = R = 1); ``title``: the body, law, force and start."""
    fig, ax = plt.subplots(figsize=(5.4, 3.8), dpi=100)
    ax.plot(t, u, label="|u| (slip speed)")
    ax.plot(t, rho_omega, label=r"$\rho |\omega|$ (spin speed)")
    ax.set_xlabel("t (normalised: m = mu P = R = 1)")
    ax.set_ylabel("speed (normalised)")
    if title:
        ax.set_title(title, fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_identification(
    t,
    data,
    fitted,
    names: Sequence[str],
    units: Sequence[str],
    caption: str,
    fit_path: str | os.PathLike,
    residual_path: str | os.PathLike,
) -> None:
    """Observed data against the fitted model, one panel per observable, and the residuals.

    ``data``, ``fitted``: ``(samples, observables)``; ``caption``: the fitted values and the
    settings, printed on both figures."""
    data, fitted = np.asarray(data), np.asarray(fitted)
    k = len(names)
    for path, resid in ((fit_path, False), (residual_path, True)):
        fig, axes = plt.subplots(k, 1, figsize=(7, 1.9 * k + 1.0), dpi=110, sharex=True)
        axes = np.atleast_1d(axes)
        for i, ax in enumerate(axes):
            if resid:
                ax.plot(t, data[:, i] - fitted[:, i], ".", ms=1.5, color="#1f77b4")
                ax.axhline(0.0, color="k", lw=0.6)
                ax.set_ylabel(f"{names[i]} residual [{units[i]}]")
            else:
                ax.plot(t, data[:, i], ".", ms=1.5, color="#999999", label="observed")
                ax.plot(t, fitted[:, i], "-", lw=1.0, color="#d62728", label="fit")
                ax.set_ylabel(f"{names[i]} [{units[i]}]")
        axes[0].set_title(caption, fontsize=7, loc="left")
        if not resid:
            axes[0].legend(fontsize=7, loc="best")
        axes[-1].set_xlabel("t [s]")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


def plot_profiles(
    profile: dict, path: str | os.PathLike, caption: str = "", units: dict | None = None
) -> None:
    """Profile likelihoods of :attr:`rollax.Fit.profile`: delta chi^2 against each parameter,
    the 95 % level (``level``: 3.84, or F(1, nu)'s quantile with estimated noise) and the
    interval it gives; the Gauss-Newton parabola for comparison
    is left out on purpose: the profile is what the interval is read from."""
    names = list(profile)
    k = max(1, len(names))
    fig, axes = plt.subplots(1, k, figsize=(3.6 * k, 3.2), dpi=110, squeeze=False)
    units = units or {}
    for ax, name in zip(axes[0], names):
        p = profile[name]
        v = np.asarray(p["values"], float)
        d = np.asarray(p["delta_chi2"], float)
        ax.plot(v, d, "o-", ms=3, lw=1.0, color="#1f77b4", label="profile")
        level = float(p.get("level", 3.841))
        ax.axhline(level, color="#d62728", lw=0.8, ls="--", label=f"95 % ({level:.3g})")
        lo, hi = p["interval"]
        for end in (lo, hi):
            if end is not None:
                ax.axvline(end, color="#d62728", lw=0.6)
        ax.axvline(p.get("estimate", np.nan), color="k", lw=0.6, ls=":")
        iv = ", ".join("open" if e is None else f"{e:.6g}" for e in (lo, hi))
        ax.set_title(f"{name}: 95 % [{iv}]", fontsize=8)
        unit = units.get(name)
        ax.set_xlabel(f"{name}" + (f" [{unit}]" if unit else ""))
        ax.set_ylabel("delta chi^2")
        # the interval with a margin: points far outside it would squash the picture
        centre = p.get("estimate", v.mean() if v.size else None)
        ends = [e for e in (lo, hi, centre) if e is not None and np.isfinite(e)]
        if not v.size:  # e.g. mu of a head-on impact: the record gives no profile
            ax.text(0.5, 0.5, "no profile: not identifiable", ha="center", transform=ax.transAxes)
        width = max(ends) - min(ends) if ends else 0.0
        if width > 0:
            ax.set_xlim(min(ends) - 0.6 * width, max(ends) + 0.6 * width)
        ax.set_ylim(0, 12.0)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.legend(fontsize=6, loc="upper center")
    if caption:
        fig.suptitle(caption, fontsize=7, x=0.01, ha="left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
