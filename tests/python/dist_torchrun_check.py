"""ts.distributed under torchrun. Run it with torchrun (or python -m torch.distributed.run):

    torchrun --nproc_per_node 1 tests/python/dist_torchrun_check.py          # on GPUs: init, collectives
    torchrun --nproc_per_node 2 tests/python/dist_torchrun_check.py --bootstrap-only   # on the CPU

The default mode starts tessel.distributed on cuda:<LOCAL_RANK> through torch.distributed's store
(the NCCL unique id goes from rank 0 to the others there) and checks all_reduce, broadcast,
all_gather, split and the debug-mode check against NumPy. --bootstrap-only needs no GPU (the CPU
tests in test_distributed.py run it): it checks the ranks read from torchrun's variables, the store
exchange with made-up id bytes (NCCL cannot run without a GPU), and the clear errors of a CPU
device under torchrun. Every rank prints "rank R of N: ... ok" when its checks pass.
"""
import os
import sys

import numpy as np

import tessel as ts
import tessel.distributed as dist


def expect_error(kind, parts, fn):
    try:
        fn()
    except kind as error:
        for part in parts:
            assert part in str(error), f"{error!r} lacks {part!r}"
        return error
    raise AssertionError(f"expected {kind.__name__}")


def env_ranks():
    return tuple(int(os.environ[name]) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))


def bootstrap_only():
    r, n, local_rank, local_size = env_ranks()
    assert dist._torchrun_ranks(os.environ) == (r, n, local_rank, local_size)
    assert 0 <= local_rank < local_size <= n

    # The exchange of rank 0's bytes through torch.distributed's store, with made-up id bytes.
    store = dist._torchrun_store(60)
    got = dist._share_from_rank0(store, r, lambda: os.urandom(128), "test/id")
    assert len(got) == 128
    store.set(f"test/got/{r}", got)
    for k in range(n):
        assert bytes(store.get(f"test/got/{k}")) == got, f"rank {k} got other bytes than rank {r}"

    # A failure on rank 0 reaches every rank at once (not after the store's timeout).
    def fails():
        raise OSError("no NCCL here")
    if r == 0:
        expect_error(OSError, ["no NCCL here"], lambda: dist._share_from_rank0(store, r, fails, "test/failed"))
    else:
        expect_error(RuntimeError, ["rank 0 could not make the NCCL unique id", "OSError: no NCCL here",
                                    f"rank {r} cannot start"],
                     lambda: dist._share_from_rank0(store, r, fails, "test/failed"))

    # The CPU collectives need MPI, which torchrun does not start: a clear error, before any store
    # traffic, for the default device (TESSEL_FORCE_CPU=1 here) and for an explicit CPU device.
    expect_error(ts.TesselError, ["tessel.distributed.init", f"rank {r} of {n}", "CPU", "no CUDA device is available",
                                  "MPI", f"mpirun -np {n}", "CUDA devices"], dist.init)
    expect_error(ts.TesselError, ["CPU", "mpirun", "CUDA devices"], lambda: dist.init("cpu"))
    # A CUDA device with more ranks on this node than GPUs (or a build without CUDA).
    if ts.device_count() < local_size:
        expect_error(ts.DeviceError, ["tessel.distributed.init"], lambda: dist.init("cuda:0"))
    assert not dist.is_initialized()
    print(f"rank {r} of {n}: torchrun bootstrap ok", flush=True)


def on_gpus():
    r, n, local_rank, local_size = env_ranks()
    dist.init()
    assert (dist.rank(), dist.world_size(), dist.local_rank(), dist.local_size()) == (r, n, local_rank, local_size)
    device = dist.local_device()
    assert device == ts.Device(f"cuda:{local_rank}"), device
    expect_error(ts.TesselError, ["already initialized"], dist.init)

    def values(k):
        return np.arange(1000, dtype=np.float32) * (k + 1) + k  # small integers: every sum is exact

    everyone = np.stack([values(k) for k in range(n)])
    x = ts.asarray(values(r), device=device)
    dist.all_reduce(x)
    np.testing.assert_array_equal(x.numpy(), everyone.sum(axis=0))
    x = ts.asarray(values(r), device=device)
    dist.all_reduce(x, op="max", async_op=True).wait()
    np.testing.assert_array_equal(x.numpy(), everyone.max(axis=0))
    x = ts.asarray(values(r), device=device)
    dist.broadcast(x, src=n - 1)
    np.testing.assert_array_equal(x.numpy(), values(n - 1))
    out = ts.zeros((n, 1000), dtype="float32", device=device)
    dist.all_gather(out, ts.asarray(values(r), device=device))
    np.testing.assert_array_equal(out.numpy(), everyone)
    dist.barrier()

    # split goes through ncclCommSplit here (there is no MPI communicator to split).
    sub = dist.new_group(r % 2, key=-r)
    members = [k for k in reversed(range(n)) if k % 2 == r % 2]
    assert (sub.size, members[sub.rank]) == (len(members), r)
    x = ts.asarray(values(r), device=device)
    dist.all_reduce(x, group=sub)
    np.testing.assert_array_equal(x.numpy(), everyone[members].sum(axis=0))

    # The debug-mode check gathers over NCCL itself; inside a group it cannot, and says so.
    os.environ["TESSEL_DIST_DEBUG"] = "1"
    x = ts.asarray(values(r), device=device)
    dist.all_reduce(x)
    np.testing.assert_array_equal(x.numpy(), everyone.sum(axis=0))

    def grouped():
        with dist.group():
            dist.all_reduce(x)
    expect_error(ts.TesselError, ["TESSEL_DIST_DEBUG", "inside a group", "torchrun"], grouped)
    del os.environ["TESSEL_DIST_DEBUG"]
    dist.finalize()
    print(f"rank {r} of {n}: torchrun on {device} ok", flush=True)


if __name__ == "__main__":
    if "--bootstrap-only" in sys.argv[1:]:
        bootstrap_only()
    else:
        on_gpus()
