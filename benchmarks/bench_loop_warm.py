"""Benchmark: warm cost of the one step loop against the segment loop and plain diffrax
(issue 57), single runs.

The cases ``ball`` and ``pendulum`` of ``bench_gradients.py`` (the same systems, the same
plain-diffrax segments), ``--impacts`` impacts: the forward solve and the reverse gradient of
each of the three, all six programs compiled in this one process (``ROLLAX_LOOP`` is read when
``rollax.solve`` is called) and then called in turn ``--repeat`` times; the best time of each.
CPU figures are ratios (same process, interleaved); absolute times count only on a GPU.

    python benchmarks/bench_loop_warm.py [--case ball pendulum] [--impacts 4 40] [--repeat 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gradients as bg  # noqa: E402


def measure(case: str, impacts: int, repeat: int) -> dict:
    p0, _, ours, theirs = bg.build(case, False, impacts)
    programs = {}
    for name, fn in (("loop", ours), ("segments", ours), ("diffrax", theirs)):
        os.environ["ROLLAX_LOOP"] = "segments" if name == "segments" else ""
        f = jax.jit(lambda q, fn=fn: fn(q, None)[0]).lower(p0).compile()
        g = jax.jit(jax.grad(lambda q, fn=fn: fn(q, None)[0])).lower(p0).compile()
        programs[name] = (f, g)
    os.environ.pop("ROLLAX_LOOP")
    best = {k: [float("inf")] * 2 for k in programs}
    for _ in range(repeat):
        for k, fg in programs.items():
            for i, fn in enumerate(fg):
                t = time.perf_counter()
                jax.block_until_ready(fn(p0))
                best[k][i] = min(best[k][i], time.perf_counter() - t)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", nargs="+", choices=("ball", "pendulum"), default=["ball", "pendulum"])
    p.add_argument("--impacts", nargs="+", type=int, default=[4, 40])
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--smoke", action="store_true", help="the ball, 4 impacts, 2 repeats")
    p.add_argument("--out", type=Path, help="accepted and unused (the results are printed)")
    a = p.parse_args()
    cases, impacts, repeat = (["ball"], [4], 2) if a.smoke else (a.case, a.impacts, a.repeat)
    print(f"# jax {jax.__version__}, {jax.devices()[0].platform}; best of {repeat}, in ms")
    print(
        "| case | impacts | forward loop : segments : diffrax | gradient loop : segments : "
        "diffrax | gradient loop / segments | gradient loop / diffrax |"
    )
    print("| --- | ---: | --- | --- | ---: | ---: |")
    for case in cases:
        for n in impacts:
            b = measure(case, n, repeat)
            fw = " : ".join(f"{1e3 * b[k][0]:.2f}" for k in ("loop", "segments", "diffrax"))
            gr = " : ".join(f"{1e3 * b[k][1]:.2f}" for k in ("loop", "segments", "diffrax"))
            print(
                f"| {case} | {n} | {fw} | {gr} | {b['loop'][1] / b['segments'][1]:.2f} | "
                f"{b['loop'][1] / b['diffrax'][1]:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
