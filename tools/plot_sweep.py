#!/usr/bin/python3
"""Turn a `stepring sweep --out FILE.jsonl` into a PNG.

    /usr/bin/python3 tools/plot_sweep.py sweep.jsonl [-o sweep.png] [--title T]

Top panel: throughput (env steps/s) against num_envs, one line per mode
(and per thread count / batch rule / policy when the sweep varied them),
log-log. Bottom panels, one per mode: a stacked-area chart of where a
batch's wall-clock time goes (env, ring, copy, policy, wait) against
num_envs, with the bound of each point written above it.

Needs only matplotlib (Debian's python3-matplotlib) and the standard library.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SHARES = ["env", "ring", "copy", "policy", "wait"]
COLORS = {
    "env": "#4c72b0",
    "ring": "#8172b2",
    "copy": "#dd8452",
    "policy": "#55a868",
    "wait": "#c44e52",
}


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_sweep: {path}:{n}: not JSON ({e.msg})")
            # a sweep under mpirun: a line per rank and a total line per
            # configuration; rank 0's lines are plotted (the table at
            # rank 0 has the totals)
            if d.get("row") == "total" or d.get("rank", 0) != 0:
                continue
            if "config" not in d or "result" not in d:
                sys.exit(f"plot_sweep: {path}:{n}: not a stepring sweep line "
                         "(no config/result)")
            rows.append(d)
    if not rows:
        sys.exit(f"plot_sweep: {path}: no sweep lines")
    return rows


def series_key(cfg, varied):
    """Label of the line a point belongs to: the mode, plus whatever else
    the sweep varied besides num_envs."""
    parts = [cfg["mode"]]
    if "threads_requested" in varied:
        t = cfg["threads_requested"]
        parts.append(f"{t} threads" if t else "threads per core")
    if "batch" in varied and cfg.get("batch_rule") == "fixed":
        parts.append(f"batch {cfg['batch']}")
    elif cfg["mode"] == "async" and cfg.get("batch_rule") == "num_envs/2":
        parts.append("batch num_envs/2")
    if "policy" in varied:
        parts.append(cfg["policy"])
    return ", ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jsonl", help="sweep output (one JSON object per line)")
    ap.add_argument("-o", "--out", help="PNG to write (default: JSONL name with .png)")
    ap.add_argument("--title", help="figure title (default: env, machine, build)")
    a = ap.parse_args(argv)

    rows = load(a.jsonl)
    out = a.out or os.path.splitext(a.jsonl)[0] + ".png"

    varied = set()
    # Series follow what the sweep asked for (threads 0 = one per core,
    # whatever the pool then used), not what each run reports.
    for r in rows:
        r["config"].setdefault("threads_requested", r["config"]["threads"])
    for k in ("threads_requested", "policy"):
        if len({r["config"][k] for r in rows}) > 1:
            varied.add(k)
    # A batch that follows num_envs (sync, or the async default num_envs/2)
    # is not a separate series; fixed async batches are.
    fixed = [r for r in rows if r["config"].get("batch_rule") == "fixed"]
    if len({r["config"]["batch"] for r in fixed}) > 1:
        varied.add("batch")

    series = {}
    for r in rows:
        series.setdefault(series_key(r["config"], varied), []).append(r)
    for pts in series.values():
        pts.sort(key=lambda r: r["config"]["num_envs"])

    modes = sorted({r["config"]["mode"] for r in rows}, key=lambda m: (m != "sync", m))
    # One stacked-area panel per mode: of its series, the first one (the
    # usual case is a single series per mode).
    area = []
    for m in modes:
        cands = [(key, pts) for key, pts in sorted(series.items())
                 if pts[0]["config"]["mode"] == m]
        if cands:
            area.append(max(cands, key=lambda kp: len(kp[1])))

    fig = plt.figure(figsize=(6.0 * max(1, len(area)), 9.0))
    gs = fig.add_gridspec(2, max(1, len(area)), height_ratios=[1.1, 1.0])
    ax = fig.add_subplot(gs[0, :])
    bests = []  # (num_envs, steps/s) of each series' best point
    for key, pts in sorted(series.items()):
        xs = [p["config"]["num_envs"] for p in pts]
        ys = [p["result"]["steps_per_sec"] for p in pts]
        line, = ax.plot(xs, ys, marker="o", label=key)
        best = max(range(len(ys)), key=lambda i: ys[i])
        bests.append((xs[best], ys[best], line.get_color()))
    for x, y, color in bests:
        # In the line's colour; when several lines peak at the same
        # num_envs, the highest one's label goes above its point and the
        # others' below theirs, so no label sits nearer another line.
        top = all(y >= y2 for x2, y2, _ in bests if x2 == x)
        ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", color=color,
                    xytext=(-4, 7 if top else -13), ha="right", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 2.5)  # room for the labels of the best points
    ax.set_xlabel("num_envs")
    ax.set_ylabel("env steps / s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="mode", loc="lower right")
    first = rows[0]
    m = first.get("machine", {})
    b = first.get("build", {})
    title = a.title or (
        f"{first['config']['env']}: throughput vs num_envs\n"
        f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('numa_nodes', '?')} NUMA, GPU {m.get('gpu', 'none')}; "
        f"stepring {b.get('version', '?')} {b.get('flags', '')}, "
        f"policy {first['config'].get('policy', 'none')}, "
        f"{first['config'].get('seconds', '?')} s per point")
    ax.set_title(title, fontsize=10)

    for i, (key, pts) in enumerate(area):
        axb = fig.add_subplot(gs[1, i])
        xs = [p["config"]["num_envs"] for p in pts]
        ys = [[max(0.0, p["result"]["shares"].get(s, 0.0)) for p in pts] for s in SHARES]
        axb.stackplot(xs, ys, labels=SHARES, colors=[COLORS[s] for s in SHARES], alpha=0.85)
        for x, p in zip(xs, pts):
            tot = sum(max(0.0, p["result"]["shares"].get(s, 0.0)) for s in SHARES)
            axb.annotate(p["result"].get("bound", ""), (x, min(tot, 1.0)), xytext=(0, 3),
                         textcoords="offset points", ha="center", fontsize=7, rotation=90)
        axb.set_xscale("log", base=2)
        axb.set_ylim(0, 1.12)
        axb.set_xlabel("num_envs")
        axb.set_ylabel("share of batch wall-clock time")
        axb.set_title(f"time breakdown: {key}", fontsize=10)
        axb.grid(True, alpha=0.3)
        if i == len(area) - 1:
            # Below the panels: inside one it covered the bound labels
            # of the largest num_envs.
            handles, labels = axb.get_legend_handles_labels()
            fig.legend(handles, labels, loc="lower center", ncol=len(SHARES), fontsize=8)

    fig.tight_layout(rect=(0, 0.035, 1, 1))
    fig.savefig(out, dpi=110)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
