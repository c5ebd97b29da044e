"""tessel.kernel: Python kernels against NumPy references, on the CPU backend and each test GPU."""
import cmath
import math

import numpy as np
import pytest

import tessel as ts
from tessel import kernel as tk

rng = np.random.default_rng(1234)


def put(a, device):
    return ts.asarray(a, device=device)


def poisoned(shape, dtype, device):
    fill = np.nan if np.dtype(dtype).kind in "fc" else 77
    return ts.asarray(np.full(shape, fill, dtype=dtype), device=device)


# ---- basics -------------------------------------------------------------------------------------------
@ts.jit
def axpy(a, x, y, out):
    i = tk.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("n", [0, 1, 255, 257, 10_001])
def test_axpy_partial_blocks(device, n):
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    out = poisoned(n, np.float32, device)
    axpy[max(1, (n + 127) // 128), 128](np.float32(2.5), put(x, device), put(y, device), out)
    np.testing.assert_allclose(out.numpy(), np.float32(2.5) * x + y, rtol=1e-6)


@ts.jit
def integer_powers(x, n, out):
    i = tk.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = v ** 2
        out[i, 1] = v ** 3
        out[i, 2] = v ** -2
        out[i, 3] = v ** n
        out[i, 4] = v ** 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_to_integer_powers_multiply(device, dtype):
    # A float to an integer power multiplies (Numba's int_power): x ** 2 is exactly x * x.
    x = (rng.standard_normal(1000) * 3).astype(dtype)
    x[:3] = [0.0, np.inf, np.nan]
    out = poisoned((1000, 5), dtype, device)
    integer_powers[8, 128](put(x, device), 5, out)
    got = out.numpy()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got[:, 0], x * x)
        np.testing.assert_array_equal(got[:, 1], x * x * x)
        np.testing.assert_allclose(got[3:, 2], 1 / (x[3:] * x[3:]), rtol=1e-6)
        np.testing.assert_allclose(got[3:, 3], x[3:] ** 5, rtol=1e-5)
    assert np.all(got[:, 4] == 1)
    assert got[0, 2] == np.inf and got[1, 2] == 0 and np.isnan(got[2, 0])


GLOBAL_F32 = np.array([0.25, -0.0, np.inf, -np.inf, np.nan, 1e-45], np.float32)
GLOBAL_C128 = np.array([1 + 2j, -3.5 - 0.25j])
GLOBAL_F16 = np.array([0.5, -2.0, 65504.0], np.float16)


@ts.jit
def read_global_arrays(out_f, out_c, out_h):
    i = tk.grid(1)
    if i < GLOBAL_F32.size:
        out_f[i] = GLOBAL_F32[i]
    if i < GLOBAL_C128.size:
        out_c[i] = GLOBAL_C128[i]
    if i < GLOBAL_F16.size:
        out_h[i] = GLOBAL_F16[i]


def test_global_arrays_keep_every_bit(device):
    # Global arrays are constants with their exact bits: signed zero, infinities, NaN, subnormals.
    out_f, out_c, out_h = poisoned(6, "float32", device), poisoned(2, "complex128", device), poisoned(3, "float16", device)
    read_global_arrays[1, 32](out_f, out_c, out_h)
    assert out_f.numpy().tobytes() == GLOBAL_F32.tobytes()
    assert out_c.numpy().tobytes() == GLOBAL_C128.tobytes()
    assert out_h.numpy().tobytes() == GLOBAL_F16.tobytes()


@ts.jit
def grid_stride_copy(x, out):
    start = tk.grid(1)
    step = tk.gridsize(1)
    for i in range(start, x.shape[0], step):
        out[i] = x[i]


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                   "float16", "float32", "float64", "complex64", "complex128"])
def test_every_dtype_copy(device, dtype):
    n = 1001
    x = (rng.random(n) * 100).astype(dtype) if dtype != "bool" else rng.random(n) > 0.5
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.random(n).astype(dtype)
    out = ts.asarray(np.zeros(n, dtype=dtype), device=device)
    grid_stride_copy[3, 64](put(x, device), out)
    np.testing.assert_array_equal(out.numpy(), x)


def test_bfloat16_copy(device):
    x = ts.asarray(rng.random(300).astype(np.float32), device=device).astype(ts.bfloat16)
    out = ts.zeros(300, dtype=ts.bfloat16, device=device)
    grid_stride_copy[2, 64](x, out)
    np.testing.assert_array_equal(out.astype(ts.float32).numpy(), x.astype(ts.float32).numpy())


@ts.jit
def add_one(x, out):
    i = tk.grid(1)
    if i < x.size:
        out[i] = x[i] + 1


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float16", "float32", "float64"])
def test_weak_literal_keeps_dtype(device, dtype):
    # NumPy 2: the Python literal 1 takes the array's precision; int8 127 + 1 wraps to -128.
    x = np.array([0, 5, 127 if dtype in ("int8", "uint8") else 3], dtype=dtype)
    out = ts.asarray(np.zeros(3, dtype=dtype), device=device)
    add_one[1, 32](put(x, device), out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out.numpy(), x + np.array(1, dtype=dtype))


@ts.jit
def compare_with_wide_literals(u, i8, out):
    out[0] = u[0] == -1
    out[1] = u[0] != -1
    out[2] = u[0] > -1
    out[3] = -1 < u[0]
    out[4] = i8[0] < 1000
    out[5] = 1000 <= i8[0]
    out[6] = i8[0] >= -1000
    out[7] = u[0] < 2**40
    out[8] = u[0] == 5


def test_compare_with_literal_outside_the_dtype(device):
    # NumPy 2 compares an int beyond the dtype's range by value (uint32(5) == -1 is False).
    u, i8 = np.array([5], np.uint32), np.array([-3], np.int8)
    want = [u[0] == -1, u[0] != -1, u[0] > -1, -1 < u[0], i8[0] < 1000, 1000 <= i8[0], i8[0] >= -1000,
            u[0] < 2**40, u[0] == 5]
    for fill in (True, False):  # both poisons: a missed write shows whatever the result
        out = ts.asarray(np.full(9, fill), device=device)
        compare_with_wide_literals[1, 1](put(u, device), put(i8, device), out)
        assert out.numpy().tolist() == [bool(w) for w in want]


@ts.jit
def strided_2d(x, out):
    i, j = tk.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        out[i, j] = x[i, j] * 2 + x[-1, -1]


def test_non_contiguous_and_negative_strides(device):
    base = rng.random((40, 30))
    for view in (lambda a: a[::2, 1::3], lambda a: a[::-1, ::-2], lambda a: a.T):
        x = view(put(base, device))
        ref = view(base) * 2 + view(base)[-1, -1]
        out = poisoned(ref.shape, np.float64, device)
        strided_2d[(3, 3), (16, 16)](x, out)
        np.testing.assert_allclose(out.numpy(), ref)


@ts.jit
def zero_d(x, out):
    out[()] = x[()] * 3


def test_zero_d_arrays(device):
    out = poisoned((), np.float64, device)
    zero_d[1, 1](put(np.array(2.5), device), out)
    assert float(out) == 7.5


@ts.jit
def shapes(x, out):
    out[0] = x.ndim
    out[1] = x.size
    out[2] = len(x)
    out[3] = x.shape[1]
    s0, s1, s2 = x.shape
    out[4] = s2


def test_shape_size_ndim_len(device):
    out = poisoned(5, np.int64, device)
    shapes[1, 1](put(np.zeros((2, 3, 4)), device), out)
    assert out.numpy().tolist() == [3, 24, 2, 3, 4]


def test_numpy_arguments_copied_back(device):
    if device.type != ts.default_device().type:
        pytest.skip("NumPy arguments go to the default device")
    x = rng.random(100)
    out = np.full(100, np.nan)
    grid_stride_copy[1, 32](x, out)
    np.testing.assert_array_equal(out, x)


# ---- control flow and typing --------------------------------------------------------------------------------
@ts.jit
def control(x, out):
    i = tk.grid(1)
    if i >= x.size:
        return
    v = x[i]
    acc = 0
    k = 0
    while True:
        k += 1
        if k > 50:
            break
        if k % 3 == 0:
            continue
        acc += k
    a, b = v, -v
    a, b = b, a
    if v > 0.5:
        r = 1
    elif v > 0.25:
        r = 2
    else:
        r = 3
    out[i, 0] = acc
    out[i, 1] = a
    out[i, 2] = r
    out[i, 3] = 7 if v > 0.5 else -7
    out[i, 4] = x[i] // 0.1 + x[i] % 0.1
    out[i, 5] = (-7) // 2 + (-7) % 3
    out[i, 6] = divmod(17, 5)[0] * 10 + divmod(17, 5)[1]
    out[i, 7] = int(v * 10) + round(2.5) + round(3.5)
    out[i, 8] = min(v, 0.3, 0.7) + max(1, 2) + abs(-v)
    out[i, 9] = v ** 2 + pow(2, 3)


def test_control_flow_and_python_semantics(device):
    n = 37
    x = rng.random(n)
    out = poisoned((n, 10), np.float64, device)
    control[2, 32](put(x, device), out)
    acc = sum(k for k in range(1, 51) if k % 3)
    ref = np.stack([np.full(n, acc), -x, np.where(x > 0.5, 1, np.where(x > 0.25, 2, 3)), np.where(x > 0.5, 7, -7),
                    x // 0.1 + x % 0.1, np.full(n, (-7) // 2 + (-7) % 3), np.full(n, 32.0),
                    np.floor(x * 10) + 2 + 4, np.minimum(x, 0.3) + 2 + x, x ** 2 + 8], axis=1)
    np.testing.assert_allclose(out.numpy(), ref)


@ts.jit
def range_runtime_steps(bounds, out):
    # out[i] = (iteration count, sum of the values, last value) of range(start, stop, step), all
    # three known only at run time
    i = tk.grid(1)
    if i < bounds.shape[0]:
        count = 0
        total = 0
        last = -12345
        for k in range(bounds[i, 0], bounds[i, 1], bounds[i, 2]):
            count += 1
            total += k
            last = k
        out[i, 0] = count
        out[i, 1] = total
        out[i, 2] = last


@ts.jit
def range_runtime_step_unsigned(bounds, out):
    i = tk.grid(1)
    if i < bounds.shape[0]:
        count = 0
        for k in range(bounds[i, 0], bounds[i, 1], bounds[i, 2]):
            count += 1
            if k == bounds[i, 1]:
                count += 1000
        out[i] = count


def test_range_with_run_time_steps_counts_as_python(device):
    big = 2**62
    cases = [(0, 10, 3), (10, 0, -3), (0, 10, -1), (10, 0, 1), (5, 5, 2), (5, 5, -2), (-7, 8, 5), (8, -7, -5),
             (0, 10, 0), (10, 0, 0), (-big, big, big), (big, -big, -big), (-2**63, 2**63 - 1, 2**62),
             (2**63 - 1, -2**63, -2**62), (0, 1, 2**63 - 1), (3, -3, -2**63), (0, 97, 7)]
    bounds = np.array(cases, dtype=np.int64)
    out = poisoned((len(cases), 3), np.int64, device)
    range_runtime_steps[1, 32](put(bounds, device), out)
    want = []
    for start, stop, step in cases:
        r = range(start, stop, step) if step else range(0)   # a zero step runs no iteration
        total = sum(r)
        total = (total + 2**63) % 2**64 - 2**63      # int64 sums wrap
        want.append((len(r), total, r[-1] if len(r) else -12345))
    np.testing.assert_array_equal(out.numpy(), np.array(want, dtype=np.int64))
    ucases = [(0, 10, 3), (2**64 - 10, 2**64 - 1, 4), (0, 2**64 - 1, 2**63), (7, 3, 1), (0, 5, 0)]
    ubounds = np.array(ucases, dtype=np.uint64)
    uout = poisoned(len(ucases), np.int64, device)
    range_runtime_step_unsigned[1, 32](put(ubounds, device), uout)
    np.testing.assert_array_equal(uout.numpy(), [len(range(a, b, c)) if c else 0 for a, b, c in ucases])


@ts.jit
def casts(x, out):
    i = tk.grid(1)
    if i < x.size:
        out[i] = np.int32(x[i] * 10) + ts.float32(0.5)


def test_explicit_casts(device):
    x = rng.random(50)
    out = poisoned(50, np.float64, device)
    casts[1, 64](put(x, device), out)
    np.testing.assert_allclose(out.numpy(), (x * 10).astype(np.int32) + 0.5)


SCALE = 3.0
TABLE = np.array([1.0, 10.0, 100.0])


def make_closure_kernel(offset):
    @ts.jit
    def closure_kernel(x, out):
        i = tk.grid(1)
        if i < x.size:
            out[i] = x[i] * SCALE + offset + TABLE[i % 3]
    return closure_kernel


def test_globals_and_closures_frozen(device):
    k = make_closure_kernel(5)
    x = rng.random(10)
    out = poisoned(10, np.float64, device)
    k[1, 32](put(x, device), out)
    np.testing.assert_allclose(out.numpy(), x * 3 + 5 + TABLE[np.arange(10) % 3])


@ts.jit
def math_funcs(x, out):
    i = tk.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = math.sin(v) + math.exp(v) + math.log(v) + math.sqrt(v)
        out[i, 1] = math.atan2(v, 2.0) + math.hypot(v, 1.0) + math.floor(v * 7) + math.ceil(v)
        out[i, 2] = math.tanh(v) + math.erf(v) + math.log(v, 2.0) + math.copysign(1.0, -v)
        z = cmath.exp(complex(v, 1.0)) * cmath.sqrt(complex(-v, 0.0))
        out[i, 3] = abs(z) + z.real + z.imag + cmath.phase(z)
        out[i, 4] = tk.fma(v, 2.0, 1.0) + tk.cbrt(v * 8)


def test_math_and_cmath(device):
    x = rng.random(40) + 0.1
    out = poisoned((40, 5), np.float64, device)
    math_funcs[1, 64](put(x, device), out)
    z = np.exp(x + 1j) * np.sqrt(-x + 0j)
    ref = np.stack([np.sin(x) + np.exp(x) + np.log(x) + np.sqrt(x),
                    np.arctan2(x, 2) + np.hypot(x, 1) + np.floor(x * 7) + np.ceil(x),
                    np.tanh(x) + np.array([math.erf(v) for v in x]) + np.log2(x) - 1,
                    np.abs(z) + z.real + z.imag + np.angle(z), x * 2 + 1 + np.cbrt(x * 8)], axis=1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)


@ts.jit
def float32_math(x, out):
    i = tk.grid(1)
    if i < x.size:
        out[i] = math.sin(x[i]) * 2   # float32 in, float32 out (the literal is weak)


def test_float32_math_stays_float32(device):
    x = rng.random(64, dtype=np.float32)
    out = ts.zeros(64, dtype=ts.float32, device=device)
    float32_math[1, 64](put(x, device), out)
    np.testing.assert_allclose(out.numpy(), np.sin(x) * 2, rtol=1e-6)


# ---- device functions ---------------------------------------------------------------------------------
@ts.jit(device=True)
def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@ts.jit(device=True)
def minmax(a, b):
    return min(a, b), max(a, b)


@ts.jit
def use_device_functions(x, out):
    i = tk.grid(1)
    if i < x.size:
        lo, hi = minmax(x[i], 0.5)
        out[i, 0] = clamp(x[i], 0.25, 0.75)
        out[i, 1] = lo + hi
        out[i, 2] = clamp(i, 2, 5)


def test_device_functions(device):
    x = rng.random(20)
    out = poisoned((20, 3), np.float64, device)
    use_device_functions[1, 32](put(x, device), out)
    ref = np.stack([np.clip(x, 0.25, 0.75), x + 0.5, np.clip(np.arange(20), 2, 5)], axis=1)
    np.testing.assert_allclose(out.numpy(), ref)


# ---- shared memory and barriers ----------------------------------------------------------------------------
TPB = 16


@ts.jit
def tiled_matmul(A, B, C):
    sA = tk.shared.array(shape=(TPB, TPB), dtype=np.float32)
    sB = tk.shared.array(shape=(TPB, TPB), dtype=np.float32)
    x, y = tk.grid(2)
    tx = tk.threadIdx.x
    ty = tk.threadIdx.y
    acc = np.float32(0.0)
    for t in range((A.shape[1] + TPB - 1) // TPB):
        sA[ty, tx] = A[y, t * TPB + tx] if y < A.shape[0] and t * TPB + tx < A.shape[1] else 0
        sB[ty, tx] = B[t * TPB + ty, x] if x < B.shape[1] and t * TPB + ty < B.shape[0] else 0
        tk.syncthreads()
        for k in range(TPB):
            acc += sA[ty, k] * sB[k, tx]
        tk.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = acc


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (33, 47, 19), (64, 64, 64)])
def test_shared_memory_tiled_matmul(device, m, k, n):
    A = rng.random((m, k), dtype=np.float32)
    B = rng.random((k, n), dtype=np.float32)
    C = poisoned((m, n), np.float32, device)
    tiled_matmul[((n + TPB - 1) // TPB, (m + TPB - 1) // TPB), (TPB, TPB)](put(A, device), put(B, device), C)
    np.testing.assert_allclose(C.numpy(), A @ B, rtol=1e-4)


@ts.jit
def reverse_dynamic(x, out):
    buf = tk.shared.array(0, dtype=np.float64)
    t = tk.threadIdx.x
    i = tk.blockIdx.x * tk.blockDim.x + t
    if i < x.size:
        buf[t] = x[i]
    tk.syncthreads()
    j = tk.blockIdx.x * tk.blockDim.x + (tk.blockDim.x - 1 - t)
    if j < x.size and i < x.size:
        out[i] = buf[tk.blockDim.x - 1 - t]


def test_dynamic_shared_memory(device):
    x = rng.random(256)
    out = poisoned(256, np.float64, device)
    reverse_dynamic[4, 64, 0, 64 * 8](put(x, device), out)
    np.testing.assert_array_equal(out.numpy(), x.reshape(4, 64)[:, ::-1].ravel())


@ts.jit
def barrier_votes(x, out):
    t = tk.threadIdx.x
    c = tk.syncthreads_count(x[t] > 0.5)
    a = tk.syncthreads_and(x[t] >= 0.0)
    o = tk.syncthreads_or(x[t] > 2.0)
    if t == 0:
        out[0] = c
        out[1] = a
        out[2] = o


def test_syncthreads_count_and_or(device):
    x = rng.random(100)
    out = poisoned(3, np.int64, device)
    barrier_votes[1, 100](put(x, device), out)
    assert out.numpy().tolist() == [int((x > 0.5).sum()), 1, 0]


# ---- atomics -------------------------------------------------------------------------------------------------
@ts.jit
def histogram(x, nbins, counts):
    start = tk.grid(1)
    for i in range(start, x.size, tk.gridsize(1)):
        b = int(x[i] * nbins)
        tk.atomic.add(counts, min(b, nbins - 1), 1)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64", "float32", "float64"])
def test_atomic_histogram(device, dtype):
    x = rng.random(20_000)
    counts = ts.zeros(256, dtype=dtype, device=device)
    histogram[16, 128](put(x, device), 256, counts)
    np.testing.assert_array_equal(counts.numpy(), np.histogram(x, 256, (0, 1))[0].astype(dtype))


@ts.jit
def atomics_all(vals, out, old):
    i = tk.grid(1)
    if i < vals.size:
        v = vals[i]
        old[i, 0] = tk.atomic.max(out, 0, v)
        old[i, 1] = tk.atomic.min(out, 1, v)
        old[i, 2] = tk.atomic.sub(out, 2, v)
        tk.atomic.and_(out, 3, v)
        tk.atomic.or_(out, 4, v)
        tk.atomic.xor(out, 5, v)
        old[i, 3] = tk.atomic.exch(out, 6, v)
        old[i, 4] = tk.atomic.cas(out, 7, 0, v)


def test_atomic_ops_int32(device):
    n = 200
    vals = rng.integers(1, 1 << 20, n).astype(np.int32)
    init = np.array([0, 1 << 30, 0, -1, 0, 0, 0, 0], dtype=np.int32)
    out = put(init, device)
    old = poisoned((n, 5), np.int32, device)
    atomics_all[2, 128](put(vals, device), out, old)
    o = out.numpy()
    assert o[0] == vals.max() and o[1] == vals.min() and o[2] == -vals.sum(dtype=np.int32)
    assert o[3] == np.bitwise_and.reduce(vals) and o[4] == np.bitwise_or.reduce(vals)
    assert o[5] == np.bitwise_xor.reduce(vals)
    assert o[6] in vals
    assert o[7] in vals and (old.numpy()[:, 4] == 0).sum() == 1   # one thread's cas wins


@ts.jit
def atomic_inc_dec(out):
    tk.atomic.inc(out, 0, np.uint32(9))
    tk.atomic.dec(out, 1, np.uint32(9))


def test_atomic_inc_dec_wrap(device):
    out = put(np.array([0, 0], dtype=np.uint32), device)
    atomic_inc_dec[1, 25](out)
    assert out.numpy().tolist() == [25 % 10, (10 - 25 % 10) % 10]


# ---- warps and collectives -----------------------------------------------------------------------------------
@ts.jit
def warp_ops(x, out):
    t = tk.threadIdx.x
    v = x[t]
    out[t, 0] = tk.shfl_sync(0xFFFFFFFF, v, 3)
    out[t, 1] = tk.shfl_down_sync(0xFFFFFFFF, v, 1)
    out[t, 2] = tk.shfl_up_sync(0xFFFFFFFF, v, 2)
    out[t, 3] = tk.shfl_xor_sync(0xFFFFFFFF, v, 5)
    out[t, 4] = tk.ballot_sync(0xFFFFFFFF, v > 10)
    out[t, 5] = tk.any_sync(0xFFFFFFFF, v > 60)
    out[t, 6] = tk.all_sync(0xFFFFFFFF, v >= 0)
    out[t, 7] = tk.popc(tk.ballot_sync(0xFFFFFFFF, v % 2 == 0))
    out[t, 8] = tk.laneid


def test_warp_intrinsics(device):
    x = rng.integers(0, 64, 64).astype(np.int64)
    out = poisoned((64, 9), np.int64, device)
    warp_ops[1, 64](put(x, device), out)
    o = out.numpy()
    lane = np.arange(64) % 32
    base = np.arange(64) - lane
    np.testing.assert_array_equal(o[:, 0], x[base + 3])
    np.testing.assert_array_equal(o[:, 1], np.where(lane + 1 < 32, x[np.minimum(np.arange(64) + 1, 63)], x))
    np.testing.assert_array_equal(o[:, 2], np.where(lane >= 2, x[np.arange(64) - 2], x))
    np.testing.assert_array_equal(o[:, 3], x[base + (lane ^ 5)])
    ballot = [sum(1 << k for k in range(32) if x[w * 32 + k] > 10) for w in range(2)]
    np.testing.assert_array_equal(o[:, 4], np.repeat(ballot, 32))
    np.testing.assert_array_equal(o[:, 5], np.repeat([int((x[w * 32:(w + 1) * 32] > 60).any()) for w in range(2)], 32))
    np.testing.assert_array_equal(o[:, 6], 1)
    np.testing.assert_array_equal(o[:, 7], np.repeat([int((x[w * 32:(w + 1) * 32] % 2 == 0).sum()) for w in range(2)], 32))
    np.testing.assert_array_equal(o[:, 8], lane)


@ts.jit(device=True)
def warp_sum(v):
    off = 16
    while off > 0:
        v += tk.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    return v


@ts.jit
def shuffle_sum(x, out):
    partial = tk.shared.array(32, np.float64)
    v = 0.0
    for i in range(tk.grid(1), x.size, tk.gridsize(1)):
        v += x[i]
    v = warp_sum(v)
    w = tk.threadIdx.x // 32
    if tk.laneid == 0:
        partial[w] = v
    tk.syncthreads()
    if w == 0:
        v = partial[tk.laneid] if tk.laneid < tk.blockDim.x // 32 else 0.0
        v = warp_sum(v)
        if tk.laneid == 0:
            tk.atomic.add(out, 0, v)


def test_shared_memory_and_shuffle_sum(device):
    x = rng.random(100_003)
    out = put(np.zeros(1), device)
    shuffle_sum[8, 256](put(x, device), out)
    np.testing.assert_allclose(out.numpy()[0], x.sum(), rtol=1e-12)


@ts.jit(device=True)
def bigger(a, b):
    return a if a > b else b


@ts.jit
def collectives(x, out):
    i = tk.grid(1)
    v = x[i] if i < x.size else 0
    s = tk.block_reduce(v)
    m = tk.block_reduce(v, "min")
    b = tk.block_reduce(v, bigger)
    inc = tk.block_inclusive_scan(v)
    exc = tk.block_exclusive_scan(v)
    ws = tk.warp_reduce(v)
    wi = tk.warp_inclusive_scan(v, "max")
    if i < x.size:
        out[i, 0] = s
        out[i, 1] = m
        out[i, 2] = b
        out[i, 3] = inc
        out[i, 4] = exc
        out[i, 5] = ws
        out[i, 6] = wi


def test_block_and_warp_collectives(device):
    bs = 96
    x = rng.integers(1, 1000, 3 * bs).astype(np.int64)
    out = poisoned((3 * bs, 7), np.int64, device)
    collectives[3, bs](put(x, device), out)
    o = out.numpy()
    blocks = x.reshape(3, bs)
    np.testing.assert_array_equal(o[:, 0], np.repeat(blocks.sum(1), bs))
    np.testing.assert_array_equal(o[:, 1], np.repeat(blocks.min(1), bs))
    np.testing.assert_array_equal(o[:, 2], np.repeat(blocks.max(1), bs))
    np.testing.assert_array_equal(o[:, 3], np.cumsum(blocks, 1).ravel())
    np.testing.assert_array_equal(o[:, 4], (np.cumsum(blocks, 1) - blocks).ravel())
    warps = x.reshape(-1, 32)
    np.testing.assert_array_equal(o[:, 5], np.repeat(warps.sum(1), 32))
    np.testing.assert_array_equal(o[:, 6], np.maximum.accumulate(warps, 1).ravel())


# ---- errors --------------------------------------------------------------------------------------------------
def compile_error(kernel, *args, match):
    with pytest.raises(tk.KernelCompileError, match=match):
        kernel[1, 1](*args)


def test_error_unsupported_constructs():
    @ts.jit
    def uses_try(x):
        try:
            x[0] = 1
        except Exception:
            pass

    @ts.jit
    def uses_comprehension(x):
        x[0] = sum([i for i in range(3)])

    @ts.jit
    def uses_decorated_inner_function(x):
        @ts.jit(device=True)
        def f(v):
            return v
        x[0] = f(1)

    x = ts.zeros(3)
    compile_error(uses_try, x, match=r"kernel 'uses_try', .*test_kernel_lang.py:\d+: try/except is not supported")
    compile_error(uses_comprehension, x, match="list comprehensions not supported")
    compile_error(uses_decorated_inner_function, x, match="the inner function 'f' has decorators")


def test_inner_functions_and_lambdas_are_inlined_closures(device):
    @ts.jit
    def blur(x, out):
        n = x.shape[0]
        clamp = lambda j: min(max(j, 0), n - 1)  # noqa: E731

        def at(j, w=1.0):
            return x[clamp(j)] * w   # reads x and n of the kernel

        i = tk.grid(1)
        if i < n:
            out[i] = at(i - 1) + at(i, 2.0) + at(i + 1)

    @ts.jit
    def recursive(x):
        def f(k):
            return 1 if k <= 1 else k * f(k - 1)
        x[0] = f(3)

    x = np.array([1.0, 5.0, 2.0, 8.0], np.float32)
    out = ts.zeros(4, device=device)
    blur[1, 32](ts.asarray(x, device=device), out)
    xp = np.concatenate([x[:1], x, x[-1:]])
    np.testing.assert_allclose(out.numpy(), xp[:-2] + 2 * x + xp[2:])
    compile_error(recursive, ts.zeros(1), match="'f' calls itself: recursion is not supported")


def test_error_float_into_int_array():
    @ts.jit
    def store_float(x):
        x[0] = 1.5 * x[1]

    with pytest.raises(tk.KernelCompileError, match=r"cannot store a float64 value into an array element of type "
                                                        r"int32 without a cast"):
        store_float[1, 1](ts.zeros(3, dtype=ts.int32))


def test_error_python_function_and_arity():
    def helper(v):
        return v

    @ts.jit
    def calls_python(x):
        x[0] = helper(1)

    @ts.jit
    def two_args(x, y):
        x[0] = y

    compile_error(calls_python, ts.zeros(2), match="'helper' is a Python function, not a device function")
    compile_error(two_args, ts.zeros(2), match=r"takes 2 arguments \(x, y\), got 1")


def test_error_undefined_and_unifiable():
    @ts.jit
    def undefined(x):
        x[0] = nowhere  # noqa: F821

    @ts.jit
    def mixes(x):
        a = x
        a = 1.0
        x[0] = a

    compile_error(undefined, ts.zeros(2), match="name 'nowhere' is not defined")
    compile_error(mixes, ts.zeros(2), match="variable 'a' holds array.* cannot also hold")


def test_error_bad_launch():
    x = ts.zeros(2)
    with pytest.raises(ValueError, match=r"kernel 'axpy': block \(2048, 1, 1\) has 2048 threads"):
        axpy[1, 2048](1.0, x, x, x)
    with pytest.raises(ValueError, match=r"kernel 'axpy': grid \(0, 1, 1\) has a zero"):
        axpy[0, 32](1.0, x, x, x)
    with pytest.raises(TypeError, match="needs a launch configuration"):
        axpy(1.0, x, x, x)
    with pytest.raises(TypeError, match="argument 1 has type str"):
        axpy[1, 1](1.0, "x", x, x)


@ts.jit(debug=True)
def out_of_bounds(x):
    i = tk.grid(1)
    x[i] = 1.0


def test_debug_mode_reports_out_of_bounds(device):
    x = ts.zeros(10, device=device)
    with pytest.raises(IndexError, match=r"kernel 'out_of_bounds' \(.*test_kernel_lang.py:\d+\): index 1\d is out "
                                         r"of bounds for axis 0 with size 10 of array 'x', in thread \(\d+, 0, 0\)"):
        out_of_bounds[1, 32](x)


def test_source_is_cplusplus():
    src = axpy.source(1.0, ts.zeros(3), ts.zeros(3), ts.zeros(3), target="cpu")
    assert 'extern "C" int tsk_axpy' in src
    src = axpy.source(1.0, ts.zeros(3), ts.zeros(3), ts.zeros(3), target="cuda")
    assert "__global__" in src


def test_error_arrays_on_different_devices(gpu):
    x = ts.zeros(3, device="cpu")
    y = ts.zeros(3, device=gpu)
    with pytest.raises(ValueError, match=rf"kernel 'axpy': argument 2 is on {gpu} but earlier array arguments are "
                                         r"on cpu"):
        axpy[1, 32](1.0, x, y, y)


@ts.jit
def poke(x, index, value):
    x[index] = value
    x[index - 1] = x[index] + 1


def test_index_beyond_two_to_the_31(device):
    n = (1 << 31) + 16
    x = ts.zeros(n, dtype=ts.int8, device=device)
    poke[1, 1](x, n - 3, np.int8(7))
    assert int(x[n - 3]) == 7 and int(x[n - 4]) == 8 and int(x[n - 2]) == 0


@ts.jit
def say(x):
    if tk.grid(1) == 0:
        print("value", x[0], 3, x[0] > 1.0)


def test_print(device, capfd):
    say[1, 4](put(np.array([2.5]), device))
    ts.synchronize()
    out = capfd.readouterr().out
    assert "value 2.500000 3 True" in out


@ts.jit
def seed_shared_mem_matmul(a, b, res):
    # As the seed articles write it: the tile size a local constant, the shape built from it.
    TILE_SIZE = 16
    shared_a = tk.shared.array(shape=(TILE_SIZE, TILE_SIZE), dtype=np.float32)
    shared_b = tk.shared.array(shape=(TILE_SIZE, TILE_SIZE), dtype=np.float32)
    row = tk.blockIdx.y * tk.blockDim.y + tk.threadIdx.y
    col = tk.blockIdx.x * tk.blockDim.x + tk.threadIdx.x
    acc = 0.0
    for i in range(0, a.shape[1], TILE_SIZE):
        if row < a.shape[0] and i + tk.threadIdx.x < a.shape[1]:
            shared_a[tk.threadIdx.y, tk.threadIdx.x] = a[row, i + tk.threadIdx.x]
        else:
            shared_a[tk.threadIdx.y, tk.threadIdx.x] = 0.0
        if i + tk.threadIdx.y < b.shape[0] and col < b.shape[1]:
            shared_b[tk.threadIdx.y, tk.threadIdx.x] = b[i + tk.threadIdx.y, col]
        else:
            shared_b[tk.threadIdx.y, tk.threadIdx.x] = 0.0
        tk.syncthreads()
        for j in range(TILE_SIZE):
            acc += shared_a[tk.threadIdx.y, j] * shared_b[j, tk.threadIdx.x]
        tk.syncthreads()
    if row < res.shape[0] and col < res.shape[1]:
        res[row, col] = acc


def test_seed_matmul_with_local_tile_constant(device):
    a = rng.random((50, 37)).astype(np.float32)
    b = rng.random((37, 45)).astype(np.float32)
    res = poisoned((50, 45), np.float32, device)
    seed_shared_mem_matmul[((45 + 15) // 16, (50 + 15) // 16), (16, 16)](put(a, device), put(b, device), res)
    np.testing.assert_allclose(res.numpy(), a @ b, rtol=1e-5)


@ts.jit(device=True)
def square(v):
    return v * v


@ts.jit(debug=True)
def guarded_calls(x, y):
    i = tk.grid(1)
    if i < y.size:
        y[i] = square(x[i]) if i < x.size else -1.0
        ok = i < x.size and square(x[i]) > 0.25
        y[i] += 10.0 if ok else 0.0


def test_device_function_in_a_conditional_runs_only_when_taken(device):
    x = rng.random(5)
    y = poisoned(8, np.float64, device)
    guarded_calls[1, 8](put(x, device), y)   # debug mode: reading x[5..7] would raise IndexError
    ref = np.concatenate([x * x + np.where(x * x > 0.25, 10.0, 0.0), [-1.0] * 3])
    np.testing.assert_allclose(y.numpy(), ref)


@ts.jit
def float_atomic_minmax(vals, out):
    i = tk.grid(1)
    if i < vals.size:
        tk.atomic.max(out, i, vals[i])
        tk.atomic.nanmax(out, i + vals.size, vals[i])
        tk.atomic.min(out, i + 2 * vals.size, vals[i])
        tk.atomic.nanmin(out, i + 3 * vals.size, vals[i])


def test_atomic_float_min_max_nan(device):
    # Numba: max/min keep a stored NaN and ignore a NaN value; nanmax/nanmin treat NaN as missing.
    vals = np.array([2.0, np.nan, np.nan, 2.0])
    stored = np.array([np.nan, 1.0, np.nan, 1.0])
    out = put(np.tile(stored, 4), device)
    float_atomic_minmax[1, 4](put(vals, device), out)
    o = out.numpy().reshape(4, 4)
    np.testing.assert_array_equal(o[0], [np.nan, 1.0, np.nan, 2.0])
    np.testing.assert_array_equal(o[1], [2.0, 1.0, np.nan, 2.0])
    np.testing.assert_array_equal(o[2], [np.nan, 1.0, np.nan, 1.0])
    np.testing.assert_array_equal(o[3], [2.0, 1.0, np.nan, 1.0])


@ts.jit
def unchecked_write(x):
    x[tk.grid(1)] = 1.0


def test_set_checks_bounds_checks_kernels(device):
    ts.set_checks("bounds")
    try:
        with pytest.raises(IndexError, match="kernel 'unchecked_write'.*index 4 is out of bounds"):
            unchecked_write[1, 5](ts.zeros(4, device=device))
    finally:
        ts.set_checks(())


@ts.jit
def heat_steps(buf_0, buf_1, steps, k):
    # Numba's heat-equation example: the whole grid advances one time step per grid barrier.
    i = tk.grid(1)
    g = tk.cg.this_grid()
    data = buf_0
    nxt = buf_1
    for step in range(steps):
        if 0 < i < data.size - 1:
            nxt[i] = data[i] + k * (data[i - 1] - 2 * data[i] + data[i + 1])
        elif i == 0 or i == data.size - 1:
            nxt[i] = data[i]
        g.sync()
        data, nxt = nxt, data


def test_grid_sync_heat_equation(device):
    n, steps, k = 1000, 50, 0.25
    u0 = np.zeros(n)
    u0[n // 2] = 100.0
    a = put(u0.copy(), device)   # (on the CPU, asarray shares the NumPy array's memory)
    b = put(np.zeros(n), device)
    heat_steps[(n + 127) // 128, 128](a, b, steps, k)
    ref = u0.copy()
    for _ in range(steps):
        nxt = ref.copy()
        nxt[1:-1] = ref[1:-1] + k * (ref[:-2] - 2 * ref[1:-1] + ref[2:])
        ref = nxt
    out = (a if steps % 2 == 0 else b).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


@ts.jit(fastmath=True)
def fast_scale(x, out):
    i = tk.grid(1)
    if i < x.size:
        out[i] = x[i] * 2.0


def test_fastmath_cpu_keeps_the_process_ieee():
    # GCC's -ffast-math would load crtfastmath.o with the kernel and flush subnormals to zero in the
    # whole process.
    x = ts.asarray(np.array([1.0, 2.0]), device="cpu")
    out = ts.zeros(2, dtype=ts.float64, device="cpu")
    fast_scale[1, 32](x, out)
    assert out.numpy().tolist() == [2.0, 4.0]
    tiny = np.array([5e-324])
    assert (tiny * np.float64(1.0))[0] != 0.0


@ts.jit
def mixed_arithmetic(a, b, out):
    i = tk.grid(1)
    if i < a.size:
        out[i, 0] = a[i] + b[i]
        out[i, 1] = a[i] * b[i]
        out[i, 2] = a[i] - b[i] if a.dtype != np.bool_ else a[i] ^ b[i]


@pytest.mark.parametrize("ta,tb", [("int8", "int8"), ("uint8", "int8"), ("int16", "uint16"), ("int32", "uint32"),
                                   ("int64", "uint64"), ("bool", "int8"), ("float16", "int8"),
                                   ("float32", "int32"), ("float16", "float32"), ("uint8", "float16"),
                                   ("complex64", "float64")])
def test_promotion_and_wraparound_match_numpy(device, ta, tb):
    # NumPy's result dtype of each pair, its integer wraparound and its float16 rounding.
    n = 64
    gen = np.random.default_rng(7)
    a = (gen.integers(-120, 120, n) if np.dtype(ta).kind in "iu" and np.dtype(ta).kind != "u"
         else gen.integers(0, 250, n)).astype(ta) if np.dtype(ta).kind in "iub" else (gen.random(n) * 50).astype(ta)
    b = (gen.integers(-120, 120, n) if np.dtype(tb).kind == "i" else gen.integers(0, 250, n)).astype(tb) \
        if np.dtype(tb).kind in "iub" else (gen.random(n) * 50).astype(tb)
    if ta == "bool":
        a = gen.random(n) > 0.5
    rt = np.result_type(a, b)
    out = ts.asarray(np.zeros((n, 3), dtype=rt), device=device)
    mixed_arithmetic[1, 64](put(a, device), put(b, device), out)
    with np.errstate(over="ignore"):
        ref = np.stack([a + b, a * b, (a - b) if ta != "bool" else (a ^ b)], axis=1).astype(rt)
    np.testing.assert_array_equal(out.numpy(), ref)


def test_ptx_needs_nvrtc_not_a_gpu():
    if not ts._tessel._nvrtc_available():
        pytest.skip("a CPU-only build: no NVRTC")
    x = ts.zeros(3, device="cpu")
    ptx = axpy.ptx(1.0, x, x, x, arch="sm_90")
    assert ".visible .entry tsk_axpy" in ptx and ".target sm_90" in ptx


# ---- loops over tuples, arrays, enumerate and zip; tuple arguments; record arrays ---------------------
@ts.jit
def loops_over_sequences(x, out):
    i = tk.grid(1)
    if i < x.size:
        s = 0.0
        for off in (16, 8, 4, 2, 1):      # unrolled
            if off == 2:
                continue
            s += off * x[i]
            if off == 4 and x[i] > 100:
                break
        out[i, 0] = s
        t = 0.0
        for v in x:                       # an array's first axis
            t += v
        out[i, 1] = t
        u = 0.0
        for j, v in enumerate(x):
            u += j * v
        out[i, 2] = u
        w = 0.0
        for a, b in zip(x, x[::-1]):
            w += a * b
        out[i, 3] = w
        z = 0
        for j, r in enumerate(range(3, 20, 4), 1):
            z += j * r
        for a, r in zip(range(10, 0, -3), x):
            z += a
        out[i, 4] = z
        q = 0.0
        for j, c in enumerate((1.5, 2.5, 3)):
            q += j * c
        for c in tk.literal_unroll((1, 2.5)):
            q += c
        out[i, 5] = q


def test_loops_over_tuples_arrays_enumerate_zip(device):
    x = np.arange(1.0, 6.0)
    out = ts.asarray(np.zeros((5, 6)), device=device)
    loops_over_sequences[1, 32](put(x, device), out)
    z = sum(j * r for j, r in enumerate(range(3, 20, 4), 1)) + 10 + 7 + 4 + 1
    ref = np.stack([(16 + 8 + 4 + 1) * x, np.full(5, x.sum()), np.full(5, (np.arange(5) * x).sum()),
                    np.full(5, (x * x[::-1]).sum()), np.full(5, z), np.full(5, 2.5 + 6 + 3.5)], 1)
    np.testing.assert_allclose(out.numpy(), ref)


@ts.jit
def tuple_parameters(out, coef, shape, pair):
    i = tk.grid(1)
    if i < out.size:
        a, b = coef
        out[i] = a * i + b + shape[0] * 0 + pair[0][1] * pair[1]


def test_tuple_arguments(device):
    out = ts.asarray(np.zeros(10), device=device)
    tuple_parameters[1, 32](out, (2, 0.5), (10, 3), ((1, np.float32(3.0)), True))
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(10) + 0.5 + 3)


@ts.jit
def record_fields(r, out):
    i = tk.grid(1)
    if i < r.shape[0]:
        rec = r[i]
        out[i] = rec.a + rec.b + rec.c.imag + r[i]["a"]
        rec.b = rec.b * 2
        rec["c"] = rec.c + 1
        r[i].a += 1


@ts.jit
def record_views_and_subarrays(r, out, bs):
    i, j = tk.grid(2)
    if i < r.shape[0] and j < r.shape[1]:
        acc = 0.0
        for q in range(3):
            acc += r[i, j].v[q]
        out[i, j] = acc + r["b"][i, j]
        r[i, j].v[1] = -1
        bs[i, j] = r.b[i, j]


@pytest.mark.parametrize("align", [False, True])
def test_record_arrays(device, align):
    # packed (fields not aligned for their types: read and written byte by byte) and aligned
    dt = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.complex64)], align=align)
    r = np.zeros(7, dt)
    r["a"] = np.arange(7)
    r["b"] = np.arange(7) * 1.5
    r["c"] = 1j * np.arange(7)
    out = np.zeros(7)
    record_fields[1, 32](r, out)   # NumPy record arrays go to the device and back
    np.testing.assert_allclose(out, np.arange(7) * 4.5)
    np.testing.assert_allclose(r["b"], np.arange(7) * 3.0)
    np.testing.assert_allclose(r["c"], 1 + 1j * np.arange(7))
    np.testing.assert_array_equal(r["a"], np.arange(7) + 1)
    dt2 = np.dtype([("a", np.int8), ("b", np.float64), ("v", np.float32, (3,))], align=True)
    r2 = np.zeros((4, 5), dt2)
    r2["b"] = np.arange(20).reshape(4, 5)
    r2["v"] = np.arange(60).reshape(4, 5, 3)
    ref = r2["v"].sum(-1) + r2["b"]
    out2, bs = np.zeros((4, 5)), np.zeros((4, 5))
    record_views_and_subarrays[(1, 1), (8, 8)](r2, out2, bs)
    np.testing.assert_allclose(out2, ref)
    np.testing.assert_allclose(bs, r2["b"])
    assert (r2["v"][..., 1] == -1).all()
    # a record array held by a tessel array (its bytes) and a strided NumPy view
    storage = ts.asarray(tk.record_bytes_view(r2), device=device)
    out3 = ts.asarray(np.zeros((4, 5)), device=device)
    ref3 = r2["v"].sum(-1) + r2["b"]
    record_views_and_subarrays[(1, 1), (8, 8)](tk.RecordArray(storage, dt2), out3, ts.asarray(bs, device=device))
    np.testing.assert_allclose(out3.numpy(), ref3)
    view = r2[1:, ::2]
    bsv = np.zeros(view.shape)
    record_views_and_subarrays[(1, 1), (8, 8)](view, np.zeros(view.shape), bsv)
    np.testing.assert_allclose(bsv, r2["b"][1:, ::2])


def test_record_errors():
    dt = np.dtype([("a", np.int8), ("b", np.float64)])
    with pytest.raises(tk.KernelCompileError, match="no field 'z'"):
        record_missing_field[1, 1](np.zeros(2, dt), np.zeros(2))
    with pytest.raises(tk.KernelCompileError, match="not aligned for a view"):
        record_misaligned_view[1, 1](np.zeros(2, dt), np.zeros(2))


@ts.jit
def record_missing_field(r, out):
    out[0] = r[0].z


@ts.jit
def record_misaligned_view(r, out):
    out[0] = r["b"][1]


@ts.jit
def match_lanes(a, out, all_mask, all_pred):
    i = tk.grid(1)
    v = a[i]
    out[i] = tk.match_any_sync(0xFFFFFFFF, v)
    m, p = tk.match_all_sync(0xFFFFFFFF, v // 100)
    all_mask[i] = m
    all_pred[i] = p
    tk.nanosleep(10)


@ts.jit
def match_floats_in_part_of_a_warp(a, out):
    i = tk.grid(1)
    if i < 20:
        out[i] = tk.match_any_sync(tk.activemask(), a[i])


@ts.jit
def transposed_views(a, out):
    x = a.T
    y = a.transpose()
    i, j = tk.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        out[i, j] = x[i, j] + y[i, j] + float("1.5") + (1.0 if float("inf") > 1e308 else 0.0)


def test_match_sync_transpose_and_float_strings(device):
    a = (np.arange(64) % 3).astype(np.int64)
    a[32:] = 7
    out, all_mask = ts.zeros(64, dtype=ts.uint32, device=device), ts.zeros(64, dtype=ts.uint32, device=device)
    all_pred = ts.zeros(64, dtype=ts.bool, device=device)
    match_lanes[1, 64](put(a, device), out, all_mask, all_pred)
    expected = [sum(1 << j for j in range(32) if a[(i // 32) * 32 + j] == a[i]) for i in range(64)]
    np.testing.assert_array_equal(out.numpy(), expected)
    assert (all_mask.numpy() == 0xFFFFFFFF).all() and all_pred.numpy().all()
    b = np.array([1.5, 2.5] * 16, np.float32)
    o = ts.zeros(32, dtype=ts.uint32, device=device)
    match_floats_in_part_of_a_warp[1, 32](put(b, device), o)
    assert o.numpy()[0] == sum(1 << j for j in range(0, 20, 2)) and o.numpy()[1] == sum(1 << j for j in range(1, 20, 2))
    A = np.arange(6.0).reshape(2, 3)
    O = ts.zeros((3, 2), device=device)
    transposed_views[(1, 1), (4, 4)](put(A, device), O)
    np.testing.assert_array_equal(O.numpy(), 2 * A.T + 2.5)
