"""Benchmark: the compile cost of ``rollax.solve`` before and after a change, and of plain diffrax.

Each measurement is a fresh process with the compile cache off that traces, lowers and compiles
one program of ``bench_gradients.py``'s cases (the forward solve, or its reverse gradient alone)
and reports the process's CPU seconds for each phase (a shared machine's load disturbs CPU time
less than wall time), and the program's value. The processes alternate: ``after`` (this tree),
``before`` (the ``src`` folder given by ``--before``, e.g. a ``git worktree`` of the commit
before the change) and ``diffrax``, round after round, so that the ratios compare like with like.

    git worktree add /tmp/before HEAD~1
    python benchmarks/bench_compile_ab.py --before /tmp/before/src --case oscillator rim \
        --what fwd --rounds 3 --out benchmarks/runs/stopNN/compile_ab
    python benchmarks/bench_compile_ab.py --child oscillator rollax fwd   # one process

Writes ``compile_ab.json`` (every process) and ``compile_ab.md`` (means per case, program and
tree, and the ratios to diffrax). ``--smoke``: one case, the forward program, one round.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = ("oscillator", "rim", "ball", "pendulum")


def child(case: str, impl: str, what: str) -> dict:
    os.environ["ROLLAX_CACHE_DIR"] = "off"
    os.environ.setdefault("ROLLAX_ANNOUNCE", "off")
    sys.path.insert(0, str(HERE))
    import bench_gradients as bg
    import jax
    import numpy as np

    p0, _dp, ours, theirs = bg.build(case, False)
    fn = ours if impl == "rollax" else theirs
    f = (lambda p: fn(p, None)[0]) if what == "fwd" else jax.grad(lambda p: fn(p, None)[0])

    clock = bg.Clock()  # (wall, CPU) seconds since its last call
    traced = jax.jit(f).trace(p0)
    trace = clock()[1]
    lowered = traced.lower()
    lower = clock()[1]
    compiled = lowered.compile()
    xla = clock()[1]
    value = float(np.sum(np.asarray(compiled(p0))))  # (a gradient: its sum)
    return dict(trace=trace, lower=lower, xla=xla, total=trace + lower + xla, value=value)


def run_child(case, what, tree, src, timeout) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if src:
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    impl_ = "diffrax" if tree == "diffrax" else "rollax"
    r = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", case, impl_, what],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if r.returncode != 0:
        raise SystemExit(f"{case} {tree} {what} failed:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return dict(case=case, tree=tree, what=what, load=os.getloadavg()[0], **out)


def table(rows) -> str:
    import numpy as np

    lines = [
        "| case | program | tree | CPU s (mean) | trace | XLA | / diffrax | value |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    keys = sorted({(r["case"], r["what"]) for r in rows}, key=lambda k: (CASES.index(k[0]), k[1]))
    for case, what in keys:
        mine = [r for r in rows if r["case"] == case and r["what"] == what]
        ref = np.mean([r["total"] for r in mine if r["tree"] == "diffrax"] or [np.nan])
        for tree in ("before", "after", "diffrax"):
            rs = [r for r in mine if r["tree"] == tree]
            if not rs:
                continue
            m = {k: float(np.mean([r[k] for r in rs])) for k in ("total", "trace", "xla")}
            lines.append(
                f"| {case} | {what} | {tree} | {m['total']:.2f} | {m['trace']:.2f} | "
                f"{m['xla']:.2f} | {m['total'] / ref:.2f} | {rs[0]['value']:.12g} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--what", nargs="+", choices=("fwd", "grad"), default=["fwd", "grad"])
    ap.add_argument("--before", type=Path, help="the src folder of the tree before the change")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    ap.add_argument("--out", type=Path, default=HERE / "runs" / "compile_ab")
    ap.add_argument("--smoke", action="store_true", help="one case, the forward, one round")
    ap.add_argument("--child", nargs=3, metavar=("CASE", "IMPL", "WHAT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    if args.before is not None and not (args.before / "rollax" / "__init__.py").is_file():
        ap.error(f"--before {args.before}: not a src folder holding rollax/__init__.py")
    if args.smoke:
        args.case, args.what, args.rounds = ["oscillator"], ["fwd"], 1
    trees = [("after", ROOT / "src"), ("diffrax", ROOT / "src")]
    if args.before is not None:
        trees.insert(0, ("before", args.before))
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    for case in args.case:
        for what in args.what:
            for k in range(args.rounds):
                for tree, src in trees:
                    r = run_child(case, what, tree, src, args.timeout)
                    rows.append(r)
                    (args.out / "compile_ab.json").write_text(json.dumps({"rows": rows}, indent=1))
                    print(
                        f"[{time.time() - t0:5.0f} s] {case} {what} {tree} round {k + 1}: "
                        f"{r['total']:.2f} CPU s (trace {r['trace']:.2f}, XLA {r['xla']:.2f})",
                        flush=True,
                    )
    md = table(rows)
    (args.out / "compile_ab.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
