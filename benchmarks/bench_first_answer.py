"""Benchmark: time to the first answer, as a new user meets it (issue 56).

The 4-impact bouncing ball and the pendulum with a wall (the cases ``ball`` and ``pendulum`` of
``bench_gradients.py``: the same systems, the same plain-diffrax segments). Each measurement is
a fresh Python process that imports, calls the forward solve once (``f(p)``: the first solve)
and then ``jax.grad(f)(p)`` once (the first gradient), exactly as a script would, and reports
the seconds of each from process start, and the persistent cache's hits and misses (JAX's
monitoring events). Then both again, warm, for reference.

Implementations (``--impl``), each run twice in a row with one fresh cache directory, so the
first process is cold and the second finds the first one's cache filled:

* ``rollax``: this tree (the compile cache on since ``import rollax``);
* ``before``: the code before issue 56 (``--before REV``, default ``b2ef5aa``, put in a
  temporary ``git worktree``) as shipped: no cache unless the script calls
  ``rollax.configure()``, which the guides did not;
* ``before+configure``: the same code with ``rollax.configure()`` called first;
* ``diffrax``: plain diffrax, with JAX's persistent cache pointed at the fresh directory, its
  segments a ``lax.scan`` (one segment traced once: the stricter baseline);
* ``diffrax-written``: the same with the segments written out (a Python loop of ``diffeqsolve``
  calls, as issue 57 states its baseline: "plain diffrax with the segments written out").

``--impacts N`` (default 4) ends both systems at impact N (``bench_gradients.build``: beyond 4, a
restitution of 0.99 and t1 = 1000); issue 57 asks for 4 and 40, where an unrolled program
grows and rollax's must not.

The processes alternate (rollax, before, ..., rollax, before, ...) over ``--rounds`` rounds, so
that the shared machine's load falls on all alike. The target (issue 56): with the cache filled,
at most half the cold figure.

    python benchmarks/bench_first_answer.py [--case ball pendulum] [--rounds 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = ("ball", "pendulum")
IMPLS = ("rollax", "before", "before+configure", "diffrax", "diffrax-written")


def child(case: str, impl: str, t_start: float, impacts: int = 4) -> dict:
    """One fresh process: the first solve and the first gradient, then warm ones."""
    import jax  # (rollax's import, below or in build, sets the cache for rollax)

    counts = {"hits": 0, "misses": 0}

    def listen(event, **kw):
        if event == "/jax/compilation_cache/cache_hits":
            counts["hits"] += 1
        elif event == "/jax/compilation_cache/cache_misses":
            counts["misses"] += 1

    jax.monitoring.register_event_listener(listen)
    sys.path.insert(0, str(HERE))
    import rollax
    from bench_gradients import build

    if impl == "before+configure":
        rollax.configure()
    plain = impl.startswith("diffrax")
    if plain:
        jax.config.update("jax_compilation_cache_dir", os.environ["BENCH_CACHE"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    t_import = time.time() - t_start
    p0, _dp, ours, theirs = build(case, False, impacts, written=impl == "diffrax-written")
    fn = theirs if plain else ours

    def f(p):
        return fn(p, None)[0]

    value = float(jax.block_until_ready(f(p0)))
    t_solve = time.time() - t_start
    grad = float(jax.block_until_ready(jax.grad(f)(p0)))
    t_grad = time.time() - t_start
    t = time.perf_counter()
    jax.block_until_ready(f(p0))
    warm_solve = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready(jax.grad(f)(p0))
    warm_grad = time.perf_counter() - t
    return {
        "case": case,
        "impl": impl,
        "impacts": impacts,
        "import_s": t_import,
        "first_solve_s": t_solve,
        "first_grad_s": t_grad,
        "grad_only_s": t_grad - t_solve,
        "warm_solve_s": warm_solve,
        "warm_grad_s": warm_grad,
        "value": value,
        "grad": grad,
        "cache_hits": counts["hits"],
        "cache_misses": counts["misses"],
        "cache_dir": jax.config.jax_compilation_cache_dir
        if jax.config.jax_enable_compilation_cache
        else None,
        "load": os.getloadavg()[0],
    }


def run_child(
    case, impl, cache: Path, before_src: Path | None, timeout: float, impacts: int = 4
) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "ROLLAX_"))}
    env["JAX_PLATFORMS"] = "cpu"
    env["ROLLAX_CACHE_DIR"] = str(cache)
    env["BENCH_CACHE"] = str(cache)
    src = before_src if impl.startswith("before") else ROOT / "src"
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    if impl.startswith("diffrax"):
        env["ROLLAX_CACHE_DIR"] = "off"  # rollax's import must not set the cache: JAX's own
    code = (
        "import time; t0 = time.time(); import sys, json; "
        f"sys.path.insert(0, {str(HERE)!r}); from bench_first_answer import child; "
        f"print(json.dumps(child({case!r}, {impl!r}, t0, {impacts})))"
    )
    t = time.perf_counter()
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"case": case, "impl": impl, "error": f"timed out after {timeout} s"}
    lines = [s for s in r.stdout.splitlines() if s.startswith("{")]
    if r.returncode or not lines:
        tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
        return {"case": case, "impl": impl, "error": " | ".join(tail)}
    res = json.loads(lines[-1])
    res["process_s"] = time.perf_counter() - t
    res["announced"] = [s for s in r.stderr.splitlines() if s.startswith("rollax: compil")]
    return res


def before_tree(rev: str, where: Path) -> Path | None:
    """``src`` of ``rev`` checked out beside (a detached worktree), or None if git cannot."""
    try:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), rev],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as err:
        print(f"no 'before' tree ({rev}): {err}", file=sys.stderr)
        return None
    return where / "src"


def figure(rows: list[dict], path: Path, meta: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cases = sorted({r["case"] for r in rows})
    impls = [i for i in IMPLS if any(r["impl"] == i for r in rows)]
    fig, axes = plt.subplots(1, len(cases), figsize=(5.5 * len(cases), 4.2), squeeze=False)
    for ax, case in zip(axes[0], cases):
        x = np.arange(len(impls))
        for k, (which, shade) in enumerate((("cold", 0.9), ("filled", 0.5))):
            med = []
            for impl in impls:
                v = [
                    r["first_grad_s"]
                    for r in rows
                    if r["case"] == case and r["impl"] == impl and r["cache"] == which
                ]
                med.append(float(np.median(v)) if v else np.nan)
            ax.bar(x + (k - 0.5) * 0.38, med, 0.38, color=str(shade * 0.8), label=f"cache {which}")
        ax.set_xticks(x, impls, rotation=15)
        ax.set_ylabel("process start to first gradient [s]")
        ax.set_title(f"{case}: first solve + first jax.grad, fresh process")
        ax.legend()
    fig.suptitle(
        f"rollax first answer (CPU, {meta['cpus']} cores, load {meta['load']:.1f}; "
        f"rtol = atol = 1e-10, {meta.get('impacts', 4)} impacts)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", nargs="+", choices=CASES, default=list(CASES))
    p.add_argument("--impl", nargs="+", choices=IMPLS, default=list(IMPLS))
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    p.add_argument("--before", default="b2ef5aa", help="the revision before issue 56")
    p.add_argument("--smoke", action="store_true", help="the ball, rollax only, one round")
    p.add_argument("--out", type=Path, help="folder for first_answer.json and .png")
    p.add_argument("--timeout", type=float, default=900, help="seconds per process")
    p.add_argument("--impacts", type=int, default=4, help="the impact that ends the run")
    a = p.parse_args()
    if a.smoke:
        a.case, a.impl, a.rounds = ["ball"], ["rollax"], 1
    tmp = Path(tempfile.mkdtemp(prefix="rollax-first-"))
    before_src = None
    if any(i.startswith("before") for i in a.impl):
        before_src = before_tree(a.before, tmp / "before")
        if before_src is None:
            a.impl = [i for i in a.impl if not i.startswith("before")]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs; load {os.getloadavg()}",
        flush=True,
    )
    rows = []
    try:
        for rnd in range(a.rounds):
            for case in a.case:
                for impl in a.impl:
                    cache = tmp / f"cache-{rnd}-{case}-{impl.replace('+', '-')}"
                    for which in ("cold", "filled"):
                        r = run_child(case, impl, cache, before_src, a.timeout, a.impacts)
                        r.update(cache=which, round=rnd)
                        rows.append(r)
                        msg = r.get("error") or (
                            f"solve {r['first_solve_s']:6.2f} s, grad {r['first_grad_s']:6.2f} s "
                            f"from start (warm {1e3 * r['warm_solve_s']:.2f}/"
                            f"{1e3 * r['warm_grad_s']:.2f} ms), hits {r['cache_hits']}, "
                            f"misses {r['cache_misses']}, announced {len(r['announced'])}, "
                            f"load {r['load']:.2f}"
                        )
                        print(f"{case:9s} {impl:17s} {which:6s} {msg}", flush=True)
    finally:
        if before_src is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "before")],
                capture_output=True,
            )
        shutil.rmtree(tmp, ignore_errors=True)
    ok = [r for r in rows if "error" not in r]
    print("\ncase      impl              first grad cold -> filled [s]  (filled / cold)")
    for case in a.case:
        for impl in a.impl:
            for rnd in range(a.rounds):
                pair = {
                    r["cache"]: r
                    for r in ok
                    if r["case"] == case and r["impl"] == impl and r["round"] == rnd
                }
                if len(pair) == 2:
                    c, f = pair["cold"]["first_grad_s"], pair["filled"]["first_grad_s"]
                    print(f"{case:9s} {impl:17s} {c:7.2f} -> {f:7.2f}   ({f / c:.2f})")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        meta = {
            "cpus": os.cpu_count(),
            "load": os.getloadavg()[0],
            "smoke": a.smoke,
            "impacts": a.impacts,
        }
        (a.out / "first_answer.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        if ok:
            figure(ok, a.out / "first_answer.png", meta)
        print(f"wrote {a.out / 'first_answer.json'}")


if __name__ == "__main__":
    main()
