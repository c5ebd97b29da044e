"""Numba's ``cuda.libdevice`` for tessel: the CUDA math library's functions with Numba's names and
types (``exp``/``expf``, ``rsqrtf``, ``fast_expf``, ``sincosf`` returning a tuple, ``frexp``,
``popc``, ``fmaf``, ``saturatef``, ``isnand``/``isnanf``, the conversions and the arithmetic with
a rounding mode, ``fadd_rd``, ``double2int_rz``, ...), inside kernels on CUDA (the library's
functions and intrinsics) and on the CPU backend (the C++ library, with the FPU's rounding mode
set for ``_rd``/``_ru``/``_rz``). Arguments are converted to the function's types. The functions
are tessel's kernel intrinsics (``tessel.kernel.libdevice``); a name that is not provided raises
an error naming it."""
from ._tablemodule import resolver

_REASONS = {
    "nan": "Numba excludes it too (its argument is undocumented); use math.nan",
    "nanf": "Numba excludes it too (its argument is undocumented); use math.nan",
}
_ALIASES = {
    "isnan": "isnand (float64) or isnanf (float32)",
    "isinf": "isinfd (float64) or isinff (float32)",
    "isfinite": "isfinited (float64) or finitef (float32)",
    "signbit": "signbitd (float64) or signbitf (float32)",
}

__getattr__, __dir__ = resolver("libdevice", "libdevice", "LIBDEVICE", _REASONS, _ALIASES)
