"""The papers' physics: the ball on the rim, slipping, impacts, the penny (no solves, no plotting)."""


def __getattr__(name: str):
    """A submodule, loaded on first use (``rollax.models.rim``)."""
    import importlib

    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
