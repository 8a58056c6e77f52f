"""The rim's outcome codes have one source (rollax.models.outcomes.RimOutcome)."""

import numpy as np

from rollax.models import outcomes
from rollax.analysis.basin import basin_map
from rollax.plot import OUTCOME_COLOURS
from rollax.systems import RimOutcome


def test_codes_names_and_the_system_enum_are_one():
    assert RimOutcome is outcomes.RimOutcome
    assert outcomes.OUTCOMES == tuple(m.name.lower() for m in RimOutcome)
    for m in RimOutcome:
        assert getattr(outcomes, m.name) == int(m) and type(getattr(outcomes, m.name)) is int
        assert outcomes.OUTCOMES[int(m)] == m.name.lower()
    assert len(OUTCOME_COLOURS) >= len(RimOutcome)


def test_a_basin_map_counts_by_those_names():
    from rollax.analysis.basin import Axis

    b = basin_map(x=Axis("beta", 0.9, 1.6, 3), y=Axis("omega1", -5.0, 5.0, 2), progress=False)
    assert set(b.counts()) == set(outcomes.OUTCOMES)
    assert sum(b.counts().values()) == 6
    assert np.all(np.isin(b.outcome, [int(m) for m in RimOutcome]))
