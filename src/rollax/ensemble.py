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
* **Hybrid systems in the loop.** With a ``reset`` map, an event does not end the lane: the
  lane parks, and when enough lanes are parked or free, one vectorised pass (over the parked
  lanes only) locates their events, applies the reset map and lets them go on, in a new
  segment, from the state it returns. A mode (rolling or slipping, say) rides in the state
  as a passive component (zero rate, left out of the error norm with ``n_error``), so every
  lane may be in a different mode; per-start bookkeeping the reset map needs (switch counts,
  say) rides in ``aux``. The reset map decides which events end the run.

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
FAILED_STEPS = 3  # the step limit (per segment) or the reset limit was hit
PADDING = 4  # not a real start (padding of a chunk)
_PENDING = 5  # internal: the step holding the (terminal) event is located after the loop
_PARKED = 6  # internal: the step holding an event is located, and reset, in the loop
_LIVE = 7  # internal: integrating

STATUS_NAMES = {EVENT: "event", T_MAX: "t_max", FAILED_NAN: "nan", FAILED_STEPS: "max_steps"}


class EnsembleResult(NamedTuple):
    """Per-start results of :func:`solve_ensemble` (NumPy arrays, leading axis = start)."""

    status: np.ndarray  # (N,) int8, one of EVENT, T_MAX, FAILED_NAN, FAILED_STEPS
    event: np.ndarray  # (N,) int32: the event that ended the run, -1 if none
    t: np.ndarray  # (N,) time at the end
    y: np.ndarray  # (N, d) state at the end (with a reset map: the state it returned)
    counts: np.ndarray  # (N, n_events) crossings counted in the last segment (the ending one included)
    t_first: np.ndarray  # (N, n_events) first crossing of each crossing event in the last segment (nan if none)
    steps: np.ndarray  # (N,) attempted steps, all segments
    resets: np.ndarray  # (N,) non-terminal resets (segments - 1)
    aux: np.ndarray  # (N, p) the reset map's per-start data at the end


class _Lanes(NamedTuple):
    idx: Int[Array, " L"]  # the start held by the lane (-1: none); its record is written on refill
    live: Bool[Array, " L"]  # integrating
    status: Int[Array, " L"]  # _PARKED while parked; the record status once finished
    event: Int[Array, " L"]
    t: Float[Array, " L"]
    y: Float[Array, "L d"]
    h: Float[Array, " L"]
    k1: Float[Array, "L d"]
    sign: Float[Array, "L n"]
    count: Int[Array, "L n"]
    steps: Int[Array, " L"]
    seg: Int[Array, " L"]  # steps at the start of the current segment
    resets: Int[Array, " L"]
    aux: Float[Array, "L p"]
    # the step holding the first crossing of each crossing event (c: one slot per crossing event)
    fc_t: Float[Array, "L c"]  # its start (nan: none yet)
    fc_y: Float[Array, "L c d"]
    fc_h: Float[Array, "L c"]
    fc_sign: Float[Array, "L c"]  # the event's sign before it


class _Out(NamedTuple):
    status: Int[Array, " M"]
    event: Int[Array, " M"]
    t: Float[Array, " M"]
    y: Float[Array, "M d"]
    h: Float[Array, " M"]
    sign: Float[Array, "M n"]
    count: Int[Array, "M n"]
    steps: Int[Array, " M"]
    resets: Int[Array, " M"]
    aux: Float[Array, "M p"]
    fc_t: Float[Array, "M c"]
    fc_y: Float[Array, "M c d"]
    fc_h: Float[Array, "M c"]
    fc_sign: Float[Array, "M c"]


_RECORD = _Out._fields


class _Problem(NamedTuple):
    """The static parts of a solve (hashable: compiled kernels are cached on them)."""

    f: Callable
    events: EventSet
    reset: Callable | None
    n_error: int | None
    n_samples: int


def _queue(
    pb: _Problem,
    lanes: int,
    y0s: Float[Array, "N d"],
    aux0s: Float[Array, "N p"],
    valid: Bool[Array, " N"],
    args,
    t0: Float[Array, ""],
    t_max: Float[Array, ""],
    rtol: Float[Array, ""],
    atol: Float[Array, ""],
    max_steps: Int[Array, ""],
    max_resets: Int[Array, ""],
    dt_max: Float[Array, ""],
) -> _Out:
    """Run one work queue over the starts ``y0s`` (one device). Returns raw per-start records."""
    f, events, reset, ne = pb.f, pb.events, pb.reset, pb.n_error
    N, d = y0s.shape
    n = events.n
    L = lanes
    cross = jnp.asarray(_crossings(events), jnp.int32)
    nc = len(_crossings(events))
    fy = lambda t, y: f(t, y, args)  # noqa: E731
    gy = lambda t, y: events.fn(t, y, args)  # noqa: E731
    dtype = y0s.dtype

    def first_step(t, y, k):
        h = dopri5.initial_step(fy, t, y, k, rtol, atol, ne)
        return jnp.minimum(jnp.minimum(h, dt_max), t_max - t)

    # Per-start set-up, vectorised once: event values, k1 and the first step size.
    g0 = jax.vmap(lambda y: gy(t0, y))(y0s)
    k10 = jax.vmap(lambda y: fy(t0, y))(y0s)
    h0 = jax.vmap(lambda y, k: first_step(t0, y, k))(y0s, k10)
    # A boundary already violated at t0: without a reset map the start needs no solve; with
    # one it enters parked, at a step of length 0.
    at_start = jax.vmap(events.fired_at_start)(g0).any(axis=1) if n else jnp.zeros(N, bool)
    needs = valid if reset is not None else valid & ~at_start
    order = jnp.argsort(~needs, stable=True).astype(jnp.int32)
    nq = jnp.sum(needs).astype(jnp.int32)

    # Records, with one spare row (index N) that absorbs the writes of empty lanes.
    M = N + 1

    def blank(K):
        # per-record arrays shared by the lanes and the records: crossings and their steps
        return dict(
            event=jnp.full((K,), -1, jnp.int32),
            sign=jnp.zeros((K, n), dtype),
            count=jnp.zeros((K, n), jnp.int32),
            steps=jnp.zeros((K,), jnp.int32),
            resets=jnp.zeros((K,), jnp.int32),
            fc_t=jnp.full((K, nc), jnp.nan, dtype),
            fc_y=jnp.zeros((K, nc, d), dtype),
            fc_h=jnp.zeros((K, nc), dtype),
            fc_sign=jnp.zeros((K, nc), dtype),
        )

    first_status = jnp.where(at_start, _PENDING, T_MAX) if reset is None else T_MAX
    out = _Out(
        status=jnp.concatenate(
            [jnp.where(valid, first_status, PADDING), jnp.array([PADDING])]
        ).astype(jnp.int32),
        t=jnp.full((M,), t0, dtype),
        y=jnp.concatenate([y0s, jnp.zeros((1, d), dtype)]),
        h=jnp.zeros((M,), dtype),  # starts that end at t0: a pending 'step' with h = 0
        aux=jnp.concatenate([aux0s, jnp.zeros((1,) + aux0s.shape[1:], dtype)]),
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
        seg=jnp.zeros((L,), jnp.int32),
        aux=jnp.zeros((L,) + aux0s.shape[1:], dtype),
        **blank(L),
    )

    def flush(ln, out):
        # finished lanes write their records (others write to the spare row)
        done = (ln.idx >= 0) & ~ln.live & (ln.status != _PARKED)
        w = jnp.where(done, ln.idx, N)
        out = _Out(*(getattr(out, k).at[w].set(getattr(ln, k)) for k in _RECORD))
        return ln._replace(idx=jnp.where(done, -1, ln.idx)), out

    def refill(carry):
        ln, qp, out = carry
        ln, out = flush(ln, out)
        free = ln.idx < 0
        rank = jnp.cumsum(free) - 1
        take = free & (qp + rank < nq)
        src = order[jnp.clip(qp + rank, 0, N - 1)]
        tk = take[:, None]
        parked = take & at_start[src] if reset is not None else jnp.zeros_like(take)
        ln = ln._replace(
            idx=jnp.where(take, src, ln.idx),
            live=ln.live | (take & ~parked),
            status=jnp.where(take, jnp.where(parked, _PARKED, _LIVE), ln.status),
            event=jnp.where(take, -1, ln.event),
            t=jnp.where(take, t0, ln.t),
            y=jnp.where(tk, y0s[src], ln.y),
            h=jnp.where(take, jnp.where(parked, 0.0, h0[src]), ln.h),
            k1=jnp.where(tk, k10[src], ln.k1),
            sign=jnp.where(tk, jnp.sign(g0[src]), ln.sign),
            count=jnp.where(tk, 0, ln.count),
            steps=jnp.where(take, 0, ln.steps),
            seg=jnp.where(take, 0, ln.seg),
            resets=jnp.where(take, 0, ln.resets),
            aux=jnp.where(take.reshape((L,) + (1,) * (ln.aux.ndim - 1)), aux0s[src], ln.aux),
            fc_t=jnp.where(tk, jnp.nan, ln.fc_t),
        )
        return ln, qp + jnp.sum(take).astype(jnp.int32), out

    is_cross = jnp.asarray(events.kinds, jnp.int32) == CROSSING

    def serve_one(t, y, h, sign, count, steps, resets, aux, fc_t):
        # Locate the event of a parked lane (h = 0: it fired at the state itself), apply the
        # reset map and set up the next segment.
        g_here = gy(t, y)
        at0 = h == 0.0
        e0 = jnp.argmax(events.fired_at_start(g_here)).astype(jnp.int32)
        found, e1, theta, y_at = _locate(pb, args, t, y, jnp.where(at0, 1.0, h), sign, count,
                                         jnp.broadcast_to(~at0, (n,)))
        e = jnp.where(at0, e0, e1)
        te = jnp.where(at0, t, t + theta * h)
        ye = jnp.where(at0, y, y_at)
        t_n, y_n, aux_n, term = reset(te, ye, aux, e, args)
        lost = ~at0 & ~found  # cannot happen unless the redone step differs: report it
        term = term & ~lost
        g_n = gy(t_n, y_n)
        k1_n = fy(t_n, y_n)
        again = ~term & jnp.any(events.fired_at_start(g_n))
        resets_n = resets + jnp.where(term, 0, 1)
        over = ~term & ~again & (t_n >= t_max)
        capped = ~term & (resets_n > max_resets)
        status = jnp.select([lost, term, capped, over, again],
                            [FAILED_NAN, EVENT, FAILED_STEPS, T_MAX, _PARKED], _LIVE)
        live = status == _LIVE
        h_n = jnp.where(again, 0.0, first_step(t_n, y_n, k1_n))
        # a terminal event keeps the segment's crossings (the ending one counted)
        count_n = jnp.where(term, count + (is_cross & (jnp.arange(n) == e)), 0)
        return (live, status.astype(jnp.int32), jnp.where(term, e, -1), t_n, y_n, h_n, k1_n,
                jnp.sign(g_n), count_n.astype(count.dtype), steps, resets_n, aux_n,
                jnp.where(term, fc_t, jnp.nan))

    def serve(carry):
        ln, qp, out = carry
        parked = (ln.idx >= 0) & ~ln.live & (ln.status == _PARKED)
        names = ("live", "status", "event", "t", "y", "h", "k1", "sign", "count", "seg",
                 "resets", "aux", "fc_t")
        res = _blocked(serve_one, parked, max(16, L // 16),
                       (ln.t, ln.y, ln.h, ln.sign, ln.count, ln.steps, ln.resets, ln.aux,
                        ln.fc_t),
                       tuple(getattr(ln, k) for k in names))
        return ln._replace(**dict(zip(names, res))), qp, out

    sample_stages = jnp.asarray(dopri5.SAMPLE_STAGES)
    stop_status = _PENDING if reset is None else _PARKED

    def step_lanes(ln: _Lanes) -> _Lanes:
        # one attempted step of every live lane (any number of lanes)
        live = ln.live
        y1, err, ks, _, gs = jax.vmap(lambda t, y, h, k: dopri5.step(fy, t, y, h, k, gy))(
            ln.t, ln.y, ln.h, ln.k1
        )
        en = jax.vmap(lambda e, a, b: dopri5.error_norm(e, a, b, rtol, atol, ne))(err, ln.y, y1)
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
        first = go[:, None] & (ln.count[:, cross] == 0) & (count2[:, cross] > 0)
        fk = first[:, :, None]

        # Step-size control (elementary controller with safety 0.9, factor in [0.2, 10]).
        fac = jnp.where(finite, jnp.clip(0.9 * en ** (-0.2), 0.2, 10.0), 0.2)
        fac = jnp.where(accept, fac, jnp.minimum(fac, 1.0))
        t_new = jnp.where(go, t1, ln.t)
        h_new = jnp.minimum(jnp.minimum(ln.h * fac, dt_max), t_max - t_new)
        # a hit keeps its step (it is redone to locate the event); finished lanes keep theirs
        h_new = jnp.where(hit | ~live, ln.h, h_new)
        tiny = ln.h < 1e-14 * jnp.maximum(1.0, jnp.abs(ln.t))
        nan_fail = live & (~jnp.all(jnp.isfinite(ln.y), axis=1) | tiny)
        step_fail = live & ~nan_fail & ~hit & ~at_end & (steps - ln.seg >= max_steps)
        done = hit | at_end | nan_fail | step_fail
        status = jnp.select(
            [hit, at_end, nan_fail], [stop_status, T_MAX, FAILED_NAN], FAILED_STEPS
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
            fc_sign=jnp.where(first, ln.sign[:, cross], ln.fc_sign),
        )
        return ln

    # The tail: once the queue is empty and few lanes are live (a few long runs), step only
    # the first S lanes, the live ones moved there, instead of paying for all L.
    S = max(16, L // 16)

    def narrow_step(ln: _Lanes) -> _Lanes:
        order = jnp.argsort(~ln.live, stable=True)
        ln = jax.tree_util.tree_map(lambda a: a[order], ln)
        head = step_lanes(jax.tree_util.tree_map(lambda a: a[:S], ln))
        return jax.tree_util.tree_map(lambda a, b: a.at[:S].set(b), ln, head)

    def advance(carry):
        ln, qp, out = carry
        if S < L:
            narrow = (qp >= nq) & (jnp.sum(ln.live) <= S)
            ln = jax.lax.cond(narrow, narrow_step, step_lanes, ln)
        else:
            ln = step_lanes(ln)
        n_idle = jnp.sum(~ln.live)
        pending = qp < nq
        if reset is not None:
            pending = pending | jnp.any(~ln.live & (ln.status == _PARKED) & (ln.idx >= 0))
        need = pending & ((n_idle >= max(1, L // 16)) | (n_idle == L))
        return jax.lax.cond(need, service, lambda c: c, (ln, qp, out))

    service = refill if reset is None else (lambda c: refill(serve(c)))

    def cond(carry):
        ln, qp, _ = carry
        parked = jnp.any((ln.idx >= 0) & ~ln.live & (ln.status == _PARKED))
        return jnp.any(ln.live) | (qp < nq) | parked

    carry = refill((lanes0, jnp.int32(0), out))
    if reset is not None:
        carry = serve(carry)
    ln, _, out = jax.lax.while_loop(cond, advance, carry)
    _, out = flush(ln, out)
    return out


def _crossings(events: EventSet) -> tuple[int, ...]:
    """Indices of the crossing events (each has a first-crossing slot)."""
    return tuple(i for i, k in enumerate(events.kinds) if k == CROSSING)


def _locate(
    pb: _Problem,
    args,
    t: Float[Array, ""],
    y: Float[Array, " d"],
    h: Float[Array, ""],
    sign: Float[Array, " n"],
    count: Int[Array, " n"],
    mask: Bool[Array, " n"] | None = None,
    targets: tuple[int, ...] | None = None,
) -> tuple[Bool[Array, ""], Int[Array, ""], Float[Array, ""], Float[Array, " d"]]:
    """Redo the step ``(t, y, h)`` and locate the earliest firing root of the events
    (those in ``mask``, default all) on its dense output.

    Returns ``(found, e, theta, y_at)``: whether an event fires in the step, which one fires
    first, where (as a fraction of h), and the interpolated state there. The bracket is the
    first interval of ``n_samples`` equally spaced samples of the interpolant in which an event
    fires (if the interpolant shows no firing, a graze seen only at a stage state within the
    tolerance, the stage samples give it). One root finder runs on the lower envelope of the
    events that fire in that interval (each oriented to be positive before it fires), whose
    first root is the earliest of theirs.
    """
    events, n_samples = pb.events, pb.n_samples
    fy = lambda t_, y_: pb.f(t_, y_, args)  # noqa: E731
    gy = lambda t_, y_: events.fn(t_, y_, args)  # noqa: E731
    k1 = fy(t, y)
    y1, _, ks, _, gs = dopri5.step(fy, t, y, h, k1, gy)
    dtype = y.dtype
    n = events.n

    def g_at(theta):
        return gy(t + theta * h, dopri5.interpolate(y, y1, ks, h, theta))

    tg = None if targets is None else jnp.asarray(targets, jnp.int32)
    thetas = jnp.linspace(0.0, 1.0, n_samples + 1, dtype=dtype)[1:]
    vals = jax.vmap(g_at)(thetas)
    fired, first, _, _ = scan_samples(events, vals, sign, count, tg)
    # Fallback: the stage states that made the kernel stop.
    st_th = jnp.asarray(dopri5.SAMPLE_THETAS, dtype)
    st_vals = gs[jnp.asarray(dopri5.SAMPLE_STAGES)]
    fired_s, first_s, _, _ = scan_samples(events, st_vals, sign, count, tg)
    if mask is not None:
        fired, fired_s = fired & mask, fired_s & mask
    use_stage = ~jnp.any(fired)
    fired = jnp.where(use_stage, fired_s, fired)
    first = jnp.where(use_stage, first_s, first)
    k = jnp.min(jnp.where(fired, first, n_samples))
    cand = fired & (first == k)
    ks_ = jnp.clip(k, 0, n_samples - 1)
    kst = jnp.clip(k, 0, st_th.shape[0] - 1)
    a = jnp.where(k == 0, 0.0, jnp.where(use_stage, st_th[kst - 1], thetas[ks_ - 1]))
    b = jnp.where(use_stage, st_th[kst], thetas[ks_])
    ga_all = jnp.where(k == 0, gy(t, y), jnp.where(use_stage, st_vals[kst - 1], vals[ks_ - 1]))
    gb_all = jnp.where(use_stage, st_vals[kst], vals[ks_])
    # orientation: boundaries fire at <= 0; a crossing fires on leaving its sign before
    kinds = jnp.asarray(events.kinds, jnp.int32)
    orient = jnp.where(kinds == CROSSING, -jnp.sign(gb_all), 1.0).astype(dtype)

    def envelope(g):
        return jnp.min(jnp.where(cand, orient * g, jnp.inf))

    G = lambda th: envelope(g_at(th))  # noqa: E731
    found = jnp.any(cand)
    ga, gb = envelope(ga_all), envelope(gb_all)
    # nothing to locate (padding of a block, a lane parked at its start): an empty bracket,
    # so that the vmapped root finder does not run on for those lanes
    root = locate_root(G, jnp.where(found, a, b), b, jnp.where(found, ga, 1.0),
                       jnp.where(found, gb, -1.0))
    root = jnp.where(found, root, 1.0)
    g_root = g_at(root)
    e = jnp.argmin(jnp.where(cand, orient * g_root, jnp.inf)).astype(jnp.int32) if n else jnp.int32(0)
    return found, e, root, dopri5.interpolate(y, y1, ks, h, root)


def _blocked(fn, mask: Bool[Array, " M"], block: int, inputs, outputs):
    """Apply ``fn`` (vmapped) only to the entries selected by ``mask``, ``block`` at a time.

    ``outputs`` are the default per-entry values (leading axis M). The cost scales with the
    number of selected entries, not with M, which matters because most starts need no root
    finding.
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
        w = jnp.where(ok, idx, M)  # out of range: dropped
        return tuple(o.at[w].set(r, mode="drop") for o, r in zip(outs, res))

    n_blocks = (count + block - 1) // block
    return jax.lax.fori_loop(0, n_blocks, body, tuple(outputs))


def _finish(
    pb: _Problem, out: _Out, args, block: int = 512
) -> tuple[Int[Array, " M"], Int[Array, " M"], Float[Array, " M"], Float[Array, "M d"],
           Int[Array, "M n"], Float[Array, "M n"]]:
    """Post-pass: locate the ending event of every pending start (no reset map), and the
    first crossings of the crossing events, on the dense output of the step that holds them."""
    events = pb.events
    n = events.n
    M = out.t.shape[0]
    if n == 0:  # no events: nothing to locate
        return (out.status, out.event, out.t, out.y, out.count, jnp.zeros((M, 0), out.t.dtype))
    is_cross = jnp.asarray(events.kinds, jnp.int32) == CROSSING
    pending = out.status == _PENDING
    at_start = pending & (out.h == 0.0)  # ended at the very start: no step to search

    # Starts that ended at t0: the first boundary already violated there.
    g0 = jax.vmap(lambda t, y: events.fn(t, y, args))(out.t, out.y)
    e0 = jnp.argmax(jax.vmap(events.fired_at_start)(g0), axis=1).astype(jnp.int32)

    def end_one(t, y, h, sign, count):
        _, e, theta, y_at = _locate(pb, args, t, y, h, sign, count)
        return e, t + theta * h, y_at

    event, t_end, y_end = _blocked(
        end_one, pending & ~at_start, block, (out.t, out.y, out.h, out.sign, out.count),
        (jnp.where(at_start, e0, out.event), out.t, out.y),
    )
    counts = out.count + (
        pending[:, None] & is_cross[None, :] & (event[:, None] == jnp.arange(n)[None, :])
    ).astype(out.count.dtype)
    status = jnp.where(pending, EVENT, out.status)

    # First crossings (only of crossing events, only where one was seen).
    t_first = jnp.full((M, n), jnp.nan, out.t.dtype)
    ones = tuple(1 for _ in events.kinds)
    for c, e in enumerate(_crossings(events)):
        only = jnp.arange(n) == e

        def first_one(t, y, h, sign_e, only=only):
            sign = jnp.where(only, sign_e, 0.0)  # the other events are masked out
            found, _, theta, _ = _locate(pb, args, t, y, h, sign, jnp.zeros(n, jnp.int32),
                                         mask=only, targets=ones)
            return (jnp.where(found, t + theta * h, jnp.nan),)

        seen = jnp.isfinite(out.fc_t[:, c])
        (tf,) = _blocked(first_one, seen, block,
                         (out.fc_t[:, c], out.fc_y[:, c], out.fc_h[:, c], out.fc_sign[:, c]),
                         (t_first[:, e],))
        # a crossing that ends the run is also the first one when none was seen before
        tf = jnp.where(~seen & (event == e) & (status == EVENT), t_end, tf)
        t_first = t_first.at[:, e].set(tf)
    return status, event, t_end, y_end, counts, t_first


@functools.lru_cache(maxsize=32)
def _compiled(pb: _Problem, lanes: int, n_dev: int):
    def run(y0s, aux0s, valid, args, t0, t_max, rtol, atol, max_steps, max_resets, dt_max):
        out = _queue(pb, lanes, y0s, aux0s, valid, args, t0, t_max, rtol, atol, max_steps,
                     max_resets, dt_max)
        status, event, t, y, counts, t_first = _finish(pb, out, args)
        return (status[:-1], event[:-1], t[:-1], y[:-1], counts[:-1], t_first[:-1],
                out.steps[:-1], out.resets[:-1], out.aux[:-1])

    return jax.pmap(run, in_axes=(0, 0, 0) + (None,) * 8, devices=jax.local_devices()[:n_dev])


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
    reset: Callable | None = None,
    aux: np.ndarray | None = None,
    n_error: int | None = None,
    max_resets: int = 10_000,
) -> EnsembleResult:
    """Integrate ``y' = f(t, y, args)`` from each row of ``y0s`` until its first terminating
    event (earliest root among ``events``, see :mod:`rollax.events`) or ``t_max``.

    ``f``, ``events`` and ``reset`` must be stable objects (module-level functions / a
    module-level :class:`EventSet`): compiled kernels are cached on their identity; pass
    parameters through ``args`` (a pytree of arrays) so that new parameter values do not
    recompile. The starts are dealt round-robin to ``devices`` JAX devices (default: all local
    devices), each running its own work queue of ``lanes`` lanes. Returns an
    :class:`EnsembleResult`; starts whose state became non-finite or that hit ``max_steps``
    are reported with a failure status.

    **Hybrid systems.** With ``reset(t, y, aux, event, args) -> (t, y, aux, terminal)``, every
    event is located (the earliest root, as without a reset) and passed to the reset map with
    the state there; unless it returns ``terminal``, the start goes on from the returned time
    and state in a new segment (crossing counts and first crossings start afresh, the step size
    is chosen anew). A returned state that violates a boundary event fires it at once. ``aux``
    ``(N, p)`` is per-start data only the reset map sees and changes (default: none); the
    record of a terminal event is the time, state and ``aux`` the reset map returned.
    ``max_steps`` bounds each segment, ``max_resets`` the number of segments (then
    ``FAILED_STEPS``). ``n_error``: only the first ``n_error`` components enter the error norm
    (the rest are passive: a mode, say; default: all).
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
    if n_error is not None and not 1 <= n_error <= d:
        raise ValueError(f"n_error = {n_error!r} is outside the allowed range [1, {d}]")
    aux = np.zeros((N, 0)) if aux is None else np.asarray(aux, dtype=np.float64)
    if aux.ndim != 2 or aux.shape[0] != N:
        raise ValueError(f"aux must have shape ({N}, p), got {aux.shape}")
    if aux.shape[1] and reset is None:
        raise ValueError("aux is only used by a reset map; pass reset= too")
    n_dev = devices or jax.local_device_count()
    if not 1 <= n_dev <= jax.local_device_count():
        raise ValueError(f"devices = {n_dev!r} is outside the allowed range [1, {jax.local_device_count()}]")
    valid = np.ones(N, bool) if valid is None else np.asarray(valid, bool)
    per = -(-max(N, 1) // n_dev)
    pad = per * n_dev - N

    def shard(x):
        # round-robin: start i goes to device i % n_dev
        x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)]) if pad else x
        return x.reshape((per, n_dev) + x.shape[1:]).swapaxes(0, 1)

    pb = _Problem(f, events, reset, None if n_error in (None, d) else int(n_error), int(n_samples))
    run = _compiled(pb, int(lanes), n_dev)
    args = jax.tree_util.tree_map(jnp.asarray, args)
    res = run(shard(y0s), shard(aux), shard(valid), args, float(t0), float(t_max), float(rtol),
              float(atol), int(max_steps), int(max_resets), float(dt_max))

    def unshard(x):
        x = np.asarray(x)
        return x.swapaxes(0, 1).reshape((per * n_dev,) + x.shape[2:])[:N]

    status, event, t, y, counts, t_first, steps, resets, aux_out = (unshard(x) for x in res)
    return EnsembleResult(
        status=status.astype(np.int8), event=event.astype(np.int32), t=t, y=y,
        counts=counts, t_first=t_first, steps=steps, resets=resets, aux=aux_out,
    )
