"""Conserved quantities of the ball rolling on the rim (Sect. 4.4).

- The energy, eq. (60) corrected to the potential m g rho sin(beta) (docs/physics-notes.md).
- P = c2(beta) w2 + c3(beta) w3 (eq. (65) with c1 = 0) is conserved along every rolling
  trajectory (33)-(36) when (c2, c3) solves the linear system (66),

      dc2/dbeta = j/(1+j) c3,   dc3/dbeta = -R/(R - rho cos b) c2 + rho sin b/(R - rho cos b) c3,

  the adjoint of (62). With Psi the fundamental matrix of (66), Psi(0) = I, eq. (68) gives
  P(beta, w2, w3; c) = (w2, w3) . Psi(beta) c, and P_I, P_II for c = e1, e2 (Prop. 10).
  Psi(beta) is integrated numerically (rollax.solve) over at most one period: for R > rho, (66) is
  2 pi-periodic and Psi(beta + 2 pi k) = Psi(beta) N^k with N = Psi(2 pi), so beta can be any
  real number. For R < rho (only to approach the limit R -> 0) the coefficients are singular
  where R = rho cos(beta); Psi is then returned for |beta| < arccos(R/rho) and NaN beyond.
- The closed forms of the limits R -> infinity, eqs. (69)-(70), and R -> 0, eq. (72), with the
  limit rolling equations (:class:`LimitRim`) on which they are exactly conserved.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from rollax._core._validate import check_nonnegative, check_positive, check_range
from rollax._drivers._flows import run
from rollax.models.rim import Rim, rolling_energy

TWO_PI = 2.0 * jnp.pi
Scalar = Float[Array, ""]


def energy(rim: Rim, x: Float[Array, "4"]) -> Scalar:
    """Total energy of the rolling ball, eq. (60) with the potential m g rho sin(beta) (docs/physics-notes.md)."""
    return rim.energy(x)


def _matpow(N: Float[Array, "2 2"], k) -> Float[Array, "2 2"]:
    """N^k for an integer k (traced or not, |k| < 2^31) by binary powering; k < 0 uses N^-1."""
    k = jnp.asarray(k, dtype=jnp.int64)
    base = jnp.where(k < 0, jnp.linalg.inv(N), N)
    n = jnp.abs(k)

    def body(_, carry):
        acc, b, n = carry
        acc = jnp.where(n % 2 == 1, acc @ b, acc)
        return acc, b @ b, n // 2

    acc, _, _ = jax.lax.fori_loop(0, 32, body, (jnp.eye(2), base, n))
    return acc


class MomentumIntegrals(eqx.Module):
    """The conserved quantities P_I, P_II of eqs. (65)-(68) from the fundamental matrix of (66).

    Fields: rim major radius ``R`` [m], ``rho`` = r + a [m], moment of inertia ratio ``j``;
    tolerances ``rtol``, ``atol`` of the integration of (66). Build from a rim with
    :meth:`from_rim`. R < rho is allowed only to study the limit R -> 0 (see the module notes).
    """

    R: float
    rho: float
    j: float
    rtol: float = 1e-12
    atol: float = 1e-13

    def __check_init__(self):
        check_positive("R", self.R)
        check_positive("rho", self.rho)
        check_range("j", self.j, 0.0, 1.0, lo_open=True)
        check_positive("rtol", self.rtol)
        check_positive("atol", self.atol)
        try:
            equal = float(self.R) == float(self.rho)
        except TypeError:
            return
        if equal:
            raise ValueError(f"R = rho = {float(self.R)!r}: eq. (66) is singular at beta = 0")

    @classmethod
    def from_rim(cls, rim: Rim, **kw) -> "MomentumIntegrals":
        """The integrals of a :class:`~rollax.models.rim.Rim`."""
        return cls(R=rim.R, rho=rim.rho, j=rim.j, **kw)

    def matrix(self, beta) -> Float[Array, "2 2"]:
        """Coefficient matrix B(beta) of (66): dc/dbeta = B c, c = (c2, c3). B = -A^T of (62)."""
        c, s = jnp.cos(beta), jnp.sin(beta)
        D = self.R - self.rho * c
        return jnp.array([[0.0, self.j / (1.0 + self.j)], [-self.R / D, self.rho * s / D]])

    def _psi(self, beta_end) -> Float[Array, "2 2"]:
        """Psi(beta_end) by integrating (66) from 0, as s in [0, 1] with beta = s * beta_end.

        The fixed interval keeps the solve batchable under vmap without batched end times.
        """

        b = beta_end
        sol = run(
            lambda s, Y, _: b * (self.matrix(s * b) @ Y),
            jnp.eye(2),
            0.0,
            1.0,
            rtol=self.rtol,
            atol=self.atol,
            max_steps=100_000,
        )
        # (a run that fails gives nan, as diffrax's throw=False did)
        return jnp.where(sol.failed, jnp.nan, sol.y.reshape(2, 2))

    def monodromy(self) -> Float[Array, "2 2"]:
        """N = Psi(2 pi), the monodromy matrix of (66) (R > rho); N = M^-T for M of (62)."""
        return self.fundamental_matrix(TWO_PI)

    def fundamental_matrix(self, beta) -> Float[Array, "2 2"]:
        """Psi(beta), the fundamental matrix of (66) with Psi(0) = I (eq. (67)), for any real beta.

        R > rho: Psi(beta) = Psi(beta_r) N^k, beta = beta_r + 2 pi k, 0 <= beta_r < 2 pi,
        N = Psi(2 pi). R < rho: direct integration, NaN for |beta| >= arccos(R / rho).
        """
        f = lambda x: jnp.asarray(x, dtype=float)  # noqa: E731
        return _fundamental(
            f(self.R), f(self.rho), f(self.j), f(beta), rtol=self.rtol, atol=self.atol
        )

    def _fundamental_impl(self, beta) -> Float[Array, "2 2"]:
        beta = jnp.asarray(beta, dtype=float)
        periodic = self.R > self.rho
        k = jnp.where(periodic, jnp.floor(beta / TWO_PI), 0.0)
        beta_r = beta - TWO_PI * k
        # keep the integration of the singular case inside its domain
        limit = jnp.arccos(jnp.clip(self.R / self.rho, -1.0, 1.0))
        inside = periodic | (jnp.abs(beta_r) < limit)
        Psi = self._psi(jnp.where(inside, beta_r, 0.0))
        N = jnp.where(periodic, self._psi(jnp.asarray(TWO_PI)), jnp.eye(2))
        out = Psi @ _matpow(N, k.astype(jnp.int64))
        return jnp.where(inside, out, jnp.nan)

    def integral(self, beta, omega2, omega3, c: Float[Array, "2"]) -> Scalar:
        """P(beta, w2, w3) = (w2, w3) . Psi(beta) c, eq. (68), for a constant vector ``c``."""
        z = jnp.stack([jnp.asarray(omega2, float), jnp.asarray(omega3, float)])
        return z @ (self.fundamental_matrix(beta) @ jnp.asarray(c, dtype=float))

    def __call__(self, beta, omega2, omega3) -> Float[Array, "2"]:
        """(P_I, P_II) of Prop. 10: eq. (68) with c_I = (1, 0), c_II = (0, 1)."""
        z = jnp.stack([jnp.asarray(omega2, float), jnp.asarray(omega3, float)])
        return z @ self.fundamental_matrix(beta)

    def of_state(self, x: Float[Array, "4"]) -> Float[Array, "2"]:
        """(P_I, P_II) at a rolling state x = (beta, w1, w2, w3) (they do not depend on w1)."""
        return self(x[0], x[2], x[3])


@functools.partial(jax.jit, static_argnames=("rtol", "atol"))
def _fundamental(R, rho, j, beta, rtol, atol):
    """Psi(beta) of (66) for array parameters: compiled once and reused for every value."""
    return MomentumIntegrals(R=R, rho=rho, j=j, rtol=rtol, atol=atol)._fundamental_impl(beta)


# ---------------------------------------------------------------------------- limit cases
def cylinder_integrals(j, beta, omega2, omega3) -> Float[Array, "2"]:
    """(P_I, P_II) of the limit R -> infinity (rim -> cylinder), eq. (69).

    With k = sqrt(j/(1+j)): P_I = w3 cos(k b) + k w2 sin(k b), P_II = w3 sin(k b) - k w2 cos(k b).
    They equal eq. (68) with c_I = (0, 1), c_II = (-k, 0).
    """
    k = jnp.sqrt(j / (1.0 + j))
    cb, sb = jnp.cos(k * beta), jnp.sin(k * beta)
    return jnp.stack([omega3 * cb + omega2 * k * sb, omega3 * sb - omega2 * k * cb])


def cylinder_integrals_tilde(j, beta, omega2, omega3) -> Float[Array, "2"]:
    """The equivalent pair (P~_I, P~_II) of eq. (70), with arctan2 as in eq. (71).

    P~_I = j w2^2 + (1+j) w3^2, P~_II = beta - sqrt((1+j)/j) arctan2(sqrt(j/(1+j)) w2, w3);
    P~_II is conserved modulo 2 pi sqrt((1+j)/j) (the branch of arctan2).
    """
    k = jnp.sqrt(j / (1.0 + j))
    y, x = k * omega2, omega3
    at2 = 2.0 * jnp.arctan(y / (jnp.sqrt(x**2 + y**2) + x))  # eq. (71)
    return jnp.stack([j * omega2**2 + (1.0 + j) * omega3**2, beta - at2 / k])


def sphere_integrals(j, beta, omega2, omega3) -> Float[Array, "2"]:
    """(P_I, P_II) of the limit R -> 0 (rim -> sphere), eq. (72).

    P_I = w2, P_II = (1+j) w3 cos(beta) + j w2 sin(beta), i.e. eq. (68) with c_I = (1, 0),
    c_II = (0, 1 + j).
    """
    return jnp.stack(
        [omega2 + 0.0 * beta, (1.0 + j) * omega3 * jnp.cos(beta) + j * omega2 * jnp.sin(beta)]
    )


class LimitRim(eqx.Module):
    """Rolling equations (33)-(36) in the limits of Props. 11-12: ``limit`` = "cylinder" (R -> infinity) or "sphere" (R = 0).

    Fields as in :class:`~rollax.models.rim.Rim`: ball radius ``r``, tube radius ``a``, ``j``, ``g``.
    For the cylinder, terms of order 1/R vanish and R/(R - rho cos b) -> 1; for the sphere,
    R - rho cos(beta) -> -rho cos(beta), singular at cos(beta) = 0.
    """

    limit: str = eqx.field(static=True)
    r: float = 0.12
    a: float = 0.01
    j: float = 2.0 / 3.0
    g: float = 9.81
    m: float = 0.6

    def __check_init__(self):
        if self.limit not in ("cylinder", "sphere"):
            raise ValueError(f"limit = {self.limit!r} must be 'cylinder' or 'sphere'")
        check_positive("r", self.r)
        check_nonnegative("a", self.a)
        check_range("j", self.j, 0.0, 1.0, lo_open=True)
        check_positive("g", self.g)
        check_positive("m", self.m)

    @property
    def rho(self):
        return self.r + self.a

    def vector_field(self, x: Float[Array, "4"]) -> Float[Array, "4"]:
        """dx/dt of (33)-(36) in the limit, for x = (beta, w1, w2, w3)."""
        beta, w1, w2, w3 = x[0], x[1], x[2], x[3]
        r, j, g, rho = self.r, self.j, self.g, self.rho
        s, c = jnp.sin(beta), jnp.cos(beta)
        grav = -g * c / (r * (1 + j))
        if self.limit == "cylinder":
            dw1 = grav
            dw2 = r * w1 * w3 / rho
            dw3 = -j * r * w1 * w2 / (rho * (1 + j))
        else:
            D = -rho * c
            dw1 = ((1 + j) * r * w3**2 * s - j * r * w2 * w3 * c) / ((1 + j) * D) + grav
            dw2 = 0.0 * w1
            dw3 = -r * w1 * w3 * s / D - j * r * w1 * w2 / (rho * (1 + j))
        return jnp.stack([r / rho * w1, dw1, dw2, dw3])

    def energy(self, x: Float[Array, "4"]) -> Scalar:
        """Energy (60) with potential m g rho sin(beta), as for the torus."""
        return rolling_energy(x, self.m, self.r, self.j, self.g, self.rho)

    def integrals(self, x: Float[Array, "4"]) -> Float[Array, "2"]:
        """The closed-form (P_I, P_II) of this limit, eq. (69) or (72), at x."""
        fn = cylinder_integrals if self.limit == "cylinder" else sphere_integrals
        return fn(self.j, x[0], x[2], x[3])


# ---------------------------------------------------------------------------- trajectories
def rolling_trajectory(
    model, x0: Float[Array, "4"], t1: float, n_save: int = 201, rtol=1e-12, atol=1e-12
) -> tuple[Float[Array, " n"], Float[Array, "n 4"]]:
    """Integrate ``model.vector_field`` (a Rim or LimitRim) from x0 over [0, t1] (rollax.solve).

    Returns the save times and the states (``n_save`` points, Dopri8, tight tolerances) used to
    check that energy and P_I, P_II stay constant.
    """
    check_positive("t1", t1)
    if n_save < 2:
        raise ValueError(f"n_save = {n_save!r} must be >= 2")
    return _trajectory(
        model, jnp.asarray(x0, dtype=float), jnp.asarray(t1, dtype=float), n_save, rtol, atol
    )


@eqx.filter_jit
def _trajectory(model, x0, t1, n_save, rtol, atol):
    ts = jnp.linspace(0.0, t1, n_save)
    sol = run(
        lambda t, y, _: model.vector_field(y),
        x0,
        0.0,
        t1,
        ts=ts,
        rtol=rtol,
        atol=atol,
        max_steps=200_000,
    )
    assert sol.ys is not None  # (saved at ts)
    return ts, jnp.asarray(sol.ys)  # (rollax.solve's: a JAX array)
