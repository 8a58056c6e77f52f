"""Benchmark: what a bounce fit's Jacobian costs with and without the shot's rim modes (issue 58).

``rollax identify shot`` (:func:`rollax.analysis.identification.fit_bounce`) fits the shot's
flight and impacts through ``jax.jacfwd`` of :func:`rollax.solve` (forward mode, the samples
of a filmed bounce saved). ``Shot(rim_modes=False)`` leaves out the rim's rolling and slipping
(a bounce leaves every contact): this measures, in one process, the compile time and the warm
call of that Jacobian (restitution and friction of the rim, a generated rim bounce of
``tests/bounce_records.py``) for ``Shot(rim_modes=False)`` and for the full ``Shot()``, and
checks that the two Jacobians agree. CPU figures are ratios (same process); the compile cache
is off for this process (the compile is what is measured).

    python benchmarks/bench_bounce_fit.py [--repeat 30] [--out DIR] [--smoke]

``--out DIR`` writes ``bounce_fit.json`` there; ``--smoke``: 2 repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ["ROLLAX_CACHE_DIR"] = "off"  # (read on import: the compile itself is measured)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import rollax  # noqa: E402
from rollax.systems import Shot  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bounce_records import make_record  # noqa: E402


def measure(rim_modes: bool, rec, repeat: int):
    system = Shot(rim_modes=rim_modes)
    ts, y0 = jnp.asarray(rec.t), jnp.asarray(rec.y0)

    def centres(p):
        s = eqx.tree_at(lambda s: (s.e_rim, s.mu_rim), system, (p[0], p[1]))
        sol = rollax.solve(s, y0, ts[0], ts[-1], ts=ts, rtol=1e-10, atol=1e-10,
                           max_steps=16384, adjoint=diffrax.ForwardMode())  # fmt: skip
        return sol.ys[:, :3]

    p = jnp.array([0.62, 0.12])
    t0 = time.perf_counter()
    jac = jax.jit(jax.jacfwd(centres)).lower(p).compile()
    compile_s = time.perf_counter() - t0
    J = jac(p).block_until_ready()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        jac(p).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return compile_s, best, np.asarray(J)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--out", default=None, help="write bounce_fit.json here")
    ap.add_argument("--smoke", action="store_true", help="2 repeats")
    args = ap.parse_args(argv)
    if args.smoke:
        args.repeat = 2
    rec = make_record(3, "rim", spin_filmed=False, hz=240)
    out = {}
    for rim_modes in (False, True):
        print(f"bench_bounce_fit: compiling the Jacobian, rim_modes={rim_modes} ...", flush=True)
        c, w, J = measure(rim_modes, rec, args.repeat)
        out[f"rim_modes={rim_modes}"] = dict(compile_s=round(c, 2), warm_ms=round(1e3 * w, 3))
        out.setdefault("_J", []).append(J)
    J0, J1 = out.pop("_J")
    out["jacobians_agree_to"] = float(np.abs(J0 - J1).max())
    a, b = out["rim_modes=False"], out["rim_modes=True"]
    out["ratio_full_over_flight"] = dict(
        compile=round(b["compile_s"] / a["compile_s"], 2),
        warm=round(b["warm_ms"] / a["warm_ms"], 2),
    )
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "bounce_fit.json").write_text(json.dumps(out, indent=2))
    assert out["jacobians_agree_to"] < 1e-8, out
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
