"""Every name that a benchmark or experiment script imports from rollax exists (a renamed or
removed function broke ``benchmarks/bench_kernel.py`` with an ImportError unnoticed: its
RESULTS table could not be regenerated). Checked without running the scripts: their
``from rollax... import`` statements are read from the source, then resolved in one process."""

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> list[tuple[str, str | None]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("rollax")
            and not node.level
        ):
            out += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.startswith("rollax")]
    return out


def test_every_rollax_name_the_scripts_import_exists():
    scripts = sorted((ROOT / "benchmarks").rglob("*.py")) + sorted(
        (ROOT / "experiments").rglob("*.py")
    )
    assert len(scripts) > 10
    wanted = {str(p.relative_to(ROOT)): _imports(p) for p in scripts}
    code = (
        "import importlib, json, sys\n"
        "wanted = json.loads(sys.stdin.read())\n"
        "bad = {}\n"
        "for script, names in wanted.items():\n"
        "    for mod, name in names:\n"
        "        try:\n"
        "            m = importlib.import_module(mod)\n"
        "        except ImportError as e:\n"
        "            bad.setdefault(script, []).append(f'{mod}: {e}')\n"
        "            continue\n"
        "        if name is not None and not hasattr(m, name):\n"
        "            try:\n"
        "                importlib.import_module(f'{mod}.{name}')\n"
        "            except ImportError:\n"
        "                bad.setdefault(script, []).append(f'{mod}.{name}')\n"
        "print(json.dumps(bad))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(wanted),
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {}
