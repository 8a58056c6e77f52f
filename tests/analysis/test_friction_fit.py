"""Gradient fitting of the harmonic and Pade models; parameter identification through the solver."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.friction import ExactHertz, ExactUniform, HarmonicModel, PadeModel
from rollax.analysis.friction_fit import (
    constrained_harmonic,
    disc_trajectory,
    fit_error,
    fit_harmonic,
    fit_pade,
    identify_disc,
)
from rollax.models.friction.sliding import SlidingBody

U = ExactUniform()


def test_harmonic_converges_and_gradient_fit_matches_quadrature():
    errs = []
    for N in range(1, 7):
        h = HarmonicModel.from_law(U, N)
        errs.append(fit_error(h, U)["rms_Q"] + fit_error(h, U)["rms_T"])
        if N == 3:
            m, _ = fit_harmonic(U, N)
            # same objective (L2 over theta) -> same minimiser (83)
            np.testing.assert_allclose(m.c, h.c, atol=1e-9)
            np.testing.assert_allclose(m.s, h.s, atol=1e-9)
    assert all(b < a for a, b in zip(errs, errs[1:])), errs  # monotone convergence N = 1..6
    assert errs[-1] < 0.15 * errs[0]
    # (94): C, S of N = 2 from c, s
    h = HarmonicModel.from_law(U, 2)
    c, s = np.asarray(h.c), np.asarray(h.s)
    np.testing.assert_allclose(h.C_coeffs(), [c[0] + c[1], -4 * c[1]], atol=1e-15)
    np.testing.assert_allclose(h.S_coeffs(), [s[0] + 3 * s[1], -4 * s[1]], atol=1e-15)


def test_pade_matches_end_values_and_slopes():
    for law in (ExactHertz(),):
        alpha, beta, gamma, delta = PadeModel.end_conditions(law)
        p, loss = fit_pade(law, 2)
        assert p.poles_free()
        # exact at both ends, values and slopes (Fig. 10)
        np.testing.assert_allclose([p.Q_eps(0.0), p.T_eps(0.0)], [0.0, 1.0], atol=1e-15)
        dQ = jax.grad(p.Q_eps)(0.0)
        dT = jax.grad(p.T_eps)(0.0)
        assert float(dQ) == pytest.approx(float(jax.grad(law.Q_eps)(0.0)), abs=1e-12)
        assert float(dT) == pytest.approx(float(jax.grad(law.T_eps)(0.0)), abs=1e-12)
        big = 1e6
        assert float(big * p.T_eps(big)) == pytest.approx(gamma, rel=1e-5)
        assert float(big * (p.Q_eps(big) - 1)) == pytest.approx(beta, abs=1e-4)
        # the harmonic model of the same degree is better on average (Fig. 10)
        assert fit_error(HarmonicModel.from_law(law, 2), law)["rms_Q"] < fit_error(p, law)["rms_Q"]
    p3, _ = fit_pade(law, 3)  # one degree more: better, still pole-free
    assert p3.poles_free() and fit_error(p3, law)["rms_Q"] < fit_error(p, law)["rms_Q"]
    assert float(p3.Q_eps(0.0)) == 0.0 and float(p3.T_eps(0.0)) == 1.0
    with pytest.raises(ValueError, match="degree"):
        fit_pade(U, 1)


@pytest.mark.slow
def test_identify_mu_and_coefficients_from_noisy_disc_trajectory():
    h = HarmonicModel.from_law(U, 2)
    kw = dict(P=1.0, R=1.0, rho=U.rho, kappa=U.kappa)
    true = constrained_harmonic(0.3, h.c[1:], h.s[1:], **kw)
    x0 = jnp.array(
        [[1.0, 0.2, 1.5], [2.0, 0.0, 0.3], [0.2, 0.1, 2.0]]
    )  # slip-, mixed-, spin-dominated
    ts = jnp.linspace(0.05, 1.5, 25)
    xs = jax.vmap(lambda x: disc_trajectory(SlidingBody(true), x, ts))(x0)
    noisy = xs + 1e-3 * jax.random.normal(jax.random.PRNGKey(0), xs.shape)
    mu, c, s, loss = identify_disc(ts, noisy, x0, 2, mu0=0.5, law_kw=kw, iters=40)
    assert mu == pytest.approx(0.3, abs=5e-3)
    np.testing.assert_allclose(c, true.c, atol=5e-3)
    np.testing.assert_allclose(s, true.s, atol=5e-3)
    assert loss < 2e-6  # the noise variance is 1e-6
