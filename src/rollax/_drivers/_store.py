"""The store of a sweep: a zarr group that is its labelled dataset, written region by region.

A sweep's grid (its axes' shape) is cut into *regions*: blocks ``(1, ..., 1, c, n_{j+1}, ...,
n_last)`` of the grid (:func:`region_layout`), each one contiguous run of the row-major starts, so
that a region is both one chunk of work and one chunk of every array of the store. A region is
written as soon as it is computed, and a rerun into the same store computes only the regions
that are missing or not trusted.

Layout (zarr format 3; ``xarray.open_zarr(path)`` reads it as an ``xarray.Dataset``):

* one array per result variable: the grid's shape and the variable's own trailing axes, chunked
  by region, with its dimension names and attributes (``units``, ``long_name``, CF
  ``flag_values`` / ``flag_meanings``);
* the coordinates (each axis's values, and the labels of trailing axes such as ``state``);
* the group's attributes: the dataset's attributes and ``rollax_store`` (format, the sweep's key,
  the grid's shape and the region block);
* ``_rollax/records``: per region, 64 bytes written after its data: SHA-256 of (the sweep's
  key, the rollax version and code fingerprint, the region's index and rows) and SHA-256 of the
  region's arrays. A region is trusted only when both match; one that is missing, stale
  (other code or versions), unreadable (a truncated or damaged zarr chunk) or altered (its
  checksum) is computed again, with one :class:`StoreWarning` line per kind of fault.

Writes are safe to share: zarr writes each chunk file atomically (a temporary file, then a
rename), regions never share a chunk file, and the store's metadata is created and changed under
an exclusive lock (``fcntl.flock`` on ``<store>/.rollax.lock``), so two runs of one sweep into
one store both finish with the same, correct dataset. A store that holds another sweep (another
key) is replaced, with a warning.

A store is a local directory or an fsspec URL (``s3://bucket/sweep.zarr``, ``gs://``,
``memory://``; :class:`Location`), opened by zarr through fsspec with the credentials fsspec finds
(environment variables, its configuration files). An object store has no lock: within one sweep
only the client creates and changes the metadata, and workers create a variable's metadata
identically, so that races between them write the same bytes; two independent runs into one
object store at the same time are not guarded (give each its own URL).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from rollax._core._validate import naming_file

_FORMAT = 1
_LOCK = ".rollax.lock"
_RECORDS = "_rollax/records"


class StoreWarning(UserWarning):
    """Regions of a sweep's store could not be trusted (missing data, stale, unreadable or
    altered) and are computed again, or the store held another sweep and is replaced."""


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller of this function point at
    the first line outside rollax (the user's call of ``rollax.sweep``, ``basin_map``, ...),
    however deep in rollax it is issued."""
    import sys

    root = str(Path(__file__).resolve().parents[1]) + os.sep  # src/rollax/
    frame = sys._getframe(1)  # the function that calls warnings.warn: stacklevel 1
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame = frame.f_back
        level += 1
    return level


def _short(v: Any) -> str:
    if isinstance(v, list) and len(v) > 4:
        return f"[{', '.join(_short(x) for x in v[:3])}, ... ({len(v)} values)]"
    if isinstance(v, float):
        return f"{v:.6g}"
    s = json.dumps(v, default=str) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{dotted key: leaf}``."""
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def _user_settings(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The options a user gave, from a sweep's dataset attributes: the system, its static
    fields and parameters, and the settings (``y0``, ``t1``, the solver options, ...) by
    the names a user writes (``rtol``, ``y0.v``, ``e``)."""

    def loads(k):
        v = attrs.get(k)
        try:
            return json.loads(v) if isinstance(v, str) else (v or {})
        except ValueError:
            return {}

    out: dict[str, Any] = {}
    for k in ("system", "aux_names", "aux_units"):
        if k in attrs:
            out[k] = list(attrs[k]) if k != "system" else attrs[k]
    out.update(_flat(loads("static_fields")))
    out.update(_flat(loads("parameters")))
    settings = loads("settings")
    if isinstance(settings, dict):
        options = settings.pop("options", {}) or {}
        settings.pop("axes", None)  # the axes: compared by their values
        out.update(_flat(settings))
        out.update(_flat(options))
    return out


def _what_differs(
    where: "Location", old: Mapping, record: Mapping, new: "RegionStore", coords
) -> str:
    """The user-facing options that differ between the store's sweep and this one, with the
    old and new values (``t1 20 -> 30, rtol 1e-10 -> 1e-08, axis z: 4 -> 8 values``); the
    keys where the store records none of them (a store written by other code)."""
    import zarr

    parts = []
    try:
        g = zarr.open_group(where.name, mode="r")
        before = _user_settings(dict(g.attrs))
        for name, (cdims, values, _attrs) in (coords or {}).items():
            if tuple(cdims) != (name,) or name not in g:
                continue
            arr: Any = g[name]
            a, b = np.asarray(arr[...]), np.asarray(values)
            if a.shape != b.shape or not np.array_equal(a, b):
                span = lambda x: f"{x.size} values in [{x.min():.6g}, {x.max():.6g}]"  # noqa: E731
                if a.size and b.size and a.dtype.kind in "if" and b.dtype.kind in "if":
                    parts.append(f"axis {name}: {span(a)} -> {span(b)}")
                else:
                    parts.append(f"axis {name}")
        new_dims = list(record.get("dims", []))
        if list(old.get("dims") or []) != new_dims:
            parts.append(f"axes {old.get('dims')} -> {new_dims}")
    except Exception:  # noqa: BLE001 - an unreadable store: say what the record says
        before = {}
    after = _user_settings(new.attrs)
    for k in sorted(set(before) | set(after), key=lambda k: (k not in after, k)):
        if k in before and k in after and before[k] == after[k]:
            continue
        a = _short(before[k]) if k in before else "(not set)"
        b = _short(after[k]) if k in after else "(not set)"
        parts.append(f"{k} {a} -> {b}")
    if old.get("shape") == record["shape"] and list(old.get("block") or []) != record["block"]:
        parts.append(f"chunk_size: regions {old.get('block')} -> {record['block']}")
    if not parts:
        diff = sorted(k for k in record if old.get(k) not in (record[k], None) and k != "key")
        if diff:
            return f"its {', '.join(diff)} differ"
        # the options a user gives are the same: what differs is what rollax adds to the
        # sweep's identity (its version, the solver's defaults)
        return (
            "the same options, computed by another rollax version or with other defaults "
            f"(solver, n_samples, dt_max, the kernel's version): key {old.get('key')!r}, this "
            f"sweep's {record['key']!r}"
        )
    return "what differs: " + ", ".join(parts)


def region_layout(shape: tuple[int, ...], chunk_size: int) -> tuple[tuple[int, ...], list]:
    """The region block for a grid of ``shape`` and at most ``chunk_size`` starts per region,
    and the regions as ``(lo, hi, index)`` (row-major start numbers ``lo:hi``; ``index``: the
    region's slices of the grid).

    The block keeps the trailing axes whole as far as ``chunk_size`` allows: ``(1, ..., 1, c,
    n_{j+1}, ..., n_last)`` with the smallest such ``j``, so that every region is contiguous in
    the row-major order and aligned with the store's chunks (the last region along axis ``j``
    may be shorter)."""
    shape = tuple(int(s) for s in shape)
    d = len(shape)
    if d == 0 or min(shape) < 1:
        raise ValueError(f"shape = {shape} must have at least one axis, each of length >= 1")
    j = next(j for j in range(d) if math.prod(shape[j + 1 :]) <= chunk_size)
    inner = math.prod(shape[j + 1 :])
    c = max(1, min(shape[j], chunk_size // inner))
    block = (1,) * j + (c,) + shape[j + 1 :]
    regions = []
    for outer in np.ndindex(*shape[:j]):
        for a in range(0, shape[j], c):
            b = min(shape[j], a + c)
            start = tuple(outer) + (a,) + (0,) * (d - j - 1)
            lo = int(np.ravel_multi_index(start, shape)) if d > 1 else a
            index = tuple(slice(i, i + 1) for i in outer) + (slice(a, b),)
            index += tuple(slice(0, s) for s in shape[j + 1 :])
            regions.append((lo, lo + (b - a) * inner, index))
    return block, regions


def checksum(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of named arrays (names, dtypes, shapes and bytes, in name order)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def code_fingerprint() -> str:
    """SHA-256 (hex, 20 digits) of the rollax version, the JAX, jaxlib and NumPy versions and
    the source of every module of the installed rollax package: anything that may change what a
    chunk contains."""
    import jax
    from jaxlib import version as jaxlib_version

    import rollax

    h = hashlib.sha256()
    h.update(
        f"rollax {rollax.__version__} jax {jax.__version__} jaxlib {jaxlib_version.__version__} "
        f"numpy {np.__version__}\n".encode()
    )
    root = Path(rollax.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on the store at ``path`` (created if need be), across processes."""
    import fcntl

    path.mkdir(parents=True, exist_ok=True)
    with open(path / _LOCK, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def is_url(store: Any) -> bool:
    """Whether ``store`` names an fsspec store (``s3://bucket/sweep.zarr``, ``memory://x``)
    rather than a local directory."""
    return isinstance(store, str) and "://" in store


class Location:
    """Where a store lives: a local directory (:attr:`path`) or an fsspec URL (:attr:`fs` and
    its root), with the few file operations a store needs on either; ``str()`` is what zarr
    opens and what messages name."""

    def __init__(self, where: str | os.PathLike) -> None:
        self.is_url = is_url(where)
        if self.is_url:
            try:
                import fsspec
                from fsspec.implementations.local import LocalFileSystem
            except ImportError:
                raise ValueError(
                    f"store = {str(where)!r} is not allowed here: a URL store needs fsspec "
                    f"(pip install fsspec, and s3fs for s3://, gcsfs for gs://; it comes with "
                    f"rollax[distributed]), or give a directory path"
                ) from None

            self.name = str(where).rstrip("/")
            try:
                self.fs, self._root = fsspec.core.url_to_fs(self.name)
            except (ImportError, ValueError) as err:  # its package missing, an unknown protocol
                raise ValueError(
                    f"store = {str(where)!r} is not allowed: {' '.join(str(err).split())} (an "
                    f"fsspec URL needs its filesystem's package: s3fs for s3://, gcsfs for gs://)"
                ) from None
            self._root = self._root.rstrip("/")
            self.path = Path(self._root)
            if isinstance(self.fs, LocalFileSystem):  # file://: a local directory (its lock)
                self.is_url = False
                self.name = str(self.path)
        else:
            self.path = Path(where)
            self.name = str(self.path)

    def __str__(self) -> str:
        return self.name

    def join(self, *parts: str) -> str:
        """A file or folder of the store, as messages name it."""
        return "/".join([self.name, *parts]) if self.is_url else str(self.path.joinpath(*parts))

    def absolute(self) -> str:
        """This location as another process reaches it (a worker's working directory is not
        the client's)."""
        return self.name if self.is_url else str(self.path.resolve())

    def exists(self, *parts: str) -> bool:
        if self.is_url:
            return bool(self.fs.exists("/".join([self._root, *parts])))
        return self.path.joinpath(*parts).exists()

    def is_file(self) -> bool:
        if self.is_url:
            return bool(self.fs.isfile(self._root))
        return self.path.exists() and not self.path.is_dir()

    def entries(self) -> list[str]:
        """The names in the store's folder but its lock file (none where it does not exist)."""
        if self.is_url:
            if not self.fs.isdir(self._root):
                return []
            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self._root, detail=False)]
        else:
            names = [p.name for p in self.path.iterdir()] if self.path.is_dir() else []
        return [n for n in names if n != _LOCK]

    def remove(self, name: str) -> None:
        if self.is_url:
            self.fs.rm("/".join([self._root, name]), recursive=True)
            return
        p = self.path / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()

    def lock(self):
        """An exclusive lock on the store across processes (a local directory); none on an
        object store (module docstring)."""
        return contextlib.nullcontext() if self.is_url else _locked(self.path)

    @contextlib.contextmanager
    def guard(self):
        """The store's lock, and an ``OSError`` that names no file (a full disk) named by it."""
        with naming_file(self.name), self.lock():
            yield


Describe = Callable[[str, np.ndarray], tuple[tuple[str, ...], dict]]


class RegionStore:
    """A sweep's zarr store (module docstring). Open it with :meth:`open`; :meth:`load` and
    :meth:`save` read and write one region's variables as flat arrays (one row per start, in
    row-major order, then the variable's trailing axes)."""

    def __init__(
        self, path: str | os.PathLike, key: str, shape, chunk_size: int, describe: Describe, attrs
    ):
        self.where = Location(path)
        self.path = self.where.name  # (as zarr opens it and messages name it)
        self.key = key
        self.shape = tuple(int(s) for s in shape)
        self.block, self.regions = region_layout(self.shape, chunk_size)
        self.describe = describe
        self.attrs = attrs
        self._group: Any = None
        self._dims: tuple[str, ...] = tuple(f"dim_{k}" for k in range(len(self.shape)))
        self._coords: tuple[str, ...] = ()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        key: str,
        shape,
        chunk_size: int,
        *,
        dims: tuple[str, ...] | None = None,
        coords: Mapping[str, tuple[tuple[str, ...], np.ndarray, dict]] | None = None,
        attrs: Mapping[str, Any] | None = None,
        describe: Describe | None = None,
    ) -> "RegionStore":
        """The store at ``path`` for the sweep ``key`` over a grid of ``shape`` (dimension
        names ``dims``): reused if it holds this sweep, else created (replacing, with a
        :class:`StoreWarning`, a store of another sweep). ``coords``: name -> (dims, values,
        attributes); ``attrs``: the dataset's attributes; ``describe(name, flat_array)``: a
        variable's trailing dimension names and attributes."""
        import zarr

        where = Location(path)
        if where.is_file():
            raise ValueError(
                f"store = {where.name!r} is not allowed: it is a file; give a directory path "
                f"(a new one, or the store of an earlier run to resume it)"
            )
        self = cls(path, key, shape, chunk_size, describe or _no_description, dict(attrs or {}))
        dims = tuple(dims) if dims is not None else tuple(f"dim_{k}" for k in range(len(shape)))
        record = dict(
            format=_FORMAT,
            key=key,
            shape=list(self.shape),
            block=list(self.block),
            dims=list(dims),
            coords=sorted(coords or {}),
        )
        not_a_store = ValueError(
            f"store = {where.name!r} is not allowed: it is a directory that holds no rollax "
            f"sweep store (its files would be replaced); give a new path, or the store of an "
            f"earlier run to resume it"
        )
        if not where.exists("zarr.json") and where.entries():  # (checked before the lock file)
            raise not_a_store
        with where.guard():
            old = None
            damage = None
            if where.exists("zarr.json"):
                try:
                    old = dict(zarr.open_group(where.name, mode="r").attrs).get("rollax_store")
                except Exception as err:  # noqa: BLE001 - an unreadable store is replaced
                    old, damage = {}, f"{where.join('zarr.json')} cannot be read ({_why(err)})"
                if isinstance(old, dict) and damage is None:
                    damage = _damage(where, old)
            if old is None and where.entries():
                raise not_a_store
            same = (
                damage is None
                and isinstance(old, dict)
                and {k: old.get(k) for k in record} == record
            )
            if not same:
                if damage is not None:
                    warnings.warn(
                        f"store {where} is damaged: {damage}; replacing it with this sweep's "
                        f"(every region is computed again)",
                        StoreWarning,
                        stacklevel=_user_stacklevel(),
                    )
                elif old is not None:
                    if isinstance(old, dict):
                        what = (
                            "another sweep ("
                            + _what_differs(where, old, record, self, coords)
                            + ")"
                        )
                    else:
                        what = "no rollax sweep"
                    warnings.warn(
                        f"store {where} holds {what}; replacing it with this sweep's (its "
                        f"finished regions are lost: give another store path to keep it)",
                        StoreWarning,
                        stacklevel=_user_stacklevel(),
                    )
                for name in where.entries():
                    where.remove(name)
                g = zarr.open_group(where.name, mode="w", zarr_format=3)
                for name, (cdims, values, cattrs) in (coords or {}).items():
                    values = np.asarray(values)
                    a = g.create_array(
                        name,
                        shape=values.shape,
                        dtype=values.dtype if values.dtype.kind != "U" else str,
                        chunks=values.shape,
                        dimension_names=list(cdims),
                        fill_value=None if values.dtype.kind != "U" else "",
                    )
                    a[...] = values
                    a.attrs.update(cattrs)
                rec = g.create_array(
                    _RECORDS,
                    shape=(len(self.regions), 64),
                    chunks=(1, 64),
                    dtype="uint8",
                    fill_value=0,
                    dimension_names=["region", "digest"],
                )
                del rec
                g.attrs.update({**self.attrs, "rollax_store": record})
        self._dims = dims
        self._coords = tuple(coords or {})
        return self

    @classmethod
    def attach(
        cls,
        path: str | os.PathLike,
        key: str,
        shape,
        chunk_size: int,
        *,
        dims: tuple[str, ...] | None = None,
        coords: Mapping[str, Any] | None = None,
        attrs: Mapping[str, Any] | None = None,
        describe: Describe | None = None,
    ) -> "RegionStore":
        """The store at ``path`` that :meth:`open` made, for :meth:`load` and :meth:`save`
        only (on a Dask worker): nothing is created, checked or replaced."""
        self = cls(path, key, shape, chunk_size, describe or _no_description, {})
        if dims is not None:
            self._dims = tuple(dims)
        self._coords = tuple(coords or {})
        return self

    def spec(self) -> dict[str, Any]:
        """What :meth:`attach` needs to reach this store from another process."""
        return dict(
            path=self.where.absolute(),
            key=self.key,
            shape=self.shape,
            block=self.block,
            dims=self._dims,
            coords=self._coords,
            describe=self.describe,
        )

    def records(self) -> list:
        """Every region's 64-byte record (zeros: never written), read at once; a record that
        cannot be read is its error's name instead."""
        try:
            return list(np.asarray(self._g()[_RECORDS][...]))
        except Exception:  # noqa: BLE001 - a damaged record: read them one by one
            pass
        out: list = []
        for i in range(len(self.regions)):
            try:
                out.append(np.asarray(self._g()[_RECORDS][i]))
            except Exception as err:  # noqa: BLE001
                out.append(type(err).__name__)
        return out

    def claims(self, i: int, record) -> str:
        """What region ``i``'s record (an entry of :meth:`records`) says: ``"missing"``
        (never finished), ``"done"`` (to be verified by :meth:`load`), or why the region is
        not trusted (another sweep's or code's, an unreadable record)."""
        if isinstance(record, str):
            return f"has an unreadable record ({record})"
        if not np.asarray(record).any():
            return "missing"
        if np.asarray(record, np.uint8)[:32].tobytes() != self._key_digest(i):
            return "is stale (computed by other code, versions or settings)"
        return "done"

    # -- one region -------------------------------------------------------------------------

    def _g(self) -> Any:
        import zarr

        if self._group is None:
            self._group = zarr.open_group(self.path, mode="r+")
        return self._group

    def _names(self) -> list[str]:
        """The sweep's variables created so far (recorded in the store's attributes: other
        variables added to the store later, a derived map, are not the sweep's)."""
        rec = dict(self._g().attrs).get("rollax_store", {})
        if "variables" in rec:
            return sorted(rec["variables"])
        coords = set(self._coords)
        with warnings.catch_warnings():
            # zarr warns of every file it lists in the group that is no array or group: the
            # lock file (and a temporary file of another run's metadata write)
            warnings.filterwarnings("ignore", message="Object at .* is not recognized")
            return sorted(k for k, _ in self._g().arrays() if k not in coords)

    def _key_digest(self, i: int) -> bytes:
        import rollax

        lo, hi, _ = self.regions[i]
        text = f"{self.key}\0{rollax.__version__}\0{code_fingerprint()}\0{i}\0{hi - lo}"
        return hashlib.sha256(text.encode()).digest()

    def load(self, i: int) -> tuple[dict[str, np.ndarray] | None, str]:
        """Region ``i``'s variables (flat) if it is complete and trusted, else ``(None, why)``
        (``why`` is ``"is missing"`` for a region never written)."""
        lo, hi, index = self.regions[i]
        try:
            rec = np.asarray(self._g()[_RECORDS][i])
        except Exception as err:  # noqa: BLE001 - an unreadable record: redo the region
            return None, f"has an unreadable record ({type(err).__name__})"
        if not rec.any():
            return None, "is missing"
        if rec[:32].tobytes() != self._key_digest(i):
            return None, "is stale (computed by other code, versions or settings)"
        part = {}
        try:
            for name in self._names():
                a = np.asarray(self._g()[name][index])
                part[name] = a.reshape((hi - lo,) + a.shape[len(self.shape) :])
        except Exception as err:  # noqa: BLE001 - a damaged zarr chunk: redo the region
            return None, f"cannot be read ({type(err).__name__}: {err})".replace("\n", " ")
        if not part or hashlib.sha256(checksum(part).encode()).digest() != rec[32:].tobytes():
            return None, "is corrupt (its checksum does not match its contents)"
        return part, ""

    def save(self, i: int, part: Mapping[str, np.ndarray]) -> None:
        """Write region ``i``'s variables (flat, one row per start), then its record."""
        lo, hi, index = self.regions[i]
        g = self._g()
        missing = [k for k in part if k not in g]
        if missing:
            with self.where.guard():
                self._group = None
                g = self._g()
                rec = dict(g.attrs).get("rollax_store", {})
                names = set(rec.get("variables", []))
                for k in part:
                    names.add(k)
                    if k in g:
                        continue
                    v = np.asarray(part[k])
                    trailing_dims, vattrs = self.describe(k, v)
                    with _made_elsewhere():  # (another worker, on an object store: the same)
                        g.create_array(
                            k,
                            shape=self.shape + v.shape[1:],
                            chunks=self.block + v.shape[1:],
                            dtype=v.dtype,
                            fill_value=_fill(v.dtype),
                            dimension_names=list(self._dims) + list(trailing_dims),
                            attributes=_jsonable(vattrs),
                        )
                g.attrs["rollax_store"] = {**rec, "variables": sorted(names)}
        k = _RECORDS
        try:
            for k in part:
                self._write(i, k, part[k])
            # the record last: a region whose writer died before it is never trusted
            k = _RECORDS
            digest = hashlib.sha256(checksum(dict(part)).encode()).digest()
            g[_RECORDS][i] = np.frombuffer(self._key_digest(i) + digest, np.uint8)
        except OSError as err:
            # name the store's chunk (zarr's error may name its private temporary file)
            where = getattr(err, "filename2", None) or self.where.join(k)
            raise OSError(err.errno, err.strerror or str(err), str(where)) from None

    def _write(self, i: int, name: str, v) -> None:
        """Region ``i``'s rows of one variable (flat) into its zarr chunk."""
        index = self.regions[i][2]
        grid = tuple(s.stop - s.start for s in index)
        v = np.asarray(v)
        self._g()[name][index] = v.reshape(grid + v.shape[1:])


def add_variable(path, name: str, dims, values, attrs: Mapping[str, Any]) -> None:
    """Add (or replace) a variable that is not the sweep's own (a map derived from it) to the
    store at ``path``; the regions are still verified on the sweep's variables only."""
    import zarr

    values = np.asarray(values)
    where = Location(path)
    with where.guard():
        g = zarr.open_group(where.name, mode="r+")
        rec: Any = dict(g.attrs).get("rollax_store") or {}
        if name in rec.get("variables", []):
            raise ValueError(f"name = {name!r} is not allowed: it is a variable of the sweep")
        a = g.create_array(
            name,
            shape=values.shape,
            chunks=values.shape,
            dtype=values.dtype,
            fill_value=_fill(values.dtype),
            dimension_names=list(dims),
            attributes=_jsonable(dict(attrs)),
            overwrite=True,
        )
        a[...] = values


def finish(path: str | os.PathLike, attrs: Mapping[str, Any] | None = None) -> None:
    """Add attributes to the store at ``path`` and consolidate its metadata (one read for
    ``xarray.open_zarr``)."""
    import zarr

    where = Location(path)
    with where.guard():
        g = zarr.open_group(where.name, mode="r+")
        if attrs:
            g.attrs.update(_jsonable(dict(attrs)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr: consolidated metadata is not in v3's spec
            zarr.consolidate_metadata(where.name)


def _why(err: BaseException) -> str:
    """An error in a few words on one line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:120]}" if text else type(err).__name__


def _damage(where: Location, record: Mapping[str, Any]) -> str | None:
    """What is damaged in the store at ``where`` (a variable's folder or metadata deleted or
    unreadable, the records gone), or None: checked on the metadata only, before any work, so
    that a damaged store is replaced at once and not found broken after the work."""
    import zarr

    try:
        # (not the consolidated copy that finish() wrote: each array's own metadata)
        g = zarr.open_group(where.name, mode="r", use_consolidated=False)
    except Exception as err:  # noqa: BLE001
        return f"{where.join('zarr.json')} cannot be read ({_why(err)})"
    for name in [_RECORDS, *record.get("variables", [])]:
        meta = where.join(name, "zarr.json")
        if not where.exists(name, "zarr.json"):
            return f"{meta} is missing"
        try:
            g[name]
        except Exception as err:  # noqa: BLE001
            return f"{meta} cannot be read ({_why(err)})"
    return None


def open_dataset(path: str | os.PathLike):
    """The sweep's dataset in the store at ``path``, lazily (``xarray.open_zarr``: dask arrays,
    one chunk per region), its record (``rollax_store``) among the attributes."""
    import xarray as xr

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Object at .* is not recognized")
        return xr.open_zarr(Location(path).name, consolidated=True)


@contextlib.contextmanager
def _made_elsewhere():
    """Ignore an array that another process created first (its metadata is this one's)."""
    from zarr.errors import ContainsArrayError

    try:
        yield
    except ContainsArrayError:
        pass


def _fill(dtype):
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return False
    return 0


def _no_description(name, v):
    return tuple(f"{name}_dim_{k}" for k in range(1, v.ndim)), {}


def _jsonable(d):
    return json.loads(json.dumps(d, default=_default))


def _default(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    return str(x)
