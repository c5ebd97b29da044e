"""Mathematical functions written in Python: the Array API's clip (its dtype rule) and diff, and
NumPy's around, float_power, nan_to_num, gradient, interp, convolve and correlate. The
elementwise functions (exp, add, round, ...) are C++ functions."""
from __future__ import annotations

import builtins

from .. import _tessel
from .._tessel import Array
from ._helpers import as_operand, check_array, finish, is_int, normalize_axis, unsupported
from .creation import arange, asarray
from .dtypes import finfo, result_type
from .manipulation import flip, pad


def clip(x, /, min=None, max=None):
    """x clamped to [min, max] (either may be None, a Python scalar or an array; all three
    broadcast). min and max take no part in type promotion: the result has x's dtype when they
    are of x's kind (the standard leaves mixed kinds unspecified; those keep the promoted dtype)."""
    result = _tessel.clip(x, min, max)
    if isinstance(x, Array) and result.dtype != x.dtype and result.dtype.kind == x.dtype.kind:
        result = result.astype(x.dtype)
    return result


def _along(x, axis, index):
    key = [slice(None)] * x.ndim
    key[axis] = index
    return x[tuple(key)]


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The n-th forward difference along axis (x[i+1] - x[i]; for bool, x[i+1] != x[i]), after
    prepending / appending values along that axis."""
    check_array(x, "diff")
    if not is_int(n) or n < 0:
        raise ValueError(f"diff: n must be a non-negative integer, got {n!r}")
    if x.ndim == 0:
        raise ValueError("diff: x must have at least one dimension, got a 0-d array")
    axis = normalize_axis(axis, x.ndim, "diff")
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
                extra = _tessel.broadcast_to(as_operand(extra, x, "diff"), tuple(shape))
            parts.append(extra)
        parts.insert(1 if prepend is not None else 0, x)
        x = _tessel.concat(parts, axis=axis)
    for _ in range(n):
        later, earlier = _along(x, axis, slice(1, None)), _along(x, axis, slice(None, -1))
        x = _tessel.not_equal(later, earlier) if x.dtype == _tessel.bool else later - earlier
    return x


# ---- NumPy's names ----
def around(a, decimals=0, out=None):
    """NumPy's round: half to even; with decimals, as NumPy does it, a * 10^d rounded, then / 10^d."""
    decimals = int(decimals)
    if decimals == 0 or a.dtype.kind in "iub" and decimals > 0:
        return finish(_tessel.round(a) if a.dtype.kind not in "iub" else asarray(a, copy=True), out, "round")
    scale = 10.0 ** builtins.abs(decimals)
    if a.dtype.kind in "iub":  # negative decimals of integers: to tens, hundreds, ... in the dtype
        return finish((_tessel.round(a.astype(_tessel.float64) / scale) * scale).astype(a.dtype), out, "round")
    result = _tessel.round(a * scale) / scale if decimals > 0 else _tessel.round(a / scale) * scale
    return finish(result, out, "round")


def float_power(x1, x2):
    """x1 ** x2 computed in float64 (complex128 for complex operands)."""
    def widened(v):  # Python scalars stay weak
        return v.astype(_tessel.complex128 if v.dtype.kind == "c" else _tessel.float64) if isinstance(v, Array) else v

    return _tessel.pow(widened(x1), widened(x2))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN to nan, +inf to posinf and -inf to neginf (default: the dtype's largest and smallest
    finite values); other dtypes unchanged."""
    if x.dtype.kind == "c":
        return _tessel.real(nan_to_num(_tessel.real(x), nan=nan, posinf=posinf, neginf=neginf)) + 1j * nan_to_num(
            _tessel.imag(x), nan=nan, posinf=posinf, neginf=neginf)
    if x.dtype.kind != "f":
        return asarray(x, copy=True) if copy else x
    info = finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = -info.max if neginf is None else neginf

    def filled(value):
        return asarray(value, dtype=x.dtype, device=x.device)

    x = _tessel.where(_tessel.isnan(x), filled(nan), x)
    return _tessel.where(_tessel.isinf(x), _tessel.where(x > 0, filled(hi), filled(lo)), x)


def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's gradient with uniform spacing (one scalar, or one per axis): central differences
    inside, one-sided differences of order edge_order (1 or 2) at the ends, with NumPy's formulas;
    one array per axis (a tuple when there are several)."""
    f = f if isinstance(f, Array) else asarray(f)
    if f.dtype.kind in "iub":
        f = f.astype(_tessel.float64)
    axes = list(range(f.ndim)) if axis is None else ([axis] if is_int(axis) else list(axis))
    axes = [int(a) % f.ndim for a in axes]
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) in (1, len(axes)):
        for h in varargs:
            if hasattr(h, "ndim") and h.ndim != 0 or isinstance(h, (list, tuple)):
                raise unsupported("numpy.gradient with coordinate arrays (uniform spacings are supported)")
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
        results.append(_tessel.concat([first, inside, last], axis=a))
    return results[0] if len(results) == 1 else tuple(results)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of (xp, fp) at x (xp increasing); left/right outside."""
    from .searching import searchsorted

    if period is not None:
        raise unsupported("numpy.interp with period")
    x = x if isinstance(x, Array) else asarray(x)
    xp = (xp if isinstance(xp, Array) else asarray(xp, device=x.device)).astype(_tessel.float64)
    fp = fp if isinstance(fp, Array) else asarray(fp, device=x.device)
    fp = fp.astype(_tessel.complex128 if fp.dtype.kind == "c" else _tessel.float64)
    n = xp.shape[0]
    if xp.ndim != 1 or fp.shape != xp.shape or n == 0:
        raise ValueError(f"interp: xp and fp must be 1-D of one nonzero length, got {xp.shape} and {fp.shape}")
    xd = x.astype(_tessel.float64)
    if n == 1:
        result = _tessel.broadcast_to(fp[0], xd.shape) * _tessel.ones_like(xd, dtype=fp.dtype)
    else:
        i = clip(searchsorted(xp, xd, side="right") - 1, 0, n - 2)
        x0, x1 = _tessel.take(xp, i), _tessel.take(xp, i + 1)
        f0, f1 = _tessel.take(fp, i), _tessel.take(fp, i + 1)
        t = (xd - x0) / (x1 - x0)
        result = _tessel.where(xd == x1, f1, f0 + t * (f1 - f0))
    lo = fp[0] if left is None else asarray(left, dtype=fp.dtype, device=x.device)
    hi = fp[-1] if right is None else asarray(right, dtype=fp.dtype, device=x.device)
    result = _tessel.where(xd < xp[0], lo, result)
    return _tessel.where(xd > xp[-1], hi, result)


def _sliding_dot(a, v, mode, name):
    """sum_j a_padded[k + j] v[j] for each output position k: the windows of a (padded with
    len(v) - 1 zeros on each side) gathered as a matrix, times v, one matmul."""
    a = a if isinstance(a, Array) else asarray(a)
    v = v if isinstance(v, Array) else asarray(v, device=a.device)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}: needs 1-D arrays, got shapes {a.shape} and {v.shape}")
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        raise ValueError(f"{name}: the arrays must not be empty, got lengths {n} and {m}")
    dtype = result_type(a, v)
    a, v = a.astype(dtype), v.astype(dtype)
    full = n + m - 1
    if mode == "full":
        start, length = 0, full
    elif mode == "same":
        length = builtins.max(n, m)
        start = (full - length) // 2
    elif mode == "valid":
        length = builtins.max(n, m) - builtins.min(n, m) + 1
        start = builtins.min(n, m) - 1
    else:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    padded = pad(a, (m - 1, m - 1))
    k = arange(start, start + length, device=a.device)
    windows = _tessel.take(padded, _tessel.reshape(k, (-1, 1)) + _tessel.reshape(arange(m, device=a.device), (1, -1)),
                           axis=0)
    return _tessel.matmul(windows, v)


def convolve(a, v, mode="full"):
    """NumPy's convolve of two 1-D arrays (modes full, same, valid)."""
    v = v if isinstance(v, Array) else asarray(v, device=a.device if isinstance(a, Array) else None)
    if v.ndim == 1 and a.ndim == 1 and v.shape[0] > a.shape[0]:
        a, v = v, a  # NumPy: the longer array slides under the shorter
    return _sliding_dot(a, flip(v), mode, "convolve")


def correlate(a, v, mode="valid"):
    """NumPy's correlate of two 1-D arrays: sum_n a[n + k] conj(v[n]) (modes valid, same, full)."""
    a = a if isinstance(a, Array) else asarray(a)
    v = v if isinstance(v, Array) else asarray(v, device=a.device)
    complex_ = a.dtype.kind == "c" or v.dtype.kind == "c"
    if a.ndim == 1 and v.ndim == 1 and v.shape[0] > a.shape[0]:
        swapped = flip(correlate(v, a, mode))  # c_k = conj(d_-k), d the correlation of v with a
        return _tessel.conj(swapped) if complex_ else swapped
    return _sliding_dot(a, _tessel.conj(v) if v.dtype.kind == "c" else v, mode, "correlate")
