"""The basketball shot: the ball's flight, the rim and board it may hit, and the impact map.

Frame: the origin is the hoop's centre in the rim plane, ``x`` points from the shooter towards
the backboard, ``z`` up. The rim is a torus: its core circle has radius ``R`` (the rim's inner
radius plus the tube radius ``a``) in the plane ``z = 0``. The backboard is a rectangle in the
plane ``x = x_b`` (its face towards the court), ``w`` wide and ``h`` high, its lower edge
``z_lo`` below the rim plane. The ball (radius ``r``, mass ``m``, moment of inertia
``j m r^2``; a thin shell has ``j = 2/3``) flies with state

    y = (x, y, z, v_x, v_y, v_z, omega_x, omega_y, omega_z)

under gravity, quadratic drag ``-(1/2) rho C_d A |v| v`` and the Magnus lift
``(1/2) rho C_M A r (omega x v)`` (a lift coefficient ``C_M r |omega| / |v|``: proportional to
the spin ratio), ``A = pi r^2``; the spin is constant in flight (the air's torque on a ball is
small over a shot's second: neglected, and stated).

Contact with the rim or the board is where the exact distance from the ball's centre to the
torus's core circle, or to the board's rectangle, equals ``r + a`` or ``r``
(:func:`rim_gap`, :func:`board_gap`). An impact (:func:`impact`) is a rigid-body impact of a
sphere at one contact point with Newton restitution ``e`` in the normal direction and Coulomb
friction ``mu`` in the tangential plane, with stick and slip (Routh's construction). For a
sphere the tangential contact velocity changes by ``(1 + 1/j) P_t / m`` under a tangential
impulse ``P_t`` and is independent of the normal impulse, so its direction does not change
during the impact: the contact either slides throughout (``P_t = -mu P_n`` along the slip) or
stops sliding and sticks (``P_t = -m u_t / (1 + 1/j)``), whichever needs the smaller impulse;
``P_n = -(1 + e) m u_n`` (Newton's and Poisson's restitution agree here). Every impulse acts at
the contact point, so the angular momentum about it is conserved; with ``e = 1`` and
``mu = 0`` so is the energy.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

# Geometry from the rules (FIBA / NBA): rim 3.048 m above the floor (10 ft), inner diameter
# 0.4572 m (18 in), tube 0.016 m thick (5/8 in); the board's face 0.151 m behind the rim's inner
# edge (6 in), 1.83 m x 1.07 m (72 in x 42 in), its lower edge 0.15 m below the rim plane.
RIM_HEIGHT = 3.048
RIM_INNER_RADIUS = 0.2286
RIM_TUBE_RADIUS = 0.008
BOARD_OFFSET = 0.151
BOARD_WIDTH = 1.83
BOARD_HEIGHT = 1.07
BOARD_BELOW_RIM = 0.15
# A size-7 ball: circumference 0.749-0.78 m (29.5-30.7 in), 0.567-0.650 kg; a thin shell
BALL_RADIUS = 0.1194
BALL_MASS = 0.624
BALL_J = 2.0 / 3.0
# Air at 20 C; drag and Magnus coefficients of a basketball in the range of shots (Reynolds
# number about 2e5): C_d about 0.5 and a lift coefficient about equal to the spin ratio
# r |omega| / |v| at the spin ratios of shots (order-of-magnitude values of the shot literature,
# Okubo & Hubbard 2006; defaults to override with measured ones)
AIR_DENSITY = 1.204
DRAG_COEFFICIENT = 0.5
MAGNUS_COEFFICIENT = 1.0
GRAVITY = 9.81


def rim_gap(c, R, a, r):
    """Distance from the ball's surface to the rim's surface: ``|c - p| - a - r`` with ``p`` the
    point of the rim's core circle (radius ``R`` in ``z = 0``) nearest to the centre ``c``."""
    rho = jnp.sqrt(c[0] ** 2 + c[1] ** 2)
    return jnp.sqrt((rho - R) ** 2 + c[2] ** 2) - a - r


def rim_normal(c, R):
    """The unit normal of a rim contact, from the core circle's nearest point to the centre."""
    rho = jnp.sqrt(c[0] ** 2 + c[1] ** 2)
    safe = jnp.where(rho > 0, rho, 1.0)
    p = jnp.stack([R * c[0] / safe, R * c[1] / safe, jnp.zeros_like(c[2])])
    d = c - p
    return d / jnp.linalg.norm(d)


def board_point(c, x_b, w, z_lo, z_hi):
    """The point of the board's rectangle nearest to ``c``."""
    return jnp.stack(
        [
            jnp.full_like(c[0], x_b),
            jnp.clip(c[1], -w / 2, w / 2),
            jnp.clip(c[2], z_lo, z_hi),
        ]
    )


def board_gap(c, x_b, w, z_lo, z_hi, r):
    """Distance from the ball's surface to the board (a rectangle of zero thickness)."""
    return jnp.linalg.norm(c - board_point(c, x_b, w, z_lo, z_hi)) - r


def board_normal(c, x_b, w, z_lo, z_hi):
    """The unit normal of a board contact, from the nearest point of the board to the centre
    (``-x`` on its face, oblique at an edge)."""
    d = c - board_point(c, x_b, w, z_lo, z_hi)
    return d / jnp.linalg.norm(d)


def acceleration(v, omega, r, m, g, rho_air, c_d, c_m):
    """The centre's acceleration in flight: gravity, quadratic drag and the Magnus lift."""
    area = math.pi * r**2
    k = 0.5 * rho_air * area / m
    speed = jnp.sqrt(jnp.sum(v**2))
    lift = jnp.cross(omega, v)
    return (
        jnp.stack([0.0 * v[0], 0.0 * v[1], -g + 0.0 * v[2]])
        - k * c_d * speed * v
        + (k * c_m * r * lift)
    )


def impact(v, omega, n, e, mu, r, j):
    """Velocity and spin after an impact at the contact point ``c - r n`` (``n``: the unit
    normal pointing to the ball's centre) with restitution ``e`` and friction ``mu``; returns
    ``(v', omega', P_n / m, stuck)``. Unchanged if the contact point is not approaching.

    With ``u = v - r (omega x n)`` the contact point's velocity, ``u_n = u . n < 0`` and
    ``u_t = u - u_n n``: ``P_n / m = -(1 + e) u_n``; sticking needs
    ``|u_t| / (1 + 1/j) <= mu P_n / m``, then ``P_t / m = -u_t / (1 + 1/j)``, else
    ``P_t / m = -mu (P_n / m) u_t / |u_t|``; ``v' = v + (P_n n + P_t) / m`` and
    ``omega' = omega - n x P_t / (j m r)``."""
    u = v - r * jnp.cross(omega, n)
    u_n = jnp.dot(u, n)
    approach = u_n < 0
    p_n = jnp.where(approach, -(1.0 + e) * u_n, 0.0)
    u_t = u - u_n * n
    s = jnp.sqrt(jnp.sum(u_t**2))
    k = 1.0 + 1.0 / j
    stick_need = s / k
    stuck = stick_need <= mu * p_n
    safe = jnp.where(s > 0, s, 1.0)
    p_t = jnp.where(stuck, -u_t / k, -mu * p_n * u_t / safe)
    p_t = jnp.where(approach, p_t, 0.0 * p_t)
    v2 = v + p_n * n + p_t
    omega2 = omega - jnp.cross(n, p_t) / (j * r)
    return v2, omega2, p_n, stuck & approach


def release_state(
    distance, height, speed, angle, spin: Any = 0.0, lateral: Any = 0.0, rim_height=RIM_HEIGHT
):
    """The flight state of a release ``distance`` (m) in front of the hoop's centre at
    ``height`` (m, above the floor), ``speed`` (m/s) at ``angle`` (rad) above the horizontal,
    ``lateral`` (rad) to the left of the line to the hoop, and backspin ``spin`` (rad/s; the
    top of the ball turning back towards the shooter)."""
    cl, sl = jnp.cos(lateral), jnp.sin(lateral)
    ca, sa = jnp.cos(angle), jnp.sin(angle)
    v = jnp.stack([speed * ca * cl, speed * ca * sl, speed * sa])
    # backspin: omega along -(z x v_horizontal)/|.| = the horizontal axis to the shooter's left
    # turned negative: the top moves against the flight
    omega = spin * jnp.stack([sl, -cl, 0.0 * sl])
    c = jnp.stack([-distance + 0.0 * speed, 0.0 * speed, height - rim_height + 0.0 * speed])
    return jnp.concatenate([c, v, omega])
