"""``rollax robot disk|ball|ball-detach``: the examples of Putkaradze & Rogers, *On the normal
force and static friction acting on a rolling ball actuated by internal point masses*.

Prints ``mu_hat`` (1.3), ``t_mu_hat``, ``min_N`` (with ``t_min_N``) and, for ``ball-detach``,
``t_detach`` (N = 0) and the outcome of the free flight (Appendix B). ``--out DIR`` writes the
figures of Figs. 5.3-5.4, 6.2-6.3 or 6.4 with their data.
"""

from __future__ import annotations

from rollax.cli._args import TOLERANCE, dump, dumps


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "robot",
        help="rolling ball/disk robots actuated by internal masses (mu_hat, N, detachment)",
        description=__doc__,
    )
    p.add_argument("example", choices=("disk", "ball", "ball-detach"),
                   help="disk: Sect. 5; ball: Sect. 6; ball-detach: Sect. 6 with m3 = 60")
    p.add_argument("--rtol", type=TOLERANCE, default=None, help="tolerance (default: the paper's)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", default=None, help="write figures (PNG) and data (npz, json) here")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollax.robot import example_report

    report = example_report(args.example, args.rtol)
    res = report.results
    if args.out:
        import os

        from rollax.robot.figures import write_figures

        res["figures"] = write_figures(report.trajectory, args.out, args.example, report.t_stop)
        with open(os.path.join(args.out, f"{args.example}.json"), "w") as fh:
            dump(res, fh, indent=2)
    if args.json:
        print(dumps(res))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")
    return 0
