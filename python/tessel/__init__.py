"""tessel: GPU arrays, fused kernels and zero-copy interop.

The namespace follows the Python Array API standard (2025.12), with NumPy's names beside it;
`import tessel as ts` works on machines without a GPU or driver (the CPU backend runs everything
but user CUDA kernels). The hot paths (operators, elementwise functions, reductions, creation) are
C++ functions of the _tessel extension; the functions written in Python are in _functions/, one
module per category, and each is imported here by name (where a Python function has the name of
a C++ one, the Python one gives it the standard's signature and replaces it in the namespace).
"""
import math as _math

from . import _cuda_libs
_cuda_libs.prepare()  # a wheel: CUDA 13's libraries from NVIDIA's wheels (else the toolkit), before _tessel

from . import _tessel
from ._tessel import *  # noqa: F401,F403  (Array, dtypes, the C++ functions, errors, ...)
from ._tessel import Array, Device, Stream, dtype  # noqa: F401
from ._tessel import _dlpack_exchange, _dlpack_fast_path_hits  # noqa: F401  (DLPack C exchange switch, counter)

from ._functions.creation import (  # noqa: F401
    arange, array, asarray, diag, linspace, meshgrid, tril, tril_indices, triu, triu_indices)
from ._functions.dtypes import astype, can_cast, finfo, iinfo, isdtype, result_type  # noqa: F401
from ._functions.inspection import __array_namespace_info__  # noqa: F401
from ._functions.interop import asnumpy, get_array_module, to_numpy  # noqa: F401
from ._functions.linear_algebra import cross, dot, einsum, outer, trace  # noqa: F401
from ._functions.logic import all, allclose, any, array_equal, isclose  # noqa: F401
from ._functions.manipulation import (  # noqa: F401
    array_split, atleast_1d, atleast_2d, atleast_3d, broadcast_arrays, broadcast_shapes, concatenate, expand_dims,
    flip, hstack, moveaxis, pad, ravel, repeat, roll, split, tile, transpose, unstack, vstack)
from ._functions.math import (  # noqa: F401
    around, clip, convolve, correlate, diff, float_power, gradient, interp, nan_to_num)
from ._functions.searching import argwhere, searchsorted  # noqa: F401
from ._functions.sets import isin, unique_all, unique_counts, unique_inverse, unique_values  # noqa: F401
from ._functions.sorting import argsort, sort  # noqa: F401
from ._functions.statistics import (  # noqa: F401
    amax, amin, average, bincount, count_nonzero, cumulative_prod, cumulative_sum, histogram, mean, median,
    percentile, prod, ptp, quantile, std, sum, var)

from . import _dtype_protocol
from . import _numpy_protocols
from ._fuse import fuse  # noqa: F401
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

e = _math.e
pi = _math.pi
inf = float("inf")
nan = float("nan")
newaxis = None

# The Array API requires bool to be spelled tessel.bool; it is also the builtin's name, so the
# attribute is set explicitly (the star import above already did, this documents it).
bool = getattr(_tessel, "bool")  # noqa: A001

ndarray = Array  # NumPy's and CuPy's name for the array type (isinstance(x, ts.ndarray))


def _namespace(self, /, *, api_version=None):
    if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12"):
        raise ValueError(f"tessel implements the Array API 2025.12, not {api_version!r}")
    import tessel

    return tessel


Array.__array_namespace__ = _namespace
_dtype_protocol.install()
# NumPy's __array_ufunc__ / __array_function__: np.exp(x), np.sum(x), np.concatenate([x, y]) run on
# x's device and return tessel arrays (np_array + ts_array too); NumPy's ndarray methods.
_numpy_protocols.install()


def _dtype_from_name(name):
    """Unpickles a dtype (dtype.__reduce__ names this module-level function)."""
    return _tessel._dtype_from_name(name)


# tessel.kernel (the Python kernel compiler, and NumPy with it) loads on first use: `ts.jit`,
# `ts.kernel`, `import tessel.kernel`. `import tessel` stays quick.
_LAZY = ("jit", "kernel")


def __getattr__(name):
    if name in _LAZY:
        import importlib

        kernel = importlib.import_module(__name__ + ".kernel")  # binds tessel.kernel
        globals()["jit"] = kernel.jit
        return kernel if name == "kernel" else kernel.jit
    raise AttributeError(f"module 'tessel' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
