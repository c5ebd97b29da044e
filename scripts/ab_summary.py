"""Summarizes scripts/ab-bench.sh's Python rounds (LOGS/python-<round>-<tree>.log, tree base or
new) into a JSON record: per metric, each tree's values by round and their medians, and the
median of the per-round differences new - base. Usage: ab_summary.py LOGS OUT.json [label]"""
import glob
import json
import os
import re
import statistics
import sys

METRICS = ("add_interleaved.tessel_add_us", "add_interleaved.tessel_add_in_cpp_us", "add_interleaved.launch_floor_us",
           "add_interleaved.tessel_add_minus_floor_us", "add_interleaved.torch_add_us")


def read(path):
    values = {}
    for line in open(path, errors="replace"):
        m = re.match(r"\s+(\S+)\s+([0-9.]+) us$", line)
        if m and m.group(1) in METRICS:
            values[m.group(1)] = float(m.group(2))
    return values


def main(logs, out, label="python 1-element add"):
    rounds = sorted({int(re.search(r"python-(\d+)-", p).group(1)) for p in glob.glob(os.path.join(logs, "python-*-*.log"))})
    runs = {r: {t: read(os.path.join(logs, f"python-{r}-{t}.log")) for t in ("base", "new")} for r in rounds}
    record = {"label": label, "rounds": len(rounds), "order": "base then new, each round", "metrics": {}}
    for metric in METRICS:
        base = [runs[r]["base"].get(metric) for r in rounds]
        new = [runs[r]["new"].get(metric) for r in rounds]
        if None in base or None in new:
            continue
        record["metrics"][metric] = {
            "base_us": base, "new_us": new, "base_median_us": statistics.median(base),
            "new_median_us": statistics.median(new),
            "median_difference_new_minus_base_us": statistics.median(n - b for n, b in zip(new, base)),
        }
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps({k: (v["base_median_us"], v["new_median_us"], v["median_difference_new_minus_base_us"])
                      for k, v in record["metrics"].items()}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
