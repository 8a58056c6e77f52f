"""The gradient-based features rerun on cases whose runs end at t1 with events declared
(issue 41): rollax.identify on a hybrid system, the robot's reverse-mode derivatives (the
optimiser's constraints, the hybrid Robot), the sliding disc of the friction fits."""

from __future__ import annotations

import sys
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gradcheck import assert_finite_gradients  # noqa: E402
from bouncing_ball import BouncingBall  # noqa: E402


@pytest.mark.slow  # 70-145 s: a whole hybrid identification; hybrid gradients stay in CI (test_solve_gradients)
def test_identify_hybrid_record_ending_between_impacts():
    # heights of a bouncing ball up to a time between its 2nd and 3rd impacts: the model's
    # run ends at t1 with its impact event declared (the fit's Jacobian is forward mode; the
    # gradient of its cost, reverse mode, must be finite and agree)
    true = BouncingBall(g=9.81, e=0.75, n_bounces=50)
    times = true.impact_times(1.0, 3)
    t1 = times[1] + 0.6 * (times[2] - times[1])
    t = np.linspace(0.0, t1, 160)
    sol = rollax.solve(
        true, jnp.array([1.0, 0.0]), 0.0, t1, ts=jnp.asarray(t), rtol=1e-12, atol=1e-12
    )
    z = np.asarray(sol.ys[:, 0]) + 1e-3 * np.random.default_rng(3).normal(size=t.shape)
    obs = rollax.Observations(t, z, lambda s, t_, y: y[:1], ("z",), sigma=1e-3)
    start = BouncingBall(g=9.5, e=0.7, n_bounces=50)
    fit = rollax.identify(start, obs, ["e", "g"], y0=jnp.array([1.02, 0.0]), fit_y0=("z",))
    assert np.all(np.isfinite(fit.std_errors))
    for name, value in (("e", 0.75), ("g", 9.81), ("y0.z", 1.0)):
        v, se = fit[name]
        assert abs(v - value) < 4 * se, (name, v, se)

    def cost(p, adjoint=None):
        s = rollax.solve(
            BouncingBall(g=p[1], e=p[0], n_bounces=50),
            jnp.array([1.0, 0.0]),
            0.0,
            t1,
            ts=jnp.asarray(t),
            rtol=1e-10,
            atol=1e-10,
            adjoint=adjoint,
        )
        return jnp.sum((s.ys[:, 0] - jnp.asarray(z)) ** 2)

    g_rev = jax.grad(cost)(jnp.array([0.72, 9.7]))
    assert_finite_gradients(g_rev)
    g_fwd = jax.jacfwd(lambda p: cost(p, diffrax.ForwardMode()))(jnp.array([0.72, 9.7]))
    np.testing.assert_allclose(np.asarray(g_rev), np.asarray(g_fwd), rtol=1e-7)


@pytest.mark.slow  # 205 s on 2 cores: the hybrid robot compiled for jacrev and jacfwd
def test_robot_hybrid_run_to_t1_reverse_equals_forward():
    # the disk robot rolls through its ramp control (kinks at 0.1, 0.2 s) and is still rolling
    # at t1: the detach and touchdown events are declared and never fire
    from rollax.robot import RampControl, paper_disk
    from rollax.systems import Robot

    ex = paper_disk()

    def final(a, adjoint=None):
        robot = Robot(ex.model, RampControl(a))
        sol = rollax.solve(
            robot, robot.from_rolling(ex.y0), 0.0, 0.5, rtol=1e-10, atol=1e-10, adjoint=adjoint
        )
        return sol.y

    a = jnp.array([-1.0, 1.0, -1.0, 1.0]) * 0.8
    assert (
        int(
            rollax.solve(
                Robot(ex.model, RampControl(a)),
                Robot(ex.model, RampControl(a)).from_rolling(ex.y0),
                0.0,
                0.5,
            ).status
        )
        == rollax.Status.T_MAX
    )
    rev = jax.jacrev(final)(a)
    assert_finite_gradients(rev)
    fwd = jax.jacfwd(lambda x: final(x, diffrax.ForwardMode()))(a)
    np.testing.assert_allclose(np.asarray(rev), np.asarray(fwd), atol=1e-8, rtol=1e-7)
    assert float(jnp.max(jnp.abs(rev))) > 1e-3


@pytest.mark.slow  # (134 s on a slow day here; CI budget, stop 66)
def test_sliding_disc_record_to_t1_reverse_equals_forward():
    # the slide-and-spin record of rollax.analysis.identification.fit_slide, cut before the stop: the
    # stop event is declared and does not fire; d(state)/d(mu, initial slip) both ways
    from rollax.friction import exact_law
    from rollax.models.friction.sliding import SlidingBody
    from rollax.systems.friction import Sliding

    def final(p, adjoint=None):
        body = SlidingBody(
            exact_law("uniform", mu=p[0], P=9.81, R=0.05), m=1.0, j=0.5, R_bar=0.1, kind="disc"
        )
        sol = rollax.solve(
            Sliding(body),
            jnp.stack([p[1], 0.0, p[2]]),
            0.0,
            0.05,
            rtol=1e-10,
            atol=1e-10,
            adjoint=adjoint,
        )
        return jnp.concatenate([sol.y, sol.t[None]])

    p = jnp.array([0.3, 1.0, 0.5])
    body = SlidingBody(exact_law("uniform", mu=0.3, P=9.81, R=0.05), m=1.0, j=0.5, R_bar=0.1)
    assert (
        int(rollax.solve(Sliding(body), jnp.array([1.0, 0.0, 0.5]), 0.0, 0.05).status)
        == rollax.Status.T_MAX
    )
    rev = jax.jacrev(final)(p)
    assert_finite_gradients(rev)
    fwd = jax.jacfwd(lambda x: final(x, diffrax.ForwardMode()))(p)
    np.testing.assert_allclose(np.asarray(rev), np.asarray(fwd), atol=1e-9, rtol=1e-8)
    assert float(jnp.abs(rev[0, 0])) > 1e-3  # mu moves the slip


def test_friction_fit_loss_gradient_is_finite():
    # rollax.analysis.friction_fit's disc identification: its loss, through the solver to the last
    # sample time, has a finite gradient
    from rollax.analysis.friction_fit import constrained_harmonic, disc_trajectory
    from rollax.models.friction.sliding import SlidingBody

    ts = jnp.linspace(0.0, 0.3, 7)

    def loss(mu):
        body = SlidingBody(constrained_harmonic(mu, jnp.zeros(1), jnp.zeros(1)))
        return jnp.sum(disc_trajectory(body, jnp.array([1.0, 0.0, 0.5]), ts) ** 2)

    assert_finite_gradients(jax.grad(loss)(0.4))
