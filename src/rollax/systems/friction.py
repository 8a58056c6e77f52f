"""A disc or ball sliding and spinning to a stop under a friction law, as a system.

The orthogonal slip state ``x_o = (u_x, u_y, rho omega_z)`` of (13)/(18) of the friction paper
(:class:`rollax.models.friction.sliding.SlidingBody`) in the rescaled time tau of (114),
``d/dt = r d/dtau`` with ``r = |x_o|``: ``x_o' = r F_o(x_o)``, ``t' = r``, a regular ODE whose
``t`` converges to the stop time. The state is ``(u_x, u_y, rho omega_z, t)``; the run ends at
the boundary event ``|x_o| = r_stop`` (an absolute slip magnitude).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float
import numpy as np

from rollax._core._system import AbstractSystem, boundary, parameter
from rollax._core._validate import check_positive
from rollax.models.friction.sliding import SlidingBody


def _check_body(body) -> None:
    if not isinstance(body, SlidingBody):
        raise ValueError(
            f"body = {type(body).__name__} is not allowed: it must be a "
            "rollax.models.friction.sliding.SlidingBody"
        )


class SlidingStop(AbstractSystem):
    """``body`` sliding from a slip to (nearly) a stop, in the rescaled time of (114)."""

    body: SlidingBody
    r_stop: Float[Array, ""] = parameter(1e-12)

    state_names = ("u_x", "u_y", "rho_omega_z", "t")
    events = (boundary("stop"),)

    def __check_init__(self):
        _check_body(self.body)
        check_positive("r_stop", self.r_stop)

    def vector_field(self, t, y, mode):
        x = y[:3]
        r = jnp.sqrt(jnp.sum(x * x))
        return jnp.concatenate([r * self.body.rhs(x), r[None]])

    def event_values(self, t, y, mode):
        return (jnp.sqrt(jnp.sum(y[:3] ** 2)) - self.r_stop)[None]

    def eps(self, y):
        """Slip-spin ratio (35) of the state."""
        return self.body.eps(y[:3])


class Sliding(AbstractSystem):
    """``body`` sliding and spinning in physical time, (13)/(18): the slide-and-spin record.

    The state is the orthogonal slip ``x_o = (u_x, u_y, rho omega_z)``; the field is bounded but
    jumps at ``x_o = 0`` (the stop), so the run ends at the boundary event
    ``|x_o| = r_stop``. The observables (:meth:`record`) are the slip speed ``|u|`` [m/s] and
    the spin rate ``omega_z`` [rad/s], what a camera over the sliding disc measures.
    """

    body: SlidingBody
    r_stop: Float[Array, ""] = parameter(1e-6)

    state_names = ("u_x", "u_y", "rho_omega_z")
    events = (boundary("stop"),)
    observables = ("speed", "spin")
    observable_units = ("m/s", "1/s")

    def __check_init__(self):
        _check_body(self.body)
        check_positive("r_stop", self.r_stop)

    def vector_field(self, t, y, mode):
        return self.body.rhs(y)

    def event_values(self, t, y, mode):
        return (jnp.sqrt(jnp.sum(y**2)) - self.r_stop)[None]

    def record(self, t, y):
        """``(|u|, omega_z)`` of the state."""
        return jnp.stack([jnp.sqrt(y[0] ** 2 + y[1] ** 2), y[2] / self.body.law.rho])  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)

    def guess_state(self, observations):
        """The first record, slipping along x: ``(|u|, 0, rho omega_z)``; no candidates."""
        v = observations.values[0]
        return np.array([v[0], 0.0, v[1] * float(self.body.law.rho)]), None  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)
