"""ruff's lint and format (pyproject.toml's [tool.ruff]) are clean on every Python file of
the project."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["src", "tests", "benchmarks", "experiments", "examples", "docs/griffe_roles.py"]


@pytest.mark.parametrize(
    "command",
    [["check", "--no-cache"], ["format", "--check", "--no-cache"]],
    ids=["lint", "format"],
)
def test_ruff_is_clean(command):
    r = subprocess.run(
        [sys.executable, "-m", "ruff", *command, *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
