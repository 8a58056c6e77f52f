"""tests/ mirrors src/rollax (issue 34), checked on the source (``ast``; nothing is imported).

Every module ``src/rollax/<folder>/<module>.py`` has its tests in
``tests/<folder>/test_<module>.py``, the folder and the module named without their leading
underscore (``_core/_validate.py`` -> ``core/test_validate.py``, ``models/robot/ball.py`` ->
``models/robot/test_ball.py``); package ``__init__`` files, ``cli/__main__.py`` and the facades
``robot/`` and ``friction/`` (re-exports only) are left out. A module whose tests live in a file
that covers several modules is listed in ``COVERED_ELSEWHERE`` with that file, which must reach
the module through its imports. A new module without either fails here.

Tests about no one module stay at the top of tests/ (layering, lint, docs, the README, typing,
the scripts, the two integrators' conformance, bad input across the API, ...), beside the
shared helpers (``_fsolve``, ``_gradcheck``, ``rim_records``). Each folder of tests/ is a
package, so that two folders may hold test files of the same name.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "rollax"
TESTS = ROOT / "tests"

# public facades: an __init__ of re-exports (tests/test_layering.py holds them to it)
FACADES = ("robot", "friction")

# module (under src/rollax) -> the test file (under tests/) that covers it, where that is not the
# mirrored test_<module>.py; each reaches the module through its imports (checked below)
COVERED_ELSEWHERE: dict[str, str] = {
    # the robots' optimal-control problem (constraints, costs, the robust samples' values)
    "analysis/robot/_problem.py": "analysis/robot/test_optimal.py",
    # the uncertain parameters' box: with the robust control that uses it
    "analysis/robot/uncertain.py": "analysis/robot/test_robust.py",
    # float64 on import: checked with rollax.configure's opt-in devices and cache
    "_core/_setup.py": "core/test_config.py",
    # rollax.identify's goodness of fit, whiteness and profiles: on the rim records
    "_drivers/_diagnostics.py": "analysis/test_identification.py",
    # the library's plain ODE runs: the variational equation of the Floquet analysis
    "_drivers/_flows.py": "analysis/test_floquet.py",
    # rollax.identify's Levenberg-Marquardt
    "_drivers/_lm.py": "drivers/test_identify.py",
    # the friction laws: their property tests run on every law
    "models/friction/base.py": "models/friction/test_laws.py",
    "models/friction/coulomb.py": "models/friction/test_laws.py",
    "models/friction/elliptic.py": "models/friction/test_laws.py",
    "models/friction/exact.py": "models/friction/test_laws.py",
    "models/friction/harmonic.py": "models/friction/test_laws.py",
    "models/friction/linear.py": "models/friction/test_laws.py",
    "models/friction/pade.py": "models/friction/test_laws.py",
    "models/friction/quadrature.py": "models/friction/test_laws.py",
    "models/friction/sliding.py": "systems/test_friction.py",
    # the penny billiard's own closed-form search, the reference of the penny's analyses
    "models/_penny.py": "analysis/test_penny.py",
    # the robots' parts and the paper's examples
    "models/robot/controls.py": "models/robot/test_parts.py",
    "models/robot/examples.py": "models/robot/test_parts.py",
    "models/robot/rails.py": "models/robot/test_parts.py",
    "models/robot/quaternion.py": "models/robot/test_flight.py",
    # RimSlipping, the rolling <-> slipping hybrid
    "systems/rim.py": "models/test_slip.py",
    "analysis/friction.py": "models/friction/test_limit_directions.py",
    "analysis/slip.py": "models/test_slip.py",
    "analysis/robot/phases.py": "models/robot/test_flight.py",
    "analysis/robot/report.py": "cli/test_robot.py",
    "plot/robot.py": "analysis/robot/test_optimal.py",
    # sub-commands run beside the analysis they print
    "cli/basin.py": "analysis/test_basin.py",
    "cli/floquet.py": "analysis/test_floquet.py",
    "cli/identify.py": "drivers/test_identify.py",
    "cli/penny.py": "analysis/test_penny.py",
    "cli/steady.py": "analysis/test_steady.py",
}


def modules() -> list[PurePosixPath]:
    """Every module under src/rollax that needs tests, relative to it."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = PurePosixPath(path.relative_to(PKG).as_posix())
        if rel.name in ("__init__.py", "__main__.py") or rel.parts[0] in FACADES:
            continue
        out.append(rel)
    return out


def mirrored(rel: PurePosixPath) -> str:
    """The test file of a module, relative to tests/: ``_core/_validate.py`` ->
    ``core/test_validate.py``."""
    folders = [p.lstrip("_") for p in rel.parent.parts]
    return "/".join([*folders, f"test_{rel.stem.lstrip('_')}.py"])


# ------------------------------------------------------------------ what a test file reaches
def _dotted(rel: str) -> str:
    return "rollax." + rel.removesuffix(".py").replace("/", ".")


@functools.cache
def _files() -> dict[str, Path]:
    """Dotted name -> file, for every module and package of rollax, and name -> file for the
    helpers and test files at the top of tests/ (which other test files import)."""
    out = {p.stem: p for p in TESTS.glob("*.py")}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _from_module(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module that ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def _reexports(name: str) -> dict[str, str]:
    """For a package: each name its __init__ imports from a module (also the names it loads on
    first use, which its TYPE_CHECKING block imports) -> that module."""
    path = _files()[name]
    out = {}
    if path.name != "__init__.py":
        return out
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            mod = _from_module(node, name, path)
            for a in node.names:
                out[a.asname or a.name] = mod
    return out


def _longest_module(dotted: str) -> str | None:
    while dotted and dotted not in _files():
        dotted = dotted.rpartition(".")[0]
    return dotted or None


@functools.cache
def _uses(name: str, path: Path, source: str) -> frozenset[str]:
    """The modules that running a file may import: its imports at run time (at module level
    and in functions; not those only type checkers see), and for each name taken from a package
    (``from rollax import solve``, ``rollax.solve``) the module that defines it."""
    files = _files()
    tree = ast.parse(source, str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            node.body = []
    out: set[str] = set()
    aliases: dict[str, str] = {}  # a local name bound to a module -> that module

    def take(dotted: str) -> None:
        """A dotted name (module, or module and attributes): its module, and where a package
        re-exports the next name, the module that defines it."""
        mod = _longest_module(dotted)
        if mod is None:
            return
        out.add(mod)
        rest = dotted[len(mod) + 1 :].split(".") if dotted != mod else []
        if rest and rest[0]:
            origin = _reexports(mod).get(rest[0])
            if origin is not None and origin in files:
                out.add(origin)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                take(a.name)
                aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            mod = _from_module(node, name, path)
            for a in node.names:
                take(f"{mod}.{a.name}")
                if f"{mod}.{a.name}" in files:
                    aliases[a.asname or a.name] = f"{mod}.{a.name}"
    for node in ast.walk(tree):  # rollax.solve(...), rollax.cli.main(...), chunks.run_chunked
        if isinstance(node, ast.Attribute):
            parts = []
            base: ast.expr = node
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                take(".".join([aliases[base.id], *reversed(parts)]))
    if "rollax.cli" in out:  # rollax.cli.main(["basin", ...]) imports rollax.cli.basin by name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and (
                    getattr(node.func, "id", None) == "main"
                    or getattr(node.func, "attr", None) == "main"
                )
                and node.args
                and isinstance(node.args[0], (ast.List, ast.Tuple))
                and node.args[0].elts
                and isinstance(node.args[0].elts[0], ast.Constant)
            ):
                take(f"rollax.cli.{node.args[0].elts[0].value}")
    return frozenset(out)


def reach(test_file: Path) -> set[str]:
    """The rollax modules a test file reaches through its imports, and theirs, and so on (also
    through the helpers and other test files it imports from tests/)."""
    files = _files()
    seen: set[str] = set()
    todo = list(_uses(test_file.stem, test_file, test_file.read_text()))
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        todo.extend(_uses(mod, files[mod], files[mod].read_text()) - seen)
    return seen


# ------------------------------------------------------------------------------------ tests
def test_every_module_has_tests_in_the_mirrored_folder():
    missing = [
        f"src/rollax/{rel}: tests/{mirrored(rel)}"
        for rel in modules()
        if not (TESTS / mirrored(rel)).is_file() and str(rel) not in COVERED_ELSEWHERE
    ]
    assert not missing, (
        "modules without tests (add the mirrored test file, or, where a test file that covers "
        "several modules covers it, an entry of COVERED_ELSEWHERE in tests/test_layout.py):\n"
        + "\n".join(missing)
    )


def test_each_exception_is_needed_and_names_a_test_file():
    names = {str(rel) for rel in modules()}
    for rel, test in COVERED_ELSEWHERE.items():
        assert rel in names, f"{rel}: not a module that needs tests (remove its entry)"
        own = mirrored(PurePosixPath(rel))
        assert not (TESTS / own).exists(), f"{rel}: tests/{own} exists (remove its entry)"
        assert (TESTS / test).is_file() and Path(test).name.startswith("test_"), (rel, test)


def test_each_exception_reaches_its_module():
    bad = [
        f"{rel}: tests/{test} does not import it, directly or through what it imports"
        for rel, test in COVERED_ELSEWHERE.items()
        if _dotted(rel) not in reach(TESTS / test)
    ]
    assert not bad, "\n".join(bad)


def test_reach_follows_imports_names_and_lazy_loads(tmp_path):
    # a check of the check: an import alone reaches little; the names used reach their modules
    path = tmp_path / "test_example.py"
    path.write_text("import rollax\n")
    assert "rollax._integrate._solve" not in reach(path)
    path.write_text("import rollax\n\n\ndef test():\n    rollax.solve\n")
    assert "rollax._integrate._solve" in reach(path)
    path.write_text("from rollax.friction import Coulomb\n")
    assert "rollax.models.friction.coulomb" in reach(path)
    assert "rollax.models.robot.ball" not in reach(path)
    path.write_text("from rollax.cli import main\n\n\ndef test():\n    main(['steady', '-h'])\n")
    assert "rollax.cli.steady" in reach(path) and "rollax.cli.basin" not in reach(path)


def test_test_folders_mirror_source_folders_and_are_packages():
    for folder in sorted(TESTS.rglob("*")):
        rel = folder.relative_to(TESTS)
        if not folder.is_dir() or any(p.startswith((".", "__")) for p in rel.parts):
            continue
        source = PKG
        for part in rel.parts:
            source = source / part if (source / part).is_dir() else source / f"_{part}"
        assert source.is_dir() and rel.parts[0] not in FACADES, (
            f"tests/{rel.as_posix()} mirrors no folder of src/rollax"
        )
        # two folders may then hold test files of the same name (tests/cli/test_robot.py,
        # tests/systems/test_robot.py)
        assert (folder / "__init__.py").is_file(), f"tests/{rel.as_posix()} has no __init__.py"


def test_mirrored_test_files_stay_in_their_folder():
    # a test file named like a module belongs beside that module's mirror, not at the top
    stray = sorted(
        p.name
        for p in TESTS.glob("test_*.py")
        if any(p.name == PurePosixPath(mirrored(rel)).name for rel in modules())
    )
    assert not stray, stray
