"""How the fused kernel's compile time grows with its size: each conformance system's kernel
lowered (its Triton IR size) and compiled for this machine's GPU, one at a time, each under its
own time limit (a kernel that does not compile in time is reported, and the next one runs).

    python benchmarks/gpu/compile_fused.py [--limit 120] [--cases oscillator,rim_rolling,...]

Prints one line per system: lowered IR bytes, lowering seconds, compile seconds (or 'over the
limit'). Run on a GPU; on a CPU only the lowering columns are measured (--lower-only).
``--phases``: each of the four kernels of each system compiled alone, in parallel processes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


PHASES = ("setup", "run", "serve", "finish")  # rollax.fused_program's phases


def _one(name: str, lower_only: bool, q, phase: str | None = None) -> None:
    # the whole program, or one phase's kernel alone (which of the four takes the time)
    import rollax
    import test_conformance as tc

    system, y0s, t1, opts = tc.CASES[name](4)
    row = dict(case=name) if phase is None else dict(case=name, phase=phase)
    tic = time.perf_counter()
    try:
        lowered = rollax.fused_program(
            system,
            y0s,
            0.0,
            t1,
            phase=phase,
            platform="cuda" if lower_only else None,
            **{**tc.TOL, **opts},
        )
    except ValueError as e:  # no such kernel (serve without a reset map)
        q.put({**row, "compile_s": str(e)[:80]})
        return
    row.update(ir_bytes=len(lowered.as_text()), lower_s=round(time.perf_counter() - tic, 1))
    q.put(row)
    if lower_only:
        return
    tic = time.perf_counter()
    lowered.compile()
    q.put({**row, "compile_s": round(time.perf_counter() - tic, 1)})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=float, default=120.0)
    ap.add_argument(
        "--cases", default="oscillator,bouncing_ball,rim_rolling,sliding,rim_slipping,penny,robot"
    )
    ap.add_argument("--lower-only", action="store_true")
    ap.add_argument(
        "--phases",
        action="store_true",
        help="each phase's kernel compiled alone, all at once (one process each)",
    )
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    if args.phases:
        jobs = []
        for name in args.cases.split(","):
            for ph in PHASES:
                q = ctx.Queue()
                p = ctx.Process(target=_one, args=(name, args.lower_only, q, ph))
                p.start()
                jobs.append((name, ph, p, q))
        t_end = time.monotonic() + args.limit
        for name, ph, p, q in jobs:
            p.join(max(0.0, t_end - time.monotonic()))
            rows = []
            while not q.empty():
                rows.append(q.get())
            row = rows[-1] if rows else dict(case=name, phase=ph)
            if p.is_alive():
                p.kill()
                row["compile_s"] = f"over the {args.limit:g} s limit"
            elif not rows:
                row["error"] = f"exit {p.exitcode}"
            print(json.dumps(row), flush=True)
        return 0
    for name in args.cases.split(","):
        q = ctx.Queue()
        p = ctx.Process(target=_one, args=(name, args.lower_only, q))
        p.start()
        p.join(args.limit)
        rows = []
        while not q.empty():
            rows.append(q.get())
        if p.is_alive():
            p.kill()
            row = rows[-1] if rows else dict(case=name)
            row["compile_s"] = f"over the {args.limit:g} s limit"
        else:
            row = rows[-1] if rows else dict(case=name, error=f"exit {p.exitcode}")
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
