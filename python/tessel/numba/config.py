"""Numba's configuration names that programs set (``numba.config``, ``numba.cuda.config``).

``numba.config.CUDA_LOW_OCCUPANCY_WARNINGS = 0`` and the like work as in Numba and change
nothing: tessel.numba issues no occupancy or implicit-copy warnings, and compiles with tessel's
options (``cuda.jit(debug=..., fastmath=...)``, ``TESSEL_*`` environment variables). The values
are Numba's defaults, read from the same ``NUMBA_*`` environment variables.
"""
from __future__ import annotations

import os as _os


def _env(name, default, kind=int):
    value = _os.environ.get("NUMBA_" + name)
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except ValueError:
        return default


DISABLE_JIT = _env("DISABLE_JIT", 0)
ENABLE_CUDASIM = _env("ENABLE_CUDASIM", 0)
DEBUG = _env("DEBUG", 0)
OPT = _env("OPT", 3)
BOUNDSCHECK = _env("BOUNDSCHECK", None)
DEVELOPER_MODE = _env("DEVELOPER_MODE", 0)
DISABLE_PERFORMANCE_WARNINGS = _env("DISABLE_PERFORMANCE_WARNINGS", 0)
NUMBA_DEFAULT_NUM_THREADS = _os.cpu_count() or 1
NUMBA_NUM_THREADS = _env("NUM_THREADS", NUMBA_DEFAULT_NUM_THREADS)
CACHE_DIR = _env("CACHE_DIR", "", str)
CUDA_LOW_OCCUPANCY_WARNINGS = _env("CUDA_LOW_OCCUPANCY_WARNINGS", 1)
CUDA_WARN_ON_IMPLICIT_COPY = _env("CUDA_WARN_ON_IMPLICIT_COPY", 1)
CUDA_DEBUGINFO_DEFAULT = _env("CUDA_DEBUGINFO", 0)
CUDA_PER_THREAD_DEFAULT_STREAM = _env("CUDA_PER_THREAD_DEFAULT_STREAM", 0)
CUDA_ARRAY_INTERFACE_SYNC = _env("CUDA_ARRAY_INTERFACE_SYNC", 1)
CUDA_NVRTC_EXTRA_SEARCH_PATHS = _env("CUDA_NVRTC_EXTRA_SEARCH_PATHS", "", str)
CUDA_INCLUDE_PATH = _env("CUDA_INCLUDE_PATH", "", str)
CUDA_USE_NVIDIA_BINDING = _env("CUDA_USE_NVIDIA_BINDING", 0)
CUDA_ENABLE_PYNVJITLINK = _env("CUDA_ENABLE_PYNVJITLINK", 0)
CUDA_ENABLE_MINOR_VERSION_COMPATIBILITY = _env("CUDA_ENABLE_MINOR_VERSION_COMPATIBILITY", 0)
CUDA_LOG_LEVEL = _env("CUDA_LOG_LEVEL", "", str)
CUDA_LOG_API_ARGS = _env("CUDA_LOG_API_ARGS", 0)
CUDA_LOG_SIZE = _env("CUDA_LOG_SIZE", 1024)
CUDA_VERBOSE_JIT_LOG = _env("CUDA_VERBOSE_JIT_LOG", 1)
CUDA_DEFAULT_PTX_CC = (5, 0)
CUDA_MEMORY_MANAGER = _env("CUDA_MEMORY_MANAGER", "default", str)
CUDA_DEALLOCS_COUNT = _env("CUDA_MAX_PENDING_DEALLOCS_COUNT", 10)
CUDA_DEALLOCS_RATIO = _env("CUDA_MAX_PENDING_DEALLOCS_RATIO", 0.2, float)
