"""Traced gradients kept between processes: the reverse pass of ``rollax.solve`` from disk.

The persistent compile cache (:mod:`rollax._core._setup`) keeps XLA's work, not JAX's: on the
4-impact bouncing ball, with the cache filled, a new process still spent 25-37 s of its 30-45 s
first ``jax.grad`` in Python, in JAX's linearisation of the solve and the transposition of its
checkpointed loops (``cProfile``: ``ad.linearize`` 17.5 s, ``_checkpointed_while_loop_bwd``
26 s, under profiling). That work depends only on the traced program, so it can be kept: when
``rollax.solve`` is differentiated in reverse mode (its inputs are JAX linearisation tracers),
the solve is exported with its VJP (:func:`jax.export.export`, ``serialize(vjp_order=1)``)
once, and every later process (and this one) calls the exported pair, whose reverse pass is
read from disk instead of traced.

The key is a SHA-256 of what determines the program: the solve's traced jaxpr (printed; the
addresses of Python objects in it removed), its constants and those of every inner closed jaxpr
(a loop body's constants are named, not printed, in the text), the input shapes and dtypes, the
arguments' static part, the code objects and captured values of every custom derivative rule in
it (their rules are Python, not in the jaxpr), and the versions of rollax, JAX, jaxlib, diffrax and equinox, with the backend. So another system, other
parameters' shapes, other options or other code give another key; the same program the same one.
The files live in ``rollax-traced/`` under JAX's compile-cache directory (so ``cache_dir="off"``
turns this off too, as does ``ROLLAX_TRACED=off``), written atomically.

What it costs: the exported reverse pass runs the forward solve again (JAX's exported VJP takes
the primal inputs, not residuals), so a warm gradient costs one more forward solve. Not used
under ``vmap``, forward mode, higher derivatives (only first-order VJPs are exported), with
``dense=True`` (an interpolation object), or where exporting fails (a host callback in the
program, as ``eqx.error_if`` on traced options makes): then the solve is differentiated by
JAX as before. Measured in ``benchmarks/bench_first_answer.py``.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import sys
import tempfile
import threading
import types
from typing import Any
from importlib.metadata import PackageNotFoundError, version

import equinox as eqx
import jax
import numpy as np
from jax._src.interpreters import ad, batching
from jax.core import Tracer

# (JAX's own tracer classes: reverse mode is linearisation; none of them on an old JAX)
_LINEARIZE = getattr(ad, "LinearizeTracer", ())
_OTHERS = tuple(t for t in (getattr(ad, "JVPTracer", None), batching.BatchTracer) if t)

LOG = logging.getLogger("rollax")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_failed: set[str] = set()  # keys whose export failed in this process: not tried again


def wanted(leaves) -> bool:
    """Reverse mode, first order, not batched: a leaf is a linearisation tracer whose primal is
    no JAX transformation's tracer (a jit's tracer is fine), and no leaf is batched or a
    forward-mode tracer."""
    if not _LINEARIZE or _directory() is None:
        return False
    seen = False
    for x in leaves:
        if isinstance(x, _OTHERS):
            return False
        if isinstance(x, _LINEARIZE):
            inner = getattr(x, "primal", None)
            if isinstance(inner, _LINEARIZE) or isinstance(inner, _OTHERS):
                return False
            seen = True
    return seen


def _directory() -> str | None:
    # On unless ROLLAX_TRACED=off (it was off from stop 57 to 58 while a key collision, an
    # inner closed jaxpr's constants left out, was found: see _jaxpr)
    if os.environ.get("ROLLAX_TRACED", "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if not getattr(jax.config, "jax_enable_compilation_cache"):
        return None
    root = getattr(jax.config, "jax_compilation_cache_dir")
    return None if not root else os.path.join(root, "rollax-traced")


@functools.lru_cache(maxsize=1)
def _versions() -> str:
    out = []
    for name in ("rollax", "jax", "jaxlib", "diffrax", "equinox"):
        try:
            out.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            out.append(f"{name}=?")
    return ";".join(out)


def _code(obj, h, depth=0) -> None:
    """Feed a Python callable (a custom derivative rule) into ``h``: its code, and the values it
    closes over or defaults to (a rule that scales by a captured number is another rule)."""
    for _ in range(8):  # unwrap WrappedFun, partial, bound methods
        inner = (
            getattr(obj, "f", None) or getattr(obj, "func", None) or getattr(obj, "__func__", None)
        )
        if inner is None or inner is obj:
            break
        for a in getattr(obj, "args", ()) or ():  # a partial's bound arguments
            _value(a, h, depth)
        # a WrappedFun's transformations and their arguments: the static arguments of a custom
        # rule ride there (equinox's checkpointed loop's checkpoints: without them, two
        # programs differing only in their checkpoints had one key, and the second was served
        # the first's reverse pass)
        for gen, gen_args in getattr(obj, "transforms", ()) or ():
            _code(gen, h, depth + 1)
            _value(gen_args, h, depth + 1)
        obj = inner
    code = getattr(obj, "__code__", None)
    if code is None:
        h.update(type(obj).__qualname__.encode())
        return
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            h.update(c.co_code)
        elif isinstance(c, frozenset):  # (its order follows the string hash seed)
            h.update(repr(sorted(map(repr, c))).encode())
        else:
            h.update(repr(c).encode())
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            _value(cell.cell_contents, h, depth)
        except ValueError:  # an empty cell
            pass
    for d in getattr(obj, "__defaults__", None) or ():
        _value(d, h, depth)


def _array(v, h) -> None:
    arr = np.asarray(v)
    h.update(repr((arr.shape, str(arr.dtype))).encode() + arr.tobytes())


def _value(v, h, depth) -> None:
    if isinstance(v, (bool, int, float, complex, str, bytes, type(None))):
        h.update(repr(v).encode())
    elif isinstance(v, (np.ndarray, np.generic)) or (
        isinstance(v, jax.Array) and not isinstance(v, Tracer)
    ):
        _array(v, h)
    elif isinstance(v, (tuple, list)) and depth < 8:
        for x in v:
            _value(x, h, depth + 1)
    elif hasattr(v, "eqns") or (hasattr(v, "consts") and hasattr(v, "jaxpr")):
        _jaxpr(v, h, depth + 1)  # a (closed) jaxpr a rule closes over: its text and constants
    elif type(v).__name__ in ("Unhashable", "Hashable") and hasattr(v, "val"):
        wrapped: Any = v  # (JAX's wrappers of a rule's static arguments)
        _value(wrapped.val, h, depth + 1)
    elif isinstance(v, jax.tree_util.PyTreeDef):
        h.update(_ADDRESS.sub("", str(v)).encode())
    elif isinstance(v, eqx.Module) and depth < 8:
        # (a rule closing over a system: its fields, static ones in the tree's text)
        leaves, tree = jax.tree_util.tree_flatten(v)
        h.update(_ADDRESS.sub("", str(tree)).encode())
        for x in leaves:
            _value(x, h, depth + 1)
    elif (callable(v) or isinstance(getattr(v, "f", None), types.FunctionType)) and depth < 8:
        _code(v, h, depth + 1)  # (JAX's WrappedFun is not callable: its .f is)
    else:
        h.update(type(v).__qualname__.encode())


def _jaxpr(v, h, depth) -> None:
    """A jaxpr or closed jaxpr met inside another one (a loop's body, a rule's closure): its
    text, and a closed one's constants, which its text names but does not print (stop 57: two
    oscillators differing only in an event target had the same printed program; the target
    was a constant of an inner closed jaxpr)."""
    inner = v.jaxpr if hasattr(v, "consts") else v
    seen = getattr(_seen, "ids", None)
    if seen is not None:  # (a rule closing over a program that holds the rule: once)
        if id(inner) in seen:
            h.update(b"<seen>")
            return
        seen.add(id(inner))
    h.update(_ADDRESS.sub("", str(inner)).encode())
    for c in getattr(v, "consts", ()):
        _value(c, h, depth)
    _rules(inner, h, depth)


def _rules(jaxpr, h, depth=0) -> None:
    """The custom derivative rules of every equation, sub-jaxprs included."""
    if depth > 32:
        return
    for eqn in jaxpr.eqns:
        for value in eqn.params.values():
            for v in value if isinstance(value, (tuple, list)) else (value,):
                sub = getattr(v, "jaxpr", None)
                if sub is not None and hasattr(sub, "eqns"):  # a closed jaxpr
                    for c in getattr(v, "consts", ()):
                        _value(c, h, 0)
                    _rules(sub, h, depth + 1)
                elif hasattr(v, "eqns"):
                    _rules(v, h, depth + 1)
                else:  # a rule (Python), a number, a name
                    _value(v, h, 0)


_seen = threading.local()  # the jaxprs met through closures while one key is computed


def _key(closed, avals, static=None) -> str:
    _seen.ids = set()
    try:
        return _digest(closed, avals, static)
    finally:
        _seen.ids = None


def _digest(closed, avals, static) -> str:
    h = hashlib.sha256()
    h.update(_versions().encode())
    _value(static, h, 0)  # the arguments' static part (the system's class, static fields)
    h.update(jax.default_backend().encode())
    h.update(
        repr(
            [(a.shape, str(a.dtype), bool(getattr(a, "weak_type", False))) for a in avals]
        ).encode()
    )
    h.update(_ADDRESS.sub("", str(closed.jaxpr)).encode())
    for c in closed.consts:
        arr = np.asarray(c)
        h.update(repr((arr.shape, str(arr.dtype))).encode())
        h.update(arr.tobytes())
    _rules(closed.jaxpr, h)
    return h.hexdigest()


class _Flat:
    """``fn`` on the flat list of its inputs' array leaves, returning its outputs' array leaves
    (and keeping the outputs' structure, set when it is traced)."""

    def __init__(self, fn, static, treedef):
        self.fn, self.static, self.treedef = fn, static, treedef
        self.out = {}  # the input signature -> (the outputs' tree, their static part)
        self.keys = {}  # the input signature -> the program's key

    def __call__(self, *leaves):
        args = eqx.combine(jax.tree_util.tree_unflatten(self.treedef, leaves), self.static)
        res = self.fn(*args)
        dyn, static = eqx.partition(res, eqx.is_array)
        out_leaves, out_tree = jax.tree_util.tree_flatten(dyn)
        self.out[_signature(leaves)] = (out_tree, static)
        return out_leaves


def _signature(leaves) -> tuple:
    return tuple((tuple(np.shape(x)), str(jax.dtypes.result_type(x))) for x in leaves)


@functools.lru_cache(maxsize=64)
def _flat(fn, static, treedef) -> tuple[_Flat, Any]:
    flat = _Flat(fn, static, treedef)
    return flat, jax.jit(flat)


@functools.lru_cache(maxsize=64)
def _load(path: str):
    with open(path, "rb") as fh:
        return jax.export.deserialize(bytearray(fh.read()))


def call(fn, args):
    """``fn(*args)`` through its exported program and VJP, or ``None`` to say "call it as
    usual" (module docstring). ``fn`` is a jitted function of a tuple of pytrees."""
    where = _directory()
    if where is None:
        return None
    dyn, static = eqx.partition(args, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(dyn)
    try:
        flat, jitted = _flat(fn, static, treedef)
    except TypeError:  # an unhashable static part: no key
        return None
    avals = [
        jax.ShapeDtypeStruct(np.shape(x), jax.dtypes.result_type(x), weak_type=_weak(x))
        for x in leaves
    ]
    sig = _signature(avals)
    key = flat.keys.get(sig)
    if key is None:  # (printing and hashing the jaxpr: 0.1 s for the ball; once)
        try:
            key = flat.keys[sig] = _key(jitted.trace(*avals).jaxpr, avals, static)
        except Exception:
            return None
    shapes = flat.out.get(sig)
    if key in _failed or shapes is None:
        return None
    path = os.path.join(where, f"{key}.exported")
    exported = None
    if os.path.exists(path):
        try:
            known = _load.cache_info().currsize
            exported = _load(path)
            if _load.cache_info().currsize > known:
                LOG.debug(f"read the traced reverse pass of {_name(args)} from {path}")
        except Exception:
            exported = None
    if exported is None:
        try:
            exported = jax.export.export(jitted)(*avals)
            blob = exported.serialize(vjp_order=1)
        except Exception as err:  # a host callback, or an export JAX does not support
            _failed.add(key)
            LOG.debug(f"no exported reverse pass for {_name(args)}: {type(err).__name__}: {err}")
            return None
        _write(where, path, blob)
        try:
            exported = _load(path) if os.path.exists(path) else jax.export.deserialize(blob)
        except Exception:
            _failed.add(key)
            return None
    out_tree, out_static = shapes
    if len(exported.out_avals) != out_tree.num_leaves or len(exported.in_avals) != len(leaves):
        _failed.add(key)
        return None
    try:
        out = _callable(exported, jitted)(*leaves)
    except Exception as err:  # (not expected: the key fixes the signature) JAX's own route
        _failed.add(key)
        LOG.debug(f"the exported reverse pass of {_name(args)} failed: {err}")
        return None
    return eqx.combine(jax.tree_util.tree_unflatten(out_tree, out), out_static)


@functools.lru_cache(maxsize=64)
def _callable(exported, jitted):
    """The program with ``exported``'s VJP as its reverse pass, as
    :func:`jax.export.Exported.call` makes it, but with the forward pass the process's own
    ``jitted`` program (traced already for the key, and compiled once for the compile cache:
    the exported forward program was one more compile of the same solve in a first process)
    and the reverse pass run start by start under ``vmap`` (``jax.jacrev`` maps it over the
    outputs' basis; an exported program has no batching rule)."""
    from jax._src import ad_util, dtypes

    vjp = exported.vjp()
    primal = jitted
    backward = jax.custom_batching.sequential_vmap(lambda *xs: vjp.call(*xs))
    n = len(exported.in_avals)

    @jax.custom_vjp
    def run(*xs):
        return primal(*xs)

    def fwd(*xs):
        return primal(*xs), xs

    def bwd(xs, cts):
        cts = [
            ad_util.zeros_like_jaxval(ct) if aval.dtype == dtypes.float0 else ct
            for ct, aval in zip(cts, vjp.in_avals[n:])
        ]
        return tuple(backward(*xs, *cts))

    run.defvjp(fwd, bwd)
    return run


def _weak(x) -> bool:
    aval = getattr(x, "aval", None)
    return bool(getattr(aval, "weak_type", False))


def _name(args) -> str:
    return type(args[0]).__name__ if args else "?"


def _write(where: str, path: str, blob) -> None:
    """Atomically (a process reading beside it sees the whole file or none)."""
    try:
        os.makedirs(where, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(bytes(blob))
        os.replace(tmp, path)
    except OSError as err:
        LOG.debug(f"could not keep the traced reverse pass in {where}: {err}")
    except Exception:  # never let the cache break a solve
        print("rollax: could not write the traced program", file=sys.stderr)
