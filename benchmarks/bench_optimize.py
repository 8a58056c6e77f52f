"""Benchmark: one disk trajectory optimisation to convergence (issue 14).

The Sect. 5 disk (r = m0 = d2 = g = 1, four unit masses) turned by phi_T = -pi at rest in
T = 8 with mu = 0.2 and N_min = 0.5 (the friction constraint active), K = 16 knots per mass
(64 variables), path constraints on 201 times. Reports the wall time cold (compilation
included) and warm (a second run in the same process), SQP iterations and simulations, and
the cost of one gradient against one forward solve of the constraint values (warm, best of
5): reverse mode (``jax.grad`` of a scalar through ``rollax.solve``), the forward-mode
Jacobian of all 404 values (what the optimiser uses), and the same scalar gradient through
plain diffrax as the baseline.

``--starts N`` (default 4): N starts (no motion and N - 1 random ones) together (one
``optimize`` call: their simulations batched by ``vmap``) against one at a time (one call per
start), both warm (each compiled by a first run), with the best cost of each.

    python benchmarks/bench_optimize.py [--starts N]

``--smoke``: 2 SQP iterations per optimisation, 2 starts, one timed run each
(tests/test_scripts_smoke.py); ``--out DIR`` is accepted and unused (the results are printed
only).
"""

from __future__ import annotations

import argparse
import platform
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.robot import RestToRestControl, disk_manoeuvre, evaluate, optimize


def best(fn, *args, n=5):
    jax.block_until_ready(fn(*args))
    out = []
    for _ in range(n):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        out.append(time.perf_counter() - t)
    return min(out)


def starts_together_and_one_at_a_time(man, n: int, **kw) -> None:
    rng = np.random.default_rng(0)
    X = np.concatenate([np.zeros((1, 64)), 0.1 * rng.standard_normal((n - 1, 64))])

    def together():
        return optimize(man, knots=16, x0=X, **kw)

    def alone():
        return [optimize(man, knots=16, x0=x, **kw) for x in X]

    together(), alone()  # compile both
    t = time.perf_counter()
    opt = together()
    t_together = time.perf_counter() - t
    t = time.perf_counter()
    opts = alone()
    t_alone = time.perf_counter() - t
    print(
        f"{n} starts (warm): together {t_together:.2f} s (best J = "
        f"{np.nanmin(opt.start_costs):.8g}), one at a time {t_alone:.2f} s (best J = "
        f"{min(o.cost for o in opts):.8g}); SQP iterations {[o.iterations for o in opts]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=4)
    parser.add_argument("--out", default=None, help="unused: the results are printed only")
    parser.add_argument("--smoke", action="store_true", help="2 iterations each (the smoke test)")
    args = parser.parse_args()
    kw, runs = ({}, 5) if not args.smoke else (dict(max_iter=2), 1)  # optimize(), timed runs
    if args.smoke:
        args.starts = 2
    rollax.configure()
    man = disk_manoeuvre(T=8.0, mu=0.2, n_min=0.5)
    t = time.perf_counter()
    opt = optimize(man, knots=16, **kw)
    cold = time.perf_counter() - t
    t = time.perf_counter()
    opt2 = optimize(man, knots=16, **kw)
    warm = time.perf_counter() - t
    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"{jax.device_count()} {jax.default_backend()} device(s), jax {jax.__version__}"
    )
    print(
        f"disk to convergence: {opt.status}, J = {opt.cost:.8g}, violation "
        f"{opt.violation:.1e}, kkt {opt.kkt:.1e}; {opt.iterations} SQP iterations, "
        f"{opt.evaluations} simulations"
    )
    print(f"  cold {cold:.2f} s (compilation included), warm {warm:.2f} s (J = {opt2.cost:.8g})")

    z = opt.control.z

    def scalar(z, forward_mode):
        J, h, g = evaluate(man, RestToRestControl(z, man.T), forward_mode=forward_mode)
        return J + h @ h + jnp.sum(jnp.maximum(g, 0.0) ** 2)

    f_fwd = jax.jit(lambda z: scalar(z, False))
    g_rev = jax.jit(jax.grad(lambda z: scalar(z, False)))
    jac = jax.jit(
        jax.jacfwd(lambda z: jnp.concatenate(evaluate(man, RestToRestControl(z, man.T))[1:]))
    )
    tf, tg, tj = best(f_fwd, z, n=runs), best(g_rev, z, n=runs), best(jac, z, n=runs)
    print(f"one forward solve (values): {tf * 1e3:.2f} ms")
    print(f"one gradient, reverse mode: {tg * 1e3:.2f} ms = {tg / tf:.1f}x forward")
    print(f"one Jacobian (64 directions, forward mode): {tj * 1e3:.2f} ms = {tj / tf:.1f}x forward")

    # baseline: the same scalar's gradient through plain diffrax (Dopri5, same tolerances)
    model, y0, T = man.model, man.y0, float(man.T)
    ts = jnp.linspace(0.0, T, 201)

    def plain(z):
        c = RestToRestControl(z, man.T)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, a: model.vector_field(t, y, c)),
            diffrax.Dopri5(),
            0.0,
            T,
            None,
            y0,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(
                rtol=1e-8, atol=1e-8, jump_ts=jnp.asarray(c.knots)
            ),
            max_steps=16384,
        )
        N = jax.vmap(lambda t, y: model.contact_forces(t, y, c)[0])(ts, sol.ys)
        yT = sol.ys[-1]
        return c.effort() + yT[8] ** 2 + jnp.sum(jnp.maximum(0.5 - N, 0.0) ** 2)

    pf, pg = best(jax.jit(plain), z, n=runs), best(jax.jit(jax.grad(plain)), z, n=runs)
    print(
        f"plain diffrax: forward {pf * 1e3:.2f} ms, gradient {pg * 1e3:.2f} ms = "
        f"{pg / pf:.1f}x forward"
    )
    if args.starts > 1:
        starts_together_and_one_at_a_time(man, args.starts, **kw)


if __name__ == "__main__":
    main()
