import enum
from typing import Any, List, Optional, Union
from . import Array, Device, Stream

DeviceLike = Union[Device, str, None]
ReduceOpLike = Union["ReduceOp", str]

class ReduceOp(enum.Enum):
    """The reductions of all_reduce, reduce and reduce_scatter: ``sum``, ``prod``, ``min``, ``max`` and ``avg`` (floating and complex dtypes only; min and max need a real dtype)."""
    sum = ...
    prod = ...
    min = ...
    max = ...
    avg = ...

class Work:
    """An operation in flight (returned by the collectives with ``async_op=True``)."""
    def wait(self) -> None:
        """Finishes the operation (CPU: returns when done; CUDA: waits for the communicator's progress), raising what it failed with, or an Error after ``TESSEL_DIST_TIMEOUT_S`` seconds."""
    def is_completed(self) -> bool:
        """True once the operation has finished (polls; raises what it failed with)."""

class Communicator:
    """A set of ranks and the device its collectives run on. The world's is ``world()``; ``split`` and ``new_group`` make others."""
    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
    @property
    def size(self) -> int:
        """The number of ranks."""
    @property
    def device(self) -> Device:
        """The device of the arrays its collectives take."""
    @property
    def defined(self) -> bool:
        """False for the communicator a negative color gets from split."""
    def split(self, color: int, key: int = 0) -> "Communicator":
        """Ranks passing the same color form a new communicator, ordered by key then rank (collective)."""
    def all_reduce(self, x: Array, op: ReduceOpLike = "sum", async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """x <- op over the ranks of x, in place."""
    def broadcast(self, x: Array, src: int = 0, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """x <- rank src's x, in place."""
    def reduce(self, x: Array, dst: int = 0, op: ReduceOpLike = "sum", async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """Rank dst's x <- op over the ranks of x."""
    def all_gather(self, out: Array, x: Array, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """out[r] <- rank r's x; out has shape ``(size, *x.shape)``."""
    def reduce_scatter(self, out: Array, x: Array, op: ReduceOpLike = "sum", async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """out <- op over the ranks of x[rank]; x has shape ``(size, *out.shape)``."""
    def all_to_all(self, out: Array, x: Array, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """out[r] <- rank r's x[rank]; x and out have shape (size, ...)."""
    def send(self, x: Array, dst: int, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """Sends x to rank dst."""
    def recv(self, x: Array, src: int, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
        """Receives into x from rank src."""
    def barrier(self, async_op: bool = False) -> Optional[Work]:
        """Returns when every rank has reached it."""

def built_with_mpi() -> bool:
    """Whether tessel was built with MPI (launching with mpirun/srun and the CPU collectives need it)."""
def init(device: DeviceLike = None) -> None:
    """Starts the distributed runtime of this process, once: rank, size and local rank from MPI (mpirun, srun, or alone as one rank); the device defaults to cuda:<local rank>, or the CPU without CUDA. Under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set, no MPI launcher) the ranks come from those variables and rank 0's NCCL unique id goes to the others through torch.distributed's store (needs torch); only CUDA devices work there (the CPU collectives need MPI: an error says to launch with mpirun)."""
def is_initialized() -> bool:
    """Whether init() has run (and finalize() has not)."""
def finalize() -> None:
    """Destroys the world communicator and finalizes MPI if init() started it (also done at exit)."""
def rank() -> int:
    """This process's rank in the world."""
def world_size() -> int:
    """The number of ranks in the world."""
def local_rank() -> int:
    """This process's rank among the ranks of its node."""
def local_size() -> int:
    """The number of ranks on this node."""
def local_device() -> Device:
    """The device init() chose for this rank."""
def world() -> Communicator:
    """The communicator of all ranks."""
def init_devices(devices: List[DeviceLike]) -> List[Communicator]:
    """Single-process multi-GPU (ncclCommInitAll): one communicator per device, with no launcher; call them inside group() from one thread. CUDA only."""
def all_reduce(x: Array, op: ReduceOpLike = "sum", group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """x <- op over the ranks of x, in place (the world's ranks unless group is given). A Work when async_op, else None."""
def broadcast(x: Array, src: int = 0, group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """x <- rank src's x, in place."""
def reduce(x: Array, dst: int = 0, op: ReduceOpLike = "sum", group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """Rank dst's x <- op over the ranks of x; the others' x are left as they were."""
def all_gather(out: Array, x: Array, group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """out[r] <- rank r's x; out has shape ``(world size, *x.shape)``."""
def reduce_scatter(out: Array, x: Array, op: ReduceOpLike = "sum", group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """out <- op over the ranks of x[rank]; x has shape ``(world size, *out.shape)``."""
def all_to_all(out: Array, x: Array, group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """out[r] <- rank r's x[rank]; x and out have shape (world size, ...)."""
def send(x: Array, dst: int, group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """Sends x to rank dst."""
def recv(x: Array, src: int, group: Optional[Communicator] = None, async_op: bool = False, stream: Optional[Stream] = None) -> Optional[Work]:
    """Receives into x from rank src."""
def barrier(group: Optional[Communicator] = None, async_op: bool = False) -> Optional[Work]:
    """Returns when every rank has reached it."""
def new_group(color: int, key: int = 0, group: Optional[Communicator] = None) -> Communicator:
    """A communicator of the ranks passing the same color, ordered by key then rank (collective)."""
def group() -> Any:
    """A context manager: the collectives and send/recv made inside are issued together when it ends."""
