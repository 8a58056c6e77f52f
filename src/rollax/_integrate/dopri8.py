"""Dormand and Prince's 8(7) Runge-Kutta pair with a 7th-order continuous extension: the
method of ``diffrax.Dopri8``, written for the batched ensemble kernel (the API of
:mod:`rollax._integrate.dopri5`).

Fourteen stages with first-same-as-last reuse (13 new field evaluations a step), an embedded
7th-order solution for the error estimate, and Bogacki and Shampine's dense output. The
coefficients are diffrax's own (``diffrax.Dopri8.tableau`` and its interpolation's
``eval_coeffs``), so that :func:`rollax.solve` with ``solver="dopri8"`` and the kernel use the
same method and sample the same continuous extension. References: Prince and Dormand (1981),
J. Comput. Appl. Math. 7, 67-75, doi:10.1016/0771-050X(81)90010-3; Bogacki and Shampine (1990),
Comput. Math. Appl. 20, 15-24, doi:10.1016/0898-1221(90)90027-H (docs/references.md).

At the tolerances of the rim's basin maps (rtol = atol = 1e-9) it takes 3.7x fewer steps than
DOPRI5 (5,773 against 22,228 in the kernel on 1,000 starts of the Fig. 11 section), so 1.7x
fewer field evaluations. But the event samples are per step, so they lie 3.7x further apart:
the rim keeps DOPRI5 (measured in benchmarks/RESULTS.md, "An 8th-order pair").
"""

from __future__ import annotations

from typing import Callable

import diffrax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from rollax._integrate.dopri5 import erk_step

ORDER = 8  # of the solution, and the step-size controller's exponent 1 / ORDER (as diffrax)
N_COEF = 6  # vectors of the continuous extension (dense_coefficients)

_T = diffrax.Dopri8.tableau
C = tuple(float(c) for c in _T.c)
A = tuple(tuple(float(a) for a in row) for row in _T.a_lower)
E = tuple(float(e) for e in _T.b_error)
# D[i][j]: the weight of k_i in the coefficient of theta^(6 - j) (diffrax's polynomial rows)
D = tuple(
    tuple(float(v) for v in row)
    # (a class, which diffrax types as a callable)
    for row in np.asarray(diffrax.Dopri8.interpolation_cls.eval_coeffs)  # pyright: ignore[reportFunctionMemberAccess]
)


def step(
    f: Callable[[Float[Array, ""], Float[Array, " d"]], Float[Array, " d"]],
    t: Float[Array, ""],
    y: Float[Array, " d"],
    h: Float[Array, ""],
    k1: Float[Array, " d"],
    g: Callable | None = None,
    fg: Callable | None = None,
    rolled: bool = False,
) -> tuple[
    Float[Array, " d"],
    Float[Array, " d"],
    Float[Array, "14 d"],
    Float[Array, "14 d"] | None,
    Float[Array, "14 n"] | Float[Array, " n"] | None,
]:
    """One Dopri8 step of ``y' = f(t, y)`` from ``(t, y)`` with ``k1 = f(t, y)``: as
    :func:`rollax._integrate.dopri5.step`, with 14 stages (``ks[13] = f(y_new)`` is the next ``k1``)."""
    return erk_step(C, A, E, f, t, y, h, k1, g, fg, rolled)


def dense_coefficients(
    y0: Float[Array, " d"], y1: Float[Array, " d"], ks: Float[Array, "14 d"], h: Float[Array, ""]
) -> Float[Array, "6 d"]:
    """The continuous extension's coefficients ``c_0..c_5`` of one step, with
    ``y(t0 + theta h) = y0 + theta (c_0 theta^5 + ... + c_5)`` (``y1`` is not used: the
    extension at theta = 1 differs from the new state by the interpolation's error)."""
    del y1
    return jnp.stack(
        [h * sum(row[j] * ks[i] for i, row in enumerate(D) if row[j] != 0.0) for j in range(N_COEF)]
    )


def dense_eval(y0: Float[Array, " d"], coef: Float[Array, "6 d"], theta) -> Float[Array, " d"]:
    """The continuous extension at ``theta`` from the coefficients of :func:`dense_coefficients`."""
    p = coef[0]
    for j in range(1, N_COEF):
        p = p * theta + coef[j]
    return y0 + theta * p


def interpolate(y0, y1, ks, h, theta):
    """The continuous extension of a Dopri8 step at ``t0 + theta * h``, ``theta`` in [0, 1]."""
    return dense_eval(y0, dense_coefficients(y0, y1, ks, h), theta)
