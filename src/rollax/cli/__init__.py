"""The ``rollax`` command line. Each sub-command lives in its own module with a
``register(subparsers)`` function that adds its parser and sets ``func``.

The CLI only parses arguments, calls the library and prints; :func:`main` first calls
:func:`rollax.configure` (one CPU device per core, the compile cache)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shlex
import signal
import warnings
import sys

# Sub-command modules (rollax.cli.<name>); each defines register(subparsers).
_COMMANDS = ("basin", "shot", "steady", "floquet", "friction", "robot", "penny", "identify")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``only``, just that sub-command's module is imported."""
    from rollax.cli._args import Parser

    parser = Parser(
        prog="rollax",
        description="Simulate rigid bodies rolling, slipping and colliding under nonholonomic contact.",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="rollax's version, with those of jax, jaxlib, diffrax and equinox "
        "and the device JAX computes on, then exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS if only is None else (only,):
        try:
            mod = importlib.import_module(f"rollax.cli.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"rollax.cli.{name}":
                continue  # that capability is not built yet
            raise
        mod.register(sub)
    for name, sp in sub.choices.items():
        _plain_help(sp, _PAPERS.get(name))
    return parser


# the paper whose equation, section and figure numbers a command's help cites
# (docs/references.md)
_PAPERS = {
    "basin": "the rim paper (Basketball rolling on the rim)",
    "steady": "the rim paper (Basketball rolling on the rim)",
    "floquet": "the rim paper (Basketball rolling on the rim)",
    "identify": "the rim paper (Basketball rolling on the rim)",
    "shot": "the rim paper (Basketball rolling on the rim) for the rolling on the rim",
    "friction": "the friction paper (Finite contact friction models)",
    "robot": "Putkaradze & Rogers on the rolling ball robot (normal force and friction; dynamics)",
    "penny": "Clark & Bloch on the bouncing penny (nonholonomic impacts)",
}


def _plain_help(parser, paper) -> None:
    """A sub-command's help as plain text (its module docstring's reST markup removed), with
    the paper its numbers refer to; the same for its own sub-commands."""
    import re

    def plain(text):
        if not text:
            return text
        text = re.sub(r"``([^`]+)``", r"\1", text)
        return re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"\1", text)

    parser.description = plain(parser.description)
    if paper and not parser.epilog:
        parser.epilog = (
            f"Equation, section and figure numbers refer to {paper}; docs/references.md."
        )
    for a in parser._actions:
        a.help = plain(a.help)
        if isinstance(a, argparse._SubParsersAction):
            for c in a._choices_actions:
                c.help = plain(c.help)
            for sp in a.choices.values():
                _plain_help(sp, paper)


def version_line() -> str:
    """``rollax X (jax ..., jaxlib ..., diffrax ..., equinox ...; cpu: 2 devices)``: what a bug
    report needs (the device is looked up here, so only ``--version`` pays for it)."""
    import diffrax
    import equinox
    import jax
    from jaxlib import version as jaxlib_version

    from rollax import __version__

    devs = jax.devices()
    kind = devs[0].device_kind if devs else "none"
    return (
        f"rollax {__version__} (jax {jax.__version__}, jaxlib {jaxlib_version.__version__}, "
        f"diffrax {diffrax.__version__}, equinox {equinox.__version__}; "
        f"{jax.default_backend()}: {len(devs)} x {kind})"
    )


class _Version(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        from rollax._core._config import configure

        try:
            configure()  # the devices the commands would use
        except ValueError as err:
            print(f"rollax: error: {err}", file=sys.stderr)
            parser.exit(2)
        print(version_line())
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code: 0, 2 (bad input), 130/143 (SIGINT/SIGTERM),
    141 (broken pipe: the reader went away). Never a traceback for these."""
    _program[0] = argv is None
    if _program[0]:
        _watch_sigterm()
    code = _main(sys.argv[1:] if argv is None else list(argv))
    if _program[0]:
        try:
            sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught
        except BrokenPipeError:
            _quiet_stdout()
            code = 141
    return code


def _quiet_stdout() -> None:
    """The reader of stdout (``| head -1``) went away: send the rest to /dev/null, quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _main(argv: list[str]) -> int:
    prog = "rollax"
    # (before the try: its except clauses name SweepInterrupted)
    from rollax._drivers._chunks import SweepInterrupted, terminate_as_interrupt

    try:

        def on_term(signum, frame):
            _backstop(signum)
            terminate_as_interrupt(signum, frame)

        old_term = _set_signal(signal.SIGTERM, on_term)
        try:
            first = next((a for a in argv if not a.startswith("-")), None)
            parser = build_parser(first if first in _COMMANDS else None)
            try:
                args = parser.parse_args(argv)
            except SystemExit as stop:  # --help, --version, or a one-line usage error (2)
                return stop.code if isinstance(stop.code, int) else 2
            if args.command is None:
                parser.print_help()
                return 0
            # after parsing (--help loads no JAX), before any JAX work
            from rollax._core._config import configure

            try:
                configure()  # CPU devices and compile cache
            except ValueError as err:
                print(f"rollax: error: {err}", file=sys.stderr)
                return 2
            prog = f"rollax {args.command}"
            from rollax._drivers import _labels

            _labels.COMMAND = shlex.join(["rollax", *argv])  # the datasets' "command" attribute
            old_format = warnings.formatwarning
            # a warning is one line on the command line (Python's default adds the source line)
            warnings.formatwarning = lambda msg, cat, *_a, **_k: (  # noqa: E731
                f"{prog}: warning: {cat.__name__}: {' '.join(str(msg).split())}\n"
            )
            try:
                return int(args.func(args) or 0)
            finally:
                warnings.formatwarning = old_format
        finally:
            _set_signal(signal.SIGTERM, old_term)
    except (ValueError, MemoryError) as err:
        msg = " ".join(str(err).split()) or "out of memory"
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except SweepInterrupted as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return _leave(err.exit_code)
    except KeyboardInterrupt as err:
        sig = getattr(err, "signum", signal.SIGINT)
        print(f"{prog}: interrupted by {signal.Signals(sig).name}", file=sys.stderr)
        return _leave(128 + int(sig))
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except OSError as err:  # an output that cannot be written (a path that cannot be made)
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(
            f"{prog}: error: cannot write the output{where} ({err.strerror or err})",
            file=sys.stderr,
        )
        return 2


#: Seconds after SIGTERM at which the program ends even if the exception the handler raised
#: was swallowed (it once was, inside a garbage-collection callback of JAX's, and the process
#: ran on) or cannot be raised yet (the main thread inside a long compile or JAX call: an
#: identification once took 65 s to stop). An interrupted sweep keeps its chunks well within
#: this (0.03-0.08 s measured); the chunk being computed is lost either way.
BACKSTOP_S = 1.0


def _watch_sigterm() -> None:
    """Start the backstop as soon as SIGTERM arrives, even while the main thread is inside a
    long call that does not return to Python (an XLA compile, a JAX computation waited for):
    Python runs a signal handler only between bytecodes of the main thread, but the C-level
    handler writes the signal's number to the wakeup fd at once, and a thread waiting on it
    (without the GIL) wakes. Only when this process is the rollax program (one watcher)."""
    import threading

    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):  # not the main thread, or no pipe: the handler's backstop
        return

    def watch():
        while True:
            data = os.read(r, 64)
            if not data:
                return
            if int(signal.SIGTERM) in data:
                _backstop(signal.SIGTERM)
                return

    threading.Thread(target=watch, daemon=True, name="rollax-sigterm-watch").start()


def _backstop(signum: int) -> None:
    import threading
    import time

    def end():
        time.sleep(BACKSTOP_S)
        print(f"rollax: terminated by {signal.Signals(signum).name}", file=sys.stderr, flush=True)
        os._exit(128 + int(signum))

    threading.Thread(target=end, daemon=True, name="rollax-sigterm-backstop").start()


def _set_signal(sig, handler):
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(sig, handler) if handler is not None else None


def _leave(code: int) -> int:
    """The exit code after an interrupt. The interrupted chunk may still be running in a worker
    thread (its result is dropped): when run as the ``rollax`` program, end the process now
    rather than wait for it at interpreter shutdown."""
    if _program[0]:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    return code


_program = [False]  # main() was called without argv: this process is the rollax program


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
