"""The fused path's host work (issue 62): the Fig. 11 no-slip map through ``basin_map`` (the
sweep) and the same starts through ``rollax.solve_ensemble`` directly, warm, with the time
spent outside the kernel shown function by function.

    python benchmarks/gpu/host_path.py [--grid 1000 1000] [--repeat 5] [--json out.json]
    python benchmarks/gpu/host_path.py --stub     # on a CPU: the kernel replaced (see below)

Cases, each the best of ``--repeat`` warm calls:

* ``map``: ``basin_map(..., backend="fused")``, one chunk (what ``rollax basin`` runs);
* ``direct``: ``solve_ensemble(system, starts, backend="fused")`` on the map's starts (NumPy,
  as a user has them), until every field of its Solution is ready (``block_until_ready``);
* ``direct_read``: the same, then every field read as NumPy (what reading it all costs).

``--stub`` replaces the fused kernel by a stand-in that returns arrays of the kernel's output
shapes at once (its shapes from the real per-start program): on a CPU, where the kernel runs
in Pallas's interpret mode, what remains is the host path, which is what this measures there.
On a GPU run it without ``--stub``. ``--profile``: one more warm call of each case under
cProfile, the rollax functions with the most inclusive time, and the number of JAX dispatches
(compiled programs run, arrays sent to and fetched from the device).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import time

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import rollax  # noqa: E402
from rollax.analysis.basin import basin_map, preset, section_starts  # noqa: E402
from rollax.systems import RimRolling  # noqa: E402

rollax.configure()


def stub_kernel() -> None:
    """The fused kernel replaced by a program that returns arrays of its output shapes (the
    shapes from the per-start program, traced once), so that what is timed is the host path."""
    from rollax._integrate import _fused

    real = _fused._runner

    @functools.lru_cache(maxsize=16)
    def runner(pb, shapes, mode, B, num_warps):
        program = real(pb, shapes, "vmap", B, num_warps)

        @jax.jit
        def stand_in(*args):
            out = jax.eval_shape(program, *args)
            return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out)

        return stand_in

    _fused._runner = runner


def ready(sol) -> None:
    jax.block_until_ready([x for x in jax.tree.leaves(sol) if isinstance(x, jax.Array)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, nargs=2, default=[1000, 1000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--stub", action="store_true", help="the kernel replaced (host path only)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.stub:
        stub_kernel()
    rim, kw = preset("fig11", "none")
    kw["x"] = type(kw["x"])("beta", 0.8, 1.8, args.grid[0])
    kw["y"] = type(kw["y"])("omega1", -20.0, 20.0, args.grid[1])
    n = kw["x"].n * kw["y"].n
    opts = dict(progress=False, t_max=60.0, rtol=1e-9, atol=1e-9, chunk_size=n, backend="fused")
    system = RimRolling(rim, w1_target=2)
    starts = section_starts(kw["x"], kw["y"], kw["fixed"])

    def direct():
        sol = rollax.solve_ensemble(
            system, starts, 0.0, 60.0, rtol=1e-9, atol=1e-9, backend="fused", progress=False
        )
        ready(sol)
        return sol

    cases = {
        "map": lambda: basin_map(rim, **kw, **opts),
        "direct": direct,
        "direct_read": lambda: [np.asarray(x) for x in jax.tree.leaves(direct())],
    }
    row: dict = dict(
        device=str(jax.devices()[0].device_kind),
        backend=jax.default_backend(),
        grid=args.grid,
        starts=n,
        stub=args.stub,
        jax=jax.__version__,
        rollax=os.path.dirname(rollax.__file__),  # (the code measured: .base or src)
    )
    for name, fn in cases.items():
        t0 = time.perf_counter()
        fn()
        row[f"{name}_first_s"] = round(time.perf_counter() - t0, 3)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        row[f"{name}_s"] = [round(t, 4) for t in sorted(times)]
        print(f"{name}: best {min(times) * 1e3:.1f} ms, median {np.median(times) * 1e3:.1f} ms")
    if args.profile:
        row["profile"] = {name: profile(fn) for name, fn in cases.items()}
    for name, prof in row.get("profile", {}).items():
        print(f"-- {name}: rollax functions (inclusive ms, calls); JAX calls {prof['jax_calls']}")
        for ms, where, calls in prof["rollax_ms"]:
            print(f"   {ms:8.1f} {calls:4d} {where}")
    print(json.dumps({k: v for k, v in row.items() if k != "profile"}))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(row, fh, indent=1)


#: JAX's functions that run a compiled program, move arrays or convert them (counted)
COUNTED = (
    "cache_miss", "_cpp_pjit", "device_put", "device_get",
    "_single_device_array_to_np_array", "__array__",
)  # fmt: skip


def profile(fn) -> dict:
    """One call of ``fn`` under cProfile: rollax's functions by inclusive time (ms), and the
    calls of JAX's dispatch, transfer and conversion functions."""
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    st = pstats.Stats(pr)
    own, jaxcalls = [], {}
    for (path, line, func), (_cc, nc, _tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        if "/rollax/" in path:
            own.append((ct, f"{path.split('/rollax/')[1]}:{line}({func})", nc))
        if func in COUNTED:
            jaxcalls[f"{os.path.basename(path)}({func})"] = nc
    own.sort(reverse=True)
    return dict(
        rollax_ms=[[round(ct * 1e3, 1), where, nc] for ct, where, nc in own[:25]],
        jax_calls=jaxcalls,
    )


if __name__ == "__main__":
    main()
