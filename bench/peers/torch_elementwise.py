"""PyTorch's side of bench/elementwise_bench.cpp, on the same sizes, timed the same way
(CUDA events, warm-up, median). Merges its numbers into bench/results/<device>-<date>.json
under "elementwise_torch"."""
import sys

try:
    import torch
except ImportError:
    print("torch_elementwise: skipped: PyTorch is not installed")
    sys.exit(0)

from peer_results import median_ms, merge_results


def main():
    if not torch.cuda.is_available():
        print("torch_elementwise: skipped: no CUDA device")
        return
    out = {"torch": torch.__version__, "vector_add": []}
    for n in (10_000_000, 100_000_000):
        a, b = torch.rand(n, device="cuda") * 2 - 1, torch.rand(n, device="cuda") * 2 - 1
        c = torch.full((n,), float("nan"), device="cuda")
        torch.add(a, b, out=c)
        assert torch.allclose(c, a + b)
        ms = median_ms(lambda: torch.add(a, b, out=c), repeats=25)
        # 20 adds between one pair of events: the kernel's time without the launch's host
        # submission (as tessel's suite and elementwise bench time it back to back).
        batch = 20

        def adds():
            for _ in range(batch):
                torch.add(a, b, out=c)

        ms_b2b = median_ms(adds, repeats=9) / batch
        out["vector_add"].append({"n": n, "ms": ms, "GBps": 3 * n * 4 / ms / 1e6,
                                  "back_to_back_ms": ms_b2b, "back_to_back_GBps": 3 * n * 4 / ms_b2b / 1e6})
        print(f"torch add n={n}: {ms:.4f} ms per call, {ms_b2b:.4f} ms back to back")
    n = 100_000_000
    x, b, c = (torch.rand(n, device="cuda") * 2 - 1 for _ in range(3))
    a = 1.75
    ms = median_ms(lambda: torch.relu(a * x + b) * c, repeats=15)
    out["relu_axpb_c_eager"] = {"n": n, "ms": ms}
    print(f"torch relu(a*x+b)*c eager: {ms:.3f} ms")
    merge_results("elementwise_torch", out, torch.cuda.get_device_name(0))


if __name__ == "__main__":
    main()
