"""Batched linear algebra over a grid of orders, batch sizes and dtypes: tessel against PyTorch and
CuPy in one process, for the route tables of src/backend/cuda/tuning/linalg_routes.hpp.

    python3 bench/peers/linalg_grid.py [--quick] [--ops cholesky inv ...] [--dtypes float32 ...]
                                       [--sizes 2 3 ...] [--max-elements N] [--rounds 5]
                                       [--routes] [--cold] [--dry-run] [--no-write]

Grid: n in {2, 3, 4, 5, 8, 12, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64, 65, 96, 128, 192, 256, 512},
batches 1, 4, 16, ... up to --max-elements matrix elements per input (2^24 by default, 2^20
with --quick) and the device's free memory, float32, float64, complex64, complex128, and every
op: cholesky, inv, solve, det, slogdet, qr, eigh, eigvalsh, svd, svdvals, lstsq, pinv,
matrix_rank, matrix_power. A row of the grid (op, dtype, n) stops growing its batch once one
call of a library takes more than --cell-budget seconds.

Each cell: one untimed warm-up call per library (it also compiles anything), then --rounds
alternating rounds, one call of each library a round; a call's time is the device-synchronized
wall clock of the call (tessel's linalg functions synchronize on their error check anyway, and
PyTorch's and CuPy's calls are followed by a synchronize of their device, so each time covers
the whole call). Reported: each library's median, and the median over rounds of the faster
peer's time over tessel's (> 1: tessel is faster). A peer that is missing or fails on a cell is
skipped there. Before timing, tessel's result is checked on up to 32 matrices of the batch
against NumPy in float64 / complex128 (a reconstruction residual: |L L^H - A|, |A X - I|,
|A x - b|, |Q R - A| and |Q^H Q - I|, |A V - V diag(w)|, |U S Vh - A|, |A P A - A|, or the
values themselves for det, slogdet, eigvalsh, svdvals, matrix_rank and matrix_power); a cell
over 1000 eps n is reported as FAILED and not timed.

Printed: every cell, then the worst cell of each op, then a suggested kLibraryRoutes table
(--routes: tessel's own path is timed again in two child processes with TESSEL_LINALG_ROUTE=batched
and =matrix, and each (op, dtype, order range) gets the smallest batch where the batched entry
point wins). The cells go to bench/results/<device>-<date>.json under "linalg_grid" (merged by
cell, so a run of some ops keeps the others).

--cold: the first call of every op at three sizes (n 4, 16 and 64; 256 matrices), each in a new
process with an empty TESSEL_CACHE_DIR: the time of the call, compiles and all, and the kernels it
compiled (written under "linalg_grid_cold").

--dry-run: the whole flow on tessel's CPU backend with two small orders and batches, no peers,
nothing written (a smoke check on machines without a GPU).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from peer_results import merge_results, optional_import

SIZES = [2, 3, 4, 5, 8, 12, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64, 65, 96, 128, 192, 256, 512]
DTYPES = ["float32", "float64", "complex64", "complex128"]
OPS = ["cholesky", "inv", "solve", "det", "slogdet", "qr", "eigh", "eigvalsh", "svd", "svdvals", "lstsq", "pinv",
       "matrix_rank", "matrix_power"]
# The backend function each op reaches on CUDA (the rows of kLibraryRoutes it uses).
ROUTE_OP = {"cholesky": "cholesky", "inv": "solve", "solve": "solve", "det": "lu", "slogdet": "lu", "qr": "qr",
            "eigh": "eigh", "eigvalsh": "eigh", "svd": "svd", "svdvals": "svd", "lstsq": "svd", "pinv": "svd",
            "matrix_rank": "svd", "matrix_power": None}
COLD_SIZES = [4, 16, 64]
COLD_BATCH = 256
SAMPLE = 32


# ---- inputs (NumPy, float64 / complex128, cast per library) ----
def make_input(op, n, batch, dtype, rng):
    cplx = "complex" in dtype
    x = rng.standard_normal((batch, n, n))
    if cplx:
        x = x + 1j * rng.standard_normal((batch, n, n))
    eye = np.eye(n)
    if op == "cholesky":
        a = x @ np.conj(np.swapaxes(x, -1, -2)) / n + eye
    elif op in ("eigh", "eigvalsh"):
        a = (x + np.conj(np.swapaxes(x, -1, -2))) / 2
    elif op in ("det", "slogdet"):
        # Eigenvalues in the unit disk about 1.1, so |det| is about 1.1^n: finite in float32 up to
        # n = 512 (2 I gives 2^n, past float32's range from n = 128).
        a = x / math.sqrt(n) + 1.1 * eye
    elif op in ("inv", "solve", "matrix_power"):
        a = x / math.sqrt(n) + 2 * eye  # well conditioned, no overflow in powers
    else:
        a = x
    a = a.astype(dtype)
    b = None
    if op in ("solve", "lstsq"):
        b = rng.standard_normal((batch, n, 1))
        b = (b + 1j * rng.standard_normal((batch, n, 1)) if cplx else b).astype(dtype)
    return a, b


# ---- the calls of each library ----
def tessel_call(ts, op, a, b):
    L = ts.linalg
    return {
        "cholesky": lambda: L.cholesky(a),
        "inv": lambda: L.inv(a),
        "solve": lambda: L.solve(a, b),
        "det": lambda: L.det(a),
        "slogdet": lambda: L.slogdet(a),
        "qr": lambda: L.qr(a),
        "eigh": lambda: L.eigh(a),
        "eigvalsh": lambda: L.eigvalsh(a),
        "svd": lambda: L.svd(a, full_matrices=False),
        "svdvals": lambda: L.svdvals(a),
        "lstsq": lambda: L.lstsq(a, b),
        "pinv": lambda: L.pinv(a),
        "matrix_rank": lambda: L.matrix_rank(a),
        "matrix_power": lambda: L.matrix_power(a, 3),
    }[op]


def torch_call(torch, op, a, b):
    L = torch.linalg
    return {
        "cholesky": lambda: L.cholesky(a),
        "inv": lambda: L.inv(a),
        "solve": lambda: L.solve(a, b),
        "det": lambda: L.det(a),
        "slogdet": lambda: L.slogdet(a),
        "qr": lambda: L.qr(a),
        "eigh": lambda: L.eigh(a),
        "eigvalsh": lambda: L.eigvalsh(a),
        "svd": lambda: L.svd(a, full_matrices=False),
        "svdvals": lambda: L.svdvals(a),
        "lstsq": lambda: L.lstsq(a, b, driver="gels"),
        "pinv": lambda: L.pinv(a),
        "matrix_rank": lambda: L.matrix_rank(a),
        "matrix_power": lambda: L.matrix_power(a, 3),
    }[op]


def cupy_call(cp, op, a, b):
    L = cp.linalg
    return {
        "cholesky": lambda: L.cholesky(a),
        "inv": lambda: L.inv(a),
        "solve": lambda: L.solve(a, b),
        "det": lambda: L.det(a),
        "slogdet": lambda: L.slogdet(a),
        "qr": lambda: L.qr(a),
        "eigh": lambda: L.eigh(a),
        "eigvalsh": lambda: L.eigvalsh(a),
        "svd": lambda: L.svd(a, full_matrices=False),
        "svdvals": lambda: L.svd(a, compute_uv=False),
        "lstsq": lambda: L.lstsq(a[0], b[0], rcond=None) if a.shape[0] == 1 else _unsupported(),
        "pinv": lambda: L.pinv(a),
        "matrix_rank": lambda: L.matrix_rank(a),
        "matrix_power": lambda: L.matrix_power(a, 3),
    }[op]


def _unsupported():
    raise NotImplementedError("no batched form")


# ---- the correctness check of tessel's result ----
def residual(op, a, b, out):
    """The relative residual of tessel's result `out` (host arrays) on the sample a, b (float64 /
    complex128)."""
    H = lambda m: np.conj(np.swapaxes(m, -1, -2))  # noqa: E731
    na = max(float(np.abs(a).max()), 1e-300)
    n = a.shape[-1]
    eye = np.eye(n)
    if op == "cholesky":
        return float(np.abs(out @ H(out) - a).max()) / na
    if op == "inv":
        return float(np.abs(a @ out - eye).max())
    if op == "solve":
        return float(np.abs(a @ out - b).max()) / max(float(np.abs(b).max()), 1e-300)
    if op == "det":
        ref = np.linalg.det(a)
        return float(np.abs(out - ref).max()) / max(float(np.abs(ref).max()), 1e-300)
    if op == "slogdet":
        return float(np.abs(out[1] - np.linalg.slogdet(a)[1]).max()) / max(1.0, float(np.abs(out[1]).max()))
    if op == "qr":
        q, r = out
        return max(float(np.abs(q @ r - a).max()) / na, float(np.abs(H(q) @ q - np.eye(q.shape[-1])).max()))
    if op == "eigh":
        w, v = out
        return max(float(np.abs(a @ v - v * w[..., None, :]).max()) / na, float(np.abs(H(v) @ v - eye).max()))
    if op == "eigvalsh":
        return float(np.abs(out - np.linalg.eigvalsh(a)).max()) / na
    if op == "svd":
        u, s, vh = out
        return float(np.abs((u * s[..., None, :]) @ vh - a).max()) / na
    if op == "svdvals":
        return float(np.abs(out - np.linalg.svd(a, compute_uv=False)).max()) / na
    if op == "lstsq":
        return float(np.abs(a @ out - b).max()) / max(float(np.abs(b).max()), 1e-300) / max(np.linalg.cond(a).max(), 1)
    if op == "pinv":
        return float(np.abs(a @ out @ a - a).max()) / na
    if op == "matrix_rank":
        return float(np.abs(out - np.linalg.matrix_rank(a)).max())
    if op == "matrix_power":
        ref = a @ a @ a
        return float(np.abs(out - ref).max()) / max(float(np.abs(ref).max()), 1e-300)
    raise ValueError(op)


def to_host(ts, op, out):
    if op == "lstsq":
        return np.asarray(out[0])
    if isinstance(out, tuple) or hasattr(out, "_fields"):
        return tuple(np.asarray(t) for t in out)
    return np.asarray(out)


# ---- timing ----
class Library:
    def __init__(self, name, module, call, put, sync):
        self.name, self.module, self.call, self.put, self.sync = name, module, call, put, sync


def libraries(args, peers=True):
    ts = __import__("tessel")
    dev = args.device
    sync_ts = (lambda: ts.cuda.synchronize()) if dev != "cpu" else (lambda: None)
    libs = [Library("tessel", ts, tessel_call, lambda x: ts.asarray(x, device=dev), sync_ts)]
    if not peers or dev == "cpu":
        return libs
    torch = optional_import("torch")
    if torch is not None and torch.cuda.is_available():
        libs.append(Library("torch", torch, torch_call, lambda x: torch.from_numpy(x).cuda(), torch.cuda.synchronize))
    cp = optional_import("cupy")
    if cp is not None:
        try:
            cp.cuda.runtime.getDeviceCount()
            libs.append(Library("cupy", cp, cupy_call, cp.asarray, lambda: cp.cuda.Device().synchronize()))
        except Exception:  # noqa: BLE001 - no usable CuPy: skipped
            pass
    return libs


def timed_once(lib, fn):
    lib.sync()
    t0 = time.perf_counter()
    fn()
    lib.sync()
    return (time.perf_counter() - t0) * 1e3


def run_cell(libs, op, dtype, n, batch, args, rng):
    a, b = make_input(op, n, batch, dtype, rng)
    cell = {"op": op, "dtype": dtype, "n": n, "batch": batch}
    ready = {}
    for lib in libs:
        try:
            fn = lib.call(lib.module, op, lib.put(a), lib.put(b) if b is not None else None)
            out = fn()  # warm-up (and compiles)
            lib.sync()
            if lib.name == "tessel":
                k = min(batch, SAMPLE)
                ref_a = a[:k].astype(np.complex128 if "complex" in dtype else np.float64)
                ref_b = None if b is None else b[:k].astype(ref_a.dtype)
                host = to_host(lib.module, op, out)
                host = tuple(h[:k] for h in host) if isinstance(host, tuple) else host[:k]
                err = residual(op, ref_a, ref_b, host)
                eps = float(np.finfo(np.float32 if dtype in ("float32", "complex64") else np.float64).eps)
                cell["residual"] = err
                if not (err <= 1000 * eps * n):
                    cell["status"] = "FAILED"
                    return cell
            ready[lib.name] = (lib, fn)
        except Exception as e:  # noqa: BLE001 - a failing peer is skipped on this cell
            if lib.name == "tessel":
                cell["status"] = f"error: {type(e).__name__}: {str(e)[:120]}"
                return cell
    times = {name: [] for name in ready}
    ratios = []
    for _ in range(args.rounds):
        this = {}
        for name, (lib, fn) in ready.items():
            this[name] = timed_once(lib, fn)
            times[name].append(this[name])
        peers = [t for name, t in this.items() if name != "tessel"]
        if peers:
            ratios.append(min(peers) / this["tessel"])
    for name, t in times.items():
        cell[f"{name}_ms"] = statistics.median(t)
    cell["ratio"] = statistics.median(ratios) if ratios else None
    cell["status"] = "ok"
    return cell


def batches_for(n, dtype, args, free_bytes):
    item = np.dtype(dtype).itemsize
    out, batch = [], 1
    while batch * n * n <= args.max_elements and batch * n * n * item * 12 <= free_bytes:
        out.append(batch)
        batch *= 4
    return out


def sweep(args, libs, rng):
    free = 16 << 30
    if args.device != "cpu":
        try:
            free = libs[0].module.cuda.memory_stats(args.device).get("free_bytes", free) or free
        except Exception:  # noqa: BLE001
            pass
    cells = []
    start = time.perf_counter()
    for op in args.ops:
        for dtype in args.dtypes:
            for n in args.sizes:
                if args.deadline and time.perf_counter() - start > args.deadline:
                    print(f"--deadline: stopped before {op} {dtype} n {n}", flush=True)
                    return cells
                for batch in batches_for(n, dtype, args, free):
                    cell = run_cell(libs, op, dtype, n, batch, args, rng)
                    cells.append(cell)
                    print(format_cell(cell), flush=True)
                    slowest = max([v for k, v in cell.items() if k.endswith("_ms")] or [0.0])
                    if cell["status"] != "ok" or slowest > args.cell_budget * 1e3:
                        break
    return cells


def format_cell(c):
    times = " ".join(f"{k[:-3]} {c[k]:.3f}" for k in ("tessel_ms", "torch_ms", "cupy_ms") if k in c)
    ratio = f" {c['ratio']:.2f}x" if c.get("ratio") else ""
    return f"{c['op']:12s} {c['dtype']:10s} n {c['n']:3d} batch {c['batch']:7d}  {c['status']:6s} {times}{ratio}"


def report_worst(cells):
    print("\nworst cell per op (the faster peer's time over tessel's; < 1: tessel is slower):")
    for op in OPS:
        rows = [c for c in cells if c["op"] == op]
        if not rows:
            continue
        bad = [c for c in rows if c["status"] != "ok"]
        timed = [c for c in rows if c.get("ratio")]
        worst = min(timed, key=lambda c: c["ratio"]) if timed else None
        text = format_cell(worst) if worst else "no peer timed"
        print(f"  {op:12s} {text}" + (f"  ({len(bad)} cells FAILED or errored)" if bad else ""))


# ---- suggested route table ----
def child_main(args):
    """--child: tessel alone over the grid (one route forced by the parent's environment); JSON out."""
    rng = np.random.default_rng(1)
    libs = libraries(args, peers=False)
    cells = sweep(args, libs, rng)
    print("CHILD-JSON " + json.dumps(cells))


def route_times(args, route):
    env = {**os.environ, "TESSEL_LINALG_ROUTE": route}
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--rounds", str(args.rounds), "--device", args.device,
           "--max-elements", str(args.max_elements), "--cell-budget", str(args.cell_budget), "--ops", *args.ops,
           "--dtypes", *args.dtypes, "--sizes", *map(str, args.sizes)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("CHILD-JSON "):
            return {(c["op"], c["dtype"], c["n"], c["batch"]): c.get("tessel_ms") for c in json.loads(line[11:])}
    print(f"route {route}: the child failed:\n{out.stderr[-2000:]}")
    return {}


def suggest_routes(args):
    batched, matrix = route_times(args, "batched"), route_times(args, "matrix")
    # (backend op, dtype) -> {n: smallest batch where batched wins, or None}
    crossover = {}
    for (op, dtype, n, batch), tb in sorted(batched.items(), key=lambda kv: kv[0][3]):
        backend = ROUTE_OP.get(op)
        tm = matrix.get((op, dtype, n, batch))
        if backend is None or tb is None or tm is None:
            continue
        row = crossover.setdefault((backend, dtype), {})
        if n not in row or row[n] is None:
            row[n] = batch if tb < tm else row.get(n)
    print("\nsuggested kLibraryRoutes rows (paste into src/backend/cuda/tuning/linalg_routes.hpp; "
          "min_batch: the smallest measured batch where the batched entry point beat one call per matrix):")
    bits = {"float32": "kF32", "float64": "kF64", "complex64": "kC64", "complex128": "kC128"}
    lines = []
    for (backend, dtype), row in sorted(crossover.items()):
        # merge consecutive orders with the same crossover into one row
        prev = None
        for n in sorted(row):
            if prev is not None and prev[1] == row[n]:
                prev = (n, prev[1])
                lines[-1] = (backend, dtype, n, row[n])
                continue
            prev = (n, row[n])
            lines.append((backend, dtype, n, row[n]))
    for backend, dtype, n, mb in lines:
        min_batch = "kNever" if mb is None else str(mb)
        print(f'    {{LinalgOp::{backend}, {bits[dtype]}, {n}, {min_batch}, "linalg_grid.py, <results file>"}},')
    return [{"op": b, "dtype": d, "max_n": n, "min_batch": mb} for b, d, n, mb in lines]


# ---- cold first calls ----
COLD_CODE = r"""
import sys, time, json
import numpy as np
sys.path.insert(0, {here!r})
import tessel as ts
from linalg_grid import make_input, tessel_call
op, dtype, n, batch, dev = {op!r}, {dtype!r}, {n}, {batch}, {device!r}
a, b = make_input(op, n, batch, dtype, np.random.default_rng(0))
x = ts.asarray(a, device=dev)
y = ts.asarray(b, device=dev) if b is not None else None
fn = tessel_call(ts, op, x, y)
if dev != "cpu":
    ts.cuda.synchronize()
t0 = time.perf_counter()
fn()
if dev != "cpu":
    ts.cuda.synchronize()
first = (time.perf_counter() - t0) * 1e3
t0 = time.perf_counter()
fn()
if dev != "cpu":
    ts.cuda.synchronize()
print("COLD-JSON " + json.dumps({{"first_ms": first, "second_ms": (time.perf_counter() - t0) * 1e3}}))
"""


def cold_calls(args):
    rows = []
    print("\ncold first calls (a new process, an empty TESSEL_CACHE_DIR):")
    for op in args.ops:
        for n in ([2, 4] if args.dry_run else COLD_SIZES):
            batch = 4 if args.dry_run else COLD_BATCH
            with tempfile.TemporaryDirectory() as cache:
                code = COLD_CODE.format(here=os.path.dirname(os.path.abspath(__file__)), op=op, dtype="float32", n=n,
                                        batch=batch, device=args.device)
                out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TESSEL_CACHE_DIR": cache},
                                     capture_output=True, text=True)
                compiled = sum(len(files) for _, _, files in os.walk(cache))
            row = {"op": op, "n": n, "batch": batch, "dtype": "float32", "files_compiled": compiled}
            for line in out.stdout.splitlines():
                if line.startswith("COLD-JSON "):
                    row.update(json.loads(line[10:]))
            if "first_ms" not in row:
                row["error"] = out.stderr[-300:]
            rows.append(row)
            status = ("OVER 1 s" if row.get("first_ms", 0) > 1000 else "ok") if "first_ms" in row else "error"
            print(f"  {op:12s} n {n:3d}  first {row.get('first_ms', float('nan')):9.1f} ms  "
                  f"second {row.get('second_ms', float('nan')):8.2f} ms  cache files {compiled:3d}  {status}")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", nargs="+", default=OPS, choices=OPS)
    p.add_argument("--dtypes", nargs="+", default=DTYPES, choices=DTYPES)
    p.add_argument("--sizes", nargs="+", type=int, default=SIZES)
    p.add_argument("--max-elements", type=int, default=1 << 24)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cell-budget", type=float, default=0.5, help="seconds: a row stops growing past this call time")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--deadline", type=float, default=0.0,
                   help="seconds: start no new row after this (the cells so far are still written)")
    p.add_argument("--quick", action="store_true", help="orders 4 16 33 64 128, 2^20 elements, 3 rounds")
    p.add_argument("--routes", action="store_true", help="also time tessel's batched and per-matrix routes")
    p.add_argument("--cold", action="store_true", help="only the cold first calls")
    p.add_argument("--dry-run", action="store_true", help="tessel's CPU backend, tiny grid, no peers, nothing written")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.sizes = [4, 16, 33, 64, 128] if args.sizes == SIZES else args.sizes
        args.max_elements = min(args.max_elements, 1 << 20)
        args.rounds = min(args.rounds, 3)
    if args.dry_run:
        args.device, args.sizes, args.max_elements, args.rounds, args.no_write = "cpu", [3, 17], 17 * 17 * 4, 2, True
    if args.child:
        return child_main(args)
    ts = __import__("tessel")
    if args.device != "cpu" and not ts.cuda.is_available():
        print("linalg_grid: no CUDA device; skipped (--dry-run runs the flow on the CPU)")
        return 0
    device_name = "cpu" if args.device == "cpu" else ts.device_name(ts.Device(args.device).index)
    results = {}
    if args.cold:
        results["cold"] = cold_calls(args)
        if not args.no_write:
            merge_results("linalg_grid_cold", {"rows": {f"{r['op']}-{r['n']}": r for r in results["cold"]}},
                          device_name, merge_rows="rows")
        return 0
    rng = np.random.default_rng(20260601)
    libs = libraries(args)
    print("libraries: " + ", ".join(lib.name for lib in libs))
    cells = sweep(args, libs, rng)
    report_worst(cells)
    routes = suggest_routes(args) if args.routes else None
    if not args.no_write:
        payload = {"cells": {f"{c['op']}-{c['dtype']}-{c['n']}-{c['batch']}": c for c in cells},
                   "libraries": [lib.name for lib in libs]}
        if routes is not None:
            payload["suggested_routes"] = routes
        merge_results("linalg_grid", payload, device_name, merge_rows="cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
