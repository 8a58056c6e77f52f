"""The rolling ball actuated by internal point masses on rails (Sects. 2, 3 and 6).

Putkaradze & Rogers, *On the normal force and static friction acting on a rolling ball
actuated by internal point masses*. A ball of radius r, mass m0, principal inertia
``diag(d1, d2, d3)`` about its centre of mass (CM) at ``zeta_0`` from the geometric centre
(GC), carries n point masses m_i on rails ``zeta_i(theta_i)`` (body frame translated to the
GC) with prescribed ``theta_i''(t) = u_i(t)``. It rolls without slipping on a horizontal plane
under gravity g and an external force F_e(t) at the GC.

The floor may slope (not in the paper): ``slope = (s1, s2)`` is its gradient, rise over run
along the floor's e1 and e2, so that in the floor's frame (e3 its normal) gravity is ``-G``
with ``G = g (s1, s2, 1) / sqrt(1 + s1^2 + s2^2)``; the paper's ``g Gamma`` (gravity in the
body frame) becomes ``Lambda^T G``, the weight in N (3.3) ``M G_3`` and the friction (3.4)
gains ``M (G_1, G_2)``. Checked against an independent Newton-Euler re-simulation in SciPy
(``tests/ball_robot_reference.py``) and energy conservation (``tests/models/robot/test_slope.py``).

State (6.1): ``y = [theta (n), theta' (n), q (4), Omega (3), z (2)]`` with the versor q (scalar
first), body angular velocity Omega and the GC's horizontal position z. Dynamics (6.4) with
Omega' from (3.2); normal force N (3.3); static friction (3.4).

Versor norm: the right-hand side uses ``q/|q|`` for the rotation and adds the stabilising term
``(k/2)(1 - |q|^2) q`` to q' (:func:`rollax.models.robot.quaternion.versor_rate`, gain
``quat_gain = k``), so the unit-norm constraint of the DAE (6.5) is attracting; the drift is
monitored by :func:`rollax.analysis.robot.trajectory.quaternion_drift`.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
import numpy as np
from jaxtyping import Array, Float

from rollax._core._system import check_parameters, parameter
from rollax._core._validate import check_finite, check_nonnegative, check_positive
from rollax.models.robot.controls import Control
from rollax.models.robot.quaternion import rotation_matrix, versor_rate
from rollax.models.robot.rails import Rail

E3 = np.array([0.0, 0.0, 1.0])  # numpy: a jnp constant would start JAX at import


def _arr(x):
    return jnp.asarray(x, dtype=float)


def _concrete(x) -> bool:
    return not isinstance(x, Tracer)


class ConstantForce(eqx.Module):
    """A constant external force ``F_e`` (spatial frame) acting at the GC."""

    F: Float[Array, "3"] = parameter(shape=(3,))

    def __check_init__(self):
        check_parameters(self)

    def __call__(self, t):
        return self.F


def _zero_force(t):
    return jnp.zeros(3)


def _hat2(s: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """``hat(s)^2 = s s^T - |s|^2 I``."""
    return jnp.outer(s, s) - (s @ s) * jnp.eye(3)


def _check_masses(masses, n_rails: int) -> None:
    if jnp.ndim(masses) != 1:
        raise ValueError(f"masses must be a 1-d array, got shape {jnp.shape(masses)}")
    if masses.shape[0] != n_rails:
        raise ValueError(f"got {masses.shape[0]} masses but {n_rails} rails")
    if _concrete(masses):
        for i, m in enumerate(np.asarray(masses)):
            check_positive(f"masses[{i}] (m_{i + 1})", m)


def _check_inside(r, rails, zeta0) -> None:
    if not (_concrete(r) and _concrete(zeta0)):
        return
    r = np.min(np.asarray(r))  # per-start radii (a leading batch axis): the smallest
    for i, rail in enumerate(rails):
        leaves = jax.tree_util.tree_leaves(rail)
        if any(isinstance(x, Tracer) for x in leaves):
            continue
        rho = rail.max_norm()
        if rho > float(r) * (1 + 1e-12):
            raise ValueError(
                f"rail {i} (mass m_{i + 1}) leaves the ball: it reaches |zeta| = {rho:.6g} "
                f"> radius r = {float(r):.6g}"
            )
    if float(jnp.linalg.norm(zeta0)) > float(r):
        raise ValueError(
            f"centre of mass offset zeta0 = {np.asarray(zeta0).tolist()} lies outside the ball"
        )


class Ball(eqx.Module):
    """Rolling ball with internal point masses on rails; equations (3.2)-(3.4), (6.4).

    ``inertia = (d1, d2, d3)``: principal moments of the ball without the point masses about
    its CM; ``zeta0``: CM offset from the GC (body frame); ``masses[i]`` rides on ``rails[i]``;
    ``F_e(t)``: external force at the GC (spatial frame), default zero; ``slope = (s1, s2)``: the
    floor's gradient, rise over run along e1 and e2 (default level; module docstring).
    """

    radius: float = parameter()
    m0: float = parameter()
    inertia: Float[Array, "3"] = parameter(shape=(3,))
    zeta0: Float[Array, "3"] = parameter(shape=(3,))
    masses: Float[Array, " n"] = parameter(shape=("n",))
    rails: tuple[Rail, ...] = eqx.field(converter=tuple)  # pyright: ignore[reportGeneralTypeIssues]  (the parameters above have no default)
    g: float = parameter(9.81)
    F_e: Callable = _zero_force
    quat_gain: float = eqx.field(static=True, default=1.0)
    slope: Float[Array, "2"] = parameter((0.0, 0.0), shape=(2,), units="1")

    def __check_init__(self):
        check_parameters(self)
        check_positive("radius r", self.radius)
        check_positive("m0", self.m0)
        check_nonnegative("g", self.g)
        if jnp.shape(self.inertia) != (3,):
            raise ValueError(f"inertia must be (d1, d2, d3), got shape {jnp.shape(self.inertia)}")
        if _concrete(self.inertia):
            for k, d in enumerate(np.asarray(self.inertia)):
                check_positive(f"inertia d{k + 1}", d)
        if jnp.shape(self.zeta0) != (3,):
            raise ValueError(f"zeta0 must be a 3-vector, got shape {jnp.shape(self.zeta0)}")
        check_finite("zeta0", self.zeta0)
        _check_masses(self.masses, len(self.rails))
        if np.ndim(self.quat_gain) != 0:
            raise ValueError(
                f"quat_gain = {self.quat_gain!r} is not allowed: it must be one "
                "real number >= 0 (a static field)"
            )
        check_nonnegative("quat_gain", self.quat_gain)
        _check_inside(self.radius, self.rails, self.zeta0)

    # ----------------------------------------------------------------- geometry
    @property
    def n(self) -> int:
        """Number of moving point masses."""
        return len(self.rails)

    @property
    def total_mass(self) -> Float[Array, ""]:
        """M = m0 + sum m_i."""
        return self.m0 + jnp.sum(self.masses)

    def all_masses(self) -> Float[Array, " n1"]:
        """``(m0, m1, ..., mn)``."""
        return jnp.concatenate([jnp.reshape(self.m0, (1,)), self.masses])

    def gravity(self) -> Float[Array, "3"]:
        """``G = g (s1, s2, 1) / sqrt(1 + s1^2 + s2^2)``: gravity is ``-G`` in the floor's frame
        (a floor rising along e1, ``s1 > 0``, pulls towards -e1)."""
        sl = jnp.asarray(self.slope, float)
        return self.g * jnp.concatenate([sl, jnp.ones(1)]) / jnp.sqrt(1.0 + sl @ sl)

    def rail_geometry(self, theta: Float[Array, " n"]):
        """``zeta_i, zeta_i', zeta_i''`` for i = 0..n stacked as ``(n+1, 3)`` arrays (3.1);
        row 0 is the fixed CM offset ``zeta_0``."""
        zs, zps, zpps = [self.zeta0], [jnp.zeros(3)], [jnp.zeros(3)]
        for i, rail in enumerate(self.rails):
            z, zp, zpp = rail(theta[i])
            zs.append(z)
            zps.append(zp)
            zpps.append(zpp)
        return jnp.stack(zs), jnp.stack(zps), jnp.stack(zpps)

    def split(self, y: Float[Array, " d"]):
        """``(theta, theta', q, Omega, z)`` from the state (6.1)."""
        n = self.n
        return y[:n], y[n : 2 * n], y[2 * n : 2 * n + 4], y[2 * n + 4 : 2 * n + 7], y[2 * n + 7 :]

    def initial_state(
        self, theta, theta_dot=None, q=(1.0, 0.0, 0.0, 0.0), Omega=(0.0, 0.0, 0.0), z=(0.0, 0.0)
    ) -> Float[Array, " d"]:
        """Assemble the state (6.7); the versor ``q`` must have unit norm."""
        theta = _arr(theta)
        theta_dot = jnp.zeros(self.n) if theta_dot is None else _arr(theta_dot)
        q = _arr(q)
        if theta.shape != (self.n,) or theta_dot.shape != (self.n,):
            raise ValueError(f"theta and theta_dot must have shape ({self.n},)")
        if q.shape != (4,):
            raise ValueError(f"initial quaternion q must have 4 components, got shape {q.shape}")
        if _concrete(q) and abs(float(jnp.linalg.norm(q)) - 1.0) > 1e-12:
            raise ValueError(
                f"initial quaternion q = {np.asarray(q).tolist()} is not a unit versor "
                f"(|q| = {float(jnp.linalg.norm(q))!r})"
            )
        return jnp.concatenate([theta, theta_dot, q, _arr(Omega), _arr(z)])

    # ----------------------------------------------------------------- dynamics
    def accelerations(self, t, y, control: Control):
        """Solve (3.2) for Omega' and return the pieces the forces need.

        Returns ``(Omega_dot, a, Lam, Gamma, Fe)`` where ``a[i] = Omega' x s_i + Omega x (Omega
        x zeta_i + 2 theta_i' zeta_i') + theta_i'^2 zeta_i'' + theta_i'' zeta_i'``
        = ``Lambda^{-1} z_i''`` (2.8), (3.1) is the body-frame acceleration of mass i.
        """
        theta, thd, q, Om, _ = self.split(y)
        u = control(t)
        Lam = rotation_matrix(q)
        Gam = Lam.T @ E3
        Gg = Lam.T @ self.gravity()  # g Gamma on a level floor
        Fe = jnp.asarray(self.F_e(t), dtype=float)
        Gt = Lam.T @ Fe
        zeta, zp, zpp = self.rail_geometry(theta)
        m = self.all_masses()
        thd1 = jnp.concatenate([jnp.zeros(1), thd])
        u1 = jnp.concatenate([jnp.zeros(1), u])
        s = self.radius * Gam + zeta  # s_i = r Gamma + zeta_i
        b = (
            jnp.cross(Om, jnp.cross(Om, zeta) + 2 * thd1[:, None] * zp)
            + (thd1**2)[:, None] * zpp
            + u1[:, None] * zp
        )
        Id = self.inertia
        A = jnp.einsum("i,ijk->jk", m, jax.vmap(_hat2)(s)) - jnp.diag(Id)
        rhs = (
            jnp.cross(Om, Id * Om)
            + self.radius * jnp.cross(Gt, Gam)
            + jnp.einsum("i,ij->j", m, jnp.cross(s, Gg + b))
        )
        Omd = jnp.linalg.solve(A, rhs)
        a = jnp.cross(Omd, s) + b
        return Omd, a, Lam, Gam, Fe

    def vector_field(self, t, y, control: Control) -> Float[Array, " d"]:
        """Right-hand side of the ODE (6.4) (diffrax convention ``f(t, y, args)``)."""
        _, thd, q, Om, _ = self.split(y)
        Omd, _, Lam, _, _ = self.accelerations(t, y, control)
        omega = Lam @ Om
        zdot = self.radius * jnp.array([omega[1], -omega[0]])  # (omega x r e3)_12
        return jnp.concatenate([thd, control(t), versor_rate(q, Om, self.quat_gain), Omd, zdot])

    def contact_forces(self, t, y, control: Control):
        """``(N, F_h)``: normal force N (3.3) and the horizontal contact force
        ``F_h = -f_s sigma`` (its first two spatial components, (3.4)); ``f_s = |F_h|``."""
        _, a, Lam, Gam, Fe = self.accelerations(t, y, control)
        m = self.all_masses()
        acc = jnp.einsum("i,ij->j", m, a)
        G = self.gravity()
        N = self.total_mass * G[2] + acc @ Gam - Fe[2]
        F_h = (Lam @ acc - Fe)[:2] + self.total_mass * G[:2]
        return N, F_h

    def friction_ratio(self, t, y, control: Control) -> Float[Array, ""]:
        """``f_s / N`` (1.3) at one instant."""
        N, F_h = self.contact_forces(t, y, control)
        return jnp.sqrt(F_h @ F_h) / N

    # ----------------------------------------------------------------- invariants
    def mass_positions(self, y) -> Float[Array, "n1 3"]:
        """Spatial positions ``z_i = z_GC + Lambda zeta_i`` (2.6) of the CM (row 0) and the masses,
        with the spatial origin at the GC's height."""
        theta, _, q, _, z = self.split(y)
        zeta, _, _ = self.rail_geometry(theta)
        zgc = jnp.concatenate([z, jnp.zeros(1)])
        return zgc + zeta @ rotation_matrix(q).T

    def energy(self, y) -> Float[Array, ""]:
        """Kinetic plus potential energy of the ball and the masses while rolling
        (velocities from (2.7): ``z_i' = Lambda (Omega x s_i + zeta_i' theta_i')``); on a slope
        the potential counts the GC's travel along the floor from ``z = 0``."""
        theta, thd, q, Om, z = self.split(y)
        Lam = rotation_matrix(q)
        Gam = Lam.T @ E3
        G = self.gravity()
        zeta, zp, _ = self.rail_geometry(theta)
        m = self.all_masses()
        thd1 = jnp.concatenate([jnp.zeros(1), thd])
        v = jnp.cross(Om, self.radius * Gam + zeta) + thd1[:, None] * zp
        T = 0.5 * Om @ (self.inertia * Om) + 0.5 * jnp.sum(m * jnp.sum(v * v, axis=1))
        V = jnp.sum(m * (zeta @ (Lam.T @ G))) + jnp.sum(m) * (z @ G[:2])
        return T + V

    def actuator_power(self, t, y, control: Control) -> Float[Array, ""]:
        """Power delivered to the system: by the rail actuators,
        ``sum_i m_i (Lambda^{-1} z_i'' + Lambda^T G) . zeta_i' theta_i'`` (``g Gamma`` on a
        level floor), plus that of F_e at the GC.
        While rolling, dE/dt equals this (the contact force does no work)."""
        theta, thd, _, Om, _ = self.split(y)
        _, a, Lam, Gam, Fe = self.accelerations(t, y, control)
        _, zp, _ = self.rail_geometry(theta)
        m = self.all_masses()[1:]
        P_act = jnp.sum(m * thd * jnp.sum((a[1:] + Lam.T @ self.gravity()) * zp[1:], axis=1))
        v_gc = Lam @ jnp.cross(Om, self.radius * Gam)
        return P_act + Fe @ v_gc
