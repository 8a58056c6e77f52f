"""The ``rollax`` command line. Each sub-command lives in its own module with a
``register(subparsers)`` function that adds its parser and sets ``func``.

The CLI only parses arguments, calls the library and prints; :func:`main` first calls
:func:`rollax.configure` (one CPU device per core, the compile cache)."""

from __future__ import annotations

import argparse
import importlib
import sys

# Sub-command modules (rollax.cli.<name>); each defines register(subparsers).
_COMMANDS = ("basin", "steady", "floquet", "friction", "robot", "penny", "identify")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``only``, just that sub-command's module is imported."""
    parser = argparse.ArgumentParser(
        prog="rollax",
        description="Simulate rigid bodies rolling, slipping and colliding under nonholonomic contact.",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    import rollax

    try:
        rollax.configure()  # CPU devices and compile cache, before any JAX work
    except ValueError as err:
        print(f"rollax: error: {err}", file=sys.stderr)
        return 2
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(first if first in _COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except ValueError as err:
        print(f"rollax {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
