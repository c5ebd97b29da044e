"""Numba's device array (``DeviceNDArray``) as a thin wrapper over a tessel array.

The wrapper holds the tessel array in ``__tessel_array__`` (the kernel launcher passes that
array, without a copy) and adds Numba's API: ``copy_to_host``, ``copy_to_device``, ``split``,
``reshape``, ``ravel``, ``view``, ``bind``, indexing (an element read is a host scalar, a slice a
device view), ``__cuda_array_interface__`` (CUDA arrays), ``__dlpack__`` and ``__array__``.
``ts.asarray(d)`` gives the tessel array without a copy (through DLPack on the CPU, the CUDA
array interface on a GPU); ``d.__tessel_array__`` is the same array directly.

Structured (record) dtypes, such as the RNG states of :mod:`tessel.numba.cuda.random`, are held
as a tessel array with one more, trailing axis: the fields when they all have one type and no
padding (``xoroshiro128p_dtype`` is held as ``uint64`` of shape ``(n, 2)``), else the bytes.
The wrapper shows the record shape and dtype (``(n,)``, ``xoroshiro128p_dtype``); kernels and
``ts.asarray`` see the storage array.
"""
from __future__ import annotations

import math

import numpy as np

import tessel as ts
from tessel import _tessel

from . import _streams

__all__ = ["DeviceNDArray", "DeviceNDArrayBase", "DeviceRecord", "is_cuda_ndarray", "from_array_like",
           "from_record_like", "auto_device", "storage_of"]


def _c_order(host):
    """host as a C-contiguous NumPy array (0-d stays 0-d, unlike np.ascontiguousarray)."""
    return host if host.flags.c_contiguous else host.copy(order="C")


def _record_storage(dtype):
    """(storage dtype, count) for a structured dtype: one field type without padding, else bytes."""
    fields = [dtype.fields[name] for name in dtype.names]
    first = fields[0][0]
    if (all(f[0] == first and f[0].shape == () and f[0].kind in "biufc" for f in fields)
            and all(offset == i * first.itemsize for i, (_, offset, *rest) in enumerate(fields))
            and dtype.itemsize == len(fields) * first.itemsize):
        return first, len(fields)
    return np.dtype(np.uint8), dtype.itemsize


def _tessel_dtype_name(np_dtype):
    return np.dtype(np_dtype).name


def storage_of(obj):
    """The tessel array behind a device array, a tessel array, or None."""
    inner = getattr(obj, "__tessel_array__", None)
    if inner is not None:
        return inner
    if isinstance(obj, ts.Array):
        return obj
    return None


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def _f_strides(shape, itemsize):
    return tuple(reversed(_c_strides(tuple(reversed(shape)), itemsize)))


def _dense(shape, strides, itemsize, order):
    want = _c_strides(shape, itemsize) if order == "C" else _f_strides(shape, itemsize)
    return all(n <= 1 or s == w for n, s, w in zip(shape, strides, want))


def _is_device_object(obj):
    return storage_of(obj) is not None or hasattr(obj, "__cuda_array_interface__")


def _launch_array(array, record):
    """What a kernel launch passes in C++: the array, unless it is a record array (the RNG's
    states excepted), which the Python launcher converts."""
    if record is None:
        return array
    from .random import xoroshiro128p_dtype

    return array if record == xoroshiro128p_dtype else None


class DeviceNDArrayBase:
    """Numba's device array base: see :class:`DeviceNDArray`."""

    # No __cuda_ndarray__/__cuda_memory__ markers: Numba takes objects that carry them for its own
    # arrays (and reads their internals); through __cuda_array_interface__ its kernels take these too.

    def __init__(self, shape=None, strides=None, dtype=None, stream=0, gpu_data=None, *, _array=None, _record=None):
        if _array is None:
            # Numba's constructor: DeviceNDArray(shape, strides, dtype, stream, gpu_data). gpu_data
            # (Numba memory objects) has no meaning here; a tessel array of the right size is made.
            if gpu_data is not None:
                raise NotImplementedError("tessel.numba.cuda: DeviceNDArray(gpu_data=...) is not supported: "
                                          "make device arrays with cuda.device_array / to_device, or wrap an "
                                          "existing buffer with cuda.as_cuda_array")
            from . import _api

            made = _api.device_array(shape, dtype=dtype if dtype is not None else np.float64, strides=strides,
                                     stream=stream)
            _array, _record = made.__tessel_array__, made._record
        self.__tessel_array__ = _array
        self._record = _record  # the structured NumPy dtype, or None
        self._launch_array = _launch_array(_array, _record)
        self.stream = stream

    # ---- shape, dtype and memory ----
    @property
    def _core(self):
        """The storage array's shape without the record axis."""
        inner = self.__tessel_array__
        return inner.shape[:-1] if self._record is not None else inner.shape

    @property
    def shape(self):
        return tuple(self._core)

    @property
    def ndim(self):
        return len(self._core)

    @property
    def size(self):
        return math.prod(self._core)

    @property
    def dtype(self):
        if self._record is not None:
            return self._record
        return np.dtype(_tessel_dtype_name(self.__tessel_array__.dtype))

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def strides(self):
        """Strides in bytes, as NumPy's."""
        strides = tuple(self.__tessel_array__.strides)
        return strides[:-1] if self._record is not None else strides

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def alloc_size(self):
        """The bytes the array spans in memory (its first to its last element), as Numba's."""
        if not self.size:
            return 0
        span = [st * (n - 1) for st, n in zip(self.strides, self.shape)]
        return sum(x for x in span if x > 0) - sum(x for x in span if x < 0) + self.itemsize

    @property
    def device(self):
        """The tessel device of the array (``ts.Device``); a tessel extension."""
        return self.__tessel_array__.device

    @property
    def flags(self):
        return {"C_CONTIGUOUS": self.is_c_contiguous(), "F_CONTIGUOUS": self.is_f_contiguous(),
                "OWNDATA": False, "WRITEABLE": True, "ALIGNED": True}

    def is_c_contiguous(self):
        return _dense(self.shape, self.strides, self.itemsize, "C")

    def is_f_contiguous(self):
        return _dense(self.shape, self.strides, self.itemsize, "F")

    @property
    def device_ctypes_pointer(self):
        import ctypes

        return ctypes.c_void_p(self.__tessel_array__.data_ptr if self.size else None)

    @property
    def gpu_data(self):
        raise NotImplementedError("tessel.numba.cuda: DeviceNDArray.gpu_data (Numba's memory object) is not "
                                  "supported: the data is a tessel array, d.__tessel_array__ (its data_ptr is "
                                  "the address)")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        from ._unsupported import error

        raise error(f"DeviceNDArray.{name}", "not a part of Numba's device array API that tessel provides "
                                            "(the data is a tessel array: d.__tessel_array__)")

    def _wrap(self, inner, stream=None, record=None):
        return type(self)(_array=inner, _record=self._record if record is None else record,
                          stream=self.stream if stream is None else stream)

    def __repr__(self):
        return (f"<tessel.numba DeviceNDArray shape={self.shape} dtype={self.dtype} "
                f"device={self.__tessel_array__.device}>")

    # ---- interop ----
    @property
    def __cuda_array_interface__(self):
        inner = self.__tessel_array__
        if inner.device.type != "cuda":
            raise AttributeError("__cuda_array_interface__: this device array is on the CPU backend "
                                 "(use __dlpack__ or ts.asarray)")
        desc = dict(inner.__cuda_array_interface__)
        if self._record is not None:
            desc["shape"] = self.shape
            desc["strides"] = None if self.is_c_contiguous() else self.strides
            desc["typestr"] = "|V%d" % self._record.itemsize
            desc["descr"] = self._record.descr
        return desc

    def __dlpack__(self, *args, **kwargs):
        return self.__tessel_array__.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.__tessel_array__.__dlpack_device__()

    def bind(self, stream=0):
        """A copy of this wrapper (same data) whose operations default to ``stream``."""
        return self._wrap(self.__tessel_array__, stream=stream)

    def _default_stream(self, stream):
        return self.stream if not stream else stream

    # ---- copies ----
    def copy_to_host(self, ary=None, stream=0):
        """Copies to a new NumPy array, or into ``ary`` (same shape and dtype), and returns it.

        The host array has the device array's layout when that is C- or Fortran-contiguous (as
        Numba's). With a ``stream``, a copy into a given page-locked ``ary`` (``cuda.pinned_array``)
        is asynchronous, as Numba's: synchronize the stream before reading ``ary``; any other copy
        has finished when this returns."""
        stream = self._default_stream(stream)
        if ary is not None:
            _check_compatible(self, ary, "copy_to_host")
            if self._record is None and isinstance(ary, np.ndarray) and ary.flags.c_contiguous \
                    and ary.flags.writeable:
                # Straight into ary, without a staging array.
                inner = self.__tessel_array__
                if ary.size:
                    with _streams.on_stream(stream, inner.device) as s:
                        copy = _tessel._copy_to_host_async if s is not None else _tessel._copy_to_host
                        copy(inner, ary.ctypes.data)
                return ary
        with _streams.on_stream(stream, self.__tessel_array__.device):
            host = self._to_numpy()
        if ary is None:
            return host
        if ary.size:
            np.copyto(ary, host.reshape(ary.shape) if host.shape != ary.shape else host, casting="no")
        return ary

    def _to_numpy(self):
        """A host copy with this array's dtype (C or F order as the device array)."""
        inner = self.__tessel_array__
        storage = np.dtype(_tessel_dtype_name(inner.dtype))
        fortran = self._record is None and self.ndim > 1 and self.is_f_contiguous() and not self.is_c_contiguous()
        source = inner.transpose() if fortran else inner
        host = np.empty(tuple(source.shape), dtype=storage)
        if host.size:
            _tessel._copy_to_host(source, host.ctypes.data)
        if fortran:
            host = host.T
        if self._record is not None:
            host = host.view(self._record).reshape(self.shape)
        return host

    def copy_to_device(self, ary, stream=0):
        """Copies ``ary`` (a NumPy array, a device array or any array on a device) into this array."""
        stream = self._default_stream(stream)
        inner = self.__tessel_array__
        source = storage_of(ary)
        if source is None and hasattr(ary, "__cuda_array_interface__"):
            source = ts.asarray(ary)
        if source is None:
            host = np.asarray(ary)
            if host.size == 0:
                return
            _check_compatible(self, host, "copy_to_device")
            if host.shape != self.shape:  # equal but for axes of size 1
                host = host.reshape(self.shape)
            if self._record is not None:
                storage = np.dtype(_tessel_dtype_name(inner.dtype))
                host = _c_order(host).view(storage).reshape(tuple(inner.shape))
            with _streams.on_stream(stream, inner.device):
                ts.copyto(inner, ts.asarray(_c_order(host), device="cpu"))
            return
        if getattr(ary, "size", 1) == 0:
            return
        if not isinstance(ary, DeviceNDArrayBase):
            ary = DeviceNDArray(_array=source)
        _check_compatible(self, ary, "copy_to_device")
        source = ary.__tessel_array__
        if tuple(ary.shape) != self.shape:  # equal but for axes of size 1
            source = ts.reshape(source, tuple(inner.shape))
        with _streams.on_stream(stream, inner.device):
            ts.copyto(inner, source)

    def __array__(self, dtype=None, copy=None):
        """A host copy (always: the data may be on a GPU), as Numba."""
        if copy is False:
            raise ValueError("`copy=False` is not supported. A copy is always created.")
        host = self.copy_to_host()
        return host if dtype is None else host.astype(dtype, copy=False)

    def copy(self):
        """A new device array with a copy of the data (a tessel extension)."""
        return self._wrap(self.__tessel_array__.copy())

    # ---- views ----
    def split(self, section, stream=0):
        """Views of consecutive ``section``-element parts (the last may be shorter) of a 1-D array."""
        stream = self._default_stream(stream)
        if self.ndim != 1:
            raise ValueError("only support 1d array")
        if self.strides[0] != self.itemsize:
            raise ValueError("only support unit stride")
        inner = self.__tessel_array__
        size = self.size
        for begin in range(0, size, section):
            yield self._wrap(inner[begin:min(begin + section, size)], stream=stream)

    def squeeze(self, axis=None, stream=0):
        inner = self.__tessel_array__
        axes = [i for i, n in enumerate(self.shape) if n == 1] if axis is None else (
            [axis] if isinstance(axis, int) else list(axis))
        axes = [a % max(self.ndim, 1) for a in axes]
        for a in axes:
            if self.shape[a] != 1:
                raise ValueError(f"cannot select an axis to squeeze out which has size not equal to one: {a}")
        key = tuple(0 if i in axes else slice(None) for i in range(self.ndim))
        squeezed = inner[key + ((slice(None),) if self._record is not None else ())] if key else inner
        return self._wrap(squeezed, stream=self._default_stream(stream))

    @property
    def T(self):
        return self.transpose()

    def transpose(self, axes=None):
        """A transposed copy, as Numba's (which transposes with a kernel into a new array)."""
        if axes is not None and tuple(axes) == tuple(range(self.ndim)):
            return self
        if self._record is not None:
            raise NotImplementedError("tessel.numba.cuda: transposing a record array is not supported")
        if axes is not None and sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"invalid axes list {axes!r}")
        inner = self.__tessel_array__
        moved = inner.transpose(*axes) if axes is not None else inner.transpose()
        return self._wrap(moved.copy())

    def view(self, dtype):
        """The same memory read as another dtype (the last axis rescaled when the sizes differ)."""
        dtype = np.dtype(dtype)
        if self._record is not None or dtype.names is not None:
            raise NotImplementedError("tessel.numba.cuda: view() with record dtypes is not supported")
        if dtype == self.dtype:
            return self._wrap(self.__tessel_array__)
        shape, strides = list(self.shape), list(self.strides)
        if self.itemsize != dtype.itemsize:
            if not self.is_c_contiguous():
                raise ValueError("To change to a dtype of a different size, the array must be C-contiguous")
            if not shape:
                raise ValueError("Changing the dtype of a 0d array is only supported if the itemsize is unchanged")
            shape[-1], rem = divmod(shape[-1] * self.itemsize, dtype.itemsize)
            if rem:
                raise ValueError("When changing to a larger dtype, its size must be a divisor of the total size "
                                 "in bytes of the last axis of the array.")
            strides[-1] = dtype.itemsize
        return self._wrap(_reinterpret(self.__tessel_array__, dtype, tuple(shape), tuple(strides)))

    def reshape(self, *newshape, **kws):
        """A view with a new shape (``order="C"`` or ``"F"``); NotImplementedError when that
        needs a copy, as Numba's."""
        order = kws.pop("order", "C")
        if kws:
            raise TypeError(f"reshape: unexpected keyword arguments {sorted(kws)}")
        if len(newshape) == 1 and isinstance(newshape[0], (tuple, list)):
            newshape = newshape[0]
        newshape = tuple(int(n) for n in newshape)
        if order not in ("C", "F", "A"):
            raise ValueError("order not C|F|A")
        if newshape == self.shape:
            return self._wrap(self.__tessel_array__)
        if self._record is not None:
            raise NotImplementedError("tessel.numba.cuda: reshaping a record array is not supported")
        inner = self.__tessel_array__
        if order == "A":
            order = "F" if self.is_f_contiguous() and not self.is_c_contiguous() else "C"
        known = math.prod(n for n in newshape if n != -1)
        if newshape.count(-1) > 1 or (newshape.count(-1) == 0 and known != self.size) or (
                newshape.count(-1) == 1 and (known == 0 or self.size % known)):
            raise ValueError(f"cannot reshape array of size {self.size} into shape {newshape}")
        if newshape.count(-1):
            newshape = tuple(self.size // known if n == -1 else n for n in newshape)
        try:
            if order == "C":
                result = ts.reshape(inner, newshape, copy=False)
            else:
                result = ts.reshape(inner.transpose(), tuple(reversed(newshape)), copy=False).transpose()
        except (ValueError, ts.TesselError):
            raise NotImplementedError("operation requires copying") from None
        return self._wrap(result)

    def ravel(self, order="C", stream=0):
        """A 1-D view of a contiguous array; NotImplementedError when that needs a copy."""
        stream = self._default_stream(stream)
        if self.ndim <= 1:
            return self._wrap(self.__tessel_array__, stream=stream)
        if order == "A":
            order = "F" if self.is_f_contiguous() and not self.is_c_contiguous() else "C"
        if order == "K":
            order = "C" if self.is_c_contiguous() else "F"
        if order not in ("C", "F"):
            raise ValueError("order not C|F|A|K")
        if not _dense(self.shape, self.strides, self.itemsize, order):
            raise NotImplementedError("operation requires copying")
        result = self.reshape(self.size, order=order)
        result.stream = stream
        return result

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # ---- indexing ----
    def _key(self, key):
        """The key for the storage array (record arrays keep their trailing axis)."""
        if isinstance(key, DeviceNDArrayBase):
            key = key.__tessel_array__
        if self._record is None:
            return key
        items = key if isinstance(key, tuple) else (key,)
        if any(not isinstance(k, (int, np.integer, slice, type(Ellipsis), type(None))) for k in items):
            raise NotImplementedError("tessel.numba.cuda: record arrays take integers and slices as indices")
        if sum(1 for k in items if k is not None and k is not Ellipsis) > self.ndim:
            raise IndexError(f"too many indices for array: array is {self.ndim}-dimensional")
        if Ellipsis in items:
            return items + (slice(None),)
        return items + (Ellipsis,)

    def __getitem__(self, item):
        return self.getitem(item)

    def getitem(self, item, stream=0):
        """``self[item]`` with a stream: a device array view, or a host scalar for one element."""
        stream = self._default_stream(stream)
        inner = self.__tessel_array__
        with _streams.on_stream(stream, inner.device):
            result = inner[self._key(item)]
            if self._record is not None:
                if result.ndim == 1:  # one record: read it to the host
                    return self._wrap(result[None, :])._to_numpy()[0]
                return self._wrap(result, stream=stream)
            if result.ndim == 0 and not _is_array_key(item):
                host = np.empty((), dtype=self.dtype)
                _tessel._copy_to_host(result, host.ctypes.data)
                return host[()]
        return self._wrap(result, stream=stream)

    def __setitem__(self, key, value):
        return self.setitem(key, value)

    def setitem(self, key, value, stream=0):
        """``self[key] = value`` with a stream; finished when this returns (as Numba without a stream)."""
        stream = self._default_stream(stream)
        inner = self.__tessel_array__
        source = storage_of(value)
        if source is None and hasattr(value, "__cuda_array_interface__"):
            source = ts.asarray(value)
        if self._record is not None:
            if source is None:
                host = np.asarray(value, dtype=self._record)
                storage = np.dtype(_tessel_dtype_name(inner.dtype))
                source = ts.asarray(_c_order(host).view(storage).reshape(host.shape + (-1,)), device="cpu")
        elif source is None:
            host = np.asarray(value)
            if host.ndim:
                source = ts.asarray(_c_order(host), device="cpu")
            else:
                source = value if not isinstance(value, np.generic) else value.item()
        with _streams.on_stream(stream, inner.device):
            if isinstance(source, ts.Array) and source.device != inner.device:
                source = source.to_device(inner.device)
            inner[self._key(key)] = source
        if not stream:
            inner.wait()


class DeviceNDArray(DeviceNDArrayBase):
    """Numba's on-device array (see the module docstring)."""


class DeviceRecord(DeviceNDArrayBase):
    """Numba's device record type; tessel reads single records to the host (``d[i]`` is an
    ``np.void``), so this class is only here for ``isinstance`` checks."""


class MappedNDArray(DeviceNDArray):
    """Numba's mapped array type (for ``isinstance`` checks); tessel's ``mapped_array`` returns a NumPy array."""


def _is_array_key(item):
    items = item if isinstance(item, tuple) else (item,)
    return any(isinstance(k, (list, np.ndarray, ts.Array, DeviceNDArrayBase)) for k in items)


def _check_compatible(device_array, other, op):
    """Numba's check_array_compatibility: same dtype, same shape (size-1 axes aside), same strides."""
    other_dtype = np.dtype(getattr(other, "dtype"))
    if device_array.dtype != other_dtype:
        raise TypeError(f"incompatible dtype: {device_array.dtype} vs. {other_dtype}")
    a_shape = tuple(n for n in device_array.shape if n != 1)
    b_shape = tuple(n for n in other.shape if n != 1)
    if a_shape != b_shape:
        raise ValueError(f"incompatible shape: {device_array.shape} vs. {tuple(other.shape)}")


def _reinterpret(inner, dtype, shape, strides):
    """The storage of ``inner`` read as ``dtype`` with a new shape and byte strides (no copy)."""
    if inner.device.type == "cpu":
        viewed = np.from_dlpack(inner).view(dtype)  # NumPy rescales the (contiguous) last axis
        assert viewed.shape == shape and viewed.strides == strides, (viewed.shape, shape, viewed.strides, strides)
        return ts.asarray(viewed, device="cpu")

    class _Interface:
        pass

    desc = dict(inner.__cuda_array_interface__)
    desc.update(shape=shape, strides=strides, typestr=dtype.str, descr=[("", dtype.str)])
    holder = _Interface()
    holder.__cuda_array_interface__ = desc
    holder.owner = inner
    return ts.asarray(holder)


def is_cuda_ndarray(obj):
    return isinstance(obj, DeviceNDArrayBase)


def from_array_like(ary, stream=0, gpu_data=None):
    """An uninitialized device array like ``ary``."""
    from . import _api

    if gpu_data is not None:
        raise NotImplementedError("tessel.numba.cuda: from_array_like(gpu_data=...) is not supported")
    return _api.device_array_like(ary, stream=stream)


def from_record_like(rec, stream=0, gpu_data=None):
    raise NotImplementedError("tessel.numba.cuda: device records (from_record_like) are not supported; use a "
                              "one-element structured array")


def auto_device(obj, stream=0, copy=True, user_explicit=False):
    """Numba's auto_device: (device array, whether a copy was made)."""
    from . import _api

    if isinstance(obj, DeviceNDArrayBase):
        return obj, False
    if storage_of(obj) is not None or hasattr(obj, "__cuda_array_interface__"):
        return _api.as_cuda_array(obj), False
    return _api.to_device(obj, stream=stream, copy=copy), True
