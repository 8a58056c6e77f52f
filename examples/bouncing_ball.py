"""A ball bouncing on a floor with restitution e: a hybrid system written against the public API.

State y = (height z [m], velocity v [m/s]); z' = v, v' = -g. At a downward crossing of z = 0
the reset map sends v -> -e v. The run ends after ``n_bounces`` impacts (counted in aux).
Closed form: from rest at height z0 the k-th impact is at
t_k = T0 (1 + 2 (e + e^2 + ... + e^(k-1))), T0 = sqrt(2 z0 / g).
"""

from __future__ import annotations

import enum
import math

import jax
import jax.numpy as jnp
import numpy as np

import rollax


class Bounce(enum.IntEnum):
    DONE = 0  # made all its bounces
    FLYING = 1  # still bouncing at t1
    FAILED = 2


class BouncingBall(rollax.AbstractSystem):
    g: jax.Array = rollax.parameter(9.81, units="m/s^2")
    e: jax.Array = rollax.parameter(0.8, units="1")  # coefficient of restitution
    n_bounces: int = 4  # static: the impact that ends the run

    state_names = ("z", "v")
    state_units = ("m", "m/s")  # labels a sweep's dataset
    events = (rollax.crossing("floor", target=1, direction=-1),)
    n_aux = 1  # impacts so far
    outcomes = Bounce

    def __check_init__(self):
        if not isinstance(self.e, jax.core.Tracer) and not np.all((0 <= self.e) & (self.e <= 1)):
            raise ValueError(f"e = {self.e!r} is outside the allowed range [0, 1]")

    def vector_field(self, t, y, mode):
        return jnp.stack([y[1], -self.g * jnp.ones_like(y[1])])

    def event_values(self, t, y, mode):
        return y[:1]

    def reset(self, t, y, mode, aux, event):
        bounces = aux[0] + 1
        y_new = jnp.stack([jnp.zeros_like(y[0]), -self.e * y[1]])
        return t, y_new, mode, aux.at[0].set(bounces), bounces >= self.n_bounces

    def outcome(self, sol):
        return jnp.select(
            [sol.failed, sol.status == rollax.Status.EVENT],
            [Bounce.FAILED, Bounce.DONE],
            Bounce.FLYING,
        )

    def impact_times(self, z0, k):
        """Closed-form times of the first k impacts from rest at height z0."""
        T0 = math.sqrt(2 * z0 / float(self.g))
        e = float(self.e)
        return np.array([T0 * (1 + 2 * sum(e**i for i in range(1, m))) for m in range(1, k + 1)])


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the smoke test's uniform call (tests/test_scripts_smoke.py): already as small as it gets
    ap.add_argument("--smoke", action="store_true", help="no change: the example is small")
    ap.add_argument("--out", default=None, help="unused: nothing is written")
    ap.parse_args()
    ball = BouncingBall(n_bounces=4)
    sol = rollax.solve(ball, jnp.array([1.0, 0.0]), 0.0, 10.0, rtol=1e-10, atol=1e-10)
    print("4th impact at", float(sol.t), "closed form", ball.impact_times(1.0, 4)[-1])
    # gradient of the 4th impact time with respect to the restitution coefficient
    dt_de = jax.grad(
        lambda e: (
            rollax.solve(
                BouncingBall(e=e), jnp.array([1.0, 0.0]), 0.0, 10.0, rtol=1e-10, atol=1e-10
            ).t
        )
    )(0.8)
    # d/de of T0 (1 + 2 (e + e^2 + e^3)): 2 T0 (1 + 2 e + 3 e^2)
    closed = 2 * math.sqrt(2 / 9.81) * (1 + 2 * 0.8 + 3 * 0.8**2)
    print("dt4/de =", float(dt_de), "closed form", closed)
