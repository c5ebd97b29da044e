"""Logic functions: the Array API's all and any (with its keyword-only parameters), and NumPy's
isclose, allclose and array_equal. The comparisons and logical_* are C++ elementwise functions."""
from __future__ import annotations

import builtins

from .. import _tessel
from .._tessel import Array
from ._helpers import reduction_doc


@reduction_doc
def all(x, /, *, axis=None, keepdims=False):
    return _tessel.all(x, axis=axis, keepdims=keepdims)


@reduction_doc
def any(x, /, *, axis=None, keepdims=False):
    return _tessel.any(x, axis=axis, keepdims=keepdims)


def _as_float(x):
    return x.astype(_tessel.float64) if isinstance(x, Array) and x.dtype.kind in "biu" else x


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |a - b| <= atol + rtol |b| (NumPy's isclose)."""
    a, b = _as_float(a), _as_float(b)
    close = _tessel.logical_or(_tessel.abs(a - b) <= atol + rtol * _tessel.abs(b), a == b)  # a == b: equal infinities
    if equal_nan:
        close = _tessel.logical_or(close, _tessel.logical_and(_tessel.isnan(a), _tessel.isnan(b)))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether isclose holds for every element (a Python bool: one synchronization)."""
    return builtins.bool(_tessel.all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def array_equal(a1, a2, equal_nan=False):
    """Whether a1 and a2 have one shape and equal elements (a Python bool)."""
    from .creation import asarray

    if not isinstance(a1, Array) or not isinstance(a2, Array):
        device = next((v.device for v in (a1, a2) if isinstance(v, Array)), None)
        a1, a2 = (v if isinstance(v, Array) else asarray(v, device=device) for v in (a1, a2))
    if tuple(a1.shape) != tuple(a2.shape):
        return False
    same = a1 == a2
    if equal_nan and a1.dtype.kind in "fc" and a2.dtype.kind in "fc":
        same = _tessel.logical_or(same, _tessel.logical_and(_tessel.isnan(a1), _tessel.isnan(a2)))
    return builtins.bool(_tessel.all(same))
