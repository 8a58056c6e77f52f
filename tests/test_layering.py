"""The package's layering, checked on the source (``ast``; nothing is imported).

The folders are the layers, each importing only those below it:
``_core`` (the system abstraction, solutions, events, validation) -> ``_integrate`` (the
integrators) -> ``_drivers`` (sweeps, identification) -> ``models`` (physics only) ->
``systems`` -> ``analysis`` -> ``plot`` -> ``cli``; experiments and benchmarks use the public
API only. ``robot`` and ``friction`` are public facades: an ``__init__`` that re-exports the
names of their models and analyses, imported by nothing in the library but the CLI. Debts,
if any come back, are listed in ``KNOWN`` below, each with its reason, so that no new one can
be added unseen.

Run as a script (``python tests/test_layering.py``) to print the import graph's cycles.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "rollax"

MODELS = (
    "rollax.models.rim",
    "rollax.models.slip",
    "rollax.models.impacts",
    "rollax.models._penny",
    "rollax.models.friction",
    "rollax.models.robot",
    "rollax.models.outcomes",
)
# rollax.analysis.penny: the penny's sequences, FTLEs and Fig. 5 through rollax.solve (its model is
# rollax.models._penny)
ANALYSES = (
    "rollax.analysis.basin",
    "rollax.analysis.steady",
    "rollax.analysis.floquet",
    "rollax.analysis.conserved",
    "rollax.analysis.identification",
    "rollax.analysis.penny",
    "rollax.analysis.friction",
    "rollax.analysis.slip",
    "rollax.analysis.friction_fit",
    "rollax.analysis.robot",
)


def _in(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module under src/rollax."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return name in modules and modules[name].name == "__init__.py"


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported rollax module, line, at module level) for every import in the file, including
    imports inside functions; ``from P import m`` counts as importing ``P.m`` when that is a
    module, else ``P``."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if _is_package(name, modules) else name.rpartition(".")[0]
    # module level: not inside a def or a class (top-level if/try blocks count)
    nested = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            nested.update(id(s) for s in ast.walk(node) if s is not node)
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                targets.append(sub if sub in modules else mod)
        else:
            continue
        for t in targets:
            # the longest prefix that is a module of the package
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t:
                found.append((t, node.lineno, id(node) not in nested))
    return found


def import_graph() -> dict[str, dict[str, list[tuple[int, bool]]]]:
    """module -> {imported module: [(line, module level)]}; a package importing its own
    submodules is left out."""
    modules = module_files()
    graph: dict[str, dict[str, list[tuple[int, bool]]]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for target, line, top in imports_of(name, path, modules):
            if target == name:
                continue
            if _is_package(name, modules) and target.startswith(name + "."):
                continue  # a package importing its own submodules
            edges.setdefault(target, []).append((line, top))
    return graph


def cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _describe(graph, comp) -> str:
    lines = [" <-> ".join(comp)]
    for a in comp:
        for b in comp:
            for line, top in graph[a].get(b, ()):
                lines.append(
                    f"    {a} imports {b} (line {line}, {'module level' if top else 'in a function'})"
                )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ tests
def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_describe(graph, c) for c in found)


def test_only_the_cli_imports_the_cli():
    bad = [
        f"{a} imports {b} (line {ln})"
        for a, edges in import_graph().items()
        if not _in(a, ("rollax.cli",))
        for b, uses in edges.items()
        if _in(b, ("rollax.cli",))
        for ln, _ in uses
    ]
    assert not bad, bad


def test_models_and_analyses_do_not_import_plotting_at_module_level():
    bad = [
        f"{a} imports {b} (line {ln})"
        for a, edges in import_graph().items()
        if _in(a, MODELS + ANALYSES)
        for b, uses in edges.items()
        if b == "rollax.plot"
        for ln, top in uses
        if top
    ]
    assert not bad, bad


def test_models_import_no_analysis_plotting_or_cli():
    bad = [
        f"{a} imports {b} (line {ln})"
        for a, edges in import_graph().items()
        if _in(a, MODELS)
        for b, uses in edges.items()
        if _in(b, ANALYSES + ("rollax.plot", "rollax.cli"))
        for ln, _ in uses
    ]
    assert not bad, bad


def test_plotting_imports_no_analysis_or_cli():
    edges = import_graph()["rollax.plot"]
    bad = [b for b in edges if _in(b, ANALYSES + ("rollax.cli",))]
    assert not bad, bad


def _script_violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    bad, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("rollax"):
                    aliases[a.asname or a.name.split(".")[0]] = a.name
                    mods = [a.name]
                else:
                    mods = []
                for m in mods:
                    if _in(m, ("rollax.cli",)) or any(p.startswith("_") for p in m.split(".")):
                        bad.append(f"line {node.lineno}: import {m}")
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("rollax")
            and not node.level
        ):
            m = node.module
            if _in(m, ("rollax.cli",)) or any(p.startswith("_") for p in m.split(".")):
                bad.append(f"line {node.lineno}: from {m} import ...")
            for a in node.names:
                if a.name.startswith("_") or (m == "rollax" and a.name == "cli"):
                    bad.append(f"line {node.lineno}: from {m} import {a.name}")
                else:
                    aliases[a.asname or a.name] = f"{m}.{a.name}"
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            if node.args and isinstance(node.args[0], ast.Constant):
                m = str(node.args[0].value)
                if _in(m, ("rollax.cli",)) or any(p.startswith("_") for p in m.split(".")):
                    bad.append(f"line {node.lineno}: __import__({m!r})")
    for node in ast.walk(tree):  # rollax.x._private or alias._private
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                bad.append(
                    f"line {node.lineno}: {base.id}...{node.attr} (private name of {aliases[base.id]})"
                )
    return bad


# benchmarks that time the integrator's own pieces (the DOPRI5 step, fastmath's sin/cos)
MEASURE_INTERNALS = {
    "benchmarks/bench_kernel.py",
    "benchmarks/bench_slip.py",
    "benchmarks/runs/stop40/split34.py",  # switches a kernel rule off, to split a cost
    # times the CLI's own refusal in this process, apart from a new process's imports
    "benchmarks/bench_robot_infeasible.py",
    # switches the tail's move off (queue._NARROW_MIN_PER_LANE) to time the code before it
    "benchmarks/bench_slip_tail.py",
    # switches the solve's pair test off (_solve.unresolved_in) to split the event route's cost
    "benchmarks/bench_event_cost.py",
    # replaces the fused kernel by a stand-in (--stub) to time the host path alone on a CPU
    "benchmarks/gpu/host_path.py",
}


def test_experiments_and_benchmarks_use_the_public_api():
    files = sorted((ROOT / "experiments").rglob("*.py")) + sorted(
        (ROOT / "benchmarks").rglob("*.py")
    )
    assert files
    bad = {
        str(f.relative_to(ROOT)): v
        for f in files
        if str(f.relative_to(ROOT)) not in MEASURE_INTERNALS and (v := _script_violations(f))
    }
    assert not bad, bad


# the layers, bottom up: a module may import its own layer and those below
LAYERS = (
    "rollax._core",
    "rollax._integrate",
    "rollax._drivers",
    "rollax.models",
    "rollax.systems",
    "rollax.analysis",
    "rollax.plot",
    "rollax.cli",
)
# what a layer may not import although it lies below: models only model (no solves), the
# systems are models with events (no solves either), drawing needs data only
FORBIDDEN = {
    "rollax.models": ("rollax._integrate", "rollax._drivers"),
    "rollax.systems": ("rollax._integrate", "rollax._drivers"),
    "rollax.plot": ("rollax._integrate", "rollax._drivers", "rollax.systems"),
}
# the debts left, (importer, imported) -> why; each to go with the rest of the layout issue
KNOWN: dict = {}
# public facades: re-exports of the names their users look for, from the layers that hold them
FACADES = ("rollax.robot", "rollax.friction")


def _layer(name: str):
    for i, p in enumerate(LAYERS):
        if _in(name, (p,)):
            return i
    return None


def test_layers_import_only_downwards():
    bad = []
    for a, edges in import_graph().items():
        la = _layer(a)
        if la is None:
            continue
        for b, uses in edges.items():
            lb = _layer(b)
            if b == "rollax" or (a, b) in KNOWN:
                continue
            if lb is not None and lb > la:
                # an analysis's write() draws its figure beside its data: plot imported inside
                # that function, so that the analysis loads without matplotlib
                up = [
                    ln
                    for ln, top in uses
                    if top or not (LAYERS[la] == "rollax.analysis" and b == "rollax.plot")
                ]
                bad += [f"{a} imports {b} (line {ln}): a layer above it" for ln in up]
            elif _in(b, FORBIDDEN.get(LAYERS[la], ())):
                bad += [f"{a} imports {b} (line {ln}): forbidden in {LAYERS[la]}" for ln, _ in uses]
            elif _in(b, FACADES) and LAYERS[la] != "rollax.cli":
                bad += [f"{a} imports the facade {b} (line {ln})" for ln, _ in uses]
    assert not bad, "\n".join(bad)


def test_facades_only_re_export():
    for pkg in FACADES:
        folder = PKG / pkg.split(".")[1]
        files = sorted(p.name for p in folder.glob("*.py"))
        assert files == ["__init__.py"], (pkg, files)
        tree = ast.parse((folder / "__init__.py").read_text())
        for node in tree.body:
            ok = isinstance(node, (ast.ImportFrom, ast.Expr)) or (
                isinstance(node, ast.Assign) and node.targets[0].id == "__all__"  # type: ignore[attr-defined]
            )
            assert ok, f"{pkg}: line {node.lineno} is not a re-export"
        names = {
            a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names
        }
        all_ = next(n for n in tree.body if isinstance(n, ast.Assign)).value
        assert names == {e.value for e in all_.elts}, pkg  # type: ignore[attr-defined]


def test_the_top_level_holds_only_the_public_init_and_packages():
    modules = sorted(p.name for p in PKG.glob("*.py"))
    assert modules == ["__init__.py"], modules


def _imports_of_package(pkg: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for path in sorted(PKG.rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(m == pkg or m.startswith(pkg + ".") for m in mods):
                out.setdefault(name, []).append(node.lineno)
    return out


# drawing: plot and the CLI
MATPLOTLIB_OK = ("rollax.plot", "rollax.cli")
# diffrax: the integrators and drivers (the CLI names its version); every other solve goes
# through rollax.solve or solve_ensemble
DIFFRAX_OK = (
    "rollax._integrate",
    "rollax._drivers",
    "rollax.cli",
)


def test_matplotlib_only_where_drawing_is_done():
    bad = {
        m: ln for m, ln in _imports_of_package("matplotlib").items() if not _in(m, MATPLOTLIB_OK)
    }
    assert not bad, bad


def test_diffrax_only_in_the_integrators_and_drivers_and_the_listed_debts():
    bad = {m: ln for m, ln in _imports_of_package("diffrax").items() if not _in(m, DIFFRAX_OK)}
    assert not bad, bad


if __name__ == "__main__":
    g = import_graph()
    n_edges = sum(len(e) for e in g.values())
    found = cycles(g)
    print(f"{len(g)} modules, {n_edges} import edges (module-level and in functions)")
    if not found:
        print("no import cycles")
    for c in found:
        print("cycle: " + _describe(g, c))
    files = sorted((ROOT / "experiments").rglob("*.py")) + sorted(
        (ROOT / "benchmarks").rglob("*.py")
    )
    for f in files:
        for v in _script_violations(f):
            print(f"{f.relative_to(ROOT)}: {v}")
    sys.exit(1 if found else 0)
