"""``k`` applications of equinox's ``prevbefore`` in one step, and diffrax's chain of 100 of them.

diffrax's loop computes ``t1`` less 100 ulps (the threshold at which it rounds a step's end to
``t1``) as 100 chained ``eqxi.prevbefore`` calls. Where ``t1`` is a constant XLA folds them;
where it is traced (the segment loop's end, which skips a solve that needs none; ``t1`` inside
``rollax.solve``'s jit) every call stays in the program: 100 ``nextafter`` expansions, 1,700 of
the oscillator's 5,970 optimised HLO instructions and 10-15 % of its forward compile (12-23 %
on the hybrid ball and pendulum; measured, ``benchmarks/RESULTS.md``, stop 70). :func:`prevbefore_k` gives the same bits with about twenty
operations, and :func:`composed_prevbefore` makes diffrax's chain use it while diffrax is traced.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import jax
import jax.numpy as jnp

#: itemsize: (the integer of that size, the bits of +inf, the mask that drops the sign)
_INT = {
    8: (jnp.int64, 0x7FF0_0000_0000_0000, 0x7FFF_FFFF_FFFF_FFFF),
    4: (jnp.int32, 0x7F80_0000, 0x7FFF_FFFF),
}


def prevbefore_k(x, k: int):
    """``k`` chained ``equinox.internal.prevbefore(x)`` (the float ``k`` steps toward -inf), as
    XLA computes the chain (denormals as zero, as JAX does): a step from a zero or a denormal
    goes to ``-tiny``; ``-inf`` stays; NaN stays. The same bits (``tests/integrate/test_ulp.py``)
    and, as equinox's, the tangent of ``x`` unchanged. One call in the caller's program (a
    jitted function of ``k`` as an array: the same small program for every ``k``)."""
    x = jnp.asarray(x)
    return _prevbefore_jit(x, jnp.asarray(k, _INT[x.dtype.itemsize][0]))


@jax.custom_jvp
def _prevbefore_by(x, k):
    it, inf_bits, mask = _INT[x.dtype.itemsize]
    tiny = jnp.finfo(x.dtype).tiny
    i = jax.lax.bitcast_convert_type(x, it)
    mag = i & jnp.asarray(mask, it)  # the bits less the sign
    mag_tiny = jax.lax.bitcast_convert_type(jnp.asarray(tiny, x.dtype), it)
    neg_tiny = jax.lax.bitcast_convert_type(jnp.asarray(-tiny, x.dtype), it)
    # from x >= tiny: k steps down while they stay at or above the largest denormal
    d = mag - mag_tiny  # the steps from x down to tiny
    pos = jnp.where(k <= d + 1, i - k, neg_tiny + (k - d - 2))
    # from x <= -tiny: the magnitude grows, up to -inf
    neg = i + (jnp.minimum(mag + k, inf_bits) - mag)
    # from a zero or a denormal: -tiny, then k - 1 steps down
    small = neg_tiny + (k - 1)
    bits = jnp.where(mag < mag_tiny, small, jnp.where(x > 0, pos, neg))
    return jnp.where(jnp.isnan(x), x, jax.lax.bitcast_convert_type(bits, x.dtype))


@_prevbefore_by.defjvp
def _prevbefore_by_jvp(primals, tangents):
    # (equinox's: the tangent passes unchanged, as through each call of the chain)
    return _prevbefore_by(*primals), tangents[0]


_prevbefore_jit = jax.jit(_prevbefore_by)


class _Composing:
    """``prevbefore`` that, called on its own last output, returns ``prevbefore_k`` of the
    chain's start: so the chain's intermediate values are unused and vanish from the program."""

    def __init__(self):
        self.local = threading.local()

    def __call__(self, x):
        last = getattr(self.local, "last", None)
        if last is not None and x is last[0]:
            x0, k = last[1], last[2] + 1
        else:
            x0, k = x, 1
        y = prevbefore_k(x0, k)
        self.local.last = (y, x0, k)
        return y


_LOCK = threading.Lock()
_depth = 0
_saved: Any = None


@contextlib.contextmanager
def composed_prevbefore():
    """While diffrax is traced here, its ``eqxi.prevbefore`` chains cost one
    :func:`prevbefore_k` (the same values). Nested and threaded uses are counted; the original
    is restored when the last one ends."""
    global _depth, _saved
    try:
        import equinox.internal as eqxi
    except ImportError:  # (another equinox: its chain stays as it is)
        yield
        return
    with _LOCK:
        if _depth == 0:
            _saved = eqxi.prevbefore
            eqxi.prevbefore = _Composing()
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                eqxi.prevbefore = _saved
