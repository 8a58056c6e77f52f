"""Rails: the 1-d curves ``zeta_i(theta_i)`` along which the internal point masses move.

Putkaradze & Rogers, *On the normal force and static friction acting on a rolling ball
actuated by internal point masses* (Sect. 3): each mass moves on a rail fixed in the body
frame translated to the geometric centre (GC); the dynamics need ``zeta``, ``zeta'`` and
``zeta''`` (3.1). Every rail here returns all three from ``rail(theta)``.

The circle of the ball example, eqs. (6.8)-(6.10), is built by :func:`circle_from_spherical`
with the basis of Duff et al. (2017) and the reading of ``rollax``'s NOTES (section "Ball and
disk actuated by internal masses"): ``zeta(theta) = r_i (cos(theta) n - sin(theta) b1)``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
import numpy as np
from jaxtyping import Array, Float

from rollax._core._system import check_parameters, parameter
from rollax._core._validate import check_positive


def _arr(x):
    return jnp.asarray(x, dtype=float)


def _concrete(*xs) -> bool:
    return not any(isinstance(x, Tracer) for x in xs)


class Rail(eqx.Module):
    """A rail ``theta -> zeta(theta)`` in the body frame translated to the GC (Sect. 3).

    Subclasses implement :meth:`zeta` and, where cheap, the analytic derivatives; the default
    derivatives use forward-mode autodiff. ``domain`` is the parameter interval that the rail
    occupies (used to check that it stays inside the ball).
    """

    def __check_init__(self):
        check_parameters(self)

    @abc.abstractmethod
    def zeta(self, theta: Float[Array, ""]) -> Float[Array, "3"]:
        """Position ``zeta(theta)`` of the mass on the rail (3.1)."""

    def __call__(self, theta) -> tuple[Float[Array, "3"], Float[Array, "3"], Float[Array, "3"]]:
        """``(zeta, zeta', zeta'')`` at ``theta`` (3.1)."""
        d1 = jax.jacfwd(self.zeta)
        return self.zeta(theta), d1(theta), jax.jacfwd(d1)(theta)

    @property
    def domain(self) -> tuple[float, float]:
        return (0.0, 2.0 * np.pi)

    def max_norm(self, num: int = 2049) -> float:
        """Largest ``|zeta(theta)|`` over :attr:`domain` (sampled), for the inside-ball check."""
        ths = jnp.linspace(*self.domain, num)
        return float(jnp.max(jnp.linalg.norm(jax.vmap(self.zeta)(ths), axis=-1)))


def _check_orthonormal(u, v) -> None:
    if not _concrete(u, v):
        return
    u, v = np.asarray(u), np.asarray(v)
    if u.shape != (3,) or v.shape != (3,):
        raise ValueError(f"rail axes u, v must be 3-vectors, got shapes {u.shape}, {v.shape}")
    if abs(u @ u - 1) > 1e-9 or abs(v @ v - 1) > 1e-9 or abs(u @ v) > 1e-9:
        raise ValueError(f"rail axes u = {u.tolist()}, v = {v.tolist()} must be orthonormal")


class CircleRail(Rail):
    """Circle ``zeta = c + R (cos(theta) u + sin(theta) v)`` with orthonormal ``u, v``.

    The disk's rails (5.4) are ``CircleRail(r_i, u=E1, v=E3)``; the ball's (6.8) come from
    :func:`circle_from_spherical`.
    """

    radius: float = parameter()
    u: Float[Array, "3"] = parameter(shape=(3,))
    v: Float[Array, "3"] = parameter(shape=(3,))
    center: Float[Array, "3"] = parameter(shape=(3,))

    def __init__(self, radius, u=(1.0, 0.0, 0.0), v=(0.0, 0.0, 1.0), center=(0.0, 0.0, 0.0)):
        self.radius, self.u, self.v, self.center = radius, u, v, center

    def __check_init__(self):
        check_positive("rail radius", self.radius)
        _check_orthonormal(self.u, self.v)

    def zeta(self, theta):
        return self.center + self.radius * (jnp.cos(theta) * self.u + jnp.sin(theta) * self.v)

    def __call__(self, theta):
        c, s = jnp.cos(theta), jnp.sin(theta)
        R = self.radius
        return (
            self.center + R * (c * self.u + s * self.v),
            R * (-s * self.u + c * self.v),
            -R * (c * self.u + s * self.v),
        )

    def max_norm(self, num: int = 0) -> float:
        # exact: |c + R w| over unit w in span(u, v)
        c = np.asarray(self.center)
        cp = np.hypot(c @ np.asarray(self.u), c @ np.asarray(self.v))
        return float(np.sqrt(c @ c + float(self.radius) ** 2 + 2 * float(self.radius) * cp))


class EllipseRail(Rail):
    """Ellipse ``zeta = c + a cos(theta) u + b sin(theta) v`` with orthonormal ``u, v``."""

    a: float = parameter()
    b: float = parameter()
    u: Float[Array, "3"] = parameter(shape=(3,))
    v: Float[Array, "3"] = parameter(shape=(3,))
    center: Float[Array, "3"] = parameter(shape=(3,))

    def __init__(self, a, b, u=(1.0, 0.0, 0.0), v=(0.0, 0.0, 1.0), center=(0.0, 0.0, 0.0)):
        self.a, self.b, self.u, self.v, self.center = a, b, u, v, center

    def __check_init__(self):
        check_positive("ellipse semi-axis a", self.a)
        check_positive("ellipse semi-axis b", self.b)
        _check_orthonormal(self.u, self.v)

    def zeta(self, theta):
        return self.center + self.a * jnp.cos(theta) * self.u + self.b * jnp.sin(theta) * self.v

    def __call__(self, theta):
        c, s = jnp.cos(theta), jnp.sin(theta)
        au, bv = self.a * self.u, self.b * self.v
        return self.center + c * au + s * bv, -s * au + c * bv, -(c * au + s * bv)


class SegmentRail(Rail):
    """Straight segment ``zeta = p0 + theta (p1 - p0)``, occupying ``theta`` in [0, 1].

    Outside [0, 1] the formula extends the line; keeping ``theta`` inside [0, 1] is up to
    the control.
    """

    p0: Float[Array, "3"] = parameter(shape=(3,))
    p1: Float[Array, "3"] = parameter(shape=(3,))

    def __check_init__(self):
        if _concrete(self.p0, self.p1) and float(jnp.linalg.norm(self.p1 - self.p0)) == 0.0:
            raise ValueError("segment rail end points p0 and p1 coincide")

    def zeta(self, theta):
        return self.p0 + theta * (self.p1 - self.p0)

    def __call__(self, theta):
        return self.zeta(theta), self.p1 - self.p0, jnp.zeros(3)

    @property
    def domain(self):
        return (0.0, 1.0)

    def max_norm(self, num: int = 0) -> float:
        return float(max(jnp.linalg.norm(self.p0), jnp.linalg.norm(self.p1)))  # convexity


class FigureEightRail(Rail):
    """Figure-eight (lemniscate of Gerono) ``zeta = c + a (sin(theta) u + sin(theta) cos(theta) v)``."""

    a: float = parameter()
    u: Float[Array, "3"] = parameter(shape=(3,))
    v: Float[Array, "3"] = parameter(shape=(3,))
    center: Float[Array, "3"] = parameter(shape=(3,))

    def __init__(self, a, u=(1.0, 0.0, 0.0), v=(0.0, 0.0, 1.0), center=(0.0, 0.0, 0.0)):
        self.a, self.u, self.v, self.center = a, u, v, center

    def __check_init__(self):
        check_positive("figure-eight size a", self.a)
        _check_orthonormal(self.u, self.v)

    def zeta(self, theta):
        s, c = jnp.sin(theta), jnp.cos(theta)
        return self.center + self.a * (s * self.u + s * c * self.v)

    def __call__(self, theta):
        s, c = jnp.sin(theta), jnp.cos(theta)
        s2, c2 = jnp.sin(2 * theta), jnp.cos(2 * theta)
        a = self.a
        return (
            self.center + a * (s * self.u + 0.5 * s2 * self.v),
            a * (c * self.u + c2 * self.v),
            a * (-s * self.u - 2 * s2 * self.v),
        )


class CurveRail(Rail):
    """A user-supplied curve ``fn(theta) -> zeta`` (a JAX-traceable function of one scalar).

    ``zeta'`` and ``zeta''`` come from forward-mode autodiff; ``domain`` is the parameter
    interval the rail occupies (checked to lie inside the ball).
    """

    fn: Callable = eqx.field(static=True)
    lo: float = eqx.field(static=True, default=0.0)
    hi: float = eqx.field(static=True, default=2.0 * np.pi)

    def __check_init__(self):
        if not callable(self.fn):
            raise ValueError("CurveRail fn must be callable theta -> zeta (3,)")
        if not self.hi > self.lo:
            raise ValueError(f"CurveRail domain [{self.lo}, {self.hi}] is empty")
        shape = jnp.shape(self.fn(jnp.asarray(self.lo)))
        if shape != (3,):
            raise ValueError(f"CurveRail fn must return a 3-vector, got shape {shape}")

    def zeta(self, theta):
        return jnp.asarray(self.fn(theta), dtype=float)

    @property
    def domain(self):
        return (self.lo, self.hi)


class FixedPoint(Rail):
    """A mass that does not move, ``zeta = p`` (used for the body's own centre of mass zeta_0)."""

    p: Float[Array, "3"] = parameter(shape=(3,))

    def zeta(self, theta):
        return self.p

    def __call__(self, theta):
        return self.p, jnp.zeros(3), jnp.zeros(3)

    def max_norm(self, num: int = 0) -> float:
        return float(jnp.linalg.norm(self.p))


def spherical_to_cartesian(v: Float[Array, "3"]) -> Float[Array, "3"]:
    """varsigma([phi, theta, rho]) = rho [cos(theta)cos(phi), cos(theta)sin(phi), sin(theta)] (6.9)."""
    phi, th, rho = v[0], v[1], v[2]
    return rho * jnp.array([jnp.cos(th) * jnp.cos(phi), jnp.cos(th) * jnp.sin(phi), jnp.sin(th)])


def duff_basis(n: Float[Array, "3"]) -> tuple[Float[Array, "3"], Float[Array, "3"]]:
    """Orthonormal ``(b1, b2)`` completing the unit vector ``n`` to a right-handed basis
    ``(b1, b2, n)``, by the branchless construction of Duff et al. (2017) (used in (6.8))."""
    s = jnp.where(n[2] >= 0, 1.0, -1.0)  # copysign(1, n_z), with +0 -> +1
    a = -1.0 / (s + n[2])
    b = n[0] * n[1] * a
    b1 = jnp.array([1.0 + s * n[0] ** 2 * a, s * b, -s * n[0]])
    b2 = jnp.array([b, s + n[1] ** 2 * a, -n[1]])
    return b1, b2


def circle_from_spherical(radius, v) -> CircleRail:
    """The ball example's rail (6.8): ``zeta(theta) = r_i (cos(theta) n - sin(theta) b1)`` with
    ``n = varsigma(v)`` (6.9)-(6.10) and ``b1`` from :func:`duff_basis` (the reading of docs/physics-notes.md)."""
    if _concrete(v):  # the same formulas in NumPy: no JAX operation to compile (~0.5 s each)
        phi, th, rho = np.asarray(v, dtype=float)
        n = rho * np.array([np.cos(th) * np.cos(phi), np.cos(th) * np.sin(phi), np.sin(th)])
        n = n / np.linalg.norm(n)
        s = 1.0 if n[2] >= 0 else -1.0
        a = -1.0 / (s + n[2])
        b1 = np.array([1.0 + s * n[0] ** 2 * a, s * n[0] * n[1] * a, -s * n[0]])
        return CircleRail(radius, u=n, v=-b1)
    n = spherical_to_cartesian(jnp.asarray(v, dtype=float))
    n = n / jnp.linalg.norm(n)
    b1, _ = duff_basis(n)
    return CircleRail(radius, u=n, v=-b1)
