"""Searching functions written in Python: searchsorted (the Array API's; a row of
include/tessel/ops/sort_list.hpp, which gives its docstring) and NumPy's argwhere. argmax, argmin,
nonzero and where are C++ functions."""
from __future__ import annotations

import builtins

from .. import _tessel
from ._helpers import as_operand, check_array, sorting_doc


@sorting_doc
def searchsorted(x1, x2, /, *, side="left", sorter=None):
    # With sorter (the indices that sort x1), x1 is sorted on the device instead: a stable sort
    # gives the same values as x1[sorter].
    check_array(x1, "searchsorted", "x1")
    if sorter is not None:
        x1 = _tessel._sort(x1, -1)
    return _tessel.searchsorted(x1, as_operand(x2, x1, "searchsorted"), side=side)


def argwhere(a):
    """The indices of the nonzero elements, one row per element (N x ndim); one synchronization."""
    if a.ndim == 0:
        return _tessel.zeros((1 if builtins.bool(a) else 0, 0), dtype=_tessel.int64, device=a.device)
    return _tessel.stack(_tessel.nonzero(a), axis=-1)
