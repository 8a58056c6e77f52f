"""``rollax.solve``: one run of a system on diffrax, events and resets included.

How it works, and why:

* **Events are checked inside diffrax's loop.** The solver is wrapped (:class:`_Sampled`):
  after every step it samples the event functions on the step's dense output at
  ``n_samples`` equally spaced points and walks them with :func:`rollax._core.events.scan` (the
  same samples and the same walk as the ensemble kernel). The crossing counts, the step that
  holds the terminal event and the step that holds each event's first crossing ride in the
  state as extra leaves (zero error, left out of the error norm). A boolean ``diffrax.Event``
  stops the solve at the end of the step in which an event fires. Nothing is stored per
  step, so ``vmap`` costs what plain diffrax with an ``Event`` costs; a count-only crossing
  never stops the solve; a non-finite event value stops it as failed.
* **The root** is located after the solve on that step's dense output
  (:func:`rollax._core.events.locate_in_step`, ~1e-13 in time; exactly when it lies on a sample).
* **Event times are differentiable** by the implicit function theorem,
  ``dt* = -dg / (dg/dt)``, with ``dg/dt = dg/dt|_y + dg/dy . f(t*, y*)`` taken from the
  vector field at the root (not from the interpolant's slope, which is ~100x less accurate);
  the state at the event moves with ``f(t*, y*) dt*``.
* **Hybrid systems** run segment by segment in one call: at each located event the system's
  ``reset`` gives the state, mode and bookkeeping to go on with, until it says the run ends,
  ``t1`` is reached or ``max_resets`` is exceeded. The loop is checkpointed for reverse mode.
* **The kernel's steps.** ``solver="dopri5"`` is DOPRI5 as Hairer's code and the ensemble
  kernel have it (:class:`_Dopri5`: Dormand and Prince's error estimate and the contd5
  continuous extension; ``diffrax.Dopri5`` has another embedded solution and interpolant), and
  the step size follows the kernel's controller (:class:`_Elementary`), so that both
  integrators take the same steps and sample the same values: on the conformance cases the
  step counts are equal and the event times agree to 1e-12 s or better (up to 6e-10 s with
  diffrax's Dopri5 and controller: benchmarks/RESULTS.md).
  A diffrax solver instance is used as it is, with the same controller.
* **Compiled once per system structure**: the whole solve is one ``equinox.filter_jit``;
  parameters, states, times and tolerances are traced, so repeated calls with new values
  reuse the compiled code.

* **A system with its own exact flow** (``system.flow``, a closed form) is moved along it:
  the solver is :class:`_ExactFlowSolver` (the step is the flow, its dense output the flow from the
  step's start, no error estimate) and the steps are ``system.flow_step`` (at most
  ``dt_max``); the event samples, the walk, the root and its derivative are the same.

A step whose samples may hide a pair of crossings (:func:`rollax._core.events.unresolved`) is
rejected as one with a non-finite error (shrunk to 0.2 h), as in the ensemble kernel. What can
still be missed: a dip narrower than the samples show. ``dt_max`` bounds the step, and so the
sampling interval, to ``dt_max / n_samples``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import sys
import threading
from typing import Any, NamedTuple, Sequence, cast

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jax._src.interpreters import batching
from jax.core import Tracer
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Float, Int

from rollax._core import _announce, _eventlog

from rollax._integrate import _loop, _traced, _ulp, dopri5
from rollax._integrate.queue import size_class
from rollax._core._eventlog import SAVE_EVENTS_MAX
from rollax._core._solution import Solution, Status
from rollax._core._system import AbstractSystem
from rollax._core._validate import (
    ATOL_MIN,
    RTOL_MIN,
    _show,
    check_integer,
    check_jump_ts,
    past_jump,
)
from rollax._core.events import (
    CROSSING,
    EventSet,
    Located,
    locate_in_step,
    near_theta,
    scan,
    unresolved_in,
)


_self = sys.modules[__name__]
_CHECKS_LOCK = threading.Lock()
_checks_depth = 0
_checks_saved: Any = None


@contextlib.contextmanager
def _checks_without_callbacks():
    """diffrax's run-time checks of ``SaveAt.ts`` (increasing, within [t0, t1]) as NaNs, not
    host callbacks, while diffrax is traced here. ``eqx.error_if`` on a traced predicate
    raises through a host callback, and JAX never writes a program with a host callback to the
    persistent compile cache: every solve with ``ts=`` (identification, robot optimisation,
    saved trajectories) compiled again in every process (measured: the robot SQP's two
    programs, 25 s and 12 s of compile, no cache entry; issue 56). rollax checks ``ts`` itself
    where it is concrete (``_check_ts``); a traced ``ts`` out of order now gives NaN states
    instead of an error. (equinox reads its ``EQX_ON_ERROR`` mode when a check is traced; set
    for rollax's own tracing only, under a lock, and restored.)"""
    global _checks_depth, _checks_saved
    try:  # (equinox's private module: typed Any, looked up by name)
        mod: Any = importlib.import_module("equinox._errors")
    except ImportError:  # (another equinox: its checks stay as they are)
        yield
        return
    if not hasattr(mod, "EQX_ON_ERROR"):
        yield
        return
    with _CHECKS_LOCK:
        if _checks_depth == 0:
            _checks_saved = mod.EQX_ON_ERROR
            if _checks_saved == "raise":
                mod.EQX_ON_ERROR = "nan"
        _checks_depth += 1
    try:
        yield
    finally:
        with _CHECKS_LOCK:
            _checks_depth -= 1
            if _checks_depth == 0:
                mod.EQX_ON_ERROR = _checks_saved


def _diffeqsolve(*args, **kw):
    """``diffrax.diffeqsolve``, traced with :func:`_checks_without_callbacks` and with its
    chain of 100 ``prevbefore`` calls as one (:func:`rollax._integrate._ulp.composed_prevbefore`)."""
    with _checks_without_callbacks(), _ulp.composed_prevbefore():
        return diffrax.diffeqsolve(*args, **kw)


class _Contd5(diffrax.AbstractLocalInterpolation):
    """Hairer's continuous extension of a DOPRI5 step (:func:`rollax._integrate.dopri5.dense_eval`) from
    diffrax's stage increments ``k = h f``: the kernel's, where diffrax's ``Dopri5`` has
    Shampine's quartic through the midpoint."""

    t0: Float[Array, ""]
    t1: Float[Array, ""]
    y0: Float[Array, " d"]
    coef: Float[Array, "4 d"]

    def __init__(self, *, t0, t1, y0, y1, k):
        self.t0, self.t1, self.y0 = t0, t1, y0
        # the increments are h f: the kernel's coefficients with h = 1
        self.coef = dopri5.dense_coefficients(y0, y1, k, 1.0)

    def at_theta(self, theta):
        return dopri5.dense_eval(self.y0, self.coef, theta)

    def evaluate(self, t0, t1=None, left=True):
        del left
        if t1 is not None:
            return self.evaluate(t1) - self.evaluate(t0)
        # a zero-length step (a finished lane of a vmapped solve, saving at ts) gives theta = 0,
        # not 0/0: a NaN there is discarded forwards but poisons every lane's gradient
        # (diffrax's linear_rescale does the same)
        same = self.t1 == self.t0
        theta = (t0 - self.t0) / jnp.where(same, 1.0, self.t1 - self.t0)
        return self.at_theta(jnp.where(same, 0.0, theta))


class _Dopri5(diffrax.Dopri5):
    """DOPRI5 as Hairer's code and the ensemble kernel have it (:mod:`rollax._integrate.dopri5`): the
    error estimate ``b - b_hat`` of Dormand and Prince's 4th-order solution and the contd5
    continuous extension. (``diffrax.Dopri5`` estimates the error with another embedded
    solution, 2/3 of this one, and interpolates through the midpoint, so it takes other
    steps and samples other values.)"""

    tableau = diffrax.ButcherTableau(
        a_lower=tuple(np.array(row) for row in dopri5.A),
        b_sol=np.array(dopri5.A[-1] + (0.0,)),
        b_error=np.array(dopri5.E),
        c=np.array(dopri5.C),
    )
    # (the kernel's continuous extension; diffrax types this as its own Dopri5 interpolation)
    interpolation_cls = _Contd5  # pyright: ignore[reportAssignmentType]


_SOLVERS = {"dopri5": _Dopri5, "tsit5": diffrax.Tsit5, "dopri8": diffrax.Dopri8}


class _Ev(NamedTuple):
    """Event bookkeeping carried through diffrax's loop as part of the state (all float)."""

    sign: Float[Array, " n"]
    count: Float[Array, " n"]  # pyright: ignore[reportIncompatibleMethodOverride]  (tuple.count)
    t_zero: Float[Array, " n"]
    stop: Float[Array, ""]  # 1: a terminal event fired in the last accepted step
    bad: Float[Array, ""]  # 1: a sampled event value was not finite
    # the step that holds the terminal event, with the scan state before it
    # (the step itself, not its dense output: redone after the loop, which keeps the state
    # that diffrax carries and selects at every step small -- 2d + 2 floats instead of 9d)
    f_t0: Float[Array, ""]
    f_t1: Float[Array, ""]
    f_y0: Float[Array, " d"]
    f_state: tuple  # the solver's state at the step's start (its leaves, as floats)
    f_jump: Float[Array, ""]
    f_sign: Float[Array, " n"]
    f_count: Float[Array, " n"]
    f_tzero: Float[Array, " n"]
    # per crossing event (c of them): the step that holds its first crossing (nan: none yet)
    c_t0: Float[Array, " c"]
    c_t1: Float[Array, " c"]
    c_y0: Float[Array, "c d"]
    c_state: tuple
    c_jump: Float[Array, " c"]
    c_sign: Float[Array, " c"]
    c_tzero: Float[Array, " c"]


class _Sampled(diffrax.AbstractAdaptiveSolver, diffrax.AbstractWrappedSolver):
    """Wraps a diffrax solver: after each step, scan the event functions on its dense output."""

    solver: diffrax.AbstractSolver
    events: EventSet = eqx.field(static=True)
    n_samples: int = eqx.field(static=True)

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def scan_kind(self):  # diffrax.ForwardMode asks; the inner solver is set up in solve()
        return getattr(self.solver, "scan_kind", None) or "lax"

    @property
    def interpolation_cls(self):  # pyright: ignore[reportIncompatibleMethodOverride]  (a property; diffrax reads it on the instance)
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    def order(self, terms):
        return self.solver.order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0[0], args)

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0[0], args), jax.tree_util.tree_map(
            jnp.zeros_like, y0[1]
        )

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        yp, ev = y0
        system, mode = args
        dtype = jnp.result_type(yp)
        # the solver's state before the step, kept to redo the step that holds an event
        st = _state_leaves(solver_state, dtype)
        y1, err, dense, new_state, result = self.solver.step(
            terms, t0, t1, yp, args, solver_state, made_jump
        )
        interp = self.solver.interpolation_cls(t0=t0, t1=t1, **dense)
        vals, times = _step_samples(system, mode, interp, y1, t0, t1 - t0, self.n_samples)
        vals = jax.lax.stop_gradient(vals)
        count = ev.count.astype(jnp.int32)
        sc = scan(self.events, vals, times, ev.sign, count, ev.t_zero)
        if self.events.n and not isinstance(self.solver, _ExactFlowSolver):
            # samples that may hide a pair of crossings: rejected (shrunk to 0.2 h) as a step
            # with a non-finite error, as in the ensemble kernel (events.unresolved)
            h = t1 - t0
            th = near_theta(self.n_samples)
            sg = jax.lax.stop_gradient
            g0 = sg(system.event_values(t0, yp, mode))
            near = sg(system.event_values(t0 + th * h, _interp_at(interp, t0, h, th), mode))
            assert err is not None  # (an adaptive Runge-Kutta pair's error estimate)
            err = jnp.where(unresolved_in(vals, g0, near, t0, h), jnp.inf, err)
        stop = jnp.any(sc.fired) | sc.nonfinite
        cx = jnp.asarray(_crossings(self.events), jnp.int32)
        first = (count[cx] == 0) & (sc.count[cx] > 0) & jnp.isnan(ev.c_t0)

        def pick(mask, new, old):
            m = jnp.reshape(mask, jnp.shape(mask) + (1,) * (jnp.ndim(old) - jnp.ndim(mask)))
            return jnp.where(m, new, old)

        nc = first.shape[0]
        jump = jnp.asarray(made_jump, dtype)
        ev1 = _Ev(
            sign=sc.sign,
            count=sc.count.astype(dtype),
            t_zero=sc.t_zero,
            stop=stop.astype(dtype),
            bad=sc.nonfinite.astype(dtype),
            f_t0=jnp.where(stop, t0, ev.f_t0),
            f_t1=jnp.where(stop, t1, ev.f_t1),
            f_y0=pick(stop, yp, ev.f_y0),
            f_state=tuple(pick(stop, a, b) for a, b in zip(st, ev.f_state)),
            f_jump=pick(stop, jump, ev.f_jump),
            f_sign=pick(stop, ev.sign, ev.f_sign),
            f_count=pick(stop, ev.count, ev.f_count),
            f_tzero=pick(stop, ev.t_zero, ev.f_tzero),
            c_t0=jnp.where(first, t0, ev.c_t0),
            c_t1=jnp.where(first, t1, ev.c_t1),
            c_y0=pick(first, jnp.broadcast_to(yp, (nc,) + yp.shape), ev.c_y0),
            c_state=tuple(
                pick(first, jnp.broadcast_to(a, (nc,) + a.shape), b) for a, b in zip(st, ev.c_state)
            ),
            c_jump=pick(first, jnp.broadcast_to(jump, (nc,)), ev.c_jump),
            c_sign=jnp.where(first, ev.sign[cx], ev.c_sign),
            c_tzero=jnp.where(first, ev.t_zero[cx], ev.c_tzero),
        )
        err_ev = jax.tree_util.tree_map(jnp.zeros_like, ev1)
        return (y1, ev1), (err, err_ev), dense, new_state, result


class _ExactFlowInterpolation(diffrax.AbstractLocalInterpolation):
    """The dense output of a step along a system's exact flow: the flow from the step's start.
    ``system`` holds the system's arrays (the rest is ``static``, so that the dense information
    that diffrax carries is arrays only)."""

    t0: Float[Array, ""]
    t1: Float[Array, ""]
    y0: Float[Array, " d"]
    system: Any
    mode: Int[Array, ""]
    static: Any = eqx.field(static=True)

    def _at(self, t):
        return eqx.combine(self.system, self.static).flow(self.t0, self.y0, t, self.mode)

    def evaluate(self, t0, t1=None, left=True):
        del left
        if t1 is not None:
            return self._at(t1) - self._at(t0)
        return self._at(t0)

    def derivative(self, t, left=True):
        del left
        return jax.jvp(self._at, (t,), (jnp.ones_like(t),))[1]


class _ExactFlowSolver(diffrax.AbstractSolver):
    """A diffrax solver whose step is the system's exact flow (``args = (system, mode)``)."""

    static: Any = eqx.field(static=True)  # the system's non-array part
    term_structure = diffrax.AbstractTerm

    @property
    def interpolation_cls(self):  # pyright: ignore[reportIncompatibleMethodOverride]  (a property; diffrax reads it on the instance)
        return functools.partial(_ExactFlowInterpolation, static=self.static)

    def order(self, terms):
        return 1

    def error_order(self, terms):
        return 1

    def init(self, terms, t0, t1, y0, args):
        return None

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        system, mode = args
        y1 = system.flow(t0, y0, t1, mode)
        dense = dict(y0=y0, system=eqx.filter(system, eqx.is_array), mode=mode)
        return y1, jnp.zeros_like(y1), dense, None, diffrax.RESULTS.successful

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


class _ExactFlowSteps(diffrax.AbstractStepSizeController):
    """Steps of ``system.flow_step`` (at most ``dt_max``) along an exact flow: all accepted.
    The step sizes are not differentiated (they choose where to sample, not what is computed)."""

    dt_max: Float[Array, ""]

    def wrap(self, direction):
        return self

    def _h(self, t, y, args):
        system, mode = args
        y = y[0] if isinstance(y, tuple) else y
        return jax.lax.stop_gradient(jnp.minimum(system.flow_step(t, y, mode), self.dt_max))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        return t0 + self._h(t0, y0, args), None

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        return (
            jnp.asarray(True),
            t1,
            t1 + self._h(t1, y1_candidate, args),
            jnp.asarray(False),
            None,
            diffrax.RESULTS.successful,
        )


def _norm(x):
    # the error norm of the physical state only (the event bookkeeping has no error)
    return optx.rms_norm(x[0] if isinstance(x, tuple) else x)


class _Elementary(diffrax.AbstractAdaptiveStepSizeController):
    """The step-size control of the ensemble kernel (:mod:`rollax._integrate.queue`), so that both
    integrators take the same steps: Hairer's starting step (:func:`rollax._integrate.dopri5.initial_step`
    with the solver's order p); a step is accepted when the RMS of its scaled error
    ``err / (atol + rtol max(|y0|, |y1|))`` is <= 1 and the new state is finite, and the next
    is ``h min(10, max(0.2, 0.9 err^(-1/p)))`` (at most ``h`` after a rejection, ``0.2 h``
    after a non-finite one), at most ``dtmax``. (diffrax's ``PIDController`` differs: it never
    shrinks the step after an accepted one, rejects at err = 1, and with its terms wrapped it
    starts every solve at h = 0.01.) The step sizes are not differentiated: they choose where
    the solution is computed, not what it is, as in diffrax."""

    rtol: Float[Array, ""]
    atol: Float[Array, ""]
    dtmax: Float[Array, ""]
    dtmin: Float[Array, ""]
    norm: Any = eqx.field(static=True, default=_norm)  # diffrax's interface; the norm is RMS

    def wrap(self, direction):
        return self

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        if error_order is None:
            raise ValueError(
                "the solver gives no error estimate to control the step with "
                "(use an adaptive Runge-Kutta solver: dopri5, tsit5, dopri8)"
            )
        plain = not isinstance(y0, tuple)  # a system without events: the state alone (_plain)
        ev = None if plain else y0[1]

        def f(t_, y_):
            return func(terms, t_, y_, args) if plain else func(terms, t_, (y_, ev), args)[0]

        yp = jax.lax.stop_gradient(y0 if plain else y0[0])
        # (diffrax types t0 as a RealScalarLike; diffeqsolve has made it a JAX scalar)
        h = dopri5.initial_step(f, t0, yp, f(t0, yp), self.rtol, self.atol, None, error_order)  # pyright: ignore[reportArgumentType]
        # the plain route keeps the last accepted time and state: diffrax reports neither for
        # a run that stops early (max_steps: its final time is inf), the event route does
        state = (jax.lax.stop_gradient(t0), yp) if plain else None
        return t0 + jax.lax.stop_gradient(jnp.minimum(h, self.dtmax)), state

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        sg = jax.lax.stop_gradient
        assert y_error is not None  # (init refused a solver without an error estimate)
        first = (lambda x: x[0]) if isinstance(y0, tuple) else (lambda x: x)
        y0p, y1p = sg(first(y0)), sg(first(y1_candidate))
        en = dopri5.error_norm(sg(first(y_error)), y0p, y1p, self.rtol, self.atol)
        finite = jnp.isfinite(en) & jnp.all(jnp.isfinite(y1p))
        accept = finite & (en <= 1.0)
        h = jnp.minimum((t1 - t0) * dopri5.step_factor(en, finite, accept, error_order), self.dtmax)
        t_next = jnp.where(accept, t1, t0)
        result = diffrax.RESULTS.where(
            ~(h >= self.dtmin), diffrax.RESULTS.dt_min_reached, diffrax.RESULTS.successful
        )
        if controller_state is not None:  # (the plain route: the last accepted time and state)
            controller_state = jax.tree_util.tree_map(
                lambda new, old: jnp.where(accept, new, old), (sg(t1), y1p), controller_state
            )
        return accept, t_next, t_next + h, jnp.asarray(False), controller_state, result


def _step_samples(system, mode, interp, y1, t0, h, n: int):
    """The event values at a step's ``n`` samples ``t0 + (k/n) h``, k = 1..n, and
    their times: the last is the new state ``y1`` itself (as in the kernel, not its
    interpolant), the others the interpolating polynomial at the constant ``k/n`` (no divide
    per sample). The loop and the root finder both take the samples from here."""
    dtype = jnp.result_type(y1)
    thetas = jnp.linspace(0.0, 1.0, n + 1, dtype=dtype)[1:]
    times = t0 + thetas * h

    def state(k):
        return y1 if k == n - 1 else _interp_at(interp, t0, h, thetas[k])

    # unrolled, not a vmap over the samples: under jax.vmap of solve on a CPU the nested vmap
    # made a step 3.9x plain diffrax's (1.3x unrolled; benchmarks/RESULTS.md). Nor the states
    # interpolated at once (a broadcast over theta): 7 % less forward compile, but the values
    # differ by an ulp from one theta at a time, the ensemble kernel's (stop 70)
    return jnp.stack([system.event_values(times[k], state(k), mode) for k in range(n)]), times


def _interp_at(interp, t0, h, theta):
    """The step's dense output at its fraction ``theta`` (a constant), as :func:`_step_samples`
    evaluates it."""
    if isinstance(interp, _Contd5):
        return interp.at_theta(theta)
    if isinstance(interp, diffrax.FourthOrderPolynomialInterpolation):
        return jax.tree_util.tree_map(lambda c: jnp.polyval(c, theta), interp.coeffs)
    return interp.evaluate(t0 + theta * h)


def _controller(rtol, atol, dt_max, dt_min, jump_ts):
    ctrl = _Elementary(rtol=rtol, atol=atol, dtmax=dt_max, dtmin=dt_min)
    # no step straddles a jump time (diffrax steps to just before it and on from just after)
    return ctrl if jump_ts is None else diffrax.ClipStepSizeController(ctrl, jump_ts=jump_ts)


def _state_leaves(solver_state, dtype) -> tuple:
    """The solver's state as a tuple of float leaves; a stateless solver's (``_ExactFlowSolver``) is one
    dummy zero (an empty tuple in diffrax's saved state is not an array buffer)."""
    leaves = jax.tree_util.tree_leaves(solver_state)
    return tuple(jnp.asarray(x, dtype) for x in leaves) or (jnp.zeros((), dtype),)


def _crossings(events: EventSet) -> tuple[int, ...]:
    """Indices of the crossing events that need a first-crossing slot: those whose first
    crossing is not the event itself (a target other than 1). A target-1 crossing fires at its
    first counted crossing and ends the segment there, so its first time is the event's
    (or nan when another event ends the segment first): no slot, no second step redone and
    root search after the loop (the oscillator's gradient program: 16 of the step loop's 86
    carried values and one of its two root searches; benchmarks/RESULTS.md, issue 36)."""
    return tuple(
        i
        for i, (k, tg) in enumerate(zip(events.kinds, events.targets))
        if k == CROSSING and tg != 1
    )


class _Options(eqx.Module):
    solver: diffrax.AbstractSolver
    adjoint: diffrax.AbstractAdjoint
    max_steps: int = eqx.field(static=True)
    max_resets: int = eqx.field(static=True)
    n_samples: int = eqx.field(static=True)
    # some of t0, t1, rtol, atol, dt_max are traced: checked in the compiled run (_solve)
    traced: bool = eqx.field(static=True, default=False)
    save_events: int = eqx.field(static=True, default=0)  # rows of the event log
    dense: bool = eqx.field(static=True, default=False)  # keep the dense output
    # no events, no resets, no saving, no exact flow: one plain diffrax solve (_plain)
    plain: bool = eqx.field(static=True, default=False)
    # the one step loop (rollax._integrate._loop: systems with a reset map) instead of the
    # segment loop
    loop: bool = eqx.field(static=True, default=False)
    # called under jax.vmap (seen at the call): the one loop keeps fewer checkpoints a lane
    batched: bool = eqx.field(static=True, default=False)


#: ``adjoint`` by name: reverse mode, forward mode, both (``jax.hessian``)
ADJOINTS = {
    "reverse": diffrax.RecursiveCheckpointAdjoint,
    "forward": diffrax.ForwardMode,
    "direct": diffrax.DirectAdjoint,
    "backsolve": diffrax.BacksolveAdjoint,
}


def _adjoint_name(adjoint) -> str:
    return next((k for k, v in ADJOINTS.items() if isinstance(adjoint, v)), type(adjoint).__name__)


def _adjoint(adjoint) -> diffrax.AbstractAdjoint:
    """``adjoint`` as a diffrax adjoint: None (reverse mode), a name of :data:`ADJOINTS` or one
    of their instances."""
    if adjoint is None:
        return diffrax.RecursiveCheckpointAdjoint()
    if isinstance(adjoint, str) and adjoint in ADJOINTS:
        return ADJOINTS[adjoint]()
    if not isinstance(adjoint, tuple(ADJOINTS.values())):
        raise ValueError(
            f"adjoint = {adjoint!r} is not allowed: it must be one of {sorted(ADJOINTS)} "
            f"(or diffrax.RecursiveCheckpointAdjoint(), diffrax.ForwardMode(), "
            f"diffrax.DirectAdjoint(), diffrax.BacksolveAdjoint())"
        )
    return cast(diffrax.AbstractAdjoint, adjoint)  # (an instance of one of ADJOINTS)


def solve(
    system: AbstractSystem,
    y0: Float[Array, " d"],
    t0: float | Array = 0.0,
    t1: float | Array = math.inf,
    *,
    mode: int | str | Int[Array, ""] | None = None,
    aux: Float[Array, " p"] | None = None,
    rtol: float | Array = 1e-9,
    atol: float | Array = 1e-9,
    dt_max: float | None = None,
    max_steps: int = 16_384,
    max_resets: int = 1_000,
    n_samples: int | None = None,
    solver: str | diffrax.AbstractSolver | None = None,
    adjoint: str | diffrax.AbstractAdjoint | None = None,
    jump_ts: Float[ArrayLike, " k"] | Sequence[float] | None = None,
    ts: Float[Array, " m"] | None = None,
    save_events: int = 0,
    dense: bool = False,
) -> Solution:
    """Integrate ``system`` from ``(t0, y0)`` in ``mode`` until a terminal event or ``t1``
    (``mode``: an index or a name of ``system.modes``; None: ``system.initial_mode(t0, y0)``).

    Differentiable (``adjoint``: ``"reverse"``, the default, diffrax's recursive
    checkpointing; ``"forward"`` (``diffrax.ForwardMode()``) for ``jax.jacfwd``, nested too;
    ``"direct"`` (``diffrax.DirectAdjoint()``) allows both modes, so ``jax.hessian``, forward
    over reverse; a system with a reset map, run as one step loop (:mod:`._loop`), takes
    ``jax.hessian`` with the default too), ``vmap``-able, and compiled once per system
    structure.
    Events follow :mod:`rollax._core.events`; each step is sampled at ``n_samples`` (default:
    ``system.n_samples``, 8 unless the system says otherwise) points of its dense output (see
    the module docstring for what can be missed and how ``dt_max`` closes it); a system with
    its own exact ``flow`` is moved along it in steps of ``system.flow_step`` (``solver``,
    ``rtol`` and ``atol`` are then not used). ``max_steps`` bounds the steps of each segment,
    ``max_resets`` the resets of a hybrid run; a run that hits either, or whose state or event
    values become non-finite, ends with a failure :class:`rollax.Status`. ``solver``:
    ``dopri5`` (the kernel's DOPRI5, see the module docstring), ``tsit5``, ``dopri8`` or a
    diffrax solver instance (default: ``system.solver``, ``dopri5`` unless the system says
    otherwise). ``jump_ts``: times where the vector field or its derivatives jump (the kinks
    of a piecewise control; default: ``system.jump_times()``); no step straddles one
    (diffrax's ``ClipStepSizeController(jump_ts=...)``: a step ends just before it and the next
    starts just after it, with the field evaluated afresh; :func:`rollax.solve_ensemble` too).
    ``ts``: non-decreasing times in ``[t0, t1]`` at which to save the state (``Solution.ys``,
    from each step's dense output; nan after the run ended; a time at a reset gets the state
    after it; the solve is compiled for a size class of ``len(ts)``, at least 16, so that
    other numbers of save times of the class reuse it; a ``ts`` traced under ``jax.jit`` that
    is out of order gives NaN results and the status NONFINITE, a concrete one is refused).
    ``t0``, ``t1``, ``rtol``, ``atol`` and ``dt_max`` out of range are refused with a
    ``ValueError`` where they are concrete; traced ones (under ``jax.jit`` or ``jax.vmap``)
    give NaN results and the status NONFINITE (a raise from inside a compiled program needs a
    host callback, which keeps it out of the compile cache).
    ``save_events``: keep the first ``save_events`` events of the run
    (``Solution.events``, a :class:`rollax.EventLog`: each event's time, index, mode and state
    before the reset map and what it returned; differentiable like ``Solution.t``; more events
    are counted in ``EventLog.n`` and dropped). ``dense``: keep the run's dense output (every
    step's continuous extension, ``max_steps`` rows of it) so that ``Solution.evaluate(t)``
    gives the state at any time of the run (systems without a reset map; for those with one,
    use ``ts``). Returns a :class:`rollax.Solution`.
    """
    _announce.start()  # a compile of more than 1.5 s is said (rollax._core._announce)
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a rollax.AbstractSystem, got {type(system).__name__}")
    if system.batch_shape():
        raise ValueError(
            f"the parameters of {type(system).__name__} have batch shape "
            f"{system.batch_shape()}; rollax.solve runs one start with one value "
            f"per parameter (use rollax.solve_ensemble, or jax.vmap over the "
            f"system, for per-start parameters)"
        )
    y0 = system.check_state(y0)
    if y0.ndim != 1:
        raise ValueError(
            f"y0 has shape {tuple(y0.shape)}; rollax.solve takes one state "
            f"(use jax.vmap or rollax.solve_ensemble for many)"
        )
    if mode is None:
        mode = _initial_mode(system, t0, y0)
    mode = system.check_mode(mode)
    if mode.ndim != 0:
        raise ValueError(
            f"mode has shape {tuple(mode.shape)}; rollax.solve takes one mode (an "
            f"index or a name of {list(system.modes)})"
        )
    n_samples = system.n_samples if n_samples is None else n_samples
    dt_max = system.dt_max if dt_max is None else dt_max
    check_options(
        t0,
        t1,
        rtol,
        atol,
        dt_max,
        max_steps=(max_steps, 1),
        max_resets=(max_resets, 0),
        n_samples=(n_samples, 1, SAMPLES_MAX),
    )
    if aux is None:
        aux = system.initial_aux(y0, mode)
    aux = jnp.asarray(aux, dtype=float)
    if aux.shape != (system.n_aux,):
        raise ValueError(
            f"aux has shape {tuple(aux.shape)}; {type(system).__name__} needs ({system.n_aux},)"
        )
    system.check_flow_step(dt_max)
    system.check_functions(y0, 0 if isinstance(mode, Tracer) else mode, t0)
    solver = system.solver if solver is None else solver
    solver = (
        _ExactFlowSolver(eqx.partition(system, eqx.is_array)[1])
        if system.has_flow
        else _solver(solver)
    )
    adjoint = _adjoint(adjoint)
    if (
        isinstance(adjoint, (diffrax.ForwardMode, diffrax.DirectAdjoint))
        and getattr(solver, "scan_kind", "") is None
    ):
        # what diffrax does for an unwrapped Runge-Kutta solver (JVP-able stages)
        kind = "lax" if isinstance(adjoint, diffrax.ForwardMode) else "bounded"
        solver = cast(
            diffrax.AbstractSolver,
            eqx.tree_at(lambda s: s.scan_kind, solver, kind, is_leaf=lambda x: x is None),
        )
    jump_ts = check_jump_ts(system.jump_times() if jump_ts is None else jump_ts)
    if isinstance(jump_ts, tuple):
        jump_ts = jnp.asarray(jump_ts, dtype=float) if jump_ts else None
    else:  # traced
        jump_ts = jnp.asarray(jump_ts, dtype=float).reshape(-1)
    if ts is not None:
        ts = _check_ts(ts, t0, t1)
    save_events = check_integer("save_events", save_events, 0, SAVE_EVENTS_MAX)
    if not isinstance(dense, bool):
        raise ValueError(f"dense = {dense!r} is not allowed: it must be True or False")
    if dense and system.hybrid:
        raise ValueError(
            f"dense = True is not allowed for {type(system).__name__}: it has a reset map "
            f"(its run is in segments); save states at given times with ts= instead"
        )
    traced = any(isinstance(v, Tracer) for v in (t0, t1, rtol, atol, dt_max))
    back = isinstance(adjoint, diffrax.BacksolveAdjoint)
    plain = (
        system.event_set.n == 0
        and not system.hybrid
        and not system.has_flow
        and not dense
        and not save_events
    )
    if back and not plain:
        why = (
            "events"
            if system.event_set.n
            else "a reset map"
            if system.hybrid
            else "an exact flow"
            if system.has_flow
            else "dense = True"
            if dense
            else "save_events"
        )
        raise ValueError(
            f"adjoint = 'backsolve' is not allowed with {why} ({type(system).__name__}): the "
            f"continuous adjoint needs one smooth solve without events, resets, dense output "
            f"or an event log (use 'reverse')"
        )
    # the plain route also needs t0 < t1 known now (a zero-length run is the segment loop's)
    plain = plain and (back or (not traced and ts is None and float(t1) > float(t0)))
    opts = _Options(
        solver,
        adjoint,
        max_steps,
        max_resets,
        n_samples,
        traced,
        int(save_events),
        dense,
        plain,
        _loop.wanted(system.hybrid, dense, plain),
        _batched(y0, t0, t1, system),
    )
    f = jnp.asarray
    m = None
    if ts is not None:
        # the save times padded to a size class (at least 16) by repeating the last one, so
        # that other numbers of save times of one class reuse the compiled solve (each new m
        # compiled it again, 9-14 s of CPU for a small hybrid system: issue 36); the extra
        # rows are cut below
        m = int(ts.shape[0])
        ts = jnp.concatenate([ts, jnp.broadcast_to(ts[-1:], (size_class(m, floor=16) - m,))])
    args = (
        system,
        y0,
        mode,
        aux,
        f(t0, float),
        f(t1, float),
        f(rtol, float),
        f(atol, float),
        f(jnp.inf if dt_max is None else dt_max, float),
        jump_ts,
        ts,
        opts,
    )
    sol = None
    if not dense and _traced.wanted(jax.tree_util.tree_leaves(eqx.filter(args, eqx.is_array))):
        # reverse mode: the traced reverse pass is read from disk after its first process
        sol = _traced.call(_solve, args)
    if sol is None:
        try:
            sol = _solve(*args)
        except TypeError as err:
            if "forward-mode autodiff" not in str(err) or not isinstance(
                adjoint, (diffrax.RecursiveCheckpointAdjoint, diffrax.BacksolveAdjoint)
            ):
                raise
            raise TypeError(
                f"rollax.solve: forward mode (jax.jvp, jax.jacfwd, jax.hessian) is not allowed "
                f"with adjoint = {_adjoint_name(adjoint)!r}, which is reverse mode only: pass "
                f"adjoint='forward' (jax.jvp, jax.jacfwd) or adjoint='direct' (both modes: "
                f"jax.hessian)"
            ) from None
    if m is None or sol.ys is None or sol.ys.shape[0] == m:
        return sol
    return eqx.tree_at(lambda s: s.ys, sol, sol.ys[:m])


def _batched(*trees) -> bool:
    """Whether a leaf of ``trees`` is batched by ``jax.vmap`` (at any depth of the tracers
    wrapping it). A ``vmap`` applied outside a ``jax.jit`` that calls ``solve`` is not seen."""
    for x in jax.tree_util.tree_leaves(trees):
        for _ in range(16):
            if isinstance(x, batching.BatchTracer):
                return True
            if not isinstance(x, Tracer):
                break
            x = getattr(x, "primal", None) if hasattr(x, "primal") else getattr(x, "val", None)
    return False


def _initial_mode(system, t0, y0):
    """``system.initial_mode(t0, y0)`` as an int32 index, or a ``ValueError`` naming what it
    returned when that is concrete and not an index of ``system.modes``."""
    m = jnp.asarray(system.initial_mode(jnp.asarray(t0, y0.dtype), y0))
    if m.shape != () or m.dtype.kind not in "iu":
        raise ValueError(
            f"initial_mode returned {m!r}; it must be one integer index of {list(system.modes)}"
        )
    if not isinstance(m, Tracer) and not 0 <= int(m) < len(system.modes):
        raise ValueError(
            f"initial_mode returned {int(m)}; it must be an index of {list(system.modes)}"
        )
    return m.astype(jnp.int32)


def _over_the_gap(system, t0, y0, mode, jump_ts):
    """``(t0, y0, sign)``: when ``t0`` lies within the smallest step before a jump time, the
    first time after it and the state moved there by one Euler step (``past_jump``), with the
    scan's signs at the start itself (so that a crossing inside the gap is seen by the first
    step, and located at its start: ``events.locate_in_step``); else ``t0``, ``y0`` and NaN
    signs (taken where the run starts). The kernel's setup: the same."""
    t0n = past_jump(t0, jump_ts)
    dt = t0n - t0
    moved = dt > 0
    f0 = jnp.asarray(system.vector_field(t0, y0, mode), y0.dtype)
    sign = _start_signs(system, t0, y0, mode, f0)
    y0n = jnp.where(moved, y0 + jnp.where(moved, dt, 0.0) * f0, y0)
    return jnp.asarray(t0n, y0.dtype), y0n, jnp.where(moved, sign, jnp.nan)


def _start_signs(system, t0, y0, mode, f0):
    """The scan's signs at a start: a function exactly at zero takes the side it moves to."""
    g0, dg0 = jax.jvp(
        lambda t, y: system.event_values(t, y, mode), (t0, y0), (jnp.ones_like(t0), f0)
    )
    return jnp.where(g0 != 0, jnp.sign(g0), jnp.sign(dg0)).astype(y0.dtype)


def _check_ts(ts, t0, t1):
    try:
        arr = jnp.asarray(ts, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"ts = {ts!r} is not allowed: it must be a non-empty 1-d array of save times"
        ) from None
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(
            f"ts has shape {tuple(arr.shape)}; it must be a non-empty 1-d array of save times"
        )
    try:
        v = np.asarray(ts, dtype=float)
    except (TypeError, jax.errors.TracerArrayConversionError):
        return arr  # traced: checked by diffrax at run time
    lo, hi = _concrete(t0), _concrete(t1)
    if not np.all(np.isfinite(v)):
        raise ValueError(
            f"ts has a non-finite value ({float(v[~np.isfinite(v)][0])!r}); save times must be finite"
        )
    if np.any(np.diff(v) < 0):
        i = int(np.argmax(np.diff(v) < 0))
        raise ValueError(
            f"ts[{i + 1}] = {float(v[i + 1])!r} < ts[{i}] = {float(v[i])!r}; save times must be non-decreasing"
        )
    if (lo is not None and v[0] < lo) or (hi is not None and v[-1] > hi):
        raise ValueError(
            f"ts spans [{float(v[0])!r}, {float(v[-1])!r}]; save times must lie in [t0, t1] = [{lo!r}, {hi!r}]"
        )
    return arr


def _concrete(v):
    try:
        return float(v)
    except (TypeError, ValueError, jax.errors.ConcretizationTypeError):
        return None


def _check_concrete(name, v, ok, allowed):
    # a real scalar (a traced one too); its range is checked where it is concrete
    if isinstance(v, (str, bytes, bool)) or v is None:
        raise ValueError(f"{name} = {v!r} is not allowed: it must be a number")
    if isinstance(v, Tracer):
        if (
            v.ndim != 0
            or not jnp.issubdtype(v.dtype, jnp.floating)
            and not jnp.issubdtype(v.dtype, jnp.integer)
        ):
            raise ValueError(
                f"{name} is a traced array of shape {tuple(v.shape)} and dtype "
                f"{v.dtype}: it must be a real number (one per run)"
            )
        return
    try:
        a = np.asarray(v)
    except Exception:
        a = np.asarray(None)
    if a.dtype.kind not in "fiu" or a.ndim != 0:
        raise ValueError(f"{name} = {_show(v)} is not allowed: it must be a real number")
    if not ok(float(a)):
        raise ValueError(f"{name} = {v!r} is outside the allowed range {allowed}")


#: Step and reset counters are int32 in both integrators.
COUNT_MAX = 2**31 - 1
#: Event samples per step: each costs the event functions, and the kernel keeps every
#: sample's values of the step that fired; a finer sampling is better asked with dt_max.
SAMPLES_MAX = 256


def check_options(t0, t1, rtol, atol, dt_max, **counts):
    """The run options both integrators take, checked where they are concrete (traced values
    pass): ``rtol`` in [RTOL_MIN, 1), ``atol`` in [ATOL_MIN, 1), a finite ``t0 < t1``,
    ``dt_max > 0``, and each ``counts[name] = (value, lo[, hi])`` an integer in [lo, hi]
    (hi: :data:`COUNT_MAX` by default)."""
    _check_concrete(
        "rtol",
        rtol,
        lambda v: RTOL_MIN <= v < 1.0,
        f"[{RTOL_MIN:g}, 1) (float64 cannot honour a smaller relative tolerance)",
    )
    _check_concrete(
        "atol",
        atol,
        lambda v: ATOL_MIN <= v < 1.0,
        f"[{ATOL_MIN:g}, 1) (smaller is near float64's underflow)",
    )
    _check_concrete("t0", t0, math.isfinite, "finite")
    _check_concrete("t1", t1, lambda v: not math.isnan(v), "a number or inf")
    lo, hi = _concrete(t0), _concrete(t1)
    if lo is not None and hi is not None and not hi > lo:
        raise ValueError(f"t1 = {t1!r} must be greater than t0 = {t0!r}")
    if dt_max is not None:
        _check_concrete("dt_max", dt_max, lambda v: v > 0, "> 0")
    for name, spec in counts.items():
        v, lo, hi = spec if len(spec) == 3 else (*spec, COUNT_MAX)
        if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and lo <= v <= hi):
            raise ValueError(
                f"{name} = {v!r} is not allowed: it must be an integer in [{lo}, {hi}]"
            )


def _solver(solver) -> diffrax.AbstractSolver:
    if isinstance(solver, diffrax.AbstractSolver):
        if not isinstance(solver, diffrax.AbstractAdaptiveSolver):
            raise ValueError(
                f"solver = {type(solver).__name__}() is not allowed: it gives no "
                f"error estimate to control the step with (use an adaptive solver: "
                f"dopri5, tsit5, dopri8)"
            )
        if isinstance(solver, diffrax.AbstractImplicitSolver) or not isinstance(
            solver, diffrax.AbstractERK
        ):
            raise ValueError(
                f"solver = {type(solver).__name__}() is not allowed: rollax.solve "
                f"samples and redoes steps of an explicit Runge-Kutta pair (its "
                f"dense output and events); use dopri5, tsit5, dopri8 or another "
                f"diffrax explicit adaptive solver"
            )
        return solver
    if not isinstance(solver, str) or solver not in _SOLVERS:
        raise ValueError(
            f"solver = {solver!r} must be a diffrax solver or one of {sorted(_SOLVERS)}"
        )
    return _SOLVERS[solver]()


class _State(NamedTuple):
    t: Float[Array, ""]
    y: Float[Array, " d"]
    mode: Int[Array, ""]
    aux: Float[Array, " p"]
    status: Int[Array, ""]  # -1 while running
    event: Int[Array, ""]
    counts: Int[Array, " n"]
    t_first: Float[Array, " n"]
    steps: Int[Array, ""]
    resets: Int[Array, ""]
    rejected: Int[Array, ""]
    ys: Float[Array, "m d"]  # saved states (m = 0 without ts)
    log_n: Float[Array, ""]  # events so far (the event log, _eventlog)
    log: Float[Array, " Kw"]  # the first K of them, flat
    # the event served by the last reset and its time (-1: none yet): one that fires again at
    # once, at that time, ends the run as REPEATED
    last_e: Int[Array, ""]
    last_t: Float[Array, ""]
    sign_in: Float[Array, " n"]  # the first segment's scan signs (nan: those at its start)


@eqx.filter_jit
def _solve(
    system, y0, mode, aux, t0, t1, rtol, atol, dt_max, jump_ts, ts, opts: _Options
) -> Solution:
    bad = jnp.bool_(False)
    if opts.traced:
        # the checks of check_options, on values known only now (a traced t1 = t0 is allowed:
        # a phase of length 0 ends at once; rollax.robot.fly uses it). Out of range: the run
        # is one of length 0 from valid values, its results NaN and its status NONFINITE. (Not
        # eqx.error_if: its host callback kept every such program, identification's and the
        # robot's, out of the persistent compile cache; issue 56.)
        ok = (
            (t1 >= t0)
            & jnp.isfinite(t0)
            & ~jnp.isnan(t1)
            & (rtol >= RTOL_MIN)
            & (rtol < 1)
            & (atol >= ATOL_MIN)
            & (atol < 1)
            & (dt_max > 0)
        )
        bad = ~ok
        t0 = jnp.where(ok, t0, 0.0)
        t1 = jnp.where(ok, t1, t0)
        rtol = jnp.where(ok, rtol, 1e-6)
        atol = jnp.where(ok, atol, 1e-6)
        dt_max = jnp.where(ok, dt_max, jnp.inf)
    sol = _run(system, y0, mode, aux, t0, t1, rtol, atol, dt_max, jump_ts, ts, opts)
    if ts is not None and sol.ys is not None:
        # ts out of order (only a traced ts can be: a concrete one is checked before;
        # diffrax's own check of it is a NaN, not a raise, see _checks_without_callbacks): the
        # same. (Times after a traced t1 are allowed: their states are NaN, the run has ended;
        # identification's windows use that.)
        bad = bad | jnp.any(ts[1:] < ts[:-1]) | jnp.any(jnp.isnan(ts))
    if not opts.traced and ts is None:
        return sol
    return _refused(sol, bad)


def _refused(sol: Solution, bad) -> Solution:
    """``sol`` with every float NaN and the status NONFINITE where ``bad``."""
    dyn, static = eqx.partition(sol, eqx.is_inexact_array)
    dyn = jax.tree_util.tree_map(lambda x: jnp.where(bad, jnp.nan, x), dyn)
    sol = eqx.combine(dyn, static)
    status = jnp.where(bad, jnp.int32(Status.NONFINITE), sol.status).astype(sol.status.dtype)
    return eqx.tree_at(lambda s: s.status, sol, status)


def _run(
    system, y0, mode, aux, t0, t1, rtol, atol, dt_max, jump_ts, ts, opts: _Options
) -> Solution:
    events = system.event_set
    n = events.n
    m = 0 if ts is None else ts.shape[0]
    sign_in = jnp.full(n, jnp.nan, y0.dtype)
    if jump_ts is not None:
        t0, y0, sign_in = _over_the_gap(system, t0, y0, mode, jump_ts)
        sign_in = sign_in if n else jnp.zeros(0, y0.dtype)
    if opts.loop:
        # (this module's pieces handed in: the loop does not import it back)
        return _loop.run(
            system, y0, mode, aux, t0, t1, rtol, atol, dt_max, jump_ts, ts, sign_in, opts, _self
        )
    if opts.plain:
        return _plain(system, y0, mode, aux, t0, t1, rtol, atol, dt_max, jump_ts, ts, opts)
    st = _State(
        t0,
        y0,
        mode,
        aux,
        jnp.int32(-1),
        jnp.int32(-1),
        jnp.zeros(n, jnp.int32),
        jnp.full(n, jnp.nan, y0.dtype),
        jnp.int32(0),
        jnp.int32(0),
        jnp.int32(0),
        jnp.full((m,) + y0.shape, jnp.nan, y0.dtype),
        *_eventlog.empty(opts.save_events, y0.shape[0], y0.dtype),
        jnp.int32(-1),
        t0,
        sign_in,
    )

    def run(s: _State) -> Any:  # the next state; with opts.dense, (it, the dense output)
        return _segment(system, events, s, t1, rtol, atol, dt_max, jump_ts, ts, opts)

    interpolation = None
    if not system.hybrid:
        st = run(st)
        if opts.dense:
            st, interpolation = st
    else:
        kind = (
            "lax"
            if isinstance(opts.adjoint, diffrax.ForwardMode)
            else "bounded"
            if isinstance(opts.adjoint, diffrax.DirectAdjoint)
            else "checkpointed"
        )
        st = eqxi.while_loop(
            lambda s: s.status < 0,
            run,
            st,
            max_steps=None if kind == "lax" else opts.max_resets + 2,
            kind=kind,
        )
    return Solution(
        t=st.t,
        y=st.y,
        mode=st.mode,
        aux=st.aux,
        status=st.status,
        event=st.event,
        counts=st.counts,
        t_first=st.t_first,
        steps=st.steps,
        resets=st.resets,
        rejected=st.rejected,
        ys=None if ts is None else st.ys,
        events=_eventlog.read(st.log_n, st.log, y0.shape[0]) if opts.save_events else None,
        interpolation=interpolation,
    )


def _plain(system, y0, mode, aux, t0, t1, rtol, atol, dt_max, jump_ts, ts, opts):
    """A run without events, resets, saving or an exact flow: one plain diffrax solve (no
    event samples or bookkeeping in the loop), with the same solver and controller, so the
    same steps and values as the event route (``tests/integrate/test_solve_adjoints.py``). Differentiated by
    ``opts.adjoint``; with ``diffrax.BacksolveAdjoint`` (``adjoint="backsolve"``, the
    continuous adjoint) the adjoint ODE is integrated backwards from ``t1`` in memory
    independent of the number of steps, with diffrax's Dopri5 and PID controller (the
    backward state is a pytree): its gradient is that of the exact solution, not of the
    discrete one, and differs from reverse mode's by about the tolerances (below 1e-6
    relative at rtol = 1e-10 on ``tests/integrate/test_solve_adjoints.py``'s cases)."""
    term = diffrax.ODETerm(lambda t, y, args: args[0].vector_field(t, y, args[1]))
    back = isinstance(opts.adjoint, diffrax.BacksolveAdjoint)
    # diffrax's controller: the backward solve's state is the augmented (state, adjoint) pytree
    if back:
        pid = diffrax.PIDController(rtol=rtol, atol=atol, dtmax=dt_max)
        ctrl = pid if jump_ts is None else diffrax.ClipStepSizeController(pid, jump_ts=jump_ts)
    else:
        ctrl = _controller(rtol, atol, dt_max, 1e-14 * jnp.maximum(1.0, jnp.abs(t0)), jump_ts)
    # (and diffrax's Dopri5 for the kernel's: contd5 takes arrays, the backward state is a tuple)
    solver = diffrax.Dopri5() if back and isinstance(opts.solver, _Dopri5) else opts.solver
    sol = _diffeqsolve(
        term,
        solver,
        t0,
        jnp.where(jnp.isfinite(t1), t1, jnp.finfo(y0.dtype).max),
        None,
        y0,
        args=(system, mode),
        stepsize_controller=ctrl,
        saveat=diffrax.SaveAt(t1=True, controller_state=not back)
        if ts is None
        else diffrax.SaveAt(t1=True, ts=ts, controller_state=not back),
        max_steps=opts.max_steps,
        throw=False,
        adjoint=opts.adjoint,
    )
    assert sol.ys is not None and sol.ts is not None  # (saved: t1, and ts if given)
    y = sol.ys[-1]
    ok = sol.result == diffrax.RESULTS.successful
    t_end = sol.ts[-1]
    if not back:  # a run that stopped early: where it stopped (diffrax gives inf)
        cs = sol.controller_state
        # (ours; with jump times, inside diffrax's ClipStepSizeController's state)
        cs = getattr(cs, "inner_state", cs)
        assert cs is not None  # (saved: SaveAt(controller_state=True))
        t_acc, y_acc = cs
        t_end = jnp.where(ok, t_end, t_acc)
        y = jnp.where(ok, y, y_acc)
    # a run that stopped early: diffrax fills the save slots after its end with inf
    finite = jnp.all(jnp.isfinite(y))
    status = jnp.where(
        ok & finite,
        Status.T_MAX,
        jnp.where(
            sol.result == diffrax.RESULTS.max_steps_reached, Status.MAX_STEPS, Status.NONFINITE
        ),
    ).astype(jnp.int32)
    return Solution(
        t=t_end,
        y=y,
        mode=jnp.asarray(mode, jnp.int32),
        aux=aux,
        status=status,
        event=jnp.int32(-1),
        counts=jnp.zeros(0, jnp.int32),
        t_first=jnp.zeros(0, y0.dtype),
        steps=jnp.asarray(sol.stats["num_steps"], jnp.int32),
        resets=jnp.int32(0),
        rejected=jnp.asarray(sol.stats["num_rejected_steps"], jnp.int32),
        ys=None if ts is None else sol.ys[:-1],
    )


# the length of the stand-in step redone where no event fired (relative to max(1, |t0|)):
# short enough that one step from a valid state stays finite, long enough that 1/h does not
# overflow
_SAFE_H = 1e-6


def _g(system, interp, mode, e, t):
    return system.event_values(t, interp.evaluate(t), mode)[e]


def _slope(system, interp, mode, e, t):
    """d/dt of event ``e`` along the solution at ``t``: dg/dt + dg/dy . f(t, y), with the
    vector field's f (the interpolant's slope is ~100x less accurate)."""
    y = interp.evaluate(t)
    f = system.vector_field(t, y, mode)
    return jax.jvp(
        lambda t_, y_: system.event_values(t_, y_, mode)[e], (t, y), (jnp.ones_like(t), f)
    )[1]


@eqx.filter_custom_jvp
def _root_time(t_star, system, interp, mode, e):
    """The root ``t_star`` of event ``e``, differentiable by the implicit function theorem:
    dt* = -(dg at fixed t) / (dg/dt along the solution). The rule calls the function again
    at its primals, so that higher derivatives (``jax.hessian``) are exact too."""
    return t_star


@_root_time.def_jvp
def _root_time_jvp(primals, tangents):
    t_star, system, interp, mode, e = primals
    _, d_sys, d_interp, _, _ = tangents
    t = _root_time(t_star, system, interp, mode, e)
    _, g_dot = eqx.filter_jvp(
        lambda s, ip: _g(s, ip, mode, e, t), (system, interp), (d_sys, d_interp)
    )
    if g_dot is None:  # a symbolic zero: nothing the tangent moves reaches g
        g_dot = jnp.zeros_like(t)
    slope = _slope(system, interp, mode, e, t)
    # a subnormal slope would make 1/slope inf, and a masked branch's zero cotangent NaN
    safe = jnp.abs(slope) >= jnp.finfo(jnp.result_type(slope)).tiny
    return t, jnp.where(safe, -g_dot / jnp.where(safe, slope, 1.0), 0.0)


def _implicit(system, mode, interp, t_star, e):
    """Time and state at the root ``t_star`` of event ``e`` (differentiable, module docstring).

    The state follows the solution, ``dy = dy|_t + f(t*, y*) dt*``: the interpolant plus a
    zero-valued term that swaps its slope for the vector field's."""
    t_star = jax.lax.stop_gradient(t_star)
    t_ev = _root_time(t_star, system, interp, mode, e)
    y_ev = interp.evaluate(t_ev)
    f = system.vector_field(t_ev, y_ev, mode)
    dt = t_ev - jax.lax.stop_gradient(t_ev)
    return t_ev, y_ev + (f - interp.derivative(t_ev)) * dt


def _served(system, t_e, y_e, mode, aux, e, repeated, jumped, resets, max_resets, t1):
    """The reset map at the served event ``e`` and what follows from it, in both loops:
    ``(t, y, mode, aux, terminal, resets, status)``, the status -1 when the run goes on. A
    repeated event (it fired again at once after its own reset) ends the run where that reset
    left it, not reset again (REPEATED); a root where the event function jumps ends it after
    its reset (DISCONTINUOUS); a reset that moves the time to or past ``t1`` ends it there."""
    t_r, y_r, mode_r, aux_r, term = system.reset(t_e, y_e, mode, aux, e)
    term = jnp.asarray(term, bool) & ~repeated
    t_r = jnp.where(repeated, t_e, jnp.asarray(t_r, t_e.dtype))
    y_r = jnp.where(repeated, y_e, y_r)
    mode_r = jnp.where(repeated, mode, jnp.asarray(mode_r, jnp.int32))
    aux_r = jnp.where(repeated, aux, jnp.asarray(aux_r, aux.dtype))
    ends = term | jumped | repeated
    resets = resets + (~ends).astype(jnp.int32)
    status = jnp.select(
        [repeated, jumped, term, resets > max_resets],
        [Status.REPEATED, Status.DISCONTINUOUS, Status.EVENT, Status.MAX_STEPS],
        -1,
    )
    status = jnp.where((status == -1) & (t_r >= t1), Status.T_MAX, status).astype(jnp.int32)
    return t_r, y_r, mode_r, aux_r, term, resets, status


def _ended_by_event(status):
    """Whether the run ended at an event (its index is the solution's ``event``)."""
    return (status == Status.EVENT) | (status == Status.DISCONTINUOUS) | (status == Status.REPEATED)


def _segment(
    system, events: EventSet, s: _State, t1, rtol, atol, dt_max, jump_ts, ts, opts
) -> _State | tuple[_State, Any]:
    """Integrate from the state's time to the next terminal event (or t1); reset if hybrid."""
    n = events.n
    dtype = s.y.dtype
    t0, y0, mode = s.t, s.y, s.mode
    g0 = system.event_values(t0, y0, mode)
    # a crossing function that starts exactly at zero takes the side it moves to
    f0 = system.vector_field(t0, y0, mode)
    _, dg0 = jax.jvp(
        lambda t, y: system.event_values(t, y, mode), (t0, y0), (jnp.ones_like(t0), f0)
    )
    sign0 = jnp.where(g0 != 0, jnp.sign(g0), jnp.sign(dg0))
    sign0 = jnp.where(jnp.isnan(s.sign_in), sign0, s.sign_in)  # (a start moved over a gap)
    # (a boundary exactly at zero that moves inwards has not fired: events.fired_at_start)
    at_start = events.fired_at_start(g0, sign0)
    # the event just served by a reset fires again at once, at its own time (the kernel's
    # serve_end: the same)
    repeated = (
        (s.last_e >= 0) & at_start[jnp.maximum(s.last_e, 0)] & (t0 == s.last_t)
        if n
        else jnp.asarray(False)
    )
    bad_start = ~jnp.all(jnp.isfinite(g0)) | ~jnp.all(jnp.isfinite(y0)) | ~jnp.all(jnp.isfinite(f0))
    skip = jnp.any(at_start) | bad_start
    sg = jax.lax.stop_gradient

    solver = _Sampled(opts.solver, events, opts.n_samples)
    term = diffrax.ODETerm(_vf)
    # the solver's state at the start: the first values of the event-step slots (a valid
    # point, so that the redone step stays finite where no event fired)
    st0 = opts.solver.init(term, t0, t0 + 1.0, sg(y0), (system, mode))
    st_leaves, st_def = jax.tree_util.tree_flatten(st0)
    st_f = _state_leaves(st0, dtype)
    cross = _crossings(events)
    nc = len(cross)
    nan_c = jnp.full(nc, jnp.nan, dtype)
    nan_n = jnp.full(n, jnp.nan, dtype)
    ev0 = _Ev(
        sign=sign0.astype(dtype),
        count=jnp.zeros(n, dtype),
        t_zero=nan_n,
        stop=jnp.zeros((), dtype),
        bad=jnp.zeros((), dtype),
        f_t0=t0,
        f_t1=t0,
        f_y0=sg(y0),
        f_state=st_f,
        f_jump=jnp.zeros((), dtype),
        f_sign=jnp.zeros(n, dtype),
        f_count=jnp.zeros(n, dtype),
        f_tzero=nan_n,
        c_t0=nan_c,
        c_t1=nan_c,
        c_y0=jnp.broadcast_to(sg(y0), (nc,) + y0.shape),
        c_state=tuple(jnp.broadcast_to(x, (nc,) + x.shape) for x in st_f),
        c_jump=jnp.zeros(nc, dtype),
        c_sign=jnp.zeros(nc, dtype),
        c_tzero=nan_c,
    )

    def redone(t0_, t1_, y0_, st_, jump_):
        # the dense output of a step the loop took, from its start (the same arithmetic)
        # zip drops the dummy leaf of a stateless solver (_state_leaves)
        st = st_def.unflatten([a.astype(b.dtype) for a, b in zip(st_, st_leaves)])
        y1_, _, dense = opts.solver.step(term, t0_, t1_, y0_, (system, mode), st, jump_ > 0)[:3]
        return opts.solver.interpolation_cls(t0=t0_, t1=t1_, **dense), y1_

    def samples(ip, y1_, t0_, h_):
        return sg(_step_samples(system, mode, ip, y1_, t0_, h_, opts.n_samples)[0])

    # a segment that needs no solve integrates over an empty interval (diffrax returns at once)
    t0_in = jnp.where(skip, sg(t0), t0)
    y0_in = jnp.where(skip, sg(y0), y0)
    t_end = jnp.where(
        skip,
        t0_in + 1e-9 * jnp.maximum(1.0, jnp.abs(t0_in)),
        jnp.where(jnp.isfinite(t1), t1, jnp.finfo(dtype).max),
    )
    sol = _diffeqsolve(
        term,
        solver,
        t0_in,
        t_end,
        None,
        (y0_in, ev0),
        args=(system, mode),
        stepsize_controller=_ExactFlowSteps(dt_max)
        if system.has_flow
        else _controller(rtol, atol, dt_max, 1e-14 * jnp.maximum(1.0, jnp.abs(t0_in)), jump_ts),
        saveat=diffrax.SaveAt(t1=True, dense=opts.dense)
        if ts is None
        else diffrax.SaveAt(
            subs=[
                diffrax.SubSaveAt(t1=True),
                # the dense output gives the physical state only; t0 may be saved from the full one
                diffrax.SubSaveAt(
                    ts=jnp.clip(ts, t0_in, t_end),
                    fn=lambda t, y, args: y[0] if isinstance(y, tuple) else y,
                ),
            ],
            dense=opts.dense,
        ),
        event=diffrax.Event(lambda t, y, args, **kw: y[1].stop > 0),
        max_steps=opts.max_steps,
        throw=False,
        adjoint=opts.adjoint,
    )
    assert sol.ys is not None and sol.ts is not None  # (saveat has t1=True)
    sol_ys = sol.ys if ts is None else sol.ys[0]
    y_last = jax.tree_util.tree_map(lambda x: x[-1], sol_ys)
    y_phys, ev = y_last
    t_last = (sol.ts if ts is None else sol.ts[0])[-1]
    steps = s.steps + jnp.where(skip, 0, sol.stats["num_steps"]).astype(jnp.int32)
    rejected = s.rejected + jnp.where(skip, 0, sol.stats["num_rejected_steps"]).astype(jnp.int32)

    # the terminal event's root. Where no event fired, the slot still holds its start values
    # (a step of length 0): the branch is computed and masked, and its derivative must stay
    # finite, or reverse mode's zero cotangent times an infinite 1/h is NaN (issue 41). So
    # that step gets a short nonzero length from the same valid start.
    has_step = ev.stop > 0
    f_t1 = jnp.where(has_step, ev.f_t1, ev.f_t0 + _SAFE_H * jnp.maximum(1.0, jnp.abs(ev.f_t0)))
    interp, y1_f = redone(ev.f_t0, f_t1, ev.f_y0, ev.f_state, ev.f_jump)
    g_at = lambda t: system.event_values(t, interp.evaluate(t), mode)  # noqa: E731
    fired = (ev.stop > 0) & (ev.bad == 0) & ~skip
    if n:
        loc = locate_in_step(
            events,
            lambda t: sg(g_at(t)),
            sg(ev.f_t0),
            sg(f_t1 - ev.f_t0),
            opts.n_samples,
            sg(ev.f_sign),
            sg(ev.f_count).astype(jnp.int32),
            sg(ev.f_tzero),
            vals=samples(interp, y1_f, ev.f_t0, f_t1 - ev.f_t0),
            unroll=False,  # once per segment: a smaller program (compile time, issue 36)
        )
        found = fired & loc.found
        jumped = found & loc.jumped
        t_ev, y_ev = _implicit(system, mode, interp, jnp.where(found, loc.t, sg(f_t1)), loc.event)
    else:  # no events: nothing to locate
        loc = Located(
            jnp.asarray(False), jnp.int32(0), t0, jnp.zeros(0, jnp.int32), jnp.asarray(False)
        )
        found, t_ev, y_ev = jnp.asarray(False), t0, y0
        jumped = jnp.asarray(False)
    e_start = jnp.argmax(at_start).astype(jnp.int32) if n else jnp.int32(0)
    e = jnp.where(skip, jnp.where(repeated, s.last_e, e_start), loc.event)
    t_e = jnp.where(skip, t0, t_ev)
    y_e = jnp.where(skip, y0, y_ev)
    counts = jnp.where(skip, 0, jnp.where(found, loc.count, ev.count.astype(jnp.int32)))

    # first crossings (the segment's)
    def first_time(c, i):
        # crossing event i, in slot c
        seen = jnp.isfinite(ev.c_t0[c])
        ct0 = jnp.where(seen, ev.c_t0[c], t0)
        # not seen: a short stand-in step, as for the terminal slot (finite derivatives)
        ct1 = jnp.where(seen, ev.c_t1[c], t0 + _SAFE_H * jnp.maximum(1.0, jnp.abs(t0)))
        ip, y1_c = redone(ct0, ct1, ev.c_y0[c], tuple(x[c] for x in ev.c_state), ev.c_jump[c])
        only = jnp.arange(n) == i
        h = ct1 - ct0
        c0 = ct0
        lc = locate_in_step(
            events,
            lambda t: sg(system.event_values(t, ip.evaluate(t), mode)),
            sg(c0),
            sg(h),
            opts.n_samples,
            jnp.where(only, sg(ev.c_sign[c]), 0.0),
            jnp.zeros(n, jnp.int32),
            jnp.where(only, sg(ev.c_tzero[c]), jnp.nan),
            jnp.where(only, 1, 0),
            only,
            vals=samples(ip, y1_c, c0, h),
            unroll=False,
        )
        tf, _ = _implicit(system, mode, ip, jnp.where(seen & lc.found, lc.t, ct0), i)
        # the crossing that ends the segment is the first when none was seen before it
        end_first = found & (e == i) & (counts[i] == 1)
        return jnp.where(
            seen & lc.found & ~(found & (lc.t > t_ev)), tf, jnp.where(end_first, t_ev, jnp.nan)
        )

    slot = {i: c for c, i in enumerate(cross)}

    def first_of(i):
        if i in slot:
            return first_time(slot[i], i)
        if events.kinds[i] == CROSSING:  # target 1 (_crossings): its first crossing is the event
            return jnp.where(found & (e == i), t_ev, jnp.nan)
        return nan_n[0]

    t_first = jnp.stack([first_of(i) for i in range(n)]) if n else nan_n

    res = sol.result
    reached = res == diffrax.RESULTS.successful
    nonfinite = (
        (res == diffrax.RESULTS.dt_min_reached)
        | (ev.bad > 0)
        | bad_start
        | ~jnp.all(jnp.isfinite(jnp.where(found, y_e, y_phys)))
    )
    over = ~skip & ~found & ~reached & ~nonfinite  # max_steps (or another diffrax failure)
    event_now = skip & ~bad_start | found
    status = jnp.select(
        [nonfinite, over, event_now], [Status.NONFINITE, Status.MAX_STEPS, -2], Status.T_MAX
    ).astype(jnp.int32)
    t_out = jnp.where(event_now, t_e, t_last)
    y_out = jnp.where(event_now, y_e, y_phys)
    # at an event: the reset map decides (non-hybrid: the run ends there)
    t_r, y_r, mode_r, aux_r, term, resets, served = _served(
        system, t_out, y_out, mode, s.aux, e, repeated, jumped, s.resets, opts.max_resets, t1
    )
    resets = jnp.where(event_now, resets, s.resets)
    status = jnp.where(status == -2, served, status).astype(jnp.int32)
    ended_by_event = _ended_by_event(status)
    ys = s.ys
    if ts is not None:
        inside = (ts >= t0) & (ts <= t_out)  # a failed run keeps what it reached
        ys = jnp.where(inside[:, None], sol.ys[1], ys)
    log_n, log = s.log_n, s.log
    if opts.save_events:  # every event the reset map saw (static: none without a log)
        log_n, log = _eventlog.write(
            log_n, log, event_now & ~repeated, t_out, e, mode, y_out, t_r, mode_r, y_r
        )
    keep = lambda a, b: jnp.where(event_now, a, b)  # noqa: E731
    new = _State(
        t=keep(jnp.asarray(t_r, t_out.dtype), t_out),
        y=keep(y_r, y_out),
        mode=keep(jnp.asarray(mode_r, jnp.int32), mode),
        aux=keep(jnp.asarray(aux_r, s.aux.dtype), s.aux),
        status=status,
        event=jnp.where(ended_by_event, e, -1).astype(jnp.int32),
        # after a reset (one that goes on, or ends the run at t1 or at the reset limit) the
        # counts are the new segment's, as in the kernel
        counts=jnp.where(event_now & ~term, 0, counts),
        t_first=jnp.where(event_now & ~term, jnp.nan, t_first),
        steps=steps,
        resets=resets,
        rejected=rejected,
        ys=ys,
        log_n=log_n,
        log=log,
        last_e=jnp.where(event_now, e, -1).astype(jnp.int32),
        last_t=t_out,
        sign_in=jnp.full_like(s.sign_in, jnp.nan),
    )
    # the dense output of the (one) segment: diffrax's interpolation of the physical state
    if not opts.dense:
        return new
    # (its trivial case holds the full state with the event bookkeeping: the physical part)
    ip = sol.interpolation
    assert ip is not None  # (saveat has dense=True)
    return new, eqx.tree_at(lambda i: i.y0_if_trivial, ip, ip.y0_if_trivial[0])


def _vf(t, y, args):
    system, mode = args
    if isinstance(y, tuple):  # diffrax's own checks see the state with its event bookkeeping
        return system.vector_field(t, y[0], mode), jax.tree_util.tree_map(jnp.zeros_like, y[1])
    return system.vector_field(t, y, mode)
