"""``prevbefore_k`` against equinox's chain of ``prevbefore`` calls, and diffrax's chain as one.

rollax._integrate._ulp replaces the 100 chained ``eqxi.prevbefore`` calls of diffrax's loop
(t1 less 100 ulps) by one computation on the bits: it must give the same bits everywhere the
chain is defined, including zeros, denormals (JAX's denormals-are-zero), the largest floats and
the infinities, and the solves that use it must not change.
"""

from __future__ import annotations

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax._integrate import _ulp


def _chain(x, k):
    for _ in range(k):
        x = eqxi.prevbefore(x)
    return x


def _edge_values(dtype):
    fi = np.finfo(dtype)
    tiny, eps = float(fi.tiny), float(fi.eps)
    v = [0.0, 1.0, 100.0, 1e-9, 0.5, 2.0, float(fi.max), np.inf, -np.inf, np.nan]
    v += [tiny * (1 + j * eps) for j in range(0, 130, 3)]  # steps that reach the denormals
    v += [float(fi.smallest_subnormal), 3 * float(fi.smallest_subnormal), tiny / 3]
    v += [float(np.nextafter(dtype(fi.max), dtype(0))), 2.0 ** float(fi.minexp + 3)]
    rng = np.random.default_rng(5)
    v += list(rng.standard_normal(60) * 10.0 ** rng.integers(-30, 30, 60))
    v += list(rng.standard_normal(20) * 10.0 ** rng.integers(fi.minexp // 4, fi.maxexp // 4, 20))
    return np.array(v + [-x for x in v], dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("k", [1, 2, 3, 37, 100])
def test_the_same_bits_as_equinoxs_chain(dtype, k):
    x = jnp.asarray(_edge_values(dtype))
    want = np.asarray(jax.jit(lambda x: _chain(x, k))(x))
    got = np.asarray(jax.jit(lambda x: _ulp.prevbefore_k(x, k))(x))
    assert got.dtype == want.dtype == dtype
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bad = ~nan & ((got != want) | (np.signbit(got) != np.signbit(want)))
    assert not bad.any(), list(zip(np.asarray(x)[bad], want[bad], got[bad]))[:5]


def test_its_tangent_passes_unchanged_as_through_the_chain():
    f = lambda x: 3.0 * _ulp.prevbefore_k(x, 100)  # noqa: E731
    g = lambda x: 3.0 * _chain(x, 100)  # noqa: E731
    for x in (2.0, -7.5, 1e-9):
        assert jax.grad(f)(x) == jax.grad(g)(x) == 3.0
        assert jax.jvp(f, (x,), (1.0,))[1] == 3.0


def test_diffraxs_chain_is_one_computation_while_composed_and_restored_after():
    def solve(t1):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, a: -y), diffrax.Tsit5(), 0.0, t1, 0.1, 1.0
        ).ys

    # (a new function each time: JAX reuses a function's trace)
    traced_t1 = lambda: jax.jit(lambda t1: solve(t1)).lower(jnp.asarray(3.0)).as_text()  # noqa: E731
    plain = traced_t1()
    original = eqxi.prevbefore
    with _ulp.composed_prevbefore():
        with _ulp.composed_prevbefore():  # nested: still composed, restored by the outer one
            composed = traced_t1()
        assert eqxi.prevbefore is not original
    assert eqxi.prevbefore is original
    # a traced t1 kept all 100 nextafters of the chain in the program; composed, none is left
    assert plain.count("next_after") - composed.count("next_after") == 100
    with _ulp.composed_prevbefore():
        a = jax.jit(lambda t1: solve(t1))(jnp.asarray(3.0))
    assert np.array_equal(a, jax.jit(lambda t1: solve(t1))(jnp.asarray(3.0)))


@pytest.mark.parametrize("seed", range(4))
def test_solves_with_a_traced_end_time_are_unchanged(seed):
    # generated oscillators ended at a crossing or at a traced t1: the solve under the
    # composed chain equals the same solve with equinox's own chain, bit for bit
    rng = np.random.default_rng(seed)

    class Osc(rollax.AbstractSystem):
        omega: jax.Array = rollax.parameter(1.0)
        state_names = ("x", "v")

        @property
        def events(self):
            return (rollax.crossing("zero", target=2),)

        def vector_field(self, t, y, mode):
            return jnp.stack([y[1], -(self.omega**2) * y[0]])

        def event_values(self, t, y, mode):
            return y[:1]

    sys_ = Osc(omega=float(rng.uniform(0.5, 3.0)))
    y0 = jnp.array([float(rng.uniform(0.2, 2.0)), float(rng.uniform(-1, 1))])
    t1 = jnp.asarray(float(rng.uniform(0.5, 8.0)))
    run = lambda t1: rollax.solve(sys_, y0, 0.0, t1, rtol=1e-10, atol=1e-10)  # noqa: E731
    ours_f = jax.jit(run)
    assert ours_f.lower(t1).as_text().count("next_after") == 0
    ours = ours_f(t1)
    jax.clear_caches()  # (rollax.solve's inner trace would be reused)
    saved = _ulp.composed_prevbefore
    try:  # the same solve with diffrax's own chain of 100 calls
        _ulp.composed_prevbefore = _no_composing
        theirs_f = jax.jit(lambda t1: run(t1))
        assert theirs_f.lower(t1).as_text().count("next_after") >= 100
        theirs = theirs_f(t1)
    finally:
        _ulp.composed_prevbefore = saved
        jax.clear_caches()
    assert int(ours.status) == int(theirs.status)
    assert np.array_equal(np.asarray(ours.y), np.asarray(theirs.y))
    assert float(ours.t) == float(theirs.t)


class _no_composing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
