"""Data type functions (the Array API's): astype, can_cast, finfo, iinfo, isdtype, result_type."""
from __future__ import annotations

import builtins
import math

from .. import _tessel
from .._tessel import Array, Device
from ._helpers import dtype_named, dtype_of

DTYPE_NAMES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
]
ARRAY_API_DTYPE_NAMES = [n for n in DTYPE_NAMES if n not in ("float16", "bfloat16")]  # not Array API dtypes
DEFAULT_FLOAT = "float32"
DEFAULT_COMPLEX = "complex64"
# isdtype's kinds, as dtype.kind characters.
KINDS = {
    "bool": ("b",), "signed integer": ("i",), "unsigned integer": ("u",), "integral": ("i", "u"),
    "real floating": ("f",), "complex floating": ("c",), "numeric": ("i", "u", "f", "c"),
}


def astype(x, dtype, /, *, copy=True, device=None):
    if device is not None:
        if not copy and Device(str(device)) == x.device and dtype_of(dtype) == x.dtype:
            return x
        x = x.to_device(device)
    elif not copy and dtype_of(dtype) == x.dtype:
        return x  # the standard: copy=False with a matching dtype returns the input array itself
    return x.astype(dtype, copy=copy)


def result_type(*arrays_and_dtypes):
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    dtypes, scalars = [], []
    for v in arrays_and_dtypes:
        if isinstance(v, Array):
            dtypes.append(v.dtype)
        elif isinstance(v, (builtins.bool, int, float, complex)) and not isinstance(v, type):
            scalars.append(v)
        else:
            dtypes.append(dtype_of(v))
    if not dtypes:
        raise ValueError("result_type: at least one array or dtype is required (Python scalars are weak)")
    result = dtypes[0]
    for d in dtypes[1:]:
        result = _tessel._result_type_dtypes(result, d)
    for s in scalars:
        result = _tessel._result_type_scalar(result, s)
    return result


class finfo_object:
    def __init__(self, dtype, bits, eps, max, min, smallest_normal):
        self.dtype, self.bits, self.eps, self.max, self.min = dtype, bits, eps, max, min
        self.smallest_normal = smallest_normal
        self.tiny = smallest_normal
        self.resolution = 10 ** -math.floor(-math.log10(eps)) if eps > 0 else 0.0

    def __repr__(self):
        return f"finfo(dtype={self.dtype}, bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min})"


class iinfo_object:
    def __init__(self, dtype, bits, max, min):
        self.dtype, self.bits, self.max, self.min = dtype, bits, max, min

    def __repr__(self):
        return f"iinfo(dtype={self.dtype}, bits={self.bits}, max={self.max}, min={self.min})"


def finfo(type, /):
    d = type.dtype if isinstance(type, Array) else dtype_of(type)
    name = str(d)
    real = {"complex64": "float32", "complex128": "float64"}.get(name, name)
    if real == "bfloat16":
        m = float.fromhex("0x1.fep127")
        return finfo_object(dtype_named("bfloat16"), 16, 2.0 ** -7, m, -m, 2.0 ** -126)
    if real not in ("float16", "float32", "float64"):
        raise TypeError(f"finfo: {name} is not a floating-point dtype")
    import numpy

    f = numpy.finfo(real)
    return finfo_object(dtype_named(real), int(f.bits), float(f.eps), float(f.max), float(f.min),
                        float(f.smallest_normal))


def iinfo(type, /):
    d = type.dtype if isinstance(type, Array) else dtype_of(type)
    name = str(d)
    if d.kind not in ("i", "u"):
        raise TypeError(f"iinfo: {name} is not an integer dtype")
    import numpy

    i = numpy.iinfo(name)
    return iinfo_object(d, int(i.bits), int(i.max), int(i.min))


def isdtype(dtype, kind):
    dtype = dtype_of(dtype)
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}")
        return dtype.kind in KINDS[kind]
    return dtype == dtype_of(kind)


def _spec_can_cast(source, target):
    """Whether the Array API type promotion rules allow source -> target (no cross-kind integer to
    floating-point casts; bfloat16 and float16 do not promote to each other)."""
    if source == target:
        return True
    ks, kt = source.kind, target.kind
    if ks == "b" or kt == "b":
        return False
    if ks in "iu" and kt in "iu":
        if ks == kt:
            return target.itemsize >= source.itemsize
        return ks == "u" and target.itemsize > source.itemsize
    if ks in "iu":
        return False
    if {source.name, target.name} == {"float16", "bfloat16"}:
        return False
    if ks == "f" and kt == "f":
        return target.itemsize >= source.itemsize
    if ks == "f" and kt == "c":
        return target.itemsize >= 2 * source.itemsize
    return ks == "c" and kt == "c" and target.itemsize >= source.itemsize


def can_cast(from_, to, /, *, casting=None):
    """Whether from_ (a dtype or an array) casts to `to` under the Array API type promotion rules;
    casting="no"/"equiv"/"safe"/"same_kind"/"unsafe" applies NumPy's rule of that name instead."""
    source = from_.dtype if isinstance(from_, Array) else dtype_of(from_)
    target = dtype_of(to)
    if casting is None:
        return _spec_can_cast(source, target)
    return _tessel._can_cast(source, target, casting)
