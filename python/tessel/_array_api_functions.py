"""Array API 2025.12 functions with their standard signatures: the set functions, repeat, tile,
diff, the cumulative and counting reductions, broadcast_shapes, and the data type and searching
functions whose rules differ from the C++ primitives'. Each runs on the array's device: a composition
of device ops, or one C++ op (unique_all, isin, repeat with an array of counts, nextafter).
"""
from __future__ import annotations

import builtins as _builtins
import operator as _operator
from collections import namedtuple as _namedtuple

from . import _tessel
from ._array_api import _is_int
from ._array_api import asarray as _asarray
from ._tessel import Array

__all__ = [
    "unique_all", "unique_counts", "unique_inverse", "unique_values", "isin",
    "repeat", "tile", "diff", "expand_dims", "broadcast_shapes",
    "cumulative_sum", "cumulative_prod", "count_nonzero", "sum", "prod", "mean", "var", "std", "all", "any",
    "can_cast", "searchsorted", "clip",
]

UniqueAllResult = _namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = _namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = _namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _check_array(x, op, name="x"):
    if not isinstance(x, Array):
        raise TypeError(f"{op}: {name} must be a tessel array, got {type(x).__name__}")


# ---- set functions ----
def _complex_codes(x):
    """int64 codes of the complex x's elements (shape of x): two elements get the same code exactly
    when they compare equal (-0.0 equals +0.0 in each component; an element with a NaN component
    equals nothing, so its code is its own). Built from the unique inverse of the real and the
    imaginary parts (the C++ set ops sort real values only)."""
    _, _, re_code, _ = _tessel._unique_all(_tessel.real(x), False, True, False)
    im_values, _, im_code, _ = _tessel._unique_all(_tessel.imag(x), False, True, False)
    return re_code * _builtins.max(im_values.shape[0], 1) + im_code


def _unique(x, want_index, want_inverse, want_counts):
    """(values, indices, inverse_indices, counts) of the flattened x, the ones not asked for None.
    Complex x: the unique values of its integer codes (ordered by real, then imaginary part)."""
    if x.dtype.kind != "c":
        return _tessel._unique_all(x, want_index, want_inverse, want_counts)
    _, index, inverse, counts = _tessel._unique_all(_complex_codes(x), True, want_inverse, want_counts)
    values = _tessel.take(_tessel.reshape(x, (-1,)), index)
    return values, (index if want_index else None), inverse, counts


def unique_all(x, /):
    """Unique values of the flattened x (ascending), the index of each one's first occurrence, the
    inverse indices (shape of x) and the counts. NaNs are distinct; -0.0 and +0.0 are one value.
    The number of unique values is read back to the host: one synchronization."""
    _check_array(x, "unique_all")
    return UniqueAllResult(*_unique(x, True, True, True))


def unique_counts(x, /):
    """Unique values of the flattened x and how often each occurs (one synchronization)."""
    _check_array(x, "unique_counts")
    values, _, _, counts = _unique(x, False, False, True)
    return UniqueCountsResult(values, counts)


def unique_inverse(x, /):
    """Unique values of the flattened x and the indices into them that rebuild x (shape of x)."""
    _check_array(x, "unique_inverse")
    values, _, inverse, _ = _unique(x, False, True, False)
    return UniqueInverseResult(values, inverse)


def unique_values(x, /):
    """Unique values of the flattened x, ascending; NaNs are distinct (one synchronization)."""
    _check_array(x, "unique_values")
    return _unique(x, False, False, False)[0]


def _as_operand(value, other, op):
    """A Python scalar as a 0-d array beside the array `other` (weak: the array's dtype kind);
    other array-likes (NumPy arrays, sequences) through asarray on other's device."""
    if isinstance(value, Array):
        return value
    if isinstance(value, (_builtins.bool, int, float, complex)):
        dtype = _tessel._result_type_scalar(other.dtype, value)
        return _asarray(value, dtype=dtype, device=other.device)
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{op}: expected a tessel array or a Python scalar, got {type(value).__name__}")
    return _asarray(value, device=other.device)


def isin(x1, x2, /, *, invert=False):
    """Whether each element of x1 is in x2 (bool, shape of x1); at least one must be an array.
    Sort-based: x2 is sorted on the device, then each x1 element is binary-searched."""
    if not isinstance(x1, Array) and not isinstance(x2, Array):
        raise TypeError(f"isin: x1 or x2 must be a tessel array, got {type(x1).__name__} and {type(x2).__name__}")
    if not isinstance(x1, Array):
        x1 = _as_operand(x1, x2, "isin")
    elif not isinstance(x2, Array):
        x2 = _as_operand(x2, x1, "isin")
    if x1.dtype.kind == "c" or x2.dtype.kind == "c":
        # Equality after type promotion, through the integer codes of both arrays' elements together.
        common = _tessel.result_type_dtypes(x1.dtype, x2.dtype)
        flat1 = _tessel.reshape(x1.astype(common), (-1,))
        both = _tessel.concat([flat1, _tessel.reshape(x2.astype(common), (-1,))])
        codes = _complex_codes(both)
        n1 = flat1.shape[0]
        x1, x2 = _tessel.reshape(codes[:n1], x1.shape), codes[n1:]
    return _tessel._isin(x1, x2, _builtins.bool(invert))


# ---- manipulation ----
def repeat(x, repeats, /, *, axis=None):
    """Repeats each element of x (flattened when axis is None) repeats times. An array of counts
    makes the output size data-dependent: its total is read back to the host (one synchronization)."""
    _check_array(x, "repeat")
    return _tessel._repeat(x, repeats, axis)


def tile(x, repetitions, /):
    """x repeated repetitions[i] times along each axis: one broadcast copy on the device."""
    _check_array(x, "tile")
    try:
        reps = tuple(_operator.index(r) for r in repetitions)
    except TypeError:
        raise TypeError(f"tile: repetitions must be a tuple of integers, got {repetitions!r}") from None
    for i, r in enumerate(reps):
        if r < 0:
            raise ValueError(f"tile: repetitions must be non-negative, got {r} at position {i} of {reps}")
    ndim = _builtins.max(x.ndim, len(reps))
    shape = (1,) * (ndim - x.ndim) + tuple(x.shape)
    reps = (1,) * (ndim - len(reps)) + reps
    out_shape = tuple(r * s for r, s in zip(reps, shape))
    if _builtins.all(r == 1 for r in reps):
        return _tessel.reshape(x, out_shape, copy=True)
    interleaved, broadcast = [], []
    for r, s in zip(reps, shape):
        interleaved += [1, s]
        broadcast += [r, s]
    wide = _tessel.broadcast_to(_tessel.reshape(x, tuple(interleaved)), tuple(broadcast))
    return _tessel.reshape(wide, out_shape)


def _normalize_axis(axis, ndim, op):
    try:
        axis = _operator.index(axis)
    except TypeError:
        raise TypeError(f"{op}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise IndexError(f"{op}: axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def _along(x, axis, index):
    key = [slice(None)] * x.ndim
    key[axis] = index
    return x[tuple(key)]


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The n-th forward difference along axis (x[i+1] - x[i]; for bool, x[i+1] != x[i]), after
    prepending / appending values along that axis."""
    _check_array(x, "diff")
    if not _is_int(n) or n < 0:
        raise ValueError(f"diff: n must be a non-negative integer, got {n!r}")
    if x.ndim == 0:
        raise ValueError("diff: x must have at least one dimension, got a 0-d array")
    axis = _normalize_axis(axis, x.ndim, "diff")
    if n == 0:
        return x  # as NumPy: prepend and append only take part in a difference
    if prepend is not None or append is not None:
        parts = []
        for extra in (prepend, None, append):
            if extra is None:
                continue
            if not isinstance(extra, Array):
                shape = list(x.shape)
                shape[axis] = 1
                extra = _tessel.broadcast_to(_as_operand(extra, x, "diff"), tuple(shape))
            parts.append(extra)
        parts.insert(1 if prepend is not None else 0, x)
        x = _tessel.concat(parts, axis=axis)
    for _ in range(n):
        later, earlier = _along(x, axis, slice(1, None)), _along(x, axis, slice(None, -1))
        x = _tessel.not_equal(later, earlier) if x.dtype == _tessel.bool else later - earlier
    return x


def expand_dims(x, /, axis=0):
    """x with a size-1 axis inserted at each position of axis (an int or a tuple, positions in the
    result); a view."""
    _check_array(x, "expand_dims")
    if not isinstance(axis, tuple):
        return _tessel.expand_dims(x, axis=axis)
    ndim = x.ndim + len(axis)
    positions = []
    for a in axis:
        a = _operator.index(a)
        if not -ndim <= a < ndim:
            raise IndexError(f"expand_dims: axis {a} is out of bounds for the result's {ndim} dimensions")
        positions.append(a % ndim)
    if len(set(positions)) != len(positions):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    rest = iter(x.shape)
    return _tessel.reshape(x, tuple(1 if i in positions else next(rest) for i in range(ndim)))


def broadcast_shapes(*shapes):
    """The shape that arrays of these shapes broadcast to (ValueError when they do not)."""
    result = ()
    for shape in shapes:
        shape = tuple(_operator.index(s) for s in ((shape,) if _is_int(shape) else shape))
        n = _builtins.max(len(result), len(shape))
        a = (1,) * (n - len(result)) + result
        b = (1,) * (n - len(shape)) + shape
        out = []
        for i, (p, q) in enumerate(zip(a, b)):
            if p != q and p != 1 and q != 1:
                raise ValueError(f"broadcast_shapes: shapes {a} and {b} do not broadcast (axis {i}: {p} vs {q})")
            out.append(q if p == 1 else p)
        result = tuple(out)
    return result


# ---- statistical ----
def _with_dtype(x, dtype):
    return x if dtype is None or x.dtype == dtype else x.astype(dtype)


def _result_dtype(result, dtype):
    return result if dtype is None or result.dtype == dtype else result.astype(dtype)


_sum, _prod, _mean, _all, _any = _tessel.sum, _tessel.prod, _tessel.mean, _tessel.all, _tessel.any
_var, _std = _tessel.var, _tessel.std


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """Sum over axis (None: all axes). dtype=None: unsigned integers sum in uint64, bool and signed
    integers in int64, floating-point and complex types in their own dtype; otherwise in dtype."""
    x = _with_dtype(x, dtype)
    return _result_dtype(_sum(x, axis=axis, keepdims=keepdims), dtype)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """Product over axis, with the dtype rules of sum."""
    x = _with_dtype(x, dtype)
    return _result_dtype(_prod(x, axis=axis, keepdims=keepdims), dtype)


def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean over axis (floating-point and complex inputs; an integer x gives the
    default real floating-point dtype, float32)."""
    if isinstance(x, Array):
        if x.dtype.kind in "iub":
            return _mean(x, axis=axis, keepdims=keepdims).astype(_tessel.float32)
    return _mean(x, axis=axis, keepdims=keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance over axis, divided by (count - correction). An integer or bool x gives the default
    real floating-point dtype, float32 (computed in float64), as the standard says."""
    result = _var(x, axis=axis, correction=correction, keepdims=keepdims)
    return result.astype(_tessel.float32) if isinstance(x, Array) and x.dtype.kind in "iub" else result


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation over axis, with var's correction and dtypes."""
    result = _std(x, axis=axis, correction=correction, keepdims=keepdims)
    return result.astype(_tessel.float32) if isinstance(x, Array) and x.dtype.kind in "iub" else result


def all(x, /, *, axis=None, keepdims=False):
    """Whether every element over axis is true (nonzero; a complex NaN is true)."""
    return _all(x, axis=axis, keepdims=keepdims)


def any(x, /, *, axis=None, keepdims=False):
    """Whether any element over axis is true (nonzero; a complex NaN is true)."""
    return _any(x, axis=axis, keepdims=keepdims)


def _cumulative(scan, name, identity, x, axis, dtype, include_initial):
    _check_array(x, name)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"{name}: axis is required for arrays with other than one dimension, got shape {x.shape}")
        axis = 0
    axis = _normalize_axis(axis, x.ndim, name)
    x = _with_dtype(x, dtype)
    if x.dtype.kind == "c" and scan is _tessel.cumprod:
        result = _complex_cumprod(x, axis)
    else:
        result = _result_dtype(scan(x, axis), dtype)
    if include_initial:
        shape = list(result.shape)
        shape[axis] = 1
        first = _tessel.full(tuple(shape), identity, dtype=result.dtype, device=x.device)
        result = _tessel.concat([first, result], axis=axis)
    return result


def _complex_cumprod(x, axis):
    """Running products of a complex x along axis by doubling (Hillis-Steele: log2(n) multiply
    launches); the C++ scan is real-only."""
    y = _moveaxis_last(x, axis)
    n, step = y.shape[-1], 1
    while step < n:
        y = _tessel.concat([y[..., :step], y[..., step:] * y[..., :n - step]], axis=-1)
        step *= 2
    return _moveaxis_back(y, axis)


def _moveaxis_last(x, axis):
    return _tessel.permute_dims(x, tuple(i for i in range(x.ndim) if i != axis) + (axis,))


def _moveaxis_back(y, axis):
    order = list(range(y.ndim - 1))
    order.insert(axis, y.ndim - 1)
    return _tessel.permute_dims(y, tuple(order))


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sums along axis (optional for 1-D x), with the dtype rules of sum; include_initial
    puts the sum of nothing (0) first."""
    return _cumulative(_tessel.cumsum, "cumulative_sum", 0, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running products along axis (optional for 1-D x), with the dtype rules of prod;
    include_initial puts the product of nothing (1) first."""
    return _cumulative(_tessel.cumprod, "cumulative_prod", 1, x, axis, dtype, include_initial)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """The number of nonzero elements over axis (int64)."""
    _check_array(x, "count_nonzero")
    return _sum(_tessel.not_equal(x, 0), axis=axis, keepdims=keepdims)


# ---- elementwise ----
_clip = _tessel.clip


def clip(x, /, min=None, max=None):
    """x clamped to [min, max] (either may be None, a Python scalar or an array; all three
    broadcast). min and max take no part in type promotion: the result has x's dtype when they
    are of x's kind (the standard leaves mixed kinds unspecified; those keep the promoted dtype)."""
    result = _clip(x, min, max)
    if isinstance(x, Array) and result.dtype != x.dtype and result.dtype.kind == x.dtype.kind:
        result = result.astype(x.dtype)
    return result


# ---- data types and searching ----
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
    source = from_.dtype if isinstance(from_, Array) else _tessel._dtype_of(from_)
    target = _tessel._dtype_of(to)
    if casting is None:
        return _spec_can_cast(source, target)
    return _tessel._can_cast(source, target, casting)


_searchsorted = _tessel.searchsorted


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Insertion points of x2 (an array or a Python scalar) into the ascending 1-D x1. With sorter
    (the indices that sort x1), x1 is sorted on the device instead: a stable sort gives the same
    values as x1[sorter]."""
    _check_array(x1, "searchsorted", "x1")
    if sorter is not None:
        x1 = _tessel._sort(x1, -1)
    return _searchsorted(x1, _as_operand(x2, x1, "searchsorted"), side=side)

