"""Chunked, resumable sweeps over many starts, with a progress bar.

:func:`run_chunked` cuts the starts into fixed-size chunks (the last one padded, so one compiled
kernel serves them all and memory stays bounded), runs each, and, when given a directory, saves
every finished chunk there at once. A sweep that is killed and restarted with the same
arguments loads the finished chunks instead of recomputing them. The chunk directory is named
by a hash of everything that defines the result, so different sweeps never mix.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
from tqdm.auto import tqdm


def sweep_key(spec: Mapping) -> str:
    """A stable hex digest of a JSON-serialisable description of a sweep."""
    text = json.dumps(spec, sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def run_chunked(
    fn: Callable[[np.ndarray, np.ndarray], Mapping[str, np.ndarray]],
    starts: np.ndarray,
    *,
    chunk_size: int,
    cache_dir: str | os.PathLike | None = None,
    key: str = "",
    progress: bool = True,
    desc: str = "sweep",
) -> dict[str, np.ndarray]:
    """Run ``fn(chunk, valid)`` over ``starts`` in chunks of ``chunk_size`` rows and concatenate.

    ``fn`` receives a ``(chunk_size, ...)`` array (the last chunk padded by repeating its first
    row) and the boolean mask of real rows, and returns a dict of arrays with leading axis
    ``chunk_size``. With ``cache_dir``, chunk ``i`` is stored as ``cache_dir/chunks-<key>/<i>.npz``
    as soon as it is done and reused on a rerun.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size = {chunk_size!r} must be >= 1")
    starts = np.asarray(starts)
    n = starts.shape[0]
    n_chunks = max(1, -(-n // chunk_size))
    folder = None
    if cache_dir is not None:
        folder = Path(cache_dir) / f"chunks-{key}"
        folder.mkdir(parents=True, exist_ok=True)
    parts: list[Mapping[str, np.ndarray]] = []
    bar = tqdm(total=n, unit="start", desc=desc, disable=not progress, smoothing=0.1)
    try:
        for i in range(n_chunks):
            lo, hi = i * chunk_size, min(n, (i + 1) * chunk_size)
            path = folder / f"{i:05d}.npz" if folder is not None else None
            if path is not None and path.exists():
                with np.load(path) as z:
                    part = {k: z[k] for k in z.files}
            else:
                chunk = starts[lo:hi]
                valid = np.ones(chunk_size, bool)
                if hi - lo < chunk_size:
                    fill = np.repeat(chunk[:1], chunk_size - (hi - lo), axis=0)
                    chunk = np.concatenate([chunk, fill])
                    valid[hi - lo :] = False
                out = fn(chunk, valid)
                part = {k: np.asarray(v)[: hi - lo] for k, v in out.items()}
                if path is not None:
                    tmp = path.with_suffix(".tmp.npz")
                    np.savez(tmp, **part)
                    os.replace(tmp, path)  # atomic: a killed run never leaves half a chunk
            parts.append(part)
            bar.update(hi - lo)
    finally:
        bar.close()
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
