"""The fused ensemble path: each start integrated from t0 to its end by one lane of one program.

Where the work queue (:mod:`rollax._integrate.queue`) keeps a few wide lanes busy by refilling them (a
CPU design: gathers, sorts and scatters in the loop), this path writes the whole solve of one
start as one per-start program (``_one_start``: the steps, the event samples and their walk,
the root location, the reset map and the first crossings, in nested ``while`` loops) and maps
it over the starts:

* ``"fused"`` on a GPU: a Pallas kernel (Triton backend). A program holds a block of ``B``
  starts, one per GPU thread; the per-start program is rewritten structure-of-arrays by
  :mod:`rollax._integrate._soa` (every value a ``(B,)`` array, so the state stays in registers), the
  inputs are read once and each start's record written once. No per-step launches.
* on a CPU the same kernel runs in Pallas's interpret mode (tests; not a performance path),
  or ``jax.vmap`` of the per-start program (``interpret="vmap"``), the reference of the
  structure-of-arrays rewrite.

The arithmetic is the queue's, function for function (``queue._redo``, ``_sample``,
``events.scan``, ``queue._locate``, the step-size control, the reset service), so the
results agree with the queue's to rounding: the conformance test holds them to it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from rollax._integrate import _soa
from rollax._integrate import queue as E


def _pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _store_dtype(dt) -> np.dtype:
    # booleans and small integers travel as float64, exactly (Triton loads and stores no i1,
    # and one tile is one load or store: see _Tiles)
    dt = np.dtype(dt)
    return np.dtype(np.float64) if dt.kind in "biu" and dt.itemsize <= 4 else dt


def _split_rows(tile) -> list:
    """The rows of a ``(W, B)`` tile (W a power of two) as ``(B,)`` arrays: a tree of
    two-way splits (Triton splits a dimension of 2 only)."""
    W = tile.shape[0]
    return (
        [jnp.reshape(r, tile.shape[1:]) for r in jnp.split(tile, W, axis=0)] if W > 1 else [tile[0]]
    )


def _join_rows(rows: list):
    """A ``(W, B)`` tile from W (a power of two) ``(B,)`` arrays: a tree of two-way joins
    (a stack of two along the last axis, Triton's join, then the pair axis moved first)."""
    parts = [jnp.reshape(r, (1,) + r.shape) for r in rows]
    while len(parts) > 1:
        nxt = []
        for a, b in zip(parts[0::2], parts[1::2]):
            z = jax.lax.concatenate([a[..., None], b[..., None]], a.ndim)  # (k, B, 2)
            z = jnp.transpose(z, (2, 0, 1))  # (2, k, B): a's rows, then b's
            nxt.append(jnp.reshape(z, (2 * a.shape[0],) + a.shape[1:]))
        parts = nxt
    return parts[0]


class _Tiles(NamedTuple):
    """How the per-start leaves travel: one ``(W, N)`` array per storage dtype (the starts
    along the contiguous axis), W the leaves' elements padded to a power of two. Measured
    (2026-11-26, pip triton 3.9 for sm_90 on a CPU): Triton's
    coalescing pass costs time per load or store times the kernel's size squared, so a load
    or store per element (about 200 of them for the slipping lane) made it the whole compile:
    48 s for the slipping set-up kernel alone (41 s of it in that pass), 48 s for all four of
    its kernels with one float64 tile each (``benchmarks/RESULTS.md``, stop 34)."""

    dtypes: tuple  # the storage dtypes, in order of first appearance
    where: tuple  # per leaf: (group, first row, elements)
    widths: tuple  # per group: W

    @staticmethod
    def of(shapes, dtypes) -> "_Tiles":
        groups: list = []
        used: dict = {}
        where = []
        for shp, dt in zip(shapes, dtypes):
            sd = _store_dtype(dt)
            if sd not in groups:
                groups.append(sd)
                used[sd] = 0
            n = int(np.prod(shp))
            where.append((groups.index(sd), used[sd], n))
            used[sd] += n
        widths = tuple(_pow2(max(2, used[g])) for g in groups)
        return _Tiles(tuple(groups), tuple(where), widths)

    def pack(self, leaves, N: int) -> list:
        cols: list = [[] for _ in self.dtypes]
        for x, (g, _, n) in zip(leaves, self.where):
            if n:
                cols[g].append(jnp.reshape(x, (N, n)).astype(self.dtypes[g]))
        out = []
        for g, (dt, W) in enumerate(zip(self.dtypes, self.widths)):
            x = jnp.concatenate(
                cols[g] + [jnp.zeros((N, W - sum(c.shape[1] for c in cols[g])), dt)], axis=1
            )
            out.append(x.T)  # (W, N)
        return out

    def unpack(self, tiles, shapes, dtypes, N: int) -> list:
        out = []
        for (g, r, n), shp, dt in zip(self.where, shapes, dtypes):
            x = tiles[g][r : r + n].T if n else jnp.zeros((N, 0), self.dtypes[g])
            x = x != 0 if np.dtype(dt) == np.bool_ else x.astype(dt)
            out.append(jnp.reshape(x, (N,) + tuple(shp)))
        return out


def pallas_map(
    fn: Callable,
    lane_example: tuple,
    shared: tuple,
    B: int,
    *,
    interpret: bool = False,
    num_warps: int = 1,
    num_stages: int = 1,
) -> Callable:
    """``run(lane_inputs) -> outputs``: the per-start ``fn(*lane_args, *shared)`` over N starts
    as one Pallas kernel, ``B`` starts per program.

    ``lane_example``: one start's arguments (arrays, any small shapes); ``shared``: arrays the
    same for every start (compiled in as inputs read once per program). ``run`` takes the
    per-start leaves with a leading axis of N (a multiple of B) and returns the output leaves
    with a leading axis of N. The per-start inputs and outputs travel as one tile per dtype
    (:class:`_Tiles`): a program makes one load and one store per dtype."""
    from jax.experimental import pallas as pl

    lane_leaves, lane_tree = jax.tree.flatten(lane_example)
    sh_leaves, sh_tree = jax.tree.flatten(shared)
    lane_shapes = [np.shape(x) for x in lane_leaves]
    lane_dtypes = [jnp.result_type(x) for x in lane_leaves]
    sh_np = [jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)) for x in sh_leaves]

    def per_start(*flat):
        lane_args = jax.tree.unflatten(lane_tree, list(flat[: len(lane_leaves)]))
        sh_args = jax.tree.unflatten(sh_tree, list(flat[len(lane_leaves) :]))
        return fn(*lane_args, *sh_args)

    example = [jax.ShapeDtypeStruct(s, d) for s, d in zip(lane_shapes, lane_dtypes)] + list(sh_np)
    closed, out_shape = _soa.trace(per_start, *example)
    out_leaves = jax.tree.leaves(out_shape)
    out_tree = jax.tree.structure(out_shape)
    all_shapes = [tuple(o.shape) for o in out_leaves]
    all_dtypes = [np.dtype(o.dtype) for o in out_leaves]
    # Only what the kernel computes travels through it (_pruned): an output that is a lane
    # input unchanged is that input, one that depends on no input is made outside, and a lane
    # input that no computed output needs is not loaded.
    closed, through, consts, used = _pruned(closed, len(lane_leaves))
    computed = [i for i in range(len(out_leaves)) if through[i] is None and i not in consts]
    out_shapes = [all_shapes[i] for i in computed]
    true_dtypes = [all_dtypes[i] for i in computed]
    in_keep = [j for j in range(len(lane_leaves)) if used[j]]
    lane_shapes = [lane_shapes[j] for j in in_keep]
    lane_dtypes = [lane_dtypes[j] for j in in_keep]
    t_in = _Tiles.of(lane_shapes, lane_dtypes)
    t_out = _Tiles.of(out_shapes, true_dtypes)
    # shared leaves: each one input read whole (padded to a power of two), its elements
    # loaded one by one as scalars
    sh_sizes = [max(1, int(np.prod(x.shape))) for x in sh_np]
    sh_pad = [_pow2(max(2, n)) for n in sh_sizes]
    n_in = len(t_in.dtypes)

    def kernel(*refs):
        ins_l, ins_s = refs[:n_in], refs[n_in : n_in + len(sh_np)]
        outs = refs[n_in + len(sh_np) :]
        rows = [_split_rows(ref[...]) for ref in ins_l]
        args = []
        for shape, dt, (g, r, n) in zip(lane_shapes, lane_dtypes, t_in.where):
            els = rows[g][r : r + n]
            if dt == np.bool_:
                els = [e != 0 for e in els]
            elif dt != t_in.dtypes[g]:
                els = [e.astype(dt) for e in els]
            args.append(_soa.lane_array(els, shape))
        for x, ref in zip(sh_np, ins_s):
            args.append(_soa.lane_array([ref[i] for i in range(int(np.prod(x.shape)))], x.shape))
        res = _soa.evaluate(closed, B, args)
        out_rows: list = [[] for _ in t_out.dtypes]
        for o, dt, (g, _, _) in zip(res, true_dtypes, t_out.where):
            out_rows[g] += [
                _soa.full(e, B, np.int32 if dt == np.bool_ else dt).astype(t_out.dtypes[g])
                for e in o.reshape(-1)
            ]
        for g, (dt, W) in enumerate(zip(t_out.dtypes, t_out.widths)):
            rows_g = out_rows[g] + [jnp.zeros((B,), dt)] * (W - len(out_rows[g]))
            outs[g][...] = _join_rows(rows_g)

    def run(lane_inputs, shared_inputs=None):
        from jax.experimental.pallas import triton as plgpu

        every_input = jax.tree.leaves(lane_inputs)
        N = every_input[0].shape[0]
        if N % B:
            raise ValueError(f"{N} starts is not a multiple of the block of {B}")
        flat_l = t_in.pack([every_input[j] for j in in_keep], N)
        sh = (
            [np.asarray(x) for x in jax.tree.leaves(shared)]
            if shared_inputs is None
            else [jnp.asarray(x) for x in jax.tree.leaves(shared_inputs)]
        )
        flat_s = [
            jnp.concatenate([jnp.reshape(x, (-1,)), jnp.zeros((p - x.size,), x.dtype)])
            for x, p in zip(sh, sh_pad)
        ]
        in_specs = [pl.BlockSpec((W, B), lambda i: (0, i)) for W in t_in.widths] + [
            pl.BlockSpec((p,), lambda i: (0,)) for p in sh_pad
        ]
        out_specs = [pl.BlockSpec((W, B), lambda i: (0, i)) for W in t_out.widths]
        out_shapes_flat = [
            jax.ShapeDtypeStruct((W, N), dt) for W, dt in zip(t_out.widths, t_out.dtypes)
        ]
        params = getattr(plgpu, "CompilerParams", None) or getattr(plgpu, "TritonCompilerParams")
        kw = (
            {}
            if interpret
            else {"compiler_params": params(num_warps=num_warps, num_stages=num_stages)}
        )
        tiles = pl.pallas_call(
            kernel,
            out_shape=out_shapes_flat,
            grid=(N // B,),
            in_specs=in_specs,
            out_specs=out_specs,
            interpret=interpret,
            **kw,
        )(*flat_l, *flat_s)
        got = iter(t_out.unpack(tiles, out_shapes, true_dtypes, N))
        outs = []
        for i, (shp, dt) in enumerate(zip(all_shapes, all_dtypes)):
            j = through[i]
            if j is not None:
                outs.append(every_input[j])
            elif i in consts:
                outs.append(jnp.broadcast_to(jnp.asarray(consts[i], dt), (N,) + shp))
            else:
                outs.append(next(got))
        return jax.tree.unflatten(out_tree, outs)

    return run


def _pruned(closed, n_lane: int):
    """What of the per-start program ``closed`` (a closed jaxpr of the lane leaves, then the
    shared ones) a kernel must compute: ``(closed', through, consts, used)``. ``through[i]``:
    the lane input that output ``i`` is, unchanged (else None); ``consts``: the value of each
    output that depends on no input (blank records); ``closed'``: the program of the other
    outputs only, of the lane inputs ``used`` (and every shared one). Such outputs and inputs
    cost the kernel a row of its tile each, in its load's tree of splits and its store's tree
    of joins (Triton operations per row, and Triton's compile time grows faster than the
    kernel's size: measured, docs/fused.md); the set-up's blank records and the serve's
    first-crossing records, which it neither reads nor changes, were most of their tiles."""
    from jax._src.interpreters import partial_eval as pe

    jaxpr = closed.jaxpr
    n_out = len(jaxpr.outvars)
    where_in = {v: j for j, v in enumerate(jaxpr.invars[:n_lane])}
    through = [where_in.get(v) if isinstance(v, jcore.Var) else None for v in jaxpr.outvars]
    known, _, unknown, _ = pe.partial_eval_jaxpr_nounits(
        closed, [True] * len(jaxpr.invars), instantiate=False
    )
    from jax._src import core as _core

    with jax.ensure_compile_time_eval():  # (concrete, also inside a traced program)
        vals = iter(_core.eval_jaxpr(known.jaxpr, known.consts))
    consts = {}
    for i, u in enumerate(unknown):
        if not u:
            v = next(vals)
            if through[i] is None:
                consts[i] = np.asarray(v)
    keep = [through[i] is None and i not in consts for i in range(n_out)]
    body, used_consts, used = pe.dce_jaxpr_consts(
        jaxpr,
        keep,
        instantiate=[False] * (len(jaxpr.constvars) + n_lane)
        + [True] * (len(jaxpr.invars) - n_lane),
    )
    cvals = [c for c, u in zip(closed.consts, used_consts) if u]
    return jcore.ClosedJaxpr(body, cvals), through, consts, used


class Phases(NamedTuple):
    """The per-start program of a problem in four phases, each a per-start function of one
    start's lane (an ``queue._Lanes`` of one lane, its leaves without the lane axis):

    * ``setup(y0, aux0, valid, bl) -> lane``: the start's set-up (the queue's ``init``);
    * ``serve(lane) -> lane``: a parked start's event located, reset applied, next segment set
      up (the queue's service; nothing for a start that is not parked);
    * ``run(lane) -> lane``: steps while the start is live (until it ends or parks);
    * ``finish(lane) -> (status, event, t, y, counts, t_first, steps, resets, aux, rejected)``.

    A start's solve is ``setup``, then ``serve`` and ``run`` in turn while it is live or
    parked, then ``finish``: the queue's sequence of operations for that start. On a GPU each
    phase is its own kernel (see :func:`_runner`)."""

    setup: Callable
    serve: Callable
    run: Callable
    finish: Callable
    hybrid: bool  # a reset map: serve is needed


def _going(lane):
    return lane.live | (lane.status == E._PARKED)


def phases(pb, sargs: tuple, sc) -> Phases:
    """The four phases of problem ``pb`` (an ``queue._KernelProblem``), with the queue's
    arithmetic (``queue._machine``'s per-lane pieces on one lane, then ``queue._finish``
    on its one record); ``pb.rolled``: the Runge-Kutta stages and event samples in loops
    (see :func:`_with_rolled`)."""
    _, _, _, ops = E._machine(pb, 1, sargs, E._Scalars(*sc))
    events, reset = pb.events, pb.reset
    n = events.n
    K = pb.n_samples
    one_ = lambda x: x[None]  # noqa: E731 - one lane
    lane1 = lambda ln: jax.tree.map(lambda x: x[0], ln)  # noqa: E731 - the lane axis off

    def setup(y0, aux0, valid, bl):
        d = y0.shape[0]
        dtype = y0.dtype
        g0, k10, h0, sign0, bad0, y0 = ops.setup(y0, bl)
        at_start = jnp.any(events.fired_at_start(g0, sign0)) if n else jnp.zeros((), bool)
        # as the queue's init and refill: a start with a boundary violated at t0 needs no solve
        # (with a reset map it enters parked, at a step of length 0); a non-finite one fails
        parked = at_start & (reset is not None)
        runs = valid & ~bad0 & (~at_start | (reset is not None))
        first_status = E.T_MAX if reset is not None else jnp.where(at_start, E._PENDING, E.T_MAX)
        first_status = jnp.where(bad0, E.FAILED_NAN, first_status)
        status = jnp.where(
            runs, jnp.where(parked, E._PARKED, E._LIVE), jnp.where(valid, first_status, E.PADDING)
        ).astype(jnp.int32)
        return lane1(
            E._Lanes(
                idx=jnp.zeros((1,), jnp.int32),
                live=one_(status == E._LIVE),
                status=one_(status),
                t=jnp.full((1,), ops.t_start, dtype),
                y=one_(y0),
                h=one_(jnp.where(runs & ~parked, h0, 0.0).astype(dtype)),
                seg=jnp.zeros((1,), jnp.int32),
                aux=one_(aux0),
                bargs=tuple(one_(b) for b in bl),
                hit_y1=jnp.zeros((1, d if ops.store else 0), dtype),
                hit_coef=jnp.zeros((1, ops.n_coef, d), dtype),
                hit_vals=jnp.zeros((1, K if ops.store else 0, n), dtype),
                **{**ops.blank(1, d, dtype), "k1": one_(k10), "sign": one_(sign0)},
            )
        )

    def serve(lane):
        if reset is None:
            return lane
        names = E._SERVED
        ins = tuple(
            one_(getattr(lane, k))
            for k in ("t", "y", "h", "k1", "sign", "count", "t_zero", "steps", "resets", "aux")
            + ("fc_t", "hit_y1", "hit_coef", "hit_vals")
        ) + tuple(one_(b) for b in lane.bargs)
        now = tuple(one_(getattr(lane, k)) for k in names)
        # the queue's serve (the new segment counts its steps from here); only the fields it
        # reads go in and only those it changes come out, the rest of the lane passes by
        # untouched (so that the serve kernel neither loads nor stores them: _pruned)
        res = jax.lax.cond(
            lane.status == E._PARKED,
            lambda xs, _: tuple(ops.serve_block(*xs)),
            lambda _, cur: cur,
            ins,
            now,
        )
        return lane._replace(**{k: r[0] for k, r in zip(names, res)})

    def run(lane):
        ln = jax.lax.while_loop(lambda l_: l_.live[0], ops.step_lanes, jax.tree.map(one_, lane))
        return lane1(ln)

    def finish(lane):
        ln = jax.tree.map(one_, lane)
        out = E._Out(*(getattr(ln, k) for k in E._RECORD))
        status, event, t, y, counts, t_first = E._finish(pb, out, ln.bargs, sargs, direct=True)
        return (
            status[0],
            event[0],
            t[0],
            y[0],
            counts[0],
            t_first[0],
            ln.steps[0],
            ln.resets[0],
            ln.aux[0],
            ln.rejected[0],
        )

    return Phases(setup, serve, run, finish, reset is not None)


def start_program(pb, sargs: tuple, sc) -> Callable:
    """The per-start program of problem ``pb``: ``one(y0, aux0, valid, bl) -> (status, event,
    t, y, counts, t_first, steps, resets, aux, rejected)`` for one start, the phases
    (:func:`phases`) run in turn."""
    ph = phases(pb, sargs, sc)

    def one(y0, aux0, valid, bl):
        lane = jax.lax.while_loop(
            _going, lambda l_: ph.run(ph.serve(l_)), ph.setup(y0, aux0, valid, bl)
        )
        return ph.finish(lane)

    return one


#: How the fused path runs off a GPU: "interpret" (the Pallas kernel in interpret mode) or
#: "vmap" (``jax.vmap`` of the per-start program: the same arithmetic, compiled by XLA; the
#: reference of the structure-of-arrays rewrite, and far faster than interpreting)
CPU_MODE = "interpret"

#: Starts per program of the Pallas kernel (one GPU thread each): a warp.
BLOCK = 32


def rows(n: int, block: int, mode: str) -> int:
    """The rows a chunk of ``n`` starts is padded to: a power of two, at least ``block`` and,
    compiled for a GPU, at least ``queue.SIZE_FLOOR``. The rows are part of the compiled
    kernel's shapes, so every chunk of one class reuses it; on a GPU a compile takes
    minutes (the shot's four kernels: 100 s on an H100, stop 43) and a padding row is an
    invalid start that ends in the set-up, so every ensemble of up to 4096 starts shares one
    program. Off a GPU (interpret mode, vmap) padding rows cost their set-up each: only the
    power of two."""
    m = max(block, _pow2(n))
    return max(m, E.SIZE_FLOOR) if mode == "gpu" else m


@functools.lru_cache(maxsize=16)
def _runner(pb, shapes: tuple, mode: str, B: int, num_warps: int) -> jax.stages.Wrapped:
    """The compiled fused solve of ``pb`` for per-start inputs of ``shapes`` ((d,), (p,), the
    per-start leaves' trailing shapes) and shared inputs ``(sargs, sc)``; ``mode``: "gpu"
    (Pallas, compiled), "interpret" (Pallas in interpret mode) or "vmap".

    In Pallas each phase (:class:`Phases`) is its own kernel, the start's lane going through
    device memory between them: ``setup``, then ``serve`` and ``run`` while any start is live
    or parked, then ``finish``. Triton's compile time grows with a kernel's size squared
    (``_Tiles``): four kernels compile in less time than one (the rim's no-slip program on an
    H100 host, 2026-11-26: 28 s as one kernel, 15-18 s as three). The lanes' round trips
    through device memory are about 1.6 KB per start and kernel."""

    def fn(y0, aux0, valid, bl, sargs, sc):
        return start_program(pb, sargs, sc)(y0, aux0, valid != 0, bl)

    if mode == "vmap":
        return jax.jit(jax.vmap(fn, in_axes=(0, 0, 0, 0, None, None)))

    def run(y0s, aux0s, valid, bl, sargs, sc):
        kw: dict[str, Any] = dict(interpret=(mode == "interpret"), num_warps=num_warps)
        shared = (sargs, sc)
        lane_example = (y0s[0], aux0s[0], valid[0], tuple(b[0] for b in bl))

        fns = _phase_fns(pb)
        setup = pallas_map(fns["setup"], lane_example, shared, B, **kw)
        lane = setup((y0s, aux0s, valid, bl), shared)
        one = jax.tree.map(lambda x: x[0], lane)
        go_run = pallas_map(fns["run"], (one,), shared, B, **kw)
        hybrid = pb.reset is not None
        go_serve = pallas_map(fns["serve"], (one,), shared, B, **kw) if hybrid else None

        def body(lane):
            if go_serve is not None:  # (hybrid)
                lane = go_serve((lane,), shared)
            return go_run((lane,), shared)

        lane = jax.lax.while_loop(lambda ln: jnp.any(jax.vmap(_going)(ln)), body, lane)
        finish = pallas_map(fns["finish"], (one,), shared, B, **kw)
        return finish((lane,), shared)

    return jax.jit(run)


def _with_rolled(pb):
    """``pb`` with its stages and samples rolled (one copy of the field and events per step)
    for a problem with a reset map, unrolled otherwise; the environment's
    ``ROLLAX_FUSED_ROLLED`` (0 or 1) decides instead, for tuning. Why: unrolled is what ran
    the no-slip panel in 0.238 s on an H100 (2026-11-26, one kernel); the slipping kernels are
    the ones whose compile time their size decides (stages rolled, the largest, the serve, is
    11,100 Triton operations and compiles in 30 s with pip's Triton on a CPU)."""
    v = os.environ.get("ROLLAX_FUSED_ROLLED", "").strip()
    return pb._replace(rolled=(v == "1") if v in ("0", "1") else pb.reset is not None)


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name, "").strip()
    return int(v) if v.isdigit() else default


def solve(
    pb,
    y0s: np.ndarray,
    aux: np.ndarray,
    valid: np.ndarray,
    bargs: tuple,
    sargs: tuple,
    sc: tuple,
    *,
    mode: str = "gpu",
    block: int | None = None,
    num_warps: int | None = None,
    chunk: int = 1 << 20,
    progress=None,
    device: bool = False,
) -> tuple:
    """The fused solve of every start (``queue.run``'s inputs, one device):
    ``(status, event, t, y, counts, t_first, steps, resets, aux, rejected)`` as NumPy arrays
    (``device``: as JAX arrays left on the device, for work that continues there). The starts
    go in chunks of ``chunk`` (progress is reported after each); each chunk is padded
    (:func:`rows`: a power of two, at least ``block``, and at least 4096 on a GPU) with invalid
    starts, which end at once: the kernel is compiled once per size class, not per size. ``block`` and ``num_warps`` (default:
    :data:`BLOCK` and 1, or the environment's ``ROLLAX_FUSED_BLOCK`` and
    ``ROLLAX_FUSED_WARPS``, for tuning) shape the Pallas programs."""
    N = y0s.shape[0]
    pb = _with_rolled(pb)
    block = _env_int("ROLLAX_FUSED_BLOCK", BLOCK) if block is None else block
    num_warps = _env_int("ROLLAX_FUSED_WARPS", 1) if num_warps is None else num_warps
    # one transfer each, not one converting program per number (5 + 6 ms of the 1000 x 1000
    # panel on an H100 host, stop 38); leaves already on the device stay
    sc_arr = tuple(
        jax.device_put([np.asarray(x, np.int32 if isinstance(x, int) else np.float64) for x in sc])
    )
    sargs = tuple(jax.device_put(list(sargs)))
    parts = []
    chunk = max(block, chunk - chunk % block)
    for lo in range(0, N, chunk):
        hi = min(N, lo + chunk)
        m = rows(hi - lo, block, mode)

        def pad(x):
            # the chunk's rows to the device, padded there with its first row (no copy on the
            # host: 16 ms of the 1000 x 1000 panel on an H100 host)
            x = x[lo:hi] if isinstance(x, jax.Array) else jnp.asarray(np.asarray(x)[lo:hi])
            extra = m - (hi - lo)
            return (
                jnp.concatenate([x, jnp.broadcast_to(x[:1], (extra,) + x.shape[1:])])
                if extra
                else x
            )

        vc = valid[lo:hi]
        v = (
            jnp.arange(m, dtype=jnp.int32) < hi - lo
            if vc.all()
            else jnp.asarray(np.concatenate([vc, np.zeros(m - (hi - lo), bool)]))
        )
        # the leading per-start leaf is queue.run's dummy of zeros: made here
        bl = (jnp.zeros((m,), bargs[0].dtype),) + tuple(pad(b) for b in bargs[1:])
        run = _runner(
            pb,
            (y0s.shape[1:], aux.shape[1:]) + tuple(b.shape[1:] for b in bl),
            mode,
            block,
            num_warps,
        )
        res = run(pad(y0s), pad(aux), v.astype(jnp.int32), bl, sargs, sc_arr)
        if device:
            parts.append(list(_heads(tuple(res), hi - lo)) if m != hi - lo else list(res))
            if progress is not None:  # (done when computed, not when queued)
                jax.block_until_ready(res)
        else:  # one transfer of all results (each np.asarray waits for its own)
            parts.append([r[: hi - lo] for r in jax.device_get(res)])
        if progress is not None:
            progress(int(np.sum(valid[:hi])))
    if len(parts) == 1:  # no copy (46 ms of the 1000 x 1000 panel on an H100 host)
        return tuple(parts[0])
    cat = jnp.concatenate if device else np.concatenate
    return tuple(cat([p[k] for p in parts]) for k in range(len(parts[0])))


@functools.partial(jax.jit, static_argnums=1)
def _heads(res: tuple, n: int) -> tuple:
    """The first ``n`` rows of each result: one program, not one slice each (8 ms of the
    1000 x 1000 panel on an H100 host, stop 38)."""
    return tuple(r[:n] for r in res)


#: The kernels of the fused program, by name (:class:`Phases`)
PHASES = ("setup", "run", "serve", "finish")


def _phase_fns(pb) -> dict:
    """Each phase of :func:`phases` as a per-start function of ``pallas_map``: the set-up of
    ``(y0, aux0, valid, bl, sargs, sc)``, the others of ``(lane, sargs, sc)``."""

    def ph(sargs, sc):
        return phases(pb, sargs, sc)

    return {
        "setup": lambda y0, a0, v, b, sa, s_: ph(sa, s_).setup(y0, a0, v != 0, b),
        "run": lambda ln, sa, s_: ph(sa, s_).run(ln),
        "serve": lambda ln, sa, s_: ph(sa, s_).serve(ln),
        "finish": lambda ln, sa, s_: ph(sa, s_).finish(ln),
    }


def _phase_program(pb, phase: str, shapes, B: int, num_warps: int) -> jax.stages.Wrapped:
    # one phase's kernel alone on lanes as the set-up makes them (rollax.fused_program)
    fns = _phase_fns(pb)

    def program(y0s, aux0s, valid, bl, sargs, sc):
        shared = (sargs, sc)
        ex = (y0s[0], aux0s[0], valid[0], tuple(b[0] for b in bl))
        if phase == "setup":
            return pallas_map(fns["setup"], ex, shared, B, num_warps=num_warps)(
                (y0s, aux0s, valid, bl), shared
            )
        one = jax.eval_shape(lambda: fns["setup"](*ex, sargs, sc))
        one = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), one)
        lanes = jax.tree.map(lambda a: jnp.zeros((y0s.shape[0],) + a.shape, a.dtype), one)
        return pallas_map(fns[phase], (one,), shared, B, num_warps=num_warps)((lanes,), shared)

    return jax.jit(program)


def lower(pb, y0s, aux, bargs, sargs, sc, platform: str | None = "cuda", phase: str | None = None):
    """The compiled-kernel path of :func:`solve` for one block of starts, lowered for
    ``platform`` (``None``: this machine's): JAX's ``Lowered`` (``rollax.fused_program``);
    ``phase``: that kernel alone (one of :data:`PHASES`)."""
    if phase == "serve" and pb.reset is None:
        raise ValueError(
            "phase = 'serve' is not allowed for this system: it has no reset map "
            "(its kernels are 'setup', 'run' and 'finish')"
        )
    B = _env_int("ROLLAX_FUSED_BLOCK", BLOCK)
    pb = _with_rolled(pb)
    bl = tuple(jnp.zeros((B,) + np.shape(b)[1:], np.asarray(b).dtype) for b in bargs)
    shapes = (np.shape(y0s)[1:], np.shape(aux)[1:]) + tuple(b.shape[1:] for b in bl)
    warps = _env_int("ROLLAX_FUSED_WARPS", 1)
    runner = (
        _runner(pb, shapes, "gpu", B, warps)
        if phase is None
        else _phase_program(pb, phase, shapes, B, warps)
    )
    sc_arr = tuple(jnp.asarray(x, jnp.int32 if isinstance(x, int) else jnp.float64) for x in sc)
    args = (
        jnp.zeros((B,) + np.shape(y0s)[1:]),
        jnp.zeros((B,) + np.shape(aux)[1:]),
        jnp.zeros(B, jnp.int32),
        bl,
        tuple(jnp.asarray(x) for x in sargs),
        sc_arr,
    )
    traced = runner.trace(*args)
    if not platform:
        return traced.lower()
    with _without_gpu(platform):
        return traced.lower(lowering_platforms=(platform,))


@contextlib.contextmanager
def _without_gpu(platform: str):
    """Lower Pallas-Triton kernels for a CUDA GPU on a machine without one: the compute
    capability of an H100 (9.0). Jax 0.10 falls back to it by itself; jax 0.11 asks for an
    abstract GPU device instead ("No supported GPU devices found"), and an abstract mesh
    around the trace fails (the kernel's trace folds constants with eager JAX calls, which
    jax refuses under an abstract-only mesh), so its device query is answered here, for the
    lowering only."""
    try:  # (by name: jax 0.10 has no such module, and nothing to answer)
        gpu_info: Any = importlib.import_module("jax._src.pallas.triton.gpu_info")
        reg = importlib.import_module("jax._src.pallas.triton.pallas_call_registration")
    except ImportError:
        yield
        return
    query = getattr(reg, "gpu_info_lib", None)
    if platform != "cuda" or jax.default_backend() == "gpu" or query is not gpu_info:
        yield
        return
    asked = gpu_info.get_gpu_info
    gpu_info.get_gpu_info = lambda: gpu_info.get_gpu_info_from_version(gpu_info.GpuVersion.H100)
    try:
        yield
    finally:
        gpu_info.get_gpu_info = asked


def run(pb, y0s, aux, valid, bargs, sargs, sc, progress=None, device: bool = False) -> tuple:
    """:func:`solve` on this machine's default device: compiled for a GPU, else in
    :data:`CPU_MODE` (the ``runner`` of ``queue.run``)."""
    mode = "gpu" if jax.default_backend() == "gpu" else CPU_MODE
    return solve(pb, y0s, aux, valid, bargs, sargs, sc, mode=mode, progress=progress, device=device)
