"""tessel's kernel language: Python functions compiled into CUDA and CPU kernels.

``@tessel.jit`` (this module's :func:`jit`) compiles a function for the argument types of each
launch; inside it, the names of this module (Numba's CUDA names) give thread indices, shared and
local arrays, barriers, atomics, warp intrinsics and block collectives. See the kernels guide.
"""
from ._dispatch import DeviceFunction, Kernel, RecordArray, jit, record_bytes_view
from ._compiler import KernelCompileError
from ._intrinsics import (activemask, cg, all_sync, any_sync, atomic, ballot_sync, blockDim, blockIdx,
                          block_exclusive_scan, block_inclusive_scan, block_reduce, brev, cbrt, clz, const, eq_sync,
                          ffs, fma, fp16, grid, gridDim, gridsize, laneid, lanemask_lt, libdevice, literal_unroll,
                          local, match_all_sync, match_any_sync, nanosleep, popc, selp, shared,
                          shfl_down_sync, shfl_sync, shfl_up_sync, shfl_xor_sync, syncthreads, syncthreads_and,
                          syncthreads_count, syncthreads_or, syncwarp, threadfence, threadfence_block,
                          threadfence_system, threadIdx, warp_exclusive_scan, warp_inclusive_scan, warp_reduce,
                          warpid, warpsize)

__all__ = ["jit", "Kernel", "DeviceFunction", "KernelCompileError", "RecordArray", "record_bytes_view", "threadIdx",
           "blockIdx", "blockDim", "gridDim", "laneid", "warpid", "warpsize", "grid", "gridsize", "shared", "local",
           "const", "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
           "threadfence", "threadfence_block", "threadfence_system", "atomic", "shfl_sync", "shfl_up_sync",
           "shfl_down_sync", "shfl_xor_sync", "ballot_sync", "any_sync", "all_sync", "eq_sync", "match_any_sync",
           "match_all_sync", "nanosleep", "activemask", "lanemask_lt", "popc", "clz", "ffs", "brev", "fma", "cbrt",
           "selp", "literal_unroll", "fp16", "libdevice", "block_reduce", "block_inclusive_scan",
           "block_exclusive_scan", "warp_reduce", "warp_inclusive_scan", "warp_exclusive_scan", "cg"]
