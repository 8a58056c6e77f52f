"""The free-throw shot map (issue 40) on a GPU: each backend's cold and warm time, and its
outcomes and contact counts against a reference map made on a CPU.

    python benchmarks/gpu/shot_gpu.py --ref REF.npz [--backend queue fused] [--repeat 3]
    python benchmarks/gpu/shot_gpu.py --make-ref REF.npz      # on the CPU: write the reference

The map is ``rollax.analysis.shot.shot_map(Shot())`` with its defaults (360 x 240 releases,
no spin, rtol = atol = 1e-9, t_max = 4 s); ``--spin`` sets a constant backspin (Hz).
``--grid`` changes its size (the reference must have been made with the same). Each backend:
the first map (compile included: ``ROLLAX_CACHE_DIR=off``), then ``--repeat`` warm maps; the
outcome of every release and the rim and board contact counts against the reference (how
many differ, and the first few that do). ``--smoke``: a 12 x 8 map, the queue, one warm run.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")  # honest compile times

import numpy as np  # noqa: E402

from rollax import Axis  # noqa: E402
from rollax.analysis.shot import shot_map  # noqa: E402
from rollax.systems.shot import Shot  # noqa: E402


def the_map(grid, spin, **options):
    return shot_map(
        Shot(),
        speed=Axis("speed", 6.6, 8.0, grid[0]),
        angle=Axis("angle", 40.0, 64.0, grid[1]),
        spin=spin,
        progress=False,
        **options,
    )


def arrays(m) -> dict:
    return dict(
        outcome=np.asarray(m.outcome),
        rim_contacts=np.asarray(m.summary["rim_contacts"]),
        board_contacts=np.asarray(m.summary["board_contacts"]),
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", nargs="+", default=["queue", "fused"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--grid", type=int, nargs=2, default=(360, 240))
    ap.add_argument("--spin", type=float, default=0.0, help="backspin [Hz]")
    ap.add_argument("--ref", type=Path, default=None, help="reference map (.npz) to compare")
    ap.add_argument("--make-ref", type=Path, default=None, help="write the reference here")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="folder for shot_gpu.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.grid, args.repeat, args.backend = (12, 8), 1, ["queue"]
    if args.out is not None and args.json is None:
        args.out.mkdir(parents=True, exist_ok=True)
        args.json = args.out / "shot_gpu.json"
    import jax

    if args.make_ref is not None:
        t0 = time.perf_counter()
        m = the_map(args.grid, args.spin)
        np.savez_compressed(args.make_ref, grid=np.asarray(args.grid), spin=args.spin, **arrays(m))
        print(f"reference: {m.counts()} in {time.perf_counter() - t0:.1f} s -> {args.make_ref}")
        return 0
    ref = dict(np.load(args.ref)) if args.ref is not None else None
    res: dict = dict(device=str(jax.devices()[0]), jax=jax.__version__, grid=list(args.grid))
    res["spin"] = args.spin
    for backend in args.backend:
        row: dict = {}
        try:
            t0 = time.perf_counter()
            m = the_map(args.grid, args.spin, backend=backend)
            row["cold_s"] = round(time.perf_counter() - t0, 3)
            warm = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                m2 = the_map(args.grid, args.spin, backend=backend)
                warm.append(round(time.perf_counter() - t0, 4))
                assert np.array_equal(np.asarray(m2.outcome), np.asarray(m.outcome))
            row.update(warm_s=warm, counts=m.counts())
            if warm:
                n = int(np.prod(args.grid))
                row["ns_per_release"] = round(min(warm) / n * 1e9, 1)
            got = arrays(m)
            if ref is not None and tuple(ref["grid"]) == tuple(args.grid):
                for k, v in got.items():
                    bad = np.argwhere(v != ref[k])
                    row[f"{k}_differ"] = int(len(bad))
                    row[f"{k}_first_differing"] = [
                        [*map(int, i), int(v[tuple(i)]), int(ref[k][tuple(i)])] for i in bad[:5]
                    ]
        except Exception as e:  # a backend that cannot run the shot is a result too
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        res[backend] = row
        print(backend, json.dumps(row), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
