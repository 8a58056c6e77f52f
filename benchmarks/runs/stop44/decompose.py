"""Where rollax's compile time goes against plain diffrax (issue 36, stop 44).

The oscillator x'' = -omega^2 x from (1, 0), rtol = atol = 1e-10, each variant in its own
process with the compile cache off: the forward solve and its reverse gradient (d/d omega),
traced, lowered and compiled; the time is their sum (wall, s) and the program size the
lowered StableHLO's lines.

* ``diffrax``: diffrax.Dopri5 + PIDController to t = 100, no event;
* ``diffrax_event``: the same, ended at the first zero of x by ``diffrax.Event`` (optx.Newton);
* ``rollax``: ``rollax.solve`` to t = 100, no event (its plain route: one diffrax solve with
  rollax's solver and controller);
* ``rollax_event_N``: ``rollax.solve`` ended at the first zero (a crossing event), N samples
  of the event per step (8: the default).

    python benchmarks/runs/stop44/decompose.py            # all, one process each
    python benchmarks/runs/stop44/decompose.py VARIANT    # one, JSON out
"""

import json
import subprocess
import sys
import time

VARIANTS = (
    "diffrax",
    "diffrax_event",
    "rollax",
    "rollax_event_1",
    "rollax_event_2",
    "rollax_event_8",
)


def one(variant: str) -> dict:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    import diffrax
    import jax.numpy as jnp
    import optimistix as optx

    import rollax

    y0 = jnp.array([1.0, 0.0])
    event = "event" in variant

    if variant.startswith("diffrax"):

        def fwd(w):
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(lambda t, y, w: jnp.stack([y[1], -(w**2) * y[0]])),
                diffrax.Dopri5(),
                0.0,
                100.0,
                None,
                y0,
                args=w,
                stepsize_controller=diffrax.PIDController(
                    rtol=1e-10, atol=1e-10, pcoeff=0.0, icoeff=1.0
                ),
                event=diffrax.Event(
                    lambda t, y, args, **kw: y[0], optx.Newton(1e-12, 1e-12, optx.rms_norm)
                )
                if event
                else None,
                max_steps=16_384,
                throw=False,
            )
            return sol.ts[-1] + sol.ys[-1][1]

    else:
        ns = int(variant.rsplit("_", 1)[1]) if event else None

        class Oscillator(rollax.AbstractSystem):
            omega: jax.Array = rollax.parameter(1.0)
            state_names = ("x", "v")

            @property
            def events(self):
                return (rollax.crossing("zero", target=1),) if event else ()

            def vector_field(self, t, y, mode):
                return jnp.stack([y[1], -(self.omega**2) * y[0]])

            def event_values(self, t, y, mode):
                return y[:1] if event else y[:0]

        def fwd(w):
            sol = rollax.solve(
                Oscillator(omega=w), y0, 0.0, 100.0, rtol=1e-10, atol=1e-10, n_samples=ns
            )
            return sol.t + sol.y[1]

    out = {"variant": variant}
    for name, f in (("forward", fwd), ("grad", jax.grad(fwd))):
        t = time.perf_counter()
        lowered = jax.jit(f).trace(jnp.asarray(1.3)).lower()
        compiled = lowered.compile()
        out[name + "_compile_s"] = time.perf_counter() - t
        out[name + "_lines"] = lowered.as_text().count("\n")
        out[name + "_value"] = float(compiled(jnp.asarray(1.3)))
    return out


def main():
    if len(sys.argv) > 1:
        print(json.dumps(one(sys.argv[1])))
        return
    rows = []
    for rnd in range(2):
        for v in VARIANTS:
            r = subprocess.run([sys.executable, __file__, v], capture_output=True, text=True)
            rows.append(dict(json.loads(r.stdout.strip().splitlines()[-1]), round=rnd + 1))
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
