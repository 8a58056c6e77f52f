"""``rollax penny``: the bouncing-penny billiard (Clark & Bloch, Sect. VI).

``rollax penny [run] --table circle|ellipse --impact elastic|plastic --impacts N [--json] [--out DIR]``
prints the impact times, post-impact states and energies (Figs. 1-4 with ``--out``);
``rollax penny chaos --out DIR`` writes Fig. 5 (an ensemble of initial conditions perturbed by
less than 0.005 in theta_dot and phi_dot, at several times) and finite-time Lyapunov exponents
of the impact map for elastic and plastic impacts on both tables. ``chaos`` takes about 2.5
minutes on a 2-core CPU (147 s measured for the defaults, compiles included), with a progress
bar; ``run`` a few seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from rollax.cli._args import FINITE, POSITIVE, check_out, dump, dumps, integer, real


_MODE_TEXT = {
    "run": "rollax penny run: one impact sequence of the penny on a table (Figs. 1-4 with "
    "--out); a few seconds.",
    "chaos": "rollax penny chaos: Fig. 5 (an ensemble of starts perturbed by less than 0.005 "
    "in theta_dot and phi_dot) and finite-time Lyapunov exponents, for elastic and plastic "
    "impacts on both tables; about 2.5 minutes on a 2-core CPU, with a progress bar.",
}


class _ModeHelp(argparse.Action):
    """``--help``: the help of the mode given before it (``rollax penny chaos --help`` lists
    chaos's options only), else the whole command's."""

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        mode = getattr(namespace, "mode", None)
        if mode not in _MODE_TEXT:
            parser.print_help()
            parser.exit()
        other = _CHAOS_ONLY if mode == "run" else _RUN_ONLY
        sub = argparse.ArgumentParser(
            prog=f"{parser.prog} {mode}", description=_MODE_TEXT[mode], add_help=False
        )
        for a in parser._actions:
            if a.option_strings and a.dest not in other:
                sub._add_action(a)
        sub.print_help()
        parser.exit()


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "penny",
        help="rolling-penny billiard with nonholonomic impacts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    p.add_argument(
        "-h", "--help", action=_ModeHelp, help="show this help (after run or chaos: its own)"
    )
    p.add_argument(
        "mode",
        nargs="?",
        choices=("run", "chaos"),
        default=None,
        help="run: one impact sequence (default; seconds); chaos: Fig. 5 and FTLEs "
        "(about 2.5 min on 2 CPU cores)",
    )
    p.add_argument(
        "--table",
        choices=("circle", "ellipse"),
        default="ellipse",
        help="table of Table I: ellipse a=0.15, b=0.20 or circle of radius 0.20 (m)",
    )
    p.add_argument(
        "--impact",
        choices=("elastic", "plastic", "restitution"),
        default="elastic",
        help="impact law: elastic (15)-(17), plastic (18)-(21) or restitution (--e)",
    )
    p.add_argument(
        "--e",
        type=real(0.0, 1.0),
        default=1.0,
        help="coefficient of restitution for --impact restitution",
    )
    p.add_argument(
        "--impacts", type=integer(1, 10_000), default=20, help="number of impacts N (default 20)"
    )
    p.add_argument("--theta-dot", type=FINITE, default=10.0, help="initial theta_dot (rad/s)")
    p.add_argument("--phi-dot", type=FINITE, default=0.2, help="initial phi_dot (rad/s)")
    p.add_argument("--phi", type=FINITE, default=math.pi / 2, help="initial heading phi (rad)")
    p.add_argument(
        "--glancing-tol",
        type=POSITIVE,
        default=1e-6,
        help="normal approach (metric cosine) below which an impact counts as glancing",
    )
    p.add_argument(
        "--samples",
        type=integer(1, 1_000_000),
        default=100,
        help="chaos: number of perturbed initial conditions",
    )
    p.add_argument(
        "--seed",
        type=integer(0, 2**32 - 1),
        default=0,
        help="chaos: random seed of the perturbations",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="chaos: no progress bar (it goes to stderr: eight batches, the first "
        "of each kind compiling, minutes on a CPU)",
    )
    p.add_argument("--json", action="store_true", help="print JSON to stdout")
    p.add_argument("--out", metavar="DIR", help="write figures (PNG) and data (json) to DIR")
    p.set_defaults(func=run)
    _DEFAULTS.update({a.dest: a.default for a in p._actions})


_DEFAULTS: dict = {}


# options each mode alone reads: dest -> option
_RUN_ONLY = {
    "table": "--table",
    "impact": "--impact",
    "e": "--e",
    "impacts": "--impacts",
    "theta_dot": "--theta-dot",
    "phi_dot": "--phi-dot",
    "phi": "--phi",
}
_CHAOS_ONLY = {"samples": "--samples", "seed": "--seed", "no_progress": "--no-progress"}


def _check(args) -> None:
    # an option of the other mode is refused, not ignored (`penny chaos --impacts 6` once ran
    # its fixed cases with 100 impacts and exit 0)
    other = _RUN_ONLY if args.mode == "chaos" else _CHAOS_ONLY
    given = [opt for dest, opt in other.items() if getattr(args, dest) != _DEFAULTS[dest]]
    if given:
        which = "run" if args.mode == "chaos" else "chaos"
        what = (
            "chaos runs the fixed cases of Fig. 5 (both tables, elastic and plastic)"
            if args.mode == "chaos"
            else "run simulates one impact sequence"
        )
        raise ValueError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to "
            f"`rollax penny {which}` only; {what}"
        )
    if args.e != _DEFAULTS["e"] and args.impact != "restitution":
        raise ValueError(
            f"--e = {args.e:g} is not allowed with --impact {args.impact}: it is the "
            f"coefficient of restitution of --impact restitution"
        )
    if args.impacts < 1:
        raise ValueError(f"--impacts = {args.impacts} must be >= 1")
    if args.samples < 1:
        raise ValueError(f"--samples = {args.samples} must be >= 1")
    if not 0.0 <= args.e <= 1.0:
        raise ValueError(f"--e = {args.e} is outside the allowed range [0.0, 1.0]")


def run(args) -> int:
    _check(args)
    check_out(args.out)
    if args.mode == "chaos":
        if not args.out and not args.json:
            raise ValueError("chaos mode needs --out DIR and/or --json")
        from rollax.analysis.penny import chaos

        res = chaos(
            n_samples=args.samples,
            seed=args.seed,
            glancing_tol=args.glancing_tol,
            progress=not args.no_progress,
        )
        result = res.summary
        if args.out:
            from rollax.plot import plot_penny_chaos

            plot_penny_chaos(res, args.out)
            with open(os.path.join(args.out, "ftle.json"), "w") as fh:
                dump(result, fh, indent=1)
        if args.json:
            print(dumps(result, indent=1))
        else:
            _print_ftle(result)
        return 0

    from rollax.analysis.penny import paper_billiard, sequence_records, simulate

    b = paper_billiard(args.table, args.impact, args.e, args.glancing_tol)
    s0 = b.penny.state(phi=args.phi, theta_dot=args.theta_dot, phi_dot=args.phi_dot)
    seq = simulate(b, s0, args.impacts)
    out = {"table": args.table, "impact": args.impact, **sequence_records(b, s0, seq)}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        name = f"penny_{args.table}_{args.impact}"
        with open(os.path.join(args.out, name + ".json"), "w") as fh:
            dump(out, fh, indent=1)
        from rollax.plot import plot_penny_sequence

        plot_penny_sequence(
            b,
            s0,
            b.path(s0, seq, 60),
            seq.pre_states,
            os.path.join(args.out, name + ".png"),
            f"{args.impact} impacts, {args.table} table: first {args.impacts}",
        )
    if args.json:
        print(dumps(out, indent=1))
    else:
        print(
            f"{'k':>3} {'time':>12} {'end':>5} {'theta_dot':>11} {'phi_dot':>11} {'energy':>12}  status"
        )
        for r in out["impacts"]:
            t = "nan" if r["time"] is None else f"{r['time']:.9f}"
            st = r["state"]
            f = lambda v: "nan" if v is None else f"{v:.6g}"  # noqa: E731
            print(
                f"{r['index']:>3} {t:>12} {str(r['end']):>5} {f(st['theta_dot']):>11} "
                f"{f(st['phi_dot']):>11} {f(r['energy']):>12}  {r['status']}"
            )
    return 0


def _print_ftle(result: dict) -> None:
    print(
        f"{'case':>16} {'FTLE/impact':>12} {'FTLE/s':>10} {'used':>5} {'ensemble mean':>14} {'std':>8}"
    )
    for name, c in result["cases"].items():
        print(
            f"{name:>16} {c['ftle_per_impact_nominal']:>12.4f} {c['ftle_per_second_nominal']:>10.4f} "
            f"{c['impacts_used_nominal']:>5d} {c['ftle_per_impact_ensemble_mean']:>14.4f} "
            f"{c['ftle_per_impact_ensemble_std']:>8.4f}"
        )


if __name__ == "__main__":  # pragma: no cover
    from rollax.cli import main

    sys.exit(main(["penny", *sys.argv[1:]]))
