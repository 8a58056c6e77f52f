"""Detachment (N = 0) and free flight (Appendix B)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.robot import (
    Ball,
    BallFlight,
    ConstantForce,
    DiskFlight,
    RampControl,
    detach,
    fly,
    paper_ball,
    paper_disk,
    simulate,
)
from rollax.robot.examples import BALL_THETA0
from rollax.robot.quaternion import rotation_matrix

T_DETACH = 3.6095007  # rollax's value for the heavy example (the paper prints 3.7358)


def _ball(m0=0.7, masses=(1.0, 2.0, 0.5), F=(0.3, -0.2, 0.4)):
    rails = paper_ball().model.rails
    return Ball(radius=1.0, m0=m0, inertia=(0.9, 1.0, 1.1), zeta0=(0.1, 0.02, -0.05),
                masses=masses, rails=rails, g=1.0, F_e=ConstantForce(F))


def _random_flight_state(rng, n=3):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return jnp.concatenate([jnp.asarray(rng.normal(size=2 * n)), jnp.asarray(q),
                            jnp.asarray(rng.normal(size=9))])


def test_heavy_ball_detaches():
    ex = paper_ball(heavy=True)
    end = detach(ex.model, ex.control, ex.y0, ex.t1, rtol=ex.rtol, atol=ex.rtol)
    assert bool(end.hit) and not bool(end.failed)
    assert float(end.t) == pytest.approx(T_DETACH, abs=2e-7)
    N, F_h = ex.model.contact_forces(end.t, end.y, ex.control)
    assert abs(float(N)) < 1e-9 and float(jnp.linalg.norm(F_h)) > 1.0  # N = 0, f_s > 0
    # the rolling motion (continued past t_d) has N > 0 before t_d and changes sign there
    tr = simulate(ex.model, ex.control, ex.y0, ex.t1, rtol=ex.rtol, atol=ex.rtol)
    Ng = tr.forces()[0]
    before = tr.ts < end.t
    assert float(Ng[before].min()) > 0 and float(Ng[~before][0]) < 0
    # with the contact force removed the GC would accelerate downwards: no lift-off
    fl, lifts, _ = fly(ex.model, ex.control, end.y, end.t, end.t + 5.0)
    assert not bool(lifts) and float(fl.t) == pytest.approx(float(end.t))


def test_ball_flight_balance_laws():
    # (B.17): total momentum and angular momentum about the system CM obey Newton's laws
    ball = _ball()
    fm = BallFlight(ball)
    ctrl = RampControl(jnp.array([1.0, -2.0, 0.5]), t_flat=1.0, t_end=2.0)
    f = lambda t, y: fm.vector_field(t, y, ctrl)  # noqa: E731

    def L(y):
        th, thd, q, Om, x, v = fm.split(y)
        Lam = rotation_matrix(q)
        zeta, zp, _ = ball.rail_geometry(th)
        m = ball.all_masses()
        pos = x + zeta @ Lam.T
        vel = v + (jnp.cross(Om, zeta) + jnp.concatenate([jnp.zeros(1), thd])[:, None] * zp) @ Lam.T
        cm = m @ pos / ball.total_mass
        return Lam @ (ball.inertia * Om) + jnp.sum(m[:, None] * jnp.cross(pos - cm, vel), axis=0), x - cm

    @jax.jit
    def check(t, y):
        vel = lambda t, y: jax.jvp(fm.cm_position, (y,), (f(t, y),))[1]  # noqa: E731
        acc = jax.jvp(vel, (t, y), (1.0, f(t, y)))[1]
        dL = jax.jvp(lambda y: L(y)[0], (y,), (f(t, y),))[1]
        return acc, dL, jnp.cross(L(y)[1], ball.F_e(t))

    rng = np.random.default_rng(7)
    for _ in range(3):
        acc, dL, torque = check(0.5, _random_flight_state(rng))
        np.testing.assert_allclose(acc, ball.F_e(0.5) / ball.total_mass - jnp.array([0, 0, 1.0]),
                                   atol=1e-12)
        np.testing.assert_allclose(dL, torque, atol=1e-11)
    # frozen masses, no external force: the energy is conserved
    free = _ball(F=(0.0, 0.0, 0.0))
    fmf = BallFlight(free)
    y = _random_flight_state(rng).at[3:6].set(0.0)
    zero = RampControl(jnp.zeros(3))
    dE = jax.jvp(fmf.energy, (y,), (fmf.vector_field(0.5, y, zero),))[1]
    assert abs(float(dE)) < 1e-12


def test_disk_flight_is_planar_ball_flight():
    # (B.18)-(B.19) against (B.17) on the planar ball
    disk = paper_disk().model
    disk = type(disk)(radius=1.0, m0=0.5, d2=0.8, zeta0=(0.1, 0.0, -0.2), masses=(1.0, 2.0, 0.5, 3.0),
                      rails=disk.rails, g=1.0, F_e=ConstantForce((0.3, 0.0, 0.4)))
    dfl, bfl = DiskFlight(disk), BallFlight(disk.as_ball(d1=0.6, d3=1.7))
    ctrl = RampControl(jnp.array([1.0, -1.0, 2.0, 0.5]), t_flat=1.0, t_end=2.0)
    rng = np.random.default_rng(11)
    for _ in range(3):
        y = jnp.asarray(rng.normal(size=2 * 4 + 6))
        phdd, acc = dfl.accelerations(0.5, y, ctrl)
        yr = disk.ball_state(y[:10])  # [theta, theta', phi, phi'] -> ball state
        x, v = dfl.split(y)[4:]
        yb = jnp.concatenate([yr[:15], jnp.array([x[0], 0.0, x[1], v[0], 0.0, v[1]])])
        Omd, accb = bfl.accelerations(0.5, yb, ctrl)
        np.testing.assert_allclose(Omd, [0.0, -phdd, 0.0], atol=1e-12)
        np.testing.assert_allclose(accb, [acc[0], 0.0, acc[1]], atol=1e-12)


def test_spinning_ball_lifts_off_and_lands():
    # masses frozen above the GC, fast spin: N < 0 at once, the ball flies and lands
    ex = paper_ball()
    ball, zero = ex.model, RampControl(jnp.zeros(3))
    y0 = ball.initial_state(BALL_THETA0, Omega=(3.0, 0.0, 0.5))
    start = detach(ball, zero, y0, ex.t1, rtol=ex.rtol, atol=ex.rtol)
    assert bool(start.hit) and float(start.t) == 0.0
    end, lifts, yf0 = fly(ball, zero, y0, 0.0, 10.0)
    assert bool(lifts) and bool(end.hit)
    fm = BallFlight(ball)
    t = float(end.t)
    assert 0.1 < t < 10.0 and abs(float(fm.height(end.y))) < 1e-9
    assert float(fm.split(end.y)[5][2]) < 0  # coming down
    # ballistic centre of mass and conserved energy over the flight
    c0 = fm.cm_position(yf0)
    v0 = jax.jvp(fm.cm_position, (yf0,), (fm.vector_field(0.0, yf0, zero),))[1]
    np.testing.assert_allclose(fm.cm_position(end.y), c0 + v0 * t - 0.5 * t**2 * jnp.array([0, 0, 1.0]),
                               atol=1e-8)
    assert float(fm.energy(end.y)) == pytest.approx(float(fm.energy(yf0)), rel=1e-9)
