"""Reproduce the examples of Putkaradze & Rogers (ball/disk robots with internal masses) and
check the detachment time of the heavy-mass ball.

Writes results.json and the figures of Figs. 5.3-5.4, 6.2-6.4 into this folder (or ``--out``).
Run: python experiments/robot/run.py [--out DIR] [--smoke]
(``--smoke``: every solve at one loose tolerance, for tests/test_scripts_smoke.py)
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import diffrax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import fsolve

import rollax  # noqa: F401  (float64)
from rollax.robot import (
    BALL_THETA0,
    Ball,
    BallFlight,
    CircleRail,
    RampControl,
    contact_extrema,
    detach,
    fly,
    paper_ball,
    paper_disk,
    quaternion_drift,
    simulate,
)
from rollax.plot.robot import write_figures

HERE = os.path.dirname(os.path.abspath(__file__))
#: --smoke: the one tolerance of every solve
SMOKE_TOL = 1e-6


def extrema(ex, tol, solver=None, t_end=None):
    tr = simulate(ex.model, ex.control, ex.y0, ex.t1, rtol=tol, atol=tol, solver=solver)
    mu, t_mu, n, t_n = contact_extrema(tr, t_end)
    return tr, dict(mu_hat=float(mu), t_mu_hat=float(t_mu), min_N=float(n), t_min_N=float(t_n))


def exact_angles(ball, theta1=0.0, guess=BALL_THETA0[1:]):
    """Rail angles (theta2, theta3) putting the total CM straight above/below the GC."""

    def horizontal(x):
        zeta, _, _ = ball.rail_geometry(jnp.array([theta1, x[0], x[1]]))
        return np.asarray((ball.all_masses() @ zeta)[:2])

    x, info, ok, _ = fsolve(horizontal, np.asarray(guess), xtol=1e-14, full_output=True)
    return x, float(np.max(np.abs(info["fvec"]))), ok == 1


def t_detach(ball, control, theta0, tol=1e-10, solver=None):
    y0 = ball.initial_state(theta0)
    end = detach(ball, control, y0, 20.0, rtol=tol, atol=tol, solver=solver)
    return float(end.t) if bool(end.hit) else None


def main(folder: str = HERE, smoke: bool = False) -> None:
    warnings.filterwarnings("ignore", "The iteration is not making good progress")
    # --smoke: every solve at one loose tolerance (each tolerance compiles its own solver)
    tol = (lambda _: SMOKE_TOL) if smoke else (lambda rtol: rtol)
    t_start = time.time()
    out: dict = {}

    # --- Sect. 5: disk -----------------------------------------------------------------
    ex = paper_disk()
    tr, res = extrema(ex, tol(1e-12))
    res["paper_mu_hat"] = 0.2951
    res["mu_hat_rtol_1e-10"] = extrema(ex, tol(1e-10))[1]["mu_hat"]
    write_figures(tr, folder, "disk")
    out["disk"] = res

    # --- Sect. 6: ball -----------------------------------------------------------------
    ex = paper_ball()
    tr, res = extrema(ex, tol(1e-10))
    res["paper_mu_hat"] = 0.19
    res["quaternion_drift"] = float(quaternion_drift(tr))
    res["mu_hat_rtol_1e-12"] = extrema(ex, tol(1e-12))[1]["mu_hat"]
    th_exact, resid, _ = exact_angles(ex.model)
    res["exact_initial_angles_residual"] = resid
    res["exact_initial_angles"] = [0.0, *map(float, th_exact)]
    ex2 = ex._replace(y0=ex.model.initial_state([0.0, *th_exact]))
    res["mu_hat_exact_initial_angles"] = extrema(ex2, tol(1e-10))[1]["mu_hat"]
    write_figures(tr, folder, "ball")
    out["ball"] = res

    # --- Sect. 6, heavy masses: detachment -----------------------------------------------
    ex = paper_ball(heavy=True)
    ball, ctrl = ex.model, ex.control
    det: dict = {"paper_t_detach": 3.7358}
    det["t_detach"] = {
        f"dopri8_rtol_{rtol:g}": t_detach(ball, ctrl, BALL_THETA0, tol(rtol))
        for rtol in (1e-8, 1e-10, 1e-12)
    }
    det["t_detach"]["tsit5_rtol_1e-12"] = t_detach(
        ball, ctrl, BALL_THETA0, tol(1e-12), diffrax.Tsit5()
    )
    end = detach(ball, ctrl, ex.y0, ex.t1, rtol=tol(1e-10), atol=tol(1e-10))
    N_d, F_d = ball.contact_forces(end.t, end.y, ctrl)
    det["N_at_detach"] = float(N_d)
    det["f_s_at_detach"] = float(jnp.linalg.norm(F_d))
    flight, lifts, yf0 = fly(
        ball,
        ctrl,
        end.y,
        end.t,
        end.t + 10.0,
        **(dict(rtol=SMOKE_TOL, atol=SMOKE_TOL) if smoke else {}),
    )
    det["lifts_off"] = bool(lifts)
    det["flight_initial_vertical_acceleration"] = float(
        BallFlight(ball).vector_field(end.t, yf0, ctrl)[-1]
    )
    # no dip of N below zero missed between steps: N on the dense grid before t_detach
    trh, exh = extrema(ex, tol(1e-10), t_end=float(end.t))
    det["min_N_before_detach"] = exh["min_N"]
    det["t_min_N_before_detach"] = exh["t_min_N"]
    write_figures(trh, folder, "ball-detach", float(end.t))
    # initial angles: exact CM-above-GC angles for unit masses and for the heavy masses
    det["t_detach_exact_unit_mass_angles"] = t_detach(ball, ctrl, [0.0, *th_exact], tol(1e-10))
    # with m3 = 60, no (theta2, theta3) puts the CM above the GC when theta1 = 0
    _, resid_heavy, ok_heavy = exact_angles(ball)
    det["heavy_mass_cm_above_gc_solvable"] = bool(ok_heavy and resid_heavy < 1e-10)
    det["heavy_mass_cm_residual"] = resid_heavy
    # sign conventions
    det["t_detach_control_negated"] = t_detach(
        ball, RampControl(-jnp.ones(3)), BALL_THETA0, tol(1e-10)
    )
    rev = tuple(CircleRail(r.radius, u=r.u, v=-r.v) for r in ball.rails)  # theta -> -theta
    ball_rev = Ball(
        radius=1.0,
        m0=0.1,
        inertia=(0.9, 1.0, 1.1),
        zeta0=(0, 0, -0.05),
        masses=(0.1, 0.1, 60.0),
        rails=rev,
        g=1.0,
    )
    det["t_detach_rails_reversed_angles_negated"] = t_detach(
        ball_rev, ctrl, [-a for a in BALL_THETA0], tol(1e-10)
    )
    det["t_detach_rails_reversed"] = t_detach(ball_rev, ctrl, BALL_THETA0, tol(1e-10))
    det["t_detach_no_quaternion_stabilisation"] = t_detach(
        Ball(
            radius=1.0,
            m0=0.1,
            inertia=(0.9, 1.0, 1.1),
            zeta0=(0, 0, -0.05),
            masses=(0.1, 0.1, 60.0),
            rails=ball.rails,
            g=1.0,
            quat_gain=0.0,
        ),
        ctrl,
        BALL_THETA0,
        tol(1e-10),
    )
    out["ball_detach"] = det
    out["wall_seconds"] = time.time() - t_start
    with open(os.path.join(folder, "results.json"), "w") as fh:
        json.dump(out, fh, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=HERE, help="folder to write into (default: beside this script)"
    )
    ap.add_argument("--smoke", action="store_true", help="loose tolerances (the smoke test)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    main(args.out, args.smoke)
