"""Creation functions written in Python: asarray, arange, linspace, meshgrid, tril, triu (the
Array API's), and NumPy's array and diag. empty, zeros, ones, full, eye and their *_like forms
are the C++ functions of the _tessel extension."""
from __future__ import annotations

import builtins

from .. import _tessel
from .._tessel import Array, Device
from ._helpers import dtype_named, dtype_of
from .dtypes import DEFAULT_COMPLEX, DEFAULT_FLOAT, DTYPE_NAMES


def _host_array(obj, dtype, device, copy):
    import numpy as np

    target = Device(str(device)) if device is not None else _tessel.default_device()
    if dtype is None and copy is not True and target.type == "cpu" and isinstance(obj, np.ndarray):
        # The common case first: a NumPy array for the CPU, as it is, is a view of its buffer
        # (None: its dtype, byte order or strides need the checks and the copy below).
        view = _tessel._wrap_host_buffer(obj)
        if view is not None:
            return view
    if dtype is not None and not isinstance(dtype, str):
        dtype = str(dtype) if isinstance(dtype, _tessel.dtype) else dtype
    if dtype == "bfloat16":
        return _host_array(obj, "float32", device, copy).astype(dtype_named("bfloat16"))
    if isinstance(obj, np.ndarray):
        arr = obj if dtype is None else obj.astype(dtype, copy=False)
    else:
        if dtype is None:
            arr = np.asarray(obj)
            # Python floats/complex become tessel's default dtypes (float32/complex64), as torch.
            if not isinstance(obj, np.generic) and not hasattr(obj, "dtype"):
                if arr.dtype == np.float64:
                    arr = arr.astype(DEFAULT_FLOAT)
                elif arr.dtype == np.complex128:
                    arr = arr.astype(DEFAULT_COMPLEX)
        else:
            arr = np.asarray(obj, dtype=dtype)
    if arr.dtype.name not in DTYPE_NAMES:
        raise TypeError(f"asarray: cannot convert {type(obj).__name__} with NumPy dtype '{arr.dtype}' to a tessel array")
    if arr.dtype.byteorder == ">":
        raise TypeError("asarray: big-endian arrays are not supported")
    if target.type == "cpu" and copy is not True and arr is obj:
        # A view of the NumPy buffer, the NumPy array alive with it; a non-writeable one comes in
        # read-only (writes into it raise).
        view = _tessel._wrap_host_buffer(arr)
        if view is not None:
            return view
        if copy is False:
            raise ValueError("asarray: copy=False but the NumPy array's strides are not a multiple of its itemsize "
                             "or its data is not aligned to it")
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
        if dtype is not None and dtype_of(dtype) != result.dtype:
            if copy is False:
                raise ValueError("asarray: copy=False but the dtype differs")
            return result.astype(dtype)
        return result.copy() if copy else result
    if isinstance(obj, (str, bytes)) or obj is None:
        raise TypeError(f"asarray: {type(obj).__name__} is not an array or a number")
    if hasattr(obj, "__cuda_array_interface__"):
        result = _tessel._from_cuda_array_interface(obj, device, copy)
        return result if dtype is None else asarray(result, dtype=dtype, copy=copy)
    import numpy as np

    if not isinstance(obj, (np.ndarray, np.generic)) and hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        # The whole DLPack import is one C++ call (python/bindings/interop_dlpack.cpp).
        result = _tessel.from_dlpack(obj, device=device, copy=copy)
        return result if dtype is None else asarray(result, dtype=dtype, copy=copy)
    if isinstance(obj, (list, tuple)) and builtins.any(isinstance(v, Array) for v in obj):
        return _tessel.stack([asarray(v, dtype=dtype, device=device) for v in obj])
    try:
        return _host_array(obj, dtype, device, copy)
    except (ValueError, TypeError) as error:
        if isinstance(error, TypeError) or "setting an array element" in str(error) or "could not convert" in str(error):
            raise TypeError(f"asarray: cannot convert {type(obj).__name__} to a tessel array: {error}") from None
        raise


def array(obj, /, dtype=None, *, copy=True, device=None):
    """NumPy's and CuPy's constructor: :func:`asarray` that copies unless ``copy`` is False or None."""
    return asarray(obj, dtype=dtype, copy=copy, device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None and builtins.any(isinstance(v, float) for v in (start, stop, step)):
        dtype = dtype_named(DEFAULT_FLOAT)
    return _tessel._arange(start, stop, step, dtype, device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    if dtype is None and (isinstance(start, complex) or isinstance(stop, complex)):
        dtype = dtype_named(DEFAULT_COMPLEX)  # a complex bound: the default complex dtype (the standard)
    return _tessel._linspace(start, stop, num, endpoint, dtype, device)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate matrices from 1-D coordinate arrays, as a tuple of broadcast views."""
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
    return tuple(out)


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


def diag(v, k=0):
    """A 1-D v: the square matrix with v on diagonal k; a 2-D v: its diagonal k."""
    from ..linalg import diagonal

    if v.ndim == 2:
        return diagonal(v, offset=k)
    if v.ndim != 1:
        raise ValueError(f"diag: needs a 1-D or 2-D array, got {v.ndim} dimensions")
    n = v.shape[0] + builtins.abs(k)
    out = _tessel.zeros((n, n), dtype=v.dtype, device=v.device)
    i = arange(v.shape[0], device=v.device)
    out[i + builtins.max(-k, 0), i + builtins.max(k, 0)] = v
    return out


def triu_indices(n, k=0, m=None):
    """The row and column indices of the upper triangle (from diagonal k) of an n x m matrix."""
    return _tessel.nonzero(triu(_tessel.ones((n, n if m is None else m), dtype=_tessel.bool), k=k))


def tril_indices(n, k=0, m=None):
    """The row and column indices of the lower triangle (to diagonal k) of an n x m matrix."""
    return _tessel.nonzero(tril(_tessel.ones((n, n if m is None else m), dtype=_tessel.bool), k=k))
