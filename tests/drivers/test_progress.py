"""Progress bars reach their last step no later than the result is ready (issue 56), their
compile phase is labelled, and their rate comes from finished work only. The gaps are measured
and printed (the test log), not held to a time: the machine is shared."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax._drivers import _chunks
from rollax._integrate import _ensemble


class Decay(rollax.AbstractSystem):
    """x' = -k x, ended where x falls to 1/2 (at t = ln 2 / k)."""

    k: jax.Array = rollax.parameter(1.0)

    state_names = ("x",)
    events = (rollax.crossing("half", direction=-1),)

    def vector_field(self, t, y, mode):
        return -self.k * y

    def event_values(self, t, y, mode):
        return y[:1] - 0.5


class _Recording:
    """A tqdm stand-in's log: (time, n, postfix) at every update and the close."""

    log: list = []

    def __init__(self, *a, total=None, **k):
        self.total, self.n, self.postfix = total, 0, ""
        self.start_t = self.last_print_t = time.monotonic()
        self.last_print_n = 0
        self.smoothing = 0.1
        _Recording.log.append((time.monotonic(), 0, "open"))

    def _time(self):
        return time.monotonic()

    def update(self, k=1):
        self.n += k
        _Recording.log.append((time.monotonic(), self.n, self.postfix))

    def set_postfix_str(self, s="", refresh=True):
        self.postfix = s
        _Recording.log.append((time.monotonic(), self.n, s))

    def close(self):
        _Recording.log.append((time.monotonic(), self.n, "close"))


def _full_at(log, total):
    return next(t for t, n, _ in log if n >= total)


@pytest.fixture
def recording(monkeypatch):
    _Recording.log = []
    monkeypatch.setattr(_chunks, "tqdm", _Recording)
    return _Recording.log


def test_a_sweeps_bar_is_full_when_the_result_is_ready(recording):
    rng = np.random.default_rng(56)
    ks = np.sort(rng.uniform(0.5, 3.0, 5))
    xs = rng.uniform(0.8, 2.0, 40)
    res = rollax.sweep(
        Decay(),
        [rollax.Axis.of("k", ks), rollax.Axis.of("x", xs)],
        t1=20.0,
        progress=True,
        rtol=1e-10,
        atol=1e-10,
    )
    ready = time.monotonic()
    np.testing.assert_allclose(
        res["t"], np.log(2 * xs)[None, :] / ks[:, None], rtol=1e-7
    )  # x0 e^{-k t} = 1/2
    n = ks.size * xs.size
    full = _full_at(recording, n)
    assert full <= ready
    postfixes = [p for _, _, p in recording]
    assert "compiling or loading the kernel" in postfixes  # the compile phase is labelled
    before_last = max(t for t, k, _ in recording if k < n)
    print(
        f"sweep: last step {full - before_last:.3f} s after the one before; full "
        f"{ready - full:.3f} s before the result"
    )


def test_an_ensembles_bar_is_full_when_the_result_is_ready(monkeypatch):
    log = []

    class Bar(_Recording):
        pass

    _Recording.log = log
    monkeypatch.setattr("tqdm.auto.tqdm", Bar)
    y0s = np.linspace(0.8, 2.0, 300)[:, None]
    sol = rollax.solve_ensemble(Decay(k=jnp.asarray(1.3)), y0s, 0.0, 20.0, progress=True)
    ready = time.monotonic()
    np.testing.assert_allclose(sol.t, np.log(2 * y0s[:, 0]) / 1.3, rtol=1e-7)
    full = _full_at(log, 300)
    assert full <= ready and log[-1][2] == "close"
    assert any(p == "compiling or loading the kernel" for _, _, p in log)
    print(f"solve_ensemble: full {ready - full:.3f} s before the result")


def test_the_ensembles_default_bar_and_bad_progress():
    assert _ensemble.BAR_MIN == 10_000
    with pytest.raises(ValueError, match=r"^progress = 'yes' is not allowed"):
        rollax.solve_ensemble(Decay(), np.ones((3, 1)), 0.0, 1.0, progress="yes")


def test_the_time_left_counts_finished_work_only():
    """After a slow first report (a compile), the rate is that of the work that follows."""
    from tqdm import tqdm

    from rollax._core._announce import restart_clock

    bar = tqdm(total=1000, disable=False, mininterval=0, file=open("/dev/null", "w"))
    bar.start_t -= 60.0  # a minute of compiling
    bar.update(100)
    restart_clock(bar)
    bar.last_print_t -= 1.0  # then 100 more in a second
    bar.start_t -= 1.0
    bar.update(100)
    rate = bar.format_dict["n"] / (bar._time() - bar.start_t)
    assert 50 < rate < 250  # 200 in about a second; with the compile counted it read ~3/s
    bar.close()


def test_a_sweeps_tail_is_shown_with_its_modes_and_steps(recording, monkeypatch):
    """The last few starts of a hybrid sweep (balls that keep their bounce) are shown as what
    they are: "3 starts still running: 3 default; up to 412 steps", not as a stall."""
    import sys
    from pathlib import Path

    from rollax._integrate import queue

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from bouncing_ball import BouncingBall

    rng = np.random.default_rng(7)
    es = np.sort(np.concatenate([rng.uniform(0.3, 0.6, 197), [0.97, 0.98, 0.99]]))
    monkeypatch.setattr(queue, "_SLICE_S", 1e-6)  # slices of 8 iterations
    res = rollax.sweep(
        BouncingBall(n_bounces=12),
        [rollax.Axis.of("e", es)],
        y0={"z": 1.0, "v": 0.0},
        t1=100.0,
        progress=True,
        dt_max=0.02,
        rtol=1e-10,
        atol=1e-10,
    )
    # every ball made its 12 bounces, at the closed-form time
    t12 = [BouncingBall(e=e, n_bounces=12).impact_times(1.0, 12)[-1] for e in es]
    np.testing.assert_allclose(np.asarray(res["t"]).ravel(), t12, rtol=1e-8)
    tails = [p for _, _, p in recording if "still running" in p]
    assert tails, sorted({p for _, _, p in recording})
    assert any("default" in p and "steps" in p for p in tails), tails
    print("tail notes:", tails[:1], "...", tails[-1:])
