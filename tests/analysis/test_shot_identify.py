"""The shot's contact parameters from filmed bounces (issue 58): rollax.analysis.identification's
fit_bounce on generated records (tests/bounce_records.py, numpy + SciPy, no rollax): the 95 %
intervals cover the truth, what a record cannot tell is flagged, bad records are refused; and
the drag coefficient, which a bounce's short flights cannot tell, from filmed flights
(fit_flight)."""

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import rollax
from rollax.analysis.identification import (
    bounce_contact,
    bounce_observations,
    fit_bounce,
    fit_flight,
    read_bounce_csv,
    write_bounce_csv,
)
from rollax.systems import Shot

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bounce_records import make_flight, make_record  # noqa: E402


def _params(kind, truth):
    return {f"e_{kind}": truth["e"], f"mu_{kind}": truth["mu"], "c_d": truth["c_d"]}


def _agree(seeds, rim_modes):
    import jax.numpy as jnp

    for seed in seeds:
        for kind in ("rim", "board"):
            rec = make_record(seed, kind, sigma=0.0, spin_filmed=True, sigma_spin=0.0)
            s = Shot(rim_modes=rim_modes, **_params(kind, rec.truth))
            # (the times padded to 64: one compiled solve for every record)
            ts = np.concatenate([rec.t, np.full(64 - len(rec.t), rec.t[-1])])
            sol = rollax.solve(s, jnp.asarray(rec.y0), 0.0, float(rec.t[-1]),
                               ts=jnp.asarray(ts), rtol=1e-11, atol=1e-11)  # fmt: skip
            ys = np.asarray(sol.ys)[: len(rec.t)]
            np.testing.assert_allclose(ys[:, :3], rec.centre, atol=1e-7)
            np.testing.assert_allclose(ys[:, 6:9], rec.spin, atol=1e-6)
            assert float(sol.aux[0] + sol.aux[1]) == 1.0  # one impact, counted


def test_generated_bounces_are_the_shots_own():
    # the independent records against rollax.solve of the Shot with the true parameters,
    # flight and impacts only (rim_modes=False: what fit_bounce fits)
    _agree(range(6), rim_modes=False)


@pytest.mark.slow  # (the full Shot's solve compiles for 50 s)
def test_generated_bounces_are_the_full_shots_own():
    # and of the Shot with its rim modes: a bounce leaves every contact, so the two agree
    _agree(range(3), rim_modes=True)


def _coverage(seeds):
    rows = []
    for seed in seeds:
        kind = "rim" if seed % 2 == 0 else "board"
        rec = make_record(seed, kind)
        obs = bounce_observations(rec.t, rec.centre, rec.spin)
        assert bounce_contact(obs)["kind"] == kind
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = fit_bounce(obs, shot=Shot(c_d=rec.truth["c_d"]), progress=False)
        said = " ".join(str(w.message) for w in caught)
        row = dict(seed=seed, kind=kind, stuck=rec.stuck, filmed=rec.spin is not None,
                   status=f.status)  # fmt: skip
        # the noise levels are estimated (none given): the intervals' level is F(1, nu)'s
        # 95 % quantile, above chi^2_1's 3.84 (20-60 degrees of freedom: 4.0-4.35)
        levels = {p["level"] for p in f.profile.values() if "level" in p}
        assert all(3.9 < v <= 4.4 for v in levels), levels
        row["level"] = min(levels, default=None)
        for key, name in (("e", f"e_{kind}"), ("mu", f"mu_{kind}")):
            # (a poor or unconverged fit has no profile: an open interval, failed below)
            lo, hi = f.profile.get(name, {"interval": (None, None)})["interval"]
            lo = -math.inf if lo is None else lo
            hi = math.inf if hi is None else hi
            row[key] = (rec.truth[key], f[name][0], lo, hi)
            row[key + "_covered"] = lo <= rec.truth[key] <= hi
            row[key + "_flagged"] = name in said and not math.isfinite(hi)
        rows.append(row)
        print(row)
    return rows


def _check(rows, least):
    e_cov = np.mean([r["e_covered"] for r in rows])
    mu_cov = np.mean([r["mu_covered"] for r in rows])
    print(f"coverage of the 95 % intervals: e {e_cov:.3f}, mu {mu_cov:.3f} ({len(rows)} records)")
    assert least <= e_cov <= 1.0 and least <= mu_cov <= 1.0
    for r in rows:
        # what a record cannot tell is flagged, not answered: an unfilmed spin bounds mu from
        # below only; an impact that stuck is flagged too, unless its noise favours a sliding
        # one beyond the 95 % level (then it is one of the 5 % an interval misses)
        if not r["filmed"]:
            assert r["mu_flagged"], r
        if r["stuck"] and not r["mu_flagged"]:
            assert not r["mu_covered"] or np.isfinite(r["mu"][3]), r
        # and the restitution is always answered: a closed interval
        assert math.isfinite(r["e"][2]) and math.isfinite(r["e"][3]), r


def test_bounce_intervals_cover_the_truth():
    # 8 records (rim and board, 120-240 Hz, 2-4 mm, spin filmed or not): CI's share; the
    # issue's 30-record check is the slow test below
    _check(_coverage(range(200, 208)), 0.75)


@pytest.mark.slow  # (40 records, about 60 s after the compile)
def test_bounce_intervals_cover_the_truth_on_40_records():
    _check(_coverage(range(100, 140)), 0.85)


def _drag(seeds):
    rows = []
    for seed in seeds:
        rec = make_flight(seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = fit_flight(bounce_observations(rec.t, rec.centre), progress=False)
        lo, hi = f.profile["c_d"]["interval"]
        c_d, se = f["c_d"]
        row = dict(seed=seed, truth=rec.truth["c_d"], fit=c_d, se=se, lo=lo, hi=hi,
                   status=f.status, said=[str(w.message) for w in caught])  # fmt: skip
        print(row)
        assert f.status == "converged" and lo is not None and hi is not None, row
        assert (hi - lo) < 0.4 * c_d, row  # a flight measures it (+-3-20 %), unflagged
        assert not any("c_d" in m for m in row["said"]), row
        rows.append(row)
    return rows


def test_drag_from_filmed_flights():
    # 0.53-0.8 s of a three-point shot's flight, 120-180 Hz, 2-4 mm: c_d to 3-20 %
    rows = _drag(range(3))
    assert all(r["lo"] <= r["truth"] <= r["hi"] for r in rows), rows


@pytest.mark.slow  # (30 records, about 5 s each after the compile)
def test_drag_intervals_cover_the_truth_on_30_flights():
    rows = _drag(range(100, 130))
    cover = np.mean([r["lo"] <= r["truth"] <= r["hi"] for r in rows])
    print(f"c_d covered in {cover:.3f} of {len(rows)} flights")
    assert 0.85 <= cover <= 1.0


def test_a_bounce_cannot_tell_the_drag_and_says_so():
    # c_d fitted with the contact's parameters from a bounce record (0.2-0.5 s of flight):
    # its interval covers the truth but is wide, and a warning names it; e is still answered
    for seed in (200, 203):
        kind = "rim" if seed % 2 == 0 else "board"
        rec = make_record(seed, kind)
        obs = bounce_observations(rec.t, rec.centre, rec.spin)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = fit_bounce(obs, fit=(f"e_{kind}", f"mu_{kind}", "c_d"), progress=False)
        lo, hi = f.profile["c_d"]["interval"]
        assert lo <= rec.truth["c_d"] <= hi and hi - lo > 0.5, (lo, hi)
        assert any(str(w.message).startswith("c_d") for w in caught)
        lo, hi = f.profile[f"e_{kind}"]["interval"]
        assert lo <= rec.truth["e"] <= hi


def test_a_flight_record_with_a_bounce_or_in_other_units_is_refused():
    # before any solve: a contact, too few samples, times in ms or positions in mm
    rec = make_record(201, "board")
    with pytest.raises(
        ValueError, match="(within .* cm of|reaches) the board at t = .* --fit e_board"
    ):
        fit_flight(bounce_observations(rec.t, rec.centre), progress=False)
    fl, ts = make_flight(4), np.arange(40) / 100.0
    for t, c, match in (
        (fl.t[:7], fl.centre[:7], "at least 8 samples, got 7"),
        (1e3 * fl.t, fl.centre, "moves at 0.0"),
        (fl.t, 1e3 * fl.centre, "moves at [0-9.e+]+ m/s"),
        (fl.t, fl.centre + [40.0, 0.0, 0.0], "m from the hoop"),
        # down through the plane where the shot ends (made or missed), and to the floor
        (ts, np.stack([-5 + 5 * ts, 0 * ts, 0.3 - 5 * ts**2], 1), "passes down through z = "),
        (ts, np.stack([-5 + 5 * ts, 0 * ts, -2.0 - 10 * ts], 1), "reaches the floor"),
    ):
        with pytest.raises(ValueError, match=match):
            fit_flight(bounce_observations(t, c), progress=False)


def test_a_head_on_bounce_cannot_tell_mu():
    # along the board's normal with no spin: friction has nothing to act on
    for seed in range(2):
        rec = make_record(seed, "board", head_on=True, spin_filmed=True)
        obs = bounce_observations(rec.t, rec.centre, rec.spin)
        with pytest.warns(rollax.IdentifiabilityWarning, match="mu_board"):
            f = fit_bounce(obs, progress=False)
        assert not math.isfinite(f["mu_board"][1])
        assert abs(f["e_board"][0] - rec.truth["e"]) < 4 * f["e_board"][1]


def test_bounce_records_are_read_and_bad_ones_refused(tmp_path):
    rec = make_record(3, "rim", spin_filmed=True)
    path = tmp_path / "bounce.csv"
    write_bounce_csv(path, rec.t, rec.centre, rec.spin)
    t, c, w = read_bounce_csv(path)
    np.testing.assert_allclose(c, rec.centre, rtol=1e-9) and np.testing.assert_allclose(t, rec.t)
    assert w is not None and w.shape == (len(t), 3)
    write_bounce_csv(path, rec.t, rec.centre)
    assert read_bounce_csv(path)[2] is None
    (tmp_path / "bad.csv").write_text("t,x,y\n0,1,2\n")
    with pytest.raises(ValueError, match="missing column 'z'"):
        read_bounce_csv(tmp_path / "bad.csv")
    # a flight with no bounce; a bounce in millimetres (the frame is off)
    flight = rec.centre[rec.t < rec.t_contact - 0.01]
    with pytest.raises(ValueError, match="no bounce found"):
        bounce_contact(bounce_observations(rec.t[: len(flight)], flight))
    with pytest.raises(ValueError, match="must be in m in the hoop's frame"):
        bounce_contact(bounce_observations(rec.t, rec.centre * 1000))
    obs = bounce_observations(rec.t, rec.centre)
    with pytest.raises(ValueError, match="fit: 'k_d' is not a contact parameter"):
        fit_bounce(obs, fit=("k_d",), progress=False)
    with pytest.raises(ValueError, match="centre has shape"):
        bounce_observations(rec.t, rec.centre[:, :2])


def test_the_shot_declares_its_contact_parameters_uncertainty():
    ranges = rollax.parameter_ranges(Shot())
    assert set(ranges) == {"e_rim", "mu_rim", "e_board", "mu_board", "c_d"}
    e_ball = (math.sqrt(49 / 72), math.sqrt(54 / 72))  # the NCAA rebound, 49-54 in of 72
    np.testing.assert_allclose((ranges["e_board"].lo, ranges["e_board"].hi), e_ball)
    np.testing.assert_allclose(
        (ranges["e_rim"].lo, ranges["e_rim"].hi),
        (e_ball[0] * math.sqrt(0.5), e_ball[1] * math.sqrt(0.65)),  # 35-50 % absorbed
    )
    for name, r in ranges.items():
        assert r.lo <= r.value <= r.hi and r.source and r.units == "1", name
    assert rollax.parameter_ranges(Shot(e_rim=0.5))["e_rim"].value == 0.5
    with pytest.raises(ValueError, match="must hold the default"):
        rollax.parameter(0.9, uncertain=(0.1, 0.5))
    with pytest.raises(ValueError, match="uncertain = 'ab' must be a pair"):
        rollax.parameter(0.9, uncertain="ab")


def test_rollax_identify_shot_on_a_filmed_bounce(tmp_path, capsys):
    import json

    from rollax.cli import main

    rec = make_record(208, "rim", spin_filmed=True)
    data = tmp_path / "bounce.csv"
    write_bounce_csv(data, rec.t, rec.centre, rec.spin)
    code = main(["identify", "shot", "--data", str(data), "--json", "--out", str(tmp_path / "o")])
    res = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and (code == 0) == (res["status"] == "converged")
    assert list(res["parameters"])[:2] == ["e_rim", "mu_rim"]
    assert res["units"]["parameters.y0.omega_x"] == "rad/s"
    e = res["parameters"]["e_rim"]
    assert abs(e["value"] - rec.truth["e"]) < 4 * e["std_error"]
    assert (tmp_path / "o" / "fit.png").exists() and (tmp_path / "o" / "identify.json").exists()
    # bad input: exit 2, one line
    assert main(["identify", "shot", "--data", str(data), "--fit", "k_d"]) == 2
    assert main(["identify", "shot", "--data", str(data), "--sigma-d", "0.1"]) == 2
    assert "--sigma-d: for the rim" in capsys.readouterr().err


def test_rollax_identify_shot_fits_a_flights_drag(tmp_path, capsys):
    import json

    from rollax.cli import main

    rec = make_flight(1)
    data = tmp_path / "flight.csv"
    write_bounce_csv(data, rec.t, rec.centre)
    code = main(["identify", "shot", "--data", str(data), "--fit", "c_d", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert code == 0 and res["status"] == "converged" and list(res["parameters"])[0] == "c_d"
    lo, hi = res["profile"]["c_d"]["interval"]
    assert lo <= rec.truth["c_d"] <= hi and res["units"]["profile.*.level"] == "1"
    # the default --fit (a bounce's e and mu) on a flight, and --fit c_d alone on a bounce
    # (its e and mu would be held at their defaults): refused in one line, exit 2
    assert main(["identify", "shot", "--data", str(data)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    rec = make_record(208, "rim")
    write_bounce_csv(data, rec.t, rec.centre)
    assert main(["identify", "shot", "--data", str(data), "--fit", "c_d"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--fit e_rim mu_rim c_d" in err
