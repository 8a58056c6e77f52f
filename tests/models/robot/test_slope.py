"""The robots on a sloping floor (issue 59): the disk and the ball with ``slope``, checked on
generated slopes, bodies and states against the ball's 3-D equations, the momentum and energy
balances, the closed form of a uniform body rolling down, an independent SciPy Newton-Euler
re-simulation, and the flight phases."""

import dataclasses
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.robot import (
    Ball,
    BallFlight,
    ConstantForce,
    Disk,
    DiskFlight,
    RampControl,
    ball_manoeuvre,
    disk_manoeuvre,
    paper_ball,
    paper_disk,
    simulate,
)
from rollax.analysis.robot.feasibility import necessary_conditions
from rollax.models.robot.quaternion import rotation_matrix

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import ball_robot_reference as reference  # noqa: E402


def _slopes(rng, k, size=0.3):
    """``k`` floor gradients (s1, s2), each within +-``size``, one of them 0 in each slot."""
    S = rng.uniform(-size, size, size=(k, 2))
    S[0, 1] = 0.0
    S[1, 0] = 0.0
    return S


def _random_ball_state(rng, n=3):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return jnp.asarray(
        np.concatenate([rng.normal(size=2 * n), q, rng.normal(size=3), rng.normal(size=2)])
    )


def _ball(rng, slope):
    rails = paper_ball().model.rails
    return Ball(
        radius=1.0,
        m0=float(rng.uniform(0.3, 1.5)),
        inertia=tuple(rng.uniform(0.5, 1.5, size=3)),
        zeta0=tuple(rng.uniform(-0.1, 0.1, size=3)),
        masses=tuple(rng.uniform(0.3, 2.0, size=3)),
        rails=rails,
        g=float(rng.uniform(0.5, 10.0)),
        F_e=ConstantForce(tuple(rng.normal(scale=0.3, size=3))),
        slope=tuple(slope),
    )


def _disk(rng, slope):
    rails = paper_disk().model.rails
    return Disk(
        radius=1.0,
        m0=float(rng.uniform(0.3, 1.5)),
        d2=float(rng.uniform(0.5, 1.5)),
        zeta0=(float(rng.uniform(-0.2, 0.2)), 0.0, float(rng.uniform(-0.2, 0.2))),
        masses=tuple(rng.uniform(0.3, 2.0, size=4)),
        rails=rails,
        g=float(rng.uniform(0.5, 10.0)),
        F_e=ConstantForce((float(rng.normal(scale=0.3)), 0.0, float(rng.normal(scale=0.3)))),
        slope=float(slope),
    )


CTRL3 = RampControl(jnp.array([1.0, -2.0, 0.5]), t_flat=1.0, t_end=2.0)
CTRL4 = RampControl(jnp.array([1.0, -1.0, 2.0, 0.5]), t_flat=1.0, t_end=2.0)


def test_a_level_floor_is_the_default_and_gives_the_same_bits():
    ex = paper_ball()
    assert np.array_equal(ex.model.slope, [0.0, 0.0]) and float(paper_disk().model.slope) == 0.0
    level = dataclasses.replace(ex.model, slope=(0.0, 0.0))
    y = _random_ball_state(np.random.default_rng(0))
    np.testing.assert_array_equal(
        level.vector_field(0.3, y, ex.control), ex.model.vector_field(0.3, y, ex.control)
    )
    np.testing.assert_array_equal(ex.model.gravity(), [0.0, 0.0, float(ex.model.g)])


@pytest.mark.parametrize("seed", range(4))
def test_the_ball_balances_momentum_and_energy_on_a_slope(seed):
    # (2.16) with gravity -G: N e3 + F_h = sum m_i (z_i'' + G) - F_e, and dE/dt = the actuator
    # power, at generated states of generated balls on generated slopes
    rng = np.random.default_rng([59, seed])
    for slope in _slopes(rng, 3):
        ball = _ball(rng, slope)
        f = lambda t, y: ball.vector_field(t, y, CTRL3)  # noqa: E731
        vel = lambda t, y: jax.jvp(ball.mass_positions, (y,), (f(t, y),))[1]  # noqa: E731

        @jax.jit
        def check(t, y, ball=ball, f=f, vel=vel):
            acc = jax.jvp(vel, (t, y), (jnp.ones_like(t), f(t, y)))[1]
            total = ball.all_masses() @ (acc + ball.gravity()) - ball.F_e(t)
            N, F_h = ball.contact_forces(t, y, CTRL3)
            dE = jax.jvp(ball.energy, (y,), (f(t, y),))[1]
            return total, N, F_h, dE, ball.actuator_power(t, y, CTRL3)

        for t in (0.4, 1.5):
            total, N, F_h, dE, P = check(jnp.asarray(t), _random_ball_state(rng))
            np.testing.assert_allclose(total[2], N, rtol=1e-11, atol=1e-11)
            np.testing.assert_allclose(total[:2], F_h, rtol=1e-11, atol=1e-11)
            np.testing.assert_allclose(dE, P, rtol=1e-10, atol=1e-11)
        G = np.asarray(ball.gravity())
        np.testing.assert_allclose(np.linalg.norm(G), float(ball.g), rtol=1e-14)
        np.testing.assert_allclose(G[:2] / G[2], slope, rtol=1e-14, atol=1e-16)


@pytest.mark.parametrize("seed", range(3))
def test_the_disk_on_a_slope_is_the_planar_ball_on_it(seed):
    # Sect. 4 on a slope: the disk's phi'', N and friction equal the 3-D ball's, E2 normal to
    # the plane; its energy rate equals the ball's actuator power
    rng = np.random.default_rng([59, 1, seed])
    for s in rng.uniform(-0.4, 0.4, size=3):
        disk = _disk(rng, s)
        ball = disk.as_ball(d1=float(rng.uniform(0.5, 2)), d3=float(rng.uniform(0.5, 2)))
        for t in (0.3, 1.4):
            y = jnp.asarray(rng.normal(size=2 * 4 + 2))
            yb = disk.ball_state(y, z_a=float(rng.normal()))
            fd = disk.vector_field(t, y, CTRL4)
            fb = ball.vector_field(t, yb, CTRL4)
            np.testing.assert_allclose(fb[2 * 4 + 5], -fd[-1], rtol=1e-12, atol=1e-12)
            Nd, Fd = disk.contact_forces(t, y, CTRL4)
            Nb, Fb = ball.contact_forces(t, yb, CTRL4)
            np.testing.assert_allclose([Nb, *Fb], [Nd, *Fd], rtol=1e-12, atol=1e-12)
            dE = jax.jvp(disk.energy, (y,), (fd,))[1]
            P = ball.actuator_power(t, yb, CTRL4)
            np.testing.assert_allclose(dE, P, rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("seed", range(3))
def test_a_uniform_body_rolls_down_as_the_closed_form_says(seed):
    # no internal masses, CM at the GC: a = g sin(alpha) / (1 + I / (m r^2)) down the slope,
    # N = m g cos(alpha), friction m g sin(alpha) k / (1 + k) up it (k = I / (m r^2))
    rng = np.random.default_rng([59, 2, seed])
    none = RampControl(jnp.zeros(0))
    for _ in range(3):
        m, r, g = rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0), rng.uniform(1.0, 10.0)
        k = rng.uniform(0.2, 1.0)  # I / (m r^2)
        s = rng.uniform(-0.5, 0.5, size=2)
        common = dict(radius=r, m0=m, masses=jnp.zeros(0), rails=(), g=g)
        disk = Disk(d2=k * m * r**2, zeta0=(0.0, 0.0, 0.0), slope=s[0], **common)
        y = disk.initial_state(jnp.zeros(0), phi=rng.normal(), phi_dot=rng.normal())
        sin_a, cos_a = s[0] / math.hypot(1, s[0]), 1 / math.hypot(1, s[0])
        x_dd = -r * float(disk.phi_ddot(0.0, y, none))
        np.testing.assert_allclose(x_dd, -g * sin_a / (1 + k), rtol=1e-13, atol=1e-15)
        N, F = disk.contact_forces(0.0, y, none)
        np.testing.assert_allclose(N, m * g * cos_a, rtol=1e-13)
        np.testing.assert_allclose(F[0], m * g * sin_a * k / (1 + k), rtol=1e-12, atol=1e-15)
        # the ball: isotropic inertia, any direction (s1, s2), any orientation
        ball = Ball(inertia=(k * m * r**2,) * 3, zeta0=(0.0, 0.0, 0.0), slope=tuple(s), **common)
        q = rng.normal(size=4)
        yb = ball.initial_state(jnp.zeros(0), q=q / np.linalg.norm(q), Omega=rng.normal(size=3))
        Omd = ball.vector_field(0.0, yb, none)[4:7]
        w_dot = rotation_matrix(yb[:4]) @ Omd  # spatial (Omega x Omega = 0 in the rotation)
        z_dd = r * np.array([w_dot[1], -w_dot[0]])
        norm = math.sqrt(1 + s @ s)
        np.testing.assert_allclose(z_dd, -g * s / norm / (1 + k), rtol=1e-12, atol=1e-14)
        N, F = ball.contact_forces(0.0, yb, none)
        np.testing.assert_allclose(N, m * g / norm, rtol=1e-13)
        np.testing.assert_allclose(F, m * g * s / norm * k / (1 + k), rtol=1e-12, atol=1e-15)


@pytest.fixture(scope="module")
def sloped_runs():
    """The paper's ball on two slopes, rollax and the SciPy Newton-Euler reference (~2 s)."""
    ex = paper_ball()
    out = []
    for slope in ((0.04, -0.025), (-0.03, 0.05)):
        ball = dataclasses.replace(ex.model, slope=slope)
        tr = simulate(ball, ex.control, ex.y0, 6.0, rtol=ex.rtol, atol=ex.rtol)
        out.append((ball, tr, reference.run(reference.Ball(slope=slope), 6.0)))
    return ex, out


def test_the_sloped_ball_follows_an_independent_scipy_resimulation(sloped_runs):
    ex, runs = sloped_runs
    level = reference.run(reference.Ball(), 6.0).state(6.0)
    for ball, tr, ref in runs:
        for t in (0.15, 1.0, 3.0, 6.0):
            want = ref.state(t)
            np.testing.assert_allclose(np.asarray(tr.state(t)), want, atol=1e-9, err_msg=f"t={t}")
            N, F_h = ball.contact_forces(t, jnp.asarray(want), ex.control)
            N_ref, F_ref = reference.forces(ref.ball, t, want)
            assert abs(float(N) - N_ref) < 1e-10 and np.allclose(F_h, F_ref, atol=1e-10, rtol=0)
        # not vacuous: the slope moves the ball measurably away from the level run
        assert np.max(np.abs(ref.state(6.0)[-2:] - level[-2:])) > 1e-2


@pytest.mark.parametrize("seed", range(2))
def test_flight_on_a_slope_falls_along_minus_g(seed):
    # in flight the CM accelerates by F_e / M - G; the disk's flight is the planar ball's; with
    # frozen masses and no force the flight energy (with the slope's potential) is conserved
    rng = np.random.default_rng([59, 3, seed])
    for slope in _slopes(rng, 2):
        ball = _ball(rng, slope)
        fm = BallFlight(ball)
        f = lambda t, y: fm.vector_field(t, y, CTRL3)  # noqa: E731
        vel = lambda t, y: jax.jvp(fm.cm_position, (y,), (f(t, y),))[1]  # noqa: E731
        q = rng.normal(size=4)
        y = jnp.asarray(
            np.concatenate([rng.normal(size=6), q / np.linalg.norm(q), rng.normal(size=9)])
        )
        acc = jax.jvp(vel, (0.5, y), (1.0, f(0.5, y)))[1]
        np.testing.assert_allclose(acc, ball.F_e(0.5) / ball.total_mass - ball.gravity(),
                                   atol=1e-12)  # fmt: skip
        free = dataclasses.replace(ball, F_e=ConstantForce((0.0, 0.0, 0.0)))
        ff = BallFlight(free)
        yf = y.at[3:6].set(0.0)
        zero = RampControl(jnp.zeros(3))
        dE = jax.jvp(ff.energy, (yf,), (ff.vector_field(0.5, yf, zero),))[1]
        assert abs(float(dE)) < 1e-11
        disk = _disk(rng, slope[0])
        dfl, bfl = DiskFlight(disk), BallFlight(disk.as_ball(d1=0.6, d3=1.7))
        yd = jnp.asarray(rng.normal(size=2 * 4 + 6))
        phdd, a = dfl.accelerations(0.5, yd, CTRL4)
        x, v = dfl.split(yd)[4:]
        yb = jnp.concatenate(
            [disk.ball_state(yd[:10])[:15], jnp.array([x[0], 0.0, x[1], v[0], 0.0, v[1]])]
        )
        Omd, ab = bfl.accelerations(0.5, yb, CTRL4)
        np.testing.assert_allclose(Omd, [0.0, -phdd, 0.0], atol=1e-12)
        np.testing.assert_allclose(ab, [a[0], 0.0, a[1]], atol=1e-12)
        dfree = DiskFlight(dataclasses.replace(disk, F_e=ConstantForce((0.0, 0.0, 0.0))))
        yd0 = yd.at[4:8].set(0.0)
        dE = jax.jvp(
            dfree.energy, (yd0,), (dfree.vector_field(0.5, yd0, RampControl(jnp.zeros(4))),)
        )[1]
        assert abs(float(dE)) < 1e-11


def test_slopes_are_validated_and_the_weight_is_its_normal_part():
    for bad, msg in [
        (dict(slope=(0.1, 0.0)), "slope"),
        (dict(slope=math.nan), "slope"),
    ]:
        with pytest.raises(ValueError, match=msg) as err:
            disk_manoeuvre(**bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="two numbers"):
        ball_manoeuvre(slope=0.1)
    man = disk_manoeuvre(slope=0.2, n_min=0.5)
    W = float(man.model.total_mass) / math.sqrt(1.04)  # g = 1
    np.testing.assert_allclose(float(man.weight), W, rtol=1e-14)
    # N averages M g_n over a rest-to-rest manoeuvre: n_min between M g_n and M g is refused
    over = disk_manoeuvre(T=8.0, slope=0.2, n_min=float(man.model.total_mass) * 0.99)
    (line,) = necessary_conditions(over)
    assert "M g_n" in line and f"{W:.6g}" in line
    assert necessary_conditions(disk_manoeuvre(T=8.0, slope=0.2, n_min=0.98 * W)) == []
    # the friction impulse bound holds with g_n: a steeper floor needs more friction
    mus = []
    for s in (0.0, 0.3, -0.6):
        (line,) = necessary_conditions(disk_manoeuvre(T=5.0, slope=s))
        mus.append(float(line.split("needs mu >= ")[1].split()[0]))
    assert mus[0] < mus[1] < mus[2]
