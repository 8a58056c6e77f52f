"""The event history of a run (``save_events=K``): the first K events that reached the reset
map, kept in a fixed-size buffer by both integrators.

Each event is one row ``(t, event, mode, t_after, mode_after, y, y_after)`` of ``5 + 2 d``
numbers, written where the integrator calls the reset map (``rollax.solve``'s segment end,
the kernels' service of a parked start), so the two integrators record the same events: the
located root, the state there, and what the reset map returned (for a terminal event, the
record the run ends with). Rows past K are dropped and counted (``EventLog.n``).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

# a field holds JAX arrays (rollax.solve) or NumPy ones (solve_ensemble's results, on the host)
Arr = Array | np.ndarray

#: at most this many events are kept per run (each row is 5 + 2 d numbers per start)
SAVE_EVENTS_MAX = 1 << 16


class EventLog(eqx.Module):
    """The first ``K`` events of a run (``save_events=K``), in the order they happened; a
    leading batch axis on every field for :func:`rollax.solve_ensemble`.

    Rows past the last event are ``nan`` (times, states) and ``-1`` (event, modes). ``n`` counts
    every event the run had, kept or not: ``n > K`` (:attr:`overflow`) means rows were dropped.
    A non-terminal event is one the reset map continued from; the last row of a run that ended
    by an event is its terminal event (``t_after``, ``y_after``: the record the run ends with).
    """

    t: Float[Arr, "*b K"]  # the event's located time
    event: Int[Arr, "*b K"]  # which event (an index of system.events)
    mode: Int[Arr, "*b K"]  # the mode before the event
    y: Float[Arr, "*b K d"]  # the state at the event, before the reset map
    t_after: Float[Arr, "*b K"]  # the time the reset map returned
    mode_after: Int[Arr, "*b K"]  # the mode it returned
    y_after: Float[Arr, "*b K d"]  # the state it returned
    n: Int[Arr, "*b"]  # events in the run (kept or not)

    @property
    def overflow(self):
        """Runs that had more events than were kept."""
        return self.n > self.t.shape[-1]


def width(d: int) -> int:
    """Numbers per row for a state of ``d`` components."""
    return 5 + 2 * d


def empty(K: int, d: int, dtype=jnp.float64):
    """``(n, rows)``: an empty log of ``K`` rows (nan), flat."""
    return jnp.zeros((), dtype), jnp.full((K * width(d),), jnp.nan, dtype)


def write(n, rows, on, t, event, mode, y, t_after, mode_after, y_after):
    """The log ``(n, rows)`` with one event appended where ``on`` (rows past K dropped; ``n``
    counts it anyway). Flat, float: the kernels carry it in a start's ``aux``."""
    d = y.shape[-1]
    w = width(d)
    K = rows.shape[-1] // w
    dt = rows.dtype
    row = jnp.concatenate(
        [
            jnp.stack(
                [
                    jnp.asarray(t, dt),
                    jnp.asarray(event).astype(dt),
                    jnp.asarray(mode).astype(dt),
                    jnp.asarray(t_after, dt),
                    jnp.asarray(mode_after).astype(dt),
                ]
            ),
            jnp.asarray(y, dt).reshape(-1),
            jnp.asarray(y_after, dt).reshape(-1),
        ]
    )
    keep = on & (n < K)
    k = jnp.clip(n, 0, max(K - 1, 0)).astype(jnp.int32)
    grid = rows.reshape(K, w)
    new = grid.at[k].set(row)
    rows = jnp.where(keep, new, grid).reshape(-1)
    return n + jnp.asarray(on).astype(n.dtype), rows


def read(n, rows, d: int) -> EventLog:
    """The :class:`EventLog` of flat logs ``rows`` (``(..., K w)``) and counts ``n``."""
    rows = jnp.asarray(rows) if not isinstance(rows, np.ndarray) else rows
    # NumPy on the host, JAX on the device: the log's fields are arrays of either
    xp: Any = np if isinstance(rows, np.ndarray) else jnp
    w = width(d)
    grid: Any = rows.reshape(rows.shape[:-1] + (rows.shape[-1] // w, w))

    def index(col):
        return xp.where(xp.isnan(col), -1, xp.nan_to_num(col, nan=-1.0)).astype(xp.int32)

    return EventLog(
        t=grid[..., 0],
        event=index(grid[..., 1]),
        mode=index(grid[..., 2]),
        t_after=grid[..., 3],
        mode_after=index(grid[..., 4]),
        y=grid[..., 5 : 5 + d],
        y_after=grid[..., 5 + d : 5 + 2 * d],
        n=xp.asarray(n).astype(xp.int32),
    )
