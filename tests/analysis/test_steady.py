"""Steady motions of the ball on the rim, Sect. 3: (46)-(48), (54)-(59), Fig. 8 regions."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from _units import numbers_without_units
from rollax.analysis import steady as S
from rollax.cli import main
from rollax.models.rim import Rim

RIM = Rim()

# A spread of non-trivial steady motions over all four branches of Fig. 3.
_B = np.concatenate(
    [np.linspace(-3.0, -1.65, 5), np.linspace(-1.45, 1.45, 9), np.linspace(1.65, 3.0, 5)]
)
_W = np.array([-45.0, -8.0, -1.5, 2.0, 12.0, 60.0])
BETA0, OMEGA30 = (a.ravel() for a in np.meshgrid(_B, _W))


def test_steady_motions_are_equilibria():
    """f(x0) = 0 to round-off at (47)-(48) and at the trivial motions (46)."""
    xs = jax.vmap(RIM.steady_state)(jnp.asarray(BETA0), jnp.asarray(OMEGA30))
    f = np.asarray(jax.vmap(RIM.vector_field)(xs))
    # size of the terms that cancel in (33): gravity, centripetal and gyroscopic parts
    r, R, g, rho = RIM.r, RIM.R, RIM.g, RIM.rho
    D = R - rho * np.cos(BETA0)
    w2 = np.asarray(xs[:, 2])
    scale = g / r + r * OMEGA30**2 / D + r * np.abs(w2 * OMEGA30) / D
    assert np.all(np.abs(f[:, 0]) == 0.0)
    assert np.max(np.abs(f[:, 1]) / scale) < 1e-14
    assert np.all(np.abs(f[:, 2:]) == 0.0)  # proportional to w1 = 0
    for top in (True, False):
        for w20 in (-30.0, 0.0, 7.0):
            x = S.trivial_steady_state(w20, top)
            assert np.max(np.abs(np.asarray(RIM.vector_field(x)))) < 1e-14 * RIM.g / RIM.r


def test_h_matches_autodiff_jacobian():
    """h of (54) equals lambda^2 of the autodiff linearisation (50)-(53), relative 1e-8."""
    h = np.asarray(RIM.stability_h(BETA0, OMEGA30))
    h_ad = np.asarray(jax.jit(jax.vmap(lambda b, w: S.h_autodiff(RIM, b, w)))(BETA0, OMEGA30))
    np.testing.assert_allclose(h_ad, h, rtol=1e-8, atol=0)
    # structure (51): zero pattern of A
    A = np.asarray(S.steady_jacobian(RIM, 0.7, 15.0))
    mask = np.array([[0, 1, 0, 0], [1, 0, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0]], bool)
    assert np.all(A[~mask] == 0.0)
    # eigenvalues: 0, 0, +-sqrt(h); checked where |h| is not tiny next to ||A||^2
    As = np.asarray(jax.jit(jax.vmap(lambda b, w: S.steady_jacobian(RIM, b, w)))(BETA0, OMEGA30))
    lams = np.linalg.eigvals(As)
    n_checked = 0
    for A, lam, hv, b, w in zip(As, lams, h, BETA0, OMEGA30):
        if abs(hv) < 1e-6 * np.sum(A**2):
            continue
        lam = lam[np.argsort(np.abs(lam))]
        assert np.all(np.abs(lam[:2]) < 1e-7 * math.sqrt(abs(hv)))
        np.testing.assert_allclose(lam[2:] ** 2, [hv, hv], rtol=1e-8)
        n_checked += 1
    assert n_checked > 80
    np.testing.assert_array_equal(np.asarray(S.is_stable(RIM, BETA0, OMEGA30)), h < 0)
    lam = np.asarray(S.steady_eigenvalues(RIM, 0.7, 15.0))
    h0 = float(RIM.stability_h(0.7, 15.0))
    np.testing.assert_allclose(lam[2:] ** 2, [h0, h0], rtol=1e-8)
    assert np.max(np.abs(lam[:2])) < 1e-7 * math.sqrt(abs(h0))


def test_trivial_top_is_unstable():
    """x0^+ has the positive eigenvalue sqrt((g/rho)/(1+j)) for any omega20 (Sect. 3)."""
    lam0 = float(S.trivial_unstable_eigenvalue(RIM))
    for w20 in (0.0, 5.0, -40.0):
        lam = np.asarray(jnp.linalg.eigvals(S.jacobian(RIM, S.trivial_steady_state(w20))))
        assert np.max(lam.real) == pytest.approx(lam0, rel=1e-10)


def test_beta_star_and_beta_hat():
    """beta* = 0.2730 and beta-hat = 0.1444 rad (Fig. 5) and their meaning in terms of h."""
    bs, bh = S.beta_star(RIM), S.beta_hat(RIM)
    assert round(bs, 4) == 0.2730
    assert round(bh, 4) == 0.1444
    assert bh < bs
    # beta*: for large |omega30| the sign of h changes at |beta0| = beta*
    for sgn in (1, -1):
        assert float(RIM.stability_h(sgn * (bs - 1e-3), 1e4)) > 0
        assert float(RIM.stability_h(sgn * (bs + 1e-3), 1e4)) < 0
    # beta-hat: smallest |beta0| with a stable steady motion; min over omega30 of h is 0 there
    w = np.logspace(-1, 3, 40001)
    mins = [float(np.min(np.asarray(RIM.stability_h(b, w)))) for b in (bh - 1e-4, bh, bh + 1e-4)]
    assert mins[0] > 0 and mins[2] < 0
    assert abs(mins[1]) < 1e-3 * abs(mins[2])
    for b in np.linspace(-np.pi / 2 + 1e-3, bh - 1e-4, 200):
        assert float(np.min(np.asarray(RIM.stability_h(b, w)))) > 0 or b < -bs


def test_slip_condition_matches_rim_forces():
    """(56) equals mu F2 - sqrt(F1^2 + F3^2) of (30)-(32) from the rim model; mu = inf gives (57)."""
    xs = jax.vmap(RIM.steady_state)(jnp.asarray(BETA0), jnp.asarray(OMEGA30))
    for mu in (0.3, 1.0, 2.5):
        rim = Rim(mu=mu)
        ref = np.asarray(jax.vmap(rim.no_slip_margin)(xs)) / rim.m
        got = np.asarray(S.slip_margin(rim, BETA0, OMEGA30))
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
        F1 = np.asarray(jax.vmap(rim.contact_forces)(xs))[:, 0]
        assert np.all(F1 == 0.0)
    F2 = np.asarray(jax.vmap(RIM.normal_force)(xs)) / RIM.m
    np.testing.assert_allclose(
        np.asarray(S.slip_margin(RIM, BETA0, OMEGA30, math.inf)), F2, rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        np.asarray(S.fall_margin(RIM, BETA0, OMEGA30)), F2, rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_beta_tilde_limits(mu):
    """No-slip bands tend to |beta0 - pi/2| < arctan(mu) (small w30), |beta0| < arctan(mu) (large)."""
    bt = S.beta_tilde(mu)
    assert bt == pytest.approx(math.atan(mu))
    d = 2e-3
    for centre, w in ((np.pi / 2, 1e-3), (0.0, 1e3)):
        for side in (-1, 1):
            inside = centre + side * (bt - d)
            outside = centre + side * (bt + d)
            assert float(S.slip_margin(RIM, inside, w, mu)) > 0
            assert float(S.slip_margin(RIM, outside, w, mu)) < 0


def test_throw_speed_is_kinetic_energy():
    """(59): v^2 = |v_G|^2 + j r^2 |omega|^2 = 2 T / m with v_G from the rim model (13), (19)."""
    xs = jax.vmap(RIM.steady_state)(jnp.asarray(BETA0), jnp.asarray(OMEGA30))
    vG = np.asarray(jax.vmap(RIM.centre_velocity)(xs))
    xs = np.asarray(xs)
    two_T = np.sum(vG**2, 1) + RIM.j * RIM.r**2 * np.sum(xs[:, 1:] ** 2, 1)
    v = np.asarray(S.throw_speed(RIM, BETA0, OMEGA30))
    np.testing.assert_allclose(v**2, two_T, rtol=1e-12)


def _slsqp(rim, x0):
    def f(x):
        return float(S.throw_speed(rim, x[0], x[1])) ** 2

    def cons(x):
        F2, F3 = S.steady_forces(rim, x[0], x[1])
        return np.array([-float(rim.stability_h(x[0], x[1])), float(F2 - F3), float(F2 + F3)])

    res = minimize(
        f,
        x0,
        constraints=[{"type": "ineq", "fun": cons}],
        method="SLSQP",
        options=dict(ftol=1e-14, maxiter=500),
    )
    return math.sqrt(res.fun), res.x, cons(res.x)


def test_min_throw_speed_regions():
    """Smallest throw speeds of regions A, B, C (paper: about 1, 5, 7 m/s), on the boundary.

    Cross-checked against SLSQP in (beta0, omega30) started from a coarse grid minimum and
    bounded from above by a (beta0, omega30) grid. Active: stability for A and B, no-slip for C.
    """
    b = np.linspace(-np.pi, np.pi, 1201)[:, None]
    w = np.linspace(0.05, 60.0, 1200)[None, :]
    ok = np.asarray(S.realisable(RIM, b, w, 100.0))
    v = np.where(ok, np.asarray(S.throw_speed(RIM, b, w)), np.inf)
    expected = {"A": (1, ("stability",)), "B": (5, ("stability",)), "C": (7, ("no-slip",))}
    for name, (paper, active) in expected.items():
        m = S.min_throw_speed(RIM, name)
        lo, hi = S.REGIONS[name]
        assert lo < m.beta0 < hi
        assert round(m.v_min) == paper
        assert m.active == active
        sel = (b > lo) & (b < hi)
        vg = np.where(sel, v, np.inf)
        i = np.unravel_index(np.argmin(vg), vg.shape)
        assert m.v_min <= vg[i] < m.v_min + 0.02
        v_sq, x, cons = _slsqp(RIM, (b[i[0], 0], w[0, i[1]]))
        assert v_sq == pytest.approx(m.v_min, abs=1e-7)
        assert np.min(cons) > -1e-8
        # the minimiser is realisable just above v_min and the speed is attained there
        assert float(S.throw_speed(RIM, m.beta0, m.omega30)) == pytest.approx(m.v_min, rel=1e-12)
        # and it satisfies the constraints (to round-off, as one of them is active)
        assert float(RIM.stability_h(m.beta0, m.omega30)) < 1e-9
        assert float(S.slip_margin(RIM, m.beta0, m.omega30)) > -1e-9
    s = S.summary(RIM)
    assert s["v_min_A"] == pytest.approx(0.928, abs=5e-4)
    assert s["v_min_B"] == pytest.approx(4.722, abs=5e-4)
    assert s["v_min_C"] == pytest.approx(7.065, abs=5e-4)


def test_cli_summary(capsys, tmp_path):
    assert main(["steady", "--summary", "--mu", "1.0"]) == 0
    out = json.loads(capsys.readouterr().out)
    for k in ("beta_star", "beta_hat", "beta_tilde", "v_min_A", "v_min_B", "v_min_C"):
        assert isinstance(out[k], float)
    assert out["beta_tilde"] == pytest.approx(math.pi / 4)
    # every number has its unit (a new-user review: none had)
    units = out["units"]
    assert units["beta_star"] == "rad" and units["v_min_*"] == "m/s"
    assert units["parameters.g"] == "m/s^2" and set(out["parameters"]) == {
        k.split(".")[1] for k in units if k.startswith("parameters.")
    }
    assert numbers_without_units(out) == [], units  # (issue 56: checked, it had them all)
    # a different ball: larger friction enlarges the realisable set, region C gets cheaper
    assert main(["steady", "--summary", "--mu", "2.0", "--R", "0.3"]) == 0
    out2 = json.loads(capsys.readouterr().out)
    assert out2["beta_tilde"] == pytest.approx(math.atan(2.0))
    assert out2["beta_star"] == pytest.approx(math.acos((5 / 3) * 0.13 / 0.3))
    assert main(["steady", "--figure", "8", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "fig8.png").stat().st_size < 300_000
    data = np.load(tmp_path / "fig8.npz")
    assert data["realisable"].any() and float(data["v_min_A"]) == pytest.approx(out["v_min_A"])
    assert main(["steady", "--figure", "8"]) == 2  # needs --out


def test_bad_inputs():
    with pytest.raises(ValueError, match="beta0"):
        S.steady_state(RIM, np.pi / 2, 10.0)
    with pytest.raises(ValueError, match="omega30"):
        S.steady_state(RIM, 0.5, 0.0)
    with pytest.raises(ValueError, match="region"):
        S.min_throw_speed(RIM, "D")
    with pytest.raises(ValueError, match="v_throw"):
        S.realisable(RIM, 0.5, 10.0, -1.0)
    with pytest.raises(ValueError, match="mu"):
        S.slip_margin(RIM, 0.5, 10.0, -0.5)
    with pytest.raises(ValueError, match="mu"):
        S.beta_tilde(float("nan"))
    with pytest.raises(ValueError, match="R > \\(1 \\+ j\\) rho"):
        S.beta_star(Rim(R=0.2))
    with pytest.raises(ValueError, match="R > \\(1 \\+ j\\) rho"):
        S.beta_hat(Rim(R=0.2))
    with pytest.raises(ValueError):
        Rim(R=0.1)  # rho = 0.13 > R


def test_fig5_without_its_minimiser_is_refused_by_name(tmp_path):
    from rollax.plot import plot_steady_figure

    with pytest.raises(ValueError, match="omega30_h_min is needed for Fig. 5") as info:
        plot_steady_figure(5, {}, tmp_path / "fig5.png", rim_mu=1.0)
    assert "\n" not in str(info.value) and not (tmp_path / "fig5.png").exists()


def test_each_figure_records_its_parameters_and_units(tmp_path):
    # found by a new-user review: fig8.npz held no parameter and no unit, and the figure said
    # nothing of a non-default r or g
    from PIL import Image

    rng = np.random.default_rng(12)
    for k in range(2):
        rim = Rim(r=float(rng.uniform(0.09, 0.13)), g=float(rng.uniform(3.0, 10.0)))
        v = float(rng.uniform(6.0, 12.0))
        n = (8, 5)[k]
        png = S.write_figure(n, rim, str(tmp_path), v_throw=v)
        assert Image.open(png).size[0] > 300
        d = np.load(tmp_path / f"fig{n}.npz")  # (no pickle: the JSON is text)
        params, units = json.loads(str(d["parameters"])), json.loads(str(d["units"]))
        assert params["r"] == {"value": float(rim.r), "units": "m"}
        assert params["g"] == {"value": float(rim.g), "units": "m/s^2"}
        assert params["v_throw"]["value"] == v
        for name in d.files:
            if name in ("parameters", "units"):
                continue
            base = name.removesuffix("_coarse").removesuffix("_nonneg")
            assert base in units, f"{name} has no unit"
        # the line under the plot is built from the same values
        from rollax.plot import rim_parameters

        line = rim_parameters(rim)
        assert f"r = {float(rim.r):.4g} m" in line and f"g = {float(rim.g):.4g} m/s" in line
