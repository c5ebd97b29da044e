"""``cuda.reduce`` / ``cuda.Reduce``: a binary device function made a reduction over a 1-D array.

One tessel kernel (``_templates.reduce_kernel``) does the work: each block reduces its
grid-stride share of the array with the function, combines it across the block with tessel's
``block_reduce`` (the function as the operator), and writes a partial; a second launch of the
same kernel, one block, reduces the partials. ``init`` is combined once as ``f(result, init)``,
as Numba does.
"""
from __future__ import annotations

import numpy as np

import tessel as ts

from . import _streams, _templates
from ._devices import target_device
from .devicearray import DeviceNDArrayBase, storage_of

__all__ = ["Reduce", "reduce"]

_BLOCK = 256
_MAX_BLOCKS = 1024


class Reduce:
    """``Reduce(functor)``: ``functor`` is a binary function (a plain Python function, a lambda, a
    ``cuda.jit(device=True)`` function), compiled as a device function for the array's dtype."""

    def __init__(self, functor):
        self._functor = functor
        self._kernel = None
        self.__name__ = getattr(functor, "__name__", "reduce")
        self.__doc__ = getattr(functor, "__doc__", None)

    def _get_kernel(self):
        if self._kernel is None:
            from .dispatcher import as_device_function

            f = as_device_function(self._functor)
            name = "".join(ch if ch.isalnum() else "_" for ch in self.__name__)
            self._kernel = _templates.reduce_kernel(f, name=name)
        return self._kernel

    def __call__(self, arr, size=None, res=None, init=0, stream=0):
        """Reduces the 1-D array ``arr`` (a device array, a tessel array or a host array, copied to
        the selected device): returns the result as a NumPy scalar of ``arr``'s dtype, or, with
        ``res`` (a device array), writes it into ``res[0]`` and returns None. ``size``: reduce the
        first ``size`` elements only. ``stream``: where the kernels run."""
        inner = _as_tessel(arr, stream)
        if inner.ndim != 1:
            raise TypeError("only support 1D array")
        if size is not None:
            inner = inner[:int(size)]
        dtype = np.dtype(str(inner.dtype))
        init = dtype.type(init)
        if inner.size == 0:
            if res is not None:
                _store(res, ts.asarray(np.asarray([init]), device=inner.device), stream)
                return None
            return init
        return self._run(inner, init, True, res, stream)

    def _run(self, inner, init, use_init, res, stream):
        """The reduction of the non-empty 1-D tessel array ``inner`` (with ``init`` when ``use_init``)."""
        n = inner.size
        dtype = np.dtype(str(inner.dtype))
        init = dtype.type(init)
        tessel_stream = None if _is_default(stream) else _streams.as_tessel_stream(stream, inner.device)
        block = min(_BLOCK, n)
        blocks = max(1, min(n // block, _MAX_BLOCKS))  # at most n threads: each owns an element
        kernel = self._get_kernel()
        with _streams.on_stream(stream, inner.device):
            partials = ts.empty(blocks, dtype=dtype.name, device=inner.device)
        kernel[blocks, block, tessel_stream](inner, partials, init, bool(use_init))
        if blocks > 1:
            kernel[1, blocks, tessel_stream](partials, partials, init, False)
        if res is not None:
            _store(res, partials[0:1], stream)
            return None
        with _streams.on_stream(stream, inner.device):
            return partials[0:1].numpy()[0]

    def __repr__(self):
        return f"<tessel.numba cuda.Reduce of {self.__name__}>"


reduce = Reduce


def _is_default(stream):
    return stream is None or stream is False or (type(stream) is int and stream == 0)


def _as_tessel(arr, stream):
    inner = storage_of(arr)
    if inner is not None:
        return inner
    if hasattr(arr, "__cuda_array_interface__") or hasattr(arr, "__dlpack__") and not isinstance(arr, np.ndarray):
        return ts.asarray(arr)
    host = np.asarray(arr)
    device = target_device()
    with _streams.on_stream(stream, device):
        return ts.asarray(host, device=device)


def _store(res, value, stream):
    """res[0] = value[0], on the device for device arrays (ordered on ``stream``)."""
    if isinstance(res, DeviceNDArrayBase) or storage_of(res) is not None:
        target = storage_of(res)
        with _streams.on_stream(stream, target.device):
            if value.device != target.device:
                value = value.to_device(target.device)
            target[0:1] = value.astype(target.dtype) if value.dtype != target.dtype else value
        return
    res[0] = value.numpy()[0]
