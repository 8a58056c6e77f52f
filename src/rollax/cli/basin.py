"""``rollax basin``: outcome maps of the ball on the rim (Figs. 11-13 of the rim paper)."""

from __future__ import annotations

import dataclasses
import math
import shutil
import time

import numpy as np

from rollax.cli._args import (
    ATOL,
    add_sweep_output_arguments,
    cluster,
    FINITE,
    NONNEGATIVE,
    POSITIVE,
    TOLERANCE,
    DefaultsHelpFormatter,
    dumps,
    integer,
    real,
    sweep_paths,
)


_SLIP_DELTA = 1e-6  # --slip-delta's default [m/s]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "basin",
        help="basin map of the ball on the rim (periodic / in / out)",
        description=(
            "Outcome map over a (beta, omega1) section of rolling starts: periodic rolling, "
            "falls in, falls out, undecided (time cap) or failed; with --friction MU the ball "
            "may also slip (then also: chattering, and per start the roll/slip switches and the "
            "slipping time). Writes OUT/basin.zarr (the labelled dataset, written as the map "
            "runs and resumed from; or OUT/basin.nc with --format netcdf) and OUT/basin.png. "
            "With no arguments: the Fig. 11 no-slip map into ./rollax-out/."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "--preset",
        choices=["fig11", "fig12", "fig13"],
        default=None,
        help="a section of Figs. 11-13 (omega2 = 35, 65, 105; omega3 = 10)",
    )
    p.add_argument(
        "--dissipation",
        choices=["none", "drilling", "rolling"],
        default="none",
        help="with --preset: none, drilling (k_d = 0.02 1/s) or rolling (k_r = 0.02 1/s)",
    )
    p.add_argument("--omega2", type=FINITE, default=None, help="fixed omega2 [1/s] (default 35)")
    p.add_argument("--omega3", type=FINITE, default=None, help="fixed omega3 [1/s] (default 10)")
    p.add_argument(
        "--beta",
        type=real(-math.pi, math.pi),
        nargs=2,
        metavar=("LO", "HI"),
        default=None,
        help="beta range [rad], in [-pi, pi] (default 0.8 1.8)",
    )
    p.add_argument(
        "--omega1",
        type=FINITE,
        nargs=2,
        metavar=("LO", "HI"),
        default=None,
        help="omega1 range [1/s] (default -20 20)",
    )
    p.add_argument(
        "--grid",
        type=integer(2),
        nargs=2,
        metavar=("NB", "NW"),
        default=None,
        help="grid points in beta and omega1 (default 360 240)",
    )
    p.add_argument(
        "--k-d", type=NONNEGATIVE, default=None, help="drilling resistance rate [1/s], eq. (83)"
    )
    p.add_argument(
        "--k-r", type=NONNEGATIVE, default=None, help="rolling resistance rate [1/s], eq. (83)"
    )
    p.add_argument(
        "--friction",
        type=real(0.0, lo_open=True, inf=True),
        default=None,
        metavar="MU",
        help="let the ball slip with friction coefficient MU (Sect. 5.2; default: "
        "no slipping, mu = infinity)",
    )
    p.add_argument(
        "--slip-delta",
        type=POSITIVE,
        default=_SLIP_DELTA,
        help="with --friction: slip speed [m/s] given at the onset of slipping",
    )
    p.add_argument("--t-max", type=POSITIVE, default=60.0, help="time cap [s] (then 'undecided')")
    p.add_argument(
        "--rtol",
        type=TOLERANCE,
        default=1e-9,
        help="relative tolerance of the integration (default 1e-9)",
    )
    p.add_argument(
        "--atol",
        type=ATOL,
        default=1e-9,
        help="absolute tolerance of the integration, in the state's units (rad, 1/s; default 1e-9)",
    )
    p.add_argument(
        "--max-steps",
        type=integer(1, 2**31 - 1),
        default=200_000,
        help="step limit per start ('failed')",
    )
    p.add_argument(
        "--samples",
        type=integer(1, 256),
        default=None,
        metavar="K",
        help="event samples per step (default 4; 8 misses no F2 dip on the Figs. 11-13 "
        "panels, at about 1.5x the time)",
    )
    for name, default, unit in (
        ("r", 0.12, "m"),
        ("a", 0.01, "m"),
        ("R", 0.225, "m"),
        ("j", 2 / 3, "-"),
        ("g", 9.81, "m/s^2"),
    ):
        p.add_argument(
            f"--{name}",
            dest=f"param_{name}",
            type=POSITIVE,
            default=default,
            metavar=name,
            help=f"ball/rim parameter {name} [{unit}]",
        )
    p.add_argument(
        "--chunk-size", type=integer(1, 1 << 24), default=1 << 17, help="starts per resumable chunk"
    )
    p.add_argument(
        "--lanes",
        type=integer(16, 1 << 22),
        default=None,
        help="lanes of each device's work queue (default: 512 on a CPU, one per start on a GPU)",
    )
    p.add_argument(
        "--devices", type=integer(1, 4096), default=None, help="JAX devices to use (default: all)"
    )
    p.add_argument(
        "--backend",
        choices=("auto", "queue", "fused"),
        default="auto",
        help="ensemble path: the work queue (CPU), the fused per-start GPU kernel, "
        "or auto (fused on a GPU, else the queue)",
    )
    add_sweep_output_arguments(p, "basin")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollax.analysis.basin import Axis, basin_map, preset
    from rollax.models.rim import Rim

    final, store = sweep_paths(args, "basin")
    base = Rim(r=args.param_r, a=args.param_a, R=args.param_R, j=args.param_j, g=args.param_g)
    name = args.preset or "fig11"
    rim, kw = preset(name, args.dissipation, base)
    if args.k_d is not None or args.k_r is not None:
        rim = dataclasses.replace(
            rim,
            k_d=args.k_d if args.k_d is not None else rim.k_d,
            k_r=args.k_r if args.k_r is not None else rim.k_r,
        )
    grid = args.grid or (kw["x"].n, kw["y"].n)
    beta = args.beta or (kw["x"].lo, kw["x"].hi)
    omega1 = args.omega1 or (kw["y"].lo, kw["y"].hi)
    fixed = dict(kw["fixed"])
    if args.omega2 is not None:
        fixed["omega2"] = args.omega2
    if args.omega3 is not None:
        fixed["omega3"] = args.omega3
    slip = None
    if args.friction is not None and not args.friction > 0:
        raise ValueError(f"--friction = {args.friction!r} must be > 0 (inf: no slipping)")
    if args.friction is not None and args.friction != float("inf"):
        from rollax.models.slip import SlipSettings

        rim = dataclasses.replace(rim, mu=args.friction)
        slip = SlipSettings(delta=args.slip_delta)
    elif args.slip_delta != _SLIP_DELTA:  # refused, not ignored (a new-user review)
        raise ValueError(
            f"--slip-delta = {args.slip_delta:g} is not allowed without --friction MU (a "
            f"finite friction coefficient): without slipping there is no slip onset"
        )
    x = Axis("beta", beta[0], beta[1], grid[0])
    y = Axis("omega1", omega1[0], omega1[1], grid[1])
    t0 = time.perf_counter()
    with cluster(args) as client:
        bmap = basin_map(
            rim,
            x=x,
            y=y,
            fixed=fixed,
            t_max=args.t_max,
            rtol=args.rtol,
            atol=args.atol,
            max_steps=args.max_steps,
            chunk_size=args.chunk_size,
            lanes=args.lanes,
            devices=args.devices,
            store=store,
            client=client,
            progress=not args.no_progress,
            slip=slip,
            n_samples=args.samples,
            backend=args.backend,
        )
    elapsed = time.perf_counter() - t0
    path = bmap.save(args.out, format=args.format)
    summary = {
        "out": str(path),
        "figure": str(path.with_suffix(".png")),
        "grid": list(grid),
        "fixed": fixed,
        "k_d": float(rim.k_d),
        "k_r": float(rim.k_r),
        "friction": None if slip is None else float(rim.mu),
        "counts": bmap.counts(),
        "seconds": round(elapsed, 3),
    }
    if slip is not None:
        assert bmap.switches is not None and bmap.t_slip is not None  # (kept with slip)
        summary["slipped"] = int(np.sum(bmap.switches > 0))
        summary["max_switches"] = int(bmap.switches.max())
        summary["mean_slip_time"] = float(bmap.t_slip.mean())
    if store != final:  # (after the summary: a map in a store is read from it)
        shutil.rmtree(store, ignore_errors=True)
    if args.json:
        print(dumps(summary, indent=2))
    else:
        counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items())
        print(f"rollax basin: {grid[0]} x {grid[1]} starts in {elapsed:.2f} s ({counts})")
        print(f"wrote {path} and {summary['figure']}")
    return 0
