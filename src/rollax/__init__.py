"""rollax: rigid bodies rolling, slipping, separating and colliding under nonholonomic contact.

Differentiable, batched, float64 simulation built on JAX, equinox and diffrax.
Importing rollax enables float64 in JAX (see :mod:`rollax._setup`).
"""

from rollax import _setup  # noqa: F401  (float64, CPU devices, compile cache)

__version__ = "0.1.0"
