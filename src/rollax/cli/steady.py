"""``rollax steady``: steady motions of the ball on the rim (Sect. 3), Figs. 3, 5, 6, 7, 8.

rollax steady --summary [--r R --a A --R R --j J --mu MU --g G]
rollax steady --figure 3|5|6|7|8 --out DIR [--v-throw 10]
"""

from __future__ import annotations

import os

from rollax.cli._args import POSITIVE, dumps, real

FIGURES = (3, 5, 6, 7, 8)  # rollax.analysis.steady.FIGURES (not imported here: --help stays light)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "steady",
        help="steady motions of the ball on the rim: stability, slipping, energy (Figs. 3-8)",
        description="Steady motions (46)-(48) of the basketball rolling on the rim, their "
        "stability (54), slip/fall (56)-(57) and energy (59) limits, and the smallest throw "
        "speed of the realisable regions A, B, C (Sect. 3).",
    )
    p.add_argument(
        "--summary",
        action="store_true",
        help="print beta_star, beta_hat, beta_tilde, v_min_A/B/C as JSON",
    )
    p.add_argument("--json", action="store_true", help="same as --summary")
    p.add_argument(
        "--figure",
        type=int,
        action="append",
        choices=FIGURES,
        help="figure of the paper to regenerate (repeatable)",
    )
    p.add_argument("--out", help="output directory for figures (PNG) and data (npz/json)")
    p.add_argument("--r", type=POSITIVE, default=0.12, help="ball radius [m]")
    p.add_argument("--a", type=POSITIVE, default=0.01, help="rim tube radius [m]")
    p.add_argument("--R", type=POSITIVE, default=0.225, help="rim major radius [m]")
    p.add_argument("--j", type=POSITIVE, default=2.0 / 3.0, help="J / (m r^2)")
    p.add_argument("--g", type=POSITIVE, default=9.81, help="gravity [m/s^2]")
    p.add_argument(
        "--mu", type=real(0.0, lo_open=True, inf=True), default=1.0, help="friction coefficient"
    )
    p.add_argument("--v-throw", type=POSITIVE, default=10.0, help="throw speed of Figs. 7-8 [m/s]")
    p.add_argument(
        "--w3-max", type=POSITIVE, default=60.0, help="|omega30| range of the plots [1/s]"
    )
    p.set_defaults(func=run)


def _rim(args):
    from rollax.models.rim import Rim

    return Rim(r=args.r, a=args.a, R=args.R, j=args.j, g=args.g, mu=args.mu)


def run(args) -> int:
    rim = _rim(args)
    if args.figure and not args.out:
        raise ValueError("--figure needs --out DIR")
    if not (args.summary or args.json or args.figure):
        raise ValueError("nothing to do: give --summary and/or --figure N --out DIR")
    out = {}
    if args.summary or args.json:
        from rollax.analysis.steady import summary

        out = summary(rim)
        out["parameters"] = _params(rim)
        out["units"] = _UNITS
        print(dumps(out, indent=2))
    if args.figure:
        from rollax.analysis.steady import write_figure

        os.makedirs(args.out, exist_ok=True)
        for n in args.figure:
            written = write_figure(n, rim, args.out, v_throw=args.v_throw, w3_max=args.w3_max)
            print(f"wrote {written} and its data (.npz)")
    return 0


#: the units of --summary's numbers (a key of a nested mapping: dotted, * for each region)
_UNITS = {
    "beta_star": "rad",
    "beta_hat": "rad",
    "beta_tilde": "rad",
    "v_min_*": "m/s",
    "minimum_*.beta0": "rad",
    "minimum_*.omega30": "1/s",
    "minimum_*.omega20": "1/s",
    "parameters.r": "m",
    "parameters.a": "m",
    "parameters.R": "m",
    "parameters.j": "1",
    "parameters.g": "m/s^2",
    "parameters.mu": "1",
}


def _params(rim) -> dict:
    return {k: float(getattr(rim, k)) for k in ("r", "a", "R", "j", "g", "mu")}
