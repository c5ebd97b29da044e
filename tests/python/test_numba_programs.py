"""Numba CUDA programs run through tessel.numba with only the import lines changed.

The programs are those of Numba's CUDA documentation (vector add, matrix multiplication with
shared memory, the shared-memory reduction, Monte Carlo integration and pi with xoroshiro128p,
CUDA ufuncs and gufuncs, globals captured as constants, cuda.reduce, device functions and the
CPU-GPU compatible numba.jit functions) and the typical programs of Numba users (grid-stride
loops, local arrays, atomic histograms, warp-shuffle reductions, multi-stream copies and kernels,
dynamic shared memory), written here in Numba's style and checked against NumPy (and, for the
random numbers, against the same generator in plain Python, which gives Numba's numbers).

Every test runs with the CPU backend selected (``cuda.select_device("cpu")``) and, where there is
a GPU, on CUDA. The last ones are the kernels of the articles tessel was created from (a
grid-stride add, saxpy on NumPy arrays, two-stream copies and kernels, the tiled matmul with its
tile size in a local variable) and the grid-synchronizing examples of Numba's documentation (the
1-D heat equation and sessionization, whose ``grid.sync()`` sits in a branch).
"""
import cmath
import enum
import math
import operator
import sys

import numpy as np
import pytest

# ---- the only lines that differ from the Numba programs -------------------------------------------
import tessel.numba as numba
from tessel.numba import cuda, float32, float64, guvectorize, int32, uint32, vectorize, void
from tessel.numba.cuda.random import (create_xoroshiro128p_states, init_xoroshiro128p_states,
                                      xoroshiro128p_normal_float32, xoroshiro128p_normal_float64,
                                      xoroshiro128p_uniform_float32, xoroshiro128p_uniform_float64)
# ---------------------------------------------------------------------------------------------------

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
    cuda.close()


def _host_states(n, seed):
    """The generator states Numba's create_xoroshiro128p_states(n, seed) makes, as a (n, 2)
    uint64 NumPy array the device functions also accept in plain Python."""
    return curandom._host_states(n, seed)


# ---- vector addition -------------------------------------------------------------------------------
@cuda.jit
def vecadd(a, b, c):
    tid = cuda.grid(1)
    size = len(c)
    if tid < size:
        c[tid] = a[tid] + b[tid]


def test_vector_add(backend):
    np.random.seed(1)
    N = 100000
    a = cuda.to_device(np.random.random(N))
    b = cuda.to_device(np.random.random(N))
    c = cuda.device_array_like(a)
    vecadd.forall(len(a))(a, b, c)
    np.testing.assert_array_equal(c.copy_to_host(), a.copy_to_host() + b.copy_to_host())
    nthreads = 256
    nblocks = (len(a) // nthreads) + 1
    c2 = cuda.device_array_like(a)
    vecadd[nblocks, nthreads](a, b, c2)
    np.testing.assert_array_equal(c2.copy_to_host(), c.copy_to_host())
    # NumPy arguments are copied to the device and back, as Numba does
    x, y, z = np.arange(10.0), np.ones(10), np.zeros(10)
    vecadd[1, 32](x, y, z)
    np.testing.assert_array_equal(z, x + 1)


@cuda.jit
def vecadd_sized(a, b, c, size):
    tid = cuda.grid(1)
    if tid < size:
        c[tid] = a[tid] + b[tid]


def test_vector_add_small_ints(backend):
    a = cuda.to_device(np.array([1, 2, 3]))
    b = cuda.to_device(np.array([1, 2, 3]))
    c = cuda.to_device(np.array([0, 0, 0]))
    vecadd_sized.forall(len(a))(a, b, c, len(a))
    assert c.copy_to_host().tolist() == [2, 4, 6]
    c = cuda.to_device(np.array([0, 0, 0]))
    vecadd_sized[1, 3](a, b, c, len(a))
    assert c.copy_to_host().tolist() == [2, 4, 6]


# ---- grid-stride loops -------------------------------------------------------------------------------
@cuda.jit
def saxpy_strided(a, x, y, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = a * x[i] + y[i]


@cuda.jit
def scale_2d_strided(a, factor):
    x0, y0 = cuda.grid(2)
    xs, ys = cuda.gridsize(2)
    for i in range(x0, a.shape[0], xs):
        for j in range(y0, a.shape[1], ys):
            a[i, j] *= factor


def test_grid_stride_loops(backend):
    x = np.linspace(0, 1, 30001, dtype=np.float32)
    y = np.ones_like(x)
    out = cuda.device_array_like(x)
    saxpy_strided[16, 128](np.float32(2.5), cuda.to_device(x), cuda.to_device(y), out)
    np.testing.assert_allclose(out.copy_to_host(), np.float32(2.5) * x + y, rtol=1e-6)
    a = np.arange(300 * 70, dtype=np.float64).reshape(300, 70)
    d = cuda.to_device(a)
    scale_2d_strided[(4, 2), (8, 8)](d, 3.0)
    np.testing.assert_array_equal(d.copy_to_host(), a * 3)


# ---- matrix multiplication ---------------------------------------------------------------------------
@cuda.jit
def matmul(A, B, C):
    """Square matrix multiplication C = A * B, one element per thread."""
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        tmp = 0.
        for k in range(A.shape[1]):
            tmp += A[i, k] * B[k, j]
        C[i, j] = tmp


TPB = 16


@cuda.jit
def fast_matmul(A, B, C):
    """C = A * B with TPB x TPB tiles in shared memory (any shapes)."""
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x
    tmp = float32(0.)
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def test_matmul(backend):
    x_h = np.arange(16).reshape([4, 4])
    y_h = np.ones([4, 4])
    z_h = np.zeros([4, 4])
    x_d, y_d, z_d = cuda.to_device(x_h), cuda.to_device(y_h), cuda.to_device(z_h)
    threadsperblock = (16, 16)
    blockspergrid_x = math.ceil(z_h.shape[0] / threadsperblock[0])
    blockspergrid_y = math.ceil(z_h.shape[1] / threadsperblock[1])
    matmul[(blockspergrid_x, blockspergrid_y), threadsperblock](x_d, y_d, z_d)
    z_h = z_d.copy_to_host()
    np.testing.assert_array_equal(z_h, x_h @ y_h)
    assert z_h[:, 0].tolist() == [6., 22., 38., 54.]


def test_fast_matmul_square_and_nonsquare(backend):
    x_h = np.arange(16).reshape([4, 4]).astype(np.float32)
    y_h = np.ones([4, 4], dtype=np.float32)
    z_h = np.zeros([4, 4], dtype=np.float32)
    x_d, y_d, z_d = cuda.to_device(x_h), cuda.to_device(y_h), cuda.to_device(z_h)
    threadsperblock = (TPB, TPB)
    blockspergrid = (math.ceil(z_h.shape[0] / TPB), math.ceil(z_h.shape[1] / TPB))
    fast_matmul[blockspergrid, threadsperblock](x_d, y_d, z_d)
    np.testing.assert_array_equal(z_d.copy_to_host(), x_h @ y_h)
    # non-square: the grid covers the larger dimension of the inner product
    x_h = np.arange(115).reshape([5, 23]).astype(np.float32)
    y_h = np.ones([23, 7], dtype=np.float32)
    z_h = np.zeros([5, 7], dtype=np.float32)
    x_d, y_d, z_d = cuda.to_device(x_h), cuda.to_device(y_h), cuda.to_device(z_h)
    grid_y_max = max(x_h.shape[0], y_h.shape[0])
    grid_x_max = max(x_h.shape[1], y_h.shape[1])
    blockspergrid = (math.ceil(grid_x_max / TPB), math.ceil(grid_y_max / TPB))
    fast_matmul[blockspergrid, threadsperblock](x_d, y_d, z_d)
    z = z_d.copy_to_host()
    np.testing.assert_array_equal(z, x_h @ y_h)
    assert z[:, 0].tolist() == [253., 782., 1311., 1840., 2369.]


def test_fast_matmul_random(backend):
    rng = np.random.default_rng(3)
    A = rng.random((70, 45), dtype=np.float32)
    B = rng.random((45, 33), dtype=np.float32)
    C = cuda.device_array((70, 33), dtype=np.float32)
    blocks = (math.ceil(max(A.shape[1], B.shape[1]) / TPB), math.ceil(max(A.shape[0], B.shape[0]) / TPB))
    fast_matmul[blocks, (TPB, TPB)](cuda.to_device(A), cuda.to_device(B), C)
    np.testing.assert_allclose(C.copy_to_host(), A @ B, rtol=1e-5)


# ---- the shared-memory reduction of Numba's docs -------------------------------------------------------
nelem = 1024


@cuda.jit
def array_sum(data):
    tid = cuda.threadIdx.x
    size = len(data)
    if tid < size:
        i = cuda.grid(1)
        shr = cuda.shared.array(nelem, int32)
        shr[tid] = data[i]
        cuda.syncthreads()
        s = 1
        while s < cuda.blockDim.x:
            if tid % (2 * s) == 0:
                shr[tid] += shr[tid + s]
            s *= 2
            cuda.syncthreads()
        if tid == 0:
            data[tid] = shr[tid]


def test_shared_memory_reduction(backend):
    a = cuda.to_device(np.arange(1024))
    array_sum.forall(len(a))(a)  # forall: one block of 1024 threads, as Numba's occupancy choice
    assert a[0] == sum(np.arange(1024)) == 523776


@cuda.jit
def block_partial_sums(x, partial):
    shr = cuda.shared.array(256, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    shr[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            shr[tid] += shr[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = shr[0]


def test_tree_reduction_in_blocks(backend):
    x = np.random.default_rng(5).random(10000).astype(np.float32)
    blocks = (x.size + 255) // 256
    partial = cuda.device_array(blocks, dtype=np.float32)
    block_partial_sums[blocks, 256](cuda.to_device(x), partial)
    np.testing.assert_allclose(partial.copy_to_host().sum(), x.astype(np.float64).sum(), rtol=1e-5)


# ---- Monte Carlo with xoroshiro128p ------------------------------------------------------------------
@numba.jit
def mc_func(x):
    return 1.0 / x


@cuda.jit
def mc_integrator_kernel(out, rng_states, lower_lim, upper_lim):
    size = len(out)
    gid = cuda.grid(1)
    if gid < size:
        samp = xoroshiro128p_uniform_float32(rng_states, gid)
        samp = samp * (upper_lim - lower_lim) + lower_lim
        y = mc_func(samp)
        out[gid] = y


@cuda.reduce
def sum_reduce(a, b):
    return a + b


def mc_integrate(lower_lim, upper_lim, nsamps):
    out = cuda.to_device(np.zeros(nsamps, dtype="float32"))
    rng_states = create_xoroshiro128p_states(nsamps, seed=42)
    mc_integrator_kernel.forall(nsamps)(out, rng_states, lower_lim, upper_lim)
    factor = (upper_lim - lower_lim) / (nsamps - 1)
    return sum_reduce(out) * factor, out.copy_to_host()


def test_monte_carlo_integration(backend):
    nsamps = 20000
    result, samples = mc_integrate(1, 2, nsamps)
    assert abs(result - math.log(2)) < 5e-3
    # the samples are Numba's: the same generator computed in plain Python
    states = _host_states(nsamps, 42)
    want = np.empty(nsamps, np.float32)
    for i in range(nsamps):
        samp = xoroshiro128p_uniform_float32(states, i)
        want[i] = 1.0 / (samp * (2 - 1) + 1)
    np.testing.assert_allclose(samples, want, rtol=1e-6)
    np.testing.assert_allclose(result, want.astype(np.float64).sum() / (nsamps - 1), rtol=1e-5)
    result, _ = mc_integrate(2, 3, nsamps)
    assert abs(result - math.log(1.5)) < 5e-3


@cuda.jit
def compute_pi(rng_states, iterations, out):
    """Each thread draws points in the unit square and counts those inside the quarter circle."""
    thread_id = cuda.grid(1)
    inside = 0
    for i in range(iterations):
        x = xoroshiro128p_uniform_float32(rng_states, thread_id)
        y = xoroshiro128p_uniform_float32(rng_states, thread_id)
        if x ** 2 + y ** 2 <= 1.0:
            inside += 1
    out[thread_id] = 4.0 * inside / iterations


def test_monte_carlo_pi(backend):
    threads_per_block, blocks = 64, 8
    n = threads_per_block * blocks
    rng_states = create_xoroshiro128p_states(n, seed=1)
    out = np.zeros(n, dtype=np.float32)
    compute_pi[blocks, threads_per_block](rng_states, 200, out)
    assert abs(out.mean() - math.pi) < 0.05
    states = _host_states(n, 1)
    for t in (0, 17, n - 1):  # thread by thread, the same numbers as Numba's generator
        inside = 0
        for _ in range(200):
            x = xoroshiro128p_uniform_float32(states, t)
            y = xoroshiro128p_uniform_float32(states, t)
            if x ** 2 + y ** 2 <= 1.0:
                inside += 1
        assert out[t] == np.float32(4.0 * inside / 200)


@cuda.jit
def random_walk(rng_states, steps, positions):
    i = cuda.grid(1)
    if i < positions.shape[0]:
        p = 0.0
        for _ in range(steps):
            p += xoroshiro128p_normal_float32(rng_states, i)
        positions[i] = p + xoroshiro128p_uniform_float64(rng_states, i)


def test_random_normal_walk(backend):
    n = 300
    states = create_xoroshiro128p_states(n, seed=7)
    pos = cuda.device_array(n, dtype=np.float64)
    random_walk[(n + 127) // 128, 128](states, 10, pos)
    host = _host_states(n, 7)
    want = []
    for i in range(n):
        p = 0.0
        for _ in range(10):
            p += xoroshiro128p_normal_float32(host, i)
        want.append(p + xoroshiro128p_uniform_float64(host, i))
    np.testing.assert_allclose(pos.copy_to_host(), want, rtol=1e-5, atol=1e-5)


# ---- CUDA ufuncs and gufuncs -------------------------------------------------------------------------
@vectorize(['float32(float32, float32, float32)',
            'float64(float64, float64, float64)'],
           target='cuda')
def cu_discriminant(a, b, c):
    return math.sqrt(b ** 2 - 4 * a * c)


def test_cuda_ufunc(backend):
    N = 10000
    for dtype in (np.float32, np.float64):
        A = np.array(np.random.sample(N), dtype=dtype)
        B = np.array(np.random.sample(N) + 10, dtype=dtype)
        C = np.array(np.random.sample(N), dtype=dtype)
        D = cu_discriminant(A, B, C)
        assert isinstance(D, np.ndarray) and D.dtype == dtype
        np.testing.assert_allclose(D, np.sqrt(B ** 2 - 4 * A * C), rtol=1e-6)
    # device arrays in: a device array out; out= and stream=
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    dD = cu_discriminant(dA, dB, dC)
    assert isinstance(dD, cuda.devicearray.DeviceNDArray)
    np.testing.assert_array_equal(dD.copy_to_host(), D)
    stream = cuda.stream()
    out = cuda.device_array_like(dA)
    cu_discriminant(dA, dB, dC, out=out, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), D)
    with pytest.raises(TypeError, match="no matching version"):
        cu_discriminant(A.astype(np.int32), B, C)  # CUDA ufuncs want the exact array types


def test_cuda_ufunc_in_chunks_on_a_stream(backend):
    N, chunks = 40000, 4
    A = np.random.sample(N).astype(np.float32)
    B = (np.random.sample(N) + 10).astype(np.float32)
    C = np.random.sample(N).astype(np.float32)
    D = np.empty(A.shape, dtype=A.dtype)
    stream = cuda.stream()
    device_ptrs = []
    with stream.auto_synchronize():
        for a, b, c, d in zip(np.split(A, chunks), np.split(B, chunks), np.split(C, chunks), np.split(D, chunks)):
            dA = cuda.to_device(a, stream)
            dB = cuda.to_device(b, stream)
            dC = cuda.to_device(c, stream)
            dD = cuda.to_device(d, stream, copy=False)
            cu_discriminant(dA, dB, dC, out=dD, stream=stream)
            dD.copy_to_host(d, stream)
            device_ptrs.extend([dA, dB, dC, dD])
    np.testing.assert_allclose(D, np.sqrt(B ** 2 - 4 * A * C), rtol=1e-6)


@cuda.jit('float32(float32, float32, float32)', device=True, inline="always")
def cu_device_fn(x, y, z):
    return x ** y / z


@vectorize(['float32(float32, float32, float32)'], target='cuda')
def cu_ufunc(x, y, z):
    return cu_device_fn(x, y, z)


def test_ufunc_calling_a_device_function(backend):
    x = np.linspace(1, 2, 100, dtype=np.float32)
    y = np.full(100, 1.5, np.float32)
    z = np.arange(1, 101, dtype=np.float32)
    np.testing.assert_allclose(cu_ufunc(x, y, z), x ** y / z, rtol=1e-6)


@vectorize(['int64(int64, int64)', 'float64(float64, float64)'], target='cpu')
def cpu_poly(a, b):
    return a * a + 3 * b


@vectorize
def lazy_hypot(a, b):
    return math.sqrt(a * a + b * b)


def test_cpu_and_lazy_ufuncs_broadcast(backend):
    a = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(cpu_poly(a, 2), a * a + 6)
    np.testing.assert_array_equal(cpu_poly(a.astype(np.int32), np.arange(4)), a * a + 3 * np.arange(4))
    assert cpu_poly(2.0, 1.0) == 7.0
    out = np.zeros((3, 4))
    assert cpu_poly(a.astype(np.float64), 1.0, out=out) is out
    np.testing.assert_array_equal(out, a * a + 3.0)
    x = np.linspace(0, 1, 7, dtype=np.float32)
    h = lazy_hypot(x[:, None], x[None, :])
    assert h.shape == (7, 7) and h.dtype == np.float32
    np.testing.assert_allclose(h, np.hypot(x[:, None], x[None, :]), rtol=1e-6)
    assert lazy_hypot(3, 4) == 5.0


@guvectorize(['void(float32[:,:], float32[:,:], float32[:,:])'], '(m,n),(n,p)->(m,p)', target='cuda')
def matmulcore(A, B, C):
    m, n = A.shape
    n, p = B.shape
    for i in range(m):
        for j in range(p):
            C[i, j] = 0
            for k in range(n):
                C[i, j] += A[i, k] * B[k, j]


@guvectorize(['void(float64[:], float64, float64[:])'], '(n),()->(n)', target='cuda')
def add_scalar(x, y, res):
    for i in range(x.shape[0]):
        res[i] = x[i] + y


@guvectorize(['void(float64[:], float64[:])'], '(n)->()', target='parallel')
def row_norm(x, res):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * x[i]
    res[0] = math.sqrt(acc)


def test_gufuncs(backend):
    rng = np.random.default_rng(2)
    A = rng.random((10, 2, 4), dtype=np.float32)
    B = rng.random((10, 4, 5), dtype=np.float32)
    C = matmulcore(A, B)
    assert C.shape == (10, 2, 5)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)
    dC = matmulcore(cuda.to_device(A), cuda.to_device(B))  # device in, device out
    np.testing.assert_allclose(dC.copy_to_host(), A @ B, rtol=1e-5)
    out = cuda.device_array((10, 2, 5), dtype=np.float32)
    matmulcore(cuda.to_device(A), cuda.to_device(B), out=out)
    np.testing.assert_allclose(out.copy_to_host(), A @ B, rtol=1e-5)
    x = np.arange(10.0).reshape(2, 5)
    np.testing.assert_array_equal(add_scalar(x, np.array([1.0, 100.0])), x + np.array([[1.0], [100.0]]))
    np.testing.assert_array_equal(add_scalar(np.arange(5.0), 2.0), np.arange(5.0) + 2)
    m = rng.random((6, 9))
    np.testing.assert_allclose(row_norm(m), np.linalg.norm(m, axis=1))
    res = np.zeros(6)
    row_norm(m, res)
    np.testing.assert_allclose(res, np.linalg.norm(m, axis=1))


# ---- globals: captured as constants when compiled ------------------------------------------------------
TAX_RATE = 0.08
PRICES = np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float64)


@cuda.jit
def compute_totals(quantities, totals):
    i = cuda.grid(1)
    if i < totals.size:
        totals[i] = quantities[i] * PRICES[i] * (1 + TAX_RATE)


WEIGHTS = np.array([0.25, 0.5, 0.25], dtype=np.float32)


@cuda.jit
def smooth(x, out):
    w = cuda.const.array_like(WEIGHTS)
    i = cuda.grid(1)
    if 1 <= i < x.size - 1:
        out[i] = w[0] * x[i - 1] + w[1] * x[i] + w[2] * x[i + 1]


def test_globals_are_constants(backend):
    global TAX_RATE
    d_quantities = cuda.to_device(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    d_totals = cuda.device_array(5)
    compute_totals[1, 32](d_quantities, d_totals)
    first = d_totals.copy_to_host()
    np.testing.assert_allclose(first, np.array([1, 2, 3, 4, 5]) * PRICES * 1.08)
    saved_rate, saved_prices = TAX_RATE, PRICES.copy()
    try:
        TAX_RATE = 0.10
        PRICES[:] = [20.0, 50.0, 10.0, 30.0, 60.0]
        compute_totals[1, 32](d_quantities, d_totals)  # compiled already: the old values
        np.testing.assert_array_equal(d_totals.copy_to_host(), first)
    finally:
        TAX_RATE = saved_rate
        PRICES[:] = saved_prices
    x = np.arange(10, dtype=np.float32) ** 2
    out = np.zeros_like(x)
    smooth[1, 16](x, out)
    np.testing.assert_allclose(out[1:-1], 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:])


# ---- cuda.reduce -----------------------------------------------------------------------------------------
def test_cuda_reduce(backend):
    A = (np.arange(1234, dtype=np.float64)) + 1
    expect = A.sum()
    got = sum_reduce(A)
    assert expect == got
    lambda_reduce = cuda.reduce(lambda a, b: a + b)
    assert lambda_reduce(A) == expect

    @cuda.reduce
    def max_reduce(a, b):
        return max(a, b)

    x = np.random.default_rng(4).random(100001).astype(np.float32)
    assert max_reduce(x) == x.max()
    assert max_reduce(cuda.to_device(x)) == x.max()
    assert sum_reduce(np.arange(10), size=4) == 6
    assert sum_reduce(np.arange(3), init=10) == 13
    res = cuda.device_array(1, dtype=np.int64)
    assert sum_reduce(cuda.to_device(np.arange(1000)), res=res) is None
    assert res.copy_to_host()[0] == 499500
    assert sum_reduce(np.zeros(0)) == 0


# ---- device functions --------------------------------------------------------------------------------
@cuda.jit(device=True)
def a_device_function(a, b):
    return a + b


@cuda.jit(device=True)
def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@cuda.jit(device=True)
def polar(x, y):
    return math.sqrt(x * x + y * y), math.atan2(y, x)


@cuda.jit
def use_device_functions(x, y, out, r, theta):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = clamp(a_device_function(x[i], y[i]), 0.5, 1.5)
        r[i], theta[i] = polar(x[i], y[i])


def test_device_functions(backend):
    x = np.linspace(-1, 1, 50)
    y = np.linspace(0, 2, 50)
    out, r, theta = np.zeros(50), np.zeros(50), np.zeros(50)
    use_device_functions[2, 32](x, y, out, r, theta)
    np.testing.assert_allclose(out, np.clip(x + y, 0.5, 1.5))
    np.testing.assert_allclose(r, np.hypot(x, y))
    np.testing.assert_allclose(theta, np.arctan2(y, x))


@numba.jit
def business_logic(x, y, z):
    return 4 * z * (2 * x - (4 * y) / 2 * math.pi)


@cuda.jit
def business_kernel(res, xarr, yarr, zarr):
    tid = cuda.grid(1)
    if tid < len(xarr):
        res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])


def test_numba_jit_function_in_a_kernel(backend):
    X = cuda.to_device([1, 10, 234])
    Y = cuda.to_device([2, 2, 4014])
    Z = cuda.to_device([3, 14, 2211])
    results = cuda.to_device([0.0, 0.0, 0.0])
    assert business_logic(1, 2, 3) == pytest.approx(-126.79644737231007)
    business_kernel.forall(len(X))(results, X, Y, Z)
    expect = [business_logic(x, y, z) for x, y, z in zip(X, Y, Z)]
    np.testing.assert_allclose(results.copy_to_host(), expect, rtol=1e-15)


# ---- local arrays ------------------------------------------------------------------------------------------
@cuda.jit
def moving_sort3(x, out):
    """Each thread sorts a window of 3 in a local array and writes the median."""
    i = cuda.grid(1)
    if 1 <= i < x.size - 1:
        w = cuda.local.array(3, dtype=numba.float64)
        for k in range(3):
            w[k] = x[i - 1 + k]
        for a in range(3):
            for b in range(2 - a):
                if w[b] > w[b + 1]:
                    w[b], w[b + 1] = w[b + 1], w[b]
        out[i] = w[1]


@cuda.jit
def digit_histogram_local(values, out):
    i = cuda.grid(1)
    if i < values.size:
        counts = cuda.local.array(10, dtype=int32)
        for k in range(10):
            counts[k] = 0
        v = values[i]
        while v > 0:
            counts[v % 10] += 1
            v //= 10
        for k in range(10):
            out[i, k] = counts[k]


def test_local_arrays(backend):
    x = np.random.default_rng(8).random(200)
    out = np.zeros_like(x)
    moving_sort3[4, 64](x, out)
    want = np.median(np.stack([x[:-2], x[1:-1], x[2:]]), axis=0)
    np.testing.assert_array_equal(out[1:-1], want)
    values = np.array([0, 7, 10, 1234567890, 99999, 5005], dtype=np.int64)
    digits = np.zeros((values.size, 10), dtype=np.int32)
    digit_histogram_local[1, 32](values, digits)
    for v, row in zip(values, digits):
        want = np.bincount([int(c) for c in str(v)], minlength=10) if v else np.zeros(10, int)
        np.testing.assert_array_equal(row, want)


# ---- atomics ---------------------------------------------------------------------------------------------
@cuda.jit
def histogram(x, xmin, xmax, histogram_out):
    nbins = histogram_out.shape[0]
    bin_width = (xmax - xmin) / nbins
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        bin_number = np.int32((x[i] - xmin) / bin_width)
        if bin_number >= 0 and bin_number < histogram_out.shape[0]:
            cuda.atomic.add(histogram_out, bin_number, 1)


@cuda.jit
def shared_histogram(data, hist):
    """Per-block histogram in shared memory, merged into the global one."""
    local_hist = cuda.shared.array(16, dtype=int32)
    t = cuda.threadIdx.x
    if t < 16:
        local_hist[t] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local_hist, data[i] & 15, 1)
    cuda.syncthreads()
    if t < 16:
        cuda.atomic.add(hist, t, local_hist[t])


@cuda.jit
def atomic_extremes(x, result):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.max(result, 0, x[i])
        cuda.atomic.min(result, 1, x[i])


def test_atomic_histograms(backend):
    x = np.random.default_rng(9).normal(size=50000).astype(np.float32)
    xmin, xmax = np.float32(-4.0), np.float32(4.0)
    hist = np.zeros(40, dtype=np.int32)
    histogram[32, 128](x, xmin, xmax, hist)
    bins = ((x - xmin) / ((xmax - xmin) / 40)).astype(np.int32)
    want = np.bincount(bins[(bins >= 0) & (bins < 40)], minlength=40)
    np.testing.assert_array_equal(hist, want)
    data = np.random.default_rng(10).integers(0, 1000, 20000).astype(np.int32)
    h = cuda.to_device(np.zeros(16, dtype=np.int32))
    shared_histogram[8, 256](cuda.to_device(data), h)
    np.testing.assert_array_equal(h.copy_to_host(), np.bincount(data & 15, minlength=16))
    r = np.array([-np.inf, np.inf])
    v = np.random.default_rng(11).normal(size=3000)
    atomic_extremes[(3000 + 255) // 256, 256](v, r)
    assert r.tolist() == [v.max(), v.min()]


# ---- warp intrinsics ----------------------------------------------------------------------------------------
@cuda.jit
def warp_sum(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xffffffff, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // cuda.warpsize] = v


@cuda.jit
def warp_votes(x, counts, firsts):
    i = cuda.grid(1)
    positive = x[i] > 0
    mask = cuda.ballot_sync(0xffffffff, positive)
    if cuda.laneid == 0:
        counts[i // 32] = cuda.popc(mask)
        firsts[i // 32] = cuda.ffs(mask)


@cuda.jit
def warp_broadcast_xor(x, out):
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    first = cuda.shfl_sync(0xffffffff, x[i], 0)
    partner = cuda.shfl_xor_sync(0xffffffff, x[i], 1)
    out[i, 0] = first
    out[i, 1] = partner
    out[i, 2] = lane


def test_warp_shuffle_reduction(backend):
    x = np.random.default_rng(12).random(1000)
    out = np.zeros((1000 + 31) // 32 + 1)  # 32 blocks of 32: 32 warps
    warp_sum[32, 32](x, out)
    padded = np.zeros(32 * 32)
    padded[:1000] = x
    np.testing.assert_allclose(out[:32], padded.reshape(32, 32).sum(axis=1), rtol=1e-12)


def test_warp_votes_and_shuffles(backend):
    x = np.random.default_rng(13).normal(size=128)
    counts, firsts = np.zeros(4, np.int32), np.zeros(4, np.int32)
    warp_votes[1, 128](x, counts, firsts)
    for w in range(4):
        lanes = x[32 * w:32 * w + 32] > 0
        assert counts[w] == lanes.sum()
        assert firsts[w] == (np.argmax(lanes) + 1 if lanes.any() else 0)
    out = np.zeros((64, 3))
    warp_broadcast_xor[2, 32](x[:64], out)
    np.testing.assert_array_equal(out[:, 0], np.repeat(x[[0, 32]], 32))
    np.testing.assert_array_equal(out[:, 1], x[:64].reshape(-1, 2)[:, ::-1].reshape(-1))
    np.testing.assert_array_equal(out[:, 2], np.tile(np.arange(32), 2))


# ---- streams: copies and kernels on several streams ------------------------------------------------------
@cuda.jit
def increment_by(a, value):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += value


def test_multi_stream_copies_and_kernels(backend):
    nstreams, n = 4, 20000
    host = [np.arange(n, dtype=np.float32) * (k + 1) for k in range(nstreams)]
    results = [cuda.pinned_array(n, dtype=np.float32) for _ in range(nstreams)]
    streams = [cuda.stream() for _ in range(nstreams)]
    start, end = cuda.event(), cuda.event()
    start.record()
    devs = []
    for k, s in enumerate(streams):
        d = cuda.to_device(host[k], stream=s)
        increment_by[(n + 255) // 256, 256, s](d, np.float32(k))
        increment_by[(n + 255) // 256, 256, s, 0](d, np.float32(1))
        d.copy_to_host(results[k], stream=s)
        devs.append(d)
    for s in streams:
        s.synchronize()
    end.record()
    end.synchronize()
    assert cuda.event_elapsed_time(start, end) >= 0
    for k in range(nstreams):
        np.testing.assert_array_equal(results[k], host[k] + k + 1)
    # `with stream:` makes it the current stream; a NumPy argument's copies go on the launch's stream
    s = streams[0]
    a = np.zeros(100, np.float32)
    with s:
        increment_by[1, 128, s](a, np.float32(2))
    s.synchronize()
    np.testing.assert_array_equal(a, 2)


# ---- dynamic shared memory, 3-D blocks, barrier collectives -------------------------------------------------
@cuda.jit
def reverse_dynamic(x):
    buf = cuda.shared.array(0, dtype=float32)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    cuda.syncthreads()
    x[t] = buf[cuda.blockDim.x - 1 - t]


@cuda.jit
def index_3d(out):
    x, y, z = cuda.grid(3)
    if x < out.shape[0] and y < out.shape[1] and z < out.shape[2]:
        out[x, y, z] = x * 10000 + y * 100 + z


@cuda.jit
def count_positive(x, out):
    i = cuda.grid(1)
    n = cuda.syncthreads_count(x[i] > 0)
    anyneg = cuda.syncthreads_or(x[i] < 0)
    allfin = cuda.syncthreads_and(x[i] == x[i])
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x, 0] = n
        out[cuda.blockIdx.x, 1] = anyneg
        out[cuda.blockIdx.x, 2] = allfin


def test_dynamic_shared_memory_3d_grids_and_barrier_votes(backend):
    x = np.arange(64, dtype=np.float32)
    reverse_dynamic[1, 64, 0, 64 * 4](x)
    np.testing.assert_array_equal(x, np.arange(64, dtype=np.float32)[::-1])
    out = np.zeros((5, 6, 7), dtype=np.int64)
    index_3d[(2, 2, 2), (4, 4, 4)](out)
    i, j, k = np.indices(out.shape)
    np.testing.assert_array_equal(out, i * 10000 + j * 100 + k)
    v = np.random.default_rng(14).normal(size=96)
    res = np.zeros((3, 3), np.int32)
    count_positive[3, 32](v, res)
    blocks = v.reshape(3, 32)
    np.testing.assert_array_equal(res[:, 0], (blocks > 0).sum(axis=1))
    np.testing.assert_array_equal(res[:, 1], (blocks < 0).any(axis=1))
    np.testing.assert_array_equal(res[:, 2], 1)


# ---- what is not supported: grid synchronization ---------------------------------------------------------
@cuda.jit
def solve_heat_equation(buf_0, buf_1, timesteps, k):
    # Numba's documentation example: a grid barrier per time step.
    i = cuda.grid(1)
    if i >= len(buf_0):
        return
    grid = cuda.cg.this_grid()
    for step in range(timesteps):
        if (step % 2) == 0:
            data = buf_0
            next_data = buf_1
        else:
            data = buf_1
            next_data = buf_0
        curr_temp = data[i]
        if i == 0:
            next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
        elif i == len(data) - 1:
            next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
        else:
            next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp) + data[i + 1])
        next_data[i] = next_temp
        grid.sync()


def test_heat_equation_with_grid_sync(backend):
    size, niter, k = 1001, 200, 0.25
    data = np.zeros(size, dtype=np.float32)
    data[500] = 10000
    buf_0 = cuda.to_device(data)
    buf_1 = cuda.device_array_like(buf_0)
    solve_heat_equation.forall(len(data))(buf_0, buf_1, niter, k)
    ref = data.astype(np.float64)
    for _ in range(niter):
        nxt = ref.copy()
        nxt[0] = ref[0] + k * (ref[1] - 2 * ref[0])
        nxt[-1] = ref[-1] + k * (ref[-2] - 2 * ref[-1])
        nxt[1:-1] = ref[1:-1] + k * (ref[:-2] - 2 * ref[1:-1] + ref[2:])
        ref = nxt
    np.testing.assert_allclose(buf_0.copy_to_host(), ref, rtol=1e-3, atol=1e-3)


# ---- sessionization (Numba's documentation; grid.sync() inside a branch) -------------------------------
session_timeout = np.int64(np.timedelta64("3600", "s"))


@cuda.jit
def sessionize(user_id, timestamp, results):
    gid = cuda.grid(1)
    size = len(user_id)
    if gid >= size:
        return
    is_first_datapoint = gid == 0
    if not is_first_datapoint:
        new_user = user_id[gid] != user_id[gid - 1]
        timed_out = timestamp[gid] - timestamp[gid - 1] > session_timeout
        is_sess_boundary = new_user or timed_out
    else:
        is_sess_boundary = True
    if is_sess_boundary:
        results[gid] = gid
        grid = cuda.cg.this_grid()
        grid.sync()
        look_ahead = 1
        while results[gid + look_ahead] == 0:
            results[gid + look_ahead] = gid
            look_ahead += 1
            if gid + look_ahead == size - 1:
                results[gid + look_ahead] = gid
                break


def test_sessionization_with_grid_sync_in_a_branch(backend):
    ids = np.array([1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4])
    sec = np.array([1, 2, 3, 5000, 5001, 5002, 1, 2, 3, 1, 2, 5000, 5001, 10000, 10001, 10002, 10003, 15000,
                    150001, 1, 5000, 50001, 15000, 20000, 25000, 25001, 25002, 25003],
                   dtype="datetime64[ns]").astype("int64")
    results = cuda.to_device(np.zeros(len(ids)))
    sessionize.forall(len(ids))(cuda.to_device(ids), cuda.to_device(sec), results)
    expected = [0, 0, 0, 3, 3, 3, 6, 6, 6, 9, 9, 11, 11, 13, 13, 13, 13, 17, 18, 19, 20, 21, 21, 23, 24, 24, 24,
                24]
    np.testing.assert_array_equal(results.copy_to_host(), expected)


# ---- the articles' kernels ------------------------------------------------------------------------------
@cuda.jit
def article_vector_add(a, b, out):
    idx = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(idx, a.size, stride):
        out[i] = a[i] + b[i]


@cuda.jit
def article_saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def article_kernel_add(a, b, res):
    idx = cuda.grid(1)
    if idx < res.size:
        res[idx] = a[idx] + b[idx]


@cuda.jit
def article_shared_mem_matmul(a, b, res):
    TILE_SIZE = 16
    shared_a = cuda.shared.array(shape=(TILE_SIZE, TILE_SIZE), dtype=np.float32)
    shared_b = cuda.shared.array(shape=(TILE_SIZE, TILE_SIZE), dtype=np.float32)
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    acc = 0.0
    for i in range(0, a.shape[1], TILE_SIZE):
        if row < a.shape[0] and i + cuda.threadIdx.x < a.shape[1]:
            shared_a[cuda.threadIdx.y, cuda.threadIdx.x] = a[row, i + cuda.threadIdx.x]
        else:
            shared_a[cuda.threadIdx.y, cuda.threadIdx.x] = 0.0
        if i + cuda.threadIdx.y < b.shape[0] and col < b.shape[1]:
            shared_b[cuda.threadIdx.y, cuda.threadIdx.x] = b[i + cuda.threadIdx.y, col]
        else:
            shared_b[cuda.threadIdx.y, cuda.threadIdx.x] = 0.0
        cuda.syncthreads()
        for j in range(TILE_SIZE):
            acc += shared_a[cuda.threadIdx.y, j] * shared_b[j, cuda.threadIdx.x]
        cuda.syncthreads()
    if row < res.shape[0] and col < res.shape[1]:
        res[row, col] = acc


@cuda.jit
def article_basic_matmul(a, b, res):
    row, col = cuda.grid(2)
    if row < res.shape[0] and col < res.shape[1]:
        tmp = 0.0
        for k in range(a.shape[1]):
            tmp += a[row, k] * b[k, col]
        res[row, col] = tmp


def test_article_kernels(backend):
    rng = np.random.default_rng(5)
    n = 100_003
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    out = np.full_like(x, np.nan)
    article_saxpy[(n + 255) // 256, 256](2.0, x, y, out)
    cuda.synchronize()
    np.testing.assert_allclose(out, 2 * x.astype(np.float64) + y, rtol=1e-6)

    dev_a, dev_b = cuda.to_device(x), cuda.to_device(y)
    dev_out = cuda.device_array_like(dev_a)
    article_vector_add[40, 1024](dev_a, dev_b, dev_out)
    np.testing.assert_array_equal(dev_out.copy_to_host(), x + y)

    # two streams: copies on one, the kernel and the copy back on the other
    stream1, stream2 = cuda.stream(), cuda.stream()
    a_d = cuda.device_array(n, dtype=np.float32, stream=stream1)
    b_d = cuda.device_array(n, dtype=np.float32, stream=stream1)
    res_d = cuda.device_array(n, dtype=np.float32, stream=stream2)
    a_d.copy_to_device(x, stream=stream1)
    b_d.copy_to_device(y, stream=stream1)
    stream1.synchronize()
    article_kernel_add[(n + 255) // 256, 256, stream2](a_d, b_d, res_d)
    res_h = np.full_like(x, np.nan)
    res_d.copy_to_host(res_h, stream=stream2)
    stream2.synchronize()
    np.testing.assert_array_equal(res_h, x + y)

    # four streams, each made current with `with stream:`
    data = rng.random(4 * 1000, dtype=np.float32)
    chunk = 1000
    outs = []
    for i, stream in enumerate([cuda.stream() for _ in range(4)]):
        with stream:
            dev_data = cuda.to_device(data[i * chunk:(i + 1) * chunk], stream=stream)
            o = cuda.device_array_like(dev_data, stream=stream)
            article_vector_add[4, 256, stream](dev_data, dev_data, o)
            outs.append(o)
    cuda.synchronize()
    np.testing.assert_array_equal(np.concatenate([o.copy_to_host() for o in outs]), 2 * data)

    for m, k, p in [(64, 64, 64), (100, 37, 70)]:
        a = rng.random((m, k), dtype=np.float32)
        b = rng.random((k, p), dtype=np.float32)
        ref = a.astype(np.float64) @ b
        res = np.full((m, p), np.nan, np.float32)
        blocks = ((p + 15) // 16, (m + 15) // 16)
        article_shared_mem_matmul[blocks, (16, 16)](a, b, res)
        np.testing.assert_allclose(res, ref, rtol=1e-5)
        res2 = np.full((m, p), np.nan, np.float32)
        article_basic_matmul[(blocks[1], blocks[0]), (16, 16)](a, b, res2)
        np.testing.assert_allclose(res2, ref, rtol=1e-5)


# ---- more programs in Numba users' style -------------------------------------------------------------
SCAN_TPB = 128


@cuda.jit
def scan_blocks(x, out, sums):
    """Hillis-Steele inclusive scan of each block's share in shared memory; sums[b]: block b's total."""
    tmp = cuda.shared.array(SCAN_TPB, dtype=float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    tmp[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    offset = 1
    while offset < SCAN_TPB:
        v = tmp[t - offset] if t >= offset else 0
        cuda.syncthreads()
        tmp[t] += v
        cuda.syncthreads()
        offset *= 2
    if i < x.size:
        out[i] = tmp[t]
    if t == SCAN_TPB - 1:
        sums[cuda.blockIdx.x] = tmp[t]


@cuda.jit
def add_block_offsets(out, sums):
    i = cuda.grid(1)
    b = cuda.blockIdx.x
    if i < out.size and b > 0:
        acc = float32(0)
        for k in range(b):
            acc += sums[k]
        out[i] += acc


def test_prefix_sum_with_shared_memory(backend):
    rng = np.random.default_rng(11)
    n = 1000
    x = rng.random(n).astype(np.float32)
    blocks = (n + SCAN_TPB - 1) // SCAN_TPB
    d_out = cuda.device_array(n, np.float32)
    d_sums = cuda.device_array(blocks, np.float32)
    scan_blocks[blocks, SCAN_TPB](cuda.to_device(x), d_out, d_sums)
    add_block_offsets[blocks, SCAN_TPB](d_out, d_sums)
    np.testing.assert_allclose(d_out.copy_to_host(), np.cumsum(x, dtype=np.float64), rtol=1e-4)


TILE_DIM = 32


@cuda.jit
def transpose_tiled(a, b):
    tile = cuda.shared.array((TILE_DIM, TILE_DIM + 1), dtype=float32)   # padded: no bank conflicts
    x = cuda.blockIdx.x * TILE_DIM + cuda.threadIdx.x
    y = cuda.blockIdx.y * TILE_DIM + cuda.threadIdx.y
    if y < a.shape[0] and x < a.shape[1]:
        tile[cuda.threadIdx.y, cuda.threadIdx.x] = a[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE_DIM + cuda.threadIdx.x
    y = cuda.blockIdx.x * TILE_DIM + cuda.threadIdx.y
    if y < b.shape[0] and x < b.shape[1]:
        b[y, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y]


@cuda.jit
def laplacian_5pt(u, out):
    i, j = cuda.grid(2)
    n, m = u.shape
    if 0 < i < n - 1 and 0 < j < m - 1:
        out[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4 * u[i, j]


def test_transpose_with_padded_tiles_and_a_stencil(backend):
    rng = np.random.default_rng(12)
    a = rng.random((70, 45)).astype(np.float32)
    b = np.zeros((45, 70), np.float32)
    transpose_tiled[(math.ceil(45 / TILE_DIM), math.ceil(70 / TILE_DIM)), (TILE_DIM, TILE_DIM)](a, b)
    np.testing.assert_array_equal(b, a.T)
    u = rng.random((50, 60))
    out = np.zeros_like(u)
    laplacian_5pt[(4, 4), (16, 16)](u, out)
    ref = np.zeros_like(u)
    ref[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
    np.testing.assert_allclose(out, ref, atol=1e-12)


@cuda.jit(device=True)
def body_body(xi, yi, zi, xj, yj, zj, mj):
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    r2 = dx * dx + dy * dy + dz * dz + float32(1e-3)
    inv = float32(1.0) / math.sqrt(r2)
    inv3 = inv * inv * inv * mj
    return dx * inv3, dy * inv3, dz * inv3


@cuda.jit
def nbody_accelerations(pos, mass, acc):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        ax = float32(0)
        ay = float32(0)
        az = float32(0)
        for j in range(pos.shape[0]):
            fx, fy, fz = body_body(pos[i, 0], pos[i, 1], pos[i, 2], pos[j, 0], pos[j, 1], pos[j, 2], mass[j])
            ax += fx
            ay += fy
            az += fz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


def test_nbody_float32(backend):
    rng = np.random.default_rng(13)
    n = 200
    pos = rng.standard_normal((n, 3)).astype(np.float32)
    mass = rng.random(n).astype(np.float32)
    acc = np.zeros_like(pos)
    nbody_accelerations[(n + 63) // 64, 64](pos, mass, acc)
    d = pos[None, :, :].astype(np.float64) - pos[:, None, :]
    r2 = (d ** 2).sum(-1) + 1e-3
    ref = (d * (mass[None, :] / r2 ** 1.5)[:, :, None]).sum(1)
    np.testing.assert_allclose(acc, ref, rtol=2e-3, atol=2e-3)


SORT_N = 256


@cuda.jit
def bitonic_sort_block(a):
    s = cuda.shared.array(SORT_N, dtype=int32)
    t = cuda.threadIdx.x
    s[t] = a[t]
    cuda.syncthreads()
    k = 2
    while k <= SORT_N:
        j = k // 2
        while j > 0:
            partner = t ^ j
            if partner > t:
                ascending = (t & k) == 0
                if (s[t] > s[partner]) == ascending:
                    s[t], s[partner] = s[partner], s[t]
            cuda.syncthreads()
            j //= 2
        k *= 2
    a[t] = s[t]


@cuda.jit
def softmax_rows(x, out):
    """One warp per row: max and sum reduced with shuffles (the offsets a tuple, unrolled)."""
    row = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    n = x.shape[1]
    m = -math.inf
    for j in range(lane, n, 32):
        m = max(m, x[row, j])
    for offset in (16, 8, 4, 2, 1):
        m = max(m, cuda.shfl_xor_sync(0xffffffff, m, offset))
    s = 0.0
    for j in range(lane, n, 32):
        s += math.exp(x[row, j] - m)
    offset = 16
    while offset > 0:
        s += cuda.shfl_xor_sync(0xffffffff, s, offset)
        offset //= 2
    for j in range(lane, n, 32):
        out[row, j] = math.exp(x[row, j] - m) / s


def test_bitonic_sort_and_softmax_with_shuffles(backend):
    rng = np.random.default_rng(14)
    a = rng.integers(-1000, 1000, SORT_N).astype(np.int32)
    d = cuda.to_device(a)
    bitonic_sort_block[1, SORT_N](d)
    np.testing.assert_array_equal(d.copy_to_host(), np.sort(a))
    x = rng.standard_normal((10, 100))
    out = np.zeros_like(x)
    softmax_rows[10, 32](x, out)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-12)


@cuda.jit
def fill_3d(a):
    i, j, k = cuda.grid(3)
    if i < a.shape[0] and j < a.shape[1] and k < a.shape[2]:
        a[i, j, k] = i * 10000 + j * 100 + k


@cuda.jit
def reverse_each_block(x, out):
    buf = cuda.shared.array(0, dtype=numba.float64)   # dynamic: sized by the launch
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i]
    cuda.syncthreads()
    out[i] = buf[cuda.blockDim.x - 1 - t]


def test_3d_grid_and_a_stream_with_dynamic_shared_memory(backend):
    a = np.zeros((9, 10, 11), np.int64)
    fill_3d[(2, 2, 3), (8, 8, 4)](a)
    ii, jj, kk = np.indices(a.shape)
    np.testing.assert_array_equal(a, ii * 10000 + jj * 100 + kk)
    stream = cuda.stream()
    x = np.arange(256.0)
    dx = cuda.to_device(x, stream=stream)
    dout = cuda.device_array_like(dx, stream=stream)
    reverse_each_block[4, 64, stream, 64 * 8](dx, dout)
    host = dout.copy_to_host(stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(host, x.reshape(4, 64)[:, ::-1].ravel())


@cuda.jit(device=True)
def square(v):
    return v * v


@cuda.jit(device=True)
def norm2(x, y):
    return math.sqrt(square(x) + square(y))


@cuda.jit(device=True)
def clamped_norm(x, y, limit):
    return min(norm2(x, y), limit)


@cuda.jit
def clamped_norms(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = clamped_norm(x[i], y[i], 1.0)


@cuda.jit
def int32_wraparound(a, out):
    i = cuda.grid(1)
    if i < a.size:
        v = a[i]
        out[i, 0] = v * int32(3)
        out[i, 1] = v + v
        out[i, 2] = v << int32(4)
        h = v * int32(1664525) + int32(1013904223)   # an LCG step in int32
        out[i, 3] = h
        out[i, 4] = -v


def test_device_functions_calling_device_functions_and_int32_wraparound(backend):
    rng = np.random.default_rng(15)
    x, y = rng.random(100), rng.random(100)
    out = np.zeros(100)
    clamped_norms[1, 128](x, y, out)
    np.testing.assert_allclose(out, np.minimum(np.hypot(x, y), 1.0))
    a = np.array([2**30, 2**31 - 1, -2**31, 123456789, -5], np.int32)
    res = np.zeros((5, 5), np.int32)
    int32_wraparound[1, 32](a, res)
    with np.errstate(over="ignore"):
        ref = np.stack([a * np.int32(3), a + a, a << np.int32(4),
                        a * np.int32(1664525) + np.int32(1013904223), -a], 1)
    np.testing.assert_array_equal(res, ref)


@cuda.jit
def publish_then_count(data, flag, out):
    i = cuda.grid(1)
    data[i] = i * 2
    cuda.threadfence()          # data is visible to the grid before the flag counts it
    cuda.threadfence_block()
    cuda.atomic.add(flag, 0, 1)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = flag[0] >= cuda.blockDim.x


@cuda.jit
def array_attributes(a, out):
    out[0] = a.shape[0]
    out[1] = a.shape[1]
    out[2] = a.strides[0]
    out[3] = a.strides[1]
    out[4] = a.ndim
    out[5] = a.size
    out[6] = len(a)


def test_threadfence_and_array_attributes_in_kernels(backend):
    data, flag, out = np.zeros(128, np.int64), np.zeros(1, np.int32), np.zeros(2, np.bool_)
    publish_then_count[2, 64](data, flag, out)
    assert out.all() and flag[0] == 128
    np.testing.assert_array_equal(data, np.arange(128) * 2)
    a = np.zeros((6, 7), np.float32)
    res = np.zeros(7, np.int64)
    array_attributes[1, 1](a, res)
    assert res.tolist() == [6, 7, 28, 4, 2, 42, 6]
    array_attributes[1, 1](a[::2, 1:], res)            # a strided NumPy view
    # the CPU backend works in the view itself; a GPU gets a C-contiguous copy (Numba raises there)
    assert res.tolist() == [3, 6, 56 if backend == "cpu" else 24, 4, 2, 18, 3]
    array_attributes[1, 1](cuda.to_device(np.zeros((5, 4), order="F")), res)
    assert res.tolist() == [5, 4, 8, 40, 2, 20, 5]


@cuda.jit
def scalar_kinds(flag, n, x, z, out):
    out[0] = n + (1 if flag else 0)
    out[1] = x * 2
    out[2] = z.real + z.imag
    out[3] = abs(z)


@cuda.jit
def double_0d(a, b):
    b[()] = a[()] * 2


@cuda.jit
def increment_1d(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


@cuda.jit
def increment_2d(a):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] += 1


def test_scalar_arguments_0d_arrays_and_slices_of_device_arrays(backend):
    out = np.zeros(4)
    scalar_kinds[1, 1](True, 41, 1.25, 3 + 4j, out)      # Python bool, int, float, complex
    assert out.tolist() == [42, 2.5, 7.0, 5.0]
    scalar_kinds[1, 1](np.bool_(False), np.int32(7), np.float32(0.5), np.complex64(1j), out)
    assert out.tolist() == [7, 1.0, 1.0, 1.0]
    a, b = np.array(3.5), np.array(0.0)
    double_0d[1, 1](a, b)
    assert b[()] == 7.0
    db = cuda.device_array(())
    double_0d[1, 1](cuda.to_device(np.array(1.5)), db)
    assert db.copy_to_host()[()] == 3.0
    h = np.zeros((8, 10))
    d = cuda.to_device(h)
    increment_1d[1, 32](d[2])
    increment_1d[1, 32](d[:, 3])
    increment_2d[(1, 1), (16, 16)](d[1:5, ::2])
    increment_1d[1, 32](d[7, 2:9:3])
    h[2] += 1
    h[:, 3] += 1
    h[1:5, ::2] += 1
    h[7, 2:9:3] += 1
    np.testing.assert_array_equal(d.copy_to_host(), h)


@cuda.jit
def median_of_5(x, out):
    i = cuda.grid(1)
    if 2 <= i < x.size - 2:
        w = cuda.local.array(5, numba.float64)
        for k in range(5):
            w[k] = x[i - 2 + k]
        for a in range(5):
            for b in range(4 - a):
                if w[b] > w[b + 1]:
                    w[b], w[b + 1] = w[b + 1], w[b]
        out[i] = w[2]


@cuda.jit
def argmax_lock_free(x, best):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        old = best[0]
        while True:
            if old >= 0 and x[old] >= v:
                break
            prev = cuda.atomic.compare_and_swap(best, old, i)
            if prev == old:
                break
            old = prev


def test_local_array_median_and_lock_free_argmax(backend):
    rng = np.random.default_rng(16)
    x = rng.random(300)
    out = np.zeros(300)
    median_of_5[3, 128](x, out)
    ref = np.zeros(300)
    ref[2:-2] = np.median(np.lib.stride_tricks.sliding_window_view(x, 5), 1)
    np.testing.assert_array_equal(out, ref)
    best = np.array([-1], np.int64)
    argmax_lock_free[8, 128](x, best)
    assert best[0] == np.argmax(x)


@cuda.jit("void(float64[:, :], float64[:, :], float64[:, :])")
def matmul_any_layout(a, b, c):
    i, j = cuda.grid(2)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


@cuda.jit(device=True)
def escape_time(c, max_iter):
    z = 0j
    for n in range(max_iter):
        z = z * z + c
        if abs(z) > 2:
            return n
    return max_iter


@cuda.jit
def mandelbrot(re, im, out, max_iter):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = escape_time(complex(re[j], im[i]), max_iter)


def test_declared_any_layout_matmul_and_complex_mandelbrot(backend):
    rng = np.random.default_rng(17)
    a = np.asfortranarray(rng.random((20, 30)))    # a Fortran-ordered argument of a declared [:, :]
    b, c = rng.random((30, 10)), np.zeros((20, 10))
    matmul_any_layout[(2, 1), (16, 16)](a, b, c)
    np.testing.assert_allclose(c, a @ b)
    re, im = np.linspace(-2, 1, 40), np.linspace(-1, 1, 30)
    out = np.zeros((30, 40), np.int32)
    mandelbrot[(2, 3), (16, 16)](re, im, out, 50)

    def reference(c):
        z = 0j
        for n in range(50):
            z = z * z + c
            if abs(z) > 2:
                return n
        return 50

    np.testing.assert_array_equal(out, [[reference(complex(r, m)) for r in re] for m in im])


@cuda.jit
def brighten_and_histogram(img, out, hist):
    i, j = cuda.grid(2)
    if i < img.shape[0] and j < img.shape[1]:
        v = img[i, j]
        out[i, j] = min(255, int32(v) * 2)   # the int32 cast: uint8 * 2 stays uint8 (NumPy 2's rule)
        cuda.atomic.add(hist, v // 32, 1)


def test_uint8_image_kernel(backend):
    rng = np.random.default_rng(18)
    img = rng.integers(0, 256, (31, 33)).astype(np.uint8)
    out, hist = np.zeros_like(img), np.zeros(8, np.int32)
    brighten_and_histogram[(2, 3), (16, 16)](img, out, hist)
    np.testing.assert_array_equal(out, np.minimum(255, img.astype(np.int32) * 2))
    np.testing.assert_array_equal(hist, np.bincount(img.ravel() // 32, minlength=8))


@cuda.jit
def warp_sums_and_ballots(x, out):
    i = cuda.grid(1)
    v = x[i]
    mask = cuda.activemask()
    ballot = cuda.ballot_sync(mask, v > 0)
    s = v
    for offset in (16, 8, 4, 2, 1):         # a loop over a tuple, as Numba unrolls it
        s += cuda.shfl_down_sync(mask, s, offset)
    if cuda.laneid == 0:
        out[i // 32, 0] = s
        out[i // 32, 1] = cuda.popc(ballot)


@cuda.jit
def affine_with_tuple_arguments(out, coef, shape):
    i = cuda.grid(1)
    if i < shape[0]:
        a, b = coef
        out[i] = a * i + b


@cuda.jit
def row_sums_by_iteration(m, out):
    i = cuda.grid(1)
    if i < m.shape[0]:
        acc = 0.0
        for k, v in enumerate(m[i]):            # iterating an array row (and enumerate)
            acc += v * (k + 1)
        for a, b in zip(m[i], m[i][::-1]):
            acc += a * b
        out[i] = acc


def test_warp_shuffles_tuple_arguments_and_iteration(backend):
    rng = np.random.default_rng(19)
    x = rng.standard_normal(64)
    out = np.zeros((2, 2))
    warp_sums_and_ballots[1, 64](x, out)
    np.testing.assert_allclose(out[:, 0], x.reshape(2, 32).sum(1))
    np.testing.assert_array_equal(out[:, 1], (x.reshape(2, 32) > 0).sum(1))
    res = np.zeros(10)
    affine_with_tuple_arguments[1, 32](res, (2, 0.5), res.shape)   # tuples as kernel arguments
    np.testing.assert_array_equal(res, 2 * np.arange(10) + 0.5)
    m = rng.random((6, 5))
    sums = np.zeros(6)
    row_sums_by_iteration[1, 32](m, sums)
    np.testing.assert_allclose(sums, (m * np.arange(1, 6)).sum(1) + (m * m[:, ::-1]).sum(1))


PARTICLE = np.dtype([("x", np.float32), ("v", np.float32), ("alive", np.int32)])


@cuda.jit
def step_particles(p, dt):
    i = cuda.grid(1)
    if i < p.size and p[i].alive:
        p[i].x += p[i].v * dt
        if p[i]["x"] > 1.0:
            p[i]["alive"] = 0


def test_record_array_of_particles(backend):
    p = np.zeros(50, PARTICLE)
    p["x"] = np.linspace(0, 0.9, 50)
    p["v"] = 1.0
    p["alive"] = 1
    d = cuda.to_device(p)
    for _ in range(3):
        step_particles[1, 64](d, np.float32(0.1))
    ref = p.copy()
    for _ in range(3):
        live = ref["alive"] == 1
        ref["x"][live] += ref["v"][live] * np.float32(0.1)
        ref["alive"][ref["x"] > 1.0] = 0
    back = d.copy_to_host()
    np.testing.assert_allclose(back["x"], ref["x"], rtol=1e-6)
    np.testing.assert_array_equal(back["alive"], ref["alive"])


# ---- Numba's documentation examples: ufuncs on arrays in kernels, device arrays as globals, ---------
# ---- a cooperative grid with a declared signature, random numbers on a 3-D grid -------------------------
@cuda.jit
def sine_in_one_thread(r, x):
    np.sin(x, r)   # a NumPy ufunc on arrays: the output array passed positionally, as in Numba


@cuda.jit
def ufuncs_broadcast(out, a, b, s, flo):
    i = cuda.grid(1)
    if i == 0:
        np.arctan2(a, b, out)      # b (a row) broadcasts against the 2-D output
        np.hypot(out, s, out)      # a number broadcasts too; the output is also an input
    elif i == 1:
        flo[0] = np.floor(s) + np.abs(-2)   # on numbers, NumPy's result types (floor: a float)
        flo[1] = np.arcsin(np.float32(0.5))


@cuda.jit
def ufunc_on_views(out, x):
    np.exp(x, out)


@cuda.jit
def arithmetic_ufuncs(out, a, b, q, n, d):
    np.add(a, b, out)
    np.multiply(out, 2.0, out)
    np.floor_divide(n, d, q)   # integers, Python's (and NumPy's) rounding toward -inf


@cuda.jit
def comparing_ufuncs(a, b, gt, mx, mn, fx, fn, both, m, inv):
    np.greater(a, b, gt)
    np.maximum(a, b, mx)       # a NaN wins
    np.minimum(a, b, mn)
    np.fmax(a, b, fx)          # a NaN loses
    np.fmin(a, b, fn)
    np.logical_and(gt, a, both)
    np.invert(m, inv)


def test_numpy_ufuncs_on_arrays_in_kernels(backend):
    rng = np.random.default_rng()
    x = (rng.standard_normal(37) * 4).astype(np.float32)
    r = np.full_like(x, np.nan)
    sine_in_one_thread[1, 1](r, x)
    np.testing.assert_allclose(r, np.sin(x), rtol=1e-6, atol=1e-6)
    assert r.dtype == np.float32
    a, b, s = rng.standard_normal((5, 7)), rng.standard_normal(7), float(rng.uniform(1, 3))
    out, flo = np.full((5, 7), np.nan), np.full(2, np.nan)
    ufuncs_broadcast[1, 2](out, a, b, s, flo)
    np.testing.assert_allclose(out, np.hypot(np.arctan2(a, b), s), rtol=1e-12)
    np.testing.assert_allclose(flo, [math.floor(s) + 2, math.asin(0.5)], rtol=1e-6)
    d = cuda.to_device(rng.standard_normal((4, 9)))
    view_out = cuda.device_array((4, 5))
    view_out[...] = np.nan
    ufunc_on_views[1, 1](view_out, d[:, ::2])   # a strided view in, a device array out
    np.testing.assert_allclose(view_out.copy_to_host(), np.exp(d.copy_to_host()[:, ::2]), rtol=1e-12)
    a32, b32 = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    out32, q = np.full((3, 4), np.nan, np.float32), np.full(10, -999, np.int64)
    n, dv = rng.integers(-50, 50, 10), rng.integers(1, 7, 10) * rng.choice([-1, 1], 10)
    arithmetic_ufuncs[1, 1](out32, a32, b32, q, n, dv)
    np.testing.assert_array_equal(out32, (a32 + b32) * np.float32(2))
    np.testing.assert_array_equal(q, n // dv)
    a, b = rng.standard_normal(12), rng.standard_normal(12)
    a[[1, 5]] = np.nan
    b[[2, 5]] = np.nan
    gt, both = np.zeros(12, bool), np.ones(12, bool)
    mx, mn, fx, fn = (np.full(12, -7.0) for _ in range(4))
    m, inv = rng.integers(-100, 100, 12).astype(np.int32), np.zeros(12, np.int32)
    comparing_ufuncs[1, 1](a, b, gt, mx, mn, fx, fn, both, m, inv)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(gt, np.greater(a, b))
        np.testing.assert_array_equal(both, np.logical_and(np.greater(a, b), a))
    for got, want in ((mx, np.maximum(a, b)), (mn, np.minimum(a, b)), (fx, np.fmax(a, b)), (fn, np.fmin(a, b))):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(inv, ~m)


def test_numpy_ufunc_errors_name_the_call(backend):
    def no_out(r, x):
        r[0] = np.sin(x)

    def keyword_out(r, x):
        np.sin(x, out=r)

    def not_supported(r, x):
        np.logaddexp(x, x, r)

    for fn, why in ((no_out, r"np.sin on arrays in a kernel needs the output array"),
                    (keyword_out, r"np.sin\(\): keyword arguments"),
                    (not_supported, r"np.logaddexp is not supported in kernels")):
        with pytest.raises(Exception, match=why):
            cuda.jit(fn)[1, 1](np.zeros(3), np.ones(3))


def test_device_arrays_as_globals_are_captured_by_pointer(backend):
    rng = np.random.default_rng()
    prices = rng.uniform(1, 50, 6).astype(np.float32)
    PRICES = cuda.to_device(prices)
    GRID = cuda.to_device(rng.standard_normal((3, 8)))
    COLUMNS = GRID[:, 1::3]             # a strided view: shape (3, 3)
    SEEN = cuda.device_array(6, dtype=np.int32)
    SEEN[...] = 0

    @cuda.jit
    def totals_from_global(quantities, totals):
        i = cuda.grid(1)
        if i < totals.size:
            totals[i] = quantities[i] * PRICES[i]
            SEEN[i] += 1                 # written where it lives

    @cuda.jit
    def column_sums(out):
        j = cuda.grid(1)
        if j < COLUMNS.shape[1]:
            s = 0.0
            for i in range(COLUMNS.shape[0]):
                s += COLUMNS[i, j]
            out[j] = s

    q = rng.integers(1, 5, 6).astype(np.float32)
    d_totals = cuda.device_array(6, dtype=np.float32)
    d_totals[...] = np.nan
    totals_from_global[1, 32](cuda.to_device(q), d_totals)
    np.testing.assert_array_equal(d_totals.copy_to_host(), q * prices)
    new_prices = rng.uniform(1, 50, 6).astype(np.float32)
    PRICES.copy_to_device(new_prices)   # the kernel sees the new data (no recompilation)
    totals_from_global[1, 32](cuda.to_device(q), d_totals)
    np.testing.assert_array_equal(d_totals.copy_to_host(), q * new_prices)
    np.testing.assert_array_equal(SEEN.copy_to_host(), np.full(6, 2))
    out = np.full(3, np.nan)
    column_sums[1, 32](out)
    np.testing.assert_allclose(out, GRID.copy_to_host()[:, 1::3].sum(axis=0), rtol=1e-12)

    @cuda.jit(debug=True)
    def read_past_the_end(out):
        i = cuda.grid(1)
        out[i] = PRICES[i + 3]

    with pytest.raises(IndexError, match=r"index 6 is out of bounds for axis 0 with size 6 of array 'PRICES'"):
        read_past_the_end[1, 4](np.zeros(4, np.float32))


_COOP_SIG = (int32[:, ::1],)


@cuda.jit(_COOP_SIG)
def sequential_rows(M):
    col = cuda.grid(1)
    g = cuda.cg.this_grid()
    rows = M.shape[0]
    cols = M.shape[1]
    for row in range(1, rows):
        opposite = cols - col - 1
        M[row, col] = M[row - 1, opposite] + 1   # reads the row other blocks wrote
        g.sync()


def test_grid_sync_with_a_declared_signature(backend):
    n, blockdim = 256, 32
    A = np.zeros((n, n), dtype=np.int32)
    A[0] = np.random.default_rng().integers(-5, 5, n)
    A[1:] = -99   # poisoned
    griddim = n // blockdim
    assert sequential_rows.overloads[_COOP_SIG].max_cooperative_grid_blocks(blockdim) >= griddim
    sequential_rows[griddim, blockdim](A)
    want = np.empty_like(A)
    want[0] = A[0]
    for row in range(1, n):
        want[row] = want[row - 1][::-1] + 1
    np.testing.assert_array_equal(A, want)


@cuda.jit
def random_3d(arr, rng_states):
    startx, starty, startz = cuda.grid(3)
    stridex, stridey, stridez = cuda.gridsize(3)
    tid = (startz * stridey * stridex) + (starty * stridex) + startx
    for i in range(startz, arr.shape[0], stridez):
        for j in range(starty, arr.shape[1], stridey):
            for k in range(startx, arr.shape[2], stridex):
                arr[i, j, k] = xoroshiro128p_uniform_float32(rng_states, tid)


def test_random_numbers_on_a_3d_grid(backend):
    X, Y, Z = 13, 11, 17
    (bx, by, bz), (gx, gy, gz) = (4, 2, 2), (2, 3, 2)
    nthreads = bx * by * bz * gx * gy * gz
    seed = int(np.random.default_rng().integers(1, 2 ** 31))
    states = create_xoroshiro128p_states(nthreads, seed=seed)
    arr = cuda.device_array((X, Y, Z), dtype=np.float32)
    arr[...] = np.nan
    random_3d[(gx, gy, gz), (bx, by, bz)](arr, states)
    got = arr.copy_to_host()
    host = _host_states(nthreads, seed)
    want = np.full((X, Y, Z), np.nan, dtype=np.float32)
    sx, sy, sz = bx * gx, by * gy, bz * gz
    for z0 in range(sz):
        for y0 in range(sy):
            for x0 in range(sx):
                tid = z0 * sy * sx + y0 * sx + x0
                for i in range(z0, X, sz):
                    for j in range(y0, Y, sy):
                        for k in range(x0, Z, sx):
                            want[i, j, k] = xoroshiro128p_uniform_float32(host, tid)
    np.testing.assert_array_equal(got, want)
    assert np.all((got >= 0.0) & (got <= 1.0))


def test_doc_example_imports_and_what_is_not_supported(backend):
    import importlib

    from tessel.numba.cuda.types import int32 as cuda_int32      # numba.cuda.types is a module
    from tessel.numba.cuda import config
    assert cuda_int32 is int32 and config is numba.config
    numba.config.CUDA_LOW_OCCUPANCY_WARNINGS = 0                  # accepted (changes nothing)
    import warnings
    from tessel.numba.core.errors import NumbaPerformanceWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=NumbaPerformanceWarning)   # programs' filters work
    assert numba.NumbaPerformanceWarning is NumbaPerformanceWarning and issubclass(NumbaPerformanceWarning, Warning)
    with pytest.raises(NotImplementedError, match=r"tessel.numba.types.CPointer is not supported: pointer"):
        numba.types.void(numba.types.CPointer(numba.types.uint8), numba.types.uint32)
    with pytest.raises(NotImplementedError, match=r"tessel.numba.cuda.declare_device is not supported"):
        cuda.declare_device("mul_f32_f32", "float32(float32, float32)", link="functions.cu")
    with pytest.raises(TypeError, match=r"tessel.numba.types.CPointer is not supported: pointer"):
        cuda.jit("void(CPointer(uint8), uint32)")(sine_in_one_thread.py_func)
    with pytest.raises(NotImplementedError, match=r"tessel.numba.cuda.jit\(link=\.\.\.\) is not supported"):
        cuda.jit(link=["functions.cu"])(sine_in_one_thread.py_func)
    class RecursesOnNumbaCuda:      # as numba-cuda's redirecting finder does on a missing "*numba.cuda*" module
        @staticmethod
        def find_spec(name, path=None, target=None):
            if "numba.cuda" in name:
                raise RecursionError(name)
            return None

    sys.meta_path.insert(1, RecursesOnNumbaCuda)
    try:
        for module, what in (("tessel.numba.extending", "extension API"),
                             ("tessel.numba.cuda.extending", "extension API"), ("tessel.numba.core.typing", "numba.core")):
            with pytest.raises(ImportError, match=f"{module} is not supported: .*{what}"):
                importlib.import_module(module)
    finally:
        sys.meta_path.remove(RecursesOnNumbaCuda)
    with pytest.raises(ImportError, match=r"tessel.numba.extending is not supported"):
        from tessel.numba import extending  # noqa: F401


# ---------------------------------------------------------------- a work-efficient scan
@cuda.jit
def blelloch_scan(x, out):
    n = cuda.blockDim.x
    t = cuda.threadIdx.x
    temp = cuda.shared.array(256, int32)
    temp[t] = x[t]
    offset = 1
    d = n >> 1
    while d > 0:
        cuda.syncthreads()
        if t < d:
            temp[offset * (2 * t + 2) - 1] += temp[offset * (2 * t + 1) - 1]
        offset *= 2
        d >>= 1
    if t == 0:
        temp[n - 1] = 0
    d = 1
    while d < n:
        offset >>= 1
        cuda.syncthreads()
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            v = temp[ai]
            temp[ai] = temp[bi]
            temp[bi] += v
        d *= 2
    cuda.syncthreads()
    out[t] = temp[t]


def test_blelloch_scan_with_shifting_loops(backend):
    x = np.random.default_rng(7).integers(0, 10, 256).astype(np.int32)
    scanned = np.full_like(x, -1)
    blelloch_scan[1, 256](x, scanned)
    np.testing.assert_array_equal(scanned, np.concatenate([[0], np.cumsum(x)[:-1]]))


# ---- stencils and images --------------------------------------------------------------------------------
CONV_TILE = 16
CONV_R = 2


@cuda.jit
def conv2d_halo(img, k, out):
    """A (2R+1)^2 convolution: each block loads its tile and the halo around it into shared memory."""
    tile = cuda.shared.array((CONV_TILE + 2 * CONV_R, CONV_TILE + 2 * CONV_R), dtype=numba.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x, y = cuda.grid(2)
    h, w = img.shape
    for dy in range(ty, CONV_TILE + 2 * CONV_R, CONV_TILE):
        for dx in range(tx, CONV_TILE + 2 * CONV_R, CONV_TILE):
            gy = cuda.blockIdx.y * CONV_TILE + dy - CONV_R
            gx = cuda.blockIdx.x * CONV_TILE + dx - CONV_R
            if 0 <= gy < h and 0 <= gx < w:
                tile[dy, dx] = img[gy, gx]
            else:
                tile[dy, dx] = 0
    cuda.syncthreads()
    if y < h and x < w:
        acc = float32(0)
        for i in range(2 * CONV_R + 1):
            for j in range(2 * CONV_R + 1):
                acc += k[i, j] * tile[ty + i, tx + j]
        out[y, x] = acc


def test_convolution_with_a_halo_in_shared_memory(backend):
    rng = np.random.default_rng()
    h, w = 37, 51
    img = rng.random((h, w), dtype=np.float32)
    k = rng.random((2 * CONV_R + 1,) * 2, dtype=np.float32)
    out = np.full((h, w), np.nan, np.float32)
    blocks = ((w + CONV_TILE - 1) // CONV_TILE, (h + CONV_TILE - 1) // CONV_TILE)
    conv2d_halo[blocks, (CONV_TILE, CONV_TILE)](img, k, out)
    padded = np.pad(img.astype(np.float64), CONV_R)
    ref = sum(k[i, j] * padded[i:i + h, j:j + w] for i in range(2 * CONV_R + 1) for j in range(2 * CONV_R + 1))
    np.testing.assert_allclose(out, ref, rtol=1e-5)


@cuda.jit
def box_blur_rgb(src, dst):
    x, y = cuda.grid(2)
    h = src.shape[0]
    w = src.shape[1]
    if x >= h or y >= w:
        return
    for c in range(3):
        s = 0
        n = 0
        for dx in range(-1, 2):
            for dy in range(-1, 2):
                xx = x + dx
                yy = y + dy
                if xx >= 0 and xx < h and yy >= 0 and yy < w:
                    s += int32(src[xx, yy, c])
                    n += 1
        dst[x, y, c] = s // n


@cuda.jit
def sobel_magnitude(img, out):
    y, x = cuda.grid(2)
    h, w = img.shape
    if 0 < y < h - 1 and 0 < x < w - 1:
        gx = (-1.0 * img[y - 1, x - 1] + img[y - 1, x + 1] - 2.0 * img[y, x - 1] + 2.0 * img[y, x + 1]
              - img[y + 1, x - 1] + img[y + 1, x + 1])
        gy = (-1.0 * img[y - 1, x - 1] - 2.0 * img[y - 1, x] - img[y - 1, x + 1]
              + img[y + 1, x - 1] + 2.0 * img[y + 1, x] + img[y + 1, x + 1])
        out[y, x] = min(255, int(math.sqrt(gx * gx + gy * gy)))


def test_uint8_rgb_blur_and_sobel_edges(backend):
    rng = np.random.default_rng()
    img = rng.integers(0, 256, (29, 41, 3)).astype(np.uint8)
    dst = np.full_like(img, 7)
    box_blur_rgb[(4, 6), (8, 8)](img, dst)
    p = np.pad(img.astype(np.int64), ((1, 1), (1, 1), (0, 0)))
    count = np.pad(np.ones(img.shape[:2], np.int64), 1)
    s = sum(p[1 + a:30 + a, 1 + b:42 + b] for a in (-1, 0, 1) for b in (-1, 0, 1))
    n = sum(count[1 + a:30 + a, 1 + b:42 + b] for a in (-1, 0, 1) for b in (-1, 0, 1))
    np.testing.assert_array_equal(dst, s // n[:, :, None])
    gray = rng.integers(0, 256, (40, 50)).astype(np.uint8)
    edges = np.full_like(gray, 3)
    sobel_magnitude[(3, 4), (16, 16)](gray, edges)
    f = gray.astype(np.float64)
    gx = -f[:-2, :-2] + f[:-2, 2:] - 2 * f[1:-1, :-2] + 2 * f[1:-1, 2:] - f[2:, :-2] + f[2:, 2:]
    gy = -f[:-2, :-2] - 2 * f[:-2, 1:-1] - f[:-2, 2:] + f[2:, :-2] + 2 * f[2:, 1:-1] + f[2:, 2:]
    ref = np.full_like(gray, 3)
    ref[1:-1, 1:-1] = np.minimum(255, np.sqrt(gx * gx + gy * gy).astype(np.int64))
    np.testing.assert_array_equal(edges, ref)


@cuda.jit
def life_step(board, out):
    i, j = cuda.grid(2)
    n, m = board.shape
    if i < n and j < m:
        count = 0
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                if di != 0 or dj != 0:
                    count += board[(i + di) % n, (j + dj) % m]
        alive = board[i, j] == 1
        out[i, j] = 1 if (count == 3 or (alive and count == 2)) else 0


@cuda.jit
def jacobi_step(u, unew, f, h2):
    i, j = cuda.grid(2)
    n, m = u.shape
    if 1 <= i < n - 1 and 1 <= j < m - 1:
        unew[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - h2 * f[i, j])


def test_game_of_life_and_jacobi_with_swapped_device_buffers(backend):
    rng = np.random.default_rng()
    board = (rng.random((23, 31)) < 0.3).astype(np.uint8)
    d0, d1 = cuda.to_device(board), cuda.device_array(board.shape, np.uint8)
    ref = board.astype(np.int64)
    for _ in range(6):
        life_step[(2, 2), (16, 16)](d0, d1)
        d0, d1 = d1, d0
        count = sum(np.roll(np.roll(ref, a, 0), b, 1) for a in (-1, 0, 1) for b in (-1, 0, 1)) - ref
        ref = ((count == 3) | ((ref == 1) & (count == 2))).astype(np.int64)
    np.testing.assert_array_equal(d0.copy_to_host(), ref)
    n = 33
    f = np.asfortranarray(rng.random((n, n)))            # a Fortran-ordered right-hand side
    du, dunew, df = cuda.to_device(np.zeros((n, n))), cuda.to_device(np.zeros((n, n))), cuda.to_device(f)
    for _ in range(20):
        jacobi_step[(3, 3), (16, 16)](du, dunew, df, 0.01)
        du, dunew = dunew, du
    u = np.zeros((n, n))
    for _ in range(20):
        new = u.copy()
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 0.01 * f[1:-1, 1:-1])
        u = new
    np.testing.assert_allclose(du.copy_to_host(), u, rtol=1e-12)


# ---- linear algebra in small pieces -------------------------------------------------------------------
@cuda.jit
def matvec(A, x, y):
    row = cuda.grid(1)
    if row < A.shape[0]:
        s = 0.0
        for j in range(A.shape[1]):
            s += A[row, j] * x[j]
        y[row] = s


@cuda.jit
def det3_batched(m, out):
    """One 3x3 matrix per thread; 2-D blocks numbered row-major."""
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    b = (cuda.blockIdx.x * cuda.blockDim.y + ty) * cuda.blockDim.x + tx
    if b < m.shape[0]:
        a = m[b]
        out[b] = (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1])
                  - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
                  + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))


@cuda.jit(device=True)
def distance(a, b):
    return math.sqrt(a * a + b * b)


@cuda.jit
def pairwise_distances(p, d):
    i, j = cuda.grid(2)
    if i < p.shape[0] and j < p.shape[0]:
        d[i, j] = distance(p[i, 0] - p[j, 0], p[i, 1] - p[j, 1])


def test_matvec_batched_determinants_and_pairwise_distances(backend):
    rng = np.random.default_rng()
    A, x = rng.random((301, 77)), rng.random(77)
    y = cuda.device_array(301)
    y[:] = np.nan
    matvec[(301 + 127) // 128, 128](cuda.to_device(A), cuda.to_device(x), y)
    np.testing.assert_allclose(y.copy_to_host(), A @ x, rtol=1e-12)
    m = rng.standard_normal((1000, 3, 3))
    det = np.full(1000, np.nan)
    det3_batched[(1000 + 63) // 64, (8, 8)](m, det)
    np.testing.assert_allclose(det, np.linalg.det(m), rtol=1e-9, atol=1e-12)
    p = rng.random((37, 2))
    d = np.full((37, 37), np.nan)
    pairwise_distances[(3, 3), (16, 16)](p, d)
    np.testing.assert_allclose(d, np.sqrt(((p[:, None] - p[None]) ** 2).sum(-1)), rtol=1e-12, atol=1e-15)


# ---- atomics ----------------------------------------------------------------------------------------------
@cuda.jit
def histogram_2d(x, y, H):
    i = cuda.grid(1)
    if i < x.size:
        bx = int(x[i] * H.shape[0])
        by = int(y[i] * H.shape[1])
        cuda.atomic.add(H, (bx, by), 1.0)


@cuda.jit
def scatter_add_3d(vals, idx, out):
    i = cuda.grid(1)
    if i < vals.size:
        cuda.atomic.add(out, (idx[i, 0], idx[i, 1], idx[i, 2]), vals[i])
        cuda.atomic.max(out, (0, 0, 0), vals[i])


@cuda.jit
def kmeans_assign(points, centroids, labels, sums, counts):
    i = cuda.grid(1)
    if i < points.shape[0]:
        best = 0
        best_d = np.inf
        for c in range(centroids.shape[0]):
            d = 0.0
            for k in range(points.shape[1]):
                diff = points[i, k] - centroids[c, k]
                d += diff * diff
            if d < best_d:
                best_d = d
                best = c
        labels[i] = best
        for k in range(points.shape[1]):
            cuda.atomic.add(sums, (best, k), points[i, k])
        cuda.atomic.add(counts, best, 1)


def test_atomics_on_2d_and_3d_arrays_with_tuple_indices(backend):
    rng = np.random.default_rng()
    x, y = rng.random(5000), rng.random(5000)
    H = np.zeros((7, 9))
    histogram_2d[20, 256](x, y, H)
    np.testing.assert_array_equal(H, np.histogram2d(x, y, bins=[7, 9], range=[[0, 1], [0, 1]])[0])
    vals = rng.random(1000).astype(np.float32)
    idx = rng.integers(1, 3, (1000, 3))
    out = np.zeros((3, 3, 3), np.float32)
    scatter_add_3d[4, 256](vals, idx, out)
    ref = np.zeros((3, 3, 3))
    np.add.at(ref, (idx[:, 0], idx[:, 1], idx[:, 2]), vals)
    np.testing.assert_allclose(out[1:, 1:, 1:], ref[1:, 1:, 1:], rtol=1e-5)
    assert out[0, 0, 0] == vals.max()
    pts, cen = rng.random((1000, 3)), rng.random((5, 3))
    labels, counts = np.full(1000, -1, np.int32), np.zeros(5, np.int32)
    sums = cuda.to_device(np.zeros((5, 3)))
    kmeans_assign[8, 128](pts, cen, labels, sums, counts)
    want = ((pts[:, None, :] - cen[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_array_equal(labels, want)
    np.testing.assert_allclose(sums.copy_to_host(), [pts[want == c].sum(0) for c in range(5)], rtol=1e-12)
    np.testing.assert_array_equal(counts, np.bincount(want, minlength=5))


@cuda.jit
def atomic_integer_ops(u, ints, out):
    i = cuda.grid(1)
    if i < 100:
        out[i, 0] = cuda.atomic.inc(u, 0, 9)          # wraps to 0 past 9
        cuda.atomic.dec(u, 1, 1000)
        cuda.atomic.and_(ints, 0, ~(1 << (i % 32)))
        cuda.atomic.or_(ints, 1, 1 << (i % 31))
        cuda.atomic.xor(ints, 2, i)
        out[i, 1] = cuda.atomic.exch(ints, 3, i)
        cuda.atomic.cas(ints, 4, 0, i + 1)            # only the first thread finds the 0
        cuda.atomic.sub(ints, 5, 2)


@cuda.jit
def locked_block_sums(x, lock, total):
    """A block sums its share in shared memory; one thread per block adds it under a spin lock."""
    s = cuda.shared.array(1, numba.float64)
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        s[0] = 0
    cuda.syncthreads()
    if i < x.size:
        cuda.atomic.add(s, 0, x[i])
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        while cuda.atomic.cas(lock, 0, 0, 1) != 0:
            pass
        cuda.threadfence()
        total[0] += s[0]
        cuda.threadfence()
        cuda.atomic.exch(lock, 0, 0)


@cuda.jit
def compact_positive(x, out, counter):
    i = cuda.grid(1)
    if i < x.size and x[i] > 0:
        out[cuda.atomic.add(counter, 0, 1)] = x[i]


def test_atomic_inc_dec_bitwise_cas_spin_lock_and_compaction(backend):
    u = np.array([0, 500], np.uint32)
    ints = np.array([-1, 0, 0, -5, 0, 10], np.int32)
    out = np.full((100, 2), -99, np.int64)
    atomic_integer_ops[1, 128](u, ints, out)
    assert u.tolist() == [100 % 10, 400]
    assert sorted(out[:, 0].tolist()) == sorted([k % 10 for k in range(100)])
    xor = 0
    for k in range(100):
        xor ^= k
    assert ints[[0, 1, 2, 5]].tolist() == [0, 2**31 - 1, xor, 10 - 200]
    assert sorted(out[:, 1].tolist() + [ints[3]]) == sorted(list(range(100)) + [-5])   # exch: every old value once
    assert 1 <= ints[4] <= 100
    x = np.random.default_rng().random(4000)
    lock, total = np.zeros(1, np.int32), np.zeros(1)
    locked_block_sums[16, 256](x, lock, total)
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-12)
    assert lock[0] == 0
    v = np.random.default_rng().standard_normal(3333)
    packed, counter = np.full(3333, np.nan), np.zeros(1, np.int64)
    compact_positive[14, 256](v, packed, counter)
    n = counter[0]
    assert n == (v > 0).sum() and np.isnan(packed[n:]).all()
    np.testing.assert_array_equal(np.sort(packed[:n]), np.sort(v[v > 0]))


# ---- shared, local and constant arrays ----------------------------------------------------------------
SMEM_SHAPE = (8, 8)
LUT = np.array([[1, 2], [3, 4]], np.int32)
HALF = np.float32(0.5)


@cuda.jit
def array_spellings(out):
    a = cuda.shared.array(SMEM_SHAPE, numba.types.float32)          # a global tuple, Numba's type
    b = cuda.shared.array(shape=(8,), dtype=np.int64)
    c = cuda.shared.array(8, 'float32')                              # the dtype as a string
    d = cuda.shared.array(SMEM_SHAPE[0], dtype=np.dtype('int16'))
    flags = cuda.shared.array(8, numba.boolean)
    loc = cuda.local.array((3, 3), numba.float64)
    z = cuda.local.array(shape=2, dtype=numba.complex128)
    lut = cuda.const.array_like(LUT)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    a[tx, ty] = tx * 8 + ty
    if ty == 0:
        b[tx] = tx
        c[tx] = tx * 0.5
        d[tx] = -tx
        flags[tx] = tx % 2 == 0
    for i in range(3):
        for j in range(3):
            loc[i, j] = i * 3 + j
    z[0] = complex(tx, ty)
    cuda.syncthreads()
    out[tx, ty] = (a[ty, tx] + b[7 - tx] + c[tx] + d[ty] + flags[ty] + loc[2, 2] + z[0].imag
                   + lut[tx % 2, ty % 2] * HALF + loc.shape[0] + a.shape[1])


def test_shared_local_and_constant_arrays_with_shapes_and_dtypes_spelled_every_way(backend):
    out = np.full(SMEM_SHAPE, np.nan)
    array_spellings[1, SMEM_SHAPE](out)
    i, j = np.indices(SMEM_SHAPE)
    want = (j * 8 + i) + (7 - i) + i * 0.5 - j + (j % 2 == 0) + 8 + j + LUT[i % 2, j % 2] * 0.5 + 3 + 8
    np.testing.assert_array_equal(out, want)


@cuda.jit
def split_dynamic_shared(x, y, out):
    sh = cuda.shared.array(0, dtype=float32)
    n = cuda.blockDim.x
    a = sh[:n]                         # two arrays in the launch's dynamic shared memory
    b = sh[n:2 * n]
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    a[t] = x[i]
    b[t] = y[i]
    cuda.syncthreads()
    out[i] = a[n - 1 - t] * b[t]


@cuda.jit(device=True)
def block_total(v):
    s = cuda.shared.array(128, numba.float64)
    t = cuda.threadIdx.x
    s[t] = v
    cuda.syncthreads()
    stride = 64
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        cuda.syncthreads()
        stride //= 2
    r = s[0]
    cuda.syncthreads()
    return r


@cuda.jit
def moments_per_block(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    total = block_total(v)
    squares = block_total(v * v)      # the device function's shared array, used again
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x, 0] = total
        out[cuda.blockIdx.x, 1] = squares


def test_dynamic_shared_memory_split_by_slicing_and_shared_arrays_in_device_functions(backend):
    rng = np.random.default_rng()
    x, y = rng.random(384).astype(np.float32), rng.random(384).astype(np.float32)
    out = np.full(384, np.nan, np.float32)
    stream = cuda.stream()
    split_dynamic_shared[3, 128, stream, 2 * 128 * 4](x, y, out)
    stream.synchronize()
    np.testing.assert_array_equal(out, x.reshape(3, 128)[:, ::-1].ravel() * y)
    v = rng.random(300)
    res = np.full((3, 2), np.nan)
    moments_per_block[3, 128](v, res)
    padded = np.zeros(384)
    padded[:300] = v
    np.testing.assert_allclose(res, np.stack([padded.reshape(3, 128).sum(1), (padded ** 2).reshape(3, 128).sum(1)], 1),
                               rtol=1e-12)


# ---- math -----------------------------------------------------------------------------------------------
@cuda.jit
def math_module(x, y, out, iout):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[i, 0] = math.erf(a)
        out[i, 1] = math.erfc(a)
        out[i, 2] = math.gamma(abs(a) + 0.5)
        out[i, 3] = math.lgamma(abs(a) + 0.5)
        out[i, 4] = math.atan2(a, b)
        out[i, 5] = math.hypot(a, b)
        out[i, 6] = math.copysign(a, b)
        out[i, 7] = math.isnan(a)
        out[i, 8] = math.isinf(b)
        out[i, 9] = math.expm1(a)
        out[i, 10] = math.log1p(abs(a))
        out[i, 11] = math.fmod(a, b)
        out[i, 12] = math.degrees(a) + math.radians(b)
        out[i, 13] = math.ldexp(a, 3)
        out[i, 14] = math.isfinite(a)
        out[i, 15] = math.remainder(a, 0.7)
        m, e = math.frexp(a)
        out[i, 16] = m
        iout[i, 11] = e
        frac, whole = math.modf(a)
        out[i, 17] = frac
        out[i, 18] = whole
        out[i, 19] = math.cosh(a) - math.sinh(a) + math.acosh(abs(a) + 1) + math.asinh(a) + math.atanh(a / 100)
        out[i, 20] = round(a, 2) + pow(a, 2) + 2.0 ** -2 + math.log2(abs(a) + 1) + math.log10(abs(a) + 1)
        iout[i, 0] = math.floor(a)                  # an int, as in Python
        iout[i, 1] = math.ceil(a)
        iout[i, 2] = 7 ** 3
        iout[i, 3] = int(a * 10) // 3
        iout[i, 4] = int(a * 10) % -3
        iout[i, 5] = -7 // 2
        iout[i, 6] = round(a * 10)                  # half to even
        iout[i, 7] = min(int(a * 10), 3, int(b * 10))
        iout[i, 8] = max(1, int(a * 10), 2, -1)
        iout[i, 9] = abs(int(b * 10))
        q, r = divmod(int(a * 100), 7)
        iout[i, 10] = q * 1000 + r


def test_math_module_as_numba_cuda_has_it(backend):
    rng = np.random.default_rng()
    n = 200
    x, y = rng.standard_normal(n) * 3, rng.standard_normal(n) * 3
    x[0], y[1], x[2] = np.nan, np.inf, 2.5
    out = np.full((n, 21), -99.0)
    iout = np.full((n, 12), -99, np.int64)
    math_module[1, 256](x, y, out, iout)
    assert out[0, 7] == 1 and out[1, 8] == 1 and out[0, 14] == 0
    for i in range(2, n):
        a, b = float(x[i]), float(y[i])
        m, e = math.frexp(a)
        frac, whole = math.modf(a)
        want = [math.erf(a), math.erfc(a), math.gamma(abs(a) + 0.5), math.lgamma(abs(a) + 0.5), math.atan2(a, b),
                math.hypot(a, b), math.copysign(a, b), 0, 0, math.expm1(a), math.log1p(abs(a)), math.fmod(a, b),
                math.degrees(a) + math.radians(b), math.ldexp(a, 3), 1, math.remainder(a, 0.7), m, frac, whole,
                math.cosh(a) - math.sinh(a) + math.acosh(abs(a) + 1) + math.asinh(a) + math.atanh(a / 100),
                round(a, 2) + a ** 2 + 0.25 + math.log2(abs(a) + 1) + math.log10(abs(a) + 1)]
        np.testing.assert_allclose(out[i], want, rtol=1e-12, atol=1e-13, err_msg=f"x={a}, y={b}")
        q, r = divmod(int(a * 100), 7)
        assert iout[i].tolist() == [math.floor(a), math.ceil(a), 343, int(a * 10) // 3, int(a * 10) % -3, -4,
                                    round(a * 10), min(int(a * 10), 3, int(b * 10)), max(1, int(a * 10), 2, -1),
                                    abs(int(b * 10)), q * 1000 + r, e], (a, b)


@cuda.jit
def float32_math(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = math.sin(v) * math.cos(v)
        out[i, 1] = math.exp(-v * v)
        out[i, 2] = math.sqrt(abs(v))
        out[i, 3] = math.pow(abs(v), float32(1.5))
        out[i, 4] = math.tanh(v)
        m, e = math.frexp(v)                 # float32 and int32, as Numba's
        out[i, 5] = m * float32(2) ** e


@cuda.jit
def complex_math(z, w, out):
    i = cuda.grid(1)
    if i < z.size:
        a = z[i]
        b = w[i]
        out[i, 0] = a * b
        out[i, 1] = a / b
        out[i, 2] = a.conjugate() + b
        out[i, 3] = cmath.exp(a)
        out[i, 4] = cmath.sqrt(b)
        out[i, 5] = abs(a) + 0j
        out[i, 6] = complex(a.real, -b.imag)
        out[i, 7] = a ** 2
        out[i, 8] = cmath.asin(a) + cmath.acos(b)
        out[i, 9] = cmath.atan(a) + cmath.atanh(b)
        out[i, 10] = cmath.asinh(a) + cmath.acosh(b)
        r, phi = cmath.polar(a)
        out[i, 11] = cmath.rect(r, phi) - a + cmath.phase(b)


def test_float32_and_complex_math(backend):
    rng = np.random.default_rng()
    x = rng.standard_normal(300).astype(np.float32)
    out = np.full((300, 6), np.nan, np.float32)
    float32_math[2, 256](x, out)
    with np.errstate(all="ignore"):
        want = np.stack([np.sin(x) * np.cos(x), np.exp(-x * x), np.sqrt(np.abs(x)), np.abs(x) ** np.float32(1.5),
                         np.tanh(x), x], 1)
    np.testing.assert_allclose(out, want, rtol=4e-6, atol=1e-7)
    n = 100
    z = rng.standard_normal(n) * 2 + 1j * rng.standard_normal(n) * 2
    w = rng.standard_normal(n) * 2 + 1j * rng.standard_normal(n) * 2
    res = np.full((n, 12), np.nan, np.complex128)
    complex_math[1, 128](z, w, res)
    inv = [[cmath.asin(a) + cmath.acos(b), cmath.atan(a) + cmath.atanh(b), cmath.asinh(a) + cmath.acosh(b),
            cmath.phase(b)] for a, b in zip(z, w)]
    want = np.column_stack([z * w, z / w, z.conj() + w, np.exp(z), np.sqrt(w), np.abs(z) + 0j, z.real - 1j * w.imag,
                            z ** 2, np.array(inv)])
    np.testing.assert_allclose(res, want, rtol=1e-12, atol=1e-14)
    res32 = np.full((n, 12), np.nan, np.complex64)
    complex_math[1, 128](z.astype(np.complex64), w.astype(np.complex64), res32)
    np.testing.assert_allclose(res32, want, rtol=1e-4, atol=1e-5)


@cuda.jit
def integer_semantics(a, b, out, fout):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]
        out[i, 2] = a[i] ** 2
        out[i, 3] = abs(a[i])
        out[i, 4] = -a[i] >> 1
        fout[i, 0] = a[i] / b[i]
        fout[i, 1] = float(a[i]) // float(b[i])
        fout[i, 2] = float(a[i]) % float(b[i])
        fout[i, 3] = a[i] ** -1              # an integer power, as Numba's: 0 unless the base is 1 or -1


@cuda.jit
def bit_tricks(x, s, out, seed, hashes, mask):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = v >> s[i]
        out[i, 1] = v << s[i]
        out[i, 2] = v ^ (v >> np.uint64(7))
        out[i, 3] = ~v
        out[i, 4] = v & mask
        h = uint32(seed) ^ uint32(i)          # xorshift and a multiplicative hash in uint32
        h ^= h << uint32(13)
        h ^= h >> uint32(17)
        h ^= h << uint32(5)
        hashes[i] = h * uint32(2654435761)


def test_integer_division_powers_and_bit_manipulation(backend):
    rng = np.random.default_rng()
    a = rng.integers(-100, 100, 200)
    a[a == 0] = 1
    b = rng.integers(1, 13, 200) * rng.choice([-1, 1], 200)
    for dt in (np.int64, np.int32):
        out = np.full((200, 5), -99, dt)
        fout = np.full((200, 4), np.nan)
        integer_semantics[1, 256](a.astype(dt), b.astype(dt), out, fout)
        ad, bd = a.astype(dt), b.astype(dt)
        np.testing.assert_array_equal(out, np.stack([ad // bd, ad % bd, ad ** 2, abs(ad), -ad >> 1], 1))
        fa, fb = a.astype(float), b.astype(float)
        np.testing.assert_array_equal(fout, np.stack([fa / fb, fa // fb, fa % fb, np.where(abs(fa) == 1, fa, 0.0)], 1))
    x = rng.integers(0, 2**63, 100, dtype=np.uint64) * np.uint64(2)
    s = rng.integers(0, 64, 100).astype(np.uint64)
    bits, hashes = np.zeros((100, 5), np.uint64), np.zeros(100, np.uint32)
    mask = 0xFFFF0000FFFF0000                  # a Python int only uint64 holds: typed uint64, as Numba
    bit_tricks[1, 128](x, s, bits, 12345, hashes, mask)
    np.testing.assert_array_equal(bits, np.stack([x >> s, x << s, x ^ (x >> np.uint64(7)), ~x, x & np.uint64(mask)], 1))
    h = np.uint32(12345) ^ np.arange(100, dtype=np.uint32)
    h ^= h << np.uint32(13)
    h ^= h >> np.uint32(17)
    h ^= h << np.uint32(5)
    np.testing.assert_array_equal(hashes, h * np.uint32(2654435761))


# ---- Black-Scholes (Numba's classic example) -----------------------------------------------------------
RISKFREE = 0.02
VOLATILITY = 0.30
A1, A2, A3, A4, A5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


@cuda.jit(device=True)
def cnd_cuda(d):
    K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    ret_val = (RSQRT2PI * math.exp(-0.5 * d * d) *
               (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    if d > 0:
        ret_val = 1.0 - ret_val
    return ret_val


@cuda.jit
def black_scholes_cuda(callResult, putResult, S, X, T, R, V):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= S.shape[0]:
        return
    sqrtT = math.sqrt(T[i])
    d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1 = cnd_cuda(d1)
    cndd2 = cnd_cuda(d2)
    expRT = math.exp((-1. * R) * T[i])
    callResult[i] = (S[i] * cndd1 - X[i] * expRT * cndd2)
    putResult[i] = (X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1))


def test_black_scholes(backend):
    rng = np.random.default_rng()
    n = 4001
    S, X, T = rng.uniform(5.0, 30.0, n), rng.uniform(1.0, 100.0, n), rng.uniform(0.25, 10.0, n)
    stream = cuda.stream()
    d_S, d_X, d_T = (cuda.to_device(a, stream) for a in (S, X, T))
    d_call, d_put = cuda.device_array_like(S, stream), cuda.device_array_like(S, stream)
    black_scholes_cuda[(n + 255) // 256, 256, stream](d_call, d_put, d_S, d_X, d_T, RISKFREE, VOLATILITY)
    call, put = d_call.copy_to_host(stream=stream), d_put.copy_to_host(stream=stream)
    stream.synchronize()

    def cnd(d):
        K = 1.0 / (1.0 + 0.2316419 * np.abs(d))
        r = RSQRT2PI * np.exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))))
        return np.where(d > 0, 1.0 - r, r)

    d1 = (np.log(S / X) + (RISKFREE + 0.5 * VOLATILITY ** 2) * T) / (VOLATILITY * np.sqrt(T))
    d2 = d1 - VOLATILITY * np.sqrt(T)
    exp_rt = np.exp(-RISKFREE * T)
    np.testing.assert_allclose(call, S * cnd(d1) - X * exp_rt * cnd(d2), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(put, X * exp_rt * (1 - cnd(d2)) - S * (1 - cnd(d1)), rtol=1e-9, atol=1e-11)


# ---- device functions --------------------------------------------------------------------------------------
@cuda.jit(device=True)
def ordered(a, b):
    if a < b:
        return a, b
    return b, a


@cuda.jit(device=True)
def sort3(a, b, c):
    a, b = ordered(a, b)
    b, c = ordered(b, c)
    a, b = ordered(a, b)
    return a, b, c


@cuda.jit('float32(float32)', device=True)
def sigmoid32(v):
    return 1 / (1 + math.exp(-v))


@cuda.jit(['float32(float32)', 'float64(float64)'], device=True)
def cube(v):
    return v * v * v


@cuda.jit(device=True, inline=True)
def lerp(a, b, t=0.5):
    return a + (b - a) * t


@numba.njit
def twice(v):
    return v * 2


@numba.njit
def twice_plus(a, b):
    return twice(a) + twice(b)


@cuda.jit
def device_function_forms(x, out, y32):
    i = cuda.grid(1)
    if i < x.shape[0]:
        a, b, c = sort3(x[i, 0], x[i, 1], x[i, 2])
        out[i, 0] = a
        out[i, 1] = b
        out[i, 2] = c
        out[i, 3] = lerp(a, c)
        out[i, 4] = lerp(a, c, t=0.25)
        out[i, 5] = lerp(b=c, a=a, t=1.0)
        out[i, 6] = twice_plus(a, 1.0)
        out[i, 7] = cube(b)
        y32[i, 0] = sigmoid32(x[i, 0])       # a float64 argument, cast to the signature's float32
        y32[i, 1] = cube(float32(x[i, 1]))


def make_apply(op):
    """A kernel factory: the kernel captures the device function made from op."""
    device_op = cuda.jit(device=True)(op)

    @cuda.jit
    def apply(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = device_op(x[i])

    return apply


def test_device_functions_tuples_defaults_signatures_and_factories(backend):
    rng = np.random.default_rng()
    x = rng.standard_normal((123, 3))
    out, y32 = np.full((123, 8), np.nan), np.full((123, 2), np.nan, np.float32)
    device_function_forms[1, 128](x, out, y32)
    s = np.sort(x, 1)
    want = np.column_stack([s, (s[:, 0] + s[:, 2]) / 2, s[:, 0] + (s[:, 2] - s[:, 0]) * 0.25, s[:, 2],
                            2 * s[:, 0] + 2, s[:, 1] ** 3])
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-15)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(y32, np.column_stack([1 / (1 + np.exp(-x32[:, 0])), x32[:, 1] ** 3]), rtol=2e-6)
    assert twice_plus(1.5, 2.0) == 7.0 and cube(2.0) == 8.0     # called from the host: Python
    square, negate = make_apply(lambda v: v * v), make_apply(lambda v: -v)
    v, res = np.arange(10.0), np.full(10, np.nan)
    square[1, 16](v, res)
    np.testing.assert_array_equal(res, v * v)
    negate[1, 16](v, res)
    np.testing.assert_array_equal(res, -v)


@cuda.jit('void(float32[:], float32[:])')
def sigmoid_kernel(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = sigmoid32(x[i])


@cuda.jit(void(float64[:, ::1], float64[:, ::1], float64))
def scaled_copy(a, b, s):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        b[i, j] = a[i, j] * s


@cuda.jit
def scale_and_shift(a, scale=2.0, offset=1):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = a[i] * scale + offset


def test_declared_signatures_default_arguments_and_configured_launches(backend):
    rng = np.random.default_rng()
    x = rng.standard_normal(1000).astype(np.float32)
    y = np.full_like(x, np.nan)
    sigmoid_kernel[4, 256](x, y)
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-x)), rtol=1e-6)
    a = rng.random((33, 65))
    b = np.full_like(a, np.nan)
    scaled_copy[(3, 5), (16, 16)](a, b, 2.5)
    np.testing.assert_array_equal(b, a * 2.5)
    v = np.ones(10)
    scale_and_shift[1, 32](v)                      # both defaults
    np.testing.assert_array_equal(v, 3.0)
    scale_and_shift[1, 32](v, 3.0)                 # the last one's default
    np.testing.assert_array_equal(v, 10.0)
    launch = scale_and_shift[4, 32]                # a configured kernel, called twice
    w = cuda.to_device(np.zeros(100))
    launch(w, 0.0, 5)
    launch(w, 1.0, 1)
    np.testing.assert_array_equal(w.copy_to_host(), 6.0)


# ---- random numbers -------------------------------------------------------------------------------------
@cuda.jit
def normal_fill(states, out):
    start = cuda.grid(1)
    for i in range(start, out.shape[0], cuda.gridsize(1)):
        out[i] = xoroshiro128p_normal_float64(states, start)


@cuda.jit(device=True)
def jitter(states, tid, x):
    return x + (xoroshiro128p_uniform_float32(states, tid) - 0.5) * 0.1


@cuda.jit
def jitter_kernel(states, x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = jitter(states, i, x[i])


@cuda.jit
def uniform_2d(states, out):
    x, y = cuda.grid(2)
    w = out.shape[1]
    if x < out.shape[0] and y < w:
        out[x, y] = xoroshiro128p_uniform_float32(states, x * w + y)


def test_random_numbers_from_many_threads_device_functions_and_2d_grids(backend):
    states = create_xoroshiro128p_states(64 * 256, seed=int(np.random.default_rng().integers(1, 2**31)))
    draws = cuda.device_array(200000)
    draws[:] = np.nan
    normal_fill[64, 256](states, draws)
    d = draws.copy_to_host()
    assert abs(d.mean()) < 0.02 and abs(d.std() - 1) < 0.02 and np.isfinite(d).all()
    n = 1000
    stream = cuda.stream()
    s1 = create_xoroshiro128p_states(n, seed=3, subsequence_start=5, stream=stream)
    stream.synchronize()
    s2 = cuda.device_array(n, dtype=curandom.xoroshiro128p_dtype)
    init_xoroshiro128p_states(s2, 3, subsequence_start=5)     # the same states, into a given array
    x = np.arange(n, dtype=np.float32)
    out1, out2 = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    jitter_kernel[4, 256](s1, x, out1)
    jitter_kernel[4, 256](s2, x, out2)
    np.testing.assert_array_equal(out1, out2)
    assert np.abs(out1 - x).max() <= 0.05 + 1e-4
    grid = np.full((20, 30), np.nan, np.float32)
    uniform_2d[(2, 2), (16, 16)](create_xoroshiro128p_states(600, seed=5), grid)
    host = _host_states(600, 5)
    want = [xoroshiro128p_uniform_float32(host, t) for t in range(600)]
    np.testing.assert_array_equal(grid, np.array(want, np.float32).reshape(20, 30))


# ---- host memory, layouts and views --------------------------------------------------------------------
@cuda.jit
def fill_ij(a):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] = i * 100 + j


def test_mapped_pinned_fortran_and_transposed_arrays_and_numpy_views(backend):
    m = cuda.mapped_array(100, dtype=np.float32)
    m[:] = np.arange(100)
    increment_1d[1, 128](m)
    cuda.synchronize()
    np.testing.assert_array_equal(m, np.arange(100) + 1)
    p = cuda.pinned_array((10, 10))
    p[:] = 1
    with cuda.pinned(p):
        d = cuda.to_device(p)
    increment_1d[1, 128](d.reshape(100))
    np.testing.assert_array_equal(d.copy_to_host(), 2)
    f = cuda.device_array((13, 17), dtype=np.int32, order='F')
    f[...] = -1
    fill_ij[(1, 2), (16, 16)](f)
    i, j = np.indices((13, 17))
    h = f.copy_to_host()
    assert h.flags.f_contiguous
    np.testing.assert_array_equal(h, i * 100 + j)
    stream = cuda.stream()
    t = f.T                                     # a C-contiguous transposed copy
    np.testing.assert_array_equal(t.copy_to_host(stream=stream), (i * 100 + j).T)
    fill_ij[(2, 1), (16, 16)](t)
    np.testing.assert_array_equal(t.copy_to_host(), np.indices((17, 13))[0] * 100 + np.indices((17, 13))[1])
    a = np.zeros((10, 12))
    fill_ij[(1, 1), (16, 16)](a[::2, 1::3])     # a strided NumPy view, written back into a
    want = np.zeros((10, 12))
    want[::2, 1::3] = np.indices((5, 4))[0] * 100 + np.indices((5, 4))[1]
    np.testing.assert_array_equal(a, want)
    tr = np.zeros((9, 7)).T                     # a transposed NumPy array
    fill_ij[(1, 1), (16, 16)](tr)
    np.testing.assert_array_equal(tr, np.indices((7, 9))[0] * 100 + np.indices((7, 9))[1])
    ro = np.broadcast_to(np.arange(5.0), (4, 5))   # read-only: nothing to copy back
    sums = np.full(4, np.nan)
    matvec[1, 32](ro, np.ones(5), sums)
    np.testing.assert_array_equal(sums, np.full(4, 10.0))
    assert cuda.is_cuda_array(d) and not cuda.is_cuda_array(p)


# ---- warps -------------------------------------------------------------------------------------------
@cuda.jit
def warp_groups(keys, out):
    i = cuda.grid(1)
    lane = cuda.laneid
    k = keys[i]
    peers = cuda.match_any_sync(0xffffffff, k)
    out[i, 0] = peers
    out[i, 1] = cuda.popc(peers & cuda.lanemask_lt())     # rank among equal keys
    mask, same = cuda.match_all_sync(0xffffffff, k // 100)
    out[i, 2] = same
    out[i, 3] = mask
    out[i, 4] = cuda.activemask()
    if lane < 10:
        out[i, 5] = cuda.activemask()
    out[i, 6] = cuda.lanemask_lt()


@cuda.jit
def warp_prefix_sums(x, out, votes):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = x[i]
    off = 1
    while off < 32:
        n = cuda.shfl_up_sync(0xffffffff, v, off)
        if lane >= off:
            v += n
        off *= 2
    out[i] = v
    any_zero = cuda.any_sync(0xffffffff, x[i] == 0)
    all_small = cuda.all_sync(0xffffffff, x[i] < 10)
    uniform = cuda.eq_sync(0xffffffff, x[i] >= 0)
    if lane == 0:
        votes[i // 32, 0] = any_zero
        votes[i // 32, 1] = all_small
        votes[i // 32, 2] = uniform


@cuda.jit
def half_warp_sum(x, out):
    i = cuda.grid(1)
    lane = cuda.laneid
    if lane < 16:
        v = x[i]
        v += cuda.shfl_down_sync(0xffff, v, 8)
        v += cuda.shfl_down_sync(0xffff, v, 4)
        v += cuda.shfl_down_sync(0xffff, v, 2)
        v += cuda.shfl_down_sync(0xffff, v, 1)
        if lane == 0:
            out[i // 32] = v
        cuda.syncwarp(0xffff)


def test_warp_match_lane_masks_scans_votes_and_partial_masks(backend):
    rng = np.random.default_rng()
    keys = rng.integers(0, 4, 64).astype(np.int32)
    keys[32:] = 7
    out = np.full((64, 7), -1, np.int64)
    warp_groups[1, 64](keys, out)
    for i in range(64):
        w, lane = divmod(i, 32)
        kk = keys[32 * w:32 * w + 32]
        assert out[i, 0] == sum(1 << j for j in range(32) if kk[j] == kk[lane])
        assert out[i, 1] == sum(1 for j in range(lane) if kk[j] == kk[lane])
        assert out[i, 2] == 1 and out[i, 3] == 0xffffffff and out[i, 4] == 0xffffffff
        if lane < 10:   # the lanes in the branch (the others may run it apart)
            assert out[i, 5] & ~0x3ff == 0 and out[i, 5] >> lane & 1
        assert out[i, 6] == (1 << lane) - 1
    x = rng.integers(0, 10, 96).astype(np.int64)
    x[:32] += 1
    sums, votes = np.full(96, -1, np.int64), np.full((3, 3), -1, np.int64)
    warp_prefix_sums[3, 32](x, sums, votes)
    np.testing.assert_array_equal(sums, np.cumsum(x.reshape(3, 32), 1).ravel())
    w = x.reshape(3, 32)
    np.testing.assert_array_equal(votes, np.stack([(w == 0).any(1), (w < 10).all(1), np.ones(3, bool)], 1))
    v = rng.random(64)
    half = np.full(2, np.nan)
    half_warp_sum[1, 64](v, half)
    np.testing.assert_allclose(half, v.reshape(2, 32)[:, :16].sum(1), rtol=1e-12)


@cuda.jit
def half_precision_operators(a, b, out, greater):
    i = cuda.grid(1)
    if i < a.size:
        x, y = a[i], b[i]
        for k, r in enumerate((x + y, x * y, x - y, -x, x / y, x * np.float16(2))):   # unrolled
            out[i, k] = r
        greater[i] = x > y


def test_float16_arithmetic_operators(backend):
    rng = np.random.default_rng()
    a = (rng.standard_normal(300) * 8).astype(np.float16)
    b = (rng.random(300) + 0.5).astype(np.float16)
    out, greater = np.full((300, 6), np.nan, np.float16), np.zeros(300, bool)
    half_precision_operators[2, 256](a, b, out, greater)
    np.testing.assert_array_equal(out, np.stack([a + b, a * b, a - b, -a, a / b, a * np.float16(2)], 1))
    np.testing.assert_array_equal(greater, a > b)


# ---- control flow ---------------------------------------------------------------------------------------
@cuda.jit
def control_flow(x, out, n_unsigned):
    i = cuda.grid(1)
    if i >= x.size:
        return                                  # an early return
    down = 0
    for k in range(n_unsigned - 1, -1, -1):     # an unsigned count down to 0
        down = down * 10 + k
    out[i, 6] = down
    s = 0
    for k in range(10, 0, -3):                  # a negative step
        s += k
    out[i, 0] = s
    j = 0
    total = 0
    while True:
        j += 1
        if j % 2 == 0:
            continue
        if j > x[i]:
            break
        total += j
    out[i, 1] = total
    root = -1
    for k in range(x[i]):
        if k * k > x[i]:
            root = k
            break
    else:
        root = 1000                             # no break
    out[i, 2] = root
    n = 0
    while n < x[i]:
        n += 3
        if n == 9:
            break
    else:
        n = -n
    out[i, 3] = n
    t = 0
    for v in (1, 2, 3):
        if v == x[i]:
            break
        t += v
    else:
        t = 100
    out[i, 4] = t
    found = 0
    for pos, (a, b) in enumerate(zip(range(x[i]), range(5, 100))):   # nested zip in enumerate
        if a + b == 12:
            found = pos
            break
    else:
        found = -1
    out[i, 5] = found


def test_control_flow_with_loop_else_clauses_breaks_and_early_returns(backend):
    x = np.arange(30)
    out = np.full((32, 7), -99, np.int64)
    control_flow[1, 32](x, out, np.uint32(4))

    def reference(v):
        total = sum(range(1, v + 1, 2))
        root = next((k for k in range(v) if k * k > v), 1000)
        n = 0
        while n < v:
            n += 3
            if n == 9:
                break
        else:
            n = -n
        t = 0
        for w in (1, 2, 3):
            if w == v:
                break
            t += w
        else:
            t = 100
        found = next((p for p, (a, b) in enumerate(zip(range(v), range(5, 100))) if a + b == 12), -1)
        return [22, total, root, n, t, found, 3210]

    for i in range(30):
        assert out[i].tolist() == reference(i), i
    assert (out[30:] == -99).all()


@cuda.jit
def operators_and_membership(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = operator.add(a[i], b[i])
        out[i, 1] = operator.mul(a[i], 3)
        out[i, 2] = operator.truediv(a[i], b[i])
        out[i, 3] = operator.neg(a[i])
        out[i, 4] = operator.lt(a[i], b[i])
        out[i, 5] = operator.floordiv(a[i], b[i])
        out[i, 6] = a[i] in (1, 2, 3)
        out[i, 7] = b[i] not in (4, 5)


@cuda.jit
def slice_assignments(a, b, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        loc = cuda.local.array((3, 4), float32)
        loc[:] = 0                                  # a whole array from a number
        loc[1, :] = 2.5                             # a row
        loc[:, 3] = a[i, :3]                        # a column from a row of another array
        out[i, :4] = loc[1]
        out[i, 4:] = b                              # a slice from an array
        a[i] = -1


@cuda.jit
def shift_in_place(a, grid):
    if cuda.grid(1) == 0:
        a[1:] = a[:-1]              # overlapping views: the result NumPy's (and Numba's) copy gives
        a[0] = -1
        grid[:-1, :] = grid[1:, :]  # rows moved up in place


def test_operator_functions_membership_and_slice_assignment(backend):
    rng = np.random.default_rng()
    a = rng.integers(-5, 6, 100)
    b = rng.integers(1, 7, 100)
    out = np.full((100, 8), np.nan)
    operators_and_membership[1, 128](a, b, out)
    np.testing.assert_array_equal(out, np.stack([a + b, a * 3, a / b, -a, a < b, a // b, np.isin(a, [1, 2, 3]),
                                                 ~np.isin(b, [4, 5])], 1))
    m = rng.random((5, 6)).astype(np.float32)
    row = np.arange(4, dtype=np.float32)
    res = np.full((5, 8), np.nan, np.float32)
    want = np.zeros((5, 8), np.float32)
    want[:, :4] = 2.5
    want[:, 3] = m[:, 1]
    want[:, 4:] = row
    slice_assignments[1, 8](m, row, res)
    np.testing.assert_array_equal(res, want)
    assert (m == -1).all()
    v, g = rng.random(9), rng.random((4, 3))
    want_v, want_g = np.concatenate([[-1], v[:-1]]), g.copy()
    want_g[:-1] = g[1:]
    shift_in_place[1, 1](v, g)
    np.testing.assert_array_equal(v, want_v)
    np.testing.assert_array_equal(g, want_g)


class NegativeInput(Exception):
    pass


def check_inputs(x, out):
    i = cuda.grid(1)
    if i >= x.size:
        return
    if x[i] < 0:
        raise NegativeInput("negative input")
    if x[i] > 100:
        raise ValueError
    assert x[i] != 50, "fifty"
    out[i] = x[i] * 2


def test_raise_and_assert_in_kernels(backend):
    plain, checked = cuda.jit(check_inputs), cuda.jit(debug=True)(check_inputs)
    x = np.arange(64.0) * 0.5
    for kernel in (plain, checked):
        out = np.full(64, np.nan)
        kernel[2, 32](x, out)
        np.testing.assert_array_equal(out, x * 2)
    bad = x.copy()
    bad[[37, 40]] = [-1, 1000]
    out = np.full(64, np.nan)
    plain[2, 32](bad, out)             # as Numba without debug: the raising threads end, nothing is raised
    assert np.isnan(out[[37, 40]]).all() and (out[:37] == x[:37] * 2).all()
    with pytest.raises(NegativeInput, match=r"kernel 'check_inputs' \(.*:\d+\), in thread \(5, 0, 0\) of block "
                                            r"\(1, 0, 0\): negative input"):
        checked[2, 32](bad, np.zeros(64))
    bad[37] = 3
    with pytest.raises(ValueError, match=r"kernel 'check_inputs' .* in thread \(8, 0, 0\) of block \(1, 0, 0\)$"):
        checked[2, 32](bad, np.zeros(64))
    with pytest.raises(AssertionError, match=r"in thread \(18, 0, 0\) of block \(1, 0, 0\): fifty"):
        checked[2, 32](np.arange(64.0), np.zeros(64))


# ---- more argument kinds ---------------------------------------------------------------------------------
@cuda.jit("void(float64[:,:])")
def api_calls_in_loops(ary):
    for i in range(2):
        tx = cuda.threadIdx.x
    for j in range(3):
        ty = cuda.threadIdx.y
    sm = cuda.shared.array((2, 3), float64)
    sm[tx, ty] = tx * 10 + ty + j                 # names last set in earlier loops
    ary[tx, ty] = sm[tx, ty]


@cuda.jit
def tuple_of_arrays(arrs, out):
    a, b = arrs
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * b[i]


@cuda.jit
def many_arguments(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (a0[i] + a1[i] + a2[i] + a3[i] + a4[i] + a5[i] + a6[i] + a7[i] + a8[i] + a9[i]
                  + s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9)


def test_names_set_in_loops_tuples_of_arrays_and_many_arguments(backend):
    a = np.full((2, 3), np.nan)
    api_calls_in_loops[1, (2, 3)](a)
    i, j = np.indices((2, 3))
    np.testing.assert_array_equal(a, i * 10 + j + 2)
    rng = np.random.default_rng()
    x, y = rng.random(20), rng.random(20)
    out = np.full(20, np.nan)
    tuple_of_arrays[1, 32]((x, y), out)
    np.testing.assert_array_equal(out, x * y)
    dout = cuda.device_array(20)
    tuple_of_arrays[1, 32]((cuda.to_device(x), cuda.to_device(y)), dout)
    np.testing.assert_array_equal(dout.copy_to_host(), x * y)
    arrays = [rng.random(50) for _ in range(10)]
    total = np.full(50, np.nan)
    many_arguments[1, 64](*arrays, *range(10), total)
    np.testing.assert_allclose(total, sum(arrays) + 45, rtol=1e-12)


# ---- ufuncs, gufuncs and reductions ------------------------------------------------------------------------
@vectorize(['int64(int64, int64)', 'float64(float64, float64)', 'float32(float32, float32)'])
def larger(a, b):
    return a if a > b else b


@vectorize(['float64(float64, float64)'], identity=0)
def minus(a, b):
    return a - b


@vectorize(['float64(float64)'], target='parallel')
def log1p_parallel(a):
    return math.log1p(a)


@vectorize('float32(float32, float32)', target='cuda')
def axpy_ufunc(x, y):
    return 2 * x + y


@vectorize(['float32(float32, float32)'], target='cuda')
def larger_cuda(a, b):
    return a if a > b else b


def test_vectorize_signatures_targets_and_numpy_ufunc_methods(backend):
    rng = np.random.default_rng()
    a, b = rng.random(50), rng.random(50)
    np.testing.assert_array_equal(larger(a, b), np.maximum(a, b))
    np.testing.assert_array_equal(larger(a.astype(np.float32), np.float32(0.5)), np.maximum(a.astype(np.float32), 0.5))
    m = rng.integers(0, 100, (3, 4))
    np.testing.assert_array_equal(larger(m, 50), np.maximum(m, 50))
    np.testing.assert_allclose(log1p_parallel(a), np.log1p(a), rtol=1e-15)
    # NumPy's ufunc methods on CPU targets: reduce along axes, accumulate, outer, at
    np.testing.assert_array_equal(larger.reduce(m, axis=0), m.max(0))
    np.testing.assert_array_equal(larger.reduce(m, axis=1), m.max(1))
    assert larger.reduce(m, axis=None) == m.max() and larger.reduce(m, axis=(0, 1), keepdims=True).shape == (1, 1)
    np.testing.assert_array_equal(larger.accumulate(m), np.maximum.accumulate(m))
    np.testing.assert_array_equal(larger.accumulate(m, axis=1), np.maximum.accumulate(m, axis=1))
    assert minus.reduce(a) == np.subtract.reduce(a)           # in order, as NumPy: not a tree
    np.testing.assert_array_equal(minus.accumulate(a), np.subtract.accumulate(a))
    assert minus.reduce(a, initial=1.0) == np.subtract.reduce(a, initial=1.0) and minus.reduce(np.zeros(0)) == 0
    np.testing.assert_array_equal(minus.outer(a[:3], b[:5]), np.subtract.outer(a[:3], b[:5]))
    out = np.full(4, np.nan)
    assert larger.reduce(m.astype(float), axis=0, out=out) is out
    np.testing.assert_array_equal(out, m.max(0))
    acc = np.zeros(5)
    larger.at(acc, [0, 1, 1, 4], [3.0, 2.0, 5.0, -1.0])
    np.testing.assert_array_equal(acc, [3, 5, 0, 0, 0])
    with pytest.raises(ValueError, match="no identity"):
        larger.reduce(np.zeros((0, 3)), axis=0)
    with pytest.raises(NotImplementedError, match="reduceat is not supported"):
        larger.reduceat(a, [0, 2])
    x, y = rng.random(1000).astype(np.float32), rng.random(1000).astype(np.float32)
    np.testing.assert_allclose(axpy_ufunc(x, y), 2 * x + y, rtol=1e-6)
    np.testing.assert_allclose(axpy_ufunc(x, np.float32(1)), 2 * x + 1, rtol=1e-6)
    assert axpy_ufunc(np.float32(1), np.float32(2)).tolist() == [4.0]    # numbers: a 1-element array, as Numba
    d = axpy_ufunc(cuda.to_device(x), cuda.to_device(y))
    np.testing.assert_allclose(d.copy_to_host(), 2 * x + y, rtol=1e-6)
    assert larger_cuda.reduce(cuda.to_device(x)) == x.max()      # Numba's CUDA ufunc reduce
    with pytest.raises(NotImplementedError, match="CUDA ufunc 'axpy_ufunc' has no accumulate"):
        axpy_ufunc.accumulate(x)


@guvectorize(['void(float64[:], float64[:], float64[:])', 'void(float32[:], float32[:], float32[:])'],
             '(n),(n)->()')
def dot_gu(a, b, res):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    res[0] = s


@guvectorize(['void(float64[:], intp[:], float64[:])'], '(n),()->(n)', target='cuda')
def roll_gu(x, k, out):
    n = x.shape[0]
    for i in range(n):
        out[(i + k[0]) % n] = x[i]


@guvectorize('void(float32[:,:], float32[:])', '(m,n)->(n)', target='parallel')
def column_means(m, out):
    for j in range(m.shape[1]):
        s = 0.0
        for i in range(m.shape[0]):
            s += m[i, j]
        out[j] = s / m.shape[0]


@guvectorize(['void(float32[:], float32[:])'], '(n)->(n)', target='cuda')
def running_sum(x, out):
    acc = float32(0)
    for i in range(x.shape[0]):
        acc += x[i]
        out[i] = acc


@cuda.reduce
def min_reduce(a, b):
    return a if a < b else b


def test_guvectorize_layouts_targets_and_cuda_reduce_of_slices(backend):
    rng = np.random.default_rng()
    a, b = rng.random((6, 10)), rng.random((6, 10))
    np.testing.assert_allclose(dot_gu(a, b), (a * b).sum(1), rtol=1e-12)
    np.testing.assert_allclose(dot_gu(a.astype(np.float32), b.astype(np.float32)), (a * b).sum(1), rtol=1e-5)
    np.testing.assert_allclose(dot_gu(a, b[0]), (a * b[0]).sum(1), rtol=1e-12)     # broadcast core
    res = np.full(6, np.nan)
    dot_gu(a, b, res)
    np.testing.assert_allclose(res, (a * b).sum(1), rtol=1e-12)
    x = rng.random((3, 7))
    np.testing.assert_array_equal(roll_gu(x, np.array([1, 2, 3])), [np.roll(x[k], k + 1) for k in range(3)])
    m = rng.random((4, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(column_means(m), m.mean(1), rtol=1e-5)
    c = rng.random((3, 4, 7)).astype(np.float32)
    np.testing.assert_allclose(running_sum(c), np.cumsum(c, -1), rtol=1e-5)
    stream = cuda.stream()
    dc = running_sum(cuda.to_device(c), stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(dc.copy_to_host(), np.cumsum(c, -1), rtol=1e-5)
    v = rng.standard_normal(12345).astype(np.float32)
    assert min_reduce(v) == v.min() and min_reduce(v, init=-100.0) == -100.0
    dv = cuda.to_device(v)
    assert min_reduce(dv[100:200]) == v[100:200].min()
    assert min_reduce(dv, stream=stream) == v.min()


# ---- device functions returning nested tuples; inner functions and lambdas in kernels -----------
@cuda.jit(device=True)
def ordered(a, b, scale=1.0):
    if a < b:
        return a * scale, b * scale
    return b * scale, a * scale


@cuda.jit(device=True)
def pair_stats(x, i):
    lo, hi = ordered(x[i], x[i + 1])
    lo2, hi2 = ordered(x[i], x[i + 1], 2.0)
    return (lo, hi), hi2 - lo2        # a tuple holding a tuple


@cuda.jit
def pair_stats_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size - 1:
        (lo, hi), spread = pair_stats(x, i)
        out[i, 0] = lo
        out[i, 1] = hi
        out[i, 2] = spread


HALO_WEIGHTS = (0.25, 0.5, 0.25)


@cuda.jit
def smooth_with_inner_functions(x, out):
    n = x.size
    clamp = lambda j: min(max(j, 0), n - 1)  # noqa: E731

    def at(j, w=1.0):                 # reads x of the kernel, as Numba's closures do
        return x[clamp(j)] * w

    def weighted(i):
        s = 0.0
        for k in range(3):
            s += at(i + k - 1, HALO_WEIGHTS[k])
        return s

    i = cuda.grid(1)
    if i < n:
        out[i] = weighted(i) + sum((at(i), 1.0, 2))


@cuda.jit
def sum_mixed_arrays(a, b, c, out):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for arr in numba.literal_unroll((a, b, c)):    # three dtypes: one loop variable each
            acc += arr[i]
        out[i] = acc


@cuda.jit
def pick_by_runtime_index(planes, weights, out):
    i, k = cuda.grid(2)
    if i < out.shape[0] and k < out.shape[1]:
        out[i, k] = planes[k % 3][i] * weights[-1 - k % 3]   # homogeneous tuples, variable indices


@cuda.jit
def conditional_tuples(a, b, out):
    i = cuda.grid(1)
    lo = hi = 0
    if 0 <= i < out.size:
        src, dst = (a, b) if i % 2 == 0 else (b, a)            # tuples of arrays
        (p, q), r = ((1, 2.5), i) if i < 2 else ((3, 4.0), -i)  # nested tuples of numbers
        lo, hi = (src[i], dst[i]) if src[i] < dst[i] else (dst[i], src[i])
        out[i] = src[i] - dst[i] + p * q + r + 100 * (hi - lo)


def test_nested_tuple_returns_inner_functions_and_heterogeneous_unrolling(backend):
    a, b = np.arange(4.0), np.array([10.0, 0.5, 10.0, 1.5])
    out = np.full(4, np.nan)
    conditional_tuples[1, 32](a, b, out)
    want = [(a[i] - b[i] if i % 2 == 0 else b[i] - a[i]) + (2.5 + i if i < 2 else 12 - i) + 100 * abs(a[i] - b[i])
            for i in range(4)]
    np.testing.assert_array_equal(out, want)
    planes = tuple(cuda.to_device(np.arange(5.0) + 10 * p) for p in range(3))
    out = np.full((5, 4), np.nan)
    pick_by_runtime_index[(1, 1), (8, 8)](planes, (1.0, 2.0, 4.0), out)
    w = [4.0, 2.0, 1.0]
    np.testing.assert_array_equal(out, [[(i + 10 * (k % 3)) * w[k % 3] for k in range(4)] for i in range(5)])
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])
    out = np.full((5, 3), np.nan)
    pair_stats_kernel[1, 32](x, out)
    lo, hi = np.minimum(x[:-1], x[1:]), np.maximum(x[:-1], x[1:])
    np.testing.assert_array_equal(out, np.stack([lo, hi, 2 * (hi - lo)], 1))
    x = np.array([1.0, 5.0, 2.0, 8.0, -4.0])
    out = np.full(5, np.nan)
    smooth_with_inner_functions[1, 32](cuda.to_device(x), out)
    xp = np.concatenate([x[:1], x, x[-1:]])
    np.testing.assert_allclose(out, 0.25 * xp[:-2] + 0.5 * x + 0.25 * xp[2:] + x + 3.0, rtol=1e-15)
    a, b, c = np.arange(4.0), np.ones(4, np.float32), np.arange(4, dtype=np.int16) * 10
    out = np.full(4, np.nan)
    sum_mixed_arrays[1, 32](a, b, c, out)
    np.testing.assert_array_equal(out, a + b + c)


# ---- RNG states in arrays the program made ----------------------------------------------------------
@cuda.jit
def draw_uniforms(states, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        for j in range(out.shape[1]):
            out[i, j] = xoroshiro128p_uniform_float32(states, i)


def test_rng_states_in_a_device_array_of_the_programs_dtype_and_on_the_host(backend):
    ref = np.full((40, 6), np.nan, np.float32)
    draw_uniforms[2, 32](create_xoroshiro128p_states(40, seed=7, subsequence_start=2), ref)
    assert 0.3 < ref.mean() < 0.7 and len(np.unique(ref)) == ref.size
    # the program's own dtype, equal to xoroshiro128p_dtype but another object
    states = cuda.device_array(40, dtype=np.dtype([("s0", np.uint64), ("s1", np.uint64)]))
    init_xoroshiro128p_states(states, 7, subsequence_start=2)
    out = np.full((40, 6), np.nan, np.float32)
    draw_uniforms[2, 32](states, out)
    np.testing.assert_array_equal(out, ref)
    # host states: copied to the device and back, advanced as the kernel left them
    host = create_xoroshiro128p_states(40, seed=7, subsequence_start=2).copy_to_host()
    out = np.full((40, 6), np.nan, np.float32)
    draw_uniforms[2, 32](host, out)
    np.testing.assert_array_equal(out, ref)
    draw_uniforms[2, 32](cuda.to_device(host), out)
    np.testing.assert_array_equal(out, ref[:, ::-1] * 0 + out)   # ran on the advanced states
    assert not np.array_equal(out, ref)


# ---- iterating arrays, ellipsis indices, array attributes ------------------------------------------
@cuda.jit
def channel_stats(img, a, b, out):
    c = cuda.grid(1)
    if c < img.shape[-1]:
        plane = img[..., c]                 # a view of one channel
        s = 0.0
        for row in plane:                   # rows of a 2-D view
            for v in row[1:]:
                s += v
        out[c, 0] = s
        out[c, 1] = img.shape[-1] * 100 + img.ndim * 10 + len(img.shape)
        out[c, 2] = img.itemsize + img.strides[0] + plane.nbytes
        t = 0.0
        for j, (x, y) in enumerate(zip(a, b)):
            t += j * x * y
        out[c, 3] = t + a[-1] + img[-1, -2, c]
    cuda.syncthreads()
    if c == 0:
        img[..., 0] = 7                     # assigning through an ellipsis


def test_iterating_views_ellipsis_indices_and_array_attributes(backend):
    img = np.arange(24.0).reshape(3, 4, 2)
    a, b = np.arange(3.0), np.array([2.0, 3.0, 4.0])
    out = np.full((2, 4), np.nan)
    before = img.copy()
    channel_stats[1, 32](img, a, b, out)
    t = sum(j * x * y for j, (x, y) in enumerate(zip(a, b)))
    want = [[before[:, 1:, c].sum(), 200 + 30 + 3, 8 + 64 + 12 * 8, t + a[-1] + before[-1, -2, c]] for c in range(2)]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(img[..., 0], 7)
    np.testing.assert_array_equal(img[..., 1], before[..., 1])


# ---- optional arguments: None defaults, keyword arguments, branches pruned ------------------------
@cuda.jit(device=True)
def weighted_value(x, w=None, bias=0.0, scale=1.0):
    if w is None:
        return (x + bias) * scale
    return (x * w + bias) * scale       # compiled only where w is given


@cuda.jit
def apply_optional_weights(a, out, weights=None, offsets=None):
    i = cuda.grid(1)
    if i < a.size:
        if weights is not None and offsets is None:
            out[i] = weighted_value(a[i], weights[i])
        elif weights is not None:
            out[i] = weighted_value(a[i], weights[i], bias=offsets[i])
        else:
            out[i] = weighted_value(a[i], scale=3.0, bias=1.0)   # w left to its default


def test_none_defaults_keyword_arguments_and_pruned_branches(backend):
    a, w, off = np.arange(4.0), np.full(4, 2.0), np.array([0.5, 1.5, 2.5, 3.5])
    out = np.full(4, np.nan)
    apply_optional_weights[1, 32](a, out)
    np.testing.assert_array_equal(out, (a + 1) * 3)
    apply_optional_weights[1, 32](a, out, w)
    np.testing.assert_array_equal(out, a * 2)
    apply_optional_weights[1, 32](a, out, None)          # None for a parameter whose default is None
    np.testing.assert_array_equal(out, (a + 1) * 3)
    apply_optional_weights[1, 32](a, out, w, off)
    np.testing.assert_array_equal(out, a * 2 + off)
    apply_optional_weights[1, 32](a, out, w, None)
    np.testing.assert_array_equal(out, a * 2)
    with pytest.raises(TypeError, match=r"argument 2 is None; kernels take arrays, numbers and tuples \(a "
                                        r"parameter whose default is None may be left out\)"):
        apply_optional_weights[1, 32](a, out, None, off)
    with pytest.raises(TypeError, match=r"argument 1 \('out'\) is None; tessel.numba takes None only for "
                                        r"trailing parameters whose default is None"):
        apply_optional_weights[1, 32](a, None, None)


# ---- local and shared arrays of records -------------------------------------------------------------
candidate = np.dtype([("value", np.float64), ("index", np.int32)])
candidate_t = numba.from_dtype(candidate)
block_stat = np.dtype([("lo", np.float32), ("hi", np.float32), ("count", np.int64), ("first3", np.int16, (3,))],
                      align=True)


@cuda.jit(device=True)
def better(a, b):
    return a.value > b.value or (a.value == b.value and a.index < b.index)


@cuda.jit
def top3_per_row(x, best, stats):
    r = cuda.grid(1)
    top = cuda.local.array(3, dtype=candidate_t)          # a local array of records
    sh = cuda.shared.array(32, dtype=block_stat)          # a shared array of records (a NumPy dtype)
    t = cuda.threadIdx.x
    if r < x.shape[0]:
        for k in range(3):
            top[k].value = -np.inf
            top[k]['index'] = -1
        lo, hi = np.inf, -np.inf
        for j in range(x.shape[1]):
            v = x[r, j]
            lo, hi = min(lo, v), max(hi, v)
            if v > top[2].value:
                top[2].value = v
                top[2].index = j
                for k in (1, 0):                          # bubble the new one up
                    if better(top[k + 1], top[k]):
                        tv, ti = top[k].value, top[k].index
                        top[k].value, top[k].index = top[k + 1].value, top[k + 1].index
                        top[k + 1].value, top[k + 1].index = tv, ti
        for k in range(3):
            best[r, k] = top[k].index
        sh[t].lo, sh[t].hi = lo, hi
        sh[t].count = x.shape[1]
        for k in range(3):
            sh[t].first3[k] = top[k].index
    cuda.syncthreads()
    if r < x.shape[0]:
        other = sh[(t + 1) % 32] if r + 1 < x.shape[0] and t + 1 < 32 else sh[t]
        stats[r, 0] = other.hi - other.lo
        stats[r, 1] = other.count + other.first3[0] + len(sh)


def test_local_and_shared_arrays_of_records(backend):
    x = np.random.default_rng(5).standard_normal((40, 17))
    x[3, 5] = x[3, 9] = 10.0                              # a tie: the lower index first
    best = np.full((40, 3), -7, np.int32)
    stats = np.full((40, 2), np.nan)
    top3_per_row[2, 32](x, best, stats)
    want = np.argsort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(best, want)
    nxt = np.array([r + 1 if r + 1 < 40 and r % 32 != 31 else r for r in range(40)])
    np.testing.assert_allclose(stats[:, 0], (x.max(1) - x.min(1)).astype(np.float32)[nxt], rtol=1e-6)
    np.testing.assert_array_equal(stats[:, 1], 17 + want[nxt, 0] + 32)


# ---- constants and functions passed to device functions, namedtuples, nonlocal, rebound parameters -
@cuda.jit(device=True)
def as_uint64(v):
    return numba.uint64(v)


@cuda.jit(device=True)
def unchanged(v):
    return v


@cuda.jit(device=True)
def binned_atomic(out, values, dtype, nbins, shape2d, op, cast, wrap):
    t = cuda.threadIdx.x
    bins = cuda.shared.array(nbins, dtype)             # nbins and dtype: the caller's constants
    grid = cuda.shared.array(shape2d, dtype)
    if t < nbins:
        bins[t] = 0
    if t < shape2d[0] * shape2d[1]:
        grid[t // shape2d[1], t % shape2d[1]] = 0
    cuda.syncthreads()
    b = (t, cast(values[t]))
    if wrap:                                           # decided when compiling: never typed as float
        b = (b[0] % nbins, b[1] % nbins)
    op(bins, b[1] % nbins, 1)                          # op: cuda.atomic.add or cuda.atomic.sub
    op(grid, (b[0] % shape2d[0], b[1] % shape2d[1]), 1)
    cuda.syncthreads()
    if t < nbins:
        out[0, t] = bins[t]
    if t < shape2d[0] * shape2d[1]:
        out[1, t] = grid[t // shape2d[1], t % shape2d[1]]


@cuda.jit
def histogram_adds(out, values):
    binned_atomic(out, values, numba.int32, 8, (2, 4), cuda.atomic.add, unchanged, False)


@cuda.jit
def histogram_subs(out, values):
    binned_atomic(out, values, numba.int32, 8, (2, 4), cuda.atomic.sub, as_uint64, False)


def make_scaled_copy(scale):
    square = cuda.jit(lambda v: v * v, device=True)

    @cuda.jit
    def scaled_copy(dst, src, p):
        nonlocal scale                                 # read only: a closure variable, as in Numba
        i = cuda.grid(1)
        if i < dst.shape[0]:
            row = src[i]
            src = cuda.local.array((1, 3), dtype=numba.float64)   # a parameter rebound to a local array
            for k in range(3):
                src[0, k] = row[k] * scale
            dst[i] = src[0, 0] + src[0, 1] * p.w + square(src[0, 2]) + p.bias + p[0]
    return scaled_copy


def test_constants_and_functions_passed_to_device_functions_namedtuples_and_rebound_names(backend):
    values = np.arange(32, dtype=np.int64) * 3
    out = np.full((2, 8), -99, np.int32)
    histogram_adds[1, 32](out, values)
    np.testing.assert_array_equal(out[0], np.bincount(values % 8, minlength=8))
    grid = np.zeros((2, 4), np.int32)
    np.add.at(grid, (np.arange(32) % 2, (values % 8) % 4), 1)
    np.testing.assert_array_equal(out[1], grid.ravel())
    histogram_subs[1, 32](out, values)
    np.testing.assert_array_equal(out[0], -np.bincount(values % 8, minlength=8))

    from collections import namedtuple
    Params = namedtuple("Params", ["bias", "w"])
    src = np.arange(12.0).reshape(4, 3)
    dst = np.full(4, np.nan)
    make_scaled_copy(2.0)[1, 32](dst, src, Params(bias=0.5, w=10.0))
    s = src * 2
    np.testing.assert_array_equal(dst, s[:, 0] + s[:, 1] * 10 + s[:, 2] ** 2 + 0.5 + 0.5)
    assert numba.errors is numba.core.errors and numba.TypingError is numba.core.errors.TypingError
    assert issubclass(numba.NumbaRuntimeError, numba.NumbaError)


# ---- real and imaginary parts of complex arrays as views --------------------------------------------
@cuda.jit
def shift_spectrum(z, out):
    i = cuda.grid(1)
    if i < z.shape[0]:
        cuda.atomic.add(z.real, i, 1.0)       # atomics on the real parts
        z.imag[i] *= 2
        tile = cuda.shared.array(32, dtype=numba.complex64)
        tile[i % 32] = z[i]
        out[i] = tile.real[i % 32] + 100 * tile.imag[i % 32] + z.real.size


def test_real_and_imag_views_of_complex_arrays(backend):
    z0 = np.arange(32) + 1j * np.arange(32)[::-1]
    z, out = z0.copy(), np.zeros(32)
    shift_spectrum[1, 32](z, out)
    np.testing.assert_array_equal(z, (z0.real + 1) + 2j * z0.imag)
    np.testing.assert_array_equal(out, (z0.real + 1) + 200 * z0.imag + 32)


# ---- from Numba's cudapy tests: round to digits, atomic max/min with NaN, constant records -----------
@cuda.jit("void(float32[:], float32, int32)")
def round_to_f4(ary, c, ndigits):
    ary[0] = round(c, ndigits)


@cuda.jit("void(float64[:], float64, int32)")
def round_to_f8(ary, c, ndigits):
    ary[0] = round(c, ndigits)


def test_round_to_digits_as_cpython(backend):
    ary = np.full(1, np.nan, np.float32)
    round_to_f4[1, 1](ary, 0.3425, 3)       # 0.3425 in float32 is just above the halfway point
    assert ary[0] == np.float32(0.343)
    big = np.finfo(np.float32).max
    round_to_f4[1, 1](ary, big, 300)         # x * 10**300 overflows: x itself
    assert ary[0] == big
    out = np.full(1, np.nan)
    round_to_f8[1, 1](out, np.finfo(np.float64).max, 12)
    assert out[0] == np.finfo(np.float64).max
    for val, nd in [(0.125, 2), (1234.5678, -2), (-0.5, 0), (0.7311, 3)]:
        round_to_f8[1, 1](out, val, nd)
        assert out[0] == round(val, nd), (val, nd)
    round_to_f8[1, 1](out, 0.12345678987654321e-14, 23)    # 10**23 split in two powers
    assert abs(out[0] - 1.2345679e-15) < 1e-29
    round_to_f8[1, 1](out, 2.675, 2)     # CPython's fallback, as Numba's: 267.49999999999997 -> 267.5 -> 268
    assert out[0] == 2.68


@cuda.jit
def atomic_extremes_with_nans(res, vals):
    i = cuda.threadIdx.x
    cuda.atomic.max(res, 0, vals[i])
    cuda.atomic.min(res, 1, vals[i])
    cuda.atomic.nanmax(res, 2, vals[i])
    cuda.atomic.nanmin(res, 3, vals[i])


def test_atomic_max_and_min_ignore_a_nan_value_and_keep_a_stored_nan(backend):
    vals = np.arange(32.0)
    vals[1::2] = np.nan
    res = np.array([-1.0, 100.0, -1.0, 100.0])
    atomic_extremes_with_nans[1, 32](res, vals)
    np.testing.assert_array_equal(res, [30.0, 0.0, 30.0, 0.0])
    res = np.full(4, np.nan)
    atomic_extremes_with_nans[1, 32](res, vals)
    np.testing.assert_array_equal(res, [np.nan, np.nan, 30.0, 0.0])


CONST_RECORDS = np.array([(1, 2, 3, 0xDEADBEEF, 8), (4, 5, 6, 0xBEEFDEAD, 10)],
                         dtype=np.dtype([("a", np.uint8), ("b", np.uint8), ("x", np.uint8),
                                         ("y", np.uint32), ("z", np.uint8)], align=True))
PLAIN_RECORDS = np.array([(1.5, 2), (3.5, -4)], dtype=[("x", float), ("y", int)])


@cuda.jit
def read_const_records(out):
    c = cuda.const.array_like(CONST_RECORDS)
    i = cuda.grid(1)
    if i < c.size:
        out[i, 0] = c[i]["a"] + c[i]["b"] + c[i].x
        out[i, 1] = c[i]["y"]
        out[i, 2] = c[i].z
        out[i, 3] = PLAIN_RECORDS[i].x + PLAIN_RECORDS[i]["y"]   # a global record array, frozen


def test_constant_arrays_of_records(backend):
    out = np.full((2, 4), -1.0)
    read_const_records[1, 32](out)
    r = CONST_RECORDS
    np.testing.assert_array_equal(out[:, 0], r["a"].astype(float) + r["b"] + r["x"])
    np.testing.assert_array_equal(out[:, 1], r["y"])
    np.testing.assert_array_equal(out[:, 2], r["z"])
    np.testing.assert_array_equal(out[:, 3], PLAIN_RECORDS["x"] + PLAIN_RECORDS["y"])


# ---- complex math of finite nonzero parts, and *args from a tuple --------------------------------------------
@cuda.jit(device=True)
def weigh3(a, b, c):
    return a + 10 * b + 100 * c


@cuda.jit
def cmath_all(z, out, polar_back):
    i = cuda.grid(1)
    if i < z.size:
        w = z[i]
        out[i, 0] = cmath.sqrt(w)
        out[i, 1] = cmath.exp(w)
        out[i, 2] = cmath.sin(w)
        out[i, 3] = cmath.cos(w)
        out[i, 4] = cmath.tan(w)
        out[i, 5] = cmath.sinh(w)
        out[i, 6] = cmath.cosh(w)
        out[i, 7] = cmath.tanh(w)
        out[i, 8] = cmath.asin(w)
        out[i, 9] = cmath.acos(w)
        out[i, 10] = cmath.atan(w)
        out[i, 11] = cmath.asinh(w)
        out[i, 12] = cmath.acosh(w)
        out[i, 13] = cmath.atanh(w)
        out[i, 14] = cmath.rect(w.real, w.imag)
        polar_back[i] = complex(*cmath.polar(w))
        t = (1.0, 2.0)
        polar_back[i] += weigh3(*t, 3.0) * 1j


def test_complex_functions_of_finite_values_as_cpython(backend):
    import itertools
    reals = [-0.5, 1.0, -3.5, math.pi, 0.25]
    z = np.array([complex(x, y) for x, y in itertools.product(reals, reals)])
    out = np.full((z.size, 15), np.nan, complex)
    back = np.full(z.size, np.nan, complex)
    cmath_all[1, 64](z, out, back)
    fns = [cmath.sqrt, cmath.exp, cmath.sin, cmath.cos, cmath.tan, cmath.sinh, cmath.cosh, cmath.tanh,
           cmath.asin, cmath.acos, cmath.atan, cmath.asinh, cmath.acosh, cmath.atanh]

    def same(a, b):   # CPython's value: equal, NaN for NaN, and zeros and infinities of the same sign
        for x, y in ((a.real, b.real), (a.imag, b.imag)):
            if math.isnan(y):
                assert math.isnan(x)
            elif x == 0 or math.isinf(y):
                assert x == y and math.copysign(1, x) == math.copysign(1, y)
            else:
                assert abs(x - y) <= 1e-12 * abs(y)

    for k, w in enumerate(z):
        for j, f in enumerate(fns):
            try:
                ref = f(w)
            except (ValueError, OverflowError):   # CPython raises where C gives the IEEE value
                continue
            try:
                same(out[k, j], ref)
            except AssertionError:
                raise AssertionError(f"{f.__name__}({w}) = {out[k, j]}, CPython gives {ref}") from None
        try:
            ref = cmath.rect(w.real, w.imag)
        except ValueError:
            ref = None
        if ref is not None:
            same(out[k, 14], ref)
        if np.isfinite(w):
            r, phi = cmath.polar(w)
            np.testing.assert_allclose(back[k], complex(r, phi + 321.0), rtol=1e-15)


# ---- records: a single record argument, whole records assigned, subarray fields assigned -------------
BODY = np.dtype([("a", np.float64), ("b", np.int32), ("c", np.complex64), ("v", np.float32, 3)])
BODY_SHUFFLED = np.dtype({"names": ["a", "b", "c", "v"],
                              "formats": [np.float64, np.int32, np.complex64, (np.float32, 3)],
                              "offsets": [24, 0, 4, 12], "itemsize": 40})


@cuda.jit
def update_one_record(r, v, out):
    r.a = v
    r["b"] = 7
    r.v[1] = r.a * 2
    out[0] = r[0] + r.b        # r[0]: the first field, as NumPy's
    r.v = out[1:]              # an array into a subarray field


@cuda.jit
def copy_records(dst, src, shuffled):
    i = cuda.grid(1)
    if i < src.size - 1:
        dst[i] = src[i + 1]            # the whole record
        tmp = cuda.local.array(1, dtype=BODY)
        tmp[0] = src[i]
        shuffled[i] = tmp[0]           # between layouts: field by field
        shuffled[i].v = src[i].v


def test_single_record_arguments_and_whole_record_assignment(backend):
    arr = np.zeros(3, BODY)
    out = np.array([-1.0, 4.0, 5.0, 6.0])
    update_one_record[1, 1](arr[1], 1.5, out)      # arr[1] is a view: the kernel's writes land in arr
    assert out[0] == 8.5
    np.testing.assert_array_equal(arr["a"], [0, 1.5, 0])
    np.testing.assert_array_equal(arr["b"], [0, 7, 0])
    np.testing.assert_array_equal(arr["v"][1], [4, 5, 6])
    np.testing.assert_array_equal(arr["v"][0], [0, 0, 0])

    src = np.zeros(4, BODY)
    src["a"] = np.arange(4) + 0.5
    src["b"] = -np.arange(4)
    src["c"] = np.arange(4) * 1j
    src["v"] = np.arange(12).reshape(4, 3)
    dst = np.zeros(4, BODY)
    dst["a"] = np.nan
    shuffled = np.zeros(4, BODY_SHUFFLED)
    copy_records[1, 32](dst, src, shuffled)
    for name in BODY.names:
        np.testing.assert_array_equal(dst[name][:3], src[name][1:])
        np.testing.assert_array_equal(shuffled[name][:3], src[name][:3])
    assert np.isnan(dst["a"][3]) and shuffled["b"][3] == 0


# ---- debug mode: Numba's Python error model ------------------------------------------------------------
def divide_and_index(r, x, y, n):
    i = cuda.threadIdx.x
    r[i, 0] = y[i] / x[i] if x[i] != 0 else -1.0    # a guarded division never raises
    r[i, 1] = y[i] / x[i]
    r[i, 2] = n // int(x[i])
    r[i, 3] = x.shape[-i]                           # a tuple index past the end


def test_debug_mode_raises_zero_division_and_tuple_index_errors(backend):
    plain, checked = cuda.jit(divide_and_index), cuda.jit(debug=True)(divide_and_index)
    r = np.full((2, 4), np.nan)
    plain[1, 1](r, np.zeros(2), np.ones(2), 7)        # NumPy's error model: IEEE results, no error
    np.testing.assert_array_equal(r[0], [-1.0, np.inf, 0.0, 2.0])
    r = np.full((2, 4), np.nan)
    with pytest.raises(ZeroDivisionError, match=r"kernel 'divide_and_index'.*:\d+\), in thread \(0, 0, 0\).*: "
                                                r"division by zero"):
        checked[1, 1](r, np.zeros(2), np.ones(2), 7)
    assert r[0, 0] == -1.0 and np.isnan(r[0, 1:]).all()   # the thread stopped at the division
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        checked[1, 1](r, np.array([0.5, 1.0]), np.ones(2), 7)
    r = np.full((2, 4), np.nan)
    checked[1, 2](r, np.array([2.0, 3.0]), np.ones(2), 7)   # x.shape[-1] is in range
    np.testing.assert_array_equal(r[:, 3], [2.0, 2.0])
    with pytest.raises(IndexError, match=r"in thread \(2, 0, 0\).*tuple index out of range"):
        checked[1, 3](np.zeros((3, 4)), np.array([2.0, 3.0, 4.0]), np.ones(3), 7)   # thread 2: x.shape[-2]


# ---- array.view(dtype) in kernels ------------------------------------------------------------------------
def reinterpret_bytes(byte_arr, out, halves):
    i = cuda.grid(1)
    if i < byte_arr.size // 4:
        out[i] = byte_arr[4 * i:4 * i + 4].view(np.int32)[0]     # four bytes as one int32
    if i == 0:
        f = halves.view(np.uint16)                                # float16 bits, same item size
        for k in range(f.size):
            f[k] = f[k] ^ 0x8000                                  # flip the sign bits
        loc = cuda.local.array(2, numba.uint32)
        loc[0] = 0x3F800000
        out[out.size - 1] = np.int32(loc.view(np.float32)[0] * 3)    # 1.0f from its bits


def test_array_view_reinterprets_the_bytes(backend):
    byte_arr = np.arange(64, dtype=np.uint8)
    out = np.full(17, -1, np.int32)
    halves = np.array([1.5, -2.0, 0.25], np.float16)
    cuda.jit(reinterpret_bytes)[1, 32](byte_arr, out, halves)
    np.testing.assert_array_equal(out[:16], byte_arr.view(np.int32))
    assert out[16] == 3
    np.testing.assert_array_equal(halves, [-1.5, 2.0, -0.25])
    with pytest.raises(ValueError, match="last axis must be contiguous"):
        cuda.jit(debug=True)(reinterpret_bytes)[1, 1](byte_arr[::2], out, halves)


@cuda.jit(debug=True)
def index_views_checked(x, z, out):
    # views of two or more axes indexed in debug mode (each index checked)
    out[0] = x.T[1, 0] + x.transpose()[2, 1] + x[0:2, 1:3][1, 1] + x.T[::-1, :][0, 1]
    out[1] = z.imag[3] + z.view(np.float64)[1]


def test_views_indexed_in_debug_mode(backend):
    x = np.arange(6.0).reshape(2, 3)
    z = np.arange(6) * (1 + 2j)
    out = np.full(2, np.nan)
    index_views_checked[1, 1](x, z, out)
    assert out[0] == x.T[1, 0] + x.T[2, 1] + x[0:2, 1:3][1, 1] + x.T[::-1, :][0, 1]
    assert out[1] == z.imag[3] + z.view(np.float64)[1]


# ---- enums: members as constants -------------------------------------------------------------------------
class Color(enum.Enum):
    red = 1
    green = 2


class Status(enum.IntEnum):
    ok = 200
    not_found = 404


@cuda.jit
def enum_constants(x, out):
    i = cuda.grid(1)
    if i < x.size:
        same = Color["red"] == Color.red and Color.red != Color.green
        out[i] = x[i] - Status.not_found if x[i] > Status["ok"] else x[i] + Status.ok
        if not same:
            out[i] = -1


def test_enum_members_are_constants(backend):
    x = np.array([100, 300, 500])
    out = np.zeros(3, np.int64)
    enum_constants[1, 32](x, out)
    np.testing.assert_array_equal(out, [300, -104, 96])
