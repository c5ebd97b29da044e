"""PyTorch's side of bench/elementwise_bench.cpp, on the same sizes, timed the same way
(CUDA events, warm-up, median). Merges its numbers into bench/results/<device>-<date>.json
under "elementwise_torch"."""
import datetime
import json
import os
import re
import sys

try:
    import torch
except ImportError:
    print("torch_elementwise: skipped: PyTorch is not installed")
    sys.exit(0)


def median_ms(fn, repeats=25):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def results_path(device_name):
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", device_name.lower())).strip("-")
    folder = os.environ.get("TESSEL_BENCH_RESULTS", os.path.join(os.path.dirname(__file__), "..", "results"))
    return os.path.join(folder, f"{slug}-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}.json")


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
        ms = median_ms(lambda: torch.add(a, b, out=c))
        out["vector_add"].append({"n": n, "ms": ms, "GBps": 3 * n * 4 / ms / 1e6})
        print(f"torch add n={n}: {ms:.4f} ms")
    n = 100_000_000
    x, b, c = (torch.rand(n, device="cuda") * 2 - 1 for _ in range(3))
    a = 1.75
    ms = median_ms(lambda: torch.relu(a * x + b) * c, repeats=15)
    out["relu_axpb_c_eager"] = {"n": n, "ms": ms}
    print(f"torch relu(a*x+b)*c eager: {ms:.3f} ms")
    path = results_path(torch.cuda.get_device_name(0))
    data = json.load(open(path)) if os.path.exists(path) else {}
    data["elementwise_torch"] = out
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    print(f"results: {path} [elementwise_torch]")


if __name__ == "__main__":
    main()
