"""Numba's API over tessel: ``import tessel.numba as numba`` in place of ``import numba``.

- ``tessel.numba.cuda``: Numba's CUDA API (device arrays, streams, events, devices, random;
  ``cuda.jit`` and the intrinsics come from tessel's kernel compiler).
- Numba's types: ``float32``, ``int64``, ..., ``float32[:, ::1]`` (array types), ``void(...)``
  (signatures), also as ``tessel.numba.types``; see :mod:`tessel.numba.types`.

A name of Numba's API that tessel.numba does not provide raises
``NotImplementedError("tessel.numba.<name> is not supported: <why>")``.
"""
from __future__ import annotations

from . import types  # noqa: F401
from .types import (  # noqa: F401
    Signature, from_dtype, typeof, parse_signature,
    boolean, bool_, b1, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64,
    complex64, complex128, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8, c8, c16, intp, uintp, intc, uintc,
    byte, char, uchar, short, ushort, int_, uint, long_, ulong, longlong, ulonglong, ssize_t, size_t,
    half, float_, double, cfloat, cdouble, void, none,
)
from . import cuda  # noqa: F401

__version__ = "0.1.0+tessel"

_CPU_COMPILER = "Numba's CPU compiler is not part of tessel.numba (cuda.jit kernels run on the CPU backend)"
_REASONS = {
    "jit": _CPU_COMPILER, "njit": _CPU_COMPILER, "prange": _CPU_COMPILER, "stencil": _CPU_COMPILER,
    "cfunc": _CPU_COMPILER, "generated_jit": _CPU_COMPILER, "objmode": _CPU_COMPILER, "jitclass": _CPU_COMPILER,
    "experimental": _CPU_COMPILER, "extending": "Numba's extension API is not supported",
    "vectorize": "not provided yet", "guvectorize": "not provided yet",
}


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'tessel.numba' has no attribute {name!r}")
    from .cuda import _unsupported

    reason = _REASONS.get(name, "it is not a part of Numba's API that tessel.numba provides (see docs/guide/numba.rst)")
    raise _unsupported.error(name, reason, prefix="tessel.numba")
