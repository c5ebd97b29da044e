"""Generic tessel kernels behind ``vectorize``, ``guvectorize`` and ``cuda.reduce``, and the cast
shims of device functions declared with a signature.

Each factory returns a kernel (or device function) compiled by tessel's kernel compiler that
calls the user's function, which the compiler reaches as a closure variable and inlines: there is
no second compiler and no generated Python source. The compiler reads these functions' source
with ``inspect``, so they live in this real module file; one template per argument count.
"""
from __future__ import annotations

from tessel.kernel import block_reduce, blockIdx, grid, gridsize, jit, threadIdx

__all__ = ["vectorize_kernel", "guvectorize_kernel", "fold_kernel", "at_kernel", "reduce_kernel", "cast_shim",
           "MAX_UFUNC_INPUTS", "MAX_GUFUNC_ARGS", "MAX_SHIM_ARGS"]

MAX_UFUNC_INPUTS = 8
MAX_GUFUNC_ARGS = 10
MAX_SHIM_ARGS = 8


def _named(kernel_function, name):
    # A distinct qualified name per user function: the generated symbol is derived from it.
    kernel_function.__qualname__ = name
    return kernel_function


# ---- vectorize: out[i] = f(x0[i], ...) over flat arrays, in a grid-stride loop -------------------
def vectorize_kernel(f, nin, name="ufunc", fastmath=False):
    """A kernel ``k(x0, ..., x{nin-1}, out)`` over 1-D arrays of one length: ``out[i] = f(...)``
    cast to the output's dtype."""
    if not 1 <= nin <= MAX_UFUNC_INPUTS:
        raise NotImplementedError(f"tessel.numba: ufuncs with {nin} inputs are not supported (1 to "
                                  f"{MAX_UFUNC_INPUTS})")
    return jit(_named(_VECTORIZE[nin](f), f"vectorize_{name}"), fastmath=fastmath)


def _vec1(f):
    def ufunc_kernel(x0, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i]))
    return ufunc_kernel


def _vec2(f):
    def ufunc_kernel(x0, x1, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i], x1[i]))
    return ufunc_kernel


def _vec3(f):
    def ufunc_kernel(x0, x1, x2, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i], x1[i], x2[i]))
    return ufunc_kernel


def _vec4(f):
    def ufunc_kernel(x0, x1, x2, x3, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i], x1[i], x2[i], x3[i]))
    return ufunc_kernel


def _vec5(f):
    def ufunc_kernel(x0, x1, x2, x3, x4, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i], x1[i], x2[i], x3[i], x4[i]))
    return ufunc_kernel


def _vec6(f):
    def ufunc_kernel(x0, x1, x2, x3, x4, x5, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i], x1[i], x2[i], x3[i], x4[i], x5[i]))
    return ufunc_kernel


def _vec7(f):
    def ufunc_kernel(x0, x1, x2, x3, x4, x5, x6, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i], x1[i], x2[i], x3[i], x4[i], x5[i], x6[i]))
    return ufunc_kernel


def _vec8(f):
    def ufunc_kernel(x0, x1, x2, x3, x4, x5, x6, x7, out):
        for i in range(grid(1), out.size, gridsize(1)):
            out[i] = out.dtype(f(x0[i], x1[i], x2[i], x3[i], x4[i], x5[i], x6[i], x7[i]))
    return ufunc_kernel


_VECTORIZE = {1: _vec1, 2: _vec2, 3: _vec3, 4: _vec4, 5: _vec5, 6: _vec6, 7: _vec7, 8: _vec8}


# ---- a ufunc's reduce and accumulate, at: NumPy's order, element after element -------------------
def fold_kernel(f, name="ufunc", fastmath=False):
    """A kernel ``k(x, out, accumulate)`` folding each row of the 2-D ``x`` left to right with the
    binary ``f`` (NumPy's ufunc.reduce order): ``out[i, 0]`` the row's result, or with
    ``accumulate`` ``out[i, j]`` the result of the first ``j + 1`` elements."""

    def fold_kernel(x, out, accumulate):
        for i in range(grid(1), x.shape[0], gridsize(1)):
            acc = out.dtype(x[i, 0])
            out[i, 0] = acc
            for j in range(1, x.shape[1]):
                acc = out.dtype(f(acc, x[i, j]))
                out[i, j if accumulate else 0] = acc

    return jit(_named(fold_kernel, f"fold_{name}"), fastmath=fastmath)


def at_kernel(f, nin, name="ufunc", fastmath=False):
    """A kernel ``k(a, index, b)`` (``k(a, index)`` for a unary ``f``) setting ``a[index[k]] =
    f(a[index[k]], b[k])`` for each ``k`` in order, in one thread (NumPy's unbuffered ufunc.at)."""

    def at_unary(a, index):
        if grid(1) == 0:
            for k in range(index.size):
                a[index[k]] = a.dtype(f(a[index[k]]))

    def at_binary(a, index, b):
        if grid(1) == 0:
            for k in range(index.size):
                a[index[k]] = a.dtype(f(a[index[k]], b[k]))

    return jit(_named(at_unary if nin == 1 else at_binary, f"at_{name}"), fastmath=fastmath)


# ---- guvectorize: f(a0[i], a1[i], ...) for each i of the flattened loop axis -----------------------
# Every argument has the loop axis first: a[i] is an element (a scalar core) or a view (an array core).
def guvectorize_kernel(f, nargs, name="gufunc", fastmath=False):
    """A kernel ``k(a0, ..., a{nargs-1})`` calling ``f(a0[i], ..., a{nargs-1}[i])`` for each ``i``
    of the arguments' first axis (inputs and outputs alike)."""
    if not 1 <= nargs <= MAX_GUFUNC_ARGS:
        raise NotImplementedError(f"tessel.numba: gufuncs with {nargs} arguments are not supported (1 to "
                                  f"{MAX_GUFUNC_ARGS})")
    return jit(_named(_GUVECTORIZE[nargs](f), f"guvectorize_{name}"), fastmath=fastmath)


def _gu1(f):
    def gufunc_kernel(a0):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i])
    return gufunc_kernel


def _gu2(f):
    def gufunc_kernel(a0, a1):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i])
    return gufunc_kernel


def _gu3(f):
    def gufunc_kernel(a0, a1, a2):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i])
    return gufunc_kernel


def _gu4(f):
    def gufunc_kernel(a0, a1, a2, a3):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i], a3[i])
    return gufunc_kernel


def _gu5(f):
    def gufunc_kernel(a0, a1, a2, a3, a4):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i], a3[i], a4[i])
    return gufunc_kernel


def _gu6(f):
    def gufunc_kernel(a0, a1, a2, a3, a4, a5):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i], a3[i], a4[i], a5[i])
    return gufunc_kernel


def _gu7(f):
    def gufunc_kernel(a0, a1, a2, a3, a4, a5, a6):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i], a3[i], a4[i], a5[i], a6[i])
    return gufunc_kernel


def _gu8(f):
    def gufunc_kernel(a0, a1, a2, a3, a4, a5, a6, a7):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i], a3[i], a4[i], a5[i], a6[i], a7[i])
    return gufunc_kernel


def _gu9(f):
    def gufunc_kernel(a0, a1, a2, a3, a4, a5, a6, a7, a8):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i], a3[i], a4[i], a5[i], a6[i], a7[i], a8[i])
    return gufunc_kernel


def _gu10(f):
    def gufunc_kernel(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
        for i in range(grid(1), a0.shape[0], gridsize(1)):
            f(a0[i], a1[i], a2[i], a3[i], a4[i], a5[i], a6[i], a7[i], a8[i], a9[i])
    return gufunc_kernel


_GUVECTORIZE = {1: _gu1, 2: _gu2, 3: _gu3, 4: _gu4, 5: _gu5, 6: _gu6, 7: _gu7, 8: _gu8, 9: _gu9, 10: _gu10}


# ---- cuda.reduce ---------------------------------------------------------------------------------
def reduce_kernel(f, name="reduce"):
    """A kernel ``k(x, partials, init, use_init)``: block b writes the reduction (by the binary
    device function ``f``) of its grid-stride share of ``x`` to ``partials[b]``; with ``use_init``,
    block 0 combines ``init`` into its result as ``f(result, init)`` (Numba's order). The launch
    must have at most ``x.size`` threads, so every thread owns at least one element."""

    def reduce_kernel(x, partials, init, use_init):
        i = grid(1)
        acc = x[i]
        for j in range(i + gridsize(1), x.size, gridsize(1)):
            acc = f(acc, x[j])
        total = block_reduce(acc, f)
        if threadIdx.x == 0:
            if use_init and blockIdx.x == 0:
                total = f(total, init)
            partials[blockIdx.x] = partials.dtype(total)

    return jit(_named(reduce_kernel, f"reduce_{name}"))


# ---- device functions with a signature: cast the arguments and the result, as Numba does ----------
def cast_shim(f, restype, argtypes):
    """A Python function ``shim(a0, ...)`` returning ``restype(f(t0(a0), ...))`` for scalar types
    (Numba's type objects cast inside kernels); the kernel compiler inlines it in place of ``f``."""
    n = len(argtypes)
    if not 0 <= n <= MAX_SHIM_ARGS:
        raise ValueError(f"cast_shim: {n} arguments")
    return _SHIMS[n](f, restype, *argtypes)


def _shim0(f, r):
    def shim():
        return r(f())
    return shim


def _shim1(f, r, t0):
    def shim(a0):
        return r(f(t0(a0)))
    return shim


def _shim2(f, r, t0, t1):
    def shim(a0, a1):
        return r(f(t0(a0), t1(a1)))
    return shim


def _shim3(f, r, t0, t1, t2):
    def shim(a0, a1, a2):
        return r(f(t0(a0), t1(a1), t2(a2)))
    return shim


def _shim4(f, r, t0, t1, t2, t3):
    def shim(a0, a1, a2, a3):
        return r(f(t0(a0), t1(a1), t2(a2), t3(a3)))
    return shim


def _shim5(f, r, t0, t1, t2, t3, t4):
    def shim(a0, a1, a2, a3, a4):
        return r(f(t0(a0), t1(a1), t2(a2), t3(a3), t4(a4)))
    return shim


def _shim6(f, r, t0, t1, t2, t3, t4, t5):
    def shim(a0, a1, a2, a3, a4, a5):
        return r(f(t0(a0), t1(a1), t2(a2), t3(a3), t4(a4), t5(a5)))
    return shim


def _shim7(f, r, t0, t1, t2, t3, t4, t5, t6):
    def shim(a0, a1, a2, a3, a4, a5, a6):
        return r(f(t0(a0), t1(a1), t2(a2), t3(a3), t4(a4), t5(a5), t6(a6)))
    return shim


def _shim8(f, r, t0, t1, t2, t3, t4, t5, t6, t7):
    def shim(a0, a1, a2, a3, a4, a5, a6, a7):
        return r(f(t0(a0), t1(a1), t2(a2), t3(a3), t4(a4), t5(a5), t6(a6), t7(a7)))
    return shim


_SHIMS = {0: _shim0, 1: _shim1, 2: _shim2, 3: _shim3, 4: _shim4, 5: _shim5, 6: _shim6, 7: _shim7, 8: _shim8}
