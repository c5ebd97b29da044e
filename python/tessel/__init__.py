"""tessel: GPU arrays, fused kernels and zero-copy interop.

The namespace follows the Python Array API standard (2025.12); `import tessel as ts` works on
machines without a GPU or driver (the CPU backend runs everything but user CUDA kernels).
The hot paths (operators, elementwise functions, reductions) are C++ functions bound with
nanobind in the _tessel extension; this file adds the parts that are not on a hot path.
"""
from __future__ import annotations

import math as _math

from . import _tessel
from ._tessel import *  # noqa: F401,F403  (Array, dtypes, elementwise functions, errors, ...)
from ._tessel import Array, Device, Stream, dtype  # noqa: F401
from ._tessel import _dlpack_exchange, _dlpack_fast_path_hits  # noqa: F401  (DLPack C exchange switch, counter)
from ._array_api import *  # noqa: F401,F403
from ._array_api import __all__ as _array_api_all
from ._array_api import __array_namespace_info__  # noqa: F401
from ._array_api_functions import *  # noqa: F401,F403  (Array API signatures over the C++ primitives)
from ._array_api_functions import __all__ as _array_api_functions_all  # noqa: F401
from . import _dtype_protocol
from . import _numpy_protocols
from ._fuse import fuse  # noqa: F401
from . import kernel  # noqa: F401  (docs/guide/kernels.rst: Python kernels)
from .kernel import jit  # noqa: F401
from . import _array_api
from . import cuda  # noqa: F401
from . import random  # noqa: F401
from . import fft  # noqa: F401  (the Array API fft extension)
from . import linalg  # noqa: F401  (the Array API linalg extension)
from .linalg import matrix_transpose, tensordot  # noqa: F401  (also in the main namespace)
from . import sim  # noqa: F401
from . import distributed  # noqa: F401  (docs/guide/distributed.rst)
from ._profile import profile, Profile, ProfileRange, benchmark, BenchmarkResult, set_checks, checks  # noqa: F401  (docs/guide/profiling.rst)

__version__ = _tessel.version()
__array_api_version__ = "2025.12"
_dtype_protocol.install()

e = _math.e
pi = _math.pi
inf = float("inf")
nan = float("nan")
newaxis = None

# The Array API requires bool to be spelled tessel.bool; it is also the builtin's name, so the
# attribute is set explicitly (the star import above already did, this documents it).
bool = getattr(_tessel, "bool")  # noqa: A001


def _namespace(self, /, *, api_version=None):
    if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12"):
        raise ValueError(f"tessel implements the Array API 2025.12, not {api_version!r}")
    import tessel

    return tessel


Array.__array_namespace__ = _namespace
# NumPy's __array_ufunc__ / __array_function__: np.exp(x), np.sum(x), np.concatenate([x, y]) run on
# x's device and return tessel arrays (np_array + ts_array too).
_numpy_protocols.install()
globals().update(_numpy_protocols.namespace_functions())  # ts.concatenate, ts.transpose, ... (NumPy's names)


ndarray = Array  # NumPy's and CuPy's name for the array type (isinstance(x, ts.ndarray))


def get_array_module(*args):
    """CuPy's get_array_module: tessel when any argument is a tessel array, else NumPy, for code
    that runs on either."""
    for a in args:  # (the namespace's own `any` shadows the builtin here)
        if isinstance(a, Array):
            import tessel

            return tessel
    import numpy as _np

    return _np


def asnumpy(a, /):
    """A NumPy copy of a on the host (CuPy's name; ``np.asarray(a)`` does the same)."""
    import numpy as _np

    return _np.asarray(a)


def array(obj, /, dtype=None, *, copy=True, device=None):
    """NumPy's and CuPy's constructor: :func:`asarray` that copies unless ``copy`` is False or None."""
    return asarray(obj, dtype=dtype, copy=copy, device=device)


Array.__str__ = lambda self: _array_api._str(self)


def _dtype_from_name(name):
    """Unpickles a dtype (dtype.__reduce__ names this module-level function)."""
    return _tessel._dtype_from_name(name)
