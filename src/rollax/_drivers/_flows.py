"""Plain ODEs of the analyses (a variational equation, a trajectory to check invariants) as
systems on :func:`rollax.solve`: the library's one route for single runs."""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax.numpy as jnp

from rollax._core._solution import Solution
from rollax._core._system import AbstractSystem
from rollax._integrate._solve import solve


class Field(AbstractSystem):
    """``y' = f(t, y)`` without events; ``f`` is a pytree (a closure, or a bound method of a
    module, whose arrays are then traced)."""

    f: Callable
    dim: int = eqx.field(static=True)

    @property
    def state_names(self):
        return tuple(f"y{i}" for i in range(self.dim))

    def vector_field(self, t, y, mode):
        return self.f(t, y)


def run(f: Callable, y0, t0, t1, *, ts=None, rtol, atol, max_steps, solver="dopri8") -> Solution:
    """``y' = f(t, y)`` from ``(t0, y0)`` to ``t1`` on :func:`rollax.solve` (``ts``: save
    times, ``Solution.ys``). ``y0`` of any shape; the state is it flattened."""
    y0 = jnp.asarray(y0, dtype=float)
    shape = y0.shape

    def flat(t, y):
        return jnp.reshape(f(t, jnp.reshape(y, shape)), (-1,))

    return solve(
        Field(flat, int(y0.size)),
        jnp.reshape(y0, (-1,)),
        t0,
        t1,
        ts=ts,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        solver=solver,
    )
