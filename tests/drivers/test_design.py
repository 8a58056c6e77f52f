"""``rollax.design`` on a system whose Fisher information is known in closed form.

``x' = -k x + c``, observed directly: ``x(t) = c/k + (x0 - c/k) e^{-kt}``, so the weighted
residual Jacobian, and with it the information, the Schur complement and every loss, have
closed forms (computed here with numpy, independent of JAX). The cases are generated: random
rates, starts, noise levels, record lengths and priors (fixed seeds).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax._drivers._design import Knowledge, _marginal, combine, refine_design


class Relax(rollax.AbstractSystem):
    """x' = -k x + c (one state, two parameters)."""

    k: jax.Array = rollax.parameter(1.0)
    c: jax.Array = rollax.parameter(0.5)
    state_names = ("x",)

    def vector_field(self, t, y, mode):
        return -self.k * y + self.c

    def value(self, t, y):
        return y[:1]


def _jacobian(k, c, x0, t, sigma):
    """d x(t) / d (k, c, x0) / sigma, closed form: rows per time."""
    e = np.exp(-k * t)
    dk = -c / k**2 * (1 - e) - t * (x0 - c / k) * e
    dc = (1 - e) / k
    dx0 = e
    return np.stack([dk, dc, dx0], 1) / sigma


def _cases(n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        k = rng.uniform(0.3, 2.0)
        c = rng.uniform(-1.0, 1.0)
        sigma = 10 ** rng.uniform(-3, -1)
        T = rng.uniform(1.0, 6.0)
        t = np.linspace(0.0, T, int(rng.integers(20, 60)))
        C = rng.uniform(-3, 3, size=(int(rng.integers(3, 9)), 1))
        yield k, c, sigma, t, C


@pytest.mark.parametrize("criterion", ["D", "A", "k"])
def test_the_information_and_losses_are_the_closed_forms(criterion):
    for k, c, sigma, t, C in _cases(4, {"D": 0, "A": 1, "k": 2}[criterion]):
        sys_ = Relax(k=k, c=c)
        d = rollax.design(sys_, ["k", "c"], C, t, observe="value", sigma=sigma,
                          criterion=criterion, rtol=1e-10, atol=1e-10,
                          progress=False)  # fmt: skip
        for i, x0 in enumerate(C[:, 0]):
            J = _jacobian(k, c, x0, t, sigma)
            cov = np.linalg.inv(J.T @ J)[:2, :2]  # the full inverse's block: the Schur form
            np.testing.assert_allclose(d.covariance[i], cov, rtol=1e-5)
            np.testing.assert_allclose(d.std_errors_record[i], np.sqrt(np.diag(cov)), rtol=1e-5)
            want = {"D": np.linalg.slogdet(cov)[1], "A": np.trace(cov), "k": cov[0, 0]}
            assert d.loss[i] == pytest.approx(want[criterion], rel=1e-5, abs=1e-6)
        assert np.all(np.diff(d.loss[d.order]) >= 0) and d.best == int(np.argmin(d.loss))


def test_a_prior_adds_its_precision_and_a_shorter_record_holds_less():
    rng = np.random.default_rng(4)
    for k, c, sigma, t, C in _cases(3, 5):
        sk, sc = rng.uniform(0.01, 0.5, 2)
        dur = rng.uniform(0.3, 1.0, C.shape[0]) * t[-1]
        d = rollax.design(Relax(k=1.0, c=0.0), ["k", "c"], C, t, observe="value", sigma=sigma,
                          prior={"k": (k, sk), "c": (c, sc)}, duration=dur, rtol=1e-10,
                          atol=1e-10, progress=False)  # fmt: skip
        np.testing.assert_allclose(d.estimate, [k, c])
        for i, x0 in enumerate(C[:, 0]):
            keep = t <= dur[i] * (1 + 1e-12)
            J = _jacobian(k, c, x0, t[keep], sigma)
            L = J.T @ J
            L[:2, :2] += np.diag([1 / sk**2, 1 / sc**2])
            np.testing.assert_allclose(d.covariance[i], np.linalg.inv(L)[:2, :2], rtol=1e-5)
            assert d.rows[i] == keep.sum()


def test_a_fit_as_the_prior_carries_its_covariance_and_estimate():
    t = np.linspace(0, 3, 40)
    truth = Relax(k=0.8, c=0.3)
    obs = rollax.simulate_record(truth, [1.5], t, observe="value", sigma=0.01,
                                                  seed=1)  # fmt: skip
    fit = rollax.identify(Relax(), obs, ["k", "c"], y0=np.array([1.5]), robust=False,
                          profile=False, progress=False)  # fmt: skip
    d = rollax.design(Relax(), ["k", "c"], [[0.0], [2.0]], t, observe="value", sigma=0.01,
                      prior=fit, rtol=1e-10, atol=1e-10, progress=False)  # fmt: skip
    np.testing.assert_allclose(d.estimate, fit.values[:2])
    P = np.linalg.inv(fit.covariance[:2, :2])
    for i, x0 in enumerate([0.0, 2.0]):
        J = _jacobian(*fit.values[:2], x0, t, 0.01)
        L = J.T @ J
        L[:2, :2] += P
        np.testing.assert_allclose(d.covariance[i], np.linalg.inv(L)[:2, :2], rtol=1e-4)


def test_the_schur_complement_is_the_block_of_the_inverse():
    rng = np.random.default_rng(0)
    for _ in range(20):
        q, p = int(rng.integers(3, 8)), int(rng.integers(1, 3))
        A = rng.normal(size=(q + 4, q))
        F = A.T @ A
        P = np.diag(rng.uniform(0, 2, p))
        L = F.copy()
        L[:p, :p] += P
        np.testing.assert_allclose(_marginal(F, P, p), np.linalg.inv(L)[:p, :p], rtol=1e-8)


def test_an_unidentifiable_parameter_gives_an_infinite_loss_not_a_wrong_one():
    # c and x0 cannot be told apart from a record of one time... nor k from x0 = c/k (rest)
    t = np.linspace(0, 2, 20)
    d = rollax.design(Relax(k=1.0, c=0.5), ["k", "c"], [[0.5], [2.0]], t, observe="value",
                      sigma=0.01, fit_y0=False, progress=False)  # fmt: skip
    assert np.isinf(d.loss[0]) and np.isfinite(d.loss[1]) and d.best == 1


def test_combine_is_the_gaussian_update():
    rng = np.random.default_rng(1)
    for _ in range(10):
        p = 2
        A = rng.normal(size=(p, p))
        P0 = A @ A.T + np.eye(p)
        B = rng.normal(size=(p, p))
        C1 = B @ B.T + 0.1 * np.eye(p)
        t0, t1 = rng.normal(size=p), rng.normal(size=p)
        th, P, C = combine(t0, P0, t1, C1)
        P1 = np.linalg.inv(C1)
        np.testing.assert_allclose(P, P0 + P1)
        np.testing.assert_allclose(th, np.linalg.solve(P0 + P1, P0 @ t0 + P1 @ t1))
    # a vague start is the new estimate itself
    th, P, _ = combine(np.zeros(2), np.zeros((2, 2)), np.array([1.0, 2.0]), np.eye(2) * 0.01)
    np.testing.assert_allclose(th, [1.0, 2.0])


def test_the_refined_design_gradient_is_the_finite_difference_one():
    # the exact gradient (forward over forward) against central differences of design's loss
    from rollax._drivers._design import _loss_and_grad, _problem, _setup

    t = np.linspace(0, 3, 30)
    sys_ = Relax(k=0.7, c=0.2)
    params, paths, y0_index, obs, s = _setup(sys_, ("k", "c"), t, "value", 0.01, True, "D",
                                              1e-10, 1e-10, 4096)  # fmt: skip
    import dataclasses

    problem = dataclasses.replace(
        _problem(sys_, np.array([1.0]), obs, s, 1e-10, 1e-10, paths, (0,), 4096), with_event=False
    )
    for x0 in (-2.0, 0.4, 1.7):
        args = (jnp.array([x0]), jnp.array([0]), jnp.asarray(np.inf), problem, (0, 1, 2),
                jnp.zeros((2, 2)), 2, 0, 0)  # fmt: skip
        val, g, _ = _loss_and_grad(jnp.array([x0]), *args)
        h = 1e-4
        loss = lambda x: rollax.design(sys_, ["k", "c"], [[x]], t, observe="value",  # noqa: E731
                                       sigma=0.01, rtol=1e-10, atol=1e-10,
                                       progress=False).loss[0]  # fmt: skip
        fd = (loss(x0 + h) - loss(x0 - h)) / (2 * h)
        assert float(val) == pytest.approx(loss(x0), rel=1e-6)
        assert float(g[0]) == pytest.approx(fd, rel=1e-4, abs=1e-6)


def test_refine_moves_to_the_most_informative_start_in_the_box():
    # for x' = -k x + c, |x0 - c/k| scales the k-sensitivity: the best start is a box end
    t = np.linspace(0, 3, 30)
    sys_ = Relax(k=0.7, c=0.2)
    r = refine_design(sys_, ["k", "c"], [0.5], t, {"x": (-1.0, 2.0)}, observe="value",
                      sigma=0.01, progress=False)  # fmt: skip
    d = rollax.design(sys_, ["k", "c"], np.linspace(-1, 2, 61)[:, None], t, observe="value",
                      sigma=0.01, progress=False)  # fmt: skip
    assert r.loss <= d.loss.min() + 1e-6 and r.loss < r.loss_start
    assert r.y0[0] == pytest.approx(d.candidates[d.best, 0], abs=0.06)


def test_sequential_rounds_shrink_the_error_bars():
    t = np.linspace(0, 3, 30)
    truth = Relax(k=0.9, c=0.35)
    propose = lambda rng, k: rng.uniform(-2, 2, size=(16, 1))  # noqa: E731
    out = {}
    for strategy in ("design", "random"):
        out[strategy] = rollax.sequential_design(
            Relax(k=0.5, c=0.0), ["k", "c"], propose, t, observe="value", sigma=0.02,
            truth=truth, rounds=4, strategy=strategy, seed=3, progress=False,
        )  # fmt: skip
        se = out[strategy].std_errors
        assert np.all(np.diff(se, axis=0) <= 1e-12), se  # knowledge only grows
        assert np.all(np.abs(out[strategy].errors[-1]) < 4 * se[-1])
    # the designed rounds know at least as much as the random ones, round by round
    assert np.all(
        np.prod(out["design"].std_errors, 1) <= np.prod(out["random"].std_errors, 1) * 1.0001
    )


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(criterion="E"), "criterion = 'E' is not allowed"),
        (dict(params=["k", "k"]), "names a parameter twice"),
        (dict(params=["nope"]), "params: 'nope'"),
        (dict(candidates=[[1.0, 2.0]]), "candidates has shape"),
        (dict(candidates=[[math.nan]]), "is not finite"),
        (dict(sigma=-1.0), "noise levels must be finite and > 0"),
        (dict(prior={"k": (1.0, 0.0)}), "standard deviation > 0"),
        (dict(prior={"q": (1.0, 1.0)}), "'q' is not among params"),
        (dict(samples=4), "needs a prior"),
        (dict(duration=-1.0), "duration"),
        (dict(observe="nope"), "observe = 'nope'"),
        (dict(fit_y0=["y"]), "fit_y0: 'y'"),
        (dict(t=[0.0, 0.0, 1.0]), "not increasing|repeated"),
    ],
)
def test_bad_design_input_is_a_one_line_error(kw, msg):
    args = dict(params=["k", "c"], candidates=[[1.0]], t=np.linspace(0, 1, 10), observe="value",
                sigma=0.01)  # fmt: skip
    args.update(kw)
    with pytest.raises(ValueError, match=msg) as e:
        rollax.design(Relax(), progress=False, **args)
    assert "\n" not in str(e.value)


def test_knowledge_is_accepted_as_a_prior():
    t = np.linspace(0, 2, 20)
    d = rollax.design(Relax(), ["k", "c"], [[1.0]], t, observe="value", sigma=0.01,
                      prior=Knowledge(np.array([0.9, 0.1]), np.eye(2) * 4.0),
                      rtol=1e-10, atol=1e-10, progress=False)  # fmt: skip
    np.testing.assert_allclose(d.estimate, [0.9, 0.1])
    J = _jacobian(0.9, 0.1, 1.0, t, 0.01)
    L = J.T @ J
    L[:2, :2] += np.eye(2) * 4.0
    np.testing.assert_allclose(d.covariance[0], np.linalg.inv(L)[:2, :2], rtol=1e-5)


def test_failures_are_named_not_ranked_as_plain_infeasible():
    t = np.linspace(0, 3, 31)
    sys_ = Relax(k=1.0, c=-0.5)  # x falls through 0: sqrt(x) becomes nan part way
    d = rollax.design(sys_, ["k", "c"], [[1.0], [3.0]], t, observe=lambda s, tt, y: jnp.sqrt(y[:1]),
                      sigma=0.01, progress=False)  # fmt: skip
    assert d.bad_rows[0] > 0 and d.rows[0] + d.bad_rows[0] == 31
    assert any("non-finite prediction" in n for n in d.notes)
    with pytest.warns(UserWarning, match="every loss is infinite"):
        f = rollax.design(Relax(), ["k", "c"], [[1.0], [2.0]], t, observe="value", sigma=0.01,
                          max_steps=2, progress=False)  # fmt: skip
    assert f.failed.all() and not f.ends_early.any()
    assert any("could not be run" in n and "MAX_STEPS" in n for n in f.notes)
    # a start that cannot determine every parameter (at rest: k and c only through c/k)
    with pytest.warns(UserWarning, match="every loss is infinite"):
        s = rollax.design(Relax(k=1.0, c=0.5), ["k", "c"], [[0.5]], t, observe="value",
                          sigma=0.01, fit_y0=False, progress=False)  # fmt: skip
    assert any("cannot determine every parameter" in n for n in s.notes)
    r = refine_design(Relax(k=1.0, c=0.5), ["k", "c"], [0.5], t, {"x": (0.4, 0.6)},
                      observe="value", sigma=0.01, fit_y0=False, progress=False)  # fmt: skip
    assert r.status == "singular" and math.isinf(r.loss)
    text = d.summary()
    assert "y0 = [" in text and "log det" in text and "with the prior" in text


def test_simulate_record_says_why_there_is_no_record():
    t = np.linspace(0, 3, 31)
    with pytest.raises(ValueError, match="failed \\((NONFINITE|MAX_STEPS)\\): no record"):
        rollax.simulate_record(Relax(k=-1e3, c=0.0), [1.0], np.linspace(0, 30, 31),
                               observe="value", sigma=0.01)  # fmt: skip
    with pytest.warns(UserWarning, match="non-finite observable"):
        obs = rollax.simulate_record(Relax(k=1.0, c=-0.5), [1.0], t,
                                     observe=lambda s, tt, y: jnp.sqrt(y[:1]), sigma=0.01)  # fmt: skip
    assert obs.t.shape[0] < 31
    with pytest.raises(ValueError, match="seed = -1"):
        rollax.simulate_record(Relax(), [1.0], t, observe="value", sigma=0.01, seed=-1)


def test_the_prior_std_is_the_marginal_one():
    C = np.array([[4.0, 3.0], [3.0, 4.0]])
    d = rollax.design(Relax(), ["k", "c"], [[1.0]], np.linspace(0, 2, 20), observe="value",
                      sigma=0.01, prior=Knowledge(np.array([1.0, 0.5]), np.linalg.inv(C)),
                      progress=False)  # fmt: skip
    np.testing.assert_allclose(d.prior_std, [2.0, 2.0])


@pytest.mark.parametrize(
    "fn, kw, msg",
    [
        ("design", dict(duration=[1.0, 2.0, 3.0], candidates=[[1.0], [2.0]]), "one per candidate"),
        ("design", dict(duration="x"), "duration = 'x'"),
        ("design", dict(candidates="abc"), "candidates = 'abc'"),
        ("design", dict(duration=-1.0), "duration\\[0\\] = -1.0 must"),
        ("refine", dict(xtol="x"), "xtol = 'x'"),
        ("refine", dict(xtol=-1.0), "xtol = -1.0"),
        ("simulate", dict(seed="a"), "seed = 'a'"),
        ("discriminate", dict(truth="x"), "truth must be"),
        ("sequential", dict(propose=[[1.0]]), "propose = "),
        ("sequential", dict(fit_kw=3), "fit_kw = 3"),
    ],
)
def test_more_bad_input_is_a_one_line_error(fn, kw, msg):
    t = np.linspace(0, 1, 10)
    base = dict(observe="value", sigma=0.01)
    calls = {
        "design": lambda: rollax.design(
            Relax(), ["k", "c"], kw.pop("candidates", [[1.0]]), t, progress=False, **base, **kw
        ),  # fmt: skip
        "refine": lambda: refine_design(
            Relax(), ["k", "c"], [1.0], t, {"x": (0.0, 2.0)}, progress=False, **base, **kw
        ),  # fmt: skip
        "simulate": lambda: rollax.simulate_record(Relax(), [1.0], t, **base, **kw),
        "discriminate": lambda: rollax.discriminate(
            kw["truth"], Relax(), ["k"], [[1.0]], t, **base
        ),  # fmt: skip
        "sequential": lambda: rollax.sequential_design(
            Relax(),
            ["k"],
            kw.get("propose", lambda r, k: [[1.0]]),
            t,
            truth=Relax(),
            progress=False,
            **base,
            **{k: v for k, v in kw.items() if k != "propose"},
        ),  # fmt: skip
    }
    with pytest.raises((ValueError, TypeError), match=msg) as e:
        calls[fn]()
    assert "\n" not in str(e.value)


def test_experiment_settings_are_per_candidate_parameters_not_learned():
    # the forcing c is the experiment's setting (a control), k is learned with the start
    rng = np.random.default_rng(8)
    t = np.linspace(0, 4, 41)
    cs = rng.uniform(-1, 1, 6)
    C = rng.uniform(-2, 2, (6, 1))
    d = rollax.design(Relax(k=0.8), ["k"], C, t, observe="value", sigma=0.02,
                      settings={"c": cs}, rtol=1e-10, atol=1e-10, progress=False)  # fmt: skip
    for i in range(6):
        J = _jacobian(0.8, cs[i], C[i, 0], t, 0.02)[:, [0, 2]]  # (k, x0)
        np.testing.assert_allclose(d.covariance[i], np.linalg.inv(J.T @ J)[:1, :1], rtol=1e-5)
    np.testing.assert_array_equal(d.settings["c"], cs)
    with pytest.raises(ValueError, match="a setting is not learned"):
        rollax.design(Relax(), ["k", "c"], C, t, observe="value", sigma=0.02, settings={"c": 0.1},
                      progress=False)  # fmt: skip
    with pytest.raises(ValueError, match="one per candidate"):
        rollax.design(Relax(), ["k"], C, t, observe="value", sigma=0.02,
                      settings={"c": [0.1, 0.2]}, progress=False)  # fmt: skip
