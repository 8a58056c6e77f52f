"""Fast, branch-free float64 sine and cosine for hot vector fields.

XLA's CPU ``sin``/``cos`` in float64 cost about 11 ns per element and do not vectorise; this
polynomial pair costs about 1.4 ns (measured with ``/tmp``-free micro-benchmarks, see
``benchmarks/RESULTS.md``) and is what makes the rim sweeps fast. Method (fdlibm): reduce
``x = k pi/2 + r`` with a three-part Cody-Waite constant (exact for ``|x| < 2**20 pi/2``),
evaluate the fdlibm minimax kernels on ``|r| <= pi/4`` and pick the quadrant. The error is
below 2 ulp (about 2.3e-16 absolute on [-50, 50], checked against ``numpy`` in the tests).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

# fdlibm __kernel_sin / __kernel_cos coefficients
_S = (
    -1.66666666666666324348e-01,
    8.33333333332248946124e-03,
    -1.98412698298579493134e-04,
    2.75573137070700676789e-06,
    -2.50507602534068634195e-08,
    1.58969099521155010221e-10,
)
_C = (
    4.16666666666666019037e-02,
    -1.38888888888741095749e-03,
    2.48015872894767294178e-05,
    -2.75573143513906633035e-07,
    2.08757232129817482790e-09,
    -1.13596475577881948265e-11,
)
_PIO2 = (1.57079632673412561417e00, 6.07710050630396597660e-11, 2.02226624879595063154e-21)


def sincos(x: Float[Array, "..."]) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """``(sin(x), cos(x))`` to within 2 ulp for ``|x| < 1.6e6``; differentiable (jvp/grad)."""
    k = jnp.round(x * (2.0 / jnp.pi))
    r = ((x - k * _PIO2[0]) - k * _PIO2[1]) - k * _PIO2[2]
    z = r * r
    ps = _S[5]
    for c in _S[4::-1]:
        ps = c + z * ps
    pc = _C[5]
    for c in _C[4::-1]:
        pc = c + z * pc
    s = r + r * z * ps
    c = 1.0 - 0.5 * z + z * z * pc
    q = jnp.asarray(k, jnp.int64 if k.dtype == jnp.float64 else jnp.int32) & 3
    sin = jnp.where(q == 0, s, jnp.where(q == 1, c, jnp.where(q == 2, -s, -c)))
    cos = jnp.where(q == 0, c, jnp.where(q == 1, -s, jnp.where(q == 2, -c, s)))
    return sin, cos
