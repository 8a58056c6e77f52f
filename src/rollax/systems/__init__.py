"""The papers' models as :class:`rollax.AbstractSystem` classes, ready for both integrators.

* :class:`RimRolling`: the basketball rolling on the rim (rim paper, Sect. 5.1), with the
  basin outcomes periodic / in / out;
* :class:`RimSlipping`: the same ball with finite friction, rolling <-> slipping (Sect. 5.2);
* :class:`Robot`: the ball and disk robots, roll -> detach -> fly -> land -> roll again;
* :class:`PennySystem`: the bouncing penny billiard, impact after impact;
* :class:`SlidingStop`: a disc or ball sliding and spinning to a stop under a friction law.
"""

from rollax.systems.rim import RimOutcome, RimRolling, RimSlipping
from rollax.systems.friction import SlidingStop
from rollax.systems.penny import PennyOutcome, PennySystem
from rollax.systems.robot import Robot, RobotOutcome

__all__ = ["PennyOutcome", "PennySystem", "RimOutcome", "RimRolling", "RimSlipping", "Robot",
           "RobotOutcome", "SlidingStop"]
