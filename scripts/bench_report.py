"""Regenerates the README's benchmark section from bench/results (never typed by hand).

    python3 scripts/bench_report.py [--check]

Takes the newest results file of a GPU run that holds a "suite" (tessel bench) and/or a
"compare" (bench/compare.py) record, renders them as Markdown tables with the device and the
date, links the charts written beside the file, and replaces the text between the README's
<!-- bench-report:begin --> and <!-- bench-report:end --> markers. --check exits 1 when the
README is out of date instead of writing it.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"


def newest_results():
    files = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "*.json")),
                   key=lambda p: (re.search(r"(\d{4}-\d{2}-\d{2})\.json$", p) or [None, ""])[1])
    for path in reversed(files):
        data = json.load(open(path))
        if ("suite" in data or "compare" in data or "compare_quick" in data) and not os.path.basename(path).startswith("cpu-"):
            return path, data
    return None, None


def suite_table(suite):
    lines = ["| workload | variant | time (ms) | rate | % of ceiling |", "|---|---|---:|---:|---|"]
    for r in suite["rows"]:
        if r["status"] != "ok":
            lines.append(f"| {r['workload']} | {r['variant']} | {r['status']} | | {r.get('note', '')} |")
            continue
        pct = f"{r['pct_of_ceiling']:.1f}% of {r['ceiling']}" if r.get("ceiling") else ""
        lines.append(f"| {r['workload']} | {r['variant']} | {r['ms']:.4f} | {r['rate']:.1f} {r['unit']} | {pct} |")
    c = suite["ceilings"]
    lines.append("")
    lines.append(f"Ceilings measured in the same run: device copy {c['copy_GBps']:.0f} GB/s (read + write), "
                 f"cuBLAS bf16 {c['gemm_bf16_TFLOPs']:.0f} / fp32 {c['gemm_fp32_TFLOPs']:.1f} / tf32 "
                 f"{c['gemm_tf32_TFLOPs']:.0f} TFLOP/s, pinned H2D {c['h2d_GBps']:.1f} / D2H {c['d2h_GBps']:.1f} GB/s.")
    return lines


def compare_table(compare):
    libs = ["tessel", "torch", "cupy", "numba"]
    rows = {}
    for r in compare["results"]:
        rows.setdefault((r["workload"], r["variant"]), {})[r["lib"]] = r
    lines = ["| workload | variant | " + " | ".join(libs) + " | tessel vs best peer |",
             "|---|---|" + "---:|" * len(libs) + "---:|"]
    for (w, v), by_lib in rows.items():
        cells, peers = [], []
        for lib in libs:
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
        lines.append(f"| {w} | {v} | " + " | ".join(cells) + f" | {ratio} |")
    return lines


def python_overhead_tables(po):
    """Host time per call from Python, from bench/peers/python_overhead.py's alternating rounds."""
    lines = []
    add = po.get("add_interleaved")
    if add:
        lines += [f"Python overhead, a 1-element add (`x + y`), medians of {add['rounds']} alternating rounds "
                  f"of {add['calls_per_round']} calls (us per call; the target is 5 us):", "",
                  "| tessel | PyTorch | empty-kernel launch from C++ (the floor) | tessel above the floor | "
                  "PyTorch over tessel | rounds at most 5 us |", "|---:|---:|---:|---:|---:|---:|",
                  f"| {add['tessel_add_us']:.2f} | {add['torch_add_us']:.2f} | {add['launch_floor_us']:.2f} | "
                  f"{add['tessel_add_minus_floor_us']:.2f} | {add['torch_over_tessel']:.2f}x | "
                  f"{100 * add['rounds_tessel_add_at_most_5us']:.0f}% |", ""]
    k = po.get("kernels_interleaved")
    if k:
        def cell(key):
            return f"{k[key]:.2f}" if key in k else "skipped"

        def ratio(key):
            return f"{k[key]:.2f}x" if key in k else ""

        lines += [f"Custom kernels from Python, `y = relu(x*a + b) * c` over 1-element float32 arrays, medians of "
                  f"{k['rounds']} alternating rounds (us per call; the floor: {k['launch_floor_us']:.2f} us):", "",
                  "| kernel | tessel | peer | peer's time | peer over tessel |", "|---|---:|---|---:|---:|",
                  f"| fused function (new output) | {cell('tessel_fuse_us')} | `cupy.fuse` | {cell('cupy_fuse_us')} | "
                  f"{ratio('cupy_fuse_over_tessel_fuse')} |",
                  f"| fused function (new output) | {cell('tessel_fuse_us')} | PyTorch eager, 4 ops | "
                  f"{cell('torch_eager_us')} | {ratio('torch_eager_over_tessel_fuse')} |",
                  f"| `ElementwiseKernel` (new output) | {cell('tessel_elementwise_kernel_us')} | "
                  f"`cupy.ElementwiseKernel` | {cell('cupy_elementwise_kernel_us')} | "
                  f"{ratio('cupy_elementwise_over_tessel')} |",
                  f"| `RawKernel` (given output) | {cell('tessel_raw_kernel_us')} | `cupy.RawKernel` | "
                  f"{cell('cupy_raw_kernel_us')} | {ratio('cupy_raw_over_tessel_raw')} |",
                  f"| `RawKernel` (given output) | {cell('tessel_raw_kernel_us')} | Numba `@cuda.jit` | "
                  f"{cell('numba_jit_us')} | {ratio('numba_over_tessel_raw')} |",
                  f"| tessel's own 4 ops, unfused | {cell('tessel_unfused_us')} | | | |", ""]
    return lines


def render(path, data):
    date = re.search(r"(\d{4}-\d{2}-\d{2})\.json$", path).group(1)
    rel = os.path.relpath(path, ROOT)
    device = (data.get("suite") or data.get("compare") or {}).get("device", "?")
    out = [BEGIN, f"Latest GPU run: **{device}**, {date} (from `{rel}`, generated by `scripts/bench_report.py`).", ""]
    if "suite" in data:
        out += ["`tessel bench`:", ""] + suite_table(data["suite"]) + [""]
    compare_key = "compare" if "compare" in data else "compare_quick" if "compare_quick" in data else None
    if compare_key:
        quick = " with `--quick` (smaller sizes)" if compare_key == "compare_quick" else ""
        out += [f"`bench/compare.py`{quick} (time per call, lower is better; the last column is the best peer's time "
                "over tessel's):", ""] + compare_table(data[compare_key]) + [""]
        for suffix, title in (("-compare.png", "speed relative to the best peer"), ("-roofline.png", "roofline")):
            png = path[: -len(".json")] + suffix
            if os.path.exists(png):
                out.append(f"![{title}]({os.path.relpath(png, ROOT)})")
        out.append("")
    if "python_overhead" in data and "add_interleaved" in data["python_overhead"]:
        out += python_overhead_tables(data["python_overhead"])
    out.append(END)
    return "\n".join(out)


def main():
    path, data = newest_results()
    readme_path = os.path.join(ROOT, "README.md")
    readme = open(readme_path).read()
    if BEGIN not in readme or END not in readme:
        print("bench_report: the README has no bench-report markers", file=sys.stderr)
        return 1
    if path is None:
        print("bench_report: no GPU results in bench/results yet")
        return 0
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: render(path, data), readme, flags=re.S)
    if "--check" in sys.argv:
        return 0 if new == readme else 1
    open(readme_path, "w").write(new)
    print(f"bench_report: README updated from {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
