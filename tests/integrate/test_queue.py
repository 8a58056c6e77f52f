"""The ensemble kernel's hybrid mode (rollax._integrate.queue with a reset map): a bouncing ball, whose
impact times are known in closed form."""

import jax.numpy as jnp
import numpy as np
import pytest

from rollax._integrate import queue
from rollax._core.events import BOUNDARY, EventSet

G, E = 9.81, 0.5  # gravity, coefficient of restitution


def _fall(t, y, args):
    return jnp.stack([y[1], -G + 0.0 * y[0]])


def _ground(t, y, args):
    # the height while falling; positive once the ball moves up again (continuous at the apex)
    return jnp.stack([y[0] + jnp.maximum(y[1], 0.0)])


GROUND = EventSet(_ground, (BOUNDARY,), (1,))


def _bounce(t, y, aux, event, args):
    """Newton's impact law v -> -e v; ``aux[0]`` counts impacts, the ``args``-th ends the run."""
    n = aux[0] + 1
    return t, jnp.stack([0.0 * y[0], -E * y[1]]), aux.at[0].set(n), n >= args


def _never(t, y, aux, event, args):
    return t, jnp.stack([0.0 * y[0], -E * y[1]]), aux, jnp.asarray(False)


def _impact_times(h0, v0, n):
    """Closed form: first landing from height h0 with upward speed v0, then flights 2 v / g."""
    v = np.sqrt(v0**2 + 2 * G * h0)
    t = (v0 + v) / G
    times = [t]
    for _ in range(n - 1):
        v *= E
        t += 2 * v / G
        times.append(t)
    return np.array(times)


@pytest.mark.parametrize("n_impacts", [1, 4])
def test_bounces_match_closed_form(n_impacts):
    y0 = np.array([[1.0, 0.0], [2.0, 1.0], [0.3, -2.0]])
    res = queue.run(
        _fall,
        GROUND,
        y0,
        jnp.asarray(n_impacts),
        t_max=100.0,
        rtol=1e-12,
        atol=1e-12,
        reset=_bounce,
        aux=np.zeros((3, 1)),
        lanes=16,
    )
    assert np.all(res.status == queue.EVENT) and np.all(res.event == 0)
    assert np.all(res.aux[:, 0] == n_impacts) and np.all(res.resets == n_impacts - 1)
    for i, (h, v) in enumerate(y0):
        t_exact = _impact_times(h, v, n_impacts)[-1]
        assert abs(res.t[i] - t_exact) < 1e-10
        # the terminal record is the state the reset map returned: on the ground, going up
        v_land = np.sqrt(v**2 + 2 * G * h) * E ** (n_impacts - 1)
        assert abs(res.y[i, 1] - E * v_land) < 1e-8


def test_event_at_the_start_is_reset_at_once():
    # on the ground moving down: the boundary is violated at t0, the reset applies there
    res = queue.run(
        _fall,
        GROUND,
        np.array([[0.0, -2.0]]),
        jnp.asarray(2),
        t_max=10.0,
        rtol=1e-12,
        atol=1e-12,
        reset=_bounce,
        aux=np.zeros((1, 1)),
        lanes=16,
    )
    assert res.status[0] == queue.EVENT and res.aux[0, 0] == 2
    assert abs(res.t[0] - 2 * (E * 2.0) / G) < 1e-10


def test_reset_limit_and_t_max_are_reported():
    # Zeno: the impacts accumulate at t = t1 (1 + 2e / (1 - e)); a reset cap stops it first
    res = queue.run(
        _fall,
        GROUND,
        np.array([[1.0, 0.0]]),
        None,
        t_max=100.0,
        reset=_never,
        max_resets=5,
        lanes=16,
    )
    assert res.status[0] == queue.FAILED_STEPS and res.resets[0] == 6
    # before the first impact: t_max
    res = queue.run(_fall, GROUND, np.array([[1.0, 0.0]]), None, t_max=0.2, reset=_never, lanes=16)
    assert res.status[0] == queue.T_MAX and res.resets[0] == 0
    assert abs(res.y[0, 0] - (1.0 - 0.5 * G * 0.2**2)) < 1e-8


def test_hybrid_options_are_validated():
    y0 = np.array([[1.0, 0.0]])
    with pytest.raises(ValueError, match="aux"):
        queue.run(_fall, GROUND, y0, None, t_max=1.0, aux=np.zeros((1, 2)))
    with pytest.raises(ValueError, match="n_error"):
        queue.run(_fall, GROUND, y0, None, t_max=1.0, n_error=3)
    for bad in (-1, 2, 1.0, True):
        with pytest.raises(ValueError, match="n_constant"):
            queue.run(_fall, GROUND, y0, None, t_max=1.0, n_constant=bad)


def _fall_scaled(t, y, args):
    # the third component is a constant (a 'mode': the gravity's scale), of zero rate
    return jnp.stack([y[1], -G * y[2], 0.0 * y[2]])


def _bounce_scaled(t, y, aux, event, args):
    # each impact halves the gravity's scale: the constant changes only at a reset
    n = aux[0] + 1
    return t, jnp.stack([0.0 * y[0], -E * y[1], 0.5 * y[2]]), aux.at[0].set(n), n >= args


@pytest.mark.parametrize("n_constant", [0, 1])
def test_constant_components_are_carried(n_constant):
    # n_constant = 1 carries the scale through each step instead of integrating it: the same
    # impacts as integrating its zero rate, and as the closed form (flights 2 v / (g s))
    y0 = np.array([[1.0, 0.0, 1.0], [2.0, 1.0, 2.0]])
    res = queue.run(
        _fall_scaled,
        GROUND,
        y0,
        jnp.asarray(3),
        t_max=100.0,
        rtol=1e-12,
        atol=1e-12,
        reset=_bounce_scaled,
        aux=np.zeros((2, 1)),
        lanes=16,
        n_error=2,
        n_constant=n_constant,
    )
    assert np.all(res.status == queue.EVENT) and np.all(res.aux[:, 0] == 3)
    for i, (h, v, s) in enumerate(y0):
        g = G * s
        v_land = np.sqrt(v**2 + 2 * g * h)
        t = (v + v_land) / g
        for _ in range(2):  # each bounce: up at e v_land, with half the gravity
            g, v_land = 0.5 * g, E * v_land
            t += 2 * v_land / g
        assert abs(res.t[i] - t) < 1e-10
        assert res.y[i, 2] == s / 8  # the constant is exact: three halvings, never integrated


def test_size_classes_bound_the_padding():
    """Every n gets the smallest class 2^k (5, 6, 7, 8) at or above it (at least the floor):
    four classes per octave, so the padding above the floor is under a quarter of n."""
    rng = np.random.default_rng(0)
    ns = np.unique(np.concatenate([rng.integers(1, 1 << 22, 400), [1, 4095, 4096, 4097]]))
    classes = {m << k for k in range(30) for m in (5, 6, 7, 8)}
    for n in ns:
        w = queue.size_class(int(n))
        assert w >= max(n, queue.SIZE_FLOOR)
        assert w == queue.SIZE_FLOOR or w in classes
        if n > queue.SIZE_FLOOR:
            assert w - n < n / 4 and min(c for c in classes if c >= n) == w
    assert queue.size_class(10, floor=1) == 10 and queue.size_class(9, floor=1) == 10
