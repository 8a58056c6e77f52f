"""rollax.systems.SlidingStop against rollax.friction.sliding.simulate_stop (the same model)."""

import jax.numpy as jnp

import rollax
from rollax.friction import exact_law
from rollax.friction.sliding import SlidingBody, simulate_stop
from rollax.systems import SlidingStop


def test_sliding_disc_stops_like_simulate_stop():
    body = SlidingBody(exact_law("uniform"), kind="disc")
    for x0 in ([1.0, 0.0, 0.5], [0.3, 0.1, 2.0]):
        x0 = jnp.asarray(x0)
        ref = simulate_stop(body, x0)
        r0 = float(jnp.linalg.norm(x0))
        sol = rollax.solve(
            SlidingStop(body, 1e-12 * r0),
            jnp.concatenate([x0, jnp.zeros(1)]),
            0.0,
            400.0,
            rtol=1e-10,
            atol=1e-13,
            max_steps=8192,
        )
        assert sol.status == rollax.Status.EVENT
        assert abs(float(sol.y[3]) - float(ref.t_stop)) < 1e-9
        assert abs(float(SlidingStop(body).eps(sol.y)) - float(ref.eps)) < 1e-6
