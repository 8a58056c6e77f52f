"""``rollax robot disk|ball|ball-detach``: the examples of Putkaradze & Rogers, *On the normal
force and static friction acting on a rolling ball actuated by internal point masses*.

Prints ``mu_hat`` (1.3), ``t_mu_hat``, ``min_N`` (with ``t_min_N``) and, for ``ball-detach``,
``t_detach`` (N = 0) and the outcome of the free flight (Appendix B). ``--out DIR`` writes the
figures of Figs. 5.3-5.4, 6.2-6.3 or 6.4 with their data.
"""

from __future__ import annotations

import json
import math

import jax.numpy as jnp


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "robot",
        help="rolling ball/disk robots actuated by internal masses (mu_hat, N, detachment)",
        description=__doc__,
    )
    p.add_argument("example", choices=("disk", "ball", "ball-detach"),
                   help="disk: Sect. 5; ball: Sect. 6; ball-detach: Sect. 6 with m3 = 60")
    p.add_argument("--rtol", type=float, default=None, help="tolerance (default: the paper's)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", default=None, help="write figures (PNG) and data (npz, json) here")
    p.set_defaults(func=run)


def _f(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def run(args) -> int:
    from rollax.robot import contact_extrema, detach, fly, paper_ball, paper_disk, simulate
    from rollax.robot.trajectory import quaternion_drift

    if args.rtol is not None and not (0.0 < args.rtol < 1.0):
        raise ValueError(f"rtol = {args.rtol!r} is outside the allowed range (0, 1)")
    ex = paper_disk() if args.example == "disk" else paper_ball(heavy=args.example == "ball-detach")
    tol = ex.rtol if args.rtol is None else args.rtol
    res: dict = {"example": args.example, "rtol": tol, "atol": tol}
    if args.example == "ball-detach":
        end = detach(ex.model, ex.control, ex.y0, ex.t1, rtol=tol, atol=tol)
        t_d = float(end.t) if bool(end.hit) else None
        res["t_detach"] = t_d
        res["t_detach_paper"] = 3.7358
        t_stop = t_d if t_d is not None else ex.t1
        N_d, F_d = ex.model.contact_forces(end.t, end.y, ex.control)
        res["N_at_detach"] = _f(N_d)
        res["f_s_at_detach"] = _f(jnp.linalg.norm(F_d))
        if t_d is not None:
            flight, lifts, _ = fly(ex.model, ex.control, end.y, end.t, end.t + 10.0, rtol=tol, atol=tol)
            res["lifts_off"] = bool(lifts)
            res["t_touchdown"] = float(flight.t) if bool(lifts) and bool(flight.hit) else None
    else:
        t_stop = ex.t1
    # the rolling motion on [0, t1]; for ball-detach its extrema are taken on [0, t_detach]
    traj = simulate(ex.model, ex.control, ex.y0, ex.t1, rtol=tol, atol=tol)
    mu, t_mu, min_n, t_n = contact_extrema(traj, t_stop)
    if args.example == "ball-detach":
        # f_s/N diverges as N -> 0 at detachment: no finite mu_hat on [0, t_detach]
        res.update(mu_hat=None, t_mu_hat=None)
    else:
        res.update(mu_hat=_f(mu), t_mu_hat=_f(t_mu),
                   mu_hat_paper=0.2951 if args.example == "disk" else 0.19)
    res.update(min_N=_f(min_n), t_min_N=_f(t_n), t_end=float(t_stop))
    if args.example != "disk":
        res["quaternion_drift"] = _f(quaternion_drift(traj))  # over [0, t1]
    if args.out:
        import os

        from rollax.robot.figures import write_figures

        res["figures"] = write_figures(traj, args.out, args.example, t_stop)
        with open(os.path.join(args.out, f"{args.example}.json"), "w") as fh:
            json.dump(res, fh, indent=2)
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")
    return 0
