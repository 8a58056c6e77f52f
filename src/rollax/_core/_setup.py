"""The one process-wide JAX setting made on import: float64.

rollax computes in float64 everywhere, so importing it enables ``jax_enable_x64``. Nothing else
changes on import: the CPU device split and the persistent compile cache are opt-in, through
:func:`rollax.configure` (:mod:`rollax._core._config`), which the ``rollax`` command calls itself.

JAX itself is not imported here (it takes about 0.4 s of CPU, which ``rollax --help`` must not
pay): if it is loaded already, the setting is made on its config; if not, ``JAX_ENABLE_X64=1``
in the environment makes JAX start in float64 whenever it is first imported, by rollax's own
modules or by the user's code (a JAX imported by a child process inherits it too).
"""

from __future__ import annotations

import os
import sys


def enable_float64() -> None:
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "config"):
        jax.config.update("jax_enable_x64", True)
    else:
        os.environ["JAX_ENABLE_X64"] = "1"


enable_float64()
