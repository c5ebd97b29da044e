"""Set functions (the Array API's): unique_all, unique_counts, unique_inverse, unique_values and
isin, over the C++ set operations (which sort real values; complex values go through integer
codes of their elements). Each is a row of include/tessel/ops/set_ops_list.hpp, which gives its
docstring (set_doc)."""
from __future__ import annotations

import builtins
from collections import namedtuple

from .. import _tessel
from .._tessel import Array
from ._helpers import as_operand, check_array, set_doc

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _complex_codes(x):
    """int64 codes of the complex x's elements (shape of x): two elements get the same code exactly
    when they compare equal (-0.0 equals +0.0 in each component; an element with a NaN component
    equals nothing, so its code is its own). Built from the unique inverse of the real and the
    imaginary parts (the C++ set ops sort real values only)."""
    _, _, re_code, _ = _tessel._unique_all(_tessel.real(x), False, True, False)
    im_values, _, im_code, _ = _tessel._unique_all(_tessel.imag(x), False, True, False)
    return re_code * builtins.max(im_values.shape[0], 1) + im_code


def _unique(x, want_index, want_inverse, want_counts):
    """(values, indices, inverse_indices, counts) of the flattened x, the ones not asked for None.
    Complex x: the unique values of its integer codes (ordered by real, then imaginary part)."""
    if x.dtype.kind != "c":
        return _tessel._unique_all(x, want_index, want_inverse, want_counts)
    _, index, inverse, counts = _tessel._unique_all(_complex_codes(x), True, want_inverse, want_counts)
    values = _tessel.take(_tessel.reshape(x, (-1,)), index)
    return values, (index if want_index else None), inverse, counts


@set_doc
def unique_all(x, /):
    check_array(x, "unique_all")
    return UniqueAllResult(*_unique(x, True, True, True))


@set_doc
def unique_counts(x, /):
    check_array(x, "unique_counts")
    values, _, _, counts = _unique(x, False, False, True)
    return UniqueCountsResult(values, counts)


@set_doc
def unique_inverse(x, /):
    check_array(x, "unique_inverse")
    values, _, inverse, _ = _unique(x, False, True, False)
    return UniqueInverseResult(values, inverse)


@set_doc
def unique_values(x, /):
    check_array(x, "unique_values")
    return _unique(x, False, False, False)[0]


@set_doc
def isin(x1, x2, /, *, invert=False):
    if not isinstance(x1, Array) and not isinstance(x2, Array):
        raise TypeError(f"isin: x1 or x2 must be a tessel array, got {type(x1).__name__} and {type(x2).__name__}")
    if not isinstance(x1, Array):
        x1 = as_operand(x1, x2, "isin")
    elif not isinstance(x2, Array):
        x2 = as_operand(x2, x1, "isin")
    if x1.dtype.kind == "c" or x2.dtype.kind == "c":
        # Equality after type promotion, through the integer codes of both arrays' elements together.
        common = _tessel._result_type_dtypes(x1.dtype, x2.dtype)
        flat1 = _tessel.reshape(x1.astype(common), (-1,))
        both = _tessel.concat([flat1, _tessel.reshape(x2.astype(common), (-1,))])
        codes = _complex_codes(both)
        n1 = flat1.shape[0]
        x1, x2 = _tessel.reshape(codes[:n1], x1.shape), codes[n1:]
    return _tessel._isin(x1, x2, builtins.bool(invert))
