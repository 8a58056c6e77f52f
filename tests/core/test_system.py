"""The parameter contract of rollax.AbstractSystem (rollax._core._system): a field declared
``rollax.parameter(shape=...)`` is batched by its declaration alone, not by its annotation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax


class _Spin(rollax.AbstractSystem):
    """y' = w x y: a rotation about w; with w = (0, 0, omega) the x axis turns at omega."""

    w: jax.Array = rollax.parameter((0.0, 0.0, 1.0), shape=(3,))
    state_names = ("x", "y", "z")

    def vector_field(self, t, y, mode):
        return jnp.cross(self.w, y)


def _turned(omega, t):
    return np.stack([np.cos(omega * t), np.sin(omega * t), 0 * omega], axis=-1)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_a_vector_parameter_is_shared_by_any_number_of_starts(n):
    # a length-3 parameter annotated jax.Array once counted as a batch of 3: 5 starts failed,
    # and 3 starts silently took one component each
    y0s = np.tile([1.0, 0.0, 0.0], (n, 1))
    sol = rollax.solve_ensemble(_Spin(), y0s, 0.0, 1.3)
    np.testing.assert_allclose(sol.y, _turned(np.ones(n), 1.3), atol=1e-7)
    assert _Spin().batch_shape() == ()


def test_per_start_vectors_ride_on_a_leading_axis():
    rng = np.random.default_rng(5)
    for n in (1, 3, 4):
        omega = rng.uniform(-3, 3, n)
        w = np.stack([0 * omega, 0 * omega, omega], axis=1)
        system = _Spin(w=w)
        assert system.batch_shape() == (n,)
        sol = rollax.solve_ensemble(system, np.tile([1.0, 0.0, 0.0], (n, 1)), 0.0, 0.7)
        np.testing.assert_allclose(sol.y, _turned(omega, 0.7), atol=1e-7)
        # rollax.solve takes one system: its own vector
        one = rollax.solve(_Spin(w=w[0]), jnp.asarray([1.0, 0.0, 0.0]), 0.0, 0.7)
        np.testing.assert_allclose(one.y, _turned(omega[:1], 0.7)[0], atol=1e-7)


@pytest.mark.parametrize("bad", [np.ones(2), np.ones((4, 2)), np.ones(()), np.ones((2, 3, 1))])
def test_a_value_of_another_shape_is_refused_by_name(bad):
    with pytest.raises(
        ValueError,
        match=r"_Spin.w has shape .*declared "
        r"rollax.parameter\(shape=\(3,\)\)",
    ):
        _Spin(w=bad)


@pytest.mark.parametrize("shape", [(-1,), "abc", 3])
def test_a_bad_declared_shape_is_refused(shape):
    with pytest.raises(ValueError, match=r"shape = .* must be a tuple of non-negative integers"):
        rollax.parameter(1.0, shape=shape)


def test_scalar_parameters_are_batched_on_any_leading_axis():
    class Decay(rollax.AbstractSystem):
        k: jax.Array = rollax.parameter(1.0)
        state_names = ("x",)

        def vector_field(self, t, y, mode):
            return -self.k * y

    rng = np.random.default_rng(2)
    for n in (1, 2, 6):
        k = rng.uniform(0.1, 2.0, n)
        sol = rollax.solve_ensemble(Decay(k=k), np.ones((n, 1)), 0.0, 1.0)
        np.testing.assert_allclose(sol.y[:, 0], np.exp(-k), rtol=1e-7)
    with pytest.raises(
        ValueError,
        match=r"Decay.k = nan is not allowed: a parameter must be "
        r"finite",
    ):
        Decay(k=np.nan)


def test_events_that_are_not_a_tuple_are_refused_at_definition():
    with pytest.raises(
        TypeError,
        match=r"E1.events = Event\(.*\) is not allowed: it must be a "
        r"tuple of rollax.Event",
    ):

        class E1(rollax.AbstractSystem):
            state_names = ("x",)
            events = rollax.crossing("zero")

            def vector_field(self, t, y, mode):
                return y


class _ListField(rollax.AbstractSystem):
    state_names = ("x", "v")

    def vector_field(self, t, y, mode):
        return [y[1], -y[0]]


class _FourValueReset(rollax.AbstractSystem):
    state_names = ("h", "v")
    events = (rollax.boundary("floor"),)

    def vector_field(self, t, y, mode):
        return jnp.stack([y[1], -9.81 * jnp.ones_like(y[1])])

    def event_values(self, t, y, mode):
        return y[:1]

    def reset(self, t, y, mode, aux, event):
        return t, y, mode, aux


@pytest.mark.parametrize(
    "system, msg",
    [
        (_ListField(), r"_ListField.vector_field returns a list; it must return one array"),
        (
            _FourValueReset(),
            r"_FourValueReset.reset returns 4 values; it must return "
            r"\(t, y, mode, aux, terminal\)",
        ),
    ],
)
@pytest.mark.parametrize("path", ["solve", "solve_ensemble"])
def test_functions_of_the_wrong_kind_are_named(system, msg, path):
    # they were a bare AttributeError ('list' object has no attribute 'dtype') and a bare
    # "not enough values to unpack (expected 5, got 4)"
    with pytest.raises(ValueError, match=msg):
        if path == "solve":
            rollax.solve(system, jnp.array([1.0, 0.0]), 0.0, 1.0)
        else:
            rollax.solve_ensemble(system, np.array([[1.0, 0.0]]), 0.0, 1.0)


# ---------------------------------------------------------------- the explicit contract
class _SharedTable(rollax.AbstractSystem):
    """x' = -k x + table . (1, x, x^2): ``table`` is a plain array field, not a parameter."""

    table: jax.Array
    k: jax.Array = rollax.parameter(1.0)
    state_names = ("x",)

    def vector_field(self, t, y, mode):
        return -self.k * y + jnp.dot(self.table, jnp.stack([1.0, y[0], y[0] ** 2]))[None] * 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_an_undeclared_array_is_shared_whatever_its_length(n):
    # not declared with rollax.parameter: never a batch axis, even when its length is the
    # number of starts (3) or the annotation says nothing (jax.Array)
    rng = np.random.default_rng(n)
    k = rng.uniform(0.2, 2.0, n)
    system = _SharedTable(table=rng.normal(size=3), k=k)
    assert system.batch_shape() == (n,)
    axes = jax.tree_util.tree_leaves(system.batch_axes(), is_leaf=lambda x: x is None)
    assert axes.count(0) == 1  # k alone
    sol = rollax.solve_ensemble(system, np.ones((n, 1)), 0.0, 0.9)
    np.testing.assert_allclose(sol.y[:, 0], np.exp(-0.9 * k), rtol=1e-7)


@pytest.mark.parametrize("n", [2, 3, 7])
def test_a_named_axis_takes_any_length(n):
    class Weights(rollax.AbstractSystem):
        w: jax.Array = rollax.parameter(shape=("n",))
        state_names = ("x",)

        def vector_field(self, t, y, mode):
            return -jnp.sum(self.w) * y

    rng = np.random.default_rng(n)
    w = rng.uniform(0.0, 1.0, n)
    assert Weights(w=w).batch_shape() == ()
    per_start = rng.uniform(0.0, 1.0, (4, n))
    assert Weights(w=per_start).batch_shape() == (4,)
    sol = rollax.solve_ensemble(Weights(w=per_start), np.ones((4, 1)), 0.0, 0.5)
    np.testing.assert_allclose(sol.y[:, 0], np.exp(-0.5 * per_start.sum(1)), rtol=1e-7)
    with pytest.raises(ValueError, match=r"Weights.w has shape \(\)"):
        Weights(w=1.0)


def test_the_built_in_models_declare_their_parameters():
    from rollax._core._system import parameter_fields

    rim = rollax.systems.RimSlipping()
    names = set(parameter_fields(rim))
    assert {"rim.mu", "rim.k_d", "rim.r", "delta", "u_layer"} <= names
    assert "max_switches" not in names  # static: structure
    import rollax.robot as robot

    ex = robot.paper_ball()
    names = set(parameter_fields(rollax.systems.RollingRobot(model=ex.model, control=ex.control)))
    assert {"model.masses", "model.inertia", "model.rails.0.u", "control.amplitude"} <= names


@pytest.mark.parametrize(
    "make, msg",
    [
        (
            lambda: rollax.systems.RimRolling(rim=_rim(r="x")),
            r"r = 'x' is not allowed: it must be a real number",
        ),
        (lambda: _rim(mu=np.nan), r"mu must be a real number, got NaN"),
        (lambda: _rim(k_d=np.inf), r"k_d = inf is outside the allowed range"),
        (
            lambda: rollax.systems.RimSlipping(delta=[1e-6, 2e-6, np.inf]),
            r"RimSlipping.delta = \[1e-06, 2e-06, inf\] is not allowed: a parameter must be finite",
        ),
    ],
)
def test_nested_parameters_are_checked_by_name(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


def _rim(**kw):
    from rollax.models.rim import Rim

    return Rim(**kw)


def test_mu_inf_is_a_parameter_value_and_batches():
    rim = _rim(mu=[1.0, np.inf, 0.4])
    system = rollax.systems.RimRolling(rim=rim)
    assert system.batch_shape() == (3,)


def test_a_sweep_axis_must_be_a_declared_parameter():
    with pytest.raises(ValueError, match=r"axis name = 'table' is not a state component or scalar"):
        rollax.sweep(
            _SharedTable(table=np.zeros(3)),
            [rollax.Axis("table", 0.0, 1.0, 2)],
            y0=[1.0],
            t1=1.0,
            progress=False,
        )


class _Watched(rollax.AbstractSystem):
    """An oscillator whose event values are the first ``k`` state components: ``k`` is a
    plain int field (static to the compiled solve), right only for ``k = 1``."""

    omega: jax.Array = rollax.parameter(1.0)
    k: int = 1
    state_names = ("x", "v")
    events = (rollax.crossing("zero", target=1),)

    def vector_field(self, t, y, mode):
        return jnp.stack([y[1], -(self.omega**2) * y[0]])

    def event_values(self, t, y, mode):
        return y[: self.k]


@pytest.mark.parametrize("seed", range(3))
def test_a_variant_of_a_checked_class_is_checked_again(seed):
    """The function checks are cached per system structure; a plain field's value is part of
    it (a k = 2 variant of a class checked with k = 1 got JAX's "body_fun must have the same
    input and output structure" instead of the clear error)."""
    rng = np.random.default_rng(seed)
    for k in [1, *rng.permutation([0, 1, 2]).tolist()]:
        system = _Watched(omega=float(rng.uniform(0.5, 2.0)), k=k)
        if k == 1:
            sol = rollax.solve(system, jnp.array([1.0, 0.0]), 0.0, 10.0, rtol=1e-10, atol=1e-10)
            assert float(sol.t) == pytest.approx(np.pi / (2 * float(system.omega)), rel=1e-8)
        else:
            with pytest.raises(ValueError, match=rf"event_values returns shape \({k},\)"):
                rollax.solve(system, jnp.array([1.0, 0.0]), 0.0, 10.0)
