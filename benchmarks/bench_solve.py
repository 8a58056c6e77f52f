"""Benchmark: ``rollax.solve`` (the diffrax path) against plain diffrax, in the same process.

1. **Eager calls.** 1000 calls of ``rollax.solve`` in a Python loop, each with new parameter
   values and a new start (the rim's rolling system with its two basin events): the first call
   compiles, the others must reuse the compiled code (at most 10 ms each) and must not grow the
   resident memory (at most 50 MB over the 1000 calls).
2. **vmap over 10,000 starts.** ``jax.vmap(rollax.solve)`` against plain ``diffrax.diffeqsolve``
   with a ``diffrax.Event`` on the same problem (the rim, the separation event F2 = 0 only,
   located by optimistix's Newton root finder, ``diffrax.Dopri5`` with its ``PIDController``
   at the same tolerances; ``rollax.solve`` takes the kernel's DOPRI5 steps, whose error
   estimate is 1.5x diffrax's, so it takes somewhat more of them):
   warm time (best of ``--repeat``, the two alternating) and the compiled program's memory (XLA's
   ``memory_analysis``: arguments + outputs + temporaries).

    python benchmarks/bench_solve.py [--calls 1000] [--starts 10000] [--repeat 3]

``--smoke``: 3 calls, 4 starts, one timed run (tests/test_scripts_smoke.py); ``--out DIR`` is
accepted and unused (the results are printed only).
"""

from __future__ import annotations

import argparse
import platform
import resource
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

import rollax
from rollax.models.rim import Rim
from rollax.systems import RimRolling


class RimSeparation(RimRolling):
    """The rim with the separation event only (what plain diffrax is given)."""

    @property
    def events(self):
        return (rollax.boundary("separation"),)

    def event_values(self, t, y, mode):
        return (self.rim.normal_force(y) / self.rim.m)[None]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def starts(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack(
        [rng.uniform(1.0, 1.4, n), rng.uniform(-3, 3, n), np.full(n, 35.0), np.full(n, 10.0)],
        axis=1,
    )


def eager_loop(calls: int):
    x0 = starts(calls, 1)
    times = []
    rss0 = None
    for i in range(calls):
        t = time.perf_counter()
        sol = rollax.solve(RimRolling(Rim(k_d=1e-3 * (i % 7))), x0[i], 0.0, 5.0)
        sol.t.block_until_ready()
        times.append(time.perf_counter() - t)
        if i == min(9, calls - 1):
            rss0 = rss_mb()
    rss1 = rss_mb()
    after = np.array(times[1:])
    print(
        f"eager rollax.solve x {calls}: first {times[0]:.2f} s; after it median "
        f"{1e3 * np.median(after):.2f} ms, max {1e3 * after.max():.2f} ms; "
        f"RSS growth from call {min(10, calls)} to {calls}: {rss1 - rss0:+.1f} MB"
    )


def plain_diffrax(rim, y0, t1, rtol, atol):
    def vf(t, y, rim):
        return rim.vector_field(y)

    def cond(t, y, args, **kw):
        return args.normal_force(y) / args.m

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vf),
        diffrax.Dopri5(),
        0.0,
        t1,
        None,
        y0,
        args=rim,
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=0.0, icoeff=1.0),
        event=diffrax.Event(cond, optx.Newton(1e-12, 1e-12, optx.rms_norm)),
        saveat=diffrax.SaveAt(t1=True),
        max_steps=16_384,
        throw=False,
    )
    return sol.ts[-1], sol.ys[-1]


def compare_vmap(n: int, repeat: int, rtol=1e-9, atol=1e-9, t1=5.0):
    rim = jax.tree_util.tree_map(jnp.asarray, Rim())
    system = RimSeparation(rim)
    x0 = jnp.asarray(starts(n))
    ours = jax.jit(jax.vmap(lambda y: rollax.solve(system, y, 0.0, t1, rtol=rtol, atol=atol)))
    theirs = jax.jit(jax.vmap(lambda y: plain_diffrax(rim, y, t1, rtol, atol)))
    out = {}
    compiled = {}
    for name, fn in (("rollax.solve", ours), ("plain diffrax + Event", theirs)):
        t = time.perf_counter()
        compiled[name] = fn.lower(x0).compile()
        t_compile = time.perf_counter() - t
        mem = compiled[name].memory_analysis()
        mb = (
            mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
        ) / 2**20
        res = compiled[name](x0)
        jax.block_until_ready(res)
        out[name] = [np.inf, mb, res, t_compile]
    # the two alternate, so that both see the same machine load (best of ``repeat`` each)
    for _ in range(repeat):
        for name, c in compiled.items():
            t = time.perf_counter()
            jax.block_until_ready(c(x0))
            out[name][0] = min(out[name][0], time.perf_counter() - t)
    for name, (best, mb, _, t_compile) in out.items():
        print(
            f"vmap over {n} starts, {name}: warm {best:.3f} s, compile {t_compile:.1f} s, "
            f"memory {mb:.1f} MB"
        )
    (t_a, m_a, r_a, _), (t_b, m_b, r_b, _) = out.values()
    ta = np.asarray(r_a.t)
    tb = np.asarray(r_b[0])
    print(
        f"ratio rollax/diffrax: time {t_a / t_b:.2f}x, memory {m_a / m_b:.2f}x; "
        f"end times agree to {np.max(np.abs(ta - tb)):.1e} s"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--starts", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=None, help="unused: the results are printed only")
    p.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    a = p.parse_args()
    if a.smoke:
        a.calls, a.starts, a.repeat = 3, 4, 1
    print(
        f"machine: {platform.machine()}, {jax.device_count()} JAX device(s) "
        f"({jax.devices()[0].platform}), jax {jax.__version__}, diffrax {diffrax.__version__}"
    )
    eager_loop(a.calls)
    compare_vmap(a.starts, a.repeat)


if __name__ == "__main__":
    main()
