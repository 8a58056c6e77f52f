"""The fused kernel against the work queue on this machine's default device: the conformance
cases of ``tests/test_conformance.py`` (a few hundred starts each), statuses, events, modes,
counts, steps and resets equal, event times and first crossings within 1e-10.

    python benchmarks/gpu/conformance_fused.py [--n 256] [--cases rim_rolling,oscillator]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import rollax  # noqa: E402
import test_conformance as tc  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--cases", default=",".join(tc.CASES))
    ap.add_argument(
        "--save-events",
        type=int,
        default=0,
        help="keep this many events per start and compare the logs too",
    )
    args = ap.parse_args()
    bad = 0
    for name in args.cases.split(","):
        system, y0s, t1, opts = tc.CASES[name](args.n)
        opts = {**tc.TOL, **opts, **({"save_events": args.save_events} if args.save_events else {})}
        tic = time.perf_counter()
        a = rollax.solve_ensemble(system, y0s, 0.0, t1, backend="queue", **opts)
        tq = time.perf_counter() - tic
        try:
            tic = time.perf_counter()
            b = rollax.solve_ensemble(system, y0s, 0.0, t1, backend="fused", **opts)
            tf = time.perf_counter() - tic
        except Exception as e:  # report and go on to the next case
            print(f"{name}: fused FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            bad += 1
            continue
        diff = [
            f
            for f in ("status", "event", "mode", "counts", "steps", "resets")
            if not np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)))
        ]
        if args.save_events:  # the event logs: the same events, times within 1e-10
            la, lb = a.events, b.events
            diff += [
                f"events.{f}"
                for f in ("event", "mode", "mode_after", "n")
                if not np.array_equal(np.asarray(getattr(la, f)), np.asarray(getattr(lb, f)))
            ]
            if not np.allclose(la.t, lb.t, rtol=0, atol=1e-10, equal_nan=True):
                diff.append("events.t")
        dt = float(np.max(np.abs(a.t - b.t)))
        tfirst = np.nan_to_num(a.t_first, nan=-1.0) - np.nan_to_num(b.t_first, nan=-1.0)
        dtf = float(np.max(np.abs(tfirst))) if tfirst.size else 0.0
        ok = not diff and dt <= 1e-10 and dtf <= 1e-10
        bad += not ok
        print(
            f"{name}: {'ok' if ok else 'MISMATCH'} {len(y0s)} starts; differ: {diff or 'none'}; "
            f"max |dt| {dt:.1e}, first crossings {dtf:.1e}; first call queue {tq:.1f} s, "
            f"fused {tf:.1f} s (compile included)",
            flush=True,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
