"""The paper's three examples (Putkaradze & Rogers, Sects. 5 and 6), ready to simulate."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from rollax.models.robot.ball import Ball
from rollax.models.robot.controls import RampControl
from rollax.models.robot.disk import Disk
from rollax.models.robot.rails import CircleRail, circle_from_spherical

#: Initial rail angles of the ball example (Table 6.2).
BALL_THETA0 = (0.0, 2.0369, 0.7044)
#: Spherical coordinates (phi, theta, rho) of the ball's rail normals (6.10).
BALL_RAIL_V = ((0.0, 0.0, 1.0), (np.pi / 2, 0.0, 1.0), (np.pi / 4, np.pi / 4, 1.0))


class Example(NamedTuple):
    """A model with its control, initial state, final time and the paper's tolerance."""

    model: Ball | Disk
    control: RampControl
    y0: jnp.ndarray
    t1: float
    rtol: float


def paper_disk() -> Example:
    """Sect. 5: m0 = 1, r = 1, d2 = 1, zeta0 = 0; four unit masses on concentric circles of
    radii 0.9, 0.6333.., 0.3666.., 0.1 (5.4), accelerations (5.5), state (5.6), g = 1, [0, 20],
    tolerances 1e-12. The paper reports mu_hat = 0.2951."""
    radii = (0.9, 0.6 + 1 / 30, 0.3 + 2 / 30, 0.1)
    disk = Disk(
        radius=1.0,
        m0=1.0,
        d2=1.0,
        zeta0=jnp.zeros(3),
        masses=jnp.ones(4),
        rails=tuple(CircleRail(r) for r in radii),
        g=1.0,
    )
    control = RampControl(jnp.array([(-1.0) ** i for i in range(1, 5)]))
    return Example(disk, control, disk.initial_state([-np.pi / 2] * 4), 20.0, 1e-12)


def paper_ball(heavy: bool = False) -> Example:
    """Sect. 6: m0 = 1, r = 1, (d1, d2, d3) = (0.9, 1, 1.1), zeta0 = (0, 0, -0.05); three unit
    masses on circles of radii 0.95, 0.9, 0.85 (6.8)-(6.10), accelerations (6.11), state (6.12),
    g = 1, [0, 20], tolerances 1e-10. The paper reports mu_hat = 0.19.

    ``heavy=True``: the detaching variant with m0 = m1 = m2 = 0.1 and m3 = 60."""
    rails = tuple(circle_from_spherical(r, v) for r, v in zip((0.95, 0.9, 0.85), BALL_RAIL_V))
    m0, masses = (0.1, (0.1, 0.1, 60.0)) if heavy else (1.0, (1.0, 1.0, 1.0))
    ball = Ball(
        radius=1.0,
        m0=m0,
        inertia=jnp.array([0.9, 1.0, 1.1]),
        zeta0=jnp.array([0.0, 0.0, -0.05]),
        masses=jnp.array(masses),
        rails=rails,
        g=1.0,
    )
    control = RampControl(jnp.ones(3))
    return Example(ball, control, ball.initial_state(BALL_THETA0), 20.0, 1e-10)
