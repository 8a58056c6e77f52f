"""Benchmark: the free-throw shot map (issue 40) against the Fig. 11 basin panel, on this CPU.

The map: ``rollax.analysis.shot.shot_map(Shot())`` with its defaults, a free throw (released
2.1 m high, 4.19 m in front of the hoop's centre, no spin) over 360 x 240 releases, speed
6.6-8.0 m/s x angle 40-64 degrees, rtol = atol = 1e-9, t_max = 4 s. The reference: the Fig. 11
basin panel, ``rollax.analysis.basin.basin_map(Rim(), progress=False)`` with its defaults
(360 x 240 starts), in the same process.

* **cold**: the first shot map (import done; compile included: the compile cache is off,
  ``ROLLAX_CACHE_DIR=off``), then the first basin panel;
* **warm**: ``--repeat`` rounds, shot map and basin panel alternating (so that both see the
  same load), median of each and the ratio per round;
* **steps**: ``rollax.solve_ensemble`` on the map's own starts (``sol.steps``: accepted steps of
  every run, across its impacts), timed warm too, and the outcomes checked against the map's;
  the basin panel's steps from ``BasinMap.steps``.

The machine's load average is recorded around every timing (the machine is shared).

    python benchmarks/bench_shot.py [--repeat 5] [--out DIR]

``--smoke``: a 12 x 8 map and a 3 x 3 panel, one round (tests/test_scripts_smoke.py);
``--out DIR``: write ``bench_shot.json`` and ``bench_shot.md`` there (without it, print only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("ROLLAX_CACHE_DIR", "off")  # honest compile times

import numpy as np  # noqa: E402

import rollax  # noqa: E402
from rollax import Axis  # noqa: E402
from rollax.analysis.basin import basin_map  # noqa: E402
from rollax.analysis.shot import release, shot_map  # noqa: E402
from rollax.models.rim import Rim  # noqa: E402
from rollax.systems.shot import Shot, shot_summary  # noqa: E402


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def shot_source() -> dict:
    """Which shot model was timed (the module is being extended: the join with the rim's
    rolling model adds a mode): its modes and the sha256 of its source files."""
    import hashlib

    import rollax.analysis.shot as a_
    import rollax.models.shot as m_
    import rollax.systems.shot as s_

    out = {"modes": list(getattr(Shot, "modes", None) or ["(one mode)"])}
    for mod in (s_, m_, a_):
        with open(mod.__file__, "rb") as fh:
            out[mod.__name__] = hashlib.sha256(fh.read()).hexdigest()[:16]
    return out


def timed(fn):
    l0 = load()
    c0 = time.process_time()
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    return out, dict(
        wall_s=round(wall, 4), cpu_s=round(time.process_time() - c0, 2), load=[l0, load()]
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5, help="warm rounds (shot, basin alternating)")
    ap.add_argument("--grid", type=int, nargs=2, default=(360, 240), help="shot map grid")
    ap.add_argument("--out", type=Path, default=None, help="folder for bench_shot.json and .md")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the smoke test)")
    args = ap.parse_args()
    basin_kw = {}
    if args.smoke:
        args.grid, args.repeat = (12, 8), 1
        basin_kw = dict(x=Axis("beta", 0.8, 1.8, 3), y=Axis("omega1", -20.0, 20.0, 3))
    import jax

    dev = jax.devices()
    res: dict = dict(
        machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{len(dev)} x {dev[0].platform} JAX devices",
        jax=jax.__version__,
        grid=list(args.grid),
        load_start=load(),
        shot_source=shot_source(),
    )
    speed = Axis("speed", 6.6, 8.0, args.grid[0])
    angle = Axis("angle", 40.0, 64.0, args.grid[1])
    shot = Shot()
    n_shot = args.grid[0] * args.grid[1]

    def run_shot():
        return shot_map(shot, speed=speed, angle=angle, progress=False)

    def run_basin():
        return basin_map(Rim(), progress=False, **basin_kw)

    smap, res["shot_cold"] = timed(run_shot)
    print("shot cold", res["shot_cold"], smap.counts(), flush=True)
    bmap, res["basin_cold"] = timed(run_basin)
    n_basin = bmap.outcome.size
    print("basin cold", res["basin_cold"], bmap.counts(), flush=True)
    rounds = []
    for i in range(args.repeat):
        s2, ts = timed(run_shot)
        b2, tb = timed(run_basin)
        assert np.array_equal(s2.outcome, smap.outcome), "shot map outcomes changed"
        assert np.array_equal(b2.outcome, bmap.outcome), "basin outcomes changed"
        rounds.append(dict(shot=ts, basin=tb, ratio=round(ts["wall_s"] / tb["wall_s"], 2)))
        print("round", i + 1, rounds[-1], flush=True)
    res["rounds"] = rounds
    shot_warm = statistics.median(r["shot"]["wall_s"] for r in rounds)
    basin_warm = statistics.median(r["basin"]["wall_s"] for r in rounds)

    # the steps: the same sweep keeping the solution (the same kernel, compiled above), then
    # (not with --smoke: it compiles a program of its own) rollax.solve_ensemble on the map's
    # starts built here, as a user would call it
    import functools

    import jax.numpy as jnp

    kept, t_kept = timed(
        lambda: rollax.sweep(
            shot,
            [speed, angle],
            start=functools.partial(release, spin=0.0),
            t1=4.0,
            summary=shot_summary,
            keep_solution=True,
            progress=False,
            rtol=1e-9,
            atol=1e-9,
        )
    )
    steps = np.asarray(kept.solution["steps"])
    same = int(np.sum(kept.outcome == smap.outcome))
    ens = []
    if not args.smoke:
        V, A = np.meshgrid(speed.values, angle.values, indexing="ij")
        starts = np.asarray(
            jax.vmap(lambda v, a: release(v, a))(jnp.asarray(V.ravel()), jnp.asarray(A.ravel()))
        )
        for _ in range(2):
            sol, t_ens = timed(lambda: rollax.solve_ensemble(shot, starts, 0.0, 4.0))
            ens.append(t_ens["wall_s"])
        o = np.asarray(shot.outcome(sol)).reshape(smap.outcome.shape)
        res["solve_ensemble_outcomes_equal"] = f"{int(np.sum(o == smap.outcome))} of {n_shot}"
        res["solve_ensemble_steps_equal"] = bool(
            np.array_equal(np.asarray(sol.steps).reshape(steps.shape), steps)
        )
    b_steps = np.asarray(bmap.steps)
    res["shot"] = dict(
        starts=n_shot,
        counts=smap.counts(),
        cold_s=res["shot_cold"]["wall_s"],
        warm_median_s=round(shot_warm, 4),
        warm_all_s=[r["shot"]["wall_s"] for r in rounds],
        compile_s_est=round(res["shot_cold"]["wall_s"] - shot_warm, 2),
        us_per_start=round(shot_warm / n_shot * 1e6, 2),
        core_us_per_start=round(shot_warm / n_shot * 1e6 * len(dev), 2),
        steps_mean=round(float(steps.mean()), 2),
        steps_median=float(np.median(steps)),
        steps_max=int(steps.max()),
        ns_per_step=round(shot_warm / float(steps.sum()) * 1e9, 1),
        sweep_keep_solution_s=t_kept["wall_s"],
        sweep_keep_solution_outcomes_equal=f"{same} of {n_shot}",
        solve_ensemble_s=ens,
    )
    res["basin"] = dict(
        starts=n_basin,
        counts=bmap.counts(),
        cold_s=res["basin_cold"]["wall_s"],
        warm_median_s=round(basin_warm, 4),
        warm_all_s=[r["basin"]["wall_s"] for r in rounds],
        compile_s_est=round(res["basin_cold"]["wall_s"] - basin_warm, 2),
        us_per_start=round(basin_warm / n_basin * 1e6, 2),
        steps_mean=round(float(b_steps.mean()), 2),
        steps_max=int(b_steps.max()),
        ns_per_step=round(basin_warm / float(b_steps.sum()) * 1e9, 1),
    )
    res["ratio_warm_median"] = round(shot_warm / basin_warm, 2)
    res["ratio_per_round"] = [r["ratio"] for r in rounds]
    res["ratio_cold"] = round(res["shot_cold"]["wall_s"] / res["basin_cold"]["wall_s"], 2)
    res["ratio_per_start"] = round((shot_warm / n_shot) / (basin_warm / n_basin), 2)
    res["ratio_steps_per_start"] = round(float(steps.mean()) / float(b_steps.mean()), 2)
    res["load_end"] = load()
    md = markdown(res)
    print(md)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_shot.json").write_text(json.dumps(res, indent=2) + "\n")
        (args.out / "bench_shot.md").write_text(md + "\n")
        print(f"wrote {args.out / 'bench_shot.json'} and {args.out / 'bench_shot.md'}")


def markdown(res: dict) -> str:
    s, b = res["shot"], res["basin"]
    nv, na = res["grid"]
    lines = [
        f"Free-throw shot map (`shot_map(Shot())`, {nv} x {na} = {s['starts']:,} releases, no "
        f"spin) against the Fig. 11 basin panel (`basin_map(Rim())`, {b['starts']:,} starts), "
        f"alternating in one process; {res['machine']}; jax {res['jax']}; compile cache off; "
        f"Shot modes {res['shot_source']['modes']}; "
        f"load average at start {res['load_start']}, at end {res['load_end']}.",
        "",
        "| map | starts | cold [s] | warm median [s] | warm, each round [s] | us per start "
        "| steps per start (mean / max) | ns per step | outcomes |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for name, d in (("shot (free throw, no spin)", s), ("basin (Fig. 11)", b)):
        lines.append(
            f"| {name} | {d['starts']:,} | {d['cold_s']:.2f} | {d['warm_median_s']:.3f} | "
            f"{', '.join(f'{x:.3f}' for x in d['warm_all_s'])} | {d['us_per_start']:.2f} | "
            f"{d['steps_mean']:.1f} / {d['steps_max']} | {d['ns_per_step']:.0f} | "
            f"{', '.join(f'{k} {v}' for k, v in d['counts'].items() if v)} |"
        )
    lines += [
        "",
        f"- Shot / basin, warm medians: **{res['ratio_warm_median']}x** (per round "
        f"{res['ratio_per_round']}); per start {res['ratio_per_start']}x; steps per start "
        f"{res['ratio_steps_per_start']}x; cold {res['ratio_cold']}x.",
        f"- Shot map: compile about {s['compile_s_est']:.1f} s (cold - warm median); "
        f"{s['core_us_per_start']:.1f} core-us per release; steps from the same sweep "
        f"keeping the solution ({s['sweep_keep_solution_s']:.3f} s; outcomes equal to the "
        f"map's: {s['sweep_keep_solution_outcomes_equal']})"
        + (
            f"; `rollax.solve_ensemble` on the same starts, called directly: "
            f"{s['solve_ensemble_s'][0]:.2f} s first (it compiles its own program), then "
            f"{s['solve_ensemble_s'][1]:.3f} s (outcomes equal to the map's: "
            f"{res['solve_ensemble_outcomes_equal']}; steps equal to the sweep's: "
            f"{res['solve_ensemble_steps_equal']})"
            if s["solve_ensemble_s"]
            else ""
        )
        + ".",
        "- Load average (1, 5, 15 min) before and after each warm round: "
        + "; ".join(
            f"{i + 1}: shot {r['shot']['load'][0][0]}-{r['shot']['load'][1][0]}, basin "
            f"{r['basin']['load'][0][0]}-{r['basin']['load'][1][0]}"
            for i, r in enumerate(res["rounds"])
        )
        + ".",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    rollax.configure()  # one JAX CPU device per core (before any JAX work); cache off above
    main()
