"""Necessary conditions of a rest-to-rest manoeuvre, checked before any solve (issue 56).

:func:`rollax.robot.optimize` and :func:`rollax.robot.least_mu` call
:func:`necessary_conditions` first; when one fails they return at once (plain NumPy, no
simulation, nothing compiled) with ``status = "infeasible"`` and the failing bound, with its
numbers, in ``Optimum.message``. Each condition holds for every control, so a request that
fails one cannot be done; one that passes them all may still be infeasible (then the SQP
reports it). The conditions (Putkaradze & Rogers, Sects. 3-6; ``M`` the total mass, ``W = M
g`` the static weight, the body and the masses at rest at 0 and T, no external force):

* **Mean normal force.** ``int_0^T (N - M g) dt = M (z_cm'(T) - z_cm'(0)) = 0``: N averages
  ``M g`` over ``[0, T]``, so ``N >= n_min`` needs ``n_min <= M g``.
* **Friction impulse.** With ``X = x_cm(T) - x_cm(0)`` the CM's horizontal travel along any
  horizontal unit vector ``e``, ``|M x_cm''| <= mu N`` and ``int_0^t N dt = M (g t + z_cm'
  (t))`` give ``x_cm'(t) <= mu (g t + z_cm'(t))`` and ``x_cm'(t) <= mu (g (T - t) -
  z_cm'(t))``; integrating the first over ``[0, T/2]``, the second over ``[T/2, T]``:
  ``X <= mu (g T^2 / 4 + 2 z(T/2) - z(0) - z(T))``, ``z`` the CM's height above the GC. The
  CM stays within ``d = (m0 |zeta_0| + sum_i m_i rho_i) / M`` of the GC (``rho_i`` the
  farthest point of rail i from the GC: exact for circles, ellipses, figure-eights and
  segments, the ball's radius for other rails, which the model keeps inside the ball), so
  ``z(T/2) <= d`` and ``z(T) >= -d``, with ``z(0)`` known from the start. The GC moves by
  ``D`` (disk: ``r |phi_T - phi_0|``; ball: ``|target - z_0|``, the contact point), so along
  ``e`` (the GC's direction) ``X >= D - d - e . h_0`` (``h_0`` the CM's horizontal offset
  from the GC at the start). Hence ``mu >= (D - d - e . h_0) / (g T^2 / 4 + 3 d - z(0))``,
  and for a given mu, ``T >= 2 sqrt((D - d - e . h_0 - mu (3 d - z(0))) / (mu g))``. For the
  Sect. 5 disk (``d = 0.4``, ``z(0) = -0.4``, ``h_0 = 0``): ``mu >= (r |phi_T| - 0.4) /
  (T^2 / 4 + 1.6)`` (docs/physics-notes.md). For the time cost the least ``T`` is compared
  with the largest the search allows, ``TIME_RANGE`` times the given one; ``least_mu``
  (``mu`` free) skips this condition.
* **Rails with ends.** A start outside a :class:`SegmentRail` or :class:`CurveRail`'s
  domain violates the rail limit at ``t = 0`` whatever the control.

On a sloping floor (the model's ``slope``) both bounds hold with g replaced by ``g_n``,
gravity's component normal to the floor: the tangential part of the weight drops out of the
friction impulse bound, pushing the CM as much during the first half as it holds it back
during the second.

Every bound is loosened by the tolerance ``tol`` that the optimiser allows on the
constraints (``|f_s| <= mu N + tol M g``, ``N >= n_min - tol M g``, the terminal conditions to
``tol``), so a request feasible within the optimiser's tolerances is never refused. The
normal force and friction conditions are skipped for a model with an external force ``F_e``
(it changes the momentum balance), and all of them for traced or batched (one value per
start) parameters.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.core import Tracer

from rollax.models.robot.ball import Ball, _zero_force
from rollax.models.robot.disk import Disk
from rollax.models.robot.rails import (
    CircleRail,
    CurveRail,
    EllipseRail,
    FigureEightRail,
    FixedPoint,
    SegmentRail,
)


def _f(x) -> float:
    return float(np.asarray(x))


def _norm(v) -> float:
    return float(np.linalg.norm(np.asarray(v, dtype=float)))


def rail_reach(rail, radius: float, tol: float = 0.0) -> float:
    """An upper bound of ``|zeta(theta)|`` over the positions a mass on ``rail`` can reach:
    exact for circles, segments (their domain widened by ``tol`` of its length, the rail
    limit's tolerance) and fixed points; ``|c| + max(a, b)`` for ellipses, ``|c| + a`` for
    figure-eights; otherwise the body's ``radius`` (the model keeps every rail inside the
    ball), or the sampled farthest point if that is larger."""
    if isinstance(rail, CircleRail):
        return rail.max_norm()
    if isinstance(rail, SegmentRail):
        return rail.max_norm() + tol * _norm(np.asarray(rail.p1) - np.asarray(rail.p0))
    if isinstance(rail, FixedPoint):
        return rail.max_norm()
    if isinstance(rail, EllipseRail):
        return _norm(rail.center) + max(_f(rail.a), _f(rail.b))
    if isinstance(rail, FigureEightRail):
        return _norm(rail.center) + _f(rail.a)  # |(sin, sin cos)| <= 1
    return max(float(radius), rail.max_norm())


def _zeta(rail, theta: float) -> np.ndarray:
    """``rail.zeta(theta)`` in NumPy for the rails of :mod:`rollax.models.robot.rails` (no JAX
    dispatch), otherwise through JAX."""
    c, s = math.cos(theta), math.sin(theta)
    a = lambda x: np.asarray(x, dtype=float)
    if isinstance(rail, CircleRail):
        return a(rail.center) + _f(rail.radius) * (c * a(rail.u) + s * a(rail.v))
    if isinstance(rail, EllipseRail):
        return a(rail.center) + _f(rail.a) * c * a(rail.u) + _f(rail.b) * s * a(rail.v)
    if isinstance(rail, FigureEightRail):
        return a(rail.center) + _f(rail.a) * (s * a(rail.u) + s * c * a(rail.v))
    if isinstance(rail, SegmentRail):
        return a(rail.p0) + theta * (a(rail.p1) - a(rail.p0))
    if isinstance(rail, FixedPoint):
        return a(rail.p)
    return a(rail.zeta(theta))


def _rotation(q) -> np.ndarray:
    """The rotation matrix of the versor ``q / |q|`` (NumPy; as
    :func:`rollax.models.robot.quaternion.rotation_matrix`)."""
    q0, q1, q2, q3 = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (q2 * q2 + q3 * q3), 2 * (q1 * q2 - q0 * q3), 2 * (q1 * q3 + q0 * q2)],
            [2 * (q1 * q2 + q0 * q3), 1 - 2 * (q1 * q1 + q3 * q3), 2 * (q2 * q3 - q0 * q1)],
            [2 * (q1 * q3 - q0 * q2), 2 * (q2 * q3 + q0 * q1), 1 - 2 * (q1 * q1 + q2 * q2)],
        ]
    )


def _concrete(tree) -> bool:
    return not any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(tree))


def _offsets(model: Ball | Disk, y0):
    """The CM's offset from the GC at the start (spatial frame): ``(h0, z0)``, the horizontal
    part (a 2-vector; the disk's second component 0) and the height."""
    n = model.n
    theta = np.asarray(y0[:n], dtype=float)
    m = np.concatenate([[_f(model.m0)], np.asarray(model.masses, dtype=float)])
    zetas = [np.asarray(model.zeta0, dtype=float)] + [
        _zeta(rail, float(theta[i])) for i, rail in enumerate(model.rails)
    ]
    c = (m[:, None] * np.stack(zetas)).sum(axis=0) / m.sum()  # body frame
    if isinstance(model, Disk):
        phi = float(y0[2 * n])  # rotation by -phi about E2 (disk.py)
        return (
            np.array([c[0] * math.cos(phi) - c[2] * math.sin(phi), 0.0]),
            c[0] * math.sin(phi) + c[2] * math.cos(phi),
        )
    s = _rotation(y0[2 * n : 2 * n + 4]) @ c
    return s[:2], float(s[2])


def _travel(man, y0):
    """``(D, e, what)``: the GC's horizontal travel, its direction and the request's words."""
    model = man.model
    target = np.asarray(man.target, dtype=float)
    if isinstance(model, Disk):
        phi0 = float(y0[2 * model.n])
        dphi = float(target[0]) - phi0
        return (
            float(model.radius) * abs(dphi),
            np.array([-math.copysign(1.0, dphi), 0.0]),  # x_GC = -r phi
            f"phi_T = {float(target[0]):.6g}",
        )
    delta = target[:2] - np.asarray(y0[-2:], dtype=float)
    D = float(np.linalg.norm(delta))
    e = delta / D if D > 0 else np.zeros(2)
    return D, e, f"target = ({target[0]:.6g}, {target[1]:.6g})"


def necessary_conditions(
    manoeuvre,
    *,
    cost: str = "effort",
    free_mu: bool = False,
    tol: float = 1e-6,
    time_range: float = 4.0,
) -> list[str]:
    """The necessary conditions (module docstring) that ``manoeuvre`` (a
    :class:`rollax.robot.Manoeuvre`) fails, one line each naming the bound with its numbers
    (empty: none fails). ``cost="time"``: ``T`` may grow to ``time_range`` times the
    manoeuvre's; ``free_mu``: mu is a variable (least mu), the friction bound is skipped;
    ``tol``: the optimiser's constraint tolerance, by which every bound is loosened.
    Plain NumPy: microseconds to milliseconds, nothing compiled."""
    man = manoeuvre
    model = man.model
    if (
        not _concrete(man)
        or any(np.ndim(x) != 0 for x in (model.radius, model.m0, model.g, man.T, man.mu, man.n_min))
        or np.ndim(model.slope) > (0 if isinstance(model, Disk) else 1)
    ):
        return []  # traced, or one value per start: not checked here
    out: list[str] = []
    M = _f(model.total_mass)
    slope = np.asarray(model.slope, dtype=float)
    g = _f(model.g) / math.sqrt(1.0 + float(np.sum(slope**2)))  # g_n
    W = M * g
    n_min = _f(man.n_min)
    T = _f(man.T)
    y0 = np.asarray(man.y0, dtype=float)
    forced = model.F_e is not _zero_force
    # rails with ends: the start must lie in the domain (the rail limit at t = 0)
    for i, rail in enumerate(model.rails):
        if isinstance(rail, (SegmentRail, CurveRail)):
            lo, hi = (float(v) for v in rail.domain)
            th = float(y0[i])
            if max(lo - th, th - hi) > tol * (hi - lo):
                out.append(
                    f"needs theta0[{i}] in [{lo:.6g}, {hi:.6g}] (rail {i} has ends; the "
                    f"rail limit fails at t = 0); got theta0[{i}] = {th:.6g}"
                )
    if forced:
        return out
    # the mean normal force
    if math.isfinite(n_min) and n_min > W * (1.0 + tol):
        out.append(
            f"needs n_min <= M g{'_n' if slope.any() else ''} = {W:.6g} (N averages it over "
            f"any rest-to-rest manoeuvre); got n_min = {n_min:.6g}"
        )
    # the friction impulse
    mu = _f(man.mu)
    if free_mu or not math.isfinite(mu):
        return out
    r = _f(model.radius)
    D, e, what = _travel(man, y0)
    if D == 0.0:
        return out
    h0, z0 = _offsets(model, y0)
    m = np.concatenate([[_f(model.m0)], np.asarray(model.masses, dtype=float)])
    reach = [_norm(model.zeta0)] + [rail_reach(rail, r, tol) for rail in model.rails]
    d = float(m @ np.asarray(reach)) / M
    terminal = (1.0 if isinstance(model, Disk) else math.sqrt(2.0)) * tol
    need = D - d - float(e @ h0) - max(r, 1.0) * terminal  # the least travel of the CM along e
    Z = 3.0 * d - z0  # 2 z_max - z(0) - z_min
    big = time_range * T if cost == "time" else T
    # the body's residual speed at T (within tol) and the friction tolerance tol M g
    slack = tol * (g * big**2 / 4 + 4.0 * (1.0 + 2.0 * big) * (1.0 + mu) * (r + d))
    if mu * (g * big**2 / 4 + Z) + slack >= need:
        return out
    rest = need - mu * Z - 4.0 * tol * (1.0 + 2.0 * big) * (1.0 + mu) * (r + d)
    T_least = 2.0 * math.sqrt(rest / ((mu + tol) * g)) if (mu + tol) * g > 0 else math.inf
    T_text = f"T >= {T_least:.4g}" if math.isfinite(T_least) else "a T that no g allows"
    bound = "friction impulse bound X <= mu (g T^2/4 + 2 z_max - z(0) - z_min)"
    if cost == "time":
        out.append(
            f"needs {T_text} for {what} at mu = {mu:.6g}, beyond the time cost's range T <= "
            f"{time_range:g} x {T:.6g} = {big:.6g} ({bound})"
        )
    else:
        mu_least = (need - slack) / (g * T**2 / 4 + Z) if g * T**2 / 4 + Z > 0 else math.inf
        out.append(
            f"needs mu >= {mu_least:.4g} for {what} in T = {T:.6g} (or {T_text} at "
            f"mu = {mu:.6g}; {bound})"
        )
    return out
