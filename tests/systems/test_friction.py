"""rollax.systems.SlidingStop (through rollax.analysis.friction.simulate_stop, in the rescaled
time of (114)) against rollax.systems.Sliding (the same body in physical time, (13)/(18)): two
routes to the stop time."""

import jax.numpy as jnp
import numpy as np

import rollax
from rollax.analysis.friction import simulate_stop
from rollax.friction import exact_law
from rollax.models.friction.sliding import SlidingBody
from rollax.systems import Sliding, SlidingStop


def test_the_rescaled_stop_equals_the_physical_time_run():
    # random slips and spins of a disc and a ball: the stop time of the rescaled run equals
    # the time the physical run takes to reach |x_o| = 1e-8 (within the rest of the slide,
    # about 1e-8 / the deceleration)
    rng = np.random.default_rng(38)
    for kind in ("disc", "ball"):
        body = SlidingBody(exact_law("uniform"), kind=kind)
        for _ in range(3):
            x0 = jnp.asarray(rng.uniform([-1.0, -1.0, -2.0], [1.0, 1.0, 2.0]))
            ref = simulate_stop(body, x0)
            assert bool(ref.stopped)
            phys = rollax.solve(Sliding(body, r_stop=1e-8), x0, 0.0, 100.0, rtol=1e-11, atol=1e-13)
            assert phys.status == rollax.Status.EVENT
            assert abs(float(phys.t) - float(ref.t_stop)) < 1e-6
            assert (
                abs(
                    float(SlidingStop(body).eps(jnp.concatenate([ref.x_o, ref.t_stop[None]])))
                    - float(ref.eps)
                )
                < 1e-12
            )
