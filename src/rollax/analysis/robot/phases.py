"""The robots' rolling and flying phases, each one :func:`rollax.solve` with a boundary event
(Appendix B of Putkaradze & Rogers).

:func:`detach` rolls until the normal force (3.3)/(4.3) reaches zero (the event is located on
the dense output and differentiable by the implicit function theorem); :func:`fly` follows the
flight model of :mod:`rollax.models.robot.flight` until the GC is back at rolling height. The
control's kinks are declared to the solver (``jump_ts``), so no step straddles one.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from rollax._core._solution import Status
from rollax._drivers._flows import run
from rollax.models.robot.flight import flight_model


class PhaseEnd(eqx.Module):
    """End of an event-terminated phase: time, state, whether the event fired, failure flag."""

    t: Float[Array, ""]
    y: Float[Array, " d"]
    hit: Bool[Array, ""]
    failed: Bool[Array, ""]


def _phase_solve(
    vector_field, y0, t0, t1, args, g, kinks, *, rtol, atol, max_steps, solver
) -> PhaseEnd:
    """Integrate from ``t0`` until the scalar ``g(t, y, args)`` first reaches ``<= 0`` (or
    ``t1``), with the control's kinks declared to the solver (no step straddles one): one
    boundary event of :func:`rollax.solve`, whose root is located on the dense output and
    differentiable through the implicit function theorem, ``dt* = -dg/(dg/dt)``."""
    sol = run(
        vector_field,
        y0,
        t0,
        t1,
        args=args,
        g=g,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        solver=solver,
        n_samples=16,
        jump_ts=kinks or None,
    )
    a = jnp.asarray  # (rollax.solve's fields: JAX arrays)
    return PhaseEnd(a(sol.t), a(sol.y), a(sol.status == Status.EVENT), a(sol.failed))


def _solver(solver):
    return "dopri8" if solver is None else solver  # (rollax.solve's: diffrax's Dopri8)


@eqx.filter_jit
def detach(
    model,
    control,
    y0,
    t1,
    *,
    t0: float = 0.0,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 16384,
    solver=None,
) -> PhaseEnd:
    """Roll from ``(t0, y0)`` until the normal force vanishes (``N <= 0``, detachment) or ``t1``.

    Returns a :class:`PhaseEnd` with ``hit = True`` and ``t = t_detach`` if the ball (or disk)
    detaches; ``t`` is differentiable (implicit function theorem at ``N(t) = 0``). A start
    with ``N <= 0`` is reported as detachment at ``t0``."""
    # a pytree (not a closure), so that the model's arrays are traced: t is differentiable
    N = jax.tree_util.Partial(_normal_force, model)
    kinks = tuple(k for k in control.kinks if t0 < k < t1)
    end = _phase_solve(
        model.vector_field,
        y0,
        t0,
        t1,
        control,
        N,
        kinks,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        solver=_solver(solver),
    )
    at_start = N(jnp.asarray(t0, dtype=float), y0, control) <= 0
    return PhaseEnd(
        jnp.where(at_start, t0, end.t),
        jnp.where(at_start, y0, end.y),
        end.hit | at_start,
        end.failed & ~at_start,
    )


def _normal_force(model, t, y, c):
    return model.contact_forces(t, y, c)[0]


def _height_after(fm, start, t, y, c):
    return jnp.where(t > start, fm.height(y), 1.0)


def _fly(model, control, yf0, t_start, t1, rtol, atol, max_steps, solver):
    fm = flight_model(model)
    start = jnp.asarray(t_start, dtype=float)
    # the GC may start at height 0 (detachment): watch the height only after the start
    height = jax.tree_util.Partial(_height_after, fm, start)
    return _phase_solve(
        fm.vector_field,
        yf0,
        start,
        t1,
        control,
        height,
        control.kinks,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        solver=_solver(solver),
    )


@eqx.filter_jit
def fly(
    model,
    control,
    y_roll,
    t_detach,
    t1,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 16384,
    solver=None,
):
    """Free flight from the rolling state ``y_roll`` at ``t_detach`` until touchdown (the GC
    back at rolling height, ``z_GC,3 = 0``, reached from above) or ``t1``.

    Returns ``(end, lifts_off, y_flight0)``: the :class:`PhaseEnd` (``hit`` = touched down),
    whether the flight's initial vertical acceleration is upward (if not, the body cannot leave
    the surface: the flight ends at once, ``end.t = t_detach``), and the flight state at
    detachment."""
    fm = flight_model(model)
    yf0 = fm.from_rolling(y_roll)
    lifts_off = fm.vector_field(t_detach, yf0, control)[-1] > 0
    end = _fly(
        model,
        control,
        yf0,
        t_detach,
        jnp.where(lifts_off, t1, t_detach),
        rtol,
        atol,
        max_steps,
        solver,
    )
    return end, lifts_off, yf0
