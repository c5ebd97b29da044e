"""tessel's FFT and GEMM called from Python, with PyTorch and CuPy measured in the same run:
  - one 8192-point complex64 FFT: median wall time per call with the stream synchronized after
    each call ("latency_us", as bench/peers/torch_fft.py), and the mean of back-to-back calls
    synchronized once ("throughput_us"). Targets (issue 6): faster than PyTorch (25.6 us) and
    CuPy (33.5 us) on our H100.
  - relu(a @ b + bias) in bfloat16 at 4096^3, 8192^3 and 16384x4096x1024 through ts.matmul and
    through an autotuned ts.Matmul plan, against torch.relu(a @ b + bias) and
    torch.relu(torch.addmm(bias, a, b)): mean of back-to-back calls, as TFLOP/s.
  - 100 float32 1024^2 products (fp32 and tf32), total ms.
Every result is checked (against numpy.fft / float64 samples) before it is timed. Merges into
bench/results/<device>-<date>.json under "python_fft_matmul". Skips (exit 0) without a GPU."""
import sys

import numpy as np

import tessel as ts

from peer_results import back_to_back_us, latency_us, merge_results, optional_import, rel_error

torch = optional_import("torch")
cupy = optional_import("cupy")


FFT_N = 8192
FFT_TOL = 2e-5
MATMUL_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 1024)]


def bench_fft(dev, sync):
    rng = np.random.default_rng(0)
    x_host = (rng.uniform(-1, 1, FFT_N) + 1j * rng.uniform(-1, 1, FFT_N)).astype(np.complex64)
    want = np.fft.fft(x_host.astype(np.complex128))
    out = {}
    x = ts.asarray(x_host, device=dev)
    f = ts.fft.fft
    err = rel_error(np.asarray(f(x)), want)
    assert err < FFT_TOL, f"ts.fft.fft 8192: max rel error {err}"
    out["tessel"] = {"max_rel_error": err, "latency_us": latency_us(lambda: f(x), sync),
                     "throughput_us": back_to_back_us(lambda: f(x), sync)}
    if torch is not None and torch.cuda.is_available():
        tx = torch.from_numpy(x_host).cuda()
        err = rel_error(torch.fft.fft(tx).cpu().numpy(), want)
        assert err < FFT_TOL, f"torch.fft.fft 8192: max rel error {err}"
        tsync = torch.cuda.synchronize
        out["torch"] = {"max_rel_error": err, "latency_us": latency_us(lambda: torch.fft.fft(tx), tsync),
                        "throughput_us": back_to_back_us(lambda: torch.fft.fft(tx), tsync)}
    if cupy is not None:
        cx = cupy.asarray(x_host)
        err = rel_error(cupy.asnumpy(cupy.fft.fft(cx)), want)
        assert err < FFT_TOL, f"cupy.fft.fft 8192: max rel error {err}"
        csync = cupy.cuda.Stream.null.synchronize
        out["cupy"] = {"max_rel_error": err, "latency_us": latency_us(lambda: cupy.fft.fft(cx), csync),
                       "throughput_us": back_to_back_us(lambda: cupy.fft.fft(cx), csync)}
    peers = [out[p]["latency_us"] for p in ("torch", "cupy") if p in out]
    out["tessel_faster_than_peers"] = bool(peers) and out["tessel"]["latency_us"] < min(peers)
    return out


def sampled_error(d, a, b, bias, samples=256):
    """Largest error of relu(a @ b + bias) over sampled outputs, relative to sum |a_ik b_kj| + |bias_j|."""
    rng = np.random.default_rng(7)
    i = rng.integers(0, a.shape[0], samples)
    j = rng.integers(0, b.shape[1], samples)
    prods = a[i].astype(np.float64) * b[:, j].T.astype(np.float64)
    want = np.maximum(prods.sum(1) + bias[j], 0)
    return float(np.max(np.abs(d[i, j] - want) / (np.abs(prods).sum(1) + np.abs(bias[j]))))


def bench_matmul(dev, sync):
    out = {"relu_matmul_bias_bf16": [], "float32_1024_x100": {}}
    for m, n, k in MATMUL_SHAPES:
        flops = 2.0 * m * n * k
        a = ts.random.uniform(-1, 1, (m, k), device=dev).astype(ts.bfloat16)
        b = ts.random.uniform(-1, 1, (k, n), device=dev).astype(ts.bfloat16)
        bias = ts.random.uniform(-1, 1, (n,), device=dev).astype(ts.bfloat16)
        a_h, b_h, bias_h = np.asarray(a), np.asarray(b), np.asarray(bias).astype(np.float64)
        row = {"m": m, "n": n, "k": k}
        d = ts.matmul(a, b, bias=bias, epilogue="relu")
        row["tessel_matmul_error"] = sampled_error(np.asarray(d), a_h, b_h, bias_h)
        assert row["tessel_matmul_error"] < 1e-2, row
        us = back_to_back_us(lambda: ts.matmul(a, b, bias=bias, epilogue="relu"), sync, calls=20, rounds=3)
        row["tessel_matmul_tflops"] = flops / us / 1e6
        plan = ts.Matmul(a, b, bias=bias, epilogue="relu")
        plan.autotune(iterations=10)
        row["tessel_plan_selected"] = plan.selected.name
        row["tessel_plan_error"] = sampled_error(np.asarray(plan.execute()), a_h, b_h, bias_h)
        assert row["tessel_plan_error"] < 1e-2, row
        us = back_to_back_us(lambda: plan.execute(a, b), sync, calls=20, rounds=3)
        row["tessel_plan_tflops"] = flops / us / 1e6
        if torch is not None and torch.cuda.is_available():
            ta, tb, tbias = (torch.from_dlpack(v) for v in (a, b, bias))
            tsync = torch.cuda.synchronize
            variants = {"torch_relu_matmul_bias": lambda: torch.relu(ta @ tb + tbias),
                        "torch_relu_addmm": lambda: torch.relu(torch.addmm(tbias, ta, tb)),
                        "torch_matmul_only": lambda: ta @ tb}
            for name, fn in variants.items():
                us = back_to_back_us(fn, tsync, calls=20, rounds=3)
                row[f"{name}_tflops"] = flops / us / 1e6
            best = max(row["torch_relu_matmul_bias_tflops"], row["torch_relu_addmm_tflops"])
            row["tessel_plan_vs_best_torch"] = row["tessel_plan_tflops"] / best
        out["relu_matmul_bias_bf16"].append(row)
        del a, b, bias, d, plan
    a = ts.random.uniform(-1, 1, (1024, 1024), device=dev)
    b = ts.random.uniform(-1, 1, (1024, 1024), device=dev)
    for compute in ["fp32", "tf32"]:
        ref = np.asarray(a).astype(np.float64) @ np.asarray(b).astype(np.float64)
        got = np.asarray(ts.matmul(a, b, compute=compute))
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(np.asarray(a)).astype(np.float64) @ np.abs(np.asarray(b))))
        assert err < (1e-5 if compute == "fp32" else 2e-3), (compute, err)

        def hundred():
            for _ in range(100):
                ts.matmul(a, b, compute=compute)

        out["float32_1024_x100"][compute] = {"max_rel_error": err, "ms": back_to_back_us(hundred, sync, calls=3, rounds=5) / 1e3}
    return out


def main():
    if not ts.cuda_available():
        print(f"python_fft_matmul: skipped: CUDA unavailable ({ts.cuda_unavailable_reason()})")
        return 0
    dev = ts.Device("cuda:0")
    stream = ts.current_stream(dev)
    sync = stream.synchronize
    results = {"python": sys.version.split()[0], "device": ts.device_name(0)}
    results["fft_8192"] = bench_fft(dev, sync)
    for who, r in results["fft_8192"].items():
        if isinstance(r, dict):
            print(f"fft 8192 {who}: {r['latency_us']:.2f} us/call synchronized, {r['throughput_us']:.2f} us back-to-back")
    if "--fft-only" not in sys.argv:
        results["matmul"] = bench_matmul(dev, sync)
        for row in results["matmul"]["relu_matmul_bias_bf16"]:
            print("relu(a@b+bias) bf16", {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})
        print("float32 1024^2 x100:", results["matmul"]["float32_1024_x100"])
    merge_results("python_fft_matmul", results, ts.device_name(0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
