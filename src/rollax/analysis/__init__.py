"""Analyses of the models: basin maps, steady motions, Floquet maps, conserved quantities, identification presets, the penny's sequences, the friction paper's reports and stops."""


def __getattr__(name: str):
    """A submodule, loaded on first use (``rollax.analysis.basin``)."""
    import importlib

    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
