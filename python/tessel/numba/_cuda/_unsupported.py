"""The names of Numba's CUDA API that tessel does not provide, and the error that names them."""
from __future__ import annotations

__all__ = ["UnsupportedError", "error", "UNSUPPORTED", "COMPILER_NAMES", "LAYER_NAMES", "compiler_name", "layer_name"]


class UnsupportedError(NotImplementedError, AttributeError):
    """A part of Numba's API that tessel.numba does not provide. A NotImplementedError, and also
    an AttributeError so that ``hasattr(cuda, name)`` and ``getattr(cuda, name, default)``
    keep working."""


UnsupportedError.__module__ = "tessel.numba.cuda"   # as users import it (the package is tessel.numba._cuda)


def error(name, reason, prefix="tessel.numba.cuda"):
    return UnsupportedError(f"{prefix}.{name} is not supported: {reason}")


# Names of Numba's CUDA API that the kernel compiler (tessel.kernel) provides: resolved from
# there when first used.
COMPILER_NAMES = frozenset("""
grid gridsize threadIdx blockIdx blockDim gridDim laneid warpsize warpid shared local const
atomic syncthreads syncthreads_count syncthreads_and syncthreads_or syncwarp threadfence threadfence_block
threadfence_system shfl_sync shfl_up_sync shfl_down_sync shfl_xor_sync ballot_sync any_sync all_sync eq_sync
activemask lanemask_lt popc clz ffs brev fma cbrt selp
match_any_sync match_all_sync nanosleep literal_unroll block_reduce
block_inclusive_scan block_exclusive_scan warp_reduce warp_inclusive_scan warp_exclusive_scan cg
KernelRuntimeError
""".split())

# Names of Numba's CUDA API that tessel.numba's own modules provide over tessel.kernel (the module
# and the name there), imported when first used.
LAYER_NAMES = {
    "jit": ("dispatcher", "jit"), "declare_device": ("dispatcher", "declare_device"),
    "In": ("dispatcher", "In"), "Out": ("dispatcher", "Out"), "InOut": ("dispatcher", "InOut"),
    "reduce": ("_reduction", "reduce"), "Reduce": ("_reduction", "Reduce"),
    "vote_sync_any": ("dispatcher", "vote_sync_any"), "vote_sync_all": ("dispatcher", "vote_sync_all"),
    "vote_sync_uni": ("dispatcher", "vote_sync_uni"), "vote_sync_ballot": ("dispatcher", "vote_sync_ballot"),
    "compile_ptx": ("dispatcher", "compile_ptx"), "compile": ("dispatcher", "compile_kernel"),
    "compile_ptx_for_current_device": ("dispatcher", "compile_ptx_for_current_device"),
    "compile_for_current_device": ("dispatcher", "compile_for_current_device"),
}


UNSUPPORTED = {
    "managed_array": "tessel has no managed (unified) memory arrays; use device_array or mapped_array",
    "mapped": "tessel cannot map host memory into a GPU's address space; use to_device / copy_to_host "
              "(on the CPU backend, device arrays are host memory already)",
    "open_ipc_array": "CUDA IPC handles are not exposed by tessel",
    "set_memory_manager": "tessel's caching allocator cannot be replaced by a Numba EMM plugin",
    "BaseCUDAMemoryManager": "tessel's caching allocator cannot be replaced by a Numba EMM plugin",
    "HostOnlyCUDAMemoryManager": "tessel's caching allocator cannot be replaced by a Numba EMM plugin",
    "GetIpcHandleMixin": "CUDA IPC handles are not exposed by tessel",
    "IpcHandle": "CUDA IPC handles are not exposed by tessel",
    "MemoryPointer": "device memory is held by tessel arrays (d.__tessel_array__), not Numba memory objects",
    "MappedMemory": "tessel cannot map host memory into a GPU's address space",
    "PinnedMemory": "pinned memory comes from tessel's pool (cuda.pinned_array, ts.cuda.pinned_empty)",
    "nvvm": "tessel compiles with NVRTC, not NVVM",
    "driver": "Numba's driver bindings are not part of tessel; tessel's CUDA API is tessel.cuda",
    "Archive": "linking external code into kernels is not supported",
    "CUSource": "linking external code into kernels is not supported",
    "Cubin": "linking external code into kernels is not supported",
    "Fatbin": "linking external code into kernels is not supported",
    "LinkableCode": "linking external code into kernels is not supported",
    "LTOIR": "linking external code into kernels is not supported",
    "Object": "linking external code into kernels is not supported",
    "PTXSource": "linking external code into kernels is not supported",
    "ldca": "cache-hinted loads are not supported", "ldcg": "cache-hinted loads are not supported",
    "ldcs": "cache-hinted loads are not supported", "ldlu": "cache-hinted loads are not supported",
    "ldcv": "cache-hinted loads are not supported", "stcg": "cache-hinted stores are not supported",
    "stcs": "cache-hinted stores are not supported", "stwb": "cache-hinted stores are not supported",
    "stwt": "cache-hinted stores are not supported",
    "require_context": "tessel has no per-thread CUDA contexts to require",
    "simulator": "tessel's CPU backend replaces Numba's simulator (cuda.select_device('cpu'))",
    "initialize": "tessel initializes CUDA lazily",
    "memory_management": "Numba's NRT memory management is not supported",
    "get_ipc_handle": "CUDA IPC handles are not exposed by tessel",
}
# Numba's CUDA vector types (float32x4, int2, ...): not supported.
for _base in ("char", "short", "int", "long", "longlong", "uchar", "ushort", "uint", "ulong", "ulonglong",
              "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64"):
    for _n in (1, 2, 3, 4):
        UNSUPPORTED.setdefault(f"{_base}{_n}" if not _base[-1].isdigit() else f"{_base}x{_n}",
                               "CUDA vector types are not supported by tessel's kernel compiler")
del _base, _n


def compiler_name(name):
    """Resolves a compiler name from tessel.kernel, or raises an error naming it."""
    try:
        from tessel import kernel
    except ImportError as failure:
        raise error(name, f"tessel's kernel compiler (tessel.kernel) cannot be imported: {failure}") from None
    try:
        return getattr(kernel, name)
    except AttributeError:
        raise error(name, "tessel's kernel compiler (tessel.kernel) does not provide it") from None


def layer_name(name):
    """Resolves a name of LAYER_NAMES from its tessel.numba module (which imports tessel.kernel)."""
    import importlib

    module, attr = LAYER_NAMES[name]
    try:
        found = importlib.import_module(f".{module}", __package__)
    except ImportError as failure:
        raise error(name, f"tessel's kernel compiler (tessel.kernel) cannot be imported: {failure}") from None
    if attr.startswith("vote_sync_"):
        return found._vote_aliases()[attr]
    return getattr(found, attr)
