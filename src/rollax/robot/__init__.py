"""Rolling ball and disk robots actuated by internal point masses on rails.

Putkaradze & Rogers, *On the normal force and static friction acting on a rolling ball
actuated by internal point masses*: rolling dynamics (3.2)/(4.1), normal force (3.3)/(4.3),
static friction (3.4)/(4.4), the minimum friction coefficient mu_hat (1.3), detachment at
N = 0 and free flight (Appendix B); optimal rest-to-rest manoeuvres inside the contact envelope
(:func:`optimize`, :func:`least_mu`).

The public names of the robots, gathered from the layers that hold them: the models
(:mod:`rollax.models.robot`: bodies, rails, controls, flight) and the analyses (:mod:`rollax.analysis.robot`: the phases, dense
trajectories, optimal control and the paper's report).
"""

from rollax.analysis.robot.optimal import (
    Manoeuvre,
    Optimum,
    ball_manoeuvre,
    disk_manoeuvre,
    evaluate,
    least_mu,
    optimize,
)
from rollax.analysis.robot.phases import PhaseEnd, detach, fly
from rollax.analysis.robot.robust import Validation, WorstCase, validate, worst_case
from rollax.analysis.robot.uncertain import ParameterBox, parameter_box
from rollax.analysis.robot.report import ExampleReport, example_report
from rollax.analysis.robot.trajectory import (
    Trajectory,
    contact_extrema,
    min_normal_force,
    mu_hat,
    quaternion_drift,
    simulate,
)
from rollax.models.robot.ball import Ball, ConstantForce
from rollax.models.robot.controls import (
    Control,
    PiecewisePolynomialControl,
    RampControl,
    RestToRestControl,
    SplineControl,
    ZeroControl,
)
from rollax.models.robot.disk import Disk
from rollax.models.robot.examples import BALL_THETA0, paper_ball, paper_disk
from rollax.models.robot.flight import (
    BallFlight,
    DiskFlight,
    Landing,
    flight_model,
    plastic_landing,
)
from rollax.models.robot.rails import (
    CircleRail,
    CurveRail,
    EllipseRail,
    FigureEightRail,
    Rail,
    SegmentRail,
    circle_from_spherical,
    duff_basis,
)

__all__ = [
    "BALL_THETA0",
    "PhaseEnd",
    "Ball",
    "BallFlight",
    "ExampleReport",
    "example_report",
    "CircleRail",
    "ConstantForce",
    "Control",
    "CurveRail",
    "Disk",
    "DiskFlight",
    "EllipseRail",
    "FigureEightRail",
    "Landing",
    "PiecewisePolynomialControl",
    "Manoeuvre",
    "Optimum",
    "ParameterBox",
    "Validation",
    "WorstCase",
    "Rail",
    "RampControl",
    "RestToRestControl",
    "ball_manoeuvre",
    "disk_manoeuvre",
    "evaluate",
    "least_mu",
    "optimize",
    "parameter_box",
    "validate",
    "worst_case",
    "SegmentRail",
    "SplineControl",
    "Trajectory",
    "ZeroControl",
    "circle_from_spherical",
    "contact_extrema",
    "detach",
    "duff_basis",
    "flight_model",
    "fly",
    "min_normal_force",
    "plastic_landing",
    "mu_hat",
    "paper_ball",
    "paper_disk",
    "quaternion_drift",
    "simulate",
]
