"""Shot maps and the shooter's odds (rollax.analysis.shot): the convolved probability map
against Monte Carlo at generated releases, the best release, and bad input."""

import time

import numpy as np
import pytest
from scipy.stats import norm

from rollax._drivers._sweep import Axis, SweepResult
from rollax.analysis.shot import (
    SD_ANGLE,
    SD_SPEED,
    best_release,
    make_probability,
    probability_map,
    release,
    shot_map,
)
from rollax.systems.shot import Shot, ShotOutcome

SPEED = Axis("speed", 7.0, 8.0, 60)
ANGLE = Axis("angle", 44.0, 62.0, 45)


class _Bar:
    """A tqdm stand-in that logs (time, n) at every update: the map's bar, recorded."""

    log: list = []
    ready = 0.0  # when the map was returned

    def __init__(self, *a, total=None, **k):
        self.total, self.n = total, 0

    def update(self, k=1):
        self.n += k
        _Bar.log.append((time.monotonic(), self.n))

    def set_postfix_str(self, s="", refresh=True):
        pass

    def close(self):
        pass


@pytest.fixture(scope="module")
def free_throw():
    from rollax._drivers import _chunks

    _Bar.log = []
    with pytest.MonkeyPatch.context() as mp:  # the map's own bar (progress on), recorded
        mp.setattr(_chunks, "tqdm", _Bar)
        res = shot_map(speed=SPEED, angle=ANGLE, progress=True)
        _Bar.ready = time.monotonic()
    return res


def test_the_maps_bar_is_full_when_the_map_is_ready(free_throw):
    """Issue 56: a shot map's bar stood 70 s at 2399/2400. Its last step now comes no later
    than the result (the gap is printed to the test log, not held to a time)."""
    n = SPEED.n * ANGLE.n
    log = _Bar.log
    full = next(t for t, k in log if k >= n)
    assert full <= _Bar.ready
    before = max((t for t, k in log if k < n), default=full)
    print(
        f"shot map: last step {full - before:.3f} s after the one before; full "
        f"{_Bar.ready - full:.3f} s before the result"
    )


def test_the_map_holds_every_outcome_of_a_free_throw(free_throw):
    res = free_throw
    c = res.counts()
    assert c["made"] > 100 and c["missed"] > 100 and c["failed"] == 0 and c["undecided"] == 0
    swish = np.asarray(res.summary["swish"])
    made = res.outcome == ShotOutcome.MADE
    assert swish.any() and np.all(made[swish])  # a swish is a make
    contacts = res.summary["rim_contacts"] + res.summary["board_contacts"]
    assert np.all(contacts[made & ~swish] >= 1) and np.all(contacts[swish] == 0)
    ds = res.dataset
    assert ds["speed"].attrs["units"] == "m/s" and ds["angle"].attrs["units"] == "degree"
    assert ds["outcome"].attrs["flag_meanings"].split()[:2] == ["made", "missed"]


@pytest.mark.parametrize("seed", range(3))
def test_the_probability_map_agrees_with_monte_carlo(free_throw, seed):
    # generated releases in the map's interior (the convolution needs the scatter inside it)
    rng = np.random.default_rng(seed)
    p_map = probability_map(free_throw)
    sp, an = SPEED.values, ANGLE.values
    i = int(rng.integers(15, len(sp) - 15))
    k = int(rng.integers(10, len(an) - 10))
    p, se = make_probability(speed=float(sp[i]), angle=float(an[k]), n=2048, seed=seed)
    # the map's grid (0.017 m/s, 0.4 degrees) blurs the estimate a little: 0.04 on top of 4 se
    assert abs(p - p_map[i, k]) < 4 * se + 0.04, (sp[i], an[k], p, se, p_map[i, k])


def test_a_release_is_in_si_units_from_the_shooters_units():
    # degrees and Hz in, m/s and rad/s out (a spin read as half-turns survived the mutation
    # check): 3 Hz of backspin is 6 pi rad/s about the shooter's left, turned negative
    y = np.asarray(release(7.2, 52.0, spin=3.0, lateral=10.0, distance=4.19, height=2.1))
    a, lat = np.deg2rad(52.0), np.deg2rad(10.0)
    np.testing.assert_allclose(
        y[3:6], 7.2 * np.array([np.cos(a) * np.cos(lat), np.cos(a) * np.sin(lat), np.sin(a)])
    )
    np.testing.assert_allclose(y[6:9], 6 * np.pi * np.array([np.sin(lat), -np.cos(lat), 0.0]))
    np.testing.assert_allclose(y[0], -4.19)


def test_the_probability_map_of_a_made_quadrant_is_the_normal_cdf():
    # issue 63: a map with no angle (or speed) scatter passed the Monte Carlo test above. A
    # made region {speed >= v0, angle >= a0} (edges half a cell below grid points, so that the
    # discrete convolution is the midpoint rule) has, under independent Gaussian scatters, the
    # known answer Phi((v - v0) / sd_speed) Phi((a - a0) / sd_angle), flanks included
    speed, angle = Axis("speed", 6.5, 8.5, 201), Axis("angle", 38.0, 66.0, 281)
    sp, an = speed.values, angle.values
    v0, a0 = sp[100] - 0.005, an[140] - 0.05
    made = (sp[:, None] >= v0) & (an[None, :] >= a0)
    outcome = np.where(made, ShotOutcome.MADE, ShotOutcome.MISSED).astype(np.int8)
    res = SweepResult(system=Shot(), axes=(speed, angle), outcome=outcome, solution={})
    p = probability_map(res)
    exact = norm.cdf((sp[:, None] - v0) / SD_SPEED) * norm.cdf((an[None, :] - a0) / SD_ANGLE)
    # 4 sd from the map's edges (beyond them releases count as misses)
    i = slice(40, 161)
    k = slice(53, 228)
    np.testing.assert_allclose(p[i, k], exact[i, k], atol=2e-3)
    assert np.ptp(exact[i, k]) > 0.99  # the flanks are in: from ~0 to ~1
    # along each axis alone, deep in the other's made side: the one-dimensional CDF
    np.testing.assert_allclose(p[i, 200], norm.cdf((sp[i] - v0) / SD_SPEED), atol=2e-3)
    np.testing.assert_allclose(p[150, k], norm.cdf((an[k] - a0) / SD_ANGLE), atol=2e-3)
    # another shooter's scatter: the map follows it
    p2 = probability_map(res, sd_speed=0.05, sd_angle=2.0)
    exact2 = norm.cdf((sp[:, None] - v0) / 0.05) * norm.cdf((an[None, :] - a0) / 2.0)
    np.testing.assert_allclose(p2[30:171, 85:196], exact2[30:171, 85:196], atol=2e-3)


@pytest.mark.slow  # (96 s of single-shot Monte Carlo: CI time)
def test_the_probability_map_agrees_with_monte_carlo_on_the_flanks(free_throw):
    # where the make probability is neither 0 nor 1 (the releases the random points above
    # mostly miss): the releases of the interior whose map value is nearest 0.3 and 0.7
    p_map = probability_map(free_throw)
    sp, an = SPEED.values, ANGLE.values
    inner = np.full(p_map.shape, np.inf)
    inner[15:-15, 10:-10] = 0.0
    for target, seed in ((0.3, 11), (0.7, 12)):
        i, k = np.unravel_index(int(np.argmin(np.abs(p_map - target) + inner)), p_map.shape)
        assert abs(p_map[i, k] - target) < 0.05
        p, se = make_probability(speed=float(sp[i]), angle=float(an[k]), n=2048, seed=seed)
        assert abs(p - p_map[i, k]) < 4 * se + 0.04, (sp[i], an[k], p, se, p_map[i, k])


def test_the_best_release_and_common_random_numbers(free_throw):
    v, a, p = best_release(free_throw)
    assert SPEED.lo < v < SPEED.hi and ANGLE.lo < a < ANGLE.hi and 0.5 < p <= 1
    p1, se = make_probability(speed=v, angle=a, n=2048, seed=7)
    assert abs(p1 - p) < 4 * se + 0.05
    assert make_probability(speed=v, angle=a, n=2048, seed=7) == (p1, se)  # the same draws
    # a release with no scatter is the map's own outcome
    i = int(np.argmin(np.abs(SPEED.values - v)))
    k = int(np.argmin(np.abs(ANGLE.values - a)))
    p0, _ = make_probability(
        speed=float(SPEED.values[i]),
        angle=float(ANGLE.values[k]),
        sd_speed=0.0,
        sd_angle=0.0,
        n=2048,
    )
    assert p0 == float(free_throw.outcome[i, k] == ShotOutcome.MADE)


@pytest.mark.slow  # (90 s of central differences over maps: CI time)
def test_the_score_function_gradient_agrees_with_central_differences(free_throw):
    # generated releases on the flanks of the made region (0.15 < p < 0.85 on the map): the
    # score-function dp/dangle and dp/dspeed against central differences of the Monte Carlo
    # estimate with common random numbers, and against the slope of the convolved map
    rng = np.random.default_rng(12)
    p_map = probability_map(free_throw)
    sp, an = SPEED.values, ANGLE.values
    slope_v, slope_a = np.gradient(p_map, sp, axis=0), np.gradient(p_map, an, axis=1)
    flank = np.argwhere(
        (p_map > 0.15) & (p_map < 0.85) & (np.abs(slope_a) > 0.04)
    )  # (inside the map by 2 sd, where the convolution is whole)
    flank = flank[
        (flank[:, 0] >= 12) & (flank[:, 0] < len(sp) - 12)
        & (flank[:, 1] >= 8) & (flank[:, 1] < len(an) - 8)
    ]  # fmt: skip
    n = 4096
    for i, k in flank[rng.choice(len(flank), 3, replace=False)]:
        v, a = float(sp[i]), float(an[k])
        p, se, dp, dp_se = make_probability(speed=v, angle=a, n=n, seed=3, gradient=True)
        assert dp.shape == (2,) and np.all(dp_se > 0)
        for axis, h, slope in ((1, 0.5, slope_a), (0, 0.04, slope_v)):
            kw_p = dict(speed=v + h, angle=a) if axis == 0 else dict(speed=v, angle=a + h)
            kw_m = dict(speed=v - h, angle=a) if axis == 0 else dict(speed=v, angle=a - h)
            pp, sp_ = make_probability(n=n, seed=3, **kw_p)
            pm, sm_ = make_probability(n=n, seed=3, **kw_m)
            cd = (pp - pm) / (2 * h)
            # (the paired difference's error is below the independent one used here)
            err = 4 * np.hypot(dp_se[axis], np.hypot(sp_, sm_) / (2 * h))
            scale = 0.01 if axis == 1 else 0.3  # curvature of p over h, per degree / per m/s
            assert abs(dp[axis] - cd) < err + scale, (v, a, axis, dp[axis], cd)
            # the map's grid and its edge blur its slope: 0.02 per degree, 0.5 per m/s
            blur = 0.02 if axis == 1 else 0.5
            assert abs(dp[axis] - slope[i, k]) < 4 * dp_se[axis] + blur, (v, a, axis)
    with pytest.raises(ValueError, match="sd_angle = 0.0 is not allowed with gradient=True"):
        make_probability(speed=7.5, angle=52.0, sd_angle=0.0, gradient=True)


def test_a_backspin_axis_maps_each_backspin_and_finds_the_best_one():
    # a speed x angle x backspin map: each backspin's slice is the 2-D map at that backspin
    # (the same outcomes), and its best release is the best of the slices' best releases
    speed, angle = Axis("speed", 7.2, 7.9, 24), Axis("angle", 46.0, 60.0, 18)
    spins = Axis("spin", 0.0, 4.0, 3)
    cube = shot_map(speed=speed, angle=angle, spin=spins, progress=False)
    assert cube.outcome.shape == (24, 18, 3)
    assert cube.dataset["spin"].attrs["units"] == "Hz"
    per_spin = []
    for k, w in enumerate(spins.values):
        flat = shot_map(speed=speed, angle=angle, spin=float(w), progress=False)
        np.testing.assert_array_equal(cube.outcome[:, :, k], flat.outcome)
        np.testing.assert_allclose(probability_map(cube)[:, :, k], probability_map(flat))
        per_spin.append(best_release(flat, sd_speed=0.05, sd_angle=1.0))
    v, a, w, p = best_release(cube, sd_speed=0.05, sd_angle=1.0)
    k = int(np.argmax([b[2] for b in per_spin]))
    assert (v, a, p) == per_spin[k] and w == spins.values[k]


def test_bad_input_is_refused_by_name():
    for call, what in (
        (lambda: shot_map(speed=Axis("v", 7, 8, 3), progress=False), "speed = "),
        (lambda: shot_map(distance=-1.0, progress=False), "distance = -1.0"),
        (lambda: shot_map(spin=float("nan"), progress=False), "spin = nan"),
        (lambda: make_probability(speed=7.0, angle=50.0, n=1), "n = 1"),
        (lambda: make_probability(speed=7.0, angle=50.0, sd_angle=-1.0), "sd_angle = -1.0"),
        (lambda: Shot(e_board=2.0), "e_board = 2.0"),
        # a release that is none: refused by name before it is solved (they used to come back
        # as "all missed" or as an unnamed start)
        (lambda: make_probability(speed=-7.0, angle=50.0), "speed = -7.0"),
        (lambda: make_probability(speed=float("nan"), angle=50.0), "speed = nan"),
        (lambda: make_probability(speed=7.0, angle=50.0, spin=float("nan")), "spin = nan"),
        (lambda: make_probability(speed=7.0, angle=50.0, distance=-1.0), "distance = -1.0"),
        (lambda: make_probability(speed="7", angle=50.0), "speed = '7'"),
        (lambda: make_probability(speed=7.0, angle=50.0, seed=-1), "seed = -1"),
        (lambda: shot_map(speed=Axis("speed", -8, -6.6, 3), progress=False), "speed = -8"),
        (lambda: shot_map(angle=Axis("angle", 100, 120, 3), progress=False), "angle = 100"),
        (lambda: shot_map(height=-1.0, progress=False), "height = -1.0"),
        (lambda: shot_map(t_max=float("nan"), progress=False), "t_max = nan"),
        (lambda: shot_map(t_max=-1.0, progress=False), "t_max = -1.0"),
        (lambda: release(float("nan"), 52.0), "speed = nan"),
    ):
        with pytest.raises(ValueError, match=what):
            call()
    # NumPy numbers are numbers
    p, se = make_probability(speed=np.float32(7.4), angle=52.0, n=np.int64(8), seed=np.int64(1))
    assert 0 <= p <= 1 and se > 0


def test_coarse_maps_and_maps_with_nothing_made_are_warned_about():
    coarse = shot_map(
        speed=Axis("speed", 6.6, 8.0, 12), angle=Axis("angle", 40.0, 64.0, 10), progress=False
    )
    with pytest.warns(UserWarning, match="speed step 0.127 m/s exceeds sd_speed = 0.09"):
        probability_map(coarse)
    far = shot_map(
        speed=Axis("speed", 6.6, 6.7, 3), angle=Axis("angle", 40.0, 41.0, 3), progress=False
    )
    assert not np.any(far.outcome == ShotOutcome.MADE)
    with pytest.warns(UserWarning, match="no release of the map goes in"):
        assert best_release(far, sd_speed=0.01, sd_angle=0.1)[2] == 0.0


def test_a_best_release_near_the_edge_is_warned_about_and_grids_must_be_even():
    res = shot_map(
        speed=Axis("speed", 7.3, 7.6, 12), angle=Axis("angle", 50.0, 56.0, 10), progress=False
    )
    with pytest.warns(UserWarning, match="within 2 sd of the map's"):
        best_release(res)
    logged = shot_map(
        speed=Axis("speed", 7.3, 7.6, 4, "log"), angle=Axis("angle", 50.0, 56.0, 3), progress=False
    )
    with pytest.raises(ValueError, match="evenly spaced"):
        probability_map(logged)
