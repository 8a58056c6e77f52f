"""Argument parsing for the ``rollax`` command: one-line errors, checked numbers, strict JSON.

* :class:`Parser`: an ``ArgumentParser`` whose errors are one line (``rollax basin: error:
  --rtol = -1e-09 is outside the allowed range (0, 1)``, exit 2, no usage block) and that takes
  ``-1e-9``, ``-inf`` and ``-.5`` as numbers, not as options.
* :func:`real` and :func:`integer`: argument types that check a number's range (NaN and
  infinities are refused unless allowed); the allowed range is kept on the type (``lo``,
  ``hi``, ...) so that tests can feed every option values outside it.
* :func:`dumps`: JSON with ``null`` for NaN and infinities (strict JSON).
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import json
import math
import os
import re
import sys
from typing import Any, NoReturn

from rollax._core._validate import ATOL_MIN as _ATOL_MIN
from rollax._core._validate import RTOL_MIN as _RTOL_MIN

# argparse's own matcher knows neither exponents nor infinities: "-1e-9" would be an option
_NEGATIVE = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.I)
_TYPE_ERROR = re.compile(r"^argument (\S+?)(?:/\S+)?: = (.*)$", re.S)


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` with one-line errors and negative numbers in exponent form."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE
        self._has_negative_number_optionals = []

    def _get_values(self, action, arg_strings):
        value = super()._get_values(action, arg_strings)
        if isinstance(action.type, _Check) and action.nargs is None and isinstance(value, list):
            # ``--rtol=--``: Python 3.11's argparse drops the "--" and passes [] unchecked
            try:
                action.type("--")
            except argparse.ArgumentTypeError as err:
                raise argparse.ArgumentError(action, str(err)) from None
        return value

    def error(self, message: str):
        m = _TYPE_ERROR.match(message)
        if m:
            message = f"{m[1]} = {m[2]}"
        message = " ".join(message.split())  # one line
        self.exit(2, f"{self.prog}: error: {message}\n")


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where its help does not already say it (and not "None")."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or "default" in text:
            return text
        return super()._get_help_string(action)


class _Check(abc.ABC):
    """Base of the checked argument types (a callable ``str -> value``)."""

    kind = "number"

    @abc.abstractmethod
    def __call__(self, text: str) -> Any:
        """The value of ``text``, or an ``argparse.ArgumentTypeError``."""

    def fail(self, text: str, why: str) -> NoReturn:
        raise argparse.ArgumentTypeError(f"= {text} is not allowed: {why}")


class real(_Check):
    """A float in a range: ``real(lo, hi, lo_open=..., hi_open=..., inf=False)``. NaN is never
    allowed; an infinity only with ``inf=True`` (and only where the range includes it)."""

    kind = "real"

    def __init__(self, lo=-math.inf, hi=math.inf, *, lo_open=False, hi_open=False, inf=False):
        self.lo, self.hi, self.lo_open, self.hi_open, self.inf = lo, hi, lo_open, hi_open, inf
        self.__name__ = "number"

    def allowed(self) -> str:
        if self.lo == -math.inf and self.hi == math.inf:
            rng = "a finite number" if not self.inf else "a number"
        else:
            left = "(" if self.lo_open else "["
            right = ")" if self.hi_open else "]"
            if self.hi == math.inf and self.inf:
                right = "]"
            rng = f"a number in {left}{self.lo:g}, {self.hi:g}{right}"
            if self.hi == math.inf and not self.inf:
                rng = f"a finite number {'>' if self.lo_open else '>='} {self.lo:g}"
        return rng

    def __call__(self, text: str) -> float:
        try:
            x = float(text)
        except (TypeError, ValueError):
            self.fail(repr(text), f"it must be {self.allowed()}")
        if math.isnan(x) or (math.isinf(x) and not self.inf):
            self.fail(text, f"it must be {self.allowed()}")
        below = x <= self.lo if self.lo_open else x < self.lo
        above = x >= self.hi if self.hi_open else x > self.hi
        if below or above:
            self.fail(text, f"it is outside the allowed range: {self.allowed()}")
        return x


class integer(_Check):
    """An int in ``[lo, hi]``."""

    kind = "integer"

    def __init__(self, lo: int = -(10**18), hi: int = 10**18):
        self.lo, self.hi = lo, hi
        self.__name__ = "integer"

    def allowed(self) -> str:
        if self.hi >= 10**18:
            return f"an integer >= {self.lo}"
        return f"an integer in [{self.lo}, {self.hi}]"

    def __call__(self, text: str) -> int:
        try:
            x = int(text.strip())
        except (TypeError, ValueError, AttributeError):
            self.fail(repr(text), f"it must be {self.allowed()}")
        if not self.lo <= x <= self.hi:
            self.fail(text, f"it is outside the allowed range: {self.allowed()}")
        return x


FINITE = real()
POSITIVE = real(0.0, lo_open=True)
NONNEGATIVE = real(0.0)
# the library's floors (rollax._core._validate): a tolerance below them was once refused only after
# the kernel had started compiling, leaving an empty chunk folder behind
RTOL = real(_RTOL_MIN, 1.0, hi_open=True)
ATOL = real(_ATOL_MIN, 1.0, hi_open=True)
TOLERANCE = RTOL


def strict(obj):
    """``obj`` with every non-finite float (Python or NumPy) replaced by ``None`` and NumPy
    scalars and arrays turned into Python numbers and lists."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return strict(obj.tolist())
    if isinstance(obj, np.generic):
        return strict(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj, **kwargs) -> str:
    """Strict JSON (``null`` for NaN and infinities)."""
    return json.dumps(strict(obj), allow_nan=False, **kwargs)


def dump(obj, fh, **kwargs) -> None:
    """``obj`` as strict JSON into the open file ``fh``, flushed here, so that a full disk is
    reported naming the file (a write error carries no file name by itself)."""
    try:
        fh.write(dumps(obj, **kwargs))
        fh.flush()
    except OSError as err:
        if err.filename is None:
            err.filename = getattr(fh, "name", None)
        raise


def print_error(prog: str, message: str) -> None:
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)


def check_out(out) -> None:
    """``--out`` must be a directory or a path that does not exist yet: refused before any
    work (a file there was once found only after a minute of computing)."""
    import os

    if out is None:
        return
    if not out:
        raise ValueError("--out = '' is not allowed: give a directory")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(
            f"--out = {out!r} is not allowed: it is a file; give a directory (or a "
            f"path that does not exist yet)"
        )


def add_cluster_arguments(p) -> None:
    """``--workers N`` and ``--scheduler ADDRESS``: where a sweep's regions run (Dask)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--workers",
        type=integer(1, 4096),
        default=None,
        metavar="N",
        help="run the regions on a Dask LocalCluster of N worker processes on this machine "
        '(pip install "rollax[distributed]")',
    )
    g.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the regions on an existing Dask cluster: its scheduler's address "
        "(tcp://host:8786) or scheduler file",
    )


@contextlib.contextmanager
def cluster(args):
    """The Dask client of ``--workers`` / ``--scheduler`` (closed afterwards), or None."""
    workers, address = getattr(args, "workers", None), getattr(args, "scheduler", None)
    if workers is None and address is None:
        yield None
        return
    opt = "--workers" if workers is not None else "--scheduler"
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError(
            f"{opt} needs Dask's distributed scheduler, which is not installed: "
            f'pip install "rollax[distributed]"'
        ) from None
    import logging

    with contextlib.ExitStack() as stack:
        if workers is not None:
            cl = stack.enter_context(
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                )
            )
            client = stack.enter_context(Client(cl))
        else:
            assert address is not None
            given = address
            if os.path.isfile(address):
                address = _scheduler_file(address)
            _reachable(address, given)
            try:
                client = Client(address, timeout=30)
            except (OSError, TimeoutError, ValueError) as err:
                msg = " ".join(str(err).split())
                raise ValueError(
                    f"--scheduler = {given!r}: cannot connect to a Dask scheduler there ({msg})"
                ) from None
            stack.enter_context(client)
        yield client


def _scheduler_file(path: str) -> str:
    """The address in a Dask scheduler file (JSON with an ``"address"``), or a one-line
    ``ValueError`` naming the file (distributed's own reading ends in a traceback)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        why = getattr(err, "strerror", None) or type(err).__name__
        raise ValueError(
            f"--scheduler = {path!r} is not a Dask scheduler file: it cannot be read as JSON "
            f"({why}); give the file the scheduler wrote (dask scheduler --scheduler-file) or "
            f"tcp://HOST:PORT"
        ) from None
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str) or "://" not in address:
        raise ValueError(
            f"--scheduler = {path!r} is not a Dask scheduler file: it holds no scheduler "
            f'"address" (got {_short(info)}); give the file the scheduler wrote (dask '
            f"scheduler --scheduler-file) or tcp://HOST:PORT"
        )
    return address


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


#: seconds a scheduler has to send its handshake after the connection is made
HANDSHAKE_SECONDS = 5.0


def _reachable(address: str, given: str | None = None) -> None:
    """Refuse at once (one-line ``ValueError``) a ``tcp://host:port`` scheduler address that
    nothing listens on (Dask's client would retry it for its whole timeout), or where
    something else listens: a Dask scheduler sends its handshake as soon as a connection is
    made (its length and a small frame count first); a service that sends nothing left Dask's client waiting
    for ever, and one that sends text had it try to allocate exabytes for a frame."""
    import socket
    import struct
    from urllib.parse import urlsplit

    given = address if given is None else given
    if "://" not in address and ":" in address:  # host:port, which Dask reads as TCP
        address = "tcp://" + address
    if not address.startswith("tcp://"):
        return
    try:
        parts = urlsplit(address)
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise ValueError(
            f"--scheduler = {given!r} is not allowed: give tcp://HOST:PORT or a scheduler file"
        )
    try:
        conn = socket.create_connection((host, port), timeout=5)
    except OSError as err:
        raise ValueError(
            f"--scheduler = {given!r}: cannot connect to a Dask scheduler there "
            f"({err.strerror or err})"
        ) from None
    head = b""
    try:
        conn.settimeout(HANDSHAKE_SECONDS)
        while len(head) < 16:
            got = conn.recv(16 - len(head))
            if not got:
                break
            head += got
    except OSError:
        pass
    finally:
        conn.close()
    if len(head) < 16:
        raise ValueError(
            f"--scheduler = {given!r}: something listens there but it is not a Dask scheduler "
            f"(it sent {'nothing' if not head else repr(head)} within {HANDSHAKE_SECONDS:g} s of "
            f"connecting)"
        )
    # (distributed's TCP framing: the message's length, then its number of frames)
    size, frames = struct.unpack("<QQ", head)
    if not (16 <= size <= 1 << 24 and 1 <= frames <= 64):
        raise ValueError(
            f"--scheduler = {given!r}: something listens there but it is not a Dask scheduler "
            f"(it sent {head!r}, not a Dask handshake)"
        )


def add_sweep_output_arguments(p, name: str) -> None:
    """The options every sweep-type command shares: ``--no-resume``, ``--format``,
    ``--workers``/``--scheduler``, ``--no-progress``, ``--json`` and ``--out`` (``OUT/<name>.zarr``
    or ``.nc``)."""
    p.add_argument(
        "--no-resume",
        action="store_true",
        help=f"compute every region again (default: resume from the regions of OUT/{name}.zarr)",
    )
    p.add_argument(
        "--format",
        choices=("zarr", "netcdf"),
        default="zarr",
        help=f"OUT/{name}.zarr (zarr) or OUT/{name}.nc (netCDF-3)",
    )
    add_cluster_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print a JSON summary to stdout")
    p.add_argument("--out", default="rollax-out", help="output directory")


def sweep_paths(args, name: str) -> tuple[str, str]:
    """``(final, store)`` of a sweep-type command: the dataset it writes (``OUT/<name>.zarr`` or
    ``.nc``) and the zarr store it runs into and resumes from (the dataset itself, or a hidden
    working store beside the netCDF file); ``--out`` checked, ``--no-resume`` applied."""
    import shutil

    if not args.out:
        raise ValueError("--out = '' is not allowed: give a directory")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(
            f"--out = {args.out!r} is not allowed: it is a file; give a directory "
            f"(or a path that does not exist yet)"
        )
    zarr_out = args.format == "zarr"
    final = os.path.join(args.out, f"{name}.zarr" if zarr_out else f"{name}.nc")
    store = final if zarr_out else os.path.join(args.out, f".{name}.zarr")
    if os.path.exists(final) and zarr_out != os.path.isdir(final):
        raise ValueError(
            f"--out = {args.out!r} is not allowed: {final} exists and is not a "
            f"{'zarr store (a directory)' if zarr_out else 'netCDF file'}"
        )
    if args.no_resume and os.path.isdir(store):
        shutil.rmtree(store)
    return final, store
