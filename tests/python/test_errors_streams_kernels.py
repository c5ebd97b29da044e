"""Error mapping, streams, memory helpers, fuse and user kernels."""
import threading
import time

import numpy as np
import pytest

import tessel as ts
from conftest import GPU, assert_close, main_thread_stall

needs_cuda = pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")
# A CPU-only build (-DTESSEL_CUDA=OFF) generates no CUDA source (FusedKernel.source needs CUDA).
needs_cuda_build = pytest.mark.skipif("built without CUDA" in ts.cuda_unavailable_reason(),
                                      reason="a CPU-only build (-DTESSEL_CUDA=OFF) generates no CUDA source")


def test_exception_hierarchy():
    assert issubclass(ts.ShapeError, ValueError) and issubclass(ts.ShapeError, ts.TesselError)
    assert issubclass(ts.DTypeError, TypeError) and issubclass(ts.DTypeError, ts.TesselError)
    assert issubclass(ts.IndexError, IndexError) and issubclass(ts.OutOfMemory, MemoryError)
    for cls in (ts.DeviceError, ts.CudaError, ts.CompileError, ts.ValueError):
        assert issubclass(cls, ts.TesselError)


def test_errors_keep_their_messages(device):
    a = ts.ones((2, 3), device=device)
    b = ts.ones((4,), device=device)
    with pytest.raises(ts.ShapeError, match=r"\(2, 3\).*\(4,\)"):
        a + b
    with pytest.raises(ts.IndexError, match="axis"):
        ts.sum(a, axis=5)
    with pytest.raises(ts.DTypeError, match="float99"):
        ts.zeros(2, dtype="float99", device=device)
    with pytest.raises(ts.ShapeError):
        ts.reshape(a, (4, 2))
    with pytest.raises(ValueError):
        ts.reshape(a.T, (6,), copy=False)


def test_device_errors():
    if ts.cuda_available():
        with pytest.raises(ts.DeviceError):
            ts.zeros(2, device=f"cuda:{ts.device_count() + 1}")
    else:
        with pytest.raises(ts.DeviceError):
            ts.zeros(2, device=GPU)
    with pytest.raises(ts.TesselError):
        ts.Device("tpu")


def test_cpu_streams_and_context():
    s = ts.current_stream("cpu")
    s.synchronize()
    assert s.query()
    assert s.device == ts.Device("cpu")
    with ts.cuda.stream(ts.Stream.cpu()):
        assert_close(ts.ones(2, device="cpu") + 1, np.full(2, 2.0, "float32"))
    with pytest.raises(TypeError):
        with ts.cuda.stream(object()):
            pass


@needs_cuda
def test_cuda_streams():
    lo, hi = ts.Stream.priority_range()
    s = ts.Stream(priority=hi)
    assert s.handle != 0 and s.priority == hi
    with ts.cuda.stream(s):
        assert ts.current_stream() == s
        x = ts.arange(1000, dtype=ts.float32, device=GPU) * 2
    assert ts.current_stream() != s
    s.synchronize()
    assert_close(x, np.arange(1000, dtype="float32") * 2)
    adopted = ts.Stream.from_handle(s.handle)
    assert adopted.handle == s.handle and not adopted.owned


@needs_cuda
def test_memory_stats_cuda():
    ts.cuda.empty_cache()
    x = ts.zeros((1 << 20,), device=GPU)
    stats = ts.cuda.memory_stats()
    assert stats["allocated_bytes"] >= 4 << 20
    del x
    ts.cuda.empty_cache()
    p = ts.cuda.pinned_empty((4, 4), "float32")
    assert isinstance(p, np.ndarray) and p.shape == (4, 4)
    p[:] = 3
    assert_close(ts.asarray(p, device=GPU), np.full((4, 4), 3, "float32"))


def test_stream_priority_range_is_a_pair():
    lo, hi = ts.Stream.priority_range()
    assert isinstance(lo, int) and isinstance(hi, int) and lo <= hi


def test_memory_helpers_without_cuda():
    assert isinstance(ts.cuda.host_memory_stats(), dict)
    p = ts.cuda.pinned_empty((3, 2), "float64")  # pinned with CUDA, ordinary host memory without
    assert isinstance(p, np.ndarray) and p.shape == (3, 2) and p.dtype == np.float64
    p[:] = 1.5
    assert_close(ts.asarray(p), np.full((3, 2), 1.5))
    ts.cuda.empty_cache()  # no-op without a device
    if not ts.cuda_available():
        with pytest.raises(ts.DeviceError):
            ts.cuda.memory_stats()


def test_fuse_decorator(device, rng):
    @ts.fuse
    def f(x, y):
        return ts.exp(x) * y + 2.0 * ts.maximum(x, y) - ts.where(x > y, x, y)

    a = rng.standard_normal((5, 7)).astype("float32")
    b = rng.standard_normal((7,)).astype("float32")
    got = f(ts.asarray(a, device=device), ts.asarray(b, device=device))
    want = np.exp(a) * b + np.float32(2.0) * np.maximum(a, b) - np.where(a > b, a, b)
    assert_close(got, want, rtol=1e-5)

    @ts.fuse()
    def scaled(x, k):
        return x * k + 1

    assert_close(scaled(ts.asarray(a, device=device), 3.0), a * np.float32(3) + np.float32(1))
    with pytest.raises(TypeError):
        scaled(ts.asarray(a), "three")


@needs_cuda_build
def test_fuse_decorator_source():
    @ts.fuse
    def f(x, y):
        return ts.exp(x) * y + 2.0 * ts.maximum(x, y) - ts.where(x > y, x, y)

    x, y = ts.ones((5, 7)), ts.ones(7)
    assert "exp" in f.source(x, y)


def test_fuse_repeated_calls_mixing_arrays_and_constants(device, rng):
    # Calls with only tessel arrays take the direct path; constants, other dtypes and broadcasting
    # in between must still get their own kernels and the NumPy result.
    @ts.fuse
    def f(x, y, z):
        return ts.maximum(x * y + z, 0.25) * z

    def want(x, y, z):
        return np.maximum(x * y + z, 0.25) * z

    a, b, c = (rng.standard_normal((6, 5)).astype("float32") for _ in range(3))
    row = rng.standard_normal((5,)).astype("float32")
    ta, tb, tc, trow = (ts.asarray(v, device=device) for v in (a, b, c, row))
    for _ in range(3):
        assert_close(f(ta, tb, tc), want(a, b, c), rtol=1e-6)
    assert_close(f(ta, 2.0, tc), want(a, np.float32(2.0), c), rtol=1e-6)
    assert_close(f(ta, tb, trow), want(a, b, row), rtol=1e-6)
    assert_close(f(ta[:, ::-1], tb.T.T, tc[::-1]), want(a[:, ::-1], b, c[::-1]), rtol=1e-6)
    a64 = a.astype("float64")
    got = f(ts.asarray(a64, device=device), tb, tc)
    assert got.dtype == ts.float64
    assert_close(got, want(a64, b, c), rtol=1e-12)
    assert_close(f(ta, tb, tc), want(a, b, c), rtol=1e-6)
    with pytest.raises(TypeError, match="tessel array or a Python scalar"):
        f(ta, b, tc)  # a NumPy array is not converted implicitly
    with pytest.raises(ts.ShapeError):
        f(ta, tb, ts.asarray(rng.standard_normal((4,)).astype("float32"), device=device))


def test_fused_kernel_call_inputs(device, rng):
    root = _tessel_sym_graph()
    k = ts._tessel.FusedKernel(root, 2)
    a, b = (rng.standard_normal((3, 4)).astype("float32") for _ in range(2))
    ta, tb = ts.asarray(a, device=device), ts.asarray(b, device=device)
    assert_close(k([ta, tb]), a * b + a, rtol=1e-6)
    assert_close(k((ta, tb)), a * b + a, rtol=1e-6)
    with pytest.raises(TypeError, match="expected 2 arrays, got 1"):
        k([ta])
    with pytest.raises(TypeError, match="list or tuple of tessel arrays"):
        k([ta, b])
    with pytest.raises(TypeError, match="list or tuple of tessel arrays"):
        k(ta)
    assert k._call_if_arrays((ta, b)) is None
    assert_close(k._call_if_arrays((ta, tb)), a * b + a, rtol=1e-6)


def _tessel_sym_graph():
    x, y = ts._tessel._sym_input(0), ts._tessel._sym_input(1)
    return x * y + x


def test_elementwise_kernel_cpu_error_and_params():
    k = ts.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y + 1", "mul_add_py")
    assert "mul_add_py" in k.source()
    with pytest.raises(TypeError, match="expected 2 inputs"):
        k(ts.ones(3, device="cpu"))
    with pytest.raises(ts.DTypeError):
        ts.ElementwiseKernel("float99 x", "float32 z", "z = x", "bad")
    # The CPU backend compiles it as host C++ (test_host_compiler.py has the rest).
    ones = ts.ones(3, device="cpu")
    if ts._tessel._host_compiler() is None:
        with pytest.raises(ts.TesselError, match="no host C\\+\\+ compiler"):
            k(ones, ones)
    else:
        assert k(ones, ones).tolist() == [2.0, 2.0, 2.0]


@needs_cuda
def test_elementwise_kernel_cuda(rng):
    k = ts.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y + 1", "mul_add_py")
    a = rng.standard_normal((4, 5)).astype("float32")
    b = rng.standard_normal((5,)).astype("float32")
    got = k(ts.asarray(a, device=GPU), ts.asarray(b, device=GPU))
    assert_close(got, a * b + 1)
    out = ts.empty((4, 5), device=GPU)
    k(ts.asarray(a, device=GPU), 2.0, out)
    assert_close(out, a * 2 + 1)


@needs_cuda
def test_raw_kernel_cuda():
    source = r'''
    extern "C" __global__ void axpy(float a, const float* x, float* y, long long n) {
      long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = a * x[i] + y[i];
    }'''
    k = ts.RawKernel(source, "axpy")
    n = 1000
    x = ts.arange(n, dtype=ts.float32, device=GPU)
    y = ts.ones(n, device=GPU)
    k(((n + 255) // 256,), (256,), (np.float32(2.0), x, y, n))
    assert_close(y, 2 * np.arange(n, dtype="float32") + 1)
    host = ts.ones(n, device="cpu")
    with pytest.raises(ts.DeviceError, match=f"RawKernel: an argument is on cpu but the launch is on {GPU}"):
        k(((n + 255) // 256,), (256,), (np.float32(2.0), host, y, n))
    with pytest.raises(ts.CompileError):
        ts.RawKernel("extern \"C\" __global__ void bad() { undefined_thing; }", "bad")((1,), (1,), ())


_SCALARS = r"""
extern "C" __global__ void scalars(signed char i8, short i16, int i32, long long i64, unsigned char u8,
                                   unsigned short u16, unsigned int u32, unsigned long long u64, bool b,
                                   float f32, double f64, double* out) {
  out[0] = i8; out[1] = i16; out[2] = i32; out[3] = (double)i64; out[4] = u8; out[5] = u16; out[6] = u32;
  out[7] = (double)u64; out[8] = b ? 1.0 : 0.0; out[9] = f32; out[10] = f64;
}
"""


@needs_cuda
def test_raw_kernel_numpy_scalars_pass_their_exact_type():
    # Each NumPy scalar reaches the kernel as its own C type (a wrong size would shift every later
    # argument); non-NumPy objects with the same interface still take the generic path.
    k = ts.RawKernel(_SCALARS, "scalars")
    values = [np.int8(-7), np.int16(-300), np.int32(-70000), np.int64(-(1 << 40)), np.uint8(200),
              np.uint16(60000), np.uint32(4000000000), np.uint64(1 << 60), np.bool_(True),
              np.float32(1.25), np.float64(-2.5e300)]
    for trial in range(2):
        out = ts.full((11,), np.nan, dtype=ts.float64, device=GPU)
        k((1,), (1,), (*values, out))
        want = np.array([float(v) for v in values])
        np.testing.assert_array_equal(np.asarray(out), want)
        values[9] = np.float32(-0.75)  # a second call with another value: nothing is cached by value
    with pytest.raises(TypeError, match="unsupported argument type"):
        k((1,), (1,), ("seven", out))


@needs_cuda
def test_elementwise_kernel_operands_borrowed_cast_broadcast_and_outputs(rng):
    k = ts.ElementwiseKernel("float32 x, float64 y, float32 s", "float32 z, float64 w",
                             "z = x * s + (float)y; w = y - x", "two_outputs_py")
    a = rng.standard_normal((6, 5)).astype("float32")
    b = rng.standard_normal((5,)).astype("float64")
    ta = ts.asarray(a, device=GPU)
    for x, xa in ((ta, a), (ta[::-1, ::2], a[::-1, ::2])):
        yb = b[: xa.shape[1]]
        z, w = k(x, ts.asarray(yb, device=GPU), 0.5)  # y broadcast over rows
        assert_close(z, (xa * np.float32(0.5) + yb.astype("float32")).astype("float32"), rtol=1e-6)
        assert_close(w, yb - xa.astype("float64"), rtol=1e-12)
    # A float32 array where float64 is declared is cast; a NumPy input is copied to the device.
    z, w = k(ta, ts.asarray(b.astype("float32"), device=GPU), np.float32(2.0))
    assert_close(w, b.astype("float32").astype("float64") - a.astype("float64"), rtol=1e-12)
    z, _ = k(a, ts.asarray(b, device=GPU), 2.0)
    assert_close(z, a * np.float32(2.0) + b.astype("float32"), rtol=1e-6)
    # Given outputs are written in place and returned as the same objects.
    zo = ts.full((6, 5), np.nan, dtype=ts.float32, device=GPU)
    wo = ts.full((6, 5), np.nan, dtype=ts.float64, device=GPU)
    got = k(ta, ts.asarray(b, device=GPU), 1.0, zo, wo)
    assert got[0] is zo and got[1] is wo
    assert_close(zo, a + b.astype("float32"), rtol=1e-6)
    # A host NumPy array cannot be written in place by a CUDA kernel: an error, not a lost result.
    host_out = np.full((6, 5), np.nan, dtype="float32")
    with pytest.raises(ts.ValueError, match=f"output 'z' must be an array on {GPU} that can be written in place"):
        k(ta, ts.asarray(b, device=GPU), 1.0, host_out, wo)
    assert np.isnan(host_out).all()
    # A foreign CUDA array is written through a view of its memory.
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tz = torch.full((6, 5), float("nan"), device="cuda")
        k(ta, ts.asarray(b, device=GPU), 1.0, tz, wo)
        assert_close(tz.cpu().numpy(), a + b.astype("float32"), rtol=1e-6)
    with pytest.raises(ts.ShapeError, match="output 'z' has shape"):
        k(ta, ts.asarray(b, device=GPU), 1.0, ts.empty((5,), device=GPU), wo)
    with pytest.raises(ts.DTypeError, match="output 'w' is float32, declared float64"):
        k(ta, ts.asarray(b, device=GPU), 1.0, zo, ts.empty((6, 5), device=GPU))
    with pytest.raises(ts.ShapeError):
        k(ta, ts.asarray(np.ones(4), device=GPU), 1.0)
    # Zero-size and 0-d launches.
    z, w = k(ts.empty((0, 5), device=GPU), ts.asarray(b, device=GPU), 1.0)
    assert z.shape == (0, 5) and w.shape == (0, 5)
    z, w = k(ts.asarray(np.float32(3.0), device=GPU), ts.asarray(np.float64(0.5), device=GPU), 2.0)
    assert z.shape == () and float(z) == 6.5 and float(w) == -2.5


def test_gil_released_during_host_reads():
    """Host copies of large arrays (x.__array__, to_numpy, asarray from NumPy) release the GIL: the
    main thread keeps running while they copy. Fails if the GIL is held (the stall equals the call)."""
    reads = {
        "__array__": lambda x, h: x.__array__(),
        "asarray(copy=True)": lambda x, h: ts.asarray(h, device="cpu", copy=True),
    }
    for name, read in reads.items():
        for n in (1 << 22, 1 << 24, 1 << 26):
            h = np.ones(n, dtype=np.float64)
            x = ts.asarray(h, device="cpu", copy=True)
            gap, took = main_thread_stall(lambda: read(x, h))
            if took >= 0.05:
                break
        assert took >= 0.02, f"{name}: too fast to tell ({took:.4f} s)"
        assert gap < 0.5 * took, f"{name}: the main thread stalled {gap:.4f} s during a {took:.4f} s read (GIL held?)"


_SPIN = r"""
extern "C" __global__ void spin(long long cycles, float* out) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  out[0] = 1.0f;
}
"""


@pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")
def test_gil_released_while_waiting_for_the_device():
    """The host waits for a long kernel (~0.3 s) in a second thread; the main thread must keep
    running. Each blocking wait is checked: synchronize, Stream.synchronize, item, __array__."""
    kernel = ts.RawKernel(_SPIN, "spin")
    rate_hz = 2.0e9  # upper bound of an H100's SM clock: at least ~0.3 s of spinning
    waits = {
        "ts.synchronize": lambda x: ts.synchronize(GPU),
        "Stream.synchronize": lambda x: ts.current_stream(ts.Device(GPU)).synchronize(),
        "item": lambda x: x[0].item(),
        "__array__": lambda x: x.__array__(),
    }
    for name, wait in waits.items():
        x = ts.zeros((1,), dtype=ts.float32, device=GPU)
        ts.synchronize(GPU)
        kernel((1,), (1,), (np.int64(int(0.3 * rate_hz)), x))
        gap, took = main_thread_stall(lambda: wait(x))
        assert took >= 0.1, f"{name}: returned after {took:.3f} s, before the kernel could finish"
        assert gap < 0.5 * took, f"{name}: the main thread stalled {gap:.3f} s during a {took:.3f} s wait (GIL held?)"
        assert x[0].item() == 1.0
