"""Gradients of mu_hat and of the final position w.r.t. control parameters vs finite differences."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from rollax.robot import SplineControl, contact_extrema, paper_disk, simulate

KNOTS = (0.0, 0.3, 0.6, 1.0, 1.5)


def test_gradients_match_finite_differences():
    ex = paper_disk()
    disk = ex.model

    def outputs(values):
        ctrl = SplineControl(values, KNOTS)
        tr = simulate(disk, ctrl, ex.y0, 3.0, n_save=301, rtol=1e-12, atol=1e-12)
        mu, _, _, _ = contact_extrema(tr)
        return jnp.stack([mu, disk.gc_position(tr.ys[-1])])

    @eqx.filter_jit
    def value_and_jac(values):
        # reverse mode through the solver; one compiled function serves the differences too
        out, pull = jax.vjp(outputs, values)
        return out, jax.vmap(pull)(jnp.eye(2))[0]

    rng = np.random.default_rng(3)
    v0 = jnp.asarray(rng.uniform(-1.0, 1.0, size=(len(KNOTS), 4))).at[0].set(0.0).at[-1].set(0.0)
    _, jac = value_and_jac(v0)
    h = 1e-5
    for idx in [(1, 0), (2, 3), (3, 1)]:
        e = jnp.zeros_like(v0).at[idx].set(h)
        fd = (value_and_jac(v0 + e)[0] - value_and_jac(v0 - e)[0]) / (2 * h)
        np.testing.assert_allclose(jac[(slice(None),) + idx], fd, rtol=2e-5, atol=1e-8)
    assert float(jnp.max(jnp.abs(jac[1]))) > 1e-3
