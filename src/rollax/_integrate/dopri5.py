"""The Dormand-Prince 5(4) Runge-Kutta pair with its continuous extension (Hairer's DOPRI5).

The method of both integrators (``rollax.solve`` wraps these coefficients as a diffrax
solver, ``rollax._integrate._solve._Dopri5``). Written for the batched ensemble kernel: one step is a pure
function of ``(t, y, h, k1)`` with first-same-as-last reuse of ``k1``; the event functions are
sampled on the step's continuous extension (:func:`dense_coefficients` once per step, then
:func:`dense_eval` per sample, four multiply-adds per component). Reference: Hairer, Norsett
and Wanner, *Solving ODEs I*, Sect. II.5 and II.6 (dense output coefficients of DOPRI5).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

ORDER = 5  # of the solution, and the step-size controller's exponent 1 / ORDER (as diffrax)
N_COEF = 4  # vectors of the continuous extension (dense_coefficients)

# Nodes c2..c7 and the Butcher tableau rows a_i (i = 2..7); row 7 is the 5th-order solution b.
C = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
A = (
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
# Error weights b - b_hat for k1..k7.
E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)
# Dense output (Hairer's contd5) weights for k1..k7.
D = (
    -12715105075 / 11282082432,
    0.0,
    87487479700 / 32700410799,
    -10690763975 / 1880347072,
    701980252875 / 199316789632,
    -1453857185 / 822651844,
    69997945 / 29380423,
)


def step(
    f: Callable[[Float[Array, ""], Float[Array, " d"]], Float[Array, " d"]],
    t: Float[Array, ""],
    y: Float[Array, " d"],
    h: Float[Array, ""],
    k1: Float[Array, " d"],
    g: Callable[[Float[Array, ""], Float[Array, " d"]], Float[Array, " n"]] | None = None,
    fg: Callable | None = None,
    rolled: bool = False,
) -> tuple[
    Float[Array, " d"],
    Float[Array, " d"],
    Float[Array, "7 d"],
    Float[Array, "7 d"] | None,
    Float[Array, "7 n"] | Float[Array, " n"] | None,
]:
    """One DOPRI5 step of ``y' = f(t, y)`` from ``(t, y)`` with ``k1 = f(t, y)``.

    Returns ``(y_new, err, ks, states, gs)``: the 5th-order solution, the local error estimate
    (5th minus 4th order), the seven stage derivatives (``ks[6] = f(y_new)`` is the next
    ``k1``), the seven stage states (``states[6] = y_new``) and, if ``g`` is given, ``g`` at the
    stage states (``gs[0]`` is ``g(t, y)``). Evaluating ``g`` next to ``f`` lets XLA share their
    common subexpressions. With ``fg(t, y) -> (f, g)`` instead, the last stage (the new state)
    is evaluated by ``fg`` and ``gs`` is ``g(t + h, y_new)`` only. (Unrolled: with polynomial
    sin/cos, see :mod:`rollax._core.fastmath`, this is 1.4x faster than a ``fori_loop`` over the
    stages; with XLA's own sin/cos the two cost the same.) ``rolled``: the stages before the
    last in a loop, with the same arithmetic (the fused GPU kernel, whose compile time grows
    with the copies of ``f``); ``g`` must then be None, and ``states`` is None.
    """
    return erk_step(C, A, E, f, t, y, h, k1, g, fg, rolled)


def erk_step(c_nodes, a_rows, e_weights, f, t, y, h, k1, g=None, fg=None, rolled=False):
    """One step of the explicit first-same-as-last Runge-Kutta pair with nodes ``c_nodes``
    (stages 2..s), rows ``a_rows`` (the last one is the solution's weights) and error weights
    ``e_weights``: see :func:`step` for the arguments and results (``s`` stages)."""
    if rolled and g is None and len(c_nodes) > 2:
        return _erk_rolled(c_nodes, a_rows, e_weights, f, t, y, h, k1, fg)
    ks = [k1]
    states = [y]
    gs = [g(t, y)] if g is not None else None
    g_new = None
    for i, (c, row) in enumerate(zip(c_nodes, a_rows)):
        ti = t + c * h
        yi = y + h * sum(a * k for a, k in zip(row, ks) if a != 0.0)
        states.append(yi)
        if fg is not None and i == len(c_nodes) - 1:
            k, g_new = fg(ti, yi)
            ks.append(k)
        else:
            ks.append(f(ti, yi))
        if g is not None and gs is not None:
            gs.append(g(ti, yi))
    y_new = states[-1]
    err = h * sum(e * k for e, k in zip(e_weights, ks) if e != 0.0)
    if fg is not None:
        return y_new, err, jnp.stack(ks), jnp.stack(states), g_new
    return y_new, err, jnp.stack(ks), jnp.stack(states), (jnp.stack(gs) if gs is not None else None)


def _erk_rolled(c_nodes, a_rows, e_weights, f, t, y, h, k1, fg):
    # erk_step with stages 2..s-1 in a while loop (a fori_loop of static length would become
    # an unrolled scan): the stage sums run over every earlier stage with the tableau's zeros
    # included, in the same order, so each is the unrolled sum plus exact zeros
    s = len(c_nodes) + 1
    A_loop = np.zeros((s - 2, s - 1))
    for i, row in enumerate(a_rows[:-1]):
        A_loop[i, : len(row)] = row
    A_loop = jnp.asarray(A_loop, y.dtype)
    c_loop = jnp.asarray(c_nodes[:-1], y.dtype)

    def body(c):
        i, ks = c
        row = A_loop[i]
        acc = 0
        for j in range(s - 1):
            acc = acc + row[j] * ks[j]
        k = f(t + c_loop[i] * h, y + h * acc)
        return i + 1, jax.lax.dynamic_update_index_in_dim(ks, k, i + 1, 0)

    ks0 = jnp.zeros((s,) + y.shape, y.dtype).at[0].set(k1)
    _, ks_arr = jax.lax.while_loop(lambda c: c[0] < s - 2, body, (jnp.int32(0), ks0))
    ks = [ks_arr[j] for j in range(s - 1)]
    row = a_rows[-1]
    y_new = y + h * sum(a * k for a, k in zip(row, ks) if a != 0.0)
    ti = t + c_nodes[-1] * h
    g_new = None
    if fg is not None:
        k, g_new = fg(ti, y_new)
    else:
        k = f(ti, y_new)
    ks.append(k)
    err = h * sum(e * k for e, k in zip(e_weights, ks) if e != 0.0)
    return y_new, err, jnp.stack(ks), None, g_new  # the stage states are not kept


def interpolate(
    y0: Float[Array, " d"],
    y1: Float[Array, " d"],
    ks: Float[Array, "7 d"],
    h: Float[Array, ""],
    theta: Float[Array, ""],
) -> Float[Array, " d"]:
    """4th-order continuous extension of a DOPRI5 step at ``t0 + theta * h``, ``theta`` in [0, 1]."""
    return dense_eval(y0, dense_coefficients(y0, y1, ks, h), theta)


def dense_coefficients(
    y0: Float[Array, " d"],
    y1: Float[Array, " d"],
    ks: Float[Array, "7 d"],
    h: Float[Array, ""] | float,
) -> Float[Array, "4 d"]:
    """The continuous extension's coefficients ``(dy, bspl, r4, r5)`` of one step (Hairer's
    contd5), computed once per step so that each sample costs four multiply-adds per component."""
    dy = y1 - y0
    bspl = h * ks[0] - dy
    r4 = dy - h * ks[6] - bspl
    r5 = h * sum(d * ks[i] for i, d in enumerate(D) if d != 0.0)
    return jnp.stack([dy, bspl, r4, r5])


def dense_eval(y0: Float[Array, " d"], coef: Float[Array, "4 d"], theta) -> Float[Array, " d"]:
    """The continuous extension at ``theta`` from the coefficients of :func:`dense_coefficients`."""
    dy, bspl, r4, r5 = coef
    return y0 + theta * (dy + (1 - theta) * (bspl + theta * (r4 + (1 - theta) * r5)))


def error_norm(
    err: Float[Array, " d"],
    y0: Float[Array, " d"],
    y1: Float[Array, " d"],
    rtol: float | Float[Array, ""],
    atol: float | Float[Array, ""],
    n: int | None = None,
) -> Float[Array, ""]:
    """RMS norm of the error scaled by ``atol + rtol * max(|y0|, |y1|)`` (Hairer's, as in diffrax).

    Only the first ``n`` components count (default: all); the others are passive (a mode, say)."""
    err, y0, y1 = err[:n], y0[:n], y1[:n]
    scale = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    return jnp.sqrt(jnp.mean((err / scale) ** 2))


def step_factor(en, finite, accept, order: Real[ArrayLike, ""] = 5):
    """The factor of the next step after one with error norm ``en`` (the elementary controller
    of both integrators): ``0.9 en^(-1/order)`` within [0.2, 10], at most 1 after a rejected
    step, 0.2 after a non-finite one."""
    fac = jnp.where(finite, jnp.clip(0.9 * en ** (-1.0 / order), 0.2, 10.0), 0.2)
    return jnp.where(accept, fac, jnp.minimum(fac, 1.0))


def initial_step(
    f: Callable[[Float[Array, ""], Float[Array, " d"]], Float[Array, " d"]],
    t0: Float[Array, ""],
    y0: Float[Array, " d"],
    k1: Float[Array, " d"],
    rtol: float | Float[Array, ""],
    atol: float | Float[Array, ""],
    n: int | None = None,
    order: Real[ArrayLike, ""] = 5,
) -> Float[Array, ""]:
    """Hairer's starting step-size heuristic for a method of order ``order`` (Solving ODEs I,
    II.4; diffrax's, with its error order), from the first ``n`` components (default: all)."""
    scale = atol + rtol * jnp.abs(y0[:n])
    d0 = jnp.sqrt(jnp.mean((y0[:n] / scale) ** 2))
    d1 = jnp.sqrt(jnp.mean((k1[:n] / scale) ** 2))
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    k2 = f(t0 + h0, y0 + h0 * k1)
    d2 = jnp.sqrt(jnp.mean(((k2 - k1)[:n] / scale) ** 2)) / h0
    dmax = jnp.maximum(d1, d2)
    h1 = jnp.where(dmax <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3), (0.01 / dmax) ** (1 / order))
    return jnp.minimum(100 * h0, h1)
