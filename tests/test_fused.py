"""rollax._fused: the fused ensemble path (one start per lane of one Pallas kernel) against the
work queue, on the conformance cases of every system (generated starts): identical statuses,
events, modes, crossing counts, step and reset counts; end times, states and first crossings
within 1e-10. The per-start program runs under jax.vmap (its arithmetic) and as the Pallas
kernel in interpret mode (the structure-of-arrays rewrite the GPU compiles); and the kernel
lowers for a CUDA GPU (Triton) without one."""

import jax
import numpy as np
import pytest

import rollax
from rollax import _fused
from rollax.basin import Axis, basin_map, preset
from test_conformance import CASES, TOL


def _compare(name, a, b):
    for f in ("status", "event", "mode", "counts", "steps", "resets"):
        np.testing.assert_array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)),
                                      err_msg=f"{name}: {f}")
    np.testing.assert_allclose(b.t, a.t, rtol=0, atol=1e-10, err_msg=f"{name}: t")
    np.testing.assert_allclose(b.y, a.y, rtol=1e-8, atol=1e-8, err_msg=f"{name}: y")
    np.testing.assert_allclose(b.t_first, a.t_first, rtol=0, atol=1e-10,
                               err_msg=f"{name}: t_first")
    np.testing.assert_allclose(b.aux, a.aux, rtol=0, atol=1e-8, err_msg=f"{name}: aux")


def _both(name, n, mode, monkeypatch):
    monkeypatch.setattr(_fused, "CPU_MODE", mode)
    system, y0s, t1, opts = CASES[name](n) if n else CASES[name]()
    opts = {**TOL, **opts}
    a = rollax.solve_ensemble(system, y0s, 0.0, t1, lanes=32, backend="queue", **opts)
    b = rollax.solve_ensemble(system, y0s, 0.0, t1, backend="fused", **opts)
    _compare(name, a, b)


@pytest.mark.parametrize("name", list(CASES))
def test_the_per_start_program_agrees_with_the_queue(name, monkeypatch):
    _both(name, None, "vmap", monkeypatch)


@pytest.mark.parametrize("name", ["rim_rolling", "oscillator", "bouncing_ball"])
def test_the_pallas_kernel_in_interpret_mode_agrees_with_the_queue(name, monkeypatch):
    _both(name, 12, "interpret", monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rim_slipping", "sliding", "robot", "penny"])
def test_the_pallas_kernel_of_every_system_agrees_with_the_queue(name, monkeypatch):
    # measured: 30-60 s each on 2 cores (the robot's and the penny's kernels are large)
    _both(name, 6, "interpret", monkeypatch)


def test_a_sweep_gives_the_same_map_on_either_backend(monkeypatch):
    monkeypatch.setattr(_fused, "CPU_MODE", "vmap")
    rim, kw = preset("fig11", "none")
    kw["x"] = Axis("beta", 0.8, 1.8, 7)
    kw["y"] = Axis("omega1", -20.0, 20.0, 9)
    a = basin_map(rim, progress=False, backend="queue", **kw)
    b = basin_map(rim, progress=False, backend="fused", **kw)
    np.testing.assert_array_equal(a.outcome, b.outcome)
    np.testing.assert_allclose(b.t_end, a.t_end, rtol=0, atol=1e-10)


def test_padding_and_chunks_do_not_change_the_results(monkeypatch):
    # the chunks are padded to a power of two with invalid starts: any split of the starts
    # gives the same records, and invalid starts are reported as padding
    monkeypatch.setattr(_fused, "CPU_MODE", "vmap")
    system, y0s, t1, opts = CASES["oscillator"](37)
    valid = np.random.default_rng(0).uniform(size=37) > 0.3
    whole = rollax.solve_ensemble(system, y0s, 0.0, t1, backend="fused", valid=valid, **TOL)
    seen = []
    orig = _fused.solve

    def small_chunks(*args, **kw):
        return orig(*args, **{**kw, "chunk": 32, "block": 16,
                              "progress": lambda k: seen.append(k)})

    monkeypatch.setattr(_fused, "solve", small_chunks)
    parts = rollax.solve_ensemble(system, y0s, 0.0, t1, backend="fused", valid=valid, **TOL)
    assert seen == [int(valid[:32].sum()), int(valid.sum())]
    ok = valid
    for f in ("status", "event", "steps"):
        np.testing.assert_array_equal(np.asarray(getattr(parts, f))[ok],
                                      np.asarray(getattr(whole, f))[ok])
    np.testing.assert_array_equal(parts.t[ok], whole.t[ok])


def test_a_bad_backend_is_refused():
    system, y0s, t1, _ = CASES["oscillator"](4)
    with pytest.raises(ValueError, match=r"backend = 'gpu' is not allowed: it must be one of "
                                         r"'auto', 'queue', 'fused'"):
        rollax.solve_ensemble(system, y0s, 0.0, t1, backend="gpu")


def test_auto_is_the_queue_on_a_cpu():
    from rollax.ensemble import check_backend

    assert check_backend("auto") == ("fused" if jax.default_backend() == "gpu" else "queue")


def test_the_kernel_lowers_for_a_cuda_gpu_without_one():
    # Pallas-Triton lowering happens at trace time: a primitive or shape Triton cannot take
    # fails here, on a CPU, before a GPU ever sees it
    from rollax import ensemble as E

    system, y0s, t1, _ = CASES["rim_rolling"](4)
    lowered = rollax.fused_program(system, y0s, 0.0, t1)
    text = lowered.as_text()
    assert "triton" in text.lower() and len(text) > 100_000
    assert E.BACKENDS == ("auto", "queue", "fused")

    class _Callback(rollax.AbstractSystem):
        state_names = ("x",)

        def vector_field(self, t, y, mode):
            return jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct((1,), y.dtype), -y)

    with pytest.raises(NotImplementedError, match="pure_callback"):
        rollax.fused_program(_Callback(), np.ones((2, 1)), 0.0, 1.0)
