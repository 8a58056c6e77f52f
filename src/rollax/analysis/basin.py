"""Basin maps of the ball on the rim: which starts roll periodically, fall in, or fall out.

Sect. 5.1.1 of the rim paper: from each start x0 = (beta, w1, w2, w3) the rolling equations are
integrated until

* w1 has changed sign transversally twice without F2 reaching zero: **periodic**
  (Proposition 4; only without dissipation, where the proposition holds);
* F2 reaches zero: the ball separates and its centre flies as a projectile to the rim plane;
  **in** if it is then closer to the rim axis than R, else **out** (a start with F2 <= 0 falls
  at t = 0). ``recontact`` flags flights that come back within rho of the tube's core circle;
* the time cap ``t_max`` comes first: **undecided**;
* the solve produced NaN or hit the step limit: **failed**.

The runs are those of :class:`rollax.systems.RimRolling`. With ``slip=SlipSettings(...)`` the
ball may slip (finite ``rim.mu``): :class:`rollax.systems.RimSlipping` (the hybrid of
:mod:`rollax.models.slip`) replaces the rolling one, with the extra outcome
**chattering** (switch cap, Zeno-like switching, or a slip that does not converge) and, per
start, the number of roll/slip switches and the total slipping time.

A basin map is a preset of :func:`rollax.sweep` (the ensemble kernel, in resumable chunks).
"""

from __future__ import annotations

import math

import dataclasses
import os
import secrets
from pathlib import Path
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rollax._integrate._ensemble import solve_ensemble
from rollax._drivers._sweep import Axis as SweepAxis
from rollax._drivers._sweep import _per_run, sweep
from rollax._core._validate import check_integer, naming_file
from rollax.models.outcomes import CHATTERING, FAILED, IN, OUT, OUTCOMES, PERIODIC, UNDECIDED  # noqa: F401
from rollax.models.rim import Rim
from rollax.systems.rim import RimRolling, RimSlipping, rolling_result, slip_max_resets, slip_result
from rollax.analysis.steady import steady_beta

VARIABLES = ("beta", "omega1", "omega2", "omega3")
UNITS = {"beta": "rad", "omega1": "1/s", "omega2": "1/s", "omega3": "1/s"}

# Sections of Figs. 11-13 (docs/physics-notes.md): beta in [0.8, 1.8], w1 in [-20, 20], w3 = 10, grid 360 x 240.
PRESETS = {"fig11": 35.0, "fig12": 65.0, "fig13": 105.0}
DISSIPATION = {"none": (0.0, 0.0), "drilling": (0.02, 0.0), "rolling": (0.0, 0.02)}


@jax.jit
def _flight(rim, ys):
    return jax.vmap(rim.flight)(ys)


@dataclasses.dataclass(frozen=True)
class Axis(SweepAxis):
    """One axis of a 2-D section: a rim state variable (``beta``, ``omega1``-``omega3``) and
    ``numpy.linspace(lo, hi, n)`` (a :class:`rollax.Axis` restricted to the rolling state)."""

    def __post_init__(self):
        if self.name not in VARIABLES:
            raise ValueError(f"axis name = {self.name!r} must be one of {VARIABLES}")
        super().__post_init__()


@dataclasses.dataclass
class BasinMap:
    """A computed section: per-start arrays of shape ``(x.n, y.n)`` indexed [x, y]."""

    x: Axis
    y: Axis
    fixed: dict[str, float]
    rim: Rim
    t_max: float
    rtol: float
    atol: float
    outcome: np.ndarray  # int8: PERIODIC, IN, OUT, UNDECIDED, FAILED
    t_end: np.ndarray  # time of the fall / second w1 zero / cap
    recontact: np.ndarray  # bool: the flight would hit the rim again
    period: np.ndarray  # period of periodic rolling (2 x time between w1 zeros), nan otherwise
    steps: np.ndarray
    slip: object = None  # rollax.models.slip.SlipSettings when slipping was simulated
    switches: np.ndarray | None = None  # roll/slip switches per start (slipping only)
    t_slip: np.ndarray | None = None  # total slipping time per start (slipping only)
    n_samples: int | None = None  # event samples per step the map was computed with
    dataset: Any = (
        None  # the labelled map (xarray.Dataset): the sweep's, with the basin's attributes
    )
    tallies: dict[str, int] | None = None  # starts per outcome, from the sweep's regions
    work: dict[str, Any] | None = None  # where the regions ran (rollax.SweepResult.work)

    def counts(self) -> dict[str, int]:
        """Number of starts per outcome (for a map in a store, the regions' own counts)."""
        if self.tallies is not None:
            return {name: int(self.tallies.get(name, 0)) for name in OUTCOMES}
        return {name: int(np.sum(self.outcome == k)) for k, name in enumerate(OUTCOMES)}

    def steady_betas(self) -> list[float]:
        """Angles beta0 of the steady motions (47)-(48) in a (beta, omega1) section (w1 = 0 there);
        empty for other sections."""
        if {self.x.name, self.y.name} != {"beta", "omega1"}:
            return []
        ax = self.x if self.x.name == "beta" else self.y
        return steady_beta(self.rim, self.fixed["omega2"], self.fixed["omega3"], ax.lo, ax.hi)

    def attrs(self) -> dict[str, Any]:
        """The section's settings as dataset attributes (JSON text for the mappings)."""
        import json

        slip = None
        if self.slip is not None:
            # (slip: a SlipSettings, annotated object)
            fs = dataclasses.fields(self.slip)  # pyright: ignore[reportArgumentType]
            slip = {f.name: float(getattr(self.slip, f.name)) for f in fs}
        return {
            "basin_axes": [self.x.name, self.y.name],
            "fixed": json.dumps(self.fixed, sort_keys=True),
            "t_max": float(self.t_max),
            "rtol": float(self.rtol),
            "atol": float(self.atol),
            "n_samples": -1 if self.n_samples is None else int(self.n_samples),
            "slip": json.dumps(slip, sort_keys=True),
            # (the rim's mu is listed below either way: say whether the map used it)
            "contact": "rolling without slipping (the rim's mu is not used)"
            if slip is None
            else f"rolling and slipping, mu = {float(self.rim.mu):g}",
            "rim": json.dumps(
                {f.name: float(getattr(self.rim, f.name)) for f in dataclasses.fields(self.rim)},
                sort_keys=True,
            ),
        }

    def to_dataset(self):
        """The map as a labelled ``xarray.Dataset``: dimensions ``(x, y)`` with their values
        and units, the per-start variables with units and long names (CF flags on
        ``outcome``), and the section's settings, the rim, the versions and the command line
        as attributes."""
        if self.dataset is not None:
            ds = self.dataset.copy()
            ds.attrs.pop("rollax_store_path", None)
            ds.attrs.update(self.attrs())
            return ds
        import xarray as xr

        from rollax._drivers._labels import dataset_attrs
        from rollax.models.outcomes import RimOutcome

        dims = (self.x.name, self.y.name)
        flags = dict(
            flag_values=[int(m.value) for m in RimOutcome],
            flag_meanings=" ".join(m.name.lower() for m in RimOutcome),
        )
        data = {
            "outcome": (dims, self.outcome, dict(units="1", long_name="outcome", **flags)),
            "t_end": (dims, self.t_end, dict(units="s", long_name=SUMMARY_NAMES["t_end"])),
            "recontact": (
                dims,
                self.recontact,
                dict(units="1", long_name=SUMMARY_NAMES["recontact"]),
            ),
            "period": (dims, self.period, dict(units="s", long_name=SUMMARY_NAMES["period"])),
            "steps": (dims, self.steps, dict(units="1", long_name=SUMMARY_NAMES["steps"])),
        }
        if self.switches is not None:
            data["switches"] = (
                dims,
                self.switches,
                dict(units="1", long_name=SUMMARY_NAMES["switches"]),
            )
        if self.t_slip is not None:
            data["t_slip"] = (dims, self.t_slip, dict(units="s", long_name=SUMMARY_NAMES["t_slip"]))
        coords = {
            a.name: (a.name, a.values, dict(units=UNITS[a.name], long_name=a.name))
            for a in (self.x, self.y)
        }
        ds = xr.Dataset(data, coords=coords)
        ds.attrs.update(dataset_attrs(_system(self.rim, self.slip), {}, {}, {}))
        ds.attrs.update(self.attrs())
        return ds

    @classmethod
    def from_dataset(cls, ds) -> "BasinMap":
        """The map of a dataset written by :meth:`save` (``xarray.open_zarr`` of ``basin.zarr``,
        ``xarray.open_dataset`` of ``basin.nc``): everything needed to redraw it."""
        import json

        xname, yname = (str(d) for d in ds["outcome"].dims)
        slip = json.loads(ds.attrs["slip"]) if "slip" in ds.attrs else None
        if slip is not None:
            from rollax.models.slip import SlipSettings

            slip = SlipSettings(**slip)
        rim = Rim(**json.loads(ds.attrs["rim"]))
        ns = int(ds.attrs.get("n_samples", -1))

        def var(k):
            # a dataset read lazily (xarray.open_zarr: dask arrays) stays lazy: a map of any
            # size is drawn and counted without loading it
            return _array(ds[k]) if k in ds else None

        def axis(name):
            v = np.asarray(ds[name].values, float)
            return Axis(name, float(v[0]), float(v[-1]), int(v.size))

        return cls(
            x=axis(xname),
            y=axis(yname),
            fixed=json.loads(ds.attrs["fixed"]),
            rim=rim,
            t_max=float(ds.attrs["t_max"]),
            rtol=float(ds.attrs["rtol"]),
            atol=float(ds.attrs["atol"]),
            outcome=_array(ds["outcome"]).astype(np.int8),
            t_end=_array(ds["t_end"]),
            recontact=_array(ds["recontact"]).astype(bool),
            period=_array(ds["period"]),
            steps=_array(ds["steps"]),
            slip=slip,
            switches=var("switches"),
            t_slip=var("t_slip"),
            n_samples=None if ns < 0 else ns,
            dataset=ds,
        )

    def save(self, out_dir: str | os.PathLike, figure: bool = True, format: str = "zarr") -> Path:
        """Write the map into ``out_dir``: ``basin.zarr`` (``format="zarr"``) or ``basin.nc``
        (``"netcdf"``), the labelled dataset of :meth:`to_dataset`, and ``basin.png``, drawn
        from the dataset as written; returns the dataset's path. Where the sweep already wrote
        its store at that path (``basin_map(store=...)``), only the section's attributes are
        added to it."""
        from rollax._drivers._labels import write_dataset

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if format not in ("zarr", "netcdf"):
            raise ValueError(f"format = {format!r} is not allowed: it must be 'zarr' or 'netcdf'")
        path = out / ("basin.zarr" if format == "zarr" else "basin.nc")
        store = None if self.dataset is None else self.dataset.attrs.get("rollax_store_path")
        with naming_file(path):
            if format == "zarr" and store is not None and Path(store).resolve() == path.resolve():
                from rollax._drivers._store import finish

                finish(path, self.attrs())
            else:
                write_dataset(self.to_dataset(), path, format)
        if figure:
            import xarray as xr

            with (
                xr.open_zarr(path) if format == "zarr" else xr.open_dataset(path, engine="scipy")
            ) as ds:
                drawn = BasinMap.from_dataset(ds)
                drawn.tallies = self.counts()
                _draw(drawn, out)
        return path


def _draw(drawn: "BasinMap", out: Path) -> None:
    """``basin.png`` in ``out``, written whole or not at all."""
    from rollax.plot import plot_basin

    png = out / f".basin.{os.getpid()}.{secrets.token_hex(4)}.png"
    try:
        with naming_file(out / "basin.png"):
            plot_basin(drawn, png, steady=drawn.steady_betas())
        os.replace(png, out / "basin.png")
    finally:
        png.unlink(missing_ok=True)


def _array(v):
    """A variable's data: its dask array where it is read lazily, else a NumPy array."""
    data = v.data
    return data if hasattr(data, "dask") else np.asarray(v.values)


SUMMARY_NAMES = {
    "t_end": "time of the fall, of the second omega1 zero, or the time cap",
    "recontact": "the flight would come back within rho of the tube's core circle",
    "period": "period of periodic rolling (2 x time between omega1 zeros; NaN otherwise)",
    "steps": "accepted steps",
    "switches": "roll/slip switches",
    "t_slip": "total slipping time",
}


def section_starts(x: Axis, y: Axis, fixed: Mapping[str, float]) -> np.ndarray:
    """Initial states (beta, w1, w2, w3) of the grid, shape ``(x.n * y.n, 4)``, row-major [x, y]."""
    if x.name == y.name:
        raise ValueError(f"the two axes must be different variables, got {x.name!r} twice")
    unknown = sorted(set(fixed) - set(VARIABLES))
    if unknown:
        raise ValueError(
            f"fixed = {dict(fixed)!r} names {unknown}, which are not state "
            f"variables; allowed: {list(VARIABLES)}"
        )
    missing = set(VARIABLES) - {x.name, y.name} - set(fixed)
    if missing:
        raise ValueError(f"fixed values needed for {sorted(missing)}")
    # beta is the ball's angle around the tube (Sect. 2): a range beyond [-pi, pi] is a typo
    # (1e300 ran, and its starts all "failed")
    for a in (x, y):
        if a.name == "beta" and not (-math.pi <= min(a.lo, a.hi) and max(a.lo, a.hi) <= math.pi):
            raise ValueError(
                f"beta = [{a.lo!r}, {a.hi!r}] is outside the allowed range [-pi, pi] (the "
                f"ball's angle around the rim's tube, rad)"
            )
    if "beta" in fixed and not -math.pi <= float(fixed["beta"]) <= math.pi:
        raise ValueError(
            f"beta = {fixed['beta']!r} is outside the allowed range [-pi, pi] (the ball's "
            f"angle around the rim's tube, rad)"
        )
    X, Y = np.meshgrid(x.values, y.values, indexing="ij")
    cols = []
    for v in VARIABLES:
        if v == x.name:
            cols.append(X.ravel())
        elif v == y.name:
            cols.append(Y.ravel())
        else:
            val = float(fixed[v])
            if not np.isfinite(val):
                raise ValueError(f"{v} = {val!r} must be finite")
            cols.append(np.full(X.size, val))
    return np.stack(cols, axis=1)


def _system(rim: Rim, slip):
    """The rim's system: rolling (Sect. 5.1; with dissipation the w1 zeros are counted, never
    ending the run, since Proposition 4 no longer holds) or rolling/slipping (Sect. 5.2)."""
    if slip is not None:
        return RimSlipping.from_settings(rim, slip)
    return RimRolling(rim, w1_target=0 if rim.dissipative else 2)


def _options(system, max_steps, lanes, devices, rtol, atol) -> dict[str, Any]:
    opts = dict(rtol=rtol, atol=atol, max_steps=max_steps, lanes=lanes, devices=devices)
    if isinstance(system, RimSlipping):
        # max_steps bounds each phase: a slip that does not converge must not hold the kernel's
        # lanes for long (it is reported as chattering)
        opts.update(max_steps=min(max_steps, 8192), max_resets=slip_max_resets(system))
    return opts


def _summary(system, sol) -> dict:
    """The per-start quantities of a basin map but the outcome (the sweep's own)."""
    if isinstance(system, RimSlipping):
        r = slip_result(system, sol)
        return dict(
            t_end=r.t_end,
            recontact=r.recontact,
            period=r.period,
            steps=r.steps,
            switches=r.switches,
            t_slip=r.t_slip,
        )
    r = rolling_result(system, sol)
    return {k: v for k, v in r.items() if k != "outcome"}


_summary.units = {"t_end": "s", "period": "s", "t_slip": "s", "recontact": "1"}  # pyright: ignore[reportFunctionMemberAccess]
_summary.long_names = SUMMARY_NAMES  # pyright: ignore[reportFunctionMemberAccess]


def _with_outcome(system, sol) -> dict:
    return {**_summary(system, sol), "outcome": system.outcome(sol).astype(jnp.int8)}


def simulate(
    rim: Rim,
    starts: np.ndarray,
    *,
    t_max: float = 60.0,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 200_000,
    lanes: int | None = None,
    devices: int | None = None,
    slip=None,
    backend: str = "auto",
) -> dict[str, np.ndarray]:
    """Outcomes of the given rolling starts ``(N, 4)`` (one :func:`rollax.solve_ensemble` call).

    Returns a dict with ``outcome``, ``t_end``, ``recontact``, ``period`` and ``steps`` (and
    ``switches``, ``t_slip`` with ``slip``, a :class:`rollax.models.slip.SlipSettings`). ``backend``:
    as :func:`rollax.solve_ensemble`.
    """
    system = _system(rim, slip)
    starts = np.asarray(starts, dtype=float)
    if starts.ndim != 2 or starts.shape[1] != 4:
        raise ValueError(f"starts has shape {starts.shape}; allowed: (N, 4) rolling states")
    if slip is not None:
        starts = np.asarray(RimSlipping.rolling_start(starts))
    sol = solve_ensemble(
        system,
        starts,
        0.0,
        t_max,
        backend=backend,
        **_options(system, max_steps, lanes, devices, rtol, atol),
    )
    return {k: np.asarray(v) for k, v in _per_run(_with_outcome, system, sol).items()}


def basin_map(
    rim: Rim | None = None,
    *,
    x: Axis = Axis("beta", 0.8, 1.8, 360),
    y: Axis = Axis("omega1", -20.0, 20.0, 240),
    fixed: Mapping[str, float] | None = None,
    t_max: float = 60.0,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 200_000,
    chunk_size: int = 1 << 17,
    lanes: int | None = None,
    devices: int | None = None,
    store: str | os.PathLike | None = None,
    client=None,
    progress: bool = True,
    slip=None,
    n_samples: int | None = None,
    backend: str = "auto",
    lazy: bool | None = None,
) -> BasinMap:
    """Outcome map of a 2-D section of rolling starts (Figs. 11-13, Sect. 5.1): a preset of
    :func:`rollax.sweep` over the rim's system (:class:`rollax.systems.RimRolling`, or
    :class:`rollax.systems.RimSlipping` with ``slip``).

    ``x`` and ``y`` are two of ``beta, omega1, omega2, omega3``; ``fixed`` gives the other two
    (default: ``omega2 = 35``, ``omega3 = 10``, the section of Fig. 11). Work is done in regions of at
    most ``chunk_size`` starts; with ``store`` (a zarr store, such as ``basin.zarr``) every
    finished region is written there and a rerun with the same arguments resumes (the regions
    are verified; see :func:`rollax.sweep`). ``client``: a ``dask.distributed.Client`` to run
    the regions on. ``slip`` (a :class:`rollax.models.slip.SlipSettings`): let the ball slip
    with friction coefficient ``rim.mu`` (Sect. 5.2); ``None`` (default): no slipping.
    ``n_samples``: event samples per step (default: the system's, 4; with 8 no F2 dip of the
    Figs. 11-13 panels is missed, see the README's event semantics). ``backend``: the
    ensemble path (:func:`rollax.solve_ensemble`: ``"auto"``, ``"queue"`` or ``"fused"``).
    ``lazy``: a map in a store is returned reading it (dask arrays: counted, sliced and drawn
    without loading it); default: when its results exceed 256 MiB (about 12 million starts;
    :func:`rollax.sweep`).
    """
    rim = Rim() if rim is None else rim
    fixed = dict(fixed) if fixed is not None else {"omega2": 35.0, "omega3": 10.0}
    if not (t_max > 0):
        raise ValueError(f"t_max = {t_max!r} must be > 0")
    if n_samples is not None:  # before any work (the sweep would refuse it in its worker)
        n_samples = check_integer("n_samples", n_samples, 1)
    both = [a.name for a in (x, y) if a.name in fixed]
    if both:
        raise ValueError(
            f"fixed = {fixed!r} sets {both}, which {'is' if len(both) == 1 else 'are'} "
            f"on an axis (x or y): remove {'it' if len(both) == 1 else 'them'} from "
            f"fixed, or choose other axes"
        )
    # checks the axes and fixed values (on a 2 x 2 grid: the sweep builds its starts by chunks)
    section_starts(Axis(x.name, x.lo, x.hi, 2), Axis(y.name, y.lo, y.hi, 2), fixed)
    system = _system(rim, slip)
    y0 = {k: float(v) for k, v in fixed.items()}
    if slip is not None:
        y0.update(u1=0.0, u3=0.0)
    res = sweep(
        system,
        [SweepAxis(x.name, x.lo, x.hi, x.n), SweepAxis(y.name, y.lo, y.hi, y.n)],
        y0=y0,
        t1=t_max,
        chunk_size=chunk_size,
        store=store,
        client=client,
        progress=progress,
        summary=_summary,
        keep_solution=False,
        n_samples=n_samples,
        backend=backend,
        lazy=lazy,
        **_options(system, max_steps, lanes, devices, rtol, atol),
    )
    out = res.summary
    ds = res.dataset
    if store is not None:
        ds.attrs["rollax_store_path"] = str(store)
    return BasinMap(
        x=x,
        y=y,
        fixed=fixed,
        rim=rim,
        t_max=t_max,
        rtol=rtol,
        atol=atol,
        outcome=res.outcome.astype(np.int8),
        t_end=out["t_end"],
        recontact=out["recontact"],
        period=out["period"],
        steps=out["steps"],
        slip=slip,
        switches=out["switches"] if slip is not None else None,
        t_slip=out["t_slip"] if slip is not None else None,
        n_samples=int(system.n_samples if n_samples is None else n_samples),
        dataset=ds,
        tallies=None if store is None else _basin_tallies(res.counts()),
        work=res.work,
    )


def _basin_tallies(counts: Mapping[str, int]) -> dict[str, int]:
    """The sweep's runs per outcome by the basin map's names (:data:`OUTCOMES`)."""
    from rollax.models.outcomes import RimOutcome

    return {OUTCOMES[int(m.value)]: int(counts.get(m.name.lower(), 0)) for m in RimOutcome}


def preset(name: str, dissipation: str = "none", rim: Rim | None = None) -> tuple[Rim, dict]:
    """The rim and ``basin_map`` keyword arguments of the sections of Figs. 11-13.

    ``dissipation`` is ``none``, ``drilling`` (k_d = 0.02 1/s) or ``rolling`` (k_r = 0.02 1/s),
    the bottom panels of the figures (Sect. 5.3.2).
    """
    if name not in PRESETS:
        raise ValueError(f"preset = {name!r} must be one of {sorted(PRESETS)}")
    if dissipation not in DISSIPATION:
        raise ValueError(f"dissipation = {dissipation!r} must be one of {sorted(DISSIPATION)}")
    k_d, k_r = DISSIPATION[dissipation]
    rim = dataclasses.replace(rim or Rim(), k_d=k_d, k_r=k_r)
    kwargs = dict(
        x=Axis("beta", 0.8, 1.8, 360),
        y=Axis("omega1", -20.0, 20.0, 240),
        fixed={"omega2": PRESETS[name], "omega3": 10.0},
    )
    return rim, kwargs


def grid_index(values: Sequence[float], v: float) -> int:
    """Index of the grid value nearest to ``v``."""
    return int(np.argmin(np.abs(np.asarray(values) - v)))
