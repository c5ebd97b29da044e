"""Type stubs of tessel.fft (Array API fft extension plus NumPy's fft2 family)."""
from typing import Any, Literal, Optional, Sequence, Union
from . import Array, Device, dtype

Norm = Literal["backward", "ortho", "forward"]
DeviceLike = Union[Device, str, None]

def fft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The 1-D discrete Fourier transform along ``axis`` (``n`` pads or crops; ``norm``: "backward", "ortho" or "forward")."""
def ifft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The inverse of :func:`fft`."""
def rfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The transform of a real input: ``n // 2 + 1`` complex outputs along ``axis``."""
def irfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The inverse of :func:`rfft`: ``n`` real outputs (default ``2 * (m - 1)``)."""
def hfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The transform of a signal with Hermitian symmetry (a real spectrum): irfft(conj(x)) with the norm swapped."""
def ihfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The inverse of :func:`hfft`: conj(rfft(x)) with the norm swapped."""
def fftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """The n-d transform over ``axes`` (all axes, or the last ``len(s)`` when only ``s`` is given)."""
def ifftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """The inverse of :func:`fftn`."""
def rfftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """The n-d transform of a real input (the last axis is the real one)."""
def irfftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """The inverse of :func:`rfftn`."""
def fft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """:func:`fftn` over the last two axes."""
def ifft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """:func:`ifftn` over the last two axes."""
def rfft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """:func:`rfftn` over the last two axes."""
def irfft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """:func:`irfftn` over the last two axes."""
def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: DeviceLike = None) -> Array:
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``."""
def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: DeviceLike = None) -> Array:
    """The sample frequencies of an ``n``-point :func:`rfft`: [0, 1, ..., n/2] / (d * n)."""
def fftshift(x: Any, /, *, axes: Union[int, Sequence[int], None] = None) -> Array:
    """Rolls ``axes`` (default: all) so that the zero frequency is in the middle."""
def ifftshift(x: Any, /, *, axes: Union[int, Sequence[int], None] = None) -> Array:
    """The inverse of :func:`fftshift`."""

class Plan:
    """A stateful FFT plan for one layout (shape, strides, dtype, device)."""
    layout: str
    transform: Literal["fft", "ifft", "rfft", "irfft"]
    def __init__(self, x: Array, transform: Literal["fft", "ifft", "rfft", "irfft"] = "fft", *,
                 s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> None: ...
    def execute(self, x: Any) -> Array:
        """Transforms ``x``, which must have the planned layout (ValueError naming both layouts otherwise)."""
    def __call__(self, x: Any) -> Array:
        """The same as :meth:`execute`."""

def plan_cache_info(device: DeviceLike = None) -> dict:
    """The cuFFT plan cache of a device: plans, limits, workspace bytes, hits, misses, evictions."""
def set_plan_cache_limits(max_plans: int, max_workspace_bytes: int, device: DeviceLike = None) -> None:
    """Bounds the cuFFT plan cache of a device (least recently used plans are dropped first)."""
def clear_plan_cache(device: DeviceLike = None) -> None:
    """Destroys the cached cuFFT plans of a device."""
