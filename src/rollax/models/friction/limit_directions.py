"""Limit directions of the codimension-3 stick/slip discontinuity, Sect. 7.2-7.5.

For a slip dynamics x_o' = F(w) = B(w) w + c with w = x_o/|x_o| (101), the asymptotic dynamics
near stick (r -> 0) is r' = R*(w) = w.F(w) (121) and w' = V*(w)/r, V* = (I - w w^T) F (122).
A limit direction is a zero of V* on the unit sphere, equivalently a solution (w, r') of
(r' I - B(w)) w = c, |w| = 1 (125). It is radially attracting if R* < 0 (slip -> stick) and
repelling if R* > 0 (Definition 2); its type on the sphere (node / saddle / focus) comes from
the eigenvalues of the projected Jacobian (118)-(119) restricted to the tangent plane.

Test problems (13), (18) with an axisymmetric law (86), in units of mu g (time unit
1/(mu g) ... the directions do not depend on it):

    F(w) = (-a w1 C(w3) + f, -a w2 C(w3), -b w3 S(w3)),   f = F/(mu m g),

disc: a = 1, b = rho kappa/(j R_bar^2) (= 8/9 for j = 1/2, rho = kappa = 2R/3, R_bar = R) (126);
ball: a = (1 + j)/j (= 7/2 for j = 2/5), b = rho kappa/(j R_bar^2) = 45 pi^2/(512 lambda^2) for
rho = kappa = 3 pi R/16, R_bar = lambda R (139). All limit directions lie on w2 = 0: the trivial
ones (+-1, 0, 0) (128)-(129) and the roots of k(w3)^2 (1 - w3^2) = f^2 with
k = a C - b S (131)-(132), (141). Bifurcations: tangency F_T = a C(0) (130), pitchfork
F_P = |a C(0) - b S(0)| (133), and folds where d/dz [k^2 (1 - z)] = 0 inside (0, 1), z = w3^2
((138) for N = 2).
"""

from __future__ import annotations

import math
from typing import cast
import equinox as eqx
from rollax._core._system import parameter
import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq

# ------------------------------------------------------------------------- generic analysis


def radial(F, w):
    """R*(w) = w . F(w), (121)."""
    return jnp.dot(w, F(w))


def circumferential(F, w):
    """V*(w) = (I - w w^T) F(w), (122)."""
    f = F(w)
    return f - jnp.dot(w, f) * w


def tangent_basis(w: np.ndarray) -> np.ndarray:
    """Orthonormal 3x2 basis of the tangent plane of the unit sphere at w."""
    w = np.asarray(w, dtype=float)
    a = np.array([1.0, 0.0, 0.0]) if abs(w[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = a - a @ w * w
    e1 /= np.linalg.norm(e1)
    return np.stack([e1, np.cross(w, e1)], axis=1)


@eqx.filter_jit
def _radial_and_jacobian(F, w):
    J = jax.jacfwd(lambda v: circumferential(F, v))(w)
    return radial(F, w), J - J @ jnp.outer(w, w)


def sphere_eigenvalues(F, w) -> np.ndarray:
    """The two nontrivial eigenvalues of the modified Jacobian (119) at a limit direction w.

    (119) maps onto the sphere; its restriction to the tangent plane E^T (dV/dw) E holds the
    eigenvalues lambda_2, lambda_3 of (118) (lambda_1 = 0 is the normal direction).
    """
    w = jnp.asarray(w, dtype=jnp.float64)
    _, Jm = _radial_and_jacobian(F, w)
    E = tangent_basis(np.asarray(w))
    return np.linalg.eigvals(E.T @ np.asarray(Jm) @ E)


def classify(F, w, tol: float = 1e-9) -> dict:
    """R*, the sphere eigenvalues and the type of a limit direction (Definition 2, (118)-(120))."""
    rdot = float(_radial_and_jacobian(F, jnp.asarray(w, dtype=jnp.float64))[0])
    lam = sphere_eigenvalues(F, w)
    re, im = np.real(lam), np.imag(lam)
    if np.any(np.abs(im) > tol):
        kind = "focus"
    elif np.any(np.abs(re) <= tol):
        # a zero eigenvalue: a continuum (circle) of limit directions; stability is transversal
        kind = "degenerate"
        re = re[np.abs(re) > tol]
    elif re[0] * re[1] < 0:
        kind = "saddle"
    else:
        kind = "node"
    if kind == "saddle":
        stab = "saddle"
    elif re.size == 0:
        stab = "neutral"
    else:
        stab = "stable" if np.all(re < 0) else ("unstable" if np.all(re > 0) else "mixed")
    return {
        "w": [float(v) for v in w],
        "rdot": rdot,
        "radial": "attracting" if rdot < 0 else ("repelling" if rdot > 0 else "tangent"),
        "sphere": kind,
        "stability": stab,
        "eigenvalues": [[float(v.real), float(v.imag)] for v in lam],
    }


def _fibonacci(n: int) -> np.ndarray:
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    phi = math.pi * (1 + 5**0.5) * i
    rr = np.sqrt(1 - z * z)
    return np.stack([rr * np.cos(phi), rr * np.sin(phi), z], axis=1)


def find_limit_directions(
    F, n_starts: int = 400, tol: float = 1e-10, n_iter: int = 60
) -> np.ndarray:
    """All isolated limit directions of x_o' = F(w) by Newton's method on (125).

    Unknowns (w, r'), equations r' w - F(w) = 0 and |w|^2 = 1, from ``n_starts`` Fibonacci
    points on the sphere; converged solutions are de-duplicated. Returns an (n, 3) array.
    Continua of limit directions (the force-free disc) show up as many scattered points.
    """

    def G(z):
        w, rd = z[:3], z[3]
        return jnp.concatenate([rd * w - F(w), jnp.stack([w @ w - 1.0])])

    def newton(w0):
        z = jnp.concatenate([w0, jnp.stack([w0 @ F(w0)])])

        def body(_, z):
            J = jax.jacfwd(G)(z)
            dz = jnp.linalg.lstsq(J, -G(z))[0]
            step = jnp.minimum(1.0, 0.5 / (jnp.linalg.norm(dz) + 1e-300))
            return z + step * dz

        z = jax.lax.fori_loop(0, n_iter, body, z)
        return z, jnp.linalg.norm(G(z))

    Z, res = eqx.filter_jit(jax.vmap(newton))(jnp.asarray(_fibonacci(n_starts)))
    Z, res = np.asarray(Z), np.asarray(res)
    out: list[np.ndarray] = []
    for z, r in zip(Z, res):
        if r < tol:
            w = z[:3] / np.linalg.norm(z[:3])
            if all(np.linalg.norm(w - o) > 1e-6 for o in out):
                out.append(w)
    return np.array(out).reshape(-1, 3)


# ------------------------------------------------------------------- disc / ball on a plane
def _h(body, z):
    return body.k(jnp.sqrt(z)) ** 2 * (1 - z)


_dh_grid = eqx.filter_jit(lambda body, z: jax.vmap(jax.grad(_h, argnums=1), (None, 0))(body, z))
_dh = eqx.filter_jit(jax.grad(_h, argnums=1))
_k_grid = eqx.filter_jit(lambda body, z: jax.vmap(lambda v: body.k(jnp.sqrt(v)))(z))


class PlanarBody(eqx.Module):
    """The orthogonal slip dynamics (13)/(18) of a disc or ball, with an axisymmetric law.

    ``law`` supplies C(w3) and S(w3) (84)-(86) (any :class:`~rollax.friction.AxisymmetricLaw`).
    ``a``, ``b`` are the force and torque factors of (126)/(139), ``f`` = F/(mu m g).
    """

    law: object
    a: float = parameter(convert=False)
    b: float = parameter(convert=False)
    f: float = parameter(0.0, convert=False)
    name: str = eqx.field(static=True, default="body")

    @staticmethod
    def disc(law, f: float = 0.0, j: float = 0.5, R_bar: float | None = None) -> "PlanarBody":
        """Disc on a plane (13), (126): a = 1, b = rho kappa/(j R_bar^2) (R_bar = R by default)."""
        _check(f, j)
        Rb = float(law.R) if R_bar is None else float(R_bar)
        b = float(law.rho * law.kappa) / (j * Rb**2)
        return PlanarBody(law, jnp.float64(1.0), jnp.float64(b), jnp.float64(f), "disc")

    @staticmethod
    def ball(law, f: float = 0.0, lam: float = 5.0, j: float = 0.4) -> "PlanarBody":
        """Ball on a plane (18), (139): a = (1 + j)/j, b = rho kappa/(j (lambda R)^2)."""
        _check(f, j)
        if not lam > 0:
            raise ValueError(f"lam = {lam!r} must be > 0")
        Rb = lam * float(law.R)
        b = float(law.rho * law.kappa) / (j * Rb**2)
        return PlanarBody(law, jnp.float64((1 + j) / j), jnp.float64(b), jnp.float64(f), "ball")

    def F(self, w):
        """x_o' in units of mu g: (-a w1 C + f, -a w2 C, -b w3 S), (126)/(139)."""
        c = self.law.C_w(w[2])  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)
        s = self.law.S_w(w[2])  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)
        return jnp.stack([-self.a * w[0] * c + self.f, -self.a * w[1] * c, -self.b * w[2] * s])

    def k(self, w3):
        """k(w3) = a C(w3) - b S(w3) of (131) / (141); (137) for N = 2."""
        w3 = jnp.asarray(w3, dtype=jnp.float64)
        return self.a * self.law.C_w(w3) - self.b * self.law.S_w(w3)  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)

    # --- bifurcations ---------------------------------------------------------------------
    def F_T(self) -> float:
        """Tangency bifurcation force F_T/(mu m g) = a C(0), (130)."""
        return float(self.a * self.law.C_w(0.0))  # pyright: ignore[reportAttributeAccessIssue]  (law: annotated object)

    def F_P(self) -> float:
        """Pitchfork bifurcation force F_P/(mu m g) = |a C(0) - b S(0)|, (133)."""
        return abs(float(self.k(0.0)))

    def folds(self, n_grid: int = 4001) -> list[dict]:
        """Fold (saddle-node) bifurcations: interior critical points of h(z) = k^2 (1 - z), (138).

        Critical points with h = 0 (double roots k = 0) are the force-free circles, not folds;
        they are left out.
        """
        z = np.linspace(1e-9, 1 - 1e-9, n_grid)
        dh = np.asarray(_dh_grid(self, jnp.asarray(z)))
        out = []
        for i in np.nonzero(np.sign(dh[:-1]) * np.sign(dh[1:]) < 0)[0]:
            # (the root: scipy's inferred return type includes full_output's tuple)
            zs = cast(
                float,
                brentq(lambda v: float(_dh(self, jnp.float64(v))), z[i], z[i + 1], xtol=1e-15),
            )
            F = math.sqrt(max(float(_h(self, jnp.float64(zs))), 0.0))
            if F > 1e-9:
                out.append({"w3": math.sqrt(zs), "F": F})
        return out

    def bifurcations(self) -> dict:
        """F_T (130), F_P (133) and the folds F_F (138), all in units of mu m g."""
        return {"F_T": self.F_T(), "F_P": self.F_P(), "folds": self.folds()}

    # --- limit directions -------------------------------------------------------------------
    def nontrivial(self, n_grid: int = 4001) -> list[np.ndarray]:
        """Limit directions off the equator: k(w3) w1 = f with w1^2 + w3^2 = 1, w2 = 0 (131)-(132)."""
        f = float(self.f)

        def g(z):
            kz = np.asarray(_k_grid(self, jnp.asarray(np.atleast_1d(z), dtype=jnp.float64)))
            return kz if f == 0.0 else kz**2 * (1 - np.atleast_1d(z)) - f * f

        z = np.linspace(0.0, 1.0, n_grid)[1:-1]
        gz = g(z)
        out = []
        for i in np.nonzero(np.sign(gz[:-1]) * np.sign(gz[1:]) < 0)[0]:
            zs = cast(
                float, brentq(lambda v: float(g(np.array([v, v]))[0]), z[i], z[i + 1], xtol=1e-15)
            )
            w3 = math.sqrt(zs)
            if f == 0.0:
                w1 = math.sqrt(1 - zs)  # a circle of directions; report its w2 = 0, w1 > 0 point
            else:
                w1 = f / float(self.k(w3))
            for s in (1.0, -1.0):
                out.append(np.array([w1, 0.0, s * w3]))
        return out

    def limit_directions(self) -> list[dict]:
        """All limit directions with their classification.

        f > 0: trivial (+-1, 0, 0) and the nontrivial ones. f = 0: the equator circle
        (w3 = 0), the poles (pure spin) and the circles k(w3) = 0 - each circle is reported
        by one representative (w2 = 0) with ``"circle": True``.
        """
        F = self.F
        res = []
        if float(self.f) == 0.0:
            cands = [
                (np.array([1.0, 0.0, 0.0]), True),
                (np.array([0.0, 0.0, 1.0]), False),
                (np.array([0.0, 0.0, -1.0]), False),
            ]
            cands += [(w, True) for w in self.nontrivial()]
        else:
            cands = [(np.array([1.0, 0.0, 0.0]), False), (np.array([-1.0, 0.0, 0.0]), False)]
            cands += [(w, False) for w in self.nontrivial()]
        for w, circ in cands:
            d = classify(F, jnp.asarray(w))
            d["circle"] = circ
            d["eps"] = _eps_of_w(w, self.law)
            res.append(d)
        return res


def _eps_of_w(w, law) -> float:
    """Slip-spin ratio (35) of a direction."""
    w12 = math.hypot(float(w[0]), float(w[1]))
    w3 = abs(float(w[2]))
    return math.inf if w3 == 0 else float(law.rho) / float(law.R) * w12 / w3


def _check(f, j):
    if not (f >= 0 and math.isfinite(f)):
        raise ValueError(f"f = F/(mu m g) = {f!r} must be a finite number >= 0")
    if not j > 0:
        raise ValueError(f"j = {j!r} must be > 0")


def force_free_eps(body: PlanarBody) -> list[float]:
    """Slip-spin ratios eps (35) of the force-free (f = 0) limit-direction circles k(w3) = 0."""
    return [_eps_of_w(w, body.law) for w in body.nontrivial()[::2]]


def fold_N2(C: np.ndarray, S: np.ndarray, a: float, b: float) -> tuple[float, float]:
    """Closed-form fold (138) of the degree-2 model: (w3, F_F/(mu m g)) with k1, k2 of (137)."""
    k1 = a * C[0] - b * S[0]
    k2 = a * C[1] - b * S[1]
    return math.sqrt((2 * k2 - k1) / (3 * k2)), math.sqrt(4 * (k1 + k2) ** 3 / (27 * k2))
