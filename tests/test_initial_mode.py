"""The initial-mode hook: a hybrid system chooses its starting mode from the state
(``AbstractSystem.initial_mode``) whenever a call gives none, in rollax.solve,
rollax.solve_ensemble (both backends) and rollax.sweep. Checked on a stick-slip block written
against the public API, whose stop time and position have a closed form, over a distribution
of pushes, friction coefficients and starting speeds (fixed seed)."""

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

G = 9.81


class Block(rollax.AbstractSystem):
    """A block on a floor pushed by a constant force per unit mass ``F`` (m/s^2), with static
    and kinetic friction ``mu_s >= mu_k``. Modes: stick (v' = 0) and slip (v' = F - mu_k g
    sign(v)). Slipping, it stops when v reaches 0 and then sticks if |F| <= mu_s g; sticking,
    it breaks away when |F| > mu_s g (never, for these pushes)."""

    F: jax.Array = rollax.parameter(1.0)
    mu_s: jax.Array = rollax.parameter(0.5)
    mu_k: jax.Array = rollax.parameter(0.3)

    state_names = ("x", "v")
    modes = ("stick", "slip")
    events = (rollax.boundary("stops"), rollax.boundary("breaks"))

    def vector_field(self, t, y, mode):
        a = jnp.where(mode == 1, self.F - self.mu_k * G * jnp.sign(y[1]), 0.0)
        return jnp.stack([jnp.where(mode == 1, y[1], 0.0), a])

    def event_values(self, t, y, mode):
        # slipping: valid while v keeps the sign it started with (here v > 0); sticking: valid
        # while the push is below the static limit
        return jnp.stack(
            [
                jnp.where(mode == 1, y[1], 1.0),
                jnp.where(mode == 0, self.mu_s * G - jnp.abs(self.F), 1.0),
            ]
        )

    def reset(self, t, y, mode, aux, event):
        stuck = jnp.abs(self.F) <= self.mu_s * G
        new_mode = jnp.where(event == 0, jnp.where(stuck, 0, 1), 1)
        return t, y.at[1].set(0.0), new_mode, aux, jnp.asarray(False)

    def initial_mode(self, t0, y0):
        moving = y0[1] != 0
        return jnp.where(moving | (jnp.abs(self.F) > self.mu_s * G), 1, 0)


def _cases(n=10, seed=11):
    rng = np.random.default_rng(seed)
    mu_k = rng.uniform(0.2, 0.6, n)
    mu_s = mu_k + rng.uniform(0.0, 0.3, n)
    F = rng.uniform(0.0, 0.9, n) * mu_k * G  # decelerating while slipping, then stuck
    v0 = np.where(rng.uniform(size=n) < 0.3, 0.0, rng.uniform(0.5, 4.0, n))
    x0 = rng.uniform(-1, 1, n)
    return F, mu_s, mu_k, x0, v0


def _closed_form(F, mu_k, x0, v0):
    dec = mu_k * G - F  # > 0
    t_stop = v0 / dec
    return t_stop, x0 + v0 * t_stop - 0.5 * dec * t_stop**2


def test_the_hook_picks_the_mode_the_closed_form_needs_in_every_integrator():
    F, mu_s, mu_k, x0, v0 = _cases()
    t1 = 10.0
    t_stop, x_end = _closed_form(F, mu_k, x0, v0)
    assert np.all(t_stop < t1)
    y0s = np.stack([x0, v0], axis=1)
    tol = dict(rtol=1e-11, atol=1e-11)
    for i in range(len(F)):
        block = Block(F=F[i], mu_s=mu_s[i], mu_k=mu_k[i])
        sol = rollax.solve(block, jnp.asarray(y0s[i]), 0.0, t1, **tol)
        assert sol.status_name == "T_MAX"
        assert int(sol.mode) == 0  # stuck at the end
        assert float(sol.y[0]) == pytest.approx(x_end[i], abs=1e-8)
        assert int(sol.resets) == (1 if v0[i] > 0 else 0)
        # the stop time: the run ended at the reset there (a start at rest never slipped)
        if v0[i] > 0:
            short = rollax.solve(block, jnp.asarray(y0s[i]), 0.0, t_stop[i] * (1 - 1e-9), **tol)
            assert int(short.mode) == 1 and float(short.y[1]) > 0
    blocks = Block(F=jnp.asarray(F), mu_s=jnp.asarray(mu_s), mu_k=jnp.asarray(mu_k))
    for backend in ("queue", "fused"):
        ens = rollax.solve_ensemble(blocks, y0s, 0.0, t1, backend=backend, **tol)
        np.testing.assert_array_equal(ens.mode, 0)
        np.testing.assert_allclose(ens.y[:, 0], x_end, atol=1e-8)
        np.testing.assert_array_equal(ens.resets, (v0 > 0).astype(int))


def test_an_explicit_mode_still_wins_and_the_wrong_one_gives_other_physics():
    # the pitfall the hook removes: started 'stick' with v0 > 0 the block keeps its speed
    # and never stops (v' = 0 there); the hook starts it slipping
    block = Block(F=1.0, mu_s=0.5, mu_k=0.3)
    y0 = jnp.array([0.0, 2.0])
    wrong = rollax.solve(block, y0, 0.0, 3.0, mode="stick")
    right = rollax.solve(block, y0, 0.0, 3.0)
    assert float(wrong.y[1]) == 2.0 and int(wrong.mode) == 0
    t_stop, x_end = _closed_form(1.0, 0.3, 0.0, 2.0)
    assert float(right.y[0]) == pytest.approx(x_end, abs=1e-8) and float(right.y[1]) == 0.0


def test_a_hook_returning_a_mode_the_system_lacks_is_refused():
    class Bad(Block):
        def initial_mode(self, t0, y0):
            return jnp.int32(5)

    with pytest.raises(
        ValueError,
        match=r"initial_mode returned 5 for start 0; it must be an "
        r"index of \['stick', 'slip'\]",
    ):
        rollax.solve_ensemble(Bad(), np.array([[0.0, 1.0]]), 0.0, 1.0)
    with pytest.raises(
        ValueError,
        match=r"initial_mode returned 5; it must be an index of "
        r"\['stick', 'slip'\]",
    ):
        rollax.solve(Bad(), jnp.array([0.0, 1.0]), 0.0, 1.0)


def test_systems_without_a_hook_start_in_mode_0_as_before():
    from bouncing_ball import BouncingBall

    assert int(BouncingBall().initial_mode(0.0, jnp.array([1.0, 0.0]))) == 0
    assert math.isclose(float(Block().initial_mode(0.0, jnp.array([0.0, 1.0]))), 1)


def test_the_slipping_rim_starts_slipping_from_a_state_with_a_slip_velocity():
    # with no mode given, a start with (u1, u3) != 0 runs as the explicit 'slipping' does,
    # and one without as 'rolling' (generated starts, fixed seed)
    from rollax.models.rim import Rim
    from rollax.systems import RimSlipping

    rs = RimSlipping(Rim(mu=1.0))
    rng = np.random.default_rng(4)
    n = 6
    y0s = np.stack(
        [
            rng.uniform(1.0, 1.3, n),
            rng.uniform(-1, 1, n),
            rng.uniform(30, 40, n),
            rng.uniform(8, 12, n),
            np.where(np.arange(n) % 2, 0.0, 0.05),
            np.where(np.arange(n) % 2, 0.0, -0.03),
        ],
        axis=1,
    )
    want = np.where(np.arange(n) % 2, 0, 1)  # rolling, slipping
    np.testing.assert_array_equal([int(rs.initial_mode(0.0, jnp.asarray(y))) for y in y0s], want)
    tol = dict(rtol=1e-9, atol=1e-9, lanes=16)
    auto = rollax.solve_ensemble(rs, y0s, 0.0, 2.0, **tol)
    given = rollax.solve_ensemble(rs, y0s, 0.0, 2.0, mode=want, **tol)
    for f in ("status", "event", "mode", "steps", "resets"):
        np.testing.assert_array_equal(getattr(auto, f), getattr(given, f))
    np.testing.assert_array_equal(auto.t, given.t)
