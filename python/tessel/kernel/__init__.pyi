# Type stubs of tessel.kernel (also the source of its API reference, docs/api/kernel.rst; the
# docstrings of functions and classes without one here come from the .py files). The intrinsics
# are written as functions and classes, as Numba's CUDA stubs are; at run time each is an object
# that only the kernel compiler understands, and calling one outside a kernel raises RuntimeError.
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, TypeVar, Union, overload

_F = TypeVar("_F", bound=Callable[..., Any])

Dim3Like = Union[int, Tuple[int], Tuple[int, int], Tuple[int, int, int]]

# ---- kernels ---------------------------------------------------------------------------------

@overload
def jit(func: None = None, *, device: Literal[False] = False, inline: bool = False, fastmath: bool = False,
        debug: Optional[bool] = None, lineinfo: bool = False, cache: bool = True,
        max_registers: Optional[int] = None, opt: bool = True,
        numbers: Literal["numpy", "numba"] = "numpy") -> Callable[[Callable[..., Any]], Kernel]:
    """Compiles a Python function into a kernel (``@jit``), or with ``device=True`` into a device
    function (``@jit(device=True)``); Numba's ``@cuda.jit``.

    There are no type annotations: each launch's argument types (an array's dtype, number of
    axes and whether it is C-contiguous; a number's type) select a specialization, generated as
    C++ and compiled on first use (NVRTC for a CUDA device, the host C++ compiler for the CPU
    backend), then cached in memory and on disk.

    Args:
        func: the function; without it, ``jit(...)`` returns the decorator.
        device: compile a device function, callable from kernels and inlined at each call.
        fastmath: ``--use_fast_math`` on CUDA, ``-ffast-math``'s optimizations on the CPU (without its flush-to-zero).
        debug: check every array index and raise ``IndexError`` naming the kernel, line, array,
            index and thread; a failing ``assert`` prints a message (without debug, ``assert`` is
            ignored, as in Numba). None: on when ``TESSEL_CHECK`` has ``bounds`` (or ``all``).
        lineinfo: ``-lineinfo`` for NVRTC (source lines in profilers).
        max_registers: ``--maxrregcount`` for NVRTC.
        numbers: how numbers are typed: ``"numpy"`` (NumPy 2's rules: a Python literal takes the
            other operand's type) or ``"numba"`` (Numba's: literals are int64/float64/complex128,
            integers compute in 64 bits, a float stored into an integer array is truncated);
            ``tessel.numba`` uses ``"numba"``.

    ``inline``, ``cache`` and ``opt`` are accepted for Numba compatibility and change nothing:
    device functions are always inlined, compiled kernels always cached, the code always
    optimized. Any other keyword is a ``TypeError``.
    """
@overload
def jit(func: None = None, *, device: Literal[True], inline: bool = False, fastmath: bool = False,
        debug: Optional[bool] = None, lineinfo: bool = False, cache: bool = True,
        max_registers: Optional[int] = None, opt: bool = True,
        numbers: Literal["numpy", "numba"] = "numpy") -> Callable[[Callable[..., Any]], DeviceFunction]: ...
@overload
def jit(func: Callable[..., Any], *, device: Literal[False] = False, inline: bool = False, fastmath: bool = False,
        debug: Optional[bool] = None, lineinfo: bool = False, cache: bool = True,
        max_registers: Optional[int] = None, opt: bool = True,
        numbers: Literal["numpy", "numba"] = "numpy") -> Kernel: ...
@overload
def jit(func: Callable[..., Any], *, device: Literal[True], inline: bool = False, fastmath: bool = False,
        debug: Optional[bool] = None, lineinfo: bool = False, cache: bool = True,
        max_registers: Optional[int] = None, opt: bool = True,
        numbers: Literal["numpy", "numba"] = "numpy") -> DeviceFunction: ...

class Kernel:
    """A Python function compiled into a kernel (what ``@jit`` returns); Numba's dispatcher.

    Launch it with ``kernel[grid, block](*args)``, ``kernel[grid, block, stream](*args)`` or
    ``kernel[grid, block, stream, shared_bytes](*args)``, or ``kernel.forall(n)(*args)``. The
    kernel runs on the device of its array arguments (the default device when there are none).
    Arguments are tessel arrays, NumPy arrays (copied to that device before the launch and back
    after it, unless read-only), objects with
    ``__dlpack__`` or ``__cuda_array_interface__`` (viewed without a copy), and numbers (Python
    ``bool``, ``int``, ``float``, ``complex`` are ``bool``, ``int64``, ``float64``,
    ``complex128``; NumPy scalars keep their type). Calling the kernel without a launch
    configuration is a ``TypeError``.
    """
    py_func: Callable[..., Any]
    """The decorated Python function."""
    options: Dict[str, Any]
    """The options given to :func:`jit`."""
    def __getitem__(self, config: Union[Tuple[Dim3Like, Dim3Like], Tuple[Dim3Like, Dim3Like, Any],
                                        Tuple[Dim3Like, Dim3Like, Any, int]]) -> Callable[..., None]:
        """The launch configuration ``[grid, block]``, ``[grid, block, stream]`` or ``[grid, block,
        stream, shared_bytes]``: grid and block are ints or tuples of up to 3 ints (at most 1024
        threads in a block, 64 along z); stream is None (the current stream), a
        :class:`tessel.Stream`, a ``torch.cuda.Stream`` or a CuPy stream; shared_bytes sizes the
        dynamic shared array (``shared.array(0, dtype)``). Returns the callable that launches."""
    def forall(self, ntasks: int, tpb: int = 0, stream: Any = None, sharedmem: int = 0) -> Callable[..., None]:
        """A launch of at least ``ntasks`` threads in blocks of ``tpb`` (0: 256); as Numba's
        ``forall``, the kernel checks its index against the size itself."""
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Raises ``TypeError``: a kernel is launched through ``kernel[grid, block](...)``."""
    def source(self, *args: Any, target: Optional[Literal["cuda", "cpu"]] = None) -> str:
        """The generated C++ for these arguments' types (``target``: ``"cuda"`` or ``"cpu"``;
        default: the backend the arguments are on). Compiles nothing."""
    def ptx(self, *args: Any, arch: Optional[str] = None) -> str:
        """The PTX NVRTC makes of the kernel for these arguments' types (``arch``: ``"sm_90"``, ...;
        default: the current CUDA device's, or sm_90 without one). Needs a CUDA build, not a GPU;
        for reading only: launches use the CUBIN."""
    def inspect_types(self) -> List[Tuple[str, ...]]:
        """The compiled specializations: per specialization, its argument types as strings (such
        as ``"array(float32, 1d, C)"``) followed by its target (``"cuda"`` or ``"cpu"``)."""
    @property
    def signatures(self) -> List[Tuple[Any, ...]]:
        """The argument types of each compiled specialization."""

class DeviceFunction:
    """A Python function callable from kernels (what ``@jit(device=True)`` returns).

    Inside a kernel, each call is inlined and typed for the call's arguments; a device function
    may call other device functions, return tuples and use barriers and warp intrinsics.
    Outside a kernel, calling it runs the Python function.
    """
    py_func: Callable[..., Any]
    """The decorated Python function."""
    def overload(self, fn: Callable[..., Any]) -> DeviceFunction:
        """Adds ``fn`` as a variant of this device function, chosen at a call when its number of
        parameters fits the call's arguments (the first that fits, in the order added; the
        original first). Returns this device function."""
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class KernelCompileError(TypeError):
    """A kernel that tessel cannot compile: the message names the kernel, the file and the line."""

# ---- thread indexing -------------------------------------------------------------------------

class threadIdx:
    """The thread's index in its block: ``threadIdx.x``, ``.y``, ``.z`` (ints, from 0 to
    ``blockDim`` - 1)."""
    x: int
    y: int
    z: int
class blockIdx:
    """The block's index in the grid: ``blockIdx.x``, ``.y``, ``.z`` (from 0 to ``gridDim`` - 1)."""
    x: int
    y: int
    z: int
class blockDim:
    """The shape of a block, as given at the launch: ``blockDim.x``, ``.y``, ``.z``."""
    x: int
    y: int
    z: int
class gridDim:
    """The shape of the grid in blocks, as given at the launch: ``gridDim.x``, ``.y``, ``.z``."""
    x: int
    y: int
    z: int

laneid: int
"""The thread's lane in its warp, 0 to 31 (its linear index in the block modulo 32)."""
warpid: int
"""The thread's warp in its block (its linear index in the block divided by 32)."""
warpsize: int
"""The number of threads in a warp: 32, on the CPU backend too."""

@overload
def grid(ndim: Literal[1]) -> int:
    """The thread's absolute position in the grid: ``blockIdx * blockDim + threadIdx`` along
    ``ndim`` axes (the constant 1, 2 or 3); an int for 1, else a tuple (x first)."""
@overload
def grid(ndim: Literal[2]) -> Tuple[int, int]: ...
@overload
def grid(ndim: Literal[3]) -> Tuple[int, int, int]: ...
@overload
def gridsize(ndim: Literal[1]) -> int:
    """The number of threads in the grid along ``ndim`` axes (``blockDim * gridDim``): the step
    of a grid-stride loop; an int for 1, else a tuple."""
@overload
def gridsize(ndim: Literal[2]) -> Tuple[int, int]: ...
@overload
def gridsize(ndim: Literal[3]) -> Tuple[int, int, int]: ...

# ---- memory ----------------------------------------------------------------------------------

class shared:
    """Shared memory: arrays that the threads of a block share."""
    @staticmethod
    def array(shape: Union[int, Tuple[int, ...]], dtype: Any) -> Any:
        """A C-contiguous array in the block's shared memory, of a compile-time constant shape and
        dtype; each call site is one array for the whole block, uninitialized.
        ``shared.array(0, dtype)`` is the dynamic shared array: 1-d, sized by the launch's
        ``shared_bytes``."""
class local:
    """Local memory: arrays private to each thread."""
    @staticmethod
    def array(shape: Union[int, Tuple[int, ...]], dtype: Any) -> Any:
        """A C-contiguous array private to the thread, of a compile-time constant positive shape and
        dtype, uninitialized."""
class _GridGroup:
    """The grid of the launch, from ``cg.this_grid()``."""
    def sync(self) -> None:
        """A barrier for every thread of the grid: no thread goes on until all have arrived. On CUDA
        every block of the launch must be resident at once (a launch that does not fit raises
        ValueError); on the CPU backend every block pauses there."""
class cg:
    """Cooperative groups, as Numba's ``cuda.cg``."""
    @staticmethod
    def this_grid() -> _GridGroup:
        """The grid of the launch; its ``sync()`` is a grid-wide barrier."""
class const:
    """Constant memory."""
    @staticmethod
    def array_like(ary: Any) -> Any:
        """A read-only copy, in constant memory, of a NumPy array that the kernel reads from its
        module or its closure, frozen into the kernel when it is compiled."""

# ---- synchronization -------------------------------------------------------------------------

def syncthreads() -> None:
    """Barrier: waits until every thread of the block has reached this call, and makes the
    shared and global memory writes made before it visible to the block."""
def syncthreads_count(predicate: Any) -> int:
    """:func:`syncthreads`, returning the number of threads of the block whose ``predicate`` is
    true."""
def syncthreads_and(predicate: Any) -> int:
    """:func:`syncthreads`, returning nonzero when ``predicate`` is true in every thread of the
    block."""
def syncthreads_or(predicate: Any) -> int:
    """:func:`syncthreads`, returning nonzero when ``predicate`` is true in any thread of the
    block."""
def syncwarp(mask: int = 0xFFFFFFFF) -> None:
    """Barrier for the lanes of the warp named in ``mask``."""
def threadfence() -> None:
    """Memory fence for the device: this thread's writes before it are seen by every thread of
    the grid before its writes after it."""
def threadfence_block() -> None:
    """Memory fence for the block."""
def threadfence_system() -> None:
    """Memory fence for the device and the host (and peer devices)."""

# ---- atomics ---------------------------------------------------------------------------------

class atomic:
    """Atomic read-modify-write operations on one array element: ``atomic.add(ary, idx, val)``
    and the like. ``idx`` is an int or a tuple of ints that selects one element; each returns the
    element's old value, as if loaded atomically. ``add``, ``sub``, ``min``, ``max``, ``nanmin``,
    ``nanmax``, ``exch``, ``cas`` and ``compare_and_swap`` take int32, int64, uint32, uint64,
    float32 and float64 arrays; ``and_``, ``or_`` and ``xor`` the integer ones; ``inc`` and
    ``dec`` uint32 and uint64."""
    @staticmethod
    def add(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] += val``; returns the old value."""
    @staticmethod
    def sub(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] -= val``; returns the old value."""
    @staticmethod
    def min(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] = min(ary[idx], val)``; returns the old value."""
    @staticmethod
    def max(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] = max(ary[idx], val)``; returns the old value."""
    @staticmethod
    def nanmin(ary: Any, idx: Any, val: Any) -> Any:
        """The NaN-aware ``ary[idx] = min(ary[idx], val)`` (Numba's ``nanmin``); returns the old value."""
    @staticmethod
    def nanmax(ary: Any, idx: Any, val: Any) -> Any:
        """The NaN-aware ``ary[idx] = max(ary[idx], val)`` (Numba's ``nanmax``); returns the old value."""
    @staticmethod
    def exch(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] = val``; returns the old value."""
    @staticmethod
    def inc(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] = 0 if ary[idx] >= val else ary[idx] + 1`` (uint32, uint64); returns the old
        value."""
    @staticmethod
    def dec(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] = val if ary[idx] == 0 or ary[idx] > val else ary[idx] - 1`` (uint32,
        uint64); returns the old value."""
    @staticmethod
    def and_(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] &= val`` (integers); returns the old value."""
    @staticmethod
    def or_(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] |= val`` (integers); returns the old value."""
    @staticmethod
    def xor(ary: Any, idx: Any, val: Any) -> Any:
        """``ary[idx] ^= val`` (integers); returns the old value."""
    @staticmethod
    def cas(ary: Any, idx: Any, old: Any, val: Any) -> Any:
        """``ary[idx] = val`` if ``ary[idx] == old`` (compared bit for bit); returns the old
        value."""
    @staticmethod
    def compare_and_swap(ary: Any, old: Any, val: Any) -> Any:
        """:meth:`cas` on the first element of the 1-d array ``ary``."""

# ---- warps -----------------------------------------------------------------------------------
# `mask` names the participating lanes (bit i: lane i), as in CUDA's *_sync intrinsics. Values
# exchanged by shuffles are bools, integers, float32 or float64.

def shfl_sync(mask: int, value: Any, src_lane: int) -> Any:
    """The ``value`` of lane ``src_lane`` of the warp."""
def shfl_up_sync(mask: int, value: Any, delta: int) -> Any:
    """The ``value`` of lane ``laneid - delta``; lanes below ``delta`` keep their own."""
def shfl_down_sync(mask: int, value: Any, delta: int) -> Any:
    """The ``value`` of lane ``laneid + delta``; lanes beyond the warp's end keep their own."""
def shfl_xor_sync(mask: int, value: Any, lane_mask: int) -> Any:
    """The ``value`` of lane ``laneid ^ lane_mask`` (the butterfly of a warp reduction)."""
def ballot_sync(mask: int, predicate: Any) -> int:
    """A uint32 whose bit i is set when lane i is in ``mask`` and its ``predicate`` is true."""
def any_sync(mask: int, predicate: Any) -> int:
    """Nonzero when ``predicate`` is true in any lane of ``mask``."""
def all_sync(mask: int, predicate: Any) -> int:
    """Nonzero when ``predicate`` is true in every lane of ``mask``."""
def eq_sync(mask: int, predicate: Any) -> int:
    """Nonzero when ``predicate`` has the same truth value in every lane of ``mask``."""
def match_any_sync(mask: int, value: Any) -> int:
    """The lanes of ``mask`` whose ``value`` (an integer, float32 or float64) equals this lane's."""
def match_all_sync(mask: int, value: Any) -> Tuple[int, bool]:
    """``(mask, True)`` when every lane of ``mask`` has the same ``value``, else ``(0, False)``."""
def nanosleep(ns: int) -> None:
    """Suspends the thread for about ``ns`` nanoseconds (CUDA); nothing on the CPU backend."""
def activemask() -> int:
    """A uint32 mask of the lanes of the warp that are executing this call."""
def lanemask_lt() -> int:
    """A uint32 mask of the lanes below this thread's lane (``(1 << laneid) - 1``)."""

# ---- bits and arithmetic ---------------------------------------------------------------------

def popc(x: int) -> int:
    """The number of bits set in the integer ``x`` (32 or 64 bits, by its type)."""
def clz(x: int) -> int:
    """The number of leading zero bits of the integer ``x`` (32 or 64 bits, by its type)."""
def ffs(x: int) -> int:
    """The position of the least significant bit set in ``x``, counting from 1; 0 when ``x`` is 0."""
def brev(x: int) -> int:
    """``x`` with its bits reversed (a uint32, or a uint64 for 64-bit integers)."""
def fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once (float32 or float64; float16 and bfloat16 compute in float32)."""
def cbrt(x: float) -> float:
    """The cube root of ``x``."""
def selp(predicate: Any, a: Any, b: Any) -> Any:
    """``a`` if ``predicate`` is true, else ``b`` (in their promoted type)."""

def literal_unroll(container: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """``for x in literal_unroll(t):`` a loop over a tuple, unrolled at compile time, as Numba's
    (any loop over a tuple is unrolled; its items may have different types)."""

# ---- half precision and the CUDA math library (Numba's cuda.fp16 and cuda.libdevice) -------------

class fp16:
    """Numba's ``cuda.fp16``: functions of float16 values (arguments of other real types are
    converted to float16), on CUDA and the CPU backend. Arithmetic rounds each result to float16;
    ``hfma`` rounds once; the other functions compute in float32 and round."""
    @staticmethod
    def hadd(a: Any, b: Any) -> Any: ...
    @staticmethod
    def hsub(a: Any, b: Any) -> Any: ...
    @staticmethod
    def hmul(a: Any, b: Any) -> Any: ...
    @staticmethod
    def hdiv(a: Any, b: Any) -> Any: ...
    @staticmethod
    def hneg(a: Any) -> Any: ...
    @staticmethod
    def habs(a: Any) -> Any: ...
    @staticmethod
    def hfma(a: Any, b: Any, c: Any) -> Any:
        """``a * b + c`` rounded once to float16."""
    @staticmethod
    def hsqrt(a: Any) -> Any: ...
    @staticmethod
    def hrsqrt(a: Any) -> Any: ...
    @staticmethod
    def hrcp(a: Any) -> Any: ...
    @staticmethod
    def hexp(a: Any) -> Any: ...
    @staticmethod
    def hexp2(a: Any) -> Any: ...
    @staticmethod
    def hexp10(a: Any) -> Any: ...
    @staticmethod
    def hlog(a: Any) -> Any: ...
    @staticmethod
    def hlog2(a: Any) -> Any: ...
    @staticmethod
    def hlog10(a: Any) -> Any: ...
    @staticmethod
    def hsin(a: Any) -> Any: ...
    @staticmethod
    def hcos(a: Any) -> Any: ...
    @staticmethod
    def hceil(a: Any) -> Any: ...
    @staticmethod
    def hfloor(a: Any) -> Any: ...
    @staticmethod
    def hrint(a: Any) -> Any: ...
    @staticmethod
    def htrunc(a: Any) -> Any: ...
    @staticmethod
    def heq(a: Any, b: Any) -> bool: ...
    @staticmethod
    def hne(a: Any, b: Any) -> bool:
        """Ordered not-equal: False when either is NaN (CUDA's ``__hne``)."""
    @staticmethod
    def hge(a: Any, b: Any) -> bool: ...
    @staticmethod
    def hgt(a: Any, b: Any) -> bool: ...
    @staticmethod
    def hle(a: Any, b: Any) -> bool: ...
    @staticmethod
    def hlt(a: Any, b: Any) -> bool: ...
    @staticmethod
    def hmax(a: Any, b: Any) -> Any:
        """The larger; a NaN gives the other operand and +0 is above -0 (CUDA's ``__hmax``)."""
    @staticmethod
    def hmin(a: Any, b: Any) -> Any:
        """The smaller; a NaN gives the other operand and -0 is below +0 (CUDA's ``__hmin``)."""

class libdevice:
    """Numba's ``cuda.libdevice``: the CUDA math library's functions with Numba's names (libdevice's
    without ``__nv_``) and types, on CUDA (the library's functions and intrinsics) and on the CPU
    backend (the C++ library). Arguments are converted to the function's types. ``exp``/``expf``,
    ``sqrt``/``sqrtf``, ``rsqrtf``, ``erfinv``, ``normcdfinv``, ``sinpi``, ``j0``, ...; the fast
    approximations ``fast_expf``, ``fast_sinf``, ... (exact on the CPU); functions of several
    results return tuples (``sincosf(x)`` is ``(sin, cos)``, ``frexp(x)`` ``(mantissa, exponent)``,
    ``modf``, ``remquo``); predicates return int32 (``isnand``, ``isnanf``, ``signbitf``);
    integer functions (``popc``, ``clz``, ``brev``, ``byte_perm``, ``mulhi``, ``umax``, ``sad``,
    ...; the unsigned ones take and return int32/int64 bits, as Numba's); conversions and
    arithmetic with a rounding mode (``double2int_rz``, ``float2ll_rd``, ``fadd_ru``, ``dmul_rd``,
    ``fmaf_rz``, ``int2float_rd``, ...; on the CPU with the FPU's rounding mode set). ``nan`` and
    ``nanf`` are not provided (nor by Numba)."""
    def __getattr__(self, name: str) -> Callable[..., Any]: ...

# ---- record arrays -------------------------------------------------------------------------------

class RecordArray:
    """A record (structured dtype) array as a kernel argument: ``storage`` is a tessel array whose
    last axis holds each record (its bytes as uint8, or its fields when they all have one type),
    ``dtype`` the structured NumPy dtype. A kernel reads and writes fields as ``r[i].x`` or
    ``r[i]['x']``, keeps a record as ``rec = r[i]`` (a reference), and views one field of every
    record as ``r['x']`` (or ``r.x``); subarray fields are arrays (``r[i].v[k]``). Fields not
    aligned for their type (packed dtypes) are read and written byte by byte. NumPy record arrays
    are accepted directly (their bytes go to the device and back)."""
    storage: Any
    dtype: Any
    def __init__(self, storage: Any, dtype: Any) -> None: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...

def record_bytes_view(host: Any) -> Any:
    """The bytes of a structured NumPy array as a uint8 view of shape ``host.shape + (itemsize,)``
    (any strides): what :class:`RecordArray` holds."""

# ---- block and warp collectives (tessel's; Numba has none) -------------------------------------
# Every thread of the block (warp) must call them, and every thread gets the result. `op` is
# "sum" (the default), "min", "max" or a device function of two values.

def block_reduce(value: Any, op: Union[str, DeviceFunction] = "sum") -> Any:
    """The reduction of ``value`` over the threads of the block, returned to every thread."""
def block_inclusive_scan(value: Any, op: Union[str, DeviceFunction] = "sum") -> Any:
    """The inclusive scan of ``value`` over the threads of the block, in linear thread order."""
def block_exclusive_scan(value: Any, op: Union[str, DeviceFunction] = "sum") -> Any:
    """The exclusive scan of ``value`` over the threads of the block; the first thread gets the
    operator's identity (0 for a device function)."""
def warp_reduce(value: Any, op: Union[str, DeviceFunction] = "sum") -> Any:
    """The reduction of ``value`` over the lanes of the warp, returned to every lane."""
def warp_inclusive_scan(value: Any, op: Union[str, DeviceFunction] = "sum") -> Any:
    """The inclusive scan of ``value`` over the lanes of the warp."""
def warp_exclusive_scan(value: Any, op: Union[str, DeviceFunction] = "sum") -> Any:
    """The exclusive scan of ``value`` over the lanes of the warp; lane 0 gets the operator's
    identity (0 for a device function)."""

__all__ = ["jit", "Kernel", "DeviceFunction", "KernelCompileError", "threadIdx", "blockIdx", "blockDim", "gridDim",
           "laneid", "warpid", "warpsize", "grid", "gridsize", "shared", "local", "const", "syncthreads",
           "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp", "threadfence", "threadfence_block",
           "threadfence_system", "atomic", "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync",
           "ballot_sync", "any_sync", "all_sync", "eq_sync", "activemask", "lanemask_lt", "popc", "clz", "ffs",
           "brev", "fma", "cbrt", "selp", "block_reduce", "block_inclusive_scan", "block_exclusive_scan",
           "warp_reduce", "warp_inclusive_scan", "warp_exclusive_scan", "cg", "literal_unroll", "fp16", "libdevice",
           "RecordArray", "record_bytes_view", "match_any_sync", "match_all_sync", "nanosleep"]
