"""Benchmark: what the compile cache cannot hold, per entry point (issue 56).

Each entry point is one documented call (the README's and the guides' examples, on smaller
grids where the example's own size is minutes of work, not of waiting). Each runs in two fresh
Python processes, one after the other, on one fresh cache directory: the first is cold, the
second finds the first one's programs in the cache. Each process reports, for its one call:

* ``call_s``: wall seconds of the call (after ``import rollax``, timed separately as
  ``import_s``);
* from JAX's monitoring events: ``trace_s`` (tracing Python into jaxprs), ``lower_s``
  (jaxpr to MLIR), ``compile_s`` (XLA's backend compile; 0 for a program read from the cache),
  ``cache_read_s`` (reading programs from the cache), and the cache's ``hits`` and ``misses``;
* ``rest_s`` = ``call_s`` less those four: JAX's differentiation (linearising and
  transposing a gradient's program, or exporting it), the computation itself, and rollax's Python-side
  set-up (building the system, checking input, the driver's bookkeeping).

With the cache filled, ``trace_s + lower_s + rest_s`` is what the cache cannot hold. Tracing
inside rollax's own jitted functions is rollax's own work: the solve route's tracing is the
issue "One step loop" (57); a gradient's reverse pass is kept by ``_traced.py``.

    python benchmarks/bench_entry_points.py [--entry solve grad ...] [--out DIR] [--smoke]

Writes ``entry_points.json`` and ``entry_points.png`` into ``--out`` (the rows of entries not
run this time are kept from the file already there).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The calls, as a user writes them (``import rollax`` and ``jnp``/``jax`` are done first).
ENTRIES = {
    "solve": """
from rollax.models.rim import Rim
from rollax.systems import RimRolling
y0 = jnp.array([1.1, 1.0, 35.0, 10.0])
sol = rollax.solve(RimRolling(Rim(k_d=0.02), w1_target=0), y0, 0.0, 60.0, rtol=1e-10, atol=1e-10)
result = float(sol.t)
""",
    "grad": """
from rollax.models.rim import Rim
from rollax.systems import RimRolling
y0 = jnp.array([1.1, 1.0, 35.0, 10.0])
result = float(jax.grad(lambda k: rollax.solve(RimRolling(Rim(k_d=k), w1_target=0), y0, 0.0,
                        60.0, rtol=1e-10, atol=1e-10).t)(0.02))
""",
    "solve_ensemble": """
import numpy as np
from rollax.models.rim import Rim
from rollax.systems import RimRolling
b, w = np.meshgrid(np.linspace(0.8, 1.8, 100), np.linspace(-20, 20, 100))
y0s = np.stack([b.ravel(), w.ravel(), np.full(b.size, 35.0), np.full(b.size, 10.0)], 1)
sol = rollax.solve_ensemble(RimRolling(Rim()), y0s, 0.0, 60.0, progress=False)
result = float(np.mean(sol.t))
""",
    "basin_map": """
from rollax.analysis.basin import basin_map, Axis
from rollax.models.rim import Rim
bmap = basin_map(Rim(), x=Axis("beta", 0.8, 1.8, 90), y=Axis("omega1", -20, 20, 60),
                 fixed={"omega2": 35.0, "omega3": 10.0}, progress=False)
result = bmap.counts()["periodic"]
""",
    "shot_map": """
from rollax.analysis.shot import shot_map
from rollax import Axis
res = shot_map(speed=Axis("speed", 7.0, 8.0, 24), angle=Axis("angle", 44.0, 62.0, 18),
               progress=False)
result = res.counts()["made"]
""",
    "fit_rim": f"""
from rollax.analysis.identification import read_rim_csv, rim_observations, fit_rim
t, d, z, alpha = read_rim_csv({str(ROOT / "experiments/identify/rim_obs.csv")!r})
fit = fit_rim(rim_observations(t, d, z, alpha, sigma=(1e-3, 1e-3, 2e-3)), fit=("k_d", "k_r"),
              progress=False)
result = fit["k_d"]
""",
    "robot_optimize": """
import math
from rollax.robot import disk_manoeuvre, optimize
opt = optimize(disk_manoeuvre(phi_T=-math.pi, T=8.0, mu=0.2, n_min=0.5), knots=8, starts=1,
               progress=False)
result = float(opt.cost)
""",
}
#: A CLI command: the process itself is the measurement (its wall time; no events).
CLI = {"cli_basin": ["basin", "--grid", "90", "60"]}


def child(entry: str, t_start: float) -> dict:
    import jax

    durations = {"trace": 0.0, "lower": 0.0, "compile": 0.0, "cache_read": 0.0}
    counts = {"hits": 0, "misses": 0}
    names = {
        "/jax/core/compile/jaxpr_trace_duration": "trace",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
        "/jax/core/compile/backend_compile_duration": "compile",
        "/jax/compilation_cache/cache_retrieval_time_sec": "cache_read",
    }

    def on_duration(event, secs, **kw):
        if event in names:
            durations[names[event]] += secs

    def on_event(event, **kw):
        if event == "/jax/compilation_cache/cache_hits":
            counts["hits"] += 1
        elif event == "/jax/compilation_cache/cache_misses":
            counts["misses"] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    import jax.numpy as jnp

    import rollax

    t_import = time.time() - t_start
    # (a backend compile read from the cache is not timed as one; its retrieval is)
    scope = {"jax": jax, "jnp": jnp, "rollax": rollax}
    t = time.perf_counter()
    exec(ENTRIES[entry], scope)
    call = time.perf_counter() - t
    known = sum(durations.values())
    return {
        "entry": entry,
        "import_s": t_import,
        "call_s": call,
        **{f"{k}_s": v for k, v in durations.items()},
        "rest_s": max(0.0, call - known),
        "hits": counts["hits"],
        "misses": counts["misses"],
        "result": repr(scope.get("result")),
        "load": os.getloadavg()[0],
    }


def run_one(entry: str, cache: Path, out: Path, timeout: float) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "ROLLAX_"))}
    env.update(JAX_PLATFORMS="cpu", ROLLAX_CACHE_DIR=str(cache), ROLLAX_ANNOUNCE="on")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    if entry in CLI:
        cmd = [sys.executable, "-m", "rollax.cli", *CLI[entry], "--out", str(out / entry)]
    else:
        code = (
            "import time; t0 = time.time(); import sys, json; "
            f"sys.path.insert(0, {str(HERE)!r}); from bench_entry_points import child; "
            f"print(json.dumps(child({entry!r}, t0)))"
        )
        cmd = [sys.executable, "-c", code]
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"entry": entry, "error": f"timed out after {timeout} s"}
    wall = time.perf_counter() - t
    if r.returncode:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return {"entry": entry, "error": f"exit {r.returncode}: " + " | ".join(tail)}
    if entry in CLI:
        res = {"entry": entry, "call_s": wall, "load": os.getloadavg()[0]}
    else:
        res = json.loads([s for s in r.stdout.splitlines() if s.startswith("{")][-1])
    res["process_s"] = wall
    res["announced"] = [s for s in r.stderr.splitlines() if s.startswith("rollax: compil")]
    return res


def figure(rows: list[dict], path: Path, meta: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    entries = list(dict.fromkeys(r["entry"] for r in rows if "error" not in r))
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    parts = ("trace_s", "lower_s", "compile_s", "cache_read_s", "rest_s")
    colours = ("#4c72b0", "#8172b2", "#c44e52", "#55a868", "#999999")
    x = np.arange(len(entries))
    for j, state in enumerate(("cold", "filled")):
        bottom = np.zeros(len(entries))
        for part, col in zip(parts, colours):
            v = np.array(
                [
                    next(
                        (r.get(part, r["call_s"] if part == "rest_s" else 0.0) for r in rows
                         if r.get("entry") == e and r.get("state") == state and "error" not in r),
                        0.0,
                    )
                    for e in entries
                ]
            )  # fmt: skip
            ax.bar(x + (j - 0.5) * 0.38, v, 0.36, bottom=bottom, color=col,
                   alpha=1.0 if state == "filled" else 0.55,
                   label=f"{part[:-2]}" if j == 1 else None)  # fmt: skip
            bottom += v
    ax.set_xticks(x, entries, rotation=20)
    ax.set_ylabel("seconds of the first call (left bar: cold, right: cache filled)")
    ax.set_title(
        f"First call per entry point, cold and with the cache filled ({meta['date']}, "
        f"load {meta['load']:.1f}, {meta['cpus']} CPUs)",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = list(ENTRIES) + list(CLI)
    p.add_argument("--entry", nargs="+", choices=every, default=every)
    p.add_argument("--smoke", action="store_true", help="the solve only")
    p.add_argument("--out", type=Path, default=HERE / "runs" / "entry_points")
    p.add_argument("--timeout", type=float, default=900, help="seconds per process")
    a = p.parse_args()
    entries = ["solve"] if a.smoke else a.entry
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for entry in entries:
            cache = Path(tmp) / f"cache-{entry}"
            for state in ("cold", "filled"):
                r = run_one(entry, cache, Path(tmp), a.timeout)
                r["state"] = state
                rows.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "announced"}), flush=True)
    old = a.out / "entry_points.json"
    if old.exists() and not a.smoke:  # the other entries' rows of an earlier run are kept
        kept = [r for r in json.loads(old.read_text())["rows"] if r.get("entry") not in entries]
        rows = kept + rows
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    (a.out / "entry_points.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    figure(rows, a.out / "entry_points.png", meta)
    print(f"wrote {a.out / 'entry_points.json'} and .png")


if __name__ == "__main__":
    main()
