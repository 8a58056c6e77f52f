"""``rollax friction``: finite-contact friction laws, model fitting, limit directions, stop runs.

Sub-commands::

    rollax friction law --pressure uniform|hertz --eps E1 E2 ... [--json] [--out DIR]
    rollax friction fit --pressure uniform|hertz --model harmonic|pade --degree N [--json] [--out DIR]
    rollax friction limit-directions --body disc|ball --force F --degree N [--json] [--out DIR]
    rollax friction stop --body disc|ball --law exact-uniform|... [--json] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser("friction", help="finite-contact friction laws (slip + spin)")
    sub = p.add_subparsers(dest="friction_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])

    law = sub.add_parser("law", help="normalised force Q_eps and torque T_eps (53) of an exact law")
    law.add_argument("--pressure", choices=("uniform", "hertz"), default="uniform")
    law.add_argument("--eps", type=float, nargs="+", required=True, help="slip-spin ratios (35), >= 0")
    _common(law)
    law.set_defaults(func=run_law)

    fit = sub.add_parser("fit", help="fit a harmonic or Pade model to an exact law by gradient (optax)")
    fit.add_argument("--pressure", choices=("uniform", "hertz"), default="uniform")
    fit.add_argument("--model", choices=("harmonic", "pade"), default="harmonic")
    fit.add_argument("--degree", type=int, default=2)
    fit.add_argument("--rho", choices=("kappa", "R"), default="kappa")
    _common(fit)
    fit.set_defaults(func=run_fit)

    ld = sub.add_parser("limit-directions", help="limit directions of the disc / ball at stick (Sect. 7.2)")
    ld.add_argument("--body", choices=("disc", "ball"), default="disc")
    ld.add_argument("--force", type=float, default=0.0, help="F/(mu m g), >= 0")
    ld.add_argument("--degree", type=int, default=2, help="degree N of the harmonic model")
    ld.add_argument("--lam", type=float, default=5.0, help="ball: lambda = R_bar/R")
    _common(ld)
    ld.set_defaults(func=run_limit_directions)

    stop = sub.add_parser("stop", help="simulate a disc/ball sliding and spinning to a stop")
    stop.add_argument("--body", choices=("disc", "ball"), default="disc")
    stop.add_argument(
        "--law",
        default="exact-uniform",
        help="exact-uniform, exact-hertz, linear, harmonic-N (e.g. harmonic-2), pade",
    )
    stop.add_argument("--force", type=float, default=0.0, help="F/(mu m g)")
    stop.add_argument("--u0", type=float, nargs=3, default=(1.0, 0.0, 1.0), help="initial (u_x, u_y, rho w_z)")
    stop.add_argument("--lam", type=float, default=5.0, help="ball: lambda = R_bar/R")
    _common(stop)
    stop.set_defaults(func=run_stop)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON to stdout")
    p.add_argument("--out", default=None, help="directory for figures (PNG) and data (json)")


def _emit(args, data: dict, text: str) -> None:
    if args.json:
        print(json.dumps(data))
    else:
        print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"{args.friction_command}.json"), "w") as fh:
            json.dump(data, fh, indent=1)


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ------------------------------------------------------------------------------------- law
def run_law(args) -> int:
    import jax.numpy as jnp
    import numpy as np

    from rollax.friction import exact_law

    if any(not (e >= 0) for e in args.eps):
        raise ValueError(f"--eps must be >= 0, got {args.eps}")
    law = exact_law(args.pressure, rho="R")
    eps = jnp.asarray(args.eps, dtype=jnp.float64)
    Q = np.asarray(law.Q_eps(eps)).tolist()
    T = np.asarray(law.T_eps(eps)).tolist()
    data = {"pressure": args.pressure, "kappa_over_R": float(law.kappa / law.R), "eps": list(args.eps), "Q": Q, "T": T}
    lines = [f"{'eps':>12} {'Q_eps':>20} {'T_eps':>20}"] + [
        f"{e:12.6g} {q:20.16f} {t:20.16f}" for e, q, t in zip(args.eps, Q, T)
    ]
    _emit(args, data, "\n".join(lines))
    if args.out:
        plt = _figure()
        e = np.logspace(-2, 2, 400)
        fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
        ax.semilogx(e, law.Q_eps(jnp.asarray(e)), label="Q_eps")
        ax.semilogx(e, law.T_eps(jnp.asarray(e)), label="T_eps")
        ax.plot(args.eps, Q, "k.", args.eps, T, "k.")
        ax.set_xlabel("eps")
        ax.set_title(f"exact law, {args.pressure} pressure (53)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "law.png"))
        plt.close(fig)
    return 0


# ------------------------------------------------------------------------------------- fit
def run_fit(args) -> int:
    import jax.numpy as jnp
    import numpy as np

    from rollax.friction import HarmonicModel, exact_law
    from rollax.friction.fit import fit_error, fit_harmonic, fit_pade

    if args.degree < 1 or (args.model == "pade" and args.degree < 2):
        raise ValueError(f"--degree {args.degree}: must be >= 1 (harmonic) or >= 2 (pade)")
    law = exact_law(args.pressure, rho=args.rho)
    if args.model == "harmonic":
        model, loss = fit_harmonic(law, args.degree)
        quad = HarmonicModel.from_law(law, args.degree)
        params = {
            "c": np.asarray(model.c).tolist(),
            "s": np.asarray(model.s).tolist(),
            "C": np.asarray(model.C_coeffs()).tolist(),
            "S": np.asarray(model.S_coeffs()).tolist(),
            "c_quadrature": np.asarray(quad.c).tolist(),
            "s_quadrature": np.asarray(quad.s).tolist(),
        }
    else:
        model, loss = fit_pade(law, args.degree)
        p, q, r, s = model.coefficients()
        params = {
            "p": np.asarray(p).tolist(),
            "q": np.asarray(q).tolist(),
            "r": np.asarray(r).tolist(),
            "s": np.asarray(s).tolist(),
            "poles_free": model.poles_free(),
        }
    err = fit_error(model, law)
    data = {"pressure": args.pressure, "model": args.model, "degree": args.degree, "rho": args.rho, "loss": loss, **params, "error": err}
    text = "\n".join(f"{k}: {v}" for k, v in data.items())
    _emit(args, data, text)
    if args.out:
        plt = _figure()
        th = np.linspace(0, np.pi / 2, 300)
        fig, ax = plt.subplots(1, 2, figsize=(8, 3.2), dpi=100)
        for a, f_law, f_mod, name in ((ax[0], law.Q_theta, model.Q_theta, "Q"), (ax[1], law.T_theta, model.T_theta, "T")):
            a.plot(th, f_law(jnp.asarray(th)), "k:", label="exact")
            a.plot(th, f_mod(jnp.asarray(th)), label=f"{args.model} N={args.degree}")
            a.set_xlabel("theta")
            a.set_ylabel(name)
        ax[0].legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "fit.png"))
        plt.close(fig)
    return 0


# ------------------------------------------------------------------------ limit directions
def run_limit_directions(args) -> int:
    from rollax.friction import ExactHertz, ExactUniform, HarmonicModel
    from rollax.friction.limit_directions import PlanarBody

    if args.degree < 1:
        raise ValueError(f"--degree {args.degree} must be >= 1")
    if not args.force >= 0:
        raise ValueError(f"--force {args.force} must be >= 0")
    exact = ExactUniform() if args.body == "disc" else ExactHertz()
    model = HarmonicModel.from_law(exact, args.degree)
    if args.body == "disc":
        body = PlanarBody.disc(model, f=args.force)
    else:
        body = PlanarBody.ball(model, f=args.force, lam=args.lam)
    dirs = body.limit_directions()
    data = {
        "body": args.body,
        "force": args.force,
        "degree": args.degree,
        "C": [float(v) for v in model.C_coeffs()],
        "S": [float(v) for v in model.S_coeffs()],
        "bifurcations": body.bifurcations(),
        "limit_directions": dirs,
    }
    lines = [f"{args.body}, F/(mu m g) = {args.force}, harmonic degree N = {args.degree}", f"bifurcations: {data['bifurcations']}"]
    for d in dirs:
        lines.append(
            f"  w = ({d['w'][0]:+.6f}, {d['w'][1]:+.6f}, {d['w'][2]:+.6f})  eps = {d['eps']:.6g}  "
            f"{d['radial']}, {d['stability']} {d['sphere']}{' (circle)' if d['circle'] else ''}"
        )
    _emit(args, data, "\n".join(lines))
    if args.out:
        _bifurcation_figure(body, model, args, os.path.join(args.out, "limit_directions.png"))
    return 0


def _bifurcation_figure(body, model, args, path):
    import numpy as np

    from rollax.friction.limit_directions import PlanarBody

    plt = _figure()
    fmax = 1.2 * body.F_T()
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    for f in np.linspace(1e-3, fmax, 60):
        b = PlanarBody(body.law, body.a, body.b, f, body.name)
        for w in b.nontrivial(n_grid=801):
            ax.plot(f, w[2], "b.", ms=2)
    ax.axvline(body.F_T(), color="purple", ls="--", label="F_T")
    ax.axvline(body.F_P(), color="green", ls="--", label="F_P")
    for fo in body.folds():
        ax.axvline(fo["F"], color="brown", ls=":", label="F_F")
    ax.set_xlabel("F/(mu m g)")
    ax.set_ylabel("w3 of nontrivial limit directions")
    ax.set_title(f"{args.body}, harmonic N = {args.degree}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# -------------------------------------------------------------------------------- stop
def _law_from_name(name: str, body: str):
    from rollax.friction import ExactHertz, ExactUniform, HarmonicModel, LinearModel, PadeModel

    base = ExactUniform() if body == "disc" else ExactHertz()
    if name == "exact-uniform":
        return ExactUniform()
    if name == "exact-hertz":
        return ExactHertz()
    if name == "linear":
        return LinearModel("uniform" if body == "disc" else "hertz")
    if name == "pade":
        return PadeModel.from_law(base, 2)
    if name.startswith("harmonic-") and name[9:].isdigit() and int(name[9:]) >= 1:
        return HarmonicModel.from_law(base, int(name[9:]))
    raise ValueError(f"--law {name!r} must be exact-uniform, exact-hertz, linear, pade or harmonic-N")


def run_stop(args) -> int:
    import jax.numpy as jnp
    import numpy as np

    from rollax.friction.limit_directions import PlanarBody, force_free_eps
    from rollax.friction.sliding import SlidingBody, simulate_stop

    law = _law_from_name(args.law, args.body)
    if not args.force >= 0:
        raise ValueError(f"--force {args.force} must be >= 0")
    if args.body == "disc":
        body = SlidingBody(law, F=args.force)
    else:
        body = SlidingBody(law, j=0.4, R_bar=args.lam * float(law.R), F=args.force, kind="ball")
    x0 = jnp.asarray(args.u0, dtype=jnp.float64)
    if float(jnp.linalg.norm(x0)) == 0.0:
        raise ValueError("--u0 must be nonzero (zero slip is already stuck)")
    res = simulate_stop(body, x0)
    data = {
        "body": args.body,
        "law": args.law,
        "force": args.force,
        "u0": list(args.u0),
        "stopped": bool(res.stopped),
        "t_stop": float(res.t_stop),
        "eps": float(res.eps),
        "w_stop": (np.asarray(res.x_o) / float(jnp.linalg.norm(res.x_o))).tolist(),
    }
    if args.force == 0.0 and args.body == "disc":
        pb = PlanarBody.disc(law) if hasattr(law, "C_w") else None
        if pb is not None:
            data["eps_limit_direction"] = force_free_eps(pb)
    text = "\n".join(f"{k}: {v}" for k, v in data.items())
    _emit(args, data, text)
    if args.out:
        _stop_figure(body, x0, float(res.t_stop), os.path.join(args.out, "stop.png"))
    return 0


def _stop_figure(body, x0, t_stop, path):
    import jax.numpy as jnp
    import numpy as np

    from rollax.friction.fit import disc_trajectory

    plt = _figure()
    ts = jnp.linspace(0.0, 0.98 * t_stop, 200)
    xs = np.asarray(disc_trajectory(body, x0, ts))
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    ax.plot(ts, np.hypot(xs[:, 0], xs[:, 1]), label="|u|")
    ax.plot(ts, np.abs(xs[:, 2]), label="rho |omega|")
    ax.set_xlabel("t")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    from rollax.cli import main

    sys.exit(main(["friction", *sys.argv[1:]]))
