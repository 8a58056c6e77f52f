"""Benchmark: full 360 x 240 basin panels of the ball on the rim, against SciPy's solve_ivp.

rollax: the ensemble kernel on all local devices (one per core on a CPU), warm (best of
``--repeat``), with the compile time measured separately (persistent cache off).
Baseline, in the same process: ``scipy.integrate.solve_ivp`` (RK45, same rtol/atol, the same
events: F2 terminal, the 2nd zero of w1 terminal) on a random sample of the panel's starts,
extrapolated to the whole panel (starts with F2 <= 0 at t = 0 are skipped by both). The
outcomes of the sample are compared start by start.

    python benchmarks/bench_basin.py [--sample 400] [--repeat 3] [--json out.json]

``--smoke``: one 3 x 3 panel, 16 lanes, 3 SciPy starts, no repeat (tests/test_scripts_smoke.py);
``--out DIR``: write the JSON into DIR/bench_basin.json (unless ``--json`` names a file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")  # honest compile times

import jax  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import rollax  # noqa: E402
from rollax.analysis.basin import IN, OUT, PERIODIC, UNDECIDED, basin_map, preset, section_starts  # noqa: E402
from rollax.models.rim import Rim  # noqa: E402

rollax.configure()  # one JAX CPU device per core, compile cache (before any JAX work)


def scipy_outcome(rim: Rim, x0: np.ndarray, t_max: float, rtol: float, atol: float) -> int:
    """Outcome of one start with solve_ivp (same model, events and flight rule as rollax)."""
    p = dict(r=rim.r, R=rim.R, j=rim.j, g=rim.g, rho=rim.rho, kd=rim.k_d, kr=rim.k_r)

    def f(t, x):
        beta, w1, w2, w3 = x
        s, c = np.sin(beta), np.cos(beta)
        D = p["R"] - p["rho"] * c
        j, r, g = p["j"], p["r"], p["g"]
        return [
            r / p["rho"] * w1,
            ((1 + j) * r * w3**2 * s - j * r * w2 * w3 * c) / ((1 + j) * D)
            - g * c / (r * (1 + j))
            - p["kr"] * w1,
            r * p["R"] * w1 * w3 / (p["rho"] * D) - p["kd"] * w2,
            -r * w1 * w3 * s / D - j * r * w1 * w2 / (p["rho"] * (1 + j)) - p["kr"] * w3,
        ]

    def fall(t, x):
        beta, w1, _, w3 = x
        c = np.cos(beta)
        return (
            p["r"] ** 2 * w3**2 * c / (p["R"] - p["rho"] * c)
            - p["r"] ** 2 * w1**2 / p["rho"]
            + p["g"] * np.sin(beta)
        )

    def turn(t, x):
        return x[1]

    fall.terminal, fall.direction = True, -1
    turn.terminal = 0 if rim.dissipative else 2
    if fall(0.0, x0) <= 0:
        state = x0
    else:
        sol = solve_ivp(
            f, (0.0, t_max), x0, method="RK45", rtol=rtol, atol=atol, events=(fall, turn)
        )
        if (
            sol.status == 1
            and len(sol.t_events[1]) >= 2
            and not rim.dissipative
            and (not len(sol.t_events[0]) or sol.t_events[1][1] < sol.t_events[0][0])
        ):
            return PERIODIC
        if sol.status != 1:
            return UNDECIDED
        state = sol.y_events[0][0]
    inside, _, _ = rim.flight(np.asarray(state))
    return IN if bool(inside) else OUT


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--panels", nargs="*", default=["none", "drilling", "rolling"])
    ap.add_argument("--fig", default="fig11")
    ap.add_argument("--grid", type=int, nargs=2, default=None, help="e.g. 1000 1000 on a GPU")
    ap.add_argument(
        "--lanes",
        type=int,
        nargs="*",
        default=[512],
        help="lanes per device (several: one timing per value; 10^4-10^5 on a GPU)",
    )
    ap.add_argument("--backend", default="auto", help="auto, queue or fused")
    ap.add_argument("--out", default=None, help="folder for the JSON (bench_basin.json)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.panels, args.grid, args.lanes, args.repeat, args.sample = ["none"], [3, 3], [16], 1, 3
    if args.out and not args.json:
        os.makedirs(args.out, exist_ok=True)
        args.json = os.path.join(args.out, "bench_basin.json")
    rtol = atol = 1e-9
    t_max = 60.0
    dev = jax.devices()
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{len(dev)} x {dev[0].platform} JAX devices ({dev[0].device_kind})"
    )
    print(f"# {machine}; jax {jax.__version__}")
    results = {"machine": machine, "panels": []}
    rng = np.random.default_rng(0)
    for diss, lanes in [(d, n) for d in args.panels for n in args.lanes]:
        rim, kw = preset(args.fig, diss)
        if args.grid:
            kw["x"] = type(kw["x"])("beta", 0.8, 1.8, args.grid[0])
            kw["y"] = type(kw["y"])("omega1", -20.0, 20.0, args.grid[1])
        n = kw["x"].n * kw["y"].n
        t0 = time.perf_counter()
        bmap = basin_map(
            rim,
            progress=False,
            t_max=t_max,
            rtol=rtol,
            atol=atol,
            chunk_size=n,
            lanes=lanes,
            backend=args.backend,
            **kw,
        )
        first = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            bmap = basin_map(
                rim,
                progress=False,
                t_max=t_max,
                rtol=rtol,
                atol=atol,
                chunk_size=n,
                lanes=lanes,
                backend=args.backend,
                **kw,
            )
            warm.append(time.perf_counter() - t0)
        best = min(warm)
        # SciPy on a random sample of the same starts
        starts = section_starts(kw["x"], kw["y"], kw["fixed"])
        pick = rng.choice(n, size=min(args.sample, n), replace=False)
        t0 = time.perf_counter()
        ref = np.array([scipy_outcome(rim, starts[i], t_max, rtol, atol) for i in pick])
        t_sample = time.perf_counter() - t0
        scipy_panel = t_sample / len(pick) * n
        agree = float(np.mean(ref == bmap.outcome.ravel()[pick]))
        row = dict(
            panel=f"{args.fig} {diss}",
            grid=[kw["x"].n, kw["y"].n],
            lanes=lanes,
            counts=bmap.counts(),
            ns_per_start=round(best / n * 1e9, 1),
            compile_s=round(first - best, 2),
            warm_s=round(best, 3),
            scipy_1proc_s=round(scipy_panel, 1),
            scipy_2proc_s=round(scipy_panel / 2, 1),
            speedup_vs_scipy_2proc=round(scipy_panel / 2 / best, 1),
            sample=len(pick),
            sample_agreement=agree,
            steps=int(np.sum(bmap.steps)),
            # about 125 flops per right-hand side with the step around it (PERFORMANCE.md),
            # six evaluations per accepted step: an estimate of the arithmetic done
            est_gflop_per_s=round(int(np.sum(bmap.steps)) * 6 * 125 / best / 1e9, 1),
        )
        results["panels"].append(row)
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
