"""A test helper: plain functions as a system, run on :func:`rollax.solve`.

``solve(vector_field, y0, t0, t1, args, events)`` builds a :class:`rollax.AbstractSystem` from a
vector field ``f(t, y, args)`` and :class:`Event` functions ``g(t, y, args)`` (or a ready
:class:`rollax._core.events.EventSet`) and runs it on :func:`rollax.solve` (the same events,
roots and derivatives). The library itself has one route, system classes; this keeps the
event tests short.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, NamedTuple, Sequence

import diffrax
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from rollax._core._solution import Status
from rollax._integrate._solve import solve as _solve_system
from rollax._core._system import AbstractSystem, Event as _Event, EventKind
from rollax._core.events import BOUNDARY, CROSSING, EventSet


class Event(eqx.Module):
    """One event function ``g(t, y, args)`` with its kind and, for crossings, the count that
    ends the run."""

    fn: Callable
    kind: Literal["boundary", "crossing"] = eqx.field(static=True, default="boundary")
    count: int = eqx.field(static=True, default=1)


def from_events(events) -> EventSet:
    """Several :class:`Event` as one vector-valued :class:`EventSet`."""
    fns = tuple(e.fn for e in events)

    def fn(t, y, args):
        if not fns:
            return jnp.zeros((0,), dtype=jnp.result_type(y))
        return jnp.stack([jnp.asarray(f(t, y, args), dtype=jnp.result_type(y)) for f in fns])

    kinds = tuple(BOUNDARY if e.kind == "boundary" else CROSSING for e in events)
    return EventSet(fn, kinds, tuple(e.count for e in events))


class Solution(NamedTuple):
    """Result of :func:`solve`."""

    t: Float[Array, ""]  # time at the end (event time, or t1)
    y: Float[Array, " d"]  # state there
    event: Int[Array, ""]  # index of the event that ended the run, -1 if t1 was reached
    failed: Bool[Array, ""]  # NaN or step limit
    counts: Int[Array, " n"]  # crossings counted per event
    t_first: Float[Array, " n"]  # time of the first crossing of each crossing event (nan if none)
    steps: Int[Array, ""]  # steps (all segments)


class FunctionSystem(AbstractSystem):
    """A system made of plain functions ``f(t, y, args)`` and ``g(t, y, args) -> (n,)``."""

    f: Callable  # a pytree (a bound method of a module, say): its arrays are traced
    g: Callable | None
    args: Any
    kinds: tuple[int, ...] = eqx.field(static=True)
    targets: tuple[int, ...] = eqx.field(static=True)
    dim: int = eqx.field(static=True)

    @property
    def state_names(self):
        return tuple(f"y{i}" for i in range(self.dim))

    @property
    def events(self):
        return tuple(
            _Event(f"event{i}", EventKind(k), c)
            for i, (k, c) in enumerate(zip(self.kinds, self.targets))
        )

    def vector_field(self, t, y, mode):
        return self.f(t, y, self.args)

    def event_values(self, t, y, mode):
        if self.g is None:
            return jnp.zeros((0,), jnp.result_type(y))
        return self.g(t, y, self.args)


def solve(
    vector_field: Callable,
    y0: Float[Array, " d"],
    t0: float,
    t1: float,
    args=None,
    events: Sequence[Event] | EventSet = (),
    *,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 4096,
    solver: str | diffrax.AbstractSolver = "dopri5",
    n_samples: int = 16,
    dt_max: float | None = None,
    jump_ts: Sequence[float] | Float[Array, " k"] | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
) -> Solution:
    """Integrate ``dy/dt = vector_field(t, y, args)`` from ``(t0, y0)`` until the earliest
    terminating event root or ``t1`` (see :func:`rollax.solve`, which this calls)."""
    ev = events if isinstance(events, EventSet) else from_events(tuple(events))
    y0 = jnp.asarray(y0, dtype=float)
    system = FunctionSystem(
        vector_field,
        ev.fn if ev.n else None,
        args,
        tuple(ev.kinds),
        tuple(ev.targets),
        int(y0.shape[-1]),
    )
    sol = _solve_system(
        system,
        y0,
        t0,
        t1,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        solver=solver,
        n_samples=n_samples,
        dt_max=dt_max,
        jump_ts=jump_ts,
        adjoint=adjoint,
    )
    return Solution(
        t=sol.t,
        y=sol.y,
        event=jnp.where(sol.status == Status.EVENT, sol.event, -1),
        failed=sol.failed,
        counts=sol.counts,
        t_first=sol.t_first,
        steps=sol.steps,
    )
