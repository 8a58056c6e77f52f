"""Friction law of a circular contact with an arbitrary pressure p(x, y), by quadrature of (19)-(23).

The integrand of (21)-(23) is discontinuous at the instantaneous centre of rotation (ICR)
c = (-u_y, u_x)/omega_z, where the sliding velocity (20) vanishes; |c| = eps R. Two polar
quadratures keep the integrand smooth:

* ICR inside the patch (eps < 1): polar coordinates centred on the ICR. There the velocity
  direction is sgn(omega) (-sin phi, cos phi), independent of the radius, so the integrand is
  smooth; the radius runs from 0 to the patch edge rho_max(phi).
* ICR outside (eps >= 1, including pure slip): polar coordinates centred on the patch.

In both, the radius is substituted as r = r_max (1 - s^2), s in [0, 1] (Gauss-Legendre), which
makes pressures with a square-root edge (Hertz (61)) smooth in s; the angle uses the
trapezoidal rule (spectral for periodic integrands). Accuracy (measured, tests): with the
default 48 x 256 nodes the error against the exact laws is < 1e-14 for eps <= 0.95 and
eps >= 1.15 (uniform and Hertz pressure), 1e-10 at eps = 0.99 (Hertz) and 1.05, and ~1e-6 at
eps = 1.01, where the ICR sits just outside the edge and the centre-polar integrand is nearly
singular; 64 x 512 nodes bring eps = 1.01 to ~1e-7. Increase ``n_phi`` there.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax._validate import check_positive

_EPS_SWITCH = 4.0  # lines through the ICR for eps <= 4, centre-polar above
_GRADE_MIN = 1e-6  # smallest grading scale of the line angle (below it the feature is < 1e-12)
_GRADE_MAX = 4.0  # largest: the grading is then nearly uniform


class UniformPressure(eqx.Module):
    """Uniform pressure p = P/(pi R^2) on the disc of radius R, (56)."""

    P: float = 1.0
    R: float = 1.0

    def __call__(self, x, y):
        inside = x * x + y * y <= self.R**2
        return jnp.where(inside, self.P / (jnp.pi * self.R**2), 0.0)


class HertzPressure(eqx.Module):
    """Hertz pressure p = 3P/(2 pi R^2) sqrt(1 - (x^2 + y^2)/R^2), (61)."""

    P: float = 1.0
    R: float = 1.0

    def __call__(self, x, y):
        a = 1.0 - (x * x + y * y) / self.R**2
        return 1.5 * self.P / (jnp.pi * self.R**2) * jnp.sqrt(jnp.clip(a, 0.0))


def pressure_for(name: str, P: float = 1.0, R: float = 1.0):
    """The named axisymmetric pressure: 'uniform' (56) or 'hertz' (61)."""
    if name == "uniform":
        return UniformPressure(P, R)
    if name == "hertz":
        return HertzPressure(P, R)
    raise ValueError(f"pressure = {name!r} must be 'uniform' or 'hertz'")


class QuadratureLaw(eqx.Module):
    """Law (23) of a disc contact of radius R under any pressure ``p(x, y)``, by quadrature.

    ``force(x_o)`` returns (Q_x, Q_y, T_z/rho) including mu; NaN at x_o = 0 (undefined there).
    """

    p: Callable
    mu: float = 1.0
    R: float = 1.0
    rho: float = 1.0
    n_r: int = eqx.field(static=True, default=48)
    n_phi: int = eqx.field(static=True, default=256)

    def __check_init__(self):
        check_positive("mu", self.mu)
        check_positive("R", self.R)
        check_positive("rho", self.rho)
        if int(self.n_r) < 2 or int(self.n_phi) < 4:
            raise ValueError(f"n_r = {self.n_r}, n_phi = {self.n_phi} must be >= 2 and >= 4")

    def _nodes(self):
        s, ws = np.polynomial.legendre.leggauss(int(self.n_r))
        s = 0.5 * (s + 1.0)
        ws = 0.5 * ws
        phi = 2.0 * np.pi * np.arange(int(self.n_phi)) / int(self.n_phi)
        return jnp.asarray(s), jnp.asarray(ws), jnp.asarray(phi), 2.0 * np.pi / int(self.n_phi)

    def _disc_integrals(self, f):
        """int over the patch of f(x, y) dA (centre-polar, r = R (1 - s^2))."""
        s, ws, phi, dphi = self._nodes()
        r = self.R * (1.0 - s * s)
        jac = r * 2.0 * self.R * s * ws  # r dr
        x = r[:, None] * jnp.cos(phi)[None, :]
        y = r[:, None] * jnp.sin(phi)[None, :]
        return _sum(f(x, y), jac, dphi)

    def total_load(self) -> Float[Array, ""]:
        """P = int p dA, (19)."""
        return self._disc_integrals(lambda x, y: self.p(x, y)[..., None])[0]

    def kappa(self) -> Float[Array, ""]:
        """kappa = (1/P) int p |x| dA, (39) (the first moment of the pressure)."""
        val = self._disc_integrals(lambda x, y: jnp.stack([self.p(x, y), self.p(x, y) * jnp.hypot(x, y)], -1))
        return val[1] / val[0]

    def force(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """(Q_x, Q_y, T_z/rho) of (23) with (20)-(22), (29)-(30); NaN at x_o = 0.

        Lines through the instantaneous centre of rotation for eps <= 4 (any eps, 1 included),
        centre-polar coordinates for eps > 4 (pure slip included); see the module docstring.
        """
        x_o = jnp.asarray(x_o, dtype=jnp.float64)
        ux, uy, x3 = x_o[0], x_o[1], x_o[2]
        om = x3 / self.rho
        use_lines = jnp.hypot(ux, uy) <= _EPS_SWITCH * self.R * jnp.abs(om)
        # each branch gets harmless inputs where it is not used, so neither poisons gradients
        xl = jnp.where(use_lines, x_o, jnp.array([0.0, 0.5 * self.R, self.rho]))
        xc = jnp.where(use_lines, jnp.array([1.0, 0.0, 0.0]), x_o)
        q = jnp.where(use_lines, self._lines_through_icr(xl), self._centre_polar(xc))
        out = -self.mu * q * jnp.array([1.0, 1.0, 1.0 / self.rho])
        return jnp.where(jnp.all(x_o == 0.0), jnp.nan, out)

    def _lines_through_icr(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """(int p v/|v| dA, int p x cross v/|v| dA) over the lines through the ICR c (eps <= 4).

        A line through c with direction e(psi) (psi from c/|c|) meets the disc in the chord
        r in [-a cos psi - h, -a cos psi + h], a = |c|, h^2 = R^2 - a^2 sin^2 psi. With the signed
        distance r from c the polar Jacobian |r| and the direction sgn(omega) sgn(r) J e combine
        into sgn(omega) r J e, smooth across c. The chord is mapped by r = -a cos psi - h cos(beta),
        which turns square-root edge pressures into smooth ones. psi = +-(pi/2 - m - chi), where
        m = arccos(R/a) outside (0 inside), and chi >= 0, the angle from the tangent (outside) or
        from the line perpendicular to c (inside), is graded where h varies on a small scale:
        chi = nu sinh(tau), nu = asinh(sqrt(R^2 - a^2)/a), inside; chi = m (cosh(tau) - 1)
        outside, which also removes the square root of h at the tangent.
        """
        R = self.R
        ux, uy, om = x_o[0], x_o[1], x_o[2] / self.rho
        om_s = jnp.where(om == 0.0, 1.0, om)  # om = 0 is routed to the centre-polar branch
        cx, cy = -uy / om_s, ux / om_s
        a2 = cx * cx + cy * cy
        pos = a2 > 0.0
        a = jnp.sqrt(jnp.where(pos, a2, 1.0))
        # direction of c; at c = 0 any frame does (the nodes below depend smoothly on c itself)
        chx = jnp.where(pos, cx / a, 1.0)
        chy = jnp.where(pos, cy / a, 0.0)
        a = jnp.where(pos, a, 0.0)
        inside = a < R
        d2 = (R - a) * (R + a)
        dl = jnp.sqrt(jnp.where(d2 > 0.0, d2, 1.0))
        gm = jnp.sqrt(jnp.where(d2 < 0.0, -d2, 1.0))
        m = jnp.where(d2 < 0.0, jnp.arctan2(gm, R), 0.0)
        nu = jnp.arcsinh(dl / jnp.where(pos, a, 1.0))
        nu = jnp.clip(jnp.where(pos & (d2 > 0.0), nu, _GRADE_MAX), _GRADE_MIN, _GRADE_MAX)
        mc = jnp.maximum(m, _GRADE_MIN)
        chi_max = 0.5 * jnp.pi - m
        t, wt, b, wb = self._line_nodes()
        t_max = jnp.where(inside, jnp.arcsinh(chi_max / nu), jnp.arccosh(1.0 + chi_max / mc))
        tau = t_max * t
        chi = jnp.where(inside, nu * jnp.sinh(tau), mc * (jnp.cosh(tau) - 1.0))
        dchi = jnp.where(inside, nu * jnp.cosh(tau), mc * jnp.sinh(tau)) * t_max * wt
        # h^2 = R^2 - a^2 cos^2(m + chi), written without cancellation at the tangent
        h2 = (R - a * jnp.cos(m)) * (R + a * jnp.cos(m)) + a2 * jnp.sin(chi) * jnp.sin(2.0 * m + chi)
        h = jnp.sqrt(jnp.maximum(h2, 0.0))
        cpsi = jnp.sin(m + chi)
        sg = jnp.sign(om_s)
        cb, sbw = jnp.cos(b), jnp.sin(b) * wb
        total = jnp.zeros(3)
        for side in (1.0, -1.0):
            spsi = side * jnp.cos(m + chi)
            ex = cpsi * chx - spsi * chy  # e = cos psi c_hat + sin psi J c_hat
            ey = cpsi * chy + spsi * chx
            # c - (c.e) e, the foot of the perpendicular from the centre, smooth in c
            fx = spsi * spsi * cx + cpsi * spsi * cy
            fy = spsi * spsi * cy - cpsi * spsi * cx
            hcb = h[:, None] * cb[None, :]
            x = fx[:, None] - hcb * ex[:, None]
            y = fy[:, None] - hcb * ey[:, None]
            r = -(a * cpsi)[:, None] - hcb
            pw = self.p(x, y) * r * (dchi * h)[:, None] * sbw[None, :]
            total = total + jnp.stack(
                [-jnp.sum(pw * ey[:, None]), jnp.sum(pw * ex[:, None]), -jnp.sum(pw * hcb)]
            )
        return sg * total

    def _line_nodes(self):
        n_t = int(self.n_phi) // 2
        t, wt = np.polynomial.legendre.leggauss(n_t)
        b, wb = np.polynomial.legendre.leggauss(int(self.n_r))
        return (
            jnp.asarray(0.5 * (t + 1.0)),
            jnp.asarray(0.5 * wt),
            jnp.asarray(0.5 * np.pi * (b + 1.0)),
            jnp.asarray(0.5 * np.pi * wb),
        )

    def _centre_polar(self, x_o: Float[Array, "3"]) -> Float[Array, "3"]:
        """(int p v/|v| dA, int p x cross v/|v| dA) in centre-polar coordinates (eps > 4)."""
        s, ws, phi, dphi = self._nodes()
        ex, ey = jnp.cos(phi), jnp.sin(phi)
        r = self.R * (1.0 - s * s)
        jr = r * 2.0 * self.R * s * ws
        X = r[:, None] * ex[None, :]
        Y = r[:, None] * ey[None, :]
        omo = x_o[2] / self.rho
        vX = x_o[0] - omo * Y
        vY = x_o[1] + omo * X
        pw = self.p(X, Y) * jr[:, None] / jnp.hypot(vX, vY)
        return jnp.stack([jnp.sum(pw * vX), jnp.sum(pw * vY), jnp.sum(pw * (X * vY - Y * vX))]) * dphi

    def __call__(self, x_o):
        return self.force(x_o)


def _sum(vals, jac, dphi):
    return jnp.sum(vals * jac[:, None, None], axis=(0, 1)) * dphi
