"""``rollax shot``: a labelled map and its figure, resumed from its store; bad input in one line."""

import json
import warnings

import numpy as np
import xarray as xr

from rollax.cli import main


def test_the_command_writes_a_labelled_map_and_resumes(tmp_path, capsys):
    out = tmp_path / "s"
    args = [
        "shot",
        "--grid",
        "16",
        "12",
        "--speed",
        "7.2",
        "7.9",
        "--no-progress",
        "--mc-shots",
        "512",
        "--out",
        str(out),
    ]
    assert main([*args, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert sum(first["counts"].values()) == 16 * 12
    assert first["units"]["best_release.speed"] == "m/s"
    assert first["units"]["best_release.angle"] == "degrees"
    # issue 58: the best release's probability is Monte Carlo (a fraction of n = --mc-shots
    # releases) with its standard error; the map's (biased) value is reported beside it
    best = first["best_release"]
    assert best["n"] == 512 and (best["probability"] * 512).is_integer()
    p_, se_ = best["probability"], best["std_error"]
    assert se_ == np.sqrt(max(p_ * (1 - p_), 1 / 512) / 512)
    assert 0 < best["map_probability"] <= 1 and best["map_probability"] != p_
    for k in ("std_error", "map_probability", "n"):
        assert first["units"][f"best_release.{k}"] == "1"
    with xr.open_zarr(out / "shot.zarr") as ds:
        for name, v in ds.variables.items():
            assert isinstance(v.attrs.get("units"), str) and v.attrs["units"], name
        p = ds["make_probability"].values
        assert p.shape == (16, 12) and 0 <= p.min() and p.max() <= 1
        assert ds.attrs["best_probability"] == first["best_release"]["probability"]
        assert ds.attrs["best_std_error"] == first["best_release"]["std_error"]
        assert ds.attrs["best_map_probability"] == first["best_release"]["map_probability"]
        assert ds.attrs["mc_shots"] == 512
        i = int(np.argmin(np.abs(ds["speed"].values - best["speed"])))
        k = int(np.argmin(np.abs(ds["angle"].values - best["angle"])))
        assert p[i, k] == best["map_probability"]
        assert "rollax shot" in ds.attrs["command"]
    assert (out / "shot.png").stat().st_size > 10_000
    # the same command again: resumed from the store (no warning), the same map
    assert main([*args, "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["counts"] == first["counts"] and "Warning" not in cap.err
    assert main([*args, "--format", "netcdf"]) == 0
    line = capsys.readouterr().out.splitlines()[0]  # the printed line: p ± se
    assert f"p = {p_:.3f} ± {se_:.3f} (Monte Carlo, n = 512;" in line, line
    with xr.open_dataset(out / "shot.nc", engine="scipy") as nc:
        assert np.array_equal(nc["make_probability"].values, p)
    # a grid coarser than the scatter: said once (it was said twice, a new-user review)
    coarse = ["shot", "--grid", "12", "8", "--no-progress", "--mc-shots", "256"]
    coarse += ["--out", str(tmp_path / "c")]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert main([*coarse, "--json"]) == 0
    msgs = [str(w.message) for w in said if "too coarse for this scatter" in str(w.message)]
    assert len(msgs) == 1, msgs


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    for bad in (
        ["--speed", "8", "7"],
        ["--angle", "95", "100"],
        ["--grid", "1", "5"],
        ["--sd-angle", "-1"],
        ["--mc-shots", "1"],
    ):
        assert main(["shot", *bad, "--out", str(tmp_path / "x")]) == 2, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("rollax shot"), (bad, err)
