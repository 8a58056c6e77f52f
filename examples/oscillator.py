"""A harmonic oscillator whose n-th zero crossing is located: a system written against the public API.

State y = (x, v); x' = v, v' = -omega^2 x. From (x0, 0) the zeros of x are at
t_k = (k - 1/2) pi / omega. The crossing event fires at the ``n``-th zero (0: count only).
Large steps are fine: each step is sampled at ``n_samples`` points of its dense output, so
several zeros inside one step are each counted.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

import rollax


class Oscillator(rollax.AbstractSystem):
    omega: jax.Array = rollax.parameter(1.0)
    n: int = 6  # static: the zero crossing that ends the run

    state_names = ("x", "v")

    @property
    def events(self):
        return (rollax.crossing("zero", target=self.n),)

    def vector_field(self, t, y, mode):
        return jnp.stack([y[1], -(self.omega**2) * y[0]])

    def event_values(self, t, y, mode):
        return y[:1]

    def zero_time(self, k):
        """Closed form: the k-th zero of x from a start at rest."""
        return (k - 0.5) * math.pi / float(self.omega)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the smoke test's uniform call (tests/test_scripts_smoke.py): already as small as it gets
    ap.add_argument("--smoke", action="store_true", help="no change: the example is small")
    ap.add_argument("--out", default=None, help="unused: nothing is written")
    ap.parse_args()
    osc = Oscillator(omega=2.0, n=6)
    y0 = jnp.array([1.0, 0.0])
    sol = rollax.solve(osc, y0, 0.0, 100.0, rtol=1e-10, atol=1e-10)
    print("6th zero:", float(sol.t), "closed form:", osc.zero_time(6))
    # d t6 / d omega = -t6 / omega
    g = jax.grad(
        lambda w: rollax.solve(Oscillator(omega=w), y0, 0.0, 100.0, rtol=1e-10, atol=1e-10).t
    )(2.0)
    print("dt6/domega:", float(g), "closed form:", -osc.zero_time(6) / 2.0)
