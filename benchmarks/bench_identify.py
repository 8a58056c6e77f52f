"""Benchmark: ``rollax.identify``'s robust fit against an independent SciPy fit (issue 32).

The records: ``tests/rim_records.py`` (NumPy equations of the rim paper, SciPy's DOP853 at
1e-12; 240 Hz; noise 1 mm on d and z, 2 mrad on alpha; starts around stable steady motions of
sections with w2 in 25-50 and w3 in 5-15 1/s, w1 in [-1, 1], k_d and k_r in [0, 0.05]; each
record ends when the ball leaves the rim, or at 20 s). The fits: k_d, k_r and the initial
state (beta, w1, w2, w3, alpha), the noise levels given.

* rollax: ``fit_rim`` (growing windows from the best of the data-read starts, the profile
  likelihoods of k_d and k_r included, or left out with ``--no-profile``);
* SciPy: ``benchmarks/scipy_rim_fit.py`` (``least_squares`` with forward sensitivities from
  the variational equations, the growing-window recipe of the issue, its own data-read start).

Both run on the same records in the same process, alternating. rollax fits each record twice:
the first compiles where the record's padded length is new ("first"), the second is warm; the
ratio is warm rollax over SciPy. Reports per record the wall times, their ratio, and the
agreement of the estimates in units of rollax's standard errors, and the medians.

    python benchmarks/bench_identify.py [--records 6] [--seed0 0] [--no-profile]

``--smoke``: one record cut to 1 s (tests/test_scripts_smoke.py); ``--out DIR`` is accepted and
unused (the results are printed only).
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

import rollax
from rollax.analysis.identification import fit_rim, rim_observations

ROOT = Path(__file__).resolve().parents[1]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=6)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--no-profile", dest="profile", action="store_false")
    ap.add_argument("--out", default=None, help="unused: the results are printed only")
    ap.add_argument("--smoke", action="store_true", help="one 1-s record (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.records = 1
    rollax.configure()
    records = _load("rim_records", ROOT / "tests" / "rim_records.py")
    ref = _load("scipy_rim_fit", ROOT / "benchmarks" / "scipy_rim_fit.py")
    print(
        f"machine: {platform.processor() or platform.machine()}, {jax.device_count()} JAX "
        f"CPU devices; profile likelihoods {'on' if args.profile else 'off'}"
    )
    rows = []
    cold = None
    for seed in range(args.seed0, args.seed0 + args.records):
        rec = records.make_record(seed, **(dict(t_max=1.0) if args.smoke else {}))
        t, v, sig = rec["t"], rec["values"], rec["sigma"]
        truth = np.concatenate([[rec["k_d"], rec["k_r"]], rec["y0"]])
        obs = rim_observations(t, v[:, 0], v[:, 1], v[:, 2], sigma=tuple(sig))
        # the first fit of a record compiles where its padded length is new (a size class:
        # rollax._drivers._identify._size_class); the second is the warm one
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_rim(obs, profile=args.profile)
        first = time.perf_counter() - t0
        cold = first if cold is None else cold
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_rim(obs, profile=args.profile)
        t_rollax = time.perf_counter() - t0
        s = ref.scipy_fit(t, v, sig)
        agree = (np.asarray(s["values"]) - fit.values) / fit.std_errors
        pull_r = (fit.values - truth) / fit.std_errors
        pull_s = (np.asarray(s["values"]) - truth) / np.asarray(s["std_errors"])
        rows.append(
            (
                seed,
                t[-1],
                t_rollax,
                s["wall_time"],
                np.max(np.abs(agree)),
                np.max(np.abs(pull_r)),
                np.max(np.abs(pull_s)),
                fit.status,
            )
        )
        print(
            f"record {seed}: {t[-1]:5.1f} s, {len(t)} samples | rollax first {first:6.2f} "
            f"s, warm {t_rollax:6.2f} s "
            f"({fit.status}, chi2/dof {fit.chi2_per_dof:.3f}) | SciPy {s['wall_time']:6.2f} s "
            f"| ratio {t_rollax / s['wall_time']:.2f} | max |rollax - SciPy| "
            f"{np.max(np.abs(agree)):.3f} SE | max pull rollax {np.max(np.abs(pull_r)):.2f}, "
            f"SciPy {np.max(np.abs(pull_s)):.2f}",
            flush=True,
        )
    r = np.array([row[2:7] for row in rows], float)
    print(f"cold (the first fit in the process, compiling): {cold:.1f} s")
    print(
        f"median over {len(rows)} records: rollax (warm) {np.median(r[:, 0]):.2f} s, SciPy "
        f"{np.median(r[:, 1]):.2f} s, ratio {np.median(r[:, 0] / r[:, 1]):.2f} "
        f"(range {np.min(r[:, 0] / r[:, 1]):.2f}-{np.max(r[:, 0] / r[:, 1]):.2f}); "
        f"largest disagreement {np.max(r[:, 2]):.3f} SE"
    )


if __name__ == "__main__":
    main()
