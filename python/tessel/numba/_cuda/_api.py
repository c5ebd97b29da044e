"""Numba's host-side CUDA API (arrays, streams, events, devices) over tessel."""
from __future__ import annotations

import contextlib
import math

import numpy as np

import tessel as ts
from tessel import _tessel

from . import _devices, _streams
from ._devices import CudaSupportError, MemoryInfo, target_device
from ._streams import Event, Stream, event_elapsed_time, on_stream
from .devicearray import DeviceNDArray, DeviceNDArrayBase, _c_order, _record_storage, storage_of

__all__ = [
    "to_device", "device_array", "device_array_like", "pinned_array", "pinned_array_like", "mapped_array",
    "mapped_array_like", "pinned", "defer_cleanup", "mapped", "as_cuda_array", "is_cuda_array",
    "from_cuda_array_interface",
    "synchronize", "stream", "default_stream", "legacy_default_stream", "per_thread_default_stream",
    "external_stream", "event", "event_elapsed_time", "select_device", "get_current_device", "list_devices",
    "gpus", "current_context", "close", "is_available", "detect", "cuda_error", "is_supported_version",
    "is_float16_supported", "is_bfloat16_supported", "is_fp8_supported", "profile_start", "profile_stop",
    "profiling", "runtime", "Stream", "Event", "MemoryInfo", "CudaSupportError", "backend",
]


# ---- shapes and dtypes ----
def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    result = []
    for n in shape:
        if not isinstance(n, (int, np.integer)):
            raise TypeError(f"shape elements must be integers, got {type(n).__name__}")
        result.append(int(n))
    return tuple(result)


def _dtype(dtype):
    dtype = np.dtype(getattr(dtype, "dtype", dtype) if not isinstance(dtype, (str, type, np.dtype)) else dtype)
    if dtype.names is None and dtype.kind not in "biufc":
        raise TypeError(f"tessel.numba.cuda: arrays of dtype {dtype} are not supported (numbers, booleans and "
                        "records of them are)")
    if dtype.names is None and dtype.byteorder == ">":
        dtype = dtype.newbyteorder("=")
    return dtype


def _empty(shape, dtype, order, strides, device):
    """A tessel array of this shape, NumPy dtype and layout (C, F, or the strides' axis order)."""
    itemsize = dtype.itemsize
    record = dtype if dtype.names is not None else None
    storage_dtype, count = _record_storage(dtype) if record is not None else (dtype, None)
    name = storage_dtype.name
    if record is not None:
        if order != "C" or (strides is not None and tuple(strides) != _c_strides(shape, itemsize)):
            raise NotImplementedError("tessel.numba.cuda: record arrays are C-contiguous only")
        return ts.empty(shape + (count,), dtype=name, device=device), record
    if strides is not None:
        strides = (int(strides),) if isinstance(strides, (int, np.integer)) else tuple(int(s) for s in strides)
        if len(strides) != len(shape):
            raise ValueError("strides not match ndim")
        if strides == _c_strides(shape, itemsize) or math.prod(shape) <= 1:
            order = "C"
        elif strides == _f_strides(shape, itemsize):
            order = "F"
        else:
            # Dense in another axis order (device_array_like of a transposed array): allocate in
            # that order and permute.
            perm = sorted(range(len(shape)), key=lambda i: strides[i], reverse=True)
            permuted = tuple(shape[i] for i in perm)
            if tuple(strides[i] for i in perm) != _c_strides(permuted, itemsize):
                raise NotImplementedError(f"tessel.numba.cuda: device arrays with strides {strides} that do not "
                                          "describe a dense array are not supported")
            base = ts.empty(permuted, dtype=name, device=device)
            inverse = [perm.index(i) for i in range(len(shape))]
            return base.transpose(*inverse), None
    if order == "F":
        return ts.empty(tuple(reversed(shape)), dtype=name, device=device).transpose(), None
    if order != "C":
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    return ts.empty(shape, dtype=name, device=device), None


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def _f_strides(shape, itemsize):
    return tuple(reversed(_c_strides(tuple(reversed(shape)), itemsize)))


# ---- device arrays ----
def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """An uninitialized device array on the selected device (NumPy's ``empty``)."""
    shape, dtype = _shape(shape), _dtype(dtype)
    device = target_device()
    with on_stream(stream, device):
        inner, record = _empty(shape, dtype, order, strides, device)
    return DeviceNDArray(_array=inner, _record=record, stream=stream)


def device_array_like(ary, stream=0):
    """``device_array`` with ``ary``'s shape and dtype, in its axis order when it is dense."""
    strides = _contiguous_strides_like(ary)
    order = "F" if _flag(ary, "F_CONTIGUOUS") and not _flag(ary, "C_CONTIGUOUS") else "C"
    return device_array(tuple(ary.shape), dtype=ary.dtype, strides=strides, order=order, stream=stream)


def _flag(ary, name):
    flags = getattr(ary, "flags", None)
    if flags is None:
        return name == "C_CONTIGUOUS"
    return bool(flags[name])


def _contiguous_strides_like(ary):
    if _flag(ary, "C_CONTIGUOUS") or _flag(ary, "F_CONTIGUOUS") or len(ary.shape) <= 1:
        return None
    order = sorted(enumerate(ary.strides), key=lambda item: item[1])
    strides = [0] * len(ary.shape)
    step = np.dtype(ary.dtype).itemsize
    for axis, _ in order:
        strides[axis] = step
        step *= ary.shape[axis]
    return tuple(strides)


def to_device(obj, stream=0, copy=True, to=None):
    """Copies a host array (or anything NumPy converts) to the selected device.

    A device array (a tessel.numba device array, a tessel array, an object with
    ``__cuda_array_interface__``) is returned as a device array without a copy. ``to=``: copy
    into that device array instead and return it. ``copy=False``: allocate without copying."""
    if to is not None:
        if copy:
            to.copy_to_device(obj, stream=stream)
        return to
    if isinstance(obj, DeviceNDArrayBase):
        return obj
    if storage_of(obj) is not None or hasattr(obj, "__cuda_array_interface__"):
        return as_cuda_array(obj)
    host = np.asarray(obj)
    core = _broadcast_core(host)
    if not (core.flags.c_contiguous or core.flags.f_contiguous):
        raise ValueError(_NON_CONTIGUOUS)
    if core.shape != host.shape:
        # a broadcast array (axes of stride 0): its core is copied, the device array repeats it
        # with the host array's zero strides, as Numba's
        d = to_device(core, stream=stream, copy=copy)
        inner = d.__tessel_array__
        shape = tuple(host.shape) + tuple(inner.shape)[host.ndim:]   # a record array's storage axis too
        return DeviceNDArray(_array=ts.broadcast_to(inner, shape), _record=d._record, stream=stream)
    dtype = _dtype(host.dtype)
    if host.dtype != dtype:
        host = host.astype(dtype)
    device = target_device()
    if not copy:
        return device_array_like(host, stream=stream)
    if dtype.names is not None:
        storage, count = _record_storage(dtype)
        flat = _c_order(host).view(storage).reshape(host.shape + (count,))
        with on_stream(stream, device):
            inner = ts.asarray(flat, device=device, copy=True)
        return DeviceNDArray(_array=inner, _record=dtype, stream=stream)
    fortran = host.ndim > 1 and host.flags.f_contiguous and not host.flags.c_contiguous
    source = host.T if fortran else _c_order(host)
    with on_stream(stream, device):
        inner = ts.asarray(source, device=device, copy=True)
    if fortran:
        inner = inner.transpose()
    if not stream:
        inner.wait()  # Numba's copy without a stream is synchronous
    return DeviceNDArray(_array=inner, stream=stream)


_NON_CONTIGUOUS = ("Array contains non-contiguous buffer and cannot be transferred as a single memory region. "
                   "Please ensure contiguous buffer with numpy .ascontiguousarray()")


def _broadcast_core(host):
    """The array without the repetitions of its axes of stride 0 (those axes kept with length 1)."""
    if not host.ndim or not host.size or all(host.strides):
        return host
    return host[tuple(slice(0, 1) if st == 0 else slice(None) for st in host.strides)]


def as_cuda_array(obj, sync=True):
    """A device array over the memory of ``obj`` (no copy): an object with
    ``__cuda_array_interface__``, a tessel array (on any device), or a device array."""
    if isinstance(obj, DeviceNDArrayBase):
        return obj
    inner = storage_of(obj)
    if inner is not None:
        return DeviceNDArray(_array=inner)
    if getattr(obj, "__cuda_array_interface__", None) is not None:
        return DeviceNDArray(_array=ts.asarray(obj))
    raise TypeError("*obj* doesn't implement the cuda array interface.")


def is_cuda_array(obj):
    """True for objects with ``__cuda_array_interface__``, for tessel arrays and for these device
    arrays (also on the CPU backend, where they are host memory)."""
    return storage_of(obj) is not None or hasattr(obj, "__cuda_array_interface__")


class _InterfaceHolder:
    def __init__(self, desc, owner):
        self.__cuda_array_interface__ = desc
        self.owner = owner


def from_cuda_array_interface(desc, owner=None, sync=True):
    """A device array over the memory a ``__cuda_array_interface__`` dict describes (no copy);
    ``owner`` is kept alive with it."""
    if desc.get("mask") is not None:
        raise NotImplementedError("Masked arrays are not supported")
    return DeviceNDArray(_array=ts.asarray(_InterfaceHolder(dict(desc), owner)))


# ---- host memory ----
def _dense_strides(shape, strides, itemsize) -> bool:
    """Whether strides lay the elements out densely, in some order of the axes."""
    step = itemsize
    for axis in sorted(range(len(shape)), key=lambda d: strides[d]):
        if shape[axis] > 1 and strides[axis] != step:
            return False
        step *= shape[axis]
    return True


def _host_empty(shape, dtype, strides, order):
    shape, dtype = _shape(shape), _dtype(dtype)
    if strides is not None and tuple(strides) not in (_c_strides(shape, dtype.itemsize), _f_strides(shape, dtype.itemsize)):
        strides = tuple(int(st) for st in strides)
        if len(strides) != len(shape) or not _dense_strides(shape, strides, dtype.itemsize):
            raise NotImplementedError(f"tessel.numba.cuda: pinned arrays with strides {strides} are not supported "
                                      "(strides that lay the elements out densely, in any axis order, are)")
        flat = _host_empty((int(np.prod(shape)),), dtype, None, "C")
        return np.ndarray(shape, dtype=dtype, buffer=flat, strides=strides)
    if strides is not None:
        order = "C" if tuple(strides) == _c_strides(shape, dtype.itemsize) else "F"
    fortran = order == "F" and len(shape) > 1
    alloc_shape = tuple(reversed(shape)) if fortran else shape
    host = None
    if ts.cuda_available() and dtype.names is None:
        host = ts.cuda.pinned_empty(alloc_shape, dtype.name)
    if host is None:
        host = np.empty(alloc_shape, dtype=dtype)
    return host.T if fortran else host


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """An uninitialized NumPy array in page-locked memory (tessel's pinned pool; plain host
    memory on the CPU backend): copies between it and the GPU are asynchronous."""
    return _host_empty(shape, dtype, strides, order)


def pinned_array_like(ary):
    strides = _contiguous_strides_like(ary)
    order = "F" if _flag(ary, "F_CONTIGUOUS") and not _flag(ary, "C_CONTIGUOUS") else "C"
    return pinned_array(tuple(ary.shape), dtype=ary.dtype, strides=strides, order=order)


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False, wc=False):
    """A host-accessible array: a NumPy array in pinned memory (plain host memory on the CPU
    backend). Kernels get it as a NumPy argument: on the CPU backend without a copy, on a GPU
    copied in and back around the launch (tessel cannot map host memory into a GPU's address
    space, so the GPU does not read it in place)."""
    return _host_empty(shape, dtype, strides, order)


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    return pinned_array_like(ary)


@contextlib.contextmanager
def pinned(*arylist):
    """``with cuda.pinned(a, b):`` — accepted and does nothing: tessel stages copies from pageable
    host memory through its pinned pool, so the copies inside are as fast as from pinned memory
    (the transfer itself stays synchronous for pageable memory)."""
    yield


@contextlib.contextmanager
def defer_cleanup():
    """``with cuda.defer_cleanup():`` — accepted and does nothing: tessel's pool frees device
    memory in stream order, without synchronizing, so there is nothing to defer."""
    yield


@contextlib.contextmanager
def mapped(*arylist, **kws):
    """On the CPU backend, device arrays over the host arrays' memory (no copy); on CUDA not
    supported (tessel cannot map host memory into a GPU's address space)."""
    stream = kws.pop("stream", 0)
    if kws:
        raise TypeError("mapped: only accepts 'stream' as keyword")
    device = target_device()
    if device.type != "cpu":
        from . import _unsupported

        raise _unsupported.error("mapped", _unsupported.UNSUPPORTED["mapped"])
    arrays = [DeviceNDArray(_array=ts.asarray(np.asarray(a), device="cpu"), stream=stream) for a in arylist]
    yield arrays[0] if len(arrays) == 1 else arrays


# ---- synchronization, streams, events ----
def synchronize():
    """The host waits for all the work on the selected device."""
    ts.synchronize(target_device())


def stream():
    """A new (non-blocking) stream on the selected device."""
    device = target_device()
    if device.type != "cuda":
        return Stream(ts.Stream.cpu())
    return Stream(ts.Stream(device))


def default_stream():
    """The default stream: CUDA's legacy default stream (handle 0), as Numba's default stream."""
    device = target_device()
    if device.type != "cuda":
        return Stream(ts.Stream.cpu(), kind="default")
    return Stream(ts.Stream.default(device), kind="default")


def legacy_default_stream():
    """The legacy default stream (tessel's default stream is the legacy one, so this is the
    same stream as :func:`default_stream`)."""
    device = target_device()
    if device.type != "cuda":
        return Stream(ts.Stream.cpu(), kind="legacy")
    return Stream(ts.Stream.default(device), kind="legacy")


def per_thread_default_stream():
    """CUDA's per-thread default stream (``cudaStreamPerThread``)."""
    device = target_device()
    if device.type != "cuda":
        return Stream(ts.Stream.cpu(), kind="per_thread")
    return Stream(ts.Stream.from_handle(_streams._PER_THREAD, device), kind="per_thread")


def external_stream(ptr):
    """A stream created elsewhere (a ``cudaStream_t`` as an int), not owned."""
    device = target_device()
    if device.type != "cuda":
        return Stream(ts.Stream.cpu(), external=True)
    return Stream(ts.cuda.ExternalStream(int(ptr), device), external=True)


def event(timing=True):
    """A new event on the selected device (``timing=False``: for synchronization only)."""
    return Event(timing=timing)


# ---- devices ----
gpus = _devices.DeviceList()


def select_device(device_id):
    """Selects CUDA device ``device_id`` for this thread and returns it (on a machine without
    CUDA, 0 is the CPU backend). tessel extension: ``"cpu"`` selects the CPU backend."""
    return _devices.Device(_devices.select(device_id))


def get_current_device():
    return _devices.Device(target_device())


def list_devices():
    return gpus


def current_context(devnum=None):
    """The selected device's context (``get_memory_info()``, ``synchronize()``), or device ``devnum``'s."""
    if devnum is not None:
        return _devices.Context(_devices.Device(_devices._as_tessel_device(devnum)))
    return _devices.Context(get_current_device())


def close():
    """Waits for the selected device, returns its cached memory and forgets the selection."""
    device = target_device()
    ts.synchronize(device)
    if device.type == "cuda":
        ts.cuda.empty_cache(device)
    _devices._local.device = None


def backend():
    """``"cuda"`` or ``"cpu"``: where the selected device runs kernels (a tessel extension)."""
    return target_device().type


def is_available():
    """True: tessel runs Numba kernels on a CUDA GPU, or on the CPU backend where there is none
    (:func:`backend` says which). ``ts.cuda.is_available()`` is True only with a GPU."""
    return True


def cuda_error():
    """None when CUDA initialized, else why not (tessel then uses the CPU backend)."""
    return None if ts.cuda_available() else (ts.cuda_unavailable_reason() or "CUDA is unavailable")


def is_supported_version():
    return True


def is_float16_supported():
    return True


def is_bfloat16_supported():
    return get_current_device().supports_bfloat16


def is_fp8_supported():
    return get_current_device().supports_fp8


def detect():
    """Prints the devices tessel found (as Numba's ``detect``); True when kernels can run."""
    if not ts.cuda_available():
        print("Found 0 CUDA devices")
        print(f"tessel runs kernels on its CPU backend ({ts.cuda_unavailable_reason() or 'no CUDA'})")
        print("Summary:")
        print("\t1/1 devices are supported (the CPU backend)")
        return True
    devices = list(gpus)
    print("Found %d CUDA devices" % len(devices))
    for d in devices:
        cc = d.compute_capability
        print("id %d    %20s %40s" % (d.id, d.name, "[SUPPORTED]"))
        print("%40s: %s" % ("Compute Capability", "%d.%d" % cc))
    print("Summary:")
    print("\t%d/%d devices are supported" % (len(devices), len(devices)))
    return True


class _Runtime:
    """``cuda.runtime``: the CUDA runtime version tessel was built with."""

    def get_version(self):
        version = ts.runtime_version()
        return (version // 1000, (version % 1000) // 10)

    def is_supported_version(self):
        return True

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        from . import _unsupported

        raise _unsupported.error(f"runtime.{name}", "tessel's runtime object has get_version() only")


runtime = _Runtime()


# ---- profiling ----
_profile_session = None


def _profiler_api(start):
    """cuProfilerStart/Stop where there is a CUDA driver (Nsight's capture range)."""
    if not ts.cuda_available():
        return
    try:
        lib = _devices._cuda_driver()
    except OSError:
        return
    (lib.cuProfilerStart if start else lib.cuProfilerStop)()


def profile_start():
    """Starts a ``ts.profile()`` session (its results: ``profile_stop()``'s return value) and,
    with CUDA, the profiler API's capture range (``nsys --capture-range=cudaProfilerApi``)."""
    global _profile_session
    if _profile_session is None:
        _profile_session = ts.profile().start()
    _profiler_api(True)


def profile_stop():
    """Stops what :func:`profile_start` started; returns the stopped ``ts.Profile`` (a tessel
    extension: Numba returns None) or None when none was started."""
    global _profile_session
    _profiler_api(False)
    session, _profile_session = _profile_session, None
    if session is not None:
        session.stop()
    return session


@contextlib.contextmanager
def profiling():
    """``with cuda.profiling():`` profile_start() on entry, profile_stop() on exit."""
    profile_start()
    try:
        yield
    finally:
        profile_stop()
