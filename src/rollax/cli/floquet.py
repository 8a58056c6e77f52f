"""``rollax floquet``: Floquet stability of the linear periodic system (62), Fig. 9.

rollax floquet [--out DIR] [--n-rho 120 --n-j 80] [--r R --a A --R R --j J]
"""

from __future__ import annotations

import os

import numpy as np

from rollax.cli._args import POSITIVE, dump, dumps, integer, real

# rollax.analysis.floquet's bounds, written out so that --help does not load JAX
# (tests/cli/test_help.py holds them equal)
GRID_MAX = 1000
POINTS_MAX = 250_000


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "floquet",
        help="Floquet multipliers of (62) and the stability map over (rho/R, j) (Fig. 9)",
        description="Monodromy matrix of the 2 pi-periodic system (62) for (w2, w3), its "
        "multipliers for the given ball and rim, and the stability map of Fig. 9.",
    )
    p.add_argument("--out", help="output directory: fig9.png, fig9.npz, floquet_summary.json")
    p.add_argument("--json", action="store_true", help="print the summary JSON (always printed)")
    p.add_argument(
        "--n-rho",
        type=integer(2, GRID_MAX),
        default=120,
        help=f"grid points in rho/R (at most {POINTS_MAX:,} points in all)",
    )
    p.add_argument("--n-j", type=integer(2, GRID_MAX), default=80, help="grid points in j")
    p.add_argument(
        "--j-max",
        type=real(0.0, 1.0, lo_open=True),
        default=1.0,
        help="largest j of the map, in (0, 1]",
    )
    p.add_argument("--r", type=POSITIVE, default=0.12, help="ball radius [m]")
    p.add_argument("--a", type=POSITIVE, default=0.01, help="rim tube radius [m]")
    p.add_argument("--R", type=POSITIVE, default=0.225, help="rim major radius [m]")
    p.add_argument("--j", type=POSITIVE, default=2.0 / 3.0, help="J / (m r^2)")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollax.analysis.floquet import stability_data, summary, write_figure
    from rollax.models.rim import Rim

    if args.out and args.n_rho * args.n_j > POINTS_MAX:
        raise ValueError(
            f"--n-rho x --n-j = {args.n_rho} x {args.n_j} = {args.n_rho * args.n_j:,} is "
            f"not allowed: at most {POINTS_MAX:,} points (about {POINTS_MAX // 10_000} s "
            f"on 2 cores)"
        )
    rim = Rim(r=args.r, a=args.a, R=args.R, j=args.j)
    summ = summary(rim)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        data = stability_data(args.n_rho, args.n_j, args.j_max)
        write_figure(data, summ, float(rim.a / rim.R), args.out, rim=rim)
        summ["map"] = {
            "n_rho": args.n_rho,
            "n_j": args.n_j,
            "stable_fraction": float(np.mean(data["stable"])),
        }
        with open(os.path.join(args.out, "floquet_summary.json"), "w") as f:
            dump(summ, f, indent=2)
    print(dumps(summ, indent=2))
    return 0
