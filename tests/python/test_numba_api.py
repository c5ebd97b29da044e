"""tessel.numba's API: Numba's types, device arrays, streams, events, devices, the errors for
what is not provided, cuda.random's generator against a pure-Python reference of Numba's, and
cuda.jit's forms, options and dispatcher (the Numba programs themselves are in
test_numba_programs.py; the kernel language in test_kernel_lang.py). Every test that takes
`backend` runs with the CPU backend selected and, where there is a GPU, with CUDA."""
import asyncio
import io
import contextlib
import threading

import numpy as np
import pytest

import tessel as ts
import tessel.numba as numba
from tessel.numba import cuda
from tessel.numba.cuda import libdevice
from tessel.numba.cuda import random as curandom

from conftest import GPU, unavailable_reason


@pytest.fixture(params=["cpu", "cuda"])
def backend(request):
    if request.param == "cuda":
        reason = unavailable_reason(GPU)
        if reason:
            pytest.skip(reason)
        cuda.select_device(GPU)
    else:
        cuda.select_device("cpu")
    yield request.param
    cuda.close()  # also forgets the selection


# ---------------------------------------------------------------- types
def test_scalar_types_have_dtypes_and_cast():
    assert numba.float32.dtype == np.dtype("float32") and numba.float32.tessel_dtype == ts.float32
    assert numba.boolean is numba.bool_ and numba.boolean.dtype == np.dtype(bool)
    assert numba.intp is numba.int64 and numba.uintp is numba.uint64
    assert numba.float64(1.5) == np.float64(1.5) and type(numba.float32(1)) is np.float32
    assert numba.int8(300) == np.int8(44) and numba.uint32(-1) == np.uint32(2**32 - 1)
    assert numba.int32(-3.7) == -3 and type(numba.int32(-3.7)) is np.int32
    assert numba.complex64(1 + 2j) == np.complex64(1 + 2j)
    assert numba.complex64.underlying_float is numba.float32
    assert numba.types.complex128.underlying_float is numba.float64
    assert numba.float16(ts.asarray(2.0, device="cpu")) == np.float16(2.0)


def test_array_types_and_signatures():
    assert numba.float32[:] == numba.types.Array(numba.float32, 1, "A")
    assert numba.float32[::1].layout == "C" and numba.float32[:, ::1].layout == "C"
    assert numba.float32[::1, :].layout == "F" and numba.int64[:, :, :].ndim == 3
    assert numba.float32[:, ::1].dtype is numba.float32 and str(numba.float32[:, ::1]) == "array(float32, 2d, C)"
    with pytest.raises(TypeError):
        numba.float32[:3]
    sig = numba.void(numba.float32[:], numba.float64)
    assert sig.return_type is numba.void and sig.args == (numba.float32[:], numba.float64)
    assert numba.types.parse_signature(sig) == (numba.void, [numba.float32[:], numba.float64])
    assert numba.parse_signature("void(float32[:], float32[:])") == (numba.void, [numba.float32[:]] * 2)
    assert numba.parse_signature("float32(f4, int32)") == (numba.float32, [numba.float32, numba.int32])
    assert numba.parse_signature("(float64[:, ::1], int64)") == (None, [numba.float64[:, ::1], numba.int64])
    assert numba.parse_signature("void(types.uint64[::1, :])") == (numba.void, [numba.uint64[::1, :]])
    assert numba.parse_signature((numba.int32, "float32[:]")) == (None, [numba.int32, numba.float32[:]])
    with pytest.raises(TypeError, match="unknown type 'floot32'"):
        numba.parse_signature("void(floot32[:])")
    with pytest.raises(TypeError):
        numba.parse_signature("void(__import__('os'))")


def test_from_dtype_typeof_and_aliases():
    assert numba.from_dtype(np.dtype("int16")) is numba.int16 and numba.from_dtype(ts.float64) is numba.float64
    assert numba.typeof(np.zeros((2, 3), np.float32)) == numba.float32[:, ::1]
    assert numba.typeof(np.zeros((2, 3)).T) == numba.float64[::1, :]
    assert numba.typeof(np.zeros((4, 4))[:, ::2]) == numba.float64[:, :]
    assert numba.typeof(cuda.to_device(np.zeros(3, np.int32))) == numba.int32[::1]
    assert numba.typeof(2.0) is numba.float64 and numba.typeof(True) is numba.boolean
    assert cuda.types is numba.types and cuda.float32 is numba.float32
    rec = numba.from_dtype(curandom.xoroshiro128p_dtype)     # Numba's record type
    assert isinstance(rec, numba.types.Record) and rec.size == 16 and rec.fields["s1"] == (numba.uint64, 8)
    assert numba.typeof(np.zeros(2, curandom.xoroshiro128p_dtype)) == rec[::1]
    with pytest.raises(NotImplementedError, match="from_dtype"):
        numba.from_dtype(np.dtype("U3"))


# ---------------------------------------------------------------- device arrays
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64", "float16", "float32", "float64",
                                   "complex64", "complex128"])
def test_to_device_round_trip(backend, dtype):
    host = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    d = cuda.to_device(host)
    assert isinstance(d, cuda.devicearray.DeviceNDArray)
    assert d.__tessel_array__.device.type == backend
    assert (d.shape, d.dtype, d.size, d.ndim) == (host.shape, host.dtype, host.size, host.ndim)
    assert (d.strides, d.nbytes, d.itemsize, len(d)) == (host.strides, host.nbytes, host.itemsize, 2)
    back = d.copy_to_host()
    assert back.dtype == host.dtype and np.array_equal(back, host)
    host[0, 0, 0] = 1
    assert d[0, 0, 0] == 0  # to_device copied (also on the CPU backend)


def test_empty_and_zero_d_arrays(backend):
    e = cuda.to_device(np.zeros((0, 3), np.float32))
    assert e.shape == (0, 3) and e.copy_to_host().shape == (0, 3)
    z = cuda.to_device(np.array(2.5))
    assert z.shape == () and z.copy_to_host()[()] == 2.5 and z[()] == 2.5


def test_layouts(backend):
    host = np.arange(12.0).reshape(3, 4)
    f = cuda.to_device(np.asfortranarray(host))
    assert f.is_f_contiguous() and not f.is_c_contiguous() and f.strides == (8, 24)
    assert f.copy_to_host().flags.f_contiguous and np.array_equal(f.copy_to_host(), host)
    assert cuda.device_array((2, 3), order="F").strides == (8, 16)
    assert cuda.device_array((2, 3), dtype=np.int32).strides == (12, 4)
    assert cuda.device_array(5, dtype=numba.float32).dtype == np.float32
    permuted = np.zeros((3, 4, 5)).transpose(1, 0, 2)
    like = cuda.device_array_like(permuted)
    assert like.shape == permuted.shape and like.strides == permuted.strides
    assert cuda.device_array((2, 3), strides=(8, 16)).is_f_contiguous()
    with pytest.raises(NotImplementedError, match="strides"):
        cuda.device_array((2, 3), strides=(8, 8))


def test_to_device_keeps_numba_layouts_and_refuses_non_contiguous_arrays(backend):
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = cuda.to_device(host.T)                          # Fortran-contiguous: strides kept
    assert t.strides == host.T.strides and t.is_f_contiguous() and np.array_equal(t.copy_to_host(), host.T)
    row = np.broadcast_to(np.arange(6.0), (4, 6))       # broadcast: the core copied, zero strides kept
    d = cuda.to_device(row)
    assert d.strides == (0, 8) and d.alloc_size == 48 and not d.is_c_contiguous()
    assert np.array_equal(d.copy_to_host(), row)
    col = cuda.to_device(np.broadcast_to(np.arange(4.0)[:, None], (4, 6)))
    assert col.strides == (8, 0) and np.array_equal(col.copy_to_host()[:, 5], np.arange(4.0))
    for view in (host[:, ::2], host[::-1], host[1:3, 1:3]):
        with pytest.raises(ValueError, match="non-contiguous buffer"):
            cuda.to_device(view)
    dev = cuda.to_device(host)
    assert dev.alloc_size == 96 and dev[1].alloc_size == 24 and dev[:, ::2].alloc_size == 92
    assert cuda.device_array(0).alloc_size == 0


def test_copy_to_host_into_given_arrays(backend):
    host = np.arange(12, dtype=np.int64).reshape(3, 4)
    d = cuda.to_device(host)
    out = np.zeros((3, 4), dtype=np.int64)
    assert d.copy_to_host(out) is out and np.array_equal(out, host)
    fortran = np.zeros((3, 4), dtype=np.int64, order="F")
    assert d.copy_to_host(fortran) is fortran and np.array_equal(fortran, host)
    s = cuda.stream()
    out2 = cuda.pinned_array((3, 4), dtype=np.int64)
    d.copy_to_host(out2, stream=s)
    s.synchronize()
    assert np.array_equal(out2, host)
    with pytest.raises(TypeError, match="incompatible dtype"):
        d.copy_to_host(np.zeros((3, 4), np.float64))
    with pytest.raises(ValueError, match="incompatible shape"):
        d.copy_to_host(np.zeros((4, 3), np.int64))
    assert np.array_equal(d[1:].copy_to_host(out[1:]), host[1:])


def test_copy_to_host_on_streams_into_pinned_memory(backend):
    # Asynchronous into pinned memory (as Numba's): correct once the stream is synchronized, from
    # views too, on several streams at once; into pageable memory finished on return.
    rng = np.random.default_rng(7)
    chunks = [rng.standard_normal(n).astype(np.float32) for n in (1 << 18, 1000, 1)]
    streams = [cuda.stream() for _ in chunks]
    outs = [cuda.pinned_array(c.shape, np.float32) for c in chunks]
    for o in outs:
        o[:] = np.nan
    for s, c, o in zip(streams, chunks, outs):
        cuda.to_device(c, stream=s).copy_to_host(o, stream=s)
    for s in streams:
        s.synchronize()
    for c, o in zip(chunks, outs):
        assert np.array_equal(o, c)
    mat = rng.standard_normal((64, 48)).astype(np.float32)
    d = cuda.to_device(mat)
    s = cuda.stream()
    view_out = cuda.pinned_array((64, 24), np.float32)
    view_out[:] = np.nan
    d[:, ::2].copy_to_host(view_out, stream=s)
    s.synchronize()
    assert np.array_equal(view_out, mat[:, ::2])
    pageable = np.full((64, 48), np.nan, np.float32)
    assert d.copy_to_host(pageable, stream=s) is pageable and np.array_equal(pageable, mat)


def test_copy_to_device(backend):
    d = cuda.device_array((2, 3), dtype=np.float32)
    d.copy_to_device(np.ones((2, 3), np.float32))
    assert np.array_equal(d.copy_to_host(), np.ones((2, 3)))
    other = cuda.to_device(np.full((2, 3), 7, np.float32))
    d.copy_to_device(other, stream=cuda.stream())
    cuda.synchronize()
    assert np.array_equal(d.copy_to_host(), np.full((2, 3), 7))
    cuda.to_device(np.arange(6, dtype=np.float32).reshape(2, 3), to=d)
    assert d[1, 2] == 5
    with pytest.raises(ValueError, match="incompatible shape"):
        d.copy_to_device(np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="incompatible dtype"):
        d.copy_to_device(np.zeros((2, 3), np.float64))
    column = cuda.device_array(3)
    column.copy_to_device(np.ones((3, 1)))  # shapes equal but for axes of size 1, as Numba allows
    assert np.array_equal(column.copy_to_host(), np.ones(3))
    row = cuda.device_array((1, 3))
    row.copy_to_device(cuda.to_device(np.arange(3.0)))
    assert np.array_equal(row.copy_to_host(), [[0.0, 1.0, 2.0]])
    blank = cuda.to_device(np.arange(3.0), copy=False)
    assert blank.shape == (3,) and blank.dtype == np.float64


def test_indexing_and_views(backend):
    host = np.arange(20, dtype=np.float32).reshape(4, 5)
    d = cuda.to_device(host)
    item = d[2, 3]
    assert item == 13 and type(item) is np.float32
    assert d[-1, -1] == 19
    with pytest.raises(IndexError):
        d[4, 0]
    row = d[1]
    assert isinstance(row, cuda.devicearray.DeviceNDArray) and row.shape == (5,)
    col = d[:, 2]
    assert col.strides == (20,) and np.array_equal(col.copy_to_host(), host[:, 2])
    view = d[1:3, ::2]
    assert np.array_equal(view.copy_to_host(), host[1:3, ::2])
    view[0, 0] = -1  # a view: writes land in d
    assert d[1, 0] == -1
    d[0] = 100
    d[3, :] = np.arange(5)
    d[2, 1:3] = cuda.to_device(np.array([7, 8], np.float32))
    expect = host.copy()
    expect[1, 0], expect[0], expect[3, :], expect[2, 1:3] = -1, 100, np.arange(5), [7, 8]
    assert np.array_equal(d.copy_to_host(), expect)
    d.setitem((0, 0), 5, stream=cuda.stream())
    assert d.getitem((0, 0)) == 5
    assert [float(v) for v in cuda.to_device(np.arange(3.0))] == [0.0, 1.0, 2.0]


def test_reshape_ravel_split_transpose_view_squeeze(backend):
    host = np.arange(12, dtype=np.int32).reshape(3, 4)
    d = cuda.to_device(host)
    r = d.reshape(4, 3)
    assert r.shape == (4, 3) and r.__tessel_array__.data_ptr == d.__tessel_array__.data_ptr
    assert d.reshape((2, -1)).shape == (2, 6) and d.ravel().shape == (12,)
    with pytest.raises(NotImplementedError, match="requires copying"):
        d[:, :3].reshape(9)
    with pytest.raises(NotImplementedError, match="requires copying"):
        d[:, :3].ravel()
    with pytest.raises(ValueError):
        d.reshape(5)
    f = cuda.to_device(np.asfortranarray(host))
    assert np.array_equal(f.reshape((2, 6), order="F").copy_to_host(), host.reshape((2, 6), order="F"))
    assert np.array_equal(f.ravel(order="F").copy_to_host(), host.ravel(order="F"))
    parts = list(cuda.to_device(np.arange(10)).split(4))
    assert [p.copy_to_host().tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    t = d.T
    assert t.shape == (4, 3) and t.is_c_contiguous() and np.array_equal(t.copy_to_host(), host.T)
    assert np.array_equal(d.transpose((1, 0)).copy_to_host(), host.T)
    as_bytes = d.view(np.uint8)
    assert as_bytes.shape == (3, 16) and np.array_equal(as_bytes.copy_to_host(), host.view(np.uint8))
    as_float = d.view(np.float32)
    assert np.array_equal(as_float.copy_to_host(), host.view(np.float32))
    assert d[None, 1:2].squeeze().shape == (4,) and d[1:2].squeeze(0).shape == (4,)
    assert d.flags["C_CONTIGUOUS"] and not d.flags["F_CONTIGUOUS"]


def test_array_protocols_and_tessel_conversion(backend):
    host = np.arange(6.0)
    d = cuda.to_device(host)
    copy = np.asarray(d)
    copy[0] = 99  # __array__ copies, as Numba
    assert d[0] == 0
    x = ts.asarray(d)  # no copy
    assert isinstance(x, ts.Array) and x.data_ptr == d.__tessel_array__.data_ptr
    x[1] = 42
    assert d[1] == 42
    assert float(ts.sum(x)) == float(host.sum()) - 1 + 42
    assert d.__dlpack_device__() == x.__dlpack_device__()
    if backend == "cpu":
        assert not hasattr(d, "__cuda_array_interface__")
        assert np.from_dlpack(d)[1] == 42
    else:
        cai = d.__cuda_array_interface__
        assert cai["shape"] == (6,) and cai["typestr"] == "<f8" and cai["data"][0] == x.data_ptr
        again = cuda.from_cuda_array_interface(cai, owner=d)
        assert again[1] == 42
        real_numba_cuda = _real_numba_cuda()
        if real_numba_cuda is not None:  # Numba's own kernels take these arrays through the interface
            @real_numba_cuda.jit
            def add_one(a):
                i = real_numba_cuda.grid(1)
                if i < a.size:
                    a[i] += 1

            add_one[1, 32](d)
            real_numba_cuda.synchronize()
            assert d[1] == 43 and d[0] == 1
    wrapped = cuda.as_cuda_array(x)
    assert wrapped.__tessel_array__ is x and cuda.is_cuda_array(d) and cuda.is_cuda_array(x)
    assert cuda.as_cuda_array(d) is d and not cuda.is_cuda_array(host)
    with pytest.raises(TypeError, match="cuda array interface"):
        cuda.as_cuda_array(host)
    assert cuda.to_device(x).__tessel_array__ is x  # device memory: no copy


def _real_numba_cuda():
    """numba-cuda itself, where it is installed and sees a GPU; else None."""
    np.row_stack = getattr(np, "row_stack", np.vstack)  # numba-cuda reads it under NumPy 2.x
    try:
        from numba import cuda as real
    except Exception:  # noqa: BLE001 - not installed, or no CUDA driver
        return None
    try:
        return real if real.is_available() else None
    except Exception:  # noqa: BLE001
        return None


def test_bind_and_stream_attribute(backend):
    s = cuda.stream()
    d = cuda.to_device(np.arange(4.0), stream=s)
    assert d.stream is s
    bound = cuda.to_device(np.arange(4.0)).bind(s)
    assert bound.stream is s and np.array_equal(bound.copy_to_host(), np.arange(4.0))


def test_host_memory_helpers(backend):
    p = cuda.pinned_array((2, 3), dtype=np.float32)
    assert isinstance(p, np.ndarray) and p.shape == (2, 3) and p.dtype == np.float32
    pf = cuda.pinned_array((2, 3), order="F")
    assert pf.flags.f_contiguous and pf.dtype == np.float64
    m = cuda.mapped_array(4, dtype=np.int32)
    m[:] = 3
    assert isinstance(m, np.ndarray) and m.sum() == 12
    assert cuda.pinned_array_like(np.zeros((2, 2), np.int8)).dtype == np.int8
    # *_array_like of a view: dense, in the view's axis order, as NumPy's zeros_like (and Numba's)
    for view in (np.zeros((10, 12), order="F")[::2, ::2], np.zeros((4, 5, 6)).transpose(1, 2, 0)[:, ::2]):
        for like in (cuda.pinned_array_like(view), cuda.mapped_array_like(view)):
            assert like.shape == view.shape and like.strides == np.zeros_like(view).strides
            like[...] = 7.0
            assert (like == 7.0).all()
    with pytest.raises(NotImplementedError, match="strides"):
        cuda.pinned_array((2, 3), strides=(8, 8))
    a = np.arange(3.0)
    with cuda.pinned(a):
        d = cuda.to_device(a)
    assert np.array_equal(d.copy_to_host(), a)
    if backend == "cpu":
        with cuda.mapped(a) as mapped:
            mapped[0] = 9  # the host array's own memory
        assert a[0] == 9
    else:
        with pytest.raises(NotImplementedError, match="tessel.numba.cuda.mapped"):
            with cuda.mapped(a):
                pass


# ---------------------------------------------------------------- streams and events
def test_streams(backend):
    s = cuda.stream()
    assert isinstance(int(s), int) and int(s.handle) == int(s) and s.tessel_stream.device.type == backend
    assert (s.handle.value is None) == (int(s) == 0)
    if backend == "cuda":
        assert int(s) != 0 and repr(s) == f"<CUDA stream {int(s)}>"
        assert repr(cuda.default_stream()) == "<Default CUDA stream>" and int(cuda.default_stream()) == 0
        assert int(cuda.per_thread_default_stream()) == 2
        assert cuda.external_stream(int(s)).tessel_stream.handle == int(s)
    for maker in (cuda.default_stream, cuda.legacy_default_stream, cuda.per_thread_default_stream):
        maker().synchronize()
    s.synchronize()
    with s.auto_synchronize() as same:
        assert same is s
        d = cuda.to_device(np.arange(4.0), stream=s)
    with s:
        assert ts.cuda.current_stream(s.tessel_stream.device) == (s.tessel_stream if backend == "cuda" else ts.Stream.cpu())
        y = ts.asarray(d) * 2
    assert np.array_equal(np.asarray(y), np.arange(4.0) * 2)
    assert s.query() in (True, False)
    assert s.__cuda_stream__() == (0, int(s))


def test_stream_callbacks_and_async_done(backend):
    s = cuda.stream()
    cuda.to_device(np.arange(1000.0), stream=s)
    seen, done = [], threading.Event()

    def callback(stream, status, arg):
        seen.append((stream, status, arg))
        if len(seen) == 2:
            done.set()

    s.add_callback(callback, "first")
    s.add_callback(callback, "second")
    assert done.wait(10)
    assert seen == [(s, 0, "first"), (s, 0, "second")]

    async def wait():
        return await s.async_done()

    assert asyncio.run(wait()) is s


def test_events(backend):
    s = cuda.stream()
    start, end = cuda.event(), cuda.event()
    start.record(s)
    d = cuda.to_device(np.ones(1 << 16), stream=s)
    end.record(s)
    end.synchronize()
    assert end.query() and start.query()
    ms = start.elapsed_time(end)
    assert ms >= 0 and cuda.event_elapsed_time(start, end) == ms
    other = cuda.stream()
    end.wait(other)  # later work on `other` waits for the event
    end.wait()
    assert float(ts.sum(ts.asarray(d))) == 1 << 16
    default = cuda.event()
    default.record()
    default.synchronize()
    untimed = cuda.event(timing=False)
    untimed.record()
    with pytest.raises(Exception, match="timing"):
        untimed.elapsed_time(default)
    fresh = cuda.event()
    assert fresh.query()


# ---------------------------------------------------------------- devices
def test_devices(backend):
    dev = cuda.get_current_device()
    assert dev.WARP_SIZE == 32 and dev.MAX_THREADS_PER_BLOCK >= 1024 and dev.MULTIPROCESSOR_COUNT >= 1
    assert isinstance(dev.compute_capability, tuple) and len(dev.compute_capability) == 2
    assert isinstance(dev.name, str) and isinstance(dev.id, int)
    assert len(cuda.gpus) >= 1 and cuda.gpus.current == dev and cuda.list_devices() is cuda.gpus
    with cuda.gpus[dev.id if backend == "cuda" else 0]:
        assert cuda.get_current_device().id == (dev.id if backend == "cuda" else 0)
    free, total = cuda.current_context().get_memory_info()
    assert 0 <= free <= total and total > 0
    assert cuda.current_context().device == dev
    cuda.synchronize()
    assert cuda.is_available() is True and cuda.backend() == backend
    assert cuda.is_supported_version() and cuda.is_float16_supported()
    assert isinstance(cuda.runtime.get_version(), tuple)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cuda.detect() is True
    assert "Summary" in out.getvalue()
    with pytest.raises(NotImplementedError, match="Device.no_such_thing"):
        dev.no_such_thing


def test_select_device_without_cuda():
    if ts.cuda_available():
        pytest.skip("tests the machine without CUDA")
    try:
        assert cuda.select_device(0).tessel_device == ts.Device("cpu")
        with pytest.raises(cuda.CudaSupportError):
            cuda.select_device(1)
        assert cuda.cuda_error()
    finally:
        cuda.close()


def test_profiling():
    cuda.profile_start()
    cuda.to_device(np.ones(4)).copy_to_host()
    session = cuda.profile_stop()
    assert isinstance(session, ts.Profile) and not session.recording
    assert cuda.profile_stop() is None
    with cuda.profiling():
        pass


def _axpy(r, a, x, y):
    i = cuda.grid(1)
    if i < r.size:
        r[i] = a * x[i] + y[i]


def test_compile_ptx_gives_the_kernels_ptx_for_a_compute_capability():
    from tessel import _tessel

    sig = "void(float32[:], float32, float32[:], float32[:])"
    with pytest.raises(NotImplementedError, match=r"compile_ptx\(device=True\) is not supported"):
        cuda.compile_ptx(_axpy, sig, device=True)
    with pytest.raises(TypeError, match="void return type"):
        cuda.compile_ptx(_axpy, "float32(float32[:], float32, float32[:], float32[:])")
    with pytest.raises(ValueError, match=r"compile_ptx: cc is a compute capability \(major, minor\), got \(9,\)"):
        cuda.compile_ptx(_axpy, sig, cc=(9,))
    if not _tessel._nvrtc_available():   # a build without CUDA says so
        with pytest.raises(ts.DeviceError, match="needs NVRTC"):
            cuda.compile_ptx(_axpy, sig)
        return
    ptx, resty = cuda.compile_ptx(_axpy, sig, cc=(8, 0), fastmath=True)
    assert resty == numba.void and ".target sm_80" in ptx and ".entry" in ptx
    assert cuda.compile(_axpy, sig, cc=(9, 0))[0].count(".target sm_90") == 1
    assert ".entry" in cuda.compile_ptx_for_current_device(_axpy, sig)[0]


# ---------------------------------------------------------------- what is not provided
def test_unsupported_names_raise_errors_naming_them():
    with cuda.defer_cleanup():   # accepted: tessel's frees are stream-ordered, nothing to defer
        assert cuda.device_array(4).size == 4
    for name in ("managed_array", "open_ipc_array", "float32x4", "no_such_api"):
        with pytest.raises(NotImplementedError, match=f"tessel.numba.cuda.{name} is not supported"):
            getattr(cuda, name)
        assert not hasattr(cuda, name)  # the error is also an AttributeError
    with pytest.raises(NotImplementedError, match="tessel.numba.stencil is not supported"):
        numba.stencil
    with pytest.raises(NotImplementedError, match="random.xoroshiro128p_type"):
        curandom.xoroshiro128p_type
    with pytest.raises(NotImplementedError, match="cudadrv.driver"):
        cuda.cudadrv.driver
    with pytest.raises(NotImplementedError, match="gpu_data"):
        cuda.to_device(np.ones(2)).gpu_data
    with pytest.raises(NotImplementedError, match="tessel.numba.cuda.DeviceNDArray.get_ipc_handle"):
        cuda.to_device(np.ones(2)).get_ipc_handle()
    with pytest.raises(NotImplementedError, match="tessel.numba.cuda.Stream.no_such_method"):
        cuda.stream().no_such_method()
    with pytest.raises(NotImplementedError, match="tessel.numba.cuda.Event.handle"):
        cuda.event().handle
    for name in ("jit", "grid", "shared", "atomic"):  # the kernel compiler's, or an error naming them
        try:
            getattr(cuda, name)
        except NotImplementedError as error:
            assert f"tessel.numba.cuda.{name}" in str(error)
    assert cuda.cudadrv.devicearray.DeviceNDArray is cuda.devicearray.DeviceNDArray is cuda.DeviceNDArray


# ---------------------------------------------------------------- cuda.random
_M64 = (1 << 64) - 1


def _ref_splitmix(seed):
    z = (seed + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _ref_rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & _M64


def _ref_next(s):
    s0, s1 = s
    result = (s0 + s1) & _M64
    s1 ^= s0
    s[0] = _ref_rotl(s0, 55) ^ s1 ^ ((s1 << 14) & _M64)
    s[1] = _ref_rotl(s1, 36)
    return result


def _ref_jump(s):
    a0 = a1 = 0
    for word in (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922):
        for b in range(64):
            if (word >> b) & 1:
                a0 ^= s[0]
                a1 ^= s[1]
            _ref_next(s)
    s[0], s[1] = a0, a1


def _ref_states(n, seed, subsequence_start=0):
    """Numba's init_xoroshiro128p_states_cpu, one jump at a time, in Python integers."""
    z = _ref_splitmix(seed & _M64)
    s = [z, z]
    for _ in range(subsequence_start):
        _ref_jump(s)
    out = []
    for i in range(n):
        if i:
            s = list(out[-1])
            _ref_jump(s)
        out.append(tuple(s))
    return out


def test_splitmix_known_value():
    # SplitMix64's first output for seed 0 (the published test value).
    assert _ref_splitmix(0) == 0xE220A8397B1DCDAF
    assert curandom._host_states(1, 0).tolist() == [[0xE220A8397B1DCDAF, 0xE220A8397B1DCDAF]]


@pytest.mark.parametrize("n, seed, start", [(1, 0, 0), (33, 1, 0), (40, 12345, 3), (9, 2**64 - 1, 1),
                                            (7, -1, 0), (5, 42, 70)])
def test_rng_states_equal_numbas(backend, n, seed, start):
    states = cuda.random.create_xoroshiro128p_states(n, seed=seed, subsequence_start=start)
    assert states.shape == (n,) and states.dtype == curandom.xoroshiro128p_dtype
    assert states.__tessel_array__.shape == (n, 2) and states.__tessel_array__.dtype == ts.uint64
    host = states.copy_to_host()
    want = _ref_states(n, seed, start)
    assert [(int(r["s0"]), int(r["s1"])) for r in host] == want
    assert tuple(int(v) for v in states[n - 1]) == want[-1]  # one record read to the host


def test_rng_many_states_are_jump_chained():
    states = curandom._host_states(1 << 14, 2024)
    for i in (0, 1, 1000, (1 << 13) - 1, (1 << 13), (1 << 14) - 2):
        s = [int(states[i, 0]), int(states[i, 1])]
        _ref_jump(s)
        assert s == [int(states[i + 1, 0]), int(states[i + 1, 1])]


def test_rng_device_functions_in_python():
    n, seed = 4, 7
    states = curandom._host_states(n, seed)
    ref = [list(s) for s in _ref_states(n, seed)]
    for i in range(n):
        assert [int(curandom.xoroshiro128p_next(states, i)) for _ in range(6)] == [_ref_next(ref[i]) for _ in range(6)]
    # uniform: the top 53 bits times 2**-53 (float32: that value rounded)
    x = _ref_next(ref[0])
    assert curandom.xoroshiro128p_uniform_float64(states, 0) == (x >> 11) * 2.0**-53
    x = _ref_next(ref[1])
    u = curandom.xoroshiro128p_uniform_float32(states, 1)
    assert type(u) is np.float32 and u == np.float32((x >> 11) * 2.0**-53)
    # normal: Box-Muller's cosine branch of two float32 uniforms
    for fn, dtype, rtol in ((curandom.xoroshiro128p_normal_float32, np.float32, 1e-5),
                            (curandom.xoroshiro128p_normal_float64, np.float64, 1e-6)):
        u1 = float(np.float32((_ref_next(ref[2]) >> 11) * 2.0**-53))
        u2 = float(np.float32((_ref_next(ref[2]) >> 11) * 2.0**-53))
        z = fn(states, 2)
        assert type(z) is dtype
        assert z == pytest.approx(np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u2), rel=rtol, abs=rtol)
    curandom.xoroshiro128p_jump(states, 3)
    _ref_jump(ref[3])
    assert [int(v) for v in states[3]] == ref[3]
    curandom.init_xoroshiro128p_state(states, 0, 99)
    assert [int(v) for v in states[0]] == [_ref_splitmix(99)] * 2


def test_rng_uniform_statistics():
    states = curandom._host_states(64, 3)
    values = np.array([curandom.xoroshiro128p_uniform_float64(states, i % 64) for i in range(4096)])
    assert 0 <= values.min() and values.max() < 1 and abs(values.mean() - 0.5) < 0.02


def test_init_states_on_an_existing_array(backend):
    states = cuda.device_array(6, dtype=curandom.xoroshiro128p_dtype)
    curandom.init_xoroshiro128p_states(states, 5, subsequence_start=2)
    host = np.asarray(states)
    assert [(int(r["s0"]), int(r["s1"])) for r in host] == _ref_states(6, 5, 2)
    cpu = np.empty(6, dtype=curandom.xoroshiro128p_dtype)
    curandom.init_xoroshiro128p_states_cpu(cpu, 5, 2)
    assert np.array_equal(cpu, host)


def test_rng_device_functions_in_a_kernel(backend):
    """The device functions compiled into a kernel give what they give in plain Python."""
    pytest.importorskip("tessel.kernel")
    from tessel.numba.cuda.random import (xoroshiro128p_normal_float32, xoroshiro128p_normal_float64,
                                          xoroshiro128p_uniform_float32, xoroshiro128p_uniform_float64)

    @cuda.jit
    def draw(states, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i, 0] = xoroshiro128p_uniform_float32(states, i)
            out[i, 1] = xoroshiro128p_uniform_float64(states, i)
            out[i, 2] = xoroshiro128p_normal_float32(states, i)
            out[i, 3] = xoroshiro128p_normal_float64(states, i)

    n = 100
    states = curandom.create_xoroshiro128p_states(n, seed=11)
    out = cuda.device_array((n, 4), dtype=np.float64)
    draw[(n + 31) // 32, 32](states, out)
    got = out.copy_to_host()
    host = curandom._host_states(n, 11)
    want = np.array([[xoroshiro128p_uniform_float32(host, i), xoroshiro128p_uniform_float64(host, i),
                      xoroshiro128p_normal_float32(host, i), xoroshiro128p_normal_float64(host, i)]
                     for i in range(n)])
    assert np.array_equal(got[:, :2], want[:, :2])  # the uniforms bit for bit
    np.testing.assert_allclose(got[:, 2:], want[:, 2:], rtol=1e-5, atol=1e-5)  # float32 log/cos may differ by an ulp
    assert np.array_equal(np.asarray(states.__tessel_array__), host)  # the states advanced alike


# ---------------------------------------------------------------- kernels: cuda.jit's forms and dispatcher
# (the programs themselves: test_numba_programs.py)
@cuda.jit
def _fill_index(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = i


def test_jit_forms_and_options(backend):
    def body(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] * 2

    from tessel.kernel import DeviceFunction, Kernel

    x = np.arange(8, dtype=np.float32)
    for make in (cuda.jit, cuda.jit(), cuda.jit(fastmath=True, lineinfo=True, cache=True, max_registers=64, opt=False),
                 cuda.jit(launch_bounds=128, lto=False, inline="always", forceinline=True),
                 cuda.jit("void(float32[:], float32[:])"), cuda.jit(["void(float32[:], float32[:])"]),
                 cuda.jit(numba.void(numba.float32[::1], numba.float32[::1])),
                 cuda.jit((numba.float32[:], numba.float32[:]))):
        k = make(body)
        assert isinstance(k, Kernel) and k.py_func is body and k.__name__ == "body"
        y = np.zeros_like(x)
        k[1, 8](x, y)
        np.testing.assert_array_equal(y, x * 2)
    assert cuda.jit("void(float32[:], float32[:])")(body).specialized
    assert not cuda.jit(["void(float32[:], float32[:])"])(body).specialized

    def twice(v):
        return v * 2

    assert isinstance(cuda.jit(device=True)(twice), DeviceFunction)
    assert isinstance(cuda.jit("float32(float32)", device=True)(twice), DeviceFunction)
    assert cuda.jit(device=True)(twice)(3) == 6  # plain Python outside kernels
    with pytest.raises(TypeError, match="unknown option.*nonsense"):
        cuda.jit(nonsense=1)
    with pytest.raises(NotImplementedError, match=r"cuda\.jit\(link=\.\.\.\) is not supported"):
        cuda.jit(link=["kernel.cu"])
    with pytest.raises(TypeError, match="void return type"):
        cuda.jit("float32(float32[:])")(body)


def test_declared_signatures_compile_ahead_and_match_as_numba(backend):
    @cuda.jit(["void(float32[:], float32)", "void(float64[:], float64)"])
    def add_to(a, v):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += v

    assert len(add_to.overloads) == 2  # compiled at decoration
    assert add_to.signatures == [(numba.float32[:], numba.float32), (numba.float64[:], numba.float64)]
    a = cuda.to_device(np.zeros(4, np.float32))
    add_to[1, 4](a, 1.5)  # the Python float is cast to the signature's float32
    add_to[1, 4](a, np.int16(2))
    assert a.copy_to_host().tolist() == [3.5] * 4
    assert len(add_to.overloads) == 2
    with pytest.raises(TypeError, match=r"No matching definition for argument type\(s\) array\(int32, 1d, C\)"):
        add_to[1, 4](np.zeros(4, np.int32), 1)
    b = np.zeros(8)
    add_to[1, 4](b[::2], 1.0)  # a strided array takes the declared any-layout signature
    assert b.tolist() == [1, 0] * 4


def test_dispatcher_api(backend):
    @cuda.jit
    def scale(a, f):
        i = cuda.grid(1)
        if i < a.size:
            a[i] *= f

    a = np.ones(5)
    scale[1, 8](a, 3.0)
    assert a.tolist() == [3.0] * 5
    assert scale.signatures == [(numba.float64[::1], numba.float64)]
    assert scale.definitions is not None and list(scale.overloads) == scale.signatures
    if ts._tessel._nvrtc_available():   # PTX needs NVRTC, not a GPU
        asm = scale.inspect_asm()
        assert list(asm) == scale.signatures and ".visible .entry" in next(iter(asm.values()))
        assert scale.inspect_asm(scale.signatures[0]) == asm[scale.signatures[0]]
    text = io.StringIO()
    scale.inspect_types(file=text)
    assert "scale (array(float64, 1d, C), float64)" in text.getvalue() and "a[i] *= f" in text.getvalue()
    special = scale.specialize(np.ones(3, np.float32), np.float32(2))
    assert special.specialized and special.signatures == [(numba.float32[::1], numba.float32)]
    assert scale.specialize(np.ones(3, np.float32), np.float32(2)) is special
    # Numba's types name a specialization too (the same one), and one is never specialized again
    assert scale.specialize(numba.float32[::1], numba.float32) is special
    by_types = scale.specialize(numba.int32[::1], numba.int32)
    assert by_types is not special and len(scale.specializations) == 2
    assert by_types.signatures == [(numba.int32[::1], numba.int32)]
    with pytest.raises(RuntimeError, match="Dispatcher already specialized"):
        special.specialize(numba.float64[::1], numba.float64)
    with pytest.raises(RuntimeError, match="Dispatcher already specialized"):
        cuda.jit("void(float64[::1], float64)")(scale.py_func).specialize(numba.float64[::1], numba.float64)
    with pytest.raises(TypeError, match="No matching definition"):
        special[1, 4](np.ones(3), 2.0)
    with pytest.raises(NotImplementedError, match=r"Dispatcher\.inspect_sass is not supported"):
        scale.inspect_sass()
    with pytest.raises(ValueError, match="launch configuration"):
        scale(a, 2.0)


def test_forall_launches_blocks_of_1024_by_default(backend):
    @cuda.jit
    def block_shape(out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i, 0] = cuda.blockDim.x
            out[i, 1] = cuda.gridDim.x

    out = np.zeros((3000, 2), np.int64)
    block_shape.forall(3000)(out)
    assert set(map(tuple, out.tolist())) == {(1024, 3)}
    block_shape.forall(3000, tpb=128)(out)
    assert set(map(tuple, out.tolist())) == {(128, 24)}
    block_shape.forall(0)(out)  # nothing to launch


def test_launch_arguments_and_streams(backend):
    a = np.zeros(10)
    _fill_index[1, 16](a)  # NumPy: to the selected device and back
    assert a.tolist() == list(range(10))
    d = cuda.device_array(10, dtype=np.int32)
    s = cuda.stream()
    _fill_index[1, 16, s](d)
    _fill_index[1, 16, s, 0](d[2:])  # a view
    s.synchronize()
    assert d.copy_to_host().tolist() == [0, 1, 0, 1, 2, 3, 4, 5, 6, 7]
    _fill_index[1, 16, cuda.default_stream()](d)
    _fill_index[1, 16, None](ts.asarray(d))  # a tessel array: the same memory
    assert d.copy_to_host().tolist() == list(range(10))
    host_in = np.zeros(4)
    _fill_index[1, 4](cuda.In(host_in))  # copied in, not back
    assert host_in.tolist() == [0.0] * 4
    host_out = np.zeros(4)
    _fill_index[1, 4](cuda.Out(host_out))
    assert host_out.tolist() == [0, 1, 2, 3]
    both = np.zeros(4)
    _fill_index[1, 4](cuda.InOut(both))
    assert both.tolist() == [0, 1, 2, 3]


def test_numpy_arguments_follow_the_selected_device():
    cuda.select_device("cpu")
    try:
        @cuda.jit
        def where(a):
            a[0] = 7

        a = np.zeros(2)
        where[1, 1](a)
        assert a[0] == 7 and where.overloads[next(iter(where.overloads))].target == "cpu"
    finally:
        cuda.close()


def test_debug_mode_raises_index_errors(backend):
    @cuda.jit(debug=True, opt=False)
    def overrun(a):
        a[cuda.grid(1)] = 1.0

    with pytest.raises(IndexError, match=r"kernel 'overrun'.*index 10 is out of bounds for axis 0 with size 10"):
        overrun[1, 16](cuda.device_array(10))

    @cuda.jit(boundscheck=True)
    def overrun2(a):
        a[cuda.grid(1)] = 1.0

    with pytest.raises(IndexError):
        overrun2[1, 16](np.zeros(3))


def test_slice_assignment_of_another_length_raises_in_debug_mode_and_writes_nothing(backend):
    # NumPy raises ValueError for a[0:5] = b[0:3]; in a kernel it is that error in debug mode, and
    # otherwise the thread stops as after any raise: never a read past b's view.
    def body(a, b, c):
        if cuda.grid(1) == 0:
            a[0:5] = b[0:3]
            a[0] = 99.0

    with pytest.raises(ValueError, match=r"kernel 'body'.*slice assignment: the input's shape does not broadcast"):
        cuda.jit(debug=True)(body)[1, 1](np.full(8, -1.0), np.arange(8.0), np.zeros(1))
    a = np.full(8, -1.0)
    cuda.jit(body)[1, 1](a, np.arange(8.0), np.zeros(1))
    assert (a == -1.0).all()

    @cuda.jit(debug=True)
    def fits(a, b, c):
        if cuda.grid(1) == 0:
            a[0:3] = b[0:3]
            c[:, :] = b[0:3]      # broadcast over rows
            c[:, 1:2] = b[5:6]    # an axis of length 1 broadcasts

    a, c = np.full(8, -1.0), np.full((2, 3), -1.0)
    fits[1, 1](a, np.arange(8.0), c)
    assert a[:4].tolist() == [0.0, 1.0, 2.0, -1.0] and c.tolist() == [[0.0, 5.0, 2.0]] * 2


def test_tuples_of_numbers_assigned_to_slices(backend):
    # As NumPy: a tuple is a 1-d array along the view's last axis (broadcast over the others).
    @cuda.jit
    def fill(a, x, cube):
        i = cuda.grid(1)
        if i < a.shape[0]:
            a[i, :] = (x[i], x[i] * 2, 7)
            a[i, 1:2] = (5,)
        if i == 0:
            cube[1, 2] = 1, 2, 3          # a 1-d view of a 3-d array
            cube[0] = 4, 5, 6             # a 2-d view: the tuple broadcast over its rows
            cube[2, :, ::-1] = 0.5, 1.5, 2.5

    a, cube = np.full((4, 3), np.nan), np.full((3, 3, 3), np.nan)
    x = np.arange(4.0) + 0.25
    fill[1, 8](a, x, cube)
    assert np.array_equal(a, np.stack([x, np.full(4, 5.0), np.full(4, 7.0)], axis=1))
    want = np.full((3, 3, 3), np.nan)
    want[1, 2] = 1, 2, 3
    want[0] = 4, 5, 6
    want[2, :, ::-1] = 0.5, 1.5, 2.5
    np.testing.assert_array_equal(cube, want)

    @cuda.jit(debug=True)
    def short(a):
        if cuda.grid(1) == 0:
            a[0, :] = (1, 2)

    with pytest.raises(ValueError, match=r"kernel 'short'.*does not broadcast"):
        short[1, 1](np.zeros((2, 3)))


def test_kernels_with_several_signatures_choose_as_numba(backend):
    def add_kernel(r, x, y):
        r[0] = x + y

    f = cuda.jit(["(float64[::1], float32, float64)", "(float64[::1], float64, float32)",
                  "(float64[::1], int64, int64)"])(add_kernel)
    r = np.full(1, -7.0)
    f[1, 1](r, np.float32(1.5), 2.25)            # an exact match
    assert r[0] == 3.75
    f[1, 1](r, 1, 2)                             # int64, int64 exactly
    assert r[0] == 3.0
    f[1, 1](r, np.int16(1), np.int16(2))         # safe conversions to int64 rate best
    assert r[0] == 3.0
    # two signatures that need one unsafe conversion each: Numba's ambiguity error, naming both
    with pytest.raises(TypeError, match=r"(?s)Ambiguous overloading for kernel 'add_kernel'.*float32, float64\) -> none"
                                        r".*float64, float32\) -> none"):
        f[1, 1](r, 1.0, 2.0)


def test_device_functions_with_several_or_return_less_signatures_cast_as_numba(backend):
    def add(x, y):
        return x + y

    def kernel_for(sigs):
        add_device = cuda.jit(sigs, device=True)(add)

        @cuda.jit
        def f(r, x, y):
            r[0] = add_device(x, y)
        return f

    # one signature without a return type: the arguments cast (unsafely) to it
    r = np.full(1, -7.0)
    kernel_for(["(int64, int64)"])[1, 1](r, 1.5, 2.5)
    assert r[0] == 3.0                       # int64(1.5) + int64(2.5)
    # several: the best-rated conversion (int32 -> float64 is safe; float64 -> int64 is not)
    both = kernel_for(["(int64, int64)", "(float64, float64)"])
    for x, y, want in ((1, 2, 3.0), (1.5, 2.5, 4.0), (np.int32(1), 2.5, 3.5)):
        r = np.full(1, -7.0)
        both[1, 1](r, x, y)
        assert r[0] == want, (x, y)
    # equally rated signatures: the first declared, as Numba resolves device functions
    r = np.full(1, -7.0)
    kernel_for(["(float32, float64)", "(float64, float32)", "(int64, int64)"])[1, 1](r, 1.5, 2.5)
    assert r[0] == 4.0
    # a complex converts to no real signature: Numba's typing error, naming the parameters
    with pytest.raises(numba.core.errors.TypingError, match=r"Invalid use of type.*\(complex128, complex128\)"):
        both[1, 1](np.zeros(1, np.complex128), 1j, 1j)


def test_device_function_signatures_cast_as_numba(backend):
    @cuda.jit("int32(float64)", device=True)
    def truncate(v):
        return v * 1.5

    @cuda.jit
    def use(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = truncate(x[i])

    with pytest.raises(RuntimeError, match="Cannot compile a device function as a kernel: .*truncate"):
        truncate[1, 1](1.0)
    x = np.array([1.0, 2.5, -3.0])
    out = np.zeros(3)
    use[1, 4](x, out)
    assert out.tolist() == [1.0, 3.0, -4.0]  # int32(x * 1.5), truncated toward zero


def test_numba_jit_and_njit_are_device_functions_and_python():
    import tessel.kernel

    @numba.njit
    def f(x):
        return x + 1

    @numba.jit(nopython=True, cache=True, fastmath=True)
    def g(x):
        return x * 2

    h = numba.jit("float64(float64)")(lambda v: v - 1)
    assert isinstance(f, tessel.kernel.DeviceFunction) and isinstance(g, tessel.kernel.DeviceFunction)
    assert (f(1), g(2), h(3.0)) == (2, 4, 2.0)
    assert numba.prange is range
    with pytest.raises(TypeError, match="unknown option"):
        numba.jit(bogus=True)


def test_ufunc_options_and_layouts_are_checked():
    with pytest.raises(TypeError, match="unknown option.*foo"):
        numba.vectorize(["f8(f8)"], foo=1)
    with pytest.raises(ValueError, match="target must be one of"):
        numba.vectorize(["f8(f8)"], target="roc")
    with pytest.raises(ValueError, match="layout"):
        numba.guvectorize(["void(f8[:], f8[:])"], "(n)")
    with pytest.raises(TypeError, match="one or two positional"):
        numba.guvectorize()
    # Numba's checks: a gufunc returns nothing, a CUDA gufunc is nopython, out= or outputs
    with pytest.raises(TypeError, match=r"cannot return values: signature int32\(array\(int32, 1d, A\)"
                                        r".*specifies int32 return type"):
        numba.guvectorize([numba.int32(numba.int32[:], numba.int32[:])], "(m)->(m)", target="cuda")
    with pytest.raises(TypeError, match="nopython flag must be True"):
        numba.guvectorize(["void(f8[:], f8[:])"], "(n)->(n)", target="cuda", nopython=False)

    def copy(x, y):
        for i in range(x.shape[0]):
            y[i] = x[i]

    x = np.arange(4.0)
    for target, error in (("cuda", ValueError), ("cpu", TypeError)):
        g = numba.guvectorize(["void(f8[:], f8[:])"], "(n)->(n)", target=target)(copy)
        y = np.zeros(4)
        with pytest.raises(error, match="cannot specify argument 'out' as both positional and keyword"):
            g(x, y, out=y)
        g(x, out=y)
        np.testing.assert_array_equal(y, x)


def test_kernel_side_names():
    from tessel import kernel

    assert cuda.grid is kernel.grid and cuda.atomic is kernel.atomic and cuda.shfl_down_sync is kernel.shfl_down_sync
    assert cuda.vote_sync_any is kernel.any_sync and cuda.vote_sync_ballot is kernel.ballot_sync
    assert cuda.reduce is cuda.Reduce and cuda.cg is kernel.cg
    assert cuda.match_any_sync is kernel.match_any_sync and cuda.nanosleep is kernel.nanosleep
    assert numba.literal_unroll is kernel.literal_unroll
    for name, why in (("declare_device", "foreign"),):
        with pytest.raises(NotImplementedError, match=f"tessel.numba.cuda.{name} is not supported.*{why}"):
            obj = getattr(cuda, name)
            obj("f", "void()")


# ---------------------------------------------------------------- Numba's typing of numbers
@cuda.jit
def clamp_brighten(img, out):
    i = cuda.grid(1)
    if i < img.size:
        out[i] = min(255, img[i] + 100)  # Numba computes img[i] + 100 in int64: no wrap at 256


@cuda.jit
def accumulate_from_a_float_literal(x, out):
    tmp = 0.  # float64 in Numba, so the float32 data accumulate in float64
    for j in range(x.size):
        tmp += x[j]
    out[0] = tmp


@cuda.jit
def integer_and_float_mixes(u8, i8, u32, f32, i32, u16, out_i, out_f):
    out_i[0] = u8[0] + u8[1]        # uint8 + uint8: uint64
    out_i[1] = i8[0] * i8[0]        # int8 * int8: int64
    out_i[2] = u32[0] << 3          # uint32 << literal: int64
    out_i[3] = True + True          # 2
    out_i[4] = i32[0] + i32[0]      # int32 + int32: int64
    out_i[5] = i32[0] / 2           # float64, stored into int64 truncated (Numba's setitem casts)
    out_f[0] = f32[0] * 3           # float32 * int64 literal: float64
    out_f[1] = f32[0] * 2.5         # float32 * float64 literal: float64
    out_f[2] = f32[0] * np.float32(3)  # float32 * float32: float32
    out_f[3] = f32[0] + i8[0]       # float32 + int8: float32
    out_f[4] = f32[0] * u8[0]       # float32 * uint8: float32
    out_f[5] = f32[0] * u16[0]      # float32 * uint16: float64 (NumPy: float32)


@cuda.jit
def uint64_meets_signed(u64, i8, out_f, out_u):
    out_f[0] = max(u64[0], i8[0])   # unified as Numba does: float64 holds both
    out_f[1] = u64[0] if i8[0] > 0 else i8[0]
    out_u[0] = u64[0] >> 1          # the left operand's signedness: a logical shift
    out_u[1] = min(u64[0], 7)
    out_u[2] = u64[0] > i8[0]       # compared as Numba unifies them, not as int64


@cuda.jit
def powers_and_bools(f32, b, i32, u64, out):
    out[0] = f32[0] ** 2      # float32 to an integer power: float32
    out[1] = f32[0] ** -1
    out[2] = -b[0]            # -True is -1
    out[3] = ~b[0]            # ~True is False
    out[4] = i32[0] ** -1     # an integer power: 0 (1 and -1 stay themselves)
    out[5] = max(u64[0], b[0])


def test_numbers_are_typed_as_numba_types_them(backend):
    img = np.array([10, 155, 156, 200, 250, 0, 99], np.uint8)
    out = np.full(img.size, 7, np.uint8)
    clamp_brighten[1, 32](img, out)
    np.testing.assert_array_equal(out, np.minimum(255, img.astype(np.int64) + 100).astype(np.uint8))

    x = np.random.default_rng(5).random(3001).astype(np.float32)
    acc = np.full(1, np.nan)
    accumulate_from_a_float_literal[1, 1](x, acc)
    assert acc[0] == np.cumsum(x.astype(np.float64))[-1]  # float64 accumulation, in order

    u8, i8 = np.array([200, 250], np.uint8), np.array([100], np.int8)
    u32, f32, i32 = np.array([4_000_000_000], np.uint32), np.array([0.1], np.float32), np.array([2**31 - 7], np.int32)
    u16 = np.array([60001], np.uint16)
    out_i, out_f = np.full(6, -1, np.int64), np.full(6, np.nan)
    integer_and_float_mixes[1, 1](u8, i8, u32, f32, i32, u16, out_i, out_f)
    assert out_i.tolist() == [450, 10000, 32_000_000_000, 2, 2 * (2**31 - 7), (2**31 - 7) // 2]
    f = np.float64(f32[0])
    assert out_f[0] == f * 3 and out_f[1] == f * 2.5
    assert out_f[2] == np.float32(f32[0] * np.float32(3)) and out_f[3] == np.float32(f32[0] + np.float32(100))
    assert out_f[4] == np.float32(f32[0] * np.float32(200)) and out_f[5] == f * 60001

    big = np.array([2**63 + 5], np.uint64)
    out_f, out_u = np.full(2, np.nan), np.zeros(3, np.uint64)
    uint64_meets_signed[1, 1](big, np.array([77], np.int8), out_f, out_u)
    assert out_f.tolist() == [float(2**63 + 5)] * 2 and out_u.tolist() == [2**62 + 2, 7, 1]

    out = np.full(6, np.nan)
    powers_and_bools[1, 1](f32, np.array([True]), np.array([7], np.int32), big, out)
    tenth = np.float32(0.1)
    assert out.tolist() == [float(tenth * tenth), float(np.float32(1) / tenth), -1.0, 0.0, 0.0, float(2**63 + 5)]


def test_a_complex_stored_into_a_real_array_is_a_compile_error(backend):
    @cuda.jit
    def store_complex(out):
        out[0] = 1 + 2j

    with pytest.raises(TypeError, match="store_complex"):
        store_complex[1, 1](np.zeros(1))


def test_views_of_local_record_arrays_are_compile_errors_naming_the_line(backend):
    pair = numba.from_dtype(np.dtype([("a", np.float32), ("b", np.int32)]))

    @cuda.jit
    def slice_records(out):
        loc = cuda.local.array(4, dtype=pair)
        part = loc[1:3]
        out[0] = part[0].a

    with pytest.raises(numba.core.errors.TypingError,
                       match=r"slice_records.*:\d+: a view of a local array of records is not supported"):
        slice_records[1, 1](np.zeros(1))


def test_assigning_a_global_name_in_a_kernel_is_a_compile_error(backend):
    total = 0

    @cuda.jit
    def accumulate(x):
        nonlocal total
        total = x[0]

    with pytest.raises(numba.core.errors.TypingError,
                       match=r"accumulate.*:\d+: assigning the nonlocal name 'total' is not supported in kernels"):
        accumulate[1, 1](np.zeros(1))


def test_tessel_device_functions_keep_numpys_rules_inside_numba_kernels(backend):
    # Each function is typed by its own rules: a tessel.jit device function's uint8 + 1 wraps, as
    # NumPy 2's, inside a tessel.numba kernel whose own uint8 + 1 does not.
    @ts.jit(device=True)
    def next_value(v):
        return v + 1

    @cuda.jit
    def both(a, out):
        out[0] = next_value(a[0])
        out[1] = a[0] + 1

    out = np.full(2, -1, np.int64)
    both[1, 1](np.array([255], np.uint8), out)
    assert out.tolist() == [0, 256]


def test_jit_numbers_option():
    @ts.jit(numbers="numba")
    def brighten(img, out):
        i = ts.kernel.grid(1)
        if i < img.size:
            out[i] = img[i] + 100

    img = ts.asarray(np.array([200], np.uint8), device="cpu")
    out = ts.zeros(1, dtype=ts.int64, device="cpu")
    brighten[1, 32](img, out)
    assert out.tolist() == [300]
    with pytest.raises(ValueError, match="numbers must be one of 'numpy', 'numba'"):
        ts.jit(numbers="c")


@cuda.jit
def store_scalar(a, s):
    a[0] = s


def test_launch_argument_errors_name_the_kernel(backend):
    a = np.zeros(1, np.int64)
    for value in (2**64, -2**63 - 1):
        with pytest.raises(OverflowError, match=r"kernel 'store_scalar': argument 1 is the Python int .* neither int64"):
            store_scalar[1, 1](a, value)
    with pytest.raises(TypeError, match=r"kernel 'store_scalar': a launch takes its arguments by position.* s$"):
        store_scalar[1, 1](a, s=3)
    store_scalar[1, 1](a, 2**64 - 1)  # uint64's largest: stored wrapped into the int64 array, as Numba
    assert a[0] == -1


def many_mixed_expressions(a, b, out):
    out[0] = a[0] + b[0]
    out[1] = a[0] - b[0]
    out[2] = a[0] * b[0]
    out[3] = a[0] + 1
    out[4] = a[0] * 3
    out[5] = a[0] - 200
    out[6] = a[0] * 2.5
    out[7] = a[0] / b[0]
    out[8] = a[0] // 3
    out[9] = a[0] % 7
    out[10] = max(a[0], b[0])
    out[11] = min(a[0], 7)
    out[12] = a[0] ** 2
    out[13] = abs(a[0])
    out[14] = a[0] > b[0]
    out[15] = a[0] == -1
    out[16] = a[0] * 0.1 + b[0]
    out[17] = (a[0] + b[0]) // 2
    out[18] = a[0] if a[0] > 3 else b[0]


@pytest.mark.parametrize("da, va, db, vb", [
    ("uint8", 200, "int8", 77), ("uint64", 2**63 + 5, "int8", -3), ("float32", 0.1, "int16", 12345),
    ("uint16", 60001, "float32", -2.75), ("int32", 2**31 - 5, "uint32", 4_000_000_000), ("int8", -100, "bool", True),
    ("float32", -7.5, "float64", 0.3), ("int64", -7, "uint8", 4)])
def test_numbers_match_numba_itself(backend, da, va, db, vb):
    # The same kernel body under numba.njit (whose typing Numba's CUDA target shares) and under
    # tessel.numba, on values where the two typings give different numbers.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack  # numba looks it up under NumPy 2.x
    njit = pytest.importorskip("numba").njit
    a, b = np.array([va], da), np.array([vb], db)
    as_float = np.zeros(19)
    njit(many_mixed_expressions)(a, b, as_float)
    for out_dtype in ("float64", "int64"):
        want = np.zeros(19, out_dtype)
        njit(many_mixed_expressions)(a, b, want)
        got = np.full(19, 7, out_dtype)
        cuda.jit(many_mixed_expressions)[1, 1](a, b, got)
        what = f"{da} {va!r} with {db} {vb!r} into {out_dtype}"
        if backend == "cuda":
            # As under Numba's CUDA target: a * b + c may be one fused multiply-add (one rounding, not two),
            # and a float outside int64's range converts to int64's nearest end (x86 gives its lowest).
            if out_dtype == "float64":
                np.testing.assert_allclose(got, want, rtol=4e-16, atol=0, err_msg=what)
                continue
            keep = np.abs(as_float) < 2.0**63
            got, want = got[keep], want[keep]
        np.testing.assert_array_equal(got, want, err_msg=what)


# ---------------------------------------------------------------- tuple types
def test_tuple_types_in_signatures():
    types = numba.types
    assert numba.parse_signature("UniTuple(float32, 2)(float32, float32)") == (
        types.UniTuple(numba.float32, 2), [numba.float32, numba.float32])
    assert numba.parse_signature("Tuple((float32, int32))(UniTuple(int64, 3))") == (
        types.Tuple((numba.float32, numba.int32)), [types.UniTuple(numba.int64, 3)])
    assert types.Tuple([numba.float32, numba.float32]) is types.UniTuple(numba.float32, 2)  # as Numba's
    assert str(types.Tuple(numba.float64, numba.int64)) == "Tuple(float64, int64)"
    assert numba.typeof((1, 2.0)) == types.Tuple((numba.int64, numba.float64))
    assert numba.typeof((1, 2)) == types.UniTuple(numba.int64, 2)
    sig = types.UniTuple(numba.float32, 2)(numba.float32, numba.float32)
    assert sig.return_type.count == 2 and len(sig.return_type) == 2 and sig.return_type[0] is numba.float32
    assert types.UniTuple(numba.float32, 2)((1.5, 2)) == (np.float32(1.5), np.float32(2))
    with pytest.raises(TypeError, match="tuple types hold numbers"):
        types.UniTuple(numba.float32[:], 2)


@cuda.jit("UniTuple(float32, 2)(float32, float32)", device=True)
def _sum_diff(a, b):
    return a + b, a - b


@cuda.jit(numba.types.Tuple((numba.float64, numba.int64))(numba.types.UniTuple(numba.float64, 2)), device=True)
def _product_and_seven(p):
    return p[0] * p[1], 7.9


@cuda.jit("float32(Tuple(float32, UniTuple(int64, 2)))", device=True)
def _nested_tuple(t):
    return t[0] + t[1][0] * t[1][1]


def test_tuple_signatures_of_device_functions_and_kernels(backend):
    @cuda.jit("void(float64[:], UniTuple(int64, 2), Tuple(float64, int64))")
    def k(out, ij, fk):
        s, d = _sum_diff(out[0], 1.0)
        m, n = _product_and_seven((2.5, out[1]))
        out[2] = s
        out[3] = d
        out[4] = m
        out[5] = n                      # int64(7.9): the declared result type, as Numba casts
        out[6] = ij[0] * ij[1] + fk[0] * fk[1]
        out[7] = _nested_tuple((np.float32(0.5), (3, 4)))

    out = np.array([2.0, 4.0, 0, 0, 0, 0, 0, 0])
    k[1, 1](out, (3, 5), (0.5, 4))
    assert out[2:].tolist() == [3.0, 1.0, 10.0, 7.0, 17.0, 12.5]
    assert k.signatures == [(numba.float64[:], numba.types.UniTuple(numba.int64, 2),
                             numba.types.Tuple((numba.float64, numba.int64)))]
    with pytest.raises(TypeError, match="No matching definition"):
        k[1, 1](out, (3, 5, 6), (0.5, 4))

    @cuda.jit
    def lazy(out, t):
        out[0] = t[0] + t[1][1]

    lazy[1, 1](out, (1.5, (2, 3)))
    assert out[0] == 4.5 and lazy.signatures == [(numba.float64[::1], numba.types.Tuple(
        (numba.float64, numba.types.UniTuple(numba.int64, 2))))]


# ---------------------------------------------------------------- compiled kernels' attributes
@cuda.jit
def _grid_synced(a):
    g = cuda.cg.this_grid()
    s = cuda.shared.array(64, numba.float32)
    local = cuda.local.array(5, numba.float32)
    i = cuda.grid(1)
    s[cuda.threadIdx.x % 64] = 1
    local[0] = 1
    cuda.syncthreads()  # s[0] is written by another warp
    if i < a.size:
        a[i] += s[0] + local[0] - 1
    g.sync()
    if i < a.size:
        a[i] *= 2


def test_overloads_and_kernel_attributes(backend):
    with pytest.raises(ValueError, match="no compiled kernel yet"):
        cuda.jit(_grid_synced.py_func).max_cooperative_grid_blocks(128)
    a = cuda.to_device(np.ones(1000))
    _grid_synced[8, 128](a)
    assert (a.copy_to_host() == 4).all()
    (sig, overload), = _grid_synced.overloads.items()
    assert sig == (numba.float64[::1],) and overload.argument_types == sig
    assert overload.entry_name == overload.symbol and overload.target == ("cpu" if backend == "cpu" else "cuda")
    assert overload.shared_mem_per_block >= 256 and overload.max_threads_per_block >= 128
    assert overload.local_mem_per_thread >= (20 if backend == "cpu" else 0) and overload.const_mem_size >= 0
    assert overload.regs_per_thread == 0 if backend == "cpu" else overload.regs_per_thread > 0
    for get, value in ((_grid_synced.get_regs_per_thread, overload.regs_per_thread),
                       (_grid_synced.get_shared_mem_per_block, overload.shared_mem_per_block),
                       (_grid_synced.get_local_mem_per_thread, overload.local_mem_per_thread),
                       (_grid_synced.get_max_threads_per_block, overload.max_threads_per_block),
                       (_grid_synced.get_const_mem_size, overload.const_mem_size)):
        assert get() == {sig: value} and get(sig) == value and get(numba.void(*sig)) == value
    blocks = overload.max_cooperative_grid_blocks(128)
    assert blocks >= 1 and _grid_synced.max_cooperative_grid_blocks(128) == blocks
    assert overload.cooperative is True

    @cuda.jit
    def plain(a):
        a[cuda.grid(1)] = 1.0

    plain[1, 4](np.zeros(4))
    assert [o.cooperative for o in plain.overloads.values()] == [False]
    assert overload.max_cooperative_grid_blocks((16, 8)) == blocks
    assert overload.max_cooperative_grid_blocks(1024) <= blocks
    if backend == "cpu":
        cores = cuda.get_current_device().MULTIPROCESSOR_COUNT
        assert blocks == min(16 * cores, 2**24 // 128)
        assert overload.max_cooperative_grid_blocks(128, 300 * 1024) == 0   # more shared memory than a block has
    b = cuda.to_device(np.ones(blocks * 128))
    _grid_synced[blocks, 128](b)           # the largest grid-synchronizing launch runs
    assert (b.copy_to_host() == 4).all()

    @cuda.jit("void(float32[:])")
    def declared(x):
        x[0] = 1

    sig = numba.void(numba.float32[:])
    assert declared.overloads[sig.args] is declared.overloads[sig] and sig.args in declared.overloads
    assert declared.get_max_threads_per_block() == declared.overloads[sig].max_threads_per_block  # specialized


# ---------------------------------------------------------------- cuda.fp16 and cuda.libdevice
@cuda.jit
def _fp16_functions(a, b, c, out, cmp):
    i = cuda.grid(1)
    if i < a.size:
        x, y, z = a[i], b[i], c[i]
        out[i, 0] = cuda.fp16.hfma(x, y, z)
        out[i, 1] = cuda.fp16.hadd(x, y)
        out[i, 2] = cuda.fp16.hsub(x, y)
        out[i, 3] = cuda.fp16.hmul(x, y)
        out[i, 4] = cuda.fp16.hdiv(x, y)
        out[i, 5] = cuda.fp16.hneg(x)
        out[i, 6] = cuda.fp16.habs(cuda.fp16.hneg(x))
        out[i, 7] = cuda.fp16.hsqrt(cuda.fp16.habs(x))
        out[i, 8] = cuda.fp16.hmax(x, y)
        out[i, 9] = cuda.fp16.hmin(x, y)
        out[i, 10] = cuda.fp16.hexp(x)
        out[i, 11] = cuda.fp16.hlog(cuda.fp16.habs(x))
        out[i, 12] = cuda.fp16.hfloor(x)
        out[i, 13] = cuda.fp16.hrint(x)
        out[i, 14] = cuda.fp16.hrcp(y)
        out[i, 15] = cuda.fp16.hsin(x) + cuda.fp16.hcos(x)
        cmp[i, 0] = cuda.fp16.heq(x, y)
        cmp[i, 1] = cuda.fp16.hne(x, y)
        cmp[i, 2] = cuda.fp16.hlt(x, y)
        cmp[i, 3] = cuda.fp16.hge(x, y)
        cmp[i, 4] = cuda.fp16.hgt(x, y)
        cmp[i, 5] = cuda.fp16.hle(x, y)


def test_fp16_functions(backend):
    rng = np.random.default_rng(5)
    n = 2000
    a, b, c = ((rng.standard_normal(n) * 4).astype(np.float16) for _ in range(3))
    a[:5] = [np.nan, 1.0, -0.0, 0.0, 2.0]
    b[:5] = [1.0, np.nan, 0.0, -0.0, 2.0]
    out = np.zeros((n, 16), np.float16)
    cmp = np.zeros((n, 6), np.bool_)
    _fp16_functions[(n + 255) // 256, 256](a, b, c, out, cmp)
    A, B, C = (v.astype(np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out[:, 0], (A * B + C).astype(np.float16))   # rounded once
        for k, ref in enumerate([a + b, a - b, a * b, a / b, -a, np.abs(a), np.sqrt(np.abs(a)), np.fmax(a, b),
                                 np.fmin(a, b)], 1):
            np.testing.assert_array_equal(out[:, k], ref)
        af = a.astype(np.float32)
        np.testing.assert_allclose(out[:, 10].astype(float), np.exp(af).astype(np.float16), rtol=2e-3)
        np.testing.assert_allclose(out[5:, 11].astype(float), np.log(np.abs(af[5:])), rtol=2e-3, atol=2e-3)
        np.testing.assert_array_equal(out[:, 12], np.floor(a))
        np.testing.assert_array_equal(out[:, 13], np.rint(a))
        np.testing.assert_allclose(out[:, 14].astype(float), (1 / b.astype(np.float32)).astype(np.float16),
                                   rtol=2e-3)
        np.testing.assert_allclose(out[:, 15].astype(float), np.sin(af) + np.cos(af), rtol=4e-3, atol=4e-3)
    assert not np.signbit(out[2:4, 8]).any() and np.signbit(out[2:4, 9]).all()   # +0 is above -0
    ordered = ~np.isnan(a) & ~np.isnan(b)
    for k, ref in enumerate([a == b, (a != b) & ordered, a < b, a >= b, a > b, a <= b]):
        np.testing.assert_array_equal(cmp[:, k], ref)


@cuda.jit
def _libdevice_functions(x, xi, out, outi):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = libdevice.exp(v)
        out[i, 1] = libdevice.expf(v)
        out[i, 2] = libdevice.rsqrtf(abs(v) + 1)
        out[i, 3] = libdevice.fast_expf(v)
        s, c = libdevice.sincosf(v)
        out[i, 4] = s
        out[i, 5] = c
        out[i, 6] = libdevice.fmaf(v, v, 1.0)
        out[i, 7] = libdevice.saturatef(v)
        out[i, 8] = libdevice.isnanf(v)
        m, e = libdevice.frexp(v)
        out[i, 9] = m
        outi[i, 1] = e
        out[i, 10] = libdevice.erfinv(v / 4)
        out[i, 11] = libdevice.erfcinv(abs(v) / 4)
        out[i, 12] = libdevice.normcdfinv(abs(v) / 5 + 0.01)
        out[i, 13] = libdevice.cospi(v) + libdevice.sinpi(v)
        out[i, 14] = libdevice.fadd_rd(v, 0.1) - libdevice.fadd_ru(v, 0.1)
        out[i, 15] = libdevice.erfcx(v)
        outi[i, 0] = libdevice.popc(xi[i])
        outi[i, 2] = libdevice.umax(xi[i], -xi[i])
        outi[i, 3] = libdevice.double2int_rd(v * 3)
        outi[i, 4] = libdevice.mulhi(xi[i], 1 << 20)
        outi[i, 5] = libdevice.byte_perm(xi[i], 0x01020304, 0x3210)
        outi[i, 6] = libdevice.clz(xi[i])


def test_libdevice_functions(backend):
    import math

    rng = np.random.default_rng(6)
    x = rng.standard_normal(500) * 2
    x[0] = np.nan
    xi = rng.integers(-2**31, 2**31, 500).astype(np.int32)
    out, outi = np.zeros((500, 16)), np.zeros((500, 7), np.int64)
    _libdevice_functions[2, 256](x, xi, out, outi)
    x32, v = x.astype(np.float32), x[1:]
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(out[1:, 0], np.exp(v), rtol=1e-15)
        np.testing.assert_allclose(out[1:, 1], np.exp(x32[1:]), rtol=1e-6)
        np.testing.assert_allclose(out[1:, 2], 1 / np.sqrt(np.abs(x32[1:]) + 1), rtol=1e-6)
        np.testing.assert_allclose(out[1:, 3], np.exp(x32[1:]), rtol=1e-5)
        np.testing.assert_allclose(out[1:, 4], np.sin(x32[1:]), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(out[1:, 5], np.cos(x32[1:]), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(out[1:, 6], x32[1:] * x32[1:] + 1, rtol=1e-6)
        np.testing.assert_array_equal(out[1:, 7], np.clip(x32[1:], 0, 1))
        assert out[0, 7] == 0                        # saturatef(NaN) is 0
        np.testing.assert_array_equal(out[:, 8], np.isnan(x32))
        mantissa, exponent = np.frexp(x)
        np.testing.assert_array_equal(out[1:, 9], mantissa[1:])
        np.testing.assert_array_equal(outi[1:, 1], exponent[1:])
        inside = np.abs(v) < 3.99
        assert np.isnan(out[1:, 10][np.abs(v) > 4]).all()
        np.testing.assert_allclose([math.erf(t) for t in out[1:, 10][inside]], v[inside] / 4, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose([math.erfc(t) for t in out[1:, 11][inside]], np.abs(v[inside]) / 4, rtol=1e-12)
        p = np.abs(v[inside]) / 5 + 0.01
        np.testing.assert_allclose([0.5 * math.erfc(-t / math.sqrt(2)) for t in out[1:, 12][inside]], p, rtol=1e-12)
        np.testing.assert_allclose(out[1:, 13], np.cos(np.pi * x32[1:]) + np.sin(np.pi * x32[1:]), atol=1e-5)
        assert (out[1:, 14] <= 0).all() and (out[1:, 14] < 0).mean() > 0.9     # rounded down <= rounded up
        small = v < 20
        np.testing.assert_allclose(out[1:, 15][small], [math.exp(t * t) * math.erfc(t) for t in v[small]],
                                   rtol=1e-12)
    np.testing.assert_array_equal(outi[:, 0], [bin(int(t) & 0xffffffff).count("1") for t in xi])
    np.testing.assert_array_equal(outi[:, 2], np.maximum(xi.view(np.uint32), (-xi).view(np.uint32)).view(np.int32))
    np.testing.assert_array_equal(outi[1:, 3], np.floor(v * 3).astype(np.int64))
    np.testing.assert_array_equal(outi[:, 4], (xi.astype(np.int64) << 20) >> 32)
    np.testing.assert_array_equal(outi[:, 5], xi)
    np.testing.assert_array_equal(outi[:, 6], [32 - (int(t) & 0xffffffff).bit_length() for t in xi])


def test_libdevice_tails_and_rounding_modes(backend):
    import math

    @cuda.jit
    def k(z, out):
        i = cuda.grid(1)
        if i < z.size:
            out[i, 0] = libdevice.erfcinv(z[i])
            out[i, 1] = libdevice.dmul_rz(z[i], 3.0) - libdevice.dmul_rn(z[i], 3.0)
            out[i, 2] = libdevice.double2float_ru(z[i]) - libdevice.double2float_rd(z[i])
            out[i, 3] = libdevice.fsqrt_rd(numba.float32(z[i] + 1)) <= libdevice.fsqrt_ru(numba.float32(z[i] + 1))
            out[i, 4] = libdevice.ll2double_rn(numba.int64(2**53 + 1)) - 2.0**53
            out[i, 5] = libdevice.float2int_rn(numba.float32(2.5)) + 10 * libdevice.float2int_rz(numba.float32(-2.5))

    z = np.array([1e-300, 1e-100, 1e-20, 1e-12, 1e-5, 0.3, 1.0, 1.7, 1.9999])
    out = np.zeros((z.size, 6))
    k[1, 32](z, out)
    # erfc(x) moves 2x^2 times as fast as x (relative): 4 ulps of x allowed, through erfc
    x = out[:, 0]
    assert (np.abs(np.array([math.erfc(t) for t in x]) / z - 1) <= np.maximum(1e-13, 8 * x**2 * 2.0**-52)).all()
    assert (out[:, 1] <= 0).all() and (out[:, 2] >= 0).all() and (out[:, 3] == 1).all()
    assert (out[:, 4] == 0).all() and (out[:, 5] == 2 - 20).all()   # rn: half to even; rz: toward zero


@cuda.jit("int64(int64)", device=True)
def _fib(n):
    if n < 2:
        return n
    return _fib(n - 1) + _fib(n - 2)


def test_kernel_features_tessel_does_not_have_are_named(backend):
    def recursion(out):
        out[0] = _fib(10)

    def array_creation(out):
        tmp = np.empty(3)
        out[0] = tmp[0]

    def array_method(out):
        out[0] = np.sum(out[1:])

    def local_from_argument(out, n):
        tmp = cuda.local.array(n, numba.float64)
        out[0] = tmp[0]

    def half_atomic(h):
        cuda.atomic.add(h, 0, np.float16(1))

    def bare_raise(out):
        raise

    def computed_message(out):
        raise ValueError(out[0])

    def builtin_sum_of_array(out):
        out[0] = sum(out)

    def numpy_submodule(out):
        out[0] = np.linalg.norm(out)

    def builtin_str(out):
        out[0] = len(str(out[0]))

    def long_double(out):
        out[0] = np.datetime64(1, "s")

    def bad_local_dtype(out):
        tmp = cuda.local.array(3, dtype="int33")
        out[0] = tmp[0]

    out = np.zeros(4)
    for fn, args, why in (
            (recursion, (out,), r"device function '_fib' calls itself: recursion is not supported"),
            (array_creation, (out,), r"np.empty is not supported in kernels .*made with local.array or shared.array: cuda.local.array in tessel.numba"),
            (array_method, (out,), r"np.sum is not supported in kernels"),
            (local_from_argument, (out, 3), r"local.array: the shape must be a compile-time constant"),
            (half_atomic, (np.zeros(1, np.float16),), r"atomic.add is not supported for float16 arrays"),
            (bare_raise, (out,), r"a kernel raises an exception class or instance"),
            (computed_message, (out,), r"an exception's message in a kernel must be a constant"),
            (builtin_sum_of_array, (out,), r"sum\(\) of an array is not supported in kernels"),
            (numpy_submodule, (out,), r"np.linalg.norm is not supported in kernels"),
            (builtin_str, (out,), r"the built-in str\(\) is not supported in kernels"),
            (long_double, (out,), r"dtype datetime64 is not supported in tessel kernels"),
            (bad_local_dtype, (out,), r"local.array: 'int33' is not a dtype tessel kernels support")):
        kernel = cuda.jit(debug=fn is computed_message)(fn)
        # Numba's compile errors, for programs that catch them; tessel's KernelCompileError too
        from tessel.numba.core.errors import TypingError, UnsupportedError
        with pytest.raises(TypingError, match=rf"kernel '{fn.__name__}'.*test_numba_api.py:\d+.*{why}") as info:
            kernel[1, 1](*args)
        assert isinstance(info.value, UnsupportedError) and isinstance(info.value, ts.kernel.KernelCompileError)
    from tessel.numba.core import types as core_types
    assert core_types.float32[:, ::1] == numba.float32[:, ::1]


def test_fp16_and_libdevice_modules():
    from tessel import kernel
    from tessel.numba.cuda import fp16
    from tessel.numba.cuda.libdevice import expf, sincosf   # noqa: F401

    assert cuda.fp16 is fp16 and cuda.libdevice is libdevice
    assert fp16.hfma is kernel.fp16.hfma and libdevice.expf is kernel.libdevice.expf
    assert {"hadd", "hfma", "hmax", "heq"} <= set(dir(fp16)) and len(dir(libdevice)) > 300
    with pytest.raises(NotImplementedError, match=r"libdevice\.isnan is not supported.*isnand"):
        libdevice.isnan
    with pytest.raises(NotImplementedError, match=r"libdevice\.nan is not supported"):
        libdevice.nan
    with pytest.raises(NotImplementedError, match=r"tessel\.numba\.cuda\.fp16\.hsqrt2 is not supported"):
        fp16.hsqrt2
    assert not hasattr(libdevice, "no_such_function")
    with pytest.raises(RuntimeError, match="only be used inside a kernel"):
        libdevice.expf(1.0)

    @cuda.jit
    def uses_missing(x):
        x[0] = libdevice.isnan(x[0])

    with pytest.raises(Exception, match=r"libdevice\.isnan is not supported"):
        uses_missing[1, 1](np.zeros(1))


# ---------------------------------------------------------------- record arrays
@cuda.jit
def _record_kernel(r, out):
    i = cuda.grid(1)
    if i < r.size:
        out[i] = r[i].x * r[i].y + r[i]["y"]
        r[i].y = i
        r[i]["x"] += 0.5


def test_record_arrays_as_kernel_arguments(backend):
    dt = np.dtype([("x", np.float32), ("y", np.int32)])
    r = np.zeros(10, dt)
    r["x"], r["y"] = np.arange(10), 3
    out = np.zeros(10, np.float32)
    _record_kernel[1, 32](r, out)            # a NumPy record array: to the device and back
    np.testing.assert_allclose(out, np.arange(10) * 3 + 3)
    np.testing.assert_array_equal(r["y"], np.arange(10))
    np.testing.assert_allclose(r["x"], np.arange(10) + 0.5)
    d = cuda.to_device(r)                    # a device record array
    _record_kernel[1, 32](d, out)
    back = d.copy_to_host()
    np.testing.assert_allclose(out, (np.arange(10) + 0.5) * np.arange(10) + np.arange(10))
    np.testing.assert_array_equal(back["y"], np.arange(10))
    np.testing.assert_allclose(back["x"], np.arange(10) + 1.0)
    packed = np.zeros(4, [("a", np.int8), ("b", np.float64)])   # b is not aligned: read byte by byte
    packed["b"] = [1, 2, 3, 4]

    @cuda.jit
    def double_b(r):
        i = cuda.grid(1)
        if i < r.size:
            r[i].b *= 2
            r[i].a = 1

    double_b[1, 8](packed)
    assert packed["b"].tolist() == [2, 4, 6, 8] and packed["a"].tolist() == [1] * 4

    @cuda.jit
    def missing(r, out):
        out[0] = r[0].z

    with pytest.raises(Exception, match=r"kernel 'missing'.*no field 'z'"):
        missing[1, 1](r, out)
    rec = numba.from_dtype(dt)
    assert _record_kernel.signatures[0] == (rec[:], numba.float32[::1])
    # declared signatures with records: they select launches; the kernel compiles when launched
    declared = cuda.jit(numba.void(numba.from_dtype(packed.dtype)[:]))(double_b.py_func)
    declared[1, 8](packed)
    assert packed["b"].tolist() == [4, 8, 12, 16]
    with pytest.raises(TypeError, match="No matching definition"):
        declared[1, 8](np.zeros(4, dt))

    def scale_record(r, f):
        r.x *= f

    one = cuda.jit((rec, numba.float32))(scale_record)
    host = np.array([(1.5, 2), (4.0, 3)], dt)
    one[1, 1](host[1], 3)                      # 3 becomes float32(3)
    assert host["x"].tolist() == [1.5, 12.0]
    with pytest.raises(TypeError, match="No matching definition"):
        one[1, 1](packed[0], 3)


@cuda.jit
def _bit_intrinsics(x32, x64, out):
    i = cuda.grid(1)
    if i < x32.size:
        out[i, 0] = cuda.popc(x32[i])
        out[i, 1] = cuda.clz(x32[i])
        out[i, 2] = cuda.ffs(x32[i])
        out[i, 3] = cuda.brev(x32[i])
        out[i, 4] = cuda.popc(x64[i])
        out[i, 5] = cuda.clz(x64[i])
        out[i, 6] = cuda.ffs(x64[i])
        out[i, 7] = cuda.brev(x64[i])
    if i == 0:  # Python ints are int64, as Numba types them
        out[x32.size, 0] = cuda.clz(1)
        out[x32.size, 1] = cuda.popc(-1)
        out[x32.size, 2] = cuda.ffs(1 << 40)
        out[x32.size, 3] = cuda.brev(1)


def test_bit_intrinsics_by_width(backend):
    def bits(v, width):
        return format(int(v) & ((1 << width) - 1), f"0{width}b")

    def reference(v, width):
        b = bits(v, width)
        ffs = 0 if "1" not in b else width - b.rindex("1")
        return [b.count("1"), len(b) - len(b.lstrip("0")), ffs, int(b[::-1], 2)]

    rng = np.random.default_rng(7)
    x32 = rng.integers(-2**31, 2**31, 300).astype(np.int32)
    x64 = rng.integers(-2**63, 2**63, 300, dtype=np.int64)
    x32[:3] = [0, -1, 1]
    x64[:3] = [0, -1, 1 << 40]
    out = np.full((301, 8), 0xDEADBEEF, np.uint64)  # poisoned
    _bit_intrinsics[2, 160](x32, x64, out)
    for i in range(300):
        assert list(out[i, :4]) == reference(x32[i], 32), (i, x32[i])
        assert list(out[i, 4:]) == reference(x64[i], 64), (i, x64[i])
    assert list(out[300, :4]) == [63, 64, 41, 1 << 63]
