"""The traced reverse pass kept on disk (rollax._integrate._traced): the same gradients as JAX's
own differentiation of the solve, from a fresh read of the file too, and only where it applies."""

from __future__ import annotations

import logging
import math

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax._integrate import _traced


class Oscillator(rollax.AbstractSystem):
    """x'' = -omega^2 x from (1, 0): the first zero of x at t* = pi / (2 omega)."""

    omega: jax.Array = rollax.parameter(1.0)

    state_names = ("x", "v")
    events = (rollax.crossing("zero", target=1),)

    def vector_field(self, t, y, mode):
        return jnp.stack([y[1], -(self.omega**2) * y[0]])

    def event_values(self, t, y, mode):
        return y[:1]


def _end(p):
    """(t*, v(t*)) of the oscillator with omega = p[0] from x0 = p[1]."""
    sol = rollax.solve(
        Oscillator(omega=p[0]), jnp.stack([p[1], 0.0]), 0.0, 50.0, rtol=1e-11, atol=1e-11
    )
    return jnp.stack([sol.t, sol.y[1]])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh compile cache (so a fresh traced-program folder) for the test, then the old one."""
    monkeypatch.delenv("ROLLAX_TRACED", raising=False)
    before = jax.config.jax_compilation_cache_dir
    rollax.configure(cache_dir=tmp_path / "cache")
    _traced._flat.cache_clear()
    _traced._load.cache_clear()
    yield tmp_path / "cache" / "rollax-traced"
    rollax.configure(cache_dir=before or "off")
    _traced._flat.cache_clear()
    _traced._load.cache_clear()


def _cases(n=4, seed=56):
    rng = np.random.default_rng(seed)
    return [jnp.array([rng.uniform(0.5, 2.5), rng.uniform(0.3, 2.0)]) for _ in range(n)]


def test_the_kept_reverse_pass_gives_the_exact_gradients(cache, caplog):
    """t* = pi / (2 omega), v(t*) = -x0 omega: on generated (omega, x0), through the exported
    reverse pass, written once and then read back as a new process would read it."""
    grad = jax.grad(lambda p: _end(p)[0] + _end(p)[1])
    for p in _cases():
        w, x0 = float(p[0]), float(p[1])
        exact = np.array([-math.pi / (2 * w**2) - x0, -w])
        np.testing.assert_allclose(grad(p), exact, rtol=1e-8, atol=1e-9)
    files = list(cache.glob("*.exported"))
    assert len(files) == 1, files  # one program for every case: keyed by shapes, not values
    _traced._flat.cache_clear()
    _traced._load.cache_clear()
    with caplog.at_level(logging.DEBUG, logger="rollax"):
        g = grad(_cases(1, seed=7)[0])
    assert any("read the traced reverse pass of Oscillator" in r.message for r in caplog.records)
    w, x0 = (float(v) for v in _cases(1, seed=7)[0])
    np.testing.assert_allclose(g, [-math.pi / (2 * w**2) - x0, -w], rtol=1e-8, atol=1e-9)


def test_jacrev_and_jit_agree_with_jax_own_differentiation(cache, monkeypatch):
    """``jax.jacrev`` maps the reverse pass over the outputs (sequentially here); under ``jit``
    the exported pair is staged like any call. Both equal the solve differentiated by JAX."""
    p = _cases(1, seed=3)[0]
    kept = np.asarray(jax.jacrev(_end)(p))
    jitted = np.asarray(jax.jit(jax.grad(lambda q: _end(q)[0]))(p))
    assert list(cache.glob("*.exported"))
    monkeypatch.setenv("ROLLAX_TRACED", "off")
    native = np.asarray(jax.jacrev(_end)(p))
    np.testing.assert_allclose(kept, native, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jitted, native[0], rtol=1e-12, atol=1e-14)


def test_used_only_for_first_order_reverse_mode_without_batching(monkeypatch):
    monkeypatch.setenv("ROLLAX_TRACED", "on")
    seen = {}

    def probe(name):
        def f(x):
            seen[name] = _traced.wanted([x]) if _traced._directory() else "no cache"
            return x * x

        return f

    x = jnp.asarray(1.5)
    jax.grad(probe("grad"))(x)
    jax.jit(jax.grad(probe("jit(grad)")))(x)
    jax.jvp(probe("jvp"), (x,), (x,))
    jax.vmap(jax.grad(probe("vmap(grad)")))(jnp.ones(3))
    jax.grad(jax.grad(probe("grad(grad)")))(x)
    jax.jacfwd(jax.jacrev(probe("hessian")))(x)
    probe("plain")(x)
    if jax.config.jax_enable_compilation_cache and jax.config.jax_compilation_cache_dir:
        assert seen == {
            "grad": True,
            "jit(grad)": True,
            "jvp": False,
            "vmap(grad)": False,
            "grad(grad)": False,
            "hessian": False,
            "plain": False,
        }


def test_the_key_is_the_program():
    """Another vector field, other constants or other shapes: another key; the same program
    traced again: the same key."""

    def key(fn, *shapes):
        avals = [jax.ShapeDtypeStruct(s, jnp.float64) for s in shapes]
        return _traced._key(jax.jit(fn).trace(*avals).jaxpr, avals)

    c = np.arange(3.0)
    assert key(lambda x: jnp.sin(x) * 2, (3,)) == key(lambda x: jnp.sin(x) * 2, (3,))
    assert key(lambda x: jnp.sin(x) * 2, (3,)) != key(lambda x: jnp.cos(x) * 2, (3,))
    assert key(lambda x: jnp.sin(x) * 2, (3,)) != key(lambda x: jnp.sin(x) * 2, (4,))
    assert key(lambda x: x + jnp.asarray(c), (3,)) != key(lambda x: x + jnp.asarray(c + 1), (3,))

    def rule(scale):
        @jax.custom_jvp
        def f(x):
            return jnp.sin(x)

        f.defjvp(lambda p, t: (jnp.sin(p[0]), scale * jnp.cos(p[0]) * t[0]))
        return f

    # the same forward program, another derivative rule (Python, not in the printed jaxpr):
    # another code, or the same code closing over another number
    one, two, again = rule(1.0), rule(2.0), rule(1.0)
    k1 = key(lambda x: one(x), (3,))
    assert k1 != key(lambda x: two(x), (3,))
    assert k1 == key(lambda x: again(x), (3,))

    @jax.custom_jvp
    def other(x):
        return jnp.sin(x)

    other.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(p[0]) * t[0] * 3.0))
    assert k1 != key(lambda x: other(x), (3,))

    # a constant of an inner closed jaxpr (named, not printed, in the text)
    def inner(a):
        return lambda x: jax.jit(lambda y: y + jnp.asarray(a))(x)

    assert key(inner(c), (3,)) != key(inner(c + 1), (3,))
    assert key(inner(c), (3,)) == key(inner(c.copy()), (3,))

    # a custom rule's static arguments (equinox's checkpointed loop: the same forward program,
    # another reverse pass; the second was served the first's, stop 61)
    def loop(checkpoints):
        def fn(x):
            def body(c):
                return c[0] + 1, c[1] * jnp.sin(c[1])

            return eqxi.while_loop(
                lambda c: c[0] < 5,
                body,
                (0, x),
                max_steps=10,
                kind="checkpointed",
                checkpoints=checkpoints,
            )[1]

        return fn

    assert key(loop(3), (3,)) == key(loop(3), (3,))
    assert key(loop(3), (3,)) != key(loop(4), (3,))


def test_the_kept_route_is_on_with_a_cache_and_off_on_request(monkeypatch):
    monkeypatch.delenv("ROLLAX_TRACED", raising=False)
    assert (_traced._directory() is None) == (not jax.config.jax_compilation_cache_dir)
    monkeypatch.setenv("ROLLAX_TRACED", "off")
    assert _traced._directory() is None


def _oscillator(target: int, scale: float = 1.0):
    c = np.array([scale])  # (a captured array: a constant of an inner closed jaxpr)

    class Oscillator(rollax.AbstractSystem):  # the same name and fields for every variant
        omega: jax.Array = rollax.parameter(1.0)
        state_names = ("x", "v")
        events = (rollax.crossing("zero", target=target),)

        def vector_field(self, t, y, mode):
            w = self.omega * jnp.asarray(c)[0]
            return jnp.stack([y[1], -(w**2) * y[0]])

        def event_values(self, t, y, mode):
            return y[:1]

    return Oscillator


def _variants(n=4, seed=57):
    """(target, scale) pairs, distinct, around the stop-57 collision (targets 6 and 3)."""
    rng = np.random.default_rng(seed)
    out = [(6, 1.0), (3, 1.0)]
    while len(out) < n:
        v = (int(rng.integers(1, 6)), float(np.round(rng.uniform(0.6, 1.6), 3)))
        if v not in out:
            out.append(v)
    return out


def _event_time_gradients(variants):
    """dt*/domega at omega = 2 through rollax.solve, and its closed form: the crossing of
    target k is at t* = (2k - 1) pi / (2 c omega), so dt*/domega = -(2k - 1) pi / (8 c)."""
    out = []
    for target, scale in variants:
        O = _oscillator(target, scale)
        g = jax.grad(
            lambda w: (
                rollax.solve(O(omega=w), jnp.array([1.0, 0.0]), 0.0, 20.0, rtol=1e-10, atol=1e-10).t
            )  # fmt: skip
        )(2.0)
        out.append((float(g), -(2 * target - 1) * np.pi / (8 * scale)))
    return out


def test_systems_differing_only_in_a_target_get_their_own_gradients(monkeypatch):
    """JAX's own route (the kept reverse pass off): each its own closed form."""
    monkeypatch.setenv("ROLLAX_TRACED", "off")
    for got, exact in _event_time_gradients(_variants(2)):
        assert got == pytest.approx(exact, rel=1e-8)


@pytest.mark.slow  # (71 s: CI time, stop 62)
def test_the_kept_route_tells_systems_apart(cache):
    """Systems that differ only in an event target or a captured constant, one after another
    in one process with one cache: each gets its own reverse pass (stop 57: the second of the
    first two read the first one's, the target being a constant of an inner closed jaxpr that
    the key did not hash), and a program of its own on disk."""
    variants = _variants()
    for (got, exact), v in zip(_event_time_gradients(variants), variants):
        assert got == pytest.approx(exact, rel=1e-8), v
    assert len(list(cache.glob("*.exported"))) == len(variants)
