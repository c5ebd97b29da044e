"""PyTorch's and CuPy's side of bench/fft_bench.cpp, on the same sizes:
  - one 8192-point complex64 FFT called from Python: median wall time per call with the
    stream synchronized after each call ("latency"), and the mean of back-to-back calls
    synchronized once ("throughput");
  - a batched 16384 x 8192 complex64 FFT: median of CUDA-event-timed repeats, as TB/s of bytes
    read + written.
Every result is checked against numpy.fft before it is timed. Merges its numbers into
bench/results/<device>-<date>.json under "fft_peers" (run it before fft_bench so that the
benchmark can report its ratio to PyTorch)."""
import datetime
import json
import os
import re
import statistics
import sys
import time

import numpy as np

try:
    import torch
except ImportError:
    print("torch_fft: skipped: PyTorch is not installed")
    sys.exit(0)
try:
    import cupy
except ImportError:
    cupy = None

SINGLE_N = 8192
BATCH, N = 16384, 8192
TOL = 2e-5


def rel_error(got, want):
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def latency_us(fn, sync, calls=5000):
    for _ in range(200):
        fn()
    sync()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def throughput_us(fn, sync, calls=2000):
    for _ in range(200):
        fn()
    sync()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(runs)


def event_median_ms(fn, record_pair, repeats=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, stop = record_pair()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(stop_elapsed(start, stop))
    return statistics.median(times)


def stop_elapsed(start, stop):
    if hasattr(start, "elapsed_time"):
        return start.elapsed_time(stop)  # torch
    return cupy.cuda.get_elapsed_time(start, stop)  # cupy


def host_random(shape, rng):
    return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(np.complex64)


def bench_torch(rng):
    out = {"version": torch.__version__}
    x_host = host_random((SINGLE_N,), rng)
    x = torch.from_numpy(x_host).cuda()
    err = rel_error(torch.fft.fft(x).cpu().numpy(), np.fft.fft(x_host.astype(np.complex128)))
    assert err < TOL, f"torch.fft.fft 8192: max rel error {err}"
    sync = torch.cuda.synchronize
    out["single_8192"] = {
        "max_rel_error": err,
        "latency_us": latency_us(lambda: torch.fft.fft(x), sync),
        "throughput_us": throughput_us(lambda: torch.fft.fft(x), sync),
    }
    xb = (torch.rand(BATCH, N, device="cuda") * 2 - 1) + 1j * (torch.rand(BATCH, N, device="cuda") * 2 - 1)
    xb = xb.to(torch.complex64)
    yb = torch.fft.fft(xb)
    rows = [0, 777, BATCH - 1]
    err = max(rel_error(yb[r].cpu().numpy(), np.fft.fft(xb[r].cpu().numpy().astype(np.complex128))) for r in rows)
    assert err < TOL, f"torch.fft.fft batched: max rel error {err}"
    del yb
    pair = lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    ms = event_median_ms(lambda: torch.fft.fft(xb), pair)
    out["batched_16384x8192"] = {"max_rel_error": err, "ms": ms, "TBps": 2 * BATCH * N * 8 / ms / 1e9}
    del xb
    torch.cuda.empty_cache()
    return out


def bench_cupy(rng):
    out = {"version": cupy.__version__}
    x_host = host_random((SINGLE_N,), rng)
    x = cupy.asarray(x_host)
    err = rel_error(cupy.asnumpy(cupy.fft.fft(x)), np.fft.fft(x_host.astype(np.complex128)))
    assert err < TOL, f"cupy.fft.fft 8192: max rel error {err}"
    sync = cupy.cuda.Stream.null.synchronize
    out["single_8192"] = {
        "max_rel_error": err,
        "latency_us": latency_us(lambda: cupy.fft.fft(x), sync),
        "throughput_us": throughput_us(lambda: cupy.fft.fft(x), sync),
    }
    xb = (cupy.random.uniform(-1, 1, (BATCH, N), dtype=cupy.float32)
          + 1j * cupy.random.uniform(-1, 1, (BATCH, N), dtype=cupy.float32)).astype(cupy.complex64)
    yb = cupy.fft.fft(xb)
    rows = [0, 777, BATCH - 1]
    err = max(rel_error(cupy.asnumpy(yb[r]), np.fft.fft(cupy.asnumpy(xb[r]).astype(np.complex128))) for r in rows)
    assert err < TOL, f"cupy.fft.fft batched: max rel error {err}"
    del yb
    pair = lambda: (cupy.cuda.Event(), cupy.cuda.Event())
    ms = event_median_ms(lambda: cupy.fft.fft(xb), pair)
    out["batched_16384x8192"] = {"max_rel_error": err, "ms": ms, "TBps": 2 * BATCH * N * 8 / ms / 1e9}
    del xb
    cupy.get_default_memory_pool().free_all_blocks()
    return out


def results_path(device_name):
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", device_name.lower())).strip("-")
    folder = os.environ.get("TESSEL_BENCH_RESULTS", os.path.join(os.path.dirname(__file__), "..", "results"))
    return os.path.join(folder, f"{slug}-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}.json")


def main():
    if not torch.cuda.is_available():
        print("torch_fft: skipped: no CUDA device")
        return
    rng = np.random.default_rng(0)
    out = {"torch": bench_torch(rng)}
    t = out["torch"]
    print(f"torch fft 8192: {t['single_8192']['latency_us']:.2f} us/call synchronized, "
          f"{t['single_8192']['throughput_us']:.2f} us/call back-to-back; "
          f"16384x8192: {t['batched_16384x8192']['ms']:.3f} ms, {t['batched_16384x8192']['TBps']:.3f} TB/s")
    if cupy is not None:
        out["cupy"] = bench_cupy(rng)
        c = out["cupy"]
        print(f"cupy fft 8192: {c['single_8192']['latency_us']:.2f} us/call synchronized, "
              f"{c['single_8192']['throughput_us']:.2f} us/call back-to-back; "
              f"16384x8192: {c['batched_16384x8192']['ms']:.3f} ms, {c['batched_16384x8192']['TBps']:.3f} TB/s")
    else:
        print("torch_fft: CuPy is not installed; only PyTorch measured")
    path = results_path(torch.cuda.get_device_name(0))
    data = json.load(open(path)) if os.path.exists(path) else {}
    data["fft_peers"] = out
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    print(f"results: {path} [fft_peers]")


if __name__ == "__main__":
    main()
