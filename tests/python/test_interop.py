"""Zero-copy interop: DLPack with NumPy (runs everywhere), torch/cupy/numba/jax (GPU machine),
__cuda_array_interface__, and the bad inputs of issue 4."""
import sys

import numpy as np
import pytest

import tessel as ts
from conftest import assert_close

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
    x = ts.arange(10, dtype=ts.float32, device="cuda")
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
    assert x.device == ts.Device("cuda:0") and x.shape == (3, 4)
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
            ts.from_dlpack(np.ones(3, np.float32), device="cuda:0", copy=False)
    # copy=True gives an independent array.
    a = np.ones(3, np.float32)
    y = ts.from_dlpack(a, copy=True)
    a[0] = 5
    assert y[0].item() == 1


@needs_cuda
def test_from_dlpack_cuda_stream_handshake():
    """tessel's current stream goes to the producer: 1 for the legacy default stream, else its handle."""
    x = ts.arange(4, dtype=ts.float32, device="cuda")

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
    default = ts.current_stream(ts.Device("cuda:0")).handle
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
    x = ts.arange(4, dtype=ts.float32, device="cuda")

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
        x = ts.zeros((1,), dtype=ts.float32, device="cuda:0")
        ts.synchronize("cuda:0")
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
        x = ts.zeros((1,), dtype=ts.float32, device="cuda:0")
        ts.synchronize("cuda:0")
        kernel((1,), (1,), (np.int64(100_000_000), x), stream=producer)  # ~50 ms, then x[0] = 1
        iface = dict(x.__cuda_array_interface__)
        iface["stream"] = producer.handle
        y = ts.asarray(Holder(iface))
        assert (y + 0.0).item() == 1.0
