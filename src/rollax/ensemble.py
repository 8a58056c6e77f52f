"""The batched ensemble kernel: many event-terminated DOPRI5 solves, one work queue per device.

Design (measured in ``shared/PERFORMANCE.md``):

* **A work queue, not vmap over a while loop.** One ``while_loop`` advances ``lanes``
  trajectories in lock-step; a finished lane writes its result and takes the next start, in a
  refill done only once a sixteenth of the lanes are free. Under plain ``vmap`` a batch would
  cost its slowest trajectory.
* **Event logic outside the hot loop.** In the loop only the signs of the event functions are
  checked, at the stage states of each accepted step (which also catches a function that dips
  through zero and back inside a step). A step that contains a terminating event is not taken:
  the lane stops at the step's start. After the loop one vectorised pass redoes that step and
  locates the earliest root of all events on the dense output (:mod:`rollax.events`).
* **One queue per device**: starts are dealt round-robin to the local JAX devices
  (``pmap``); on a CPU, :mod:`rollax._setup` makes one device per core.

The event semantics are those of :mod:`rollax.events`, the same as :func:`rollax.integrate.solve`.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from rollax import dopri5
from rollax.events import CROSSING, EventSet, locate_root, scan_samples

# Status codes of a finished start.
EVENT = 0  # ended by an event (see ``event``)
T_MAX = 1  # reached t_max with no event
FAILED_NAN = 2  # the state or the step size became non-finite / underflowed
FAILED_STEPS = 3  # the step limit was hit
PADDING = 4  # not a real start (padding of a chunk)
_PENDING = 5  # internal: the step holding the event is not yet located

STATUS_NAMES = {EVENT: "event", T_MAX: "t_max", FAILED_NAN: "nan", FAILED_STEPS: "max_steps"}


class EnsembleResult(NamedTuple):
    """Per-start results of :func:`solve_ensemble` (NumPy arrays, leading axis = start)."""

    status: np.ndarray  # (N,) int8, one of EVENT, T_MAX, FAILED_NAN, FAILED_STEPS
    event: np.ndarray  # (N,) int32: the event that ended the run, -1 if none
    t: np.ndarray  # (N,) time at the end
    y: np.ndarray  # (N, d) state at the end
    counts: np.ndarray  # (N, n_events) crossings counted (the ending one included)
    t_first: np.ndarray  # (N, n_events) time of the first crossing of each crossing event (nan if none)
    steps: np.ndarray  # (N,) attempted steps


class _Lanes(NamedTuple):
    idx: Int[Array, " L"]  # the start held by the lane (-1: none); its record is written on refill
    live: Bool[Array, " L"]  # still integrating
    status: Int[Array, " L"]  # record status once the lane has finished
    t: Float[Array, " L"]
    y: Float[Array, "L d"]
    h: Float[Array, " L"]
    k1: Float[Array, "L d"]
    sign: Float[Array, "L n"]
    count: Int[Array, "L n"]
    steps: Int[Array, " L"]
    fc_t: Float[Array, "L n"]  # start of the step holding the first crossing
    fc_y: Float[Array, "L n d"]
    fc_h: Float[Array, "L n"]
    fc_sign: Float[Array, "L n"]


class _Out(NamedTuple):
    status: Int[Array, " M"]
    t: Float[Array, " M"]
    y: Float[Array, "M d"]
    h: Float[Array, " M"]
    sign: Float[Array, "M n"]
    count: Int[Array, "M n"]
    steps: Int[Array, " M"]
    fc_t: Float[Array, "M n"]
    fc_y: Float[Array, "M n d"]
    fc_h: Float[Array, "M n"]
    fc_sign: Float[Array, "M n"]


_RECORD = ("status", "t", "y", "h", "sign", "count", "steps", "fc_t", "fc_y", "fc_h", "fc_sign")


def _queue(
    f: Callable,
    events: EventSet,
    lanes: int,
    y0s: Float[Array, "N d"],
    valid: Bool[Array, " N"],
    args,
    t0: Float[Array, ""],
    t_max: Float[Array, ""],
    rtol: Float[Array, ""],
    atol: Float[Array, ""],
    max_steps: Int[Array, ""],
    dt_max: Float[Array, ""],
) -> _Out:
    """Run one work queue over the starts ``y0s`` (one device). Returns raw per-start records."""
    N, d = y0s.shape
    n = events.n
    L = lanes
    fy = lambda t, y: f(t, y, args)  # noqa: E731
    gy = lambda t, y: events.fn(t, y, args)  # noqa: E731
    dtype = y0s.dtype

    # Per-start set-up, vectorised once: event values, k1 and the first step size.
    g0 = jax.vmap(lambda y: gy(t0, y))(y0s)
    k10 = jax.vmap(lambda y: fy(t0, y))(y0s)
    h0 = jax.vmap(lambda y, k: dopri5.initial_step(fy, t0, y, k, rtol, atol))(y0s, k10)
    h0 = jnp.minimum(jnp.minimum(h0, dt_max), t_max - t0)
    # Starts that are over before they begin (a boundary already violated) need no solve.
    at_start = jax.vmap(events.fired_at_start)(g0).any(axis=1) if n else jnp.zeros(N, bool)
    needs = valid & ~at_start
    order = jnp.argsort(~needs, stable=True).astype(jnp.int32)
    nq = jnp.sum(needs).astype(jnp.int32)

    # Records, with one spare row (index N) that absorbs the writes of empty lanes.
    M = N + 1

    def blank(K):
        # per-record arrays shared by the lanes and the records: crossings and their steps
        return dict(
            sign=jnp.zeros((K, n), dtype),
            count=jnp.zeros((K, n), jnp.int32),
            steps=jnp.zeros((K,), jnp.int32),
            fc_t=jnp.full((K, n), jnp.nan, dtype),
            fc_y=jnp.zeros((K, n, d), dtype),
            fc_h=jnp.zeros((K, n), dtype),
            fc_sign=jnp.zeros((K, n), dtype),
        )

    out = _Out(
        status=jnp.concatenate(
            [jnp.where(valid, jnp.where(at_start, _PENDING, T_MAX), PADDING), jnp.array([PADDING])]
        ).astype(jnp.int32),
        t=jnp.full((M,), t0, dtype),
        y=jnp.concatenate([y0s, jnp.zeros((1, d), dtype)]),
        h=jnp.zeros((M,), dtype),  # starts that end at t0: a pending 'step' with h = 0
        **blank(M),
    )
    lanes0 = _Lanes(
        idx=jnp.full((L,), -1, jnp.int32),
        live=jnp.zeros((L,), bool),
        status=jnp.zeros((L,), jnp.int32),
        t=jnp.full((L,), t0, dtype),
        y=jnp.zeros((L, d), dtype),
        h=jnp.ones((L,), dtype),
        k1=jnp.zeros((L, d), dtype),
        **blank(L),
    )

    def flush(ln, out):
        # finished lanes write their records (others write to the spare row)
        w = jnp.where((ln.idx >= 0) & ~ln.live, ln.idx, N)
        out = _Out(*(getattr(out, k).at[w].set(getattr(ln, k)) for k in _RECORD))
        return ln._replace(idx=jnp.where(ln.live, ln.idx, -1)), out

    def refill(carry):
        ln, qp, out = carry
        ln, out = flush(ln, out)
        free = ~ln.live
        rank = jnp.cumsum(free) - 1
        take = free & (qp + rank < nq)
        src = order[jnp.clip(qp + rank, 0, N - 1)]
        tk = take[:, None]
        ln = ln._replace(
            idx=jnp.where(take, src, ln.idx),
            live=ln.live | take,
            t=jnp.where(take, t0, ln.t),
            y=jnp.where(tk, y0s[src], ln.y),
            h=jnp.where(take, h0[src], ln.h),
            k1=jnp.where(tk, k10[src], ln.k1),
            sign=jnp.where(tk, jnp.sign(g0[src]), ln.sign),
            count=jnp.where(tk, 0, ln.count),
            steps=jnp.where(take, 0, ln.steps),
            fc_t=jnp.where(tk, jnp.nan, ln.fc_t),
        )
        return ln, qp + jnp.sum(take).astype(jnp.int32), out

    crossing = jnp.asarray(events.kinds, jnp.int32) == CROSSING
    sample_stages = jnp.asarray(dopri5.SAMPLE_STAGES)

    def advance(carry):
        ln, qp, out = carry
        live = ln.live
        y1, err, ks, _, gs = jax.vmap(lambda t, y, h, k: dopri5.step(fy, t, y, h, k, gy))(
            ln.t, ln.y, ln.h, ln.k1
        )
        en = jax.vmap(lambda e, a, b: dopri5.error_norm(e, a, b, rtol, atol))(err, ln.y, y1)
        finite = jnp.isfinite(en) & jnp.all(jnp.isfinite(y1), axis=1)
        accept = live & finite & (en <= 1.0)

        # Event signs at the stage states (inside the step) and at the new state.
        fired, _, sign2, count2 = jax.vmap(lambda v, s, c: scan_samples(events, v, s, c))(
            gs[:, sample_stages], ln.sign, ln.count
        )
        hit = accept & jnp.any(fired, axis=1)
        go = accept & ~hit
        t1 = ln.t + ln.h
        at_end = go & (t1 >= t_max)
        steps = ln.steps + live.astype(jnp.int32)

        # First crossings: remember the step that holds them, to locate them afterwards.
        first = go[:, None] & crossing[None, :] & (ln.count == 0) & (count2 > 0)
        fk = first[:, :, None]

        # Step-size control (elementary controller with safety 0.9, factor in [0.2, 10]).
        fac = jnp.where(finite, jnp.clip(0.9 * en ** (-0.2), 0.2, 10.0), 0.2)
        fac = jnp.where(accept, fac, jnp.minimum(fac, 1.0))
        t_new = jnp.where(go, t1, ln.t)
        h_new = jnp.minimum(jnp.minimum(ln.h * fac, dt_max), t_max - t_new)
        # a hit keeps its step (the post-pass redoes it); finished lanes keep their record
        h_new = jnp.where(hit | ~live, ln.h, h_new)
        tiny = ln.h < 1e-14 * jnp.maximum(1.0, jnp.abs(ln.t))
        nan_fail = live & (~jnp.all(jnp.isfinite(ln.y), axis=1) | tiny)
        step_fail = live & ~nan_fail & ~hit & ~at_end & (steps >= max_steps)
        done = hit | at_end | nan_fail | step_fail
        status = jnp.select(
            [hit, at_end, nan_fail], [_PENDING, T_MAX, FAILED_NAN], FAILED_STEPS
        ).astype(jnp.int32)
        ln = ln._replace(
            live=live & ~done,
            status=jnp.where(done, status, ln.status),
            t=t_new,
            y=jnp.where(go[:, None], y1, ln.y),
            h=h_new,
            k1=jnp.where(go[:, None], ks[:, 6], ln.k1),
            sign=jnp.where(go[:, None], sign2, ln.sign),
            count=jnp.where(go[:, None], count2, ln.count),
            steps=steps,
            fc_t=jnp.where(first, ln.t[:, None], ln.fc_t),
            fc_y=jnp.where(fk, ln.y[:, None, :], ln.fc_y),
            fc_h=jnp.where(first, ln.h[:, None], ln.fc_h),
            fc_sign=jnp.where(first, ln.sign, ln.fc_sign),
        )
        n_free = jnp.sum(~ln.live)
        need = (qp < nq) & ((n_free >= max(1, L // 16)) | (n_free == L))
        return jax.lax.cond(need, refill, lambda c: c, (ln, qp, out))

    def cond(carry):
        ln, qp, _ = carry
        return jnp.any(ln.live) | (qp < nq)

    carry = refill((lanes0, jnp.int32(0), out))
    ln, _, out = jax.lax.while_loop(cond, advance, carry)
    _, out = flush(ln, out)
    return out


def _locate(
    f: Callable,
    events: EventSet,
    n_samples: int,
    args,
    t: Float[Array, ""],
    y: Float[Array, " d"],
    h: Float[Array, ""],
    sign: Float[Array, " n"],
    count: Int[Array, " n"],
) -> tuple[Bool[Array, " n"], Float[Array, " n"], Float[Array, " d"]]:
    """Redo the step ``(t, y, h)`` and locate each event's firing root on its dense output.

    Returns ``(fired, theta, y_at)``: which events fire in the step, where (as a fraction of
    h), and the interpolated state at the earliest of them.
    The bracket comes from ``n_samples`` equally spaced samples of the interpolant; if the
    interpolant shows no firing (a graze seen only at a stage state, within the tolerance) the
    stage samples give it.
    """
    fy = lambda t_, y_: f(t_, y_, args)  # noqa: E731
    k1 = fy(t, y)
    gy = lambda t_, y_: events.fn(t_, y_, args)  # noqa: E731
    y1, _, ks, _, gs = dopri5.step(fy, t, y, h, k1, gy)
    dtype = y.dtype

    def g_at(theta):
        return events.fn(t + theta * h, dopri5.interpolate(y, y1, ks, h, theta), args)

    thetas = jnp.linspace(0.0, 1.0, n_samples + 1, dtype=dtype)[1:]
    vals = jax.vmap(g_at)(thetas)
    fired, first, _, _ = scan_samples(events, vals, sign, count)
    # Fallback: the stage states that made the kernel stop.
    st_th = jnp.asarray(dopri5.SAMPLE_THETAS, dtype)
    st_vals = gs[jnp.asarray(dopri5.SAMPLE_STAGES)]
    fired_s, first_s, _, _ = scan_samples(events, st_vals, sign, count)
    use_stage = ~jnp.any(fired)
    fired = jnp.where(use_stage, fired_s, fired)
    g0 = events.fn(t, y, args)

    def one(e):
        k = jnp.where(use_stage, first_s[e], first[e])
        th_grid = jnp.concatenate([jnp.zeros(1, dtype), thetas])
        st_grid = jnp.concatenate([jnp.zeros(1, dtype), st_th])
        kk = jnp.clip(k, 0, n_samples - 1)
        a = jnp.where(use_stage, st_grid[jnp.clip(k, 0, st_th.shape[0] - 1)], th_grid[kk])
        b = jnp.where(use_stage, st_th[jnp.clip(k, 0, st_th.shape[0] - 1)], thetas[kk])
        ge = lambda th: g_at(th)[e]  # noqa: E731
        ga = jnp.where(a == 0.0, g0[e], ge(a))
        gb = ge(b)
        ok = fired[e] & ((ga > 0) != (gb > 0))
        root = locate_root(ge, a, b, jnp.where(ok, ga, 1.0), jnp.where(ok, gb, -1.0))
        return jnp.where(ok, root, b)

    theta = jnp.stack([one(e) for e in range(events.n)]) if events.n else jnp.zeros(0, dtype)
    th = jnp.where(fired, theta, jnp.inf)
    e = jnp.argmin(th) if events.n else jnp.asarray(0)
    y_at = dopri5.interpolate(y, y1, ks, h, jnp.where(jnp.isfinite(th[e]), th[e], 1.0))
    return fired, theta, y_at


def _blocked(fn, mask: Bool[Array, " M"], block: int, inputs, outputs):
    """Apply ``fn`` (vmapped) only to the entries selected by ``mask``, ``block`` at a time.

    ``outputs`` are the default per-entry values (leading axis M, whose last row is a spare
    that absorbs the writes of padding). The cost scales with the number of selected entries,
    not with M, which matters because most starts need no root finding.
    """
    M = mask.shape[0]
    order = jnp.argsort(~mask, stable=True)
    order = jnp.concatenate([order, jnp.full((block,), M - 1, order.dtype)])
    count = jnp.sum(mask)
    vfn = jax.vmap(fn)

    def body(b, outs):
        idx = jax.lax.dynamic_slice(order, (b * block,), (block,))
        ok = b * block + jnp.arange(block) < count
        res = vfn(*(x[idx] for x in inputs))
        w = jnp.where(ok, idx, M - 1)
        return tuple(o.at[w].set(r) for o, r in zip(outs, res))

    n_blocks = (count + block - 1) // block
    return jax.lax.fori_loop(0, n_blocks, body, tuple(outputs))


def _finish(
    f: Callable, events: EventSet, n_samples: int, out: _Out, args, block: int = 512
) -> tuple[Int[Array, " M"], Int[Array, " M"], Float[Array, " M"], Float[Array, "M d"],
           Int[Array, "M n"], Float[Array, "M n"]]:
    """Post-pass: locate the ending event of every pending start, and the first crossings of
    the crossing events, on the dense output of the step that holds them."""
    n = events.n
    M = out.t.shape[0]
    if n == 0:  # no events: nothing to locate
        return (out.status, jnp.full((M,), -1, jnp.int32), out.t, out.y, out.count,
                jnp.zeros((M, 0), out.t.dtype))
    is_cross = jnp.asarray(events.kinds, jnp.int32) == CROSSING
    pending = out.status == _PENDING
    at_start = pending & (out.h == 0.0)  # ended at the very start: no step to search

    # Starts that ended at t0: the first boundary already violated there.
    g0 = jax.vmap(lambda t, y: events.fn(t, y, args))(out.t, out.y)
    e0 = jnp.argmax(jax.vmap(events.fired_at_start)(g0), axis=1).astype(jnp.int32)

    def end_one(t, y, h, sign, count):
        fired, theta, y_at = _locate(f, events, n_samples, args, t, y, h, sign, count)
        th = jnp.where(fired, theta, jnp.inf)
        e = jnp.argmin(th).astype(jnp.int32)
        return e, t + th[e] * h, y_at

    event, t_end, y_end = _blocked(
        end_one, pending & ~at_start, block, (out.t, out.y, out.h, out.sign, out.count),
        (jnp.where(at_start, e0, -1), out.t, out.y),
    )
    counts = out.count + (
        pending[:, None] & is_cross[None, :] & (event[:, None] == jnp.arange(n)[None, :])
    ).astype(out.count.dtype)
    status = jnp.where(pending, EVENT, out.status)

    # First crossings (only of crossing events, only where one was seen).
    first_events = EventSet(events.fn, events.kinds, tuple(1 for _ in events.kinds))
    t_first = jnp.full((M, n), jnp.nan, out.t.dtype)
    for e in range(n):
        if events.kinds[e] != CROSSING:
            continue

        def first_one(t, y, h, sign, e=e):
            fired, theta, _ = _locate(
                f, first_events, n_samples, args, t, y, h, sign, jnp.zeros(n, jnp.int32)
            )
            return (jnp.where(fired[e], t + theta[e] * h, jnp.nan),)

        seen = jnp.isfinite(out.fc_t[:, e])
        (tf,) = _blocked(first_one, seen, block,
                         (out.fc_t[:, e], out.fc_y[:, e], out.fc_h[:, e], out.fc_sign),
                         (t_first[:, e],))
        # a crossing that ends the run is also the first one when none was seen before
        tf = jnp.where(~seen & (event == e), t_end, tf)
        t_first = t_first.at[:, e].set(tf)
    return status, event, t_end, y_end, counts, t_first


@functools.lru_cache(maxsize=32)
def _compiled(f, events: EventSet, lanes: int, n_samples: int, n_dev: int):
    def run(y0s, valid, args, t0, t_max, rtol, atol, max_steps, dt_max):
        out = _queue(f, events, lanes, y0s, valid, args, t0, t_max, rtol, atol, max_steps, dt_max)
        status, event, t, y, counts, t_first = _finish(f, events, n_samples, out, args)
        return status[:-1], event[:-1], t[:-1], y[:-1], counts[:-1], t_first[:-1], out.steps[:-1]

    return jax.pmap(run, in_axes=(0, 0, None, None, None, None, None, None, None),
                    devices=jax.local_devices()[:n_dev])


def solve_ensemble(
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
    n_samples: int = 16,
    devices: int | None = None,
    valid: np.ndarray | None = None,
) -> EnsembleResult:
    """Integrate ``y' = f(t, y, args)`` from each row of ``y0s`` until its first terminating
    event (earliest root among ``events``, see :mod:`rollax.events`) or ``t_max``.

    ``f`` and ``events`` must be stable objects (module-level functions / a module-level
    :class:`EventSet`): compiled kernels are cached on their identity; pass parameters through
    ``args`` (a pytree of arrays) so that new parameter values do not recompile. The starts are
    dealt round-robin to ``devices`` JAX devices (default: all local devices), each running its
    own work queue of ``lanes`` lanes. Returns an :class:`EnsembleResult`; starts whose state
    became non-finite or that hit ``max_steps`` are reported with a failure status.
    """
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
    N, d = y0s.shape
    n_dev = devices or jax.local_device_count()
    if not 1 <= n_dev <= jax.local_device_count():
        raise ValueError(f"devices = {n_dev!r} is outside the allowed range [1, {jax.local_device_count()}]")
    valid = np.ones(N, bool) if valid is None else np.asarray(valid, bool)
    per = -(-max(N, 1) // n_dev)
    pad = per * n_dev - N
    ys = np.concatenate([y0s, np.zeros((pad, d))]) if pad else y0s
    vs = np.concatenate([valid, np.zeros(pad, bool)]) if pad else valid
    # round-robin: start i goes to device i % n_dev
    ys = ys.reshape(per, n_dev, d).transpose(1, 0, 2)
    vs = vs.reshape(per, n_dev).T
    run = _compiled(f, events, int(lanes), int(n_samples), n_dev)
    args = jax.tree_util.tree_map(jnp.asarray, args)
    res = run(ys, vs, args, float(t0), float(t_max), float(rtol), float(atol),
              int(max_steps), float(dt_max))

    def unshard(x):
        x = np.asarray(x)
        return x.swapaxes(0, 1).reshape((per * n_dev,) + x.shape[2:])[:N]

    status, event, t, y, counts, t_first, steps = (unshard(x) for x in res)
    return EnsembleResult(
        status=status.astype(np.int8), event=event.astype(np.int32), t=t, y=y,
        counts=counts, t_first=t_first, steps=steps,
    )
