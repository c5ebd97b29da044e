"""PyTorch's side of bench/matmul_bench.cpp, on the same shapes, timed the same way (CUDA events,
warm-up, median), each variant checked against torch's float64 result on a sample first:
  relu(a @ b + bias) in bfloat16 at 4096^3, 8192^3 and 16384x4096x1024 as
    torch.relu(a @ b + bias), torch.relu(torch.addmm(bias, a, b)) and torch.compile of the first,
    plus a @ b alone;
  100 float32 1024^2 products with fp32 and with tf32 (torch.backends.cuda.matmul.allow_tf32).
Merges its numbers into bench/results/<device>-<date>.json under "matmul_peers"."""
import sys

try:
    import torch
except ImportError:
    print("torch_matmul: skipped: PyTorch is not installed")
    sys.exit(0)

from peer_results import median_ms, merge_results


def sampled_error(d, a, b, bias, relu, samples=256):
    """Largest error over sampled outputs against float64, relative to sum |a_ik b_kj|."""
    g = torch.Generator(device="cpu").manual_seed(7)
    i = torch.randint(0, a.shape[0], (samples,), generator=g).cuda()
    j = torch.randint(0, b.shape[1], (samples,), generator=g).cuda()
    prods = a[i].double() * b[:, j].t().double()
    want = prods.sum(1)
    if bias is not None:
        want = want + bias[j].double()
    if relu:
        want = want.clamp_min(0)
    scale = prods.abs().sum(1)
    return ((d[i, j].double() - want).abs() / scale).max().item()


def main():
    if not torch.cuda.is_available():
        print("torch_matmul: skipped: no CUDA device")
        return
    out = {"torch": torch.__version__, "relu_matmul_bias_bf16": [], "float32_1024_x100": {}}
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 1024)):
        a = (torch.rand(m, k, device="cuda") * 2 - 1).bfloat16()
        b = (torch.rand(k, n, device="cuda") * 2 - 1).bfloat16()
        bias = (torch.rand(n, device="cuda") * 2 - 1).bfloat16()
        flop = 2.0 * m * n * k
        row = {"m": m, "n": n, "k": k, "dtype": "bfloat16"}
        compiled = torch.compile(lambda a, b, bias: torch.relu(a @ b + bias))
        variants = {
            "matmul_only": (lambda: a @ b, False, None),
            "relu_matmul_plus_bias": (lambda: torch.relu(a @ b + bias), True, bias),
            "relu_addmm": (lambda: torch.relu(torch.addmm(bias, a, b)), True, bias),
            "torch_compile": (lambda: compiled(a, b, bias), True, bias),
        }
        for name, (fn, relu, vbias) in variants.items():
            try:
                error = sampled_error(fn(), a, b, vbias, relu)
            except Exception as exc:  # torch.compile may be unavailable (no triton)
                row[name] = {"status": f"failed: {exc}"}
                print(f"torch {name}: failed: {exc}")
                continue
            if not error <= 1e-2:
                row[name] = {"status": "FAILED", "error": error}
                print(f"torch {name}: FAILED check ({error:.3g})")
                continue
            ms = median_ms(fn)
            row[name] = {"ms": ms, "TFLOPs": flop / ms / 1e9, "error": error}
            print(f"torch {name} {m}x{n}x{k}: {ms:.3f} ms {flop / ms / 1e9:.1f} TFLOP/s")
        timed = [row[v]["TFLOPs"] for v in ("relu_matmul_plus_bias", "relu_addmm", "torch_compile") if "TFLOPs" in row.get(v, {})]
        row["best_relu_variant_TFLOPs"] = max(timed) if timed else None
        out["relu_matmul_bias_bf16"].append(row)
    n = 1024
    a, b = torch.rand(n, n, device="cuda") * 2 - 1, torch.rand(n, n, device="cuda") * 2 - 1
    for name, tf32 in (("fp32", False), ("tf32", True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        error = sampled_error(a @ b, a, b, None, False)
        if not error <= (2e-3 if tf32 else 1e-5):
            out["float32_1024_x100"][name] = {"status": "FAILED", "error": error}
            continue

        def hundred():
            for _ in range(100):
                a @ b
        ms = median_ms(hundred, repeats=10)
        out["float32_1024_x100"][name] = {"ms_for_100": ms, "error": error}
        print(f"torch 100 x float32 1024^2 ({name}): {ms:.3f} ms")
    torch.backends.cuda.matmul.allow_tf32 = False
    merge_results("matmul_peers", out, torch.cuda.get_device_name(0))


if __name__ == "__main__":
    main()
