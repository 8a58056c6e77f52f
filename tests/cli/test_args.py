"""The rollax command under bad input and faults: one-line errors with exit code 2 for every
option, --version, strict JSON, broken pipes, --out naming a file, SIGINT during a sweep."""

import argparse
import glob
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rollax
from rollax.cli import build_parser, main
from rollax.cli._args import _Check, dumps, integer, real

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _checked_options():
    """(command words, option string, nargs, type) of every option with a checked type."""
    found = []

    def walk(parser, words):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, words + [name])
            elif isinstance(action.type, _Check) and action.option_strings:
                found.append((tuple(words), action.option_strings[0], action.nargs, action.type))

    walk(build_parser(), [])
    return found


OPTIONS = _checked_options()


def test_every_numeric_option_is_checked():
    parser = build_parser()
    unchecked = []

    def walk(p, words):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, words + [name])
            elif action.type in (int, float) and not action.choices:
                unchecked.append((words, action.option_strings or action.dest))

    walk(parser, [])
    assert unchecked == []
    assert {w[0] for w, *_ in OPTIONS} == {
        "basin",
        "shot",
        "steady",
        "floquet",
        "friction",
        "robot",
        "penny",
        "identify",
    }


def _invalid(t):
    """A strategy of texts that ``t`` must refuse."""
    junk = st.sampled_from(["abc", "", "1,5", "0x", "one", "1e", "[1]", " ", "1 2"])
    if isinstance(t, integer):
        outs = [st.integers(max_value=t.lo - 1).map(str)]
        if t.hi < 10**18:
            outs.append(st.integers(min_value=t.hi + 1).map(str))
        non_int = st.sampled_from(["1.5", "nan", "inf", "-inf", "2e3", "1.0"])
        return st.one_of(junk, non_int, *outs)
    assert isinstance(t, real)
    bad = ["nan", "NaN", "-nan"]
    if not t.inf:
        bad += ["inf", "-inf", "1e999"]
    elif t.lo > -math.inf:
        bad += ["-inf"]
    outs = []
    if t.lo > -math.inf:
        lo = st.floats(max_value=t.lo, allow_nan=False, allow_infinity=False)
        outs.append((lo.filter(lambda x: x < t.lo or t.lo_open)).map(repr))
    if t.hi < math.inf:
        hi = st.floats(min_value=t.hi, allow_nan=False, allow_infinity=False)
        outs.append((hi.filter(lambda x: x > t.hi or t.hi_open)).map(repr))
    return st.one_of(junk, st.sampled_from(bad), *outs)


@st.composite
def _bad_call(draw):
    words, opt, nargs, t = draw(st.sampled_from(OPTIONS))
    value = draw(_invalid(t))
    n = {None: 1, "+": 1, "?": 1}.get(nargs, nargs)
    return (
        list(words)
        + [f"{opt}={value}" if value.startswith("-") and n == 1 else opt]
        + ([] if value.startswith("-") and n == 1 else [value] * n),
        opt,
        value,
    )


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(call=_bad_call())
def test_invalid_values_of_every_option_give_one_line_and_exit_2(call, capsys):
    argv, opt, value = call
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, (argv, err)
    assert lines[0].startswith("rollax ") and ": error: " in lines[0], err
    assert f"{opt} = " in lines[0] and ("allowed" in lines[0] or "must" in lines[0]), err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize(
    "argv, match",
    [
        (
            ["basin", "--rtol", "-1e-9"],
            "--rtol = -1e-9 is not allowed: it is outside the allowed range",
        ),
        (["basin", "--max-steps", "0"], "--max-steps = 0 is not allowed"),
        (["basin", "--devices", "0"], "--devices = 0 is not allowed"),
        (["penny", "--theta-dot", "nan"], "--theta-dot = nan is not allowed: it must be a finite"),
        (["friction", "stop", "--u0", "nan", "0", "1"], "--u0 = nan is not allowed"),
        (["friction", "fit", "--degree", "500"], "--degree = 500 is not allowed"),
        (["steady", "--w3-max", "0"], "--w3-max = 0 is not allowed"),
        (["robot", "optimize", "--time-limit", "0"], "--time-limit = 0 is not allowed"),
        (["robot", "optimize", "--time-limit", "-5"], "--time-limit = -5 is not allowed"),
        (["basin", "--friction", "-inf"], "--friction = -inf is not allowed"),
        (["basin", "--grid", "3", "abc"], "--grid = 'abc' is not allowed"),
        (["basin", "--rtol=--"], "--rtol = '--' is not allowed"),
        (["basin", "--beta", "0.8", "1e300"], "--beta = 1e300 is not allowed"),
        (["basin", "--beta", "-10", "1"], "--beta = -10 is not allowed"),
        (["basin", "--slip-delta", "5"], "--slip-delta = 5 is not allowed without --friction"),
        (
            ["basin", "--slip-delta", "5", "--friction", "inf"],
            "--slip-delta = 5 is not allowed without --friction",
        ),
        (["floquet", "--n-rho", "100000"], "--n-rho = 100000 is not allowed"),
        (
            ["floquet", "--n-rho", "1000", "--n-j", "1000", "--out", "/tmp/x"],
            "--n-rho x --n-j = 1000 x 1000 = 1,000,000 is not allowed",
        ),
        (["floquet", "--j-max", "2"], "--j-max = 2 is not allowed"),
        (["friction", "stop", "--force", "1"], "--force = 1 is not allowed"),
        (
            ["friction", "limit-directions", "--body", "disc", "--lam", "0.5"],
            "--lam = 0.5 is not allowed with --body disc",
        ),
        (
            ["robot", "optimize", "--body", "disk", "--target", "1", "1"],
            "--target applies to --body ball only",
        ),
        (
            ["robot", "optimize", "--body", "disk", "--heading", "1"],
            "--heading applies to --body ball only",
        ),
        (["robot", "optimize", "--body", "ball", "--phi-T", "1"], "--phi-T applies to --body disk"),
        (
            ["penny", "--impact", "elastic", "--e", "0.5"],
            "--e = 0.5 is not allowed with --impact elastic",
        ),
    ],
)
def test_the_cases_of_the_issue(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err


def test_version(capsys):
    # rollax's version with what a bug report needs: jax, jaxlib, diffrax, equinox, the device
    import diffrax
    import equinox
    import jax
    import jaxlib

    assert main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == (
        f"rollax {rollax.__version__} (jax {jax.__version__}, jaxlib "
        f"{jaxlib.__version__}, diffrax {diffrax.__version__}, equinox "
        f"{equinox.__version__}; {jax.default_backend()}: {len(jax.devices())} x "
        f"{jax.devices()[0].device_kind})"
    )


def test_out_naming_a_file_is_refused_before_any_work(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    t = time.perf_counter()
    assert main(["basin", "--grid", "4", "4", "--out", str(f)]) == 2
    assert time.perf_counter() - t < 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out = " in err and "is a file" in err
    assert f.read_text() == "x"


def test_out_that_cannot_be_written_or_is_empty(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    # a directory below a file cannot be made: one line, exit 2 (it was a traceback, exit 1)
    assert main(["basin", "--grid", "2", "2", "--no-progress", "--out", str(f / "sub")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write the output" in err
    # it says why: the directory cannot be made (not that the disk is full: a new-user review
    # met "only 0 B is free there" for --out /proc/nope)
    assert "cannot be made" in err and "free" not in err, err
    assert main(["basin", "--grid", "2", "2", "--out", ""]) == 2
    assert "--out = '' is not allowed" in capsys.readouterr().err


def test_basin_help_shows_each_default_once(capsys):
    assert main(["basin", "--help"]) == 0
    out = capsys.readouterr().out
    assert "(default: None)" not in out and "--r r" in out and "--R R" in out


def test_strict_json():
    text = dumps(
        {
            "a": math.nan,
            "b": [math.inf, -math.inf, 1.5],
            "c": np.float32("nan"),
            "d": np.array([1.0, np.nan]),
            "e": np.int64(3),
        }
    )
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c)) == {
        "a": None,
        "b": [None, None, 1.5],
        "c": None,
        "d": [1.0, None],
        "e": 3,
    }


def _sigint_default():
    # Ctrl-C acts in the child even where this process inherited SIGINT ignored (a shell's
    # background job); rollax itself leaves an ignored SIGINT ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _rollax(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "rollax.cli", *args],
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_sigint_default,
        **kw,
    )


def test_a_broken_pipe_ends_quietly():
    p = _rollax("friction", "law", "--eps", *map(str, np.linspace(0, 3, 4000)))
    p.stdout.close()  # the reader goes away at once (like ``| head -0``)
    err = p.stderr.read()
    p.wait(timeout=120)
    assert p.returncode in (0, 141) and err == "", err


def test_sigint_during_a_basin_sweep_keeps_the_regions_and_resumes(tmp_path):
    out = tmp_path / "out"
    args = [
        "basin",
        "--grid",
        "120",
        "100",
        "--chunk-size",
        "400",
        "--t-max",
        "30",
        "--no-progress",
        "--out",
        str(out),
    ]
    p = _rollax(*args)
    t0 = time.monotonic()
    records = str(out / "basin.zarr" / "_rollax" / "records" / "c" / "*" / "*")
    while not glob.glob(records):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() - t0 < 240
        time.sleep(0.02)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    stdout, err = p.communicate(timeout=60)
    latency = time.monotonic() - t
    assert p.returncode == 130, err
    assert latency < 1.5, latency
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted by SIGINT after" in lines[0], err
    assert "rerun the same command to resume" in lines[0]
    kept = glob.glob(records)  # the finished regions' records
    assert 1 <= len(kept) < 30
    p = _rollax(*args, "--json")
    stdout, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    summary = json.loads(stdout)
    assert sum(summary["counts"].values()) == 12000
    assert len(glob.glob(records)) == 30  # the store holds every region now


# ------------------------------------------------------------------ public constructors
def _constructors():
    import dataclasses

    from rollax.models.friction.coulomb import Coulomb
    from rollax.models.friction.linear import LinearEllipsoidal
    from rollax.analysis.penny import EllipseTable, Penny
    from rollax.models.rim import Rim
    from rollax.models.slip import SlipSettings

    out = []
    for cls in (Rim, Coulomb, LinearEllipsoidal, Penny, EllipseTable, SlipSettings):
        for f in dataclasses.fields(cls):
            if f.metadata.get("static") or f.name in ("mu",) and cls is Rim:
                continue  # Rim.mu = inf is allowed: no slipping
            out.append((cls, f.name))
    return out


CONSTRUCTORS = _constructors()
BAD_VALUES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, "abc", None, "1.0", [1.0, "x"]]),
    st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=200, deadline=None)
@given(case=st.sampled_from(CONSTRUCTORS), bad=BAD_VALUES)
def test_invalid_values_of_public_constructors_give_one_line_value_errors(case, bad):
    """NaN, infinities, wrong types and negative values (every parameter of these is positive
    or has a bounded range) are refused with one line naming the parameter."""
    cls, name = case
    try:
        cls(**{name: bad})
    except ValueError as err:
        msg = str(err)
        assert "\n" not in msg and name in msg, msg
    else:
        # a negative value may be allowed (an angle, a sign); NaN, inf and text never are
        assert isinstance(bad, float) and math.isfinite(bad), (cls.__name__, name, bad)


def test_every_option_and_sub_command_has_help_text():
    # issue 35: options without help text; each says what it is (and its default)
    import argparse

    from rollax.cli import build_parser

    missing = []

    def walk(parser, path):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                helped = {c.dest for c in a._choices_actions if c.help}
                for name, sp in a.choices.items():
                    if name not in helped and not sp.description:
                        missing.append(f"{path} {name}")
                    walk(sp, f"{path} {name}")
            elif not a.help and a.dest != "help":
                missing.append(f"{path} {'/'.join(a.option_strings) or a.dest}")

    walk(build_parser(), "rollax")
    assert not missing, missing
    # plain text (no reST markup from module docstrings), and the paper the numbers cite
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in sub.choices.items():
        text = sp.format_help()
        assert "``" not in text, name
        assert "Equation, section and figure numbers refer to" in text, name


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["penny", "chaos", "--impacts", "6", "--json"],
            "--impacts applies to `rollax penny run` only",
        ),
        (
            ["penny", "chaos", "--table", "circle", "--e", "0.5", "--json"],
            "--table, --e apply to `rollax penny run` only",
        ),
        (["penny", "--samples", "8"], "--samples applies to `rollax penny chaos` only"),
        (["penny", "run", "--seed", "3"], "--seed applies to `rollax penny chaos` only"),
        (["basin", "--rtol", "1e-16", "--grid", "2", "2"], "--rtol = 1e-16 is not allowed"),
        (["basin", "--atol", "1e-305", "--grid", "2", "2"], "--atol = 1e-305 is not allowed"),
    ],
)
def test_options_that_would_be_ignored_or_refused_late_are_refused_first(
    argv, message, capsys, tmp_path
):
    # refused before any work: no output folder, one line naming the option
    rc = main(argv + ["--out", str(tmp_path / "o")] if "--json" not in argv else argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "o").exists()


def _serve(reply: bytes | None):
    """A TCP service on localhost that is not a Dask scheduler: it accepts, sends ``reply``
    (nothing for None) and keeps the connection open; returns its address and a stopper."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if reply:
                conn.sendall(reply)

    threading.Thread(target=loop, daemon=True).start()

    def stop():
        srv.close()
        for c in held:
            c.close()

    return f"tcp://127.0.0.1:{srv.getsockname()[1]}", stop


@pytest.mark.parametrize(
    "reply, said",
    [
        (None, "it sent nothing within"),  # an HTTP server waits for a request
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not a Dask handshake"),  # a banner read as a frame size
        (b"\x00" * 16, "not a Dask handshake"),
    ],
)
def test_a_scheduler_address_where_something_else_listens_is_refused_at_once(
    reply, said, tmp_path, capsys, monkeypatch
):
    from rollax.cli import _args

    monkeypatch.setattr(_args, "HANDSHAKE_SECONDS", 0.5)
    address, stop = _serve(reply)
    try:
        t0 = time.monotonic()
        code = main(["basin", "--grid", "4", "4", "--no-progress", "--out", str(tmp_path),
                     "--scheduler", address])  # fmt: skip
        took = time.monotonic() - t0
    finally:
        stop()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"--scheduler = {address!r}" in err[0] and "not a Dask scheduler" in err[0], err
    assert said in err[0], err
    assert took < 10, took


@pytest.mark.parametrize(
    "text, said",
    [
        ("{}", 'holds no scheduler "address"'),
        ("a,b\n1,2\n", "cannot be read as JSON"),
        ('{"address": 7}', 'holds no scheduler "address"'),
        ("\xff\xfe", "cannot be read as JSON"),
    ],
)
def test_a_scheduler_file_that_is_not_one_gives_one_line(text, said, tmp_path, capsys):
    f = tmp_path / "scheduler.json"
    f.write_text(text, encoding="latin-1")
    code = main(["basin", "--grid", "4", "4", "--no-progress", "--out", str(tmp_path / "o"),
                 "--scheduler", str(f)])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"--scheduler = {str(f)!r} is not a Dask scheduler file" in err[0], err
    assert said in err[0], err
