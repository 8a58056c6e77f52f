"""Event histories (``save_events=K``): every event a run had, from one call of rollax.solve,
rollax.solve_ensemble (both backends) and rollax.sweep, checked against closed forms over
distributions of cases (fixed seeds):

* the bouncing ball (examples/bouncing_ball.py): the k-th impact time
  t_k = T0 (1 + 2 (e + ... + e^(k-1))), T0 = sqrt(2 z0 / g), the velocity before and after
  each impact, and d t_k / d e by reverse mode;
* a stick-slip block (mode switches): the stop time and place, the modes before and after;
* a system without a reset map: its one terminal event;
* fewer rows than events: the first K kept, the rest counted (``overflow``).
"""

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import rollax

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bouncing_ball import BouncingBall  # noqa: E402
from oscillator import Oscillator  # noqa: E402
from test_initial_mode import G, Block, _closed_form  # noqa: E402

TOL = dict(rtol=1e-11, atol=1e-11)


def _balls(n=6, seed=3):
    rng = np.random.default_rng(seed)
    return (
        rng.uniform(0.3, 2.5, n),
        rng.uniform(0.4, 0.95, n),
        rng.uniform(7.0, 12.0, n),
        rng.choice([3, 5], n),
    )  # two bounce counts: each is a compile


def _impacts(z0, e, g, k):
    T0 = math.sqrt(2 * z0 / g)
    return np.array([T0 * (1 + 2 * sum(e**i for i in range(1, m))) for m in range(1, k + 1)])


def _check_ball_log(log, z0, e, g, n_b, K):
    ref = _impacts(z0, e, g, n_b)
    kept = min(K, n_b)
    np.testing.assert_allclose(log.t[:kept], ref[:kept], rtol=0, atol=1e-9)
    assert int(log.n) == n_b and bool(log.overflow) == (n_b > K)
    assert np.all(np.asarray(log.event[:kept]) == 0)
    # speeds before and after each impact: v_k- = -sqrt(2 g z0) e^(k-1), v_k+ = -e v_k-
    v_before = -math.sqrt(2 * g * z0) * e ** np.arange(kept)
    np.testing.assert_allclose(log.y[:kept, 1], v_before, rtol=1e-8)
    np.testing.assert_allclose(log.y_after[:kept, 1], -e * v_before, rtol=1e-8)
    np.testing.assert_allclose(log.y[:kept, 0], 0.0, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(log.t_after[:kept]), np.asarray(log.t[:kept]))
    # rows past the events: nan and -1
    assert np.all(np.isnan(np.asarray(log.t[kept:])))
    assert np.all(np.asarray(log.event[kept:]) == -1)
    assert np.all(np.asarray(log.mode_after[kept:]) == -1)


def test_every_impact_of_the_bouncing_ball_from_one_solve():
    for i, (z0, e, g, n_b) in enumerate(zip(*_balls())):
        ball = BouncingBall(e=float(e), g=float(g), n_bounces=int(n_b))
        # each (n_bounces, K) is a compile: fewer rows than events, exactly as many, more
        for K in (2, int(n_b)) if i else (2, int(n_b), 7):
            sol = rollax.solve(ball, jnp.array([z0, 0.0]), 0.0, 60.0, save_events=K, **TOL)
            assert sol.events.t.shape == (K,) and sol.events.y.shape == (K, 2)
            _check_ball_log(sol.events, z0, e, g, int(n_b), K)
            # the last kept row of a run that kept them all is its terminal event
            if K >= n_b:
                assert float(sol.events.t[n_b - 1]) == pytest.approx(float(sol.t), abs=1e-12)


@pytest.mark.parametrize("backend", ["queue", "fused"])
def test_every_impact_from_one_solve_ensemble(backend):
    z0, e, g, _ = _balls(n=12, seed=5)
    n_b, K = 5, 7
    # per-start restitution and gravity: each start its own closed form
    ball = BouncingBall(e=jnp.asarray(e), g=jnp.asarray(g), n_bounces=n_b)
    y0s = np.stack([z0, np.zeros_like(z0)], 1)
    sol = rollax.solve_ensemble(ball, y0s, 0.0, 60.0, save_events=K, backend=backend, **TOL)
    assert sol.events.t.shape == (12, K) and sol.aux.shape == (12, ball.n_aux)
    for i in range(12):
        _check_ball_log(jax.tree.map(lambda x: x[i], sol.events), z0[i], e[i], g[i], n_b, K)
    # the same records as rollax.solve, start by start
    for i in (0, 7):
        one = rollax.solve(
            BouncingBall(e=float(e[i]), g=float(g[i]), n_bounces=n_b),
            jnp.asarray(y0s[i]),
            0.0,
            60.0,
            save_events=K,
            **TOL,
        )
        np.testing.assert_allclose(sol.events.t[i], one.events.t, atol=1e-10, equal_nan=True)
        np.testing.assert_allclose(
            sol.events.y_after[i], one.events.y_after, atol=1e-9, equal_nan=True
        )


def test_the_impact_times_are_differentiable():
    for z0, e, g, _ in zip(*_balls(n=2, seed=8)):
        for k in (1, 3):
            t_k = jax.grad(
                lambda e_: rollax.solve(
                    BouncingBall(e=e_, g=float(g), n_bounces=4),
                    jnp.array([z0, 0.0]),
                    0.0,
                    60.0,
                    save_events=4,
                    **TOL,
                ).events.t[k]
            )(float(e))
            T0 = math.sqrt(2 * z0 / g)
            ref = 2 * T0 * sum(i * e ** (i - 1) for i in range(1, k + 1))
            assert float(t_k) == pytest.approx(ref, rel=1e-7, abs=1e-9)


def test_mode_switches_are_logged_with_the_modes_before_and_after():
    rng = np.random.default_rng(2)
    n = 8
    mu_k = rng.uniform(0.2, 0.6, n)
    mu_s = mu_k + rng.uniform(0.0, 0.3, n)
    F = rng.uniform(0.0, 0.9, n) * mu_k * G
    x0, v0 = rng.uniform(-1, 1, n), rng.uniform(0.5, 4.0, n)
    t_stop, x_stop = _closed_form(F, mu_k, x0, v0)
    system = Block(F=jnp.asarray(F), mu_s=jnp.asarray(mu_s), mu_k=jnp.asarray(mu_k))
    y0s = np.stack([x0, v0], 1)
    sol = rollax.solve_ensemble(system, y0s, 0.0, 20.0, save_events=3, **TOL)
    ev = sol.events
    np.testing.assert_allclose(ev.t[:, 0], t_stop, rtol=1e-8)
    np.testing.assert_allclose(ev.y[:, 0, 0], x_stop, rtol=1e-8, atol=1e-8)
    assert np.all(ev.mode[:, 0] == 1) and np.all(ev.mode_after[:, 0] == 0)  # slip -> stick
    assert np.all(ev.event[:, 0] == 0) and np.all(ev.n == 1)
    np.testing.assert_allclose(ev.y_after[:, 0, 1], 0.0)
    for i in (0, 5):
        one = rollax.solve(
            Block(F=float(F[i]), mu_s=float(mu_s[i]), mu_k=float(mu_k[i])),
            jnp.asarray(y0s[i]),
            0.0,
            20.0,
            save_events=3,
            **TOL,
        )
        np.testing.assert_allclose(one.events.t, ev.t[i], rtol=1e-10, equal_nan=True)
        np.testing.assert_array_equal(one.events.mode_after, ev.mode_after[i])


def test_a_system_without_a_reset_map_logs_its_terminal_event():
    osc = Oscillator()
    rng = np.random.default_rng(4)
    y0s = np.stack([rng.uniform(0.2, 1.0, 6), rng.uniform(-1, 1, 6)], 1)
    ens = rollax.solve_ensemble(osc, y0s, 0.0, 50.0, save_events=2, **TOL)
    ended = ens.status == rollax.Status.EVENT
    assert ended.any()
    np.testing.assert_array_equal(ens.events.t[ended, 0], ens.t[ended])
    np.testing.assert_array_equal(ens.events.y[ended, 0], ens.y[ended])
    assert np.all(ens.events.n == ended.astype(int))
    assert np.all(np.isnan(ens.events.t[:, 1]))
    one = rollax.solve(osc, jnp.asarray(y0s[0]), 0.0, 50.0, save_events=2, **TOL)
    assert int(one.events.n) == int(ended[0])
    if ended[0]:
        assert float(one.events.t[0]) == pytest.approx(float(ens.t[0]), abs=1e-10)


def test_a_sweep_keeps_the_event_logs_and_saves_them(tmp_path):
    ball = BouncingBall(n_bounces=3)
    zs, es = np.linspace(0.5, 2.0, 3), np.linspace(0.5, 0.9, 2)
    res = rollax.sweep(
        ball,
        [rollax.Axis("z", 0.5, 2.0, 3), rollax.Axis("e", 0.5, 0.9, 2)],
        y0={"v": 0.0},
        t1=30.0,
        save_events=4,
        progress=False,
        **TOL,
    )
    assert res.events.t.shape == (3, 2, 4)
    ref = np.array([[_impacts(z, e, 9.81, 3) for e in es] for z in zs])
    np.testing.assert_allclose(res.events.t[..., :3], ref, atol=1e-9)
    assert res.as_solution().events.n.shape == (3, 2)
    with xr.open_zarr(res.save(tmp_path / "ball.zarr")) as saved:
        np.testing.assert_array_equal(saved["events_t"].values, res.events.t)
        np.testing.assert_array_equal(saved["events_y_z"].values, res.events.y[..., 0])
        assert (
            saved["events_t"].dims == ("z", "e", "log") and saved["events_t"].attrs["units"] == "s"
        )


@pytest.mark.parametrize("bad", [-1, 2.5, "3", True, 10**9])
def test_save_events_refuses_what_is_not_a_count(bad):
    ball = BouncingBall()
    with pytest.raises(ValueError, match="save_events"):
        rollax.solve(ball, jnp.array([1.0, 0.0]), 0.0, 5.0, save_events=bad)
    with pytest.raises(ValueError, match="save_events"):
        rollax.solve_ensemble(ball, np.array([[1.0, 0.0]]), 0.0, 5.0, save_events=bad)
