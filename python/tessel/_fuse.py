"""ts.fuse: one elementwise kernel from a Python function of arrays.

The function is traced once per (number of arguments, Python scalar constants) with symbolic
arrays (tessel.Sym) that support the operators and the tessel elementwise functions; the trace
becomes a tessel::FusedKernel, whose compiled code is cached per input dtypes on the C++ side.
"""
from __future__ import annotations

import functools

from . import _tessel
from ._tessel import Array


class _Fused:
    def __init__(self, func):
        self._func = func
        self._kernels = {}
        self._array_kernels = {}  # argument count -> the kernel when every argument is an array
        functools.update_wrapper(self, func)

    def _kernel(self, args):
        for i, a in enumerate(args):  # before the cache key, which hashes the constants
            if not isinstance(a, (Array, bool, int, float, complex)):
                raise TypeError(f"fuse: argument {i} must be a tessel array or a Python scalar, got {type(a).__name__}")
        arrays = [i for i, a in enumerate(args) if isinstance(a, Array)]
        constants = tuple((i, type(a).__name__, a) for i, a in enumerate(args) if not isinstance(a, Array))
        key = (len(args), constants)
        kernel = self._kernels.get(key)
        if kernel is None:
            symbols = list(args)
            for position, index in enumerate(arrays):
                symbols[index] = _tessel._sym_input(position)
            root = self._func(*symbols)
            if isinstance(root, tuple):
                # Several outputs: one kernel, a tuple of arrays of the inputs' broadcast shape.
                for j, r in enumerate(root):
                    if not isinstance(r, _tessel.Sym):
                        raise TypeError(f"fuse: output {j} of the function must be an elementwise expression of "
                                        f"its array arguments, got {type(r).__name__}")
                if not root:
                    raise ValueError("fuse: the function returned an empty tuple")
            elif not isinstance(root, _tessel.Sym):
                raise TypeError("fuse: the function must return an elementwise expression of its array arguments "
                                "(or a tuple of them)")
            kernel = _tessel.FusedKernel(root, len(arrays))
            self._kernels[key] = kernel
            if not constants:
                self._array_kernels[len(args)] = kernel
        return kernel, [args[i] for i in arrays]

    def __call__(self, *args):
        # The common call, all arguments tessel arrays, goes straight to the C++ kernel.
        kernel = self._array_kernels.get(len(args))
        if kernel is not None:
            result = kernel._call_if_arrays(args)
            if result is not None:
                return result
        kernel, arrays = self._kernel(args)
        if not arrays:
            raise TypeError("fuse: at least one argument must be a tessel array")
        return kernel(arrays)

    def source(self, *args):
        """The generated CUDA source for these arguments (for inspection)."""
        kernel, arrays = self._kernel(args)
        return kernel.source([a.dtype for a in arrays])


def fuse(func=None, *, kernel_name=None):
    """Decorator: @ts.fuse def f(x, y): return ts.exp(x) * y + 1 -> one kernel per call.

    A function returning a tuple of expressions gives a tuple of arrays, computed by one kernel:
    each output has the broadcast shape of all the array arguments and its own dtype."""
    if func is None:
        return lambda f: _Fused(f)
    return _Fused(func)
