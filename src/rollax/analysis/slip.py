"""One hybrid rolling/slipping run of the ball on the rim (Sect. 5.2.2) on :func:`rollax.solve`;
the batched runs are :func:`rollax.analysis.basin.simulate` with ``slip=``."""

from __future__ import annotations

import jax.numpy as jnp

from rollax._integrate._solve import solve
from rollax.models import slip as _slip
from rollax.models.rim import Rim
from rollax.systems.rim import RimSlipping, slip_max_resets, slip_result


def simulate_slip(
    rim: Rim,
    y0,
    settings: "_slip.SlipSettings | None" = None,
    *,
    mode0: int = _slip.ROLLING,
    t_max: float = 60.0,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    max_steps: int = 8192,
) -> "_slip.HybridResult":
    """One hybrid rolling/slipping run (Sect. 5.2.2) of :class:`RimSlipping` on
    :func:`rollax.solve`. ``y0``: a rolling state ``(beta, w1, w2, w3)`` or a 6-D state (then
    ``mode0`` says whether it rolls or slips); ``max_steps`` bounds each phase. ``jit``/``vmap``
    compatible. Returns a :class:`rollax.models.slip.HybridResult`."""
    system = RimSlipping.from_settings(rim, settings or _slip.SlipSettings())
    y0 = jnp.asarray(y0, dtype=float)
    if y0.shape == (4,):
        y0 = RimSlipping.rolling_start(y0)
    if y0.shape != (6,):
        raise ValueError(f"y0 has shape {y0.shape}; allowed: (4,) rolling or (6,) (x, u1, u3)")
    if isinstance(mode0, int) and mode0 not in (_slip.ROLLING, _slip.SLIPPING):
        raise ValueError(f"mode0 = {mode0!r} must be ROLLING (0) or SLIPPING (1)")
    sol = solve(
        system,
        y0,
        0.0,
        t_max,
        mode=mode0,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        max_resets=slip_max_resets(system),
    )
    return slip_result(system, sol)
