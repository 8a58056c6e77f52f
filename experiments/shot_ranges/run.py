"""What the free throw's odds depend on (issue 58): the contact parameters' ranges and the
shooter's scatter.

The contact parameters of :class:`rollax.systems.Shot` are not measured here; their defaults
and ranges come from the rules and stated assumptions (``rollax.parameter_ranges(Shot())``,
docs/guide/shot.md "Contact parameters"): rim restitution 0.583-0.698 (the NCAA ball's
0.825-0.866 rebound with the FIBA/NCAA rim's 35-50 % energy absorption), board restitution
0.825-0.866 (a glass board absorbs little: assumed), friction on rim and board 0.1-0.6 and the
drag coefficient 0.4-0.6 (assumed). For the free throw (4.19 m, 2.1 m high, no backspin,
scatter sd 0.09 m/s and 1.3 degrees):

1. the best release with the defaults (a speed x angle map, steps 0.04 m/s x 0.5 degrees;
   ``best_release``: candidates from the convolved map, chosen by Monte Carlo with common
   random numbers, the probability from independent draws: unbiased, with its standard error);
2. at that release, :func:`rollax.analysis.shot_ranges.odds_over_ranges`: the probability
   with the defaults, marginalised over all five ranges, at the ends of each range (common
   random numbers: paired slopes), and the slopes in the scatter;
3. how the best release itself moves: the map and ``best_release`` again with each
   parameter at the low end, middle and high end of its range (the others at their defaults):
   a table of the best release and its probability.

    python experiments/shot_ranges/run.py [--n 4096] [--out DIR] [--smoke]

Writes ``summary.json`` (every number with its standard error), ``table.md`` (the best release
at the ends and middle of each range), ``odds.png`` (the probability at each range's ends,
marginal and nominal, with 95 % bars) and ``best.png`` (the best releases on the default map's
probability). ``--smoke``: a coarse map and n = 256 (tests/test_scripts_smoke.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import rollax
from rollax.analysis.shot import SD_ANGLE, SD_SPEED, best_release, probability_map, shot_map
from rollax.analysis.shot_ranges import odds_over_ranges
from rollax.systems import Shot


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4096, help="Monte Carlo shots per setting")
    ap.add_argument("--out", default=str(Path(__file__).parent))
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = 256 if args.smoke else args.n
    # steps 0.04 m/s x 0.5 degrees (the issue's); the window holds the peak with 2 sd margins
    if args.smoke:
        speed, angle = rollax.Axis("speed", 6.9, 7.9, 10), rollax.Axis("angle", 44.0, 62.0, 10)
    else:
        speed, angle = rollax.Axis("speed", 6.8, 8.6, 46), rollax.Axis("angle", 42.0, 64.0, 45)
    t0 = time.time()
    ranges = rollax.parameter_ranges(Shot())
    print(f"shot_ranges: {len(ranges)} ranges; maps of {speed.n} x {angle.n} releases, n = {n}")

    def best_for(shot, seed):
        res = shot_map(shot, speed=speed, angle=angle, progress=False)
        b = best_release(res, SD_SPEED, SD_ANGLE, n=n, seed=seed, progress=False)
        return res, b

    res0, b0 = best_for(Shot(), 1)
    print(f"default: best {b0.speed:.3f} m/s, {b0.angle:.2f} deg, p = {b0.probability:.3f} "
          f"+- {b0.std_error:.3f} (map {b0.map_probability:.3f})")  # fmt: skip
    odds = odds_over_ranges(speed=b0.speed, angle=b0.angle, n=n, seed=2, progress=False)
    rows = []
    for k, r in ranges.items():
        for where, v in (("lo", r.lo), ("mid", 0.5 * (r.lo + r.hi)), ("hi", r.hi)):
            _, b = best_for(Shot(**{k: v}), 3)
            rows.append(dict(parameter=k, where=where, value=v, speed=b.speed, angle=b.angle,
                             p=b.probability, se=b.std_error, map_p=b.map_probability))  # fmt: skip
            print(f"  {k} = {v:.4g} ({where}): best {b.speed:.3f} m/s, {b.angle:.2f} deg, "
                  f"p = {b.probability:.3f} +- {b.std_error:.3f}")  # fmt: skip
    wall = time.time() - t0

    # the table
    lines = ["| parameter | where | value | best speed (m/s) | best angle (deg) | p ± se |",
             "| --- | --- | ---: | ---: | ---: | --- |"]  # fmt: skip
    lines.append(f"| (defaults) | | | {b0.speed:.3f} | {b0.angle:.2f} | "
                 f"{b0.probability:.3f} ± {b0.std_error:.3f} |")  # fmt: skip
    for r in rows:
        lines.append(f"| {r['parameter']} | {r['where']} | {r['value']:.4g} | {r['speed']:.3f} | "
                     f"{r['angle']:.2f} | {r['p']:.3f} ± {r['se']:.3f} |")  # fmt: skip
    (out / "table.md").write_text(
        "Best free-throw release (4.19 m, 2.1 m high, no backspin; scatter sd "
        f"{SD_SPEED} m/s, {SD_ANGLE} deg) with one contact parameter at the low end, middle "
        f"and high end of its declared range, the others at their defaults; p from {n} "
        "independent shots at the chosen release.\n\n" + "\n".join(lines) + "\n"
    )
    summary = dict(
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
        n=n,
        grid=[speed.n, angle.n],
        ranges={
            k: dict(value=r.value, lo=r.lo, hi=r.hi, source=r.source) for k, r in ranges.items()
        },
        best_default=b0.to_dict(),
        odds_at_best=odds,
        best_across_ranges=rows,
        wall_s=round(wall, 1),
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    _figures(out, odds, res0, b0, rows, n)
    print(f"shot_ranges: wrote {out}/summary.json, table.md, odds.png, best.png ({wall:.0f} s)")
    return 0


def _figures(out, odds, res0, b0, rows, n):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(odds["ends"])
    fig, ax = plt.subplots(figsize=(7.5, 3.8), dpi=110)
    x = np.arange(len(names))
    for off, key, colour, label in ((-0.12, "p_lo", "#0072B2", "low end"),
                                    (0.12, "p_hi", "#D55E00", "high end")):  # fmt: skip
        p = [odds["ends"][k][key][0] for k in names]
        se = [odds["ends"][k][key][1] for k in names]
        ax.errorbar(x + off, p, yerr=1.96 * np.array(se), fmt="o", color=colour, label=label)
    for key, ls, label in (
        ("nominal", "-", "defaults"),
        ("marginal", "--", "marginal over ranges"),
    ):
        p, se = odds[key]
        ax.axhline(p, color="k", ls=ls, lw=0.8, label=f"{label}: {p:.3f} ± {1.96 * se:.3f}")
    ax.set_xticks(x, [f"{k}\n[{odds['ends'][k]['lo']:.3g}, {odds['ends'][k]['hi']:.3g}]"
                      for k in names])  # fmt: skip
    ax.set_ylabel("make probability (95 % bars)")
    rel = odds["release"]
    ax.set_title(f"Free throw at {rel['speed']:.3f} m/s, {rel['angle']:.2f} deg (the default's "
                 f"best); scatter {rel['sd_speed']} m/s, {rel['sd_angle']} deg; n = {n}",
                 fontsize=8)  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "odds.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.5, 4.5), dpi=110)
    sp, an = (a.values for a in res0.axes)
    pm = probability_map(res0)
    cs = ax.contourf(sp, an, pm.T, levels=np.linspace(0, 1, 11), cmap="Greys")
    fig.colorbar(cs, label="make probability (convolved map, defaults)")
    markers = {"lo": "v", "mid": "o", "hi": "^"}
    colours = dict(zip(dict.fromkeys(r["parameter"] for r in rows),
                       ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00"]))  # fmt: skip
    for r in rows:
        ax.plot(r["speed"], r["angle"], markers[r["where"]], color=colours[r["parameter"]],
                label=f"{r['parameter']} {r['where']}", ms=5)  # fmt: skip
    ax.plot(b0.speed, b0.angle, "*", color="k", ms=10, label="defaults")
    ax.set_xlabel("release speed [m/s]")
    ax.set_ylabel("release angle [degree]")
    ax.set_title("Best free-throw release as each contact parameter spans its range", fontsize=8)
    ax.legend(fontsize=5, ncol=3, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "best.png")
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
