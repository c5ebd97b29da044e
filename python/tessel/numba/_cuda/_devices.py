"""Devices for tessel.numba.cuda: the selected device, ``gpus``, ``Device`` and ``Context``.

The selected device is where ``to_device``, ``device_array``, ``stream()`` and ``event()``
put things: the current CUDA device when tessel has CUDA, else the CPU backend (``cpu``).
``select_device(i)`` picks CUDA device i (on a machine without CUDA, 0 is the CPU backend);
``select_device("cpu")`` picks the CPU backend even where there is a GPU (a tessel extension,
as Numba's simulator is selected by an environment variable). The choice is per thread.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import sys
import threading

import tessel as ts
from tessel import _tessel

__all__ = ["target_device", "select", "Device", "Context", "DeviceList", "MemoryInfo", "CudaSupportError",
           "CPU_COMPUTE_CAPABILITY"]

# What get_current_device().compute_capability says on the CPU backend: the CUDA architecture
# whose kernel features (warp intrinsics, atomics, grid sync) tessel's CPU backend provides.
CPU_COMPUTE_CAPABILITY = (9, 0)

MemoryInfo = collections.namedtuple("MemoryInfo", ["free", "total"])


class CudaSupportError(ImportError):
    """Numba's error for a missing or unusable CUDA device."""


_local = threading.local()


def cuda_backend():
    return ts.cuda_available()


def target_device():
    """The tessel device the Numba API puts arrays, streams and events on (this thread's)."""
    chosen = getattr(_local, "device", None)
    if chosen is not None:
        return chosen
    if ts.cuda_available():
        return ts.Device(f"cuda:{ts.current_device().index}")
    return ts.Device("cpu")


def _as_tessel_device(device_id):
    if isinstance(device_id, Device):
        return device_id.tessel_device
    if isinstance(device_id, ts.Device):
        return device_id
    if isinstance(device_id, str):
        return ts.Device(device_id)
    index = int(device_id)
    if not ts.cuda_available():
        if index == 0:
            return ts.Device("cpu")  # the CPU backend stands in for device 0
        raise CudaSupportError(f"tessel.numba.cuda.select_device({index}): there is no CUDA device here "
                               f"({ts.cuda_unavailable_reason()}); device 0 is the CPU backend")
    count = ts.device_count()
    if not 0 <= index < count:
        raise CudaSupportError(f"tessel.numba.cuda.select_device({index}): this machine has {count} CUDA "
                               f"device{'s' if count != 1 else ''}")
    return ts.Device(f"cuda:{index}")


def select(device_id):
    """Makes a device the selected one for this thread; returns the tessel device."""
    device = _as_tessel_device(device_id)
    if device.type == "cuda":
        if not ts.cuda_available():
            raise CudaSupportError(f"tessel.numba.cuda: {device} asked for, but CUDA is unavailable: "
                                   f"{ts.cuda_unavailable_reason()}")
        ts.set_current_device(device.index)
    _local.device = device
    return device


# ---- the CUDA driver, for device attributes and free memory (not in tessel's Python API) ----
_driver = None


def _cuda_driver():
    global _driver
    if _driver is None:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        lib = ctypes.CDLL(name)
        _check(lib.cuInit(0), "cuInit")
        _driver = lib
    return _driver


def _check(status, what):
    if status != 0:
        raise ts.CudaError(f"{what} failed with CUDA driver error {status}")


def _attribute(index, code):
    lib = _cuda_driver()
    device, value = ctypes.c_int(), ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(device), index), "cuDeviceGet")
    _check(lib.cuDeviceGetAttribute(ctypes.byref(value), code, device), "cuDeviceGetAttribute")
    return value.value


def _memory_info(index):
    lib = _cuda_driver()
    device, context = ctypes.c_int(), ctypes.c_void_p()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    _check(lib.cuDeviceGet(ctypes.byref(device), index), "cuDeviceGet")
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    try:
        _check(lib.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
        try:
            _check(lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        finally:
            lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    finally:
        lib.cuDevicePrimaryCtxRelease_v2(device)
    return MemoryInfo(free=free.value, total=total.value)


def _host_memory_info():
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return MemoryInfo(free=os.sysconf("SC_AVPHYS_PAGES") * page, total=os.sysconf("SC_PHYS_PAGES") * page)
    except (ValueError, OSError, AttributeError):
        return MemoryInfo(free=0, total=0)


# CUDA's device attribute numbers (CUdevice_attribute) for Numba's attribute names.
_ATTRIBUTES = {
    "MAX_THREADS_PER_BLOCK": 1, "MAX_BLOCK_DIM_X": 2, "MAX_BLOCK_DIM_Y": 3, "MAX_BLOCK_DIM_Z": 4,
    "MAX_GRID_DIM_X": 5, "MAX_GRID_DIM_Y": 6, "MAX_GRID_DIM_Z": 7, "MAX_SHARED_MEMORY_PER_BLOCK": 8,
    "TOTAL_CONSTANT_MEMORY": 9, "WARP_SIZE": 10, "MAX_PITCH": 11, "MAX_REGISTERS_PER_BLOCK": 12,
    "CLOCK_RATE": 13, "TEXTURE_ALIGNMENT": 14, "GPU_OVERLAP": 15, "MULTIPROCESSOR_COUNT": 16,
    "KERNEL_EXEC_TIMEOUT": 17, "INTEGRATED": 18, "CAN_MAP_HOST_MEMORY": 19, "COMPUTE_MODE": 20,
    "CONCURRENT_KERNELS": 31, "ECC_ENABLED": 32, "PCI_BUS_ID": 33, "PCI_DEVICE_ID": 34, "TCC_DRIVER": 35,
    "MEMORY_CLOCK_RATE": 36, "GLOBAL_MEMORY_BUS_WIDTH": 37, "L2_CACHE_SIZE": 38,
    "MAX_THREADS_PER_MULTI_PROCESSOR": 39, "ASYNC_ENGINE_COUNT": 40, "UNIFIED_ADDRESSING": 41,
    "PCI_DOMAIN_ID": 50, "COMPUTE_CAPABILITY_MAJOR": 75, "COMPUTE_CAPABILITY_MINOR": 76,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 81, "MAX_REGISTERS_PER_MULTIPROCESSOR": 82, "MANAGED_MEMORY": 83,
    "MULTI_GPU_BOARD": 84, "SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO": 87, "PAGEABLE_MEMORY_ACCESS": 88,
    "CONCURRENT_MANAGED_ACCESS": 89, "COMPUTE_PREEMPTION_SUPPORTED": 90, "COOPERATIVE_LAUNCH": 95,
    "COOPERATIVE_MULTI_DEVICE_LAUNCH": 96, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 97,
}
_ATTRIBUTES["MAX_THREADS_PER_MULTIPROCESSOR"] = _ATTRIBUTES["MAX_THREADS_PER_MULTI_PROCESSOR"]

# The limits the CPU backend reports (those of a CUDA device of CPU_COMPUTE_CAPABILITY).
_CPU_ATTRIBUTES = {
    "MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64,
    "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535,
    "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 227 * 1024,
    "TOTAL_CONSTANT_MEMORY": 64 * 1024, "WARP_SIZE": 32, "MAX_REGISTERS_PER_BLOCK": 65536,
    "MULTIPROCESSOR_COUNT": os.cpu_count() or 1, "KERNEL_EXEC_TIMEOUT": 0, "INTEGRATED": 1,
    "CAN_MAP_HOST_MEMORY": 1, "COMPUTE_MODE": 0, "CONCURRENT_KERNELS": 0, "ECC_ENABLED": 0, "PCI_BUS_ID": 0,
    "PCI_DEVICE_ID": 0, "PCI_DOMAIN_ID": 0, "TCC_DRIVER": 0, "UNIFIED_ADDRESSING": 1, "MANAGED_MEMORY": 1,
    "MAX_THREADS_PER_MULTI_PROCESSOR": 2048, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
    "COMPUTE_CAPABILITY_MAJOR": CPU_COMPUTE_CAPABILITY[0], "COMPUTE_CAPABILITY_MINOR": CPU_COMPUTE_CAPABILITY[1],
    "SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO": 2, "COOPERATIVE_LAUNCH": 1, "ASYNC_ENGINE_COUNT": 0,
    "MULTI_GPU_BOARD": 0, "PAGEABLE_MEMORY_ACCESS": 1, "CONCURRENT_MANAGED_ACCESS": 1,
}


class Device:
    """A device as Numba shows it: ``id``, ``name``, ``compute_capability``, Numba's attribute
    names (``MAX_THREADS_PER_BLOCK``, ``MULTIPROCESSOR_COUNT``, ``WARP_SIZE``, ...), and a context
    manager (``with cuda.gpus[1]: ...``) that selects it for the block. The CPU backend is
    device 0 where there is no CUDA (its attributes are in the guide)."""

    def __init__(self, tessel_device):
        self.tessel_device = tessel_device
        self._previous = []

    @property
    def id(self):
        return self.tessel_device.index if self.tessel_device.type == "cuda" else 0

    @property
    def is_cpu(self):
        """True for the CPU backend (a tessel extension)."""
        return self.tessel_device.type == "cpu"

    @property
    def name(self):
        if self.is_cpu:
            return "tessel CPU backend"
        return ts.device_name(self.id)

    @property
    def compute_capability(self):
        if self.is_cpu:
            return CPU_COMPUTE_CAPABILITY
        return (self.COMPUTE_CAPABILITY_MAJOR, self.COMPUTE_CAPABILITY_MINOR)

    @property
    def uuid(self):
        if self.is_cpu:
            return "CPU"
        raw = (ctypes.c_ubyte * 16)()
        lib = _cuda_driver()
        device = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(device), self.id), "cuDeviceGet")
        _check(lib.cuDeviceGetUuid(raw, device), "cuDeviceGetUuid")
        b = bytes(raw).hex()
        return f"GPU-{b[:8]}-{b[8:12]}-{b[12:16]}-{b[16:20]}-{b[20:]}"

    @property
    def supports_float16(self):
        return True

    @property
    def supports_bfloat16(self):
        return self.compute_capability >= (8, 0)

    @property
    def supports_fp8(self):
        return self.compute_capability >= (8, 9)

    def __getattr__(self, name):
        if name.isupper() and name in _ATTRIBUTES:
            if self.is_cpu:
                return _CPU_ATTRIBUTES.get(name, 0)
            return _attribute(self.id, _ATTRIBUTES[name])
        if name.startswith("_"):
            raise AttributeError(name)
        from . import _unsupported

        raise _unsupported.error(f"Device.{name}", "tessel's device objects have id, name, compute_capability, "
                                                   "uuid and the CUDA device attributes")

    def get_primary_context(self):
        return Context(self)

    def reset(self):
        """Waits for the device and returns its cached memory (tessel keeps the context)."""
        ts.synchronize(self.tessel_device)
        ts.cuda.empty_cache(self.tessel_device if not self.is_cpu else None)

    def __enter__(self):
        context = selected(self.tessel_device)
        context.__enter__()
        self._previous.append(context)
        return self

    def __exit__(self, exc_type, exc, tb):
        self._previous.pop().__exit__(exc_type, exc, tb)
        return False

    def __eq__(self, other):
        return isinstance(other, Device) and other.tessel_device == self.tessel_device

    def __hash__(self):
        return hash(self.tessel_device)

    def __repr__(self):
        if self.is_cpu:
            return "<tessel CPU backend device>"
        return f"<CUDA device {self.id} '{self.name}'>"

    __str__ = __repr__


class Context:
    """Numba's context of a device: ``device``, ``get_memory_info()``, ``synchronize()``, ``reset()``."""

    def __init__(self, device):
        self.device = device

    def get_memory_info(self):
        """(free, total) bytes of the device (of the host's RAM on the CPU backend)."""
        if self.device.is_cpu:
            return _host_memory_info()
        return _memory_info(self.device.id)

    def synchronize(self):
        ts.synchronize(self.device.tessel_device)

    def reset(self):
        self.device.reset()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        from . import _unsupported

        raise _unsupported.error(f"Context.{name}", "tessel's contexts have device, get_memory_info(), "
                                                    "synchronize() and reset()")

    def __repr__(self):
        return f"<tessel.numba Context of {self.device!r}>"


class DeviceList:
    """``cuda.gpus``: the CUDA devices (the CPU backend alone where there is no CUDA);
    ``gpus[i]`` is a context manager selecting device i, ``gpus.current`` the selected one."""

    def _devices(self):
        if ts.cuda_available():
            return [Device(ts.Device(f"cuda:{i}")) for i in range(ts.device_count())]
        return [Device(ts.Device("cpu"))]

    def __getitem__(self, index):
        return self._devices()[index]

    def __len__(self):
        return len(self._devices())

    def __iter__(self):
        return iter(self._devices())

    @property
    def lst(self):
        return self._devices()

    @property
    def current(self):
        return Device(target_device())

    def __str__(self):
        return ", ".join(str(d) for d in self._devices())

    __repr__ = __str__


@contextlib.contextmanager
def selected(device):
    """Selects ``device`` (a tessel device) for the block."""
    previous = getattr(_local, "device", None)
    previous_cuda = ts.current_device().index if ts.cuda_available() else None
    select(device)
    try:
        yield
    finally:
        _local.device = previous
        if previous_cuda is not None:
            ts.set_current_device(previous_cuda)
