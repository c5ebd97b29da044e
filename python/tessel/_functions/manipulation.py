"""Manipulation functions written in Python: the Array API's broadcast_arrays, broadcast_shapes,
expand_dims (with a tuple of axes), flip, moveaxis, repeat, roll, tile, unstack, and NumPy's
concatenate, transpose, ravel, vstack, hstack, split, array_split, atleast_1d/2d/3d and pad.
reshape, permute_dims, squeeze, broadcast_to, concat and stack are C++ functions."""
from __future__ import annotations

import builtins
import operator

from .. import _tessel
from ._helpers import check_array, finish, is_int, unsupported
from .dtypes import astype


def flip(x, /, *, axis=None):
    axes = range(x.ndim) if axis is None else ([axis] if is_int(axis) else axis)
    key = [slice(None)] * x.ndim
    for a in axes:
        key[a % x.ndim if x.ndim else 0] = slice(None, None, -1)
    return x[tuple(key)]


def roll(x, /, shift, *, axis=None):
    if axis is None:
        return _tessel.reshape(roll(_tessel.reshape(x, (-1,)), shift, axis=0), x.shape)
    shifts = [shift] if is_int(shift) else list(shift)
    axes = [axis] if is_int(axis) else list(axis)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    for s, a in zip(shifts, axes):
        a %= x.ndim
        n = x.shape[a]
        if n == 0:
            continue
        s %= n
        if s == 0:
            continue
        head = [slice(None)] * x.ndim
        tail = [slice(None)] * x.ndim
        head[a] = slice(n - s, None)
        tail[a] = slice(None, n - s)
        x = _tessel.concat([x[tuple(head)], x[tuple(tail)]], axis=a)
    return x


def _axis_list(axes, ndim, op, name):
    axes = [axes] if is_int(axes) else list(axes)
    for a in axes:
        if not -ndim <= a < ndim:
            raise IndexError(f"{op}: {name} axis {a} is out of bounds for an array of dimension {ndim}")
    axes = [a % ndim for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {name} {tuple(axes)}")
    return axes


def moveaxis(x, source, destination, /):
    src = _axis_list(source, x.ndim, "moveaxis", "source")
    dst = _axis_list(destination, x.ndim, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have the same number of axes")
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _tessel.permute_dims(x, tuple(order))


def _broadcast_pair(a, b, op, error):
    n = builtins.max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (p, q) in enumerate(zip(a, b)):
        if p != q and p != 1 and q != 1:
            raise error(f"{op}: shapes {a} and {b} do not broadcast (axis {i}: {p} vs {q})")
        out.append(q if p == 1 else p)
    return tuple(out)


def broadcast_arrays(*arrays):
    shape = ()
    for a in arrays:
        shape = _broadcast_pair(shape, a.shape, "broadcast_arrays", _tessel.ShapeError)
    return tuple(_tessel.broadcast_to(a, shape) for a in arrays)


def broadcast_shapes(*shapes):
    """The shape that arrays of these shapes broadcast to (ValueError when they do not)."""
    result = ()
    for shape in shapes:
        shape = tuple(operator.index(s) for s in ((shape,) if is_int(shape) else shape))
        result = _broadcast_pair(result, shape, "broadcast_shapes", ValueError)
    return result


def unstack(x, /, *, axis=0):
    axis %= x.ndim
    return tuple(x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis]))


def repeat(x, repeats, /, *, axis=None):
    """Repeats each element of x (flattened when axis is None) repeats times. An array of counts
    makes the output size data-dependent: its total is read back to the host (one synchronization)."""
    check_array(x, "repeat")
    return _tessel._repeat(x, repeats, axis)


def tile(x, repetitions, /):
    """x repeated repetitions[i] times along each axis: one broadcast copy on the device."""
    check_array(x, "tile")
    try:
        reps = tuple(operator.index(r) for r in repetitions)
    except TypeError:
        raise TypeError(f"tile: repetitions must be a tuple of integers, got {repetitions!r}") from None
    for i, r in enumerate(reps):
        if r < 0:
            raise ValueError(f"tile: repetitions must be non-negative, got {r} at position {i} of {reps}")
    ndim = builtins.max(x.ndim, len(reps))
    shape = (1,) * (ndim - x.ndim) + tuple(x.shape)
    reps = (1,) * (ndim - len(reps)) + reps
    out_shape = tuple(r * s for r, s in zip(reps, shape))
    if builtins.all(r == 1 for r in reps):
        return _tessel.reshape(x, out_shape, copy=True)
    interleaved, broadcast = [], []
    for r, s in zip(reps, shape):
        interleaved += [1, s]
        broadcast += [r, s]
    wide = _tessel.broadcast_to(_tessel.reshape(x, tuple(interleaved)), tuple(broadcast))
    return _tessel.reshape(wide, out_shape)


def expand_dims(x, /, axis=0):
    """x with a size-1 axis inserted at each position of axis (an int or a tuple, positions in the
    result); a view."""
    check_array(x, "expand_dims")
    if not isinstance(axis, tuple):
        return _tessel.expand_dims(x, axis=axis)
    ndim = x.ndim + len(axis)
    positions = []
    for a in axis:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise IndexError(f"expand_dims: axis {a} is out of bounds for the result's {ndim} dimensions")
        positions.append(a % ndim)
    if len(set(positions)) != len(positions):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    rest = iter(x.shape)
    return _tessel.reshape(x, tuple(1 if i in positions else next(rest) for i in range(ndim)))


# ---- NumPy's names ----
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """NumPy's concatenate: concat with NumPy's parameters."""
    arrays = list(arrays)
    if dtype is not None:
        arrays = [astype(a, dtype) for a in arrays]
    return finish(_tessel.concat(arrays, axis=axis), out, "concatenate")


def transpose(a, axes=None):
    """NumPy's transpose: the axes reversed, or permuted as axes says (a view)."""
    return _tessel.permute_dims(a, tuple(reversed(range(a.ndim))) if axes is None else tuple(axes))


def ravel(a, order="C"):
    """The flattened array (a view when a is contiguous)."""
    if order != "C":
        raise unsupported(f"numpy.ravel with order={order!r}")
    return _tessel.reshape(a, (-1,))


def _atleast(a, ndim):
    """NumPy's atleast_1d, atleast_2d and atleast_3d: a 1-D array becomes a row, (1, n) in 2-D and
    (1, n, 1) in 3-D; a 2-D one (m, n, 1) in 3-D."""
    if a.ndim >= ndim:
        return a
    shape = tuple(a.shape)
    if ndim == 3 and a.ndim >= 1:
        shape = ((1,) if a.ndim == 1 else ()) + shape + (1,)
    return _tessel.reshape(a, (1,) * (ndim - len(shape)) + shape)


def _atleast_all(arys, ndim):
    results = [_atleast(a, ndim) for a in arys]
    return results[0] if len(results) == 1 else tuple(results)


def atleast_1d(*arys):
    """Each array with at least one dimension (a tuple when there are several)."""
    return _atleast_all(arys, 1)


def atleast_2d(*arys):
    """Each array with at least two dimensions (a 1-D one as a row)."""
    return _atleast_all(arys, 2)


def atleast_3d(*arys):
    """Each array with at least three dimensions (NumPy's placement of the new axes)."""
    return _atleast_all(arys, 3)


def vstack(tup, *, dtype=None, casting="same_kind"):
    """The arrays stacked along the first axis (1-D ones as rows)."""
    return concatenate([_atleast(a, 2) for a in tup], axis=0, dtype=dtype)


def hstack(tup, *, dtype=None, casting="same_kind"):
    """The arrays stacked along the second axis (the first for 1-D ones)."""
    arrays = [_atleast(a, 1) for a in tup]
    return concatenate(arrays, axis=0 if arrays and arrays[0].ndim == 1 else 1, dtype=dtype)


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


def _split(ary, indices_or_sections, axis, even, name):
    axis = int(axis)
    n = ary.shape[axis]
    edges = [0] + _split_points(n, indices_or_sections, even, name) + [n]
    parts = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        key = [slice(None)] * ary.ndim
        key[axis] = slice(lo, builtins.max(lo, hi))
        parts.append(ary[tuple(key)])
    return parts


def split(ary, indices_or_sections, axis=0):
    """Views of ary split into equal sections, or at the given indices, along axis."""
    return _split(ary, indices_or_sections, axis, True, "split")


def array_split(ary, indices_or_sections, axis=0):
    """split that allows sections of unequal length (the first ones one longer)."""
    return _split(ary, indices_or_sections, axis, False, "array_split")


def pad(array, pad_width, mode="constant", **kwargs):
    """mode="constant" (constant_values: one scalar); other modes are not implemented."""
    if mode != "constant":
        raise unsupported(f"numpy.pad with mode={mode!r}")
    value = kwargs.pop("constant_values", 0)
    if kwargs:
        raise unsupported(f"numpy.pad with {', '.join(kwargs)}")
    import numpy as np

    try:  # NumPy's rule: an int, (pad,), (before, after) or one pair per axis
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (array.ndim, 2)).tolist()
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width!r} does not fit an array of {array.ndim} dimensions") from None
    if builtins.any(w < 0 for pair in widths for w in pair):
        raise ValueError(f"pad: pad_width {pad_width!r} has negative widths")
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(array.shape, widths))
    out = _tessel.full(shape, value, dtype=array.dtype, device=array.device)
    out[tuple(slice(lo, lo + n) for n, (lo, hi) in zip(array.shape, widths))] = array
    return out
