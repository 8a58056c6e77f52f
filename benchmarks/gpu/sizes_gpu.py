"""On a GPU: does ``solve_ensemble(backend="fused")`` compile its kernels once for every
ensemble size up to 4096 (``_fused.rows``, stop 44), and do the padded runs give the unpadded
rows' results? Prepared in stop 44 for the next GPU session.

The bouncing ball (examples/bouncing_ball.py: 4 impacts; a reset map, so all four kernels)
from generated heights and speeds, N = 300, 1000, 4096, 300 again, 5000 (a class of its own:
8192 rows), in one process with the compile cache off. For each call: wall time, the compiles
JAX logged (``jax_log_compiles``), and the first 300 rows' results against the first call's
(bit for bit). JSON on stdout (one line per call), a summary at the end.

    python3 benchmarks/gpu/sizes_gpu.py [N ...]   # default sizes: 300 1000 4096 300 5000
"""

import json
import logging
import sys
import time
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_compilation_cache", False)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import rollax  # noqa: E402
from bouncing_ball import BouncingBall  # noqa: E402


class _Count(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.msgs = []

    def emit(self, record):
        m = record.getMessage()
        if "Finished XLA compilation" in m or "Compiling" in m:
            self.msgs.append(m[:160])


def main():
    rng = np.random.default_rng(44)
    y = np.stack([rng.uniform(0.5, 2.0, 5000), rng.uniform(-1.0, 1.0, 5000)], axis=1)
    system = BouncingBall()
    handler = _Count()
    logging.getLogger("jax").addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    first = None
    summary = []
    sizes = [int(a) for a in sys.argv[1:]] or [300, 1000, 4096, 300, 5000]
    for n in sizes:
        handler.msgs.clear()
        t = time.perf_counter()
        sol = rollax.solve_ensemble(system, y[:n], 0.0, 50.0, backend="fused")
        wall = time.perf_counter() - t
        k = min(sizes)
        head = {f: np.asarray(getattr(sol, f))[:k] for f in ("t", "y", "status", "steps")}
        if first is None:
            first = head
        same = all(np.array_equal(head[f], first[f]) for f in head)
        row = dict(
            n=n,
            wall_s=round(wall, 3),
            compiles=len(handler.msgs),
            kernel_compiles=sum("pallas" in m.lower() or "run" in m for m in handler.msgs),
            first_rows_equal=bool(same),
            statuses={int(k): int(v) for k, v in zip(*np.unique(sol.status, return_counts=True))},
        )
        print(json.dumps(row), flush=True)
        summary.append(row)
    # the expectation: compiles only on the first call (n = 300) and for n = 5000 (8192 rows)
    later = [r["wall_s"] for r, n in zip(summary[1:], sizes[1:]) if n <= 4096]
    ok = all(w < 0.2 * summary[0]["wall_s"] for w in later)
    print(
        json.dumps(
            dict(one_compile_up_to_4096=ok, all_equal=all(r["first_rows_equal"] for r in summary))
        )
    )


if __name__ == "__main__":
    main()
