"""Regenerates the benchmark results shown in the README and the docs from bench/results.

    python3 scripts/bench_report.py           # rewrite the tables and redraw the charts
    python3 scripts/bench_report.py --check   # exit 1 when a table is out of date (no writes)
    python3 scripts/bench_report.py --no-charts

Takes the newest results file of a GPU run that holds a "suite" (tessel bench) and/or a
"compare" (bench/compare.py) record and renders it, with the device and the date, into
- README.md, between <!-- bench-report:begin --> and <!-- bench-report:end --> (Markdown);
- docs/guide/latest_results.inc, which docs/guide/performance.rst includes (reStructuredText);
- the two charts beside the results file (<file>-compare.png, <file>-roofline.png), drawn from
  the "compare" record with matplotlib: horizontal bars, one labelled row per workload and
  variant, and a roofline whose points are named in its legend.
Numbers are never typed by hand: they come from the JSON that the benchmarks write.
bench/compare.py draws its charts through draw_charts() below, so both give the same pictures.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
DOCS_INCLUDE = os.path.join(ROOT, "docs", "guide", "latest_results.inc")
BEGIN, END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"
LIBS = ("tessel", "torch", "cupy", "numba")


def newest_results():
    files = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "*.json")),
                   key=lambda p: (re.search(r"(\d{4}-\d{2}-\d{2})\.json$", p) or [None, ""])[1])
    for path in reversed(files):
        with open(path) as f:
            data = json.load(f)
        if ("suite" in data or "compare" in data or "compare_quick" in data) and not os.path.basename(path).startswith("cpu-"):
            return path, data
    return None, None


# ---- output formats: the same content as Markdown (README) and reStructuredText (docs) ----

class Markdown:
    @staticmethod
    def code(s):
        return f"`{s}`"

    @staticmethod
    def bold(s):
        return f"**{s}**"

    @staticmethod
    def table(headers, aligns, rows):
        sep = "|" + "|".join("---:" if a == "r" else "---" for a in aligns) + "|"
        return ["| " + " | ".join(headers) + " |", sep] + ["| " + " | ".join(r) + " |" for r in rows]

    @staticmethod
    def image(title, path):
        return [f"![{title}]({os.path.relpath(path, ROOT)})"]


class Rest:
    @staticmethod
    def code(s):
        return f"``{s}``"

    @staticmethod
    def bold(s):
        return f"**{s}**"

    @staticmethod
    def table(headers, aligns, rows):
        def text(cell):
            # Plain text: "a@b" would become an e-mail link; code spans are literal already.
            return cell if "``" in cell else cell.replace("@", "\\@")

        out = [".. list-table::", "   :header-rows: 1", ""]
        for row in [headers, *rows]:
            for i, cell in enumerate(row):
                out.append(("   * - " if i == 0 else "     - ") + text(cell or ""))
        return out

    @staticmethod
    def image(title, path):
        # Relative to docs/guide/performance.rst, the page that includes this file.
        return [f".. image:: {os.path.relpath(path, os.path.join(ROOT, 'docs', 'guide'))}", f"   :alt: {title}", ""]


def suite_section(fmt, suite):
    rows = []
    for r in suite["rows"]:
        if r["status"] != "ok":
            rows.append([r["workload"], r["variant"], r["status"], "", r.get("note", "")])
            continue
        pct = f"{r['pct_of_ceiling']:.1f}% of {r['ceiling']}" if r.get("ceiling") else ""
        rows.append([r["workload"], r["variant"], f"{r['ms']:.4f}", f"{r['rate']:.1f} {r['unit']}", pct])
    c = suite["ceilings"]
    return fmt.table(["workload", "variant", "time (ms)", "rate", "% of ceiling"], "llrrl", rows) + [
        "",
        f"Ceilings measured in the same run: device copy {c['copy_GBps']:.0f} GB/s (read + write), "
        f"cuBLAS bf16 {c['gemm_bf16_TFLOPs']:.0f} / fp32 {c['gemm_fp32_TFLOPs']:.1f} / tf32 "
        f"{c['gemm_tf32_TFLOPs']:.0f} TFLOP/s, pinned H2D {c['h2d_GBps']:.1f} / D2H {c['d2h_GBps']:.1f} GB/s."]


def speed_rows(results):
    """[((workload, variant), {lib: ms})] in the order of the results, for the rows that ran."""
    rows = {}
    for r in results:
        times = rows.setdefault((r["workload"], r["variant"]), {})
        if r["status"] == "ok":
            times[r["lib"]] = r["ms"]
    return [(k, v) for k, v in rows.items()]


def compare_section(fmt, compare):
    by_row = {}
    for r in compare["results"]:
        by_row.setdefault((r["workload"], r["variant"]), {})[r["lib"]] = r
    rows = []
    for (w, v), by_lib in by_row.items():
        cells, peers = [], []
        for lib in LIBS:
            r = by_lib.get(lib)
            if r is None:
                cells.append("")
            elif r["status"] == "ok":
                cells.append(f"{r['ms']:.4f} ms")
                if lib != "tessel":
                    peers.append(r["ms"])
            else:
                cells.append(r["status"])
        t = by_lib.get("tessel")
        ratio = f"{min(peers) / t['ms']:.2f}x" if peers and t and t["status"] == "ok" else ""
        rows.append([w, v, *cells, ratio])
    return fmt.table(["workload", "variant", *LIBS, "tessel vs best peer"], "ll" + "r" * (len(LIBS) + 1), rows)


def python_overhead_section(fmt, po):
    """Host time per call from Python, from bench/peers/python_overhead.py's alternating rounds."""
    lines = []
    add = po.get("add_interleaved")
    if add:
        lines += [f"Python overhead, a 1-element add ({fmt.code('x + y')}), medians of {add['rounds']} alternating "
                  f"rounds of {add['calls_per_round']} calls (us per call; the target is 5 us):", ""]
        lines += fmt.table(
            ["tessel", "PyTorch", "empty-kernel launch from C++ (the floor)", "tessel above the floor",
             "PyTorch over tessel", "rounds at most 5 us"], "rrrrrr",
            [[f"{add['tessel_add_us']:.2f}", f"{add['torch_add_us']:.2f}", f"{add['launch_floor_us']:.2f}",
              f"{add['tessel_add_minus_floor_us']:.2f}", f"{add['torch_over_tessel']:.2f}x",
              f"{100 * add['rounds_tessel_add_at_most_5us']:.0f}%"]]) + [""]
    k = po.get("kernels_interleaved")
    if k:
        def cell(key):
            return f"{k[key]:.2f}" if key in k else "skipped"

        def ratio(key):
            return f"{k[key]:.2f}x" if key in k else ""

        lines += [f"Custom kernels from Python, {fmt.code('y = relu(x*a + b) * c')} over 1-element float32 arrays, "
                  f"medians of {k['rounds']} alternating rounds (us per call; the floor: {k['launch_floor_us']:.2f} us):",
                  ""]
        lines += fmt.table(["kernel", "tessel", "peer", "peer's time", "peer over tessel"], "lrlrr", [
            ["fused function (new output)", cell("tessel_fuse_us"), fmt.code("cupy.fuse"), cell("cupy_fuse_us"),
             ratio("cupy_fuse_over_tessel_fuse")],
            ["fused function (new output)", cell("tessel_fuse_us"), "PyTorch eager, 4 ops", cell("torch_eager_us"),
             ratio("torch_eager_over_tessel_fuse")],
            [f"{fmt.code('ElementwiseKernel')} (new output)", cell("tessel_elementwise_kernel_us"),
             fmt.code("cupy.ElementwiseKernel"), cell("cupy_elementwise_kernel_us"),
             ratio("cupy_elementwise_over_tessel")],
            [f"{fmt.code('RawKernel')} (given output)", cell("tessel_raw_kernel_us"), fmt.code("cupy.RawKernel"),
             cell("cupy_raw_kernel_us"), ratio("cupy_raw_over_tessel_raw")],
            [f"{fmt.code('RawKernel')} (given output)", cell("tessel_raw_kernel_us"), f"Numba {fmt.code('@cuda.jit')}",
             cell("numba_jit_us"), ratio("numba_over_tessel_raw")],
            ["tessel's own 4 ops, unfused", cell("tessel_unfused_us"), "", "", ""]]) + [""]
    return lines


def chart_paths(path):
    base = path[: -len(".json")]
    return base + "-compare.png", base + "-roofline.png"


def render(fmt, path, data):
    date = re.search(r"(\d{4}-\d{2}-\d{2})\.json$", path).group(1)
    rel = os.path.relpath(path, ROOT)
    device = (data.get("suite") or data.get("compare") or {}).get("device", "?")
    out = [f"Latest GPU run: {fmt.bold(device)}, {date} (from {fmt.code(rel)}, generated by "
           f"{fmt.code('scripts/bench_report.py')}).", ""]
    if "suite" in data:
        out += [f"{fmt.code('tessel bench')}:", ""] + suite_section(fmt, data["suite"]) + [""]
    compare_key = "compare" if "compare" in data else "compare_quick" if "compare_quick" in data else None
    if compare_key:
        quick = f" with {fmt.code('--quick')} (smaller sizes)" if compare_key == "compare_quick" else ""
        out += [f"{fmt.code('bench/compare.py')}{quick} (time per call, lower is better; the last column is the best "
                "peer's time over tessel's):", ""] + compare_section(fmt, data[compare_key]) + [""]
        for png, title in zip(chart_paths(path), ("speed relative to the best peer", "roofline")):
            if os.path.exists(png):
                out += fmt.image(title, png)
        out.append("")
    if "python_overhead" in data and "add_interleaved" in data["python_overhead"]:
        out += python_overhead_section(fmt, data["python_overhead"])
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out)


def readme_text(readme, path, data):
    section = BEGIN + "\n" + render(Markdown, path, data) + "\n" + END
    return re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section, readme, flags=re.S)


def docs_text(path, data):
    return (".. Generated by scripts/bench_report.py from bench/results; do not edit.\n\n"
            + render(Rest, path, data) + "\n")


def expected_outputs():
    """{file: expected content} for the generated text files."""
    path, data = newest_results()
    if path is None:
        return {}
    with open(README) as f:
        readme = f.read()
    if BEGIN not in readme or END not in readme:
        raise SystemExit("bench_report: the README has no bench-report markers")
    return {README: readme_text(readme, path, data), DOCS_INCLUDE: docs_text(path, data)}


def stale_outputs():
    """The generated files that differ from what the newest results give (relative paths)."""
    stale = []
    for file, text in expected_outputs().items():
        current = open(file).read() if os.path.exists(file) else None
        if current != text:
            stale.append(os.path.relpath(file, ROOT))
    return stale


# ---- charts ----

def _label(workload, variant):
    return f"{workload}: {variant}"


def draw_charts(compare, base):
    """Draws <base>-compare.png and <base>-roofline.png from a compare record (bench/compare.py's
    "compare" key: results with workload, variant, lib, status, ms, flops, bytes; ceilings).
    Returns the paths written ([] without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, LogLocator
    except ImportError:
        print("charts skipped: matplotlib is not installed")
        return []
    rows = [(k, v) for k, v in speed_rows(compare["results"]) if v]
    libs = [lib for lib in LIBS if any(lib in times for _, times in rows)]
    # Horizontal bars: one labelled row per workload and variant, top to bottom in run order.
    height = 0.8 / len(libs)
    ratios = []
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(rows) + 1.6))
    for i, lib in enumerate(libs):
        ys, widths = [], []
        for j, (_, times) in enumerate(rows):
            if lib not in times:
                continue
            peers = [t for name, t in times.items() if name != "tessel"] or list(times.values())
            ys.append(len(rows) - 1 - j + 0.4 - (i + 0.5) * height)
            widths.append(min(peers) / times[lib])
        ratios += widths
        bars = ax.barh(ys, widths, height, label=lib)
        if lib == "tessel":
            ax.bar_label(bars, labels=[f"{w:.2f}x" for w in widths], padding=3, fontsize=7)
    ax.axvline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_label(w, v) for (w, v), _ in reversed(rows)], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(min(ratios) / 1.3, max(ratios) * 1.6)  # room for the ratio labels
    ax.set_xlabel("speed relative to the best peer (higher is faster; log scale)")
    ax.set_title(f"{compare.get('device', '')}: time of the best peer over each library's time", fontsize=9,
                 pad=26)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(libs), fontsize=8, frameon=False)
    fig.tight_layout()
    bars_path = base + "-compare.png"
    fig.savefig(bars_path, dpi=110)
    plt.close(fig)
    paths = [bars_path]

    ceilings = compare.get("ceilings", {})
    if ceilings.get("copy_GBps"):
        import numpy as np

        fig, ax = plt.subplots(figsize=(9, 5))
        bw = ceilings["copy_GBps"] / 2 * 1e9  # one direction, bytes/s
        peak = ceilings.get("gemm_bf16_TFLOPs", 0) * 1e12 or 1e15
        xs = np.logspace(-2, 4, 100)
        ax.loglog(xs, np.minimum(xs * bw * 2, peak) / 1e12, "k-", lw=1, label="measured ceilings")
        markers = "osD^v<>ph"  # 9 markers against 10 colours: no two points alike
        points = [r for r in compare["results"]
                  if r["lib"] == "tessel" and r["status"] == "ok" and r.get("flops") and r.get("bytes")]
        for k, r in enumerate(points):
            intensity = r["flops"] / r["bytes"]
            ax.loglog(intensity, r["flops"] / (r["ms"] * 1e-3) / 1e12, markers[k % len(markers)], ms=7,
                      label=_label(r["workload"], r["variant"]))
        ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title("tessel against the ceilings measured in the same run", fontsize=10)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        roof = base + "-roofline.png"
        fig.savefig(roof, dpi=110)
        plt.close(fig)
        paths.append(roof)
    return paths


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    path, data = newest_results()
    if path is None:
        print("bench_report: no GPU results in bench/results yet")
        return 0
    if "--check" in argv:
        stale = stale_outputs()
        for file in stale:
            print(f"bench_report: {file} is out of date")
        return 1 if stale else 0
    compare = data.get("compare") or data.get("compare_quick")
    if compare and "--no-charts" not in argv:
        for p in draw_charts(compare, path[: -len(".json")]):
            print(f"bench_report: chart {os.path.relpath(p, ROOT)}")
    for file, text in expected_outputs().items():
        with open(file, "w") as f:
            f.write(text)
        print(f"bench_report: {os.path.relpath(file, ROOT)} updated from {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
