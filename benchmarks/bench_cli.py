"""Benchmark: the CPU time of ``rollax --help`` and ``rollax --version`` against
``python -c pass``, alternating in the same run (issue 35's target: --help under 1 s of CPU).

    python benchmarks/bench_cli.py [--repeat 5]

``--smoke``: one round (tests/test_scripts_smoke.py); ``--out DIR`` is accepted and unused (the
results are printed only).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys


def cpu_seconds(argv: list[str]) -> float:
    """User + system CPU seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        env={**os.environ, "ROLLAX_CACHE_DIR": "off"},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None, help="unused: the results are printed only")
    ap.add_argument("--smoke", action="store_true", help="one round (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.repeat = 1
    cmds = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "rollax --help": [sys.executable, "-m", "rollax.cli", "--help"],
        "rollax basin --help": [sys.executable, "-m", "rollax.cli", "basin", "--help"],
        "rollax --version": [sys.executable, "-m", "rollax.cli", "--version"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(args.repeat):
        for k, argv in cmds.items():
            times[k].append(cpu_seconds(argv))
    base = min(times["python -c pass"])
    for k, ts in times.items():
        print(
            f"{k:22s} best {min(ts):.3f} s CPU, median {sorted(ts)[len(ts) // 2]:.3f} s "
            f"({min(ts) - base:+.3f} s over python -c pass)"
        )


if __name__ == "__main__":
    main()
