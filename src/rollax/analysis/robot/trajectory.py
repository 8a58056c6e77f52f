"""Dense simulation of a rolling robot (ball or disk) and extrema over the continuous
trajectory: the minimum static friction coefficient mu_hat (1.3) and the smallest normal
force.

The ODE is :class:`rollax.systems.RollingRobot` integrated by :func:`rollax.solve` (Dormand-Prince
8(7) by default) with the control's kinks declared as ``jump_ts`` (the solver stops and restarts
there). Extrema are first bracketed on
a uniform grid of saved states and then refined on the solver's
dense output (nested grid search), so they are maxima over the continuous trajectory, not over the saved points.
The refined location ``t*`` is held fixed when differentiating (envelope theorem), so
``d mu_hat / d p = d (f_s/N)(t*; p) / d p``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
from jaxtyping import Array, Float

from rollax._core._solution import Solution
from rollax._integrate._solve import solve
from rollax.systems.robot import RollingRobot
from rollax._core._validate import (
    ATOL_MIN,
    RTOL_MIN,
    check_finite,
    check_integer,
    check_positive,
    check_range,
)


class Trajectory(eqx.Module):
    """A dense solution of a rolling model with its control.

    ``ts``/``ys``: the saved grid; ``sol``: the :class:`rollax.Solution` with its dense output
    (``sol.evaluate(t)`` gives the state anywhere in ``[t0, t1]``).
    """

    model: eqx.Module
    control: eqx.Module
    ts: Float[Array, " k"]
    ys: Float[Array, "k d"]
    sol: Solution

    def state(self, t) -> Float[Array, " d"]:
        """State at any time in the interval, from the dense output."""
        return self.sol.evaluate(t)

    def forces(self):
        """``(N, F_h)`` on the saved grid."""
        return jax.vmap(lambda t, y: self.model.contact_forces(t, y, self.control))(  # pyright: ignore[reportAttributeAccessIssue]  (model: a Ball or Disk)
            self.ts, self.ys
        )

    def ratio_at(self, t) -> Float[Array, ""]:
        """``f_s/N`` at any time (dense output)."""
        return self.model.friction_ratio(t, self.state(t), self.control)  # pyright: ignore[reportAttributeAccessIssue]  (model: a Ball or Disk)

    def normal_at(self, t) -> Float[Array, ""]:
        """N at any time (dense output)."""
        return self.model.contact_forces(t, self.state(t), self.control)[0]  # pyright: ignore[reportAttributeAccessIssue]  (model: a Ball or Disk)


def _kinks_inside(control, t0, t1):
    return tuple(k for k in control.kinks if t0 < k < t1)


@eqx.filter_jit
def _check_run(model, control, y0, t0, t1, n_save, rtol, atol, max_steps, dt_max) -> None:
    # the run's inputs, each refused by name (t1 = nan once gave a state of inf)
    t0 = check_finite("t0", t0)
    t1 = check_finite("t1", t1)
    try:
        ordered = float(t1) > float(t0)
    except (TypeError, jax.errors.ConcretizationTypeError):  # traced: checked by the solve
        ordered = True
    if not ordered:
        raise ValueError(f"t1 = {t1!r} must be greater than t0 = {t0!r}")
    check_range("rtol", rtol, RTOL_MIN, 1.0, hi_open=True)
    check_range("atol", atol, ATOL_MIN, 1.0, hi_open=True)
    check_integer("n_save", n_save, 2)
    check_integer("max_steps", max_steps, 1)
    if dt_max is not None:
        check_positive("dt_max", dt_max)
    y = jnp.asarray(y0)
    if y.ndim != 1:
        raise ValueError(f"y0 has shape {tuple(y.shape)}; simulate takes one state (a vector)")
    try:
        out = jax.eval_shape(
            lambda y_: model.vector_field(t0, y_, control),
            jax.ShapeDtypeStruct(y.shape, jnp.float64),
        )
    except Exception:
        out = None
    if out is None or tuple(out.shape) != tuple(y.shape):
        raise ValueError(
            f"y0 has {y.shape[0]} components, which {type(model).__name__} cannot "
            f"take: build it with {type(model).__name__}.initial_state(...)"
        )
    if not isinstance(y, Tracer) and not bool(jnp.all(jnp.isfinite(y))):
        raise ValueError(f"y0 = {y.tolist()} must be finite")


def simulate(
    model,
    control,
    y0: Float[Array, " d"],
    t1: float,
    *,
    t0: float = 0.0,
    n_save: int = 2001,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 16384,
    dt_max: float | None = 0.1,
    solver=None,
    adjoint: str | None = None,
) -> Trajectory:
    """Integrate the rolling dynamics of ``model`` (a :class:`~rollax.models.robot.ball.Ball` (6.4) or
    :class:`~rollax.models.robot.disk.Disk` (5.2)) from ``y0`` on ``[t0, t1]`` under ``control``.

    Saves ``n_save`` uniform points plus the dense output. Steps are capped at ``dt_max`` so
    that the dense output (a lower-order interpolant) stays as accurate as the steps. ``t0``,
    ``t1``, ``n_save``, ``dt_max`` and the tolerances are static (a change recompiles).
    ``solver``: as :func:`rollax.solve`'s (default ``"dopri8"``); ``adjoint``: as its
    (default ``"reverse"``, recursive checkpointing; ``"forward"`` for ``jax.jacfwd`` with few
    parameters).
    """
    _check_run(model, control, y0, t0, t1, n_save, rtol, atol, max_steps, dt_max)
    ts = jnp.linspace(t0, t1, n_save)
    kinks = _kinks_inside(control, t0, t1)
    sol = solve(
        RollingRobot(model, control),
        y0,
        t0,
        t1,
        rtol=rtol,
        atol=atol,
        dt_max=dt_max,
        max_steps=max_steps,
        solver="dopri8" if solver is None else solver,
        adjoint=adjoint,
        jump_ts=jnp.asarray(kinks) if kinks else None,
        ts=ts,
        dense=True,
    )
    assert sol.ys is not None  # (saved at ts)
    return Trajectory(model, control, ts, jnp.asarray(sol.ys), sol)


def _objectives(traj: Trajectory, t):
    """``(f_s/N, -N)`` at time ``t`` from the dense output: the two quantities maximised."""
    N, F_h = traj.model.contact_forces(t, traj.state(t), traj.control)  # pyright: ignore[reportAttributeAccessIssue]  (model: a Ball or Disk)
    return jnp.stack([jnp.sqrt(F_h @ F_h) / N, -N])


def _contact_extrema(
    traj: Trajectory, t_end, n_candidates: int = 4, n_points: int = 33, n_rounds: int = 10
):
    """Maxima of ``f_s/N`` and of ``-N`` over the continuous trajectory.

    The ``n_candidates`` largest local maxima of each on the saved grid are refined on the
    dense output by nested grid search: each round samples ``n_points`` times across the
    current bracket and keeps the two intervals around the best, shrinking it 16-fold (10
    rounds take a grid step of 1e-2 below 1e-13). This needs no smoothness, so maxima at
    kinks of the control are found too. ``t*`` is then held fixed and the value recomputed
    differentiably (envelope theorem)."""
    live = traj
    params, static = eqx.partition(traj, eqx.is_array)
    traj = eqx.combine(jax.lax.stop_gradient(params), static)  # the search is not differentiated
    ts = traj.ts
    k = ts.shape[0]
    N, F_h = traj.forces()
    grid = jnp.stack([jnp.sqrt(jnp.sum(F_h**2, axis=1)) / N, -N])  # (2, k)
    grid = jnp.where(ts <= t_end, grid, -jnp.inf)  # only [t0, t_end]
    left = jnp.concatenate([jnp.full((2, 1), -jnp.inf), grid[:, :-1]], axis=1)
    right = jnp.concatenate([grid[:, 1:], jnp.full((2, 1), -jnp.inf)], axis=1)
    score = jnp.where((grid >= left) & (grid >= right), grid, -jnp.inf)
    idx = jnp.argsort(-score, axis=1)[:, :n_candidates]  # (2, c)
    lo = ts[jnp.clip(idx - 1, 0, k - 1)]
    hi = jnp.minimum(ts[jnp.clip(idx + 1, 0, k - 1)], t_end)
    u = jnp.linspace(0.0, 1.0, n_points)
    which = jnp.arange(2)[:, None, None]
    f = jax.vmap(lambda t: _objectives(traj, t))

    def sample(lo, hi):
        pts = lo[..., None] + (hi - lo)[..., None] * u  # (2, c, p)
        vals = f(pts.reshape(-1)).reshape(pts.shape + (2,))
        return pts, jnp.take_along_axis(vals, which[..., None], axis=-1)[..., 0]

    def body(_, c):
        lo, hi = c
        pts, v = sample(lo, hi)
        j = jnp.argmax(v, axis=-1)
        new_lo = jnp.take_along_axis(pts, jnp.clip(j - 1, 0, n_points - 1)[..., None], -1)[..., 0]
        new_hi = jnp.take_along_axis(pts, jnp.clip(j + 1, 0, n_points - 1)[..., None], -1)[..., 0]
        return new_lo, new_hi

    lo, hi = jax.lax.fori_loop(0, n_rounds, body, (lo, hi))
    pts, v = sample(lo, hi)
    flat_p, flat_v = pts.reshape(2, -1), v.reshape(2, -1)
    best = jnp.argmax(flat_v, axis=1)
    t_star = flat_p[jnp.arange(2), best]  # (2,)
    vals = jax.vmap(lambda t: _objectives(live, t))(t_star)
    return vals[0, 0], t_star[0], -vals[1, 1], t_star[1]


@eqx.filter_jit
def _contact_extrema_jit(traj, t_end):
    return _contact_extrema(traj, t_end)


def contact_extrema(traj: Trajectory, t_end=None):
    """``(mu_hat, t_mu_hat, min_N, t_min_N)`` over the continuous trajectory on
    ``[t0, t_end]`` (default: all of it): the minimum static friction coefficient (1.3),
    ``max_t f_s(t)/N(t)``, the smallest normal force, and where they are attained.
    Differentiable with respect to the model's and the control's parameters (the times are
    held fixed, envelope theorem)."""
    t_end = traj.ts[-1] if t_end is None else jnp.asarray(t_end, dtype=float)
    return _contact_extrema_jit(traj, t_end)


def mu_hat(traj: Trajectory):
    """``(mu_hat, t_mu_hat)``: the minimum static friction coefficient (1.3) over the
    continuous trajectory (see :func:`contact_extrema`)."""
    mu, t_mu, _, _ = contact_extrema(traj)
    return mu, t_mu


def min_normal_force(traj: Trajectory):
    """``(min N, t_min)``: the smallest normal force over the continuous trajectory."""
    _, _, n, t_n = contact_extrema(traj)
    return n, t_n


@eqx.filter_jit
def quaternion_drift(traj: Trajectory) -> Float[Array, ""]:
    """``max | |q| - 1 |`` over the saved grid (ball trajectories only)."""
    n = traj.model.n  # pyright: ignore[reportAttributeAccessIssue]  (model: a Ball or Disk)
    q = traj.ys[:, 2 * n : 2 * n + 4]
    return jnp.max(jnp.abs(jnp.linalg.norm(q, axis=1) - 1.0))
