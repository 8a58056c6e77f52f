"""Plain ODEs run by the library (a variational equation, a trajectory to check invariants, a
robot phase up to an event) as one system class on :func:`rollax.solve`: the library's one
route for single runs."""

from __future__ import annotations

from typing import Any, Callable

import equinox as eqx
import jax.numpy as jnp

from rollax._core._solution import Solution
from rollax._core._system import AbstractSystem, boundary
from rollax._integrate._solve import solve


class Field(AbstractSystem):
    """``y' = f(t, y, args)``, ended where ``g(t, y, args) <= 0`` if ``g`` is given (one
    boundary event). ``f`` and ``g`` are functions or bound methods; ``args`` is a pytree
    whose arrays are traced (so new values do not recompile)."""

    f: Callable
    args: Any
    g: Callable | None
    dim: int = eqx.field(static=True)

    @property
    def state_names(self):
        return tuple(f"y{i}" for i in range(self.dim))

    @property
    def events(self):
        return () if self.g is None else (boundary("end"),)

    def vector_field(self, t, y, mode):
        return self.f(t, y, self.args)

    def event_values(self, t, y, mode):
        if self.g is None:
            return jnp.zeros((0,), jnp.result_type(y))
        return jnp.reshape(self.g(t, y, self.args), (1,)).astype(jnp.result_type(y))


def run(
    f: Callable, y0, t0, t1, *, args=None, g=None, rtol, atol, max_steps, solver="dopri8", **kw
) -> Solution:
    """``y' = f(t, y, args)`` from ``(t0, y0)`` to ``t1`` (or to ``g <= 0``) on
    :func:`rollax.solve`; ``kw`` goes to it (``ts``, ``jump_ts``, ``n_samples``). ``y0`` of any
    shape: the state is it flattened, and ``f`` and ``g`` see it in its shape."""
    y0 = jnp.asarray(y0, dtype=float)
    if y0.ndim != 1:  # (a matrix equation: seen in its shape, integrated flat)
        shape = y0.shape
        f_in, g_in = f, g
        f = lambda t, y, a: jnp.reshape(f_in(t, jnp.reshape(y, shape), a), (-1,))  # noqa: E731
        g = None if g_in is None else (lambda t, y, a: g_in(t, jnp.reshape(y, shape), a))  # noqa: E731
        y0 = jnp.reshape(y0, (-1,))
    system = Field(f, args, g, int(y0.shape[0]))
    return solve(system, y0, t0, t1, rtol=rtol, atol=atol, max_steps=max_steps, solver=solver, **kw)
