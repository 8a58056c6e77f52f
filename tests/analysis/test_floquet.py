"""Floquet analysis of the linear periodic system (62): monodromy, multipliers, Fig. 9."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from rollax.cli import main
from rollax.analysis.floquet import FloquetSystem, multipliers_of, stability_map
from rollax.models.rim import Rim

STANDARD = FloquetSystem.from_rim(Rim())


def _scipy_monodromy(rho_R, j):
    """Independent route: M from scipy's DOP853 on (62) written out by hand."""

    def f(b, y):
        d = 1.0 - rho_R * np.cos(b)
        Y = y.reshape(2, 2)
        A = np.array([[0.0, 1.0 / d], [-j / (1 + j), -rho_R * np.sin(b) / d]])
        return (A @ Y).ravel()

    sol = solve_ivp(f, (0.0, 2 * np.pi), np.eye(2).ravel(), method="DOP853", rtol=1e-12, atol=1e-13)
    return sol.y[:, -1].reshape(2, 2)


def test_standard_ball_is_unstable():
    """Proposition 8: the standard ball lies in U, multipliers real with |mu1| < 1 < |mu2|."""
    M = np.asarray(STANDARD.monodromy())
    np.testing.assert_allclose(M, _scipy_monodromy(0.13 / 0.225, 2 / 3), rtol=1e-9, atol=1e-10)
    assert np.linalg.det(M) == pytest.approx(1.0, abs=1e-10)  # Liouville: tr A integrates to 0
    mu = np.asarray(STANDARD.multipliers())
    assert np.all(np.abs(mu.imag) == 0.0)
    assert abs(mu[0]) < 1.0 < abs(mu[1])
    assert mu[0] * mu[1] == pytest.approx(1.0, abs=1e-10)
    np.testing.assert_allclose(
        np.sort(np.abs(mu)), np.sort(np.abs(np.linalg.eigvals(M))), rtol=1e-12
    )
    assert float(STANDARD.stability_index()) > 0
    # a numerical trajectory of (62) grows like |mu2|^n over n periods
    Phi = np.asarray(STANDARD.fundamental_matrix(6 * np.pi))
    np.testing.assert_allclose(Phi, np.linalg.matrix_power(M, 3), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("j", [0.1, 0.3, 0.5, 2 / 3])
def test_small_ball_limit(j):
    """rho/R -> 0: (62) is a harmonic oscillator, tr M = 2 cos(2 pi sqrt(j/(1+j))), |mu| = 1."""
    fs = FloquetSystem(rho_R=1e-7, j=j)
    k = np.sqrt(j / (1 + j))
    assert float(jnp.trace(fs.monodromy())) == pytest.approx(2 * np.cos(2 * np.pi * k), abs=1e-6)
    mu = np.asarray(fs.multipliers())
    np.testing.assert_allclose(np.abs(mu), [1.0, 1.0], atol=1e-6)


def test_stability_map_vmapped():
    """The vmapped map equals the one-at-a-time monodromy traces; S at small rho/R, U at the ball."""
    rho_R = np.array([0.05, 0.3, 0.5778, 0.9])
    j = np.array([0.05, 0.2, 2 / 3])
    tr = np.asarray(stability_map(rho_R, j))
    assert tr.shape == (3, 4)
    for a, jj in enumerate(j):
        for b, p in enumerate(rho_R):
            ref = float(jnp.trace(FloquetSystem(rho_R=p, j=jj).monodromy()))
            assert tr[a, b] == pytest.approx(ref, rel=1e-6, abs=1e-7)
    assert abs(tr[0, 0]) < 2 and abs(tr[1, 0]) < 2  # small ball: stable
    assert abs(tr[2, 2]) > 2  # standard ball: unstable
    m = np.asarray(multipliers_of(jnp.array([[2.0, 1.0], [1.0, 1.0]])))
    np.testing.assert_allclose(m.real, [(3 - 5**0.5) / 2, (3 + 5**0.5) / 2])


def test_cli(capsys, tmp_path):
    assert main(["floquet", "--out", str(tmp_path), "--n-rho", "8", "--n-j", "6"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stable"] is False
    assert out["abs_multipliers"][0] < 1 < out["abs_multipliers"][1]
    assert (tmp_path / "fig9.png").stat().st_size < 300_000
    data = np.load(tmp_path / "fig9.npz")
    assert data["trace"].shape == (6, 8)
    saved = json.loads((tmp_path / "floquet_summary.json").read_text())
    assert saved["trace"] == pytest.approx(out["trace"])


def test_bad_inputs():
    with pytest.raises(ValueError, match="rho_R"):
        FloquetSystem(rho_R=1.2, j=0.5)
    with pytest.raises(ValueError, match="rho_R"):
        FloquetSystem(rho_R=0.0, j=0.5)
    with pytest.raises(ValueError, match="j"):
        FloquetSystem(rho_R=0.5, j=0.0)
    with pytest.raises(ValueError, match="rho_R"):
        stability_map(np.array([0.5, 1.0]), np.array([0.5]))
    with pytest.raises(ValueError, match="j"):
        stability_map(np.array([0.5]), np.array([-0.1, 0.5]))
