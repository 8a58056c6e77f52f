"""Benchmark: ``rollax.sweep`` through a Dask cluster against one process (issue 39).

The Fig. 11 panel (``RimRolling(Rim(), w1_target=2)``, beta in [0.8, 1.8] x omega1 in [-20, 20],
360 x 240 starts, omega2 = 35, omega3 = 10, t1 = 60 s, no slip, the solver's defaults) is swept

* in this process, as a user runs it (``rollax.configure()``: one JAX CPU device per core;
  the default ``chunk_size``, one region), and as a worker runs it (one device, the Dask runs'
  ``chunk_size``: the same regions);
* through a ``LocalCluster`` of ``--workers`` worker processes of one thread each (each worker
  one JAX CPU device), with ``chunk_size`` = ``ceil(nx / --regions)`` whole omega1 rows, so that
  there are several regions per worker: **cold** (the first sweep on a fresh cluster: the
  workers import rollax, unpickle the computation and compile) and **warm** (the next sweeps
  on the same cluster).

The three alternate, ``--repeat`` rounds, each with a fresh cluster (so each round has a cold
Dask sweep); the compile cache is off (``ROLLAX_CACHE_DIR=off``) for honest cold times. Every
Dask result is checked (asserted): counts and outcome arrays equal to the default one-process
sweep's, and every variable of the dataset bit-identical to the one-device sweep's (against the
default sweep the end times and states differ at rounding level, the README's placement bound:
recorded). Also recorded per sweep: the Dask task stream (which worker ran which region, for
how long) and the CPU time the workers spent.

Then, with the compile cache on (a fresh temporary folder, which the client passes to its
workers):

* **lost worker**: a fresh cluster sweeps into a zarr store while one worker process is killed
  (SIGKILL) ``--kill-after`` seconds after the scheduler shows it working on its first region
  (it is compiling then); the nanny restarts it, the scheduler runs its regions again
  elsewhere, and the store read back (``xarray.open_zarr``) must equal the one-device result;
* **fresh workers, compile cache on disk**: another fresh cluster, whose workers load the
  kernel that the lost-worker round compiled.

Last, the size of the zarr store for the panel, in bytes per start: the outcome only
(``keep_solution=False``), what ``rollax basin`` writes (``basin_map(store=...)`` where it takes
a store; else the sweep with the basin map's summary and ``keep_solution=False``), and every
field of the solution (``keep_solution=True``). From these and the per-start costs, how a 1e8-
and a 1e9-start sweep would be laid out on 1, 8 and 64 machines (``bench_dask.md``).

    python benchmarks/bench_dask.py [--repeat 3] [--workers 2] [--regions 8] [--out DIR]

``--smoke``: a 24 x 16 grid, 4 regions, 2 workers, one round, no default-process sweep, this
process on one device and the compile cache on from the start, so that the workers load the
kernel it compiles (about 35 s; tests/test_scripts_smoke.py);
``--out DIR``: write ``bench_dask.json`` and ``bench_dask.md`` there (without it, print only).

Workers are spawned processes, which import this script as a module: ``rollax.configure()`` is
called in ``main()``, not at import, so that each worker keeps one JAX CPU device (a worker
that split the CPU into one device per core would oversubscribe it, with several workers on a
machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import statistics
import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")  # honest compile times (the workers' too)

import numpy as np  # noqa: E402

import rollax  # noqa: E402
import rollax.analysis.basin as basin_module  # noqa: E402
from rollax.models.rim import Rim  # noqa: E402
from rollax.systems import RimRolling  # noqa: E402

# The H100 figures of benchmarks/RESULTS.md, stop 38 ("The grid built on the device: the
# 1000 x 1000 panel in 39-50 ms"): the Fig. 11 no-slip panel of 1e6 starts, fused backend,
# warm 39-50 ms of which the device is busy 13.2-13.7 ms; the rest is a per-call host cost.
GPU_CALL_S = 0.030  # per call (per region) fixed cost on the host, 39-50 ms less ~13.5 ms
GPU_START_S = 13.5e-9  # device time per start (busy 13.5 ms / 1e6 starts)
GPU_PANEL_S = 0.050  # the 1e6 panel all included, the upper figure (50 ns per start)
DEFAULT_CHUNK = 1 << 17
# Every region's results come back to the one client process, which writes them into the store:
# an assumed 1 GB/s for receiving, compressing and writing (not measured here), a floor on the
# time of any sweep whatever the number of workers.
CLIENT_BYTES_PER_S = 1e9


def panel(nx: int, ny: int):
    system = RimRolling(Rim(), w1_target=2)
    axes = [rollax.Axis("beta", 0.8, 1.8, nx), rollax.Axis("omega1", -20.0, 20.0, ny)]
    kw = dict(y0={"omega2": 35.0, "omega3": 10.0}, t1=60.0, progress=False)
    return system, axes, kw


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(fn):
    load0 = load()
    t0 = time.perf_counter()
    out = fn()
    return out, dict(wall_s=round(time.perf_counter() - t0, 4), load=[load0, load()])


def differences(ref, res) -> dict:
    """Variables of ``res.dataset`` that differ from ``ref.dataset``: (values differing, the
    largest absolute difference)."""
    out = {}
    for k in ref.dataset.data_vars:
        a, b = ref.dataset[k].values, res.dataset[k].values
        if np.array_equal(a, b, equal_nan=True):
            continue
        if a.dtype.kind == "f":
            m = ~(np.isnan(a) & np.isnan(b))
            out[k] = [int(np.sum(a[m] != b[m])), float(np.max(np.abs(a[m] - b[m])))]
        else:
            out[k] = [int(np.sum(a != b)), None]
    return out


def check(ref, res, what: str, identical: bool = True) -> dict:
    """Counts and outcome arrays equal (asserted); with ``identical`` every variable too
    (asserted), else the differences are recorded."""
    assert ref.counts() == res.counts(), (what, ref.counts(), res.counts())
    assert np.array_equal(ref.outcome, res.outcome), what
    diff = differences(ref, res)
    if identical:
        assert not diff, (what, diff)
    return dict(counts_equal=True, outcome_equal=True, other_variables_differing=diff)


def worker_cpu(client) -> dict[str, float]:
    """CPU seconds (all threads) of each worker process so far."""
    return client.run(time.process_time)


def stream_summary(data: list[dict], workers_before=None) -> dict:
    """Tasks per worker and their compute times (from ``distributed.get_task_stream``)."""
    tasks = []
    for d in data:
        comp = [s for s in d.get("startstops", ()) if s.get("action") == "compute"]
        if not comp:
            continue
        tasks.append(
            dict(
                key=str(d["key"]),
                worker=d["worker"],
                start=min(s["start"] for s in comp),
                compute_s=sum(s["stop"] - s["start"] for s in comp),
            )
        )
    tasks.sort(key=lambda t: t["start"])
    per_worker: dict[str, list[float]] = {}
    for t in tasks:
        per_worker.setdefault(t["worker"], []).append(round(t["compute_s"], 4))
    t0 = tasks[0]["start"] if tasks else 0.0
    return dict(
        tasks=len(tasks),
        workers_used=len(per_worker),
        tasks_per_worker=sorted(len(v) for v in per_worker.values()),
        compute_s_per_worker={w: v for w, v in sorted(per_worker.items())},
        compute_s_total=round(sum(t["compute_s"] for t in tasks), 4),
        first_task_s=[v[0] for v in per_worker.values()],
        later_tasks_s=sorted(x for v in per_worker.values() for x in v[1:]),
        order=[
            (t["key"].rsplit("-", 1)[-1], t["worker"], round(t["start"] - t0, 3)) for t in tasks
        ],
        keys=[t["key"] for t in tasks],
    )


def dask_sweep(client, refs, system, axes, kw, chunk, what, **more):
    """One timed sweep on the cluster; ``refs``: the one-process sweep on the same regions and
    one device (every variable must be identical) and, or None, the default one-process sweep
    (counts and outcomes identical; the other variables' rounding differences recorded)."""
    from distributed import get_task_stream

    cpu0 = worker_cpu(client)
    with get_task_stream(client) as ts:
        res, row = timed(
            lambda: rollax.sweep(system, axes, client=client, chunk_size=chunk, **kw, **more)
        )
    cpu1 = worker_cpu(client)
    row["worker_cpu_s"] = {
        w: round(cpu1[w] - cpu0.get(w, 0.0), 2) for w in sorted(cpu1)
    }  # (a restarted worker counts from its start)
    row["stream"] = stream_summary(ts.data)
    row["check"] = check(refs[0], res, what)
    if refs[1] is not None:
        row["check_default"] = check(refs[1], res, what, identical=False)
    return res, row


def cluster(n_workers: int):
    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    cl = LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    c = Client(cl)
    c.wait_for_workers(n_workers)
    return cl, c, round(time.perf_counter() - t0, 3)


def close(cl, c):
    c.close()
    cl.close()


def store_bytes(path: Path) -> tuple[int, int]:
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            total += os.path.getsize(os.path.join(root, name))
            files += 1
    return total, files


def layout(shape: tuple[int, ...], chunk: int) -> tuple[int, int]:
    """(regions, starts per full region) of ``rollax._drivers._store.region_layout``: blocks
    that keep the trailing axes whole, at most ``chunk`` starts."""
    d = len(shape)
    j = next(j for j in range(d) if math.prod(shape[j + 1 :]) <= chunk)
    inner = math.prod(shape[j + 1 :])
    c = max(1, min(shape[j], chunk // inner))
    return math.prod(shape[:j]) * math.ceil(shape[j] / c), c * inner


def projection(
    core_s: float, task_s: float, compile_s: float, bytes_per_start: dict, raw_per_start: dict
) -> list:
    """Rows of the 1e8 / 1e9 layout table: regions, tasks per worker, store size, time."""
    rows = []
    grids = {"1e8": (10_000, 10_000), "1e9": (100_000, 10_000)}
    nodes = {"CPU 2 cores": ("cpu", 2), "CPU 32 cores": ("cpu", 32), "GPU (1 H100)": ("gpu", 1)}
    for size, shape in grids.items():
        n = math.prod(shape)
        for chunk in (DEFAULT_CHUNK, 1 << 23):
            regions, per_region = layout(shape, chunk)
            for label, (kind, per_node) in nodes.items():
                if kind == "cpu" and chunk != DEFAULT_CHUNK:
                    continue
                for machines in (1, 8, 64):
                    workers = machines * per_node
                    waves = math.ceil(regions / workers)
                    if kind == "cpu":
                        region_s = per_region * core_s + task_s
                        first = compile_s
                    else:
                        region_s = GPU_CALL_S + per_region * GPU_START_S + task_s
                        first = 0.0  # (the GPU's compile, 28-40 s cold, is not in the table)
                    rows.append(
                        dict(
                            starts=size,
                            grid=list(shape),
                            chunk_size=chunk,
                            regions=regions,
                            starts_per_region=per_region,
                            node=label,
                            machines=machines,
                            workers=workers,
                            regions_per_worker=round(regions / workers, 2),
                            waves=waves,
                            est_s=round(first + waves * region_s, 1),
                            client_floor_s=round(
                                n * raw_per_start.get("basin", 0.0) / CLIENT_BYTES_PER_S, 1
                            ),
                            **{
                                f"store_{k}_GB": round(n * b / 1e9, 2)
                                for k, b in bytes_per_start.items()
                            },
                            **{
                                f"raw_{k}_GB": round(n * b / 1e9, 1)
                                for k, b in raw_per_start.items()
                            },
                        )
                    )
    return rows


def kill_when_busy(client, worker: str, pid: int, after: float, t0: float, box: dict):
    """A thread that kills (SIGKILL) the worker process ``pid`` ``after`` seconds after the
    scheduler first shows a task processing on ``worker``; records when, and its tasks then."""
    stop = threading.Event()

    def busy():
        return client.processing(workers=[worker]).get(worker) or []

    def watch():
        try:
            while not stop.is_set() and not busy():
                stop.wait(0.05)
            if stop.wait(after):
                return
            box["tasks_on_it"] = sorted(str(k).rsplit("-", 1)[-1] for k in busy())
            box["killed_at_s"] = round(time.perf_counter() - t0, 3)
            os.kill(pid, signal.SIGKILL)
        except Exception as err:  # noqa: BLE001 - recorded: the round's check then fails
            box["error"] = repr(err)

    threading.Thread(target=watch, daemon=True).start()
    return stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", type=int, nargs=2, default=[360, 240], metavar=("NX", "NY"))
    ap.add_argument("--workers", type=int, default=2, help="worker processes, one thread each")
    ap.add_argument("--regions", type=int, default=8, help="regions (Dask tasks) wanted")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (a fresh cluster each)")
    ap.add_argument("--warm", type=int, default=2, help="warm Dask sweeps per round")
    ap.add_argument(
        "--kill-after",
        type=float,
        default=3.0,
        help="kill a worker this many s after it starts its first region (lost-worker round)",
    )
    ap.add_argument("--out", type=Path, default=None, help="folder for bench_dask.json and .md")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.grid, args.regions, args.repeat, args.warm, args.kill_after = [24, 16], 4, 1, 1, 0.5

    # here, not at import: the spawned workers import this module. --smoke: one device, as a
    # worker has, and the compile cache on from the start, so that the workers load the kernel
    # this process compiles (the smoke run's timings mean nothing; it tests the paths)
    rollax.configure(cpu_devices=1 if args.smoke else None)
    import jax
    import xarray as xr
    from distributed import get_task_stream  # noqa: F401 - fail early without distributed

    tmp = Path(tempfile.mkdtemp(prefix="bench_dask_"))
    if args.smoke:
        jax.config.update("jax_compilation_cache_dir", str(tmp / "jax-cache"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    nx, ny = args.grid
    n = nx * ny
    system, axes, kw = panel(nx, ny)
    chunk = math.ceil(nx / args.regions) * ny  # whole omega1 rows
    regions, _ = layout((nx, ny), chunk)
    cores = min(os.cpu_count() or 1, len(jax.devices()))
    dev = jax.devices()
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{len(dev)} x {dev[0].platform} JAX devices in the client process"
    )
    versions = {k: version(k) for k in ("jax", "jaxlib", "dask", "distributed", "xarray", "zarr")}
    print(f"# {machine}; {versions}; load {load()}")
    print(f"# grid {nx} x {ny} = {n} starts; Dask chunk_size {chunk}: {regions} regions")
    res: dict = dict(
        machine=machine,
        python=platform.python_version(),
        versions=versions,
        grid=[nx, ny],
        starts=n,
        workers=args.workers,
        threads_per_worker=1,
        chunk_size=chunk,
        regions=regions,
        cores_client=cores,
        load_start=load(),
    )

    def single():  # the default: every core (one JAX device each), one region
        return rollax.sweep(system, axes, chunk_size=DEFAULT_CHUNK, **kw)

    def single1():  # as a worker runs it: one device, the Dask run's regions
        return rollax.sweep(system, axes, chunk_size=chunk, devices=1, **kw)

    try:
        # ---- one process, cold (compile) -------------------------------------------------
        ref1, res["single1_cold"] = timed(single1)
        print(f"one process, 1 device, Dask's regions, cold {res['single1_cold']}")
        ref = None
        if not args.smoke:
            ref, res["single_cold"] = timed(single)
            res["single1_vs_single"] = check(ref, ref1, "1 device vs default", identical=False)
            print(f"one process, default, cold {res['single_cold']}")
        res["counts"] = ref1.counts()
        refs = (ref1, ref)

        # ---- alternating rounds ----------------------------------------------------------
        rounds = []
        for r in range(args.repeat):
            rnd: dict = {}
            if not args.smoke:
                out, rnd["single"] = timed(single)
                check(ref, out, "single")
            out, rnd["single1"] = timed(single1)
            check(ref1, out, "single, 1 device")
            cl, c, rnd["cluster_start_s"] = cluster(args.workers)
            try:
                _, rnd["dask_cold"] = dask_sweep(c, refs, system, axes, kw, chunk, "dask cold")
                rnd["dask_warm"] = [
                    dask_sweep(c, refs, system, axes, kw, chunk, "dask warm")[1]
                    for _ in range(args.warm)
                ]
            finally:
                close(cl, c)
            rounds.append(rnd)
            print(
                f"round {r}: one process {rnd.get('single', {}).get('wall_s')} s, 1 device "
                f"{rnd['single1']['wall_s']} s, cluster start {rnd['cluster_start_s']} s, "
                f"dask cold {rnd['dask_cold']['wall_s']} s "
                f"(tasks per worker {rnd['dask_cold']['stream']['tasks_per_worker']}), warm "
                f"{[w['wall_s'] for w in rnd['dask_warm']]} s "
                f"(tasks per worker {[w['stream']['tasks_per_worker'] for w in rnd['dask_warm']]}); "
                f"load {load()}"
            )
        res["rounds"] = rounds

        # ---- compile cache on: a lost worker, then fresh workers that load the kernel --------
        jax.config.update("jax_compilation_cache_dir", str(tmp / "jax-cache"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
        cl, c, start_s = cluster(args.workers)
        try:
            pids = c.run(os.getpid)
            victim = sorted(pids)[-1]
            box: dict = {"killed_at_s": "not fired (the sweep ended first)", "tasks_on_it": []}
            stop = kill_when_busy(
                c, victim, pids[victim], args.kill_after, time.perf_counter(), box
            )
            store = tmp / "lost.zarr"
            _, row = dask_sweep(c, refs, system, axes, kw, chunk, "lost worker", store=str(store))
            stop.set()
            c.wait_for_workers(args.workers, timeout=120)
            with xr.open_zarr(store) as ds:
                got = ds.load()
            differ = [
                k
                for k in ref1.dataset.data_vars
                if not np.array_equal(ref1.dataset[k].values, got[k].values, equal_nan=True)
            ]
            assert not differ, ("store written through the cluster", differ)
            row.update(
                cluster_start_s=start_s,
                killed_worker=victim,
                killed_pid=pids[victim],
                killed_at_s=box["killed_at_s"],
                regions_on_it=box["tasks_on_it"],
                kill_error=box.get("error"),
                pids_after=c.run(os.getpid),
                # where the regions lost with it ran in the end (the task stream)
                lost_regions_ran_on={
                    k: [w for k2, w, _ in row["stream"]["order"] if k2 == k]
                    for k in box["tasks_on_it"]
                },
                store_identical=True,
            )
            res["lost_worker"] = row
        finally:
            close(cl, c)
        print(
            f"lost worker: killed {row['killed_at_s']} s in, on regions {row['regions_on_it']}, "
            f"which ran on {row['lost_regions_ran_on']}; sweep {row['wall_s']} s, identical store"
        )
        if args.smoke:  # (the cache was on from the start: the round's cold sweep is this)
            row = dict(rounds[0]["dask_cold"], cluster_start_s=rounds[0]["cluster_start_s"])
        else:
            cl, c, start_s = cluster(args.workers)
            try:
                _, row = dask_sweep(c, refs, system, axes, kw, chunk, "cached")
                row["cluster_start_s"] = start_s
            finally:
                close(cl, c)
        res["fresh_workers_cache_on_disk"] = row
        print(f"fresh workers, compile cache on disk: {row['wall_s']} s")

        # ---- store sizes (in this process) -----------------------------------------------
        # what a user writes: the default chunk_size (the store's chunks are the regions);
        # --smoke: the kernel compiled above
        opts = dict(chunk_size=chunk, devices=1) if args.smoke else {}
        res["store"] = store_sizes(tmp, system, axes, kw, nx, ny, opts)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    summarise(res, args, rounds, n, regions, cores)
    md = markdown(res, args)
    print(md)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_dask.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
        (args.out / "bench_dask.md").write_text(md + "\n")
        print(f"wrote {args.out / 'bench_dask.json'} and {args.out / 'bench_dask.md'}")


def store_sizes(tmp: Path, system, axes, kw, nx: int, ny: int, opts: dict) -> dict:
    """Bytes of the zarr store of the panel: the outcome only, what ``rollax basin`` writes,
    every field of the solution (``opts``: more arguments of the sweeps)."""
    import inspect

    import xarray as xr

    from rollax.analysis.basin import basin_map, preset

    n = nx * ny
    sizes = {}
    for name in ("outcome", "basin", "solution"):
        path = str(tmp / f"{name}.zarr")
        if name == "outcome":
            how = "rollax.sweep(keep_solution=False), no summary"
            run = lambda: rollax.sweep(  # noqa: E731
                system, axes, store=path, keep_solution=False, **kw, **opts
            )
        elif name == "solution":
            how = "rollax.sweep(keep_solution=True)"
            run = lambda: rollax.sweep(system, axes, store=path, **kw, **opts)  # noqa: E731
        elif "store" in inspect.signature(basin_map).parameters:
            how = "rollax.analysis.basin.basin_map(store=...), as `rollax basin` writes"
            rim, pkw = preset("fig11", "none")
            pkw["x"] = type(pkw["x"])("beta", 0.8, 1.8, nx)
            pkw["y"] = type(pkw["y"])("omega1", -20.0, 20.0, ny)
            run = lambda: basin_map(rim, store=path, progress=False, **pkw, **opts)  # noqa: E731
        else:
            how = "rollax.sweep(keep_solution=False, summary=the basin map's summary)"
            summ = getattr(basin_module, "_summary")
            run = lambda: rollax.sweep(  # noqa: E731
                system, axes, store=path, keep_solution=False, summary=summ, **kw, **opts
            )
        _, row = timed(run)
        b, files = store_bytes(Path(path))
        with xr.open_zarr(path) as ds:
            raw = int(ds.nbytes)  # the variables and coordinates, uncompressed
        sizes[name] = dict(
            how=how,
            bytes=b,
            files=files,
            bytes_per_start=round(b / n, 2),
            raw_bytes_per_start=round(raw / n, 2),
            wall_s=row["wall_s"],
        )
        print(
            f"store {name}: {b} bytes, {files} files, {b / n:.2f} B per start "
            f"({raw / n:.1f} B uncompressed; {how})"
        )
    return sizes


def summarise(res: dict, args, rounds: list, n: int, regions: int, cores: int) -> None:
    def med(vals):
        return round(statistics.median(vals), 4)

    warm = [w["wall_s"] for r in rounds for w in r["dask_warm"]]
    cold = [r["dask_cold"]["wall_s"] for r in rounds]
    task_sum = [w["stream"]["compute_s_total"] for r in rounds for w in r["dask_warm"]]
    later = [x for r in rounds for w in r["dask_warm"] for x in w["stream"]["later_tasks_s"]]
    first_cold = [x for r in rounds for x in r["dask_cold"]["stream"]["first_task_s"]]
    s1 = [r["single1"]["wall_s"] for r in rounds]
    # the Dask overhead per task: the warm wall time beyond the workers' compute, per region
    overhead = [
        (w["wall_s"] - w["stream"]["compute_s_total"] / args.workers) / regions
        for r in rounds
        for w in r["dask_warm"]
    ]
    s = dict(
        single1_warm_best_s=min(s1),
        single1_warm_median_s=med(s1),
        single1_cold_s=res["single1_cold"]["wall_s"],
        dask_cold_s=cold,
        dask_warm_s=warm,
        dask_warm_best_s=min(warm),
        dask_warm_median_s=med(warm),
        cluster_start_s=[r["cluster_start_s"] for r in rounds],
        ratio_warm_vs_1device=round(min(warm) / min(s1), 2),
        single1_core_us_per_start=round(min(s1) / n * 1e6, 3),
        dask_ns_per_start=round(min(warm) / n * 1e9, 1),
        dask_worker_core_us_per_start=round(min(warm) * args.workers / n * 1e6, 3),
        task_compute_core_us_per_start=round(min(task_sum) / n * 1e6, 3),
        overhead_per_task_s=round(statistics.median(overhead), 4),
        cold_first_task_s=first_cold,
        warm_later_task_s=[round(min(later), 4), round(med(later), 4), round(max(later), 4)]
        if later
        else [],
        outcomes_identical=True,
    )
    if "single_cold" in res:
        s0 = [r["single"]["wall_s"] for r in rounds]
        s.update(
            single_warm_best_s=min(s0),
            single_warm_median_s=med(s0),
            single_cold_s=res["single_cold"]["wall_s"],
            ratio_warm_best=round(min(warm) / min(s0), 2),
            ratio_warm_median=round(med(warm) / med(s0), 2),
            ratio_cold=round(min(cold) / res["single_cold"]["wall_s"], 2),
            single_ns_per_start=round(min(s0) / n * 1e9, 1),
            single_core_us_per_start=round(min(s0) * cores / n * 1e6, 3),
        )
    res["summary"] = s
    bps = {k: v["bytes_per_start"] for k, v in res["store"].items()}
    raw = {k: v["raw_bytes_per_start"] for k, v in res["store"].items()}
    # one worker core's cost per start (the warm sweeps' compute on the workers), the Dask
    # overhead per task, and a worker's cold first region
    res["projection"] = projection(
        min(task_sum) / n, s["overhead_per_task_s"], statistics.median(first_cold), bps, raw
    )
    res["load_end"] = load()
    print(json.dumps(s, indent=1))


def markdown(res: dict, args) -> str:
    s = res["summary"]
    nx, ny = res["grid"]
    f3 = "{:.3f}".format
    lines = [
        f"`rollax.sweep` of the Fig. 11 panel ({nx} x {ny} = {res['starts']:,} starts) in one "
        f"process against a `LocalCluster` of {res['workers']} worker processes x 1 thread; "
        f"{res['machine']}; {res['versions']}; load average at start {res['load_start']}, at "
        f"end {res['load_end']}. Dask chunk_size {res['chunk_size']} ({res['regions']} regions).",
        "",
        "| round | one process, default [s] | one process, 1 device, Dask's regions [s] "
        "| cluster start [s] | Dask cold [s] | Dask warm [s] | tasks per worker (cold; warm) "
        "| workers' CPU, cold sweep [s] | load (start, end of the cold sweep) |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(res["rounds"]):
        warm = ", ".join(f3(w["wall_s"]) for w in r["dask_warm"])
        spread = "; ".join(
            [str(r["dask_cold"]["stream"]["tasks_per_worker"])]
            + [", ".join(str(w["stream"]["tasks_per_worker"]) for w in r["dask_warm"])]
        )
        cpu = ", ".join(f"{v:.1f}" for v in r["dask_cold"]["worker_cpu_s"].values())
        one = f3(r["single"]["wall_s"]) if "single" in r else "-"
        lines.append(
            f"| {i + 1} | {one} | {f3(r['single1']['wall_s'])} | {r['cluster_start_s']:.2f} | "
            f"{r['dask_cold']['wall_s']:.2f} | {warm} | {spread} | {cpu} | "
            f"{r['dask_cold']['load'][0][0]}, {r['dask_cold']['load'][1][0]} |"
        )
    lw, fw = res["lost_worker"], res["fresh_workers_cache_on_disk"]
    lines.append("")
    if "ratio_warm_best" in s:
        lines += [
            f"- Warm: Dask best {f3(s['dask_warm_best_s'])} s against {f3(s['single_warm_best_s'])} "
            f"s in one process (**{s['ratio_warm_best']}x**; medians {s['ratio_warm_median']}x); "
            f"against one device on the same regions {s['ratio_warm_vs_1device']}x.",
            f"- Cold: Dask {min(s['dask_cold_s']):.1f}-{max(s['dask_cold_s']):.1f} s against "
            f"{s['single_cold_s']:.1f} s in one process ({s['ratio_cold']}x, best); each worker's "
            f"first region {', '.join(f'{x:.1f}' for x in s['cold_first_task_s'])} s (import, "
            f"unpickle, compile), after {min(s['cluster_start_s']):.1f}-"
            f"{max(s['cluster_start_s']):.1f} s to start the cluster.",
            f"- Per start: one process {s['single_ns_per_start']} ns wall "
            f"({s['single_core_us_per_start']} core-us); one device {s['single1_core_us_per_start']} "
            f"core-us; Dask warm {s['dask_ns_per_start']} ns wall "
            f"({s['dask_worker_core_us_per_start']} worker-core-us), inside the tasks "
            f"{s['task_compute_core_us_per_start']} core-us.",
        ]
    lines += [
        f"- Warm tasks took {s['warm_later_task_s']} s (min, median, max); Dask's overhead "
        f"{s['overhead_per_task_s'] * 1e3:.0f} ms per task (warm wall time beyond the tasks' "
        "compute / workers, per task).",
        f"- Lost worker: pid {lw['killed_pid']} killed {lw['killed_at_s']} s into a cold sweep "
        f"into a zarr store, working on regions {lw['regions_on_it']}, which then ran on "
        f"{lw['lost_regions_ran_on']} (it was {lw['killed_worker']}; the workers after, by pid: "
        f"{lw['pids_after']}); the sweep took {lw['wall_s']:.1f} s, tasks per worker "
        f"{lw['stream']['tasks_per_worker']}; the store read back is identical.",
        f"- Fresh workers, the compile cache on disk: {fw['wall_s']:.2f} s (first regions "
        f"{', '.join(f'{x:.2f}' for x in fw['stream']['first_task_s'])} s).",
        "- Every Dask result: counts, outcome array and every dataset variable identical to one "
        "process with one device on the same regions; counts and outcomes identical to the "
        "default one-process sweep, end times and states to rounding: "
        f"{res.get('single1_vs_single', {}).get('other_variables_differing')} "
        "(values differing, largest absolute difference).",
        "",
        "Store size of the panel (zarr, the library's default compression):",
        "",
        "| what | how | bytes | files | bytes per start | uncompressed bytes per start |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for k, v in res["store"].items():
        lines.append(
            f"| {k} | {v['how']} | {v['bytes']:,} | {v['files']} | {v['bytes_per_start']} | "
            f"{v['raw_bytes_per_start']} |"
        )
    lines += [
        "",
        "Projection (assumptions in benchmarks/RESULTS.md; est.: a worker's first region cold "
        "(CPU) + waves x (a region's compute + Dask's overhead per task)):",
        "",
        "| starts | chunk_size | regions | node | machines | workers | regions per worker "
        "| est. time [s] | client floor, basin [s] | store: outcome / basin / solution [GB] "
        "| uncompressed [GB] |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for p in res["projection"]:
        lines.append(
            f"| {p['starts']} | {p['chunk_size']:,} | {p['regions']:,} | {p['node']} | "
            f"{p['machines']} | {p['workers']} | {p['regions_per_worker']} | {p['est_s']:,} | "
            f"{p['client_floor_s']} | "
            f"{p['store_outcome_GB']} / {p['store_basin_GB']} / {p['store_solution_GB']} | "
            f"{p['raw_outcome_GB']} / {p['raw_basin_GB']} / {p['raw_solution_GB']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
