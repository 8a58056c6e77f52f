"""Issue 34's "no slower" split (stop 40): the Fig. 11 panel (``bench_basin.py``) or
``bench_solve.py`` with HEAD, HEAD with stop 37's rule (a step whose samples may hide a pair of
crossings is rejected) switched off on both integrators, and the code before issue 34
(c94ec36^, run with PYTHONPATH=.base/src), each in its own process, alternating.

    python split34.py basin|solve head|rule_off|base OUT.json
"""

import os
import runpy
import sys
from pathlib import Path

bench, which, out = sys.argv[1], sys.argv[2], sys.argv[3]
here = Path(__file__).resolve().parents[2]  # benchmarks/
script = here / ("bench_basin.py" if bench == "basin" else "bench_solve.py")
if which == "base":  # the modules' paths before the layout
    src = script.read_text()
    src = src.replace("rollax.analysis.basin", "rollax.basin").replace(
        "rollax.models.rim", "rollax.rim"
    )
    script = Path(out).with_suffix(f".{bench}_base.tmp.py")  # removed after the run
    script.write_text(src)
if which == "rule_off":
    import jax.numpy as jnp

    import rollax._integrate._solve as s
    import rollax._integrate.queue as q

    # looked up when the programs are traced: every step counts as resolved
    q._unresolved = lambda fn, K, t, y, h, vals, at, bl: jnp.zeros(jnp.shape(t), bool)
    s.unresolved_in = lambda values, start, near, t, h: jnp.zeros((), bool)
if bench == "basin":
    args = ["--panels", "none", "--repeat", "5", "--sample", "10", "--json", out]
else:
    args = ["--repeat", "3"]
sys.argv = [str(script), *args]
os.environ["ROLLAX_CACHE_DIR"] = "off"
try:
    runpy.run_path(str(script), run_name="__main__")
finally:
    if which == "base":
        script.unlink()
