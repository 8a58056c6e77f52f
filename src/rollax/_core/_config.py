"""Process-wide JAX set-up: CPU devices and the persistent compile cache.

Importing rollax enables float64 and the compile cache (:mod:`rollax._core._setup`). Splitting
the CPU into devices, or moving or disabling the cache in a running process, is done by
:func:`configure`, which the ``rollax`` command calls first thing, and which a script or a test
session calls itself when it wants the same set-up.
"""

from __future__ import annotations

import functools
import os
import warnings

from rollax._core import _setup
from rollax._core._setup import DEFAULT_CACHE as _DEFAULT_CACHE
from rollax._core._setup import MIN_COMPILE_SECS, OFF as _OFF, _max_size

_XLA_FLAG = "--xla_force_host_platform_device_count"


def _device_count(cpu_devices, source: str) -> int:
    """``cpu_devices`` (an int, or the text of ``ROLLAX_CPU_DEVICES``) as an int >= 1."""
    value = cpu_devices
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            value = None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{source} = {cpu_devices!r} is not allowed: it must be an integer >= 1 "
            "(the number of JAX CPU devices; 1: no split)"
        )
    return value


def _split_cpu(n: int, explicit: bool, source: str) -> None:
    import jax

    if not explicit and _XLA_FLAG in os.environ.get("XLA_FLAGS", ""):
        return  # the user's own XLA_FLAGS choice wins over the default
    try:
        jax.config.update("jax_num_cpu_devices", n)
        return
    except RuntimeError:
        pass  # JAX has already initialised its backends
    have = len(jax.devices("cpu"))
    if have == n:
        return
    msg = (
        f"rollax.configure: cannot split the CPU into {source} = {n} devices: JAX has already "
        f"initialised its backends with {have}; call rollax.configure() before any JAX computation"
    )
    if explicit:
        raise RuntimeError(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _cache_path(cache_dir, source: str) -> str | None:
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise ValueError(
            f"{source} = {cache_dir!r} is not allowed: it must be a directory path, or 'off' "
            "to disable the compile cache"
        )
    text = os.fspath(cache_dir)
    if text.strip().lower() in _OFF:
        return None
    if os.path.exists(text) and not os.path.isdir(text):
        raise ValueError(
            f"{source} = {text!r} is not allowed: it exists and is not a directory "
            "(give a directory path, or 'off' to disable the compile cache)"
        )
    return text


def configure(cpu_devices: int | None = None, cache_dir: str | os.PathLike | None = None) -> None:
    """Set up JAX for rollax sweeps: one CPU device per core and an on-disk compile cache.

    * ``cpu_devices``: the number of XLA devices the host CPU is split into, so that sweeps run
      one work queue per device (default: ``ROLLAX_CPU_DEVICES``, else one per core). This is
      only possible before JAX initialises its backends (before the first JAX computation): if
      it is too late and the count differs, an explicit ``cpu_devices`` raises ``RuntimeError``
      and the default only warns. With the default, an existing
      ``--xla_force_host_platform_device_count`` in ``XLA_FLAGS`` is left alone.
    * ``cache_dir``: JAX's persistent compilation cache, on since ``import rollax`` (default:
      ``ROLLAX_CACHE_DIR``, else ``~/.cache/rollax/jax``, bounded by ``ROLLAX_CACHE_MAX_SIZE``
      bytes, default 2 GiB); ``"off"`` disables it, also after a first compile. A default
      directory that cannot be created is skipped silently; an explicit one raises
      ``ValueError``.

    Bad values (arguments or environment variables) raise a one-line ``ValueError`` naming the
    parameter, its value and what is allowed. Calling it again with the same values is harmless.
    """
    import jax

    if cpu_devices is None:
        env = os.environ.get("ROLLAX_CPU_DEVICES")
        if env is None or env.strip() == "":
            n, explicit, source = os.cpu_count() or 1, False, "cpu_devices"
        else:
            n, explicit, source = (
                _device_count(env, "ROLLAX_CPU_DEVICES"),
                False,
                "ROLLAX_CPU_DEVICES",
            )
    else:
        n, explicit, source = _device_count(cpu_devices, "cpu_devices"), True, "cpu_devices"

    if cache_dir is None:
        env = os.environ.get("ROLLAX_CACHE_DIR")
        if env is None:
            path, explicit_cache, cache_source = _DEFAULT_CACHE, False, "default"
        else:
            path, explicit_cache = _cache_path(env, "ROLLAX_CACHE_DIR"), True
            cache_source = "ROLLAX_CACHE_DIR"
    else:
        path, explicit_cache = _cache_path(cache_dir, "cache_dir"), True
        cache_source = "cache_dir"

    _split_cpu(n, explicit, source)

    if path is None:
        _set_cache(jax, None, 0)
        return
    if (
        cache_source == "default"
        and os.environ.get("JAX_COMPILATION_CACHE_DIR")
        and not _setup.SET_BY_ROLLAX
    ):
        return  # the user's own choice, made for JAX
    max_size = _max_size()  # a bad ROLLAX_CACHE_MAX_SIZE: one-line ValueError
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        if explicit_cache:
            raise ValueError(
                f"{cache_source} = {path!r} is not allowed: the directory cannot be created "
                f"({err.strerror}); give a writable directory, or 'off'"
            ) from None
        return  # a read-only home must not break the command
    if max_size != -1:
        _setup.repair(path)
    _set_cache(jax, path, max_size)


def _set_cache(jax, path: str | None, max_size: int) -> None:
    """Point JAX's persistent cache at ``path`` (``None``: off). JAX decides once per process,
    at its first compile, whether it uses the cache: a change after that resets its choice."""
    before = (jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir)
    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
    else:
        jax.config.update("jax_enable_compilation_cache", True)
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_compilation_cache_max_size", max_size)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
    if before != (jax.config.jax_enable_compilation_cache, jax.config.jax_compilation_cache_dir):
        try:
            from jax._src import compilation_cache

            compilation_cache.reset_cache()
        except (ImportError, AttributeError):  # a JAX without it: the first choice stays
            pass


def share_cpu_cache_keys() -> None:
    """Make JAX's persistent-cache key of a CPU program independent of how many CPU devices
    the process has (``rollax.configure()`` splits the CPU into one device per core; a Dask
    worker has one device).

    JAX leaves ``--xla_force_host_platform_device_count`` out of its key, but hashes the CPU
    *topology*, whose fingerprint counts every CPU device of the process: a one-device program
    compiled in a 2-device process missed the cache in a 1-device process (all 33 programs of
    a small basin sweep; measured 2026-11-30), so a client never warmed its workers' cache.
    The topology is replaced, for CPU programs only, by what the program runs on: the
    device kind and count of the program's own devices, and the host CPU's model and
    instruction-set flags (an executable compiled for other CPU features must not be loaded).
    It applies to every CPU program of the process, rollax's or not. A JAX without that private
    function is left alone; ``ROLLAX_SHARE_CPU_CACHE_KEYS=0`` leaves JAX's key as it is."""
    if os.environ.get("ROLLAX_SHARE_CPU_CACHE_KEYS", "1").strip().lower() in ("0", "off", "no"):
        return
    try:
        from jax._src import cache_key
    except ImportError:  # pragma: no cover - another JAX: its own key
        return
    orig = getattr(cache_key, "_hash_accelerator_config", None)
    if orig is None or getattr(orig, "_rollax", False):
        return

    def hashed(hash_obj, accelerators):
        import numpy as np

        devs = list(np.asarray(accelerators).flat)
        if not devs or any(getattr(d, "platform", None) != "cpu" for d in devs):
            return orig(hash_obj, accelerators)
        hash_obj.update(f"rollax-cpu {len(devs)} {devs[0].device_kind}\n".encode())
        hash_obj.update(_cpu_identity().encode())

    hashed._rollax = True  # pyright: ignore[reportFunctionMemberAccess]
    cache_key._hash_accelerator_config = hashed


@functools.lru_cache(maxsize=1)
def _cpu_identity() -> str:
    """The host CPU's architecture, model and feature flags (``/proc/cpuinfo``'s first
    processor; the machine and processor names elsewhere)."""
    import platform

    text = f"{platform.machine()} {platform.processor()}"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the end of the first processor's entry
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features", "CPU part"):
                    text += "\n" + line.strip()
    except OSError:
        pass
    return text
