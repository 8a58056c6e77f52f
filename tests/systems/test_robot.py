"""rollax.systems.Robot: roll -> detach -> fly -> land in one rollax.solve call, against the
phase-by-phase functions of rollax.robot (detach, fly, land)."""

import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.robot import BallFlight, RampControl, detach, fly, paper_ball
from rollax.models.robot.examples import BALL_THETA0
from rollax.systems import Robot, RobotOutcome
from rollax.systems.robot import DETACHMENTS, FLYING, LANDINGS, ROLLING

TOL = dict(rtol=1e-10, atol=1e-10)


@pytest.fixture(scope="module")
def spinning():
    # masses frozen above the GC, fast spin: N < 0 at once, the ball flies and lands
    ex = paper_ball()
    ball, zero = ex.model, RampControl(jnp.zeros(3))
    y0 = ball.initial_state(BALL_THETA0, Omega=(3.0, 0.0, 0.5))
    end, lifts, _ = fly(ball, zero, y0, 0.0, 10.0)
    assert bool(lifts) and bool(end.hit)
    return ball, zero, y0, end


def test_ball_flies_and_lands_in_one_call(spinning):
    ball, zero, y0, end = spinning
    robot = Robot(ball, zero)
    t_land = float(end.t)
    before = rollax.solve(robot, robot.from_rolling(y0), 0.0, t_land - 1e-7, **TOL)
    assert int(before.mode) == FLYING and before.status == rollax.Status.T_MAX
    assert int(before.aux[DETACHMENTS]) == 1 and int(before.aux[LANDINGS]) == 0
    after = rollax.solve(robot, robot.from_rolling(y0), 0.0, t_land + 1e-7, **TOL)
    assert int(after.mode) == ROLLING and int(after.aux[LANDINGS]) == 1
    assert int(robot.outcome(after)) == RobotOutcome.ROLLING
    # the state just after touchdown is the landing map's, a rolling step of 1e-7 s later
    landed = robot.from_rolling(BallFlight(ball).land(end.y).y)
    np.testing.assert_allclose(np.asarray(after.y), np.asarray(landed), atol=1e-5)


def test_detachment_time_matches_the_rolling_phase():
    # detaches at t = 3.6095007 (Sect. 6 variant; rollax's and the SciPy re-simulation's value,
    # the paper prints 3.7358: docs/physics-notes.md)
    ex = paper_ball(heavy=True)
    ref = detach(ex.model, ex.control, ex.y0, ex.t1, rtol=1e-10, atol=1e-10)
    assert bool(ref.hit)
    robot = Robot(ex.model, ex.control)
    y0 = robot.from_rolling(ex.y0)
    for dt, n in ((-1e-6, 0), (1e-6, 1)):
        sol = rollax.solve(robot, y0, 0.0, float(ref.t) + dt, **TOL)
        assert int(sol.aux[DETACHMENTS]) == n
