"""The Array API linalg extension: ``tessel.linalg``.

matmul and vecdot are the C++ bindings (GEMM backends: cuBLASLt / tessel kernels / OpenBLAS).
tensordot, outer, matrix_transpose, diagonal, trace, cross, matrix_power (n >= 0), vector_norm
and matrix_norm (fro, 1, -1, inf, -inf) are composed from tessel ops. The decompositions and
solvers (cholesky, det, eigh, eigvalsh, inv, matrix_rank, pinv, qr, slogdet, solve, svd,
svdvals) are not implemented yet: they raise NotImplementedError.
"""
from __future__ import annotations

import math as _math

from . import _tessel
from ._tessel import matmul, vecdot  # noqa: F401  (the C++ functions themselves)

__all__ = [
    "matmul", "vecdot", "matrix_transpose", "tensordot", "outer", "diagonal", "trace", "cross",
    "matrix_power", "vector_norm", "matrix_norm",
    "cholesky", "det", "eigh", "eigvalsh", "inv", "matrix_rank", "pinv", "qr", "slogdet", "solve",
    "svd", "svdvals",
]


def _ts():
    import tessel

    return tessel


def _check_array(x, op):
    if not isinstance(x, _tessel.Array):
        return _ts().asarray(x)
    return x


def matrix_transpose(x, /):
    """Swaps the last two axes (a view)."""
    x = _check_array(x, "matrix_transpose")
    if x.ndim < 2:
        raise _tessel.ShapeError(f"matrix_transpose: needs at least 2 dimensions, got shape {x.shape}")
    return x.mT


def _prod(values):
    r = 1
    for v in values:
        r *= v
    return r


def tensordot(x1, x2, /, *, axes=2):
    """Sum of products over the last `axes` axes of x1 and the first `axes` of x2, or over the
    axis pairs (axes[0][i], axes[1][i]); one GEMM after permuting and reshaping."""
    x1, x2 = _check_array(x1, "tensordot"), _check_array(x2, "tensordot")
    if isinstance(axes, int):
        if axes < 0:
            raise _tessel.ValueError(f"tensordot: axes must be >= 0, got {axes}")
        if axes > x1.ndim or axes > x2.ndim:
            raise _tessel.ShapeError(f"tensordot: axes={axes} exceeds the dimensions of {x1.shape} and {x2.shape}")
        a1 = list(range(x1.ndim - axes, x1.ndim))
        a2 = list(range(axes))
    else:
        if len(axes) != 2:
            raise _tessel.ValueError("tensordot: axes must be an int or a pair of sequences")
        a1 = [axes[0]] if isinstance(axes[0], int) else list(axes[0])
        a2 = [axes[1]] if isinstance(axes[1], int) else list(axes[1])
        if len(a1) != len(a2):
            raise _tessel.ValueError(f"tensordot: axes {axes} name {len(a1)} and {len(a2)} axes")
    a1 = [a + x1.ndim if a < 0 else a for a in a1]
    a2 = [a + x2.ndim if a < 0 else a for a in a2]
    for a, nd, name in [(a, x1.ndim, "x1") for a in a1] + [(a, x2.ndim, "x2") for a in a2]:
        if not 0 <= a < nd:
            raise _tessel.IndexError(f"tensordot: axis out of range for {name} with {nd} dimensions")
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise _tessel.ShapeError(f"tensordot: contracted axis {i} of x1 {x1.shape} has size {x1.shape[i]} but "
                                     f"axis {j} of x2 {x2.shape} has size {x2.shape[j]}")
    free1 = [i for i in range(x1.ndim) if i not in a1]
    free2 = [i for i in range(x2.ndim) if i not in a2]
    k = _prod(x1.shape[i] for i in a1)
    left = _tessel.permute_dims(x1, tuple(free1 + a1)).reshape((_prod(x1.shape[i] for i in free1), k))
    right = _tessel.permute_dims(x2, tuple(a2 + free2)).reshape((k, _prod(x2.shape[i] for i in free2)))
    out_shape = tuple(x1.shape[i] for i in free1) + tuple(x2.shape[i] for i in free2)
    return _tessel.reshape(matmul(left, right), out_shape)


def outer(x1, x2, /):
    """The outer product of two 1-D arrays (no conjugation)."""
    x1, x2 = _check_array(x1, "outer"), _check_array(x2, "outer")
    if x1.ndim != 1 or x2.ndim != 1:
        raise _tessel.ShapeError(f"outer: needs two 1-D arrays, got shapes {x1.shape} and {x2.shape}")
    return _tessel.multiply(x1[:, None], x2[None, :])


def diagonal(x, /, *, offset=0):
    """The diagonal (offset > 0: above the main one) of the last two axes."""
    x = _check_array(x, "diagonal")
    if x.ndim < 2:
        raise _tessel.ShapeError(f"diagonal: needs at least 2 dimensions, got shape {x.shape}")
    m, n = x.shape[-2], x.shape[-1]
    length = max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))
    flat = _tessel.reshape(x, x.shape[:-2] + (m * n,))  # a copy when x is not contiguous
    if length == 0:
        return flat[..., 0:0]
    start = offset if offset >= 0 else -offset * n
    return flat[..., start:start + (length - 1) * (n + 1) + 1:n + 1]


def trace(x, /, *, offset=0, dtype=None):
    return _tessel.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-element vectors along `axis` (broadcasting the other axes)."""
    ts = _ts()
    x1, x2 = _check_array(x1, "cross"), _check_array(x2, "cross")
    if not (-min(x1.ndim, x2.ndim) <= axis < 0):
        raise _tessel.IndexError(f"cross: axis must be in [-{min(x1.ndim, x2.ndim)}, -1], got {axis}")
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise _tessel.ShapeError(f"cross: axis {axis} must have size 3 in both arrays, got {x1.shape} and {x2.shape}")
    a = ts.moveaxis(x1, axis, -1)
    b = ts.moveaxis(x2, axis, -1)
    c = [a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
         a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
         a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]]
    c = ts.broadcast_arrays(*c)
    return ts.moveaxis(ts.stack(c, axis=-1), -1, axis)


def matrix_power(x, n, /):
    """x @ x @ ... (n times) for n >= 0 by repeated squaring; n < 0 needs inv (not implemented)."""
    x = _check_array(x, "matrix_power")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise _tessel.ShapeError(f"matrix_power: needs square matrices, got shape {x.shape}")
    if not isinstance(n, int):
        raise TypeError(f"matrix_power: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise NotImplementedError("tessel.linalg.matrix_power: negative powers need linalg.inv, which tessel does not "
                                  "implement yet")
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    if result is None:
        eye = _tessel.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        return _tessel.broadcast_to(eye, x.shape).copy()
    return result.copy() if result is x else result


def _floating_abs(x):
    if x.dtype.kind in "biu":
        x = x.astype(_tessel.float32)
    return _tessel.abs(x)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The p-norm over `axis` (default: all elements): ord 2, 1, inf, -inf, 0 (count of nonzeros)
    or any other real p. Complex inputs give real results."""
    x = _check_array(x, "vector_norm")
    a = _floating_abs(x)
    if ord == 2:
        return _tessel.sqrt(_tessel.sum(a * a, axis=axis, keepdims=keepdims))
    if ord == 1:
        return _tessel.sum(a, axis=axis, keepdims=keepdims)
    if ord == _math.inf:
        return _tessel.max(a, axis=axis, keepdims=keepdims)
    if ord == -_math.inf:
        return _tessel.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return _tessel.sum(_tessel.not_equal(a, 0).astype(a.dtype), axis=axis, keepdims=keepdims)
    if not isinstance(ord, (int, float)):
        raise _tessel.ValueError(f"vector_norm: ord must be a real number, got {ord!r}")
    return _tessel.pow(_tessel.sum(_tessel.pow(a, float(ord)), axis=axis, keepdims=keepdims), 1.0 / ord)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Norms of the matrices in the last two axes: "fro", 1, -1, inf, -inf. "nuc", 2 and -2 need
    singular values (not implemented)."""
    x = _check_array(x, "matrix_norm")
    if x.ndim < 2:
        raise _tessel.ShapeError(f"matrix_norm: needs at least 2 dimensions, got shape {x.shape}")
    a = _floating_abs(x)
    if ord == "fro":
        return _tessel.sqrt(_tessel.sum(a * a, axis=(-2, -1), keepdims=keepdims))
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"tessel.linalg.matrix_norm: ord={ord!r} needs singular values (linalg.svdvals), "
                                  "which tessel does not implement yet")
    if ord in (1, -1):
        sums = _tessel.sum(a, axis=-2, keepdims=True)
        r = (_tessel.max if ord == 1 else _tessel.min)(sums, axis=-1, keepdims=True)
    elif ord in (_math.inf, -_math.inf):
        sums = _tessel.sum(a, axis=-1, keepdims=True)
        r = (_tessel.max if ord > 0 else _tessel.min)(sums, axis=-2, keepdims=True)
    else:
        raise _tessel.ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    return r if keepdims else _tessel.squeeze(r, (-2, -1))


def _not_implemented(name, needs):
    def unsupported(*args, **kwargs):
        raise NotImplementedError(f"tessel.linalg.{name} is not implemented yet ({needs}); tessel's linalg "
                                  "covers matmul, vecdot, tensordot, outer, matrix_transpose, diagonal, trace, "
                                  "cross, matrix_power (n >= 0), vector_norm and matrix_norm")

    unsupported.__name__ = name
    unsupported.__qualname__ = name
    unsupported.__doc__ = f"Not implemented yet: raises NotImplementedError ({needs})."
    return unsupported


cholesky = _not_implemented("cholesky", "a matrix factorization")
det = _not_implemented("det", "an LU factorization")
eigh = _not_implemented("eigh", "an eigensolver")
eigvalsh = _not_implemented("eigvalsh", "an eigensolver")
inv = _not_implemented("inv", "an LU factorization")
matrix_rank = _not_implemented("matrix_rank", "singular values")
pinv = _not_implemented("pinv", "an SVD")
qr = _not_implemented("qr", "a QR factorization")
slogdet = _not_implemented("slogdet", "an LU factorization")
solve = _not_implemented("solve", "an LU factorization")
svd = _not_implemented("svd", "an SVD")
svdvals = _not_implemented("svdvals", "an SVD")
