"""Reverse-mode derivatives of rollax.solve when a run with declared events ends at t1 (issue 41).

Each case is a closed form, differentiated by hand or by JAX on the formula (an independent
route), over a generator of starts, parameters and end times (fixed seeds): lanes where the
event fires and lanes where it does not, in one vmap; single runs; a hybrid run whose t1 falls
between impacts; forward and reverse mode and every adjoint rollax accepts.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _gradcheck import assert_finite_gradients  # noqa: E402
from bouncing_ball import BouncingBall  # noqa: E402

TOL = dict(rtol=1e-11, atol=1e-11)
ADJOINTS = {"checkpointed": None, "direct": diffrax.DirectAdjoint()}


class Decay(rollax.AbstractSystem):
    """y' = -k y with the boundary event y - c (fires when y falls to c)."""

    k: jax.Array = rollax.parameter(1.0)
    c: jax.Array = rollax.parameter(0.1)
    state_names = ("y",)
    events = (rollax.boundary("y=c"),)

    def vector_field(self, t, y, mode):
        return -self.k * y

    def event_values(self, t, y, mode):
        return y - self.c


def _decay_cases(n, seed):
    """``(k, y0, c, t1)`` rows: half with the event beyond t1, half with it before."""
    rng = np.random.default_rng(seed)
    k = rng.uniform(0.2, 2.0, n)
    y0 = rng.uniform(0.5, 3.0, n)
    t1 = rng.uniform(0.3, 2.0, n)
    y1 = y0 * np.exp(-k * t1)
    fires = np.arange(n) % 2 == 1
    # not firing: c well below y(t1); firing: c well above it (the root well inside (0, t1))
    c = np.where(fires, y1 + rng.uniform(0.2, 0.8, n) * (y0 - y1), rng.uniform(0.1, 0.8, n) * y1)
    return np.stack([k, y0, c, t1], 1), fires


def _decay_exact(p, fires):
    """d(t_end, y_end)/d(k, y0, c, t1) of the closed form, shape (2, 4)."""
    k, y0, c, t1 = p
    if fires:
        t = math.log(y0 / c) / k
        return np.array([[-t / k, 1 / (k * y0), -1 / (k * c), 0.0], [0.0, 0.0, 1.0, 0.0]])
    y = y0 * math.exp(-k * t1)
    return np.array([[0.0, 0.0, 0.0, 1.0], [-t1 * y, y / y0, 0.0, -k * y]])


def _decay_end(p, adjoint=None):
    sol = rollax.solve(Decay(k=p[0], c=p[2]), p[1:2], 0.0, p[3], adjoint=adjoint, **TOL)
    return jnp.stack([sol.t, sol.y[0]])


def test_decay_not_fired_single_run_is_exact_in_every_mode():
    # the case: y(0) = 2, k = 1, t1 = 1, event y = 0.1 not reached: dy(1)/dk = -2/e
    exact = -2 * math.exp(-1.0)

    def y1(k, adjoint=None):
        return rollax.solve(
            Decay(k=k, c=0.1), jnp.array([2.0]), 0.0, 1.0, adjoint=adjoint, **TOL
        ).y[0]

    for name, adjoint in ADJOINTS.items():
        g = float(jax.grad(lambda k: y1(k, adjoint))(1.0))
        assert abs(g - exact) < 1e-8, name
    f = float(jax.jacfwd(lambda k: y1(k, diffrax.ForwardMode()))(1.0))
    assert abs(f - exact) < 1e-8


@pytest.mark.parametrize(
    "adjoint",
    # (the direct adjoint: 45 s on a slow day here; CI budget, stop 66)
    ["checkpointed", pytest.param("direct", marks=pytest.mark.slow)],
)
def test_decay_vmap_some_lanes_fire_reverse_mode_is_exact(adjoint):
    p, fires = _decay_cases(12, seed=41)
    jac = jax.vmap(jax.jacrev(lambda q: _decay_end(q, ADJOINTS[adjoint])))(jnp.asarray(p))
    assert_finite_gradients(jac)
    for i in range(p.shape[0]):
        np.testing.assert_allclose(
            np.asarray(jac[i]),
            _decay_exact(p[i], fires[i]),
            atol=1e-8,
            rtol=1e-7,
            err_msg=f"case {i} fires={fires[i]}",
        )


def test_decay_forward_and_reverse_agree():
    p, _ = _decay_cases(8, seed=7)
    rev = jax.vmap(jax.jacrev(_decay_end))(jnp.asarray(p))
    fwd = jax.vmap(jax.jacfwd(lambda q: _decay_end(q, diffrax.ForwardMode())))(jnp.asarray(p))
    assert_finite_gradients(fwd)
    np.testing.assert_allclose(np.asarray(rev), np.asarray(fwd), atol=1e-9, rtol=1e-8)


class Relax(rollax.AbstractSystem):
    """diffrax's test_vmap_backprop_with_event, ported: y' = p - y, y(0) = 0, event y = 1.5."""

    p: jax.Array = rollax.parameter(1.0)
    state_names = ("y",)
    events = (rollax.boundary("y=1.5"),)

    def vector_field(self, t, y, mode):
        return self.p - y

    def event_values(self, t, y, mode):
        return 1.5 - y


def test_ported_diffrax_vmap_backprop_with_event():
    # loss p^2 + y_end^2; y_end = p (1 - e^-2) for p <= 1.5 / (1 - e^-2), else 1.5 (the event)
    def loss(p, adjoint=None):
        sol = rollax.solve(Relax(p=p), jnp.zeros(1), 0.0, 2.0, adjoint=adjoint, **TOL)
        return p**2 + sol.y[0] ** 2

    params = jnp.array([1.0, 2.0, 3.0, 0.4, 1.2])
    grad = jax.grad(lambda ps: jnp.sum(jax.vmap(loss)(ps)))(params)
    assert_finite_gradients(grad)
    fwd = jax.vmap(jax.jacfwd(lambda p: loss(p, diffrax.ForwardMode())))(params)
    np.testing.assert_allclose(np.asarray(fwd), np.asarray(grad), atol=1e-9)
    q = 1 - math.exp(-2.0)
    exact = [2 * p + (2 * p * q * q if p * q < 1.5 else 0.0) for p in np.asarray(params)]
    np.testing.assert_allclose(np.asarray(grad), exact, atol=1e-8)
    assert abs(float(grad[0]) - 3.4953) < 1e-4  # diffrax's value for p = 1


def _ball_state(z0, e, g, t1, k):
    """(z, v) at t1 of the ball dropped from rest at z0, after its k-th impact (closed form)."""
    T0 = jnp.sqrt(2 * z0 / g)
    tk = T0 * (1 + 2 * sum(e**i for i in range(1, k))) if k else 0.0
    v0 = e**k * jnp.sqrt(2 * g * z0) if k else 0.0
    z_start = 0.0 if k else z0
    s = t1 - tk
    return jnp.stack([z_start + v0 * s - 0.5 * g * s**2, v0 - g * s])


@pytest.mark.parametrize(
    "adjoint", ["checkpointed", pytest.param("direct", marks=pytest.mark.slow)]
)
def test_bouncing_ball_t1_between_impacts(adjoint):
    # (DirectAdjoint's bounded loops compile for ~35 s here: slow)
    rng = np.random.default_rng(12)
    cases = []
    while len(cases) < 8:
        z0, e, g = rng.uniform(0.4, 2.0), rng.uniform(0.5, 0.9), rng.uniform(5.0, 12.0)
        k = int(rng.integers(0, 4))
        times = BouncingBall(g=g, e=e).impact_times(z0, k + 1)
        lo = times[k - 1] if k else 0.0
        t1 = lo + rng.uniform(0.1, 0.9) * (times[k] - lo)  # between impacts k and k+1
        cases.append((z0, e, g, t1, k))
    p = jnp.asarray([c[:4] for c in cases])

    def end(q, adjoint=None):
        sol = rollax.solve(
            BouncingBall(g=q[2], e=q[1], n_bounces=50),
            jnp.stack([q[0], 0.0]),
            0.0,
            q[3],
            adjoint=adjoint,
            **TOL,
        )
        return sol.y

    jac = jax.vmap(jax.jacrev(lambda q: end(q, ADJOINTS[adjoint])))(p)
    assert_finite_gradients(jac, f"jacrev ({adjoint})")
    for i, (z0, e, g, t1, k) in enumerate(cases):
        exact = jax.jacrev(lambda q: _ball_state(q[0], q[1], q[2], q[3], k))(p[i])
        np.testing.assert_allclose(
            np.asarray(jac[i]),
            np.asarray(exact),
            atol=1e-7,
            rtol=1e-7,
            err_msg=f"{adjoint}, case {i} ({k} impacts)",
        )
    if adjoint == "checkpointed":
        fwd = jax.vmap(jax.jacfwd(lambda q: end(q, diffrax.ForwardMode())))(p)
        np.testing.assert_allclose(np.asarray(fwd), np.asarray(jac), atol=1e-8, rtol=1e-8)


def test_first_crossing_time_has_finite_derivatives_when_not_seen():
    # a crossing event counted but never crossed: t_first is nan, yet the rest of the
    # Solution's derivatives stay finite (its slot's stand-in step is a valid one)
    class Count(rollax.AbstractSystem):
        k: jax.Array = rollax.parameter(1.0)
        state_names = ("y",)
        events = (rollax.crossing("y=-1", target=3),)

        def vector_field(self, t, y, mode):
            return -self.k * y

        def event_values(self, t, y, mode):
            return y + 1.0

    def out(k):
        sol = rollax.solve(Count(k=k), jnp.ones(1), 0.0, 2.0, **TOL)
        return sol.y[0] + jnp.where(jnp.isnan(sol.t_first[0]), 0.0, sol.t_first[0])

    g = float(jax.grad(out)(0.7))
    assert abs(g - (-2.0 * math.exp(-1.4))) < 1e-8


class Ramp(rollax.AbstractSystem):
    """y' = v with the event g = y + c - s t, which depends on time explicitly (issue 63): from
    y0 it fires at t* = (y0 + c) / (s - v), so dt*/dy0 = 1 / (s - v) -- where the event-time
    slope without its dg/dt term (-s) would give -1 / v."""

    v: jax.Array = rollax.parameter(1.0)
    s: jax.Array = rollax.parameter(2.0)
    c: jax.Array = rollax.parameter(1.0)
    state_names = ("y",)
    events = (rollax.boundary("y=s*t-c"),)

    def vector_field(self, t, y, mode):
        return jnp.broadcast_to(self.v, y.shape)

    def event_values(self, t, y, mode):
        return y + self.c - self.s * t


def _ramp_exact(y0, v, s, c):
    """(t*, y(t*)) and their derivatives in (y0, v, s, c), by hand."""
    t = (y0 + c) / (s - v)
    dt = np.array([1 / (s - v), t / (s - v), -t / (s - v), 1 / (s - v)])
    dy = np.array([1.0, t, 0.0, 0.0]) + v * dt
    return np.array([t, y0 + v * t]), np.stack([dt, dy])


def _ramp_end(p, adjoint=None):
    y0, v, s, c = p[0], p[1], p[2], p[3]
    sol = rollax.solve(Ramp(v=v, s=s, c=c), y0[None], 0.0, 50.0, adjoint=adjoint, **TOL)
    return jnp.stack([sol.t, sol.y[0]])


def test_a_time_dependent_event_time_has_the_closed_form_derivatives():
    # issue 63: dropping dg/dt from the event-time slope gave dt*/dy0 = -1 where it is 1, and
    # passed every test. Forward and reverse mode, over starts and parameters (one vmap); the
    # first row is the issue's case, y' = 1 with g = y + 1 - 2t: dt*/dy0 = 1
    cases = np.array([(0.0, 1.0, 2.0, 1.0), (0.3, -0.5, 1.5, 0.7), (-0.2, 2.0, 3.5, 1.1)])
    p = jnp.asarray(cases)
    np.testing.assert_allclose(
        np.asarray(jax.vmap(_ramp_end)(p)), [_ramp_exact(*c)[0] for c in cases], rtol=1e-10
    )
    exact = np.stack([_ramp_exact(*c)[1] for c in cases])
    assert exact[0, 0, 0] == 1.0
    rev = jax.vmap(jax.jacrev(_ramp_end))(p)
    fwd = jax.vmap(jax.jacfwd(lambda q: _ramp_end(q, diffrax.ForwardMode())))(p)
    for name, jac in (("reverse", rev), ("forward", fwd)):
        np.testing.assert_allclose(np.asarray(jac), exact, rtol=1e-9, atol=1e-9, err_msg=name)


def test_a_time_dependent_event_time_on_the_ensemble_kernel():
    # rollax.solve_ensemble is not differentiable: its event times are the closed form, and
    # their central differences across neighbouring starts give dt*/dy0 = 1 / (s - v)
    sys_ = Ramp(v=-0.5, s=1.5, c=0.7)
    y0 = np.array([0.3, 0.3 + 1e-3, 0.3 - 1e-3, -0.6, 2.0])
    sol = rollax.solve_ensemble(sys_, y0[:, None], 0.0, 50.0, **TOL)
    exact = (y0 + 0.7) / 2.0
    np.testing.assert_allclose(np.asarray(sol.t), exact, rtol=1e-10)
    assert np.all(np.asarray(sol.event) == 0)
    slope = (float(sol.t[1]) - float(sol.t[2])) / 2e-3
    assert abs(slope - 0.5) < 1e-8


class _RampCrossing(Ramp):
    """The ramp's g as a crossing event (the first sign change ends the run)."""

    events = (rollax.crossing("g", target=1),)


def test_a_time_dependent_crossing_starting_at_zero_on_the_ensemble_kernel():
    # a crossing function exactly at zero at t0 takes the side it moves to, dg/dt included:
    # y' = -0.5 with g = y + 0.7 + 1.5 t rises (g' = 1) although y falls. From g(0) = 0 it
    # never crosses (the kernel's start sign without dg/dt took it for falling and counted a
    # crossing at t = 4e-4, the mutation check's survivor); from g(0) = -0.3 it crosses at 0.3
    sol = rollax.solve_ensemble(
        _RampCrossing(v=-0.5, s=-1.5, c=0.7), np.array([[-0.7], [-1.0]]), 0.0, 5.0, **TOL
    )
    assert np.asarray(sol.status).tolist() == [rollax.Status.T_MAX, rollax.Status.EVENT]
    np.testing.assert_allclose(np.asarray(sol.t), [5.0, 0.3], rtol=1e-10)
    assert np.asarray(sol.counts)[:, 0].tolist() == [0, 1]


def test_the_state_at_a_boundary_event_has_the_boundarys_derivative_at_any_tolerance():
    # at the root of y - c the state is c whatever k and y0 are: dy*/dk = dy*/dy0 = 0 and
    # dy*/dc = 1, exactly, because the state's derivative follows the vector field there
    # (dy = dy|_t + f dt*). Taking the interpolant's slope instead leaves its error (~1e-4 at
    # rtol = 1e-5): a survivor of the mutation check at the tight tolerances of the tests above
    def y_end(p):
        sol = rollax.solve(Decay(k=p[0], c=p[2]), p[1:2], 0.0, 10.0, rtol=1e-5, atol=1e-5)
        return sol.y[0]

    p = jnp.array([1.3, 2.0, 0.1])
    assert abs(float(y_end(p)) - 0.1) < 1e-12
    np.testing.assert_allclose(np.asarray(jax.grad(y_end)(p)), [0.0, 0.0, 1.0], atol=1e-10)
