"""CUDA helpers: streams, memory statistics, the allocator cache and pinned host memory."""
from __future__ import annotations

import contextlib

from . import _tessel
from ._tessel import Graph, Stream

__all__ = [
    "is_available", "device_count", "synchronize", "current_stream", "stream", "ExternalStream",
    "memory_stats", "empty_cache", "reset_peak_memory_stats", "set_memory_fraction",
    "pinned_empty", "pinned_memory_stats", "host_memory_stats", "Stream", "Graph", "graph",
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
        elif hasattr(s, "ptr"):  # cupy.cuda.Stream: on its own device, not necessarily the current one
            s = ExternalStream(s.ptr, _foreign_stream_device(s))
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


def _foreign_stream_device(s):
    """The tessel device of a CuPy stream (its .device_id), or None (tessel's default device)."""
    index = getattr(s, "device_id", None)
    return None if index is None or index < 0 else f"cuda:{int(index)}"


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


class graph:
    """with ts.cuda.graph() as g: ... captures the tessel work of the block into a CUDA graph
    (the capture records the work without running it); g.replay() launches it, reading the
    captured inputs' current contents, on the current stream (ordered with your other work). Arrays created in the block are the graph's outputs: their memory belongs
    to the graph and replays rewrite it.

    stream: the capture (and default replay) stream; None makes a new stream of `device`
    (the legacy default stream cannot be captured). reserve_bytes: device memory reserved
    beforehand for the allocations made during the capture. An op that cannot be captured (a
    host read such as print(x) or np.asarray(x), a synchronize) raises an error naming it and
    the capture is discarded. The with form needs CUDA: on the CPU use Graph.capture(fn), which
    runs fn and whose replay runs fn again.
    """

    def __init__(self, stream=None, *, device=None, reserve_bytes=64 << 20, capture_error_mode="thread_local"):
        self._args = (stream, device, int(reserve_bytes), capture_error_mode)
        self._capture = None
        self.graph = None

    def __enter__(self):
        if self._capture is not None or self.graph is not None:
            raise RuntimeError("ts.cuda.graph: this capture context was already used; make a new one")
        stream, device, reserve, mode = self._args
        self._capture = _tessel._GraphCapture(stream, device, reserve, mode)
        return self

    def __exit__(self, exc_type, exc, tb):
        capture, self._capture = self._capture, None
        if exc_type is not None:
            capture.abort()  # the capture is discarded; the block's exception propagates
            return False
        self.graph = capture.finish()
        return False

    def _defined(self):
        if self.graph is None:
            raise RuntimeError("ts.cuda.graph: the capture has not finished (replay after the with block)")
        return self.graph

    def replay(self, stream=None):
        """Launches the captured work (asynchronous) on `stream`, by default the device's current
        stream (ordered with the writes to the inputs and the reads of the outputs made there)."""
        self._defined().replay(stream)

    @property
    def stream(self):
        return self._defined().stream

    @property
    def num_nodes(self):
        return self._defined().num_nodes

    @property
    def held_bytes(self):
        return self._defined().held_bytes

    @property
    def num_replays(self):
        return self._defined().num_replays

    def __repr__(self):
        return repr(self.graph) if self.graph is not None else "<ts.cuda.graph (not captured)>"
