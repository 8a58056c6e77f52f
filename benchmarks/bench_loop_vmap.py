"""Benchmark: the one step loop against the segment loop under ``jax.vmap`` (issue 57).

Under ``jax.vmap`` a ``lax.cond`` whose predicate differs between lanes becomes a ``select``:
every iteration of the one loop then computes both its branches (a segment's start and a
step) and, in a step, the event's root search and reset, for every lane. This measures what
that costs warm, against the segment loop (``ROLLAX_LOOP=segments``, read when ``rollax.solve``
is called, so both run in this one process), alternating, best of ``--repeat`` each:

* ``ball``: the 4-impact bouncing ball (``examples/bouncing_ball.py``), each lane its own
  restitution and height; the forward solve and the reverse gradient of the 4th impact's time
  with respect to the restitutions;
* ``rim``: the basketball rolling on the rim (``rollax.systems.RimRolling``, its two basin
  events, no reset), each lane its own start (the basin map's grid); the forward solve.

    python benchmarks/bench_loop_vmap.py [--lanes 256] [--repeat 5] [--smoke]

CPU figures are ratios (loop / segments, same process, alternating); absolute times count only
on a GPU.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.systems import RimRolling

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from bouncing_ball import BouncingBall  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10)


def programs(lanes: int):
    """``{case/program: (function, argument)}``, each a ``jax.vmap`` over ``lanes`` lanes."""
    rng = np.random.default_rng(0)
    e = jnp.asarray(rng.uniform(0.6, 0.95, lanes))
    z0 = jnp.asarray(rng.uniform(0.5, 2.0, lanes))

    def ball_t(e, z0):
        sol = rollax.solve(BouncingBall(e=e), jnp.stack([z0, jnp.zeros_like(z0)]), 0.0, 30.0, **TOL)
        return sol.t

    ball_fwd = jax.vmap(ball_t)
    ball_grad = jax.vmap(jax.grad(ball_t))
    side = int(np.ceil(np.sqrt(lanes)))
    beta, w = np.meshgrid(np.linspace(1.0, 1.6, side), np.linspace(-3.5, -2.5, side))
    x0 = np.stack(
        [beta.ravel(), w.ravel(), np.full(side * side, 35.0), np.full(side * side, 10.0)], axis=1
    )[:lanes]
    rim = RimRolling()
    rim_fwd = jax.vmap(lambda x: rollax.solve(rim, x, 0.0, 60.0, **TOL).t)
    return {
        "ball/forward": (ball_fwd, (e, z0)),
        "ball/reverse gradient": (ball_grad, (e, z0)),
        "rim/forward": (rim_fwd, (jnp.asarray(x0),)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lanes", type=int, default=256)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="8 lanes, 1 repeat")
    p.add_argument("--out", type=Path, help="accepted and unused (the results are printed)")
    a = p.parse_args()
    lanes, repeat = (8, 1) if a.smoke else (a.lanes, a.repeat)
    print(f"# {platform.node()}, jax {jax.__version__}, {jax.devices()[0].platform}, {lanes} lanes")
    print("| program | loop [ms] | segments [ms] | loop / segments | compile loop / segments [s] |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (fn, args) in programs(lanes).items():
        compiled, compile_s, results = {}, {}, {}
        for how in ("one", "segments"):
            os.environ["ROLLAX_LOOP"] = how
            t = time.perf_counter()
            # (a new function each time: jax.jit's trace cache would hand back the first)
            compiled[how] = jax.jit(lambda *x, fn=fn: fn(*x)).lower(*args).compile()
            compile_s[how] = time.perf_counter() - t
            results[how] = np.asarray(jax.block_until_ready(compiled[how](*args)))
        os.environ.pop("ROLLAX_LOOP")
        # the same answers (the two loops take the same steps)
        np.testing.assert_allclose(results["one"], results["segments"], rtol=1e-9, atol=1e-12)
        best = {how: np.inf for how in compiled}
        for _ in range(repeat):
            for how, c in compiled.items():
                t = time.perf_counter()
                jax.block_until_ready(c(*args))
                best[how] = min(best[how], time.perf_counter() - t)
        print(
            f"| {name} | {1e3 * best['one']:.1f} | {1e3 * best['segments']:.1f} | "
            f"{best['one'] / best['segments']:.2f} | "
            f"{compile_s['one']:.1f} / {compile_s['segments']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
