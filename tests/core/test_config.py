"""rollax.configure: importing rollax only enables float64; devices and cache are opt-in."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import rollax

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "ROLLAX_CPU_DEVICES")}
    full["PYTHONPATH"] = SRC + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120
    )


def test_import_sets_float64_and_the_cache_only(tmp_path):
    code = (
        "import os, jax, rollax\n"
        "from jax._src import xla_bridge as xb\n"
        "print(os.environ.get('XLA_FLAGS'), jax.config.jax_enable_x64,\n"
        "      jax.config.jax_compilation_cache_dir, jax.config.jax_num_cpu_devices,\n"
        "      xb.backends_are_initialized(), jax.config.jax_compilation_cache_max_size)"
    )
    where = str(tmp_path / "c")
    r = _python(code, ROLLAX_CACHE_DIR=where)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["None", "True", where, "-1", "False", str(2 * 2**30)]
    r = _python(code, ROLLAX_CACHE_DIR="off")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["None", "True", "None", "-1", "False", "-1"]
    r = _python(code, ROLLAX_CACHE_DIR=where, ROLLAX_CACHE_MAX_SIZE="1e8")
    assert r.stdout.split()[-1] == "100000000", r.stderr
    # the user's own choice for JAX is left alone
    r = _python(code, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "mine"))
    assert r.stdout.split()[2] == str(tmp_path / "mine"), r.stderr


def test_solves_that_save_at_ts_are_kept_in_the_cache(tmp_path):
    """A program with a host callback is never written to JAX's persistent cache; diffrax's
    checks of ``SaveAt.ts`` made one in every solve with ``ts=`` (the robot's SQP compiled 37
    s in every process). A plain and a hybrid solve with ``ts=`` are written now, and a traced
    ``ts`` out of order gives NaN states and the status NONFINITE (it raised through the
    callback)."""
    code = (
        "import logging, jax, jax.numpy as jnp, rollax\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "jax.config.update('jax_explain_cache_misses', True)\n"
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)\n"
        "class Fall(rollax.AbstractSystem):\n"
        "    e: jax.Array = rollax.parameter(0.8)\n"
        "    state_names = ('z', 'v')\n"
        "    events = (rollax.crossing('floor', direction=-1),)\n"
        "    n_aux = 0\n"
        "    def vector_field(self, t, y, mode):\n"
        "        return jnp.stack([y[1], -9.81 + 0 * y[0]])\n"
        "    def event_values(self, t, y, mode):\n"
        "        return y[:1]\n"
        "    def reset(self, t, y, mode, aux, event):\n"
        "        return t, jnp.stack([0 * y[0], -self.e * y[1]]), mode, aux, False\n"
        "class Drop(rollax.AbstractSystem):\n"
        "    state_names = ('z', 'v')\n"
        "    def vector_field(self, t, y, mode):\n"
        "        return jnp.stack([y[1], -9.81 + 0 * y[0]])\n"
        "ts = jnp.linspace(0.1, 1.0, 5)\n"
        "a = rollax.solve(Drop(), jnp.array([1.0, 0.0]), 0.0, 1.0, ts=ts)\n"
        "b = rollax.solve(Fall(), jnp.array([1.0, 0.0]), 0.0, 1.0, ts=ts, max_resets=5)\n"
        "bad = jax.jit(lambda s: rollax.solve(Drop(), jnp.array([1.0, 0.0]), 0.0, 1.0, ts=s))"
        "(ts[::-1])\n"
        "print('STATES', float(a.ys[-1, 0]), float(b.ys[0, 0]), bool(jnp.isnan(bad.ys).all()),"
        " bad.status_name)\n"
    )
    r = _python(code, ROLLAX_CACHE_DIR=str(tmp_path / "c"))
    assert r.returncode == 0, r.stderr
    assert "uses host callbacks" not in r.stderr, r.stderr
    written = [s for s in r.stderr.splitlines() if "Writing jit__solve" in s]
    assert len(written) >= 2, r.stderr  # the plain route's and the hybrid one's
    z_plain, z_hybrid, nan, status = r.stdout.split("STATES")[1].split()
    assert float(z_plain) == pytest.approx(1.0 - 9.81 / 2, abs=1e-9)  # z(1) = 1 - g/2
    assert float(z_hybrid) == pytest.approx(1.0 - 9.81 * 0.01 / 2, abs=1e-9)  # z(0.1)
    assert nan == "True" and status == "NONFINITE"  # a traced ts out of order: said so


def test_a_second_process_loads_the_first_ones_programs(tmp_path):
    """Asserted from JAX's cache events (hits and misses), not from timings."""
    code = (
        "import jax, rollax, jax.numpy as jnp\n"
        "seen = []\n"
        "jax.monitoring.register_event_listener(lambda e, **k: seen.append(e))\n"
        "def f(x):\n"
        "    for i in range(1500):\n"
        "        x = jnp.sin(x) * (1 + i * 1e-4) + jnp.cos(x * i)\n"
        "    return x\n"
        "jax.jit(f)(1.0).block_until_ready()\n"
        "print(seen.count('/jax/compilation_cache/cache_hits'),"
        " seen.count('/jax/compilation_cache/cache_misses'))"
    )
    env = dict(ROLLAX_CACHE_DIR=str(tmp_path / "c"))
    first, second = _python(code, **env), _python(code, **env)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    hits1, misses1 = map(int, first.stdout.split())
    hits2, misses2 = map(int, second.stdout.split())
    assert hits1 == 0 and misses1 >= 1
    assert hits2 >= 1 and misses2 == 0
    assert list((tmp_path / "c").glob("jit_f-*"))


def test_a_process_with_another_cpu_device_count_loads_the_programs(tmp_path):
    """A one-device program compiled where the CPU is split into 2 devices (a client after
    rollax.configure()) serves a one-device process (a Dask worker), and the other way round:
    the CPU device count is not part of the cache key (it was, through JAX's topology hash)."""
    code = (
        "import rollax, jax, jax.numpy as jnp\n"
        "rollax.configure()\n"
        "import rollax._core._system\n"
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)\n"
        "from rollax._drivers._chunks import compile_counts\n"
        "base = compile_counts()\n"
        "f = jax.jit(lambda x: jnp.sin(x) * 3.0 + jnp.cos(x))\n"
        "r = f(jnp.linspace(0, 1, 7)).block_until_ready()\n"
        "n = compile_counts()\n"
        "print(jax.local_device_count(), n['compiles'] - base['compiles'],"
        " n['cache_hits'] - base['cache_hits'], float(r.sum()))"
    )
    env = dict(ROLLAX_CACHE_DIR=str(tmp_path / "c"))
    runs = [_python(code, ROLLAX_CPU_DEVICES=k, **env) for k in ("2", "1", "3")]
    for r in runs:
        assert r.returncode == 0, r.stderr
    out = [r.stdout.split() for r in runs]
    assert [o[0] for o in out] == ["2", "1", "3"]
    assert int(out[0][1]) >= 1 and int(out[0][2]) == 0  # compiled
    for o in out[1:]:
        assert int(o[1]) == 0 and int(o[2]) >= 1, out  # loaded, not compiled
        assert o[3] == out[0][3]  # the same result


def test_a_bad_cache_size_is_one_clear_line(tmp_path):
    r = _python(
        "import rollax; rollax.configure(cache_dir='off')",
        ROLLAX_CACHE_MAX_SIZE="lots",
    )
    # on import: a warning, the cache unbounded; configure: the one-line error
    assert "ROLLAX_CACHE_MAX_SIZE = 'lots' is not allowed" in r.stderr
    r = _python("import rollax; rollax.configure()", ROLLAX_CACHE_MAX_SIZE="0")
    assert r.returncode != 0
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "ROLLAX_CACHE_MAX_SIZE = '0' is not allowed: it must be a size in bytes >= 1, "
            "or -1 (no bound)"
        )
    )


def test_importing_every_module_starts_no_backend():
    """A module-level jnp constant would start JAX, after which configure() cannot split the CPU."""
    r = _python(
        "import importlib, pkgutil, rollax\n"
        "from jax._src import xla_bridge as xb\n"
        "for m in pkgutil.walk_packages(rollax.__path__, 'rollax.'):\n"
        "    importlib.import_module(m.name)\n"
        "    assert not xb.backends_are_initialized(), m.name\n"
        "rollax.configure(cpu_devices=2, cache_dir='off')\n"
        "import jax; print(len(jax.devices('cpu')))"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2"]


def test_configure_splits_cpu_and_sets_cache(tmp_path):
    r = _python(
        "import jax, rollax\n"
        f"rollax.configure(cpu_devices=3, cache_dir={str(tmp_path / 'c')!r})\n"
        "print(len(jax.devices('cpu')), jax.config.jax_compilation_cache_dir)"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", str(tmp_path / "c")]


def test_configure_too_late_is_one_clear_line():
    have = len(jax.devices("cpu"))
    rollax.configure(cpu_devices=have, cache_dir="off")  # same count: harmless
    with pytest.raises(RuntimeError, match="already initialised its backends") as err:
        rollax.configure(cpu_devices=have + 1, cache_dir="off")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(cpu_devices=0), "cpu_devices = 0"),
        (dict(cpu_devices=2.5), "cpu_devices = 2.5"),
        (dict(cpu_devices=True), "cpu_devices = True"),
        (dict(cache_dir=5), "cache_dir = 5"),
        (dict(cache_dir=__file__), "cache_dir = "),
    ],
)
def test_configure_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match) as err:
        rollax.configure(**kw)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "env, match",
    [
        ({"ROLLAX_CPU_DEVICES": "abc"}, "ROLLAX_CPU_DEVICES = 'abc'"),
        ({"ROLLAX_CPU_DEVICES": "0"}, "ROLLAX_CPU_DEVICES = '0'"),
        ({"ROLLAX_CACHE_DIR": __file__}, "ROLLAX_CACHE_DIR = "),
    ],
)
def test_cli_bad_environment_is_one_line_error(env, match):
    r = _python(
        "import sys; from rollax.cli import main; sys.exit(main(['steady', '--summary']))", **env
    )
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rollax: error: ") and match in lines[0], (
        r.stderr
    )


def test_entries_without_an_access_time_do_not_break_a_bounded_cache(tmp_path):
    """JAX's eviction reads an access time for every entry: one written without (no bound, an
    older rollax) made every later write fail. They are given one; "no bound" keeps them."""
    from rollax._core import _setup

    (tmp_path / "jit_f-abc-cache").write_bytes(b"x" * 10)
    (tmp_path / "jit_g-def-cache").write_bytes(b"y")
    (tmp_path / "jit_g-def-atime").write_bytes((5).to_bytes(8, "little"))
    _setup.repair(str(tmp_path))
    assert (tmp_path / "jit_f-abc-atime").read_bytes() != b""
    assert (tmp_path / "jit_g-def-atime").read_bytes() == (5).to_bytes(8, "little")
    r = _python(
        "import jax, rollax; print(jax.config.jax_compilation_cache_max_size)",
        ROLLAX_CACHE_DIR=str(tmp_path),
        ROLLAX_CACHE_MAX_SIZE="-1",
    )
    assert r.stdout.split() == [str(2**62)], r.stderr
