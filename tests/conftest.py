import os

os.environ.setdefault("ROLLAX_CPU_DEVICES", "2")
import rollax  # noqa: E402  (float64)

# Importing rollax no longer splits the CPU: the tests ask for it (2 devices, or
# ROLLAX_CPU_DEVICES) before any test runs JAX, as the rollax command does.
rollax.configure()
