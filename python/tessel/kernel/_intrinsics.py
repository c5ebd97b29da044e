"""The names a kernel can use (Numba's CUDA names). Each is an object the compiler recognizes by
identity; called outside a kernel, it raises an error saying so."""
from __future__ import annotations


class Intrinsic:
    """A name of the kernel language, such as ``grid`` or ``atomic.add``."""

    def __init__(self, name: str, doc: str = ""):
        self._ts_intrinsic = name
        self.__doc__ = doc or f"Kernel intrinsic ``{name}``: usable only inside a kernel compiled by tessel."

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"tessel.kernel.{self._ts_intrinsic} can only be used inside a kernel "
                           "(a function decorated with @tessel.jit)")

    def __repr__(self) -> str:
        return f"<tessel kernel intrinsic {self._ts_intrinsic}>"


class Namespace(Intrinsic):
    """A group of intrinsics reached by attribute (``atomic.add``, ``threadIdx.x``)."""

    def __init__(self, name: str, members, doc: str = ""):
        super().__init__(name, doc)
        for m in members:
            attr = m.rstrip("_") if m.endswith("_") and m[:-1] in ("and", "or") else m
            setattr(self, m, Intrinsic(f"{name}.{attr}"))


def _dim3(name):
    return Namespace(name, ("x", "y", "z"), f"``{name}.x``, ``.y``, ``.z`` inside a kernel.")


threadIdx = _dim3("threadIdx")
blockIdx = _dim3("blockIdx")
blockDim = _dim3("blockDim")
gridDim = _dim3("gridDim")
laneid = Intrinsic("laneid", "The thread's lane in its warp (0-31).")
warpid = Intrinsic("warpid", "The thread's warp in its block (linear thread index // 32).")
warpsize = 32

grid = Intrinsic("grid", "grid(ndim): the thread's absolute position in the grid (an int, or a tuple).")
gridsize = Intrinsic("gridsize", "gridsize(ndim): the number of threads in the grid along each axis.")

shared = Namespace("shared", ("array",), "shared.array(shape, dtype): a block-shared array; shape 0: the dynamic one.")
local = Namespace("local", ("array",), "local.array(shape, dtype): a per-thread array.")
const = Namespace("const", ("array_like",), "const.array_like(a): a constant copy of a global NumPy array.")

syncthreads = Intrinsic("syncthreads")
syncthreads_count = Intrinsic("syncthreads_count")
syncthreads_and = Intrinsic("syncthreads_and")
syncthreads_or = Intrinsic("syncthreads_or")
syncwarp = Intrinsic("syncwarp")
threadfence = Intrinsic("threadfence")
threadfence_block = Intrinsic("threadfence_block")
threadfence_system = Intrinsic("threadfence_system")

atomic = Namespace("atomic", ("add", "sub", "min", "max", "nanmin", "nanmax", "exch", "inc", "dec", "and_", "or_",
                              "xor", "cas", "compare_and_swap"))

shfl_sync = Intrinsic("shfl_sync")
shfl_up_sync = Intrinsic("shfl_up_sync")
shfl_down_sync = Intrinsic("shfl_down_sync")
shfl_xor_sync = Intrinsic("shfl_xor_sync")
ballot_sync = Intrinsic("ballot_sync")
any_sync = Intrinsic("any_sync")
all_sync = Intrinsic("all_sync")
eq_sync = Intrinsic("eq_sync")
match_any_sync = Intrinsic("match_any_sync")
match_all_sync = Intrinsic("match_all_sync")
nanosleep = Intrinsic("nanosleep", "nanosleep(ns): suspends the thread for about ns nanoseconds (CUDA); nothing on the "
                      "CPU backend.")
activemask = Intrinsic("activemask")
lanemask_lt = Intrinsic("lanemask_lt")

popc = Intrinsic("popc")
clz = Intrinsic("clz")
ffs = Intrinsic("ffs")
brev = Intrinsic("brev")
fma = Intrinsic("fma")
cbrt = Intrinsic("cbrt")
selp = Intrinsic("selp")

literal_unroll = Intrinsic("literal_unroll", "for x in literal_unroll(t): a loop over a tuple, unrolled at compile "
                           "time (any loop over a tuple is).")

cg = Namespace("cg", ("this_grid",), "cg.this_grid().sync(): a barrier for every thread of the grid (the launch "
               "must fit on the device at once).")

block_reduce = Intrinsic("block_reduce", "block_reduce(value, op='sum'): every thread of the block gets the reduction.")
block_inclusive_scan = Intrinsic("block_inclusive_scan")
block_exclusive_scan = Intrinsic("block_exclusive_scan")
warp_reduce = Intrinsic("warp_reduce")
warp_inclusive_scan = Intrinsic("warp_inclusive_scan")
warp_exclusive_scan = Intrinsic("warp_exclusive_scan")

from ._libdevice import FP16 as _FP16, LIBDEVICE as _LIBDEVICE  # noqa: E402

fp16 = Namespace("fp16", sorted(_FP16), "Numba's cuda.fp16: half-precision functions (hadd, hfma, hsqrt, heq, "
                 "hmax, ...) of float16 values.")
libdevice = Namespace("libdevice", sorted(_LIBDEVICE), "Numba's cuda.libdevice: the CUDA math library's functions "
                      "(expf, rsqrtf, sincosf, popc, fmaf, saturatef, ...), on both backends.")

# Intrinsics at which the threads of a warp or block exchange values: on the CPU backend a thread
# stops there until the others of its warp (or block) arrive.
WARP_SITES = {"shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "ballot_sync", "any_sync",
              "match_any_sync", "match_all_sync",
              "all_sync", "eq_sync", "syncwarp", "activemask", "warp_reduce", "warp_inclusive_scan",
              "warp_exclusive_scan"}
BLOCK_SITES = {"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "block_reduce",
               "block_inclusive_scan", "block_exclusive_scan"}
