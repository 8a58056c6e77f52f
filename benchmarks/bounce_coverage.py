"""Accuracy study: how often the bounce identification's 95 % intervals cover the truth, on the
test records' geometries with the tests' own camera noise and with new draws of it (issue 58).

``tests/bounce_records.make_record(seed, kind)`` draws a bounce's geometry, parameters and
camera noise from one generator. Draw 0 is the record exactly as the tests make it; draw ``k >=
1`` keeps every draw but the noise (the centre's and the spin's, the generator's only 2-D
normal draws), which comes from a second generator seeded ``[seed, kind, head_on, 1000 + k]``.
So the draws differ in their noise only, and their coverages say whether a count like the slow
test's 34 of 40 is the estimator's or its noise's. Each record is fitted as
``tests/analysis/test_shot_identify.py`` fits it (``fit_bounce``, noise levels estimated).

    python benchmarks/bounce_coverage.py --seeds 100 140 --draws 0 1 2 [--out DIR]
    python benchmarks/bounce_coverage.py --smoke --out DIR   # one record, draws 0 and 1

Writes ``bounce_coverage.json`` (per record and draw: truth, estimate, interval, covered,
the profile's level) and ``bounce_coverage.png`` (coverage per draw with binomial 95 % bars).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _noise_from(k: int):
    """A ``default_rng`` for ``bounce_records`` whose 2-D normal draws (the camera noise) come
    from a second generator (``k = 0``: the tests' own noise)."""
    orig = np.random.default_rng

    class _Gen:
        def __init__(self, seed):
            self._g = orig(seed)
            self._n = self._g if k == 0 else orig([*seed, 1000 + k])

        def normal(self, *args, size=None, **kw):
            if size is not None and np.ndim(size) == 1 and len(size) == 2:
                return self._n.normal(*args, size=size, **kw)
            return self._g.normal(*args, size=size, **kw)

        def __getattr__(self, name):
            return getattr(self._g, name)

    class _Random:  # (only bounce_records' own `np.random.default_rng` is replaced)
        def __getattr__(self, name):
            return getattr(np.random, name)

        def default_rng(self, seed=None):
            return _Gen(seed) if isinstance(seed, list) else orig(seed)

    return _Random()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", nargs=2, type=int, default=(100, 140), metavar=("FIRST", "END"))
    ap.add_argument("--draws", nargs="+", type=int, default=(0, 1, 2))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "runs" / "bounce_coverage")
    ap.add_argument("--smoke", action="store_true", help="one record and two draws (tests)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.seeds, args.draws = (100, 101), (0, 1)
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "analysis")]
    import bounce_records
    import test_shot_identify

    numpy_module = bounce_records.np
    rows = []
    t0 = time.time()
    for k in args.draws:

        class _Np:  # numpy with the replaced generator, for bounce_records only
            random = _noise_from(k)

            def __getattr__(self, name):
                return getattr(numpy_module, name)

        bounce_records.np = _Np()
        try:
            for r in test_shot_identify._coverage(range(*args.seeds)):
                rows.append({"draw": k, **{n: v for n, v in r.items()}})
        finally:
            bounce_records.np = numpy_module
        print(f"draw {k}: {time.time() - t0:.0f} s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bounce_coverage.json").write_text(
        json.dumps(
            {"seeds": list(args.seeds), "draws": list(args.draws), "rows": rows},
            indent=1,
            default=float,
        )  # fmt: skip
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.2), dpi=120)
    low = 0.6
    for j, key in enumerate(("e", "mu")):
        for i, k in enumerate(args.draws):
            hit = [r[f"{key}_covered"] for r in rows if r["draw"] == k]
            p, n = float(np.mean(hit)), len(hit)
            err = 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / n)  # (normal approximation)
            yerr = [[p - max(p - err, 0.0)], [min(p + err, 1.0) - p]]
            ax.errorbar(i + 0.15 * (2 * j - 1), p, yerr=yerr, fmt="os"[j], color="C" + str(j),
                        capsize=3, label=key if i == 0 else None)  # fmt: skip
            low = min(low, p - err)
            print(f"draw {k}: {key} covered {sum(hit)}/{n}")
    ax.axhline(0.95, color="k", lw=0.6, ls="--")
    ax.axhline(0.85, color="#d62728", lw=0.6, ls=":")
    ax.set_xticks(range(len(args.draws)))
    ax.set_xticklabels([f"draw {k}" + (" (tests')" if k == 0 else "") for k in args.draws])
    ax.set_ylabel("coverage of the 95 % intervals [1]")
    ax.set_ylim(max(low - 0.05, 0.0), 1.02)
    ax.set_xlim(-0.5, len(args.draws) - 0.5)
    ax.set_title(f"bounce records {args.seeds[0]}-{args.seeds[1] - 1}: the same geometries, "
                 "new camera noise", fontsize=8)  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "bounce_coverage.png")
    print(f"wrote {args.out}/bounce_coverage.json and .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
