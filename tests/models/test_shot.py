"""The shot's model (rollax.models.shot): distances to the rim and the board against an
independent minimisation, and the impact map against its invariants on generated cases."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from rollax.models import shot

R, A, r, J = 0.2366, 0.008, 0.1194, 2.0 / 3.0
X_B, W, Z_LO, Z_HI = 0.3796, 1.83, -0.15, 0.92


def _circle_distance(c):
    # the distance from c to the circle of radius R in z = 0, by a scalar minimisation over
    # the circle's angle (bracketed around the point's own azimuth and its opposite)
    def d(phi):
        return math.dist(c, (R * math.cos(phi), R * math.sin(phi), 0.0))

    phi0 = math.atan2(c[1], c[0])
    vals = [
        minimize_scalar(d, bounds=(p - 1.0, p + 1.0), method="bounded", options={"xatol": 1e-12})
        for p in (phi0, phi0 + math.pi)
    ]
    return min(v.fun for v in vals)


def _rect_distance(c):
    res = minimize(
        lambda q: (c[0] - X_B) ** 2 + (c[1] - q[0]) ** 2 + (c[2] - q[1]) ** 2,
        x0=[0.0, 0.0],
        bounds=[(-W / 2, W / 2), (Z_LO, Z_HI)],
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-12},
    )
    return math.sqrt(res.fun)


def test_the_rim_distance_is_the_distance_to_the_core_circle():
    rng = np.random.default_rng(0)
    for _ in range(40):
        c = rng.uniform([-0.6, -0.6, -0.4], [0.6, 0.6, 0.4])
        got = float(shot.rim_gap(jnp.asarray(c), R, A, r))
        assert got == pytest.approx(_circle_distance(c) - A - r, abs=1e-9)
        n = np.asarray(shot.rim_normal(jnp.asarray(c), R))
        assert np.linalg.norm(n) == pytest.approx(1.0)
        # the normal is the gradient of the distance (a distance function's gradient)
        grad = np.asarray(jax.grad(lambda c_: shot.rim_gap(c_, R, A, r))(jnp.asarray(c)))
        np.testing.assert_allclose(n, grad, atol=1e-9)


def test_the_board_distance_is_the_distance_to_the_rectangle():
    rng = np.random.default_rng(1)
    for _ in range(40):
        c = rng.uniform([X_B - 0.5, -1.3, -0.6], [X_B - 0.01, 1.3, 1.4])
        got = float(shot.board_gap(jnp.asarray(c), X_B, W, Z_LO, Z_HI, r))
        assert got == pytest.approx(_rect_distance(c) - r, abs=1e-7)
        n = np.asarray(shot.board_normal(jnp.asarray(c), X_B, W, Z_LO, Z_HI))
        assert n[0] < 0  # from the court's side: pointing away from the board


def _cases(seed, n=200):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        normal = rng.normal(size=3)
        normal /= np.linalg.norm(normal)
        v = rng.normal(size=3) * rng.uniform(0.5, 10)
        omega = rng.normal(size=3) * rng.uniform(0, 60)
        u = v - r * np.cross(omega, normal)
        if u @ normal >= -1e-3:  # make the contact point approach
            v = v - (u @ normal + rng.uniform(0.1, 5)) * normal
        yield (
            jnp.asarray(v),
            jnp.asarray(omega),
            jnp.asarray(normal),
            rng.uniform(0, 1),
            rng.choice([0.0, rng.uniform(0, 1.5)]),
        )


def _energy(v, omega, m=1.0):
    return 0.5 * m * float(v @ v) + 0.5 * J * m * r**2 * float(omega @ omega)


@pytest.mark.parametrize("seed", range(3))
def test_an_impact_keeps_the_angular_momentum_about_the_contact_point(seed):
    for v, omega, n, e, mu in _cases(seed):
        v2, w2, p_n, stuck = shot.impact(v, omega, n, e, mu, r, J)
        # L = I omega + m (r n) x v, per unit mass
        L1 = J * r**2 * omega + jnp.cross(r * n, v)
        L2 = J * r**2 * w2 + jnp.cross(r * n, v2)
        np.testing.assert_allclose(L2, L1, atol=1e-10)
        u1 = v - r * jnp.cross(omega, n)
        u2 = v2 - r * jnp.cross(w2, n)
        # Newton's restitution on the contact point's normal velocity
        assert float(u2 @ n) == pytest.approx(-e * float(u1 @ n), abs=1e-10)
        ut1, ut2 = u1 - (u1 @ n) * n, u2 - (u2 @ n) * n
        p_t = (v2 - v) - p_n * n
        if bool(stuck):
            assert float(jnp.linalg.norm(ut2)) < 1e-10  # sticking: the slip stopped
            assert float(jnp.linalg.norm(p_t)) <= mu * float(p_n) + 1e-12
        else:  # sliding throughout: Coulomb's bound reached, against the slip, same direction
            assert float(jnp.linalg.norm(p_t)) == pytest.approx(mu * float(p_n), abs=1e-10)
            assert float(p_t @ ut1) <= 1e-12
            assert float(jnp.linalg.norm(jnp.cross(ut1, ut2))) < 1e-9 * (1 + float(ut1 @ ut1))
        # energy never grows; with e = 1 and mu = 0 it is kept
        assert _energy(v2, w2) <= _energy(v, omega) + 1e-9
        v3, w3, _, _ = shot.impact(v, omega, n, 1.0, 0.0, r, J)
        assert _energy(v3, w3) == pytest.approx(_energy(v, omega), rel=1e-12)
        np.testing.assert_allclose(w3, omega)  # no friction, no torque


def test_a_receding_contact_is_left_alone():
    v, omega, n = jnp.array([0.0, 0.0, 2.0]), jnp.array([1.0, 2.0, 3.0]), jnp.array([0, 0, 1.0])
    v2, w2, p_n, stuck = shot.impact(v, omega, n, 0.5, 0.5, r, J)
    np.testing.assert_array_equal(v2, v)
    np.testing.assert_array_equal(w2, omega)
    assert float(p_n) == 0.0 and not bool(stuck)


def test_the_release_state_and_backspin_lift():
    y = np.asarray(shot.release_state(4.19, 2.1, 7.0, math.radians(52), 2 * math.pi * 3, 0.1))
    np.testing.assert_allclose(y[:3], [-4.19, 0.0, 2.1 - shot.RIM_HEIGHT])
    assert np.linalg.norm(y[3:6]) == pytest.approx(7.0)
    assert math.degrees(math.asin(y[5] / 7.0)) == pytest.approx(52.0)
    assert math.atan2(y[4], y[3]) == pytest.approx(0.1)
    assert np.linalg.norm(y[6:]) == pytest.approx(2 * math.pi * 3)
    acc = np.asarray(
        shot.acceleration(jnp.asarray(y[3:6]), jnp.asarray(y[6:]), r, 0.62, 9.81, 1.2, 0.0, 1.0)
    )
    assert acc[2] > -9.81  # backspin lifts
    assert abs(np.dot(acc + [0, 0, 9.81], y[3:6])) < 1e-12  # the Magnus force does no work
