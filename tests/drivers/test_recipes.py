"""The cluster recipes of docs/guide/distributed.md: each ``# recipe:`` block of the guide is run
as written, and the configuration object it makes is checked (for dask-jobqueue, its job script:
the scheduler directives and the worker command it would submit; nothing is submitted)."""

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "distributed.md"


def _recipe(name: str) -> str:
    blocks = re.findall(r"```python\n(# recipe: (\w+)\n.*?)```", GUIDE.read_text(), re.S)
    found = {k: code for code, k in blocks}
    assert name in found, f"no '# recipe: {name}' block in {GUIDE.name}: {sorted(found)}"
    return found[name]


def _cluster(name: str):
    scope: dict = {}
    exec(compile(_recipe(name), f"{GUIDE.name}:{name}", "exec"), scope)  # noqa: S102
    return scope["cluster"]


def test_the_slurm_recipe_makes_the_job_it_says():
    pytest.importorskip("dask_jobqueue")
    cluster = _cluster("slurm")
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "#SBATCH -A myproject" in script
    assert "#SBATCH --cpus-per-task=32" in script
    assert "#SBATCH -t 02:00:00" in script
    assert re.search(r"#SBATCH --mem=\d+G", script)
    assert "export ROLLAX_CACHE_DIR=/shared/rollax-cache" in script
    worker = next(line for line in script.splitlines() if "dask_worker" in line)
    # 32 worker processes of one thread each (one JAX CPU device per worker)
    assert "--nworkers 32" in worker and "--nthreads 1" in worker, worker
    # the cache is set before the workers start
    assert script.index("ROLLAX_CACHE_DIR") < script.index(worker)


def test_the_pbs_recipe_makes_the_job_it_says():
    pytest.importorskip("dask_jobqueue")
    cluster = _cluster("pbs")
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "#PBS -A myproject" in script
    assert "#PBS -l select=1:ncpus=32:mem=64GB" in script
    assert "#PBS -l walltime=02:00:00" in script
    assert "export ROLLAX_CACHE_DIR=/shared/rollax-cache" in script
    worker = next(line for line in script.splitlines() if "dask_worker" in line)
    assert "--nworkers 32" in worker and "--nthreads 1" in worker, worker


def test_the_gpu_recipe_starts_one_worker_per_gpu():
    pytest.importorskip("dask_cuda")
    jax = pytest.importorskip("jax")
    try:
        gpus = len(jax.devices("gpu"))
    except RuntimeError:
        pytest.skip("no GPU here")
    scope: dict = {}
    exec(compile(_recipe("cuda"), "cuda", "exec"), scope)  # noqa: S102
    cluster = scope["gpu_cluster"]()
    try:
        assert len(cluster.workers) == gpus
    finally:
        cluster.close()
