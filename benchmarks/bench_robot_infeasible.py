"""Benchmark: how fast ``rollax robot optimize`` answers an infeasible request (issue 56).

20 infeasible requests are generated with a fixed seed (the Sect. 5 disk and the Sect. 6
ball; ``phi_T`` or the target, ``T``, ``mu`` and ``n_min`` drawn so that a necessary
condition fails: the friction impulse bound, the time cost's range or ``n_min <= M g``;
drawn until :func:`rollax.analysis.robot.feasibility.necessary_conditions` refuses them).
Each is answered three ways, timed: the API (``optimize`` on a built manoeuvre), the CLI in
this process (``rollax.cli.main``, building the manoeuvre) and the CLI as a new process
(Python, the imports and JAX's start-up included; wall and CPU seconds). The API and
in-process answers must take under 2 s each (asserted). Then 10 feasible requests (the check passes; drawn near the
paper's cases) are optimised with ``--knots``, ``--n-grid``, ``--max-iter`` and a
``--time-limit`` each, and their status, cost, iterations and time reported (the first run of
each body includes compiling).

    python benchmarks/bench_robot_infeasible.py [--feasible 10] [--out DIR]

Writes ``DIR/bench_robot_infeasible.json`` and ``DIR/bench_robot_infeasible.png`` (the
answer times; default DIR: ``benchmarks/runs/robot_infeasible``). ``--smoke``: 2
infeasible requests, 1 feasible one stopped by a 1 s time limit after its first iteration
(tests/test_scripts_smoke.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

import rollax
from rollax.analysis.robot.feasibility import necessary_conditions
from rollax.cli import main as cli_main
from rollax.robot import ball_manoeuvre, disk_manoeuvre, optimize

WEIGHT = {"disk": 5.0, "ball": 4.0}  # M g of the Sect. 5 disk and the Sect. 6 ball (g = 1)


def build(req):
    if req["body"] == "disk":
        return disk_manoeuvre(req["phi_T"], req["T"], req["mu"], req["n_min"])
    return ball_manoeuvre(tuple(req["target"]), req["T"], req["mu"], req["n_min"])


def argv(req) -> list[str]:
    out = ["robot", "optimize", "--body", req["body"]]
    if req["body"] == "disk":
        out += [f"--phi-T={req['phi_T']!r}"]
    else:
        out += ["--target", *(repr(v) for v in req["target"])]
    out += [f"--T={req['T']!r}", f"--mu={req['mu']!r}", f"--n-min={req['n_min']!r}"]
    return out + ["--cost", req["cost"], "--json"]


def draw(rng, body: str, kind: str) -> dict:
    """One request of ``body``; ``kind``: which condition to break ("mu", "time", "n_min") or
    "feasible" (near the paper's cases: the disk turned by pi/2 to pi, the ball rolled by 0.5
    to 1.2, in T = 8 to 10; the check passing). ``L``: the GC's travel (r = 1)."""
    req: dict = dict(body=body, cost="effort", kind=kind)
    if kind == "feasible":
        mu = rng.uniform(0.2, 0.4) if body == "disk" else rng.uniform(0.1, 0.3)
        req.update(T=float(rng.uniform(8.0, 10.0)), mu=float(mu), n_min=0.5)
        L = rng.uniform(0.5, 1.0) * math.pi if body == "disk" else rng.uniform(0.5, 1.2)
    else:
        req.update(T=float(rng.uniform(2.0, 8.0)), mu=float(rng.uniform(0.05, 0.3)), n_min=0.5)
        L = rng.uniform(1.0, 4.0) * math.pi
        if kind == "time":
            req.update(cost="time", T=float(rng.uniform(0.5, 2.0)))
        if kind == "n_min":  # (in a time that the friction allows)
            req.update(n_min=float(rng.uniform(1.01, 2.0) * WEIGHT[body]), T=10.0, mu=0.4)
            L = rng.uniform(0.5, 1.0) * math.pi
    a = float(rng.uniform(0, 2 * np.pi))
    if body == "disk":
        req["phi_T"] = float(rng.choice([-1.0, 1.0]) * L)
    else:
        req["target"] = [float(L * math.cos(a)), float(L * math.sin(a))]
    return req


def generate(rng, kinds, n: int) -> list[dict]:
    out = []
    while len(out) < n:
        kind = kinds[len(out) % len(kinds)]
        body = ("disk", "ball")[(len(out) // len(kinds)) % 2]
        req = draw(rng, body, kind)
        fails = necessary_conditions(build(req), cost=req["cost"])
        if bool(fails) == (kind != "feasible"):
            out.append(req)
    return out


def answer_times(req) -> dict:
    man = build(req)
    t = time.perf_counter()
    opt = optimize(man, cost=req["cost"])
    api = time.perf_counter() - t
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as buf:
        rc = cli_main(argv(req))
    cli = time.perf_counter() - t
    res = json.loads(buf.getvalue())
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "rollax.cli", *argv(req)], capture_output=True, text=True
    )
    process = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert opt.status == res["status"] == "infeasible" and rc == proc.returncode == 1, (req, rc)
    assert opt.iterations == 0 and res["message"] == opt.message, req
    assert api < 2.0 and cli < 2.0, (req, api, cli)
    return dict(
        req, message=opt.message, api_s=api, cli_s=cli, process_s=process, process_cpu_s=cpu
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--infeasible", type=int, default=20)
    ap.add_argument("--feasible", type=int, default=10)
    ap.add_argument("--knots", type=int, default=6)
    ap.add_argument("--n-grid", type=int, default=61)
    ap.add_argument("--max-iter", type=int, default=200)
    ap.add_argument("--time-limit", type=float, default=120.0, help="per feasible run [s]")
    ap.add_argument("--seed", type=int, default=56)
    ap.add_argument("--out", default=os.path.join("benchmarks", "runs", "robot_infeasible"))
    ap.add_argument("--smoke", action="store_true", help="2 + 1 requests (the smoke test)")
    args = ap.parse_args()
    rollax.configure()  # as the CLI does, before any JAX work
    if args.smoke:
        args.infeasible, args.feasible, args.knots, args.n_grid = 2, 1, 4, 11
        args.max_iter, args.time_limit = 2, 1.0
    rng = np.random.default_rng(args.seed)
    bad = generate(rng, ("mu", "mu", "time", "n_min"), args.infeasible)
    good = generate(rng, ("feasible",), args.feasible)

    rows = []
    for req in bad:
        rows.append(answer_times(req))
        r = rows[-1]
        print(
            f"{r['body']:4s} {r['kind']:5s} API {r['api_s'] * 1e3:7.2f} ms, CLI "
            f"{r['cli_s'] * 1e3:7.1f} ms, new process {r['process_s']:5.2f} s "
            f"({r['process_cpu_s']:.2f} s CPU): {r['message']}",
            flush=True,
        )
    runs = []
    for req in good:
        t = time.perf_counter()
        opt = optimize(
            build(req),
            knots=args.knots,
            n_grid=args.n_grid,
            max_iter=args.max_iter,
            time_limit=args.time_limit,
        )
        wall = time.perf_counter() - t
        runs.append(
            dict(
                req,
                status=opt.status,
                cost=opt.cost,
                iterations=opt.iterations,
                violation=opt.violation,
                wall_s=wall,
                message=opt.message,
            )
        )
        print(
            f"{req['body']:4s} feasible T = {req['T']:.3g}, mu = {req['mu']:.3g}: "
            f"{opt.status}, J = {opt.cost:.5g}, {opt.iterations} iterations, {wall:.1f} s",
            flush=True,
        )
    summary = dict(
        machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        settings=dict(
            knots=args.knots,
            n_grid=args.n_grid,
            max_iter=args.max_iter,
            time_limit=args.time_limit,
            seed=args.seed,
        ),
        infeasible=rows,
        feasible=runs,
        api_max_s=max(r["api_s"] for r in rows),
        cli_max_s=max(r["cli_s"] for r in rows),
        process_max_s=max(r["process_s"] for r in rows),
        process_median_s=float(np.median([r["process_s"] for r in rows])),
        process_cpu_median_s=float(np.median([r["process_cpu_s"] for r in rows])),
        load_average=os.getloadavg(),
    )
    print(
        f"infeasible: API at most {summary['api_max_s'] * 1e3:.2f} ms, CLI in process at most "
        f"{summary['cli_max_s'] * 1e3:.1f} ms, new process median "
        f"{summary['process_median_s']:.2f} s (max {summary['process_max_s']:.2f} s; CPU "
        f"median {summary['process_cpu_median_s']:.2f} s; load average "
        f"{summary['load_average'][0]:.1f})"
    )
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_robot_infeasible.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    figure(rows, runs, os.path.join(args.out, "bench_robot_infeasible.png"))


def figure(rows, runs, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    i = np.arange(len(rows))
    for key, label in (
        ("api_s", "API"),
        ("cli_s", "CLI, in process"),
        ("process_s", "new process"),
    ):
        a.semilogy(i, [r[key] for r in rows], "o", label=label)
    a.axhline(2.0, color="k", lw=0.8, ls="--", label="2 s")
    a.set(xlabel="infeasible request", ylabel="answer time [s]", title="infeasible: refused")
    a.legend(fontsize=8)
    colours = {"converged": "C2", "not converged": "C1", "infeasible": "C3"}
    for k, r in enumerate(runs):
        b.bar(k, r["wall_s"], color=colours.get(r["status"], "C0"))
    b.set(xlabel="feasible request", ylabel="optimize wall time [s]", title="feasible: solved")
    b.legend(handles=[Patch(color=c, label=s) for s, c in colours.items()], fontsize=8)
    for ax in (a, b):
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
