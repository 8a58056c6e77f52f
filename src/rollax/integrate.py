"""Event-terminated integration of one trajectory with diffrax: the differentiable path.

``diffrax.diffeqsolve`` takes the steps (Dopri5 with a PID controller by default) and records
its dense output. rollax does its own event location on that output instead of diffrax's
(which may converge to the last of several roots in a step, and takes the first event in its
list rather than the earliest when several fire in one step; ``shared/PERFORMANCE.md``):
every accepted step is sampled, the first bracket is found with :func:`rollax.events.scan_samples`,
and the root located with :func:`rollax.events.locate_root`. diffrax is asked to stop at the
end of the step in which an event function changes sign at a step end; roots inside earlier
steps (a function that dips through zero and back within one step) are still found, because
the whole dense output is scanned.

Crossing events with ``count > 1`` are handled by restarting diffrax at each crossing, with
a static number of segments, so the whole solve stays ``jit``/``vmap``/``grad`` compatible.
The event time is made differentiable by the implicit function theorem
(``dt* = -dg / (dg/dt)`` at the root).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import diffrax
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from rollax.events import BOUNDARY, CROSSING, Event, EventSet, locate_root, scan_samples


class Solution(NamedTuple):
    """Result of :func:`solve`."""

    t: Float[Array, ""]  # time at the end (event time, or t1)
    y: Float[Array, " d"]  # state there
    event: Int[Array, ""]  # index of the event that ended the run, -1 if t1 was reached
    failed: Bool[Array, ""]  # NaN or step limit
    counts: Int[Array, " n"]  # crossings counted per event
    t_first: Float[Array, " n"]  # time of the first crossing of each crossing event (nan if none)
    steps: Int[Array, ""]  # accepted steps (all segments)


_SOLVERS = {
    "dopri5": diffrax.Dopri5,
    "tsit5": diffrax.Tsit5,
    "dopri8": diffrax.Dopri8,
}


def solve(
    vector_field: Callable,
    y0: Float[Array, " d"],
    t0: float,
    t1: float,
    args=None,
    events: Sequence[Event] | EventSet = (),
    *,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 4096,
    solver: str | diffrax.AbstractSolver = "dopri5",
    n_samples: int = 16,
    dt_max: float | None = None,
    jump_ts: Sequence[float] | Float[Array, " k"] | None = None,
) -> Solution:
    """Integrate ``dy/dt = vector_field(t, y, args)`` from ``(t0, y0)`` until the earliest event
    root or ``t1`` (diffrax path; see the module docstring for the event semantics).

    ``max_steps`` bounds the accepted steps of each segment (one segment per crossing that
    does not end the run, plus one). A run that hits it, or whose state becomes non-finite,
    returns ``failed = True``. Each event function is sampled at ``n_samples`` points of every
    step to bracket its roots, which are then located to ~1e-13 relative in time.
    ``solver`` is a name (``dopri5``, ``tsit5``, ``dopri8``) or a diffrax solver instance.
    ``jump_ts``: times where the vector field or its derivatives jump (the kinks of a
    piecewise control); the step-size controller ends a step exactly there and restarts, so
    no step straddles one (diffrax's ``PIDController(jump_ts=...)``).
    """
    ev = events if isinstance(events, EventSet) else EventSet.from_events(events)
    solver = _solver(solver)
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not (0.0 < tol < 1.0):
            raise ValueError(f"{name} = {tol!r} is outside the allowed range (0, 1)")
    y0 = jnp.asarray(y0, dtype=float)
    t0 = jnp.asarray(t0, dtype=y0.dtype)
    t1 = jnp.asarray(t1, dtype=y0.dtype)
    n = ev.n
    jump_ts = _jump_ts(jump_ts, y0.dtype)
    if n == 0:
        return _solve_plain(vector_field, y0, t0, t1, args, rtol, atol, max_steps, solver, dt_max,
                            jump_ts)
    # one segment per non-final crossing, plus the last, plus one for a start exactly at a zero
    # (boundary events alone: the first root ends the run, one segment)
    n_cross = sum(k == CROSSING for k in ev.kinds)
    n_segments = (2 + sum(max(c - 1, 0) for k, c in zip(ev.kinds, ev.targets) if k == CROSSING)
                  if n_cross else 1)

    g0 = ev.fn(t0, y0, args)
    sign, count = ev.initial_state(g0)
    # A crossing function that starts exactly at zero takes the side it moves to.
    _, dg0 = jax.jvp(
        lambda t, y: ev.fn(t, y, args), (t0, y0), (jnp.ones_like(t0), vector_field(t0, y0, args))
    )
    sign = jnp.where(sign == 0, jnp.sign(dg0), sign)
    at_start = jnp.any(ev.fired_at_start(g0))
    state = dict(
        t=t0,
        y=y0,
        sign=sign,
        count=count,
        done=at_start,
        event=jnp.where(at_start, jnp.argmax(ev.fired_at_start(g0)), -1),
        failed=jnp.asarray(False),
        t_first=jnp.full((n,), jnp.nan, y0.dtype),
        steps=jnp.asarray(0),
    )
    for _ in range(n_segments):
        state = _segment(
            vector_field, ev, args, state, t1, rtol, atol, max_steps, solver, n_samples, dt_max,
            jump_ts,
        )
    return Solution(
        t=state["t"],
        y=state["y"],
        event=jnp.asarray(state["event"], jnp.int32),
        failed=state["failed"],
        counts=state["count"],
        t_first=state["t_first"],
        steps=state["steps"],
    )


def _solver(solver) -> diffrax.AbstractSolver:
    if isinstance(solver, diffrax.AbstractSolver):
        return solver
    if solver not in _SOLVERS:
        raise ValueError(f"solver = {solver!r} must be a diffrax solver or one of {sorted(_SOLVERS)}")
    return _SOLVERS[solver]()


def _jump_ts(jump_ts, dtype):
    if jump_ts is None:
        return None
    jt = jnp.asarray(jump_ts, dtype=dtype).reshape(-1)
    return jt if jt.shape[0] else None


def _controller(rtol, atol, dt_max, jump_ts=None):
    # an integral controller, as in the ensemble kernel (pcoeff = 0)
    return diffrax.PIDController(rtol=rtol, atol=atol, dtmax=dt_max, pcoeff=0.0, icoeff=1.0,
                                 jump_ts=jump_ts)


def _solve_plain(vector_field, y0, t0, t1, args, rtol, atol, max_steps, solver, dt_max, jump_ts):
    """No events: one diffrax solve to t1."""
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field), solver, t0, t1, None, y0, args=args,
        stepsize_controller=_controller(rtol, atol, dt_max, jump_ts),
        saveat=diffrax.SaveAt(t1=True),
        max_steps=max_steps, throw=False,
    )
    y = sol.ys[-1]
    ok = (sol.result == diffrax.RESULTS.successful) & jnp.all(jnp.isfinite(y))
    return Solution(
        t=sol.ts[-1], y=y, event=jnp.asarray(-1, jnp.int32), failed=~ok,
        counts=jnp.zeros((0,), jnp.int32), t_first=jnp.zeros((0,), y0.dtype),
        steps=sol.stats["num_accepted_steps"],
    )


def _segment(vector_field, ev, args, state, t1, rtol, atol, max_steps, solver, n_samples, dt_max,
             jump_ts):
    """Run diffrax from the current state to the next event root (or t1); update the state."""
    t0, y0, sign, count = state["t"], state["y"], state["sign"], state["count"]
    done = state["done"]
    # A finished run passes through unchanged; no gradient may flow through its empty solve.
    t0_in = jnp.where(done, jax.lax.stop_gradient(t0), t0)
    y0_in = jnp.where(done, jax.lax.stop_gradient(y0), y0)
    n = ev.n
    dtype = y0.dtype
    kinds = jnp.asarray(ev.kinds, jnp.int32)
    # A finished run integrates over an empty interval (diffrax returns at once).
    t_end = jnp.where(done, t0_in + 1e-6 * jnp.maximum(1.0, jnp.abs(t0_in)), t1)

    def cond_value(t, y, args, **kwargs):
        # Boundary events stop diffrax when they reach <= 0 at a step end; crossing events
        # when their sign differs from the reference. Exact roots are found afterwards.
        g = ev.fn(t, y, args)
        hit = jnp.where(kinds == BOUNDARY, g <= 0, (jnp.sign(g) != 0) & (jnp.sign(g) == -sign))
        return jnp.any(hit)

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        solver,
        t0_in,
        t_end,
        None,
        y0_in,
        args=args,
        stepsize_controller=_controller(rtol, atol, dt_max, jump_ts),
        saveat=diffrax.SaveAt(t1=True, dense=True),
        event=diffrax.Event(cond_value),
        max_steps=max_steps,
        throw=False,
    )
    n_acc = sol.stats["num_accepted_steps"]
    ts = jax.lax.stop_gradient(sol.interpolation.ts)  # (max_steps + 1,), padded beyond n_acc
    ta = ts[:-1]
    tb = ts[1:]

    thetas = jnp.linspace(0.0, 1.0, n_samples + 1, dtype=dtype)[1:]
    interp = sol.interpolation

    def local(i, differentiable=False):
        # The dense output of step i alone (avoids a search over all steps per evaluation).
        # The root search runs on constants; only the final implicit step carries gradients.
        src = interp if differentiable else jax.lax.stop_gradient(interp)
        info = jax.tree_util.tree_map(lambda x: x[i], src.infos)
        return src.interpolation_cls(t0=src.ts[i], t1=src.ts[i + 1], **info)

    def step_values(i):
        loc = local(i)
        tt = ta[i] + thetas * (tb[i] - ta[i])
        return jax.vmap(lambda t: ev.fn(t, loc.evaluate(t), args))(tt)

    # Walk the accepted steps in order; stop at the first that holds a root of any event (every
    # crossing, final or not, ends the segment so that its time is known).
    stop_targets = jnp.where(kinds == CROSSING, count + 1, 1)

    def walk_cond(c):
        _, _, found, i = c
        return ~found & (i < n_acc)

    def walk(c):
        s, cnt, _, i = c
        fired, _, s2, c2 = scan_samples(ev, step_values(i), s, cnt, stop_targets)
        fire = jnp.any(fired)
        return jnp.where(fire, s, s2), jnp.where(fire, cnt, c2), fire, jnp.where(fire, i, i + 1)

    sign_f, count_f, found, k = jax.lax.while_loop(
        walk_cond, walk, (sign, count, jnp.asarray(False), jnp.asarray(0))
    )
    found = found & ~done
    k = jnp.clip(k, 0, ta.shape[0] - 1)

    # Locate the root(s) in the firing step.
    a_k, b_k = ta[k], tb[k]
    loc_k = local(k)
    fired, first, _, _ = scan_samples(ev, step_values(k), sign_f, count_f, stop_targets)

    def g_t(tt, e):
        return ev.fn(tt, loc_k.evaluate(tt), args)[e]

    def root(e):
        grid = jnp.concatenate([a_k[None], a_k + thetas * (b_k - a_k)])
        i = jnp.clip(first[e], 0, n_samples - 1)
        lo, hi = grid[i], grid[i + 1]
        glo, ghi = g_t(lo, e), g_t(hi, e)
        ok = found & fired[e] & ((glo > 0) != (ghi > 0))
        # no root to locate: an empty bracket (the loop ends at once)
        r = locate_root(
            lambda tt: g_t(tt, e), jnp.where(ok, lo, hi), hi, jnp.where(ok, glo, 1.0),
            jnp.where(ok, ghi, -1.0),
        )
        return jnp.where(fired[e], jnp.where(ok, r, hi), jnp.inf)

    roots = jnp.stack([root(e) for e in range(n)])
    e_star = jnp.argmin(roots)
    # (a finite stand-in when nothing fired keeps NaNs out of the gradients)
    t_star = jax.lax.stop_gradient(jnp.where(jnp.isfinite(roots[e_star]), roots[e_star], b_k))
    # Implicit differentiation of the event time: t* = t*_0 - g(t*_0) / g'(t*_0).
    loc_d = local(k, differentiable=True)

    def g_d(tt):
        return ev.fn(tt, loc_d.evaluate(tt), args)[e_star]

    g_star, dg_dt = jax.jvp(g_d, (t_star,), (jnp.ones_like(t_star),))
    dg_dt = jax.lax.stop_gradient(dg_dt)
    safe = jnp.abs(dg_dt) > 0
    # zero in value, -dg/g' in derivative
    shift = (g_star - jax.lax.stop_gradient(g_star)) / jnp.where(safe, dg_dt, 1.0)
    t_ev = t_star - jnp.where(safe, shift, 0.0)
    y_ev = loc_d.evaluate(t_ev)

    y_last = sol.ys[-1]
    t_last = sol.ts[-1]
    reached = sol.result == diffrax.RESULTS.successful
    event_stop = sol.result == diffrax.RESULTS.event_occurred
    failed_now = ~done & ~found & ~reached & ~event_stop
    failed_now = failed_now | (~done & ~jnp.all(jnp.isfinite(jnp.where(found, y_ev, y_last))))

    is_cross = kinds == CROSSING
    targets = jnp.asarray(ev.targets, jnp.int32)
    onehot = jnp.arange(n) == e_star
    new_count = count_f + (found & is_cross & onehot).astype(jnp.int32)
    final_cross = is_cross & onehot & (targets > 0) & (new_count >= targets)
    final = found & (jnp.any(final_cross) | jnp.any(onehot & ~is_cross))
    first_cross = found & is_cross & onehot & (count_f == 0) & jnp.isnan(state["t_first"])
    t_first = jnp.where(first_cross, t_ev, state["t_first"])

    live = ~done
    new_t = jnp.where(found, t_ev, t_last)
    new_y = jnp.where(found, y_ev, y_last)
    # after a non-final crossing the reference sign is the new side
    flipped = jnp.where(found & is_cross & onehot, -jnp.where(sign_f == 0, 1.0, sign_f), sign_f)
    stop = found & final | ~found & (reached | failed_now)
    return dict(
        t=jnp.where(live, new_t, t0),
        y=jnp.where(live, new_y, y0),
        sign=jnp.where(live, flipped, sign),
        count=jnp.where(live, new_count, count),
        done=done | stop | failed_now,
        event=jnp.where(live & found & final, e_star, state["event"]),
        failed=state["failed"] | (live & failed_now),
        t_first=jnp.where(live, t_first, state["t_first"]),
        steps=state["steps"] + jnp.where(live, n_acc, 0),
    )
