"""Identification experiment: k_d, k_r and the initial state of the ball on the rim from
camera data (issue 15), and the sliding disc's mu and pressure model.

1. The rim: the rolling ball near the steady motion of the Fig. 11 section (beta 1.12,
   w1 0, w2 ~35, w3 10 1/s, perturbed) with k_d = 0.02 1/s, k_r = 0, integrated by
   rollax.solve at 1e-11 and sampled at 240 Hz until it leaves the rim; noise 1 mm on d, z
   and 2 mrad on alpha. Written to rim_obs.csv (t,d,z,alpha), fitted as
   ``rollax identify rim --data rim_obs.csv --fit k_d k_r --out .`` would: identify.json,
   fit.png, residuals.png, profile.png.
2. The short record: the first 0.25 s of the same data, where k_d cannot be told
   (short.json: its error bar and the warning).
3. A record unlike the test case (tests/rim_records.py, record 0) from a start with w2 30 %
   off: fitted at once (a local minimum, flagged poor_fit) and over growing windows (the
   truth): robust.json, robust.png.
4. The sliding disc (Hertz pressure, mu = 0.3): slide.json with both pressure models' fits
   and slide.png.

Run: python experiments/identify/run.py [--out DIR] [--smoke]
(``--out``: the folder written into, default this one; ``--smoke``: records of about 1 s and
a few iterations per fit, for tests/test_scripts_smoke.py)
"""

import argparse
import json
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.friction import SlidingBody, exact_law
from rollax.analysis.identification import (
    fit_rim,
    fit_slide,
    fit_summary,
    rim_observations,
    simulate_camera,
    write_rim_csv,
)
from rollax.plot import plot_identification, plot_profiles
from rollax.models.rim import Rim
from rollax.systems import Sliding

HERE = os.path.dirname(os.path.abspath(__file__))
#: --smoke: records cut to this length [s], and this many trial steps per fit
SMOKE_SECONDS, SMOKE_ITER = 1.0, 3


def rim(folder=HERE, smoke=False):
    true = Rim(k_d=0.02, k_r=0.0)
    ys = np.asarray(true.steady_state(1.12, 10.0))
    y0 = np.concatenate([ys + np.array([0.002, 0.1, 0.1, 0.02]), [0.0]])
    t, d, z, a, t_sep = simulate_camera(true, y0, SMOKE_SECONDS if smoke else 30.0, seed=0)
    write_rim_csv(os.path.join(folder, "rim_obs.csv"), t, d, z, a)
    obs = rim_observations(t, d, z, a)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_rim(obs, progress=True, **(dict(max_iter=SMOKE_ITER) if smoke else {}))
    print(fit_summary(fit))
    res = fit.to_dict()
    res["truth"] = dict(zip(fit.names, np.concatenate([[0.02, 0.0], y0]).tolist()))
    res["t_separation_s"] = t_sep
    res["notes"] = [str(w.message) for w in caught]
    caption = (
        f"k_d = {fit['k_d'][0]:.5f} ± {fit['k_d'][1]:.1g} 1/s (truth 0.02), "
        f"k_r = {fit['k_r'][0]:.2g} ± {fit['k_r'][1]:.1g} 1/s (truth 0)\n"
        f"{len(t)} samples at 240 Hz until the ball leaves the rim; "
        f"noise 1 mm (d, z), 2 mrad (alpha)\nRim of Table 1 (r 0.12 m, a 0.01 m, "
        f"R 0.225 m, j 2/3)"
    )
    plot_identification(
        obs.t,
        obs.values,
        fit.predict(obs),
        obs.names,
        ("m", "m", "rad"),
        caption,
        os.path.join(folder, "fit.png"),
        os.path.join(folder, "residuals.png"),
    )
    plot_profiles(
        fit.profile,
        os.path.join(folder, "profile.png"),
        caption=caption.split("\n")[0] + f"\nstatus {fit.status}, chi^2/dof "
        f"{fit.chi2_per_dof:.3f}; noise estimated from the residuals",
        units={"k_d": "1/s", "k_r": "1/s"},
    )
    with open(os.path.join(folder, "identify.json"), "w") as fh:
        json.dump(res, fh, indent=2)

    keep = t < 0.25
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = fit_rim(
            rim_observations(t[keep], d[keep], z[keep], a[keep]),
            **(dict(max_iter=SMOKE_ITER) if smoke else {}),
        )
    out = short.to_dict()
    out["notes"] = [str(w.message) for w in caught]
    with open(os.path.join(folder, "short.json"), "w") as fh:
        json.dump(out, fh, indent=2)
    print("short record:", out["parameters"]["k_d"], out["notes"])


def robust(folder=HERE, smoke=False):
    """Record 0 of the independent generator (tests/rim_records.py: 13.4 s, k_d 0.0272,
    k_r 0.0408, w1 != 0), fitted from a start whose w2 is 30 % off: at once (robust=False)
    and continued over growing windows (the default). robust.json and robust.png."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "rim_records", os.path.join(HERE, "..", "..", "tests", "rim_records.py")
    )
    records = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(records)
    rec = records.make_record(0, **(dict(t_max=SMOKE_SECONDS) if smoke else {}))
    t, v = rec["t"], rec["values"]
    obs = rim_observations(t, v[:, 0], v[:, 1], v[:, 2], sigma=tuple(rec["sigma"]))
    y0 = np.asarray(rec["y0"], float).copy()
    y0[2] *= 0.7
    truth = np.concatenate([[rec["k_d"], rec["k_r"]], rec["y0"]])
    out = {"truth": dict(zip(("k_d", "k_r", "beta", "w1", "w2", "w3", "alpha"), truth.tolist()))}
    fits = {}
    for label, kw in (("at once", dict(robust=False, profile=False)), ("robust", {})):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if smoke:
                kw["max_iter"] = SMOKE_ITER
            f = fit_rim(obs, y0=y0, y0_candidates=None, **kw)
        fits[label] = f
        out[label] = f.to_dict()
        out[label]["pulls"] = ((f.values - truth) / f.std_errors).tolist()
        out[label]["notes"] = [str(w.message) for w in caught]
        print(
            f"{label}: status {f.status}, chi^2/dof {f.chi2_per_dof:.3g}, k_d "
            f"{f['k_d'][0]:.5f}, k_r {f['k_r'][0]:.5f}"
        )
    with open(os.path.join(folder, "robust.json"), "w") as fh:
        json.dump(out, fh, indent=2)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(7, 4.6), dpi=110, sharex=True)
    for ax, (label, f) in zip(axes, fits.items()):
        ax.plot(t, v[:, 2], ".", ms=1.2, color="#999999", label="observed alpha")
        ax.plot(t, f.predict(obs)[:, 2], "-", lw=0.9, color="#d62728", label="fit")
        ax.set_ylabel("alpha [rad]")
        ax.set_title(
            f"{label}: status {f.status}, chi^2/dof {f.chi2_per_dof:.3g}, k_d "
            f"{f['k_d'][0]:.4f} (truth {rec['k_d']:.4f}), k_r {f['k_r'][0]:.4f} "
            f"(truth {rec['k_r']:.4f}) 1/s",
            fontsize=7,
            loc="left",
        )
        ax.legend(fontsize=6)
    axes[-1].set_xlabel("t [s]")
    fig.suptitle(
        "generated record 0 (240 Hz, noise 1 mm, 2 mrad), start with w2 30 % off", fontsize=8
    )
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "robust.png"))
    plt.close(fig)


def slide(folder=HERE, smoke=False):
    m, g, mu = 1.0, 9.81, 0.3
    body = SlidingBody(exact_law("hertz", mu=mu, P=m * g, R=0.05), m=m, j=0.5, R_bar=0.1)
    system = Sliding(body)
    rho = float(body.law.rho)
    x0 = jnp.array([1.0, 0.0, 20.0 * rho])
    end = rollax.solve(system, x0, 0.0, 10.0, rtol=1e-11, atol=1e-12)
    t = np.arange(0.0, 0.9 * float(end.t), 1.0 / 240.0)
    sol = rollax.solve(system, x0, 0.0, float(t[-1]), ts=jnp.asarray(t), rtol=1e-11, atol=1e-12)
    rec = np.asarray(jax.vmap(system.record)(jnp.asarray(t), sol.ys))
    rng = np.random.default_rng(3)
    speed = rec[:, 0] + 0.005 * rng.normal(size=t.shape)
    spin = rec[:, 1] + 0.1 * rng.normal(size=t.shape)
    out = fit_slide(t, speed, spin, m=m, j=0.5, R_bar=0.1, R=0.05)
    summary = {
        "truth": {"pressure": "hertz", "mu": mu},
        "best": out["best"],
        "decided": out["decided"],
        "chi2": out["chi2"],
        "fits": {k: f.to_dict() for k, f in out["fits"].items()},
    }
    with open(os.path.join(folder, "slide.json"), "w") as fh:
        json.dump(summary, fh, indent=2)
    best = out["fits"][out["best"]]
    obs = rollax.Observations(t, np.stack([speed, spin], 1), "record", ("speed", "spin"))
    caption = (
        f"chosen pressure: {out['best']} (chi2 "
        + ", ".join(f"{k} {v:.0f}" for k, v in out["chi2"].items())
        + f"); mu = {best['mu'][0]:.5f} ± "
        f"{best['mu'][1]:.1g} (truth hertz, 0.3)\ndisc m 1 kg, j 1/2, R_bar 0.1 m, contact "
        f"R 0.05 m; noise 5 mm/s, 0.1 rad/s; 240 Hz"
    )
    plot_identification(
        t,
        obs.values,
        best.predict(obs),
        obs.names,
        ("m/s", "rad/s"),
        caption,
        os.path.join(folder, "slide.png"),
        os.path.join(folder, "slide_residuals.png"),
    )
    print("slide:", out["best"], best["mu"], out["chi2"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=HERE, help="folder to write into (default: beside this script)"
    )
    ap.add_argument(
        "--smoke", action="store_true", help="short records, few iterations (the smoke test)"
    )
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rollax.configure()
    rim(args.out, args.smoke)
    robust(args.out, args.smoke)
    slide(args.out, args.smoke)
