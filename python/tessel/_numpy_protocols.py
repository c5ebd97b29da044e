"""NumPy's dispatch protocols on tessel.Array, as CuPy has them.

``__array_ufunc__`` runs NumPy ufuncs (``np.exp(x)``, ``np.add(x, y)``, ``np.add.reduce``) with the
tessel function of the same meaning, on the array's device. ``__array_function__`` does the same for
NumPy's other functions (``np.sum``, ``np.concatenate``, ``np.where``, ...) through FUNCTIONS, which
maps each NumPy name to a function with NumPy's parameters: the namespace function itself where
its parameters are NumPy's (``concatenate``, ``einsum``, ...), else an adapter defined here. Both
return tessel arrays. A NumPy function or ufunc method without a tessel implementation raises
TypeError naming it: nothing is copied to the host behind the caller's back (``np.asarray(x)`` or
``x.__array__()`` copy explicitly). NumPy arrays and scalars mixed in are moved to the tessel
array's device. The namespace functions are in python/tessel/_functions/, by category.
"""
from __future__ import annotations

import builtins

from . import _tessel
from . import linalg as _linalg
from ._functions import creation, linear_algebra, logic, manipulation, math, searching, sets, sorting, statistics
from ._functions._helpers import as_array_on, finish, is_int, reject, unsupported
from ._functions.dtypes import astype, result_type
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
        return creation.asarray(value, device=device)
    if isinstance(value, list):
        return [_to_tessel(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_tessel(v, device) for v in value)
    return value


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    name = ufunc.__name__
    ts = _ts()
    device = _device_of(inputs) or self.device
    inputs = [_to_tessel(v, device) for v in inputs]
    out = kwargs.pop("out", None)
    if out is not None and builtins.all(o is None for o in (out if isinstance(out, tuple) else (out,))):
        out = None
    dtype = kwargs.pop("dtype", None)
    for key, default in (("casting", "same_kind"), ("order", "K"), ("subok", True)):
        if key in kwargs and kwargs[key] == default:
            del kwargs[key]
    if kwargs.get("where", True) is not True:
        raise unsupported(f"numpy.{name} with where=")
    kwargs.pop("where", None)
    if method == "__call__":
        func = getattr(ts, _UFUNC_ALIASES.get(name, name), None)
        if func is None or kwargs:
            raise unsupported(f"the NumPy ufunc numpy.{name}" + (f" with {sorted(kwargs)}" if kwargs else ""))
        if dtype is not None:
            # NumPy computes in dtype: cast the array operands first.
            inputs = [astype(v, dtype) if isinstance(v, Array) else v for v in inputs]
        result = func(*inputs)
        return finish(result, out, name)
    if method == "reduce" and name in _REDUCTIONS:
        (x,) = inputs
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        if kwargs.pop("initial", None) is not None or kwargs:
            raise unsupported(f"numpy.{name}.reduce with {sorted(kwargs) or ['initial']}")
        reduce = getattr(ts, _REDUCTIONS[name])
        extra = {"dtype": dtype} if dtype is not None and name in ("add", "multiply") else {}
        return finish(reduce(x, axis=axis, keepdims=keepdims, **extra), out, f"{name}.reduce")
    if method == "accumulate" and name in _ACCUMULATIONS:
        (x,) = inputs
        axis = kwargs.pop("axis", 0)
        if kwargs:
            raise unsupported(f"numpy.{name}.accumulate with {sorted(kwargs)}")
        return finish(getattr(ts, _ACCUMULATIONS[name])(x, axis=axis, dtype=dtype), out, f"{name}.accumulate")
    raise unsupported(f"the NumPy ufunc method numpy.{name}.{method}")


# ---- NumPy's parameters for the namespace functions whose own differ ----
def _reduction(name, function, takes_dtype):
    """A NumPy reduction: sum, prod, mean and the nan* sums and means take a dtype (third
    parameter); max, min, all and any do not."""
    def reduce(a, axis, dtype, out, keepdims, initial, where):
        reject(name, initial=initial, where=None if where is True else where)
        kwargs = {"axis": axis, "keepdims": builtins.bool(keepdims)}
        if dtype is not None and function in (statistics.sum, statistics.prod):
            kwargs["dtype"] = dtype
        result = function(a, **kwargs)
        if dtype is not None and "dtype" not in kwargs:
            result = astype(result, dtype)
        return finish(result, out, name)

    if takes_dtype:
        def impl(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
            return reduce(a, axis, dtype, out, keepdims, initial, where)
    else:
        def impl(a, axis=None, out=None, keepdims=False, initial=None, where=True):
            return reduce(a, axis, None, out, keepdims, initial, where)
    return impl


def _variance(name, function):
    def impl(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=None, correction=None):
        reject(name, where=None if where is True else where, mean=mean)
        a = a if dtype is None else astype(a, dtype)
        result = function(a, axis=axis, correction=float(correction if correction is not None else ddof),
                          keepdims=builtins.bool(keepdims))
        return finish(result, out, name)

    return impl


def _arg_reduction(name, function):
    def impl(a, axis=None, out=None, *, keepdims=False):
        return finish(function(a, axis=axis, keepdims=builtins.bool(keepdims)), out, name)

    return impl


def _scan(name, function):
    def impl(a, axis=None, dtype=None, out=None):
        if axis is None:
            a, axis = _tessel.reshape(a, (-1,)), 0
        return finish(function(a, axis=axis, dtype=dtype), out, name)

    return impl


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = list(arrays)
    if dtype is not None:
        arrays = [astype(a, dtype) for a in arrays]
    return finish(_tessel.stack(arrays, axis=axis), out, "stack")


def _where(condition, x=None, y=None, /):
    if x is None and y is None:
        return _tessel.nonzero(condition)
    if x is None or y is None:
        raise ValueError("numpy.where: either both or neither of x and y should be given")
    return _tessel.where(condition, x, y)


def _reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise unsupported(f"numpy.reshape with order={order!r}")
    return _tessel.reshape(a, tuple(shape if shape is not None else newshape) if not is_int(shape) else (shape,),
                           copy=copy)


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    reject("sort", order=order)
    if axis is None:
        a, axis = _tessel.reshape(a, (-1,)), -1
    return sorting.sort(a, axis=axis)


def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    reject("argsort", order=order)
    if axis is None:
        a, axis = _tessel.reshape(a, (-1,)), -1
    return sorting.argsort(a, axis=axis)


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kwargs):
    lo = a_min if min is None else min
    hi = a_max if max is None else max
    return finish(math.clip(a, lo, hi), out, "clip")


def _like(name):
    def impl(a, dtype=None, order="K", subok=True, shape=None, *, device=None, **rest):
        if shape is not None:
            shape = (shape,) if is_int(shape) else tuple(shape)
            make = {"zeros_like": _tessel.zeros, "ones_like": _tessel.ones, "empty_like": _tessel.empty}[name]
            return make(shape, dtype=dtype if dtype is not None else a.dtype, device=a.device)
        return getattr(_tessel, name)(a, dtype=dtype)

    return impl


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    if shape is not None:
        shape = (shape,) if is_int(shape) else tuple(shape)
        return _tessel.full(shape, fill_value, dtype=dtype if dtype is not None else a.dtype, device=a.device)
    return _tessel.full_like(a, fill_value, dtype=dtype)


def _creation(name):
    """np.zeros(shape, like=x), np.ones, np.empty and np.full (NumPy's like= protocol): on x's device
    (array_function passes it), float64 by default as NumPy's."""
    def impl(shape, *args, dtype=None, order="C", like=None, device=None, **kwargs):
        shape = (shape,) if is_int(shape) else tuple(shape)
        target = like.device if isinstance(like, Array) else device
        if name == "full":
            fill_value = args[0] if args else kwargs.pop("fill_value")
            dtype = args[1] if len(args) > 1 else dtype
            return _tessel.full(shape, fill_value, dtype=dtype, device=target)
        dtype = args[0] if args else dtype
        return getattr(_tessel, name)(shape, dtype=_tessel.float64 if dtype is None else dtype, device=target)

    return impl


def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
            sorted=True):
    reject("unique", axis=axis)
    values, index, inverse, counts = _tessel._unique_all(ar, builtins.bool(return_index),
                                                         builtins.bool(return_inverse), builtins.bool(return_counts))
    extra = [r for r, want in ((index, return_index), (inverse, return_inverse), (counts, return_counts)) if want]
    return (values, *extra) if extra else values


def _squeeze(a, axis=None):
    if axis is None:
        axis = tuple(i for i, s in enumerate(a.shape) if s == 1)
    return _tessel.squeeze(a, axis)


FUNCTIONS = {
    # statistics
    "sum": _reduction("sum", statistics.sum, True), "prod": _reduction("prod", statistics.prod, True),
    "mean": _reduction("mean", statistics.mean, True), "nansum": _reduction("nansum", _tessel.nansum, True),
    "nanprod": _reduction("nanprod", _tessel.nanprod, True), "nanmean": _reduction("nanmean", _tessel.nanmean, True),
    "max": statistics.amax, "amax": statistics.amax, "min": statistics.amin, "amin": statistics.amin,
    "nanmax": _reduction("nanmax", _tessel.nanmax, False), "nanmin": _reduction("nanmin", _tessel.nanmin, False),
    "std": _variance("std", statistics.std), "var": _variance("var", statistics.var),
    "nanstd": _variance("nanstd", _tessel.nanstd), "nanvar": _variance("nanvar", _tessel.nanvar),
    "argmax": _arg_reduction("argmax", _tessel.argmax), "argmin": _arg_reduction("argmin", _tessel.argmin),
    "nanargmax": _arg_reduction("nanargmax", _tessel.nanargmax),
    "nanargmin": _arg_reduction("nanargmin", _tessel.nanargmin),
    "cumsum": _scan("cumsum", statistics.cumulative_sum), "cumprod": _scan("cumprod", statistics.cumulative_prod),
    "count_nonzero": lambda a, axis=None, *, keepdims=False: statistics.count_nonzero(a, axis=axis, keepdims=keepdims),
    "median": statistics.median, "quantile": statistics.quantile, "percentile": statistics.percentile,
    "bincount": statistics.bincount, "ptp": statistics.ptp, "average": statistics.average,
    "histogram": statistics.histogram,
    # logic
    "all": _reduction("all", logic.all, False), "any": _reduction("any", logic.any, False),
    "isclose": logic.isclose, "allclose": logic.allclose, "array_equal": logic.array_equal,
    # manipulation
    "concatenate": manipulation.concatenate, "concat": manipulation.concatenate, "stack": _stack,
    "reshape": _reshape, "transpose": manipulation.transpose, "permute_dims": manipulation.transpose,
    "ravel": manipulation.ravel, "copy": lambda a, order="K", subok=False: creation.asarray(a, copy=True),
    "repeat": lambda a, repeats, axis=None: manipulation.repeat(a, repeats, axis=axis),
    "expand_dims": lambda a, axis: manipulation.expand_dims(a, axis), "squeeze": _squeeze,
    "broadcast_to": lambda array, shape, subok=False: _tessel.broadcast_to(
        array, tuple(shape) if not is_int(shape) else (shape,)),
    "broadcast_arrays": manipulation.broadcast_arrays, "flip": lambda m, axis=None: manipulation.flip(m, axis=axis),
    "roll": lambda a, shift, axis=None: manipulation.roll(a, shift, axis=axis),
    "moveaxis": manipulation.moveaxis,
    "tile": lambda A, reps: manipulation.tile(A, (reps,) if is_int(reps) else tuple(reps)),
    "vstack": manipulation.vstack, "hstack": manipulation.hstack, "split": manipulation.split,
    "array_split": manipulation.array_split, "atleast_1d": manipulation.atleast_1d,
    "atleast_2d": manipulation.atleast_2d, "atleast_3d": manipulation.atleast_3d, "pad": manipulation.pad,
    "shape": lambda a: tuple(a.shape), "ndim": lambda a: a.ndim,
    "size": lambda a, axis=None: a.size if axis is None else a.shape[axis],
    # sorting, searching, sets
    "sort": _sort, "argsort": _argsort, "where": _where, "nonzero": _tessel.nonzero, "argwhere": searching.argwhere,
    "searchsorted": lambda a, v, side="left", sorter=None: searching.searchsorted(a, v, side=side, sorter=sorter),
    "unique": _unique, "unique_values": sets.unique_values, "unique_counts": sets.unique_counts,
    "unique_inverse": sets.unique_inverse, "unique_all": sets.unique_all,
    "isin": lambda element, test_elements, assume_unique=False, invert=False, *, kind=None: sets.isin(
        element, test_elements, invert=invert),
    # math
    "clip": _clip, "round": math.around, "around": math.around,
    "diff": lambda a, n=1, axis=-1, prepend=None, append=None: math.diff(a, n=n, axis=axis, prepend=prepend,
                                                                          append=append),
    "nan_to_num": math.nan_to_num, "float_power": math.float_power, "interp": math.interp,
    "gradient": math.gradient, "convolve": math.convolve, "correlate": math.correlate,
    "real": _tessel.real, "imag": _tessel.imag, "conj": _tessel.conj,
    # linear algebra
    "dot": linear_algebra.dot, "outer": linear_algebra.outer, "trace": linear_algebra.trace,
    "cross": linear_algebra.cross, "einsum": linear_algebra.einsum,
    "tensordot": lambda a, b, axes=2: _linalg.tensordot(a, b, axes=axes), "matmul": _tessel.matmul,
    "vecdot": _tessel.vecdot,
    # creation
    "zeros_like": _like("zeros_like"), "ones_like": _like("ones_like"), "empty_like": _like("empty_like"),
    "full_like": _full_like, "zeros": _creation("zeros"), "ones": _creation("ones"), "empty": _creation("empty"),
    "full": _creation("full"), "tril": creation.tril, "triu": creation.triu, "diag": creation.diag,
    "triu_indices": creation.triu_indices, "tril_indices": creation.tril_indices, "meshgrid": creation.meshgrid,
    # indexing
    "take": _tessel.take, "take_along_axis": _tessel.take_along_axis,
    # data types
    "astype": lambda x, dtype, /, *, copy=True, device=None: astype(x, dtype, copy=copy),
    "result_type": result_type,
}
_CREATION = ("zeros", "ones", "empty", "full")


# ---- numpy.linalg: tessel.linalg's functions, with NumPy's parameters where they differ ----
def _lower_of(a, uplo, name):
    """The matrix whose lower triangle eigh reads: a itself (UPLO="L") or its conjugate transpose."""
    if uplo in ("L", "l"):
        return a
    if uplo in ("U", "u"):
        return _tessel.conj(_linalg.matrix_transpose(a)) if a.dtype.kind == "c" else _linalg.matrix_transpose(a)
    raise ValueError(f"numpy.linalg.{name}: UPLO must be 'L' or 'U', got {uplo!r}")


def _np_eigh(a, UPLO="L"):
    return _linalg.eigh(_lower_of(a, UPLO, "eigh"))


def _np_eigvalsh(a, UPLO="L"):
    return _linalg.eigvalsh(_lower_of(a, UPLO, "eigvalsh"))


def _np_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if not compute_uv:
        return _linalg.svdvals(a)
    return _linalg.svd(a, full_matrices=full_matrices)


def _np_qr(a, mode="reduced"):
    if mode == "r":
        return _linalg.qr(a, mode="reduced").R
    if mode not in ("reduced", "complete"):
        raise unsupported(f"numpy.linalg.qr with mode={mode!r}")
    return _linalg.qr(a, mode=mode)


def _np_pinv(a, rcond=None, hermitian=False, *, rtol=None):
    return _linalg.pinv(a, rtol=rtol if rtol is not None else rcond)


def _np_matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    if tol is not None:
        raise unsupported("numpy.linalg.matrix_rank with an absolute tol (rtol is supported)")
    return _linalg.matrix_rank(A, rtol=rtol)


def _np_norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's norm: of the flattened array (ord None), of vectors along one axis, or of matrices
    over two axes."""
    la = _linalg
    if axis is None:
        if ord is None:
            return la.vector_norm(x, axis=None, keepdims=keepdims)
        if x.ndim == 1:
            return la.vector_norm(x, ord=ord, keepdims=keepdims)
        if x.ndim == 2:
            return la.matrix_norm(x, ord=ord, keepdims=keepdims)
        raise ValueError(f"numpy.linalg.norm: an ord needs a 1-D or 2-D array or an axis, got {x.ndim} dimensions")
    axes = (axis,) if is_int(axis) else tuple(axis)
    if len(axes) == 1:
        return la.vector_norm(x, axis=axes[0], ord=2 if ord is None else ord, keepdims=keepdims)
    if len(axes) != 2:
        raise ValueError(f"numpy.linalg.norm: axis must name one or two axes, got {axis!r}")
    a0, a1 = (int(a) % x.ndim for a in axes)
    result = la.matrix_norm(manipulation.moveaxis(x, (a0, a1), (-2, -1)), ord="fro" if ord is None else ord)
    if keepdims:
        for a in sorted((a0, a1)):
            result = manipulation.expand_dims(result, axis=a)
    return result


def _np_multi_dot(arrays, *, out=None):
    arrays = list(arrays)
    result = arrays[0]
    for a in arrays[1:]:
        result = _tessel.matmul(result, a)
    return finish(result, out, "linalg.multi_dot")


_LINALG_SAME = ("solve", "inv", "det", "slogdet", "cholesky", "eig", "eigvals", "svdvals", "matrix_power", "lstsq",
                "cond", "cross", "outer", "matrix_norm", "vector_norm", "vecdot", "diagonal", "trace", "tensordot",
                "matmul", "matrix_transpose")
_LINALG = {"eigh": _np_eigh, "eigvalsh": _np_eigvalsh, "svd": _np_svd, "qr": _np_qr, "pinv": _np_pinv,
           "matrix_rank": _np_matrix_rank, "norm": _np_norm, "multi_dot": _np_multi_dot}


def _linalg_impl(name):
    if name in _LINALG:
        return _LINALG[name]
    if name in _LINALG_SAME:
        return lambda *args, **kwargs: getattr(_linalg, name)(*args, **kwargs)
    return None


def array_function(self, func, types, args, kwargs):
    import numpy as np

    if not builtins.all(issubclass(t, (Array, np.ndarray)) for t in types):
        return NotImplemented
    name = func.__name__
    module = getattr(func, "__module__", "") or "numpy"
    # numpy.linalg, numpy.fft, numpy.ma, ... functions are not the namespace functions of that name.
    if module == "numpy.linalg":
        impl = _linalg_impl(name)
    else:
        in_numpy = module == "numpy" or module.startswith(("numpy._core", "numpy.core", "numpy.lib"))
        impl = FUNCTIONS.get(name) if in_numpy else None
    if impl is None:
        raise unsupported(f"{module or 'numpy'}.{name}")
    device = _device_of(args) or _device_of(list(kwargs.values())) or self.device
    args = [_to_tessel(a, device) for a in args]
    kwargs = {k: _to_tessel(v, device) for k, v in kwargs.items()}
    if name in _CREATION and "device" not in kwargs:  # np.zeros(n, like=x): on x's device
        kwargs["device"] = device
    return impl(*args, **kwargs)


# ---- the ndarray methods NumPy and CuPy users call (x.clip(), x.dot(), ...) ----
def _take_method(self, indices, axis=None):
    if axis is None:  # NumPy: the flattened array
        self, axis = _tessel.reshape(self, (-1,)), 0
    return _tessel.take(self, as_array_on(indices, self.device), axis=axis)


def _fill(self, value):
    """Sets every element to value, in place (NumPy's ndarray.fill)."""
    self[...] = value


def _sort_in_place(self, axis=-1, kind=None, order=None, *, stable=None):
    """Sorts along axis in place (NumPy's ndarray.sort)."""
    self[...] = _sort(self, axis=axis, kind=kind, order=order, stable=stable)


def _str(self):
    """NumPy's str(): the values without array(...)."""
    try:
        return str(self.__array__())
    except Exception:  # pragma: no cover - printing must not fail
        return repr(self)


def _unpickle(host, device, dtype):
    """A pickled array: its host copy (bfloat16 travels as float32, exactly), back in its dtype on
    the device it was on (the default device when that one does not exist here)."""
    try:
        return creation.asarray(host, dtype=dtype, device=device)
    except Exception:  # noqa: BLE001  (no such device on this machine)
        return creation.asarray(host, dtype=dtype)


_METHODS = {
    "clip": lambda self, min=None, max=None: _clip(self, min, max),
    "round": lambda self, decimals=0: math.around(self, decimals),
    "dot": lambda self, b: linear_algebra.dot(self, as_array_on(b, self.device)),
    "nonzero": lambda self: _tessel.nonzero(self),
    "argsort": lambda self, axis=-1, kind=None, order=None, *, stable=None: _argsort(self, axis, kind, order,
                                                                                     stable=stable),
    "take": _take_method,
    "repeat": lambda self, repeats, axis=None: manipulation.repeat(self, repeats, axis=axis),
    "fill": _fill,
    "sort": _sort_in_place,
    "get": lambda self: self.__array__(),  # CuPy's: a NumPy copy on the host
    "__divmod__": lambda self, other: (self // other, self % other),
    "__rdivmod__": lambda self, other: (other // self, other % self),
    "__reduce__": lambda self: (_unpickle, (self.__array__(), str(self.device), self.dtype.name)),
    "__str__": _str,
}


def install():
    Array.__array_ufunc__ = array_ufunc
    Array.__array_function__ = array_function
    for name, method in _METHODS.items():
        setattr(Array, name, method)
