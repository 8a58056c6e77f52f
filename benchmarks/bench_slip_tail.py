"""Benchmark: the tail of the slipping Fig. 12 map (issue 56).

A new user's ``rollax basin --preset fig12 --friction 1`` spent 4+ minutes on its last ~100 of
86,400 starts, its bar standing near the end. This runs the same map (the CLI's preset, grid
and tolerances) in this process with its bar recorded (a tqdm stand-in logging every update),
cold (compiles), then warm with the tail kept on the kernel's L lanes (the code before the
cut: ``queue._NARROW_MIN_PER_LANE = inf``) and warm with the cut, alternating (``--rounds``). It
reports when the bar reached each fraction of the starts,
how long the last 0.1 % and the last 100 starts took against the whole, and the steps and
switches of the slowest starts.

    python benchmarks/bench_slip_tail.py [--grid 360 240] [--out DIR] [--smoke]

Writes ``slip_tail.json`` and ``slip_tail.png`` (the bar's progress against time) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


ARRAYS: list = []  # (outcome, t_end, switches) of each run, compared start by start


class Recorder:
    """tqdm's interface, logging (seconds since open, n, postfix)."""

    log: list = []

    def __init__(self, *a, total=None, **k):
        self.total, self.n, self.t0 = total, 0, time.monotonic()
        Recorder.log = [(0.0, 0, "open")]

    def update(self, k=1):
        self.n += k
        Recorder.log.append((time.monotonic() - self.t0, self.n, ""))

    def set_postfix_str(self, s="", refresh=True):
        Recorder.log.append((time.monotonic() - self.t0, self.n, s))

    def close(self):
        Recorder.log.append((time.monotonic() - self.t0, self.n, "close"))


def run(grid) -> tuple[dict, list]:
    import tqdm.auto

    tqdm.auto.tqdm = Recorder  # (this process only: before rollax's sweep driver imports it)
    import rollax  # noqa: F401  (the cache)
    from rollax.analysis.basin import Axis, basin_map, preset
    from rollax.models.slip import SlipSettings

    rim, kw = preset("fig12", "none")
    kw["x"] = Axis("beta", 0.8, 1.8, grid[0])
    kw["y"] = Axis("omega1", -20.0, 20.0, grid[1])
    t = time.perf_counter()
    res = basin_map(rim, progress=True, slip=SlipSettings(delta=1e-6), **kw)
    wall = time.perf_counter() - t
    log = list(Recorder.log)
    n = grid[0] * grid[1]
    ups = [(s, k) for s, k, p in log if p == "" and k > 0]

    def reached(k):
        return next((s for s, m in ups if m >= k), float("nan"))

    first = ups[0][0] if ups else float("nan")
    steps = np.asarray(res.steps).ravel() if hasattr(res, "steps") else None
    sw = np.asarray(res.switches).ravel()
    out = {
        "grid": list(grid),
        "starts": n,
        "wall_s": wall,
        "first_report_s": first,  # the compile (or the loading of the kernel) before it
        "reached_s": {f"{q:g}": reached(int(np.ceil(q * n))) for q in (0.5, 0.9, 0.99, 0.999)},
        "full_s": reached(n),
        "last_100_s": reached(n) - reached(max(1, n - 100)),
        "last_0.1pct_s": reached(n) - reached(int(n * 0.999)),
        "after_full_s": wall - reached(n),
        "max_switches": int(sw.max()),
        "switches_p999": float(np.quantile(sw, 0.999)),
        "counts": res.counts(),
        "postfixes": sorted({p for _, _, p in log if p not in ("", "open", "close")}),
        "load": os.getloadavg()[0],
    }
    ARRAYS.append((np.asarray(res.outcome), np.asarray(res.t_end), np.asarray(res.switches)))
    if steps is not None:
        out["max_steps"] = int(steps.max())
        out["steps_p999"] = float(np.quantile(steps, 0.999))
    return out, log


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", type=int, nargs=2, default=(360, 240))
    p.add_argument("--out", type=Path, default=HERE / "runs" / "slip_tail")
    p.add_argument("--smoke", action="store_true", help="a 6 x 4 grid")
    p.add_argument("--rounds", type=int, default=1, help="warm pairs (before / after the cut)")
    a = p.parse_args()
    if a.smoke:
        a.grid = (6, 4)
    a.out.mkdir(parents=True, exist_ok=True)
    from rollax._integrate import queue

    rows, logs = [], []
    # cold (the narrow kernel compiled beside the tail), then warm runs alternating the code
    # before the cut (the tail stays on L lanes) and after it, in this process
    states = ["first"] + ["warm, L lanes", "warm, cut"] * a.rounds
    default = queue._NARROW_MIN_PER_LANE
    for state in states:
        queue._NARROW_MIN_PER_LANE = np.inf if state == "warm, L lanes" else default
        r, log = run(tuple(a.grid))
        r["state"] = state
        rows.append(r)
        logs.append(log)
        print(json.dumps(r), flush=True)
    queue._NARROW_MIN_PER_LANE = default
    same = all(
        r["counts"] == rows[0]["counts"] and r.get("max_steps") == rows[0].get("max_steps")
        for r in rows
    )
    print(f"outcome counts and max steps the same in every run: {same}")
    o0, t0_, s0 = ARRAYS[0]
    for r, (o, t, sw) in zip(rows, ARRAYS):
        r["outcomes_differ"] = int(np.sum(o != o0))
        r["switches_differ"] = int(np.sum(sw != s0))
        r["max_abs_dt_end_s"] = float(np.nanmax(np.abs(t - t0_)))
        print(
            r["state"],
            {k: r[k] for k in ("outcomes_differ", "switches_differ", "max_abs_dt_end_s")},
        )
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "same_results": same,
    }
    (a.out / "slip_tail.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for r, log in zip(rows, logs):
        s = [x for x, _, pf in log if pf == ""]
        k = [m for _, m, pf in log if pf == ""]
        ax.step(s, k, where="post", label=f"{r['state']} (wall {r['wall_s']:.1f} s)")
    ax.set_xlabel("seconds since the bar opened")
    ax.set_ylabel("starts finished")
    ax.set_title(
        f"Fig. 12 section, mu = 1, delta = 1e-6 m/s, {a.grid[0]} x {a.grid[1]} starts "
        f"({meta['date']}, {meta['cpus']} CPUs)",
        fontsize=9,
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.out / "slip_tail.png")
    print(f"wrote {a.out / 'slip_tail.json'} and .png")


if __name__ == "__main__":
    main()
