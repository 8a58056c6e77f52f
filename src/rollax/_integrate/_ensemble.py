"""``rollax.solve_ensemble``: many runs of one system on the batched work-queue kernel.

The system is adapted onto :func:`rollax._integrate.queue.run`:

* the state is ``z = (y, mode)``: the mode rides as a passive component (zero rate, left out
  of the error norm), so every lane may be in a different mode;
* the system's array leaves (its parameters) go through the kernel's ``args``; a leaf with a
  leading batch axis (see :meth:`rollax.AbstractSystem.batch_shape`) is a per-start
  parameter, dealt with the starts; the rest (static fields, structure) is held by a small
  hashable adapter, so compiled kernels are cached on the system's type, static fields and
  tree structure, not on the object: a new system with new parameter values reuses them;
* a system with its own exact ``flow`` is moved along it (``flow_step`` at a time);
* the kernel's reset map calls ``system.reset``; where the kernel needs the field and the event
  values at one point it calls ``system.field_and_events``.

The event semantics are those of :func:`rollax.solve` (same samples, same walk, same root
location); the two paths agree to the integration tolerance.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import math
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from rollax._core import _announce
from rollax._core import _eventlog

from rollax._integrate import _fused, queue
from rollax._core._eventlog import SAVE_EVENTS_MAX
from rollax._core._solution import Solution, Status
from rollax._integrate._solve import SAMPLES_MAX, _check_ts, check_options, solve
from rollax._core._system import AbstractSystem
from rollax._core._validate import _show, check_integer
from rollax._core.events import EventSet


@dataclasses.dataclass(frozen=True)
class _Adapter:
    """The system's static part and state dimension; its methods are the kernel's callables
    (equal by value, so the kernel cache hits for every system of the same structure)."""

    static: Any
    d: int
    p: int = 0  # the system's own aux (with an event log: the log follows it in aux)
    K: int = 0  # rows of the event log (save_events)

    def system(self, dyn) -> AbstractSystem:
        return eqx.combine(dyn, self.static)

    def _split(self, z):
        return z[: self.d], z[self.d].astype(jnp.int32)

    def field(self, t, z, dyn):
        y, mode = self._split(z)
        return jnp.concatenate([self.system(dyn).vector_field(t, y, mode), jnp.zeros_like(z[-1:])])

    def event_values(self, t, z, dyn):
        y, mode = self._split(z)
        return jnp.asarray(self.system(dyn).event_values(t, y, mode), z.dtype)

    def field_and_events(self, t, z, dyn):
        y, mode = self._split(z)
        f, g = self.system(dyn).field_and_events(t, y, mode)
        return jnp.concatenate([f, jnp.zeros_like(z[-1:])]), jnp.asarray(g, z.dtype)

    def flow(self, t0, z, t1, dyn):
        y, mode = self._split(z)
        y1 = self.system(dyn).flow(t0, y, t1, mode)
        return jnp.concatenate([jnp.asarray(y1, z.dtype), z[-1:]])

    def flow_step(self, t, z, dyn):
        y, mode = self._split(z)
        return jnp.asarray(self.system(dyn).flow_step(t, y, mode), z.dtype)

    def reset(self, t, z, aux, event, dyn):
        y, mode = self._split(z)
        own = aux[: self.p] if self.K else aux
        t_n, y_n, mode_n, aux_n, term = self.system(dyn).reset(t, y, mode, own, event)
        aux_n = jnp.asarray(aux_n, aux.dtype)
        if self.K:  # the event log rides in aux, after the system's own (rollax._core._eventlog)
            n, rows = _eventlog.write(
                aux[self.p], aux[self.p + 1 :], True, t, event, mode, y, t_n, mode_n, y_n
            )
            aux_n = jnp.concatenate([aux_n, n[None], rows])
        z_n = jnp.concatenate(
            [jnp.asarray(y_n, z.dtype), jnp.asarray(mode_n).astype(z.dtype)[None]]
        )
        return jnp.asarray(t_n, t.dtype), z_n, aux_n, term


#: At most this many lanes per device: each holds a few kB of state and records (a typo such
#: as lanes = 10**9 would ask for terabytes)
LANES_MAX = 1 << 22


def _lanes_used(lanes: int | None, N: int, n_dev: int) -> int:
    """The lanes each device's queue gets: ``lanes``, but no more than the power of two at or
    above the starts it holds, unless that is below 512 (the CPU default). A large ``lanes`` on
    a few starts then allocates nothing it cannot use (``rollax basin --lanes 100000000`` on 48
    starts ran for minutes), while the usual sizes keep one compiled kernel for every chunk
    (the lanes are part of its shape; the results do not depend on them beyond rounding).

    ``lanes=None``: 512 on a CPU; on a GPU one lane per start (that power of two, at most
    :data:`LANES_MAX`), since there the queue's refill (gathers, a sort and scatters, each its
    own kernel launch in the loop) is what costs: the Fig. 11 panel on an H100 took 6.51 s with
    16,384 lanes and 0.169 s with one lane per start (benchmarks/RESULTS.md, 2026-11-24)."""
    per = -(-N // n_dev)
    pow2 = 1 << max(0, per - 1).bit_length()
    if lanes is None:
        return int(min(LANES_MAX, max(512, pow2))) if jax.default_backend() == "gpu" else 512
    return int(min(lanes, max(512, pow2)))


@functools.lru_cache(maxsize=64)
def _adapter(static, d: int, p: int = 0, K: int = 0) -> _Adapter:
    # one adapter object per structure: bound methods compare their instances by identity,
    # and the kernel cache compares the adapter's bound methods
    return _Adapter(static, d, p, K)


def _batched_leaves(system: AbstractSystem, dyn) -> Any:
    """Per array leaf of ``dyn``: whether it carries a leading batch axis (per-start values),
    by the rule of :meth:`AbstractSystem.batch_shape` (the declared parameter shapes)."""
    axes = [a for a in jax.tree_util.tree_leaves(system.batch_axes(), is_leaf=lambda x: x is None)]
    leaves = [x for x in jax.tree_util.tree_leaves(system) if x is not None]
    marks = iter([a == 0 for a, x in zip(axes, leaves) if eqx.is_array(x)])
    return jax.tree_util.tree_map(lambda leaf: next(marks), dyn)


def check_settings(
    system: AbstractSystem,
    t0,
    t1,
    *,
    rtol=1e-9,
    atol=1e-9,
    dt_max=None,
    max_steps=16_384,
    max_resets=1_000,
    n_samples=None,
    solver=None,
    lanes=None,
    devices=None,
    backend="auto",
    **_,
) -> tuple[str, int, str, float | None]:
    """The checks of :func:`solve_ensemble` on its settings (not its starts): a clear
    ``ValueError`` for a bad one. Returns ``(backend, n_samples, solver, dt_max)`` with the
    defaults filled in. :func:`rollax.sweep` calls it before it touches its store, so that a
    bad setting found only by the first region's solve cannot replace a finished sweep."""
    backend = queue.check_backend(backend)
    n_samples = system.n_samples if n_samples is None else n_samples
    solver = queue.check_solver(system.solver if solver is None else solver)
    dt_max = system.dt_max if dt_max is None else dt_max
    system.check_flow_step(dt_max)
    check_options(
        t0,
        t1,
        rtol,
        atol,
        dt_max,
        max_steps=(max_steps, 1),
        max_resets=(max_resets, 0),
        n_samples=(n_samples, 1, SAMPLES_MAX),
        lanes=(512 if lanes is None else lanes, 16, LANES_MAX),
    )
    n_dev_max = jax.local_device_count()
    if devices is not None and not (
        isinstance(devices, (int, np.integer)) and 1 <= devices <= n_dev_max
    ):
        raise ValueError(f"devices = {devices!r} is outside the allowed range [1, {n_dev_max}]")
    return backend, n_samples, solver, dt_max


def solve_ensemble(
    system: AbstractSystem,
    y0s: Float[ArrayLike, "N d"],
    t0: float = 0.0,
    t1: float = math.inf,
    *,
    mode=None,
    aux=None,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    dt_max: float | None = None,
    max_steps: int = 16_384,
    max_resets: int = 1_000,
    n_samples: int | None = None,
    solver: str | None = None,
    lanes: int | None = None,
    devices: int | None = None,
    valid: np.ndarray | None = None,
    progress=None,
    jump_ts=None,
    backend: str = "auto",
    save_events: int = 0,
    ts=None,
) -> Solution:
    """Integrate ``system`` from each row of ``y0s`` (``(N, d)``, ``d = system.state_dim``) on
    the batched work-queue kernel, with the events, resets and statuses of :func:`rollax.solve`.

    ``mode``: one mode (index or name) for all starts, an ``(N,)`` array of indices, or None
    (``system.initial_mode`` of each start, with its own parameters); ``aux``:
    ``(n_aux,)`` or ``(N, n_aux)`` (default: ``system.initial_aux`` per start). A parameter
    field with a leading batch axis of N gives each start its own value. ``dt_max`` bounds the
    step (and so the sampling interval, ``dt_max / n_samples``); ``max_steps`` bounds the
    steps of each segment, ``max_resets`` the resets of a hybrid run. The starts are dealt to
    ``devices`` JAX devices (default: all local), each with a work queue of ``lanes`` lanes
    (at most 2^22; above 512, no more than the power of two at or above the starts each device
    holds; default: 512 on a CPU, one lane per start on a GPU, where the queue's refills cost
    most).

    A system with its own exact ``flow`` is moved along it in steps of ``system.flow_step``
    (``rtol`` and ``atol`` are then not used).

    ``solver``: ``"dopri5"`` or ``"dopri8"``, the method of :func:`rollax.solve` of that name
    (default: ``system.solver``).

    ``jump_ts``: times where the vector field or its derivatives jump (default:
    ``system.jump_times()``); as in :func:`rollax.solve`, no step straddles one.

    ``save_events``: keep each start's first ``save_events`` events (``Solution.events``, a
    :class:`rollax.EventLog` with a leading axis N, as :func:`rollax.solve`'s; they ride in the
    start's ``aux``, so each event costs ``5 + 2 d`` numbers of lane memory).

    ``backend``: ``"queue"`` (the work queue: few wide lanes refilled as starts finish; the CPU
    path), ``"fused"`` (each start integrated from start to end by one GPU thread of one
    Pallas kernel; on a CPU it runs in Pallas's interpret mode, for tests only) or ``"auto"``
    (fused on a GPU, the queue elsewhere). The results agree to rounding (docs/fused.md).

    ``ts``: non-decreasing times in ``[t0, t1]`` at which to save every start's state
    (``Solution.ys``, ``(N, m, d)``; nan after a run ended; a time at a reset gets the state
    after it, as :func:`rollax.solve`'s ``ts``). With ``ts`` the starts run through
    :func:`rollax.solve` under ``jax.vmap`` (diffrax) in chunks of :data:`SAVE_CHUNK`, on
    whatever device, whatever ``backend``, ``lanes`` and ``devices`` say: the kernels keep no
    per-start save buffers. That route agrees with the kernels to rounding (the conformance
    test holds it to them) and costs about what plain diffrax does (on a CPU about 3x the
    queue, benchmarks/RESULTS.md).

    ``valid`` (``(N,)`` bools): starts to run; the others cost nothing and their results are
    meaningless (the padding of a chunk). ``progress``: ``None`` (the default) shows a bar on
    stderr for :data:`BAR_MIN` starts or more (a compile phase, labelled, then the starts
    finished, the rate and the time left from finished work only), ``True`` always, ``False``
    never; or a function ``progress(finished)``, called about every second (the queue's slices)
    with the number of starts finished so far (the results do not change); an exception it
    raises stops the solve. The work queue compiles its kernel for a size class
    of N (``rollax._integrate.queue.size_class``: at least 4096 rows, then four classes per
    octave; the rows beyond N are invalid starts), so that calls with other N of the same
    class reuse it. Returns a :class:`rollax.Solution` of NumPy arrays
    with a leading axis N. Not differentiable (use :func:`rollax.solve` for derivatives).
    """
    _announce.start()  # a compile of more than 1.5 s is said (rollax._core._announce)
    in_sweep = _IN_SWEEP.get()
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a rollax.AbstractSystem, got {type(system).__name__}")
    backend, n_samples, solver, dt_max = check_settings(
        system,
        t0,
        t1,
        rtol=rtol,
        atol=atol,
        dt_max=dt_max,
        max_steps=max_steps,
        max_resets=max_resets,
        n_samples=n_samples,
        solver=solver,
        lanes=lanes,
        devices=devices,
        backend=backend,
    )
    d = system.state_dim
    # starts already on the device stay there on the fused path (a sweep's grid, built there)
    keep = backend == "fused" and isinstance(y0s, jax.Array)
    y0s = system.check_state(y0s, "y0s", _valid_rows(valid, y0s), host=True)
    y0s = y0s if keep else np.asarray(y0s, dtype=np.float64)
    if y0s.ndim != 2 or y0s.shape[1] != d or y0s.shape[0] < 1:
        raise ValueError(
            f"y0s has shape {y0s.shape}; {type(system).__name__} needs (N, {d}) "
            f"with N >= 1 ({', '.join(system.state_names)})"
        )
    N = y0s.shape[0]
    batch = system.batch_shape()
    if batch not in ((), (N,)):
        raise ValueError(
            f"the parameters of {type(system).__name__} have batch shape {batch}; "
            f"per-start parameters need a batch size of N = {N} (the starts)"
        )
    if mode is None and type(system).initial_mode is AbstractSystem.initial_mode:
        # the default: no pass over the starts on a device (and made there for starts there)
        modes = jnp.zeros(N, jnp.int32) if keep else np.zeros(N, np.int32)
    elif mode is None:
        modes = _initial_modes(system, t0, y0s, _valid_rows(valid, y0s))
    elif isinstance(mode, str) or np.ndim(mode) == 0:
        modes = np.full(N, int(system.check_mode(mode)), np.int32)
    else:
        modes = np.asarray(system.check_mode(np.asarray(mode)))
        if modes.shape != (N,):
            raise ValueError(f"mode has shape {modes.shape}; it must be one mode or ({N},)")

    system.check_functions(y0s[0], int(modes[0]), t0)
    dyn, static = eqx.partition(system, eqx.is_array)
    try:
        hash(static)
    except TypeError:
        raise ValueError(
            f"the static fields of {type(system).__name__} must be hashable "
            f"(they key the compiled kernel)"
        ) from None
    save_events = int(check_integer("save_events", save_events, 0, SAVE_EVENTS_MAX))
    p = system.n_aux
    hybrid = system.hybrid
    ad = _adapter(static, d, p, save_events if hybrid else 0)
    marks = _batched_leaves(system, dyn)
    if aux is None and not p:
        aux = np.zeros((N, 0))
    elif aux is None:
        axes = jax.tree_util.tree_map(lambda b: 0 if b else None, marks)
        aux = np.asarray(_initial_aux(system, dyn, axes, jnp.asarray(y0s), jnp.asarray(modes)))
    aux = np.asarray(aux, dtype=np.float64)
    if aux.shape == (p,):
        aux = np.broadcast_to(aux, (N, p))
    if aux.shape != (N, p):
        raise ValueError(
            f"aux has shape {aux.shape}; {type(system).__name__} needs ({p},) or ({N}, {p})"
        )
    bar = None
    if progress is None:
        progress = N >= BAR_MIN and not in_sweep  # (a sweep passes its own reports)
    if progress is True or progress is False:
        n_valid = N if valid is None else int(np.sum(np.asarray(valid, bool)))
        bar = _bar(n_valid, type(system).__name__) if progress else None
        progress = None if bar is None else bar.report
    elif not callable(progress):
        raise ValueError(
            f"progress = {progress!r} is not allowed: it must be None (a bar for {BAR_MIN} "
            f"starts or more), True, False, or a function of the number of starts finished"
        )
    try:
        return _solve_ensemble(
            system, y0s, N, d, p, ad, hybrid, marks, dyn, modes, aux, keep, t0, t1, ts, rtol,
            atol, dt_max, max_steps, max_resets, n_samples, solver, lanes, devices, valid,
            progress, jump_ts, save_events, backend,
        )  # fmt: skip
    finally:
        if bar is not None:
            bar.finish()


def _solve_ensemble(
    system, y0s, N, d, p, ad, hybrid, marks, dyn, modes, aux, keep, t0, t1, ts,
    rtol, atol, dt_max, max_steps, max_resets, n_samples, solver, lanes, devices, valid,
    progress, jump_ts, save_events, backend,
) -> Solution:  # fmt: skip
    """:func:`solve_ensemble` from its checked inputs on (the kernel and the Solution)."""
    if ts is not None:  # (before the kernel's own handling of jump times: rollax.solve's)
        opts = dict(rtol=rtol, atol=atol, dt_max=dt_max, max_steps=max_steps, solver=solver)
        opts.update(max_resets=max_resets, n_samples=n_samples, jump_ts=jump_ts)
        opts.update(save_events=save_events)
        return _saving(system, y0s, modes, aux, t0, t1, _check_ts(ts, t0, t1), progress, opts)
    # (a start within the smallest step before a jump time goes on from just after it, the
    # state moved over the gap by one Euler step: the kernel's setup does it, as rollax.solve)
    if ad.K:  # the event log's count and rows, after the system's own aux
        _, rows0 = _eventlog.empty(ad.K, d, np.float64)
        aux = np.concatenate(
            [aux, np.zeros((N, 1)), np.broadcast_to(np.asarray(rows0), (N, rows0.shape[0]))], 1
        )
    events = EventSet(
        ad.event_values, system.event_set.kinds, system.event_set.targets, system.event_set.dirs
    )
    xp = jnp if keep else np
    z0 = xp.concatenate([y0s, xp.asarray(modes)[:, None].astype(np.float64)], axis=1)
    res = queue.run(
        ad.field,
        events,
        z0,
        dyn,
        t0=float(t0),
        t_max=float(t1),
        rtol=float(rtol),
        atol=float(atol),
        max_steps=int(max_steps),
        dt_max=np.inf if dt_max is None else float(dt_max),
        lanes=_lanes_used(
            None if lanes is None else int(lanes), N, int(devices or jax.local_device_count())
        ),
        n_samples=int(n_samples),
        devices=devices,
        reset=ad.reset if hybrid else None,
        aux=aux if hybrid else None,
        n_error=d,
        # the mode carried, not integrated: measured (benchmarks/RESULTS.md) the Fig. 11 mu = 1
        # panel 4.06-4.30 -> 3.84-4.07 s; but the no-slip panel 0.23 -> 0.26-0.30 s, so only
        # with a reset map (the only case where a mode can change)
        n_constant=1 if hybrid else 0,
        mode_names=tuple(system.modes) if hybrid else None,
        max_resets=int(max_resets),
        args_batched=marks,
        field_and_events=ad.field_and_events,
        valid=None if valid is None else np.asarray(valid, bool),
        progress=progress,
        flow=ad.flow if system.has_flow else None,
        flow_step=ad.flow_step if system.has_flow else None,
        solver=solver,
        jump_ts=system.jump_times() if jump_ts is None else jump_ts,
        runner=_RUNNER.get()
        or (functools.partial(_fused.run, device=True) if backend == "fused" else None),
    )
    # the fused path's results stay on the device, unless event logs are read (host): a sweep
    # classifies them there, and a direct call pays no transfer of fields it does not read
    # (the 1000 x 1000 panel's starts: 122-136 ms through solve_ensemble against 39-50 ms
    # through the sweep on an H100, stop 38; issue 62)
    kept = isinstance(res.y, jax.Array) and not (ad.K or save_events)
    if kept:
        mode_end, status, y_end, counts, steps, resets, rejected = _device_fields(res, d)
    else:
        res = jax.device_get(res)
        mode_end = np.rint(res.y[:, d]).astype(np.int32)
        status = res.status.astype(np.int32)
        # y contiguous: a strided view is transposed on the host whenever it goes to a device
        # (35 ms of the 1000 x 1000 panel's classification on an H100 host)
        y_end = np.ascontiguousarray(res.y[:, :d])
        counts, steps = res.counts.astype(np.int32), res.steps.astype(np.int32)
        resets, rejected = res.resets.astype(np.int32), res.rejected.astype(np.int32)
    aux_end = res.aux if hybrid else (jnp if kept else np).asarray(aux)
    log = None
    if ad.K:
        log = _eventlog.read(aux_end[:, p], np.ascontiguousarray(aux_end[:, p + 1 :]), d)
        aux_end = np.ascontiguousarray(aux_end[:, :p])
    elif save_events:  # no reset map: the terminal event is the only one
        log = _terminal_log(save_events, status, res.event, res.t, mode_end, y_end)
    # NumPy arrays (JAX arrays on the fused path's device), which Solution's annotations (JAX
    # arrays) leave out: the call is not checked against them
    sol: Solution = cast(Any, Solution)(
        t=res.t,
        y=y_end,
        mode=mode_end,
        aux=aux_end,
        status=status,
        event=res.event,
        counts=counts,
        t_first=res.t_first,
        steps=steps,
        resets=resets,
        rejected=rejected,
        events=log,
    )
    return sol if kept else jax.device_get(sol)  # (NumPy, in one transfer)


@functools.partial(jax.jit, static_argnums=1)
def _device_fields(res, d: int) -> tuple:
    """The fused path's Solution fields made on the device in one program, not one dispatch
    each: the end modes, statuses, states (the first ``d`` columns) and the int32 counters."""
    i32 = jnp.int32
    return (
        jnp.rint(res.y[:, d]).astype(i32),
        res.status.astype(i32),
        res.y[:, :d],
        res.counts.astype(i32),
        res.steps.astype(i32),
        res.resets.astype(i32),
        res.rejected.astype(i32),
    )


#: Starts from which :func:`solve_ensemble` shows a progress bar by default (``progress=None``):
#: a first call of 10,000 starts took 30-80 s on a loaded 2-core machine (issue 56).
BAR_MIN = 10_000


class _Bar:
    """The ensemble's bar: "compiling or loading the kernel" until the first report, then the
    starts finished; the rate and the time left from finished work only (the sweep's bar does
    the same: :func:`rollax._core._announce.restart_clock`)."""

    def __init__(self, total: int, name: str):
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=total, unit="start", desc=f"solve_ensemble {name}", mininterval=0.5, smoothing=0.1
        )
        self.bar.set_postfix_str("compiling or loading the kernel", refresh=True)
        self.started = False

    def report(self, finished: int) -> None:
        self.bar.update(max(0, min(int(finished), self.bar.total) - self.bar.n))
        if not self.started:
            self.started = True
            self.bar.set_postfix_str("", refresh=False)
            _announce.restart_clock(self.bar)

    def finish(self) -> None:
        self.bar.update(self.bar.total - self.bar.n)
        self.bar.close()


def _bar(total: int, name: str) -> _Bar:
    return _Bar(total, name)


#: Starts per ``jax.vmap(rollax.solve)`` call on the saving route (``ts``): the chunk is
#: padded to this size, so one program serves every chunk
SAVE_CHUNK = 1024


def _saving(system, y0s, modes, aux, t0, t1, ts, progress, opts) -> Solution:
    """:func:`solve_ensemble` with save times ``ts``: each start through :func:`rollax.solve`
    under ``jax.vmap``, :data:`SAVE_CHUNK` starts a call (the last chunk padded with its first
    start), ``progress`` after each chunk."""
    N = int(np.shape(y0s)[0])
    axes = system.batch_axes()
    # (the starts, modes and aux as solve_ensemble checked them: (N, d), (N,), (N, p))
    y0s, modes = np.asarray(y0s, dtype=np.float64), np.asarray(modes, np.int32)
    C = min(SAVE_CHUNK, N)
    parts = []
    for lo in range(0, N, C):
        hi = min(N, lo + C)
        take = np.r_[np.arange(lo, hi), np.full(C - (hi - lo), lo)]

        def rows(x, ax):
            return x if ax is None else x[take]

        sys_c = jax.tree_util.tree_map(rows, system, axes, is_leaf=lambda x: x is None)
        out = _saving_run(
            sys_c, y0s[take], modes[take], aux[take], float(t0), float(t1), ts, **opts
        )
        parts.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[: hi - lo], out))
        if progress is not None:
            progress(hi)
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *parts)


@eqx.filter_jit
def _saving_run(system, y0s, modes, aux, t0, t1, ts, **opts) -> Solution:
    axes = system.batch_axes()

    def one(sys_, y0, mode, a):
        return solve(sys_, y0, t0, t1, mode=mode, aux=a, ts=ts, **opts)

    return jax.vmap(one, in_axes=(axes, 0, 0, 0))(system, y0s, modes, aux)


def _terminal_log(K: int, status, event, t, mode, y) -> _eventlog.EventLog:
    """The event log of runs without a reset map: the event that ended a run, if one did."""
    N, d = y.shape
    hit = status == Status.EVENT
    rows = np.full((N, K, _eventlog.width(d)), np.nan)
    rows[hit, 0, 0] = t[hit]
    rows[hit, 0, 1] = event[hit]
    rows[hit, 0, 2] = mode[hit]
    rows[hit, 0, 3] = t[hit]
    rows[hit, 0, 4] = mode[hit]
    rows[hit, 0, 5 : 5 + d] = y[hit]
    rows[hit, 0, 5 + d :] = y[hit]
    return _eventlog.read(hit.astype(np.float64), rows.reshape(N, -1), d)


#: The keyword options of :func:`solve_ensemble` (what :func:`rollax.sweep` may pass on)
OPTIONS = tuple(
    k
    for k, p in inspect.signature(solve_ensemble).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)

# set by rollax.sweep around its solves, which report their own progress (no bar here)
_IN_SWEEP: contextvars.ContextVar = contextvars.ContextVar(
    "rollax_ensemble_in_sweep", default=False
)

# a scoped replacement of the fused path's runner (fused_program lowers instead of running)
_RUNNER: contextvars.ContextVar = contextvars.ContextVar("rollax_ensemble_runner", default=None)


class _Lowered(Exception):
    def __init__(self, lowered):
        super().__init__("lowered")
        self.lowered = lowered


def fused_program(
    system: AbstractSystem,
    y0s,
    t0: float = 0.0,
    t1: float = math.inf,
    *,
    platform: str | None = "cuda",
    phase: str | None = None,
    **options,
):
    """The fused kernels (``backend="fused"``) of ``system`` for the starts ``y0s`` and the
    options of :func:`solve_ensemble`, lowered for one block of starts on ``platform``
    (``"cuda"`` works on a machine without a GPU; ``None``: this machine's). ``phase``: one
    kernel alone, ``"setup"``, ``"run"``, ``"serve"`` (systems with a reset map) or
    ``"finish"`` (``docs/fused.md``); None: the whole program. Returns JAX's ``Lowered``:
    ``.as_text()`` is the program (``docs/fused.md`` on what sets its compile time),
    ``.compile()`` compiles it (on a GPU). A system the kernel cannot run raises
    ``NotImplementedError`` naming the primitive."""
    if phase is not None and phase not in _fused.PHASES:
        raise ValueError(
            f"phase = {_show(phase)} is not allowed: it must be None or one of "
            f"{', '.join(repr(p) for p in _fused.PHASES)}"
        )

    def lower(pb, y0s_, aux, valid, bargs, sargs, sc, progress=None):
        raise _Lowered(_fused.lower(pb, y0s_, aux, bargs, sargs, sc, platform, phase))

    token = _RUNNER.set(lower)
    try:
        solve_ensemble(system, y0s, t0, t1, backend="fused", **{"progress": False, **options})
    except _Lowered as done:
        return done.lowered
    finally:
        _RUNNER.reset(token)
    raise AssertionError("the fused path did not reach its kernel")  # pragma: no cover


def _valid_rows(valid, y0s):
    """``valid`` as an ``(N,)`` bool array (None: all rows), or a ``ValueError``."""
    if valid is None:
        return None
    n = np.shape(y0s)[0] if np.ndim(y0s) else 0
    v = np.asarray(valid)
    if v.dtype.kind not in "bi" or v.shape != (n,):
        raise ValueError(
            f"valid = {_show(valid)} is not allowed: it must be {n} booleans, one per start"
        )
    return v.astype(bool)


def _initial_modes(system, t0, y0s, valid) -> np.ndarray:
    """``system.initial_mode`` of every start (per-start parameters too) as int32 indices, or a
    ``ValueError`` naming the first start whose mode is not an index of ``system.modes``."""
    dyn, static = eqx.partition(system, eqx.is_array)
    axes = system.batch_axes()
    m = np.asarray(_modes_of(dyn, static, axes, jnp.asarray(y0s), jnp.asarray(t0, y0s.dtype)))
    if m.ndim != 1 or m.dtype.kind not in "iu":
        raise ValueError(
            f"initial_mode returned {m.dtype} values of shape {m.shape[1:]}; it "
            f"must be one integer index of {list(system.modes)} per start"
        )
    bad = (m < 0) | (m >= len(system.modes))
    if valid is not None:
        bad &= valid
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"initial_mode returned {int(m[i])} for start {i}; it must be an "
            f"index of {list(system.modes)}"
        )
    return m.astype(np.int32)


@eqx.filter_jit
def _modes_of(dyn, static, axes, y0s, t0):
    return jax.vmap(
        lambda dy, y: jnp.asarray(eqx.combine(dy, static).initial_mode(t0, y)), in_axes=(axes, 0)
    )(dyn, y0s)


@eqx.filter_jit
def _initial_aux(system, dyn, axes, y0s, modes):
    static = eqx.partition(system, eqx.is_array)[1]
    return jax.vmap(
        lambda dy, y, m: eqx.combine(dy, static).initial_aux(y, m), in_axes=(axes, 0, 0)
    )(dyn, y0s, modes)
