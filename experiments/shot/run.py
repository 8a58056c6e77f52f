"""The free throw (issue 40): which releases go in, how, and how robustly.

The ball is released 2.1 m above the floor, 4.19 m in front of the hoop's centre
(:mod:`rollax.analysis.shot`), and flies under gravity, drag and Magnus lift until it goes
through the hoop, misses, or settles on the rim (:class:`rollax.systems.Shot`; the coefficients
are the order-of-magnitude defaults of :mod:`rollax.models.shot`). Three maps of 360 x 240
releases over speed 6.6-8.0 m/s x angle 40-64 degrees: no spin, 3 Hz backspin, and (for
comparison) no spin in a vacuum. For each map:

* make and swish fractions, outcome counts, and the rim/board contact counts of the made shots;
* the best release under the shooter's scatter (``best_release``: candidates from the made
  indicator convolved with the scatter's Gaussian on the grid, chosen among by Monte Carlo with
  common random numbers, n = min(n, 4096) and seed 1, and its probability from independent
  draws: ``p_best`` +- ``se_best``) for the default scatter (sd 0.09 m/s, 1.3 degrees)
  and for the low (0.05 m/s) and high (0.13 m/s) speed scatter, each checked by
  ``make_probability`` (Monte Carlo, n = 16384, seed 0: draws the choice did not use):
  p +- standard error, and whether it agrees with the convolution there (``p_conv``, the map's
  value, biased) within 3 standard errors plus the grid's resolution (the difference between
  the convolution on this grid and on the grid with every other point);
* Tran & Silverberg's aim: at the best direct angle, the release whose central flight crosses
  the rim plane at the hoop's centre, and how much lower its make probability is;
* where the made shots' centres were at the end (``r + a`` below the rim plane), from the
  same sweep keeping its solution (``rollax.sweep(keep_solution=True)``: the map's compiled
  kernel; its outcomes checked against the map's; the swishes' rim-plane crossings from their
  end states), and for the best release's central trajectory, the rim-plane crossing, entry angle
  and apex (SciPy's ``solve_ivp`` on the model's flight equations, an independent integrator);
* coarser maps (180 x 120) over a wider speed range, 6.6-9.0 m/s (the bank shots' lobe goes on
  beyond the issue's 8 m/s), with the default board and a softer one (e_board = 0.55): how much
  the best release rests on the window and on the board.

Then the gradient of the make probability with respect to the release angle at the no-spin
best release and 2 degrees below it (the flank of the peak): central differences of the Monte
Carlo estimate with common random numbers (the same draws; h = 0.25 and 0.5 degrees,
n = 16384, standard errors of the paired differences), the score-function estimate from the
same draws (E[made z] / sd_angle), and the derivative of the convolved probability map
(``np.gradient`` along the angle axis, interpolated; and its own central differences). A
differentiable route through the solves (a smoothed indicator, gradients of the event times)
is not built yet: these are the routes available now. A profile of p along the angle at the
best speed (convolution against Monte Carlo points) is drawn beside it.

    python experiments/shot/run.py [--grid NV NA] [--n 16384] [--out DIR] [--smoke]

Writes, beside this script (or into ``--out``): ``<map>.zarr`` (the sweep's dataset plus the
make probability), ``<map>.png`` (outcome classes with contact-count contours; the probability
map with the best releases marked), ``compare.png`` (the three made regions), ``gradient.png``
and ``summary.json``. ``--smoke``: a 12 x 8 grid and n = 256 (tests/test_scripts_smoke.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

import rollax
from rollax import Axis
from rollax.analysis.shot import (
    FREE_THROW_DISTANCE,
    FREE_THROW_HEIGHT,
    SD_ANGLE,
    SD_SPEED,
    best_release,
    make_probability,
    probability_map,
    release,
    shot_map,
)
from rollax.systems.shot import Shot, ShotOutcome, shot_summary

HERE = Path(__file__).resolve().parent
SPEED = (6.6, 8.0)
ANGLE = (40.0, 64.0)
SCATTERS = {"default": (SD_SPEED, SD_ANGLE), "low": (0.05, SD_ANGLE), "high": (0.13, SD_ANGLE)}
T_MAX = 4.0


# ---------------------------------------------------------------------------------------------
# Monte Carlo with the draws of make_probability, keeping every draw's result
# ---------------------------------------------------------------------------------------------
def draws(shot, speed, angle, spin, sd_speed, sd_angle, n, seed=0):
    """The releases of ``make_probability(shot, speed=, angle=, spin=, sd_speed=, sd_angle=,
    n=, seed=)`` (the same arithmetic, so the same floats), solved; returns the standard
    normals ``z`` (n, 2), the made indicator and the end states."""
    import jax
    import jax.numpy as jnp

    z = np.random.default_rng(seed).standard_normal((n, 2))
    speeds = speed + sd_speed * z[:, 0]
    angles = angle + sd_angle * z[:, 1]
    starts = np.asarray(
        jax.vmap(
            lambda v, a: release(
                v, a, spin, 0.0, FREE_THROW_DISTANCE, FREE_THROW_HEIGHT, float(shot.rim_height)
            )
        )(jnp.asarray(speeds), jnp.asarray(angles))
    )
    sol = rollax.solve_ensemble(shot, starts, 0.0, T_MAX)
    outcome = np.asarray(shot.outcome(sol))
    return z, outcome == ShotOutcome.MADE, np.asarray(sol.y), np.asarray(sol.aux)


def check(shot, spin, made, sp, an, sdv, sda, v, a, p, n):
    """A convolution estimate ``p`` at (v, a) against make_probability's Monte Carlo."""
    p_mc, se = make_probability(
        shot, speed=v, angle=a, spin=spin, sd_speed=sdv, sd_angle=sda, n=n, seed=0, t_max=T_MAX
    )
    g = grid_term(made, sp, an, sdv, sda, v, a)
    e = edge_mass(sp, an, sdv, sda, v, a)
    diff = p_mc - p
    return dict(
        sd_speed=sdv,
        sd_angle=sda,
        speed=v,
        angle=a,
        p_conv=round(p, 4),
        p_mc=round(p_mc, 4),
        se=round(se, 4),
        diff=round(diff, 4),
        z=round(diff / se, 2),
        grid_term=round(g, 4),
        edge_mass=round(e, 4),
        agrees=bool(abs(diff) <= 3 * se + g),
        agrees_given_edge=bool(-(3 * se + g) <= diff <= 3 * se + g + e),
    )


def shot_source() -> dict:
    """Which shot model ran (the module is being extended: the join with the rim's rolling
    model adds a mode): its modes and the sha256 of its source files."""
    import hashlib

    import rollax.analysis.shot as a_
    import rollax.models.shot as m_
    import rollax.systems.shot as s_

    out = {"modes": list(getattr(Shot, "modes", None) or ["(one mode)"])}
    for mod in (s_, m_, a_):
        with open(mod.__file__, "rb") as fh:
            out[mod.__name__] = hashlib.sha256(fh.read()).hexdigest()[:16]
    return out


def aim_at_centre(shot, spin, made, sp, an, P, direct, n):
    """The release at the best direct shot's angle whose central flight crosses the rim plane
    at the hoop's centre (x = 0; found by Brent's method on SciPy's flight), its make
    probability (convolution and Monte Carlo) and the change from the best direct shot."""
    from scipy.optimize import brentq

    a = float(direct["angle"])

    def x0(v):
        # where the central flight crosses the rim plane (touching nothing on the way there)
        return central_flight(shot, v, a, spin).get("rim_plane_x_m_exact", math.nan)

    v_hi = float(direct["speed"])
    if not x0(v_hi) > 0:
        return None
    v_lo = v_hi
    while True:  # down in speed until the crossing is in front of the centre
        v_lo -= 0.01
        x = x0(v_lo)
        if not math.isfinite(x) or v_lo < sp[0]:
            return None  # the central flight touches the rim first: no clean aim there
        if x < 0:
            break
    v = brentq(x0, v_lo, v_hi, xtol=1e-6)
    p = interp(P, sp, an, v, a)
    p_mc, se = make_probability(shot, speed=v, angle=a, spin=spin, n=n, seed=0, t_max=T_MAX)
    return dict(
        speed=v,
        angle=a,
        p_conv=round(p, 4),
        p_mc=round(p_mc, 4),
        se=round(se, 4),
        change_from_best_direct_conv=round(p - direct["p_conv"], 4),
        change_from_best_direct_mc=round(p_mc - direct["p_mc"], 4),
        speed_change=round(v - direct["speed"], 4),
    )


def se_of(p, n):
    """make_probability's standard error."""
    return math.sqrt(max(p * (1 - p), 1.0 / n) / n)


# ---------------------------------------------------------------------------------------------
# the convolution estimate, its interpolation and its grid term
# ---------------------------------------------------------------------------------------------
def conv(made, sp, an, sd_speed, sd_angle):
    """probability_map's formula on any grid (for the coarser grid of the resolution term)."""
    from scipy.ndimage import gaussian_filter

    dv, da = float(sp[1] - sp[0]), float(an[1] - an[0])
    return gaussian_filter(
        made.astype(float), sigma=(sd_speed / dv, sd_angle / da), mode="constant", cval=0.0
    )


def interp(P, sp, an, v, a):
    from scipy.interpolate import RegularGridInterpolator

    return float(RegularGridInterpolator((sp, an), P, method="linear")((v, a)))


def edge_mass(sp, an, sd_speed, sd_angle, v, a):
    """The scatter's probability of a release outside the map (the convolution counts it as a
    miss): where the best release sits near an edge, the convolution is low by up to this."""
    from scipy.stats import norm

    inside_v = norm.cdf((sp[-1] - v) / sd_speed) - norm.cdf((sp[0] - v) / sd_speed)
    inside_a = norm.cdf((an[-1] - a) / sd_angle) - norm.cdf((an[0] - a) / sd_angle)
    return float(1.0 - inside_v * inside_a)


def rim_plane_x(shot, y):
    """Where the centre crossed the rim plane, for runs that ended r + a below it with no
    impact on the way (swishes): back along the flight from the end state over the ~0.02 s of
    the last 0.127 m, with the acceleration at the end held constant (error ~ jerk tau^3, well
    under a millimetre)."""
    r, m = float(shot.r), float(shot.m)
    k = 0.5 * float(shot.rho_air) * math.pi * r**2 / m
    v, w = y[:, 3:6], y[:, 6:9]
    acc = (
        np.array([0.0, 0.0, -float(shot.g)])
        - k * float(shot.c_d) * np.linalg.norm(v, axis=1, keepdims=True) * v
        + k * float(shot.c_m) * r * np.cross(w, v)
    )
    dz = -y[:, 2]  # the climb back to z = 0 (> 0)
    # z(-tau) = z_end - v_z tau + a_z tau^2 / 2 = 0, the root near dz / -v_z
    a_z, v_z = acc[:, 2], v[:, 2]
    tau = (v_z + np.sqrt(v_z**2 - 2 * a_z * (-dz))) / a_z
    tau = np.where(np.abs(a_z) > 1e-12, tau, dz / -v_z)
    tau = np.where((tau > 0) & np.isfinite(tau), tau, dz / -v_z)
    return y[:, 0] - v[:, 0] * tau + 0.5 * acc[:, 0] * tau**2


def grid_term(made, sp, an, sd_speed, sd_angle, v, a):
    """|p(this grid) - p(every other point)| at (v, a): how much the convolution moves when the
    grid's resolution halves (the indicator's boundaries are resolved to a cell)."""
    P = conv(made, sp, an, sd_speed, sd_angle)
    P2 = conv(made[::2, ::2], sp[::2], an[::2], sd_speed, sd_angle)
    v2 = min(max(v, sp[::2][0]), sp[::2][-1])
    a2 = min(max(a, an[::2][0]), an[::2][-1])
    return abs(interp(P, sp, an, v, a) - interp(P2, sp[::2], an[::2], v2, a2))


# ---------------------------------------------------------------------------------------------
# the central trajectory of a release, by SciPy (an independent integrator of the same flight)
# ---------------------------------------------------------------------------------------------
def central_flight(shot, speed, angle, spin):
    """Apex, rim-plane crossing (x, entry angle) and first contact of the release's flight by
    ``scipy.integrate.solve_ivp`` on the model's flight equations (no impacts: it stops at the
    first contact with the rim or the board, or r + a below the rim plane)."""
    from scipy.integrate import solve_ivp

    y0 = np.asarray(release(speed, angle, spin, 0.0, FREE_THROW_DISTANCE, FREE_THROW_HEIGHT), float)
    p = {k: float(getattr(shot, k)) for k in ("r", "m", "g", "rho_air", "c_d", "c_m", "a")}
    R = float(shot.R)
    x_b = float(shot.rim_inner_radius + shot.board_offset)
    z_lo = -float(shot.board_below_rim)
    z_hi = z_lo + float(shot.board_height)
    half_w = 0.5 * float(shot.board_width)
    k = 0.5 * p["rho_air"] * math.pi * p["r"] ** 2 / p["m"]

    def f(t, y):
        v, w = y[3:6], y[6:9]
        acc = (
            np.array([0.0, 0.0, -p["g"]])
            - k * p["c_d"] * np.linalg.norm(v) * v
            + k * p["c_m"] * p["r"] * np.cross(w, v)
        )
        return np.concatenate([v, acc, np.zeros(3)])

    def plane(t, y):
        return y[2]

    def below(t, y):
        return y[2] + p["r"] + p["a"]

    def rim(t, y):
        rho = math.hypot(y[0], y[1])
        return math.hypot(rho - R, y[2]) - p["a"] - p["r"]

    def board(t, y):
        q = np.array([x_b, np.clip(y[1], -half_w, half_w), np.clip(y[2], z_lo, z_hi)])
        return np.linalg.norm(y[:3] - q) - p["r"]

    plane.direction = -1
    below.terminal, below.direction = True, -1
    rim.terminal, rim.direction = True, -1
    board.terminal, board.direction = True, -1
    sol = solve_ivp(
        f,
        (0.0, T_MAX),
        y0,
        method="DOP853",
        rtol=1e-11,
        atol=1e-12,
        # the gaps are distances (unsigned): a long step could pass through the board or the
        # rim's tube and back out with no sign change between its ends
        max_step=1e-3,
        events=(plane, below, rim, board),
        dense_output=True,
    )
    ts = np.linspace(0.0, sol.t[-1], 4001)
    zs = sol.sol(ts)[2]
    i = int(np.argmax(zs))
    out = dict(
        apex_height_m=round(float(zs[i]) + float(shot.rim_height), 4),
        apex_x_m=round(float(sol.sol(ts[i])[0]), 4),
        board_top_m=round(float(shot.rim_height) + z_hi, 4),
    )
    if len(sol.t_events[2]):
        out["first_contact"] = f"rim at t = {sol.t_events[2][0]:.4f} s"
    elif len(sol.t_events[3]):
        out["first_contact"] = f"board at t = {sol.t_events[3][0]:.4f} s"
    else:
        out["first_contact"] = None
    if len(sol.t_events[0]):
        y = sol.y_events[0][0]
        out["rim_plane_x_m"] = round(float(y[0]), 4)  # > 0: behind the hoop's centre
        out["rim_plane_x_m_exact"] = float(y[0])
        out["rim_plane_entry_angle_deg"] = round(math.degrees(math.atan2(-y[5], y[3])), 2)
        out["rim_plane_speed_m_s"] = round(float(np.linalg.norm(y[3:6])), 3)
        # the gap between the ball and the back of the rim (its inner edge) in the rim plane
        out["gap_ball_to_back_rim_m"] = round(
            float(shot.rim_inner_radius) - float(y[0]) - p["r"], 4
        )
    if len(sol.t_events[1]) and out["first_contact"] is None:
        out["end_t_s"] = float(sol.t_events[1][0])
        out["end_x_m"] = float(sol.y_events[1][0][0])
    return out


# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------
CLASS_NAMES = ["swish", "made off rim/board", "on the rim", "missed", "undecided/failed"]
CLASS_COLOURS = ["#1a9850", "#91cf60", "#fee08b", "#d73027", "#999999"]


def classes(res):
    swish = np.asarray(res.summary["swish"])
    return np.select(
        [
            swish,
            res.outcome == ShotOutcome.MADE,
            res.outcome == ShotOutcome.ON_RIM,
            res.outcome == ShotOutcome.MISSED,
        ],
        [0, 1, 2, 3],
        4,
    )


def params_line(shot, spin):
    return (
        f"release {FREE_THROW_HEIGHT} m high, {FREE_THROW_DISTANCE} m from the hoop's centre, "
        f"backspin {spin:g} Hz; air {float(shot.rho_air):g} kg/m$^3$, $C_d$ "
        f"{float(shot.c_d):g}, $C_M$ {float(shot.c_m):g}; rim e {float(shot.e_rim):g}, "
        f"$\\mu$ {float(shot.mu_rim):g}; board e {float(shot.e_board):g}, $\\mu$ "
        f"{float(shot.mu_board):g}; $v_{{roll}}$ {float(shot.v_roll):g} m/s"
    )


def figure_map(res, P, bests, direct, shot, spin, label, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    sp, an = (a.values for a in res.axes)
    cls = classes(res)
    n_rim = np.asarray(res.summary["rim_contacts"])
    n_board = np.asarray(res.summary["board_contacts"])
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.6), dpi=100)
    ax = axes[0]
    ax.pcolormesh(
        sp,
        an,
        cls.T,
        cmap=ListedColormap(CLASS_COLOURS),
        vmin=-0.5,
        vmax=4.5,
        shading="nearest",
        rasterized=True,
    )
    handles = [
        Patch(color=c, label=f"{n} ({int(np.sum(cls == k))})")
        for k, (c, n) in enumerate(zip(CLASS_COLOURS, CLASS_NAMES))
        if np.any(cls == k)
    ]
    if len(sp) > 2 and len(an) > 2:
        cs = ax.contour(sp, an, n_rim.T, levels=[0.5, 1.5, 2.5], colors="k", linewidths=0.6)
        ax.clabel(cs, fmt={0.5: "rim 1", 1.5: "rim 2", 2.5: "rim 3"}, fontsize=7)
        if np.any(n_board > 0):
            cb = ax.contour(
                sp, an, n_board.T, levels=[0.5, 1.5], colors="b", linewidths=0.6, linestyles="--"
            )
            ax.clabel(cb, fmt={0.5: "board 1", 1.5: "board 2"}, fontsize=7)
    handles += [
        Patch(facecolor="none", edgecolor="k", label="rim impacts (contours)"),
        Patch(facecolor="none", edgecolor="b", linestyle="--", label="board impacts"),
    ]
    ax.legend(handles=handles, loc="upper right", fontsize=7)
    ax.set_xlabel("release speed [m/s]")
    ax.set_ylabel("release angle [degrees]")
    ax.set_title(
        f"{label}: outcome of {len(sp)} x {len(an)} releases; contours: impacts", fontsize=10
    )
    ax = axes[1]
    m = ax.pcolormesh(
        sp, an, P.T, cmap="viridis", vmin=0, vmax=1, shading="nearest", rasterized=True
    )
    fig.colorbar(m, ax=ax, label="make probability")
    if len(sp) > 2 and len(an) > 2 and P.max() > 0:
        cs = ax.contour(sp, an, P.T, levels=[0.25, 0.5, 0.75], colors="w", linewidths=0.5)
        ax.clabel(cs, fontsize=7)
    marks = {"default": ("*", 15), "low": ("^", 8), "high": ("v", 8)}
    for key, b in bests.items():
        mk, ms = marks[key]
        ax.plot(
            b["speed"],
            b["angle"],
            marker=mk,
            color="w",
            markeredgecolor="k",
            markersize=ms,
            linestyle="none",
            label=f"best, sd {b['sd_speed']} m/s: {b['speed']:.3f} m/s, "
            f"{b['angle']:.1f} deg, p = {b['p_conv']:.3f} (MC {b['p_mc']:.3f})",
        )
    if (direct["speed"], direct["angle"]) != (bests["default"]["speed"], bests["default"]["angle"]):
        ax.plot(
            direct["speed"],
            direct["angle"],
            marker="D",
            color="w",
            markeredgecolor="k",
            markersize=7,
            linestyle="none",
            label=f"best direct shot (no board), sd {SD_SPEED} m/s: {direct['speed']:.3f}"
            f" m/s, {direct['angle']:.1f} deg, p = {direct['p_conv']:.3f} "
            f"(MC {direct['p_mc']:.3f})",
        )
    ax.legend(loc="lower left", fontsize=7)
    ax.set_xlabel("release speed [m/s]")
    ax.set_ylabel("release angle [degrees]")
    ax.set_title(
        f"make probability under the scatter (sd {SD_SPEED} m/s, {SD_ANGLE} deg;"
        f" markers: sd 0.05 / 0.09 / 0.13 m/s)",
        fontsize=10,
    )
    fig.suptitle(params_line(shot, spin), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path)
    plt.close(fig)


def figure_compare(maps, labels, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(8, 6), dpi=100)
    colours = {"nospin": "k", "backspin3": "tab:blue", "vacuum": "tab:red"}
    handles = []
    for name, (res, P, best) in maps.items():
        sp, an = (a.values for a in res.axes)
        made = (res.outcome == ShotOutcome.MADE).astype(float)
        c = colours[name]
        if len(sp) > 2 and len(an) > 2 and 0 < made.mean() < 1:
            ax.contour(sp, an, made.T, levels=[0.5], colors=c, linewidths=0.8)
        ax.plot(best["speed"], best["angle"], marker="*", color=c, markersize=12)
        handles.append(
            Line2D(
                [],
                [],
                color=c,
                marker="*",
                label=f"{labels[name]}: made "
                f"region's edge; best {best['speed']:.3f} m/s, "
                f"{best['angle']:.1f} deg (p = {best['p_conv']:.3f})",
            )
        )
    ax.legend(handles=handles, fontsize=8, loc="upper right")
    ax.set_xlabel("release speed [m/s]")
    ax.set_ylabel("release angle [degrees]")
    ax.set_title(
        f"free throw ({FREE_THROW_HEIGHT} m high, {FREE_THROW_DISTANCE} m): made "
        f"regions; best under sd {SD_SPEED} m/s, {SD_ANGLE} deg",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def figure_backspin(per_spin, checks, grid, path):
    """The best make probability (all shots, and direct shots only) against the backspin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = [e["spin_hz"] for e in per_spin]
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=100)
    ax.plot(w, [e["best"]["p_conv"] for e in per_spin], "o-", label="best release (any)")
    ax.plot(w, [e["best_direct"]["p_conv"] for e in per_spin], "s-", label="best direct shot")
    for tag, m in (("best", "^"), ("best_direct", "v")):
        c = checks[tag]
        ax.errorbar(
            c["spin_hz"], c["p_mc"], yerr=2 * c["se"], fmt=m, color="k", capsize=3,
            label=f"Monte Carlo, {tag.replace('_', ' ')} (2 se)",
        )  # fmt: skip
    ax.set_xlabel("backspin [Hz]")
    ax.set_ylabel("make probability under the scatter")
    ax.set_title(
        f"Free throw (2.1 m high, 4.19 m out): best release per backspin\n"
        f"{grid[0]} x {grid[1]} map, speed 6.6-8.0 m/s, angle 40-64 deg; "
        f"sd {SD_SPEED} m/s, {SD_ANGLE} deg",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def figure_gradient(grad, profile, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), dpi=100)
    ax = axes[0]
    ax.plot(
        profile["angle_grid"],
        profile["p_conv"],
        "-",
        color="tab:blue",
        label="convolved map (grid)",
    )
    ax.errorbar(
        profile["angle_mc"],
        profile["p_mc"],
        yerr=2 * np.asarray(profile["se_mc"]),
        fmt="o",
        ms=3,
        color="k",
        label="Monte Carlo, n = %d (+- 2 se)" % profile["n"],
    )
    for g in grad:
        a, p, d = g["angle"], g["p_mc"], g["conv_gradient"]
        aa = np.array([a - 1.0, a + 1.0])
        ax.plot(aa, p + d * (aa - a), "--", color="tab:red", lw=1)
    ax.set_xlabel("release angle [degrees]")
    ax.set_ylabel("make probability")
    ax.set_title(
        f"p along the angle: no spin, {profile['speed']:.3f} m/s, scatter sd "
        f"{SD_SPEED} m/s, {SD_ANGLE} deg\ndashed: slope of the convolved map at the "
        f"best release and 2 deg below it",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    ax = axes[1]
    labels, vals, errs, cols = [], [], [], []
    for g in grad:
        tag = "best" if g["where"] == "best" else "flank"
        for h, d in g["mc_central"].items():
            labels.append(f"{tag}\nMC h={h}")
            vals.append(d["dp_da"])
            errs.append(2 * d["se"])
            cols.append("k")
        labels.append(f"{tag}\nscore fn")
        vals.append(g["score_function"]["dp_da"])
        errs.append(2 * g["score_function"]["se"])
        cols.append("tab:green")
        labels.append(f"{tag}\nconv grad")
        vals.append(g["conv_gradient"])
        errs.append(0.0)
        cols.append("tab:blue")
    x = np.arange(len(vals))
    ax.bar(x, vals, yerr=errs, color=cols, alpha=0.7, capsize=3)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("d p / d angle [1/degree]")
    ax.set_title(
        f"dp/d(angle) at {grad[0]['speed']:.3f} m/s: MC central differences "
        f"(common random numbers,\nn = {profile['n']}), score function (green), "
        f"convolved map (blue); bars +- 2 se",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, nargs=2, default=(360, 240), help="speed x angle points")
    ap.add_argument("--n", type=int, default=16384, help="Monte Carlo releases per estimate")
    ap.add_argument("--out", type=Path, default=HERE, help="folder to write into (default: here)")
    ap.add_argument("--smoke", action="store_true", help="a 12 x 8 grid, n = 256 (smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.grid, args.n = (12, 8), 256
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    n = args.n
    t_all = time.perf_counter()
    summary: dict = dict(
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
        load_at_start=[round(x, 2) for x in os.getloadavg()],
        grid=list(args.grid),
        speed_range_m_s=list(SPEED),
        angle_range_deg=list(ANGLE),
        release=dict(height_m=FREE_THROW_HEIGHT, distance_m=FREE_THROW_DISTANCE),
        n_monte_carlo=n,
        shot_source=shot_source(),
        maps={},
    )
    cases = {
        "nospin": (Shot(), 0.0, "no spin"),
        "backspin3": (Shot(), 3.0, "3 Hz backspin"),
        "vacuum": (Shot(rho_air=0.0), 0.0, "vacuum, no spin"),
    }
    summary["parameters"] = {
        k: float(getattr(cases["nospin"][0], k))
        for k in (
            "r",
            "m",
            "j",
            "g",
            "rho_air",
            "c_d",
            "c_m",
            "rim_inner_radius",
            "a",
            "rim_height",
            "board_offset",
            "board_width",
            "board_height",
            "board_below_rim",
            "e_rim",
            "mu_rim",
            "e_board",
            "mu_board",
            "v_roll",
        )
    }
    labels = {k: v[2] for k, v in cases.items()}
    maps = {}
    speed_ax = Axis("speed", SPEED[0], SPEED[1], args.grid[0])
    angle_ax = Axis("angle", ANGLE[0], ANGLE[1], args.grid[1])
    for name, (shot, spin, label) in cases.items():
        entry: dict = {"label": label, "spin_hz": spin}
        t0 = time.perf_counter()
        res = shot_map(shot, speed=speed_ax, angle=angle_ax, spin=spin, t_max=T_MAX, progress=False)
        entry["map_seconds"] = round(time.perf_counter() - t0, 2)
        sp, an = (a.values for a in res.axes)
        made = res.outcome == ShotOutcome.MADE
        swish = np.asarray(res.summary["swish"])
        n_rim = np.asarray(res.summary["rim_contacts"])
        n_board = np.asarray(res.summary["board_contacts"])
        entry["counts"] = res.counts()
        entry["make_fraction"] = round(float(made.mean()), 5)
        entry["swish_fraction"] = round(float(swish.mean()), 5)
        entry["swish_of_made"] = round(float(swish.sum() / max(made.sum(), 1)), 4)
        pairs: dict = {}
        for r_, b_ in zip(n_rim[made], n_board[made]):
            key = f"rim {int(r_)}, board {int(b_)}"
            pairs[key] = pairs.get(key, 0) + 1
        entry["contacts_of_made"] = dict(sorted(pairs.items(), key=lambda kv: -kv[1]))
        entry["max_contacts"] = dict(rim=int(n_rim.max()), board=int(n_board.max()))
        onrim = res.outcome == ShotOutcome.ON_RIM
        if onrim.any():
            entry["on_rim_speed_range"] = [
                float(sp[np.where(onrim)[0]].min()),
                float(sp[np.where(onrim)[0]].max()),
            ]
            entry["on_rim_angle_range"] = [
                float(an[np.where(onrim)[1]].min()),
                float(an[np.where(onrim)[1]].max()),
            ]
        t_end = np.asarray(res.summary["t_end"])
        entry["t_end_max_s"] = round(float(t_end.max()), 4)

        # best releases under the three scatters, each checked by make_probability
        bests = {}
        for key, (sdv, sda) in SCATTERS.items():
            br = best_release(res, sdv, sda, n=min(n, 4096), seed=1)
            t0 = time.perf_counter()
            v, a = br.speed, br.angle
            bests[key] = check(shot, spin, made, sp, an, sdv, sda, v, a, br.map_probability, n)
            bests[key].update(p_best=round(br.probability, 4), se_best=round(br.std_error, 4))
            bests[key]["mc_seconds"] = round(time.perf_counter() - t0, 2)
            print(name, key, bests[key], flush=True)
        entry["best"] = bests
        P = probability_map(res, SD_SPEED, SD_ANGLE)
        # the best direct shot: the largest p among releases whose own run does not touch the
        # board (the bank shots' lobe at high speed is cut by the map's 8 m/s edge)
        Pd = np.where(n_board == 0, P, -1.0)
        i, j = np.unravel_index(int(np.argmax(Pd)), P.shape)
        entry["best_direct"] = check(
            shot,
            spin,
            made,
            sp,
            an,
            SD_SPEED,
            SD_ANGLE,
            float(sp[i]),
            float(an[j]),
            float(P[i, j]),
            n,
        )
        entry["best_direct"]["central_flight"] = central_flight(
            shot, float(sp[i]), float(an[j]), spin
        )
        print(name, "best direct", entry["best_direct"], flush=True)
        # Tran & Silverberg's aim: at the best direct angle, the speed whose central flight
        # crosses the rim plane at the hoop's centre (x = 0), and its make probability
        entry["aim_at_centre"] = aim_at_centre(shot, spin, made, sp, an, P, entry["best_direct"], n)
        print(name, "aim at centre", entry["aim_at_centre"], flush=True)

        # the best release's draws again (the same floats as make_probability): where the made
        # shots ended and how they went in
        b = bests["default"]
        z, made_mc, y_end, aux_end = draws(
            shot, b["speed"], b["angle"], spin, SD_SPEED, SD_ANGLE, n
        )
        assert abs(float(made_mc.mean()) - b["p_mc"]) < 1e-4, "draws differ from make_probability"
        nr, nb = aux_end[:, 0], aux_end[:, 1]
        sw = made_mc & (nr == 0) & (nb == 0)
        with np.errstate(invalid="ignore"):
            xp = rim_plane_x(shot, y_end[sw])
        entry["best_draws"] = dict(
            made=int(made_mc.sum()),
            swishes=int(sw.sum()),
            swish_rim_plane_x_m=dict(
                zip(("p5", "p50", "p95"), np.round(np.percentile(xp, [5, 50, 95]), 4).tolist())
            )
            if sw.any()
            else None,
            swish_of_made=round(float(np.mean((nr[made_mc] == 0) & (nb[made_mc] == 0))), 4),
            rim_of_made=round(float(np.mean((nr[made_mc] > 0) & (nb[made_mc] == 0))), 4),
            board_of_made=round(float(np.mean(nb[made_mc] > 0)), 4),
            end_x_of_made_m=dict(
                zip(
                    ("p5", "p50", "p95"),
                    np.round(np.percentile(y_end[made_mc, 0], [5, 50, 95]), 4).tolist(),
                )
            ),
        )
        cf = central_flight(shot, b["speed"], b["angle"], spin)
        if "end_x_m" in cf:  # a swish: rollax's end against SciPy's
            _, _, y1, _ = draws(shot, b["speed"], b["angle"], spin, 0.0, 0.0, 2)
            cf["end_x_rollax_minus_scipy_m"] = float(y1[0, 0] - cf["end_x_m"])
        entry["best_central_flight"] = cf
        print(name, "central flight", entry["best_central_flight"], flush=True)

        # the whole map again, keeping the solution (the same sweep, so the same compiled
        # kernel): the end states (where the made shots were, r + a below the rim plane) and the
        # steps; its outcomes must be the map's (benchmarks/bench_shot.py checks that
        # rollax.solve_ensemble called directly on these starts gives them too)
        if name != "vacuum":
            t0 = time.perf_counter()
            kept = rollax.sweep(
                shot,
                [speed_ax, angle_ax],
                start=functools.partial(
                    release, spin=spin, distance=FREE_THROW_DISTANCE, height=FREE_THROW_HEIGHT
                ),
                t1=T_MAX,
                summary=shot_summary,
                keep_solution=True,
                progress=False,
                rtol=1e-9,
                atol=1e-9,
            )
            y_all = np.asarray(kept.solution["y"])
            x_end = y_all[..., 0]
            steps = np.asarray(kept.solution["steps"])
            entry["kept_solution_check"] = dict(
                seconds=round(time.perf_counter() - t0, 2),
                outcomes_differing_from_map=int(np.sum(kept.outcome != res.outcome)),
                steps_mean=round(float(steps.mean()), 2),
                steps_max=int(steps.max()),
            )
            for tag, sel in (
                ("made", made),
                ("swish", swish),
                ("made_off_rim_or_board", made & ~swish),
            ):
                if sel.any():
                    xs = x_end[sel]
                    entry[f"end_x_{tag}_m"] = dict(
                        mean=round(float(xs.mean()), 4),
                        p5=round(float(np.percentile(xs, 5)), 4),
                        p50=round(float(np.percentile(xs, 50)), 4),
                        p95=round(float(np.percentile(xs, 95)), 4),
                        behind_centre=round(float(np.mean(xs > 0)), 4),
                    )
            # the swishes' rim-plane crossings (their end states carried back 0.127 m)
            with np.errstate(invalid="ignore"):
                xp = rim_plane_x(shot, y_all[swish])
            entry["rim_plane_x_swish_m"] = dict(
                mean=round(float(xp.mean()), 4),
                p5=round(float(np.percentile(xp, 5)), 4),
                p50=round(float(np.percentile(xp, 50)), 4),
                p95=round(float(np.percentile(xp, 95)), 4),
                behind_centre=round(float(np.mean(xp > 0)), 4),
                note="x of the centre where swishes crossed the rim plane (> 0: behind the "
                "hoop's centre); the swish band of each speed row is centred near its mean",
            )
        # the dataset with the probability map beside the sweep's variables
        ds = res.dataset.copy()
        ds["make_probability"] = (
            ("speed", "angle"),
            P,
            {
                "units": "1",
                "long_name": f"make probability under the scatter (sd {SD_SPEED} "
                f"m/s, {SD_ANGLE} degrees): the made indicator convolved with its Gaussian",
            },
        )
        ds.attrs.update(
            sd_speed=SD_SPEED,
            sd_angle=SD_ANGLE,
            best_speed=b["speed"],
            best_angle=b["angle"],
            best_probability=b["p_conv"],
        )
        dataclasses.replace(res, dataset=ds).save(out / f"{name}.zarr")
        figure_map(res, P, bests, entry["best_direct"], shot, spin, label, out / f"{name}.png")
        maps[name] = (res, P, bests["default"])
        summary["maps"][name] = entry
        print(
            name,
            {k: entry[k] for k in ("counts", "make_fraction", "swish_fraction", "map_seconds")},
            flush=True,
        )

    figure_compare(maps, labels, out / "compare.png")

    # ---- cheaper, coarser maps: a wider speed range (the bank shots' lobe beyond 8 m/s) and
    # a softer board (e_board 0.55), to see how much the best release rests on them ----------
    ext_grid = (180, 120) if not args.smoke else (12, 8)
    ext_speed = (6.6, 9.0)
    sv = Axis("speed", ext_speed[0], ext_speed[1], ext_grid[0])
    sa = Axis("angle", ANGLE[0], ANGLE[1], ext_grid[1])
    ext: dict = dict(
        grid=list(ext_grid), speed_range_m_s=list(ext_speed), angle_range_deg=list(ANGLE), runs={}
    )
    for tag, shot_x, spin in (
        ("nospin", Shot(), 0.0),
        ("backspin3", Shot(), 3.0),
        ("nospin_e_board_0.55", Shot(e_board=0.55), 0.0),
        ("backspin3_e_board_0.55", Shot(e_board=0.55), 3.0),
    ):
        t0 = time.perf_counter()
        rx = shot_map(shot_x, speed=sv, angle=sa, spin=spin, t_max=T_MAX, progress=False)
        sp_x, an_x = (a_.values for a_ in rx.axes)
        Px = probability_map(rx, SD_SPEED, SD_ANGLE)
        made_x = rx.outcome == ShotOutcome.MADE
        br = best_release(rx, SD_SPEED, SD_ANGLE, n=min(n, 4096), seed=1)
        v_, a_, p_ = br.speed, br.angle, br.map_probability
        nb_x = np.asarray(rx.summary["board_contacts"])
        Pd = np.where(nb_x == 0, Px, -1.0)
        i, j = np.unravel_index(int(np.argmax(Pd)), Px.shape)
        ext["runs"][tag] = dict(
            counts=rx.counts(),
            make_fraction=round(float(made_x.mean()), 4),
            best=dict(
                speed=round(v_, 4),
                angle=round(a_, 2),
                p_conv=round(p_, 4),
                p_best=round(br.probability, 4),
                se_best=round(br.std_error, 4),
                edge_mass=round(edge_mass(sp_x, an_x, SD_SPEED, SD_ANGLE, v_, a_), 4),
                bank_shot=bool(
                    nb_x[np.argmin(np.abs(sp_x - v_)), np.argmin(np.abs(an_x - a_))] > 0
                ),
            ),
            best_direct=dict(
                speed=round(float(sp_x[i]), 4),
                angle=round(float(an_x[j]), 2),
                p_conv=round(float(Px[i, j]), 4),
            ),
            seconds=round(time.perf_counter() - t0, 2),
        )
        print("extended", tag, ext["runs"][tag], flush=True)
    summary["extended_maps"] = ext

    # ---- the best backspin: a speed x angle x backspin map (the window) -------------
    spin_ax = Axis("spin", 0.0, 6.0, 7 if not args.smoke else 2)
    sweep_grid = (180, 120) if not args.smoke else (12, 8)
    sv = Axis("speed", SPEED[0], SPEED[1], sweep_grid[0])
    sa = Axis("angle", ANGLE[0], ANGLE[1], sweep_grid[1])
    t0 = time.perf_counter()
    cube = shot_map(Shot(), speed=sv, angle=sa, spin=spin_ax, t_max=T_MAX, progress=False)
    Pc = probability_map(cube, SD_SPEED, SD_ANGLE)
    sp_c, an_c, sn_c = (a_.values for a_ in cube.axes)
    nb_c = np.asarray(cube.summary["board_contacts"])
    br = best_release(cube, SD_SPEED, SD_ANGLE, n=min(n, 4096), seed=1)
    v_c, a_c, p_c = br.speed, br.angle, br.map_probability
    w_c = float(br.spin if br.spin is not None else sn_c[0])
    Pd = np.where(nb_c == 0, Pc, -1.0)  # direct shots: no board contact
    per_spin = []
    for k, w in enumerate(sn_c):
        i, j = np.unravel_index(int(np.argmax(Pc[:, :, k])), Pc.shape[:2])
        i_d, j_d = np.unravel_index(int(np.argmax(Pd[:, :, k])), Pc.shape[:2])
        per_spin.append(
            dict(
                spin_hz=float(w),
                made_fraction=round(float(np.mean(cube.outcome[:, :, k] == ShotOutcome.MADE)), 4),
                best=dict(
                    speed=round(float(sp_c[i]), 4),
                    angle=round(float(an_c[j]), 2),
                    p_conv=round(float(Pc[i, j, k]), 4),
                    bank_shot=bool(nb_c[i, j, k] > 0),
                ),
                best_direct=dict(
                    speed=round(float(sp_c[i_d]), 4),
                    angle=round(float(an_c[j_d]), 2),
                    p_conv=round(float(Pd[i_d, j_d, k]), 4),
                ),
            )
        )
    k_d = int(np.argmax([e["best_direct"]["p_conv"] for e in per_spin]))
    bd = per_spin[k_d]["best_direct"]
    checks = {}
    for tag, (vv, aa, ww, pp) in (
        ("best", (v_c, a_c, w_c, p_c)),
        ("best_direct", (bd["speed"], bd["angle"], float(sn_c[k_d]), bd["p_conv"])),
    ):
        p_mc, se = make_probability(Shot(), speed=vv, angle=aa, spin=ww, n=n, seed=0, t_max=T_MAX)
        checks[tag] = dict(
            speed=round(vv, 4),
            angle=round(aa, 2),
            spin_hz=ww,
            p_conv=round(pp, 4),
            p_mc=round(p_mc, 4),
            se=round(se, 4),
            edge_mass=round(edge_mass(sp_c, an_c, SD_SPEED, SD_ANGLE, vv, aa), 4),
        )
    summary["backspin_sweep"] = dict(
        grid=list(sweep_grid),
        spins_hz=sn_c.tolist(),
        per_spin=per_spin,
        checks=checks,
        seconds=round(time.perf_counter() - t0, 2),
    )
    print("backspin", summary["backspin_sweep"]["checks"], flush=True)
    figure_backspin(per_spin, checks, sweep_grid, out / "backspin.png")

    # ---- the gradient with respect to the release angle (no spin) -----------------------------
    res, P, b = maps["nospin"]
    shot = cases["nospin"][0]
    sp, an = (a.values for a in res.axes)
    dP = np.gradient(P, an, axis=1)
    grad = []
    v = b["speed"]
    hs = (0.25, 0.5)
    for where, a in (("best", b["angle"]), ("flank", b["angle"] - 2.0)):
        g: dict = {"where": where, "speed": v, "angle": a}
        z, m0, _, _ = draws(shot, v, a, 0.0, SD_SPEED, SD_ANGLE, n)
        p0 = float(m0.mean())
        g["p_mc"] = round(p0, 4)
        g["se"] = round(se_of(p0, n), 4)
        g["p_conv"] = round(interp(P, sp, an, v, a), 4)
        # the score function: d/da E[made(a + sd z)] = E[made z_a] / sd_angle
        s = m0 * z[:, 1] / SD_ANGLE
        g["score_function"] = dict(
            dp_da=round(float(s.mean()), 4), se=round(float(s.std(ddof=1) / math.sqrt(n)), 4)
        )
        g["mc_central"] = {}
        for h in hs:
            _, mp, _, _ = draws(shot, v, a + h, 0.0, SD_SPEED, SD_ANGLE, n)
            _, mm, _, _ = draws(shot, v, a - h, 0.0, SD_SPEED, SD_ANGLE, n)
            d = (mp.astype(float) - mm.astype(float)) / (2 * h)
            # the same draws: the paired difference's error, and what independent draws give
            indep = math.sqrt(se_of(float(mp.mean()), n) ** 2 + se_of(float(mm.mean()), n) ** 2)
            g["mc_central"][str(h)] = dict(
                dp_da=round(float(d.mean()), 4),
                se=round(float(d.std(ddof=1) / math.sqrt(n)), 4),
                se_if_independent=round(indep / (2 * h), 4),
                draws_changed=int(np.sum(mp != mm)),
                conv_central=round(
                    (interp(P, sp, an, v, a + h) - interp(P, sp, an, v, a - h)) / (2 * h), 4
                ),
            )
        g["conv_gradient"] = round(interp(dP, sp, an, v, a), 4)
        # the convolution's own resolution term for the slope: the same on every other point
        P2 = conv(res.outcome[::2, ::2] == ShotOutcome.MADE, sp[::2], an[::2], SD_SPEED, SD_ANGLE)
        dP2 = np.gradient(P2, an[::2], axis=1)
        g["conv_gradient_half_grid"] = round(
            interp(
                dP2,
                sp[::2],
                an[::2],
                min(max(v, sp[::2][0]), sp[::2][-1]),
                min(max(a, an[::2][0]), an[::2][-1]),
            ),
            4,
        )
        grad.append(g)
        print("gradient", g, flush=True)
    summary["gradient_angle"] = dict(
        note="d(make probability)/d(release angle) [1/degree], no spin, default scatter. "
        "Routes available now: Monte Carlo central differences with common random numbers, "
        "the score-function estimate from the same draws, and the slope of the convolved "
        "map. A differentiable route through the solves is not built yet.",
        points=grad,
    )

    # ---- the profile of p along the angle at the best speed -------------------------------
    k = int(np.argmin(np.abs(sp - v)))
    step = 1.0 if not args.smoke else 6.0
    a_mc = np.arange(b["angle"] - 6.0, b["angle"] + 6.0 + 1e-9, step)
    p_mc, se_mc = [], []
    for a in a_mc:
        p_, se_ = make_probability(shot, speed=v, angle=float(a), n=n, seed=0, t_max=T_MAX)
        p_mc.append(round(p_, 4))
        se_mc.append(round(se_, 4))
    p_conv_at = [round(interp(P, sp, an, v, float(a)), 4) for a in a_mc]
    profile = dict(
        speed=float(sp[k]),
        n=n,
        angle_grid=an.tolist(),
        p_conv=P[k].tolist(),
        angle_mc=a_mc.round(3).tolist(),
        p_mc=p_mc,
        se_mc=se_mc,
    )
    zs = [(pm - pc) / s for pm, pc, s in zip(p_mc, p_conv_at, se_mc)]
    summary["profile_at_best_speed"] = dict(
        speed=float(sp[k]),
        angle=a_mc.round(3).tolist(),
        p_mc=p_mc,
        se=se_mc,
        p_conv=p_conv_at,
        z=[round(x, 2) for x in zs],
    )
    figure_gradient(grad, profile, out / "gradient.png")
    summary["seconds_total"] = round(time.perf_counter() - t_all, 1)
    summary["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}; {summary['seconds_total']} s", flush=True)


if __name__ == "__main__":
    rollax.configure()  # one JAX CPU device per core, compile cache (before any JAX work)
    main()
