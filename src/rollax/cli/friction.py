"""``rollax friction``: finite-contact friction laws, model fitting, limit directions, stop runs.

Sub-commands::

    rollax friction law --pressure uniform|hertz --eps E1 E2 ... [--json] [--out DIR]
    rollax friction fit --pressure uniform|hertz --model harmonic|pade --degree N [--json] [--out DIR]
    rollax friction limit-directions --body disc|ball --force F --degree N [--json] [--out DIR]
    rollax friction stop --body disc|ball --law exact-uniform|... [--json] [--out DIR]

``stop``'s JSON carries a ``units`` block: the friction paper's scaled units (m = R_bar = mu =
P = R = 1; times in sqrt(m R/(mu P)), the slip (u_x, u_y, rho w_z) in sqrt(mu P R/m)).
"""

from __future__ import annotations

import argparse
import os
import sys

from rollax.cli._args import (
    FINITE,
    NONNEGATIVE,
    POSITIVE,
    check_out,
    dump,
    dumps,
    integer,
    real,
)

#: rollax.models.friction.harmonic.MAX_DEGREE, written out so that ``rollax --help`` does not load the
#: friction models (and JAX); tests/cli/test_help.py holds the two equal
MAX_DEGREE = 32
_LAM = 5.0  # --lam's default (a ball's R_bar/R)


def _out_first(run):
    # --out is checked before any work (a file there was once found after a minute)
    def checked(args) -> int:
        check_out(getattr(args, "out", None))
        return run(args)

    return checked


def register(subparsers) -> None:
    p = subparsers.add_parser("friction", help="finite-contact friction laws (slip + spin)")
    sub = p.add_subparsers(dest="friction_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])

    law = sub.add_parser("law", help="normalised force Q_eps and torque T_eps (53) of an exact law")
    law.add_argument(
        "--pressure",
        choices=("uniform", "hertz"),
        default="uniform",
        help="contact pressure: uniform (57)-(60) or Hertz (61)-(63) of the friction paper (default uniform)",
    )
    law.add_argument(
        "--eps", type=NONNEGATIVE, nargs="+", required=True, help="slip-spin ratios (35), >= 0"
    )
    _common(law)
    law.set_defaults(func=_out_first(run_law))

    fit = sub.add_parser(
        "fit", help="fit a harmonic or Pade model to an exact law by gradient (optax)"
    )
    fit.add_argument(
        "--pressure",
        choices=("uniform", "hertz"),
        default="uniform",
        help="contact pressure: uniform (57)-(60) or Hertz (61)-(63) of the friction paper (default uniform)",
    )
    fit.add_argument(
        "--model",
        choices=("harmonic", "pade"),
        default="harmonic",
        help="the model fitted: harmonic or Pade (of the friction paper; default harmonic)",
    )
    fit.add_argument(
        "--degree",
        type=integer(1, MAX_DEGREE),
        default=2,
        help=f"degree N of the model, 1 to {MAX_DEGREE} (default 2)",
    )
    fit.add_argument(
        "--rho",
        choices=("kappa", "R"),
        default="kappa",
        help="the scaling length rho of the slip-spin ratio (5): kappa (39) or the "
        "contact radius R (Sect. 5.2; default kappa)",
    )
    _common(fit)
    fit.set_defaults(func=_out_first(run_fit))

    ld = sub.add_parser(
        "limit-directions", help="limit directions of the disc / ball at stick (Sect. 7.2)"
    )
    ld.add_argument(
        "--body",
        choices=("disc", "ball"),
        default="disc",
        help="the body: a disc or a ball (default disc)",
    )
    ld.add_argument("--force", type=NONNEGATIVE, default=0.0, help="F/(mu m g), >= 0")
    ld.add_argument(
        "--degree", type=integer(1, MAX_DEGREE), default=2, help="degree N of the harmonic model"
    )
    ld.add_argument("--lam", type=POSITIVE, default=_LAM, help="ball: lambda = R_bar/R")
    _common(ld)
    ld.set_defaults(func=_out_first(run_limit_directions))

    stop = sub.add_parser("stop", help="simulate a disc/ball sliding and spinning to a stop")
    stop.add_argument(
        "--body",
        choices=("disc", "ball"),
        default="disc",
        help="the body: a disc or a ball (default disc)",
    )
    stop.add_argument(
        "--law",
        default="exact-uniform",
        help=f"exact-uniform, exact-hertz, linear, harmonic-N (N in 1..{MAX_DEGREE}, e.g. "
        "harmonic-2), pade",
    )
    stop.add_argument(
        "--force",
        type=real(0.0, 1.0, hi_open=True),
        default=0.0,
        help="F/(mu m g), in [0, 1): at or above 1 the force overcomes friction and the body "
        "never stops",
    )
    stop.add_argument(
        "--u0", type=FINITE, nargs=3, default=(1.0, 0.0, 1.0), help="initial (u_x, u_y, rho w_z)"
    )
    stop.add_argument("--lam", type=POSITIVE, default=_LAM, help="ball: lambda = R_bar/R")
    _common(stop)
    stop.set_defaults(func=_out_first(run_stop))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON to stdout")
    p.add_argument("--out", default=None, help="directory for figures (PNG) and data (json)")


def _emit(args, data: dict, text: str) -> None:
    if args.json:
        print(dumps(data))
    else:
        print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"{args.friction_command}.json"), "w") as fh:
            dump(data, fh, indent=1)


# ------------------------------------------------------------------------------------- law
def run_law(args) -> int:
    from rollax.analysis.friction import law_curves, law_values

    if any(not (e >= 0) for e in args.eps):
        raise ValueError(f"--eps must be >= 0, got {args.eps}")
    law, data = law_values(args.pressure, args.eps)
    lines = [f"{'eps':>12} {'Q_eps':>20} {'T_eps':>20}"] + [
        f"{e:12.6g} {q:20.16f} {t:20.16f}" for e, q, t in zip(args.eps, data["Q"], data["T"])
    ]
    _emit(args, data, "\n".join(lines))
    if args.out:
        from rollax.plot import plot_friction_law

        plot_friction_law(law_curves(law), data, os.path.join(args.out, "law.png"))
    return 0


# ------------------------------------------------------------------------------------- fit
def run_fit(args) -> int:
    from rollax.analysis.friction import fit_curves, fit_report

    if args.degree < 1 or (args.model == "pade" and args.degree < 2):
        raise ValueError(f"--degree {args.degree}: must be >= 1 (harmonic) or >= 2 (pade)")
    law, model, data = fit_report(args.pressure, args.model, args.degree, args.rho)
    text = "\n".join(f"{k}: {v}" for k, v in data.items())
    _emit(args, data, text)
    if args.out:
        from rollax.plot import plot_friction_fit

        plot_friction_fit(
            fit_curves(law, model),
            f"{args.model} N={args.degree}",
            os.path.join(args.out, "fit.png"),
            title=f"{args.pressure} pressure, rho = {args.rho}: {args.model} model of "
            f"degree N = {args.degree} fitted to the exact law",
        )
    return 0


def _lam_for_a_ball(args) -> None:
    # refused, not dropped, for a disc (a new-user review)
    if args.body == "disc" and args.lam != _LAM:
        raise ValueError(
            f"--lam = {args.lam:g} is not allowed with --body disc: it is a ball's R_bar/R"
        )


# ------------------------------------------------------------------------ limit directions
def run_limit_directions(args) -> int:
    from rollax.analysis.friction import bifurcation_diagram, limit_direction_report

    if args.degree < 1:
        raise ValueError(f"--degree {args.degree} must be >= 1")
    if not args.force >= 0:
        raise ValueError(f"--force {args.force} must be >= 0")
    _lam_for_a_ball(args)
    body, data = limit_direction_report(args.body, args.force, args.degree, args.lam)
    lines = [
        f"{args.body}, F/(mu m g) = {args.force}, harmonic degree N = {args.degree}",
        f"bifurcations: {data['bifurcations']}",
    ]
    for d in data["limit_directions"]:
        lines.append(
            f"  w = ({d['w'][0]:+.6f}, {d['w'][1]:+.6f}, {d['w'][2]:+.6f})  eps = {d['eps']:.6g}  "
            f"{d['radial']}, {d['stability']} {d['sphere']}{' (circle)' if d['circle'] else ''}"
        )
    _emit(args, data, "\n".join(lines))
    if args.out:
        from rollax.plot import plot_bifurcations

        plot_bifurcations(
            bifurcation_diagram(body),
            f"{args.body}, harmonic N = {args.degree}",
            os.path.join(args.out, "limit_directions.png"),
        )
    return 0


# -------------------------------------------------------------------------------- stop
#: the units of ``stop``'s numbers: the friction paper's scaled units, m = R_bar = 1 for the
#: body and mu = P = R = 1 for the contact (mu P: the largest friction force), so times are
#: in sqrt(m R / (mu P)) and speeds (u_x, u_y, rho w_z) in sqrt(mu P R / m)
STOP_UNITS = {
    "force": "1",  # F / (mu m g)
    "u0": "sqrt(mu*P*R/m)",
    "t_stop": "sqrt(m*R/(mu*P))",
    "eps": "1",
    "w_stop": "1",
    "eps_limit_direction": "1",
}


def run_stop(args) -> int:
    from rollax.analysis.friction import LAW_NAMES, law_from_name, stop_curves, stop_report

    try:
        law_from_name(args.law, args.body)
    except ValueError:
        raise ValueError(f"--law {args.law!r} must be {LAW_NAMES}") from None
    if not args.force >= 0:
        raise ValueError(f"--force {args.force} must be >= 0")
    if not any(args.u0):
        raise ValueError("--u0 must be nonzero (zero slip is already stuck)")
    _lam_for_a_ball(args)
    body, x0, data = stop_report(args.body, args.law, args.force, args.u0, args.lam)
    data["units"] = {k: STOP_UNITS[k] for k in data if k in STOP_UNITS}
    text = "\n".join(f"{k}: {v}" for k, v in data.items())
    _emit(args, data, text)
    if args.out and data["stopped"]:
        from rollax.plot import plot_stop

        plot_stop(
            *stop_curves(body, x0, data["t_stop"]),
            os.path.join(args.out, "stop.png"),
            title=f"{args.body}, {args.law} law, F/(mu m g) = {args.force:g}, "
            f"u0 = ({', '.join(f'{u:g}' for u in args.u0)})",
        )
    elif args.out:
        print("no stop.png: the body did not stop (see note)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    from rollax.cli import main

    sys.exit(main(["friction", *sys.argv[1:]]))
