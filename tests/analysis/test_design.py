"""Experiment design on the rim (issue 60): which throw to film to learn k_d and k_r.

Independent routes: SciPy (``tests/rim_records.py``, DOP853 at 1e-12) says which throws leave
the rim before the record ends; actual fits (``rollax.identify``) of simulated records check the
standard errors the design predicted; the truths and throws are generated (fixed seeds).
"""

from __future__ import annotations

import numpy as np
import pytest

from rim_records import integrate
from rollax.analysis.design import design_rim, rim_starts, rim_study
from rollax.models.rim import Rim


def _truth(seed):
    rng = np.random.default_rng(seed)
    return Rim(k_d=float(rng.uniform(0.0, 0.05)), k_r=float(rng.uniform(0.0, 0.05)))


def test_the_throws_that_leave_the_rim_are_scipys():
    C = rim_starts(24, seed=7)
    d = design_rim(C, rim=Rim(k_d=0.02, k_r=0.02), progress=False)
    for i, y0 in enumerate(C):
        _, t_end, separated = integrate(y0, 0.02, 0.02, 3.0)
        if abs(t_end - 3.0) < 1e-3:
            continue  # (on the edge: the two tolerances may disagree)
        assert d.ends_early[i] == separated, (i, t_end)
        assert np.isfinite(d.loss[i]) == (not separated)
    assert 0 < d.ends_early.sum() < len(C)  # the draw holds both kinds
    assert np.all(np.isinf(d.loss[d.order][-int(d.ends_early.sum()) :]))


def test_the_predicted_errors_are_the_fits_own():
    out = rim_study(_truth(3000), rim_starts(48, seed=3000), n_random=3, seed=1)
    for rec in [out["designed"], *out["random"]]:
        assert rec["status"] == "converged"
        np.testing.assert_allclose(rec["se_predicted"], rec["se_fit"], rtol=0.3)
    se = lambda r: np.prod(r["se_fit"])  # noqa: E731
    assert se(out["designed"]) <= min(se(r) for r in out["random"])


@pytest.mark.slow  # ~8 min: 20 truths, 22 fitted records each
def test_designed_records_beat_random_ones_on_generated_truths():
    ratios, won, agree, lines = [], 0, [], []
    for k in range(20):
        out = rim_study(_truth(2000 + k), rim_starts(200, seed=2000 + k), n_random=20, seed=k)
        D, R = out["designed"], out["random"]
        assert D["status"] == "converged", k
        agree.append(np.max(np.abs(D["se_predicted"] / D["se_fit"] - 1)))
        med = np.median([np.abs(r["error"]) for r in R], axis=0)
        ratios.append(np.abs(D["error"]) / med)
        won += np.prod(D["se_fit"]) < np.median([np.prod(r["se_fit"]) for r in R])
        lines.append(f"truth {k}: |error| / random median {ratios[-1]}, "
                     f"corr {D['corr_fit']:.5f} vs {np.median([r['corr_fit'] for r in R]):.5f}")  # fmt: skip
    print("\n".join(lines))
    assert max(agree) < 0.3  # predicted and fitted standard errors within 30 %
    assert won >= 19  # the designed record's error ellipse is smaller than the median random one
    assert np.all(np.median(ratios, axis=0) < 0.8)  # and its errors smaller


@pytest.mark.slow  # ~2 min: the forward-over-forward gradient compiles
def test_refining_a_throw_by_gradient_gives_what_it_predicts():
    from rollax._drivers._design import refine_design, simulate_record
    from rollax.analysis.design import CAMERA_SIGMA, rim_times
    from rollax.analysis.design import _fit_record
    from rollax.systems.rim import RimTracked

    est = Rim(k_d=0.02, k_r=0.02)
    C = rim_starts(64, seed=11)
    d = design_rim(C, rim=est, progress=False)
    y0 = C[d.best]
    box = {"beta": (y0[0] - 0.05, y0[0] + 0.05), "omega1": (-1.0, 1.0),
           "omega2": (0.9 * y0[2], 1.1 * y0[2]), "omega3": (0.9 * y0[3], 1.1 * y0[3])}  # fmt: skip
    t = rim_times()
    r = refine_design(RimTracked(est), ["k_d", "k_r"], y0, t, box, observe="camera",
                      sigma=CAMERA_SIGMA, max_iter=10, progress=False)  # fmt: skip
    assert r.loss < d.loss[d.best]
    _, t_end, separated = integrate(r.y0, 0.02, 0.02, 3.0)
    assert not separated  # the refined throw stays on the rim (SciPy)
    obs = simulate_record(RimTracked(est), r.y0, t, observe="camera", sigma=CAMERA_SIGMA, seed=2)
    f = _fit_record(RimTracked(est), obs, ("k_d", "k_r"), r.y0)
    assert f.status == "converged"
    np.testing.assert_allclose(r.std_errors, f.std_errors[:2], rtol=0.3)


@pytest.mark.slow  # ~5 min: both directions' rival fits compile, and 8 fit_slide runs
def test_the_predicted_pressure_model_contrast_is_what_fit_slide_finds():
    # T-optimal design for the friction paper's contact pressures: the expected chi^2
    # difference against what fit_slide's two fits of a simulated record give
    import warnings

    import rollax
    from rollax._drivers._design import discriminate
    from rollax.analysis.design import rim_times, slide_starts_discrimination
    from rollax.analysis.identification import DECISIVE_DCHI2, fit_slide
    from rollax.models.friction.exact import exact_law
    from rollax.models.friction.sliding import SlidingBody
    from rollax.systems.friction import Sliding

    rng = np.random.default_rng(60)
    S = np.concatenate(
        [[[1.0, 0.0]], np.stack([rng.uniform(0.4, 2.0, 5), rng.uniform(2, 30, 5)], 1)]
    )
    both = slide_starts_discrimination(S)
    assert both.delta_chi2[0] < 1e-6  # no spin: the models give the same force (cannot choose)
    assert both.best != 0 and both.delta_chi2[both.best] > DECISIVE_DCHI2
    mods = {p: Sliding(SlidingBody(exact_law(p, mu=0.3, P=9.81, R=0.05), m=1.0, j=0.5,
                                   R_bar=0.1)) for p in ("uniform", "hertz")}  # fmt: skip
    t = rim_times(1.5, 100.0)

    def states(p):
        return np.stack([S[:, 0], 0 * S[:, 0], S[:, 1] * float(mods[p].body.law.rho)], 1)

    for truth, rival in (("hertz", "uniform"), ("uniform", "hertz")):
        C = states(truth)
        d = discriminate(mods[truth], mods[rival], ["mu"], C, t, observe="record",
                         sigma=(0.005, 0.1), fit_y0=("u_x", "rho_omega_z"),
                         rival_candidates=states(rival), event_cut=0.9)  # fmt: skip
        assert np.all(d.delta_chi2 >= both.delta_chi2 - 1e-9)  # both: the smaller direction
        for i in (both.best, int(rng.integers(1, len(S)))):
            obs = rollax.simulate_record(mods[truth], C[i], t, observe="record",
                                         sigma=(0.005, 0.1), seed=i)  # fmt: skip
            stop = float(rollax.solve(mods[truth], C[i], 0.0, 10.0).t)
            keep = obs.t <= 0.9 * stop
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fit_slide(obs.t[keep], obs.values[keep, 0], obs.values[keep, 1],
                                sigma=(0.005, 0.1), progress=False)  # fmt: skip
            realised = out["chi2"][rival] - out["chi2"][truth]
            T = d.delta_chi2[i]
            print(f"{truth} start {S[i]}: predicted {T:.1f}, realised {realised:.1f}")
            assert abs(realised - T) <= 0.3 * T + 4 * np.sqrt(T) + 4
            assert out["best"] == truth and out["decided"] == (realised >= DECISIVE_DCHI2)


@pytest.mark.slow  # ~4 min: the shot's Jacobian through the impact, and fit_bounce, compile
def test_the_shot_design_says_which_spin_lets_a_board_bounce_tell_mu():
    # information through the impact (a reset): the restitution is told by any bounce, the
    # friction only by one that slides, which takes spin; with the spin filmed, fit_bounce of
    # a simulated record of the best release gives the standard errors the design predicted
    # (without it, a stuck impact with another spin fits as well: a switch of outcome that
    # the local information cannot see, and fit_bounce bounds mu from below only)
    import dataclasses
    import warnings

    import rollax
    from bounce_records import make_record
    from rollax.analysis.identification import bounce_observations, fit_bounce
    from rollax.systems.shot import Shot

    rec = make_record(3, "board", hz=240.0, sigma=0.003, spin_filmed=False)
    shot = dataclasses.replace(Shot(), rim_modes=False)
    C = np.repeat(rec.y0[None], 5, 0)
    C[:, 6] = C[:, 8] = 0.0
    C[:, 7] = [0.0, -15.0, -80.0, 15.0, 80.0]  # backspin and topspin, rad/s
    sig = (0.003,) * 3 + (1.0,) * 3
    kw = dict(observe="camera_spin", sigma=sig, progress=False)
    e = rollax.design(shot, ["e_board"], C, rec.t, **kw)
    assert np.all(np.isfinite(e.loss)) and np.all(e.std_errors_record[:, 0] < 0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = rollax.design(shot, ["e_board", "mu_board"], C, rec.t, **kw)
    print(d.summary())
    assert np.isinf(d.loss[:2]).all() and np.isfinite(d.loss[[2, 4]]).all()  # slow spin sticks
    i = d.best
    obs = rollax.simulate_record(shot, C[i], rec.t, observe="camera_spin", sigma=sig, seed=1)
    bo = bounce_observations(obs.t, obs.values[:, :3], obs.values[:, 3:], sigma=0.003,
                             sigma_spin=1.0)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = fit_bounce(bo, shot=Shot(), progress=False)
    assert f.status == "converged", f.warnings
    np.testing.assert_allclose(f.std_errors[:2], d.std_errors_record[i], rtol=0.3)
