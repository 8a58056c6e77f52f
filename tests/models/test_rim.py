"""The rim model (rollax.models.rim): parameters, equations of motion, forces, energy, symmetries."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fsolve import solve
from rollax.models.rim import Rim, _n1, _n2, _n3

RIM = Rim()
F = jax.jit(lambda x: RIM.vector_field(x))


def _rolling(t, x, rim):
    return rim.vector_field(x)


@jax.jit
def _solve(x0, T):
    rim = jax.tree_util.tree_map(jnp.asarray, RIM)
    return solve(_rolling, x0, 0.0, T, rim, rtol=1e-12, atol=1e-12, max_steps=16384)


def _flow_jit(x0, T):
    """State after time T (no events), at tolerance 1e-12."""
    sol = _solve(jnp.asarray(x0), jnp.asarray(T, dtype=float))
    assert not bool(sol.failed) and abs(float(sol.t) - T) < 1e-12
    return sol.y


def test_defaults_reproduce_notes():
    assert (RIM.r, RIM.a, RIM.R, RIM.j, RIM.g, RIM.mu) == (0.12, 0.01, 0.225, 2 / 3, 9.81, 1.0)
    assert math.isclose(RIM.rho, 0.13)
    # beta* = arccos((1 + j) rho / R) = 0.2730 (Sect. 3.2, quoted in docs/physics-notes.md)
    assert abs(math.acos((1 + RIM.j) * RIM.rho / RIM.R) - 0.2730) < 5e-5


@pytest.mark.parametrize(
    "field,value",
    [
        ("r", 0.0),
        ("r", -0.1),
        ("a", -0.01),
        ("R", 0.0),
        ("R", 0.1),
        ("j", 0.0),
        ("j", 1.5),
        ("g", 0.0),
        ("mu", -0.1),
        ("m", 0.0),
        ("k_d", -0.02),
        ("k_r", -1.0),
        ("r", float("nan")),
        ("mu", float("nan")),
        ("a", 0.2),
    ],
)
def test_bad_parameters_raise_value_error(field, value):
    with pytest.raises(ValueError) as err:
        dataclasses.replace(RIM, **{field: value})
    name = "rho" if (field, value) in (("R", 0.1), ("a", 0.2)) else field
    assert name in str(err.value)


def test_energy_conserved_over_10s():
    x0 = jnp.array([1.05, 2.0, 35.0, 10.0])
    e0 = float(RIM.energy(x0))
    x1 = _flow_jit(x0, 10.0)
    assert abs(float(RIM.energy(x1)) - e0) / abs(e0) < 1e-9
    # the energy as printed in (60), with r instead of rho, is not conserved (docs/physics-notes.md)
    printed = lambda x: RIM.energy(x) - RIM.m * RIM.g * (RIM.rho - RIM.r) * jnp.sin(x[0])  # noqa
    assert abs(float(printed(x1)) - float(printed(x0))) / abs(e0) > 1e-4


@pytest.mark.parametrize("beta0,w30", [(1.125, 10.0), (0.5, -8.0), (2.2, 4.0), (-0.6, 20.0)])
def test_steady_motion_is_equilibrium_and_stays_put(beta0, w30):
    x0 = RIM.steady_state(beta0, w30)
    scale = float(jnp.max(jnp.abs(jax.jacfwd(F)(x0) @ x0)))
    assert float(jnp.max(jnp.abs(F(x0)))) <= 1e-13 * scale
    if beta0 == 1.125:  # the (stable) steady motion of the Fig. 11 section
        assert float(jnp.max(jnp.abs(_flow_jit(x0, 10.0) - x0))) < 1e-8


@pytest.mark.parametrize("beta0", [0.2, 0.9, 1.1, 2.0, 2.6, -0.4])
@pytest.mark.parametrize("w30", [3.0, 10.0, -25.0])
def test_jacobian_eigenvalues_square_to_h(beta0, w30):
    A = jax.jacfwd(F)(RIM.steady_state(beta0, w30))
    h = float(RIM.stability_h(beta0, w30))
    lam = np.linalg.eigvals(np.asarray(A))
    big = lam[np.argsort(-np.abs(lam))[:2]]
    assert np.allclose(big**2, h, rtol=1e-8, atol=1e-12 * max(1.0, abs(h)))
    # the other two eigenvalues vanish (the steady motions form a 2-parameter family)
    assert np.all(np.abs(lam[np.argsort(-np.abs(lam))[2:]]) < 1e-6 * math.sqrt(abs(h)))


def test_time_reversal_symmetry():
    # Flowing T, reversing w1 and flowing T again returns to the start with w1 reversed (61).
    x0 = jnp.array([1.1, 1.5, 35.0, 10.0])
    x1 = _flow_jit(x0, 0.3)
    back = _flow_jit(x1 * jnp.array([1.0, -1.0, 1.0, 1.0]), 0.3)
    assert np.allclose(back, x0 * jnp.array([1.0, -1.0, 1.0, 1.0]), rtol=0, atol=1e-9)
    # and the (w2, w3) -> -(w2, w3) symmetry maps trajectories onto trajectories
    flip = jnp.array([1.0, 1.0, -1.0, -1.0])
    assert np.allclose(_flow_jit(x0 * flip, 0.3), x1 * flip, atol=1e-9)


def test_pendulum_subcase():
    # w2 = w3 = 0 reduces (33)-(36) to the pendulum (64)
    rng = np.random.default_rng(1)
    for beta, w1 in rng.uniform(-3, 3, (5, 2)):
        x = jnp.array([beta, w1, 0.0, 0.0])
        expect = [RIM.r / RIM.rho * w1, -RIM.g * math.cos(beta) / (RIM.r * (1 + RIM.j)), 0.0, 0.0]
        assert np.allclose(F(x), expect, rtol=1e-14, atol=1e-14)
    # E > m g rho: w1 never changes sign (Prop. 6, with the corrected energy)
    x0 = jnp.array([0.0, 14.0, 0.0, 0.0])
    assert float(RIM.energy(x0)) > RIM.m * RIM.g * RIM.rho
    for T in (0.1, 0.4, 0.8, 1.6):
        assert float(_flow_jit(x0, T)[1]) > 0


def test_contact_forces_from_newton_euler():
    # m a_G = F_G + F_C and j m r^2 eps = r_GC x F_C, with a_G and eps differentiated
    # independently (autodiff along the flow) from the reconstructed centre velocity (13) and
    # the angular velocity (16).
    rim = RIM
    fz = rim.vector_field_with_alpha
    rng = np.random.default_rng(2)
    for beta, w1, w2, w3, alpha in rng.uniform([-1, -5, -40, -15, 0], [2.5, 5, 40, 15, 6], (6, 5)):
        z = jnp.array([beta, w1, w2, w3, alpha])
        vG = lambda z: rim.centre_velocity(z[:4], z[4])  # noqa: E731
        omega = lambda z: (
            z[1] * _n1(z[4])
            + z[2] * _n2(z[4], z[0])  # noqa: E731
            + z[3] * _n3(z[4], z[0])
        )
        aG = jax.jvp(vG, (z,), (fz(z),))[1]
        eps = jax.jvp(omega, (z,), (fz(z),))[1]
        n1, n2, n3 = _n1(alpha), _n2(alpha, beta), _n3(alpha, beta)
        FC = rim.m * aG + rim.m * rim.g * jnp.array([0.0, 0.0, 1.0])
        expect = rim.contact_forces(z[:4])
        got = jnp.array([FC @ n1, FC @ n2, FC @ n3])
        assert np.allclose(got, expect, rtol=1e-10, atol=1e-10 * rim.m * rim.g)
        torque = jnp.cross(-rim.r * n2, FC)
        assert np.allclose(rim.j * rim.m * rim.r**2 * eps, torque, atol=1e-10)
        # the centre velocity is the derivative of the centre position (12)
        dG = jax.jvp(lambda z: rim.centre(z[:4], z[4]), (z,), (fz(z),))[1]
        assert np.allclose(dG, vG(z), atol=1e-12)


def test_dissipation_terms_of_eq_83():
    x = jnp.array([1.0, 2.0, 30.0, 9.0])
    d = dataclasses.replace(RIM, k_d=0.02, k_r=0.03)
    diff = d.vector_field(x) - RIM.vector_field(x)
    assert np.allclose(diff, [0.0, -0.03 * 2.0, -0.02 * 30.0, -0.03 * 9.0], atol=1e-14)
    assert d.dissipative and not RIM.dissipative
    # energy decreases under dissipation
    dE = jax.grad(d.energy)(x) @ d.vector_field(x)
    assert float(dE) < 0


def test_flight_outcomes():
    # a ball released at rest falls straight down: inside iff its centre is inside the rim
    for beta, inside in ((1.3, True), (1.8, False)):
        x = jnp.array([beta, 0.0, 0.0, 0.0])
        ins, rec, t = RIM.flight(x)
        assert bool(ins) == inside and bool(rec)  # straight down hits the tube again
        assert abs(float(t) - math.sqrt(2 * RIM.rho * math.sin(beta) / RIM.g)) < 1e-12
    # thrown fast outwards over the top: lands outside without touching the rim again
    x = jnp.array([math.pi / 2, 30.0, 0.0, 0.0])
    ins, rec, _ = RIM.flight(x)
    assert not bool(ins) and not bool(rec)
