"""What the shooter's odds depend on: the make probability over the contact parameters'
declared ranges (:func:`rollax.parameter_ranges` of :class:`rollax.systems.Shot`: the rules'
restitution bands, the assumed friction and drag), and its sensitivities.

:func:`odds_over_ranges` evaluates one aimed release under the shooter's scatter with one set
of draws (common random numbers) for every setting, in one batched solve:

* ``nominal``: the system's own parameters;
* ``marginal``: each shot with the contact parameters drawn uniformly from their ranges (the
  probability marginalised over what is not known), and ``spread``: the largest and least
  probability at the ranges' ends, one parameter at a time;
* ``ends``: per parameter, the probability at the low and high end of its range, and the
  slope ``(p_hi - p_lo) / (hi - lo)`` with the standard error of the paired difference;
* ``scatter``: the slopes with respect to the shooter's ``sd_speed`` and ``sd_angle``
  (central differences at +-20 %, paired).

The made indicator is discontinuous in every parameter, so no derivative through the solves
is taken: the paired differences of common random numbers have the small error of a paired
difference (the shots that change outcome between the two settings).
"""

from __future__ import annotations

import math
import numbers

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from rollax._core._system import parameter_ranges
from rollax.analysis.shot import (
    FREE_THROW_DISTANCE,
    FREE_THROW_HEIGHT,
    SD_ANGLE,
    SD_SPEED,
    _check_release,
    _made,
    _number,
    _se,
)
from rollax.systems.shot import Shot


def _p(made):
    """``(p, se)`` of a made indicator's mean (make_probability's rule for the se)."""
    p = float(made.mean())
    return p, _se(p, made.shape[-1])


def _paired(a, b):
    """``(mean(a - b), se)`` of a paired difference of indicators."""
    d = a.astype(float) - b.astype(float)
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.shape[0]))


def odds_over_ranges(
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
    params=None,
    n: int = 4096,
    seed: int = 0,
    t_max: float = 4.0,
    **solver_options,
) -> dict:
    """The make probability of one aimed release (``speed`` m/s, ``angle`` degrees, backspin
    ``spin`` Hz) under the scatter ``sd_speed``, ``sd_angle``, across the declared ranges of
    ``params`` (default: every parameter of ``shot`` that declares one; module docstring).
    Every probability comes with its standard error, every slope with the paired one.
    ``n`` shots per setting, drawn with ``seed``: the same draws for every setting. Returns
    ``{"nominal": (p, se), "marginal": (p, se), "spread": (p_min, p_max), "ends": {name:
    {"lo", "hi", "value", "p_lo", "p_hi", "slope", "slope_se"}}, "scatter": {"sd_speed":
    (slope, se), "sd_angle": (slope, se)}, "n": n}``."""
    shot = Shot() if shot is None else shot
    _check_release(speed, angle, spin, lateral, distance, height)
    for name, v in (("sd_speed", sd_speed), ("sd_angle", sd_angle)):
        _number(name, v, lambda x: x > 0, "a finite number > 0")
    _number("t_max", t_max, lambda x: x > 0, "a finite number > 0 (s)")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 16:
        raise ValueError(f"n = {n!r} is not allowed: it must be an integer >= 16")
    ranges = parameter_ranges(shot)
    names = list(ranges) if params is None else list(params)
    for name in names:
        if name not in ranges:
            raise ValueError(
                f"params: {name!r} declares no range in {type(shot).__name__}; allowed: "
                f"{', '.join(ranges)}"
            )
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    u = rng.random((n, len(names)))  # the marginal's uniform draws
    # the settings: (parameter values, sd_speed, sd_angle)
    base = {k: ranges[k].value for k in names}
    settings: list[tuple[str, dict, float, float]] = [("nominal", base, sd_speed, sd_angle)]
    settings.append(
        ("marginal", {k: ranges[k].lo + u[:, i] * (ranges[k].hi - ranges[k].lo)
                      for i, k in enumerate(names)}, sd_speed, sd_angle)
    )  # fmt: skip
    for k in names:
        for end in ("lo", "hi"):
            settings.append(
                (f"{k}.{end}", {**base, k: getattr(ranges[k], end)}, sd_speed, sd_angle)
            )
    for f in (0.8, 1.2):
        settings.append((f"sd_speed*{f}", base, sd_speed * f, sd_angle))
        settings.append((f"sd_angle*{f}", base, sd_speed, sd_angle * f))
    # per-start parameters: each setting's values on its n shots
    batched = shot
    for k in names:
        v = np.concatenate(
            [np.broadcast_to(np.asarray(p[k], float), (n,)) for _, p, _, _ in settings]
        )
        batched = eqx.tree_at(lambda s, k=k: getattr(s, k), batched, jnp.asarray(v))
    made = _made(
        batched,
        [(speed, angle, spin)] * len(settings),
        z,
        np.array([s_v for _, _, s_v, _ in settings]),
        np.array([s_a for _, _, _, s_a in settings]),
        lateral=lateral,
        distance=distance,
        height=height,
        t_max=t_max,
        **solver_options,
    )
    by = {name: made[i] for i, (name, *_rest) in enumerate(settings)}
    ends = {}
    for k in names:
        r = ranges[k]
        d, d_se = _paired(by[f"{k}.hi"], by[f"{k}.lo"])
        ends[k] = dict(
            lo=r.lo, hi=r.hi, value=r.value, units=r.units, source=r.source,
            p_lo=_p(by[f"{k}.lo"]), p_hi=_p(by[f"{k}.hi"]),
            slope=d / (r.hi - r.lo), slope_se=d_se / (r.hi - r.lo),
        )  # fmt: skip
    end_ps = [ends[k][e][0] for k in names for e in ("p_lo", "p_hi")]
    scatter = {}
    for key, sd in (("sd_speed", sd_speed), ("sd_angle", sd_angle)):
        d, d_se = _paired(by[f"{key}*1.2"], by[f"{key}*0.8"])
        scatter[key] = (d / (0.4 * sd), d_se / (0.4 * sd))
    return dict(
        nominal=_p(by["nominal"]),
        marginal=_p(by["marginal"]),
        spread=(min(end_ps), max(end_ps)),
        ends=ends,
        scatter=scatter,
        n=n,
        release=dict(
            speed=speed,
            angle=angle,
            spin=spin,
            lateral=lateral,
            distance=distance,
            height=height,
            sd_speed=sd_speed,
            sd_angle=sd_angle,
        ),  # fmt: skip
    )
