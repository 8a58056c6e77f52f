"""Shot maps and the shooter's odds: which releases go in, how, and how robustly.

* :func:`release`: the flight state of a release in the units of the shot literature (speed in
  m/s, angles in degrees, backspin in Hz);
* :func:`shot_map`: a :func:`rollax.sweep` of :class:`rollax.systems.Shot` over release speed x
  release angle (outcome, rim and board contacts, swish, time of the first contact), labelled
  and resumable like every sweep;
* :func:`make_probability`: the probability that a release goes in under the shooter's scatter
  (Gaussian speed and angle errors; Slegers et al. 2021 measured a speed sd of 0.05-0.13 m/s and
  an angle sd of about 1.3 degrees for free throws), by Monte Carlo over the batch, with its
  standard error; common random numbers (``seed``) make differences of it smooth;
* :func:`probability_map`: the make probability of every release of a map, the map's made
  indicator averaged over the scatter (a discrete convolution with the Gaussian): a map
  estimate, exact as the grid refines but biased where the grid is coarse against the scatter
  (``with_error=True`` adds a resolution error estimate per node);
* :func:`best_release`: the best release of a map (a :class:`BestRelease`): candidates from the
  map, chosen among by Monte Carlo with common random numbers, and its probability from other,
  independent draws (unbiased for the chosen release), with its standard error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import warnings

import jax.numpy as jnp
import numpy as np

from rollax._drivers._sweep import Axis, SweepResult, sweep
from rollax.models import shot as _model
from rollax.systems.shot import Shot, ShotOutcome, shot_summary

# the free throw: released 2.1 m high, 4.19 m in front of the hoop's centre (issue 40's case;
# the line is 4.225 m from the board's face, 4.6 m for the centre of a NBA/FIBA hoop 1.2 m in
# front of the baseline... the distance is an argument everywhere)
FREE_THROW_DISTANCE = 4.19
FREE_THROW_HEIGHT = 2.1
SD_SPEED = 0.09  # m/s, the middle of Slegers et al.'s 0.05-0.13 m/s
SD_ANGLE = 1.3  # degrees


def _number(name, v, ok=lambda x: True, allowed="a finite number"):
    """``v`` as a float if it is a finite real number for which ``ok`` holds, else a one-line
    ``ValueError`` naming it (NumPy scalars count as numbers)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not ok(v):
        raise ValueError(f"{name} = {v!r} is not allowed: it must be {allowed}")
    return float(v)


def _check_release(speed, angle, spin, lateral, distance, height) -> None:
    """One-line errors for a release that is not one (a release is refused before it is solved)."""
    _number("speed", speed, lambda x: x > 0, "a finite number > 0 (m/s)")
    _number("angle", angle, lambda x: -90 < x < 90, "a number in (-90, 90) (degrees)")
    _number("spin", spin, allowed="a finite number (Hz)")
    _number("lateral", lateral, lambda x: -90 < x < 90, "a number in (-90, 90) (degrees)")
    _number("distance", distance, lambda x: x > 0, "a finite number > 0 (m)")
    _number("height", height, lambda x: x > 0, "a finite number > 0 (m above the floor)")


def release(
    speed,
    angle,
    spin=0.0,
    lateral=0.0,
    distance=FREE_THROW_DISTANCE,
    height=FREE_THROW_HEIGHT,
    rim_height=_model.RIM_HEIGHT,
):
    """The flight state of a release ``distance`` (m) in front of the hoop's centre at
    ``height`` (m above the floor): ``speed`` (m/s) at ``angle`` (degrees above the horizontal),
    ``lateral`` (degrees to the left of the line to the hoop), backspin ``spin`` (Hz).
    Arrays and traced values pass as they are (``jax.vmap`` over releases); a Python or NumPy
    number that is not finite is refused by name."""
    for name, v in (("speed", speed), ("angle", angle), ("spin", spin), ("lateral", lateral)):
        if isinstance(v, numbers.Real) and not math.isfinite(v):
            raise ValueError(f"{name} = {v!r} is not allowed: it must be a finite number")
    return _model.release_state(
        distance,
        height,
        speed,
        jnp.deg2rad(angle),
        2.0 * math.pi * spin,
        jnp.deg2rad(lateral),
        rim_height,
    )


release.units = {  # pyright: ignore[reportFunctionMemberAccess]
    "speed": "m/s",
    "angle": "degree",
    "spin": "Hz",
    "lateral": "degree",
    "distance": "m",
    "height": "m",
}


def shot_map(
    shot: Shot | None = None,
    *,
    speed: Axis = Axis("speed", 6.6, 8.0, 360),
    angle: Axis = Axis("angle", 40.0, 64.0, 240),
    spin: float | Axis = 0.0,
    lateral: float = 0.0,
    distance: float = FREE_THROW_DISTANCE,
    height: float = FREE_THROW_HEIGHT,
    t_max: float = 4.0,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    chunk_size: int = 1 << 17,
    store: str | os.PathLike | None = None,
    client=None,
    progress: bool = True,
    **solver_options,
) -> SweepResult:
    """The outcome of every release of a speed x angle grid (a :func:`rollax.sweep` of
    ``shot``, default :class:`rollax.systems.Shot`): its ``outcome``
    (:class:`rollax.systems.ShotOutcome`) and in ``summary`` ``rim_contacts``, ``board_contacts``, ``swish``,
    ``t_contact``, ``t_rim``, ``t_slip`` and ``t_end`` (:func:`rollax.systems.shot.shot_summary`);
    ``dataset`` the same, labelled. The axes must be named
    ``speed`` (m/s) and ``angle`` (degrees); ``spin`` (backspin, Hz), ``lateral`` (degrees),
    ``distance`` and ``height`` (m) are fixed, or ``spin`` is a third axis (a ``rollax.Axis``
    named ``spin``): a speed x angle x backspin map, whose :func:`best_release` is the best
    backspin too. ``store``/``client``: as :func:`rollax.sweep`.

    The dataset's attributes hold the release geometry as numbers, for :func:`best_release`
    to re-simulate the map's releases: ``release_distance``, ``release_height`` (m),
    ``release_lateral`` (degrees), ``release_spin`` (Hz; absent for a backspin axis) and
    ``t_max`` (s)."""
    shot = Shot() if shot is None else shot
    spin_axis = isinstance(spin, Axis)
    named = [(speed, "speed"), (angle, "angle")] + ([(spin, "spin")] if spin_axis else [])
    for ax, name in named:
        if not isinstance(ax, Axis) or ax.name != name:
            raise ValueError(
                f"{name} = {ax!r} is not allowed: it must be a rollax.Axis named {name!r}"
            )
    # the grid's corners are releases too (a negative speed or a vertical angle is none)
    spins = (spin.lo, spin.hi) if isinstance(spin, Axis) else (spin,)
    for sp_ in (speed.lo, speed.hi):
        for an_ in (angle.lo, angle.hi):
            for sn_ in spins:
                _check_release(sp_, an_, sn_, lateral, distance, height)
    _number("t_max", t_max, lambda x: x > 0, "a finite number > 0 (s)")
    fixed = dict(lateral=float(lateral), distance=float(distance), height=float(height))
    if not isinstance(spin, Axis):
        fixed["spin"] = float(spin)
    start = functools.partial(release, rim_height=float(shot.rim_height), **fixed)
    backspin = (
        f"backspin {spin.lo}-{spin.hi} Hz" if isinstance(spin, Axis) else f"backspin {spin} Hz"
    )
    return sweep(
        shot,
        [speed, angle] + ([spin] if isinstance(spin, Axis) else []),
        start=start,
        t1=t_max,
        summary=shot_summary,
        keep_solution=False,
        chunk_size=chunk_size,
        store=store,
        client=client,
        progress=progress,
        rtol=rtol,
        atol=atol,
        attrs={
            "release": f"{distance} m in front of the hoop's centre, {height} m high, "
            f"{backspin}, lateral {lateral} degrees",
            # the release geometry as numbers: best_release re-simulates the map's releases
            **{f"release_{k}": v for k, v in fixed.items()},
            "t_max": float(t_max),
        },
        **solver_options,
    )


def _integer(name, v, lo: int) -> int:
    """``v`` as an int if it is an integer >= ``lo`` (NumPy integers count), else a one-line
    ``ValueError`` naming it."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"{name} = {v!r} is not allowed: it must be an integer >= {lo}")
    return int(v)


def _se(p: float, n: int) -> float:
    """The standard error of a fraction ``p`` of ``n`` independent draws, floored at the
    fraction one draw makes (a p of 0 or 1 is not known exactly): make_probability's rule."""
    return math.sqrt(max(p * (1 - p), 1.0 / n) / n)


def make_probability(
    shot: Shot | None = None,
    *,
    speed: float,
    angle: float,
    spin: float = 0.0,
    lateral: float = 0.0,
    distance: float = FREE_THROW_DISTANCE,
    height: float = FREE_THROW_HEIGHT,
    sd_speed: float = SD_SPEED,
    sd_angle: float = SD_ANGLE,
    n: int = 4096,
    seed: int = 0,
    t_max: float = 4.0,
    gradient: bool = False,
    **solver_options,
):
    """The probability that a release at ``speed`` (m/s) and ``angle`` (degrees) goes in when
    the shooter's speed and angle scatter with standard deviations ``sd_speed`` and
    ``sd_angle`` (independent Gaussians), and its standard error: the fraction made of ``n``
    releases drawn with ``seed`` (the same draws for every call with that seed: common random
    numbers, so that a difference of two calls has the small error of a paired difference).
    The standard error is ``sqrt(max(p (1 - p), 1/n) / n)`` (floored: a p of 0 or 1 is not
    known exactly).

    Returns ``(p, se)``; with ``gradient=True`` ``(p, se, dp, dp_se)``: also the derivatives
    ``dp = (dp/dspeed [1/(m/s)], dp/dangle [1/degree])`` of the probability with respect to
    the aimed release, and their standard errors, from the same solves by the score function
    (likelihood ratio): for a Gaussian scatter ``d/dmu E[made(mu + sd z)] = E[made z] / sd``,
    unbiased although the made indicator is discontinuous (no derivative through the solves
    is needed; both scatters must be > 0)."""
    shot = Shot() if shot is None else shot
    _check_release(speed, angle, spin, lateral, distance, height)
    _number("t_max", t_max, lambda x: x > 0, "a finite number > 0 (s)")
    n = _integer("n", n, 2)
    seed = _integer("seed", seed, 0)
    for name, v in (("sd_speed", sd_speed), ("sd_angle", sd_angle)):
        _number(name, v, lambda x: x >= 0, "a finite number >= 0")
        if gradient and v == 0:
            raise ValueError(
                f"{name} = {v!r} is not allowed with gradient=True: the score-function "
                f"derivative needs a scatter > 0"
            )
    z = np.random.default_rng(seed).standard_normal((n, 2))
    made = _made(
        shot,
        [(speed, angle, spin)],
        z,
        float(sd_speed),
        float(sd_angle),
        lateral=lateral,
        distance=distance,
        height=height,
        t_max=t_max,
        **solver_options,
    )[0]
    p = float(made.mean())
    se = _se(p, n)
    if not gradient:
        return p, se
    # the score function; p z is a zero-mean control variate, and n / (n - 1) undoes the
    # (1 - 1/n) that p taken from the same draws puts on the mean
    score = (made[:, None] - p) * z / np.array([sd_speed, sd_angle]) * (n / (n - 1))
    return p, se, score.mean(axis=0), score.std(axis=0, ddof=1) / math.sqrt(n)


def _made(
    shot, aims, z, sd_speed, sd_angle, *, lateral, distance, height, t_max, **solver_options
) -> np.ndarray:
    """The made indicator, ``(m, n)`` bools, of every aimed release of ``aims`` (``m`` rows of
    speed in m/s, angle in degrees, backspin in Hz) scattered by every draw of ``z`` (``(n, 2)``
    standard normals: speed ``v + sd_speed z[:, 0]``, angle ``a + sd_angle z[:, 1]``; the same
    draws for every aim, common random numbers), from one :func:`rollax.solve_ensemble` of all
    ``m n`` releases (one compiled kernel, one batch). ``sd_speed`` and ``sd_angle`` may also
    be one per aim (``(m,)``); ``shot`` may carry per-start parameters, aim by aim (``m n``)."""
    import rollax

    aims = np.asarray(aims, float).reshape(-1, 3)
    m, n = len(aims), len(z)
    sd_v = np.broadcast_to(np.asarray(sd_speed, float), (m,))[:, None]
    sd_a = np.broadcast_to(np.asarray(sd_angle, float), (m,))[:, None]
    # (the arithmetic of one aim: v + sd z, the same floats whatever the other aims are)
    speeds = (aims[:, 0:1] + sd_v * z[None, :, 0]).ravel()
    angles = (aims[:, 1:2] + sd_a * z[None, :, 1]).ravel()
    spins = np.repeat(aims[:, 2], n)
    starts = np.asarray(
        _batch_release(
            jnp.asarray(speeds),
            jnp.asarray(angles),
            jnp.asarray(spins),
            float(lateral),
            float(distance),
            float(height),
            float(shot.rim_height),
        )
    )
    sol = rollax.solve_ensemble(shot, starts, 0.0, float(t_max), **solver_options)
    return (np.asarray(shot.outcome(sol)) == ShotOutcome.MADE).reshape(m, n)


def _batch_release(speeds, angles, spins, lateral, distance, height, rim_height):
    import jax

    return jax.vmap(lambda v, a, w: release(v, a, w, lateral, distance, height, rim_height))(
        speeds, angles, spins
    )


def _grid_steps(result: SweepResult) -> tuple[float, float]:
    """The speed and angle steps of a map (its first two axes), which must be evenly spaced."""
    for a in result.axes[:2]:
        if a.spacing != "linear":
            raise ValueError(
                f"{a.name} axis spacing = {a.spacing!r} is not allowed: the probability map "
                f"needs an evenly spaced grid (spacing 'linear')"
            )
        if a.n < 2:
            raise ValueError(
                f"{a.name} axis n = {a.n!r} is not allowed: the probability map needs at least "
                f"2 points on it"
            )
    sp, an = (a.values for a in result.axes[:2])
    return float(sp[1] - sp[0]), float(an[1] - an[0])


def _convolve(made, dv, da, sd_speed, sd_angle) -> np.ndarray:
    """The made indicator (speed x angle [x backspin]) convolved with the scatter's Gaussian
    (steps ``dv``, ``da``; no scatter along a backspin axis); beyond the grid: misses."""
    from scipy.ndimage import gaussian_filter

    sigma = (sd_speed / dv, sd_angle / da) + (0.0,) * (made.ndim - 2)
    return gaussian_filter(np.asarray(made, float), sigma=sigma, mode="constant", cval=0.0)


def _check_scatter(sd_speed, sd_angle) -> tuple[float, float]:
    return (
        _number("sd_speed", sd_speed, lambda x: x >= 0, "a finite number >= 0 (m/s)"),
        _number("sd_angle", sd_angle, lambda x: x >= 0, "a finite number >= 0 (degrees)"),
    )


def probability_map(
    result: SweepResult,
    sd_speed: float = SD_SPEED,
    sd_angle: float = SD_ANGLE,
    *,
    with_error: bool = False,
):
    """The make probability of every release of a :func:`shot_map` under the shooter's scatter,
    as a map estimate: the made indicator convolved with the Gaussian of the scatter on the
    map's grid (releases scattered beyond the map count as misses, so the edges are low).
    Returns an array of the map's shape (a speed x angle x backspin map: each backspin's map
    convolved on its own, the backspin having no scatter).

    The estimate is biased where the grid is coarse against the scatter: the made indicator is
    taken as constant over each cell, so the boundary of the made region is placed only to
    half a cell, and the map's maximum, picked among nodes whose error happens to be
    favourable, is biased upward (issue 58: a free-throw map with steps of 0.4 and 0.5 sd gave
    0.784 at its maximum where Monte Carlo gave 0.739). It is exact as the grid refines. For a release's probability with its standard
    error use :func:`make_probability` or :func:`best_release` (Monte Carlo).

    ``with_error=True`` returns ``(p, err)``: ``err`` (the map's shape) is a resolution error
    estimate per node, not a standard error: ``|p - p2|`` on the nodes of the grid of every
    other speed and angle node, ``p2`` the same convolution on that coarser grid, brought back
    to every node by linear interpolation (clamped at the edges). The indicator's error grows
    with the step, so this difference is of the size of ``p``'s own error from the grid (on
    straight made-region boundaries it was mostly 1-2 times the true error, rarely below it);
    it says nothing of the maximum's selection bias. It needs at least 3 nodes on the speed
    and angle axes."""
    sd_speed, sd_angle = _check_scatter(sd_speed, sd_angle)
    if not isinstance(with_error, (bool, np.bool_)):
        raise ValueError(f"with_error = {with_error!r} is not allowed: it must be True or False")
    dv, da = _grid_steps(result)
    coarse = [
        f"the {name} step {step:.3g} {unit} exceeds {sd_name} = {sd:g}"
        for name, step, sd, sd_name, unit in (
            ("speed", dv, sd_speed, "sd_speed", "m/s"),
            ("angle", da, sd_angle, "sd_angle", "degrees"),
        )
        if sd > 0 and step > sd
    ]
    if coarse:
        warnings.warn(
            f"{' and '.join(coarse)}: the map is too coarse for this scatter, so the convolved "
            f"probability may be far off (check it with make_probability); refine the map",
            UserWarning,
            stacklevel=2,
        )
    made = np.asarray(result.outcome == ShotOutcome.MADE)
    p = _convolve(made, dv, da, sd_speed, sd_angle)
    if not with_error:
        return p
    for a in result.axes[:2]:
        if a.n < 3:
            raise ValueError(
                f"{a.name} axis n = {a.n!r} is not allowed with with_error=True: the resolution "
                f"error needs at least 3 points on it (the coarser grid takes every other one)"
            )
    return p, _resolution_error(result, made, p, dv, da, sd_speed, sd_angle)


def _resolution_error(result, made, p, dv, da, sd_speed, sd_angle) -> np.ndarray:
    """|p - p2| on the nodes of every other speed and angle node (``p2`` the convolution on
    that coarser grid), interpolated (linearly, clamped at the edges) to every node of the map."""
    from scipy.interpolate import RegularGridInterpolator

    sp, an = (a.values for a in result.axes[:2])
    p2 = _convolve(made[::2, ::2], 2 * dv, 2 * da, sd_speed, sd_angle)
    d2 = np.abs(p[::2, ::2] - p2)
    sp2, an2 = sp[::2], an[::2]
    V, A = np.meshgrid(np.clip(sp, sp2[0], sp2[-1]), np.clip(an, an2[0], an2[-1]), indexing="ij")
    points = np.stack([V.ravel(), A.ravel()], axis=-1)
    err = np.empty_like(p)
    for k in np.ndindex(*p.shape[2:]):  # each backspin on its own (one pass for a 2-D map)
        f = RegularGridInterpolator((sp2, an2), d2[(..., *k)], method="linear")
        err[(..., *k)] = f(points).reshape(p.shape[:2])
    return err


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A candidate of :func:`best_release`: a node of the map (``speed`` m/s, ``angle``
    degrees, ``spin`` Hz or None on a 2-D map), its ``map_probability`` (the convolved map's
    value, biased) and its Monte Carlo estimate ``probability`` with standard error
    ``std_error`` from the draws shared by all candidates (common random numbers; the best
    candidate's is biased upward by the choice); ``difference``: the best candidate's estimate
    minus this one's on the same draws, with its paired standard error ``difference_se``."""

    speed: float
    angle: float
    spin: float | None
    map_probability: float
    probability: float
    std_error: float
    difference: float
    difference_se: float


@dataclasses.dataclass(frozen=True)
class BestRelease:
    """The best release of a map (:func:`best_release`).

    ``speed`` (m/s), ``angle`` (degrees), ``spin`` (backspin, Hz; None for a speed x angle map,
    whose backspin is fixed): the release. ``probability`` and ``std_error``: its make
    probability under the scatter, from ``n`` releases drawn independently of those that chose
    it (unbiased for this release), and the standard error ``sqrt(max(p (1 - p), 1/n) / n)``.
    ``map_probability``: the convolved map's value there (:func:`probability_map`), reported
    for comparison only: it is biased (upward at the map's maximum). ``candidates``: the
    releases chosen among (:class:`Candidate`), in the order they were taken from the map
    (largest map value first). ``sd_speed`` (m/s) and ``sd_angle`` (degrees): the scatter."""

    speed: float
    angle: float
    spin: float | None
    probability: float
    std_error: float
    map_probability: float
    n: int
    candidates: tuple[Candidate, ...]
    sd_speed: float
    sd_angle: float

    units = {
        "speed": "m/s",
        "angle": "degree",
        "spin": "Hz",
        "probability": "1",
        "std_error": "1",
        "map_probability": "1",
        "n": "1",
        "sd_speed": "m/s",
        "sd_angle": "degree",
    }

    def to_dict(self) -> dict:
        """The fields as plain Python numbers (JSON-ready), ``candidates`` as a list of dicts,
        and ``units``: the unit of every field (a candidate's fields take the same units)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["candidates"] = [dataclasses.asdict(c) for c in self.candidates]
        out["units"] = dict(self.units)
        return out


def _release_geometry(result: SweepResult, spin_axis: bool) -> dict[str, float]:
    """The release geometry a :func:`shot_map` recorded in its dataset's attributes, or a
    one-line ``ValueError`` naming what is missing."""
    ds = result.__dict__.get("dataset")
    attrs = {} if ds is None else dict(getattr(ds, "attrs", {}))
    need = ["release_distance", "release_height", "release_lateral", "t_max"]
    need += [] if spin_axis else ["release_spin"]

    def ok(v):
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)

    missing = [k for k in need if not ok(attrs.get(k))]
    if missing:
        raise ValueError(
            f"result = SweepResult of axes {[a.name for a in result.axes]} is not allowed: its "
            f"dataset's attributes lack the release geometry {', '.join(missing)} (numbers), "
            f"which best_release needs to re-simulate its releases; make the map with shot_map"
        )
    return {k: float(attrs[k]) for k in need}


def _pick_candidates(p, values, sd_speed, sd_angle, k) -> list[tuple[int, ...]]:
    """Up to ``k`` nodes of the map ``p`` with a value > 0, greedily by value (ties: the first
    in the grid's order), each at least 0.5 sd of the scatter (the distance in sd units over
    speed and angle) from every one taken before; nodes of another backspin are other
    releases whatever their speed and angle. An axis without scatter: any other node of it is
    far."""
    sp, an = values[:2]

    def scaled(x, x0, sd):
        if sd > 0:
            return (x - x0) / sd
        return np.where(x == x0, 0.0, np.inf)

    open_ = p > 0
    out: list[tuple[int, ...]] = []
    while len(out) < k and open_.any():
        idx = tuple(
            int(i) for i in np.unravel_index(int(np.argmax(np.where(open_, p, -1.0))), p.shape)
        )
        out.append(idx)
        dv = scaled(sp, sp[idx[0]], sd_speed)
        da = scaled(an, an[idx[1]], sd_angle)
        near = dv[:, None] ** 2 + da[None, :] ** 2 < 0.25 - 1e-9
        if p.ndim == 3:
            open_[:, :, idx[2]] &= ~near
        else:
            open_ &= ~near
    return out


def best_release(
    result: SweepResult,
    sd_speed: float = SD_SPEED,
    sd_angle: float = SD_ANGLE,
    *,
    n: int = 4096,
    candidates: int = 8,
    seed: int = 0,
    **solver_options,
) -> BestRelease:
    """The release of a :func:`shot_map` with the largest make probability under the scatter
    (``sd_speed`` m/s, ``sd_angle`` degrees), and that probability with its standard error.

    1. Candidates: up to ``candidates`` nodes of the convolved map (:func:`probability_map`),
       greedily those of largest map value, each at least 0.5 sd (in the scatter's units on
       speed and angle) from every one taken before; on a speed x angle x backspin map the
       backspin is a coordinate of the candidates (no scatter on it).
    2. Choice: every candidate's make probability by single-shot Monte Carlo, ``n`` releases
       each, with the same draws for all (common random numbers, ``seed``: the draws of
       :func:`make_probability` with that seed), in one batched solve of the map's system
       (``result.system``) from the map's release geometry (its dataset's ``release_*`` and
       ``t_max`` attributes, which :func:`shot_map` records); the best estimate wins (ties: the
       larger map value).
    3. Its probability: the chosen release again, from ``n`` other draws (independent of the
       first: ``numpy.random.default_rng([seed, 1])``). The estimate that chose it is biased
       upward (the maximum of noisy estimates); this one is not: given the release chosen,
       its draws are independent of the choice, so it estimates that release's probability
       without bias (a release that may fall a little short of the best one: the choice is
       among candidates with noisy estimates). Its standard error is make_probability's.

    The cost: ``(candidates + 1) n`` single-shot solves, the candidates' in one batch of
    ``candidates x n`` (the work queue compiles its kernel once per size class of the batch:
    4 x 1024 shares the class of make_probability's n = 4096). The paired difference of two
    candidates has the standard error ``sqrt(max(var(d), 1/n) / n)``, ``d`` the per-draw
    differences of their made indicators (floored as make_probability's is).

    The map's own value there, ``map_probability``, is reported beside it and not used: it is
    biased where the grid is coarse against the scatter, and upward at its maximum.

    Warnings (``UserWarning``): the best release within 2 sd of the map's speed or angle edge
    (its neighbourhood is partly outside the map, so the candidates may miss a better release
    beyond); the best backspin at an end of the backspin axis; the best and the runner-up
    candidates that cannot be told apart (their paired difference under 2 of its standard
    errors: then the probability is what is known, not the exact release); no release of the
    map going in (then no Monte Carlo is run: the first node is returned with probability 0,
    the standard error make_probability's floor ``1/n``, and no candidates).
    ``solver_options``: passed to :func:`rollax.solve_ensemble` (its default tolerances are
    :func:`shot_map`'s; pass the map's ``rtol`` and ``atol`` if it was made with others)."""
    sd_speed, sd_angle = _check_scatter(sd_speed, sd_angle)
    n = _integer("n", n, 2)
    candidates = _integer("candidates", candidates, 1)
    seed = _integer("seed", seed, 0)
    names = [a.name for a in result.axes]
    if names not in (["speed", "angle"], ["speed", "angle", "spin"]):
        raise ValueError(
            f"result axes = {names} is not allowed: best_release needs a shot_map's axes, "
            f"['speed', 'angle'] or ['speed', 'angle', 'spin']"
        )
    spin_axis = len(names) == 3
    geometry = _release_geometry(result, spin_axis)
    shot = result.system
    dv, da = _grid_steps(result)
    p_map = _convolve(np.asarray(result.outcome == ShotOutcome.MADE), dv, da, sd_speed, sd_angle)
    values = [a.values for a in result.axes]

    def aim(idx):
        spin = float(values[2][idx[2]]) if spin_axis else geometry["release_spin"]
        return (float(values[0][idx[0]]), float(values[1][idx[1]]), spin)

    def shown(v, a, w):
        return f"{v:.4g} m/s, {a:.4g} degrees" + (f", {w:.3g} Hz" if spin_axis else "")

    if not np.any(p_map > 0):
        warnings.warn(
            "no release of the map goes in: there is no best release (the first grid point "
            "is returned, with p = 0 and no Monte Carlo)",
            UserWarning,
            stacklevel=2,
        )
        v, a, w = aim((0, 0, 0))
        return BestRelease(
            v, a, w if spin_axis else None, 0.0, _se(0.0, n), 0.0, n, (), sd_speed, sd_angle
        )
    nodes = _pick_candidates(p_map, values, sd_speed, sd_angle, candidates)
    aims = [aim(i) for i in nodes]
    run = dict(
        lateral=geometry["release_lateral"],
        distance=geometry["release_distance"],
        height=geometry["release_height"],
        t_max=geometry["t_max"],
        **solver_options,
    )
    z = np.random.default_rng(seed).standard_normal((n, 2))
    made = _made(shot, aims, z, sd_speed, sd_angle, **run)
    est = made.mean(axis=1)
    b = int(np.argmax(est))  # (ties: the first, the larger map value)
    d = made[b][None, :].astype(float) - made.astype(float)  # paired differences
    diff = d.mean(axis=1)
    diff_se = np.sqrt(np.maximum(d.var(axis=1, ddof=0), 1.0 / n) / n)
    diff_se[b] = 0.0
    table = tuple(
        Candidate(
            speed=v,
            angle=a,
            spin=w if spin_axis else None,
            map_probability=float(p_map[i]),
            probability=float(e),
            std_error=_se(float(e), n),
            difference=float(dd),
            difference_se=float(ds),
        )
        for (v, a, w), i, e, dd, ds in zip(aims, nodes, est, diff, diff_se)
    )
    # the chosen release's probability from independent draws
    z2 = np.random.default_rng([seed, 1]).standard_normal((n, 2))
    p = float(_made(shot, [aims[b]], z2, sd_speed, sd_angle, **run)[0].mean())
    se = _se(p, n)
    v, a, w = aims[b]
    sp, an = values[:2]
    near = [
        name
        for name, x, sd, lo, hi in (
            ("speed", v, sd_speed, sp[0], sp[-1]),
            ("angle", a, sd_angle, an[0], an[-1]),
        )
        if x - 2 * sd < lo or x + 2 * sd > hi
    ]
    if near:
        warnings.warn(
            f"the best release ({shown(v, a, w)}) lies within 2 sd of the map's "
            f"{' and '.join(near)} edge: releases scattered beyond the map count as misses on "
            f"the map, so a better release may lie outside; widen the map",
            UserWarning,
            stacklevel=2,
        )
    if spin_axis and len(values[2]) > 1 and nodes[b][2] in (0, len(values[2]) - 1):
        warnings.warn(
            f"the best backspin ({w:.4g} Hz) is at an end of the map's backspin axis "
            f"({values[2][0]:.4g}-{values[2][-1]:.4g} Hz): a better one may lie beyond; widen it",
            UserWarning,
            stacklevel=2,
        )
    if len(nodes) > 1:
        r = int(np.argmin(np.where(np.arange(len(nodes)) == b, np.inf, diff)))
        if diff[r] < 2 * diff_se[r]:
            warnings.warn(
                f"the best release ({shown(v, a, w)}) and the runner-up "
                f"({shown(*aims[r])}) cannot be told apart: their paired difference "
                f"{diff[r]:.4f} is under 2 standard errors (2 x {diff_se[r]:.4f}) at n = {n}; "
                f"the probability (p = {p:.3f} +- {se:.3f}) is what is known, not the exact "
                f"release (a larger n separates them)",
                UserWarning,
                stacklevel=2,
            )
    return BestRelease(
        speed=v,
        angle=a,
        spin=w if spin_axis else None,
        probability=p,
        std_error=se,
        map_probability=float(p_map[nodes[b]]),
        n=n,
        candidates=table,
        sd_speed=sd_speed,
        sd_angle=sd_angle,
    )
