"""Hand-written mutation check of rollax's physics core (issue 63); not a test, not run in CI.

Each mutant is one textual edit (a sign flip, a dropped term, a changed constant) of one module
under ``src/rollax``: the models, the impact maps, the event-time derivative, the friction laws,
the ensemble's bookkeeping and the shot's probability map. For each mutant the script copies
``src/`` into a temporary folder, applies the edit there (never to the worktree's ``src/``), and
runs the default-run tests that guard that module (``-m "not slow" -x``) with the copy first on
``PYTHONPATH``, under a per-mutant timeout. A mutant is *killed* when a test fails, *survived*
when all pass, *timeout* when the run exceeded the limit (undecided), *error* when pytest could
not run (exit 2-5).

Usage (from the repository root; ~1-3 min a mutant on 2 shared cores, most of it JAX compiling):

    python3 benchmarks/mutation/mutate.py                      # every mutant
    python3 benchmarks/mutation/mutate.py --only dgdt_dropped k_r_sign_w3
    python3 benchmarks/mutation/mutate.py --root /tmp/old --tag before   # an older checkout's tests
    python3 benchmarks/mutation/mutate.py --smoke --out DIR    # apply and revert one mutant
                                                               # on a copy, run no test

It writes ``mutation-<tag>.json`` and ``mutation-<tag>.md`` (killed/survived per module) into
``--out`` (default: beside this script). The results of the run for issue 63 are in
``benchmarks/RESULTS.md`` (section "Mutation check").
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]


class Mutant(NamedTuple):
    name: str
    module: str  # relative to src/rollax
    old: str  # must occur exactly once in the module
    new: str
    tests: tuple[str, ...]  # pytest arguments (files, node ids, -k expressions)
    what: str


T = "tests/"
MUTANTS = [
    # ------------------------------------------------ event-time derivative (rollax.solve)
    Mutant(
        "dgdt_dropped",
        "_integrate/_solve.py",
        "(t, y), (jnp.ones_like(t), f)\n    )[1]",
        "(t, y), (jnp.zeros_like(t), f)\n    )[1]",
        # (a node id and its file together run in the file's order: the node alone)
        (
            T + "integrate/test_solve_gradients.py::"
            "test_a_time_dependent_event_time_has_the_closed_form_derivatives",
        ),
        "the event-time slope without its explicit dg/dt term (issue 63 (a))",
    ),
    Mutant(
        "event_time_jvp_sign",
        "_integrate/_solve.py",
        "-g_dot / jnp.where(safe, slope, 1.0)",
        "g_dot / jnp.where(safe, slope, 1.0)",
        (T + "integrate/test_solve_gradients.py",),
        "dt* = +dg/slope instead of -dg/slope",
    ),
    Mutant(
        "event_state_follows_interpolant",
        "_integrate/_solve.py",
        "return t_ev, y_ev + (f - interp.derivative(t_ev)) * dt",
        "return t_ev, y_ev",
        (
            T + "integrate/test_solve_gradients.py::"
            "test_the_state_at_a_boundary_event_has_the_boundarys_derivative_at_any_tolerance",
        ),
        "the state at an event moves with the interpolant's slope, not the field's",
    ),
    # ------------------------------------------------ the ensemble kernel's bookkeeping
    Mutant(
        "ensemble_rejections_uncounted",
        "_integrate/queue.py",
        "rejected=ln.rejected + (live & ~accept).astype(jnp.int32)",
        "rejected=ln.rejected",
        (
            T + "test_conformance.py::test_both_integrators_count_the_same_nonzero_rejections",
            T + "core/test_solution.py",
        ),
        "the ensemble never counts rejected steps (issue 63 (c))",
    ),
    Mutant(
        "ensemble_start_sign",
        "_integrate/queue.py",
        "(t, y), (jnp.ones_like(t), k1))\n    return jnp.where(g != 0",
        "(t, y), (jnp.zeros_like(t), k1))\n    return jnp.where(g != 0",
        (
            T + "integrate/test_solve_gradients.py::"
            "test_a_time_dependent_crossing_starting_at_zero_on_the_ensemble_kernel",
            T + "integrate/test_ensemble.py",
        ),
        "an event starting at zero: its side without dg/dt",
    ),
    # ------------------------------------------------ the shot
    Mutant(
        "shot_no_angle_scatter",
        "analysis/shot.py",
        "sigma = (sd_speed / dv, sd_angle / da)",
        "sigma = (sd_speed / dv, 0.0)",
        (T + "analysis/test_shot.py",),
        "the probability map without the angle scatter (issue 63 (b))",
    ),
    Mutant(
        "shot_score_sign",
        "analysis/shot.py",
        "score = (made[:, None] - p) * z /",
        "score = (p - made[:, None]) * z /",
        (T + "analysis/test_shot.py",),
        "the score-function gradient's sign",
    ),
    # ------------------------------------------------ the rim (rolling and slipping)
    Mutant(
        "rim_k_r_sign_w3",
        "models/rim.py",
        "dw3 - self.k_r * w3",
        "dw3 + self.k_r * w3",
        (
            T + "analysis/test_identification.py::test_generated_record_recovers_the_truth",
            T + "test_rim_records.py",
            T + "drivers/test_identify.py",
        ),
        "rolling resistance on w3 with the wrong sign (issue 63 (d))",
    ),
    Mutant(
        "rim_k_d_dropped",
        "models/rim.py",
        "dw2 - self.k_d * w2",
        "dw2",
        (T + "models/test_rim.py", T + "test_rim_records.py"),
        "the drilling dissipation dropped",
    ),
    Mutant(
        "rim_gravity_factor",
        "models/rim.py",
        "- g * c / (\n            r * (1 + j)\n        )",
        "- g * c / (\n            r * (2 + j)\n        )",
        (T + "models/test_rim.py",),
        "(1 + j) -> (2 + j) in the gravity term of dw1",
    ),
    Mutant(
        "slip_friction_sign",
        "models/slip.py",
        "return _newton_euler(rim, y, -muF2 * c_phi, -muF2 * s_phi)",
        "return _newton_euler(rim, y, muF2 * c_phi, -muF2 * s_phi)",
        (T + "models/test_slip.py",),
        "sliding friction along +u1 (pushing the slip)",
    ),
    # ------------------------------------------------ the ball and disk robots
    Mutant(
        "ball_cm_offset_halved",
        "models/robot/examples.py",
        "zeta0=jnp.array([0.0, 0.0, -0.05])",
        "zeta0=jnp.array([0.0, 0.0, -0.025])",
        (
            T + "models/robot/test_ball.py",
            T + "models/robot/test_flight.py",
            T + "systems/test_robot.py",
        ),
        "the ball's CM offset halved (issue 63 (e))",
    ),
    Mutant(
        "ball_coriolis_factor",
        "models/robot/ball.py",
        "+ 2 * thd1[:, None] * zp)",
        "+ thd1[:, None] * zp)",
        (T + "models/robot/test_ball.py",),
        "the Coriolis factor 2 of the masses' acceleration dropped",
    ),
    Mutant(
        "ball_normal_force_external",
        "models/robot/ball.py",
        "N = self.total_mass * self.g + acc @ Gam - Fe[2]",
        "N = self.total_mass * self.g + acc @ Gam + Fe[2]",
        (T + "models/robot/test_ball.py",),
        "the external force's vertical part with the wrong sign in N",
    ),
    Mutant(
        "disk_normal_force_gravity",
        "models/robot/disk.py",
        "N = self.total_mass * self.g + m @ (X * s + Z * c) - Fe[2]",
        "N = self.m0 * self.g + m @ (X * s + Z * c) - Fe[2]",
        (T + "models/robot/test_disk.py",),
        "the disk's N with only the shell's weight",
    ),
    # ------------------------------------------------ impact maps
    Mutant(
        "holonomic_restitution_factor",
        "models/impacts.py",
        "return qdot - (1.0 + e) * (dh @ qdot) / (dh @ grad_h) * grad_h",
        "return qdot - (2.0 * e) * (dh @ qdot) / (dh @ grad_h) * grad_h",
        (T + "models/test_impacts.py",),
        "(1 + e) -> 2 e in the holonomic impact",
    ),
    Mutant(
        "nonholonomic_restitution_factor",
        "models/impacts.py",
        "alpha = jnp.where(exists, -0.5 * (1.0 + e) * c1 / c2_safe, 0.0)",
        "alpha = jnp.where(exists, -0.5 * (1.0 + e * e) * c1 / c2_safe, 0.0)",
        (T + "models/test_impacts.py",),
        "(1 + e)/2 -> (1 + e^2)/2 in the nonholonomic impact",
    ),
    # ------------------------------------------------ friction laws
    Mutant(
        "hertz_kappa",
        "models/friction/base.py",
        '"hertz": 3.0 * math.pi / 16.0}',
        '"hertz": 3.0 * math.pi / 15.0}',
        (T + "models/friction/test_laws.py",),
        "kappa of the Hertz pressure, 3 pi/16 -> 3 pi/15",
    ),
    Mutant(
        "hertz_large_branch_at_eps_one",
        "models/friction/exact.py",
        "tl = jnp.where(one, 3.0 / 8.0, tl)",
        "tl = jnp.where(one, 3.0 / 7.0, tl)",
        (T + "models/friction/test_laws.py",),
        "the Hertz law's large-eps branch at eps = 1 (its limit T = 3/8 -> 3/7)",
    ),
    Mutant(
        "coulomb_sign",
        "models/friction/coulomb.py",
        "out = -self.mu * self.P * jnp.stack(",
        "out = self.mu * self.P * jnp.stack(",
        (T + "models/friction/test_laws.py",),
        "point-contact Coulomb friction along the slip",
    ),
]

MUTANTS += [
    # ------------------------------------------------ added after the first run (issue 63)
    Mutant(
        "rim_dw3_coupling_dropped",
        "models/rim.py",
        "dw3 = -r * w1 * w3 * s / D - j * r * w1 * w2 / (rho * (1 + j))",
        "dw3 = -r * w1 * w3 * s / D",
        (T + "models/test_rim.py",),
        "the w1 w2 term of dw3 (34) dropped",
    ),
    Mutant(
        "slip_normal_force_gravity_sign",
        "models/slip.py",
        "C = rim.mu * (1 + j) / j * (r**2 * w3**2 * c / D - r**2 * w1**2 / rho + g * s)",
        "C = rim.mu * (1 + j) / j * (r**2 * w3**2 * c / D - r**2 * w1**2 / rho - g * s)",
        (T + "models/test_slip.py",),
        "gravity's sign in the slipping normal force's rate",
    ),
    Mutant(
        "ball_gyroscopic_dropped",
        "models/robot/ball.py",
        "jnp.cross(Om, Id * Om)\n",
        "0.0 * jnp.cross(Om, Id * Om)\n",
        (T + "models/robot/test_ball.py",),
        "the shell's gyroscopic term Omega x I Omega dropped",
    ),
    Mutant(
        "disk_inertia_dropped",
        "models/robot/disk.py",
        "/ (self.d2 + m @ (S1**2 + S3**2))",
        "/ (m @ (S1**2 + S3**2) + 1e-3)",
        (T + "models/robot/test_disk.py",),
        "the disk's own moment of inertia d2 dropped from phi''",
    ),
    Mutant(
        "flight_gravity_sign",
        "models/robot/flight.py",
        "acc = Fe / M - b.g * E3 - Lam",
        "acc = Fe / M + b.g * E3 - Lam",
        (T + "models/robot/test_flight.py",),
        "gravity upwards in the ball's free flight",
    ),
    Mutant(
        "shot_restitution",
        "models/shot.py",
        "p_n = jnp.where(approach, -(1.0 + e) * u_n, 0.0)",
        "p_n = jnp.where(approach, -(1.0 + 0.5 * e) * u_n, 0.0)",
        (T + "models/test_shot.py",),
        "the shot's normal impulse (1 + e) -> (1 + e/2)",
    ),
    Mutant(
        "shot_tangential_factor",
        "models/shot.py",
        "k = 1.0 + 1.0 / j",
        "k = 1.0 + 0.5 / j",
        (T + "models/test_shot.py",),
        "the sphere's tangential impulse factor (1 + 1/j) -> (1 + 1/(2j))",
    ),
    Mutant(
        "shot_release_spin_units",
        "analysis/shot.py",
        "        2.0 * math.pi * spin,\n",
        "        math.pi * spin,\n",
        (
            T + "analysis/test_shot.py::test_a_release_is_in_si_units_from_the_shooters_units",
            T + "models/test_shot.py",
        ),
        "backspin in Hz read as half-turns",
    ),
]

# pytest options for every run: the default run's selection, stop at the first failure
PYTEST = ["-m", "not slow", "-x", "-q", "-p", "no:cacheprovider", "--no-header"]


def apply(src_copy: Path, m: Mutant) -> None:
    path = src_copy / "rollax" / m.module
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise SystemExit(f"{m.name}: the text to mutate occurs {n} times in {m.module}")
    path.write_text(text.replace(m.old, m.new))


def _present(root: Path, arg: str) -> bool:
    """A test file, or a node id whose test the checkout at ``root`` has (an older checkout
    lacks the tests added since: they are left out of its run)."""
    path, _, name = arg.partition("::")
    if not (root / path).exists():
        return False
    return not name or f"def {name}(" in (root / path).read_text()


def run_one(m: Mutant, root: Path, timeout: float) -> dict:
    tests_dir = root / "tests"
    # a test the checkout lacks (an older one): its file, whole
    tests = [a if _present(root, a) else a.partition("::")[0] for a in m.tests]
    tests = list(dict.fromkeys(a for a in tests if (root / a.partition("::")[0]).exists()))
    with tempfile.TemporaryDirectory(prefix=f"mutant-{m.name}-") as tmp:
        src_copy = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src_copy, ignore=shutil.ignore_patterns("__pycache__"))
        apply(src_copy, m)
        env = {
            **os.environ,
            "PYTHONPATH": f"{src_copy}{os.pathsep}{tests_dir}",
            "JAX_PLATFORMS": "cpu",
            "MPLBACKEND": "Agg",
        }
        # the copy is what runs (rollax may be installed editable from elsewhere)
        where = subprocess.run(
            [sys.executable, "-c", "import rollax; print(rollax.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout.strip()
        assert where.startswith(str(src_copy)), where
        t0 = time.perf_counter()
        try:
            r = subprocess.run(
                [sys.executable, "-m", "pytest", *PYTEST, *tests],
                env=env,
                capture_output=True,
                text=True,
                cwd=root,
                timeout=timeout,
            )
            code, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            code, out = (
                None,
                (e.stdout or b"").decode(errors="replace")
                if isinstance(e.stdout, bytes)
                else (e.stdout or ""),
            )
        seconds = time.perf_counter() - t0
    if code is None:
        status = "timeout"
    elif code == 1:
        status = "killed"
    elif code == 0:
        status = "survived"
    else:
        status = "error"
    failed = [ln.split(" ")[1] for ln in out.splitlines() if ln.startswith("FAILED ")]
    return dict(
        name=m.name,
        module=m.module,
        what=m.what,
        tests=tests,
        status=status,
        exit_code=code,
        seconds=round(seconds, 1),
        killed_by=failed[:3],
        tail=out.strip().splitlines()[-3:] if status != "killed" else [],
    )


def report(results: list[dict], tag: str) -> str:
    per = collections.defaultdict(collections.Counter)
    for r in results:
        per[r["module"]][r["status"]] += 1
    lines = [
        f"# Mutation check ({tag})",
        "",
        "| module | planted | killed | survived | timeout/error |",
        "|---|---|---|---|---|",
    ]
    for mod, c in sorted(per.items()):
        lines.append(
            f"| `{mod}` | {sum(c.values())} | {c['killed']} | {c['survived']} | "
            f"{c['timeout'] + c['error']} |"
        )
    lines += ["", "| mutant | what | status | killed by | s |", "|---|---|---|---|---|"]
    for r in results:
        by = ", ".join(f"`{k.split('::')[-1]}`" for k in r["killed_by"]) or "-"
        lines.append(f"| `{r['name']}` | {r['what']} | {r['status']} | {by} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="mutant names (default: all)")
    ap.add_argument(
        "--root", default=str(ROOT), help="the checkout whose tests/ run (default: this one)"
    )
    ap.add_argument("--tag", default="after", help="the report's name: mutation-<tag>.*")
    ap.add_argument("--timeout", type=float, default=420.0, help="seconds per mutant")
    ap.add_argument("--out", default=str(Path(__file__).parent), help="folder for the report")
    ap.add_argument("--smoke", action="store_true", help="apply one mutant to a copy; no tests")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(ROOT / "src", Path(tmp) / "src")
            for m in MUTANTS:  # every mutant's text is found exactly once
                text = (ROOT / "src" / "rollax" / m.module).read_text()
                assert text.count(m.old) == 1, m.name
            apply(Path(tmp) / "src", MUTANTS[0])
        print(f"smoke: {len(MUTANTS)} mutants apply; nothing run")
        return 0
    by_name = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.only or () if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown mutants {unknown}: the names are {list(by_name)}")
    chosen = [by_name[n] for n in args.only] if args.only else MUTANTS  # in the order given
    results = []
    for m in chosen:
        r = run_one(m, Path(args.root).resolve(), args.timeout)
        results.append(r)
        print(f"{r['status']:9s} {r['seconds']:7.1f} s  {m.name}  {r['killed_by'][:1]}", flush=True)
        (out / f"mutation-{args.tag}.json").write_text(json.dumps(results, indent=1) + "\n")
        (out / f"mutation-{args.tag}.md").write_text(report(results, args.tag))
    return 0


if __name__ == "__main__":
    sys.exit(main())
