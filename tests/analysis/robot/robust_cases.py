"""Generated robust-control cases (issue 59): manoeuvres of the disk and the ball with a nominal
friction coefficient and an uncertainty of a drawn size, from fixed seeds."""

from __future__ import annotations

import math

import numpy as np

from rollax.robot import ball_manoeuvre, disk_manoeuvre


def robust_case(seed: int, body: str, slope: bool = False):
    """``(manoeuvre, uncertain)``: the disk turned by -0.6..-1.1 pi in T = 7..10 or the ball
    moved 0.5..1.2 r in a random direction in T = 6..9, mu 0.22..0.35 and N >= 0.5; the
    uncertain mu +-10..25 % and masses +-1..4 % (the ball's rails too, +-0.5..2 %). ``slope``:
    the disk's floor slopes by -0.03..0.03 (the ball's is level), and the slope is uncertain
    too, +-0.005..0.02 about it (each of the ball's two components). (The robust SQP does not
    yet answer every sloping case: see docs/guide/robot_robust.md.)"""
    rng = np.random.default_rng([59, seed, 0 if body == "disk" else 1])
    mu = float(rng.uniform(0.22, 0.35))
    uncertain: dict = {
        "mu": float(rng.uniform(0.10, 0.25)),
        "masses": float(rng.uniform(0.01, 0.04)),
    }
    if body == "disk":
        man = disk_manoeuvre(
            phi_T=-math.pi * float(rng.uniform(0.6, 1.1)), T=float(rng.uniform(7.0, 10.0)),
            mu=mu, n_min=0.5, slope=float(rng.uniform(-0.03, 0.03)) if slope else 0.0,
        )  # fmt: skip
    else:
        r, a = float(rng.uniform(0.5, 1.2)), float(rng.uniform(0, 2 * math.pi))
        man = ball_manoeuvre(
            target=(r * math.cos(a), r * math.sin(a)), T=float(rng.uniform(6.0, 9.0)), mu=mu,
            n_min=0.5,
        )  # fmt: skip
        uncertain["rails"] = float(rng.uniform(0.005, 0.02))
    if slope:
        s0, w = float(np.ravel(man.model.slope)[0]), float(rng.uniform(0.005, 0.02))
        uncertain["slope"] = (s0 - w, s0 + w)
    return man, uncertain
