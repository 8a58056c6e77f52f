"""rollax._core.fastmath: the polynomial sine/cosine used in hot vector fields."""

import jax
import jax.numpy as jnp
import numpy as np

from rollax._core.fastmath import sincos


def test_sincos_matches_numpy_to_two_ulp():
    x = np.concatenate(
        [
            np.linspace(-60, 60, 400_001),
            np.random.default_rng(0).normal(0, 1e4, 10_000),
            np.pi / 2 * np.arange(-40, 41),
        ]
    )
    s, c = jax.jit(sincos)(jnp.asarray(x))
    # absolute error relative to the size of the result's scale (|sin|, |cos| <= 1)
    assert np.max(np.abs(np.asarray(s) - np.sin(x))) <= 2 * np.spacing(1.0)
    assert np.max(np.abs(np.asarray(c) - np.cos(x))) <= 2 * np.spacing(1.0)
    assert np.asarray(s).dtype == np.float64


def test_sincos_derivatives():
    x = jnp.linspace(-7.0, 7.0, 101)
    ds = jax.vmap(jax.grad(lambda t: sincos(t)[0]))(x)
    dc = jax.vmap(jax.grad(lambda t: sincos(t)[1]))(x)
    assert np.allclose(ds, np.cos(np.asarray(x)), atol=1e-14)
    assert np.allclose(dc, -np.sin(np.asarray(x)), atol=1e-14)
