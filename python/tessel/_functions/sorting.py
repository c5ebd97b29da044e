"""Sorting functions: sort and argsort with the Array API's descending and stable parameters,
over the C++ sort (ascending, stable). Each is a row of include/tessel/ops/sort_list.hpp, which
gives its docstring (sorting_doc)."""
from __future__ import annotations

from .. import _tessel
from ._helpers import sorting_doc
from .manipulation import flip


@sorting_doc
def sort(x, /, *, axis=-1, descending=False, stable=True):
    result = _tessel._sort(x, axis)
    return flip(result, axis=axis) if descending else result


@sorting_doc
def argsort(x, /, *, axis=-1, descending=False, stable=True):
    if descending:
        # Stable descending order: sort the reversed array, then map the indices back.
        n = x.shape[axis]
        idx = _tessel._argsort(flip(x, axis=axis), axis)
        return flip((n - 1) - idx, axis=axis)
    return _tessel._argsort(x, axis)
