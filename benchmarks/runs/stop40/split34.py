"""Issue 34's "no slower" split (stop 40): the Fig. 11 panel with HEAD, HEAD with stop 37's
rule (a step whose samples may hide a pair of crossings is rejected) switched off, and the code
before issue 34 (c94ec36^, through PYTHONPATH=.base/src), each in its own process, alternating.

    python split34.py head|rule_off|base OUT.json
"""

import json
import os
import runpy
import sys
from pathlib import Path

which, out = sys.argv[1], sys.argv[2]
here = Path(__file__).resolve().parents[2]  # benchmarks/
script = here / "bench_basin.py"
src = script.read_text()
if which == "base":
    src = src.replace("rollax.analysis.basin", "rollax.basin").replace(
        "rollax.models.rim", "rollax.rim"
    )
    script = Path(out).with_suffix(".bench_basin_base.py")
    script.write_text(src)
if which == "rule_off":
    import jax.numpy as jnp

    import rollax._integrate.queue as q

    # the kernel looks the function up when it is traced: every step counts as resolved
    q._unresolved = lambda fn, K, t, y, h, vals, at, bl: jnp.zeros(jnp.shape(t), bool)
sys.argv = [str(script), "--panels", "none", "--repeat", "5", "--sample", "10", "--json", out]
os.environ["ROLLAX_CACHE_DIR"] = "off"
runpy.run_path(str(script), run_name="__main__")
print(json.dumps({"which": which}))
