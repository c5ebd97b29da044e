"""Type stubs of tessel.fft (Array API fft extension plus NumPy's fft2 family)."""
from typing import Any, Literal, Optional, Sequence, Union
from . import Array, Device, dtype

Norm = Literal["backward", "ortho", "forward"]
DeviceLike = Union[Device, str, None]

# ---- transforms: generated from the fft rows by scripts/gen_op_stubs.py ----
def fft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """Computes the one-dimensional discrete Fourier transform along ``axis`` (``n`` pads with zeros
    or crops; ``norm``: "backward", "ortho" or "forward").
    """
def ifft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """Computes the one-dimensional inverse discrete Fourier transform: the inverse of :func:`fft`.
    """
def rfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """Computes the one-dimensional discrete Fourier transform for real-valued input: ``n // 2 + 1``
    complex outputs along ``axis``.
    """
def irfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """Computes the one-dimensional inverse of :func:`rfft` for complex-valued input: ``n`` real
    outputs (default ``2 * (m - 1)``).
    """
def hfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """Computes the one-dimensional discrete Fourier transform of a signal with Hermitian symmetry
    (a real spectrum): irfft(conj(x)) with the norm swapped.
    """
def ihfft(x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """Computes the one-dimensional inverse discrete Fourier transform of a signal with Hermitian
    symmetry: conj(rfft(x)) with the norm swapped.
    """
def fftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """Computes the n-dimensional discrete Fourier transform over ``axes`` (all axes, or the last
    ``len(s)`` when only ``s`` is given).
    """
def ifftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """Computes the n-dimensional inverse discrete Fourier transform: the inverse of :func:`fftn`.
    """
def rfftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """Computes the n-dimensional discrete Fourier transform for real-valued input (the last axis is
    the real one).
    """
def irfftn(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward") -> Array:
    """Computes the n-dimensional inverse of :func:`rfftn` for complex-valued input."""
def fft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """Computes the two-dimensional discrete Fourier transform: :func:`fftn` over the last two axes.
    """
def ifft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """Computes the two-dimensional inverse discrete Fourier transform: :func:`ifftn` over the last
    two axes.
    """
def rfft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """Computes the two-dimensional discrete Fourier transform for real-valued input: :func:`rfftn`
    over the last two axes.
    """
def irfft2(x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward") -> Array:
    """Computes the two-dimensional inverse of :func:`rfft2` for complex-valued input:
    :func:`irfftn` over the last two axes.
    """
def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: DeviceLike = None) -> Array:
    """Computes the discrete Fourier transform sample frequencies of an ``n``-point transform with
    sample spacing ``d``.
    """
def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: DeviceLike = None) -> Array:
    """Computes the discrete Fourier transform sample frequencies of an ``n``-point :func:`rfft`:
    [0, 1, ..., n/2] / (d * n).
    """
def fftshift(x: Any, /, *, axes: Union[int, Sequence[int], None] = None) -> Array:
    """Shifts the zero-frequency component to the center of the spectrum, over ``axes`` (default:
    all).
    """
def ifftshift(x: Any, /, *, axes: Union[int, Sequence[int], None] = None) -> Array:
    """Inverse of :func:`fftshift`."""
# ---- end of the generated transforms ----

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
