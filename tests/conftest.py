import os

os.environ.setdefault("ROLLAX_CPU_DEVICES", "2")
import rollax  # noqa: E402,F401  (float64 + devices before any test imports jax)
