"""The host compiler of the CPU backend: ElementwiseKernel on CPU arrays against NumPy, and the
low-level _get_host_kernel / _HostKernel that tessel.kernel builds on. Everything here runs on
the CPU and needs a host C++ compiler (g++); without one the module skips."""
import struct

import numpy as np
import pytest

import tessel as ts

_tessel = ts._tessel

pytestmark = pytest.mark.skipif(_tessel._host_compiler() is None, reason="no host C++ compiler (g++)")

CPU = "cpu"


def cpu(a):
    return ts.asarray(a, device=CPU)


def test_host_compiler_names_path_and_version():
    name = _tessel._host_compiler()
    path, _, version = name.partition(": ")
    assert path.startswith("/") and version


# ---- ElementwiseKernel on the CPU ------------------------------------------------------------

_DTYPES = ["bool", "int8", "uint8", "int32", "int64", "uint64", "float16", "float32", "float64", "complex64",
           "complex128"]


def _values(rng, dtype, shape):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 10, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_elementwise_kernel_matches_numpy(dtype, rng):
    k = ts.ElementwiseKernel(f"{dtype} x, {dtype} y", f"{dtype} z", "z = x * y + x", f"host_mul_add_{dtype}")
    a = _values(rng, dtype, (40, 30))
    b = _values(rng, dtype, (40, 30))
    want = a * b + a
    got = k(cpu(a), cpu(b))
    assert got.dtype == dtype and got.shape == (40, 30) and got.device == ts.Device(CPU)
    if np.dtype(dtype).kind == "c":
        # NumPy's complex loops may fuse a multiply and an add; the kernel does not.
        np.testing.assert_allclose(ts.to_numpy(got), want, rtol=1e-6 if dtype == "complex64" else 1e-14)
    else:
        # Each operation rounds to the dtype as NumPy's does (float16: computed in float, rounded).
        np.testing.assert_array_equal(ts.to_numpy(got), want)


def test_broadcast_non_contiguous_and_negative_strides(rng):
    k = ts.ElementwiseKernel("float64 x, float64 y", "float64 z", "z = x - 2 * y", "host_views")
    base = rng.standard_normal((12, 18))
    tb = cpu(base)
    y = rng.standard_normal((18,))
    cases = [
        (tb, base),                                  # contiguous
        (tb[::2, 1::1], base[::2, 1::1]),            # every other row
        (tb.T, base.T),                              # transposed
        (tb[::-1], base[::-1]),                      # negative stride
        (tb[::-1, ::-3], base[::-1, ::-3]),          # negative strides on both axes
        (tb[3:4, :], base[3:4, :]),                  # one row
    ]
    for x, xa in cases:
        ya = y[: xa.shape[-1]]
        got = k(x, cpu(ya))                          # y broadcast along the rows
        np.testing.assert_array_equal(ts.to_numpy(got), xa - 2 * ya)
    # Broadcast of both inputs: (4, 1) against (5,).
    col = rng.standard_normal((4, 1))
    row = rng.standard_normal((5,))
    np.testing.assert_array_equal(ts.to_numpy(k(cpu(col), cpu(row))), col - 2 * row)
    # A 0-d input broadcast to all (read once) and a Python scalar.
    np.testing.assert_array_equal(ts.to_numpy(k(cpu(np.float64(3.0)), cpu(row))), 3.0 - 2 * row)
    np.testing.assert_array_equal(ts.to_numpy(k(tb, 0.25)), base - 0.5)


def test_rank_three_and_large_parallel_launches(rng):
    k = ts.ElementwiseKernel("float32 x, int32 y", "float32 z", "z = x * (float)y", "host_big")
    # Over the OpenMP threshold, contiguous and strided (rank 3, blocks crossing rows).
    a = rng.standard_normal((64, 33, 50)).astype("float32")
    b = rng.integers(-5, 5, (33, 1)).astype("int32")
    np.testing.assert_array_equal(ts.to_numpy(k(cpu(a), cpu(b))), a * b.astype("float32"))
    ta = cpu(a)
    np.testing.assert_array_equal(ts.to_numpy(k(ta[:, ::-1, ::2], cpu(b))), a[:, ::-1, ::2] * b.astype("float32"))
    flat = rng.standard_normal(200_001).astype("float32")
    ones = np.ones(200_001, dtype="int32") * 3
    np.testing.assert_array_equal(ts.to_numpy(k(cpu(flat), cpu(ones))), flat * np.float32(3))


def test_zero_size_and_zero_dim():
    k = ts.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "host_sizes")
    z = k(cpu(np.empty((0, 5), dtype="float32")), cpu(np.ones(5, dtype="float32")))
    assert z.shape == (0, 5)
    z = k(cpu(np.float32(1.5)), cpu(np.float32(2.0)))
    assert z.shape == () and float(z) == 3.5


def test_outputs_given_cast_and_read(rng):
    k = ts.ElementwiseKernel("float32 x, float64 y, float32 s", "float32 z, float64 w",
                             "z = x * s + (float)y; w = y - x", "host_two_outputs")
    a = rng.standard_normal((6, 5)).astype("float32")
    b = rng.standard_normal((5,))
    z, w = k(cpu(a), cpu(b), 0.5)
    np.testing.assert_array_equal(ts.to_numpy(z), a * np.float32(0.5) + b.astype("float32"))
    np.testing.assert_array_equal(ts.to_numpy(w), b - a.astype("float64"))
    # An input of another dtype is cast; given outputs are written in place and returned as such.
    zo = ts.full((6, 5), np.nan, dtype=ts.float32, device=CPU)
    wo = ts.full((6, 5), np.nan, dtype=ts.float64, device=CPU)
    got = k(cpu(a.astype("float64")), cpu(b.astype("float32")), 1.0, zo, wo)
    assert got[0] is zo and got[1] is wo
    np.testing.assert_array_equal(ts.to_numpy(wo), b.astype("float32").astype("float64") - a.astype("float64"))
    # A NumPy output on the CPU is written in place.
    host_z = np.full((6, 5), np.nan, dtype="float32")
    host_w = np.full((6, 5), np.nan, dtype="float64")
    k(cpu(a), cpu(b), 2.0, host_z, host_w)
    np.testing.assert_array_equal(host_z, a * np.float32(2.0) + b.astype("float32"))
    # Outputs that the body reads start with their values; a conditional write keeps the rest.
    acc = ts.ElementwiseKernel("float32 x", "float32 z", "if (x > 0) z += x", "host_accumulate")
    x = np.array([1.0, -2.0, 3.0, -4.0], dtype="float32")
    out = cpu(np.array([10.0, 20.0, 30.0, 40.0], dtype="float32"))
    acc(cpu(x), out)
    acc(cpu(x), out)
    assert ts.to_numpy(out).tolist() == [12.0, 20.0, 36.0, 40.0]


def test_half_types_and_casts():
    k = ts.ElementwiseKernel("float16 x, bfloat16 y, float32 f", "float16 z, bfloat16 b, int8 c",
                             "z = x * x; b = y + y; c = tessel::cast<signed char>(f)", "host_halves")
    x = np.array([0.1, 1.5, -300.0, 65504.0], dtype="float16")
    y = ts.astype(cpu(np.array([1.0, 0.3, -7.0, 1e30], dtype="float32")), ts.bfloat16)
    f = np.array([np.nan, 1e9, -1e9, -3.7], dtype="float32")
    z, b, c = k(cpu(x), y, cpu(f))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(ts.to_numpy(z), x * x)  # float16 * float16, rounded (inf past 65504)
    want_b = ts.to_numpy(ts.astype(ts.astype(y, ts.float32) * 2, ts.bfloat16).astype(ts.float32))
    np.testing.assert_array_equal(ts.to_numpy(ts.astype(b, ts.float32)), want_b)
    assert ts.to_numpy(c).tolist() == [0, 127, -128, -3]  # NaN -> 0, saturation, truncation


def test_host_source_is_self_contained():
    k = ts.ElementwiseKernel("float32 x", "float32 z", "z = sqrtf(x)", "host_src")
    src = k.host_source()
    assert 'extern "C" int host_src_c_host(TsHostLaunch* ts_launch, void** ts_params)' in src
    assert '#include "tessel' not in src and "__global__" not in src
    np.testing.assert_array_equal(ts.to_numpy(k(cpu(np.array([4.0, 9.0], dtype="float32")))), [2.0, 3.0])


def test_elementwise_errors(monkeypatch):
    bad = ts.ElementwiseKernel("float32 x", "float32 z", "z = x + undefined_on_the_host", "host_bad")
    with pytest.raises(ts.CompileError, match="z = x \\+ undefined_on_the_host") as info:
        bad(cpu(np.ones(3, dtype="float32")))
    assert "host_bad_c_host.cpp:" in str(info.value) and "undefined_on_the_host" in info.value.log
    k = ts.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y", "host_errors")
    with pytest.raises(TypeError, match="expected 2 inputs"):
        k(cpu(np.ones(3)))
    with pytest.raises(ts.ShapeError):
        k(cpu(np.ones(3)), cpu(np.ones(4)))
    with pytest.raises(ts.DTypeError, match="output 'z' is float64, declared float32"):
        k(cpu(np.ones(3)), cpu(np.ones(3)), ts.empty(3, dtype=ts.float64, device=CPU))
    with pytest.raises(ts.ShapeError, match="output 'z' has shape"):
        k(cpu(np.ones((2, 3))), cpu(np.ones(3)), ts.empty(3, device=CPU))
    # Without a compiler: an error that says what to do (checked before any cache lookup).
    monkeypatch.setenv("TESSEL_CXX", "/nonexistent/c++")
    assert _tessel._host_compiler() is None
    fresh = ts.ElementwiseKernel("float32 x", "float32 z", "z = x * 3", "host_no_compiler")
    with pytest.raises(ts.TesselError, match="TESSEL_CXX=/nonexistent/c\\+\\+ is not an executable file.*g\\+\\+"):
        fresh(cpu(np.ones(3, dtype="float32")))
    monkeypatch.delenv("TESSEL_CXX")
    np.testing.assert_array_equal(ts.to_numpy(fresh(cpu(np.ones(3, dtype="float32")))), [3.0, 3.0, 3.0])


def test_raw_kernel_stays_cuda_only():
    if ts.cuda_available():
        pytest.skip("RawKernel launches on the current CUDA device here")
    k = ts.RawKernel('extern "C" __global__ void k() {}', "k")
    with pytest.raises(ts.TesselError, match="CUDA"):
        k((1,), (1,), ())


# ---- _get_host_kernel / _HostKernel ------------------------------------------------------------

_LAUNCH = r"""
#include <cstdint>
#include <cstdio>
#include <cstring>
struct TsHostLaunch {
  std::uint32_t grid[3];
  std::uint32_t block[3];
  std::uint64_t shared_bytes;
  std::int32_t num_threads;
  std::int32_t error_code;
  char error[1024];
};
"""

_SCALE = _LAUNCH + r"""
// out[i] = a * x[i] for i < n; out[n..n+7]: the launch record. a < 0: an IndexError, a == 0: another error.
extern "C" int scale(TsHostLaunch* launch, void** params) {
  double a; long long n; const double* x; double* out;
  std::memcpy(&a, params[0], 8); std::memcpy(&x, params[1], 8); std::memcpy(&out, params[2], 8);
  std::memcpy(&n, params[3], 8);
  if (a < 0) { launch->error_code = 1; std::snprintf(launch->error, sizeof launch->error, "index %lld out of range", n); return 1; }
  if (a == 0) { launch->error_code = 2; std::snprintf(launch->error, sizeof launch->error, "a must not be 0"); return 1; }
  for (long long i = 0; i < n; ++i) out[i] = a * x[i];
  const double record[8] = {double(launch->grid[0]), double(launch->grid[1]), double(launch->grid[2]),
                            double(launch->block[0]), double(launch->block[1]), double(launch->block[2]),
                            double(launch->shared_bytes), double(launch->num_threads)};
  std::memcpy(out + n, record, sizeof record);
  return 0;
}
"""


def _params(a, x, out):
    return [struct.pack("d", a), struct.pack("P", x.ctypes.data), struct.pack("P", out.ctypes.data),
            struct.pack("q", x.size)]


def test_get_host_kernel_launch():
    k = _tessel._get_host_kernel(_SCALE, "scale", ["-DUNUSED=1"])
    assert k.symbol == "scale" and isinstance(k.entry_address, int) and k.entry_address != 0
    again = _tessel._get_host_kernel(_SCALE, "scale", ["-DUNUSED=1"])  # the cache's entry
    assert again.entry_address == k.entry_address
    x = np.arange(5, dtype="float64")
    out = np.zeros(13)
    k.launch((4, 2, 1), (32, 1, 1), 256, _params(2.5, x, out))
    np.testing.assert_array_equal(out[:5], 2.5 * x)
    # num_threads 0 (the default) reaches the kernel as the CPU thread setting, ts.num_threads().
    assert out[5:].tolist() == [4, 2, 1, 32, 1, 1, 256, ts.num_threads()]
    k.launch(7, (8, 2), 0, _params(1.0, x, out), num_threads=2)
    assert out[5:].tolist() == [7, 1, 1, 8, 2, 1, 0, 2]
    with pytest.raises(ts.IndexError, match="index 5 out of range"):
        k.launch(1, 1, 0, _params(-1.0, x, out))
    with pytest.raises(ts.TesselError, match="a must not be 0") as info:
        k.launch(1, 1, 0, _params(0.0, x, out))
    assert not isinstance(info.value, IndexError)
    with pytest.raises(TypeError, match="parameter 1 must be bytes"):
        k.launch(1, 1, 0, [struct.pack("d", 1.0), 5, b"", b""])
    with pytest.raises(ts.ValueError, match="1 to 3 ints"):
        k.launch((1, 1, 1, 1), 1, 0, _params(1.0, x, out))


def test_get_host_kernel_errors():
    with pytest.raises(ts.CompileError, match="failed to compile host kernel 'oops'") as info:
        _tessel._get_host_kernel('extern "C" int oops(void*, void**) {\n  return missing;\n}\n', "oops")
    assert ">     2 |   return missing;" in str(info.value) and "missing" in info.value.log
    with pytest.raises(ts.TesselError, match="has no symbol 'absent'"):
        _tessel._get_host_kernel('extern "C" int present(void*, void**) { return 0; }\n', "absent")
    with pytest.raises(ts.ValueError, match="not a C identifier"):
        _tessel._get_host_kernel("", "two words")
