"""Every benchmark, experiment and example script runs, at a tiny size, as a subprocess.

``tests/test_scripts_import.py`` checks that the names the scripts import exist; this runs them:
a renamed keyword, a changed return value or a crash anywhere in a script is caught here, not
when someone next regenerates its results. The convention, which every script must follow (a
new one without it fails below):

* ``--smoke``: the smallest sizes (grids, repeats, iterations, records) that still take every
  path through the script; without it the script behaves exactly as before;
* ``--out DIR``: write data and figures into DIR, never over the committed results beside the
  script (benchmarks whose results are only printed accept it and write nothing).

Each script runs as ``python script --smoke --out TMP`` with ``JAX_PLATFORMS=cpu``; an
experiment must write at least one PNG there, and no script may touch the files committed
beside it. Most of a smoke run is JAX compiling the script's solvers, which no size reduces:
the scripts that still take more than about 30 s are marked ``slow`` (left out of CI, run with
``pytest -m slow``), with the measured time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = (
    sorted(ROOT.glob("benchmarks/*.py"))  # not benchmarks/gpu/: those need a GPU
    + sorted(ROOT.glob("experiments/*/run.py"))
    + sorted(ROOT.glob("examples/*.py"))
)
TIMEOUT_S = 900

# Smoke runs over about 30 s, left out of CI: CPU seconds of the smoke run (user + system, cold
# compile cache, 2 cores shared with other work), nearly all of it JAX compiling, which no size
# cuts. The rest take 1-31 s each, about 200 CPU seconds together.
SLOW = {
    # (CI budget, stop 66: the benchmarks' smoke runs, 19-51 s each on a slow day here; they
    # are imported in CI by tests/test_scripts_import.py)
    "benchmarks/bench_basin.py": "19 s: the map's kernel compiles",
    "benchmarks/bench_identify.py": "36 s: the fits compile",
    "benchmarks/bench_kernel.py": "31 s: the kernel compiles per width",
    "benchmarks/bench_samples.py": "42 s: the kernel compiles per sample count",
    "benchmarks/bench_shot.py": "46 s: the shot's maps compile",
    "benchmarks/bench_solve.py": "30 s: rollax.solve and plain diffrax compile",
    "experiments/friction/run.py": "51 s: the friction laws' tables and fits compile",
    "benchmarks/bounce_coverage.py": "35 s (cache off): two bounce fits and their profiles compile",
    "benchmarks/bench_bounce_fit.py": "about 100 s: the full shot's Jacobian compiles (measured)",
    "benchmarks/bench_design.py": "about 60 s: the batched information compiles per width, and its gradient",
    "benchmarks/bench_event_cost.py": "about 40 s (cache off): a solve and its gradient compile twice",
    "benchmarks/bench_dask.py": "38 s: a local Dask cluster's workers each compile the map",
    "benchmarks/bench_dask_scale.py": "90 s: three local Dask clusters and two one-process maps",
    "benchmarks/bench_entry_points.py": "about 40 s: two fresh processes, each compiling a solve",
    "benchmarks/bench_first_answer.py": "46 s: two fresh processes, each compiling a gradient",
    "benchmarks/bench_gradients.py": "102 s: one process per case and integrator, each compiling",
    "benchmarks/bench_loop_warm.py": "about 40 s: six programs, each compiled",
    "benchmarks/bench_loop_vmap.py": "75 s: six vmapped programs, each compiled for two loops",
    "benchmarks/bench_optimize.py": "93 s: the SQP's solves, Jacobians and plain diffrax compile",
    "benchmarks/bench_penny.py": "144 s: five impact searches per law compile",
    "benchmarks/bench_robot_robust.py": "robust and multi-start SQP solves compile (cache off)",
    "benchmarks/bench_robot_infeasible.py": "32 s: the feasible run's SQP compiles; new CLI processes",
    "benchmarks/bench_slip.py": "55 s: the rolling and the slipping kernels, and the step costs",
    "benchmarks/bench_slip_tail.py": "about 50 s: the slipping kernel compiles",
    "examples/bouncing_ball.py": "39 s: the gradient through the impacts compiles",
    "experiments/design_rim/run.py": "about 70 s: the design, the fits and the simulated records compile",
    "experiments/identify/run.py": "73 s: the windowed fits, profiles and the slide fit compile",
    "experiments/penny/run.py": "136 s: the impact searches and the FTLEs compile",
    "experiments/rim_slip/run.py": "54 s: the rolling and the slipping kernels compile",
    "experiments/robot/run.py": "124 s: each robot model and solver compiles its own solves",
    "experiments/shot/run.py": "55 s: the shot's maps and probabilities compile",
    "experiments/shot_ranges/run.py": "the maps, best releases and per-start parameters compile",
    "experiments/robot_least_mu_robust/run.py": "two robust least-mu solves and validations compile",
    "experiments/robot_robust/run.py": "two robust optimisations, validations and searches compile",
    "experiments/robot_control/run.py": "110-120 s: the disk's and the ball's SQP solves compile",
}
# Scripts that fail for a reason inside src/ (to be fixed there): script -> the error.
XFAIL: dict[str, str] = {}


def _params():
    out = []
    for path in SCRIPTS:
        rel = path.relative_to(ROOT).as_posix()
        marks = [pytest.mark.slow] if rel in SLOW else []
        if rel in XFAIL:
            marks.append(pytest.mark.xfail(reason=XFAIL[rel], strict=False))
        out.append(pytest.param(rel, marks=marks, id=rel))
    return out


def test_the_scripts_are_found():
    rel = {p.relative_to(ROOT).as_posix() for p in SCRIPTS}
    assert "benchmarks/bench_basin.py" in rel and "benchmarks/scipy_rim_fit.py" in rel
    assert "experiments/steady/run.py" in rel and "examples/oscillator.py" in rel


def _committed(folder: Path) -> dict[str, int]:
    """The data files beside a script (not its source), with their modification times."""
    return {
        str(p): p.stat().st_mtime_ns
        for p in folder.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    }


@pytest.mark.parametrize("script", _params())
def test_script_runs_at_smoke_size(script, tmp_path):
    path = ROOT / script
    assert "--smoke" in path.read_text(), (
        f"{script} has no --smoke mode: give it one (argparse: --smoke shrinks every size to the "
        "minimum that still runs all of the script, --out DIR writes there instead of beside "
        "the script), as the other scripts do; see tests/test_scripts_smoke.py"
    )
    out = tmp_path / "out"
    before = _committed(path.parent)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"}
    r = subprocess.run(
        [sys.executable, str(path), "--smoke", "--out", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert r.returncode == 0, (
        f"{script} --smoke failed (exit {r.returncode})\n--- stdout (tail) ---\n"
        f"{r.stdout[-1500:]}\n--- stderr (tail) ---\n{r.stderr[-4000:]}"
    )
    if script.startswith("experiments/"):
        assert list(out.rglob("*.png")), f"{script} --smoke wrote no PNG into --out"
    assert _committed(path.parent) == before, f"{script} --smoke wrote beside the script"
