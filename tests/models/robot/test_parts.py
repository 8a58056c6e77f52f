"""Rails, controls and input validation of rollax.robot (cheap: no ODE solves)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.robot import (
    Ball,
    CircleRail,
    CurveRail,
    Disk,
    EllipseRail,
    FigureEightRail,
    PiecewisePolynomialControl,
    RampControl,
    SegmentRail,
    SplineControl,
    circle_from_spherical,
    duff_basis,
    paper_ball,
)
from rollax.models.robot.examples import BALL_RAIL_V, BALL_THETA0


RAILS = [
    CircleRail(0.5, u=(0, 1, 0), v=(0, 0, 1), center=(0.1, 0.0, 0.2)),
    EllipseRail(0.6, 0.3, center=(0.0, 0.1, 0.0)),
    SegmentRail(p0=(-0.5, 0.0, 0.1), p1=(0.4, 0.2, -0.3)),
    FigureEightRail(0.5),
    CurveRail(lambda t: jnp.array([0.3 * jnp.cos(t), 0.2 * jnp.sin(2 * t), 0.1 * t])),
    circle_from_spherical(0.85, BALL_RAIL_V[2]),
]


@pytest.mark.parametrize("rail", RAILS, ids=lambda r: type(r).__name__)
def test_rail_derivatives_match_autodiff(rail):
    ths = jnp.array([0.0, 0.37, 1.3, 2.9])
    d1 = jax.jacfwd(rail.zeta)
    z, zp, zpp = jax.vmap(rail)(ths)
    np.testing.assert_allclose(z, jax.vmap(rail.zeta)(ths), atol=1e-15)
    np.testing.assert_allclose(zp, jax.vmap(d1)(ths), atol=1e-14)
    np.testing.assert_allclose(zpp, jax.vmap(jax.jacfwd(d1))(ths), atol=1e-14)


def test_duff_basis_right_handed_orthonormal():
    rng = np.random.default_rng(1)
    for n in list(rng.normal(size=(20, 3))) + [
        np.array([0.0, 0.0, -1.0]),
        np.array([0.0, 0.0, 1.0]),
    ]:
        n = jnp.asarray(n / np.linalg.norm(n))
        b1, b2 = duff_basis(n)
        B = jnp.stack([b1, b2, n], axis=1)
        np.testing.assert_allclose(B.T @ B, np.eye(3), atol=1e-14)
        assert float(jnp.linalg.det(B)) == pytest.approx(1.0, abs=1e-14)


def test_ball_example_centre_of_mass_above_centre():
    # docs/physics-notes.md: the reading zeta = r (cos n - sin b1) puts the CM above the GC at (6.12)
    ball = paper_ball().model
    zeta, _, _ = ball.rail_geometry(jnp.asarray(BALL_THETA0))
    cm = ball.all_masses() @ zeta
    assert abs(float(cm[0])) < 1e-4 and abs(float(cm[1])) < 1e-4 and float(cm[2]) > 0.5


def test_ramp_and_piecewise_polynomial_agree():
    amp = jnp.array([1.0, -2.0])
    ramp = RampControl(amp)
    # the ramp as a piecewise-linear polynomial on [0, 0.1, 0.2, 5]
    c = jnp.zeros((3, 2, 2))
    c = c.at[0, 0].set(amp).at[1, 0].set(amp).at[1, 1].set(-10.0 * amp)
    pp = PiecewisePolynomialControl(c, (0.0, 0.1, 0.2, 5.0))
    for t in np.linspace(0.0, 0.5, 23):
        np.testing.assert_allclose(ramp(t), pp(t), atol=1e-14)
    assert float(ramp(0.15)[0]) == pytest.approx(0.5)
    assert ramp.kinks == (0.0, 0.1, 0.2)


def test_spline_interpolates_and_is_c2():
    knots = (0.0, 0.5, 1.0, 2.0)
    vals = jnp.array([[0.0, 1.0], [1.0, -1.0], [0.5, 0.0], [0.0, 2.0]])
    sp = SplineControl(vals, knots)
    for k, t in enumerate(knots):
        np.testing.assert_allclose(sp(t), vals[k], atol=1e-14)
    d2 = jax.jit(jax.jacfwd(jax.jacfwd(sp)))
    np.testing.assert_allclose(d2(0.5 - 1e-9), d2(0.5 + 1e-9), atol=1e-6)
    np.testing.assert_allclose(sp(2.5), 0.0)


def _ball(**kw):
    args = dict(
        radius=1.0,
        m0=1.0,
        inertia=(1.0, 1.0, 1.0),
        zeta0=(0, 0, 0),
        masses=(1.0,),
        rails=(CircleRail(0.5),),
        g=1.0,
    )
    args.update(kw)
    return Ball(**args)


@pytest.mark.parametrize(
    "kw, word",
    [
        (dict(radius=0.0), "radius"),
        (dict(radius=-1.0), "radius"),
        (dict(m0=0.0), "m0"),
        (dict(masses=(-1.0,)), "masses"),
        (dict(inertia=(1.0, 0.0, 1.0)), "inertia d2"),
        (dict(rails=(CircleRail(1.2),)), "leaves the ball"),
        (dict(rails=(SegmentRail(p0=(0, 0, 0), p1=(0, 0, 1.5)),)), "leaves the ball"),
        (dict(masses=(1.0, 1.0)), "rails"),
    ],
)
def test_ball_bad_inputs(kw, word):
    with pytest.raises(ValueError, match=word):
        _ball(**kw)


def test_bad_rails_controls_and_state():
    with pytest.raises(ValueError, match="rail radius"):
        CircleRail(0.0)
    with pytest.raises(ValueError, match="orthonormal"):
        CircleRail(0.5, u=(1, 0, 0), v=(1, 1, 0))
    with pytest.raises(ValueError, match="semi-axis"):
        EllipseRail(-0.5, 0.2)
    with pytest.raises(ValueError, match="t_end"):
        RampControl(jnp.ones(2), t_flat=0.2, t_end=0.1)
    with pytest.raises(ValueError, match="quaternion"):
        _ball().initial_state([0.0], q=(1.0, 0.1, 0.0, 0.0))
    with pytest.raises(ValueError, match="d2"):
        Disk(radius=1.0, m0=1.0, d2=-1.0, zeta0=(0, 0, 0), masses=(1.0,), rails=(CircleRail(0.5),))
    with pytest.raises(ValueError, match="plane"):
        Disk(
            radius=1.0,
            m0=1.0,
            d2=1.0,
            zeta0=(0, 0, 0),
            masses=(1.0,),
            rails=(CircleRail(0.5, u=(0, 1, 0)),),
        )
