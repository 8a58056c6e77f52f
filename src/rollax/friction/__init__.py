"""Friction laws of a finite circular contact patch under combined slip and spin.

Exact laws (uniform (56)-(60) and Hertz (61)-(63) pressure), quadrature of (19)-(23) for any
pressure, the linear-ellipsoidal model (64)-(69), the harmonic model (82)-(88), a Pade model,
gradient fitting, limit directions of the codimension-3 discontinuity (Sect. 7.2) and disc/ball
stop simulations. Source: the friction paper of ``docs/references.md``; errata in
``docs/physics-notes.md``.

The public names of the friction paper, gathered from the layers that hold them: the laws and
bodies (:mod:`rollax.models.friction`) and the fits (:mod:`rollax.analysis.friction_fit`); the
stops and reports are :mod:`rollax.analysis.friction`.
"""

from rollax.models.friction.base import AxisymmetricLaw, DirectionLaw, EpsLaw, kappa_for
from rollax.models.friction.coulomb import Coulomb
from rollax.models.friction.exact import ExactHertz, ExactUniform, exact_law
from rollax.models.friction.harmonic import HarmonicModel, harmonic_coefficients
from rollax.models.friction.linear import LinearEllipsoidal, LinearModel
from rollax.models.friction.pade import PadeModel
from rollax.models.friction.limit_directions import PlanarBody, force_free_eps
from rollax.models.friction.sliding import SlidingBody
from rollax.analysis.friction_fit import (
    disc_trajectory,
    fit_error,
    fit_harmonic,
    fit_pade,
    identify_disc,
)
from rollax.models.friction.quadrature import (
    HertzPressure,
    QuadratureLaw,
    UniformPressure,
    pressure_for,
)

__all__ = [
    "PlanarBody",
    "SlidingBody",
    "disc_trajectory",
    "fit_error",
    "fit_harmonic",
    "fit_pade",
    "force_free_eps",
    "identify_disc",
    "AxisymmetricLaw",
    "Coulomb",
    "DirectionLaw",
    "EpsLaw",
    "ExactHertz",
    "ExactUniform",
    "HarmonicModel",
    "HertzPressure",
    "LinearEllipsoidal",
    "LinearModel",
    "PadeModel",
    "QuadratureLaw",
    "UniformPressure",
    "exact_law",
    "harmonic_coefficients",
    "kappa_for",
    "pressure_for",
]
