"""CUDA helpers: streams, memory statistics, the allocator cache and pinned host memory."""
from __future__ import annotations

import contextlib

from . import _tessel
from ._tessel import Stream

__all__ = [
    "is_available", "device_count", "synchronize", "current_stream", "stream", "ExternalStream",
    "memory_stats", "empty_cache", "reset_peak_memory_stats", "set_memory_fraction",
    "pinned_empty", "pinned_memory_stats", "host_memory_stats", "Stream",
]


def is_available():
    return _tessel.cuda_available()


def device_count():
    return _tessel.device_count()


def synchronize(device=None):
    """The host waits for all work on the device (releases the GIL while waiting)."""
    _tessel.synchronize(device)


def current_stream(device=None):
    return _tessel.current_stream(device)


@contextlib.contextmanager
def stream(s):
    """with ts.cuda.stream(s): ... runs tessel work on s; the previous current stream of s's
    device comes back on exit. Accepts a tessel.Stream, a torch.cuda.Stream or a CuPy stream."""
    if s is None:
        yield None
        return
    if not isinstance(s, Stream):
        if hasattr(s, "cuda_stream"):  # torch.cuda.Stream
            s = ExternalStream(s.cuda_stream, getattr(s, "device", None))
        elif hasattr(s, "ptr"):  # cupy.cuda.Stream
            s = ExternalStream(s.ptr)
        else:
            raise TypeError(f"ts.cuda.stream: expected a tessel.Stream, torch.cuda.Stream or CuPy stream, got {type(s).__name__}")
    if s.device.type != "cuda":
        yield s
        return
    previous = _tessel.current_stream(s.device)
    _tessel.set_current_stream(s)
    try:
        yield s
    finally:
        _tessel.set_current_stream(previous)


def ExternalStream(ptr, device=None):
    """Adopts a stream created elsewhere by its handle (torch.cuda.Stream.cuda_stream, CuPy's
    Stream.ptr). Not owned: its creator must keep it alive while tessel uses it."""
    return Stream.from_handle(int(ptr), device)


def memory_stats(device=None):
    """The device caching allocator's statistics as a dict (DeviceError without CUDA)."""
    return _tessel._memory_stats(device)


def host_memory_stats():
    return _tessel._host_memory_stats()


def pinned_memory_stats():
    return _tessel._pinned_memory_stats()


def empty_cache(device=None):
    """Returns the cached, unused device blocks to the driver (no-op without CUDA)."""
    _tessel._empty_cache(device)


def reset_peak_memory_stats(device=None):
    _tessel._reset_peak_stats(device)


def set_memory_fraction(fraction, device=None):
    _tessel._set_memory_fraction(fraction, device)


def pinned_empty(shape, dtype="float32", *, numpy=True):
    """Page-locked host memory from tessel's pinned pool, as a NumPy array (numpy=True, zero-copy
    through DLPack) or a tessel CPU array. Host <-> device copies from it are asynchronous."""
    array = _tessel._pinned_empty(shape, dtype)
    if not numpy:
        return array
    import numpy as np

    return np.from_dlpack(array)
