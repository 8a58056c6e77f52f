"""Run a per-start JAX function on a block of starts held component by component.

The fused ensemble kernel (:mod:`rollax._integrate._fused`) runs each start in one GPU thread. Pallas's
Triton backend lowers only arrays whose every dimension is a power of two, and few structural
operations (no slices, gathers or dynamic indexing). A system's functions are written for one
start (a state of shape ``(d,)``, any ``d``), so this module re-expresses a per-start program
*structure of arrays*: every array of shape ``s`` becomes a NumPy object array of shape ``s``
whose elements are ``(B,)`` arrays, one value per start of the block. What is left for the
compiler is elementwise arithmetic, selects, and loops over ``(B,)`` arrays.

:func:`soa_call` traces the per-start function to a jaxpr and evaluates it on such values.
The rules are those of ``jax.vmap`` with the batch axis kept apart from every array axis:

* elementwise primitives apply to each element; values known at trace time (literals,
  constants, iota) stay NumPy scalars and are folded, so that indices written as constants
  (``y[0]``, a sample number) remain static;
* structural primitives (slice, reshape, concatenate, broadcast, transpose, pad) rearrange
  the object array and emit no code; a dynamic index known only per start (``dynamic_slice``,
  ``dynamic_update_slice``, a one-axis ``gather``) becomes a chain of selects over its few
  possible values;
* reductions, ``argmin``/``argmax``, cumulative sums and ``dot_general`` are written out over
  the (small) axes;
* ``while``: each start iterates while its own predicate holds; the loop runs while any start
  of the block needs it and a finished start's values are held by a select (vmap's rule);
  ``cond`` with a per-start index evaluates every branch and selects; ``scan`` is unrolled;
* calls (``pjit``, ``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``) are inlined and
  ``optimization_barrier`` is dropped.

Any primitive outside these rules raises ``NotImplementedError`` naming it: a system to be run
on the fused kernel must be plain ``jnp`` arithmetic on small arrays (docs/fused.md).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.core import Tracer
import numpy as np
from jax.extend import core as jcore

_ELEMENTWISE = frozenset(
    """
abs acos acosh add add_any and asin asinh atan atan2 atanh cbrt ceil clamp clz
convert_element_type copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor
ge gt igamma imag integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg
nextafter not or population_count pow real reduce_precision rem rsqrt
shift_left shift_right_arithmetic shift_right_logical sign sin sinh sqrt square sub tan tanh
xor
""".split()
)

_IDENTITY = frozenset(
    "optimization_barrier sharding_constraint mesh_cast reshard copy_p stop_gradient".split()
)

_CALLS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


def _is_known(e) -> bool:
    return isinstance(e, (np.ndarray, np.generic)) or (
        isinstance(e, jax.Array) and not isinstance(e, Tracer) and np.ndim(e) == 0
    )


def _obj(shape) -> np.ndarray:
    return np.empty(shape, dtype=object)


def known_array(x) -> np.ndarray:
    """A concrete array as an object array of known NumPy scalars."""
    x = np.asarray(x)
    out = _obj(x.shape)
    for idx in np.ndindex(x.shape):
        out[idx] = x[idx]
    return out


def lane_array(xs: list, shape) -> np.ndarray:
    """Elements (``(B,)`` arrays, C order) as an object array of ``shape``."""
    out = _obj(shape)
    for idx, x in zip(np.ndindex(tuple(shape)), xs):
        out[idx] = x
    return out


def _scan_split(p) -> tuple[int, int]:
    """(consts, carry) counts of a scan equation: jax <= 0.10 names them ``num_consts`` and
    ``num_carry``; jax 0.11 packs them into ``ft_in`` (consts, carry, xs) (found on the GPU
    machine's jax 0.11.2: the penny's fused kernel failed with ``KeyError: 'num_consts'``)."""
    if "num_consts" in p:
        return int(p["num_consts"]), int(p["num_carry"])
    nc, ncar, _ = (len(x) for x in p["ft_in"].unpack())
    return nc, ncar


class _Eval:
    def __init__(self, B: int):
        self.B = B

    # -- elements -----------------------------------------------------------------------
    def full(self, e, dtype=None):
        if _is_known(e):
            e = np.asarray(e, dtype)
            return jnp.full((self.B,), e, e.dtype)
        if jnp.ndim(e) == 0:  # a traced value shared by the block (a scalar load)
            e = jnp.broadcast_to(e, (self.B,))
        return e if dtype is None or e.dtype == dtype else e.astype(dtype)

    def bind(self, prim, es, params):
        """``prim`` on single elements: folded when all are known, else on ``(B,)`` arrays."""
        if all(_is_known(e) for e in es):
            with jax.ensure_compile_time_eval():
                r = prim.bind(*(jnp.asarray(e) for e in es), **params)
            return (
                jax.tree.map(lambda x: np.asarray(x)[()], r)
                if prim.multiple_results
                else np.asarray(r)[()]
            )
        return prim.bind(*(self.full(e) for e in es), **params)

    def op(self, prim, *es, **params):
        return self.bind(prim, es, params)

    def where(self, p, a, b):
        # select_n(p, false_case, true_case)
        return self.op(jax.lax.select_n_p, p, b, a)

    # -- jaxprs -------------------------------------------------------------------------
    def run(self, jaxpr, consts, args):
        env: dict = {}

        def read(v):
            if isinstance(v, jcore.Literal):
                return known_array(v.val)
            return env[v]

        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c if isinstance(c, np.ndarray) and c.dtype == object else known_array(c)
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            outs = self.eqn(eqn, ins)
            if not eqn.primitive.multiple_results:
                outs = [outs]
            for v, o in zip(eqn.outvars, outs):
                if not isinstance(v, jcore.DropVar):
                    env[v] = o
        return [read(v) for v in jaxpr.outvars]

    def closed(self, cj, args):
        if isinstance(cj, jcore.ClosedJaxpr):
            return self.run(cj.jaxpr, cj.consts, args)
        return self.run(cj, [], args)

    def eqn(self, eqn, ins):
        prim, params = eqn.primitive, eqn.params
        name = prim.name
        rule = getattr(self, "r_" + name.replace("-", "_"), None)
        if rule is not None:
            return rule(ins, params, eqn)
        if name in _ELEMENTWISE:
            return self.elementwise(prim, ins, params, eqn)
        if name in _IDENTITY:
            return ins if prim.multiple_results else ins[0]
        for key in _CALLS:
            if key in params and isinstance(params[key], (jcore.ClosedJaxpr, jcore.Jaxpr)):
                return self.closed(params[key], ins)
        raise NotImplementedError(
            f"the fused kernel cannot run the primitive {name!r}: a system's functions must be "
            f"plain jnp arithmetic on small arrays (see docs/fused.md)"
        )

    def elementwise(self, prim, ins, params, eqn):
        shape = tuple(eqn.outvars[0].aval.shape)
        arrays = [np.broadcast_to(a, shape) for a in ins]
        out = _obj(shape)
        for idx in np.ndindex(shape):
            out[idx] = self.bind(prim, [a[idx] for a in arrays], params)
        return out

    def r_select_n(self, ins, p, eqn):
        # Triton lowers two-way selects on a boolean only: a chain of those
        shape = tuple(eqn.outvars[0].aval.shape)
        arrays = [np.broadcast_to(a, shape) for a in ins]
        out = _obj(shape)
        for idx in np.ndindex(shape):
            which, *cases = [a[idx] for a in arrays]
            boolean = np.dtype(eqn.invars[0].aval.dtype) == np.bool_
            r = cases[0]
            for j in range(1, len(cases)):
                pick = (
                    which
                    if boolean
                    else self.op(jax.lax.eq_p, which, np.asarray(j, eqn.invars[0].aval.dtype))
                )
                r = self.bind(jax.lax.select_n_p, [pick, r, cases[j]], {})
            out[idx] = r
        return out

    def r_round(self, ins, p, eqn):
        # no Triton rule: floor, and the tie rule on the exact remainder
        shape = tuple(eqn.outvars[0].aval.shape)
        out = _obj(shape)
        even = int(p["rounding_method"]) == int(jax.lax.RoundingMethod.TO_NEAREST_EVEN)
        for idx in np.ndindex(shape):
            x = ins[0][idx]
            r = self.op(jax.lax.floor_p, x)
            d = self.op(jax.lax.sub_p, x, r)
            one = np.asarray(1, eqn.invars[0].aval.dtype)
            half = np.asarray(0.5, eqn.invars[0].aval.dtype)
            up = self.op(jax.lax.add_p, r, one)
            if even:
                odd = self.op(
                    jax.lax.ne_p,
                    self.op(jax.lax.rem_p, r, np.asarray(2, eqn.invars[0].aval.dtype)),
                    np.asarray(0, eqn.invars[0].aval.dtype),
                )
                tie = self.where(odd, up, r)
            else:
                tie = self.where(
                    self.op(
                        jax.lax.gt_p,
                        x,
                        np.asarray(0, x.dtype if hasattr(x, "dtype") else eqn.invars[0].aval.dtype),
                    ),
                    up,
                    r,
                )
            out[idx] = self.where(
                self.op(jax.lax.gt_p, d, half),
                up,
                self.where(self.op(jax.lax.lt_p, d, half), r, tie),
            )
        return out

    # -- structure ------------------------------------------------------------------------
    def r_broadcast_in_dim(self, ins, p, eqn):
        x = ins[0]
        shape = tuple(p["shape"])
        expanded = [1] * len(shape)
        for i, dim in enumerate(p["broadcast_dimensions"]):
            expanded[dim] = x.shape[i]
        return np.broadcast_to(x.reshape(expanded), shape)

    def r_reshape(self, ins, p, eqn):
        return ins[0].reshape(tuple(eqn.outvars[0].aval.shape))

    def r_squeeze(self, ins, p, eqn):
        return ins[0].reshape(tuple(eqn.outvars[0].aval.shape))

    def r_expand_dims(self, ins, p, eqn):
        return ins[0].reshape(tuple(eqn.outvars[0].aval.shape))

    def r_transpose(self, ins, p, eqn):
        return np.transpose(ins[0], p["permutation"])

    def r_concatenate(self, ins, p, eqn):
        return np.concatenate(ins, axis=p["dimension"])

    def r_stack(self, ins, p, eqn):
        return np.stack(ins, axis=p.get("axis", 0))

    def r_unstack(self, ins, p, eqn):
        # x[i, ...], not x[i]: a vector's element must stay a 0-d object array (jax 0.11's
        # tuple unpacking of a vector is this primitive; x[i] gave the bare element, found on
        # the H100 by the shot's kernel, stop 43)
        x = np.moveaxis(ins[0], p.get("axis", 0), 0)
        return [x[i, ...] for i in range(x.shape[0])]

    def r_slice(self, ins, p, eqn):
        strides = p["strides"] or (1,) * len(p["start_indices"])
        idx = tuple(
            slice(a, b, s) for a, b, s in zip(p["start_indices"], p["limit_indices"], strides)
        )
        return ins[0][idx]

    def r_rev(self, ins, p, eqn):
        return np.flip(ins[0], axis=tuple(p["dimensions"]))

    def r_split(self, ins, p, eqn):
        cuts = np.cumsum(p["sizes"])[:-1]
        return list(np.split(ins[0], cuts, axis=p["axis"]))

    def r_pad(self, ins, p, eqn):
        x, pv = ins
        shape = tuple(eqn.outvars[0].aval.shape)
        out = np.broadcast_to(pv, shape).copy()
        for idx in np.ndindex(x.shape):
            o = []
            for i, (lo, _, interior) in zip(idx, p["padding_config"]):
                o.append(lo + i * (interior + 1))
            if all(0 <= j < n for j, n in zip(o, shape)):
                out[tuple(o)] = x[idx]
        return out

    def r_iota(self, ins, p, eqn):
        shape, dim = tuple(p["shape"]), p["dimension"]
        x = np.broadcast_to(
            np.arange(shape[dim], dtype=p["dtype"]).reshape(
                [-1 if i == dim else 1 for i in range(len(shape))]
            ),
            shape,
        )
        return known_array(x)

    def _starts(self, starts, dims, sizes):
        """Per axis: the candidate start positions, and the start element (clamped as XLA)."""
        cands, vals = [], []
        for s, n, k in zip(starts, dims, sizes):
            e = s[()]
            hi = n - k
            if _is_known(e):
                cands.append([int(min(max(int(e), 0), hi))])
                vals.append(None)
            else:
                cands.append(list(range(hi + 1)))
                vals.append(e)
        return cands, vals

    def _is(self, e, c, hi):
        # the (clamped) start equals c
        if c == 0:
            return self.op(jax.lax.le_p, e, np.asarray(0, e.dtype))
        if c == hi:
            return self.op(jax.lax.ge_p, e, np.asarray(hi, e.dtype))
        return self.op(jax.lax.eq_p, e, np.asarray(c, e.dtype))

    def _match(self, vals, combo, dims, sizes):
        pred = None
        for e, c, n, k in zip(vals, combo, dims, sizes):
            if e is None:
                continue
            q = self._is(e, c, n - k)
            pred = q if pred is None else self.op(jax.lax.and_p, pred, q)
        return pred

    def r_dynamic_slice(self, ins, p, eqn):
        x, starts = ins[0], ins[1:]
        sizes = tuple(p["slice_sizes"])
        cands, vals = self._starts(starts, x.shape, sizes)
        out = None
        for combo in itertools.product(*cands):
            piece = x[tuple(slice(c, c + k) for c, k in zip(combo, sizes))]
            if out is None:
                out = piece.copy()
                continue
            pred = self._match(vals, combo, x.shape, sizes)
            for idx in np.ndindex(sizes):
                out[idx] = self.where(pred, piece[idx], out[idx])
        return out

    def r_dynamic_update_slice(self, ins, p, eqn):
        x, u, starts = ins[0], ins[1], ins[2:]
        sizes = u.shape
        cands, vals = self._starts(starts, x.shape, sizes)
        out = x.copy()
        for combo in itertools.product(*cands):
            pred = self._match(vals, combo, x.shape, sizes)
            for idx in np.ndindex(sizes):
                j = tuple(c + i for c, i in zip(combo, idx))
                out[j] = u[idx] if pred is None else self.where(pred, u[idx], out[j])
        return out

    def _index_starts(self, x, ix, index_map):
        # one index vector (no batch of indices): the start of each operand axis
        if ix.ndim != 1:
            raise NotImplementedError(
                "the fused kernel cannot run a batched gather or scatter "
                "(index an array with one integer per axis instead)"
            )
        starts = []
        for axis in range(x.ndim):
            s = _obj(())
            s[()] = (
                ix[list(index_map).index(axis)] if axis in index_map else np.asarray(0, np.int32)
            )
            starts.append(s)
        return starts

    def _all_known(self, a) -> bool:
        return all(_is_known(e) for e in a.reshape(-1))

    def _concrete(self, a):
        return np.asarray([np.asarray(e) for e in a.reshape(-1)]).reshape(a.shape)

    def r_gather(self, ins, p, eqn):
        x, ix = ins
        if self._all_known(ix):
            # known indices (a constant index array): gather the elements' positions
            pos = np.arange(x.size, dtype=np.int64).reshape(x.shape)
            with jax.ensure_compile_time_eval():
                got = np.asarray(
                    jax.lax.gather_p.bind(jnp.asarray(pos), jnp.asarray(self._concrete(ix)), **p)
                )
            flat = x.reshape(-1)
            out = _obj(got.shape)
            for idx in np.ndindex(got.shape):
                out[idx] = flat[got[idx]]
            return out
        # XLA's gather, element by element: the output's batch dimensions index the start
        # vectors (the last axis of ix), its offset dimensions the slice
        dn = p["dimension_numbers"]
        sizes = tuple(p["slice_sizes"])
        out_shape = tuple(eqn.outvars[0].aval.shape)
        offset_dims = tuple(dn.offset_dims)
        obd = tuple(getattr(dn, "operand_batching_dims", ()))
        ibd = tuple(getattr(dn, "start_indices_batching_dims", ()))
        dropped = set(dn.collapsed_slice_dims) | set(obd)
        kept_axes = [a for a in range(x.ndim) if a not in dropped]
        batch_out = [d for d in range(len(out_shape)) if d not in offset_dims]
        out = _obj(out_shape)
        cache: dict = {}
        for o in np.ndindex(out_shape):
            G = tuple(o[d] for d in batch_out)
            if G not in cache:
                starts = []
                for axis in range(x.ndim):
                    e = _obj(())
                    if axis in dn.start_index_map:
                        e[()] = ix[G + (list(dn.start_index_map).index(axis),)]
                    elif axis in obd:
                        e[()] = np.asarray(G[ibd[obd.index(axis)]], np.int64)
                    else:
                        e[()] = np.asarray(0, np.int64)
                    starts.append(e)
                cache[G] = self.r_dynamic_slice([x] + starts, {"slice_sizes": sizes}, eqn)
            piece = cache[G]
            full = [0] * x.ndim
            for a, d in zip(kept_axes, offset_dims):
                full[a] = o[d]
            out[o] = piece[tuple(full)]
        return out

    def _scatter(self, ins, p, eqn, combine):
        # XLA's scatter, element by element: each update window goes to the start its index
        # vector gives (a window that does not fit is dropped, as jnp's default mode); a start
        # known only per start is a select over its possible values
        x, ix, u = ins[0], ins[1], ins[2]
        dn = p["dimension_numbers"]
        uwd = tuple(dn.update_window_dims)
        obd = tuple(getattr(dn, "operand_batching_dims", ()))
        ibd = tuple(getattr(dn, "scatter_indices_batching_dims", ()))
        s2o = tuple(dn.scatter_dims_to_operand_dims)
        win_axes = [a for a in range(x.ndim) if a not in dn.inserted_window_dims and a not in obd]
        scatter_dims = [d for d in range(u.ndim) if d not in uwd]
        win_shape = tuple(u.shape[d] for d in uwd)
        out = x.copy()
        G_shape = tuple(u.shape[d] for d in scatter_dims)
        for G in np.ndindex(G_shape):
            cands, vals = [], []
            for axis in range(x.ndim):
                k = win_shape[win_axes.index(axis)] if axis in win_axes else 1
                hi = x.shape[axis] - k
                if axis in s2o:
                    e = ix[G + (s2o.index(axis),)]
                elif axis in obd:
                    e = np.asarray(G[ibd[obd.index(axis)]], np.int64)
                else:
                    e = np.asarray(0, np.int64)
                if _is_known(e):
                    c = int(e)
                    cands.append([c] if 0 <= c <= hi else [])
                    vals.append(None)
                else:
                    cands.append(list(range(hi + 1)))
                    vals.append(e)
            for combo in itertools.product(*cands):
                pred = None
                for e, c in zip(vals, combo):
                    if e is not None:
                        q = self.op(jax.lax.eq_p, e, np.asarray(c, e.dtype))
                        pred = q if pred is None else self.op(jax.lax.and_p, pred, q)
                for w in np.ndindex(win_shape):
                    uidx = [0] * u.ndim
                    for d, g in zip(scatter_dims, G):
                        uidx[d] = g
                    for d, wi in zip(uwd, w):
                        uidx[d] = wi
                    j = list(combo)
                    for a, wi in zip(win_axes, w):
                        j[a] += wi
                    j = tuple(j)
                    new = combine(out[j], u[tuple(uidx)])
                    out[j] = new if pred is None else self.where(pred, new, out[j])
        return out

    def r_scatter(self, ins, p, eqn):
        return self._scatter(ins, p, eqn, lambda old, new: new)

    def r_scatter_add(self, ins, p, eqn):
        return self._scatter(ins, p, eqn, lambda old, new: self.op(jax.lax.add_p, old, new))

    # -- reductions -------------------------------------------------------------------------
    def _reduce(self, x, axes, combine):
        axes = tuple(axes)
        keep = [i for i in range(x.ndim) if i not in axes]
        xt = np.transpose(x, keep + list(axes))
        rest = tuple(x.shape[i] for i in keep)
        xt = xt.reshape(rest + (-1,))
        out = _obj(rest)
        for idx in np.ndindex(rest):
            out[idx] = functools.reduce(combine, list(xt[idx]))
        return out

    def _identity_of(self, name, dtype):
        dtype = np.dtype(dtype)
        if name == "reduce_sum":
            return np.asarray(0, dtype)
        if name == "reduce_prod":
            return np.asarray(1, dtype)
        if name in ("reduce_and",):
            return np.asarray(True, dtype)
        if name in ("reduce_or", "reduce_xor"):
            return np.asarray(False, dtype)
        big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
        return np.asarray(-big if name == "reduce_max" else big, dtype)

    # (a rule factory used in the class body, not a method)
    def _reducer(prim: jcore.Primitive):  # pyright: ignore[reportSelfClsParameterName, reportGeneralTypeIssues]
        def rule(self, ins, p, eqn):
            x = ins[0]
            if any(x.shape[a] == 0 for a in p["axes"]):
                shape = tuple(eqn.outvars[0].aval.shape)
                return known_array(
                    np.full(shape, self._identity_of(eqn.primitive.name, eqn.outvars[0].aval.dtype))
                )
            return self._reduce(x, p["axes"], lambda a, b: self.op(prim, a, b))

        return rule

    r_reduce_sum = _reducer(jax.lax.add_p)
    r_reduce_max = _reducer(jax.lax.max_p)
    r_reduce_min = _reducer(jax.lax.min_p)
    r_reduce_prod = _reducer(jax.lax.mul_p)
    r_reduce_and = _reducer(jax.lax.and_p)
    r_reduce_or = _reducer(jax.lax.or_p)
    r_reduce_xor = _reducer(jax.lax.xor_p)

    def _arg(self, ins, p, eqn, smaller):
        x = ins[0]
        (axis,) = p["axes"]
        dt = np.dtype(p["index_dtype"])
        xm = np.moveaxis(x, axis, -1)
        out = _obj(xm.shape[:-1])
        for idx in np.ndindex(out.shape):
            row = xm[idx]
            best, arg = row[0], np.asarray(0, dt)
            for j in range(1, row.shape[0]):
                v = row[j]
                better = self.op(smaller, v, best)
                if np.dtype(eqn.invars[0].aval.dtype).kind == "f":
                    nan_v = self.op(jax.lax.ne_p, v, v)
                    nan_b = self.op(jax.lax.ne_p, best, best)
                    better = self.op(
                        jax.lax.or_p,
                        self.op(jax.lax.and_p, better, self.op(jax.lax.not_p, nan_b)),
                        self.op(jax.lax.and_p, nan_v, self.op(jax.lax.not_p, nan_b)),
                    )
                best = self.where(better, v, best)
                arg = self.where(better, np.asarray(j, dt), arg)
            out[idx] = arg
        return out

    def r_argmin(self, ins, p, eqn):
        return self._arg(ins, p, eqn, jax.lax.lt_p)

    def r_argmax(self, ins, p, eqn):
        return self._arg(ins, p, eqn, jax.lax.gt_p)

    def _cum(prim: jcore.Primitive):  # pyright: ignore[reportSelfClsParameterName, reportGeneralTypeIssues]  (as _reducer)
        def rule(self, ins, p, eqn):
            x = np.moveaxis(ins[0], p["axis"], -1).copy()
            n = x.shape[-1]
            order = range(n - 2, -1, -1) if p["reverse"] else range(1, n)
            for j in order:
                k = j + 1 if p["reverse"] else j - 1
                for idx in np.ndindex(x.shape[:-1]):
                    x[idx + (j,)] = self.op(prim, x[idx + (k,)], x[idx + (j,)])
            return np.moveaxis(x, -1, p["axis"])

        return rule

    r_cumsum = _cum(jax.lax.add_p)
    r_cumprod = _cum(jax.lax.mul_p)
    r_cummax = _cum(jax.lax.max_p)
    r_cummin = _cum(jax.lax.min_p)

    def r_dot_general(self, ins, p, eqn):
        lhs, rhs = ins
        (lc, rc), (lb, rb) = p["dimension_numbers"]
        lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
        rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
        dt = eqn.outvars[0].aval.dtype
        shape = tuple(eqn.outvars[0].aval.shape)
        out = _obj(shape)
        csizes = [lhs.shape[i] for i in lc]
        for idx in np.ndindex(shape):
            nb = len(lb)
            b, l_, r_ = idx[:nb], idx[nb : nb + len(lf)], idx[nb + len(lf) :]
            acc = None
            for c in np.ndindex(tuple(csizes)):
                li, ri = [0] * lhs.ndim, [0] * rhs.ndim
                for k, i in enumerate(lb):
                    li[i] = b[k]
                for k, i in enumerate(rb):
                    ri[i] = b[k]
                for k, i in enumerate(lf):
                    li[i] = l_[k]
                for k, i in enumerate(rf):
                    ri[i] = r_[k]
                for k, (i, j) in enumerate(zip(lc, rc)):
                    li[i] = c[k]
                    ri[j] = c[k]
                a = self.op(
                    jax.lax.convert_element_type_p,
                    lhs[tuple(li)],
                    new_dtype=dt,
                    weak_type=False,
                    sharding=None,
                )
                bb = self.op(
                    jax.lax.convert_element_type_p,
                    rhs[tuple(ri)],
                    new_dtype=dt,
                    weak_type=False,
                    sharding=None,
                )
                term = self.op(jax.lax.mul_p, a, bb)
                acc = term if acc is None else self.op(jax.lax.add_p, acc, term)
            out[idx] = np.asarray(0, dt) if acc is None else acc
        return out

    # -- control flow ---------------------------------------------------------------------
    def _flat(self, xs):
        return [e for x in xs for e in x.reshape(-1)]

    def _unflat(self, flat, like):
        out, i = [], 0
        for x in like:
            n = x.size
            out.append(lane_array(flat[i : i + n], x.shape) if n else _obj(x.shape))
            i += n
        return out

    def r_while(self, ins, p, eqn):
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cc, bc, init = ins[:cn], ins[cn : cn + bn], ins[cn + bn :]
        cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
        dtypes = [np.dtype(v.aval.dtype) for v in eqn.invars[cn + bn :]]
        like = init
        dflat = [dt for x, dt in zip(init, dtypes) for _ in range(x.size)]
        flat0 = [self.full(e, dt) for e, dt in zip(self._flat(init), dflat)]

        def preds(flat):
            # a predicate of shape S (a while_loop vmapped inside the per-start program)
            # applies to the carries' leading axes S, element by element
            (c,) = self.closed(cj, list(cc) + self._unflat(flat, like))
            return c

        def cond(flat):
            # any start of the block, any element, still iterating (no reduce_or in Triton)
            c = [self.full(e, jnp.bool_).astype(jnp.int32) for e in preds(flat).reshape(-1)]
            return functools.reduce(jnp.maximum, c).max() > 0

        def body(flat):
            c = preds(flat)
            k = c.ndim
            new = self.closed(bj, list(bc) + self._unflat(flat, like))
            old = self._unflat(flat, like)
            res = []
            for n_, o_ in zip(new, old):
                for idx in np.ndindex(o_.shape):
                    go = self.full(c[idx[:k]], jnp.bool_)
                    o = o_[idx]
                    res.append(jnp.where(go, self.full(n_[idx], o.dtype), o))
            return res

        flat = jax.lax.while_loop(cond, body, flat0)
        return self._unflat(flat, like)

    def r_cond(self, ins, p, eqn):
        index, ops = ins[0][()], ins[1:]
        branches = p["branches"]
        if _is_known(index):
            i = int(np.clip(int(index), 0, len(branches) - 1))
            return self.closed(branches[i], ops)
        # a per-start index: each branch is computed only when some start of the block takes
        # it (a real branch on the block), and each start selects its own
        shapes = [tuple(v.aval.shape) for v in eqn.outvars]
        dts = [np.dtype(v.aval.dtype) for v in eqn.outvars]
        nb = len(branches)
        outs = []
        for j, br in enumerate(branches):
            rel = jax.lax.le_p if j == 0 else jax.lax.ge_p if j == nb - 1 else jax.lax.eq_p
            takes = self.full(self.op(rel, index, np.asarray(j, np.int32)), jnp.bool_)

            def compute(br=br):
                res = self.closed(br, list(ops))
                return [self.full(e, dt) for r, dt in zip(res, dts) for e in r.reshape(-1)]

            def skip():
                return [
                    jnp.zeros((self.B,), dt)
                    for s_, dt in zip(shapes, dts)
                    for _ in range(int(np.prod(s_)))
                ]

            flat = jax.lax.cond(jnp.max(takes.astype(jnp.int32)) > 0, compute, skip)
            outs.append(self._unflat(flat, [_obj(s_) for s_ in shapes]))
        res = []
        for k, v in enumerate(eqn.outvars):
            shape = tuple(v.aval.shape)
            o = _obj(shape)
            for idx in np.ndindex(shape):
                r = outs[0][k][idx]
                for j in range(1, len(outs)):
                    pick = (
                        self.op(jax.lax.ge_p, index, np.asarray(j, np.int32))
                        if j == len(outs) - 1
                        else self.op(jax.lax.eq_p, index, np.asarray(j, np.int32))
                    )
                    r = self.where(pick, outs[j][k][idx], r)
                o[idx] = r
            res.append(o)
        return res

    def r_scan(self, ins, p, eqn):
        nc, ncar = _scan_split(p)
        consts, carry, xs = ins[:nc], list(ins[nc : nc + ncar]), ins[nc + ncar :]
        length = p["length"]
        ys_steps = []
        order = range(length - 1, -1, -1) if p["reverse"] else range(length)
        for i in order:
            # x[i, ...]: a 0-d object array for a 1-D x (x[i] would be its bare element)
            out = self.closed(p["jaxpr"], list(consts) + carry + [x[i, ...] for x in xs])
            carry, ys = out[:ncar], out[ncar:]
            ys_steps.append((i, ys))
        ys_steps.sort(key=lambda t: t[0])
        ny = len(eqn.outvars) - ncar
        stacked = []
        for k in range(ny):
            shape = tuple(eqn.outvars[ncar + k].aval.shape)
            o = _obj(shape)
            for i, ys in ys_steps:
                o[i, ...] = ys[k]
            stacked.append(o)
        return carry + stacked

    # -- small linear algebra (jnp.linalg.solve) ---------------------------------------------
    def r_custom_linear_solve(self, ins, p, eqn):
        # the forward solve only: solve(consts, b)
        cl = p["const_lengths"]
        off = cl.matvec + cl.vecmat
        consts = ins[off : off + cl.solve]
        b = ins[sum(cl) :]
        return self.closed(p["jaxprs"].solve, list(consts) + list(b))

    def r_sort(self, ins, p, eqn):
        # odd-even transposition sort (stable: only adjacent, strictly ordered pairs swap)
        if p["num_keys"] != 1:
            raise NotImplementedError("the fused kernel sorts by one key")
        dim = p["dimension"]
        moved = [np.moveaxis(x, dim, -1) for x in ins]
        outs = [m.copy() for m in moved]
        for bidx in np.ndindex(moved[0].shape[:-1]):
            for o, r in zip(outs, self._sort1([m[bidx] for m in moved])):
                o[bidx] = r
        return [np.moveaxis(o, -1, dim) for o in outs]

    def _sort1(self, ins):
        cols = [list(x) for x in ins]
        n = len(cols[0])
        for rnd in range(n):
            for i in range(rnd % 2, n - 1, 2):
                swap = self.op(jax.lax.gt_p, cols[0][i], cols[0][i + 1])
                for c in cols:
                    a, b = c[i], c[i + 1]
                    c[i], c[i + 1] = self.where(swap, b, a), self.where(swap, a, b)
        return [lane_array(c, (n,)) for c in cols]

    def r_lu(self, ins, p, eqn):
        x = ins[0]
        outs = [_obj(tuple(v.aval.shape)) for v in eqn.outvars]
        for bidx in np.ndindex(x.shape[:-2]):
            for o, r in zip(outs, self._lu(x[bidx], eqn)):
                o[bidx] = r
        return outs

    def _lu(self, a, eqn):
        # LU with partial pivoting (LAPACK getrf): the pivot of column k is the first row
        # i >= k of largest |a[i, k]|
        a = a.copy()
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise NotImplementedError("the fused kernel factors square matrices only")
        n = a.shape[0]
        idt = np.dtype(eqn.outvars[1].aval.dtype)
        pivots = _obj((n,))
        perm = known_array(np.arange(n, dtype=idt))
        for k in range(n):
            best, piv = self.op(jax.lax.abs_p, a[k, k]), np.asarray(k, idt)
            for i in range(k + 1, n):
                v = self.op(jax.lax.abs_p, a[i, k])
                better = self.op(jax.lax.gt_p, v, best)
                best = self.where(better, v, best)
                piv = self.where(better, np.asarray(i, idt), piv)
            pivots[k] = piv
            if k < n - 1:
                is_ = [self.op(jax.lax.eq_p, piv, np.asarray(i, idt)) for i in range(k + 1, n)]
                rowk, pk = a[k].copy(), perm[k]
                for i, q in zip(range(k + 1, n), is_):
                    for j in range(n):
                        a[k, j] = self.where(q, a[i, j], a[k, j])
                        a[i, j] = self.where(q, rowk[j], a[i, j])
                    perm[k] = self.where(q, perm[i], perm[k])
                    perm[i] = self.where(q, pk, perm[i])
            for i in range(k + 1, n):
                a[i, k] = self.op(jax.lax.div_p, a[i, k], a[k, k])
                for j in range(k + 1, n):
                    a[i, j] = self.op(
                        jax.lax.sub_p, a[i, j], self.op(jax.lax.mul_p, a[i, k], a[k, j])
                    )
        return [a, pivots, perm]

    def r_triangular_solve(self, ins, p, eqn):
        a_all, b_all = ins
        out = b_all.copy()
        for bidx in np.ndindex(a_all.shape[:-2]):
            out[bidx] = self._tri(a_all[bidx], b_all[bidx], p)
        return out

    def _tri(self, a, b, p):
        if not p["left_side"]:
            raise NotImplementedError("the fused kernel solves op(a) x = b only")
        n = a.shape[-1]
        tr = bool(p["transpose_a"])
        lower = bool(p["lower"]) != tr

        def m(i, j):
            return a[j, i] if tr else a[i, j]

        x = b.copy()
        order = range(n) if lower else range(n - 1, -1, -1)
        for col in range(b.shape[1]):
            for i in order:
                acc = b[i, col]
                others = range(i) if lower else range(i + 1, n)
                for j in others:
                    acc = self.op(jax.lax.sub_p, acc, self.op(jax.lax.mul_p, m(i, j), x[j, col]))
                x[i, col] = acc if p["unit_diagonal"] else self.op(jax.lax.div_p, acc, m(i, i))
        return x

    def r_custom_jvp_call(self, ins, p, eqn):
        return self.closed(p["call_jaxpr"], ins)

    def r_custom_vjp_call(self, ins, p, eqn):
        cj = p.get("call_jaxpr", p.get("fun_jaxpr"))
        return self.closed(cj, ins)

    r_custom_vjp_call_jaxpr = r_custom_vjp_call


def trace(fn: Callable, *example) -> tuple[Any, Any]:
    """The closed jaxpr of ``fn`` on per-start arguments like ``example``, and its output tree."""
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*example)
    return closed, out_shape


def evaluate(closed, B: int, inputs: list) -> list:
    """The closed jaxpr ``closed`` on a block of ``B`` starts (``inputs`` as in
    :func:`soa_call`)."""
    return _Eval(B).run(closed.jaxpr, closed.consts, inputs)


def soa_call(fn: Callable, B: int, example: tuple, inputs: list) -> tuple[list, Any]:
    """Evaluate the per-start ``fn`` on a block of ``B`` starts.

    ``example``: per-start arguments (arrays or ShapeDtypeStructs) that fix the shapes;
    ``inputs``: one object array per leaf of ``example`` (its shape), whose elements are
    ``(B,)`` arrays or known scalars. Returns the outputs (one object array per leaf, elements
    ``(B,)`` arrays or known scalars) and the output tree."""
    closed, out_shape = trace(fn, *example)
    outs = evaluate(closed, B, inputs)
    return outs, jax.tree.structure(out_shape)


def full(e, B: int, dtype) -> jax.Array:
    """An element of an output as a ``(B,)`` array of ``dtype``."""
    return _Eval(B).full(e, np.dtype(dtype))
