"""PyTorch's and CuPy's side of bench/fft_bench.cpp, on the same sizes:
  - one 8192-point complex64 FFT called from Python: median wall time per call with the
    stream synchronized after each call ("latency"), and the mean of back-to-back calls
    synchronized once ("throughput");
  - a batched 16384 x 8192 complex64 FFT: median of CUDA-event-timed repeats, as TB/s of bytes
    read + written.
Every result is checked against numpy.fft before it is timed. Merges its numbers into
bench/results/<device>-<date>.json under "fft_peers" (run it before fft_bench so that the
benchmark can report its ratio to PyTorch)."""
import sys

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

from peer_results import back_to_back_us, latency_us, median_ms, merge_results, rel_error

SINGLE_N = 8192
BATCH, N = 16384, 8192
TOL = 2e-5


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
        "throughput_us": back_to_back_us(lambda: torch.fft.fft(x), sync),
    }
    xb = (torch.rand(BATCH, N, device="cuda") * 2 - 1) + 1j * (torch.rand(BATCH, N, device="cuda") * 2 - 1)
    xb = xb.to(torch.complex64)
    yb = torch.fft.fft(xb)
    rows = [0, 777, BATCH - 1]
    err = max(rel_error(yb[r].cpu().numpy(), np.fft.fft(xb[r].cpu().numpy().astype(np.complex128))) for r in rows)
    assert err < TOL, f"torch.fft.fft batched: max rel error {err}"
    del yb
    ms = median_ms(lambda: torch.fft.fft(xb), repeats=20)
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
        "throughput_us": back_to_back_us(lambda: cupy.fft.fft(x), sync),
    }
    xb = (cupy.random.uniform(-1, 1, (BATCH, N), dtype=cupy.float32)
          + 1j * cupy.random.uniform(-1, 1, (BATCH, N), dtype=cupy.float32)).astype(cupy.complex64)
    yb = cupy.fft.fft(xb)
    rows = [0, 777, BATCH - 1]
    err = max(rel_error(cupy.asnumpy(yb[r]), np.fft.fft(cupy.asnumpy(xb[r]).astype(np.complex128))) for r in rows)
    assert err < TOL, f"cupy.fft.fft batched: max rel error {err}"
    del yb
    ms = median_ms(lambda: cupy.fft.fft(xb), repeats=20, events=lambda: (cupy.cuda.Event(), cupy.cuda.Event()))
    out["batched_16384x8192"] = {"max_rel_error": err, "ms": ms, "TBps": 2 * BATCH * N * 8 / ms / 1e9}
    del xb
    cupy.get_default_memory_pool().free_all_blocks()
    return out


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
    merge_results("fft_peers", out, torch.cuda.get_device_name(0))


if __name__ == "__main__":
    main()
