"""Micro-benchmarks behind the design of the ensemble kernel (CPU).

* float64 sin+cos: XLA's own against rollax._core.fastmath.sincos (ns per element);
* one DOPRI5 step of the rim model per lane, with each;
* the Fig. 11 panel with 1 and 2 devices and several lane counts (warm, best of 3).

    python benchmarks/bench_kernel.py [--out DIR] [--smoke]

``--out DIR``: also write the results into DIR/bench_kernel.json. ``--smoke``: tiny sizes, one
run each (tests/test_scripts_smoke.py).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax._integrate import dopri5
from rollax.analysis.basin import Axis, section_starts
from rollax._core.fastmath import sincos
from rollax.models.rim import Rim
from rollax.systems import RimRolling

rollax.configure()  # one JAX CPU device per core, compile cache (before any JAX work)

#: sin+cos elements; lanes, steps and timed runs of the DOPRI5 step; the panel and its lanes
SIZES = dict(
    elements=2_000_000,
    lanes=512,
    steps=200,
    runs=20,
    grid=(360, 240),
    lane_counts=(256, 512, 1024, 2048),
)
#: --smoke: the smallest (16 lanes: the least the ensemble kernel takes)
SMOKE = dict(elements=1000, lanes=16, steps=2, runs=1, grid=(3, 3), lane_counts=(16,))


def per_call(fn, *args, n=20):
    jax.block_until_ready(fn(*args))
    t = time.perf_counter()
    for _ in range(n):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the JSON (bench_kernel.json)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    args = ap.parse_args()
    size = SMOKE if args.smoke else SIZES
    n_elem, L, n_steps, n = size["elements"], size["lanes"], size["steps"], size["runs"]
    grid, lane_counts = size["grid"], size["lane_counts"]
    out = {}
    a = jnp.asarray(np.random.default_rng(0).uniform(-10, 10, n_elem))
    xla = jax.jit(lambda a: jnp.sin(a) + jnp.cos(a))
    poly = jax.jit(lambda a: sum(sincos(a)))
    out["sincos_ns_per_elem"] = {
        "xla": per_call(xla, a, n=n) / a.size * 1e9,
        "fastmath": per_call(poly, a, n=n) / a.size * 1e9,
    }

    system = RimRolling(Rim(), w1_target=2)
    y = jnp.asarray(np.random.default_rng(1).random((L, 4)) + np.array([1, 0, 35, 10]))
    h = jnp.full(L, 1e-2)

    def steps(f, g):
        def body(i, y):
            return jax.vmap(lambda y, h: dopri5.step(f, 0.0, y, h, f(0.0, y), g)[0])(y, h)

        return jax.jit(lambda y: jax.lax.fori_loop(0, n_steps, body, y))

    f = lambda t, y: system.vector_field(t, y, 0)  # noqa: E731
    g = lambda t, y: system.event_values(t, y, 0)  # noqa: E731
    out["dopri5_step_ns_per_lane"] = per_call(steps(f, g), y, n=min(n, 3)) / n_steps / L * 1e9

    y0 = section_starts(
        Axis("beta", 0.8, 1.8, grid[0]),
        Axis("omega1", -20, 20, grid[1]),
        {"omega2": 35.0, "omega3": 10.0},
    )
    panel = {}
    for devices in (1, 2):
        for lanes in lane_counts:
            run = lambda: rollax.solve_ensemble(  # noqa: E731
                system, y0, 0.0, 60.0, lanes=lanes, devices=devices, backend="queue"
            )
            run()
            panel[f"devices={devices} lanes={lanes}"] = min(
                per_call(lambda: run().t, n=1) for _ in range(min(n, 3))
            )
    out["fig11_panel_kernel_s"] = panel
    print(json.dumps(out, indent=2))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_kernel.json"), "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
