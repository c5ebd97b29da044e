"""The Array API linalg extension: ``tessel.linalg``.

matmul and vecdot are the C++ bindings (GEMM backends: cuBLASLt / tessel kernels / OpenBLAS).
The factorizations and solvers (cholesky, inv, solve, det, slogdet, eigh, eigvalsh, eig, eigvals,
qr, svd, svdvals) are C++ ops (src/ops/linalg.cpp) on LAPACK (CPU) and cuSOLVER (CUDA); their
*_ex variants return LAPACK's info array without synchronizing, and the plain functions raise
LinAlgError naming the first failing matrix. matrix_rank, pinv, cond and lstsq are composed from
svd; matrix_norm's "nuc", 2 and -2 from svdvals; matrix_power's negative powers from inv.
tensordot, outer, matrix_transpose, diagonal, trace, cross, vector_norm and the other matrix
norms are composed from tessel ops.
"""
from __future__ import annotations

import math as _math
from typing import NamedTuple as _NamedTuple

from . import _tessel
from ._tessel import matmul, vecdot  # noqa: F401  (the C++ functions themselves)
from ._tessel import _linalg
from ._tessel._linalg import LinAlgError  # noqa: F401  (a tessel.ValueError, hence a ValueError)
from ._functions._helpers import is_int as _is_int, row_doc as _row_doc_of

# The factorizations and solvers are the rows of include/tessel/ops/linalg_list.hpp, in row order
# (their defs below wrap the bindings' tuples into the named tuples and take the rows' docstrings).
__all__ = [
    "matmul", "vecdot", "matrix_transpose", "tensordot", "outer", "diagonal", "trace", "cross",
    "matrix_power", "vector_norm", "matrix_norm",
    *_linalg._linalg_functions, "matrix_rank", "pinv", "lstsq", "cond",
    "LinAlgError", "EighResult", "EigResult", "QRResult", "SVDResult", "SlogdetResult", "LstsqResult",
    "CholeskyExResult", "InvExResult", "SolveExResult", "EighExResult",
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
    if _is_int(axes):
        axes = int(axes)
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
    """x @ x @ ... (n times) by repeated squaring; n < 0 raises inv(x) to -n; n == 0 gives identities."""
    x = _check_array(x, "matrix_power")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise _tessel.ShapeError(f"matrix_power: needs square matrices, got shape {x.shape}")
    if not _is_int(n):
        raise TypeError(f"matrix_power: n must be an int, got {type(n).__name__}")
    n = int(n)
    if n < 0:
        x = inv(x)
        n = -n
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
    """Norms of the matrices in the last two axes: "fro", "nuc" (sum of singular values), 2 and -2
    (largest and smallest singular value), 1, -1 (column sums), inf, -inf (row sums)."""
    x = _check_array(x, "matrix_norm")
    if x.ndim < 2:
        raise _tessel.ShapeError(f"matrix_norm: needs at least 2 dimensions, got shape {x.shape}")
    a = _floating_abs(x)
    if ord == "fro":
        return _tessel.sqrt(_tessel.sum(a * a, axis=(-2, -1), keepdims=keepdims))
    if isinstance(ord, str) and ord == "nuc" or (not isinstance(ord, str) and ord in (2, -2)):
        s = svdvals(x)
        r = _tessel.sum(s, axis=-1) if ord == "nuc" else (_tessel.max if ord == 2 else _tessel.min)(s, axis=-1)
        return _tessel.reshape(r, r.shape + (1, 1)) if keepdims else r
    if ord in (1, -1):
        sums = _tessel.sum(a, axis=-2, keepdims=True)
        r = (_tessel.max if ord == 1 else _tessel.min)(sums, axis=-1, keepdims=True)
    elif ord in (_math.inf, -_math.inf):
        sums = _tessel.sum(a, axis=-1, keepdims=True)
        r = (_tessel.max if ord > 0 else _tessel.min)(sums, axis=-2, keepdims=True)
    else:
        raise _tessel.ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    return r if keepdims else _tessel.squeeze(r, (-2, -1))


# ---- named-tuple results (the Array API's names) ----
class EighResult(_NamedTuple):
    eigenvalues: _tessel.Array
    eigenvectors: _tessel.Array


class EigResult(_NamedTuple):
    eigenvalues: _tessel.Array
    eigenvectors: _tessel.Array


class QRResult(_NamedTuple):
    Q: _tessel.Array
    R: _tessel.Array


class SVDResult(_NamedTuple):
    U: _tessel.Array
    S: _tessel.Array
    Vh: _tessel.Array


class SlogdetResult(_NamedTuple):
    sign: _tessel.Array
    logabsdet: _tessel.Array


class LstsqResult(_NamedTuple):
    solution: _tessel.Array
    residuals: _tessel.Array
    rank: object  # an int for one matrix, an int64 array for a stack
    singular_values: _tessel.Array


class CholeskyExResult(_NamedTuple):
    L: _tessel.Array
    info: _tessel.Array


class InvExResult(_NamedTuple):
    inverse: _tessel.Array
    info: _tessel.Array


class SolveExResult(_NamedTuple):
    result: _tessel.Array
    info: _tessel.Array


class EighExResult(_NamedTuple):
    eigenvalues: _tessel.Array
    eigenvectors: _tessel.Array
    info: _tessel.Array


# ---- factorizations and solvers (C++): the rows of linalg_list.hpp ----
_row_doc = _row_doc_of(_linalg._linalg_functions)  # linalg_list.hpp


@_row_doc
def cholesky(x, /, *, upper=False):
    return _linalg.cholesky(x, upper=upper)


@_row_doc
def cholesky_ex(x, /, *, upper=False):
    return CholeskyExResult(*_linalg.cholesky_ex(x, upper=upper))


@_row_doc
def inv(x, /):
    return _linalg.inv(x)


@_row_doc
def inv_ex(x, /):
    return InvExResult(*_linalg.inv_ex(x))


@_row_doc
def solve(x1, x2, /):
    return _linalg.solve(x1, x2)


@_row_doc
def solve_ex(x1, x2, /):
    return SolveExResult(*_linalg.solve_ex(x1, x2))


@_row_doc
def det(x, /):
    return _linalg.det(x)


@_row_doc
def slogdet(x, /):
    return SlogdetResult(*_linalg.slogdet(x))


@_row_doc
def eigh(x, /):
    return EighResult(*_linalg.eigh(x))


@_row_doc
def eigh_ex(x, /):
    return EighExResult(*_linalg.eigh_ex(x))


@_row_doc
def eigvalsh(x, /):
    return _linalg.eigvalsh(x)


@_row_doc
def eig(x, /):
    return EigResult(*_linalg.eig(x))


@_row_doc
def eigvals(x, /):
    return _linalg.eigvals(x)


@_row_doc
def qr(x, /, *, mode="reduced"):
    return QRResult(*_linalg.qr(x, mode=mode))


@_row_doc
def svd(x, /, *, full_matrices=True):
    return SVDResult(*_linalg.svd(x, full_matrices=full_matrices))


@_row_doc
def svdvals(x, /):
    return _linalg.svdvals(x)


# ---- composed from svd / inv ----
def _default_rtol(x):
    dt = _linalg.compute_dtype(x.dtype, "linalg")
    eps = _ts().finfo(dt).eps
    return max(x.shape[-2], x.shape[-1]) * eps


def _cutoff(s, rtol, op):
    """rtol (a float or an array broadcasting against the batch) times the largest singular value,
    with a trailing axis for comparing against s."""
    largest = _tessel.max(s, axis=-1, keepdims=True) if s.shape[-1] else _tessel.zeros(s.shape[:-1] + (1,),
                                                                                        dtype=s.dtype, device=s.device)
    if isinstance(rtol, _tessel.Array):
        if rtol.dtype.kind not in "fiu":
            raise _tessel.DTypeError(f"{op}: rtol must be real, got {rtol.dtype}")
        return largest * _tessel.expand_dims(rtol.astype(s.dtype), axis=-1)
    return largest * float(rtol)


def _adjoint(x):
    return _tessel.conj(x.mT) if x.dtype.kind == "c" else x.mT


def matrix_rank(x, /, *, rtol=None):
    """The number of singular values above rtol * the largest (default rtol: max(M, N) * eps)."""
    x = _check_array(x, "matrix_rank")
    if x.ndim < 2:
        raise _tessel.ShapeError(f"matrix_rank: needs at least 2 dimensions, got shape {x.shape}")
    s = svdvals(x)
    cutoff = _cutoff(s, _default_rtol(x) if rtol is None else rtol, "matrix_rank")
    return _tessel.sum(_tessel.greater(s, cutoff).astype(_tessel.int64), axis=-1)


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse: singular values at most rtol * the largest count as zero
    (default rtol: max(M, N) * eps)."""
    x = _check_array(x, "pinv")
    if x.ndim < 2:
        raise _tessel.ShapeError(f"pinv: needs at least 2 dimensions, got shape {x.shape}")
    u, s, vh = svd(x, full_matrices=False)
    cutoff = _cutoff(s, _default_rtol(x) if rtol is None else rtol, "pinv")
    keep = _tessel.greater(s, cutoff)
    s_inv = _tessel.where(keep, 1.0 / _tessel.where(keep, s, 1.0), 0.0).astype(s.dtype)
    scaled = _adjoint(u) * _tessel.expand_dims(s_inv.astype(u.dtype), axis=-1)
    return matmul(_adjoint(vh), scaled)


def cond(x, p=None):
    """The condition number (NumPy's linalg.cond): p None or 2 (ratio of extreme singular values),
    -2, "fro", "nuc", 1, -1, inf, -inf."""
    x = _check_array(x, "cond")
    if x.ndim < 2:
        raise _tessel.ShapeError(f"cond: needs at least 2 dimensions, got shape {x.shape}")
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = svdvals(x)
        if p == -2:
            return _tessel.min(s, axis=-1) / _tessel.max(s, axis=-1)
        return _tessel.max(s, axis=-1) / _tessel.min(s, axis=-1)
    if x.shape[-1] != x.shape[-2]:
        raise _tessel.ShapeError(f"cond: p={p!r} needs square matrices, got shape {x.shape}")
    return matrix_norm(x, ord=p) * matrix_norm(inv(x), ord=p)


def lstsq(a, b, /, rcond=None):
    """The least-squares solution of a @ x = b (NumPy's linalg.lstsq, from the SVD): singular
    values at most rcond * the largest count as zero (default rcond: max(M, N) * eps). b is (M,)
    or (M, K), or a stack broadcasting against a's batch. residuals: the squared 2-norms of
    b - a @ x per column when every matrix has full rank N < M, else empty."""
    a, b = _check_array(a, "lstsq"), _check_array(b, "lstsq")
    if a.ndim < 2:
        raise _tessel.ShapeError(f"lstsq: a must have at least 2 dimensions, got shape {a.shape}")
    m, n = a.shape[-2], a.shape[-1]
    vector = b.ndim == 1
    bm = _tessel.reshape(b, (m, 1)) if vector and b.shape[0] == m else b
    if bm.ndim < 2 or bm.shape[-2] != m:
        raise _tessel.ShapeError(f"lstsq: a {a.shape} needs b with {m} rows, got shape {b.shape}")
    u, s, vh = svd(a, full_matrices=False)
    cutoff = _cutoff(s, _default_rtol(a) if rcond is None else rcond, "lstsq")
    keep = _tessel.greater(s, cutoff)
    s_inv = _tessel.where(keep, 1.0 / _tessel.where(keep, s, 1.0), 0.0).astype(s.dtype)
    dt = u.dtype
    uhb = matmul(_adjoint(u), bm.astype(dt) if bm.dtype != dt else bm)
    x = matmul(_adjoint(vh), uhb * _tessel.expand_dims(s_inv.astype(dt), axis=-1))
    rank = _tessel.sum(keep.astype(_tessel.int64), axis=-1)
    full = m > n and bool(_tessel.all(_tessel.equal(rank, n)))
    if full:
        r = matmul(a.astype(dt) if a.dtype != dt else a, x) - bm
        ra = _tessel.abs(r)
        residuals = _tessel.sum(ra * ra, axis=-2)  # (..., K); (..., 1) for a vector b, as NumPy's (1,)
    else:
        residuals = _tessel.zeros((0,), dtype=s.dtype, device=a.device)
    if vector:
        x = _tessel.reshape(x, x.shape[:-1])
    return LstsqResult(x, residuals, int(rank) if rank.ndim == 0 else rank, s)
