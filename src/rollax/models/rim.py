"""A basketball rolling on the rim of the hoop.

Equations follow the rim paper (*Basketball rolling on the rim*, ``docs/references.md``),
with the parameters and errata of ``docs/physics-notes.md``. The reduced rolling state is
``x = (beta, w1, w2, w3)`` of eq. (38): beta is the angle around the tube's cross-section
(0 = inside at rim height, pi/2 = top), w1, w2, w3 the ball's angular velocity in the contact
frame (n1, n2, n3) of eqs. (2)-(4).
"""

from __future__ import annotations

import math
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from rollax._core._system import check_parameters, parameter
from rollax._core._validate import (
    check_less,
    check_nonnegative,
    check_positive,
    check_range,
    check_shape,
    check_where_concrete,
)
from rollax._core.fastmath import sincos

State = Float[Array, "4"]

_X = " = (beta, w1, w2, w3)"


def _state(method: str, x, n: int = 4, name: str = "x"):
    """``x`` if it has shape ``(n,)``, else a one-line ``ValueError`` (shapes are static, so
    this holds under jit and vmap too)."""
    what = _X if n == 4 else " = (beta, w1, w2, w3, alpha)"
    return check_shape(f"Rim.{method}: {name}", x, (n,), what)


#: |cos(beta0)| and |omega30| at or below these are the singular lines of eq. (48)
_COS_MIN = 1e-12
_OMEGA3_MIN = 0.0


def check_steady_args(beta0, omega30) -> None:
    """A ``ValueError`` naming the entry, for concrete ``beta0`` or ``omega30`` on the singular
    lines cos(beta0) = 0 or omega30 = 0 of eq. (48), or not finite (traced values pass)."""
    check_where_concrete(
        "beta0",
        beta0,
        lambda b: np.abs(np.cos(b)) > _COS_MIN,
        f"cos(beta0) = 0 is a singular line of eq. (48) (the steady motions there "
        f"are the trivial ones of eq. (46)); allowed: finite beta0 with "
        f"|cos(beta0)| > {_COS_MIN:g}",
    )
    check_where_concrete(
        "omega30",
        omega30,
        lambda w: np.isfinite(w) & (np.abs(w) > _OMEGA3_MIN),
        "omega30 = 0 is a singular line of eq. (48); allowed: finite omega30 != 0",
    )


def _plus(a, b):
    try:
        return np.asarray(a, float) + np.asarray(b, float)
    except (TypeError, ValueError, jax.errors.TracerArrayConversionError):
        return a + b  # traced: check_less passes it


class Rim(eqx.Module):
    """Ball-and-rim parameters (Table 1 as reconstructed in docs/physics-notes.md) and the rolling model.

    Fields: ball radius ``r`` [m], tube (minor) radius ``a`` [m], rim (major) radius ``R`` [m],
    dimensionless moment of inertia ``j`` (J = j m r^2), gravity ``g`` [m/s^2], friction
    coefficient ``mu`` (``inf`` = no slipping), mass ``m`` [kg] (cancels from the dynamics), and
    the dissipation rates ``k_d = C_d/(j m R^2)`` (drilling) and ``k_r = C_r/(j m R^2)``
    (rolling resistance) in 1/s of eq. (83).
    """

    r: float = parameter(0.12, convert=False, units="m")
    a: float = parameter(0.01, convert=False, units="m")
    R: float = parameter(0.225, convert=False, units="m")
    j: float = parameter(2.0 / 3.0, convert=False, units="1")
    g: float = parameter(9.81, convert=False, units="m/s^2")
    mu: float = parameter(1.0, finite=False, convert=False, units="1")  # inf: no slipping
    m: float = parameter(0.6, convert=False, units="kg")
    k_d: float = parameter(0.0, convert=False, units="1/s")
    k_r: float = parameter(0.0, convert=False, units="1/s")

    #: physical bounds of the parameters (used by rollax.identify)
    bounds = types.MappingProxyType(
        {
            "r": (0.0, math.inf),
            "a": (0.0, math.inf),
            "R": (0.0, math.inf),
            "j": (1e-12, 1.0),
            "g": (0.0, math.inf),
            "mu": (0.0, math.inf),
            "m": (1e-300, math.inf),
            "k_d": (0.0, math.inf),
            "k_r": (0.0, math.inf),
        }
    )

    def __check_init__(self):
        check_positive("r", self.r)
        check_positive("a", self.a)
        check_positive("R", self.R)
        check_range("j", self.j, 0.0, 1.0, lo_open=True)
        check_positive("g", self.g)
        check_range("mu", self.mu, 0.0, math.inf)
        check_positive("m", self.m)
        check_nonnegative("k_d", self.k_d)
        check_nonnegative("k_r", self.k_r)
        # per entry for per-start parameters (traced ones are checked where concrete)
        check_less("rho = r + a", _plus(self.r, self.a), "R", self.R, "0 < r + a < R")
        check_parameters(self)  # (after the checks above, whose messages say more)

    @property
    def rho(self) -> float:
        """Distance rho = r + a of the ball centre from the tube's core circle."""
        return self.r + self.a

    @property
    def dissipative(self) -> bool:
        """Whether eq. (83) has any dissipation (then Proposition 4 no longer applies): any
        ``k_d`` or ``k_r`` > 0, per-start values included; traced values count as dissipative."""
        try:
            return bool(np.any(np.asarray(self.k_d) > 0) or np.any(np.asarray(self.k_r) > 0))
        except (
            TypeError,
            jax.errors.TracerArrayConversionError,
            jax.errors.ConcretizationTypeError,
        ):
            return True

    # ------------------------------------------------------------------ rolling dynamics
    def vector_field(self, x: State) -> State:
        """Rolling equations of motion (33)-(36), with the dissipation terms of (83).

        Returns ``dx/dt`` for ``x = (beta, w1, w2, w3)``.
        """
        _state("vector_field", x)
        beta, w1, w2, w3 = x[0], x[1], x[2], x[3]
        r, R, j, g, rho = self.r, self.R, self.j, self.g, self.rho
        s, c = sincos(beta)
        D = R - rho * c
        dw1 = ((1 + j) * r * w3**2 * s - j * r * w2 * w3 * c) / ((1 + j) * D) - g * c / (
            r * (1 + j)
        )
        dw2 = r * R * w1 * w3 / (rho * D)
        dw3 = -r * w1 * w3 * s / D - j * r * w1 * w2 / (rho * (1 + j))
        dbeta = r / rho * w1
        return jnp.stack([dbeta, dw1 - self.k_r * w1, dw2 - self.k_d * w2, dw3 - self.k_r * w3])

    def contact_forces(self, x: State) -> Float[Array, "3"]:
        """Contact force components (F1, F2, F3) in the contact frame while rolling, eqs. (30)-(32).

        F2 is the normal force; (F1, F3) the static friction. (The small extra force from the
        dissipative moment (82) is not included, as in the paper.)
        """
        _state("contact_forces", x)
        beta, w1, w2, w3 = x[0], x[1], x[2], x[3]
        r, R, j, g, rho, m = self.r, self.R, self.j, self.g, self.rho, self.m
        s, c = sincos(beta)
        D = R - rho * c
        F1 = j * m * r**2 * w1 * w2 / (rho * (1 + j))
        F2 = m * r**2 * w3**2 * c / D - m * r**2 * w1**2 / rho + m * g * s
        F3 = j * m * g * c / (1 + j) - j * m * r**2 * w2 * w3 * c / ((1 + j) * D)
        return jnp.stack([F1, F2, F3])

    def normal_force(self, x: State) -> Float[Array, ""]:
        """Normal contact force F2 of eq. (31) (= eq. (73))."""
        _state("normal_force", x)
        beta, w1, w3 = x[0], x[1], x[3]
        s, c = sincos(beta)
        r2 = self.r**2
        return self.m * (
            r2 * w3**2 * c / (self.R - self.rho * c) - r2 * w1**2 / self.rho + self.g * s
        )

    def no_slip_margin(self, x: State) -> Float[Array, ""]:
        """mu F2 - sqrt(F1^2 + F3^2): rolling is realisable while this is >= 0, eq. (39)."""
        _state("no_slip_margin", x)
        F1, F2, F3 = self.contact_forces(x)
        return self.mu * F2 - jnp.sqrt(F1**2 + F3**2)

    def energy(self, x: State) -> Float[Array, ""]:
        """Total mechanical energy, eq. (60) with the potential corrected to m g rho sin(beta).

        (The paper prints m g r sin(beta); docs/physics-notes.md: the centre's height is rho sin(beta).)
        """
        _state("energy", x)
        return rolling_energy(x, self.m, self.r, self.j, self.g, self.rho)

    # ------------------------------------------------------------------ full-state reconstruction
    def alpha_dot(self, x: State) -> Float[Array, ""]:
        """Rate of the angle alpha around the rim while rolling, eq. (19) with u1 = 0."""
        _state("alpha_dot", x)
        return -self.r * x[3] / (self.R - self.rho * jnp.cos(x[0]))

    def vector_field_with_alpha(self, z: Float[Array, "5"]) -> Float[Array, "5"]:
        """Rolling equations for ``z = (beta, w1, w2, w3, alpha)``: (33)-(36) with (83), plus the
        cyclic angle around the rim from (19), so that positions can be reconstructed."""
        _state("vector_field_with_alpha", z, 5, "z")
        return jnp.concatenate([self.vector_field(z[:4]), self.alpha_dot(z[:4])[None]])

    def centre(self, x: State, alpha: Float[Array, ""] | float = 0.0) -> Float[Array, "3"]:
        """Ball centre G in the rim frame (e1, e2, e3), eq. (12)."""
        _state("centre", x)
        beta = x[0]
        s, c = jnp.sin(beta), jnp.cos(beta)
        n2, n3 = _n2(alpha, beta), _n3(alpha, beta)
        return (self.rho - self.R * c) * n2 + self.R * s * n3

    def centre_velocity(self, x: State, alpha: Float[Array, ""] | float = 0.0) -> Float[Array, "3"]:
        """Velocity of the ball centre in the rim frame while rolling, eq. (13) with (19)-(20)."""
        _state("centre_velocity", x)
        beta = x[0]
        dalpha = self.alpha_dot(x)
        dbeta = self.r / self.rho * x[1]
        n1, n3 = _n1(alpha), _n3(alpha, beta)
        return dalpha * (self.R - self.rho * jnp.cos(beta)) * n1 + dbeta * self.rho * n3

    # ------------------------------------------------------------------ steady motions
    def steady_omega2(self, beta0, omega30):
        """omega_20(beta0, omega30) of the non-trivial steady motions, eq. (48). It has poles at
        cos(beta0) = 0 and omega30 = 0, where it returns inf or huge values (grids over beta0
        cross them; :meth:`steady_state` refuses them)."""
        j, r, g, R, rho = self.j, self.r, self.g, self.R, self.rho
        return (1 + j) * omega30 * jnp.sin(beta0) / (j * jnp.cos(beta0)) - g * (
            R - rho * jnp.cos(beta0)
        ) / (j * r**2 * omega30)

    def steady_state(self, beta0, omega30) -> State:
        """Non-trivial steady motion x0 = (beta0, 0, omega_20, omega30) of eq. (47). Concrete
        ``beta0`` with cos(beta0) = 0, ``omega30 = 0`` or non-finite values are refused (the
        poles of eq. (48))."""
        check_steady_args(beta0, omega30)
        beta0 = jnp.asarray(beta0, dtype=float)
        omega30 = jnp.asarray(omega30, dtype=float)
        return jnp.stack([beta0, 0.0 * beta0, self.steady_omega2(beta0, omega30), omega30])

    def stability_h(self, beta0, omega30):
        """h(beta0, omega30) of eq. (54): the non-zero eigenvalues of the linearisation are +-sqrt(h)."""
        j, r, g, R, rho = self.j, self.r, self.g, self.R, self.rho
        c, s = jnp.cos(beta0), jnp.sin(beta0)
        D = R - rho * c
        return (
            omega30**2 * r**2 * (R * c - (1 + j) * rho) / ((1 + j) * rho * D**2)
            - 2 * g * s * c / ((1 + j) * D)
            + g**2 * c * D / (r**2 * rho * (1 + j) ** 2 * omega30**2)
        )

    # ------------------------------------------------------------------ falling
    def flight(
        self, x: State, n_samples: int = 128
    ) -> tuple[Bool[Array, ""], Bool[Array, ""], Float[Array, ""]]:
        """Free flight of the ball centre after separation (F2 = 0) at state ``x``.

        The centre flies as a projectile until it reaches the rim plane (height 0). Returns
        ``(inside, recontact, t_flight)``: ``inside`` if its horizontal distance from the rim
        axis is then below R ('in', a score), ``recontact`` if on the way the centre comes back
        within rho of the tube's core circle (the ball would hit the rim again; the paper ignores
        this), and the flight time. A centre already at or below the rim plane lands at once.
        """
        _state("flight", x)
        beta = x[0]
        d0 = self.R - self.rho * jnp.cos(beta)  # horizontal distance from the axis
        z0 = self.rho * jnp.sin(beta)
        v = self.centre_velocity(x, 0.0)  # alpha = 0: n1 = e1, outward radial = -e2
        v_t, v_r, v_z = v[0], -v[1], v[2]
        g = self.g
        disc = v_z**2 + 2.0 * g * z0
        t_land = jnp.where(z0 > 0.0, (v_z + jnp.sqrt(jnp.maximum(disc, 0.0))) / g, 0.0)
        dist_land = jnp.hypot(d0 + v_r * t_land, v_t * t_land)
        inside = dist_land < self.R
        # distance of the centre from the core circle along the flight; it starts at rho
        # (squares and one sqrt, not hypot: the values are of order R, and a sweep's summary
        # evaluates this at every sample of every run -- hypot made it 0.03 s of the 0.29 s
        # Fig. 11 panel)
        s = jnp.linspace(0.0, 1.0, n_samples + 1)[1:] * t_land
        a, b = d0 + v_r * s, v_t * s
        horiz = jnp.sqrt(a * a + b * b)
        z = z0 + v_z * s - 0.5 * g * s**2
        recontact = jnp.any((horiz - self.R) ** 2 + z * z < (self.rho * (1.0 - 1e-6)) ** 2)
        return inside, recontact, t_land


def rolling_energy(x: State, m, r, j, g, rho) -> Float[Array, ""]:
    """Energy (60) of a rolling ball with the corrected potential m g rho sin(beta)."""
    check_shape("rolling_energy: x", x, (4,), _X)
    beta, w1, w2, w3 = x[0], x[1], x[2], x[3]
    return (
        0.5 * m * j * r**2 * w2**2
        + 0.5 * m * (1 + j) * r**2 * (w1**2 + w3**2)
        + m * g * rho * jnp.sin(beta)
    )


def _n1(alpha) -> Float[Array, "3"]:
    """Tangent n1 of eq. (2)."""
    alpha = jnp.asarray(alpha, dtype=float)
    return jnp.stack([jnp.cos(alpha), jnp.sin(alpha), 0.0 * alpha])


def _n3(alpha, beta) -> Float[Array, "3"]:
    """Tangent n3 of eq. (3)."""
    alpha = jnp.asarray(alpha, dtype=float)
    s = jnp.sin(beta)
    return jnp.stack([s * jnp.sin(alpha), -s * jnp.cos(alpha), jnp.cos(beta)])


def _n2(alpha, beta) -> Float[Array, "3"]:
    """Normal n2 = n3 x n1 of eq. (4)."""
    alpha = jnp.asarray(alpha, dtype=float)
    c = jnp.cos(beta)
    return jnp.stack([-c * jnp.sin(alpha), c * jnp.cos(alpha), jnp.sin(beta)])
