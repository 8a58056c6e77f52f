"""Chunked, resumable, interruptible sweeps over many starts, with a progress bar.

:func:`run_chunked` cuts the starts into fixed-size chunks (the last one padded, so one compiled
kernel serves them all; a sweep that fits in one chunk is padded only to a size class of its
own, see :func:`chunk_width`), builds each chunk's starts only when it runs it (memory stays
bounded by the results), runs it, and, when given a directory, saves every finished chunk there
at once.
A sweep that is killed or interrupted and restarted with the same arguments loads the finished
chunks instead of recomputing them.

The chunk store verifies what it finds:

* the folder is named by a hash of everything that defines the result (``key``), so different
  sweeps never mix;
* every chunk records that key, the rollax version, the JAX/jaxlib/NumPy versions and a
  fingerprint of the rollax source code (:func:`code_fingerprint`), and a SHA-256 checksum of
  its arrays; a chunk that cannot be read (truncated, not a zip), whose checksum does not match
  (corrupt) or that was computed by other code (stale) is recomputed, with a one-line
  :class:`ChunkWarning` naming the file;
* chunks are written to a temporary file with a per-process, per-thread name and moved into
  place with :func:`os.replace` (atomic), so a killed run never leaves half a chunk and two runs
  into one directory never write the same file: both finish with the correct result (the
  second one loads what the first has finished);
* the chunk folder is removed after a successful run unless ``keep_chunks`` (and the cache
  directory too if the run created it and nothing else is in it).

SIGINT and SIGTERM during :func:`run_chunked` (in the main thread) stop it within about a
tenth of a second: each chunk runs in a worker thread while the main thread polls a flag, the
finished chunks are kept, and :class:`SweepInterrupted` (a ``KeyboardInterrupt``) is raised
with a one-line message saying how to resume. The interrupted chunk's computation is abandoned:
it stops at its next progress report (within about a second for the ensemble kernel, which
reports between slices of its loop), and its result is dropped.
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
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from tqdm.auto import tqdm

_FORMAT = 2  # version of the chunk file layout
_META = "__rollax_chunk__"  # name of the metadata entry inside a chunk file
_POLL = 0.05  # seconds between looks at the interrupt flag


class ChunkWarning(UserWarning):
    """A stored chunk could not be used (unreadable, corrupt or stale) and is recomputed."""


class SweepInterrupted(KeyboardInterrupt):
    """A chunked sweep was stopped by SIGINT or SIGTERM; the finished chunks are kept.

    ``signum``: the signal; ``done``/``total``: chunks finished (saved or loaded) and in all;
    ``folder``: where the finished chunks are (``None`` without a cache directory).
    ``exit_code``: 128 + the signal number (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, signum: int, done: int, total: int, folder: Path | None):
        self.signum, self.done, self.total, self.folder = signum, done, total, folder
        name = signal.Signals(signum).name
        if folder is None:
            where = "nothing was saved (no cache directory); rerun the same command to start over"
        else:
            where = f"the finished chunks are kept in {folder}; rerun the same command to resume"
        super().__init__(f"interrupted by {name} after {done} of {total} chunks: {where}")

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


def checksum(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of named arrays (names, dtypes, shapes and bytes, in name order)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _meta(key: str, index: int, rows: int, part: Mapping[str, np.ndarray]) -> dict:
    import rollax

    return dict(
        format=_FORMAT,
        key=key,
        version=rollax.__version__,
        fingerprint=code_fingerprint(),
        index=index,
        rows=rows,
        sha256=checksum(part),
    )


def save_chunk(path: Path, part: Mapping[str, np.ndarray], meta: Mapping) -> None:
    """Write ``part`` and ``meta`` to ``path`` atomically (a private temporary file, then
    :func:`os.replace`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(
        f".{path.stem}.{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(4)}.tmp"
    )
    try:
        with open(tmp, "wb") as f:
            # (pyright: a ** mapping might hold allow_pickle; these hold field names only)
            np.savez(f, **part, **{_META: np.array(json.dumps(meta, sort_keys=True))})  # pyright: ignore[reportArgumentType]
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        # name the chunk, not the private temporary file (a directory in the chunk's place, a
        # full disk, no permission)
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def load_chunk(path: Path, expect: Mapping) -> tuple[dict[str, np.ndarray] | None, str]:
    """The arrays of the chunk at ``path`` if it is intact and matches ``expect`` (its key,
    index, rows, version and code fingerprint); else ``(None, why)``."""
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as z:
            part = {k: z[k] for k in z.files}
    except FileNotFoundError:
        return None, "is missing"
    except Exception as err:  # noqa: BLE001 - any unreadable file is redone
        return None, f"cannot be read ({type(err).__name__}: {err})".replace("\n", " ")
    raw = part.pop(_META, None)
    try:
        meta = json.loads(str(raw[()])) if raw is not None else None
    except (ValueError, TypeError, IndexError):
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        return None, "has no valid rollax chunk record (written by another rollax version?)"
    for field in ("key", "index", "rows"):
        if meta.get(field) != expect[field]:
            return (
                None,
                f"belongs to another sweep ({field} = {meta.get(field)!r}, expected "
                f"{expect[field]!r})",
            )
    if (meta.get("version"), meta.get("fingerprint")) != (expect["version"], expect["fingerprint"]):
        return None, (
            f"is stale (computed by rollax {meta.get('version')} with code "
            f"fingerprint {meta.get('fingerprint')}, now {expect['version']} "
            f"{expect['fingerprint']})"
        )
    if checksum(part) != meta.get("sha256"):
        return None, "is corrupt (its checksum does not match its contents)"
    if any(np.shape(v)[:1] != (expect["rows"],) for v in part.values()):
        return None, "is corrupt (its arrays do not have one row per start)"
    return part, ""


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
    """Rows per chunk for ``n`` starts: ``chunk_size`` when the sweep needs several chunks;
    otherwise the smallest size class ``2^k * (1, 1.25, 1.5, 1.75)`` that holds the ``n``
    starts, at least 4096 and at most ``chunk_size``.

    Padding rows are not free (each costs the kernel's per-start set-up and records: the
    Fig. 11 no-slip panel, 86,400 starts, took 0.30 s in one chunk of 131,072 against 0.27 s
    unpadded; benchmarks/RESULTS.md), while every new width compiles the kernel again; above
    4096 starts the classes bound the padding to a quarter of ``n`` and the compiled widths to
    four per octave."""
    if n >= chunk_size:
        return chunk_size
    k = max(n - 1, 1).bit_length() - 3  # 2^(k+2) < n <= 2^(k+3): n needs 5, 6, 7 or 8 x 2^k
    width = next(m << k for m in (5, 6, 7, 8) if m << k >= n) if k > 0 else 8
    return min(chunk_size, max(4096, width))


def run_chunked(
    fn: Callable[[Any, np.ndarray, Callable[[int], None]], Mapping[str, Any]],
    starts: np.ndarray | Callable[[int, int], np.ndarray],
    *,
    chunk_size: int,
    n: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    key: str = "",
    keep_chunks: bool = False,
    row_bytes: int | None = None,
    progress: bool = True,
    desc: str = "sweep",
) -> dict[str, np.ndarray]:
    """Run ``fn(chunk, valid, report)`` over ``starts`` in chunks of ``chunk_size`` rows and
    concatenate.

    ``starts``: an ``(n, ...)`` array, or a function ``starts(lo, hi)`` returning rows
    ``lo:hi`` (then ``n`` is required; each chunk's starts are built only when it runs).
    ``fn`` receives a ``(width, ...)`` array, ``width = chunk_width(n, chunk_size)`` (the last
    chunk padded by repeating its first row; a NumPy array, or any array of the array API,
    such as a JAX array on a device, which is padded there), and the boolean mask of real rows, and returns a
    dict of arrays with leading axis ``width``; it may call ``report(k)`` with the number of
    the chunk's starts finished so far, which moves the progress bar within the chunk (and,
    after an interrupt, raises to stop the abandoned computation). With ``cache_dir``, chunk ``i`` is stored as
    ``cache_dir/chunks-<key>/<i>.npz`` as soon as it is done and reused on a rerun after it has
    been verified (module docstring); the folder is removed after a successful run unless
    ``keep_chunks``. ``row_bytes``: bytes of results per start, to refuse up front (one-line
    ``MemoryError``) a sweep whose results would not fit in memory.

    Raises :class:`SweepInterrupted` on SIGINT/SIGTERM (module docstring).
    """
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
        make = lambda lo, hi: arr[lo:hi]  # noqa: E731
    n = int(n)
    if n < 1:
        raise ValueError(f"n = {n!r} is not allowed: a sweep needs at least one start")
    if row_bytes is not None:
        check_fits(n, row_bytes)
    n_chunks = -(-n // chunk_size)
    width = chunk_width(n, chunk_size)
    folder = None
    created = False
    if cache_dir is not None:
        root = Path(cache_dir)
        if root.exists() and not root.is_dir():
            raise ValueError(
                f"cache_dir = {str(root)!r} is not allowed: it is a file; give a "
                f"directory (or a path that does not exist yet)"
            )
        created = not root.exists()
        folder = root / f"chunks-{key}"
        folder.mkdir(parents=True, exist_ok=True)
    expect = None
    out: dict[str, np.ndarray] | None = None
    done = 0

    def interrupted():
        return SweepInterrupted(flag["sig"], done, n_chunks, folder)

    after = {"solved": False}  # set by the worker when a chunk's solves are all done

    def compute(i, lo, hi, report):
        chunk = make(lo, hi)
        if not hasattr(chunk, "__array_namespace__"):
            chunk = np.asarray(chunk)
        # a device array (the sweep's grid built on a GPU) is padded where it is: the array
        # API's namespace, NumPy's or jax.numpy's
        xp = chunk.__array_namespace__()
        valid = np.ones(width, bool)
        if hi - lo < width:
            fill = xp.broadcast_to(chunk[:1], (width - (hi - lo),) + tuple(chunk.shape[1:]))
            chunk = xp.concat([chunk, fill])
            valid[hi - lo :] = False

        def capped(k):
            # the bar stops one short until the chunk is whole: what follows the solves (the
            # outcomes, a summary, compiled at the first chunk) is labelled, not shown as 100 %
            if int(k) >= hi - lo:
                after["solved"] = True
            report(min(int(k), hi - lo - 1))

        res = fn(chunk, valid, capped)
        return {k: np.ascontiguousarray(np.asarray(v)[: hi - lo]) for k, v in res.items()}

    bar = tqdm(
        total=n, unit="start", desc=desc, disable=not progress, smoothing=0.1, mininterval=0.5
    )
    started = False

    def shown(bar, k):
        nonlocal started
        if not started:
            started = True
            bar.set_postfix_str("", refresh=False)
        bar.update(k)
        if after["solved"]:
            after["solved"] = False
            bar.set_postfix_str("solved; outcomes and summaries of the chunk", refresh=True)

    with _signal_flag() as flag:
        try:
            for i in range(n_chunks):
                lo, hi = i * chunk_size, min(n, (i + 1) * chunk_size)
                path = folder / f"{i:05d}.npz" if folder is not None else None
                part = None
                if path is not None:
                    import rollax

                    expect = dict(
                        key=key,
                        index=i,
                        rows=hi - lo,
                        version=rollax.__version__,
                        fingerprint=code_fingerprint(),
                    )
                    if path.exists():
                        part, why = load_chunk(path, expect)
                        if part is None and why != "is missing":
                            warnings.warn(
                                f"chunk {path} {why}; recomputing it", ChunkWarning, stacklevel=3
                            )
                seen = 0
                if part is None:
                    if not started:  # the bar stands still while the kernel compiles: say so
                        bar.set_postfix_str("compiling or loading the kernel", refresh=True)
                    part, seen = _call_polling(
                        compute, (i, lo, hi), flag, interrupted, functools.partial(shown, bar)
                    )
                    if path is not None:
                        save_chunk(path, part, _meta(key, i, hi - lo, part))
                if out is None and n_chunks == 1:  # the part is the whole: no copy
                    out = dict(part)
                else:
                    if out is None:
                        out = {k: np.empty((n,) + v.shape[1:], v.dtype) for k, v in part.items()}
                    if set(part) != set(out):
                        raise RuntimeError(
                            f"chunk {i} has fields {sorted(part)}, chunk 0 has {sorted(out)}"
                        )
                    for k, v in part.items():
                        out[k][lo:hi] = v
                done += 1
                after["solved"] = False
                bar.set_postfix_str("", refresh=False)
                shown(bar, hi - lo - seen)
                if flag["sig"] is not None:
                    raise interrupted()
        finally:
            bar.close()
    if folder is not None and not keep_chunks:
        shutil.rmtree(folder, ignore_errors=True)
        if created:  # the cache directory too, if this run made it and it is empty now
            with contextlib.suppress(OSError):
                folder.parent.rmdir()
    assert out is not None  # n >= 1: at least one chunk
    return out
