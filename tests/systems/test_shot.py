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
from rollax.systems.shot import BELOW, Shot, ShotOutcome, shot_summary

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


@pytest.mark.parametrize("e", [0.3, 0.55, 0.8, 0.95])
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
    ):
        with pytest.raises(ValueError, match=what):
            Shot(**kw)


def test_a_soft_landing_rolls_on_exactly_as_the_rim_system():
    # generated rolling states on the rim (F2 > 0): the ball placed just above, coming down
    # slowly along the normal with the rolling velocity and spin; it lands, sticks (mu = inf),
    # rolls in the rim model and separates exactly as RimTracked from the handed-over state
    from rollax.models.shot import rim_normal
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
        f2 = float(s.event_values(0.0, jnp.concatenate([z0, jnp.zeros(4)]), 1)[4])
        if f2 < 2.0:  # not pressed on the rim: it would not stay
            continue
        y_on = s.to_flight(z0)
        np.testing.assert_allclose(np.asarray(s.to_rolling(y_on)), np.asarray(z0), atol=1e-12)
        assert abs(float(s.event_values(0.0, y_on, 0)[0])) < 1e-12  # on the rim's surface
        n = rim_normal(y_on[:3], s.R)
        d, vn = 1e-4, 0.02
        y0 = jnp.concatenate([y_on[:3] + n * d - y_on[3:6] * d / vn, y_on[3:6] - vn * n, y_on[6:]])
        sol = rollax.solve(s, y0, 0.0, 3.0, save_events=4, **TOL)
        ev = np.asarray(sol.events.event)
        if ev[0] != 0 or int(sol.events.mode_after[0]) != 1:
            continue  # (grazed the board first: not this test's case)
        t_land = float(sol.events.t[0])
        z_land = jnp.asarray(sol.events.y_after[0][:5])
        ref = rollax.solve(tracked, z_land, 0.0, 3.0, **TOL)
        if int(ref.status) != int(rollax.Status.EVENT):
            continue  # rolls past the horizon: no separation to compare
        if ev[1] == 1:  # it met the board while rolling, before the rim system separates
            assert float(sol.events.t[1]) - t_land < float(ref.t)
            continue
        assert ev[1] == 4 and int(sol.events.mode_after[1]) == 0  # separation, back to flight
        assert float(sol.events.t[1]) - t_land == pytest.approx(float(ref.t), abs=1e-9)
        np.testing.assert_allclose(
            np.asarray(sol.events.y[1][:5]), np.asarray(ref.y), rtol=1e-8, atol=1e-8
        )
        np.testing.assert_allclose(  # the flight starts from the rolling ball's centre, (13), spin
            np.asarray(sol.events.y_after[1]), np.asarray(s.to_flight(ref.y)), atol=1e-8
        )
        summ = shot_summary(s, sol)
        # the time on the rim holds this rolling phase (and any later one, after a bounce)
        if int(summ["rim_contacts"]) > 1:
            assert float(summ["t_rim"]) >= float(ref.t) - 1e-9
        else:
            assert float(summ["t_rim"]) == pytest.approx(float(ref.t), abs=1e-9)
        done += 1


def test_a_ball_rolling_over_the_back_of_the_rim_meets_the_board():
    # rolling outwards over the top of the back of the rim, towards the board: it meets the
    # board (an impact on its flight state) and never passes the board's face
    s = Shot(rho_air=0.0)
    x_face = float(s.rim_inner_radius + s.board_offset)
    for w1 in (3.0, 6.0):
        y0 = jnp.concatenate([jnp.array([1.3, w1, 0.0, 0.0, math.pi / 2]), jnp.zeros(4)])
        assert float(s.event_values(0.0, y0, 1)[4]) > 0  # pressed on the rim
        sol = rollax.solve(s, y0, 0.0, 4.0, mode=1, save_events=8, **TOL)
        ev = np.asarray(sol.events.event)
        assert ev[0] == 1 and int(sol.events.mode[0]) == 1  # the board, met while rolling
        y_hit = np.asarray(sol.events.y_after[0])
        assert y_hit[0] == pytest.approx(x_face - float(s.r), abs=1e-8)  # touching its face
        assert y_hit[3] < 0  # and bounced off it
        assert float(sol.aux[1]) >= 1
        assert float(sol.y[0]) < x_face - float(s.r) + 1e-9
