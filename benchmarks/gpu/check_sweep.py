"""The sweep's on-device path on a GPU: the Fig. 11 no-slip panel at 1000 x 1000 in one chunk
and in four (the last one partial) must give the same outcomes and end times, and the
mu = 1 panel at 360 x 240 its known counts (2050 / 24388 / 59962 on every path so far).

    python benchmarks/gpu/check_sweep.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")

import equinox as eqx  # noqa: E402
import numpy as np  # noqa: E402

import rollax  # noqa: E402
from rollax.analysis.basin import basin_map, preset  # noqa: E402
from rollax.models.slip import SlipSettings  # noqa: E402

rollax.configure()


def panel(n1, n2, **kw):
    rim, opts = preset("fig11", "none")
    opts["x"] = type(opts["x"])("beta", 0.8, 1.8, n1)
    opts["y"] = type(opts["y"])("omega1", -20.0, 20.0, n2)
    if kw.pop("mu", None):
        rim, kw["slip"] = eqx.tree_at(lambda r: r.mu, rim, 1.0), SlipSettings()
    t = time.perf_counter()
    r = basin_map(
        rim, progress=False, t_max=60.0, rtol=1e-9, atol=1e-9, backend="fused", **opts, **kw
    )
    return r, time.perf_counter() - t


one, t1 = panel(1000, 1000, chunk_size=1_000_000)
four, t4 = panel(1000, 1000, chunk_size=300_000)
same = np.array_equal(one.outcome, four.outcome) and np.array_equal(one.t_end, four.t_end)
print(
    f"1000 x 1000: {one.counts()} (first call {t1:.1f} s); in 4 chunks: identical = {same} ({t4:.1f} s)"
)
slip, ts = panel(360, 240, mu=1)
print(f"360 x 240, mu = 1: {slip.counts()} (first call {ts:.1f} s)")
