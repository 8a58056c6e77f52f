"""JSON-ready results of the friction paper's computations (``docs/references.md``): what
``rollax friction law|fit|limit-directions|stop`` prints, and the data of its figures; the
slide-and-spin stop (:func:`simulate_stop`, :class:`rollax.systems.SlidingStop` on
:func:`rollax.solve`)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax._core._solution import Status
from rollax._integrate._solve import solve
from rollax.models.friction.exact import ExactHertz, ExactUniform, exact_law
from rollax.analysis.friction_fit import disc_trajectory, fit_error, fit_harmonic, fit_pade
from rollax.models.friction.harmonic import HarmonicModel
from rollax.models.friction.limit_directions import PlanarBody, force_free_eps
from rollax.models.friction.linear import LinearModel
from rollax.models.friction.pade import PadeModel
from rollax.models.friction.sliding import SlidingBody
from rollax.systems.friction import SlidingStop

BODIES = ("disc", "ball")


class Stop(eqx.Module):
    """Result of :func:`simulate_stop`."""

    t_stop: Float[Array, ""]  # time at which r reached r_stop * r0 (~ the stop time)
    x_o: Float[Array, "3"]  # slip there
    eps: Float[Array, ""]  # slip-spin ratio (35) there
    stopped: Float[Array, ""]  # True if the stop event fired before tau_max


def simulate_stop(
    body: SlidingBody,
    x0: Float[Array, "3"],
    r_stop: float = 1e-12,
    tau_max: float = 400.0,
    rtol: float = 1e-10,
    atol: float = 1e-13,
) -> Stop:
    """Slide and spin from slip ``x0`` until the slip magnitude is ``r_stop * |x0|``.

    :class:`rollax.systems.SlidingStop` (the time-rescaled system (114), its time the last
    state component) on :func:`rollax.solve` until its stop event or ``tau_max``;
    jit/vmap/grad-compatible. Returns the stop time, the final slip and its slip-spin ratio
    eps (35)."""
    x0 = jnp.asarray(x0, dtype=jnp.float64)
    r0 = jnp.sqrt(jnp.sum(x0 * x0))
    y0 = jnp.concatenate([x0, jnp.zeros(1)])
    sol = solve(
        SlidingStop(body, r_stop * r0),
        y0,
        0.0,
        tau_max,
        rtol=rtol,
        atol=atol,
        max_steps=8192,
        n_samples=16,
    )
    y = jnp.asarray(sol.y)  # (rollax.solve's: a JAX array)
    x = y[:3]
    return Stop(y[3], x, body.eps(x), jnp.asarray(sol.status == Status.EVENT))


LAW_NAMES = "exact-uniform, exact-hertz, linear, pade or harmonic-N (N in 1..32)"


def _check_body(body: str) -> None:
    if body not in BODIES:
        raise ValueError(f"body = {body!r} must be one of {BODIES}")


def law_from_name(name: str, body: str = "disc"):
    """The friction law called ``name`` (exact-uniform, exact-hertz, linear, pade or harmonic-N)
    for a ``disc`` (uniform pressure) or a ``ball`` (Hertz pressure)."""
    _check_body(body)
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
    raise ValueError(f"law = {name!r} must be {LAW_NAMES}")


def law_values(pressure: str, eps) -> tuple[object, dict]:
    """The exact law of ``pressure`` (rho = R) and its normalised force Q_eps and torque T_eps
    (53) at the slip-spin ratios ``eps`` (>= 0): ``(law, data)``."""
    eps = list(eps)
    if any(not (e >= 0) for e in eps):
        raise ValueError(f"eps = {eps} must all be >= 0")
    law = exact_law(pressure, rho="R")
    e = jnp.asarray(eps, dtype=jnp.float64)
    Q = np.asarray(law.Q_eps(e)).tolist()
    T = np.asarray(law.T_eps(e)).tolist()
    return law, {
        "pressure": pressure,
        "kappa_over_R": float(law.kappa / law.R),
        "eps": eps,
        "Q": Q,
        "T": T,
    }


def fit_report(
    pressure: str, model: str, degree: int, rho: str = "kappa"
) -> tuple[object, object, dict]:
    """Fit a ``harmonic`` (degree >= 1) or ``pade`` (degree >= 2) model to the exact law by
    gradient: ``(law, fitted model, data)`` with the coefficients, the loss and the error."""
    if model not in ("harmonic", "pade"):
        raise ValueError(f"model = {model!r} must be 'harmonic' or 'pade'")
    if degree < 1 or (model == "pade" and degree < 2):
        raise ValueError(f"degree = {degree}: must be >= 1 (harmonic) or >= 2 (pade)")
    law = exact_law(pressure, rho=rho)
    if model == "harmonic":
        fitted, loss = fit_harmonic(law, degree)
        quad = HarmonicModel.from_law(law, degree)
        params = {
            "c": np.asarray(fitted.c).tolist(),
            "s": np.asarray(fitted.s).tolist(),
            "C": np.asarray(fitted.C_coeffs()).tolist(),
            "S": np.asarray(fitted.S_coeffs()).tolist(),
            "c_quadrature": np.asarray(quad.c).tolist(),
            "s_quadrature": np.asarray(quad.s).tolist(),
        }
    else:
        fitted, loss = fit_pade(law, degree)
        p, q, r, s = fitted.coefficients()
        params = {
            "p": np.asarray(p).tolist(),
            "q": np.asarray(q).tolist(),
            "r": np.asarray(r).tolist(),
            "s": np.asarray(s).tolist(),
            "poles_free": fitted.poles_free(),
        }
    err = fit_error(fitted, law)
    data = {
        "pressure": pressure,
        "model": model,
        "degree": degree,
        "rho": rho,
        "loss": loss,
        **params,
        "error": err,
    }
    return law, fitted, data


def limit_direction_report(body: str, force: float, degree: int, lam: float = 5.0):
    """Limit directions at stick (Sect. 7.2) of a disc (uniform pressure) or a ball (Hertz,
    ``lam`` = R_bar/R) with the harmonic model of ``degree``: ``(PlanarBody, data)``."""
    _check_body(body)
    if degree < 1:
        raise ValueError(f"degree = {degree} must be >= 1")
    if not force >= 0:
        raise ValueError(f"force = {force} must be >= 0")
    exact = ExactUniform() if body == "disc" else ExactHertz()
    model = HarmonicModel.from_law(exact, degree)
    pb = (
        PlanarBody.disc(model, f=force)
        if body == "disc"
        else PlanarBody.ball(model, f=force, lam=lam)
    )
    data = {
        "body": body,
        "force": force,
        "degree": degree,
        "C": [float(v) for v in model.C_coeffs()],
        "S": [float(v) for v in model.S_coeffs()],
        "bifurcations": pb.bifurcations(),
        "limit_directions": pb.limit_directions(),
    }
    return pb, data


def bifurcation_diagram(body: PlanarBody, n_forces: int = 60, n_grid: int = 801):
    """w3 of the nontrivial limit directions over forces in (0, 1.2 F_T]: ``(forces, w3)``
    point lists, plus ``F_T``, ``F_P`` and the fold forces."""
    fs, w3s = [], []
    for f in np.linspace(1e-3, 1.2 * body.F_T(), n_forces):
        b = PlanarBody(body.law, body.a, body.b, f, body.name)
        for w in b.nontrivial(n_grid=n_grid):
            fs.append(f)
            w3s.append(w[2])
    return {
        "force": fs,
        "w3": w3s,
        "F_T": body.F_T(),
        "F_P": body.F_P(),
        "folds": [fo["F"] for fo in body.folds()],
    }


def stop_report(body: str, law_name: str, force: float = 0.0, u0=(1.0, 0.0, 1.0), lam: float = 5.0):
    """A disc or ball sliding and spinning to a stop under the law ``law_name``
    (:func:`law_from_name`): ``(SlidingBody, x0, data)`` with the stop time, the slip-spin ratio
    at the stop and the direction there (and the force-free limit direction's eps for a disc)."""
    law = law_from_name(law_name, body)
    if not force >= 0:
        raise ValueError(f"force = {force} must be >= 0")
    if body == "disc":
        sb = SlidingBody(law, F=force)
    else:
        sb = SlidingBody(law, j=0.4, R_bar=lam * float(law.R), F=force, kind="ball")
    x0 = jnp.asarray(u0, dtype=jnp.float64)
    if float(jnp.linalg.norm(x0)) == 0.0:
        raise ValueError("u0 must be nonzero (zero slip is already stuck)")
    res = simulate_stop(sb, x0)
    stopped = bool(res.stopped)
    data = {
        "body": body,
        "law": law_name,
        "force": force,
        "u0": list(u0),
        "stopped": stopped,
        # a run that did not stop has no stop time, ratio or direction (its end values were
        # reported: t_stop 3e143 and eps 9e161 for --force 5, a new-user review)
        "t_stop": float(res.t_stop) if stopped else None,
        "eps": float(res.eps) if stopped else None,
        "w_stop": (np.asarray(res.x_o) / float(jnp.linalg.norm(res.x_o))).tolist()
        if stopped
        else None,
    }
    if not stopped:
        data["note"] = (
            f"the body did not stop within the run (to t = {float(res.t_stop):.4g}): a force "
            f"near or above the largest friction force mu m g (F/(mu m g) = {force:g}) keeps "
            f"it sliding"
        )
    if force == 0.0 and body == "disc":
        pb = PlanarBody.disc(law) if hasattr(law, "C_w") else None
        if pb is not None:
            data["eps_limit_direction"] = force_free_eps(pb)
    return sb, x0, data


def stop_curves(body: SlidingBody, x0, t_stop: float, n: int = 200):
    """|u| and rho |omega| on [0, 0.98 t_stop] of a stop run: ``(t, |u|, rho |omega|)``."""
    ts = jnp.linspace(0.0, 0.98 * t_stop, n)
    xs = np.asarray(disc_trajectory(body, x0, ts))
    return np.asarray(ts), np.hypot(xs[:, 0], xs[:, 1]), np.abs(xs[:, 2])


def law_curves(law, n: int = 400):
    """Q_eps and T_eps of ``law`` on ``n`` log-spaced eps in [1e-2, 1e2]: ``(eps, Q, T)``."""
    e = np.logspace(-2, 2, n)
    return e, np.asarray(law.Q_eps(jnp.asarray(e))), np.asarray(law.T_eps(jnp.asarray(e)))


def fit_curves(law, model, n: int = 300) -> dict:
    """Q and T of the exact ``law`` and a fitted ``model`` over theta in [0, pi/2]."""
    th = np.linspace(0, np.pi / 2, n)
    t = jnp.asarray(th)
    return {
        "theta": th,
        "Q_law": np.asarray(law.Q_theta(t)),
        "Q_model": np.asarray(model.Q_theta(t)),
        "T_law": np.asarray(law.T_theta(t)),
        "T_model": np.asarray(model.T_theta(t)),
    }
