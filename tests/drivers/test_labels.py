"""The labelled results of rollax.sweep (rollax._drivers._labels): units on every variable and
coordinate, CF flags, the dataset's attributes, and labels that give the raw fields back."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rollax
from rollax._drivers._labels import UNSPECIFIED, Labels
from rollax.models.rim import Rim
from rollax.systems import RimRolling

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from bouncing_ball import Bounce, BouncingBall  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10)


def _units_everywhere(ds):
    for name, v in ds.variables.items():
        assert isinstance(v.attrs.get("units"), str) and v.attrs["units"], name


def test_a_stored_sweep_has_units_flags_and_attributes(tmp_path):
    ball = BouncingBall(n_bounces=2)
    axes = [rollax.Axis("z", 0.5, 2.0, 4), rollax.Axis("e", 0.3, 0.9, 3)]
    ts = np.array([0.05, 0.1, 0.2])
    res = rollax.sweep(
        ball,
        axes,
        y0={"v": 0.0},
        t1=20.0,
        chunk_size=5,
        store=tmp_path / "b.zarr",
        attrs={"study": "unit test"},
        progress=False,
        ts=ts,
        save_events=3,
        **TOL,
    )
    with xr.open_zarr(tmp_path / "b.zarr") as ds:
        _units_everywhere(ds.drop_vars(["event_name"]))
        assert ds["z"].attrs["units"] == "m" and ds["e"].attrs["units"] == "1"
        assert ds["t"].attrs["units"] == "s" and ds["y_z"].attrs["units"] == "m"
        assert ds["y_v"].attrs["units"] == "m/s" and ds["ys_v"].dims == ("z", "e", "save_time")
        assert ds["events_y_after_v"].dims == ("z", "e", "log")
        np.testing.assert_array_equal(ds["save_time"].values, ts)
        assert list(ds["outcome"].attrs["flag_values"]) == [m.value for m in Bounce]
        assert ds["outcome"].attrs["flag_meanings"].split() == [m.name.lower() for m in Bounce]
        assert ds["status"].attrs["flag_meanings"].split()[0] == rollax.Status(0).name.lower()
        assert ds["event"].attrs["flag_meanings"] == "none floor"
        assert list(ds["event_name"].values) == ["floor"]
        a = ds.attrs
        assert a["system"].endswith("BouncingBall") and a["Conventions"].startswith("CF")
        assert json.loads(a["parameters"]) == {"e": 0.8, "g": 9.81}
        assert json.loads(a["parameter_units"]) == {"e": "1", "g": "m/s^2"}
        assert json.loads(a["static_fields"]) == {"n_bounces": 2}  # (issue 56)
        settings = json.loads(a["settings"])
        assert settings["t1"] == 20.0 and settings["options"]["rtol"] == 1e-10
        assert settings["y0"]["v"] == 0.0 and settings["axes"] == ["z", "e"]
        v = json.loads(a["versions"])
        assert {"rollax", "jax", "diffrax", "xarray", "zarr"} <= set(v)
        assert a["date_created"][:4].isdigit() and a["study"] == "unit test"
        # the store's values are the result's
        np.testing.assert_array_equal(ds["t"].values, res.solution["t"])
        np.testing.assert_array_equal(ds["ys_z"].values, res.solution["ys"][..., 0])
    # the in-memory dataset says the same
    assert res.dataset["t"].attrs == xr.open_zarr(tmp_path / "b.zarr")["t"].attrs


@pytest.mark.parametrize("seed", range(4))
def test_labels_give_the_raw_fields_back(seed):
    # generated parts: a system, per-start fields with their trailing axes, and summaries
    # whose names clash with fields or with the axes
    rng = np.random.default_rng(seed)
    system = [BouncingBall(), RimRolling(Rim())][seed % 2]
    d, n = system.state_dim, int(rng.integers(1, 9))
    axes = tuple(rng.choice(list(system.state_names), size=1 + seed % 2, replace=False))
    part = {
        "t": rng.normal(size=n),
        "y": rng.normal(size=(n, d)),
        "ys": rng.normal(size=(n, 3, d)),
        "events.y": rng.normal(size=(n, 2, d)),
        "events.t": rng.normal(size=(n, 2)),
        "counts": rng.integers(0, 5, size=(n, len(system.events))),
        "outcome": rng.integers(0, 3, size=n),
        "summary.t": rng.normal(size=n),  # clashes with the field t
        "summary.energy": rng.normal(size=n),
        f"summary.{axes[0]}": rng.normal(size=n),  # clashes with an axis
    }
    labels = Labels(system, True, {"energy": "J"}, None, axes)
    out = labels.label(part)
    assert not set(out) & set(axes)
    back = labels.unlabel(out)
    assert set(back) == set(part)
    for k in part:
        np.testing.assert_array_equal(back[k], part[k])
    for k, v in out.items():
        dims, attrs = labels.describe(k, v)
        assert len(dims) == v.ndim - 1 and attrs["units"], k
    assert labels.describe("energy", out["energy"])[1]["units"] == "J"
    assert labels.describe("summary_t", out["summary_t"])[1]["units"] == UNSPECIFIED


def test_units_of_a_system_are_checked_when_it_is_defined():
    with pytest.raises(TypeError, match="state_units"):

        class Bad(rollax.AbstractSystem):  # noqa: F841
            state_names = ("x", "v")
            state_units = ("m",)

    with pytest.raises(ValueError, match="units = 3"):
        rollax.parameter(1.0, units=3)  # pyright: ignore[reportArgumentType]


def test_a_result_reads_as_its_dataset():
    ball = BouncingBall(n_bounces=1)
    res = rollax.sweep(
        ball, [rollax.Axis("z", 0.5, 2.0, 4)], y0={"v": 0.0}, t1=20.0, progress=False, **TOL
    )
    assert isinstance(res.dataset, xr.Dataset)
    np.testing.assert_array_equal(res["t"].values, res.solution["t"])
    assert float(res.sel(z=2.0)["t"]) == pytest.approx(math.sqrt(2 * 2.0 / 9.81), abs=1e-9)
    assert res.attrs["system"].endswith("BouncingBall") and "z" in res.coords
    assert isinstance(res.outcome, np.ndarray)  # its own fields first
    with pytest.raises(AttributeError):
        res.no_such_thing


# ---------------------------------------------------------------- aux units (issue 56)
class _CountedBall(BouncingBall):
    """The bouncing ball whose one aux number (the impacts so far) is named, with its unit."""

    aux_names = ("impacts",)
    aux_units = ("1",)


def _aux_system(n_aux: int, units: bool, names: bool):
    attrs = {"state_names": ("x",), "n_aux": n_aux, "vector_field": lambda self, t, y, m: -y}
    if names:
        attrs["aux_names"] = tuple(f"a{k}" for k in range(n_aux))
    if units:
        attrs["aux_units"] = tuple(["s", "m", "1", "J"][k % 4] for k in range(n_aux))
    return type("AuxSystem", (rollax.AbstractSystem,), attrs)()


@pytest.mark.parametrize("seed", range(4))
def test_declared_aux_units_label_the_aux_numbers(seed):
    rng = np.random.default_rng(seed)
    n_aux, n = int(rng.integers(1, 5)), int(rng.integers(1, 7))
    units, names = bool(seed % 2 == 0), bool(seed < 2)
    system = _aux_system(n_aux, units, names)
    part = {"t": rng.normal(size=n), "aux": rng.normal(size=(n, n_aux))}
    labels = Labels(system, True)
    out = labels.label(part)
    if not (units or names):  # neither declared: one variable "aux", units "unspecified"
        assert [k for k in out if k.startswith("aux")] == ["aux"]
        assert labels.describe("aux", out["aux"])[1]["units"] == UNSPECIFIED
        np.testing.assert_array_equal(labels.unlabel(out)["aux"], part["aux"])
        return
    keys = [f"aux_{f'a{k}' if names else k}" for k in range(n_aux)]
    assert sorted(k for k in out if k.startswith("aux")) == sorted(keys)
    for k, key in enumerate(keys):
        dims, attrs = labels.describe(key, out[key])
        assert dims == () and attrs["source"] == f"aux[{k}]"
        assert attrs["units"] == (["s", "m", "1", "J"][k % 4] if units else UNSPECIFIED)
    back = labels.unlabel(out)
    np.testing.assert_array_equal(back["aux"], part["aux"])


def test_a_sweep_writes_the_declared_aux_units(tmp_path, monkeypatch):
    kw = dict(y0={"v": 0.0}, t1=20.0, store=tmp_path / "c.zarr", progress=False, **TOL)
    axes = [rollax.Axis("z", 0.5, 2.0, 3)]
    res = rollax.sweep(_CountedBall(n_bounces=2), axes, **kw)
    with xr.open_zarr(tmp_path / "c.zarr") as ds:
        assert ds["aux_impacts"].attrs["units"] == "1" and "aux" not in ds
        np.testing.assert_array_equal(ds["aux_impacts"].values, [2.0, 2.0, 2.0])
        assert list(ds.attrs["aux_names"]) == ["impacts"] and list(ds.attrs["aux_units"]) == ["1"]
    np.testing.assert_array_equal(res.solution["aux"][..., 0], [2.0, 2.0, 2.0])
    # other declared units: not resumed from a store labelled with the old ones
    monkeypatch.setattr(_CountedBall, "aux_units", ("count",))
    with pytest.warns(rollax.StoreWarning, match=r'aux_units \["1"\] -> \["count"\]'):
        rollax.sweep(_CountedBall(n_bounces=2), axes, **kw)
    with xr.open_zarr(tmp_path / "c.zarr") as ds:
        assert ds["aux_impacts"].attrs["units"] == "count"


def test_aux_units_are_checked_when_the_system_is_defined():
    with pytest.raises(TypeError, match=r"Bad.aux_units = \('s',\) is not allowed: .* 2 "):

        class Bad(rollax.AbstractSystem):  # noqa: F841
            state_names = ("x",)
            n_aux = 2
            aux_units = ("s",)

    with pytest.raises(TypeError, match="names one number twice"):

        class Twice(rollax.AbstractSystem):  # noqa: F841
            state_names = ("x",)
            n_aux = 2
            aux_names = ("a", "a")


def test_every_built_in_system_names_its_aux_numbers_and_their_units():
    """The built-in systems' sweeps label ``aux`` (issue 56: it was always "unspecified")."""
    from rollax import systems

    found = 0
    for name in dir(systems):
        cls = getattr(systems, name)
        if not (isinstance(cls, type) and issubclass(cls, rollax.AbstractSystem)):
            continue
        n = getattr(cls, "n_aux", 0)
        if not n:
            continue
        found += 1
        assert cls.aux_names is not None and len(cls.aux_names) == n, name
        assert cls.aux_units is not None and len(cls.aux_units) == n, name
        assert set(cls.aux_units) <= {"1", "s"}, (name, cls.aux_units)  # counts, flags, times
        # a time is named as one, a count or flag is not
        for a, u in zip(cls.aux_names, cls.aux_units):
            assert (u == "s") == a.startswith("t_"), (name, a, u)
    assert found >= 4  # the rim, the shot, the penny and the robot


def test_versions_are_read_once_and_handed_out_as_copies():
    # the packages' metadata read once per process (13 ms of every warm map: issue 62); a
    # caller that changes its dict changes nobody else's
    from rollax._drivers._labels import versions

    a = versions()
    a["rollax"] = "changed"
    b = versions()
    assert b["rollax"] != "changed" and b is not a
    import importlib.metadata

    assert b["jax"] == importlib.metadata.version("jax")
