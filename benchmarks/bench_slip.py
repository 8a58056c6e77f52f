"""Benchmark: the Fig. 11 panel (360 x 240) with slipping (mu = 1) against the no-slip panel.

Both through ``rollax.basin.basin_map`` on all local devices, warm (best of ``--repeat``); the
compile time of the first call is listed separately.

    python benchmarks/bench_slip.py [--repeat 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import rollax  # noqa: F401
from rollax.basin import basin_map, preset
from rollax.slip import SlipSettings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--preset", default="fig11")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rim, kw = preset(args.preset, "none")
    rows = {}
    for name, slip in (("no slip", None), ("mu = 1", SlipSettings())):
        t0 = time.perf_counter()
        m = basin_map(rim, progress=False, slip=slip, **kw)
        first = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            m = basin_map(rim, progress=False, slip=slip, **kw)
            warm.append(time.perf_counter() - t0)
        rows[name] = dict(counts=m.counts(), first_s=round(first, 2), warm_s=round(min(warm), 3),
                          steps=int(np.sum(m.steps)))
        if slip is not None:
            rows[name]["slipped"] = int(np.sum(m.switches > 0))
        print(name, json.dumps(rows[name]), flush=True)
    ratio = rows["mu = 1"]["warm_s"] / rows["no slip"]["warm_s"]
    print(f"slip / no-slip warm time: {ratio:.1f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(rows=rows, ratio=ratio), fh, indent=2)


if __name__ == "__main__":
    main()
