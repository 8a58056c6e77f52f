"""Detachment (N = 0) and free flight of the ball and disk robots (Appendix B).

Putkaradze & Rogers, *On the normal force and static friction acting on a rolling ball
actuated by internal point masses*, Appendix B. While rolling, the run ends at the first time
the normal force (3.3)/(4.3) reaches zero (a terminating event, located on the dense output
with :func:`rollax._core.events.locate_root`). From there the body flies: no contact force acts, and

* the ball follows (B.15)/(B.17) for Omega' and (B.6) for the GC's acceleration
  (:class:`BallFlight`, state ``[theta, theta', q, Omega, z_GC (3), z_GC' (3)]``);
* the disk follows (B.18)-(B.19) (:class:`DiskFlight`, state
  ``[theta, theta', phi, phi', x, z, x', z']`` with the GC at ``(x, 0, z)``),

until the GC comes back to the height of rolling contact (``z_GC,3 = 0`` reached from above):
the touchdown is reported, and ``land`` applies a perfectly plastic, no-slip impact there
(:func:`plastic_landing`, the nonholonomic plastic map of :mod:`rollax.models.impacts`) and returns
the rolling state after it. At detachment the GC's velocity is continuous,
``z_GC' = Lambda (Omega x r Gamma)`` (2.3).

The control's kinks are declared to the solver (``jump_ts``), so no step straddles one.

On a sloping floor (the model's ``slope``) the flight falls at ``-G``, the model's
:meth:`~rollax.models.robot.ball.Ball.gravity` in the floor's frame (``g e3`` when level).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax.models.impacts import nonholonomic_plastic
from rollax.models.robot.ball import E3, Ball
from rollax.models.robot.disk import Disk
from rollax.models.robot.quaternion import rotation_matrix, versor_rate


def _hat(v):
    return jnp.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


class BallFlight(eqx.Module):
    """The detached ball, (B.17) (the 1-d rail form of (B.15)) and (B.6)."""

    ball: Ball

    def split(self, y):
        """``(theta, theta', q, Omega, z_GC, z_GC')``."""
        n = self.ball.n
        return (
            y[:n],
            y[n : 2 * n],
            y[2 * n : 2 * n + 4],
            y[2 * n + 4 : 2 * n + 7],
            y[2 * n + 7 : 2 * n + 10],
            y[2 * n + 10 :],
        )

    def from_rolling(self, y_roll):
        """Flight state continuing a rolling state (6.1) at the detachment instant."""
        b = self.ball
        theta, thd, q, Om, z = b.split(y_roll)
        Lam = rotation_matrix(q)
        v = Lam @ jnp.cross(Om, b.radius * (Lam.T @ E3))
        return jnp.concatenate([theta, thd, q, Om, z, jnp.zeros(1), v])

    def _c(self, t, y, control):
        theta, thd, q, Om, _, _ = self.split(y)
        b = self.ball
        zeta, zp, zpp = b.rail_geometry(theta)
        thd1 = jnp.concatenate([jnp.zeros(1), thd])
        u1 = jnp.concatenate([jnp.zeros(1), control(t)])
        c = (
            jnp.cross(Om, jnp.cross(Om, zeta) + 2 * thd1[:, None] * zp)
            + (thd1**2)[:, None] * zpp
            + u1[:, None] * zp
        )
        return zeta, zp, c

    def accelerations(self, t, y, control):
        """``(Omega', z_GC'')`` from (B.17)."""
        b = self.ball
        _, _, q, Om, _, _ = self.split(y)
        Lam = rotation_matrix(q)
        Fe = jnp.asarray(b.F_e(t), dtype=float)
        Gt = Lam.T @ Fe
        zeta, _, c = self._c(t, y, control)
        m = b.all_masses()
        M = b.total_mass
        zbar = m @ zeta / M
        cbar = m @ c / M
        # sum_j (m_j/M - delta_ij) hat(zeta_j) = hat(zbar - zeta_i)
        W = jax.vmap(lambda z: _hat(zbar - z))(zeta)
        H = jax.vmap(_hat)(zeta)
        A = jnp.diag(b.inertia) + jnp.einsum("i,ijk,ikl->jl", m, H, W)
        rhs = jnp.cross(b.inertia * Om, Om) - jnp.einsum(
            "i,ij->j", m, jnp.cross(zeta, Gt / M - (cbar - c))
        )
        Omd = jnp.linalg.solve(A, rhs)
        acc = Fe / M - b.gravity() - Lam @ (m @ (jnp.cross(Omd, zeta) + c)) / M
        return Omd, acc

    def vector_field(self, t, y, control):
        """Right-hand side of the flight ODE."""
        _, thd, q, Om, _, v = self.split(y)
        Omd, acc = self.accelerations(t, y, control)
        return jnp.concatenate(
            [thd, control(t), versor_rate(q, Om, self.ball.quat_gain), Omd, v, acc]
        )

    def height(self, y):
        """``z_GC,3``: the GC's height above its rolling height (touchdown at 0)."""
        return self.split(y)[4][2]

    def cm_position(self, y):
        """Spatial position of the whole system's centre of mass."""
        b = self.ball
        theta, _, q, _, x, _ = self.split(y)
        zeta, _, _ = b.rail_geometry(theta)
        return x + rotation_matrix(q) @ (b.all_masses() @ zeta) / b.total_mass

    def velocities(self, y):
        """``u = (z_GC', Omega)``: the velocities an impact changes (the masses' theta' are
        prescribed and continuous)."""
        _, _, _, Om, _, v = self.split(y)
        return jnp.concatenate([v, Om])

    def kinetic_energy(self, y, u=None):
        """Kinetic energy at the configuration of ``y`` with velocities ``u = (z_GC', Omega)``
        (default: those of ``y``): the ball's spin about its CM plus the point masses (m_0 at
        the CM), ``z_i' = z_GC' + Lambda (Omega x zeta_i + theta_i' zeta_i')``."""
        b = self.ball
        theta, thd, q, _, _, _ = self.split(y)
        u = self.velocities(y) if u is None else u
        v, Om = u[:3], u[3:]
        Lam = rotation_matrix(q)
        zeta, zp, _ = b.rail_geometry(theta)
        thd1 = jnp.concatenate([jnp.zeros(1), thd])
        vel = v + (jnp.cross(Om, zeta) + thd1[:, None] * zp) @ Lam.T
        return 0.5 * Om @ (b.inertia * Om) + 0.5 * b.all_masses() @ jnp.sum(vel * vel, axis=1)

    def contact_velocity(self, y, u=None):
        """Spatial velocity of the ball's material point at the contact ``C = z_GC - r e3``,
        ``z_GC' + Lambda (Omega x (-r Gamma))``: zero while rolling (2.3)."""
        _, _, q, _, _, _ = self.split(y)
        u = self.velocities(y) if u is None else u
        Lam = rotation_matrix(q)
        return u[:3] + Lam @ jnp.cross(u[3:], -self.ball.radius * (Lam.T @ E3))

    def energy(self, y):
        """Kinetic plus potential energy in flight."""
        b = self.ball
        theta, _, q, _, x, _ = self.split(y)
        zeta, _, _ = b.rail_geometry(theta)
        # (a level floor: g times the height; a slope's G also counts the travel along it)
        G = b.gravity()
        return self.kinetic_energy(y) + b.all_masses() @ (x @ G + zeta @ (rotation_matrix(q).T @ G))

    def land(self, y) -> "Landing":
        """Plastic no-slip touchdown at the flight state ``y`` (``z_GC,3 = 0``): see
        :func:`plastic_landing`. Returns the rolling state (6.1) just after it, with the
        contact point under the GC."""
        theta, thd, q, _, x, _ = self.split(y)
        u_plus, impulse = plastic_landing(
            lambda u: self.kinetic_energy(y, u),
            lambda u: self.contact_velocity(y, u),
            self.velocities(y),
        )
        return Landing(
            jnp.concatenate([theta, thd, q, u_plus[3:], x[:2]]),
            impulse,
            self.kinetic_energy(y, u_plus) - self.kinetic_energy(y),
        )


class DiskFlight(eqx.Module):
    """The detached disk, (B.18)-(B.19)."""

    disk: Disk

    def split(self, y):
        """``(theta, theta', phi, phi', x_GC (x, z), v_GC (x', z'))``."""
        n = self.disk.n
        return y[:n], y[n : 2 * n], y[2 * n], y[2 * n + 1], y[2 * n + 2 : 2 * n + 4], y[2 * n + 4 :]

    def from_rolling(self, y_roll, x=None):
        """Flight state continuing a rolling disk state (5.1); the GC is at ``x = -r phi``
        unless given (Sect. 5 with ``z_a = phi_a = 0``) and moves at ``(-r phi', 0)``."""
        d = self.disk
        theta, thd, phi, phid = d.split(y_roll)
        x = -d.radius * phi if x is None else x
        return jnp.concatenate(
            [theta, thd, jnp.stack([phi, phid, x, 0.0 * x, -d.radius * phid, 0.0 * x])]
        )

    def _terms(self, t, y, control):
        d = self.disk
        theta, thd, phi, phid, _, _ = self.split(y)
        yr = jnp.concatenate([theta, thd, jnp.stack([phi, phid])])
        return d._terms(t, yr, control)

    def accelerations(self, t, y, control):
        """``(phi'', (x'', z''))`` from (B.18)."""
        d = self.disk
        phi, phid, z1, z3, P, Q, Fe = self._terms(t, y, control)
        m, M = d.all_masses(), d.total_mass
        s, c = jnp.sin(phi), jnp.cos(phi)
        F1, F3 = Fe[0], Fe[2]
        # sum_j (m_j - M delta_ij) V_ij with V_ij = zeta_i1 P_j - zeta_i3 Q_j (B.19)
        sumV = z1 * (m @ P - M * P) - z3 * (m @ Q - M * Q)
        num = m @ (F1 * (z1 * s + z3 * c) - F3 * (z1 * c - z3 * s) + sumV)
        pair = jnp.outer(m, m) * (jnp.outer(z1, z1) + jnp.outer(z3, z3))
        den = M * d.d2 - m @ ((m - M) * (z1**2 + z3**2)) - 2 * jnp.sum(jnp.triu(pair, 1))
        phdd = num / den
        g_t, g_n = d.gravity()
        ax = (F1 - M * g_t - m @ (c * (-phdd * z3 + Q) - s * (phdd * z1 + P))) / M
        az = (F3 - M * g_n - m @ (s * (-phdd * z3 + Q) + c * (phdd * z1 + P))) / M
        return phdd, jnp.stack([ax, az])

    def vector_field(self, t, y, control):
        """Right-hand side of the flight ODE."""
        _, thd, _, phid, _, v = self.split(y)
        phdd, acc = self.accelerations(t, y, control)
        return jnp.concatenate([thd, control(t), jnp.stack([phid, phdd]), v, acc])

    def height(self, y):
        return self.split(y)[4][1]

    def cm_position(self, y):
        """``(x, z)`` of the whole system's centre of mass (Lambda of (A.1))."""
        d = self.disk
        theta, _, phi, _, x, _ = self.split(y)
        zeta, _, _ = d.rail_geometry(theta)
        zb = d.all_masses() @ zeta / d.total_mass
        s, c = jnp.sin(phi), jnp.cos(phi)
        return x + jnp.stack([c * zb[0] - s * zb[2], s * zb[0] + c * zb[2]])

    def velocities(self, y):
        """``u = (x', z', phi')``: the velocities an impact changes."""
        _, _, _, phid, _, v = self.split(y)
        return jnp.concatenate([v, phid[None]])

    def kinetic_energy(self, y, u=None):
        """Kinetic energy at the configuration of ``y`` with velocities ``u = (x', z', phi')``
        (default: those of ``y``)."""
        d = self.disk
        theta, thd, phi, _, _, _ = self.split(y)
        u = self.velocities(y) if u is None else u
        v, phid = u[:2], u[2]
        zeta, zp, _ = d.rail_geometry(theta)
        thd1 = jnp.concatenate([jnp.zeros(1), thd])
        s, c = jnp.sin(phi), jnp.cos(phi)
        # body-frame velocity relative to the GC: Omega x zeta + theta' zeta', Omega = -phi' E2
        b1 = -phid * zeta[:, 2] + thd1 * zp[:, 0]
        b3 = phid * zeta[:, 0] + thd1 * zp[:, 2]
        vx = v[0] + c * b1 - s * b3
        vz = v[1] + s * b1 + c * b3
        return 0.5 * d.d2 * phid**2 + 0.5 * d.all_masses() @ (vx**2 + vz**2)

    def contact_velocity(self, y, u=None):
        """``(x', z')`` velocity of the disk's material point at the contact (below the GC):
        ``(x' + r phi', z')``, zero while rolling (``x = -r phi``)."""
        u = self.velocities(y) if u is None else u
        return jnp.stack([u[0] + self.disk.radius * u[2], u[1]])

    def energy(self, y):
        """Kinetic plus potential energy in flight."""
        d = self.disk
        theta, _, phi, _, x, _ = self.split(y)
        zeta, _, _ = d.rail_geometry(theta)
        s, c = jnp.sin(phi), jnp.cos(phi)
        g_t, g_n = d.gravity()
        m = d.all_masses()
        return (
            self.kinetic_energy(y)
            + g_n * m @ (x[1] + s * zeta[:, 0] + c * zeta[:, 2])
            + g_t * m @ (x[0] + c * zeta[:, 0] - s * zeta[:, 2])
        )

    def land(self, y) -> "Landing":
        """Plastic no-slip touchdown at the flight state ``y`` (see :func:`plastic_landing`).
        Returns the rolling state (5.1) just after it; the contact point is at ``x`` (flight
        moves it off ``-r phi``, which the rolling state does not track)."""
        theta, thd, phi, _, _, _ = self.split(y)
        u_plus, impulse = plastic_landing(
            lambda u: self.kinetic_energy(y, u),
            lambda u: self.contact_velocity(y, u),
            self.velocities(y),
        )
        return Landing(
            jnp.concatenate([theta, thd, jnp.stack([phi, u_plus[2]])]),
            impulse,
            self.kinetic_energy(y, u_plus) - self.kinetic_energy(y),
        )


class Landing(NamedTuple):
    """A touchdown: the rolling state just after it, the contact impulse (spatial; per unit
    of the model's mass unit) and the kinetic energy change (<= 0)."""

    y: Float[Array, " d"]
    impulse: Float[Array, " k"]
    energy_change: Float[Array, ""]


def plastic_landing(kinetic, contact_velocity, u):
    """Post-impact velocities of a perfectly plastic touchdown without slip.

    At touchdown the contact point's velocity ``A u`` (``contact_velocity``, linear in the
    impact velocities ``u``) is set to zero by an impulse ``P`` acting at the contact point:
    ``M (u+ - u-) = A^T P`` and ``A u+ = 0``, with ``M`` the Hessian of the kinetic energy in
    ``u`` (the masses' prescribed rail motion only adds terms linear in ``u``, which cancel).
    This is the nonholonomic plastic impact map (18)-(21) of Clark & Bloch
    (:func:`rollax.models.impacts.nonholonomic_plastic`) with the rolling constraints as ``A`` and the
    impact surface's normal (the vertical row of ``A``) as ``dh``; it is the g-orthogonal
    projection onto ``ker A``, so energy never increases, and since ``P`` acts at the contact
    point the angular momentum about it is conserved (both in the tests). ``M`` and ``A``
    come from autodiff. Returns ``(u+, P)``; ``|P_t| / P_n`` is the friction coefficient the
    landing needs for the ball to stick at once.
    """
    M = jax.hessian(kinetic)(u)
    A = jax.jacfwd(contact_velocity)(u)
    u_plus = nonholonomic_plastic(M, A, A[-1], u)
    # A = [I | ...]: the first block of A^T P is P itself
    P = (M @ (u_plus - u))[: A.shape[0]]
    return u_plus, P


def flight_model(model):
    """The flight counterpart of a rolling :class:`Ball` or :class:`Disk`."""
    if isinstance(model, Ball):
        return BallFlight(model)
    if isinstance(model, Disk):
        return DiskFlight(model)
    raise ValueError(f"no flight model for {type(model).__name__}")
