"""Synthetic filmed bounces of a basketball off the rim or the board -- independent of rollax
(numpy + scipy).

The ball flies under gravity, quadratic drag and the Magnus lift (the spin is constant in
flight), hits the rim (a torus: core circle of radius ``R`` in the rim plane, tube radius
``a``) or the board (the plane ``x = x_b``) once, and flies on. The impact is a rigid-body
impact of a sphere with Newton restitution ``e`` along the normal and Coulomb friction ``mu``
with stick and slip (Routh's construction, written out here again). A record is built around
its contact: the contact point and the incoming velocity and spin are drawn, the flight before
it is integrated backwards and the flight after it forwards by SciPy's DOP853 at 1e-12, and
the draw is kept only if neither flight touches the rim or the board again or falls below the
rim plane. It is sampled as a camera sees it: the ball centre ``(x, y, z)`` (m, the hoop's
frame: origin at the hoop's centre in the rim plane, ``x`` towards the board, ``z`` up) at
``hz`` with Gaussian noise, and where the spin is filmed (a marked ball) the spin vector
(rad/s) with its own noise.

Nothing here uses rollax or JAX: it is the reference that ``rollax identify shot`` is tested
against. ``tests/analysis/test_shot_identify.py`` holds the identification to it.

    import sys; sys.path.insert(0, "tests"); from bounce_records import make_record
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.integrate import solve_ivp

# the rules' geometry and a size-7 ball (as rollax.models.shot, written out again)
R_BALL = 0.1194
MASS = 0.624
J = 2.0 / 3.0
G = 9.81
RHO_AIR = 1.204
C_M = 1.0
RIM_INNER = 0.2286
A_TUBE = 0.008
R_CORE = RIM_INNER + A_TUBE
X_BOARD = RIM_INNER + 0.151
#: parameter ranges of the draws: the rules' bands (restitution) and the assumed ones
E_RIM = (0.583, 0.698)
E_BOARD = (0.825, 0.866)
MU = (0.1, 0.6)
C_D = (0.4, 0.6)


def accel(v, w, c_d):
    k = 0.5 * RHO_AIR * math.pi * R_BALL**2 / MASS
    return (
        np.array([0.0, 0.0, -G])
        - k * c_d * np.linalg.norm(v) * v
        + k * C_M * R_BALL * np.cross(w, v)
    )


def _rhs(c_d, w):
    def f(t, y):
        return np.concatenate([y[3:6], accel(y[3:6], w, c_d)])

    return f


def impact(v, w, n, e, mu):
    """(v', w', stuck) of a sphere hitting at the contact point c - r n (n towards the centre)."""
    u = v - R_BALL * np.cross(w, n)
    u_n = u @ n
    assert u_n < 0
    p_n = -(1 + e) * u_n
    u_t = u - u_n * n
    s = np.linalg.norm(u_t)
    k = 1 + 1 / J
    stuck = s / k <= mu * p_n
    p_t = -u_t / k if stuck else -mu * p_n * u_t / s
    return v + p_n * n + p_t, w - np.cross(n, p_t) / (J * R_BALL), bool(stuck)


def rim_gap(c):
    rho = math.hypot(c[0], c[1])
    return math.hypot(rho - R_CORE, c[2]) - A_TUBE - R_BALL


def board_gap(c):
    # the board's face, wide and high enough for these records (its edges are not drawn)
    return X_BOARD - c[0] - R_BALL


@dataclasses.dataclass
class Record:
    kind: str  # "rim" or "board"
    t: np.ndarray  # (n,) s; the contact at t_contact
    centre: np.ndarray  # (n, 3) m, noisy
    spin: np.ndarray | None  # (n, 3) rad/s, noisy; None: not filmed
    truth: dict  # e, mu, c_d
    y0: np.ndarray  # the true state at t[0]
    t_contact: float
    stuck: bool  # the impact stuck (then mu is bounded below only)
    sigma: float
    sigma_spin: float | None


def _flight(y, t_span, c_d, w, ts):
    sol = solve_ivp(_rhs(c_d, w), t_span, y, method="DOP853", rtol=1e-12, atol=1e-12,
                    t_eval=ts, dense_output=False)  # fmt: skip
    return sol.y.T


def make_record(
    seed: int,
    kind: str = "rim",
    *,
    hz: float | None = None,
    sigma: float | None = None,
    spin_filmed: bool | None = None,
    sigma_spin: float = 1.0,
    params: dict | None = None,
    head_on: bool = False,
) -> Record:
    """A filmed bounce drawn with ``seed``: a camera at ``hz`` (default: drawn from 120-240)
    with noise ``sigma`` m (default: 2-4 mm), the spin filmed or not (default: drawn), and
    the contact parameters drawn from their ranges (``params`` overrides). ``head_on``: a
    board bounce along its normal with no spin (no tangential slip: mu has no effect)."""
    rng = np.random.default_rng([seed, 0 if kind == "rim" else 1, int(head_on)])
    hz = float(rng.choice([120.0, 180.0, 240.0])) if hz is None else hz
    sigma = float(rng.uniform(0.002, 0.004)) if sigma is None else sigma
    spin_filmed = bool(rng.random() < 0.5) if spin_filmed is None else spin_filmed
    e_rng = E_RIM if kind == "rim" else E_BOARD
    truth = dict(e=rng.uniform(*e_rng), mu=rng.uniform(*MU), c_d=rng.uniform(*C_D))
    truth.update(params or {})
    for _ in range(1000):
        if kind == "board":
            y_c = rng.uniform(-0.25, 0.25)
            z_c = rng.uniform(0.15, 0.55)
            c = np.array([X_BOARD - R_BALL, y_c, z_c])
            n = np.array([-1.0, 0.0, 0.0])
            v = np.array([rng.uniform(3.0, 6.0), rng.normal(0, 0.3), rng.uniform(-3.0, 1.5)])
            w = np.array([rng.normal(0, 3), -2 * math.pi * rng.uniform(0, 4), rng.normal(0, 3)])
            if head_on:
                v, w = np.array([rng.uniform(3.0, 6.0), 0.0, 0.0]), np.zeros(3)
        else:
            # the front rim (alpha = -pi/2, towards the shooter) or the back rim (+pi/2)
            alpha = rng.uniform(-0.6, 0.6) + (-0.5 if rng.random() < 0.5 else 0.5) * math.pi
            beta = rng.uniform(0.3, 1.2)  # the centre above the tube's core, towards the hoop
            outward = np.array([math.sin(alpha), -math.cos(alpha), 0.0])  # (as rollax's rim)
            p = R_CORE * outward  # the core circle's point at alpha
            # n from the core point to the centre: up and towards the hoop's centre or away
            side = 1.0 if rng.random() < 0.5 else -1.0
            n = np.array([*(side * math.cos(beta) * outward[:2]), math.sin(beta)])
            c = p + (A_TUBE + R_BALL) * n
            v = np.array([rng.uniform(2.0, 5.0), rng.normal(0, 0.3), rng.uniform(-4.0, -1.5)])
            w = np.array([rng.normal(0, 3), -2 * math.pi * rng.uniform(0, 4), rng.normal(0, 3)])
        if (v - R_BALL * np.cross(w, n)) @ n > -0.8:
            continue  # (not approaching firmly)
        # 0.1-0.2 s either side, and at most 64 samples (one padded size for every record:
        # rollax.identify compiles once per size)
        longest = min(0.2, 31.0 / hz)
        t_pre, t_post = rng.uniform(0.1, longest), rng.uniform(0.1, longest)
        v2, w2, stuck = impact(v, w, n, truth["e"], truth["mu"])
        phase = rng.uniform(0, 1 / hz)
        t = np.arange(-t_pre + phase, t_post, 1 / hz)
        pre_t = t[t < 0][::-1]
        post_t = t[t >= 0]
        y_c = np.concatenate([c, v])
        back = _flight(y_c, (0.0, pre_t[-1]), truth["c_d"], w, pre_t)[::-1]
        fwd = _flight(np.concatenate([c, v2]), (0.0, post_t[-1]), truth["c_d"], w2, post_t)
        # (clear of everything but the contact, from 10 ms either side of it)
        dense_pre = _flight(y_c, (0.0, pre_t[-1]), truth["c_d"], w,
                            np.linspace(-0.01, pre_t[-1], 200))  # fmt: skip
        dense_post = _flight(np.concatenate([c, v2]), (0.0, post_t[-1]), truth["c_d"], w2,
                             np.linspace(0.01, post_t[-1], 200))  # fmt: skip
        ok = all(
            rim_gap(y[:3]) > 1e-3 and board_gap(y[:3]) > 1e-3 and y[2] > -(R_BALL + A_TUBE) + 0.02
            for y in np.concatenate([dense_pre, dense_post])
        )
        if not ok:
            continue
        ys = np.concatenate([back, fwd])
        ws = np.concatenate(
            [np.repeat(w[None], len(pre_t), 0), np.repeat(w2[None], len(post_t), 0)]
        )
        y0 = np.concatenate([back[0], w])
        centre = ys[:, :3] + rng.normal(size=(len(t), 3)) * sigma
        spin = ws + rng.normal(size=ws.shape) * sigma_spin if spin_filmed else None
        return Record(
            kind, t - t[0], centre, spin, truth, y0, -t[0], stuck, sigma,
            sigma_spin if spin_filmed else None,
        )  # fmt: skip
    raise RuntimeError(f"no {kind} bounce found for seed {seed}")


def make_flight(seed: int, n: int = 96) -> Record:
    """A filmed free flight drawn with ``seed``: a three-point shot's first ``n`` frames
    (0.53-0.8 s at 120-180 Hz, clear of the hoop), 2-4 mm noise, ``c_d`` from its range, spin
    not filmed.
    (One frame count for every record: ``rollax.identify`` compiles once per size.)"""
    rng = np.random.default_rng([seed, 7])
    c_d = float(rng.uniform(*C_D))
    hz = float(rng.choice([120.0, 180.0]))
    sigma = float(rng.uniform(0.002, 0.004))
    speed, angle = rng.uniform(8.5, 9.2), math.radians(rng.uniform(45.0, 55.0))
    c = np.array(
        [-6.75 + rng.uniform(-0.2, 0.2), rng.normal(0, 0.1), -0.9 + rng.uniform(-0.2, 0.2)]
    )
    v = speed * np.array([math.cos(angle), 0.0, math.sin(angle)])
    w = np.array([0.0, -2 * math.pi * rng.uniform(0, 3), 0.0])  # backspin
    t = np.arange(n) / hz
    ys = _flight(np.concatenate([c, v]), (0.0, t[-1]), c_d, w, t)
    # (clear of the hoop and the board: 0.8 s of it ends 1 m short of the rim at least)
    assert np.all(ys[:, 0] < -R_CORE - A_TUBE - R_BALL - 0.3), ys[:, 0].max()
    centre = ys[:, :3] + rng.normal(size=(n, 3)) * sigma
    truth = dict(e=math.nan, mu=math.nan, c_d=c_d)
    return Record("flight", t, centre, None, truth, np.concatenate([c, v, w]), math.nan, False,
                  sigma, None)  # fmt: skip
