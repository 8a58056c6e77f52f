"""What the odds depend on (rollax.analysis.shot_ranges, issue 58): the probability over the
shot's declared parameter ranges, by common random numbers."""

import numpy as np
import pytest

from rollax.analysis.shot import make_probability
from rollax.analysis.shot_ranges import odds_over_ranges
from rollax.systems import Shot


@pytest.mark.slow  # (the batched per-start parameters compile for about 90 s: CI time)
def test_each_setting_is_the_make_probability_with_the_same_draws():
    # generated releases around the free throw's made region; every setting of the batch is
    # the make probability of its own system with the same draws (one solve, per-start
    # parameters), and the marginal lies within the spread of the ends
    rng = np.random.default_rng(5)
    for _ in range(2):
        v, a = float(rng.uniform(7.2, 7.7)), float(rng.uniform(48.0, 58.0))
        r = odds_over_ranges(speed=v, angle=a, params=["e_rim", "mu_board"], n=256, seed=3,
                             progress=False)  # fmt: skip
        assert r["nominal"] == make_probability(speed=v, angle=a, n=256, seed=3, progress=False)
        for k in ("e_rim", "mu_board"):
            end = r["ends"][k]
            shot = Shot(**{k: end["lo"]})
            assert end["p_lo"] == make_probability(shot, speed=v, angle=a, n=256, seed=3,
                                                   progress=False)  # fmt: skip
            assert end["slope"] == pytest.approx(
                (end["p_hi"][0] - end["p_lo"][0]) / (end["hi"] - end["lo"])
            )
            assert end["slope_se"] >= 0
        lo, hi = r["spread"]
        p, se = r["marginal"]
        assert lo - 4 * se <= p <= hi + 4 * se
        assert set(r["scatter"]) == {"sd_speed", "sd_angle"}


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="params: 'k_d' declares no range in Shot"):
        odds_over_ranges(speed=7.4, angle=52.0, params=["k_d"])
    with pytest.raises(ValueError, match="n = 8 is not allowed"):
        odds_over_ranges(speed=7.4, angle=52.0, n=8)
    with pytest.raises(ValueError, match="t_max = -1.0 is not allowed"):
        odds_over_ranges(speed=7.4, angle=52.0, t_max=-1.0)
    with pytest.raises(ValueError, match="sd_angle = 0.0 is not allowed"):
        odds_over_ranges(speed=7.4, angle=52.0, sd_angle=0.0)
