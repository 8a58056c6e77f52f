"""Test helper: gradients must be finite (issue 41: a NaN hidden in a masked branch)."""

from __future__ import annotations

import jax
import numpy as np


def assert_finite_gradients(tree, what: str = "gradient") -> None:
    """Every leaf of ``tree`` (gradients, Jacobians) is finite; names the first that is not."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert leaves, f"{what}: no arrays to check"
    for path, leaf in leaves:
        a = np.asarray(leaf)
        if not np.all(np.isfinite(a)):
            bad = np.argwhere(~np.isfinite(a))
            where = jax.tree_util.keystr(path) or "(root)"
            raise AssertionError(
                f"{what}{where}: {int((~np.isfinite(a)).sum())} non-finite "
                f"of {a.size}, the first at index {tuple(bad[0])} = "
                f"{a[tuple(bad[0])]!r}"
            )
