"""Crossover of tessel's batched small-matrix kernels against the cuSOLVER / cuBLAS path, for the
tuning table (kSmallKernelRows) in src/backend/cuda/tuning/linalg_routes.hpp: eigh and svd (rows eigh/svd: one matrix per
thread, n <= 16; eigh_warp: a group of lanes per matrix, n <= 32; svd_block: a warp or a block
per matrix, up to n = 128, 112 in float64; eigh_tridiagonal: one matrix per thread, Householder
and QR, n <= 16), cholesky, solve (one right-hand side), inv and det (the
LU kernel).

    python3 bench/peers/linalg_crossover.py [--orders 8 16 ...] [--batches 1 32 1024]
                                            [--ops eigh svd cholesky solve inv det]
                                            [--dtypes float32 float64] [--repeats 5]
                                            [--small-kernel table eigh_warp eigh_tridiagonal]

Each path runs in its own process: tessel's kernels (TESSEL_LINALG_SMALL unset) and the
library path (TESSEL_LINALG_SMALL=0: syevjBatched / gesvdjBatched up to n = 32, XsyevBatched
and per-matrix gesvdj above, potrfBatched, getrfBatched / getrsBatched). Times are
CUDA-synchronized wall clock of the ts.linalg call (each reads the info array: one
synchronization),
the median of up to --repeats calls after one warm-up call (which also compiles tessel's kernel;
its time is printed as "first"). Each result is checked by reconstruction (max |A V - V diag(w)|,
|U diag(S) Vh - A|, |L L^T - A| or |A x - b| over max |A| or |b|; |A A^-1 - I|; det against
slogdet) and the orthogonality of the vectors. The last column is
the library time over tessel's: > 1 where tessel's kernel wins. --small-kernel NAME... runs
tessel's path once per NAME, with TESSEL_LINALG_SMALL=NAME: that one kernel at every order it
takes, whatever the table says (its rows are named tessel-NAME; the name "table" is the table
itself, rows "tessel"); with several names a last table gives each path's time and GB/s (eigh:
the input matrices, the vectors and the eigenvalues; svd: the input and U, S, Vh) side by side.
The rows merge into bench/results/<device>-<date>.json under "linalg_crossover". Skips (exit 0)
without a GPU.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def child(args):
    import tessel as ts

    def sync():
        if args.device != "cpu":
            ts.cuda.synchronize()

    def timed(fn):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        first = (time.perf_counter() - t0) * 1e3
        times = []
        budget = 2000.0
        for _ in range(args.repeats):
            if sum(times) + first > budget and times:
                break
            t0 = time.perf_counter()
            out = fn()
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
        if not times:
            times = [first]
        return out, first, sorted(times)[len(times) // 2]

    def rel(x, ref):
        return float(ts.max(ts.abs(x - ref))) / max(float(ts.max(ts.abs(ref))), 1e-30)

    for op in args.ops:
        for dtype in args.dtypes:
            for n in args.orders:
                for batch in args.batches:
                    x = ts.random.normal(0.0, 1.0, (batch, n, n), device=args.device).astype(dtype)
                    eye = ts.eye(n, dtype=dtype, device=args.device)
                    row = {"op": op, "dtype": dtype, "n": n, "batch": batch}
                    try:
                        if op == "cholesky":
                            a = ts.matmul(x, x.mT) / n + eye  # symmetric positive definite
                            l, first, ms = timed(lambda: ts.linalg.cholesky(a))
                            err = rel(ts.matmul(l, l.mT), a)
                            orth = 0.0
                        elif op == "solve":
                            a = x + n * eye  # well conditioned
                            rhs = ts.random.normal(0.0, 1.0, (batch, n, 1), device=args.device).astype(dtype)
                            sol, first, ms = timed(lambda: ts.linalg.solve(a, rhs))
                            err = rel(ts.matmul(a, sol), rhs)
                            orth = 0.0
                        elif op == "inv":
                            a = x + n * eye
                            ainv, first, ms = timed(lambda: ts.linalg.inv(a))
                            err = float(ts.max(ts.abs(ts.matmul(a, ainv) - eye)))
                            orth = 0.0
                        elif op == "det":
                            a = x + n * eye
                            d, first, ms = timed(lambda: ts.linalg.det(a))
                            sign, logdet = ts.linalg.slogdet(a)
                            err = rel(d, sign * ts.exp(logdet))
                            orth = 0.0
                        elif op == "eigh":
                            a = (x + x.mT) * 0.5
                            (w, v), first, ms = timed(lambda: tuple(ts.linalg.eigh(a)))
                            err = rel(ts.matmul(a, v), v * ts.expand_dims(w, axis=-2))
                            orth = float(ts.max(ts.abs(ts.matmul(v.mT, v) - eye)))
                        else:
                            a = x
                            (u, s, vh), first, ms = timed(lambda: tuple(ts.linalg.svd(a, full_matrices=False)))
                            err = rel(ts.matmul(u * ts.expand_dims(s, axis=-2), vh), a)
                            orth = max(float(ts.max(ts.abs(ts.matmul(u.mT, u) - eye))),
                                       float(ts.max(ts.abs(ts.matmul(vh, vh.mT) - eye))))
                        row.update(first_ms=first, ms=ms, err=err, orth=orth)
                    except Exception as e:  # a failing path is reported, not fatal
                        row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")
                    print(json.dumps(row), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--orders", type=int, nargs="*", default=[8, 16, 24, 32, 48, 64, 96, 128])
    p.add_argument("--batches", type=int, nargs="*", default=[1, 32, 1024])
    p.add_argument("--ops", nargs="*", default=["eigh", "svd"])
    p.add_argument("--dtypes", nargs="*", default=["float32", "float64"])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--small-kernel", nargs="+", default=None,
                   help="force tessel's kernels, one path each (cholesky, lu_solve, eigh, svd, inv, svd_block, "
                        "eigh_warp, eigh_tridiagonal; table: the tuning table)")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # the child's; "cpu" tries the script
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    import tessel as ts
    if not ts.cuda.is_available():
        print("linalg_crossover: no GPU, skipped")
        return
    results = {}
    forced = args.small_kernel or ["table"]
    tessel_paths = [("tessel" if name == "table" else f"tessel-{name}", None if name == "table" else name)
                    for name in forced]
    for path, small in (*tessel_paths, ("cusolver", "0")):
        env = dict(os.environ)
        env.pop("TESSEL_LINALG_SMALL", None)
        if small is not None:
            env["TESSEL_LINALG_SMALL"] = small
        cmd = [sys.executable, __file__, "--child", "--repeats", str(args.repeats), "--orders", *map(str, args.orders),
               "--batches", *map(str, args.batches), "--ops", *args.ops, "--dtypes", *args.dtypes]
        t0 = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{path}: exit {proc.returncode}\n{proc.stderr[-3000:]}", file=sys.stderr)
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                results[(path, r["op"], r["dtype"], r["n"], r["batch"])] = r
        print(f"# {path} path: {time.time() - t0:.0f} s", file=sys.stderr)

    def cell(r):
        if r is None:
            return f"{'-':>10} {'':>8} {'':>8} {'':>8}"
        if "error" in r:
            return f"{'FAILED':>10} {r['error'][:26]:>26}"
        return f"{r['ms']:10.3f} {r['first_ms']:8.0f} {r['err']:8.1e} {r['orth']:8.1e}"

    for tessel_path, _ in tessel_paths:
        print(f"# tessel path: {tessel_path}")
        print("op    dtype      n  batch |  tessel ms  first    err      orth   |  cusolver ms first   err      orth   | cusolver/tessel")
        for op in args.ops:
            for dtype in args.dtypes:
                for n in args.orders:
                    for batch in args.batches:
                        t = results.get((tessel_path, op, dtype, n, batch))
                        c = results.get(("cusolver", op, dtype, n, batch))
                        ratio = c["ms"] / t["ms"] if t and c and "ms" in t and "ms" in c else float("nan")
                        print(f"{op:5} {dtype:8} {n:4} {batch:6} | {cell(t)} | {cell(c)} | {ratio:7.2f}")
    if len(tessel_paths) > 1:
        def gbs(op, dtype, n, batch, ms):  # bytes read and written over the time
            item = 4 if dtype == "float32" else 8
            values = {"eigh": 2 * n * n + n, "svd": 3 * n * n + n}.get(op)
            return f"{batch * values * item / (ms * 1e6):7.1f}" if values else f"{'-':>7}"

        paths = [p for p, _ in tessel_paths] + ["cusolver"]
        print("# ms and GB/s by path")
        print("op    dtype      n  batch | " + " | ".join(f"{p:>26}" for p in paths))
        for op in args.ops:
            for dtype in args.dtypes:
                for n in args.orders:
                    for batch in args.batches:
                        cells = []
                        for path in paths:
                            r = results.get((path, op, dtype, n, batch))
                            ok = r is not None and "ms" in r
                            cells.append(f"{r['ms']:10.4f} ms {gbs(op, dtype, n, batch, r['ms'])} GB/s" if ok
                                         else f"{'-':>26}")
                        print(f"{op:5} {dtype:8} {n:4} {batch:6} | " + " | ".join(cells))
    rows = {f"{op}_{dtype}_n{n}_b{batch}_{path}": r for (path, op, dtype, n, batch), r in results.items()}
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_results import merge_results
    merge_results("linalg_crossover", {"rows": rows}, ts.device_name(0), merge_rows="rows")


if __name__ == "__main__":
    main()
