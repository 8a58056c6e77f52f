"""Where the fused path's time goes on a GPU: the Fig. 11 no-slip panel (``--grid``) run warm
under ``jax.profiler.trace``, then the trace's device events summed by name (each Pallas
kernel, XLA's own kernels, copies), against the wall time of ``basin_map`` and of
``rollax.solve_ensemble`` alone on the same starts.

    python benchmarks/gpu/profile_fused.py [--grid 1000 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import tempfile
import time

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.profiler import ProfileData  # noqa: E402

import rollax  # noqa: E402
from rollax.analysis.basin import basin_map, preset, section_starts  # noqa: E402
from rollax.models.slip import SlipSettings  # noqa: E402
from rollax.systems import RimRolling  # noqa: E402

rollax.configure()


#: the file names of rollax's modules (the trace's Python frames name files, not paths)
OWN = {
    os.path.basename(f)
    for f in glob.glob(os.path.dirname(rollax.__file__) + "/**/*.py", recursive=True)
}


def device_times(trace_dir: str) -> dict:
    """Seconds per event name on the device planes of the trace in ``trace_dir``, and the
    device's busy time (the union of its events' intervals)."""
    (path,) = glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True)
    data = ProfileData.from_file(path)
    by = collections.Counter()
    host = collections.Counter()  # Python functions of private modules (inclusive times)
    runtime = collections.Counter()
    callers = collections.Counter()  # JAX's dispatches by the innermost rollax frame around them
    spans = []
    for plane in data.planes:
        if plane.name.startswith("/host:"):
            for line in plane.lines:
                evs = list(line.events)
                frames = [
                    (e.start_ns, e.start_ns + e.duration_ns, e.name)
                    for e in evs
                    if e.name.startswith("$")
                ]
                for ev in evs:
                    if ev.name.startswith("$_"):
                        host[ev.name[:90]] += ev.duration_ns * 1e-9
                    elif not ev.name.startswith("$"):  # JAX's and XLA's own (C++) spans
                        runtime[ev.name[:90]] += ev.duration_ns * 1e-9
                        if ev.name.startswith(("PjitFunction", "np.asarray", "DevicePut")):
                            s, e = ev.start_ns, ev.start_ns + ev.duration_ns
                            around = [f for f in frames if f[0] <= s and f[1] >= e]
                            # the innermost frames of rollax's own files
                            inner = [f for f in sorted(around) if f[2][1:].split(":")[0] in OWN]
                            who = " < ".join(f[2][1:50] for f in reversed(inner[-4:]))
                            callers[f"{ev.name[:40]} @ {who}"] += ev.duration_ns * 1e-9
        if not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            for ev in line.events:
                by[ev.name[:90]] += ev.duration_ns * 1e-9
                spans.append((ev.start_ns, ev.start_ns + ev.duration_ns))
    busy, end = 0.0, -np.inf
    for a, b in sorted(spans):
        if b > end:
            busy += (b - max(a, end)) * 1e-9
            end = b
    return dict(
        busy_s=round(busy, 4),
        top=[(k, round(v, 4)) for k, v in by.most_common(15)],
        host=[(k, round(v, 4)) for k, v in host.most_common(25)],
        runtime=[(k, round(v, 4)) for k, v in runtime.most_common(25)],
        callers=[(k, round(v, 4)) for k, v in callers.most_common(20)],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, nargs=2, default=[1000, 1000])
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--mu",
        type=float,
        default=None,
        help="the rolling/slipping panel with this friction (rim.mu); default: no slip",
    )
    args = ap.parse_args()
    rim, kw = preset("fig11", "none")
    slip = None
    if args.mu is not None:
        rim, slip = eqx.tree_at(lambda r: r.mu, rim, args.mu), SlipSettings()
    kw["x"] = type(kw["x"])("beta", 0.8, 1.8, args.grid[0])
    kw["y"] = type(kw["y"])("omega1", -20.0, 20.0, args.grid[1])
    n = kw["x"].n * kw["y"].n
    opts = dict(
        progress=False, t_max=60.0, rtol=1e-9, atol=1e-9, chunk_size=n, backend="fused", slip=slip
    )
    row: dict = dict(device=str(jax.devices()[0].device_kind), grid=args.grid, mu=args.mu)

    def timed(fn, repeat=3):
        fn()  # compile
        best = np.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return round(best, 4)

    row["basin_map_s"] = timed(lambda: basin_map(rim, **kw, **opts))
    # the same starts through rollax.solve_ensemble alone (no sweep, no classification)
    system = RimRolling(rim, w1_target=2)
    starts = section_starts(kw["x"], kw["y"], kw["fixed"])
    if slip is None:
        row["solve_ensemble_s"] = timed(
            lambda: rollax.solve_ensemble(
                system, starts, 0.0, 60.0, rtol=1e-9, atol=1e-9, backend="fused"
            )
        )
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d):
            basin_map(rim, **kw, **opts)
        row["basin_map_trace"] = device_times(d)
    print(json.dumps(row, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(row, fh, indent=1)


if __name__ == "__main__":
    main()
