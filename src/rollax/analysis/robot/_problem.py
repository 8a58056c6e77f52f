"""The optimal-control problem of :mod:`rollax.analysis.robot.optimal` (whose docstring states
it): the manoeuvre, the normalised-time rolling system, the costs, the terminal and path
constraints, and the robust problem's per-sample values (:mod:`rollax.analysis.robot.robust`).
Private: the public names are re-exported by :mod:`rollax.robot`."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
import numpy as np
from jaxtyping import Array, Float

from rollax._core._solution import Status
from rollax._integrate._solve import solve
from rollax._core._system import AbstractSystem
from rollax._core._validate import check_range, real_array
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
        """The static weight ``M g_n`` (the mean of N over any rest-to-rest manoeuvre;
        ``g_n``, gravity's component normal to the floor, is g on a level floor)."""
        return self.model.total_mass * self.model.gravity()[-1]

    @property
    def y0(self) -> Float[Array, " d"]:
        return self.model.initial_state(self.theta0)


def disk_manoeuvre(
    phi_T: float = -math.pi,
    T: float = 5.0,
    mu: float = 0.3,
    n_min: float = 0.5,
    slope: float = 0.0,
) -> Manoeuvre:
    """The disk of Sect. 5 (r = m0 = d2 = g = 1, four unit masses on circles of radii 0.9,
    0.6333, 0.3667, 0.1) at rest with ``theta_i = -pi/2`` (5.6), turned to ``phi_T`` in ``T``;
    ``slope``: the floor's rise over run along e1 (:class:`rollax.robot.Disk`)."""
    from rollax.models.robot.examples import paper_disk

    ex = paper_disk()
    return Manoeuvre(_with_slope(ex.model, slope), ex.y0[: ex.model.n], T, (phi_T,), mu, n_min)


def ball_manoeuvre(
    target=(1.0, 0.5),
    T: float = 5.0,
    mu: float = 0.3,
    n_min: float = 0.5,
    slope=(0.0, 0.0),
) -> Manoeuvre:
    """The ball of Sect. 6 (r = m0 = g = 1, d = (0.9, 1, 1.1), zeta0 = (0, 0, -0.05), three unit
    masses on the rails (6.8)-(6.10)) at rest at the angles of Table 6.2, moved to ``target``;
    ``slope``: the floor's gradient (rise over run along e1 and e2, :class:`rollax.robot.Ball`)."""
    from rollax.models.robot.examples import paper_ball

    ex = paper_ball()
    return Manoeuvre(_with_slope(ex.model, slope), ex.y0[: ex.model.n], T, target, mu, n_min)


def _with_slope(model, slope):
    """``model`` on a floor of ``slope``, validated like the model's own fields."""
    shape = np.shape(model.slope)
    try:
        same = np.array_equal(np.asarray(slope, float), np.asarray(model.slope))
    except (TypeError, ValueError):
        same = False
    if same:
        return model
    if np.shape(slope) != shape:
        what = "one number" if shape == () else "two numbers (s1, s2)"
        raise ValueError(
            f"slope = {slope!r} is not allowed: the {type(model).__name__.lower()}'s floor "
            f"slope is {what} (rise over run)"
        )
    return dataclasses.replace(model, slope=slope)


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
