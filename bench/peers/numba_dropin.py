"""Numba programs under numba-cuda and under tessel.numba (the drop-in: only the import differs),
in one process on a GPU machine.

The programs (build() below, written once against a `cuda` module and a `numba` module) are
those of tests/python/test_numba_programs.py at GPU sizes: a grid-stride vector add, the
shared-memory tiled matmul, a shared-memory tree reduction, Monte Carlo pi with xoroshiro128p, a
CUDA ufunc (vectorize) and gufunc (guvectorize) on device arrays, cuda.reduce, an atomic
histogram, a warp-shuffle sum, a local-array median filter, copies and kernels on 4 streams, and
a one-element kernel with 3 arrays and a scalar (the launch overhead alone).

Per program and side: the compile time (the first run in this process, tessel with an empty disk
cache: TESSEL_CACHE_DIR is a new temporary folder unless --warm-cache), the host time per launch
(as the compiler issue's target measures it: back-to-back runs, wall time over the launches made;
also, as host_idle_us_per_launch, the median of single runs started with the queue empty),
and the GPU time (CUDA events around a run, torch.cuda.Event where PyTorch is installed, else the
side's own cuda.event(); the multi-stream program: wall time to its streams' synchronize), as
medians over rounds in which the two sides alternate. Each program's result is checked against
NumPy, and tessel's against Numba's (Monte Carlo pi: the same numbers, from the same generator).
Targets (the compiler issue): GPU time >= 1.0x Numba; host time per launch <= 0.4x Numba and
<= 4 us; first compile <= 0.5x Numba. Beside the rows, launch_floor_us: the one-element kernel
launched back to back through tessel.kernel directly and through CuPy's RawKernel, in the same
run (what this host's launches cost without the drop-in layer).

--dry-run: the tessel side only, on tessel's CPU backend, at small sizes (no GPU, no Numba, no
PyTorch needed); it prints the rows and writes nothing unless --write is given.

Results merge into bench/results/<device>-<date>.json under "numba_dropin"."""
import argparse
import importlib
import json
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_results import merge_results, optional_import  # noqa: E402

TPB = 16  # the matmul's tile


# ---- the programs ------------------------------------------------------------------------------------
def build(cuda, numba, sizes):
    """{name: setup} for one side; setup(data) -> Program. `cuda` is numba.cuda or
    tessel.numba.cuda, `numba` numba or tessel.numba: the same source runs on both."""
    random = importlib.import_module(cuda.__name__ + ".random")
    xoroshiro128p_uniform_float32 = random.xoroshiro128p_uniform_float32
    float32, int32 = numba.float32, numba.int32

    @cuda.jit
    def vector_add(a, b, c):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, c.shape[0], stride):
            c[i] = a[i] + b[i]

    @cuda.jit
    def tiny(x, y, out, a):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a * x[i] + y[i]

    @cuda.jit
    def fast_matmul(A, B, C):
        sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        x, y = cuda.grid(2)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        bpg = cuda.gridDim.x
        tmp = float32(0.)
        for i in range(bpg):
            sA[ty, tx] = 0
            sB[ty, tx] = 0
            if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
                sA[ty, tx] = A[y, tx + i * TPB]
            if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
                sB[ty, tx] = B[ty + i * TPB, x]
            cuda.syncthreads()
            for j in range(TPB):
                tmp += sA[ty, j] * sB[j, tx]
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = tmp

    @cuda.jit
    def block_sums(x, partial):
        shr = cuda.shared.array(256, float32)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        shr[tid] = x[i] if i < x.size else float32(0)
        cuda.syncthreads()
        s = cuda.blockDim.x // 2
        while s > 0:
            if tid < s:
                shr[tid] += shr[tid + s]
            cuda.syncthreads()
            s //= 2
        if tid == 0:
            partial[cuda.blockIdx.x] = shr[0]

    @cuda.jit
    def compute_pi(rng_states, iterations, out):
        thread_id = cuda.grid(1)
        inside = 0
        for i in range(iterations):
            x = xoroshiro128p_uniform_float32(rng_states, thread_id)
            y = xoroshiro128p_uniform_float32(rng_states, thread_id)
            if x ** 2 + y ** 2 <= 1.0:
                inside += 1
        out[thread_id] = 4.0 * inside / iterations

    # Declared signatures: Numba compiles these when decorated, so their compile time counts
    # the decoration (eager_ms) as well as the first call.
    eager_ms = {}
    t0 = time.perf_counter()

    @numba.vectorize(["float32(float32, float32, float32)"], target="cuda")
    def discriminant(a, b, c):
        return math.sqrt(b ** 2 - 4 * a * c)

    eager_ms["vectorize"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()

    @numba.guvectorize(["void(float32[:,:], float32[:,:], float32[:,:])"], "(m,n),(n,p)->(m,p)", target="cuda")
    def matmulcore(A, B, C):
        m, n = A.shape
        n, p = B.shape
        for i in range(m):
            for j in range(p):
                C[i, j] = 0
                for k in range(n):
                    C[i, j] += A[i, k] * B[k, j]

    eager_ms["guvectorize"] = (time.perf_counter() - t0) * 1e3

    @cuda.reduce
    def sum_reduce(a, b):
        return a + b

    @cuda.jit
    def histogram(x, counts):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, x.shape[0], stride):
            b = int(x[i] * 256.0)
            if b > 255:
                b = 255
            cuda.atomic.add(counts, b, 1)

    @cuda.jit
    def warp_sum(x, out):
        v = float32(0.0)
        for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
            v += x[i]
        offset = 16
        while offset > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if cuda.laneid == 0:
            cuda.atomic.add(out, 0, v)

    @cuda.jit
    def median3(x, out):
        i = cuda.grid(1)
        if 1 <= i < x.size - 1:
            w = cuda.local.array(3, dtype=float32)
            for k in range(3):
                w[k] = x[i - 1 + k]
            for a in range(3):
                for b in range(2 - a):
                    if w[b] > w[b + 1]:
                        w[b], w[b + 1] = w[b + 1], w[b]
            out[i] = w[1]

    @cuda.jit
    def increment(a, value):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += value

    n, m = sizes["n"], sizes["matmul"]
    SM = sizes["blocks"]

    def p_vector_add(d):
        a, b = cuda.to_device(d["x"]), cuda.to_device(d["y"])
        c = cuda.device_array_like(a)
        return Program(lambda: vector_add[SM, 256](a, b, c), lambda: c.copy_to_host(), d["x"] + d["y"])

    def p_tiny(d):
        x = cuda.to_device(np.ones(1, np.float32))
        y = cuda.to_device(np.ones(1, np.float32))
        o = cuda.device_array(1, np.float32)
        a = np.float32(2.0)
        return Program(lambda: tiny[1, 32](x, y, o, a), lambda: o.copy_to_host(), np.array([3.0], np.float32))

    def p_matmul(d):
        A, B = cuda.to_device(d["A"]), cuda.to_device(d["B"])
        C = cuda.device_array((m, m), np.float32)
        g = (m + TPB - 1) // TPB
        return Program(lambda: fast_matmul[(g, g), (TPB, TPB)](A, B, C), lambda: C.copy_to_host(),
                       d["A"] @ d["B"], rtol=1e-4)

    def p_block_sums(d):
        x = cuda.to_device(d["x"])
        blocks = (n + 255) // 256
        partial = cuda.device_array(blocks, np.float32)
        want = np.pad(d["x"], (0, blocks * 256 - n)).reshape(blocks, 256).sum(axis=1, dtype=np.float64)
        return Program(lambda: block_sums[blocks, 256](x, partial), lambda: partial.copy_to_host(), want, rtol=1e-5)

    def p_monte_carlo_pi(d):
        threads = sizes["pi_threads"]
        states = random.create_xoroshiro128p_states(threads, seed=1)
        out = cuda.device_array(threads, np.float32)
        return Program(lambda: compute_pi[threads // 128, 128](states, 100, out), lambda: out.copy_to_host(),
                       None, check=lambda r: abs(float(r.mean()) - math.pi) < 0.02)

    def p_vectorize(d):
        A, B, C = cuda.to_device(d["x"]), cuda.to_device(d["y"] + 10), cuda.to_device(d["z"])
        out = cuda.device_array_like(A)
        return Program(lambda: discriminant(A, B, C, out=out), lambda: out.copy_to_host(),
                       np.sqrt((d["y"] + 10) ** 2 - 4 * d["x"] * d["z"]), rtol=1e-6)

    def p_guvectorize(d):
        A, B = cuda.to_device(d["bA"]), cuda.to_device(d["bB"])
        out = cuda.device_array((d["bA"].shape[0], 4, 4), np.float32)
        return Program(lambda: matmulcore(A, B, out=out), lambda: out.copy_to_host(), d["bA"] @ d["bB"], rtol=1e-5)

    def p_cuda_reduce(d):
        x = cuda.to_device(d["x"])
        res = cuda.device_array(1, np.float32)
        return Program(lambda: sum_reduce(x, res=res), lambda: res.copy_to_host(),
                       np.array([d["x"].sum(dtype=np.float64)]), rtol=1e-4, launches=2)

    def p_histogram(d):
        x = cuda.to_device(d["x"])
        counts = cuda.to_device(np.zeros(256, np.int32))

        def run():
            counts[:] = 0
            histogram[SM, 256](x, counts)
        return Program(run, lambda: counts.copy_to_host(), np.histogram(d["x"], 256, (0, 1))[0], launches=2)

    def p_warp_sum(d):
        x = cuda.to_device(d["x"])
        out = cuda.to_device(np.zeros(1, np.float32))

        def run():
            out[:] = 0
            warp_sum[SM, 256](x, out)
        return Program(run, lambda: out.copy_to_host(), np.array([d["x"].sum(dtype=np.float64)]), rtol=1e-4,
                       launches=2)

    def p_median3(d):
        x = cuda.to_device(d["x"])
        out = cuda.to_device(np.zeros(n, np.float32))
        xs = d["x"]
        want = np.zeros(n, np.float32)
        want[1:-1] = np.median(np.stack([xs[:-2], xs[1:-1], xs[2:]]), axis=0)
        return Program(lambda: median3[(n + 255) // 256, 256](x, out), lambda: out.copy_to_host(), want)

    def p_streams(d):
        k = 4
        chunks = np.split(d["x"][: n - n % k], k)
        streams = [cuda.stream() for _ in range(k)]
        hosts = [cuda.pinned_array(c.shape, np.float32) for c in chunks]
        for h, c in zip(hosts, chunks):
            h[:] = c
        outs = [cuda.pinned_array(c.shape, np.float32) for c in chunks]

        def run():
            for s, h, o in zip(streams, hosts, outs):
                dev = cuda.to_device(h, stream=s)
                increment[(h.size + 255) // 256, 256, s](dev, np.float32(1))
                dev.copy_to_host(o, stream=s)
            for s in streams:
                s.synchronize()
        return Program(run, lambda: np.concatenate(outs), np.concatenate(chunks) + 1, launches=k, wall=True)

    programs = {"vector_add": p_vector_add, "tiny_launch": p_tiny, "fast_matmul": p_matmul,
            "block_reduction": p_block_sums, "monte_carlo_pi": p_monte_carlo_pi, "vectorize": p_vectorize,
            "guvectorize": p_guvectorize, "cuda_reduce": p_cuda_reduce, "atomic_histogram": p_histogram,
            "warp_shuffle_sum": p_warp_sum, "local_array_median": p_median3, "multi_stream": p_streams}
    return programs, eager_ms


class Program:
    def __init__(self, run, result, want, rtol=0.0, check=None, launches=1, wall=False):
        self.run, self.result, self.want, self.rtol = run, result, want, rtol
        self.check_fn, self.launches, self.wall = check, launches, wall

    def check(self):
        got = self.result()
        if self.check_fn is not None:
            return bool(self.check_fn(got)), got
        if self.rtol:
            return bool(np.allclose(got, self.want, rtol=self.rtol, atol=self.rtol)), got
        return bool(np.array_equal(got, self.want)), got


def make_data(sizes):
    rng = np.random.default_rng(0)
    n, m = sizes["n"], sizes["matmul"]
    return {"x": rng.random(n, dtype=np.float32), "y": rng.random(n, dtype=np.float32),
            "z": rng.random(n, dtype=np.float32), "A": rng.random((m, m), dtype=np.float32),
            "B": rng.random((m, m), dtype=np.float32), "bA": rng.random((sizes["batch"], 4, 4), dtype=np.float32),
            "bB": rng.random((sizes["batch"], 4, 4), dtype=np.float32)}


GPU_SIZES = {"n": 1 << 24, "matmul": 1024, "blocks": 132 * 8, "pi_threads": 1 << 16, "batch": 1 << 18}
DRY_SIZES = {"n": 1 << 16, "matmul": 128, "blocks": 64, "pi_threads": 1 << 10, "batch": 1 << 10}


# ---- the sides ---------------------------------------------------------------------------------------
class Side:
    def __init__(self, name, cuda, numba, sizes, events):
        self.name, self.cuda = name, cuda
        self.programs, self.eager_ms = build(cuda, numba, sizes)
        self.events = events

    def sync(self):
        self.cuda.synchronize()

    def make_events(self):
        if self.events == "torch":
            import torch

            return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        return self.cuda.event(), self.cuda.event()


def tessel_side(sizes, events):
    import tessel.numba as numba
    from tessel.numba import cuda

    return Side("tessel", cuda, numba, sizes, events)


def numba_side(sizes, events):
    np.row_stack = getattr(np, "row_stack", np.vstack)  # numba-cuda still reads it
    if optional_import("numba.cuda") is None:
        return None
    import numba
    from numba import cuda

    if not cuda.is_available():
        return None
    return Side("numba", cuda, numba, sizes, events)


def first_run_ms(side, program):
    side.sync()
    t0 = time.perf_counter()
    program.run()
    side.sync()
    return (time.perf_counter() - t0) * 1e3


def host_us(side, program, calls):
    """Host time per launch: `calls` runs back to back (the queue drains only at the end), and the
    median of single runs, each started with the queue empty."""
    side.sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        program.run()
    back_to_back = (time.perf_counter() - t0) / calls
    side.sync()
    times = []
    for _ in range(calls):
        side.sync()
        t0 = time.perf_counter()
        program.run()
        times.append(time.perf_counter() - t0)
    side.sync()
    return back_to_back * 1e6 / program.launches, statistics.median(times) * 1e6 / program.launches


def device_ms(side, program, repeats, dry_run):
    times = []
    if dry_run or program.wall:
        for _ in range(repeats):
            side.sync()
            t0 = time.perf_counter()
            program.run()
            side.sync()
            times.append((time.perf_counter() - t0) * 1e3)
        return times
    start, stop = side.make_events()
    for _ in range(repeats):
        start.record()
        program.run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def measure(sides, names, rounds, repeats, host_calls, dry_run):
    rows = {}
    data = make_data(DRY_SIZES if dry_run else GPU_SIZES)
    for name in names:
        progs, row, results = {}, {}, {}
        for side in sides:
            progs[side.name] = side.programs[name](data)
            row[f"{side.name}_compile_ms"] = round(first_run_ms(side, progs[side.name]) + side.eager_ms.get(name, 0.0), 2)
            ok, results[side.name] = progs[side.name].check()
            row[f"{side.name}_check"] = ok
        if "numba" in results and "tessel" in results:
            got, ref = np.asarray(results["tessel"], np.float64), np.asarray(results["numba"], np.float64)
            row["tessel_matches_numba"] = bool(np.allclose(got, ref, rtol=1e-4, atol=1e-4))
        host = {s.name: [] for s in sides}
        idle = {s.name: [] for s in sides}
        dev = {s.name: [] for s in sides}
        for r in range(rounds):
            for side in (sides if r % 2 == 0 else sides[::-1]):
                b2b, single = host_us(side, progs[side.name], host_calls)
                host[side.name].append(b2b)
                idle[side.name].append(single)
                dev[side.name] += device_ms(side, progs[side.name], repeats, dry_run)
        what = "wall" if dry_run or progs[sides[0].name].wall else "gpu"
        for side in sides:
            row[f"{side.name}_host_us_per_launch"] = round(statistics.median(host[side.name]), 3)
            row[f"{side.name}_host_idle_us_per_launch"] = round(statistics.median(idle[side.name]), 3)
            row[f"{side.name}_{what}_ms"] = round(statistics.median(dev[side.name]), 4)
            row[f"{side.name}_{what}_range_ms"] = [round(min(dev[side.name]), 4), round(max(dev[side.name]), 4)]
        if len(sides) == 2:
            row["tessel_speed_vs_numba"] = round(row[f"numba_{what}_ms"] / row[f"tessel_{what}_ms"], 3)
            row["tessel_host_over_numba"] = round(row["tessel_host_us_per_launch"] / row["numba_host_us_per_launch"], 3)
            row["tessel_compile_over_numba"] = round(row["tessel_compile_ms"] / row["numba_compile_ms"], 3)
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    return rows


def launch_floor_us(calls=2000, rounds=7):
    """The same one-element kernel (3 arrays and a scalar) launched back to back through tessel.kernel
    directly (the compiler issue's path, under tessel.numba's dispatcher) and through CuPy's RawKernel
    (a driver launch from Python), in alternating rounds: what the host takes apart from the layer."""
    import tessel as ts
    from tessel import kernel as tk

    @ts.jit
    def tiny_kernel(x, y, out, a):
        i = tk.grid(1)
        if i < 1:
            out[i] = x[i] + a * y[i]

    x, y, o = (ts.ones(1, dtype=ts.float32, device="cuda") for _ in range(3))
    launchers = {"tessel_kernel": lambda k=tiny_kernel[1, 32]: k(x, y, o, np.float32(2.0))}
    cp = optional_import("cupy")
    if cp is not None:
        raw = cp.RawKernel(r"""extern "C" __global__ void tiny(const float* x, const float* y, float* out, float a) {
            if (blockIdx.x * blockDim.x + threadIdx.x < 1) out[0] = x[0] + a * y[0]; }""", "tiny")
        cx, cy, co = (cp.ones(1, dtype=cp.float32) for _ in range(3))
        launchers["cupy_rawkernel"] = lambda: raw((1,), (32,), (cx, cy, co, np.float32(2.0)))
    times = {n: [] for n in launchers}
    for r in range(rounds):
        for n, f in (launchers.items() if r % 2 == 0 else reversed(launchers.items())):
            f()
            ts.synchronize()
            if cp is not None:
                cp.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            times[n].append((time.perf_counter() - t0) / calls * 1e6)
    ts.synchronize()
    return {n: round(statistics.median(v), 3) for n, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="tessel only, on the CPU backend, small sizes")
    p.add_argument("--rounds", type=int, default=6, help="alternating rounds (default 6)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per side and round (default 5)")
    p.add_argument("--host-calls", type=int, default=50, help="launches timed for the host time, per round")
    p.add_argument("--only", default="", help="comma-separated program names (default: all)")
    p.add_argument("--warm-cache", action="store_true", help="keep tessel's disk cache (compile = cache load)")
    p.add_argument("--write", action="store_true", help="--dry-run: also write the results (key numba_dropin_cpu)")
    args = p.parse_args()
    cache = None
    if not args.warm_cache:
        cache = tempfile.TemporaryDirectory(prefix="tessel-dropin-cache-")
        os.environ["TESSEL_CACHE_DIR"] = cache.name  # before tessel is imported: a cold first compile
    import tessel as ts

    if args.dry_run:
        from tessel.numba import cuda

        cuda.select_device("cpu")
        sides = [tessel_side(DRY_SIZES, "wall")]
    else:
        if not ts.cuda_available():
            sys.exit("numba_dropin: no CUDA device (--dry-run runs the tessel side on the CPU backend)")
        events = "torch" if optional_import("torch") is not None else "own"
        nb = numba_side(GPU_SIZES, events)
        sides = ([nb] if nb is not None else []) + [tessel_side(GPU_SIZES, events)]
        if nb is None:
            print("numba_dropin: numba-cuda is not usable here; timing tessel alone")
    names = [n for n in sides[0].programs if not args.only or n in args.only.split(",")]
    rows = measure(sides, names, args.rounds, args.repeats, args.host_calls, args.dry_run)
    floor = None if args.dry_run else launch_floor_us()
    if floor:
        print("launch floor (us per launch, back to back)", json.dumps(floor), flush=True)
    result = {"rows": rows, "sides": [s.name for s in sides], "rounds": args.rounds, "repeats": args.repeats,
              "launch_floor_us": floor,
              "cold_tessel_cache": not args.warm_cache,
              "targets": {"gpu_speed_vs_numba": ">= 1.0", "host_over_numba": "<= 0.4 and <= 4 us",
                          "compile_over_numba": "<= 0.5"}}
    if args.dry_run:
        result["device"] = "cpu (dry run)"
        if args.write:
            merge_results("numba_dropin_cpu", result, "cpu", merge_rows="rows")
    else:
        result["device"] = ts.device_name(0)
        result["events"] = sides[-1].events
        merge_results("numba_dropin", result, ts.device_name(0), merge_rows="rows")
    if cache is not None:
        cache.cleanup()


if __name__ == "__main__":
    main()
