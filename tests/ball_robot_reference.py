"""The ball robot of Sect. 6 of the ball-robot paper, re-simulated by SciPy -- independent of rollax.

Written from first principles (Newton-Euler), not from the paper's (3.2)-(3.4) and not from
rollax's code: the shell (mass ``m0``, principal moments ``d`` about its CM, CM at ``zeta0`` from
the geometric centre GC in the body frame) and the point masses ``m_i`` on their rails are
particles at body-frame offsets ``s_k`` from the GC. With ``rho_k = s_k + r Gamma`` (the offset
from the contact point, ``Gamma = Lambda^T e3``) and rolling (``a_GC = r Omega' x Gamma`` in the
body frame), the angular momentum balance about the contact point reads

    [I + sum_k m_k (|rho_k|^2 1 - rho_k rho_k^T)] Omega'
        = -Omega x I Omega - sum_k m_k rho_k x (c_k + g Gamma),

``c_k = s_k'' + 2 Omega x s_k' + Omega x (Omega x s_k)`` (body-frame derivatives), and the
contact force is ``F = sum_k m_k a_k + M g Gamma`` with ``a_k = Omega' x rho_k + c_k``:
``N = F . Gamma``, the friction its horizontal part. The rails are (6.8)-(6.10) in the reading
of docs/physics-notes.md (``zeta_i = r_i (cos(theta) n - sin(theta) b1)``, Duff et al.'s basis),
the control (6.11) a ramp, the start (6.12). SciPy's DOP853 integrates it, restarted at the
control's kinks. Nothing here imports rollax or JAX.

A sloping floor (``slope = (s1, s2)``, rise over run along the floor's e1 and e2): gravity is
``-g n`` with ``n = (s1, s2, 1) / |(s1, s2, 1)|`` the vertical in the floor's frame, so every
``g Gamma`` above becomes ``g Lambda^T n``; ``N`` is still ``F . Gamma``.

    import sys; sys.path.insert(0, "tests"); from ball_robot_reference import run
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import minimize_scalar

#: (6.12): theta_a, theta_dot_a, q_a, Omega_a, z_a
X0 = np.array([0, 2.0369, 0.7044, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0], float)
RADII = (0.95, 0.9, 0.85)
RAIL_V = ((0.0, 0.0, 1.0), (math.pi / 2, 0.0, 1.0), (math.pi / 4, math.pi / 4, 1.0))


class Ball(NamedTuple):
    """The Sect. 6 ball; ``heavy()`` is the detaching variant."""

    zeta0: tuple = (0.0, 0.0, -0.05)
    m0: float = 1.0
    masses: tuple = (1.0, 1.0, 1.0)
    d: tuple = (0.9, 1.0, 1.1)
    r: float = 1.0
    g: float = 1.0
    amplitude: float = 1.0  # u_i = amplitude * ramp(t), (6.11)
    t_flat: float = 0.1
    t_end: float = 0.2
    slope: tuple = (0.0, 0.0)

    @staticmethod
    def heavy(**kw) -> Ball:
        return Ball(m0=0.1, masses=(0.1, 0.1, 60.0), **kw)

    def u(self, t) -> float:
        if t <= self.t_flat:
            return self.amplitude
        return self.amplitude * min(max((self.t_end - t) / (self.t_end - self.t_flat), 0.0), 1.0)


def _duff_b1(n):
    s = math.copysign(1.0, n[2])
    a = -1.0 / (s + n[2])
    return np.array([1.0 + s * n[0] ** 2 * a, s * n[0] * n[1] * a, -s * n[0]])


def _rails():
    out = []
    for r, (phi, th, rho) in zip(RADII, RAIL_V):
        n = rho * np.array(
            [math.cos(th) * math.cos(phi), math.cos(th) * math.sin(phi), math.sin(th)]
        )
        out.append((r, n, _duff_b1(n)))
    return out


def _rotation(q):
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _parts(ball: Ball, t, x):
    """``(Omega', Lambda, Gamma, F_body, u)`` at ``(t, x)``."""
    th, thd, q, Om = x[0:3], x[3:6], x[6:10], x[10:13]
    L = _rotation(q)
    Gam = L[2]  # Lambda^T e3
    vertical = np.array([*ball.slope, 1.0])
    up = L.T @ (vertical / np.linalg.norm(vertical))  # Gamma on a level floor
    u = ball.u(t)
    s, sd, sdd = [np.asarray(ball.zeta0, float)], [np.zeros(3)], [np.zeros(3)]
    for i, (ri, n, b1) in enumerate(_rails()):
        c, sn = math.cos(th[i]), math.sin(th[i])
        p = ri * (c * n - sn * b1)
        dp = ri * (-sn * n - c * b1)
        s.append(p)
        sd.append(dp * thd[i])
        sdd.append(-p * thd[i] ** 2 + dp * u)
    s, sd, sdd = np.array(s), np.array(sd), np.array(sdd)
    m = np.array([ball.m0, *ball.masses])
    I = np.diag(ball.d)
    rho = s + ball.r * Gam
    c = sdd + 2 * np.cross(Om, sd) + np.cross(Om, np.cross(Om, s))
    J = I + sum(mk * (rk @ rk * np.eye(3) - np.outer(rk, rk)) for mk, rk in zip(m, rho))
    rhs = -np.cross(Om, I @ Om) - sum(
        mk * np.cross(rk, ck + ball.g * up) for mk, rk, ck in zip(m, rho, c)
    )
    Omd = np.linalg.solve(J, rhs)
    acc = np.cross(Omd, rho) + c
    F = (m[:, None] * acc).sum(0) + m.sum() * ball.g * up
    return Omd, L, Gam, F, u


def rhs(ball: Ball, t, x):
    """dx/dt, x = (theta, theta', q, Omega, z) as (6.1)."""
    thd, q, Om = x[3:6], x[6:10], x[10:13]
    Omd, L, _, _, u = _parts(ball, t, x)
    w, v = q[0], q[1:]
    qd = 0.5 * np.concatenate([[-v @ Om], w * Om + np.cross(v, Om)])
    om = L @ Om
    return np.concatenate([thd, np.full(3, u), qd, Omd, ball.r * np.array([om[1], -om[0]])])


def forces(ball: Ball, t, x):
    """``(N, F_h)``: the normal force and the horizontal contact force (spatial)."""
    _, L, Gam, F, _ = _parts(ball, t, x)
    return float(F @ Gam), (L @ F)[:2]


class Run(NamedTuple):
    ball: Ball
    segments: list  # solve_ivp solutions, one per interval between the control's kinks
    t_detach: float | None

    def state(self, t):
        for s in self.segments:
            if s.t[0] <= t <= s.t[-1]:
                return s.sol(t)
        raise ValueError(f"t = {t} is outside the run")

    def ratio(self, t):
        N, Fh = forces(self.ball, t, self.state(t))
        return float(np.hypot(*Fh) / N)

    def ratio_max_near(self, t, half_width=0.05):
        """The largest f_s/N within ``half_width`` of ``t`` (a bounded local search)."""
        res = minimize_scalar(
            lambda s: -self.ratio(s),
            bounds=(t - half_width, t + half_width),
            method="bounded",
            options=dict(xatol=1e-10),
        )
        return -float(res.fun), float(res.x)


def run(ball: Ball = Ball(), t1: float = 20.0, *, detach=False, rtol=1e-11) -> Run:
    """Integrate from (6.12) to ``t1`` (``detach``: stop where N falls to 0 after the ramp)."""
    x = X0.copy()
    cuts = [0.0] + [k for k in (ball.t_flat, ball.t_end) if k < t1] + [t1]
    segments = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        event = None
        if detach:
            event = lambda t, x: forces(ball, t, x)[0]  # noqa: E731
            event.terminal, event.direction = True, -1
        sol = solve_ivp(
            lambda t, x: rhs(ball, t, x),
            (a, b),
            x,
            method="DOP853",
            rtol=rtol,
            atol=rtol,
            dense_output=True,
            events=event,
        )
        if sol.status == -1:
            raise RuntimeError(sol.message)
        segments.append(sol)
        x = sol.y[:, -1]
        if sol.status == 1:
            return Run(ball, segments, float(sol.t_events[0][0]))
    return Run(ball, segments, None)
