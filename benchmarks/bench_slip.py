"""Benchmark: the Fig. 11 panel (360 x 240) with slipping (mu = 1) against the no-slip panel.

Both through ``rollax.basin.basin_map`` on all local devices, warm (best of ``--repeat``); the
compile time of the first call is listed separately. ``--preset fig12`` / ``fig13`` for the
other sections. ``--step-cost`` also times one DOPRI5 step (field + event samples, 512 lanes,
one device) of the rolling field and of the hybrid field with mixed modes, which is where the
slip panel's time goes.

    python benchmarks/bench_slip.py [--repeat 2] [--preset fig11] [--step-cost] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import rollax
from rollax.basin import basin_map, preset
from rollax.slip import SlipSettings

rollax.configure()  # one JAX CPU device per core, compile cache (before any JAX work)


def step_cost(lanes: int = 512, n_steps: int = 50) -> dict[str, float]:
    """ns per lane for one DOPRI5 step with the event functions at the stage states."""
    import jax
    import jax.numpy as jnp

    from rollax import dopri5, slip
    from rollax.basin import rolling_event_values, rolling_field
    from rollax.rim import Rim

    rim = jax.tree_util.tree_map(jnp.asarray, Rim(mu=1.0))
    rng = np.random.default_rng(1)
    x = rng.random((lanes, 4)) + np.array([1.0, 0.0, 35.0, 10.0])
    modes = rng.integers(0, 3, (lanes, 1)).astype(float)
    z = jnp.asarray(np.concatenate([x, np.full((lanes, 2), 1e-3), modes], axis=1))
    settings = slip.SlipSettings()
    tau, tol, u_layer = (jnp.asarray(float(getattr(settings, k)))
                         for k in ("tau_stick", "dir_tol", "u_layer"))

    # the batched sweep's state z = (6-D state, mode): the mode rides in the state
    def hybrid_args(z):
        return slip.HybridArgs(rim, z[6], tau, tol, u_layer)

    def hybrid_field(t, z):
        f = slip.hybrid_vector_field(t, z[:6], hybrid_args(z))
        return jnp.concatenate([f, (0.0 * z[6])[None]])

    def hybrid_events(t, z):
        return slip.HYBRID_EVENTS.fn(t, z[:6], hybrid_args(z))

    cases = {
        "rolling": (lambda t, y: rolling_field(t, y, rim),
                    lambda t, y: rolling_event_values(t, y, rim), z[:, :4]),
        "hybrid (mixed modes)": (hybrid_field, hybrid_events, z),
    }
    out = {}
    stages = jnp.asarray(dopri5.SAMPLE_STAGES)
    for name, (f, g, y0) in cases.items():
        h = jnp.full(lanes, 1e-4)

        def body(i, c, f=f, g=g, h=h):
            # the event values are kept per lane (a sum over all lanes inside the loop would
            # serialise it and double the measured cost)
            y, acc = c
            y1, _, _, _, gs = jax.vmap(lambda y, h: dopri5.step(f, 0.0, y, h, f(0.0, y), g))(y, h)
            return y1, acc + gs[:, stages]

        acc0 = jnp.zeros((lanes, len(dopri5.SAMPLE_STAGES), g(0.0, y0[0]).shape[0]))
        run = jax.jit(lambda y, body=body, acc0=acc0: jax.lax.fori_loop(0, n_steps, body, (y, acc0)))
        jax.block_until_ready(run(y0))
        best = np.inf
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(run(y0))
            best = min(best, time.perf_counter() - t0)
        out[name] = round(best / n_steps / lanes * 1e9, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--preset", default="fig11")
    ap.add_argument("--json", default=None)
    ap.add_argument("--step-cost", action="store_true")
    ap.add_argument("--lanes", type=int, default=512, help="lanes per device (10^4-10^5 on a GPU)")
    ap.add_argument("--chunk", type=int, default=1 << 16, help="starts per chunk")
    args = ap.parse_args()
    if args.step_cost:
        print("ns per lane and step:", json.dumps(step_cost()), flush=True)
    rim, kw = preset(args.preset, "none")
    rows = {}
    for name, slip in (("no slip", None), ("mu = 1", SlipSettings())):
        t0 = time.perf_counter()
        m = basin_map(rim, progress=False, slip=slip, lanes=args.lanes,
                      chunk_size=args.chunk, **kw)
        first = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            m = basin_map(rim, progress=False, slip=slip, lanes=args.lanes,
                      chunk_size=args.chunk, **kw)
            warm.append(time.perf_counter() - t0)
        rows[name] = dict(counts=m.counts(), first_s=round(first, 2), warm_s=round(min(warm), 3),
                          steps=int(np.sum(m.steps)))
        if slip is not None:
            rows[name]["slipped"] = int(np.sum(m.switches > 0))
        print(name, json.dumps(rows[name]), flush=True)
    ratio = rows["mu = 1"]["warm_s"] / rows["no slip"]["warm_s"]
    print(f"slip / no-slip warm time: {ratio:.1f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(rows=rows, ratio=ratio), fh, indent=2)


if __name__ == "__main__":
    main()
