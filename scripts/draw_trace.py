#!/usr/bin/env python3
"""Draws a tessel Chrome trace (ts.profile().export_chrome_trace) as a PNG with matplotlib: one
lane per host thread and per GPU stream, ops as bars labelled by name, the allocated memory as a
line below. It is the picture of docs/guide/profiling.rst, made the same way Perfetto lays the
trace out.

  scripts/draw_trace.py TRACE.json OUT.png [--title T]
  scripts/draw_trace.py --demo OUT.png      profiles the guide's example program, then draws it
"""
import argparse
import json
import os
import sys
import tempfile


def demo_trace(path):
    """The guide's example: row normalization whose median takes a full sort."""
    import tessel as ts

    def normalize(x):
        s = ts.sort(x, axis=1)  # the slow op
        mid = x.shape[1] // 2
        median = s[:, mid:mid + 1]
        return (x - median) / (ts.std(x, axis=1, keepdims=True) + 1e-6)

    x = ts.random.uniform(size=(512, 4096))
    with ts.profile() as prof:
        for _ in range(3):
            with ts.profile.range("normalize"):
                y = normalize(x)
        float(ts.sum(y))
    prof.export_chrome_trace(path)
    return prof


def draw(trace_path, out_path, title):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    names = {}
    for e in events:
        if e["ph"] == "M" and e["name"] in ("thread_name", "process_name"):
            key = (e["pid"], e["tid"]) if e["name"] == "thread_name" else (e["pid"], None)
            names[key] = e["args"]["name"]
    spans = [e for e in events if e["ph"] == "X"]
    lanes = sorted({(e["pid"], e["tid"]) for e in spans})
    counters = [e for e in events if e["ph"] == "C"]
    fig = Figure(figsize=(11, 1.2 + 0.9 * len(lanes) + (1.6 if counters else 0)), dpi=110)
    FigureCanvasAgg(fig)
    rows = len(lanes) + (2 if counters else 0)
    gs = fig.add_gridspec(rows, 1)
    ax = fig.add_subplot(gs[: len(lanes), 0])
    cax = fig.add_subplot(gs[len(lanes):, 0], sharex=ax) if counters else None
    palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]
    colors = {}
    t0 = min(e["ts"] for e in spans)
    t1 = max(e["ts"] + e["dur"] for e in spans)
    label_min = 0.02 * (t1 - t0) / 1e3  # ms: label bars wider than 2% of the trace
    for lane_index, lane in enumerate(lanes):
        mine = [e for e in spans if (e["pid"], e["tid"]) == lane]
        depth_end = []
        for e in sorted(mine, key=lambda e: (e["ts"], -e["dur"])):
            start, end = e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3
            while depth_end and depth_end[-1] <= start:
                depth_end.pop()
            depth = len(depth_end)
            depth_end.append(end)
            color = colors.setdefault(e["name"], palette[len(colors) % len(palette)])
            y = lane_index + depth * 0.22
            ax.broken_barh([(start, max(end - start, 1e-4))], (y, 0.2), facecolors=color, edgecolor="black",
                           linewidth=0.3)
            if end - start > label_min:
                ax.text(start, y + 0.1, " " + e["name"][:28], va="center", fontsize=6.5, clip_on=True)
    ax.set_yticks([i + 0.3 for i in range(len(lanes))])
    ax.set_yticklabels([f"{names.get((p, None), p)}: {names.get((p, t), t)}" for p, t in lanes], fontsize=8)
    ax.set_ylim(-0.1, len(lanes) + 0.1)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    if counters:
        for pool in sorted({c["name"] for c in counters}):
            mine = sorted((c for c in counters if c["name"] == pool), key=lambda c: c["ts"])
            cax.step([c["ts"] / 1e3 for c in mine], [c["args"]["allocated"] / 2**20 for c in mine], where="post",
                     label=f"{pool} allocated")
        cax.set_ylabel("MiB", fontsize=8)
        cax.legend(fontsize=7, loc="upper right")
        cax.set_xlabel("time (ms)")
    else:
        ax.set_xlabel("time (ms)")
    fig.tight_layout()
    fig.savefig(out_path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", nargs="?")
    p.add_argument("out")
    p.add_argument("--demo", action="store_true")
    p.add_argument("--title", default=None)
    a = p.parse_args(argv)
    if a.demo:
        path = os.path.join(tempfile.mkdtemp(), "trace.json")
        prof = demo_trace(path)
        print(prof.table(row_limit=8))
        title = a.title or "ts.profile() trace of the guide's example (normalize with a full sort)"
    else:
        if not a.trace:
            p.error("give TRACE.json or --demo")
        path, title = a.trace, a.title or os.path.basename(a.trace)
    draw(path, a.out, title)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
