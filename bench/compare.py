"""The suite's workloads in one process with tessel (Python), PyTorch, CuPy and Numba.

    python3 bench/compare.py [--quick] [--only NAME ...] [--libraries LIB ...] [--json FILE] [--no-charts]

Prints a side-by-side table with tessel's speed over the best peer's, merges the results into
bench/results/<device>-<date>.json under "compare" and draws two charts next to it: bars per
workload normalized to the best peer, and a roofline of tessel's kernels against the ceilings
measured in the same run.

Rules: inputs are random; every implementation's output is checked against a NumPy reference
before it is timed, and one that fails its check is reported as FAILED, not timed; timed
regions are warmed up, bracketed by CUDA events on the default stream (all four libraries
queue there by default) and reduced to the median of repeats. A library that is not installed
is skipped with a note; one that raises is reported and the run goes on.
"""
import argparse
import datetime
import json
import math
import os
import re
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = ("torch", "cupy", "numba")


# ---------------------------------------------------------------- libraries

class Libraries:
    def __init__(self, wanted=("tessel", *PEERS)):
        self.mods, self.notes = {}, {}
        for name in ("tessel", *PEERS):
            if name in wanted:
                self._load(name, getattr(self, "_" + name))
            else:
                self.notes[name] = "not asked for (--libraries)"

    def _load(self, name, loader):
        try:
            self.mods[name] = loader()
        except Exception as e:  # not installed, or no GPU for it
            self.notes[name] = f"{type(e).__name__}: {e}".splitlines()[0][:160]

    @staticmethod
    def _tessel():
        import tessel as ts
        if not ts.cuda.is_available():
            raise RuntimeError("tessel sees no CUDA device")
        return ts

    @staticmethod
    def _torch():
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        return torch

    @staticmethod
    def _cupy():
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        return cupy

    @staticmethod
    def _numba():
        if not hasattr(np, "row_stack"):  # numba-cuda still looks it up under numpy 2.5
            np.row_stack = np.vstack
        from numba import cuda
        if not cuda.is_available():
            raise RuntimeError("numba sees no CUDA device")
        return cuda

    def has(self, name):
        return name in self.mods

    def __getitem__(self, name):
        return self.mods[name]


def synchronize(libs):
    for name in ("torch", "cupy", "tessel"):
        if libs.has(name):
            if name == "torch":
                libs["torch"].cuda.synchronize()
            elif name == "cupy":
                libs["cupy"].cuda.runtime.deviceSynchronize()
            else:
                libs["tessel"].cuda.synchronize()
            return
    if libs.has("numba"):
        libs["numba"].synchronize()


class Timer:
    """Median of event-timed repeats on the legacy default stream (shared by all four libraries)."""

    def __init__(self, libs, quick):
        self.libs, self.quick = libs, quick
        if libs.has("torch"):
            torch = libs["torch"]
            self.event = lambda: torch.cuda.Event(enable_timing=True)
            self.elapsed = lambda a, b: (b.synchronize(), a.elapsed_time(b))[1]
        elif libs.has("cupy"):
            cp = libs["cupy"]
            self.event = lambda: cp.cuda.Event()
            self.elapsed = lambda a, b: (b.synchronize(), cp.cuda.get_elapsed_time(a, b))[1]
        else:
            self.event = None

    def median_ms(self, fn, repeats=None, warmup=3, inner=1):
        repeats = repeats or (7 if self.quick else 25)
        for _ in range(warmup):
            fn()
        synchronize(self.libs)
        times = []
        for _ in range(repeats):
            if self.event is None:
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                synchronize(self.libs)
                times.append((time.perf_counter() - t0) * 1e3 / inner)
                continue
            start, stop = self.event(), self.event()
            start.record()
            for _ in range(inner):
                fn()
            stop.record()
            times.append(self.elapsed(start, stop) / inner)
        return sorted(times)[len(times) // 2]

    def host_us_per_call(self, fn, calls=2000):
        """Wall time per call of back-to-back calls, the device synchronized at the end."""
        for _ in range(50):
            fn()
        synchronize(self.libs)
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            synchronize(self.libs)
            best.append((time.perf_counter() - t0) * 1e6 / calls)
        return sorted(best)[len(best) // 2]


# ---------------------------------------------------------------- helpers

def to_numpy(x):
    if hasattr(x, "get"):  # cupy
        return x.get()
    if hasattr(x, "cpu"):  # torch
        return x.detach().float().cpu().numpy() if str(x.dtype) == "torch.bfloat16" else x.detach().cpu().numpy()
    if hasattr(x, "copy_to_host"):  # numba
        return x.copy_to_host()
    return np.asarray(x)


def rel_error(got, want):
    got = np.asarray(got, dtype=np.complex128 if np.iscomplexobj(want) else np.float64)
    want = np.asarray(want)
    if got.shape != want.shape:
        return math.inf
    denom = np.linalg.norm(want.ravel()) or 1.0
    err = np.linalg.norm((got - want).ravel()) / denom
    return math.inf if not np.isfinite(err) else float(err)


class Result:
    def __init__(self, workload, variant, lib, status, ms=None, rate=None, unit="", note="", flops=None, bytes_=None):
        self.__dict__.update(workload=workload, variant=variant, lib=lib, status=status, ms=ms, rate=rate,
                             unit=unit, note=note, flops=flops, bytes=bytes_)


def run_impl(timer, workload, variant, lib, build, reference, tol, work, timed_host=False):
    """build() -> (fn, result_getter). Checks the result, then times fn."""
    try:
        fn, result = build()
        fn()
        synchronize(timer.libs)
        err = rel_error(to_numpy(result()), reference)
        if not err <= tol:
            return Result(workload, variant, lib, "FAILED", note=f"relative error {err:.3g} > {tol:g}")
        if timed_host:
            ms = timer.host_us_per_call(fn) / 1e3
        else:
            ms = timer.median_ms(fn)
        flops, bytes_ = work
        if flops and flops / bytes_ > 4:
            rate, unit = flops / ms / 1e9, "TFLOP/s"
        else:
            rate, unit = bytes_ / ms / 1e6, "GB/s"
        return Result(workload, variant, lib, "ok", ms, rate, unit, flops=flops, bytes_=bytes_)
    except Exception as e:
        return Result(workload, variant, lib, "crashed", note=f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")


def skipped(workload, variant, lib, why):
    return Result(workload, variant, lib, "skipped", note=why)


# ---------------------------------------------------------------- workloads

def w_tiny_add(libs, timer, quick):
    a = np.random.rand(1).astype(np.float32)
    ref = a + a
    out = []
    impls = {}
    if libs.has("tessel"):
        ts = libs["tessel"]
        impls["tessel"] = lambda: (lambda x: ((lambda: x + x), lambda: x + x))(ts.asarray(a, device="cuda"))
    if libs.has("torch"):
        torch = libs["torch"]
        impls["torch"] = lambda: (lambda x: ((lambda: x + x), lambda: x + x))(torch.from_numpy(a).cuda())
    if libs.has("cupy"):
        cp = libs["cupy"]
        impls["cupy"] = lambda: (lambda x: ((lambda: x + x), lambda: x + x))(cp.asarray(a))
    if libs.has("numba"):
        cuda = libs["numba"]
        kernel = _numba_add_kernel(cuda)
        def build_numba():
            x, y = cuda.to_device(a), cuda.device_array_like(a)
            return (lambda: kernel[1, 32](x, x, y)), (lambda: y)
        impls["numba"] = build_numba
    for lib, build in impls.items():
        r = run_impl(timer, "tiny_add", "1 element, per call", lib, build, ref, 1e-6, (1, 12), timed_host=True)
        if r.status == "ok":
            r.rate, r.unit = r.ms * 1e3, "us/call"
        out.append(r)
    return out


_numba_kernels = {}


def _numba_add_kernel(cuda):
    if "add" not in _numba_kernels:
        @cuda.jit
        def add(x, y, z):
            i = cuda.grid(1)
            if i < z.size:
                z[i] = x[i] + y[i]
        _numba_kernels["add"] = add
    return _numba_kernels["add"]


def _numba_chain_kernel(cuda):
    if "chain" not in _numba_kernels:
        @cuda.jit
        def chain(x, b, c, a, y):
            i = cuda.grid(1)
            if i < y.size:
                v = a * x[i] + b[i]
                y[i] = (v if v > 0 else 0.0) * c[i]
        _numba_kernels["chain"] = chain
    return _numba_kernels["chain"]


def w_vector_add(libs, timer, quick):
    n = 10_000_000
    a, b = (np.random.rand(n).astype(np.float32) * 2 - 1 for _ in range(2))
    ref = a + b
    work = (n, 3 * n * 4)
    builds = {}
    if libs.has("tessel"):
        ts = libs["tessel"]
        def build_tessel():
            x, y = ts.asarray(a, device="cuda"), ts.asarray(b, device="cuda")
            box = [None]
            def fn():
                box[0] = ts.add(x, y)
            return fn, lambda: box[0]
        builds["tessel"] = build_tessel
    if libs.has("torch"):
        torch = libs["torch"]
        def build_torch():
            x, y = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            z = torch.full_like(x, float("nan"))
            return (lambda: torch.add(x, y, out=z)), (lambda: z)
        builds["torch"] = build_torch
    if libs.has("cupy"):
        cp = libs["cupy"]
        def build_cupy():
            x, y = cp.asarray(a), cp.asarray(b)
            z = cp.full_like(x, cp.nan)
            return (lambda: cp.add(x, y, out=z)), (lambda: z)
        builds["cupy"] = build_cupy
    if libs.has("numba"):
        cuda = libs["numba"]
        kernel = _numba_add_kernel(cuda)
        def build_numba():
            x, y, z = cuda.to_device(a), cuda.to_device(b), cuda.to_device(np.full(n, np.nan, np.float32))
            blocks = (n + 255) // 256
            return (lambda: kernel[blocks, 256](x, y, z)), (lambda: z)
        builds["numba"] = build_numba
    return [run_impl(timer, "vector_add", "1e7 float32", lib, build, ref, 1e-6, work) for lib, build in builds.items()]


def w_fused_chain(libs, timer, quick):
    n = 20_000_000 if quick else 100_000_000
    x, b, c = (np.random.rand(n).astype(np.float32) * 2 - 1 for _ in range(3))
    a = np.float32(1.75)
    ref = np.maximum(a * x + b, 0) * c
    work = (4 * n, 4 * n * 4)
    variant = f"relu(a*x+b)*c, {n:.0e} float32"
    builds = {}
    if libs.has("tessel"):
        ts = libs["tessel"]
        def build_tessel():
            @ts.fuse
            def chain(x, b, c):
                return ts.maximum(x * 1.75 + b, 0) * c
            dx, db, dc = (ts.asarray(v, device="cuda") for v in (x, b, c))
            box = [None]
            def fn():
                box[0] = chain(dx, db, dc)
            return fn, lambda: box[0]
        builds["tessel"] = build_tessel
    if libs.has("torch"):
        torch = libs["torch"]
        def build_torch():
            dx, db, dc = (torch.from_numpy(v).cuda() for v in (x, b, c))
            box = [None]
            def fn():
                box[0] = torch.relu(1.75 * dx + db) * dc
            return fn, lambda: box[0]
        builds["torch"] = build_torch
    if libs.has("cupy"):
        cp = libs["cupy"]
        def build_cupy():
            @cp.fuse()
            def chain(x, b, c):
                return cp.maximum(x * np.float32(1.75) + b, np.float32(0)) * c
            dx, db, dc = (cp.asarray(v) for v in (x, b, c))
            box = [None]
            def fn():
                box[0] = chain(dx, db, dc)
            return fn, lambda: box[0]
        builds["cupy"] = build_cupy
    if libs.has("numba"):
        cuda = libs["numba"]
        kernel = _numba_chain_kernel(cuda)
        def build_numba():
            dx, db, dc = (cuda.to_device(v) for v in (x, b, c))
            y = cuda.to_device(np.full(n, np.nan, np.float32))
            blocks = (n + 255) // 256
            return (lambda: kernel[blocks, 256](dx, db, dc, a, y)), (lambda: y)
        builds["numba"] = build_numba
    return [run_impl(timer, "fused_chain", variant, lib, build, ref, 1e-6, work) for lib, build in builds.items()]


def w_matmul_fp32(libs, timer, quick):
    n, reps = 1024, 100
    a, b = (np.random.rand(n, n).astype(np.float32) - 0.5 for _ in range(2))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = []
    for mode, tol in (("fp32", 1e-5), ("tf32", 3e-3)):
        variant = f"1024^2 x{reps}, {mode}"
        work = (2 * n ** 3 * reps, 3 * n * n * 4 * reps)
        builds = {}
        if libs.has("tessel") and hasattr(libs["tessel"], "matmul"):
            ts = libs["tessel"]
            def build_tessel(mode=mode):
                da, db = ts.asarray(a, device="cuda"), ts.asarray(b, device="cuda")
                box = [None]
                def fn():
                    for _ in range(reps):
                        box[0] = ts.matmul(da, db, compute=mode)
                return fn, lambda: box[0]
            builds["tessel"] = build_tessel
        if libs.has("torch"):
            torch = libs["torch"]
            def build_torch(mode=mode):
                da, db = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
                box = [None]
                def fn():
                    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
                    for _ in range(reps):
                        box[0] = da @ db
                    torch.backends.cuda.matmul.allow_tf32 = False
                return fn, lambda: box[0]
            builds["torch"] = build_torch
        if libs.has("cupy") and mode == "fp32":
            cp = libs["cupy"]
            def build_cupy():
                da, db = cp.asarray(a), cp.asarray(b)
                box = [None]
                def fn():
                    for _ in range(reps):
                        box[0] = da @ db
                return fn, lambda: box[0]
            builds["cupy"] = build_cupy
        for lib, build in builds.items():
            out.append(run_impl(timer, "matmul_fp32", variant, lib, build, ref, tol, work))
        if not libs.has("tessel") or not hasattr(libs["tessel"], "matmul"):
            out.append(skipped("matmul_fp32", variant, "tessel", "ts.matmul is not in this build"))
    return out


def w_relu_matmul_bf16(libs, timer, quick):
    shapes = [(2048, 2048, 2048)] if quick else [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 1024)]
    out = []
    for m, n, k in shapes:
        variant = f"relu(a@b+bias) {m}x{n}x{k} bf16"
        a = (np.random.rand(m, k).astype(np.float32) - 0.5)
        b = (np.random.rand(k, n).astype(np.float32) - 0.5)
        bias = np.random.rand(n).astype(np.float32) - 0.5
        # the reference from the bf16-rounded operands
        rnd = lambda v: (v.view(np.uint32) + 0x7FFF + ((v.view(np.uint32) >> 16) & 1) & 0xFFFF0000).view(np.float32)
        ar, br, biasr = rnd(a), rnd(b), rnd(bias)
        ref = np.maximum(ar.astype(np.float64) @ br.astype(np.float64) + biasr, 0)
        work = (2 * m * n * k, 2 * (m * k + k * n + m * n))
        builds = {}
        if libs.has("tessel") and hasattr(libs["tessel"], "matmul"):
            ts = libs["tessel"]
            def build_tessel(a=a, b=b, bias=bias):
                da, db, dbias = (ts.asarray(v, device="cuda").astype(ts.bfloat16) for v in (a, b, bias))
                box = [None]
                def fn():
                    box[0] = ts.matmul(da, db, bias=dbias, epilogue="relu")
                return fn, lambda: box[0].astype(ts.float32)
            builds["tessel"] = build_tessel
        else:
            out.append(skipped("relu_matmul_bf16", variant, "tessel", "ts.matmul is not in this build"))
        if libs.has("torch"):
            torch = libs["torch"]
            def build_torch(a=a, b=b, bias=bias):
                da, db, dbias = (torch.from_numpy(v).cuda().bfloat16() for v in (a, b, bias))
                box = [None]
                def fn():
                    box[0] = torch.relu(torch.addmm(dbias, da, db))
                return fn, lambda: box[0]
            builds["torch"] = build_torch
        if libs.has("cupy"):
            out.append(skipped("relu_matmul_bf16", variant, "cupy", "CuPy has no bfloat16"))
        for lib, build in builds.items():
            out.append(run_impl(timer, "relu_matmul_bf16", variant, lib, build, ref, 1e-2, work))
    return out


def w_fft(libs, timer, quick):
    out = []
    for batch, label in ((1, "8192 c64, one call"), (2048 if quick else 16384, None)):
        n = 8192
        label = label or f"{batch}x8192 c64 batched"
        x = (np.random.rand(batch, n) - 0.5 + 1j * (np.random.rand(batch, n) - 0.5)).astype(np.complex64)
        ref = np.fft.fft(x.astype(np.complex128), axis=-1)
        work = (5 * batch * n * math.log2(n), 2 * batch * n * 8)
        builds = {}
        if libs.has("tessel") and hasattr(libs["tessel"], "fft"):
            ts = libs["tessel"]
            def build_tessel(x=x):
                dx = ts.asarray(x, device="cuda")
                box = [None]
                def fn():
                    box[0] = ts.fft.fft(dx)
                return fn, lambda: box[0]
            builds["tessel"] = build_tessel
        else:
            out.append(skipped("fft", label, "tessel", "ts.fft is not in this build"))
        if libs.has("torch"):
            torch = libs["torch"]
            def build_torch(x=x):
                dx = torch.from_numpy(x).cuda()
                box = [None]
                def fn():
                    box[0] = torch.fft.fft(dx)
                return fn, lambda: box[0]
            builds["torch"] = build_torch
        if libs.has("cupy"):
            cp = libs["cupy"]
            def build_cupy(x=x):
                dx = cp.asarray(x)
                box = [None]
                def fn():
                    box[0] = cp.fft.fft(dx)
                return fn, lambda: box[0]
            builds["cupy"] = build_cupy
        for lib, build in builds.items():
            r = run_impl(timer, "fft", label, lib, build, ref, 1e-5, work, timed_host=(batch == 1))
            if batch == 1 and r.status == "ok":
                r.rate, r.unit = r.ms * 1e3, "us/call"
            out.append(r)
    return out


def w_pipeline(libs, timer, quick):
    n = (1 << 26) if quick else (1 << 28)  # float32: 256 MiB or 1 GiB
    variant = f"{n * 4 >> 20} MiB host -> x*2+1 -> host"
    x = np.random.rand(n).astype(np.float32)
    ref = x * 2 + 1
    work = (2 * n, n * 4)  # rate = input bytes per second
    out = []
    builds = {}
    if libs.has("tessel") and hasattr(libs["tessel"], "Pipeline"):
        ts = libs["tessel"]
        def build_tessel():
            # Pinned host buffers, as PyTorch's version gets (page-locking is outside the timing).
            host_in = ts.cuda.pinned_empty(x.shape, "float32")
            host_in[...] = x
            host_out = ts.cuda.pinned_empty(x.shape, "float32")
            host_out[...] = np.nan
            pipe = ts.Pipeline(lambda chunk: chunk * 2 + 1)
            def fn():
                pipe.run(host_in, out=host_out)
            return fn, lambda: host_out
        builds["tessel"] = build_tessel
    else:
        out.append(skipped("pipeline", variant, "tessel", "ts.Pipeline is not in this build"))
    if libs.has("torch"):
        torch = libs["torch"]
        def build_torch(streams=4):
            host_in = torch.from_numpy(x).pin_memory()
            host_out = torch.empty_like(host_in).pin_memory()
            chunk = 1 << 24
            ss = [torch.cuda.Stream() for _ in range(streams)]
            bufs = [torch.empty(chunk, device="cuda") for _ in range(streams)]
            def fn():
                for i, start in enumerate(range(0, n, chunk)):
                    s, buf = ss[i % streams], bufs[i % streams]
                    with torch.cuda.stream(s):
                        piece = buf[: min(chunk, n - start)]
                        piece.copy_(host_in[start:start + piece.numel()], non_blocking=True)
                        piece.mul_(2).add_(1)
                        host_out[start:start + piece.numel()].copy_(piece, non_blocking=True)
                torch.cuda.synchronize()
            return fn, lambda: host_out
        builds["torch"] = build_torch
    for lib, build in builds.items():
        r = run_impl(timer, "pipeline", variant, lib, build, ref, 1e-6, work, timed_host=False)
        out.append(r)
    return out


def w_particles(libs, timer, quick):
    out = []
    variant = "1e6 particles, ms/step"
    sys.path.insert(0, os.path.join(HERE, "peers"))
    if libs.has("tessel") and hasattr(libs["tessel"], "sim"):
        ts = libs["tessel"]
        try:
            sim = ts.sim.Particles.benchmark_setup(1_000_000) if hasattr(ts.sim.Particles, "benchmark_setup") else None
            if sim is None:
                raise AttributeError("ts.sim.Particles.benchmark_setup is missing")
            for _ in range(10):
                sim.step()
            ms = timer.median_ms(sim.step, repeats=30 if quick else 100, warmup=0)
            out.append(Result("particles", variant, "tessel", "ok", ms, 1e6 / ms / 1e3, "Mparticle-steps/s"))
        except Exception as e:
            out.append(Result("particles", variant, "tessel", "crashed", note=f"{type(e).__name__}: {e}"[:160]))
    else:
        out.append(skipped("particles", variant, "tessel", "ts.sim is not in this build"))
    if libs.has("numba") and libs.has("cupy"):
        try:
            import numba_sim
            ms = numba_sim.median_step_ms(1_000_000, steps=30 if quick else 100)
            out.append(Result("particles", variant, "numba", "ok", ms, 1e6 / ms / 1e3, "Mparticle-steps/s",
                              note="Numba kernels + CuPy argsort"))
        except Exception as e:
            out.append(Result("particles", variant, "numba", "crashed", note=f"{type(e).__name__}: {e}"[:160]))
    return out


def w_set_ops(libs, timer, quick):
    """unique_inverse and isin on 1e7 int32 (bench/peers/set_ops.py: alternating rounds, results
    checked against NumPy first)."""
    sys.path.insert(0, os.path.join(HERE, "peers"))
    out = []
    if not libs.has("tessel") or not libs["tessel"].cuda_available():
        return [skipped("set_ops", "1e7 int32", "tessel", "tessel with CUDA is not available")]
    try:
        import set_ops
        results = set_ops.measure(rounds=5 if quick else 15)
    except Exception as e:
        return [Result("set_ops", "1e7 int32", "tessel", "crashed", note=f"{type(e).__name__}: {e}"[:160])]
    for op, entry in results["ops"].items():
        for lib, r in entry.items():
            if not isinstance(r, dict):
                continue
            variant = f"{op}, {results['n']:.0e} int32"
            if r["status"] != "ok":
                out.append(Result("set_ops", variant, lib, r["status"], note="wrong result"))
                continue
            ms = r["median_ms"]
            out.append(Result("set_ops", variant, lib, "ok", ms, results["n"] / ms / 1e6, "Gkeys/s"))
    return out


def w_linalg(libs, timer, quick):
    """The batched small-matrix rows of bench/peers/python_linalg.py (all rows without --quick)."""
    out = []
    sys.path.insert(0, os.path.join(HERE, "peers"))
    if not libs.has("tessel"):
        return [skipped("linalg", "batched small matrices", "tessel", "tessel sees no CUDA device")]
    import python_linalg
    names = python_linalg.QUICK_ROWS if quick else list(python_linalg.ROWS)
    for name in names:
        variant = python_linalg.ROWS[name][0]
        try:
            row = python_linalg.measure_row(name, rounds=1 if quick else 3, log=lambda *_: None)
        except Exception as e:
            out.append(Result("linalg", variant, "tessel", "crashed", note=f"{type(e).__name__}: {e}"[:160]))
            continue
        for lib, entry in row["libraries"].items():
            if lib == "tessel_ex":
                continue
            if entry["status"] == "ok":
                out.append(Result("linalg", variant, lib, "ok", entry["ms"], 1e3 / entry["ms"], "calls/s"))
            else:
                out.append(Result("linalg", variant, lib, "FAILED" if entry["status"] == "wrong" else "crashed",
                                  note=entry.get("error", f"relative residual {entry.get('relative_residual')}")[:160]))
    return out


def w_indexing(libs, timer, quick):
    """x[m], x[idx] and x[m] = scalar from bench/peers/python_indexing.py (its own alternating
    rounds of tessel, PyTorch and CuPy; that script also records the bounds-check cost)."""
    out = []
    if not libs.has("tessel"):
        return [skipped("indexing", "x[m], x[idx], x[m] = s", "tessel", "tessel is not importable")]
    sys.path.insert(0, os.path.join(HERE, "peers"))
    try:
        import python_indexing
        r = python_indexing.measure(quick)
    except Exception as e:
        return [Result("indexing", "x[m], x[idx], x[m] = s", "tessel", "crashed", note=f"{type(e).__name__}: {e}"[:160])]
    n, k = r["n"], r["indices"]
    variants = {"mask_select": (f"x[m] {n:.0e} float32, half true", r["mask_select"]["bytes"]),
                "gather": (f"x[idx] {n:.0e} float32, {k:.0e} int64", k * (8 + 4 + 4)),
                "mask_set_scalar": (f"x[m] = s {n:.0e} float32", n * (1 + 4 + 4))}
    for name, t in r["ms"].items():
        case, lib = name.split("/")
        if case in variants:
            variant, bytes_ = variants[case]
            out.append(Result(case, variant, lib, "ok", t, bytes_ / t / 1e6, "GB/s", bytes_=bytes_))
    return out


WORKLOADS = {
    "tiny_add": w_tiny_add,
    "vector_add": w_vector_add,
    "fused_chain": w_fused_chain,
    "matmul_fp32": w_matmul_fp32,
    "relu_matmul_bf16": w_relu_matmul_bf16,
    "fft": w_fft,
    "pipeline": w_pipeline,
    "particles": w_particles,
    "set_ops": w_set_ops,
    "linalg": w_linalg,
    "indexing": w_indexing,
}


# ---------------------------------------------------------------- ceilings, report

def measure_ceilings(libs, timer, quick):
    """Device copy bandwidth and bf16 GEMM rate, through whichever peer is installed."""
    c = {}
    if libs.has("torch"):
        torch = libs["torch"]
        n = (1 << 26) if quick else (1 << 28)
        src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
        c["copy_GBps"] = 2 * n * 4 / timer.median_ms(lambda: dst.copy_(src)) / 1e6
        k = 4096 if quick else 8192
        a, b = (torch.rand(k, k, device="cuda", dtype=torch.bfloat16) - 0.5 for _ in range(2))
        c["gemm_bf16_TFLOPs"] = 2 * k ** 3 / timer.median_ms(lambda: a @ b) / 1e9
    elif libs.has("cupy"):
        cp = libs["cupy"]
        n = (1 << 26) if quick else (1 << 28)
        src, dst = cp.random.rand(n, dtype=cp.float32), cp.empty(n, cp.float32)
        c["copy_GBps"] = 2 * n * 4 / timer.median_ms(lambda: dst.__setitem__(Ellipsis, src)) / 1e6
    return c


def device_name(libs):
    if libs.has("torch"):
        return libs["torch"].cuda.get_device_name(0)
    if libs.has("cupy"):
        cp = libs["cupy"]
        return cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    if libs.has("tessel"):
        return libs["tessel"]._tessel.device_name(0)
    return "cpu"


def results_path(name, suffix=".json"):
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", name.lower())).strip("-")
    folder = os.environ.get("TESSEL_BENCH_RESULTS", os.path.join(HERE, "results"))
    return os.path.join(folder, f"{slug}-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}{suffix}")


def speed_table(results):
    """{(workload, variant): {lib: ms}} for the rows that ran."""
    table = {}
    for r in results:
        table.setdefault((r.workload, r.variant), {})
        if r.status == "ok":
            table[(r.workload, r.variant)][r.lib] = r.ms
    return table


def print_table(results):
    table = speed_table(results)
    libs = ["tessel", *PEERS]
    print(f"\n{'workload':<18} {'variant':<34} " + " ".join(f"{l:>12}" for l in libs) + f" {'tessel/best peer':>17}")
    for (w, v), times in table.items():
        cells = []
        for lib in libs:
            r = next((r for r in results if (r.workload, r.variant, r.lib) == (w, v, lib)), None)
            if r is None:
                cells.append(f"{'-':>12}")
            elif r.status == "ok":
                cells.append(f"{r.ms:>10.4f}ms")
            else:
                cells.append(f"{r.status:>12}")
        peers = [t for lib, t in times.items() if lib != "tessel"]
        ratio = f"{min(peers) / times['tessel']:.2f}x" if peers and "tessel" in times else "-"
        print(f"{w:<18} {v[:34]:<34} " + " ".join(cells) + f" {ratio:>17}")
    notes = [r for r in results if r.status != "ok"]
    if notes:
        print("\nnotes:")
        for r in notes:
            print(f"  {r.workload} [{r.variant}] {r.lib}: {r.status}: {r.note}")


def draw_charts(record, base):
    """The bar chart and the roofline, drawn by scripts/bench_report.py (which redraws them from the
    results file the same way)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
    import bench_report

    return bench_report.draw_charts(record, base)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--libraries", nargs="*", default=["tessel", *PEERS], choices=["tessel", *PEERS],
                        help="run only these libraries (bench/ab.py runs tessel alone)")
    parser.add_argument("--json")
    parser.add_argument("--no-charts", action="store_true")
    args = parser.parse_args(argv)
    unknown = [w for w in args.only if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; valid: {', '.join(WORKLOADS)}")

    libs = Libraries(args.libraries)
    for name in ("tessel", *PEERS):
        print(f"{name:>7}: {'ok' if libs.has(name) else 'skipped (' + libs.notes.get(name, '?') + ')'}")
    if not any(libs.has(n) for n in ("torch", "cupy", "tessel")):
        print("compare: no GPU library can run here; nothing to compare")
        return 0
    np.random.seed(int.from_bytes(os.urandom(4), "little"))
    timer = Timer(libs, args.quick)
    ceilings = measure_ceilings(libs, timer, args.quick)
    print("ceilings:", {k: round(v, 1) for k, v in ceilings.items()})
    results = []
    for name, workload in WORKLOADS.items():
        if args.only and name not in args.only:
            continue
        print(f"-- {name}", file=sys.stderr, flush=True)
        try:
            results.extend(workload(libs, timer, args.quick))
        except Exception as e:
            traceback.print_exc()
            results.append(Result(name, "", "all", "crashed", note=f"{type(e).__name__}: {e}"[:160]))
    print_table(results)

    dev = device_name(libs)
    record = {"device": dev, "quick": args.quick, "ceilings": ceilings, "libraries": {
        n: ("ok" if libs.has(n) else libs.notes.get(n)) for n in ("tessel", *PEERS)},
        "results": [r.__dict__ for r in results]}
    path = results_path(dev)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = json.load(open(path)) if os.path.exists(path) else {}
    data["compare_quick" if args.quick else "compare"] = record
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    print(f"results: {path}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)
    if not args.no_charts:
        for p in draw_charts(record, path[: -len(".json")]):
            print(f"chart: {p}")
    # A tessel row that failed its check or raised (or a workload that raised as a whole) fails the run.
    return 1 if any(r.status in ("FAILED", "crashed") and r.lib in ("tessel", "all") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
