"""rollax.Solution's names: status and outcome codes print as the enumerations' names, one run
described in one line; across systems with and without an outcomes enumeration."""

import numpy as np
import pytest

import rollax
from rollax._core._solution import code_names
from test_conformance import CASES, TOL


def test_code_names_of_scalars_arrays_and_unknown_codes():
    assert code_names(0, rollax.Status) == "EVENT"
    assert code_names(np.int32(3), rollax.Status) == "MAX_STEPS"
    got = code_names(np.array([[0, 1], [2, 7]]), rollax.Status)
    assert got.shape == (2, 2) and got.tolist() == [["EVENT", "T_MAX"], ["NONFINITE", "7?"]]


@pytest.mark.parametrize(
    "name",
    # (the sliding disc: 70 s on a slow day here; CI budget, stop 66)
    ["rim_rolling", "bouncing_ball", "oscillator", pytest.param("sliding", marks=pytest.mark.slow)],
)
def test_names_agree_with_the_codes_of_every_run(name):
    system, y0s, t1, opts = CASES[name](12)
    sol = rollax.solve_ensemble(system, y0s, 0.0, t1, **{**TOL, **opts})
    names = sol.status_name
    assert names.shape == (12,)
    assert [rollax.Status[n] for n in names] == [int(s) for s in sol.status]
    codes = np.asarray(rollax.classify(system, sol))
    enum_type = system.outcomes or rollax.Status
    assert [enum_type[n] for n in system.outcome_name(sol)] == codes.tolist()
    # one run: a str, and a line naming the event that ended it
    one = rollax.solve(system, y0s[0], 0.0, t1, **{**TOL, **opts})
    assert isinstance(one.status_name, str) and isinstance(system.outcome_name(one), str)
    line = system.describe(one)
    assert line.startswith(one.status_name + " at t = ")
    e = int(one.event)
    assert (f"({system.events[e].name!r})" in line) if e >= 0 else ("no event" in line)
    with pytest.raises(
        ValueError,
        match=r"^describe takes one run; this solution has a batch "
        r"of shape \(12,\)",
    ):
        system.describe(sol)


def test_accepted_steps_are_the_attempts_less_the_rejections():
    # on both integrators, a run with rejections (a sharp start): accepted + rejected = steps
    import sys
    from pathlib import Path

    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from oscillator import Oscillator

    one = rollax.solve(Oscillator(omega=20.0), jnp.array([1.0, 0.0]), 0.0, 5.0)
    assert int(one.accepted) + int(one.rejected) == int(one.steps) and int(one.accepted) > 0
    many = rollax.solve_ensemble(
        Oscillator(omega=20.0), np.array([[1.0, 0.0], [0.5, 2.0]]), 0.0, 5.0
    )
    np.testing.assert_array_equal(many.accepted + many.rejected, many.steps)
