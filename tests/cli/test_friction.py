"""The ``rollax friction`` command line, in-process."""

import json
import math

import pytest

from _units import numbers_without_units
from rollax.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_law_json_and_figure(capsys, tmp_path):
    d = _json(
        capsys,
        [
            "friction",
            "law",
            "--pressure",
            "uniform",
            "--eps",
            "0",
            "1",
            "4",
            "--json",
            "--out",
            str(tmp_path),
        ],
    )
    assert d["Q"][0] == 0.0 and d["T"][0] == 1.0
    assert d["Q"][1] == pytest.approx(8 / (3 * math.pi), abs=1e-15)
    assert (tmp_path / "law.png").stat().st_size < 300_000
    d = _json(capsys, ["friction", "law", "--pressure", "hertz", "--eps", "0.5", "--json"])
    assert d["Q"][0] == pytest.approx(3 * math.pi / 32 * 0.5 * (4 - 0.25), abs=1e-15)  # (62)
    assert main(["friction", "law", "--eps", "-1"]) == 2


def test_limit_directions_and_fit(capsys):
    d = _json(
        capsys,
        [
            "friction",
            "limit-directions",
            "--body",
            "disc",
            "--force",
            "0",
            "--degree",
            "2",
            "--json",
        ],
    )
    assert d["bifurcations"]["F_T"] == pytest.approx(1.04732, abs=1e-5)
    assert any(x["circle"] and 0 < abs(x["w"][2]) < 1 for x in d["limit_directions"])
    d = _json(
        capsys,
        [
            "friction",
            "limit-directions",
            "--body",
            "ball",
            "--force",
            "1",
            "--degree",
            "3",
            "--json",
        ],
    )
    assert d["bifurcations"]["folds"] == []
    d = _json(
        capsys,
        [
            "friction",
            "fit",
            "--pressure",
            "uniform",
            "--model",
            "harmonic",
            "--degree",
            "2",
            "--json",
        ],
    )
    assert d["c"] == pytest.approx(d["c_quadrature"], abs=1e-9)
    d = _json(
        capsys,
        ["friction", "fit", "--pressure", "hertz", "--model", "pade", "--degree", "2", "--json"],
    )
    assert d["poles_free"] and d["error"]["rms_Q"] < 0.1


def test_stop(capsys, tmp_path):
    d = _json(
        capsys,
        [
            "friction",
            "stop",
            "--body",
            "disc",
            "--law",
            "exact-uniform",
            "--json",
            "--out",
            str(tmp_path),
        ],
    )
    assert d["stopped"] and d["eps"] == pytest.approx(0.653, abs=5e-4)
    assert d["eps"] == pytest.approx(d["eps_limit_direction"][0], abs=2e-6)
    # units (issue 56), as rollax shot --json has them
    assert numbers_without_units(d) == [], d["units"]
    assert d["units"]["t_stop"] == "sqrt(m*R/(mu*P))" and d["units"]["force"] == "1"
    assert (tmp_path / "stop.png").exists()
    assert main(["friction", "stop", "--law", "harmonic-x"]) == 2


def test_a_stop_that_does_not_happen_reports_no_stop(capsys, tmp_path):
    # a new-user review: --force 5 printed t_stop 3e143, eps 9e161 and exit 0
    assert main(["friction", "stop", "--force", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force = 5 is not allowed" in err
    d = _json(capsys, ["friction", "stop", "--force", "0.99", "--json", "--out", str(tmp_path)])
    assert d["stopped"] is False and d["t_stop"] is None and d["eps"] is None
    assert "did not stop" in d["note"] and not (tmp_path / "stop.png").exists()
    assert numbers_without_units(d) == [], d["units"]
