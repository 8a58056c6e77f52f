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
* :func:`probability_map` and :func:`best_release`: the make probability of every release of a
  map, the map's made indicator averaged over the scatter (a discrete convolution with the
  Gaussian; exact as the grid refines), and the release that maximises it.
"""

from __future__ import annotations

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
    backspin too. ``store``/``client``: as :func:`rollax.sweep`."""
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
            f"{backspin}, lateral {lateral} degrees"
        },
        **solver_options,
    )


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

    Returns ``(p, se)``; with ``gradient=True`` ``(p, se, dp, dp_se)``: also the derivatives
    ``dp = (dp/dspeed [1/(m/s)], dp/dangle [1/degree])`` of the probability with respect to
    the aimed release, and their standard errors, from the same solves by the score function
    (likelihood ratio): for a Gaussian scatter ``d/dmu E[made(mu + sd z)] = E[made z] / sd``,
    unbiased although the made indicator is discontinuous (no derivative through the solves
    is needed; both scatters must be > 0)."""
    import rollax

    shot = Shot() if shot is None else shot
    _check_release(speed, angle, spin, lateral, distance, height)
    _number("t_max", t_max, lambda x: x > 0, "a finite number > 0 (s)")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
        raise ValueError(f"n = {n!r} is not allowed: it must be an integer >= 2")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed = {seed!r} is not allowed: it must be an integer >= 0")
    n, seed = int(n), int(seed)
    for name, v in (("sd_speed", sd_speed), ("sd_angle", sd_angle)):
        _number(name, v, lambda x: x >= 0, "a finite number >= 0")
        if gradient and v == 0:
            raise ValueError(
                f"{name} = {v!r} is not allowed with gradient=True: the score-function "
                f"derivative needs a scatter > 0"
            )
    z = np.random.default_rng(seed).standard_normal((n, 2))
    speeds = speed + sd_speed * z[:, 0]
    angles = angle + sd_angle * z[:, 1]
    starts = np.asarray(
        _batch_release(
            jnp.asarray(speeds),
            jnp.asarray(angles),
            float(spin),
            float(lateral),
            float(distance),
            float(height),
            float(shot.rim_height),
        )
    )
    sol = rollax.solve_ensemble(shot, starts, 0.0, t_max, **solver_options)
    made = np.asarray(shot.outcome(sol)) == ShotOutcome.MADE
    p = float(made.mean())
    se = math.sqrt(max(p * (1 - p), 1.0 / n) / n)
    if not gradient:
        return p, se
    # the score function; p z is a zero-mean control variate, and n / (n - 1) undoes the
    # (1 - 1/n) that p taken from the same draws puts on the mean
    score = (made[:, None] - p) * z / np.array([sd_speed, sd_angle]) * (n / (n - 1))
    return p, se, score.mean(axis=0), score.std(axis=0, ddof=1) / math.sqrt(n)


def _batch_release(speeds, angles, spin, lateral, distance, height, rim_height):
    import jax

    return jax.vmap(lambda v, a: release(v, a, spin, lateral, distance, height, rim_height))(
        speeds, angles
    )


def probability_map(result: SweepResult, sd_speed: float = SD_SPEED, sd_angle: float = SD_ANGLE):
    """The make probability of every release of a :func:`shot_map` under the shooter's scatter:
    the made indicator convolved with the Gaussian of the scatter on the map's grid (releases
    scattered beyond the map count as misses, so the edges are low). Returns an array of the
    map's shape (a speed x angle x backspin map: each backspin's map convolved on its own, the
    backspin having no scatter)."""
    from scipy.ndimage import gaussian_filter

    made = np.asarray(result.outcome == ShotOutcome.MADE, float)
    for a in result.axes[:2]:
        if a.spacing != "linear":
            raise ValueError(
                f"{a.name} axis spacing = {a.spacing!r} is not allowed: the probability map "
                f"needs an evenly spaced grid (spacing 'linear')"
            )
    sp, an = (a.values for a in result.axes[:2])
    dv, da = float(sp[1] - sp[0]), float(an[1] - an[0])
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
    sigma = (sd_speed / dv, sd_angle / da) + (0.0,) * (made.ndim - 2)
    return gaussian_filter(made, sigma=sigma, mode="constant", cval=0.0)


def best_release(result: SweepResult, sd_speed: float = SD_SPEED, sd_angle: float = SD_ANGLE):
    """The release of a :func:`shot_map` with the largest make probability under the scatter
    (:func:`probability_map`): ``(speed, angle, probability)``, or ``(speed, angle, spin,
    probability)`` for a speed x angle x backspin map; a warning when it lies within 2 sd of the
    map's speed or angle edge (where the map's estimate is low) or at an end of its backspin
    axis (a better backspin may lie beyond)."""
    p = probability_map(result, sd_speed, sd_angle)
    values = [a.values for a in result.axes]
    if not np.any(p > 0):
        warnings.warn(
            "no release of the map goes in: there is no best release (the first grid point "
            "is returned, with p = 0)",
            UserWarning,
            stacklevel=2,
        )
        return tuple(float(v[0]) for v in values) + (0.0,)
    idx = np.unravel_index(int(np.argmax(p)), p.shape)
    best = tuple(float(v[i]) for v, i in zip(values, idx))
    sp, an = values[:2]
    v, a = best[:2]
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
            f"the best release ({v:.4g} m/s, {a:.4g} degrees) lies within 2 sd of the map's "
            f"{' and '.join(near)} edge: releases scattered beyond the map count as misses, so "
            f"its probability is low and a better release may lie outside; widen the map",
            UserWarning,
            stacklevel=2,
        )
    if len(values) == 3 and len(values[2]) > 1 and idx[2] in (0, len(values[2]) - 1):
        warnings.warn(
            f"the best backspin ({best[2]:.4g} Hz) is at an end of the map's backspin axis "
            f"({values[2][0]:.4g}-{values[2][-1]:.4g} Hz): a better one may lie beyond; widen it",
            UserWarning,
            stacklevel=2,
        )
    return best + (float(p[idx]),)
