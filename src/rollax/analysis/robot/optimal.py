"""Optimal rest-to-rest manoeuvres of ball and disk robots inside a contact envelope.

Direct optimal control by gradient through :func:`rollax.solve`. The robot (Putkaradze &
Rogers, *On the normal force and static friction acting on a rolling ball actuated by internal
point masses*, Sects. 3-6) starts at rest; the rail accelerations ``u_i = theta_i''`` are
cubic splines on ``K`` uniform knots of the normalised time ``s = t / T`` with ``int_0^T u_i
dt = 0`` (:class:`~rollax.robot.RestToRestControl`), so the masses end at rest exactly. The
problem is

    min  C                                                  (or the least mu, see least_mu)
    s.t. disk: phi(T) = phi_T, phi'(T) = 0;  ball: (x, y)(T) = target, Omega(T) = 0
         N(t) >= N_min, |f_s(t)| <= mu N(t)   on a uniform grid of n_grid times,
         theta_i(t) inside the rail's domain  (rails with ends: SegmentRail, CurveRail),

with N from (3.3) / (4.3) and f_s from (3.4) / (4.4), and the cost ``C`` one of

* ``effort``: ``J = int_0^T sum_i u_i^2 dt`` (exact, a quadratic form of the knot values);
* ``energy``: ``E + ENERGY_EFFORT J`` with ``E = int_0^T sum_i m_i |v_i|^2 dt``, ``v_i =
  zeta_i'(theta_i) theta_i'`` mass i's velocity relative to the body. ``E`` is twice the time
  integral of the masses' kinetic energy relative to the body, and ``c E`` the energy that a
  viscous drag ``-c m_i v_i`` along the rails dissipates: what moving the masses costs. (The
  net work of the drives measures nothing of the kind: with everything at rest at both ends
  it is the change of potential energy, whatever the motion in between.) It is a sum of
  squares, integrated by 5 Gauss-Legendre points per knot interval with ``theta'``,
  ``theta`` from the spline's exact integrals (exact on circular rails: ``theta'`` is
  quartic in t there). ``E`` alone is least for rates that jump at 0 and T (unbounded
  accelerations, resolved only by the knots): the effort term makes the optimum smooth and
  unique, and raises ``E`` above the least ``E`` by at most ``ENERGY_EFFORT`` times the
  effort of the least-``E`` control (both on the same knots). Measured on the disk below,
  K = 8: E = 0.9082 with J = 5.80 (so E is within 0.006 of its least value), against
  E = 1.3841, J = 1.2900 at the least effort.
* ``time``: ``T + TIME_EFFORT J``, ``T`` a variable, ``log(T / T_0)`` within ``+-
  log(TIME_RANGE)`` (``T_0``: the manoeuvre's T, the first guess), the knot values scaled by
  ``(T_0 / T)^2`` so that a change of T runs the masses along the same paths, faster or
  slower. The effort term picks one control among the many that reach the least T, and
  raises T above the least T by at most ``TIME_EFFORT`` times the effort of a least-T
  control. Measured on the disk below, K = 8: T = 7.4761 (J = 25.0; 135 SQP iterations, 89
  more on the refined grid) against T = 7.4596 (J = 87.4; 500 iterations, the limit, and
  500 more) with no effort term; the momentum bound is T >= 6.96.

The energy and time costs start from the least-effort manoeuvres in ``T_0``: feasible points,
near a good optimum. Measured: from no motion, the time cost's first SQP step shortens T to
T_0 / e (the constraints do not depend on T to first order there) and the run ends
infeasible (violation 1.75 after 500 iterations); the energy cost (K = 4, 51 grid times)
ends at a local optimum with E = 4.20, against E = 1.33 from the least-effort manoeuvre
(E = 1.75 there). "The disk below": the Sect. 5 disk turned by ``-pi`` in ``T_0 = 8`` with
``mu = 0.2``, ``N >= 0.5``.

Before any solve, :func:`optimize` and :func:`least_mu` check the necessary conditions of
:mod:`rollax.analysis.robot.feasibility` (the friction impulse bound on the CM's travel,
``n_min <= M g``, rail starts), in plain NumPy; a request that fails one is answered at once
``infeasible`` with the bound in ``Optimum.message``. ``time_limit`` stops the SQP early
(``not converged``, the best point so far).

The problem is solved by sequential quadratic programming (SciPy's SLSQP on JAX-compiled
values and forward-mode Jacobians; see :mod:`rollax._drivers._nlp` for why, with the measurements).
The dynamics are the rolling equations throughout (:class:`rollax.systems.RollingRobot`), run
in ``s`` (so the kinks of the control stay at ``s = k / K`` when T varies): a control that
would make the body hop violates ``N >= N_min`` and the optimiser removes it.

The authors solved this optimal control problem (without the contact envelope) by Pontryagin's
principle and continuation (Putkaradze & Rogers 2017, arXiv:1708.03829).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
import numpy as np
from jaxtyping import Array, Float

from rollax._drivers import _nlp
from rollax.analysis.robot.feasibility import necessary_conditions
from rollax._core._solution import Status
from rollax._integrate._solve import solve
from rollax._core._system import AbstractSystem
from rollax._core._validate import check_integer, check_range, real_array
from rollax.models.robot.ball import Ball
from rollax.models.robot.controls import (
    RestToRestControl,
    _integrals,
    _rest_basis,
    _spline_operators,
)
from rollax.models.robot.disk import Disk
from rollax.models.robot.quaternion import rotation_matrix
from rollax.models.robot.rails import CurveRail, SegmentRail

#: Regularisation of the least-mu problem: mu + LEAST_MU_EFFORT * J (picks one control among
#: the many that reach the least mu; shifts mu by ~1e-4 J / (dmu/dJ), far below the tolerances).
LEAST_MU_EFFORT = 1e-5
#: The costs :func:`optimize` minimises (see the module docstring).
COSTS = ("effort", "energy", "time")
#: Regularisation of the energy cost: E + ENERGY_EFFORT * J (module docstring).
ENERGY_EFFORT = 1e-3
#: Regularisation of the time cost: T + TIME_EFFORT * J (module docstring).
TIME_EFFORT = 1e-3
#: The time cost seeks T in [T_0 / TIME_RANGE, TIME_RANGE * T_0], T_0 the manoeuvre's T.
TIME_RANGE = 4.0
#: The values of ``Optimum.status``: the SQP converged; the manoeuvre is infeasible (a
#: necessary condition fails before any solve, ``iterations = 0``, or the SQP met no feasible
#: point); the SQP stopped (iteration or time limit) at a feasible point, or at the time
#: limit at any point, without converging.
STATUSES = ("converged", "infeasible", "not converged")


class Manoeuvre(eqx.Module):
    """A rest-to-rest manoeuvre of ``model`` (a :class:`Disk` or :class:`Ball`) in time ``T``
    from rail coordinates ``theta0``, inside the contact envelope ``N >= n_min``,
    ``|f_s| <= mu N``.

    ``target``: the disk's rotation angle ``(phi_T,)``; the ball's contact point ``(x, y)``,
    optionally with a heading ``(x, y, psi)`` (the angle of the body axis E1 projected on the
    floor, from e1). ``mu = inf`` drops the friction constraint, ``n_min = -inf`` the normal
    force constraint.
    """

    model: Ball | Disk
    theta0: Float[Array, " n"] = eqx.field(converter=real_array("theta0"))
    T: Float[Array, ""] = eqx.field(converter=real_array("T"))
    target: Float[Array, " k"] = eqx.field(converter=real_array("target"))
    mu: Float[Array, ""] = eqx.field(converter=real_array("mu"), default=math.inf)
    n_min: Float[Array, ""] = eqx.field(converter=real_array("n_min"), default=-math.inf)

    def __check_init__(self):
        if not isinstance(self.model, (Ball, Disk)):
            raise ValueError(
                f"model = {type(self.model).__name__} is not allowed: it must be a "
                "rollax.robot.Ball or Disk"
            )
        n = self.model.n
        if jnp.shape(self.theta0) != (n,):
            raise ValueError(
                f"theta0 has shape {jnp.shape(self.theta0)}; the model has {n} "
                f"masses (allowed: shape ({n},))"
            )
        check_range("theta0", self.theta0, -math.inf, math.inf, lo_open=True, hi_open=True)
        check_range("T", self.T, 0.0, math.inf, lo_open=True, hi_open=True)
        shapes = ((1,),) if isinstance(self.model, Disk) else ((2,), (3,))
        if jnp.shape(self.target) not in shapes:
            what = "(phi_T,)" if isinstance(self.model, Disk) else "(x, y) or (x, y, heading)"
            raise ValueError(f"target has shape {jnp.shape(self.target)}; allowed: {what}")
        check_range("target", self.target, -math.inf, math.inf, lo_open=True, hi_open=True)
        check_range("mu", self.mu, 0.0, math.inf)
        if not isinstance(self.model.total_mass, Tracer):
            # (n_min above M g is infeasible, not malformed: optimize reports it)
            check_range("n_min", self.n_min, -math.inf, math.inf, hi_open=True)
            if float(self.model.g) == 0.0 and math.isfinite(float(self.n_min)):
                raise ValueError(
                    f"n_min = {float(self.n_min)!r} is not allowed with g = 0 (no "
                    "weight): use n_min = -inf"
                )

    @property
    def weight(self):
        """The static weight ``M g`` (the mean of N over any rest-to-rest manoeuvre)."""
        return self.model.total_mass * self.model.g

    @property
    def y0(self) -> Float[Array, " d"]:
        return self.model.initial_state(self.theta0)


def disk_manoeuvre(
    phi_T: float = -math.pi, T: float = 5.0, mu: float = 0.3, n_min: float = 0.5
) -> Manoeuvre:
    """The disk of Sect. 5 (r = m0 = d2 = g = 1, four unit masses on circles of radii 0.9,
    0.6333, 0.3667, 0.1) at rest with ``theta_i = -pi/2`` (5.6), turned to ``phi_T`` in ``T``."""
    from rollax.models.robot.examples import paper_disk

    ex = paper_disk()
    return Manoeuvre(ex.model, ex.y0[: ex.model.n], T, (phi_T,), mu, n_min)


def ball_manoeuvre(
    target=(1.0, 0.5), T: float = 5.0, mu: float = 0.3, n_min: float = 0.5
) -> Manoeuvre:
    """The ball of Sect. 6 (r = m0 = g = 1, d = (0.9, 1, 1.1), zeta0 = (0, 0, -0.05), three unit
    masses on the rails (6.8)-(6.10)) at rest at the angles of Table 6.2, moved to ``target``."""
    from rollax.models.robot.examples import paper_ball

    ex = paper_ball()
    return Manoeuvre(ex.model, ex.y0[: ex.model.n], T, target, mu, n_min)


def _rolling(model, control):
    # imported here: rollax.systems imports rollax.robot's models (a module-level import cycles)
    from rollax.systems.robot import RollingRobot

    return RollingRobot(model, control)


class _Normalised(AbstractSystem):
    """``system`` run for a duration ``T`` in the normalised time ``s = t / T``: ``dy/ds = T
    f(T s, y)``, with the control's kinks at the fixed ``kinks`` in ``s``. Why: the time cost
    varies T, and the kinks at ``t = T k / K`` would move with it; diffrax's clipping of the
    steps at jump times does not carry their derivative (measured: d y / d T off by ~1e-4
    after the kinks at rtol 1e-12, exact to 4e-8 with the kinks fixed in s)."""

    system: AbstractSystem
    T: Float[Array, ""]
    kinks: tuple[float, ...] = eqx.field(static=True)

    @property
    def state_names(self):
        return self.system.state_names

    def jump_times(self):
        return self.kinks

    def vector_field(self, s, y, mode):  # pyright: ignore[reportIncompatibleMethodOverride]  (s: t / T)
        return self.T * self.system.vector_field(self.T * s, y, mode)


class _NLPProblem(eqx.Module):
    """What :func:`_fun` needs: the manoeuvre (traced) and the discretisation (static)."""

    man: Manoeuvre
    K: int = eqx.field(static=True)
    n_grid: int = eqx.field(static=True)
    free_mu: bool = eqx.field(static=True)
    rtol: float = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    forward: bool = eqx.field(static=True, default=True)  # forward-mode differentiation
    cost: str = eqx.field(static=True, default="effort")
    # robust problems (rollax.analysis.robot.robust): the uncertain parameters' paths
    # (ParameterBox.paths), their samples P (S, d; row 0 the nominal values), how the
    # samples' contact constraints combine (probability None: every sample; p: a CVaR chance
    # constraint) and the terminal conditions ("nominal", "mean" or "every")
    paths: tuple = eqx.field(static=True, default=())
    P: Any = None
    probability: float | None = eqx.field(static=True, default=None)
    terminal: str = eqx.field(static=True, default="mean")

    def T(self, x):
        """The duration: the manoeuvre's, or for the time cost ``T_0 exp(x[-1])`` (``T_0``:
        the manoeuvre's T)."""
        return self.man.T * jnp.exp(x[-1]) if self.cost == "time" else self.man.T

    def coords(self, x):
        """``v`` (shape ``(K, n)``) with ``z = C^{-T} v``, ``C C^T`` the Gram matrix of the
        effort, so that ``J = T |v|^2`` (a well-conditioned objective): ``v = w``, the first
        ``K n`` variables, or for the time cost ``v = (T_0 / T)^2 w`` (so that a change of T
        runs the masses along the same paths, faster or slower)."""
        w = x[: self.K * self.man.model.n].reshape(self.K, self.man.model.n)
        return (self.man.T / self.T(x)) ** 2 * w if self.cost == "time" else w

    def control(self, x) -> RestToRestControl:
        """The control of the variables ``x = (w, [s or log(T / T_0)])``."""
        return RestToRestControl(jnp.asarray(_whitening(self.K)) @ self.coords(x), self.T(x))

    def mu(self, x):
        return x[-1] ** 2 if self.free_mu else self.man.mu

    def objective(self, x):
        """Residuals whose squares sum to the objective: ``J`` (effort), ``E + eps J``
        (energy), ``T + eps J`` (time) or ``mu + eps J`` (least mu)."""
        T = self.T(x)
        effort = jnp.sqrt(T) * self.coords(x).ravel()
        if self.free_mu:
            return jnp.concatenate([x[-1:], math.sqrt(LEAST_MU_EFFORT) * effort])
        if self.cost == "energy":
            return jnp.concatenate(
                [_drag_residuals(self.man, self.control(x)), math.sqrt(ENERGY_EFFORT) * effort]
            )
        if self.cost == "time":  # over T_0: unit curvature in log(T / T_0) at the start
            return jnp.concatenate([jnp.sqrt(T)[None], math.sqrt(TIME_EFFORT) * effort]) / jnp.sqrt(
                self.man.T
            )
        return effort

    def run(self, control, s, man: Manoeuvre | None = None):
        """The rolling motion under ``control`` at the normalised times ``s`` of ``[0, 1]``
        (of ``man``, by default the problem's manoeuvre)."""
        man = self.man if man is None else man
        system = _Normalised(
            _rolling(man.model, control),
            control.T,
            tuple(k / control.K for k in range(control.K + 1)),
        )
        # forward mode: SQP needs the Jacobian of every constraint (one pass per variable)
        adjoint = "forward" if self.forward else "reverse"
        return solve(
            system,
            man.y0,
            0.0,
            1.0,
            ts=s,
            rtol=self.rtol,
            atol=self.rtol,
            max_steps=self.max_steps,
            adjoint=adjoint,
        )


@functools.lru_cache(maxsize=None)
def _drag_quadrature(K: int) -> tuple:
    """Gauss-Legendre weights ``w`` (5 points per knot interval of ``s = t / T``) and ``(A1,
    A2)`` with ``theta'(t_q) = T A1 z``, ``theta(t_q) = theta_0 + T^2 A2 z`` for the
    :class:`RestToRestControl` of coordinates ``z`` started at rest (NumPy)."""
    g, gw = np.polynomial.legendre.leggauss(5)
    s = ((np.arange(K)[:, None] + (g + 1) / 2) / K).ravel()
    B = _rest_basis(K)
    A1, A2 = _integrals(K, s)
    return np.tile(gw / (2 * K), K), A1 @ B, A2 @ B


def _drag_residuals(man: Manoeuvre, control: RestToRestControl):
    """Residuals whose squares sum to the energy cost ``E = int_0^T sum_i m_i |zeta_i'
    (theta_i)|^2 theta_i'^2 dt`` (module docstring): ``sqrt(T w_q m_i) zeta_i'(theta_i)
    theta_i'`` at the quadrature points (exact for circular rails: ``theta'`` is quartic on
    each knot interval, so the integrand is of degree 8 and 5 Gauss points suffice)."""
    w, A1, A2 = (jnp.asarray(a) for a in _drag_quadrature(control.K))
    T = control.T
    rate = T * (A1 @ control.z)  # (points, n)
    theta = man.theta0 + T**2 * (A2 @ control.z)
    tangent = jnp.stack(
        [
            jax.vmap(lambda th, rail=rail: rail(th)[1])(theta[:, i])
            for i, rail in enumerate(man.model.rails)
        ],
        axis=1,
    )  # (points, n, 3)
    scale = jnp.sqrt(T * w)[:, None] * jnp.sqrt(man.model.masses)[None, :]
    return ((scale * rate)[:, :, None] * tangent).ravel()


def _cost(kind: str, man: Manoeuvre, control: RestToRestControl):
    """The cost of ``control`` without regularisation: the effort ``J``, the energy ``E`` or
    the duration ``T``."""
    if kind == "energy":
        r = _drag_residuals(man, control)
        return r @ r
    return control.T if kind == "time" else control.effort()


@functools.lru_cache(maxsize=None)
def _whitening(K: int) -> np.ndarray:
    """``C^{-T}`` (NumPy, ``(K, K)``) with ``C C^T = B^T Q B``: the Gram matrix of the effort
    in the rest-to-rest coordinates of :class:`RestToRestControl`."""
    _, _, Q = _spline_operators(K)
    B = _rest_basis(K)
    C = np.linalg.cholesky(B.T @ Q @ B)
    return np.linalg.inv(C.T)


def _terminal(man: Manoeuvre, y):
    """The terminal equality constraints at ``y = y(T)``."""
    model = man.model
    if isinstance(model, Disk):
        _, _, phi, phid = model.split(y)
        return jnp.stack([phi - man.target[0], phid])
    _, _, q, Om, z = model.split(y)
    out = [z - man.target[:2], Om]
    if man.target.shape[0] == 3:
        e1 = rotation_matrix(q)[:, 0]  # body E1 in space
        psi = man.target[2]
        out.append((e1[0] * jnp.sin(psi) - e1[1] * jnp.cos(psi))[None])
    return jnp.concatenate(out)


def _path(man: Manoeuvre, control, mu, ts, ys):
    """Path constraints ``<= 0`` on the grid, per unit weight: ``N_min - N``, ``|f_s| - mu N``,
    and the rail limits (rails with ends)."""
    W = man.weight
    N, F_h = jax.vmap(lambda t, y: man.model.contact_forces(t, y, control))(ts, ys)
    fs = jnp.sqrt(jnp.sum(F_h**2, axis=1) + (1e-9 * W) ** 2)  # smooth at f_s = 0 (inactive)
    off = -jnp.ones_like(N)
    g_N = jnp.where(jnp.isfinite(man.n_min), (man.n_min - N) / W, off)
    g_f = jnp.where(jnp.isfinite(mu), (fs - jnp.where(jnp.isfinite(mu), mu, 0.0) * N) / W, off)
    out = [g_N, g_f]
    theta = ys[:, : man.model.n]
    for i, rail in enumerate(man.model.rails):
        if isinstance(rail, (SegmentRail, CurveRail)):
            lo, hi = rail.domain
            out += [(lo - theta[:, i]) / (hi - lo), (theta[:, i] - hi) / (hi - lo)]
    return jnp.concatenate(out)


def _one(prob: _NLPProblem, control, mu, man: Manoeuvre):
    """``(h, g)``: the terminal and path constraints of ``man`` under ``control``."""
    s = jnp.linspace(0.0, 1.0, prob.n_grid)
    ts = control.T * s
    sol = prob.run(control, s, man)
    bad = jnp.where(sol.status == Status.T_MAX, 0.0, jnp.nan)  # a failed solve: nan, rejected
    return _terminal(man, sol.y) + bad, _path(man, control, mu, ts, sol.ys) + bad


#: Sharpness of the smooth maximum over a sample's path constraints in a chance constraint:
#: ``CHANCE_TAU log sum exp(g / CHANCE_TAU)`` lies within ``CHANCE_TAU log(rows)`` (about
#: 1e-3 of the weight on 801 rows) above the maximum: conservative, and smooth for SQP.
CHANCE_TAU = 1e-4


def _sample_values(prob: _NLPProblem, control, mu):
    """Every sample's ``(h, g)`` (shapes ``(S, ...)``): the manoeuvre with the sample's
    parameter values (:func:`rollax.analysis.robot.uncertain.apply_paths`); the least-mu
    problem's ``mu`` (a variable) for every sample."""
    from rollax.analysis.robot.uncertain import apply_paths

    def one(p):
        man = apply_paths(prob.paths, prob.man, p)
        return _one(prob, control, mu if prob.free_mu else man.mu, man)

    return jax.vmap(one)(prob.P)


def _robust(prob: _NLPProblem, H, G):
    """The robust problem's ``(h, g)`` from every sample's (module docstring of
    :mod:`rollax.analysis.robot.robust`): the terminal conditions at the nominal values
    (sample 0), in the mean, or for every sample; the path constraints for every sample, or
    the chance constraint ``CVaR_{1-p}(G_s) <= 0`` on the samples' smooth maxima ``G_s``
    (the mean of the ``ceil((1 - p) S)`` largest: at most that many minus one samples fail)."""
    h = {"nominal": H[0], "mean": jnp.mean(H, axis=0), "every": H.ravel()}[prob.terminal]
    if prob.probability is None:
        return h, G.ravel()
    S = G.shape[0]
    k = max(1, math.ceil((1.0 - prob.probability) * S - 1e-9))
    smooth = CHANCE_TAU * jax.scipy.special.logsumexp(G / CHANCE_TAU, axis=1)
    worst, _ = jax.lax.top_k(smooth, k)
    return h, jnp.mean(worst)[None]


def _values(prob: _NLPProblem, control, mu):
    if prob.paths:
        return _robust(prob, *_sample_values(prob, control, mu))
    return _one(prob, control, mu, prob.man)


def _fun(x, prob: _NLPProblem):
    """``(r, h, g)`` of the nonlinear programme (objective ``|r|^2``) for
    :func:`rollax._drivers._nlp.minimize`."""
    h, g = _values(prob, prob.control(x), prob.mu(x))
    if prob.cost == "time":  # log(T / T_0) within +- log(TIME_RANGE)
        bound = math.log(TIME_RANGE)
        g = jnp.concatenate([g, jnp.stack([-bound - x[-1], x[-1] - bound])])
    return prob.objective(x), h, g


def evaluate(
    manoeuvre: Manoeuvre,
    control: RestToRestControl,
    *,
    cost: str = "effort",
    n_grid: int = 201,
    rtol: float = 1e-8,
    forward_mode: bool = True,
):
    """``(C, h, g)`` of a control for ``manoeuvre`` (run for the control's ``T``): the cost
    ``C`` (``cost="effort"``: ``J = int sum u^2 dt``; ``"energy"``: ``E``; ``"time"``: ``T``;
    module docstring), the terminal conditions (disk: ``phi(T) - phi_T``, ``phi'(T)``; ball:
    ``z(T) - target``, ``Omega(T)`` [, heading]) and the path constraints ``<= 0`` on
    ``n_grid`` uniform times (per unit weight: ``N_min - N``, ``|f_s| - mu N``, rail limits).
    Differentiable with respect to the control and the manoeuvre's arrays:
    ``forward_mode=True`` for ``jax.jacfwd`` (what the optimiser uses), ``False`` for reverse
    mode (``jax.grad``)."""
    _check_cost(cost)
    prob = _NLPProblem(manoeuvre, control.K, n_grid, False, float(rtol), 16384, forward_mode)
    h, g = _values(prob, control, manoeuvre.mu)
    return _cost(cost, manoeuvre, control), h, g


def _check_cost(cost) -> str:
    if not (isinstance(cost, str) and cost in COSTS):
        raise ValueError(
            f"cost = {cost!r} is not allowed: it must be one of {', '.join(map(repr, COSTS))}"
        )
    return cost


class Optimum(eqx.Module):
    """The result of :func:`optimize` (or :func:`least_mu`): the best start's control and how
    the optimisation went. :meth:`sample` re-simulates it on a dense grid."""

    manoeuvre: Manoeuvre  # with the optimal T for the time cost
    control: RestToRestControl
    cost_kind: str  # "effort", "energy" or "time" (least_mu: "effort", its regularisation)
    cost: float  # of the best start: J (effort), E (energy) or T (time), unregularised
    effort: float  # J = int sum u^2 dt
    energy: float  # E = int sum m_i |zeta_i'|^2 theta_i'^2 dt
    mu: float  # the friction coefficient of the envelope (the least mu for least_mu)
    converged: bool
    feasible: bool
    status: str  # one of STATUSES: "converged", "infeasible" or "not converged"
    violation: float  # max constraint violation (per unit weight for the path constraints)
    kkt: float  # |grad of the Lagrangian|_inf / max(1, |f|)
    iterations: int  # SQP iterations of the best start
    evaluations: int  # simulations (each with its Jacobian) of the best start
    wall_time: float  # seconds, all starts
    message: str  # SLSQP's exit message, "time limit reached", or the necessary condition failed
    start_costs: np.ndarray  # the cost of every start (nan: not feasible)
    start_converged: np.ndarray
    history: Any  # rollax._drivers._nlp.History of the best start's run
    # the distinct local optima the starts reached, best first: dicts of cost, starts (how
    # many reached it) and converged (how many of those converged); see _distinct
    optima: tuple = ()
    # robust problems (optimize(uncertain=...)): the box, samples, the nominal optimum's cost,
    # the worst case found and the rounds (rollax.analysis.robot.robust); None otherwise
    robust: Any = None

    def sample(self, n: int = 1001, rtol: float = 1e-10) -> dict:
        """Re-simulate on ``n`` uniform times of ``[0, T]``: ``t``, ``theta``, ``theta_dot``,
        ``theta_ddot`` (shape ``(n, masses)``), ``N``, ``f_s``, ``ratio`` (``|f_s|/N``), the
        body's state (disk: ``phi``, ``phi_dot``, ``x = -r phi``; ball: ``x``, ``y``,
        ``Omega``) and the final state ``y_T``."""
        n = check_integer("n", n, 2)
        man, c = self.manoeuvre, self.control
        ts = man.T * jnp.linspace(0.0, 1.0, n)
        sol = solve(
            _rolling(man.model, c), man.y0, 0.0, man.T, ts=ts, rtol=rtol, atol=rtol, max_steps=65536
        )
        ys = sol.ys
        assert ys is not None  # (saved at ts)
        N, F_h = jax.vmap(lambda t, y: man.model.contact_forces(t, y, c))(ts, ys)
        fs = jnp.sqrt(jnp.sum(F_h**2, axis=1))
        m = man.model.n
        out = dict(
            t=ts,
            theta=ys[:, :m],
            theta_dot=ys[:, m : 2 * m],
            theta_ddot=jax.vmap(c)(ts),
            N=N,
            f_s=fs,
            ratio=fs / N,
            y_T=sol.y,
        )
        if isinstance(man.model, Disk):
            out.update(
                phi=ys[:, 2 * m],
                phi_dot=ys[:, 2 * m + 1],
                x=-man.model.radius * ys[:, 2 * m],
                F_h=F_h[:, 0],
            )
        else:
            out.update(x=ys[:, -2], y=ys[:, -1], Omega=ys[:, 2 * m + 4 : 2 * m + 7], F_h=F_h)
        return {k: np.asarray(v) for k, v in out.items()}

    def to_dict(self, n: int = 1001) -> dict:
        """Everything needed to re-simulate the manoeuvre with another integrator (JSON-ready
        after :func:`rollax.cli._args.dumps`): the samples of :meth:`sample`, the knot values
        of ``u``, the problem, the cost and the convergence report."""
        s = self.sample(n)
        man = self.manoeuvre
        body = "disk" if isinstance(man.model, Disk) else "ball"
        extra = {k: s[k] for k in ("phi", "phi_dot", "x", "y", "Omega") if k in s}
        return dict(
            body=body,
            T=float(man.T),
            target=np.asarray(man.target).tolist(),
            mu=float(self.mu),
            n_min=float(man.n_min),
            knots=self.control.K,
            theta0=np.asarray(man.theta0).tolist(),
            t=s["t"],
            theta=s["theta"],
            theta_dot=s["theta_dot"],
            theta_ddot=s["theta_ddot"],
            u_knots=np.asarray(self.control.values()),
            N=s["N"],
            f_s=s["f_s"],
            cost_kind=self.cost_kind,
            cost=self.cost,
            effort=self.effort,
            energy=self.energy,
            final_state=s["y_T"],
            min_N=float(np.min(s["N"])),
            max_friction_ratio=float(np.max(s["ratio"])),
            converged=self.converged,
            feasible=self.feasible,
            status=self.status,
            violation=self.violation,
            kkt=self.kkt,
            iterations=self.iterations,
            evaluations=self.evaluations,
            wall_time=self.wall_time,
            message=self.message,
            history=dict(cost=self.history.f, violation=self.history.violation),
            **extra,
            start_costs=self.start_costs,
            start_converged=self.start_converged,
            optima=list(self.optima),
            robust=None
            if self.robust is None
            else {k: v for k, v in self.robust.items() if k not in ("box_object", "nominal")},
        )


#: The structured starts' rail swings ``Delta theta`` [rad] (module docstring of _starts).
START_SWINGS = (1.0, 0.5, 2.0)


def _shaped(prob: _NLPProblem) -> list[np.ndarray]:
    """Structured starts (whitened knot values, rows of ``K n``): every mass accelerated
    along a low-order polynomial ``u_i(t) = a_i P_j(t / T)`` (shifted Legendre ``P_1, P_2,
    P_3``: zero integral, so rest to rest), ``a_i = +-6 Delta theta / T^2`` (``P_1`` swings
    the rail coordinate by ``Delta theta``), all masses one way or alternating, for each
    swing of ``START_SWINGS``."""
    K, n = prob.K, prob.man.model.n
    s = np.linspace(0.0, 1.0, K + 1)
    shapes = (1 - 2 * s, 6 * s**2 - 6 * s + 1, 20 * s**3 - 30 * s**2 + 12 * s - 1)
    B = _rest_basis(K)
    to_w = np.linalg.inv(_whitening(K))  # w = C^T z
    T = float(prob.man.T)
    signs = (np.ones(n), -np.ones(n), (-1.0) ** np.arange(n), -((-1.0) ** np.arange(n)))
    out = []
    for swing in START_SWINGS:
        for shape in shapes:
            for sign in signs:
                V = (6 * swing / T**2) * shape[:, None] * sign[None, :]  # (K + 1, n)
                out.append((to_w @ (B.T @ V)).ravel())
    return out


def _starts(prob: _NLPProblem, starts: int, seed: int):
    """``starts`` rows of starting variables: no motion first, then structured starts
    (:func:`_shaped`) and random ones (``0.1`` standard normal whitened knot values, from
    ``seed``) in turn."""
    n = prob.K * prob.man.model.n
    rng = np.random.default_rng(seed)
    shaped = _shaped(prob)
    rows = [np.zeros(n)]
    while len(rows) < starts:
        if len(rows) % 2 == 1 and shaped:
            rows.append(shaped.pop(0))
        else:
            rows.append(0.1 * rng.standard_normal(n))
    z = np.stack(rows)
    if prob.free_mu:
        z = np.concatenate([z, np.ones((starts, 1))], axis=1)  # mu = 1: a generous envelope
    return z


def _progress_printer(enabled, starts, n, max_iter: int | None = None, desc: str = "SQP"):
    """``(progress, close)``: ``progress`` for :func:`rollax._drivers._nlp.minimize` run on the
    rows ``starts`` of ``n`` starts (``info["start"]`` made the start's index among all ``n``),
    and ``close()`` to end its display. ``enabled=True``: a tqdm bar on stderr named ``desc``,
    its count the iterations of the furthest start out of ``max_iter`` (SLSQP usually stops
    well before), then the time so far and the latest start's iteration, objective and
    constraint violation; the first iteration includes compiling the problem."""
    if not enabled:
        return None, lambda: None
    starts = list(starts)
    if enabled is True:
        import threading

        from tqdm.auto import tqdm

        bar = tqdm(
            total=max_iter,
            desc=f"{desc} ({len(starts)} start{'s' if len(starts) > 1 else ''}; the first "
            "iteration compiles)",
            unit="it",
            bar_format="{desc}: iteration {n} of at most {total} [{elapsed}{postfix}]",
            mininterval=0.5,
        )
        lock = threading.Lock()

        def show(k, info):
            with lock:
                if k + 1 > bar.n:
                    bar.update(k + 1 - bar.n)
                bar.set_postfix_str(
                    f"start {info['start'] + 1}/{n}: iteration {k + 1}, objective "
                    f"{info['f']:.6g}, violation {info['violation']:.2e}"
                )

        close = bar.close
    else:
        show, close = enabled, lambda: None
    return (lambda k, info: show(k, {**info, "start": starts[info["start"]]})), close


@eqx.filter_jit
def _batch_values(X, prob):
    """``(r, h, g)`` at every row of ``X`` (one compiled call)."""
    return jax.vmap(lambda x: _fun(x, prob))(jnp.asarray(X))


def _refused(man: Manoeuvre, cost: str, K: int, free_mu: bool, why: str, wall: float):
    """The :class:`Optimum` of a manoeuvre that fails a necessary condition: ``infeasible``
    with no iteration, ``why`` the message, the control no motion (``cost``, ``effort``,
    ``energy``, ``violation`` and ``kkt`` nan: nothing was solved)."""
    nan = math.nan
    empty = np.zeros(0)
    return Optimum(
        manoeuvre=man,
        control=RestToRestControl(jnp.zeros((K, man.model.n)), man.T),
        cost_kind=cost,
        cost=nan,
        effort=nan,
        energy=nan,
        mu=nan if free_mu else float(man.mu),
        converged=False,
        feasible=False,
        status="infeasible",
        violation=nan,
        kkt=nan,
        iterations=0,
        evaluations=0,
        wall_time=wall,
        message=why,
        start_costs=empty,
        start_converged=np.zeros(0, dtype=bool),
        history=_nlp.History(empty, empty),
    )


#: Two starts reached the same local optimum when their costs agree to this (relative) part.
SAME_OPTIMUM = 1e-3


def _distinct(costs, converged) -> tuple[dict, ...]:
    """The distinct local optima among the starts' feasible ``costs`` (nan: not feasible),
    best first: ``{"cost", "starts", "converged"}`` (costs within ``SAME_OPTIMUM`` of the
    group's best are one optimum)."""
    order = [i for i in np.argsort(costs) if np.isfinite(costs[i])]
    groups: list[dict] = []
    for i in order:
        c = float(costs[i])
        if groups and abs(c - groups[-1]["cost"]) <= SAME_OPTIMUM * max(
            1.0, abs(groups[-1]["cost"])
        ):
            groups[-1]["starts"] += 1
            groups[-1]["converged"] += int(converged[i])
        else:
            groups.append({"cost": c, "starts": 1, "converged": int(converged[i])})
    return tuple(groups)


def _search_note(optima: tuple, starts: int) -> str:
    """What the starts say about the best optimum (appended to ``Optimum.message``)."""
    if starts == 1:
        return "a local optimum from 1 start (starts > 1 searches for better ones)"
    if not optima:
        return f"no start of {starts} ended feasible"
    best = optima[0]["starts"]
    more = f"{len(optima)} distinct local optima among {starts} starts; the best reached by {best}"
    if best == 1:
        more += " start only: more starts may find a better one"
    return more


def _solve(prob: _NLPProblem, X, phase, tol: float, n_grid: int, stop=lambda: False):
    """SQP from the rows of ``X`` on ``prob``: the least-effort (or least-mu) phase, then
    the energy or time cost from its results (rows as wide as the time cost's variables skip
    the first phase), then, once, a 4x finer grid for the starts whose constraints dip
    between the grid's times by more than ``tol`` (module docstring). ``(results,
    stopped)``."""
    first = dataclasses.replace(prob, cost="effort")
    n_first = prob.K * prob.man.model.n + int(prob.free_mu)
    stopped = False
    results: list = []
    X = np.atleast_2d(np.asarray(X, float))
    label = "least mu" if prob.free_mu else "effort"
    robust = " (robust)" if prob.paths else ""
    if X.shape[1] == n_first:
        results = phase(first, X, range(len(X)), f"SQP, {label}{robust}")
        stopped = any(r.stopped for r in results)
        X = np.stack([r.x for r in results])
        if prob.cost == "time":
            X = np.concatenate([X, np.zeros((len(X), 1))], axis=1)  # T = T_0
    if prob.cost != first.cost and not stopped:
        results = phase(prob, X, range(len(X)), f"SQP, {prob.cost}{robust}")
        stopped = any(r.stopped for r in results)
    if prob.cost == "time" and len(results[0].x) == n_first:  # stopped in the first phase
        for i, r in enumerate(results):
            results[i] = r._replace(x=np.concatenate([r.x, [0.0]]))
    X = np.stack([r.x for r in results])
    if not stopped:
        _, h, g = _batch_values(X, dataclasses.replace(prob, n_grid=8 * (n_grid - 1) + 1))
        dips = np.maximum(np.max(np.asarray(g), axis=1), np.max(np.abs(np.asarray(h)), axis=1))
        redo = [i for i, r in enumerate(results) if r.feasible and dips[i] > tol]
        if redo:
            finer = dataclasses.replace(prob, n_grid=4 * (n_grid - 1) + 1)
            again = phase(finer, X[redo], redo, f"SQP, refined grid{robust}")
            for i, r in zip(redo, again):
                results[i] = r
    return results, stopped


def _optimum(prob: _NLPProblem, results, cost: str, wall: float, starts: int, robust=None):
    """The :class:`Optimum` of the best feasible result (or the least violation)."""
    man = prob.man
    feasible = np.array([r.feasible for r in results])
    costs = np.array([float(_cost(cost, man, prob.control(jnp.asarray(r.x)))) for r in results])
    score = np.where(feasible, [r.f for r in results], np.inf)
    best = (
        int(np.argmin(score)) if feasible.any() else int(np.argmin([r.violation for r in results]))
    )
    res = results[best]
    x = jnp.asarray(res.x)
    control = prob.control(x)
    man = eqx.tree_at(lambda m: m.T, man, control.T)
    if prob.free_mu:  # the least mu found: the envelope the control was found in
        man = eqx.tree_at(lambda m: m.mu, man, jnp.asarray(prob.mu(x), float))
    if res.converged:
        status = "converged"
    elif res.feasible or any(r.stopped for r in results):
        status = "not converged"  # (stopped by the time limit: not known to be infeasible)
    else:
        status = "infeasible"
    start_costs = np.where(feasible, costs, np.nan)
    start_converged = np.array([r.converged for r in results])
    optima = _distinct(start_costs, start_converged)
    message = res.message
    if starts > 1 or robust is None:
        message = f"{message}; {_search_note(optima, starts)}"
    return Optimum(
        manoeuvre=man,
        control=control,
        cost_kind=cost,
        cost=float(_cost(cost, man, control)),
        effort=float(control.effort()),
        energy=float(_cost("energy", man, control)),
        mu=float(prob.mu(x)),
        converged=res.converged,
        feasible=res.feasible,
        status=status,
        violation=res.violation,
        kkt=res.kkt,
        iterations=res.iterations,
        evaluations=res.evaluations,
        wall_time=wall,
        message=message,
        start_costs=start_costs,
        start_converged=start_converged,
        history=res.history,
        optima=optima,
        robust=robust,
    )


def _run(
    man: Manoeuvre,
    *,
    free_mu: bool,
    cost: str,
    knots: int,
    starts: int,
    seed: int,
    n_grid: int,
    rtol: float,
    tol: float,
    kkt_tol: float,
    max_iter: int,
    progress,
    x0=None,
    time_limit=None,
    uncertain=None,
    samples: int = 16,
    probability=None,
    terminal: str = "mean",
    rounds: int = 4,
) -> Optimum:
    if not isinstance(man, Manoeuvre):
        raise ValueError(
            f"manoeuvre = {type(man).__name__} is not allowed: it must be a rollax.robot.Manoeuvre"
        )
    K = check_integer("knots", knots, 2, 512)
    starts = check_integer("starts", starts, 1, 4096)
    n_grid = check_integer("n_grid", n_grid, 2)
    max_iter = check_integer("max_iter", max_iter, 1)
    check_range("rtol", rtol, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range("tol", tol, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range("kkt_tol", kkt_tol, 0.0, math.inf, lo_open=True)
    cost = _check_cost(cost)
    if time_limit is not None:
        time_limit = check_range("time_limit", time_limit, 0.0, math.inf, lo_open=True)
    box = None
    if uncertain is not None:
        from rollax.analysis.robot.uncertain import parameter_box

        box = parameter_box(man, uncertain)
        samples = check_integer("samples", samples, 1, 4096)
        rounds = check_integer("rounds", rounds, 0, 64)
        if probability is not None:
            check_range("probability", probability, 0.0, 1.0, lo_open=True, hi_open=True)
        if terminal not in ("nominal", "mean", "every"):
            raise ValueError(
                f"terminal = {terminal!r} is not allowed: it must be 'nominal', 'mean' or 'every'"
            )
    t_start = time.perf_counter()
    # necessary conditions first (rollax.analysis.robot.feasibility): no solve, no compile
    failed = necessary_conditions(
        man, cost=cost, free_mu=free_mu, tol=float(tol), time_range=TIME_RANGE
    )
    if failed:
        return _refused(man, cost, K, free_mu, "; ".join(failed), time.perf_counter() - t_start)
    deadline = None if time_limit is None else t_start + float(time_limit)
    prob = _NLPProblem(man, K, n_grid, free_mu, float(rtol), 16384, cost=cost)
    # the energy and time costs start from the least-effort manoeuvres (module docstring)
    x0 = _starts(prob, starts, seed) if x0 is None else np.atleast_2d(np.asarray(x0, float))
    width = K * man.model.n + int(free_mu)
    if x0.ndim != 2 or x0.shape[1] != width:
        raise ValueError(
            f"x0 has shape {x0.shape}; allowed: rows of {width} starting variables (K n"
            + (" + 1, the last sqrt(mu))" if free_mu else ")")
        )

    def phase(fn_prob, X, rows, desc):
        if time_limit is not None and math.isfinite(time_limit):
            desc += f", time limit {time_limit:g} s"
        show, close = _progress_printer(progress, rows, len(X), max_iter, desc)
        try:
            return cast(  # (a list: one Result per row of the 2-d starts)
                list[_nlp.Result],
                _nlp.minimize(
                    _fun,
                    X,
                    fn_prob,
                    tol=tol,
                    kkt_tol=kkt_tol,
                    max_iter=max_iter,
                    progress=show,
                    deadline=deadline,
                ),
            )
        finally:
            close()

    results, stopped = _solve(prob, x0, phase, tol, n_grid)
    nominal = _optimum(prob, results, cost, time.perf_counter() - t_start, len(x0))
    if box is None or stopped or not nominal.feasible:
        return nominal
    from rollax.analysis.robot.robust import _robust_rounds

    return _robust_rounds(
        prob, nominal, results, box, phase, _solve, _optimum, samples=samples, seed=seed,
        probability=probability, terminal=terminal, rounds=rounds, tol=tol, n_grid=n_grid,
        t_start=t_start, progress=progress,
    )  # fmt: skip


def optimize(
    manoeuvre: Manoeuvre,
    *,
    cost: str = "effort",
    knots: int = 16,
    starts: int = 1,
    seed: int = 0,
    n_grid: int = 201,
    rtol: float = 1e-8,
    tol: float = 1e-6,
    kkt_tol: float = 1e-4,
    max_iter: int = 500,
    progress=True,
    x0=None,
    time_limit: float | None = None,
    uncertain: dict | None = None,
    samples: int = 16,
    probability: float | None = None,
    terminal: str = "mean",
    rounds: int = 4,
) -> Optimum:
    """The optimal control of ``manoeuvre`` (module docstring) for ``cost``: ``"effort"``
    (``min int_0^T sum_i u_i^2 dt``), ``"energy"`` (``min E + ENERGY_EFFORT * J``) or
    ``"time"`` (``min T + TIME_EFFORT * J``, the manoeuvre's T the first guess and ``T`` in
    ``[T / TIME_RANGE, TIME_RANGE * T]``), from ``starts`` initial guesses at once (the
    first: no motion; the others: random, from ``seed``; their SQP iterations run side by
    side, with the simulations of all starts batched by ``jax.vmap``); the best feasible start
    is returned with every start's cost.

    ``knots``: K, the spline intervals of each ``u_i``; ``n_grid``: the times on which the path
    constraints are imposed; ``rtol``: the solver's tolerance; ``tol``: the allowed constraint
    violation; ``kkt_tol``: the allowed (relative) stationarity residual. ``progress`` (on by
    default: a first optimisation compiles for a minute or more) shows the SQP's iterations on
    stderr, ``False`` nothing (or give a callable ``(k,
    info)``; ``info["start"]`` is the start). ``x0``: starting points instead (one row a
    start, ``K n`` whitened knot values as the generated starts; for the time cost, the
    starts of its least-effort phase). A manoeuvre that cannot be done inside the envelope
    ends with ``status = "infeasible"`` and the least violation found.

    Before any solve (plain NumPy, nothing compiled: milliseconds) the necessary conditions
    of :mod:`rollax.analysis.robot.feasibility` are checked: ``n_min <= M g`` (N averages the
    weight over any rest-to-rest manoeuvre), the friction impulse bound (the CM's travel in
    T needs ``mu >= ...``; for the time cost, ``T >= ...`` within ``TIME_RANGE`` times the
    given T) and the starts of rails with ends inside their domains. One that fails returns
    at once ``status = "infeasible"``, ``iterations = 0``, nan costs, the no-motion control
    and, in ``message``, the bound with its numbers (e.g. ``needs mu >= 0.555 for phi_T =
    -6.2832 in T = 6 (or T >= 10.55 at mu = 0.2; ...)``).

    ``time_limit``: seconds (> 0; ``None``, the default: none) after which the SQP stops at
    the end of its current iteration (the first includes compiling, and is not interrupted)
    and returns the best point met so far with ``status = "not converged"`` and ``message =
    "time limit reached"``; the later phases (the energy or time cost after the least-effort
    one, the finer grid) are then skipped.

    **Several starts** (``starts > 1``): no motion, structured starts (every mass driven by a
    low-order polynomial acceleration of several sizes, all one way or alternating; see
    :func:`_shaped`) and random ones in turn, run side by side. The problem is multimodal:
    ``Optimum.optima`` lists the distinct local optima reached (cost, how many starts reached
    it, how many converged), and ``message`` says how many starts reached the best (a best
    reached by one start only: more starts may find a better one).

    **Robust** (``uncertain``, :mod:`rollax.analysis.robot.robust`): ``{"mu": (0.15, 0.25),
    "masses": 0.02, ...}`` (names and forms in :mod:`rollax.analysis.robot.uncertain`); the
    contact constraints are required for ``samples`` parameter sets of that box (the nominal
    first) evaluated as one batch, for every sample (``probability=None``; followed by a
    search for the worst parameter set, whose violations are put in and solved again, at most
    ``rounds`` times) or for all but a fraction ``1 - probability`` of them (a CVaR chance
    constraint); the end conditions at the nominal values, in the mean or for every sample
    (``terminal``). It starts from the nominal optimum (found first, as without
    ``uncertain``). ``Optimum.robust`` holds the box, the samples, the rounds, the worst case
    found and the ``price``: the robust cost over the nominal one. Check the result on fresh
    samples with :func:`rollax.robot.validate` and :func:`rollax.robot.worst_case`.
    """
    return _run(
        manoeuvre,
        free_mu=False,
        cost=cost,
        knots=knots,
        starts=starts,
        seed=seed,
        n_grid=n_grid,
        rtol=rtol,
        tol=tol,
        kkt_tol=kkt_tol,
        max_iter=max_iter,
        progress=progress,
        x0=x0,
        time_limit=time_limit,
        uncertain=uncertain,
        samples=samples,
        probability=probability,
        terminal=terminal,
        rounds=rounds,
    )


def least_mu(
    manoeuvre: Manoeuvre,
    *,
    knots: int = 16,
    starts: int = 1,
    seed: int = 0,
    n_grid: int = 201,
    rtol: float = 1e-8,
    tol: float = 1e-6,
    kkt_tol: float = 1e-4,
    max_iter: int = 1500,
    progress=True,
    x0=None,
    time_limit: float | None = None,
    uncertain: dict | None = None,
    samples: int = 16,
    rounds: int = 4,
) -> Optimum:
    """The least friction coefficient with which ``manoeuvre`` can be done (its ``mu`` is
    ignored; ``N >= n_min`` and the terminal conditions still hold): ``mu`` becomes a variable
    and ``mu + LEAST_MU_EFFORT * J`` is minimised. ``Optimum.mu`` is the answer and
    ``Optimum.cost`` the effort of the control that reaches it.

    This problem converges slowly, hence the larger default ``max_iter``. At the least mu the
    ratio ``|f_s| / N`` touches ``mu`` at many peaks (a minimax: about 30 on the disk at T =
    12), each between two grid times that are then both active: some 65 nearly dependent
    active constraints for the 65 variables. SLSQP's active set changes as the peaks slide
    between grid times, and after mu has settled to 4-5 digits (a few hundred iterations) the
    rest of the run creeps along it. Measured on the disk of Sect. 5 turned by ``-pi`` (N >=
    0.5, K = 16; experiments/robot_control): T = 7 converged in 358 iterations, T = 8 in 1104,
    T = 10 at the limit of 1500 with a KKT residual of 3e-6; with 300 iterations T = 8, 10
    ended not converged and T = 12 infeasible (violation 1e-2 to 4e-2 in the terminal angle
    along most of the run, the best point met just outside ``tol``). The KKT residual is
    measured with the best-fitting multipliers (:mod:`rollax._drivers._nlp`): SLSQP's own left it at
    ~1e-3 on such points.

    As :func:`optimize`, the necessary conditions that do not involve mu (``n_min <= M g``,
    rail starts) are checked first, and ``time_limit`` stops the SQP early.

    ``uncertain`` (without ``mu``, which is the answer): the least mu for which one control
    keeps the contact for every parameter set of the box (as :func:`optimize`'s robust
    problem: ``samples`` samples, then a worst-case search and at most ``rounds`` more
    solves); the end conditions hold in the mean over the samples."""
    if uncertain is not None and isinstance(uncertain, dict) and "mu" in uncertain:
        raise ValueError(
            "uncertain['mu'] is not allowed in least_mu: the least mu is the answer; give "
            "the other uncertain parameters"
        )
    return _run(
        manoeuvre,
        free_mu=True,
        cost="effort",
        knots=knots,
        starts=starts,
        seed=seed,
        n_grid=n_grid,
        rtol=rtol,
        tol=tol,
        kkt_tol=kkt_tol,
        max_iter=max_iter,
        progress=progress,
        x0=x0,
        time_limit=time_limit,
        uncertain=uncertain,
        samples=samples,
        rounds=rounds,
    )
