"""Basin maps of the ball on the rim (rollax.analysis.basin): outcomes, sweeps, resumption, CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import rollax
import rollax.analysis.basin as basin
from rollax._drivers._store import region_layout
from rollax.analysis.basin import IN, OUT, PERIODIC, Axis, basin_map, preset, simulate
from rollax.cli import main
from rollax.models.rim import Rim
from rollax.systems import RimRolling

RIM = Rim()
COARSE = dict(
    x=Axis("beta", 0.8, 1.8, 60),
    y=Axis("omega1", -20.0, 20.0, 40),
    fixed={"omega2": 35.0, "omega3": 10.0},
)


@pytest.fixture(scope="module")
def fig11():
    return basin_map(RIM, progress=False, **COARSE)


def test_fig11_section_structure(fig11):
    out = fig11.outcome
    B, W = np.meshgrid(fig11.x.values, fig11.y.values, indexing="ij")
    per = out == PERIODIC
    assert per.sum() > 10
    # the periodic tongue: beta ~ 1.0-1.15, |w1| < ~4, around the steady motion beta0 = 1.125
    assert B[per].min() > 0.95 and B[per].max() < 1.17
    assert np.abs(W[per]).max() < 4.5
    (b0,) = basin.steady_beta(RIM, 35.0, 10.0, 0.8, 1.8)
    assert B[per].min() < b0 < B[per].max()
    # bounded by 'in' on one side (smaller beta) and 'out' on the other, along w1 ~ 0
    row = out[:, np.argmin(np.abs(fig11.y.values))]
    idx = np.nonzero(row == PERIODIC)[0]
    assert row[idx[0] - 1] == IN and row[idx[-1] + 1] == OUT
    assert set(np.unique(out)) <= {PERIODIC, IN, OUT}  # nothing undecided or failed
    # time-reversal symmetry (61): the map is symmetric under w1 -> -w1 for periodic starts
    assert np.array_equal(per, per[:, ::-1])
    # periods of periodic rolling are positive and finite, nan elsewhere
    assert np.all(np.isfinite(fig11.period[per])) and np.all(fig11.period[per] > 0)
    assert np.all(np.isnan(fig11.period[~per]))


def test_dissipation_decides_in_or_out(fig11):
    """Sect. 5.3.2: drilling makes all formerly periodic starts fall out, rolling resistance in."""
    B, W = np.meshgrid(fig11.x.values, fig11.y.values, indexing="ij")
    per = fig11.outcome == PERIODIC
    starts = np.stack([B[per], W[per], np.full(per.sum(), 35.0), np.full(per.sum(), 10.0)], 1)
    for kind, expect in (("drilling", OUT), ("rolling", IN)):
        rim, _ = preset("fig11", kind)
        res = simulate(rim, starts, t_max=60.0)
        assert np.all(res["outcome"] == expect), kind
        assert np.median(res["t_end"]) > 5.0  # most roll for a long time first


def test_kernel_agrees_with_diffrax_path():
    """Outcomes and event times of the ensemble kernel and diffrax, on 300 random starts."""
    rng = np.random.default_rng(7)
    n = 300
    x0 = np.stack(
        [rng.uniform(0.8, 1.8, n), rng.uniform(-20, 20, n), np.full(n, 35.0), np.full(n, 10.0)], 1
    )
    x0[:150, 0] = rng.uniform(0.95, 1.2, 150)  # many near the periodic tongue
    x0[:150, 1] = rng.uniform(-5, 5, 150)
    tol = 1e-12
    system = RimRolling(RIM)
    res = rollax.solve_ensemble(system, x0, 0.0, 60.0, rtol=tol, atol=tol)
    sol = jax.vmap(
        lambda x: rollax.solve(system, x, 0.0, 60.0, rtol=tol, atol=tol, max_steps=8192)
    )(jnp.asarray(x0))
    assert not np.any(np.asarray(sol.failed))
    assert np.array_equal(np.asarray(sol.event), res.event)
    assert set(np.unique(res.event)) == {0, 1}
    assert np.max(np.abs(np.asarray(sol.t) - res.t)) < 1e-8
    periodic = res.event == 1
    assert np.max(np.abs(np.asarray(sol.t_first)[periodic, 1] - res.t_first[periodic, 1])) < 1e-8


def test_starts_with_negative_normal_force_fall_at_once():
    x = np.array([[1.0, 19.0, 35.0, 10.0], [1.1, 0.0, 35.0, 10.0]])
    assert float(RIM.normal_force(jnp.asarray(x[0]))) < 0
    res = simulate(RIM, x)
    assert res["t_end"][0] == 0.0 and res["outcome"][0] in (IN, OUT)
    assert res["outcome"][1] == PERIODIC and res["t_end"][1] > 0


def test_failed_and_undecided_are_their_own_outcomes():
    x = np.array([[1.1, 0.0, 35.0, 10.0], [1.1, 1.0, 35.0, 10.0]])
    res = simulate(RIM, x, max_steps=3)
    assert np.all(res["outcome"] == basin.FAILED)
    rim, _ = preset("fig11", "drilling")
    res = simulate(rim, x, t_max=1.0)
    assert np.all(res["outcome"] == basin.UNDECIDED)


class _Killed(Exception):
    """Stands for the sweep's process being killed."""


def test_resume_and_chunking_do_not_change_results(tmp_path, monkeypatch, fig11):
    kw = dict(COARSE, chunk_size=700, progress=False)
    calls = []
    import rollax._integrate._ensemble as ens

    real = ens.solve_ensemble  # what rollax.sweep runs each chunk with

    def dying(*a, **k):
        if len(calls) == 2:
            raise _Killed  # the sweep is killed after two chunks
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(ens, "solve_ensemble", dying)
    with pytest.raises(_Killed):
        basin_map(RIM, store=tmp_path / "b.zarr", **kw)
    monkeypatch.setattr(ens, "solve_ensemble", lambda *a, **k: calls.append(1) or real(*a, **k))
    resumed = basin_map(RIM, store=tmp_path / "b.zarr", **kw)
    _, regions = region_layout((COARSE["x"].n, COARSE["y"].n), 700)
    assert len(calls) == 2 + len(regions) - 2  # only the unfinished regions were run
    assert np.array_equal(resumed.outcome, fig11.outcome)
    assert np.allclose(resumed.t_end, fig11.t_end, rtol=0, atol=1e-9)
    one_device = basin_map(RIM, devices=1, chunk_size=2400, progress=False, **COARSE)
    assert np.array_equal(one_device.outcome, fig11.outcome)
    assert np.allclose(one_device.t_end, fig11.t_end, rtol=0, atol=1e-9)


def test_bad_inputs():
    with pytest.raises(ValueError, match="omega7"):
        Axis("omega7", 0, 1, 10)
    with pytest.raises(ValueError, match="beta range"):
        Axis("beta", 1.0, 0.5, 10)
    with pytest.raises(ValueError, match="grid size"):
        Axis("beta", 0.0, 1.0, 1)
    with pytest.raises(ValueError, match="preset"):
        preset("fig99")
    with pytest.raises(ValueError, match="dissipation"):
        preset("fig11", "air")
    with pytest.raises(ValueError, match="omega3"):
        basin.section_starts(Axis("beta", 0, 1, 2), Axis("omega1", 0, 1, 2), {"omega2": 1.0})
    with pytest.raises(ValueError, match="rtol"):
        simulate(RIM, np.zeros((1, 4)) + 1.0, rtol=2.0)


def test_cli_writes_a_labelled_dataset_and_png(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["basin", "--grid", "12", "8", "--out", str(out), "--no-progress", "--json"])
    assert rc == 0
    with xr.open_zarr(out / "basin.zarr") as z:
        assert z["outcome"].dtype == np.int8 and z["outcome"].dims == ("beta", "omega1")
        assert np.allclose(z["beta"], np.linspace(0.8, 1.8, 12))
        assert np.allclose(z["omega1"], np.linspace(-20, 20, 8))
        assert z["recontact"].shape == (12, 8) and z["t_end"].shape == (12, 8)
        assert json.loads(z.attrs["rim"])["R"] == 0.225 and z.attrs["t_max"] == 60.0
        assert z.attrs["command"].startswith("rollax basin --grid 12 8")
        for name, v in z.variables.items():  # units on every variable and coordinate
            assert isinstance(v.attrs.get("units"), str) and v.attrs["units"], name
        assert z["outcome"].attrs["flag_meanings"].split()[:3] == ["periodic", "in", "out"]
        # everything needed to redraw it
        again = basin.BasinMap.from_dataset(z.load())
    assert np.array_equal(
        again.outcome, basin_map(RIM, x=again.x, y=again.y, progress=False).outcome
    )
    assert (out / "basin.png").stat().st_size > 1000
    assert '"counts"' in capsys.readouterr().out
    # netCDF: the same map
    rc = main(
        ["basin", "--grid", "12", "8", "--out", str(out), "--no-progress", "--format", "netcdf"]
    )
    assert rc == 0 and not (out / ".basin.zarr").exists()
    with xr.open_dataset(out / "basin.nc", engine="scipy") as nc:
        assert np.array_equal(nc["outcome"].values, again.outcome)
        assert nc["t_end"].attrs["units"] == "s"
    assert main(["basin", "--grid", "12", "8", "--r", "-1", "--out", str(out)]) == 2
    assert "--r = -1 is not allowed" in capsys.readouterr().err


def test_a_narrow_f2_dip_is_found_with_any_sample_count():
    # Fig. 13 drilling, start 61,567 of the panel (benchmarks/RESULTS.md, stop 28): F2 dips
    # below zero at 0.285 s for less than a quarter of a step. The rim's default 4 samples a
    # step once stepped over it (the run separated 0.63 s late); the samples' parabola shows
    # the dip, so that step is now rejected and shrunk (events.unresolved) and 4, 8 and 16
    # samples, and rollax.solve, all find it.
    rim, kw = preset("fig13", "drilling")
    start = np.array(
        [[kw["x"].values[256], kw["y"].values[127], kw["fixed"]["omega2"], kw["fixed"]["omega3"]]]
    )
    system = RimRolling(rim, w1_target=0)
    t = {
        k: float(rollax.solve_ensemble(system, start, 0.0, 60.0, n_samples=k).t[0])
        for k in (4, 8, 16)
    }
    assert t[8] == pytest.approx(0.285302, abs=1e-6)
    assert abs(t[16] - t[8]) < 1e-9
    assert abs(t[4] - t[8]) < 1e-9
    sol = rollax.solve(system, start[0], 0.0, 60.0, n_samples=16)
    assert abs(float(sol.t) - t[16]) < 1e-8


def test_basin_map_passes_and_records_its_event_samples(tmp_path):
    # a 2 x 2 grid whose first start is the one of the narrow dip above: found with 4 and 8
    rim, kw = preset("fig13", "drilling")
    b, w = kw["x"].values[256], kw["y"].values[127]
    kw.update(x=Axis("beta", b, b + 0.01, 2), y=Axis("omega1", w, w + 0.1, 2), progress=False)
    m4, m8 = basin_map(rim, **kw), basin_map(rim, n_samples=8, **kw)
    assert (m4.n_samples, m8.n_samples) == (4, 8)
    assert m8.t_end[0, 0] == pytest.approx(0.285302, abs=1e-6)
    assert abs(m4.t_end[0, 0] - m8.t_end[0, 0]) < 1e-9
    with xr.open_zarr(m8.save(tmp_path, figure=False)) as saved:
        assert saved.attrs["n_samples"] == 8
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="n_samples = "):
            basin_map(rim, n_samples=bad, **kw)


def test_the_figure_names_what_differs_and_uses_colour_blind_safe_colours():
    from matplotlib.colors import to_rgb

    from rollax.plot import OUTCOME_COLOURS, basin_title
    from rollax.models.slip import SlipSettings

    small = dict(
        x=Axis("beta", 0.8, 1.8, 3),
        y=Axis("omega1", -20, 20, 2),
        fixed={"omega2": 35.0, "omega3": 10.0},
        progress=False,
    )
    t = basin_title(basin_map(Rim(k_d=0.02, R=0.23, g=9.7), **small))
    assert "R = 0.23 m" in t and "$k_d$ = 0.02 1/s" in t and "g = 9.7" in t
    assert "r =" not in t and "mu" not in t  # defaults and the rolling model's unused mu
    t = basin_title(basin_map(Rim(mu=0.5), slip=SlipSettings(), **small))
    assert r"slipping, $\mu$ = 0.5" in t
    # the fixed state components and the time cap with their units (a new-user review)
    assert r"$\omega_2$ = 35 1/s" in t and r"$\omega_3$ = 10 1/s" in t, t
    assert r"$t_{max}$ = 60 s" in t, t
    # periodic, in and out stay apart for a red-green colour-blind reader, who sees mostly
    # lightness and the blue-yellow axis: each pair differs in one of them (the old green
    # #2ca02c and red #d62728 differed by 0.08 and 0.11: they failed this)
    cols = [np.array(to_rgb(c)) for c in OUTCOME_COLOURS[:3]]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        ca, cb = cols[a], cols[b]
        light = abs(ca @ [0.299, 0.587, 0.114] - cb @ [0.299, 0.587, 0.114])
        blue_yellow = abs((ca[2] - (ca[0] + ca[1]) / 2) - (cb[2] - (cb[0] + cb[1]) / 2))
        assert light > 0.15 or blue_yellow > 0.3, (a, b)


def test_a_beta_range_beyond_an_angle_is_refused():
    # beta is the ball's angle around the tube: 1e300 ran, and its starts all "failed"
    rng = np.random.default_rng(4)
    for _ in range(6):
        inside = float(rng.uniform(-3.0, 3.0))
        lo, hi = (
            (inside, float(rng.choice([4.0, 1e300]))) if rng.uniform() < 0.5 else (-7.0, inside)
        )
        with pytest.raises(ValueError, match="beta = .* outside the allowed range"):
            basin_map(x=Axis("beta", lo, hi, 3), y=Axis("omega1", -1.0, 1.0, 2), progress=False)
    with pytest.raises(ValueError, match="beta = 5.0 is outside"):
        basin_map(
            x=Axis("omega1", -1.0, 1.0, 3),
            y=Axis("omega2", 30.0, 40.0, 2),
            fixed={"beta": 5.0, "omega3": 10.0},
            progress=False,
        )
