"""No silent waits (rollax._core._announce): a compile longer than AFTER seconds is said once,
named after the rollax function and system that asked for it, and its end is said too."""

from __future__ import annotations

import logging
import os
import sysconfig
import time

import jax
import jax.numpy as jnp
import pytest

import rollax
from rollax._core import _announce


@pytest.fixture
def quick(monkeypatch):
    """Announce after 0.2 s, looking every 0.02 s (the watcher reads both at each look)."""
    monkeypatch.setattr(_announce, "AFTER", 0.2)
    monkeypatch.setattr(_announce, "PERIOD", 0.02)
    monkeypatch.setattr(_announce, "QUIET", 0.3)
    monkeypatch.delenv("ROLLAX_ANNOUNCE", raising=False)  # (the suite's conftest turns it off)
    _announce.start()
    time.sleep(0.1)  # the watcher's current sleep (at most the old PERIOD) ends
    yield
    # stopped again: left running, it went on announcing the rest of the worker's tests
    # (merged into one "compiled ... in 84.7 s" printed after the suite's summary)
    _announce._shut()  # (what the exit handler does: stop and join it)
    _announce._thread = None
    _announce._stop.clear()


class Slow(rollax.AbstractSystem):
    """A system whose program takes a while to compile: a long chain of transcendental terms."""

    k: jax.Array = rollax.parameter(1.0)
    terms: int = 400

    state_names = ("x", "v")

    def vector_field(self, t, y, mode):
        a = y[0]
        for i in range(self.terms):
            a = jnp.sin(a + i * 1e-3) * self.k
        return jnp.stack([y[1], -y[0] + 1e-9 * a])


def test_a_long_compile_of_a_solve_is_announced_with_its_system(quick, caplog):
    with caplog.at_level(logging.INFO, logger="rollax"):
        rollax.solve(Slow(terms=401), jnp.array([1.0, 0.0]), 0.0, 1.0)
        time.sleep(0.5)  # the watcher sees the compile end
    said = [r.getMessage() for r in caplog.records if r.name == "rollax"]
    start = [m for m in said if m.startswith("compiling rollax.solve for Slow")]
    # once; twice at most where a loaded machine stretched a pause between its programs
    assert 1 <= len(start) <= 2 and not [m for m in said if "a JAX program" in m], said
    assert "later calls reuse it" in start[0]
    assert any(m.startswith("compiled rollax.solve for Slow in ") for m in said), said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rollax"):  # compiled: nothing to say
        rollax.solve(Slow(terms=401), jnp.array([0.5, 0.0]), 0.0, 1.0)
        time.sleep(0.5)
    assert not [r for r in caplog.records if r.name == "rollax"]


def test_a_long_compile_is_said_again_while_it_lasts(quick, monkeypatch, caplog):
    monkeypatch.setattr(_announce, "EVERY", 0.1)
    with caplog.at_level(logging.INFO, logger="rollax"):
        rollax.solve(Slow(terms=403), jnp.array([1.0, 0.0]), 0.0, 1.0)
        time.sleep(0.5)
    said = [r.getMessage() for r in caplog.records if r.name == "rollax"]
    again = [m for m in said if m.startswith("still compiling rollax.solve for Slow (")]
    # between the first line and the end: with the seconds so far, growing
    assert again and said.index(again[0]) > 0, said
    assert [m for m in said if m.startswith("compiled ")], said
    secs = [int(m.split("(")[1].split(" s")[0]) for m in again]
    assert secs == sorted(secs), secs


def test_a_compile_outside_rollax_is_named_by_the_callers_line(quick, caplog):
    def f(x):
        for i in range(3000):
            x = jnp.sin(x) * (1 + i * 1e-4) + jnp.cos(x * i)
        return x

    with caplog.at_level(logging.INFO, logger="rollax"):
        jax.jit(f)(1.0).block_until_ready()
        time.sleep(0.5)
    said = [r.getMessage() for r in caplog.records if r.name == "rollax"]
    assert any(
        m.startswith("compiling a JAX program (called at test_announce.py:") for m in said
    ), said


def test_the_caller_is_the_line_that_called_jax_not_a_callback_inside_it():
    # CI once named hypothesis' gc callback (it ran during the compile) as "the caller"
    from types import SimpleNamespace as F

    def frame(path):
        return F(f_code=F(co_filename=path))

    jax_dir = os.path.dirname(jax.__file__)
    user, traced, gc_hook = "/home/me/run.py", "/home/me/model.py", "/x/hypothesis/junk.py"
    innermost_first = [
        frame(gc_hook),
        frame(os.path.join(jax_dir, "_src", "interpreters", "mlir.py")),
        frame(traced),
        frame(os.path.join(jax_dir, "_src", "pjit.py")),
        frame(user),
        frame(os.path.join(os.path.dirname(os.__file__), "runpy.py")),
    ]
    assert _announce._caller(innermost_first) is innermost_first[4]  # pyright: ignore
    # no frame outside JAX's: the innermost one that is not a library's
    assert _announce._caller(innermost_first[:4]) is innermost_first[0]  # pyright: ignore


def test_the_callers_line_skips_the_libraries_jax_calls_while_tracing():
    # CI once named numpy's np.ndim (called by jnp while tracing) as "the caller"
    import contextlib
    import threading

    import numpy as np

    for lib in (np, jax, contextlib, threading):
        assert _announce._library(lib.__file__), lib.__name__
    assert not _announce._library(__file__)
    installed = os.path.join(sysconfig.get_paths()["purelib"], "mine", "run.py")
    assert not _announce._library(installed)  # a user's installed package is the user's


def test_without_logging_configured_the_line_goes_to_stderr(monkeypatch, capsys):
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    _announce.LOG.info("compiling rollax.solve for X: test")
    assert "rollax: compiling rollax.solve for X: test" in capsys.readouterr().err


def test_with_logging_configured_rollax_prints_nothing_itself(capsys, caplog):
    with caplog.at_level(logging.INFO, logger="rollax"):  # caplog: a root handler
        _announce.LOG.info("compiling rollax.solve for X: test")
    assert "rollax: compiling" not in capsys.readouterr().err
    assert "compiling rollax.solve for X: test" in caplog.text
