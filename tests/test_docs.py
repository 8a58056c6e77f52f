"""The documentation site builds in strict mode, and the guide's examples run as written and
print what their comments say."""

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide"


def test_the_site_builds_strict(tmp_path):
    # every page in the nav, every API name rendered (mkdocstrings), no broken reference
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    import rollax
    import rollax.friction
    import rollax.robot
    import rollax.systems

    # every public name of the top level and of each public sub-package has its reference entry
    for mod in (rollax, rollax.systems, rollax.robot, rollax.friction):
        missing = [n for n in mod.__all__ if f'id="{mod.__name__}.{n}"' not in api]
        assert not missing, (mod.__name__, missing)


def _run_page(name: str, ns: dict | None = None) -> list[str]:
    code = re.findall(r"```python\n(.*?)```", (GUIDE / name).read_text(), re.S)
    assert code, name
    out = io.StringIO()
    ns = {} if ns is None else ns
    ns["__name__"] = f"docs_{name}"
    with contextlib.redirect_stdout(out):
        for block in code:
            exec(compile(block, str(GUIDE / name), "exec"), ns)
    return out.getvalue().splitlines()


def _numbers(line: str) -> np.ndarray:
    return np.array([float(x) for x in re.findall(r"-?\d+\.\d*(?:e-?\d+)?|-?\d+e-?\d+", line)])


def test_writing_a_system_examples():
    ns: dict = {}
    out = _run_page("systems.md", ns)
    assert int(ns["sol"].resets) == 3 and int(ns["sol"].events.n) == 4  # as the page says
    assert float(ns["sol"].y[0]) == 0.0  # the terminal reset's state: on the floor
    assert out[0].startswith("EVENT ") and abs(float(out[0].split()[1]) - 5 * np.pi / 4) < 1e-9
    d = _numbers(out[1])
    assert abs(d[0] - d[1]) < 1e-7 and abs(d[1] + 5 * np.pi / 8) < 1e-12
    np.testing.assert_allclose(_numbers(out[2]), 2.5, atol=1e-9)
    got, want = _numbers(out[3]), _numbers(out[4])
    assert got.size == want.size == 4
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_sweeps_and_basin_maps_examples():
    out = _run_page("sweeps.md")
    assert out[0].startswith("(4, 3) {'event': 12")
    assert float(out[1]) < 1e-9
    assert out[2].startswith("(12, 8) {'periodic': ")
    counts = eval(out[2][len("(12, 8) ") :])  # noqa: S307 - the page's own printed dict
    assert sum(counts.values()) == 96 and counts["in"] + counts["out"] > 0


def test_identifying_parameters_example():
    out = _run_page("identify.md")
    assert out[0].split()[0] == "converged" and 0.5 < float(out[0].split()[1]) < 2.0
    (w, dw), (c, dc) = _numbers(out[1]).reshape(2, 2)
    assert abs(w - 2.0) < 4 * dw and abs(c - 0.3) < 4 * dc  # the truth within the error bars
    assert dw < 0.01 and dc < 0.01


@pytest.mark.slow  # an SQP over 4-knot splines: about a minute of compile and iterations
def test_optimal_control_example():
    ns: dict = {}
    out = _run_page("robot.md", ns)
    opt = ns["opt"]
    assert out[0].split()[0] == "converged" and opt.converged and opt.feasible
    miss, n_min, ratio = _numbers(out[1])
    assert abs(miss) < 1e-4 and n_min >= 0.5 - 1e-3 and ratio <= 0.2 + 1e-3
    assert out[2].startswith("infeasible needs mu >= 0.555 for phi_T = -6.28319 in T = 6 ")
    up = ns["uphill"]  # the sloping floor's example
    assert (
        out[3].split()[0] == "converged"
        and up.converged
        and float(up.manoeuvre.model.slope) == 0.02
    )
    assert float(out[3].split()[1]) == round(up.cost, 3) and abs(up.cost - 1.562) < 0.01


@pytest.mark.slow  # ~2 min: a robust optimisation, its validation and search (CI budget)
def test_robust_control_example():
    ns: dict = {}
    out = _run_page("robot_robust.md", ns)
    status, j_nom, j_rob = out[0].split()
    assert status == "converged" and float(j_rob) > float(j_nom) > 0
    r_nom, r_rob = (float(v) for v in out[1].split())
    assert r_nom > 0.05 and r_rob == 0.0
    assert out[2] == "False"


@pytest.mark.slow  # ~40 s: the batched information and a fit compile (CI budget)
def test_experiment_design_example():
    out = _run_page("design.md")
    n_feasible, n_early = (int(v) for v in out[0].split())
    assert n_feasible + n_early == 64 and 0 < n_early < 64
    best, worst = _numbers(out[1]).reshape(2, 2)
    assert np.all(best * 2 < worst)  # the designed throw is worth far more than the worst
    assert out[2].split()[0] == "converged"
    fitted, predicted = _numbers(out[2]).reshape(2, 2)
    np.testing.assert_allclose(fitted, predicted, rtol=0.3)


def _sweeps_by_store(page: str) -> dict[str, set[str]]:
    """Each ``store=`` path a page's ``rollax.sweep`` calls write, with the options of each
    call that writes it (where the call runs left out: ``client``, ``progress``)."""
    import ast

    stores: dict[str, set[str]] = {}
    for block in re.findall(r"```python\n(.*?)```", (GUIDE / page).read_text(), re.S):
        for node in ast.walk(ast.parse(block)):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("sweep")):
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg not in ("client", "progress")}
            store = kw.pop("store", None)
            if isinstance(store, ast.Constant):
                options = [ast.unparse(a) for a in node.args]
                options += sorted(f"{k}={ast.unparse(v)}" for k, v in kw.items())
                stores.setdefault(store.value, set()).add(", ".join(options))
    return stores


@pytest.mark.parametrize("page", sorted(p.name for p in GUIDE.glob("*.md")))
def test_no_two_sweeps_of_a_page_share_a_store(page):
    # issue 56: distributed.md's Dask example wrote block 0's store with other options, so
    # running the page in order replaced block 0's finished map
    for store, calls in _sweeps_by_store(page).items():
        assert len(calls) == 1, (page, store, sorted(calls))


@pytest.mark.slow  # the Fig. 11 map, then again on a 2-worker LocalCluster: a few minutes
def test_the_distributed_examples_run_in_order_and_lose_no_store(tmp_path, monkeypatch):
    import warnings

    import xarray as xr

    monkeypatch.chdir(tmp_path)
    code = re.findall(r"```python\n(.*?)```", (GUIDE / "distributed.md").read_text(), re.S)
    ns: dict = {"__name__": "__main__"}
    ran = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", __import__("rollax").StoreWarning)  # nothing replaced
        for i, block in enumerate(code):
            if re.search(r"^(from|import) (dask_jobqueue|dask_cuda)", block, re.M):
                continue  # a SLURM cluster, GPUs: not on this machine
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(block, f"distributed.md block {i}", "exec"), ns)
            ran.append(i)
    assert ran == [0, 1, 2]
    with xr.open_zarr("fig11.zarr") as ds:  # block 0's map is still there, whole
        assert "y_beta" not in ds and ds["outcome"].shape == (360, 240)
    with xr.open_zarr("fig11-dask.zarr") as ds:
        assert "y_beta" in ds and ds["outcome"].shape == (360, 240)
