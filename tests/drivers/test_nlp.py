"""rollax._drivers._nlp: SLSQP from several starts at once, their evaluations batched by vmap."""

import jax.numpy as jnp
import numpy as np
import pytest

from rollax._drivers import _nlp


def _fun(x, a):
    """Rosenbrock's residuals (and a small third), on a sphere, in a half-space."""
    r = jnp.stack([a * (x[1] - x[0] ** 2), 1.0 - x[0], 0.1 * x[2]])
    h = jnp.stack([x @ x - 1.5])
    g = jnp.stack([x[0] + x[1] - 1.6, -x[2] - 0.5])
    return r, h, g


X0 = np.array([[-1.2, 1.0, 0.3], [0.5, -0.5, -0.2], [2.0, 2.0, 1.0]])


@pytest.mark.parametrize("rows", [None, 1, 2])  # all in one vmap; one, two per device
def test_starts_together_are_the_starts_one_at_a_time_to_the_bit(rows):
    together = _nlp.minimize(_fun, X0, 10.0, tol=1e-9, kkt_tol=1e-8, rows=rows)
    alone = [_nlp.minimize(_fun, x, 10.0, tol=1e-9, kkt_tol=1e-8) for x in X0]
    # the starts stop after different numbers of iterations (the batch pads the finished ones)
    assert len({r.iterations for r in together}) == 3
    for a, b in zip(together, alone):
        assert a.converged and np.array_equal(a.x, b.x) and a.f == b.f
        assert (a.iterations, a.evaluations) == (b.iterations, b.evaluations)
        np.testing.assert_array_equal(a.history.f, b.history.f)
    # two optima (x3 = +-0.461): the constraint x3 >= -0.5 leaves both
    for r in together:
        np.testing.assert_allclose(r.x[:2], [0.86033737, 0.73966263], atol=1e-7)
        assert abs(r.x @ r.x - 1.5) < 1e-9


def test_progress_names_the_start_and_counts_its_iterations():
    seen: dict = {}
    res = _nlp.minimize(
        _fun,
        X0,
        10.0,
        tol=1e-9,
        kkt_tol=1e-8,
        progress=lambda k, info: seen.setdefault(info["start"], []).append(k),
    )
    assert sorted(seen) == [0, 1, 2]
    for i, r in enumerate(res):
        assert seen[i] == list(range(len(r.history.f)))


def test_an_error_in_one_start_reaches_the_caller():
    def progress(k, info):
        if info["start"] == 1 and k == 2:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        _nlp.minimize(_fun, X0, 10.0, progress=progress)


def test_least_squares_multipliers_measure_kkt_with_dependent_active_constraints():
    # min (x0 - 2)^2 + x1^2 s.t. x0 <= 1 imposed twice (the same row: no unique multipliers),
    # x0 + x1 = 1, and x1 >= -5 (inactive): the KKT point is x = (1, 0)
    x = np.array([1.0, 0.0])
    grad_f = np.array([2.0 * (x[0] - 2.0), 2.0 * x[1]])
    Jh = np.array([[1.0, 1.0]])
    Jg = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, -1.0]])
    g = np.array([x[0] - 1.0, x[0] - 1.0, -x[1] - 5.0])
    nu, lam = _nlp._multipliers(grad_f, Jh, Jg, g, 1e-6)
    assert _nlp._kkt(grad_f, Jh, Jg, g, nu, lam) < 1e-12
    assert np.all(lam >= 0.0) and lam[2] == 0.0 and abs(lam[0] + lam[1] - 2.0) < 1e-12
    # multipliers of the wrong sign do not fit: a point that is not a KKT point is seen as one
    x = np.array([0.5, 0.5])  # feasible, x0 <= 1 inactive, grad f not normal to x0 + x1 = 1
    grad_f = np.array([2.0 * (x[0] - 2.0), 2.0 * x[1]])
    g = np.array([x[0] - 1.0, x[0] - 1.0, -x[1] - 5.0])
    nu, lam = _nlp._multipliers(grad_f, Jh, Jg, g, 1e-6)
    assert _nlp._kkt(grad_f, Jh, Jg, g, nu, lam) > 1.0
    # complementarity counts: a multiplier on an inactive constraint is a residual
    assert (
        _nlp._kkt(np.zeros(2), np.zeros((0, 2)), Jg[2:], g[2:], np.zeros(0), np.array([1.0])) == 5.5
    )  # lam |g| = 5.5 > |J_g^T lam| = 1


@pytest.mark.parametrize("rows", ["other", 0, -2, 1.5, True])
def test_a_bad_rows_is_refused_by_name(rows):
    with pytest.raises(ValueError, match="rows = .* is not allowed") as info:
        _nlp.minimize(_fun, X0, 10.0, rows=rows)
    assert "\n" not in str(info.value)


def test_a_passed_deadline_stops_every_start_after_one_iteration_not_converged():
    import time

    res = _nlp.minimize(_fun, X0, 10.0, tol=1e-9, kkt_tol=1e-8, deadline=time.perf_counter())
    for r in res:
        assert r.stopped and not r.converged and r.iterations <= 1
        assert r.message == "time limit reached" and len(r.history.f) == 1
    free = _nlp.minimize(_fun, X0[0], 10.0, tol=1e-9, kkt_tol=1e-8, deadline=None)
    assert free.converged and not free.stopped
