"""all_reduce through tessel.distributed against its peers, in the same job on the same devices.

Run it under one launcher, one process per GPU:

    torchrun --nproc_per_node N bench/peers/dist_torch.py        # or:
    mpirun -np N python3 bench/peers/dist_torch.py
    TESSEL_FORCE_CPU=1 mpirun -np 2 python3 bench/peers/dist_torch.py   # the CPU (MPI) path

On one GPU, or alone, it runs and reports as one rank.

GPU (tessel over NCCL against torch.distributed's NCCL process group): float32 sum all_reduce from
8 B to 1 GiB (TESSEL_DIST_MAX_BYTES stops earlier). Each size is checked first (every rank gives
rank + 1, so each element must be n(n+1)/2), then timed: in each round, after a barrier, each
library runs ITERS back-to-back calls bracketed by CUDA events on the same stream (torch's current
stream; tessel is given it), the libraries taking turns with the order swapped every round. The
time of a round is the slowest rank's; the result is the median over rounds. Bus bandwidth is
nccl-tests' convention: bytes / time * 2(n-1)/n (the algorithm bandwidth on one rank). The issue's
targets: at 1 GiB, tessel >= 97% of torch's bus bandwidth; small messages within 2 us of torch
(reported for 8 B both as the event-timed time per back-to-back call and as the host-timed
latency of one call and a synchronize). Under mpirun, torch.distributed's env:// rendezvous needs
MASTER_ADDR and MASTER_PORT: they default to 127.0.0.1:29531 (one node); set them for several.

CPU (TESSEL_FORCE_CPU=1 or no GPU, under mpirun): the 64 MiB float32 all_reduce through tessel
against mpi4py's Allreduce (in place) on the same buffer (the issue's target: tessel within 10%).
Rounds alternate as above, host-timed after a barrier; the result is the median over rounds of
the slowest rank's time, and the median of the per-round ratios tessel / mpi4py.

Rank 0 merges the results into bench/results/<device>-<date>.json under "dist_torch" (GPU) or
"dist_mpi4py" (CPU).
"""
import os
import statistics
import sys
import time

import numpy as np

import tessel as ts
import tessel.distributed as dist

from peer_results import merge_results

ROUNDS = int(os.environ.get("TESSEL_DIST_ROUNDS", "15"))
MAX_BYTES = int(os.environ.get("TESSEL_DIST_MAX_BYTES", str(1 << 30)))
CPU_BYTES = 64 << 20


def iters_for(nbytes):
    """Back-to-back calls per timed round: many for small messages (launch-bound), few for large."""
    return max(2, min(200, (64 << 20) // max(nbytes, 1)))


def bus_factor(n):
    return 2 * (n - 1) / n if n > 1 else 1.0


def launched_by():
    if os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMIX_RANK") or os.environ.get("SLURM_PROCID"):
        return "mpirun"
    if os.environ.get("RANK") and os.environ.get("WORLD_SIZE"):
        return "torchrun"
    return "none"


# ---------------- GPU: tessel (NCCL) vs torch.distributed (NCCL) ----------------

def gpu(torch):
    import torch.distributed as tdist

    dist.init()
    rank, n, device = dist.rank(), dist.world_size(), dist.local_device()
    torch.cuda.set_device(device.index)
    if launched_by() != "torchrun":  # torchrun set these; under mpirun tessel's ranks are the truth
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29531")
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(n)
    tdist.init_process_group("nccl", device_id=torch.device("cuda", device.index))
    assert tdist.get_rank() == rank and tdist.get_world_size() == n, "torch and tessel disagree on the ranks"
    # Both libraries work on one stream (torch's current stream, which tessel adopts), so the same
    # CUDA events time both. A stream of its own, not the legacy default stream (handle 0).
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    ts_stream = ts.Stream.from_handle(stream.cuda_stream, device)
    ts.set_current_stream(ts_stream)

    def slowest(values):
        """The maximum over ranks of each value (a round is as slow as its slowest rank)."""
        t = torch.tensor(values, dtype=torch.float64, device="cuda")
        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
        return t.tolist()

    def check(name, element, count):
        """element(i) of the result at the first, middle and last index must be n(n+1)/2."""
        want = n * (n + 1) / 2
        for i in sorted({0, count // 2, count - 1}):
            got = element(i)
            if got != want:
                raise AssertionError(f"{name} all_reduce of {count} float32 on rank {rank}: element {i} is {got}, "
                                     f"expected {want}")

    sizes = []
    nbytes = 8
    while nbytes <= MAX_BYTES:
        sizes.append(nbytes)
        nbytes *= 2
    rows = []
    for nbytes in sizes:
        count = nbytes // 4
        x = ts.full((count,), rank + 1.0, dtype="float32", device=device)
        t = torch.full((count,), rank + 1.0, dtype=torch.float32, device="cuda")
        dist.all_reduce(x, stream=ts_stream)
        tdist.all_reduce(t)
        check("tessel", lambda i: float(x[i:i + 1].numpy()[0]), count)
        check("torch", lambda i: float(t[i]), count)
        iters = iters_for(nbytes)
        libs = {
            "tessel": lambda: dist.all_reduce(x, stream=ts_stream),
            "torch": lambda: tdist.all_reduce(t),
        }
        for fn in libs.values():  # warm-up
            for _ in range(3):
                fn()
        stream.synchronize()
        per_call = {lib: [] for lib in libs}
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for r in range(ROUNDS):
            order = list(libs) if r % 2 == 0 else list(reversed(libs))
            times = []
            for lib in order:
                tdist.barrier()
                stream.synchronize()
                start.record(stream)
                for _ in range(iters):
                    libs[lib]()
                stop.record(stream)
                stop.synchronize()
                times.append(start.elapsed_time(stop) / iters)  # ms per call
            for lib, ms in zip(order, slowest(times)):
                per_call[lib].append(ms)
        row = {"bytes": nbytes, "iters": iters}
        for lib, ms in per_call.items():
            median_ms = statistics.median(ms)
            row[lib] = {"us": median_ms * 1e3, "bus_GBps": nbytes / (median_ms * 1e-3) * bus_factor(n) / 1e9}
        row["tessel_over_torch_busbw"] = row["tessel"]["bus_GBps"] / row["torch"]["bus_GBps"]
        rows.append(row)
        if rank == 0:
            print(f"{nbytes:>11} B: tessel {row['tessel']['us']:9.2f} us {row['tessel']['bus_GBps']:8.2f} GB/s | "
                  f"torch {row['torch']['us']:9.2f} us {row['torch']['bus_GBps']:8.2f} GB/s | "
                  f"ratio {row['tessel_over_torch_busbw']:.3f}", flush=True)
        del x, t

    # Host-timed latency of one small call and a synchronize.
    x = ts.full((2,), 1.0, dtype="float32", device=device)
    t = torch.full((2,), 1.0, dtype=torch.float32, device="cuda")
    latency = {lib: [] for lib in ("tessel", "torch")}
    calls = {"tessel": lambda: dist.all_reduce(x, stream=ts_stream), "torch": lambda: tdist.all_reduce(t)}
    for r in range(ROUNDS):
        order = ["tessel", "torch"] if r % 2 == 0 else ["torch", "tessel"]
        times = []
        for lib in order:
            tdist.barrier()
            stream.synchronize()
            samples = []
            for _ in range(50):
                t0 = time.perf_counter()
                calls[lib]()
                stream.synchronize()
                samples.append((time.perf_counter() - t0) * 1e6)
            times.append(statistics.median(samples))
        for lib, us in zip(order, slowest(times)):
            latency[lib].append(us)
    small = rows[0]
    results = {
        "launcher": launched_by(),
        "ranks": n,
        "device": ts.device_name(device.index),
        "rounds": ROUNDS,
        "torch": torch.__version__,
        "sizes": rows,
        "small_8B": {
            "tessel_us_per_call": small["tessel"]["us"],
            "torch_us_per_call": small["torch"]["us"],
            "diff_us_per_call": small["tessel"]["us"] - small["torch"]["us"],
            "tessel_host_latency_us": statistics.median(latency["tessel"]),
            "torch_host_latency_us": statistics.median(latency["torch"]),
            "diff_host_latency_us": statistics.median(latency["tessel"]) - statistics.median(latency["torch"]),
            "target_diff_us": 2.0,
        },
    }
    largest = rows[-1]
    results["largest"] = {"bytes": largest["bytes"], "tessel_over_torch_busbw": largest["tessel_over_torch_busbw"],
                          "target_ratio": 0.97, "met": largest["tessel_over_torch_busbw"] >= 0.97}
    if rank == 0:
        s = results["small_8B"]
        print(f"8 B: per call tessel {s['tessel_us_per_call']:.2f} us, torch {s['torch_us_per_call']:.2f} us "
              f"(diff {s['diff_us_per_call']:+.2f}); host latency tessel {s['tessel_host_latency_us']:.2f} us, "
              f"torch {s['torch_host_latency_us']:.2f} us (diff {s['diff_host_latency_us']:+.2f}; target within 2 us)")
        print(f"{largest['bytes']} B: tessel / torch bus bandwidth {largest['tessel_over_torch_busbw']:.3f} "
              f"(target >= 0.97: {'met' if results['largest']['met'] else 'NOT met'})")
        merge_results("dist_torch", results, ts.device_name(device.index))
    tdist.destroy_process_group()
    dist.finalize()


# ---------------- CPU: tessel (MPI) vs mpi4py ----------------

def cpu():
    if launched_by() == "torchrun":
        print("dist_torch: the CPU path needs an MPI launch (the CPU collectives run over MPI): "
              "TESSEL_FORCE_CPU=1 mpirun -np 2 python3 bench/peers/dist_torch.py")
        return 0
    try:
        from mpi4py import MPI
    except ImportError:
        print("dist_torch: skipped the CPU comparison: mpi4py is not installed (pip install mpi4py)")
        return 0
    dist.init("cpu")
    rank, n = dist.rank(), dist.world_size()
    comm = MPI.COMM_WORLD
    assert comm.Get_rank() == rank and comm.Get_size() == n, "mpi4py and tessel disagree on the ranks"
    count = CPU_BYTES // 4
    buf = np.full(count, 1.0, dtype=np.float32)
    x = ts.asarray(buf)  # shares buf's memory: both libraries reduce the same buffer (checked below)
    libs = {"tessel": lambda: dist.all_reduce(x), "mpi4py": lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)}
    for fn in libs.values():  # warm-up, and a check of the result in buf (tessel's too: x is buf)
        buf.fill(rank + 1.0)
        fn()
        assert buf[0] == buf[-1] == n * (n + 1) / 2, f"rank {rank}: {buf[0]}, expected {n * (n + 1) / 2}"
    times = {lib: [] for lib in libs}
    ratios = []
    for r in range(ROUNDS):
        order = list(libs) if r % 2 == 0 else list(reversed(libs))
        mine = {}
        for lib in order:
            buf.fill(1.0)  # keeps the sums finite over the rounds
            comm.Barrier()
            t0 = time.perf_counter()
            libs[lib]()
            mine[lib] = time.perf_counter() - t0
        slowest = np.array([mine["tessel"], mine["mpi4py"]])
        comm.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)  # a round is as slow as its slowest rank
        tessel_s, mpi_s = float(slowest[0]), float(slowest[1])  # Python floats: the results go to JSON
        times["tessel"].append(tessel_s)
        times["mpi4py"].append(mpi_s)
        ratios.append(tessel_s / mpi_s)
    ratio = statistics.median(ratios)
    results = {
        "launcher": launched_by(),
        "ranks": n,
        "bytes": CPU_BYTES,
        "rounds": ROUNDS,
        "tessel_ms": statistics.median(times["tessel"]) * 1e3,
        "mpi4py_ms": statistics.median(times["mpi4py"]) * 1e3,
        "median_ratio_tessel_over_mpi4py": ratio,
        "mpi": MPI.Get_library_version().strip("\x00 \n").splitlines()[0],
        "load_average_1min": os.getloadavg()[0],  # a shared machine's other work shows in both times
        "mpi4py": __import__("mpi4py").__version__,
        "target_ratio": 1.10,
        "met": ratio <= 1.10,
    }
    if rank == 0:
        print(f"64 MiB all_reduce on {n} ranks: tessel {results['tessel_ms']:.3f} ms, mpi4py Allreduce "
              f"{results['mpi4py_ms']:.3f} ms, ratio {ratio:.3f} (target <= 1.10: {'met' if results['met'] else 'NOT met'})")
        merge_results(f"dist_mpi4py_np{n}", results, "cpu")
    dist.finalize()
    return 0


def main():
    torch = None
    if ts.cuda_available():
        try:
            import torch as torch_module

            if torch_module.cuda.is_available() and torch_module.distributed.is_available():
                torch = torch_module
        except ImportError:
            pass
        if torch is None:
            print("dist_torch: skipped: the GPU comparison needs torch with CUDA and torch.distributed")
            return 0
        gpu(torch)
        return 0
    return cpu()


if __name__ == "__main__":
    sys.exit(main())
