"""Impact maps of natural mechanical systems, holonomic and nonholonomic.

Clark & Bloch, "The bouncing penny and nonholonomic impacts". A system is given at the impact
configuration q by its mass matrix ``M`` (the kinetic-energy metric g, shape (n, n)), the
constraint one-forms ``A`` (rows a^k_j of eq. (8), shape (m, n); m = 0 is the holonomic case)
and the differential ``dh`` of the impact surface h(q) = 0 (shape (n,)). Every map takes the
pre-impact velocity ``qdot`` and returns the post-impact velocity; q is unchanged by an impact.

Conventions: covectors (dh, rows of A, momenta) are paired with vectors by the plain dot
product, and the metric on covectors is <a, b> = a M^{-1} b (the musical isomorphism (1)).

All functions are pure, jit/vmap/grad-compatible and take single (unbatched) arrays; batch them
with ``jax.vmap``. Shapes are checked eagerly (a mismatch raises ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
from jaxtyping import Array, ArrayLike, Bool, Float

from rollax._core._validate import check_range

__all__ = [
    "ElasticRoot",
    "ImpactMap",
    "constraint_projection",
    "elastic_quadratic",
    "holonomic_elastic",
    "holonomic_plastic",
    "holonomic_restitution",
    "kinetic_energy",
    "nonholonomic_elastic",
    "nonholonomic_elastic_root",
    "nonholonomic_plastic",
    "nonholonomic_restitution",
    "plastic_equivalent_restitution",
    "sharp",
]


def _is_tracer(*xs) -> bool:
    return any(isinstance(x, Tracer) for x in xs)


def _as_arrays(M, A, dh, qdot):
    """float64 arrays with consistent shapes (checked eagerly: shapes are static)."""
    qdot = jnp.asarray(qdot, dtype=jnp.float64)
    if qdot.ndim != 1:
        raise ValueError(f"qdot must have shape (n,), got {qdot.shape}")
    n = qdot.shape[0]
    M = jnp.asarray(M, dtype=jnp.float64)
    if M.shape != (n, n):
        raise ValueError(f"M must have shape ({n}, {n}) to match qdot, got {M.shape}")
    dh = jnp.asarray(dh, dtype=jnp.float64)
    if dh.shape != (n,):
        raise ValueError(f"dh must have shape ({n},) to match qdot, got {dh.shape}")
    if A is None:
        A = jnp.zeros((0, n))
    A = jnp.asarray(A, dtype=jnp.float64)
    if A.ndim != 2 or A.shape[1] != n:
        raise ValueError(f"A must have shape (m, {n}) (one constraint form per row), got {A.shape}")
    return M, A, dh, qdot


def kinetic_energy(M: Float[ArrayLike, "n n"], qdot: Float[ArrayLike, " n"]) -> Float[Array, ""]:
    """Kinetic energy 1/2 g(qdot, qdot) = 1/2 qdot^T M qdot of a natural Lagrangian (Def. II.6)."""
    qdot = jnp.asarray(qdot, dtype=jnp.float64)
    return 0.5 * qdot @ (jnp.asarray(M, dtype=jnp.float64) @ qdot)


def sharp(M: Float[ArrayLike, "n n"], covector: Float[ArrayLike, "... n"]) -> Float[Array, "... n"]:
    """The musical isomorphism (1): the vector M^{-1} p of a covector p (e.g. grad h = dh^sharp)."""
    M = jnp.asarray(M, dtype=jnp.float64)
    p = jnp.asarray(covector, dtype=jnp.float64)
    return jnp.linalg.solve(M, p.T).T


def constraint_projection(
    M: Float[ArrayLike, "n n"], A: Float[ArrayLike, "m n"]
) -> Float[Array, "n n"]:
    """The g-orthogonal projection pi_Delta onto Delta = ker A, eqs. (19) and (21).

    pi_Delta(v) = v - a_ij omega^i(v) W^j with W^j = (omega^j)^sharp, a^ij = omega^i(W^j) and
    (a_ij) = (a^ij)^{-1}. Returned as an (n, n) matrix acting on column vectors; the identity
    when m = 0.
    """
    M = jnp.asarray(M, dtype=jnp.float64)
    A = jnp.asarray(A, dtype=jnp.float64)
    n = M.shape[0]
    if A.shape[0] == 0:
        return jnp.eye(n)
    W = jnp.linalg.solve(M, A.T)  # columns W^j, (19)
    a_up = A @ W  # a^{ij}
    return jnp.eye(n) - W @ jnp.linalg.solve(a_up, A)


def holonomic_restitution(
    M: Float[ArrayLike, "n n"],
    dh: Float[ArrayLike, " n"],
    qdot: Float[ArrayLike, " n"],
    e: float | Float[ArrayLike, ""] = 1.0,
) -> Float[Array, " n"]:
    """Holonomic impact with coefficient of restitution e in [0, 1], eq. (6).

    qdot+ = qdot - (1 + e) dh(qdot) / g(grad h, grad h) grad h. e = 1 is the variational
    (elastic, Weierstrass-Erdmann) map (5); e = 0 is the g-orthogonal projection onto ker dh.
    """
    check_range("e", e, 0.0, 1.0)
    M, _, dh, qdot = _as_arrays(M, None, dh, qdot)
    grad_h = jnp.linalg.solve(M, dh)
    return qdot - (1.0 + e) * (dh @ qdot) / (dh @ grad_h) * grad_h


def holonomic_elastic(
    M: Float[ArrayLike, "n n"], dh: Float[ArrayLike, " n"], qdot: Float[ArrayLike, " n"]
) -> Float[Array, " n"]:
    """Variational holonomic impact P(q, qdot) of Theorem III.1, eq. (5) (energy-conserving)."""
    return holonomic_restitution(M, dh, qdot, 1.0)


def holonomic_plastic(
    M: Float[ArrayLike, "n n"], dh: Float[ArrayLike, " n"], qdot: Float[ArrayLike, " n"]
) -> Float[Array, " n"]:
    """Plastic holonomic impact: eq. (6) with e = 0, the g-orthogonal projection onto ker dh."""
    return holonomic_restitution(M, dh, qdot, 0.0)


def nonholonomic_plastic(
    M: Float[ArrayLike, "n n"],
    A: Float[ArrayLike, "m n"],
    dh: Float[ArrayLike, " n"],
    qdot: Float[ArrayLike, " n"],
) -> Float[Array, " n"]:
    """Plastic nonholonomic impact map pi_Delta o P of Definition IV.4, eqs. (18)-(21).

    The unconstrained elastic impact (5) followed by the g-orthogonal projection (21) onto the
    constraint distribution. For qdot in Delta this equals the closed form (20):
    qdot - 2 dh(qdot)/g(grad h, grad h) (grad h - a_ij omega^i(grad h) W^j). It never increases
    the kinetic energy. It equals :func:`nonholonomic_restitution` with the coefficient
    :func:`plastic_equivalent_restitution`.
    """
    M, A, dh, qdot = _as_arrays(M, A, dh, qdot)
    return constraint_projection(M, A) @ holonomic_elastic(M, dh, qdot)


class ElasticRoot(NamedTuple):
    """Solution of the elastic corner conditions (15): the post-impact velocity, the multipliers
    (alpha, lambda_k) of p+ = p- + lambda_k omega^k + alpha dh, whether a nontrivial root exists,
    and s = cos(angle between qdot and pi_Delta(grad h)) in the metric g (0: glancing)."""

    qdot: Float[Array, " n"]
    alpha: Float[Array, ""]
    lam: Float[Array, " m"]
    exists: Bool[Array, ""]
    s: Float[Array, ""]


def elastic_quadratic(
    M: Float[ArrayLike, "n n"],
    A: Float[ArrayLike, "m n"],
    dh: Float[ArrayLike, " n"],
    qdot: Float[ArrayLike, " n"],
) -> tuple[Float[Array, ""], Float[Array, ""], Float[Array, " m"]]:
    """Coefficients of the quadratic of Proposition IV.1.

    Solves the linear equations (16) for lambda_k = alpha * lam1_k and substitutes into (17),
    giving c2 alpha^2 + c1 alpha = 0 with
    c1 = 2 (lam1_k <p-, omega^k> + <p-, dh>) and
    c2 = lam1_i lam1_j <omega^i, omega^j> + 2 lam1_k <omega^k, dh> + <dh, dh>.
    Returns (c2, c1, lam1). (16) assumes, as in the paper, that qdot satisfies the constraints.
    """
    M, A, dh, qdot = _as_arrays(M, A, dh, qdot)
    Minv_dh = jnp.linalg.solve(M, dh)
    dh_dh = dh @ Minv_dh  # <dh, dh>
    p_dh = dh @ qdot  # <p-, dh> = dh(qdot)
    if A.shape[0] == 0:
        return dh_dh, 2.0 * p_dh, jnp.zeros((0,))
    G = A @ jnp.linalg.solve(M, A.T)  # <omega^k, omega^l>
    w_dh = A @ Minv_dh  # <omega^k, dh>
    lam1 = -jnp.linalg.solve(G, w_dh)  # (16) per unit alpha
    p_w = A @ qdot  # <p-, omega^k> = omega^k(qdot)
    c1 = 2.0 * (lam1 @ p_w + p_dh)
    c2 = lam1 @ G @ lam1 + 2.0 * lam1 @ w_dh + dh_dh
    return c2, c1, lam1


def nonholonomic_elastic_root(
    M: Float[ArrayLike, "n n"],
    A: Float[ArrayLike, "m n"],
    dh: Float[ArrayLike, " n"],
    qdot: Float[ArrayLike, " n"],
    e: float | Float[ArrayLike, ""] = 1.0,
    tol: float = 1e-12,
) -> ElasticRoot:
    """The nontrivial root of Proposition IV.1 (eqs. (15)-(17)), NaN-free, with an existence flag.

    alpha* = -c1/c2 and lambda = alpha* lam1 from :func:`elastic_quadratic`, scaled by (1 + e)/2
    (e = 1: the elastic map; see :func:`nonholonomic_restitution`). The root exists when dh is
    independent of the constraint forms (c2 > tol * <dh, dh>) and the impact is not glancing
    (|s| > tol). Where it does not exist, ``qdot`` is returned unchanged (the trivial root
    alpha = 0) and ``exists`` is False.
    """
    check_range("e", e, 0.0, 1.0)
    M, A, dh, qdot = _as_arrays(M, A, dh, qdot)
    c2, c1, lam1 = elastic_quadratic(M, A, dh, qdot)
    dh_dh = dh @ jnp.linalg.solve(M, dh)
    two_T = 2.0 * kinetic_energy(M, qdot)
    independent = c2 > tol * dh_dh
    c2_safe = jnp.where(independent, c2, 1.0)
    # c1 = 2 g(u, qdot) with u = pi_Delta(grad h) and c2 = g(u, u): s is a cosine in the metric.
    s = jnp.where(
        independent & (two_T > 0),
        c1 / (2.0 * jnp.sqrt(c2_safe * jnp.where(two_T > 0, two_T, 1.0))),
        0.0,
    )
    exists = independent & (jnp.abs(s) > tol)
    alpha = jnp.where(exists, -0.5 * (1.0 + e) * c1 / c2_safe, 0.0)
    lam = alpha * lam1
    u = jnp.linalg.solve(M, dh + A.T @ lam1)  # (p+ - p-)/alpha, raised to a vector
    return ElasticRoot(qdot + alpha * u, alpha, lam, exists, s)


def _fail_or_nan(root: ElasticRoot, what: str, M, A, dh, qdot) -> Float[Array, " n"]:
    if not _is_tracer(M, A, dh, qdot, root.qdot):
        if not bool(root.exists):
            c2, c1, _ = elastic_quadratic(M, A, dh, qdot)
            if float(c2) <= 1e-12 * float(dh @ jnp.linalg.solve(jnp.asarray(M, float), dh)):
                why = "dh is linearly dependent on the constraint forms (Proposition IV.1 needs them independent)"
            else:
                why = f"the impact is glancing: dh(qdot) = {float(dh @ qdot):.3e}, so alpha = 0 is a double root"
            raise ValueError(f"{what}: the quadratic (17) has no nontrivial root; {why}")
        return root.qdot
    return jnp.where(root.exists, root.qdot, jnp.nan)


def nonholonomic_elastic(
    M: Float[ArrayLike, "n n"],
    A: Float[ArrayLike, "m n"],
    dh: Float[ArrayLike, " n"],
    qdot: Float[ArrayLike, " n"],
    tol: float = 1e-12,
) -> Float[Array, " n"]:
    """Elastic nonholonomic impact map of Definition IV.3: the nontrivial solution of (15).

    p+ = p- + lambda_k omega^k + alpha dh with energy conserved and omega^k(qdot+) = 0, i.e.
    qdot+ = qdot - 2 dh(qdot)/g(u, u) u with u = pi_Delta(grad h). Raises ``ValueError`` when the
    quadratic (17) has no nontrivial root (glancing impact, or dh dependent on the constraint
    forms); under jit/vmap (traced inputs) it returns NaNs instead. Use
    :func:`nonholonomic_elastic_root` for an explicit flag. qdot must lie in Delta (as in (16)).
    """
    M, A, dh, qdot = _as_arrays(M, A, dh, qdot)
    root = nonholonomic_elastic_root(M, A, dh, qdot, 1.0, tol)
    return _fail_or_nan(root, "elastic nonholonomic impact", M, A, dh, qdot)


def nonholonomic_restitution(
    M: Float[ArrayLike, "n n"],
    A: Float[ArrayLike, "m n"],
    dh: Float[ArrayLike, " n"],
    qdot: Float[ArrayLike, " n"],
    e: float | Float[ArrayLike, ""],
    tol: float = 1e-12,
) -> Float[Array, " n"]:
    """Nonholonomic impact with coefficient of restitution e in [0, 1].

    The multipliers of the elastic solution of (15)-(17) scaled by (1 + e)/2, the same scaling
    that turns (5) into (6): qdot+ = qdot - (1 + e) dh(qdot)/g(u, u) u, u = pi_Delta(grad h).
    The constraints hold after impact for every e, dh(qdot+) = -e dh(qdot), and the energy lost is
    (1 - e^2) dh(qdot)^2 / (2 g(u, u)). e = 1 is the elastic map (Definition IV.3); e = 0 stops
    the motion normal to the surface within Delta (the g-orthogonal projection onto
    Delta intersected with ker dh); with m = 0 it is the holonomic map (6). The paper's plastic
    map (18) lies on the same family at e = :func:`plastic_equivalent_restitution`.
    Raises ``ValueError`` (NaNs when traced) where the elastic root does not exist (dh dependent on
    the constraint forms, or a glancing impact).
    """
    M, A, dh, qdot = _as_arrays(M, A, dh, qdot)
    root = nonholonomic_elastic_root(M, A, dh, qdot, e, tol)
    return _fail_or_nan(root, "nonholonomic restitution impact", M, A, dh, qdot)


def plastic_equivalent_restitution(
    M: Float[ArrayLike, "n n"], A: Float[ArrayLike, "m n"], dh: Float[ArrayLike, " n"]
) -> Float[Array, ""]:
    """The e with nonholonomic_plastic (18) = nonholonomic_restitution(e) for qdot in Delta.

    Both maps move qdot along u = pi_Delta(grad h); by (20) the plastic map does so with
    coefficient 2/g(grad h, grad h) instead of (1 + e)/g(u, u), hence
    e_p = 2 g(u, u)/g(grad h, grad h) - 1 in [-1, 1] (negative: (18) does not reverse the normal
    velocity).
    """
    M, A, dh, _ = _as_arrays(M, A, dh, jnp.zeros(jnp.shape(dh)))
    c2, _, _ = elastic_quadratic(M, A, dh, jnp.zeros_like(dh))
    return 2.0 * c2 / (dh @ jnp.linalg.solve(M, dh)) - 1.0


_LAWS = ("elastic", "plastic", "restitution", "holonomic")


class ImpactMap(eqx.Module):
    """An impact law for a system given as functions of the configuration q.

    ``mass_matrix(q) -> (n, n)``, ``constraints(q) -> (m, n)`` (rows: the one-forms (8)) and
    ``surface(q) -> scalar`` (h, impacts at h = 0). ``law`` is one of "elastic" (Definition IV.3),
    "plastic" (Definition IV.4, eq. (18)), "restitution" (coefficient ``e``, see
    :func:`nonholonomic_restitution`) or "holonomic" (eq. (6) with ``e``, constraints ignored).
    Calling it maps (q, qdot-) to qdot+; :meth:`jacobian` gives d qdot+ / d(q, qdot-) by autodiff.
    """

    mass_matrix: Callable = eqx.field(static=True)
    constraints: Callable = eqx.field(static=True)
    surface: Callable = eqx.field(static=True)
    law: str = eqx.field(static=True, default="elastic")
    e: float = 1.0

    def __check_init__(self):
        if self.law not in _LAWS:
            raise ValueError(f"law = {self.law!r} is not one of {_LAWS}")
        check_range("e", self.e, 0.0, 1.0)

    def parts(self, q: Float[ArrayLike, " n"]):
        """(M(q), A(q), dh(q)) at the configuration q."""
        q = jnp.asarray(q, dtype=jnp.float64)
        return self.mass_matrix(q), self.constraints(q), jax.grad(self.surface)(q)

    def __call__(
        self, q: Float[ArrayLike, " n"], qdot: Float[ArrayLike, " n"]
    ) -> Float[Array, " n"]:
        """Post-impact velocity qdot+ at q (q itself is unchanged by the impact)."""
        M, A, dh = self.parts(q)
        if self.law == "elastic":
            return nonholonomic_elastic(M, A, dh, qdot)
        if self.law == "plastic":
            return nonholonomic_plastic(M, A, dh, qdot)
        if self.law == "restitution":
            return nonholonomic_restitution(M, A, dh, qdot, self.e)
        return holonomic_restitution(M, dh, qdot, self.e)

    def jacobian(self, q: Float[ArrayLike, " n"], qdot: Float[ArrayLike, " n"]):
        """(d qdot+/d q, d qdot+/d qdot-), each (n, n), by forward-mode autodiff."""
        q = jnp.asarray(q, dtype=jnp.float64)
        qdot = jnp.asarray(qdot, dtype=jnp.float64)
        return jax.jacfwd(self.__call__, argnums=(0, 1))(q, qdot)
