"""``numba.jit`` / ``numba.njit`` for tessel.numba: functions usable in kernels and on the host.

tessel has no CPU compiler for plain Python functions. A function decorated with ``numba.jit``
or ``numba.njit`` becomes a tessel device function: kernels (``cuda.jit``, ``vectorize``, ...)
call it, compiled and inlined as Numba's CUDA target does with such functions (Numba's "CPU-GPU
compatibility"), and a call from the host runs the Python function itself, uncompiled: the same
results, at Python's speed. ``prange`` is ``range``.
"""
from __future__ import annotations

from . import types as nbtypes

__all__ = ["jit", "njit", "prange"]

_OPTIONS = {"nopython", "nogil", "parallel", "fastmath", "error_model", "inline", "forceobj", "looplift",
            "boundscheck", "cache", "locals", "no_cpython_wrapper", "no_cfunc_wrapper", "debug", "_nrt"}

prange = range


def jit(signature_or_function=None, **options):
    """``@numba.jit``, ``@numba.jit("float64(float64)")``, ``@numba.jit(nopython=True, ...)``: a
    device function for kernels that runs as plain Python when called on the host."""
    unknown = sorted(k for k in options if k not in _OPTIONS)
    if unknown:
        raise TypeError(f"tessel.numba.jit: unknown option(s) {', '.join(unknown)}")
    from ._cuda.dispatcher import CUDADeviceFunction, _lambda_as_function

    if isinstance(signature_or_function, list):
        signatures = signature_or_function
    elif isinstance(signature_or_function, (str, tuple, nbtypes.Signature)):
        signatures = [signature_or_function]
    else:
        signatures = None
    device_options = {"fastmath": bool(options.get("fastmath", False)), "inline": options.get("inline") == "always",
                      "numbers": "numba"}

    def wrap(func):
        func = getattr(func, "py_func", func)
        if not callable(func):
            raise TypeError(f"tessel.numba.jit decorates a function, got {func!r}")
        return CUDADeviceFunction(_lambda_as_function(func), device_options, signatures or ())

    if signatures is not None or signature_or_function is None:
        return wrap
    return wrap(signature_or_function)


def njit(*args, **options):
    """``numba.njit``: :func:`jit` (tessel has one mode)."""
    options.setdefault("nopython", True)
    return jit(*args, **options)
