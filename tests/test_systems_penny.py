"""rollax.systems.PennySystem: the penny billiard through rollax.solve (integrated flight, shared
event location, the billiard's impact maps as the reset) against the closed-form sequences of
rollax.penny."""

import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.penny import EllipseTable, PennyBilliard, dynamic, simulate
from rollax.systems import PennyOutcome, PennySystem

TOL = dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("law", ["elastic", "plastic"])
def test_impact_sequence_matches_the_closed_form_flow(law):
    b = dynamic(PennyBilliard(table=EllipseTable(), law=law))
    s0 = b.penny.state()
    seq = simulate(b, s0, 3)
    for k, tol in ((1, 1e-9), (3, 1e-7)):
        sol = rollax.solve(PennySystem(b, n_impacts=k), s0, 0.0, 100.0, **TOL)
        assert sol.status == rollax.Status.EVENT and int(sol.aux[0]) == k
        assert int(PennySystem(b, k).outcome(sol)) == PennyOutcome.DONE
        assert abs(float(sol.t) - float(seq.times[k - 1])) < tol
        np.testing.assert_allclose(np.asarray(sol.y), np.asarray(seq.states[k - 1]),
                                   atol=1e3 * tol)
        # which end hit: the event index is the billiard's end (0 front, 1 back)
        assert int(sol.event) == int(seq.ends[k - 1])
