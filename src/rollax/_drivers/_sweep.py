"""``rollax.sweep``: a grid of runs over any axes that name state components or parameters.

Each axis is a state component of the system (``"beta"``) or a parameter field (``"mu"``, or
a dotted path such as ``"rim.mu"`` for a nested module). The grid is the Cartesian product of
the axes (row-major, the first axis slowest); a state component not on an axis comes from
``y0``, a parameter not on an axis from ``system``. The runs go through
:func:`rollax.solve_ensemble` (parameters on an axis become per-start parameters) in regions
of at most ``chunk_size`` starts (blocks of the grid, :func:`rollax._drivers._store.region_layout`;
a grid that fits in one region is padded only to a size class,
:func:`rollax._drivers._chunks.chunk_width`), in this process or as tasks on a Dask cluster
(``client``). The results are a labelled ``xarray.Dataset`` (:mod:`rollax._drivers._labels`);
with ``store`` every finished region is written into the zarr store that is that dataset, and
a rerun with the same arguments resumes from it (:mod:`rollax._drivers._store`). Results do not
depend on the chunking, the devices or the workers beyond the placement bound (README).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import os
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence, cast, overload

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax._drivers._chunks import run_chunked, sweep_key
from rollax._drivers._labels import (
    UNSPECIFIED,
    Labels,
    aux_labels,
    dataset_attrs,
    state_units,
)
from rollax._core._eventlog import EventLog
from rollax._core._solution import Solution, Status, code_names
from rollax._core._system import AbstractSystem, classify, parameter_fields, parameter_units

_FIELDS = (
    "t",
    "y",
    "mode",
    "aux",
    "status",
    "event",
    "counts",
    "t_first",
    "steps",
    "resets",
    "rejected",
)


@dataclasses.dataclass(frozen=True)
class Axis:
    """One axis of a sweep: a state component or parameter and its ``n`` values from ``lo`` to
    ``hi``, spaced ``"linear"`` (``numpy.linspace``) or ``"log"`` (``numpy.geomspace``, for
    ``0 < lo``); or any values, with :meth:`Axis.of`."""

    name: str
    lo: float
    hi: float
    n: int
    spacing: str = "linear"
    points: tuple[float, ...] | None = None  # the values themselves (Axis.of)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"axis name = {self.name!r} must be a non-empty string")
        for k in ("lo", "hi"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(v)):
                raise ValueError(f"{self.name} {k} = {v!r} must be a finite number")
        if self.points is not None:
            return  # checked by Axis.of
        if not self.lo < self.hi:
            raise ValueError(f"{self.name} range = ({self.lo!r}, {self.hi!r}) must have lo < hi")
        if not (
            isinstance(self.n, (int, np.integer)) and not isinstance(self.n, bool) and self.n >= 2
        ):
            raise ValueError(f"{self.name} grid size = {self.n!r} must be an integer >= 2")
        if self.spacing not in ("linear", "log"):
            raise ValueError(
                f"{self.name} spacing = {self.spacing!r} is not allowed: it must be "
                f"'linear' or 'log'"
            )
        if self.spacing == "log" and not self.lo > 0:
            raise ValueError(
                f"{self.name} lo = {self.lo!r} is not allowed with log spacing: it must be > 0"
            )

    @classmethod
    def of(cls, name: str, values) -> "Axis":
        """An axis through the given values (any order: random or Latin-hypercube samples of
        one variable, a refined stretch, measured values): finite, distinct, at least one."""
        try:
            v = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} values = {values!r} must be numbers") from None
        if v.ndim != 1 or v.size < 1:
            raise ValueError(
                f"{name} values have shape {v.shape}; they must be a list of at least one number"
            )
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} values must be finite numbers; got {values!r}")
        if np.unique(v).size != v.size:
            raise ValueError(f"{name} values repeat a value; each point must be distinct")
        return cls(
            name, float(v.min()), float(v.max()), int(v.size), "points", tuple(float(x) for x in v)
        )

    @property
    def values(self) -> np.ndarray:
        if self.points is not None:
            return np.asarray(self.points)
        if self.spacing == "log":
            return np.geomspace(self.lo, self.hi, self.n)
        return np.linspace(self.lo, self.hi, self.n)


@dataclasses.dataclass
class SweepResult:
    """The runs of a sweep: every array has the grid's shape ``(a.n for a in axes)`` first.

    :attr:`dataset` is the labelled result, an ``xarray.Dataset``; the result reads as it
    wherever it defines nothing itself: ``res["t_end"]``, ``res.sel(beta=1.2)``, ``res.attrs``,
    ``res.to_zarr(path)``. Its own fields are the arrays of the runs (``outcome``, the
    ``solution`` fields, the ``summary``) and the ``system`` and ``axes`` they came from.

    A sweep with a ``store`` whose results exceed :data:`LAZY_BYTES` (256 MiB; or any, with
    ``lazy=True``) returns a result backed by it: the dataset is ``xarray.open_zarr(store)``
    and the arrays are dask arrays that read the store only where they are used
    (``res.sel(...)``, ``np.asarray(res.outcome[:10])``), so that a sweep of any size returns
    without loading it (another sweep into the same store changes what it reads). A smaller
    one is read into memory from the store at the end. :meth:`counts` is the regions' own
    counts, summed, and ``counts(by=axis)`` streams through the store. ``work`` says where the
    regions ran: ``computed`` and ``loaded`` (verified in the store) and, per process
    (``"pid@host"``), its regions, XLA compiles and compile-cache hits."""

    system: AbstractSystem
    axes: tuple[Axis, ...]
    outcome: np.ndarray  # the system's outcome code per run
    solution: dict[str, np.ndarray]  # the fields of rollax.Solution per run
    summary: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # see sweep()
    dataset: Any = None  # the labelled results: an xarray.Dataset (see sweep())
    tallies: dict[str, int] | None = None  # runs per outcome, summed from the regions' counts
    work: dict[str, Any] | None = None  # regions computed and loaded, and per worker process

    def __getitem__(self, name):
        """A variable or coordinate of :attr:`dataset` (``res["t_end"]``, ``res["beta"]``)."""
        return self.dataset[name]

    def __getattr__(self, name):
        # what SweepResult does not define itself comes from its dataset, so that a result
        # reads as the labelled xarray.Dataset it is (res.sel(beta=1.2), res.attrs,
        # res.to_zarr(...), res.data_vars); its own fields (outcome, solution, ...) come first
        if name.startswith("_") or name == "dataset":
            raise AttributeError(name)
        ds = self.__dict__.get("dataset")
        if ds is None:
            raise AttributeError(name)
        return getattr(ds, name)

    @property
    def outcome_name(self) -> np.ndarray:
        """:attr:`outcome` as the names of the system's ``outcomes`` enumeration (of
        :class:`rollax.Status` if it has none), with the grid's shape."""
        # (an array, not one name: a sweep has at least one axis)
        return cast(np.ndarray, code_names(self.outcome, self.system.outcomes or Status))

    @property
    def status_name(self) -> np.ndarray:
        """Every run's :class:`rollax.Status` as its name, with the grid's shape."""
        self._solution_kept("status_name")
        return cast(np.ndarray, code_names(self.solution["status"], Status))

    def _solution_kept(self, what: str) -> None:
        if not self.solution:
            raise ValueError(
                f"{what} is not available: the sweep was run with "
                f"keep_solution=False (only the outcome and the summary kept)"
            )

    def as_solution(self) -> Solution:
        """The runs as one :class:`rollax.Solution` with the grid's shape first (for
        :func:`rollax.classify` and the other functions of a solution)."""
        self._solution_kept("as_solution()")
        # (NumPy arrays, which Solution's annotations, JAX arrays, leave out; a result in a
        # store is read here: a solution is in memory)
        fields = {f: np.asarray(self.solution[f]) for f in _FIELDS}
        ys = self.solution.get("ys")
        return Solution(**fields, ys=None if ys is None else np.asarray(ys), events=self.events)  # pyright: ignore[reportArgumentType]

    @property
    def events(self) -> EventLog | None:
        """The runs' event logs (``save_events``) with the grid's shape first, or None."""
        log = {
            k[len("events.") :]: np.asarray(v)
            for k, v in self.solution.items()
            if k.startswith("events.")
        }
        return EventLog(**log) if log else None  # pyright: ignore[reportArgumentType]  (NumPy arrays)

    @overload
    def counts(self, by: None = None) -> dict[str, int]: ...

    @overload
    def counts(self, by: str) -> Any: ...

    def counts(self, by: str | None = None):
        """Runs per outcome (by the names of the system's ``outcomes`` enumeration).

        ``by``: an axis's name: the runs per outcome at each of its values, an
        ``xarray.DataArray`` of dimensions ``(by, "outcome")``, computed chunk by chunk (on the
        cluster's workers when a Dask client is the default)."""
        names = self.system.outcomes or Status
        if by is None:
            if self.tallies is not None:
                return dict(self.tallies)
            return {m.name.lower(): int(np.sum(self.outcome == m.value)) for m in names}
        dims = [a.name for a in self.axes]
        if by not in dims:
            raise ValueError(f"by = {by!r} is not allowed: it must be one of the axes {dims}")
        import xarray as xr

        oc = self.dataset["outcome"] if self.dataset is not None else None
        if oc is None:
            oc = xr.DataArray(np.asarray(self.outcome), dims=dims)
        codes = xr.DataArray([m.value for m in names], dims="outcome")
        counts = (oc == codes).sum([d for d in dims if d != by]).transpose(by, "outcome")
        counts = counts.compute().astype(np.int64)
        counts = counts.assign_coords(
            {by: self.axes[dims.index(by)].values, "outcome": [m.name.lower() for m in names]}
        )
        counts.attrs.update(units="1", long_name=f"runs per outcome at each {by}")
        return counts

    def save(self, path: str | os.PathLike, format: str | None = None) -> Path:
        """Write :attr:`dataset` to ``path``: a zarr store (``format="zarr"``, or a path ending
        in ``.zarr``) or a netCDF file (``"netcdf"``, or ``.nc``); ``xarray.open_zarr`` /
        ``xarray.open_dataset`` read it back."""
        from rollax._drivers._labels import write_dataset

        return write_dataset(self.dataset, path, format)


def _param_path(system: AbstractSystem, name: str):
    """The accessor of a scalar parameter (a :func:`rollax.parameter` field) by name (``mu`` or
    ``rim.mu``), or a ValueError."""
    fields = {
        k: p
        for k, p in parameter_fields(system).items()
        if jnp.ndim(cast(jax.Array, _get(system, p))) == 0
    }
    hits = [p for s, p in fields.items() if s == name or s.endswith("." + name)]
    if len(hits) != 1:
        allowed = sorted(fields) + list(system.state_names)
        why = "is ambiguous" if hits else "is not a state component or scalar parameter"
        raise ValueError(
            f"axis name = {name!r} {why} of {type(system).__name__}; allowed: {allowed} "
            f"(a parameter is a field declared with rollax.parameter)"
        )
    path = hits[0]
    return lambda s: _get(s, path)


def _get(node, path):
    for k in path:
        node = node[int(k)] if isinstance(node, (tuple, list)) else getattr(node, k)
    return node


def _or(value, default):
    return default if value is None else value


def sweep(
    system: AbstractSystem,
    axes: Sequence[Axis],
    *,
    y0: Sequence[float] | Mapping[str, float] | None = None,
    t0: float = 0.0,
    t1: float,
    mode: int | str | None = None,
    chunk_size: int = 1 << 17,
    store: str | os.PathLike | None = None,
    client=None,
    start=None,
    attrs: Mapping[str, Any] | None = None,
    progress: bool = True,
    summary=None,
    keep_solution: bool = True,
    lazy: bool | None = None,
    **solver_options,
) -> SweepResult:
    """Run ``system`` over the grid of ``axes`` (the Cartesian product of the axes, row-major,
    the first axis slowest; each axis a state component or a parameter field, dotted for a
    nested module: ``"rim.mu"``); returns a :class:`SweepResult`.

    ``y0``: the state components not on an axis (a full state vector, or a mapping from
    ``state_names`` to values). ``mode``: every run's starting mode (None: each start's
    ``system.initial_mode``). ``solver_options`` go to :func:`rollax.solve_ensemble`
    (``rtol``, ``atol``, ``max_steps``, ``lanes``, ``devices``, ...). ``summary(system, sol)``:
    per-run quantities of one run's :class:`rollax.Solution` (a dict of arrays), computed
    chunk by chunk (so they are saved with the chunks) into ``SweepResult.summary``.
    ``start(**values) -> y0``: the start of a run from the values of the axes it takes by name
    (a release's speed and angle: :func:`rollax.models.shot.release_state`; with
    ``functools.partial`` for fixed arguments; ``start.units`` may give their units), traced
    and batched over each region; an axis is then a ``start`` argument, a state component or
    a parameter. ``keep_solution=False``: keep only the outcome and the summary (``SweepResult.solution``
    empty), for sweeps whose summary says all they need: less memory, smaller chunks and, on a
    GPU, a smaller transfer back.

    The results are labelled: :attr:`SweepResult.dataset` is an ``xarray.Dataset`` with one
    dimension per axis (its values and units as the coordinate), one variable per result
    (units, long names, CF flags for the outcome; :mod:`rollax._drivers._labels`) and the
    system, its parameters, the settings, the versions, the date and the command line as
    attributes. A summary function may carry ``summary.units = {"name": "s", ...}`` and
    ``summary.long_names`` (by default a summary's integers have units ``"1"``, its floats
    ``"unspecified"``).

    ``store``: a zarr store (a directory, ``.zarr`` by convention, or an fsspec URL such as
    ``s3://bucket/sweep.zarr`` for an object store) that is the dataset, written region by region as the sweep runs (:mod:`rollax._drivers._store`); a rerun with the same
    arguments resumes from it, computing only regions missing or not trusted (stale, altered,
    unreadable: a one-line :class:`rollax.StoreWarning`), with any ``lanes`` and ``devices``
    (where the starts run is not part of the sweep's identity); a store of another sweep is
    replaced, but only after every setting has been checked; ``xarray.open_zarr(store)`` reads
    the result. ``client``: a ``dask.distributed.Client``: each region is a task on its
    workers (``pip install "rollax[distributed]"``), with the same results: each worker
    verifies or computes its regions and writes them into the store itself, and the client
    receives only their counts, so that it never holds more than a region's results.
    ``lazy``: return a result that reads the store (see :class:`SweepResult`; default: when
    the results exceed :data:`LAZY_BYTES`). ``attrs``: more
    dataset attributes. The starts are built region by region; a grid whose results would not
    fit in memory (or its store on disk) is refused up front (``MemoryError``, ``OSError``).
    SIGINT/SIGTERM raise :class:`rollax.SweepInterrupted` within about a tenth of a second,
    keeping the finished regions.
    """
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a rollax.AbstractSystem, got {type(system).__name__}")
    if isinstance(axes, (str, bytes, Axis)) or not isinstance(axes, Sequence):
        raise ValueError(f"axes = {axes!r} is not allowed: it must be a list of rollax.Axis")
    axes = tuple(axes)
    if not axes:
        raise ValueError("axes must name at least one state component or parameter")
    for a in axes:
        if not isinstance(a, Axis):
            raise ValueError(
                f"axis = {a!r} is not allowed: each axis must be a rollax.Axis(name, lo, hi, n)"
            )
    if system.batch_shape():
        raise ValueError(
            f"the parameters of {type(system).__name__} have batch shape "
            f"{system.batch_shape()}; rollax.sweep takes one value per parameter "
            f"(a parameter that varies goes on an axis)"
        )
    if store is not None and not isinstance(store, (str, os.PathLike)):
        raise ValueError(
            f"store = {store!r} is not allowed: it must be a directory path, an fsspec URL "
            f"(s3://bucket/sweep.zarr) or None"
        )
    if client is not None and not hasattr(client, "submit"):
        raise ValueError(
            f"client = {client!r} is not allowed: it must be a dask.distributed.Client or None"
        )
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise ValueError(f"axes = {names} name a variable twice")
    state_ix = {
        a.name: system.state_names.index(a.name) for a in axes if a.name in system.state_names
    }
    start_names = _start_names(start, axes, state_ix, system)
    getters = {
        a.name: _param_path(system, a.name)
        for a in axes
        if a.name not in state_ix and a.name not in start_names
    }
    if start is not None:
        if state_ix or y0 is not None:
            raise ValueError(
                "with start, the start function gives the whole state: y0 and state-component "
                f"axes ({sorted(state_ix)}) are not allowed; make them arguments of start"
            )
        base = np.asarray(
            _starts(
                start,
                tuple(start_names),
                jnp.asarray([[a.lo for a in axes if a.name in start_names]]),
            )
        )[0]
    else:
        base = _base_state(system, y0, set(state_ix))
    for a in axes:
        if a.name in getters and not _reaches(system, getters[a.name], base, t0):
            warnings.warn(
                f"sweep axis {a.name!r}: {type(system).__name__}'s vector field, "
                f"events, reset, initial mode and outcome do not use it, so every "
                f"value on this axis gives the same runs",
                UserWarning,
                stacklevel=2,
            )
    if lazy is not None and not isinstance(lazy, bool):
        raise ValueError(f"lazy = {lazy!r} is not allowed: it must be True, False or None")
    if lazy and store is None:
        raise ValueError(
            "lazy = True is not allowed without a store: a lazy result reads the store"
        )
    if not isinstance(keep_solution, bool):
        raise ValueError(
            f"keep_solution = {keep_solution!r} is not allowed: it must be True or False"
        )
    if not keep_solution and solver_options.get("ts") is not None:
        raise ValueError(
            "ts is not allowed with keep_solution=False (the saved states are part of the solution)"
        )
    if not keep_solution and solver_options.get("save_events"):
        raise ValueError(
            f"save_events = {solver_options['save_events']!r} is not allowed with "
            f"keep_solution=False (the event logs are part of the solution)"
        )
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size = {chunk_size!r} must be an integer >= 1")
    _check_solver_options(system, t0, t1, solver_options)
    shape = tuple(int(a.n) for a in axes)
    n = math.prod(shape)
    values = [a.values for a in axes]

    # with the fused backend the grid is built on the device from the axes' values, so that
    # nothing of the chunk's size passes through NumPy or crosses the bus before the kernel
    from rollax._integrate import queue

    on_device = queue.check_backend(solver_options.get("backend", "auto")) == "fused"
    values_dev = tuple(jnp.asarray(v, dtype=float) for v in values) if on_device else ()

    def points(lo, hi):  # rows lo:hi of the grid, row-major (the first axis slowest)
        if on_device:
            return _grid_rows(jnp.asarray(lo, dtype=jnp.int64), values_dev, shape, hi - lo)
        # each axis's column as runs of equal values (np.repeat with counts; the fastest axis
        # its values tiled): no index array per start (30 -> 8 ms for a million starts on an
        # H100 host), and no more memory than the chunk whatever the grid's size
        out = np.empty((hi - lo, len(shape)))
        stride = 1
        for k in range(len(shape) - 1, -1, -1):
            j0, j1 = lo // stride, (hi - 1) // stride
            if stride == 1:
                reps = -(-(hi - j0 // shape[k] * shape[k]) // shape[k])
                col = np.tile(values[k], reps)[lo % shape[k] :][: hi - lo]
            else:
                counts = np.full(j1 - j0 + 1, stride)
                counts[0] -= lo - j0 * stride
                counts[-1] -= (j1 + 1) * stride - hi
                col = np.repeat(values[k][np.arange(j0, j1 + 1) % shape[k]], counts)
            out[:, k] = col
            stride *= shape[k]
        return out

    on_state = tuple((k, state_ix[a.name]) for k, a in enumerate(axes) if a.name in state_ix)

    on_start = tuple(k for k, a in enumerate(axes) if a.name in start_names)

    warmed: list = []  # (a list: it travels to a Dask worker with the function)
    keep_events = bool(solver_options.get("save_events", 0))

    def run(chunk, valid, report):
        if start is not None:
            ys = _starts(start, tuple(start_names), jnp.asarray(chunk)[:, jnp.asarray(on_start)])
        elif isinstance(chunk, jax.Array):
            ys = _fill_states(jnp.asarray(base, dtype=float), chunk, on_state)
        else:
            ys = np.empty((len(chunk), base.size))
            ys[:] = base
            for k, i in on_state:
                ys[:, i] = chunk[:, k]
        sys_b = system
        for k, a in enumerate(axes):
            if a.name in getters:
                sys_b = eqx.tree_at(getters[a.name], sys_b, jnp.asarray(chunk[:, k]))
        # the fused path's results stay on the device through the classification, and come
        # back in one transfer of what the sweep keeps (benchmarks/RESULTS.md, stop 36)
        # (imported here: a ContextVar in the closure could not be sent to a Dask worker)
        from rollax._integrate._ensemble import _IN_SWEEP, solve_ensemble

        warm = None
        if not warmed and not on_device and not keep_events:
            # the outcomes' (and summary's) program compiled beside the kernel, not after it:
            # a first sweep's bar stood 5-12 s at N-1/N compiling it (issue 56)
            warmed.append(True)
            warm = threading.Thread(
                target=_warm_outcomes,
                args=(system, sys_b, len(ys), summary),
                name="rollax-outcomes",
                daemon=True,
            )
            warm.start()
        token = _IN_SWEEP.set(True)
        try:
            sol = solve_ensemble(
                sys_b, ys, t0, t1, mode=mode, valid=valid, progress=report, **solver_options
            )
        finally:
            _IN_SWEEP.reset(token)
        if warm is not None:  # (not on an interrupt: that stops at once, within a second)
            warm.join()
        out = {f: getattr(sol, f) for f in _FIELDS} if keep_solution else {}
        if sol.ys is not None and keep_solution:  # ts: the saved states, (rows, m, d)
            out["ys"] = sol.ys
        if sol.events is not None and keep_solution:  # save_events: stored with the chunk
            out.update(
                {
                    f"events.{f.name}": getattr(sol.events, f.name)
                    for f in dataclasses.fields(EventLog)
                }
            )
        if summary is None:
            out["outcome"] = classify(sys_b, sol)
        else:
            # one program for both: the rim's summary classifies too (its flight), and XLA
            # shares that work (Fig. 11 panel: 5 ms of classification saved)
            outcome, extra = _per_run(_with_outcome(summary), sys_b, sol)
            out["outcome"] = outcome
            out.update({f"summary.{k}": v for k, v in extra.items()})
        return labels.label({k: np.asarray(v) for k, v in jax.device_get(out).items()})

    labels = Labels(
        system,
        keep_solution,
        getattr(summary, "units", None),
        getattr(summary, "long_names", None),
        tuple(names),
    )
    key = sweep_key(
        dict(
            kind="rollax.sweep",
            system=type(system).__qualname__,
            static=_static_repr(eqx.filter(system, eqx.is_array, inverse=True)),
            params={
                jax.tree_util.keystr(k): np.asarray(v).tolist()
                for k, v in jax.tree_util.tree_leaves_with_path(eqx.filter(system, eqx.is_array))
            },
            # (an axis's default spacing is left out: the keys of chunks saved before it existed)
            axes=[
                {
                    k: v
                    for k, v in dataclasses.asdict(a).items()
                    if (k, v) not in (("spacing", "linear"), ("points", None))
                }
                for a in axes
            ],
            y0=base.tolist(),
            **({} if start is None else {"start": _describe_fn(start)}),
            t0=t0,
            t1=t1,
            mode=str(mode),
            # (arrays by value: numpy's repr elides long ones, and two ts would share chunks)
            # (the lanes and devices change no result beyond the placement bound, README: a
            # rerun with others, or on a machine with another core count, resumes)
            options={
                k: repr(np.asarray(v).tolist() if isinstance(v, (np.ndarray, jax.Array)) else v)
                for k, v in sorted(solver_options.items())
                if k not in _PLACEMENT
            },
            summary=None if summary is None else getattr(summary, "__qualname__", repr(summary)),
            # the system's defaults, which a call may leave out (a new default must not reuse chunks)
            solver=repr(_or(solver_options.get("solver"), system.solver)),
            n_samples=repr(_or(solver_options.get("n_samples"), system.n_samples)),
            **(
                {"dt_max": repr(_or(solver_options.get("dt_max"), system.dt_max))}
                if system.dt_max is not None
                else {}
            ),
            # version 4: the kernel steps to the jump times (a robot's runs changed at rounding
            # level); 5: steps whose samples may hide a pair of crossings are rejected
            # (events.unresolved), and the rejected steps are kept
            chunk_size=chunk_size,
            version=5,
            **({} if keep_solution else {"keep_solution": False}),
            # the aux variables' names and units (a store of other labels is another sweep)
            **({} if aux_labels(system) is None else {"aux_labels": aux_labels(system)}),
        )
    )
    params = {k: np.asarray(_get(system, p)).tolist() for k, p in parameter_fields(system).items()}
    units = parameter_units(system)
    s_units = dict(zip(system.state_names, state_units(system)))
    coords: dict[str, tuple] = {}
    for a, v in zip(axes, values):
        if a.name in start_names:
            u, kind = _start_units(start).get(a.name), "start argument"
        elif a.name in state_ix:
            u, kind = s_units.get(a.name), "state component"
        else:
            u, kind = _axis_units(units, a.name), "parameter"
        coords[a.name] = (
            (a.name,),
            np.asarray(v, float),
            {"units": u or UNSPECIFIED, "long_name": f"{a.name} ({kind}, sweep axis)"},
        )
    if keep_solution and system.events:
        coords["event_name"] = (
            ("event_name",),
            np.array([e.name for e in system.events]),
            {"long_name": "event"},
        )
    if keep_solution and solver_options.get("ts") is not None:
        coords["save_time"] = (
            ("save_time",),
            np.asarray(solver_options["ts"], float),
            {"units": labels.time, "long_name": "save times (ts)"},
        )
    meta = dataset_attrs(
        system,
        params,
        {k: u or UNSPECIFIED for k, u in units.items()},
        dict(
            axes=[a.name for a in axes],
            y0=dict(zip(system.state_names, base.tolist())) if start is None else None,
            start=None if start is None else _describe_fn(start),
            t0=t0,
            t1=t1,
            mode=mode,
            summary=None if summary is None else getattr(summary, "__qualname__", repr(summary)),
            keep_solution=keep_solution,
            options={
                k: np.asarray(v).tolist() if isinstance(v, (np.ndarray, jax.Array)) else v
                for k, v in solver_options.items()
            },
        ),
    )
    meta.update(dict(attrs or {}))
    # the labelled dataset's library loaded beside the kernel: imported after the bar it held
    # a full bar for 3-4 s on a loaded machine (issue 56)
    threading.Thread(target=_warm_xarray, daemon=True).start()
    codes = tuple(int(m.value) for m in (system.outcomes or Status))
    row_bytes = _row_bytes(
        system,
        summary,
        int(solver_options.get("save_events") or 0),
        keep_solution,
        int(np.size(solver_options["ts"])) if solver_options.get("ts") is not None else 0,
    )
    if lazy is None:
        lazy = store is not None and n * row_bytes > LAZY_BYTES
    elif store is not None and not lazy:  # read into memory at the end: it must fit
        from rollax._drivers._chunks import check_fits

        check_fits(n, row_bytes)
    res = run_chunked(
        run,
        points,
        n=n,
        shape=shape,
        chunk_size=chunk_size,
        store=store,
        key=key,
        store_options=dict(
            dims=tuple(a.name for a in axes), coords=coords, attrs=meta, describe=labels.describe
        ),
        row_bytes=row_bytes,
        progress=progress,
        desc=type(system).__name__,
        client=client,
        keep=store is None,
        tally=_Tally(codes),
    )
    names_ = system.outcomes or Status
    tallies = {m.name.lower(): int(res.tallies["outcome"][k]) for k, m in enumerate(names_)}
    work = dict(computed=res.computed, loaded=res.loaded, workers=res.workers)
    if store is not None:
        from rollax._drivers._store import finish, open_dataset

        finish(store, meta)  # (this call's attributes: its date, command, options)
        # the result stays in the store: dask arrays that read it where they are used (or,
        # small, read into memory at once: a snapshot that a later sweep into the same store
        # does not change)
        dataset = open_dataset(store)
        if not lazy:
            dataset = dataset.load()
        record = dataset.attrs.pop("rollax_store", {})
        sweep_vars = record.get("variables") or [
            k
            for k in dataset.data_vars
            if k not in coords  # (a store from before the list)
        ]
        arrays = {str(k): dataset[k].data for k in sweep_vars}
        grid = labels.unlabel(arrays)
    else:
        dataset = _dataset(res, shape, axes, coords, meta, labels)
        raw = labels.unlabel(res)
        grid = {k: v.reshape(shape + v.shape[1:]) for k, v in raw.items()}
    outcome = grid.pop("outcome")
    extra = {k[len("summary.") :]: v for k, v in grid.items() if k.startswith("summary.")}
    sol = {k: v for k, v in grid.items() if not k.startswith("summary.")}
    return SweepResult(system, axes, outcome, sol, extra, dataset, tallies, work)


class _Tally:
    """A region's runs per outcome code (picklable: computed where the region is)."""

    def __init__(self, codes: tuple[int, ...]):
        self.codes = codes

    def __call__(self, part: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        oc = np.asarray(part["outcome"])
        return {"outcome": np.array([np.count_nonzero(oc == c) for c in self.codes], np.int64)}


#: Results larger than this (bytes in memory) come back lazily from a sweep's store by default
LAZY_BYTES = 256 * 2**20

#: Solver options that say where the starts run, not what is computed: left out of the key
_PLACEMENT = ("lanes", "devices")


def _check_solver_options(system, t0, t1, options: Mapping[str, Any]) -> None:
    """The solver options checked as :func:`rollax.solve_ensemble` checks them, before the
    store is opened: a bad one found by the first region's solve came after a store of
    another sweep had been replaced (a finished map lost to ``--devices 99``)."""
    from rollax._integrate._ensemble import OPTIONS, check_settings

    own = {"mode", "valid", "progress"}
    allowed = [k for k in OPTIONS if k not in own]
    for k, v in options.items():
        if k not in allowed:
            raise ValueError(
                f"{k} = {v!r} is not allowed: rollax.sweep passes its solver options to "
                f"rollax.solve_ensemble, which takes {', '.join(allowed)}"
            )
    check_settings(system, t0, t1, **options)


def _start_names(start, axes, state_ix, system) -> list[str]:
    """The axes that are arguments of ``start`` (in the axes' order)."""
    if start is None:
        return []
    if not callable(start):
        raise ValueError(f"start = {start!r} is not allowed: it must be a function or None")
    import inspect

    try:
        sig = inspect.signature(start)
    except (TypeError, ValueError):
        return [a.name for a in axes if a.name not in state_ix]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    fields = {k.split(".")[-1] for k in parameter_fields(system)} | set(parameter_fields(system))
    out = []
    for a in axes:
        if a.name in sig.parameters or (takes_any and a.name not in fields):
            out.append(a.name)
    return out


@functools.partial(jax.jit, static_argnums=(0, 1))
def _starts(start, names: tuple, cols):
    """``start`` over the rows of ``cols`` (one column per name): the runs' states."""
    return jax.vmap(lambda row: jnp.asarray(start(**dict(zip(names, row))), float))(cols)


def _describe_fn(f) -> str:
    """A stable description of a function (and a partial's fixed arguments), for the sweep's
    key and attributes."""
    if isinstance(f, functools.partial):
        kw = ", ".join(f"{k}={v!r}" for k, v in sorted(f.keywords.items()))
        args = ", ".join(repr(a) for a in f.args)
        return f"{_describe_fn(f.func)}({', '.join(x for x in (args, kw) if x)})"
    return f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', type(f).__name__)}"


def _start_units(start) -> dict:
    while start is not None:
        if isinstance(getattr(start, "units", None), dict):
            return start.units
        start = getattr(start, "func", None)
    return {}


def _axis_units(units: Mapping[str, str | None], name: str) -> str | None:
    hits = [u for k, u in units.items() if k == name or k.endswith("." + name)]
    return hits[0] if len(hits) == 1 else None


def _dataset(out, shape, axes, coords, attrs, labels: Labels):
    """The labelled results as an ``xarray.Dataset`` (NumPy arrays, no copy)."""
    import xarray as xr

    dims = tuple(a.name for a in axes)
    data = {}
    for k, v in out.items():
        trailing, vattrs = labels.describe(k, v)
        data[k] = xr.Variable(dims + trailing, v.reshape(shape + v.shape[1:]), vattrs)
    cs = {k: xr.Variable(d, v, a) for k, (d, v, a) in coords.items()}
    return xr.Dataset(data, coords=cs, attrs=attrs)


@functools.partial(jax.jit, static_argnames=("shape", "rows"))
def _grid_rows(lo, values: tuple, shape: tuple, rows: int):
    """Rows ``lo:lo + rows`` of the row-major grid of the axes' ``values`` (the first axis
    slowest), built on the device: the same numbers as the sweep's NumPy grid."""
    i = lo + jnp.arange(rows, dtype=jnp.int64)
    cols, stride = [], 1
    for k in range(len(shape) - 1, -1, -1):
        cols.append(values[k][(i // stride) % shape[k]])
        stride *= shape[k]
    return jnp.stack(cols[::-1], axis=1)


@functools.partial(jax.jit, static_argnames=("on_state",))
def _fill_states(base, chunk, on_state: tuple):
    """The starts of ``chunk``'s rows: ``base`` with state ``i`` set to column ``k`` for each
    ``(k, i)`` of ``on_state``, on the device."""
    ys = jnp.broadcast_to(base, (chunk.shape[0], base.shape[0]))
    for k, i in on_state:
        ys = ys.at[:, i].set(chunk[:, k])
    return ys


def _reaches(system: AbstractSystem, getter, y, t0) -> bool:
    """Whether the parameter leaf at ``getter`` is read by the system's vector field, events,
    reset, initial mode or outcome (traced once, with the mode and event traced so that every
    branch counts): a structural test, not a value at one state."""
    from rollax._core._solution import Solution

    n = len(system.events)
    leaf = jnp.asarray(getter(system))

    def used(p, t, y, mode, aux, event):
        s_ = eqx.tree_at(getter, system, p)
        sol = Solution(
            t=t,
            y=y,
            mode=mode,
            aux=aux,
            status=event,
            event=event,
            counts=jnp.zeros(n, jnp.int32),
            t_first=jnp.zeros(n, y.dtype),
            steps=event,
            resets=event,
            rejected=event,
        )
        return (
            s_.vector_field(t, y, mode),
            s_.event_values(t, y, mode),
            s_.reset(t, y, mode, aux, event),
            s_.initial_mode(t, y),
            s_.initial_aux(y, mode),
            s_.outcome(sol),
        )

    try:
        closed = jax.make_jaxpr(used)(
            leaf,
            jnp.asarray(t0, float),
            jnp.asarray(y, float),
            jnp.int32(0),
            jnp.zeros(system.n_aux),
            jnp.int32(0),
        )
    except Exception:  # a method that cannot be traced this way: no claim, no warning
        return True
    jaxpr = closed.jaxpr
    p_vars = {id(v) for v in jaxpr.invars[: len(jax.tree_util.tree_leaves(leaf))]}
    return any(id(v) in p_vars for e in jaxpr.eqns for v in e.invars) or any(
        id(v) in p_vars for v in jaxpr.outvars
    )


def _row_bytes(
    system: AbstractSystem,
    summary,
    save_events: int = 0,
    keep_solution: bool = True,
    n_ts: int = 0,
) -> int:
    """Bytes of the results of one run (the Solution fields and the outcome; a generous 128
    for a summary; the event log's rows; the states saved at ``n_ts`` times), to refuse a
    sweep that cannot fit before any work."""
    n_ev = len(system.events)
    d = system.state_dim
    fields = 8 + 8 * d + 4 + 8 * system.n_aux + 4 + 4 + 12 * n_ev + 4 + 4 + 4
    row = 4 + (fields if keep_solution else 0)  # the outcome, then the Solution's fields
    log = 4 + save_events * (8 + 4 + 4 + 8 + 4 + 16 * d) if save_events else 0
    return row + log + 8 * n_ts * d + (_summary_bytes(system, summary) if summary else 0)


def _static_repr(static) -> str:
    """``repr`` of a system's static part (its key in a store), kept per value: equinox's
    pretty printer took 3 ms of every warm map (benchmarks/gpu/host_path.py)."""
    try:
        return _static_repr_kept(static)
    except TypeError:  # (unhashable)
        return repr(static)


@functools.lru_cache(maxsize=64)
def _static_repr_kept(static) -> str:
    return repr(static)


def _summary_bytes(system: AbstractSystem, summary) -> int:
    """Bytes per run of what ``summary`` returns (its shapes and dtypes, traced abstractly on
    one run); 128 when it cannot be traced so. Kept per summary, system class, static fields
    and parameter shapes: the trace took 80 ms of every warm 1000 x 1000 map on this 2-core
    CPU (``benchmarks/gpu/host_path.py``), a third of the map's time beside an H100's kernel."""
    dyn, static = eqx.partition(system, eqx.is_array)
    try:
        key = (
            summary,
            static,
            jax.tree.structure(dyn),
            tuple((np.shape(x), str(x.dtype)) for x in jax.tree.leaves(dyn)),
        )
        hash(key)
    except TypeError:  # (unhashable static fields: traced each time)
        return _summary_bytes_traced(system, summary)
    if key not in _SUMMARY_BYTES:
        if len(_SUMMARY_BYTES) >= 64:
            _SUMMARY_BYTES.clear()
        _SUMMARY_BYTES[key] = _summary_bytes_traced(system, summary)
    return _SUMMARY_BYTES[key]


_SUMMARY_BYTES: dict = {}


def _summary_bytes_traced(system: AbstractSystem, summary) -> int:
    from rollax._core._solution import Solution

    n, d, p = system.event_set.n, system.state_dim, system.n_aux
    i32 = jax.ShapeDtypeStruct((), jnp.int32)
    f64 = jax.ShapeDtypeStruct((), jnp.float64)
    shapes = dict(
        t=f64,
        y=jax.ShapeDtypeStruct((d,), jnp.float64),
        mode=i32,
        aux=jax.ShapeDtypeStruct((p,), jnp.float64),
        status=i32,
        event=i32,
        counts=jax.ShapeDtypeStruct((n,), jnp.int32),
        t_first=jax.ShapeDtypeStruct((n,), jnp.float64),
        steps=i32,
        resets=i32,
        rejected=i32,
    )
    try:
        # (the Solution built from the traced values: its fields' checks take arrays)
        out = jax.eval_shape(lambda f: summary(system, Solution(**f)), shapes)
        return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree.leaves(out))
    except Exception:  # noqa: BLE001 - a summary that cannot be traced alone: a generous bound
        return 128


def _warm_xarray() -> None:
    """xarray and the array libraries it looks for on its first variable (dask.array: 2.3 s
    of a first sweep's dataset, measured), loaded beside the kernel."""
    try:
        import xarray

        xarray.Variable(("x",), np.zeros(1))
    except Exception:  # the real use says what is wrong
        pass


def _warm_outcomes(system, sys_b, rows: int, summary) -> None:
    """Compile the classification of ``rows`` runs (and the summary) on a solution of zeros of
    the work queue's shapes and dtypes, so that the real call after the kernel finds it
    compiled. Anything that goes wrong here only leaves the compile to that call."""
    from rollax._core._solution import Solution

    try:
        d, p, n = system.state_dim, system.n_aux, system.event_set.n
        i32 = np.zeros(rows, np.int32)
        sol = Solution(  # pyright: ignore[reportArgumentType]
            t=np.zeros(rows),
            y=np.zeros((rows, d)),
            mode=i32,
            aux=np.zeros((rows, p)),
            status=i32,
            event=i32,
            counts=np.zeros((rows, n), np.int32),
            t_first=np.zeros((rows, n)),
            steps=i32,
            resets=i32,
            rejected=i32,
        )
        if summary is None:
            jax.block_until_ready(classify(sys_b, sol))
        else:
            jax.block_until_ready(_per_run(_with_outcome(summary), sys_b, sol))
    except Exception:
        pass


@functools.lru_cache(maxsize=64)
def _with_outcome(summary):
    """``summary`` with the run's outcome in front (one function object per summary, so that
    :func:`_per_run` compiles once for it)."""

    def fn(system, sol):
        return system.outcome(sol), summary(system, sol)

    return fn


@eqx.filter_jit
def _per_run(fn, system, sol):
    """``fn(system, one run)`` over a batch of runs, each with its own parameters."""
    from rollax._core._solution import Solution

    # (pyright: the ** mapping holds _FIELDS, JAX arrays, not events: an EventLog)
    sol = Solution(**{f: jnp.asarray(getattr(sol, f)) for f in _FIELDS})  # pyright: ignore[reportArgumentType]
    return eqx.filter_vmap(fn, in_axes=(system.batch_axes(), 0))(system, sol)


def _number(name, v) -> float:
    try:
        if isinstance(v, (bool, str, bytes)):
            raise TypeError
        return float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {v!r} is not allowed: it must be a number") from None


def _base_state(system, y0, on_axes) -> np.ndarray:
    d = system.state_dim
    names = system.state_names
    if y0 is None:
        y0 = {}
    if isinstance(y0, Mapping):
        unknown = set(y0) - set(names)
        if unknown:
            raise ValueError(
                f"y0 names {sorted(unknown)}, which are not state components of "
                f"{type(system).__name__}; allowed: {list(names)}"
            )
        both = sorted(set(y0) & set(on_axes), key=list(names).index)
        if both:
            raise ValueError(
                f"y0 gives {both}, which {'is' if len(both) == 1 else 'are'} on an "
                f"axis: an axis sets that component at every start; remove it "
                f"from y0 (or from the axes)"
            )
        missing = [n for n in names if n not in y0 and n not in on_axes]
        if missing:
            raise ValueError(f"y0 needs values for {missing} (the state components not on an axis)")
        base = np.array([_number(f"y0[{n!r}]", y0.get(n, 0.0)) for n in names])
    else:
        try:
            base = np.asarray(y0, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(
                f"y0 = {y0!r} is not allowed: it must be {d} numbers or a mapping "
                f"from state names to numbers"
            ) from None
        if base.shape != (d,):
            raise ValueError(f"y0 has shape {base.shape}; {type(system).__name__} needs ({d},)")
    if not np.all(np.isfinite(base)):
        raise ValueError(f"y0 = {base.tolist()} must be finite")
    return base
