"""rollax.Axis beyond linear grids (log spacing, any values) and the warning for a swept
parameter that the system does not use."""

import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from bouncing_ball import BouncingBall  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10, lanes=16)


def test_log_and_given_values_are_the_points_swept():
    rng = np.random.default_rng(2)
    z = rng.uniform(0.3, 3.0, 6)  # random samples, unsorted
    axes = [rollax.Axis.of("z", z), rollax.Axis("e", 0.1, 0.9, 4, spacing="log")]
    np.testing.assert_allclose(axes[1].values, np.geomspace(0.1, 0.9, 4))
    np.testing.assert_array_equal(axes[0].values, z)
    res = rollax.sweep(
        BouncingBall(n_bounces=2), axes, y0={"v": 0.0}, t1=30.0, progress=False, **TOL
    )
    zz, ee = np.meshgrid(axes[0].values, axes[1].values, indexing="ij")
    t2 = np.sqrt(2 * zz / 9.81) * (1 + 2 * ee)  # the second impact from rest
    np.testing.assert_allclose(res.solution["t"], t2, atol=1e-9)
    # one given point is an axis of one
    one = rollax.sweep(
        BouncingBall(n_bounces=2),
        [rollax.Axis.of("z", [1.0])],
        y0={"v": 0.0},
        t1=30.0,
        progress=False,
        **TOL,
    )
    assert one.outcome.shape == (1,)


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: rollax.Axis("e", -1.0, 1.0, 5, spacing="log"),
            r"^e lo = -1.0 is not allowed with log spacing: it must be > 0$",
        ),
        (
            lambda: rollax.Axis("e", 0.1, 1.0, 5, spacing="cubic"),
            r"^e spacing = 'cubic' is not allowed: it must be 'linear' or 'log'$",
        ),
        (lambda: rollax.Axis.of("e", [0.2, float("nan")]), r"^e values must be finite numbers"),
        (lambda: rollax.Axis.of("e", [0.2, 0.2]), r"^e values repeat a value"),
        (lambda: rollax.Axis.of("e", []), r"^e values have shape \(0,\)"),
        (lambda: rollax.Axis.of("e", ["a"]), r"^e values = \['a'\] must be numbers$"),
    ],
)
def test_bad_axes_are_refused_in_one_line(make, match):
    with pytest.raises(ValueError, match=match):
        make()


class Unused(rollax.AbstractSystem):
    """y' = -k y until y = c; ``d`` is read by nothing."""

    k: jax.Array = rollax.parameter(1.0)
    c: jax.Array = rollax.parameter(0.3)
    d: jax.Array = rollax.parameter(2.0)
    state_names = ("y",)
    events = (rollax.boundary("c"),)

    def vector_field(self, t, y, mode):
        return -self.k * y

    def event_values(self, t, y, mode):
        return y - self.c


def test_a_parameter_the_system_does_not_read_is_warned_about_once_per_axis():
    axes = [rollax.Axis("d", 1.0, 3.0, 3), rollax.Axis("k", 0.5, 2.0, 3)]
    with pytest.warns(
        UserWarning,
        match=r"^sweep axis 'd': Unused's vector field, events, "
        r"reset, initial mode and outcome do not use it",
    ) as w:
        res = rollax.sweep(Unused(), axes, y0=[1.0], t1=20.0, progress=False, **TOL)
    assert sum("sweep axis" in str(x.message) for x in w) == 1  # k is read: no warning
    # the runs indeed do not change along d
    np.testing.assert_array_equal(res.solution["t"][0], res.solution["t"][2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rollax.sweep(
            Unused(), [rollax.Axis("c", 0.2, 0.5, 3)], y0=[1.0], t1=20.0, progress=False, **TOL
        )


def test_a_parameter_read_only_by_one_mode_or_the_outcome_is_not_warned_about():
    # the bouncing ball's n_bounces is static; its e is read only by the reset map; a system
    # whose parameter only its outcome reads is still a real axis
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rollax.sweep(
            BouncingBall(n_bounces=1),
            [rollax.Axis("e", 0.2, 0.8, 3)],
            y0={"z": 1.0, "v": 0.0},
            t1=5.0,
            progress=False,
            **TOL,
        )

    class Judged(Unused):
        def outcome(self, sol):
            return jnp.where(sol.t > self.d, 1, 0).astype(jnp.int32)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rollax.sweep(
            Judged(), [rollax.Axis("d", 1.0, 3.0, 3)], y0=[1.0], t1=20.0, progress=False, **TOL
        )


def test_a_sweep_result_gives_names_and_a_solution_that_the_helpers_take():
    # the README's sweep paragraph: outcome and status names with the grid's shape, and a
    # batched Solution that rollax.classify and outcome_name take (a new user's stumble)
    ball = BouncingBall(n_bounces=1)
    res = rollax.sweep(
        ball,
        [rollax.Axis("z", 0.5, 2.0, 3), rollax.Axis("e", 0.3, 0.9, 2)],
        y0={"v": 0.0},
        t1=10.0,
        progress=False,
        **TOL,
    )
    assert res.outcome_name.shape == (3, 2) and set(res.outcome_name.ravel()) == {"DONE"}
    assert res.status_name.shape == (3, 2) and set(res.status_name.ravel()) == {"EVENT"}
    sol = res.as_solution()
    np.testing.assert_array_equal(np.asarray(rollax.classify(ball, sol)), res.outcome)
    np.testing.assert_array_equal(ball.outcome_name(sol), res.outcome_name)
