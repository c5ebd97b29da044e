"""Indexing from Python against PyTorch and CuPy, in alternating rounds on one device:

- mask compaction x[m]: 1e8 float32, half the mask true; also as a fraction of the device copy
  bandwidth, counting the bytes of x, of m and of the output (targets: >= 80% of copy,
  >= 1.3x PyTorch and >= 1.3x CuPy);
- gather x[idx]: 1e8 float32 source, 1e7 random int64 indices (target: >= 1.0x the best peer);
- x[m] = scalar on 1e8 float32 (target: >= 1.0x the best peer);
- the bounds check: x[idx] against the same gather without the check and its read-back
  (internal take_unchecked; target: the check costs <= 3% of the gather), and x[idx] = scalar
  against the scatter without the check that runs before it;
- x[idx] with 1e3 indices, checked and unchecked, and the peers' x[idx]: per call, the host's
  part and the wait of a small gather (what the read-back of the check adds between two gathers).

Each library's call runs `calls` times back to back, then its device synchronizes; the per-call
time is the mean of those, and each case's figure the median over the rounds. Every round runs
every case once, so drifts of the machine hit all of them alike. Results are checked against
NumPy before timing. Results merge into bench/results/<device-slug>-<date>.json under
"python_indexing" (the slug rule of bench/bench_results.hpp). Without a GPU the script measures
tessel's CPU backend at 1e6 elements as a smoke run and names the file "cpu".

    python3 bench/peers/python_indexing.py [--quick] [--rounds N] [--no-record]
"""
import argparse
import statistics
import sys
import time

import numpy as np

import tessel as ts

from peer_results import merge_results


def per_call_ms(fn, sync, calls):
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) * 1e3 / calls


def load_peers(on_gpu):
    peers = {}
    if not on_gpu:
        return peers
    try:
        import torch

        if torch.cuda.is_available():
            peers["torch"] = torch
    except ImportError:
        pass
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        peers["cupy"] = cupy
    except Exception:
        pass
    return peers


SMALL_GATHER = 1000

def alternating_rounds(cases, rounds, calls):
    """Median per-call ms of every case over `rounds` rounds; each round runs every case once."""
    runs = {key: [] for key in cases}
    for fn, sync in cases.values():  # warm-up: compiles, pools
        fn()
        sync()
    for _ in range(rounds):
        for key, (fn, sync) in cases.items():
            runs[key].append(per_call_ms(fn, sync, calls))
    return {key: statistics.median(v) for key, v in runs.items()}


def measure(quick=False, rounds=None):
    """Runs every case in alternating rounds; returns the results dict (also what bench/compare.py
    turns into its rows)."""
    on_gpu = ts.cuda_available()
    device = "cuda" if on_gpu else "cpu"
    n = 10**8 if on_gpu and not quick else 10**7 if on_gpu else 10**6
    k = n // 10
    rounds = rounds or (5 if quick or not on_gpu else 11)
    calls = 20 if on_gpu else 3
    peers = load_peers(on_gpu)
    device_name = ts.device_name(0) if on_gpu else "cpu"

    rng = np.random.default_rng(0)
    x_host = rng.standard_normal(n, dtype=np.float32)
    m_host = rng.random(n) < 0.5
    idx_host = rng.integers(0, n, size=k, dtype=np.int64)
    small_host = rng.integers(0, n, size=SMALL_GATHER, dtype=np.int64)
    want_mask = x_host[m_host]
    want_gather = x_host[idx_host]

    def tessel_sync():
        ts.synchronize(device) if on_gpu else None

    # ---- the libraries' arrays and calls ----
    x = ts.asarray(x_host, device=device)
    m = ts.asarray(m_host, device=device)
    idx = ts.asarray(idx_host, device=device)
    small = ts.asarray(small_host, device=device)
    y = x.copy()
    cases = {
        ("mask_select", "tessel"): (lambda: x[m], tessel_sync),
        ("gather", "tessel"): (lambda: x[idx], tessel_sync),
        ("mask_set_scalar", "tessel"): (lambda: y.__setitem__(m, 1.0), tessel_sync),
        ("gather_unchecked", "tessel"): (lambda: ts._tessel._take_unchecked(x, idx, 0), tessel_sync),
        ("scatter_scalar", "tessel"): (lambda: y.__setitem__(idx, 2.0), tessel_sync),
        ("scatter_scalar_unchecked", "tessel"): (lambda: ts._tessel._setitem_unchecked(y, idx, 2.0), tessel_sync),
        ("gather_small", "tessel"): (lambda: x[small], tessel_sync),
        ("gather_small_unchecked", "tessel"): (lambda: ts._tessel._take_unchecked(x, small, 0), tessel_sync),
    }
    dst = ts.empty((n,), device=device)
    cases[("copy", "tessel")] = (lambda: ts.copyto(dst, x), tessel_sync)
    # Check before timing.
    np.testing.assert_array_equal(np.asarray(x[m]), want_mask)
    np.testing.assert_array_equal(np.asarray(x[idx]), want_gather)
    np.testing.assert_array_equal(np.asarray(ts._tessel._take_unchecked(x, idx, 0)), want_gather)
    if "torch" in peers:
        torch = peers["torch"]
        tx, tm, ti = torch.from_numpy(x_host).cuda(), torch.from_numpy(m_host).cuda(), torch.from_numpy(idx_host).cuda()
        ty = tx.clone()
        tdst = torch.empty_like(tx)
        np.testing.assert_array_equal(tx[tm].cpu().numpy(), want_mask)
        np.testing.assert_array_equal(tx[ti].cpu().numpy(), want_gather)
        sync = torch.cuda.synchronize
        cases[("mask_select", "torch")] = (lambda: tx[tm], sync)
        cases[("gather", "torch")] = (lambda: tx[ti], sync)
        cases[("mask_set_scalar", "torch")] = (lambda: ty.__setitem__(tm, 1.0), sync)
        cases[("scatter_scalar", "torch")] = (lambda: ty.__setitem__(ti, 2.0), sync)
        cases[("copy", "torch")] = (lambda: tdst.copy_(tx), sync)
        tsmall = torch.from_numpy(small_host).cuda()
        cases[("gather_small", "torch")] = (lambda: tx[tsmall], sync)
    if "cupy" in peers:
        cp = peers["cupy"]
        cx, cm, ci = cp.asarray(x_host), cp.asarray(m_host), cp.asarray(idx_host)
        cy = cx.copy()
        cdst = cp.empty_like(cx)
        np.testing.assert_array_equal(cp.asnumpy(cx[cm]), want_mask)
        np.testing.assert_array_equal(cp.asnumpy(cx[ci]), want_gather)
        sync = cp.cuda.Device().synchronize
        cases[("mask_select", "cupy")] = (lambda: cx[cm], sync)
        cases[("gather", "cupy")] = (lambda: cx[ci], sync)
        cases[("mask_set_scalar", "cupy")] = (lambda: cy.__setitem__(cm, 1.0), sync)
        cases[("scatter_scalar", "cupy")] = (lambda: cy.__setitem__(ci, 2.0), sync)
        cases[("copy", "cupy")] = (lambda: cdst.__setitem__(Ellipsis, cx), sync)
        csmall = cp.asarray(small_host)
        cases[("gather_small", "cupy")] = (lambda: cx[csmall], sync)

    ms = alternating_rounds(cases, rounds, calls)

    # ---- derived figures ----
    nnz = int(m_host.sum())
    copy_ms = min(t for (case, _), t in ms.items() if case == "copy")
    copy_gbps = 2 * n * 4 / copy_ms / 1e6
    mask_bytes = n * 4 + n + nnz * 4
    results = {"device": device_name, "n": n, "indices": k, "rounds": rounds, "calls_per_round": calls,
               "copy_GBps": copy_gbps, "ms": {f"{case}/{lib}": t for (case, lib), t in ms.items()}}
    mask_t = ms[("mask_select", "tessel")]
    results["mask_select"] = {
        "bytes": mask_bytes,
        "tessel_GBps": mask_bytes / mask_t / 1e6,
        "fraction_of_copy": (mask_bytes / mask_t / 1e6) / copy_gbps,
        "target_fraction_of_copy": 0.8,
    }
    for case, target in (("mask_select", 1.3), ("gather", 1.0), ("mask_set_scalar", 1.0), ("scatter_scalar", None)):
        entry = results.setdefault(case, {})
        for lib in peers:
            if (case, lib) in ms:
                entry[f"speedup_vs_{lib}"] = ms[(case, lib)] / ms[(case, "tessel")]
        if target is not None:
            entry["target_speedup"] = target
    results["gather_small"] = {
        "indices": SMALL_GATHER,
        "note": "per call: host work, launch and (checked) the read-back's synchronize of a small gather",
        "tessel_ms": ms[("gather_small", "tessel")],
        "tessel_unchecked_ms": ms[("gather_small_unchecked", "tessel")],
        **{f"{lib}_ms": ms[("gather_small", lib)] for lib in peers if ("gather_small", lib) in ms},
    }
    results["bounds_check"] = {
        "gather_ms": ms[("gather", "tessel")],
        "gather_unchecked_ms": ms[("gather_unchecked", "tessel")],
        "gather_check_cost_fraction": ms[("gather", "tessel")] / ms[("gather_unchecked", "tessel")] - 1,
        "gather_target_fraction": 0.03,
        "scatter_ms": ms[("scatter_scalar", "tessel")],
        "scatter_unchecked_ms": ms[("scatter_scalar_unchecked", "tessel")],
        "scatter_check_cost_fraction": ms[("scatter_scalar", "tessel")] / ms[("scatter_scalar_unchecked", "tessel")] - 1,
    }
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e7 elements (1e6 indices), fewer rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--no-record", action="store_true", help="print only, write no results file")
    args = parser.parse_args()
    results = measure(args.quick, args.rounds)
    for name, t in sorted(results["ms"].items()):
        print(f"{name:34s} {t:9.4f} ms")
    print(f"copy {results['copy_GBps']:.0f} GB/s; x[m] at {results['mask_select']['fraction_of_copy']:.1%} of copy; "
          f"gather check costs {results['bounds_check']['gather_check_cost_fraction']:+.1%}, "
          f"scatter check {results['bounds_check']['scatter_check_cost_fraction']:+.1%}")
    if not args.no_record:
        merge_results("python_indexing", results, results["device"])
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
