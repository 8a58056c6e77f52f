"""Figures of the robot paper's examples: Figs. 5.3-5.4 (disk), 6.2-6.3 (ball), 6.4 (detaching
ball), and of an optimal manoeuvre."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from rollax.models.robot.ball import Ball
from rollax.models.robot.quaternion import rotation_matrix


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def trajectory_data(traj, t_end=None) -> dict:
    """Arrays for plotting on the saved grid up to ``t_end``: times, mass positions (body frame
    and spatial frame translated to the GC), total CM, angular velocity, GC path, N, the
    horizontal friction and f_s/N."""
    model = traj.model
    keep = np.ones(traj.ts.shape[0], bool) if t_end is None else np.asarray(traj.ts) <= t_end
    ts, ys = np.asarray(traj.ts)[keep], traj.ys[keep]
    n = model.n
    zeta = jax.vmap(lambda y: model.rail_geometry(model.split(y)[0])[0])(ys)  # (k, n+1, 3)
    m = model.all_masses()
    cm = jnp.einsum("i,kij->kj", m, zeta) / model.total_mass
    body = jnp.concatenate([zeta[:, 1:], cm[:, None]], axis=1)
    if isinstance(model, Ball):
        Lam = jax.vmap(lambda y: rotation_matrix(model.split(y)[2]))(ys)
        omega = ys[:, 2 * n + 4 : 2 * n + 7]
        path = ys[:, 2 * n + 7 :]
    else:
        phi = ys[:, 2 * n]
        c, s = jnp.cos(phi), jnp.sin(phi)
        z0 = jnp.zeros_like(phi)
        Lam = jnp.stack(
            [
                jnp.stack([c, z0, -s], -1),
                jnp.stack([z0, z0 + 1, z0], -1),
                jnp.stack([s, z0, c], -1),
            ],
            1,
        )
        omega = ys[:, 2 * n + 1 : 2 * n + 2]  # phi'
        path = jax.vmap(model.gc_position)(ys)[:, None]
    spatial = jnp.einsum("kab,kjb->kja", Lam, body)
    N, F_h = traj.forces()
    N, F_h = N[keep], F_h[keep]
    return dict(
        t=ts,
        body=np.asarray(body),
        spatial=np.asarray(spatial),
        omega=np.asarray(omega),
        path=np.asarray(path),
        N=np.asarray(N),
        F_h=np.asarray(F_h),
        ratio=np.asarray(jnp.linalg.norm(F_h, axis=1) / N),
    )


def _motion_figure(d, title, disk: bool, path_out: str) -> None:
    plt = _plt()
    fig = plt.figure(figsize=(10, 8))
    n = d["body"].shape[1] - 1
    labels = [f"m{i + 1}" for i in range(n)] + ["total CM"]
    for k, (key, name) in enumerate(
        (("body", "body frame (GC)"), ("spatial", "spatial frame at GC"))
    ):
        if disk:
            ax = fig.add_subplot(2, 2, k + 1)
            for j in range(n + 1):
                ax.plot(d[key][:, j, 0], d[key][:, j, 2], lw=1, label=labels[j])
            ax.set_aspect("equal")
            ax.set_xlabel("x")
            ax.set_ylabel("z")
        else:
            ax = fig.add_subplot(2, 2, k + 1, projection="3d")
            for j in range(n + 1):
                ax.plot(*d[key][:, j].T, lw=1, label=labels[j])
        ax.set_title(f"({'ab'[k]}) masses, {name}", fontsize=9)
        ax.legend(fontsize=7)
    ax = fig.add_subplot(2, 2, 3)
    ax.plot(d["t"], d["omega"])
    ax.set_xlabel("t")
    ax.set_title("(c) " + ("phi'" if disk else "body angular velocity Omega"), fontsize=9)
    if not disk:
        ax.legend(["Omega1", "Omega2", "Omega3"], fontsize=7)
    ax = fig.add_subplot(2, 2, 4)
    if disk:
        ax.plot(d["t"], d["path"][:, 0])
        ax.set_xlabel("t")
        ax.set_ylabel("z (GC and CP)")
    else:
        ax.plot(d["path"][:, 0], d["path"][:, 1])
        ax.plot(d["path"][0, 0], d["path"][0, 1], "go")
        ax.set_xlabel("e1")
        ax.set_ylabel("e2")
        ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("(d) path of the GC and CP", fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path_out, dpi=80)
    plt.close(fig)


def _force_figure(d, title, disk: bool, path_out: str, extra_omega: bool = False) -> None:
    plt = _plt()
    fig, axs = plt.subplots(2, 2, figsize=(10, 7))
    axs[0, 0].plot(d["t"], d["N"])
    axs[0, 0].set_title("(a) normal force N", fontsize=9)
    if disk:
        axs[0, 1].plot(d["t"], d["F_h"][:, 0])
        axs[0, 1].set_title("(b) e1-component of the static friction", fontsize=9)
    else:
        axs[0, 1].plot(d["t"], np.linalg.norm(d["F_h"], axis=1))
        axs[0, 1].set_title("(b) static friction f_s", fontsize=9)
    if extra_omega:
        om = np.asarray(d["omega"])
        for k in range(om.shape[1] if om.ndim == 2 else 1):
            axs[1, 0].plot(d["t"], om[:, k] if om.ndim == 2 else om, label=f"Omega_{k + 1}")
        axs[1, 0].legend(fontsize=8)
        axs[1, 0].set_title("(c) body angular velocity Omega", fontsize=9)
    else:
        axs[1, 0].plot(d["t"], d["ratio"])
        axs[1, 0].set_title("(c) f_s / N", fontsize=9)
    ax = axs[1, 1]
    if disk:
        ax.axis("off")  # Fig. 5.4 has three panels
    else:
        p, F = d["path"], d["F_h"]
        ax.plot(p[:, 0], p[:, 1], "k", lw=1)
        stride = max(1, len(p) // 40)
        ax.quiver(
            p[::stride, 0],
            p[::stride, 1],
            F[::stride, 0],
            F[::stride, 1],
            color="r",
            angles="xy",
            width=0.004,
        )
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title("(d) static friction along the GC/CP path", fontsize=9)
    for a in axs.flat[:3]:
        a.set_xlabel("t (model units: r = g = 1)")
    fig.suptitle(title + " (model units: r = g = 1)")
    fig.tight_layout()
    fig.savefig(path_out, dpi=80)
    plt.close(fig)


def write_figures(traj, out_dir: str, kind: str, t_end=None) -> list[str]:
    """Write the paper's figures for ``kind`` in ``{"disk", "ball", "ball-detach"}`` into
    ``out_dir`` (PNG) together with the plotted data (``<kind>_data.npz``), using the saved grid
    up to ``t_end``; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    d = trajectory_data(traj, t_end)
    np.savez_compressed(os.path.join(out_dir, f"{kind}_data.npz"), **d)
    paths = []
    if kind == "disk":
        paths.append(os.path.join(out_dir, "fig5_3_disk_motion.png"))
        _motion_figure(d, "Fig. 5.3: rolling disk", True, paths[-1])
        paths.append(os.path.join(out_dir, "fig5_4_disk_forces.png"))
        _force_figure(d, "Fig. 5.4: contact forces on the disk", True, paths[-1])
    elif kind == "ball":
        paths.append(os.path.join(out_dir, "fig6_2_ball_motion.png"))
        _motion_figure(d, "Fig. 6.2: rolling ball", False, paths[-1])
        paths.append(os.path.join(out_dir, "fig6_3_ball_forces.png"))
        _force_figure(d, "Fig. 6.3: contact forces on the ball", False, paths[-1])
    elif kind == "ball-detach":
        paths.append(os.path.join(out_dir, "fig6_4_ball_detach.png"))
        _force_figure(
            d, "Fig. 6.4: ball up to detachment (N = 0)", False, paths[-1], extra_omega=True
        )
    else:
        raise ValueError(f"kind = {kind!r} must be 'disk', 'ball' or 'ball-detach'")
    return paths


def optimum_figures(result: dict, out: str) -> list[str]:
    """PNGs of an optimal manoeuvre from :meth:`rollax.analysis.robot.optimal.Optimum.to_dict`:
    ``path.png`` (the body), ``masses.png`` (theta, theta', theta''), ``normal_force.png``,
    ``friction.png`` (|f_s|/N against mu) and ``convergence.png``. Units: those of the model
    (Sects. 5-6: r = g = 1)."""
    plt = _plt()
    os.makedirs(out, exist_ok=True)
    r = result
    t = np.asarray(r["t"])

    def num(v, spec):  # (strict JSON: to_dict writes inf and nan as None)
        return "none" if v is None else format(v, spec)

    label = (
        f"{r['body']}, T = {num(r['T'], 'g')}, target = {r['target']}, "
        f"mu = {num(r['mu'], '.4g')}, N_min = {num(r['n_min'], 'g')}, K = {r['knots']}, "
        f"{r['cost_kind']} {num(r['cost'], '.5g')} ({r['status']})"
    )
    files = []

    def save(fig, name):
        fig.suptitle(label, fontsize=8)
        fig.tight_layout()
        path = os.path.join(out, name)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        files.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    if r["body"] == "disk":
        ax.plot(t, r["phi"], label="phi(t) [rad]")
        ax.plot(t, r["phi_dot"], label="phi'(t) [rad/s]")
        ax.axhline(r["target"][0], color="k", ls=":", lw=0.8, label="phi_T")
        ax.set_xlabel("t [s]")
    else:
        ax.plot(r["x"], r["y"], label="contact point")
        ax.plot(*r["target"][:2], "k*", ms=10, label="target")
        ax.plot(r["x"][0], r["y"][0], "ko", ms=4, label="start")
        ax.set_aspect("equal")
        ax.set_xlabel("x [r]")
        ax.set_ylabel("y [r]")
    ax.legend(fontsize=7)
    save(fig, "path.png")

    fig, axs = plt.subplots(3, 1, figsize=(6, 7), sharex=True)
    for ax, key, unit in zip(
        axs, ("theta", "theta_dot", "theta_ddot"), ("rad", "rad/s", "rad/s^2")
    ):
        a = np.asarray(r[key])
        for i in range(a.shape[1]):
            ax.plot(t, a[:, i], label=f"mass {i + 1}")
        ax.set_ylabel(f"{key} [{unit}]")
    axs[0].legend(fontsize=7)
    axs[-1].set_xlabel("t [s]")
    save(fig, "masses.png")

    ratio = np.asarray(r["f_s"]) / np.asarray(r["N"])
    for y, curve, bound, bound_label, ylabel, name in (
        (r["N"], "N(t)", r["n_min"], "N_min", "N [m g units]", "normal_force.png"),
        (ratio, "|f_s| / N", r["mu"], "mu", "|f_s| / N", "friction.png"),
    ):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(t, y, label=curve)
        if bound is not None and np.isfinite(bound):
            ax.axhline(bound, color="r", ls="--", label=bound_label)
        ax.set_xlabel("t [s]")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        save(fig, name)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    h = r["history"]
    k = np.arange(1, len(h["cost"]) + 1)
    viol = np.asarray([np.nan if v is None else v for v in h["violation"]], dtype=float)
    ax.semilogy(k, np.maximum(viol, 1e-17), label="constraint violation")
    ax.set_xlabel("SQP iteration")
    ax.set_ylabel("violation")
    ax2 = ax.twinx()
    ax2.plot(k, [np.nan if c is None else c for c in h["cost"]], "C1", label="objective")
    ax2.set_ylabel("objective")
    ax.legend(loc="upper right", fontsize=7)
    ax.set_title(
        f"final: violation {num(r['violation'], '.2e')}, KKT residual {num(r['kkt'], '.2e')}, "
        f"{r['iterations']} iterations; {r['message']}",
        fontsize=7,
    )
    save(fig, "convergence.png")
    return files
