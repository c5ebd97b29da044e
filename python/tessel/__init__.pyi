"""Type stubs of tessel (Array API 2025.12 namespace plus NumPy-style extras)."""
from typing import Any, Iterator, Literal, Optional, Sequence, Tuple, Union, overload
import builtins
from . import cuda as cuda, random as random, fft as fft, linalg as linalg, sim as sim, distributed as distributed
from . import kernel as kernel
from .kernel import jit as jit

ShapeLike = Union[int, Sequence[int]]
Scalar = Union[bool, int, float, complex]
DTypeLike = Union[dtype, str, type]
DeviceLike = Union[Device, str, None]
ArrayLike = Union[Array, Scalar, Sequence[Any], Any]
Axis = Union[int, Tuple[int, ...], None]

__version__: str
__array_api_version__: str
e: float
pi: float
inf: float
nan: float
newaxis: None

class TesselError(Exception):
    """Base of every tessel error; the message names the op and the offending shapes, dtypes or devices."""
class ValueError(TesselError, builtins.ValueError):
    """A bad argument value (also a builtin ValueError)."""
class ShapeError(TesselError, builtins.ValueError):
    """Shapes that do not broadcast or match (also a ValueError)."""
class DTypeError(TesselError, TypeError):
    """A dtype the op does not support, or an unsafe cast (also a TypeError)."""
class IndexError(TesselError, builtins.IndexError):
    """An index or axis out of range (also a builtin IndexError)."""
class DeviceError(TesselError, RuntimeError):
    """Arrays on different devices, or CUDA needed but unavailable (also a RuntimeError)."""
class OutOfMemory(TesselError, MemoryError):
    """An allocation failed; the message has the requested, allocated, reserved and free bytes (also a MemoryError)."""
class CudaError(TesselError, RuntimeError):
    """A failed CUDA call, with the call and file:line. ``fatal`` marks sticky errors (the process must restart)."""
    code: int
    fatal: bool
class CompileError(TesselError, RuntimeError):
    """NVRTC could not compile a kernel; ``log`` holds the compiler's log."""
    log: str

class dtype:
    """A data type; the instances are singletons (``x.dtype is ts.float32``) and print as
    ``ts.float32``. A dtype equals itself, its name (``"float32"``), the NumPy dtype and scalar
    type of that name (``np.dtype("float32")``, ``np.float32``) and the Python type NumPy maps to
    it (``float`` is float64); it is unequal to anything else, and comparing never raises."""
    name: str
    itemsize: int
    kind: str
    @property
    def dtype(self) -> Any:
        """The NumPy dtype of the same name (``np.dtype(ts.float32)`` reads it)."""
    def __eq__(self, other: object) -> bool:
        """Equal to itself, its name, its NumPy dtype or type; False for anything else."""
    def __ne__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __call__(self, value: Any = 0, /) -> Array:
        """The value in this dtype, as NumPy's scalar types make one (``ts.float32(3)``: a 0-d array)."""
bool: dtype
int8: dtype
int16: dtype
int32: dtype
int64: dtype
uint8: dtype
uint16: dtype
uint32: dtype
uint64: dtype
float16: dtype
bfloat16: dtype
float32: dtype
float64: dtype
complex64: dtype
complex128: dtype

class Device:
    """``Device('cpu')``, ``Device('cuda')`` or ``Device('cuda:1')``."""
    type: str
    index: int
    def __init__(self, name: str) -> None: ...

class Stream:
    """A CUDA stream (or the CPU stream). ``Stream(device, priority)`` creates a new non-blocking stream."""
    def __init__(self, device: DeviceLike = None, priority: int = 0) -> None: ...
    @staticmethod
    def from_handle(handle: int, device: DeviceLike = None) -> Stream:
        """Adopts a stream created elsewhere (not owned: its creator keeps it alive)."""
    @staticmethod
    def default(device: DeviceLike = None) -> Stream:
        """The legacy default stream of a device."""
    @staticmethod
    def cpu() -> Stream:
        """The CPU backend's stream."""
    @staticmethod
    def priority_range(device: DeviceLike = None) -> Tuple[int, int]:
        """(greatest, least) stream priorities of a device."""
    device: Device
    handle: int
    ptr: int
    id: int
    priority: int
    owned: bool
    def synchronize(self) -> None:
        """The host waits for the stream's work (releases the GIL)."""
    def query(self) -> bool:
        """True when all work queued on the stream has finished."""
    def wait_stream(self, other: Stream) -> None:
        """Later work on this stream waits for the work queued on ``other`` so far."""

class Array:
    """An N-d array on a device: a view (shape, strides, offset, dtype) of shared storage.

    Operators follow NumPy (``/`` is true division, ``%`` the remainder, ``@`` matmul), with
    broadcasting and NumPy 2 promotion; in-place operators write into the array. Basic indexing
    (integers, slices, None, ...) gives views.
    """
    shape: Tuple[int, ...]
    ndim: int
    size: int
    dtype: dtype
    device: Device
    itemsize: int
    nbytes: int
    strides: Tuple[int, ...]
    data_ptr: int
    T: Array
    mT: Array
    real: Array
    imag: Array
    __cuda_array_interface__: dict
    def __array_namespace__(self, /, *, api_version: Optional[str] = None) -> Any:
        """The Array API namespace: the tessel module."""
    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of the array (versioned when ``max_version`` allows); the consumer's ``stream`` waits for tessel's current stream."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """(device type, device id) as DLPack spells them: (1, 0) for the CPU, (2, N) for cuda:N."""
    __dlpack_c_exchange_api__: Any  # PyCapsule "dlpack_exchange_api" (DLPack C exchange API)
    __c_dlpack_exchange_api__: Any  # the same capsule under the older name
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """A NumPy copy (always a copy: the data may be on a GPU)."""
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy ufuncs (``np.exp(x)``, ``np.add(x, y, out=z)``, ``np.add.reduce``) run as the tessel
        function on the array's device and return tessel arrays; NumPy arrays among the operands
        are moved to that device. A ufunc or method tessel lacks raises TypeError naming it."""
    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """NumPy functions (``np.sum``, ``np.concatenate``, ``np.where``, ...) on tessel arrays run as
        tessel's and return tessel arrays; one tessel lacks raises TypeError naming it (never a
        silent copy to the host)."""
    def __getitem__(self, key: Any) -> Array:
        """NumPy's indexing: integers, slices, None and ... give a view; integer arrays, boolean masks and lists of them give a copy (one device read on CUDA: the mask's count and the bounds flag)."""
    def __setitem__(self, key: Any, value: ArrayLike) -> None:
        """Writes value (broadcast and cast) into the selected elements; integer-array keys are checked before anything is written."""
    def __len__(self) -> int:
        """The size of the first axis."""
    def __bool__(self) -> bool: ...
    def __int__(self) -> int: ...
    def __float__(self) -> float: ...
    def __complex__(self) -> complex: ...
    def __index__(self) -> int: ...
    def item(self) -> Scalar:
        """The value of a one-element array as a Python scalar (waits for pending work)."""
    def tolist(self) -> Any:
        """The values as nested Python lists (a host copy)."""
    def numpy(self) -> Any:
        """A NumPy copy (bfloat16 becomes float32)."""
    def to_device(self, device: DeviceLike, /, *, stream: Optional[Stream] = None) -> Array:
        """A copy on another device (the array itself when already there); asynchronous."""
    def astype(self, dtype: DTypeLike, *, copy: bool = True) -> Array:
        """A copy in another dtype (``copy=False`` returns the array itself when the dtype is already right)."""
    def copy(self) -> Array:
        """A contiguous copy."""
    def contiguous(self) -> Array:
        """The array itself when C-contiguous, else a contiguous copy."""
    def is_contiguous(self) -> bool:
        """Whether the array is C-contiguous."""
    def reshape(self, *shape: Any) -> Array:
        """A view with a new shape when the strides allow it, else a copy."""
    def ravel(self) -> Array:
        """A 1-D view when the array is contiguous, else a copy."""
    def flatten(self) -> Array:
        """A 1-D copy in C order."""
    def transpose(self, *axes: Any) -> Array:
        """A view with the axes reversed, or in the given order."""
    def swapaxes(self, axis1: int, axis2: int) -> Array:
        """A view with two axes swapped."""
    def squeeze(self, axis: Axis = None) -> Array:
        """A view without axes of size one (all of them, or the given ones)."""
    def wait(self) -> None:
        """The host waits for pending writes to this array."""
    def conj(self) -> Array:
        """The complex conjugate."""
    # NumPy's ndarray methods (python/tessel/_numpy_protocols.py), as np.<name>(x) computes them
    def clip(self, min: Optional[Union[Scalar, Array]] = None, max: Optional[Union[Scalar, Array]] = None) -> Array:
        """Values limited to [min, max] (see :func:`tessel.clip`)."""
    def round(self, decimals: int = 0) -> Array:
        """Rounded half to even, to ``decimals`` places (:func:`around`)."""
    def dot(self, b: ArrayLike) -> Array:
        """NumPy's dot: a product with a scalar, or matmul with a 1-D or 2-D ``b``."""
    def nonzero(self) -> Tuple[Array, ...]:
        """The indices of the nonzero elements, one array per axis (see :func:`tessel.nonzero`)."""
    def argsort(self, axis: Optional[int] = -1) -> Array:
        """Indices that sort along axis (None: the flattened array); stable."""
    def take(self, indices: ArrayLike, axis: Optional[int] = None) -> Array:
        """Elements at indices along axis (None: of the flattened array, as NumPy's take)."""
    def repeat(self, repeats: Union[int, Array], axis: Optional[int] = None) -> Array:
        """Each element repeated (see :func:`tessel.repeat`)."""
    def fill(self, value: Scalar) -> None:
        """Sets every element to value, in place."""
    def sort(self, axis: Optional[int] = -1) -> None:
        """Sorts along axis in place (NumPy's ndarray.sort; :func:`tessel.sort` returns a copy)."""
    def get(self) -> Any:
        """A NumPy copy on the host (CuPy's ndarray.get)."""
    # ---- reduction methods: generated from the reduction rows by scripts/gen_op_stubs.py ----
    def sum(self, axis: Axis = None, *, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
        """Sum over ``axis`` (all axes by default). Bool and signed integers sum in int64, unsigned
        integers in uint64, floating-point and complex types in their own dtype (float16 and
        bfloat16 accumulate in float32); a given ``dtype`` is the one computed in and returned.
        """
    def prod(self, axis: Axis = None, *, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
        """Product over ``axis`` (all axes by default), with the dtypes of :func:`sum`."""
    def mean(self, axis: Axis = None, *, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
        """Arithmetic mean over ``axis`` (all axes by default); NaN for an empty slice, and complex
        inputs average the real and imaginary parts apart. Integer and bool inputs give float32,
        the default real floating-point dtype; the method gives float64, as NumPy's. A given
        ``dtype`` is the one computed in and returned.
        """
    def nansum(self, axis: Axis = None, *, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
        """Sum over ``axis`` skipping NaNs (0 for an all-NaN slice), with the dtypes of :func:`sum`;
        a given ``dtype`` is the one computed in and returned.
        """
    def nanprod(self, axis: Axis = None, *, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
        """Product over ``axis`` skipping NaNs (1 for an all-NaN slice), with the dtypes of
        :func:`sum`; a given ``dtype`` is the one computed in and returned.
        """
    def nanmean(self, axis: Axis = None, *, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
        """Mean over ``axis`` skipping NaNs (NaN for an all-NaN slice); integer and bool inputs give
        float64; a given ``dtype`` is the one computed in and returned.
        """
    def min(self, axis: Axis = None, *, keepdims: bool = False) -> Array:
        """Minimum over ``axis`` (all axes by default), in x's dtype; NaN propagates, and an empty
        slice is a ValueError.
        """
    def max(self, axis: Axis = None, *, keepdims: bool = False) -> Array:
        """Maximum over ``axis`` (all axes by default), in x's dtype; NaN propagates, and an empty
        slice is a ValueError.
        """
    def any(self, axis: Axis = None, *, keepdims: bool = False) -> Array:
        """Whether any element over ``axis`` is true (nonzero; a complex NaN is true): a bool array,
        False for an empty slice.
        """
    def all(self, axis: Axis = None, *, keepdims: bool = False) -> Array:
        """Whether every element over ``axis`` is true (nonzero; a complex NaN is true): a bool
        array, True for an empty slice.
        """
    def nanmin(self, axis: Axis = None, *, keepdims: bool = False) -> Array:
        """Minimum over ``axis`` skipping NaNs (NaN for an all-NaN slice); an empty slice is a
        ValueError.
        """
    def nanmax(self, axis: Axis = None, *, keepdims: bool = False) -> Array:
        """Maximum over ``axis`` skipping NaNs (NaN for an all-NaN slice); an empty slice is a
        ValueError.
        """
    def var(self, axis: Axis = None, *, ddof: float = 0, keepdims: bool = False) -> Array:
        """Variance over ``axis`` (all axes by default), dividing by (count - ``correction``) for a
        real correction >= 0 (the method's ``ddof``), NaN where that is <= 0; computed in two
        passes for accuracy. Integer and bool inputs give float32, computed in float64 (the
        method gives float64).
        """
    def std(self, axis: Axis = None, *, ddof: float = 0, keepdims: bool = False) -> Array:
        """Standard deviation over ``axis``: the square root of :func:`var`, with its ``correction``
        and dtypes.
        """
    def nanvar(self, axis: Axis = None, *, ddof: float = 0, keepdims: bool = False) -> Array:
        """Variance over ``axis`` skipping NaNs (NaN for an all-NaN slice), with the ``correction``
        of :func:`var`; integer and bool inputs give float64.
        """
    def nanstd(self, axis: Axis = None, *, ddof: float = 0, keepdims: bool = False) -> Array:
        """Standard deviation over ``axis`` skipping NaNs: the square root of :func:`nanvar`."""
    def argmin(self, axis: Optional[int] = None, *, keepdims: bool = False) -> Array:
        """Index (int64) of the first minimum along ``axis``, or into the flattened array (axis
        None); a NaN is the minimum, and an empty slice is a ValueError.
        """
    def argmax(self, axis: Optional[int] = None, *, keepdims: bool = False) -> Array:
        """Index (int64) of the first maximum along ``axis``, or into the flattened array (axis
        None); a NaN is the maximum, and an empty slice is a ValueError.
        """
    def nanargmin(self, axis: Optional[int] = None, *, keepdims: bool = False) -> Array:
        """argmin skipping NaNs; an all-NaN slice is a ValueError, as NumPy (one synchronization).
        """
    def nanargmax(self, axis: Optional[int] = None, *, keepdims: bool = False) -> Array:
        """argmax skipping NaNs; an all-NaN slice is a ValueError, as NumPy (one synchronization).
        """
    def cumsum(self, axis: Optional[int] = None) -> Array:
        """Inclusive cumulative sum along ``axis``, or over the flattened array (axis None), as
        NumPy's; bool and signed integers give int64, unsigned integers uint64.
        """
    def cumprod(self, axis: Optional[int] = None) -> Array:
        """Inclusive cumulative product along ``axis``, or over the flattened array (axis None),
        with the dtypes of :func:`cumsum`; for real inputs (:func:`cumulative_prod` takes complex
        ones).
        """
    # ---- end of the generated reduction methods ----

    def __add__(self, other: ArrayLike) -> Array: ...
    def __radd__(self, other: ArrayLike) -> Array: ...
    def __iadd__(self, other: ArrayLike) -> Array: ...
    def __sub__(self, other: ArrayLike) -> Array: ...
    def __rsub__(self, other: ArrayLike) -> Array: ...
    def __isub__(self, other: ArrayLike) -> Array: ...
    def __mul__(self, other: ArrayLike) -> Array: ...
    def __rmul__(self, other: ArrayLike) -> Array: ...
    def __imul__(self, other: ArrayLike) -> Array: ...
    def __truediv__(self, other: ArrayLike) -> Array: ...
    def __rtruediv__(self, other: ArrayLike) -> Array: ...
    def __itruediv__(self, other: ArrayLike) -> Array: ...
    def __floordiv__(self, other: ArrayLike) -> Array: ...
    def __rfloordiv__(self, other: ArrayLike) -> Array: ...
    def __ifloordiv__(self, other: ArrayLike) -> Array: ...
    def __mod__(self, other: ArrayLike) -> Array: ...
    def __rmod__(self, other: ArrayLike) -> Array: ...
    def __imod__(self, other: ArrayLike) -> Array: ...
    def __pow__(self, other: ArrayLike) -> Array: ...
    def __rpow__(self, other: ArrayLike) -> Array: ...
    def __ipow__(self, other: ArrayLike) -> Array: ...
    def __and__(self, other: ArrayLike) -> Array: ...
    def __rand__(self, other: ArrayLike) -> Array: ...
    def __iand__(self, other: ArrayLike) -> Array: ...
    def __or__(self, other: ArrayLike) -> Array: ...
    def __ror__(self, other: ArrayLike) -> Array: ...
    def __ior__(self, other: ArrayLike) -> Array: ...
    def __xor__(self, other: ArrayLike) -> Array: ...
    def __rxor__(self, other: ArrayLike) -> Array: ...
    def __ixor__(self, other: ArrayLike) -> Array: ...
    def __lshift__(self, other: ArrayLike) -> Array: ...
    def __rlshift__(self, other: ArrayLike) -> Array: ...
    def __ilshift__(self, other: ArrayLike) -> Array: ...
    def __rshift__(self, other: ArrayLike) -> Array: ...
    def __rrshift__(self, other: ArrayLike) -> Array: ...
    def __irshift__(self, other: ArrayLike) -> Array: ...
    def __eq__(self, other: ArrayLike) -> Array: ...  # type: ignore[override]
    def __ne__(self, other: ArrayLike) -> Array: ...  # type: ignore[override]
    def __lt__(self, other: ArrayLike) -> Array: ...  # type: ignore[override]
    def __le__(self, other: ArrayLike) -> Array: ...  # type: ignore[override]
    def __gt__(self, other: ArrayLike) -> Array: ...  # type: ignore[override]
    def __ge__(self, other: ArrayLike) -> Array: ...  # type: ignore[override]
    def __neg__(self) -> Array: ...
    def __pos__(self) -> Array: ...
    def __abs__(self) -> Array: ...
    def __invert__(self) -> Array: ...
    def __matmul__(self, other: ArrayLike) -> Array: ...
    def __rmatmul__(self, other: ArrayLike) -> Array: ...
    def __imatmul__(self, other: ArrayLike) -> Array: ...

class Sym:  # symbolic array inside a ts.fuse trace
    """A symbolic array inside a :func:`fuse` trace; supports the operators and the elementwise functions."""
    def __add__(self, other: Any) -> Sym: ...
# ---- elementwise functions: generated from the op rows by scripts/gen_op_stubs.py ----
def negative(x: ArrayLike, /) -> Array:
    """-x, elementwise (integers wrap around)."""
def positive(x: ArrayLike, /) -> Array:
    """+x, elementwise (a copy)."""
def abs(x: ArrayLike, /) -> Array:
    """The absolute value, elementwise; complex inputs give their (real) magnitude."""
def logical_not(x: ArrayLike, /) -> Array:
    """not x, elementwise; a bool array."""
def bitwise_invert(x: ArrayLike, /) -> Array:
    """~x for bool and integer arrays."""
def square(x: ArrayLike, /) -> Array:
    """x * x, elementwise."""
def reciprocal(x: ArrayLike, /) -> Array:
    """1 / x for floating and complex arrays."""
def sign(x: ArrayLike, /) -> Array:
    """-1, 0 or 1 for real inputs (NaN stays NaN); ``z / abs(z)`` for complex ones (NumPy 2)."""
def exp(x: ArrayLike, /) -> Array:
    """e**x, elementwise."""
def exp2(x: ArrayLike, /) -> Array:
    """2**x, elementwise."""
def expm1(x: ArrayLike, /) -> Array:
    """exp(x) - 1, accurate near 0."""
def log(x: ArrayLike, /) -> Array:
    """Natural logarithm; complex inputs follow C99's branch cut."""
def log2(x: ArrayLike, /) -> Array:
    """Base-2 logarithm."""
def log10(x: ArrayLike, /) -> Array:
    """Base-10 logarithm."""
def log1p(x: ArrayLike, /) -> Array:
    """log(1 + x), accurate near 0."""
def sqrt(x: ArrayLike, /) -> Array:
    """Square root; complex inputs follow C99's branch cut."""
def rsqrt(x: ArrayLike, /) -> Array:
    """1 / sqrt(x) for real floating arrays."""
def cbrt(x: ArrayLike, /) -> Array:
    """Cube root for real floating arrays."""
def sin(x: ArrayLike, /) -> Array:
    """Sine (radians)."""
def cos(x: ArrayLike, /) -> Array:
    """Cosine (radians)."""
def tan(x: ArrayLike, /) -> Array:
    """Tangent (radians)."""
def asin(x: ArrayLike, /) -> Array:
    """Inverse sine (``arcsin``)."""
def acos(x: ArrayLike, /) -> Array:
    """Inverse cosine (``arccos``)."""
def atan(x: ArrayLike, /) -> Array:
    """Inverse tangent (``arctan``)."""
def sinh(x: ArrayLike, /) -> Array:
    """Hyperbolic sine."""
def cosh(x: ArrayLike, /) -> Array:
    """Hyperbolic cosine."""
def tanh(x: ArrayLike, /) -> Array:
    """Hyperbolic tangent."""
def asinh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic sine (``arcsinh``)."""
def acosh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic cosine (``arccosh``)."""
def atanh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic tangent (``arctanh``)."""
def sigmoid(x: ArrayLike, /) -> Array:
    """1 / (1 + exp(-x)) for real floating arrays."""
def relu(x: ArrayLike, /) -> Array:
    """max(x, 0) for integer and real floating arrays; NaN stays NaN."""
def gelu(x: ArrayLike, /) -> Array:
    """x * (1 + erf(x / sqrt(2))) / 2 (the exact, erf form)."""
def erf(x: ArrayLike, /) -> Array:
    """The error function, for real floating arrays."""
def softplus(x: ArrayLike, /) -> Array:
    """log(1 + exp(x)), computed as ``max(x, 0) + log1p(exp(-abs(x)))`` so that it does not
    overflow.
    """
def floor(x: ArrayLike, /) -> Array:
    """Largest integer <= x; integer arrays stay integer (NumPy 2)."""
def ceil(x: ArrayLike, /) -> Array:
    """Smallest integer >= x; integer arrays stay integer."""
def trunc(x: ArrayLike, /) -> Array:
    """x rounded toward zero; integer arrays stay integer."""
def round(x: ArrayLike, /) -> Array:
    """x rounded to the nearest integer, half to even (as NumPy)."""
def isnan(x: ArrayLike, /) -> Array:
    """True where x is NaN (either part, for complex)."""
def isinf(x: ArrayLike, /) -> Array:
    """True where x is +-infinity (either part, for complex)."""
def isfinite(x: ArrayLike, /) -> Array:
    """True where x is neither NaN nor infinite."""
def real(x: ArrayLike, /) -> Array:
    """The real part (the array itself, copied, for real inputs)."""
def imag(x: ArrayLike, /) -> Array:
    """The imaginary part (zeros for real inputs)."""
def conj(x: ArrayLike, /) -> Array:
    """The complex conjugate (a copy for real inputs)."""
def angle(x: ArrayLike, /) -> Array:
    """The argument of a complex number, in radians; pi for negative reals."""
def signbit(x: ArrayLike, /) -> Array:
    """True where the sign bit is set (also for -0.0 and negative NaNs)."""
def add(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 + x2 with broadcasting and NumPy 2 promotion (Python scalars are weak).

    ``out`` receives the result (same-kind casting); it may be one of the inputs.
    """
def subtract(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 - x2 (not for bool)."""
def multiply(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 * x2."""
def divide(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """True division x1 / x2: integer and bool inputs give float64, as NumPy."""
def floor_divide(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """floor(x1 / x2), as Python's //, for integer and real floating arrays."""
def remainder(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 - floor_divide(x1, x2) * x2: the sign of the divisor, as Python's %."""
def pow(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 ** x2. Integer powers with a negative exponent give 0 (or +-1 for a base of +-1)."""
def equal(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 == x2, a bool array."""
def not_equal(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 != x2, a bool array."""
def less(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 < x2, a bool array; complex numbers compare lexicographically, as NumPy."""
def less_equal(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 <= x2, a bool array."""
def greater(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 > x2, a bool array."""
def greater_equal(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 >= x2, a bool array."""
def logical_and(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 and x2, elementwise; a bool array."""
def logical_or(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 or x2, elementwise; a bool array."""
def logical_xor(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 xor x2, elementwise; a bool array."""
def bitwise_and(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 & x2 for bool and integer arrays."""
def bitwise_or(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 | x2 for bool and integer arrays."""
def bitwise_xor(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 ^ x2 for bool and integer arrays."""
def bitwise_left_shift(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 << x2 for integer arrays; shifts past the width give 0."""
def bitwise_right_shift(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """x1 >> x2 for integer arrays (arithmetic for signed types)."""
def minimum(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """The smaller of x1 and x2; NaN propagates."""
def maximum(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """The larger of x1 and x2; NaN propagates."""
def fmin(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """The smaller of x1 and x2, ignoring a NaN."""
def nextafter(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """The next representable value of x1's floating-point dtype toward x2 (x2 where they are
    equal).
    """
def fmax(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """The larger of x1 and x2, ignoring a NaN."""
def hypot(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """sqrt(x1**2 + x2**2) without intermediate overflow; +inf where either is infinite, even with
    NaN.
    """
def copysign(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """The magnitude of x1 with the sign bit of x2 (a NaN's sign bit too)."""
def logaddexp(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """log(exp(x1) + exp(x2)) without overflow."""
def atan2(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """The angle of the point (x2, x1), in radians, for real floating arrays (``arctan2``)."""
def arcsin(x: ArrayLike, /) -> Array:
    """Alias of :func:`asin`."""
def arccos(x: ArrayLike, /) -> Array:
    """Alias of :func:`acos`."""
def arctan(x: ArrayLike, /) -> Array:
    """Alias of :func:`atan`."""
def arcsinh(x: ArrayLike, /) -> Array:
    """Alias of :func:`asinh`."""
def arccosh(x: ArrayLike, /) -> Array:
    """Alias of :func:`acosh`."""
def arctanh(x: ArrayLike, /) -> Array:
    """Alias of :func:`atanh`."""
def bitwise_not(x: ArrayLike, /) -> Array:
    """Alias of :func:`bitwise_invert`."""
def invert(x: ArrayLike, /) -> Array:
    """Alias of :func:`bitwise_invert`."""
def absolute(x: ArrayLike, /) -> Array:
    """Alias of :func:`abs`."""
def conjugate(x: ArrayLike, /) -> Array:
    """Alias of :func:`conj`."""
def power(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """Alias of :func:`pow`."""
def arctan2(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """Alias of :func:`atan2`."""
def left_shift(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """Alias of :func:`bitwise_left_shift`."""
def right_shift(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """Alias of :func:`bitwise_right_shift`."""
def true_divide(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """Alias of :func:`divide`."""
def mod(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:
    """Alias of :func:`remainder`."""
# ---- end of the generated elementwise functions ----
@overload
def where(condition: ArrayLike, x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """x1 where condition is true, else x2, all three broadcast; Python scalars take the other operand's dtype."""
@overload
def where(condition: ArrayLike, /) -> Tuple[Array, ...]:
    """NumPy's one-argument form: nonzero(condition)."""
def clip(x: Array, /, min: Optional[ArrayLike] = None, max: Optional[ArrayLike] = None) -> Array:
    """x limited to [min, max]; NaN propagates, as NumPy. Either bound may be None."""
# creation
def asarray(obj: Any, /, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None, copy: Optional[bool] = None) -> Array:
    """Converts obj to a tessel array.

    tessel arrays pass through (copied when ``copy=True`` or the dtype or device differ); objects with
    ``__cuda_array_interface__`` (CuPy, Numba, PyTorch CUDA tensors) and DLPack producers are
    wrapped without a copy (the producer is kept alive); NumPy arrays are wrapped without a copy
    when the target is the CPU, and copied to a GPU target; lists and scalars are copied. Python
    floats default to float32. A non-writeable NumPy array comes in read-only.
    """
def from_dlpack(x: Any, /, *, device: DeviceLike = None, copy: Optional[bool] = None) -> Array:
    """Imports a DLPack producer (PyTorch, CuPy, JAX, NumPy, ...) without a copy.

    The producer's DLPack C exchange table is used when its type has one (no Python calls), else
    ``__dlpack__``; tessel's current stream then waits for the producer's. ``device=`` and
    ``copy=True`` copy.
    """
def export_to(x: Array, cls: type) -> Any:
    """Hands x to the library of ``cls`` (e.g. ``torch.Tensor``) through that type's DLPack C exchange table, without a copy.

    ``cls``'s current stream waits for tessel's current stream. TypeError when ``cls`` has no table.
    """
def to_numpy(x: Array) -> Any:
    """A NumPy copy of x (bfloat16 becomes float32)."""
def empty(shape: ShapeLike, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """An uninitialized array (memory from the caching pool)."""
def zeros(shape: ShapeLike, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """An array of zeros."""
def ones(shape: ShapeLike, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """An array of ones."""
def full(shape: ShapeLike, fill_value: Union[Scalar, Array], *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """An array filled with ``fill_value``: a Python scalar, or, as in NumPy, a 0-d array (tessel's
    or NumPy's) or a NumPy scalar, whose dtype is then the default."""
def empty_like(x: Array, /, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """An uninitialized array with x's shape (and dtype and device unless given)."""
def zeros_like(x: Array, /, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """Zeros with x's shape (and dtype and device unless given)."""
def ones_like(x: Array, /, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """Ones with x's shape (and dtype and device unless given)."""
def full_like(x: Array, /, fill_value: Union[Scalar, Array], *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """``fill_value`` (a Python scalar or a 0-d array) with x's shape (and dtype and device unless given)."""
def arange(start: Union[int, float], /, stop: Optional[Union[int, float]] = None, step: Union[int, float] = 1, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """Evenly spaced values in [start, stop) with NumPy's length rule; computed on the device on CUDA."""
def linspace(start: Scalar, stop: Scalar, /, num: int, *, dtype: Optional[DTypeLike] = None, device: DeviceLike = None, endpoint: bool = True) -> Array:
    """``num`` evenly spaced values from start to stop (``endpoint`` included by default)."""
def eye(n_rows: int, n_cols: Optional[int] = None, /, *, k: int = 0, dtype: Optional[DTypeLike] = None, device: DeviceLike = None) -> Array:
    """A 2-D array with ones on diagonal k (k > 0 above the main diagonal)."""
def meshgrid(*arrays: Array, indexing: Literal['xy', 'ij'] = 'xy') -> Tuple[Array, ...]:
    """Coordinate matrices from 1-D arrays (``indexing='xy'`` or ``'ij'``)."""
def tril(x: Array, /, *, k: int = 0) -> Array:
    """The lower triangle (on and below diagonal k) of the last two axes; zeros elsewhere."""
def triu(x: Array, /, *, k: int = 0) -> Array:
    """The upper triangle (on and above diagonal k) of the last two axes; zeros elsewhere."""
def copyto(dst: Array, src: ArrayLike) -> None:
    """dst[...] = src: broadcasts src to dst's shape and casts; works across devices."""
# data types
def astype(x: Array, dtype: DTypeLike, /, *, copy: bool = True, device: DeviceLike = None) -> Array:
    """x in another dtype (and optionally on another device); copies unless ``copy=False`` and nothing changes."""
def result_type(*arrays_and_dtypes: Any) -> dtype:
    """The dtype NumPy 2's promotion gives these arrays, dtypes and (weak) Python scalars."""
def can_cast(from_: Union[dtype, Array], to: DTypeLike, /, *, casting: Optional[str] = None) -> bool:
    """Whether ``from_`` casts to ``to`` under the Array API's type promotion rules (no integer
    to floating-point casts); with ``casting`` ("no", "equiv", "safe", "same_kind", "unsafe"),
    under NumPy's rule of that name."""
def finfo(type: Union[dtype, Array], /) -> Any:
    """Limits of a floating dtype: bits, eps, max, min, smallest_normal."""
def iinfo(type: Union[dtype, Array], /) -> Any:
    """Limits of an integer dtype: bits, max, min."""
def isdtype(dtype: dtype, kind: Union[dtype, str, Tuple[Union[dtype, str], ...]]) -> bool:
    """Whether dtype is of a kind: 'bool', 'signed integer', 'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric', or a dtype, or a tuple of these."""
# statistics and utilities
# ---- reductions: generated from the reduction rows by scripts/gen_op_stubs.py ----
def sum(x: Array, /, *, axis: Axis = None, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
    """Sum over ``axis`` (all axes by default). Bool and signed integers sum in int64, unsigned
    integers in uint64, floating-point and complex types in their own dtype (float16 and bfloat16
    accumulate in float32); a given ``dtype`` is the one computed in and returned.
    """
def prod(x: Array, /, *, axis: Axis = None, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
    """Product over ``axis`` (all axes by default), with the dtypes of :func:`sum`."""
def mean(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Arithmetic mean over ``axis`` (all axes by default); NaN for an empty slice, and complex
    inputs average the real and imaginary parts apart. Integer and bool inputs give float32, the
    default real floating-point dtype; the method gives float64, as NumPy's. A given ``dtype`` is
    the one computed in and returned.
    """
def nansum(x: Array, /, *, axis: Axis = None, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
    """Sum over ``axis`` skipping NaNs (0 for an all-NaN slice), with the dtypes of :func:`sum`; a
    given ``dtype`` is the one computed in and returned.
    """
def nanprod(x: Array, /, *, axis: Axis = None, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
    """Product over ``axis`` skipping NaNs (1 for an all-NaN slice), with the dtypes of :func:`sum`;
    a given ``dtype`` is the one computed in and returned.
    """
def nanmean(x: Array, /, *, axis: Axis = None, dtype: Optional[DTypeLike] = None, keepdims: bool = False) -> Array:
    """Mean over ``axis`` skipping NaNs (NaN for an all-NaN slice); integer and bool inputs give
    float64; a given ``dtype`` is the one computed in and returned.
    """
def min(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Minimum over ``axis`` (all axes by default), in x's dtype; NaN propagates, and an empty slice
    is a ValueError.
    """
def max(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Maximum over ``axis`` (all axes by default), in x's dtype; NaN propagates, and an empty slice
    is a ValueError.
    """
def any(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Whether any element over ``axis`` is true (nonzero; a complex NaN is true): a bool array,
    False for an empty slice.
    """
def all(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Whether every element over ``axis`` is true (nonzero; a complex NaN is true): a bool array,
    True for an empty slice.
    """
def nanmin(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Minimum over ``axis`` skipping NaNs (NaN for an all-NaN slice); an empty slice is a
    ValueError.
    """
def nanmax(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Maximum over ``axis`` skipping NaNs (NaN for an all-NaN slice); an empty slice is a
    ValueError.
    """
def var(x: Array, /, *, axis: Axis = None, correction: float = 0.0, keepdims: bool = False) -> Array:
    """Variance over ``axis`` (all axes by default), dividing by (count - ``correction``) for a real
    correction >= 0 (the method's ``ddof``), NaN where that is <= 0; computed in two passes for
    accuracy. Integer and bool inputs give float32, computed in float64 (the method gives
    float64).
    """
def std(x: Array, /, *, axis: Axis = None, correction: float = 0.0, keepdims: bool = False) -> Array:
    """Standard deviation over ``axis``: the square root of :func:`var`, with its ``correction`` and
    dtypes.
    """
def nanvar(x: Array, /, *, axis: Axis = None, correction: float = 0.0, keepdims: bool = False) -> Array:
    """Variance over ``axis`` skipping NaNs (NaN for an all-NaN slice), with the ``correction`` of
    :func:`var`; integer and bool inputs give float64.
    """
def nanstd(x: Array, /, *, axis: Axis = None, correction: float = 0.0, keepdims: bool = False) -> Array:
    """Standard deviation over ``axis`` skipping NaNs: the square root of :func:`nanvar`."""
def argmin(x: Array, /, *, axis: Optional[int] = None, keepdims: bool = False) -> Array:
    """Index (int64) of the first minimum along ``axis``, or into the flattened array (axis None); a
    NaN is the minimum, and an empty slice is a ValueError.
    """
def argmax(x: Array, /, *, axis: Optional[int] = None, keepdims: bool = False) -> Array:
    """Index (int64) of the first maximum along ``axis``, or into the flattened array (axis None); a
    NaN is the maximum, and an empty slice is a ValueError.
    """
def nanargmin(x: Array, /, *, axis: Optional[int] = None, keepdims: bool = False) -> Array:
    """argmin skipping NaNs; an all-NaN slice is a ValueError, as NumPy (one synchronization)."""
def nanargmax(x: Array, /, *, axis: Optional[int] = None, keepdims: bool = False) -> Array:
    """argmax skipping NaNs; an all-NaN slice is a ValueError, as NumPy (one synchronization)."""
def cumsum(x: Array, axis: Optional[int] = None) -> Array:
    """Inclusive cumulative sum along ``axis``, or over the flattened array (axis None), as NumPy's;
    bool and signed integers give int64, unsigned integers uint64.
    """
def cumprod(x: Array, axis: Optional[int] = None) -> Array:
    """Inclusive cumulative product along ``axis``, or over the flattened array (axis None), with
    the dtypes of :func:`cumsum`; for real inputs (:func:`cumulative_prod` takes complex ones).
    """
# ---- end of the generated reductions ----
def cumulative_sum(x: Array, /, *, axis: Optional[int] = None, dtype: Optional[DTypeLike] = None, include_initial: bool = False) -> Array:
    """Running sums along axis (optional for 1-D x), with sum's dtype rules; ``include_initial``
    puts a zero first."""
def cumulative_prod(x: Array, /, *, axis: Optional[int] = None, dtype: Optional[DTypeLike] = None, include_initial: bool = False) -> Array:
    """Running products along axis (optional for 1-D x), with prod's dtype rules;
    ``include_initial`` puts a one first."""
def count_nonzero(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """The number of nonzero elements over axis (int64)."""
# sorting, searching, sets
# ---- sorting and searching functions: generated from the sort rows by scripts/gen_op_stubs.py ----
def sort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """A sorted copy along axis; stable; ``descending=True`` for the reverse order."""
def argsort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """int64 indices that sort x along axis; stable (equal keys keep their order)."""
def searchsorted(x1: Array, x2: Union[Array, Scalar], /, *, side: Literal['left', 'right'] = 'left', sorter: Optional[Array] = None) -> Array:
    """Insertion points (int64) of x2 (an array or a Python scalar) into the ascending 1-D x1
    ('left' or 'right'). With sorter, the indices that sort x1, x1 is sorted on the device
    instead (a stable sort gives the values of x1[sorter]).
    """
# ---- end of the generated sorting and searching functions ----
# ---- set functions: generated from the set rows by scripts/gen_op_stubs.py ----
def unique_values(x: Array, /) -> Array:
    """Returns the unique elements of the flattened x, ascending (complex: by real, then imaginary
    part). NaNs are distinct; -0.0 and +0.0 are one value. Radix sort and a scan on the device;
    the number of values is read back (one synchronization).
    """
def unique_counts(x: Array, /) -> Tuple[Array, Array]:
    """Returns ``(values, counts)``: the unique elements of the flattened x (as
    :func:`unique_values`) and how often each occurs (int64).
    """
def unique_inverse(x: Array, /) -> Tuple[Array, Array]:
    """Returns ``(values, inverse_indices)``: the unique elements of the flattened x (as
    :func:`unique_values`) and the indices into them that reconstruct x (int64, shape of x).
    """
def unique_all(x: Array, /) -> Tuple[Array, Array, Array, Array]:
    """Returns ``(values, indices, inverse_indices, counts)``: the unique elements of the flattened
    x (as :func:`unique_values`), the index of each one's first occurrence, the indices that
    reconstruct x (shape of x) and the counts (int64).
    """
def isin(x1: Union[Array, Scalar], x2: Union[Array, Scalar], /, *, invert: bool = False) -> Array:
    """Tests whether each element of x1 is in x2 (bool, shape of x1), compared in the promoted
    dtype; NaN is in nothing. At least one is an array. x2 is sorted on the device, then every x1
    element is binary-searched.
    """
# ---- end of the generated set functions ----
# manipulation
def reshape(x: Array, /, shape: ShapeLike, *, copy: Optional[bool] = None) -> Array:
    """A view with the new shape when the strides allow it, else a copy (``copy=False`` refuses the copy). One -1 is inferred."""
def permute_dims(x: Array, /, axes: Sequence[int]) -> Array:
    """A view with the axes reordered."""
def expand_dims(x: Array, /, axis: Union[int, Tuple[int, ...]] = 0) -> Array:
    """A view with a new axis of size one at ``axis``, or at each position of a tuple (positions
    in the result)."""
def repeat(x: Array, repeats: Union[int, Array], /, *, axis: Optional[int] = None) -> Array:
    """Each element of x (flattened when axis is None) repeated. An integer array of counts
    (shape (1,) or the axis' length) makes the size data-dependent: the total is read back
    (one synchronization). Negative counts: ValueError."""
def tile(x: Array, repetitions: Tuple[int, ...], /) -> Array:
    """x repeated repetitions[i] times along each axis (one copy on the device). Negative
    repetitions: ValueError."""
def diff(x: Array, /, *, axis: int = -1, n: int = 1, prepend: Optional[Union[Array, Scalar]] = None, append: Optional[Union[Array, Scalar]] = None) -> Array:
    """The n-th forward difference along axis (``!=`` for bool), after joining prepend and
    append along that axis; n=0 returns x. n < 0: ValueError."""
def broadcast_shapes(*shapes: ShapeLike) -> Tuple[int, ...]:
    """The shape arrays of these shapes broadcast to (ValueError when they do not)."""
def squeeze(x: Array, /, axis: Union[int, Tuple[int, ...]]) -> Array:
    """A view without the given axes of size one (ShapeError if one is not 1)."""
def broadcast_to(x: Array, /, shape: ShapeLike) -> Array:
    """A read-only-by-convention view broadcast to ``shape`` (stride 0 on new axes)."""
def broadcast_arrays(*arrays: Array) -> Tuple[Array, ...]:
    """Views of the arrays broadcast to their common shape."""
def concat(arrays: Sequence[Array], /, *, axis: Optional[int] = 0) -> Array:
    """Joins arrays along an existing axis (None: flattened first); the dtype is their promotion."""
# NumPy's names for code written against NumPy or CuPy (python/tessel/_functions/): what
# np.<name> computes on tessel arrays, on their device.
def concatenate(arrays: Sequence[Array], axis: Optional[int] = 0, out: Optional[Array] = None, *, dtype: Optional[DTypeLike] = None) -> Array:
    """NumPy's name for :func:`concat` (``dtype``: each array cast first; ``out``: written into)."""
def transpose(a: Array, axes: Optional[Sequence[int]] = None) -> Array:
    """A view with the axes reversed, or permuted by ``axes`` (:func:`permute_dims`)."""
def ravel(a: Array, order: str = "C") -> Array:
    """The elements in C order as a 1-D array (a view when contiguous)."""
def dot(a: Array, b: Array, out: Optional[Array] = None) -> Array:
    """NumPy's dot: a product with a 0-d operand, else matmul with a 1-D or 2-D ``b``."""
def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
    """Elementwise ``|a - b| <= atol + rtol |b|`` (equal infinities are close; NaNs when ``equal_nan``)."""
def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element is close (:func:`isclose`); one synchronization."""
def around(a: Array, decimals: int = 0, out: Optional[Array] = None) -> Array:
    """NumPy's round: half to even, to ``decimals`` places (negative: tens, hundreds, ...)."""
def einsum(subscripts: str, *operands: ArrayLike, out: Optional[Array] = None, dtype: Optional[DTypeLike] = None, optimize: Any = False) -> Array:
    """Einstein summation as NumPy's: labels, ``...`` (broadcast), repeated labels (diagonals),
    implicit and explicit output. Operands are contracted left to right, each pair as one batched
    matmul (``optimize`` is accepted and ignored)."""
def histogram(a: Array, bins: Union[int, ArrayLike] = 10, range: Optional[Tuple[float, float]] = None, density: Optional[bool] = None, weights: None = None) -> Tuple[Array, Array]:
    """Counts (int64; densities when ``density``) and bin edges (float64), as NumPy's: equal bins over
    ``range`` (default: the data's minimum to maximum) or given edges; the last bin holds its right edge."""
def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: Optional[Scalar] = None, right: Optional[Scalar] = None, period: None = None) -> Array:
    """Piecewise-linear interpolation of the points (xp, fp), xp increasing, at x; ``left`` and
    ``right`` (default fp's ends) outside."""
def gradient(f: ArrayLike, *varargs: float, axis: Axis = None, edge_order: int = 1) -> Any:
    """NumPy's gradient with uniform spacings: central differences inside, one-sided ones of order
    ``edge_order`` (1 or 2) at the ends; one array per axis (a tuple for several)."""
def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full") -> Array:
    """The discrete convolution of two 1-D arrays (modes ``full``, ``same``, ``valid``): one gather
    of a's windows and one matmul."""
def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid") -> Array:
    """The cross-correlation ``sum_n a[n + k] conj(v[n])`` of two 1-D arrays (modes as :func:`convolve`)."""
def atleast_1d(*arys: Array) -> Any:
    """Each array with at least one dimension (one array, or a tuple of them)."""
def atleast_2d(*arys: Array) -> Any:
    """Each array with at least two dimensions (a 1-D array as a row)."""
def atleast_3d(*arys: Array) -> Any:
    """Each array with at least three dimensions ((n,) as (1, n, 1), (m, n) as (m, n, 1))."""
def ptp(a: Array, axis: Axis = None, out: Optional[Array] = None, keepdims: bool = False) -> Array:
    """Maximum minus minimum ("peak to peak") along axis."""
def average(a: Array, axis: Axis = None, weights: Optional[ArrayLike] = None, returned: bool = False, *, keepdims: bool = False) -> Any:
    """The (weighted) mean along axis; ``returned``: also the sum of the weights."""
def amax(a: Array, axis: Axis = None, out: Optional[Array] = None, keepdims: bool = False) -> Array:
    """NumPy's name for :func:`max`."""
def amin(a: Array, axis: Axis = None, out: Optional[Array] = None, keepdims: bool = False) -> Array:
    """NumPy's name for :func:`min`."""
def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> bool:
    """Whether the shapes match and every element is equal; one synchronization."""
def vstack(tup: Sequence[Array], *, dtype: Optional[DTypeLike] = None) -> Array:
    """Joins along the first axis, 1-D arrays as rows."""
def hstack(tup: Sequence[Array], *, dtype: Optional[DTypeLike] = None) -> Array:
    """Joins along the second axis (the first for 1-D arrays)."""
def argwhere(a: Array) -> Array:
    """The indices of the nonzero elements, one row per element (N x ndim); one synchronization."""
def outer(a: Array, b: Array, out: Optional[Array] = None) -> Array:
    """The outer product of the flattened arrays."""
def trace(a: Array, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Optional[DTypeLike] = None, out: Optional[Array] = None) -> Array:
    """Sum along a diagonal of the (axis1, axis2) planes (:func:`tessel.linalg.trace`)."""
def cross(a: Array, b: Array, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Optional[int] = None) -> Array:
    """The cross product of 3-vectors along axis (:func:`tessel.linalg.cross`)."""
def split(ary: Array, indices_or_sections: Union[int, Sequence[int]], axis: int = 0) -> list[Array]:
    """Views of equal sections (ValueError when the axis does not divide), or split at indices."""
def array_split(ary: Array, indices_or_sections: Union[int, Sequence[int]], axis: int = 0) -> list[Array]:
    """Like :func:`split`; unequal sections allowed, the first ones one longer."""
def median(a: Array, axis: Optional[int] = None, out: Optional[Array] = None, overwrite_input: bool = False, keepdims: bool = False) -> Array:
    """The median along axis (None: of all elements); NaN where the reduced elements hold one;
    integers give float64."""
def quantile(a: Array, q: ArrayLike, axis: Optional[int] = None, out: Optional[Array] = None, overwrite_input: bool = False, method: str = "linear", keepdims: bool = False) -> Array:
    """Quantiles q in [0, 1] along axis, by linear interpolation between order statistics (NumPy's
    default method); the quantiles' axis comes first."""
def percentile(a: Array, q: ArrayLike, axis: Optional[int] = None, out: Optional[Array] = None, overwrite_input: bool = False, method: str = "linear", keepdims: bool = False) -> Array:
    """:func:`quantile` with q in percent."""
def nan_to_num(x: Array, copy: bool = True, nan: float = 0.0, posinf: Optional[float] = None, neginf: Optional[float] = None) -> Array:
    """NaN to ``nan``, +-inf to ``posinf``/``neginf`` (default: the dtype's extreme finite values)."""
def diag(v: Array, k: int = 0) -> Array:
    """A 2-D v's diagonal k, or the square matrix with a 1-D v on diagonal k."""
def pad(array: Array, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Array:
    """Padded with ``constant_values`` (default 0) by NumPy's pad_width rule; other modes: TypeError."""
def bincount(x: Array, weights: None = None, minlength: int = 0) -> Array:
    """Counts of each value 0 .. max(x) of a 1-D non-negative integer array (int64)."""
def float_power(x1: ArrayLike, x2: ArrayLike) -> Array:
    """x1 ** x2 in float64 (complex128 for complex operands)."""
def triu_indices(n: int, k: int = 0, m: Optional[int] = None) -> Tuple[Array, Array]:
    """The row and column indices of the upper triangle (from diagonal k) of an n x m matrix."""
def tril_indices(n: int, k: int = 0, m: Optional[int] = None) -> Tuple[Array, Array]:
    """The row and column indices of the lower triangle (to diagonal k) of an n x m matrix."""
ndarray = Array  # NumPy's and CuPy's name for the array type
def get_array_module(*args: Any) -> Any:
    """CuPy's: the tessel module when any argument is a tessel array, else NumPy."""
def asnumpy(a: Array, /) -> Any:
    """A NumPy copy of a on the host (CuPy's name; ``np.asarray(a)`` does the same)."""
def array(obj: Any, /, dtype: Optional[DTypeLike] = None, *, copy: Optional[bool] = True, device: DeviceLike = None) -> Array:
    """NumPy's and CuPy's constructor: :func:`asarray` that copies unless ``copy`` is False or None."""
def stack(arrays: Sequence[Array], /, *, axis: int = 0) -> Array:
    """Joins arrays along a new axis."""
def flip(x: Array, /, *, axis: Axis = None) -> Array:
    """A view with the order of elements reversed along axis (all axes by default)."""
def roll(x: Array, /, shift: Union[int, Tuple[int, ...]], *, axis: Axis = None) -> Array:
    """Elements shifted along axis, wrapping around (a copy)."""
def moveaxis(x: Array, source: Union[int, Tuple[int, ...]], destination: Union[int, Tuple[int, ...]], /) -> Array:
    """A view with axes moved to new positions."""
def unstack(x: Array, /, *, axis: int = 0) -> Tuple[Array, ...]:
    """Views of x's slices along axis, as a tuple."""
# ---- indexing functions: generated from the indexing rows by scripts/gen_op_stubs.py ----
def take(x: Array, indices: Array, /, *, axis: Optional[int] = None) -> Array:
    """Elements of x at integer ``indices`` along ``axis`` (x flattened when None); the result has
    x's shape with ``axis`` replaced by the indices' shape. IndexError names the axis and its
    size for an index out of range; on CUDA that check reads one flag back (one synchronization).
    """
def take_along_axis(x: Array, indices: Array, /, *, axis: Optional[int] = -1) -> Array:
    """out[..., j, ...] = x[..., indices[..., j, ...], ...] along ``axis``; indices has x's rank and
    broadcasts against it on the other axes (axis None: x flattened, indices 1-D).
    """
def put_along_axis(arr: Array, indices: Array, values: ArrayLike, axis: Optional[int]) -> None:
    """NumPy's put_along_axis, in place: arr[..., indices[..., j, ...], ...] = values[..., j, ...]
    along ``axis``, values (an array or a Python scalar) broadcast to the indices' shape. The
    indices are checked before anything is written (one read on CUDA).
    """
def nonzero(x: Array, /) -> Tuple[Array, ...]:
    """Indices of the nonzero elements, one int64 array per axis, in C order; a 0-d x is a
    ValueError. One compaction pass; on CUDA one read of its count.
    """
# ---- end of the generated indexing functions ----
# devices, streams, kernels
def cuda_available() -> bool:
    """Whether CUDA can be used (a GPU, a driver and a CUDA build)."""
def cuda_unavailable_reason() -> str:
    """Why CUDA cannot be used ('' when it can)."""
def device_count() -> int:
    """The number of CUDA devices (0 without CUDA)."""
def default_device() -> Device:
    """cuda:0 when CUDA is available, else the CPU: where arrays go by default."""
def current_device() -> Device:
    """The current CUDA device (the CPU without CUDA)."""
def set_current_device(index: int) -> None:
    """Makes cuda:index the current device of this thread."""
def device_name(index: int = 0) -> str:
    """The name of CUDA device ``index``."""
def driver_version() -> int:
    """The CUDA driver version (e.g. 13000), 0 without a driver."""
def runtime_version() -> int:
    """The CUDA runtime version tessel was built with."""
def synchronize(device: DeviceLike = None) -> None:
    """The host waits for all work on the device (releases the GIL while waiting)."""
def current_stream(device: DeviceLike = None) -> Stream:
    """The current stream of a device (this thread's; the legacy default stream unless set)."""
def set_current_stream(stream: Stream) -> None:
    """Makes ``stream`` the current stream of its device for this thread."""
def version() -> str:
    """tessel's version string."""
def set_fusion_enabled(enabled: bool) -> None:
    """Switches fusion on or off: off runs fused functions op by op (as ``TESSEL_FUSION=0``)."""
def fusion_enabled() -> bool:
    """Whether fusion is on."""
def fuse(func: Any = None, *, kernel_name: Optional[str] = None) -> Any:
    """Decorator: ``@ts.fuse def f(x, y): return ts.exp(x) * y + 1`` runs f as one elementwise kernel per call.

    The function is traced once per argument pattern with symbolic arrays (:class:`Sym`);
    arguments are tessel arrays or Python scalars (a scalar is compiled in as a constant).
    ``f.source(*args)`` returns the generated CUDA source.

    A function returning a tuple of expressions returns a tuple of arrays (a 1-tuple gives a
    1-tuple), all computed by one kernel with the subexpressions they share computed once. Each
    output has its own NumPy dtype and the broadcast shape of all the array arguments (an output
    that reads only some of them is broadcast to it); arguments that do not broadcast raise
    :class:`ShapeError`.
    """
class FusedKernel:
    """A traced expression graph (what :func:`fuse` builds), called with a list of arrays.

    Built from one :class:`Sym` it returns one array; from a tuple or list of them, a tuple of
    arrays of the inputs' broadcast shape, computed by one kernel."""
    num_inputs: int
    num_outputs: int
    def __call__(self, inputs: Union[builtins.list[Array], Tuple[Array, ...]]) -> Union[Array, Tuple[Array, ...]]: ...
    def source(self, dtypes: list) -> str:
        """The generated CUDA source for these input dtypes."""
class ElementwiseKernel:
    """An elementwise kernel from its parameters and body, CuPy style.

    Args:
        in_params: the inputs, e.g. ``"float32 x, float32 y"`` (NumPy dtype names).
        out_params: the outputs, e.g. ``"float32 z"``.
        operation: CUDA C++ statements over one element of each, e.g. ``"z = x * y + 1"``.
        name: the kernel's name.
        preamble: device code placed before the kernel.

    Calling it with the inputs (and optionally the outputs) broadcasts the arrays, casts inputs,
    allocates missing outputs and runs on the arrays' device: on a CUDA device, compiled by NVRTC
    and launched on ``stream`` (default: the current stream); on the CPU backend, compiled as host
    C++ by the host compiler (``TESSEL_CXX``, else ``g++``) and run before the call returns.
    :meth:`source` and :meth:`host_source` work anywhere.
    """
    name: str
    def __init__(self, in_params: str, out_params: str, operation: str, name: str = 'elementwise_kernel', preamble: str = '') -> None: ...
    def source(self) -> str:
        """The generated CUDA source (contiguous layout)."""
    def host_source(self) -> str:
        """The host C++ source the CPU backend compiles (contiguous layout)."""
    def __call__(self, *args: Any, size: Optional[int] = None, stream: Any = None) -> Any: ...
class RawKernel:
    """A complete CUDA source compiled with NVRTC; ``name`` is an extern "C" kernel or a C++ name expression.

    Calling it takes the grid, the block, the argument tuple (arrays pass their data pointer,
    Python bool/int/float pass bool/long long/double, NumPy scalars their exact type),
    ``shared_mem`` and ``stream``. Needs a CUDA device.
    """
    name: str
    code: str
    def __init__(self, code: str, name: str, options: Sequence[str] = ()) -> None: ...
    def compile(self, device: DeviceLike = None) -> None:
        """Compiles and loads the kernel for a device ahead of the first launch."""
    def __call__(self, grid: Union[int, Tuple[int, ...]], block: Union[int, Tuple[int, ...]], args: Sequence[Any], *, shared_mem: int = 0, stream: Any = None) -> None: ...
def __array_namespace_info__() -> Any:
    """The Array API inspection utilities (2025.12): ``capabilities()`` ("boolean indexing",
    "data-dependent shapes", "max dimensions"), ``default_device()``, ``default_dtypes(device=)``,
    ``devices()`` (a tuple), ``dtypes(device=, kind=)`` (the Array API dtypes, of a kind string or
    a tuple of kinds; float16 and bfloat16 are tessel extras and not listed), ``extensions()``."""

# ---- matrix products (linalg extension: tessel.linalg) ----
Epilogue = Literal["none", "relu", "gelu", "gelu_tanh", "relu_grad", "gelu_grad", "gelu_tanh_grad"]
Compute = Literal["default", "fp32", "tf32"]

def matmul(x1: ArrayLike, x2: ArrayLike, /, *, bias: Optional[ArrayLike] = None, epilogue: Epilogue = "none",
           alpha: float = 1.0, beta: float = 0.0, c: Optional[ArrayLike] = None, out: Optional[Array] = None,
           compute: Compute = "default", aux: Union[builtins.bool, ArrayLike] = False,
           bias_grad: builtins.bool = False) -> Any:
    """epilogue(alpha * (x1 @ x2) + beta * c + bias), with NumPy's matmul semantics.

    1-D operands and broadcast batch dimensions as NumPy; transposed views run without copies.
    ``epilogue`` is "none", "relu", "gelu" (erf form) or "gelu_tanh"; ``compute`` is "default",
    "fp32" or "tf32" (float32 and complex64). With ``aux=True`` returns ``(d, aux)``, aux being
    the epilogue's input. Operands of different dtypes are promoted; integer products keep their
    dtype and are exact, wrapping as NumPy's (int8 @ int8 gives its int32 sums into an int32 ``out``).
    With ``out``, returns ``out`` itself.

    Training's backward pass: the epilogues "relu_grad", "gelu_grad" and "gelu_tanh_grad" compute
    ``(alpha * (x1 @ x2) + beta * c) * act'(aux)``, where ``aux`` is the array the forward
    returned (the activation's input); they take no bias. ``bias_grad=True`` also returns the
    result's sums over its rows (the bias gradient when the result is a gradient) as the last
    element of the returned tuple: ``(d, bias_grad)`` or ``(d, aux, bias_grad)``; the sums are one
    more GEMM (``ones @ d``, accumulated in float32). On CUDA, "gelu_tanh_grad" is cuBLASLt's
    DGELU epilogue where the rows of ``aux`` are 16-byte multiples.
    """
def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Array:
    """sum(conj(x1) * x2, axis), the other axes broadcast."""
def matrix_transpose(x: Array, /) -> Array:
    """A view with the last two axes swapped."""
def tensordot(x1: Array, x2: Array, /, *, axes: Union[int, Tuple[Sequence[int], Sequence[int]]] = 2) -> Array:
    """Sum of products over the given axes (as NumPy's tensordot), as one GEMM."""

class MatmulCandidate:
    """One algorithm a :class:`Matmul` plan may run, with its autotune times (``-1`` when not timed)."""
    name: str
    time_ms: float
    sustained_ms: float
    ok: bool
    error: str

class Matmul:
    """A stateful matmul plan: plan once, autotune(), execute() many times on the same layouts."""
    algorithms: list[MatmulCandidate]
    selected: MatmulCandidate
    from_cache: builtins.bool
    cache_key: str
    def __init__(self, a: ArrayLike, b: ArrayLike, *, bias: Optional[ArrayLike] = None, epilogue: Epilogue = "none",
                 alpha: float = 1.0, beta: float = 0.0, c: Optional[ArrayLike] = None, compute: Compute = "default",
                 aux: Union[builtins.bool, ArrayLike] = False, bias_grad: builtins.bool = False) -> None: ...
    def autotune(self, iterations: int = 10) -> list[MatmulCandidate]:
        """Times every candidate on the planned arrays and selects the fastest; the winner is cached in memory and on disk."""
    def execute(self, a: Optional[ArrayLike] = None, b: Optional[ArrayLike] = None, *, bias: Optional[ArrayLike] = None,
                c: Optional[ArrayLike] = None, alpha: Optional[float] = None, beta: Optional[float] = None,
                out: Optional[Array] = None, aux: Optional[ArrayLike] = None) -> Any:
        # Array; or a tuple with aux (aux=True plans) and bias_grad (bias_grad=True plans) after it
        """Runs the plan on new arrays of the planned layouts (omitted ones: the planned arrays).

        ``alpha=None``/``beta=None`` keep the planned values. Another layout, beta switching
        between zero and non-zero, or another device is an error naming both. A plan made with
        ``aux=True`` returns ``(d, aux)`` with a fresh aux; a ``bias_grad=True`` plan also returns
        fresh column sums, last. ``aux=`` gives a ``*_grad`` plan its new input (the forward's aux).
        """
    def pin(self, candidate: Union[int, str]) -> None:
        """Fixes the candidate that runs (an index into ``algorithms`` or a name such as ``'cublaslt:0'``)."""

def clear_matmul_memory_cache() -> None:
    """Empties the in-memory matmul plan and autotune caches (the disk cache stays)."""
def matmul_cache_dir() -> str:
    """The folder of the matmul autotune disk cache."""
def set_matmul_cache_dir(folder: str) -> None:
    """Sets the matmul autotune disk cache folder for this process; ``""`` restores the default,
    ``$TESSEL_CACHE_DIR/matmul``."""
def set_matmul_autotune(on: bool) -> None:
    """Turns autotuning on first use on or off for this process (``TESSEL_MATMUL_AUTOTUNE=1`` starts
    it on): while on, :func:`matmul` autotunes each layout the first time it runs it (as
    ``Matmul.autotune(10)``, the winner cached in memory and on disk), unless the autotune cache
    already has a winner for that layout."""
def matmul_autotune() -> bool:
    """True while :func:`matmul` autotunes each layout on first use."""
# ---- CPU threads (python/bindings/core.cpp) ----
def num_threads() -> int:
    """The threads every CPU op may use: its OpenMP loops, the BLAS under :func:`matmul` and
    :mod:`tessel.linalg`, the FFT, sorts and CPU kernels. ``TESSEL_NUM_THREADS=N`` starts it at
    ``N``; the default is the number of CPUs in the process's affinity mask (``taskset``, a
    cgroup's cpuset or an MPI launcher's binding). Small ops run on fewer (one below about 64K
    elements), and an op called inside another CPU op's threads runs on one
    (docs/guide/configuration.rst, "CPU threads")."""
def set_num_threads(threads: int) -> None:
    """Sets :func:`num_threads` for the whole process (every Python thread, every later op; the
    BLAS's thread count follows at its next call). ``ValueError`` outside 1..4096."""
# ---- linalg streams (python/bindings/linalg.cpp) ----
def set_linalg_streams(streams: int) -> None:
    """Splits each batched cuSOLVER call of the CUDA linear algebra (``eigh``'s ``XsyevBatched``)
    into up to ``streams`` parts of at least 64 matrices, run on the caller's stream and side
    streams and joined back into the caller's stream (``TESSEL_LINALG_STREAMS=N`` starts it at
    ``N``; default 4). While a CUDA graph capture is active a call runs on one stream. The CPU
    backend ignores it. ``ValueError`` outside 1..64."""
def linalg_streams() -> int:
    """The streams a batched cuSOLVER call is split over (:func:`set_linalg_streams`)."""
# ---- pipelines and CUDA graphs (python/bindings/pipeline.cpp) ----
class PipelineReport:
    """What a :class:`Pipeline` run measured: copy bandwidths, compute time, overlap, chunks."""
    h2d_GBps: float
    d2h_GBps: float
    compute_ms: float
    wall_ms: float
    throughput_GBps: float
    overlap_percent: float
    chunks: int
    chunk_bytes: int
    input_bytes: int
    output_bytes: int
    streams: int
    pageable_input: bool
    pageable_output: bool
    device: str
    def as_dict(self) -> dict:
        """The report as a dict."""
class Pipeline:
    """Streams host data through the device in chunks along axis 0, overlapping copies and compute.

    Args:
        compute: called with each chunk as a tessel array on the device; returns the same number of rows.
        chunk_size: rows per chunk (automatic when None).
        streams: number of streams (automatic: 4).
        buffering: pinned staging slots per stream (2: double buffering).
        progress: a progress bar on stderr (automatic for large jobs on a terminal).
        chunk_bytes: input bytes per chunk, instead of ``chunk_size``.
        device: where compute runs (default: the default device; the CPU runs chunk by chunk on the host).
    """
    def __init__(self, compute: Any, chunk_size: Optional[int] = None, streams: Optional[int] = None, buffering: Optional[int] = None, progress: Optional[bool] = None, *, chunk_bytes: Optional[int] = None, device: DeviceLike = None) -> None: ...
    def run(self, input: Any, out: Any = None, on_chunk: Any = None) -> Any:
        """Runs the pipeline over ``input`` (a NumPy array, a tessel CPU array or an iterable of chunks).

        Returns the result (NumPy for NumPy input), or ``out`` when given; with ``on_chunk``,
        calls ``on_chunk(row_offset, result_chunk)`` in chunk order instead and returns None.
        """
    @property
    def report(self) -> Optional[PipelineReport]: ...
    @property
    def compute(self) -> Any: ...
    @property
    def chunk_size(self) -> Optional[int]: ...
    @property
    def chunk_bytes(self) -> Optional[int]: ...
    @property
    def streams(self) -> Optional[int]: ...
    @property
    def buffering(self) -> int: ...
    @property
    def device(self) -> Device: ...
class Graph:
    """A captured sequence of tessel work, replayed with one launch (on the CPU: the captured function run again)."""
    def __init__(self) -> None: ...
    @staticmethod
    def capture(fn: Any, *, stream: Optional[Stream] = None, device: DeviceLike = None, reserve_bytes: int = ..., capture_error_mode: Literal["thread_local", "global", "relaxed"] = "thread_local") -> Graph:
        """Captures ``fn``'s tessel work (on the CPU: runs fn, and replay runs it again)."""
    def replay(self, stream: Optional[Stream] = None) -> None:
        """Launches the captured work on ``stream`` (default: the device's current stream). Asynchronous."""
    @property
    def defined(self) -> bool: ...
    @property
    def stream(self) -> Stream: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def held_bytes(self) -> int: ...
    @property
    def num_replays(self) -> int: ...

# Profiling (python/tessel/_profile.py; docs/guide/profiling.rst).
class ProfileRange:
    def __init__(self, name: str) -> None: ...
    def __enter__(self) -> ProfileRange: ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> builtins.bool: ...
    def __call__(self, fn: Any) -> Any: ...
class Profile:
    def __init__(self, *, max_events: int = 262144, gpu: builtins.bool = True) -> None: ...
    def start(self) -> Profile: ...
    def stop(self) -> Profile: ...
    def __enter__(self) -> Profile: ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> builtins.bool: ...
    @property
    def recording(self) -> builtins.bool: ...
    @property
    def ops(self) -> list[dict[str, Any]]: ...
    @property
    def gpu_activities(self) -> list[dict[str, Any]]: ...
    @property
    def compiles(self) -> list[dict[str, Any]]: ...
    @property
    def memory_events(self) -> list[dict[str, Any]]: ...
    @property
    def dropped(self) -> int: ...
    @property
    def gpu_recorded(self) -> builtins.bool: ...
    @property
    def gpu_linked(self) -> builtins.bool: ...
    @property
    def cupti_status(self) -> str: ...
    def export_chrome_trace(self, path: Any) -> None: ...
    def table(self, sort_by: Literal["gpu_time", "cpu_time", "count", "name"] = "gpu_time", group_by: Literal["op", "op_args"] = "op", row_limit: int = 0) -> str: ...
    def memory_timeline(self, path: Any, *, title: str = "tessel memory") -> None: ...
class _ProfileEntry:
    range: type[ProfileRange]
    Profile: type[Profile]
    def __call__(self, *, max_events: int = 262144, gpu: builtins.bool = True) -> Profile: ...
profile: _ProfileEntry
class BenchmarkResult:
    name: str
    cpu_times: list[float]
    gpu_times: list[float]
    device: Device
    @property
    def cpu_median(self) -> float: ...
    @property
    def gpu_median(self) -> float: ...
def benchmark(fn: Any, args: Sequence[Any] = (), kwargs: Optional[dict[str, Any]] = None, *, n_warmup: int = 10, n_repeat: int = 100, name: Optional[str] = None, device: DeviceLike = None) -> BenchmarkResult: ...
def set_checks(items: Union[str, Sequence[str], None]) -> None: ...
def checks() -> Tuple[str, ...]: ...
