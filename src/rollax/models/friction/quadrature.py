"""Friction law of a circular contact with an arbitrary pressure p(x, y), by quadrature of (19)-(23).

The integrand of (21)-(23) is discontinuous at the instantaneous centre of rotation (ICR)
c = (-u_y, u_x)/omega_z, where the sliding velocity (20) vanishes; |c| = eps R. Near eps = 1
the ICR lies on or near the edge of the patch, which is where plain polar or tensor rules
converge slowly. Two quadratures:

* eps <= 4 (the ICR inside, on or near the patch): integration over the straight lines through
  the ICR. On the line of direction e the velocity direction is sgn(omega) sgn(r) J e (r the
  signed distance from c), so with the polar Jacobian |r| the integrand becomes
  sgn(omega) r p J e, smooth along the whole chord and through c itself. Each chord is mapped
  by r = mid - h cos(beta) (Gauss-Legendre in beta), which makes a square-root edge pressure
  (Hertz (61)) smooth. The line angle chi, measured from the tangent line (ICR outside) or from
  the line perpendicular to c (inside), is graded where the chord half-length
  h = sqrt(R^2 - (c x e)^2) varies on the small scale set by |eps - 1|:
  chi = nu sinh(tau), nu = asinh(sqrt(R^2 - |c|^2)/|c|) inside, and
  chi = m (cosh(tau) - 1), m = arccos(R/|c|) outside (this also absorbs the square root of h
  at the tangent); Gauss-Legendre in tau. The scales are clipped to [1e-6, 4]: within about
  1e-12 of eps = 1 the feature they resolve carries a weight below 1e-12.
* eps > 4 (pure slip included): polar coordinates centred on the patch, r = R (1 - s^2)
  (Gauss-Legendre in s, which smooths a square-root edge) and the trapezoidal rule in the angle;
  the ICR is then at least 3R from the edge and the integrand is analytic on the patch.

Accuracy (measured against the exact laws (57)-(60) and (61)-(63), tests and module
development): with the default ``n_r = 48`` chord / radial nodes and ``n_phi = 256`` angular
nodes (128 line angles on each side of c) the error of (Q_x, Q_y, T_z/rho) is below 2e-13 mu P
for uniform and Hertz pressure at every eps in [0, inf] that was tried, including eps = 1 and
1 +- 10^-k for k = 1..15; ``n_r = 24, n_phi = 96`` still gives 1e-13 and ``n_r = 16,
n_phi = 64`` 1e-10. A smooth non-axisymmetric pressure (with or without a square-root edge)
agrees with an adaptive (scipy) integration to 2e-11. The pressure is only evaluated inside the
patch. Gradients (jax.jacfwd / jacrev; the line frame and grading are held fixed, which is exact
since the chords vanish at the ends of the angle range) agree with central differences of the
values to 1e-9 everywhere, eps = 1 included, and with the exact laws' gradients (whose
custom derivative rules are accurate to ~1e-14 up to eps = 1) to about 1e-9.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax._core._system import parameter
from rollax._core._validate import check_positive

_EPS_SWITCH = 4.0  # lines through the ICR for eps <= 4, centre-polar above
_GRADE_MIN = 1e-6  # smallest grading scale of the line angle (below it the feature is < 1e-12)
_GRADE_MAX = 4.0  # largest: the grading is then nearly uniform


class UniformPressure(eqx.Module):
    """Uniform pressure p = P/(pi R^2) on the disc of radius R, (56)."""

    P: float = parameter(1.0, convert=False)
    R: float = parameter(1.0, convert=False)

    def __check_init__(self):
        check_positive("P", self.P)
        check_positive("R", self.R)

    def __call__(self, x, y):
        inside = x * x + y * y <= self.R**2
        return jnp.where(inside, self.P / (jnp.pi * self.R**2), 0.0)


class HertzPressure(eqx.Module):
    """Hertz pressure p = 3P/(2 pi R^2) sqrt(1 - (x^2 + y^2)/R^2), (61)."""

    P: float = parameter(1.0, convert=False)
    R: float = parameter(1.0, convert=False)

    def __check_init__(self):
        check_positive("P", self.P)
        check_positive("R", self.R)

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
    mu: float = parameter(1.0, convert=False)
    R: float = parameter(1.0, convert=False)
    rho: float = parameter(1.0, convert=False)
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
        val = self._disc_integrals(
            lambda x, y: jnp.stack([self.p(x, y), self.p(x, y) * jnp.hypot(x, y)], -1)
        )
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
        sg_ = jax.lax.stop_gradient
        ux, uy, om = x_o[0], x_o[1], x_o[2] / self.rho
        om_s = jnp.where(om == 0.0, 1.0, om)  # om = 0 is routed to the centre-polar branch
        cx, cy = -uy / om_s, ux / om_s
        a2 = cx * cx + cy * cy
        pos = a2 > 0.0
        a = jnp.sqrt(jnp.where(pos, a2, 1.0))
        # The frame (c_hat) and the grading only choose the lines and nodes: the integral does
        # not depend on them (the chords vanish at the ends of the psi range), so they are held
        # fixed under differentiation, which then differentiates the integrand at fixed lines.
        chx = sg_(jnp.where(pos, cx / a, 1.0))  # at c = 0 any frame does
        chy = sg_(jnp.where(pos, cy / a, 0.0))
        a = jnp.where(pos, a, 0.0)
        inside = a < R
        d2 = (R - a) * (R + a)
        dl = jnp.sqrt(jnp.where(d2 > 0.0, d2, 1.0))
        gm = jnp.sqrt(jnp.where(d2 < 0.0, -d2, 1.0))
        m = sg_(jnp.where(d2 < 0.0, jnp.arctan2(gm, R), 0.0))  # arccos(R/a) outside
        nu = jnp.arcsinh(dl / jnp.where(pos, a, 1.0))
        nu = sg_(jnp.clip(jnp.where(pos & (d2 > 0.0), nu, _GRADE_MAX), _GRADE_MIN, _GRADE_MAX))
        mc = jnp.maximum(m, _GRADE_MIN)
        chi_max = 0.5 * jnp.pi - m
        t, wt, b, wb = self._line_nodes()
        t_max = jnp.where(inside, jnp.arcsinh(chi_max / nu), jnp.arccosh(1.0 + chi_max / mc))
        tau = t_max * t
        chi = jnp.where(inside, nu * jnp.sinh(tau), mc * (jnp.cosh(tau) - 1.0))
        dchi = jnp.where(inside, nu * jnp.cosh(tau), mc * jnp.sinh(tau)) * t_max * wt
        # h^2 = R^2 - q^2, q = c x e the distance of the line from the centre. Its value is
        # taken from (R^2 - a^2 cos^2 m) + a^2 sin(chi) sin(2m + chi), free of cancellation at
        # the tangent; its derivative from R^2 - (c x e)^2 at the held lines.
        h2v = sg_((R * R - a2 * jnp.cos(m) ** 2) + a2 * jnp.sin(chi) * jnp.sin(2.0 * m + chi))
        cpsi = jnp.sin(m + chi)
        cb, sbw = jnp.cos(b), jnp.sin(b) * wb
        total = jnp.zeros(3)
        for side in (1.0, -1.0):
            spsi = side * jnp.cos(m + chi)
            ex = cpsi * chx - spsi * chy  # e = cos(psi) c_hat + sin(psi) J c_hat
            ey = cpsi * chy + spsi * chx
            ce = cx * ex + cy * ey  # c.e = a cos(psi), smooth in c
            q2 = (cx * ey - cy * ex) ** 2
            h2 = h2v + (sg_(q2) - q2)
            pos_h = h2 > 0.0
            h = jnp.where(pos_h, jnp.sqrt(jnp.where(pos_h, h2, 1.0)), 0.0)
            hcb = h[:, None] * cb[None, :]
            # x = c + r e with r = -c.e - h cos(beta): the foot c - (c.e) e minus h cos(beta) e
            x = (cx - ce * ex)[:, None] - hcb * ex[:, None]
            y = (cy - ce * ey)[:, None] - hcb * ey[:, None]
            r = -ce[:, None] - hcb
            pw = self._p_inside(x, y) * r * (dchi * h)[:, None] * sbw[None, :]
            # force sgn(om) r p J e; torque sgn(om) r (c.e + r) p = -sgn(om) r h cos(beta) p
            total = total + jnp.stack(
                [-jnp.sum(pw * ey[:, None]), jnp.sum(pw * ex[:, None]), -jnp.sum(pw * hcb)]
            )
        return jnp.sign(om_s) * total

    def _p_inside(self, x, y):
        """p at (x, y) pulled inside the patch by at most 1e-12 R.

        Nodes on chords of length < ~1e-6 R can round onto or past the edge, where an edge
        pressure (Hertz) has an infinite slope; their weights are < 1e-12, so the shift is
        invisible in the values and keeps the gradients finite.
        """
        r2 = x * x + y * y
        lim = (self.R * (1.0 - 1e-12)) ** 2
        scale = jnp.where(r2 > lim, jnp.sqrt(lim / jnp.where(r2 > lim, r2, 1.0)), 1.0)
        return self.p(x * scale, y * scale)

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
        return (
            jnp.stack([jnp.sum(pw * vX), jnp.sum(pw * vY), jnp.sum(pw * (X * vY - Y * vX))]) * dphi
        )

    def __call__(self, x_o):
        return self.force(x_o)


def _sum(vals, jac, dphi):
    return jnp.sum(vals * jac[:, None, None], axis=(0, 1)) * dphi
