"""rollax._integrate._fused: the fused ensemble path (one start per lane of one Pallas kernel) against the
work queue, on the conformance cases of every system (generated starts): identical statuses,
events, modes, crossing counts, step and reset counts; end times, states and first crossings
within 1e-10. The per-start program runs under jax.vmap (its arithmetic) and as the Pallas
kernel in interpret mode (the structure-of-arrays rewrite the GPU compiles); and the kernel
lowers for a CUDA GPU (Triton) without one."""

import jax
import numpy as np
import pytest

import rollax
from rollax._integrate import _fused
from rollax.analysis.basin import Axis, basin_map, preset
from test_conformance import CASES, TOL


def _compare(name, a, b):
    for f in ("status", "event", "mode", "counts", "steps", "resets", "rejected"):
        np.testing.assert_array_equal(
            np.asarray(getattr(a, f)), np.asarray(getattr(b, f)), err_msg=f"{name}: {f}"
        )
    np.testing.assert_allclose(b.t, a.t, rtol=0, atol=1e-10, err_msg=f"{name}: t")
    np.testing.assert_allclose(b.y, a.y, rtol=1e-8, atol=1e-8, err_msg=f"{name}: y")
    np.testing.assert_allclose(b.t_first, a.t_first, rtol=0, atol=1e-10, err_msg=f"{name}: t_first")
    np.testing.assert_allclose(b.aux, a.aux, rtol=0, atol=1e-8, err_msg=f"{name}: aux")


def _both(name, n, mode, monkeypatch):
    monkeypatch.setattr(_fused, "CPU_MODE", mode)
    system, y0s, t1, opts = CASES[name](n) if n else CASES[name]()
    opts = {**TOL, **opts}
    a = rollax.solve_ensemble(system, y0s, 0.0, t1, lanes=32, backend="queue", **opts)
    b = rollax.solve_ensemble(system, y0s, 0.0, t1, backend="fused", **opts)
    _compare(name, a, b)
    # JAX arrays left on the device, as documented (read as NumPy when asked: issue 62)
    for f in (
        "t",
        "y",
        "mode",
        "aux",
        "status",
        "event",
        "counts",
        "t_first",
        "steps",
        "resets",
        "rejected",
    ):
        assert isinstance(getattr(b, f), jax.Array), f
        assert type(getattr(a, f)) is np.ndarray, f  # (the queue's: NumPy)


@pytest.mark.parametrize(
    "name",
    # (the robot: 83 s of compile for both programs; slow, for CI time)
    # (and the slipping rim: 60 s; stop 62)
    [
        # (the penny and the sliding disc: 98 s and 93 s on a slow day here; CI budget, stop 66)
        pytest.param(k, marks=pytest.mark.slow)
        if k in ("robot", "rim_slipping", "penny", "sliding")
        else k
        for k in CASES
    ],
)
def test_the_per_start_program_agrees_with_the_queue(name, monkeypatch):
    _both(name, None, "vmap", monkeypatch)


@pytest.mark.parametrize(
    "name",
    # (the rim: 73 s on a slow day here; CI budget, stop 66)
    [pytest.param("rim_rolling", marks=pytest.mark.slow), "oscillator", "bouncing_ball"],
)
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
        return orig(*args, **{**kw, "chunk": 32, "block": 16, "progress": lambda k: seen.append(k)})

    monkeypatch.setattr(_fused, "solve", small_chunks)
    parts = rollax.solve_ensemble(system, y0s, 0.0, t1, backend="fused", valid=valid, **TOL)
    assert seen == [int(valid[:32].sum()), int(valid.sum())]
    ok = valid
    for f in ("status", "event", "steps"):
        np.testing.assert_array_equal(
            np.asarray(getattr(parts, f))[ok], np.asarray(getattr(whole, f))[ok]
        )
    np.testing.assert_array_equal(parts.t[ok], whole.t[ok])


def test_a_bad_backend_is_refused():
    system, y0s, t1, _ = CASES["oscillator"](4)
    with pytest.raises(
        ValueError,
        match=r"backend = 'gpu' is not allowed: it must be one of "
        r"'auto', 'queue', 'fused'",
    ):
        rollax.solve_ensemble(system, y0s, 0.0, t1, backend="gpu")


def test_auto_is_the_queue_on_a_cpu():
    from rollax._integrate.queue import check_backend

    assert check_backend("auto") == ("fused" if jax.default_backend() == "gpu" else "queue")


def test_the_kernel_lowers_for_a_cuda_gpu_without_one():
    # Pallas-Triton lowering happens at trace time: a primitive or shape Triton cannot take
    # fails here, on a CPU, before a GPU ever sees it
    from rollax._integrate import queue as E

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


@pytest.mark.parametrize("method", ["dopri5", "dopri8"])
def test_rolled_stages_are_the_unrolled_arithmetic(method):
    # the fused kernel's Runge-Kutta stages in a loop: the same sums in the same order plus
    # exact zeros, on random nonlinear fields, states and steps (fixed seeds); equal to
    # rounding (XLA contracts multiply-adds differently in a loop: Dopri8's large tableau
    # entries make that 3e-14 relative by its tenth stage)
    import jax.numpy as jnp

    from rollax._integrate import queue as E

    rk = E.METHODS[method]
    rng = np.random.default_rng(3)
    for _ in range(12):
        d = int(rng.integers(1, 6))
        W = jnp.asarray(rng.normal(size=(d, d)))
        c = jnp.asarray(rng.normal(size=d))

        def f(t, y, W=W, c=c):
            return jnp.sin(W @ y) * jnp.exp(-0.1 * t) + c * jnp.cos(y)

        def fg(t, y, f=f):
            return f(t, y), jnp.stack([y[0] - 0.3, jnp.sum(y**2) - 1.0])

        t = float(rng.uniform(-1, 1))
        y = jnp.asarray(rng.normal(size=d))
        h = float(rng.uniform(1e-4, 0.5))
        k1 = f(t, y)
        a = jax.jit(lambda t, y, h, k1: rk.step(f, t, y, h, k1, fg=fg))(t, y, h, k1)
        b = jax.jit(lambda t, y, h, k1: rk.step(f, t, y, h, k1, fg=fg, rolled=True))(t, y, h, k1)
        for i in (0, 1, 2, 4):  # y_new, err, ks, g at the new state
            np.testing.assert_allclose(np.asarray(b[i]), np.asarray(a[i]), rtol=1e-13, atol=1e-13)
        assert b[3] is None  # the stage states are not kept when rolled


def test_the_lane_tiles_carry_every_dtype_and_shape_both_ways():
    # the per-start leaves packed into one (W, N) float64 tile and back: booleans, int32
    # counts (negative too), float64 values, empty and multi-axis leaves, any order
    import jax.numpy as jnp

    rng = np.random.default_rng(5)
    N = 8
    leaves = [
        rng.uniform(size=(N, 3)) > 0.5,
        rng.integers(-(2**31), 2**31 - 1, (N,), np.int32),
        rng.normal(size=(N, 2, 3)),
        np.zeros((N, 0)),
        rng.normal(size=(N,)),
        rng.integers(-5, 5, (N, 4), np.int32),
    ]
    shapes = [x.shape[1:] for x in leaves]
    dtypes = [x.dtype for x in leaves]
    t = _fused._Tiles.of(shapes, dtypes)
    assert t.dtypes == (np.dtype(np.float64),) and t.widths == (16,)  # 3+1+6+0+1+4 -> 16
    tiles = t.pack([jnp.asarray(x) for x in leaves], N)
    assert tiles[0].shape == (16, N)
    back = t.unpack(tiles, shapes, dtypes, N)
    for x, y in zip(leaves, back):
        assert y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(np.asarray(y), x)


def test_splitting_and_joining_a_tile_is_the_identity_inside_a_kernel():
    # the tree of two-way splits and joins the kernel reads and writes its tile with, in
    # Pallas's interpret mode: rows come back in order, for every power-of-two width
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    for W in (2, 4, 8, 32):
        x = jnp.asarray(np.random.default_rng(W).normal(size=(W, 16)))

        def kernel(i_ref, o_ref):
            rows = _fused._split_rows(i_ref[...])
            o_ref[...] = _fused._join_rows([r * (k + 1) for k, r in enumerate(rows)])

        y = pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((W, 16), x.dtype), interpret=True
        )(x)
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x) * np.arange(1, W + 1)[:, None])


def test_each_kernel_reads_one_tile_and_writes_one(monkeypatch):
    # what keeps Triton's compile time down (see _fused._Tiles): every kernel of the fused
    # program makes one tensor load and one tensor store (its shared scalars aside), and a
    # system with a reset map has four kernels (set-up, serve, run, finish), one without three
    import contextlib
    import io
    import re

    from jax.experimental import pallas as pl

    orig = pl.pallas_call
    monkeypatch.setattr(pl, "pallas_call", lambda *a, **k: orig(*a, **{**k, "debug": True}))
    for name, n_kernels in (("oscillator", 3), ("bouncing_ball", 4)):
        _fused._runner.cache_clear()
        system, y0s, t1, _ = CASES[name](4)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rollax.fused_program(system, y0s, 0.0, t1)
        mods = re.split(r"The kernel jaxpr for pallas_call", buf.getvalue())[1:]
        assert len(mods) == n_kernels, name
        for m in mods:
            ir = m[m.find("\nmodule") :]
            # Pallas writes a ref by a swap: a load of the output tile too (never used; Triton
            # keeps it, checked with pip triton 3.9)
            assert len(re.findall(r"tt\.load %\S+ : tensor<", ir)) <= 2, name
            assert len(re.findall(r"tt\.store %\S+, %\S+ : tensor<", ir)) == 1, name
    _fused._runner.cache_clear()


def test_one_kernel_of_the_program_lowers_alone_and_bad_phases_are_refused():
    system, y0s, t1, _ = CASES["bouncing_ball"](4)
    whole = len(rollax.fused_program(system, y0s, 0.0, t1).as_text())
    sizes = {
        ph: len(rollax.fused_program(system, y0s, 0.0, t1, phase=ph).as_text())
        for ph in ("setup", "run", "serve", "finish")
    }
    assert all(0 < v < whole for v in sizes.values())
    with pytest.raises(
        ValueError,
        match=r"^phase = 'step' is not allowed: it must be None or "
        r"one of 'setup', 'run', 'serve', 'finish'$",
    ):
        rollax.fused_program(system, y0s, 0.0, t1, phase="step")
    osc, y0s, t1, _ = CASES["oscillator"](4)
    with pytest.raises(
        ValueError,
        match=r"phase = 'serve' is not allowed for this system: it "
        r"has no reset map",
    ):
        rollax.fused_program(osc, y0s, 0.0, t1, phase="serve")


def test_chunk_rows_are_classes_with_a_gpu_floor():
    # generated chunk sizes: every size of one class gets one row count (one compiled kernel)
    from rollax._integrate.queue import SIZE_FLOOR

    rng = np.random.default_rng(5)
    for n in np.concatenate([np.arange(1, 70), rng.integers(1, 1 << 20, 300)]).tolist():
        for block in (8, 32, 128):
            off = _fused.rows(n, block, "interpret")
            on = _fused.rows(n, block, "gpu")
            assert off >= max(n, block) and off & (off - 1) == 0  # a power of two
            assert off < 2 * max(n, block)  # no more than one octave of padding
            assert _fused.rows(n, block, "vmap") == off
            assert on == max(off, SIZE_FLOOR)
    # one kernel for every GPU ensemble up to the floor
    assert {_fused.rows(n, 32, "gpu") for n in range(1, SIZE_FLOOR + 1)} == {SIZE_FLOOR}


def test_a_kernel_moves_only_what_it_computes():
    # _pruned (issue 62): an output that is a lane input unchanged passes by the kernel, one
    # that depends on no input is made outside it, and a lane input no computed output needs
    # is not loaded; pallas_map then gives what the per-start function gives, on random inputs
    import jax.numpy as jnp

    def per_start(a, b, c, s):  # three lane leaves, one shared
        return a, jnp.zeros(3), b * s[0] + c[1], jnp.full((2,), 7.0), b

    ex = (jnp.float64(1.0), jnp.float64(2.0), jnp.zeros(2))
    closed = jax.make_jaxpr(per_start)(*ex, jnp.zeros(1))
    _, through, consts, used = _fused._pruned(closed, 3)
    assert through == [0, None, None, None, 1]
    assert sorted(consts) == [1, 3] and consts[3].tolist() == [7.0, 7.0]
    assert [bool(u) for u in used[:3]] == [False, True, True]
    rng = np.random.default_rng(62)
    for n in (32, 64):
        a, b, c = rng.normal(size=n), rng.normal(size=n), rng.normal(size=(n, 2))
        s = rng.normal(size=1)
        run = _fused.pallas_map(
            lambda a_, b_, c_, s_: per_start(a_, b_, c_, s_), ex, (jnp.zeros(1),), 32,
            interpret=True,
        )  # fmt: skip
        got = run((jnp.asarray(a), jnp.asarray(b), jnp.asarray(c)), (jnp.asarray(s),))
        want = jax.vmap(per_start, (0, 0, 0, None))(a, b, c, s)
        for k, (g, w) in enumerate(zip(got, want)):
            if k == 2:  # (computed in the kernel: a fused multiply-add may round once less)
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14, atol=0)
            else:  # passed by, or made outside: exactly
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.slow  # the shot's per-start program: minutes of compile on 2 cores
def test_the_shot_on_the_fused_path_agrees_with_the_queue(monkeypatch):
    # generated releases (speeds, angles, backspins): the fused path against the queue, the
    # records of the first crossings kept per event (issue 62)
    from rollax.analysis.shot import release
    from rollax.systems.shot import Shot

    monkeypatch.setattr(_fused, "CPU_MODE", "vmap")
    rng = np.random.default_rng(72)
    rel = zip(rng.uniform(6.6, 8.0, 24), rng.uniform(40, 64, 24), rng.uniform(0, 4, 24))
    y0s = np.stack([np.asarray(release(v, a, w)) for v, a, w in rel])
    opts = dict(rtol=1e-9, atol=1e-9, progress=False)
    a = rollax.solve_ensemble(Shot(), y0s, 0.0, 4.0, lanes=32, backend="queue", **opts)
    b = rollax.solve_ensemble(Shot(), y0s, 0.0, 4.0, backend="fused", **opts)
    _compare("shot", a, b)
    # (releases made and missed, some after contacts with the rim or the board: resets)
    assert len(np.unique(np.asarray(Shot().outcome(a)))) > 1
    assert np.asarray(a.resets).max() > 0
