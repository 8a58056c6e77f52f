"""The chunk store of rollax.sweep (rollax._drivers._chunks): verified, atomic, shareable, interruptible.

Most tests drive ``run_chunked`` with a cheap NumPy function (in this process, or in
subprocesses that do no JAX work), and one drives ``rollax.sweep``.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import rollax
import rollax._drivers._chunks as chunks
from rollax._drivers._chunks import ChunkWarning, SweepInterrupted, run_chunked

SRC = str(Path(__file__).resolve().parents[2] / "src")
N, CHUNK = 53, 10  # six chunks, the last one short


def _starts(lo, hi):
    i = np.arange(lo, hi)
    return np.stack([0.5 * i, i], axis=1)


def _fn(calls=None):
    def fn(chunk, valid, report=None):
        if calls is not None:
            calls.append(int(chunk[0, 1]))
        return {"sq": chunk[:, 0] ** 2, "idx": chunk[:, 1].astype(np.int64)}

    return fn


def _run(tmp_path, calls=None, **kw):
    kw = dict(dict(n=N, chunk_size=CHUNK, cache_dir=tmp_path, key="k", progress=False), **kw)
    return run_chunked(_fn(calls), _starts, **kw)


def _check(out):
    i = np.arange(N)
    np.testing.assert_array_equal(out["idx"], i)
    np.testing.assert_array_equal(out["sq"], (0.5 * i) ** 2)


def _files(tmp_path):
    return sorted((tmp_path / "chunks-k").glob("*.npz"))


def test_chunks_are_reused_and_removed_unless_kept(tmp_path):
    calls = []
    _check(_run(tmp_path, calls, keep_chunks=True))
    assert len(calls) == 6 and len(_files(tmp_path)) == 6
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an intact chunk is used silently
        _check(_run(tmp_path, calls))
    assert calls == []  # all six loaded
    assert not (tmp_path / "chunks-k").exists()  # removed after the successful run
    assert tmp_path.exists()  # the cache directory existed before: it stays
    new = tmp_path / "made"
    _check(_run(new))
    assert not new.exists()  # created by the run, empty afterwards: removed


def _rewrite(path, **changes):
    """Rewrite a chunk file with changed arrays but its old record (valid format, wrong data)."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize(
    "fault, why",
    [
        ("corrupt", "is corrupt"),
        ("truncated", "cannot be read"),
        ("garbage", "cannot be read"),
        ("empty", "cannot be read"),
        ("foreign", "has no valid rollax chunk record"),
    ],
)
def test_a_bad_chunk_is_redone_with_a_one_line_warning(tmp_path, fault, why):
    _run(tmp_path, keep_chunks=True)
    bad = _files(tmp_path)[2]
    if fault == "corrupt":
        with np.load(bad) as z:
            _rewrite(bad, sq=z["sq"] + 1.0)
    elif fault == "truncated":
        data = bad.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
    elif fault == "garbage":
        bad.write_bytes(b"not a chunk at all")
    elif fault == "empty":
        bad.write_bytes(b"")
    else:
        np.savez(bad, sq=np.zeros(CHUNK), idx=np.zeros(CHUNK, np.int64))
    calls = []
    with pytest.warns(ChunkWarning) as rec:
        _check(_run(tmp_path, calls, keep_chunks=True))
    assert calls == [20]  # only that chunk was recomputed
    (msg,) = [str(w.message) for w in rec if w.category is ChunkWarning]
    assert str(bad) in msg and why in msg and "\n" not in msg
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(_run(tmp_path, keep_chunks=True))  # and rewritten: now used silently


def test_a_stale_chunk_is_redone(tmp_path, monkeypatch):
    _run(tmp_path, keep_chunks=True)
    monkeypatch.setattr(chunks, "code_fingerprint", lambda: "0123456789abcdef0123")
    calls = []
    with pytest.warns(ChunkWarning, match="is stale") as rec:
        _check(_run(tmp_path, calls, keep_chunks=True))
    assert len(calls) == 6 and len(rec) == 6


def test_the_fingerprint_covers_the_version_and_the_code():
    fp = chunks.code_fingerprint()
    assert len(fp) == 20 and fp == chunks.code_fingerprint()
    chunks.code_fingerprint.cache_clear()
    assert chunks.code_fingerprint() == fp  # stable
    # a chunk of another sweep (other key) is not used either
    assert chunks.checksum({"a": np.arange(3)}) != chunks.checksum({"a": np.arange(3.0)})


def test_a_file_as_cache_dir_is_refused_before_any_work(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    calls = []
    with pytest.raises(ValueError, match="cache_dir = .* is a file"):
        _run(f, calls)
    assert calls == []


def test_a_sweep_too_large_is_refused_up_front():
    t = time.perf_counter()
    axes = [rollax.Axis("z", 0.5, 2.0, 100_000), rollax.Axis("e", 0.3, 0.9, 100_000)]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from bouncing_ball import BouncingBall

    with pytest.raises(MemoryError, match=r"10,000,000,000 starts needs about .* GB") as err:
        rollax.sweep(BouncingBall(), axes, y0={"v": 0.0}, t1=1.0, progress=False)
    assert "\n" not in str(err.value)
    assert time.perf_counter() - t < 2.0  # nothing was built


# ----------------------------------------------------------------- in other processes
WORKER = textwrap.dedent(
    """
    import signal, sys, time
    import numpy as np
    # Ctrl-C acts (a shell's background job inherits SIGINT ignored, and so would this test)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from rollax._drivers._chunks import run_chunked, SweepInterrupted
    folder, delay, log, out = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]

    def fn(chunk, valid, report):
        with open(log, "a") as f:
            f.write(f"{int(chunk[0, 1])}\\n")
        time.sleep(delay)
        return {"sq": chunk[:, 0] ** 2, "idx": chunk[:, 1].astype(np.int64)}

    def starts(lo, hi):
        i = np.arange(lo, hi)
        return np.stack([0.5 * i, i], axis=1)

    print("ready", flush=True)
    try:
        res = run_chunked(fn, starts, n=%d, chunk_size=%d, cache_dir=folder, key="k",
                          progress=False)
    except SweepInterrupted as err:
        print(err, file=sys.stderr)
        sys.exit(err.exit_code)
    np.savez(out, **res)
"""
    % (N, CHUNK)
)


def _worker(tmp_path, name, delay):
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log, out = tmp_path / f"{name}.log", tmp_path / f"{name}.npz"
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path / "store"), str(delay), str(log), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc, log, out


def _logged(log):
    return [int(x) for x in log.read_text().split()] if log.exists() else []


def test_two_runs_into_one_directory_both_finish_correctly(tmp_path):
    procs = [_worker(tmp_path, name, 0.1) for name in ("a", "b")]
    for proc, log, out in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        with np.load(out) as z:
            _check(dict(z))
    assert not list(tmp_path.glob("store/**/*.tmp"))  # no temporary file left behind


def _wait_for_chunks(tmp_path, k, timeout=60):
    t = time.monotonic()
    while len(list((tmp_path / "store" / "chunks-k").glob("*.npz"))) < k:
        assert time.monotonic() - t < timeout
        time.sleep(0.02)


def test_killed_run_resumes_from_its_finished_chunks(tmp_path):
    proc, log, _ = _worker(tmp_path, "killed", 0.3)
    _wait_for_chunks(tmp_path, 2)
    proc.kill()  # SIGKILL: no chance to clean up
    proc.communicate()
    saved = len(list((tmp_path / "store" / "chunks-k").glob("*.npz")))
    assert 2 <= saved < 6
    proc, log, out = _worker(tmp_path, "resumed", 0.0)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == "", err
    assert len(_logged(log)) == 6 - saved  # only the unfinished chunks were run
    with np.load(out) as z:
        _check(dict(z))


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_within_a_second_and_keeps_the_finished_chunks(tmp_path, sig, code):
    proc, log, _ = _worker(tmp_path, "stopped", 0.5)
    _wait_for_chunks(tmp_path, 2)
    time.sleep(0.1)  # into the next chunk (half a second long)
    t = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    latency = time.monotonic() - t
    assert proc.returncode == code, err
    assert latency < 1.0, latency
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "rerun the same command to resume" in lines[0], err
    assert f"by {signal.Signals(sig).name} after" in lines[0]
    kept = len(list((tmp_path / "store" / "chunks-k").glob("*.npz")))
    assert kept >= 2
    proc, log, out = _worker(tmp_path, "resumed", 0.0)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len(_logged(log)) == 6 - kept
    with np.load(out) as z:
        _check(dict(z))


@pytest.fixture
def sigint_acts():
    """SIGINT raises KeyboardInterrupt here, whatever this process inherited (a shell's
    background job starts with SIGINT ignored, and then rollax leaves it ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_an_interrupt_in_process_raises_sweep_interrupted(tmp_path, sigint_acts):
    calls = []

    def fn(chunk, valid, report):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during the third chunk
            time.sleep(5)  # a long chunk: the interrupt must not wait for it
        return _fn()(chunk, valid)

    t = time.monotonic()
    with pytest.raises(SweepInterrupted) as err:
        run_chunked(fn, _starts, n=N, chunk_size=CHUNK, cache_dir=tmp_path, key="k", progress=False)
    assert time.monotonic() - t < 2.0
    assert err.value.done == 2 and err.value.total == 6 and err.value.exit_code == 130
    assert len(_files(tmp_path)) == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_progress_moves_within_a_chunk_and_an_abandoned_chunk_stops(tmp_path, sigint_acts):
    # One chunk of 20 steps of 0.1 s, each reported: the bar moves within the chunk, and after
    # an interrupt (at step 3) the worker stops at a report instead of running to its end.
    shown, steps = [], []

    class Bar:
        def __init__(self, *a, **k):
            pass

        def update(self, k):
            shown.append(k)

        def set_postfix_str(self, s, refresh=True):
            pass

        def close(self):
            pass

    def fn(chunk, valid, report):
        for k in range(20):
            time.sleep(0.1)
            steps.append(k)
            report((k + 1) * len(chunk) // 20)
            if k == 3 and interrupt:
                os.kill(os.getpid(), signal.SIGINT)
        return _fn()(chunk, valid)

    import rollax._drivers._chunks as chunks

    interrupt = False
    old = chunks.tqdm
    chunks.tqdm = Bar
    try:
        run_chunked(fn, _starts, n=CHUNK, chunk_size=CHUNK)
        assert sum(shown) == CHUNK and len([k for k in shown if k > 0]) >= 3
        interrupt, steps[:] = True, []
        with pytest.raises(SweepInterrupted):
            run_chunked(fn, _starts, n=CHUNK, chunk_size=CHUNK)
        time.sleep(2.5)  # long enough for the rest of the chunk, had the worker gone on
        assert 4 <= len(steps) < 20  # it raised at a report after the interrupt
    finally:
        chunks.tqdm = old


@pytest.mark.parametrize(
    "n, chunk_size, width",
    [
        (1, 1 << 17, 4096),
        (4096, 1 << 17, 4096),
        (4097, 1 << 17, 5120),
        (6143, 1 << 17, 6144),
        (86_400, 1 << 17, 98_304),
        (98_305, 1 << 17, 114_688),
        (131_072, 1 << 17, 131_072),
        (200_000, 1 << 17, 1 << 17),
        (86_400, 1 << 16, 1 << 16),
        (53, 10, 10),
        (7, 10, 10),
    ],
)
def test_chunk_width(n, chunk_size, width):
    assert chunks.chunk_width(n, chunk_size) == width


def test_chunk_width_classes_bound_padding():
    for n in range(4097, 1 << 17, 997):
        w = chunks.chunk_width(n, 1 << 17)
        assert n <= w <= 1.25 * n
        k = w.bit_length() - 3  # w = m 2^k, m in 4..7 (or 8 = 4 2^(k+1))
        assert w % (1 << k) == 0 and 4 <= w >> k <= 7


def test_a_sweep_in_one_chunk_is_padded_to_its_class():
    seen = []

    def fn(chunk, valid, report=None):
        seen.append((len(chunk), int(valid.sum())))
        return {"idx": chunk[:, 1].astype(np.int64)}

    out = run_chunked(fn, _starts, n=5000, chunk_size=1 << 17, progress=False)
    assert seen == [(5120, 5000)]
    np.testing.assert_array_equal(out["idx"], np.arange(5000))


def test_the_bar_reaches_the_end_only_when_a_chunk_is_whole(monkeypatch):
    # a chunk whose solves are done but whose outcomes are still being computed (a summary
    # compiling at the first chunk) shows one start short, labelled, not 100 %
    import time as _time

    from rollax._drivers import _chunks

    log = []

    class Bar:
        def __init__(self, total, **kw):
            self.total, self.n, self.post = total, 0, ""

        def update(self, k):
            self.n += k
            log.append((self.n, self.post))

        def set_postfix_str(self, s, refresh=True):
            self.post = s
            log.append((self.n, s))

        def close(self):
            pass

    monkeypatch.setattr(_chunks, "tqdm", Bar)

    def fn(chunk, valid, report):
        report(int(valid.sum()))  # every solve of the chunk done ...
        _time.sleep(0.3)  # ... then the outcomes take a while
        return {"x": chunk[:, 0] * 2}

    out = _chunks.run_chunked(fn, np.arange(10.0)[:, None], chunk_size=4, progress=True)
    np.testing.assert_array_equal(out["x"], np.arange(10.0) * 2)
    during = [(n, p) for n, p in log if "outcomes" in p]
    assert during, log
    # while a chunk's outcomes ran, the bar stood one short of that chunk's end
    assert {n for n, _ in during} <= {3, 7, 9}
    assert log[-1][0] == 10 and max(n for n, _ in log) == 10
