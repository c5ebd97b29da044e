"""Numba's CUDA API over tessel: ``from tessel.numba import cuda`` in place of ``from numba import cuda``.

The host side: device arrays (``to_device``, ``device_array``, ...; the device array type wraps
a tessel array), streams, events, devices and ``cuda.random``. The kernel side: ``cuda.jit``
(``dispatcher``: Numba's dispatcher over a tessel.kernel.Kernel), ``cuda.reduce``
(``_reduction``), and the intrinsics (``cuda.grid``, ``cuda.shared``, ``cuda.atomic``, ...),
which are tessel.kernel's; all resolved when first used. Kernels run on CUDA where tessel has a
GPU, else on the CPU backend; ``cuda.select_device("cpu")`` picks the CPU backend on a GPU
machine. See docs/guide/numba.rst.

A name of Numba's CUDA API that tessel does not provide raises
``NotImplementedError("tessel.numba.cuda.<name> is not supported: <why>")`` (the error is also
an AttributeError, so ``hasattr`` stays usable).
"""
from __future__ import annotations

from .. import types  # noqa: F401  (numba.cuda.types)
from ..types import (  # noqa: F401  (numba.cuda.float32, ...)
    boolean, bool_, b1, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64,
    complex64, complex128, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8, c8, c16, intp, uintp, void, none,
    float_, double, from_dtype, typeof,
)
from . import devicearray  # noqa: F401
from . import cudadrv  # noqa: F401
from ._api import *  # noqa: F401,F403
from ._api import __all__ as _api_all
from ._streams import as_tessel_stream  # noqa: F401  (for the kernel launcher)
from ._devices import target_device  # noqa: F401  (for the kernel launcher: the selected tessel device)
from ._unsupported import UnsupportedError
from . import _unsupported
from . import random  # noqa: F401
from . import fp16, libdevice  # noqa: F401  (their functions resolve from tessel.kernel when used)
from .devicearray import DeviceNDArray  # noqa: F401

__all__ = list(_api_all) + ["types", "devicearray", "random", "fp16", "libdevice", "DeviceNDArray",
                            "UnsupportedError", "as_tessel_stream", "target_device"]


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'tessel.numba.cuda' has no attribute {name!r}")
    if name in _unsupported.COMPILER_NAMES or name in _unsupported.LAYER_NAMES:
        value = (_unsupported.compiler_name if name in _unsupported.COMPILER_NAMES else _unsupported.layer_name)(name)
        globals()[name] = value
        return value
    reason = _unsupported.UNSUPPORTED.get(name)
    if reason is not None:
        raise _unsupported.error(name, reason)
    raise _unsupported.error(name, "it is not a part of Numba's CUDA API that tessel.numba provides "
                                   "(see docs/guide/numba.rst)")


def __dir__():
    return sorted(set(globals()) | _unsupported.COMPILER_NAMES | set(_unsupported.LAYER_NAMES))
