"""``rollax identify rim`` / ``rollax identify shot``: fit parameters and the initial state to
camera data.

``rollax identify shot --data bounce.csv``: the contact parameters of the shot from a filmed
bounce on the rim or the board. The CSV has the header ``t,x,y,z`` (s, m, m, m: the ball
centre in the hoop's frame, origin at the hoop's centre in the rim plane, x towards the board,
z up) or ``t,x,y,z,omega_x,omega_y,omega_z`` (the spin too, rad/s, where the film shows it).
The contact is read off the record; ``--fit`` defaults to its restitution and friction
(``e_rim mu_rim`` or ``e_board mu_board``; ``c_d`` may be added, but a bounce's short
flights do not determine it). Friction that the record bounds from below only (a stuck impact,
an unfilmed spin) is said so, with the bound, not answered. ``--fit c_d`` alone fits a free
flight's drag coefficient (``fit_flight``: half a second of flight measures it to a few per
cent); a record that comes within 2 cm of the rim or the board is refused there. Noise
levels: ``--sigma`` (m) and ``--sigma-spin`` (rad/s), default estimated.

``--data obs.csv`` has the header ``t,d,z,alpha`` (s, m, m, rad): the ball centre's horizontal
distance from the rim axis, its height above the rim plane and its unwrapped angle around the
rim. ``--fit`` names the parameters (``k_d``, ``k_r`` of eq. (83), ``j``, ...); the initial
state ``(beta, w1, w2, w3, alpha)`` is always fitted. Noise levels not given are estimated
from the residuals. ``--out DIR`` writes ``identify.json``, ``fit.png``, ``residuals.png`` and
``profile.png`` (the profile likelihood of each fitted parameter the data determine, and its
95 % interval; none for a poor fit, or when the data determine no fitted parameter).
The fit continues over growing windows of the record from several starts read off the data;
``status`` is ``converged``, ``poor_fit`` (the model does not follow the data: its error bars
are not to be trusted) or ``not_converged``. Exit code 0 when it converged, 1 otherwise (the
result is written and printed either way), 2 for bad input. ``--no-robust`` fits the whole
record at once from the best start (to compare). The JSON carries a ``units`` block (its keys
dotted paths into the result) and the figures' titles give each parameter's unit.
"""

from __future__ import annotations

import os

from rollax.cli._args import dump, dumps, real

RIM_FIELDS = ("r", "a", "R", "j", "g", "k_d", "k_r")
#: what a filmed bounce can tell (rollax.analysis.identification.BOUNCE_FIELDS)
SHOT_FIELDS = ("e_rim", "mu_rim", "e_board", "mu_board", "c_d")
#: the units of the parameters and of the fitted initial state (RimTracked's; the Shot's)
PARAMETER_UNITS = {"r": "m", "a": "m", "R": "m", "j": "1", "g": "m/s^2", "k_d": "1/s", "k_r": "1/s"}
PARAMETER_UNITS.update({n: "1" for n in SHOT_FIELDS})
STATE_UNITS = {"beta": "rad", "omega1": "1/s", "omega2": "1/s", "omega3": "1/s", "alpha": "rad"}
OBSERVABLE_UNITS = {"d": "m", "z": "m", "alpha": "rad", "t_event": "s"}
SHOT_STATE_UNITS = dict(x="m", y="m", z="m", v_x="m/s", v_y="m/s", v_z="m/s")
SHOT_STATE_UNITS.update(omega_x="rad/s", omega_y="rad/s", omega_z="rad/s")
SHOT_OBSERVABLE_UNITS = dict(x="m", y="m", z="m", omega_x="rad/s", omega_y="rad/s", omega_z="rad/s")


def units_of(names, body: str = "rim") -> dict[str, str]:
    """The ``units`` block of the JSON (a key of a nested mapping: dotted, ``*`` for each
    entry), for the fitted quantities ``names`` (parameters, then ``y0.<state>``)."""
    state = STATE_UNITS if body == "rim" else SHOT_STATE_UNITS
    observed = OBSERVABLE_UNITS if body == "rim" else SHOT_OBSERVABLE_UNITS
    fitted = {n: state[n[3:]] if n.startswith("y0.") else PARAMETER_UNITS[n] for n in names}
    out = {f"parameters.{n}": u for n, u in fitted.items()}
    out.update({f"profile.{n}.values": u for n, u in fitted.items() if not n.startswith("y0.")})
    out["initial_state"] = "(" + ", ".join(state.values()) + ")"
    out.update({f"sigma.{k}": u for k, u in observed.items() if k != "t_event"})
    out.update({f"residual_rms.{k}": u for k, u in observed.items()})
    for k in (
        "cost",
        "chi2",
        "chi2_per_dof",
        "p_value",
        "correlation",
        "profile.*.delta_chi2",
        "profile.*.level",
    ):
        out[k] = "1"
    out.update(windows_s="s", wall_time_s="s")
    return out


def caption_of(fit, n_params: int) -> str:
    """The first line of the figures' titles: each fitted parameter with its error and unit."""
    return "; ".join(
        f"{n} = {v:.5g} ± {s:.2g} {PARAMETER_UNITS[n]}"
        for n, v, s in zip(fit.names[:n_params], fit.values, fit.std_errors)
    )


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "identify", help="fit parameters to observed trajectories", description=__doc__
    )
    p.add_argument(
        "body",
        choices=("rim", "shot"),
        help="the observed system: a ball on the rim, or a shot's bounce on the rim or board",
    )
    p.add_argument(
        "--data",
        required=True,
        help="CSV file with the header t,d,z,alpha (rim), t,x,y,z or "
        "t,x,y,z,omega_x,omega_y,omega_z (shot)",
    )
    p.add_argument(
        "--fit",
        nargs="+",
        action="extend",
        choices=RIM_FIELDS + SHOT_FIELDS,
        metavar="NAME",
        help=f"parameters to fit (repeatable; rim, required: {', '.join(RIM_FIELDS)}; shot, "
        f"default the contact's e and mu: {', '.join(SHOT_FIELDS)}; c_d alone on a flight "
        f"with no contact: its drag)",
    )
    p.add_argument(
        "--sigma",
        type=real(0.0, lo_open=True),
        default=None,
        help="shot: noise level of the centre [m] (default: estimated)",
    )
    p.add_argument(
        "--sigma-spin",
        type=real(0.0, lo_open=True),
        default=None,
        help="shot: noise level of the filmed spin [rad/s] (default: estimated)",
    )
    for name, unit in (("d", "m"), ("z", "m"), ("alpha", "rad")):
        p.add_argument(
            f"--sigma-{name}",
            type=real(0.0, lo_open=True),
            default=None,
            help=f"noise level of {name} [{unit}] (default: estimated)",
        )
    p.add_argument(
        "--t-event",
        type=real(0.0),
        default=None,
        help="observed time the ball left the rim [s] (fitted too)",
    )
    p.add_argument(
        "--sigma-event",
        type=real(0.0, lo_open=True),
        default=1e-3,
        help="noise level of --t-event [s] (default 1e-3)",
    )
    p.add_argument(
        "--no-robust",
        dest="robust",
        action="store_false",
        help="fit the whole record at once from the best start (default: growing "
        "windows from several starts)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", default=None, help="write identify.json and PNGs here")
    p.set_defaults(func=run)


def run(args) -> int:
    import warnings

    from rollax.analysis.identification import fit_rim, read_rim_csv, rim_observations

    fields = RIM_FIELDS if args.body == "rim" else SHOT_FIELDS
    wrong = [n for n in args.fit or () if n not in fields]
    if wrong:
        raise ValueError(
            f"--fit {wrong[0]} is not a {args.body} parameter; allowed: {', '.join(fields)}"
        )
    if args.body == "rim" and not args.fit:
        raise ValueError("--fit: name at least one parameter (e.g. --fit k_d k_r)")
    if args.body == "rim" and (args.sigma is not None or args.sigma_spin is not None):
        raise ValueError("--sigma, --sigma-spin: for a shot's bounce; the rim takes --sigma-d ...")
    if args.body == "shot":
        given = [n for n in ("sigma_d", "sigma_z", "sigma_alpha", "t_event") if getattr(args, n)]
        if given:
            raise ValueError(
                f"--{given[0].replace('_', '-')}: for the rim; a shot's bounce takes --sigma "
                f"and --sigma-spin"
            )
    if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out = {args.out!r} is a file; it must be a directory")
    if args.out is not None:  # before the fit: a fit of a minute, then no place to write it
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as err:
            raise ValueError(
                f"--out = {args.out!r} cannot be created ({err.strerror}); it must "
                f"be a writable directory"
            ) from None
        if not os.access(args.out, os.W_OK):
            raise ValueError(
                f"--out = {args.out!r} is not writable; it must be a writable directory"
            )
    if args.body == "shot":
        return _run_shot(args)
    t, d, z, alpha = read_rim_csv(args.data)
    sig = (args.sigma_d, args.sigma_z, args.sigma_alpha)
    given = [s is not None for s in sig]
    if any(given) and not all(given):
        raise ValueError("--sigma-d, --sigma-z, --sigma-alpha: give all three or none")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obs = rim_observations(
            t,
            d,
            z,
            alpha,
            sigma=sig if all(given) else None,
            t_event=args.t_event,
            sigma_event=args.sigma_event if args.t_event is not None else None,
        )
        fit = fit_rim(obs, fit=args.fit, progress=not args.json, robust=args.robust)
    notes = [str(w.message) for w in caught]
    res = fit.to_dict()
    res["names"] = list(fit.names)
    res["notes"] = notes
    res["units"] = units_of(fit.names)
    return _finish(args, fit, obs, res, notes, len(args.fit), ("m", "m", "rad"))


def _finish(args, fit, obs, res, notes, n_params, units) -> int:
    """Figures, the JSON and the printed summary of a fit; the exit code."""
    from rollax.analysis.identification import fit_summary

    if args.out:
        from rollax.plot import plot_identification

        os.makedirs(args.out, exist_ok=True)
        fitted = fit.predict(obs)
        caption = caption_of(fit, n_params)
        caption += (
            f"\n{len(obs.t)} samples, noise "
            + ", ".join(f"{k} {v:.2g}" for k, v in fit.sigma.items())
            + f" ({', '.join(units)})"
        )
        paths = [os.path.join(args.out, "fit.png"), os.path.join(args.out, "residuals.png")]
        plot_identification(obs.t, obs.values, fitted, obs.names, units, caption, *paths)
        if not fit.profile:
            notes.append(
                "no profile.png: "
                + (
                    "no profile likelihoods are computed for a poor fit"
                    if fit.status == "poor_fit"
                    else "the data determine none of the fitted parameters"
                )
            )
        else:
            from rollax.plot import plot_profiles

            paths.append(os.path.join(args.out, "profile.png"))
            plot_profiles(
                fit.profile,
                paths[-1],
                caption=caption.split("\n")[0]
                + f"\nstatus {fit.status}, chi^2/dof {fit.chi2_per_dof:.3g}",
                units=PARAMETER_UNITS,
            )
        res["figures"] = paths
        with open(os.path.join(args.out, "identify.json"), "w") as fh:
            dump(res, fh, indent=2)
    if args.json:
        print(dumps(res))
    else:
        print(fit_summary(fit))
        for n in notes:
            print(f"warning: {n}")
    # a result that may be wrong says so in the exit code too (as rollax robot optimize)
    return 0 if fit.status == "converged" else 1


def _run_shot(args) -> int:
    """``rollax identify shot``: :func:`rollax.analysis.identification.fit_bounce`, or
    :func:`~rollax.analysis.identification.fit_flight` for ``--fit c_d`` alone."""
    import functools
    import warnings

    from rollax.analysis.identification import (
        bounce_observations,
        fit_bounce,
        fit_flight,
        read_bounce_csv,
    )

    t, centre, spin = read_bounce_csv(args.data)
    if spin is not None and (args.sigma is None) != (args.sigma_spin is None):
        raise ValueError("--sigma, --sigma-spin: give both or neither for a filmed spin")
    if spin is None and args.sigma_spin is not None:
        raise ValueError(
            f"--sigma-spin = {args.sigma_spin}: the data have no spin columns "
            f"(omega_x,omega_y,omega_z)"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obs = bounce_observations(t, centre, spin, sigma=args.sigma, sigma_spin=args.sigma_spin)
        # --fit c_d alone: a free flight's drag (a record with a contact is refused: with the
        # contact's own parameters held at their defaults, c_d alone would fit the bounce)
        flight = list(args.fit or []) == ["c_d"]
        fitter = fit_flight if flight else functools.partial(fit_bounce, fit=args.fit or None)
        fit = fitter(obs, progress=not args.json, robust=args.robust)
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    res = fit.to_dict()
    res["names"] = list(fit.names)
    res["notes"] = notes
    res["units"] = units_of(fit.names, "shot")
    n_params = sum(not n.startswith("y0.") for n in fit.names)
    units = tuple(SHOT_OBSERVABLE_UNITS[n] for n in obs.names)
    return _finish(args, fit, obs, res, notes, n_params, units)
