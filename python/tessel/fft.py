"""The Array API fft extension (plus NumPy's fft2 family): ``tessel.fft``.

Every function here is the C++ binding itself (tessel._tessel._fft), not a Python wrapper, so
``ts.fft.fft(x)`` costs one native call. Semantics are numpy.fft's: ``n`` / ``s`` pad with zeros
or crop, ``axis`` / ``axes`` count from the end when negative, ``norm`` is "backward", "ortho" or
"forward". Complex transforms compute in complex64/complex128, real ones read or write
float32/float64; integers are cast as NumPy does.
"""
from __future__ import annotations

from ._tessel import _fft as _native

# The transforms and their helpers are the rows of include/tessel/ops/fft_list.hpp, in row order;
# the plan and the plan cache controls are bound by hand.
__all__ = [*_native._fft_functions, "Plan", "plan_cache_info", "set_plan_cache_limits", "clear_plan_cache"]

globals().update({name: getattr(_native, name) for name in _native._fft_functions})
Plan = _native.Plan
plan_cache_info = _native.plan_cache_info
set_plan_cache_limits = _native.set_plan_cache_limits
clear_plan_cache = _native.clear_plan_cache
