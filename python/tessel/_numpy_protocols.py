"""NumPy's dispatch protocols on tessel.Array, as CuPy has them.

``__array_ufunc__`` runs NumPy ufuncs (``np.exp(x)``, ``np.add(x, y)``, ``np.add.reduce``) with the
tessel function of the same meaning, on the array's device. ``__array_function__`` does the same for
NumPy's other functions (``np.sum``, ``np.concatenate``, ``np.where``, ...). Both return tessel
arrays. A NumPy function or ufunc method without a tessel implementation raises TypeError naming
it: nothing is copied to the host behind the caller's back (``np.asarray(x)`` or ``x.__array__()``
copy explicitly). NumPy arrays and scalars mixed in are moved to the tessel array's device.
"""
from __future__ import annotations

import builtins as _builtins
import math as _math

from . import _tessel
from ._array_api import _is_int
from ._tessel import Array

# NumPy ufunc names whose tessel function has another name.
_UFUNC_ALIASES = {
    "absolute": "abs", "conjugate": "conj", "true_divide": "divide", "power": "pow", "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift", "arccos": "acos",
    "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh", "arctan": "atan", "arctanh": "atanh",
    "arctan2": "atan2", "fabs": "abs", "rint": "round", "mod": "remainder",
}
# ufunc.reduce as a tessel reduction (NumPy's default axis for reduce is 0).
_REDUCTIONS = {
    "add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "logical_and": "all", "logical_or": "any",
}
_ACCUMULATIONS = {"add": "cumulative_sum", "multiply": "cumulative_prod"}


def _unsupported(what):
    return TypeError(
        f"tessel has no implementation of {what} for tessel arrays; convert explicitly with np.asarray(x) "
        "(a copy to the host) to run NumPy's")


def _ts():
    import tessel

    return tessel


def _device_of(values):
    for v in values:
        if isinstance(v, Array):
            return v.device
        if isinstance(v, (list, tuple)):
            d = _device_of(v)
            if d is not None:
                return d
    return None


def _to_tessel(value, device):
    """NumPy arrays and scalars among the operands, as tessel values on `device`."""
    import numpy as np

    if isinstance(value, Array):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return _ts().asarray(value, device=device)
    if isinstance(value, list):
        return [_to_tessel(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_tessel(v, device) for v in value)
    return value


def _finish(result, out, name):
    """Writes result into out (one tessel array or a 1-tuple of one), as NumPy's out=."""
    if out is None:
        return result
    if isinstance(out, tuple):
        if len(out) != 1:
            raise _unsupported(f"numpy.{name} with {len(out)} outputs")
        out = out[0]
    if not isinstance(out, Array):
        raise TypeError(f"numpy.{name}: out= must be a tessel array for tessel inputs, got {type(out).__name__}")
    out[...] = result
    return out


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    name = ufunc.__name__
    ts = _ts()
    device = _device_of(inputs) or self.device
    inputs = [_to_tessel(v, device) for v in inputs]
    out = kwargs.pop("out", None)
    if out is not None and all(o is None for o in (out if isinstance(out, tuple) else (out,))):
        out = None
    dtype = kwargs.pop("dtype", None)
    for key, default in (("casting", "same_kind"), ("order", "K"), ("subok", True)):
        if key in kwargs and kwargs[key] == default:
            del kwargs[key]
    if kwargs.get("where", True) is not True:
        raise _unsupported(f"numpy.{name} with where=")
    kwargs.pop("where", None)
    if method == "__call__":
        func = getattr(ts, _UFUNC_ALIASES.get(name, name), None)
        if func is None or kwargs:
            raise _unsupported(f"the NumPy ufunc numpy.{name}" + (f" with {sorted(kwargs)}" if kwargs else ""))
        if dtype is not None:
            # NumPy computes in dtype: cast the array operands first.
            inputs = [ts.astype(v, dtype) if isinstance(v, Array) else v for v in inputs]
        result = func(*inputs)
        return _finish(result, out, name)
    if method == "reduce" and name in _REDUCTIONS:
        (x,) = inputs
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        if kwargs.pop("initial", None) is not None or kwargs:
            raise _unsupported(f"numpy.{name}.reduce with {sorted(kwargs) or ['initial']}")
        reduce = getattr(ts, _REDUCTIONS[name])
        extra = {"dtype": dtype} if dtype is not None and name in ("add", "multiply") else {}
        return _finish(reduce(x, axis=axis, keepdims=keepdims, **extra), out, f"{name}.reduce")
    if method == "accumulate" and name in _ACCUMULATIONS:
        (x,) = inputs
        axis = kwargs.pop("axis", 0)
        if kwargs:
            raise _unsupported(f"numpy.{name}.accumulate with {sorted(kwargs)}")
        return _finish(getattr(ts, _ACCUMULATIONS[name])(x, axis=axis, dtype=dtype), out, f"{name}.accumulate")
    raise _unsupported(f"the NumPy ufunc method numpy.{name}.{method}")


# ---- __array_function__ ----
def _no(name, **values):
    """TypeError for NumPy arguments given values tessel does not implement."""
    given = [k for k, v in values.items() if v is not None and v is not False]
    if given:
        raise _unsupported(f"numpy.{name} with {', '.join(given)}=")


def _reduction(name, target=None, with_dtype=False):
    def impl(a, axis=None, dtype=None, out=None, keepdims=False, **rest):
        initial, where = rest.pop("initial", None), rest.pop("where", True)
        if rest:
            raise TypeError(f"numpy.{name}: unexpected arguments {sorted(rest)}")
        _no(name, initial=initial, where=None if where is True else where)
        kwargs = {"axis": axis, "keepdims": _builtins.bool(keepdims)}
        if with_dtype and dtype is not None:
            kwargs["dtype"] = dtype
        result = getattr(_ts(), target or name)(a, **kwargs)
        if dtype is not None and not with_dtype:
            result = _ts().astype(result, dtype)
        return _finish(result, out, name)

    return impl


def _variance(name):
    def impl(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **rest):
        where, mean, correction = rest.pop("where", True), rest.pop("mean", None), rest.pop("correction", None)
        if rest:
            raise TypeError(f"numpy.{name}: unexpected arguments {sorted(rest)}")
        _no(name, where=None if where is True else where, mean=mean)
        a = a if dtype is None else _ts().astype(a, dtype)
        result = getattr(_ts(), name)(a, axis=axis, correction=float(correction if correction is not None else ddof),
                                      keepdims=_builtins.bool(keepdims))
        return _finish(result, out, name)

    return impl


def _arg_reduction(name):
    def impl(a, axis=None, out=None, *, keepdims=False):
        return _finish(getattr(_ts(), name)(a, axis=axis, keepdims=_builtins.bool(keepdims)), out, name)

    return impl


def _scan(name, target):
    def impl(a, axis=None, dtype=None, out=None):
        ts = _ts()
        if axis is None:
            a = ts.reshape(a, (-1,))
            axis = 0
        return _finish(getattr(ts, target)(a, axis=axis, dtype=dtype), out, name)

    return impl


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    ts = _ts()
    arrays = list(arrays)
    if dtype is not None:
        arrays = [ts.astype(a, dtype) for a in arrays]
    return _finish(ts.concat(arrays, axis=axis), out, "concatenate")


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    ts = _ts()
    arrays = list(arrays)
    if dtype is not None:
        arrays = [ts.astype(a, dtype) for a in arrays]
    return _finish(ts.stack(arrays, axis=axis), out, "stack")


def _where(condition, x=None, y=None, /):
    ts = _ts()
    if x is None and y is None:
        return ts.nonzero(condition)
    if x is None or y is None:
        raise ValueError("numpy.where: either both or neither of x and y should be given")
    return ts.where(condition, x, y)


def _reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise _unsupported(f"numpy.reshape with order={order!r}")
    return _ts().reshape(a, tuple(shape if shape is not None else newshape) if not _is_int(shape) else (shape,),
                         copy=copy)


def _transpose(a, axes=None):
    ts = _ts()
    return ts.permute_dims(a, tuple(reversed(range(a.ndim))) if axes is None else tuple(axes))


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    _no("sort", order=order)
    ts = _ts()
    if axis is None:
        a, axis = ts.reshape(a, (-1,)), -1
    return ts.sort(a, axis=axis)


def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    _no("argsort", order=order)
    ts = _ts()
    if axis is None:
        a, axis = ts.reshape(a, (-1,)), -1
    return ts.argsort(a, axis=axis)


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kwargs):
    lo = a_min if min is None else min
    hi = a_max if max is None else max
    return _finish(_ts().clip(a, lo, hi), out, "clip")


def _round(a, decimals=0, out=None):
    """NumPy's round: half to even; with decimals, as NumPy does it, a * 10^d rounded, then / 10^d."""
    ts = _ts()
    decimals = int(decimals)
    if decimals == 0 or a.dtype.kind in "iub" and decimals > 0:
        return _finish(ts.round(a) if a.dtype.kind not in "iub" else ts.asarray(a, copy=True), out, "round")
    scale = 10.0 ** _builtins.abs(decimals)
    if a.dtype.kind in "iub":  # negative decimals of integers: to tens, hundreds, ... in the dtype
        return _finish(ts.astype(ts.round(ts.astype(a, ts.float64) / scale) * scale, a.dtype), out, "round")
    result = ts.round(a * scale) / scale if decimals > 0 else ts.round(a / scale) * scale
    return _finish(result, out, "round")


def _like(name):
    def impl(a, dtype=None, order="K", subok=True, shape=None, *, device=None, **rest):
        ts = _ts()
        if shape is not None:
            shape = (shape,) if _is_int(shape) else tuple(shape)
            make = {"zeros_like": ts.zeros, "ones_like": ts.ones, "empty_like": ts.empty}[name]
            return make(shape, dtype=dtype if dtype is not None else a.dtype, device=a.device)
        return getattr(ts, name)(a, dtype=dtype)

    return impl


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    ts = _ts()
    if shape is not None:
        shape = (shape,) if _is_int(shape) else tuple(shape)
        return ts.full(shape, fill_value, dtype=dtype if dtype is not None else a.dtype, device=a.device)
    return ts.full_like(a, fill_value, dtype=dtype)


def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
            sorted=True):
    _no("unique", axis=axis)
    ts = _ts()
    values, index, inverse, counts = _tessel._unique_all(ar, _builtins.bool(return_index), _builtins.bool(return_inverse),
                                                         _builtins.bool(return_counts))
    extra = [r for r, want in ((index, return_index), (inverse, return_inverse), (counts, return_counts)) if want]
    return (values, *extra) if extra else values


def _simple(target, positional=None):
    """A NumPy function whose arguments the tessel function of `target` takes as they are."""
    def impl(*args, **kwargs):
        return getattr(_ts(), target)(*args, **kwargs)

    return impl


def _ravel(a, order="C"):
    if order != "C":
        raise _unsupported(f"numpy.ravel with order={order!r}")
    return _ts().reshape(a, (-1,))


def _copy(a, order="K", subok=False):
    return _ts().asarray(a, copy=True)


def _repeat(a, repeats, axis=None):
    return _ts().repeat(a, repeats, axis=axis)


def _diff(a, n=1, axis=-1, prepend=None, append=None):
    return _ts().diff(a, n=n, axis=axis, prepend=prepend, append=append)


def _isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    return _ts().isin(element, test_elements, invert=invert)


def _searchsorted(a, v, side="left", sorter=None):
    return _ts().searchsorted(a, v, side=side, sorter=sorter)


def _count_nonzero(a, axis=None, *, keepdims=False):
    return _ts().count_nonzero(a, axis=axis, keepdims=keepdims)


def _expand_dims(a, axis):
    return _ts().expand_dims(a, axis)


def _squeeze(a, axis=None):
    ts = _ts()
    if axis is None:
        axis = tuple(i for i, s in enumerate(a.shape) if s == 1)
    return ts.squeeze(a, axis)


def _broadcast_to(array, shape, subok=False):
    return _ts().broadcast_to(array, tuple(shape) if not _is_int(shape) else (shape,))


def _flip(m, axis=None):
    return _ts().flip(m, axis=axis)


def _roll(a, shift, axis=None):
    return _ts().roll(a, shift, axis=axis)


def _moveaxis(a, source, destination):
    return _ts().moveaxis(a, source, destination)


def _tile(A, reps):
    return _ts().tile(A, (reps,) if _is_int(reps) else tuple(reps))


def _shape(a):
    return tuple(a.shape)


def _ndim(a):
    return a.ndim


def _size(a, axis=None):
    return a.size if axis is None else a.shape[axis]


def _astype(x, dtype, /, *, copy=True, device=None):
    return _ts().astype(x, dtype, copy=copy)


def _tensordot(a, b, axes=2):
    return _ts().tensordot(a, b, axes=axes)


def _dot(a, b, out=None):
    ts = _ts()
    if a.ndim == 0 or b.ndim == 0:
        return _finish(a * b, out, "dot")
    if b.ndim <= 2:
        return _finish(ts.matmul(a, b), out, "dot")
    raise _unsupported("numpy.dot of an array with more than 2 dimensions as the second operand")


def _as_float(x, ts):
    return ts.astype(x, ts.float64) if isinstance(x, Array) and x.dtype.kind in "biu" else x


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    ts = _ts()
    a, b = _as_float(a, ts), _as_float(b, ts)
    close = ts.logical_or(ts.abs(a - b) <= atol + rtol * ts.abs(b), a == b)  # a == b: equal infinities
    if equal_nan:
        close = ts.logical_or(close, ts.logical_and(ts.isnan(a), ts.isnan(b)))
    return close


def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _builtins.bool(_ts().all(_isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def _array_equal(a1, a2, equal_nan=False):
    ts = _ts()
    if not isinstance(a1, Array) or not isinstance(a2, Array):
        a1, a2 = (v if isinstance(v, Array) else ts.asarray(v, device=_device_of([a1, a2])) for v in (a1, a2))
    if tuple(a1.shape) != tuple(a2.shape):
        return False
    same = a1 == a2
    if equal_nan and a1.dtype.kind in "fc" and a2.dtype.kind in "fc":
        same = ts.logical_or(same, ts.logical_and(ts.isnan(a1), ts.isnan(a2)))
    return _builtins.bool(ts.all(same))


def _atleast(a, ndim):
    """NumPy's atleast_1d, atleast_2d and atleast_3d: a 1-D array becomes a row, (1, n) in 2-D and
    (1, n, 1) in 3-D; a 2-D one (m, n, 1) in 3-D."""
    if a.ndim >= ndim:
        return a
    shape = tuple(a.shape)
    if ndim == 3 and a.ndim >= 1:
        shape = ((1,) if a.ndim == 1 else ()) + shape + (1,)
    return _ts().reshape(a, (1,) * (ndim - len(shape)) + shape)


def _vstack(tup, *, dtype=None, casting="same_kind"):
    return _concatenate([_atleast(a, 2) for a in tup], axis=0, dtype=dtype)


def _hstack(tup, *, dtype=None, casting="same_kind"):
    arrays = [_atleast(a, 1) for a in tup]
    return _concatenate(arrays, axis=0 if arrays and arrays[0].ndim == 1 else 1, dtype=dtype)


def _argwhere(a):
    """The indices of the nonzero elements, one row per element (N x ndim); one synchronization."""
    ts = _ts()
    if a.ndim == 0:
        return ts.zeros((1 if _builtins.bool(a) else 0, 0), dtype=ts.int64, device=a.device)
    return ts.stack(ts.nonzero(a), axis=-1)


def _outer(a, b, out=None):
    ts = _ts()
    a, b = ts.reshape(a, (-1, 1)), ts.reshape(b, (1, -1))
    return _finish(a * b, out, "outer")


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    ts = _ts()
    a = ts.moveaxis(a, (axis1, axis2), (-2, -1))
    return _finish(ts.linalg.trace(a, offset=offset, dtype=dtype), out, "trace")


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is None and (axisa, axisb, axisc) != (-1, -1, -1):
        raise _unsupported("numpy.cross with axisa, axisb or axisc")
    return _ts().linalg.cross(a, b, axis=-1 if axis is None else axis)


def _split_points(n, indices_or_sections, even, name):
    if isinstance(indices_or_sections, (list, tuple)) or hasattr(indices_or_sections, "__len__"):
        return [int(i) for i in indices_or_sections]
    sections = int(indices_or_sections)
    if sections <= 0:
        raise ValueError(f"{name}: the number of sections must be larger than 0, got {sections}")
    if even and n % sections:
        raise ValueError(f"{name}: an axis of {n} does not split into {sections} equal sections")
    size, extra = divmod(n, sections)  # NumPy's array_split: the first `extra` parts are one longer
    points, at = [], 0
    for k in range(sections - 1):
        at += size + (1 if k < extra else 0)
        points.append(at)
    return points


def _split_impl(ary, indices_or_sections, axis, even, name):
    axis = int(axis)
    n = ary.shape[axis]
    edges = [0] + _split_points(n, indices_or_sections, even, name) + [n]
    parts = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        key = [slice(None)] * ary.ndim
        key[axis] = slice(lo, _builtins.max(lo, hi))
        parts.append(ary[tuple(key)])
    return parts


def _split(ary, indices_or_sections, axis=0):
    return _split_impl(ary, indices_or_sections, axis, True, "split")


def _array_split(ary, indices_or_sections, axis=0):
    return _split_impl(ary, indices_or_sections, axis, False, "array_split")


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN to nan, +inf to posinf and -inf to neginf (default: the dtype's largest and smallest
    finite values); other dtypes unchanged."""
    ts = _ts()
    if x.dtype.kind == "c":
        return ts.real(_nan_to_num(ts.real(x), nan=nan, posinf=posinf, neginf=neginf)) + 1j * _nan_to_num(
            ts.imag(x), nan=nan, posinf=posinf, neginf=neginf)
    if x.dtype.kind != "f":
        return ts.asarray(x, copy=True) if copy else x
    info = ts.finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = -info.max if neginf is None else neginf
    x = ts.where(ts.isnan(x), ts.asarray(nan, dtype=x.dtype, device=x.device), x)
    return ts.where(ts.isinf(x), ts.where(x > 0, ts.asarray(hi, dtype=x.dtype, device=x.device),
                                          ts.asarray(lo, dtype=x.dtype, device=x.device)), x)


def _diag(v, k=0):
    """A 1-D v: the square matrix with v on diagonal k; a 2-D v: its diagonal k."""
    ts = _ts()
    if v.ndim == 2:
        return ts.linalg.diagonal(v, offset=k)
    if v.ndim != 1:
        raise ValueError(f"diag: needs a 1-D or 2-D array, got {v.ndim} dimensions")
    n = v.shape[0] + _builtins.abs(k)
    out = ts.zeros((n, n), dtype=v.dtype, device=v.device)
    i = ts.arange(v.shape[0], device=v.device)
    out[i + _builtins.max(-k, 0), i + _builtins.max(k, 0)] = v
    return out


def _quantile_impl(a, q, axis, keepdims, name):
    """Linear interpolation between the order statistics (NumPy's default method); NaN where the
    reduced elements hold a NaN."""
    ts = _ts()
    if a.dtype.kind not in "fiub":
        raise TypeError(f"numpy.{name}: needs a real array, got {a.dtype}")
    a = ts.astype(a, ts.float64 if a.dtype.kind in "iub" else a.dtype)
    if axis is None:
        a, axis = ts.reshape(a, (-1,)), 0
    axis = int(axis) % a.ndim
    n = a.shape[axis]
    if n == 0:
        raise ValueError(f"numpy.{name}: the reduced axis is empty")
    srt = ts.sort(a, axis=axis)  # NaN sorts last
    qs = ts.asarray(q, dtype=ts.float64, device=a.device)
    if bool(ts.any((qs < 0) | (qs > 1))):
        raise ValueError(f"numpy.{name}: quantiles must be in [0, 1] (percentiles in [0, 100])")
    pos = qs * (n - 1)
    lo = ts.astype(ts.floor(pos), ts.int64)
    hi = ts.minimum(lo + 1, n - 1)
    frac = ts.astype(pos - ts.floor(pos), a.dtype)
    moved = ts.moveaxis(srt, axis, -1)
    flat_lo, flat_hi = ts.reshape(lo, (-1,)), ts.reshape(hi, (-1,))
    lower, upper = ts.take(moved, flat_lo, axis=-1), ts.take(moved, flat_hi, axis=-1)
    result = lower + (upper - lower) * ts.reshape(frac, (-1,))
    result = ts.where(ts.any(ts.isnan(moved), axis=-1, keepdims=True), ts.asarray(float("nan"), dtype=a.dtype,
                                                                                   device=a.device), result)
    result = ts.moveaxis(result, -1, 0)  # NumPy: the quantiles' axis first
    result = ts.reshape(result, tuple(qs.shape) + tuple(result.shape[1:]))
    if keepdims:
        result = ts.expand_dims(result, axis=qs.ndim + axis)
    return result


def _quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    if method != "linear":
        raise _unsupported(f"numpy.quantile with method={method!r}")
    return _finish(_quantile_impl(a, q, axis, keepdims, "quantile"), out, "quantile")


def _percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    if method != "linear":
        raise _unsupported(f"numpy.percentile with method={method!r}")
    q = q / 100.0 if isinstance(q, Array) else _ts().asarray(q, dtype=_ts().float64) / 100.0
    return _finish(_quantile_impl(a, q, axis, keepdims, "percentile"), out, "percentile")


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return _finish(_quantile_impl(a, 0.5, axis, keepdims, "median"), out, "median")


def _bincount(x, weights=None, minlength=0):
    """Counts of each value 0 .. max(x) of a 1-D non-negative integer array; one synchronization."""
    ts = _ts()
    if weights is not None:
        raise _unsupported("numpy.bincount with weights")
    if x.ndim != 1 or x.dtype.kind not in "iu":
        raise TypeError(f"bincount: needs a 1-D integer array, got {x.ndim} dimensions of {x.dtype}")
    if x.shape[0] and int(ts.min(x)) < 0:
        raise ValueError("bincount: x must be non-negative")
    values, counts = ts.unique_counts(x)
    n = _builtins.max(int(ts.max(x)) + 1 if x.shape[0] else 0, int(minlength))
    out = ts.zeros((n,), dtype=ts.int64, device=x.device)
    if values.shape[0]:
        out[ts.astype(values, ts.int64)] = counts
    return out


def _pad(array, pad_width, mode="constant", **kwargs):
    """mode="constant" (constant_values: one scalar); other modes are not implemented."""
    ts = _ts()
    if mode != "constant":
        raise _unsupported(f"numpy.pad with mode={mode!r}")
    value = kwargs.pop("constant_values", 0)
    if kwargs:
        raise _unsupported(f"numpy.pad with {', '.join(kwargs)}")
    import numpy as np

    try:  # NumPy's rule: an int, (pad,), (before, after) or one pair per axis
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (array.ndim, 2)).tolist()
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width!r} does not fit an array of {array.ndim} dimensions") from None
    if _builtins.any(w < 0 for pair in widths for w in pair):
        raise ValueError(f"pad: pad_width {pad_width!r} has negative widths")
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(array.shape, widths))
    out = ts.full(shape, value, dtype=array.dtype, device=array.device)
    out[tuple(slice(lo, lo + n) for n, (lo, hi) in zip(array.shape, widths))] = array
    return out


def _triu_indices(n, k=0, m=None):
    ts = _ts()
    return ts.nonzero(ts.triu(ts.ones((n, n if m is None else m), dtype=ts.bool), k=k))


def _tril_indices(n, k=0, m=None):
    ts = _ts()
    return ts.nonzero(ts.tril(ts.ones((n, n if m is None else m), dtype=ts.bool), k=k))


def _float_power(x1, x2):
    ts = _ts()

    def widened(v):  # float64, or complex128 for complex operands; Python scalars stay weak
        return ts.astype(v, ts.complex128 if v.dtype.kind == "c" else ts.float64) if isinstance(v, Array) else v

    return ts.pow(widened(x1), widened(x2))


def _atleast_nd(ndim):
    def impl(*arys):
        results = [_atleast(a, ndim) for a in arys]
        return results[0] if len(results) == 1 else tuple(results)

    return impl


def _ptp(a, axis=None, out=None, keepdims=False):
    ts = _ts()
    return _finish(ts.max(a, axis=axis, keepdims=keepdims) - ts.min(a, axis=axis, keepdims=keepdims), out, "ptp")


def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    ts = _ts()
    if weights is None:
        avg = ts.mean(ts.astype(a, ts.float64) if a.dtype.kind in "iub" else a, axis=axis, keepdims=keepdims)
        total = ts.asarray(a.size / _builtins.max(avg.size, 1), dtype=avg.dtype, device=a.device)
    else:
        w = weights if isinstance(weights, Array) else ts.asarray(weights, device=a.device)
        if w.shape != a.shape:
            if axis is None or w.ndim != 1 or not _is_int(axis) or w.shape[0] != a.shape[int(axis)]:
                raise ValueError(f"numpy.average: weights of shape {w.shape} do not fit {a.shape} along axis {axis}")
            w = ts.reshape(w, tuple(a.shape[int(axis)] if i == int(axis) % a.ndim else 1 for i in range(a.ndim)))
        total = ts.sum(w * ts.ones_like(a, dtype=w.dtype), axis=axis, keepdims=keepdims)
        avg = ts.sum(a * w, axis=axis, keepdims=keepdims) / total
    if returned:
        return avg, ts.broadcast_to(total, avg.shape) if total.shape != avg.shape else total
    return avg


def _einsum_parse(subscripts, operands):
    """Per operand its labels (ellipsis dims as private labels), and the output labels (NumPy's
    implicit output: the ellipsis dims, then the labels that occur once, in alphabetical order)."""
    subscripts = subscripts.replace(" ", "")
    inputs, arrow, output = subscripts.partition("->")
    parts = inputs.split(",")
    if len(parts) != len(operands):
        raise ValueError(f"einsum: {len(parts)} operand subscripts for {len(operands)} operands")
    ellipsis_ndim = 0
    for part, op in zip(parts, operands):
        if "..." in part:
            ellipsis_ndim = _builtins.max(ellipsis_ndim, op.ndim - (len(part) - 3))
    fill = [chr(0x3B1 + k) for k in range(ellipsis_ndim)]  # private labels (Greek letters)
    labels = []
    for part, op in zip(parts, operands):
        if "..." in part:
            n = op.ndim - (len(part) - 3)
            head, _, tail = part.partition("...")
            part_labels = list(head) + fill[ellipsis_ndim - n:] + list(tail)
        else:
            part_labels = list(part)
        for c in part_labels:
            if not (c.isalpha() or c in fill):
                raise ValueError(f"einsum: invalid subscript {c!r} in {subscripts!r}")
        if len(part_labels) != op.ndim:
            raise ValueError(f"einsum: subscripts {part!r} name {len(part_labels)} axes of an operand with {op.ndim}")
        labels.append(part_labels)
    if arrow:
        out = list(output.replace("...", "".join(fill)))
        for c in out:
            if not _builtins.any(c in ls for ls in labels):
                raise ValueError(f"einsum: output subscript {c!r} does not occur in an input")
        if len(set(out)) != len(out):
            raise ValueError(f"einsum: output subscripts {output!r} repeat a label")
    else:
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = fill + sorted(c for c, k in counts.items() if k == 1 and c not in fill)
    return labels, out


def _einsum_diagonal(x, labels):
    """x with each repeated label taken once (its diagonal)."""
    ts = _ts()
    labels = list(labels)
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        x = ts.linalg.diagonal(ts.moveaxis(x, (i, j), (-2, -1)))
        labels = [l for k, l in enumerate(labels) if k not in (i, j)] + [c]
    return x, labels


def _einsum_pair(a, la, b, lb, keep):
    """The contraction of a and b over their shared labels that `keep` does not hold, as one
    batched matmul: (batch, a's own, shared) @ (batch, shared, b's own)."""
    ts = _ts()
    sizes = dict(zip(la, a.shape))
    sizes.update(zip(lb, b.shape))
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    own_a = [c for c in la if c not in lb]
    own_b = [c for c in lb if c not in la]
    a = ts.permute_dims(a, tuple(la.index(c) for c in batch + own_a + summed))
    b = ts.permute_dims(b, tuple(lb.index(c) for c in batch + summed + own_b))
    nb = [sizes[c] for c in batch]
    na, ns, nbo = (_math.prod(sizes[c] for c in g) for g in (own_a, summed, own_b))
    a = ts.reshape(a, tuple(nb) + (na, ns))
    b = ts.reshape(b, tuple(nb) + (ns, nbo))
    c = ts.matmul(a, b)
    return ts.reshape(c, tuple(nb) + tuple(sizes[c] for c in own_a) + tuple(sizes[c] for c in own_b)), \
        batch + own_a + own_b


def _einsum(subscripts, *operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    """NumPy's einsum: labels, ellipses, repeated labels (diagonals), implicit and explicit output;
    the operands are contracted left to right, each pair by one batched matmul."""
    ts = _ts()
    if not isinstance(subscripts, str):
        raise _unsupported("numpy.einsum with subscripts given as integer lists")
    ops = [o if isinstance(o, Array) else ts.asarray(o) for o in operands]
    if dtype is not None:
        ops = [ts.astype(o, dtype) for o in ops]
    labels, out_labels = _einsum_parse(subscripts, ops)
    sizes = {}
    for op, ls in zip(ops, labels):
        for c, n in zip(ls, op.shape):
            known = sizes.setdefault(c, n)
            if known != n:
                if c.isascii() or 1 not in (known, n):  # ellipsis dims broadcast, as NumPy's
                    raise ValueError(f"einsum: label {c!r} has sizes {known} and {n}")
                sizes[c] = _builtins.max(known, n)
    ops = [op if tuple(op.shape) == tuple(sizes[c] for c in ls) else
           ts.broadcast_to(op, tuple(sizes[c] for c in ls)) for op, ls in zip(ops, labels)]
    terms = [_einsum_diagonal(op, ls) for op, ls in zip(ops, labels)]
    # Sum each operand's labels that occur nowhere else and are not in the output, before any product.
    reduced = []
    for k, (x, ls) in enumerate(terms):
        elsewhere = set(out_labels).union(*[set(l) for j, (_, l) in enumerate(terms) if j != k])
        drop = [i for i, c in enumerate(ls) if c not in elsewhere]
        if drop:
            x = ts.sum(x, axis=tuple(drop))
            ls = [c for i, c in enumerate(ls) if i not in drop]
        reduced.append((x, ls))
    x, ls = reduced[0]
    for k in range(1, len(reduced)):
        later = set(out_labels).union(*[set(l) for _, l in reduced[k + 1:]])
        y, ly = reduced[k]
        x, ls = _einsum_pair(x, ls, y, ly, later)
    drop = [i for i, c in enumerate(ls) if c not in out_labels]
    if drop:
        x = ts.sum(x, axis=tuple(drop))
        ls = [c for i, c in enumerate(ls) if i not in drop]
    x = ts.permute_dims(x, tuple(ls.index(c) for c in out_labels)) if ls else x
    return _finish(x, out, "einsum")


def _histogram(a, bins=10, range=None, density=None, weights=None):
    """Counts over equal bins from range (default: a's minimum to maximum) or over given edges;
    every bin is half open but the last, which holds its right edge (NumPy's rule)."""
    ts = _ts()
    if weights is not None:
        raise _unsupported("numpy.histogram with weights")
    x = ts.reshape(a, (-1,))
    x = ts.astype(x, ts.float64) if x.dtype.kind in "iub" else x
    if _is_int(bins):
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
            compute = np.float32 if x.dtype == ts.float32 else np.float64
            lo, hi = compute(ts.min(x)), compute(ts.max(x))
        else:
            lo, hi, compute = 0.0, 1.0, np.float64
        if not lo <= hi:
            raise ValueError(f"histogram: range {range!r} has its maximum below its minimum")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        lo, hi = compute(lo), compute(hi)
        step = (hi - lo) / compute(nbins)
        k = ts.arange(nbins + 1, dtype=ts.float32 if compute is np.float32 else ts.float64, device=x.device)
        edges = ts.astype(k * float(step) + float(lo), x.dtype)
        edges[-1] = float(hi)
    else:
        edges = ts.astype(bins if isinstance(bins, Array) else ts.asarray(bins, device=x.device), ts.float64)
        nbins = edges.shape[0] - 1
        if nbins < 1 or bool(ts.any(edges[1:] < edges[:-1])):
            raise ValueError("histogram: bin edges must be at least two, increasing")
    xd = ts.astype(x, edges.dtype)
    idx = ts.searchsorted(edges, xd, side="right") - 1
    idx = ts.where(xd == edges[-1], nbins - 1, idx)  # the last bin holds its right edge
    inside = (idx >= 0) & (idx < nbins)
    counts = _bincount(idx[inside], minlength=nbins)
    if density:
        widths = edges[1:] - edges[:-1]
        return counts / (ts.sum(counts) * widths), edges
    return counts, edges


def _interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of (xp, fp) at x (xp increasing); left/right outside."""
    ts = _ts()
    if period is not None:
        raise _unsupported("numpy.interp with period")
    x = x if isinstance(x, Array) else ts.asarray(x)
    xp = ts.astype(xp if isinstance(xp, Array) else ts.asarray(xp, device=x.device), ts.float64)
    fp = fp if isinstance(fp, Array) else ts.asarray(fp, device=x.device)
    fp = ts.astype(fp, ts.complex128 if fp.dtype.kind == "c" else ts.float64)
    n = xp.shape[0]
    if xp.ndim != 1 or fp.shape != xp.shape or n == 0:
        raise ValueError(f"interp: xp and fp must be 1-D of one nonzero length, got {xp.shape} and {fp.shape}")
    xd = ts.astype(x, ts.float64)
    if n == 1:
        result = ts.broadcast_to(fp[0], xd.shape) * ts.ones_like(xd, dtype=fp.dtype)
    else:
        i = ts.clip(ts.searchsorted(xp, xd, side="right") - 1, 0, n - 2)
        x0, x1 = ts.take(xp, i), ts.take(xp, i + 1)
        f0, f1 = ts.take(fp, i), ts.take(fp, i + 1)
        t = (xd - x0) / (x1 - x0)
        result = ts.where(xd == x1, f1, f0 + t * (f1 - f0))
    lo = fp[0] if left is None else ts.asarray(left, dtype=fp.dtype, device=x.device)
    hi = fp[-1] if right is None else ts.asarray(right, dtype=fp.dtype, device=x.device)
    result = ts.where(xd < xp[0], lo, result)
    return ts.where(xd > xp[-1], hi, result)


def _gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's gradient with uniform spacing (one scalar, or one per axis): central differences
    inside, one-sided differences of order edge_order (1 or 2) at the ends, with NumPy's formulas;
    one array per axis (a tuple when there are several)."""
    ts = _ts()
    f = f if isinstance(f, Array) else ts.asarray(f)
    if f.dtype.kind in "iub":
        f = ts.astype(f, ts.float64)
    axes = list(range(f.ndim)) if axis is None else ([axis] if _is_int(axis) else list(axis))
    axes = [int(a) % f.ndim for a in axes]
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) in (1, len(axes)):
        for h in varargs:
            if hasattr(h, "ndim") and h.ndim != 0 or isinstance(h, (list, tuple)):
                raise _unsupported("numpy.gradient with coordinate arrays (uniform spacings are supported)")
        spacing = [float(h) for h in varargs] * (len(axes) if len(varargs) == 1 else 1)
    else:
        raise TypeError(f"gradient: {len(varargs)} spacings for {len(axes)} axes")
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    results = []
    for a, dx in zip(axes, spacing):
        n = f.shape[a]
        if n < edge_order + 1:
            raise ValueError(f"gradient: axis {a} has {n} elements, fewer than edge_order + 1 = {edge_order + 1}")

        def part(start, stop):
            key = [slice(None)] * f.ndim
            key[a] = slice(start, stop)
            return f[tuple(key)]

        inside = (part(2, None) - part(None, -2)) / (2.0 * dx)
        if edge_order == 1:
            first = (part(1, 2) - part(0, 1)) / dx
            last = (part(n - 1, n) - part(n - 2, n - 1)) / dx
        else:
            first = (-1.5 / dx) * part(0, 1) + (2.0 / dx) * part(1, 2) + (-0.5 / dx) * part(2, 3)
            last = (0.5 / dx) * part(n - 3, n - 2) + (-2.0 / dx) * part(n - 2, n - 1) + (1.5 / dx) * part(n - 1, n)
        results.append(ts.concat([first, inside, last], axis=a))
    return results[0] if len(results) == 1 else tuple(results)


def _sliding_dot(a, v, mode, name):
    """sum_j a_padded[k + j] v[j] for each output position k: the windows of a (padded with
    len(v) - 1 zeros on each side) gathered as a matrix, times v, one matmul."""
    ts = _ts()
    a = a if isinstance(a, Array) else ts.asarray(a)
    v = v if isinstance(v, Array) else ts.asarray(v, device=a.device)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}: needs 1-D arrays, got shapes {a.shape} and {v.shape}")
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        raise ValueError(f"{name}: the arrays must not be empty, got lengths {n} and {m}")
    dtype = ts.result_type(a, v)
    a, v = ts.astype(a, dtype), ts.astype(v, dtype)
    full = n + m - 1
    if mode == "full":
        start, length = 0, full
    elif mode == "same":
        length = _builtins.max(n, m)
        start = (full - length) // 2
    elif mode == "valid":
        length = _builtins.max(n, m) - _builtins.min(n, m) + 1
        start = _builtins.min(n, m) - 1
    else:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    padded = _pad(a, (m - 1, m - 1))
    k = ts.arange(start, start + length, device=a.device)
    windows = ts.take(padded, ts.reshape(k, (-1, 1)) + ts.reshape(ts.arange(m, device=a.device), (1, -1)), axis=0)
    return ts.matmul(windows, v)


def _convolve(a, v, mode="full"):
    """NumPy's convolve of two 1-D arrays (modes full, same, valid)."""
    ts = _ts()
    v = v if isinstance(v, Array) else ts.asarray(v, device=a.device if isinstance(a, Array) else None)
    if v.ndim == 1 and a.ndim == 1 and v.shape[0] > a.shape[0]:
        a, v = v, a  # NumPy: the longer array slides under the shorter
    return _sliding_dot(a, ts.flip(v), mode, "convolve")


def _correlate(a, v, mode="valid"):
    """NumPy's correlate of two 1-D arrays: sum_n a[n + k] conj(v[n]) (modes valid, same, full)."""
    ts = _ts()
    a = a if isinstance(a, Array) else ts.asarray(a)
    v = v if isinstance(v, Array) else ts.asarray(v, device=a.device)
    complex_ = a.dtype.kind == "c" or v.dtype.kind == "c"
    if a.ndim == 1 and v.ndim == 1 and v.shape[0] > a.shape[0]:
        swapped = ts.flip(_correlate(v, a, mode))  # c_k = conj(d_-k), d the correlation of v with a
        return ts.conj(swapped) if complex_ else swapped
    return _sliding_dot(a, ts.conj(v) if v.dtype.kind == "c" else v, mode, "correlate")


_CREATION = ("zeros", "ones", "empty", "full")


def _creation(name):
    """np.zeros(shape, like=x), np.ones, np.empty and np.full (NumPy's like= protocol): on x's device
    (array_function passes it), float64 by default as NumPy's."""
    def impl(shape, *args, dtype=None, order="C", like=None, device=None, **kwargs):
        ts = _ts()
        shape = (shape,) if _is_int(shape) else tuple(shape)
        target = like.device if isinstance(like, Array) else device
        if name == "full":
            fill_value = args[0] if args else kwargs.pop("fill_value")
            dtype = args[1] if len(args) > 1 else dtype
            return ts.full(shape, fill_value, dtype=dtype, device=target)
        dtype = args[0] if args else dtype
        return getattr(ts, name)(shape, dtype=ts.float64 if dtype is None else dtype, device=target)

    return impl


_FUNCTIONS = {
    "sum": _reduction("sum", with_dtype=True), "prod": _reduction("prod", with_dtype=True),
    "mean": _reduction("mean"), "max": _reduction("max"), "amax": _reduction("amax", "max"),
    "min": _reduction("min"), "amin": _reduction("amin", "min"), "all": _reduction("all"),
    "any": _reduction("any"), "nansum": _reduction("nansum"), "nanprod": _reduction("nanprod"),
    "nanmean": _reduction("nanmean"), "nanmax": _reduction("nanmax"), "nanmin": _reduction("nanmin"),
    "std": _variance("std"), "var": _variance("var"), "nanstd": _variance("nanstd"), "nanvar": _variance("nanvar"),
    "argmax": _arg_reduction("argmax"), "argmin": _arg_reduction("argmin"),
    "cumsum": _scan("cumsum", "cumulative_sum"), "cumprod": _scan("cumprod", "cumulative_prod"),
    "concatenate": _concatenate, "concat": _concatenate, "stack": _stack, "where": _where,
    "reshape": _reshape, "transpose": _transpose, "permute_dims": _transpose, "sort": _sort,
    "argsort": _argsort, "clip": _clip, "round": _round, "around": _round,
    "zeros_like": _like("zeros_like"), "ones_like": _like("ones_like"), "empty_like": _like("empty_like"),
    "full_like": _full_like, "unique": _unique, "unique_values": _simple("unique_values"),
    "unique_counts": _simple("unique_counts"), "unique_inverse": _simple("unique_inverse"),
    "unique_all": _simple("unique_all"), "ravel": _ravel, "copy": _copy, "repeat": _repeat, "diff": _diff,
    "isin": _isin, "searchsorted": _searchsorted, "count_nonzero": _count_nonzero, "expand_dims": _expand_dims,
    "squeeze": _squeeze, "broadcast_to": _broadcast_to, "broadcast_arrays": _simple("broadcast_arrays"),
    "flip": _flip, "roll": _roll, "moveaxis": _moveaxis, "tile": _tile, "shape": _shape, "ndim": _ndim,
    "size": _size, "astype": _astype, "tensordot": _tensordot, "dot": _dot, "matmul": _simple("matmul"),
    "vecdot": _simple("vecdot"), "tril": _simple("tril"), "triu": _simple("triu"),
    "nonzero": _simple("nonzero"), "real": _simple("real"), "imag": _simple("imag"), "conj": _simple("conj"),
    "meshgrid": _simple("meshgrid"), "take": _simple("take"), "take_along_axis": _simple("take_along_axis"),
    "result_type": _simple("result_type"), "isclose": _isclose, "allclose": _allclose,
    "array_equal": _array_equal, "vstack": _vstack, "hstack": _hstack, "argwhere": _argwhere, "outer": _outer,
    "trace": _trace, "cross": _cross, "split": _split, "array_split": _array_split, "nan_to_num": _nan_to_num,
    "diag": _diag, "median": _median, "quantile": _quantile, "percentile": _percentile, "bincount": _bincount,
    "pad": _pad, "float_power": _float_power, "triu_indices": _triu_indices, "tril_indices": _tril_indices,
    "atleast_1d": _atleast_nd(1), "atleast_2d": _atleast_nd(2), "atleast_3d": _atleast_nd(3), "ptp": _ptp,
    "average": _average, "zeros": _creation("zeros"), "ones": _creation("ones"), "empty": _creation("empty"),
    "full": _creation("full"), "einsum": _einsum, "histogram": _histogram, "interp": _interp,
    "gradient": _gradient, "convolve": _convolve, "correlate": _correlate,
}


# ---- numpy.linalg: tessel.linalg's functions, with NumPy's parameters where they differ ----
def _linalg():
    return _ts().linalg


def _lower_of(a, uplo, name):
    """The matrix whose lower triangle eigh reads: a itself (UPLO="L") or its conjugate transpose."""
    if uplo in ("L", "l"):
        return a
    if uplo in ("U", "u"):
        return _ts().conj(_linalg().matrix_transpose(a)) if a.dtype.kind == "c" else _linalg().matrix_transpose(a)
    raise ValueError(f"numpy.linalg.{name}: UPLO must be 'L' or 'U', got {uplo!r}")


def _np_eigh(a, UPLO="L"):
    return _linalg().eigh(_lower_of(a, UPLO, "eigh"))


def _np_eigvalsh(a, UPLO="L"):
    return _linalg().eigvalsh(_lower_of(a, UPLO, "eigvalsh"))


def _np_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if not compute_uv:
        return _linalg().svdvals(a)
    return _linalg().svd(a, full_matrices=full_matrices)


def _np_qr(a, mode="reduced"):
    if mode == "r":
        return _linalg().qr(a, mode="reduced").R
    if mode not in ("reduced", "complete"):
        raise _unsupported(f"numpy.linalg.qr with mode={mode!r}")
    return _linalg().qr(a, mode=mode)


def _np_pinv(a, rcond=None, hermitian=False, *, rtol=None):
    return _linalg().pinv(a, rtol=rtol if rtol is not None else rcond)


def _np_matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    if tol is not None:
        raise _unsupported("numpy.linalg.matrix_rank with an absolute tol (rtol is supported)")
    return _linalg().matrix_rank(A, rtol=rtol)


def _np_norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's norm: of the flattened array (ord None), of vectors along one axis, or of matrices
    over two axes."""
    la = _linalg()
    if axis is None:
        if ord is None:
            return la.vector_norm(x, axis=None, keepdims=keepdims)
        if x.ndim == 1:
            return la.vector_norm(x, ord=ord, keepdims=keepdims)
        if x.ndim == 2:
            return la.matrix_norm(x, ord=ord, keepdims=keepdims)
        raise ValueError(f"numpy.linalg.norm: an ord needs a 1-D or 2-D array or an axis, got {x.ndim} dimensions")
    axes = (axis,) if _is_int(axis) else tuple(axis)
    if len(axes) == 1:
        return la.vector_norm(x, axis=axes[0], ord=2 if ord is None else ord, keepdims=keepdims)
    if len(axes) != 2:
        raise ValueError(f"numpy.linalg.norm: axis must name one or two axes, got {axis!r}")
    a0, a1 = (int(a) % x.ndim for a in axes)
    result = la.matrix_norm(_ts().moveaxis(x, (a0, a1), (-2, -1)), ord="fro" if ord is None else ord)
    if keepdims:
        for a in sorted((a0, a1)):
            result = _ts().expand_dims(result, axis=a)
    return result


def _np_multi_dot(arrays, *, out=None):
    arrays = list(arrays)
    result = arrays[0]
    for a in arrays[1:]:
        result = _ts().matmul(result, a)
    return _finish(result, out, "linalg.multi_dot")


_LINALG_SAME = ("solve", "inv", "det", "slogdet", "cholesky", "eig", "eigvals", "svdvals", "matrix_power", "lstsq",
                "cond", "cross", "outer", "matrix_norm", "vector_norm", "vecdot", "diagonal", "trace", "tensordot",
                "matmul", "matrix_transpose")
_LINALG = {"eigh": _np_eigh, "eigvalsh": _np_eigvalsh, "svd": _np_svd, "qr": _np_qr, "pinv": _np_pinv,
           "matrix_rank": _np_matrix_rank, "norm": _np_norm, "multi_dot": _np_multi_dot}


def _linalg_impl(name):
    if name in _LINALG:
        return _LINALG[name]
    if name in _LINALG_SAME:
        return lambda *args, **kwargs: getattr(_linalg(), name)(*args, **kwargs)
    return None


def array_function(self, func, types, args, kwargs):
    import numpy as np

    if not all(issubclass(t, (Array, np.ndarray)) for t in types):
        return NotImplemented
    name = func.__name__
    module = getattr(func, "__module__", "") or "numpy"
    # numpy.linalg, numpy.fft, numpy.ma, ... functions are not the namespace functions of that name.
    if module == "numpy.linalg":
        impl = _linalg_impl(name)
    else:
        impl = _FUNCTIONS.get(name) if module == "numpy" or module.startswith(("numpy._core", "numpy.core", "numpy.lib")) else None
    if impl is None:
        raise _unsupported(f"{module or 'numpy'}.{name}")
    device = _device_of(args) or _device_of(list(kwargs.values())) or self.device
    args = [_to_tessel(a, device) for a in args]
    kwargs = {k: _to_tessel(v, device) for k, v in kwargs.items()}
    if name in _CREATION and "device" not in kwargs:  # np.zeros(n, like=x): on x's device
        kwargs["device"] = device
    return impl(*args, **kwargs)


# NumPy's own spellings, for code written against NumPy or CuPy: namespace functions that the Array
# API names differently or leaves out (ts.concatenate, ts.transpose, ...), and ndarray methods
# (x.clip(), x.dot(), ...). Each runs the implementation that np.<name> runs on a tessel array.
NAMESPACE_NAMES = ("concatenate", "transpose", "ravel", "dot", "isclose", "allclose", "around", "amax", "amin",
                   "array_equal", "vstack", "hstack", "argwhere", "outer", "trace", "cross", "split", "array_split",
                   "nan_to_num", "diag", "median", "quantile", "percentile", "bincount", "pad", "float_power",
                   "triu_indices", "tril_indices", "atleast_1d", "atleast_2d", "atleast_3d", "ptp", "average",
                   "einsum", "histogram", "interp", "gradient", "convolve", "correlate")


def _as_array_on(value, device):
    return value if isinstance(value, Array) else _ts().asarray(value, device=device)


def _take_method(self, indices, axis=None):
    ts = _ts()
    if axis is None:  # NumPy: the flattened array
        self, axis = ts.reshape(self, (-1,)), 0
    return ts.take(self, _as_array_on(indices, self.device), axis=axis)


def _fill(self, value):
    """Sets every element to value, in place (NumPy's ndarray.fill)."""
    self[...] = value


def _sort_in_place(self, axis=-1, kind=None, order=None, *, stable=None):
    """Sorts along axis in place (NumPy's ndarray.sort)."""
    self[...] = _sort(self, axis=axis, kind=kind, order=order, stable=stable)


_METHODS = {
    "clip": lambda self, min=None, max=None: _clip(self, min, max),
    "round": lambda self, decimals=0: _round(self, decimals),
    "dot": lambda self, b: _dot(self, _as_array_on(b, self.device)),
    "nonzero": lambda self: _ts().nonzero(self),
    "argsort": lambda self, axis=-1, kind=None, order=None, *, stable=None: _argsort(self, axis, kind, order,
                                                                                     stable=stable),
    "take": _take_method,
    "repeat": lambda self, repeats, axis=None: _repeat(self, repeats, axis),
    "fill": _fill,
    "sort": _sort_in_place,
    "get": lambda self: self.__array__(),  # CuPy's: a NumPy copy on the host
    "__divmod__": lambda self, other: (self // other, self % other),
    "__rdivmod__": lambda self, other: (other // self, other % self),
    "__reduce__": lambda self: (_unpickle, (self.__array__(), str(self.device), self.dtype.name)),
}


def _unpickle(host, device, dtype):
    """A pickled array: its host copy (bfloat16 travels as float32, exactly), back in its dtype on
    the device it was on (the default device when that one does not exist here)."""
    ts = _ts()
    try:
        return ts.asarray(host, dtype=dtype, device=device)
    except Exception:  # noqa: BLE001  (no such device on this machine)
        return ts.asarray(host, dtype=dtype)


def install():
    Array.__array_ufunc__ = array_ufunc
    Array.__array_function__ = array_function
    for name, method in _METHODS.items():
        setattr(Array, name, method)


def namespace_functions():
    """The NAMESPACE_NAMES functions, for the tessel namespace."""
    return {name: _FUNCTIONS[name] for name in NAMESPACE_NAMES}
