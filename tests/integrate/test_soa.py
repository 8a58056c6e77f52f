"""rollax._integrate._soa: a per-start program rewritten structure-of-arrays computes what jax.vmap of it
computes, on generated inputs (several seeds) for every rule: static and per-start indexing,
gathers and scatters (also vmapped ones), reductions, argmin/argmax with NaN, cumulative sums,
dot products, selects of several cases, rounding ties, per-start while loops and conds,
fori_loops, and jnp.linalg.solve (LU with pivoting, triangular solves, the permutation sort)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax._integrate import _soa
from rollax._core.events import locate_root


def _run(fn, *args):
    """fn on the leading axis of args: (vmap, structure-of-arrays) results as NumPy arrays."""
    B = args[0].shape[0]
    ref = jax.vmap(fn)(*args)
    ins = []
    for a in args:
        a = np.asarray(a)
        els = [jnp.asarray(a.reshape(B, -1)[:, i]) for i in range(int(np.prod(a.shape[1:])))]
        ins.append(_soa.lane_array(els, a.shape[1:]))
    outs, _ = _soa.soa_call(fn, B, tuple(a[0] for a in args), ins)
    got = [
        np.stack([np.broadcast_to(np.asarray(e), (B,)) for e in o.reshape(-1)], -1).reshape(
            (B,) + o.shape
        )
        if o.size
        else np.zeros((B,) + o.shape)
        for o in outs
    ]
    return [np.asarray(r) for r in jax.tree.leaves(ref)], got


def _indexing(y, k):
    a = y[0] * jnp.sin(y[1:3]).sum() + jnp.dot(y[:2], y[2:4])
    y0, y1, y2, y3 = y  # jax 0.11: one ``unstack``; its elements then go into a select
    return (
        jnp.stack([a, y[k], y[-1], jnp.take(y, k + 1, mode="clip")]),
        jnp.where(y0 > y1, y2, y3),
        y.at[k].set(-1.0),
        y.at[k].add(2.0),
        y[::-1],
        jnp.roll(y, 1),
        jnp.concatenate([y[:1], y[2:]]),
        jnp.pad(y[:2], (1, 2)),
    )


def _reductions(y, k):
    z = jnp.where(jnp.arange(4) == k, jnp.nan, y)  # a NaN at a per-start place
    m = jnp.outer(y, y[::-1])
    return (
        jnp.argmax(y),
        jnp.argmin(y),
        jnp.argmin(z),
        jnp.argmax(z),
        jnp.cumsum(y),
        jnp.cumprod(y),
        jnp.max(m, axis=0),
        jnp.min(m),
        jnp.sum(m, axis=1),
        m @ y,
        jnp.any(y > 0.5),
        jnp.all(y > 0.1),
        jnp.prod(y),
        # empty reductions: each operation's identity
        jnp.sum(y[:0]),
        jnp.prod(y[:0]),
        jnp.max(y[:0], initial=-1.0),
        jnp.any(y[:0] > 0),
    )


def _selects(y, k):
    r = jnp.rint(4 * y - 0.5)  # ties at half-integers on some inputs
    return (
        jax.lax.select_n(k % 3, y, 2 * y, 3 * y),
        jnp.round(y * 4),
        r,
        jnp.floor(y * 3),
        jnp.clip(y, 0.3, 0.6),
        jnp.where(y > 0.5, y, -y),
    )


def _control(y, k):
    r = locate_root(lambda t: jnp.cos(t) - y[0], 0.0, 3.0, 1.0 - y[0], jnp.cos(3.0) - y[0])
    w = jax.lax.cond(k > 1, lambda: y * 2, lambda: y.at[k].set(7.0))
    s = jax.lax.switch(k % 3, [lambda: y[0], lambda: y[1] ** 2, lambda: -y[2]])
    f = jax.lax.fori_loop(0, 3, lambda i, c: c + y[i], 0.0)
    n = jax.lax.while_loop(
        lambda c: c[0] < 10.0 * y[1], lambda c: (c[0] + 1.0, c[1] * 1.5), (0.0, 1.0)
    )
    # a loop vmapped inside the program (its predicate has a shape)
    v = jax.vmap(lambda a: jax.lax.while_loop(lambda c: c < a, lambda c: c + 0.3, 0.0))(y)
    # a scan with a constant, a carry, inputs and outputs, forwards and in reverse
    sc = [
        jax.lax.scan(lambda c, x: (c * y[3] + x, c - x), y[0], y[1:], reverse=rev)
        for rev in (False, True)
    ]
    return r, w, s, f, n, v, sc


def _linalg(y, k):
    A = jnp.outer(y, y) + jnp.diag(1.0 + y) + jnp.where(k > 1, 1.0, -1.0) * jnp.eye(4)[::-1]
    return (
        jnp.linalg.solve(A, y),
        jax.vmap(jnp.linalg.solve)(A[None], y[None])[0],
        jnp.sort(y * (1 - 2 * (k % 2))),
    )


@pytest.mark.parametrize("fn", [_indexing, _reductions, _selects, _control, _linalg])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_structure_of_arrays_computes_what_vmap_computes(fn, seed):
    rng = np.random.default_rng(seed)
    B = 16
    y = jnp.asarray(rng.uniform(0.05, 0.95, (B, 4)))
    if seed == 2:  # exact ties for the rounding rules
        y = y.at[:4, 0].set(jnp.array([0.125, 0.375, 0.625, 0.875]))
    k = jnp.asarray(rng.integers(0, 4, B), jnp.int32)
    ref, got = _run(fn, y, k)
    assert len(ref) == len(got)
    for i, (r, g) in enumerate(zip(ref, got)):
        np.testing.assert_allclose(
            g.astype(float),
            r.astype(float),
            rtol=1e-13,
            atol=1e-13,
            err_msg=f"{fn.__name__}: output {i}",
        )


def test_scan_counts_are_read_from_either_jax_layout():
    """jax <= 0.10 gives a scan equation ``num_consts``/``num_carry``; jax 0.11 packs the
    (consts, carry, xs) groups into ``ft_in`` (the penny's fused kernel failed on the GPU
    machine's jax 0.11.2 with ``KeyError: 'num_consts'``)."""

    class _Packed:  # the part of jax 0.11's flat-tree object that is read
        def __init__(self, *groups):
            self.groups = groups

        def unpack(self):
            return self.groups

    assert _soa._scan_split({"num_consts": 2, "num_carry": 3}) == (2, 3)
    assert _soa._scan_split({"ft_in": _Packed((None,) * 2, (None,) * 3, (None,))}) == (2, 3)
    eqn = jax.make_jaxpr(lambda c, xs: jax.lax.scan(lambda c, x: (c + x, c), c, xs))(
        1.0, jnp.ones(3)
    ).eqns[0]
    assert _soa._scan_split(eqn.params) == (0, 1)


def test_unstack_gives_each_element_as_an_array():
    """jax 0.11 unpacks a vector (``a, b = y``) by the ``unstack`` primitive. Its rule gave the
    bare ``(B,)`` element of a vector, which the next rule could not broadcast: the shot's
    fused kernel failed on the H100 (jax 0.11.2) with ``TracerArrayConversionError``."""
    els = [jnp.full((4,), float(i)) for i in range(6)]
    for shape, axis in (((3,), 0), ((2, 3), 0), ((2, 3), 1)):
        x = _soa.lane_array(els[: int(np.prod(shape))], shape)
        outs = _soa._Eval(4).r_unstack([x], {"axis": axis}, None)
        assert len(outs) == shape[axis]
        for i, o in enumerate(outs):
            assert isinstance(o, np.ndarray) and o.dtype == object
            rest = shape[:axis] + shape[axis + 1 :]
            assert o.shape == rest
            for idx in np.ndindex(rest):
                assert o[idx] is x[idx[:axis] + (i,) + idx[axis:]]


def test_an_unsupported_primitive_is_named():
    def fn(y, k):
        return jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct((), y.dtype), y[0])

    with pytest.raises(NotImplementedError, match="pure_callback"):
        _run(fn, jnp.ones((4, 2)), jnp.zeros(4, jnp.int32))
