"""The Array API fft extension (plus NumPy's fft2 family): ``tessel.fft``.

Every function here is the C++ binding itself (tessel._tessel._fft), not a Python wrapper, so
``ts.fft.fft(x)`` costs one native call. Semantics are numpy.fft's: ``n`` / ``s`` pad with zeros
or crop, ``axis`` / ``axes`` count from the end when negative, ``norm`` is "backward", "ortho" or
"forward". Complex transforms compute in complex64/complex128, real ones read or write
float32/float64; integers are cast as NumPy does.
"""
from __future__ import annotations

from ._tessel import _fft as _native

__all__ = [
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft",
    "fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2",
    "fftfreq", "rfftfreq", "fftshift", "ifftshift",
    "Plan", "plan_cache_info", "set_plan_cache_limits", "clear_plan_cache",
]

fft = _native.fft
ifft = _native.ifft
rfft = _native.rfft
irfft = _native.irfft
hfft = _native.hfft
ihfft = _native.ihfft
fftn = _native.fftn
ifftn = _native.ifftn
rfftn = _native.rfftn
irfftn = _native.irfftn
fft2 = _native.fft2
ifft2 = _native.ifft2
rfft2 = _native.rfft2
irfft2 = _native.irfft2
fftfreq = _native.fftfreq
rfftfreq = _native.rfftfreq
fftshift = _native.fftshift
ifftshift = _native.ifftshift
Plan = _native.Plan
plan_cache_info = _native.plan_cache_info
set_plan_cache_limits = _native.set_plan_cache_limits
clear_plan_cache = _native.clear_plan_cache
