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


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        ) as cluster,
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
    assert len(ran) == n_regions - kept, (len(ran), kept)  # only the regions not kept
    assert len(_records(store)) == n_regions
    _same(res, single)


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
