"""Bad input to the integrators, sweeps and system definitions (found by trying the public API
as a new user would): a one-line error naming the parameter and what is allowed, never a deep
JAX error, and never a run that looks normal but means something else."""

import sys
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from bouncing_ball import BouncingBall  # noqa: E402
from oscillator import Oscillator  # noqa: E402

Y = jnp.array([1.0, 0.0])
Y2 = np.array([[1.0, 0.0], [0.5, 0.0]])


class TooFewEvents(Oscillator):
    def event_values(self, t, y, mode):
        return jnp.zeros((0,))


class WrongField(Oscillator):
    def vector_field(self, t, y, mode):
        return y[:1]


@pytest.mark.parametrize(
    "cls, match",
    [
        (TooFewEvents, r"TooFewEvents.event_values returns shape \(0,\); it must be \(1,\)"),
        (WrongField, r"WrongField.vector_field returns shape \(1,\); it must be \(2,\)"),
    ],
)
def test_function_shapes_are_checked_on_both_paths(cls, match):
    # an event with no value would never fire: refused, not run
    with pytest.raises(ValueError, match=match):
        rollax.solve(cls(), Y, 0.0, 5.0)
    with pytest.raises(ValueError, match=match):
        rollax.solve_ensemble(cls(), Y2, 0.0, 5.0)


def test_parameters_must_be_finite():
    for bad in (np.nan, np.inf, [1.0, np.nan]):
        with pytest.raises(ValueError, match=r"Oscillator.omega = .* a parameter must be finite"):
            Oscillator(omega=bad)


def test_a_nonfinite_field_at_the_start_fails_at_once_on_both_paths():
    # a NaN parameter that reaches the run traced (not checked on construction)
    st = jax.vmap(lambda w: rollax.solve(Oscillator(omega=w), Y, 0.0, 5.0).status)(
        jnp.array([1.0, jnp.nan])
    )
    np.testing.assert_array_equal(st, [rollax.Status.T_MAX, rollax.Status.NONFINITE])
    import equinox as eqx

    batch = eqx.tree_at(lambda s: s.omega, Oscillator(), jnp.array([1.0, jnp.nan]))
    sol = rollax.solve_ensemble(batch, Y2, 0.0, 5.0)
    np.testing.assert_array_equal(sol.status, [rollax.Status.T_MAX, rollax.Status.NONFINITE])
    assert sol.steps[1] == 0


@pytest.mark.parametrize(
    "kw, match",
    [
        (
            dict(y0=jnp.array([np.nan, 0.0])),
            r"y0 = \[nan, 0.0\] is not allowed: a start must be finite",
        ),
        (dict(y0=jnp.array([1j, 0.0])), r"y0 = .* it must be real numbers"),
        (dict(y0=np.array([True, False])), r"y0 = .* it must be real numbers"),
        (dict(y0="ab"), r"y0 = 'ab' is not allowed"),
        (dict(y0=None), r"y0 = None is not allowed"),
        (dict(t1=None), r"t1 = None is not allowed"),
        (dict(rtol=None), r"rtol = None is not allowed"),
        (dict(rtol=jnp.array([1e-9, 1e-9])), r"rtol = .* it must be a real number"),
        (dict(t1=5 + 1j), r"t1 = \(5\+1j\) is not allowed"),
        (dict(t0=jnp.zeros(2)), r"t0 = .* it must be a real number"),
        (dict(mode=jnp.array([0, 0, 0])), r"mode has shape \(3,\); rollax.solve takes one mode"),
        # (mode=None is allowed since the initial-mode hook: system.initial_mode decides)
        (dict(mode=1.5), r"mode = 1.5 must be an integer index"),
        (dict(ts="ab"), r"ts = 'ab' is not allowed"),
        (dict(solver=["dopri5"]), r"solver = \['dopri5'\] must be a diffrax solver or one of"),
        (dict(solver=diffrax.Euler()), r"solver = Euler\(\) is not allowed: it gives no error"),
        (dict(jump_ts=[1.0, np.nan]), r"jump_ts = \[1.0, nan\] .* must be finite times"),
    ],
)
def test_solve_refuses(kw, match):
    args = dict(y0=Y, t0=0.0, t1=5.0)
    args.update(kw)
    with pytest.raises(ValueError, match=match) as err:
        rollax.solve(Oscillator(), args.pop("y0"), args.pop("t0"), args.pop("t1"), **args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "name, value",
    [("t1", -1.0), ("t0", np.inf), ("t1", np.nan), ("rtol", 0.0), ("atol", 2.0), ("dt_max", 0.0)],
)
def test_traced_options_out_of_range_give_nan_and_nonfinite(name, value):
    # under vmap a bad t1 (or tolerance) cannot be refused before the run: that lane's results
    # are NaN with the status NONFINITE (it used to end "T_MAX" at t = -1; then a host-callback
    # raise, which kept the program out of the compile cache); the good lanes are untouched
    good = dict(t0=0.0, t1=5.0, rtol=1e-8, atol=1e-8, dt_max=1.0)

    def run(v):
        kw = dict(good, **{name: v})
        sol = rollax.solve(Oscillator(), Y, kw.pop("t0"), kw.pop("t1"), **kw)
        return sol.t, sol.y, sol.status

    t, y, status = jax.vmap(run)(jnp.array([good[name], value]))
    assert int(status[1]) == rollax.Status.NONFINITE
    assert np.isnan(np.asarray(t[1])) and np.all(np.isnan(np.asarray(y[1])))
    assert int(status[0]) != rollax.Status.NONFINITE and np.isfinite(np.asarray(t[0]))
    assert float(t[0]) <= 5.0


@pytest.mark.parametrize(
    "kw, match",
    [
        (
            dict(y0s=np.array([[1.0, 0.0], [np.inf, 0.0]])),
            r"row 1 of y0s = \[inf, 0.0\] is not allowed",
        ),
        (dict(y0s="ab"), r"y0s = 'ab' is not allowed"),
        (dict(valid=[True]), r"valid = \[True\] is not allowed: it must be 2 booleans"),
        (dict(valid="yes"), r"valid = 'yes' is not allowed"),
        (dict(progress=3), r"progress = 3 is not allowed"),
        (dict(t1=None), r"t1 = None is not allowed"),
    ],
)
def test_solve_ensemble_refuses(kw, match):
    args = dict(y0s=Y2, t1=5.0)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        rollax.solve_ensemble(Oscillator(), args.pop("y0s"), 0.0, args.pop("t1"), **args)


def test_padding_rows_may_hold_anything():
    y0s = np.array([[1.0, 0.0], [np.nan, 0.0]])
    sol = rollax.solve_ensemble(Oscillator(), y0s, 0.0, 5.0, valid=[True, False])
    assert sol.status[0] == rollax.Status.T_MAX


def test_counts_after_a_capped_reset_agree():
    # the run ends at the reset limit, after the reset: the counts are the new segment's
    ball = BouncingBall(n_bounces=5)
    for mr in (0, 2):
        a = rollax.solve(ball, Y, 0.0, 50.0, max_resets=mr)
        b = rollax.solve_ensemble(ball, Y[None], 0.0, 50.0, max_resets=mr)
        assert int(a.status) == int(b.status[0]) == rollax.Status.MAX_STEPS
        assert int(a.resets) == int(b.resets[0]) == mr + 1
        np.testing.assert_array_equal(np.asarray(a.counts), b.counts[0])
        np.testing.assert_array_equal(np.isnan(np.asarray(a.t_first)), np.isnan(b.t_first[0]))
        assert abs(float(a.t) - b.t[0]) < 1e-12


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: rollax.crossing("z", target=True), "event target = True"),
        (lambda: rollax.crossing("z", direction=True), "event direction = True"),
        (lambda: rollax.Event("a", kind="sideways"), r"event kind = 'sideways' must be one of"),
    ],
)
def test_event_descriptors_refuse(make, match):
    with pytest.raises(ValueError, match=match):
        make()
    assert rollax.Event("a", kind="crossing").kind == rollax.EventKind.CROSSING


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda A: rollax.sweep(BouncingBall(), [("e", 0, 1, 2)], t1=1.0),
            r"axis = \('e', 0, 1, 2\)",
        ),
        (lambda A: rollax.sweep(BouncingBall(), "e", t1=1.0), r"axes = 'e' is not allowed"),
        (
            lambda A: rollax.sweep(BouncingBall(), [A], y0={"z": "a", "v": 0.0}, t1=1.0),
            r"y0\['z'\] = 'a' is not allowed",
        ),
        (
            lambda A: rollax.sweep(BouncingBall(), [A], y0={"z": 1.0, "v": 0.0}, t1=1.0, store=3),
            r"store = 3 is not allowed",
        ),
        (
            lambda A: rollax.sweep(
                BouncingBall(e=np.array([0.5, 0.6])),
                [rollax.Axis("z", 1, 2, 2)],
                y0={"v": 0.0},
                t1=1.0,
            ),
            r"batch shape \(2,\); rollax.sweep takes one",
        ),
    ],
)
def test_sweep_refuses(call, match):
    with pytest.raises(ValueError, match=match):
        call(rollax.Axis("e", 0.1, 0.9, 2))
    with pytest.raises(TypeError, match="system must be a rollax.AbstractSystem"):
        rollax.sweep("p", [rollax.Axis("e", 0.1, 0.9, 2)], t1=1.0)
