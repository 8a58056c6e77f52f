"""The bouncing penny (rollax.analysis.penny; Clark & Bloch Sects. V-VI)."""

import json
import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

import rollax.cli
from rollax.models.impacts import nonholonomic_elastic_root
from rollax.analysis.penny import (
    FAILED,
    GLANCING,
    IMPACT,
    NO_IMPACT,
    OUTSIDE,
    CustomTable,
    EllipseTable,
    Penny,
    PennyBilliard,
    circle_table,
    dynamic,
    flight,
    ftle,
    simulate,
    simulate_batch,
)

N = 20


def billiard(table="ellipse", law="elastic"):
    tab = EllipseTable() if table == "ellipse" else circle_table()
    return dynamic(PennyBilliard(table=tab, law=law))


@pytest.fixture(scope="module")
def runs():
    """The four 20-impact sequences of Sect. VI-A (Figs. 1-4)."""
    out = {}
    for law in ("elastic", "plastic"):
        for table in ("circle", "ellipse"):
            b = billiard(table, law)
            s0 = b.penny.state()
            out[table, law] = (b, s0, jax.tree_util.tree_map(np.asarray, simulate(b, s0, N)))
    return out


# ------------------------------------------------------------------------- continuous motion


def test_closed_form_flow_and_impact_time_equal_integrated_nonholonomic_equations(runs):
    """(26) vs. the generic Lagrange-d'Alembert equations (12)-(13) integrated by diffrax, and the
    first impact time vs. the root of h on that solver's dense output."""
    b, _, seq = runs["ellipse", "elastic"]
    p = b.penny
    f = p.dalembert_vector_field()

    @jax.jit
    def integrate(s0):
        z0 = jnp.concatenate([s0[:4], s0[6:]])
        return diffrax.diffeqsolve(
            diffrax.ODETerm(f),
            diffrax.Tsit5(),
            0.0,
            4.0,
            1e-3,
            z0,
            saveat=diffrax.SaveAt(dense=True),
            stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-14),
            max_steps=4096,
        )

    evaluate = jax.jit(lambda sol, t: sol.evaluate(t))
    s1 = p.state(x=0.01, y=-0.02, theta=0.3, phi=0.7, theta_dot=-6.0, phi_dot=1.3)
    for s0 in (s1, p.state()):
        sol = integrate(s0)
        for t in (0.7, 1.9, 4.0):
            closed = p.flow(s0, t)
            z = evaluate(sol, t)
            np.testing.assert_allclose(
                np.asarray(z[:4]), np.asarray(closed[:4]), rtol=0, atol=1e-10
            )
            np.testing.assert_allclose(np.asarray(z[4:]), np.asarray(closed[6:]), rtol=1e-12)
    # first impact of Sect. VI-A (front end, ellipse): root of h on the integrated motion
    tau, end = seq.times[0], seq.ends[0]
    assert seq.status[0] == IMPACT and end == 0

    def h_front(t):
        q = np.asarray(evaluate(sol, t))[:4]
        return (
            (q[0] + 0.01 * math.cos(q[3])) ** 2 / 0.15**2
            + (q[1] + 0.01 * math.sin(q[3])) ** 2 / 0.2**2
            - 1
        )

    ref = brentq(h_front, 1.0, 2.5, xtol=1e-15)
    assert float(tau) == pytest.approx(ref, rel=1e-9)
    # (25): the flow's time derivative is the vector field, and (23) holds along it
    for t in (0.0, 1.7):
        d = jax.jacfwd(lambda tt: p.flow(s0, tt))(t)
        np.testing.assert_allclose(
            np.asarray(d), np.asarray(p.vector_field(t, p.flow(s0, t))), atol=1e-14
        )
        assert np.abs(np.asarray(p.constraint_residual(p.flow(s0, t)))).max() < 1e-16
    # straight rolling (phi_dot = 0) is the limit of (26)
    s_line = p.state(phi=0.4, theta_dot=3.0, phi_dot=0.0)
    np.testing.assert_allclose(
        np.asarray(p.flow(s_line, 2.0)[:2]),
        2.0 * 3.0 * 0.01 * np.array([math.cos(0.4), math.sin(0.4)]),
        atol=1e-16,
    )


# ---------------------------------------------------------------------------- impact sequences


def _g_paper(s, t, sigma, a, bb, R=0.01):
    """h at an end along (26) written as in the paper (independent of rollax's sinc form)."""
    x0, y0, _, p0, _, _, Om, om = s
    ph = om * t + p0
    x = Om / om * R * math.sin(ph) - Om / om * R * math.sin(p0) + x0
    y = -Om / om * R * math.cos(ph) + Om / om * R * math.cos(p0) + y0
    return (
        (x + sigma * R * math.cos(ph)) ** 2 / a**2 + (y + sigma * R * math.sin(ph)) ** 2 / bb**2 - 1
    )


@pytest.mark.parametrize("table", ["circle", "ellipse"])
def test_impact_times_are_first_roots_to_1e12(runs, table):
    b, s0, seq = runs[table, "elastic"]
    a, bb = float(b.table.a), float(b.table.b)
    starts = np.concatenate([np.asarray(s0)[None], seq.states[:-1]])
    for k in range(N):
        tau, sigma = seq.taus[k], 1.0 if seq.ends[k] == 0 else -1.0
        ref = brentq(
            lambda t: _g_paper(starts[k], t, sigma, a, bb),
            tau * (1 - 1e-7),
            tau * (1 + 1e-7),
            xtol=1e-300,
            rtol=8.9e-16,
            maxiter=200,
        )
        assert abs(tau - ref) <= 1e-12 * ref
        # no earlier contact of either end (dense check on (0, tau))
        ts = np.linspace(0.0, tau, 4001)[1:-1]
        for sg in (1.0, -1.0):
            assert max(_g_paper(starts[k], t, sg, a, bb) for t in ts) < 0.0
    # the billiard's own closed-form search (PennyBilliard.next_impact) from the same starts
    tau_cf, end_cf, status_cf, _ = eqx.filter_jit(
        jax.vmap(lambda bb, s: bb.next_impact(s), in_axes=(None, 0))
    )(b, starts)
    assert np.all(np.asarray(status_cf) == IMPACT)
    np.testing.assert_array_equal(np.asarray(end_cf), seq.ends)
    np.testing.assert_allclose(seq.taus, np.asarray(tau_cf), rtol=1e-12)


def _time_off_edge(b, seq):
    """|h / (dh/dt)| of the hitting end at each pre-impact state: how far in time it lies from
    the edge. rollax._core.events locates a root within a bracket of 1e-13 max(1, |t|) (the flight's
    time here), so this is at most that, plus the rounding of the flow."""

    def one(pre, end):
        h, dh = jax.jvp(lambda t: b.edge_values(b.penny.flow(pre, t))[end], (0.0,), (1.0,))
        return jnp.abs(h / dh)

    return np.asarray(jax.vmap(one)(jnp.asarray(seq.pre_states), jnp.asarray(seq.ends)))


@pytest.mark.parametrize("table", ["circle", "ellipse"])
def test_elastic_impacts_conserve_energy_and_constraints(runs, table):
    b, s0, seq = runs[table, "elastic"]
    assert np.all(seq.status == IMPACT)
    E0 = float(b.penny.energy(s0))
    np.testing.assert_allclose(seq.energies, E0, rtol=1e-12)
    resid = np.asarray(jax.vmap(b.penny.constraint_residual)(seq.states))
    assert np.abs(resid).max() < 1e-12 * float(b.penny.R) * np.abs(seq.states[:, 6]).max()
    assert (_time_off_edge(b, seq) <= 2e-13 * np.maximum(1.0, seq.taus)).all()
    assert np.all(np.diff(seq.times) > 0)


@pytest.mark.parametrize("table", ["circle", "ellipse"])
def test_plastic_impacts_lose_energy_keep_constraints_and_match_paper_formulas(runs, table):
    b, s0, seq = runs[table, "plastic"]
    ok = seq.status == IMPACT
    assert ok[:15].all()  # then the penny grazes the edge (normal approach decays ~1/3 per impact)
    E = np.concatenate([[float(b.penny.energy(s0))], seq.energies[ok]])
    assert np.all(np.diff(E) <= 1e-15 * E[0])
    resid = np.asarray(jax.vmap(b.penny.constraint_residual)(seq.states[ok]))
    assert np.abs(resid).max() < 1e-12 * float(b.penny.R) * np.abs(seq.states[ok, 6]).max()
    # first impact (front end) against the paper's explicit (28)-(29) followed by (32)-(33)
    R, m, I, J = (float(v) for v in (b.penny.R, b.penny.m, b.penny.I, b.penny.J))
    a, bb = float(b.table.a), float(b.table.b)
    assert seq.ends[0] == 0
    x, y, _, ph, xd, yd, td, pd = seq.pre_states[0]
    c, s = math.cos(ph), math.sin(ph)
    hx, hy = 2 * (x + R * c) / a**2, 2 * (y + R * s) / bb**2
    k = hy * c - hx * s
    C = -2 * (hx * xd + hy * yd + R * k * pd) / ((hx**2 + hy**2) / m + R**2 * k**2 / J)
    v28 = np.array([xd + C / m * hx, yd + C / m * hy, td, pd + C / J * R * k])
    P = np.array(
        [
            [m * R**2 * c * c, m * R**2 * s * c, I * R * c, 0],
            [m * R**2 * s * c, m * R**2 * s * s, I * R * s, 0],
            [m * R * c, m * R * s, I, 0],
            [0, 0, 0, I + m * R**2],
        ]
    ) / (I + m * R**2)
    np.testing.assert_allclose(seq.states[0, 4:], P @ v28, rtol=1e-12)
    # after the sequence stops, records are NaN and the status is explained
    if not ok.all():
        first_bad = int(np.argmin(ok))
        assert seq.status[first_bad] == GLANCING
        assert np.isnan(seq.energies[first_bad:]).all()


def test_impact_sequence_jacobian_autodiff_matches_finite_differences():
    b = billiard("ellipse", "elastic")
    s0 = b.penny.state()
    f = eqx.filter_jit(lambda s: b.simulate(s, 3).states[-1])
    Jad = np.asarray(eqx.filter_jit(jax.jacfwd(f))(s0))
    R = float(b.penny.R)

    def constrained(v):  # perturb (x, y, phi, theta_dot, phi_dot), keep (23)
        v = v.copy()
        v[4], v[5] = R * v[6] * math.cos(v[3]), R * v[6] * math.sin(v[3])
        return v

    base = np.asarray(s0)
    for i in (0, 1, 3, 6, 7):
        h = 1e-6 * max(1.0, abs(base[i]))
        vp, vm = base.copy(), base.copy()
        vp[i] += h
        vm[i] -= h
        fd = (np.asarray(f(constrained(vp))) - np.asarray(f(constrained(vm)))) / (2 * h)
        # (x_dot, y_dot) of the input are slaved: add their chain-rule terms for phi, theta_dot
        ad = Jad[:, i].copy()
        if i == 3:
            ad += Jad[:, 4] * (-R * base[6] * math.sin(base[3])) + Jad[:, 5] * (
                R * base[6] * math.cos(base[3])
            )
        if i == 6:
            ad += Jad[:, 4] * R * math.cos(base[3]) + Jad[:, 5] * R * math.sin(base[3])
        np.testing.assert_allclose(ad, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
    # the FTLE's renormalised tangent (jvp per impact) reproduces |W J v0| of the full Jacobian
    w = np.array([1 / 0.4, 1 / 0.4, 0, 1, 0, 0, 0.1, 0.1])
    v0 = np.array([0.3, -0.2, 0, 0.5, 0, 0, 2.0, -1.0])
    res = eqx.filter_jit(ftle)(b, s0, 3, w, v0)
    expected = math.log(np.linalg.norm(w * (Jad @ v0)) / np.linalg.norm(w * v0))
    assert int(res.n_used) == 3
    assert float(jnp.sum(res.log_stretch)) == pytest.approx(expected, rel=1e-10)
    assert float(res.per_impact) == pytest.approx(expected / 3, rel=1e-10)


# ------------------------------------------------------------------ statuses, batching, tables


def test_glancing_and_never_reaching_the_edge_are_reported():
    b = billiard("circle", "elastic")
    p = b.penny
    R, a = float(p.R), float(b.table.a)
    Om, om = 2.0, 1.0
    r = Om * R / om
    rho = math.hypot(r, R)  # both ends move on a circle of this radius about c

    def circling(cx, phi0=math.pi):
        return p.state(
            x=cx + r * math.sin(phi0), y=-r * math.cos(phi0), phi=phi0, theta_dot=Om, phi_dot=om
        )

    closed = eqx.filter_jit(lambda b, s: b.simulate(s, 1).status[0])  # the closed-form search

    def first(state):  # the compiled 20-impact run is reused for every status check
        seq = simulate(b, state, N)
        # rollax.solve of PennySystem and the closed-form search agree on every status
        assert int(seq.status[0]) == int(closed(b, state))
        return int(seq.status[0]), seq

    assert first(circling(a - rho - 1e-3))[0] == NO_IMPACT  # circles inside for ever
    assert first(p.state(x=0.05, theta_dot=0.0, phi_dot=0.0))[0] == NO_IMPACT  # at rest
    assert first(p.state(x=a + 0.01))[0] == OUTSIDE
    status, seq = first(circling(a - rho))  # internally tangent end circle
    assert status == GLANCING and np.all(np.asarray(seq.status) == GLANCING)
    assert np.isfinite(float(seq.times[0])) and np.isnan(np.asarray(seq.times[1:])).all()
    status, seq = first(circling(a - rho + 1e-4))  # crosses the edge by 0.1 mm: a shallow impact
    pre = seq.pre_states[0]
    root = nonholonomic_elastic_root(
        p.mass_matrix(),
        p.constraint_forms(pre[:4]),
        b.surface_differential(pre[:4], seq.ends[0]),
        pre[4:],
    )
    assert status == IMPACT and 1e-3 < abs(float(root.s)) < 0.2
    status, seq = first(circling(a - rho - 1e-3))
    assert np.all(np.asarray(seq.status) == NO_IMPACT) and np.isnan(np.asarray(seq.times)).all()
    far = b.state_at(circling(a - rho - 1e-3), seq, 1e4)  # the flow stays valid for ever
    assert float(jnp.max(b.edge_values(far))) < 0
    # a start the integrator cannot follow is its own status, not an impact or a miss
    bad = np.array(p.state())
    bad[6] = np.nan
    seq = simulate(b, bad, N)
    assert np.all(np.asarray(seq.status) == FAILED) and np.isnan(np.asarray(seq.times)).all()
    assert np.isnan(np.asarray(b.state_at(bad, seq, 1.0))).all()


def test_batched_simulation_matches_single_runs(runs):
    b, s0, _ = runs["ellipse", "elastic"]
    rng = np.random.default_rng(0)
    states = np.stack(
        [
            np.asarray(b.penny.state(theta_dot=10 + d1, phi_dot=0.2 + d2))
            for d1, d2 in rng.uniform(-0.005, 0.005, size=(4, 2))
        ]
    )
    states[0] = np.asarray(s0)
    batch = simulate_batch(b, states, N)
    # Equal up to rounding carried through a chaotic billiard: the vmapped program is compiled
    # apart from the single one and XLA's CPU code rounds it differently (the one step loop
    # under vmap: its branches become selects, fused otherwise; 1 ulp in the first flight time).
    # So each lane is held to what one ulp of its start does to its own single run: measured
    # 9.8e-10 relative in the 20th time for the paper's start, 3.7e-6 for lane 2 (stop 60),
    # while the lanes' starts differ by up to 5e-3 (a mixed-up lane is far outside).
    for i in (0, 2):
        one = jax.tree_util.tree_map(np.asarray, simulate(b, states[i], N))
        spread = 0.0
        for k in range(8):  # one ulp of each component (they differ by orders of magnitude)
            s = states[i].copy()
            s[k] = np.nextafter(s[k], np.inf)
            moved = np.asarray(simulate(b, s, N).times)
            spread = max(spread, float(np.max(np.abs(moved - one.times) / one.times)))
        assert np.array_equal(np.asarray(batch.status[i]), one.status)
        d = np.abs(np.asarray(batch.times[i]) - one.times) / one.times
        assert float(np.max(d)) <= 10 * spread + 1e-13, (i, float(np.max(d)), spread)
        # the first flights, before the chaos has grown: equal to a few ulp
        np.testing.assert_allclose(np.asarray(batch.times[i])[:2], one.times[:2], rtol=1e-14)


def test_custom_smooth_table(tmp_path):
    """A user-given quartic table: impacts on its edge, energy conserved, penny inside in between."""
    tab = CustomTable(
        lambda x, y: (x / 0.15) ** 4 + (y / 0.2) ** 4 - 1.0, diameter=2 * math.hypot(0.15, 0.2)
    )
    b = dynamic(PennyBilliard(table=tab, law="elastic"))
    s0 = b.penny.state()
    seq = simulate(b, s0, 8)
    assert np.all(np.asarray(seq.status) == IMPACT)
    np.testing.assert_allclose(np.asarray(seq.energies), float(b.penny.energy(s0)), rtol=1e-12)
    assert (_time_off_edge(b, seq) <= 2e-13 * np.maximum(1.0, np.asarray(seq.taus))).all()
    path = np.asarray(b.path(s0, seq, 50))[:, 1:-1].reshape(-1, 8)
    assert np.asarray(jax.vmap(b.edge_values)(path)).max() < 0
    # its records and its figure (a custom table has no semi-axes: its diameter is recorded,
    # its edge drawn as the zero contour of fn; both once raised AttributeError)
    from rollax.analysis.penny import sequence_records
    from rollax.plot import plot_penny_sequence

    rec = sequence_records(b, s0, seq)
    assert rec["parameters"]["table"] == "custom"
    assert rec["parameters"]["diameter"] == pytest.approx(2 * math.hypot(0.15, 0.2))
    assert rec["n_completed"] == 8 and "a" not in rec["parameters"]
    png = tmp_path / "custom.png"
    plot_penny_sequence(b, s0, b.path(s0, seq, 20), seq.pre_states, png, "custom table")
    assert png.stat().st_size > 1000


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="R"):
        Penny(R=-0.01)
    with pytest.raises(ValueError, match="a"):
        EllipseTable(a=0.0)
    with pytest.raises(ValueError, match="law"):
        PennyBilliard(law="sticky")
    with pytest.raises(ValueError, match="e = 1.5"):
        PennyBilliard(law="restitution", e=1.5)
    with pytest.raises(ValueError, match="fn"):
        CustomTable(3.0, diameter=1.0)
    with pytest.raises(ValueError, match="radius"):
        circle_table(-1.0)


def test_cli_json(capsys):
    rc = rollax.cli.main(
        ["penny", "--table", "circle", "--impact", "elastic", "--impacts", str(N), "--json"]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["impacts"]) == N and out["status"] == "impact"
    E = [r["energy"] for r in out["impacts"]]
    np.testing.assert_allclose(E, out["initial_energy"], rtol=1e-12)
    first = out["impacts"][0]
    assert set(first["state"]) == {
        "x",
        "y",
        "theta",
        "phi",
        "x_dot",
        "y_dot",
        "theta_dot",
        "phi_dot",
    }
    assert first["time"] == pytest.approx(1.9133882102554738, rel=1e-12)
    assert rollax.cli.main(["penny", "--impacts", "0"]) == 2


@pytest.mark.slow
def test_cli_chaos_json(capsys, tmp_path):
    assert (
        rollax.cli.main(["penny", "chaos", "--samples", "3", "--json", "--out", str(tmp_path)]) == 0
    )
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    # the progress bar goes to stderr, naming each batch and reaching 8/8 when all are done
    assert "penny chaos: 8/8 batches" in cap.err and "plastic ellipse" in cap.err
    assert set(out["cases"]) == {
        "elastic_circle",
        "elastic_ellipse",
        "plastic_circle",
        "plastic_ellipse",
    }
    assert out["cases"]["elastic_ellipse"]["impacts_used_nominal"] == 100
    assert (tmp_path / "fig5_elastic_ellipse.png").exists() and (tmp_path / "ftle.json").exists()


def test_restitution_law_interpolates_between_plastic_and_elastic(runs):
    b_el, _, seq = runs["ellipse", "elastic"]
    pre = seq.pre_states[0]
    end = int(seq.ends[0])
    E = float(b_el.penny.energy(pre))
    post_el = np.asarray(b_el.impact(pre, end))
    post_1 = np.asarray(PennyBilliard(law="restitution", e=1.0).impact(pre, end))
    np.testing.assert_allclose(post_1, post_el, rtol=1e-13)
    energies = [
        float(b_el.penny.energy(PennyBilliard(law="restitution", e=e).impact(pre, end)))
        for e in (0.0, 0.5, 1.0)
    ]
    assert energies[0] < energies[1] < energies[2] == pytest.approx(E, rel=1e-13)
    # dh(qdot+) = -e dh(qdot-) for the end that hits
    dh = np.asarray(b_el.surface_differential(pre[:4], end))
    post_half = np.asarray(PennyBilliard(law="restitution", e=0.5).impact(pre, end))
    assert dh @ post_half[4:] == pytest.approx(-0.5 * (dh @ pre[4:]), rel=1e-12)


@pytest.mark.slow  # 60-145 s: reverse mode through 12 impact searches; forward-mode penny Jacobians stay in CI
def test_reverse_mode_gradient_wrt_table_parameter():
    """jax.grad of the 3rd impact time w.r.t. the ellipse's semi-axis a vs. central differences."""
    b = billiard("ellipse", "elastic")
    s0 = b.penny.state()

    def t3(a):
        return eqx.tree_at(lambda m: m.table.a, b, a).simulate(s0, 3).times[-1]

    g = float(eqx.filter_jit(jax.grad(t3))(jnp.asarray(0.15)))
    f = eqx.filter_jit(t3)
    fd = (float(f(jnp.asarray(0.15 + 1e-7))) - float(f(jnp.asarray(0.15 - 1e-7)))) / 2e-7
    assert g == pytest.approx(fd, rel=1e-6)

    # one flight and impact through rollax.solve (rollax.analysis.penny.flight: the event time's
    # implicit derivative, then the impact map) against the closed-form step, in reverse mode
    # (one scalar that needs both: a Jacobian would take 67 s to compile, CI budget)
    def one(a, route):
        post, _, tau, _, _ = route(eqx.tree_at(lambda m: m.table.a, b, a), s0)
        return tau + post[6] / 100.0

    g_solve = float(jax.jit(jax.grad(lambda a: one(a, flight)))(0.15))
    g_closed = float(jax.jit(jax.grad(lambda a: one(a, lambda bb, s: bb.step(s))))(0.15))
    assert g_solve == pytest.approx(g_closed, rel=1e-10)  # 1.23 (tau: 0.87, theta_dot: 36.2)


@pytest.mark.parametrize(
    "method, args",
    [
        ("energy", (np.ones(7),)),
        ("constraint_residual", (np.ones((2, 8)),)),
        ("flow", (np.ones(4), 0.1)),
        ("vector_field", (0.0, np.ones(9))),
        ("constraint_forms", (np.ones(8),)),
        ("constraint_coefficients", (np.ones(3),)),
        ("lagrangian", (np.ones(4), np.ones(8))),
        ("billiard.ends", (np.ones(4),)),
        ("billiard.next_impact", (np.ones((3, 8)),)),
        ("billiard.step", (np.ones(6),)),
        ("billiard.impact", (np.ones(4), 0)),
        ("billiard.surface_differential", (np.ones(8), 0)),
    ],
)
def test_wrong_state_shapes_get_one_line_errors(method, args):
    penny = Penny()
    obj = PennyBilliard(penny, circle_table()) if method.startswith("billiard.") else penny
    fn = getattr(obj, method.removeprefix("billiard."))
    with pytest.raises(ValueError, match=r"^\S+: \w+ = .* must be an array of shape \((4|8),\)"):
        fn(*args)
