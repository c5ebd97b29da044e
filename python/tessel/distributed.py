"""tessel.distributed: processes, communicators and collectives on tessel arrays (C++ tessel::dist).

Start one process per device with mpirun or srun; rank, size and local rank come from MPI. CUDA
arrays go over NCCL, CPU arrays over MPI's collectives, with the same calls. torchrun also starts
programs on CUDA devices: the NCCL unique id then goes through torch.distributed's store::

    import tessel as ts
    import tessel.distributed as dist

    dist.init()                                   # once per process
    x = ts.ones(4, device=dist.local_device())
    dist.all_reduce(x)                            # in place: the sum over the ranks
    work = dist.all_reduce(x, op="max", async_op=True)
    work.wait()
    with dist.group():                            # issued together: a ring exchange
        dist.send(x, (dist.rank() + 1) % dist.world_size())
        dist.recv(x, (dist.rank() - 1) % dist.world_size())

See docs/guide/distributed.rst.
"""
from __future__ import annotations

import ctypes
import datetime
import os

from . import _tessel
from ._tessel import _dist as _native

ReduceOp = _native.ReduceOp
Communicator = _native.Communicator
Work = _native.Work

built_with_mpi = _native.built_with_mpi
is_initialized = _native.is_initialized
finalize = _native.finalize
rank = _native.rank
world_size = _native.world_size
local_rank = _native.local_rank
local_size = _native.local_size
local_device = _native.local_device
world = _native.world
init_devices = _native.init_devices

# The torchrun bootstrap's store: rank 0 may host its server, which must outlive the exchange.
_torchrun_store_ref = None
_torchrun_attempts = 0


def _promote_libmpi_to_global():
    """Open MPI loads its plugins with dlopen and they expect libmpi's symbols in the global
    namespace; the extension module was loaded RTLD_LOCAL, so load libmpi again RTLD_GLOBAL (as
    mpi4py does). Harmless when MPI is absent or already global."""
    for name in ("libmpi.so.40", "libmpi.so.12", "libmpi.so"):
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue


def init(device=None):
    """Starts the distributed runtime of this process (once).

    Under mpirun/srun (or alone, as a one-rank world) rank, size and local rank come from MPI.
    ``device`` picks the communicator's device; the default is ``cuda:<local rank>`` when CUDA is
    available, else the CPU. Under torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, with no MPI launcher) the ranks come from those
    variables and the NCCL unique id goes from rank 0 to the others through torch.distributed's
    store, which needs torch; only CUDA devices work there (the CPU collectives need MPI).
    """
    env = dict(os.environ)
    if _native._detect_launcher(env) == "torchrun":
        _init_torchrun(env, device)
        return
    if built_with_mpi():
        _promote_libmpi_to_global()
    _native.init(device)


def _torchrun_ranks(env):
    """(rank, world size, local rank, local size) from torchrun's variables."""
    values = []
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        text = env.get(name, "")
        if text == "":
            raise _tessel.TesselError(
                f"tessel.distributed.init: a torchrun-style launch lacks {name}; torchrun sets RANK, WORLD_SIZE, "
                "LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT")
        try:
            values.append(int(text))
        except ValueError:
            raise _tessel.ValueError(f"tessel.distributed.init: {name}={text!r} is not an integer") from None
    return tuple(values)


def _torchrun_store(timeout_s):
    """torch.distributed's store of this job: the default process group's when torch.distributed is
    initialized, else the one its env:// rendezvous makes (MASTER_ADDR:MASTER_PORT; the torchrun
    agent's when it hosts one), which torch.distributed.init_process_group can still use later."""
    import torch.distributed as tdist
    if not tdist.is_available():
        raise RuntimeError("tessel.distributed.init: launched by torchrun, but this torch has no torch.distributed "
                           "(its store carries the NCCL unique id); launch with mpirun/srun instead")
    if tdist.is_initialized():
        return tdist.distributed_c10d._get_default_store()
    store, _, _ = next(tdist.rendezvous("env://", timeout=datetime.timedelta(seconds=timeout_s)))
    return store


def _share_from_rank0(store, rank, make, key):
    """Rank 0's ``make()`` (bytes) on every rank, through ``store`` under ``key``. A failure of
    ``make`` on rank 0 goes to the others too, so they raise at once rather than after the store's
    timeout."""
    if rank == 0:
        try:
            value = bytes(make())
        except Exception as error:
            store.set(key, b"error:" + f"{type(error).__name__}: {error}".encode())
            raise
        store.set(key, b"value:" + value)
        return value
    try:
        got = bytes(store.get(key))  # waits for rank 0, up to the store's timeout
    except Exception as error:
        raise RuntimeError(
            f"tessel.distributed.init: rank {rank} got no NCCL unique id from rank 0 through torch.distributed's "
            f"store (key {key!r}): {error}; did rank 0 start and call tessel.distributed.init()?") from error
    if got.startswith(b"error:"):
        raise RuntimeError(f"tessel.distributed.init: rank 0 could not make the NCCL unique id "
                           f"({got[len(b'error:'):].decode(errors='replace')}), so rank {rank} cannot start either")
    return got[len(b"value:"):]


def _init_torchrun(env, device):
    global _torchrun_store_ref, _torchrun_attempts
    try:
        import torch.distributed  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            "tessel.distributed.init: launched by torchrun (RANK, WORLD_SIZE, LOCAL_RANK are set), which "
            "bootstraps through torch.distributed's store, but torch is not importable "
            f"({error}); install torch, or launch with mpirun/srun") from None
    rank, size, local_rank, local_size = _torchrun_ranks(env)
    # Every check that needs no peer comes first, so that no rank waits on a rank that has failed
    # them: not initialized yet, the ranks, a CUDA device, a GPU per rank on this node.
    device = _native._check_launch(rank, size, local_rank, local_size, device)
    store = _torchrun_store(_native._timeout_seconds())
    _torchrun_store_ref = store
    # A retried init() (after a failed one) must not read the id of the earlier attempt.
    _torchrun_attempts += 1
    unique_id = _share_from_rank0(store, rank, _native._nccl_unique_id, f"tessel/nccl_unique_id/{_torchrun_attempts}")
    _native.init_from_launch(rank, size, local_rank, local_size, device, unique_id)


def _comm(group):
    if group is not None:
        return group
    # Before init() an undefined communicator: its calls raise an error naming the op.
    return world() if is_initialized() else Communicator()


def all_reduce(x, op="sum", group=None, async_op=False, stream=None):
    """x <- op over the ranks of x, in place. ``op``: "sum", "prod", "min", "max" or "avg" (or a ReduceOp).
    Returns a Work when ``async_op``, else None."""
    return _comm(group).all_reduce(x, op, async_op, stream)


def broadcast(x, src=0, group=None, async_op=False, stream=None):
    """x <- rank ``src``'s x, in place."""
    return _comm(group).broadcast(x, src, async_op, stream)


def reduce(x, dst=0, op="sum", group=None, async_op=False, stream=None):
    """Rank ``dst``'s x <- op over the ranks of x; the other ranks' x are left as they were."""
    return _comm(group).reduce(x, dst, op, async_op, stream)


def all_gather(out, x, group=None, async_op=False, stream=None):
    """out[r] <- rank r's x; ``out`` has shape ``(world size, *x.shape)``."""
    return _comm(group).all_gather(out, x, async_op, stream)


def reduce_scatter(out, x, op="sum", group=None, async_op=False, stream=None):
    """out <- op over the ranks of x[rank]; ``x`` has shape ``(world size, *out.shape)``."""
    return _comm(group).reduce_scatter(out, x, op, async_op, stream)


def all_to_all(out, x, group=None, async_op=False, stream=None):
    """out[r] <- rank r's x[rank]; ``x`` and ``out`` both have shape (world size, ...)."""
    return _comm(group).all_to_all(out, x, async_op, stream)


def send(x, dst, group=None, async_op=False, stream=None):
    """Sends x to rank ``dst`` (which calls recv)."""
    return _comm(group).send(x, dst, async_op, stream)


def recv(x, src, group=None, async_op=False, stream=None):
    """Receives into x from rank ``src`` (which calls send)."""
    return _comm(group).recv(x, src, async_op, stream)


def barrier(group=None, async_op=False):
    """Returns when every rank of the group has reached it."""
    return _comm(group).barrier(async_op)


def new_group(color, key=0, group=None):
    """A communicator of the ranks that pass the same ``color`` (ordered by ``key``, then rank), split
    from ``group`` (default: the world). Collective; a negative color joins none (an undefined
    communicator comes back)."""
    return _comm(group).split(color, key)


def group():
    """A context manager: the collectives and send/recv calls made inside it are issued together when
    it ends (NCCL's group calls; over MPI they complete together)."""
    return _native.Group()


__all__ = [
    "ReduceOp", "Communicator", "Work", "built_with_mpi", "init", "is_initialized", "finalize", "rank",
    "world_size", "local_rank", "local_size", "local_device", "world", "init_devices", "all_reduce", "broadcast",
    "reduce", "all_gather", "reduce_scatter", "all_to_all", "send", "recv", "barrier", "new_group", "group",
]
