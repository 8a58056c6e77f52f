"""Benchmark: what the event semantics cost in compile and warm time, against plain diffrax.

Issue 57 asks the event route's first forward compile to be at most 1.5x plain diffrax's with
``diffrax.Event``, and keeps the event semantics unchanged: every step sampled at 8 points of
its dense output, and a step whose samples may hide a pair of crossings rejected (as the
ensemble kernel does). Plain diffrax evaluates its condition once a step and has no such test.
This script measures what those two cost, on ``bench_gradients.py``'s systems without a reset
map (the segment loop), each program in its own process with the compile cache off:

* ``diffrax``: plain diffrax with ``diffrax.Event`` (``bench_gradients.build``);
* ``ns8``: ``rollax.solve`` as shipped (8 samples a step, the pair test on);
* ``ns1``: ``n_samples=1`` (the step's end only);
* ``ns1_nopair``: ``n_samples=1`` and the pair test replaced by "never" (a measurement only:
  that solve can miss a pair of crossings inside a step, as plain diffrax can).

For each: the forward program's and its reverse gradient's compile (CPU seconds of trace, lower
and XLA, ``bench_gradients.Clock``) and their warm times (best of ``--repeat``). The variants
alternate within each round.

    python benchmarks/bench_event_cost.py [--case oscillator rim] [--rounds 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("oscillator", "rim")
VARIANTS = ("diffrax", "ns8", "ns1", "ns1_nopair")


def child(case: str, variant: str, repeat: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_compilation_cache", False)
    sys.path.insert(0, str(HERE))
    from bench_gradients import Clock, build

    import rollax
    import rollax._integrate._solve as solve_module

    if variant.startswith("ns1"):
        shipped = rollax.solve
        rollax.solve = lambda *a, **k: shipped(*a, n_samples=1, **k)  # (bench_gradients calls it)
    if variant.endswith("nopair"):
        solve_module.unresolved_in = lambda *a, **k: jnp.asarray(False)
    p0, _dp, ours, theirs = build(case, False)
    fn = theirs if variant == "diffrax" else ours

    def forward(p):
        return fn(p, None)[0]

    out: dict = {"case": case, "variant": variant, "load": os.getloadavg()[0]}
    for name, f in (("forward", forward), ("grad", jax.grad(forward))):
        clock = Clock()
        compiled = jax.jit(f).trace(p0).lower().compile()
        cpu = clock()[1]
        value = np.asarray(jax.block_until_ready(compiled(p0)))
        warm = []
        for _ in range(repeat):
            t = time.perf_counter()
            jax.block_until_ready(compiled(p0))
            warm.append(time.perf_counter() - t)
        out[name] = {"compile_cpu_s": cpu, "warm_best_s": min(warm), "value": value.tolist()}
    return out


def run_child(case: str, variant: str, repeat: int) -> dict:
    env = dict(os.environ, JAX_ENABLE_COMPILATION_CACHE="false")
    env.setdefault("JAX_PLATFORMS", "cpu")
    cmd = [sys.executable, __file__, "--child", case, variant, "--repeat", str(repeat)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [s for s in r.stdout.splitlines() if s.startswith("{")]
    if r.returncode or not lines:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return {"case": case, "variant": variant, "error": " | ".join(tail)}
    return json.loads(lines[-1])


def summary(rows: list[dict]) -> str:
    import numpy as np

    lines = [
        "Compile: CPU s (median over rounds) and its ratio to plain diffrax; warm: best wall ms.",
        "",
        "| case | variant | fwd compile [s] | r/d | grad compile [s] | r/d | warm fwd [ms] "
        "| warm grad [ms] |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case in dict.fromkeys(r["case"] for r in rows):

        def med(v, prog, key, case=case):
            x = [
                r[prog][key] for r in rows if r["case"] == case and r["variant"] == v and prog in r
            ]
            return float(np.median(x)) if x else float("nan")

        base = {p: med("diffrax", p, "compile_cpu_s") for p in ("forward", "grad")}
        for v in [v for v in VARIANTS if any(r["variant"] == v for r in rows)]:
            fc, gc = med(v, "forward", "compile_cpu_s"), med(v, "grad", "compile_cpu_s")
            lines.append(
                f"| {case} | {v} | {fc:.2f} | {fc / base['forward']:.2f} | {gc:.2f} | "
                f"{gc / base['grad']:.2f} | {1e3 * med(v, 'forward', 'warm_best_s'):.3f} | "
                f"{1e3 * med(v, 'grad', 'warm_best_s'):.3f} |"
            )
    return "\n".join(lines)


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cases = list(dict.fromkeys(r["case"] for r in rows))
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    fig, axes = plt.subplots(1, len(cases), figsize=(5.5 * len(cases), 4), squeeze=False)
    for ax, case in zip(axes[0], cases):
        x = np.arange(len(variants))
        for k, prog in enumerate(("forward", "grad")):

            def med(v, prog=prog, case=case):
                s = [
                    r[prog]["compile_cpu_s"]
                    for r in rows
                    if r["case"] == case and r["variant"] == v and prog in r
                ]
                return float(np.median(s)) if s else np.nan

            base = med("diffrax")
            ax.bar(x + (k - 0.5) * 0.38, [med(v) / base for v in variants], 0.38, label=prog)
        ax.axhline(1.5, color="k", lw=0.8, ls="--", label="issue 57: 1.5x (forward)")
        ax.set_xticks(x, variants)
        ax.set_ylabel("compile CPU time / plain diffrax's")
        ax.set_title(f"{case}: event sampling's compile cost (rtol = atol = 1e-10)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", nargs="+", choices=CASES, default=list(CASES))
    p.add_argument("--variant", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    p.add_argument("--repeat", type=int, default=30, help="warm calls, best taken (default 30)")
    p.add_argument("--smoke", action="store_true", help="the oscillator, one round, 2 repeats")
    p.add_argument("--out", type=Path, help="folder for event_cost.json, .md and .png")
    p.add_argument("--child", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], a.child[1], a.repeat)))
        return
    if a.smoke:
        a.case, a.variant, a.rounds, a.repeat = ["oscillator"], ["diffrax", "ns8"], 1, 2
    rows = []
    for rnd in range(a.rounds):
        for case in a.case:
            for v in a.variant:
                r = run_child(case, v, a.repeat)
                r["round"] = rnd
                rows.append(r)
                msg = r.get("error") or (
                    f"forward {r['forward']['compile_cpu_s']:.2f} CPU s, "
                    f"{1e3 * r['forward']['warm_best_s']:.3f} ms; gradient "
                    f"{r['grad']['compile_cpu_s']:.2f} CPU s, "
                    f"{1e3 * r['grad']['warm_best_s']:.3f} ms; load {r['load']:.1f}"
                )
                print(f"round {rnd} {case:10s} {v:11s} {msg}", flush=True)
    ok = [r for r in rows if "error" not in r]
    md = summary(ok) if ok else "no result"
    print("\n" + md)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        meta = {"cpus": os.cpu_count(), "rounds": a.rounds, "repeat": a.repeat}
        (a.out / "event_cost.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (a.out / "event_cost.md").write_text(md + "\n")
        if ok and any(r["variant"] == "diffrax" for r in ok):
            figure(ok, a.out / "event_cost.png")
        print(f"wrote {a.out / 'event_cost.json'}")


if __name__ == "__main__":
    main()
