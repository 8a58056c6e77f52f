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
        "--out",
        str(out),
    ]
    assert main([*args, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert sum(first["counts"].values()) == 16 * 12
    assert first["units"]["best_release.speed"] == "m/s"
    assert first["units"]["best_release.angle"] == "degrees"
    with xr.open_zarr(out / "shot.zarr") as ds:
        for name, v in ds.variables.items():
            assert isinstance(v.attrs.get("units"), str) and v.attrs["units"], name
        p = ds["make_probability"].values
        assert p.shape == (16, 12) and 0 <= p.min() and p.max() <= 1
        assert ds.attrs["best_probability"] == first["best_release"]["probability"]
        assert "rollax shot" in ds.attrs["command"]
    assert (out / "shot.png").stat().st_size > 10_000
    # the same command again: resumed from the store (no warning), the same map
    assert main([*args, "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["counts"] == first["counts"] and "Warning" not in cap.err
    assert main([*args, "--format", "netcdf"]) == 0
    with xr.open_dataset(out / "shot.nc", engine="scipy") as nc:
        assert np.array_equal(nc["make_probability"].values, p)
    # a grid coarser than the scatter: said once (it was said twice, a new-user review)
    coarse = ["shot", "--grid", "12", "8", "--no-progress", "--out", str(tmp_path / "c")]
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
    ):
        assert main(["shot", *bad, "--out", str(tmp_path / "x")]) == 2, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("rollax shot"), (bad, err)
