"""Statistical functions written in Python: the Array API's sum, prod, mean, var, std,
cumulative_sum, cumulative_prod and count_nonzero (their dtype rules over the C++ reductions and
scans), and NumPy's amax, amin, ptp, average, median, quantile, percentile, histogram and
bincount. The other reductions are C++ functions (include/tessel/ops/reduce_list.hpp); a function
here over one of them has that reduction's docstring (reduction_doc)."""
from __future__ import annotations

import builtins

from .. import _tessel
from .._tessel import Array
from ._helpers import check_array, finish, is_int, normalize_axis, reduction_doc, reject, unsupported, with_dtype
from .creation import arange, asarray
from .manipulation import moveaxis
from .searching import searchsorted
from .sets import unique_counts
from .sorting import sort


def _as_dtype(result, dtype):
    return result if dtype is None or result.dtype == dtype else result.astype(dtype)


@reduction_doc
def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    x = with_dtype(x, dtype)
    return _as_dtype(_tessel.sum(x, axis=axis, keepdims=keepdims), dtype)


@reduction_doc
def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    x = with_dtype(x, dtype)
    return _as_dtype(_tessel.prod(x, axis=axis, keepdims=keepdims), dtype)


@reduction_doc
def mean(x, /, *, axis=None, keepdims=False):
    if isinstance(x, Array) and x.dtype.kind in "iub":
        return _tessel.mean(x, axis=axis, keepdims=keepdims).astype(_tessel.float32)
    return _tessel.mean(x, axis=axis, keepdims=keepdims)


@reduction_doc
def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    result = _tessel.var(x, axis=axis, correction=correction, keepdims=keepdims)
    return result.astype(_tessel.float32) if isinstance(x, Array) and x.dtype.kind in "iub" else result


@reduction_doc
def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    result = _tessel.std(x, axis=axis, correction=correction, keepdims=keepdims)
    return result.astype(_tessel.float32) if isinstance(x, Array) and x.dtype.kind in "iub" else result


def _cumulative(scan, name, identity, x, axis, dtype, include_initial):
    check_array(x, name)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"{name}: axis is required for arrays with other than one dimension, got shape {x.shape}")
        axis = 0
    axis = normalize_axis(axis, x.ndim, name)
    x = with_dtype(x, dtype)
    if x.dtype.kind == "c" and scan is _tessel.cumprod:
        result = _complex_cumprod(x, axis)
    else:
        result = _as_dtype(scan(x, axis), dtype)
    if include_initial:
        shape = list(result.shape)
        shape[axis] = 1
        first = _tessel.full(tuple(shape), identity, dtype=result.dtype, device=x.device)
        result = _tessel.concat([first, result], axis=axis)
    return result


def _complex_cumprod(x, axis):
    """Running products of a complex x along axis by doubling (Hillis-Steele: log2(n) multiply
    launches); the C++ scan is real-only."""
    y = moveaxis(x, axis, -1)
    n, step = y.shape[-1], 1
    while step < n:
        y = _tessel.concat([y[..., :step], y[..., step:] * y[..., :n - step]], axis=-1)
        step *= 2
    return moveaxis(y, -1, axis)


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
    check_array(x, "count_nonzero")
    return _tessel.sum(_tessel.not_equal(x, 0), axis=axis, keepdims=keepdims)


# ---- NumPy's names ----
def amax(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    """NumPy's amax: the maximum over axis."""
    reject("amax", initial=initial, where=None if where is True else where)
    return finish(_tessel.max(a, axis=axis, keepdims=builtins.bool(keepdims)), out, "amax")


def amin(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    """NumPy's amin: the minimum over axis."""
    reject("amin", initial=initial, where=None if where is True else where)
    return finish(_tessel.min(a, axis=axis, keepdims=builtins.bool(keepdims)), out, "amin")


def ptp(a, axis=None, out=None, keepdims=False):
    """The range (maximum - minimum) over axis."""
    spread = _tessel.max(a, axis=axis, keepdims=keepdims) - _tessel.min(a, axis=axis, keepdims=keepdims)
    return finish(spread, out, "ptp")


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """The mean over axis, weighted by weights (1-D along axis, or of a's shape); with returned,
    also the sum of the weights."""
    if weights is None:
        avg = mean(a.astype(_tessel.float64) if a.dtype.kind in "iub" else a, axis=axis, keepdims=keepdims)
        total = asarray(a.size / builtins.max(avg.size, 1), dtype=avg.dtype, device=a.device)
    else:
        w = weights if isinstance(weights, Array) else asarray(weights, device=a.device)
        if w.shape != a.shape:
            if axis is None or w.ndim != 1 or not is_int(axis) or w.shape[0] != a.shape[int(axis)]:
                raise ValueError(f"numpy.average: weights of shape {w.shape} do not fit {a.shape} along axis {axis}")
            w = _tessel.reshape(w, tuple(a.shape[int(axis)] if i == int(axis) % a.ndim else 1 for i in range(a.ndim)))
        total = sum(w * _tessel.ones_like(a, dtype=w.dtype), axis=axis, keepdims=keepdims)
        avg = sum(a * w, axis=axis, keepdims=keepdims) / total
    if returned:
        return avg, _tessel.broadcast_to(total, avg.shape) if total.shape != avg.shape else total
    return avg


def _quantile(a, q, axis, keepdims, name):
    """Linear interpolation between the order statistics (NumPy's default method); NaN where the
    reduced elements hold a NaN."""
    if a.dtype.kind not in "fiub":
        raise TypeError(f"numpy.{name}: needs a real array, got {a.dtype}")
    a = a.astype(_tessel.float64 if a.dtype.kind in "iub" else a.dtype)
    if axis is None:
        a, axis = _tessel.reshape(a, (-1,)), 0
    axis = int(axis) % a.ndim
    n = a.shape[axis]
    if n == 0:
        raise ValueError(f"numpy.{name}: the reduced axis is empty")
    srt = sort(a, axis=axis)  # NaN sorts last
    qs = asarray(q, dtype=_tessel.float64, device=a.device)
    if builtins.bool(_tessel.any((qs < 0) | (qs > 1))):
        raise ValueError(f"numpy.{name}: quantiles must be in [0, 1] (percentiles in [0, 100])")
    pos = qs * (n - 1)
    lo = _tessel.floor(pos).astype(_tessel.int64)
    hi = _tessel.minimum(lo + 1, n - 1)
    frac = (pos - _tessel.floor(pos)).astype(a.dtype)
    moved = moveaxis(srt, axis, -1)
    flat_lo, flat_hi = _tessel.reshape(lo, (-1,)), _tessel.reshape(hi, (-1,))
    lower, upper = _tessel.take(moved, flat_lo, axis=-1), _tessel.take(moved, flat_hi, axis=-1)
    result = lower + (upper - lower) * _tessel.reshape(frac, (-1,))
    nan = asarray(float("nan"), dtype=a.dtype, device=a.device)
    result = _tessel.where(_tessel.any(_tessel.isnan(moved), axis=-1, keepdims=True), nan, result)
    result = moveaxis(result, -1, 0)  # NumPy: the quantiles' axis first
    result = _tessel.reshape(result, tuple(qs.shape) + tuple(result.shape[1:]))
    if keepdims:
        result = _tessel.expand_dims(result, axis=qs.ndim + axis)
    return result


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    """The q-th quantiles (q in [0, 1]) over axis, interpolated linearly (NumPy's default)."""
    if method != "linear":
        raise unsupported(f"numpy.quantile with method={method!r}")
    return finish(_quantile(a, q, axis, keepdims, "quantile"), out, "quantile")


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    """The q-th percentiles (q in [0, 100]) over axis, interpolated linearly."""
    if method != "linear":
        raise unsupported(f"numpy.percentile with method={method!r}")
    q = q / 100.0 if isinstance(q, Array) else asarray(q, dtype=_tessel.float64) / 100.0
    return finish(_quantile(a, q, axis, keepdims, "percentile"), out, "percentile")


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over axis (the mean of the two middle values for an even count)."""
    return finish(_quantile(a, 0.5, axis, keepdims, "median"), out, "median")


def bincount(x, weights=None, minlength=0):
    """Counts of each value 0 .. max(x) of a 1-D non-negative integer array; one synchronization."""
    if weights is not None:
        raise unsupported("numpy.bincount with weights")
    if x.ndim != 1 or x.dtype.kind not in "iu":
        raise TypeError(f"bincount: needs a 1-D integer array, got {x.ndim} dimensions of {x.dtype}")
    if x.shape[0] and int(_tessel.min(x)) < 0:
        raise ValueError("bincount: x must be non-negative")
    values, counts = unique_counts(x)
    n = builtins.max(int(_tessel.max(x)) + 1 if x.shape[0] else 0, int(minlength))
    out = _tessel.zeros((n,), dtype=_tessel.int64, device=x.device)
    if values.shape[0]:
        out[values.astype(_tessel.int64)] = counts
    return out


def histogram(a, bins=10, range=None, density=None, weights=None):
    """Counts over equal bins from range (default: a's minimum to maximum) or over given edges;
    every bin is half open but the last, which holds its right edge (NumPy's rule)."""
    if weights is not None:
        raise unsupported("numpy.histogram with weights")
    x = _tessel.reshape(a, (-1,))
    x = x.astype(_tessel.float64) if x.dtype.kind in "iub" else x
    if is_int(bins):
        nbins = int(bins)
        if nbins < 1:
            raise ValueError(f"histogram: bins must be at least 1, got {nbins}")
        import numpy as np

        # NumPy's edges to the bit: linspace from the data's own minimum and maximum computes in
        # the data's dtype, from a given range (Python floats) in float64; start + k * step, the
        # last edge the maximum itself.
        if range is not None:
            lo, hi, compute = float(range[0]), float(range[1]), np.float64
        elif x.shape[0]:
            compute = np.float32 if x.dtype == _tessel.float32 else np.float64
            lo, hi = compute(_tessel.min(x)), compute(_tessel.max(x))
        else:
            lo, hi, compute = 0.0, 1.0, np.float64
        if not lo <= hi:
            raise ValueError(f"histogram: range {range!r} has its maximum below its minimum")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        lo, hi = compute(lo), compute(hi)
        step = (hi - lo) / compute(nbins)
        k = arange(nbins + 1, dtype=_tessel.float32 if compute is np.float32 else _tessel.float64, device=x.device)
        edges = (k * float(step) + float(lo)).astype(x.dtype)
        edges[-1] = float(hi)
    else:
        edges = (bins if isinstance(bins, Array) else asarray(bins, device=x.device)).astype(_tessel.float64)
        nbins = edges.shape[0] - 1
        if nbins < 1 or builtins.bool(_tessel.any(edges[1:] < edges[:-1])):
            raise ValueError("histogram: bin edges must be at least two, increasing")
    xd = x.astype(edges.dtype)
    idx = searchsorted(edges, xd, side="right") - 1
    idx = _tessel.where(xd == edges[-1], nbins - 1, idx)  # the last bin holds its right edge
    inside = (idx >= 0) & (idx < nbins)
    counts = bincount(idx[inside], minlength=nbins)
    if density:
        widths = edges[1:] - edges[:-1]
        return counts / (sum(counts) * widths), edges
    return counts, edges
