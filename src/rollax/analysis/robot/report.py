"""The examples of the ball-robot friction paper (``docs/references.md``) as JSON-ready
results: what ``rollax robot disk|ball|ball-detach`` prints."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from rollax.models.robot.examples import paper_ball, paper_disk
from rollax.analysis.robot.phases import detach, fly
from rollax.analysis.robot.trajectory import Trajectory, contact_extrema, quaternion_drift, simulate

EXAMPLES = ("disk", "ball", "ball-detach")


def _f(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


class ExampleReport(NamedTuple):
    """``results`` (JSON-ready), the rolling trajectory on [0, t1] and the end time ``t_stop``
    of the analysed interval (the detachment time for ``ball-detach``)."""

    results: dict
    trajectory: Trajectory
    t_stop: float


def example_report(example: str, rtol: float | None = None) -> ExampleReport:
    """mu_hat (1.3), its time, the smallest normal force and its time of one example of the
    paper (``disk``: Sect. 5; ``ball``: Sect. 6; ``ball-detach``: Sect. 6 with m3 = 60, with
    the detachment time, the forces there and the free flight of Appendix B), next to the
    paper's values. ``rtol`` (also the atol): default the paper's tolerance."""
    if example not in EXAMPLES:
        raise ValueError(f"example = {example!r} must be one of {EXAMPLES}")
    if rtol is not None and not (0.0 < rtol < 1.0):
        raise ValueError(f"rtol = {rtol!r} is outside the allowed range (0, 1)")
    ex = paper_disk() if example == "disk" else paper_ball(heavy=example == "ball-detach")
    tol = ex.rtol if rtol is None else rtol
    res: dict = {"example": example, "rtol": tol, "atol": tol}
    if example == "ball-detach":
        end = detach(ex.model, ex.control, ex.y0, ex.t1, rtol=tol, atol=tol)
        t_d = float(end.t) if bool(end.hit) else None
        res["t_detach"] = t_d
        res["t_detach_paper"] = 3.7358
        t_stop = t_d if t_d is not None else ex.t1
        N_d, F_d = ex.model.contact_forces(end.t, end.y, ex.control)
        res["N_at_detach"] = _f(N_d)
        res["f_s_at_detach"] = _f(jnp.linalg.norm(F_d))
        if t_d is not None:
            flight, lifts, _ = fly(
                ex.model, ex.control, end.y, end.t, end.t + 10.0, rtol=tol, atol=tol
            )
            res["lifts_off"] = bool(lifts)
            res["t_touchdown"] = float(flight.t) if bool(lifts) and bool(flight.hit) else None
    else:
        t_stop = ex.t1
    # the rolling motion on [0, t1]; for ball-detach its extrema are taken on [0, t_detach]
    traj = simulate(ex.model, ex.control, ex.y0, ex.t1, rtol=tol, atol=tol)
    mu, t_mu, min_n, t_n = contact_extrema(traj, t_stop)
    if example == "ball-detach":
        # f_s/N diverges as N -> 0 at detachment: no finite mu_hat on [0, t_detach]
        res.update(mu_hat=None, t_mu_hat=None)
    else:
        res.update(
            mu_hat=_f(mu), t_mu_hat=_f(t_mu), mu_hat_paper=0.2951 if example == "disk" else 0.19
        )
    res.update(min_N=_f(min_n), t_min_N=_f(t_n), t_end=float(t_stop))
    if example != "disk":
        res["quaternion_drift"] = _f(quaternion_drift(traj))  # over [0, t1]
    return ExampleReport(res, traj, t_stop)
