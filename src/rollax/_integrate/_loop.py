"""``rollax.solve`` as one step loop (issue 57): diffrax's solver steps, its step-size controller
and its interpolation driven by one loop that detects, locates and serves events and resets
inside it, the way the ensemble kernel does: no step loop nested in a segment loop, and one
program whatever the number of impacts.

Each iteration of :func:`run`'s loop (:func:`_iteration`):

* **starts a segment** where one starts (:func:`_start`: the run's start, or after a reset):
  the scan's signs, a boundary already fired there (served at once: :func:`_serve` at a step
  of length 0), the solver's state and the first step (the controller's ``init``, Hairer's
  starting step);
* then **takes a step** (:func:`_step`), unless that start served a boundary or ended the
  run: the solver's step, its samples scanned
  (:func:`rollax._core.events.scan`, a step that may hide a pair of crossings rejected), the
  controller's verdict; in an accepted step, first crossings are located at once
  (:func:`_firsts`), and an event that fires is located, its time and state made differentiable
  by the implicit function theorem, and served (:func:`_serve`: the reset map, the event log,
  the status).

The arithmetic is that of the segment loop (:mod:`rollax._integrate._solve`): the same steps,
samples, roots and statuses (``tests/integrate/test_loop.py`` holds the two to it). It runs
the systems with a reset map (:func:`wanted`); a run without resets is one segment of the
segment loop, and one without events, resets or saving one plain diffrax solve
(``_solve._plain``).
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal, NamedTuple

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from rollax._core import _eventlog
from rollax._core._solution import Solution, Status
from rollax._integrate import _ulp
from rollax._core.events import CROSSING, locate_in_step, near_theta, scan, unresolved_in

_RUNNING = -1


def wanted(hybrid: bool, dense: bool, plain: bool) -> bool:
    """Whether the one loop runs this solve: a system with a reset map (``hybrid``; ``dense``
    is refused for those) whose run is not a plain one. Its first gradient compiles in about
    half the segment loop's CPU time and does not grow with the impacts. A run without resets
    is one segment of the segment loop, which locates its event after its step loop: under
    ``jax.vmap`` the one loop's branches become selects that compute a segment's start and the
    first crossings' root search at every step (the rim's vmapped forward solve 1.75x slower
    warm at 64 lanes), and its first gradient compiles no faster (the oscillator's: the same
    CPU time; benchmarks/RESULTS.md, issue 57).
    ``ROLLAX_LOOP=segments`` runs the segment loop for every system, ``ROLLAX_LOOP=one`` the
    one loop for every system it can (the benchmarks compare them)."""
    how = os.environ.get("ROLLAX_LOOP", "")
    if dense or plain or how == "segments":
        return False
    return hybrid or how == "one"


class _Carry(NamedTuple):
    t: Float[Array, ""]  # the step's start (diffrax's tprev)
    t_seg: Float[Array, ""]  # the segment's start
    t_next: Float[Array, ""]  # the step's proposed end (diffrax's tnext)
    y: Float[Array, " d"]
    mode: Int[Array, ""]
    aux: Float[Array, " p"]
    solver_state: Any
    controller_state: Any
    made_jump: Bool[Array, ""]
    fresh: Bool[Array, ""]  # a segment starts at (t, y, mode): set up at the next iteration
    sign: Float[Array, " n"]  # the scan's state (events.scan)
    count: Int[Array, " n"]  # pyright: ignore[reportIncompatibleMethodOverride]  (tuple.count)
    t_zero: Float[Array, " n"]
    t_first: Float[Array, " n"]
    status: Int[Array, ""]  # _RUNNING until the run ends
    event: Int[Array, ""]
    steps: Int[Array, ""]
    seg_steps: Int[Array, ""]  # steps of this segment (max_steps bounds them)
    resets: Int[Array, ""]
    rejected: Int[Array, ""]
    log_n: Float[Array, ""]
    log: Float[Array, " Kw"]
    last_e: Int[Array, ""]  # the event the last reset served (-1: none) and its time
    last_t: Float[Array, ""]
    sign_in: Float[Array, " n"]  # the first segment's signs (nan: those at its start)
    ys: Float[Array, "m d"]  # the states saved at ts (nan: not reached)


class _Ctx(eqx.Module):
    """What every iteration reads: the problem and the options. It rides in the loop's carry,
    unchanged (closed over instead, its batched arrays broke the checkpointed loop's reverse
    pass under ``vmap``: equinox's "Nonconstant batch")."""

    system: Any
    term: Any
    solver: Any
    events: Any = eqx.field(static=True)
    t1: Float[Array, ""]  # the end (finite: inf is float64's largest)
    t1_floor: Float[Array, ""]  # 100 ulp before it: a step ending past it ends at t1 (diffrax)
    opts: Any
    ts: Any  # the save times (None: none)
    rtol: Any
    atol: Any
    dt_max: Any
    jump_ts: Any
    # rollax._integrate._solve, the segment loop's module, whose pieces (the solver's steps,
    # samples, roots, controllers) the loop shares; handed in so that the two do not import
    # each other
    h: Any = eqx.field(static=True)

    def controller(self, t_seg):
        """The step-size controller of the segment that starts at ``t_seg``."""
        if self.system.has_flow:
            return self.h._ExactFlowSteps(self.dt_max)
        # the smallest step: 1e-14 of the segment's start (the segment loop's dt_min)
        dt_min = 1e-14 * jnp.maximum(1.0, jnp.abs(t_seg))
        return self.h._controller(self.rtol, self.atol, self.dt_max, dt_min, self.jump_ts)


def run(
    system, y0, mode, aux, t0, t1, rtol, atol, dt_max, jump_ts, ts, sign_in, opts, h
) -> Solution:
    """One run of ``system`` from ``(t0, y0)`` in ``mode``: the segment loop's
    :func:`rollax._integrate._solve._run`, as one loop."""
    dtype = y0.dtype
    events = system.event_set
    n = events.n
    t1c = jnp.where(jnp.isfinite(t1), t1, jnp.finfo(dtype).max)
    # (diffrax's threshold for rounding a step's end to t1: t1 less 100 ulps)
    floor = _ulp.prevbefore_k(t1c, 100)

    kind, bound = _loop_kind(opts)
    solver = opts.solver
    if getattr(solver, "scan_kind", "") is None and kind != "checkpointed":
        # the Runge-Kutta stages as diffrax's adjoints run them: a bounded loop for
        # DirectAdjoint (both modes), a lax loop for ForwardMode; checkpointed (diffrax's
        # default) for the checkpointed loop, whose forward solve it keeps 1.9x faster warm
        how = "bounded" if kind == "bounded" else "lax"
        solver = eqx.tree_at(lambda s: s.scan_kind, solver, how, is_leaf=lambda x: x is None)
    ctx = _Ctx(
        system,
        diffrax.ODETerm(h._vf),
        solver,
        events,
        t1c,
        floor,
        opts,
        ts,
        rtol,
        atol,
        dt_max,
        jump_ts,
        h,
    )
    args = (system, mode)

    # the solver's and controller's states, of the shapes every segment gives them: zeros (the
    # first iteration sets them up; computed here, they were a forward pass and a transpose
    # outside the loop that did nothing)
    def states():
        st = solver.init(ctx.term, t0, t0 + 1.0, y0, args)
        _, cs = ctx.controller(t0).init(
            ctx.term, t0, t0 + 1.0, y0, None, args, solver.func, _order(ctx)
        )
        return st, cs

    st0, cs0 = jax.tree_util.tree_map(
        lambda a: jnp.zeros(a.shape, a.dtype), eqx.filter_eval_shape(states)
    )
    c = _Carry(
        t=t0,
        t_seg=t0,
        t_next=t0,
        y=y0,
        mode=mode,
        aux=aux,
        solver_state=st0,
        controller_state=cs0,
        made_jump=jnp.asarray(False),
        fresh=jnp.asarray(True),
        sign=jnp.zeros(n, dtype),
        count=jnp.zeros(n, jnp.int32),
        t_zero=jnp.full(n, jnp.nan, dtype),
        t_first=jnp.full(n, jnp.nan, dtype),
        status=jnp.int32(_RUNNING),
        event=jnp.int32(-1),
        steps=jnp.int32(0),
        seg_steps=jnp.int32(0),
        resets=jnp.int32(0),
        rejected=jnp.int32(0),
        log_n=_eventlog.empty(opts.save_events, y0.shape[0], dtype)[0],
        log=_eventlog.empty(opts.save_events, y0.shape[0], dtype)[1],
        last_e=jnp.int32(-1),
        last_t=t0,
        sign_in=sign_in,
        ys=jnp.full((0 if ts is None else ts.shape[0],) + y0.shape, jnp.nan, dtype),
    )
    dyn, static = eqx.partition(ctx, eqx.is_array)
    if kind == "checkpointed":
        c = _tied(c, [x for x in jax.tree_util.tree_leaves((dyn, y0, aux, t0)) if _inexact(x)])

    def body(carry):
        return carry[0], _iteration(eqx.combine(carry[0], static), carry[1])

    _, c = eqxi.while_loop(
        lambda carry: carry[1].status == _RUNNING,
        body,
        (dyn, c),
        max_steps=bound,
        kind=kind,
        **_checkpoints(opts, kind, (dyn, c)),
    )
    if kind == "checkpointed":
        c = _spread(c)
    return Solution(
        t=c.t,
        y=c.y,
        mode=c.mode,
        aux=c.aux,
        status=c.status,
        event=c.event,
        counts=c.count,
        t_first=c.t_first,
        steps=c.steps,
        resets=c.resets,
        rejected=c.rejected,
        ys=None if ts is None else c.ys,
        events=_eventlog.read(c.log_n, c.log, y0.shape[0]) if opts.save_events else None,
    )


# The checkpointed loop's reverse pass finds which carried values carry derivatives (forwards)
# and cotangents (backwards) as fixed points, linearising the whole body once per round: six
# linearisations of the body (3 + 3) on the bouncing ball, a third of its gradient's compile.
# Marked up front, each fixed point is found in one round: _tied marks every value that carries
# a derivative once anything does (an identity whose derivative depends on the anchor);
# _spread gives the end's time, state and step a cotangent together.


def _inexact(x) -> bool:
    return eqx.is_array(x) and jnp.issubdtype(x.dtype, jnp.inexact)


@jax.custom_jvp
def _tie(x, anchor):
    return x


@_tie.defjvp
def _tie_jvp(primals, tangents):
    # x's derivative plus a zero that is linear in the anchor's, so never a symbolic zero
    # (instantiated zeros alone are: JAX's linearisation sees through them); a select, not a
    # product with 0, so that a NaN or inf on either side stays there
    tx, ta = tangents
    never = jnp.zeros((), bool)
    zero = sum(jnp.sum(jnp.where(never, t, 0.0)) for t in jax.tree_util.tree_leaves(ta))
    return primals[0], jax.tree_util.tree_map(lambda t: t + zero, tx)


def _tied(c: _Carry, anchor) -> _Carry:
    """``c`` with the values that carry a derivative in the loop (the time, the state, the
    step, the solver's state, the first crossings) marked as depending on ``anchor``."""
    if not anchor:
        return c
    ss = [x for x in jax.tree_util.tree_leaves(c.solver_state) if _inexact(x)]
    keep = (c.t, c.t_seg, c.t_next, c.y, c.t_first, c.last_t, ss)
    t, t_seg, t_next, y, t_first, last_t, ss = _tie(keep, anchor)
    return c._replace(
        t=t,
        t_seg=t_seg,
        t_next=t_next,
        y=y,
        t_first=t_first,
        last_t=last_t,
        solver_state=_with_leaves(c.solver_state, ss),
    )


def _spread(c: _Carry) -> _Carry:
    """``c`` with its time and state tied to the next step and the solver's state (their
    derivatives add 0), so that a cotangent of either reaches all four."""
    ss = [x for x in jax.tree_util.tree_leaves(c.solver_state) if _inexact(x)]
    t, y = _tie((c.t, c.y), (c.t_next, ss))
    return c._replace(t=t, y=y)


def _with_leaves(tree, new):
    """``tree`` with its inexact leaves replaced, in order, by ``new``."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    it = iter(new)
    return jax.tree_util.tree_unflatten(treedef, [next(it) if _inexact(x) else x for x in leaves])


def _loop_kind(opts) -> tuple[Literal["lax", "checkpointed", "bounded"], int | None]:
    """The loop's kind for the adjoint, and its bound: every segment's steps and its start."""
    if isinstance(opts.adjoint, diffrax.ForwardMode):
        return "lax", None
    bound = min((opts.max_steps + 1) * (opts.max_resets + 2), 2**31 - 1)
    return ("bounded" if isinstance(opts.adjoint, diffrax.DirectAdjoint) else "checkpointed"), bound


def _checkpoints(opts, kind, carry) -> dict:
    """The reverse pass's checkpoints: the adjoint's own; else as many copies of the loop's
    carry as fit in 256 KiB (``_CHECKPOINT_BYTES``), and at least ``2 (sqrt(2 max_steps) + 1)``
    (twice what diffrax gives one segment of ``max_steps`` steps), the number a run under
    ``jax.vmap`` keeps (a lane's budget is one of every lane's).

    A run of more iterations than checkpoints recomputes its steps in the reverse pass; every
    checkpoint costs each call its share of equinox's set-up and sort. Warm gradients, best of
    30 (benchmarks/RESULTS.md, issue 57), with 364 / 1,135 (256 KiB of the pendulum's 231-byte
    carry) / 4,539 checkpoints: the 4-impact ball (16 steps) 1.13 / 1.28 / 1.89 ms, the
    12-impact pendulum (about 870 steps) 22.5 / 18.8 / 19.2 ms, the 40-impact one (2,917 steps)
    81.7 / 77.3 / 61.9 ms."""
    if kind != "checkpointed":
        return {}
    own = getattr(opts.adjoint, "checkpoints", None)
    if own:
        return {"checkpoints": own}
    least = 2 * (math.isqrt(2 * opts.max_steps) + 1)
    if opts.batched:  # (a budget a lane would be one of every lane: the fewer)
        return {"checkpoints": least}
    size = sum(
        x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(carry) if eqx.is_array(x)
    )
    return {"checkpoints": max(least, _CHECKPOINT_BYTES // max(size, 1))}


_CHECKPOINT_BYTES = 2**18  # the reverse pass's checkpoints of one run (see _checkpoints)


def _order(ctx: _Ctx):
    return ctx.solver.error_order(ctx.term)


def _iteration(ctx: _Ctx, c: _Carry) -> _Carry:
    """One iteration: start a segment if one starts here, then take one step of it (none when
    the start served a boundary at once or ended the run).

    The step is not a branch of a ``cond``: the Runge-Kutta stages are diffrax's checkpointed
    loop, which inside a ``cond`` under ``vmap`` fails in reverse mode (equinox's "Nonconstant
    batch"), and as a bounded loop instead it made the 40-impact pendulum's warm forward solve
    1.9x slower (7.7 ms against 3.9; benchmarks/RESULTS.md, issue 57)."""
    c = jax.lax.cond(c.fresh, lambda c: _start(ctx, c), lambda c: c, c)
    return _step(ctx, c, ~c.fresh & (c.status == _RUNNING))


def _start(ctx: _Ctx, c: _Carry) -> _Carry:
    """Set up the segment that starts at ``(c.t, c.y, c.mode)``; a boundary already fired there
    is served at once (a step of length 0)."""
    system, events, sg = ctx.system, ctx.events, jax.lax.stop_gradient
    t0, y0, mode = c.t, c.y, c.mode
    n = events.n
    f0 = system.vector_field(t0, y0, mode)
    g0 = system.event_values(t0, y0, mode)
    sign0 = ctx.h._start_signs(system, t0, y0, mode, f0)
    sign0 = jnp.where(jnp.isnan(c.sign_in), sign0, c.sign_in)  # (a start moved over a gap)
    at_start = events.fired_at_start(g0, sign0)
    bad = ~jnp.all(jnp.isfinite(g0)) | ~jnp.all(jnp.isfinite(y0)) | ~jnp.all(jnp.isfinite(f0))
    repeated = (
        (c.last_e >= 0) & at_start[jnp.maximum(c.last_e, 0)] & (t0 == c.last_t)
        if n
        else jnp.asarray(False)
    )
    args = (system, mode)
    st = ctx.solver.init(ctx.term, t0, ctx.t1, sg(y0), args)
    t_next, cs = ctx.controller(t0).init(
        ctx.term, t0, ctx.t1, y0, None, args, ctx.solver.func, _order(ctx)
    )
    c = c._replace(
        ys=_saved(ctx, c.ys, t0, t0, lambda tt: y0),
        t_seg=t0,
        t_next=jnp.minimum(t_next, ctx.t1),
        solver_state=st,
        controller_state=cs,
        made_jump=jnp.asarray(False),
        fresh=jnp.asarray(False),
        sign=sign0.astype(c.sign.dtype),
        count=jnp.zeros_like(c.count),
        t_zero=jnp.full_like(c.t_zero, jnp.nan),
        t_first=jnp.full_like(c.t_first, jnp.nan),
        seg_steps=jnp.int32(0),
        sign_in=jnp.full_like(c.sign_in, jnp.nan),
        status=jnp.where(bad, jnp.int32(Status.NONFINITE), c.status),
    )
    e0 = jnp.where(repeated, c.last_e, jnp.argmax(at_start) if n else 0).astype(jnp.int32)
    fire = ~bad & jnp.any(at_start) if n else jnp.asarray(False)
    return jax.lax.cond(
        fire,
        lambda c: _serve(ctx, c, e0, t0, y0, c.count, jnp.asarray(False), repeated),
        lambda c: c,
        c,
    )


def _step(ctx: _Ctx, c: _Carry, go) -> _Carry:
    """One attempted step; in an accepted one, first crossings located and an event served.
    ``go`` false: ``c`` unchanged (the step is taken, of a small positive length so that its
    discarded values and their derivatives stay finite, and thrown away)."""
    h_ = ctx.h
    system, events, opts, sg = ctx.system, ctx.events, ctx.opts, jax.lax.stop_gradient
    t, y, mode = c.t, c.y, c.mode
    t_next = jnp.where(go, c.t_next, t + 2.0**-20 * jnp.maximum(1.0, jnp.abs(t)))
    args = (system, mode)
    h = t_next - t
    y1, err, dense, st1, _ = ctx.solver.step(
        ctx.term, t, t_next, y, args, c.solver_state, c.made_jump
    )
    interp = ctx.solver.interpolation_cls(t0=t, t1=t_next, **dense)
    vals, times = h_._step_samples(system, mode, interp, y1, t, h, opts.n_samples)
    vals = sg(vals)
    # (the scan's zero times only seed root searches, stopped: no derivative carried)
    sc = scan(events, vals, sg(times), c.sign, c.count, c.t_zero)
    exact = isinstance(ctx.solver, h_._ExactFlowSolver)
    if not exact:
        # samples that may hide a pair of crossings: rejected (shrunk to 0.2 h), as a step
        # with a non-finite error (the segment loop's _Sampled, the kernel)
        th = near_theta(opts.n_samples)
        g0 = sg(system.event_values(t, y, mode))
        near = sg(system.event_values(t + th * h, h_._interp_at(interp, t, h, th), mode))
        err = jnp.where(jnp.isnan(err), jnp.inf, err)
        err = jnp.where(unresolved_in(vals, g0, near, t, h), jnp.inf, err)
    keep, t_prev, t_after, jump, cs, cres = ctx.controller(c.t_seg).adapt_step_size(
        t, t_next, y, y1, args, err, _order(ctx), c.controller_state
    )
    t_prev = jnp.minimum(t_prev, ctx.t1)
    # diffrax's _clip_to_end: a step that would end within 100 ulp of t1 ends at t1
    t_after = jnp.where(
        t_after > ctx.t1_floor, jnp.where(keep, ctx.t1, t_prev + 0.5 * (ctx.t1 - t_prev)), t_after
    )
    steps, seg_steps = c.steps + 1, c.seg_steps + 1
    fired = keep & jnp.any(sc.fired) & ~sc.nonfinite
    small = cres == diffrax.RESULTS.dt_min_reached
    bad = (keep & sc.nonfinite) | small
    first = _firsts(ctx, c, keep & go, sc, interp, y1, t, h, vals)
    moved = c._replace(
        t=jnp.where(keep, t_prev, t),
        t_next=t_after,
        y=jnp.where(keep, y1, y),
        solver_state=jax.tree_util.tree_map(
            lambda a, b: jnp.where(keep, a, b), st1, c.solver_state
        ),
        controller_state=cs,
        made_jump=jnp.where(keep, jump, c.made_jump),
        sign=jnp.where(keep, sc.sign, c.sign),
        count=jnp.where(keep, sc.count, c.count),
        t_zero=jnp.where(keep, sc.t_zero, c.t_zero),
        t_first=first,
        steps=steps,
        seg_steps=seg_steps,
        rejected=c.rejected + jnp.where(keep, 0, 1).astype(jnp.int32),
        ys=_saved(ctx, c.ys, t, jnp.where(keep, t_prev, -jnp.inf), interp.evaluate),
    )
    at_end = keep & (t_prev >= ctx.t1)
    over = ~fired & ~at_end & (seg_steps >= opts.max_steps)
    status = jnp.select(
        [bad, at_end & ~fired, over],
        [Status.NONFINITE, Status.T_MAX, Status.MAX_STEPS],
        _RUNNING,
    ).astype(jnp.int32)
    moved = moved._replace(status=jnp.where(fired, c.status, status))
    # a non-finite end state (a step accepted into NaN cannot be: the controller refuses it)
    moved = jax.tree_util.tree_map(lambda a, b: jnp.where(go, a, b), moved, c)
    fired = fired & go

    def serve(m: _Carry) -> _Carry:
        loc = locate_in_step(
            events,
            lambda tt: sg(system.event_values(tt, interp.evaluate(tt), mode)),
            sg(t),
            sg(h),
            opts.n_samples,
            sg(c.sign),
            c.count,
            sg(c.t_zero),
            vals=vals,
            unroll=False,
        )
        t_ev, y_ev = h_._implicit(
            system, mode, interp, jnp.where(loc.found, loc.t, sg(t_next)), loc.event
        )
        # first crossings after the root are not the segment's
        t_first = jnp.where(m.t_first > loc.t, jnp.nan, m.t_first)
        crossing = jnp.asarray(events.kinds) == CROSSING
        ends_first = crossing & (jnp.arange(events.n) == loc.event) & (loc.count == 1)
        t_first = jnp.where(ends_first & jnp.isnan(t_first), t_ev, t_first)
        # (the save times after the root: not reached before the reset)
        ys = jnp.where((ctx.ts > t_ev)[:, None], c.ys, m.ys) if ctx.ts is not None else m.ys
        m = m._replace(t_first=t_first, ys=ys)
        m = _serve(ctx, m, loc.event, t_ev, y_ev, loc.count, loc.jumped, jnp.asarray(False))
        lost = ~loc.found
        return m._replace(status=jnp.where(lost, jnp.int32(Status.NONFINITE), m.status))

    if not events.n:  # (no events: nothing fires; ts or save_events brought the run here)
        return moved
    return jax.lax.cond(fired, serve, lambda m: m, moved)


def _saved(ctx: _Ctx, ys, ta, tb, at):
    """``ys`` with the save times in ``[ta, tb]`` set to ``at(time)``."""
    if ctx.ts is None:
        return ys
    inside = (ctx.ts >= ta) & (ctx.ts <= tb)
    new = jax.vmap(at)(jnp.clip(ctx.ts, ta, jnp.maximum(ta, tb)))
    return jnp.where(inside[:, None], new, ys)


def _firsts(ctx: _Ctx, c: _Carry, keep, sc, interp, y1, t, h, vals):
    """``t_first`` after the step: each crossing event whose first crossing lies in it, located
    there (differentiable), as the segment loop's first-crossing slots do after their loop."""
    _crossings, _implicit = ctx.h._crossings, ctx.h._implicit
    events, system, sg = ctx.events, ctx.system, jax.lax.stop_gradient
    cross = _crossings(events)
    if not cross:
        return c.t_first
    n = events.n
    t_first = c.t_first
    for i in cross:
        new = keep & (c.count[i] == 0) & (sc.count[i] > 0)
        only = jnp.arange(n) == i

        def locate(_, i=i, only=only):
            lc = locate_in_step(
                events,
                lambda tt: sg(system.event_values(tt, interp.evaluate(tt), c.mode)),
                sg(t),
                sg(h),
                ctx.opts.n_samples,
                jnp.where(only, sg(c.sign[i]), 0.0),
                jnp.zeros(n, jnp.int32),
                jnp.where(only, sg(c.t_zero[i]), jnp.nan),
                jnp.where(only, 1, 0),
                only,
                vals=vals,
                unroll=False,
            )
            tf, _ = _implicit(system, c.mode, interp, jnp.where(lc.found, lc.t, sg(t)), i)
            return jnp.where(lc.found, tf, jnp.nan)

        tf = jax.lax.cond(new, locate, lambda _: t_first[i], None)
        t_first = t_first.at[i].set(tf)
    return t_first


def _serve(ctx: _Ctx, c: _Carry, e, t_e, y_e, count, jumped, repeated) -> _Carry:
    """Serve event ``e`` at ``(t_e, y_e)``: the reset map, the event log, the status, and the
    next segment (``fresh``) when the run goes on. ``count``: the segment's crossings up to the
    root; ``jumped``: the root is a jump of its function (DISCONTINUOUS); ``repeated``: the
    event fired again at once after its own reset (REPEATED: not reset again)."""
    system, opts = ctx.system, ctx.opts
    mode = c.mode
    t_r, y_r, mode_r, aux_r, term, resets, status = ctx.h._served(
        system, t_e, y_e, mode, c.aux, e, repeated, jumped, c.resets, opts.max_resets, ctx.t1
    )
    ended_by_event = ctx.h._ended_by_event(status)
    log_n, log = c.log_n, c.log
    if opts.save_events:
        log_n, log = _eventlog.write(log_n, log, ~repeated, t_e, e, mode, y_e, t_r, mode_r, y_r)
    on = ~term  # a new segment's counts start afresh, as in the kernel
    return c._replace(
        t=t_r,
        y=y_r,
        mode=mode_r,
        aux=aux_r,
        status=status.astype(jnp.int32),
        event=jnp.where(ended_by_event, e, -1).astype(jnp.int32),
        count=jnp.where(on, 0, count).astype(c.count.dtype),
        t_first=jnp.where(on, jnp.nan, c.t_first),
        fresh=status == _RUNNING,
        resets=resets,
        log_n=log_n,
        log=log,
        last_e=jnp.asarray(e, jnp.int32),
        last_t=t_e,
    )
