#!/usr/bin/python3
"""Turn a live pool's time series into a PNG.

    /usr/bin/python3 tools/plot_timeline.py FILE.jsonl [-o FILE.png] [--pool NAME] [--title T]

FILE.jsonl is what `stepring top NAME --out FILE.jsonl` or `stepring metrics
--out FILE.jsonl` append: one stepring.top/1 line per sample (and, from
metrics, per pool). Three panels against time since the first sample:
throughput (env steps/s over each interval), batch latency P50 and P99 (over
the pool's last 256 batches), and a stacked area of where the trainer
thread's time went in each interval (env, ring, copy, wait, caller: the
shares of docs/metrics.md, which sum to 1).

With several pools in the file, --pool picks one (default: the first seen).
Needs only matplotlib (Debian's python3-matplotlib) and the standard library.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SHARES = ["env", "ring", "copy", "wait", "caller"]
COLORS = {
    "env": "#4c72b0",
    "ring": "#8172b2",
    "copy": "#dd8452",
    "wait": "#c44e52",
    "caller": "#55a868",
}


def load(path, pool):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_timeline: {path}:{n}: not JSON ({e.msg})")
            if not isinstance(d, dict) or d.get("schema") != "stepring.top/1":
                sys.exit(f"plot_timeline: {path}:{n}: not a stepring.top/1 sample "
                         "(from 'stepring top --out' or 'stepring metrics --out')")
            if pool is None:
                pool = d.get("pool")
            if d.get("pool") == pool:
                rows.append(d)
    if len(rows) < 2:
        sys.exit(f"plot_timeline: {path}: fewer than 2 samples of pool {pool!r}")
    return pool, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jsonl", help="samples (one JSON object per line)")
    ap.add_argument("-o", "--out", help="PNG to write (default: JSONL name with .png)")
    ap.add_argument("--pool", help="the pool to draw (default: the first in the file)")
    ap.add_argument("--title", help="figure title (default: pool, env, workers)")
    a = ap.parse_args(argv)
    pool, rows = load(a.jsonl, a.pool)
    # The first sample's rates are since the pool started: left out, as are
    # samples over an interval in which the pool did not update its block.
    rows = [r for r in rows[1:] if r.get("interval_s", 1) > 0]
    if not rows:
        sys.exit(f"plot_timeline: {a.jsonl}: no sample with an interval")
    t0 = rows[0]["unix_s"]
    t = [r["unix_s"] - t0 for r in rows]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 8), sharex=True,
                                        gridspec_kw={"height_ratios": [1, 1, 1.3]})
    ax1.plot(t, [r["steps_per_sec"] for r in rows], color="#4c72b0")
    ax1.set_ylabel("env steps/s")
    ax1.set_ylim(bottom=0)
    ax1.grid(alpha=0.3)
    ax2.plot(t, [r["p50_us"] for r in rows], label="P50", color="#4c72b0")
    ax2.plot(t, [r["p99_us"] for r in rows], label="P99", color="#c44e52")
    ax2.set_ylabel("batch latency (µs)")
    if max(r["p99_us"] for r in rows) > 20 * max(1e-9, min(r["p50_us"] for r in rows)):
        ax2.set_yscale("log")
    ax2.legend(loc="upper right", fontsize=8)
    ax2.grid(alpha=0.3)
    have = [r for r in rows if "shares" in r]
    if have:
        ts = [r["unix_s"] - t0 for r in have]
        ax3.stackplot(ts, *[[r["shares"][k] for r in have] for k in SHARES],
                      labels=SHARES, colors=[COLORS[k] for k in SHARES], alpha=0.9)
        ax3.set_ylim(0, 1)
        ax3.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    else:
        ax3.text(0.5, 0.5, "no time breakdown (a statistics block of version 1)",
                 ha="center", va="center", transform=ax3.transAxes)
    ax3.set_ylabel("share of the trainer's time")
    ax3.set_xlabel("seconds")
    first = rows[0]
    title = a.title or (f"{pool}: {first.get('env')}, {first.get('envs')} envs, "
                        f"{first.get('workers')} {first.get('worker_kind')}, "
                        f"{first.get('mode')}")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    out = a.out or os.path.splitext(a.jsonl)[0] + ".png"
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
