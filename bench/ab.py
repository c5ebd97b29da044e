"""tessel against tessel: two builds on bench/compare.py's workloads, in alternating rounds.

    python3 bench/ab.py --a PYTHONPATH_A --b PYTHONPATH_B [--label-a NAME] [--label-b NAME]
                        [--rounds 3] [--quick] [--only NAME ...]

Each round runs compare.py with tessel alone once per build, each in a new process, the builds'
order swapped every round. Per row: each build's median time over the rounds, and b's speed over
a's (a's time / b's). The record goes to bench/results/<device>-<date>.json under "ab": labels,
rounds, the rows with every round's times, and the geometric mean and range of the ratios. A row
that fails its check in either build fails the run.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
from peer_results import merge_results  # noqa: E402


def run_compare(pythonpath, extra, scratch):
    """compare.py's record for tessel alone, run with pythonpath first on sys.path."""
    out = os.path.join(scratch, "record.json")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pythonpath, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               TESSEL_BENCH_RESULTS=scratch)  # compare.py's own results file stays out of bench/results
    subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), "--libraries", "tessel", "--no-charts",
                    "--json", out, *extra], env=env, check=False, stdout=subprocess.DEVNULL)
    if not os.path.exists(out):
        raise SystemExit(f"ab: compare.py wrote no record with PYTHONPATH={pythonpath} (no GPU for tessel?)")
    with open(out) as f:
        record = json.load(f)
    os.remove(out)
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="PYTHONPATH of build a (the baseline)")
    parser.add_argument("--b", required=True, help="PYTHONPATH of build b")
    parser.add_argument("--label-a", default="a")
    parser.add_argument("--label-b", default="b")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args(argv)
    extra = (["--quick"] if args.quick else []) + (["--only", *args.only] if args.only else [])

    times = {}  # (workload, variant) -> {"a": [ms...], "b": [ms...]}
    failed = set()
    device = "cpu"
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(args.rounds):
            for side in (("a", "b") if r % 2 == 0 else ("b", "a")):
                record = run_compare(getattr(args, side), extra, scratch)
                device = record["device"]
                for row in record["results"]:
                    if row["lib"] not in ("tessel", "all"):
                        continue
                    key = (row["workload"], row["variant"])
                    if row["status"] != "ok":
                        failed.add(key)
                        continue
                    times.setdefault(key, {"a": [], "b": []})[side].append(row["ms"])
                print(f"round {r + 1} {side}: {len(record['results'])} rows", flush=True)

    rows, ratios = {}, []
    for (workload, variant), t in times.items():
        if len(t["a"]) != args.rounds or len(t["b"]) != args.rounds:
            continue
        a, b = statistics.median(t["a"]), statistics.median(t["b"])
        ratio = a / b
        ratios.append(ratio)
        rows[f"{workload} | {variant}"] = {"a_ms": a, "b_ms": b, "b_speed_over_a": ratio, "a_rounds_ms": t["a"],
                                           "b_rounds_ms": t["b"]}
        print(f"{workload:>22} {variant:<40} {a:10.4f} {b:10.4f} ms  b/a speed {ratio:6.3f}")
    summary = {"geomean_b_speed_over_a": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
               "min": min(ratios, default=None), "max": max(ratios, default=None)}
    print("summary:", summary)
    merge_results("ab", {"a": args.label_a, "b": args.label_b, "rounds": args.rounds, "quick": args.quick,
                         "rows": rows, "failed": sorted(" | ".join(k) for k in failed), **summary}, device)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
