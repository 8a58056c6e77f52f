"""The labels of a sweep's results: variable names, dimensions, units and CF attributes.

A sweep computes, per start, the fields of :class:`rollax.Solution`, the system's outcome and
an optional summary. Its dataset (:attr:`rollax.SweepResult.dataset`, and the zarr store it
writes) holds them as variables over the sweep's axes, each with ``units`` and ``long_name``
(CF conventions); enumerations carry ``flag_values`` and ``flag_meanings``; the state is split
into one variable per component (``y_beta``, ``y_omega1``: components have their own units),
and so is ``aux`` where the system names its numbers (``aux_names``, ``aux_units``:
``aux_impacts``; otherwise one variable ``aux``, units "unspecified");
every variable records in ``source`` the field it comes from (``y[0]``, ``summary.t_end``),
which :func:`unlabel` reads to give the fields back.
"""

from __future__ import annotations

import datetime
import functools
import json
import re
import shlex
import sys
import warnings
from typing import Any, Mapping

import numpy as np

from rollax._core._solution import Status

UNSPECIFIED = "unspecified"  # the units of a quantity whose system does not state them

_PER_EVENT = ("counts", "t_first")
_SCALARS = ("t", "mode", "status", "event", "steps", "resets", "rejected", "outcome")


def state_units(system) -> tuple[str, ...]:
    units = getattr(system, "state_units", None)
    return tuple(units) if units is not None else (UNSPECIFIED,) * len(system.state_names)


def aux_labels(system) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``(names, units)`` of the system's aux numbers where it declares ``aux_names`` or
    ``aux_units`` (a name not declared is the index, a unit not declared "unspecified");
    ``None`` where it declares neither (one variable ``aux``)."""
    names = getattr(system, "aux_names", None)
    units = getattr(system, "aux_units", None)
    if names is None and units is None:
        return None
    n = int(system.n_aux)
    names = tuple(names) if names is not None else tuple(str(k) for k in range(n))
    units = tuple(units) if units is not None else (UNSPECIFIED,) * n
    return names, units


class Labels:
    """The names and attributes of one sweep's variables (see the module docstring)."""

    def __init__(
        self,
        system,
        keep_solution: bool = True,
        summary_units=None,
        summary_names=None,
        axes: tuple[str, ...] = (),
    ):
        self.system = system
        self.axes = tuple(axes)  # coordinate names: a variable named like one is prefixed
        self.keep_solution = keep_solution
        self.names = tuple(system.state_names)
        self.units = state_units(system)
        aux = aux_labels(system)
        self.aux_names, self.aux_units = aux if aux is not None else ((), ())
        self.time = getattr(system, "time_units", "s")
        self.summary_units = dict(summary_units or {})
        self.summary_names = dict(summary_names or {})

    def label(self, part: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Raw fields (``y``, ``events.y``, ``summary.k``, ...; one row per start) -> labelled
        variables."""
        out: dict[str, np.ndarray] = {}
        for raw, v in part.items():
            if raw in ("y", "ys", "events.y", "events.y_after"):
                stem = raw.replace(".", "_")
                for k, n in enumerate(self.names):
                    out[f"{stem}_{n}"] = np.ascontiguousarray(v[..., k])
            elif raw == "aux" and self.aux_names:
                for k, n in enumerate(self.aux_names):
                    out[f"aux_{n}"] = np.ascontiguousarray(v[..., k])
            elif not raw.startswith("summary."):
                k = raw.replace(".", "_")
                out[k if k not in self.axes else f"solution_{k}"] = v
        for raw, v in part.items():
            if raw.startswith("summary."):
                k = raw[len("summary.") :]
                out[k if k not in out and k not in self.axes else f"summary_{k}"] = v
        return out

    def source(self, label: str) -> str:
        """The raw field of a label (its ``source`` attribute)."""
        for stem in ("events_y_after", "events_y", "ys", "y"):
            for k, n in enumerate(self.names):
                if label == f"{stem}_{n}":
                    return f"{stem.replace('events_', 'events.')}[{k}]"
        if self.keep_solution:
            for k, n in enumerate(self.aux_names):
                if label == f"aux_{n}":
                    return f"aux[{k}]"
        if label.startswith("solution_") and label[len("solution_") :] in self.axes:
            label = label[len("solution_") :]
            if label.startswith("events_"):
                return "events." + label[len("events_") :]
            return label
        if label.startswith("events_"):
            return "events." + label[len("events_") :]
        if label == "outcome" or (self.keep_solution and label in _SCALARS + _PER_EVENT + ("aux",)):
            return label
        return "summary." + (label[len("summary_") :] if label.startswith("summary_") else label)

    def unlabel(self, out: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Labelled variables -> the raw fields (``y`` stacked back from ``y_<name>``, ...)."""
        return _unlabel(out, {k: self.source(k) for k in out})

    def describe(self, label: str, v: np.ndarray) -> tuple[tuple[str, ...], dict]:
        """A labelled variable's trailing dimensions and attributes (``v``: one row per start)."""
        source = self.source(label)
        sys_name = type(self.system).__name__
        attrs: dict[str, Any] = {"source": source}
        dims: tuple[str, ...] = ()
        base, _, idx = source.partition("[")
        if base == "aux" and idx:  # an aux number the system names
            k = int(idx[:-1])
            attrs.update(
                units=self.aux_units[k],
                long_name=f"{self.aux_names[k]} (auxiliary state, {sys_name}.aux_names) at the "
                f"end of the run",
            )
        elif idx:  # a state component
            k = int(idx[:-1])
            n, u = self.names[k], self.units[k]
            what = {
                "y": f"{n} at the end of the run",
                "ys": f"{n} at the save times",
                "events.y": f"{n} at each logged event, before its reset",
                "events.y_after": f"{n} after each logged event's reset",
            }[base]
            attrs.update(units=u, long_name=what)
            dims = {"y": (), "ys": ("save_time",)}.get(base, ("log",))
        elif source == "outcome":
            attrs.update(
                long_name=f"outcome of the run ({sys_name}.outcome)",
                units="1",
                **_flags(self.system.outcomes or Status),
            )
        elif source == "status":
            attrs.update(long_name="solver status of the run", units="1", **_flags(Status))
        elif source == "t":
            attrs.update(long_name="time at the end of the run", units=self.time)
        elif source == "mode":
            attrs.update(
                long_name="mode at the end of the run",
                units="1",
                flag_values=list(range(len(self.system.modes))),
                flag_meanings=" ".join(_word(m) for m in self.system.modes),
            )
        elif source == "event":
            names = [e.name for e in self.system.events]
            attrs.update(
                long_name="the event that ended the run (-1: none)",
                units="1",
                flag_values=[-1] + list(range(len(names))),
                flag_meanings=" ".join(["none"] + [_word(n) for n in names]),
            )
        elif source == "counts":
            attrs.update(long_name="crossings of each event in the run", units="1")
            dims = ("event_name",)
        elif source == "t_first":
            attrs.update(long_name="time of each event's first crossing", units=self.time)
            dims = ("event_name",)
        elif source in ("steps", "resets", "rejected"):
            what = {
                "steps": "accepted steps of the run",
                "resets": "resets in the run",
                "rejected": "rejected steps of the run",
            }[source]
            attrs.update(long_name=what, units="1")
        elif source == "aux":
            attrs.update(long_name="auxiliary state at the end of the run", units=UNSPECIFIED)
            dims = ("aux_index",)
        elif source.startswith("events."):
            f = source[len("events.") :]
            if f == "n":
                attrs.update(long_name="events in the run (logged or not)", units="1")
            else:
                attrs.update(
                    long_name={
                        "t": "time of each logged event",
                        "t_after": "time returned by each logged event's reset",
                        "event": "which event each logged event is (index of system.events)",
                        "mode": "mode before each logged event",
                        "mode_after": "mode after each logged event",
                    }[f],
                    units=self.time if f.startswith("t") else "1",
                )
                dims = ("log",)
        else:  # a summary quantity
            k = source[len("summary.") :]
            default = "1" if v.dtype.kind in "biu" else UNSPECIFIED
            attrs.update(
                long_name=self.summary_names.get(k, f"{k} (summary)"),
                units=self.summary_units.get(k, default),
            )
            if k == "outcome":
                attrs.update(_flags(self.system.outcomes or Status))
        dims = dims + tuple(f"{source}_dim_{i}" for i in range(len(dims) + 1, v.ndim))
        return dims, attrs


def _word(name: str) -> str:
    return "_".join(str(name).lower().split())


def _flags(enum) -> dict:
    return dict(
        flag_values=[int(m.value) for m in enum],
        flag_meanings=" ".join(_word(m.name) for m in enum),
    )


def _unlabel(out, sources) -> dict[str, np.ndarray]:
    raw: dict[str, np.ndarray] = {}
    parts: dict[str, dict[int, np.ndarray]] = {}
    for label, v in out.items():
        src = sources[label]
        base, _, idx = src.partition("[")
        if idx:
            parts.setdefault(base, {})[int(idx[:-1])] = v
        else:
            raw[src] = v
    for base, cols in parts.items():
        raw[base] = np.stack([cols[k] for k in sorted(cols)], axis=-1)
    return raw


def versions() -> dict[str, str]:
    """The versions of rollax and what it builds on (a copy: the caller may change it)."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
    # read once per process: the packages' metadata took 13 ms of every warm 1000 x 1000 map
    # on this 2-core CPU (benchmarks/gpu/host_path.py)
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("rollax", "jax", "jaxlib", "diffrax", "equinox", "numpy", "xarray", "zarr"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover
            out[pkg] = "not installed"
    return out


def static_fields(system) -> dict[str, Any]:
    """The fields of a system and of the modules it holds that are not arrays (``{dotted name:
    value}``; a value JSON cannot hold as its repr): settings such as ``n_bounces`` or
    ``w1_target`` that change the runs but are no parameter."""
    import dataclasses

    import equinox as eqx

    out: dict[str, Any] = {}

    def walk(node, name):
        if isinstance(node, eqx.Module):
            for f in dataclasses.fields(node):
                walk(getattr(node, f.name, None), f"{name}.{f.name}" if name else f.name)
        elif isinstance(node, (tuple, list)) and any(isinstance(x, eqx.Module) for x in node):
            for i, x in enumerate(node):
                walk(x, f"{name}.{i}")
        elif not eqx.is_array(node) and name:
            try:
                json.dumps(node)
            except (TypeError, ValueError):
                # (a function by its name: its repr's address changes from process to process)
                qual = getattr(node, "__qualname__", None)
                node = (
                    f"{getattr(node, '__module__', '')}.{qual}"
                    if callable(node) and qual
                    else re.sub(r" at 0x[0-9a-fA-F]+", "", repr(node))
                )
            out[name] = node

    walk(system, "")
    return out


def _aux_attrs(system) -> dict[str, list[str]]:
    aux = aux_labels(system)
    return {} if aux is None else {"aux_names": list(aux[0]), "aux_units": list(aux[1])}


def dataset_attrs(system, params: Mapping, units: Mapping, spec: Mapping) -> dict[str, Any]:
    """The dataset's attributes: the system, its parameters (values and units), the run's
    settings (``spec``), the versions, the date and the command line."""
    v = versions()
    return {
        "title": f"rollax.sweep of {type(system).__name__}",
        "Conventions": "CF-1.10",
        "source": f"rollax {v['rollax']}",
        "system": f"{type(system).__module__}.{type(system).__qualname__}",
        "parameters": json.dumps(params, sort_keys=True),
        "static_fields": json.dumps(static_fields(system), sort_keys=True),
        "parameter_units": json.dumps(units, sort_keys=True),
        "state_names": list(system.state_names),
        "state_units": list(state_units(system)),
        **_aux_attrs(system),
        "events": [e.name for e in system.events],
        "settings": json.dumps(spec, sort_keys=True, default=str),
        "versions": json.dumps(v, sort_keys=True),
        "date_created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": COMMAND or shlex.join(sys.argv),
    }


COMMAND = ""  # set by the rollax command: its command line


def write_dataset(ds, path, format: str | None = None):
    """Write ``ds`` to ``path`` as a zarr store (``format="zarr"`` or a ``.zarr`` path) or a
    netCDF file (``"netcdf"`` or ``.nc``; netCDF-3 through SciPy: 64-bit integers are written
    as 32-bit, booleans as bytes, list attributes as text); atomically (a temporary name,
    then a rename). Returns the path."""
    import os
    import secrets
    import shutil
    from pathlib import Path

    path = Path(path)
    if format is None:
        format = {".zarr": "zarr", ".nc": "netcdf"}.get(path.suffix)
    if format not in ("zarr", "netcdf"):
        raise ValueError(
            f"format = {format!r} is not allowed: it must be 'zarr' or 'netcdf' (or a path "
            f"ending in .zarr or .nc)"
        )
    if path.exists() and (format == "netcdf") == path.is_dir():
        kind = "a directory" if path.is_dir() else "a file"
        raise ValueError(f"path = {str(path)!r} is not allowed: it is {kind}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        if format == "zarr":
            # text coordinates as variable-length strings (zarr 3's fixed-length UTF-32 has no
            # specification yet); zarr's note that consolidated metadata is not in the v3 spec
            # is not the user's concern
            ds = ds.assign_coords(
                {k: c.astype(object) for k, c in ds.coords.items() if c.dtype.kind == "U"}
            )
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", module="zarr")
                ds.to_zarr(tmp, mode="w", zarr_format=3, consolidated=True)
            if path.exists():
                shutil.rmtree(path)
        else:
            _netcdf3(ds).to_netcdf(tmp, engine="scipy", format="NETCDF3_64BIT")
        os.replace(tmp, path)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
    return path


def _netcdf3(ds):
    """``ds`` in the types netCDF-3 holds (no empty variables: ``aux`` of a system without
    one)."""
    import xarray as xr

    def fix(v):
        kind = v.dtype.kind
        data = v.values
        if kind == "b":
            data = data.astype(np.int8)
        elif kind in "iu" and data.dtype.itemsize > 4:
            data = data.astype(np.int32)
        attrs = {
            k: (" ".join(map(str, a)) if isinstance(a, list) and a and isinstance(a[0], str) else a)
            for k, a in v.attrs.items()
        }
        return xr.Variable(v.dims, data, attrs)

    out = xr.Dataset(
        # (a dimension of length 0 is netCDF-3's unlimited one: an empty variable is left out)
        {k: fix(v.variable) for k, v in ds.data_vars.items() if v.size},
        coords={k: fix(v.variable) for k, v in ds.coords.items()},
    )
    out.attrs = {
        k: (" ".join(map(str, a)) if isinstance(a, list) else a) for k, a in ds.attrs.items()
    }
    return out
