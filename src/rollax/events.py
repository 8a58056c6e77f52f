"""Event semantics shared by every integrator in rollax (the diffrax path and the ensemble kernel).

An event is a scalar function ``fn(t, y, args)`` of one of two kinds:

* ``"boundary"``: the motion is valid while ``fn > 0``; the event fires at the first time
  ``fn <= 0``, also at the initial time (a contact force that is already negative, say).
* ``"crossing"``: counts transversal sign changes of ``fn`` (a sign change between two
  non-zero values; exact zeros are stepped over) and fires at the ``count``-th one.

A trajectory ends at the **earliest** root among all its events. Integrators check the event
functions on a few samples of each accepted step (so that a function that crosses zero twice
inside one step is still seen), and the bracketed root is then located on the step's dense
output to ``xtol`` in time. Both paths call :func:`scan_samples` and :func:`locate_root`.
"""

from __future__ import annotations

from typing import Callable, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

BOUNDARY = 0
CROSSING = 1


class Event(eqx.Module):
    """One event function with its kind and, for crossings, the number that ends the run."""

    fn: Callable
    kind: Literal["boundary", "crossing"] = eqx.field(static=True, default="boundary")
    count: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        if self.kind not in ("boundary", "crossing"):
            raise ValueError(f"kind = {self.kind!r} must be 'boundary' or 'crossing'")
        if not (isinstance(self.count, int) and self.count >= 1):
            raise ValueError(f"count = {self.count!r} must be an integer >= 1")
        if self.kind == "boundary" and self.count != 1:
            raise ValueError(f"count = {self.count!r} must be 1 for a boundary event")


class EventSet(eqx.Module):
    """Several events evaluated together as one vector-valued function.

    ``fn(t, y, args) -> (n_events,)``; ``kinds`` and ``targets`` (crossings needed to end the
    run; 1 for boundaries) are static tuples. A target of 0 means 'count but never stop'.
    """

    fn: Callable
    kinds: tuple[int, ...] = eqx.field(static=True)
    targets: tuple[int, ...] = eqx.field(static=True)

    @property
    def n(self) -> int:
        return len(self.kinds)

    @staticmethod
    def from_events(events) -> "EventSet":
        """Bundle a sequence of :class:`Event` into one vector-valued function."""
        events = tuple(events)
        fns = tuple(e.fn for e in events)

        def fn(t, y, args):
            if not fns:
                return jnp.zeros((0,), dtype=jnp.result_type(y))
            return jnp.stack([jnp.asarray(f(t, y, args), dtype=jnp.result_type(y)) for f in fns])

        kinds = tuple(BOUNDARY if e.kind == "boundary" else CROSSING for e in events)
        return EventSet(fn, kinds, tuple(e.count for e in events))

    def initial_state(self, g0: Float[Array, " n"]) -> tuple[Float[Array, " n"], Int[Array, " n"]]:
        """Reference signs and crossing counts at the start from the values ``g0`` there."""
        return jnp.sign(g0), jnp.zeros(g0.shape, dtype=jnp.int32)

    def fired_at_start(self, g0: Float[Array, " n"]) -> Bool[Array, " n"]:
        """Boundary events whose function is already <= 0 at the initial time."""
        kinds = jnp.asarray(self.kinds, dtype=jnp.int32)
        return (kinds == BOUNDARY) & (g0 <= 0)


def scan_samples(
    events: EventSet,
    values: Float[Array, "k n"],
    sign: Float[Array, " n"],
    count: Int[Array, " n"],
    targets: Int[Array, " n"] | None = None,
) -> tuple[Bool[Array, " n"], Int[Array, " n"], Float[Array, " n"], Int[Array, " n"]]:
    """Walk time-ordered samples of the event functions inside one step.

    ``values[k]`` are the event values at the k-th sample (k = 0 is the first sample after the
    step's start). ``sign`` is each function's last non-zero sign before the step and ``count``
    its crossings so far; ``targets`` overrides the events' static crossing targets (0 = never
    fire). Returns ``(fired, first, sign_out, count_out)``: which events end the
    run inside the step, the first sample index at which each fires (``k`` if none), and the
    sign/count after the whole step (for events that do not fire).
    """
    kinds = jnp.asarray(events.kinds, dtype=jnp.int32)
    targets = jnp.asarray(events.targets if targets is None else targets, dtype=jnp.int32)
    n_samples = values.shape[0]
    is_boundary = kinds == BOUNDARY
    # Unrolled over the (few, static) samples: no loop in the kernel's hot loop.
    first = jnp.full(sign.shape, n_samples, dtype=jnp.int32)
    for k in range(n_samples):
        gk = values[k]
        s = jnp.sign(gk)
        flip = (s != 0) & (s == -sign)
        count = count + flip.astype(count.dtype)
        sign = jnp.where(s != 0, s, sign)
        hit = jnp.where(is_boundary, gk <= 0, (targets > 0) & (count >= targets) & flip)
        first = jnp.where(hit & (first == n_samples), k, first)
    fired = first < n_samples
    return fired, first, sign, count


def locate_root(
    g: Callable[[Float[Array, ""]], Float[Array, ""]],
    a: Float[Array, ""],
    b: Float[Array, ""],
    ga: Float[Array, ""],
    gb: Float[Array, ""],
    *,
    xtol: float = 1e-13,
    max_iter: int = 100,
) -> Float[Array, ""]:
    """Locate a root of the scalar ``g`` in the bracket ``[a, b]`` (Illinois regula falsi).

    ``g(a)`` and ``g(b)`` lie on different sides of zero, where 'positive' means ``g > 0``.
    Returns the right end of the final bracket, i.e. a point where the event has happened
    (``g <= 0`` for a boundary event). Every third iterate is a bisection, which bounds the
    worst case; the iteration stops when the bracket is shorter than ``xtol * max(1, |b|)``.
    """
    sa = ga > 0

    def cond(c):
        a, b, _, _, it, _ = c
        return (it < max_iter) & (b - a > xtol * jnp.maximum(1.0, jnp.abs(b)))

    def body(c):
        a, b, ga, gb, it, side = c
        x = (a * gb - b * ga) / (gb - ga)
        x = jnp.where(jnp.isfinite(x) & (x > a) & (x < b), x, 0.5 * (a + b))
        x = jnp.where(it % 3 == 2, 0.5 * (a + b), x)
        gx = g(x)
        left = (gx > 0) == sa  # same side as a: the root is in [x, b]
        ga_new = jnp.where(left, gx, jnp.where(side == -1, 0.5 * ga, ga))
        gb_new = jnp.where(left, jnp.where(side == 1, 0.5 * gb, gb), gx)
        return (
            jnp.where(left, x, a),
            jnp.where(left, b, x),
            ga_new,
            gb_new,
            it + 1,
            jnp.where(left, jnp.int32(1), jnp.int32(-1)),
        )

    _, b, _, _, _, _ = jax.lax.while_loop(cond, body, (a, b, ga, gb, jnp.int32(0), jnp.int32(0)))
    return b
