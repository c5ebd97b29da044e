"""Numba's Stream and Event over tessel.Stream and tessel's events.

``stream=0`` (or None) anywhere means the default stream: tessel's current stream of the device,
which is the legacy default stream unless a ``with stream:`` block (or ``ts.cuda.stream``) made
another one current. On the CPU backend every stream is the CPU stream.
"""
from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import warnings

import tessel as ts
from tessel import _tessel

__all__ = ["Stream", "Event", "as_tessel_stream", "on_stream", "event_elapsed_time"]

# CUDA's special stream handles (cudaStreamLegacy, cudaStreamPerThread).
_LEGACY = 1
_PER_THREAD = 2


class _Handle(int):
    """A stream handle: an int (``int(stream.handle)``) that also has ctypes' ``.value``
    (None for the null stream), so old and new Numba spellings both work."""

    @property
    def value(self):
        return int(self) or None


def _target_device():
    from . import _devices

    return _devices.target_device()


def as_tessel_stream(stream, device=None):
    """The tessel.Stream for a Numba-style stream argument.

    0, None or False: the current stream of ``device`` (default: the selected device); a
    :class:`Stream` of this module: its tessel stream; a tessel.Stream: itself; a PyTorch or CuPy
    stream, or an object with ``__cuda_stream__``: adopted (not owned)."""
    if stream is None or stream is False or (isinstance(stream, int) and not isinstance(stream, _Handle) and stream == 0):
        device = device if device is not None else _target_device()
        return _tessel.current_stream(device)
    if isinstance(stream, Stream):
        return stream.tessel_stream
    if isinstance(stream, ts.Stream):
        return stream
    inner = getattr(stream, "__tessel_stream__", None)
    if isinstance(inner, ts.Stream):
        return inner
    device = device if device is not None else _target_device()
    if device.type != "cuda":
        return ts.Stream.cpu()
    if hasattr(stream, "__cuda_stream__"):
        _, handle = stream.__cuda_stream__()
        return ts.cuda.ExternalStream(handle, device)
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        return ts.cuda.ExternalStream(stream.cuda_stream, getattr(stream, "device", device))
    if hasattr(stream, "ptr"):  # cupy.cuda.Stream
        return ts.cuda.ExternalStream(stream.ptr, device)
    if isinstance(stream, int):
        return ts.cuda.ExternalStream(int(stream), device)
    raise TypeError(f"tessel.numba.cuda: expected a stream (cuda.stream(), 0, a tessel.Stream), got "
                    f"{type(stream).__name__}")


@contextlib.contextmanager
def on_stream(stream, device=None):
    """Runs the block's tessel work on ``stream`` (nothing changes for 0/None)."""
    if stream is None or stream is False or (isinstance(stream, int) and not isinstance(stream, Stream) and stream == 0):
        yield None
        return
    s = as_tessel_stream(stream, device)
    if device is not None and s.device != device:
        if s.device.type == "cpu" or device.type == "cpu":  # CPU arrays ignore CUDA streams and vice versa
            yield None
            return
    with ts.cuda.stream(s):
        yield s


class Stream:
    """Numba's CUDA stream, over a tessel.Stream (``stream.tessel_stream``).

    ``with stream:`` makes it tessel's current stream of its device for the block, so tessel ops
    and kernel launches without a stream argument run on it."""

    def __init__(self, tessel_stream, external=False, kind=None):
        if not isinstance(tessel_stream, ts.Stream):
            raise TypeError("Stream: make streams with cuda.stream(), cuda.default_stream() or cuda.external_stream(ptr)")
        self.tessel_stream = tessel_stream
        self.__tessel_stream__ = tessel_stream
        self.external = external
        self._kind = kind  # "default", "legacy", "per_thread" or None
        self._contexts = []
        self._lock = threading.Lock()
        self._callbacks = None  # the queue of the callback thread, made on first add_callback

    @property
    def handle(self):
        return _Handle(self.tessel_stream.handle)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"'Stream' object has no attribute {name!r}")
        from ._unsupported import error

        raise error(f"Stream.{name}", "not a part of Numba's Stream API that tessel provides")

    @property
    def device(self):
        """The tessel device of the stream (a tessel extension)."""
        return self.tessel_stream.device

    def __int__(self):
        return int(self.tessel_stream.handle)

    def __index__(self):
        return int(self.tessel_stream.handle)

    def __bool__(self):
        return True  # a Stream object is never "stream 0", even the default one

    def __cuda_stream__(self):
        return (0, int(self.tessel_stream.handle))

    def __eq__(self, other):
        return isinstance(other, Stream) and other.tessel_stream == self.tessel_stream

    def __hash__(self):
        return hash(self.tessel_stream)

    def __repr__(self):
        if self.tessel_stream.device.type == "cpu":
            return "<tessel CPU stream>"
        if self._kind == "default":
            return "<Default CUDA stream>"
        if self._kind == "legacy":
            return "<Legacy default CUDA stream>"
        if self._kind == "per_thread":
            return "<Per-thread default CUDA stream>"
        if self.external:
            return f"<External CUDA stream {int(self)}>"
        return f"<CUDA stream {int(self)}>"

    def synchronize(self):
        """The host waits for all the work queued on the stream (releases the GIL)."""
        self.tessel_stream.synchronize()

    def query(self):
        """True when the work queued on the stream has finished (a tessel extension)."""
        return self.tessel_stream.query()

    @contextlib.contextmanager
    def auto_synchronize(self):
        """``with stream.auto_synchronize():`` synchronizes the stream when the block ends."""
        yield self
        self.synchronize()

    def __enter__(self):
        context = ts.cuda.stream(self.tessel_stream)
        context.__enter__()
        self._contexts.append(context)
        return self

    def __exit__(self, exc_type, exc, tb):
        return self._contexts.pop().__exit__(exc_type, exc, tb)

    # ---- callbacks ----
    def add_callback(self, callback, arg=None):
        """Calls ``callback(stream, status, arg)`` (status 0) from a helper thread once the work
        queued on the stream so far has finished. Callbacks of one stream run in order. Unlike a
        CUDA host callback, later work on the stream does not wait for the callback."""
        marker = None
        if self.tessel_stream.device.type == "cuda":
            marker = _tessel._Event(self.tessel_stream.device, False)
            marker.record(self.tessel_stream)
        with self._lock:
            if self._callbacks is None:
                self._callbacks = queue.SimpleQueue()
                threading.Thread(target=_callback_worker, args=(self._callbacks,), daemon=True,
                                 name="tessel.numba stream callbacks").start()
            self._callbacks.put((self, marker, callback, arg))

    def async_done(self):
        """An asyncio future that resolves to the stream once the work queued so far has
        finished (call it inside a running event loop)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def resolve(status):
            if future.done():
                return
            if status == 0:
                future.set_result(self)
            else:
                future.set_exception(Exception(f"Stream error {status}"))

        self.add_callback(lambda stream, status, _: loop.call_soon_threadsafe(resolve, status))
        return future


def _callback_worker(items):
    while True:
        stream, marker, callback, arg = items.get()
        status = 0
        try:
            if marker is not None:
                marker.synchronize()
            else:
                stream.tessel_stream.synchronize()
        except Exception:  # a failed stream: report it to the callback as Numba does
            status = 1
        try:
            callback(stream, status, arg)
        except Exception as error:
            warnings.warn(f"Exception in stream callback: {error}")


class Event:
    """Numba's CUDA event (``cuda.event(timing=True)``), over tessel's events (a host
    timestamp on the CPU backend)."""

    def __init__(self, timing=True, device=None):
        self._device = device if device is not None else _target_device()
        self._timing = bool(timing)
        self._event = _tessel._Event(self._device, self._timing)
        self._stream = None  # the tessel stream of the last record

    @property
    def handle(self):
        from ._unsupported import error

        raise error("Event.handle", "tessel does not expose the CUevent")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"'Event' object has no attribute {name!r}")
        from ._unsupported import error

        raise error(f"Event.{name}", "not a part of Numba's Event API that tessel provides")

    def record(self, stream=0):
        """Marks the current point of ``stream`` (0: the default stream)."""
        s = as_tessel_stream(stream, self._device)
        self._event.record(s)
        self._stream = s

    def synchronize(self):
        """The host waits for the work before the last record."""
        self._event.synchronize()

    def query(self):
        """True when the work before the last record has finished.

        tessel's Python API has no event query, so this asks the recorded stream: it is True
        once everything queued on that stream so far has finished, which may be later than the
        event itself (never earlier)."""
        if self._stream is None or self._device.type != "cuda":
            return True
        return self._stream.query()

    def wait(self, stream=0):
        """Later work on ``stream`` waits for the event.

        tessel's Python API cannot make a stream wait for an event yet, so ``stream`` waits for
        all the work queued on the recorded stream so far (a superset of the event's work)."""
        if self._stream is None or self._device.type != "cuda":
            return
        target = as_tessel_stream(stream, self._device)
        if target != self._stream:
            target.wait_stream(self._stream)

    def elapsed_time(self, evtend):
        """Milliseconds from this event to ``evtend`` (both recorded, with timing)."""
        return event_elapsed_time(self, evtend)

    def __repr__(self):
        return f"<tessel.numba Event on {self._device}>"


def event_elapsed_time(evtstart, evtend):
    """Milliseconds between two recorded events (waits for ``evtend``)."""
    if not isinstance(evtstart, Event) or not isinstance(evtend, Event):
        raise TypeError("event_elapsed_time: expected two cuda.event() objects")
    return float(evtstart._event.elapsed_ms(evtend._event))
