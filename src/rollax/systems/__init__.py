"""The papers' models as :class:`rollax.AbstractSystem` classes, ready for both integrators.

* :class:`RimRolling`: the basketball rolling on the rim (rim paper, Sect. 5.1), with the
  basin outcomes periodic / in / out;
* :class:`RimSlipping`: the same ball with finite friction, rolling <-> slipping (Sect. 5.2);
* :class:`RimTracked`: the rolling ball with its angle around the rim and the camera
  observables (d, z, alpha), for :func:`rollax.identify`;
* :class:`Robot`: the ball and disk robots, roll -> detach -> fly -> land -> roll again;
* :class:`RollingRobot`: the same robots held to rolling (the system of trajectory optimisation);
* :class:`PennySystem`: the bouncing penny billiard, impact after impact;
* :class:`SlidingStop`: a disc or ball sliding and spinning to a stop under a friction law;
* :class:`Sliding`: the same slide in physical time with its record (slip speed, spin rate);
* :class:`Shot`: the basketball shot from release through rim and board impacts to in or out.
"""

from rollax.systems.rim import RimOutcome, RimRolling, RimSlipping, RimTracked
from rollax.systems.friction import Sliding, SlidingStop
from rollax.systems.penny import PennyOutcome, PennySystem
from rollax.systems.robot import RollingRobot, Robot, RobotOutcome
from rollax.systems.shot import Shot, ShotOutcome

__all__ = [
    "PennyOutcome",
    "PennySystem",
    "RimOutcome",
    "RimRolling",
    "RimSlipping",
    "RimTracked",
    "Robot",
    "RollingRobot",
    "RobotOutcome",
    "Shot",
    "ShotOutcome",
    "Sliding",
    "SlidingStop",
]
