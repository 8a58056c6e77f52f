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

With ``slip=SlipSettings(...)`` the ball may slip (finite ``rim.mu``): the hybrid
rolling/slipping sweep of :mod:`rollax.slip` replaces the rolling one, with the extra outcome
**chattering** (switch cap, Zeno-like switching, or a slip that does not converge) and, per
start, the number of roll/slip switches and the total slipping time.

Sweeps run through the ensemble kernel (:mod:`rollax.ensemble`) in resumable chunks
(:mod:`rollax._chunks`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rollax import ensemble
from rollax.events import BOUNDARY, CROSSING, EventSet
from rollax.outcomes import CHATTERING, FAILED, IN, OUT, OUTCOMES, PERIODIC, UNDECIDED  # noqa: F401
from rollax.fastmath import sincos
from rollax.rim import Rim
from rollax._chunks import run_chunked, sweep_key
from rollax.steady import steady_beta

VARIABLES = ("beta", "omega1", "omega2", "omega3")
UNITS = {"beta": "rad", "omega1": "1/s", "omega2": "1/s", "omega3": "1/s"}

# Sections of Figs. 11-13 (docs/physics-notes.md): beta in [0.8, 1.8], w1 in [-20, 20], w3 = 10, grid 360 x 240.
PRESETS = {"fig11": 35.0, "fig12": 65.0, "fig13": 105.0}
DISSIPATION = {"none": (0.0, 0.0), "drilling": (0.02, 0.0), "rolling": (0.0, 0.02)}


def rolling_field(t, x, rim):
    """The rolling vector field in the ensemble kernel's signature ``f(t, x, args)``."""
    return rim.vector_field(x)


def rolling_event_values(t, x, rim):
    """The event functions of a rolling start: ``F2/m`` (a boundary: the ball separates at
    F2 = 0) and ``w1`` (crossings, Proposition 4). F2/m is written out with one divide: the
    kernel evaluates it at every sample of every step."""
    beta, w1, w3 = x[0], x[1], x[3]
    s, c = sincos(beta)
    r2 = rim.r**2
    f2_m = r2 * w3**2 * c / (rim.R - rim.rho * c) - r2 * w1**2 * (1.0 / rim.rho) + rim.g * s
    return jnp.stack([f2_m, w1])


ROLLING_EVENTS = EventSet(rolling_event_values, (BOUNDARY, CROSSING), (1, 2))
# With dissipation the orbits are not periodic: w1 zeros are counted, never ending the run.
DISSIPATIVE_EVENTS = EventSet(rolling_event_values, (BOUNDARY, CROSSING), (1, 0))


@jax.jit
def _flight(rim, ys):
    return jax.vmap(rim.flight)(ys)


@dataclasses.dataclass(frozen=True)
class Axis:
    """One axis of a 2-D section: a state variable and ``numpy.linspace(lo, hi, n)``."""

    name: str
    lo: float
    hi: float
    n: int

    def __post_init__(self):
        if self.name not in VARIABLES:
            raise ValueError(f"axis name = {self.name!r} must be one of {VARIABLES}")
        if not (np.isfinite(self.lo) and np.isfinite(self.hi) and self.lo < self.hi):
            raise ValueError(
                f"{self.name} range = ({self.lo!r}, {self.hi!r}) must be finite with lo < hi"
            )
        if not (isinstance(self.n, (int, np.integer)) and self.n >= 2):
            raise ValueError(f"{self.name} grid size = {self.n!r} must be an integer >= 2")

    @property
    def values(self) -> np.ndarray:
        return np.linspace(self.lo, self.hi, self.n)


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
    slip: object = None  # rollax.slip.SlipSettings when slipping was simulated
    switches: np.ndarray | None = None  # roll/slip switches per start (slipping only)
    t_slip: np.ndarray | None = None  # total slipping time per start (slipping only)

    def counts(self) -> dict[str, int]:
        """Number of starts per outcome."""
        return {name: int(np.sum(self.outcome == k)) for k, name in enumerate(OUTCOMES)}

    def steady_betas(self) -> list[float]:
        """Angles beta0 of the steady motions (47)-(48) in a (beta, omega1) section (w1 = 0 there);
        empty for other sections."""
        if {self.x.name, self.y.name} != {"beta", "omega1"}:
            return []
        ax = self.x if self.x.name == "beta" else self.y
        return steady_beta(self.rim, self.fixed["omega2"], self.fixed["omega3"], ax.lo, ax.hi)

    def save(self, out_dir: str | os.PathLike, figure: bool = True) -> Path:
        """Write ``basin.npz`` (and ``basin.png``) into ``out_dir``; returns the npz path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        params = {f.name: float(getattr(self.rim, f.name)) for f in dataclasses.fields(self.rim)}
        extra = {}
        if self.slip is not None:
            extra = dict(switches=self.switches, t_slip=self.t_slip,
                         **{f"slip_{f.name}": float(getattr(self.slip, f.name))
                            for f in dataclasses.fields(self.slip)})
        np.savez_compressed(
            out / "basin.npz",
            outcome=self.outcome.astype(np.int8),
            t_end=self.t_end,
            recontact=self.recontact,
            period=self.period,
            steps=self.steps,
            **{self.x.name: self.x.values, self.y.name: self.y.values},
            axes=np.array([self.x.name, self.y.name]),
            fixed=np.array([[k, v] for k, v in self.fixed.items()], dtype=object).astype(str),
            outcome_names=np.array(OUTCOMES),
            t_max=self.t_max,
            rtol=self.rtol,
            atol=self.atol,
            **{f"param_{k}": v for k, v in params.items()},
            **extra,
        )
        if figure:
            from rollax.plotting import plot_basin

            plot_basin(self, out / "basin.png", steady=self.steady_betas())
        return out / "basin.npz"


def section_starts(x: Axis, y: Axis, fixed: Mapping[str, float]) -> np.ndarray:
    """Initial states (beta, w1, w2, w3) of the grid, shape ``(x.n * y.n, 4)``, row-major [x, y]."""
    if x.name == y.name:
        raise ValueError(f"the two axes must be different variables, got {x.name!r} twice")
    missing = set(VARIABLES) - {x.name, y.name} - set(fixed)
    if missing:
        raise ValueError(f"fixed values needed for {sorted(missing)}")
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


def classify(rim: Rim, res: ensemble.EnsembleResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Outcomes, recontact flags and periods from raw ensemble results (see module docstring)."""
    fell = (res.status == ensemble.EVENT) & (res.event == 0)
    periodic = (res.status == ensemble.EVENT) & (res.event == 1)
    inside, recontact, _ = _flight(jax.tree_util.tree_map(jnp.asarray, rim), jnp.asarray(res.y))
    inside, recontact = np.asarray(inside), np.asarray(recontact)
    outcome = np.full(res.status.shape, FAILED, np.int8)
    outcome[fell & inside] = IN
    outcome[fell & ~inside] = OUT
    outcome[periodic] = PERIODIC
    outcome[res.status == ensemble.T_MAX] = UNDECIDED
    period = np.where(periodic, 2.0 * (res.t - res.t_first[:, 1]), np.nan)
    return outcome, recontact & fell, period


def simulate(
    rim: Rim,
    starts: np.ndarray,
    *,
    t_max: float = 60.0,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 200_000,
    lanes: int = 512,
    devices: int | None = None,
    valid: np.ndarray | None = None,
    slip=None,
) -> dict[str, np.ndarray]:
    """Outcomes of the given starts ``(N, 4)`` (one ensemble solve; no chunking).

    Returns a dict with ``outcome``, ``t_end``, ``recontact``, ``period`` and ``steps`` (and
    ``switches``, ``t_slip`` with ``slip``, a :class:`rollax.slip.SlipSettings`).
    """
    rim_arrays = jax.tree_util.tree_map(jnp.asarray, rim)
    starts = np.asarray(starts, dtype=float)
    valid = np.ones(len(starts), bool) if valid is None else valid
    return _run_chunk(rim, rim_arrays, starts, valid, t_max, rtol, atol, max_steps, lanes, devices,
                      slip)


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
    chunk_size: int = 1 << 16,
    lanes: int = 512,
    devices: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    slip=None,
) -> BasinMap:
    """Outcome map of a 2-D section of rolling starts (Figs. 11-13, Sect. 5.1).

    ``x`` and ``y`` are two of ``beta, omega1, omega2, omega3``; ``fixed`` gives the other two
    (default: ``omega2 = 35``, ``omega3 = 10``, the section of Fig. 11). Work is done in chunks of
    ``chunk_size`` starts; with ``cache_dir`` every finished chunk is saved and a rerun with the
    same arguments resumes. Results do not depend on ``chunk_size``, ``lanes`` or ``devices``.
    ``slip`` (a :class:`rollax.slip.SlipSettings`): let the ball slip with friction coefficient
    ``rim.mu`` (Sect. 5.2); ``None`` (default): no slipping (mu = infinity).
    """
    rim = Rim() if rim is None else rim
    fixed = dict(fixed) if fixed is not None else {"omega2": 35.0, "omega3": 10.0}
    if not (t_max > 0):
        raise ValueError(f"t_max = {t_max!r} must be > 0")
    starts = section_starts(x, y, fixed)
    params = {f.name: float(getattr(rim, f.name)) for f in dataclasses.fields(rim)}
    key = sweep_key(
        dict(kind="rim-basin", x=dataclasses.asdict(x), y=dataclasses.asdict(y), fixed=fixed,
             params=params, t_max=t_max, rtol=rtol, atol=atol, max_steps=max_steps,
             chunk_size=chunk_size, version=1,
             slip=None if slip is None else {f.name: float(getattr(slip, f.name))
                                             for f in dataclasses.fields(slip)})
    )
    rim_arrays = jax.tree_util.tree_map(jnp.asarray, rim)

    def run(chunk, valid):
        return _run_chunk(rim, rim_arrays, chunk, valid, t_max, rtol, atol, max_steps, lanes, devices,
                          slip)

    out = run_chunked(run, starts, chunk_size=chunk_size, cache_dir=cache_dir, key=key,
                      progress=progress, desc="basin")
    shape = (x.n, y.n)
    return BasinMap(
        x=x, y=y, fixed=fixed, rim=rim, t_max=t_max, rtol=rtol, atol=atol,
        outcome=out["outcome"].reshape(shape), t_end=out["t_end"].reshape(shape),
        recontact=out["recontact"].reshape(shape), period=out["period"].reshape(shape),
        steps=out["steps"].reshape(shape), slip=slip,
        switches=out["switches"].reshape(shape) if slip is not None else None,
        t_slip=out["t_slip"].reshape(shape) if slip is not None else None,
    )


def _run_chunk(rim, rim_arrays, chunk, valid, t_max, rtol, atol, max_steps, lanes, devices,
               slip=None):
    if slip is not None:
        from rollax import slip as slip_mod

        # max_steps bounds each phase here: a slip that does not converge must not hold the
        # kernel's lanes for long (it is reported as chattering)
        out = slip_mod.sweep(rim, chunk, slip, t_max=t_max, rtol=rtol, atol=atol,
                             max_steps=min(max_steps, 8192), lanes=lanes, devices=devices,
                             valid=valid)
        return {k: out[k] for k in ("outcome", "t_end", "recontact", "period", "steps",
                                    "switches", "t_slip")}
    events = DISSIPATIVE_EVENTS if rim.dissipative else ROLLING_EVENTS
    res = ensemble.solve_ensemble(
        rolling_field, events, chunk, rim_arrays, t_max=t_max, rtol=rtol, atol=atol,
        max_steps=max_steps, lanes=lanes, devices=devices, valid=valid,
    )
    outcome, recontact, period = classify(rim_arrays, res)
    return dict(outcome=outcome, t_end=res.t, recontact=recontact, period=period, steps=res.steps)


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
