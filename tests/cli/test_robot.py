"""``rollax robot``: JSON output and figures."""

import json
import os

import numpy as np

import pytest

from _units import numbers_without_units
from rollax.cli import main


def test_robot_disk_json_and_figures(capsys, tmp_path):
    assert main(["robot", "disk", "--json", "--out", str(tmp_path)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert round(res["mu_hat"], 4) == 0.2951
    assert res["min_N"] > 0 and 0 <= res["t_mu_hat"] <= 20
    # units (issue 56), as rollax shot --json has them
    assert numbers_without_units(res) == [], res["units"]
    assert res["units"]["t_mu_hat"] == "sqrt(r/g)" and res["units"]["min_N"] == "m*g"
    assert json.loads((tmp_path / "disk.json").read_text())["units"] == res["units"]
    for name in ("fig5_3_disk_motion.png", "fig5_4_disk_forces.png", "disk_data.npz", "disk.json"):
        assert os.path.getsize(tmp_path / name) > 100


@pytest.mark.slow  # (69 s: the ball's flight compiles in the CLI; CI time)
def test_robot_ball_detach_json(capsys):
    assert main(["robot", "ball-detach", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    # rollax's own value (the paper prints 3.7358), which the independent SciPy re-simulation
    # reproduces (tests/models/robot/test_flight.py::test_heavy_ball_detaches)
    assert res["t_detach"] == pytest.approx(3.6095007, abs=2e-7)
    assert abs(res["min_N"]) < 1e-6 and res["lifts_off"] is False
    assert res["mu_hat"] is None
    assert numbers_without_units(res) == [] and res["units"]["t_detach"] == "sqrt(r/g)"


def test_robot_bad_tolerance(capsys):
    assert main(["robot", "disk", "--rtol", "2"]) == 2
    assert "rtol" in capsys.readouterr().err


def test_robot_optimize_writes_json_and_figures(tmp_path, capsys):
    import json

    rc = main(
        [
            "robot",
            "optimize",
            "--body",
            "disk",
            "--T",
            "8",
            "--mu",
            "inf",
            "--n-min",
            "-inf",
            "--knots",
            "4",
            "--json",
            "--out",
            str(tmp_path),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["status"] == "converged"
    data = json.loads((tmp_path / "optimize.json").read_text())
    assert data["cost_kind"] == out["cost_kind"] == "effort" and data["cost"] == data["effort"]
    assert len(data["t"]) == 1001 and data["t"][0] == 0.0 and abs(data["t"][-1] - 8.0) < 1e-12
    for key in ("theta", "theta_dot", "theta_ddot"):
        assert len(data[key]) == 1001 and len(data[key][0]) == 4
    assert abs(data["final_state"][8] + 3.141592653589793) < 1e-5  # phi(T)
    for key in ("cost", "min_N", "max_friction_ratio", "converged", "iterations", "wall_time"):
        assert key in data
    for png in ("path", "masses", "normal_force", "friction", "convergence"):
        assert (tmp_path / f"{png}.png").stat().st_size > 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--T", "0"],
        ["--T", "-1"],
        ["--mu", "-0.1"],
        ["--n-min", "inf"],
        ["--time-limit", "0"],
        ["--time-limit", "-1"],
        ["--knots", "1"],
        ["--body", "cube"],
        ["--target", "1"],
        ["--cost", "foo"],
        ["--least-mu", "--cost", "time"],
        ["--least-mu", "--mu", "0.3"],  # (ignored without a word before issue 59)
        ["--samples", "8"],  # robust options without --uncertain
        ["--probability", "0.9"],
        ["--validate", "100"],
        ["--uncertain", "mu"],
        ["--uncertain", "mu=a:b"],
        ["--uncertain", "slope=1%"],
        ["--slope", "0.1", "0.2"],  # the disk's floor slope is one number
        ["--body", "ball", "--slope", "0.1"],  # the ball's is two
        ["--slope", "nan"],
        ["--uncertain", "masses=150%"],
        ["--uncertain", "mu=normal:40%"],
        ["--least-mu", "--uncertain", "mu=10%"],
        ["--least-mu", "--uncertain", "masses=1%", "--probability", "0.9"],
    ],
)
def test_robot_optimize_bad_requests_exit_2(argv, capsys):
    assert main(["robot", "optimize", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]


@pytest.mark.parametrize("cost", ["effort", "energy", "time"])
def test_robot_optimize_passes_the_cost_on(cost, monkeypatch, capsys):
    import rollax.robot

    seen = {}

    def fake(man, **kwargs):
        seen.update(kwargs)
        raise ValueError("stop here")

    monkeypatch.setattr(rollax.robot, "optimize", fake)
    assert main(["robot", "optimize", "--cost", cost, "--json"]) == 2
    assert seen["cost"] == cost and "stop here" in capsys.readouterr().err


def test_each_robot_command_has_its_own_help(capsys):
    # `rollax robot optimize --help` lists optimize's options, an example's help does not
    for argv, has, lacks in [
        (["robot", "optimize", "--help"], ["--n-min", "--least-mu", "--rtol"], ["ball-detach"]),
        (["robot", "disk", "--help"], ["--rtol", "--json"], ["--n-min", "--least-mu"]),
    ]:
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
        out = capsys.readouterr().out
        assert rc == 0
        assert all(h in out for h in has) and not any(x in out for x in lacks), out


def test_an_optimize_option_on_an_example_is_refused_in_one_line(capsys):
    assert main(["robot", "disk", "--T", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--T applies to `rollax robot optimize` only" in err[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--body", "disk", "--phi-T", "-6.2832", "--T", "6", "--mu", "0.2", "--n-min", "0.5"],
            "needs mu >= 0.555 for phi_T = -6.2832 in T = 6",
        ),
        (["--body", "ball", "--target", "20", "0", "--T", "6", "--mu", "0.2"], "needs mu >= "),
        (["--cost", "time", "--phi-T", "-60", "--T", "3", "--mu", "0.1"], "needs T >= 48.76"),
        (["--n-min", "6"], "needs n_min <= M g = 5"),
        (["--n-min", "6", "--least-mu"], "needs n_min <= M g = 5"),
        (  # robust: the box's vertex at mu 0.5 fails the bound the nominal 0.6 meets
            ["--phi-T", "-6.2832", "--T", "6", "--mu", "0.6", "--uncertain", "mu=0.5:0.7"],
            "at the uncertain box's vertex mu 0.5: ",
        ),
    ],
)
def test_an_infeasible_request_is_answered_at_once_exit_1(argv, message, capsys, tmp_path):
    import rollax.analysis.robot.optimal as optimal

    def trap(*args, **kwargs):
        raise AssertionError("a solve was started")

    mp = pytest.MonkeyPatch()
    mp.setattr(optimal._nlp, "minimize", trap)
    mp.setattr(optimal, "solve", trap)
    try:
        rc = main(["robot", "optimize", *argv, "--json", "--out", str(tmp_path)])
    finally:
        mp.undo()
    out, err = capsys.readouterr()
    res = json.loads(out)
    assert rc == 1 and res["status"] == "infeasible" and message in res["message"], res
    assert res["iterations"] == 0 and "Traceback" not in err
    assert json.loads((tmp_path / "optimize.json").read_text())["message"] == res["message"]
    # and in words without --json
    assert main(["robot", "optimize", *argv]) == 1
    out = capsys.readouterr().out
    assert "status: infeasible" in out and message in out


def test_robot_optimize_passes_the_time_limit_on(monkeypatch, capsys):
    import rollax.robot

    seen = {}

    def fake(man, **kwargs):
        seen.update(kwargs)
        raise ValueError("stop here")

    monkeypatch.setattr(rollax.robot, "optimize", fake)
    assert main(["robot", "optimize", "--time-limit", "2.5", "--json"]) == 2
    assert seen["time_limit"] == 2.5


def test_robot_optimize_passes_the_uncertainty_on(monkeypatch, capsys):
    import rollax.robot

    seen = {}

    def fake(man, **kwargs):
        seen.update(kwargs)
        raise ValueError("stop here")

    monkeypatch.setattr(rollax.robot, "optimize", fake)
    argv = ["robot", "optimize", "--uncertain", "mu=0.2:0.3", "masses=2%", "rails=0.01",
            "--samples", "8", "--probability", "0.9", "--json"]  # fmt: skip
    assert main(argv) == 2 and "stop here" in capsys.readouterr().err
    assert seen["uncertain"] == {"mu": (0.2, 0.3), "masses": "2%", "rails": "0.01"}
    assert seen["samples"] == 8 and seen["probability"] == 0.9


def test_robot_optimize_puts_the_robot_on_the_sloping_floor(monkeypatch, capsys):
    import rollax.robot

    seen = {}

    def fake(man, **kwargs):
        seen.update(kwargs, man=man)
        raise ValueError("stop here")

    monkeypatch.setattr(rollax.robot, "optimize", fake)
    argv = ["robot", "optimize", "--slope", "0.02", "--uncertain", "slope=-0.01:0.05", "--json"]
    assert main(argv) == 2 and "stop here" in capsys.readouterr().err
    assert float(seen["man"].model.slope) == 0.02
    assert seen["uncertain"] == {"slope": (-0.01, 0.05)}
    argv = ["robot", "optimize", "--body", "ball", "--slope", "0.01", "-0.03", "--json"]
    assert main(argv) == 2
    assert np.asarray(seen["man"].model.slope).tolist() == [0.01, -0.03]
