"""The rolling disk (Sects. 4-5): the paper's mu_hat, and the disk as a special case of the ball."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.robot import RampControl, contact_extrema, paper_disk, simulate


@pytest.fixture(scope="module")
def run():
    ex = paper_disk()
    tr = simulate(ex.model, ex.control, ex.y0, ex.t1, rtol=ex.rtol, atol=ex.rtol)
    return ex, tr


def test_mu_hat_matches_paper(run):
    ex, tr = run
    mu, t_mu, min_n, _ = contact_extrema(tr)
    assert round(float(mu), 4) == 0.2951  # paper: 0.2951
    assert float(min_n) > 0  # Fig. 5.4a


def test_disk_is_the_planar_ball(run):
    # Sect. 4: the ball with E2 normal to the rails' plane rolls as the disk; d1, d3 are free
    ex, tr = run
    disk = ex.model
    ball = disk.as_ball(d1=0.7, d3=1.6)
    trb = simulate(ball, ex.control, disk.ball_state(ex.y0), ex.t1, rtol=ex.rtol, atol=ex.rtol)
    yb = jax.jit(jax.vmap(disk.ball_state))(tr.ys)
    np.testing.assert_allclose(trb.ys, yb, atol=2e-8)
    Nd, Fd = tr.forces()
    Nb, Fb = trb.forces()
    np.testing.assert_allclose(Nb, Nd, rtol=1e-8)
    np.testing.assert_allclose(Fb, Fd, atol=1e-8)
    # pointwise too: vector field and forces at the same states
    fd = jax.jit(jax.vmap(lambda t, y: disk.vector_field(t, y, ex.control)))(tr.ts, tr.ys)
    fb = jax.jit(jax.vmap(lambda t, y: ball.vector_field(t, y, ex.control)))(tr.ts, yb)
    np.testing.assert_allclose(fb[:, 2 * disk.n + 5], -fd[:, -1], rtol=1e-12, atol=1e-12)


def test_energy_rate_and_conservation(run):
    ex, tr = run
    disk, ball = ex.model, ex.model.as_ball()
    f = lambda t, y: disk.vector_field(t, y, ex.control)  # noqa: E731
    dE = jax.jit(jax.vmap(lambda t, y: jax.jvp(disk.energy, (y,), (f(t, y),))[1]))(
        tr.ts[::50], tr.ys[::50]
    )
    P = jax.jit(jax.vmap(lambda t, y: ball.actuator_power(t, disk.ball_state(y), ex.control)))(
        tr.ts[::50], tr.ys[::50]
    )
    np.testing.assert_allclose(dE, P, rtol=1e-10, atol=1e-12)
    # frozen masses: energy conserved along the simulated motion
    y0 = disk.initial_state([-1.0, 0.3, 2.0, -0.5], phi_dot=0.8)
    trf = simulate(disk, RampControl(jnp.zeros(4)), y0, ex.t1, rtol=ex.rtol, atol=ex.rtol)
    E = jax.jit(jax.vmap(disk.energy))(trf.ys)
    assert float(jnp.max(jnp.abs(E - E[0]))) < 1e-10 * float(jnp.abs(E[0]))
