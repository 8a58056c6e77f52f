"""``rollax penny``: the bouncing-penny billiard (Clark & Bloch, Sect. VI).

``rollax penny [run] --table circle|ellipse --impact elastic|plastic --impacts N [--json] [--out DIR]``
prints the impact times, post-impact states and energies (Figs. 1-4 with ``--out``);
``rollax penny chaos --out DIR`` writes Fig. 5 (an ensemble of initial conditions perturbed by
less than 0.005 in theta_dot and phi_dot, at several times) and finite-time Lyapunov exponents
of the impact map for elastic and plastic impacts on both tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

_FIELDS = ("x", "y", "theta", "phi", "x_dot", "y_dot", "theta_dot", "phi_dot")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "penny",
        help="rolling-penny billiard with nonholonomic impacts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("mode", nargs="?", choices=("run", "chaos"), default="run",
                   help="run: one impact sequence (default); chaos: Fig. 5 and FTLEs")
    p.add_argument("--table", choices=("circle", "ellipse"), default="ellipse",
                   help="table of Table I: ellipse a=0.15, b=0.20 or circle of radius 0.20 (m)")
    p.add_argument("--impact", choices=("elastic", "plastic", "restitution"), default="elastic",
                   help="impact law: elastic (15)-(17), plastic (18)-(21) or restitution (--e)")
    p.add_argument("--e", type=float, default=1.0, help="coefficient of restitution for --impact restitution")
    p.add_argument("--impacts", type=int, default=20, help="number of impacts N (default 20)")
    p.add_argument("--theta-dot", type=float, default=10.0, help="initial theta_dot (rad/s)")
    p.add_argument("--phi-dot", type=float, default=0.2, help="initial phi_dot (rad/s)")
    p.add_argument("--phi", type=float, default=math.pi / 2, help="initial heading phi (rad)")
    p.add_argument("--glancing-tol", type=float, default=1e-6,
                   help="normal approach (metric cosine) below which an impact counts as glancing")
    p.add_argument("--samples", type=int, default=100, help="chaos: number of perturbed initial conditions")
    p.add_argument("--seed", type=int, default=0, help="chaos: random seed of the perturbations")
    p.add_argument("--json", action="store_true", help="print JSON to stdout")
    p.add_argument("--out", metavar="DIR", help="write figures (PNG) and data (json) to DIR")
    p.set_defaults(func=run)


def _billiard(table: str, law: str, e: float, glancing_tol: float):
    from rollax.penny import EllipseTable, PennyBilliard, circle_table, dynamic

    tab = circle_table(0.20) if table == "circle" else EllipseTable(0.15, 0.20)
    return dynamic(PennyBilliard(table=tab, law=law, e=e, glancing_tol=glancing_tol))


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def sequence_records(b, s0, seq) -> dict:
    """JSON-ready description of one impact sequence."""
    from rollax.penny import STATUS_NAMES

    seq = [np.asarray(v) for v in seq]
    times, taus, states, _, energies, ends, status = seq
    recs = []
    for k in range(times.shape[0]):
        recs.append({
            "index": k + 1,
            "time": _num(times[k]),
            "flight_time": _num(taus[k]),
            "end": {0: "front", 1: "back"}.get(int(ends[k])),
            "status": STATUS_NAMES[int(status[k])],
            "state": {f: _num(v) for f, v in zip(_FIELDS, states[k])},
            "energy": _num(energies[k]),
        })
    bad = status[status != 0]
    return {
        "status": STATUS_NAMES[int(bad[0])] if bad.size else "impact",
        "n_completed": int(np.sum(status == 0)),
        "initial_state": {f: float(v) for f, v in zip(_FIELDS, np.asarray(s0))},
        "initial_energy": float(b.penny.energy(s0)),
        "parameters": {
            "R": float(b.penny.R), "m": float(b.penny.m), "I": float(b.penny.I), "J": float(b.penny.J),
            "a": float(b.table.a), "b": float(b.table.b), "law": b.law, "e": float(b.e),
            "glancing_tol": float(b.glancing_tol),
        },
        "impacts": recs,
    }


def _check(args) -> None:
    if args.impacts < 1:
        raise ValueError(f"--impacts = {args.impacts} must be >= 1")
    if args.samples < 1:
        raise ValueError(f"--samples = {args.samples} must be >= 1")
    if not 0.0 <= args.e <= 1.0:
        raise ValueError(f"--e = {args.e} is outside the allowed range [0.0, 1.0]")


def run(args) -> int:
    _check(args)
    if args.mode == "chaos":
        if not args.out and not args.json:
            raise ValueError("chaos mode needs --out DIR and/or --json")
        result = chaos(args.out, n_samples=args.samples, seed=args.seed, glancing_tol=args.glancing_tol)
        if args.json:
            print(json.dumps(result, indent=1))
        else:
            _print_ftle(result)
        return 0

    from rollax.penny import simulate

    b = _billiard(args.table, args.impact, args.e, args.glancing_tol)
    s0 = b.penny.state(phi=args.phi, theta_dot=args.theta_dot, phi_dot=args.phi_dot)
    seq = simulate(b, s0, args.impacts)
    out = {"table": args.table, "impact": args.impact, **sequence_records(b, s0, seq)}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        name = f"penny_{args.table}_{args.impact}"
        with open(os.path.join(args.out, name + ".json"), "w") as fh:
            json.dump(out, fh, indent=1)
        plot_sequence(b, s0, seq, os.path.join(args.out, name + ".png"),
                      f"{args.impact} impacts, {args.table} table: first {args.impacts}")
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{'k':>3} {'time':>12} {'end':>5} {'theta_dot':>11} {'phi_dot':>11} {'energy':>12}  status")
        for r in out["impacts"]:
            t = "nan" if r["time"] is None else f"{r['time']:.9f}"
            st = r["state"]
            f = lambda v: "nan" if v is None else f"{v:.6g}"  # noqa: E731
            print(f"{r['index']:>3} {t:>12} {str(r['end']):>5} {f(st['theta_dot']):>11} "
                  f"{f(st['phi_dot']):>11} {f(r['energy']):>12}  {r['status']}")
    return 0


# --------------------------------------------------------------------------------- figures


def _table_outline(ax, b):
    u = np.linspace(0, 2 * np.pi, 400)
    ax.plot(float(b.table.a) * np.cos(u), float(b.table.b) * np.sin(u), "k-", lw=1.2)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")


def plot_sequence(b, s0, seq, path: str, title: str) -> None:
    """Figs. 1-4: path of the contact point, the penny at each impact, the table edge."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dense = np.asarray(b.path(s0, seq, 60))
    fig, ax = plt.subplots(figsize=(4.6, 5.2), dpi=100)
    _table_outline(ax, b)
    n = dense.shape[0]
    cmap = plt.get_cmap("viridis")
    for k in range(n):
        ax.plot(dense[k, :, 0], dense[k, :, 1], "-", color=cmap(k / max(n - 1, 1)), lw=1.0)
    pre = np.asarray(seq.pre_states)
    ok = np.isfinite(pre[:, 0])
    R = float(b.penny.R)
    for st in pre[ok]:
        e = R * np.array([np.cos(st[3]), np.sin(st[3])])
        ax.plot([st[0] - e[0], st[0] + e[0]], [st[1] - e[1], st[1] + e[1]], "r-", lw=2.0)
    ax.plot(float(s0[0]), float(s0[1]), "ko", ms=4)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


_CHAOS_TIMES = {"elastic": (0.0, 10.0, 30.0, 60.0), "plastic": (0.0, 2.0, 4.0, 6.0)}


def chaos(out: str | None, n_samples: int = 100, seed: int = 0, glancing_tol: float = 1e-6,
          n_impacts: int = 100, n_ftle: int = 100) -> dict:
    """Fig. 5 and FTLEs for elastic/plastic impacts on the circle and the ellipse.

    The ensemble: the initial state of Sect. VI-A with theta_dot and phi_dot perturbed uniformly
    by less than 0.005. Positions are shown at several times (plastic runs stop earlier: they end
    grazing the edge). FTLE: :func:`rollax.penny.ftle` over ``n_ftle`` impacts for the nominal
    state and each member; also the ensemble's rms position spread at each time.
    """
    import jax
    import jax.numpy as jnp

    from rollax.penny import ftle_batch, simulate_batch

    rng = np.random.default_rng(seed)
    pert = rng.uniform(-0.005, 0.005, size=(n_samples, 2))
    result = {"n_samples": n_samples, "seed": seed,
              "perturbation": "uniform in (-0.005, 0.005) on theta_dot and phi_dot",
              "n_impacts_ftle": n_ftle, "cases": {}}
    for law in ("elastic", "plastic"):
        times = _CHAOS_TIMES[law]
        for table in ("circle", "ellipse"):
            b = _billiard(table, law, 1.0, glancing_tol)
            p = b.penny
            s_nom = p.state()
            states = jnp.stack([p.state(theta_dot=10.0 + d1, phi_dot=0.2 + d2) for d1, d2 in pert])
            seq = simulate_batch(b, states, n_impacts)
            at = jax.vmap(lambda s, q: jax.vmap(lambda t: b.state_at(s, q, t))(jnp.asarray(times)))(states, seq)
            pos = np.asarray(at)[:, :, :2]  # (samples, times, 2)
            spread = []
            for j in range(len(times)):
                pj = pos[:, j][np.isfinite(pos[:, j, 0])]
                spread.append(float(np.sqrt(np.mean(np.sum((pj - pj.mean(0)) ** 2, -1)))) if len(pj) else None)
            res = ftle_batch(b, jnp.concatenate([s_nom[None], states]), n_ftle)
            lam_k, lam_t, used = (np.asarray(v) for v in res[:3])
            logs = np.asarray(res.log_stretch[0])
            n_nom = int(used[0])
            history = {str(n): float(np.sum(logs[:n]) / n) for n in (10, 25, 50, 100, 200) if n <= n_nom}
            status = np.asarray(seq.status)
            result["cases"][f"{law}_{table}"] = {
                "ftle_per_impact_nominal": float(lam_k[0]),
                "ftle_per_second_nominal": float(lam_t[0]),
                "impacts_used_nominal": n_nom,
                "ftle_per_impact_nominal_after_n": history,
                "ftle_per_impact_ensemble_mean": float(np.mean(lam_k[1:])),
                "ftle_per_impact_ensemble_std": float(np.std(lam_k[1:])),
                "ftle_per_second_ensemble_mean": float(np.mean(lam_t[1:])),
                "impacts_used_ensemble_min": int(np.min(used[1:])),
                "impacts_used_ensemble_max": int(np.max(used[1:])),
                "times": list(times),
                "position_spread_rms_m": spread,
                "valid_positions_per_time": [int(np.sum(np.isfinite(pos[:, j, 0]))) for j in range(len(times))],
                "members_stopped_glancing": int(np.sum(np.any(status == 2, axis=1))),
                "members_stopped_no_impact": int(np.sum(np.any(status == 1, axis=1))),
            }
            if out:
                os.makedirs(out, exist_ok=True)
                _plot_fig5(b, pos, times, os.path.join(out, f"fig5_{law}_{table}.png"),
                           f"{law} impacts, {table} table: {n_samples} initial conditions "
                           f"(theta_dot, phi_dot perturbed < 0.005)")
    if out:
        with open(os.path.join(out, "ftle.json"), "w") as fh:
            json.dump(result, fh, indent=1)
    return result


def _plot_fig5(b, pos, times, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(times), figsize=(2.6 * len(times), 3.2), dpi=100)
    for j, ax in enumerate(np.atleast_1d(axes)):
        _table_outline(ax, b)
        ax.plot(pos[:, j, 0], pos[:, j, 1], ".", ms=3, color="C3")
        n_ok = int(np.sum(np.isfinite(pos[:, j, 0])))
        ax.set_title(f"t = {times[j]:g} s" + ("" if n_ok == pos.shape[0] else f" ({n_ok} valid)"), fontsize=9)
        ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _print_ftle(result: dict) -> None:
    print(f"{'case':>16} {'FTLE/impact':>12} {'FTLE/s':>10} {'used':>5} {'ensemble mean':>14} {'std':>8}")
    for name, c in result["cases"].items():
        print(f"{name:>16} {c['ftle_per_impact_nominal']:>12.4f} {c['ftle_per_second_nominal']:>10.4f} "
              f"{c['impacts_used_nominal']:>5d} {c['ftle_per_impact_ensemble_mean']:>14.4f} "
              f"{c['ftle_per_impact_ensemble_std']:>8.4f}")


if __name__ == "__main__":  # pragma: no cover
    from rollax.cli import main

    sys.exit(main(["penny", *sys.argv[1:]]))
