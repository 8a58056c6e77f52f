"""rollax: rigid bodies rolling, slipping, separating and colliding under nonholonomic contact.

Differentiable, batched, float64 simulation built on JAX, equinox and diffrax.
Importing rollax enables float64 in JAX (see :mod:`rollax._setup`).

The public API:

* :class:`AbstractSystem`, :class:`Event` (:func:`boundary`, :func:`crossing`),
  :class:`EventKind`: what a system is;
* :func:`solve` (diffrax; differentiable) and :func:`solve_ensemble` (the batched work-queue
  kernel): the two integrators, with one event semantics and one :class:`Solution`
  (:class:`Status`).
"""

from rollax import _setup  # noqa: F401  (float64, CPU devices, compile cache)
from rollax._ensemble import solve_ensemble
from rollax._solution import Solution, Status
from rollax._solve import solve
from rollax._system import AbstractSystem, Event, EventKind, boundary, crossing, parameter

__version__ = "0.1.0"

__all__ = [
    "AbstractSystem", "Event", "EventKind", "Solution", "Status", "boundary", "crossing",
    "parameter", "solve", "solve_ensemble",
]
