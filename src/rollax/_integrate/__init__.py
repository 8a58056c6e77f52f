"""Private: the integrators (DOPRI5/Dopri8 pairs, rollax.solve on diffrax, the ensemble kernels)."""


def __getattr__(name: str):
    """A submodule, loaded on first use (``rollax._integrate.queue``)."""
    import importlib

    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
