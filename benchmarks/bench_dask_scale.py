"""Benchmark: sweeps whose workers write the store, and the client's memory (issue 61).

The Fig. 11 section (``basin_map``: beta in [0.8, 1.8] x omega1 in [-20, 20], omega2 = 35,
omega3 = 10, no slip, the solver's defaults) refined to ``--sizes`` starts per axis, through a
``LocalCluster`` of ``--workers`` worker processes (one thread, one JAX CPU device each) into a
zarr store that the workers write themselves. For each size, in this order:

1. **The cluster's sweep.** The client's resident memory (``VmRSS``, sampled every 20 ms by a
   thread) before the sweep, its peak during it and after it; the wall time; what each worker
   did (regions, XLA compiles, compile-cache hits: ``BasinMap``'s sweep ``work``).
2. **The lazily returned result.** ``counts()`` (the workers' tallies), a 1000 x 1000 slice of
   the outcome read from the store, and the map's PNG (``plot_basin``, as ``BasinMap.save``
   draws it: from every k-th start), each with the client's RSS after it.
3. **The same sweep in one process** (``rollax.configure()``: one JAX device per core; into
   its own store), its wall time and this process's peak RSS during it; then the outcomes of
   the two stores compared, chunk by chunk.

Last, **a fresh cluster** runs the smallest size again into a new store: with the compile cache
that the first cluster filled, its workers should compile nothing (their compile counts, from
JAX's monitoring events, and cache hits).

The compile cache is a fresh temporary folder (``ROLLAX_CACHE_DIR``), which the client passes
to its workers.

    python benchmarks/bench_dask_scale.py [--sizes 1000 10000] [--t-max 20] [--out DIR]

``--smoke``: sizes 60 and 90 and t_max 5 (tests/test_scripts_smoke.py). Workers are spawned
processes that import this script as a module: ``rollax.configure()`` is called in ``main()``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path

_CACHE = tempfile.mkdtemp(prefix="rollax-scale-cache-")
os.environ.setdefault("ROLLAX_CACHE_DIR", _CACHE)

import numpy as np  # noqa: E402

import rollax  # noqa: E402
from rollax.analysis.basin import Axis, basin_map  # noqa: E402
from rollax.models.rim import Rim  # noqa: E402
from rollax.plot import plot_basin  # noqa: E402


def rss() -> int:
    """This process's resident memory in bytes (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Peak:
    """The peak of :func:`rss` while the context is open (sampled every 20 ms)."""

    def __enter__(self):
        self.peak = rss()
        self._stop = threading.Event()

        def watch():
            while not self._stop.wait(0.02):
                self.peak = max(self.peak, rss())

        self._t = threading.Thread(target=watch, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss())
        return False


def cluster(n: int):
    import logging

    from distributed import Client, LocalCluster

    cl = LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    return cl, Client(cl)


MB = 1e6


def one_size(n: int, args, client, tmp: Path, out: Path | None) -> dict:
    kw = dict(
        x=Axis("beta", 0.8, 1.8, n),
        y=Axis("omega1", -20.0, 20.0, n),
        t_max=args.t_max,
        chunk_size=args.chunk,
        progress=False,
    )
    rim = Rim()
    row: dict = dict(starts=n * n, grid=[n, n])
    before = rss()
    t0 = time.perf_counter()
    with Peak() as p:
        bmap = basin_map(rim, store=tmp / f"dask_{n}.zarr", client=client, lazy=True, **kw)
    row["dask_wall_s"] = time.perf_counter() - t0
    row["rss_before_MB"] = before / MB
    row["rss_peak_MB"] = p.peak / MB
    row["rss_growth_MB"] = (p.peak - before) / MB
    row["work"] = _work(bmap)
    # the lazily returned result
    t0 = time.perf_counter()
    row["counts"] = bmap.counts()
    row["counts_s"] = time.perf_counter() - t0
    row["rss_after_counts_MB"] = rss() / MB
    k = min(n, 1000)
    t0 = time.perf_counter()
    with Peak() as p:
        part = np.asarray(bmap.outcome[:k, :k])
    row["slice"] = dict(shape=list(part.shape), s=time.perf_counter() - t0, peak_MB=p.peak / MB)
    fig = (out or tmp) / f"basin_{n}.png"
    fig.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with Peak() as p:
        plot_basin(bmap, fig)  # (what BasinMap.save draws: every k-th start of a large map)
    row["png"] = dict(path=str(fig), s=time.perf_counter() - t0, peak_MB=p.peak / MB)
    del bmap, part
    # the same sweep in one process
    if not args.skip_single:
        client.close()  # (this process computes alone; the caller reconnects)
        t0 = time.perf_counter()
        with Peak() as p:
            basin_map(rim, store=tmp / f"single_{n}.zarr", **kw)
        row["single_wall_s"] = time.perf_counter() - t0
        row["single_rss_peak_MB"] = p.peak / MB
        row["dask_over_single"] = row["dask_wall_s"] / row["single_wall_s"]
        row["outcomes_differing"] = _differing(tmp / f"dask_{n}.zarr", tmp / f"single_{n}.zarr")
    return row


def _work(bmap) -> dict:
    return dict(bmap.work or {})


def _differing(a: Path, b: Path) -> int:
    import xarray as xr

    with xr.open_zarr(a) as da, xr.open_zarr(b) as db:
        return int((da["outcome"] != db["outcome"]).sum().compute())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--t-max", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1 << 17)
    ap.add_argument("--skip-single", action="store_true", help="no one-process sweeps")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.t_max, args.chunk = [60, 90], 5.0, 1024
    rollax.configure()
    tmp = Path(tempfile.mkdtemp(prefix="rollax-scale-"))
    res: dict = dict(
        machine=dict(cores=os.cpu_count(), python=platform.python_version()),
        args=dict(vars(args), out=str(args.out)),
        cache=os.environ["ROLLAX_CACHE_DIR"],
        rows=[],
    )
    try:
        for n in sorted(args.sizes):
            cl, client = cluster(args.workers)
            try:
                # the client's libraries (xarray, dask.array, zarr) loaded before the measure
                basin_map(
                    Rim(),
                    x=Axis("beta", 0.8, 1.8, 8),
                    y=Axis("omega1", -20.0, 20.0, 8),
                    t_max=1.0,
                    progress=False,
                    store=tmp / f"warm_{n}.zarr",
                    client=client,
                    lazy=True,
                ).save(tmp / f"warm_{n}")
                row = one_size(n, args, client, tmp, args.out)
            finally:
                client.close()
                cl.close()
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(tmp / f"single_{n}.zarr", ignore_errors=True)
        # a fresh cluster: the smallest sweep again, its kernel in the compile cache
        n = min(args.sizes)
        cl, client = cluster(args.workers)
        try:
            t0 = time.perf_counter()
            again = basin_map(
                Rim(),
                x=Axis("beta", 0.8, 1.8, n),
                y=Axis("omega1", -20.0, 20.0, n),
                t_max=args.t_max,
                chunk_size=args.chunk,
                progress=False,
                store=tmp / "again.zarr",
                client=client,
            )
            res["fresh_cluster"] = dict(
                starts=n * n, wall_s=time.perf_counter() - t0, work=_work(again)
            )
        finally:
            client.close()
            cl.close()
        print(json.dumps(res["fresh_cluster"]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_dask_scale.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
