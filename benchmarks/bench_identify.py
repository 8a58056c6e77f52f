"""Benchmark: ``rollax.identify`` on the rim, 15 s of 240 Hz camera data (issue 15).

The data: the rolling ball near its steady motion at beta = 1.0, w3 = 10 1/s (it stays on the
rim for 16.7 s with k_d = 0.02 1/s), perturbed, integrated by ``rollax.solve`` at 1e-11,
sampled at 240 Hz for 15 s (3600 samples), noise 1 mm on d and z and 2 mrad on alpha. The fit:
k_d and k_r and the initial state (beta, w1, w2, w3 and alpha), noise levels estimated.

Reports the fit's wall time cold (compilation included) and warm (a second fit in the same
process), its iterations, and the cost of one Jacobian (forward mode, 7 directions) against one
forward solve of the residuals (both warm, best of 5).

    python benchmarks/bench_identify.py
"""

from __future__ import annotations

import platform
import time
import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.identification import fit_rim, rim_observations, simulate_camera
from rollax.rim import Rim
from rollax.systems import RimTracked


def main() -> None:
    rollax.configure()
    true = Rim(k_d=0.02, k_r=0.0)
    ys = np.asarray(true.steady_state(1.0, 10.0))
    y0 = np.concatenate([ys + np.array([0.002, 0.1, 0.1, 0.02]), [0.0]])
    t, d, z, a, t_sep = simulate_camera(true, y0, 15.0 + 1e-9, seed=7)
    keep = t < 15.0
    obs = rim_observations(t[keep], d[keep], z[keep], a[keep])
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{jax.device_count()} JAX CPU devices; data: {len(obs.t)} samples over "
          f"{obs.t[-1]:.2f} s (the ball leaves at {t_sep:.2f} s)")
    for label in ("cold", "warm"):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rollax.IdentifiabilityWarning)
            fit = fit_rim(obs)
        wall = time.perf_counter() - t0
        print(f"fit ({label}): {wall:.2f} s, {fit.iterations} iterations, converged "
              f"{fit.converged}")
    truth = np.concatenate([[0.02, 0.0], y0])
    for n, v, s, tr in zip(fit.names, fit.values, fit.std_errors, truth):
        print(f"  {n:>10s} = {v:.8g} +- {s:.2g}   (truth {tr:.8g}, {(v - tr) / s:+.2f} SE)")

    # one forward solve of the observables and its forward-mode Jacobian, written with the
    # public API (what rollax.identify evaluates at each iteration)
    system = RimTracked(Rim())
    ts = jnp.asarray(obs.t)

    @jax.jit
    def observe(x):
        s = eqx.tree_at(lambda m: (m.rim.k_d, m.rim.k_r), system, (x[0], x[1]))
        sol = rollax.solve(s, x[2:], ts[0], ts[-1], ts=ts, rtol=1e-10, atol=1e-10,
                           adjoint=diffrax.ForwardMode())
        return jax.vmap(s.camera)(ts, sol.ys)

    jac = jax.jit(jax.jacfwd(observe))
    x = jnp.asarray(fit.values)

    def best(f):
        jax.block_until_ready(f())
        out = []
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(f())
            out.append(time.perf_counter() - t0)
        return min(out)

    t_fwd = best(lambda: observe(x))
    t_jac = best(lambda: jac(x))
    print(f"one forward solve (residuals): {1e3 * t_fwd:.1f} ms; one Jacobian (7 directions, "
          f"forward mode): {1e3 * t_jac:.1f} ms; ratio {t_jac / t_fwd:.1f}x")


if __name__ == "__main__":
    main()
