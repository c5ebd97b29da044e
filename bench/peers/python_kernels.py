"""Kernels written in Python: tessel.jit against numba-cuda's @cuda.jit and CuPy's cupyx.jit (where
it can compile the kernel), the same algorithm from bench/peers/kernel_programs.py.

GPU (default): GPU time of a grid-stride vector add of 1e8 float32, a 16x16 shared-memory tiled
matmul of 2048^3, a shared-memory + warp-shuffle sum of 1e8 and an atomic histogram of 1e8 values
into 256 bins (CUDA events, medians, candidates in alternating rounds); host time per launch of a
kernel with 3 arrays and 1 scalar (back-to-back launches of a 1-element kernel); the first compile
of the tiled matmul in a new process, and the load from tessel's disk cache in a second one.
Targets (the compiler issue): GPU time >= 1.0x Numba; host time <= 0.4x Numba and <= 4 us; first
compile <= 0.5x Numba; disk-cache load <= 10 ms to the first launch.

--cpu: tessel's CPU backend on this machine: the grid-stride vector add of 1e7 float32 against the
copy bandwidth measured in the same run (target >= 50%), and the tiled matmul against Numba's
CUDA simulator (NUMBA_ENABLE_CUDASIM=1) on the same program (target >= 100x; the simulator is
timed at --sim-n, since at 512^3 it takes hours).

Results merge into bench/results/<device>-<date>.json under "python_kernels"."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_results import back_to_back_us, merge_results, optional_import  # noqa: E402

np.row_stack = getattr(np, "row_stack", np.vstack)  # numba-cuda still reads it


def numba_cuda():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return None
    numba = optional_import("numba.cuda")
    if numba is None:
        return None
    from numba import cuda
    return cuda if cuda.is_available() else None


def kernels_for(which):
    import kernel_programs
    if which == "tessel":
        import tessel as ts
        from tessel import kernel as tk
        return kernel_programs.build(tk, ts.jit)
    from numba import cuda
    return kernel_programs.build(cuda, cuda.jit)


def events_ms(fn, repeats, warmup=2):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def cupy_kernels():
    """(cupy, the cupyx.jit kernels, why not): each workload skips CuPy when it is missing or its
    jit cannot compile the kernels."""
    cp = optional_import("cupy")
    if cp is None:
        return None, None, "cupy not installed"
    try:
        import kernel_programs
        kernels = kernel_programs.build_cupy()
        x = cp.ones(64, cp.float32)
        kernels["vector_add"]((1,), (32,), (x, x, cp.empty(64, cp.float32), 64))
        return cp, kernels, None
    except Exception as e:  # noqa: BLE001 - reported in the results
        return cp, None, f"cupyx.jit: {type(e).__name__}: {e}"[:300]


def gpu_times(rounds):
    """Per workload: each candidate's median ms over alternating rounds, and the checks."""
    import tessel as ts
    cuda = numba_cuda()
    tk = kernels_for("tessel")
    nb = kernels_for("numba") if cuda else None
    cp, ck, cupy_error = cupy_kernels()
    rng = np.random.default_rng(0)
    rows = {}

    def run(name, candidates, check):
        skipped = {}
        for k in list(candidates):
            if k == "tessel":
                continue
            try:
                candidates[k]()
            except Exception as e:  # noqa: BLE001 - a peer that cannot run this kernel is reported
                skipped[f"{k}_skipped"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"[:200]
                del candidates[k]
        times = {k: [] for k in candidates}
        for _ in range(rounds):
            for k, fn in candidates.items():
                times[k] += events_ms(fn, repeats=3)
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {f"{k}_ms": round(v, 4) for k, v in med.items()}
        row.update({f"{k}_range_ms": [round(min(v), 4), round(max(v), 4)] for k, v in times.items()})
        if "numba" in med:
            row["tessel_vs_numba"] = round(med["numba"] / med["tessel"], 3)
        if "cupy" in med:
            row["tessel_vs_cupy"] = round(med["cupy"] / med["tessel"], 3)
        elif cupy_error:
            row["cupy_skipped"] = cupy_error
        row.update(skipped)
        row["check"] = check()
        rows[name] = row
        print(name, json.dumps(row))

    # vector add 1e8
    n = 100_000_000
    xh = rng.random(n, dtype=np.float32)
    yh = rng.random(n, dtype=np.float32)
    x, y = ts.asarray(xh, device="cuda"), ts.asarray(yh, device="cuda")
    out = ts.full(n, np.nan, dtype=ts.float32, device="cuda")
    blocks, threads = 132 * 32, 256
    cands = {"tessel": lambda: tk["vector_add"][blocks, threads](x, y, out, n)}
    if cuda:
        xn, yn, on = cuda.to_device(xh), cuda.to_device(yh), cuda.device_array(n, np.float32)
        cands["numba"] = lambda: nb["vector_add"][blocks, threads](xn, yn, on, n)
    if ck:
        xc, yc, oc = cp.asarray(xh), cp.asarray(yh), cp.empty(n, cp.float32)
        cands["cupy"] = lambda: ck["vector_add"]((blocks,), (threads,), (xc, yc, oc, n))
    run("vector_add_1e8", cands, lambda: bool(np.array_equal(out.numpy()[:1000], (xh + yh)[:1000])
                                                and np.array_equal(out.numpy()[-1000:], (xh + yh)[-1000:])))
    del x, y, out
    # tiled matmul 2048^3
    m = 2048
    Ah = rng.random((m, m), dtype=np.float32)
    Bh = rng.random((m, m), dtype=np.float32)
    A, B = ts.asarray(Ah, device="cuda"), ts.asarray(Bh, device="cuda")
    C = ts.full((m, m), np.nan, dtype=ts.float32, device="cuda")
    grid = (m // 16, m // 16)
    cands = {"tessel": lambda: tk["matmul"][grid, (16, 16)](A, B, C)}
    if cuda:
        An, Bn, Cn = cuda.to_device(Ah), cuda.to_device(Bh), cuda.device_array((m, m), np.float32)
        cands["numba"] = lambda: nb["matmul"][grid, (16, 16)](An, Bn, Cn)
    if ck:
        Ac, Bc, Cc = cp.asarray(Ah).ravel(), cp.asarray(Bh).ravel(), cp.empty(m * m, cp.float32)
        cands["cupy"] = lambda: ck["matmul"](grid, (16, 16), (Ac, Bc, Cc, m, m, m))
    run("tiled_matmul_2048", cands,
        lambda: float(np.abs(C.numpy()[:64] - (Ah[:64].astype(np.float64) @ Bh)).max()) < 1e-2)
    del A, B, C
    # shuffle sum 1e8
    s_out = ts.zeros(1, dtype=ts.float32, device="cuda")
    x = ts.asarray(xh, device="cuda")
    cands = {"tessel": lambda: tk["shuffle_sum"][132 * 8, 256](x, s_out)}
    if cuda:
        xn2 = cuda.to_device(xh)
        s_n = cuda.device_array(1, np.float32)
        cands["numba"] = lambda: nb["shuffle_sum"][132 * 8, 256](xn2, s_n)
    if ck:
        xc2, s_c = cp.asarray(xh), cp.zeros(1, cp.float32)
        cands["cupy"] = lambda: ck["shuffle_sum"]((132 * 8,), (256,), (xc2, s_c, n))

    def check_sum():
        s_out[...] = 0
        tk["shuffle_sum"][132 * 8, 256](x, s_out)
        return bool(abs(float(s_out[0]) - float(xh.sum(dtype=np.float64))) / n < 1e-4)
    run("shuffle_sum_1e8", cands, check_sum)
    # histogram 1e8 into 256 bins
    counts = ts.zeros(256, dtype=ts.int32, device="cuda")
    cands = {"tessel": lambda: tk["histogram"][132 * 8, 256](x, counts)}
    if cuda:
        cn = cuda.device_array(256, np.int32)
        cands["numba"] = lambda: nb["histogram"][132 * 8, 256](xn2, cn)
    if ck:
        cc = cp.zeros(256, cp.int32)
        cands["cupy"] = lambda: ck["histogram"]((132 * 8,), (256,), (xc2, cc, n))

    def check_hist():
        counts[...] = 0
        tk["histogram"][132 * 8, 256](x, counts)
        return bool(np.array_equal(counts.numpy(), np.histogram(xh, 256, (0, 1))[0]))
    run("histogram_1e8", cands, check_hist)
    return rows


def host_times(rounds):
    """Host time per launch: back-to-back launches of a 1-element kernel with 3 arrays + 1 scalar."""
    import tessel as ts
    cuda = numba_cuda()
    tk = kernels_for("tessel")
    x = ts.ones(1, device="cuda")
    y = ts.ones(1, device="cuda")
    o = ts.zeros(1, device="cuda")
    a = np.float32(2.0)
    res = {"tessel": [], "numba": []}
    launch_t = tk["tiny"][1, 32]
    fns = {"tessel": (lambda: launch_t(x, y, o, a), lambda: ts.synchronize())}
    if cuda:
        nb = kernels_for("numba")
        xn, yn, on = cuda.to_device(np.ones(1, np.float32)), cuda.to_device(np.ones(1, np.float32)), \
            cuda.device_array(1, np.float32)
        fns["numba"] = (lambda: nb["tiny"][1, 32](xn, yn, on, a), cuda.synchronize)
    cp, ck, _ = cupy_kernels()
    if ck:
        xc, yc, oc = cp.ones(1, cp.float32), cp.ones(1, cp.float32), cp.zeros(1, cp.float32)
        fns["cupy"] = (lambda: ck["tiny"]((1,), (32,), (xc, yc, oc, a)), cp.cuda.Device().synchronize)
        res["cupy"] = []
    for _ in range(rounds):
        for k, (fn, sync) in fns.items():
            res[k].append(back_to_back_us(fn, sync, calls=2000, rounds=1, warmup=200))
    out = {f"{k}_us": round(statistics.median(v), 3) for k, v in res.items() if v}
    out.update({f"{k}_range_us": [round(min(v), 3), round(max(v), 3)] for k, v in res.items() if v})
    if res["numba"]:
        out["tessel_over_numba"] = round(out["tessel_us"] / out["numba_us"], 3)
    if res.get("cupy"):
        out["tessel_over_cupy"] = round(out["tessel_us"] / out["cupy_us"], 3)
    assert float(o[0]) == 3.0
    print("host_per_launch", json.dumps(out))
    return out


_COMPILE_PROGRAM = r"""
import os, sys, time
import numpy as np
np.row_stack = getattr(np, "row_stack", np.vstack)
sys.path.insert(0, {here!r})
import kernel_programs
which = {which!r}
if which == "numba":
    from numba import cuda
    k = kernel_programs.build(cuda, cuda.jit)["matmul"]
    A = cuda.to_device(np.ones((64, 64), np.float32)); C = cuda.device_array((64, 64), np.float32)
    sync = cuda.synchronize
else:
    import tessel as ts
    from tessel import kernel as tk
    k = kernel_programs.build(tk, ts.jit)["matmul"]
    A = ts.ones((64, 64), device=ts.default_device()); C = ts.zeros((64, 64), device=ts.default_device())
    sync = ts.synchronize
sync()
t0 = time.perf_counter()
k[(4, 4), (16, 16)](A, A, C)
sync()
print("FIRST_LAUNCH_MS", (time.perf_counter() - t0) * 1e3)
"""


def first_launch_ms(which, env):
    code = _COMPILE_PROGRAM.format(here=HERE, which=which)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("FIRST_LAUNCH_MS"):
            return float(line.split()[1])
    raise RuntimeError(f"{which} compile run failed: {r.stderr[-2000:]}")


def compile_times(repeats, with_numba=True):
    out = {"tessel_first_ms": [], "tessel_disk_cache_ms": [], "numba_first_ms": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TESSEL_CACHE_DIR=cache)
            out["tessel_first_ms"].append(first_launch_ms("tessel", env))
            out["tessel_disk_cache_ms"].append(first_launch_ms("tessel", env))
        if with_numba:
            out["numba_first_ms"].append(first_launch_ms("numba", dict(os.environ)))
    res = {k: round(statistics.median(v), 2) for k, v in out.items() if v}
    res.update({k.replace("_ms", "_range_ms"): [round(min(v), 2), round(max(v), 2)] for k, v in out.items() if v})
    if out["numba_first_ms"]:
        res["tessel_over_numba_first"] = round(res["tessel_first_ms"] / res["numba_first_ms"], 3)
    print("compile", json.dumps(res))
    return res


_SIM_PROGRAM = r"""
import os, sys, time
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
np.row_stack = getattr(np, "row_stack", np.vstack)
sys.path.insert(0, {here!r})
import inspect, textwrap
import kernel_programs
from numba import cuda
# The simulator swaps in its fake `cuda` through the kernel's globals, not its closure: the same
# source as kernel_programs' matmul, defined at module level.
src = textwrap.dedent(inspect.getsource(kernel_programs.build(cuda, lambda f: f)["matmul"]))
scope = {{"cuda": cuda, "np": np, "TPB": kernel_programs.TPB}}
exec(compile(src.replace("@jit", "@cuda.jit"), "kernel_programs.py", "exec"), scope)
k = scope["matmul"]
n = {n}
rng = np.random.default_rng(0)
A = rng.random((n, n), dtype=np.float32); B = rng.random((n, n), dtype=np.float32); C = np.zeros((n, n), np.float32)
g = (n + 15) // 16
t0 = time.perf_counter()
k[(g, g), (16, 16)](A, B, C)
print("SIM_MS", (time.perf_counter() - t0) * 1e3, float(np.abs(C - A @ B).max()))
"""


def cpu_rows(sim_n, rounds):
    import tessel as ts
    tk = kernels_for("tessel")
    rng = np.random.default_rng(0)
    n = 10_000_000
    xh = rng.random(n, dtype=np.float32)
    yh = rng.random(n, dtype=np.float32)
    x, y = ts.asarray(xh, device="cpu"), ts.asarray(yh, device="cpu")
    out = ts.full(n, np.nan, dtype=ts.float32, device="cpu")
    src = np.empty(n, np.float32)
    dst = np.empty(n, np.float32)
    src[:] = xh
    blocks, threads = 1024, 256
    add_t, copy_t = [], []
    tk["vector_add"][blocks, threads](x, y, out, n)
    assert np.array_equal(out.numpy(), xh + yh)
    for _ in range(rounds):
        t0 = time.perf_counter()
        tk["vector_add"][blocks, threads](x, y, out, n)
        add_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.copyto(dst, src)
        copy_t.append(time.perf_counter() - t0)
    add_s, copy_s = statistics.median(add_t), statistics.median(copy_t)
    add_gbps = 3 * n * 4 / add_s / 1e9
    copy_gbps = 2 * n * 4 / copy_s / 1e9
    rows = {"vector_add_1e7": {"tessel_ms": round(add_s * 1e3, 3), "tessel_gbps": round(add_gbps, 2),
                               "copy_gbps": round(copy_gbps, 2),
                               "percent_of_copy": round(100 * add_gbps / copy_gbps, 1),
                               "tessel_range_ms": [round(min(add_t) * 1e3, 3), round(max(add_t) * 1e3, 3)]}}
    print("cpu vector_add", json.dumps(rows["vector_add_1e7"]))
    # tiled matmul: 512^3 correct; against the simulator at sim_n on the same program
    def tessel_matmul(m):
        A = rng.random((m, m), dtype=np.float32)
        B = rng.random((m, m), dtype=np.float32)
        C = ts.full((m, m), np.nan, dtype=ts.float32, device="cpu")
        g = (m + 15) // 16
        At, Bt = ts.asarray(A, device="cpu"), ts.asarray(B, device="cpu")
        tk["matmul"][(g, g), (16, 16)](At, Bt, C)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            tk["matmul"][(g, g), (16, 16)](At, Bt, C)
            times.append(time.perf_counter() - t0)
        err = float(np.abs(C.numpy() - A.astype(np.float64) @ B).max())
        return statistics.median(times) * 1e3, err
    ms512, err512 = tessel_matmul(512)
    ms_small, _ = tessel_matmul(sim_n)
    row = {"tessel_512_ms": round(ms512, 2), "tessel_512_max_err": err512, "sim_n": sim_n,
           "tessel_sim_n_ms": round(ms_small, 3)}
    if optional_import("numba") is not None:
        r = subprocess.run([sys.executable, "-c", _SIM_PROGRAM.format(here=HERE, n=sim_n)], capture_output=True,
                           text=True, timeout=3600)
        for line in r.stdout.splitlines():
            if line.startswith("SIM_MS"):
                row["numba_sim_ms"] = round(float(line.split()[1]), 1)
                row["numba_sim_max_err"] = float(line.split()[2])
                row["tessel_over_sim_speed"] = round(row["numba_sim_ms"] / ms_small, 1)
        if "numba_sim_ms" not in row:
            row["numba_sim_error"] = r.stderr[-500:]
    else:
        row["numba_sim_error"] = "numba not installed"
    rows["tiled_matmul"] = row
    print("cpu tiled_matmul", json.dumps(row))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="the CPU backend rows")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sim-n", type=int, default=64)
    p.add_argument("--only", default="gpu,host,compile", help="GPU sections: gpu, host, compile")
    args = p.parse_args()
    import tessel as ts
    if args.cpu:
        rows = cpu_rows(args.sim_n, args.rounds)
        import platform
        merge_results("python_kernels_cpu", {"rows": rows, "machine": platform.processor() or platform.machine(),
                                             "cores": os.cpu_count()}, "cpu", merge_rows="rows")
        return
    if not ts.cuda_available():
        sys.exit("python_kernels: no CUDA device (use --cpu for the CPU backend)")
    device_name = ts.device_name(0)
    result = {"device": device_name, "rows": {}}
    only = set(args.only.split(","))
    if "gpu" in only:
        result["rows"].update(gpu_times(args.rounds))
    if "host" in only:
        result["rows"]["host_per_launch"] = host_times(args.rounds * 3)
    if "compile" in only:
        repeats = int(os.environ.get("TESSEL_BENCH_COMPILE_REPEATS", "3"))
        result["rows"]["first_compile_tiled_matmul"] = compile_times(repeats, with_numba=numba_cuda() is not None)
    merge_results("python_kernels", result, device_name, merge_rows="rows")


if __name__ == "__main__":
    main()
