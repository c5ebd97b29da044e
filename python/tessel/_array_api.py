"""The parts of the Array API namespace written in Python: conversion (asarray, from_dlpack),
data type functions, and functions composed from the C++ primitives. Nothing here is on the
per-operator hot path."""
from __future__ import annotations

import builtins as _builtins
import math as _math

from . import _tessel
from ._tessel import Array, Device

__all__ = [
    "asarray", "from_dlpack", "arange", "linspace", "meshgrid", "tril", "triu",
    "result_type", "finfo", "iinfo", "isdtype", "astype",
    "sort", "argsort",
    "flip", "roll", "moveaxis", "broadcast_arrays", "unstack",
    "to_numpy",
]

_dtype_names = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
]
_DEFAULT_FLOAT = "float32"
_DEFAULT_COMPLEX = "complex64"


def _dt(name):
    return getattr(_tessel, name)


# The whole DLPack import is one C++ call (from_dlpack_object, python/bindings/interop_dlpack.cpp):
# the device query, the stream handshake and the capsule import cost no Python-level work.
from_dlpack = _tessel.from_dlpack

DeviceError = _tessel.DeviceError


def _numpy():
    import numpy

    return numpy


def _host_array(obj, dtype, device, copy):
    np = _numpy()
    if dtype is not None and not isinstance(dtype, str):
        dtype = str(dtype) if isinstance(dtype, _tessel.dtype) else dtype
    if dtype == "bfloat16":
        return _host_array(obj, "float32", device, copy).astype(_dt("bfloat16"))
    if isinstance(obj, np.ndarray):
        arr = obj if dtype is None else obj.astype(dtype, copy=False)
    else:
        if dtype is None:
            arr = np.asarray(obj)
            # Python floats/complex become tessel's default dtypes (float32/complex64), as torch.
            if not isinstance(obj, np.generic) and not hasattr(obj, "dtype"):
                if arr.dtype == np.float64:
                    arr = arr.astype(_DEFAULT_FLOAT)
                elif arr.dtype == np.complex128:
                    arr = arr.astype(_DEFAULT_COMPLEX)
        else:
            arr = np.asarray(obj, dtype=dtype)
    if arr.dtype.name not in _dtype_names:
        raise TypeError(f"asarray: cannot convert {type(obj).__name__} with NumPy dtype '{arr.dtype}' to a tessel array")
    if arr.dtype.byteorder == ">":
        raise TypeError("asarray: big-endian arrays are not supported")
    target = Device(str(device)) if device is not None else _tessel.default_device()
    if target.type == "cpu" and copy is not True and arr.dtype == getattr(obj, "dtype", None) and arr is obj:
        # Zero-copy view of the NumPy buffer; the NumPy array stays alive with it.
        if all(s % arr.itemsize == 0 for s in arr.strides) and arr.ctypes.data % arr.itemsize == 0:
            # A non-writeable NumPy array comes in read-only (writes into it raise).
            return _tessel._wrap_host_pointer(arr.ctypes.data, arr.shape, arr.strides, arr.dtype.name, arr,
                                              not arr.flags.writeable)
        if copy is False:
            raise ValueError("asarray: copy=False but the NumPy array's strides are not a multiple of its itemsize")
    elif copy is False:
        raise ValueError(f"asarray: copy=False but converting {type(obj).__name__} needs a copy")
    arr = np.asarray(arr, order="C")  # ascontiguousarray would turn a 0-d array into 1-d
    return _tessel._from_host_ptr(arr.ctypes.data, arr.shape, arr.dtype.name, target)


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Converts obj to a tessel array.

    tessel arrays pass through (copied when copy=True or dtype/device differ); objects with
    __cuda_array_interface__ (CuPy, Numba, PyTorch CUDA tensors) and DLPack producers are wrapped
    without a copy (the producer is kept alive); NumPy arrays on a CPU target are wrapped without
    a copy, others (lists, scalars) are copied. Python floats default to float32.
    """
    if isinstance(obj, Array):
        result = obj
        if device is not None and Device(str(device)) != obj.device:
            if copy is False:
                raise ValueError("asarray: copy=False but the array is on another device")
            result = obj.to_device(device)
            copy = False  # already a new array
        if dtype is not None and _tessel._dtype_of(dtype) != result.dtype:
            if copy is False:
                raise ValueError("asarray: copy=False but the dtype differs")
            return result.astype(dtype)
        return result.copy() if copy else result
    if isinstance(obj, (str, bytes)) or obj is None:
        raise TypeError(f"asarray: {type(obj).__name__} is not an array or a number")
    if hasattr(obj, "__cuda_array_interface__"):
        result = _tessel._from_cuda_array_interface(obj, device, copy)
        return result if dtype is None else asarray(result, dtype=dtype, copy=copy)
    np = _numpy()
    if not isinstance(obj, (np.ndarray, np.generic)) and hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        result = from_dlpack(obj, device=device, copy=copy)
        return result if dtype is None else asarray(result, dtype=dtype, copy=copy)
    if isinstance(obj, (list, tuple)) and any(isinstance(v, Array) for v in obj):
        return _tessel.stack([asarray(v, dtype=dtype, device=device) for v in obj])
    try:
        return _host_array(obj, dtype, device, copy)
    except (ValueError, TypeError) as error:
        if isinstance(error, TypeError) or "setting an array element" in str(error) or "could not convert" in str(error):
            raise TypeError(f"asarray: cannot convert {type(obj).__name__} to a tessel array: {error}") from None
        raise


def to_numpy(x):
    """A NumPy copy of x (bfloat16 becomes float32)."""
    return x.__array__()


def _dtype_of(d):
    return _tessel._dtype_from_name(str(d) if not isinstance(d, type) else _numpy().dtype(d).name)


_tessel._dtype_of = lambda d: d if isinstance(d, _tessel.dtype) else _dtype_of(d)


def astype(x, dtype, /, *, copy=True, device=None):
    if device is not None:
        if not copy and Device(str(device)) == x.device and _tessel._dtype_of(dtype) == x.dtype:
            return x
        x = x.to_device(device)
    elif not copy and _tessel._dtype_of(dtype) == x.dtype:
        return x  # the standard: copy=False with a matching dtype returns the input array itself
    return x.astype(dtype, copy=copy)


def _arange_default(*values):
    return _dt(_DEFAULT_FLOAT) if any(isinstance(v, float) for v in values) else None


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    return _tessel._arange(start, stop, step, dtype if dtype is not None else _arange_default(start, stop, step), device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    if dtype is None and (isinstance(start, complex) or isinstance(stop, complex)):
        dtype = _dt(_DEFAULT_COMPLEX)  # a complex bound: the default complex dtype (the standard)
    return _tessel._linspace(start, stop, num, endpoint, dtype, device)


def meshgrid(*arrays, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    n = len(arrays)
    shape = [a.size for a in arrays]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and n >= 2 and i < 2:
            axis = 1 - i
        view_shape = [1] * n
        view_shape[axis] = a.size
        out.append(_tessel.broadcast_to(_tessel.reshape(a, tuple(view_shape)), tuple(shape)))
    return out


def _triangle(x, k, lower):
    rows, cols = x.shape[-2], x.shape[-1]
    r = _tessel.reshape(arange(rows, device=x.device), (rows, 1))
    c = _tessel.reshape(arange(cols, device=x.device), (1, cols))
    keep = (c - r <= k) if lower else (c - r >= k)
    return _tessel.where(keep, x, _tessel.zeros((), dtype=x.dtype, device=x.device))


def tril(x, /, *, k=0):
    return _triangle(x, k, True)


def triu(x, /, *, k=0):
    return _triangle(x, k, False)


# ---- data type functions ----
def result_type(*arrays_and_dtypes):
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    dtypes, scalars = [], []
    for v in arrays_and_dtypes:
        if isinstance(v, Array):
            dtypes.append(v.dtype)
        elif isinstance(v, (_builtins.bool, int, float, complex)) and not isinstance(v, type):
            scalars.append(v)
        else:
            dtypes.append(_tessel._dtype_of(v))
    if not dtypes:
        raise ValueError("result_type: at least one array or dtype is required (Python scalars are weak)")
    result = dtypes[0]
    for d in dtypes[1:]:
        result = _tessel.result_type_dtypes(result, d)
    for s in scalars:
        result = _tessel._result_type_scalar(result, s)
    return result


class finfo_object:
    def __init__(self, dtype, bits, eps, max, min, smallest_normal):
        self.dtype, self.bits, self.eps, self.max, self.min = dtype, bits, eps, max, min
        self.smallest_normal = smallest_normal
        self.tiny = smallest_normal
        self.resolution = 10 ** -_math.floor(-_math.log10(eps)) if eps > 0 else 0.0

    def __repr__(self):
        return f"finfo(dtype={self.dtype}, bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min})"


class iinfo_object:
    def __init__(self, dtype, bits, max, min):
        self.dtype, self.bits, self.max, self.min = dtype, bits, max, min

    def __repr__(self):
        return f"iinfo(dtype={self.dtype}, bits={self.bits}, max={self.max}, min={self.min})"


def finfo(type, /):
    d = type.dtype if isinstance(type, Array) else _tessel._dtype_of(type)
    name = str(d)
    real = {"complex64": "float32", "complex128": "float64"}.get(name, name)
    if real == "bfloat16":
        m = float.fromhex("0x1.fep127")
        return finfo_object(_dt("bfloat16"), 16, 2.0 ** -7, m, -m, 2.0 ** -126)
    if real not in ("float16", "float32", "float64"):
        raise TypeError(f"finfo: {name} is not a floating-point dtype")
    f = _numpy().finfo(real)
    return finfo_object(_dt(real), int(f.bits), float(f.eps), float(f.max), float(f.min), float(f.smallest_normal))


def iinfo(type, /):
    d = type.dtype if isinstance(type, Array) else _tessel._dtype_of(type)
    name = str(d)
    if d.kind not in ("i", "u"):
        raise TypeError(f"iinfo: {name} is not an integer dtype")
    i = _numpy().iinfo(name)
    return iinfo_object(d, int(i.bits), int(i.max), int(i.min))


_KINDS = {
    "bool": ("b",), "signed integer": ("i",), "unsigned integer": ("u",), "integral": ("i", "u"),
    "real floating": ("f",), "complex floating": ("c",), "numeric": ("i", "u", "f", "c"),
}


def isdtype(dtype, kind):
    dtype = _tessel._dtype_of(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}")
        return dtype.kind in _KINDS[kind]
    return dtype == _tessel._dtype_of(kind)


# ---- sorting, searching, sets ----
def sort(x, /, *, axis=-1, descending=False, stable=True):
    result = _tessel._sort(x, axis)
    return flip(result, axis=axis) if descending else result


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    if descending:
        # Stable descending order: sort the reversed array, then map the indices back.
        n = x.shape[axis]
        idx = _tessel._argsort(flip(x, axis=axis), axis)
        return flip((n - 1) - idx, axis=axis)
    return _tessel._argsort(x, axis)




# ---- manipulation ----
def _is_int(v):
    """Whether v is one integer (an axis, a shift, a count): a Python int or a NumPy integer scalar,
    as NumPy takes them (anything with __index__ that is neither a bool nor a sequence)."""
    return hasattr(type(v), "__index__") and not isinstance(v, _builtins.bool) and not hasattr(type(v), "__len__")


def flip(x, /, *, axis=None):
    axes = range(x.ndim) if axis is None else ([axis] if _is_int(axis) else axis)
    key = [slice(None)] * x.ndim
    for a in axes:
        key[a % x.ndim if x.ndim else 0] = slice(None, None, -1)
    return x[tuple(key)]


def roll(x, /, shift, *, axis=None):
    if axis is None:
        return _tessel.reshape(roll(_tessel.reshape(x, (-1,)), shift, axis=0), x.shape)
    shifts = [shift] if _is_int(shift) else list(shift)
    axes = [axis] if _is_int(axis) else list(axis)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    for s, a in zip(shifts, axes):
        a %= x.ndim
        n = x.shape[a]
        if n == 0:
            continue
        s %= n
        if s == 0:
            continue
        head = [slice(None)] * x.ndim
        tail = [slice(None)] * x.ndim
        head[a] = slice(n - s, None)
        tail[a] = slice(None, n - s)
        x = _tessel.concat([x[tuple(head)], x[tuple(tail)]], axis=a)
    return x


def _axis_list(axes, ndim, op, name):
    axes = [axes] if _is_int(axes) else list(axes)
    for a in axes:
        if not -ndim <= a < ndim:
            raise IndexError(f"{op}: {name} axis {a} is out of bounds for an array of dimension {ndim}")
    axes = [a % ndim for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {name} {tuple(axes)}")
    return axes


def moveaxis(x, source, destination, /):
    src = _axis_list(source, x.ndim, "moveaxis", "source")
    dst = _axis_list(destination, x.ndim, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have the same number of axes")
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _tessel.permute_dims(x, tuple(order))


def broadcast_arrays(*arrays):
    shape = ()
    for a in arrays:
        shape = _broadcast_shape(shape, a.shape)
    return tuple(_tessel.broadcast_to(a, shape) for a in arrays)


def _broadcast_shape(a, b):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (p, q) in enumerate(zip(a, b)):
        if p != q and p != 1 and q != 1:
            raise _tessel.ShapeError(f"broadcast_arrays: shapes {a} and {b} do not broadcast (axis {i}: {p} vs {q})")
        out.append(q if p == 1 else p)
    return tuple(out)


def unstack(x, /, *, axis=0):
    axis %= x.ndim
    return tuple(x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis]))




# ---- inspection ----
_ARRAY_API_DTYPES = [n for n in _dtype_names if n not in ("float16", "bfloat16")]  # not Array API dtypes


def _kind_dtypes(kind):
    """The Array API dtype names of one kind string or a tuple of them (ValueError otherwise)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    chars = set()
    for k in kinds:
        if not isinstance(k, str) or k not in _KINDS:
            raise ValueError(f"dtypes: unknown kind {k!r} (kinds: {', '.join(repr(n) for n in _KINDS)})")
        chars.update(_KINDS[k])
    return [n for n in _ARRAY_API_DTYPES if _dt(n).kind in chars]


class _Info:
    """What __array_namespace_info__() returns (Array API inspection utilities)."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def extensions(self):
        """The Array API extensions tessel provides (not a standard inspection function: the
        standard detects extensions with hasattr(xp, "linalg") / hasattr(xp, "fft"), which holds)."""
        return ["fft", "linalg"]

    def default_device(self):
        return _tessel.default_device()

    def _check_device(self, device, op):
        if device is not None and Device(str(device)) not in self.devices():
            raise ValueError(f"{op}: device {device} is not available (devices: {', '.join(map(str, self.devices()))})")

    def default_dtypes(self, *, device=None):
        self._check_device(device, "default_dtypes")
        return {"real floating": _dt(_DEFAULT_FLOAT), "complex floating": _dt(_DEFAULT_COMPLEX),
                "integral": _dt("int64"), "indexing": _dt("int64")}

    def dtypes(self, *, device=None, kind=None):
        self._check_device(device, "dtypes")
        names = _ARRAY_API_DTYPES if kind is None else _kind_dtypes(kind)
        return {n: _dt(n) for n in names}

    def devices(self):
        devices = [Device("cpu")]
        if _tessel.cuda_available():
            devices += [Device(f"cuda:{i}") for i in range(_tessel.device_count())]
        return tuple(devices)


def __array_namespace_info__():
    return _Info()


def _str(x):
    """NumPy's str(): the values without array(...)."""
    try:
        return str(x.__array__())
    except Exception:  # pragma: no cover - printing must not fail
        return repr(x)
