import os

os.environ.setdefault("ROLLAX_CPU_DEVICES", "2")
import rollax  # noqa: E402  (float64)

# Importing rollax no longer splits the CPU: the tests ask for it (2 devices, or
# ROLLAX_CPU_DEVICES) before any test runs JAX, as the rollax command does.
rollax.configure()


import gc  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_code():
    """Drop each module's compiled executables when it is done.

    A worker otherwise keeps every executable of every module it ran: its resident memory
    grew to 7.6 GB over the suite (measured with /usr/bin/time -v, 2 workers), over the 3 GB
    a CI worker may use."""
    yield
    jax.clear_caches()
    gc.collect()
