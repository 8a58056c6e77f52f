"""Steady motions of the ball rolling on the rim and their physical limits (Sect. 3 of the paper).

Everything is computed from :class:`rollax.models.rim.Rim`: the trivial (46) and non-trivial (47)-(48)
steady motions, the stability function h (54) next to the 4 x 4 linearisation (50)-(51) obtained
by autodiff of ``Rim.vector_field``, the characteristic angles beta* and beta-hat (55), the
slip / fall limit (56)-(57) with beta-tilde = arctan(mu), the kinetic-energy bound (59), the
realisable set of Fig. 8 and, for the regions A, B, C, the smallest throw speed at which each
exists (Sect. 3.5).

The non-trivial steady motions are symmetric under (w2, w3) -> (-w2, -w3) (Sect. 4.1), so every
limit depends on w30 only through W = w30^2: for fixed beta0, stability is a quadratic inequality
in W, no-slip two linear ones and the throw speed squared is A W + B + C / W. The minimum
throw speed of a region is therefore found exactly in W for each beta0 and by nested grid
refinement in beta0, i.e. on the boundary of the region, not on a grid of (beta0, w30).
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Complex, Float

from rollax._core._validate import check_positive, check_range
from rollax.models.rim import Rim, check_steady_args

Scalar = Float[Array, ""]

#: beta0 ranges (open intervals) of the regions of Fig. 8.
REGIONS: dict[str, tuple[float, float]] = {
    "A": (0.0, math.pi / 2),  # inside, above the rim plane
    "B": (-math.pi / 2, 0.0),  # inside, below
    "C": (math.pi / 2, math.pi),  # outside, above
}


# ---------------------------------------------------------------------------- input checks
def _check_steady_args(beta0, omega30) -> None:
    """Raise ValueError on the singular lines cos(beta0) = 0 and omega30 = 0 of (48)."""
    check_steady_args(beta0, omega30)


def _mu(rim: Rim, mu) -> float:
    mu = rim.mu if mu is None else mu
    check_range("mu", mu, 0.0, math.inf, lo_open=True)
    return mu


# ---------------------------------------------------------------------------- steady motions
def trivial_steady_state(omega20, top: bool = True) -> Float[Array, "4"]:
    """Trivial steady motion x0^+(omega20) (``top``) or x0^-(omega20) of eq. (46)."""
    omega20 = jnp.asarray(omega20, dtype=float)
    beta = (1.0 if top else -1.0) * jnp.pi / 2
    return jnp.stack([beta + 0.0 * omega20, 0.0 * omega20, omega20, 0.0 * omega20])


def trivial_unstable_eigenvalue(rim: Rim) -> Scalar:
    """The positive eigenvalue sqrt((g/rho)/(1+j)) every x0^+ has (Sect. 3, after Fig. 4)."""
    return jnp.sqrt(rim.g / rim.rho / (1 + rim.j))


def steady_state(rim: Rim, beta0, omega30) -> Float[Array, "4"]:
    """Non-trivial steady motion (beta0, 0, omega20(beta0, omega30), omega30), eqs. (47)-(48).

    Raises ValueError on the singular lines cos(beta0) = 0 or omega30 = 0 (concrete inputs).
    """
    _check_steady_args(beta0, omega30)
    return rim.steady_state(beta0, omega30)


def jacobian(rim: Rim, x: Float[Array, "4"]) -> Float[Array, "4 4"]:
    """The 4 x 4 linearisation A of the rolling equations (33)-(36) at ``x``, eqs. (50)-(51), by autodiff."""
    return jax.jacfwd(rim.vector_field)(jnp.asarray(x, dtype=float))


def steady_jacobian(rim: Rim, beta0, omega30) -> Float[Array, "4 4"]:
    """A(beta0, omega30) of eq. (51): the autodiff Jacobian at the steady motion (47)."""
    return jacobian(rim, rim.steady_state(beta0, omega30))


def h_autodiff(rim: Rim, beta0, omega30) -> Scalar:
    """h = lambda_{3,4}^2 from the autodiff Jacobian, eq. (53): tr(A^2)/2.

    The characteristic polynomial of A is lambda^2 (lambda^2 - h) (eqs. (52)-(53)), so the sum
    of the squared eigenvalues, tr(A^2), is 2 h. Independent of the closed form (54).
    """
    A = steady_jacobian(rim, beta0, omega30)
    return 0.5 * jnp.trace(A @ A)


def stability_h(rim: Rim, beta0, omega30) -> Scalar:
    """Closed-form stability function h(beta0, omega30) of eq. (54) (< 0: neutrally stable)."""
    return rim.stability_h(beta0, omega30)


def steady_eigenvalues(rim: Rim, beta0, omega30) -> Complex[Array, "4"]:
    """Eigenvalues of the autodiff linearisation at the steady motion, eqs. (52)-(53).

    Sorted by modulus: the two zero ones first, then the pair +-sqrt(h).
    """
    _check_steady_args(beta0, omega30)
    lam = jnp.linalg.eigvals(steady_jacobian(rim, beta0, omega30))
    return lam[jnp.argsort(jnp.abs(lam))]


def is_stable(rim: Rim, beta0, omega30) -> Bool[Array, "..."]:
    """Linear (neutral) stability of the steady motion: h < 0, Sect. 3.2 and Fig. 5."""
    return rim.stability_h(beta0, omega30) < 0


def beta_star(rim: Rim) -> float:
    """beta* = arccos((1 + j) rho / R): the unstable band |beta0| < beta* for large |omega30| (Sect. 3.2).

    Raises ValueError when R <= (1 + j) rho, where the paper's assumption fails.
    """
    c = (1 + rim.j) * rim.rho / rim.R
    if not c < 1.0:
        raise ValueError(
            f"beta* needs R > (1 + j) rho; got R = {float(rim.R)!r}, (1 + j) rho = "
            f"{float((1 + rim.j) * rim.rho)!r}"
        )
    return math.acos(c)


def beta_hat(rim: Rim) -> float:
    """beta-hat = arccos(c), c the root in (-1, 1) of rho^2 (1+j) c^3 - R rho c^2 + R^2 c - R rho (1+j) = 0, eq. (55).

    The smallest |beta0| of a stable non-trivial steady motion. The cubic is increasing on
    (-1, 1) when R > (1 + j) rho, so the root is found by bisection to round-off.
    Raises ValueError when R <= (1 + j) rho.
    """
    beta_star(rim)  # same assumption
    rho, R, k = float(rim.rho), float(rim.R), 1.0 + float(rim.j)

    def p(c):
        return rho**2 * k * c**3 - R * rho * c**2 + R**2 * c - R * rho * k

    lo, hi = -1.0, 1.0
    if not (p(lo) < 0.0 < p(hi)):
        raise ValueError("eq. (55) has no root in (-1, 1) for these parameters")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if p(mid) < 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-17:
            break
    return math.acos(0.5 * (lo + hi))


def beta_tilde(mu) -> float:
    """beta-tilde = arctan(mu), the asymptotic half-width of the no-slip bands (Sect. 3.3)."""
    mu = check_range("mu", mu, 0.0, math.inf)
    return math.atan(mu)


# ---------------------------------------------------------------------------- forces at steady motions
def steady_forces(rim: Rim, beta0, omega30) -> tuple[Scalar, Scalar]:
    """(F2, F3) per unit mass at the steady motion (47), the two sides of eq. (56) (F1 = 0 there).

    F2 = r^2 w30^2 cos(b0)/(R - rho cos(b0)) + g sin(b0),
    F3 = g cos(b0) - r^2 w30^2 sin(b0)/(R - rho cos(b0)).
    """
    c, s = jnp.cos(beta0), jnp.sin(beta0)
    D = rim.R - rim.rho * c
    k = rim.r**2 * omega30**2 / D
    return k * c + rim.g * s, rim.g * c - k * s


def slip_margin(rim: Rim, beta0, omega30, mu=None) -> Scalar:
    """mu F2 - |F3| per unit mass at the steady motion, eq. (56) (>= 0: rolls without slipping).

    ``mu`` defaults to ``rim.mu``; ``mu = inf`` gives F2, the falling condition (57).
    """
    mu = _mu(rim, mu)
    F2, F3 = steady_forces(rim, beta0, omega30)
    inf = jnp.isinf(mu)
    return jnp.where(inf, F2, jnp.where(inf, 1.0, mu) * F2 - jnp.abs(F3))


def fall_margin(rim: Rim, beta0, omega30) -> Scalar:
    """F2 per unit mass at the steady motion, eq. (57) (>= 0: the ball stays on the rim)."""
    return steady_forces(rim, beta0, omega30)[0]


def throw_speed(rim: Rim, beta0, omega30) -> Scalar:
    """Throw speed whose energy equals the kinetic energy of the steady motion, eq. (59).

    v^2 = j r^2 omega20^2 + (1 + j) r^2 omega30^2 = 2 T / m (eq. (58)).
    """
    w2 = rim.steady_omega2(beta0, omega30)
    return jnp.sqrt(rim.j * rim.r**2 * w2**2 + (1 + rim.j) * rim.r**2 * omega30**2)


def realisable(rim: Rim, beta0, omega30, v_throw, mu=None) -> Bool[Array, "..."]:
    """Fig. 8: stable (h < 0), rolling without slipping (56) and within the energy (59) of ``v_throw``."""
    check_positive("v_throw", v_throw)
    return (
        (rim.stability_h(beta0, omega30) < 0)
        & (slip_margin(rim, beta0, omega30, mu) >= 0)
        & (throw_speed(rim, beta0, omega30) <= v_throw)
    )


def region_of(beta0) -> Array:
    """Index 0, 1, 2 of region A, B, C that beta0 (wrapped to [-pi, pi)) lies in, -1 if none."""
    b = jnp.mod(jnp.asarray(beta0) + jnp.pi, 2 * jnp.pi) - jnp.pi
    out = jnp.full(b.shape, -1)
    for i, (lo, hi) in enumerate(REGIONS.values()):
        out = jnp.where((b > lo) & (b < hi), i, out)
    return out


# ---------------------------------------------------------------------------- minimum throw speed
class ThrowSpeedMinimum(NamedTuple):
    """Smallest throw speed at which a region of Fig. 8 exists, and where it is attained."""

    region: str
    v_min: float  # m/s
    beta0: float  # rad
    omega30: float  # 1/s (the motion with -omega30, -omega20 is equivalent)
    omega20: float  # 1/s
    active: tuple[str, ...]  # constraints active at the minimum: "stability" (h = 0), "no-slip"


@eqx.filter_jit
def _best_W(rim: Rim, mu, beta0: Float[Array, " n"]):
    """For each beta0: min over W = w30^2 > 0 of v^2 subject to h <= 0 and mu F2 >= |F3|.

    All functions of W are explicit (quadratic q = W h, linear margins, convex v^2), so the
    minimum lies at the unconstrained minimiser of v^2 or at a root of a constraint; returns
    (v^2 at the best feasible candidate, inf if none, and that W).
    """
    r, R, j, g, rho = rim.r, rim.R, rim.j, rim.g, rim.rho
    c, s = jnp.cos(beta0), jnp.sin(beta0)
    D = R - rho * c
    # stability: q(W) = W h(W) = qa W^2 + qb W + qc <= 0, from eq. (54)
    qa = r**2 * (R * c - (1 + j) * rho) / ((1 + j) * rho * D**2)
    qb = -2 * g * s * c / ((1 + j) * D)
    qc = g**2 * c * D / (r**2 * rho * (1 + j) ** 2)
    # no-slip: F2 -+ F3 / mu = lp W + l0 >= 0, eq. (56) divided by mu (mu = inf: eq. (57))
    k = r**2 / D
    imu = 1.0 / mu
    lp1, l01 = k * c + imu * k * s, g * s - imu * g * c
    lp2, l02 = k * c - imu * k * s, g * s + imu * g * c
    # v^2 = fa W + fb + fc / W, eq. (59) with (48)
    al = (1 + j) * s / (j * c)
    be = -g * D / (j * r**2)
    fa = j * r**2 * al**2 + (1 + j) * r**2
    fb = 2 * j * r**2 * al * be
    fc = j * r**2 * be**2

    disc = qb**2 - 4 * qa * qc
    sq = jnp.sqrt(jnp.maximum(disc, 0.0))
    # stable roots, written to avoid cancellation
    t = -0.5 * (qb + jnp.where(qb >= 0, sq, -sq))
    q1 = t / qa
    q2 = qc / t
    cand = jnp.stack([jnp.sqrt(fc / fa), q1, q2, -l01 / lp1, -l02 / lp2], axis=-1)  # (n, 5)
    real = jnp.stack([jnp.ones_like(disc, bool), disc >= 0, disc >= 0, lp1 != 0, lp2 != 0], axis=-1)
    W = jnp.where(real & jnp.isfinite(cand) & (cand > 0), cand, 1.0)
    ok = real & jnp.isfinite(cand) & (cand > 0)

    def rel(val, scale):
        return val / jnp.maximum(scale, 1e-300)

    qv = rel(
        qa[:, None] * W**2 + qb[:, None] * W + qc[:, None],
        jnp.abs(qa[:, None]) * W**2 + jnp.abs(qb[:, None]) * W + jnp.abs(qc[:, None]),
    )
    m1 = rel(lp1[:, None] * W + l01[:, None], jnp.abs(lp1[:, None]) * W + jnp.abs(l01[:, None]))
    m2 = rel(lp2[:, None] * W + l02[:, None], jnp.abs(lp2[:, None]) * W + jnp.abs(l02[:, None]))
    tol = 1e-11
    feas = ok & (qv <= tol) & (m1 >= -tol) & (m2 >= -tol)
    f = fa[:, None] * W + fb[:, None] + fc[:, None] / W
    f = jnp.where(feas, f, jnp.inf)
    i = jnp.argmin(f, axis=-1)[:, None]
    return jnp.take_along_axis(f, i, -1)[:, 0], jnp.take_along_axis(W, i, -1)[:, 0]


def min_throw_speed(
    rim: Rim, region: str, mu=None, n_grid: int = 4001, n_zoom: int = 10
) -> ThrowSpeedMinimum:
    """Smallest throw speed v at which ``region`` ("A", "B" or "C") of Fig. 8 is non-empty (Sect. 3.5).

    Minimises v(beta0, omega30) of eq. (59) over the steady motions that are stable (h <= 0,
    eq. (54)) and roll without slipping (eq. (56), ``mu`` defaults to ``rim.mu``) with beta0 in
    the region's open interval. Exact in W = omega30^2 for each beta0 (see :func:`_best_W`),
    then a grid of ``n_grid`` beta0 values refined ``n_zoom`` times by 50x around the best one.
    Reports the constraints active at the minimum (relative residual < 1e-7).
    """
    if region not in REGIONS:
        raise ValueError(f"region = {region!r} must be one of {sorted(REGIONS)}")
    mu = _mu(rim, mu)
    if n_grid < 3 or n_zoom < 0:
        raise ValueError("n_grid must be >= 3 and n_zoom >= 0")
    lo, hi = REGIONS[region]
    pad = 1e-9
    grid = jnp.linspace(lo + pad, hi - pad, n_grid)
    f, _ = _best_W(rim, mu, grid)
    i = int(jnp.argmin(f))
    if not bool(jnp.isfinite(f[i])):
        raise ValueError(f"region {region} is empty for these parameters")
    a, b = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, n_grid - 1)])
    for _ in range(n_zoom):
        g = jnp.linspace(a, b, 101)
        f, _ = _best_W(rim, mu, g)
        i = int(jnp.argmin(f))
        a, b = float(g[max(i - 1, 0)]), float(g[min(i + 1, 100)])
    g = jnp.linspace(a, b, 101)
    f, W = _best_W(rim, mu, g)
    i = int(jnp.argmin(f))
    beta0, W0 = float(g[i]), float(W[i])
    w30 = math.sqrt(W0)
    active = active_constraints(rim, beta0, w30, mu)
    return ThrowSpeedMinimum(
        region=region,
        v_min=float(math.sqrt(float(f[i]))),
        beta0=beta0,
        omega30=w30,
        omega20=float(rim.steady_omega2(beta0, w30)),
        active=active,
    )


def active_constraints(rim: Rim, beta0: float, omega30: float, mu=None, tol: float = 1e-7):
    """Names of the constraints of Fig. 8 that hold with equality at (beta0, omega30).

    "stability": h = 0 (eq. (54)), relative to the size of its three terms;
    "no-slip": mu F2 = |F3| (eq. (56); F2 = 0 for mu = inf), relative to |F2| + |F3|/mu.
    """
    mu = _mu(rim, mu)
    r, R, j, g, rho = (float(v) for v in (rim.r, rim.R, rim.j, rim.g, rim.rho))
    c, s = math.cos(beta0), math.sin(beta0)
    D = R - rho * c
    W = omega30**2
    terms = (
        W * r**2 * (R * c - (1 + j) * rho) / ((1 + j) * rho * D**2),
        -2 * g * s * c / ((1 + j) * D),
        g**2 * c * D / (r**2 * rho * (1 + j) ** 2 * W),
    )
    out = []
    if abs(sum(terms)) <= tol * sum(abs(t) for t in terms):
        out.append("stability")
    F2 = r**2 * W * c / D + g * s
    F3 = g * c - r**2 * W * s / D
    if abs(F2 - abs(F3) / mu) <= tol * (abs(F2) + abs(F3) / mu):
        out.append("no-slip")
    return tuple(out)


def summary(rim: Rim, mu=None) -> dict:
    """beta*, beta-hat (55), beta-tilde (Sect. 3.3) and the minimum throw speeds of regions A, B, C.

    Keys: beta_star, beta_hat, beta_tilde (rad; None where undefined for the parameters),
    v_min_A, v_min_B, v_min_C (m/s; None if the region is empty) and, per region, the
    minimiser and its active constraints under ``minimum_A`` etc.
    """
    mu = _mu(rim, mu)
    out: dict = {}
    try:
        out["beta_star"] = beta_star(rim)
        out["beta_hat"] = beta_hat(rim)
    except ValueError:
        out["beta_star"] = out["beta_hat"] = None
    out["beta_tilde"] = beta_tilde(mu)
    for name in REGIONS:
        try:
            m = min_throw_speed(rim, name, mu)
        except ValueError:
            out[f"v_min_{name}"] = None
            out[f"minimum_{name}"] = None
            continue
        out[f"v_min_{name}"] = m.v_min
        out[f"minimum_{name}"] = {
            "beta0": m.beta0,
            "omega30": m.omega30,
            "omega20": m.omega20,
            "active": list(m.active),
        }
    return out


def steady_beta(rim: Rim, omega2: float, omega3: float, lo: float, hi: float) -> list[float]:
    """Angles beta0 in [lo, hi] of the steady motions (47)-(48) with the given w2 and w3."""
    b = np.linspace(lo, hi, 2001)
    w2 = np.asarray(rim.steady_omega2(jnp.asarray(b), omega3)) - omega2
    roots = []
    for i in np.nonzero(np.sign(w2[:-1]) * np.sign(w2[1:]) < 0)[0]:
        a_, b_ = b[i], b[i + 1]
        for _ in range(60):
            m = 0.5 * (a_ + b_)
            fm = float(rim.steady_omega2(m, omega3)) - omega2
            fa = float(rim.steady_omega2(a_, omega3)) - omega2
            a_, b_ = (m, b_) if np.sign(fm) == np.sign(fa) else (a_, m)
        if abs(np.cos(0.5 * (a_ + b_))) > 1e-6:  # not the pole at beta = pi/2
            roots.append(0.5 * (a_ + b_))
    return roots


# ------------------------------------------------------------------ data of Figs. 3-8
FIGURES = (3, 5, 6, 7, 8)


def figure_grid(w3_max: float = 60.0, nb: int = 629, nw: int = 480):
    """(beta0, omega30) grid of Figs. 3-8 (``meshgrid``, indexed [omega30, beta0]); ``nw`` even
    so omega30 = 0 is never hit."""
    b = np.linspace(-np.pi, np.pi, nb)
    w = np.linspace(-w3_max, w3_max, nw)
    return np.meshgrid(b, w, indexing="xy")


def figure_data(n: int, rim: Rim, v_throw: float = 10.0, w3_max: float = 60.0) -> dict:
    """Arrays of Fig. ``n`` (3, 5, 6, 7 or 8 of the rim paper) over the (beta0, omega30) plane:
    ``beta0``, ``omega30`` and the figure's fields (omega20, h, slip and fall margins, throw
    speeds, realisable regions, minimum throw speeds)."""
    B, W = figure_grid(w3_max)
    Bj, Wj = jnp.asarray(B), jnp.asarray(W)
    d: dict[str, np.ndarray | float] = {"beta0": B, "omega30": W}
    if n == 3:
        d["omega20"] = np.asarray(rim.steady_omega2(Bj, Wj))
    elif n == 5:
        d["h"] = np.asarray(rim.stability_h(Bj, Wj))
        d["beta_star"] = beta_star(rim)
        d["beta_hat"] = beta_hat(rim)
    elif n == 6:
        mus = [0.25, 0.5, 1.0, 2.0, 4.0]
        d["mu"] = np.array(mus)
        d["margin"] = np.stack([np.asarray(slip_margin(rim, Bj, Wj, mu)) for mu in mus])
        d["fall_margin"] = np.asarray(fall_margin(rim, Bj, Wj))
        d["margin_rim_mu"] = np.asarray(slip_margin(rim, Bj, Wj))
        d["beta_tilde"] = beta_tilde(rim.mu)
    elif n == 7:
        d["v_required"] = np.asarray(throw_speed(rim, Bj, Wj))
        d["v_levels"] = np.array([2.0, 4.0, 6.0, 8.0, v_throw])
    elif n == 8:
        d["realisable"] = np.asarray(realisable(rim, Bj, Wj, v_throw))
        d["omega20"] = np.asarray(rim.steady_omega2(Bj, Wj))
        d["v_throw"] = v_throw
        for name in REGIONS:
            try:
                m = min_throw_speed(rim, name)
                d[f"v_min_{name}"] = m.v_min
                d[f"argmin_{name}"] = np.array([m.beta0, m.omega30])
            except ValueError:
                pass
    else:
        raise ValueError(f"figure = {n} must be one of {FIGURES}")
    return d


def compact_figure_data(d: dict) -> dict:
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


def h_min_omega3(rim: Rim, beta0: float) -> float:
    """|omega30| minimising h at fixed beta0: W = sqrt(c / a) of h = a W + b + c / W (eq. (54))."""
    r, R, j, g, rho = (float(v) for v in (rim.r, rim.R, rim.j, rim.g, rim.rho))
    c = math.cos(beta0)
    D = R - rho * c
    a = r**2 * (R * c - (1 + j) * rho) / ((1 + j) * rho * D**2)
    cc = g**2 * c * D / (r**2 * rho * (1 + j) ** 2)
    return math.sqrt(math.sqrt(cc / a))


def write_figure(n: int, rim: Rim, out, v_throw: float = 10.0, w3_max: float = 60.0) -> str:
    """Write ``fig{n}.png`` (:func:`rollax.plot.plot_steady_figure`) and ``fig{n}.npz``
    (:func:`compact_figure_data`) into ``out``; returns the PNG path."""
    import os

    from rollax.plot import plot_steady_figure

    from rollax.plot import rim_parameters

    d = figure_data(n, rim, v_throw, w3_max)
    png = os.path.join(out, f"fig{n}.png")
    plot_steady_figure(
        n,
        d,
        png,
        rim_mu=float(rim.mu),
        v_throw=v_throw,
        regions=REGIONS,
        omega30_h_min=h_min_omega3(rim, d["beta_hat"]) if n == 5 else None,
        parameters=rim_parameters(rim) + f", v_throw = {v_throw:g} m/s",
    )
    data = compact_figure_data(d)
    # what the data were computed with, and their units (JSON text: np.load reads it without
    # pickle)
    data["parameters"] = np.asarray(json.dumps(figure_parameters(rim, v_throw, w3_max)))
    data["units"] = np.asarray(json.dumps(FIGURE_UNITS))
    np.savez_compressed(os.path.join(out, f"fig{n}.npz"), **data)
    return png


#: The units of the arrays :func:`write_figure` saves (by name; ``*_coarse`` and
#: ``*_nonneg`` keep their field's unit, booleans are "1")
FIGURE_UNITS = {
    "beta0": "rad",
    "omega30": "1/s",
    "omega20": "1/s",
    "h": "1/s^2",
    "beta_star": "rad",
    "beta_hat": "rad",
    "beta_tilde": "rad",
    "mu": "1",
    "v_required": "m/s",
    "v_levels": "m/s",
    "v_throw": "m/s",
    "v_min_A": "m/s",
    "v_min_B": "m/s",
    "v_min_C": "m/s",
    "argmin_A": "rad, 1/s",
    "argmin_B": "rad, 1/s",
    "argmin_C": "rad, 1/s",
    "margin": "m/s^2",
    "fall_margin": "m/s^2",
    "margin_rim_mu": "m/s^2",
    "realisable": "1",
    "stable": "1",
}


def figure_parameters(rim: Rim, v_throw: float, w3_max: float) -> dict:
    """The rim's parameters and the figure's settings, each as ``{"value", "units"}``."""
    from rollax.plot import _RIM_UNITS

    out = {
        k: {"value": float(getattr(rim, k)), "units": _RIM_UNITS[k].replace("$^2$", "^2") or "1"}
        for k in ("r", "a", "R", "j", "g", "mu", "m", "k_d", "k_r")
        if hasattr(rim, k)
    }
    out["v_throw"] = {"value": float(v_throw), "units": "m/s"}
    out["w3_max"] = {"value": float(w3_max), "units": "1/s"}
    return out
