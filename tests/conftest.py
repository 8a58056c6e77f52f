import os

os.environ.setdefault("ROLLAX_CPU_DEVICES", "2")
# no compile announcements in the suite's own processes and the CLI runs it starts (their tests
# count stderr's lines): the announcements have their own tests (tests/core/test_announce.py,
# which starts the watcher itself, and tests/test_first_answer.py's fresh processes)
os.environ.setdefault("ROLLAX_ANNOUNCE", "off")
import rollax  # noqa: E402  (float64)

# Importing rollax no longer splits the CPU: the tests ask for it (2 devices, or
# ROLLAX_CPU_DEVICES) before any test runs JAX, as the rollax command does.
rollax.configure()


import ctypes  # noqa: E402
import gc  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

try:
    _LIBC = ctypes.CDLL("libc.so.6")
except OSError:  # not glibc
    _LIBC = None

# A worker keeps every executable it compiled: over the suite its resident memory grew to
# 7.6 GB (measured with /usr/bin/time -v, 2 workers), and to 3.7 GB with the caches dropped
# after each module only. CI allows 3 GB per worker: drop them after any test that leaves
# the worker above this (1 GB), and hand the freed pages back to the system.
_RSS_LIMIT = 1.0 * 2**30


def _rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _free():
    jax.clear_caches()
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_code_per_module():
    yield
    _free()


@pytest.fixture(autouse=True)
def _free_compiled_code_when_large():
    yield
    if _rss() > _RSS_LIMIT:
        _free()
