"""Benchmark: what robustness and a global search cost in ``rollax.robot.optimize`` (issue 59).

In one process, on the disk of Sect. 5 turned by ``-pi`` in ``T = 8`` with ``mu = 0.25``,
``N >= 0.5`` (same knots and grid throughout):

* one evaluation of the constraints with their Jacobian (what each SQP iteration needs), at the
  nominal optimum, for the nominal problem and for the robust one over ``S`` samples (``S`` in ``--samples``): warm
  time per call, and its growth with ``S`` (the samples are one ``vmap``-ed batch);
* the whole optimisation: nominal, then robust over each ``S`` with ``rounds=0`` (one solve
  from the nominal optimum, the compile cache off so each new ``S`` compiles) and with the
  worst-case rounds at the largest ``S``;
* the global search: one start, one start with continuation (two more starts from easier
  problems), and ``--starts`` starts run together.

CPU figures are ratios in the same process (this machine is shared).

    python benchmarks/bench_robot_robust.py [--samples 1 4 8 16] [--starts 12] [--out DIR]
    [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax  # noqa: E402

from rollax.robot import RestToRestControl, disk_manoeuvre, evaluate, optimize, parameter_box  # noqa: E402

UNCERTAIN = {"mu": 0.15, "masses": 0.03}


def _warm(fn, repeat: int) -> float:
    fn()
    t = []
    for _ in range(repeat):
        a = time.perf_counter()
        fn()
        t.append(time.perf_counter() - a)
    return float(np.median(t))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--starts", type=int, default=12)
    ap.add_argument("--knots", type=int, default=8)
    ap.add_argument("--n-grid", type=int, default=101)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="2 samples, 2 starts, 4 knots")
    args = ap.parse_args(argv)
    if args.smoke:
        args.samples, args.starts, args.knots, args.n_grid, args.repeat = [2], 2, 4, 31, 1
    man = disk_manoeuvre(phi_T=-np.pi, T=8.0, mu=0.25, n_min=0.5)
    box = parameter_box(man, UNCERTAIN)
    out: dict = dict(
        manoeuvre="disk of Sect. 5, phi_T = -pi, T = 8, mu = 0.25, N >= 0.5",
        uncertain=UNCERTAIN,
        knots=args.knots,
        n_grid=args.n_grid,
    )

    # whole optimisations (each compiles: the cache is off)
    runs = {}
    a = time.perf_counter()
    nom = optimize(man, knots=args.knots, n_grid=args.n_grid, progress=False)
    runs["nominal"] = dict(wall=time.perf_counter() - a, cost=nom.cost, status=nom.status)

    # one evaluation with its Jacobian at the nominal optimum: nominal against S samples
    z, T = nom.control.z, nom.control.T

    def constraints(z, man):
        _, h, g = evaluate(man, RestToRestControl(z, T), n_grid=args.n_grid)
        return jnp.concatenate([h, g])

    nominal = jax.jit(jax.jacfwd(lambda z: constraints(z, man)))
    t_nom = _warm(lambda: np.asarray(nominal(z)), args.repeat)
    evals = {"nominal": t_nom}
    batched = jax.jit(
        jax.jacfwd(lambda z, P: jax.vmap(lambda p: constraints(z, box.apply(man, p)))(P))
    )
    for S in args.samples:
        P = jnp.asarray(np.concatenate([box.nominal[None], box.sample(S - 1, 0)]))
        evals[f"S={S}"] = _warm(lambda P=P: np.asarray(batched(z, P)), args.repeat)
        print(
            f"one evaluation, S = {S}: {evals[f'S={S}']:.4f} s ({evals[f'S={S}'] / t_nom:.2f}x nominal)"
        )
    out["evaluation_s"] = evals
    out["evaluation_ratio"] = {k: v / t_nom for k, v in evals.items()}

    for S in args.samples:
        a = time.perf_counter()
        rob = optimize(man, knots=args.knots, n_grid=args.n_grid, progress=False,
                       uncertain=UNCERTAIN, samples=S, rounds=0)  # fmt: skip
        runs[f"robust S={S}, rounds=0"] = dict(
            wall=time.perf_counter() - a, cost=rob.cost, status=rob.status,
            worst_violation=rob.robust["worst"]["violation"] if rob.robust else None,
        )  # fmt: skip
    S = max(args.samples)
    a = time.perf_counter()
    rob = optimize(man, knots=args.knots, n_grid=args.n_grid, progress=False,
                   uncertain=UNCERTAIN, samples=S)  # fmt: skip
    runs[f"robust S={S}, rounds"] = dict(
        wall=time.perf_counter() - a, cost=rob.cost, status=rob.status,
        rounds=len(rob.robust["rounds"]) if rob.robust else 0,
        worst_violation=rob.robust["worst"]["violation"] if rob.robust else None,
    )  # fmt: skip
    out["optimize"] = runs
    for k, v in runs.items():
        print(f"{k}: {v['wall']:.1f} s ({v['wall'] / runs['nominal']['wall']:.2f}x nominal), "
              f"cost {v['cost']:.5g}, {v['status']}")  # fmt: skip

    # global search: one start against several, same manoeuvre (a full turn, friction active)
    turn = disk_manoeuvre(phi_T=-2 * np.pi, T=10.0, mu=0.3, n_min=0.5)
    search = {}
    for n, cont in ((1, False), (1, True), (args.starts, False)):
        a = time.perf_counter()
        o = optimize(turn, knots=args.knots, n_grid=args.n_grid, progress=False, starts=n,
                     continuation=cont)  # fmt: skip
        n = f"{n}+continuation" if cont else n
        search[f"starts={n}"] = dict(wall=time.perf_counter() - a, cost=o.cost, status=o.status,
                                     optima=list(o.optima))  # fmt: skip
        print(f"full turn, {n} start(s): {search[f'starts={n}']['wall']:.1f} s, cost {o.cost:.5g}, "
              f"{len(o.optima)} distinct optima")  # fmt: skip
    out["search"] = search
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "robot_robust.json"), "w") as fh:
            json.dump(out, fh, indent=1, default=float)
    return out


if __name__ == "__main__":
    main()
