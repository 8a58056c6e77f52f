"""Synthetic camera records of a ball rolling on the rim -- independent of rollax (numpy + scipy).

The rolling model of the rim paper, eqs. (33)-(36) with the dissipation of (83) and the angle
around the rim of (19), for ``z = (beta, w1, w2, w3, alpha)``; the Table 1 ball of
``docs/physics-notes.md``. A record starts near a (preferably linearly stable) steady motion of
eq. (48), is integrated by SciPy's DOP853 at 1e-12 until the normal force vanishes (the ball
leaves the rim) or ``t_max``, and is sampled at ``hz`` as the camera sees it: the ball centre's
distance ``d`` from the rim axis, its height ``z`` above the rim plane, and the (unwrapped) angle
``alpha`` around the rim, with Gaussian noise.

Nothing here uses rollax or JAX: it is the reference that rollax's identification is tested and
benchmarked against. ``tests/test_rim_records.py`` checks these equations against rollax's.

    import sys; sys.path.insert(0, "tests"); from rim_records import make_record, records
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

# Table 1 (docs/physics-notes.md)
r = 0.12  # ball radius [m]
a = 0.01  # tube radius [m]
R = 0.225  # rim radius [m]
rho = r + a  # distance of the ball centre from the tube's core circle [m]
j = 2.0 / 3.0  # J = j m r^2 (thin spherical shell)
g = 9.81  # [m/s^2]

#: ranges of the draws
W3_RANGE = (5.0, 15.0)
W2_RANGE = (25.0, 50.0)
RATE_MAX = 0.05
P_ZERO_RATE = 0.2
MIN_DURATION = 3.0  # s of record at least
STATE_NAMES = ("beta", "w1", "w2", "w3", "alpha")


# ---------------------------------------------------------------------------- the model
def rhs(t, z, k_d=0.0, k_r=0.0):
    """dz/dt of eqs. (33)-(36), (83), (19). ``z`` (5,) or (5, ...); works for complex ``z``."""
    beta, w1, w2, w3 = z[0], z[1], z[2], z[3]
    s, c = np.sin(beta), np.cos(beta)
    D = R - rho * c
    dbeta = r / rho * w1
    dw1 = (
        ((1 + j) * r * w3**2 * s - j * r * w2 * w3 * c) / ((1 + j) * D)
        - g * c / (r * (1 + j))
        - k_r * w1
    )
    dw2 = r * R * w1 * w3 / (rho * D) - k_d * w2
    dw3 = -r * w1 * w3 * s / D - j * r * w1 * w2 / (rho * (1 + j)) - k_r * w3
    dalpha = -r * w3 / D
    return np.array([dbeta, dw1, dw2, dw3, dalpha])


def jac(z, k_d=0.0, k_r=0.0):
    """The 5x5 Jacobian d rhs / d z (analytic)."""
    beta, w1, w2, w3 = z[0], z[1], z[2], z[3]
    s, c = math.sin(beta), math.cos(beta)
    D = R - rho * c
    D2 = D * D
    J = np.zeros((5, 5))
    J[0, 1] = r / rho
    A = (1 + j) * r * w3**2 * s - j * r * w2 * w3 * c
    dA = (1 + j) * r * w3**2 * c + j * r * w2 * w3 * s
    J[1, 0] = dA / ((1 + j) * D) - A * rho * s / ((1 + j) * D2) + g * s / (r * (1 + j))
    J[1, 1] = -k_r
    J[1, 2] = -j * r * w3 * c / ((1 + j) * D)
    J[1, 3] = (2 * (1 + j) * r * w3 * s - j * r * w2 * c) / ((1 + j) * D)
    J[2, 0] = -r * R * w1 * w3 * s / D2
    J[2, 1] = r * R * w3 / (rho * D)
    J[2, 2] = -k_d
    J[2, 3] = r * R * w1 / (rho * D)
    J[3, 0] = -r * w1 * w3 * (c * D - rho * s * s) / D2
    J[3, 1] = -r * w3 * s / D - j * r * w2 / (rho * (1 + j))
    J[3, 2] = -j * r * w1 / (rho * (1 + j))
    J[3, 3] = -r * w1 * s / D - k_r
    J[4, 0] = r * w3 * rho * s / D2
    J[4, 3] = -r / D
    return J


def jac_rates(z):
    """d rhs / d (k_d, k_r), shape (5, 2)."""
    out = np.zeros((5, 2))
    out[2, 0] = -z[2]
    out[1, 1] = -z[1]
    out[3, 1] = -z[3]
    return out


def f2(z):
    """Normal contact force over mass F2/m, eq. (31); the ball leaves the rim where it reaches 0."""
    beta, w1, w3 = z[0], z[1], z[3]
    s, c = np.sin(beta), np.cos(beta)
    return r**2 * w3**2 * c / (R - rho * c) - r**2 * w1**2 / rho + g * s


def camera(z):
    """Camera observables ``(d, z, alpha)`` of states ``z`` (5,) or (5, n) -> (3,) or (3, n)."""
    beta = z[0]
    return np.array([R - rho * np.cos(beta), rho * np.sin(beta), z[4]])


def steady_w2(beta0, w3):
    """w2 of the non-trivial steady motion (beta0, 0, w2, w3), eq. (48)."""
    return (1 + j) * w3 * np.sin(beta0) / (j * np.cos(beta0)) - g * (R - rho * np.cos(beta0)) / (
        j * r**2 * w3
    )


def steady_eigenvalues(beta0, w3):
    """Eigenvalues of the conservative rolling equations (4x4: beta, w1, w2, w3) linearised
    about the steady motion; it is linearly stable when none has a positive real part."""
    z = np.array([beta0, 0.0, steady_w2(beta0, w3), w3, 0.0])
    return np.linalg.eigvals(jac(z)[:4, :4])


def steady_sections(w3, w2, n_grid=400):
    """All beta0 in (0, pi/2) whose steady motion (48) at ``w3`` has the spin ``w2``, each with
    its largest eigenvalue real part: ``[(beta0, max_re), ...]``."""
    b = np.linspace(1e-6, math.pi / 2 - 1e-6, n_grid)
    f = steady_w2(b, w3) - w2
    out = []
    for i in np.nonzero(np.sign(f[:-1]) != np.sign(f[1:]))[0]:
        b0 = brentq(lambda x: steady_w2(x, w3) - w2, b[i], b[i + 1], xtol=1e-15, rtol=1e-15)
        out.append((b0, float(np.max(steady_eigenvalues(b0, w3).real))))
    return out


# ---------------------------------------------------------------------------- records
def _event(t, z, k_d, k_r):
    return f2(z)


_event.terminal = True
_event.direction = -1


def _draw(rng):
    """One draw of (section, y0, k_d, k_r), stable steady motions preferred."""
    unstable = None
    for _ in range(200):
        w3 = rng.uniform(*W3_RANGE)
        w2t = rng.uniform(*W2_RANGE)
        roots = steady_sections(w3, w2t)
        stable = [b for b, re in roots if re < 1e-9]
        if stable:
            b0 = stable[int(rng.integers(len(stable)))]
            break
        if roots and unstable is None:
            unstable = (w3, w2t, roots[0][0])
    else:  # no stable one in 200 draws: take an unstable one (the length check still applies)
        if unstable is None:
            raise RuntimeError("no steady motion found")
        w3, w2t, b0 = unstable
    w2s = float(steady_w2(b0, w3))
    y0 = np.array(
        [
            b0 + rng.uniform(-0.01, 0.01),
            rng.uniform(-1.0, 1.0),
            w2s * (1 + rng.uniform(-0.02, 0.02)),
            w3 * (1 + rng.uniform(-0.02, 0.02)),
            rng.uniform(-math.pi, math.pi),
        ]
    )
    rates = [0.0 if rng.uniform() < P_ZERO_RATE else rng.uniform(0.0, RATE_MAX) for _ in range(2)]
    return {"w2": w2s, "w3": w3, "beta0": b0}, y0, rates[0], rates[1]


def integrate(y0, k_d, k_r, t_max, rtol=1e-12, atol=1e-12):
    """solve_ivp DOP853 from ``y0`` until F2 = 0 (terminal) or ``t_max``; returns (sol, t_end,
    separated)."""
    sol = solve_ivp(
        rhs,
        (0.0, t_max),
        y0,
        method="DOP853",
        rtol=rtol,
        atol=atol,
        dense_output=True,
        events=_event,
        args=(k_d, k_r),
    )
    if sol.status == -1:
        raise RuntimeError(f"integration failed: {sol.message}")
    separated = sol.status == 1
    t_end = float(sol.t_events[0][0]) if separated else float(t_max)
    return sol, t_end, separated


def make_record(seed, *, hz=240.0, noise=(1e-3, 1e-3, 2e-3), t_max=20.0) -> dict:
    """A synthetic camera record, deterministic in ``seed``.

    Keys: ``t`` (n,), ``values`` (n, 3) noisy (d, z, alpha), ``clean`` (n, 3), ``states`` (n, 5)
    the true states, ``sigma`` (3,), ``k_d``, ``k_r``, ``y0`` (5,) = (beta, w1, w2, w3, alpha) at
    t = 0, ``t_end`` (separation time or t_max), ``separated``, ``seed``, ``attempt`` (0, or the
    sub-seed that gave a record of at least MIN_DURATION s), ``section`` (w2, w3, beta0 of the
    steady motion started near).
    """
    sigma = np.asarray(noise, float)
    need = min(MIN_DURATION, t_max)
    for attempt in range(1000):
        rng = np.random.default_rng(seed if attempt == 0 else [seed, attempt])
        section, y0, k_d, k_r = _draw(rng)
        sol, t_end, separated = integrate(y0, k_d, k_r, t_max)
        if t_end >= need:
            break
    else:
        raise RuntimeError(f"seed {seed}: no record of {need} s in 1000 attempts")
    n = math.floor(t_end * hz * (1 + 1e-13)) + 1
    t = np.arange(n) / hz
    t = t[t <= t_end]
    states = sol.sol(t).T
    states[0] = y0
    clean = camera(states.T).T
    values = clean + rng.normal(size=clean.shape) * sigma
    return {
        "t": t,
        "values": values,
        "clean": clean,
        "states": states,
        "sigma": sigma,
        "k_d": float(k_d),
        "k_r": float(k_r),
        "y0": y0,
        "t_end": t_end,
        "separated": bool(separated),
        "seed": seed,
        "attempt": attempt,
        "section": section,
    }


def records(n, seed0=0, **kw) -> list[dict]:
    """``n`` records from the seeds ``seed0 .. seed0 + n - 1``."""
    return [make_record(s, **kw) for s in range(seed0, seed0 + n)]


if __name__ == "__main__":
    import sys
    import time

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    t0 = time.perf_counter()
    recs = records(n)
    dt = time.perf_counter() - t0
    lens = np.array([rec["t_end"] for rec in recs])
    print(f"{n} records in {dt:.1f} s ({dt / n:.2f} s each)")
    print(
        f"durations: min {lens.min():.2f} s, quartiles "
        f"{np.percentile(lens, 25):.2f} / {np.median(lens):.2f} / {np.percentile(lens, 75):.2f} s,"
        f" max {lens.max():.2f} s; {sum(rec['separated'] for rec in recs)} separated, "
        f"{sum(rec['attempt'] > 0 for rec in recs)} redrawn"
    )
    for rec in recs:
        s = rec["section"]
        print(
            f"seed {rec['seed']:3d} (attempt {rec['attempt']}): beta0 {s['beta0']:.3f} "
            f"w2 {s['w2']:.1f} w3 {s['w3']:.2f} k_d {rec['k_d']:.4f} k_r {rec['k_r']:.4f} "
            f"t_end {rec['t_end']:6.2f} {'sep' if rec['separated'] else ''}"
        )
