"""``rollax robot``: JSON output and figures."""

import json
import os

import pytest

from rollax.cli import main


def test_robot_disk_json_and_figures(capsys, tmp_path):
    assert main(["robot", "disk", "--json", "--out", str(tmp_path)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert round(res["mu_hat"], 4) == 0.2951
    assert res["min_N"] > 0 and 0 <= res["t_mu_hat"] <= 20
    for name in ("fig5_3_disk_motion.png", "fig5_4_disk_forces.png", "disk_data.npz", "disk.json"):
        assert os.path.getsize(tmp_path / name) > 100


def test_robot_ball_detach_json(capsys):
    assert main(["robot", "ball-detach", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["t_detach"] == pytest.approx(3.6095007, abs=2e-7)
    assert abs(res["min_N"]) < 1e-6 and res["lifts_off"] is False
    assert res["mu_hat"] is None


def test_robot_bad_tolerance(capsys):
    assert main(["robot", "disk", "--rtol", "2"]) == 2
    assert "rtol" in capsys.readouterr().err
