"""Inputs that once ran with a wrong or changed meaning, or never returned (issue 33): each is
now a one-line error naming the input and what is allowed, or runs as asked."""

import math
import subprocess
import sys
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rollax
from rollax._integrate._ensemble import LANES_MAX, _lanes_used
from rollax.analysis.basin import Axis, basin_map
from rollax.friction import exact_law
from rollax.models.rim import Rim
from rollax.models.slip import SlipSettings
from rollax.systems import RimRolling, RimSlipping

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from bouncing_ball import BouncingBall  # noqa: E402
from oscillator import Oscillator  # noqa: E402

OSC = Oscillator(omega=2.0, n=6)
Y = np.array([[1.0, 0.0]] * 3)


# ---------------------------------------------------------------- huge integers, tolerances
@pytest.mark.parametrize(
    "kw, match",
    [
        (
            dict(max_steps=2**31),
            r"max_steps = 2147483648 is not allowed: it must be an integer in "
            r"\[1, 2147483647\]",
        ),
        (dict(max_steps=10**19), r"max_steps = 10000000000000000000 is not allowed"),
        (dict(max_resets=10**12), r"max_resets = 1000000000000 is not allowed"),
        (
            dict(rtol=1e-300, atol=1e-300),
            r"rtol = 1e-300 is outside the allowed range \[1e-15, 1\) "
            r"\(float64 cannot honour",
        ),
        (dict(rtol=1e-9, atol=1e-310), r"atol = 1e-310 is outside the allowed range \[1e-300, 1\)"),
        (
            dict(n_samples=10**6),
            r"n_samples = 1000000 is not allowed: it must be an integer in "
            r"\[1, 256\]",
        ),
    ],
)
@pytest.mark.parametrize("path", ["solve", "solve_ensemble"])
def test_huge_counts_and_tiny_tolerances_are_refused_by_name(kw, match, path):
    with pytest.raises(ValueError, match=match):
        if path == "solve":
            rollax.solve(OSC, jnp.asarray(Y[0]), 0.0, 10.0, **kw)
        else:
            rollax.solve_ensemble(OSC, Y, 0.0, 10.0, **kw)


def test_lanes_are_bounded_and_never_more_than_the_starts_need():
    with pytest.raises(
        ValueError,
        match=r"lanes = 1000000000 is not allowed: it must be an "
        r"integer in \[16, 4194304\]",
    ):
        rollax.solve_ensemble(OSC, Y, 0.0, 10.0, lanes=10**9)
    assert LANES_MAX == 1 << 22
    # the usual sizes are kept (one compiled kernel for every chunk); a large count on few
    # starts shrinks to the power of two at or above them, never below 512
    assert _lanes_used(512, 3, 2) == 512
    assert _lanes_used(64, 10**6, 2) == 64
    assert _lanes_used(10**6, 48, 1) == 512
    assert _lanes_used(1 << 20, 5000, 2) == 4096


def test_the_default_lanes_are_512_on_a_cpu_and_one_per_start_on_a_gpu(monkeypatch):
    # on a GPU the queue's refills are what cost (benchmarks/RESULTS.md, 2026-11-24)
    assert _lanes_used(None, 10**6, 1) == 512
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    for N, n_dev, want in [(3, 1, 512), (5000, 1, 8192), (86400, 2, 65536), (10**8, 1, LANES_MAX)]:
        assert _lanes_used(None, N, n_dev) == want
    assert _lanes_used(2048, 86400, 1) == 2048  # a count given is kept


def test_lanes_do_not_change_the_results():
    a = rollax.solve_ensemble(OSC, Y, 0.0, 10.0, lanes=1 << 22)
    b = rollax.solve_ensemble(OSC, Y, 0.0, 10.0)
    np.testing.assert_array_equal(a.t, b.t)


def test_the_cli_refuses_a_huge_step_limit_in_one_line(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rollax.cli",
            "basin",
            "--grid",
            "4",
            "4",
            "--max-steps",
            "1000000000000",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 or "usage" in r.stderr
    assert "--max-steps" in r.stderr and "2147483647" in r.stderr


# ---------------------------------------------------------------- batched parameters
def _rim_rows_ok(r, a, R):
    return (r > 0) & (a > 0) & (R > 0) & (r + a < R)


rows = st.lists(
    st.tuples(st.floats(-0.05, 0.3), st.floats(-0.01, 0.05), st.floats(0.05, 0.4)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(rows, st.sampled_from(["RimRolling", "RimSlipping", "Rim"]))
def test_a_batched_rim_is_checked_row_by_row(rows_, kind):
    r, a, R = (np.array(c) for c in zip(*rows_))
    ok = _rim_rows_ok(r, a, R)

    def build():
        rim = Rim(r=jnp.asarray(r), a=jnp.asarray(a), R=jnp.asarray(R))
        return {
            "Rim": lambda: rim,
            "RimRolling": lambda: RimRolling(rim),
            "RimSlipping": lambda: RimSlipping(rim),
        }[kind]()

    if ok.all():
        build()
        return
    with pytest.raises(ValueError) as err:
        build()
    msg = str(err.value)
    assert "\n" not in msg
    first = int(np.argmin(ok))  # the first bad row is named (when the sign check fails there)
    sign_bad = (r <= 0) | (a <= 0) | (R <= 0)
    if sign_bad.any():
        assert re_row(msg) in {str(i) for i in np.nonzero(sign_bad)[0]}
    else:
        assert f"per-start row {first}" in msg and "r + a < R" in msg


def re_row(msg):
    import re

    m = re.search(r"\[(\d+)\]|per-start row (\d+)", msg)
    assert m, msg
    return m.group(1) or m.group(2)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(1e-8, 0.05), min_size=1, max_size=5),
    st.lists(st.floats(1e-8, 0.05), min_size=1, max_size=5),
)
def test_batched_slip_settings_are_checked_row_by_row(delta, u_layer):
    n = min(len(delta), len(u_layer))
    d, u = np.array(delta[:n]), np.array(u_layer[:n])
    if (d < u).all():
        SlipSettings(delta=jnp.asarray(d), u_layer=jnp.asarray(u))
        return
    with pytest.raises(
        ValueError,
        match=rf"delta = .* must be smaller than u_layer = .* in "
        rf"per-start row {int(np.argmax(d >= u))} ",
    ):
        SlipSettings(delta=jnp.asarray(d), u_layer=jnp.asarray(u))


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(0.1, 3.0), st.just(math.nan), st.just(math.inf)), min_size=1, max_size=5
    )
)
def test_batched_example_parameters_must_be_finite(omegas):
    w = np.array(omegas)
    if np.isfinite(w).all():
        Oscillator(omega=w)
        BouncingBall(e=np.clip(w / 4, 0.1, 1.0))
        return
    with pytest.raises(
        ValueError,
        match=r"Oscillator.omega = .* is not allowed: a parameter "
        r"must be finite",
    ):
        Oscillator(omega=w)


def test_scalar_and_batched_rims_refuse_the_same_values():
    with pytest.raises(
        ValueError,
        match=r"rho = r \+ a = 0.31 must be smaller than R = 0.225 "
        r"\(allowed range: 0 < r \+ a < R\)",
    ):
        Rim(r=0.3)
    with pytest.raises(
        ValueError,
        match=r"rho = r \+ a = 0.31 must be smaller than R = 0.225 in "
        r"per-start row 1",
    ):
        RimRolling(Rim(r=jnp.array([0.12, 0.3])))
    with pytest.raises(
        ValueError,
        match=r"delta = 0.01 must be smaller than u_layer = 0.001 in "
        r"per-start row 1",
    ):
        SlipSettings(delta=jnp.array([1e-6, 1e-2]))
    with pytest.raises(ValueError, match=r"r\[1\] = -0.1 is outside the allowed range"):
        Rim(r=jnp.array([0.1, -0.1]))
    # traced values pass construction (checked where concrete)
    assert float(jax.grad(lambda r: Rim(r=r).rho)(0.1)) == 1.0


# ---------------------------------------------------------------- errors that name their input
@pytest.mark.parametrize(
    "value, match",
    [
        ("abc", r"Oscillator.omega = 'abc' is not allowed: a parameter must be a real number"),
        (None, r"Oscillator.omega = None is not allowed"),
        (1 + 2j, r"Oscillator.omega = \(1\+2j\) is not allowed"),
    ],
)
def test_a_parameter_that_is_not_a_real_number_is_named(value, match):
    with pytest.raises(ValueError, match=match):
        Oscillator(omega=value)


def test_a_complex_model_parameter_is_refused_not_made_real():
    with pytest.raises(ValueError, match=r"r = \(0.12\+1j\) is not allowed: it must be real"):
        Rim(r=0.12 + 1j)


def test_solve_with_per_start_parameters_says_what_to_use():
    with pytest.raises(
        ValueError,
        match=r"batch shape \(2,\); rollax.solve runs one start .* "
        r"rollax.solve_ensemble",
    ):
        rollax.solve(
            RimRolling(Rim(r=jnp.array([0.1, 0.11]))), jnp.array([1.0, 0.0, 35.0, 10.0]), 0.0, 1.0
        )


# ---------------------------------------------------------------- ignored inputs
def test_a_fixed_value_on_an_axis_is_refused():
    with pytest.raises(ValueError, match=r"fixed = .* sets \['beta'\], which is on an axis"):
        basin_map(
            Rim(),
            x=Axis("beta", 0.8, 1.8, 4),
            y=Axis("omega1", -20, 20, 4),
            fixed={"beta": 1.0, "omega2": 35.0, "omega3": 10.0},
            progress=False,
        )


def test_a_sweep_refuses_a_start_value_on_an_axis():
    with pytest.raises(ValueError, match=r"y0 gives \['beta'\], which is on an axis"):
        rollax.sweep(
            RimRolling(Rim()),
            [rollax.Axis("beta", 0.8, 1.8, 4)],
            y0={"beta": 1.0, "omega1": 0.0, "omega2": 35.0, "omega3": 10.0},
            t1=1.0,
        )


@pytest.mark.parametrize(
    "beta0, omega30, match",
    [
        (math.nan, 10.0, r"beta0 = nan is not allowed"),
        (
            math.pi / 2,
            10.0,
            r"beta0 = 1.5707963267948966 is not allowed: cos\(beta0\) = 0 is a "
            r"singular line of eq. \(48\)",
        ),
        (np.array([1.0, -math.pi / 2]), 10.0, r"beta0\[1\] = -1.5707963267948966 is not allowed"),
        (1.0, 0.0, r"omega30 = 0.0 is not allowed: omega30 = 0 is a singular line"),
    ],
)
def test_a_steady_state_on_a_pole_of_48_is_refused(beta0, omega30, match):
    with pytest.raises(ValueError, match=match):
        Rim().steady_state(beta0, omega30)


def test_a_negative_slip_spin_ratio_is_refused():
    law = exact_law("uniform")
    for fn in (law.Q_eps, law.T_eps):
        with pytest.raises(ValueError, match=r"eps = -1.0 is not allowed: the slip-spin ratio"):
            fn(-1.0)
    assert np.isfinite(float(law.Q_eps(jnp.inf)))
    # under jit the values are not known: no check, no error
    assert np.isfinite(float(jax.jit(law.Q_eps)(0.5)))


def test_robot_simulate_names_a_bad_time_or_state():
    from rollax.robot import RampControl, paper_ball
    from rollax.models.robot.examples import BALL_THETA0
    from rollax.analysis.robot.trajectory import simulate

    ex = paper_ball()
    y0 = ex.model.initial_state(BALL_THETA0, Omega=(3.0, 0.0, 0.5))
    c = RampControl(jnp.zeros(3))
    with pytest.raises(ValueError, match=r"t1 must be a real number, got NaN"):
        simulate(ex.model, c, y0, math.nan)
    with pytest.raises(ValueError, match=r"y0 has 14 components, which Ball cannot take"):
        simulate(ex.model, c, y0[:-1], 0.5)


# ---------------------------------------------------------------- events and solvers
class _IntEvent(rollax.AbstractSystem):
    state_names = ("x",)
    events = (rollax.boundary("hit"),)

    def vector_field(self, t, y, mode):
        return jnp.ones(1)

    def event_values(self, t, y, mode):
        return jnp.stack([jnp.int32(3) - (y[0] > 2).astype(jnp.int32) * 3])


@pytest.mark.parametrize("path", ["solve", "solve_ensemble"])
def test_an_integer_event_function_is_refused_by_name(path):
    with pytest.raises(
        ValueError,
        match=r"_IntEvent.event_values returns int32 values; it must "
        r"return real floating-point values",
    ):
        if path == "solve":
            rollax.solve(_IntEvent(), jnp.zeros(1), 0.0, 10.0)
        else:
            rollax.solve_ensemble(_IntEvent(), np.zeros((2, 1)), 0.0, 10.0)


def test_an_implicit_diffrax_solver_is_refused_by_name():
    with pytest.raises(
        ValueError,
        match=r"solver = Kvaerno5\(\) is not allowed: rollax.solve "
        r"samples and redoes steps of an explicit",
    ):
        rollax.solve(OSC, jnp.asarray(Y[0]), 0.0, 10.0, solver=diffrax.Kvaerno5())
    # explicit diffrax pairs still run
    sol = rollax.solve(OSC, jnp.asarray(Y[0]), 0.0, 10.0, solver=diffrax.Bosh3())
    assert int(sol.status) == int(rollax.Status.EVENT)


# ---------------------------------------------------------------- the command line
def _cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "rollax.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    "cmd", [["penny"], ["robot", "disk"], ["friction", "law", "--eps", "0.5"], ["friction", "stop"]]
)
def test_an_out_that_is_a_file_is_refused_before_any_work(cmd, tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    r = _cli(*cmd, "--out", str(f))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "is not allowed: it is a file" in r.stderr


def test_robot_examples_refuse_the_options_of_optimize():
    r = _cli("robot", "disk", "--T", "3", "--mu", "0.01")
    assert r.returncode == 2
    assert "--T, --mu apply to `rollax robot optimize` only" in r.stderr


def _kept_regions(out):
    """A 6 x 5 map in regions of at most 10 starts (3 of 2 x 5): the command's arguments and
    the outcome's chunk files in the store, one per region."""
    args = ["basin", "--grid", "6", "5", "--chunk-size", "10", "--no-progress", "--out", str(out)]
    assert _cli(*args).returncode == 0
    files = [p for p in (out / "basin.zarr" / "outcome" / "c").rglob("*") if p.is_file()]
    assert len(files) == 3
    return args, sorted(files, key=str)


def test_a_store_warning_is_one_line(tmp_path):
    args, chunks = _kept_regions(tmp_path / "o")
    chunks[0].write_bytes(b"not a zarr chunk")
    r = _cli(*args)
    assert r.returncode == 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rollax basin: warning: StoreWarning: store "), lines[0]
    assert "1 region(s) cannot be read" in lines[0] and "(regions 0)" in lines[0]


def test_a_region_that_cannot_be_written_is_named(tmp_path):
    # a directory where a region's chunk goes (its file removed): the error names the store's
    # chunk, not the private temporary file zarr writes it to
    args, chunks = _kept_regions(tmp_path / "o")
    chunk = chunks[1]
    chunk.unlink()
    (chunk / "sub").mkdir(parents=True)
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()  # the region's warning, then the error: a line each
    assert len(lines) == 2 and "StoreWarning" in lines[0], r.stderr
    assert "basin.zarr" in lines[1] and ".tmp" not in lines[1], r.stderr


def test_a_penny_state_off_its_rolling_constraints_is_refused():
    from rollax.analysis.penny import EllipseTable, PennyBilliard, dynamic, simulate, simulate_batch
    from rollax.systems import PennySystem

    b = dynamic(PennyBilliard(table=EllipseTable(), law="elastic"))
    rng = np.random.default_rng(0)
    for _ in range(5):
        s0 = np.asarray(b.penny.state(phi=rng.uniform(0, 2 * np.pi), theta_dot=rng.uniform(5, 15)))
        bad = s0.copy()
        bad[6] *= 1 + rng.choice([-1, 1]) * rng.uniform(1e-3, 0.2)  # theta' off x', y'
        with pytest.raises(ValueError, match=r"state0 violates the rolling constraints \(23\)"):
            simulate(b, bad, 2)
        with pytest.raises(ValueError, match=r"states0 \(row 1\) violates"):
            simulate_batch(b, np.stack([s0, bad]), 2)
        with pytest.raises(ValueError, match=r"y0s \(row 1\) violates"):
            rollax.solve_ensemble(PennySystem(b, n_impacts=1), np.stack([s0, bad]), 0.0, 20.0)
        # the constraint holds to rounding on the states Penny.state builds
        b.penny.check_rolling(s0)


def test_a_swallowed_sigterm_still_ends_the_program():
    # the handler's exception swallowed (as once inside a gc callback of JAX's): the backstop
    # ends the process with 143 a few seconds later
    code = (
        "import os, signal, time, rollax.cli as c\n"
        "c.BACKSTOP_S = 1.0\n"
        "def work(args):\n"
        "    t = time.time()\n"
        "    while time.time() - t < 30:\n"
        "        try:\n"
        "            if time.time() - t < 0.1:\n"
        "                os.kill(os.getpid(), signal.SIGTERM)\n"
        "            time.sleep(0.05)\n"
        "        except BaseException:\n"
        "            pass\n"
        "    return 0\n"
    )
    assert _terminated_penny(code, "c.main(['penny'])") < 25


def _terminated_penny(code: str, call: str) -> float:
    """Run ``code`` (which defines ``work(args)`` and imports ``rollax.cli as c``) as the
    ``rollax penny`` command through ``call``; it must end with 143 and the backstop's line.
    Returns the seconds it took."""
    import time

    code += "import rollax.cli.penny as p\np.run = work\n" + f"raise SystemExit({call})\n"
    t0 = time.time()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 143, (r.returncode, r.stderr)
    assert "terminated by SIGTERM" in r.stderr
    return time.time() - t0


def test_a_sigterm_ends_a_main_thread_blocked_in_compiled_code_within_about_a_second():
    # the main thread inside one long call that does not return to Python (as an XLA compile
    # or a long JAX computation: an identification once took 65 s to stop): the handler's
    # exception cannot be raised there, and the default backstop ends the process
    code = (
        "import os, signal, sys, threading, rollax.cli as c\n"
        "def work(args):\n"
        "    import jax\n"
        "    f = jax.jit(lambda x: jax.lax.fori_loop(0, 10**11, lambda i, a: a * 1.0000001, x))\n"
        "    threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()\n"
        "    f(1.0).block_until_ready()  # minutes, waited for outside Python\n"
        "    return 0\n"
        "sys.argv = ['rollax', 'penny']\n"
    )
    # start-up, 2 s, the backstop's 1 s (the computation alone: minutes)
    assert _terminated_penny(code, "c.main()") < 20


def test_identify_refuses_records_it_cannot_finish():
    from rollax._drivers._identify import MAX_ROWS, Observations

    n = MAX_ROWS + 1
    with pytest.raises(
        ValueError,
        match=rf"{n} observations is more than identify takes "
        rf"\({MAX_ROWS}\)",
    ):
        Observations(t=np.linspace(0.0, 100.0, n), values=np.zeros(n), observe="x", names=("x",))
    t = np.linspace(0.0, 2.0, 50)
    with pytest.raises(
        ValueError,
        match=r"t_event = 1000.0 is not allowed: it lies 998 s after "
        r"the last observation",
    ):
        Observations(
            t=t, values=np.zeros(50), observe="x", names=("x",), t_event=1000.0, sigma_event=1e-3
        )
    Observations(t=t, values=np.zeros(50), observe="x", names=("x",), t_event=3.5, sigma_event=1e-3)


def test_per_start_friction_and_dissipation_are_checked_as_scalars():
    with pytest.raises(ValueError, match=r"mu\[1\] = inf is not allowed: mu must be finite"):
        RimSlipping(Rim(mu=jnp.array([1.0, np.inf])))
    with pytest.raises(
        ValueError,
        match=r"slipping with the dissipative moment \(82\) is not "
        r"modelled",
    ):
        RimSlipping(Rim(mu=jnp.array([1.0, 0.5]), k_d=jnp.array([0.0, 0.1])))
    RimSlipping(Rim(mu=jnp.array([1.0, 0.5])))
    # per-start dissipation rates that are all zero are not dissipative (they were, silently)
    assert not Rim(k_d=jnp.zeros(3), k_r=jnp.zeros(3)).dissipative
    assert Rim(k_d=jnp.array([0.0, 0.1, 0.0])).dissipative


class _Switch(rollax.AbstractSystem):
    """x' = 1 before t = 1 and -1 after: x(2) = x(t0) + (1 - t0) - 1 from t0 <= 1."""

    state_names = ("x",)

    def vector_field(self, t, y, mode):
        return jnp.where(t < 1.0, 1.0, -1.0) * jnp.ones(1)


@pytest.mark.parametrize("t0", [float(np.nextafter(1.0, 0.0)), 1.0 - 2e-16, 0.98, 0.5])
def test_a_start_just_before_a_jump_time_runs_on(t0):
    # the diffrax suite's case: t0 one ulp before a jump_ts entry failed at once (no step fits
    # before the jump); both integrators now go on from just after it, as diffrax does
    want = (1.0 - t0) - 1.0
    a = rollax.solve(_Switch(), jnp.zeros(1), t0, 2.0, jump_ts=[1.0])
    b = rollax.solve_ensemble(_Switch(), np.zeros((2, 1)), t0, 2.0, jump_ts=[1.0])
    c = jax.jit(lambda s: rollax.solve(_Switch(), jnp.zeros(1), s, 2.0, jump_ts=[1.0]).y)(t0)
    assert int(a.status) == int(rollax.Status.T_MAX)
    assert list(b.status) == [int(rollax.Status.T_MAX)] * 2
    for y in (a.y[0], b.y[0, 0], b.y[1, 0], c[0]):
        assert abs(float(y) - want) < 1e-12


def test_every_parameter_refused_as_a_scalar_is_refused_in_a_batch():
    # every scalar array field of every module inside the conformance systems (the rim, the
    # robot's body and control, the penny's billiard, the sliding body, the examples): a bad
    # value that construction refuses alone (nan, +-1e300, -1, 0) is refused as row 1 of a
    # per-start batch too, in one line (issue 33: batched fields skipped validation)
    import dataclasses

    import equinox as eqx
    from test_conformance import CASES

    def modules(obj):
        if isinstance(obj, eqx.Module):
            yield obj
            for f in dataclasses.fields(obj):
                yield from modules(getattr(obj, f.name, None))

    seen, refused = set(), 0
    for case in CASES:
        for m in modules(CASES[case](4)[0]):
            for f in dataclasses.fields(m):
                v = getattr(m, f.name, None)
                if (
                    not f.init
                    or not eqx.is_array(v)
                    or np.ndim(v) != 0
                    or (type(m), f.name) in seen
                ):
                    continue
                seen.add((type(m), f.name))
                for bad in (math.nan, -1.0, 0.0, 1e300, -1e300):
                    try:
                        dataclasses.replace(m, **{f.name: bad})
                        continue  # allowed alone: nothing to hold the batch to
                    except ValueError:
                        pass
                    refused += 1
                    with pytest.raises(ValueError) as err:
                        dataclasses.replace(m, **{f.name: jnp.array([float(v), bad])})
                    assert "\n" not in str(err.value), (type(m).__name__, f.name, bad)
    assert len(seen) >= 25 and refused >= 40, (len(seen), refused)


def test_a_full_disk_names_the_file_it_could_not_write(tmp_path, monkeypatch, capsys):
    import errno

    from rollax.analysis.basin import Axis, basin_map
    from rollax.cli import main
    from rollax.cli._args import dump
    from rollax.models.rim import Rim

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    # the CLI's JSON files: the write error names the file
    class Full:
        name = str(tmp_path / "x.json")

        def write(self, s):
            full()

        def flush(self):
            pass

    with pytest.raises(OSError) as err:
        dump({"a": 1}, Full())
    assert err.value.filename == str(tmp_path / "x.json")
    # a basin map's dataset: named, and no temporary file left behind
    import xarray as xr

    bmap = basin_map(
        Rim(),
        x=Axis("beta", 0.8, 1.8, 2),
        y=Axis("omega1", -20, 20, 2),
        fixed={"omega2": 35.0, "omega3": 10.0},
        progress=False,
    )
    monkeypatch.setattr(xr.Dataset, "to_zarr", full)
    with pytest.raises(OSError) as err:
        bmap.save(tmp_path / "out")
    assert err.value.filename == str(tmp_path / "out" / "basin.zarr")
    assert list((tmp_path / "out").iterdir()) == []
    # the store a sweep writes as it runs: named too
    import zarr.storage._local

    monkeypatch.setattr(zarr.storage._local, "_put", full)
    # and the command says so in one line
    rc = main(["basin", "--grid", "2", "2", "--no-progress", "--out", str(tmp_path / "cli")])
    assert rc == 2
    msg = capsys.readouterr().err.strip().splitlines()
    assert (
        len(msg) == 1
        and str(tmp_path / "cli" / "basin.zarr") in msg[0]
        and "No space left" in msg[0]
    )
