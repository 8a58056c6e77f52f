"""``rollax robot disk|ball|ball-detach|optimize``: the robots of Putkaradze & Rogers, *On the
normal force and static friction acting on a rolling ball actuated by internal point masses*.

``disk``, ``ball``, ``ball-detach``: the paper's examples. Prints ``mu_hat`` (1.3),
``t_mu_hat``, ``min_N`` (with ``t_min_N``) and, for ``ball-detach``, ``t_detach`` (N = 0) and
the outcome of the free flight (Appendix B). ``--out DIR`` writes the figures of Figs.
5.3-5.4, 6.2-6.3 or 6.4 with their data. The JSON's ``units`` block gives each number's unit
(the paper's: r = g = 1, masses in one unit mass m; times in sqrt(r/g), forces in m g).

``optimize``: the optimal rest-to-rest manoeuvre of the Sect. 5 disk (``--body disk --phi-T
PHI``) or the Sect. 6 ball (``--body ball --target X Y [--heading PSI]``) in time ``--T`` with
``N >= --n-min`` and ``|f_s| <= --mu N``, for ``--cost``: ``effort`` (``int sum u_i^2 dt``),
``energy`` (``int sum m_i |v_i|^2 dt``, ``v_i`` the masses' velocities relative to the body)
or ``time`` (the least T, ``--T`` the first guess; see ``rollax.robot.optimize``);
``--least-mu``: the least mu instead. ``--starts N`` runs N initial guesses side by side.
``--out DIR`` writes ``optimize.json`` (``t``, ``theta``, ``theta_dot``, ``theta_ddot`` on
``--points`` uniform times, the cost and its kind, the final state, min N, max |f_s|/N, the
convergence report, the distinct local optima the starts reached) and PNGs. Units: r = g = 1.
``--time-limit S`` stops the SQP after S seconds at the best point so far (status ``not
converged``).

Robust control (``rollax.analysis.robot.robust``): ``--uncertain mu=0.15:0.25 masses=2%``
requires the contact for ``--samples`` parameter sets of that box (default 16), then searches
for the worst set and solves again while it breaks a constraint (or, with ``--probability
P``, a CVaR chance constraint on the samples); the robust and the nominal controls are then
run under ``--validate N`` fresh samples (default 10000) and their failure rates printed
with 95 % upper bounds, beside the robust cost's price over the nominal one.

Before any solve, the necessary conditions of ``rollax.analysis.robot.feasibility`` are
checked (in milliseconds, nothing compiled): ``--n-min`` at most the weight M g (5 for the
disk, 4 for the ball), the friction impulse bound (the travel in ``--T`` needs ``--mu`` at
least a bound; for ``--cost time``, a T within 4 times ``--T``). A request that fails one is
answered at once with status ``infeasible`` and the bound with its numbers in ``message``
(e.g. ``needs mu >= 0.555 for phi_T = -6.2832 in T = 6``; ``optimize.json`` then holds that
summary, no figures).

Exit codes: 0 converged; 1 infeasible (by a necessary condition or by the SQP) or not
converged (iteration or time limit); 2 a bad option.
"""

from __future__ import annotations

import math
from typing import Any

from rollax.cli._args import POSITIVE, TOLERANCE, check_out, dump, dumps, integer, real


_EXAMPLES = {
    "disk": "the Sect. 5 disk (Figs. 5.3-5.4): mu_hat, min N",
    "ball": "the Sect. 6 ball (Figs. 6.2-6.3): mu_hat, min N",
    "ball-detach": "the Sect. 6 ball with m3 = 60 (Fig. 6.4): detachment, then free flight",
}


def register(subparsers) -> None:
    import argparse

    p = subparsers.add_parser(
        "robot",
        help="rolling ball/disk robots actuated by internal masses (mu_hat, N, detachment)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # the options every sub-command takes
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--rtol", type=TOLERANCE, default=None, help="tolerance (default: the paper's)"
    )
    common.add_argument("--json", action="store_true", help="print the results as JSON")
    common.add_argument("--out", default=None, help="write figures (PNG) and data (npz, json) here")
    sub = p.add_subparsers(dest="example", metavar="{disk,ball,ball-detach,optimize}")
    sub.required = True
    for name, what in _EXAMPLES.items():
        e = sub.add_parser(
            name,
            parents=[common],
            help=what,
            description=f"rollax robot {name}: {what}, as published (about 1-5 s).",
        )
        e.set_defaults(func=run)
        # optimize's options, hidden: given to an example they are refused by name (run)
        _optimize_options(e, hidden=True)
    o = sub.add_parser(
        "optimize",
        parents=[common],
        help="an optimal rest-to-rest manoeuvre (--body, --T, --mu, --n-min, ...)",
        description="rollax robot optimize: the optimal rest-to-rest manoeuvre of the Sect. 5 "
        "disk or the Sect. 6 ball with N >= --n-min and |f_s| <= --mu N (a few minutes on "
        "a 2-core CPU for the defaults; progress lines with the time so far).",
    )
    o.set_defaults(func=optimize)
    _optimize_options(o, hidden=False)


def _optimize_options(p, hidden: bool) -> None:
    """The options of ``rollax robot optimize`` (on an example's parser: ``hidden``, so that
    its help lists its own options only while a given one is refused by name)."""
    import argparse

    def h(text):
        return argparse.SUPPRESS if hidden else text

    before = {id(a) for a in p._actions}
    p.add_argument("--body", choices=("disk", "ball"), default="disk", help=h("the robot"))
    p.add_argument(
        "--phi-T",
        type=real(),
        default=-math.pi,
        help=h("disk: final rotation angle phi(T) [rad] (default -pi)"),
    )
    p.add_argument(
        "--target",
        type=real(),
        nargs=2,
        metavar=("X", "Y"),
        default=(1.0, 0.5),
        help=h("ball: final contact point [r] (default 1 0.5)"),
    )
    p.add_argument(
        "--heading",
        type=real(),
        default=None,
        help=h("ball: final heading of the body axis E1 [rad] (default: free)"),
    )
    p.add_argument(
        "--T",
        type=POSITIVE,
        default=8.0,
        help=h("duration, in the model's time units (r = g = 1; default 8)"),
    )
    p.add_argument(
        "--mu",
        type=real(0.0, inf=True),
        default=None,  # (None: not given; refused with --least-mu, 0.3 otherwise)
        help=h("friction coefficient, |f_s| <= mu N (default 0.3; inf: none)"),
    )
    p.add_argument(
        "--n-min",
        type=real(inf=True),
        default=0.5,
        help=h("least normal force [m g] (default 0.5; -inf: none)"),
    )
    p.add_argument(
        "--slope",
        type=real(),
        nargs="+",
        metavar="S",
        default=None,
        help=h(
            "the floor's slope, rise over run: disk one number (along its plane), ball two "
            "(along x and y) (default level)"
        ),
    )
    p.add_argument(
        "--knots",
        type=integer(2, 512),
        default=16,
        help=h("spline intervals of each mass acceleration (default 16)"),
    )
    p.add_argument(
        "--starts", type=integer(1, 4096), default=1, help=h("initial guesses (default 1)")
    )
    p.add_argument(
        "--cost",
        choices=("effort", "energy", "time"),
        default="effort",
        help=h(
            "what to minimise: effort (int sum u^2 dt, default), energy (int sum "
            "m_i |v_i|^2 dt) or time (T; --T is the first guess)"
        ),
    )
    p.add_argument(
        "--least-mu",
        action="store_true",
        help=h("find the least mu with which the manoeuvre is feasible"),
    )
    p.add_argument(
        "--time-limit",
        type=POSITIVE,
        default=None,
        help=h(
            "seconds after which the SQP stops at the best point so far, status 'not "
            "converged' (default: none)"
        ),
    )
    p.add_argument(
        "--points",
        type=integer(1001, 10**6),
        default=1001,
        help=h("uniform times of [0, T] in optimize.json, in [1001, 1000000] (default 1001)"),
    )
    p.add_argument(
        "--uncertain",
        nargs="+",
        metavar="NAME=SIZE",
        default=None,
        help=h(
            "robust control over uncertain parameters: mu=0.15:0.25 (a range), masses=2%% "
            "(each within +-2 %%), mu=normal:10%% (normal, sd 10 %%, cut at 3 sd), rails=1%%, "
            "m0=..., inertia=..., radius=..., slope=-0.02:0.02 (a range only)"
        ),
    )
    p.add_argument(
        "--samples",
        type=integer(1, 4096),
        default=None,
        help=h("parameter samples the robust control is optimised over (default 16)"),
    )
    p.add_argument(
        "--probability",
        type=real(0.0, 1.0),
        default=None,
        help=h(
            "robust: hold the contact constraints with this probability on the samples (a "
            "CVaR chance constraint; default: for every sample, then a worst-case search)"
        ),
    )
    p.add_argument(
        "--validate",
        type=integer(1, 10**7),
        default=None,
        metavar="N",
        help=h("robust: count the failures on N fresh samples (default 10000 with --uncertain)"),
    )

    if not hidden:
        _OPTIMIZE_ONLY.update(
            {a.dest: (a.option_strings[0], a.default) for a in p._actions if id(a) not in before}
        )


def _uncertain(args) -> dict | None:
    """``--uncertain name=size ...`` as optimize's ``uncertain`` (``lo:hi`` a range, ``2%``
    or ``0.02`` a relative size, ``normal:5%`` a normal distribution); the robust options
    without it are refused."""
    if args.uncertain is None:
        for opt in ("samples", "probability", "validate"):
            if getattr(args, opt) is not None:
                raise ValueError(f"--{opt} applies with --uncertain only (robust control)")
        return None
    if args.least_mu and args.probability is not None:
        raise ValueError(
            "--probability is not allowed with --least-mu: the robust least mu holds for "
            "every sample"
        )
    out: dict = {}
    for token in args.uncertain:
        name, eq, size = token.partition("=")
        if not eq or not name or not size:
            raise ValueError(
                f"--uncertain {token!r} is not allowed: give NAME=SIZE, e.g. mu=0.15:0.25 or "
                "masses=2%"
            )
        if size.lower().startswith("normal:"):
            out[name] = size  # a normal distribution (parameter_box reads it)
        elif ":" in size:
            lo, _, hi = size.partition(":")
            try:
                out[name] = (float(lo), float(hi))
            except ValueError:
                raise ValueError(
                    f"--uncertain {token!r} is not allowed: a range is LO:HI (two numbers)"
                ) from None
        else:
            out[name] = size
    return out


# dest -> (option, default) of the options that only `rollax robot optimize` reads
_OPTIMIZE_ONLY: dict = {}


def optimize(args) -> int:
    import os

    check_out(args.out)

    from rollax.robot import ball_manoeuvre, disk_manoeuvre, least_mu, optimize

    if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out = {args.out!r} is a file; it must be a directory")
    # an option of the other body is refused, not dropped (a new-user review)
    other = ("target", "heading") if args.body == "disk" else ("phi_T",)
    given = [_OPTIMIZE_ONLY[d][0] for d in other if getattr(args, d) != _OPTIMIZE_ONLY[d][1]]
    if given:
        body = "ball" if args.body == "disk" else "disk"
        raise ValueError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to --body "
            f"{body} only; --body {args.body} "
            + ("ends at the rotation --phi-T" if args.body == "disk" else "ends at --target")
        )
    uncertain = _uncertain(args)
    mu = 0.3 if args.mu is None else args.mu
    want = 1 if args.body == "disk" else 2
    if args.slope is not None and len(args.slope) != want:
        raise ValueError(
            f"--slope {' '.join(f'{s:g}' for s in args.slope)} is not allowed: --body "
            f"{args.body} takes {'one number' if want == 1 else 'two numbers, S1 S2'}"
        )
    slope = [0.0] * want if args.slope is None else list(args.slope)
    if args.body == "disk":
        man = disk_manoeuvre(phi_T=args.phi_T, T=args.T, mu=mu, n_min=args.n_min, slope=slope[0])
    else:
        target = tuple(args.target) + (() if args.heading is None else (args.heading,))
        man = ball_manoeuvre(target=target, T=args.T, mu=mu, n_min=args.n_min, slope=tuple(slope))
    if args.least_mu:
        if args.mu is not None:
            raise ValueError(
                f"--mu = {args.mu:g} is not allowed with --least-mu: the least mu is the "
                "answer, not an input (leave --mu out)"
            )
        if args.cost != "effort":
            raise ValueError(
                f"--cost = {args.cost} is not allowed with --least-mu: the least mu "
                "is found with the effort regularisation (use --cost effort)"
            )
        robust: dict[str, Any] = {}
        if uncertain is not None:
            robust = dict(uncertain=uncertain, samples=args.samples or 16)
        opt = least_mu(
            man,
            knots=args.knots,
            starts=args.starts,
            progress=not args.json,
            time_limit=args.time_limit,
            **robust,
        )
    else:
        robust = {}
        if uncertain is not None:
            robust = dict(
                uncertain=uncertain, samples=args.samples or 16, probability=args.probability
            )
        opt = optimize(
            man,
            cost=args.cost,
            knots=args.knots,
            starts=args.starts,
            progress=not args.json,
            time_limit=args.time_limit,
            **robust,
        )
    if opt.status == "infeasible" and opt.iterations == 0:
        return _refused(args, opt)
    res = opt.to_dict(args.points)
    if uncertain is not None and opt.robust is not None:
        from rollax.robot import validate

        # fresh samples (seed 1; the optimisation drew with seed 0), for both controls
        fresh = 10_000 if args.validate is None else args.validate
        box = opt.robust["box_object"]
        res["validation"] = {
            "robust": validate(opt, box, n=fresh, seed=1).to_dict(),
            "nominal": validate(opt.robust["nominal"], box, n=fresh, seed=1).to_dict(),
        }
    if args.out:
        from rollax.plot.robot import optimum_figures

        os.makedirs(args.out, exist_ok=True)
        res["figures"] = optimum_figures(res, args.out)
        with open(os.path.join(args.out, "optimize.json"), "w") as fh:
            dump(res, fh, indent=1)
    summary = {
        k: res[k]
        for k in (
            "body",
            "T",
            "target",
            "mu",
            "n_min",
            "slope",
            "knots",
            "status",
            "message",
            "cost_kind",
            "cost",
            "effort",
            "energy",
            "min_N",
            "max_friction_ratio",
            "violation",
            "kkt",
            "iterations",
            "wall_time",
        )
    }
    summary["final_state"] = res["final_state"]
    summary["optima"] = res["optima"]
    if "validation" in res:
        rob = res["robust"]
        summary["robust"] = {k: rob[k] for k in ("box", "price", "nominal_cost", "worst", "held")}
        summary["failure_rate"] = {
            k: f"{v['rate']:.4f} ({v['failures']['any']} of {v['n']}; 95 % upper bound "
            f"{v['upper']:.4f})"
            for k, v in res["validation"].items()
        }
    if args.json:
        print(dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k}: {v}")
    return 0 if opt.converged else 1


#: the units of the examples' results: the paper's, r = g = 1 and unit masses (its masses are
#: multiples of one mass m): lengths in r, times in sqrt(r/g), forces in m g
EXAMPLE_UNITS = {
    "rtol": "1",
    "atol": "1",
    "mu_hat": "1",
    "mu_hat_paper": "1",
    "t_mu_hat": "sqrt(r/g)",
    "min_N": "m*g",
    "t_min_N": "sqrt(r/g)",
    "t_end": "sqrt(r/g)",
    "t_detach": "sqrt(r/g)",
    "t_detach_paper": "sqrt(r/g)",
    "N_at_detach": "m*g",
    "f_s_at_detach": "m*g",
    "t_touchdown": "sqrt(r/g)",
    "quaternion_drift": "1",
}


def example_units(res: dict) -> dict[str, str]:
    """The ``units`` block of an example's JSON: a unit for each number in ``res``."""
    return {k: EXAMPLE_UNITS[k] for k in res if k in EXAMPLE_UNITS}


def _refused(args, opt) -> int:
    """Report a request that fails a necessary condition (no solve was run; exit 1)."""
    import os

    import numpy as np

    man = opt.manoeuvre
    summary = dict(
        body=args.body,
        T=float(man.T),
        target=[float(v) for v in man.target],
        mu=opt.mu,
        n_min=float(man.n_min),
        slope=np.asarray(man.model.slope).tolist(),
        knots=args.knots,
        status=opt.status,
        message=opt.message,
        cost_kind=opt.cost_kind,
        iterations=opt.iterations,
        wall_time=opt.wall_time,
    )
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "optimize.json"), "w") as fh:
            dump(summary, fh, indent=1)
    if args.json:
        print(dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k}: {v}")
    return 1


def run(args) -> int:
    from rollax.robot import example_report

    check_out(args.out)
    given = [
        opt
        for dest, (opt, default) in _OPTIMIZE_ONLY.items()
        if dest in vars(args) and getattr(args, dest) != default
    ]
    if given:
        raise ValueError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to "
            f"`rollax robot optimize` only; `rollax robot {args.example}` runs the "
            f"paper's example as published"
        )
    report = example_report(args.example, args.rtol)
    res = report.results
    res["units"] = example_units(res)
    if args.out:
        import os

        from rollax.plot.robot import write_figures

        res["figures"] = write_figures(report.trajectory, args.out, args.example, report.t_stop)
        with open(os.path.join(args.out, f"{args.example}.json"), "w") as fh:
            dump(res, fh, indent=2)
    if args.json:
        print(dumps(res))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")
    return 0
