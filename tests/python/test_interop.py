"""Zero-copy interop: DLPack with NumPy (runs everywhere), torch/cupy/numba/jax (GPU machine),
__cuda_array_interface__, and the bad inputs of issue 4."""
import sys

import numpy as np
import pytest

import tessel as ts
from conftest import GPU, assert_close

needs_cuda = pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")


def test_dlpack_from_numpy_is_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = ts.from_dlpack(a)
    assert x.shape == (3, 4) and x.dtype == ts.float32 and x.device == ts.Device("cpu")
    a[0, 0] = 99
    assert x[0, 0].item() == 99  # same memory


def test_dlpack_strided_and_negative_strides():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)[::2, ::-3]
    x = ts.from_dlpack(a)
    assert_close(x, a)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float32", "complex128"])
def test_dlpack_roundtrip_numpy(dtype):
    a = (np.arange(10) % 3).astype(dtype)
    x = ts.from_dlpack(a)
    back = np.from_dlpack(x)
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)
    # NumPy reads tessel memory in place
    x[0] = 1
    assert back[0] == 1


def test_dlpack_export_keeps_storage_alive():
    x = ts.arange(100, dtype=ts.float64, device="cpu")  # NumPy imports host memory only
    view = np.from_dlpack(x[10:20])
    del x
    np.testing.assert_array_equal(view, np.arange(10, 20, dtype=np.float64))


def test_dlpack_capsules_versioned_and_legacy():
    x = ts.arange(5, device="cpu")  # __dlpack_device__ of a host array is (1, 0)
    versioned = x.__dlpack__(max_version=(1, 0))
    legacy = x.__dlpack__()
    assert "dltensor_versioned" in repr(versioned)
    assert '"dltensor"' in repr(legacy)
    assert ts.from_dlpack(versioned).tolist() == [0, 1, 2, 3, 4]
    assert ts.from_dlpack(legacy).tolist() == [0, 1, 2, 3, 4]
    assert x.__dlpack_device__() == (1, 0)


def test_capsule_consumed_twice_raises():
    cap = ts.arange(3).__dlpack__(max_version=(1, 0))
    ts.from_dlpack(cap)
    with pytest.raises(ValueError, match="already consumed"):
        ts.from_dlpack(cap)
    cap = np.arange(3).__dlpack__()
    ts.from_dlpack(cap)
    with pytest.raises(ValueError, match="already consumed"):
        ts.from_dlpack(cap)


def test_dlpack_copy_and_device_flags():
    a = np.arange(4.0)
    x = ts.from_dlpack(a, copy=True)
    a[0] = 7
    assert x[0].item() == 0.0
    y = ts.arange(3)
    cap = y.__dlpack__(max_version=(1, 0), copy=True)
    z = ts.from_dlpack(cap)
    z[0] = 5
    assert y[0].item() == 0


def test_unsupported_foreign_dtype():
    cap_owner = np.array(["a", "b"])  # strings have no DLPack dtype in NumPy: NumPy refuses
    with pytest.raises((TypeError, BufferError)):
        ts.from_dlpack(cap_owner)
    with pytest.raises(TypeError):
        ts.asarray(np.array([object(), object()]))
    with pytest.raises(TypeError):
        ts.asarray(np.array([1.0], dtype=">f8"))


def test_unsupported_strides():
    # Strides that are not a multiple of the itemsize (a packed record field).
    rec = np.zeros(4, dtype=[("a", "u1"), ("b", "<f4")])
    with pytest.raises((ValueError, TypeError, BufferError)):
        ts.asarray(rec["b"], copy=False)
    assert_close(ts.asarray(rec["b"]), np.zeros(4, "float32"))  # a copy works


class _FakeDLPack:
    def __init__(self, device):
        self.device = device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        raise AssertionError("must not be called for an unusable device")


def test_cuda_array_from_another_device():
    count = ts.device_count()
    with pytest.raises(ts.DeviceError, match="cuda:"):
        ts.from_dlpack(_FakeDLPack((2, count + 3)))
    with pytest.raises(ts.DeviceError):
        ts.from_dlpack(_FakeDLPack((14, 0)))  # an unsupported device type (kDLOneAPI)


def test_not_arrays():
    for bad in [object(), "text", None, {"a": 1}]:
        with pytest.raises(TypeError):
            ts.asarray(bad)
    with pytest.raises(TypeError):
        ts.from_dlpack(object())
    with pytest.raises(TypeError):
        ts.add(ts.ones(2), object())
    with pytest.raises(TypeError):
        ts.ones(2) + object()


def test_wrong_keyword_arguments():
    with pytest.raises(TypeError):
        ts.zeros((2,), dtyp=ts.float32)
    with pytest.raises(TypeError):
        ts.sum(ts.ones(3), axes=0)
    with pytest.raises(TypeError):
        ts.ones(3).__dlpack__(strem=None)
    with pytest.raises(TypeError):
        ts.asarray([1], devce="cpu")
    with pytest.raises(TypeError):
        ts.zeros("abc")
    with pytest.raises(TypeError):
        ts.zeros((2,), dtype=ts.float32, device=3.5)


def test_cuda_array_interface_only_on_cuda():
    assert not hasattr(ts.ones(2, device="cpu"), "__cuda_array_interface__")


class _FakeCAI:
    def __init__(self, typestr="<f4", strides=None, mask=None):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": typestr, "data": (0, False), "version": 3,
                                         "strides": strides, "mask": mask, "stream": None}


def test_cuda_array_interface_bad_input():
    with pytest.raises(TypeError):
        ts.asarray(_FakeCAI(typestr="<f2x"))
    with pytest.raises(TypeError):
        ts.asarray(_FakeCAI(typestr=">f8"))
    with pytest.raises(ValueError):
        ts.asarray(_FakeCAI(mask=object()))
    with pytest.raises(ValueError):
        ts.asarray(_FakeCAI(strides=(3,)))
    with pytest.raises(ValueError, match="null data pointer for shape"):
        ts.asarray(_FakeCAI())  # data (0, False) with 4 elements


# ---- peers on the GPU machine ----
@needs_cuda
def test_cuda_dlpack_and_cai_export():
    x = ts.arange(10, dtype=ts.float32, device=GPU)
    cai = x.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["shape"] == (10,) and cai["stream"] != 0
    assert x.__dlpack_device__() == (2, 0)
    y = ts.from_dlpack(x.__dlpack__(stream=1, max_version=(1, 0)))
    assert y.tolist() == list(range(10))
    assert y.data_ptr == x.data_ptr  # zero-copy
    with pytest.raises(ValueError):
        x.__dlpack__(stream=0)  # ambiguous for CUDA in the protocol
    s = ts.Stream()
    cap = x.__dlpack__(stream=s.handle)  # s waits on tessel's current stream through an event
    assert ts.from_dlpack(cap).data_ptr == x.data_ptr

    class Holder:
        def __init__(self, iface):
            self.__cuda_array_interface__ = iface

    strided = ts.reshape(x, (2, 5)).T
    z = ts.asarray(Holder(strided.__cuda_array_interface__))
    assert z.data_ptr == strided.data_ptr and z.shape == (5, 2)
    assert_close(z, np.arange(10, dtype="float32").reshape(2, 5).T)


@needs_cuda
def test_torch_interop():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    t = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    x = ts.from_dlpack(t)
    assert x.device == ts.Device(GPU) and x.shape == (3, 4)
    t[0, 0] = 42
    torch.cuda.synchronize()
    assert x[0, 0].item() == 42  # shared memory
    back = torch.from_dlpack(x * 2)
    assert torch.equal(back, t * 2)
    c = ts.asarray(t.T)  # __cuda_array_interface__, strided
    assert_close(c, t.T.cpu().numpy())
    s = torch.cuda.Stream()
    with ts.cuda.stream(ts.cuda.ExternalStream(s.cuda_stream)):
        z = ts.from_dlpack(t) + 1
    s.synchronize()
    assert_close(z, t.cpu().numpy() + 1)


@needs_cuda
def test_cupy_interop():
    cp = pytest.importorskip("cupy", reason="cupy is not installed")
    a = cp.arange(6, dtype=cp.float64)
    x = ts.asarray(a)  # __cuda_array_interface__
    assert_close(x, cp.asnumpy(a))
    y = cp.asarray(x * 3)  # tessel exports __cuda_array_interface__
    assert cp.allclose(y, a * 3)
    z = cp.from_dlpack(x)
    assert cp.allclose(z, a)
    s = cp.cuda.Stream()
    with ts.cuda.stream(ts.cuda.ExternalStream(s.ptr)):
        w = x + 1
    assert_close(w, cp.asnumpy(a) + 1)


@needs_cuda
def test_numba_interop():
    np.row_stack = np.vstack  # numba-cuda still references it
    numba_cuda = pytest.importorskip("numba.cuda", reason="numba is not installed")
    d = numba_cuda.to_device(np.arange(5, dtype=np.float32))
    x = ts.asarray(d)
    assert_close(x, np.arange(5, dtype=np.float32))
    back = numba_cuda.as_cuda_array(x * 2)
    np.testing.assert_array_equal(back.copy_to_host(), np.arange(5, dtype=np.float32) * 2)


@needs_cuda
def test_jax_interop():
    jax = pytest.importorskip("jax", reason="jax is not installed")
    a = jax.numpy.arange(4.0, dtype="float32")
    if a.devices().pop().platform != "gpu":
        pytest.skip("jax has no GPU backend here")
    x = ts.from_dlpack(a)
    assert_close(x, np.arange(4.0, dtype="float32"))
    b = jax.dlpack.from_dlpack(x * 2)
    assert np.allclose(np.asarray(b), np.arange(4.0) * 2)


# ---- ts.from_dlpack in one C++ call: protocol details (issue 4) ----
class _RecordingProducer:
    """Wraps a NumPy array; records the keywords __dlpack__ was called with."""

    def __init__(self, array, legacy=False, device=(1, 0)):
        self.array, self.legacy, self.device, self.calls = array, legacy, device, []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        if self.legacy and kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.calls.append(dict(stream=stream, **kwargs))
        return self.array.__dlpack__(**kwargs) if kwargs else self.array.__dlpack__()


def test_from_dlpack_passes_stream_and_max_version():
    a = np.arange(6, dtype=np.float32)
    p = _RecordingProducer(a)
    x = ts.from_dlpack(p)
    assert p.calls == [{"stream": None, "max_version": (1, 0)}]  # CPU: no stream
    assert_close(x, a)
    a[1] = 42
    assert x[1].item() == 42  # zero-copy


def test_from_dlpack_device_as_intenum():
    """PyTorch returns its DLDeviceType IntEnum from __dlpack_device__."""
    import enum

    class DLDeviceType(enum.IntEnum):
        kDLCPU = 1

    a = np.arange(3, dtype=np.float64)
    x = ts.from_dlpack(_RecordingProducer(a, device=(DLDeviceType.kDLCPU, 0)))
    assert_close(x, a)


def test_from_dlpack_falls_back_for_pre_1_0_producers():
    a = np.arange(4, dtype=np.int32)
    p = _RecordingProducer(a, legacy=True)
    x = ts.from_dlpack(p)
    assert p.calls == [{"stream": None}]
    assert_close(x, a)


def test_from_dlpack_errors_are_clear():
    with pytest.raises(TypeError, match="does not implement the DLPack protocol"):
        ts.from_dlpack(object())

    class Broken:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            raise RuntimeError("producer failed")

    with pytest.raises(RuntimeError, match="producer failed"):  # the producer's own error, unchanged
        ts.from_dlpack(Broken())
    if ts.cuda_available():
        with pytest.raises(ValueError, match="copy=False"):
            ts.from_dlpack(np.ones(3, np.float32), device=GPU, copy=False)
    # copy=True gives an independent array.
    a = np.ones(3, np.float32)
    y = ts.from_dlpack(a, copy=True)
    a[0] = 5
    assert y[0].item() == 1


@needs_cuda
def test_from_dlpack_cuda_stream_handshake():
    """tessel's current stream goes to the producer: 1 for the legacy default stream, else its handle."""
    x = ts.arange(4, dtype=ts.float32, device=GPU)

    class Producer:
        def __init__(self):
            self.streams = []

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None, max_version=None):
            self.streams.append(stream)
            return x.__dlpack__(stream=stream, max_version=max_version)

    p = Producer()
    assert ts.from_dlpack(p).tolist() == [0, 1, 2, 3]
    s = ts.Stream()
    with ts.cuda.stream(s):
        ts.from_dlpack(p)
    default = ts.current_stream(ts.Device(GPU)).handle
    assert p.streams[0] == (default if default != 0 else 1)
    assert p.streams[1] == s.handle


# ---- read-only foreign memory (review item): writes raise instead of writing ----
def _assert_writes_refused(x):
    before = np.asarray(x).copy()
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 7
    with pytest.raises(ValueError, match="read-only"):
        ts.add(x, x, out=x)
    with pytest.raises(ValueError, match="read-only"):
        x += 1
    with pytest.raises(ValueError, match="read-only"):
        x[1:] = 3  # a view shares the read-only memory
    np.testing.assert_array_equal(np.asarray(x), before)  # nothing was written
    y = x.copy()  # a copy is writable
    y[0] = 7
    assert y[0].item() == 7
    assert ts.add(x, x).tolist() == (before * 2).tolist()  # reading still works


def test_readonly_numpy_array_comes_in_readonly():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    x = ts.asarray(a, device="cpu")  # zero-copy only on the CPU (a GPU default device copies)
    _assert_writes_refused(x)
    np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))
    # Exported again, it stays read-only (the DLPack read-only flag); a legacy capsule cannot say so.
    assert not np.from_dlpack(x).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__()
    assert x.__dlpack__(copy=True) is not None  # a copy is writable, any capsule kind
    # A writable NumPy array stays writable.
    b = np.arange(4, dtype=np.float32)
    z = ts.asarray(b, device="cpu")
    z[0] = 9
    assert b[0] == 9 and np.from_dlpack(z).flags.writeable


def test_readonly_dlpack_flag_is_honoured():
    a = np.arange(4, dtype=np.float64)
    a.flags.writeable = False  # NumPy exports a versioned capsule with DLPACK_FLAG_BITMASK_READ_ONLY
    _assert_writes_refused(ts.from_dlpack(a))
    _assert_writes_refused(ts.from_dlpack(a.__dlpack__(max_version=(1, 0))))


def test_readonly_matmul_out_is_refused():
    a = np.eye(2, dtype=np.float32)
    a.flags.writeable = False
    x = ts.asarray(a, device="cpu")
    with pytest.raises(ValueError, match="read-only"):
        ts.matmul(ts.ones((2, 2), device="cpu"), ts.ones((2, 2), device="cpu"), out=x)
    np.testing.assert_array_equal(a, np.eye(2, dtype=np.float32))


@needs_cuda
def test_readonly_cuda_array_interface():
    x = ts.arange(4, dtype=ts.float32, device=GPU)

    class Holder:
        def __init__(self, iface):
            self.__cuda_array_interface__ = iface

    iface = dict(x.__cuda_array_interface__)
    iface["data"] = (iface["data"][0], True)
    r = ts.asarray(Holder(iface))
    _assert_writes_refused(r)
    assert r.__cuda_array_interface__["data"][1] is True
    assert x.__cuda_array_interface__["data"][1] is False
    x[0] = 5  # the original owner is still writable


# ---- CuPy streams belong to their own device (review item) ----
class _FakeCupyStream:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id


def test_cupy_stream_device_is_its_own():
    assert ts.cuda._foreign_stream_device(_FakeCupyStream(123, 1)) == "cuda:1"
    assert ts.cuda._foreign_stream_device(_FakeCupyStream(123, -1)) is None
    assert ts.cuda._foreign_stream_device(object()) is None


@needs_cuda
def test_cupy_stream_context_uses_the_streams_device():
    last = ts.device_count() - 1
    s = ts.Stream(ts.Device(f"cuda:{last}"))
    with ts.cuda.stream(_FakeCupyStream(s.handle, last)) as adopted:
        assert adopted.device == ts.Device(f"cuda:{last}")
        assert ts.current_stream(ts.Device(f"cuda:{last}")).handle == s.handle


@needs_cuda
def test_dlpack_export_to_another_stream_waits_every_time():
    """The consumer's stream waits for the producer's pending kernel, also when the hand-over event
    is reused (twice in a row, a slow kernel each time: without the wait the read sees 0)."""
    from test_errors_streams_kernels import _SPIN

    kernel = ts.RawKernel(_SPIN, "spin")
    consumer = ts.Stream()
    for _ in range(2):
        x = ts.zeros((1,), dtype=ts.float32, device=GPU)
        ts.synchronize(GPU)
        kernel((1,), (1,), (np.int64(100_000_000), x))  # ~50 ms, then x[0] = 1
        y = ts.from_dlpack(x.__dlpack__(stream=consumer.handle, max_version=(1, 0)))
        with ts.cuda.stream(consumer):
            z = y + 0.0  # queued on the consumer stream
        assert z.item() == 1.0


@needs_cuda
def test_cai_import_waits_for_the_producers_stream():
    """A __cuda_array_interface__ stream: tessel's current stream waits for the producer's pending
    kernel (twice, so the reused hand-over event is exercised)."""
    from test_errors_streams_kernels import _SPIN

    kernel = ts.RawKernel(_SPIN, "spin")
    producer = ts.Stream()

    class Holder:
        def __init__(self, iface):
            self.__cuda_array_interface__ = iface

    for _ in range(2):
        x = ts.zeros((1,), dtype=ts.float32, device=GPU)
        ts.synchronize(GPU)
        kernel((1,), (1,), (np.int64(100_000_000), x), stream=producer)  # ~50 ms, then x[0] = 1
        iface = dict(x.__cuda_array_interface__)
        iface["stream"] = producer.handle
        y = ts.asarray(Holder(iface))
        assert (y + 0.0).item() == 1.0


# ---- the DLPack C exchange API (issue 4: a round trip without Python protocol calls) ----
# tessel.Array carries __dlpack_c_exchange_api__ (a capsule named "dlpack_exchange_api"), and
# ts.from_dlpack(x) uses type(x)'s table when it has one. ts._tessel._dlpack_fast_path_hits()
# counts the imports that went through a table.
import ctypes  # noqa: E402

_hits = ts._tessel._dlpack_fast_path_hits


@pytest.fixture(autouse=True)
def _exchange_on():
    """The exchange tests expect the fast path on, whatever TESSEL_DLPACK_EXCHANGE says."""
    previous = ts._tessel._dlpack_exchange(True)
    yield
    ts._tessel._dlpack_exchange(previous)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    pass


_Managed = ctypes.POINTER(_DLManagedTensorVersioned)
_DLManagedTensorVersioned._fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                      ("deleter", ctypes.CFUNCTYPE(None, _Managed)), ("flags", ctypes.c_uint64),
                                      ("dl_tensor", _DLTensor)]
_SetError = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)


class _ExchangeAPI(ctypes.Structure):
    # PYFUNCTYPE: called with the GIL held, and a -1 with a Python error set raises that error.
    _fields_ = [("version", _DLPackVersion), ("prev_api", ctypes.c_void_p),
                ("managed_tensor_allocator", ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(_DLTensor),
                                                               ctypes.POINTER(_Managed), ctypes.c_void_p, _SetError)),
                ("managed_tensor_from_py_object_no_sync",
                 ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_Managed))),
                ("managed_tensor_to_py_object_no_sync",
                 ctypes.PYFUNCTYPE(ctypes.c_int, _Managed, ctypes.POINTER(ctypes.c_void_p))),
                ("dltensor_from_py_object_no_sync",
                 ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_DLTensor))),
                ("current_work_stream",
                 ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)))]


def _exchange_api(cls):
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _ExchangeAPI.from_address(get_pointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api"))


def _object_from_new_reference(address):
    obj = ctypes.cast(address, ctypes.py_object).value  # takes its own reference
    ctypes.pythonapi.Py_DecRef(ctypes.c_void_p(address))
    return obj


def test_exchange_api_is_on_the_array_type():
    cap = ts.Array.__dlpack_c_exchange_api__
    assert 'capsule object "dlpack_exchange_api"' in repr(cap)
    assert ts.Array.__c_dlpack_exchange_api__ is cap  # the older attribute name
    api = _exchange_api(ts.Array)
    assert api.version.major == 1 and api.version.minor >= 2 and api.prev_api is None
    out = ctypes.c_void_p(123)
    assert api.current_work_stream(1, 0, ctypes.byref(out)) == 0 and out.value is None  # CPU: no stream
    if ts.cuda_available():
        assert api.current_work_stream(2, 0, ctypes.byref(out)) == 0
        assert (out.value or 0) == ts.current_stream(ts.Device(GPU)).handle
        s = ts.Stream(ts.Device(GPU))
        with ts.cuda.stream(s):
            assert api.current_work_stream(2, 0, ctypes.byref(out)) == 0 and out.value == s.handle


def test_exchange_api_producer_functions_from_c():
    """A foreign consumer's view of tessel's table (through ctypes): export, non-owning view,
    allocation and import of managed tensors."""
    api = _exchange_api(ts.Array)
    x = ts.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), device="cpu")[:, 1::2]
    m = _Managed()
    assert api.managed_tensor_from_py_object_no_sync(x, ctypes.byref(m)) == 0
    t = m.contents.dl_tensor
    assert m.contents.version.major == 1 and m.contents.flags == 0
    assert t.data == x.data_ptr and t.ndim == 2 and (t.device.device_type, t.device.device_id) == (1, 0)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)
    assert [t.shape[i] for i in range(2)] == [3, 2] and [t.strides[i] for i in range(2)] == [4, 2]
    # Back into a tessel array (ownership passes): same memory.
    out = ctypes.c_void_p()
    assert api.managed_tensor_to_py_object_no_sync(m, ctypes.byref(out)) == 0
    y = _object_from_new_reference(out.value)
    assert isinstance(y, ts.Array) and y.data_ptr == x.data_ptr and y.tolist() == x.tolist()
    y[0, 0] = 100
    assert x[0, 0].item() == 100
    # A non-owning DLTensor.
    view = _DLTensor()
    assert api.dltensor_from_py_object_no_sync(x, ctypes.byref(view)) == 0
    assert view.data == x.data_ptr and view.ndim == 2 and view.strides[1] == 2
    # Objects that are not tessel arrays are refused with a Python error.
    with pytest.raises(TypeError):
        api.managed_tensor_from_py_object_no_sync(np.ones(3), ctypes.byref(m))
    # The allocator: a new tessel-owned tensor of the prototype's dtype and shape.
    shape = (ctypes.c_int64 * 2)(2, 5)
    proto = _DLTensor(None, _DLDevice(1, 0), 2, _DLDataType(0, 64, 1), shape, None, 0)
    errors = []
    set_error = _SetError(lambda ctx, kind, message: errors.append((kind, message)))
    assert api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(m), None, set_error) == 0 and not errors
    assert m.contents.dl_tensor.ndim == 2 and m.contents.dl_tensor.data is not None
    assert api.managed_tensor_to_py_object_no_sync(m, ctypes.byref(out)) == 0
    z = _object_from_new_reference(out.value)
    assert z.shape == (2, 5) and z.dtype == ts.int64
    z[...] = 7
    assert z.tolist() == [[7] * 5] * 2
    bad = _DLTensor(None, _DLDevice(1, 0), 1, _DLDataType(2, 8, 1), shape, None, 0)  # float8: unsupported
    assert api.managed_tensor_allocator(ctypes.byref(bad), ctypes.byref(m), None, set_error) == -1
    assert errors and errors[0][0] == b"TypeError" and b"dtype" in errors[0][1]


def test_from_dlpack_of_a_tessel_array_takes_the_exchange_path():
    """ts.from_dlpack(tessel_array) goes through tessel's own table: both sides of the API on the CPU."""
    assert ts._tessel._dlpack_exchange()  # on (the fixture; the default without TESSEL_DLPACK_EXCHANGE=0)
    x = ts.arange(6, dtype=ts.float64, device="cpu")
    before = _hits()
    y = ts.from_dlpack(x)
    assert _hits() == before + 1
    assert y.data_ptr == x.data_ptr and y.tolist() == list(range(6))
    y[0] = 42  # writes through one are seen by the other
    assert x[0].item() == 42
    x[5] = -1
    assert y[5].item() == -1
    # Keep-alive: the producer array goes, the imported view still reads its memory.
    del x
    assert y.tolist() == [42, 1, 2, 3, 4, -1]
    # copy= and device= are honoured after the import.
    c = ts.from_dlpack(y, copy=True)
    assert _hits() == before + 2 and c.data_ptr != y.data_ptr
    c[0] = 0
    assert y[0].item() == 42
    if ts.cuda_available():
        with pytest.raises(ValueError, match="copy=False"):
            ts.from_dlpack(y, device=GPU, copy=False)
        g = ts.from_dlpack(y, device=GPU)
        assert g.device == ts.Device(GPU) and g.tolist() == y.tolist()


def test_exchange_path_keeps_read_only():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    x = ts.asarray(a, device="cpu")  # read-only view of NumPy memory
    before = _hits()
    y = ts.from_dlpack(x)
    assert _hits() == before + 1 and y.data_ptr == x.data_ptr
    _assert_writes_refused(y)


def test_exchange_path_can_be_turned_off():
    x = ts.arange(3, device="cpu")
    previous = ts._tessel._dlpack_exchange(False)
    try:
        before = _hits()
        y = ts.from_dlpack(x)  # through __dlpack__
        assert _hits() == before and y.data_ptr == x.data_ptr
    finally:
        ts._tessel._dlpack_exchange(previous)
    before = _hits()
    ts.from_dlpack(x)
    assert _hits() == before + 1


def test_exchange_path_falls_back_to_dlpack():
    """Producers without a usable table go through __dlpack__: no attribute, a non-capsule or a
    wrongly named capsule, or a table that refuses the object."""
    a = np.arange(5, dtype=np.int32)
    before = _hits()
    p = _RecordingProducer(a)  # no attribute
    assert_close(ts.from_dlpack(p), a)
    assert p.calls == [{"stream": None, "max_version": (1, 0)}]

    class IntAttribute(_RecordingProducer):
        __dlpack_c_exchange_api__ = 12345  # not a capsule: never dereferenced

    class WrongCapsule(_RecordingProducer):
        __dlpack_c_exchange_api__ = np.arange(1).__dlpack__()  # a capsule, but named "dltensor"

    class BorrowedTable(_RecordingProducer):
        # tessel's own table, on objects that are not tessel arrays: managed_tensor_from_py_object
        # raises, the import falls back.
        __dlpack_c_exchange_api__ = ts.Array.__dlpack_c_exchange_api__

    for cls in (IntAttribute, WrongCapsule, BorrowedTable):
        q = cls(a)
        assert_close(ts.from_dlpack(q), a)
        assert len(q.calls) == 1, cls.__name__
    assert _hits() == before
    assert ts.from_dlpack(np.arange(3)).tolist() == [0, 1, 2]  # NumPy has no table (yet): __dlpack__


@needs_cuda
def test_exchange_path_waits_for_a_pending_tessel_write():
    """A tessel array written on another stream (an ElementwiseKernel launched with stream=
    records the pending write): the exchange export makes tessel's current stream (the work stream
    it reports) wait for the write, so a read of the import sees 1, not 0 (twice: the reused event)."""
    spin = ts.ElementwiseKernel("float32 a", "float32 y",
                                "{ long long spin_start = clock64(); while (clock64() - spin_start < 100000000LL) {} } y = a + 1.0f",
                                "spin_then_write")
    producer = ts.Stream()
    for _ in range(2):
        src = ts.zeros((1,), dtype=ts.float32, device=GPU)
        x = ts.zeros((1,), dtype=ts.float32, device=GPU)
        ts.synchronize(GPU)
        spin(src, x, stream=producer)  # ~50 ms on `producer`, then x[0] = 1
        before = _hits()
        y = ts.from_dlpack(x)  # a new storage over x's memory: only the hand-over orders the read
        assert _hits() == before + 1
        assert (y + 0.0).item() == 1.0


def _torch_with_exchange_api():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not (hasattr(torch.Tensor, "__dlpack_c_exchange_api__") or hasattr(torch.Tensor, "__c_dlpack_exchange_api__")):
        pytest.skip(f"torch {torch.__version__} has no DLPack C exchange API")
    return torch


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_torch_exchange_fast_path(where):
    torch = _torch_with_exchange_api()
    if where == "cuda" and not (ts.cuda_available() and torch.cuda.is_available()):
        pytest.skip("needs a CUDA device")
    t = torch.arange(12, dtype=torch.float32, device=where).reshape(3, 4)
    before = _hits()
    x = ts.from_dlpack(t)
    assert _hits() == before + 1, "ts.from_dlpack(torch tensor) did not use torch's exchange API"
    assert x.data_ptr == t.data_ptr() and x.shape == (3, 4) and x.device == ts.Device("cpu" if where == "cpu" else GPU)
    t[0, 0] = 42  # torch writes, tessel reads
    if where == "cuda":
        torch.cuda.synchronize()
    assert x[0, 0].item() == 42
    x[2, 3] = -5  # tessel writes, torch reads
    ts.synchronize(x.device)
    assert t[2, 3].item() == -5
    back = torch.from_dlpack(x)  # and back: the round trip shares memory
    assert back.data_ptr() == t.data_ptr()
    # Keep-alive: the torch tensor goes, the tessel view still reads.
    expected = t.cpu().numpy().copy()
    del t, back
    assert_close(x, expected)
    # Strided views keep their strides.
    u = torch.arange(24, dtype=torch.float64, device=where).reshape(4, 6)[::2, 1::3]
    assert_close(ts.from_dlpack(u), u.cpu().numpy())


@needs_cuda
def test_torch_exchange_waits_for_torchs_side_stream():
    """The no-sync exchange: tessel's stream must wait for torch's current stream itself. torch
    writes after a long sleep on a side stream; the import, made while that stream is torch's
    current one, is read on tessel's stream and must see the write (twice: the reused event)."""
    torch = _torch_with_exchange_api()
    side = torch.cuda.Stream()
    for _ in range(2):
        t = torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time on the side stream
            t.fill_(1.0)
            before = _hits()
            x = ts.from_dlpack(t)  # torch's current work stream is `side` here
        assert _hits() == before + 1
        assert (x + 0.0).item() == 1.0  # read on tessel's current stream
        torch.cuda.synchronize()


def test_export_to_through_an_exchange_table():
    """ts.export_to(x, cls) hands x to cls's library through cls's table; on the CPU, tessel's own
    table is the consumer."""
    x = ts.arange(5, dtype=ts.int32, device="cpu")
    y = ts.export_to(x, ts.Array)
    assert isinstance(y, ts.Array) and y.data_ptr == x.data_ptr and y.tolist() == [0, 1, 2, 3, 4]
    y[0] = 9
    assert x[0].item() == 9
    a = np.arange(3, dtype=np.float32)
    a.flags.writeable = False
    r = ts.export_to(ts.asarray(a, device="cpu"), ts.Array)  # the read-only flag travels
    with pytest.raises(ValueError, match="read-only"):
        r[0] = 1
    with pytest.raises(TypeError, match="no DLPack C exchange API"):
        ts.export_to(x, np.ndarray)
    with pytest.raises(TypeError, match="must be a type"):
        ts.export_to(x, np.ones(3))
    with pytest.raises(TypeError, match="must be a tessel.Array"):
        ts.export_to(np.ones(3), ts.Array)
    assert ts._dlpack_fast_path_hits is ts._tessel._dlpack_fast_path_hits


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_torch_round_trip_through_exchange_tables(where):
    """torch -> tessel -> torch with both halves through the C tables (ts.from_dlpack and
    ts.export_to(x, torch.Tensor)): the same memory, no copies."""
    torch = _torch_with_exchange_api()
    if where == "cuda" and not (ts.cuda_available() and torch.cuda.is_available()):
        pytest.skip("needs a CUDA device")
    t = torch.arange(6, dtype=torch.float32, device=where)
    back = ts.export_to(ts.from_dlpack(t), torch.Tensor)
    assert type(back) is torch.Tensor and back.data_ptr() == t.data_ptr() and torch.equal(back, t)
    back[1] = 50
    assert t[1].item() == 50


@needs_cuda
def test_export_to_torch_waits_for_tessels_stream():
    """ts.export_to(x, torch.Tensor): torch's current stream waits for tessel's pending kernel."""
    torch = _torch_with_exchange_api()
    from test_errors_streams_kernels import _SPIN

    kernel = ts.RawKernel(_SPIN, "spin")
    side = torch.cuda.Stream()
    for _ in range(2):
        x = ts.zeros((1,), dtype=ts.float32, device=GPU)
        ts.synchronize(GPU)
        kernel((1,), (1,), (np.int64(100_000_000), x))  # ~50 ms on tessel's stream, then x[0] = 1
        with torch.cuda.stream(side):
            t = ts.export_to(x, torch.Tensor)
            u = t + 0.0  # queued on torch's side stream
            assert u.item() == 1.0  # read on the side stream too
