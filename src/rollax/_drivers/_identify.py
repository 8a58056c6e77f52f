"""``rollax.identify``: parameters and initial state from observed trajectories, with error bars.

Weighted nonlinear least squares through :func:`rollax.solve`:

    minimise  1/2 sum_i sum_k ((h_k(y(t_i; theta, y0)) - d_ik) / sigma_k)^2
              (+ 1/2 ((t*(theta, y0) - t*_obs) / sigma_t*)^2 when an event time is observed)

over the named parameter fields ``theta`` and the initial state ``y0``, by Levenberg-Marquardt
with Marquardt's diagonal scaling and simple bounds (a parameter at a bound whose gradient
points out of the box is held there for that step; steps are projected onto the box:
:mod:`rollax._drivers._lm`, on a batch of lanes). A long record is fitted by continuation over growing
windows of it, the first from the best of several starts (:func:`identify`: a nearly periodic
record fitted at once from a poor start has many local minima); the diagnostics of
:mod:`rollax._drivers._diagnostics` (chi^2, whiteness, profile likelihoods) say what the result can be
trusted for.

Why our own small LM and not ``optimistix.LevenbergMarquardt``: the residual Jacobian is
computed in forward mode (``jax.jacfwd`` through ``rollax.solve`` with
``diffrax.ForwardMode``: a handful of parameters against thousands of residuals), bounds are
needed (rates >= 0, 0 < j <= 1) and optimistix's least-squares solvers have none, and the
loop runs on the host so that it can report progress and its history.

Error bars are the Gauss-Newton ones: ``cov = (J_w^T J_w)^-1`` with the residuals weighted by
the noise levels; noise levels not given are estimated from the residuals (per observable,
the RMS with the degrees of freedom taken out) and the fit is repeated with them. A parameter
whose 95 % interval (+- 1.96 standard errors; with the noise estimated, +- t_nu(0.975), nu
the degrees of freedom of each noise level's estimate) includes 0, or an information matrix that is
numerically singular (condition number of its correlation form above 1e10), raises an
:class:`IdentifiabilityWarning` that names what the data cannot tell.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Any, Callable, Sequence, cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax._drivers import _diagnostics, _lm
from rollax._core._solution import Status
from rollax._integrate._solve import solve
from rollax._core._system import AbstractSystem


class IdentifiabilityWarning(UserWarning):
    """The data cannot determine a fitted quantity (or a combination of them)."""


#: The most observations :func:`identify` takes (100 s filmed at 1 kHz): each is a saved point
#: of every solve and a row of the Jacobian (a 10^6-row record did not return in 3 minutes)
MAX_ROWS = 100_000


@dataclasses.dataclass(frozen=True)
class Observations:
    """Observed values ``values[i, k]`` of the observables ``names[k]`` at times ``t[i]``.

    ``observe``: the observation model, ``observe(system, t, y) -> (k,)`` array, or the name of
    a method ``system.<observe>(t, y)``. ``sigma``: the noise level of each observable (same
    units; ``None``: estimated from the residuals). ``t_event``: an observed time of the
    system's event number ``event`` (e.g. when the ball left the rim), with noise level
    ``sigma_event`` [s]. Times must be finite and strictly increasing; rows with a non-finite
    value are dropped with a warning that says how many and the first such time.
    """

    t: np.ndarray
    values: np.ndarray
    observe: Callable | str
    names: tuple[str, ...]
    sigma: np.ndarray | None = None
    t_event: float | None = None
    sigma_event: float | None = None
    event: int = 0

    def __post_init__(self):
        t = np.asarray(self.t, dtype=float)
        v = np.asarray(self.values, dtype=float)
        names = tuple(self.names)
        if not (callable(self.observe) or isinstance(self.observe, str)):
            raise ValueError(
                f"observe = {_short(self.observe)} must be a function observe(system, t, y) "
                f"or the name of a method of the system"
            )
        if t.ndim != 1:
            raise ValueError(f"t has shape {t.shape}; observation times must be a 1-d array")
        if v.ndim == 1:
            v = v[:, None]
        if v.shape != (t.shape[0], len(names)):
            raise ValueError(
                f"values has shape {v.shape}; with {t.shape[0]} times and the "
                f"observables {names} it must be {(t.shape[0], len(names))}"
            )
        if not np.all(np.isfinite(t)):
            i = int(np.argmax(~np.isfinite(t)))
            raise ValueError(f"t[{i}] = {float(t[i])!r}; observation times must be finite")
        dt = np.diff(t)
        if np.any(dt <= 0):
            i = int(np.argmax(dt <= 0))
            what = "repeated" if dt[i] == 0 else "not increasing"
            raise ValueError(
                f"t[{i + 1}] = {float(t[i + 1])!r} after t[{i}] = {float(t[i])!r}: observation "
                f"times are {what}; they must be strictly increasing"
            )
        bad = ~np.all(np.isfinite(v), axis=1)
        if np.any(bad):
            warnings.warn(
                f"dropped {int(bad.sum())} of {t.shape[0]} observations with a "
                f"non-finite value (the first at t = {float(t[bad][0])!r})",
                stacklevel=3,
            )
            t, v = t[~bad], v[~bad]
        if t.shape[0] < 2:
            raise ValueError(f"{t.shape[0]} usable observations; at least 2 are needed")
        if t.shape[0] > MAX_ROWS:
            raise ValueError(
                f"{t.shape[0]} observations is more than identify takes "
                f"({MAX_ROWS}): every one is a saved point of every solve and a "
                f"row of the Jacobian; thin the record (every k-th row) or cut it"
            )
        if self.sigma is not None:
            s = np.broadcast_to(np.asarray(self.sigma, dtype=float), (len(names),)).copy()
            if not np.all(np.isfinite(s) & (s > 0)):
                raise ValueError(f"sigma = {s.tolist()!r}; noise levels must be finite and > 0")
            object.__setattr__(self, "sigma", s)
        if self.t_event is not None:
            te = float(self.t_event)
            if not math.isfinite(te) or te < t[0]:
                raise ValueError(
                    f"t_event = {self.t_event!r} must be finite and >= the first "
                    f"observation time {float(t[0])!r}"
                )
            reach = float(t[-1]) + max(1.0, float(t[-1] - t[0]))
            if te > reach:
                raise ValueError(
                    f"t_event = {self.t_event!r} is not allowed: it lies "
                    f"{te - float(t[-1]):g} s after the last observation "
                    f"(t = {float(t[-1])!r}); allowed: up to {reach!r} (the "
                    f"record's span or 1 s past its end, whichever is longer)"
                )
            se = self.sigma_event
            if se is None or not (math.isfinite(float(se)) and float(se) > 0):
                raise ValueError(
                    f"sigma_event = {se!r}; an observed event time needs a "
                    f"finite noise level > 0 [s]"
                )
        if not (isinstance(self.event, int) and self.event >= 0):
            raise ValueError(f"event = {self.event!r} must be an integer >= 0")
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "names", names)

    def with_sigma(self, sigma) -> "Observations":
        return dataclasses.replace(self, sigma=sigma)


@dataclasses.dataclass
class Fit:
    """Result of :func:`identify`.

    ``names``: the fitted quantities (parameters, then ``y0.<state name>``), with ``values``,
    ``std_errors`` and their ``correlation``; ``system`` and ``y0``: the fitted system and
    initial state; ``sigma``: the noise levels used (given or estimated); ``residual_rms``: per
    observable (and ``t_event``); ``at_bound``: which estimates sit on a bound (their error
    bar is one-sided); ``warnings``: the identifiability warnings raised. ``status``:
    ``"converged"``, ``"poor_fit"`` (the model does not follow the data: chi^2 per dof > 2
    with the noise given, or residuals whose lag-1 autocorrelation is more than 0.5 from what
    the fit alone gives white noise; the standard errors
    are not to be trusted) or ``"not_converged"``; ``converged`` is true only for the first.
    ``chi2``, ``dof``, ``chi2_per_dof``, ``p_value``, ``whiteness`` (per observable ``lag1``,
    ``lag1_expected``, what the fit alone gives white noise, and ``runs_z``):
    :mod:`rollax._drivers._diagnostics`. ``noise_estimated``: the noise levels were
    estimated from the residuals (the covariance is scaled by them). ``profile``: per fitted
    parameter ``{"values", "delta_chi2", "interval": (lo, hi), "closed", "estimate", "level"}``,
    its profile likelihood and 95 % interval, where delta chi^2 reaches ``level`` (an end
    ``None`` where the data do not bound it).
    ``windows``: the window lengths [s] the fit was continued over.
    """

    names: tuple[str, ...]
    values: np.ndarray
    std_errors: np.ndarray
    correlation: np.ndarray
    covariance: np.ndarray
    at_bound: np.ndarray
    system: AbstractSystem
    y0: np.ndarray
    sigma: dict[str, float]
    residual_rms: dict[str, float]
    cost: float
    iterations: int
    converged: bool
    wall_time: float
    n_observations: int
    warnings: list[str]
    history: list[dict]
    status: str = "converged"  # "converged", "poor_fit" or "not_converged"
    chi2: float = math.nan  # sum of the squared weighted residuals
    dof: int = 0  # residuals - fitted quantities
    chi2_per_dof: float = math.nan
    p_value: float = math.nan  # P(chi^2 >= the observed) for a good fit with these noise levels
    # {observable: {lag1, lag1_expected (the fit's own, for white noise), runs_z}}
    whiteness: dict = dataclasses.field(default_factory=dict)
    noise_estimated: bool = False  # sigma from the residuals (chi2_per_dof is then ~1)
    profile: dict = dataclasses.field(default_factory=dict)  # {parameter: profile likelihood}
    windows: list = dataclasses.field(default_factory=list)  # window lengths fitted [s]

    def __getitem__(self, name: str) -> tuple[float, float]:
        """``(value, standard error)`` of a fitted quantity."""
        i = self.names.index(name)
        return float(self.values[i]), float(self.std_errors[i])

    def predict(self, observations: "Observations", t=None) -> np.ndarray:
        """The fitted model's observables at the times ``t`` (default: the observation times)."""
        return predict(self, observations, t)

    def __str__(self) -> str:
        """One line per fitted quantity (value +- standard error), the residuals' RMS, each
        profile interval, chi^2 and whiteness, and the status: what ``print(fit)`` shows (the
        dataclass's ``repr`` holds every array)."""
        lines = []
        for n, v, s, b in zip(self.names, self.values, self.std_errors, self.at_bound):
            err = f"+- {s:.3g}" if math.isfinite(s) else "(undetermined by these data)"
            lines.append(f"{n:>14s} = {v:.8g} {err}" + ("  (at bound)" if b else ""))
        lines.append(
            "residual RMS: " + ", ".join(f"{k} {v:.3g}" for k, v in self.residual_rms.items())
        )
        for name, p in self.profile.items():
            iv = ", ".join("open" if e is None else f"{e:.8g}" for e in p["interval"])
            lines.append(f"{name:>14s}: 95 % profile-likelihood interval [{iv}]")
        lines.append(
            f"chi^2/dof {self.chi2_per_dof:.4g} (dof {self.dof}, p = {self.p_value:.3g}"
            + (", noise estimated from the residuals" if self.noise_estimated else "")
            + "); residual lag-1 autocorrelation: "
            + ", ".join(f"{k} {w['lag1']:.2f}" for k, w in self.whiteness.items())
        )
        lines.append(f"status {self.status}, iterations {self.iterations}, {self.wall_time:.1f} s")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """A JSON-ready summary (non-finite numbers become ``None``)."""
        f = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        return {
            "parameters": {
                n: {"value": f(v), "std_error": f(s), "at_bound": bool(b)}
                for n, v, s, b in zip(self.names, self.values, self.std_errors, self.at_bound)
            },
            "initial_state": [f(v) for v in self.y0],
            "correlation": [[f(c) for c in row] for row in self.correlation],
            "sigma": {k: f(v) for k, v in self.sigma.items()},
            "residual_rms": {k: f(v) for k, v in self.residual_rms.items()},
            "cost": f(self.cost),
            "iterations": self.iterations,
            "converged": self.converged,
            "status": self.status,
            "chi2": f(self.chi2),
            "dof": int(self.dof),
            "chi2_per_dof": f(self.chi2_per_dof),
            "p_value": f(self.p_value),
            "whiteness": {k: {n: f(v) for n, v in d.items()} for k, d in self.whiteness.items()},
            "noise_estimated": bool(self.noise_estimated),
            "profile": {
                k: {
                    "interval": [None if v is None else f(v) for v in p["interval"]],
                    "closed": [bool(c) for c in p["closed"]],
                    "estimate": f(p["estimate"]),
                    "values": [f(v) for v in p["values"]],
                    "delta_chi2": [f(v) for v in p["delta_chi2"]],
                    "level": f(p.get("level", _diagnostics.CHI2_95)),
                }
                for k, p in self.profile.items()
            },
            "windows_s": [f(w) for w in self.windows],
            "wall_time_s": f(self.wall_time),
            "n_observations": self.n_observations,
            "warnings": list(self.warnings),
        }


# ---------------------------------------------------------------------- parameters by name
def parameter_path(system: eqx.Module, name: str) -> tuple[str, ...]:
    """The attribute path of a parameter field: ``"rim.k_d"``, or a bare ``"k_d"`` found in
    exactly one (possibly nested) module field.

    Only a *fittable* field is one: a scalar that is not static and holds a real float (a
    :func:`rollax.parameter` field, or a float / float array); a static field (a setting such
    as ``w1_target``), an integer, a flag, a text or a vector is refused by name, in one line
    that lists the allowed names (:func:`fittable_fields`)."""
    owner = type(system).__name__
    allowed = fittable_fields(system)

    def refuse(why: str) -> ValueError:
        return ValueError(
            f"params: {name!r} of {owner} {why}; allowed: "
            f"{', '.join(_display_names(allowed)) or 'none (it has no float parameter)'}"
        )

    if not isinstance(name, str):
        raise refuse("is not a name")
    if "." in name:
        if name in allowed:
            return allowed[name]
        raise refuse(_field_kind(system, tuple(name.split("."))) or "is not a field")
    found = [path for dotted, path in allowed.items() if path[-1] == name]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise refuse("is ambiguous (" + ", ".join(".".join(p) for p in found) + ")")
    # not fittable: say what it is (a static setting, an integer, ...) or that it is missing
    what = None
    if isinstance(getattr(system, name, None), eqx.Module):
        what = f"is a {type(getattr(system, name)).__name__}, not a number"
    for path in _all_fields(system):
        if path[-1] == name:
            what = _field_kind(system, path)
            break
    raise refuse(what or "is not a parameter")


def fittable_fields(system) -> dict[str, tuple[str, ...]]:
    """Every field of ``system`` (and of the modules it holds) that :func:`identify` can fit,
    ``{dotted name: attribute path}``: not static, and a real scalar float (a
    :func:`rollax.parameter` of shape ``()``, a Python float or a 0-d float array)."""
    return {
        ".".join(path): path for path in _all_fields(system) if _field_kind(system, path) is None
    }


def _display_names(allowed: dict[str, tuple[str, ...]]) -> list[str]:
    """The allowed names as a user writes them: bare where that is unique, dotted otherwise."""
    last = [path[-1] for path in allowed.values()]
    return sorted(
        path[-1] if last.count(path[-1]) == 1 else dotted for dotted, path in allowed.items()
    )


def _all_fields(system, prefix=()) -> list[tuple[str, ...]]:
    """The attribute paths of every dataclass field (not modules themselves), depth first."""
    out = []
    if isinstance(system, eqx.Module):
        for f in dataclasses.fields(system):
            v = getattr(system, f.name, None)
            if isinstance(v, eqx.Module):
                out += _all_fields(v, prefix + (f.name,))
            else:
                out.append(prefix + (f.name,))
    return out


def _field_kind(system, path) -> str | None:
    """``None`` for a fittable field; otherwise why it is not one (for the error line)."""
    obj = system
    for p in path[:-1]:
        if not isinstance(obj, eqx.Module) or not hasattr(obj, p):
            return "is not a field"
        obj = getattr(obj, p)
    fields = {f.name: f for f in dataclasses.fields(obj)} if isinstance(obj, eqx.Module) else {}
    if path[-1] not in fields:
        return "is not a field"
    f = fields[path[-1]]
    v = getattr(obj, path[-1], None)
    if isinstance(v, eqx.Module):
        return f"is a {type(v).__name__}, not a number"
    if f.metadata.get("static", False):
        return f"= {v!r} is a static field (a setting, not a parameter)"
    if isinstance(v, (bool, np.bool_)):
        return f"= {v!r} is a flag, not a parameter"
    if isinstance(v, (int, np.integer)):
        return f"= {v!r} is an integer, not a float parameter"
    if isinstance(v, float):
        return None
    if isinstance(v, (np.ndarray, jax.Array, np.floating)):
        if np.ndim(v) != 0:
            return f"has shape {np.shape(v)}, not a scalar parameter"
        dtype = v.dtype if isinstance(v, jax.Array) else np.asarray(v).dtype
        if not np.issubdtype(dtype, np.floating):
            return f"= {_short(v)} is not a float parameter (dtype {dtype})"
        return None
    return f"= {_short(v)} is not a number"


def _short(v) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _get(obj: Any, path) -> Any:
    for p in path:
        obj = getattr(obj, p)
    return obj


def _set(system, path, value):
    return eqx.tree_at(lambda s: _get(s, path), system, value)


def _bounds_of(system, path) -> tuple[float, float]:
    """Physical bounds a model declares for a parameter (``bounds`` class attribute)."""
    owner = _get(system, path[:-1])
    lo, hi = getattr(type(owner), "bounds", {}).get(path[-1], (-math.inf, math.inf))
    return float(lo), float(hi)


#: the shortest step between observation times a record may have, in the system's time units
#: (s): no camera or sensor of a rolling body samples at 1 GHz, and the fit integrates at
#: tolerances near 1e-10 (a 1e-15 s step is times in the wrong unit, or rounding)
MIN_STEP = 1e-9
#: the shortest step relative to the record's span: times rounded to too few digits
MIN_RELATIVE_STEP = 1e-9
#: samples per time scale a record needs at least (a system's ``time_scale``): fewer cannot
#: follow the motion, and a record in milliseconds has steps 1000x too long
SAMPLES_PER_TIME_SCALE = 1.0


def y0_indices(system, fit_y0) -> tuple[int, ...]:
    """The state components ``fit_y0`` names (``True``: all, ``False``/``None``: none, or names;
    an unknown name is a one-line error)."""
    names_state = tuple(system.state_names)
    if fit_y0 is True:
        return tuple(range(len(names_state)))
    if fit_y0 is False or fit_y0 is None:
        return ()
    fit_y0 = (fit_y0,) if isinstance(fit_y0, str) else tuple(fit_y0)
    unknown = [n for n in fit_y0 if n not in names_state]
    if unknown:
        raise ValueError(
            f"fit_y0: {unknown[0]!r} is not a state component of "
            f"{type(system).__name__} ({', '.join(names_state)})"
        )
    return tuple(names_state.index(n) for n in fit_y0)


def number_pair(name: str, v, what: str) -> tuple[float, float]:
    """Two floats from a pair ``v``, or a one-line error: ``{name} = v must be a pair {what}``."""
    try:
        if isinstance(v, (str, bytes)) or len(v) != 2:
            raise TypeError
        return float(v[0]), float(v[1])
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {v!r} must be a pair {what}") from None


def check_record(system, obs: "Observations") -> None:
    """Plausible units and spacing of a record, before any fit: a ``ValueError`` naming the
    column, in one line.

    * ``t``: no step below :data:`MIN_STEP` (1e-9 s) or :data:`MIN_RELATIVE_STEP` (1e-9) of the
      span; where the system states a ``time_scale`` (a property, in its time units: the rim's
      ``sqrt(rho/g)``), a median step of at most that time scale (times in milliseconds give
      steps 1000x too long: 4.2 s for a 240 Hz camera, against the rim's 0.115 s).
    * each column the system declares an angle (``observable_units`` entry ``"rad"``, matched
      to ``observables`` by name): its median rate must turn less than a full turn (2 pi) per
      time scale (an angle in degrees turns 57x as fast: the generated rim records of
      ``tests/rim_records.py``, seeds 0-39, turn at most 0.35 turns per time scale in rad, and
      every one of them is refused in degrees).
    Systems without a ``time_scale`` get the first two checks only."""
    owner = type(system).__name__
    unit = getattr(system, "time_units", "s")
    t = np.asarray(obs.t, float)
    dt = np.diff(t)
    span = float(t[-1] - t[0])
    i = int(np.argmin(dt))
    least = max(MIN_STEP, MIN_RELATIVE_STEP * span)
    if dt[i] < least:
        why = (
            f"below {MIN_STEP:g} {unit} (no camera samples at 1 GHz)"
            if dt[i] < MIN_STEP
            else f"below {MIN_RELATIVE_STEP:g} of the record's span {span:.6g} {unit} (times "
            f"rounded to too few digits?)"
        )
        raise ValueError(
            f"t: the step t[{i + 1}] - t[{i}] = {float(dt[i]):.3g} {unit} is {why}; "
            f"observation times must be in {unit}, with steps of at least {least:.3g} {unit}"
        )
    try:
        tau = float(system.time_scale) if hasattr(type(system), "time_scale") else None
    except (TypeError, ValueError):  # a batched system: no one time scale
        tau = None
    if tau is None or not (math.isfinite(tau) and tau > 0):
        return
    step = float(np.median(dt))
    if step > tau / SAMPLES_PER_TIME_SCALE:
        raise ValueError(
            f"t: the median step is {step:.4g} {unit}, longer than {owner}'s time "
            f"scale {tau:.3g} {unit}: samples this far apart cannot follow the motion (times "
            f"in milliseconds?); t must be in {unit}, with at least "
            f"{SAMPLES_PER_TIME_SCALE:g} sample per {tau:.3g} {unit}"
        )
    names = tuple(getattr(system, "observables", ()) or ())
    units = tuple(getattr(system, "observable_units", ()) or ())
    for k, name in enumerate(obs.names):
        if name not in names or names.index(name) >= len(units):
            continue
        if units[names.index(name)] != "rad":
            continue
        rate = float(np.median(np.abs(np.diff(obs.values[:, k])) / dt))
        turn = rate * tau / (2 * math.pi)
        if turn > 1.0:
            raise ValueError(
                f"{name}: the angle turns {turn:.3g} turns per time scale of {owner} "
                f"({tau:.3g} {unit}), a median rate of {rate:.4g} per {unit}: in degrees? "
                f"{name} must be in rad, and an angle in rad turns less than one turn per "
                f"time scale"
            )


def observation_methods(system) -> list[str]:
    """The public methods a system adds to :class:`AbstractSystem`: what ``observe`` may name."""
    base = set(dir(AbstractSystem))
    cls = type(system)
    return sorted(
        n
        for n in dir(cls)
        if not n.startswith("_")
        and n not in base
        and callable(getattr(cls, n, None))
        and not isinstance(getattr(cls, n, None), type)
    )


def _check_observe(system, observe) -> None:
    """One line naming the method and the class when ``observe`` names what the system lacks."""
    if callable(observe):
        return
    owner = type(system).__name__
    allowed = ", ".join(observation_methods(system)) or "none"
    if not isinstance(observe, str):
        raise ValueError(
            f"observe = {_short(observe)} must be a function observe(system, t, y) or the "
            f"name of a method of {owner} (its methods: {allowed})"
        )
    if not callable(getattr(system, observe, None)):
        what = "has no method" if not hasattr(system, observe) else "has no method (an attribute)"
        raise ValueError(
            f"observe = {observe!r}: {owner} {what} {observe!r}; give a function "
            f"observe(system, t, y) or one of its methods: {allowed}"
        )


# ---------------------------------------------------------------------- the model's residuals
class _EventlessFlow(AbstractSystem):
    """A non-hybrid system's flow without its events: fitted samples may lie past the model's
    event (the trajectory is continued), so that residuals stay smooth in the parameters."""

    system: AbstractSystem

    @property
    def state_names(self):
        return self.system.state_names

    @property
    def n_samples(self):
        return self.system.n_samples

    def vector_field(self, t, y, mode):
        return self.system.vector_field(t, y, mode)

    def jump_times(self):
        return self.system.jump_times()


class _FitProblem(eqx.Module):
    system: AbstractSystem
    y0: jax.Array  # the full initial state; fitted components are overwritten
    t: jax.Array
    values: jax.Array
    inv_sigma: jax.Array
    t_event: jax.Array
    inv_sigma_event: jax.Array
    rtol: jax.Array
    atol: jax.Array
    paths: tuple = eqx.field(static=True)
    y0_index: tuple = eqx.field(static=True)
    observe: object = eqx.field(static=True)
    with_event: bool = eqx.field(static=True)
    event: int = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    # 1 for an observation, 0 for a padding row (records are padded to a size class, so that
    # records of other lengths reuse the compiled fit: _problem)
    weight: jax.Array | None = None

    def build(self, x):
        system = self.system
        for i, path in enumerate(self.paths):
            system = _set(system, path, x[i])
        y0 = self.y0
        if self.y0_index:
            y0 = y0.at[jnp.asarray(self.y0_index)].set(x[len(self.paths) :])
        return system, y0

    def predict(self, x, t_end=None):
        """The observables at the observation times up to ``t_end`` (default: all; nan
        after it: the model is integrated to ``t_end`` only)."""
        system, y0 = self.build(x)
        flow = system if system.hybrid else _EventlessFlow(system)
        t1 = self.t[-1] if t_end is None else t_end
        sol = solve(
            flow,
            y0,
            self.t[0],
            t1,
            ts=self.t,
            rtol=self.rtol,
            atol=self.atol,
            max_steps=self.max_steps,
            adjoint=diffrax.ForwardMode(),
        )
        # observe(system, t, y), or the name of a method of the system
        obs = cast("Callable[..., jax.Array] | str", self.observe)
        h = (lambda t, y: obs(system, t, y)) if callable(obs) else getattr(system, obs)
        return jax.vmap(h)(self.t, sol.ys), system, y0

    def residuals(self, x, t_end=None):
        """Weighted residuals; with ``t_end`` (a window of the record, traced: one compile for
        every window) those after it are 0."""
        pred, system, y0 = self.predict(x, t_end)
        r = (pred - self.values) * self.inv_sigma
        keep = jnp.ones(self.t.shape, bool) if self.weight is None else self.weight > 0
        if t_end is not None:
            keep = keep & (self.t <= t_end)
        r = jnp.where(keep[:, None], r, 0.0)
        r = r.reshape(-1)
        if self.with_event:
            sol = solve(
                system,
                y0,
                self.t[0],
                jnp.inf,
                rtol=self.rtol,
                atol=self.atol,
                max_steps=self.max_steps,
                adjoint=diffrax.ForwardMode(),
            )
            fired = (sol.status == Status.EVENT) & (sol.event == self.event)
            r_ev = jnp.where(fired, (sol.t - self.t_event) * self.inv_sigma_event, jnp.nan)
            r = jnp.concatenate([r, r_ev[None]])
        return r


@eqx.filter_jit
def _residuals(x, problem: _FitProblem):
    return problem.residuals(x)


@eqx.filter_jit
def _residuals_and_jacobian(x, problem: _FitProblem):
    r_fn = lambda z: (problem.residuals(z),) * 2  # noqa: E731
    J, r = jax.jacfwd(r_fn, has_aux=True)(x)
    return r, J


@eqx.filter_jit
def _batch_residuals_and_jacobians(xs, t_end, problem: _FitProblem):
    """Residuals and forward-mode Jacobians of the lanes ``xs`` on the window ``t <= t_end``
    (``None``: the whole record, the observed event time included)."""

    def one(x):
        r_fn = lambda z: (problem.residuals(z, t_end),) * 2  # noqa: E731
        J, r = jax.jacfwd(r_fn, has_aux=True)(x)
        return r, J

    return jax.vmap(one)(xs)


@eqx.filter_jit
def _predict(x, problem: _FitProblem):
    return problem.predict(x)[0]


# ---------------------------------------------------------------------- the fit
def identify(
    system: AbstractSystem,
    observations: Observations,
    params: Sequence[str] = (),
    *,
    y0=None,
    fit_y0: bool | Sequence[str] = True,
    y0_candidates=None,
    bounds: dict[str, tuple[float, float]] | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_iter: int = 100,
    tol: float = 1e-10,
    max_steps: int = 16_384,
    robust: bool = True,
    windows: Sequence[float] | None = None,
    n_starts: int = 8,
    profile: bool = True,
    progress: bool | Callable[[dict], None] = True,
) -> Fit:
    """Fit the parameter fields ``params`` of ``system`` and its initial state to ``observations``.

    ``y0``: the initial state (a guess for the fitted components; default
    ``system.guess_state(observations)`` where the system has one, which also gives further
    starts); ``fit_y0``: fit all state components (``True``), none, or the named ones;
    ``y0_candidates``: further guesses ``(m, d)``. ``bounds``: ``{name: (lo, hi)}`` added to
    the bounds the models declare (rates >= 0, 0 < j <= 1), for a parameter or a fitted state
    component (``"y0.<state name>"``). The model is integrated by
    :func:`rollax.solve` at ``rtol``/``atol`` from the first observation time.

    **How the fit works** (``robust=True``, the default). A long record of a nearly periodic
    motion, fitted at once from a poor start, has many local minima (phase slips). So the fit
    is continued over growing windows of the record (``windows``: their lengths [s] from the
    first observation; default: from a window of about 1/32 of the record, growing 1.5x, to
    the whole record), each window's fit starting from the last one's. The first window is
    fitted from the ``n_starts`` best of all starts (``y0``, the candidates) by cost, as one
    batched (vmapped) solve per iteration; the best three lanes go on through the first half
    of the windows, the best one to the end. ``robust=False``: one fit of the whole record from
    the best start (the method before; kept to compare).
    Each window's fit is projected Levenberg-Marquardt (:mod:`rollax._drivers._lm`); it stops when a
    step changes the cost by less than ``tol`` relative, or after ``max_iter`` trial steps.

    **What the result says** (:class:`Fit`). ``chi2``, ``dof``, ``chi2_per_dof`` and
    ``p_value`` of the weighted residuals; ``whiteness``: per observable the lag-1
    autocorrelation of the residuals and the runs test's z (both near 0 for white noise). A
    fit whose chi^2 per degree of freedom is above 2 with the noise given, or whose residuals
    are strongly correlated (|lag-1| > 0.5), has ``status = "poor_fit"`` and a warning: the
    model does not follow the data (a local minimum, a wrong model or noise levels too small)
    and its standard errors, which assume a good fit, are not to be trusted. Noise levels not
    given are estimated from the residuals (``noise_estimated``; the covariance is then scaled
    by them). ``std_errors``: Gauss-Newton. ``profile`` (``profile=True``): for each named
    parameter the profile likelihood (the other quantities refitted at fixed values of it) and
    its 95 % interval, where chi^2 rises by 3.84 (with the noise levels estimated, by the 95 %
    quantile of ``F(1, nu)``, ``nu`` their degrees of freedom: ``profile[name]["level"]``);
    it holds where the Gauss-Newton bars do not
    (curved, strongly correlated valleys; a bound). ``status``: ``"converged"``,
    ``"poor_fit"`` or ``"not_converged"``; ``converged`` is true only for the first.
    Warns (:class:`IdentifiabilityWarning`) where the data do not determine a fitted quantity.
    ``progress``: a line per few iterations on stderr (the default: a fit can take minutes),
    ``False`` for none, or a function called with each iteration's record.
    """
    t_start = time.perf_counter()
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a rollax.AbstractSystem, got {type(system).__name__}")
    if not isinstance(observations, Observations):
        raise TypeError(
            f"observations must be rollax.Observations, got {type(observations).__name__}"
        )
    obs = observations
    if isinstance(params, str):
        params = (params,)
    params = tuple(params)
    if len(set(params)) != len(params):
        raise ValueError(f"params = {list(params)!r} names a parameter twice")
    paths = tuple(parameter_path(system, p) for p in params)
    _check_observe(system, obs.observe)
    for name, v, lo_ in (
        ("max_iter", max_iter, 1),
        ("max_steps", max_steps, 1),
        ("n_starts", n_starts, 1),
    ):
        if not (
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= lo_
        ):
            raise ValueError(f"{name} = {v!r} must be an integer >= {lo_}")
    max_iter, max_steps, n_starts = int(max_iter), int(max_steps), int(n_starts)
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ValueError(f"tol = {tol!r} is outside the allowed range (0, 1)")
    for name, v in (("robust", robust), ("profile", profile)):
        if not isinstance(v, bool):
            raise ValueError(f"{name} = {v!r} must be True or False")
    check_record(system, obs)  # (before guess_state, which reads the record)
    span = float(obs.t[-1] - obs.t[0])
    win = _windows(obs.t, windows, span) if robust else [span]
    if y0 is None:
        if not hasattr(system, "guess_state"):
            raise ValueError(f"y0 is needed: {type(system).__name__} has no guess_state")
        y0, cands = system.guess_state(obs)  # pyright: ignore[reportAttributeAccessIssue]  (hasattr)
        y0_candidates = cands if y0_candidates is None else y0_candidates
    y0 = np.asarray(system.check_state(y0), dtype=float)
    if y0.ndim != 1:
        raise ValueError(f"y0 has shape {y0.shape}; one initial state is needed")
    names_state = tuple(system.state_names)
    y0_index = y0_indices(system, fit_y0)
    fitted = params + tuple(f"y0.{names_state[i]}" for i in y0_index)
    n_fit = len(fitted)
    if n_fit == 0:
        raise ValueError("nothing to fit: give params or fit_y0")
    n_res = obs.values.size + (obs.t_event is not None)
    if n_res <= n_fit:
        raise ValueError(
            f"{n_res} observed values for {n_fit} fitted quantities; more "
            f"observations than unknowns are needed"
        )
    if obs.t_event is not None and obs.event >= len(system.events):
        raise ValueError(
            f"observations.event = {obs.event} but {type(system).__name__} has "
            f"{len(system.events)} events"
        )

    if bounds is not None:
        if not isinstance(bounds, dict):
            raise ValueError(f"bounds = {bounds!r} must be a dict {{name: (lo, hi)}}")
        for k, b in bounds.items():
            blo, bhi = number_pair(f"bounds[{k!r}]", b, "(lo, hi) of numbers")
            if math.isnan(blo) or math.isnan(bhi) or not blo < bhi:
                raise ValueError(f"bounds[{k!r}] = {b!r} must have lo < hi (inf allowed, not nan)")
    lo = np.full(n_fit, -np.inf)
    hi = np.full(n_fit, np.inf)
    for i, (p, path) in enumerate(zip(params, paths)):
        lo[i], hi[i] = _bounds_of(system, path)
    for i, name in enumerate(fitted):  # (a fitted state component too: "y0.<name>")
        if bounds and name in bounds:
            lo[i], hi[i] = max(lo[i], float(bounds[name][0])), min(hi[i], float(bounds[name][1]))
    if bounds:
        extra = [k for k in bounds if k not in fitted]
        if extra:
            raise ValueError(
                f"bounds: {extra[0]!r} is not among the fitted quantities {list(fitted)!r}"
            )
    x0 = np.concatenate([[float(_get(system, p)) for p in paths], y0[list(y0_index)]])
    if np.any(x0 < lo) or np.any(x0 > hi):
        i = int(np.argmax((x0 < lo) | (x0 > hi)))
        raise ValueError(
            f"the starting value {fitted[i]} = {float(x0[i])!r} is outside its bounds "
            f"[{lo[i]}, {hi[i]}]"
        )
    n_first = int(np.sum(obs.t <= obs.t[0] + win[0] * (1 + 1e-12))) * obs.values.shape[1]
    if n_first <= n_fit:
        raise ValueError(
            f"windows: the first window, {win[0]:.6g} s, holds {n_first} observed "
            f"values for {n_fit} fitted quantities; it must hold more (make it "
            f"longer)"
        )
    starts = x0[None]
    if y0_candidates is not None:
        cands = np.asarray(y0_candidates, dtype=float)
        if cands.ndim != 2 or cands.shape[1] != y0.shape[0]:
            raise ValueError(
                f"y0_candidates has shape {cands.shape}; it must be (m, {y0.shape[0]})"
            )
        if not np.all(np.isfinite(cands)):
            i = int(np.argwhere(~np.isfinite(cands))[0][0])
            raise ValueError(
                f"y0_candidates[{i}] = {cands[i].tolist()!r} is not finite; "
                f"candidate states must be finite"
            )
        xs = np.repeat(x0[None], cands.shape[0], axis=0)
        xs[:, len(params) :] = cands[:, list(y0_index)]
        starts = np.concatenate([starts, xs])

    noise_estimated = obs.sigma is None
    sigma = obs.sigma if obs.sigma is not None else _noise_guess(obs.values)

    def problem_for(sig, with_event):
        p = _problem(system, y0, obs, sig, rtol, atol, paths, y0_index, max_steps)
        return p if with_event else dataclasses.replace(p, with_event=False)

    report = _reporter(progress)
    history: list[dict] = []

    def rec(r):
        history.append(r)
        report(r)

    # the windows: the track alone (the event time, far from the guess's and strongly
    # nonlinear in it, joins on the whole record: a direct fit stalled at 4e8 in 100
    # iterations). Every batched call has n_starts lanes (padded) or one, so that each
    # function compiles at most twice: compiling, not running, is most of a first fit's time
    track = problem_for(sigma, False)
    t0 = float(obs.t[0])
    L = min(n_starts, starts.shape[0]) if robust else 1
    r_st = _lanes(_batch_residuals_and_jacobians, starts, t0 + win[0], track, L)[0]
    costs = _lm._finite_cost(r_st)
    if not np.isfinite(costs).any():
        raise ValueError(
            "the model cannot be evaluated at any starting guess (non-finite "
            "residuals: the run failed or ended before the last observation)"
        )
    order = np.argsort(costs, kind="stable")[:L]
    order = order[np.isfinite(costs[order])]
    rec({"stage": "start", "candidates": int(starts.shape[0]), "cost": float(costs[order[0]])})
    xs = starts[order]
    it = 0
    converged = False
    half = (len(win) + 1) // 2
    lam = np.full(xs.shape[0], 1e-3)
    for k, w in enumerate(win):
        width = L if k < half else 1
        xs, lam = xs[:width], lam[:width]
        lanes = _lm.solve(
            xs,
            lambda z: _lanes(_batch_residuals_and_jacobians, z, t0 + w, track, width),
            None,
            lo,
            hi,
            max_iter=max_iter,
            tol=tol,
            cost_atol=_WINDOW_ATOL if k + 1 < len(win) else _FINAL_ATOL,
            lam0=lam,
            report=rec,
            stage=f"window {w:.4g} s",
        )
        it += int(lanes.iterations.max(initial=0))
        best = np.argsort(lanes.cost, kind="stable")
        xs = lanes.x[best]
        # the next window starts near this one's optimum: a small damping, not below 1e-9
        lam = np.maximum(lanes.lam[best], 1e-9)
        converged = bool(lanes.converged[best[0]])
    x = xs[0]

    # on the whole record (the event time too): fit; with noise levels not given, re-estimate
    # them from the residuals and fit again
    problem = problem_for(sigma, True)

    def refit(x):
        lanes = _single(x, problem, lo, hi, max_iter, tol, rec, "whole record")
        return lanes.x[0], bool(lanes.converged[0]), int(lanes.iterations[0])

    if obs.t_event is not None:
        x, converged, k = refit(x)
        it += k
    if noise_estimated:
        for _ in range(3):
            r = _single_rj(x, problem)[0]
            per = r[: obs.values.size].reshape(obs.values.shape) * np.asarray(sigma)
            # the mean square with the fitted quantities' share of the residuals taken out
            dof = max(1.0 - n_fit / n_res, 1e-3)
            new = np.sqrt(np.mean(per**2, axis=0) / dof)
            new = np.where(new > 0, new, np.asarray(sigma))
            done = np.allclose(new, sigma, rtol=1e-3)
            sigma = new
            problem = problem_for(sigma, True)
            x, converged, k = refit(x)
            it += k
            if done:
                break

    r, J = _single_rj(x, problem)
    cost = 0.5 * float(r @ r)
    at_bound = (x <= lo) | (x >= hi)
    cov, corr, se, cond = _covariance(J)
    fit_system, fit_y0_arr = problem.build(jnp.asarray(x))
    resid = r[: obs.values.size].reshape(obs.values.shape) * np.asarray(sigma)
    rms = {n: float(np.sqrt(np.mean(resid[:, k] ** 2))) for k, n in enumerate(obs.names)}
    if obs.t_event is not None:
        assert obs.sigma_event is not None  # (Observations requires it with t_event)
        rms["t_event"] = float(abs(r[-1]) * float(obs.sigma_event))
    sig = {n: float(s) for n, s in zip(obs.names, np.asarray(sigma))}
    # the residuals of the observations (and the event time), without the padding rows
    r_obs = np.concatenate([r[: obs.values.size], r[-1:] if obs.t_event is not None else []])
    diag = _diagnostics.goodness(r_obs, obs.values.shape, obs.names, n_fit, J=J)
    # the 95 % level: chi^2_1's, or F(1, nu)'s with each noise level estimated from its own
    # column's residuals (rows * (1 - n_fit / n_res) degrees of freedom)
    nu = obs.values.shape[0] * max(1.0 - n_fit / n_res, 1e-3) if noise_estimated else None
    level = _diagnostics.profile_level(nu)
    msgs = _identifiability(fitted, x, se, cond, at_bound, len(params), math.sqrt(level))
    status = "converged" if converged else "not_converged"
    poor = _diagnostics.poor_fit(diag, sigma_given=not noise_estimated)
    if poor:
        status = "poor_fit"
        msgs.insert(
            0,
            f"poor fit: {poor}; the model does not follow the data (a local "
            f"minimum, a wrong model or noise levels set too small), so the "
            f"standard errors are not to be trusted: try "
            + ("" if robust else "robust=True, ")
            + "a better y0 or its candidates, other fitted parameters, or check the noise "
            "levels (no profile likelihoods are computed for a poor fit)",
        )
    elif not converged:
        msgs.insert(
            0,
            f"the fit did not converge in max_iter = {max_iter} trial steps; "
            f"the estimates and their errors are not final",
        )
    prof = {}
    # the profiles of the parameters with a finite error (one the data do not touch has none:
    # it is held where it is, a zero row of the starting prediction's covariance)
    which = [i for i in range(len(params)) if np.isfinite(se[i])]
    if profile and which and status != "poor_fit":
        rj, cf = _full_record(problem, L)
        prof = _diagnostics.profile(
            x,
            cost,
            np.where(np.isfinite(cov), cov, 0.0),
            lo,
            hi,
            which,
            fitted,
            rj,
            cf,
            max_iter=max_iter,
            tol=tol,
            cost_atol=_FINAL_ATOL,
            report=rec,
            level=level,
        )
        for name, p in prof.items():
            if not (p["closed"][0] and p["closed"][1]):
                side = "above" if p["closed"][0] else "below" if p["closed"][1] else "either side"
                msgs.append(
                    f"{name}: its profile likelihood stays within the 95 % level "
                    f"{side} over the range tried: the data cannot bound it there "
                    f"(interval {_interval_text(p['interval'])})"
                )
    for m in msgs:
        warnings.warn(m, IdentifiabilityWarning, stacklevel=2)
    return Fit(
        names=fitted,
        values=x,
        std_errors=se,
        correlation=corr,
        covariance=cov,
        at_bound=at_bound,
        system=fit_system,
        y0=np.asarray(fit_y0_arr),
        sigma=sig,
        residual_rms=rms,
        cost=cost,
        iterations=it,
        converged=status == "converged",
        wall_time=time.perf_counter() - t_start,
        n_observations=int(obs.t.shape[0]),
        warnings=msgs,
        history=history,
        status=status,
        chi2=diag["chi2"],
        dof=diag["dof"],
        chi2_per_dof=diag["chi2_per_dof"],
        p_value=diag["p_value"],
        whiteness=diag["whiteness"],
        noise_estimated=noise_estimated,
        profile=prof,
        windows=[float(w) for w in win],
    )


# a window's fit stops when a step lowers chi^2 / 2 by less than this (the next window
# refines it); the whole record's by less than _FINAL_ATOL (~1e-3 standard errors)
_WINDOW_ATOL = 1e-2
_FINAL_ATOL = 1e-6


def _lanes(fn, xs, t_end, problem, width):
    """``fn(lanes, t_end, problem)`` on the rows of ``xs`` in batches of exactly ``width``
    (the last padded with copies of its first row), concatenated: one compiled shape."""
    xs = np.asarray(xs, float)
    outs = []
    for a in range(0, xs.shape[0], width):
        chunk = xs[a : a + width]
        n = chunk.shape[0]
        if n < width:
            chunk = np.concatenate([chunk, np.repeat(chunk[:1], width - n, axis=0)])
        out = fn(jnp.asarray(chunk), jnp.asarray(float(t_end)), problem)
        outs.append(jax.tree_util.tree_map(lambda v: np.asarray(v)[:n], out))
    return jax.tree_util.tree_map(lambda *v: np.concatenate(v), *outs)


def _full_record(problem, width):
    """Batched ``(rj, None)`` on the whole record (the event time included where observed):
    trials are evaluated with their Jacobians (:func:`rollax._drivers._lm.solve`)."""
    if problem.with_event:
        return (
            lambda z: _lanes(
                lambda a, _, p: _batch_residuals_and_jacobians(a, None, p), z, 0.0, problem, width
            ),
            None,
        )
    t_end = float(problem.t[-1])
    return (lambda z: _lanes(_batch_residuals_and_jacobians, z, t_end, problem, width), None)


def _single(x, problem, lo, hi, max_iter, tol, report, stage):
    rj, cf = _full_record(problem, 1)
    return _lm.solve(
        np.asarray(x)[None],
        rj,
        cf,
        lo,
        hi,
        max_iter=max_iter,
        tol=tol,
        cost_atol=_FINAL_ATOL,
        report=report,
        stage=stage,
    )


def _single_rj(x, problem):
    r, J = _full_record(problem, 1)[0](np.asarray(x)[None])
    return r[0], J[0]


def _windows(t, windows, span) -> list[float]:
    """Window lengths [s] from the first observation, the last the whole record."""
    if windows is None:
        # the first holds ~1/32 of the record but at least 24 samples; then 1.5x each
        n = t.shape[0]
        w = max(span / 32.0, float(t[min(n - 1, 24)] - t[0]))
        out = []
        while w < span:
            out.append(w)
            w *= 1.5
        return out + [span]
    try:
        if isinstance(windows, (str, bytes)):
            raise TypeError
        ws = [float(w) for w in windows]
    except (TypeError, ValueError):
        raise ValueError(
            f"windows = {windows!r} must be a sequence of window lengths [s]"
        ) from None
    if not ws or not all(math.isfinite(w) and w > 0 for w in ws) or np.any(np.diff(ws) <= 0):
        raise ValueError(f"windows = {windows!r} must be increasing lengths > 0 [s]")
    if ws[-1] > span * (1 + 1e-12):
        raise ValueError(
            f"windows = {windows!r}: the record is {span:.6g} s long; window "
            f"lengths must be in (0, {span:.6g}] s (the last window is always the "
            f"whole record)"
        )
    return [w for w in ws if w < span] + [span]


def _interval_text(iv) -> str:
    return "[" + ", ".join("open" if v is None else f"{v:.4g}" for v in iv) + "]"


def predict(fit: Fit, observations: Observations, t=None) -> np.ndarray:
    """The fitted model's observables at the times ``t`` (default: the observation times)."""
    _check_observe(fit.system, observations.observe)
    t = observations.t if t is None else np.asarray(t, dtype=float)
    obs = dataclasses.replace(
        observations,
        t=t,
        values=np.zeros((t.shape[0], len(observations.names))),
        t_event=None,
        sigma=None,
    )
    problem = _problem(fit.system, fit.y0, obs, np.ones(len(obs.names)), 1e-10, 1e-10)
    return np.asarray(_predict(jnp.zeros(0), problem))[: t.shape[0]]


def _size_class(n: int) -> int:
    """The padded length of a record of n observations: the least of 2^k x (1, 1.25, 1.5,
    1.75) >= n, at least 64 (a new length would compile the whole fit again: ~20 s)."""
    if n <= 64:
        return 64
    k = 2 ** (int(math.log2(n)) - 2)
    return next(m * k for m in range(4, 9) if m * k >= n)


def _problem(
    system, y0, obs: Observations, sigma, rtol, atol, paths=(), y0_index=(), max_steps=16_384
) -> _FitProblem:
    n = obs.t.shape[0]
    pad = _size_class(n) - n
    # padding rows repeat the last time (save times must not decrease) with weight 0
    t = np.concatenate([obs.t, np.full(pad, obs.t[-1])])
    values = np.concatenate([obs.values, np.zeros((pad, obs.values.shape[1]))])
    return _FitProblem(
        system=system,
        y0=jnp.asarray(y0),
        t=jnp.asarray(t),
        weight=jnp.asarray(np.concatenate([np.ones(n), np.zeros(pad)])),
        values=jnp.asarray(values),
        inv_sigma=jnp.asarray(1.0 / np.asarray(sigma)),
        t_event=jnp.asarray(np.nan if obs.t_event is None else float(obs.t_event)),
        inv_sigma_event=jnp.asarray(1.0 / float(obs.sigma_event or 1.0)),
        rtol=jnp.asarray(float(rtol)),
        atol=jnp.asarray(float(atol)),
        paths=paths,
        y0_index=y0_index,
        observe=obs.observe,
        with_event=obs.t_event is not None,
        event=obs.event,
        max_steps=max_steps,
    )


def _noise_guess(values: np.ndarray) -> np.ndarray:
    """Noise level of each observable from its third differences (a smooth signal sampled
    finely has almost none): std(d^3 v) / sqrt(20) for white noise."""
    if values.shape[0] < 8:
        s = np.std(values, axis=0)
    else:
        s = np.std(np.diff(values, n=3, axis=0), axis=0) / math.sqrt(20.0)
    scale = np.maximum(np.abs(values).max(axis=0), 1.0)
    return np.where(s > 0, s, 1e-6 * scale)


def _covariance(J):
    """Gauss-Newton covariance, correlation, standard errors and the condition number of the
    information matrix's correlation form. A quantity the data do not touch at all (a zero
    column of ``J``: a parameter with no effect on the record) gets an infinite standard
    error and NaN covariances, and the rest are computed without it: inverting the whole
    matrix failed and gave every quantity an infinite error (a new-user review: one unused
    parameter wiped out the error bars of two well-determined ones)."""
    A = J.T @ J
    n = A.shape[0]
    dA = np.sqrt(np.maximum(np.diag(A), 0.0))
    live = dA > 0
    cov = np.full((n, n), np.nan)
    corr = np.full((n, n), np.nan)
    se = np.full(n, np.inf)
    if not live.any():
        return cov, corr, se, math.inf
    scale = dA[live]
    block = np.ix_(live, live)
    C = A[block] / np.outer(scale, scale)
    try:
        cond = float(np.linalg.cond(C))
        cov_l = np.linalg.inv(C) / np.outer(scale, scale)
    except np.linalg.LinAlgError:
        return cov, corr, se, math.inf
    var = np.diag(cov_l)
    se_l = np.where(var >= 0, np.sqrt(np.abs(var)), np.nan)
    cov[block] = cov_l
    se[live] = se_l
    with np.errstate(invalid="ignore", divide="ignore"):
        corr[block] = cov_l / np.outer(se_l, se_l)
    return cov, corr, se, cond


def _identifiability(names, x, se, cond, at_bound, n_params, z=1.96) -> list[str]:
    """What the data cannot tell, from the Gauss-Newton errors: ``z`` standard errors make the
    95 % interval (1.96, or the t quantile with the noise estimated)."""
    out = []
    if not math.isfinite(cond) or cond > 1e10:
        out.append(
            f"the information matrix is numerically singular (condition number "
            f"{cond:.3g}): the data cannot separate some of {', '.join(names)}"
        )
    for i, (n, v, s) in enumerate(zip(names, x, se)):
        if not math.isfinite(s):
            out.append(f"{n} is not identifiable from these data (standard error undefined)")
        elif z * s > abs(v) and i < n_params:  # (zero means nothing special for a state)
            out.append(
                f"{n} = {v:.6g} +- {s:.3g}: the data cannot tell it from 0 (its 95 % "
                f"interval includes 0)"
            )
        elif z * s > 0.5 * abs(v) and i < n_params:
            out.append(
                f"{n} = {v:.6g} +- {s:.3g}: poorly determined by these data (its 95 % "
                f"interval is +-{100 * z * s / abs(v):.0f} % of it; a longer or "
                f"less noisy record would tell more)"
            )
    return out


def _reporter(progress):
    if callable(progress):
        return progress
    if progress:
        import sys
        import time

        last = {"stage": None, "t0": time.perf_counter()}
        print(
            "identify: compiling the record's solves (the first lines wait for it)",
            file=sys.stderr,
            flush=True,
        )

        def show(rec):
            el = time.perf_counter() - last["t0"]
            if rec.get("stage") == "start":
                print(
                    f"identify: best of {rec['candidates']} starting guesses, cost "
                    f"{rec['cost']:.6g} ({el:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                return
            # the first iteration of each stage (a window, the whole record, the profiles),
            # then every 5th
            if rec["stage"] != last["stage"] or rec["iteration"] % 5 == 0:
                last["stage"] = rec["stage"]
                print(
                    f"identify: {rec['stage']:>16s}  iteration {rec['iteration']:3d}  "
                    f"lanes {rec.get('lanes', 1):2d}  cost {rec['cost']:.10g}  "
                    f"lambda {rec['lambda']:.2g}  scaled gradient {rec['gradient']:.3g}  "
                    f"({el:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )

        return show
    return lambda rec: None
