"""The process-wide JAX settings made on import: float64 and the persistent compile cache.

rollax computes in float64 everywhere, so importing it enables ``jax_enable_x64``.

Importing it also turns on JAX's persistent compilation cache, so that a second process (a
script run again, a notebook restarted, a Dask worker) loads the programs an earlier one
compiled instead of compiling them again (a first sweep: 31.2 s, then 5.0 s in the next
process). Where, how large, and how to turn it off (:func:`cache_settings`):

* ``ROLLAX_CACHE_DIR``: the directory (default ``~/.cache/rollax/jax``); ``off`` disables it
  (so does ``rollax.configure(cache_dir="off")``). A ``JAX_COMPILATION_CACHE_DIR`` the user set
  already, or a cache directory set on an imported JAX, is left alone.
* ``ROLLAX_CACHE_MAX_SIZE``: its size bound in bytes (default 2 GiB; ``-1``: no bound). The
  least recently used programs are removed beyond it. The bound, and the file lock that makes
  several processes (and Dask workers) share one directory safely, need the ``filelock``
  package (a dependency of rollax); without it the cache is unbounded.
* Only programs that took at least 0.5 s to compile are kept (JAX's default is 1 s).

JAX itself is not imported here (it takes about 0.4 s of CPU, which ``rollax --help`` must not
pay): if it is loaded already, the settings are made on its config; if not, they are put in the
environment (``JAX_ENABLE_X64=1``, ``JAX_COMPILATION_CACHE_DIR`` ...), which JAX reads when it
is first imported, by rollax's own modules or by the user's code (a child process inherits
them too). The CPU device split stays opt-in: :func:`rollax.configure`.
"""

from __future__ import annotations

import importlib.util
import os
import sys

OFF = ("", "0", "off", "none", "false", "no")
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "rollax", "jax")
#: The cache's default size bound (bytes): the built-in systems' kernels are 0.5-20 MB each.
DEFAULT_CACHE_MAX_SIZE = 2 * 2**30
#: Programs that compile faster than this are not written to the cache (JAX's default: 1 s).
MIN_COMPILE_SECS = 0.5
#: Whether the cache settings in the environment are rollax's own (made on import), not the user's
SET_BY_ROLLAX = False
# names the directory rollax put in JAX_COMPILATION_CACHE_DIR, so that a child process (which
# inherits the environment) tells rollax's setting from its user's
_MARK = "ROLLAX_SET_JAX_CACHE_DIR"


def enable_float64() -> None:
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "config"):
        jax.config.update("jax_enable_x64", True)
    else:
        os.environ["JAX_ENABLE_X64"] = "1"


def _max_size() -> int:
    """``ROLLAX_CACHE_MAX_SIZE`` (bytes, or -1), else the default; -1 without ``filelock``."""
    text = os.environ.get("ROLLAX_CACHE_MAX_SIZE", "").strip()
    if text:
        try:
            value = int(float(text))
        except ValueError:
            value = None
        if value is None or (value < 1 and value != -1):
            raise ValueError(
                f"ROLLAX_CACHE_MAX_SIZE = {text!r} is not allowed: it must be a size in bytes "
                ">= 1, or -1 (no bound)"
            )
    else:
        value = DEFAULT_CACHE_MAX_SIZE
    if importlib.util.find_spec("filelock") is None:
        return -1  # JAX refuses a bound without its file lock
    # "no bound" as a bound no disk reaches: JAX then still keeps the access times and takes the
    # lock, so that this process's entries do not break a bounded one's eviction (below)
    return 2**62 if value == -1 else value


def repair(path: str) -> None:
    """Give every entry of the cache in ``path`` an access-time file. JAX's eviction reads one
    for every entry and fails on an entry without one (written by a process with no bound, or by
    an older rollax): then every later write of a bounded process failed ("Error writing
    persistent compilation cache entry ... -atime", seen here)."""
    try:
        names = set(os.listdir(path))
    except OSError:
        return
    for name in names:
        if name.endswith("-cache") and name[: -len("-cache")] + "-atime" not in names:
            try:
                stamp = os.stat(os.path.join(path, name)).st_mtime_ns
                with open(os.path.join(path, name[: -len("-cache")] + "-atime"), "xb") as fh:
                    fh.write(stamp.to_bytes(8, "little"))
            except OSError:  # another process did it, or the entry went
                pass


def cache_settings() -> dict | None:
    """The compile cache rollax asks of JAX, from the environment: ``None`` when it is off
    (``ROLLAX_CACHE_DIR=off``), else ``{"dir", "max_size", "min_compile_secs"}``."""
    env = os.environ.get("ROLLAX_CACHE_DIR")
    if env is not None and env.strip().lower() in OFF:
        return None
    return dict(
        dir=DEFAULT_CACHE if env is None else env,
        max_size=_max_size(),
        min_compile_secs=MIN_COMPILE_SECS,
    )


def enable_cache() -> None:
    """Turn on the persistent compile cache (module docstring), unless it is off or the user
    chose a directory for JAX already. A directory that cannot be made is skipped silently:
    a read-only home must not break ``import rollax``."""
    try:
        settings = cache_settings()
    except ValueError as err:  # a bad ROLLAX_CACHE_MAX_SIZE: configure() raises it
        import warnings

        warnings.warn(f"{err}; the compile cache is unbounded", RuntimeWarning, stacklevel=3)
        saved = os.environ.pop("ROLLAX_CACHE_MAX_SIZE")
        try:
            settings = cache_settings()
        finally:
            os.environ["ROLLAX_CACHE_MAX_SIZE"] = saved
        if settings is not None:
            settings["max_size"] = -1
    jax = sys.modules.get("jax")
    loaded = jax is not None and hasattr(jax, "config")
    names = (
        "jax_compilation_cache_dir",
        "jax_compilation_cache_max_size",
        "jax_persistent_cache_min_compile_time_secs",
    )
    # rollax's own settings inherited from a parent process are not the user's choice
    mark = os.environ.pop(_MARK, None)
    if mark is not None and mark == os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        for name in names:
            os.environ.pop(name.upper(), None)
    in_jax = jax.config.jax_compilation_cache_dir if loaded else None  # pyright: ignore
    if in_jax is not None and in_jax == mark:
        in_jax = None  # (a JAX imported first read rollax's inherited setting)
        if settings is None:
            jax.config.update("jax_compilation_cache_dir", None)  # pyright: ignore
            jax.config.update("jax_compilation_cache_max_size", -1)  # pyright: ignore
    if settings is None:
        return
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or in_jax:
        return  # the user's own choice
    try:
        os.makedirs(settings["dir"], exist_ok=True)
    except OSError:
        return
    if settings["max_size"] != -1:
        repair(settings["dir"])
    global SET_BY_ROLLAX
    SET_BY_ROLLAX = True
    values = (settings["dir"], settings["max_size"], settings["min_compile_secs"])
    for name, value in zip(names, values):
        if loaded:
            jax.config.update(name, value)  # pyright: ignore[reportOptionalMemberAccess]
        else:
            os.environ[name.upper()] = str(value)
    if not loaded:
        os.environ[_MARK] = settings["dir"]


enable_float64()
enable_cache()
