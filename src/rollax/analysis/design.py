"""Experiment design for the rim: which start to throw the ball onto the rim with.

:func:`rim_starts` draws feasible throws (starts near the rim paper's steady motions, eq. (48),
whose camera record stays on the rim), :func:`design_rim` ranks them by the information a
record gives about the dissipation rates ``k_d`` and ``k_r`` (:func:`rollax.design`), and
:func:`rim_study` judges it against random throws on a hidden truth: the designed record and
``n_random`` random feasible ones are "filmed" (simulated with the truth and camera noise) and
fitted, and their errors compared. :func:`slide_starts_discrimination` ranks the starts of
a sliding, spinning disc by how well its record tells the friction paper's two contact-pressure
models apart (:func:`rollax.discriminate`, T-optimal).
"""

from __future__ import annotations

import math
from typing import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np

import warnings

from rollax._drivers._design import Design, Discrimination, design, discriminate, simulate_record
from rollax._drivers._identify import Fit, identify
from rollax.models.friction.exact import exact_law
from rollax.models.friction.sliding import SlidingBody
from rollax.models.rim import Rim
from rollax.systems.friction import Sliding
from rollax.systems.rim import RimTracked

#: the camera's noise levels (d [m], z [m], alpha [rad]) of the tests' records
#: (``tests/rim_records.py``)
CAMERA_SIGMA = (1e-3, 1e-3, 2e-3)


def rim_starts(
    n: int,
    *,
    rim: Rim | None = None,
    seed: int = 0,
    omega3: tuple[float, float] = (5.0, 15.0),
    omega2: tuple[float, float] = (25.0, 50.0),
    beta_jitter: float = 0.01,
    omega1: tuple[float, float] = (-1.0, 1.0),
    spin_jitter: float = 0.02,
) -> np.ndarray:
    """``n`` throws ``(beta, omega1, omega2, omega3, alpha)`` onto the rim, drawn around its
    steady motions: ``omega3`` and a target spin ``omega2`` uniform in their ranges [1/s], the
    steady angle beta0 where eq. (48) gives that spin (one of its roots at random), then beta0
    +- ``beta_jitter`` [rad], omega1 uniform in ``omega1``, omega2 and omega3 within +-
    ``spin_jitter`` (relative), alpha uniform. Whether the ball stays on the rim for a record
    is :func:`rollax.design`'s to say (``ends_early``)."""
    if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1):
        raise ValueError(f"n = {n!r} must be an integer >= 1")
    for name, rg in (("omega3", omega3), ("omega2", omega2), ("omega1", omega1)):
        if len(rg) != 2 or not all(math.isfinite(float(v)) for v in rg) or rg[0] > rg[1]:
            raise ValueError(f"{name} = {rg!r} must be a range (lo, hi) with lo <= hi")
    if not omega3[0] > 0:
        raise ValueError(f"omega3 = {omega3!r} must be > 0 (eq. (48) has a pole at omega3 = 0)")
    rim = rim or Rim()
    rng = np.random.default_rng(seed)
    grid = np.linspace(1e-6, math.pi / 2 - 1e-6, 400)
    out = []
    while len(out) < n:
        w3 = rng.uniform(*omega3)
        w2t = rng.uniform(*omega2)
        f = np.asarray(rim.steady_omega2(grid, w3)) - w2t
        roots = np.nonzero(np.sign(f[:-1]) != np.sign(f[1:]))[0]
        if roots.size == 0:
            continue
        i = int(rng.choice(roots))
        a, b = grid[i], grid[i + 1]
        for _ in range(60):  # bisection
            mid = 0.5 * (a + b)
            fm = float(rim.steady_omega2(mid, w3)) - w2t
            fa = float(rim.steady_omega2(a, w3)) - w2t
            a, b = (a, mid) if np.sign(fm) != np.sign(fa) else (mid, b)
        b0 = 0.5 * (a + b)
        w2s = float(rim.steady_omega2(b0, w3))
        out.append([
            b0 + rng.uniform(-beta_jitter, beta_jitter),
            rng.uniform(*omega1),
            w2s * (1 + rng.uniform(-spin_jitter, spin_jitter)),
            w3 * (1 + rng.uniform(-spin_jitter, spin_jitter)),
            rng.uniform(-math.pi, math.pi),
        ])  # fmt: skip
    return np.array(out)


def rim_times(duration: float = 3.0, hz: float = 60.0) -> np.ndarray:
    """The camera's frame times of a record of ``duration`` [s] at ``hz`` frames per second."""
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"duration = {duration!r} must be finite and > 0 [s]")
    if not (math.isfinite(hz) and hz > 0):
        raise ValueError(f"hz = {hz!r} must be finite and > 0 [frames/s]")
    return np.arange(math.floor(duration * hz * (1 + 1e-12)) + 1) / hz


def design_rim(
    candidates,
    *,
    rim: Rim | None = None,
    prior: Fit | dict | None = None,
    params: Sequence[str] = ("k_d", "k_r"),
    duration: float = 3.0,
    hz: float = 60.0,
    sigma=CAMERA_SIGMA,
    criterion: str = "D",
    samples: int = 0,
    progress: bool = True,
) -> Design:
    """Rank throws onto the rim (``candidates`` ``(m, 5)``, e.g. :func:`rim_starts`) by what a
    camera record of ``duration`` s at ``hz`` tells about ``params`` (:func:`rollax.design`
    on :class:`rollax.systems.RimTracked`, observing ``(d, z, alpha)`` with noise ``sigma``,
    the whole initial state fitted too). ``rim``: the current estimate (default: Table 1 with
    ``k_d = k_r = 0.02`` /s, mid-range of the tests' truths)."""
    rim = rim or Rim(k_d=0.02, k_r=0.02)
    return design(
        RimTracked(rim),
        params,
        candidates,
        rim_times(duration, hz),
        observe="camera",
        sigma=sigma,
        prior=prior,
        criterion=criterion,
        samples=samples,
        progress=progress,
    )


def _fit_record(system, obs, params, y0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return identify(system, obs, list(params), y0=y0, robust=False, profile=False,
                        progress=False)  # fmt: skip


def rim_study(
    truth: Rim,
    candidates,
    *,
    estimate: Rim | None = None,
    params: Sequence[str] = ("k_d", "k_r"),
    n_random: int = 20,
    duration: float = 3.0,
    hz: float = 60.0,
    sigma=CAMERA_SIGMA,
    criterion: str = "D",
    pilot: bool = True,
    seed: int = 0,
) -> dict:
    """One designed throw against ``n_random`` random feasible ones, on a hidden ``truth``.

    ``pilot``: first one random feasible throw (ranked at ``estimate``) is filmed and fitted,
    and the design is made at its fitted values (the information is local: a design made at
    a guess far from the truth predicts the wrong errors; measured: 9x on a truth with
    ``k_r`` 25x below the guess). The throws ``candidates`` are ranked (:func:`design_rim`,
    each record's own information: no prior); the best and ``n_random`` feasible others drawn at random are simulated with ``truth`` and
    camera noise (:func:`rollax.simulate_record`) and fitted
    (:func:`rollax.identify` of ``params`` and the initial state, from the thrown start).
    Returns ``{"designed": record, "random": [record, ...], "design": Design}``;
    ``"pilot"``: its Fit (or ``None``); a record
    ``{"index", "error" (fit - truth), "se_fit", "se_predicted" (the design's, that record
    alone), "corr_fit" (the parameters' correlation), "status"}``."""
    est: Rim = estimate if estimate is not None else Rim(k_d=0.02, k_r=0.02)
    rng = np.random.default_rng(seed)
    t = rim_times(duration, hz)
    C = np.asarray(candidates, float)
    pilot_fit = None
    if pilot:
        d0 = design_rim(candidates, rim=est, params=params, duration=duration, hz=hz,
                        sigma=sigma, criterion=criterion, progress=False)  # fmt: skip
        i0 = int(rng.choice(np.flatnonzero(d0.feasible)))
        obs = simulate_record(RimTracked(truth), C[i0], t, observe="camera", sigma=sigma,
                              seed=int(rng.integers(2**31)))  # fmt: skip
        pilot_fit = _fit_record(RimTracked(est), obs, params, C[i0])
        vals = {n: max(float(v), 0.0) for n, v in zip(params, pilot_fit.values)}
        est = eqx.tree_at(lambda r: [getattr(r, n) for n in params], est,
                               [jnp.asarray(vals[n]) for n in params])  # fmt: skip
    d = design_rim(candidates, rim=est, params=params, duration=duration, hz=hz,
                   sigma=sigma, criterion=criterion, progress=False)  # fmt: skip
    feas = np.flatnonzero(d.feasible)
    if feas.size < 2:
        raise ValueError(f"{feas.size} feasible candidates: at least 2 are needed")
    pick = rng.choice(feas[feas != d.best], size=min(n_random, feas.size - 1), replace=False)
    true = np.array([float(getattr(truth, n)) for n in params])

    def run(i, s):
        obs = simulate_record(RimTracked(truth), C[i], t, observe="camera", sigma=sigma, seed=s)
        f = _fit_record(RimTracked(est), obs, params, C[i])
        p = len(params)
        return {
            "index": int(i),
            "error": np.asarray(f.values[:p]) - true,
            "se_fit": np.asarray(f.std_errors[:p]),
            "se_predicted": d.std_errors_record[i],
            "corr_fit": float(f.correlation[0, 1]) if p > 1 else float("nan"),
            "status": f.status,
            "rows": int(obs.t.shape[0]),
        }

    seeds = rng.integers(2**31, size=len(pick) + 1)
    return {
        "designed": run(d.best, int(seeds[0])),
        "random": [run(i, int(s)) for i, s in zip(pick, seeds[1:])],
        "design": d,
        "pilot": pilot_fit,
    }


def slide_starts_discrimination(
    starts,
    *,
    mu: float = 0.3,
    m: float = 1.0,
    j: float = 0.5,
    R_bar: float = 0.1,
    R: float = 0.05,
    g: float = 9.81,
    hz: float = 100.0,
    duration: float = 1.5,
    sigma=(0.005, 0.1),
    cut: float = 0.9,
) -> Discrimination:
    """Which start ``(speed [m/s], spin [rad/s])`` of a sliding disc (``starts`` ``(m, 2)``)
    tells the uniform (56) from the Hertz (61) contact pressure best: a record of ``|u|`` and
    ``omega_z`` at ``hz`` for ``duration`` s (ending at the stop) with noise ``sigma``, as
    :func:`rollax.analysis.identification.fit_slide` fits it (mu and the start refitted), cut
    at ``cut`` of the way to the stop (a fit cannot follow the force's jump at the stop).
    ``delta_chi2`` is the smaller of the two directions (either model may be the true one);
    :data:`rollax.analysis.identification.DECISIVE_DCHI2` (4) is what ``fit_slide`` needs."""
    S = np.asarray(starts, float)
    if S.ndim != 2 or S.shape[1] != 2:
        raise ValueError(f"starts has shape {S.shape}; it must be (m, 2): (speed, spin)")
    models = {
        p: Sliding(SlidingBody(exact_law(p, mu=mu, P=m * g, R=R), m=m, j=j, R_bar=R_bar))
        for p in ("uniform", "hertz")
    }

    def states(p):  # (speed, 0, rho omega_z): each model's rho measures the spin its own way
        rho = float(models[p].body.law.rho)  # pyright: ignore[reportAttributeAccessIssue]
        return np.stack([S[:, 0], np.zeros(S.shape[0]), S[:, 1] * rho], 1)

    t = rim_times(duration, hz)
    fit_y0 = ("u_x", "rho_omega_z")
    a, b = (
        discriminate(
            models[x],
            models[y],
            ["mu"],
            states(x),
            t,
            observe="record",
            sigma=sigma,
            fit_y0=fit_y0,
            rival_candidates=states(y),
            event_cut=cut,
        )  # fmt: skip
        for x, y in (("uniform", "hertz"), ("hertz", "uniform"))
    )
    T = np.minimum(a.delta_chi2, b.delta_chi2)
    return Discrimination(
        candidates=S,
        delta_chi2=T,
        order=np.argsort(-T, kind="stable"),
        rows=np.minimum(a.rows, b.rows),
        converged=a.converged & b.converged,
        wall_time=a.wall_time + b.wall_time,
    )
