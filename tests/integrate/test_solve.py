"""rollax.solve (the diffrax path) against closed forms: the cases of issue 12, gradients both ways,
the hybrid reset loop, compile caching and input validation."""

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
from bouncing_ball import BouncingBall  # noqa: E402
from oscillator import Oscillator  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10)


class Drift(rollax.AbstractSystem):
    """y' = 1 with configurable events (test helper)."""

    kind: str = "cos2"
    target: int = 6
    c: jax.Array = rollax.parameter(0.0)
    state_names = ("y",)

    @property
    def events(self):
        if self.kind == "cos2":
            return (rollax.crossing("cos2y", target=self.target),)
        if self.kind == "zero":
            return (rollax.crossing("y", target=self.target),)
        if self.kind == "count_and_wall":
            return (rollax.crossing("sin", target=0), rollax.boundary("wall"))
        if self.kind == "nan":
            return (rollax.boundary("nan_after_1"), rollax.boundary("wall"))
        raise AssertionError(self.kind)

    def vector_field(self, t, y, mode):
        return jnp.ones_like(y)

    def event_values(self, t, y, mode):
        if self.kind == "cos2":
            return jnp.cos(2 * y)
        if self.kind == "zero":
            return y
        if self.kind == "count_and_wall":
            return jnp.stack([jnp.sin(y[0]), 19.5 - y[0]])
        return jnp.stack([jnp.where(y[0] > 1.0, jnp.nan, 1.0), 5.0 - y[0]])


class Decay(rollax.AbstractSystem):
    """y' = -y with the boundary event y - c (fires when y reaches c)."""

    c: jax.Array = rollax.parameter(0.3)
    state_names = ("y",)
    events = (rollax.boundary("y=c"),)

    def vector_field(self, t, y, mode):
        return -y

    def event_values(self, t, y, mode):
        return y - self.c


def test_sixth_sign_change_of_cos2y_with_large_steps():
    sol = rollax.solve(Drift("cos2", 6), jnp.zeros(1), 0.0, 100.0, **TOL)
    assert sol.status == rollax.Status.EVENT and sol.event == 0
    assert abs(float(sol.t) - 11 * math.pi / 4) < 1e-10
    assert int(sol.counts[0]) == 6
    assert abs(float(sol.t_first[0]) - math.pi / 4) < 1e-10


def test_root_exactly_on_a_step_end_is_found_exactly():
    for delta in (1e-3, 0.5, 3.0):
        sol = rollax.solve(Drift("zero", 1), jnp.array([-delta]), 0.0, 100.0, **TOL)
        assert sol.status == rollax.Status.EVENT
        assert abs(float(sol.t) - delta) < 1e-12 * max(1.0, delta)


def test_count_only_crossing_never_ends_the_run():
    # y' = 1 is integrated exactly, so steps grow tenfold per step; dt_max keeps the samples
    # (dt_max / n_samples apart) finer than the zeros of sin (pi apart)
    sol = rollax.solve(Drift("count_and_wall"), jnp.zeros(1), 0.0, 100.0, dt_max=4.0, **TOL)
    assert sol.status == rollax.Status.EVENT and int(sol.event) == 1
    assert abs(float(sol.t) - 19.5) < 1e-10
    assert int(sol.counts[0]) == 6  # zeros of sin at pi, ..., 6 pi < 19.5
    assert abs(float(sol.t_first[0]) - math.pi) < 1e-10


def test_nonfinite_event_value_fails_the_run():
    sol = rollax.solve(Drift("nan"), jnp.zeros(1), 0.0, 100.0, **TOL)
    assert sol.status == rollax.Status.NONFINITE and bool(sol.failed)
    assert float(sol.t) < 5.0


def test_event_time_derivative_uses_the_field_slope():
    y0 = jnp.ones(1)

    def t_event(c, adjoint=None):
        return rollax.solve(Decay(c=c), y0, 0.0, 10.0, adjoint=adjoint, **TOL).t

    for c in (0.3, 0.05, 0.8):
        assert abs(float(t_event(c)) + math.log(c)) < 1e-9
        g = float(jax.grad(t_event)(c))
        assert abs(g - (-1 / c)) < 1e-9 * (1 / c)
        f = float(jax.jacfwd(lambda c: t_event(c, diffrax.ForwardMode()))(c))
        assert abs(f - g) < 1e-9 * abs(g)


def test_hessian_in_forward_mode():
    y0 = jnp.ones(1)
    h = jax.hessian(
        lambda c: rollax.solve(Decay(c=c), y0, 0.0, 10.0, adjoint=diffrax.ForwardMode(), **TOL).t
    )(0.3)
    assert abs(float(h) - 1 / 0.3**2) < 1e-6 / 0.3**2  # t = -ln c: t'' = 1/c^2


def test_second_derivatives_through_the_vector_field():
    # the parameter in the field (Decay's c is only in the event): the 3rd zero of
    # x = cos(w t) at t = 5 pi / (2 w), t'' = 2 t / w^2. jax.hessian is forward over reverse:
    # diffrax.DirectAdjoint (both modes); diffrax.ForwardMode gives jacfwd(jacfwd)
    y0 = jnp.array([1.0, 0.0])
    w = 2.0
    t3 = 2.5 * math.pi / w

    def t_zero(w, adjoint):
        return rollax.solve(Oscillator(omega=w, n=3), y0, 0.0, 10.0, adjoint=adjoint, **TOL).t

    h = jax.hessian(lambda w: t_zero(w, diffrax.DirectAdjoint()))(w)
    f = jax.jacfwd(jax.jacfwd(lambda w: t_zero(w, diffrax.ForwardMode())))(w)
    for d2 in (h, f):
        assert abs(float(d2) - 2 * t3 / w**2) < 1e-7 * (2 * t3 / w**2)
    # the continuous adjoint needs a system without events (tests/integrate/test_solve_adjoints.py)
    with pytest.raises(ValueError, match="adjoint = 'backsolve' is not allowed with events"):
        rollax.solve(Oscillator(), y0, 0.0, 1.0, adjoint=diffrax.BacksolveAdjoint())


def test_bouncing_ball_impacts_match_the_closed_form():
    for k in (1, 4):
        ball = BouncingBall(n_bounces=k)
        for z0 in (0.5, 1.0, 2.3):
            sol = rollax.solve(ball, jnp.array([z0, 0.0]), 0.0, 20.0, **TOL)
            assert sol.status == rollax.Status.EVENT and int(sol.resets) == k - 1
            assert abs(float(sol.t) - ball.impact_times(z0, k)[-1]) < 1e-10
            assert int(ball.outcome(sol)) == 0
    # gradient of the 4th impact time: t4 = T0 (1 + 2(e + e^2 + e^3)), T0 = sqrt(2 z0 / g)
    dt = jax.grad(
        lambda e: rollax.solve(BouncingBall(e=e), jnp.array([1.0, 0.0]), 0.0, 20.0, **TOL).t
    )(0.8)
    T0 = math.sqrt(2 / 9.81)
    assert abs(float(dt) - 2 * T0 * (1 + 2 * 0.8 + 3 * 0.8**2)) < 1e-8


def test_reset_limit_is_a_failure():
    sol = rollax.solve(
        BouncingBall(n_bounces=50), jnp.array([1.0, 0.0]), 0.0, 100.0, max_resets=3, **TOL
    )
    assert sol.status == rollax.Status.MAX_STEPS and int(sol.resets) == 4


def test_oscillator_nth_zero_and_vmap():
    osc = Oscillator(omega=2.0, n=6)
    x0 = jnp.linspace(0.5, 2.0, 7)
    y0s = jnp.stack([x0, jnp.zeros_like(x0)], axis=1)
    sols = jax.vmap(lambda y: rollax.solve(osc, y, 0.0, 100.0, **TOL))(y0s)
    assert np.all(np.abs(np.asarray(sols.t) - osc.zero_time(6)) < 1e-9)
    one = rollax.solve(osc, y0s[3], 0.0, 100.0, **TOL)
    assert float(one.t) == pytest.approx(float(sols.t[3]), abs=1e-12)


def test_repeat_calls_do_not_recompile():
    traces = []

    class Counted(Decay):
        def vector_field(self, t, y, mode):
            traces.append(1)
            return -y

    for c in (0.3, 0.4, 0.5, 0.6):
        rollax.solve(Counted(c=c), jnp.ones(1) * (1 + c), 0.0, 10.0, rtol=1e-8 + c * 1e-9)
    n_first = len(traces)
    for c in (0.2, 0.25, 0.7):
        rollax.solve(Counted(c=c), jnp.ones(1) * (1 + c), 0.0, 10.0 + c, atol=1e-9 + c * 1e-10)
    assert len(traces) == n_first  # no new trace for new parameter, state, time or tolerance values


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(y0=jnp.ones(3)), "y0 has shape"),
        (dict(y0=jnp.ones((4, 1))), "rollax.solve takes one state"),
        (dict(rtol=-1e-9), "rtol"),
        (dict(atol=2.0), "atol"),
        (dict(t1=-1.0), "t1"),
        (dict(t0=math.nan), "t0"),
        (dict(max_steps=0), "max_steps"),
        (dict(n_samples=0), "n_samples"),
        (dict(mode=3), "mode"),
        (dict(mode="slipping"), "mode"),
        (dict(solver="euler9"), "solver"),
        (dict(dt_max=0.0), "dt_max"),
        (dict(ts=jnp.array([0.5, 0.2])), "non-decreasing"),
        (dict(ts=jnp.array([0.5, 2.0])), "must lie in"),
        (dict(ts=jnp.array([jnp.nan])), "non-finite"),
        (dict(ts=jnp.zeros((2, 2))), "1-d"),
    ],
)
def test_bad_input_gets_a_clear_error(kwargs, match):
    args = dict(y0=jnp.ones(1), t0=0.0, t1=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        rollax.solve(Decay(), args.pop("y0"), args.pop("t0"), args.pop("t1"), **args)


def test_saved_states_match_the_closed_form_and_end_with_the_run():
    # y' = -y from 1 ends at y = c = 0.3 (t* = log(1/0.3) = 1.204); later samples are nan
    ts = jnp.linspace(0.0, 2.0, 9)
    sol = rollax.solve(Decay(), jnp.ones(1), 0.0, 5.0, ts=ts, **TOL)
    before = np.asarray(ts) <= math.log(1 / 0.3)
    np.testing.assert_allclose(
        np.asarray(sol.ys[before, 0]), np.exp(-np.asarray(ts)[before]), rtol=1e-9
    )
    assert np.all(np.isnan(np.asarray(sol.ys[~before])))
    assert rollax.solve(Decay(), jnp.ones(1), 0.0, 5.0, **TOL).ys is None


def test_saved_states_differentiate_both_ways():
    # d/dk exp(-k t) at k = 1 is -t exp(-t); forward and reverse mode agree with it
    class Rate(rollax.AbstractSystem):
        k: jax.Array = rollax.parameter(1.0)
        state_names = ("y",)

        def vector_field(self, t, y, mode):
            return -self.k * y

    ts = jnp.linspace(0.0, 3.0, 7)
    run = lambda k, **kw: rollax.solve(Rate(k), jnp.ones(1), 0.0, 3.0, ts=ts, **TOL, **kw).ys[:, 0]  # noqa: E731
    exact = -np.asarray(ts) * np.exp(-np.asarray(ts))
    fwd = jax.jacfwd(lambda k: run(k, adjoint=diffrax.ForwardMode()))(1.0)
    rev = jax.jacrev(run)(1.0)
    np.testing.assert_allclose(np.asarray(fwd), exact, atol=1e-8)
    np.testing.assert_allclose(np.asarray(rev), np.asarray(fwd), atol=1e-10)


def test_saved_states_across_resets_follow_the_bounces():
    # the bouncing ball's height between impacts, from the closed form of each flight
    ball = BouncingBall(n_bounces=3)
    z0, g, e = 1.0, 9.81, 0.8
    T0 = math.sqrt(2 * z0 / g)
    ts = jnp.linspace(0.0, 2.2, 45)
    sol = rollax.solve(ball, jnp.array([z0, 0.0]), 0.0, 10.0, ts=ts, **TOL)
    t_imp = [T0, T0 + 2 * e * T0, T0 + 2 * e * T0 + 2 * e * e * T0]

    def height(t):
        if t <= t_imp[0]:
            return z0 - 0.5 * g * t * t
        for k in range(2):
            if t <= t_imp[k + 1]:
                v = e ** (k + 1) * g * T0
                s = t - t_imp[k]
                return v * s - 0.5 * g * s * s
        return math.nan

    exact = np.array([height(float(t)) for t in ts])
    np.testing.assert_allclose(np.asarray(sol.ys[:, 0]), exact, atol=1e-9)


class FlowOscillator(Oscillator):
    """The oscillator moved along its closed form, its own exact flow (test helper)."""

    def flow(self, t0, y0, t1, mode):
        w = self.omega
        c, s = jnp.cos(w * (t1 - t0)), jnp.sin(w * (t1 - t0))
        return jnp.stack([y0[0] * c + y0[1] * s / w, -y0[0] * w * s + y0[1] * c])

    def flow_step(self, t, y, mode):
        return 1.3 / self.omega  # 8 samples per step: about 19 per half period


class BareFlow(FlowOscillator):
    flow_step = rollax.AbstractSystem.flow_step  # no step of its own: dt_max is needed


def test_an_exact_flow_gives_exact_events_on_both_integrators():
    osc = FlowOscillator(omega=2.0, n=6)
    y0s = jnp.array([[1.0, 0.0], [0.4, 0.0]])
    t6 = osc.zero_time(6)
    one = rollax.solve(osc, y0s[0], 0.0, 100.0)
    assert one.status == rollax.Status.EVENT and int(one.counts[0]) == 6
    assert abs(float(one.t) - t6) < 1e-13  # the flow is exact: only the root finder's rounding
    assert int(one.steps) == math.ceil(t6 / 0.65)  # steps of flow_step, none rejected
    ens = rollax.solve_ensemble(osc, y0s, 0.0, 100.0)
    np.testing.assert_allclose(ens.t, t6, rtol=0, atol=1e-13)
    assert int(ens.steps[0]) == int(one.steps)
    np.testing.assert_allclose(ens.t_first[:, 0], osc.zero_time(1), rtol=0, atol=1e-13)
    # event-time derivatives through the flow: t6 = 5.5 pi / omega, dt6/domega = -t6/omega
    t_of = lambda w, adj=None: (
        rollax.solve(
            FlowOscillator(omega=w),
            y0s[0],
            0.0,
            100.0,  # noqa: E731
            adjoint=adj,
        ).t
    )
    g = float(jax.grad(t_of)(2.0))
    assert abs(g + t6 / 2.0) < 1e-12 * t6
    f = float(jax.jacfwd(lambda w: t_of(w, diffrax.ForwardMode()))(2.0))
    assert abs(f - g) < 1e-12 * abs(g)


def test_an_exact_flow_without_a_step_needs_dt_max():
    with pytest.raises(ValueError, match="dt_max = None is not allowed for BareFlow"):
        rollax.solve(BareFlow(), jnp.array([1.0, 0.0]), 0.0, 10.0)
    with pytest.raises(ValueError, match="dt_max = None is not allowed for BareFlow"):
        rollax.solve_ensemble(BareFlow(), np.array([[1.0, 0.0]]), 0.0, 10.0)
    sol = rollax.solve(BareFlow(n=2), jnp.array([1.0, 0.0]), 0.0, 10.0, dt_max=0.5)
    assert abs(float(sol.t) - 1.5 * math.pi) < 1e-12 and int(sol.steps) == 10


def _osc_state(omega, x0, v0, t):
    """Closed form of the oscillator x'' = -omega^2 x at times t: (x, v)."""
    c, s = np.cos(omega * t), np.sin(omega * t)
    return np.stack([x0 * c + v0 / omega * s, -x0 * omega * s + v0 * c], -1)


def test_dense_output_equals_the_closed_form_and_ts_at_any_time():
    # random frequencies, starts and times: evaluate(t) against the closed form, against the
    # same run's ts output (the same continuous extension), nan outside the run; any shape of t
    rng = np.random.default_rng(35)
    for _ in range(5):
        omega, x0, v0 = rng.uniform(0.5, 3.0), rng.uniform(0.2, 1.5), rng.uniform(-1.0, 1.0)
        osc = Oscillator(omega=omega, n=5)
        t_end = float(rollax.solve(osc, jnp.array([x0, v0]), 0.0, 100.0, **TOL).t)
        ts = np.sort(rng.uniform(0.0, 1.3 * t_end, 9))
        sol = rollax.solve(osc, jnp.array([x0, v0]), 0.0, 100.0, dense=True, ts=ts, **TOL)
        live = ts <= float(sol.t)
        got = np.asarray(sol.evaluate(ts))
        assert got.shape == (9, 2)
        np.testing.assert_allclose(got[live], _osc_state(omega, x0, v0, ts[live]), atol=1e-8)
        np.testing.assert_allclose(got[live], np.asarray(sol.ys)[live], rtol=0, atol=1e-13)
        assert np.all(np.isnan(got[~live])) and np.all(np.isnan(np.asarray(sol.evaluate(-1.0))))
        grid = np.asarray(sol.evaluate(np.full((2, 3), 0.5 * t_end)))
        assert grid.shape == (2, 3, 2)
        np.testing.assert_allclose(grid[1, 2], _osc_state(omega, x0, v0, 0.5 * t_end), atol=1e-8)


def test_dense_output_is_differentiable_and_vmaps():
    def x_at(omega, t):
        return rollax.solve(
            Oscillator(omega=omega, n=5), jnp.array([1.0, 0.0]), 0.0, 100.0, dense=True, **TOL
        ).evaluate(t)[0]

    for omega, t in [(2.0, 1.0), (0.7, 3.1)]:
        g = float(jax.grad(x_at)(omega, t))
        assert abs(g - (-t * math.sin(omega * t))) < 1e-7  # d cos(omega t) / d omega
    xs = jax.vmap(x_at, in_axes=(0, None))(jnp.array([1.0, 2.0]), 0.4)
    np.testing.assert_allclose(np.asarray(xs), np.cos([0.4, 0.8]), atol=1e-8)


def test_dense_output_is_refused_where_it_cannot_hold():
    with pytest.raises(ValueError, match=r"dense = True is not allowed for BouncingBall: it has"):
        rollax.solve(BouncingBall(), jnp.array([1.0, 0.0]), 0.0, 5.0, dense=True)
    with pytest.raises(ValueError, match=r"dense = 'yes' is not allowed: it must be True or"):
        rollax.solve(Oscillator(), jnp.array([1.0, 0.0]), 0.0, 5.0, dense="yes")
    sol = rollax.solve(Oscillator(), jnp.array([1.0, 0.0]), 0.0, 5.0)
    with pytest.raises(
        ValueError, match=r"no dense output: solve with rollax.solve\(\.\.\., dense"
    ):
        sol.evaluate(1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_save_times_of_one_class_reuse_the_compiled_solve(seed, caplog):
    """``ts`` is padded to a size class (16, then four per octave) by repeating its last time:
    another number of save times of the same class compiles nothing again (issue 36: every
    change of saving compiled afresh), and the rows asked for are those of a longer run."""
    rng = np.random.default_rng(seed)
    ball = BouncingBall(n_bounces=3, e=float(rng.uniform(0.5, 0.9)))
    y0 = jnp.array([float(rng.uniform(0.5, 2.0)), float(rng.uniform(-1.0, 1.0))])
    ts = np.sort(rng.uniform(0.0, 3.0, 13))
    kw = dict(TOL, max_resets=7 + seed)  # a program no other test compiles

    def solve_logged(ts_):  # the solution, and whether JAX compiled the solve for it
        caplog.clear()
        jax.config.update("jax_log_compiles", True)
        try:
            with caplog.at_level("WARNING"):
                sol = rollax.solve(ball, y0, 0.0, 10.0, ts=ts_, **kw)
        finally:
            jax.config.update("jax_log_compiles", False)
        return sol, any("jit(_solve)" in r.getMessage() for r in caplog.records)

    short, _ = solve_logged(ts[:9])
    long, compiled = solve_logged(ts)
    assert not compiled
    assert short.ys.shape == (9, 2) and long.ys.shape == (13, 2)
    np.testing.assert_array_equal(np.asarray(short.ys), np.asarray(long.ys)[:9])
    # and a class of its own does compile (the check above can see a compile)
    assert solve_logged(np.linspace(0.0, 3.0, 17))[1]
