"""The slipping ball on the rim (rollax.models.slip): (41)-(42), limit directions (75)-(81), the
rolling <-> slipping hybrid (Sect. 5.2.2, rollax.systems.RimSlipping) on rollax.solve
(simulate_slip) and on the batched kernel (rollax.analysis.basin.simulate with slip=)."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
import pytest

from rollax.analysis import basin

from rollax.models import slip
from rollax.analysis.basin import IN, OUT, PERIODIC, UNDECIDED
from rollax.models.rim import Rim
from rollax.models.slip import CHATTERING, ROLLING, SLIPPING, SlipSettings
from rollax.analysis.slip import simulate_slip

RIM = Rim()  # mu = 1, Table 1 (docs/physics-notes.md)
N_BATCH = 256  # one kernel shape for every batched sweep in this file


def _random_states(rng, n, u_scale=1.0):
    x = np.stack(
        [
            rng.uniform(0.2, 2.9, n),
            rng.uniform(-20, 20, n),
            rng.uniform(-110, 110, n),
            rng.uniform(-25, 25, n),
        ],
        1,
    )
    return x, rng.normal(size=(n, 2)) * u_scale


@eqx.filter_jit  # the switch caps are static: they size the run's loop
def _simulate_many(rim, settings, y0s, mode0s, t_max):
    return jax.vmap(lambda y, m: simulate_slip(rim, y, settings, mode0=m, t_max=t_max))(y0s, mode0s)


def _diffrax(rim, starts, settings=SlipSettings(), t_max=60.0, mode0=ROLLING):
    y0s = (
        np.concatenate([starts, np.zeros((len(starts), 2))], 1) if starts.shape[1] == 4 else starts
    )
    r = _simulate_many(
        rim, settings, jnp.asarray(y0s), jnp.full(len(y0s), mode0, jnp.int32), jnp.asarray(t_max)
    )
    return {k: np.asarray(v) for k, v in r._asdict().items()}


def _sweep(rim, starts, settings=SlipSettings()):
    """The batched kernel's hybrid runs (rollax.analysis.basin.simulate with slip=)."""
    return basin.simulate(rim, starts, slip=settings, max_steps=8192)


def _section_sample(n, w2, seed):
    rng = np.random.default_rng(seed)
    return np.stack(
        [rng.uniform(0.8, 1.8, n), rng.uniform(-20, 20, n), np.full(n, w2), np.full(n, 10.0)], 1
    )


# ------------------------------------------------------------------ equations of motion
def _newton_euler_first_principles(rim, y, alpha=0.3):
    """(F2, beta-dot, w-dot, u-dot) from the Newton-Euler equations (21)-(25) and Coulomb's law
    (29), built from the geometry (2)-(4), (12), (17) with autodiff, independent of (19)-(20),
    (26)-(27) and (41)-(42)."""
    m, r, j, g, mu = rim.m, rim.r, rim.j, rim.g, rim.mu

    def frame(a, b):
        n1 = jnp.stack([jnp.cos(a), jnp.sin(a), 0.0])
        n3 = jnp.stack([jnp.sin(b) * jnp.sin(a), -jnp.sin(b) * jnp.cos(a), jnp.cos(b)])
        n2 = jnp.stack([-jnp.cos(b) * jnp.sin(a), jnp.cos(b) * jnp.cos(a), jnp.sin(b)])
        return n1, n2, n3

    def r_OG(a, b):
        _, n2, n3 = frame(a, b)
        return (rim.rho - rim.R * jnp.cos(b)) * n2 + rim.R * jnp.sin(b) * n3

    beta, w, u1, u3 = y[0], y[1:4], y[4], y[5]
    n1, n2, n3 = frame(alpha, beta)
    omega = w[0] * n1 + w[1] * n2 + w[2] * n3
    vG = u1 * n1 + u3 * n3 + jnp.cross(omega, r * n2)  # v_C = v_G + omega x r_GC, r_GC = -r n2
    J = jnp.stack(jax.jacfwd(r_OG, argnums=(0, 1))(alpha, beta), 1)  # (3, 2)
    da, db = jnp.linalg.lstsq(J, vG)[0]

    def ndot(k):
        d = jax.jvp(lambda a, b: frame(a, b)[k], (alpha, beta), (da, db))[1]
        return d

    nd1, nd2, nd3 = ndot(0), ndot(1), ndot(2)
    u = jnp.hypot(u1, u3)

    def residual(q):
        dw, du1, du3, F2 = q[:3], q[3], q[4], q[5]
        eps = dw[0] * n1 + dw[1] * n2 + dw[2] * n3 + w[0] * nd1 + w[1] * nd2 + w[2] * nd3
        aG = (
            du1 * n1
            + u1 * nd1
            + du3 * n3
            + u3 * nd3
            + r * (jnp.cross(eps, n2) + jnp.cross(omega, nd2))
        )
        F = -mu * F2 * u1 / u * n1 + F2 * n2 - mu * F2 * u3 / u * n3
        return jnp.concatenate(
            [
                m * aG - (-m * g * jnp.array([0.0, 0.0, 1.0]) + F),
                j * m * r**2 * eps - jnp.cross(-r * n2, F),
            ]
        )

    q0 = jnp.zeros(6)
    A = jax.jacfwd(residual)(q0)
    q = jnp.linalg.solve(A, -residual(q0))
    return q[5], db, q[:3], q[3:5]


def test_slipping_field_is_newton_euler_with_coulomb():
    """(41) and (42) against the Newton-Euler equations solved from the geometry with autodiff."""
    rng = np.random.default_rng(0)
    xs, us = _random_states(rng, 20)
    for x, u in zip(xs, us):
        y = jnp.asarray(np.concatenate([x, u]))
        F2, db, dw, du = _newton_euler_first_principles(RIM, y)
        f = slip.slip_vector_field(RIM, y)
        scale = 1.0 + np.abs(np.asarray(f)).max()
        assert abs(float(F2 - slip.slip_normal_force(RIM, y))) < 1e-10 * (1 + abs(float(F2)))
        assert abs(float(db - f[0])) < 1e-10 * scale
        np.testing.assert_allclose(np.asarray(dw), np.asarray(f[1:4]), atol=1e-9 * scale)
        np.testing.assert_allclose(np.asarray(du), np.asarray(f[4:]), atol=1e-9 * scale)


def test_rolling_is_the_same_newton_euler_with_rolling_forces():
    """(42) with the rolling forces (30), (32) at u = 0 is (33)-(36) with u-dot = 0; (41) is
    (31) there; the fused hybrid field equals the modular fields in all three modes."""
    rng = np.random.default_rng(1)
    xs, us = _random_states(rng, 20)
    for x, u in zip(xs, us):
        x = jnp.asarray(x)
        F = RIM.contact_forces(x)
        y0 = jnp.concatenate([x, jnp.zeros(2)])
        f = slip._newton_euler(RIM, y0, F[0], F[2])
        np.testing.assert_allclose(np.asarray(f[:4]), np.asarray(RIM.vector_field(x)), atol=1e-10)
        np.testing.assert_allclose(np.asarray(f[4:]), 0.0, atol=1e-10)
        assert abs(float(slip.slip_normal_force(RIM, y0) - F[1])) < 1e-12
        y = jnp.concatenate([x, jnp.asarray(u)])
        np.testing.assert_allclose(
            np.asarray(slip._hybrid_rhs(y, slip.SLIPPING, RIM)),
            np.asarray(slip.slip_vector_field(RIM, y)),
            atol=1e-10,
        )
        np.testing.assert_allclose(
            np.asarray(slip._hybrid_rhs(y0, ROLLING, RIM)[:4]),
            np.asarray(RIM.vector_field(x)),
            atol=1e-10,
        )
        yl = jnp.concatenate([x, jnp.array([3e-3, 0.0])])
        np.testing.assert_allclose(
            np.asarray(slip._hybrid_rhs(yl, slip.LEAVING, RIM)),
            np.asarray(slip.layer_vector_field(RIM, yl)),
            atol=1e-10,
        )
        # the fused events are the modular ones
        ev = slip._hybrid_event_values(y, SLIPPING, RIM, 1e-5, 1e-2, 1e-3)
        assert abs(float(ev[0] - slip.slip_normal_force(RIM, y) / RIM.m)) < 1e-10
        assert float(ev[2]) <= float(slip.stick_function(RIM, y, 1e-5, 1e-2)) + 1e-9
        ev = slip._hybrid_event_values(y0, ROLLING, RIM, 1e-5, 1e-2, 1e-3)
        assert abs(float(ev[1] - RIM.no_slip_margin(x) / RIM.m)) < 1e-10


def test_energy_never_increases_while_slipping():
    """dE/dt = -mu F2 u <= 0 along (42) (autodiff), E = Rim.energy at u = 0, and E is
    non-increasing along a simulated slip."""
    rng = np.random.default_rng(2)
    xs, us = _random_states(rng, 50)
    for x, u in zip(xs, us):
        y = jnp.asarray(np.concatenate([x, u]))
        _, dE = jax.jvp(lambda z: slip.slip_energy(RIM, z), (y,), (slip.slip_vector_field(RIM, y),))
        power = -RIM.mu * slip.slip_normal_force(RIM, y) * jnp.hypot(y[4], y[5])
        assert abs(float(dE - power)) < 1e-9 * (1 + abs(float(power)))
        assert (
            abs(
                float(
                    slip.slip_energy(RIM, jnp.concatenate([y[:4], jnp.zeros(2)]))
                    - RIM.energy(y[:4])
                )
            )
            < 1e-12
        )
    # a slip with F2 > 0 throughout: energy decreases monotonically on dense output
    import diffrax

    y0 = jnp.array([1.3, 0.0, 35.0, 10.0, 1.0, 0.5])
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, a: slip.slip_vector_field(RIM, y)),
        diffrax.Dopri5(),
        0.0,
        0.03,
        None,
        y0,
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-11),
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 0.03, 200)),
    )
    assert float(jnp.min(jnp.hypot(sol.ys[:, 4], sol.ys[:, 5]))) > 0.01  # still slipping
    assert float(jnp.min(jax.vmap(lambda z: slip.slip_normal_force(RIM, z))(sol.ys))) > 0
    E = np.asarray(jax.vmap(lambda z: slip.slip_energy(RIM, z))(sol.ys))
    assert np.all(np.diff(E) < 1e-10) and E[-1] < E[0] - 1e-3


# ------------------------------------------------------------------ limit directions
def test_directional_limits_match_the_limit_of_42():
    """(75)-(76): the last two components of (42) at u = eps (cos phi, sin phi) tend to
    B - C (cos phi, sin phi) linearly in eps."""
    rng = np.random.default_rng(3)
    xs, _ = _random_states(rng, 30)
    for x in xs:
        x = jnp.asarray(x)
        phi = rng.uniform(0, 2 * np.pi)
        star = np.asarray(slip.limit_slip_acceleration(RIM, x, phi))
        errs = []
        for eps in (1e-3, 1e-5, 1e-7):
            y = jnp.concatenate([x, eps * jnp.array([np.cos(phi), np.sin(phi)])])
            errs.append(np.abs(np.asarray(slip.slip_vector_field(RIM, y)[4:]) - star).max())
        assert errs[2] < 1e-5 * (1 + np.abs(star).max())
        assert errs[1] < 0.03 * errs[0] + 1e-9  # O(eps) convergence
        # (79) is the radial part of (75)
        e = np.array([np.cos(phi), np.sin(phi)])
        assert abs(float(slip.limit_speed_rate(RIM, x, phi)) - star @ e) < 1e-9 * (
            1 + np.abs(star).max()
        )
        # the whole limit field is the limit of the whole field
        y = jnp.concatenate([x, 1e-8 * jnp.asarray(e)])
        np.testing.assert_allclose(
            np.asarray(slip.slip_vector_field(RIM, y)),
            np.asarray(slip.limit_vector_field(RIM, x, phi)),
            atol=1e-5 * (1 + np.abs(star).max()),
        )


def test_limit_directions_attracting_repelling_and_39():
    """(80)-(81) on 3000 random states: u phi-dot* = 0 at phi_1, phi_2; phi_2 is attracting
    wherever F2 > 0; phi_1 is repelling exactly where (39) fails."""
    rng = np.random.default_rng(4)
    xs, _ = _random_states(rng, 3000)
    X = jnp.asarray(xs)
    ld = jax.vmap(lambda x: slip.limit_directions(RIM, x))(X)
    B = np.asarray(jax.vmap(lambda x: slip.limit_coefficients(RIM, x))(X))
    for phi in (ld.phi1, ld.phi2):
        phi = np.asarray(phi)
        assert np.abs(B[:, 1] * np.cos(phi) - B[:, 0] * np.sin(phi)).max() < 1e-9 * (
            1 + np.abs(B).max()
        )
    rate1 = np.asarray(jax.vmap(lambda x, p: slip.limit_speed_rate(RIM, x, p))(X, ld.phi1))
    np.testing.assert_allclose(rate1, np.asarray(ld.rate1), atol=1e-9)
    F2 = np.asarray(jax.vmap(RIM.normal_force)(X))
    margin = np.asarray(jax.vmap(RIM.no_slip_margin)(X))
    pos = F2 > 0
    assert pos.sum() > 500 and (~pos).sum() > 500
    assert np.all(np.asarray(ld.attracting2)[pos])
    clear = np.abs(margin) > 1e-9
    assert np.array_equal(np.asarray(ld.attracting1)[clear], (margin > 0)[clear])
    assert 200 < np.sum(margin > 0) < 2800  # both cases well represented
    # the boundary is the same function: |B| - C = -(1+j)/(j m) * margin
    np.testing.assert_allclose(
        np.asarray(ld.rate1),
        -(1 + RIM.j) / (RIM.j * RIM.m) * margin,
        atol=1e-9 * (1 + np.abs(margin).max()),
    )


# ------------------------------------------------------------------ hybrid, diffrax path
def test_plane_like_slip_sticks_when_udot_star_predicts():
    """On a nearly flat support (tube a = 1000 km, rim R = 10^7 km, top of the tube) a slip with
    u0 != 0 in any direction ends, rolling, at t = u0 / (-u-dot*) = j u0 / ((1+j) mu g)."""
    flat = dataclasses.replace(RIM, a=1e6, R=1e10)
    rng = np.random.default_rng(5)
    n = 8
    u0 = rng.uniform(0.05, 1.0, n)
    ang = rng.uniform(0, 2 * np.pi, n)
    y0s = np.stack(
        [
            np.full(n, np.pi / 2),
            np.zeros(n),
            rng.uniform(-50, 50, n),
            np.zeros(n),
            u0 * np.cos(ang),
            u0 * np.sin(ang),
        ],
        1,
    )
    pred = np.array(
        [
            u / -float(slip.limit_speed_rate(flat, jnp.asarray(y[:4]), a))
            for u, y, a in zip(u0, y0s, ang)
        ]
    )
    np.testing.assert_allclose(pred, RIM.j * u0 / ((1 + RIM.j) * RIM.mu * RIM.g), rtol=1e-9)
    r = _diffrax(flat, y0s, t_max=0.2, mode0=SLIPPING)
    assert np.all(r["outcome"] == UNDECIDED)  # rolls on after sticking, nothing else happens
    assert np.all(r["switches"] == 1) and np.all(r["mode"] == ROLLING)
    np.testing.assert_allclose(r["t_slip"], pred, rtol=1e-6)
    assert np.all(r["y_end"][:, 4:] == 0.0)


@pytest.mark.slow  # 50-110 s: hundreds of switches to the cap; CI's budget (25 min on 2 cores)
def test_switch_cap_and_dwell_are_reported_as_chattering():
    """Repeated switching is cut off and reported: a switch cap of 1 on starts that switch
    more often, and a minimum dwell longer than the phases."""
    starts = np.array([[1.1, 3.0, 65.0, 10.0], [1.2, -8.0, 35.0, 10.0]] * 4)  # 8 rows: one shape
    free = _diffrax(RIM, starts)
    assert np.all(free["switches"] >= 3) and set(free["outcome"]) <= {IN, OUT}
    capped = _diffrax(RIM, starts, SlipSettings(max_switches=1))
    assert np.all(capped["outcome"] == CHATTERING) and np.all(capped["switches"] == 2)
    zeno = _diffrax(RIM, starts, SlipSettings(min_dwell=10.0, max_short=2))
    assert np.all(zeno["outcome"] == CHATTERING) and np.all(zeno["switches"] == 2)


# ------------------------------------------------------------------ batched sweeps
@pytest.fixture(scope="module")
def fig11_sample():
    starts = _section_sample(N_BATCH, 35.0, 11)
    starts[:100, 0] = np.random.default_rng(12).uniform(0.95, 1.2, 100)  # near the periodic tongue
    starts[:100, 1] = np.random.default_rng(13).uniform(-5, 5, 100)
    return starts


@pytest.mark.slow  # 117 s in the suite (CI budget); test_conformance[rim_slipping] holds both
# integrators to the same outcomes, switches and times in CI
def test_batched_sweep_equals_diffrax_hybrid(fig11_sample):
    """The batched kernel sweep and the diffrax-path hybrid agree start by start."""
    b = _sweep(RIM, fig11_sample)
    d = _diffrax(RIM, fig11_sample)
    assert np.array_equal(b["outcome"], d["outcome"])
    assert np.array_equal(b["switches"], d["switches"])
    assert np.max(np.abs(b["t_end"] - d["t_end"])) < 1e-4
    assert np.max(np.abs(b["t_slip"] - d["t_slip"])) < 1e-4
    assert {PERIODIC, IN, OUT} <= set(b["outcome"].tolist())
    assert np.sum(b["switches"] > 0) > 50  # slipping is exercised
    # periodic starts never slipped in their last rolling phase; fallen ones ended with F2 = 0
    per = b["outcome"] == PERIODIC
    assert np.all(np.isfinite(b["period"][per])) and np.all(np.isnan(b["period"][~per]))


@pytest.mark.slow  # 68 s in the suite (CI budget): a sensitivity check of a numerical setting
def test_delta_does_not_change_outcomes(fig11_sample):
    """The slip speed given at the onset: 1e-6 and 1e-8 m/s give the same outcomes."""
    a = _sweep(RIM, fig11_sample, SlipSettings(delta=1e-6))
    b = _sweep(RIM, fig11_sample, SlipSettings(delta=1e-8))
    assert np.array_equal(a["outcome"], b["outcome"])
    assert np.array_equal(a["switches"], b["switches"])
    assert np.max(np.abs(a["t_end"] - b["t_end"])) < 1e-5


@pytest.mark.slow  # 86 s in the suite (CI budget): the mu -> infinity limit of the kernel sweep
def test_huge_mu_slipping_sweep_equals_rolling_sweep(fig11_sample):
    """mu -> infinity: the slipping sweep gives the rolling sweep's outcomes (Sect. 5.1). (With
    mu = 1e4 slipping starts when F2 ~ |F_t| / mu, an instant before the separation.)"""
    rim = dataclasses.replace(RIM, mu=1e4)
    b = _sweep(rim, fig11_sample)
    ref = basin.simulate(RIM, fig11_sample)
    assert np.array_equal(b["outcome"], ref["outcome"])
    assert np.max(np.abs(b["t_end"] - ref["t_end"])) < 1e-4
    assert np.max(b["t_slip"]) < 1e-3  # slips only in the last instant before separating


def test_layer_follows_the_stiff_full_slip():
    """Leaving the rolling set: the slow-manifold layer up to u_layer, then (42), matches (42)
    integrated from a tiny delta (stiff, many steps) better than delta = 1e-6 itself does."""
    from _fsolve import solve
    from _fsolve import Event

    y0 = jnp.array([1.1, 0.0, 65.0, 10.0, 0.0, 0.0])
    args = slip.HybridArgs(
        RIM, jnp.asarray(ROLLING), jnp.asarray(1e-5), jnp.asarray(1e-2), jnp.asarray(1e-3)
    )
    s = solve(
        slip.hybrid_vector_field, y0, 0.0, 1.0, args, slip.HYBRID_EVENTS, rtol=1e-12, atol=1e-12
    )
    assert int(s.event) == slip.SLIP_ONSET
    xo, T = s.y[:4], 0.02
    full = lambda t, y, a: slip.slip_vector_field(RIM, y)  # noqa: E731
    ref = solve(
        full, slip.start_slip(RIM, xo, 1e-8), 0.0, T, rtol=1e-12, atol=1e-12, max_steps=40000
    )
    d6 = solve(
        full, slip.start_slip(RIM, xo, 1e-6), 0.0, T, rtol=1e-12, atol=1e-12, max_steps=40000
    )
    lay = solve(
        lambda t, y, a: slip.layer_vector_field(RIM, y),
        jnp.concatenate([xo, jnp.array([1e-8, 0.0])]),
        0.0,
        T,
        rtol=1e-10,
        atol=1e-10,
        events=(Event(lambda t, y, a: 1e-3 - y[4]),),
    )
    rest = solve(full, slip.layer_slip(RIM, lay.y), lay.t, T, rtol=1e-10, atol=1e-10)
    assert not (bool(ref.failed) or bool(rest.failed))
    err_layer = np.abs(np.asarray(rest.y - ref.y)).max()
    err_delta = np.abs(np.asarray(d6.y - ref.y)).max()
    assert err_layer < 1e-6 and err_layer < err_delta
    assert int(lay.steps) + int(rest.steps) < int(ref.steps) / 20


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="delta"):
        SlipSettings(delta=-1.0)
    with pytest.raises(ValueError, match="u_layer"):
        SlipSettings(delta=1e-2, u_layer=1e-3)
    with pytest.raises(ValueError, match="dir_tol"):
        SlipSettings(dir_tol=2.0)
    with pytest.raises(ValueError, match="max_switches"):
        SlipSettings(max_switches=0)
    with pytest.raises(ValueError, match="k_d"):
        _sweep(dataclasses.replace(RIM, k_d=0.02), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="mu"):
        simulate_slip(dataclasses.replace(RIM, mu=float("inf")), jnp.zeros(4))
    with pytest.raises(ValueError, match="shape"):
        _sweep(RIM, np.zeros((3, 5)))


def test_cli_basin_with_friction(tmp_path, capsys):
    """``rollax basin --friction 1``: the same outputs plus switches and slipping time."""
    import json

    from rollax.cli import main

    out = tmp_path / "b"
    rc = main(
        [
            "basin",
            "--preset",
            "fig12",
            "--friction",
            "1",
            "--grid",
            "16",
            "16",
            "--chunk-size",
            str(N_BATCH),
            "--no-progress",
            "--no-resume",
            "--json",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["friction"] == 1.0 and sum(summary["counts"].values()) == 256
    assert summary["slipped"] > 20
    data = xr.open_zarr(out / "basin.zarr").load()
    assert data["switches"].shape == (16, 16) and data["t_slip"].shape == (16, 16)
    assert (out / "basin.png").exists()
    starts = basin.section_starts(
        basin.Axis("beta", 0.8, 1.8, 16),
        basin.Axis("omega1", -20.0, 20.0, 16),
        {"omega2": 65.0, "omega3": 10.0},
    )
    ref = _sweep(RIM, starts)
    assert np.array_equal(data["outcome"].values.ravel(), ref["outcome"])
    assert np.array_equal(data["switches"].values.ravel(), ref["switches"])
    assert np.all((data["t_slip"].values > 0) == (data["switches"].values > 0))
    assert data["t_slip"].attrs["units"] == "s" and data["switches"].attrs["units"] == "1"
