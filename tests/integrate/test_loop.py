"""rollax.solve's one step loop (``rollax._integrate._loop``, the default for systems with a reset
map; ``ROLLAX_LOOP=segments`` the segment loop it replaced for them) on generated
hybrid systems: a ball bouncing on an inclined wall (random restitution, wall angle, height,
impact counts up to 100). Impact times, positions and their gradients equal the closed form to
1e-9; the segment loop takes the same steps and finds the same events; the ensemble kernel the
same times."""

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax

from .test_solve import Decay, Drift

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from bouncing_ball import BouncingBall  # noqa: E402

G = 9.81
TOL = dict(rtol=1e-11, atol=1e-11)


class InclineBall(rollax.AbstractSystem):
    """A ball on a wall inclined by ``alpha``: the height ``z`` above it and its rate ``v``
    (gravity's normal part ``g cos alpha``), the distance ``x`` along it and its rate ``u``
    (the tangential part ``g sin alpha``). At an impact ``v -> -e v``; the run ends at impact
    ``k`` (a parameter, so that one program serves every count)."""

    e: jax.Array = rollax.parameter(0.9)
    alpha: jax.Array = rollax.parameter(0.3)
    k: jax.Array = rollax.parameter(4.0)
    state_names = ("z", "v", "x", "u")
    n_aux = 1
    events = (rollax.crossing("wall", target=1, direction=-1),)

    def vector_field(self, t, y, mode):
        one = jnp.ones_like(y[0])
        return jnp.stack(
            [y[1], -G * jnp.cos(self.alpha) * one, y[3], G * jnp.sin(self.alpha) * one]
        )

    def event_values(self, t, y, mode):
        return y[:1]

    def initial_aux(self, y0, mode):
        return jnp.zeros(1)

    def reset(self, t, y, mode, aux, event):
        n = aux[0] + 1
        y_new = jnp.stack([jnp.zeros_like(y[0]), -self.e * y[1], y[2], y[3]])
        return t, y_new, mode, aux.at[0].set(n), n >= self.k


def _closed(z0, e, alpha, k):
    """The k-th impact's time, d/de of it, and x there (from x = u = 0) with d/dalpha of it."""
    gn = G * math.cos(alpha)
    T0 = math.sqrt(2 * z0 / gn)
    t = T0 * (1 + 2 * sum(e**i for i in range(1, k)))
    dt_de = T0 * 2 * sum(i * e ** (i - 1) for i in range(1, k))
    # t is T0 (...) with T0 ~ cos(alpha)^(-1/2): dt/dalpha = t tan(alpha) / 2
    dt_da = t * math.tan(alpha) / 2
    x = 0.5 * G * math.sin(alpha) * t**2
    dx_da = 0.5 * G * math.cos(alpha) * t**2 + G * math.sin(alpha) * t * dt_da
    return t, dt_de, x, dx_da


def _cases(n, seed, k_max):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        k = int(rng.integers(1, k_max + 1))
        # restitution high enough that impact k is well resolved (its flight >> tolerances)
        e = float(rng.uniform(0.75, 0.95)) if k < 40 else float(rng.uniform(0.93, 0.98))
        yield float(rng.uniform(0.2, 2.0)), e, float(rng.uniform(0.0, 1.2)), k


def _solve(z0, e, alpha, k):
    sys_ = InclineBall(e=e, alpha=alpha, k=float(k))
    return rollax.solve(sys_, jnp.array([z0, 0.0, 0.0, 0.0]), 0.0, 1e3, **TOL)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_impacts_and_their_gradients_equal_the_closed_form(seed):
    for z0, e, alpha, k in _cases(6, seed, 100):
        t, dt_de, x, dx_da = _closed(z0, e, alpha, k)
        sol = _solve(z0, e, alpha, k)
        assert int(sol.status) == rollax.Status.EVENT and int(sol.resets) == k - 1
        assert abs(float(sol.t) - t) < 1e-9 * max(1.0, t), (z0, e, alpha, k)
        assert abs(float(sol.y[2]) - x) < 1e-9 * max(1.0, x)

        def end(p):
            s = rollax.solve(
                InclineBall(e=p[0], alpha=p[1], k=float(k)),
                jnp.array([z0, 0.0, 0.0, 0.0]),
                0.0,
                1e3,
                **TOL,
            )
            return jnp.stack([s.t, s.y[2]])

        J = np.asarray(jax.jacrev(end)(jnp.array([e, alpha])))
        assert abs(J[0, 0] - dt_de) < 1e-9 * max(1.0, abs(dt_de)), (J, dt_de)
        assert abs(J[1, 1] - dx_da) < 1e-9 * max(1.0, abs(dx_da)), (J, dx_da)


def test_vmapped_gradients_are_each_lanes_closed_form():
    """``jax.vmap`` of the gradient over lanes that end at different impacts (1 to 30) after
    different numbers of steps: each lane's derivatives are its own closed form (a lane that
    has ended idles while the others step; nothing of it may reach their gradients)."""
    cases = list(_cases(6, 11, 30))
    p = jnp.asarray([[e, alpha, float(k)] for _, e, alpha, k in cases])
    z0 = jnp.asarray([c[0] for c in cases])

    def end(q, z):
        s = rollax.solve(
            InclineBall(e=q[0], alpha=q[1], k=q[2]), jnp.stack([z, 0.0, 0.0, 0.0]), 0.0, 1e3, **TOL
        )
        return jnp.stack([s.t, s.y[2]])

    J = np.asarray(jax.vmap(jax.jacrev(end))(p, z0))
    for i, (z, e, alpha, k) in enumerate(cases):
        t, dt_de, x, dx_da = _closed(z, e, alpha, k)
        assert abs(J[i, 0, 0] - dt_de) < 1e-9 * max(1.0, abs(dt_de)), (i, J[i], dt_de)
        assert abs(J[i, 1, 1] - dx_da) < 1e-9 * max(1.0, abs(dx_da)), (i, J[i], dx_da)
        assert J[i, 0, 2] == 0.0  # (the impact count: a threshold, no derivative)


@pytest.mark.parametrize("seed", [0])
def test_the_one_loop_takes_the_segment_loops_steps(seed, monkeypatch):
    for z0, e, alpha, k in _cases(4, seed, 12):
        monkeypatch.delenv("ROLLAX_LOOP", raising=False)  # the default: the one loop
        a = _solve(z0, e, alpha, k)
        monkeypatch.setenv("ROLLAX_LOOP", "segments")
        b = _solve(z0, e, alpha, k)
        for f in ("status", "event", "steps", "rejected", "resets", "counts"):
            assert np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f))), f
        assert float(a.t) == float(b.t)
        np.testing.assert_array_equal(np.asarray(a.y), np.asarray(b.y))
        ens = rollax.solve_ensemble(
            InclineBall(e=e, alpha=alpha, k=float(k)),
            jnp.array([[z0, 0.0, 0.0, 0.0]]),
            0.0,
            1e3,
            **TOL,
        )
        assert abs(float(ens.t[0]) - float(a.t)) < 1e-9
        assert int(ens.steps[0]) == int(a.steps)


def _same(a, b):
    for f in ("t", "y", "status", "event", "counts", "t_first", "steps", "rejected", "resets"):
        x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
        assert np.array_equal(x, y, equal_nan=True), (f, x, y)


def test_the_one_loop_agrees_on_counts_first_crossings_limits_and_saving(monkeypatch):
    """Crossing counts with targets and their first times, a boundary at the start, the step
    and reset limits, saved states and the event log: the segment loop's answers, bit for bit
    (the saved states to rounding)."""
    rng = np.random.default_rng(5)
    target = int(rng.integers(2, 9))
    cases = [
        (Drift("cos2", target), [float(rng.uniform(-0.5, 0.5))], dict()),
        (Drift("count_and_wall"), [0.0], dict()),
        (Decay(c=float(rng.uniform(0.2, 0.5))), [0.1], dict()),  # fired at the start
        (BouncingBall(n_bounces=6), [1.0, 0.0], dict(max_steps=9)),
        (BouncingBall(n_bounces=40), [1.0, 0.0], dict(max_resets=3)),
        (
            BouncingBall(e=float(rng.uniform(0.5, 0.9)), n_bounces=5),
            [float(rng.uniform(0.5, 2.0)), 0.0],
            dict(ts=jnp.linspace(0.0, 3.0, 19), save_events=3),
        ),
    ]
    for system, y0, kw in cases:
        monkeypatch.setenv("ROLLAX_LOOP", "one")  # (the systems without resets too)
        a = rollax.solve(system, jnp.asarray(y0), 0.0, 100.0, **kw)
        monkeypatch.setenv("ROLLAX_LOOP", "segments")
        b = rollax.solve(system, jnp.asarray(y0), 0.0, 100.0, **kw)
        _same(a, b)
        if "ts" in kw:
            np.testing.assert_allclose(np.asarray(a.ys), np.asarray(b.ys), rtol=0, atol=1e-13)
            assert np.array_equal(np.isnan(a.ys), np.isnan(b.ys))
            for f in ("t", "event", "mode", "y", "t_after", "mode_after"):
                np.testing.assert_array_equal(getattr(a.events, f), getattr(b.events, f))


@pytest.mark.slow  # (a hessian through impacts: two compiles of ~1 min on a 2-core machine)
def test_second_derivatives_through_the_one_loop():
    """``jax.hessian`` (forward over reverse) through the one loop with ``adjoint="direct"``
    (the default adjoint is reverse mode only, and says so): the k-th impact of the inclined
    ball, t = T0 (1 + 2 sum_{i<k} e^i), so t'' = 2 T0 sum_{i<k} i (i - 1) e^(i - 2), for
    generated heights, restitutions, angles and impact counts."""
    with pytest.raises(TypeError, match="adjoint='direct'"):
        jax.hessian(
            lambda e_: (
                rollax.solve(
                    InclineBall(e=e_, alpha=0.1, k=3.0), jnp.array([1.0, 0.0, 0.0, 0.0]), 0.0, 1e3
                ).t
            )
        )(0.8)
    for z0, e, alpha, k in _cases(2, 3, 12):
        k = max(k, 3)  # (t'' = 0 below the third impact)
        t, _, _, _ = _closed(z0, e, alpha, k)
        T0 = math.sqrt(2 * z0 / (G * math.cos(alpha)))
        d2 = 2 * T0 * sum(i * (i - 1) * e ** (i - 2) for i in range(2, k))

        def t_k(e_, alpha=alpha, k=k, z0=z0):
            sys_ = InclineBall(e=e_, alpha=alpha, k=float(k))
            y0 = jnp.array([z0, 0.0, 0.0, 0.0])
            return rollax.solve(sys_, y0, 0.0, 1e3, adjoint="direct", **TOL).t

        assert abs(float(t_k(e)) - t) < 1e-9 * max(1.0, t)
        h = float(jax.hessian(t_k)(e))
        assert abs(h - d2) < 1e-6 * abs(d2), (z0, e, alpha, k, h, d2)


def test_checkpoints_fill_a_budget_except_under_vmap():
    """The one loop's reverse pass keeps as many checkpoints as fit in its budget (no
    recomputation in runs of a few thousand steps), and under ``jax.vmap`` (seen through
    ``jax.grad`` on either side) the bound of one segment, so that memory does not grow with
    the lanes."""
    from rollax._integrate import _loop, _solve

    seen = []

    def probe(y0, t1):
        seen.append(_solve._batched(y0, t1))
        return jnp.sum(y0) * t1

    x, ys = jnp.ones(3), jnp.ones((4, 3))
    probe(x, 1.0)
    jax.grad(probe)(x, 1.0)
    jax.vmap(probe, (0, None))(ys, 1.0)
    jax.vmap(jax.grad(probe), (0, None))(ys, 1.0)
    jax.grad(lambda y: jnp.sum(jax.vmap(probe, (0, None))(y, 1.0)))(ys)
    jax.jit(jax.vmap(probe, (0, None)))(ys, 1.0)
    assert seen == [False, False, True, True, True, True]

    class Opts:
        adjoint, max_steps, batched = None, 4096, False

    carry = (jnp.zeros(20), jnp.zeros(3, jnp.int32))  # 172 bytes
    assert _loop._checkpoints(Opts(), "checkpointed", carry) == {"checkpoints": 2**18 // 172}
    Opts.batched = True
    assert _loop._checkpoints(Opts(), "checkpointed", carry) == {"checkpoints": 182}
    assert _loop._checkpoints(Opts(), "bounded", carry) == {}
