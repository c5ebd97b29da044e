"""Python overhead per tiny op: the per-call time of a 1-element add (x + y) from Python for
tessel, PyTorch, CuPy and Numba, and a torch -> tessel -> torch zero-copy round trip (with its
steps, and with tessel's use of the DLPack C exchange API on and off). On a GPU also a tiny
custom kernel from Python (ts.fuse, ElementwiseKernel, RawKernel against CuPy's, Numba's and
PyTorch eager), in alternating rounds (interleaved_kernels).

Each measurement runs `calls` back-to-back calls, synchronizes the device once at the end, and
reports the median per-call time over `repeats` runs (after a warm-up). Results are checked
before timing. Targets (issue 4): tessel add <= 5 us, round trip <= 10 us on the H100.
Results merge into bench/results/<device-slug>-<date>.json under "python_overhead" (the slug
rule of bench/bench_results.hpp; "cpu" without a GPU, where tessel's CPU backend is measured as
a proxy and the peers are skipped)."""
import os
import statistics
import sys

import numpy as np

import tessel as ts

from peer_results import back_to_back_us, merge_results

CALLS = int(os.environ.get("TESSEL_OVERHEAD_CALLS", "20000"))
REPEATS = int(os.environ.get("TESSEL_OVERHEAD_REPEATS", "7"))


def per_call_us(fn, sync, calls=CALLS, repeats=REPEATS):
    return back_to_back_us(fn, sync, calls=calls, rounds=repeats, warmup=max(1000, calls // 10))


def measure_tessel(device):
    """x + y per call, and its split: tessel::add called from C++ (host time) and the rest, the
    Python layer (operator slot, argument checks, the result object)."""
    x = ts.asarray(np.array([1.5], np.float32), device=device)
    y = ts.asarray(np.array([2.0], np.float32), device=device)
    assert (x + y).item() == 3.5, "tessel add gave a wrong result"
    add = per_call_us(lambda: x + y, lambda: ts.synchronize(device))
    in_cpp = ts._tessel._time_add_in_cpp(x, y, None, CALLS)
    ts.synchronize(device)
    return add, {"add_in_cpp_us": in_cpp, "python_layer_us": add - in_cpp}


def alternating_rounds(cases, rounds, sync):
    """Each case (a function returning microseconds per call) once per round, in order, for
    `rounds` rounds; the device synchronized after each round. Every case's list of results."""
    runs = {name: [] for name in cases}
    for _ in range(rounds):
        for name, measure in cases.items():
            runs[name].append(measure())
        sync()
    return runs


def interleaved_add(device, torch):
    """The 1-element add in alternating rounds: tessel's x + y, tessel::add from C++, an empty
    kernel launched from C++ (the floor every op pays), and torch's x + y. The host's speed drifts
    on a VM by up to 1.5x between minutes, so only cases measured in the same rounds compare
    well. Medians over the rounds, and of each round's differences and ratios."""
    x = ts.asarray(np.array([1.5], np.float32), device=device)
    y = ts.asarray(np.array([2.0], np.float32), device=device)
    tx, ty = torch.full((1,), 1.5, device="cuda"), torch.full((1,), 2.0, device="cuda")
    assert (x + y).item() == 3.5 and (tx + ty).item() == 3.5, "a 1-element add gave a wrong result"
    calls, rounds = 2000, int(os.environ.get("TESSEL_OVERHEAD_ROUNDS", "41"))
    tsync = lambda: ts.synchronize(device)
    cases = {
        "tessel_add_us": lambda: per_call_us(lambda: x + y, tsync, calls, 1),
        "tessel_add_in_cpp_us": lambda: ts._tessel._time_add_in_cpp(x, y, None, calls),
        "launch_floor_us": lambda: ts._tessel._time_launch_floor(0, calls),
        "torch_add_us": lambda: per_call_us(lambda: tx + ty, torch.cuda.synchronize, calls, 1),
    }
    runs = alternating_rounds(cases, rounds, tsync)
    out = {name: statistics.median(v) for name, v in runs.items()}
    out["rounds"], out["calls_per_round"] = rounds, calls
    out["tessel_add_minus_floor_us"] = statistics.median(
        [a - f for a, f in zip(runs["tessel_add_us"], runs["launch_floor_us"])])
    out["torch_over_tessel"] = statistics.median(
        [t / a for a, t in zip(runs["tessel_add_us"], runs["torch_add_us"])])
    out["rounds_tessel_add_at_most_5us"] = sum(a <= 5.0 for a in runs["tessel_add_us"]) / rounds
    out["tessel_add_us_range"] = [min(runs["tessel_add_us"]), max(runs["tessel_add_us"])]
    out["launch_floor_us_range"] = [min(runs["launch_floor_us"]), max(runs["launch_floor_us"])]
    return out


# The tiny custom-kernel comparison: y = relu(x*a + b) * c over 1-element float32 arrays.
RAW_SOURCE = r"""extern "C" __global__ void relu_axpb_c(const float* x, const float* a, const float* b,
                                                const float* c, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i] * a[i] + b[i], 0.0f) * c[i];
}"""


def interleaved_kernels(device):
    """Custom kernels from Python, per call, in alternating rounds: tessel's ts.fuse,
    ElementwiseKernel and RawKernel against the same kernels in CuPy (cupy.fuse,
    cupy.ElementwiseKernel, cupy.RawKernel), a Numba @cuda.jit kernel, PyTorch eager (four ops)
    and tessel's own unfused ops; plus the empty-kernel floor. fuse, ElementwiseKernel and the
    eager chains return a new array per call; RawKernel and Numba write a preallocated one.
    Every case is checked against float64 before timing; a peer that is missing is skipped with
    its reason."""
    rng = np.random.default_rng(4)
    host = [rng.uniform(0.5, 2.0, 1).astype(np.float32) for _ in range(4)]
    host[2] = -host[2] * 0.5  # b < 0 keeps relu's branch honest
    want = max(float(host[0][0]) * float(host[1][0]) + float(host[2][0]), 0.0) * float(host[3][0])
    skipped = {}
    cases = {}

    def check(name, value):
        got = float(np.asarray(value).reshape(-1)[0])
        assert abs(got - want) <= 1e-6 * abs(want), f"{name}: {got} != {want}"

    x, a, b, c = (ts.asarray(h, device=device) for h in host)
    y = ts.empty((1,), device=device)

    @ts.fuse
    def fused(x, a, b, c):
        return ts.relu(x * a + b) * c

    ew = ts.ElementwiseKernel("float32 x, float32 a, float32 b, float32 c", "float32 y",
                              "y = fmaxf(x * a + b, 0.0f) * c", "relu_axpb_c_ew")
    raw = ts.RawKernel(RAW_SOURCE, "relu_axpb_c")
    one = np.int64(1)
    calls_ts = {
        "tessel_fuse_us": lambda: fused(x, a, b, c),
        "tessel_elementwise_kernel_us": lambda: ew(x, a, b, c),
        "tessel_raw_kernel_us": lambda: raw((1,), (32,), (x, a, b, c, y, one)),
        "tessel_unfused_us": lambda: ts.relu(x * a + b) * c,
    }
    for name, fn in calls_ts.items():
        r = fn()
        check(name, (y if r is None else r).to_device("cpu"))
    calls, rounds = 1000, int(os.environ.get("TESSEL_OVERHEAD_ROUNDS", "21"))
    tsync = lambda: ts.synchronize(device)

    def timed(fn, sync):  # a case: measures `calls` calls of fn, returns microseconds per call
        return lambda: per_call_us(fn, sync, calls, 1)

    for name, fn in calls_ts.items():
        cases[name] = timed(fn, tsync)
    cases["launch_floor_us"] = lambda: ts._tessel._time_launch_floor(0, calls)

    try:
        import torch

        tx, ta, tb, tc = (torch.from_numpy(h).cuda() for h in host)
        check("torch_eager_us", (torch.relu(tx * ta + tb) * tc).cpu())
        cases["torch_eager_us"] = timed(lambda: torch.relu(tx * ta + tb) * tc, torch.cuda.synchronize)
    except ImportError as error:
        skipped["torch"] = str(error)
    try:
        import cupy as cp

        cx, ca, cb, cc = (cp.asarray(h) for h in host)
        cy = cp.empty(1, cp.float32)

        @cp.fuse()
        def cfused(x, a, b, c):
            return cp.maximum(x * a + b, cp.float32(0)) * c

        cew = cp.ElementwiseKernel("float32 x, float32 a, float32 b, float32 c", "float32 y",
                                   "y = fmaxf(x * a + b, 0.0f) * c", "relu_axpb_c_ew")
        craw = cp.RawKernel(RAW_SOURCE, "relu_axpb_c")
        calls_cp = {
            "cupy_fuse_us": lambda: cfused(cx, ca, cb, cc),
            "cupy_elementwise_kernel_us": lambda: cew(cx, ca, cb, cc),
            "cupy_raw_kernel_us": lambda: craw((1,), (32,), (cx, ca, cb, cc, cy, one)),
        }
        for name, fn in calls_cp.items():
            r = fn()
            check(name, cp.asnumpy(cy if r is None else r))
        sync = cp.cuda.runtime.deviceSynchronize
        for name, fn in calls_cp.items():
            cases[name] = timed(fn, sync)
    except Exception as error:  # a broken peer install must not hide tessel's numbers
        skipped["cupy"] = f"{type(error).__name__}: {error}"
    try:
        np.row_stack = np.vstack  # numba-cuda still references the removed alias
        from numba import cuda

        @cuda.jit
        def nkernel(x, a, b, c, y):
            i = cuda.grid(1)
            if i < y.size:
                y[i] = max(x[i] * a[i] + b[i], 0.0) * c[i]

        nx, na, nb, nc = (cuda.to_device(h) for h in host)
        ny = cuda.device_array(1, np.float32)
        nkernel[1, 32](nx, na, nb, nc, ny)
        check("numba_jit_us", ny.copy_to_host())
        cases["numba_jit_us"] = timed(lambda: nkernel[1, 32](nx, na, nb, nc, ny), cuda.synchronize)
    except Exception as error:
        skipped["numba"] = f"{type(error).__name__}: {error}"

    runs = alternating_rounds(cases, rounds, tsync)
    out = {name: statistics.median(v) for name, v in runs.items()}
    out["rounds"], out["calls_per_round"], out["skipped"] = rounds, calls, skipped
    # Each round's ratio of a peer to tessel's matching kernel, then the median over rounds.
    pairs = {"cupy_fuse_over_tessel_fuse": ("cupy_fuse_us", "tessel_fuse_us"),
             "cupy_elementwise_over_tessel": ("cupy_elementwise_kernel_us", "tessel_elementwise_kernel_us"),
             "cupy_raw_over_tessel_raw": ("cupy_raw_kernel_us", "tessel_raw_kernel_us"),
             "numba_over_tessel_raw": ("numba_jit_us", "tessel_raw_kernel_us"),
             "torch_eager_over_tessel_fuse": ("torch_eager_us", "tessel_fuse_us"),
             "tessel_unfused_over_tessel_fuse": ("tessel_unfused_us", "tessel_fuse_us")}
    for key, (peer, mine) in pairs.items():
        if peer in runs:
            out[key] = statistics.median([p / m for p, m in zip(runs[peer], runs[mine])])
    out["tessel_fuse_minus_floor_us"] = statistics.median(
        [f - g for f, g in zip(runs["tessel_fuse_us"], runs["launch_floor_us"])])
    return out


def roundtrip_breakdown(torch, t):
    """The steps of torch -> tessel -> torch, each timed alone (per call, microseconds)."""
    stream = ts._tessel._dlpack_consumer_stream(t.device.index or 0)
    tx = ts.from_dlpack(t)
    sync = torch.cuda.synchronize
    calls = max(1000, CALLS // 4)
    producer = per_call_us(lambda: (t.__dlpack_device__(), t.__dlpack__(stream=stream, max_version=(1, 0))), sync, calls)
    with_import = per_call_us(
        lambda: ts._tessel._from_dlpack_capsule(t.__dlpack__(stream=stream, max_version=(1, 0))), sync, calls)
    producer_capsule = per_call_us(lambda: t.__dlpack__(stream=stream, max_version=(1, 0)), sync, calls)
    # The DLPack C exchange fast path (torch.Tensor.__dlpack_c_exchange_api__): ts.from_dlpack and
    # the round trip with it on (the default) and off (the __dlpack__ protocol).
    exchange = {}
    for label, on in (("on", True), ("off", False)):
        previous = ts._tessel._dlpack_exchange(on)
        try:
            before = ts._tessel._dlpack_fast_path_hits()
            assert ts.from_dlpack(t).data_ptr == t.data_ptr(), "ts.from_dlpack copied"
            exchange[f"exchange_{label}_fast_path_taken"] = ts._tessel._dlpack_fast_path_hits() > before
            exchange[f"exchange_{label}_tessel_from_dlpack_us"] = per_call_us(lambda: ts.from_dlpack(t), sync, calls)
            exchange[f"exchange_{label}_roundtrip_us"] = per_call_us(
                lambda: torch.from_dlpack(ts.from_dlpack(t)), sync, calls)
        finally:
            ts._tessel._dlpack_exchange(previous)
    if hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        # Both halves through the C tables: ts.from_dlpack and ts.export_to(.., torch.Tensor).
        assert ts.export_to(tx, torch.Tensor).data_ptr() == t.data_ptr(), "ts.export_to copied"
        exchange["export_to_torch_us"] = per_call_us(lambda: ts.export_to(tx, torch.Tensor), sync, calls)
        exchange["roundtrip_both_tables_us"] = per_call_us(
            lambda: ts.export_to(ts.from_dlpack(t), torch.Tensor), sync, calls)
    return {
        **exchange,
        "torch_has_exchange_api": hasattr(torch.Tensor, "__dlpack_c_exchange_api__"),
        "stream_passed_to_torch": stream,
        "torch_dlpack_device_and_dlpack_us": producer,
        "tessel_capsule_import_us": with_import - producer_capsule,
        "tessel_from_dlpack_us": per_call_us(lambda: ts.from_dlpack(t), sync, calls),
        "tessel_dlpack_export_us": per_call_us(lambda: tx.__dlpack__(stream=1, max_version=(1, 0)), sync, calls),
        "torch_from_dlpack_of_tessel_us": per_call_us(lambda: torch.from_dlpack(tx), sync, calls),
    }


def measure_torch():
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    x = torch.ones(1, device="cuda")
    y = torch.ones(1, device="cuda")
    assert (x + y).item() == 2.0
    add = per_call_us(lambda: x + y, torch.cuda.synchronize)

    def round_trip():
        return torch.from_dlpack(ts.from_dlpack(x))

    back = round_trip()
    assert back.data_ptr() == x.data_ptr(), "round trip copied"
    trip = per_call_us(round_trip, torch.cuda.synchronize, calls=max(1000, CALLS // 4))
    return {"add_us": add, "roundtrip_torch_tessel_torch_us": trip, "roundtrip_breakdown": roundtrip_breakdown(torch, x)}, None


def measure_cupy():
    try:
        import cupy as cp
    except ImportError:
        return None, "cupy is not installed"
    x = cp.ones(1, dtype=cp.float32)
    y = cp.ones(1, dtype=cp.float32)
    assert float((x + y)[0]) == 2.0
    return per_call_us(lambda: x + y, cp.cuda.runtime.deviceSynchronize), None


def measure_numba():
    np.row_stack = np.vstack  # numba-cuda still references the removed alias
    try:
        from numba import cuda, vectorize
    except ImportError:
        return None, "numba is not installed"

    @vectorize(["float32(float32, float32)"], target="cuda")
    def add(a, b):
        return a + b

    x = cuda.to_device(np.ones(1, np.float32))
    y = cuda.to_device(np.ones(1, np.float32))
    assert add(x, y).copy_to_host()[0] == 2.0
    return per_call_us(lambda: add(x, y), cuda.synchronize, calls=max(1000, CALLS // 10)), None


def main():
    results = {"calls": CALLS, "repeats": REPEATS, "python": sys.version.split()[0], "target_add_us": 5.0,
               "target_roundtrip_us": 10.0, "skipped": {}}
    if not ts.cuda_available():
        device_name = "cpu"
        results["device"] = "cpu (proxy: tessel's CPU backend; peers skipped)"
        results["tessel_add_us"], results["tessel_add_breakdown"] = measure_tessel(ts.Device("cpu"))
        print(f"python_overhead: no CUDA device ({ts.cuda_unavailable_reason()}); CPU backend proxy")
    else:
        device_name = ts.device_name(0)
        results["device"] = device_name
        results["tessel_add_us"], results["tessel_add_breakdown"] = measure_tessel(ts.Device("cuda:0"))
        torch_result, why = measure_torch()
        if torch_result:
            import torch
            results["add_interleaved"] = interleaved_add(ts.Device("cuda:0"), torch)
            results["torch_add_us"] = torch_result["add_us"]
            results["roundtrip_torch_tessel_torch_us"] = torch_result["roundtrip_torch_tessel_torch_us"]
            results["roundtrip_breakdown"] = torch_result["roundtrip_breakdown"]
        else:
            results["skipped"]["torch"] = why
        results["kernels_interleaved"] = interleaved_kernels(ts.Device("cuda:0"))
        for name, fn in (("cupy", measure_cupy), ("numba", measure_numba)):
            try:
                value, why = fn()
            except Exception as error:  # a broken peer install must not hide tessel's numbers
                value, why = None, f"{type(error).__name__}: {error}"
            if value is None:
                results["skipped"][name] = why
            else:
                results[f"{name}_add_us"] = value
    # The verdict comes from the alternating rounds when they ran: 41 rounds spread over the run
    # against the one burst of tessel_add_us, which a minute of slow host decides alone (this VM's
    # host speed drifts by up to 1.5x). Both numbers are kept.
    rounds = results.get("add_interleaved")
    results["tessel_add_burst_meets_target"] = results["tessel_add_us"] <= 5.0
    results["tessel_add_verdict_from"] = "add_interleaved.tessel_add_us" if rounds else "tessel_add_us"
    results["tessel_add_meets_target"] = (rounds["tessel_add_us"] if rounds else results["tessel_add_us"]) <= 5.0
    if "roundtrip_torch_tessel_torch_us" in results:
        results["roundtrip_meets_target"] = results["roundtrip_torch_tessel_torch_us"] <= 10.0
    both = results.get("roundtrip_breakdown", {}).get("roundtrip_both_tables_us")
    if both is not None:  # torch -> ts.from_dlpack -> ts.export_to(.., torch.Tensor)
        results["roundtrip_both_tables_us"] = both
        results["roundtrip_both_tables_meets_target"] = both <= 10.0
    for key, value in results.items():
        if key.endswith("_us"):
            print(f"  {key:36s} {value:8.2f} us")
    for group in ("tessel_add_breakdown", "roundtrip_breakdown", "add_interleaved", "kernels_interleaved"):
        for key, value in results.get(group, {}).items():
            if key.endswith("_us"):
                print(f"  {group + '.' + key:58s} {value:8.2f} us")
            elif key.endswith("_over_tessel") or "_over_tessel_" in key:
                print(f"  {group + '.' + key:58s} {value:8.2f}x")
    for name, why in results["skipped"].items():
        print(f"  {name}: skipped: {why}")
    merge_results("python_overhead", results, device_name)


if __name__ == "__main__":
    main()
