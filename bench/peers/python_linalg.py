"""ts.linalg against torch.linalg and cupy.linalg on one GPU, in the same process: every row of
issue 20's target table.

    python3 bench/peers/python_linalg.py [--quick] [--only NAME ...] [--rounds R] [--streams K ...]

Each row's input is made once on the GPU by tessel and handed to the peers through DLPack
(float32 unless the row says float64). Every library's result is checked by reconstruction on
the GPU (L L^T, A X - B, A V - V diag(w), U diag(S) Vh, Q R, A A^-1) before it is timed; a result
that fails its check, or a library that raises (PyTorch's 100,000 x 8x8 eigh fails with
CUSOLVER_STATUS_INTERNAL_ERROR on the H200; CuPy's failed so on the H100 and ran on the H200), is
reported with its message instead of a time.

Timing: CUDA events on the legacy default stream (where all three libraries queue by default),
warm-up, the median of repeats; the libraries take turns in alternating order over `rounds`
rounds, and each library's time is the median of its round medians. tessel is timed twice: the
plain function (it reads LAPACK's info, one synchronization) and, where there is one, the *_ex
variant (no synchronization). The eigh 100,000 x 8x8 row also reports GB/s counting the input
and output bytes, over the device copy bandwidth measured in the same run.

The rows in STREAM_ROWS (those whose CUDA path is one batched cuSOLVER call) also time tessel
with the batch split over K streams, one column `tessel_streamsK` per K of --streams (default
2 3 4): ts.set_linalg_streams(K) is set around each call and restored after it, so every K is
checked and timed in the same process and the same alternating rounds as the plain `tessel`
column, which runs with the process's setting (TESSEL_LINALG_STREAMS, default 1).

Results merge into bench/results/<device>-<date>.json under "python_linalg". bench/compare.py
runs the quick batched rows as its "linalg" workload. Skips (exit 0) without a GPU.
"""
import argparse
import statistics
import sys
import time
import traceback

import numpy as np

import tessel as ts

from peer_results import merge_results, optional_import, tessel_copy_gbps

torch = optional_import("torch")
cupy = optional_import("cupy")


# name: (what, target from issue 20: the factor over the best peer; None: "works" + bandwidth)
ROWS = {
    "cholesky_8192_f32": ("cholesky 8192 float32", 1.0),
    "solve_4096_rhs64_f32": ("solve 4096, 64 right-hand sides, float32", 1.0),
    "eigh_4096_f32": ("eigh 4096 float32", 1.0),
    "svd_4096x1024_f32": ("svd 4096x1024 float32", 1.0),
    "qr_4096x1024_f32": ("qr 4096x1024 float32", 1.0),
    "batched_solve_100000x8_f32": ("batched solve 100,000 of 8x8 float32", 2.0),
    "batched_inv_20000x32_f32": ("batched inv 20,000 of 32x32 float32", 2.0),
    "batched_cholesky_100000x8_f32": ("batched cholesky 100,000 of 8x8 float32", 2.0),
    "batched_eigh_100000x8_f32": ("batched eigh 100,000 of 8x8 float32", None),
    "batched_eigh_2000x128_f32": ("batched eigh 2,000 of 128x128 float32", 3.0),
    "batched_svd_2000x128_f32": ("batched svd 2,000 of 128x128 float32", 10.0),
    "batched_eigh_20000x32_f64": ("batched eigh 20,000 of 32x32 float64", 3.0),
}
# Rows whose tessel path on CUDA is cusolverDnXsyevBatched, which TESSEL_LINALG_STREAMS splits.
STREAM_ROWS = ["batched_eigh_2000x128_f32"]
QUICK_ROWS = ["batched_solve_100000x8_f32", "batched_cholesky_100000x8_f32", "batched_eigh_100000x8_f32",
              "batched_inv_20000x32_f32"]
TOL = {"float32": 2e-3, "float64": 1e-9}


# ---- inputs (tessel, on the GPU) ----
DEVICE = "cuda"


def general(batch, m, n, dtype):
    shape = (batch, m, n) if batch else (m, n)
    return ts.random.normal(0.0, 1.0, shape, device=DEVICE).astype(dtype)


def spd(batch, n, dtype):
    x = general(batch, n, n, dtype)
    return ts.matmul(x, x.mT) + n * ts.eye(n, dtype=dtype, device=DEVICE)


def symmetric(batch, n, dtype):
    x = general(batch, n, n, dtype)
    return (x + x.mT) * 0.5


def problem(name):
    """(inputs as tessel arrays, dtype, kind)."""
    f32, f64 = "float32", "float64"
    table = {
        "cholesky_8192_f32": (lambda: (spd(0, 8192, f32),), f32, "cholesky"),
        "solve_4096_rhs64_f32": (lambda: (general(0, 4096, 4096, f32), general(0, 4096, 64, f32)), f32, "solve"),
        "eigh_4096_f32": (lambda: (symmetric(0, 4096, f32),), f32, "eigh"),
        "svd_4096x1024_f32": (lambda: (general(0, 4096, 1024, f32),), f32, "svd"),
        "qr_4096x1024_f32": (lambda: (general(0, 4096, 1024, f32),), f32, "qr"),
        "batched_solve_100000x8_f32": (lambda: (general(100000, 8, 8, f32), general(100000, 8, 1, f32)), f32, "solve"),
        "batched_inv_20000x32_f32": (lambda: (general(20000, 32, 32, f32),), f32, "inv"),
        "batched_cholesky_100000x8_f32": (lambda: (spd(100000, 8, f32),), f32, "cholesky"),
        "batched_eigh_100000x8_f32": (lambda: (symmetric(100000, 8, f32),), f32, "eigh"),
        "batched_eigh_2000x128_f32": (lambda: (symmetric(2000, 128, f32),), f32, "eigh"),
        "batched_svd_2000x128_f32": (lambda: (general(2000, 128, 128, f32),), f32, "svd"),
        "batched_eigh_20000x32_f64": (lambda: (symmetric(20000, 32, f64),), f64, "eigh"),
    }
    make, dtype, kind = table[name]
    return make(), dtype, kind


# ---- the calls of each library ----
def with_streams(fn, streams):
    """fn with ts.set_linalg_streams(streams) around each call (the previous value restored)."""
    def call(*args):
        before = ts.linalg_streams()
        ts.set_linalg_streams(streams)
        try:
            return fn(*args)
        finally:
            ts.set_linalg_streams(before)
    return call


def calls(kind, lib):
    if lib.startswith("tessel_streams"):
        return with_streams(calls(kind, "tessel"), int(lib[len("tessel_streams"):]))
    if lib.startswith("tessel"):
        la = ts.linalg
        ex = lib == "tessel_ex"
        return {
            "cholesky": (lambda a: la.cholesky_ex(a)[0]) if ex else la.cholesky,
            "solve": (lambda a, b: la.solve_ex(a, b)[0]) if ex else la.solve,
            "inv": (lambda a: la.inv_ex(a)[0]) if ex else la.inv,
            "eigh": (lambda a: tuple(la.eigh_ex(a)[:2])) if ex else (lambda a: tuple(la.eigh(a))),
            "svd": None if ex else (lambda a: tuple(la.svd(a, full_matrices=False))),
            "qr": None if ex else (lambda a: tuple(la.qr(a))),
        }[kind]
    mod = torch.linalg if lib == "torch" else cupy.linalg
    return {
        "cholesky": mod.cholesky,
        "solve": mod.solve,
        "inv": mod.inv,
        "eigh": lambda a: tuple(mod.eigh(a)),
        "svd": lambda a: tuple(mod.svd(a, full_matrices=False)),
        "qr": lambda a: tuple(mod.qr(a)),
    }[kind]


def to_lib(x, lib):
    if lib.startswith("tessel"):
        return x
    return torch.from_dlpack(x) if lib == "torch" else cupy.from_dlpack(x)


def to_ts(x):
    return x if isinstance(x, ts.Array) else ts.from_dlpack(x)


def residual(kind, inputs, out):
    """Relative reconstruction error, computed by tessel on the GPU."""
    out = tuple(to_ts(o) for o in out) if isinstance(out, tuple) else to_ts(out)
    a = inputs[0]

    def rel(x, ref):
        return float(ts.max(ts.abs(x - ref))) / max(float(ts.max(ts.abs(ref))), 1e-30)

    if kind == "cholesky":
        return rel(ts.matmul(out, out.mT), a)
    if kind == "solve":
        x = out
        scale = float(ts.max(ts.abs(a))) * max(float(ts.max(ts.abs(x))), 1e-30) * a.shape[-1]
        return float(ts.max(ts.abs(ts.matmul(a, x) - inputs[1]))) / scale
    if kind == "inv":
        n = a.shape[-1]
        eye = ts.eye(n, dtype=a.dtype, device=a.device)
        return float(ts.max(ts.abs(ts.matmul(a, out) - eye))) / n / max(float(ts.max(ts.abs(out))), 1.0)
    if kind == "eigh":
        w, v = out
        return rel(ts.matmul(a, v), v * ts.expand_dims(w, axis=-2))
    if kind == "svd":
        u, s, vh = out
        return rel(ts.matmul(u * ts.expand_dims(s, axis=-2), vh), a)
    if kind == "qr":
        q, r = out
        return rel(ts.matmul(q, r), a)
    raise ValueError(kind)


# ---- timing ----
def events():
    if torch is not None:
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    return cupy.cuda.Event(), cupy.cuda.Event()


def elapsed_ms(start, stop):
    stop.synchronize()
    return start.elapsed_time(stop) if torch is not None else cupy.cuda.get_elapsed_time(start, stop)


def median_ms(fn, budget_ms=1500.0, max_repeats=20):
    """Median of event-timed calls after one warm-up call; as many repeats as fit the budget."""
    start, stop = events()
    start.record()
    fn()
    stop.record()
    first = elapsed_ms(start, stop)
    repeats = int(max(1, min(max_repeats, budget_ms // max(first, 1e-3))))
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        times.append(elapsed_ms(start, stop))
    return sorted(times)[len(times) // 2]


def libraries():
    libs = ["tessel", "tessel_ex"]
    if torch is not None and torch.cuda.is_available():
        libs.append("torch")
    if cupy is not None:
        try:
            cupy.cuda.runtime.getDeviceCount()
            libs.append("cupy")
        except Exception:
            pass
    return libs


def stream_columns(name, streams, row, log):
    """The tessel_streamsK columns of a row: one per K of `streams` for the rows of STREAM_ROWS
    (none, with a note in the row, when this tessel has no ts.set_linalg_streams)."""
    if name not in STREAM_ROWS or not streams:
        return []
    if not hasattr(ts, "set_linalg_streams"):
        row["streams_skipped"] = "this tessel has no ts.set_linalg_streams (rebuild the Python extension)"
        log(f"  tessel_streams*: skipped, {row['streams_skipped']}")
        return []
    return [f"tessel_streams{k}" for k in streams]


def measure_row(name, rounds, log=print, streams=()):
    """streams: the K of the tessel_streamsK columns (rows of STREAM_ROWS only; none by default)."""
    what, target = ROWS[name]
    inputs, dtype, kind = problem(name)
    row = {"workload": what, "dtype": dtype, "target_vs_best_peer": target, "libraries": {}}
    if hasattr(ts, "linalg_streams"):
        row["linalg_streams"] = ts.linalg_streams()  # the plain tessel column's setting
    runnable = {}
    libs = libraries()
    libs[2:2] = stream_columns(name, streams, row, log)  # after tessel and tessel_ex, before the peers
    for lib in libs:
        fn = calls(kind, lib)
        if fn is None:
            continue
        args = tuple(to_lib(x, lib) for x in inputs)
        try:
            out = fn(*args)
            err = residual(kind, inputs, out)
        except Exception as e:  # a peer's library failure is a result too
            row["libraries"][lib] = {"status": "failed", "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
            log(f"  {lib:16s} failed: {row['libraries'][lib]['error']}")
            continue
        if not err <= TOL[dtype]:
            row["libraries"][lib] = {"status": "wrong", "relative_residual": err}
            log(f"  {lib:16s} WRONG: relative residual {err:.3g} > {TOL[dtype]:g}")
            continue
        row["libraries"][lib] = {"status": "ok", "relative_residual": err, "round_ms": []}
        runnable[lib] = (fn, args)
    order = list(runnable)
    for r in range(rounds):
        for lib in (order if r % 2 == 0 else order[::-1]):
            fn, args = runnable[lib]
            row["libraries"][lib]["round_ms"].append(median_ms(lambda: fn(*args)))
    for lib in order:
        entry = row["libraries"][lib]
        entry["ms"] = statistics.median(entry["round_ms"])
        log(f"  {lib:16s} {entry['ms']:10.3f} ms   residual {entry['relative_residual']:.2g}")
    peers = [row["libraries"][p]["ms"] for p in ("torch", "cupy") if row["libraries"].get(p, {}).get("status") == "ok"]
    if "tessel" in runnable and peers:
        row["speedup_vs_best_peer"] = min(peers) / row["libraries"]["tessel"]["ms"]
        if "tessel_ex" in runnable:
            row["speedup_ex_vs_best_peer"] = min(peers) / row["libraries"]["tessel_ex"]["ms"]
    for lib in order:
        if lib.startswith("tessel_streams"):
            entry = row["libraries"][lib]
            if peers:
                entry["speedup_vs_best_peer"] = min(peers) / entry["ms"]
            if "tessel" in runnable:
                entry["speedup_vs_tessel"] = row["libraries"]["tessel"]["ms"] / entry["ms"]
    if name == "batched_eigh_100000x8_f32" and "tessel" in runnable:
        batch, n = inputs[0].shape[0], inputs[0].shape[-1]
        nbytes = batch * (n * n + n + n * n) * 4  # input, eigenvalues, eigenvectors
        for lib in ("tessel", "tessel_ex"):
            if lib in runnable:
                row["libraries"][lib]["GBps"] = nbytes / row["libraries"][lib]["ms"] / 1e6
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the batched small-matrix rows only")
    parser.add_argument("--only", nargs="*", default=None, help=f"row names: {', '.join(ROWS)}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, nargs="*", default=[2, 3, 4],
                        help=f"K of the tessel_streamsK columns of {', '.join(STREAM_ROWS)} "
                             "(ts.set_linalg_streams(K) around each call); none: --streams with no value")
    args = parser.parse_args(argv)
    if any(k < 1 for k in args.streams):
        parser.error(f"--streams takes whole numbers >= 1, got {args.streams}")
    if not ts.cuda_available():
        print("python_linalg: skipped, no CUDA device")
        return 0
    names = args.only or (QUICK_ROWS if args.quick else list(ROWS))
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; valid: {', '.join(ROWS)}")
    results = {"device": ts.device_name(0), "rows": {}, "rounds": args.rounds, "libraries": libraries()}
    if torch is not None:
        results["torch_version"] = torch.__version__
    if cupy is not None:
        results["cupy_version"] = cupy.__version__
    results["copy_GBps"] = tessel_copy_gbps(events=events)
    for name in names:
        print(f"{name}: {ROWS[name][0]}")
        try:
            results["rows"][name] = measure_row(name, args.rounds, streams=args.streams)
            # Rows of different runs share the file (merge_rows), so each says when and how it was run.
            results["rows"][name].update(rounds=args.rounds, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        except Exception:
            traceback.print_exc()
            results["rows"][name] = {"status": "crashed", "error": traceback.format_exc().splitlines()[-1][:300]}
        row = results["rows"][name]
        if "GBps" in row.get("libraries", {}).get("tessel", {}):
            row["libraries"]["tessel"]["fraction_of_copy_bandwidth"] = row["libraries"]["tessel"]["GBps"] / results["copy_GBps"]
    merge_results("python_linalg", results, ts.device_name(0), merge_rows="rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
