"""The one process-wide JAX setting made on import: float64.

rollax computes in float64 everywhere, so importing it enables ``jax_enable_x64``. Nothing else
changes on import: the CPU device split and the persistent compile cache are opt-in, through
:func:`rollax.configure` (:mod:`rollax._config`), which the ``rollax`` command calls itself.
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)
