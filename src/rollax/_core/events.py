"""Event semantics shared by every integrator in rollax (the diffrax path and the ensemble kernel).

An event is a scalar function ``fn(t, y, args)`` of one of two kinds:

* ``"boundary"``: the motion is valid while ``fn > 0``; the event fires at the first time
  ``fn <= 0``, also at the initial time (a contact force that is already negative, say).
* ``"crossing"``: counts transversal sign changes of ``fn`` (a sign change between two
  non-zero values; exact zeros are stepped over) and fires at the ``count``-th one.

A trajectory ends at the **earliest** root among all its events. Integrators check the event
functions on a few samples of each accepted step (so that a function that crosses zero twice
inside one step is still seen), and the bracketed root is then located on the step's dense
output to ``xtol`` in time. Both paths walk the samples with :func:`scan` and locate the root
with :func:`locate_in_step` (:func:`scan_samples` is the walk without the exact-zero times).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Int

BOUNDARY = 0
CROSSING = 1


class EventSet(eqx.Module):
    """Several events evaluated together as one vector-valued function.

    ``fn(t, y, args) -> (n_events,)``; ``kinds`` and ``targets`` (crossings needed to end the
    run; 1 for boundaries) are static tuples. A target of 0 means 'count but never stop'.
    """

    fn: Callable
    kinds: tuple[int, ...] = eqx.field(static=True)
    targets: tuple[int, ...] = eqx.field(static=True)
    # +1: count only upward crossings (to g > 0), -1: only downward, 0: both (default)
    directions: tuple[int, ...] = eqx.field(static=True, default=())

    def __check_init__(self):
        if len(self.targets) != len(self.kinds):
            raise ValueError(f"targets = {self.targets!r} must have one entry per event")
        if self.directions and len(self.directions) != len(self.kinds):
            raise ValueError(f"directions = {self.directions!r} must have one entry per event")

    @property
    def dirs(self) -> tuple[int, ...]:
        """Crossing directions, one per event (0 where none was given)."""
        return self.directions or (0,) * len(self.kinds)

    @property
    def n(self) -> int:
        return len(self.kinds)

    def initial_state(self, g0: Float[Array, " n"]) -> tuple[Float[Array, " n"], Int[Array, " n"]]:
        """Reference signs and crossing counts at the start from the values ``g0`` there."""
        return jnp.sign(g0), jnp.zeros(g0.shape, dtype=jnp.int32)

    def fired_at_start(
        self, g0: Float[Array, " n"], sign0: Float[Array, " n"] | None = None
    ) -> Bool[Array, " n"]:
        """Boundary events already fired at the initial time: ``g0 < 0``, or ``g0 == 0`` where
        the function does not move inwards. ``sign0``: the scan's initial signs (the sign of
        ``g0``, or where ``g0 == 0`` that of its derivative along the field); a boundary
        exactly at zero that moves into ``g > 0`` (``sign0 > 0``) has not fired -- the state
        an impact's reset map leaves on its boundary, which fired again at once before (a ball
        reported 3 impacts at one time). None: every ``g0 <= 0`` has fired."""
        kinds = jnp.asarray(self.kinds, dtype=jnp.int32)
        fired = (kinds == BOUNDARY) & (g0 <= 0)
        return fired if sign0 is None else fired & (sign0 <= 0)


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
    a: Float[ArrayLike, ""],
    b: Float[ArrayLike, ""],
    ga: Float[ArrayLike, ""],
    gb: Float[ArrayLike, ""],
    *,
    xtol: float = 1e-13,
    max_iter: int = 100,
    ends: bool = False,
) -> Float[Array, ""] | tuple[Float[Array, ""], Float[Array, ""], Float[Array, ""]]:
    """Locate a root of the scalar ``g`` in the bracket ``[a, b]`` (Chandrupatla's method).

    ``g(a)`` and ``g(b)`` lie on different sides of zero, where 'positive' means ``g > 0``.
    Returns the end of the final bracket on the side of ``b``, i.e. a point where the event
    has happened (``g <= 0`` for a boundary event). The iteration stops when the bracket is
    shorter than ``xtol * max(1, |a|, |b|)``.

    Chandrupatla (1997), *Adv. Eng. Softw.* 28, 145: inverse quadratic interpolation through
    the bracket's ends and the last point dropped when the three points allow it, bisection
    otherwise; each new point is kept at least ``tol/2`` inside the bracket, so the bracket
    collapses once the root is pinned. The first point is the secant (regula falsi) point.
    Under ``vmap`` the slowest lane sets the iteration count, so the worst case matters: on
    smooth functions with brackets of 1/16 of a step it reaches ``xtol = 1e-13`` within 10
    iterations (``tests/core/test_events.py``), where Illinois regula falsi with a bisection every
    third iterate (used before) needed up to 53; the Fig. 11 slip panel went 4.6 -> 3.9 s.
    ``ends=True``: also ``g`` at the final bracket's two ends, ``(root, g(root), g(other end))``
    (a bracket that shrank onto a jump of ``g``, not a zero, keeps them far apart).
    """
    a, b, ga, gb = (jnp.asarray(x) for x in (a, b, ga, gb))
    sa = ga > 0
    dtype = jnp.result_type(a, b)

    def nz(d):
        return jnp.where(d != 0, d, 1.0)

    def tol_of(a, b):
        return xtol * jnp.maximum(1.0, jnp.maximum(jnp.abs(a), jnp.abs(b)))

    def cond(c):
        a, b, _, _, _, _, _, it = c
        return (it < max_iter) & (jnp.abs(b - a) > tol_of(a, b))

    def body(c):
        # a: the newest point, b: the other end of the bracket, c: the point dropped last
        a, b, c, fa, fb, fc, t, it = c
        xt = a + t * (b - a)
        ft = g(xt)
        same = (ft > 0) == (fa > 0)
        c, fc = jnp.where(same, a, b), jnp.where(same, fa, fb)
        b, fb = jnp.where(same, b, a), jnp.where(same, fb, fa)
        a, fa = xt, ft
        w = jnp.abs(b - a)
        tlim = jnp.minimum(0.5 * tol_of(a, b) / jnp.where(w > 0, w, 1.0), 0.5)
        xi = (a - b) / nz(c - b)
        phi = (fa - fb) / nz(fc - fb)
        iqi = (phi**2 < xi) & ((1.0 - phi) ** 2 < 1.0 - xi)
        t_iqi = fa / nz(fb - fa) * fc / nz(fb - fc) + (c - a) / nz(b - a) * fa / nz(
            fc - fa
        ) * fb / nz(fc - fb)
        t = jnp.where(iqi & jnp.isfinite(t_iqi), t_iqi, 0.5)
        return a, b, c, fa, fb, fc, jnp.clip(t, tlim, 1.0 - tlim), it + 1

    a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    t0 = ga / nz(ga - gb)
    t0 = jnp.where(jnp.isfinite(t0) & (t0 > 0) & (t0 < 1), t0, 0.5).astype(dtype)
    a, b, _, fa, fb, _, _, _ = jax.lax.while_loop(
        cond, body, (a, b, b, ga, gb, gb, t0, jnp.int32(0))
    )
    side = (fa > 0) != sa
    root = jnp.where(side, a, b)
    if not ends:
        return root
    return root, jnp.where(side, fa, fb), jnp.where(side, fb, fa)


class Scan(NamedTuple):
    """What :func:`scan` found in the samples of one step (see there)."""

    fired: Bool[Array, " n"]  # the event fires at one of the samples
    first: Int[Array, " n"]  # the first sample at which it fires (K if none)
    sign: Float[Array, " n"]  # last non-zero sign after the samples
    # crossings counted after the samples (the field shadows tuple.count, as it may)
    count: Int[Array, " n"]  # pyright: ignore[reportIncompatibleMethodOverride]
    t_zero: Float[Array, " n"]  # start of the run of exact zeros the samples end in (nan: none)
    t_exact: Float[Array, " n"]  # for fired events: the root when it lies exactly on a sample
    nonfinite: Bool[Array, ""]  # some sampled event value is NaN or infinite


def scan(
    events: EventSet,
    values: Float[Array, "K n"],
    times: Float[Array, " K"],
    sign: Float[Array, " n"],
    count: Int[Array, " n"],
    t_zero: Float[Array, " n"],
    targets: Int[Array, " n"] | None = None,
    mask: Bool[Array, " K"] | None = None,
    unroll: bool = True,
) -> Scan:
    """Walk the time-ordered samples ``values[k] = g(times[k])`` of the event functions in a step.

    The shared event semantics of both integrators:

    * a boundary event fires at the first sample with ``g <= 0``;
    * a crossing event counts the transversal sign changes between non-zero values (exact
      zeros are stepped over; with a direction only changes to that side count) and fires at
      the ``target``-th (``targets`` overrides the static ones; 0 = count only, never fire);
    * a root that lies exactly on a sample (``g == 0`` there) is reported exactly in
      ``t_exact``: for a crossing, the first zero of the run of zeros before the sign change,
      which may lie in an earlier step (``t_zero`` carries it across steps).

    ``sign``, ``count`` and ``t_zero`` are the state before the samples; ``mask`` leaves samples
    out (a masked sample changes nothing). ``unroll=False`` walks them in a loop (the same
    arithmetic, a program ~K times smaller: for scans outside the step loop, whose cost is
    compile time, not time per step).
    """
    kinds = jnp.asarray(events.kinds, dtype=jnp.int32)
    targets = jnp.asarray(events.targets if targets is None else targets, dtype=jnp.int32)
    dirs = jnp.asarray(events.dirs, dtype=values.dtype)
    is_boundary = kinds == BOUNDARY
    n_samples = values.shape[0]
    # The samples are computed once, before the walk: otherwise XLA fuses their interpolation
    # and event functions into each consumer below (signs, counts, zero runs, hits), and
    # computes every sample several times per step. Measured (benchmarks/RESULTS.md): vmap of
    # rollax.solve 1.68x -> 1.03x plain diffrax's time; the kernel with one boundary event
    # 202 -> 121 ns per lane-step (two events: 140 -> 137 ns).
    values = jax.lax.optimization_barrier(values)
    first = jnp.full(sign.shape, n_samples, dtype=jnp.int32)
    t_exact = jnp.full(sign.shape, jnp.nan, dtype=values.dtype)

    def sample(k, carry):
        first, t_exact, sign, count, t_zero = carry
        gk = values[k]
        use = True if mask is None else mask[k]
        s = jnp.sign(gk)
        flip = use & (s != 0) & (s == -sign) & ((dirs == 0) | (s == dirs))
        count = count + flip.astype(count.dtype)
        hit = use & jnp.where(is_boundary, gk <= 0, (targets > 0) & (count >= targets) & flip)
        exact = jnp.where(is_boundary, jnp.where(gk == 0, times[k], jnp.nan), t_zero)
        newly = hit & (first == n_samples)
        first = jnp.where(newly, k, first)
        t_exact = jnp.where(newly, exact, t_exact)
        sign = jnp.where(use & (s != 0), s, sign)
        t_zero = jnp.where(
            use, jnp.where(s == 0, jnp.where(jnp.isnan(t_zero), times[k], t_zero), jnp.nan), t_zero
        )
        return first, t_exact, sign, count, t_zero

    carry = (first, t_exact, sign, count, t_zero)
    if unroll:  # unrolled over the few static samples: no loop in the step loop
        for k in range(n_samples):
            carry = sample(k, carry)
    else:
        carry = jax.lax.fori_loop(0, n_samples, sample, carry)
    first, t_exact, sign, count, t_zero = carry
    nonfinite = ~jnp.all(
        jnp.isfinite(values) if mask is None else jnp.isfinite(values) | ~mask[:, None]
    )
    return Scan(first < n_samples, first, sign, count, t_zero, t_exact, nonfinite)


#: The step's extra sample for :func:`unresolved` lies at ``theta = 1 - 1 / (NEAR n_samples)``.
NEAR = 16


def near_theta(n_samples: int) -> float:
    """Where in the step (its fraction ``theta``) the extra sample of :func:`unresolved` lies."""
    return 1.0 - 1.0 / (NEAR * n_samples)


def unresolved(
    values: Float[Array, "K n"], start: Float[Array, " n"], near: Float[Array, " n"]
) -> Bool[Array, ""]:
    """Whether a step's samples may hide a pair of zero crossings between two samples.

    Both integrators reject such a step (as one with a non-finite error: the step shrinks to
    a fifth) while it is longer than ``1e-10 max(1, |t|)`` (:func:`unresolved_in`); a hidden
    pair would otherwise be miscounted and an event reported at a later crossing, silently.
    ``values`` are the event values at the step's samples ``theta = k / K`` (k = 1..K),
    ``start`` those at its start (``theta = 0``). Two tests, per event:

    * **a dip between samples**: three consecutive values ``g_(k-1), g_k, g_(k+1)`` (the
      start's included) of one sign whose parabola has its vertex between the outer two and
      of the other sign;
    * **the rate at the step's end**: ``near`` is the event values at ``theta = 1 - 1 /
      (NEAR K)`` (:func:`near_theta`), so ``d = NEAR (g_K - near)`` is the event's change over
      one sample spacing at its rate at the end, and ``D = g_K - g_(K-1)`` its change across the
      last sample spacing. A sampling that resolves ``g`` has ``|D - d| ~ s^2 |g''| / 2``,
      small against ``|D| + |d|`` except near an extremum; a sampling coarser than the event's
      oscillation (aliasing: the samples look like a slower wave) gives ``|D - d|`` of the
      order of ``|D| + |d|``. The step is flagged when ``|D - d| > (|D| + |d|) / 4`` and
      ``min(|g_(K-1)|, |g_K|) < |D - d|``: the samples disagree with the rate by more than
      the distance to zero.

    Not caught: an oscillation sampled at exactly its period near its crest (samples and rate
    alike at every sample), and dips narrower than the parabola through the samples shows.
    ``dt_max`` bounds the sampling interval in every case.
    """
    g = jnp.concatenate([start[None], values])
    n = g.shape[0]
    gK, gJ = g[-1], g[-2]
    D = gK - gJ
    d = NEAR * (gK - near)
    m = jnp.abs(D - d)
    flag = (4.0 * m > jnp.abs(D) + jnp.abs(d)) & (jnp.minimum(jnp.abs(gK), jnp.abs(gJ)) < m)
    for k in range(1, n - 1):  # unrolled over the few static samples
        a, b, c = g[k - 1], g[k], g[k + 1]
        dd = c - 2.0 * b + a
        sl = 0.5 * (c - a)
        flag = flag | (
            (a * b > 0)
            & (b * c > 0)
            & (dd * b > 0)
            & (jnp.abs(sl) < jnp.abs(dd))
            & (sl * sl > 2.0 * dd * b)
        )
    # a non-finite value is the scan's business (the start fails), not a step to shrink
    return jnp.any(flag & jnp.isfinite(m))


def unresolved_in(values, start, near, t, h) -> Bool[Array, ""]:
    """:func:`unresolved`, only while the step is longer than ``1e-10 max(1, |t|)`` (a
    tangency exactly at a sample would shrink it to nothing)."""
    return unresolved(values, start, near) & (jnp.abs(h) > 1e-10 * jnp.maximum(1.0, jnp.abs(t)))


class Located(NamedTuple):
    """The earliest event root inside one step (see :func:`locate_in_step`)."""

    found: Bool[Array, ""]
    event: Int[Array, ""]  # which event fires first
    t: Float[Array, ""]  # its root
    # crossings counted before the root, the ending crossing included (shadows tuple.count)
    count: Int[Array, " n"]  # pyright: ignore[reportIncompatibleMethodOverride]
    # the root's bracket shrank onto a jump of the event function, not onto a zero (JUMP_SHARE)
    jumped: Bool[Array, ""]


#: A located root is a jump of its event function, not a zero, when the function still
#: differs across the final bracket (~1e-13 of the time) by more than this share of its change
#: across the sample interval that bracketed it. A smooth function changes across the final
#: bracket by ~1e-13 / (h / n_samples) of that: far below, unless the step is ~1e-12 long.
JUMP_SHARE = 0.5


def locate_in_step(
    events: EventSet,
    g_at: Callable[[Float[Array, ""]], Float[Array, " n"]],
    t0: Float[ArrayLike, ""],
    h: Float[ArrayLike, ""],
    n_samples: int,
    sign: Float[Array, " n"],
    count: Int[Array, " n"],
    t_zero: Float[Array, " n"],
    targets: Int[Array, " n"] | None = None,
    event_mask: Bool[Array, " n"] | None = None,
    vals: Float[Array, "K n"] | None = None,
    unroll: bool = True,
) -> Located:
    """Locate the earliest firing event root in the step ``[t0, t0 + h]``.

    ``g_at(t)`` evaluates the event functions on the step's dense output. The step is sampled
    at ``n_samples`` equally spaced points (the same samples the integrators scan), the first
    sample interval in which an event fires is the bracket, and one root finder
    (:func:`locate_root`) runs on the lower envelope of the events that fire there (each
    oriented to be positive before it fires), whose first root is the earliest of theirs. A
    root exactly on a sample is returned exactly. ``event_mask`` leaves events out. ``vals``:
    the samples' values as the integrator computed them (by default ``g_at`` at each sample).
    ``unroll``: as :func:`scan`'s.
    """
    t0, h = jnp.asarray(t0), jnp.asarray(h)
    dtype = jnp.result_type(t0, h)
    thetas = jnp.linspace(0.0, 1.0, n_samples + 1, dtype=dtype)[1:]
    times = t0 + thetas * h
    if vals is None:
        # unrolled (as the integrators' samples): a vmap here, nested in the callers' vmaps,
        # is several times slower on a CPU (see rollax._integrate._solve)
        vals = jnp.stack([g_at(times[k]) for k in range(n_samples)])
    sc = scan(events, vals, times, sign, count, t_zero, targets, unroll=unroll)
    fired = sc.fired if event_mask is None else sc.fired & event_mask
    k = jnp.min(jnp.where(fired, sc.first, n_samples))
    cand = fired & (sc.first == k)
    found = jnp.any(cand)
    kc = jnp.clip(k, 0, n_samples - 1)
    a = jnp.where(kc == 0, t0, times[jnp.maximum(kc - 1, 0)])
    b = times[kc]
    g_a = jnp.where(kc == 0, g_at(t0), vals[jnp.maximum(kc - 1, 0)])
    g_b = vals[kc]
    kinds = jnp.asarray(events.kinds, jnp.int32)
    orient = jnp.where(kinds == CROSSING, -jnp.sign(g_b), 1.0).astype(dtype)

    def envelope(g):
        return jnp.min(jnp.where(cand, orient * g, jnp.inf))

    ga, gb = envelope(g_a), envelope(g_b)
    ok = found & (ga > 0) & ~(gb > 0)
    # nothing to locate: an empty bracket, so that a vmapped root finder stops at once
    root, g_root, g_other = locate_root(
        lambda tt: envelope(g_at(tt)),
        jnp.where(ok, a, b),
        b,
        jnp.where(ok, ga, 1.0),
        jnp.where(ok, gb, -1.0),
        ends=True,
    )
    # the first sample interval, and the function already past zero at the step's start: the
    # root lies in the gap before the step (a jump time's: the step before ended just before
    # it, this one starts just after it), so the step's start is the root, not the sample
    # (diffrax's own test: the event at the jump time 0.98 was reported at the first sample)
    gap = found & (kc == 0) & (ga < 0)
    root = jnp.where(ok, root, jnp.where(gap, t0, b))
    exact = jnp.where(cand, sc.t_exact, jnp.inf)
    t_ex = jnp.min(exact)
    use_exact = t_ex <= root
    t_root = jnp.where(use_exact, t_ex, root)
    jumped = ok & ~use_exact & (jnp.abs(g_root - g_other) > JUMP_SHARE * jnp.abs(ga - gb))
    e_env = jnp.argmin(jnp.where(cand, orient * g_at(root), jnp.inf))
    e = jnp.where(use_exact, jnp.argmin(exact), e_env).astype(jnp.int32)
    # crossings before the root: the samples before the bracket, plus the ending crossing
    before = scan(
        events, vals, times, sign, count, t_zero, targets, jnp.arange(n_samples) < k, unroll
    )
    onehot = (jnp.arange(kinds.shape[0]) == e) & (kinds == CROSSING) & found
    return Located(found, e, t_root, before.count + onehot.astype(count.dtype), jumped)
