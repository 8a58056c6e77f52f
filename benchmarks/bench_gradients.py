"""Benchmark: compile time and warm cost of gradients through ``rollax.solve`` and plain diffrax.

Issue 36. Cases (``--case``), each a scalar of the end of the run (or of the event time)
differentiated with respect to a parameter or the start:

* ``oscillator``: x'' = -omega^2 x from (1, 0), ends at the first zero of x (a crossing event);
  d(t* + v(t*)) / d omega;
* ``oscillator6``: the same, ended at the 6th zero (``target=6``); plain diffrax has no crossing
  count, so it runs 6 event-ended segments (a ``lax.scan`` of ``diffeqsolve``);
* ``ball``: the bouncing ball (examples/bouncing_ball.py), a reset v -> -e v at each impact, ends
  at the 4th; d(t_4 + v_4) / d e; plain diffrax: a ``lax.scan`` of 4 segments;
* ``pendulum``: theta'' = -(g/L) sin theta from (1, 0), a wall at theta = 0 hit from above
  reflects theta' -> -e theta', ends at the 4th impact; d(t_4 + theta'_4) / d e; plain diffrax:
  4 segments;
* ``rim``: ``rollax.systems.RimRolling`` from (1.1, -3, 35, 10), ends at the separation F2 = 0
  (outcome out); d(t* + beta(t*)) / d x0; plain diffrax: the separation event only (its w1
  count does not fire here);
* ``robot``: ``rollax.systems.RollingRobot`` with ``rollax.robot.paper_disk()`` on [0, 20], the
  ramp control's kinks as jump times; d(phi(T) + phi'(T)) / d amplitude; plain diffrax with
  ``ClipStepSizeController(jump_ts=...)``;
* ``robot_flight``: issue 57's robot with detachment, ``rollax.systems.Robot`` (the ball of
  ``paper_ball()``, masses at rest, spun at Omega = (w, 0, 0.5), w = 3): it flies from t = 0,
  lands at 0.667 (the touchdown's reset map) and rolls until it detaches again at 1.500, where it
  cannot lift off and the run ends; d(t + Omega_1) / d w. ``--impacts 0``: the same system
  without a reset map, ended at the touchdown (the reference with one terminal event). Plain
  diffrax has no modes: not run.

Plain diffrax: ``diffrax.Dopri5`` with ``PIDController`` (integral only, as rollax's controller) at
the same tolerances, ``diffrax.Event`` located by ``optimistix.Newton``. rollax takes its own
DOPRI5 steps (another error estimate), so step counts differ; the two values are compared.

Each (case, integrator) runs in its own process, with JAX's persistent compile cache off, so that
the compile times are cold. In the process, in this order, as a user meets them: the jitted
forward solve, ``jax.grad`` (reverse mode) and ``jax.jvp`` (forward mode:
``adjoint=diffrax.ForwardMode()``), each traced, lowered and compiled (``jax.jit(f).trace``,
``.lower``, ``.compile``: the three times, and their sum as the compile time, each as wall time
and as the process's CPU time, which a shared machine's load disturbs less) and run once, then
warm (median of ``--repeat`` runs). Also the size of each program: ops and ``while`` loops of
the lowered StableHLO and instructions, computations and ``while`` loops of XLA's optimised HLO.
Each child records the load average.

Targets (issue 36): compile time of the first solve and of the first gradient at most 1.2x
plain diffrax's; the warm reverse gradient at most 5x the forward solve and no more than plain
diffrax's gradient.

    python benchmarks/bench_gradients.py [--case NAME ...] [--repeat 20] [--smoke] [--out DIR]
    python benchmarks/bench_gradients.py --child oscillator rollax   # one process, JSON out
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

CASES = ("oscillator", "oscillator6", "ball", "pendulum", "rim", "robot", "robot_flight")
# "rollax": the default (the one step loop for systems with a reset map, issue 57); "loop": the
# one loop for every system (ROLLAX_LOOP=one); "segments": the segment loop for every system
# (ROLLAX_LOOP=segments, the default before issue 57)
IMPLS = ("rollax", "loop", "segments", "diffrax")
LOOP_ENV = {"loop": "one", "segments": "segments"}
RTOL = ATOL = 1e-10
MAX_STEPS = 16_384


# ---------------------------------------------------------------------------------- the cases
def build(case: str, smoke: bool, impacts: int = 4, written: bool = False):
    """``(p0, dp, rollax_fn, diffrax_fn)``: ``fn(p, adjoint) -> (scalar, steps)``. ``written``:
    plain diffrax's hybrid segments as a Python loop (written out) instead of a ``lax.scan``."""
    import diffrax
    import jax
    import jax.numpy as jnp
    import optimistix as optx

    import rollax

    newton = optx.Newton(1e-12, 1e-12, optx.rms_norm)

    def plain(vf, y0, t0, t1, args, cond=None, direction=None, adjoint=None, jump_ts=None):
        ctrl = diffrax.PIDController(rtol=RTOL, atol=ATOL, pcoeff=0.0, icoeff=1.0)
        if jump_ts is not None:
            ctrl = diffrax.ClipStepSizeController(ctrl, jump_ts=jump_ts)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(vf),
            diffrax.Dopri5(),
            t0,
            t1,
            None,
            y0,
            args=args,
            stepsize_controller=ctrl,
            event=None if cond is None else diffrax.Event(cond, newton, direction=direction),
            saveat=diffrax.SaveAt(t1=True),
            max_steps=MAX_STEPS,
            throw=False,
            adjoint=adjoint or diffrax.RecursiveCheckpointAdjoint(),
        )
        return sol.ts[-1], sol.ys[-1], sol.stats["num_steps"]

    def segments(n, vf, reset, y0, t1, args, adjoint):
        """``n`` event-ended solves, the reset map between them (a ``lax.scan``; with
        ``written``, a Python loop: the segments written out, as issue 57's baseline). Each
        segment ends where ``s x`` comes down to 0, ``s`` the sign of ``x'`` at its start (of
        ``x`` from rest), so that a segment that starts on (or a rounding error off) ``x = 0``
        does not end at once."""

        def cond(t, y, args, **kw):
            return args[1] * y[0]

        def field(t, y, a):  # (one function object: a written-out loop reuses diffrax's jit)
            return vf(t, y, a[0])

        def body(carry, _):
            t, y = carry
            s = jnp.where(y[1] != 0, jnp.sign(y[1]), jnp.sign(y[0]))
            te, ye, k = plain(field, y, t, t1, (args, s), cond, False, adjoint)
            return (te, reset(ye, args)), k

        if written:
            carry, ks = (jnp.asarray(0.0), y0), []
            for _ in range(n):
                carry, k = body(carry, None)
                ks.append(k)
            return carry[0], carry[1], sum(ks)
        (t, y), ks = jax.lax.scan(body, (jnp.asarray(0.0), y0), None, length=n)
        return t, y, jnp.sum(ks)

    def rollax_run(system, y0, t1, adjoint, **kw):
        sol = rollax.solve(system, y0, 0.0, t1, rtol=RTOL, atol=ATOL, adjoint=adjoint, **kw)
        return sol, sol.steps

    if case in ("oscillator", "oscillator6"):
        n = 1 if case == "oscillator" else 6

        class Oscillator(rollax.AbstractSystem):  # examples/oscillator.py
            omega: jax.Array = rollax.parameter(1.0)
            n: int = 1

            state_names = ("x", "v")

            @property
            def events(self):
                return (rollax.crossing("zero", target=self.n),)

            def vector_field(self, t, y, mode):
                return jnp.stack([y[1], -(self.omega**2) * y[0]])

            def event_values(self, t, y, mode):
                return y[:1]

        y0 = jnp.array([1.0, 0.0])

        def ours(w, adjoint):
            sol, k = rollax_run(Oscillator(omega=w, n=n), y0, 100.0, adjoint)
            return sol.t + sol.y[1], k

        def vf(t, y, w):
            return jnp.stack([y[1], -(w**2) * y[0]])

        def theirs(w, adjoint):
            if n == 1:
                t, y, k = plain(vf, y0, 0.0, 100.0, w, lambda t, y, args, **kw: y[0], None, adjoint)
            else:
                t, y, k = segments(n, vf, lambda y, a: y, y0, 100.0, w, adjoint)
            return t + y[1], k

        return jnp.asarray(1.3), jnp.asarray(1.0), ours, theirs

    if case in ("ball", "pendulum"):
        # --impacts: the run ends at impact n (0: a system without a reset map that ends at the
        # first, the reference of issue 57's "one terminal event and no reset"); beyond 4, a
        # restitution of 0.99 and t1 = 1000, so that impact n comes before t1
        n = impacts
        ball = case == "ball"
        e0, t_end = (0.8, 10.0) if n <= 4 else (0.99, 1000.0)

        class Impacts(rollax.AbstractSystem):  # examples/bouncing_ball.py; the pendulum's wall
            g: jax.Array = rollax.parameter(9.81)  # the pendulum: g / L
            e: jax.Array = rollax.parameter(0.8)
            n_impacts: int = 4

            state_names = ("z", "v")
            events = (rollax.crossing("floor", target=1, direction=-1),)
            n_aux = 1

            def vector_field(self, t, y, mode):
                if ball:
                    return jnp.stack([y[1], -self.g * jnp.ones_like(y[1])])
                return jnp.stack([y[1], -self.g * jnp.sin(y[0])])

            def event_values(self, t, y, mode):
                return y[:1]

            if n:

                def reset(self, t, y, mode, aux, event):
                    k = aux[0] + 1
                    y_new = jnp.stack([jnp.zeros_like(y[0]), -self.e * y[1]])
                    return t, y_new, mode, aux.at[0].set(k), k >= self.n_impacts

        def start(e):
            # the start's height moves with e too: without a reset map (--impacts 0) the
            # gradient is d/dz0 through the solve, not a program that is zero by construction
            return jnp.stack([1.0 + 0.1 * (e - e0), jnp.zeros_like(e)])

        def ours(e, adjoint):
            sol, k = rollax_run(Impacts(e=e, n_impacts=n), start(e), t_end, adjoint)
            return sol.t + sol.y[1], k

        def vf(t, y, e):
            if ball:
                return jnp.stack([y[1], -9.81 * jnp.ones_like(y[1])])
            return jnp.stack([y[1], -9.81 * jnp.sin(y[0])])

        def reset(y, e):
            return jnp.stack([jnp.zeros_like(y[0]), -e * y[1]])

        def theirs(e, adjoint):
            t, y, k = segments(max(n, 1), vf, reset, start(e), t_end, e, adjoint)
            return t + y[1], k

        return jnp.asarray(e0), jnp.asarray(1.0), ours, theirs

    if case == "rim":
        from rollax.systems import RimRolling

        system = RimRolling()
        rim = system.rim

        def ours(x0, adjoint):
            sol, k = rollax_run(system, x0, 60.0, adjoint)
            return sol.t + sol.y[0], k

        def theirs(x0, adjoint):
            t, y, k = plain(
                lambda t, y, r: r.vector_field(y),
                x0,
                0.0,
                60.0,
                rim,
                lambda t, y, args, **kw: args.normal_force(y) / args.m,
                None,
                adjoint,
            )
            return t + y[0], k

        return jnp.array([1.1, -3.0, 35.0, 10.0]), jnp.array([1.0, 0.0, 0.0, 0.0]), ours, theirs

    if case == "robot":
        from rollax.robot import RampControl, paper_disk
        from rollax.systems import RollingRobot

        ex = paper_disk()
        disk, T = ex.model, (2.0 if smoke else ex.t1)
        n = disk.n

        def ours(a, adjoint):
            sol, k = rollax_run(RollingRobot(disk, RampControl(a)), ex.y0, T, adjoint)
            return sol.y[2 * n] + sol.y[2 * n + 1], k

        def theirs(a, adjoint):
            c = RampControl(a)
            t, y, k = plain(
                lambda t, y, c: disk.vector_field(t, y, c),
                ex.y0,
                0.0,
                T,
                c,
                adjoint=adjoint,
                jump_ts=jnp.asarray(c.kinks[1:]),
            )
            return y[2 * n] + y[2 * n + 1], k

        a0 = ex.control.amplitude
        return a0, jnp.ones_like(a0), ours, theirs

    if case == "robot_flight":
        from rollax.models.robot.examples import BALL_THETA0
        from rollax.robot import RampControl, paper_ball
        from rollax.systems import Robot

        ball, still = paper_ball().model, RampControl(jnp.zeros(3))

        class ToTouchdown(Robot):  # no reset map: the touchdown ends the run
            reset = rollax.AbstractSystem.reset

        robot = (Robot if impacts else ToTouchdown)(ball, still)

        def ours(w, adjoint):
            spin = jnp.stack([w, jnp.zeros_like(w), 0.5 + jnp.zeros_like(w)])
            y0 = robot.from_rolling(ball.initial_state(BALL_THETA0, Omega=spin))
            sol, k = rollax_run(robot, y0, 10.0, adjoint, mode="flying")
            return sol.t + sol.y[2 * ball.n + 4], k

        return jnp.asarray(3.0), jnp.asarray(1.0), ours, None

    raise ValueError(f"case = {case!r} is not one of {CASES}")


# ---------------------------------------------------------------------------------- one child
def hlo_stats(lowered, compiled) -> dict:
    """Sizes of one program: the lowered StableHLO and XLA's optimised HLO."""
    mlir = lowered.as_text()
    ops = len(re.findall(r"^\s*(?:%\S+(?:, %\S+)* = )?\"?[a-z_]+\.[a-z_.]+", mlir, re.M))
    try:
        hlo = compiled.as_text() or ""
    except Exception:  # some backends give no text
        hlo = ""
    instr = re.findall(r"^\s+(?:ROOT )?%[\w.\-]+ = .*? ([a-z][\w\-]*)\(", hlo, re.M)
    return {
        "stablehlo_ops": ops,
        "stablehlo_while": mlir.count("stablehlo.while"),
        "stablehlo_funcs": mlir.count("func.func"),
        "stablehlo_bytes": len(mlir),
        "hlo_instructions": len(instr),
        "hlo_while": sum(1 for i in instr if i == "while"),
        "hlo_conditional": sum(1 for i in instr if i == "conditional"),
        "hlo_computations": len(re.findall(r"^(?:ENTRY )?%?[\w.\-]+ .*\{\s*$", hlo, re.M)),
        "hlo_bytes": len(hlo),
    }


class Clock:
    """Wall and CPU (this process, all threads) seconds since the last call."""

    def __init__(self):
        self.t = (time.perf_counter(), time.process_time())

    def __call__(self):
        t = (time.perf_counter(), time.process_time())
        d, self.t = (t[0] - self.t[0], t[1] - self.t[1]), t
        return d


def child(case: str, impl: str, repeat: int, smoke: bool, impacts: int = 4) -> dict:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    import diffrax
    import numpy as np

    load0 = os.getloadavg()
    p0, dp, ours, theirs = build(case, smoke, impacts)
    fn = theirs if impl == "diffrax" else ours
    if fn is None:
        return {"case": case, "impl": impl, "error": f"plain diffrax cannot express {case}"}

    def forward(p):
        return fn(p, None)[0]

    def reverse(p):
        return jax.grad(forward)(p)

    def jvp(p):
        return jax.jvp(lambda q: fn(q, diffrax.ForwardMode())[0], (p,), (dp,))

    out = {"case": case, "impl": impl}
    for name, f in (("forward", forward), ("grad", reverse), ("jvp", jvp)):
        clock = Clock()
        traced = jax.jit(f).trace(p0)
        t_trace = clock()
        lowered = traced.lower()
        t_lower = clock()
        compiled = lowered.compile()
        t_xla = clock()
        res = jax.block_until_ready(compiled(p0))
        t_first = clock()
        warm = []
        for _ in range(repeat):
            jax.block_until_ready(compiled(p0))
            warm.append(clock())
        wall, cpu = np.array([w for w, _ in warm]), np.array([c for _, c in warm])
        out[name] = {
            "trace_s": t_trace[0],
            "lower_s": t_lower[0],
            "xla_s": t_xla[0],
            "compile_s": t_trace[0] + t_lower[0] + t_xla[0],
            "compile_cpu_s": t_trace[1] + t_lower[1] + t_xla[1],
            "trace_cpu_s": t_trace[1],
            "lower_cpu_s": t_lower[1],
            "xla_cpu_s": t_xla[1],
            "first_run_s": t_first[0],
            "warm_s": float(np.median(wall)),
            "warm_min_s": float(np.min(wall)),
            "warm_cpu_s": float(np.median(cpu)),
            **hlo_stats(lowered, compiled),
        }
        if name == "forward":
            out["value"] = float(res)
        elif name == "grad":
            out["gradient"] = np.asarray(res).tolist()
            out["grad_dot_dp"] = float(np.sum(np.asarray(res) * np.asarray(dp)))
        else:
            out["jvp_primal"] = float(res[0])
            out["jvp_tangent"] = float(res[1])
    out["steps"] = int(jax.jit(lambda p: fn(p, None)[1])(p0))
    out["load_start"] = load0
    out["load_end"] = os.getloadavg()
    out["device"] = f"{jax.devices()[0].platform} ({jax.device_count()} device(s))"
    return out


# ---------------------------------------------------------------------------------- the parent
def run_child(case, impl, repeat, smoke, timeout, impacts=4) -> dict:
    env = dict(os.environ)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    env.pop("ROLLAX_LOOP", None)
    if impl in LOOP_ENV:
        env["ROLLAX_LOOP"] = LOOP_ENV[impl]
    if "JAX_PLATFORMS" not in env and shutil.which("nvidia-smi") is None:
        env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, __file__, "--child", case, impl, "--repeat", str(repeat)]
    if smoke:
        cmd.append("--smoke")
    cmd += ["--impacts", str(impacts)]
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"case": case, "impl": impl, "error": f"timed out after {timeout} s"}
    wall = time.perf_counter() - t
    lines = [s for s in r.stdout.splitlines() if s.startswith("{")]
    if r.returncode or not lines:
        tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
        return {"case": case, "impl": impl, "error": " | ".join(tail)}
    res = json.loads(lines[-1])
    res["process_wall_s"] = wall
    return res


def fmt(x, unit=""):
    if x is None:
        return "n/a"
    if unit == "ms":
        return f"{1e3 * x:.2f}"
    return f"{x:.2f}"


def num(x, spec=".10g"):
    return "n/a" if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def tables(results: dict) -> str:
    def get(case, impl, what, key):
        r = results.get(case, {}).get(impl)
        if not r or "error" in r:
            return None
        return r[what][key]

    rows = [
        "Compile times: wall (CPU time of the process) in s; warm: median wall time in ms.",
        "",
        "| case | integrator | steps | compile fwd [s] | compile grad [s] | compile jvp [s] | "
        "warm fwd [ms] | warm grad [ms] | warm jvp [ms] | grad/fwd | jvp/fwd | load (start, end) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for case, by in results.items():
        for impl in IMPLS:
            r = by.get(impl)
            if r is None:
                continue
            if "error" in r:
                rows.append(f"| {case} | {impl} | {r['error'][:200]} |" + " |" * 10)
                continue
            c = {
                k: f"{r[k]['compile_s']:.2f} ({r[k]['compile_cpu_s']:.2f})"
                for k in ("forward", "grad", "jvp")
            }
            w = {k: r[k]["warm_s"] for k in ("forward", "grad", "jvp")}
            load = f"{r['load_start'][0]:.2f}, {r['load_end'][0]:.2f}"
            rows.append(
                f"| {case} | {impl} | {r['steps']} | {c['forward']} | {c['grad']} | "
                f"{c['jvp']} | {fmt(w['forward'], 'ms')} | {fmt(w['grad'], 'ms')} | "
                f"{fmt(w['jvp'], 'ms')} | {fmt(w['grad'] / w['forward'])} | "
                f"{fmt(w['jvp'] / w['forward'])} | {load} |"
            )
    rows += [
        "",
        "Targets: compile rollax / diffrax <= 1.2 (r/d: wall (CPU)); rollax grad/fwd <= 5 and "
        "rollax grad <= diffrax grad (warm wall times).",
        "",
        "| case | compile fwd r/d | compile grad r/d | rollax grad/fwd | grad r/d | jvp r/d | "
        "value rollax | value diffrax | rel. diff | d/dp rollax (grad . dp) | jvp tangent | "
        "d/dp diffrax |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case, by in results.items():
        for us in ("rollax", "loop", "segments"):
            if us not in by:
                continue
            cr, cg = (
                f"{fmt(ratio(get(case, us, k, q), get(case, 'diffrax', k, q)))}"
                f" ({fmt(ratio(get(case, us, k, c), get(case, 'diffrax', k, c)))})"
                for k, q, c in (
                    ("forward", "compile_s", "compile_cpu_s"),
                    ("grad", "compile_s", "compile_cpu_s"),
                )
            )
            gf = ratio(get(case, us, "grad", "warm_s"), get(case, us, "forward", "warm_s"))
            gg = ratio(get(case, us, "grad", "warm_s"), get(case, "diffrax", "grad", "warm_s"))
            jj = ratio(get(case, us, "jvp", "warm_s"), get(case, "diffrax", "jvp", "warm_s"))
            a, b = by.get(us, {}), by.get("diffrax", {})
            va, vb = a.get("value"), b.get("value")
            rel = None if va is None or vb is None else abs(va - vb) / max(abs(vb), 1e-300)
            flag = " **(> 1e-6)**" if rel is not None and rel > 1e-6 else ""
            rows.append(
                f"| {case} ({us}) | {cr} | {cg} | {fmt(gf)} | {fmt(gg)} | {fmt(jj)} | "
                f"{num(va, '.12g')} | {num(vb, '.12g')} | {num(rel, '.1e')}{flag} | "
                f"{num(a.get('grad_dot_dp'))} | {num(a.get('jvp_tangent'))} | "
                f"{num(b.get('grad_dot_dp'))} |"
            )
    rows += [
        "",
        "Compile time split (trace / lower / XLA, CPU s) and program sizes (StableHLO ops, "
        "StableHLO while; optimised HLO instructions, while, computations):",
        "",
        "| case | integrator | program | trace | lower | XLA | StableHLO ops | SHLO while | "
        "HLO instr. | HLO while | HLO comps |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case, by in results.items():
        for impl in IMPLS:
            r = by.get(impl)
            if not r or "error" in r:
                continue
            for k in ("forward", "grad", "jvp"):
                s = r[k]
                rows.append(
                    f"| {case} | {impl} | {k} | {s['trace_cpu_s']:.2f} | {s['lower_cpu_s']:.2f} | "
                    f"{s['xla_cpu_s']:.2f} | {s['stablehlo_ops']} | {s['stablehlo_while']} | "
                    f"{s['hlo_instructions']} | {s['hlo_while']} | {s['hlo_computations']} |"
                )
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", nargs="+", choices=CASES, help="default: all (--smoke: 2 of them)")
    p.add_argument("--impl", nargs="+", choices=IMPLS, default=["rollax", "segments", "diffrax"])
    p.add_argument("--repeat", type=int, default=20, help="warm runs per program (median)")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run: 2 repeats, a short robot run, cases oscillator and ball unless --case",
    )
    p.add_argument("--out", type=Path, help="folder for bench_gradients.json and .md")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per child process")
    p.add_argument(
        "--max-load",
        type=float,
        help="before each process, wait (up to --wait s in all) while the 1-minute load "
        "average is above this",
    )
    p.add_argument("--wait", type=float, default=1800, help="seconds to wait for --max-load")
    p.add_argument("--child", nargs=2, metavar=("CASE", "IMPL"), help=argparse.SUPPRESS)
    p.add_argument(
        "--impacts",
        type=int,
        default=4,
        help="ball and pendulum: the impact that ends the run (0: no reset map, the first); "
        "robot_flight: 0 for the same robot without a reset map, ended at its touchdown",
    )
    a = p.parse_args()
    repeat = 2 if a.smoke else a.repeat
    if a.child:
        print(json.dumps(child(a.child[0], a.child[1], repeat, a.smoke, a.impacts)))
        return
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python "
        f"{platform.python_version()}; load average {os.getloadavg()}",
        flush=True,
    )
    cases = a.case or (["oscillator", "ball"] if a.smoke else list(CASES))
    results: dict = {}
    deadline = time.monotonic() + a.wait
    for case in cases:
        results[case] = {}
        for impl in a.impl:
            while (
                a.max_load is not None
                and os.getloadavg()[0] > a.max_load
                and time.monotonic() < deadline
            ):
                time.sleep(10)
            r = run_child(case, impl, repeat, a.smoke, a.timeout, a.impacts)
            results[case][impl] = r
            msg = r.get("error") or (
                f"value {r['value']:.12g}, steps {r['steps']}, compile fwd/grad/jvp "
                f"{r['forward']['compile_s']:.1f}/{r['grad']['compile_s']:.1f}/"
                f"{r['jvp']['compile_s']:.1f} s (CPU {r['forward']['compile_cpu_s']:.1f}/"
                f"{r['grad']['compile_cpu_s']:.1f}/{r['jvp']['compile_cpu_s']:.1f} s), "
                f"warm fwd/grad/jvp "
                f"{1e3 * r['forward']['warm_s']:.2f}/{1e3 * r['grad']['warm_s']:.2f}/"
                f"{1e3 * r['jvp']['warm_s']:.2f} ms, load {r['load_start'][0]:.2f}"
            )
            print(f"{case:12s} {impl:8s} {msg}", flush=True)
    md = tables(results)
    print()
    print(md)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        meta = {
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "smoke": a.smoke,
            "impacts": a.impacts,
            "repeat": repeat,
            "rtol": RTOL,
            "atol": ATOL,
            "load_end": os.getloadavg(),
            "versions": {m: version(m) for m in ("jax", "jaxlib", "diffrax", "equinox", "rollax")},
        }
        (a.out / "bench_gradients.json").write_text(
            json.dumps({"meta": meta, "results": results}, indent=1)
        )
        (a.out / "bench_gradients.md").write_text(md + "\n")
        print(f"wrote {a.out / 'bench_gradients.json'} and {a.out / 'bench_gradients.md'}")


if __name__ == "__main__":
    main()
