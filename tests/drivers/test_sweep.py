"""rollax.sweep: grids over state components and parameters, chunked and resumable."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import rollax

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from bouncing_ball import BouncingBall  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import xarray as xr  # noqa: E402


class Clock(rollax.AbstractSystem):
    """t' = 1 (a state named like the Solution field ``t``)."""

    state_names = ("t",)

    def vector_field(self, t, y, mode):
        return jnp.ones_like(y)


class Decay(rollax.AbstractSystem):
    """y' = -y until y = c (a state named like the Solution field ``y``)."""

    c: jax.Array = rollax.parameter(0.3)
    state_names = ("y",)
    events = (rollax.boundary("c"),)

    def vector_field(self, t, y, mode):
        return -y

    def event_values(self, t, y, mode):
        return y - self.c


TOL = dict(rtol=1e-10, atol=1e-10, lanes=16)


def test_grid_over_a_state_component_and_a_parameter(tmp_path):
    ball = BouncingBall(n_bounces=2)
    axes = [rollax.Axis("z", 0.5, 2.0, 7), rollax.Axis("e", 0.3, 0.9, 5)]
    res = rollax.sweep(ball, axes, y0={"v": 0.0}, t1=20.0, chunk_size=16, progress=False, **TOL)
    assert res.outcome.shape == (7, 5) and res.solution["t"].shape == (7, 5)
    assert res.counts()["done"] == 35
    z, e = np.meshgrid(axes[0].values, axes[1].values, indexing="ij")
    t2 = np.sqrt(2 * z / 9.81) * (1 + 2 * e)  # second impact from rest
    assert np.max(np.abs(res.solution["t"] - t2)) < 1e-9
    # the chunking does not change a result, and a rerun into the same directory resumes
    one = rollax.sweep(ball, axes, y0={"v": 0.0}, t1=20.0, chunk_size=64, progress=False, **TOL)
    np.testing.assert_array_equal(one.solution["t"], res.solution["t"])
    store = tmp_path / "ball.zarr"
    first = rollax.sweep(
        ball, axes, y0={"v": 0.0}, t1=20.0, chunk_size=16, progress=False, store=store, **TOL
    )
    again = rollax.sweep(
        ball, axes, y0={"v": 0.0}, t1=20.0, chunk_size=16, progress=False, store=store, **TOL
    )
    np.testing.assert_array_equal(first.solution["t"], again.solution["t"])
    with xr.open_zarr(store) as ds:
        np.testing.assert_array_equal(ds["t"].values, res.solution["t"])
    for name in ("ball.zarr", "ball.nc"):
        path = res.save(tmp_path / "saved" / name)
        with xr.open_zarr(path) if name.endswith(".zarr") else xr.open_dataset(path) as saved:
            assert saved["outcome"].dims == ("z", "e") and saved["outcome"].shape == (7, 5)
            np.testing.assert_array_equal(saved["e"].values, axes[1].values)
            assert saved["z"].attrs["units"] == "m" and saved["y_v"].attrs["units"] == "m/s"
    # an axis named like a Solution field (the state "t" of a system) is saved apart from it
    decay = rollax.sweep(Clock(), [rollax.Axis("t", 1.0, 2.0, 3)], t1=10.0, progress=False)
    with xr.open_dataset(decay.save(tmp_path / "decay.nc")) as saved:
        np.testing.assert_array_equal(saved["t"].values, [1.0, 1.5, 2.0])
        assert saved["solution_t"].shape == (3,) and saved["y_t"].shape == (3,)
    np.testing.assert_allclose(decay.solution["y"][:, 0], [11.0, 11.5, 12.0])


def test_per_start_parameters_equal_one_by_one_runs():
    es = np.linspace(0.2, 0.95, 6)
    y0s = np.tile([1.0, 0.0], (6, 1))
    batch = rollax.solve_ensemble(BouncingBall(e=es, n_bounces=3), y0s, 0.0, 20.0, **TOL)
    for i, e in enumerate(es):
        one = rollax.solve_ensemble(BouncingBall(e=e, n_bounces=3), y0s[:1], 0.0, 20.0, **TOL)
        assert abs(batch.t[i] - one.t[0]) < 1e-12
    T0 = math.sqrt(2 / 9.81)
    np.testing.assert_allclose(batch.t, T0 * (1 + 2 * es + 2 * es**2), atol=1e-9)


@pytest.mark.parametrize(
    "axes, y0, match",
    [
        ([rollax.Axis("w", 0.0, 1.0, 3)], {"v": 0.0}, "axis name = 'w'"),
        ([rollax.Axis("z", 0.0, 1.0, 3), rollax.Axis("z", 0.0, 1.0, 3)], {"v": 0.0}, "twice"),
        ([rollax.Axis("z", 0.5, 1.0, 3)], {}, "y0 needs values for \\['v'\\]"),
        ([rollax.Axis("z", 0.5, 1.0, 3)], {"v": 0.0, "q": 1.0}, "not state components"),
        ([rollax.Axis("z", 0.5, 1.0, 3)], [0.0], "y0 has shape"),
    ],
)
def test_bad_sweeps_get_clear_errors(axes, y0, match):
    with pytest.raises(ValueError, match=match):
        rollax.sweep(BouncingBall(), axes, y0=y0, t1=1.0, progress=False)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(name="beta", lo=1.0, hi=0.0, n=3), "lo < hi"),
        (dict(name="beta", lo=0.0, hi=math.nan, n=3), "finite"),
        (dict(name="beta", lo=0.0, hi=1.0, n=1), "grid size"),
        (dict(name="", lo=0.0, hi=1.0, n=3), "non-empty"),
    ],
)
def test_bad_axes(kw, match):
    with pytest.raises(ValueError, match=match):
        rollax.Axis(**kw)


def _t_at_impact(system, sol):
    return {"t_impact": sol.t}


@pytest.mark.parametrize("backend", ["queue", "fused"])
def test_keep_solution_false_keeps_the_outcome_and_summary_only(backend):
    # the same outcome and summary as a sweep that keeps everything, on both backends (the
    # fused path leaves its results on the device through the classification); several
    # restitutions, heights and chunkings
    ball = BouncingBall(n_bounces=2)
    rng = np.random.default_rng(36)
    for _ in range(2 if backend == "queue" else 1):  # (the fused path interpreted: slow)
        lo = float(rng.uniform(0.3, 1.0))
        axes = [
            rollax.Axis("z", lo, lo + float(rng.uniform(0.5, 2.0)), 5),
            rollax.Axis("e", 0.3, 0.9, int(rng.integers(2, 5))),
        ]
        kw = dict(
            y0={"v": 0.0}, t1=20.0, progress=False, summary=_t_at_impact, backend=backend, **TOL
        )
        full = rollax.sweep(ball, axes, chunk_size=64, **kw)
        lean = rollax.sweep(
            ball, axes, chunk_size=int(rng.integers(3, 20)), keep_solution=False, **kw
        )
        assert lean.solution == {}
        np.testing.assert_array_equal(lean.outcome, full.outcome)
        np.testing.assert_array_equal(lean.summary["t_impact"], full.summary["t_impact"])
        np.testing.assert_array_equal(full.summary["t_impact"], full.solution["t"])
        assert isinstance(lean.summary["t_impact"], np.ndarray)  # on the host, as documented
        with pytest.raises(ValueError, match="keep_solution=False"):
            lean.as_solution()
        with pytest.raises(ValueError, match="keep_solution=False"):
            lean.status_name


@pytest.mark.parametrize(
    "bad, match",
    [
        (
            dict(keep_solution="no"),
            r"keep_solution = 'no' is not allowed: it must be True or False",
        ),
        (
            dict(keep_solution=False, save_events=3),
            r"save_events = 3 is not allowed with "
            r"keep_solution=False",
        ),
    ],
)
def test_keep_solution_refuses_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        rollax.sweep(
            BouncingBall(),
            [rollax.Axis("z", 0.5, 2.0, 3)],
            y0={"v": 0.0},
            t1=5.0,
            progress=False,
            **bad,
        )


class Still(rollax.AbstractSystem):
    """y' = 0: a run ends where it started (the grid's points, read back)."""

    k: jax.Array = rollax.parameter(1.0)
    state_names = ("a", "b", "c")

    def vector_field(self, t, y, mode):
        return 0.0 * y * self.k


@pytest.mark.parametrize("backend", ["queue", "fused"])
def test_grid_points_are_row_major_in_any_chunking(backend, monkeypatch):
    # random grids of 1-3 axes (state components, spacing of every kind), random chunk sizes:
    # each run starts at its grid point (the first axis slowest), as numpy's unravel_index;
    # the fused backend builds the grid on the device (sweep._grid_rows), the queue in NumPy
    from rollax._integrate import _fused

    monkeypatch.setattr(_fused, "CPU_MODE", "vmap")  # (the kernel's own tests interpret it)
    rng = np.random.default_rng(7)
    for _ in range(6):
        names = list(rng.permutation(["a", "b", "c"])[: rng.integers(1, 4)])
        axes = []
        for nm in names:
            kind = rng.integers(3)
            n = int(rng.integers(2, 6))
            axes.append(
                rollax.Axis.of(nm, rng.normal(size=n))
                if kind == 0
                else rollax.Axis(nm, 0.1, 2.0, n, "log" if kind == 1 else "linear")
            )
        y0 = {nm: float(rng.normal()) for nm in "abc" if nm not in names}
        res = rollax.sweep(
            Still(),
            axes,
            y0=y0,
            t1=1.0,
            chunk_size=int(rng.integers(1, 40)),
            progress=False,
            backend=backend,
            **TOL,
        )
        shape = tuple(a.n for a in axes)
        for flat in range(int(np.prod(shape))):
            ix = np.unravel_index(flat, shape)
            y = res.solution["y"][ix]
            for k, a in enumerate(axes):
                assert y["abc".index(a.name)] == a.values[ix[k]]
            for nm, v in y0.items():
                assert y["abc".index(nm)] == v


def test_the_device_grid_equals_numpy_s_in_every_chunk():
    # rows lo:hi of the device-built grid against np.unravel_index, random shapes and ranges
    from rollax._drivers._sweep import _grid_rows

    rng = np.random.default_rng(37)
    for _ in range(20):
        shape = tuple(int(k) for k in rng.integers(1, 9, size=rng.integers(1, 5)))
        values = tuple(rng.normal(size=k) for k in shape)
        n = int(np.prod(shape))
        lo = int(rng.integers(0, n))
        hi = int(rng.integers(lo + 1, n + 1))
        got = np.asarray(
            _grid_rows(np.int64(lo), tuple(map(jax.numpy.asarray, values)), shape, hi - lo)
        )
        ix = np.unravel_index(np.arange(lo, hi), shape)
        want = np.stack([values[k][ix[k]] for k in range(len(shape))], axis=1)
        np.testing.assert_array_equal(got, want)


def test_a_sweep_saves_states_at_given_times(tmp_path):
    # the states at ts of every grid point, equal to the closed form of the falling ball, kept
    # with the chunks (resume) and with the solution; and refused without the solution
    ball = BouncingBall(n_bounces=2)
    axes = [rollax.Axis("z", 0.5, 2.0, 4), rollax.Axis("e", 0.3, 0.9, 3)]
    rng = np.random.default_rng(8)
    ts = np.sort(rng.uniform(0.0, 0.3, 5))  # before the first impact (z >= 0.5 m: t > 0.31 s)
    kw = dict(y0={"v": 0.0}, t1=20.0, chunk_size=5, progress=False, ts=ts, **TOL)
    res = rollax.sweep(ball, axes, store=tmp_path / "s.zarr", **kw)
    assert res.solution["ys"].shape == (4, 3, 5, 2)
    z = axes[0].values[:, None, None]
    np.testing.assert_allclose(
        res.solution["ys"][..., 0], np.broadcast_to(z - 9.81 * ts**2 / 2, (4, 3, 5)), atol=1e-9
    )
    np.testing.assert_allclose(
        res.solution["ys"][..., 1], np.broadcast_to(-9.81 * ts, (4, 3, 5)), atol=1e-9
    )
    again = rollax.sweep(ball, axes, store=tmp_path / "s.zarr", **kw)  # from the store
    np.testing.assert_array_equal(again.solution["ys"], res.solution["ys"])
    assert res.as_solution().ys.shape == (4, 3, 5, 2)
    with pytest.warns(rollax.StoreWarning, match="holds another sweep") as rec:
        other = rollax.sweep(ball, axes, store=tmp_path / "s.zarr", **{**kw, "ts": ts + 0.01})
    # the options that differ, at this line (issue 56: it named the key, at rollax's _sweep.py)
    (w,) = [w for w in rec if w.category is rollax.StoreWarning]
    assert f"ts [{ts[0]:.6g}, " in str(w.message) and "key" not in str(w.message)
    assert w.filename == __file__, w.filename
    assert not np.array_equal(other.solution["ys"], res.solution["ys"])  # not the old regions
    with pytest.raises(ValueError, match="ts is not allowed with keep_solution=False"):
        rollax.sweep(ball, axes, keep_solution=False, **kw)


def _drop(height, speed, lift=0.0):
    """A ball thrown up at ``speed`` from ``height`` (a start function over two axes)."""
    return jnp.stack([height + lift, speed])


_drop.units = {"height": "m", "speed": "m/s"}


def test_a_sweep_over_the_arguments_of_a_start_function(tmp_path):
    import functools

    ball = BouncingBall(n_bounces=1)
    axes = [rollax.Axis("height", 0.5, 2.0, 5), rollax.Axis("speed", -1.0, 3.0, 4)]
    start = functools.partial(_drop, lift=0.25)
    res = rollax.sweep(ball, axes, start=start, t1=20.0, progress=False, **TOL)
    H, V = np.meshgrid(axes[0].values, axes[1].values, indexing="ij")
    # the first impact's time in closed form: z = h + lift + v t - g t^2 / 2 = 0
    t1 = (V + np.sqrt(V**2 + 2 * 9.81 * (H + 0.25))) / 9.81
    np.testing.assert_allclose(res.solution["t"], t1, atol=1e-9)
    ds = res.dataset
    assert ds["height"].attrs["units"] == "m" and ds["speed"].attrs["units"] == "m/s"
    assert "start argument" in ds["speed"].attrs["long_name"]
    assert "lift=0.25" in ds.attrs["settings"]
    # another fixed argument is another sweep: not resumed from the first one's store
    store = tmp_path / "s.zarr"
    rollax.sweep(ball, axes, start=start, t1=20.0, progress=False, store=store, **TOL)
    with pytest.warns(rollax.StoreWarning, match="holds another sweep"):
        other = rollax.sweep(
            ball,
            axes,
            start=functools.partial(_drop, lift=0.5),
            t1=20.0,
            progress=False,
            store=store,
            **TOL,
        )
    assert np.all(other.solution["t"] > res.solution["t"])
    # the whole state comes from start: y0 or a state axis besides it is refused
    with pytest.raises(ValueError, match="with start"):
        rollax.sweep(ball, axes, start=start, y0={"v": 0.0}, t1=1.0, progress=False)
    with pytest.raises(ValueError, match="not a state component or scalar parameter"):
        rollax.sweep(ball, [rollax.Axis("width", 0, 1, 2)], start=start, t1=1.0, progress=False)


def test_a_bad_solver_option_leaves_a_finished_store_alone(tmp_path):
    # found by a new-user review: `rollax basin ... --devices 99` into the store of a finished
    # map replaced it (a warning) and only then failed in the first region's solve
    import zarr

    ball = BouncingBall(n_bounces=2)
    axes = [rollax.Axis("z", 0.5, 2.0, 4), rollax.Axis("e", 0.3, 0.9, 3)]
    store = tmp_path / "ball.zarr"
    kw = dict(y0={"v": 0.0}, t1=20.0, chunk_size=5, progress=False, store=store)
    first = rollax.sweep(ball, axes, **kw, **TOL)
    before = sorted(p.name for p in store.iterdir())
    # other sweeps (other t1, so that the store would be replaced), each with one bad option
    bad = [
        dict(devices=jax.local_device_count() + 1),
        dict(devices=0),
        dict(lanes=3),
        dict(rtol=-1.0),
        dict(max_steps=0),
        dict(backend="gpu"),
        dict(n_samples=0),
        dict(rtl=1e-9),  # a misspelt option
    ]
    for opt in bad:
        with pytest.raises(ValueError, match=f"{next(iter(opt))} = "):
            rollax.sweep(ball, axes, **{**kw, "t1": 30.0}, **{**TOL, **opt})
        assert sorted(p.name for p in store.iterdir()) == before, opt
    again = xr.open_zarr(store)
    np.testing.assert_array_equal(again["t"].values, first.solution["t"])
    assert "outcome" in again and zarr.open_group(str(store), mode="r").attrs["rollax_store"]


def test_other_lanes_or_devices_resume_the_store(tmp_path, monkeypatch):
    # where the starts run is not part of the sweep's identity (the placement bound, README)
    from rollax._integrate import _ensemble

    ball = BouncingBall(n_bounces=2)
    axes = [rollax.Axis("z", 0.5, 2.0, 4), rollax.Axis("e", 0.3, 0.9, 3)]
    store = tmp_path / "ball.zarr"
    kw = dict(y0={"v": 0.0}, t1=20.0, chunk_size=5, progress=False, store=store)
    first = rollax.sweep(ball, axes, rtol=1e-10, atol=1e-10, lanes=16, devices=1, **kw)
    calls = []
    real = _ensemble.solve_ensemble
    monkeypatch.setattr(
        _ensemble, "solve_ensemble", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    import warnings

    for opt in (dict(lanes=32), dict(devices=jax.local_device_count()), {}):
        with warnings.catch_warnings():
            warnings.simplefilter("error", rollax.StoreWarning)
            res = rollax.sweep(ball, axes, rtol=1e-10, atol=1e-10, **kw, **opt)
        np.testing.assert_array_equal(res.solution["t"], first.solution["t"])
    assert not calls, "a region was computed again"
    # a setting that changes the results is another sweep
    with pytest.warns(rollax.StoreWarning, match="holds another sweep"):
        rollax.sweep(ball, axes, rtol=1e-9, atol=1e-10, **kw)
    assert calls


@pytest.mark.parametrize("seed", range(2))
def test_a_sweep_into_an_object_store_url_is_the_sweep_in_memory_and_resumes(seed):
    # an fsspec URL (memory://: an object store's stand-in) as the store: written region by
    # region, read back lazily, and a rerun verifies every region there and computes none
    rng = np.random.default_rng(seed)
    ball = BouncingBall(n_bounces=2)
    z0 = rng.uniform(0.3, 1.0)
    axes = [
        rollax.Axis("z", z0, z0 + rng.uniform(0.5, 1.5), int(rng.integers(3, 8))),
        rollax.Axis("e", 0.3, rng.uniform(0.5, 0.9), int(rng.integers(2, 6))),
    ]
    kw = dict(y0={"v": 0.0}, t1=20.0, chunk_size=16, progress=False, **TOL)
    mem = rollax.sweep(ball, axes, **kw)
    url = f"memory://rollax-tests/{seed}-{rng.integers(1 << 30)}/ball.zarr"
    first = rollax.sweep(ball, axes, store=url, lazy=True, **kw)
    assert hasattr(first.dataset["outcome"].data, "dask")  # read from the store where used
    np.testing.assert_array_equal(first.solution["t"], mem.solution["t"])
    np.testing.assert_array_equal(first.outcome, mem.outcome)
    assert first.counts() == mem.counts()
    from rollax._drivers._store import region_layout

    n_regions = len(region_layout((axes[0].n, axes[1].n), 16)[1])
    assert first.work["computed"] == n_regions
    again = rollax.sweep(ball, axes, store=url, **kw)
    assert again.work["computed"] == 0 and again.work["loaded"] == n_regions
    np.testing.assert_array_equal(again.solution["t"], mem.solution["t"])
    with xr.open_zarr(url) as ds:
        np.testing.assert_array_equal(ds["t"].values, mem.solution["t"])


def test_the_summary_s_size_is_traced_once_per_system_shape():
    # the bytes per run of a summary are traced abstractly once per summary, system class,
    # static fields and parameter shapes (80 ms of every warm map before: issue 62), and a
    # change of any of them traces again; the size is the summary's own
    from rollax._drivers import _sweep

    traced = []

    def summary(system, sol):
        traced.append(type(system).__name__)
        return {"t": sol.t, "y": sol.y, "n": sol.counts}

    _sweep._SUMMARY_BYTES.clear()
    rng = np.random.default_rng(62)
    for _ in range(3):
        ball = BouncingBall(g=float(rng.uniform(5, 12)), e=float(rng.uniform(0.3, 0.9)))
        size = _sweep._summary_bytes(ball, summary)
        assert size == 8 + 8 * ball.state_dim + 4 * ball.event_set.n
    assert traced == ["BouncingBall"]  # (other parameter values: the same shapes)
    _sweep._summary_bytes(BouncingBall(n_bounces=3), summary)  # another static field
    _sweep._summary_bytes(BouncingBall(e=jnp.full(4, 0.5)), summary)  # another shape
    assert len(traced) == 3
    _sweep._summary_bytes(BouncingBall(), lambda system, sol: {"t": sol.t})
    assert len(traced) == 3  # (another summary: its own trace, not this one's)
