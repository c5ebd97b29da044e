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
import math
import sys

import numpy as np
import pytest

# ---- the only lines that differ from the Numba programs -------------------------------------------
import tessel.numba as numba
from tessel.numba import cuda, float32, guvectorize, int32, vectorize
from tessel.numba.cuda.random import (create_xoroshiro128p_states, xoroshiro128p_normal_float32,
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
                             ("tessel.numba.cuda.extending", "extension API"), ("tessel.numba.core.types", "numba.core")):
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
