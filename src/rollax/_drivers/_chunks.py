"""Chunked, resumable, interruptible, distributable sweeps over many starts, with progress.

:func:`run_chunked` cuts the starts into regions (:func:`rollax._drivers._store.region_layout`:
blocks of the grid of at most ``chunk_size`` starts, each padded to one width so that one
compiled kernel serves them all; a sweep that fits in one region is padded only to a size class
of its own, see :func:`chunk_width`), builds each region's starts only when it runs it (memory
stays bounded by the results), runs it, and, given a store, writes every finished region into it
at once (:class:`rollax._drivers._store.RegionStore`: the zarr store that is the sweep's labelled
dataset). A sweep that is killed or interrupted and restarted with the same arguments reads
the finished regions back, after verifying them, instead of computing them again.

With a Dask client (``client``) each region is one task, run on the cluster's workers
(:func:`_remote_region`): the worker verifies the region in the store or computes it and
writes it there, and only its tallies (counts) come back, unless the results are kept in
memory (no store). A lost worker's region is run again elsewhere by Dask's scheduler, with
the same result (a region's result depends on its starts only). The bar counts finished
regions.

SIGINT and SIGTERM during :func:`run_chunked` (in the main thread) stop it within about a
tenth of a second: each region runs in a worker thread (or on the cluster) while the main thread
polls a flag, the finished regions are kept, and :class:`SweepInterrupted` (a
``KeyboardInterrupt``) is raised with a one-line message saying how to resume. The interrupted
region's computation is abandoned: in this process it stops at its next progress report (within
about a second for the ensemble kernel, which reports between slices of its loop); on a cluster
the tasks not yet started are cancelled (a running one finishes, and writes its region).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import secrets
import shutil
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from rollax._core import _tail
from rollax._core._announce import restart_clock
from tqdm.auto import tqdm

_POLL = 0.05  # seconds between looks at the interrupt flag


class SweepInterrupted(KeyboardInterrupt):
    """A chunked sweep was stopped by SIGINT or SIGTERM; the finished chunks are kept.

    ``signum``: the signal; ``done``/``total``: regions finished (saved or loaded) and in all;
    ``folder``: the store holding the finished regions (``None`` without a store).
    ``exit_code``: 128 + the signal number (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, signum: int, done: int, total: int, folder: str | Path | None):
        self.signum, self.done, self.total, self.folder = signum, done, total, folder
        name = signal.Signals(signum).name
        if folder is None:
            where = "nothing was saved (no store); rerun the same command to start over"
        else:
            where = f"the finished regions are kept in {folder}; rerun the same command to resume"
        super().__init__(f"interrupted by {name} after {done} of {total} regions: {where}")

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum)

    def __str__(self) -> str:
        return self.args[0]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C by :func:`terminate_as_interrupt` (the ``rollax`` command's
    SIGTERM handler), so that it ends the command the same clean way."""

    signum = signal.SIGTERM


def terminate_as_interrupt(signum, frame):
    """A SIGTERM handler that raises :class:`Terminated`."""
    raise Terminated("terminated by SIGTERM")


def sweep_key(spec: Mapping) -> str:
    """A stable hex digest of a JSON-serialisable description of a sweep."""
    text = json.dumps(spec, sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


@contextlib.contextmanager
def _signal_flag():
    """A dict whose ``"sig"`` is set by SIGINT/SIGTERM while the context is open (main thread
    only, and only where the handler is Python's default: a caller's own handler is kept)."""
    flag: dict = {"sig": None}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        flag["sig"] = signum

    old = {}
    for sig, default in (
        (signal.SIGINT, signal.default_int_handler),
        (signal.SIGTERM, terminate_as_interrupt),
    ):
        if signal.getsignal(sig) in (default, signal.SIG_DFL):
            old[sig] = signal.signal(sig, handler)
    try:
        yield flag
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


class _Abandoned(Exception):
    """Raised inside an abandoned chunk's computation (at its next progress report) to stop it."""


def _call_polling(fn, args, flag, interrupted, shown=None):
    """``fn(*args, report)`` in a daemon worker thread, polling ``flag`` while it runs; raises
    ``interrupted()`` at once when a signal arrives. ``report(k)`` (called by ``fn`` on the
    worker thread) records that ``k`` of its items are done; each poll passes the growth to
    ``shown(delta)`` on this thread. After an interrupt, the worker's next ``report`` raises,
    so an abandoned computation that reports stops there instead of running to its end."""
    box: dict = {"done": 0}
    stop = threading.Event()

    def report(k):
        if stop.is_set():
            raise _Abandoned
        box["done"] = max(box["done"], int(k))

    def target():
        try:
            box["out"] = fn(*args, report)
        except _Abandoned:
            pass
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            box["err"] = err

    worker = threading.Thread(target=target, name="rollax-chunk", daemon=True)
    worker.start()
    seen = 0
    try:
        while worker.is_alive():
            worker.join(_POLL)
            if shown is not None and box["done"] > seen:
                shown(box["done"] - seen)
                seen = box["done"]
            if flag["sig"] is not None:
                raise interrupted()
    except BaseException:
        stop.set()
        raise
    if "err" in box:
        raise box["err"]
    return box["out"], seen


def _available_memory() -> int | None:
    """Bytes of memory available to this process (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} PB"  # pragma: no cover


def check_fits(n: int, row_bytes: int, what: str = "sweep") -> None:
    """Refuse (one-line ``MemoryError``) results of ``n`` rows of ``row_bytes`` that would not
    fit in the available memory."""
    need = int(n) * int(row_bytes)
    have = _available_memory()
    if have is not None and need > have:
        raise MemoryError(
            f"{what} of {n:,} starts needs about {_size(need)} of memory for its results, but "
            f"only {_size(have)} is available: use a coarser grid or split the sweep"
        )


def chunk_width(n: int, chunk_size: int) -> int:
    """Rows per chunk for ``n`` starts that fit in one chunk (a sweep of several regions pads
    them to its largest region, a whole number of trailing rows: see :func:`run_chunked`);
    otherwise the smallest size class ``2^k * (1, 1.25, 1.5, 1.75)`` that holds the ``n``
    starts, at least 4096 and at most ``chunk_size``.

    Padding rows are not free (each costs the kernel's per-start set-up and records: the
    Fig. 11 no-slip panel, 86,400 starts, took 0.30 s in one chunk of 131,072 against 0.27 s
    unpadded; benchmarks/RESULTS.md), while every new width compiles the kernel again; above
    4096 starts the classes bound the padding to a quarter of ``n`` and the compiled widths to
    four per octave."""
    if n >= chunk_size:
        return chunk_size
    # (imported here: the CLI's --help imports this module and must not load JAX)
    from rollax._integrate.queue import size_class

    return min(chunk_size, size_class(n, floor=4096))


class Chunked(dict):
    """What :func:`run_chunked` returns: the results in memory (its items, with ``keep``;
    empty without: they are in the store), the ``tallies`` of every region summed, how many
    regions were ``computed`` and ``loaded`` (verified in the store), and per process that ran
    regions (``"pid@host"``): regions, XLA compiles and compile-cache hits (``workers``)."""

    def __init__(self, arrays, tallies, computed: int, loaded: int, workers):
        super().__init__(arrays or {})
        self.tallies: dict[str, np.ndarray] = tallies
        self.computed, self.loaded = int(computed), int(loaded)
        self.workers: dict[str, dict[str, int]] = workers


def run_chunked(
    fn: Callable[[Any, np.ndarray, Callable[[int], None]], Mapping[str, Any]],
    starts: np.ndarray | Callable[[int, int], np.ndarray],
    *,
    chunk_size: int,
    n: int | None = None,
    shape: tuple[int, ...] | None = None,
    store: str | os.PathLike | None = None,
    key: str = "",
    store_options: Mapping[str, Any] | None = None,
    row_bytes: int | None = None,
    progress: bool = True,
    desc: str = "sweep",
    client=None,
    keep: bool = True,
    tally: Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]] | None = None,
) -> Chunked:
    """Run ``fn(chunk, valid, report)`` over ``starts`` region by region.

    ``starts``: an ``(n, ...)`` array, or a function ``starts(lo, hi)`` returning rows
    ``lo:hi`` (then ``n`` is required; each region's starts are built only when it runs).
    ``shape``: the grid the ``n`` starts fill in row-major order (default ``(n,)``); the
    regions are its blocks (:func:`rollax._drivers._store.region_layout`). ``fn`` receives a
    ``(width, ...)`` array (the region padded by repeating its first row; a NumPy array, or any
    array of the array API, such as a JAX array on a device, which is padded there) and the
    boolean mask of real rows, and returns a dict of arrays with leading axis ``width``; it may
    call ``report(k)`` with the number of the region's starts finished so far, which moves the
    progress bar within the region (and, after an interrupt, raises to stop the abandoned
    computation).

    ``store``: the zarr store every finished region is written into, and resumed from
    (:class:`rollax._drivers._store.RegionStore`, opened with ``key`` and ``store_options``).
    Whoever computes a region writes it: this process, or the Dask worker that ran it
    (``client``), and a region found in the store is verified there too, so that with
    ``keep=False`` no more than a region's results are ever in this process. ``keep``: return
    the whole result in memory (the :class:`Chunked`'s items). ``tally(part)``: small per-region
    summaries (counts), computed where the region is and summed here. ``row_bytes``: bytes of
    results per start, to refuse up front (one-line ``MemoryError``, or ``OSError`` for the
    disk) a sweep whose results would not fit where they are kept. ``client``: a
    ``dask.distributed.Client`` to run the regions on (``fn`` and ``starts`` are sent to its
    workers with cloudpickle).

    Raises :class:`SweepInterrupted` on SIGINT/SIGTERM (module docstring).
    """
    from rollax._drivers._store import RegionStore, StoreWarning, region_layout

    if (
        isinstance(chunk_size, bool)
        or not isinstance(chunk_size, (int, np.integer))
        or chunk_size < 1
    ):
        raise ValueError(f"chunk_size = {chunk_size!r} is not allowed: it must be an integer >= 1")
    chunk_size = int(chunk_size)
    if callable(starts):
        if n is None:
            raise ValueError("n (the number of starts) is needed when starts is a function")
        make = starts
    else:
        arr = np.asarray(starts)
        n = int(arr.shape[0])
        make = _Rows(arr)
    n = int(n)
    if n < 1:
        raise ValueError(f"n = {n!r} is not allowed: a sweep needs at least one start")
    shape = (n,) if shape is None else tuple(int(s) for s in shape)
    if int(np.prod(shape)) != n:
        raise ValueError(f"shape = {shape} does not hold n = {n} starts")
    if not keep and store is None:
        raise ValueError("keep=False needs a store: the results must be kept somewhere")
    if row_bytes is not None and keep:
        check_fits(n, row_bytes)
    layout = region_layout(shape, chunk_size)[1]
    n_chunks = len(layout)
    width = chunk_width(n, chunk_size) if n_chunks == 1 else max(hi - lo for lo, hi, _ in layout)
    if row_bytes is not None:
        check_region_fits(width, row_bytes, client)
    rs = None
    if store is not None:
        if row_bytes is not None:
            check_disk(store, n, row_bytes)
        rs = RegionStore.open(store, key, shape, chunk_size, **dict(store_options or {}))
    regions = [(lo, hi) for lo, hi, _ in layout]
    out: dict[str, np.ndarray] | None = None
    sums: dict[str, np.ndarray] = {}
    workers: dict[str, dict[str, int]] = {}
    done = computed = loaded = 0
    faults: dict[str, list[int]] = {}

    def interrupted():
        where = None if rs is None else rs.where
        folder = None if where is None else (where.name if where.is_url else where.path)
        return SweepInterrupted(flag["sig"], done, n_chunks, folder)

    after = {"solved": False}  # set by the worker when a region's solves are all done
    task = _Region(_Compute(fn, make, width, after), None if rs is None else rs.spec(), tally, keep)

    bar = tqdm(
        total=n, unit="start", desc=desc, disable=not progress, smoothing=0.1, mininterval=0.5
    )
    started = False

    def shown(bar, k):
        nonlocal started
        first = not started
        if first:
            started = True
            bar.set_postfix_str("", refresh=False)
        bar.update(k)
        if first:
            restart_clock(bar)
        if after["solved"]:
            after["solved"] = False
            bar.set_postfix_str("solved; outcomes and summaries of the region", refresh=True)
        elif k and 0 < (total := getattr(bar, "total", 0) or 0) - getattr(bar, "n", total) <= max(
            3, total // 1000
        ):
            # a long tail of slow starts (the slipping map's) shown as such, not as a stall
            left = total - bar.n
            what = _tail.text()  # (their modes and steps, from the work queue)
            bar.set_postfix_str(
                f"{left} start{'s' * (left > 1)} still running" + (f": {what}" if what else ""),
                refresh=True,
            )

    def place(res: Mapping[str, Any]) -> None:
        nonlocal out, done, computed, loaded
        i, part = res["i"], res["part"]
        if res["why"]:
            faults.setdefault(res["why"], []).append(i)
        for k, v in res["tally"].items():
            sums[k] = sums[k] + v if k in sums else np.asarray(v).copy()
        w = workers.setdefault(res["worker"], dict(regions=0, compiles=0, cache_hits=0))
        w["regions"] += 1
        w["compiles"] += res["compiles"]
        w["cache_hits"] += res["cache_hits"]
        loaded += bool(res["loaded"])
        computed += not res["loaded"]
        done += 1
        if not keep:
            return
        lo, hi = regions[i]
        if out is None and n_chunks == 1:  # the part is the whole: no copy
            out = dict(part)
            return
        if out is None:
            out = {k: np.empty((n,) + v.shape[1:], v.dtype) for k, v in part.items()}
        if set(part) != set(out):
            raise RuntimeError(f"region {i} has fields {sorted(part)}, region 0 has {sorted(out)}")
        for k, v in part.items():
            out[k][lo:hi] = v

    with _signal_flag() as flag:
        try:
            # each region by what its record claims: never finished, another sweep's, or
            # finished (then verified against its checksum where it is read)
            plan: list[tuple[int, bool]] = []
            records = rs.records() if rs is not None else None
            for i in range(n_chunks):
                claim = "missing" if rs is None else rs.claims(i, records[i])  # pyright: ignore[reportOptionalSubscript]
                if claim not in ("missing", "done"):
                    faults.setdefault(claim, []).append(i)
                plan.append((i, claim == "done"))
            if client is not None:
                _run_on_cluster(client, task, regions, plan, place, bar, flag, interrupted)
            else:
                todo = []
                for i, verify in plan:
                    if not verify:
                        todo.append(i)
                        continue
                    res = task(i, *regions[i], True, verify_only=True)
                    if res["part"] is None and res.get("failed"):
                        faults.setdefault(str(res["failed"]), []).append(i)
                        todo.append(i)
                        continue
                    place(res)
                    bar.update(regions[i][1] - regions[i][0])
                    if flag["sig"] is not None:
                        raise interrupted()
                for i in todo:
                    lo, hi = regions[i]
                    if not started:  # the bar stands still while the kernel compiles: say so
                        bar.set_postfix_str("compiling or loading the kernel", refresh=True)
                    res, seen = _call_polling(
                        task, (i, lo, hi, False), flag, interrupted, functools.partial(shown, bar)
                    )
                    place(res)
                    after["solved"] = False
                    bar.set_postfix_str("", refresh=False)
                    shown(bar, hi - lo - seen)
                    if flag["sig"] is not None:
                        raise interrupted()
        except BaseException as err:
            # (a region's fault found on a worker whose write then failed)
            why, i = getattr(err, "rollax_fault", ("", -1))
            if why:
                faults.setdefault(why, []).append(i)
            raise
        finally:
            bar.close()
            # the faults found, also before an error that ends the sweep (a region's chunk
            # that cannot be read, and then cannot be written: both said)
            for why, which in faults.items():
                assert rs is not None
                listed = ", ".join(map(str, sorted(which)[:8])) + (" ..." * (len(which) > 8))
                warnings.warn(
                    f"store {rs.path}: {len(which)} region(s) {why} (regions {listed}); "
                    f"computing them again",
                    StoreWarning,
                    stacklevel=3,
                )
    if keep:
        assert out is not None  # n >= 1: at least one region
    return Chunked(out, sums, computed, loaded, workers)


class _Rows:
    """Rows ``lo:hi`` of an array (a picklable ``starts`` function)."""

    def __init__(self, arr):
        self.arr = arr

    def __call__(self, lo, hi):
        return self.arr[lo:hi]


class _Compute:
    """One region's results: its starts built, padded to ``width``, run by ``fn`` and cut back
    to its rows (picklable with cloudpickle, for a Dask worker)."""

    def __init__(self, fn, make, width, after=None):
        self.fn, self.make, self.width, self.after = fn, make, width, after

    def __call__(self, i, lo, hi, report=None):
        chunk = self.make(lo, hi)
        if not hasattr(chunk, "__array_namespace__"):
            chunk = np.asarray(chunk)
        # a device array (the sweep's grid built on a GPU) is padded where it is: the array
        # API's namespace, NumPy's or jax.numpy's
        xp = chunk.__array_namespace__()
        width = self.width
        valid = np.ones(width, bool)
        if hi - lo < width:
            fill = xp.broadcast_to(chunk[:1], (width - (hi - lo),) + tuple(chunk.shape[1:]))
            chunk = xp.concat([chunk, fill])
            valid[hi - lo :] = False

        def capped(k):
            # the bar stops one short until the region is whole: what follows the solves (the
            # outcomes, a summary, compiled at the first region) is labelled, not shown as 100 %
            if self.after is not None and int(k) >= hi - lo:
                self.after["solved"] = True
            if report is not None:
                report(min(int(k), hi - lo - 1))

        res = self.fn(chunk, valid, capped)
        return {k: np.ascontiguousarray(np.asarray(v)[: hi - lo]) for k, v in res.items()}

    def __getstate__(self):
        return dict(fn=self.fn, make=self.make, width=self.width, after=None)

    def __setstate__(self, state):
        self.__dict__.update(state)


class _Region:
    """A region, wherever it runs (this process or a Dask worker): verified in the store, or
    computed and written into it there; what comes back is its tallies (and its results with
    ``keep``), so that a sweep into a store never sends its results through the client."""

    def __init__(self, compute: _Compute, store: Mapping[str, Any] | None, tally, keep: bool):
        self.compute, self.store, self.tally, self.keep = compute, store, tally, keep
        self._rs = None

    def _region_store(self):
        if self.store is None:
            return None
        if self._rs is None:
            from rollax._drivers._store import RegionStore

            spec = dict(self.store)
            path, key, shape, block = (spec.pop(k) for k in ("path", "key", "shape", "block"))
            # (a chunk size of one block gives the store's block and regions back)
            self._rs = RegionStore.attach(path, key, shape, int(np.prod(block)), **spec)
            assert tuple(self._rs.block) == tuple(block)
        return self._rs

    def __call__(self, i, lo, hi, verify, report=None, *, verify_only=False):
        base = compile_counts()  # (this task's compiles: what it adds)
        rs = self._region_store()
        why = ""
        if verify and rs is not None:
            part, why = rs.load(i)
            if part is not None:
                return self._done(i, part, True, "", base)
            if verify_only:
                return dict(i=i, part=None, failed=why)
        part = self.compute(i, lo, hi, report)
        if rs is not None:
            try:
                rs.save(i, part)
            except Exception as err:
                if why and why != "is missing":  # the client says both
                    err.rollax_fault = (why, i)  # pyright: ignore[reportAttributeAccessIssue]
                raise
        return self._done(i, part, False, why if why != "is missing" else "", base)

    @staticmethod
    def _who() -> str:
        import socket

        return f"{os.getpid()}@{socket.gethostname()}"

    def _done(self, i, part, loaded: bool, why: str, base) -> dict[str, Any]:
        counts = {k: v - base[k] for k, v in compile_counts().items()}
        return dict(
            i=i,
            part=part if self.keep else None,
            loaded=loaded,
            why=why,
            tally={} if self.tally is None else dict(self.tally(part)),
            worker=self._who(),
            compiles=counts["compiles"],
            cache_hits=counts["cache_hits"],
        )

    def __getstate__(self):
        return dict(compute=self.compute, store=self.store, tally=self.tally, keep=self.keep)

    def __setstate__(self, state):
        self.__dict__.update(state, _rs=None)


_COUNTS = {"compiles": 0, "cache_hits": 0, "on": False}
_COUNTS_LOCK = threading.RLock()


def compile_counts() -> dict[str, int]:
    """XLA compiles and persistent compile-cache hits in this process since it first asked
    (JAX's monitoring events: a backend compile that the cache served is a hit, not a
    compile)."""
    with _COUNTS_LOCK:
        # (a process without JAX compiles nothing: importing it here took a pure-NumPy run's
        # signal handling 4.5 s)
        if not _COUNTS["on"] and "jax" in sys.modules:
            import jax.monitoring

            def on_event(event: str, **kw) -> None:
                if event == "/jax/compilation_cache/cache_hits":
                    with _COUNTS_LOCK:
                        _COUNTS["cache_hits"] += 1
                        _COUNTS["compiles"] -= 1  # (its backend event is counted below)

            def on_duration(event: str, duration_secs: float, **kw) -> None:
                if event == "/jax/core/compile/backend_compile_duration":
                    with _COUNTS_LOCK:
                        _COUNTS["compiles"] += 1

            jax.monitoring.register_event_listener(on_event)
            jax.monitoring.register_event_duration_secs_listener(on_duration)
            _COUNTS["on"] = True
        return {k: int(v) for k, v in _COUNTS.items() if k != "on"}


_REMOTE: dict[str, Any] = {}  # on a Dask worker: the unpickled computations, by digest


def _remote_region(payload: bytes, digest: str, cache_dir, i: int, lo: int, hi: int, verify: bool):
    """A region on a Dask worker (:class:`_Region`). The computation is unpickled once per
    worker and kept (so that its compiled kernels are reused by the next regions), after rollax
    is imported (float64 on) and the persistent compile cache is set to the client's folder
    where the worker sees it (else its own ``ROLLAX_CACHE_DIR``), every program kept however
    quick its compile, so that a fresh worker compiles nothing the cache holds."""
    comp = _REMOTE.get(digest)
    if comp is None:
        import cloudpickle
        import jax

        import rollax  # noqa: F401 - float64 before any array is unpickled

        own = os.environ.get("ROLLAX_CACHE_DIR", "")
        if cache_dir and own.lower() != "off":
            from rollax._core._config import _set_cache

            # the client's folder where this worker sees it (one machine, a shared
            # filesystem), else the worker's own ROLLAX_CACHE_DIR (a job's prologue)
            where = cache_dir if os.path.isdir(cache_dir) or not own else own
            _set_cache(jax, where, _cache_max())
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        while len(_REMOTE) >= 4:  # a long-lived worker keeps the last few sweeps' kernels
            _REMOTE.pop(next(iter(_REMOTE)))
        comp = _REMOTE[digest] = cloudpickle.loads(payload)
    return comp(i, lo, hi, verify)


def _cache_max() -> int:
    import jax

    return int(getattr(jax.config, "jax_compilation_cache_max_size", -1))


def _run_on_cluster(client, task, regions, plan, place, bar, flag, interrupted):
    """The regions of ``plan`` (``(i, verify)``) as Dask tasks: a region is verified or
    computed where its task runs, and written to the store there; what comes back (its tallies)
    is placed as it arrives, in any order."""
    import cloudpickle
    import jax
    from distributed import as_completed

    payload = cloudpickle.dumps(task)
    digest = hashlib.sha256(payload).hexdigest()
    cache_dir = getattr(jax.config, "jax_compilation_cache_dir", None)
    if not getattr(jax.config, "jax_enable_compilation_cache", True):
        cache_dir = None
    _check_workers(client, task.store)
    # (unhashed data and keys of this call: a rerun right after a cancel must not meet the
    # old tasks' keys while the scheduler releases them)
    data = client.scatter(payload, broadcast=True, hash=False)
    call = secrets.token_hex(3)
    n_compute = sum(not v for _, v in plan)
    bar.set_postfix_str(
        # (a fresh worker compiles or loads the kernel before its first region: 18 s of a
        # standing bar for a 24 x 16 map on 2 local workers, cold, measured)
        f"{n_compute} regions to compute, {len(plan) - n_compute} to verify, on the cluster "
        f"(a worker's first region compiles or loads the kernel)",
        refresh=True,
    )
    futures = {
        client.submit(
            _remote_region,
            data,
            digest,
            cache_dir,
            i,
            *regions[i],
            verify,
            key=f"rollax-{'verify' if verify else 'region'}-{digest[:12]}-{call}-{i}",
            pure=False,
            retries=2,
        ): i
        for i, verify in plan
    }
    try:
        pending = as_completed(list(futures))
        while not pending.is_empty():
            batch = pending.next_batch(block=False)
            for fut in batch:
                i = futures[fut]
                place(fut.result())
                bar.update(regions[i][1] - regions[i][0])
            if flag["sig"] is not None:
                raise interrupted()
            if not batch:
                threading.Event().wait(_POLL)
    except BaseException:
        client.cancel(list(futures))
        raise


def _check_workers(client, store) -> None:
    """Refuse (one line) a cluster whose workers run other rollax code (their regions would
    never match the client's records: every rerun would compute all again) or cannot see the
    store (it must be on a filesystem they share, at the same path)."""
    from rollax._drivers._store import code_fingerprint

    path = None if store is None else store["path"]
    try:
        seen = client.run(_worker_view, path)
    except Exception:  # noqa: BLE001 - no answer: the tasks say what is wrong
        return
    mine = code_fingerprint()
    for addr, (fp, sees) in sorted(seen.items()):
        if fp != mine:
            raise ValueError(
                f"worker {addr} runs other rollax code or versions (fingerprint {fp}, the "
                f"client's {mine}): install the same rollax, JAX and NumPy on the workers"
            )
        if path is not None and not sees:
            raise ValueError(
                f"store = {path!r} is not visible on worker {addr}: workers write their regions "
                f"into the store themselves, so put it on a filesystem every worker shares, at "
                f"the same path, or in an object store they all reach (an fsspec URL)"
            )


def _worker_view(path):
    """On a worker: its rollax code fingerprint, and whether it sees the store at ``path``."""
    from rollax._drivers._store import Location, code_fingerprint

    try:
        sees = path is None or Location(path).exists("zarr.json")
    except Exception:  # noqa: BLE001 - no fsspec package or credentials for it here
        sees = False
    return code_fingerprint(), sees


def check_region_fits(width: int, row_bytes: int, client=None) -> None:
    """Refuse (one-line ``MemoryError``) a region whose results would not fit where it is
    computed: this process's available memory, or the smallest memory limit of the
    cluster's workers."""
    need = 2 * int(width) * int(row_bytes)  # the kernel's outputs and their host copy
    if client is None:
        have, where = _available_memory(), "this process"
    else:
        try:
            try:  # (all workers: some versions list the first 5 by default)
                info = client.scheduler_info(n_workers=-1).get("workers", {})
            except TypeError:
                info = client.scheduler_info().get("workers", {})
            limits = [int(w.get("memory_limit") or 0) for w in info.values()]
            limits = [m for m in limits if m > 0]
        except Exception:  # noqa: BLE001 - no limit known: no claim
            limits = []
        have, where = (min(limits), "the smallest worker") if limits else (None, "")
    if have is not None and need > have:
        raise MemoryError(
            f"a region of {width:,} starts needs about {_size(need)} of memory for its "
            f"results, but {where} has {_size(have)}: give a smaller chunk_size"
        )


def check_disk(store, n: int, row_bytes: int) -> None:
    """Refuse (one-line ``OSError``) a store whose results, uncompressed, would not fit on the
    disk that holds it, or one whose directory cannot be made (before the free space: the
    free space of the nearest existing folder, ``/proc`` say, said nothing of why)."""
    from rollax._drivers._store import is_url

    if is_url(store):  # (an object store: no free space to ask for)
        return
    parent = Path(store).resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(
            err.errno,
            f"store = {str(store)!r}: its directory {str(parent)!r} cannot be made "
            f"({err.strerror or err})",
        ) from None
    p = Path(store).resolve()
    while not p.exists():
        p = p.parent
    free = shutil.disk_usage(p).free
    need = int(n) * int(row_bytes)
    if need > free:
        raise OSError(
            f"store = {str(store)!r}: the sweep of {n:,} starts needs up to {_size(need)} of "
            f"disk for its results, but only {_size(free)} is free there: use a coarser grid, "
            f"split the sweep or give a store on a larger disk"
        )
