"""Numba's API over tessel: ``import tessel.numba as numba`` in place of ``import numba``.

- ``tessel.numba.cuda``: Numba's CUDA API (device arrays, streams, events, devices, random,
  ``cuda.jit``, ``cuda.reduce``; the intrinsics are tessel's kernel compiler's, ``tessel.kernel``).
- ``vectorize`` and ``guvectorize`` (targets "cuda", "cpu", "parallel"), ``jit``/``njit``
  (device functions that also run as plain Python on the host), over tessel kernels.
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
from . import config  # noqa: F401  (numba.config, also numba.cuda.config)
from . import core  # noqa: F401  (numba.core.errors' warnings, numba.core.config)
from .core import errors  # noqa: F401  (numba.errors is numba.core.errors)
from .core.errors import (  # noqa: F401  (numba.NumbaPerformanceWarning, numba.TypingError, ...)
    NumbaWarning, NumbaPerformanceWarning, NumbaDeprecationWarning, NumbaPendingDeprecationWarning,
    NumbaParallelSafetyWarning, NumbaTypeSafetyWarning, NumbaExperimentalFeatureWarning, NumbaInvalidConfigWarning,
    NumbaPedanticWarning, NumbaIRAssumptionWarning, NumbaDebugInfoWarning, NumbaSystemWarning, NumbaError,
    TypingError, UnsupportedError, LoweringError, NumbaValueError, NumbaTypeError, NumbaAttributeError,
    NumbaIndexError, NumbaNotImplementedError, NumbaRuntimeError, CompilerError, InternalError,
)
from . import _cuda as cuda  # noqa: F401
# numba-cuda's import hook (_numba_cuda_redirector) takes every module name containing "numba.cuda"
# for its own and recurses without end on ours, so the package lives as tessel.numba._cuda and its
# modules are put in sys.modules under their public names (tessel.numba.cuda, ...), where the import
# system finds them before asking any hook.
from ._cuda import (_api, _devices, _reduction, _streams, _tablemodule, _templates, _unsupported,  # noqa: F401,E402
                    cudadrv, devicearray, dispatcher, fp16, libdevice, random)
from ._cuda.cudadrv import devicearray as _cudadrv_devicearray  # noqa: F401,E402
import sys as _sys  # noqa: E402
import importlib.machinery as _machinery  # noqa: E402

for _name, _module in list(_sys.modules.items()):
    if _name == __name__ + "._cuda" or _name.startswith(__name__ + "._cuda."):
        _sys.modules[_name.replace("._cuda", ".cuda", 1)] = _module
for _pkg in ("cuda", "_cuda"):   # numba.cuda.types and numba.cuda.config are numba's
    _sys.modules[f"{__name__}.{_pkg}.types"] = types
    _sys.modules[f"{__name__}.{_pkg}.config"] = config
cuda.config = config
_sys.modules[__name__ + ".errors"] = errors

# Numba's modules that tessel.numba does not have (numba.extending, numba.core.*,
# numba.cuda.extending, ...): importing one raises a ModuleNotFoundError that names it and says why.
_MODULE_REASONS = {
    "extending": "Numba's extension API (typeof_impl, type_callable, models, lower_builtin, overload, "
                 "intrinsic, box/unbox) is not supported; tessel kernels take numbers, arrays, tuples and "
                 "record arrays",
    "core": "Numba's compiler internals (numba.core) are not part of tessel.numba (numba.core.errors, "
            "numba.core.types and numba.core.config are)",
    "cuda.extending": "Numba's extension API (typeof_impl, type_callable, models, lower_builtin, overload, "
                      "intrinsic) is not supported; tessel kernels take numbers, arrays, tuples and record arrays",
    "cuda.cudadecl": "Numba's typing registries are not part of tessel.numba",
    "cuda.cudaimpl": "Numba's lowering registries are not part of tessel.numba",
    "cuda.typing": "Numba's typing registries are not part of tessel.numba",
    "cuda.cgutils": "Numba's LLVM code generation is not part of tessel.numba",
    "cuda.testing": "Numba's test support is not part of tessel.numba",
    "cuda.simulator": "tessel's CPU backend replaces Numba's simulator (cuda.select_device('cpu'))",
}


class _UnsupportedModules:
    """The first finder of sys.meta_path for tessel.numba's modules: finds those that exist, and
    raises a clear error for the rest. It goes first because numba-cuda's redirecting finder
    recurses without end on a missing module whose name contains "numba.cuda"."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        prefix = __name__ + "."
        if not fullname.startswith(prefix):
            return None
        spec = _machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
        rest = fullname[len(prefix):].replace("_cuda", "cuda", 1)
        reason = "it is not a part of Numba's API that tessel.numba provides (see docs/guide/numba.rst)"
        parts = rest.split(".")
        for k in range(len(parts), 0, -1):
            if ".".join(parts[:k]) in _MODULE_REASONS:
                reason = _MODULE_REASONS[".".join(parts[:k])]
                break
        # name=None: `from tessel.numba import extending` reports this error, not "cannot import name"
        raise ModuleNotFoundError(f"tessel.numba.{rest} is not supported: {reason}", name=None)


if not any(isinstance(f, _UnsupportedModules) or f is _UnsupportedModules for f in _sys.meta_path):
    _sys.meta_path.insert(0, _UnsupportedModules)

__version__ = "0.1.0+tessel"

_CPU_COMPILER = "Numba's CPU compiler is not part of tessel.numba (cuda.jit kernels run on the CPU backend)"
_REASONS = {
    "stencil": _CPU_COMPILER, "cfunc": _CPU_COMPILER, "generated_jit": _CPU_COMPILER, "objmode": _CPU_COMPILER,
    "jitclass": _CPU_COMPILER, "experimental": _CPU_COMPILER,
}
# Names defined by tessel.numba's modules that import the kernel compiler, imported when first used.
# Names of the kernel compiler (tessel.kernel) that Numba has at the top level.
_KERNEL_NAMES = frozenset({"literal_unroll"})
_LAYER = {"vectorize": "_ufuncs", "guvectorize": "_ufuncs", "jit": "_cpu", "njit": "_cpu", "prange": "_cpu"}


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'tessel.numba' has no attribute {name!r}")
    from ._cuda import _unsupported

    if name in _KERNEL_NAMES:
        try:
            from tessel import kernel as _kernel
        except ImportError as failure:
            raise _unsupported.error(name, f"tessel's kernel compiler (tessel.kernel) cannot be imported: {failure}",
                                     prefix="tessel.numba") from None
        value = getattr(_kernel, name)
        globals()[name] = value
        return value
    if name in _LAYER:
        import importlib

        try:
            value = getattr(importlib.import_module(f"tessel.numba.{_LAYER[name]}"), name)
        except ImportError as failure:
            raise _unsupported.error(name, f"tessel's kernel compiler (tessel.kernel) cannot be imported: {failure}",
                                     prefix="tessel.numba") from None
        globals()[name] = value
        return value

    if name in _MODULE_REASONS:
        raise _unsupported.error(name, _MODULE_REASONS[name], prefix="tessel.numba")
    reason = _REASONS.get(name, "it is not a part of Numba's API that tessel.numba provides (see docs/guide/numba.rst)")
    raise _unsupported.error(name, reason, prefix="tessel.numba")
