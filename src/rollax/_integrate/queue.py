"""The batched ensemble kernel: many event-terminated DOPRI5 solves, one work queue per device.

Design (measured in ``benchmarks/RESULTS.md``):

* **A work queue, not vmap over a while loop.** One ``while_loop`` advances ``lanes``
  trajectories in lock-step; a finished lane writes its result and takes the next start, in a
  refill done only once a sixteenth of the lanes are free. Under plain ``vmap`` a batch would
  cost its slowest trajectory.
* **Event sampling as in** :func:`rollax.solve`. Every accepted step is sampled at
  ``n_samples`` equally spaced points ``theta = k / n_samples`` (k = 1..n_samples) of its
  continuous extension, and the samples are walked with :func:`rollax._core.events.scan` (per-lane
  sign, count and start of a run of exact zeros); the interpolation coefficients are computed
  once per step, so a sample costs four multiply-adds per component plus the event functions,
  and the last sample (the new state) shares its evaluation with the step's last stage
  (``field_and_events``). A non-finite sampled event value ends the start as ``FAILED_NAN``.
  A step whose samples may hide a pair of crossings (:func:`rollax._core.events.unresolved`: two
  more event evaluations a step, at its start and near its end) is rejected as one with a
  non-finite error.
* **Root finding outside the hot loop.** A step that contains a terminating event is not
  taken: the lane stops at the step's start. After the loop the step is redone (with a reset
  map, the lane keeps the step's dense coefficients and samples, and a service pass over the
  parked lanes uses them) and the earliest root located on its dense output with
  :func:`rollax._core.events.locate_in_step`, as :func:`rollax.solve` does. The steps holding first
  crossings are kept the same way (redone after the loop without a reset map, kept with one:
  then the post-pass holds no copy of the step, which shortens its compile).
* **Slices.** The queue is three compiled programs: set-up, the loop, and the post-pass.
  The loop runs to the end in one call, or, with ``progress``, in slices of an iteration
  budget (the carry stays on the device between them) so that the caller sees the starts
  finished and can stop; the lanes' arithmetic is the same either way.
* **Per-start parameters.** Leaves of ``args`` marked in ``args_batched`` have a leading axis
  of N starts; they are dealt to the devices with the starts and gathered into per-lane
  arrays on refill, so each lane uses its own start's values; the other leaves are shared.
* **One queue per device**: starts are dealt round-robin to the local JAX devices
  (``shard_map`` over a one-axis mesh; plain ``jit`` on one device); on a CPU,
  :mod:`rollax._core._setup` makes one device per core.
* **Hybrid systems in the loop.** With a ``reset`` map, an event does not end the lane: the
  lane parks, and when enough lanes are parked or free, one vectorised pass (over the parked
  lanes only) locates their events, applies the reset map and lets them go on, in a new
  segment, from the state it returns. A mode (rolling or slipping, say) rides in the state
  as a passive component (zero rate, left out of the error norm with ``n_error``), so every
  lane may be in a different mode; per-start bookkeeping the reset map needs (switch counts,
  say) rides in ``aux``. The reset map decides which events end the run.

The event semantics are those of :mod:`rollax._core.events` and :func:`rollax.solve` (same samples,
same walk, same root location, same counts and first crossings).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
import time
from collections import Counter
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from rollax._integrate import dopri5, dopri8
from rollax._core import _tail
from rollax._core._solution import Status
from rollax._core._validate import check_jump_ts, past_jump
from rollax._core.events import (
    CROSSING,
    EventSet,
    Located,
    locate_in_step,
    near_theta,
    scan,
    unresolved_in,
)

LOG = logging.getLogger("rollax")

# Status codes of a finished start.
# the codes of a finished start are rollax.Status's (one source); the others never leave the
# kernel (padding rows are dropped, the internal ones end before the records are written)
EVENT = int(Status.EVENT)  # ended by an event (see ``event``)
T_MAX = int(Status.T_MAX)  # reached t_max with no event
FAILED_NAN = int(Status.NONFINITE)  # the state or the step size became non-finite / underflowed
FAILED_STEPS = int(Status.MAX_STEPS)  # the step limit (per segment) or the reset limit was hit
REPEATED = int(Status.REPEATED)  # an event fired again at once after its own reset
DISCONTINUOUS = int(Status.DISCONTINUOUS)  # an event function jumped across zero at its root
PADDING = 6  # not a real start (padding of a chunk)
_PENDING = 7  # internal: the step holding the (terminal) event is located after the loop
_PARKED = 8  # internal: the step holding an event is located, and reset, in the loop
_LIVE = 9  # internal: integrating
assert len(Status) == PADDING, "the kernel's own codes follow rollax.Status's"


STATUS_NAMES = {
    EVENT: "event",
    T_MAX: "t_max",
    FAILED_NAN: "nan",
    FAILED_STEPS: "max_steps",
    REPEATED: "repeated",
    DISCONTINUOUS: "discontinuous",
}


class EnsembleResult(NamedTuple):
    """Per-start results of :func:`run` (NumPy arrays, leading axis = start)."""

    status: np.ndarray  # (N,) int8, one of EVENT, T_MAX, FAILED_NAN, FAILED_STEPS
    event: np.ndarray  # (N,) int32: the event that ended the run, -1 if none
    t: np.ndarray  # (N,) time at the end
    y: np.ndarray  # (N, d) state at the end (with a reset map: the state it returned)
    counts: (
        np.ndarray
    )  # (N, n_events) crossings counted in the last segment (the ending one included)
    t_first: (
        np.ndarray
    )  # (N, n_events) first crossing of each crossing event in the last segment (nan if none)
    steps: np.ndarray  # (N,) attempted steps, all segments
    resets: np.ndarray  # (N,) non-terminal resets (segments - 1)
    aux: np.ndarray  # (N, p) the reset map's per-start data at the end
    rejected: np.ndarray  # (N,) rejected steps (error, non-finite, unresolved events), all segments


class _Lanes(NamedTuple):
    idx: Int[Array, " L"]  # the start held by the lane (-1: none); its record is written on refill
    live: Bool[Array, " L"]  # integrating
    status: Int[Array, " L"]  # _PARKED while parked; the record status once finished
    event: Int[Array, " L"]
    t: Float[Array, " L"]
    y: Float[Array, "L d"]
    h: Float[Array, " L"]
    k1: Float[Array, "L d"]
    # the event scan's state (rollax._core.events.scan) at t
    sign: Float[Array, "L n"]
    count: Int[Array, "L n"]  # pyright: ignore[reportIncompatibleMethodOverride]  (tuple.count)
    t_zero: Float[Array, "L n"]
    steps: Int[Array, " L"]
    rejected: Int[Array, " L"]
    seg: Int[Array, " L"]  # steps at the start of the current segment
    resets: Int[Array, " L"]
    aux: Float[Array, "L p"]
    # the step holding the first crossing of each crossing event (c: one slot per crossing event)
    fc_t: Float[Array, "L c"]  # its start (nan: none yet)
    fc_y: Float[Array, "L c d"]
    fc_h: Float[Array, "L c"]
    fc_k1: Float[Array, "L c d"]
    fc_sign: Float[Array, "L c"]  # the event's scan state before it
    fc_tzero: Float[Array, "L c"]
    # with a reset map and DOPRI5, that step as the hot loop computed it (as hit_*, below)
    fc_y1: Float[Array, "L c d"]
    fc_coef: Float[Array, "L c 4 d"]
    fc_vals: Float[Array, "L c K"]  # its own event's samples (the others are masked out)
    bargs: tuple  # the lane's own values of the per-start leaves of args (L, ...)
    # with a reset map and DOPRI5: the step that fired, as the hot loop computed it (its end,
    # continuous extension and event samples), so that the service locates the event on it
    # instead of redoing the step (see serve_one)
    hit_y1: Float[Array, "L d"]
    hit_coef: Float[Array, "L 4 d"]
    hit_vals: Float[Array, "L K n"]


class _Out(NamedTuple):
    status: Int[Array, " M"]
    event: Int[Array, " M"]
    t: Float[Array, " M"]
    y: Float[Array, "M d"]
    h: Float[Array, " M"]
    k1: Float[Array, "M d"]
    sign: Float[Array, "M n"]
    count: Int[Array, "M n"]  # pyright: ignore[reportIncompatibleMethodOverride]  (tuple.count)
    t_zero: Float[Array, "M n"]
    steps: Int[Array, " M"]
    rejected: Int[Array, " M"]
    resets: Int[Array, " M"]
    aux: Float[Array, "M p"]
    fc_t: Float[Array, "M c"]
    fc_y: Float[Array, "M c d"]
    fc_h: Float[Array, "M c"]
    fc_k1: Float[Array, "M c d"]
    fc_sign: Float[Array, "M c"]
    fc_tzero: Float[Array, "M c"]
    fc_y1: Float[Array, "M c d"]
    fc_coef: Float[Array, "M c 4 d"]
    fc_vals: Float[Array, "M c K"]


_RECORD = _Out._fields

# the lane fields the reset service (serve_one) returns, in its order
_SERVED = (
    "live",
    "status",
    "event",
    "t",
    "y",
    "h",
    "k1",
    "sign",
    "count",
    "t_zero",
    "seg",
    "resets",
    "aux",
    "fc_t",
)


class _KernelProblem(NamedTuple):
    """The static parts of a solve (hashable: compiled kernels are cached on them)."""

    f: Callable
    events: EventSet
    reset: Callable | None
    n_error: int | None
    n_samples: int
    fg: Callable | None  # (f, g) at one point; None: f and events.fn called separately
    args_def: Any  # treedef of args
    batched: tuple[bool, ...]  # per leaf of args: a leading axis of N starts
    flow: Callable | None = None  # (t0, y0, t1, args) -> y1: an exact flow instead of DOPRI5
    flow_step: Callable | None = None  # (t, y, args) -> the step along the flow
    n_active: int | None = None  # components after it are constant (zero rate): not integrated
    method: str = "dopri5"  # the Runge-Kutta pair: a key of METHODS
    jump_ts: tuple[float, ...] = ()  # sorted times no step straddles (see _jump_clip)
    # the stages and the event samples in loops instead of unrolled: one copy of the field
    # and of the events per step in the program (the fused kernel, whose compile time grows
    # faster than its size); the same arithmetic
    rolled: bool = False


# The Runge-Kutta pairs of the kernel (the modules of rollax._integrate.dopri5's API), by solver name
METHODS = {"dopri5": dopri5, "dopri8": dopri8}


BACKENDS = ("auto", "queue", "fused")


def _here(x):
    """``x`` if it is a JAX array, else as a NumPy array."""
    return x if isinstance(x, jax.Array) else np.asarray(x)


def check_backend(backend) -> str:
    """The backend to use for ``backend`` (one of :data:`BACKENDS`; ``"auto"``: fused on a GPU,
    the queue elsewhere), else a ``ValueError``."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(
            f"backend = {backend!r} is not allowed: it must be one of "
            f"{', '.join(repr(b) for b in BACKENDS)}"
        )
    if backend == "auto":
        return "fused" if jax.default_backend() == "gpu" else "queue"
    return backend


def check_solver(solver) -> str:
    """``solver`` if the kernel has it (a key of :data:`METHODS`), else a ``ValueError``."""
    if not isinstance(solver, str) or solver not in METHODS:
        raise ValueError(
            f"solver = {solver!r} is not allowed: the kernel has "
            f"{', '.join(repr(m) for m in METHODS)}"
        )
    return solver


class _Fns(NamedTuple):
    """The problem's functions of ``(t, y, bargs)``: ``bargs`` are one start's per-start leaves."""

    f: Callable
    g: Callable
    fg: Callable
    args: Callable  # bargs -> the full args pytree
    flow: Callable
    flow_step: Callable


def _fns(pb: _KernelProblem, shared: tuple) -> _Fns:
    def args_of(bl):
        # both lead with a dummy leaf (see run)
        it_b, it_s = iter(bl[1:]), iter(shared[1:])
        return pb.args_def.unflatten([next(it_b) if b else next(it_s) for b in pb.batched])

    def f(t, y, bl):
        return pb.f(t, y, args_of(bl))

    def g(t, y, bl):
        return pb.events.fn(t, y, args_of(bl))

    def fg(t, y, bl):
        if pb.fg is not None:
            return pb.fg(t, y, args_of(bl))
        return f(t, y, bl), g(t, y, bl)

    def flow(t0, y0, t1, bl):
        assert pb.flow is not None  # (called along an exact flow only)
        return pb.flow(t0, y0, t1, args_of(bl))

    def flow_step(t, y, bl):
        assert pb.flow_step is not None  # (called along an exact flow only)
        return pb.flow_step(t, y, args_of(bl))

    return _Fns(f, g, fg, args_of, flow, flow_step)


def _jump_clip(jump_ts: tuple[float, ...]):
    """``(jump_after, clip)`` for the sorted ``jump_ts``, as diffrax's ``ClipStepSizeController``
    steps: ``jump_after(t)`` is the first jump time strictly after ``t`` (inf if none) and
    ``clip(t, h)`` the step from ``t`` shortened to end just before it (prevbefore). After such
    a step the lane goes on from just after the jump (nextafter) with a fresh ``k1``."""

    def jump_after(t):
        j = jnp.full_like(t, jnp.inf)
        for tj in reversed(jump_ts):
            j = jnp.where(t < tj, tj, j)
        return j

    def clip(t, h):
        if not jump_ts:
            return h
        tb = jnp.nextafter(jump_after(t), -jnp.inf)
        return jnp.where(t + h > tb, tb - t, h)

    return jump_after, clip


def _computed_once(coef):
    # Without the barrier XLA fuses the dense coefficients into every sample that reads them
    # and recomputes them there: Dopri8's six from 14 stages, per sample. Measured
    # (benchmarks/RESULTS.md) on the Fig. 11 no-slip panel with Dopri8: 4 samples a step
    # 0.207 -> 0.165 s, 12 samples 0.427 -> 0.258 s; DOPRI5's (4 from 3 stages) unchanged,
    # 0.257-0.263 s either way, and bit-identical. Not on the hybrid path (below): the mu = 1
    # panel went 3.88-3.90 -> 3.95-4.00 s with it.
    return jax.lax.optimization_barrier(coef)


def _redo(pb: _KernelProblem, fn: _Fns, bl, t, y, h, k1):
    """One step from ``(t, y)`` of length ``h``: the new state, the FSAL derivative there, the
    error norm's input, the event values at the new state, ``at(theta, time)``, the step's
    continuous extension (the Runge-Kutta pair's, or the exact flow from the step's start),
    and the pair's dense coefficients (None along an exact flow)."""
    rk = METHODS[pb.method]
    if pb.flow is not None:
        y1 = fn.flow(t, y, t + h, bl)
        return (
            y1,
            k1,
            jnp.zeros_like(y),
            fn.g(t + h, y1, bl),
            lambda theta, tt: fn.flow(t, y, tt, bl),
            None,
        )
    na = pb.n_active
    if na is None:
        y1, err, ks, _, g1 = rk.step(
            lambda t_, y_: fn.f(t_, y_, bl),
            t,
            y,
            h,
            k1,
            fg=lambda t_, y_: fn.fg(t_, y_, bl),
            rolled=pb.rolled,
        )
        coef = _computed_once(rk.dense_coefficients(y, y1, ks, h))
        return y1, ks[-1], err, g1, lambda theta, tt: rk.dense_eval(y, coef, theta), coef
    # Constant trailing components (a hybrid lane's mode) ride along instead of being
    # integrated: the stages see them unchanged, so XLA drops the field's appended zero rate
    # and the stage arithmetic of those components. Measured (benchmarks/RESULTS.md) on the
    # slipping kernel's step, 512 lanes: the adapter's append and split cost 26 of 346 us.
    ya, yc = y[:na], y[na:]
    zc = jnp.zeros_like(yc)

    def full(y_):
        return jnp.concatenate([y_, yc])

    def fg_a(t_, y_):
        f_, g_ = fn.fg(t_, full(y_), bl)
        return f_[:na], g_

    y1a, erra, ks, _, g1 = rk.step(
        lambda t_, y_: fn.f(t_, full(y_), bl)[:na], t, ya, h, k1[:na], fg=fg_a, rolled=pb.rolled
    )
    coef = jnp.concatenate(
        [rk.dense_coefficients(ya, y1a, ks, h), jnp.zeros((rk.N_COEF,) + yc.shape, y.dtype)], axis=1
    )
    return (
        full(y1a),
        jnp.concatenate([ks[-1], zc]),
        jnp.concatenate([erra, zc]),
        g1,
        lambda theta, tt: rk.dense_eval(y, coef, theta),
        coef,
    )


def _start_sign(fn: _Fns, t, y, k1, g, bl):
    """The scan's initial signs: a function exactly at zero takes the side it moves to
    (its derivative along the field), as in :func:`rollax.solve`."""
    _, dg = jax.jvp(lambda t_, y_: fn.g(t_, y_, bl), (t, y), (jnp.ones_like(t), k1))
    return jnp.where(g != 0, jnp.sign(g), jnp.sign(dg)).astype(y.dtype)


def _sample(fn: _Fns, n_samples: int, t, y, h, g1, at, bl, rolled: bool = False):
    """The event values at the step's samples ``t + h k / n_samples`` (k = 1..n_samples) on its
    continuous extension ``at(theta, time)``; the last one (the new state) is ``g1``. One
    expression for the hot loop and the root finder, so that both see the same values.
    ``rolled``: the samples in a loop (one copy of the events in the program)."""
    thetas = jnp.linspace(0.0, 1.0, n_samples + 1, dtype=y.dtype)[1:]
    times = t + thetas * h
    if rolled and n_samples > 2:

        def body(c):
            k, vals = c
            th, tt = thetas[k], times[k]
            return k + 1, jax.lax.dynamic_update_index_in_dim(vals, fn.g(tt, at(th, tt), bl), k, 0)

        vals0 = jnp.zeros((n_samples,) + g1.shape, g1.dtype).at[-1].set(g1)
        # a while loop (a fori_loop of static length would be a scan, which is unrolled)
        _, vals = jax.lax.while_loop(lambda c: c[0] < n_samples - 1, body, (jnp.int32(0), vals0))
        return vals, times
    # the continuous extension at the constant theta_k (as rollax.solve: no per-sample
    # rescaling of the time; the root finder is handed these values)
    vals = [fn.g(times[k], at(thetas[k], times[k]), bl) for k in range(n_samples - 1)]
    return jnp.stack(vals + [g1]), times


def _unresolved(fn: _Fns, n_samples: int, t, y, h, vals, at, bl):
    """:func:`rollax._core.events.unresolved_in` on the samples ``vals`` of the step from ``(t, y)``,
    with its extra sample near the end taken on the continuous extension ``at``."""
    th = near_theta(n_samples)
    tt = t + th * h
    return unresolved_in(
        vals, fn.g(t, y, bl), fn.g(tt, at(jnp.asarray(th, vals.dtype), tt), bl), t, h
    )


def _dense_at(t, h, y1, at, tt):
    # the step's end is the new state itself (not its interpolant, which differs by rounding);
    # 1 / h is computed once per step by XLA (a multiply per sample, not a divide)
    return jnp.where(tt == t + h, y1, at((tt - t) * (1.0 / h), tt))


class _Pre(NamedTuple):
    """Per-start data of one device's queue, set up once (by ``init``) and read by every slice."""

    y0s: Float[Array, "N d"]
    aux0s: Float[Array, "N p"]
    valid: Bool[Array, " N"]
    bargs: tuple  # the per-start leaves of args (leading axis N)
    order: Int[Array, " N"]  # the queue: the starts that need a solve first
    nq: Int[Array, ""]  # how many starts need a solve
    at_start: Bool[Array, " N"]  # a boundary already violated at t0
    h0: Float[Array, " N"]
    k10: Float[Array, "N d"]
    sign0: Float[Array, "N n"]


class _Carry(NamedTuple):
    """The state of one device's queue between slices (see ``_machine``)."""

    ln: _Lanes
    qp: Int[Array, ""]  # starts taken from the queue so far
    out: _Out


class _Scalars(NamedTuple):
    t0: Float[Array, ""]
    t_max: Float[Array, ""]
    rtol: Float[Array, ""]
    atol: Float[Array, ""]
    max_steps: Int[Array, ""]
    max_resets: Int[Array, ""]
    dt_max: Float[Array, ""]


def _machine(pb: _KernelProblem, lanes: int, sargs: tuple, sc: _Scalars):
    """One device's work queue as three functions (all traced inside one compiled program each),
    and the per-lane pieces they are made of (``_LaneOps``):

    * ``init(y0s, aux0s, valid, bargs) -> (pre, carry)``: per-start set-up, vectorised once,
      and empty lanes;
    * ``advance(pre, carry, budget, hold) -> (carry, left, finished)``: at most ``budget``
      iterations of the queue's loop (refill / reset service, then one step of the lanes),
      stopping where at most ``hold`` starts are left; ``left``: whether work remains,
      ``finished``: starts done so far;
    * ``records(carry) -> _Out``: the raw per-start records (``_finish`` locates the events).

    Running the loop in slices (``advance`` called until nothing is left) changes nothing in
    any lane's arithmetic: the carry goes out and comes back unchanged, so the results are
    bit-identical for any slicing; the slices give the caller progress and a point to stop.
    """
    events, reset, ne, K = pb.events, pb.reset, pb.n_error, pb.n_samples
    t0, t_max, rtol, atol, max_steps, max_resets, dt_max = sc
    fn = _fns(pb, sargs)
    n = events.n
    L = lanes
    cross = jnp.asarray(_crossings(events), jnp.int32)
    nc = len(_crossings(events))

    exact = pb.flow is not None
    # A hybrid lane keeps the step that fired for the service (a DOPRI5 step; along an exact
    # flow the 'redo' is one flow evaluation and nothing is kept), so the service locates on
    # the very samples that fired instead of redoing the step. Measured (benchmarks/RESULTS.md)
    # on the Fig. 11 mu = 1 panel, one core, a block of 32 lanes (26 parked): one service pass
    # 583 us -> 468 us (then 418 us with lanes parked at their start masked out, 310 us with
    # the start-sign jvp only for blocks that need it); one step of 512 lanes costs 535 us
    store = _keeps_steps(pb)
    rk = METHODS[pb.method]
    n_coef = rk.N_COEF if store else 0
    jump_after, clip = _jump_clip(pb.jump_ts)

    # the start: t0, or just after a jump time that t0 lies before by less than the smallest step
    t_start = past_jump(t0, pb.jump_ts) if pb.jump_ts else t0

    def first_step(t, y, k, bl):
        if exact:
            h = fn.flow_step(t, y, bl)
        else:
            h = dopri5.initial_step(
                lambda t_, y_: fn.f(t_, y_, bl), t, y, k, rtol, atol, ne, rk.ORDER
            )
        return clip(t, jnp.minimum(jnp.minimum(h, dt_max), t_max - t))

    # Per-start set-up, vectorised once: event values and their signs, k1, the first step, and
    # the start itself (moved over a jump time's gap: below).
    def setup(y, bl):
        sign_o = moved = None
        if pb.jump_ts:
            # a start within the smallest step before a jump time (past_jump) goes on from just
            # after it, moved there by one Euler step; the scan's signs are those of the start
            # itself, so that a crossing inside that gap is seen by the first step (and located
            # at its start, events.locate_in_step) instead of dropped (rollax.solve: the same)
            k_o, g_o = fn.fg(t0, y, bl)
            sign_o = _start_sign(fn, t0, y, k_o, g_o, bl)
            dt = t_start - t0
            moved = dt > 0
            y = jnp.where(moved, y + jnp.where(moved, dt, 0.0) * k_o, y)
        k, g = fn.fg(t_start, y, bl)
        bad = ~jnp.all(jnp.isfinite(g)) | ~jnp.all(jnp.isfinite(y)) | ~jnp.all(jnp.isfinite(k))
        sign = _start_sign(fn, t_start, y, k, g, bl)
        if moved is not None and sign_o is not None:
            sign = jnp.where(moved, sign_o, sign)
        return g, k, first_step(t_start, y, k, bl), sign, bad, y

    def blank(K_, d, dtype):
        # per-record arrays shared by the lanes and the records: crossings and their steps
        return dict(
            event=jnp.full((K_,), -1, jnp.int32),
            k1=jnp.zeros((K_, d), dtype),
            sign=jnp.zeros((K_, n), dtype),
            count=jnp.zeros((K_, n), jnp.int32),
            t_zero=jnp.full((K_, n), jnp.nan, dtype),
            steps=jnp.zeros((K_,), jnp.int32),
            rejected=jnp.zeros((K_,), jnp.int32),
            resets=jnp.zeros((K_,), jnp.int32),
            fc_t=jnp.full((K_, nc), jnp.nan, dtype),
            fc_y=jnp.zeros((K_, nc, d), dtype),
            fc_h=jnp.zeros((K_, nc), dtype),
            fc_k1=jnp.zeros((K_, nc, d), dtype),
            fc_sign=jnp.zeros((K_, nc), dtype),
            fc_tzero=jnp.full((K_, nc), jnp.nan, dtype),
            fc_y1=jnp.zeros((K_, nc, d if store else 0), dtype),
            fc_coef=jnp.zeros((K_, nc, n_coef, d), dtype),
            fc_vals=jnp.zeros((K_, nc, K if store else 0), dtype),
        )

    def init(y0s, aux0s, valid, bargs):
        N, d = y0s.shape
        dtype = y0s.dtype
        g0, k10, h0, sign0, bad0, y0s = jax.vmap(setup)(y0s, bargs)
        # A boundary already violated at t0: without a reset map the start needs no solve;
        # with one it enters parked, at a step of length 0. A non-finite start fails at once.
        at_start = (
            jax.vmap(events.fired_at_start)(g0, sign0).any(axis=1) if n else jnp.zeros(N, bool)
        )
        needs = valid & ~bad0 & (~at_start if reset is None else True)
        order = jnp.argsort(~needs, stable=True).astype(jnp.int32)
        nq = jnp.sum(needs).astype(jnp.int32)
        # Records, with one spare row (index N) that absorbs the writes of empty lanes.
        M = N + 1
        first_status = jnp.where(at_start, _PENDING, T_MAX) if reset is None else T_MAX
        first_status = jnp.where(bad0, FAILED_NAN, first_status)
        out = _Out(
            status=jnp.concatenate(
                [jnp.where(valid, first_status, PADDING), jnp.array([PADDING])]
            ).astype(jnp.int32),
            t=jnp.full((M,), t_start, dtype),
            y=jnp.concatenate([y0s, jnp.zeros((1, d), dtype)]),
            h=jnp.zeros((M,), dtype),  # starts that end at t0: a pending 'step' with h = 0
            aux=jnp.concatenate([aux0s, jnp.zeros((1,) + aux0s.shape[1:], dtype)]),
            **blank(M, d, dtype),
        )
        ln = _Lanes(
            idx=jnp.full((L,), -1, jnp.int32),
            live=jnp.zeros((L,), bool),
            status=jnp.zeros((L,), jnp.int32),
            t=jnp.full((L,), t_start, dtype),
            y=jnp.zeros((L, d), dtype),
            h=jnp.ones((L,), dtype),
            seg=jnp.zeros((L,), jnp.int32),
            aux=jnp.zeros((L,) + aux0s.shape[1:], dtype),
            bargs=tuple(jnp.broadcast_to(b[:1], (L,) + b.shape[1:]) for b in bargs),
            hit_y1=jnp.zeros((L, d if store else 0), dtype),
            hit_coef=jnp.zeros((L, n_coef, d), dtype),
            hit_vals=jnp.zeros((L, K if store else 0, n), dtype),
            **blank(L, d, dtype),
        )
        pre = _Pre(y0s, aux0s, valid, bargs, order, nq, at_start, h0, k10, sign0)
        return pre, _Carry(ln, jnp.int32(0), out)

    flush = _flush

    def records(carry: _Carry) -> _Out:
        return flush(carry.ln, carry.out)[1]

    def lane_mask(m, x):
        return m.reshape(m.shape + (1,) * (x.ndim - 1))

    def refill(pre: _Pre, carry: _Carry) -> _Carry:
        ln, qp, out = carry
        ln, out = flush(ln, out)
        N = pre.y0s.shape[0]
        free = ln.idx < 0
        rank = jnp.cumsum(free) - 1
        take = free & (qp + rank < pre.nq)
        src = pre.order[jnp.clip(qp + rank, 0, N - 1)]
        tk = take[:, None]
        parked = take & pre.at_start[src] if reset is not None else jnp.zeros_like(take)
        ln = ln._replace(
            idx=jnp.where(take, src, ln.idx),
            live=ln.live | (take & ~parked),
            status=jnp.where(take, jnp.where(parked, _PARKED, _LIVE), ln.status),
            event=jnp.where(take, -1, ln.event),
            t=jnp.where(take, t_start, ln.t),
            y=jnp.where(tk, pre.y0s[src], ln.y),
            h=jnp.where(take, jnp.where(parked, 0.0, pre.h0[src]), ln.h),
            k1=jnp.where(tk, pre.k10[src], ln.k1),
            sign=jnp.where(tk, pre.sign0[src], ln.sign),
            count=jnp.where(tk, 0, ln.count),
            t_zero=jnp.where(tk, jnp.nan, ln.t_zero),
            steps=jnp.where(take, 0, ln.steps),
            rejected=jnp.where(take, 0, ln.rejected),
            seg=jnp.where(take, 0, ln.seg),
            resets=jnp.where(take, 0, ln.resets),
            aux=jnp.where(lane_mask(take, ln.aux), pre.aux0s[src], ln.aux),
            fc_t=jnp.where(tk, jnp.nan, ln.fc_t),
            bargs=tuple(
                jnp.where(lane_mask(take, a), b[src], a) for a, b in zip(ln.bargs, pre.bargs)
            ),
        )
        return _Carry(ln, qp + jnp.sum(take).astype(jnp.int32), out)

    def serve_one(
        t, y, h, k1, sign, count, t_zero, steps, resets, aux, fc_t, hit_y1, hit_coef, hit_vals, *bl
    ):
        # Locate the event of a parked lane (h = 0: it fired at the state itself) on the step
        # that fired (kept by the hot loop, or redone) and apply the reset map; serve_end sets
        # up the next segment once the new state's scan signs are known (serve_block).
        g_here = fn.g(t, y, bl)
        at0 = h == 0.0
        # (a lane parked at its start has its scan signs there: those of refill or serve_block)
        e0 = jnp.argmax(events.fired_at_start(g_here, sign)).astype(jnp.int32)
        # a lane parked at its start has no step to search: all events masked, so that its
        # (vmapped) root finder stops at once instead of running on a meaningless bracket
        loc, y_at = _locate(
            pb,
            fn,
            bl,
            t,
            y,
            jnp.where(at0, 1.0, h),
            k1,
            sign,
            count,
            t_zero,
            event_mask=jnp.broadcast_to(~at0, (n,)),
            stored=(hit_y1, hit_coef, hit_vals) if store else None,
        )
        e = jnp.where(at0, e0, loc.event)
        te = jnp.where(at0, t, loc.t)
        ye = jnp.where(at0, y, y_at)
        assert reset is not None  # (lanes are parked and served with a reset map only)
        t_n, y_n, aux_n, term = reset(te, ye, aux, e, fn.args(bl))
        term = jnp.asarray(term, bool)
        lost = ~at0 & ~loc.found  # cannot happen (the step that fired): reported if it does
        jumped = ~at0 & loc.jumped  # the root is a jump of its function, not a zero
        k1_n, g_n = fn.fg(t_n, y_n, bl)
        # a terminal event keeps the segment's crossings (those before the root and the
        # ending one); a new segment starts afresh
        count_n = jnp.where(term, jnp.where(at0, 0, loc.count), 0)
        return (t_n, y_n, aux_n, term, lost, jumped, k1_n, g_n, e, te, count_n.astype(count.dtype))

    def serve_end(
        t_n, y_n, aux_n, term, lost, jumped, k1_n, g_n, e, te, count_n, sign_n, resets, fc_t, *bl
    ):
        # the status of a served lane and its next segment, from the new state's scan signs
        # (the segment's crossings and first crossings stay with a terminal reset, jumped or not)
        fc_n = jnp.where(term, fc_t, jnp.nan)
        term = term & ~lost & ~jumped
        bad = (
            ~jnp.all(jnp.isfinite(g_n)) | ~jnp.all(jnp.isfinite(y_n)) | ~jnp.all(jnp.isfinite(k1_n))
        )
        fires = events.fired_at_start(g_n, sign_n)
        again = ~term & jnp.any(fires)
        # the event that was just served fires again at once, at its own time: the reset map
        # left the state where it fires (rollax.solve: the same)
        repeated = again & fires[e] & (t_n == te)
        resets_n = resets + jnp.where(term | lost | jumped, 0, 1)
        over = ~term & ~again & (t_n >= t_max)
        capped = ~term & (resets_n > max_resets)
        status = jnp.select(
            [lost, jumped, term, capped, bad, repeated, again, over],
            [FAILED_NAN, DISCONTINUOUS, EVENT, FAILED_STEPS, FAILED_NAN, REPEATED, _PARKED, T_MAX],
            _LIVE,
        )
        ends = (status == EVENT) | (status == DISCONTINUOUS) | (status == REPEATED)
        h_n = jnp.where(again | bad, 0.0, first_step(t_n, y_n, k1_n, bl))
        return (
            status == _LIVE,
            status.astype(jnp.int32),
            jnp.where(ends, e, -1),
            t_n,
            y_n,
            h_n,
            k1_n,
            sign_n,
            count_n,
            jnp.full_like(g_n, jnp.nan),
            resets_n,
            aux_n,
            fc_n,
        )

    def serve_block(*xs):
        # serve_one on a block of lanes, then serve_end; the new segments' scan signs need
        # the event functions' derivative only where one is exactly zero, so the jvp runs
        # only for a block that has one (it was 13 % of a service pass)
        t_n, y_n, aux_n, term, lost, jumped, k1_n, g_n, e, te, count_n = jax.vmap(serve_one)(*xs)
        bl = xs[14:]
        sign_n = jax.lax.cond(
            jnp.any(g_n == 0),
            lambda: jax.vmap(lambda t_, y_, k_, g_, *b: _start_sign(fn, t_, y_, k_, g_, b))(
                t_n, y_n, k1_n, g_n, *bl
            ),
            lambda: jnp.sign(g_n).astype(g_n.dtype),
        )
        res = jax.vmap(serve_end)(
            t_n,
            y_n,
            aux_n,
            term,
            lost,
            jumped,
            k1_n,
            g_n,
            e,
            te,
            count_n,
            sign_n,
            xs[8],
            xs[10],
            *bl,
        )
        steps = xs[7]
        # (the order of _SERVED: steps is kept as it is)
        return res[:10] + (steps,) + res[10:]

    def serve(carry: _Carry) -> _Carry:
        ln = carry.ln
        parked = (ln.idx >= 0) & ~ln.live & (ln.status == _PARKED)
        names = _SERVED
        res = _blocked(
            serve_block,
            parked,
            max(16, L // 16),
            (
                ln.t,
                ln.y,
                ln.h,
                ln.k1,
                ln.sign,
                ln.count,
                ln.t_zero,
                ln.steps,
                ln.resets,
                ln.aux,
                ln.fc_t,
                ln.hit_y1,
                ln.hit_coef,
                ln.hit_vals,
            )
            + tuple(ln.bargs),
            tuple(getattr(ln, k) for k in names),
            batched=True,
        )
        return carry._replace(ln=ln._replace(**dict(zip(names, res))))

    stop_status = _PENDING if reset is None else _PARKED

    def lane_step(t, y, h, k1, sign, count, t_zero, bl):
        # one DOPRI5 step (or one along the exact flow), its error norm and the scan of its
        # samples
        y1, k7, err, g1, at, coef = _redo(pb, fn, bl, t, y, h, k1)
        en = jnp.zeros((), y.dtype) if exact else dopri5.error_norm(err, y, y1, rtol, atol, ne)
        vals, times = _sample(fn, K, t, y, h, g1, at, bl, pb.rolled)
        sc = scan(events, vals, times, sign, count, t_zero)
        if exact:
            h_next = fn.flow_step(t + h, y1, bl)
        else:
            h_next = jnp.zeros((), y.dtype)
            # samples that may hide a pair of crossings: the step is rejected (shrunk to 0.2 h)
            # as one with a non-finite error, in rollax.solve too (events.unresolved)
            if events.n:
                en = jnp.where(_unresolved(fn, K, t, y, h, vals, at, bl), jnp.inf, en)
        if store:
            assert coef is not None  # (store: DOPRI5 steps, which have dense coefficients)
            kept = (coef, vals)
        else:
            kept = (jnp.zeros((0, y.shape[0]), y.dtype), jnp.zeros((0, vals.shape[1]), y.dtype))
        return (y1, k7, en, sc.fired, sc.sign, sc.count, sc.t_zero, sc.nonfinite, h_next) + kept

    def own_vals(vals):
        # (L, K, n) -> (L, nc, K): each crossing event's own samples, all that its first
        # crossing's search reads (_finish masks the other events out). A lane keeps nc K
        # numbers for them instead of nc K n: the shot's lane 732 -> 508 numbers, which the
        # fused kernels load and store whole (docs/fused.md)
        if not nc:
            return jnp.zeros(vals.shape[:1] + (0, vals.shape[1]), vals.dtype)
        return jnp.stack([vals[:, :, e] for e in _crossings(events)], axis=1)

    def step_lanes(ln: _Lanes) -> _Lanes:
        # one attempted step of every live lane (any number of lanes)
        live = ln.live
        y1, k7, en, fired, sign2, count2, tzero2, bad_g, h_flow, coef, vals = jax.vmap(lane_step)(
            ln.t, ln.y, ln.h, ln.k1, ln.sign, ln.count, ln.t_zero, ln.bargs
        )
        finite = jnp.isfinite(en) & jnp.all(jnp.isfinite(y1), axis=1)
        accept = live & finite & (en <= 1.0)
        bad_ev = accept & bad_g  # a non-finite event value ends the start (after the step)
        hit = accept & ~bad_ev & jnp.any(fired, axis=1)
        go = accept & ~hit & ~bad_ev
        moved = go | bad_ev
        t1 = ln.t + ln.h
        t_new = jnp.where(moved, t1, ln.t)
        if pb.jump_ts:
            # a step that ended just before a jump time (clipped there): on from just after it,
            # where the field is evaluated afresh (diffrax's made_jump)
            jt = jump_after(ln.t)
            jumped = moved & (t1 >= jnp.nextafter(jnp.nextafter(jt, -jnp.inf), -jnp.inf))
            t_new = jnp.where(jumped, jnp.nextafter(jt, jnp.inf), t_new)
            k7 = jax.lax.cond(
                jnp.any(jumped),
                lambda: jnp.where(jumped[:, None], jax.vmap(fn.f)(t_new, y1, ln.bargs), k7),
                lambda: k7,
            )
        at_end = go & (t_new >= t_max)
        steps = ln.steps + live.astype(jnp.int32)

        # First crossings: remember the step that holds them, to locate them afterwards (also
        # in the step that holds the terminal event: one may come before its root).
        first = accept[:, None] & (ln.count[:, cross] == 0) & (count2[:, cross] > 0)
        fk = first[:, :, None]

        # Step-size control (elementary controller with safety 0.9, factor in [0.2, 10]).
        fac = dopri5.step_factor(en, finite, accept, rk.ORDER)
        h_new = clip(
            t_new, jnp.minimum(jnp.minimum(h_flow if exact else ln.h * fac, dt_max), t_max - t_new)
        )
        # a hit keeps its step (it is redone to locate the event); finished lanes keep theirs
        h_new = jnp.where(hit | ~live, ln.h, h_new)
        tiny = ~(ln.h >= 1e-14 * jnp.maximum(1.0, jnp.abs(ln.t)))  # a NaN step too
        nan_fail = bad_ev | (live & (~jnp.all(jnp.isfinite(ln.y), axis=1) | tiny))
        step_fail = live & ~nan_fail & ~hit & ~at_end & (steps - ln.seg >= max_steps)
        done = hit | at_end | nan_fail | step_fail
        status = jnp.select(
            [nan_fail, hit, at_end], [FAILED_NAN, stop_status, T_MAX], FAILED_STEPS
        ).astype(jnp.int32)
        gk = go[:, None]
        mk = moved[:, None]  # a failed step's samples count, as in rollax.solve
        return ln._replace(
            live=live & ~done,
            status=jnp.where(done, status, ln.status),
            t=t_new,
            y=jnp.where(moved[:, None], y1, ln.y),
            h=h_new,
            k1=jnp.where(gk, k7, ln.k1),
            sign=jnp.where(mk, sign2, ln.sign),
            count=jnp.where(mk, count2, ln.count),
            t_zero=jnp.where(mk, tzero2, ln.t_zero),
            steps=steps,
            rejected=ln.rejected + (live & ~accept).astype(jnp.int32),
            fc_t=jnp.where(first, ln.t[:, None], ln.fc_t),
            fc_y=jnp.where(fk, ln.y[:, None, :], ln.fc_y),
            fc_h=jnp.where(first, ln.h[:, None], ln.fc_h),
            fc_k1=jnp.where(fk, ln.k1[:, None, :], ln.fc_k1),
            fc_sign=jnp.where(first, ln.sign[:, cross], ln.fc_sign),
            fc_tzero=jnp.where(first, ln.t_zero[:, cross], ln.fc_tzero),
            fc_y1=jnp.where(fk, y1[:, None, : ln.fc_y1.shape[2]], ln.fc_y1),
            fc_coef=jnp.where(fk[..., None], coef[:, None], ln.fc_coef),
            fc_vals=jnp.where(fk, own_vals(vals[:, : ln.fc_vals.shape[2]]), ln.fc_vals),
            hit_y1=jnp.where(hit[:, None], y1[:, : ln.hit_y1.shape[1]], ln.hit_y1),
            hit_coef=jnp.where(hit[:, None, None], coef, ln.hit_coef),
            hit_vals=jnp.where(hit[:, None, None], vals, ln.hit_vals),
        )

    # The tail: once the queue is empty and few lanes are live (a few long runs), step only
    # the first S lanes, the live ones moved there, instead of paying for all L. Measured
    # (benchmarks/RESULTS.md): the Fig. 11 no-slip panel 0.237 -> 0.230 s with it; the mu = 1
    # panel (a reset map) unchanged (4.12-4.28 s with, 4.18-4.24 s without), and there the
    # second copy of the step costs 6 s of compile (17.2 -> 11.2 s), so a hybrid kernel has none.
    S = max(16, L // 16) if reset is None else L

    def narrow_step(ln: _Lanes) -> _Lanes:
        order = jnp.argsort(~ln.live, stable=True)
        ln = jax.tree_util.tree_map(lambda a: a[order], ln)
        head = step_lanes(jax.tree_util.tree_map(lambda a: a[:S], ln))
        return jax.tree_util.tree_map(lambda a, b: a.at[:S].set(b), ln, head)

    def parked_any(ln):
        return jnp.any((ln.idx >= 0) & ~ln.live & (ln.status == _PARKED))

    def left(pre: _Pre, carry: _Carry):
        return jnp.any(carry.ln.live) | (carry.qp < pre.nq) | parked_any(carry.ln)

    def rest(pre: _Pre, carry: _Carry):
        # starts not finished: those in the queue and those the lanes hold (live or parked)
        ln = carry.ln
        return (pre.nq - carry.qp) + jnp.sum((ln.idx >= 0) & (ln.live | (ln.status == _PARKED)))

    def advance(pre: _Pre, carry: _Carry, budget, hold):
        # refill (and serve the parked lanes) once a sixteenth of the lanes is idle -- at the
        # first iteration all are -- then one step of the live lanes; the loop stops after
        # ``budget`` iterations, or where at most ``hold`` starts are left (0: never), an
        # iteration that depends on no timing (run() moves the tail to a narrow kernel there)
        def body(c):
            carry, it = c
            ln, qp = carry.ln, carry.qp
            n_idle = jnp.sum(~ln.live)
            pending = qp < pre.nq
            if reset is not None:
                pending = pending | parked_any(ln)
            need = pending & ((n_idle >= max(1, L // 16)) | (n_idle == L))
            if reset is None:
                carry = jax.lax.cond(need, lambda c_: refill(pre, c_), lambda c_: c_, carry)
            else:
                carry = jax.lax.cond(need, lambda c_: refill(pre, serve(c_)), lambda c_: c_, carry)
            ln = carry.ln
            if S < L:
                narrow = (carry.qp >= pre.nq) & (jnp.sum(ln.live) <= S)
                ln = jax.lax.cond(narrow, narrow_step, step_lanes, ln)
            else:
                ln = step_lanes(ln)
            return carry._replace(ln=ln), it + 1

        carry, _ = jax.lax.while_loop(
            lambda c: left(pre, c[0]) & (c[1] < budget) & (rest(pre, c[0]) > hold),
            body,
            (carry, jnp.int32(0)),
        )
        finished = jnp.sum(pre.valid) - rest(pre, carry)
        return carry, left(pre, carry), finished.astype(jnp.int32)

    # the per-lane pieces, for the fused path (rollax._integrate._fused runs one start per lane with them)
    lane = _LaneOps(setup, step_lanes, serve_block, blank, store, n_coef, t_start)
    return init, advance, records, lane


class _LaneOps(NamedTuple):
    """The queue's per-lane pieces (see ``_machine``), which :mod:`rollax._integrate._fused` reuses to run
    one start per lane with the same arithmetic."""

    setup: Callable  # (y, bl) -> (g, k1, h, sign, bad, y) at the start (t0 or past a jump)
    step_lanes: Callable  # _Lanes -> _Lanes: one attempted step of the live lanes
    serve_block: Callable  # the reset service of a block of parked lanes
    blank: Callable  # (K, d, dtype) -> the per-record crossing fields, empty
    store: bool  # the lanes keep the steps that fire (see _keeps_steps)
    n_coef: int
    t_start: Any  # the start time (t0, or past a jump time's gap: setup)


def _flush(ln: _Lanes, out: _Out) -> tuple[_Lanes, _Out]:
    """Finished lanes write their records and are freed (the others write to the spare row)."""
    N = out.t.shape[0] - 1
    done = (ln.idx >= 0) & ~ln.live & (ln.status != _PARKED)
    w = jnp.where(done, ln.idx, N)
    out = _Out(*(getattr(out, k).at[w].set(getattr(ln, k)) for k in _RECORD))
    return ln._replace(idx=jnp.where(done, -1, ln.idx)), out


def _narrowed(carry: _Carry, width: int) -> _Carry:
    """``carry`` on ``width`` lanes: finished lanes' records written, the lanes holding a start
    (live or parked: at most ``width``, the caller checks) moved to the front and kept."""
    ln, out = _flush(carry.ln, carry.out)
    order = jnp.argsort(ln.idx < 0, stable=True)
    ln = jax.tree_util.tree_map(lambda a: a[order][:width], ln)
    return _Carry(ln, carry.qp, out)


@functools.lru_cache(maxsize=32)
def _shrinker(width: int, n_dev: int) -> Callable:
    def shrink(carry):
        return _narrowed(carry, width)

    # (no donation: the L-lane arrays cannot hold the L/16-lane ones; JAX warned it)
    return _program(shrink, 1, n_dev)


def _keeps_steps(pb: _KernelProblem) -> bool:
    """Whether lanes keep the steps that fire and those that hold first crossings (a reset map
    and DOPRI5; along an exact flow a redo is one flow evaluation), so that the service and the
    post-pass locate on them instead of redoing them."""
    return pb.reset is not None and pb.flow is None


def _crossings(events: EventSet) -> tuple[int, ...]:
    """Indices of the crossing events (each has a first-crossing slot)."""
    return tuple(i for i, k in enumerate(events.kinds) if k == CROSSING)


def _locate(
    pb: _KernelProblem,
    fn: _Fns,
    bl: tuple,
    t: Float[Array, ""],
    y: Float[Array, " d"],
    h: Float[Array, ""],
    k1: Float[Array, " d"],
    sign: Float[Array, " n"],
    count: Int[Array, " n"],
    t_zero: Float[Array, " n"],
    targets: Int[Array, " n"] | None = None,
    event_mask: Bool[Array, " n"] | None = None,
    stored: tuple | None = None,
) -> tuple[Located, Float[Array, " d"]]:
    """Redo the step ``(t, y, h)`` (from the ``k1`` the kernel used) and locate the earliest
    firing root of the events on its dense output with :func:`rollax._core.events.locate_in_step`,
    from the scan state ``(sign, count, t_zero)`` before the step. ``stored``: the step's
    ``(y1, dense coefficients, sampled event values)`` as the hot loop computed them (DOPRI5
    only); then the step is not redone. Returns the location and the interpolated state at
    the root."""
    events, K = pb.events, pb.n_samples
    t_end = t + h
    if stored is not None:
        y1, coef, vals = stored
        g1 = vals[-1]
        at = lambda theta, tt: METHODS[pb.method].dense_eval(y, coef, theta)  # noqa: E731
    else:
        y1, _, _, g1, at, _ = _redo(pb, fn, bl, t, y, h, k1)
        vals, _ = _sample(fn, K, t, y, h, g1, at, bl, pb.rolled)

    def g_at(tt):
        # the new state's values are those of the step's last stage, as in the hot loop
        return jnp.where(tt == t_end, g1, fn.g(tt, _dense_at(t, h, y1, at, tt), bl))

    loc = locate_in_step(events, g_at, t, h, K, sign, count, t_zero, targets, event_mask, vals=vals)
    return loc, _dense_at(t, h, y1, at, loc.t)


def _own_column(vals: Float[Array, " K"], e: int, n: int) -> Float[Array, "K n"]:
    """The samples ``(K, n)`` of a first crossing's search from its own event's ``vals`` (the
    lanes keep no others: step_lanes' ``own_vals``): the other events, masked out of the
    search, read zeros."""
    zero = jnp.zeros_like(vals)
    return jnp.stack([vals if i == e else zero for i in range(n)], axis=1)


def _blocked(fn, mask: Bool[Array, " M"], block: int, inputs, outputs, batched: bool = False):
    """Apply ``fn`` (vmapped) only to the entries selected by ``mask``, ``block`` at a time.

    ``outputs`` are the default per-entry values (leading axis M). The cost scales with the
    number of selected entries, not with M, which matters because most starts need no root
    finding. ``batched``: ``fn`` already takes a block of entries (it is not vmapped).
    """
    M = mask.shape[0]
    order = jnp.argsort(~mask, stable=True)
    order = jnp.concatenate([order, jnp.full((block,), M - 1, order.dtype)])
    count = jnp.sum(mask)
    vfn = fn if batched else jax.vmap(fn)

    def body(b, outs):
        idx = jax.lax.dynamic_slice(order, (b * block,), (block,))
        ok = b * block + jnp.arange(block) < count
        res = vfn(*(x[idx] for x in inputs))
        w = jnp.where(ok, idx, M)  # out of range: dropped
        return tuple(o.at[w].set(r, mode="drop") for o, r in zip(outs, res))

    n_blocks = (count + block - 1) // block
    return jax.lax.fori_loop(0, n_blocks, body, tuple(outputs))


def _masked(fn, mask: Bool[Array, " M"], block: int, inputs, outputs):
    """``_blocked`` without the sort: ``fn`` on every entry, told by ``sel`` whether it is
    selected (it must then cost little), the unselected entries keeping ``outputs``."""
    res = jax.vmap(lambda m, *xs: fn(*xs, sel=m))(mask, *inputs)
    return tuple(
        jnp.where(mask.reshape(mask.shape + (1,) * (o.ndim - 1)), r, o)
        for r, o in zip(res, outputs)
    )


def _finish(
    pb: _KernelProblem,
    out: _Out,
    bargs: tuple,
    sargs: tuple,
    block: int = 512,
    direct: bool = False,
) -> tuple[
    Int[Array, " M"],
    Int[Array, " M"],
    Float[Array, " M"],
    Float[Array, "M d"],
    Int[Array, "M n"],
    Float[Array, "M n"],
]:
    """Post-pass: locate the ending event of every pending start (no reset map), and the
    first crossings of the crossing events, on the dense output of the step that holds them
    (``bargs``: the per-start leaves of args, one row per record). ``direct``: every record is
    searched in place, the unselected ones with all events masked out so that their root
    finder stops at once (the fused path: one record per start, no sorting)."""
    events = pb.events
    blocked = _masked if direct else _blocked
    fn = _fns(pb, sargs)
    n = events.n
    M = out.t.shape[0]
    if n == 0:  # no events: nothing to locate
        return (out.status, out.event, out.t, out.y, out.count, jnp.zeros((M, 0), out.t.dtype))
    if pb.reset is None:
        pending = out.status == _PENDING
        at_start = pending & (out.h == 0.0)  # ended at the very start: no step to search

        # Starts that ended at t0: the first boundary already violated there.
        def fired0(t, y, *bl):
            k, g = fn.fg(t, y, bl)
            return events.fired_at_start(g, _start_sign(fn, t, y, k, g, bl))

        e0 = jnp.argmax(jax.vmap(fired0)(out.t, out.y, *bargs), axis=1).astype(jnp.int32)

        def end_one(t, y, h, k1, sign, count, t_zero, *bl, sel=True):
            loc, y_at = _locate(
                pb, fn, bl, t, y, h, k1, sign, count, t_zero, event_mask=jnp.broadcast_to(sel, (n,))
            )
            # a root that the redone step does not show (rounding): reported as a failure
            status = jnp.where(loc.jumped, DISCONTINUOUS, EVENT)
            return loc.event, loc.t, y_at, loc.count, jnp.where(loc.found, status, FAILED_NAN)

        event, t_end, y_end, counts, status = blocked(
            end_one,
            pending & ~at_start,
            block,
            (out.t, out.y, out.h, out.k1, out.sign, out.count, out.t_zero) + tuple(bargs),
            (
                jnp.where(at_start, e0, out.event),
                out.t,
                out.y,
                out.count,
                jnp.where(pending, EVENT, out.status),
            ),
        )
    else:
        # with a reset map the service located every event in the loop: nothing is pending
        # (not compiling this search: the mu = 1 kernel's finish program 8.6 -> 6.1 s compile)
        event, t_end, y_end, counts, status = out.event, out.t, out.y, out.count, out.status

    # First crossings (only of crossing events, only where one was seen).
    ended = status == EVENT
    t_first = jnp.full((M, n), jnp.nan, out.t.dtype)
    # a hybrid kernel kept the steps that hold them (as the steps that fire): no redo, so no
    # copy of the step in this program (the mu = 1 kernel's finish program 6.1 -> 1.5 s
    # compile; its warm time unchanged)
    stored = _keeps_steps(pb)
    for c, e in enumerate(_crossings(events)):
        only = jnp.arange(n) == e

        def first_one(t, y, h, k1, sign_e, tzero_e, y1, coef, vals, *bl, only=only, sel=True):
            # the other events are masked out; this one fires at its first crossing
            loc, _ = _locate(
                pb,
                fn,
                bl,
                t,
                y,
                h,
                k1,
                jnp.where(only, sign_e, 0.0),
                jnp.zeros(n, jnp.int32),
                jnp.where(only, tzero_e, jnp.nan),
                targets=only.astype(jnp.int32),
                event_mask=only & sel,
                stored=(y1, coef, _own_column(vals, e, n)) if stored else None,
            )
            return (jnp.where(loc.found, loc.t, jnp.nan),)

        seen = jnp.isfinite(out.fc_t[:, c])
        (tf,) = blocked(
            first_one,
            seen,
            block,
            (
                out.fc_t[:, c],
                out.fc_y[:, c],
                out.fc_h[:, c],
                out.fc_k1[:, c],
                out.fc_sign[:, c],
                out.fc_tzero[:, c],
                out.fc_y1[:, c],
                out.fc_coef[:, c],
                out.fc_vals[:, c],
            )
            + tuple(bargs),
            (t_first[:, e],),
        )
        # one seen in the ending step after the root does not count; the crossing that ends
        # the run is the first when none was seen before it
        tf = jnp.where(ended & (tf > t_end), jnp.nan, tf)
        end_first = ended & (event == e) & (counts[:, e] == 1)
        tf = jnp.where(jnp.isnan(tf) & end_first, t_end, tf)
        t_first = t_first.at[:, e].set(tf)
    return status, event, t_end, y_end, counts, t_first


def _shardy_workaround():
    """``jax._src.config.use_shardy_partitioner`` on jax >= 0.11, else None (see _compiled)."""
    version = tuple(int(p) for p in jax.__version__.split(".")[:2])
    if version < (0, 11):
        return None
    try:
        from jax._src.config import use_shardy_partitioner
    except ImportError:  # pragma: no cover - a jax without the switch
        return None
    return use_shardy_partitioner


_shardy_off = _shardy_workaround()


def _cpp_log_level(level: int) -> None:
    """Set XLA's minimum C++ log level (2: errors only), where this jax can."""
    try:
        from jax._src.lib import utils  # pyright: ignore[reportPrivateImportUsage]  (guarded)

        utils.absl_set_min_log_level(level)
    except (ImportError, AttributeError):  # pragma: no cover - another jaxlib
        pass


class _Kernel(NamedTuple):
    """The compiled programs of one problem (see ``_machine``); each takes and returns arrays
    with a leading device axis (sharded over the devices when there are several)."""

    init: Callable  # (y0s, aux0s, valid, bargs, sargs, scalars) -> (pre, carry)
    advance: Callable  # (pre, carry, sargs, scalars, budget, hold) -> (carry, left, finished)
    finish: Callable  # (pre, carry, sargs, scalars) -> the per-start results


@functools.lru_cache(maxsize=32)
def _compiled(pb: _KernelProblem, lanes: int, n_dev: int) -> _Kernel:
    def machine(sargs, sc):
        return _machine(pb, lanes, sargs, _Scalars(*sc))

    def init(y0s, aux0s, valid, bargs, sargs, sc):
        return machine(sargs, sc)[0](y0s, aux0s, valid, bargs)

    def advance(pre, carry, sargs, sc, budget, hold):
        return machine(sargs, sc)[1](pre, carry, budget, hold)

    def finish(pre, carry, sargs, sc):
        out = machine(sargs, sc)[2](carry)
        # one spare row of the per-start leaves for the spare record
        brec = tuple(jnp.concatenate([b, b[:1]]) for b in pre.bargs)
        status, event, t, y, counts, t_first = _finish(pb, out, brec, sargs)
        return (
            status[:-1],
            event[:-1],
            t[:-1],
            y[:-1],
            counts[:-1],
            t_first[:-1],
            out.steps[:-1],
            out.resets[:-1],
            out.aux[:-1],
            out.rejected[:-1],
        )

    return _Kernel(
        _program(init, 4, n_dev, place=True),
        _program(advance, 2, n_dev, donate=(1,)),
        _program(finish, 2, n_dev),
    )


def _program(
    fn: Callable, n_split: int, n_dev: int, donate: tuple = (), place: bool = False
) -> Callable:
    """``fn`` compiled for ``n_dev`` devices: its first ``n_split`` arguments (and all its
    results) carry a leading device axis, one entry per device; the others are shared.
    ``place``: the arguments come from the host and are dealt to the devices as they enter
    (the other programs take the arrays the previous one left on the devices)."""

    def block(*args):
        # the arrays dealt to one device: a leading axis of length 1
        first = functools.partial(jax.tree.map, lambda x: x[0])
        out = fn(*(first(a) for a in args[:n_split]), *args[n_split:])
        return jax.tree.map(lambda x: x[None], out)

    n_args = len(inspect.signature(fn).parameters)
    if n_dev == 1:  # a GPU, or one CPU device: no partitioner at all
        return jax.jit(block, donate_argnums=donate)
    # One independent queue per device: shard_map over a one-axis mesh, no collectives.
    mesh = jax.sharding.Mesh(np.array(jax.local_devices()[:n_dev]), ("d",))
    P = jax.sharding.PartitionSpec
    spec = (P("d"),) * n_split + (P(),) * (n_args - n_split)
    kernel = jax.jit(
        jax.shard_map(block, mesh=mesh, in_specs=spec, out_specs=P("d"), check_vma=False),
        in_shardings=(tuple(jax.sharding.NamedSharding(mesh, s) for s in spec) if place else None),
        donate_argnums=donate,
    )
    shardy_off = _shardy_off
    if shardy_off is None:
        return kernel

    def call(*args):
        # jax 0.11's Shardy partitioner segfaults compiling this kernel for several CPU
        # devices (its unused-inputs canonicalisation, on the zero-sized arrays that a system
        # without crossing events or aux data has); the GSPMD partitioner compiles it. XLA
        # then logs a deprecation warning for GSPMD on stderr: silenced for this call only.
        with shardy_off(False):
            _cpp_log_level(2)
            try:
                return kernel(*args)
            finally:
                env = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")
                _cpp_log_level(int(env) if env.strip().isdigit() else 0)

    return call


#: Wall time aimed at per slice of the queue's loop when progress is reported (seconds). Each
#: slice is one call of the loop's program, and a call costs a fixed time that grows with the
#: number of starts: XLA copies the first-crossing records in and out (on the Fig. 11 mu = 1
#: panel, 86,400 starts, a call with no iterations takes 11 ms). With 0.25 s that panel took
#: 18-23 slices and 0.17-0.46 s longer than with 1 s (6-7 slices; benchmarks/RESULTS.md).
_SLICE_S = 1.0

#: The fewest rows the work queue is compiled for: a smaller ensemble is padded to it.
SIZE_FLOOR = 4096


def size_class(n: int, floor: int | None = None) -> int:
    """The rows of starts the work queue is compiled for when it runs ``n`` starts: the
    smallest size class ``2^k * (5, 6, 7, 8)`` (four per octave) at or above ``n``, and at
    least ``floor``. The rows are part of the compiled program's shapes, so every ensemble size
    of one class reuses one program (measured, the shot: ``make_probability`` with n = 256 and
    then n = 300 compiled twice, 23 s each; benchmarks/RESULTS.md, stop 43), while the padding
    stays under a quarter of ``n`` above ``floor``. Padding rows are invalid starts: the
    kernel's set-up and records only, no steps."""
    k = max(n - 1, 1).bit_length() - 3  # 2^(k+2) < n <= 2^(k+3): n needs 5, 6, 7 or 8 x 2^k
    width = next(m << k for m in (5, 6, 7, 8) if m << k >= n) if k > 0 else 8
    return max(SIZE_FLOOR if floor is None else floor, width)


def run(
    f: Callable,
    events: EventSet,
    y0s: Float[Array, "N d"] | np.ndarray,
    args=None,
    *,
    t0: float = 0.0,
    t_max: float,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 100_000,
    dt_max: float = np.inf,
    lanes: int = 512,
    n_samples: int = 8,
    devices: int | None = None,
    valid: np.ndarray | None = None,
    reset: Callable | None = None,
    aux: np.ndarray | None = None,
    n_error: int | None = None,
    n_constant: int = 0,
    max_resets: int = 10_000,
    args_batched=False,
    field_and_events: Callable | None = None,
    progress: Callable[[int], Any] | None = None,
    flow: Callable | None = None,
    flow_step: Callable | None = None,
    solver: str = "dopri5",
    jump_ts=None,
    runner: Callable | None = None,
    mode_names: tuple[str, ...] | None = None,
) -> EnsembleResult:
    """Integrate ``y' = f(t, y, args)`` from each row of ``y0s`` until its first terminating
    event (earliest root among ``events``, see :mod:`rollax._core.events`) or ``t_max``.

    Events follow :func:`rollax.solve`: every accepted step is sampled at ``n_samples``
    equally spaced points of its dense output (the default is ``rollax.solve``'s), a
    non-finite sampled event value ends the start with ``FAILED_NAN``, and the root is located
    on the dense output of the step that holds it.

    ``f``, ``events``, ``reset`` and ``field_and_events`` must be stable objects
    (module-level functions / a module-level :class:`EventSet`, or hashable objects equal by
    value): compiled kernels are cached on them; pass parameters through ``args`` (a pytree
    of arrays) so that new parameter values do not recompile. ``field_and_events(t, y, args)
    -> (f, g)`` evaluates both at one point, where the kernel needs both (default: separate
    calls). **Per-start parameters**: ``args_batched`` is a pytree prefix of ``args`` of bools
    (or one bool for all leaves); a leaf marked True has a leading axis of N (one value per
    start), is dealt to the devices with the starts, and each lane uses its own start's
    value; unmarked leaves are shared. The starts are dealt round-robin to ``devices`` JAX
    devices (default: all local devices), each running its own work queue of ``lanes``
    lanes. Returns an :class:`EnsembleResult`; starts whose state or event values became
    non-finite or that hit ``max_steps`` are reported with a failure status.

    **Hybrid systems.** With ``reset(t, y, aux, event, args) -> (t, y, aux, terminal)``, every
    event is located (the earliest root, as without a reset) and passed to the reset map with
    the state there; unless it returns ``terminal``, the start goes on from the returned time
    and state in a new segment (crossing counts and first crossings start afresh, the step size
    is chosen anew). A returned state that violates a boundary event fires it at once. ``aux``
    ``(N, p)`` is per-start data only the reset map sees and changes (default: none); the
    record of a terminal event is the time, state and ``aux`` the reset map returned.
    ``max_steps`` bounds each segment, ``max_resets`` the number of segments (then
    ``FAILED_STEPS``). ``n_error``: only the first ``n_error`` components enter the error norm
    (the rest are passive: a mode, say; default: all). ``n_constant``: the last ``n_constant``
    components have zero rate (``f`` returns 0 for them: a mode); they are carried through
    each step unchanged instead of being integrated.

    **An exact flow.** With ``flow(t0, y0, t1, args) -> y1`` (the state at ``t1`` of the motion
    from ``(t0, y0)``) and ``flow_step(t, y, args)`` (the step to take from there, at most
    ``dt_max``), every step is taken along the flow, with no error control, and its samples
    and roots are on the flow itself.

    ``solver``: the Runge-Kutta pair, ``"dopri5"`` or ``"dopri8"`` (:data:`METHODS`: the
    coefficients, continuous extension and step-size controller of ``rollax.solve`` with
    that solver).

    ``jump_ts``: times where ``f`` or its derivatives jump (a piecewise control's kinks); as
    :func:`rollax.solve` (diffrax's ``ClipStepSizeController``), no step straddles one: a step
    ends just before it and the next starts just after it with ``f`` evaluated afresh. The
    kernel is compiled for the set of times.

    ``progress(finished)``: called on this thread with the number of starts finished so far,
    about every ``_SLICE_S`` seconds (the queue's loop then runs in slices, with bit-identical
    results); an exception it raises stops the solve there. When few starts are left, what
    they are doing (how many, ``mode_names[y[-1]]`` of each with ``n_constant``, the most
    steps) is written for the bar first (:mod:`rollax._core._tail`).

    With ``reset`` and at least ``_NARROW_MIN_PER_LANE`` starts per lane on every device, the
    last ``lanes / 16`` starts of each device move to a kernel of ``lanes / 16`` lanes
    (compiled beside the loop), at an iteration fixed by the starts (not by timing).

    ``runner``: another path for the validated problem instead of the work queue (the fused
    kernel passes :func:`rollax._integrate._fused.solve`): ``runner(pb, y0s, aux, valid, bargs, sargs,
    sc, progress=progress)`` returns the records ``(status, event, t, y, counts, t_first,
    steps, resets, aux)``, where ``bargs`` and ``sargs`` are the per-start and shared leaves of
    ``args`` (each led by a dummy leaf) and ``sc`` the scalars ``(t0, t_max, rtol, atol,
    max_steps, max_resets, dt_max)``.
    """
    if not (runner is not None and isinstance(y0s, jax.Array)):  # (the fused path's stay)
        y0s = np.asarray(y0s, dtype=np.float64)
    if y0s.ndim != 2:
        raise ValueError(f"y0s must have shape (N, d), got {y0s.shape}")
    if not (t_max > t0):
        raise ValueError(f"t_max = {t_max!r} must be greater than t0 = {t0!r}")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not (0.0 < tol < 1.0):
            raise ValueError(f"{name} = {tol!r} is outside the allowed range (0, 1)")
    if lanes < 16:
        raise ValueError(f"lanes = {lanes!r} must be at least 16")
    if not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
        raise ValueError(f"n_samples = {n_samples!r} must be an integer >= 1")
    check_solver(solver)
    N, d = y0s.shape
    if n_error is not None and not 1 <= n_error <= d:
        raise ValueError(f"n_error = {n_error!r} is outside the allowed range [1, {d}]")
    aux = np.zeros((N, 0)) if aux is None else np.asarray(aux, dtype=np.float64)
    if aux.ndim != 2 or aux.shape[0] != N:
        raise ValueError(f"aux must have shape ({N}, p), got {aux.shape}")
    if aux.shape[1] and reset is None:
        raise ValueError("aux is only used by a reset map; pass reset= too")
    n_dev = devices or jax.local_device_count()
    if not 1 <= n_dev <= jax.local_device_count():
        raise ValueError(
            f"devices = {n_dev!r} is outside the allowed range [1, {jax.local_device_count()}]"
        )
    valid = np.ones(N, bool) if valid is None else np.asarray(valid, bool)
    leaves, args_def, batched = _split_args(args, args_batched, N)
    # the rows padded to a size class (one compiled program per class), split over devices
    per = -(-size_class(max(N, 1)) // n_dev)
    pad = per * n_dev - N

    def shard(x, repeat=False):
        # round-robin: start i goes to device i % n_dev; padding rows are invalid starts
        # (per-start parameters are padded with the first start's, to stay finite)
        x = np.asarray(x)
        if pad:
            fill = (
                np.repeat(x[:1], pad, axis=0)
                if repeat and len(x)
                else np.zeros((pad,) + x.shape[1:], x.dtype)
            )
            x = np.concatenate([x, fill])
        return x.reshape((per, n_dev) + x.shape[1:]).swapaxes(0, 1)

    if (flow is None) != (flow_step is None):
        raise ValueError("flow and flow_step go together: pass both or neither")
    if isinstance(n_constant, bool) or not (
        isinstance(n_constant, (int, np.integer)) and 0 <= n_constant < d
    ):
        raise ValueError(f"n_constant = {n_constant!r} is outside the allowed range [0, {d - 1}]")
    jumps = check_jump_ts(jump_ts)
    if not isinstance(jumps, tuple):
        raise ValueError("jump_ts must be concrete times (the kernel is compiled for them)")
    # (a t0 within the smallest step before a jump time: the kernel's setup moves the start
    # over that gap)
    pb = _KernelProblem(
        f,
        events,
        reset,
        None if n_error in (None, d) else int(n_error),
        int(n_samples),
        field_and_events,
        args_def,
        batched,
        flow,
        flow_step,
        d - int(n_constant) if n_constant else None,
        solver,
        jumps,
    )
    if runner is not None:
        res = runner(
            pb,
            y0s,
            aux,
            valid,
            # (the leading dummy: _fused.solve makes its own on the device)
            # (leaves already on the device stay there: no round trip through the host)
            (np.zeros(N),) + tuple(_here(x) for x, b in zip(leaves, batched) if b),
            (np.zeros(()),) + tuple(_here(x) for x, b in zip(leaves, batched) if not b),
            (
                float(t0),
                float(t_max),
                float(rtol),
                float(atol),
                int(max_steps),
                int(max_resets),
                float(dt_max),
            ),
            progress=progress,
        )
        return _result(res)
    kern = _compiled(pb, int(lanes), n_dev)
    # each led by a dummy leaf (pmap misplaced in_axes after an empty tuple, jax 0.10.2)
    bargs = (shard(np.zeros(N)),) + tuple(
        shard(x, repeat=True) for x, b in zip(leaves, batched) if b
    )
    sargs = (jnp.zeros(()),) + tuple(jnp.asarray(x) for x, b in zip(leaves, batched) if not b)
    sc = (
        float(t0),
        float(t_max),
        float(rtol),
        float(atol),
        int(max_steps),
        int(max_resets),
        float(dt_max),
    )
    pre, carry = kern.init(shard(y0s), shard(aux), shard(valid), bargs, sargs, sc)
    warm = None
    if progress is not None:
        # the records' program compiled beside the loop (on a copy of the first carry: the
        # loop donates its own), so that a bar at 100 % does not wait for it: a first
        # 300-start ensemble's bar stood full for 21 s on a loaded 2-core machine (issue 56)
        spare = jax.tree.map(jnp.copy, carry)
        warm = threading.Thread(
            target=_quietly,
            args=(kern.finish, pre, spare, sargs, sc),
            name="rollax-records",
            daemon=True,
        )
        warm.start()
    # The tail of a hybrid run (a few slipping starts stepping on long after the rest: the
    # Fig. 12 map's last 0.1 % of starts took 61 % of its warm run; benchmarks/RESULTS.md),
    # cut: a large hybrid run compiles the kernel for S = L/16 lanes beside its loop (or reads
    # it from the compile cache), its loop stops on every device where at most S starts are
    # left there, and the starts in flight move to the narrow kernel, where a step costs S
    # lanes, not L. (Without resets the kernel steps only its first L/16 lanes in the tail
    # itself; a hybrid kernel has no such second step: it cost 6 s of every first compile.)
    # The move happens at an iteration fixed by the starts, not by timing, so a run gives the
    # same results every time; against a run that stays on L lanes, a kernel of another width
    # may round differently (README: the placement bound).
    narrow = None
    per_device = shard(valid).sum(axis=1)
    if pb.reset is not None and lanes > 16 and per_device.min() >= _NARROW_MIN_PER_LANE * lanes:
        narrow = max(16, lanes // 16)
    compiling, hold = None, 0

    def compile_narrow():
        assert narrow is not None
        small, shrink = _compiled(pb, narrow, n_dev), _shrinker(narrow, n_dev)
        th = threading.Thread(
            target=_quietly,
            args=(_warm_narrow, small, shrink, pre, jax.tree.map(jnp.copy, carry), sargs, sc),
            name="rollax-narrow",
            daemon=True,
        )
        th.start()
        return th

    if narrow is not None:
        hold = narrow
        # with a bar, after its first report (a first run's bar moved 12 s later when this
        # compile shared the two cores with the first slice's)
        compiling = compile_narrow() if progress is None else None
    _tail.clear()
    # Without progress, one slice runs the whole loop (up to the move); with it, slices of
    # about _SLICE_S (the budget of iterations adapts to the measured time of the last slice).
    budget = np.iinfo(np.int32).max if progress is None else 8
    while True:
        tic = time.perf_counter()
        carry, left, finished = kern.advance(pre, carry, sargs, sc, budget, hold)
        left = bool(np.any(left))
        rest = per_device - np.asarray(finished).reshape(-1)
        if progress is not None:
            if left and rest.sum() <= max(3, N // 1000):
                _report_tail(carry, mode_names)
            progress(int(np.sum(finished)))
            took = time.perf_counter() - tic
            budget = int(np.clip(budget * _SLICE_S / max(took, 1e-3), 8, 1 << 24))
        if not left:
            break
        if hold and compiling is None:
            compiling = compile_narrow()
        if hold and np.all(rest <= hold):  # every device stopped at its move
            assert compiling is not None
            compiling.join()  # (compiled long before, as a rule)
            carry = _shrinker(narrow, n_dev)(carry)
            kern, hold = _compiled(pb, narrow, n_dev), 0
            LOG.debug(f"the tail's starts moved to a kernel of {narrow} lanes")
    _tail.clear()
    if warm is not None:
        warm.join()
    res = kern.finish(pre, carry, sargs, sc)

    def unshard(x):
        x = np.asarray(x)
        return x.swapaxes(0, 1).reshape((per * n_dev,) + x.shape[2:])[:N]

    return _result(tuple(unshard(x) for x in res))


#: A hybrid run's tail moves to a kernel of L/16 lanes when every device has at least this
#: many starts per lane (a large map: the Fig. 12 one has 84; a small run's tail is short and
#: would pay a second compile for nothing).
_NARROW_MIN_PER_LANE = 8


def _warm_narrow(small: _Kernel, shrink, pre, spare, sargs, sc):
    """The narrow kernel's programs compiled (run on a copy of the carry: 0 iterations)."""
    narrowed = shrink(spare)
    jax.block_until_ready(small.finish(pre, narrowed, sargs, sc))
    return small.advance(pre, narrowed, sargs, sc, 0, 0)


def _report_tail(carry: _Carry, mode_names) -> None:
    """The starts in flight, their modes and their most steps, for the bar (rollax._core._tail)."""
    ln = carry.ln
    held = np.asarray((ln.idx >= 0) & (ln.live | (ln.status == _PARKED))).reshape(-1)
    steps = np.asarray(ln.steps).reshape(-1)[held]
    modes = None
    if mode_names:
        m = np.asarray(ln.y[..., -1]).reshape(-1)[held].astype(int)
        modes = Counter(mode_names[k] if 0 <= k < len(mode_names) else str(k) for k in m)
    _tail.report(int(held.sum()), int(steps.max()) if steps.size else 0, modes)


def _quietly(fn, *args) -> None:
    """``fn(*args)`` for its compile only: whatever goes wrong is left to the real call."""
    try:
        jax.block_until_ready(fn(*args))
    except Exception:
        pass


def _result(res: tuple) -> EnsembleResult:
    """The kernel's per-start outputs (in :class:`EnsembleResult`'s field order) as one."""
    out = EnsembleResult(*res)
    return out._replace(status=out.status.astype(np.int8), event=out.event.astype(np.int32))


def _split_args(args, args_batched, N: int):
    """``args``' leaves (as arrays), its treedef, and per leaf whether it is per-start."""
    leaves, args_def = jax.tree_util.tree_flatten(args)
    try:
        marks = jax.tree_util.tree_map(
            lambda b, sub: jax.tree_util.tree_map(lambda _: bool(b), sub), args_batched, args
        )
    except ValueError:
        raise ValueError(
            f"args_batched = {args_batched!r} must be a bool or a pytree prefix "
            f"of args with bool leaves"
        ) from None
    batched = tuple(jax.tree_util.tree_leaves(marks))
    out = []
    for x, b in zip(leaves, batched):
        if b:
            x = np.asarray(x)
            if x.ndim == 0 or x.shape[0] != N:
                raise ValueError(
                    f"a per-start leaf of args has shape {x.shape}; it needs a "
                    f"leading axis of N = {N} starts"
                )
        out.append(x)
    return out, args_def, batched
