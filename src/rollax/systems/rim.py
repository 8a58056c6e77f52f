"""The ball rolling on the rim as a system: events and outcomes of the basin maps (Sect. 5.1).

From each start x0 = (beta, w1, w2, w3) the rolling equations (33)-(36) (with the dissipation
of (83)) run until

* ``F2`` reaches zero (a boundary event): the ball separates and flies; **in** if its centre
  then reaches the rim plane closer to the rim axis than R, else **out**;
* ``w1`` has changed sign transversally ``w1_target`` times (default 2, Proposition 4):
  **periodic**; with dissipation the proposition no longer holds, so the basin preset counts
  the zeros without ending the run (``w1_target = 0``);
* the final time comes first: **undecided**; a failed solve: **failed**.

:class:`RimSlipping` is the hybrid rolling/slipping ball of Sect. 5.2 (the model, transition
maps and events of :mod:`rollax.models.slip`), with the extra outcome **chattering**.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import numpy as np
import jax
import jax.numpy as jnp
from jax.core import Tracer

from rollax._core._solution import Status
from rollax._core._system import AbstractSystem, boundary, check_parameters, crossing, parameter
from rollax._core.fastmath import sincos
from rollax.models.outcomes import RimOutcome
from rollax.models.rim import Rim
from rollax.models import slip as _slip


def _arrays(rim: Rim) -> Rim:
    if not isinstance(rim, Rim):
        shown = (
            repr(rim)
            if isinstance(rim, (int, float, str, bytes, type(None)))
            else f"a {type(rim).__name__}"
        )
        raise ValueError(f"rim = {shown} is not allowed: it must be a rollax.models.rim.Rim")
    # parameters as float64 arrays: traced (not static) under jit, so new values do not recompile;
    # host values go to the device in one transfer, not one converting program each (17-19 ms of
    # the 1000 x 1000 panel's 52-60 ms on an H100, benchmarks/RESULTS.md, stop 38)
    leaves, tree = jax.tree_util.tree_flatten(rim)
    host = [i for i, x in enumerate(leaves) if not isinstance(x, jax.Array)]
    put = jax.device_put([np.asarray(leaves[i], dtype=np.float64) for i in host])
    out = [jnp.asarray(x, dtype=float) if isinstance(x, jax.Array) else x for x in leaves]
    for i, x in zip(host, put):
        out[i] = x
    return jax.tree_util.tree_unflatten(tree, out)


class RimRolling(AbstractSystem):
    """The rolling ball on the rim (no slipping) with the basin events of Sect. 5.1.1.

    ``rim``: the parameters (any field may carry a leading batch axis for per-start values in
    :func:`rollax.solve_ensemble`). ``w1_target``: the transversal zero of w1 that ends the run
    as periodic (0: count only).
    """

    rim: Rim = eqx.field(default_factory=Rim, converter=_arrays)
    w1_target: int = eqx.field(static=True, default=2)

    state_names = ("beta", "omega1", "omega2", "omega3")
    state_units = ("rad", "1/s", "1/s", "1/s")
    outcomes = RimOutcome
    # F2 and w1 vary on the scale of the orbit (~0.1 s) and steps are ~0.02 s, so 4 samples a
    # step resolve them: the Fig. 11 panel's outcomes are the same with 1, 4 and 8, and each
    # sample costs a sin/cos and a divide (8 samples: 0.77 s CPU, 4: 0.49 s; before dense
    # sampling, stage samples: 0.45 s). On all nine panels of Figs. 11-13, against 16 samples,
    # 4 miss one F2 dip (Fig. 13 drilling; 3 miss two, 8 none): benchmarks/RESULTS.md
    n_samples = 4
    # solver stays "dopri5": "dopri8" takes 3.7x fewer steps (Fig. 11 panel 0.21 against 0.28 s)
    # but its samples lie 3.7x further apart, and with 4 (8) a step 5 (3) Fig. 13 starts miss a
    # separation and end periodic; with 12 samples it is slower (0.44 s): benchmarks/RESULTS.md

    def __check_init__(self):
        if isinstance(self.w1_target, bool) or not (
            isinstance(self.w1_target, int) and self.w1_target >= 0
        ):
            raise ValueError(
                f"w1_target = {self.w1_target!r} is not allowed: it must be an integer >= 0"
            )

    @property
    def events(self):
        return (boundary("separation"), crossing("omega1", target=self.w1_target))

    def vector_field(self, t, y, mode):
        return self.rim.vector_field(y)

    def event_values(self, t, y, mode):
        # F2/m of (31) (the ball separates at F2 = 0), written with one divide: the integrators
        # evaluate it at every sample of every step; w1: Proposition 4
        return jnp.stack([_f2_over_m(self.rim, y), y[1]])

    def outcome(self, sol):  # pyright: ignore[reportIncompatibleMethodOverride]  (called positionally)
        """:class:`RimOutcome` of one run; a separation is classified by the flight of the centre."""
        inside, _, _ = self.rim.flight(sol.y)
        fell = (sol.status == Status.EVENT) & (sol.event == 0)
        periodic = (sol.status == Status.EVENT) & (sol.event == 1)
        return jnp.select(
            [fell & inside, fell, periodic, sol.status == Status.T_MAX],
            [RimOutcome.IN, RimOutcome.OUT, RimOutcome.PERIODIC, RimOutcome.UNDECIDED],
            RimOutcome.FAILED,
        ).astype(jnp.int8)


def _f2_over_m(rim: Rim, y):
    s, c = sincos(y[0])
    r2 = rim.r**2
    return r2 * y[3] ** 2 * c / (rim.R - rim.rho * c) - r2 * y[1] ** 2 * (1.0 / rim.rho) + rim.g * s


class RimTracked(AbstractSystem):
    """The rolling ball with its angle around the rim, as a camera sees it (for identification).

    State ``(beta, w1, w2, w3, alpha)``: the rolling equations (33)-(36) with (83) and the
    cyclic angle alpha of (19). The one event is the separation (F2 = 0, a boundary). The
    observables (:meth:`camera`) are the ball centre's horizontal distance from the rim axis
    ``d = R - rho cos(beta)`` [m], its height above the rim plane ``z = rho sin(beta)`` [m] and
    alpha [rad, unwrapped].
    """

    rim: Rim = eqx.field(default_factory=Rim, converter=_arrays)

    state_names = ("beta", "omega1", "omega2", "omega3", "alpha")
    state_units = ("rad", "1/s", "1/s", "1/s", "rad")
    events = (boundary("separation"),)
    observables = ("d", "z", "alpha")
    # the observables' units: rollax.identify checks a record's angle columns ("rad") with them
    observable_units = ("m", "m", "rad")

    @property
    def time_scale(self) -> float:
        """``sqrt(rho / g)`` [s] (0.115 s for the Table 1 ball): the time in which gravity moves
        the ball by about its own size; the motion on the rim changes on this scale, so a record
        needs samples closer than half of it, and its angle around the rim turns by less than
        a full turn in it (:func:`rollax.identify` checks both before a fit)."""
        return math.sqrt(float(self.rim.rho) / float(self.rim.g))

    def vector_field(self, t, y, mode):
        return self.rim.vector_field_with_alpha(y)

    def event_values(self, t, y, mode):
        return _f2_over_m(self.rim, y)[None]

    def camera(self, t, y):
        """``(d, z, alpha)`` of the state: what a camera on the rim axis measures."""
        rim = self.rim
        return jnp.stack([rim.R - rim.rho * jnp.cos(y[0]), rim.rho * jnp.sin(y[0]), y[4]])

    def state_from_camera(self, t, values, window: float = 0.2):
        """Initial state and candidates from camera data, without integrating: beta from
        ``atan2(z, R - d)``; beta, beta', beta'' and alpha, alpha' at the first time from cubic
        fits over ``window`` seconds; ``w1 = rho beta' / r`` (20) and ``w3 = -alpha' (R - rho
        cos beta) / r`` (19) with no slip; w2 (the spin about the normal, which the centre's
        motion shows only through beta'') from eq. (33) solved for w2 with ``w1' = rho
        beta'' / r`` and the rates of the system. beta'' is the noisiest of these, so the
        candidates spread w2 over +-50 % (and take the steady-motion value (48) too).
        Returns ``(y0, candidates)``."""
        rim = self.rim
        R, rho, r = float(rim.R), float(rim.rho), float(rim.r)
        j, g, k_r = float(rim.j), float(rim.g), float(rim.k_r)
        t = np.asarray(t, float)
        v = np.asarray(values, float)
        beta = np.arctan2(v[:, 1], R - v[:, 0])
        n = max(6, int(np.searchsorted(t, t[0] + window, side="right")))
        n = min(n, t.shape[0])
        tt = t[:n] - t[0]
        deg = min(3, n - 2) if n >= 3 else 1
        pb = np.polynomial.polynomial.polyfit(tt, beta[:n], deg)
        pa = np.polynomial.polynomial.polyfit(tt, v[:n, 2], deg)
        b0, db = pb[0], pb[1]
        ddb = 2.0 * pb[2] if deg >= 2 else 0.0
        a0, da = pa[0], pa[1]
        s, c = math.sin(b0), math.cos(b0)
        D = R - rho * c
        w1 = rho / r * db
        w3 = -da * D / r
        # (33): w1' = ((1+j) r w3^2 s - j r w2 w3 c) / ((1+j) D) - g c / (r (1+j)) - k_r w1
        den = j * r * w3 * c / ((1 + j) * D)
        w2 = (
            (r * w3**2 * s / D - g * c / (r * (1 + j)) - k_r * w1 - rho / r * ddb) / den
            if abs(den) > 1e-12
            else 0.0
        )
        w2s = float(rim.steady_omega2(b0, w3)) if abs(w3) > 1e-9 else 0.0
        if not np.isfinite(w2):
            w2 = w2s if np.isfinite(w2s) else 0.0
        y0 = np.array([b0, w1, w2, w3, a0])
        spread = max(5.0, 0.5 * abs(w2))
        grid = np.concatenate(
            [w2 + np.linspace(-spread, spread, 21), [w2s] if np.isfinite(w2s) else []]
        )
        cands = np.repeat(y0[None], grid.shape[0], axis=0)
        cands[:, 2] = grid
        return y0, cands

    def guess_state(self, observations):
        """:meth:`state_from_camera` for :func:`rollax.identify`."""
        return self.state_from_camera(observations.t, observations.values)


# the reset map's per-run bookkeeping (aux)
SWITCHES, SHORT, T_SWITCH, T_SLIP, T_PHASE, CHATTER = range(6)


class RimSlipping(AbstractSystem):
    """The ball on the rim with finite friction: rolling <-> slipping (Sect. 5.2.2).

    The state is ``(beta, w1, w2, w3, u1, u3)``; in mode ``leaving`` the last two are
    ``(w, 0)``, the slip on its slow manifold (:mod:`rollax.models.slip`). A rolling start is the
    state with ``u1 = u3 = 0`` in mode ``rolling``. The events are those of
    ``rollax.models.slip.HYBRID_EVENTS`` (separation, slip onset (39), stick, zeros of w1, layer exit);
    the reset map is :func:`rollax.models.slip.transition` with the switch bookkeeping (``aux``:
    switches, consecutive short phases, time of the last switch, slipping time, start of the
    phase, chattering flag) and the chattering cut-off: more than ``max_switches`` switches or
    ``max_short`` consecutive phases shorter than ``min_dwell`` [s].
    """

    rim: Rim = eqx.field(default_factory=Rim, converter=_arrays)
    delta: float = parameter(1e-6)
    u_layer: float = parameter(1e-3)
    tau_stick: float = parameter(1e-5)
    dir_tol: float = parameter(1e-2)
    min_dwell: float = parameter(1e-7)
    max_switches: int = eqx.field(static=True, default=512)
    max_short: int = eqx.field(static=True, default=4)

    state_names = ("beta", "omega1", "omega2", "omega3", "u1", "u3")
    state_units = ("rad", "1/s", "1/s", "1/s", "m/s", "m/s")
    modes = _slip.MODES
    n_aux = 6
    aux_names = ("switches", "short_phases", "t_switch", "t_slip", "t_phase", "chattering")
    aux_units = ("1", "1", "s", "s", "s", "1")
    outcomes = RimOutcome
    # 4 event samples a step (as RimRolling): the Fig. 11 mu = 1 panel (86,400 starts) has the
    # same outcomes and switch counts with 2, 4 and 8; it takes 4.7, 5.2 and 6.9 s warm on 2
    # cores (the five hybrid events need the limit geometry at every sample)
    n_samples = 4
    events = (
        boundary("separation"),
        boundary("slip_onset"),
        boundary("stick"),
        crossing("omega1", target=2),
        boundary("layer_exit"),
    )

    def __check_init__(self):
        check_parameters(self)  # (first: SlipSettings below reads them as numbers)
        _slip.SlipSettings(
            delta=self._f(self.delta),
            u_layer=self._f(self.u_layer),
            tau_stick=self._f(self.tau_stick),
            dir_tol=self._f(self.dir_tol),
            max_switches=self.max_switches,
            min_dwell=self._f(self.min_dwell),
            max_short=self.max_short,
        )
        _slip.check_hybrid_rim(self.rim)

    @staticmethod
    def _f(x) -> Any:  # a float, or an array (traced, or per start) as it is
        return x if isinstance(x, Tracer) or np.ndim(x) else float(x)

    @classmethod
    def from_settings(cls, rim: Rim, settings: "_slip.SlipSettings") -> "RimSlipping":
        """The system with the transition parameters of a :class:`rollax.models.slip.SlipSettings`."""
        return cls(
            rim,
            settings.delta,
            settings.u_layer,
            settings.tau_stick,
            settings.dir_tol,
            settings.min_dwell,
            int(settings.max_switches),
            int(settings.max_short),
        )

    def initial_mode(self, t0, y0):
        # a state with a slip velocity slips; one without rolls (its slip-onset event then
        # decides at once whether friction holds it)
        slips = (y0[4] != 0) | (y0[5] != 0)
        return jnp.where(slips, _slip.SLIPPING, _slip.ROLLING).astype(jnp.int32)

    def vector_field(self, t, y, mode):
        return _slip._hybrid_rhs(y, mode, self.rim)

    def event_values(self, t, y, mode):
        return _slip._hybrid_event_values(
            y, mode, self.rim, self.tau_stick, self.dir_tol, self.u_layer
        )

    def reset(self, t, y, mode, aux, event):
        mode_new, y_new, dt, switched, terminal = _slip.transition(
            self.rim, mode, event, y, self.delta, self.u_layer
        )
        sw = aux[SWITCHES] + switched
        short = jnp.where(
            switched, jnp.where(t - aux[T_SWITCH] < self.min_dwell, aux[SHORT] + 1, 0), aux[SHORT]
        )
        chatter = switched & ((sw > self.max_switches) | (short >= self.max_short))
        done = terminal | chatter
        t_new = jnp.where(done, t, t + dt)
        t_slip = aux[T_SLIP] + jnp.where(mode != _slip.ROLLING, t_new - aux[T_PHASE], 0.0)
        aux_new = jnp.stack(
            [sw, short, jnp.where(switched, t, aux[T_SWITCH]), t_slip, t_new, chatter]
        ).astype(aux.dtype)
        return (t_new, jnp.where(done, y, y_new), jnp.where(done, mode, mode_new), aux_new, done)

    def outcome(self, sol):  # pyright: ignore[reportIncompatibleMethodOverride]  (called positionally)
        """:class:`RimOutcome` of one run (a failed solve while slipping is chattering)."""
        e = jnp.where(sol.status == Status.EVENT, sol.event, -1)
        outcome, _ = _slip.classify_end(self.rim, sol.mode, e, sol.y, sol.failed)
        return jnp.where(sol.aux[CHATTER] > 0, RimOutcome.CHATTERING, outcome).astype(jnp.int8)

    def slipping_time(self, sol):
        """Total time spent slipping (a run that ended while slipping counts to its end)."""
        open_phase = (sol.status != Status.EVENT) & (sol.mode != _slip.ROLLING)
        return sol.aux[T_SLIP] + jnp.where(open_phase, sol.t - sol.aux[T_PHASE], 0.0)

    @staticmethod
    def rolling_start(x):
        """The 6-D state of a rolling start ``(beta, w1, w2, w3)`` (u = 0)."""
        x = jnp.asarray(x, float)
        return jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (2,), x.dtype)], axis=-1)


def rolling_result(system: RimRolling, sol) -> dict:
    """The per-run summary of a :class:`RimRolling` run: outcome, end time, whether the flight
    after a separation comes back within rho of the rim (``recontact``), the period of periodic
    rolling (2 x the time between the w1 zeros; nan otherwise) and the steps."""
    outcome = system.outcome(sol)
    _, recontact, _ = system.rim.flight(sol.y)
    fell = (outcome == RimOutcome.IN) | (outcome == RimOutcome.OUT)
    period = jnp.where(outcome == RimOutcome.PERIODIC, 2.0 * (sol.t - sol.t_first[1]), jnp.nan)
    return dict(
        outcome=outcome, t_end=sol.t, recontact=recontact & fell, period=period, steps=sol.steps
    )


def slip_result(system: RimSlipping, sol) -> "_slip.HybridResult":
    """The per-run summary of a :class:`RimSlipping` run (outcome, end, physical state, mode,
    switches, slipping time, recontact, period of periodic rolling, steps)."""
    e = jnp.where(sol.status == Status.EVENT, sol.event, -1)
    _, recontact = _slip.classify_end(system.rim, sol.mode, e, sol.y, sol.failed)
    outcome = system.outcome(sol)
    chatter = sol.aux[CHATTER] > 0
    period = jnp.where(
        outcome == RimOutcome.PERIODIC, 2.0 * (sol.t - sol.t_first[_slip.W1_ZERO]), jnp.nan
    )
    return _slip.HybridResult(
        outcome=outcome.astype(jnp.int32),
        t_end=sol.t,
        y_end=_slip.physical_state(sol.y, sol.mode, system.rim),
        mode=sol.mode,
        switches=sol.aux[SWITCHES].astype(jnp.int32),
        t_slip=system.slipping_time(sol),
        recontact=recontact & ~chatter,
        period=period,
        steps=sol.steps,
    )


def slip_max_resets(system: RimSlipping) -> int:
    """Segments a run may take: every phase is one, and the switch cap ends runs long before."""
    return 8 * int(system.max_switches) + 64
