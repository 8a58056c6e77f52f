"""Optimal rest-to-rest manoeuvres of the robots of Putkaradze & Rogers (issue 14).

1. disk/: the Sect. 5 disk (r = m0 = d2 = g = 1, four unit masses on radii 0.9, 0.6333,
   0.3667, 0.1, theta_i = -pi/2) turned by phi_T = -pi in T = 8 with mu = 0.2, N_min = 0.5
   (3 starts), and the same without the envelope (disk_free/): it breaks |f_s| <= mu N.
2. disk_T5/: the issue's case T = 5, mu = 0.3: infeasible (a momentum bound shows it:
   mu >= (pi - 0.4) / (T^2/4 + 1.6) = 0.349 is necessary), reported with the least violation.
3. ball/: the Sect. 6 ball to (x, y) = (1, 0.5) in T = 8 with mu = 0.08, N_min = 0.5 (the
   friction constraint active), and ball_free/ without the envelope.
4. least_mu.json, least_mu.png: the least mu that makes the disk manoeuvre feasible against
   T (N >= 0.5), with the momentum bound and the effort of the least-effort control at that
   mu, and the effort without the envelope.

Each case writes what ``rollax robot optimize ... --out DIR`` writes: optimize.json and PNGs.

Measured (this code, 2 shared cores): disk converged, J = 1.23941 (44 SQP iterations, 43 s);
disk_free converged, J = 0.45535 (4 s); disk_T5 infeasible, least violation 0.885 (phi(T)
misses -pi by 0.885 rad; 150 iterations, 151 s); ball converged, J = 1.68344 (500
iterations, KKT 2.1e-6, 180 s); ball_free converged, J = 1.47831 (63 s). The least-mu curve
(every point converged, KKT residual <= 3.2e-5, violation <= 2e-8; T = 10 and 12 at the
limit of LEAST_MU_ITER iterations):

    T    least mu   bound    J at least mu   J without envelope   iterations   wall
    7    0.24346    0.19795  131.98          2.3000                358         280 s
    8    0.15957    0.15577   78.91          0.4554               1104         706 s
    10   0.10482    0.10307   29.41          0.1960               1500         667 s
    12   0.07392    0.07291   25.57          0.1228               1500         530 s

T = 6.5 was not tried with this code (with 300 iterations it did not converge, 262 s).

Run: python experiments/robot_control/run.py [disk] [ball] [curve] [T5] [figures]  (all but
figures by default; figures redraws the cases' PNGs from their optimize.json). Measured:
about 44 minutes on 2 shared cores (the curve 36 minutes, the cases 7.5 minutes).
``--out DIR``: write there instead of beside this script. ``--smoke``: everything (figures
included) with a few SQP iterations each and one T on the curve, for
tests/test_scripts_smoke.py.
"""

import argparse
import json
import math
import os

import numpy as np

from rollax.robot import ball_manoeuvre, disk_manoeuvre, least_mu, optimize
from rollax.plot.robot import optimum_figures

HERE = os.path.dirname(os.path.abspath(__file__))
#: SQP iterations allowed to each least-mu solve (docstring: its convergence is slow).
LEAST_MU_ITER = 1500
#: --smoke: SQP iterations of every solve, and the sample points of the written results
SMOKE_ITER, SMOKE_SAMPLES = 2, 101
CASES = ("disk", "ball", "curve", "T5", "figures")


def case(name, opt, folder=HERE, samples=1001):
    res = opt.to_dict(samples)
    out = os.path.join(folder, name)
    os.makedirs(out, exist_ok=True)
    res["figures"] = [os.path.basename(f) for f in optimum_figures(res, out)]
    with open(os.path.join(out, "optimize.json"), "w") as fh:
        json.dump(_plain(res), fh, indent=1)
    print(
        f"{name}: {res['status']}, J = {res['cost']:.6g}, min N = {res['min_N']:.4f}, "
        f"max |f_s|/N = {res['max_friction_ratio']:.4f}, violation = {res['violation']:.2e}, "
        f"kkt = {res['kkt']:.1e}, {res['iterations']} iterations, {res['wall_time']:.1f} s",
        flush=True,
    )
    return res


def _plain(x):
    """JSON without NaN/Infinity (strict parsers refuse them): non-finite numbers -> null."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (str, bool)) or x is None:
        return x
    a = np.asarray(x)
    if a.dtype.kind in "fiu":
        if a.ndim:
            return [_plain(v) for v in a.tolist()]
        v = a.item()
        return v if math.isfinite(v) else None
    if a.dtype.kind == "b":
        return a.tolist()
    return str(x)


def bound(T):
    return (math.pi - 0.4) / (T**2 / 4 + 1.6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="*", help=f"of {', '.join(CASES)}; default: all but figures")
    ap.add_argument(
        "--out", default=HERE, help="folder to write into (default: beside this script)"
    )
    ap.add_argument("--smoke", action="store_true", help="a few iterations each (the smoke test)")
    args = ap.parse_args()
    if set(args.which) - set(CASES):  # (argparse's choices refuses an empty list in 3.11)
        ap.error(f"unknown: {' '.join(sorted(set(args.which) - set(CASES)))}")
    which = args.which or (list(CASES) if args.smoke else ["disk", "ball", "curve", "T5"])
    folder = args.out
    os.makedirs(folder, exist_ok=True)
    # --smoke: every solve stops after SMOKE_ITER iterations
    it = (lambda _: SMOKE_ITER) if args.smoke else (lambda max_iter: max_iter)
    samples = SMOKE_SAMPLES if args.smoke else 1001

    def case_(name, opt):
        return case(name, opt, folder, samples)

    if "disk" in which:
        case_(
            "disk", optimize(disk_manoeuvre(T=8.0, mu=0.2, n_min=0.5), starts=3, max_iter=it(500))
        )
        case_(
            "disk_free",
            optimize(disk_manoeuvre(T=8.0, mu=math.inf, n_min=-math.inf), max_iter=it(500)),
        )
    if "ball" in which:
        case_(
            "ball",
            optimize(
                ball_manoeuvre(target=(1.0, 0.5), T=8.0, mu=0.08, n_min=0.5),
                knots=12,
                max_iter=it(500),
            ),
        )
        case_(
            "ball_free",
            optimize(
                ball_manoeuvre(target=(1.0, 0.5), T=8.0, mu=math.inf, n_min=-math.inf),
                knots=12,
                max_iter=it(500),
            ),
        )
    if "curve" in which:
        rows = []
        for T in (8.0,) if args.smoke else (7.0, 8.0, 10.0, 12.0):
            lm = least_mu(disk_manoeuvre(T=T, n_min=0.5), max_iter=it(LEAST_MU_ITER))
            free = optimize(disk_manoeuvre(T=T, mu=math.inf, n_min=-math.inf), max_iter=it(500))
            s = lm.sample()
            rows.append(
                dict(
                    T=T,
                    least_mu=lm.mu,
                    status=lm.status,
                    cost_at_least_mu=lm.cost,
                    max_ratio=float(s["ratio"].max()),
                    min_N=float(s["N"].min()),
                    violation=lm.violation,
                    kkt=lm.kkt,
                    iterations=lm.iterations,
                    message=lm.message,
                    bound=bound(T),
                    cost_free=free.cost,
                    free_status=free.status,
                    wall_time=lm.wall_time + free.wall_time,
                )
            )
            print(rows[-1], flush=True)
        with open(os.path.join(folder, "least_mu.json"), "w") as fh:
            json.dump(
                _plain(
                    dict(
                        body="disk (Sect. 5)",
                        phi_T=-math.pi,
                        n_min=0.5,
                        knots=16,
                        n_grid=201,
                        max_iter=it(LEAST_MU_ITER),
                        rows=rows,
                    )
                ),
                fh,
                indent=1,
            )
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        Ts = [r["T"] for r in rows]
        ok = [r["status"] == "converged" for r in rows]
        ax.plot(Ts, [r["least_mu"] for r in rows], "o-", label="least mu (rollax)")
        ax.plot(
            [t for t, k in zip(Ts, ok) if not k],
            [r["least_mu"] for r, k in zip(rows, ok) if not k],
            "rx",
            label="not converged",
        )
        tt = np.linspace(min(Ts), max(Ts), 100)
        ax.plot(tt, [bound(t) for t in tt], "k--", lw=0.8, label="momentum bound (necessary)")
        ax.set_xlabel("T [s]")
        ax.set_ylabel("least mu")
        ax2 = ax.twinx()
        ax2.semilogy(Ts, [r["cost_at_least_mu"] for r in rows], "C1s:", label="J at least mu")
        ax2.semilogy(Ts, [r["cost_free"] for r in rows], "C2^:", label="J without envelope")
        ax2.set_ylabel("effort J = int sum u^2 dt [rad^2/s^3]")
        ax.legend(loc="upper right", fontsize=7)
        ax2.legend(loc="center right", fontsize=7)
        ax.set_title(
            "least mu of the Sect. 5 disk turned by -pi rest-to-rest in T, N >= 0.5\n"
            "(r = m0 = d2 = g = 1, 4 unit masses; K = 16 knots, 201 grid times; "
            "bound: (pi - 0.4)/(T^2/4 + 1.6))",
            fontsize=7,
        )
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "least_mu.png"), dpi=120)
    if "T5" in which:
        case_("disk_T5", optimize(disk_manoeuvre(T=5.0, mu=0.3, n_min=0.5), max_iter=it(150)))
    if "figures" in which:  # redraw the cases' PNGs from their optimize.json
        for name in ("disk", "disk_free", "disk_T5", "ball", "ball_free"):
            with open(os.path.join(folder, name, "optimize.json")) as fh:
                res = json.load(fh)
            res.update(
                mu=math.inf if res["mu"] is None else res["mu"],  # JSON: null
                n_min=-math.inf if res["n_min"] is None else res["n_min"],
            )
            optimum_figures(res, os.path.join(folder, name))


if __name__ == "__main__":
    main()
