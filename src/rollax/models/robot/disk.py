"""The rolling disk actuated by internal point masses (Sects. 4-5).

Putkaradze & Rogers, *On the normal force and static friction acting on a rolling ball
actuated by internal point masses*, Sect. 4: the planar special case of the ball, rolling in
the e1-e3 plane with all rails and the CM offset in the body's E1-E3 plane. The disk angle
phi is measured counterclockwise from e1 to E1, so ``Omega = -phi' E2`` (A.2) and the GC moves
by ``z = z_a - r (phi - phi_a)``.

State (5.1): ``y = [theta (n), theta' (n), phi, phi']``. Dynamics (4.1)-(4.2), normal force
(4.3), friction (4.4) (``F_h`` below is its e1-component ``pi f_s``).

The floor may slope (not in the paper): ``slope`` is its rise over run along e1, so that in the
floor's frame (e1 along the floor, e3 its normal) gravity is ``-(g_t, 0, g_n)`` with
``(g_t, g_n) = g (slope, 1) / sqrt(1 + slope^2)``. The paper's g is then g_n, and the
tangential part adds ``g_t`` times each mass's height above the contact to the torque
(4.2), ``M g_t`` to the friction (4.4) and ``g_t`` times the distance along the floor to the
potential energy. Checked against the ball's 3-D equations, energy conservation and the
closed form of a uniform disk rolling down (``tests/models/robot/test_slope.py``).
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
from rollax.models.robot.ball import _check_inside, _check_masses, _zero_force
from rollax.models.robot.controls import Control
from rollax.models.robot.rails import CircleRail, EllipseRail, FigureEightRail, Rail, SegmentRail


def _arr(x):
    return jnp.asarray(x, dtype=float)


def _off_plane(rail) -> float:
    """The largest ``|zeta_2|`` of ``rail``: in NumPy, a bound exact for a rail in the plane,
    for the rails built from a centre and two axes or two end points (no JAX dispatch, which
    compiles each operation on its first call: 1.5 s for the Sect. 5 disk); otherwise
    sampled on 65 points of its domain."""
    if isinstance(rail, (CircleRail, EllipseRail, FigureEightRail)):
        amp = {CircleRail: "radius", EllipseRail: "a", FigureEightRail: "a"}[type(rail)]
        size = float(np.asarray(getattr(rail, amp)))
        if isinstance(rail, EllipseRail):
            size = max(size, float(np.asarray(rail.b)))
        c2, u2, v2 = (float(np.asarray(x)[1]) for x in (rail.center, rail.u, rail.v))
        if isinstance(rail, FigureEightRail):  # sin(t) u + sin(t) cos(t) v
            return abs(c2) + size * (abs(u2) + abs(v2) / 2)
        return abs(c2) + size * float(np.hypot(u2, v2))
    if isinstance(rail, SegmentRail):
        return max(abs(float(np.asarray(rail.p0)[1])), abs(float(np.asarray(rail.p1)[1])))
    lo, hi = rail.domain
    ths = jnp.linspace(lo, hi, 65)
    return float(jnp.max(jnp.abs(jax.vmap(lambda t: rail(t)[0][1])(ths))))


def _check_planar(rails, zeta0) -> None:
    for i, rail in enumerate(rails):
        if any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(rail)):
            continue
        off = _off_plane(rail)
        if off > 1e-12:
            raise ValueError(f"rail {i} leaves the disk's E1-E3 plane (|zeta_2| up to {off:.3g})")
    if not isinstance(zeta0, Tracer) and abs(float(zeta0[1])) > 0:
        raise ValueError(f"zeta0 = {np.asarray(zeta0).tolist()} must lie in the E1-E3 plane")


class Disk(eqx.Module):
    """Rolling disk with internal point masses on planar rails; equations (4.1)-(4.4).

    ``d2``: polar moment of inertia of the disk without the point masses about its CM;
    ``zeta0``: CM offset from the GC as a 3-vector ``(x, 0, z)``; ``F_e(t)``: external force at
    the GC (spatial 3-vector; its e1 and e3 components act); ``slope``: the floor's rise over
    run along e1 (default 0, level; module docstring).
    """

    radius: float = parameter()
    m0: float = parameter()
    d2: float = parameter()
    zeta0: Float[Array, "3"] = parameter(shape=(3,))
    masses: Float[Array, " n"] = parameter(shape=("n",))
    rails: tuple[Rail, ...] = eqx.field(converter=tuple)  # pyright: ignore[reportGeneralTypeIssues]  (the parameters above have no default)
    g: float = parameter(9.81)
    F_e: Callable = _zero_force
    slope: float = parameter(0.0, units="1")

    def __check_init__(self):
        check_parameters(self)
        check_positive("radius r", self.radius)
        check_positive("m0", self.m0)
        check_positive("inertia d2", self.d2)
        check_nonnegative("g", self.g)
        if jnp.shape(self.zeta0) != (3,):
            raise ValueError(
                f"zeta0 must be a 3-vector (x, 0, z), got shape {jnp.shape(self.zeta0)}"
            )
        check_finite("zeta0", self.zeta0)
        _check_masses(self.masses, len(self.rails))
        _check_inside(self.radius, self.rails, self.zeta0)
        _check_planar(self.rails, self.zeta0)

    @property
    def n(self) -> int:
        return len(self.rails)

    def gravity(self):
        """``(g_t, g_n) = g (slope, 1) / sqrt(1 + slope^2)``: gravity is ``-(g_t e1 + g_n e3)``
        in the floor's frame (a floor rising along e1, ``slope > 0``, pulls towards -e1)."""
        k = self.g / jnp.sqrt(1.0 + self.slope**2)
        return k * self.slope, k

    @property
    def total_mass(self):
        return self.m0 + jnp.sum(self.masses)

    def all_masses(self):
        return jnp.concatenate([jnp.reshape(self.m0, (1,)), self.masses])

    def rail_geometry(self, theta):
        """``(zeta, zeta', zeta'')`` for i = 0..n as ``(n+1, 3)`` arrays (row 0: ``zeta_0``)."""
        zs, zps, zpps = [self.zeta0], [jnp.zeros(3)], [jnp.zeros(3)]
        for i, rail in enumerate(self.rails):
            z, zp, zpp = rail(theta[i])
            zs.append(z)
            zps.append(zp)
            zpps.append(zpp)
        return jnp.stack(zs), jnp.stack(zps), jnp.stack(zpps)

    def split(self, y):
        """``(theta, theta', phi, phi')`` from the state (5.1)."""
        n = self.n
        return y[:n], y[n : 2 * n], y[2 * n], y[2 * n + 1]

    def initial_state(self, theta, theta_dot=None, phi=0.0, phi_dot=0.0):
        """Assemble the state (5.3)."""
        theta = _arr(theta)
        theta_dot = jnp.zeros(self.n) if theta_dot is None else _arr(theta_dot)
        if theta.shape != (self.n,) or theta_dot.shape != (self.n,):
            raise ValueError(f"theta and theta_dot must have shape ({self.n},)")
        return jnp.concatenate([theta, theta_dot, _arr([phi, phi_dot])])

    def _terms(self, t, y, control):
        theta, thd, phi, phid = self.split(y)
        u = control(t)
        zeta, zp, zpp = self.rail_geometry(theta)
        thd1 = jnp.concatenate([jnp.zeros(1), thd])
        u1 = jnp.concatenate([jnp.zeros(1), u])
        z1, z3 = zeta[:, 0], zeta[:, 2]
        p1, p3 = zp[:, 0], zp[:, 2]
        q1, q3 = zpp[:, 0], zpp[:, 2]
        # P_i, Q_i of (B.19) without the phi'' terms
        P = -(phid**2) * z3 + 2 * phid * thd1 * p1 + thd1**2 * q3 + u1 * p3
        Q = -(phid**2) * z1 - 2 * phid * thd1 * p3 + thd1**2 * q1 + u1 * p1
        Fe = jnp.asarray(self.F_e(t), dtype=float)
        return phi, phid, z1, z3, P, Q, Fe

    def phi_ddot(self, t, y, control: Control):
        """phi'' from (4.1)-(4.2)."""
        phi, phid, z1, z3, P, Q, Fe = self._terms(t, y, control)
        r, m = self.radius, self.all_masses()
        g_t, g_n = self.gravity()
        s, c = jnp.sin(phi), jnp.cos(phi)
        S1, S3 = r * s + z1, r * c + z3
        # K_i (4.2): the (r phi'^2) part with the phi'^2 pieces of P, Q regroups to (g + r phi'^2);
        # a slope's g_t acts on each mass's height above the contact, r + z1 s + z3 c
        K = (
            (g_n + r * phid**2) * (z3 * s - z1 * c)
            + g_t * (r + z1 * s + z3 * c)
            + S3 * (Q + phid**2 * z1)
            - S1 * (P + phid**2 * z3)
        )
        return (m @ K - r * Fe[0]) / (self.d2 + m @ (S1**2 + S3**2))

    def vector_field(self, t, y, control: Control):
        """Right-hand side of (5.2)."""
        _, thd, _, phid = self.split(y)
        return jnp.concatenate([thd, control(t), jnp.stack([phid, self.phi_ddot(t, y, control)])])

    def contact_forces(self, t, y, control: Control):
        """``(N, F_h)``: normal force (4.3) and ``F_h = (pi f_s, 0)``, the e1-component of
        ``-f_s sigma`` (4.4) padded to the ball's 2-vector."""
        phi, phid, z1, z3, P, Q, Fe = self._terms(t, y, control)
        phdd = self.phi_ddot(t, y, control)
        r, m = self.radius, self.all_masses()
        s, c = jnp.sin(phi), jnp.cos(phi)
        X = -phdd * z3 + Q  # e1-like body component (A.9) without -r phi'' cos
        Z = phdd * z1 + P
        g_t, g_n = self.gravity()
        M = self.total_mass
        N = M * g_n + m @ (X * s + Z * c) - Fe[2]
        pif = M * g_t - (M * r * phdd + m @ (-X * c + Z * s) + Fe[0])
        return N, jnp.stack([pif, jnp.zeros(())])

    def friction_ratio(self, t, y, control: Control):
        """``|f_s| / N`` (1.3)."""
        N, F_h = self.contact_forces(t, y, control)
        return jnp.abs(F_h[0]) / N

    def as_ball(self, d1=None, d3=None):
        """The same body as a 3-D :class:`~rollax.models.robot.ball.Ball` (Sect. 4: the disk is the
        ball with E2 normal to the plane of the CM, the rails and the motion). ``d1``, ``d3``
        (default ``d2``) do not affect the planar motion."""
        from rollax.models.robot.ball import Ball

        return Ball(
            radius=self.radius,
            m0=self.m0,
            inertia=jnp.stack(
                [self.d2 if d1 is None else _arr(d1), self.d2, self.d2 if d3 is None else _arr(d3)]
            ),
            zeta0=self.zeta0,
            masses=self.masses,
            rails=self.rails,
            g=self.g,
            F_e=self.F_e,
            slope=jnp.stack([_arr(self.slope), jnp.zeros_like(_arr(self.slope))], axis=-1),
        )

    def ball_state(self, y, z_a=0.0, phi_a=0.0):
        """The ball state (6.1) of a disk state (5.1): Lambda of (A.1) is the rotation by
        ``-phi`` about E2, ``Omega = -phi' E2`` (A.2), GC at ``(z, 0)``."""
        theta, thd, phi, phid = self.split(y)
        q = jnp.stack([jnp.cos(phi / 2), 0.0 * phi, -jnp.sin(phi / 2), 0.0 * phi])
        Om = jnp.stack([0.0 * phid, -phid, 0.0 * phid])
        z = jnp.stack([self.gc_position(y, z_a, phi_a), 0.0 * phi])
        return jnp.concatenate([theta, thd, q, Om, z])

    def gc_position(self, y, z_a=0.0, phi_a=0.0):
        """Horizontal GC position ``z = z_a - r (phi - phi_a)`` (Sect. 5)."""
        return z_a - self.radius * (self.split(y)[2] - phi_a)

    def energy(self, y):
        """Kinetic plus potential energy while rolling (planar form of the ball's); on a slope
        the potential counts the distance along the floor from ``x_GC = 0``."""
        theta, thd, phi, phid = self.split(y)
        zeta, zp, _ = self.rail_geometry(theta)
        m = self.all_masses()
        thd1 = jnp.concatenate([jnp.zeros(1), thd])
        r, s, c = self.radius, jnp.sin(phi), jnp.cos(phi)
        # body-frame velocity Omega x s_i + theta' zeta' with Omega = -phi' E2
        S1, S3 = r * s + zeta[:, 0], r * c + zeta[:, 2]
        v1 = -phid * S3 + thd1 * zp[:, 0]
        v3 = phid * S1 + thd1 * zp[:, 2]
        T = 0.5 * self.d2 * phid**2 + 0.5 * m @ (v1**2 + v3**2)
        g_t, g_n = self.gravity()
        x = self.gc_position(y) + zeta[:, 0] * c - zeta[:, 2] * s  # each mass along the floor
        V = g_n * m @ (zeta[:, 0] * s + zeta[:, 2] * c) + g_t * m @ x
        return T + V
