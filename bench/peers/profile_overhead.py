"""What profiling costs from Python (issue 21), in alternating rounds:

  * ranges on, nothing listening, against a build with the ranges compiled out
    (-DTESSEL_NVTX=OFF): the 1-element add x + y per call. This needs two installs of tessel;
    give them as TESSEL_AB_SITES=<compiled-out site>:<normal site> (scripts/ab-bench.sh
    profile-ab builds both). Each round runs one subprocess per install, alternately, and the
    result is the median of the per-round differences (target <= 50 ns);
  * a recording ts.profile() session against none, in this install: host time added per op
    (target <= 1.5 us);
  * ts.benchmark of the add and of a 1e7-element add, as a one-line summary each.

Results merge into bench/results/<device>-<date>.json under "profile_python"."""
import json
import os
import statistics
import subprocess
import sys

CALLS = int(os.environ.get("TESSEL_OVERHEAD_CALLS", "20000"))
ROUNDS = int(os.environ.get("TESSEL_AB_ROUNDS", "11"))

# One sample in a fresh interpreter: median ns per call of x + y over 7 runs of CALLS calls.
SAMPLE = r"""
import json, sys, time, statistics
import numpy as np
import tessel as ts
dev = ts.Device("cuda:0") if ts.cuda_available() else ts.Device("cpu")
x = ts.asarray(np.array([1.5], np.float32), device=dev)
y = ts.asarray(np.array([2.0], np.float32), device=dev)
assert (x + y).item() == 3.5
calls = int(sys.argv[1])
for _ in range(2000):
    x + y
ts.synchronize(dev)
runs = []
for _ in range(7):
    t0 = time.perf_counter()
    for _ in range(calls):
        x + y
    ts.synchronize(dev)
    runs.append((time.perf_counter() - t0) * 1e9 / calls)
print(json.dumps({"ns": statistics.median(runs), "ranges": ts._tessel._profile_ranges_compiled(),
                  "file": ts.__file__}))
"""


def sample(site):
    env = dict(os.environ, PYTHONPATH=site)
    env.pop("TESSEL_PROFILE", None)
    out = subprocess.run([sys.executable, "-c", SAMPLE, str(CALLS)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def ab_rounds(sites):
    off_site, on_site = sites
    off, on, diff = [], [], []
    for r in range(ROUNDS):
        a, b = sample(off_site), sample(on_site)
        if a["ranges"] or not b["ranges"]:
            raise SystemExit(f"profile_overhead: {off_site} must be built with -DTESSEL_NVTX=OFF and {on_site} "
                             f"without (got ranges={a['ranges']} and {b['ranges']})")
        off.append(a["ns"])
        on.append(b["ns"])
        diff.append(b["ns"] - a["ns"])
        print(f"round {r}: compiled out {a['ns']:.1f} ns, ranges {b['ns']:.1f} ns, diff {b['ns'] - a['ns']:+.1f} ns")
    d = statistics.median(diff)
    print(f"ranges (nothing listening) vs compiled out: {d:+.1f} ns per add (target <= 50 ns)")
    return {"compiled_out_ns": statistics.median(off), "ranges_ns": statistics.median(on), "diff_ns": d,
            "round_diffs_ns": diff, "target_ns": 50, "ok": d <= 50, "rounds": ROUNDS, "calls": CALLS}


def session_cost(ts, dev):
    x = ts.asarray([1.5], dtype=ts.float32, device=dev)
    y = ts.asarray([2.0], dtype=ts.float32, device=dev)
    calls = 2000

    def per_call_us():
        for _ in range(200):
            x + y
        ts.synchronize(dev)
        t0 = ts._tessel._profile_now_ns()
        for _ in range(calls):
            x + y
        ts.synchronize(dev)
        return (ts._tessel._profile_now_ns() - t0) * 1e-3 / calls

    off, on, diff = [], [], []
    for _ in range(ROUNDS):
        a = per_call_us()
        with ts.profile():
            b = per_call_us()
        off.append(a)
        on.append(b)
        diff.append(b - a)
    d = statistics.median(diff)
    print(f"ts.profile() recording: {statistics.median(on):.3f} us per add, off {statistics.median(off):.3f} us: "
          f"added {d:.3f} us per op (target <= 1.5 us)")
    return {"off_us": statistics.median(off), "on_us": statistics.median(on), "added_us": d, "target_us": 1.5,
            "ok": d <= 1.5, "rounds": ROUNDS}


def main():
    import tessel as ts

    from peer_results import merge_results

    dev = ts.Device("cuda:0") if ts.cuda_available() else ts.Device("cpu")
    device_name = ts.device_name(0) if dev.type == "cuda" else "cpu"
    results = {"device": device_name}
    sites = os.environ.get("TESSEL_AB_SITES")
    if sites:
        results["ranges_vs_compiled_out"] = ab_rounds(sites.split(":"))
    else:
        print("profile_overhead: TESSEL_AB_SITES not set: skipping ranges vs compiled out "
              "(scripts/ab-bench.sh profile-ab)")
    results["session_added_per_op"] = session_cost(ts, dev)
    x = ts.ones(1, device=dev)
    big = ts.ones(10_000_000, device=dev)
    for label, arg in (("add 1", x), ("add 1e7", big)):
        res = ts.benchmark(lambda a: a + a, (arg,), n_warmup=10, n_repeat=200 if arg is x else 50, name=label)
        print(res)
        results[f"benchmark {label}"] = {"cpu_median_us": res.cpu_median * 1e6, "gpu_median_us": res.gpu_median * 1e6}
    merge_results("profile_python", results, device_name)


if __name__ == "__main__":
    main()
