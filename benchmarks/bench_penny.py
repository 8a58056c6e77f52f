"""Benchmark: penny impact sequences through rollax.solve against the billiard's closed-form
search, in the same process.

rollax: :func:`rollax.analysis.penny.simulate` / :func:`rollax.analysis.penny.simulate_batch` /
:func:`rollax.analysis.penny.ftle_batch` (each flight one ``rollax.solve`` of ``PennySystem``).
Baseline: ``PennyBilliard.simulate`` (sampling + bracketing + safeguarded Newton on the
closed-form flow), jitted and vmapped the same way. First call (compile + run, persistent
cache off) and warm best of ``--repeat``; impact times compared.

    python benchmarks/bench_penny.py [--impacts 20] [--batch 101] [--repeat 5] [--json out.json]

``--smoke``: 2 impacts, a batch of 2, one timed run (tests/test_scripts_smoke.py); ``--out DIR``:
write the JSON into DIR/bench_penny.json (unless ``--json`` names a file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")  # honest compile times

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import rollax  # noqa: E402
from rollax.analysis.penny import ftle_batch, paper_billiard, simulate, simulate_batch  # noqa: E402


def timed(fn, repeat):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        warm.append(time.perf_counter() - t0)
    return out, first, min(warm)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impacts", type=int, default=20)
    ap.add_argument("--batch", type=int, default=101)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--out", default=None, help="folder for the JSON (bench_penny.json)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.impacts, args.batch, args.repeat = 2, 2, 1
    if args.out and not args.json:
        os.makedirs(args.out, exist_ok=True)
        args.json = os.path.join(args.out, "bench_penny.json")
    rollax.configure(cpu_devices=1)
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"jax {jax.__version__} ({jax.devices()[0].platform})"
    )
    print(f"# {machine}")
    closed = eqx.filter_jit(lambda b, s, n: b.simulate(s, n))
    closed_batch = eqx.filter_jit(lambda b, s, n: jax.vmap(lambda x: b.simulate(x, n))(s))
    rows = []
    rng = np.random.default_rng(0)
    for law in ("elastic", "plastic"):
        b = paper_billiard("ellipse", law)
        s0 = b.penny.state()
        pert = rng.uniform(-0.005, 0.005, size=(args.batch, 2))
        batch = np.stack(
            [np.asarray(b.penny.state(theta_dot=10 + d1, phi_dot=0.2 + d2)) for d1, d2 in pert]
        )
        n = args.impacts
        ours, f1, w1 = timed(lambda: simulate(b, s0, n), args.repeat)
        ref, f2, w2 = timed(lambda: closed(b, s0, n), args.repeat)
        _, f3, w3 = timed(lambda: simulate_batch(b, batch, n), args.repeat)
        _, f4, w4 = timed(lambda: closed_batch(b, batch, n), args.repeat)
        _, f5, w5 = timed(lambda: ftle_batch(b, batch, n), max(1, args.repeat // 2))
        ok = np.asarray(ref.status) == 0
        same = bool(np.array_equal(np.asarray(ours.status), np.asarray(ref.status)))
        dt = np.abs(np.asarray(ours.times) - np.asarray(ref.times))[ok]
        row = dict(
            law=law,
            impacts=n,
            batch=args.batch,
            statuses_equal=same,
            first_impact_dt=float(dt[0]),
            max_dt=float(dt.max()),
            solve_first_s=f1,
            solve_warm_s=w1,
            closed_first_s=f2,
            closed_warm_s=w2,
            batch_solve_first_s=f3,
            batch_solve_warm_s=w3,
            batch_closed_first_s=f4,
            batch_closed_warm_s=w4,
            ftle_batch_first_s=f5,
            ftle_batch_warm_s=w5,
        )
        rows.append(row)
        print(
            f"{law}: one run of {n} impacts: solve {w1 * 1e3:.2f} ms (first {f1:.1f} s), "
            f"closed form {w2 * 1e3:.2f} ms (first {f2:.1f} s); batch of {args.batch}: "
            f"solve {w3:.3f} s (first {f3:.1f} s), closed form {w4:.3f} s (first {f4:.1f} s); "
            f"ftle_batch {w5:.3f} s (first {f5:.1f} s); statuses equal: {same}; impact times "
            f"differ by {dt[0]:.1e} (1st) to {dt.max():.1e} (max)"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
