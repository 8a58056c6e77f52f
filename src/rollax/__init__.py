"""rollax: rigid bodies rolling, slipping, separating and colliding under nonholonomic contact.

Differentiable, batched, float64 simulation built on JAX, equinox and diffrax.
Importing rollax enables float64 in JAX and its persistent compile cache (see
:mod:`rollax._core._setup`). The names below are
loaded on first use (PEP 562), so ``import rollax`` and ``rollax --help`` do not load JAX.

The public API:

* :class:`AbstractSystem`, :class:`Event` (:func:`boundary`, :func:`crossing`),
  :class:`EventKind`: what a system is;
* :func:`solve` (diffrax; differentiable) and :func:`solve_ensemble` (the batched work-queue
  kernel, or on a GPU the fused per-start kernel, whose lowered program
  :func:`fused_program` gives): the two integrators, with one event semantics and one
  :class:`Solution` (:class:`Status`);
* :func:`sweep` over a grid of state components and parameters (:class:`Axis`,
  :class:`SweepResult`), and :func:`classify` (the system's outcome of each run);
* :func:`parameter_ranges`: the declared uncertainty of a system's parameters
  (:class:`ParameterRange`; ``parameter(..., uncertain=(lo, hi), source=...)``);
* :func:`identify`: parameters and initial state from observed trajectories
  (:class:`Observations`), with error bars (:class:`Fit`, :class:`IdentifiabilityWarning`);
* :func:`design`: which experiment to run next, ranked by expected information
  (:class:`Design`), :func:`discriminate` (which start tells two models apart,
  :class:`Discrimination`), :func:`refine_design` (by gradient) and :func:`sequential_design` (the
  design-run-fit loop), :func:`simulate_record` (a noisy record of a start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rollax._core import _setup  # noqa: F401  (float64 and the compile cache; devices: configure)

from importlib.metadata import PackageNotFoundError, version

try:  # the installed distribution's version (pyproject.toml), not a copy of it
    __version__ = version("rollax")
except PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0.0.0+unknown"

# public name -> the private module that defines it
_EXPORTS = {
    "StoreWarning": "rollax._drivers._store",
    "SweepInterrupted": "rollax._drivers._chunks",
    "configure": "rollax._core._config",
    "fused_program": "rollax._integrate._ensemble",
    "solve_ensemble": "rollax._integrate._ensemble",
    "EventLog": "rollax._core._eventlog",
    "Fit": "rollax._drivers._identify",
    "IdentifiabilityWarning": "rollax._drivers._identify",
    "Observations": "rollax._drivers._identify",
    "identify": "rollax._drivers._identify",
    "Design": "rollax._drivers._design",
    "design": "rollax._drivers._design",
    "Discrimination": "rollax._drivers._design",
    "discriminate": "rollax._drivers._design",
    "refine_design": "rollax._drivers._design",
    "sequential_design": "rollax._drivers._design",
    "simulate_record": "rollax._drivers._design",
    "Solution": "rollax._core._solution",
    "Status": "rollax._core._solution",
    "solve": "rollax._integrate._solve",
    "Axis": "rollax._drivers._sweep",
    "SweepResult": "rollax._drivers._sweep",
    "sweep": "rollax._drivers._sweep",
    "AbstractSystem": "rollax._core._system",
    "Event": "rollax._core._system",
    "EventKind": "rollax._core._system",
    "boundary": "rollax._core._system",
    "classify": "rollax._core._system",
    "crossing": "rollax._core._system",
    "parameter": "rollax._core._system",
    "ParameterRange": "rollax._core._system",
    "parameter_ranges": "rollax._core._system",
}

__all__ = [
    "AbstractSystem",
    "Axis",
    "Design",
    "Discrimination",
    "StoreWarning",
    "Event",
    "EventKind",
    "EventLog",
    "Fit",
    "IdentifiabilityWarning",
    "Observations",
    "ParameterRange",
    "Solution",
    "Status",
    "SweepInterrupted",
    "SweepResult",
    "boundary",
    "classify",
    "configure",
    "crossing",
    "design",
    "discriminate",
    "fused_program",
    "identify",
    "parameter",
    "parameter_ranges",
    "refine_design",
    "sequential_design",
    "simulate_record",
    "solve",
    "solve_ensemble",
    "sweep",
]


def __getattr__(name: str):
    """A public name, or a submodule (``rollax.models.rim``), loaded on first use."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        if getattr(value, "__module__", None) == module:
            # help() and reprs name the public path (rollax.solve), not the private module
            # (pickles resolve it through this function)
            value.__module__ = __name__
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # what the loaders above give, for type checkers and editors
    from rollax._drivers._chunks import SweepInterrupted
    from rollax._drivers._store import StoreWarning
    from rollax._core._config import configure
    from rollax._integrate._ensemble import fused_program, solve_ensemble
    from rollax._core._eventlog import EventLog
    from rollax._drivers._identify import Fit, IdentifiabilityWarning, Observations, identify
    from rollax._drivers._design import (
        Design,
        Discrimination,
        design,
        discriminate,
        refine_design,
        sequential_design,
        simulate_record,
    )
    from rollax._core._solution import Solution, Status
    from rollax._integrate._solve import solve
    from rollax._drivers._sweep import Axis, SweepResult, sweep
    from rollax._core._system import (
        AbstractSystem,
        Event,
        EventKind,
        boundary,
        classify,
        ParameterRange,
        crossing,
        parameter,
        parameter_ranges,
    )
