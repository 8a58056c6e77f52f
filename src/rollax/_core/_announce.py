"""No silent waits: a compile that takes longer than :data:`AFTER` seconds is announced once, and
said again every :data:`EVERY` seconds while it lasts.

JAX gives no signal when it *starts* to trace or compile a program, only when it has finished,
so rollax watches instead: a daemon thread (started by the first solve, ensemble or sweep)
looks at the other threads' Python stacks every :data:`PERIOD` seconds. A thread whose stack
has stood in JAX's tracing, lowering or XLA compilation for :data:`AFTER` seconds gets one line
on the ``rollax`` logger::

    rollax: compiling rollax.solve for WallPendulum: the first call with these shapes and
    options; later calls reuse it (compile cache: ~/.cache/rollax/jax)

while it lasts, every :data:`EVERY` seconds, ``rollax: still compiling rollax.solve for
WallPendulum (20 s so far)``, and, when it is done, ``rollax: compiled rollax.solve for
WallPendulum in 12.4 s``. What is
compiled is named after the outermost public rollax function on the stack (and the type of its
``system``); a compile with no rollax frame on the stack (the reverse pass of a ``jax.grad``
through a solve, compiled after the solve has returned) is named after the user's line.
Sampling works because XLA releases the GIL while it compiles (measured: a 5.6 s compile
sampled every 0.5 s throughout). Reading the stacks costs a few microseconds a sample.

The lines go to Python's ``logging`` (logger ``"rollax"``, level INFO). When the program has
configured no logging (no handler on the root logger), rollax prints them itself to stderr,
through ``tqdm.write`` so that a progress bar is not torn. ``logging.getLogger("rollax")
.setLevel(logging.WARNING)`` silences them; ``ROLLAX_ANNOUNCE=off`` stops the watcher.

XLA's own multi-line "Very slow compile?" banner (printed by its C++ logging after minutes)
cannot be silenced on its own: only ``TF_CPP_MIN_LOG_LEVEL=3``, which hides every XLA error
too, removes it; rollax's line comes first (after 1.5 s).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import sysconfig
import threading
import time
import types

LOG = logging.getLogger("rollax")
#: Seconds a thread must stand in a compile before it is announced: the issue's "about 2 s",
#: less the call's own set-up before its first compile (about a second on a loaded machine).
AFTER = 1.5
#: Seconds between two looks at the stacks.
PERIOD = 0.25
#: Seconds outside a compile that end it (one call's programs are compiled one after another)
QUIET = 1.5
#: Seconds between the "still compiling" lines of a long compile (a first gradient through
#: impacts, or an identification's programs one after another, compile for 20-60 s)
EVERY = 10.0

_SEP = os.sep
_JAX = f"{_SEP}jax{_SEP}_src{_SEP}"
_ROLLAX = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + _SEP
#: (file under jax/_src, function) pairs that mean "tracing, lowering or compiling".
_COMPILING_FILES = (
    "compiler.py",
    f"interpreters{_SEP}mlir.py",
    f"interpreters{_SEP}partial_eval.py",
)
_COMPILING_FUNCS = {
    ("pxla.py", "lower_sharding_computation"),
    ("pxla.py", "_cached_lowering_to_hlo"),
    ("pjit.py", "_create_pjit_jaxpr"),
    ("pjit.py", "_pjit_lower"),
}
#: Libraries whose frames are not "the user's line": JAX's stack and what it calls while
#: tracing (numpy's ``np.ndim`` was once named as the caller), and Python's own library.
_LIBRARIES = tuple(
    f"{_SEP}{name}{_SEP}"
    for name in (
        "jax",
        "jaxlib",
        "equinox",
        "diffrax",
        "lineax",
        "optimistix",
        "optax",
        "numpy",
        "scipy",
        "ml_dtypes",
        "opt_einsum",
        "jaxtyping",
        "typeguard",
    )
) + (_ROLLAX,)
_STDLIB = sysconfig.get_paths()["stdlib"] + _SEP


def _library(path: str) -> bool:
    if any(lib in path for lib in _LIBRARIES):
        return True
    return path.startswith(_STDLIB) and "-packages" + _SEP not in path


#: Names of rollax's warm-up threads (rollax._drivers._sweep, rollax._integrate.queue)
WARM_UPS = ("rollax-outcomes", "rollax-records")
#: Seconds the exit waits for a warm-up compile still running
WARM_UP_EXIT_WAIT = 20.0

_lock = threading.Lock()
_thread: threading.Thread | None = None
_stop = threading.Event()
_guarded = False


class _Stderr(logging.Handler):
    """Prints rollax's lines when the program configured no logging of its own."""

    def emit(self, record):
        if logging.getLogger().handlers:
            return  # the record propagates to the program's own handlers
        try:
            from tqdm import tqdm

            tqdm.write(f"rollax: {record.getMessage()}", file=sys.stderr)
        except Exception:  # never let a message break a computation
            pass


if not any(isinstance(h, _Stderr) for h in LOG.handlers):
    LOG.addHandler(_Stderr())
if LOG.level == logging.NOTSET:
    LOG.setLevel(logging.INFO)


def _compiling(frame) -> bool:
    while frame is not None:
        name = frame.f_code.co_filename
        i = name.find(_JAX)
        if i >= 0:
            rel = name[i + len(_JAX) :]
            if rel in _COMPILING_FILES or (rel, frame.f_code.co_name) in _COMPILING_FUNCS:
                return True
        frame = frame.f_back
    return False


def _public(module: str, func: str) -> str | None:
    parts = module.split(".")
    if any(p.startswith("_") for p in parts[1:]):
        import rollax

        return f"rollax.{func}" if func in getattr(rollax, "__all__", ()) else None
    return None if func.startswith("_") else f"{module}.{func}"


def _caller(stack: list[types.FrameType]) -> types.FrameType | None:
    """The user's frame that called into JAX: the last non-library frame outside the outermost
    JAX frame. Frames inside it (a traced function, or a gc callback that ran during the compile,
    as hypothesis' timer once did in CI) are not the caller."""
    user = None
    for f in reversed(stack):  # outermost first
        path = f.f_code.co_filename
        if _JAX in path:
            break
        if not _library(path):
            user = f
    if user is None:
        user = next((f for f in stack if not _library(f.f_code.co_filename)), None)
    return user


def _label(frame) -> str:
    """What the stack is compiling: the outermost public rollax function, with its system."""
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    best = None
    for f in reversed(stack):  # outermost first
        path = f.f_code.co_filename
        if not path.startswith(_ROLLAX) or path.endswith("_announce.py"):
            continue
        rel = os.path.relpath(path, os.path.dirname(_ROLLAX.rstrip(_SEP)))[: -len(".py")]
        module = rel.replace(_SEP, ".").removesuffix(".__init__")
        name = _public(module, f.f_code.co_name)
        if name is not None:
            best = (name, f)
            break
    if best is None:
        user = _caller(stack)
        where = (
            ""
            if user is None
            else f" (called at {os.path.basename(user.f_code.co_filename)}:{user.f_lineno})"
        )
        return f"a JAX program{where}"
    name, f = best
    try:
        system = f.f_locals.get("system")
    except Exception:
        system = None
    return name if system is None else f"{name} for {type(system).__name__}"


def _cache_note() -> str:
    jax = sys.modules.get("jax")
    try:
        on = jax is not None and jax.config.jax_enable_compilation_cache
        where = jax.config.jax_compilation_cache_dir if on else None  # pyright: ignore
    except Exception:
        where = None
    if not where:
        return "the compile cache is off, so a new process compiles it again"
    return f"compile cache: {where.replace(os.path.expanduser('~'), '~', 1)}"


def _watch() -> None:
    me = threading.get_ident()
    since: dict[int, float] = {}
    said: dict[int, tuple[str, float]] = {}
    seen_at: dict[int, float] = {}  # the last look that found the thread compiling
    told: dict[int, float] = {}  # when a thread's compile was last said
    while not _stop.wait(PERIOD):
        now = time.monotonic()
        try:
            frames = sys._current_frames()
            # rollax's own warm-ups (a program compiled beside a running kernel, whose bar
            # is shown) are not announced
            quiet_threads = {t.ident for t in threading.enumerate() if t.name in WARM_UPS}
            for ident in list(since) + list(said):
                if ident not in frames:
                    since.pop(ident, None)
                    said.pop(ident, None)
                    told.pop(ident, None)
            for ident, frame in frames.items():
                if ident == me or ident in quiet_threads:
                    continue
                if _compiling(frame):
                    seen_at[ident] = now
                    start = since.setdefault(ident, now)
                    if ident not in said and now - start >= AFTER:
                        label = _label(frame)
                        said[ident] = (label, start)
                        told[ident] = now
                        LOG.info(
                            f"compiling {label}: the first call with these shapes and "
                            f"options; later calls reuse it ({_cache_note()})"
                        )
                    elif ident in said and now - told.get(ident, now) >= EVERY:
                        told[ident] = now
                        LOG.info(f"still compiling {said[ident][0]} ({now - start:.0f} s so far)")
                elif ident in since:
                    # the gaps between the programs of one call (Python work between them,
                    # under load up to about a second) do not end it
                    last = seen_at.get(ident, now)
                    if now - last < QUIET:
                        continue
                    since.pop(ident)
                    seen_at.pop(ident, None)
                    if ident in said:
                        label, start = said.pop(ident)
                        told.pop(ident, None)
                        LOG.info(f"compiled {label} in {last - start:.1f} s")
            del frames
        except Exception:  # a sample that failed: the next one will do
            pass


def start() -> None:
    """Start the watcher (once per process; idempotent and cheap)."""
    global _thread, _guarded
    if not _guarded:  # (registered after JAX's own exit handler, so it runs before it)
        _guarded = True
        atexit.register(_shut)
    if _thread is not None or os.environ.get("ROLLAX_ANNOUNCE", "").strip().lower() in (
        "off",
        "0",
        "no",
        "false",
    ):
        return
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_watch, name="rollax-announce", daemon=True)
            _thread.start()


def _shut() -> None:
    # A daemon thread still running when the interpreter finalises is ended by a forced unwind;
    # through JAX's C++ frames that aborted the process ("terminate called after throwing an
    # instance of ''", exit code 134) in about 1 of 3 runs that had compiled something
    # (measured on a plain script). Stopping it first, at exit, keeps the exit code.
    _stop.set()
    if _thread is not None:
        _thread.join(timeout=2 * PERIOD + 1.0)
    # the same for a warm-up compile still running (a run interrupted beside it): waited for,
    # up to a bound, rather than torn down inside XLA
    for t in threading.enumerate():
        if t.name in WARM_UPS and t.is_alive():
            t.join(timeout=WARM_UP_EXIT_WAIT)


def restart_clock(bar) -> None:
    """The rate and the time left from finished work only: the compile (or the loading of the
    kernel) before the first report is not work. Right after a compile, tqdm's own estimate
    read 18:49 for a one-second sweep (issue 56); now it shows "?" until the second report."""
    if getattr(bar, "disable", False) or not hasattr(bar, "n"):
        return  # (a disabled tqdm has no clock; nor has a stand-in)
    now = getattr(bar, "_time", time.time)()
    bar.start_t = now
    bar.last_print_t = now
    bar.last_print_n = bar.n
    for name in ("_ema_dn", "_ema_dt"):
        ema = getattr(bar, name, None)
        if ema is not None:
            setattr(bar, name, type(ema)(bar.smoothing))
