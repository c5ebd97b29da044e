"""unique_inverse and isin on 1e7 int32 keys: tessel against PyTorch (torch.unique with
return_inverse, torch.isin) and CuPy (cupy.unique with return_inverse, cupy.isin) in the same run.

unique_inverse: keys uniform in [0, n), so about 63% of them are distinct. isin: 1e7 keys tested
against 1e7 others, both uniform in [0, 2n). Every library's result is checked against NumPy
before it is timed. Each call is timed on the host with the device synchronized before and after
(unique's output size makes every library wait for the device anyway); the libraries run in
alternating rounds and the median over rounds is reported, with the ratio of the best peer's time
to tessel's (target: >= 1.0 on the H100). Merges into bench/results/<device>-<date>.json under
"set_ops". `compare.py --only set_ops` runs it as part of the suite. Skips (exit 0) without a GPU.
"""
import os
import statistics
import sys
import time

import numpy as np

import tessel as ts

from peer_results import merge_results

N = int(os.environ.get("TESSEL_SET_OPS_N", "10000000"))
ROUNDS = int(os.environ.get("TESSEL_SET_OPS_ROUNDS", "15"))


def _peers():
    found = {}
    try:
        import torch

        if torch.cuda.is_available():
            found["torch"] = torch
    except ImportError:
        pass
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        found["cupy"] = cupy
    except Exception:
        pass
    return found


def build(n, peers, dev):
    """{op: {lib: (fn, check)}}: fn runs the op once, check() validates its last result."""
    rng = np.random.default_rng(0)
    keys = rng.integers(0, n, n, dtype=np.int32)
    a = rng.integers(0, 2 * n, n, dtype=np.int32)
    b = rng.integers(0, 2 * n, n, dtype=np.int32)
    want_values, want_inverse = np.unique(keys, return_inverse=True)
    want_isin = np.isin(a, b)
    cases = {"unique_inverse": {}, "isin": {}}

    def unique_check(values, inverse):
        assert np.array_equal(values, want_values), "unique values differ from NumPy's"
        assert np.array_equal(inverse.reshape(-1), want_inverse.reshape(-1)), "inverse indices differ from NumPy's"

    tk, ta, tb = (ts.asarray(v, device=dev) for v in (keys, a, b))
    cases["unique_inverse"]["tessel"] = (lambda: ts.unique_inverse(tk),
                                         lambda r: unique_check(np.asarray(r.values), np.asarray(r.inverse_indices)))
    cases["isin"]["tessel"] = (lambda: ts.isin(ta, tb), lambda r: np.array_equal(np.asarray(r), want_isin))
    if "torch" in peers:
        torch = peers["torch"]
        pk, pa, pb = (torch.from_numpy(v).cuda() for v in (keys, a, b))
        cases["unique_inverse"]["torch"] = (lambda: torch.unique(pk, sorted=True, return_inverse=True),
                                            lambda r: unique_check(r[0].cpu().numpy(), r[1].cpu().numpy()))
        cases["isin"]["torch"] = (lambda: torch.isin(pa, pb), lambda r: np.array_equal(r.cpu().numpy(), want_isin))
    if "cupy" in peers:
        cp = peers["cupy"]
        ck, ca, cb = (cp.asarray(v) for v in (keys, a, b))
        cases["unique_inverse"]["cupy"] = (lambda: cp.unique(ck, return_inverse=True),
                                           lambda r: unique_check(cp.asnumpy(r[0]), cp.asnumpy(r[1])))
        cases["isin"]["cupy"] = (lambda: cp.isin(ca, cb), lambda r: np.array_equal(cp.asnumpy(r), want_isin))
    return cases


def measure(n=N, rounds=ROUNDS, device="cuda:0"):
    """The results dictionary (also what compare.py's set_ops workload reports). device="cpu"
    measures tessel's CPU backend alone (a smoke test of this script)."""
    dev = ts.Device(device)
    peers = _peers() if dev.type == "cuda" else {}

    def sync():
        ts.synchronize(dev)
        if "torch" in peers:
            peers["torch"].cuda.synchronize()
        if "cupy" in peers:
            peers["cupy"].cuda.runtime.deviceSynchronize()

    results = {"device": ts.device_name(dev.index) if dev.type == "cuda" else "cpu", "n": n, "dtype": "int32", "rounds": rounds, "ops": {}}
    for op, libs in build(n, peers, dev).items():
        status = {}
        for lib, (fn, check) in libs.items():
            try:
                ok = check(fn())
                status[lib] = "ok" if ok is None or ok else "FAILED"
            except AssertionError:
                status[lib] = "FAILED"
            for _ in range(2):  # warm-up: kernels compiled, pools filled
                fn()
        times = {lib: [] for lib in libs if status[lib] == "ok"}
        for _ in range(rounds):
            for lib in times:
                fn = libs[lib][0]
                sync()
                t0 = time.perf_counter()
                fn()
                sync()
                times[lib].append((time.perf_counter() - t0) * 1e3)
        entry = {lib: {"status": status[lib]} for lib in libs}
        for lib, ts_ in times.items():
            entry[lib]["median_ms"] = statistics.median(ts_)
        peers_ms = [entry[p]["median_ms"] for p in times if p != "tessel"]
        if "tessel" in times and peers_ms:
            best = min(peers_ms)
            entry["best_peer_over_tessel"] = best / entry["tessel"]["median_ms"]
            entry["meets_target"] = entry["best_peer_over_tessel"] >= 1.0
        results["ops"][op] = entry
    return results


def main():
    if not ts.cuda_available():
        print(f"set_ops: skipped: CUDA unavailable ({ts.cuda_unavailable_reason()})")
        return 0
    results = measure()
    for op, entry in results["ops"].items():
        line = ", ".join(f"{lib} {v['median_ms']:.3f} ms" for lib, v in entry.items()
                         if isinstance(v, dict) and "median_ms" in v)
        ratio = entry.get("best_peer_over_tessel")
        print(f"{op} ({results['n']:.0e} int32): {line}" + (f"; best peer / tessel {ratio:.2f}x" if ratio else ""))
        failed = [lib for lib, v in entry.items() if isinstance(v, dict) and v.get("status") == "FAILED"]
        if failed:
            print(f"  FAILED (wrong result): {', '.join(failed)}")
    merge_results("set_ops", results, ts.device_name(0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
