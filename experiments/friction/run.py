"""Friction-model experiment: harmonic / Pade model error vs degree and analogues of Figs. 7-10, 17.

Writes errors.json, limit_directions.json and PNG figures into this folder (or ``--out DIR``).
Run: python experiments/friction/run.py [--out DIR] [--smoke]
(``--smoke``: the lowest degrees only, for tests/test_scripts_smoke.py)
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import rollax  # noqa: E402,F401
from rollax.friction import (  # noqa: E402
    ExactHertz,
    ExactUniform,
    HarmonicModel,
    LinearModel,
    PlanarBody,
    fit_error,
    fit_pade,
    force_free_eps,
)

HERE = os.path.dirname(os.path.abspath(__file__))
TH = np.linspace(0, np.pi / 2, 300)
#: the degrees: harmonic, Pade (Fig. 10 draws the first two of these), the profile figures
DEGREES = dict(harmonic=range(1, 7), pade=(2, 3, 4), profile=range(1, 5))
#: --smoke: the lowest only (each Pade degree compiles its own fit, seconds each)
SMOKE_DEGREES = dict(harmonic=range(1, 3), pade=(2,), profile=range(1, 3))


def profile_fig(law, out, fname, title, torque=True, degrees=DEGREES["profile"]):
    n = 2 if torque else 1
    fig, ax = plt.subplots(1, n, figsize=(4.2 * n, 3.3), dpi=100, squeeze=False)
    ax = ax[0]
    th = jnp.asarray(TH)
    lin = LinearModel(kappa=law.kappa, R=law.R, rho=law.rho)
    for i, (fl, lab) in enumerate(((lambda m: m.Q_theta, "Q"), (lambda m: m.T_theta, "T"))[:n]):
        ax[i].plot(TH, fl(law)(th), "k:", lw=2, label="exact")
        ax[i].plot(TH, fl(lin)(th), "--", color="grey", label="linear (fitted)")
        for N in degrees:
            ax[i].plot(TH, fl(HarmonicModel.from_law(law, N))(th), label=f"N = {N}")
        ax[i].set_xlabel("theta")
        ax[i].set_ylabel(lab)
    ax[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, fname))
    plt.close(fig)


def main(out: str = HERE, smoke: bool = False) -> None:
    deg = SMOKE_DEGREES if smoke else DEGREES
    cases = {
        "uniform, rho=kappa": ExactUniform(rho="kappa"),
        "uniform, rho=R": ExactUniform(rho="R"),
        "hertz, rho=kappa": ExactHertz(rho="kappa"),
    }
    errors = {}
    pades = {}
    for name, law in cases.items():
        errors[name] = {
            "harmonic": {},
            "pade": {},
            "linear": fit_error(LinearModel(kappa=law.kappa, R=law.R, rho=law.rho), law),
        }
        for N in deg["harmonic"]:
            errors[name]["harmonic"][N] = fit_error(HarmonicModel.from_law(law, N), law)
        for d in deg["pade"]:
            p, _ = fit_pade(law, d)
            pades[(name, d)] = p
            errors[name]["pade"][d] = {**fit_error(p, law), "poles_free": p.poles_free()}
        print(
            name,
            {N: round(e["rms_Q"] + e["rms_T"], 5) for N, e in errors[name]["harmonic"].items()},
        )

    with open(os.path.join(out, "errors.json"), "w") as fh:
        json.dump(errors, fh, indent=1)

    # --- error vs degree
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5), dpi=100)
    for name in cases:
        Ns = list(deg["harmonic"])
        ax[0].semilogy(
            Ns, [errors[name]["harmonic"][N]["rms_Q"] for N in Ns], "o-", label=f"harmonic, {name}"
        )
        ax[1].semilogy(
            Ns, [errors[name]["harmonic"][N]["rms_T"] for N in Ns], "o-", label=f"harmonic, {name}"
        )
        ds = list(deg["pade"])
        ax[0].semilogy(
            ds, [errors[name]["pade"][d]["rms_Q"] for d in ds], "s--", label=f"Pade, {name}"
        )
        ax[1].semilogy(
            ds, [errors[name]["pade"][d]["rms_T"] for d in ds], "s--", label=f"Pade, {name}"
        )
    for a, t in zip(ax, ("RMS error of Q(theta)", "RMS error of T(theta)")):
        a.set_xlabel("degree N")
        a.set_title(t)
    ax[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "error_vs_degree.png"))
    plt.close(fig)

    profile_fig(
        cases["uniform, rho=kappa"],
        out,
        "fig07_uniform_rho_kappa.png",
        "Fig. 7 analogue: uniform pressure, rho = kappa",
        degrees=deg["profile"],
    )
    profile_fig(
        cases["uniform, rho=R"],
        out,
        "fig08_uniform_rho_R.png",
        "Fig. 8 analogue: uniform pressure, rho = R",
        torque=False,
        degrees=deg["profile"],
    )
    profile_fig(
        cases["hertz, rho=kappa"],
        out,
        "fig09_hertz_rho_kappa.png",
        "Fig. 9 analogue: Hertz pressure, rho = kappa",
        torque=False,
        degrees=deg["profile"],
    )

    # --- Fig. 10: harmonic vs Pade in eps
    law = cases["uniform, rho=kappa"]
    eps = np.logspace(-2, 2, 400)
    fig, ax = plt.subplots(1, 2, figsize=(8.4, 3.3), dpi=100)
    for i, f in enumerate(("Q_eps", "T_eps")):
        ax[i].semilogx(eps, getattr(law, f)(jnp.asarray(eps)), "k:", lw=2, label="exact")
        for N in deg["pade"][:2]:
            ax[i].semilogx(
                eps,
                getattr(HarmonicModel.from_law(law, N), f)(jnp.asarray(eps)),
                label=f"harmonic N = {N}",
            )
            ax[i].semilogx(
                eps,
                getattr(pades[("uniform, rho=kappa", N)], f)(jnp.asarray(eps)),
                "--",
                label=f"Pade n = {N}",
            )
        ax[i].set_xlabel("eps")
        ax[i].set_ylabel(f)
    ax[0].legend(fontsize=7)
    fig.suptitle("Fig. 10 analogue: harmonic vs Pade (uniform, rho = kappa)", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fig10_harmonic_vs_pade.png"))
    plt.close(fig)

    # --- Fig. 17/18: the curves k(w3) w1 of (131)/(141) vs degree, and limit-direction summary
    summary = {"disc": {}, "ball_lambda5": {}}
    fig, ax = plt.subplots(1, 2, figsize=(8.4, 3.3), dpi=100)
    w3 = np.linspace(0, 1, 300)
    for key, exact, mk, a in (
        ("disc", ExactUniform(), PlanarBody.disc, ax[0]),
        ("ball_lambda5", ExactHertz(), lambda L: PlanarBody.ball(L, lam=5.0), ax[1]),
    ):
        for N in deg["harmonic"]:
            b = mk(HarmonicModel.from_law(exact, N))
            a.plot(w3, np.asarray(b.k(jnp.asarray(w3))) * np.sqrt(1 - w3**2), label=f"N = {N}")
            summary[key][N] = {**b.bifurcations(), "force_free_eps": force_free_eps(b)}
        b = mk(exact)
        a.plot(w3, np.asarray(b.k(jnp.asarray(w3))) * np.sqrt(1 - w3**2), "k:", lw=2, label="exact")
        summary[key]["exact"] = {**b.bifurcations(), "force_free_eps": force_free_eps(b)}
        a.set_xlabel("w3")
        a.set_ylabel("k(w3) w1 = F/(mu m g)")
        a.set_title(key)
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fig17_18_limit_direction_curves.png"))
    plt.close(fig)
    with open(os.path.join(out, "limit_directions.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(json.dumps(summary["disc"], indent=0)[:1500])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=HERE, help="folder to write into (default: beside this script)"
    )
    ap.add_argument("--smoke", action="store_true", help="lowest degrees only (the smoke test)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    main(args.out, args.smoke)
