#!/usr/bin/env bash
# Which configuration of the CPU backend segfaults with the image's jax (0.11.2)?
set -u
export PYTHONUNBUFFERED=1 ROLLAX_CACHE_DIR=off JAX_PLATFORMS=cpu
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -c "import jax; print([k for k in dir(jax.config) if 'pmap' in k or 'shmap' in k or 'shard_map' in k])"
t=tests/test_ensemble.py::test_bounces_match_closed_form
for dev in 1 2; do
  echo "== ROLLAX_CPU_DEVICES=$dev"
  ROLLAX_CPU_DEVICES=$dev timeout 90 python3 -m pytest -p no:benchmark -p no:cacheprovider -q -x $t 2>&1 | grep -m3 "passed\|failed\|Fatal\|line 7"
done
echo "== devices=2, jax_pmap_shmap_merge off"
ROLLAX_CPU_DEVICES=2 timeout 90 python3 - <<'PY' 2>&1 | grep -v "^  File.*site-packages" | tail -5
import jax
try:
    jax.config.update("jax_pmap_shmap_merge", False); print("merge off")
except Exception as e:
    print("no flag", e)
import rollax; rollax.configure()
import pytest, sys
sys.exit(pytest.main(["-p", "no:benchmark", "-p", "no:cacheprovider", "-q", "-x", "tests/test_ensemble.py::test_bounces_match_closed_form"]))
PY
