"""Event semantics (rollax._core.events) and their agreement between the two integrators."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax._integrate import queue
from rollax._core.events import BOUNDARY, CROSSING, EventSet, locate_root, scan_samples
from _fsolve import Event, solve

TWO = EventSet(lambda t, y, a: y, (BOUNDARY, CROSSING), (1, 2))


def test_scan_boundary_fires_at_first_nonpositive_sample():
    vals = jnp.array([[1.0, 1.0], [0.5, 1.0], [0.0, 1.0], [-1.0, 1.0]])
    fired, first, _, _ = scan_samples(TWO, vals, jnp.array([1.0, 1.0]), jnp.array([0, 0]))
    assert bool(fired[0]) and int(first[0]) == 2
    assert not bool(fired[1]) and int(first[1]) == 4


def test_scan_counts_crossings_and_steps_over_zeros():
    # +, 0, -, 0, +: two transversal crossings; the second one fires (target 2)
    vals = jnp.array([[1.0, 1.0], [1.0, 0.0], [1.0, -1.0], [1.0, 0.0], [1.0, 2.0]])
    fired, first, sign, count = scan_samples(TWO, vals, jnp.array([1.0, 1.0]), jnp.array([0, 0]))
    assert bool(fired[1]) and int(first[1]) == 4 and int(count[1]) == 2
    # a touch of zero without a sign change is not a crossing
    vals = jnp.array([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    fired, _, _, count = scan_samples(TWO, vals, jnp.array([1.0, 1.0]), jnp.array([0, 0]))
    assert not bool(fired[1]) and int(count[1]) == 0


@pytest.mark.parametrize("a,b,root", [(1.0, 2.0, np.pi / 2), (0.0, 1.0, 0.3)])
def test_locate_root_accuracy(a, b, root):
    g = (lambda t: jnp.cos(t)) if root > 1 else (lambda t: (t - 0.3) ** 3 + 1e-3 * (t - 0.3))
    r = locate_root(g, jnp.asarray(a), jnp.asarray(b), g(jnp.asarray(a)), g(jnp.asarray(b)))
    assert abs(float(r) - root) < 1e-12


# --- a harmonic oscillator: x = cos(t), v = -sin(t); exact event times are known ----------------
def _osc(t, y, args):
    return jnp.stack([y[1], -y[0]])


def _osc_events(t, y, args):
    # boundary: x > -0.5 (fires at t = 2 pi / 3); crossing: sign changes of x (t = pi/2, 3 pi/2, ...)
    return jnp.stack([y[0] + 0.5, y[0]])


OSC_EARLY = EventSet(_osc_events, (BOUNDARY, CROSSING), (1, 1))  # crossing at pi/2 comes first
OSC_COUNT3 = EventSet(lambda t, y, a: y[:1], (CROSSING,), (3,))  # third zero of x: 5 pi / 2


def test_earliest_event_and_counting_both_paths():
    y0 = jnp.array([1.0, 0.0])
    for ev, idx, t_exact in ((OSC_EARLY, 1, np.pi / 2), (OSC_COUNT3, 0, 2.5 * np.pi)):
        sol = solve(_osc, y0, 0.0, 20.0, None, ev, rtol=1e-12, atol=1e-12)
        assert int(sol.event) == idx and not bool(sol.failed)
        assert abs(float(sol.t) - t_exact) < 1e-10
        res = queue.run(
            _osc, ev, np.array([[1.0, 0.0]]), None, t_max=20.0, rtol=1e-12, atol=1e-12, lanes=16
        )
        assert res.status[0] == queue.EVENT and res.event[0] == idx
        assert abs(res.t[0] - t_exact) < 1e-10
        assert abs(res.t_first[0, idx] - np.pi / 2) < 1e-10


# --- a function that dips through zero and back inside one step -----------------------------
def _drift(t, y, args):
    return jnp.ones_like(y)  # y = t: integrated exactly, so the steps grow huge


def _dip(t, y, args):
    # negative only for 0.40 < y < 0.52; positive at every step end of this solve
    return jnp.stack([(y[0] - 0.40) * (y[0] - 0.52)])


DIP = EventSet(_dip, (BOUNDARY,), (1,))


def test_dip_inside_one_step_is_found_exactly():
    sol = solve(_drift, jnp.array([0.0]), 0.0, 5.0, None, DIP, rtol=1e-9, atol=1e-9)
    assert int(sol.event) == 0 and abs(float(sol.t) - 0.40) < 1e-10
    res = queue.run(_drift, DIP, np.array([[0.0]]), None, t_max=5.0, lanes=16)
    assert res.event[0] == 0 and abs(res.t[0] - 0.40) < 1e-10
    # no step end of this solve lies inside the dip: a step-end sign check would miss it
    import diffrax

    steps = diffrax.diffeqsolve(
        diffrax.ODETerm(_drift),
        diffrax.Dopri5(),
        0.0,
        5.0,
        None,
        jnp.array([0.0]),
        stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9),
        saveat=diffrax.SaveAt(steps=True),
    ).ts
    steps = np.asarray(steps)[np.isfinite(np.asarray(steps))]
    assert not np.any((steps > 0.40) & (steps < 0.52))


def test_failures_are_reported_not_hidden():
    blow = lambda t, y, a: y**2  # noqa: E731  (y = 1/(1 - t) blows up at t = 1)
    none = EventSet(lambda t, y, a: jnp.zeros((0,)), (), ())
    res = queue.run(blow, none, np.array([[1.0], [0.1]]), None, t_max=2.0, lanes=16)
    assert res.status[0] in (queue.FAILED_NAN, queue.FAILED_STEPS)
    assert res.status[1] == queue.T_MAX and abs(res.y[1, 0] - 0.1 / (1 - 0.2)) < 1e-7
    res = queue.run(
        _osc, OSC_COUNT3, np.array([[1.0, 0.0]]), None, t_max=20.0, max_steps=5, lanes=16
    )
    assert res.status[0] == queue.FAILED_STEPS
    sol = solve(blow, jnp.array([1.0]), 0.0, 2.0, None, (), max_steps=256)
    assert bool(sol.failed)


def test_event_time_gradient_matches_closed_form():
    # projectile z'' = -g from height z0 with speed v: lands at t* = (v + sqrt(v^2 + 2 g z0)) / g
    g = 9.81
    ev = (Event(lambda t, y, a: y[0]),)

    def t_land(z0, v):
        sol = solve(
            lambda t, y, a: jnp.stack([y[1], -g + 0.0 * y[0]]),
            jnp.stack([z0, v]),
            0.0,
            10.0,
            None,
            ev,
            rtol=1e-12,
            atol=1e-12,
        )
        return sol.t

    z0, v = 1.3, 2.0
    exact = lambda z0, v: (v + jnp.sqrt(v**2 + 2 * g * z0)) / g  # noqa: E731
    assert abs(float(t_land(z0, v)) - float(exact(z0, v))) < 1e-10
    gz, gv = jax.grad(t_land, argnums=(0, 1))(z0, v)
    ez, evv = jax.grad(exact, argnums=(0, 1))(z0, v)
    assert abs(float(gz) - float(ez)) < 1e-8 and abs(float(gv) - float(evv)) < 1e-8


def test_gradient_without_event_is_the_flow_jacobian():
    # no event fires before t1: d y(t1) / d y0 is the rotation of the oscillator
    never = (Event(lambda t, y, a: y[0] + 2.0),)
    jac = jax.jacrev(lambda y0: solve(_osc, y0, 0.0, 1.0, None, never, rtol=1e-12, atol=1e-12).y)(
        jnp.array([1.0, 0.0])
    )
    c, s = np.cos(1.0), np.sin(1.0)
    assert np.allclose(jac, [[c, s], [-s, c]], atol=1e-9)


def _scan_reference(kinds, targets, values, sign, count):
    """The sample scan written as the loop it replaces (one sample at a time)."""
    n_s, n = values.shape
    sign, count = sign.copy(), count.copy()
    first = np.full(n, n_s)
    for k in range(n_s):
        s = np.sign(values[k])
        flip = (s != 0) & (s == -sign)
        count = count + flip
        sign = np.where(s != 0, s, sign)
        hit = np.where(kinds == BOUNDARY, values[k] <= 0, (targets > 0) & (count >= targets) & flip)
        first = np.where(hit & (first == n_s), k, first)
    return first < n_s, first, sign, count


@pytest.mark.parametrize("seed", range(20))
def test_vectorised_scan_equals_the_loop(seed):
    rng = np.random.default_rng(seed)
    kinds = (BOUNDARY, CROSSING, CROSSING, CROSSING)
    targets = (1, 1, 2, 0)
    ev = EventSet(lambda t, y, a: y, kinds, targets)
    # values from {-1, 0, 1} (many exact zeros) and reals; starting signs include 0
    values = rng.choice([-1.0, 0.0, 1.0, 0.3, -0.7], size=(rng.integers(1, 17), 4))
    sign = rng.choice([-1.0, 0.0, 1.0], size=4)
    count = rng.integers(0, 2, size=4)
    got = scan_samples(ev, jnp.asarray(values), jnp.asarray(sign), jnp.asarray(count, jnp.int32))
    ref = _scan_reference(np.array(kinds), np.array(targets), values, sign, count)
    for a, b in zip(got, ref):
        assert np.array_equal(np.asarray(a), b)


def test_jump_ts_declares_a_kink_to_the_solver():
    # y' = 1 for t > tk, 0 before: y = max(t - tk, 0). Declared, the kink is a step end and
    # the solution is exact (DOPRI5 integrates the polynomial pieces exactly); undeclared,
    # the controller must find it by rejections and the solution is only near tolerance.
    tk = 0.3141592653589793
    f = lambda t, y, a: jnp.where(t > tk, 1.0, 0.0) * jnp.ones_like(y)  # noqa: E731
    ev = (Event(lambda t, y, a: 0.25 - y[0]),)
    y0 = jnp.zeros(1)
    kw = dict(rtol=1e-8, atol=1e-8)
    with_kink = solve(f, y0, 0.0, 1.0, None, ev, jump_ts=(tk,), **kw)
    without = solve(f, y0, 0.0, 1.0, None, ev, **kw)
    assert int(with_kink.event) == 0 and not bool(with_kink.failed)
    assert abs(float(with_kink.t) - (tk + 0.25)) < 1e-13
    assert int(with_kink.steps) < int(without.steps)
    # no events: the plain path takes the kinks too; a solver instance is accepted
    plain = solve(f, y0, 0.0, 1.0, jump_ts=jnp.array([tk]), solver=diffrax.Tsit5(), **kw)
    assert abs(float(plain.y[0]) - (1.0 - tk)) < 1e-13
    with pytest.raises(ValueError, match="solver"):
        solve(f, y0, 0.0, 1.0, solver="euler")


@pytest.mark.parametrize("family", ["cos", "cubic", "exp", "tanh", "quadratic"])
def test_locate_root_converges_in_few_iterations(family):
    # 10 iterations must reach 1e-13 on smooth roots in brackets up to 1/16 wide, vmapped over
    # 200 random cases (the slowest lane sets the cost in the kernel). Illinois regula falsi with
    # a bisection every third iterate needed up to 53 on the same cases.
    rng = np.random.default_rng(3)
    p0, p1 = rng.uniform(0.5, 5.0, 200), rng.uniform(0.05, 0.95, 200)
    lo, hi = p1 - rng.uniform(0.001, 0.0625, 200), p1 + rng.uniform(0.001, 0.0625, 200)
    g = {
        "cos": lambda t, p0, p1: jnp.cos(p0 * (t - p1) + np.pi / 2),
        "cubic": lambda t, p0, p1: (t - p1) ** 3 + 1e-3 * (t - p1),
        "exp": lambda t, p0, p1: jnp.exp(p0 * (t - p1)) - 1.0,
        "tanh": lambda t, p0, p1: jnp.tanh(50.0 * (t - p1)),
        "quadratic": lambda t, p0, p1: -(t - p1) * (t + 3.0) * p0,
    }[family]

    def one(a, b, p0, p1):
        gt = lambda t: g(t, p0, p1)  # noqa: E731
        return locate_root(gt, a, b, gt(a), gt(b), max_iter=10)

    r = jax.vmap(one)(jnp.asarray(lo), jnp.asarray(hi), jnp.asarray(p0), jnp.asarray(p1))
    assert float(jnp.max(jnp.abs(r - p1))) < 2e-13
    # the returned point is on the fired side (the side of b)
    gb = jax.vmap(g)(jnp.asarray(hi), jnp.asarray(p0), jnp.asarray(p1))
    gr = jax.vmap(g)(r, jnp.asarray(p0), jnp.asarray(p1))
    # (up to rounding of g itself at the root)
    assert bool(jnp.all(((gr > 0) == (gb > 0)) | (jnp.abs(gr) < 1e-14)))


# --- crossings closer than the sample spacing (events.unresolved) --------------------------

import rollax  # noqa: E402
from rollax._core.events import unresolved  # noqa: E402


class _Wave(rollax.AbstractSystem):
    """y' = v, g = cos(w y + phi): zeros at w v t + phi = pi/2 + k pi."""

    v: jax.Array
    w: jax.Array
    phi: jax.Array
    state_names = ("y",)
    events = (rollax.crossing("c", target=3),)

    def vector_field(self, t, y, mode):
        return self.v * jnp.ones(1)

    def event_values(self, t, y, mode):
        return jnp.stack([jnp.cos(self.w * y[0] + self.phi)])


class _Square(_Wave):
    events = (rollax.crossing("c", target=6),)


class _Dip(rollax.AbstractSystem):
    """y' = 1, g = (y - c)^2 - eps^2: a pair of zeros at c -+ eps, narrow against the steps."""

    c: jax.Array
    eps: jax.Array
    state_names = ("y",)
    events = (rollax.crossing("c", target=1),)

    def vector_field(self, t, y, mode):
        return jnp.ones(1)

    def event_values(self, t, y, mode):
        return jnp.stack([(y[0] - self.c) ** 2 - self.eps**2])


class _DipWall(_Dip):
    events = (rollax.boundary("wall"),)


def _both(system, t1):
    a = rollax.solve(system, jnp.zeros(1), 0.0, t1)
    b = rollax.solve_ensemble(system, np.zeros((2, 1)), 0.0, t1)
    # the rejected steps are counted alike too
    assert int(a.rejected) == int(b.rejected[0]) <= int(a.steps)
    return float(a.t), float(b.t[0]), int(a.steps), int(b.steps[0])


@pytest.mark.parametrize(
    "system, want",
    [
        # the cases: with large error-free steps the third zero of cos(y/2) came at 9 pi,
        # the sixth of a square wave's sin(pi y) at t = 8
        (_Wave(jnp.asarray(1.0), jnp.asarray(0.5), jnp.asarray(0.0)), 5 * np.pi),
        (_Square(jnp.asarray(1.0), jnp.asarray(np.pi), jnp.asarray(-np.pi / 2)), 6.0),
    ],
)
def test_crossings_closer_than_the_samples_are_not_skipped(system, want):
    ta, tb, sa, sb = _both(system, 100.0)
    assert abs(ta - want) < 1e-9 and abs(tb - want) < 1e-9
    assert int(rollax.solve(system, jnp.zeros(1), 0.0, 100.0).rejected) >= 1
    assert sa == sb  # the same steps, rejections included, on both integrators


def test_waves_of_any_rate_give_their_closed_form_crossing():
    rng = np.random.default_rng(7)
    for _ in range(16):
        v, w, phi = rng.uniform(0.3, 3.0), 10 ** rng.uniform(-1.5, 0.7), rng.uniform(0, np.pi)
        zeros = (np.pi / 2 + np.arange(8) * np.pi - phi) / (w * v)
        want = zeros[zeros > 0][2]
        ta, tb, sa, sb = _both(_Wave(jnp.asarray(v), jnp.asarray(w), jnp.asarray(phi)), 4 * want)
        assert abs(ta - want) < 1e-9 * want and abs(tb - want) < 1e-9 * want, (v, w, phi)
        assert sa == sb


@pytest.mark.parametrize("cls", [_Dip, _DipWall])
def test_narrow_dips_between_samples_are_found(cls):
    # before the check, 27 of 30 such dips (width 1e-4 to 3e-2 of their distance) were
    # stepped over and the run ended at t1; the dip may fall in any sample interval of a step
    rng = np.random.default_rng(11)
    for _ in range(16):
        c = rng.uniform(5.0, 200.0)
        eps = c * 10 ** rng.uniform(-4, -1.5)
        ta, tb, sa, sb = _both(cls(jnp.asarray(c), jnp.asarray(eps)), 400.0)
        assert abs(ta - (c - eps)) < 1e-8 * c and abs(tb - (c - eps)) < 1e-8 * c, (c, eps)
        assert sa == sb


def test_unresolved_flags_what_the_samples_show_and_not_resolved_samplings():
    rng = np.random.default_rng(3)
    K = 8
    theta = np.arange(1, K + 1) / K
    near_th = 1 - 1 / (16 * K)
    flagged = []
    for _ in range(100):
        # a line (any slope and offset, crossing or not) is always resolved
        a, b = rng.normal(size=2)
        g = lambda th: a + b * th  # noqa: E731
        assert not bool(
            unresolved(
                jnp.asarray(g(theta))[:, None], jnp.asarray([g(0.0)]), jnp.asarray([g(near_th)])
            )
        )
        # a parabola with its narrow negative dip strictly between two samples is flagged,
        # whichever interval holds it
        k = rng.integers(0, K)
        c = (k + rng.uniform(0.2, 0.8)) / K
        eps = rng.uniform(0.01, 0.2) / K * min(c * K - k, k + 1 - c * K)
        p = lambda th: (th - c) ** 2 - eps**2  # noqa: E731
        assert bool(
            unresolved(
                jnp.asarray(p(theta))[:, None], jnp.asarray([p(0.0)]), jnp.asarray([p(near_th)])
            )
        ), (k, c, eps)
        # a wave sampled below its Nyquist rate (two to four zeros per sample interval)
        w = rng.uniform(1.1, 3.9) * np.pi * K
        phi = rng.uniform(0, 2 * np.pi)
        s = lambda th: np.cos(w * th + phi)  # noqa: E731
        flagged.append(
            bool(
                unresolved(
                    jnp.asarray(s(theta))[:, None], jnp.asarray([s(0.0)]), jnp.asarray([s(near_th)])
                )
            )
        )
    # a step is missed when its samples happen to look resolved (94 % flagged on 1200 such
    # waves); a run is lost only if every step over the wave is missed
    assert np.mean(flagged) >= 0.85
