"""Event samples per step against a 16-sample reference on the nine rolling panels of
Figs. 11-13 (360 x 240 each): outcomes that differ, and the largest end-time difference among
starts with the same outcome. A start whose F2 dip falls between the samples of a step separates
late (or not at all); steps whose samples may hide a pair of crossings are rejected
(rollax._core.events.unresolved), which this measures.

    python3 benchmarks/bench_samples.py [--samples 4 8] [--reference 16] [--json out.json]

``--smoke``: the Fig. 11 no-dissipation panel only, 3 x 3 starts, 4 samples against 8
(tests/test_scripts_smoke.py); ``--out DIR``: write the JSON into DIR/bench_samples.json (unless
``--json`` names a file).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import rollax
from rollax.analysis.basin import Axis, basin_map, preset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--reference", type=int, default=16)
    ap.add_argument("--json", default=None)
    ap.add_argument("--out", default=None, help="folder for the JSON (bench_samples.json)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    args = ap.parse_args()
    panels = [(f, d) for f in ("fig11", "fig12", "fig13") for d in ("none", "drilling", "rolling")]
    if args.smoke:
        panels, args.samples, args.reference = panels[:1], [4], 8
    if args.out and not args.json:
        os.makedirs(args.out, exist_ok=True)
        args.json = os.path.join(args.out, "bench_samples.json")
    rollax.configure()
    rows = []
    for fig, diss in panels:
        rim, kw = preset(fig, diss)
        if args.smoke:
            kw["x"], kw["y"] = Axis("beta", 0.8, 1.8, 3), Axis("omega1", -20.0, 20.0, 3)
        tic = time.perf_counter()
        ref = basin_map(rim, n_samples=args.reference, progress=False, **kw)
        row = {"panel": f"{fig} {diss}", "reference_s": round(time.perf_counter() - tic, 2)}
        for k in args.samples:
            tic = time.perf_counter()
            m = basin_map(rim, n_samples=k, progress=False, **kw)
            same = m.outcome == ref.outcome
            dt = np.abs(m.t_end - ref.t_end)[same]
            row[f"n{k}"] = {
                "outcomes_differ": int(np.sum(~same)),
                "max_dt_same_outcome": float(np.max(dt)) if dt.size else 0.0,
                "starts_dt_over_1e-6": int(np.sum(dt > 1e-6)),
                "steps": int(np.sum(m.steps)),
                "s": round(time.perf_counter() - tic, 2),
            }
        row["reference_steps"] = int(np.sum(ref.steps))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
