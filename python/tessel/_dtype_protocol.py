"""Comparison of tessel dtypes with other objects, as NumPy's dtypes compare.

A tessel dtype equals itself, its name ("float32"), the NumPy dtype and scalar type of the same
name (np.dtype("float32"), np.float32) and the Python type NumPy maps to it (float -> float64,
int -> int64, bool, complex -> complex128). It is unequal to anything else and the comparison never
raises: libraries compare dtypes with None, sentinels and arbitrary objects.
"""
from __future__ import annotations

import builtins as _builtins
import sys as _sys

from . import _tessel

_dtype = _tessel.dtype
_PYTHON_TYPES = {_builtins.bool: "bool", int: "int64", float: "float64", complex: "complex128"}


def _as_tessel_dtype(other):
    """The tessel dtype `other` names, or None (never raises)."""
    if isinstance(other, _dtype):
        return other
    try:
        if isinstance(other, str):
            return _tessel._dtype_from_name(other)
        if isinstance(other, type):
            name = _PYTHON_TYPES.get(other)
            if name is not None:
                return _tessel._dtype_from_name(name)
        np = _sys.modules.get("numpy")
        if np is None:
            return None
        if isinstance(other, np.dtype) or (isinstance(other, type) and issubclass(other, np.generic)):
            descr = np.dtype(other)
            if descr.byteorder == ">":
                return None
            return _tessel._dtype_from_name(descr.name)
    except Exception:  # an unknown name or an unsupported NumPy dtype is simply not equal
        return None
    return None


def _eq(self, other):
    converted = _as_tessel_dtype(other)
    return converted is not None and converted.name == self.name


def _ne(self, other):
    return not _eq(self, other)


def _numpy_dtype(self):
    """The NumPy dtype of the same name, so that np.dtype(ts.float32) works (NumPy reads this
    attribute); bfloat16 has one only through ml_dtypes."""
    import numpy as np

    if self.name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise AttributeError("tessel.bfloat16 has no NumPy dtype (ml_dtypes is not installed)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(self.name)


def _call(self, value=0, /):
    """``ts.float32(3)`` as NumPy's ``np.float32(3)``: the value in this dtype, a 0-d array (an
    array for a sequence), on the default device."""
    import tessel

    return tessel.asarray(value, dtype=self)


def install():
    _dtype.__eq__ = _eq
    _dtype.__ne__ = _ne
    _dtype.dtype = property(_numpy_dtype)
    _dtype.__call__ = _call

