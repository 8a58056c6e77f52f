"""Process-wide JAX set-up done once on import: float64 and one CPU device per core.

rollax computes in float64 everywhere. Sweeps run one work queue per JAX device, so on a
CPU-only machine the host is split into one XLA device per core (this only takes effect if
it happens before JAX initialises its backends; set ``ROLLAX_CPU_DEVICES=1`` to opt out,
or ``ROLLAX_CPU_DEVICES=N`` to choose N).
"""

from __future__ import annotations

import os


def _split_host_devices() -> None:
    flag = "--xla_force_host_platform_device_count"
    flags = os.environ.get("XLA_FLAGS", "")
    if flag in flags:
        return
    want = os.environ.get("ROLLAX_CPU_DEVICES")
    n = int(want) if want else (os.cpu_count() or 1)
    if n > 1:
        os.environ["XLA_FLAGS"] = f"{flags} {flag}={n}".strip()


def _compilation_cache() -> None:
    import jax

    path = os.environ.get(
        "ROLLAX_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "rollax", "jax")
    )
    if path.lower() in ("", "0", "off", "none"):
        return
    try:
        os.makedirs(path, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except Exception:  # pragma: no cover - a read-only home must not break import
        pass


_split_host_devices()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
_compilation_cache()
