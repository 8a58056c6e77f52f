"""The fused ensemble path: each start integrated from t0 to its end by one lane of one program.

Where the work queue (:mod:`rollax.ensemble`) keeps a few wide lanes busy by refilling them (a
CPU design: gathers, sorts and scatters in the loop), this path writes the whole solve of one
start as one per-start program (``_one_start``: the steps, the event samples and their walk,
the root location, the reset map and the first crossings, in nested ``while`` loops) and maps
it over the starts:

* ``"fused"`` on a GPU: a Pallas kernel (Triton backend). A program holds a block of ``B``
  starts, one per GPU thread; the per-start program is rewritten structure-of-arrays by
  :mod:`rollax._soa` (every value a ``(B,)`` array, so the state stays in registers), the
  inputs are read once and each start's record written once. No per-step launches.
* on a CPU the same kernel runs in Pallas's interpret mode (tests; not a performance path),
  or ``jax.vmap`` of the per-start program (``interpret="vmap"``), the reference of the
  structure-of-arrays rewrite.

The arithmetic is the queue's, function for function (``ensemble._redo``, ``_sample``,
``events.scan``, ``ensemble._locate``, the step-size control, the reset service), so the
results agree with the queue's to rounding: the conformance test holds them to it.
"""

from __future__ import annotations

import functools
import os
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from rollax import _soa
from rollax import ensemble as E


def _pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def pallas_map(fn: Callable, lane_example: tuple, shared: tuple, B: int, *,
               interpret: bool = False, num_warps: int = 1, num_stages: int = 1) -> Callable:
    """``run(lane_inputs) -> outputs``: the per-start ``fn(*lane_args, *shared)`` over N starts
    as one Pallas kernel, ``B`` starts per program.

    ``lane_example``: one start's arguments (arrays, any small shapes); ``shared``: arrays the
    same for every start (compiled in as inputs read once per program). ``run`` takes the
    per-start leaves with a leading axis of N (a multiple of B) and returns the output leaves
    with a leading axis of N."""
    from jax.experimental import pallas as pl

    lane_leaves, lane_tree = jax.tree.flatten(lane_example)
    sh_leaves, sh_tree = jax.tree.flatten(shared)
    lane_shapes = [np.shape(x) for x in lane_leaves]
    lane_dtypes = [jnp.result_type(x) for x in lane_leaves]
    sh_np = [jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)) for x in sh_leaves]
    n_lane_el = [int(np.prod(s)) for s in lane_shapes]

    def per_start(*flat):
        lane_args = jax.tree.unflatten(lane_tree, list(flat[:len(lane_leaves)]))
        sh_args = jax.tree.unflatten(sh_tree, list(flat[len(lane_leaves):]))
        return fn(*lane_args, *sh_args)

    example = [jax.ShapeDtypeStruct(s, d) for s, d in zip(lane_shapes, lane_dtypes)] + \
              list(sh_np)
    closed, out_shape = _soa.trace(per_start, *example)
    out_leaves = jax.tree.leaves(out_shape)
    out_tree = jax.tree.structure(out_shape)
    out_shapes = [tuple(o.shape) for o in out_leaves]
    # booleans travel as int32 (Triton stores no i1 to memory)
    true_dtypes = [np.dtype(o.dtype) for o in out_leaves]
    out_dtypes = [np.dtype(np.int32) if d == np.bool_ else d for d in true_dtypes]
    n_out_el = [int(np.prod(s)) for s in out_shapes]
    # shared leaves: each one input read whole (padded to a power of two), its elements
    # loaded one by one as scalars
    sh_sizes = [max(1, int(np.prod(x.shape))) for x in sh_np]
    sh_pad = [_pow2(max(2, n)) for n in sh_sizes]
    n_in = sum(n_lane_el)

    def kernel(*refs):
        ins_l, ins_s = refs[:n_in], refs[n_in:n_in + len(sh_np)]
        outs = refs[n_in + len(sh_np):]
        args, k = [], 0
        for shape, n in zip(lane_shapes, n_lane_el):
            args.append(_soa.lane_array([ins_l[k + i][...] for i in range(n)], shape))
            k += n
        for x, ref in zip(sh_np, ins_s):
            args.append(_soa.lane_array([ref[i] for i in range(int(np.prod(x.shape)))], x.shape))
        res = _soa.evaluate(closed, B, args)
        k = 0
        for o, dt, n in zip(res, out_dtypes, n_out_el):
            for e in o.reshape(-1):
                outs[k][...] = _soa.full(e, B, dt)
                k += 1

    def run(lane_inputs, shared_inputs=None):
        from jax.experimental.pallas import triton as plgpu

        lane_inputs = jax.tree.leaves(lane_inputs)
        N = lane_inputs[0].shape[0]
        if N % B:
            raise ValueError(f"{N} starts is not a multiple of the block of {B}")
        flat_l = []
        for x, n in zip(lane_inputs, n_lane_el):
            x2 = jnp.reshape(x, (N, n))
            flat_l += [x2[:, i] for i in range(n)]
        sh = [np.asarray(x) for x in jax.tree.leaves(shared)] if shared_inputs is None \
            else [jnp.asarray(x) for x in jax.tree.leaves(shared_inputs)]
        flat_s = [jnp.concatenate([jnp.reshape(x, (-1,)),
                                   jnp.zeros((p - x.size,), x.dtype)]) for x, p in zip(sh, sh_pad)]
        lane_spec = pl.BlockSpec((B,), lambda i: (i,))
        in_specs = [lane_spec] * len(flat_l) + [pl.BlockSpec((p,), lambda i: (0,)) for p in sh_pad]
        out_shapes_flat = [jax.ShapeDtypeStruct((N,), dt) for dt, n in zip(out_dtypes, n_out_el)
                           for _ in range(n)]
        params = getattr(plgpu, "CompilerParams", None) or getattr(plgpu, "TritonCompilerParams")
        kw = {} if interpret else {"compiler_params": params(num_warps=num_warps,
                                                             num_stages=num_stages)}
        flat_out = pl.pallas_call(
            kernel, out_shape=out_shapes_flat, grid=(N // B,), in_specs=in_specs,
            out_specs=[lane_spec] * len(out_shapes_flat), interpret=interpret, **kw,
        )(*flat_l, *flat_s)
        outs, k = [], 0
        for shape, n in zip(out_shapes, n_out_el):
            cols = flat_out[k:k + n]
            k += n
            dt = true_dtypes[len(outs)]
            outs.append(jnp.stack(cols, axis=-1).reshape((N,) + shape).astype(dt) if n
                        else jnp.zeros((N,) + shape, dt))
        return jax.tree.unflatten(out_tree, outs)

    return run


def start_program(pb, sargs: tuple, sc) -> Callable:
    """The per-start program of problem ``pb`` (an ``ensemble._Problem``): ``one(y0, aux0,
    valid, bl) -> (status, event, t, y, counts, t_first, steps, resets, aux)`` for one start,
    with the queue's arithmetic (``ensemble._machine``'s per-lane pieces on one lane, then
    ``ensemble._finish`` on its one record)."""
    _, _, _, ops = E._machine(pb, 1, sargs, E._Scalars(*sc))
    t0 = sc[0]
    events, reset = pb.events, pb.reset
    n = events.n
    K = pb.n_samples

    def one(y0, aux0, valid, bl):
        d = y0.shape[0]
        dtype = y0.dtype
        g0, k10, h0, sign0, bad0 = ops.setup(y0, bl)
        at_start = jnp.any(events.fired_at_start(g0)) if n else jnp.zeros((), bool)
        # as the queue's init and refill: a start with a boundary violated at t0 needs no solve
        # (with a reset map it enters parked, at a step of length 0); a non-finite one fails
        parked = at_start & (reset is not None)
        runs = valid & ~bad0 & (~at_start | (reset is not None))
        first_status = E.T_MAX if reset is not None else jnp.where(at_start, E._PENDING, E.T_MAX)
        first_status = jnp.where(bad0, E.FAILED_NAN, first_status)
        status = jnp.where(runs, jnp.where(parked, E._PARKED, E._LIVE),
                           jnp.where(valid, first_status, E.PADDING)).astype(jnp.int32)
        one_ = lambda x: x[None]  # noqa: E731 - one lane
        ln = E._Lanes(
            idx=jnp.zeros((1,), jnp.int32),
            live=one_(status == E._LIVE),
            status=one_(status),
            t=jnp.full((1,), t0, dtype),
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

        def serve(ln):
            names = ("live", "status", "event", "t", "y", "h", "k1", "sign", "count", "t_zero",
                     "seg", "resets", "aux", "fc_t")
            res = ops.serve_block(ln.t, ln.y, ln.h, ln.k1, ln.sign, ln.count, ln.t_zero,
                                  ln.steps, ln.resets, ln.aux, ln.fc_t, ln.hit_y1, ln.hit_coef,
                                  ln.hit_vals, *ln.bargs)
            # the queue's serve: the new segment counts its steps from here
            return ln._replace(**dict(zip(names, res)))

        def body(ln):
            if reset is not None:
                ln = jax.lax.cond(ln.status[0] == E._PARKED, serve, lambda l_: l_, ln)
            return ops.step_lanes(ln)

        def going(ln):
            return ln.live[0] | (ln.status[0] == E._PARKED)

        ln = jax.lax.while_loop(going, body, ln)
        out = E._Out(*(getattr(ln, k) for k in E._RECORD))
        status, event, t, y, counts, t_first = E._finish(pb, out, ln.bargs, sargs, direct=True)
        return (status[0], event[0], t[0], y[0], counts[0], t_first[0], ln.steps[0],
                ln.resets[0], ln.aux[0])

    return one


#: How the fused path runs off a GPU: "interpret" (the Pallas kernel in interpret mode) or
#: "vmap" (``jax.vmap`` of the per-start program: the same arithmetic, compiled by XLA; the
#: reference of the structure-of-arrays rewrite, and far faster than interpreting)
CPU_MODE = "interpret"

#: Starts per program of the Pallas kernel (one GPU thread each): a warp.
BLOCK = 32


@functools.lru_cache(maxsize=16)
def _runner(pb, shapes: tuple, mode: str, B: int, num_warps: int) -> Callable:
    """The compiled fused solve of ``pb`` for per-start inputs of ``shapes`` ((d,), (p,), the
    per-start leaves' trailing shapes) and shared inputs ``(sargs, sc)``; ``mode``: "gpu"
    (Pallas, compiled), "interpret" (Pallas in interpret mode) or "vmap"."""

    def fn(y0, aux0, valid, bl, sargs, sc):
        return start_program(pb, sargs, sc)(y0, aux0, valid != 0, bl)

    if mode == "vmap":
        return jax.jit(jax.vmap(fn, in_axes=(0, 0, 0, 0, None, None)))

    def run(y0s, aux0s, valid, bl, sargs, sc):
        lane_example = (y0s[0], aux0s[0], valid[0], tuple(b[0] for b in bl))
        go = pallas_map(fn, lane_example, (sargs, sc), B, interpret=(mode == "interpret"),
                        num_warps=num_warps)
        return go((y0s, aux0s, valid, bl), (sargs, sc))

    return jax.jit(run)


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name, "").strip()
    return int(v) if v.isdigit() else default


def solve(pb, y0s: np.ndarray, aux: np.ndarray, valid: np.ndarray, bargs: tuple,
          sargs: tuple, sc: tuple, *, mode: str = "gpu", block: int | None = None,
          num_warps: int | None = None, chunk: int = 1 << 20, progress=None) -> tuple:
    """The fused solve of every start (``ensemble.solve_ensemble``'s inputs, one device):
    ``(status, event, t, y, counts, t_first, steps, resets, aux)`` as NumPy arrays. The starts
    go in chunks of ``chunk`` (progress is reported after each); each chunk is padded to a
    power of two (at least ``block``) with invalid starts, which end at once: the kernel is
    compiled once per size class, not per size. ``block`` and ``num_warps`` (default:
    :data:`BLOCK` and 1, or the environment's ``ROLLAX_FUSED_BLOCK`` and
    ``ROLLAX_FUSED_WARPS``, for tuning) shape the Pallas programs."""
    N = y0s.shape[0]
    block = _env_int("ROLLAX_FUSED_BLOCK", BLOCK) if block is None else block
    num_warps = _env_int("ROLLAX_FUSED_WARPS", 1) if num_warps is None else num_warps
    sc_arr = tuple(jnp.asarray(x, jnp.int32 if isinstance(x, int) else y0s.dtype) for x in sc)
    sargs = tuple(jnp.asarray(x) for x in sargs)
    parts = []
    chunk = max(block, chunk - chunk % block)
    for lo in range(0, N, chunk):
        hi = min(N, lo + chunk)
        m = max(block, _pow2(hi - lo))

        def pad(x, fill_first=True):
            x = np.asarray(x)[lo:hi]
            extra = m - (hi - lo)
            if not extra:
                return x
            fill = np.repeat(x[:1], extra, axis=0) if fill_first else \
                np.zeros((extra,) + x.shape[1:], x.dtype)
            return np.concatenate([x, fill])

        v = pad(valid.astype(np.int32), fill_first=False)
        bl = tuple(pad(b) for b in bargs)
        run = _runner(pb, (y0s.shape[1:], aux.shape[1:]) + tuple(b.shape[1:] for b in bl),
                      mode, block, num_warps)
        res = run(jnp.asarray(pad(y0s)), jnp.asarray(pad(aux)), jnp.asarray(v),
                  tuple(jnp.asarray(b) for b in bl), sargs, sc_arr)
        parts.append([np.asarray(r)[:hi - lo] for r in res])
        if progress is not None:
            progress(int(np.sum(valid[:hi])))
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(len(parts[0])))


def lower(pb, y0s, aux, bargs, sargs, sc, platform: str | None = "cuda"):
    """The compiled-kernel path of :func:`solve` for one block of starts, lowered for
    ``platform`` (``None``: this machine's): JAX's ``Lowered`` (``rollax.fused_program``)."""
    B = _env_int("ROLLAX_FUSED_BLOCK", BLOCK)
    bl = tuple(jnp.zeros((B,) + np.shape(b)[1:], np.asarray(b).dtype) for b in bargs)
    runner = _runner(pb, (np.shape(y0s)[1:], np.shape(aux)[1:]) + tuple(b.shape[1:] for b in bl),
                     "gpu", B, _env_int("ROLLAX_FUSED_WARPS", 1))
    sc_arr = tuple(jnp.asarray(x, jnp.int32 if isinstance(x, int) else jnp.float64) for x in sc)
    args = (jnp.zeros((B,) + np.shape(y0s)[1:]), jnp.zeros((B,) + np.shape(aux)[1:]),
            jnp.zeros(B, jnp.int32), bl, tuple(jnp.asarray(x) for x in sargs), sc_arr)
    traced = runner.trace(*args)
    return traced.lower(lowering_platforms=(platform,)) if platform else traced.lower()


def run(pb, y0s, aux, valid, bargs, sargs, sc, progress=None) -> tuple:
    """:func:`solve` on this machine's default device: compiled for a GPU, else in
    :data:`CPU_MODE` (the ``runner`` of ``ensemble.solve_ensemble``)."""
    mode = "gpu" if jax.default_backend() == "gpu" else CPU_MODE
    return solve(pb, y0s, aux, valid, bargs, sargs, sc, mode=mode, progress=progress)
