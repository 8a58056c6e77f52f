"""The README's Python examples run as written (at their own size where they are quick, and
the slow ones at a smaller size), and print what their comments say."""

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

import rollax

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def _run(code: str, ns: dict) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), ns)
    return out.getvalue()


def test_the_first_example_ends_at_separation_as_its_comments_say():
    # the solve, the printed names and the gradient of the separation time, as written
    ns: dict = {}
    out = _run(_blocks()[0], ns).splitlines()
    sol, system = ns["sol"], ns["system"]
    assert out[0].startswith("EVENT 0 ")  # rollax.Status.EVENT, event 0: separation
    assert system.events[int(sol.event)].name == "separation"
    assert out[1] in ("IN", "OUT")
    assert out[2].startswith("EVENT at t = ") and "'separation'" in out[2]
    # the printed gradient is that of the separation time: a central difference agrees (with
    # a small step: t_separation bends fast in k_d, the difference with 1e-5 is 0.5 % off and
    # with 1e-4 has the wrong sign; measured 2026-11-26)
    import jax.numpy as jnp
    from rollax.models.rim import Rim
    from rollax.systems import RimRolling

    def t_sep(k):
        s = rollax.solve(
            RimRolling(Rim(k_d=k), w1_target=0),
            jnp.array([1.1, 1.0, 35.0, 10.0]),
            0.0,
            60.0,
            rtol=1e-12,
            atol=1e-12,
        )
        assert int(s.event) == 0
        return float(s.t)

    fd = (t_sep(0.02 + 1e-7) - t_sep(0.02 - 1e-7)) / 2e-7
    assert float(ns["dt_dkd"]) == pytest.approx(fd, rel=1e-4)


def test_the_new_system_example_defines_a_system_that_solves():
    import jax
    import jax.numpy as jnp

    ns = {"rollax": rollax, "jax": jax, "jnp": jnp}
    _run(_blocks()[1], ns)
    osc = ns["Oscillator"]()
    sol = rollax.solve(osc, jnp.array([1.0, 0.0]), 0.0, 100.0)
    # the 6th zero of cos(t): t = 5.5 pi
    assert sol.status_name == "EVENT" and float(sol.t) == pytest.approx(5.5 * np.pi, abs=1e-6)


def test_the_event_history_example_prints_the_closed_form_impacts(monkeypatch):
    import jax
    import jax.numpy as jnp

    monkeypatch.chdir(README.parent)
    ns = {"rollax": rollax, "jax": jax, "jnp": jnp}
    out = _run(_blocks()[2], ns)
    ball = ns["ball"]
    ref = ball.impact_times(1.0, 4)
    np.testing.assert_allclose(ns["sol"].events.t[:4], ref, atol=1e-8)
    assert out.splitlines()[2] == "4 False"
    # d t_3 / d e = 2 T0 (1 + 2 e), T0 = sqrt(2 z0 / g)
    assert float(ns["dt3"]) == pytest.approx(2 * np.sqrt(2 / 9.81) * (1 + 2 * 0.8), rel=1e-6)
    for i, z0 in enumerate((0.5, 1.0, 2.0)):
        np.testing.assert_allclose(ns["ens"].events.t[i], ball.impact_times(z0, 4), atol=1e-8)


def test_the_basin_example_runs_at_a_small_size(tmp_path, monkeypatch):
    # the preset's call, on a 12 x 8 grid instead of 360 x 240, saved under a temporary folder
    monkeypatch.chdir(tmp_path)
    code = _blocks()[3].replace("360", "12").replace("240", "8")
    from rollax.models.rim import Rim

    out = _run(code, {"Rim": Rim})
    counts = eval(out.splitlines()[0])
    assert sum(counts.values()) == 96
    assert (tmp_path / "out" / "fig11" / "basin.png").exists()


def test_the_identification_example_reads_the_shipped_data(monkeypatch):
    # the path it names exists (relative to the repository root) and the fit runs on it
    root = README.parent
    monkeypatch.chdir(root)
    code = _blocks()[4]
    path = re.search(r'read_rim_csv\("([^"]+)"\)', code).group(1)
    assert (root / path).exists(), path
    ns: dict = {}
    with pytest.warns(rollax.IdentifiabilityWarning, match="k_r"):  # the truth is k_r = 0
        out = _run(code, ns)
    fit = ns["fit"]
    assert out.split()[0] == "converged" and str(fit.status) == "converged"
    assert 0.8 < fit.chi2_per_dof < 1.25
    lo, hi = fit.profile["k_d"]["interval"]
    assert lo < 0.02 < hi  # the data's truth (experiments/identify/run.py)


@pytest.mark.slow
def test_the_robot_example_runs_at_a_small_size():
    # 6 knots and one start instead of 16 and 3 (86 s on this 2-core machine: a slow test);
    # the least-mu curve's bound: a momentum argument gives >= 0.156 at T = 8 s
    code = (
        _blocks()[5]
        .replace("knots=16, starts=3", "knots=6, starts=1")
        .replace(
            "least_mu(disk_manoeuvre(T=8.0), progress=True)",
            "least_mu(disk_manoeuvre(T=8.0), knots=6)",
        )
    )
    ns: dict = {}
    out = _run(code, ns).splitlines()
    assert out[0].split()[0] == "converged"
    assert 0.156 <= float(out[1]) < 0.25
    assert {"t", "theta"} <= set(ns["data"])
