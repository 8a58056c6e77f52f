"""The store of a sweep (rollax._drivers._store): its regions, and a store written, reopened,
replaced and refused. The faults of a store (a region altered, unreadable or stale) are tested
through run_chunked, in test_chunks.py."""

import math
import warnings

import numpy as np
import pytest

import rollax
from rollax._drivers._store import RegionStore, StoreWarning, checksum, region_layout


def _check_layout(shape, chunk_size):
    block, regions = region_layout(shape, chunk_size)
    n = math.prod(shape)
    assert len(block) == len(shape)
    # the block: (1, ..., 1, c, n_{j+1}, ..., n_last) with the first j whose trailing axes fit
    # in chunk_size, and c as large as chunk_size allows
    j = min(k for k in range(len(shape)) if math.prod(shape[k + 1 :]) <= chunk_size)
    inner = math.prod(shape[j + 1 :])
    assert block == (1,) * j + (block[j],) + tuple(shape[j + 1 :]), (shape, chunk_size, block)
    assert 1 <= block[j] <= shape[j] and block[j] * inner <= chunk_size
    assert block[j] == shape[j] or (block[j] + 1) * inner > chunk_size
    grid = np.zeros(shape, int)
    rows = np.arange(n).reshape(shape)  # row-major start numbers
    end = 0
    for lo, hi, index in regions:
        assert lo == end  # the regions follow one another in the row-major order
        end = hi
        assert 1 <= hi - lo <= chunk_size
        assert len(index) == len(shape)
        # one contiguous row-major range: the grid's starts lo:hi, in order
        np.testing.assert_array_equal(rows[index].ravel(), np.arange(lo, hi))
        grid[index] += 1
        # aligned to the block: each slice starts on a block boundary and spans at most a block
        for s, b, m in zip(index, block, shape):
            assert s.step is None and s.start % b == 0
            assert s.stop - s.start == min(b, m - s.start)
    assert end == n
    assert (grid == 1).all()  # the grid, covered exactly once
    return block, regions


@pytest.mark.parametrize(
    "shape, chunk_size, block, n_regions",
    [
        ((53,), 10, (10,), 6),
        ((6, 9), 20, (2, 9), 3),
        ((6, 9), 9, (1, 9), 6),
        ((6, 9), 5, (1, 5), 12),
        ((6, 9), 1000, (6, 9), 1),
        ((2, 3, 4), 5, (1, 1, 4), 6),
        ((2, 3, 4), 12, (1, 3, 4), 2),
        ((1,), 1, (1,), 1),
        ((4, 1, 3), 1, (1, 1, 1), 12),
    ],
)
def test_region_layout_examples(shape, chunk_size, block, n_regions):
    got, regions = _check_layout(shape, chunk_size)
    assert got == block and len(regions) == n_regions


def test_region_layout_on_random_grids():
    # 1 to 4 axes of 1 to 50 points; chunk sizes log-uniform from n / 500 (at most about a
    # thousand regions, to stay quick) to 2 n
    rng = np.random.default_rng(20240611)
    seen = set()
    for _ in range(300):
        shape = tuple(int(s) for s in rng.integers(1, 51, size=rng.integers(1, 5)))
        n = math.prod(shape)
        chunk_size = int(np.exp(rng.uniform(np.log(max(1, n // 500)), np.log(2 * n + 1))))
        block, _ = _check_layout(shape, max(1, chunk_size))
        seen.add((len(shape), sum(b != s for b, s in zip(block, shape))))
    assert len(seen) >= 8  # grids of every rank, cut on several axes


def test_checksum_covers_names_dtypes_shapes_and_bytes():
    a = {"x": np.arange(6.0), "i": np.arange(3)}
    c = checksum(a)
    assert c == checksum({"i": np.arange(3), "x": np.arange(6.0)})  # name order
    assert len(c) == 64
    for other in (
        {"x": np.arange(6.0), "j": np.arange(3)},
        {"x": np.arange(6), "i": np.arange(3)},
        {"x": np.arange(6.0).reshape(2, 3), "i": np.arange(3)},
        {"x": np.arange(6.0) + [0, 0, 0, 0, 0, 1e-12], "i": np.arange(3)},
        {"x": np.arange(6.0)},
    ):
        assert checksum(other) != c


SHAPE, CHUNK = (6, 9), 20  # regions: rows 0:2, 2:4, 4:6 of the grid, 18 starts each


def _open(path, key="k", chunk_size=CHUNK):
    def describe(name, v):
        return (("state",) if v.ndim > 1 else ()), {"long_name": f"the {name}"}

    return RegionStore.open(
        path,
        key,
        SHAPE,
        chunk_size,
        dims=("a", "b"),
        coords={
            "a": (("a",), np.linspace(0.0, 1.0, 6), {"units": "m"}),
            "b": (("b",), np.arange(9.0), {}),
            "state": (("state",), np.array(["x", "v"]), {}),
        },
        attrs={"title": "a test"},
        describe=describe,
    )


def _part(lo, hi):
    i = np.arange(lo, hi)
    return {"y": np.stack([0.5 * i, -1.0 * i], axis=1), "n": i.astype(np.int32)}


def _fill(store):
    for i, (lo, hi, _) in enumerate(store.regions):
        store.save(i, _part(lo, hi))


KINDS = ["path", "file URL", "memory URL"]


def _where(kind, tmp_path, name="store"):
    """A store's location of each kind: a local directory, a ``file://`` URL (that directory)
    and an in-memory fsspec filesystem (``memory://``, an object store's stand-in: no lock)."""
    if kind == "path":
        return tmp_path / name
    if kind == "file URL":
        return f"file://{tmp_path / name}"
    return f"memory://{tmp_path.name}/{name}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_store_round_trips_its_regions(tmp_path, kind):
    path = _where(kind, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a new store, and reopening it: silent
        s = _open(path)
        assert s.block == (2, 9) and [r[:2] for r in s.regions] == [(0, 18), (18, 36), (36, 54)]
        assert s.load(1) == (None, "is missing")
        s.save(1, _part(18, 36))
        s2 = _open(path)  # another run (another process) reopens it
        assert s2.load(0) == (None, "is missing")
        part, why = s2.load(1)
        assert why == ""
        for k, v in _part(18, 36).items():
            assert part[k].dtype == v.dtype
            np.testing.assert_array_equal(part[k], v)
        _fill(s2)
        s3 = _open(path)
        for i, (lo, hi, _) in enumerate(s3.regions):
            part, why = s3.load(i)
            assert why == "" and set(part) == {"y", "n"}
            np.testing.assert_array_equal(part["y"], _part(lo, hi)["y"])
            np.testing.assert_array_equal(part["n"], _part(lo, hi)["n"])

    # the store is the labelled dataset
    import zarr

    g = zarr.open_group(str(path), mode="r")
    assert g["y"].shape == SHAPE + (2,) and g["y"].chunks == (2, 9, 2)
    assert g["n"].shape == SHAPE and g["n"].dtype == np.int32
    assert g["y"].metadata.dimension_names == ("a", "b", "state")
    assert g["y"].attrs["long_name"] == "the y"
    np.testing.assert_array_equal(g["n"][...], np.arange(54).reshape(SHAPE))
    np.testing.assert_array_equal(g["a"][...], np.linspace(0.0, 1.0, 6))
    assert g["a"].attrs["units"] == "m" and g.attrs["title"] == "a test"
    assert g.attrs["rollax_store"]["key"] == "k"


def test_an_existing_empty_directory_is_used_silently(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = _open(tmp_path)
        _fill(s)
        assert _open(tmp_path).load(2)[1] == ""


@pytest.mark.parametrize("kind", KINDS)
def test_a_store_of_another_sweep_is_replaced_with_a_warning(tmp_path, kind):
    path = _where(kind, tmp_path)
    _fill(_open(path, key="old"))
    with pytest.warns(StoreWarning) as rec:
        s = _open(path, key="new")
    (msg,) = [str(w.message) for w in rec if w.category is StoreWarning]
    named = str(path).removeprefix("file://")  # (a file URL is named as its directory)
    assert named in msg and "'old'" in msg and "replacing it" in msg and "\n" not in msg
    assert all(s.load(i) == (None, "is missing") for i in range(len(s.regions)))
    _fill(s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _open(path, key="new").load(0)[1] == ""  # now it is this sweep's
    # another layout of the regions (another chunk size) is another store too
    with pytest.warns(StoreWarning, match="replacing it"):
        s = _open(path, key="new", chunk_size=9)
    assert s.block == (1, 9) and s.load(0) == (None, "is missing")


def test_a_file_as_store_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match=r"^store = .* is a file") as err:
        _open(f)
    assert "\n" not in str(err.value) and str(f) in str(err.value)
    assert f.read_text() == "x"  # untouched


def test_store_warning_is_public():
    assert rollax.StoreWarning is StoreWarning and issubclass(StoreWarning, UserWarning)


def test_a_directory_that_is_not_a_store_is_refused(tmp_path):
    # a results folder given as store by mistake: refused, nothing in it touched or added
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds no rollax sweep store") as err:
        RegionStore.open(folder, "k", (4,), 2)
    assert "\n" not in str(err.value) and "store = " in str(err.value)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    # a zarr group of someone else's: refused too
    import zarr

    zarr.open_group(str(tmp_path / "other.zarr"), mode="w").attrs["x"] = 1
    with pytest.raises(ValueError, match="holds no rollax sweep store"):
        RegionStore.open(tmp_path / "other.zarr", "k", (4,), 2)


# ------------------------------------------------------- what the replacing warning says (issue 56)
def _attrs(t1=20.0, rtol=1e-10, e=0.8, n_bounces=2, y0_v=0.0):
    import json

    return {
        "system": "examples.BouncingBall",
        "parameters": json.dumps({"e": e, "g": 9.81}),
        "static_fields": json.dumps({"n_bounces": n_bounces}),
        "settings": json.dumps(
            {
                "axes": ["a", "b"],
                "y0": {"z": None, "v": y0_v},
                "t0": 0.0,
                "t1": t1,
                "options": {"rtol": rtol, "atol": 1e-10},
            }
        ),
    }


def _open_with(path, key, attrs, a_values):
    return RegionStore.open(
        path,
        key,
        (a_values.size, 9),
        CHUNK,
        dims=("a", "b"),
        coords={"a": (("a",), a_values, {}), "b": (("b",), np.arange(9.0), {})},
        attrs=attrs,
    )


@pytest.mark.parametrize("seed", range(5))
def test_the_replacing_warning_names_the_options_that_differ_at_the_callers_line(tmp_path, seed):
    # a new-user review: the warning named hash keys and internal fields ("its key differ"),
    # and pointed at rollax's _sweep.py instead of the user's line
    rng = np.random.default_rng(seed)
    old = dict(t1=20.0, rtol=1e-10, e=0.8, n_bounces=2, y0_v=0.0)
    changed = {
        k: v
        for k, v in dict(t1=30.0, rtol=1e-8, e=0.9, n_bounces=3, y0_v=-1.0).items()
        if rng.random() < 0.5
    }
    a_old = np.linspace(0.0, 1.0, 6)
    a_new = np.linspace(0.0, 1.0, 4) if seed % 2 else a_old
    if not changed and seed % 2 == 0:
        changed = {"t1": 30.0}
    path = tmp_path / "s.zarr"
    _open_with(path, "old", _attrs(**old), a_old)
    with pytest.warns(StoreWarning) as rec:
        _open_with(path, "new", _attrs(**{**old, **changed}), a_new)  # (the caller's line)
    (w,) = [w for w in rec if w.category is StoreWarning]
    msg = str(w.message)
    assert "\n" not in msg and "holds another sweep" in msg and "key" not in msg, msg
    names = {"t1": "t1", "rtol": "rtol", "e": "e", "n_bounces": "n_bounces", "y0_v": "y0.v"}
    for k, new in changed.items():
        assert f"{names[k]} {old[k]:.6g} -> {new:.6g}" in msg, (k, msg)
    items = msg.split("what differs: ")[1].split("); replacing")[0].split(", ")
    for k in set(old) - set(changed):
        assert not any(i.startswith(f"{names[k]} ") for i in items), (k, msg)
    assert ("axis a: 6 values in [0, 1] -> 4 values in [0, 1]" in msg) == bool(seed % 2), msg
    assert w.filename == __file__, w.filename  # not rollax/_drivers/*.py


@pytest.mark.parametrize("kind", ["file URL", "memory URL"])
def test_a_folder_at_a_url_that_is_not_a_store_is_refused_and_a_damaged_one_replaced(
    tmp_path, kind
):
    import fsspec

    url = _where(kind, tmp_path, "results")
    fs, root = fsspec.core.url_to_fs(url)
    fs.makedirs(root, exist_ok=True)
    fs.pipe(root + "/notes.txt", b"mine")
    with pytest.raises(ValueError, match="holds no rollax sweep store") as err:
        RegionStore.open(url, "k", (4,), 2)
    assert "\n" not in str(err.value) and (url if kind != "file URL" else root) in str(err.value)
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)] == ["notes.txt"]
    # a store whose variable lost its metadata: replaced, the warning naming the file
    url = _where(kind, tmp_path, "s.zarr")
    _fill(_open(url))
    named = fsspec.core.url_to_fs(url)[1] if kind == "file URL" else url  # (a file URL: its path)
    fs.rm(fsspec.core.url_to_fs(url)[1] + "/y/zarr.json")
    with pytest.warns(StoreWarning) as rec:
        s = _open(url)
    (msg,) = [str(w.message) for w in rec if w.category is StoreWarning]
    assert msg.startswith(f"store {named} is damaged: {named}/y/zarr.json is missing"), msg
    assert s.load(0) == (None, "is missing")


@pytest.mark.parametrize(
    "url, says", [("nosuchfs://b/x.zarr", "Protocol not known: nosuchfs"), ("s3://b/x", "s3fs")]
)
def test_a_url_whose_filesystem_is_unknown_or_not_installed_is_one_line(url, says):
    import importlib.util

    if url.startswith("s3") and importlib.util.find_spec("s3fs") is not None:
        pytest.skip("s3fs is installed here")
    with pytest.raises(ValueError, match=r"^store = ") as err:
        _open(url)
    assert "\n" not in str(err.value) and url in str(err.value) and says in str(err.value)


def test_a_url_store_without_fsspec_is_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "fsspec", None)  # (not installed: a plain rollax install)
    with pytest.raises(
        ValueError, match=r"^store = 'memory://x/s.zarr' is not allowed here: a URL"
    ):
        _open("memory://x/s.zarr")
