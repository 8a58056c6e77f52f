"""Complete elliptic integrals K(m), E(m) and D(m) = (K - E)/m in JAX, differentiable.

The friction laws (59)-(60) of the uniform pressure distribution need the *complete* elliptic
integrals of the first and second kind with parameter m (docs/physics-notes.md: the paper's 'incomplete'
is a misprint), the same convention as ``scipy.special.ellipk`` / ``ellipe``.

They are evaluated by the arithmetic-geometric mean (AGM) with a fixed number of iterations
(quadratic convergence, so the count is a safe upper bound for m in [0, 1)), which keeps the
functions jit/vmap-able and differentiable by ordinary autodiff. The auxiliary
D(m) = (K - E)/m is computed without the cancellation of K - E at small m, using the
recurrence c_{n+1} = c_n^2 / (4 a_{n+1}) of the AGM (Abramowitz & Stegun 17.6).

:func:`ellipkdeg` also returns G(m) = (2D - K)/(2m) (G(0) = pi/32), again without cancellation;
with it the derivatives K' = (K - D)/(2(1 - m)), E' = -D/2 and D' = (D - 2G)/(2(1 - m)) can be
combined without cancelling their 1/(1 - m) singularities (used by the exact laws' derivatives).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

# 2^-k convergence is quadratic: 10 steps reach machine precision down to 1 - m ~ 1e-300.
_AGM_STEPS = 10


def _agm(
    m: Float[Array, "..."],
) -> tuple[Float[Array, "..."], Float[Array, "..."], Float[Array, "..."]]:
    """Return (a_inf, sum_{n>=1} 2^(n-1) c_n^2 / m, sum_{n>=1} 2^(n-1) c_n^2 / m^2) of the AGM
    started at (1, sqrt(1 - m))."""
    b0 = jnp.sqrt(1.0 - m)
    a = 0.5 * (1.0 + b0)
    b = jnp.sqrt(b0)
    s = 1.0 / (4.0 * (1.0 + b0) ** 2)  # c_1^2 / m^2
    t = m * s  # c_1^2 / m, written without cancellation
    acc = t  # 2^0 * c_1^2 / m
    acc2 = s
    w = 1.0
    for _ in range(_AGM_STEPS):
        a_new = 0.5 * (a + b)
        b = jnp.sqrt(a * b)
        s = t * t / (16.0 * a_new * a_new)  # c_{n+1}^2 / m^2
        t = m * t * t / (16.0 * a_new * a_new)  # c_{n+1}^2 / m
        a = a_new
        w = 2.0 * w
        acc = acc + w * t
        acc2 = acc2 + w * s
    return a, acc, acc2


def ellipk(m: ArrayLike) -> Float[Array, "..."]:
    """Complete elliptic integral of the first kind K(m) = int_0^{pi/2} (1 - m sin^2)^(-1/2).

    Parameter convention of ``scipy.special.ellipk``; valid for m in [0, 1) (K(1) = inf).
    Used by the exact uniform-pressure law (59)-(60).
    """
    m = jnp.asarray(m, dtype=jnp.float64)
    a, _, _ = _agm(m)
    return jnp.pi / (2.0 * a)


def ellipd(m: ArrayLike) -> Float[Array, "..."]:
    """D(m) = (K(m) - E(m)) / m, evaluated without cancellation (D(0) = pi/4)."""
    m = jnp.asarray(m, dtype=jnp.float64)
    a, acc, _ = _agm(m)
    k = jnp.pi / (2.0 * a)
    return k * (0.5 + acc)


def ellipe(m: ArrayLike) -> Float[Array, "..."]:
    """Complete elliptic integral of the second kind E(m) = int_0^{pi/2} (1 - m sin^2)^(1/2).

    Parameter convention of ``scipy.special.ellipe``; valid for m in [0, 1]. Used by the exact
    uniform-pressure law (59)-(60).
    """
    m = jnp.asarray(m, dtype=jnp.float64)
    a, acc, _ = _agm(m)
    k = jnp.pi / (2.0 * a)
    # E = K (1 - m/2 - sum 2^(n-1) c_n^2); at m = 1 K = inf and the bracket -> 0, so use E(1) = 1.
    e = k * (1.0 - m * (0.5 + acc))
    return jnp.where(m == 1.0, 1.0, e)


def ellipkde(m: ArrayLike) -> tuple[Float[Array, "..."], Float[Array, "..."], Float[Array, "..."]]:
    """(K(m), E(m), D(m)) from one AGM run (cheaper to compile and evaluate than three calls)."""
    m = jnp.asarray(m, dtype=jnp.float64)
    a, acc, _ = _agm(m)
    k = jnp.pi / (2.0 * a)
    e = jnp.where(m == 1.0, 1.0, k * (1.0 - m * (0.5 + acc)))
    return k, e, k * (0.5 + acc)


def ellipkdeg(
    m: ArrayLike,
) -> tuple[Float[Array, "..."], Float[Array, "..."], Float[Array, "..."], Float[Array, "..."]]:
    """(K(m), E(m), D(m), G(m)) from one AGM run, G = (2D - K)/(2m) = K sum 2^(n-1) c_n^2 / m^2.

    G enters the derivatives of the uniform-pressure law (59)-(60), e.g. d/dm (E + K - D) = G - D/2.
    """
    m = jnp.asarray(m, dtype=jnp.float64)
    a, acc, acc2 = _agm(m)
    k = jnp.pi / (2.0 * a)
    e = jnp.where(m == 1.0, 1.0, k * (1.0 - m * (0.5 + acc)))
    return k, e, k * (0.5 + acc), k * acc2
