"""The bouncing penny's model: a vertical rolling disk on a table with walls (Clark & Bloch,
Sects. V-VI). Public through :mod:`rollax.analysis.penny`.

Configuration q = (x, y, theta, phi): contact point, rotation angle and heading of the disk.
State vectors are ``(x, y, theta, phi, x_dot, y_dot, theta_dot, phi_dot)`` (shape (8,)).
Between impacts the penny moves on the closed-form flow (26); it hits the table edge
h(x, y) = 0 (h < 0 on the table) when its front (27) or back (34) reaches it, and the velocity
then jumps by one of the generic impact maps of :mod:`rollax.models.impacts` with
M = diag(m, m, I, J), the constraint forms (24) and dh of the surface in Q.

:meth:`PennyBilliard.next_impact` / :meth:`PennyBilliard.simulate` locate impacts by their own
route, on the closed-form flow by sampling + bracketing + safeguarded Newton (to rounding, made
differentiable by the implicit function theorem). They are kept as an independent reference
for the tests; rollax's sequences (:func:`rollax.analysis.penny.simulate`) go through the shared
machinery, :class:`rollax.systems.PennySystem` and :func:`rollax.solve`.
"""

from __future__ import annotations

import enum

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from rollax._core._system import parameter
from rollax._core._validate import check_integer, check_positive, check_range, check_shape
from rollax.models.impacts import (
    nonholonomic_elastic_root,
    nonholonomic_plastic,
)

__all__ = [
    "FAILED",
    "FlightStatus",
    "GLANCING",
    "IMPACT",
    "NO_IMPACT",
    "OUTSIDE",
    "STATUS_NAMES",
    "CustomTable",
    "EllipseTable",
    "ImpactSequence",
    "Penny",
    "PennyBilliard",
    "circle_table",
    "dynamic",
    "lagrange_dalembert_vector_field",
    "paper_billiard",
    "sequence_records",
]


class FlightStatus(enum.IntEnum):
    """How one flight of an impact sequence ended (the ``status`` of an impact record); a
    run's outcome is :class:`rollax.systems.PennyOutcome`, a separate enumeration."""

    IMPACT = 0  # the penny hit the edge and bounced
    NO_IMPACT = 1  # the motion never reaches the edge again (at rest, or circling inside)
    GLANCING = 2  # the edge is reached tangentially: no nontrivial impact (Prop. IV.1); stops
    OUTSIDE = 3  # the penny is not inside the table, or sits on the edge moving outwards
    FAILED = 4  # the integrator failed (non-finite values, or its step or reset limit)


# the codes as plain ints (for arrays) and their names in code order
IMPACT, NO_IMPACT, GLANCING, OUTSIDE, FAILED = (int(m) for m in FlightStatus)
STATUS_NAMES = tuple(m.name.lower() for m in FlightStatus)

_FRONT_BACK = (1.0, -1.0)  # sign of R cos(phi) in (27) and (34)


# ----------------------------------------------------------------------------------- penny


_STATE8 = " = (x, y, theta, phi, x', y', theta', phi')"
_Q4 = " = (x, y, theta, phi)"


def _s8(where: str, x, name: str = "state"):
    """``x`` as a float array if it has shape (8,), else a one-line ``ValueError``."""
    return jnp.asarray(check_shape(f"{where}: {name}", x, (8,), _STATE8), float)


def _q4(where: str, x, name: str = "q"):
    """``x`` as a float array if it has shape (4,), else a one-line ``ValueError``."""
    return jnp.asarray(check_shape(f"{where}: {name}", x, (4,), _Q4), float)


class Penny(eqx.Module):
    """The vertical rolling disk of Sect. V: radius R, mass m, moments of inertia I (about the
    axle, perpendicular to the disk) and J (about a vertical diameter). Defaults: Table I."""

    R: float = parameter(0.01, convert=False)
    m: float = parameter(0.0025, convert=False)
    I: float = parameter(1.25e-7, convert=False)  # noqa: E741 (the paper's name)
    J: float = parameter(6.25e-8, convert=False)

    def __check_init__(self):
        for name in ("R", "m", "I", "J"):
            check_positive(name, getattr(self, name))

    def mass_matrix(self) -> Float[Array, "4 4"]:
        """Kinetic-energy metric of the Lagrangian (22): diag(m, m, I, J)."""
        return jnp.diag(
            jnp.stack([jnp.asarray(v, float) for v in (self.m, self.m, self.I, self.J)])
        )

    def lagrangian(self, q: Float[ArrayLike, "4"], qdot: Float[ArrayLike, "4"]) -> Float[Array, ""]:
        """L = 1/2 m (x_dot^2 + y_dot^2) + 1/2 I theta_dot^2 + 1/2 J phi_dot^2, eq. (22)."""
        _q4("Penny.lagrangian", q)
        qdot = _q4("Penny.lagrangian", qdot, "qdot")
        return 0.5 * qdot @ self.mass_matrix() @ qdot

    def constraint_forms(self, q: Float[ArrayLike, "4"]) -> Float[Array, "2 4"]:
        """Rows omega^1 = dx - R cos(phi) dtheta, omega^2 = dy - R sin(phi) dtheta, eq. (24)."""
        phi = _q4("Penny.constraint_forms", q)[3]
        z = jnp.zeros_like(phi)
        o = jnp.ones_like(phi)
        return jnp.stack(
            [
                jnp.stack([o, z, -self.R * jnp.cos(phi), z]),
                jnp.stack([z, o, -self.R * jnp.sin(phi), z]),
            ]
        )

    def constraint_coefficients(self, q: Float[ArrayLike, "4"]) -> Float[Array, "2 2"]:
        """A^a_alpha of (11) with s = (x, y), r = (theta, phi): omega^a = ds^a + A^a_alpha dr^alpha."""
        phi = _q4("Penny.constraint_coefficients", q)[3]
        z = jnp.zeros_like(phi)
        return jnp.stack(
            [jnp.stack([-self.R * jnp.cos(phi), z]), jnp.stack([-self.R * jnp.sin(phi), z])]
        )

    def energy(self, state: Float[ArrayLike, "8"]) -> Float[Array, ""]:
        """Kinetic energy (22) of a state (x, y, theta, phi, x_dot, y_dot, theta_dot, phi_dot)."""
        state = _s8("Penny.energy", state)
        return self.lagrangian(state[:4], state[4:])

    def constraint_residual(self, state: Float[ArrayLike, "8"]) -> Float[Array, "2"]:
        """omega^k(qdot) of (24); zero when the rolling constraints (23) hold."""
        state = _s8("Penny.constraint_residual", state)
        return self.constraint_forms(state[:4]) @ state[4:]

    def check_rolling(self, states, name: str = "state0", valid=None) -> None:
        """A ``ValueError`` naming the first row of concrete ``states`` (``(8,)`` or ``(B, 8)``;
        only the rows where ``valid``) that violates the rolling constraints (23) by more than
        1e-8 of its speed: the closed-form flight (26) and the impact map assume them. Traced
        states pass."""
        try:
            rows = np.asarray(states, float).reshape(-1, 8)
            res = np.asarray(jax.vmap(self.constraint_residual)(jnp.asarray(rows)))
        except (
            jax.errors.TracerArrayConversionError,
            jax.errors.ConcretizationTypeError,
            TypeError,
            ValueError,
        ):
            return
        speed = 1.0 + np.abs(rows[:, 4]) + np.abs(rows[:, 5]) + float(self.R) * np.abs(rows[:, 6])
        bad = np.max(np.abs(res), axis=1) > 1e-8 * speed
        if valid is not None:
            bad &= np.asarray(valid, bool).reshape(-1)
        if bad.any():
            i = int(np.argmax(bad))
            row = f" (row {i})" if np.ndim(states) == 2 else ""
            raise ValueError(
                f"{name}{row} violates the rolling constraints (23): their residual "
                f"is {res[i].tolist()} (allowed: at most 1e-8 of the speed); build "
                f"states with Penny.state(x, y, theta, phi, theta_dot, phi_dot)"
            )

    def state(
        self,
        x: float = 0.0,
        y: float = 0.0,
        theta: float = 0.0,
        phi: float | Array = math.pi / 2,
        theta_dot: float = 10.0,
        phi_dot: float = 0.2,
    ) -> Float[Array, "8"]:
        """A state satisfying the constraints (23); defaults: the initial state of Sect. VI-A."""
        phi = jnp.asarray(phi, float)
        td = jnp.asarray(theta_dot, float)
        return jnp.stack(
            [
                jnp.asarray(x, float),
                jnp.asarray(y, float),
                jnp.asarray(theta, float),
                phi,
                self.R * td * jnp.cos(phi),
                self.R * td * jnp.sin(phi),
                td,
                jnp.asarray(phi_dot, float),
            ]
        )

    def flow(self, state: Float[ArrayLike, "8"], t: Float[ArrayLike, ""]) -> Float[Array, "8"]:
        """The closed-form motion (26) from ``state`` after time ``t``.

        Written with sin(w t/2)/(w t/2) so that it is exact and smooth also for phi_dot -> 0
        (straight rolling). Uses theta_dot, phi_dot of ``state``; x_dot, y_dot follow from (23).
        """
        s = _s8("Penny.flow", state)
        t = jnp.asarray(t, float)
        Om, om = s[6], s[7]
        half = 0.5 * om * t
        chord = Om * self.R * t * jnp.sinc(half / jnp.pi)  # = (Om/om) R 2 sin(om t/2)
        mid = s[3] + half
        phi = s[3] + om * t
        return jnp.stack(
            [
                s[0] + chord * jnp.cos(mid),
                s[1] + chord * jnp.sin(mid),
                s[2] + Om * t,
                phi,
                self.R * Om * jnp.cos(phi),
                self.R * Om * jnp.sin(phi),
                Om,
                om,
            ]
        )

    def vector_field(self, t, state: Float[ArrayLike, "8"], args=None) -> Float[Array, "8"]:
        """First-order form of (25) on the 8-dim state (diffrax signature ``f(t, y, args)``)."""
        s = _s8("Penny.vector_field", state)
        Om, om, phi = s[6], s[7], s[3]
        return jnp.stack(
            [
                self.R * Om * jnp.cos(phi),
                self.R * Om * jnp.sin(phi),
                Om,
                om,
                -self.R * Om * om * jnp.sin(phi),
                self.R * Om * om * jnp.cos(phi),
                jnp.zeros_like(Om),
                jnp.zeros_like(om),
            ]
        )

    def dalembert_vector_field(self) -> Callable:
        """The generic nonholonomic equations (12)-(13) for this penny, on z = (q, theta_dot, phi_dot).

        Built by :func:`lagrange_dalembert_vector_field` from the Lagrangian (22) and the
        constraint coefficients of (24) in the form (11); independent of (25)-(26).
        """
        return lagrange_dalembert_vector_field(
            self.lagrangian, self.constraint_coefficients, r_idx=(2, 3), s_idx=(0, 1)
        )


def lagrange_dalembert_vector_field(
    lagrangian: Callable,
    coefficients: Callable,
    r_idx: Sequence[int] | Array,
    s_idx: Sequence[int] | Array,
) -> Callable:
    """Vector field of the dynamic nonholonomic equations (12)-(13) for any Lagrangian.

    ``lagrangian(q, qdot)``; ``coefficients(q) -> (m, n - m)`` the A^a_alpha of the constraint
    forms omega^a = ds^a + A^a_alpha dr^alpha (11), with q split into r = q[r_idx] and
    s = q[s_idx]. Returns ``f(t, z, args)`` on z = (q, r_dot): q_dot from (13),
    s_dot = -A r_dot, and r_ddot solving (12), E_r = A^T E_s with E = d/dt dL/dqdot - dL/dq,
    where E is linear in q_ddot and s_ddot = -A r_ddot - (dA/dt) r_dot.
    """
    r_idx = jnp.asarray(tuple(r_idx))
    s_idx = jnp.asarray(tuple(s_idx))
    n = int(r_idx.shape[0] + s_idx.shape[0])
    k = int(r_idx.shape[0])
    dL_dqdot = jax.grad(lagrangian, argnums=1)

    def f(t, z, args=None):
        z = jnp.asarray(z, float)
        q, rdot = z[:n], z[n:]
        A = coefficients(q)
        qdot = jnp.zeros(n, z.dtype).at[r_idx].set(rdot).at[s_idx].set(-A @ rdot)  # (13)
        H = jax.jacfwd(dL_dqdot, argnums=1)(q, qdot)
        b = jax.jacfwd(dL_dqdot, argnums=0)(q, qdot) @ qdot - jax.grad(lagrangian, argnums=0)(
            q, qdot
        )
        A_dot = jax.jvp(coefficients, (q,), (qdot,))[1]
        T = jnp.zeros((n, k), z.dtype).at[r_idx].set(jnp.eye(k)).at[s_idx].set(-A)
        c = jnp.zeros(n, z.dtype).at[s_idx].set(-A_dot @ rdot)
        rddot = jnp.linalg.solve(T.T @ H @ T, -T.T @ (H @ c + b))  # (12): T^T E = 0
        return jnp.concatenate([qdot, rddot])

    return f


# ----------------------------------------------------------------------------------- tables


class EllipseTable(eqx.Module):
    """Elliptical table top h(x, y) = x^2/a^2 + y^2/b^2 - 1, eq. (35) (h < 0 on the table).
    Defaults: the elliptical table of Table I."""

    a: float = parameter(0.15, convert=False)
    b: float = parameter(0.20, convert=False)

    def __check_init__(self):
        check_positive("a", self.a)
        check_positive("b", self.b)

    def h(self, p: Float[ArrayLike, "2"]) -> Float[Array, ""]:
        """The edge function (35) at the point p = (x, y)."""
        p = jnp.asarray(p, float)
        return (p[0] / self.a) ** 2 + (p[1] / self.b) ** 2 - 1.0

    @property
    def diameter(self):
        """Largest distance between two points of the table, 2 max(a, b)."""
        return 2.0 * jnp.maximum(jnp.asarray(self.a, float), jnp.asarray(self.b, float))


def circle_table(radius: float = 0.20) -> EllipseTable:
    """Circular table of the given radius (Table I: 0.20 m), the ellipse (35) with a = b."""
    check_positive("radius", radius)
    return EllipseTable(radius, radius)


class CustomTable(eqx.Module):
    """A table given by any smooth, JAX-traceable ``fn(x, y)``, negative on the table and zero on
    its edge. ``diameter`` must bound the largest distance between two points of the table (it
    sets the search horizon for the next impact). Only the front and back of the penny are tested
    against the edge, as in (27) and (34), which suffices for convex tables."""

    fn: Callable = eqx.field(static=True)
    diameter: float = parameter(1.0, convert=False)

    def __check_init__(self):
        if not callable(self.fn):
            raise ValueError(f"fn must be a callable fn(x, y), got {self.fn!r}")
        check_positive("diameter", self.diameter)

    def h(self, p: Float[ArrayLike, "2"]) -> Float[Array, ""]:
        """The user's edge function at p = (x, y)."""
        p = jnp.asarray(p, float)
        return jnp.asarray(self.fn(p[0], p[1]), float)


# -------------------------------------------------------------------------------- billiard


class ImpactSequence(NamedTuple):
    """N impacts of one trajectory (leading batch axes under vmap).

    ``times`` absolute impact times, ``taus`` flight times before each impact, ``states`` the
    post-impact states (the pre-impact state for a glancing record), ``pre_states`` the states
    just before the impacts, ``energies`` the kinetic energy after each impact, ``ends`` 0 (front,
    (27)) or 1 (back, (34)), ``status`` one of IMPACT/NO_IMPACT/GLANCING/OUTSIDE/FAILED per record.
    Records after the first non-IMPACT status repeat that status and hold NaN.
    """

    times: Float[Array, " N"]
    taus: Float[Array, " N"]
    states: Float[Array, "N 8"]
    pre_states: Float[Array, "N 8"]
    energies: Float[Array, " N"]
    ends: Int[Array, " N"]
    status: Int[Array, " N"]


def impact_sequence(
    step: Callable, energy: Callable, s0: Float[Array, "8"], n_impacts: int
) -> ImpactSequence:
    """The :class:`ImpactSequence` of ``n_impacts`` flights from ``s0`` (``lax.scan``), where
    ``step(s) -> (post, pre, tau, end, status)`` is one flight and impact
    (:meth:`PennyBilliard.step`, or :func:`rollax.analysis.penny.flight`) and ``energy`` the kinetic
    energy. After the first record that is not IMPACT, the status is repeated and the records
    are NaN (a GLANCING record keeps its time and pre-impact state)."""
    nan8 = jnp.full((8,), jnp.nan)

    def body(carry, _):
        s, t_abs, prev = carry
        post, pre, tau, end, status = step(s)
        live = prev == IMPACT
        status = jnp.where(live, status, prev).astype(jnp.int32)
        ok = status == IMPACT
        timed = live & ((status == IMPACT) | (status == GLANCING))
        rec = (
            jnp.where(timed, t_abs + tau, jnp.nan),
            jnp.where(timed, tau, jnp.nan),
            jnp.where(ok, post, jnp.where(timed, pre, nan8)),
            jnp.where(timed, pre, nan8),
            jnp.where(ok, energy(post), jnp.nan),
            jnp.where(timed, end, -1),
            status,
        )
        return (jnp.where(ok, post, s), jnp.where(ok, t_abs + tau, t_abs), status), rec

    init = (s0, jnp.asarray(0.0, s0.dtype), jnp.asarray(IMPACT, jnp.int32))
    _, recs = jax.lax.scan(body, init, None, length=n_impacts)
    return ImpactSequence(*recs)


_LAWS = ("elastic", "plastic", "restitution")
_CROSS, _MISS, _GRAZE = 0, 1, 2


def _rtsafe(fdf: Callable, lo, hi, iters: int = 100):
    """Root of an increasing f on [lo, hi] (f(lo) < 0 <= f(hi)): safeguarded Newton-bisection.

    ``fdf(t) -> (f, f')``. Fixed iteration count (vmap-friendly); converges to rounding.
    """

    def body(_, c):
        lo, hi, t, f, df, dx, dxold = c
        bad = (
            (((t - hi) * df - f) * ((t - lo) * df - f) > 0)
            | (jnp.abs(2.0 * f) > jnp.abs(dxold * df))
            | (df == 0)
        )
        step = jnp.where(bad, 0.5 * (hi - lo), f / jnp.where(df == 0, 1.0, df))
        t_new = jnp.where(bad, lo + 0.5 * (hi - lo), t - step)
        t_new = jnp.clip(t_new, lo, hi)
        f2, df2 = fdf(t_new)
        lo2 = jnp.where(f2 < 0, t_new, lo)
        hi2 = jnp.where(f2 >= 0, t_new, hi)
        return lo2, hi2, t_new, f2, df2, step, dx

    t0 = 0.5 * (lo + hi)
    f0, df0 = fdf(t0)
    w = hi - lo
    out = jax.lax.fori_loop(0, iters, body, (lo, hi, t0, f0, df0, w, 2.0 * w))
    return out[2]


class PennyBilliard(eqx.Module):
    """The rolling-penny billiard of Sect. VI: a :class:`Penny` on a table with an impact law.

    ``law``: "elastic" (Definition IV.3, the nontrivial root of (15)-(17)), "plastic"
    (Definition IV.4, eqs. (18)-(21)) or "restitution" (coefficient ``e`` in [0, 1], see
    :func:`rollax.models.impacts.nonholonomic_restitution`). ``n_samples`` samples per flight bracket the
    next impact (extrema of the edge function between samples are resolved exactly, so no impact
    is missed). Impacts whose normal approach is below ``glancing_tol`` (cosine in the kinetic
    metric, see :class:`rollax.models.impacts.ElasticRoot`) are reported as GLANCING: the penetration
    of the flow beyond the edge scales like that cosine squared, so below ~1e-6 it sinks into
    the rounding of h and the impact is no longer resolved in float64.
    """

    penny: Penny = eqx.field(default_factory=Penny)
    table: EllipseTable | CustomTable = eqx.field(default_factory=EllipseTable)
    law: str = eqx.field(static=True, default="elastic")
    e: float = parameter(1.0, convert=False)
    n_samples: int = eqx.field(static=True, default=512)
    glancing_tol: float = parameter(1e-6, convert=False)

    def __check_init__(self):
        if self.law not in _LAWS:
            raise ValueError(f"law = {self.law!r} is not one of {_LAWS}")
        check_range("e", self.e, 0.0, 1.0)
        if not (isinstance(self.n_samples, int) and self.n_samples >= 8):
            raise ValueError(f"n_samples = {self.n_samples!r} must be an integer >= 8")
        check_range("glancing_tol", self.glancing_tol, 0.0, 1.0, hi_open=True)

    # ------------------------------------------------------------------ geometry of the ends
    def ends(self, state: Float[ArrayLike, "8"]) -> Float[Array, "2 2"]:
        """Front (27) and back (34) points of the penny, (x, y) +- R (cos phi, sin phi)."""
        s = _s8("PennyBilliard.ends", state)
        e = self.penny.R * jnp.stack([jnp.cos(s[3]), jnp.sin(s[3])])
        return jnp.stack([s[:2] + e, s[:2] - e])

    def edge_values(self, state: Float[ArrayLike, "8"]) -> Float[Array, "2"]:
        """h at the front and at the back of the penny (both < 0 on the table)."""
        return jax.vmap(self.table.h)(self.ends(state))

    def surface_differential(
        self, q: Float[ArrayLike, "4"], end: Int[ArrayLike, ""]
    ) -> Float[Array, "4"]:
        """dh of the impact surface in Q for the front (end 0, (27)) or back (end 1, (34)).

        The surface is h(x + sigma R cos phi, y + sigma R sin phi) = 0 with sigma = +-1, so
        dh = (h_x, h_y, 0, sigma R (cos phi h_y - sin phi h_x)), as in (28)-(29).
        """
        q = _q4("PennyBilliard.surface_differential", q)
        sigma = jnp.where(jnp.asarray(end) == 0, 1.0, -1.0)
        c, s = jnp.cos(q[3]), jnp.sin(q[3])
        hx, hy = jax.grad(self.table.h)(q[:2] + sigma * self.penny.R * jnp.stack([c, s]))
        return jnp.stack([hx, hy, jnp.zeros_like(hx), sigma * self.penny.R * (c * hy - s * hx)])

    def _g(self, s0, t, sigma):
        """Edge function of one end along the flow from s0: g(t) and dg/dt = dh(qdot)."""
        s = self.penny.flow(s0, t)
        c, sn = jnp.cos(s[3]), jnp.sin(s[3])
        R = self.penny.R
        p = s[:2] + sigma * R * jnp.stack([c, sn])
        v = s[4:6] + sigma * R * s[7] * jnp.stack([-sn, c])
        g, grad = jax.value_and_grad(self.table.h)(p)
        return g, grad @ v

    def _horizon(self, s0):
        """A time by which a convex table of the given diameter must have been hit, if ever.

        The contact point moves on a circle of radius rho = |theta_dot| R/|phi_dot| (a line if
        phi_dot = 0). If 2 rho > D + 2R an arc whose chord is D + 2R leaves the table; otherwise the
        motion is periodic and one period 2 pi/|phi_dot| decides. Returns (T, moving).
        """
        R = self.penny.R
        L = jnp.asarray(self.table.diameter, float) + 2.0 * R
        speed = jnp.abs(s0[6]) * R
        w = jnp.abs(s0[7])
        x = L * w / (2.0 * jnp.where(speed > 0, speed, 1.0))  # L/(2 rho)
        ratio = jnp.where(
            x > 1e-6,
            jnp.arcsin(jnp.minimum(x, 1.0)) / jnp.where(x > 1e-6, x, 1.0),
            1.0 + x * x / 6.0,
        )
        t_arc = L / jnp.where(speed > 0, speed, 1.0) * ratio
        t_per = 2.0 * jnp.pi / jnp.where(w > 0, w, 1.0)
        T = jnp.where((speed > 0) & (x < 1.0), t_arc, t_per)
        return 1.02 * T, (speed > 0) | (w > 0)

    def _search_end(self, s0, sigma, T):
        """First upward zero of g for one end in (0, T]: (time, kind) with kind CROSS/MISS/GRAZE."""
        K = self.n_samples
        dt = T / K
        ts = dt * jnp.arange(K + 1, dtype=float)
        G, D = jax.vmap(lambda t: self._g(s0, t, sigma))(ts)
        Ga, Gb, Da, Db = G[:-1], G[1:], D[:-1], D[1:]
        is_max = (Da > 0) & (Db < 0)
        is_min = (Da < 0) & (Db > 0)
        mono = ~(is_max | is_min)
        # Upper bound of a hump between samples: the two tangent lines meet above it (+ margin).
        tau = jnp.clip((Gb - Db * dt - Ga) / jnp.where(is_max, Da - Db, 1.0), 0.0, dt)
        bound = Ga + Da * tau + 0.25 * jnp.abs(Da - Db) * dt
        flags = (
            (mono & (Ga < 0) & (Gb >= 0))
            | (is_min & (Gb >= 0))
            | (is_max & (Ga < 0) & (bound >= 0))
        )
        idx = jnp.arange(K)

        def g_dg(t):
            return self._g(s0, t, sigma)

        def dg_ddg(t):
            return jax.jvp(lambda tt: self._g(s0, tt, sigma)[1], (t,), (jnp.ones_like(t),))

        def refine(k):
            a = k * dt
            b = a + dt
            ga, gb, da, db = G[k], G[k + 1], D[k], D[k + 1]
            mx = (da > 0) & (db < 0)
            mn = (da < 0) & (db > 0)
            sgn = jnp.where(mx, -1.0, 1.0)
            tc = _rtsafe(lambda t: tuple(sgn * v for v in dg_ddg(t)), a, b)
            gc = self._g(s0, tc, sigma)[0]
            grad_c = jax.grad(self.table.h)(
                self.ends(self.penny.flow(s0, tc))[jnp.where(sigma > 0, 0, 1)]
            )
            graze_tol = 1e-12 * jnp.linalg.norm(grad_c) * jnp.asarray(self.table.diameter, float)
            lo = jnp.where(mn, tc, a)
            hi = jnp.where(mx, tc, b)
            cross = (mx & (gc >= 0)) | (mn & (gb >= 0)) | (~mx & ~mn & (ga < 0) & (gb >= 0))
            graze = mx & (gc < 0) & (gc >= -graze_tol)
            t_root = _rtsafe(g_dg, lo, hi)
            t = jnp.where(cross, t_root, jnp.where(graze, tc, 0.0))
            kind = jnp.where(cross, _CROSS, jnp.where(graze, _GRAZE, _MISS))
            return t, kind

        def next_flag(after):
            cand = flags & (idx > after)
            return jnp.where(jnp.any(cand), jnp.argmax(cand), K)

        def cond(c):
            k, _, kind = c
            return (k < K) & (kind == _MISS)

        def body(c):
            k, _, _ = c
            t, kind = refine(k)
            return jnp.where(kind == _MISS, next_flag(k), k), t, kind

        k0 = next_flag(-1)
        _, t, kind = jax.lax.while_loop(cond, body, (k0, jnp.asarray(0.0), jnp.asarray(_MISS)))
        return t, kind, G[0], D[0]

    def next_impact(self, state: Float[ArrayLike, "8"]):
        """Time to the next impact along the closed-form flow (26), the end that hits, and a status.

        Returns (tau, end, status, s) with ``status`` IMPACT, NO_IMPACT, GLANCING or OUTSIDE and
        ``s`` the normalised normal approach (cosine in the kinetic metric) at the impact. tau is
        located to rounding (well below 1e-12 relative) and is differentiable with respect to
        ``state`` and the model (implicit function theorem: dtau = -dg/(dg/dt)).
        """
        s_in = _s8("PennyBilliard.next_impact", state)
        s0 = jax.lax.stop_gradient(s_in)
        # The search runs without derivatives (its loops are not reverse-differentiable);
        # derivatives enter through the implicit-function step below.
        nd = jax.tree_util.tree_map(
            lambda x: jax.lax.stop_gradient(x) if eqx.is_array(x) else x, self
        )
        T, moving = nd._horizon(s0)
        sig = jnp.asarray(_FRONT_BACK)
        t_e, kind_e, g0, d0 = jax.vmap(lambda sg: nd._search_end(s0, sg, T))(sig)
        # On the table at the start: both ends inside, or on the edge and moving inwards; an end
        # on the edge that is not moving inwards (within the glancing band) starts tangentially.
        ends0 = nd.ends(s0)
        grads = jax.vmap(jax.grad(nd.table.h))(ends0)
        gnorm = jnp.linalg.norm(grads, axis=1)
        tol_out = 1e-10 * gnorm * jnp.asarray(nd.table.diameter, float)
        R = nd.penny.R
        v_end = jnp.sqrt(s0[4] ** 2 + s0[5] ** 2) + R * jnp.abs(s0[7])
        tol_d = nd.glancing_tol * gnorm * v_end
        on_edge = g0 > -tol_out
        outside = jnp.any((g0 > tol_out) | (on_edge & (d0 > tol_d)))
        tangent_start = jnp.any(on_edge & (d0 >= 0) & (d0 <= tol_d))
        found = kind_e != _MISS
        t_eff = jnp.where(found, t_e, jnp.inf)
        end = jnp.argmin(t_eff)
        any_found = jnp.any(found) & moving
        tau_star = t_e[end]
        kind = kind_e[end]
        sigma = sig[end]
        # Normalised approach at the impact, and the implicit-function step for derivatives.
        pre = nd.penny.flow(s0, tau_star)
        root = nd._impact_root(pre, end)
        g_s, dg_s = self._g(s_in, tau_star, sigma)
        ok_dg = jnp.abs(jax.lax.stop_gradient(dg_s)) > 0
        tau = tau_star - jnp.where(
            ok_dg, g_s / jnp.where(ok_dg, jax.lax.stop_gradient(dg_s), 1.0), 0.0
        )
        glancing = (kind == _GRAZE) | (jnp.abs(root.s) <= nd.glancing_tol) | tangent_start
        status = jnp.where(
            outside,
            OUTSIDE,
            jnp.where(
                tangent_start,
                GLANCING,
                jnp.where(~any_found, NO_IMPACT, jnp.where(glancing, GLANCING, IMPACT)),
            ),
        )
        tau = jnp.where(status == IMPACT, tau, jax.lax.stop_gradient(tau_star))
        return tau, end, status, root.s

    def _impact_root(self, pre, end):
        M = self.penny.mass_matrix()
        A = self.penny.constraint_forms(pre[:4])
        dh = self.surface_differential(pre[:4], end)
        e = 1.0 if self.law == "elastic" else self.e
        return nonholonomic_elastic_root(M, A, dh, pre[4:], e, tol=0.0)

    def impact(self, pre: Float[ArrayLike, "8"], end: Int[ArrayLike, ""]) -> Float[Array, "8"]:
        """Post-impact state for a pre-impact state on the surface of ``end`` (0 front, 1 back).

        elastic: (15)-(17); plastic: (18)-(21) = (28)-(29) followed by (32)-(33); restitution:
        :func:`rollax.models.impacts.nonholonomic_restitution`. The configuration is unchanged.
        """
        pre = _s8("PennyBilliard.impact", pre, "pre")
        if self.law == "plastic":
            M = self.penny.mass_matrix()
            A = self.penny.constraint_forms(pre[:4])
            dh = self.surface_differential(pre[:4], end)
            v = nonholonomic_plastic(M, A, dh, pre[4:])
        else:
            v = self._impact_root(pre, end).qdot
        return jnp.concatenate([pre[:4], v])

    def step(self, state: Float[ArrayLike, "8"]):
        """One flight and impact: (post-impact state, pre-impact state, tau, end, status).

        When status is not IMPACT the returned post state equals ``state``.
        """
        s = _s8("PennyBilliard.step", state)
        tau, end, status, _ = self.next_impact(s)
        pre = self.penny.flow(s, tau)
        post = self.impact(pre, end)
        ok = status == IMPACT
        return jnp.where(ok, post, s), pre, tau, end, status

    def simulate(self, state0: Float[ArrayLike, "8"], n_impacts: int) -> ImpactSequence:
        """The first ``n_impacts`` impacts from ``state0`` by the closed-form search
        (:meth:`next_impact`; lax.scan, vmap it over initial states): the independent reference
        for :func:`rollax.analysis.penny.simulate`, which goes through :func:`rollax.solve`.

        The sequence stops (NaN records, status repeated) at the first flight that never reaches
        the edge (NO_IMPACT), touches it tangentially (GLANCING, time and pre-impact state kept)
        or starts off the table (OUTSIDE).
        """
        n_impacts = check_integer("n_impacts", n_impacts, 1)
        check_shape("state0", state0, (8,), _STATE8)
        self.penny.check_rolling(state0)
        s0 = jnp.asarray(state0, float)
        return impact_sequence(self.step, self.penny.energy, s0, n_impacts)

    # ------------------------------------------------------------------------ evaluation
    def state_at(
        self, state0: Float[ArrayLike, "8"], seq: ImpactSequence, t: Float[ArrayLike, ""]
    ) -> Float[Array, "8"]:
        """State at absolute time t of the trajectory ``seq`` from ``state0``.

        NaN beyond the last recorded impact unless the sequence ended with NO_IMPACT (then the
        flow (26) is valid for ever).
        """
        s0 = _s8("PennyBilliard.state_at", state0, "state0")
        t = jnp.asarray(t, float)
        n = seq.times.shape[0]
        hit = seq.status == IMPACT
        k = jnp.searchsorted(
            jnp.where(hit, seq.times, jnp.inf), t, side="right"
        )  # impacts before t
        starts = jnp.concatenate([s0[None], seq.states])
        t_start = jnp.concatenate([jnp.zeros(1), jnp.where(hit, seq.times, 0.0)])
        out = self.penny.flow(starts[k], t - t_start[k])
        kk = jnp.minimum(k, n - 1)
        nxt = seq.status[kk]
        valid = (
            (k < n)
            & (t >= 0)
            & (nxt != OUTSIDE)
            & (nxt != FAILED)
            & ((nxt != GLANCING) | (t <= seq.times[kk]))
        )
        return jnp.where(valid, out, jnp.nan)

    def path(
        self, state0: Float[ArrayLike, "8"], seq: ImpactSequence, points_per_flight: int = 40
    ) -> Float[Array, "N1 P 8"]:
        """Dense states along each flight (flight k from the k-th start to the (k+1)-th impact),
        for plotting; flights that did not happen are NaN."""
        s0 = _s8("PennyBilliard.path", state0, "state0")
        starts = jnp.concatenate([s0[None], seq.states[:-1]])
        u = jnp.linspace(0.0, 1.0, points_per_flight)

        def one(s, tau):
            return jax.vmap(lambda v: self.penny.flow(s, v * tau))(u)

        return jax.vmap(one)(starts, seq.taus)


def dynamic(billiard: PennyBilliard) -> PennyBilliard:
    """The same billiard with its float parameters as arrays, so that one compilation of
    :func:`rollax.analysis.penny.simulate` / :func:`rollax.analysis.penny.simulate_batch` serves all parameter values (only ``law``,
    ``n_samples`` and a custom table's function are static)."""
    return jax.tree_util.tree_map(
        lambda x: (
            jnp.asarray(x, float) if isinstance(x, (float, int)) and not isinstance(x, bool) else x
        ),
        billiard,
    )


# --------------------------------------------------------------- the paper's experiments
STATE_FIELDS = ("x", "y", "theta", "phi", "x_dot", "y_dot", "theta_dot", "phi_dot")
TABLES = ("circle", "ellipse")
CHAOS_TIMES = {"elastic": (0.0, 10.0, 30.0, 60.0), "plastic": (0.0, 2.0, 4.0, 6.0)}


def paper_billiard(
    table: str = "ellipse", law: str = "elastic", e: float = 1.0, glancing_tol: float = 1e-6
) -> PennyBilliard:
    """The billiard of Table I (:func:`dynamic`): ``table`` is ``"ellipse"`` (a = 0.15,
    b = 0.20 m) or ``"circle"`` (radius 0.20 m)."""
    if table not in TABLES:
        raise ValueError(f"table = {table!r} must be one of {TABLES}")
    tab = circle_table(0.20) if table == "circle" else EllipseTable(0.15, 0.20)
    return dynamic(PennyBilliard(table=tab, law=law, e=e, glancing_tol=glancing_tol))


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def sequence_records(billiard: PennyBilliard, state0, seq: ImpactSequence) -> dict:
    """JSON-ready description of one impact sequence: per impact its time, flight time, end
    (front/back), status, post-impact state and energy (``None`` for non-finite values), and
    the overall status, initial state, energy and parameters."""
    import numpy as np

    times, taus, states, _, energies, ends, status = [np.asarray(v) for v in seq]
    recs = []
    for k in range(times.shape[0]):
        recs.append(
            {
                "index": k + 1,
                "time": _num(times[k]),
                "flight_time": _num(taus[k]),
                "end": {0: "front", 1: "back"}.get(int(ends[k])),
                "status": STATUS_NAMES[int(status[k])],
                "state": {f: _num(v) for f, v in zip(STATE_FIELDS, states[k])},
                "energy": _num(energies[k]),
            }
        )
    bad = status[status != 0]
    b = billiard
    return {
        "status": STATUS_NAMES[int(bad[0])] if bad.size else "impact",
        "n_completed": int(np.sum(status == 0)),
        "initial_state": {f: float(v) for f, v in zip(STATE_FIELDS, np.asarray(state0))},
        "initial_energy": float(b.penny.energy(state0)),
        "parameters": {
            "R": float(b.penny.R),
            "m": float(b.penny.m),
            "I": float(b.penny.I),
            "J": float(b.penny.J),
            # the table: an ellipse's semi-axes, or a custom table's bounding diameter
            **(
                {"a": float(b.table.a), "b": float(b.table.b)}
                if isinstance(b.table, EllipseTable)
                else {"table": "custom", "diameter": float(b.table.diameter)}
            ),
            "law": b.law,
            "e": float(b.e),
            "glancing_tol": float(b.glancing_tol),
        },
        "impacts": recs,
    }
