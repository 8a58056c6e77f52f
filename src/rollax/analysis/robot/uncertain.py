"""The uncertain parameters of a robot manoeuvre: a box of parameter values around the
nominal ones, its samples, and a manoeuvre with a sample's values put in.

A robot is built once and runs on floors it was not designed on: the friction coefficient is
known to perhaps +-30 %, the internal masses and their rails to a few per cent. A
:class:`ParameterBox` holds such ranges, one coordinate per uncertain number:

* ``mu``: the friction coefficient of the envelope ``|f_s| <= mu N``;
* ``masses``: each internal mass ``m_i`` (independently);
* ``rails``: the radius of each circular rail (independently);
* ``m0``: the body's mass; ``inertia``: the disk's ``d2`` or the ball's ``(d1, d2, d3)``;
* ``radius``: the body's radius;
* ``slope``: the floor's slope, rise over run (the disk's along its plane of motion; the ball's
  two components, along e1 and e2, each in the range): a range ``(lo, hi)`` only, since a
  level floor's nominal slope is 0 and a relative size of it is nothing.

Each is given as ``(lo, hi)`` (absolute: every element of the parameter in that range) or as a
relative size ``r`` (a float, or a string such as ``"2%"``): each element within ``(1 +- r)``
times its nominal value, drawn uniformly. Or as a distribution: ``("normal", r)`` or
``"normal:5%"``, each element normal about its nominal value with the relative standard
deviation ``r``, truncated at :data:`TRUNCATE` standard deviations (the box that the
every-sample constraints and the worst-case search hold over; the samples, the chance
constraints and the validation draw from the distribution).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import equinox as eqx
import jax.numpy as jnp
import numpy as np

#: The names :func:`parameter_box` accepts (``inertia``: the disk's ``d2``, the ball's
#: ``inertia``; ``rails``: the radii of circular rails).
UNCERTAIN = ("mu", "masses", "rails", "m0", "inertia", "radius", "slope")
#: A normal distribution's truncation, in standard deviations (99.7 % of its mass per
#: coordinate): a box is needed for the worst case, and physical values stay > 0
TRUNCATE = 3.0


@dataclasses.dataclass(frozen=True)
class ParameterBox:
    """Ranges of the uncertain numbers of a manoeuvre, one coordinate each.

    ``names``: ``"mu"``, ``"masses[0]"``, ``"rails[2]"``, ``"m0"``, ``"inertia"`` (disk) or
    ``"inertia[1]"`` (ball), ``"radius"``; ``paths``: what :meth:`apply` writes (hashable:
    a static field of a compiled problem); ``lo``, ``hi``, ``nominal``: NumPy arrays;
    ``sd``: per coordinate the standard deviation of a (truncated) normal, ``nan`` for a
    uniform one (``None``: all uniform)."""

    names: tuple[str, ...]
    paths: tuple[tuple[str, int], ...]
    lo: np.ndarray
    hi: np.ndarray
    nominal: np.ndarray
    sd: np.ndarray | None = None

    @property
    def d(self) -> int:
        return len(self.names)

    def at(self, u) -> np.ndarray:
        """The parameters at the unit coordinates ``u`` (``0``: ``lo``, ``1``: ``hi``)."""
        return self.lo + np.asarray(u, float) * (self.hi - self.lo)

    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        """``n`` parameter sets (shape ``(n, d)``): uniform in the box, or, for a normal
        coordinate, normal about its nominal value truncated to the box (by redrawing)."""
        rng = np.random.default_rng(seed)
        P = self.at(rng.uniform(size=(n, self.d)))
        if self.sd is None:
            return P
        for k in np.flatnonzero(np.isfinite(self.sd)):
            x = self.nominal[k] + self.sd[k] * rng.standard_normal(n)
            out = (x < self.lo[k]) | (x > self.hi[k])
            while out.any():  # (3 sd: 0.3 % redrawn)
                x[out] = self.nominal[k] + self.sd[k] * rng.standard_normal(int(out.sum()))
                out = (x < self.lo[k]) | (x > self.hi[k])
            P[:, k] = x
        return P

    def to_dict(self, p) -> dict[str, float]:
        return {k: float(v) for k, v in zip(self.names, np.asarray(p, float))}

    def describe(self) -> dict[str, list[float]]:
        """``{name: [lo, hi]}`` (and ``[lo, hi, sd]`` for a normal coordinate), for the JSON."""
        sd = np.full(self.d, np.nan) if self.sd is None else self.sd
        return {
            k: [float(a), float(b)] + ([float(c)] if np.isfinite(c) else [])
            for k, a, b, c in zip(self.names, self.lo, self.hi, sd)
        }

    def apply(self, manoeuvre, p):
        """``manoeuvre`` with the values ``p`` (shape ``(d,)``; may be traced) put in."""
        return apply_paths(self.paths, manoeuvre, p)


def _model_field(model, name: str) -> str:
    if name == "inertia":
        return "d2" if hasattr(model, "d2") else "inertia"
    return name


def apply_paths(paths: tuple[tuple[str, int], ...], manoeuvre, p):
    """:meth:`ParameterBox.apply` from its ``paths`` alone (what compiled code holds)."""
    p = jnp.asarray(p)
    model = manoeuvre.model
    for k, (name, i) in enumerate(paths):
        if name == "mu":
            manoeuvre = eqx.tree_at(lambda m: m.mu, manoeuvre, p[k])
            continue
        if name == "rails":
            model = eqx.tree_at(lambda m, i=i: m.rails[i].radius, model, p[k])
            continue
        field = _model_field(model, name)
        old = jnp.asarray(getattr(model, field), float)
        new = p[k] if i < 0 else old.at[i].set(p[k])
        model = eqx.tree_at(lambda m, field=field: getattr(m, field), model, new)
    return eqx.tree_at(lambda m: m.model, manoeuvre, model)


def _size(name: str, value) -> tuple[str, Any]:
    """``("rel", r)`` or ``("abs", (lo, hi))`` from a spec's value, or a one-line error."""
    allowed = (
        "a relative size r in [0, 1) (0.05 or '5%'), a range (lo, hi) with lo <= hi, or a "
        f"normal distribution ('normal:5%' or ('normal', 0.05): a relative standard "
        f"deviation below {1 / TRUNCATE:.3g})"
    )
    given = value
    normal = None
    if isinstance(value, str) and value.strip().lower().startswith("normal:"):
        normal = value.strip()[len("normal:") :]
    elif isinstance(value, (tuple, list)) and len(value) == 2 and value[0] == "normal":
        normal = value[1]
    if normal is not None:
        try:
            text = str(normal).strip()
            r = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(f"uncertain[{name!r}] = {given!r} is not allowed: {allowed}") from None
        if not (0.0 < r < 1.0 / TRUNCATE):
            raise ValueError(f"uncertain[{name!r}] = {given!r} is not allowed: {allowed}")
        return "normal", r
    if isinstance(value, str):
        text = value.strip()
        try:
            r = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(f"uncertain[{name!r}] = {value!r} is not allowed: {allowed}") from None
        value = r
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        r = float(value)
        if not (0.0 <= r < 1.0):
            raise ValueError(f"uncertain[{name!r}] = {given!r} is not allowed: {allowed}")
        return "rel", r
    try:
        lo, hi = (float(v) for v in cast(Any, value))
    except (TypeError, ValueError):
        raise ValueError(f"uncertain[{name!r}] = {value!r} is not allowed: {allowed}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"uncertain[{name!r}] = {value!r} is not allowed: {allowed}")
    return "abs", (lo, hi)


def parameter_box(manoeuvre, uncertain: dict) -> ParameterBox:
    """The :class:`ParameterBox` of ``uncertain`` (module docstring) around ``manoeuvre``'s
    values. Bad names, sizes or ranges are one-line ``ValueError``s."""
    from rollax.models.robot.rails import CircleRail

    if not isinstance(uncertain, dict) or not uncertain:
        raise ValueError(
            f"uncertain = {uncertain!r} is not allowed: give a dict such as "
            "{'mu': (0.15, 0.25), 'masses': 0.02}"
        )
    model = manoeuvre.model
    names, paths, lo, hi, nominal, sds = [], [], [], [], [], []
    for name, value in uncertain.items():
        if name not in UNCERTAIN:
            raise ValueError(
                f"uncertain has the name {name!r}, which is not allowed: allowed: "
                f"{', '.join(UNCERTAIN)}"
            )
        kind, size = _size(name, value)
        if name == "slope" and kind != "abs":
            raise ValueError(
                f"uncertain['slope'] = {value!r} is not allowed: give the floor's slope (rise "
                "over run) as a range (lo, hi), e.g. (-0.02, 0.02); a relative size of a "
                "level floor's slope 0 is 0"
            )
        if name == "mu":
            values = [float(manoeuvre.mu)]
            if not math.isfinite(values[0]) and kind in ("rel", "normal"):
                raise ValueError(
                    "uncertain['mu'] is relative, but the manoeuvre's mu = inf: give a range "
                    "(lo, hi)"
                )
            index = [-1]
        elif name == "rails":
            bad = [i for i, r in enumerate(model.rails) if not isinstance(r, CircleRail)]
            if bad:
                raise ValueError(
                    f"uncertain['rails'] is not allowed for this robot: rails {bad} are not "
                    "circles (only a CircleRail's radius can be uncertain)"
                )
            values = [float(r.radius) for r in model.rails]
            index = list(range(len(values)))
        else:
            arr = np.asarray(getattr(model, _model_field(model, name)), float)
            values = arr.ravel().tolist()
            index = [-1] if arr.ndim == 0 else list(range(arr.size))
        for i, v in zip(index, values):
            sd = abs(v) * size if kind == "normal" else math.nan
            if kind == "normal":
                a, b = v - TRUNCATE * sd, v + TRUNCATE * sd
            else:
                a, b = (v * (1 - size), v * (1 + size)) if kind == "rel" else size
            if name not in ("mu", "slope") and a <= 0.0:
                raise ValueError(
                    f"uncertain[{name!r}] = {value!r} is not allowed: it reaches {a:g}, and "
                    f"{name} must stay > 0"
                )
            if name == "mu" and a < 0.0:
                raise ValueError(f"uncertain['mu'] = {value!r} is not allowed: mu must be >= 0")
            names.append(name if i < 0 else f"{name}[{i}]")
            paths.append((name, i))
            lo.append(a)
            hi.append(b)
            sds.append(sd)
            nominal.append(v if math.isfinite(v) else 0.5 * (a + b))
    sd_arr = np.array(sds)
    return ParameterBox(
        tuple(names), tuple(paths), np.array(lo), np.array(hi), np.clip(nominal, lo, hi),
        sd_arr if np.isfinite(sd_arr).any() else None,
    )  # fmt: skip
