"""The CUDA routes of ts.linalg.svd for one large matrix, timed against each other: the data
behind the SVD table in src/backend/cuda/linalg.cpp (gesvdp; QR first or not; gesvdj or Xgesvd).

    python3 bench/peers/linalg_svd_routes.py [--shapes 4096x1024 2048x2048 ...] [--dtype float32]

TESSEL_LINALG_SVD is read once per process, so each route runs in a child process. Each child
times svd(full_matrices=False) and svdvals of one fresh random matrix per shape (wall clock
around calls that end in a synchronization: svd reads LAPACK's info), the median of repeats
after a warm-up, and checks the reconstruction. Prints a table; writes nothing. Skips (exit 0)
without a GPU. To compare with PyTorch in the same run: python_linalg.py --only svd_4096x1024_f32.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROUTES = ["auto", "gesvdp", "gesvdj", "gesvd", "qr+gesvd"]


def child(shapes, dtype, repeats):
    import tessel as ts

    out = {}
    for shape in shapes:
        m, n = (int(v) for v in shape.split("x"))
        a = ts.random.uniform(-1.0, 1.0, (m, n), device="cuda").astype(getattr(ts, dtype))
        row = {}
        for what, fn in (("svd", lambda: ts.linalg.svd(a, full_matrices=False)), ("svdvals", lambda: ts.linalg.svdvals(a))):
            r = fn()  # warm-up (handles, workspaces, JIT)
            times = []
            for _ in range(repeats):
                ts.cuda.synchronize()
                t0 = time.perf_counter()
                r = fn()
                ts.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e3)
            row[what] = sorted(times)[len(times) // 2]
            if what == "svd":
                u, s, vh = r
                rebuilt = ts.matmul(u * ts.expand_dims(s, axis=-2), vh)
                row["residual"] = float(ts.max(ts.abs(rebuilt - a))) / float(ts.max(ts.abs(a)))
        out[shape] = row
    print(json.dumps(out))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", default=["4096x1024", "8192x512", "2048x1024", "1024x1024", "2048x2048"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64", "complex64", "complex128"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--routes", nargs="*", default=ROUTES, choices=ROUTES)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.shapes, args.dtype, args.repeats)
        return 0
    import tessel as ts

    if not ts.cuda_available():
        print("linalg_svd_routes: skipped, no CUDA device")
        return 0
    results = {}
    for route in args.routes:
        env = dict(os.environ, TESSEL_LINALG_SVD=route)
        cmd = [sys.executable, __file__, "--child", "--dtype", args.dtype, "--repeats", str(args.repeats), "--shapes", *args.shapes]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{route}: failed\n{p.stderr[-2000:]}")
            continue
        results[route] = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"{args.dtype}; ms, median of {args.repeats} (svd reduced / svdvals), relative residual of svd")
    print(f"{'shape':>10s} " + " ".join(f"{r:>24s}" for r in results))
    for shape in args.shapes:
        cells = []
        for r in results:
            row = results[r][shape]
            cells.append(f"{row['svd']:8.2f}/{row['svdvals']:7.2f} {row['residual']:7.1e}")
        print(f"{shape:>10s} " + " ".join(f"{c:>24s}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
