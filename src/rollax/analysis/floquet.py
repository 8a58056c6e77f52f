"""Floquet analysis of the linear periodic system (62) of the rolling ball (Sect. 4.3).

While w1 keeps its sign, beta is monotonic in time and (w2, w3) obey, with beta as the
independent variable, dz/dbeta = A(beta) z with z = (w2, w3) and

    A(beta) = [[0,            R / (R - rho cos beta)              ],
               [-j / (1 + j), -rho sin beta / (R - rho cos beta)]],            eq. (62)

which is 2 pi-periodic and depends only on rho/R and j. tr A integrates to zero over a period,
so the monodromy matrix M = Phi(2 pi) has det M = 1: the multipliers are on the unit circle
(stable, quasi-periodic, Prop. 7) iff |tr M| < 2, and real with |mu1| < 1 < |mu2| (unstable)
iff |tr M| > 2. :func:`stability_map` computes tr M over a (rho/R, j) grid (Fig. 9), vmapped.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Complex, Float

from rollax._core._validate import check_range
from rollax._drivers._flows import run
from rollax.models.rim import Rim

TWO_PI = 2.0 * jnp.pi


class FloquetSystem(eqx.Module):
    """The linear 2 pi-periodic system (62) for z = (w2, w3), parametrised by rho/R and j.

    Fields: ``rho_R`` = rho / R in (0, 1) (the ball centre stays off the rim axis) and the
    dimensionless moment of inertia ``j`` in (0, 1].
    """

    rho_R: float
    j: float

    def __check_init__(self):
        check_range("rho_R", self.rho_R, 0.0, 1.0, lo_open=True, hi_open=True)
        check_range("j", self.j, 0.0, 1.0, lo_open=True)

    @classmethod
    def from_rim(cls, rim: Rim) -> "FloquetSystem":
        """The system (62) of a :class:`~rollax.models.rim.Rim` (rho/R = (r + a)/R)."""
        return cls(rho_R=rim.rho / rim.R, j=rim.j)

    def matrix(self, beta) -> Float[Array, "2 2"]:
        """A(beta) of eq. (62) (divided through by R)."""
        c, s = jnp.cos(beta), jnp.sin(beta)
        d = 1.0 - self.rho_R * c
        return jnp.array([[0.0, 1.0 / d], [-self.j / (1.0 + self.j), -self.rho_R * s / d]])

    def fundamental_matrix(self, beta1, rtol: float = 1e-11, atol: float = 1e-12):
        """Phi(beta1) with Phi(0) = I, dPhi/dbeta = A(beta) Phi, eq. (62), integrated by rollax.solve (Dopri8)."""
        return _fundamental(
            jnp.asarray(self.rho_R, dtype=float),
            jnp.asarray(self.j, dtype=float),
            jnp.asarray(beta1, dtype=float),
            rtol=rtol,
            atol=atol,
        )

    def monodromy(self, rtol: float = 1e-11, atol: float = 1e-12) -> Float[Array, "2 2"]:
        """Monodromy matrix M with z(beta + 2 pi) = M z(beta), M = Phi(2 pi) (Sect. 4.3)."""
        return self.fundamental_matrix(TWO_PI, rtol, atol)

    def multipliers(self, rtol: float = 1e-11, atol: float = 1e-12) -> Complex[Array, "2"]:
        """Floquet multipliers mu1, mu2 (eigenvalues of M), |mu1| <= |mu2| (Prop. 7)."""
        return multipliers_of(self.monodromy(rtol, atol))

    def stability_index(self, rtol: float = 1e-11, atol: float = 1e-12) -> Float[Array, ""]:
        """|tr M| - 2: negative where the trivial solution of (62) is neutrally stable (Fig. 9)."""
        return jnp.abs(jnp.trace(self.monodromy(rtol, atol))) - 2.0


@functools.partial(jax.jit, static_argnames=("rtol", "atol"))
def _fundamental(rho_R, j, beta1, rtol, atol):
    """Phi(beta1) of (62) for array parameters; jitted once, reused for every (rho/R, j, beta1)."""
    fs = FloquetSystem(rho_R=rho_R, j=j)

    # on s in [0, 1] with beta = s beta1 (so any real beta1, 0 and negative too)
    sol = run(
        lambda s, Y, _: beta1 * (fs.matrix(s * beta1) @ Y),
        jnp.eye(2),
        0.0,
        1.0,
        rtol=rtol,
        atol=atol,
        max_steps=100_000,
    )
    return sol.y.reshape(2, 2)


def multipliers_of(M: Float[Array, "2 2"]) -> Complex[Array, "2"]:
    """Eigenvalues of a real 2 x 2 matrix, sorted by modulus: t/2 -+ sqrt(t^2/4 - det)."""
    t, d = jnp.trace(M), jnp.linalg.det(M)
    disc = jnp.sqrt((0.25 * t**2 - d).astype(complex))
    m1, m2 = 0.5 * t - disc, 0.5 * t + disc
    swap = jnp.abs(m1) > jnp.abs(m2)
    return jnp.where(swap, jnp.stack([m2, m1]), jnp.stack([m1, m2]))


@functools.partial(jax.jit, static_argnames=("rtol", "atol"))
def _traces(rho_R: Float[Array, " n"], j: Float[Array, " n"], rtol: float, atol: float):
    def one(p, q):
        return jnp.trace(_fundamental(p, q, TWO_PI, rtol=rtol, atol=atol))

    return jax.vmap(one)(rho_R, j)


def stability_map(
    rho_R: Float[ArrayLike, " nx"],
    j: Float[ArrayLike, " ny"],
    rtol: float = 1e-9,
    atol: float = 1e-11,
) -> Float[Array, "ny nx"]:
    """tr M over the grid (rho/R, j) of Fig. 9 (vmapped); |tr M| < 2 is the stable region S.

    Rows follow ``j``, columns ``rho_R``. Values must lie in 0 < rho/R < 1, 0 < j <= 1.
    """
    rho_R = jnp.asarray(rho_R, dtype=float)
    j = jnp.asarray(j, dtype=float)
    for name, v, hi_open in (("rho_R", rho_R, True), ("j", j, False)):
        check_range(f"min({name})", jnp.min(v), 0.0, 1.0, lo_open=True, hi_open=hi_open)
        check_range(f"max({name})", jnp.max(v), 0.0, 1.0, lo_open=True, hi_open=hi_open)
    P, Q = jnp.meshgrid(rho_R, j)
    tr = _traces(P.ravel(), Q.ravel(), rtol, atol)
    return tr.reshape(P.shape)


# ------------------------------------------------------------ summaries and Fig. 9
def summary(rim: Rim) -> dict:
    """Monodromy matrix, multipliers and stability of (62) for ``rim`` (Props. 7-8), JSON-ready."""
    import numpy as np

    fs = FloquetSystem.from_rim(rim)
    M = np.asarray(fs.monodromy())
    mu = np.asarray(multipliers_of(jnp.asarray(M)))
    tr = float(np.trace(M))
    return {
        "rho_over_R": float(rim.rho / rim.R),
        "j": float(rim.j),
        "monodromy": M.tolist(),
        "trace": tr,
        "det": float(np.linalg.det(M)),
        "multipliers": [[float(m.real), float(m.imag)] for m in mu],
        "abs_multipliers": [float(abs(m)) for m in mu],
        "stable": bool(abs(tr) < 2.0),
    }


#: The most points per axis of the Fig. 9 map, and in all
GRID_MAX = 1000
POINTS_MAX = 250_000


def stability_data(n_rho: int, n_j: int, j_max: float = 1.0) -> dict:
    """tr M on the (rho/R, j) grid of Fig. 9 (cell centres, avoiding the excluded edges):
    ``rho_over_R``, ``j``, ``trace`` and ``stable`` (|tr M| < 2)."""
    import numpy as np

    for name, n in (("n_rho", n_rho), ("n_j", n_j)):
        if not (isinstance(n, int) and 2 <= n <= GRID_MAX):
            raise ValueError(f"{name} = {n!r} is not allowed: an integer in [2, {GRID_MAX}]")
    # the map is one batched computation in memory (--n-rho 1e5 --n-j 1e5 asked for 80 GB):
    # about 10 s per 1e5 points on 2 cores
    if n_rho * n_j > POINTS_MAX:
        raise ValueError(
            f"n_rho x n_j = {n_rho} x {n_j} = {n_rho * n_j:,} is not allowed: at most "
            f"{POINTS_MAX:,} points (about {POINTS_MAX // 10_000} s on 2 cores)"
        )
    if not (isinstance(j_max, (int, float)) and 0.0 < j_max <= 1.0):
        raise ValueError(
            f"j_max = {j_max!r} is not allowed: a number in (0, 1] (j = J / (m r^2) of a ball "
            f"lies in (0, 1])"
        )
    rho_R = (np.arange(n_rho) + 0.5) / n_rho
    j = (np.arange(n_j) + 0.5) / n_j * j_max
    tr = np.asarray(stability_map(rho_R, j))
    return {"rho_over_R": rho_R, "j": j, "trace": tr, "stable": np.abs(tr) < 2.0}


def write_figure(data: dict, summ: dict, a_over_R: float, out, rim=None) -> str:
    """Write ``fig9.png`` (:func:`rollax.plot.plot_floquet_map`) and ``fig9.npz`` (``data``)
    into ``out``; returns the PNG path. ``rim``: the marked ball's model, named under the
    plot."""
    import os

    import numpy as np

    from rollax.plot import plot_floquet_map

    png = os.path.join(out, "fig9.png")
    from rollax.plot import rim_parameters

    plot_floquet_map(
        data,
        summ,
        a_over_R,
        png,
        parameters=None if rim is None else rim_parameters(rim, ("r", "a", "R", "j")),
    )
    np.savez_compressed(os.path.join(out, "fig9.npz"), **data)
    return png
