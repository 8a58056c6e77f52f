"""Benchmark: experiment design on the rim (issue 60).

In one process, the Table 1 ball filmed for 3 s at 60 frames/s (181 frames, 3 observables),
``k_d`` and ``k_r`` and the five initial-state components fitted (7 columns of the Jacobian):

* **candidates per second**: :func:`rollax.design` on ``--n`` throws in batches of each width
  in ``--widths`` (warm: the batch's compile is run first), against one throw at a time
  (width 1) in the same process: the ratio is the batching's gain;
* **gradient against sampling**: the best of 1,000 sampled throws (``rim_starts``) against
  :func:`rollax.refine_design` started from the best of the first ``--from`` of them (the
  exact gradient over beta, omega1, omega2, omega3 in a box around the start), both D-optimal
  losses (log det of the covariance of (k_d, k_r)), with their times.

CPU figures count as ratios (this machine is shared).

    python benchmarks/bench_design.py [--n 256] [--widths 1 8 32 128] [--sample 1000]
    [--from 20] [--out DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import time


import rollax
from rollax.analysis.design import CAMERA_SIGMA, rim_starts, rim_times
from rollax.models.rim import Rim
from rollax.systems.rim import RimTracked

PARAMS = ("k_d", "k_r")


def _design(system, C, t, chunk):
    return rollax.design(system, PARAMS, C, t, observe="camera", sigma=CAMERA_SIGMA,
                         chunk=chunk, progress=False)  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--widths", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--from", dest="start_from", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.widths, args.sample, args.start_from = 16, [1, 8], 40, 8
    system = RimTracked(Rim(k_d=0.02, k_r=0.02))
    t = rim_times(3.0, 60.0)
    C = rim_starts(args.n, seed=0)
    rates = {}
    for w in args.widths:
        t0 = time.perf_counter()
        _design(system, C[:w], t, w)  # the compile
        compile_s = time.perf_counter() - t0
        m = args.n if w > 1 else min(args.n, 32)  # (one at a time: fewer, it is slow)
        t0 = time.perf_counter()
        d = _design(system, C[:m], t, w)
        el = time.perf_counter() - t0
        rates[w] = {"candidates_per_s": m / el, "first_call_s": compile_s, "n": m}
        print(f"width {w:4d}: {m / el:8.1f} candidates/s (first call {compile_s:.1f} s)",
              flush=True)  # fmt: skip
    base = rates[min(rates)]["candidates_per_s"]
    for w in rates:
        rates[w]["gain_over_one_at_a_time"] = rates[w]["candidates_per_s"] / base

    # gradient against sampling
    S = rim_starts(args.sample, seed=1)
    t0 = time.perf_counter()
    d = _design(system, S, t, 32)
    t_sample = time.perf_counter() - t0
    best_sampled = float(d.loss[d.best])
    sub = rollax.design(system, PARAMS, S[: args.start_from], t, observe="camera",
                        sigma=CAMERA_SIGMA, chunk=32, progress=False)  # fmt: skip
    y0 = S[sub.best]
    box = {"beta": (y0[0] - 0.05, y0[0] + 0.05), "omega1": (-1.0, 1.0),
           "omega2": (0.9 * y0[2], 1.1 * y0[2]), "omega3": (0.9 * y0[3], 1.1 * y0[3])}  # fmt: skip
    t0 = time.perf_counter()
    r = rollax.refine_design(system, PARAMS, y0, t, box, observe="camera", sigma=CAMERA_SIGMA,
                             max_iter=15, progress=False)  # fmt: skip
    t_refine = time.perf_counter() - t0
    out = {
        "setup": {"frames": int(t.shape[0]), "observables": 3, "columns": 7, "n": args.n},
        "rates": {str(k): v for k, v in rates.items()},
        "sampling": {
            "n": args.sample,
            "best_loss": best_sampled,
            "seconds": t_sample,
            "feasible": int(d.feasible.sum()),
            "best_std_errors": d.std_errors[d.best].tolist(),
        },  # fmt: skip
        "gradient": {
            "start_from_best_of": args.start_from,
            "start_loss": r.loss_start,
            "loss": r.loss,
            "iterations": r.iterations,
            "status": r.status,
            "seconds_with_compile": t_refine,
            "std_errors": r.std_errors.tolist(),
        },  # fmt: skip
    }
    print(f"best of {args.sample} sampled: loss {best_sampled:.4f} ({t_sample:.1f} s); gradient "
          f"from the best of {args.start_from}: {r.loss_start:.4f} -> {r.loss:.4f} in "
          f"{r.iterations} iterations ({t_refine:.1f} s with its compile, {r.status})")  # fmt: skip
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_design.json"), "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
