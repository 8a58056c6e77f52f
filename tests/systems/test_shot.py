"""The shot system (rollax.systems.shot) against closed forms, on both integrators: a vacuum
flight is a parabola; the swish region of a vacuum map is where the parabola stays clear of
the rim and the board (computed here independently); a ball dropped on the top of the rim
with restitution e and no friction rebounds to e^2 of its height; with e = 1 and no friction
the energy is kept through any sequence of impacts."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import rollax
from rollax.models.shot import release_state
from rollax.systems.shot import (
    BELOW,
    BOARD,
    LAYER_EXIT,
    LEAVING,
    RIM,
    ROLLING,
    SEPARATION,
    SLIP_ONSET,
    SLIPPING,
    STICK,
    SWITCHES,
    Shot,
    ShotOutcome,
    shot_summary,
)

TOL = dict(rtol=1e-10, atol=1e-10)
VACUUM = Shot(rho_air=0.0)
G = 9.81


def _parabola(y0, t):
    y0 = np.asarray(y0)
    return y0[:3] + y0[3:6] * t + 0.5 * np.array([0.0, 0.0, -G]) * t**2


def _end_time(y0, z_end):
    # the later root of z(t) = z_end
    z0, vz = float(y0[2]), float(y0[5])
    return (vz + math.sqrt(vz**2 + 2 * G * (z0 - z_end))) / G


def test_a_vacuum_flight_is_a_parabola_on_both_integrators():
    # generated swishes (distance, height, angle; the speed that centres the ball in the hoop)
    rng = np.random.default_rng(3)
    s = VACUUM
    z_end = -(float(s.r) + float(s.a))
    starts = []
    while len(starts) < 12:
        d, h, ang = rng.uniform(3.0, 7.0), rng.uniform(1.9, 2.4), math.radians(rng.uniform(45, 60))
        dz = float(s.rim_height) - h
        # speed through the hoop's centre at the rim plane: d tan(a) - g d^2 / (2 v^2 cos^2) = dz
        v = math.sqrt(G * d**2 / (2 * math.cos(ang) ** 2 * (d * math.tan(ang) - dz)))
        y0 = np.asarray(release_state(d, h, v, ang))
        if _clear(s, y0)[0] > 1e-3:  # a shallow entry clips the front rim: not a swish
            starts.append(y0)
    ens = rollax.solve_ensemble(s, np.stack(starts), 0.0, 5.0, **TOL)
    for k, y0 in enumerate(starts):
        T = _end_time(y0, z_end)
        sols = [jax_index(ens, k)]
        if k < 3:
            sols.append(rollax.solve(s, jnp.asarray(y0), 0.0, 5.0, **TOL))
        for sol in sols:
            assert int(s.outcome(sol)) == ShotOutcome.MADE and int(sol.event) == BELOW
            assert float(sol.aux[0] + sol.aux[1]) == 0  # no contact: a swish
            assert float(sol.t) == pytest.approx(T, abs=1e-9)
            np.testing.assert_allclose(np.asarray(sol.y[:3]), _parabola(y0, T), atol=1e-8)


def jax_index(sol, k):
    import jax

    return jax.tree_util.tree_map(lambda x: jnp.asarray(x[k]), sol)


def _clear(s, y0):
    """Whether the vacuum parabola from y0 passes the rim and the board without contact until
    its centre is r + a below the rim plane (independent of the system: dense samples, then
    the nearest approach refined by a scalar minimisation), and the margin."""
    r, a, R = float(s.r), float(s.a), float(s.R)
    x_b = float(s.rim_inner_radius + s.board_offset)
    z_lo = -float(s.board_below_rim)
    z_hi = z_lo + float(s.board_height)
    w = float(s.board_width)
    T = _end_time(y0, -(r + a))

    def rim(t):
        c = _parabola(y0, t)
        return math.hypot(math.hypot(c[0], c[1]) - R, c[2]) - a - r

    def board(t):
        c = _parabola(y0, t)
        q = (x_b, min(max(c[1], -w / 2), w / 2), min(max(c[2], z_lo), z_hi))
        return math.dist(c, q) - r

    ts = np.linspace(0.0, T, 4001)
    c = np.asarray(y0)[:3] + np.outer(ts, np.asarray(y0)[3:6]) + np.outer(ts**2, [0, 0, -G / 2])
    dense = {
        rim: np.hypot(np.hypot(c[:, 0], c[:, 1]) - R, c[:, 2]) - a - r,
        board: np.linalg.norm(
            c
            - np.stack(
                [
                    np.full_like(ts, x_b),
                    np.clip(c[:, 1], -w / 2, w / 2),
                    np.clip(c[:, 2], z_lo, z_hi),
                ],
                axis=1,
            ),
            axis=1,
        )
        - r,
    }
    margin = np.inf
    for f, vals in dense.items():
        k = int(np.argmin(vals))
        lo, hi = ts[max(k - 1, 0)], ts[min(k + 1, len(ts) - 1)]
        best = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
        margin = min(margin, best.fun, vals.min())
    c_end = _parabola(y0, T)
    inside = math.hypot(c_end[0], c_end[1]) < R
    return margin, inside


def test_the_swish_region_of_a_vacuum_map_is_where_the_parabola_stays_clear():
    s = VACUUM
    speeds = np.linspace(6.9, 7.6, 36)
    angles = np.radians(np.linspace(40.0, 62.0, 24))
    V, Aa = np.meshgrid(speeds, angles, indexing="ij")
    starts = np.stack(
        [np.asarray(release_state(4.19, 2.1, v, a)) for v, a in zip(V.ravel(), Aa.ravel())]
    )
    sol = rollax.solve_ensemble(s, starts, 0.0, 5.0, **TOL)
    summ = shot_summary(s, sol)
    swish = np.asarray(summ["swish"])
    checked = 0
    for k, y0 in enumerate(starts):
        margin, inside = _clear(s, y0)
        if abs(margin) < 1e-6:  # a graze within the tolerance: either answer is right
            continue
        checked += 1
        assert swish[k] == (margin > 0 and inside), (k, margin, inside)
    assert checked > 0.98 * len(starts)
    assert 0.03 < swish.mean() < 0.5  # the map holds swishes and contacts both


@pytest.mark.parametrize(
    # (the middle two: 20 s each, slow for CI time, stop 62; the ends stay)
    "e",
    [
        0.3,
        pytest.param(0.55, marks=pytest.mark.slow),
        pytest.param(0.8, marks=pytest.mark.slow),
        0.95,
    ],
)
def test_a_drop_on_the_top_of_the_rim_rebounds_to_e_squared(e):
    s = Shot(rho_air=0.0, e_rim=e, mu_rim=0.0, v_roll=1e-3)
    h = 0.4  # the drop above the contact
    z0 = float(s.r + s.a) + h
    y0 = jnp.array([float(s.R), 0.0, z0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    for sol in (
        rollax.solve(s, y0, 0.0, 3.0, save_events=3, **TOL),
        jax_index(rollax.solve_ensemble(s, y0[None], 0.0, 3.0, save_events=3, **TOL), 0),
    ):
        t = np.asarray(sol.events.t)
        assert np.asarray(sol.events.event)[:2].tolist() == [0, 0]  # two rim impacts
        t1 = math.sqrt(2 * h / G)
        assert t[0] == pytest.approx(t1, abs=1e-9)
        apex = G * ((t[1] - t[0]) / 2) ** 2 / 2  # the rebound's height from its flight time
        assert apex == pytest.approx(e**2 * h, rel=1e-8)
        np.testing.assert_allclose(np.asarray(sol.events.y_after)[0, 5], e * G * t1, rtol=1e-8)


def test_elastic_frictionless_impacts_keep_the_energy():
    # generated shots in vacuum that hit the rim or the board, several times for some
    rng = np.random.default_rng(11)
    s = Shot(rho_air=0.0, e_rim=1.0, e_board=1.0, mu_rim=0.0, mu_board=0.0)
    n = 48
    starts = np.stack(
        [
            np.asarray(
                release_state(
                    rng.uniform(3.5, 6.0),
                    rng.uniform(1.9, 2.4),
                    rng.uniform(6.5, 9.5),
                    math.radians(rng.uniform(40, 60)),
                    rng.uniform(0, 30),
                    rng.uniform(-0.05, 0.05),
                )
            )
            for _ in range(n)
        ]
    )

    def energy(y):
        y = np.asarray(y)
        return 0.5 * np.sum(y[..., 3:6] ** 2, -1) + G * y[..., 2]

    sol = rollax.solve_ensemble(s, starts, 0.0, 4.0, max_resets=200, **TOL)
    contacts = np.asarray(sol.aux[:, 0] + sol.aux[:, 1])
    assert (contacts >= 2).sum() >= 5 and (contacts >= 1).sum() >= 20
    np.testing.assert_allclose(energy(sol.y), energy(starts), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(sol.y[:, 6:]), starts[:, 6:])  # no torque
    one = rollax.solve(s, jnp.asarray(starts[0]), 0.0, 4.0, max_resets=200, **TOL)
    assert float(energy(one.y)) == pytest.approx(float(energy(starts[0])), rel=1e-9)


def test_the_two_integrators_agree_on_shots_with_air():
    rng = np.random.default_rng(5)
    s = Shot()
    starts = np.stack(
        [
            np.asarray(
                release_state(
                    4.19,
                    2.1,
                    rng.uniform(6.8, 7.8),
                    math.radians(rng.uniform(45, 58)),
                    2 * math.pi * rng.uniform(0, 3),
                )
            )
            for _ in range(8)
        ]
    )
    ens = rollax.solve_ensemble(s, starts, 0.0, 4.0, **TOL)
    out = np.asarray(s.outcome(ens))
    for k in range(len(starts)):
        one = rollax.solve(s, jnp.asarray(starts[k]), 0.0, 4.0, **TOL)
        assert int(s.outcome(one)) == out[k]
        np.testing.assert_array_equal(np.asarray(one.aux[:3]), np.asarray(ens.aux[k, :3]))
        assert float(one.t) == pytest.approx(float(ens.t[k]), abs=1e-7)


def test_bad_parameters_are_refused_by_name():
    for kw, what in (
        (dict(e_rim=1.5), "e_rim = 1.5"),
        (dict(r=-0.1), "r = -0.1"),
        (dict(mu_board=-1.0), "mu_board = -1.0"),
        (dict(mu_rim="a"), "mu_rim = 'a' is not allowed: it must be a number"),
        (dict(board_width=-1.83), "board_width = -1.83"),
        (dict(board_offset=-0.3), "board_offset = -0.3"),
        (dict(delta=1e-2), "delta = 0.01 is not allowed: it must be < u_layer"),
        (dict(max_switches=0), "max_switches = 0"),
    ):
        with pytest.raises(ValueError, match=what):
            Shot(**kw)


def _rim_state(z, u=(0.0, 0.0)):
    """The shot's 9-D state of a rolling state ``z = (beta, w1, w2, w3, alpha)`` with the slip
    ``u = (u1, u3)``."""
    return jnp.concatenate([jnp.asarray(z[:4]), jnp.asarray(u), jnp.asarray(z[4:5]), jnp.zeros(2)])


def _landing(s, y_on, rng_d=1e-4, vn=0.02):
    """A flight state just above the rim point of ``y_on``, coming down slowly along the normal
    with ``y_on``'s velocity and spin: it lands there."""
    from rollax.models.shot import rim_normal

    n = rim_normal(y_on[:3], s.R)
    d = rng_d
    return jnp.concatenate([y_on[:3] + n * d - y_on[3:6] * d / vn, y_on[3:6] - vn * n, y_on[6:]])


def test_a_soft_landing_rolls_on_exactly_as_the_rim_system():
    # generated rolling states on the rim (F2 > 0): the ball placed just above, coming down
    # slowly along the normal with the rolling velocity and spin; it lands, sticks (mu = inf),
    # rolls in the rim model and separates exactly as RimTracked from the handed-over state
    from rollax.systems import RimTracked

    rng = np.random.default_rng(4)
    s = Shot(rho_air=0.0, mu_rim=float("inf"), e_rim=0.5)
    tracked = RimTracked(s.rim)
    done = 0
    while done < 6:
        z0 = jnp.array(
            [
                rng.uniform(0.9, 1.6),
                rng.uniform(-4.0, 4.0),
                rng.uniform(20.0, 60.0),
                rng.uniform(5.0, 15.0),
                rng.uniform(-np.pi, np.pi),
            ]
        )
        f2 = float(s.event_values(0.0, _rim_state(z0), ROLLING)[SEPARATION])
        if f2 < 2.0:  # not pressed on the rim: it would not stay
            continue
        y_on = s.to_flight(_rim_state(z0))
        np.testing.assert_allclose(
            np.asarray(s.to_rim(y_on)), np.asarray(_rim_state(z0)[:7]), atol=1e-12
        )
        assert abs(float(s.event_values(0.0, y_on, 0)[0])) < 1e-12  # on the rim's surface
        sol = rollax.solve(s, _landing(s, y_on), 0.0, 3.0, save_events=4, **TOL)
        ev = np.asarray(sol.events.event)
        if ev[0] != 0 or int(sol.events.mode_after[0]) != ROLLING:
            continue  # (grazed the board first: not this test's case)
        t_land = float(sol.events.t[0])
        y_land = np.asarray(sol.events.y_after[0])
        assert y_land[4] == 0 and y_land[5] == 0  # the impact stuck: no slip
        ref = rollax.solve(tracked, jnp.asarray(np.r_[y_land[:4], y_land[6]]), 0.0, 3.0, **TOL)
        if int(ref.status) != int(rollax.Status.EVENT):
            continue  # rolls past the horizon: no separation to compare
        if ev[1] == 1:  # it met the board while rolling, before the rim system separates
            assert float(sol.events.t[1]) - t_land < float(ref.t)
            continue
        assert ev[1] == SEPARATION and int(sol.events.mode_after[1]) == 0  # back to flight
        assert float(sol.events.t[1]) - t_land == pytest.approx(float(ref.t), abs=1e-9)
        y_sep = np.asarray(sol.events.y[1])
        np.testing.assert_allclose(
            np.r_[y_sep[:4], y_sep[6]], np.asarray(ref.y), rtol=1e-8, atol=1e-8
        )
        np.testing.assert_allclose(  # the flight starts from the rolling ball's centre, (13), spin
            np.asarray(sol.events.y_after[1]),
            np.asarray(s.to_flight(_rim_state(ref.y))),
            atol=1e-8,
        )
        summ = shot_summary(s, sol)
        # the time on the rim holds this rolling phase (and any later one, after a bounce)
        if int(summ["rim_contacts"]) > 1:
            assert float(summ["t_rim"]) >= float(ref.t) - 1e-9
        else:
            assert float(summ["t_rim"]) == pytest.approx(float(ref.t), abs=1e-9)
        assert float(summ["t_slip"]) == 0
        done += 1


def _rim_cases(rng, n, slip):
    """Generated rim states ``(beta, w1, w2, w3, u1, u3, alpha)`` pressed on the rim (F2 > 1),
    slipping at 0.05-1 m/s (``slip``) or rolling."""
    s = Shot()
    out = []
    while len(out) < n:
        z = np.array(
            [
                rng.uniform(0.6, 1.8),
                rng.uniform(-5.0, 5.0),
                rng.uniform(-60.0, 60.0),
                rng.uniform(-15.0, 15.0),
                0.0,
                0.0,
                rng.uniform(-np.pi, np.pi),
            ]
        )
        if slip:
            speed, phi = rng.uniform(0.05, 1.0), rng.uniform(-np.pi, np.pi)
            z[4:6] = speed * np.cos(phi), speed * np.sin(phi)
        y = jnp.concatenate([jnp.asarray(z), jnp.zeros(2)])
        if float(s.event_values(0.0, y, SLIPPING if slip else ROLLING)[SEPARATION]) > 1.0:
            out.append(z)
    return out


def test_the_rim_modes_move_the_centre_as_the_flight_state_says():
    # on generated rim states in each rim mode, the velocity of the centre (12) along the
    # vector field (autodiff of the position in beta and alpha) is the flight state's velocity
    # (13) of to_flight, and the kinetic energy of that flight state is the slip model's; the
    # 3-D state maps back to the rim state (to_rim: the contact point's velocity (17))
    import jax

    from rollax.models import slip

    rng = np.random.default_rng(21)
    s = Shot(mu_rim=0.5)
    rim = s.rim
    for mode, slipping in ((ROLLING, False), (SLIPPING, True), (LEAVING, False)):
        for z in _rim_cases(rng, 8, slipping):
            if mode == LEAVING:
                z = z.copy()
                z[4:6] = rng.uniform(1e-6, 1e-3), 0.0  # (w, 0): a slip on the slow manifold
            y = jnp.concatenate([jnp.asarray(z), jnp.zeros(2)])
            f = s.vector_field(0.0, y, mode)
            _, dc = jax.jvp(
                lambda b, a: rim.centre(jnp.concatenate([b[None], y[1:4]]), a),
                (y[0], y[6]),
                (f[0], f[6]),
            )
            phys = slip.physical_state(y[:6], mode - 1, rim)
            y3 = s.to_flight(jnp.concatenate([phys, y[6:7]]))
            np.testing.assert_allclose(np.asarray(dc), np.asarray(y3[3:6]), rtol=1e-12, atol=1e-12)
            kinetic = 0.5 * jnp.sum(y3[3:6] ** 2) + 0.5 * float(s.j) * float(s.r) ** 2 * jnp.sum(
                y3[6:9] ** 2
            )
            potential = float(s.g) * float(rim.rho) * jnp.sin(phys[0])
            assert float(kinetic + potential) == pytest.approx(
                float(slip.slip_energy(rim, phys)) / float(rim.m), rel=1e-12
            )
            np.testing.assert_allclose(
                np.asarray(s.to_rim(y3)),
                np.asarray(jnp.concatenate([phys, y[6:7]])),
                rtol=1e-10,
                atol=1e-12,
            )


def _same_as_rim_slipping(s, sol, y_rim, t_on, ref_sys):
    """The shot's stay on the rim from ``t_on`` (state ``y_rim``, 7-D) equals the
    ``RimSlipping`` run from it, event for event, up to the separation; returns whether the
    reference separated (else it ended otherwise: not compared past it)."""
    ref = rollax.solve(ref_sys, jnp.asarray(y_rim[:6]), 0.0, 3.0, save_events=64, **TOL)
    ref_ev = np.asarray(ref.events.event)[: int(ref.events.n)]
    if int(ref.status) != int(rollax.Status.EVENT) or ref_ev[-1] != 0:
        return False  # periodic (RimSlipping ends at two w1 zeros), chattering or the horizon
    ev = np.asarray(sol.events.event)
    k0 = int(np.argmax(np.asarray(sol.events.t) >= t_on - 1e-15))
    k0 += int(ev[k0] == RIM and abs(float(sol.events.t[k0]) - t_on) < 1e-15)
    # the shot's rim events, mapped to RimSlipping's (separation, slip onset, stick, -, layer)
    to_ref = {SEPARATION: 0, SLIP_ONSET: 1, STICK: 2, LAYER_EXIT: 4, BOARD: -1}
    shot_ev = [to_ref[int(e)] for e in ev[k0 : k0 + len(ref_ev)]]
    if -1 in shot_ev:  # met the board while on the rim, before the rim system separates
        i = shot_ev.index(-1)
        assert shot_ev[:i] == list(ref_ev[:i])
        assert float(sol.events.t[k0 + i]) - t_on < float(ref.t)
        return False
    assert shot_ev == list(ref_ev)
    np.testing.assert_allclose(
        np.asarray(sol.events.t[k0 : k0 + len(ref_ev)]) - t_on,
        np.asarray(ref.events.t[: len(ref_ev)]),
        atol=1e-9,
    )
    k = k0 + len(ref_ev) - 1
    np.testing.assert_allclose(np.asarray(sol.events.y[k][:6]), np.asarray(ref.y), atol=1e-8)
    assert float(sol.aux[SWITCHES]) >= float(ref.aux[0])  # (more later, after a bounce)
    return True


def test_on_the_rim_the_shot_rolls_and_slips_exactly_as_RimSlipping():
    # generated slipping landings (the impact leaves the contact point sliding) and rolling
    # starts on the rim with finite friction (rolling may turn to slipping and back): the
    # shot's events and states on the rim are those of RimSlipping from the same state, until
    # the separation; the flight then starts from the rim ball's centre, (13) and spin
    from rollax.models import slip
    from rollax.systems import RimSlipping

    rng = np.random.default_rng(8)
    compared = {ROLLING: 0, SLIPPING: 0}
    seen = set()  # the rim transitions the compared runs went through
    tries = 0
    while min(compared.values()) < 4:
        tries += 1
        assert tries < 200
        mu = rng.uniform(0.2, 0.8)
        s = Shot(rho_air=0.0, mu_rim=mu, e_rim=0.3)
        ref_sys = RimSlipping(s.rim)
        slipping = compared[SLIPPING] < compared[ROLLING]
        (z,) = _rim_cases(rng, 1, slipping)
        y = jnp.concatenate([jnp.asarray(z), jnp.zeros(2)])
        if slipping:  # land on the rim: the impact's friction changes the slip a little
            sol = rollax.solve(s, _landing(s, s.to_flight(y)), 0.0, 3.0, save_events=64, **TOL)
            if int(sol.events.event[0]) != RIM or int(sol.events.mode_after[0]) != SLIPPING:
                continue
            t_on, y_rim = float(sol.events.t[0]), np.asarray(sol.events.y_after[0])
        else:
            sol = rollax.solve(s, y, 0.0, 3.0, mode=ROLLING, save_events=64, **TOL)
            t_on, y_rim = 0.0, np.asarray(y)
        if not _same_as_rim_slipping(s, sol, y_rim, t_on, ref_sys):
            continue
        k = int(np.argmax(np.asarray(sol.events.event) == SEPARATION))
        y_sep = jnp.asarray(sol.events.y[k])
        mode_sep = int(sol.events.mode[k])
        phys = slip.physical_state(y_sep[:6], mode_sep - 1, s.rim)
        np.testing.assert_allclose(
            np.asarray(sol.events.y_after[k]),
            np.asarray(s.to_flight(jnp.concatenate([phys, y_sep[6:7]]))),
            atol=1e-12,
        )
        assert int(sol.events.mode_after[k]) == 0
        summ = shot_summary(s, sol)
        assert float(summ["t_rim"]) >= float(sol.events.t[k]) - t_on - 1e-9
        assert 0 <= float(summ["t_slip"]) <= float(summ["t_rim"]) + 1e-12
        if slipping:
            assert float(summ["t_slip"]) > 0
        compared[SLIPPING if slipping else ROLLING] += 1
        seen |= {int(e) for e in np.asarray(sol.events.event)[: k + 1]}
    assert {SLIP_ONSET, STICK, LAYER_EXIT, SEPARATION} <= seen


def test_a_ball_that_stays_on_the_rim_ends_on_rim():
    # a steady motion on the rim (no slipping) never separates: on_rim at the final time,
    # with all of that time on the rim; and chattering is cut off as on_rim
    s = Shot(rho_air=0.0, mu_rim=float("inf"))
    x0 = s.rim.steady_state(1.2, 10.0)
    y0 = _rim_state(jnp.concatenate([x0, jnp.array([0.3])]))
    sol = rollax.solve(s, y0, 0.0, 0.5, mode=ROLLING, **TOL)
    assert int(s.outcome(sol)) == ShotOutcome.ON_RIM
    assert float(shot_summary(s, sol)["t_rim"]) == pytest.approx(0.5, abs=1e-12)
    np.testing.assert_allclose(np.asarray(sol.y[:4]), np.asarray(x0), atol=1e-8)


def test_a_ball_rolling_over_the_back_of_the_rim_meets_the_board():
    # rolling outwards over the top of the back of the rim, towards the board: it meets the
    # board (an impact on its flight state) and never passes the board's face
    s = Shot(rho_air=0.0, mu_rim=float("inf"))
    x_face = float(s.rim_inner_radius + s.board_offset)
    for w1 in (3.0, 6.0):
        y0 = _rim_state(jnp.array([1.3, w1, 0.0, 0.0, math.pi / 2]))
        assert float(s.event_values(0.0, y0, 1)[SEPARATION]) > 0  # pressed on the rim
        sol = rollax.solve(s, y0, 0.0, 4.0, mode=1, save_events=8, **TOL)
        ev = np.asarray(sol.events.event)
        assert ev[0] == 1 and int(sol.events.mode[0]) == 1  # the board, met while rolling
        y_hit = np.asarray(sol.events.y_after[0])
        assert y_hit[0] == pytest.approx(x_face - float(s.r), abs=1e-8)  # touching its face
        assert y_hit[3] < 0  # and bounced off it
        assert float(sol.aux[1]) >= 1
        # (it may land on the rim again: the run's end state is then a rim state)
        assert float(s.flight_state(sol.y, sol.mode)[0]) < x_face - float(s.r) + 1e-9
