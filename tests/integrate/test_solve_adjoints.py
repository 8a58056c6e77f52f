"""``rollax.solve``'s differentiation methods by name, its route for systems without events
(plain diffrax: the same steps and values as the event route), and the continuous adjoint
(``adjoint="backsolve"``) against reverse mode, finite differences and a closed form.

Cases are drawn around the damped, driven oscillator ``x'' = -k x - c x' + a sin x``
(fixed seeds): other stiffnesses, dampings, drives, starts and horizons."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax


class Pendulum(rollax.AbstractSystem):
    """``x'' = -k x - c x' + a sin x``: no events, no resets."""

    state_names = ("x", "v")
    k: jax.Array = rollax.parameter(1.0)
    c: jax.Array = rollax.parameter(0.1)
    a: jax.Array = rollax.parameter(0.3)

    def vector_field(self, t, y, mode):
        return jnp.stack([y[1], -self.k * y[0] - self.c * y[1] + self.a * jnp.sin(y[0])])


class PendulumWatched(Pendulum):
    """The same field with a count-only crossing (x = 10, never reached): the event route."""

    @property
    def events(self):
        return (rollax.crossing("far", target=0),)

    def event_values(self, t, y, mode):
        return y[:1] - 10.0


def _cases(n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield (
            dict(k=rng.uniform(0.5, 3.0), c=rng.uniform(0.0, 0.5), a=rng.uniform(-0.5, 0.5)),
            np.array([rng.uniform(-1.5, 1.5), rng.uniform(-1.0, 1.0)]),
            float(rng.uniform(2.0, 30.0)),
        )


def _objective(params, y0, T, adjoint, cls=Pendulum, rtol=1e-10):
    sol = rollax.solve(cls(**params), y0, 0.0, T, rtol=rtol, atol=rtol, adjoint=adjoint)
    return sol.y[0] + 0.5 * sol.y[1]


def test_the_route_without_events_takes_the_event_routes_steps():
    # a system without events runs on plain diffrax; a never-firing event must change nothing
    for params, y0, T in _cases(8, seed=0):
        a = rollax.solve(Pendulum(**params), y0, 0.0, T, rtol=1e-9, atol=1e-9)
        b = rollax.solve(PendulumWatched(**params), y0, 0.0, T, rtol=1e-9, atol=1e-9)
        assert int(a.status) == int(b.status) == rollax.Status.T_MAX
        assert int(a.steps) == int(b.steps) and int(a.rejected) == int(b.rejected)
        np.testing.assert_allclose(np.asarray(a.y), np.asarray(b.y), rtol=0, atol=1e-13)
        assert float(a.t) == pytest.approx(T, abs=0)


def test_the_route_without_events_reports_its_limits():
    sol = rollax.solve(Pendulum(), jnp.array([1.0, 0.0]), 0.0, 1e4, max_steps=20)
    assert int(sol.status) == rollax.Status.MAX_STEPS
    # where it stopped, as the event route says (it was t = inf, y = inf)
    for params, y0, _ in _cases(5, seed=4):
        for n in (7, 20, 33):
            a = rollax.solve(Pendulum(**params), y0, 0.0, 1e4, max_steps=n)
            b = rollax.solve(PendulumWatched(**params), y0, 0.0, 1e4, max_steps=n)
            assert int(a.status) == int(b.status) == rollax.Status.MAX_STEPS
            assert 0.0 < float(a.t) < 1e4 and float(a.t) == pytest.approx(float(b.t), rel=1e-9)
            np.testing.assert_allclose(np.asarray(a.y), np.asarray(b.y), rtol=0, atol=1e-8)
    sol = rollax.solve(Pendulum(), jnp.array([1.0, 0.0]), 0.0, jnp.inf, max_steps=50)
    assert int(sol.status) == rollax.Status.MAX_STEPS


@pytest.mark.parametrize("adjoint", ["reverse", "direct"])
def test_reverse_gradients_without_events_match_forward_mode(adjoint):
    for params, y0, T in _cases(4, seed=1):
        k = params.pop("k")
        rev = jax.grad(lambda k_: _objective({**params, "k": k_}, y0, T, adjoint))(k)
        fwd = jax.jacfwd(lambda k_: _objective({**params, "k": k_}, y0, T, "forward"))(k)
        assert float(rev) == pytest.approx(float(fwd), rel=1e-9, abs=1e-12)


def test_backsolve_gradient_agrees_with_reverse_mode_and_finite_differences():
    worst = 0.0
    for params, y0, T in _cases(6, seed=2):
        p = {k: jnp.asarray(v) for k, v in params.items()}
        f = lambda q: _objective(q, y0, T, "backsolve")  # noqa: E731
        g_back = jax.grad(f)(p)
        g_rev = jax.grad(lambda q: _objective(q, y0, T, "reverse"))(p)
        for name in p:
            h = 1e-6
            up = _objective({**p, name: p[name] + h}, y0, T, "reverse")
            dn = _objective({**p, name: p[name] - h}, y0, T, "reverse")
            fd = float(up - dn) / (2 * h)
            scale = max(1.0, abs(float(g_rev[name])))
            assert abs(float(g_back[name]) - float(g_rev[name])) < 1e-6 * scale, name
            assert abs(float(g_rev[name]) - fd) < 1e-5 * scale, name
            worst = max(worst, abs(float(g_back[name]) - float(g_rev[name])) / scale)
    assert worst > 0  # the continuous adjoint is not the discrete one: they differ, slightly


def test_backsolve_gradient_of_the_initial_state_is_the_closed_form():
    # x'' = -k x: x(T) = x0 cos(w T) + v0 sin(w T) / w, w = sqrt(k)
    rng = np.random.default_rng(3)
    for _ in range(5):
        k, T = rng.uniform(0.5, 4.0), rng.uniform(1.0, 20.0)
        sys_ = Pendulum(k=k, c=0.0, a=0.0)
        g = jax.grad(
            lambda y: rollax.solve(sys_, y, 0.0, T, rtol=1e-11, atol=1e-11, adjoint="backsolve").y[
                0
            ]
        )(jnp.array([0.3, -0.2]))
        w = np.sqrt(k)
        np.testing.assert_allclose(np.asarray(g), [np.cos(w * T), np.sin(w * T) / w], atol=1e-7)


def test_backsolve_saves_states_at_given_times():
    ts = jnp.linspace(0.0, 5.0, 11)
    a = rollax.solve(Pendulum(), jnp.array([1.0, 0.0]), 0.0, 5.0, ts=ts, adjoint="backsolve")
    b = rollax.solve(Pendulum(), jnp.array([1.0, 0.0]), 0.0, 5.0, ts=ts)
    np.testing.assert_allclose(np.asarray(a.ys), np.asarray(b.ys), atol=1e-6)


@pytest.mark.parametrize(
    "cls, kw, what",
    [
        (PendulumWatched, {}, "events"),
        (Pendulum, {"dense": True}, "dense"),
        (Pendulum, {"save_events": 4}, "save_events"),
    ],
)
def test_backsolve_is_refused_where_it_cannot_apply(cls, kw, what):
    with pytest.raises(ValueError, match="backsolve") as info:
        rollax.solve(cls(), jnp.array([1.0, 0.0]), 0.0, 1.0, adjoint="backsolve", **kw)
    msg = str(info.value)
    assert "\n" not in msg and what in msg


def test_an_unknown_adjoint_is_refused_by_name():
    with pytest.raises(ValueError, match="adjoint = 'sideways' is not allowed") as info:
        rollax.solve(Pendulum(), jnp.array([1.0, 0.0]), 0.0, 1.0, adjoint="sideways")
    assert "backsolve" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("how", ["jacfwd", "jvp", "hessian"])
def test_forward_mode_with_the_reverse_adjoint_points_to_forward(how):
    """The default adjoint is reverse mode only: forward mode says which adjoint to pass, in
    one line (it was JAX's "can't apply forward-mode autodiff (jvp) to a custom_vjp
    function")."""

    def f(k):
        sol = rollax.solve(PendulumWatched(k=k), jnp.array([1.0, 0.0]), 0.0, 1.0)
        return sol.y[0]

    run = {
        "jacfwd": lambda: jax.jacfwd(f)(1.0),
        "jvp": lambda: jax.jvp(f, (1.0,), (1.0,)),
        "hessian": lambda: jax.hessian(f)(1.0),
    }[how]
    with pytest.raises(TypeError, match="adjoint='forward'") as info:
        run()
    assert "'reverse'" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "cls",
    # (with events: 135 s on a slow day here; CI budget, stop 66)
    [Pendulum, pytest.param(PendulumWatched, marks=pytest.mark.slow)],
    ids=["plain", "events"],
)
def test_vmapped_gradients_saved_at_ts_are_each_lanes_own(cls):
    """``jax.vmap`` of a gradient of states saved at ``ts``, over lanes that take different
    numbers of steps: each lane's gradient is the one it has alone. (A lane that had finished
    interpolated its zero-length steps as 0/0 = NaN: discarded forwards, but NaN in every
    lane's gradient; the batched friction identification got a NaN gradient at its start.)"""
    ts = jnp.linspace(0.5, 6.0, 12)

    def loss(p, y0):
        sol = rollax.solve(cls(k=p[0], c=p[1], a=p[2]), y0, 0.0, 6.0, ts=ts, rtol=1e-9, atol=1e-9)
        return jnp.sum(sol.ys[:, 0] ** 2) + jnp.sum(sol.ys[:, 1])

    rng = np.random.default_rng(7)
    # stiffnesses over two decades: the lanes take from tens to hundreds of steps
    p = jnp.asarray(
        np.stack(
            [
                np.exp(rng.uniform(np.log(0.3), np.log(30.0), 5)),
                rng.uniform(0.0, 0.5, 5),
                rng.uniform(-0.5, 0.5, 5),
            ],
            axis=1,
        )
    )
    y0 = jnp.asarray(rng.uniform(-1.0, 1.0, (5, 2)))
    batched = jax.vmap(jax.grad(loss, argnums=(0, 1)))(p, y0)
    steps = jax.vmap(
        lambda q, y: (
            rollax.solve(
                cls(k=q[0], c=q[1], a=q[2]), y, 0.0, 6.0, ts=ts, rtol=1e-9, atol=1e-9
            ).steps
        )
    )(p, y0)
    assert len(set(np.asarray(steps).tolist())) > 1  # (the lanes finish at different steps)
    for i in range(5):
        alone = jax.grad(loss, argnums=(0, 1))(p[i], y0[i])
        for b, a in zip(batched, alone):
            assert np.all(np.isfinite(np.asarray(b[i])))
            np.testing.assert_allclose(b[i], a, rtol=1e-9, atol=1e-12)
    # and the gradient is right: central differences of the first lane's stiffness
    h = 1e-5
    fd = (loss(p[0].at[0].add(h), y0[0]) - loss(p[0].at[0].add(-h), y0[0])) / (2 * h)
    assert float(batched[0][0, 0]) == pytest.approx(float(fd), rel=1e-5, abs=1e-7)
