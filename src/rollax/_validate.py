"""Construction-time validation of model parameters: clear ``ValueError``s, never NaNs."""

from __future__ import annotations

import math
from typing import Any


def _as_float(name: str, value: Any) -> float:
    if isinstance(value, (str, bytes, bool)):
        raise ValueError(f"{name} = {value!r} is not allowed: it must be a real number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if math.isnan(x):
        raise ValueError(f"{name} must be a real number, got NaN")
    return x


def check_range(
    name: str,
    value: Any,
    lo: float = -math.inf,
    hi: float = math.inf,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """Return ``float(value)`` or raise ``ValueError`` naming ``name``, the value and the range.

    Works on Python numbers and concrete (non-traced) arrays; an array of several values (a
    per-start parameter) is checked element by element and returned as it is. Traced values
    are passed through unchecked so that modules can be rebuilt inside ``jit``/``grad``.
    """
    if _is_tracer(value):
        return value
    arr = _as_array(value)
    if arr is not None and arr.ndim > 0:
        if arr.size == 0:
            raise ValueError(f"{name} is an empty array; it needs at least one value")
        for v in arr.reshape(-1):
            check_range(name, float(v), lo, hi, lo_open=lo_open, hi_open=hi_open)
        return value
    try:
        x = _as_float(name, value)
    except ValueError:
        if _is_tracer(value):
            return value
        raise
    below = x <= lo if lo_open else x < lo
    above = x >= hi if hi_open else x > hi
    if below or above or math.isinf(x) and not (math.isinf(lo) or math.isinf(hi)):
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        raise ValueError(f"{name} = {x!r} is outside the allowed range {left}{lo}, {hi}{right}")
    return x


def check_positive(name: str, value: Any) -> float:
    """``value`` must be a finite number > 0."""
    x = check_range(name, value, 0.0, math.inf, lo_open=True, hi_open=True)
    return x


def check_nonnegative(name: str, value: Any) -> float:
    """``value`` must be a finite number >= 0."""
    return check_range(name, value, 0.0, math.inf, hi_open=True)


def _as_array(value: Any):
    import numpy as np

    if isinstance(value, (bool, str)) or value is None:
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        return None
    return arr if arr.dtype.kind in "iuf" else None


def _is_tracer(value: Any) -> bool:
    try:
        import jax

        return isinstance(value, jax.core.Tracer)
    except Exception:  # pragma: no cover
        return False
