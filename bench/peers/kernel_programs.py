"""The kernels of bench/peers/python_kernels.py, written once in Numba's dialect and built for a
kernel module: `build(cuda, jit)` with (numba.cuda, numba.cuda.jit), (tessel.kernel, tessel.jit)
or (tessel.numba.cuda, tessel.numba.cuda.jit). The same source runs on every one of them."""
import numpy as np

TPB = 16          # tile of the shared-memory matmul
SUM_THREADS = 256  # block of the shuffle sum


def build(cuda, jit):
    @jit
    def vector_add(x, y, out, n):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, n, stride):
            out[i] = x[i] + y[i]

    @jit
    def tiny(x, y, out, a):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a * x[i] + y[i]

    @jit
    def matmul(A, B, C):
        sA = cuda.shared.array(shape=(TPB, TPB), dtype=np.float32)
        sB = cuda.shared.array(shape=(TPB, TPB), dtype=np.float32)
        x, y = cuda.grid(2)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        acc = np.float32(0.0)
        for t in range((A.shape[1] + TPB - 1) // TPB):
            if y < A.shape[0] and t * TPB + tx < A.shape[1]:
                sA[ty, tx] = A[y, t * TPB + tx]
            else:
                sA[ty, tx] = 0
            if x < B.shape[1] and t * TPB + ty < B.shape[0]:
                sB[ty, tx] = B[t * TPB + ty, x]
            else:
                sB[ty, tx] = 0
            cuda.syncthreads()
            for k in range(TPB):
                acc += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = acc

    @jit
    def shuffle_sum(x, out):
        partial = cuda.shared.array(32, np.float32)
        v = np.float32(0.0)
        for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
            v += x[i]
        off = 16
        while off > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
            off //= 2
        lane = cuda.threadIdx.x % 32
        w = cuda.threadIdx.x // 32
        if lane == 0:
            partial[w] = v
        cuda.syncthreads()
        if w == 0:
            v = partial[lane] if lane < SUM_THREADS // 32 else np.float32(0.0)
            off = 16
            while off > 0:
                v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
                off //= 2
            if lane == 0:
                cuda.atomic.add(out, 0, v)

    @jit
    def histogram(x, counts):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, x.shape[0], stride):
            b = int(x[i] * 256.0)
            if b > 255:
                b = 255
            cuda.atomic.add(counts, b, 1)

    return {"vector_add": vector_add, "tiny": tiny, "matmul": matmul, "shuffle_sum": shuffle_sum,
            "histogram": histogram}


def build_cupy():
    """The same algorithms in CuPy's cupyx.jit dialect (1-d shared arrays, jit.* names)."""
    import cupy
    from cupyx import jit

    @jit.rawkernel()
    def vector_add(x, y, out, n):
        start = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
        stride = jit.gridDim.x * jit.blockDim.x
        for i in range(start, n, stride):
            out[i] = x[i] + y[i]

    @jit.rawkernel()
    def tiny(x, y, out, a):
        i = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
        if i < out.size:
            out[i] = a * x[i] + y[i]

    @jit.rawkernel()
    def matmul(A, B, C, m, k, n):
        sA = jit.shared_memory(cupy.float32, TPB * TPB)
        sB = jit.shared_memory(cupy.float32, TPB * TPB)
        # cupyx.jit types thread indices uint32 and Python ints int32, and will not compare the two
        tx = cupy.int32(jit.threadIdx.x)
        ty = cupy.int32(jit.threadIdx.y)
        x = cupy.int32(jit.blockIdx.x) * TPB + tx
        y = cupy.int32(jit.blockIdx.y) * TPB + ty
        acc = cupy.float32(0)
        for t in range((k + TPB - 1) // TPB):
            if y < m and t * TPB + tx < k:
                sA[ty * TPB + tx] = A[y * k + t * TPB + tx]
            else:
                sA[ty * TPB + tx] = cupy.float32(0)
            if x < n and t * TPB + ty < k:
                sB[ty * TPB + tx] = B[(t * TPB + ty) * n + x]
            else:
                sB[ty * TPB + tx] = cupy.float32(0)
            jit.syncthreads()
            for j in range(TPB):
                acc += sA[ty * TPB + j] * sB[j * TPB + tx]
            jit.syncthreads()
        if y < m and x < n:
            C[y * n + x] = acc

    @jit.rawkernel()
    def shuffle_sum(x, out, n):
        partial = jit.shared_memory(cupy.float32, 32)
        v = cupy.float32(0)
        start = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
        stride = jit.gridDim.x * jit.blockDim.x
        for i in range(start, n, stride):
            v += x[i]
        off = 16
        while off > 0:
            v += jit.shfl_down_sync(0xFFFFFFFF, v, off)
            off //= 2
        lane = cupy.int32(jit.threadIdx.x) % 32
        w = cupy.int32(jit.threadIdx.x) // 32
        if lane == 0:
            partial[w] = v
        jit.syncthreads()
        if w == 0:
            v = partial[lane] if lane < SUM_THREADS // 32 else cupy.float32(0)
            off = 16
            while off > 0:
                v += jit.shfl_down_sync(0xFFFFFFFF, v, off)
                off //= 2
            if lane == 0:
                jit.atomic_add(out, 0, v)

    @jit.rawkernel()
    def histogram(x, counts, n):
        start = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
        stride = jit.gridDim.x * jit.blockDim.x
        for i in range(start, n, stride):
            b = int(x[i] * 256.0)
            if b > 255:
                b = 255
            jit.atomic_add(counts, b, 1)

    return {"vector_add": vector_add, "tiny": tiny, "matmul": matmul, "shuffle_sum": shuffle_sum,
            "histogram": histogram}
