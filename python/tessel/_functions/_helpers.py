"""Argument helpers the category modules share."""
from __future__ import annotations

import builtins
import operator

from .. import _tessel
from .._tessel import Array


def is_int(v):
    """Whether v is one integer (an axis, a shift, a count): a Python int or a NumPy integer scalar,
    as NumPy takes them (anything with __index__ that is neither a bool nor a sequence)."""
    return hasattr(type(v), "__index__") and not isinstance(v, builtins.bool) and not hasattr(type(v), "__len__")


def dtype_named(name):
    return getattr(_tessel, name)


def dtype_of(d):
    """A tessel dtype from a dtype, its name, or a NumPy or Python type."""
    if isinstance(d, _tessel.dtype):
        return d
    if isinstance(d, type):
        import numpy

        d = numpy.dtype(d).name
    return _tessel._dtype_from_name(str(d))


def check_array(x, op, name="x"):
    if not isinstance(x, Array):
        raise TypeError(f"{op}: {name} must be a tessel array, got {type(x).__name__}")


def normalize_axis(axis, ndim, op):
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{op}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise IndexError(f"{op}: axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def as_operand(value, other, op):
    """A Python scalar as a 0-d array beside the array `other` (weak: the array's dtype kind);
    other array-likes (NumPy arrays, sequences) through asarray on other's device."""
    from .creation import asarray

    if isinstance(value, Array):
        return value
    if isinstance(value, (builtins.bool, int, float, complex)):
        dtype = _tessel._result_type_scalar(other.dtype, value)
        return asarray(value, dtype=dtype, device=other.device)
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{op}: expected a tessel array or a Python scalar, got {type(value).__name__}")
    return asarray(value, device=other.device)


def as_array_on(value, device):
    """value as a tessel array on device (tessel arrays pass through)."""
    from .creation import asarray

    return value if isinstance(value, Array) else asarray(value, device=device)


def unsupported(what):
    """The TypeError for a NumPy function or argument tessel does not implement: nothing is copied
    to the host behind the caller's back."""
    return TypeError(
        f"tessel has no implementation of {what} for tessel arrays; convert explicitly with np.asarray(x) "
        "(a copy to the host) to run NumPy's")


def reject(name, **values):
    """TypeError for NumPy arguments given values tessel does not implement."""
    given = [k for k, v in values.items() if v is not None and v is not False]
    if given:
        raise unsupported(f"numpy.{name} with {', '.join(given)}=")


def finish(result, out, name):
    """Writes result into out (one tessel array or a 1-tuple of one), as NumPy's out=."""
    if out is None:
        return result
    if isinstance(out, tuple):
        if len(out) != 1:
            raise unsupported(f"numpy.{name} with {len(out)} outputs")
        out = out[0]
    if not isinstance(out, Array):
        raise TypeError(f"numpy.{name}: out= must be a tessel array for tessel inputs, got {type(out).__name__}")
    out[...] = result
    return out


def with_dtype(x, dtype):
    """x cast to dtype (None: x itself)."""
    return x if dtype is None or x.dtype == dtype else x.astype(dtype)


def row_doc(rows):
    """A decorator that gives a function written in Python its op row's docstring, which the stubs
    and the API reference show too. rows: a binding's {Python name: docstring} of a row list in
    include/tessel/ops/*_list.hpp."""
    def give(function):
        function.__doc__ = rows[function.__name__]
        return function

    return give


reduction_doc = row_doc(_tessel._reduction_functions)  # reduce_list.hpp
sorting_doc = row_doc(_tessel._sorting_functions)  # sort_list.hpp
set_doc = row_doc(_tessel._set_functions)  # set_ops_list.hpp
