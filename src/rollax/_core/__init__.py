"""Private: the system abstraction, solutions and statuses, events, validation, configuration."""


def __getattr__(name: str):
    """A submodule, loaded on first use (``rollax._core.events``)."""
    import importlib

    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
