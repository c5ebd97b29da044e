"""ts.fft against numpy.fft (computed in float64/complex128) on fresh random inputs. Every body
runs on cpu and cuda (cuda skips without a GPU). Tolerance: the error relative to the largest
output magnitude, 2e-6 * log2(n) for complex64/float32 and 1e-13 * log2(n) for 64-bit types."""
import math

import numpy as np
import pytest

import tessel as ts
from conftest import GPU, random_array

LENGTHS = [1, 2, 7, 8, 12, 17, 64, 101, 360, 1000, 1024]
COMPLEX = {"complex64": "complex64", "complex128": "complex128"}
REAL = {"float32": "complex64", "float64": "complex128"}


def tol_for(dtype, n):
    base = 2e-6 if dtype in ("complex64", "float32") else 1e-13
    return base * max(1.0, math.log2(max(n, 2)))


def check(got, want, dtype, n=None):
    """Shape, dtype and values; `dtype` is the expected result dtype."""
    g = np.asarray(got)
    assert g.shape == want.shape, f"shape {g.shape} != {want.shape}"
    assert g.dtype == np.dtype(dtype), f"dtype {g.dtype} != {dtype}"
    scale = max(np.max(np.abs(want)) if want.size else 0.0, 1e-30)
    err = np.max(np.abs(g.astype(np.complex128) - want)) if want.size else 0.0
    tol = tol_for(dtype, n if n is not None else max(want.shape or (1,)))
    assert err <= tol * scale, f"max error / max |ref| = {err / scale:.3g} > {tol:.3g}"


def real_of(dtype):
    return {"complex64": "float32", "complex128": "float64"}[dtype]


@pytest.mark.parametrize("dtype", list(COMPLEX))
@pytest.mark.parametrize("n", LENGTHS)
def test_fft_ifft_lengths(device, rng, dtype, n):
    x_np = random_array(rng, (3, n), dtype)
    x = ts.asarray(x_np, device=device)
    ref = x_np.astype(np.complex128)
    check(ts.fft.fft(x), np.fft.fft(ref), dtype)
    check(ts.fft.ifft(x), np.fft.ifft(ref), dtype)
    check(ts.fft.ifft(ts.fft.fft(x)), ref, dtype)  # round trip


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", list(COMPLEX))
def test_fft_norms_n_and_axis(device, rng, dtype, norm):
    x_np = random_array(rng, (6, 10, 9), dtype)
    x = ts.asarray(x_np, device=device)
    ref = x_np.astype(np.complex128)
    for fn in ["fft", "ifft"]:
        f, nf = getattr(ts.fft, fn), getattr(np.fft, fn)
        for n, axis in [(None, -1), (None, 0), (5, 1), (16, -2), (9, 2), (1, 0), (13, -3)]:
            check(f(x, n=n, axis=axis, norm=norm), nf(ref, n=n, axis=axis, norm=norm), dtype, n)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", list(REAL))
@pytest.mark.parametrize("n", [1, 2, 7, 8, 15, 16, 101, 1000])
def test_real_transforms_odd_and_even(device, rng, dtype, norm, n):
    cdtype = REAL[dtype]
    x_np = random_array(rng, (4, n), dtype)
    x = ts.asarray(x_np, device=device)
    ref = x_np.astype(np.float64)
    X = ts.fft.rfft(x, norm=norm)
    check(X, np.fft.rfft(ref, norm=norm), cdtype, n)
    check(ts.fft.irfft(X, n=n, norm=norm), ref, dtype, n)  # round trip with the original (odd or even) n
    spec_np = random_array(rng, (4, n // 2 + 1), cdtype)
    spec = ts.asarray(spec_np, device=device)
    spec_ref = spec_np.astype(np.complex128)
    if n > 1:
        check(ts.fft.irfft(spec, norm=norm), np.fft.irfft(spec_ref, norm=norm), dtype, n)
    check(ts.fft.irfft(spec, n=n, norm=norm), np.fft.irfft(spec_ref, n=n, norm=norm), dtype, n)
    check(ts.fft.hfft(spec, n=n, norm=norm), np.fft.hfft(spec_ref, n=n, norm=norm), dtype, n)
    check(ts.fft.ihfft(x, norm=norm), np.fft.ihfft(ref, norm=norm), cdtype, n)
    check(ts.fft.rfft(x, n=n + 3, axis=-1, norm=norm), np.fft.rfft(ref, n=n + 3, norm=norm), cdtype, n)
    if n > 2:
        check(ts.fft.rfft(x, n=n - 1, norm=norm), np.fft.rfft(ref, n=n - 1, norm=norm), cdtype, n)
    check(ts.fft.rfft(x, axis=0, norm=norm), np.fft.rfft(ref, axis=0, norm=norm), cdtype, n)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_nd_transforms(device, rng, norm):
    x_np = random_array(rng, (4, 6, 5), "complex128")
    r_np = random_array(rng, (4, 6, 5), "float64")
    x, r = ts.asarray(x_np, device=device), ts.asarray(r_np, device=device)
    for s, axes in [(None, None), ((3, 8), None), (None, (0, 2)), ((7, 4), (2, 0)), ((5,), (1,)), (None, (-1,))]:
        # tessel (Array API): s without axes means the last len(s) axes; NumPy 2 wants them spelled out
        np_axes = tuple(range(-len(s), 0)) if s is not None and axes is None else axes
        check(ts.fft.fftn(x, s=s, axes=axes, norm=norm), np.fft.fftn(x_np, s=s, axes=np_axes, norm=norm), "complex128")
        check(ts.fft.ifftn(x, s=s, axes=axes, norm=norm), np.fft.ifftn(x_np, s=s, axes=np_axes, norm=norm), "complex128")
        check(ts.fft.rfftn(r, s=s, axes=axes, norm=norm), np.fft.rfftn(r_np, s=s, axes=np_axes, norm=norm), "complex128")
        check(ts.fft.irfftn(x, s=s, axes=axes, norm=norm), np.fft.irfftn(x_np, s=s, axes=np_axes, norm=norm), "float64")
    for s, axes in [(None, (-2, -1)), ((3, 9), (-2, -1)), (None, (0, 1)), ((4, 7), (2, 0))]:
        check(ts.fft.fft2(x, s=s, axes=axes, norm=norm), np.fft.fft2(x_np, s=s, axes=axes, norm=norm), "complex128")
        check(ts.fft.ifft2(x, s=s, axes=axes, norm=norm), np.fft.ifft2(x_np, s=s, axes=axes, norm=norm), "complex128")
        check(ts.fft.rfft2(r, s=s, axes=axes, norm=norm), np.fft.rfft2(r_np, s=s, axes=axes, norm=norm), "complex128")
        check(ts.fft.irfft2(x, s=s, axes=axes, norm=norm), np.fft.irfft2(x_np, s=s, axes=axes, norm=norm), "float64")
    check(ts.fft.fft2(x), np.fft.fft2(x_np), "complex128")
    check(ts.fft.irfftn(ts.fft.rfftn(r), s=r.shape), r_np.astype(np.complex128), "float64")
    check(ts.fft.irfftn(ts.fft.rfftn(r, axes=(0, 1)), s=(4, 6), axes=(0, 1)), r_np.astype(np.complex128), "float64")  # round trip


def test_float32_nd_and_integer_inputs(device, rng):
    x_np = random_array(rng, (8, 12), "complex64")
    check(ts.fft.fftn(ts.asarray(x_np, device=device)), np.fft.fftn(x_np.astype(np.complex128)), "complex64")
    r_np = random_array(rng, (8, 12), "float32")
    check(ts.fft.rfft2(ts.asarray(r_np, device=device)), np.fft.rfft2(r_np.astype(np.float64)), "complex64")
    i_np = rng.integers(-50, 50, size=(5, 16)).astype(np.int32)
    i = ts.asarray(i_np, device=device)
    check(ts.fft.fft(i), np.fft.fft(i_np.astype(np.float64)), "complex128")  # integers cast as NumPy does
    check(ts.fft.rfft(i), np.fft.rfft(i_np.astype(np.float64)), "complex128")
    check(ts.fft.fft(np.asarray(x_np)), np.fft.fft(x_np.astype(np.complex128)), "complex64")  # NumPy input


def test_non_contiguous_and_batched_inputs(device, rng):
    big_np = random_array(rng, (10, 24, 18), "complex64")
    big = ts.asarray(big_np, device=device)
    ref = big_np.astype(np.complex128)
    views = [
        (big[:, ::2, 3:15], ref[:, ::2, 3:15]),
        (big.mT, np.swapaxes(ref, -1, -2)),
        (big[::-1, :, ::-3], ref[::-1, :, ::-3]),
        (ts.permute_dims(big, (2, 0, 1)), np.transpose(ref, (2, 0, 1))),
    ]
    for v, r in views:
        for axis in [-1, 0, 1]:
            check(ts.fft.fft(v, axis=axis), np.fft.fft(r, axis=axis), "complex64")
        check(ts.fft.fftn(v, axes=(0, 2)), np.fft.fftn(r, axes=(0, 2)), "complex64")
    rv = ts.real(big)[:, 1:20:3, ::-1]
    rv_ref = ref.real[:, 1:20:3, ::-1]
    check(ts.fft.rfft(rv, axis=1), np.fft.rfft(rv_ref, axis=1), "complex64")
    check(ts.fft.irfft(ts.fft.rfft(rv, axis=0), n=10, axis=0), rv_ref, "float32")


# Odd lengths: primes (Bluestein), 2^k 3^m 5^n and products with 7, 11, 13.
@pytest.mark.parametrize("dtype", list(COMPLEX))
@pytest.mark.parametrize("n", [13, 97, 251, 1021, 4099, 243, 625, 2**3 * 3**2 * 5, 2**4 * 3**3 * 5**2,
                               7 * 11 * 13, 2 * 3 * 5 * 7 * 11, 4097])
def test_odd_lengths(device, rng, dtype, n):
    x_np = random_array(rng, (2, n), dtype)
    x = ts.asarray(x_np, device=device)
    ref = x_np.astype(np.complex128)
    check(ts.fft.fft(x), np.fft.fft(ref), dtype, n)
    check(ts.fft.ifft(x), np.fft.ifft(ref), dtype, n)
    check(ts.fft.rfft(ts.real(x)), np.fft.rfft(ref.real), dtype, n)
    check(ts.fft.irfft(x, n=n), np.fft.irfft(ref, n=n), real_of(dtype), n)


# Long rows: the CPU splits one long complex row over its threads (four-step), a batch of few
# long rows row after row, and a strided one (a column of a matrix, a step-2 view).
@pytest.mark.parametrize("dtype", list(COMPLEX))
def test_long_rows_batched_and_strided(device, rng, dtype):
    for shape in [(2**20,), (3 * 5 * 7 * 11 * 13 * 17,), (3, 3 * 2**15), (1000003,)]:
        x_np = random_array(rng, shape, dtype)
        x = ts.asarray(x_np, device=device)
        ref = x_np.astype(np.complex128)
        n = shape[-1]
        check(ts.fft.fft(x), np.fft.fft(ref), dtype, n)
        check(ts.fft.ifft(x, norm="ortho"), np.fft.ifft(ref, norm="ortho"), dtype, n)
    m_np = random_array(rng, (2**16, 3), dtype)
    m = ts.asarray(m_np, device=device)
    ref = m_np.astype(np.complex128)
    check(ts.fft.fft(m, axis=0), np.fft.fft(ref, axis=0), dtype, 2**16)
    check(ts.fft.fft(m[::2], axis=0), np.fft.fft(ref[::2], axis=0), dtype, 2**15)
    check(ts.fft.rfft(ts.real(m), axis=0), np.fft.rfft(ref.real, axis=0), dtype, 2**16)


def test_fftfreq_and_shift(device, rng):
    for n in [1, 2, 7, 8, 101]:
        for d in [1.0, 0.25]:
            f = ts.fft.fftfreq(n, d=d, device=device)
            assert f.device == device
            check(f, np.fft.fftfreq(n, d=d), "float32")  # the default real floating dtype
            check(ts.fft.fftfreq(n, d=d, dtype=ts.float64, device=device), np.fft.fftfreq(n, d=d), "float64")
            check(ts.fft.rfftfreq(n, d=d, device=device), np.fft.rfftfreq(n, d=d), "float32")
            check(ts.fft.rfftfreq(n, d=d, dtype="float64", device=device), np.fft.rfftfreq(n, d=d), "float64")
    x_np = random_array(rng, (5, 8, 7), "float64")
    x = ts.asarray(x_np, device=device)
    for axes in [None, 0, -1, (0, 2), [1]]:
        np.testing.assert_array_equal(np.asarray(ts.fft.fftshift(x, axes=axes)), np.fft.fftshift(x_np, axes=axes))
        np.testing.assert_array_equal(np.asarray(ts.fft.ifftshift(x, axes=axes)), np.fft.ifftshift(x_np, axes=axes))
    np.testing.assert_array_equal(np.asarray(ts.fft.ifftshift(ts.fft.fftshift(x))), x_np)


def test_fft_errors(device, rng):
    x = ts.asarray(random_array(rng, (4, 8), "complex64"), device=device)
    r = ts.asarray(random_array(rng, (4, 8), "float32"), device=device)
    for bad_n in [0, -3]:
        with pytest.raises(ValueError, match="fft"):
            ts.fft.fft(x, n=bad_n)
        with pytest.raises(ValueError):
            ts.fft.irfft(x, n=bad_n)
        with pytest.raises(ValueError):
            ts.fft.fftn(x, s=(bad_n, 4))
    for bad_axis in [2, -3]:
        with pytest.raises(IndexError):
            ts.fft.fft(x, axis=bad_axis)
        with pytest.raises(IndexError):
            ts.fft.fftn(x, axes=(0, bad_axis))
    empty = ts.zeros((4, 0), dtype=ts.complex64, device=device)
    with pytest.raises(ValueError, match="empty|0"):
        ts.fft.fft(empty)
    with pytest.raises(ValueError, match="empty|0"):
        ts.fft.rfft(ts.zeros((0, 3), device=device), axis=0)
    with pytest.raises(ValueError, match="s"):
        ts.fft.fftn(x, s=(4, 8), axes=(1,))
    with pytest.raises(ValueError, match="norm"):
        ts.fft.fft(x, norm="unitary")
    with pytest.raises(ts.DTypeError):
        ts.fft.rfft(x)
    with pytest.raises(TypeError):
        ts.fft.fft(x, 8)  # n is keyword-only (Array API)
    with pytest.raises(TypeError):
        ts.fft.fft(x, length=8)
    with pytest.raises(TypeError):
        ts.fft.fft(object())
    with pytest.raises(ValueError, match="layout|shape"):
        ts.fft.Plan(x, "fft").execute(ts.zeros((4, 9), dtype=ts.complex64, device=device))
    with pytest.raises(ValueError, match="transform|rfft"):
        ts.fft.Plan(x, "dct")
    assert r.shape == (4, 8)


@pytest.mark.parametrize("dtype", list(COMPLEX))
def test_fft_plan(device, rng, dtype):
    x_np = random_array(rng, (5, 64), dtype)
    x = ts.asarray(x_np, device=device)
    plan = ts.fft.Plan(x, "fft")
    assert plan.transform == "fft" and "(5, 64)" in plan.layout and "fft.Plan(" in repr(plan)
    for _ in range(3):  # new data, same layout
        y_np = random_array(rng, (5, 64), dtype)
        y = ts.asarray(y_np, device=device)
        check(plan.execute(y), np.fft.fftn(y_np.astype(np.complex128)), dtype)  # default: all axes
        check(plan(y), np.fft.fftn(y_np.astype(np.complex128)), dtype)
    last = ts.fft.Plan(x, "fft", axes=(-1,))
    check(last.execute(x), np.fft.fft(x_np.astype(np.complex128)), dtype)
    inv = ts.fft.Plan(x, "ifft", axes=(0,), norm="ortho")
    check(inv.execute(x), np.fft.ifft(x_np.astype(np.complex128), axis=0, norm="ortho"), dtype)
    r_np = random_array(rng, (5, 64), real_of(dtype))
    r = ts.asarray(r_np, device=device)
    rp = ts.fft.Plan(r, "rfft", s=(5, 40), axes=(0, 1))
    check(rp.execute(r), np.fft.rfftn(r_np.astype(np.float64), s=(5, 40), axes=(0, 1)), dtype)
    spec = ts.fft.rfft(r)
    ip = ts.fft.Plan(spec, "irfft", s=(64,), axes=(-1,))
    check(ip.execute(spec), r_np.astype(np.float64), real_of(dtype))
    with pytest.raises(ValueError, match=r"strides \(64, 1\).*strides \(1, 5\)"):
        plan.execute(x.mT.copy().mT)  # same shape, other strides
    info = ts.fft.plan_cache_info(device)
    assert set(info) == {"plans", "max_plans", "workspace_bytes", "max_workspace_bytes", "hits", "misses", "evictions"}


def test_fft_cuda_plan_cache_and_cpu_agreement(rng):
    if not ts.cuda_available():
        pytest.skip(f"CUDA unavailable: {ts.cuda_unavailable_reason()}")
    dev = ts.Device(GPU)
    x_np = random_array(rng, (16, 8192), "complex64")
    g = ts.fft.fft(ts.asarray(x_np, device=dev))
    c = ts.fft.fft(ts.asarray(x_np, device="cpu"))
    check(g, np.asarray(c).astype(np.complex128), "complex64", 8192)
    before = ts.fft.plan_cache_info(dev)
    ts.fft.fft(ts.asarray(x_np, device=dev))
    after = ts.fft.plan_cache_info(dev)
    assert after["hits"] > before["hits"] and after["plans"] >= 1
    ts.fft.set_plan_cache_limits(1, 1 << 30, dev)
    assert ts.fft.plan_cache_info(dev)["max_plans"] == 1
    ts.fft.clear_plan_cache(dev)
    assert ts.fft.plan_cache_info(dev)["plans"] == 0
    ts.fft.set_plan_cache_limits(64, 1 << 30, dev)


def test_fft_is_a_native_function():
    # The hot path is the binding itself (no Python frame between ts.fft.fft and C++).
    assert type(ts.fft.fft).__name__ == "nb_func"
    assert ts.fft.fft is ts._tessel._fft.fft


def test_stubs_cover_the_new_functions():
    import ast
    import os

    root = os.path.dirname(ts.__file__)

    def names(stub):
        tree = ast.parse(open(os.path.join(root, stub)).read())
        return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}

    assert set(ts.fft.__all__) <= names("fft.pyi")
    assert set(ts.linalg.__all__) - {"matmul", "vecdot"} <= names("linalg.pyi")
    assert {"matmul", "vecdot", "Matmul", "MatmulCandidate", "matrix_transpose", "tensordot",
            "__matmul__", "__rmatmul__", "__imatmul__"} <= names("__init__.pyi")
