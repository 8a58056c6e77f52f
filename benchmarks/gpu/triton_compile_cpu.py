"""The fused kernels' GPU compile time, measured on a CPU: each conformance system's fused
program lowered for CUDA (Pallas-Triton, at trace time), then each of its Triton kernels
compiled for an H100 (sm_90) by pip's Triton, which needs no GPU. Prints one line per kernel:
Triton operations, tensor loads and stores, seconds per compile stage (ttgir: the TritonGPU
passes; llir; ptx; cubin: ptxas) and, with ``--passes``, the slowest MLIR passes.

    pip install triton   # not a rollax dependency; 3.9 was used
    python benchmarks/gpu/triton_compile_cpu.py [--cases rim_slipping,rim_rolling] [--limit 300]

XLA compiles the same Triton IR with its own Triton (jaxlib's), so the seconds differ from a
GPU machine's, but their growth does not: this is how the coalescing pass's cost (one slice of
the whole kernel per load or store) was found, 2026-11-26 (``docs/fused.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


def kernels(name: str) -> list[str]:
    """The Triton IR (text, locations stripped) of each kernel of ``name``'s fused program."""
    from jax.experimental import pallas as pl

    import rollax
    import test_conformance as tc

    orig = pl.pallas_call
    pl.pallas_call = lambda *a, **k: orig(*a, **{**k, "debug": True})
    try:
        system, y0s, t1, opts = tc.CASES[name](4)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rollax.fused_program(system, y0s, 0.0, t1, platform="cuda", **{**tc.TOL, **opts})
    finally:
        pl.pallas_call = orig
    out = []
    for c in re.split(r"The kernel jaxpr for pallas_call", buf.getvalue())[1:]:
        s = c[c.find("\nmodule") + 1 :]
        s = s[: s.rfind("\n}") + 2].replace(" [unknown]", "")
        s = re.sub(r' "[^"\n]*"\(#loc\d*\)', "", s)
        s = re.sub(r" #loc\d*(?=\n)", "", s)
        out.append(re.sub(r"\n#loc[^\n]*", "", s))
    return out


def compile_one(path: str, passes: bool) -> dict:
    """Compile one .ttir file with pip's Triton for sm_90 (in this process), timing stages."""
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia import compiler as nvc

    times: dict = {}
    orig = nvc.CUDABackend.add_stages

    def add_stages(self, stages, options, *a, **k):
        orig(self, stages, options, *a, **k)
        for key, fn in list(stages.items()):

            def timed(src, metadata, _fn=fn, _k=key):
                t0 = time.perf_counter()
                r = _fn(src, metadata)
                times[_k] = round(time.perf_counter() - t0, 1)
                return r

            stages[key] = timed

    nvc.CUDABackend.add_stages = add_stages
    t0 = time.perf_counter()
    k = triton.compile(
        path, target=GPUTarget("cuda", 90, 32), options={"num_warps": 1, "num_stages": 1}
    )
    out = dict(
        compile_s=round(time.perf_counter() - t0, 1), stages=times, ptx_bytes=len(k.asm["ptx"])
    )
    # registers and spills per thread, from ptxas -v on the same PTX (Triton's own ptxas)
    from triton.backends.nvidia.compiler import get_ptxas

    ptx = Path(path).with_suffix(".ptx")
    ptx.write_text(k.asm["ptx"])
    r = subprocess.run(
        [
            get_ptxas(90).path,
            "-v",
            "--gpu-name",
            "sm_90a",
            str(ptx),
            "-o",
            str(ptx.with_suffix(".cubin")),
        ],
        capture_output=True,
        text=True,
    )
    m = re.search(r"Used (\d+) registers", r.stderr)
    sp = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr)
    st = re.search(r"(\d+) bytes stack frame", r.stderr)
    out.update(
        registers=int(m.group(1)) if m else None,
        spill_store_bytes=int(sp.group(1)) if sp else None,
        spill_load_bytes=int(sp.group(2)) if sp else None,
        stack_bytes=int(st.group(1)) if st else None,
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--cases", default="oscillator,bouncing_ball,rim_rolling,sliding,rim_slipping,penny,robot"
    )
    ap.add_argument("--limit", type=float, default=300.0, help="seconds per kernel")
    ap.add_argument("--passes", action="store_true", help="the slowest MLIR passes too")
    ap.add_argument("--dir", default="/tmp/rollax-ttir")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child: compile this file
    args = ap.parse_args()
    if args.one:
        print(json.dumps(compile_one(args.one, args.passes)), flush=True)
        return 0
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    for name in args.cases.split(","):
        try:
            irs = kernels(name)
        except Exception as e:  # e.g. jax 0.10.2's debug print fails on some primitives
            print(json.dumps(dict(case=name, error=f"{type(e).__name__}: {e}"[:200])), flush=True)
            continue
        for k, ir in enumerate(irs):
            path = f"{args.dir}/{name}_k{k}.ttir"
            Path(path).write_text(ir)
            row = dict(
                case=name,
                kernel=k,
                ops=len(re.findall(r"= (?!tt\.splat|arith\.constant)[a-z_]+\.[a-z_.]+", ir)),
                tensor_loads=len(re.findall(r"tt\.load %\S+ : tensor<", ir)),
                tensor_stores=len(re.findall(r"tt\.store %\S+, %\S+ : tensor<", ir)),
            )
            env = dict(
                os.environ,
                TRITON_ALWAYS_COMPILE="1",
                **({"MLIR_ENABLE_TIMING": "1"} if args.passes else {}),
            )
            try:
                r = subprocess.run(
                    [sys.executable, __file__, "--one", path]
                    + (["--passes"] if args.passes else []),
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=args.limit,
                )
                res = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                row.update(json.loads(res[-1]) if res else dict(error=r.stderr[-300:]))
                if args.passes:
                    slow = sorted(
                        re.findall(
                            r"^\s+([0-9.]+) \(\s*[0-9.]+%\)\s+(\w+)$", r.stderr + r.stdout, re.M
                        ),
                        key=lambda p: -float(p[0]),
                    )
                    row["slowest_passes"] = [
                        (p, float(s)) for s, p in slow if p not in ("Total", "Rest")
                    ][:3]
            except subprocess.TimeoutExpired:
                row["compile_s"] = f"over the {args.limit:g} s limit"
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
