"""rollax: rigid bodies rolling, slipping, separating and colliding under nonholonomic contact.

Differentiable, batched, float64 simulation built on JAX, equinox and diffrax.
Importing rollax enables float64 in JAX (see :mod:`rollax._setup`).

The public API:

* :class:`AbstractSystem`, :class:`Event` (:func:`boundary`, :func:`crossing`),
  :class:`EventKind`: what a system is;
* :func:`solve` (diffrax; differentiable) and :func:`solve_ensemble` (the batched work-queue
  kernel, or on a GPU the fused per-start kernel, whose lowered program
  :func:`fused_program` gives): the two integrators, with one event semantics and one
  :class:`Solution` (:class:`Status`);
* :func:`sweep` over a grid of state components and parameters (:class:`Axis`,
  :class:`SweepResult`), and :func:`classify` (the system's outcome of each run);
* :func:`identify`: parameters and initial state from observed trajectories
  (:class:`Observations`), with error bars (:class:`Fit`, :class:`IdentifiabilityWarning`).
"""

from rollax import _setup  # noqa: F401  (float64 only; devices and cache: rollax.configure)
from rollax._chunks import ChunkWarning, SweepInterrupted
from rollax._config import configure
from rollax._ensemble import fused_program, solve_ensemble
from rollax._eventlog import EventLog
from rollax._identify import Fit, IdentifiabilityWarning, Observations, identify
from rollax._solution import Solution, Status
from rollax._solve import solve
from rollax._sweep import Axis, SweepResult, sweep
from rollax._system import (AbstractSystem, Event, EventKind, boundary, classify, crossing,
                            parameter)

__version__ = "0.1.0"

__all__ = [
    "AbstractSystem", "Axis", "ChunkWarning", "Event", "EventKind", "EventLog", "Fit",
    "IdentifiabilityWarning", "Observations", "Solution", "Status", "SweepInterrupted",
    "SweepResult", "boundary", "classify", "configure", "crossing", "fused_program", "identify",
    "parameter",
    "solve", "solve_ensemble", "sweep",
]
