"""Identification presets: the rim seen by a camera, and the sliding disc's record.

Built on :func:`rollax.identify` (``rollax._drivers._identify``):

* :func:`read_rim_csv` / :func:`rim_observations`: the ball centre as a camera on the rim axis
  sees it, ``t, d, z, alpha`` (s, m, m, rad) with ``d = R - rho cos(beta)``,
  ``z = rho sin(beta)`` and alpha the unwrapped angle around the rim of eq. (19) (rim paper);
  :func:`fit_rim` fits rates (``k_d``, ``k_r`` of (83)), other :class:`rollax.models.rim.Rim` fields
  and the initial state ``(beta, w1, w2, w3, alpha)``;
* :func:`fit_slide`: mu and the contact-pressure model (uniform (56) or Hertz (61), friction
  paper) of a disc or ball sliding and spinning on a plane, from its slip speed and spin rate.
* :func:`fit_bounce`: the shot's contact parameters (restitution, friction) from a filmed
  bounce on the rim or the board; :func:`fit_flight`: its drag coefficient from a filmed free
  flight (a bounce's short flights do not determine it).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import warnings
from typing import Sequence

import numpy as np

import equinox as eqx
import jax
import jax.numpy as jnp

from rollax._drivers._identify import (
    Fit,
    IdentifiabilityWarning,
    Observations,
    _EventlessFlow,
    _noise_guess,
    identify,
)
from rollax._integrate._solve import solve
from rollax.models.friction.exact import exact_law
from rollax.models.friction.sliding import SlidingBody
from rollax.models.rim import Rim
from rollax.systems.friction import Sliding
from rollax.systems.rim import RimTracked

RIM_COLUMNS = ("t", "d", "z", "alpha")
RIM_FIELDS = ("r", "a", "R", "j", "g", "k_d", "k_r")


def rim_observations(t, d, z, alpha, *, sigma=None, t_event=None, sigma_event=None) -> Observations:
    """:class:`rollax.Observations` of the camera observables ``(d, z, alpha)`` of
    :class:`rollax.systems.RimTracked`. ``sigma``: ``(sigma_d, sigma_z, sigma_alpha)`` (m, m,
    rad; ``None`` entries or ``None``: estimated). ``t_event``: when the ball left the rim [s]."""
    vals = np.stack([np.asarray(d, float), np.asarray(z, float), np.asarray(alpha, float)], 1)
    if sigma is not None and any(s is None for s in sigma):
        if not all(s is None for s in sigma):
            raise ValueError(
                f"sigma = {list(sigma)!r}: give all three noise levels or none "
                f"(the missing ones are estimated together)"
            )
        sigma = None
    return Observations(
        np.asarray(t, float),
        vals,
        "camera",
        ("d", "z", "alpha"),
        sigma=sigma,
        t_event=t_event,
        sigma_event=sigma_event,
    )


def read_rim_csv(path: str | os.PathLike) -> tuple[np.ndarray, ...]:
    """Columns ``t, d, z, alpha`` of a CSV file with exactly that header (s, m, m, rad): UTF-8
    text (a binary file or another encoding is refused by name). Their units and spacing are
    checked by :func:`rollax.identify` (:func:`rollax._drivers._identify.check_record`)."""
    _, out = _read_csv(path, (RIM_COLUMNS,))
    return tuple(out[:, k] for k in range(4))


def _read_csv(path, headers: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], np.ndarray]:
    """The header (one of ``headers``) and the numbers of a CSV file, or a one-line
    ``ValueError`` naming the file, the line and the column."""
    want = " or ".join(",".join(h) for h in headers)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            text = fh.read()
    except OSError as err:
        raise ValueError(f"data = {str(path)!r} cannot be read ({err.strerror})") from None
    except UnicodeDecodeError:
        # (the codec's message, "'utf-8' codec can't decode byte 0x89 in position 0", named
        # neither the file nor what it should be)
        raise ValueError(
            f"data = {str(path)!r} is not a text CSV file (binary, or text not in UTF-8); "
            f"it must be UTF-8 text with the header {want}"
        ) from None
    if "\x00" in text:
        raise ValueError(
            f"data = {str(path)!r} is not a text CSV file (it holds NUL bytes: binary); it "
            f"must be UTF-8 text with the header {want}"
        )
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise ValueError(f"data = {str(path)!r} is empty; it needs the header {want}")
    header = tuple(h.strip() for h in rows[0])
    if header not in headers:
        known = set().union(*headers)
        unknown = [h for h in header if h not in known]
        nearest = min(headers, key=lambda h: len(set(h) ^ set(header)))
        missing = [h for h in nearest if h not in header]
        why = (
            f"unknown column {unknown[0]!r}"
            if unknown
            else f"missing column {missing[0]!r}"
            if missing
            else "columns out of order"
        )
        raise ValueError(
            f"data = {str(path)!r} has the header {','.join(header)} ({why}); it must be {want}"
        )
    m = len(header)
    out = np.empty((len(rows) - 1, m))
    for i, row in enumerate(rows[1:]):
        if len(row) != m:
            raise ValueError(f"data = {str(path)!r}, line {i + 2}: {len(row)} values, {m} needed")
        for k, cell in enumerate(row):
            try:
                out[i, k] = float(cell)
            except ValueError:
                raise ValueError(
                    f"data = {str(path)!r}, line {i + 2}: {header[k]} = {cell!r} is not a number"
                ) from None
    return header, out


def write_rim_csv(path: str | os.PathLike, t, d, z, alpha) -> None:
    """The inverse of :func:`read_rim_csv`."""
    np.savetxt(
        path,
        np.stack([t, d, z, alpha], 1),
        delimiter=",",
        header="t,d,z,alpha",
        comments="",
        fmt="%.10g",
    )


def fit_rim(
    observations: Observations,
    *,
    rim: Rim | None = None,
    fit: Sequence[str] = ("k_d", "k_r"),
    progress=True,
    **kw,
) -> Fit:
    """Fit the :class:`Rim` fields ``fit`` and the initial state to camera observations.

    Starts from ``rim`` (default: the Table 1 ball with no dissipation) and the state read
    from the first samples (:meth:`RimTracked.state_from_camera`)."""
    fit = (fit,) if isinstance(fit, str) else tuple(fit)
    for name in fit:
        if name not in RIM_FIELDS:
            raise ValueError(
                f"fit: {name!r} is not a rim parameter; allowed: {', '.join(RIM_FIELDS)}"
            )
    return identify(RimTracked(rim or Rim()), observations, fit, progress=progress, **kw)


def fit_slide(
    t,
    speed,
    spin,
    *,
    m: float = 1.0,
    j: float = 0.5,
    R_bar: float = 0.1,
    R: float = 0.05,
    g: float = 9.81,
    kind: str = "disc",
    pressures: Sequence[str] = ("uniform", "hertz"),
    sigma=None,
    progress=True,
) -> dict:
    """mu and the contact-pressure model of a body sliding and spinning to a stop.

    ``speed`` [m/s] and ``spin`` [rad/s] sampled at ``t`` before the stop; the body (mass ``m``,
    inertia ratio ``j``, radius ``R_bar``, contact radius ``R``, ``kind`` 'disc' or 'ball') is
    known. Each pressure model is fitted (mu and the initial slip ``u_x``, spin ``rho w_z``);
    mu starts from the mean deceleration over g (a lower bound: the friction force is at most
    mu m g, so the model does not stop before the data end). The chosen model has the least
    chi-square with the noise levels common to all fits (given, or estimated from the data);
    when another model's chi-square is within :data:`DECISIVE_DCHI2` of it, the record cannot
    choose (``decided`` False, and an :class:`rollax.IdentifiabilityWarning`).
    Returns ``{"best": name, "fits": {name: Fit}, "chi2": {name: float}, "decided": bool}``."""
    t = np.asarray(t, float)
    vals = np.stack([np.asarray(speed, float), np.asarray(spin, float)], 1)
    obs = Observations(t, vals, "record", ("speed", "spin"), sigma=sigma)
    if obs.sigma is None:
        obs = obs.with_sigma(_noise_guess(obs.values))
    a = (obs.values[0, 0] - obs.values[-1, 0]) / (obs.t[-1] - obs.t[0])
    mu0 = max(a / g, 1e-3)
    fits, chi2 = {}, {}
    for p in pressures:
        body = SlidingBody(exact_law(p, mu=mu0, P=m * g, R=R), m=m, j=j, R_bar=R_bar, kind=kind)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = identify(
                Sliding(body), obs, ["mu"], fit_y0=("u_x", "rho_omega_z"), progress=progress
            )
        fits[p] = f
        chi2[p] = 2.0 * f.cost
    best = min(chi2, key=lambda p: chi2[p])
    for w in fits[best].warnings:
        warnings.warn(w, stacklevel=2)
    # the models fit the same three quantities, so the chi-square difference is twice the log
    # likelihood ratio; below DECISIVE_DCHI2 the record cannot choose (a slide without spin:
    # both models give the friction force mu m g, and chi2 differed by 0.001 -- a new-user
    # review found "best" reported with no warning)
    others = sorted(chi2[p] - chi2[best] for p in chi2 if p != best)
    decided = not others or others[0] >= DECISIVE_DCHI2
    if not decided:
        warnings.warn(
            f"the record cannot choose the pressure model: chi2 "
            f"{', '.join(f'{p} {chi2[p]:.6g}' for p in chi2)} (a difference of "
            f"{others[0]:.3g} < {DECISIVE_DCHI2:g}); '{best}' is the nearer fit only. A record "
            f"with more spin, or one that reaches the stop, tells them apart",
            IdentifiabilityWarning,
            stacklevel=2,
        )
    return {"best": best, "fits": fits, "chi2": chi2, "decided": decided}


#: The chi-square difference :func:`fit_slide` needs to choose a pressure model (a likelihood
#: ratio of e^2 = 7.4)
DECISIVE_DCHI2 = 4.0


def fit_summary(fit: Fit) -> str:
    """One line per fitted quantity (value +- standard error), then the profile intervals,
    chi^2 and the status: ``str(fit)`` (:meth:`rollax.Fit.__str__`)."""
    return str(fit)


def simulate_camera(
    rim: Rim,
    y0,
    t_end: float,
    *,
    hz: float = 240.0,
    noise=(1e-3, 1e-3, 2e-3),
    seed: int = 0,
    rtol: float = 1e-11,
):
    """Synthetic camera data: ``(t, d, z, alpha, t_sep)`` sampled at ``hz`` from ``y0``
    (``(beta, w1, w2, w3, alpha)``) until the ball leaves the rim or ``t_end``, with Gaussian
    noise of standard deviations ``noise`` (m, m, rad). Integrated by :func:`rollax.solve`."""
    system = RimTracked(rim)
    y0 = jnp.asarray(y0, float)
    end = solve(system, y0, 0.0, float(t_end), rtol=rtol, atol=rtol)
    t_sep = float(end.t) if int(end.status) == 0 else math.nan
    t_last = t_sep if math.isfinite(t_sep) else float(t_end)
    t = np.arange(0.0, t_last, 1.0 / hz)
    sol = solve(
        _EventlessFlow(system), y0, 0.0, float(t[-1]), ts=jnp.asarray(t), rtol=rtol, atol=rtol
    )
    ys = np.asarray(sol.ys)
    R, rho = float(rim.R), float(rim.rho)
    clean = np.stack([R - rho * np.cos(ys[:, 0]), rho * np.sin(ys[:, 0]), ys[:, 4]], 1)
    noisy = clean + np.random.default_rng(seed).normal(size=clean.shape) * np.asarray(noise)
    return t, noisy[:, 0], noisy[:, 1], noisy[:, 2], t_sep


# ---------------------------------------------------------------------- the shot's bounces
BOUNCE_COLUMNS = ("t", "x", "y", "z")
BOUNCE_SPIN_COLUMNS = BOUNCE_COLUMNS + ("omega_x", "omega_y", "omega_z")
#: the Shot parameters a filmed bounce can tell (and their units)
BOUNCE_FIELDS = {"e_rim": "1", "mu_rim": "1", "e_board": "1", "mu_board": "1", "c_d": "1"}


def bounce_observations(t, centre, spin=None, *, sigma=None, sigma_spin=None) -> Observations:
    """:class:`rollax.Observations` of a filmed bounce for :class:`rollax.systems.Shot`: the
    ball centre ``centre`` (n, 3) in m in the hoop's frame (origin at the hoop's centre in the
    rim plane, ``x`` towards the board, ``z`` up) at the times ``t`` (s), and where the film
    shows it the spin ``spin`` (n, 3) in rad/s (observed by :meth:`Shot.camera_spin`, else
    :meth:`Shot.camera`). ``sigma`` (m) and ``sigma_spin`` (rad/s): the noise levels
    (``None``: estimated from the residuals)."""
    c = np.asarray(centre, float)
    if c.ndim != 2 or c.shape[1] != 3:
        raise ValueError(f"centre has shape {c.shape}; it must be (n, 3): x, y, z in m")
    if spin is None:
        vals, names, observe = c, BOUNCE_COLUMNS[1:], "camera"
        sig = None if sigma is None else (float(sigma),) * 3
    else:
        w = np.asarray(spin, float)
        if w.shape != c.shape:
            raise ValueError(f"spin has shape {w.shape}; it must be {c.shape} like centre")
        vals, names, observe = np.concatenate([c, w], 1), BOUNCE_SPIN_COLUMNS[1:], "camera_spin"
        if (sigma is None) != (sigma_spin is None):
            raise ValueError(
                f"sigma = {sigma!r}, sigma_spin = {sigma_spin!r}: give both noise levels or "
                f"neither (then both are estimated)"
            )
        sig = None if sigma is None else (float(sigma),) * 3 + (float(sigma_spin or 0.0),) * 3
    return Observations(
        np.asarray(t, float), vals, observe, names, sigma=None if sig is None else np.asarray(sig)
    )


def read_bounce_csv(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(t, centre, spin)`` of a CSV file with the header ``t,x,y,z`` (s, m, m, m) or
    ``t,x,y,z,omega_x,omega_y,omega_z`` (the spin in rad/s; ``spin`` is ``None`` without)."""
    header, out = _read_csv(path, (BOUNCE_COLUMNS, BOUNCE_SPIN_COLUMNS))
    return out[:, 0], out[:, 1:4], out[:, 4:7] if len(header) == 7 else None


def write_bounce_csv(path: str | os.PathLike, t, centre, spin=None) -> None:
    """The inverse of :func:`read_bounce_csv`."""
    cols = [np.asarray(t, float)[:, None], np.asarray(centre, float)]
    header = BOUNCE_COLUMNS
    if spin is not None:
        cols.append(np.asarray(spin, float))
        header = BOUNCE_SPIN_COLUMNS
    np.savetxt(
        path, np.concatenate(cols, 1), delimiter=",", header=",".join(header), comments="",
        fmt="%.10g",
    )  # fmt: skip


def bounce_contact(observations: Observations, shot=None) -> dict:
    """What a filmed bounce hit and how, read off the record without a fit: ``kind``
    (``"rim"`` or ``"board"``), the contact time ``t`` (s) and ``centre`` (m), the normal
    ``n``, the index ``split`` of the first sample after it, and the restitution ``e`` and
    impulse ratio ``mu_min`` of the velocity jump (the normal velocity's ratio, and
    |tangential / normal impulse|: mu itself where the impact slid, a lower bound where it
    stuck; the contact point's normal velocity is the centre's).
    The bounce is where the record splits best into two flights
    (:func:`rollax.systems.shot.bounce_split`); the contact is where the two parabolas meet,
    and it is the rim or the board, whichever gap (to the torus; to the board) is the smaller
    there. A ``ValueError`` if the split is no bounce (the velocities either side agree
    within 10 times their noise) or the ball is near neither (the frame or units are off)."""
    from rollax.models import shot as _model
    from rollax.systems.shot import Shot, _parabola, bounce_split

    shot = Shot() if shot is None else shot
    t, c = observations.t, observations.values[:, :3]
    g = float(shot.g)
    k = bounce_split(t, c, g)
    c1, v1, s1 = _parabola(t[:k] - t[0], c[:k], g)
    c2, v2, s2 = _parabola(t[k:] - t[k], c[k:], g)
    # the two flights meet at the contact: the time between samples k-1 and k where the
    # parabolas are nearest, and the velocity jump there
    ts = np.linspace(t[k - 1], t[k], 64)
    gz = np.array([0.0, 0.0, 0.5 * g])
    p1 = c1 + np.outer(ts - t[0], v1) - np.outer((ts - t[0]) ** 2, gz)
    p2 = c2 + np.outer(ts - t[k], v2) - np.outer((ts - t[k]) ** 2, gz)
    i = int(np.argmin(np.linalg.norm(p1 - p2, axis=1)))
    t_c, centre = float(ts[i]), 0.5 * (p1[i] + p2[i])
    u1 = v1 - np.array([0.0, 0.0, g]) * (t_c - t[0])
    u2 = v2 - np.array([0.0, 0.0, g]) * (t_c - t[k])
    # the noise of a position, and the error of a parabola's velocity through n/2 samples
    # over half the span: ~ noise sqrt(12 / n) / T
    noise = math.sqrt((s1 + s2) / max(3 * len(t) - 12, 1))
    span = float(t[-1] - t[0])
    dv = float(np.linalg.norm(u2 - u1))
    if dv < 10 * noise * math.sqrt(12.0 / max(len(t) / 2, 1)) / max(span / 2, 1e-9):
        raise ValueError(
            f"data: no bounce found (the velocity changes by {dv:.3g} m/s at t = {t_c:.4g} s, "
            f"within the noise); a bounce record holds the flight before and after one "
            f"impact on the rim or the board"
        )
    R, a, r = float(shot.R), float(shot.a), float(shot.r)
    x_b, w, z_lo, z_hi = (float(v) for v in shot._board())
    cj = jnp.asarray(centre)
    gaps = {
        "rim": abs(float(_model.rim_gap(cj, R, a, r))),
        "board": abs(float(_model.board_gap(cj, x_b, w, z_lo, z_hi, r))),
    }
    kind = min(gaps, key=lambda k_: gaps[k_])
    if gaps[kind] > 0.05:
        raise ValueError(
            f"data: the bounce at t = {t_c:.4g} s is at ({centre[0]:.3f}, {centre[1]:.3f}, "
            f"{centre[2]:.3f}) m, {100 * gaps[kind]:.1f} cm from the {kind}, the nearer "
            f"contact: the centre must be in m in the hoop's frame (origin at the hoop's "
            f"centre in the rim plane, x towards the board, z up); a free flight has no "
            f"contact parameters (its drag: fit_flight, or rollax identify shot --fit c_d)"
        )
    if kind == "rim":
        n = np.asarray(_model.rim_normal(cj, R))
    else:
        n = np.asarray(_model.board_normal(cj, x_b, w, z_lo, z_hi))
    dv_ = u2 - u1
    dv_n = float(dv_ @ n)
    e = -float(u2 @ n) / min(float(u1 @ n), -1e-9)
    mu_min = float(np.linalg.norm(dv_ - dv_n * n)) / max(abs(dv_n), 1e-9)
    return dict(kind=kind, t=t_c, centre=centre, n=n, e=e, mu_min=mu_min, split=k)


def _chi2_on_one_scale(fits, n_obs: int):
    """chi^2 of each of ``fits`` (fits of one record from several starts) on one scale: with
    the first fit's noise levels (each fit's own cost is weighted by the levels it estimated);
    inf where a fit's residuals are not finite."""
    ref = fits[0].sigma

    def chi2(g) -> float:
        v = sum(n_obs * g.residual_rms[k] ** 2 / ref[k] ** 2 for k in ref)
        return v if math.isfinite(v) else math.inf

    return chi2


def fit_bounce(
    observations: Observations,
    *,
    shot=None,
    fit: Sequence[str] | None = None,
    progress=True,
    **kw,
) -> Fit:
    """The contact parameters of :class:`rollax.systems.Shot` from a filmed bounce.

    ``fit``: the parameters (of :data:`BOUNCE_FIELDS`); default the restitution and friction
    of the contact the record shows (:func:`bounce_contact`: ``e_rim, mu_rim`` or ``e_board,
    mu_board``). The flight state at the first sample is fitted too (its spin from the film
    where filmed, else from the flight and the bounce: weakly, through the Magnus lift and
    the impact). The fit runs over the samples up to shortly after the bounce, then the whole
    record (:func:`rollax.identify`'s windows), from the starts of :meth:`Shot.guess_state`.
    ``shot``: the system (default ``Shot()``): its other parameters are held. What a record
    cannot tell is said, not answered: an impact that stuck bounds ``mu`` from below only (its
    profile interval is open above), a head-on impact without spin does not touch ``mu`` at
    all (no standard error); both raise an :class:`rollax.IdentifiabilityWarning` naming it.
    Returns the :class:`rollax.Fit`."""
    from rollax.systems.shot import Shot

    shot = Shot() if shot is None else shot
    if not isinstance(shot, Shot):
        raise ValueError(f"shot = {type(shot).__name__}: it must be a rollax.systems.Shot")
    contact = bounce_contact(observations, shot)
    kind = contact["kind"]
    if fit is None:
        fit = (f"e_{kind}", f"mu_{kind}")
    fit = (fit,) if isinstance(fit, str) else tuple(fit)
    for name in fit:
        if name not in BOUNCE_FIELDS:
            raise ValueError(
                f"fit: {name!r} is not a contact parameter a bounce can tell; allowed: "
                f"{', '.join(BOUNCE_FIELDS)}"
            )
    t = observations.t
    k = contact["split"]
    span = float(t[-1] - t[0])
    # the first window: through the bounce and 4 samples beyond (the parameters act there)
    w0 = float(t[min(k + 4, len(t) - 1)] - t[0])
    kw.setdefault("windows", [w0] if w0 < span else None)
    kw.setdefault("bounds", {n: (0.0, 1.0) if n.startswith("e_") else (0.0, math.inf) for n in fit})
    # the flight and impacts only (no rim modes: a bounce leaves every contact), from two
    # starts: the jump's restitution with a friction just below its impulse ratio (the impact
    # slides) and one well above it (it sticks). Where an impact sticks the record does not
    # depend on mu, so a fit does not leave the branch it starts on: from one start (0.3),
    # records that slid at mu = 0.15 were left undetermined, and from the sliding start alone
    # stuck records were fitted in a sliding local minimum (6 of 40 restitution intervals
    # missed the truth)
    mu_name = f"mu_{kind}"
    e0 = min(max(contact["e"], 0.05), 0.99)
    mu_starts = [max(0.8 * contact["mu_min"], 0.01), 2.0 * contact["mu_min"] + 0.2]
    shot = dataclasses.replace(shot, rim_modes=False)
    runs = []
    for mu0 in mu_starts if mu_name in fit else mu_starts[:1]:
        start = shot
        for name, v in ((f"e_{kind}", e0), (mu_name, mu0)):
            if name in fit:
                start = eqx.tree_at(lambda s_, n=name: getattr(s_, n), start, jnp.asarray(v))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IdentifiabilityWarning)
            runs.append((identify(start, observations, list(fit), progress=progress, **kw), caught))
    # the runs compared on one scale: chi^2 with the first run's noise levels (each run's own
    # cost is weighted by the noise levels it estimated); a poor fit comes last
    chi2 = _chi2_on_one_scale([f_ for f_, _ in runs], observations.t.shape[0])
    runs.sort(key=lambda fc: (fc[0].status == "poor_fit", chi2(fc[0])))
    f, caught = runs[0]
    added: list[str] = []
    filmed = observations.values.shape[1] == 6
    if mu_name in fit:
        i = f.names.index(mu_name)
        # the other branch's best: within the 95 % level of chi^2, the record cannot tell a
        # stuck impact from a sliding one, and mu is bounded from below only
        other = runs[-1][0]
        # (two runs that met at one optimum are one answer)
        ses = [float(g.std_errors[i]) for g in (f, other) if math.isfinite(g.std_errors[i])]
        apart = abs(float(other.values[i] - f.values[i])) > 3 * min(ses, default=1e-4)
        # (the profiles' 95 % level: 3.84, more with the noise estimated)
        level = next((p["level"] for p in f.profile.values() if "level" in p), 3.84)
        both = (
            len(runs) == 2
            and other.status != "poor_fit"
            and chi2(other) - chi2(f) < level
            and apart
        )
        prof = f.profile.get(mu_name)
        lowers = [
            float(g.profile[mu_name]["interval"][0])
            if g.profile.get(mu_name) and g.profile[mu_name]["interval"][0] is not None
            else max(float(g.values[i] - 1.96 * g.std_errors[i]), 0.0)
            for g in ([f, other] if both else [f])
            if math.isfinite(g.std_errors[i])  # (a stuck fit says nothing of the bound)
        ] or [0.0]
        lower = min(v if math.isfinite(v) else 0.0 for v in lowers)
        why = (
            "the spin is not filmed, so a spin before the impact can be found for any larger "
            "mu, and a stuck impact fits as well"
            if not filmed
            else "a stuck impact fits the record as well as a sliding one"
            if both
            else ""
        )
        if both:
            # the profile likelihood over both branches: each quantity's interval is the union
            # of the two fits' (the other's taken at its own level: a little wide)
            for name, p in f.profile.items():
                q = other.profile.get(name)
                if name == mu_name or not q:
                    continue
                ends = list(zip(p["interval"], q["interval"]))
                lo_ = None if None in ends[0] else min(ends[0])
                hi_ = None if None in ends[1] else max(ends[1])
                p["interval"] = (lo_, hi_)
                p["closed"] = (lo_ is not None, hi_ is not None)
        if why:
            f.std_errors[i] = math.inf
            if prof is None and both and other.profile.get(mu_name):
                prof = f.profile[mu_name] = dict(other.profile[mu_name])
            if prof is None:  # (a stuck fit has no profile of mu: the bound is all there is)
                prof = f.profile[mu_name] = {
                    "values": [], "delta_chi2": [], "estimate": float(f.values[i])
                }  # fmt: skip
            if prof:
                prof.update(interval=(lower, None), closed=(True, False))
            added.append(
                f"{mu_name}: the record bounds it from below only: {mu_name} >= {lower:.3g} "
                f"({why}); "
                + ("film the spin (a marked ball) to measure it" if not filmed else
                   "a bounce that slides (a glancing one, or more spin) measures it")
            )  # fmt: skip
    for w in caught:  # (identify's own, said again from here)
        warnings.warn(w.message, w.category, stacklevel=2)
    for m in added:
        f.warnings.append(m)
        warnings.warn(m, IdentifiabilityWarning, stacklevel=2)
    return f


def nearest_contact(observations: Observations, shot=None) -> tuple[str, int, float]:
    """Where a filmed ball comes nearest to a contact of :class:`rollax.systems.Shot`: the
    contact (``"rim"`` or ``"board"``), the sample's index and the gap (m) between the ball
    and it (negative: overlapping)."""
    from rollax.models import shot as _model
    from rollax.systems.shot import Shot

    shot = Shot() if shot is None else shot
    c = jnp.asarray(observations.values[:, :3])
    R, a, r = shot.R, shot.a, shot.r
    x_b, w, z_lo, z_hi = shot._board()
    gaps = {
        "rim": np.asarray(jax.vmap(lambda p: _model.rim_gap(p, R, a, r))(c)),
        "board": np.asarray(jax.vmap(lambda p: _model.board_gap(p, x_b, w, z_lo, z_hi, r))(c)),
    }
    kind = min(gaps, key=lambda k_: float(gaps[k_].min()))
    k = int(np.argmin(gaps[kind]))
    return kind, k, float(gaps[kind][k])


def fit_flight(observations: Observations, *, shot=None, progress=True, **kw) -> Fit:
    """The drag coefficient ``c_d`` of :class:`rollax.systems.Shot` from a filmed free flight
    (the ball's centre, and its spin where filmed, with no contact in the record).

    A bounce record's 0.2-0.5 s of flight does not determine ``c_d``: fitted with the
    contact's parameters, its 95 % interval spans about +-0.7-1.3 around 0.5 and includes 0,
    and :func:`fit_bounce` says so. A flight of half a second or more measures it: +-3-6 %
    from 0.5-0.8 s at 120-240 Hz and 2-4 mm (``tests/analysis/test_shot_identify.py``). The
    fit is :func:`rollax.identify` on ``Shot(rim_modes=False)`` with the flight state at the
    first sample fitted too (from :meth:`Shot.guess_state`), over windows from a third of the
    record (``windows``), with ``c_d >= 0``, from the shot's ``c_d`` and, where that fit is
    poor or unconverged (an unfilmed spin's Magnus lift can trade against the drag), from 0.2
    and 1.0 too; the shot's other parameters (``c_m`` among them) are held. A ``ValueError`` if the record has fewer than 8 samples, if its
    units are off (a median speed above 40 m/s or almost no motion: t in ms, x in mm; a
    sample over 30 m from the hoop), if the ball passes down through the plane ``r + a``
    below the rim or reaches the floor (the shot ends there), or if it comes within 2 cm of
    the rim or the board (a bounce's parameters are :func:`fit_bounce`'s). Returns the :class:`rollax.Fit`."""
    from rollax.systems.shot import Shot

    shot = Shot() if shot is None else shot
    if not isinstance(shot, Shot):
        raise ValueError(f"shot = {type(shot).__name__}: it must be a rollax.systems.Shot")
    t, c = np.asarray(observations.t, float), np.asarray(observations.values[:, :3], float)
    if t.shape[0] < 8:
        raise ValueError(f"data: a flight record needs at least 8 samples, got {t.shape[0]}")
    # units: a thrown ball moves at about 1-20 m/s (times in ms, or positions in mm, are
    # 1000 times off) and stays within a court's reach of the hoop
    ok = np.all(np.isfinite(c), axis=1)
    speed = np.linalg.norm(np.diff(c[ok], axis=0), axis=1) / np.diff(t[ok])
    far = float(np.max(np.linalg.norm(c[ok], axis=1)))
    if not (0.3 <= float(np.percentile(speed, 90)) and float(np.median(speed)) <= 40.0):
        raise ValueError(
            f"data: the ball moves at {float(np.median(speed)):.3g} m/s (median between "
            f"samples): a thrown ball moves at about 1-20 m/s; t must be in s and x, y, z in m"
        )
    if far > 30.0:
        raise ValueError(
            f"data: the ball is {far:.3g} m from the hoop: x, y, z must be in m in the hoop's "
            f"frame (origin at the hoop's centre in the rim plane, x towards the board, z up)"
        )
    # the shot ends where its centre passes down through the plane r + a below the rim
    # plane (made or missed) or reaches the floor: a record beyond that is another model's
    z_end = -(float(shot.r) + float(shot.a))
    z = c[:, 2]
    down = np.flatnonzero((z[:-1] > z_end) & (z[1:] <= z_end))
    floor = np.flatnonzero(z <= float(shot.r) - float(shot.rim_height))
    if down.size or floor.size:
        k = int(down[0] + 1 if down.size else floor[0])
        where = (
            f"passes down through z = {z_end:.3g} m (r + a below the rim plane)"
            if down.size
            else "reaches the floor"
        )
        raise ValueError(
            f"data: the ball {where} at t = {observations.t[k]:.4g} s, where the shot ends "
            f"(made or missed): cut the record before then"
        )
    kind, k, gap = nearest_contact(observations, shot)
    if gap < 0.02:  # (a few noise levels)
        raise ValueError(
            "data: the ball "
            + (f"comes within {100 * gap:.1f} cm of" if gap > 0 else "reaches")
            + f" the {kind} at t = {observations.t[k]:.4g} s, and a flight record has no "
            f"contact: cut the record before then, or fit the bounce's parameters with c_d "
            f"(fit_bounce(obs, fit=('e_{kind}', 'mu_{kind}', 'c_d')), --fit e_{kind} "
            f"mu_{kind} c_d)"
        )
    shot = dataclasses.replace(shot, rim_modes=False)
    kw.setdefault("bounds", {"c_d": (0.0, math.inf)})
    # windows from a third of the record: a flight has no phase slips to guard against, and
    # identify's default first window (1/32 of it) let an unfilmed spin run off to 2e4 rad/s
    # (a poor fit at c_d = 0; from a third: converged, the truth inside the interval)
    span = float(t[-1] - t[0])
    kw.setdefault("windows", [span / 3, 2 * span / 3])
    # from the shot's c_d; where that ends in a local minimum (a poor or unconverged fit:
    # an unfilmed spin can trade its Magnus lift against the drag), from a low and a high one
    # too, and the best on one scale (chi^2 with the first run's noise levels)
    runs = []
    for c_d0 in (float(shot.c_d), 0.2, 1.0):
        start = eqx.tree_at(lambda s_: s_.c_d, shot, jnp.asarray(c_d0))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IdentifiabilityWarning)
            runs.append((identify(start, observations, ["c_d"], progress=progress, **kw), caught))
        if runs[-1][0].status == "converged":
            break
    chi2 = _chi2_on_one_scale([f_ for f_, _ in runs], observations.t.shape[0])
    f, caught = min(runs, key=lambda fc: (fc[0].status != "converged", chi2(fc[0])))
    for w in caught:  # (identify's own, of the run kept)
        warnings.warn(w.message, w.category, stacklevel=2)
    return f
