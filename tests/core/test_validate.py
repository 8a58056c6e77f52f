"""Bad input to public functions and constructors: one-line ValueErrors naming the parameter,
its value and what is allowed; never a silent wrong shape, NaN, IndexError or MLIRError."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollax.analysis import penny

from rollax.models import slip
from rollax.friction import HertzPressure, UniformPressure, exact_law, harmonic_coefficients
from rollax.analysis.friction_fit import fit_harmonic, fit_harmonic_samples, fit_pade
from rollax.models.friction.harmonic import MAX_DEGREE, HarmonicModel
from rollax.models.friction.sliding import SlidingBody
from rollax.models.rim import Rim, rolling_energy
from rollax.robot import Ball, Disk, RampControl
from rollax.models.robot.examples import paper_ball, paper_disk
from rollax.systems import (
    PennySystem,
    RimRolling,
    RimSlipping,
    RimTracked,
    Robot,
    Sliding,
    SlidingStop,
)

RIM = Rim()
X = jnp.array([0.3, 0.1, -2.0, 9.0])
Y = jnp.array([0.3, 0.1, -2.0, 9.0, 0.01, -0.02])


def _one_line(excinfo, *names):
    msg = str(excinfo.value)
    assert "\n" not in msg, msg
    for name in names:
        assert name in msg, msg
    assert "allowed" in msg or "must" in msg, msg
    return msg


# ----------------------------------------------------------------------- state shapes
RIM_METHODS = {
    "vector_field": lambda x: RIM.vector_field(x),
    "contact_forces": lambda x: RIM.contact_forces(x),
    "normal_force": lambda x: RIM.normal_force(x),
    "no_slip_margin": lambda x: RIM.no_slip_margin(x),
    "energy": lambda x: RIM.energy(x),
    "alpha_dot": lambda x: RIM.alpha_dot(x),
    "centre": lambda x: RIM.centre(x),
    "centre_velocity": lambda x: RIM.centre_velocity(x),
    "flight": lambda x: RIM.flight(x),
}
BAD_SHAPES = [(10, 4), (4, 10), (2,), (5,), (), (4, 1), (0,)]


@pytest.mark.parametrize("method", sorted(RIM_METHODS))
@pytest.mark.parametrize("shape", BAD_SHAPES)
def test_rim_methods_refuse_a_state_of_the_wrong_shape(method, shape):
    with pytest.raises(ValueError) as e:
        RIM_METHODS[method](jnp.ones(shape))
    msg = _one_line(e, f"Rim.{method}", "x = ", "(4,)")
    assert str(tuple(shape)) in msg


def test_the_cases_of_the_issue_rim():
    with pytest.raises(ValueError, match=r"x = an array of shape \(10, 4\) is not allowed"):
        RIM.vector_field(jnp.ones((10, 4)))
    with pytest.raises(ValueError, match=r"x = \[1.0, 1.0\] \(shape \(2,\)\) is not allowed"):
        RIM.vector_field(jnp.ones(2))
    with pytest.raises(ValueError, match=r"z = .* shape \(5,\) = \(beta, w1, w2, w3, alpha\)"):
        RIM.vector_field_with_alpha(jnp.ones(4))
    with pytest.raises(ValueError, match="rolling_energy: x"):
        rolling_energy(jnp.ones(3), 1.0, 1.0, 0.5, 9.81, 1.0)


def test_state_checks_hold_under_jit_and_vmap_and_leave_values_unchanged():
    xs = jnp.stack([X, 2 * X, -X])
    f = jax.jit(jax.vmap(RIM.vector_field))
    np.testing.assert_allclose(
        np.asarray(f(xs)), np.stack([np.asarray(RIM.vector_field(x)) for x in xs]), rtol=1e-14
    )
    with pytest.raises(ValueError, match=r"traced array of shape \(3,\)"):
        jax.vmap(RIM.vector_field)(xs[:, :3])
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        jax.jit(RIM.energy)(xs)
    # lists and tuples of four numbers are states too
    np.testing.assert_allclose(
        np.asarray(RIM.vector_field(list(map(float, X)))),
        np.asarray(RIM.vector_field(X)),
        rtol=1e-15,
    )
    # traced parameters (rollax.identify) still work
    g = jax.grad(lambda r: RIM.__class__(r=r).energy(X))(0.12)
    assert np.isfinite(float(g))


SLIP6 = [
    "slip_normal_force",
    "slip_vector_field",
    "slip_energy",
    "rolling_equivalent",
    "layer_slip",
    "layer_vector_field",
    "stick",
]
SLIP4 = ["limit_coefficients", "limit_directions", "start_slip"]


@pytest.mark.parametrize("name", SLIP6)
@pytest.mark.parametrize("shape", [(4,), (10, 6), (6, 10), ()])
def test_slip_functions_refuse_a_slipping_state_of_the_wrong_shape(name, shape):
    with pytest.raises(ValueError) as e:
        getattr(slip, name)(RIM, jnp.ones(shape))
    _one_line(e, f"{name}: y", "(6,)", "(beta, w1, w2, w3, u1, u3)")


@pytest.mark.parametrize("name", SLIP4)
def test_slip_functions_refuse_a_rolling_state_of_the_wrong_shape(name):
    args = (1e-6,) if name == "start_slip" else ()
    with pytest.raises(ValueError) as e:
        getattr(slip, name)(RIM, Y, *args)
    _one_line(e, f"{name}: x", "(4,)")
    getattr(slip, name)(RIM, X, *args)  # the right shape still works
    with pytest.raises(ValueError, match="stick_function: y"):
        slip.stick_function(RIM, X, 1e-5, 1e-2)
    with pytest.raises(ValueError, match="physical_state: y"):
        slip.physical_state(jnp.ones((3, 6)), slip.ROLLING, RIM)


def test_slip_functions_work_vmapped():
    ys = jnp.stack([Y, 1.1 * Y])
    e = jax.vmap(lambda y: slip.slip_energy(RIM, y))(ys)
    assert e.shape == (2,)
    assert float(e[0]) == float(slip.slip_energy(RIM, Y))


# ------------------------------------------------------------------ integer arguments
LAW = exact_law("uniform")


@pytest.mark.parametrize(
    "N", [0, -1, MAX_DEGREE + 1, 500, 1.5, math.nan, math.inf, True, "2", None]
)
def test_harmonic_degree(N):
    with pytest.raises(ValueError) as e:
        fit_harmonic(LAW, N)
    _one_line(e, "N = ", str(MAX_DEGREE) if not isinstance(N, (str, type(None))) else "integer")
    with pytest.raises(ValueError, match="N = "):
        harmonic_coefficients(LAW, N)
    with pytest.raises(ValueError, match="N = "):
        HarmonicModel.from_law(LAW, N)
    with pytest.raises(ValueError, match="N = "):
        fit_harmonic_samples(np.ones(3), np.ones(3), np.ones(3), np.ones(3), N)


def test_the_case_of_the_issue_fit_harmonic():
    with pytest.raises(ValueError, match=r"N = 0 is not allowed: .*an integer in \[1, 32\]"):
        fit_harmonic(LAW, 0)
    with pytest.raises(ValueError, match=r"degree = 33 is not allowed: .*an integer in \[2, 32\]"):
        fit_pade(LAW, 33)
    with pytest.raises(ValueError, match="iters = 0"):
        fit_harmonic(LAW, 2, iters=0)
    # a whole float is still a degree
    c1, s1 = harmonic_coefficients(LAW, 3)
    c2, s2 = harmonic_coefficients(LAW, 3.0)
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(s1, s2)


@pytest.mark.parametrize("n", [-1, 0, 1.5, True, None, "3"])
def test_penny_n_impacts(n):
    b = penny.paper_billiard()
    s0 = b.penny.state()
    for call in (
        lambda: penny.simulate(b, s0, n),
        lambda: b.simulate(s0, n),
        lambda: penny.ftle(b, s0, n),
        lambda: penny.simulate_batch(b, s0[None], n),
        lambda: PennySystem(b, n),
    ):
        with pytest.raises(ValueError) as e:
            call()
        _one_line(e, "n_impacts = ", ">= 1")


def test_penny_state_shape():
    b = penny.paper_billiard()
    with pytest.raises(ValueError, match=r"state0 = .*shape \(8,\)"):
        penny.simulate(b, jnp.ones(7), 2)


# ---------------------------------------------------------------- pressures (fields)
@pytest.mark.parametrize("cls", [UniformPressure, HertzPressure])
@pytest.mark.parametrize("field", ["P", "R"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0, 0.0, "abc", None, True])
def test_pressures_check_their_fields(cls, field, value):
    with pytest.raises(ValueError) as e:
        cls(**{field: value})
    _one_line(e, field)


def test_pressures_unchanged_for_valid_input():
    assert float(UniformPressure(2.0, 0.5)(0.0, 0.0)) == 2.0 / (math.pi * 0.25)
    assert float(HertzPressure(2.0, 0.5)(0.0, 0.0)) == 1.5 * 2.0 / (math.pi * 0.25)
    # traced fields are left to the caller
    f = jax.jit(lambda P: UniformPressure(P, 1.0)(0.0, 0.0))
    assert float(f(3.0)) == 3.0 / math.pi


# ------------------------------------------------ constructors: hypothesis over all fields
_DISK = paper_disk().model
_BALL = paper_ball().model
_BODY = SlidingBody(LAW)
_CONTROL = RampControl(jnp.ones(3))
_DISK_KW = dict(
    radius=1.0, m0=1.0, d2=1.0, zeta0=(0.0, 0.0, 0.0), masses=(1.0,) * 4, rails=_DISK.rails, g=1.0
)
_BALL_KW = dict(
    radius=1.0,
    m0=1.0,
    inertia=(0.9, 1.0, 1.1),
    zeta0=(0.0, 0.0, -0.05),
    masses=(1.0, 1.0, 1.0),
    rails=_BALL.rails,
    g=1.0,
)

_JUNK = st.sampled_from(["abc", "", None, True, False, object(), "1.0", b"1"])
_NONFINITE = st.sampled_from([math.nan, math.inf, -math.inf, float("-nan"), 1e400])
_FLOATS = dict(allow_nan=False, allow_infinity=False)


def _bad(kind):
    """Values a field of ``kind`` must refuse."""
    if kind == "positive":
        return st.one_of(_JUNK, _NONFINITE, st.floats(max_value=0.0, **_FLOATS))
    if kind == "nonnegative":
        return st.one_of(_JUNK, _NONFINITE, st.floats(max_value=-1e-300, **_FLOATS))
    if kind == "finite":
        return st.one_of(_JUNK, _NONFINITE)
    if kind == "j":  # (0, 1]
        return st.one_of(
            _JUNK,
            _NONFINITE,
            st.floats(max_value=0.0, **_FLOATS),
            st.floats(min_value=1.0, exclude_min=True, **_FLOATS),
        )
    if kind == "unit_open":  # (0, 1)
        return st.one_of(
            _JUNK,
            _NONFINITE,
            st.floats(max_value=0.0, **_FLOATS),
            st.floats(min_value=1.0, **_FLOATS),
        )
    if kind.startswith("int>="):
        lo = int(kind[5:])
        return st.one_of(
            _JUNK,
            _NONFINITE,
            st.integers(max_value=lo - 1),
            st.sampled_from([1.5, lo + 0.5, -0.25]),
        )
    if kind == "object":
        return st.one_of(_JUNK, st.floats(**_FLOATS), st.just(Rim()), st.just(_BODY))
    raise AssertionError(kind)


def _vector(base, kind):
    """A vector field's bad values: the whole value junk, or one entry a bad number."""
    bad_number = (
        _NONFINITE
        if kind == "finite"
        else st.one_of(_NONFINITE, st.floats(max_value=0.0, **_FLOATS))
    )
    one = st.tuples(st.integers(0, len(base) - 1), bad_number).map(
        lambda iv: tuple(iv[1] if k == iv[0] else v for k, v in enumerate(base))
    )
    return st.one_of(_JUNK, one)


# constructor name -> (build(**changed fields), {field: kind or strategy})
CONSTRUCTORS = {
    "Disk": (
        lambda **kw: Disk(**{**_DISK_KW, **kw}),
        {
            "radius": "positive",
            "m0": "positive",
            "d2": "positive",
            "g": "nonnegative",
            "zeta0": _vector((0.0, 0.0, 0.0), "finite"),
            "masses": _vector((1.0,) * 4, "positive"),
        },
    ),
    "Ball": (
        lambda **kw: Ball(**{**_BALL_KW, **kw}),
        {
            "radius": "positive",
            "m0": "positive",
            "g": "nonnegative",
            "inertia": _vector((0.9, 1.0, 1.1), "positive"),
            "zeta0": _vector((0.0, 0.0, -0.05), "finite"),
            "masses": _vector((1.0, 1.0, 1.0), "positive"),
            "quat_gain": "nonnegative",
        },
    ),
    "SlidingBody": (
        lambda **kw: SlidingBody(**{"law": LAW, **kw}),
        {"m": "positive", "j": "j", "R_bar": "positive", "F": "nonnegative"},
    ),
    "UniformPressure": (lambda **kw: UniformPressure(**kw), {"P": "positive", "R": "positive"}),
    "HertzPressure": (lambda **kw: HertzPressure(**kw), {"P": "positive", "R": "positive"}),
    "RimRolling": (lambda **kw: RimRolling(**kw), {"w1_target": "int>=0", "rim": "object"}),
    "RimTracked": (lambda **kw: RimTracked(**kw), {"rim": "object"}),
    "RimSlipping": (
        lambda **kw: RimSlipping(**kw),
        {
            "rim": "object",
            "delta": "positive",
            "u_layer": "positive",
            "tau_stick": "positive",
            "dir_tol": "unit_open",
            "min_dwell": "positive",
            "max_switches": "int>=1",
            "max_short": "int>=2",
        },
    ),
    "Sliding": (
        lambda **kw: Sliding(**{"body": _BODY, **kw}),
        {"r_stop": "positive", "body": "object"},
    ),
    "SlidingStop": (
        lambda **kw: SlidingStop(**{"body": _BODY, **kw}),
        {"r_stop": "positive", "body": "object"},
    ),
    "Robot": (
        lambda **kw: Robot(**{"model": _BALL, "control": _CONTROL, **kw}),
        {"model": "object", "control": "object"},
    ),
    "PennySystem": (lambda **kw: PennySystem(**kw), {"n_impacts": "int>=1", "billiard": "object"}),
}
_CASES = [(c, f) for c, (_, fields) in CONSTRUCTORS.items() for f in fields]


#: the one valid type of an "object" field (its other values are all refused)
_VALID_TYPE = {"rim": Rim, "body": SlidingBody}


@st.composite
def _bad_construction(draw):
    cname, field = draw(st.sampled_from(_CASES))
    kind = CONSTRUCTORS[cname][1][field]
    strategy = kind if isinstance(kind, st.SearchStrategy) else _bad(kind)
    valid = _VALID_TYPE.get(field, ())
    value = draw(strategy.filter(lambda v: not (kind == "object" and isinstance(v, valid))))
    return cname, field, value


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_bad_construction())
def test_invalid_fields_of_every_constructor_give_one_line_naming_the_field(case):
    cname, field, value = case
    build = CONSTRUCTORS[cname][0]
    with pytest.raises(ValueError) as e:
        build(**{field: value})
    msg = str(e.value)
    assert "\n" not in msg, (case, msg)
    shown = {"d2": "d2", "radius": "radius", "inertia": "inertia"}.get(field, field)
    assert shown in msg, (case, msg)
    assert "allowed" in msg or "must" in msg or "outside" in msg, (case, msg)


def test_every_constructor_accepts_its_defaults_and_the_examples():
    for cname, (build, _) in CONSTRUCTORS.items():
        build()
    Disk(**_DISK_KW)
    Ball(**_BALL_KW)
    Robot(paper_disk().model, paper_disk().control)
    # per-start parameters (a leading batch axis) and traced values are still accepted
    RimSlipping(delta=np.array([1e-6, 2e-6]))
    Sliding(_BODY, r_stop=np.array([1e-6, 1e-5]))
    jax.jit(lambda r: Sliding(_BODY, r_stop=r).r_stop)(1e-6)
    jax.jit(lambda m: Ball(**{**_BALL_KW, "m0": m}).m0)(2.0)
