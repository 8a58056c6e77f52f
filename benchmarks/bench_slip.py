"""Benchmark: the Fig. 11 panel (360 x 240) with slipping (mu = 1) against the no-slip panel.

Both through ``rollax.analysis.basin.basin_map`` on all local devices, warm (best of ``--repeat``); the
compile time of the first call is listed separately. ``--preset fig12`` / ``fig13`` for the
other sections. ``--step-cost`` also times one DOPRI5 step (field, and event samples on the
continuous extension, 512 lanes, one device) of the rolling ball and of the slipping one with
lanes in all three modes: the model's share of a kernel step.

    python benchmarks/bench_slip.py [--repeat 2] [--preset fig11] [--step-cost] [--json out.json]

``--smoke``: 3 x 3 starts, 16 lanes, no repeat, and ``--step-cost`` on 16 lanes for 2 steps
(tests/test_scripts_smoke.py); ``--out DIR``: write the JSON into DIR/bench_slip.json (unless
``--json`` names a file).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import rollax
from rollax.analysis.basin import Axis, basin_map, preset
from rollax.models.slip import SlipSettings

rollax.configure()  # one JAX CPU device per core, compile cache (before any JAX work)


def step_cost(
    lanes: int = 512, n_steps: int = 50, n_samples: int = 4, runs: int = 7
) -> dict[str, float]:
    """ns per lane for one DOPRI5 step (the new state's event values from the fused last
    stage) with and without the ``n_samples - 1`` dense event samples inside the step: the
    model's share of a kernel step, without the queue's bookkeeping. The rolling ball, and
    the slipping one with lanes in all three modes."""
    import jax
    import jax.numpy as jnp

    from rollax._integrate import dopri5
    from rollax.models.rim import Rim
    from rollax.systems import RimRolling, RimSlipping

    rng = np.random.default_rng(1)
    x = rng.random((lanes, 4)) + np.array([1.0, 0.0, 35.0, 10.0])
    cases = {
        "rolling": (RimRolling(Rim()), jnp.asarray(x), jnp.zeros(lanes, jnp.int32)),
        "slipping (mixed modes)": (
            RimSlipping.from_settings(Rim(mu=1.0), SlipSettings()),
            jnp.asarray(np.concatenate([x, np.full((lanes, 2), 1e-3)], axis=1)),
            jnp.asarray(rng.integers(0, 3, lanes), jnp.int32),
        ),
    }
    out = {}
    for name, (system, y0, modes) in cases.items():
        for K in (1, n_samples):

            def one(y, mode, system=system, K=K):
                f = lambda t, y_: system.vector_field(t, y_, mode)  # noqa: E731
                fg = lambda t, y_: system.field_and_events(t, y_, mode)  # noqa: E731
                h = 1e-4
                y1, _, ks, _, g1 = dopri5.step(f, 0.0, y, h, f(0.0, y), fg=fg)
                coef = dopri5.dense_coefficients(y, y1, ks, h)
                thetas = np.linspace(0.0, 1.0, K + 1)[1:-1]
                gs = [
                    system.event_values(h * th, dopri5.dense_eval(y, coef, th), mode)
                    for th in thetas
                ]
                return y1, jnp.stack(gs + [g1])

            def body(i, c, one=one):
                # the event values are kept per lane (a sum over all lanes inside the loop would
                # serialise it); the barrier keeps XLA from folding the samples into the sum
                y, acc = c
                y1, g = jax.vmap(one)(y, modes)
                g = jax.lax.optimization_barrier(g)
                return y1, acc + jnp.sum(g.reshape(lanes, -1), axis=1)

            run = jax.jit(
                lambda y, body=body: jax.lax.fori_loop(0, n_steps, body, (y, jnp.zeros(lanes)))
            )
            jax.block_until_ready(run(y0))
            best = np.inf
            for _ in range(runs):
                t0 = time.perf_counter()
                jax.block_until_ready(run(y0))
                best = min(best, time.perf_counter() - t0)
            out[f"{name}, {K} sample{'s' if K > 1 else ''}"] = round(
                best / n_steps / lanes * 1e9, 1
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--preset", default="fig11")
    ap.add_argument("--json", default=None)
    ap.add_argument("--step-cost", action="store_true")
    ap.add_argument("--lanes", type=int, default=512, help="lanes per device (10^4-10^5 on a GPU)")
    ap.add_argument(
        "--chunk", type=int, default=1 << 17, help="starts per chunk (the library default)"
    )
    ap.add_argument("--backend", default="auto", help="auto, queue or fused")
    ap.add_argument("--out", default=None, help="folder for the JSON (bench_slip.json)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.repeat, args.lanes, args.step_cost = 1, 16, True
    if args.out and not args.json:
        os.makedirs(args.out, exist_ok=True)
        args.json = os.path.join(args.out, "bench_slip.json")
    if args.step_cost:
        cost = step_cost(lanes=16, n_steps=2, runs=1) if args.smoke else step_cost()
        print("ns per lane and step:", json.dumps(cost), flush=True)
    rim, kw = preset(args.preset, "none")
    if args.smoke:
        kw["x"], kw["y"] = Axis("beta", 0.8, 1.8, 3), Axis("omega1", -20.0, 20.0, 3)
    rows = {}
    for name, slip in (("no slip", None), ("mu = 1", SlipSettings())):
        t0 = time.perf_counter()
        m = basin_map(
            rim,
            progress=False,
            slip=slip,
            lanes=args.lanes,
            chunk_size=args.chunk,
            backend=args.backend,
            **kw,
        )
        first = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            m = basin_map(
                rim,
                progress=False,
                slip=slip,
                lanes=args.lanes,
                chunk_size=args.chunk,
                backend=args.backend,
                **kw,
            )
            warm.append(time.perf_counter() - t0)
        rows[name] = dict(
            counts=m.counts(),
            first_s=round(first, 2),
            warm_s=round(min(warm), 3),
            steps=int(np.sum(m.steps)),
        )
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
