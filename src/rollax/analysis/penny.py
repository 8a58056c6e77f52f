"""The bouncing penny: a vertical rolling disk on a table with walls (Clark & Bloch, Sects. V-VI).

The model (:class:`Penny`, the tables, :class:`PennyBilliard` and its impact laws) is in
``rollax.models._penny`` and re-exported here. Impact sequences, their batches, finite-time Lyapunov
exponents and the paper's Fig. 5 go through the shared machinery: each flight is one
:func:`rollax.solve` of :class:`rollax.systems.PennySystem` (the closed-form flow (26) as the
system's own flow, the table edge at both ends as events, the impact law as the reset), so
impact times are located by :mod:`rollax._core.events` and differentiated by the implicit function
theorem like every other event in rollax. The billiard's own closed-form search
(:meth:`PennyBilliard.simulate`) is kept as the independent reference the tests compare with.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

from rollax.models._penny import (
    _STATE8,
    CHAOS_TIMES,
    FAILED,
    GLANCING,
    FlightStatus,
    IMPACT,
    NO_IMPACT,
    OUTSIDE,
    STATE_FIELDS,
    STATUS_NAMES,
    TABLES,
    CustomTable,
    EllipseTable,
    ImpactSequence,
    Penny,
    PennyBilliard,
    circle_table,
    dynamic,
    impact_sequence,
    lagrange_dalembert_vector_field,
    paper_billiard,
    sequence_records,
)
from rollax._integrate._solve import solve
from rollax._core._validate import check_integer, check_shape
from rollax.systems.penny import PennyOutcome, PennySystem

__all__ = [
    "CHAOS_TIMES",
    "FAILED",
    "FlightStatus",
    "GLANCING",
    "IMPACT",
    "NO_IMPACT",
    "OUTSIDE",
    "STATE_FIELDS",
    "STATUS_NAMES",
    "TABLES",
    "FTLE",
    "Chaos",
    "ChaosCase",
    "CustomTable",
    "EllipseTable",
    "ImpactSequence",
    "Penny",
    "PennyBilliard",
    "chaos",
    "circle_table",
    "dynamic",
    "flight",
    "ftle",
    "ftle_batch",
    "lagrange_dalembert_vector_field",
    "paper_billiard",
    "sequence_records",
    "simulate",
    "simulate_batch",
]

# PennyOutcome -> the status of an impact record
_STATUS_OF = {
    PennyOutcome.DONE: IMPACT,
    PennyOutcome.FLYING: NO_IMPACT,
    PennyOutcome.GLANCING: GLANCING,
    PennyOutcome.OUTSIDE: OUTSIDE,
    PennyOutcome.FAILED: FAILED,
}


def flight(
    billiard: PennyBilliard,
    state: Float[ArrayLike, "8"],
    adjoint: str | None = None,
):
    """One flight from ``state`` to the next impact and that impact, by :func:`rollax.solve` of
    ``PennySystem(billiard, n_impacts=1)`` over the billiard's horizon (the time by which the
    flight must leave a convex table, or one period of its circle).

    Returns ``(post, pre, tau, end, status)`` as :meth:`PennyBilliard.step`: the post-impact
    state (``state`` itself unless ``status`` is IMPACT), the state at the edge (the flow (26)
    at ``tau``), the flight time, the end that hit (0 front, 1 back) and the record status
    (IMPACT, NO_IMPACT, GLANCING, OUTSIDE or FAILED). Differentiable in ``state`` and the
    billiard's parameters; forward mode needs ``adjoint="forward"`` (see :func:`rollax.solve`).
    """
    s = jnp.asarray(state, float)
    system = PennySystem(billiard, n_impacts=1)
    # the search horizon carries no derivative (and arcsin's slope is infinite at its edge)
    T = jax.lax.stop_gradient(billiard._horizon(s)[0])
    sol = solve(system, s, 0.0, T, adjoint=adjoint)
    oc = system.outcome(sol)
    status = jnp.select([oc == k for k in _STATUS_OF], list(_STATUS_OF.values()), FAILED).astype(
        jnp.int32
    )
    tau = sol.t
    pre = billiard.penny.flow(s, tau)
    ok = status == IMPACT
    return jnp.where(ok, sol.y, s), pre, tau, sol.event % 2, status


def _sequence(billiard: PennyBilliard, s0, n_impacts: int) -> ImpactSequence:
    return impact_sequence(lambda s: flight(billiard, s), billiard.penny.energy, s0, n_impacts)


@eqx.filter_jit
def _simulate(billiard, s0, n_impacts):
    return _sequence(billiard, s0, n_impacts)


def simulate(
    billiard: PennyBilliard, state0: Float[ArrayLike, "8"], n_impacts: int
) -> ImpactSequence:
    """The first ``n_impacts`` impacts from ``state0``: one :func:`flight` per impact (jitted;
    ``n_impacts`` static, one compilation per billiard structure).

    The sequence stops (NaN records, status repeated) at the first flight that never reaches
    the edge (NO_IMPACT), touches it tangentially (GLANCING, time and pre-impact state kept),
    starts off the table (OUTSIDE) or fails (FAILED). Differentiable in reverse mode.
    """
    n_impacts = check_integer("n_impacts", n_impacts, 1)
    check_shape("state0", state0, (8,), _STATE8)
    billiard.penny.check_rolling(state0)
    return _simulate(billiard, jnp.asarray(state0, float), n_impacts)


@eqx.filter_jit
def _simulate_batch(billiard, states0, n_impacts):
    return jax.vmap(lambda s: _sequence(billiard, s, n_impacts))(states0)


def simulate_batch(
    billiard: PennyBilliard, states0: Float[ArrayLike, "B 8"], n_impacts: int
) -> ImpactSequence:
    """:func:`simulate` vmapped over a batch of initial states (jitted)."""
    n_impacts = check_integer("n_impacts", n_impacts, 1)
    states0 = jnp.asarray(states0, float)
    if states0.ndim != 2 or states0.shape[1] != 8:
        raise ValueError(
            f"states0 has shape {tuple(states0.shape)}; it must be (B, 8), rows "
            f"(x, y, theta, phi, x', y', theta', phi')"
        )
    billiard.penny.check_rolling(states0, "states0")
    return _simulate_batch(billiard, states0, n_impacts)


class FTLE(NamedTuple):
    """Result of :func:`ftle`: exponent per impact and per second over the impacts used, their
    number, and the log-stretch and flight time of every impact (0 after the sequence stops), from
    which the exponent after any n impacts follows as cumsum(log_stretch)[n-1]/n."""

    per_impact: Float[Array, ""]
    per_second: Float[Array, ""]
    n_used: Int[Array, ""]
    log_stretch: Float[Array, " N"]
    flight_times: Float[Array, " N"]


def ftle(
    billiard: PennyBilliard,
    state0: Float[ArrayLike, "8"],
    n_impacts: int,
    weights: Float[ArrayLike, "8"] | None = None,
    tangent0: Float[ArrayLike, "8"] | None = None,
) -> FTLE:
    """Finite-time (maximal) Lyapunov exponent of the impact map along one trajectory.

    A tangent vector is pushed through each flight + impact by forward-mode autodiff (jvp of
    :func:`flight` in forward mode: the implicit derivative of the impact time,
    then the impact map) and renormalised after every impact in the norm |diag(weights) v|.
    Default weights measure (x, y) in table diameters, phi in radians and the rates relative to
    |theta_dot(0)|; theta (cyclic) and x_dot, y_dot (slaved by (23)) get weight 0.
    ``tangent0``: initial tangent vector (default: a fixed generic direction). If the sequence
    stops early (NO_IMPACT, GLANCING, FAILED) the exponent is taken over the impacts before that.
    """
    n_impacts = check_integer("n_impacts", n_impacts, 1)
    check_shape("state0", state0, (8,), _STATE8)
    s0 = jnp.asarray(state0, float)
    if weights is None:
        Dm = jnp.asarray(billiard.table.diameter, float)
        wr = 1.0 / jnp.maximum(jnp.abs(s0[6]), 1e-300)
        weights = jnp.stack([1 / Dm, 1 / Dm, 0.0, 1.0, 0.0, 0.0, wr, wr])
    w = jnp.asarray(weights, float)
    # a fixed generic direction in the weighted subspace, unit in the weighted norm
    if tangent0 is None:
        d = jnp.asarray([1.0, -0.7, 0.0, 0.3, 0.0, 0.0, 0.9, -0.4])
        tangent0 = jnp.where(w > 0, d / jnp.where(w > 0, w, 1.0), 0.0)
    v0 = jnp.asarray(tangent0, float)
    v0 = v0 / jnp.linalg.norm(w * v0)

    def step(s):
        return flight(billiard, s, "forward")

    def body(c, _):
        s, v, ok = c
        (post, _, tau, _, status), (dpost, *_rest) = jax.jvp(step, (s,), (v,))
        good = ok & (status == IMPACT)
        nrm = jnp.linalg.norm(w * dpost)
        log_k = jnp.where(good, jnp.log(jnp.where(good, nrm, 1.0)), 0.0)
        v2 = jnp.where(good, dpost / jnp.where(good, nrm, 1.0), v)
        return (jnp.where(good, post, s), v2, good), (log_k, jnp.where(good, tau, 0.0), good)

    _, (logs, taus, goods) = jax.lax.scan(body, (s0, v0, jnp.asarray(True)), None, length=n_impacts)
    n = jnp.sum(goods)
    acc = jnp.sum(logs)
    t = jnp.sum(taus)
    return FTLE(acc / jnp.maximum(n, 1), acc / jnp.where(t > 0, t, 1.0), n, logs, taus)


@eqx.filter_jit
def ftle_batch(billiard: PennyBilliard, states0: Float[ArrayLike, "B 8"], n_impacts: int):
    """:func:`ftle` vmapped over a batch of initial states (jitted)."""
    return jax.vmap(lambda s: ftle(billiard, s, n_impacts))(jnp.asarray(states0, float))


# --------------------------------------------------------------- the paper's experiments
class ChaosCase(NamedTuple):
    """One (law, table) case of :func:`chaos`: the billiard, the sample times and the
    ensemble's positions ``(n_samples, len(times), 2)`` (NaN where a member has stopped)."""

    billiard: PennyBilliard
    times: tuple[float, ...]
    positions: object


class Chaos(NamedTuple):
    """:func:`chaos`: the JSON-ready ``summary`` and the ``cases`` keyed ``"<law>_<table>"``."""

    summary: dict
    cases: dict


def chaos(
    n_samples: int = 100,
    seed: int = 0,
    glancing_tol: float = 1e-6,
    n_impacts: int = 100,
    n_ftle: int = 100,
    progress: bool = True,
) -> Chaos:
    """Fig. 5 and FTLEs for elastic/plastic impacts on the circle and the ellipse (Sect. VI).

    The ensemble: the initial state of Sect. VI-A with theta_dot and phi_dot perturbed uniformly
    by less than 0.005, followed for ``n_impacts`` impacts; positions at the times
    :data:`CHAOS_TIMES` (plastic runs stop earlier: they end grazing the edge). FTLE:
    :func:`ftle` over ``n_ftle`` impacts for the nominal state and each member; also the
    ensemble's rms position spread at each time. ``progress``: a bar on stderr over the eight
    batches (each case's impact sequences, then its FTLEs), each named as it runs; the first
    of each kind compiles (minutes on a CPU), the others reuse it.
    """
    import numpy as np
    from tqdm.auto import tqdm

    n_samples = check_integer("n_samples", n_samples, 1)
    n_impacts = check_integer("n_impacts", n_impacts, 1)
    n_ftle = check_integer("n_ftle", n_ftle, 1)
    rng = np.random.default_rng(seed)
    pert = rng.uniform(-0.005, 0.005, size=(n_samples, 2))
    result = {
        "n_samples": n_samples,
        "seed": seed,
        "perturbation": "uniform in (-0.005, 0.005) on theta_dot and phi_dot",
        "n_impacts_ftle": n_ftle,
        "cases": {},
    }
    cases = {}
    bar = tqdm(
        total=4 * len(TABLES),
        desc="penny chaos",
        unit="batch",
        disable=not progress,
        bar_format="{desc}: {n}/{total} batches [{elapsed}<{remaining}] {postfix}",
    )
    for law in ("elastic", "plastic"):
        times = CHAOS_TIMES[law]
        for table in TABLES:
            first = law == "elastic" and table == TABLES[0]
            bar.set_postfix_str(
                f"{law} {table}: {n_samples} impact sequences"
                + (" (compiling first)" if first else "")
            )
            b = paper_billiard(table, law, 1.0, glancing_tol)
            p = b.penny
            s_nom = p.state()
            states = jnp.stack([p.state(theta_dot=10.0 + d1, phi_dot=0.2 + d2) for d1, d2 in pert])
            seq = simulate_batch(b, states, n_impacts)
            at = jax.vmap(lambda s, q: jax.vmap(lambda t: b.state_at(s, q, t))(jnp.asarray(times)))(
                states, seq
            )
            pos = np.asarray(at)[:, :, :2]  # (samples, times, 2)
            spread = []
            for j in range(len(times)):
                pj = pos[:, j][np.isfinite(pos[:, j, 0])]
                spread.append(
                    float(np.sqrt(np.mean(np.sum((pj - pj.mean(0)) ** 2, -1)))) if len(pj) else None
                )
            bar.update(1)
            bar.set_postfix_str(
                f"{law} {table}: {n_samples + 1} FTLEs" + (" (compiling first)" if first else "")
            )
            res = ftle_batch(b, jnp.concatenate([s_nom[None], states]), n_ftle)
            bar.update(1)
            lam_k, lam_t, used = (np.asarray(v) for v in res[:3])
            logs = np.asarray(res.log_stretch[0])
            n_nom = int(used[0])
            history = {
                str(n): float(np.sum(logs[:n]) / n) for n in (10, 25, 50, 100, 200) if n <= n_nom
            }
            status = np.asarray(seq.status)
            name = f"{law}_{table}"
            result["cases"][name] = {
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
                "valid_positions_per_time": [
                    int(np.sum(np.isfinite(pos[:, j, 0]))) for j in range(len(times))
                ],
                "members_stopped_glancing": int(np.sum(np.any(status == 2, axis=1))),
                "members_stopped_no_impact": int(np.sum(np.any(status == 1, axis=1))),
            }
            cases[name] = ChaosCase(b, times, pos)
    bar.close()
    return Chaos(result, cases)
