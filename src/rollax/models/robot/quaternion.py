"""Quaternions and versors for the rolling ball's orientation.

Conventions of Putkaradze & Rogers, *On the dynamics of a rolling ball actuated by internal
point masses* (Meccanica 2018), Appendix D: a quaternion is ``[p0, p1, p2, p3]`` with scalar
part first, ``v# = [0, v]`` (D.2), ``p_flat = p[1:]`` (D.3).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float


def qmul(p: Float[Array, "4"], q: Float[Array, "4"]) -> Float[Array, "4"]:
    """Quaternion product ``p q`` (D.7)."""
    p0, pv = p[0], p[1:]
    q0, qv = q[0], q[1:]
    return jnp.concatenate([jnp.array([p0 * q0 - pv @ qv]), p0 * qv + q0 * pv + jnp.cross(pv, qv)])


def qconj(p: Float[Array, "4"]) -> Float[Array, "4"]:
    """Conjugate ``p*`` (D.10)."""
    return p * jnp.array([1.0, -1.0, -1.0, -1.0])


def rotation_matrix(q: Float[Array, "4"]) -> Float[Array, "3 3"]:
    """Rotation matrix Lambda of the versor ``q / |q|`` (D.15).

    The versor is normalised first, so that a small drift of ``|q|`` away from 1 during the
    integration does not leak into the dynamics.
    """
    q = q / jnp.sqrt(q @ q)
    q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
    return jnp.array(
        [
            [1 - 2 * (q2 * q2 + q3 * q3), 2 * (q1 * q2 - q0 * q3), 2 * (q1 * q3 + q0 * q2)],
            [2 * (q1 * q2 + q0 * q3), 1 - 2 * (q1 * q1 + q3 * q3), 2 * (q2 * q3 - q0 * q1)],
            [2 * (q1 * q3 - q0 * q2), 2 * (q2 * q3 + q0 * q1), 1 - 2 * (q1 * q1 + q2 * q2)],
        ]
    )


def versor_rate(
    q: Float[Array, "4"], Omega: Float[Array, "3"], k: float | Float[Array, ""] = 0.0
) -> Float[Array, "4"]:
    """Time derivative of the versor, ``q' = 1/2 q Omega#`` (D.21), (6.4).

    With ``k > 0`` the term ``(k/2)(1 - |q|^2) q`` is added (Baumgarte-type stabilisation of
    the constraint ``|q| = 1`` of the DAE (6.5)): it vanishes on the unit sphere, and off it
    ``d(|q|^2)/dt = k (1 - |q|^2) |q|^2``, so the integrator's norm error decays at rate k
    instead of accumulating.
    """
    Om = jnp.concatenate([jnp.zeros(1), Omega])
    return 0.5 * qmul(q, Om) + 0.5 * k * (1.0 - q @ q) * q


def axis_angle(axis: Float[Array, "3"], angle: float | Float[Array, ""]) -> Float[Array, "4"]:
    """Versor of the rotation by ``angle`` about the unit vector ``axis`` (right-hand rule)."""
    axis = jnp.asarray(axis, dtype=float)
    axis = axis / jnp.linalg.norm(axis)
    return jnp.concatenate([jnp.array([jnp.cos(angle / 2)]), jnp.sin(angle / 2) * axis])
