"""Per-lane cost of Shot.event_values and Shot.vector_field on 4096 flying lanes (stop 42):
run with PYTHONPATH at the code to measure."""

import time, jax, jax.numpy as jnp, numpy as np
from rollax.systems.shot import Shot
from rollax.analysis.shot import release

s = Shot()
n = 4096
y = jnp.stack([release(7.0 + 0.001 * i, 50.0) for i in range(8)] * (n // 8))
mode = jnp.zeros(n, jnp.int32)
ev = jax.jit(jax.vmap(lambda y, m: s.event_values(0.0, y, m)))
vf = jax.jit(jax.vmap(lambda y, m: s.vector_field(0.0, y, m)))
for f, name in ((ev, "events"), (vf, "field")):
    f(y, mode).block_until_ready()
    ts = []
    for _ in range(50):
        t = time.perf_counter()
        f(y, mode).block_until_ready()
        ts.append(time.perf_counter() - t)
    print(name, round(np.median(ts) / n * 1e9, 1), "ns/lane")
