"""Sweeps on a Dask cluster (rollax.sweep(client=...)): a LocalCluster of 2 worker processes.

The Fig. 11 map at 72 x 48 gives the single process's dataset (outcomes and counts identical,
end times within the placement bound the README states, 1e-9 s); a worker killed in mid-sweep
(its process, by pid) and the sweep still completes with that dataset; an interrupted
distributed sweep resumes from its store. One cluster serves the module (its workers compile
the kernel once).
"""

import glob
import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from rollax._drivers._chunks import SweepInterrupted  # noqa: E402
from rollax._drivers._store import region_layout  # noqa: E402
from rollax.analysis.basin import Axis, basin_map  # noqa: E402
from rollax.models.rim import Rim  # noqa: E402

RIM = Rim()
FIG11 = dict(x=Axis("beta", 0.8, 1.8, 72), y=Axis("omega1", -20.0, 20.0, 48), progress=False)
CHUNK = 288  # 12 regions of 6 x 48 starts
PLACEMENT = 1e-9  # s: the README's bound on end times across placements (rtol = 1e-9)


def _cluster():
    """A LocalCluster of 2 worker processes with one thread each."""
    return distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )


@pytest.fixture(scope="module")
def client():
    # The tests kill workers. 15 s (`lost-worker-timeout`) after a worker is lost, the cluster
    # closes its nanny when no worker of that name is registered at that instant. A second
    # kill of a same-named worker about 15 s after the first then lost the nanny and its
    # replacement (CI, stop 76). Reproduced without rollax: kill name 0, and kill it again
    # at 14.8 s. A long timeout leaves the replacement to the nanny.
    import dask

    with (
        dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"}),
        _cluster() as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def single():
    return basin_map(RIM, chunk_size=CHUNK, **FIG11)


def _same(a, b):
    assert a.counts() == b.counts()
    np.testing.assert_array_equal(a.outcome, b.outcome)
    np.testing.assert_array_equal(a.recontact, b.recontact)
    assert np.max(np.abs(a.t_end - b.t_end)) <= PLACEMENT
    ok = np.isfinite(a.period)
    np.testing.assert_array_equal(ok, np.isfinite(b.period))
    assert np.max(np.abs(a.period[ok] - b.period[ok])) <= 2 * PLACEMENT


def test_the_fig11_map_on_two_workers_is_the_single_process_map(client, single, tmp_path):
    res = basin_map(RIM, chunk_size=CHUNK, client=client, store=tmp_path / "m.zarr", **FIG11)
    _same(res, single)
    # both workers took regions (each holds the sweep's computation it unpickled)
    assert sorted(client.run(_loaded).values()) == [1, 1]
    ds = res.to_dataset()
    assert ds["outcome"].dims == ("beta", "omega1") and ds["t_end"].attrs["units"] == "s"


def _loaded():
    from rollax._drivers._chunks import _REMOTE

    return len(_REMOTE)


def _records(store):
    return glob.glob(os.path.join(store, "_rollax", "records", "c", "*", "*"))


def _when(cond, act, timeout=240.0):
    """Run ``act`` in a thread as soon as ``cond()`` holds."""

    def watch():
        t0 = time.monotonic()
        while not cond():
            if time.monotonic() - t0 > timeout:
                return
            time.sleep(0.002)
        act()

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    return th


def test_a_worker_killed_mid_sweep_and_the_sweep_completes(client, single, tmp_path):
    store = str(tmp_path / "k.zarr")
    pids = client.run(os.getpid)
    addr, victim = sorted(pids.items())[0]
    killed = {}

    def kill():
        killed["at"] = len(_records(store))
        os.kill(victim, signal.SIGKILL)

    def busy():  # the victim holds a region's task
        held = client.processing(workers=[addr]).get(addr, ())
        return any("rollax-region" in str(k) for k in held)

    th = _when(busy, kill)
    # 36 regions of 2 x 48 starts: the victim is sure to hold some
    res = basin_map(RIM, chunk_size=96, client=client, store=store, **FIG11)
    th.join(5)
    n_regions = len(region_layout((72, 48), 96)[1])
    assert 0 <= killed.get("at", -1) < n_regions, killed  # killed in mid-sweep
    _same(res, single)
    assert victim not in client.run(os.getpid).values()  # that process is gone
    client.wait_for_workers(2, timeout=120)  # the nanny's replacement, for the next test


def test_a_worker_killed_while_it_writes_a_region(client, single, tmp_path):
    """The worker that writes region 3 dies (SIGKILL, by its own pid) after the region's data
    and before its record: Dask runs the region again elsewhere, which writes it whole; every
    region of the store then verifies, and the map is the single process's."""
    store = str(tmp_path / "w.zarr")
    marker = str(tmp_path / "killed")

    def arm(marker=marker):  # (nested: sent to the workers by value)
        import os
        import signal

        from rollax._drivers import _store

        cls = _store.RegionStore
        if getattr(cls, "_armed", False):
            return
        orig = cls.save

        def save(self, i, part):
            if i == 3 and not os.path.exists(marker):
                for k in list(part)[:2]:  # a part of the region's data, no record
                    self._write(i, k, part[k])
                with open(marker, "w") as f:
                    f.write(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
            return orig(self, i, part)

        cls._orig_save, cls.save, cls._armed = orig, save, True

    client.wait_for_workers(2, timeout=120)
    client.run(arm)
    try:
        res = basin_map(RIM, chunk_size=CHUNK, client=client, store=store, **FIG11)
    finally:
        client.wait_for_workers(2, timeout=120)  # the nanny's replacement
        client.run(_disarm)
    victim = int(open(marker).read())
    assert victim not in client.run(os.getpid).values()  # that process died writing
    _same(res, single)
    from rollax._drivers._store import RegionStore

    layout = region_layout((72, 48), CHUNK)[1]
    rs = RegionStore.attach(store, "", (72, 48), CHUNK)
    rs.key = __import__("zarr").open_group(store, mode="r").attrs["rollax_store"]["key"]
    assert all(rs.load(i)[1] == "" for i in range(len(layout)))  # every region whole


def _disarm():
    from rollax._drivers import _store

    cls = _store.RegionStore
    if getattr(cls, "_armed", False):
        cls.save, cls._armed = cls._orig_save, False  # (the class's own method again)


def test_a_sweep_into_a_store_returns_lazily_what_the_workers_wrote(client, single, tmp_path):
    """The result of a sweep into a store reads the store (dask arrays): the counts are the
    workers' tallies, per-axis counts stream through it, and the client received no region's
    results (each task returned its tallies only)."""
    import rollax
    from rollax.systems import RimRolling

    store = tmp_path / "lazy.zarr"
    axes = [rollax.Axis("beta", 0.8, 1.8, 72), rollax.Axis("omega1", -20.0, 20.0, 48)]
    y0 = {"omega2": 35.0, "omega3": 10.0}
    kw = dict(y0=y0, t1=60.0, chunk_size=CHUNK, keep_solution=False, progress=False, lazy=True)
    with distributed.get_task_stream(client) as stream:
        res = rollax.sweep(RimRolling(RIM, w1_target=2), axes, client=client, store=store, **kw)
    assert hasattr(res.outcome, "dask") and hasattr(res.dataset["outcome"].data, "dask")
    np.testing.assert_array_equal(np.asarray(res.outcome), single.outcome)
    counts = res.counts()
    assert counts == {k: v for k, v in single.counts().items() if k in counts}
    assert sum(counts.values()) == 72 * 48
    by = res.counts(by="beta")
    assert by.dims == ("beta", "outcome") and by.sum().item() == 72 * 48
    for k, name in enumerate(by["outcome"].values):
        np.testing.assert_array_equal(by.sel(outcome=name).values, (single.outcome == k).sum(1))
    assert res.work["computed"] == len(region_layout((72, 48), CHUNK)[1])
    assert sum(w["regions"] for w in res.work["workers"].values()) == res.work["computed"]
    # what came back from each region's task: its tallies, not its results
    sizes = [t.get("nbytes", 0) for t in stream.data if "rollax-region" in str(t["key"])]
    assert sizes and max(sizes) < 4096, sizes
    again = rollax.sweep(RimRolling(RIM, w1_target=2), axes, client=client, store=store, **kw)
    assert again.work["loaded"] == res.work["computed"] and again.work["computed"] == 0
    assert again.counts() == counts


def test_an_interrupted_distributed_sweep_resumes_from_its_store(client, single, tmp_path):
    store = str(tmp_path / "i.zarr")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        th = _when(lambda: len(_records(store)) >= 2, lambda: os.kill(os.getpid(), signal.SIGINT))
        with pytest.raises(SweepInterrupted) as err:
            basin_map(RIM, chunk_size=CHUNK, client=client, store=store, **FIG11)
        th.join(5)
    finally:
        signal.signal(signal.SIGINT, old)
    assert "rerun the same command to resume" in str(err.value)
    kept = len(_records(store))
    n_regions = len(region_layout((72, 48), CHUNK)[1])
    assert 2 <= kept < n_regions, kept
    with distributed.get_task_stream(client) as stream:
        res = basin_map(RIM, chunk_size=CHUNK, client=client, store=store, **FIG11)
    ran = {str(t["key"]) for t in stream.data if "rollax-region" in str(t["key"])}
    # only the regions not kept are computed (a task already running at the interrupt may
    # finish and write its region after it: the workers write the store, so more may be kept)
    assert len(ran) == res.work["computed"] <= n_regions - kept, (len(ran), kept, res.work)
    assert res.work["loaded"] + res.work["computed"] == n_regions
    assert len(_records(store)) == n_regions
    _same(res, single)


def test_workers_write_an_object_store_they_reach_and_one_they_cannot_is_refused(client, tmp_path):
    import jax

    url = f"memory://rollax-tests/{tmp_path.name}/m.zarr"  # (an object store's stand-in)
    small = dict(x=Axis("beta", 0.8, 1.8, 12), y=Axis("omega1", -20.0, 20.0, 48), progress=False)
    # worker processes do not see this process's memory: refused before any region, one line
    with pytest.raises(ValueError, match=r"^store = 'memory://.*' is not visible on worker"):
        basin_map(RIM, chunk_size=CHUNK, client=client, store=url, **small)
    # worker threads of this process do: each writes its regions there through fsspec
    here = basin_map(RIM, chunk_size=CHUNK, **small)
    before = jax.config.jax_persistent_cache_min_compile_time_secs
    try:
        with (
            distributed.LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=False,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            ) as cluster,
            distributed.Client(cluster) as threads,
        ):
            res = basin_map(RIM, chunk_size=CHUNK, client=threads, store=url, **small)
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before)
    _same(res, here)
    assert res.work["computed"] == 2  # (worker threads: one process, one pid)


def test_the_command_runs_on_a_scheduler_and_refuses_a_bad_one(client, tmp_path, capsys):
    from rollax.cli import main

    addr = client.scheduler.address
    out = tmp_path / "cli"
    args = ["basin", "--grid", "12", "8", "--no-progress", "--out", str(out)]
    assert main([*args, "--scheduler", addr]) == 0
    here = basin_map(RIM, x=Axis("beta", 0.8, 1.8, 12), y=Axis("omega1", -20.0, 20.0, 8))
    import xarray as xr

    with xr.open_zarr(out / "basin.zarr") as ds:
        np.testing.assert_array_equal(ds["outcome"].values, here.outcome)
        assert "--scheduler" in ds.attrs["command"]
    capsys.readouterr()
    assert main([*args, "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scheduler = 'tcp://127.0.0.1:9'" in err[0], err
    assert main([*args, "--workers", "0"]) == 2  # the option's range
    assert main([*args, "--workers", "2", "--scheduler", addr]) == 2  # one or the other


@pytest.mark.slow
def test_a_fresh_cluster_compiles_nothing_that_the_cache_holds(tmp_path):
    """Two clusters in turn, one compile cache (passed by the client to its workers): the
    second cluster's workers load every program of the sweep (compile counts from JAX's
    monitoring events, as each region reports them)."""
    import jax

    from rollax._core._config import _set_cache

    before = (jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir)
    _set_cache(jax, str(tmp_path / "cache"), -1)
    try:
        works = []
        for k in range(2):
            with _cluster() as cluster, distributed.Client(cluster) as c:
                m = basin_map(
                    RIM, chunk_size=CHUNK, client=c, store=tmp_path / f"{k}.zarr", **FIG11
                )
                works.append(m.work)
        first, second = (w["workers"] for w in works)
        assert sum(w["compiles"] for w in first.values()) >= 1, first
        assert all(w["compiles"] == 0 and w["cache_hits"] >= 1 for w in second.values()), second
    finally:
        _set_cache(jax, before[1] if before[0] else None, -1)
