"""Construction-time validation of model parameters: clear ``ValueError``s, never NaNs."""

from __future__ import annotations

import math
from typing import Any, overload

import numpy as np


#: The smallest tolerances float64 can honour. Below RTOL_MIN (about 4.5 units in the last
#: place) a step's own rounding exceeds the error it is asked for, and the step size collapses
#: (measured: rtol = atol = 1e-300 gave NONFINITE at t = 0 on every start); below ATOL_MIN the
#: absolute tolerance is near float64's underflow.
RTOL_MIN = 1e-15
ATOL_MIN = 1e-300


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
) -> Any:  # a float, or the array (several values, or traced) as it came
    """Return ``float(value)`` or raise ``ValueError`` naming ``name``, the value and the range.

    Works on Python numbers and concrete (non-traced) arrays; an array of several values (a
    per-start parameter) is checked element by element and returned as it is. Traced values
    are passed through unchecked so that modules can be rebuilt inside ``jit``/``grad``.
    """
    if _is_tracer(value):
        return value
    _check_real(name, value)
    arr = _as_array(value)
    if arr is not None and arr.ndim > 0:
        if arr.size == 0:
            raise ValueError(f"{name} is an empty array; it needs at least one value")
        for idx in np.ndindex(arr.shape):  # a per-start parameter: the error names the row
            row = f"{name}[{', '.join(str(i) for i in idx)}]"
            check_range(row, float(arr[idx]), lo, hi, lo_open=lo_open, hi_open=hi_open)
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


def _check_real(name: str, value: Any) -> None:
    # a complex value is refused, not silently made real
    if isinstance(value, complex) or (
        hasattr(value, "dtype") and not _is_tracer(value) and np.asarray(value).dtype.kind == "c"
    ):
        raise ValueError(f"{name} = {_show(value)} is not allowed: it must be real")


def check_less(a_name: str, a: Any, b_name: str, b: Any, allowed: str) -> None:
    """``a < b`` for concrete values, entry by entry for per-start arrays (broadcast), the
    error naming the first offending row; traced values pass (checked where concrete)."""
    if _is_tracer(a) or _is_tracer(b):
        return
    A, B = _as_array(a), _as_array(b)
    if A is None or B is None:
        return  # not numbers: refused by the fields' own checks
    try:
        A, B = np.broadcast_arrays(A, B)
    except ValueError:
        raise ValueError(
            f"{a_name} has shape {A.shape} and {b_name} {B.shape}: per-start "
            f"values must have the same length"
        ) from None
    bad = ~(A < B)
    if bad.any():
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        row = f" in per-start row {', '.join(str(k) for k in i)}" if A.ndim else ""
        raise ValueError(
            f"{a_name} = {float(A[i])!r} must be smaller than {b_name} = "
            f"{float(B[i])!r}{row} (allowed range: {allowed})"
        )


def check_where_concrete(name: str, value: Any, ok, allowed: str) -> None:
    """``ok(array) -> bools`` must hold for every entry of a concrete ``value`` (a number or an
    array); the error names the first offending entry. Traced values pass (the functions that
    call this are used under ``jit`` and ``grad``)."""
    if _is_tracer(value):
        return
    _check_real(name, value)
    arr = _as_array(value)
    if arr is None:
        raise ValueError(f"{name} = {_show(value)} is not allowed: it must be a real number")
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        good = np.asarray(ok(arr.astype(float)), bool) & ~np.isnan(arr)
    if not good.all():
        i = tuple(int(k) for k in np.argwhere(~np.broadcast_to(good, arr.shape))[0])
        where = f"[{', '.join(str(k) for k in i)}]" if arr.ndim else ""
        raise ValueError(f"{name}{where} = {float(arr[i])!r} is not allowed: {allowed}")


def check_positive(name: str, value: Any) -> Any:  # (check_range's)
    """``value`` must be a finite number > 0."""
    x = check_range(name, value, 0.0, math.inf, lo_open=True, hi_open=True)
    return x


def check_finite(name: str, value: Any) -> Any:  # (check_range's)
    """``value`` (or each of its entries) must be a finite real number."""
    return check_range(name, value, -math.inf, math.inf, lo_open=True, hi_open=True)


def check_nonnegative(name: str, value: Any) -> Any:  # (check_range's)
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
        from jax.core import Tracer

        return isinstance(value, Tracer)
    except Exception:  # pragma: no cover
        return False


def _show(x: Any) -> str:
    """A short rendering of a bad value for an error message (small arrays in full)."""
    import numpy as np

    if _is_tracer(x):
        return f"a traced array of shape {tuple(x.shape)}"
    try:
        arr = np.asarray(x)
    except Exception:
        return repr(x)
    if (
        arr.dtype == object
        or arr.dtype.kind in "SUb"
        or (arr.ndim == 0 and not hasattr(x, "shape"))
    ):
        return repr(x)  # a Python scalar, string, None, ...
    if arr.size <= 8:
        return f"{arr.tolist()!r} (shape {arr.shape})"
    return f"an array of shape {arr.shape}"


def check_shape(name: str, x: Any, shape: tuple[int, ...], what: str = "") -> Any:
    """Raise ``ValueError`` unless ``x`` has exactly ``shape``; return ``x``.

    Shapes are static under ``jit``/``vmap`` (under ``vmap`` the per-example shape is seen), so
    this is safe to call in any traced function; only the shape is checked, never the values.
    ``what`` (e.g. ``" = (beta, w1, w2, w3)"``) is added to the allowed shape in the message.
    """
    import numpy as np

    try:
        got = tuple(np.shape(x))
    except Exception:
        got = None
    if got != tuple(shape):
        raise ValueError(
            f"{name} = {_show(x)} is not allowed: it must be an array of shape "
            f"{tuple(shape)}{what} (use jax.vmap for a batch)"
        )
    return x


def check_integer(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> Any:
    """``value`` must be a Python or NumPy integer (not a bool; a whole float such as ``2.0`` is
    taken as 2) in ``[lo, hi]``; returned as an ``int``. Traced values are passed through
    unchecked."""
    import numpy as np

    if _is_tracer(value):
        return value
    if lo is not None and hi is not None:
        allowed = f"an integer in [{lo}, {hi}]"
    elif lo is not None:
        allowed = f"an integer >= {lo}"
    elif hi is not None:
        allowed = f"an integer <= {hi}"
    else:
        allowed = "an integer"
    if hasattr(value, "shape") and hasattr(value, "dtype") and np.ndim(value) == 0:
        if np.dtype(value.dtype).kind in "iuf":
            value = np.asarray(value).item()  # a 0-d NumPy or JAX array
    is_int = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if (
        isinstance(value, (float, np.floating))
        and math.isfinite(value)
        and float(value).is_integer()
    ):
        is_int = True  # 2.0: a whole number, accepted as 2
    if not is_int:
        raise ValueError(f"{name} = {value!r} is not allowed: it must be {allowed}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(
            f"{name} = {v!r} is not allowed: it is outside the allowed range: {allowed}"
        )
    return v


def real_array(name: str):
    """An ``equinox.field`` converter to a float array that refuses what is not a real number
    (strings, ``None``, booleans, objects) with a ``ValueError`` naming the field. Values are
    not checked here (``__check_init__`` does that); traced values are converted as they are."""

    def convert(x):
        import jax.numpy as jnp
        import numpy as np

        if _is_tracer(x):
            return jnp.asarray(x, dtype=float)
        if isinstance(x, (str, bytes, bool, np.bool_)) or x is None:
            raise ValueError(f"{name} = {x!r} is not allowed: it must be a real number")
        try:
            arr = np.asarray(x)
            ok = arr.dtype.kind in "iuf"
        except Exception:
            ok = False
        if not ok:
            raise ValueError(
                f"{name} = {x!r} is not allowed: it must be a real number or an "
                "array of real numbers"
            )
        return jnp.asarray(x, dtype=float)

    convert.__name__ = f"real_array_{name}"
    return convert


def check_jump_ts(jump_ts: Any):
    """``jump_ts`` (times where a vector field jumps) as a sorted tuple of distinct finite
    floats (None: ``()``); a traced array is returned as it is."""
    import numpy as np

    if jump_ts is None:
        return ()
    if _is_tracer(jump_ts):
        return jump_ts
    try:
        ts = np.asarray(jump_ts, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        ts = None
    if ts is None or not np.all(np.isfinite(ts)):
        raise ValueError(f"jump_ts = {_show(jump_ts)} must be finite times")
    return tuple(float(x) for x in np.unique(ts))


@overload
def past_jump(t0: float, jump_ts: tuple[float, ...] | None) -> float: ...
@overload
def past_jump(t0: Any, jump_ts: Any) -> Any: ...
def past_jump(t0, jump_ts):
    """``t0``, or the first time after the jump time ``J`` when ``t0`` lies before it by less
    than the integrators' smallest step (``1e-14 * max(1, |t0|)``): no step fits between them,
    and a run starting there failed at once (diffrax's own zero-length step goes on past the
    jump). The callers move the state over that gap with one Euler step. ``jump_ts``: concrete
    times (a tuple) or an array (a traced ``t0`` too)."""
    import jax.numpy as jnp

    if jump_ts is None or (isinstance(jump_ts, tuple) and not jump_ts):
        return t0
    J = jnp.asarray(jump_ts, dtype=float).reshape(-1)
    t = jnp.asarray(t0, dtype=float)
    near = (t < J) & (J - t < 1e-14 * jnp.maximum(1.0, jnp.abs(t)))
    moved = jnp.where(
        jnp.any(near), jnp.nextafter(jnp.max(jnp.where(near, J, -jnp.inf)), jnp.inf), t
    )
    if isinstance(t0, (int, float)) and isinstance(jump_ts, tuple):
        return float(moved)
    return moved


class naming_file:
    """``with naming_file(path): ...``: an ``OSError`` raised inside that names no file (a full
    disk while writing) is re-raised naming ``path``."""

    def __init__(self, path) -> None:
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb) -> bool:
        if isinstance(err, OSError) and err.filename is None:
            import os

            err.filename = os.fspath(self.path)
        return False
