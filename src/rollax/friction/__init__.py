"""Friction laws of a finite circular contact patch under combined slip and spin.

Exact laws (uniform (56)-(60) and Hertz (61)-(63) pressure), quadrature of (19)-(23) for any
pressure, the linear-ellipsoidal model (64)-(69), the harmonic model (82)-(88), a Pade model,
gradient fitting, limit directions of the codimension-3 discontinuity (Sect. 7.2) and disc/ball
stop simulations. Source: the friction paper of ``docs/references.md``; errata in
``docs/physics-notes.md``.
"""

from rollax.friction.base import AxisymmetricLaw, DirectionLaw, EpsLaw, kappa_for
from rollax.friction.coulomb import Coulomb
from rollax.friction.exact import ExactHertz, ExactUniform, exact_law
from rollax.friction.harmonic import HarmonicModel, harmonic_coefficients
from rollax.friction.linear import LinearEllipsoidal, LinearModel
from rollax.friction.pade import PadeModel
from rollax.friction.quadrature import HertzPressure, QuadratureLaw, UniformPressure, pressure_for

__all__ = [
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
