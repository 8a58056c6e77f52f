"""``rollax.identify``: parameters and initial state from observed trajectories, with error bars.

Weighted nonlinear least squares through :func:`rollax.solve`:

    minimise  1/2 sum_i sum_k ((h_k(y(t_i; theta, y0)) - d_ik) / sigma_k)^2
              (+ 1/2 ((t*(theta, y0) - t*_obs) / sigma_t*)^2 when an event time is observed)

over the named parameter fields ``theta`` and the initial state ``y0``, by Levenberg-Marquardt
with Marquardt's diagonal scaling and simple bounds (a parameter at a bound whose gradient
points out of the box is held there for that step; steps are projected onto the box).

Why our own small LM and not ``optimistix.LevenbergMarquardt``: the residual Jacobian is
computed in forward mode (``jax.jacfwd`` through ``rollax.solve`` with
``diffrax.ForwardMode``: a handful of parameters against thousands of residuals), bounds are
needed (rates >= 0, 0 < j <= 1) and optimistix's least-squares solvers have none, and the
loop runs on the host so that it can report progress and its history.

Error bars are the Gauss-Newton ones: ``cov = (J_w^T J_w)^-1`` with the residuals weighted by
the noise levels; noise levels not given are estimated from the residuals (per observable,
the RMS with the degrees of freedom taken out) and the fit is repeated with them. A parameter
whose 95 % interval (+- 1.96 standard errors) includes 0, or an information matrix that is
numerically singular (condition number of its correlation form above 1e10), raises an
:class:`IdentifiabilityWarning` that names what the data cannot tell.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Callable, Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax._solution import Status
from rollax._solve import solve
from rollax._system import AbstractSystem


class IdentifiabilityWarning(UserWarning):
    """The data cannot determine a fitted quantity (or a combination of them)."""


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
        if t.ndim != 1:
            raise ValueError(f"t has shape {t.shape}; observation times must be a 1-d array")
        if v.ndim == 1:
            v = v[:, None]
        if v.shape != (t.shape[0], len(names)):
            raise ValueError(f"values has shape {v.shape}; with {t.shape[0]} times and the "
                             f"observables {names} it must be {(t.shape[0], len(names))}")
        if not np.all(np.isfinite(t)):
            i = int(np.argmax(~np.isfinite(t)))
            raise ValueError(f"t[{i}] = {float(t[i])!r}; observation times must be finite")
        dt = np.diff(t)
        if np.any(dt <= 0):
            i = int(np.argmax(dt <= 0))
            what = "repeated" if dt[i] == 0 else "not increasing"
            raise ValueError(f"t[{i + 1}] = {float(t[i + 1])!r} after t[{i}] = {float(t[i])!r}: observation "
                             f"times are {what}; they must be strictly increasing")
        bad = ~np.all(np.isfinite(v), axis=1)
        if np.any(bad):
            warnings.warn(f"dropped {int(bad.sum())} of {t.shape[0]} observations with a "
                          f"non-finite value (the first at t = {float(t[bad][0])!r})", stacklevel=3)
            t, v = t[~bad], v[~bad]
        if t.shape[0] < 2:
            raise ValueError(f"{t.shape[0]} usable observations; at least 2 are needed")
        if self.sigma is not None:
            s = np.broadcast_to(np.asarray(self.sigma, dtype=float), (len(names),)).copy()
            if not np.all(np.isfinite(s) & (s > 0)):
                raise ValueError(f"sigma = {s.tolist()!r}; noise levels must be finite and > 0")
            object.__setattr__(self, "sigma", s)
        if self.t_event is not None:
            te = float(self.t_event)
            if not math.isfinite(te) or te < t[0]:
                raise ValueError(f"t_event = {self.t_event!r} must be finite and >= the first "
                                 f"observation time {float(t[0])!r}")
            se = self.sigma_event
            if se is None or not (math.isfinite(float(se)) and float(se) > 0):
                raise ValueError(f"sigma_event = {se!r}; an observed event time needs a "
                                 f"finite noise level > 0 [s]")
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
    bar is one-sided); ``warnings``: the identifiability warnings raised.
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

    def __getitem__(self, name: str) -> tuple[float, float]:
        """``(value, standard error)`` of a fitted quantity."""
        i = self.names.index(name)
        return float(self.values[i]), float(self.std_errors[i])

    def predict(self, observations: "Observations", t=None) -> np.ndarray:
        """The fitted model's observables at the times ``t`` (default: the observation times)."""
        return predict(self, observations, t)

    def to_dict(self) -> dict:
        """A JSON-ready summary (non-finite numbers become ``None``)."""
        f = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
        return {
            "parameters": {n: {"value": f(v), "std_error": f(s), "at_bound": bool(b)}
                           for n, v, s, b in zip(self.names, self.values, self.std_errors,
                                                 self.at_bound)},
            "initial_state": [f(v) for v in self.y0],
            "correlation": [[f(c) for c in row] for row in self.correlation],
            "sigma": {k: f(v) for k, v in self.sigma.items()},
            "residual_rms": {k: f(v) for k, v in self.residual_rms.items()},
            "cost": f(self.cost), "iterations": self.iterations, "converged": self.converged,
            "wall_time_s": f(self.wall_time), "n_observations": self.n_observations,
            "warnings": list(self.warnings),
        }


# ---------------------------------------------------------------------- parameters by name
def parameter_path(system: eqx.Module, name: str) -> tuple[str, ...]:
    """The attribute path of a parameter field: ``"rim.k_d"``, or a bare ``"k_d"`` found in
    exactly one (possibly nested) module field."""
    if "." in name:
        obj = system
        path = tuple(name.split("."))
        for p in path:
            if not hasattr(obj, p):
                raise ValueError(f"params: {name!r} is not a field of {type(system).__name__}")
            obj = getattr(obj, p)
        _check_scalar(name, obj)
        return path
    found = []

    def walk(obj, prefix):
        if not isinstance(obj, eqx.Module):
            return
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name, None)
            if f.name == name and not isinstance(v, eqx.Module):
                found.append(prefix + (f.name,))
            walk(v, prefix + (f.name,))

    walk(system, ())
    if len(found) != 1:
        known = sorted(_scalar_fields(system))
        why = "is not a parameter" if not found else "is ambiguous (" + ", ".join(
            ".".join(p) for p in found) + ")"
        raise ValueError(f"params: {name!r} {why} of {type(system).__name__}; known: "
                         f"{', '.join(known)}")
    _check_scalar(name, _get(system, found[0]))
    return found[0]


def _scalar_fields(system, prefix=()):
    out = []
    if isinstance(system, eqx.Module):
        for f in dataclasses.fields(system):
            v = getattr(system, f.name, None)
            if isinstance(v, eqx.Module):
                out += _scalar_fields(v, prefix + (f.name,))
            elif isinstance(v, (float, int, np.ndarray, jax.Array)) and np.ndim(v) == 0 \
                    and not isinstance(v, bool) and not f.metadata.get("static", False):
                out.append(f.name)
    return out


def _check_scalar(name, v):
    if not isinstance(v, (jax.Array, np.ndarray, float, int)) or np.ndim(v) != 0 \
            or isinstance(v, bool):
        raise ValueError(f"params: {name!r} = {v!r} is not a scalar parameter field")


def _get(obj, path):
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


# ---------------------------------------------------------------------- the model's residuals
class _Flow(AbstractSystem):
    """A non-hybrid system's flow without its events: fitted samples may lie past the model's
    event (the trajectory is continued), so that residuals stay smooth in the parameters."""

    system: AbstractSystem

    @property
    def state_names(self):  # pyright: ignore
        return self.system.state_names

    @property
    def n_samples(self):  # pyright: ignore
        return self.system.n_samples

    def vector_field(self, t, y, mode):
        return self.system.vector_field(t, y, mode)

    def jump_times(self):
        return self.system.jump_times()


class _Problem(eqx.Module):
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

    def build(self, x):
        system = self.system
        for i, path in enumerate(self.paths):
            system = _set(system, path, x[i])
        y0 = self.y0
        if self.y0_index:
            y0 = y0.at[jnp.asarray(self.y0_index)].set(x[len(self.paths):])
        return system, y0

    def predict(self, x):
        system, y0 = self.build(x)
        flow = system if system.hybrid else _Flow(system)
        sol = solve(flow, y0, self.t[0], self.t[-1], ts=self.t, rtol=self.rtol, atol=self.atol,
                    max_steps=self.max_steps, adjoint=diffrax.ForwardMode())
        obs = self.observe
        h = (lambda t, y: obs(system, t, y)) if callable(obs) else getattr(system, obs)
        return jax.vmap(h)(self.t, sol.ys), system, y0

    def residuals(self, x):
        pred, system, y0 = self.predict(x)
        r = ((pred - self.values) * self.inv_sigma).reshape(-1)
        if self.with_event:
            sol = solve(system, y0, self.t[0], jnp.inf, rtol=self.rtol, atol=self.atol,
                        max_steps=self.max_steps, adjoint=diffrax.ForwardMode())
            fired = (sol.status == Status.EVENT) & (sol.event == self.event)
            r_ev = jnp.where(fired, (sol.t - self.t_event) * self.inv_sigma_event, jnp.nan)
            r = jnp.concatenate([r, r_ev[None]])
        return r


@eqx.filter_jit
def _residuals(x, problem: _Problem):
    return problem.residuals(x)


@eqx.filter_jit
def _residuals_and_jacobian(x, problem: _Problem):
    r_fn = lambda z: (problem.residuals(z),) * 2  # noqa: E731
    J, r = jax.jacfwd(r_fn, has_aux=True)(x)
    return r, J


@eqx.filter_jit
def _costs(xs, problem: _Problem):
    return jax.vmap(lambda x: 0.5 * jnp.sum(problem.residuals(x) ** 2))(xs)


@eqx.filter_jit
def _predict(x, problem: _Problem):
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
    progress: bool | Callable[[dict], None] = False,
) -> Fit:
    """Fit the parameter fields ``params`` of ``system`` and its initial state to ``observations``.

    ``y0``: the initial state (a guess for the fitted components; default
    ``system.guess_state(observations)`` where the system has one); ``fit_y0``: fit all state
    components (``True``), none, or the named ones; ``y0_candidates``: further guesses
    ``(m, d)``, the one with the least cost starts the fit. ``bounds``: ``{name: (lo, hi)}``
    added to the bounds the models declare (rates >= 0, 0 < j <= 1). The model is integrated by
    :func:`rollax.solve` at ``rtol``/``atol`` from the first observation time. The fit stops
    when a step changes the cost by less than ``tol`` relative, or after ``max_iter``
    iterations. ``progress``: print a line per iteration, or call a function with its record.
    Returns a :class:`Fit`; warns (:class:`IdentifiabilityWarning`) where the data do not
    determine a fitted quantity.
    """
    t_start = time.perf_counter()
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a rollax.AbstractSystem, got {type(system).__name__}")
    if not isinstance(observations, Observations):
        raise TypeError(f"observations must be rollax.Observations, got "
                        f"{type(observations).__name__}")
    obs = observations
    if isinstance(params, str):
        params = (params,)
    params = tuple(params)
    if len(set(params)) != len(params):
        raise ValueError(f"params = {list(params)!r} names a parameter twice")
    paths = tuple(parameter_path(system, p) for p in params)
    for name, v, lo in (("max_iter", max_iter, 1), ("max_steps", max_steps, 1)):
        if not (isinstance(v, int) and v >= lo):
            raise ValueError(f"{name} = {v!r} must be an integer >= {lo}")
    if not (0 < tol < 1):
        raise ValueError(f"tol = {tol!r} is outside the allowed range (0, 1)")
    if y0 is None:
        if not hasattr(system, "guess_state"):
            raise ValueError(f"y0 is needed: {type(system).__name__} has no guess_state")
        y0, cands = system.guess_state(obs)
        y0_candidates = cands if y0_candidates is None else y0_candidates
    y0 = np.asarray(system.check_state(y0), dtype=float)
    if y0.ndim != 1:
        raise ValueError(f"y0 has shape {y0.shape}; one initial state is needed")
    names_state = tuple(system.state_names)
    if fit_y0 is True:
        y0_index = tuple(range(len(names_state)))
    elif fit_y0 is False or fit_y0 is None:
        y0_index = ()
    else:
        unknown = [n for n in fit_y0 if n not in names_state]
        if unknown:
            raise ValueError(f"fit_y0: {unknown[0]!r} is not a state component of "
                             f"{type(system).__name__} ({', '.join(names_state)})")
        y0_index = tuple(names_state.index(n) for n in fit_y0)
    fitted = params + tuple(f"y0.{names_state[i]}" for i in y0_index)
    n_fit = len(fitted)
    if n_fit == 0:
        raise ValueError("nothing to fit: give params or fit_y0")
    n_res = obs.values.size + (obs.t_event is not None)
    if n_res <= n_fit:
        raise ValueError(f"{n_res} observed values for {n_fit} fitted quantities; more "
                         f"observations than unknowns are needed")
    if obs.t_event is not None and obs.event >= len(system.events):
        raise ValueError(f"observations.event = {obs.event} but {type(system).__name__} has "
                         f"{len(system.events)} events")

    lo = np.full(n_fit, -np.inf)
    hi = np.full(n_fit, np.inf)
    for i, (p, path) in enumerate(zip(params, paths)):
        lo[i], hi[i] = _bounds_of(system, path)
        if bounds and p in bounds:
            lo[i], hi[i] = max(lo[i], float(bounds[p][0])), min(hi[i], float(bounds[p][1]))
    if bounds:
        extra = [k for k in bounds if k not in params]
        if extra:
            raise ValueError(f"bounds: {extra[0]!r} is not among params {list(params)!r}")
    x0 = np.concatenate([[float(_get(system, p)) for p in paths], y0[list(y0_index)]])
    if np.any(x0 < lo) or np.any(x0 > hi):
        i = int(np.argmax((x0 < lo) | (x0 > hi)))
        raise ValueError(f"the starting value {fitted[i]} = {float(x0[i])!r} is outside its bounds "
                         f"[{lo[i]}, {hi[i]}]")

    sigma = obs.sigma if obs.sigma is not None else _noise_guess(obs.values)

    def problem_for(sig):
        return _problem(system, y0, obs, sig, rtol, atol, paths, y0_index, max_steps)

    report = _reporter(progress)
    problem = problem_for(sigma)
    if y0_candidates is not None:
        cands = np.asarray(y0_candidates, dtype=float)
        xs = np.repeat(x0[None], cands.shape[0], axis=0)
        xs[:, len(params):] = cands[:, list(y0_index)]
        track = dataclasses.replace(problem, with_event=False)  # (see below)
        costs = np.asarray(_costs(jnp.asarray(xs), track))
        costs = np.where(np.isfinite(costs), costs, np.inf)
        if np.isfinite(costs).any() and costs.min() < _cost(x0, track):
            x0 = xs[int(np.argmin(costs))]
        report({"stage": "start", "candidates": int(cands.shape[0]),
                "cost": float(np.min(costs))})

    history: list[dict] = []
    x, it, converged = x0, 0, False
    if obs.t_event is not None:
        # the event time is far from the guess's and strongly nonlinear in it: fit the track
        # first, then add the event time (a direct fit stalled at 4e8 in 100 iterations)
        x, it, _ = _levenberg_marquardt(x, dataclasses.replace(problem, with_event=False),
                                        lo, hi, max_iter, tol, history, report)
    # with estimated noise levels: fit, re-estimate them from the residuals, fit again
    rounds = 1 if obs.sigma is not None else 3
    for rnd in range(rounds):
        x, k, converged = _levenberg_marquardt(x, problem, lo, hi, max_iter, tol, history,
                                               report)
        it += k
        if obs.sigma is not None:
            break
        r = np.asarray(_residuals(jnp.asarray(x), problem))
        per = r[: obs.values.size].reshape(obs.values.shape) * np.asarray(sigma)
        dof = max(1.0, 1.0 - n_fit / n_res)
        new = np.sqrt(np.mean(per**2, axis=0) / dof)
        new = np.where(new > 0, new, np.asarray(sigma))
        done = np.allclose(new, sigma, rtol=1e-3)
        sigma = new
        problem = problem_for(sigma)
        if done:
            break

    r, J = (np.asarray(a) for a in _residuals_and_jacobian(jnp.asarray(x), problem))
    cost = 0.5 * float(r @ r)
    at_bound = (x <= lo) | (x >= hi)
    cov, corr, se, cond = _covariance(J)
    fit_system, fit_y0_arr = problem.build(jnp.asarray(x))
    resid = r[: obs.values.size].reshape(obs.values.shape) * np.asarray(sigma)
    rms = {n: float(np.sqrt(np.mean(resid[:, k] ** 2))) for k, n in enumerate(obs.names)}
    if obs.t_event is not None:
        rms["t_event"] = float(abs(r[-1]) * float(obs.sigma_event))
    sig = {n: float(s) for n, s in zip(obs.names, np.asarray(sigma))}
    msgs = _identifiability(fitted, x, se, cond, at_bound, len(params))
    for m in msgs:
        warnings.warn(m, IdentifiabilityWarning, stacklevel=2)
    return Fit(names=fitted, values=x, std_errors=se, correlation=corr, covariance=cov,
               at_bound=at_bound, system=fit_system, y0=np.asarray(fit_y0_arr), sigma=sig,
               residual_rms=rms, cost=cost, iterations=it, converged=converged,
               wall_time=time.perf_counter() - t_start, n_observations=int(obs.t.shape[0]),
               warnings=msgs, history=history)


def predict(fit: Fit, observations: Observations, t=None) -> np.ndarray:
    """The fitted model's observables at the times ``t`` (default: the observation times)."""
    t = observations.t if t is None else np.asarray(t, dtype=float)
    obs = dataclasses.replace(observations, t=t, values=np.zeros((t.shape[0],
                                                                   len(observations.names))),
                              t_event=None, sigma=None)
    problem = _problem(fit.system, fit.y0, obs, np.ones(len(obs.names)), 1e-10, 1e-10)
    return np.asarray(_predict(jnp.zeros(0), problem))


def _problem(system, y0, obs: Observations, sigma, rtol, atol, paths=(), y0_index=(),
             max_steps=16_384) -> _Problem:
    return _Problem(
        system=system, y0=jnp.asarray(y0), t=jnp.asarray(obs.t),
        values=jnp.asarray(obs.values), inv_sigma=jnp.asarray(1.0 / np.asarray(sigma)),
        t_event=jnp.asarray(np.nan if obs.t_event is None else float(obs.t_event)),
        inv_sigma_event=jnp.asarray(1.0 / float(obs.sigma_event or 1.0)),
        rtol=jnp.asarray(float(rtol)), atol=jnp.asarray(float(atol)), paths=paths,
        y0_index=y0_index, observe=obs.observe, with_event=obs.t_event is not None,
        event=obs.event, max_steps=max_steps)


def _cost(x, problem) -> float:
    r = np.asarray(_residuals(jnp.asarray(x), problem))
    c = 0.5 * float(r @ r)
    return c if math.isfinite(c) else math.inf


def _noise_guess(values: np.ndarray) -> np.ndarray:
    """Noise level of each observable from its third differences (a smooth signal sampled
    finely has almost none): std(d^3 v) / sqrt(20) for white noise."""
    if values.shape[0] < 8:
        s = np.std(values, axis=0)
    else:
        s = np.std(np.diff(values, n=3, axis=0), axis=0) / math.sqrt(20.0)
    scale = np.maximum(np.abs(values).max(axis=0), 1.0)
    return np.where(s > 0, s, 1e-6 * scale)


def _levenberg_marquardt(x, problem, lo, hi, max_iter, tol, history, report):
    """Projected LM; the damping follows the gain ratio (Nielsen 1999: lambda *= max(1/3,
    1 - (2 rho - 1)^3) after a step, doubling factors after a failure), which crosses the
    narrow curved valleys of correlated rates far faster than a fixed /3, x4 rule (measured:
    100+ iterations -> ~10 on 2 s of rim data)."""
    lam, nu = None, 2.0
    r, J = (np.asarray(a) for a in _residuals_and_jacobian(jnp.asarray(x), problem))
    cost = 0.5 * float(r @ r)
    if not math.isfinite(cost):
        raise ValueError("the model cannot be evaluated at the starting guess (non-finite "
                         "residuals: the run failed or ended before the last observation)")
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        g = J.T @ r
        A = J.T @ J
        free = ~(((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0)))
        d = np.maximum(np.diag(A), 1e-30 * max(1.0, np.diag(A).max()))
        if lam is None:
            lam = 1e-3
        improved = False
        while lam < 1e16:
            try:
                step = _bounded_step(A + lam * np.diag(d), g, x, lo, hi, free)
            except np.linalg.LinAlgError:
                lam *= nu
                nu *= 2.0
                continue
            x_new = np.clip(x + step, lo, hi)
            step = x_new - x
            pred = -(g @ step) - 0.5 * step @ A @ step
            c_new = _cost(x_new, problem)
            if c_new < cost and pred > 0:
                gain = (cost - c_new) / pred
                lam *= max(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
                nu = 2.0
                improved = True
                break
            lam *= nu
            nu *= 2.0
        rec = {"iteration": it, "cost": cost, "lambda": lam,
               "gradient": float(np.max(np.abs(g[free]) / np.sqrt(d[free]))) if free.any() else 0.0}
        history.append(rec)
        report(rec)
        if not improved:
            converged = True  # no descent left at machine precision
            break
        rel = (cost - c_new) / max(cost, 1e-300)
        x = x_new
        r, J = (np.asarray(a) for a in _residuals_and_jacobian(jnp.asarray(x), problem))
        cost = 0.5 * float(r @ r)
        if rel < tol:
            converged = True
            break
    return x, it, converged


def _bounded_step(M, g, x, lo, hi, free):
    """The damped Gauss-Newton step ``M step = -g`` with the box kept: a component that would
    leave it is put on its bound and the others are solved again (clipping the full step
    instead stalls in the valley of two correlated rates, one of them at its bound)."""
    free = free.copy()
    step = np.zeros_like(x)
    for _ in range(x.shape[0]):
        fixed = ~free
        rhs = -g[free] - M[np.ix_(free, fixed)] @ step[fixed]
        step[free] = np.linalg.solve(M[np.ix_(free, free)], rhs) if free.any() else step[free]
        x_try = x + step
        out = free & ((x_try < lo) | (x_try > hi))
        if not out.any():
            break
        step[out] = np.clip(x_try[out], lo[out], hi[out]) - x[out]
        free &= ~out
    return step


def _covariance(J):
    A = J.T @ J
    dA = np.sqrt(np.maximum(np.diag(A), 0.0))
    scale = np.where(dA > 0, dA, 1.0)
    C = A / np.outer(scale, scale)
    try:
        cond = float(np.linalg.cond(C))
        Ci = np.linalg.inv(C)
        cov = Ci / np.outer(scale, scale)
    except np.linalg.LinAlgError:
        n = A.shape[0]
        return (np.full((n, n), np.nan), np.full((n, n), np.nan), np.full(n, np.inf), math.inf)
    var = np.diag(cov)
    se = np.where(var >= 0, np.sqrt(np.abs(var)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(se, se)
    if not np.all(dA > 0):
        se = np.where(dA > 0, se, np.inf)
        cond = math.inf
    return cov, corr, se, cond


def _identifiability(names, x, se, cond, at_bound, n_params) -> list[str]:
    out = []
    if not math.isfinite(cond) or cond > 1e10:
        out.append(f"the information matrix is numerically singular (condition number "
                   f"{cond:.3g}): the data cannot separate some of {', '.join(names)}")
    for i, (n, v, s) in enumerate(zip(names, x, se)):
        if not math.isfinite(s):
            out.append(f"{n} is not identifiable from these data (standard error undefined)")
        elif 1.96 * s > abs(v) and i < n_params:  # (zero means nothing special for a state)
            out.append(f"{n} = {v:.6g} +- {s:.3g}: the data cannot tell it from 0 (its 95 % "
                       f"interval includes 0)")
    return out


def _reporter(progress):
    if callable(progress):
        return progress
    if progress:
        def show(rec):
            if rec.get("stage") == "start":
                print(f"identify: best of {rec['candidates']} starting guesses, cost "
                      f"{rec['cost']:.6g}", flush=True)
            else:
                print(f"identify: iteration {rec['iteration']:3d}  cost {rec['cost']:.10g}  "
                      f"lambda {rec['lambda']:.2g}  scaled gradient {rec['gradient']:.3g}",
                      flush=True)
        return show
    return lambda rec: None
