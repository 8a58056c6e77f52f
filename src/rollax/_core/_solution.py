"""The one result type of every integrator in rollax, and its status codes."""

from __future__ import annotations

import enum
from typing import Any

import equinox as eqx
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from rollax._core._eventlog import Arr, EventLog


class Status(enum.IntEnum):
    """How a run ended. (``rollax._integrate.queue`` uses the same codes.)"""

    EVENT = 0  # a terminal event (see ``Solution.event``)
    T_MAX = 1  # reached the final time with no terminal event
    NONFINITE = 2  # the state, the step size or an event value became non-finite / underflowed
    MAX_STEPS = 3  # the step limit (per segment) or the reset limit was hit
    # an event fired again at once after its own reset, at the same time: the reset map left
    # the state where that event fires (a state put just inside a boundary, a Zeno point); the
    # run stops there, after the reset
    REPEATED = 4
    # an event function jumped across zero at its located root instead of crossing it (the
    # root's bracket shrank to a jump, not to a zero): the event is reported, but sign changes
    # of such a function between two samples are missed (bound the step with dt_max)
    DISCONTINUOUS = 5


def code_names(codes, enum_type: type[enum.IntEnum]) -> str | np.ndarray:
    """The member names of integer ``codes`` of ``enum_type``: a ``str`` for one code, a NumPy
    array of ``str`` of the same shape for an array (a code the enumeration lacks reads
    ``"<code>?"``). Concrete values only (not inside ``jax.jit``)."""
    by_value = {int(m): m.name for m in enum_type}
    a = np.asarray(codes)
    if a.ndim == 0:
        return by_value.get(int(a), f"{int(a)}?")
    return np.vectorize(lambda c: by_value.get(int(c), f"{int(c)}?"), otypes=[object])(a).astype(
        str
    )


class Solution(eqx.Module):
    """Result of :func:`rollax.solve` (one run) or :func:`rollax.solve_ensemble` (a leading
    batch axis on every field).

    ``counts`` and ``t_first`` are per event and refer to the last segment of a hybrid run
    (the one the run ended in; crossing counts start afresh after each reset); ``t_first`` is
    the time of the first counted crossing (nan if none; boundaries: nan).
    """

    t: Float[Arr, "*b"]  # time at the end (event root, or t1)
    y: Float[Arr, "*b d"]  # state there (after a terminal reset: the state it returned)
    mode: Int[Arr, "*b"]  # discrete mode at the end
    aux: Float[Arr, "*b p"]  # the reset map's bookkeeping at the end
    status: Int[Arr, "*b"]  # a Status code
    event: Int[Arr, "*b"]  # the event that ended the run (-1: none)
    counts: Int[Arr, "*b n"]  # crossings counted per event in the last segment
    t_first: Float[Arr, "*b n"]  # first counted crossing per event in the last segment
    steps: Int[Arr, "*b"]  # steps attempted (accepted and rejected), all segments
    resets: Int[Arr, "*b"]  # non-terminal resets
    # steps rejected (error above tolerance, a non-finite state, or samples that may hide a
    # pair of event crossings: rollax._core.events.unresolved), all segments; None where not kept
    rejected: Int[Arr, "*b"] | None = None
    ys: Float[Arr, "*b m d"] | None = None  # states at the save times ``ts`` (rollax.solve)
    events: EventLog | None = None  # the first events of the run (``save_events``)
    # the run's dense output (rollax.solve(..., dense=True)): read it with evaluate()
    interpolation: Any = None

    def evaluate(self, t) -> Float[Array, "*m d"]:
        """The state at time(s) ``t`` from the run's dense output (each step's continuous
        extension, as ``ts`` saves it): ``rollax.solve(..., dense=True)`` only; nan outside
        ``[t0, t]`` of the run (after its end, or before its start). Differentiable."""
        if self.interpolation is None:
            raise ValueError(
                "this Solution has no dense output: solve with rollax.solve(..., dense=True)"
            )
        import jax
        import jax.numpy as jnp

        ip = self.interpolation
        t = jnp.asarray(t, dtype=self.y.dtype)
        flat = jnp.reshape(t, (-1,))
        inside = (flat >= ip.t0) & (flat <= self.t)
        ys = jax.vmap(lambda s: ip.evaluate(jnp.clip(s, ip.t0, self.t)))(flat)
        ys = jnp.where(inside[:, None], ys, jnp.nan)
        return jnp.reshape(ys, t.shape + self.y.shape[-1:])

    @property
    def status_name(self):
        """:attr:`status` as :class:`Status` names (``"EVENT"``, ``"T_MAX"``, ...): a ``str``
        for one run, an array of them for a batch."""
        return code_names(self.status, Status)

    @property
    def accepted(self) -> Int[Arr, "*b"]:
        """Steps accepted, all segments: ``steps - rejected`` (``steps`` counts attempts)."""
        if self.rejected is None:
            raise ValueError("this Solution does not keep its rejected steps (rejected is None)")
        return self.steps - self.rejected

    @property
    def failed(self) -> Bool[Arr, "*b"]:
        """Runs that did not end normally: non-finite values, a step or reset limit, an event
        repeated at once after its reset, an event function that jumps across zero."""
        return (self.status >= Status.NONFINITE) & (self.status <= Status.DISCONTINUOUS)
