"""Issue 34 (stop 40): 500 eager rollax.solve calls on the rim, per-call time (run with
PYTHONPATH=.base/src for the code before issue 34)."""

import importlib
import time

import numpy as np

import rollax

try:
    Rim = importlib.import_module("rollax.models.rim").Rim
except ImportError:  # the code before issue 34
    Rim = importlib.import_module("rollax.rim").Rim
from rollax.systems import RimRolling

rng = np.random.default_rng(1)
x0 = np.stack(
    [rng.uniform(1.0, 1.4, 600), rng.uniform(-3, 3, 600), np.full(600, 35.0), np.full(600, 10.0)], 1
)
for i in range(20):
    rollax.solve(RimRolling(Rim(k_d=1e-3 * (i % 7))), x0[i], 0.0, 5.0).t.block_until_ready()


def loop():
    for i in range(20, 520):
        rollax.solve(RimRolling(Rim(k_d=1e-3 * (i % 7))), x0[i], 0.0, 5.0).t.block_until_ready()


t = time.perf_counter()
loop()
print("per call ms", (time.perf_counter() - t) / 500 * 1e3)
