"""``rollax steady``: steady motions of the ball on the rim (Sect. 3), Figs. 3, 5, 6, 7, 8.

    rollax steady --summary [--r R --a A --R R --j J --mu MU --g G]
    rollax steady --figure 3|5|6|7|8 --out DIR [--v-throw 10]
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

FIGURES = (3, 5, 6, 7, 8)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "steady",
        help="steady motions of the ball on the rim: stability, slipping, energy (Figs. 3-8)",
        description="Steady motions (46)-(48) of the basketball rolling on the rim, their "
        "stability (54), slip/fall (56)-(57) and energy (59) limits, and the smallest throw "
        "speed of the realisable regions A, B, C (Sect. 3).",
    )
    p.add_argument("--summary", action="store_true",
                   help="print beta_star, beta_hat, beta_tilde, v_min_A/B/C as JSON")
    p.add_argument("--json", action="store_true", help="same as --summary")
    p.add_argument("--figure", type=int, action="append", choices=FIGURES,
                   help="figure of the paper to regenerate (repeatable)")
    p.add_argument("--out", help="output directory for figures (PNG) and data (npz/json)")
    p.add_argument("--r", type=float, default=0.12, help="ball radius [m]")
    p.add_argument("--a", type=float, default=0.01, help="rim tube radius [m]")
    p.add_argument("--R", type=float, default=0.225, help="rim major radius [m]")
    p.add_argument("--j", type=float, default=2.0 / 3.0, help="J / (m r^2)")
    p.add_argument("--g", type=float, default=9.81, help="gravity [m/s^2]")
    p.add_argument("--mu", type=float, default=1.0, help="friction coefficient")
    p.add_argument("--v-throw", type=float, default=10.0,
                   help="throw speed of Figs. 7-8 [m/s]")
    p.add_argument("--w3-max", type=float, default=60.0, help="|omega30| range of the plots [1/s]")
    p.set_defaults(func=run)


def _rim(args):
    from rollax.rim import Rim

    return Rim(r=args.r, a=args.a, R=args.R, j=args.j, g=args.g, mu=args.mu)


def run(args) -> int:
    rim = _rim(args)
    if args.figure and not args.out:
        raise ValueError("--figure needs --out DIR")
    if not (args.summary or args.json or args.figure):
        raise ValueError("nothing to do: give --summary and/or --figure N --out DIR")
    out = {}
    if args.summary or args.json:
        from rollax.steady import summary

        out = summary(rim)
        out["parameters"] = _params(rim)
        print(json.dumps(out, indent=2))
    if args.figure:
        os.makedirs(args.out, exist_ok=True)
        for n in args.figure:
            make_figure(n, rim, args.out, v_throw=args.v_throw, w3_max=args.w3_max)
    return 0


def _params(rim) -> dict:
    return {k: float(getattr(rim, k)) for k in ("r", "a", "R", "j", "g", "mu")}


def grid(rim, w3_max: float = 60.0, nb: int = 629, nw: int = 480):
    """(beta0, omega30) grid of the figures; nw even so omega30 = 0 is never hit."""
    b = np.linspace(-np.pi, np.pi, nb)
    w = np.linspace(-w3_max, w3_max, nw)
    return np.meshgrid(b, w, indexing="xy")


def figure_data(n: int, rim, v_throw: float = 10.0, w3_max: float = 60.0) -> dict:
    """Arrays of figure ``n`` over the (beta0, omega30) plane."""
    import jax.numpy as jnp

    from rollax import steady as S

    B, W = grid(rim, w3_max)
    Bj, Wj = jnp.asarray(B), jnp.asarray(W)
    d = {"beta0": B, "omega30": W}
    if n == 3:
        d["omega20"] = np.asarray(rim.steady_omega2(Bj, Wj))
    elif n == 5:
        d["h"] = np.asarray(rim.stability_h(Bj, Wj))
        d["beta_star"] = S.beta_star(rim)
        d["beta_hat"] = S.beta_hat(rim)
    elif n == 6:
        mus = [0.25, 0.5, 1.0, 2.0, 4.0]
        d["mu"] = np.array(mus)
        d["margin"] = np.stack([np.asarray(S.slip_margin(rim, Bj, Wj, mu)) for mu in mus])
        d["fall_margin"] = np.asarray(S.fall_margin(rim, Bj, Wj))
        d["margin_rim_mu"] = np.asarray(S.slip_margin(rim, Bj, Wj))
        d["beta_tilde"] = S.beta_tilde(rim.mu)
    elif n == 7:
        d["v_required"] = np.asarray(S.throw_speed(rim, Bj, Wj))
        d["v_levels"] = np.array([2.0, 4.0, 6.0, 8.0, v_throw])
    elif n == 8:
        d["realisable"] = np.asarray(S.realisable(rim, Bj, Wj, v_throw))
        d["omega20"] = np.asarray(rim.steady_omega2(Bj, Wj))
        d["v_throw"] = v_throw
        for name in S.REGIONS:
            try:
                m = S.min_throw_speed(rim, name)
                d[f"v_min_{name}"] = m.v_min
                d[f"argmin_{name}"] = np.array([m.beta0, m.omega30])
            except ValueError:
                pass
    else:
        raise ValueError(f"figure = {n} must be one of {FIGURES}")
    return d


def _axes(ax, title):
    ax.set_xlabel(r"$\beta_0$ [rad]")
    ax.set_ylabel(r"$\omega_{30}$ [1/s]")
    ax.set_title(title, fontsize=10)
    for x in (-np.pi / 2, np.pi / 2):
        ax.axvline(x, color="k", lw=2)
    ax.axhline(0.0, color="k", lw=2)
    ax.set_xlim(-np.pi, np.pi)


def make_figure(n: int, rim, out: str, v_throw: float = 10.0, w3_max: float = 60.0) -> str:
    """Write ``fig{n}.png`` and ``fig{n}.npz`` into ``out``; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = figure_data(n, rim, v_throw, w3_max)
    B, W = d["beta0"], d["omega30"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=100)
    if n == 3:
        z = d["omega20"]
        lev = np.sign(z) * np.log10(1 + np.abs(z))
        im = ax.pcolormesh(B, W, lev, cmap="RdBu_r", vmin=-3, vmax=3, shading="auto",
                           rasterized=True)
        cb = fig.colorbar(im, ax=ax)
        cb.set_label(r"sign$(\omega_{20})\log_{10}(1+|\omega_{20}|)$")
        ax.contour(B, W, z, levels=[0.0], colors="k", linestyles=":")
        for x, txt in ((-3 * np.pi / 4, "outside\nbelow"), (-np.pi / 4, "inside\nbelow"),
                       (np.pi / 4, "inside\nabove"), (3 * np.pi / 4, "outside\nabove")):
            ax.text(x, 0.8 * W.max(), txt, ha="center", va="top", fontsize=8)
        ax.plot([-np.pi / 2, np.pi / 2], [0, 0], "o", mfc="w", mec="k", ms=7)
        _axes(ax, r"Fig. 3: steady motions (47)-(48), colour = $\omega_{20}$; dotted: $\omega_{20}=0$")
    elif n == 5:
        ax.contourf(B, W, (d["h"] < 0).astype(float), levels=[0.5, 1.5], colors=["0.75"])
        ax.contour(B, W, d["h"], levels=[0.0], colors="k", linewidths=0.8)
        bs, bh = d["beta_star"], d["beta_hat"]
        for x in (-bs, bs):
            ax.axvline(x, color="C3", ls="--", lw=1)
        wh = _h_min_w3(rim, bh)
        ax.plot([bh, bh], [wh, -wh], "ko", ms=5)
        ax.text(bs + 0.05, -0.9 * W.max(), rf"$\beta^*$={bs:.4f}", color="C3", fontsize=8)
        ax.text(bh + 0.05, wh + 3, rf"$\hat\beta$={bh:.4f}", fontsize=8)
        ax.text(0.02, 0.03, "grey: S (h<0), white: U", transform=ax.transAxes, fontsize=8)
        _axes(ax, "Fig. 5: stability of the steady motions, h of (54)")
    elif n == 6:
        ax.contourf(B, W, (d["margin_rim_mu"] >= 0).astype(float), levels=[0.5, 1.5],
                    colors=["0.8"])
        from matplotlib.lines import Line2D

        handles = []
        for i, mu in enumerate(d["mu"]):
            ax.contour(B, W, d["margin"][i], levels=[0.0], colors=[f"C{i}"], linewidths=0.8)
            handles.append(Line2D([], [], color=f"C{i}", lw=0.8, label=rf"$\mu$={mu:g}"))
        ax.contour(B, W, d["fall_margin"], levels=[0.0], colors="k", linewidths=1.5,
                   linestyles="--")
        handles.append(Line2D([], [], color="k", lw=1.5, ls="--",
                              label=r"$\mu\to\infty$ (falling, (57))"))
        ax.legend(handles=handles, loc="lower left", fontsize=7, ncol=2)
        _axes(ax, rf"Fig. 6: no-slip (56), shaded $\mu$={float(rim.mu):g}, "
                  rf"$\tilde\beta$={d['beta_tilde']:.3f}")
    elif n == 7:
        v = d["v_required"]
        ax.contourf(B, W, (v <= v_throw).astype(float), levels=[0.5, 1.5], colors=["0.8"])
        cs = ax.contour(B, W, v, levels=d["v_levels"], cmap="viridis", linewidths=0.9)
        ax.clabel(cs, fmt="%g m/s", fontsize=7)
        _axes(ax, rf"Fig. 7: kinetic-energy bound (59), shaded $v_{{throw}}$={v_throw:g} m/s")
    elif n == 8:
        ok = d["realisable"]
        ax.contourf(B, W, ok.astype(float), levels=[0.5, 1.5], colors=["0.7"])
        ax.contour(B, W, np.where(ok, d["omega20"], np.nan), levels=[0.0], colors="k",
                   linestyles=":")
        from rollax.steady import REGIONS

        for name, (lo, hi) in REGIONS.items():
            sel = ok & (B > lo) & (B < hi) & (W > 0)
            if not sel.any():
                continue
            bc, wc = B[sel].mean(), W[sel].mean()
            ax.text(bc, wc, name, fontsize=12, weight="bold", ha="center", va="center")
            ax.text(bc, -wc, name, fontsize=12, weight="bold", ha="center", va="center")
            for sgn, mk in ((1, "+"), (-1, "−")):
                s2 = sel & (np.sign(d["omega20"]) == sgn)
                if s2.sum() > 20:
                    ax.text(B[s2].mean(), W[s2].mean() + 6, mk, color="C3", fontsize=11,
                            ha="center")
            if f"argmin_{name}" in d:
                bm, wm = d[f"argmin_{name}"]
                ax.plot([bm, bm], [wm, -wm], "x", color="C0", ms=6)
                ax.text(bm, -wm - 6, f"{d[f'v_min_{name}']:.3f} m/s", fontsize=7,
                        ha="center", color="C0")
        _axes(ax, rf"Fig. 8: realisable steady motions ($\mu$={float(rim.mu):g}, "
                  rf"$v_{{throw}}$={v_throw:g} m/s); x: minimum throw speed")
    ax.title.set_fontsize(9)
    fig.tight_layout()
    png = os.path.join(out, f"fig{n}.png")
    fig.savefig(png, dpi=100)
    plt.close(fig)
    np.savez_compressed(os.path.join(out, f"fig{n}.npz"), **_compact(d))
    return png


def _compact(d: dict) -> dict:
    """Data of a figure for saving: 1-D axes, sign masks (boolean) at full resolution,
    continuous fields as float32 on every second grid point (axes ``*_coarse``)."""
    out = {"beta0": d["beta0"][0], "omega30": d["omega30"][:, 0]}
    out["beta0_coarse"], out["omega30_coarse"] = out["beta0"][::2], out["omega30"][::2]
    for k, v in d.items():
        if k in ("beta0", "omega30"):
            continue
        v = np.asarray(v)
        if k in ("margin", "fall_margin", "margin_rim_mu"):
            out[k + "_nonneg"] = v >= 0
        elif k == "h":
            out["stable"] = v < 0
            out["h_coarse"] = v[::2, ::2].astype(np.float32)
        elif v.dtype == np.float64 and v.ndim >= 2:
            out[k + "_coarse"] = v[..., ::2, ::2].astype(np.float32)
        else:
            out[k] = v
    return out


def _h_min_w3(rim, beta0: float) -> float:
    """|omega30| minimising h at fixed beta0: W = sqrt(c / a) of h = a W + b + c / W (eq. (54))."""
    r, R, j, g, rho = (float(v) for v in (rim.r, rim.R, rim.j, rim.g, rim.rho))
    c = math.cos(beta0)
    D = R - rho * c
    a = r**2 * (R * c - (1 + j) * rho) / ((1 + j) * rho * D**2)
    cc = g**2 * c * D / (r**2 * rho * (1 + j) ** 2)
    return math.sqrt(math.sqrt(cc / a))
