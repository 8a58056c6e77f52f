"""Regenerate Figs. 3, 5, 6, 7, 8 and 9 of *Basketball rolling on the rim* (Sects. 3-4) and the
summary numbers (beta*, beta-hat, beta-tilde, minimum throw speeds of regions A, B, C, Floquet
multipliers of the standard ball, conservation of E, P_I, P_II along rolling trajectories).

    python experiments/steady/run.py [--out DIR] [--smoke]

Writes fig*.png, fig*.npz and summary.json next to this script (or into ``--out``).
``--smoke``: a coarse Floquet stability map, for tests/test_scripts_smoke.py.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import rollax  # noqa: F401  (float64)
import jax
import jax.numpy as jnp
import numpy as np

from rollax.analysis import conserved as C
from rollax.analysis import floquet
from rollax.analysis import steady as steady_figures
from rollax.models.rim import Rim
from rollax.analysis.steady import summary

HERE = os.path.dirname(os.path.abspath(__file__))
#: the (rho, j) grid of the Floquet stability map; --smoke: a coarse one
MAP, SMOKE_MAP = (160, 100), (4, 3)


def conservation_check(rim: Rim) -> dict:
    """Largest relative drift of E, P_I, P_II along two rolling trajectories of (33)-(36)."""
    mi = C.MomentumIntegrals.from_rim(rim)
    cases = {
        "oscillation_about_A(0.8, 20)": (
            rim.steady_state(0.8, 20.0) + jnp.array([0, 3.0, 0, 0]),
            3.0,
        ),
        "winding_beta_0_to_9": (jnp.array([0.0, 40.0, 3.0, 2.0]), 0.25),
    }
    out = {}
    for name, (x0, t1) in cases.items():
        _, xs = C.rolling_trajectory(rim, x0, t1, n_save=201)
        E = np.asarray(jax.vmap(rim.energy)(xs))
        P = np.asarray(jax.vmap(mi.of_state)(xs))
        drift = lambda q: (np.max(np.abs(q - q[0]), axis=0) / np.abs(q[0])).tolist()  # noqa: E731
        out[name] = {"x0": np.asarray(x0).tolist(), "t1": t1, "E": drift(E), "P_I_P_II": drift(P)}
    return out


def main(folder: str = HERE, smoke: bool = False) -> None:
    t0 = time.time()
    n_rho, n_j = SMOKE_MAP if smoke else MAP
    rim = Rim()
    for n in steady_figures.FIGURES:
        steady_figures.write_figure(n, rim, folder, v_throw=10.0, w3_max=60.0)
    fsum = floquet.summary(rim)
    data = floquet.stability_data(n_rho, n_j, 1.0)
    floquet.write_figure(data, fsum, float(rim.a / rim.R), folder)
    fsum["map"] = {"n_rho": n_rho, "n_j": n_j, "stable_fraction": float(np.mean(data["stable"]))}
    out = {
        "parameters": {k: float(getattr(rim, k)) for k in ("r", "a", "R", "j", "g", "mu")},
        "steady": summary(rim),
        "paper": {
            "beta_star": 0.273,
            "beta_hat": 0.144,
            "beta_tilde": 0.785,
            "v_min_A": "about 1",
            "v_min_B": "about 5",
            "v_min_C": "about 7",
        },
        "floquet": fsum,
        "conservation": conservation_check(rim),
        "wall_s": round(time.time() - t0, 1),
    }
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out["steady"], indent=2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=HERE, help="folder to write into (default: beside this script)"
    )
    ap.add_argument("--smoke", action="store_true", help="a coarse stability map (the smoke test)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    main(args.out, args.smoke)
