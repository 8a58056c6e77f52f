"""``rollax shot``: the outcome map of basketball releases (speed x angle), in or out."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np

from rollax.cli._args import (
    FINITE,
    NONNEGATIVE,
    POSITIVE,
    TOLERANCE,
    DefaultsHelpFormatter,
    add_sweep_output_arguments,
    cluster,
    dumps,
    integer,
    real,
    sweep_paths,
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "shot",
        help="shot map: which releases (speed x angle) go in, with rim and board contacts",
        description=(
            "Outcome map of basketball releases over release speed x release angle: made "
            "(swish or off the rim/board), missed, on the rim, with the number of rim and board "
            "impacts; and the make probability under the shooter's scatter with the best "
            "release. Writes OUT/shot.zarr (or OUT/shot.nc with --format netcdf) and "
            "OUT/shot.png. The best release is chosen among the map's best nodes by Monte "
            "Carlo (common random numbers) and its probability, p +- standard error, comes "
            "from independent draws (the map's own value there is biased where the grid is "
            "coarse against the scatter). With no arguments: a free throw (4.19 m, released "
            "2.1 m high), no spin, 360 x 240 releases."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "--speed",
        type=POSITIVE,
        nargs=2,
        metavar=("LO", "HI"),
        default=(6.6, 8.0),
        help="release speed range [m/s]",
    )
    p.add_argument(
        "--angle",
        type=real(0.0, 90.0, lo_open=True, hi_open=True),
        nargs=2,
        metavar=("LO", "HI"),
        default=(40.0, 64.0),
        help="release angle range [degrees]",
    )
    p.add_argument(
        "--grid",
        type=integer(2, 100_000),
        nargs=2,
        metavar=("NV", "NA"),
        default=(360, 240),
        help="grid points in speed and angle",
    )
    p.add_argument("--spin", type=FINITE, default=0.0, help="backspin [Hz]")
    p.add_argument("--lateral", type=FINITE, default=0.0, help="lateral angle [degrees, left]")
    p.add_argument(
        "--distance", type=POSITIVE, default=4.19, help="release point to the hoop's centre [m]"
    )
    p.add_argument("--height", type=POSITIVE, default=2.1, help="release height [m]")
    p.add_argument("--vacuum", action="store_true", help="no air: no drag, no Magnus lift")
    p.add_argument(
        "--sd-speed", type=NONNEGATIVE, default=0.09, help="shooter's speed scatter (sd) [m/s]"
    )
    p.add_argument(
        "--sd-angle", type=NONNEGATIVE, default=1.3, help="shooter's angle scatter (sd) [degrees]"
    )
    p.add_argument(
        "--t-max",
        type=POSITIVE,
        default=4.0,
        help="time cap [s] (then 'undecided', or 'on_rim' for a ball on the rim)",
    )
    p.add_argument(
        "--mc-shots",
        type=integer(2, 1 << 22),
        default=4096,
        help="Monte Carlo releases per candidate of the best release, and again for its "
        "probability (from independent draws)",
    )
    p.add_argument("--rtol", type=TOLERANCE, default=1e-9, help="relative tolerance")
    p.add_argument(
        "--chunk-size", type=integer(1, 1 << 24), default=1 << 17, help="starts per region"
    )
    add_sweep_output_arguments(p, "shot")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollax._drivers._labels import write_dataset
    from rollax._drivers._sweep import Axis
    from rollax.analysis.shot import best_release, probability_map, shot_map
    from rollax.systems.shot import Shot

    final, store = sweep_paths(args, "shot")
    for name, (lo, hi) in (("--speed", args.speed), ("--angle", args.angle)):
        if not lo < hi:
            raise ValueError(f"{name} = {lo!r} {hi!r} is not allowed: it must be LO < HI")
    shot = Shot(rho_air=0.0) if args.vacuum else Shot()
    t0 = time.perf_counter()
    with cluster(args) as client:
        res = shot_map(
            shot,
            speed=Axis("speed", args.speed[0], args.speed[1], args.grid[0]),
            angle=Axis("angle", args.angle[0], args.angle[1], args.grid[1]),
            spin=args.spin,
            lateral=args.lateral,
            distance=args.distance,
            height=args.height,
            t_max=args.t_max,
            rtol=args.rtol,
            atol=args.rtol,
            chunk_size=args.chunk_size,
            store=store,
            client=client,
            progress=not args.no_progress,
        )
    elapsed = time.perf_counter() - t0
    p = probability_map(res, args.sd_speed, args.sd_angle)
    best = best_release(
        res,
        args.sd_speed,
        args.sd_angle,
        n=args.mc_shots,
        rtol=args.rtol,
        atol=args.rtol,
        progress=False if args.no_progress else None,
    )
    v_best, a_best, p_best, se_best = best.speed, best.angle, best.probability, best.std_error
    ds = res.dataset.copy()
    ds["make_probability"] = (
        ("speed", "angle"),
        p,
        {
            "units": "1",
            "long_name": f"make probability under the scatter (sd {args.sd_speed} m/s, "
            f"{args.sd_angle} degrees): the made indicator convolved with its Gaussian",
        },
    )
    ds.attrs.update(
        sd_speed=args.sd_speed,
        sd_angle=args.sd_angle,
        best_speed=v_best,
        best_angle=a_best,
        best_probability=p_best,
        best_std_error=se_best,
        best_map_probability=best.map_probability,
        mc_shots=best.n,
    )
    if args.format == "zarr":
        # the sweep's store holds the map (and stays resumable: its regions are checked on its
        # own variables); the probability map is added beside them
        from rollax._drivers._store import add_variable

        v = ds["make_probability"]
        add_variable(final, "make_probability", v.dims, v.values, v.attrs)
        from rollax._drivers._store import finish

        keys = (
            "sd_speed",
            "sd_angle",
            "best_speed",
            "best_angle",
            "best_probability",
            "best_std_error",
            "best_map_probability",
            "mc_shots",
        )
        finish(final, {k: ds.attrs[k] for k in keys})
    else:
        write_dataset(ds, final, "netcdf")
    png = os.path.join(args.out, "shot.png")
    _figure(res, p, (v_best, a_best, p_best, se_best), args, png)
    counts = res.counts()
    made = np.asarray(res.outcome == 0)
    swish = float(np.mean(np.asarray(res.summary["swish"])))
    if store != final:  # (after the figure and the fractions: a lazy map reads the store)
        shutil.rmtree(store, ignore_errors=True)
    summary = {
        "out": final,
        "figure": png,
        "grid": list(args.grid),
        "spin_hz": args.spin,
        "vacuum": bool(args.vacuum),
        "counts": counts,
        "make_fraction": float(made.mean()),
        "swish_fraction": swish,
        "best_release": {
            "speed": v_best,
            "angle": a_best,
            "probability": p_best,
            "std_error": se_best,
            "map_probability": best.map_probability,
            "n": best.n,
        },
        "seconds": round(elapsed, 3),
        "units": {
            "spin_hz": "Hz",
            "best_release.speed": "m/s",
            "best_release.angle": "degrees",
            "best_release.probability": "1",
            "best_release.std_error": "1",
            "best_release.map_probability": "1",
            "best_release.n": "1",
            "seconds": "s",
        },
    }
    if args.json:
        print(dumps(summary, indent=2))
    else:
        line = (
            f"best release {v_best:.3f} m/s at {a_best:.2f} degrees: p = {p_best:.3f} ± "
            f"{se_best:.3f} (Monte Carlo, n = {best.n}; the map's {best.map_probability:.3f})"
            if best.candidates
            else "no release of the map goes in"
        )
        print(
            f"rollax shot: {args.grid[0]} x {args.grid[1]} releases in {elapsed:.2f} s "
            f"(made {counts['made']}, swish {int(np.sum(res.summary['swish']))}); {line}"
        )
        print(f"wrote {final} and {png}")
    return 0


def _figure(res, p, best, args, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    sp, an = (a.values for a in res.axes)
    swish = np.asarray(res.summary["swish"])
    n_contact = np.asarray(res.summary["rim_contacts"] + res.summary["board_contacts"])
    # classes: swish, made off the rim/board, on the rim, missed, undecided/failed
    cls = np.select(
        [swish, res.outcome == 0, res.outcome == 2, res.outcome == 1],
        [0, 1, 2, 3],
        4,
    )
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=100)
    names = ["swish", "made off rim/board", "on the rim", "missed", "undecided/failed"]
    colours = ["#1a9850", "#91cf60", "#fee08b", "#d73027", "#999999"]
    ax = axes[0]
    ax.pcolormesh(
        sp,
        an,
        cls.T,
        cmap=ListedColormap(colours),
        vmin=-0.5,
        vmax=4.5,
        shading="nearest",
        rasterized=True,
    )
    from matplotlib.patches import Patch

    ax.legend(
        handles=[
            Patch(color=c, label=f"{n} ({int(np.sum(cls == k))})")
            for k, (c, n) in enumerate(zip(colours, names))
            if np.any(cls == k)
        ],
        loc="upper right",
        fontsize=8,
    )
    cs = ax.contour(sp, an, n_contact.T, levels=[0.5, 1.5, 2.5], colors="k", linewidths=0.5)
    ax.clabel(cs, fmt={0.5: "1", 1.5: "2", 2.5: "3"}, fontsize=7)
    ax.set_xlabel("release speed [m/s]")
    ax.set_ylabel("release angle [degrees]")
    ax.set_title(
        f"outcome; contours: impacts (backspin {args.spin} Hz, {args.distance} m, "
        f"{args.height} m high{', vacuum' if args.vacuum else ''})",
        fontsize=9,
    )
    ax = axes[1]
    m = ax.pcolormesh(
        sp, an, p.T, cmap="viridis", vmin=0, vmax=1, shading="nearest", rasterized=True
    )
    fig.colorbar(m, ax=ax, label="make probability")
    ax.plot(best[0], best[1], marker="*", color="w", markeredgecolor="k", markersize=14)
    ax.set_xlabel("release speed [m/s]")
    ax.set_ylabel("release angle [degrees]")
    ax.set_title(
        f"under scatter sd {args.sd_speed} m/s, {args.sd_angle} deg (map); best {best[0]:.2f} "
        f"m/s, {best[1]:.1f} deg: p = {best[2]:.2f} ± {best[3]:.2f} (Monte Carlo)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
