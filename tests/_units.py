"""Shared by the CLI tests: every number of a JSON result has a unit in its ``units`` block.

A ``units`` key is a dotted path into the result (list indices left out; ``*`` matches any one
part, as ``minimum_*.beta0`` or ``profile.*.delta_chi2``)."""

from __future__ import annotations

from fnmatch import fnmatchcase


def numbers_without_units(result: dict, skip: tuple[str, ...] = ()) -> list[str]:
    """The dotted paths of the numbers in ``result`` that no key of ``result["units"]`` covers
    (a key covers its path and everything under it); ``skip``: paths that are counts or
    settings, not quantities."""
    units = result["units"]
    assert all(isinstance(u, str) and u for u in units.values()), units
    out: list[str] = []

    def covered(path: str) -> bool:
        parts = path.split(".")
        for key in units:
            k = key.split(".")
            if len(k) <= len(parts) and fnmatchcase(".".join(parts[: len(k)]), key):
                return True
        return False

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if not path and k == "units":
                    continue
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, path)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            if path not in skip and not covered(path) and path not in out:
                out.append(path)

    walk(result, "")
    return out
