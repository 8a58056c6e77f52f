"""The bouncing penny billiard (Clark & Bloch, Sects. V-VI) as a hybrid system.

The penny's flight between impacts is the closed-form flow (26) on the 8-D state
``(x, y, theta, phi, x', y', theta', phi')`` (:meth:`rollax.analysis.penny.Penny.flow`), the system's own
``flow``: both integrators step along it (the vector field (25) gives the events' slopes).
Four crossing events watch the table edge at the penny's front (27) and back (34):

* ``front``, ``back``: ``-h`` of the end, crossing downwards when the end reaches the edge from
  the table (a crossing, not a boundary, because right after an impact the end sits on the
  edge moving inwards);
* ``front_peak``, ``back_peak``: ``dh/dt`` of the end crossing downwards, a peak of ``h``.
  Near grazing the end's excursion beyond the edge is shorter than the sampling interval of
  the integrators (on the paper's plastic run the 7th impact, normal approach 0.015, was
  missed and the penny flew through the edge); its peak is not. At a peak with ``h >= 0`` the
  reset goes back along the closed-form flow to the missed entry (Newton from the parabola
  through the peak) and applies the impact there; a peak within rounding below the edge
  (``1e-12`` of the table, the closed-form search's tolerance) is a tangency, glancing; a
  lower peak (a near miss) goes on unchanged. Each near miss is a reset, so ``max_resets``
  bounds the near misses of a run.

The reset map is the billiard's impact law (:meth:`rollax.analysis.penny.PennyBilliard.impact`:
elastic, plastic or restitution), ``aux`` counts the impacts, and the run ends at the
``n_impacts``-th. ``Solution.event`` is the end that hit (0 front, 1 back; 2, 3 when its
entry was recovered at a peak).

The statuses of :meth:`rollax.analysis.penny.PennyBilliard.simulate` are outcomes here: an impact whose
normal approach (the cosine ``s`` of :class:`rollax.models.impacts.ElasticRoot`) is at most the
billiard's ``glancing_tol`` ends the run as ``GLANCING`` with the pre-impact state (the impact is
not resolved in float64 there), and a start off the table, or on its edge moving outwards, is
``OUTSIDE`` (it ends at its first edge event, with no impact applied).
"""

from __future__ import annotations

import enum
import typing

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax._core._solution import Status
from rollax._core._system import AbstractSystem, crossing
from rollax.models._penny import PennyBilliard


class PennyOutcome(enum.IntEnum):
    DONE = 0  # made all its impacts
    FLYING = 1  # fewer impacts by the final time (at rest, or circling inside the table)
    FAILED = 2
    GLANCING = 3  # reached the edge with a normal approach <= glancing_tol (no impact applied)
    OUTSIDE = 4  # started off the table, or on its edge moving outwards


# aux: impacts made, and a flag (0: none; one of the two below)
_IMPACTS, _FLAG = 0, 1
_GLANCING, _OUTSIDE = 1.0, 2.0


class PennySystem(AbstractSystem):
    """The penny billiard ``billiard`` run until its ``n_impacts``-th impact."""

    billiard: PennyBilliard = eqx.field(default_factory=PennyBilliard)
    n_impacts: int = eqx.field(static=True, default=1)

    state_names = ("x", "y", "theta", "phi", "x_dot", "y_dot", "theta_dot", "phi_dot")
    events = (
        crossing("front", target=1, direction=-1),
        crossing("back", target=1, direction=-1),
        crossing("front_peak", target=1, direction=-1),
        crossing("back_peak", target=1, direction=-1),
    )
    n_aux = 2
    aux_names = ("impacts", "flag")  # flag: 0 none, 1 glancing, 2 outside
    aux_units = ("1", "1")
    outcomes = PennyOutcome

    def __check_init__(self):
        if isinstance(self.n_impacts, bool) or not (
            isinstance(self.n_impacts, int) and self.n_impacts >= 1
        ):
            raise ValueError(
                f"n_impacts = {self.n_impacts!r} is not allowed: it must be an integer >= 1"
            )
        if not isinstance(self.billiard, PennyBilliard):
            raise ValueError(
                f"billiard = {type(self.billiard).__name__} is not allowed: it must "
                "be a rollax.analysis.penny.PennyBilliard"
            )

    @typing.overload
    def check_state(
        self, y, name: str = ..., valid=..., *, host: typing.Literal[False] = ...
    ) -> Float[Array, "... d"]: ...
    @typing.overload
    def check_state(
        self, y, name: str = ..., valid=..., *, host: bool
    ) -> Float[Array, "... d"] | Float[np.ndarray, "... d"]: ...
    def check_state(self, y, name: str = "y0", valid=None, *, host: bool = False):
        """:meth:`AbstractSystem.check_state`, and the rolling constraints (23) on concrete
        rows: the closed-form flight and the impact map assume them."""
        y = super().check_state(y, name, valid, host=host)
        self.billiard.penny.check_rolling(y, name, valid)
        return y

    def vector_field(self, t, y, mode):
        return self.billiard.penny.vector_field(t, y)

    def flow(self, t0, y0, t1, mode):
        """The closed-form flight (26) (:meth:`rollax.analysis.penny.Penny.flow`): both integrators move
        the penny along it, so impact times are exact to the root finder's rounding."""
        return self.billiard.penny.flow(y0, t1 - t0)

    def flow_step(self, t, y, mode):
        """The sampling of :meth:`rollax.analysis.penny.PennyBilliard.next_impact`: ``n_samples`` of the
        billiard over the time in which the flight must leave a convex table (or one period of
        its circle), ``self.n_samples`` event samples per step."""
        b = self.billiard
        T, _ = b._horizon(y)
        return T * (self.n_samples / b.n_samples)

    def _edge(self, y):
        """h at both ends, dh/dt along the flow, and the gradients of h there."""
        b = self.billiard
        h, grad = jax.vmap(jax.value_and_grad(b.table.h))(b.ends(y))
        sig = jnp.asarray([1.0, -1.0])
        v = y[4:6] + sig[:, None] * b.penny.R * y[7] * jnp.stack([-jnp.sin(y[3]), jnp.cos(y[3])])
        return h, jnp.sum(grad * v, axis=1), grad

    def event_values(self, t, y, mode):
        h, dh, _ = self._edge(y)
        return jnp.concatenate([-h, dh])

    def _back_to_entry(self, y, end, h_peak):
        """The time ``delta >= 0`` back from a peak ``y`` of ``h >= 0`` (end ``end``) to the entry
        ``h = 0``, on the closed-form flow (26): Newton from the parabola through the peak
        (h concave there, so the iterates approach the root from beyond it)."""
        b = self.billiard

        def phi(d):
            return b.edge_values(b.penny.flow(y, -d))[end]

        curv = jnp.abs(jax.grad(jax.grad(phi))(jnp.zeros_like(h_peak)))
        # sqrt only of a positive argument: its slope at 0 would make reverse-mode NaN
        ok = (curv > 0) & (h_peak > 0)
        d = jnp.where(
            ok, jnp.sqrt(jnp.where(ok, 2.0 * h_peak / jnp.where(ok, curv, 1.0), 1.0)), 0.0
        )

        def newton(_, d):
            val, slope = jax.value_and_grad(phi)(d)
            good = slope < 0
            return jnp.maximum(d - jnp.where(good, val / jnp.where(good, slope, -1.0), 0.0), 0.0)

        # quadratic convergence from a near-quadratic start; a rolled loop, not 8 unrolled
        # copies of the flow's derivative (measured: 10.4 -> 6 s of a flight's compile)
        return jax.lax.fori_loop(0, 8, newton, d)

    def initial_aux(self, y0, mode):
        # off the table, or on its edge moving outwards (the tolerances of
        # PennyBilliard.next_impact: 1e-10 of the table for 'on', glancing_tol for 'moving')
        b = self.billiard
        R = b.penny.R
        h, dh, grad = self._edge(y0)
        gnorm = jnp.linalg.norm(grad, axis=1)
        tol_out = 1e-10 * gnorm * jnp.asarray(b.table.diameter, float)
        v_end = jnp.hypot(y0[4], y0[5]) + R * jnp.abs(y0[7])
        outside = jnp.any((h > tol_out) | ((h > -tol_out) & (dh > b.glancing_tol * gnorm * v_end)))
        return jnp.stack([jnp.zeros_like(y0[0]), jnp.where(outside, _OUTSIDE, 0.0)])

    def reset(self, t, y, mode, aux, event):
        b = self.billiard
        end = event % 2
        peak = event >= 2
        h, _, grad = self._edge(y)
        # a peak beyond the edge: the entry was missed between samples; go back to it
        missed = peak & (h[end] >= 0.0)
        delta = jnp.where(missed, self._back_to_entry(y, end, jnp.where(missed, h[end], 0.0)), 0.0)
        pre = jnp.where(missed, b.penny.flow(y, -delta), y)
        # a peak within rounding below the edge is a tangency (as in the closed-form search,
        # PennyBilliard._search_end): glancing, at the peak
        graze_tol = 1e-12 * jnp.linalg.norm(grad[end]) * jnp.asarray(b.table.diameter, float)
        graze = peak & (h[end] < 0.0) & (h[end] >= -graze_tol)
        hit = ~peak | missed | graze  # otherwise a near miss: go on unchanged
        s = b._impact_root(pre, end).s
        outside = aux[_FLAG] == _OUTSIDE
        glancing = hit & ~outside & (graze | (jnp.abs(s) <= b.glancing_tol))
        stop = hit & (outside | glancing)
        bounce = hit & ~stop
        n = aux[_IMPACTS] + jnp.where(bounce, 1.0, 0.0)
        aux = jnp.stack([n, jnp.where(glancing, _GLANCING, aux[_FLAG])])
        y_new = jnp.where(bounce, b.impact(pre, end), pre)
        return t - delta, y_new, mode, aux, stop | (bounce & (n >= self.n_impacts))

    def outcome(self, sol):  # pyright: ignore[reportIncompatibleMethodOverride]  (called positionally)
        flag = sol.aux[_FLAG]
        return jnp.select(
            [sol.failed, flag == _OUTSIDE, flag == _GLANCING, sol.status == Status.EVENT],
            [PennyOutcome.FAILED, PennyOutcome.OUTSIDE, PennyOutcome.GLANCING, PennyOutcome.DONE],
            PennyOutcome.FLYING,
        ).astype(jnp.int8)
