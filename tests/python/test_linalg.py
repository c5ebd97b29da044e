"""ts.linalg against numpy.linalg (float64/complex128 references) on fresh random inputs. Every
body runs on cpu and each test GPU (skipped without one). Factorizations are checked by
reconstruction (L @ L^H, Q @ R, U @ diag(S) @ Vh, A @ v = lambda v); tolerances are the dtype's
epsilon times the matrix order times the condition number of the input."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tessel as ts
from conftest import random_array

DTYPES = ["float32", "float64", "complex64", "complex128"]
REAL_OF = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}


def eps(dtype):
    return float(np.finfo(np.dtype(REAL_OF[dtype])).eps)


def H(a):
    return np.conj(np.swapaxes(a, -1, -2))


def tol(dtype, n, cond=1.0):
    return 50 * eps(dtype) * max(n, 1) * cond


def close(got, want, dtype, n, cond=1.0):
    got = np.asarray(got).astype(np.complex128)
    want = np.asarray(want).astype(np.complex128)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.size == 0:
        return
    scale = max(float(np.max(np.abs(want))), 1.0)
    err = float(np.max(np.abs(got - want)))
    assert err <= tol(dtype, n, cond) * scale, f"max error {err:.3g} > {tol(dtype, n, cond) * scale:.3g}"


def general(rng, shape, dtype, cond=None):
    """Random matrices; with cond, each has exactly that 2-norm condition number."""
    a = random_array(rng, shape, dtype)
    if cond is None:
        return a
    m, n = shape[-2], shape[-1]
    u, _, vh = np.linalg.svd(a.astype(np.complex128 if "complex" in dtype else np.float64), full_matrices=False)
    k = min(m, n)
    s = np.logspace(0, -math.log10(cond), k)
    return (u * s[..., None, :]) @ vh if k else a


def hermitian(rng, shape, dtype):
    a = random_array(rng, shape, dtype)
    return ((a + H(a)) / 2).astype(dtype)


def spd(rng, shape, dtype):
    a = random_array(rng, shape, dtype)
    n = shape[-1]
    return (a @ H(a) + n * np.eye(n)).astype(dtype)


def on(device, a):
    return ts.asarray(a, device=device)


SQUARE_SHAPES = [(1, 1), (5, 5), (3, 8, 8), (2, 3, 4, 4), (40, 40), (2, 36, 36)]


# ---- Cholesky ----
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", SQUARE_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_reconstructs(device, rng, dtype, shape, upper):
    a = spd(rng, shape, dtype)
    f = ts.linalg.cholesky(on(device, a), upper=upper)
    got = np.asarray(f)
    assert got.dtype == np.dtype(dtype)
    n = shape[-1]
    tri = np.triu(got, 1) if not upper else np.tril(got, -1)
    assert np.all(tri == 0), "the other triangle must be zero"
    rebuilt = got @ H(got) if not upper else H(got) @ got
    close(rebuilt, a, dtype, n)
    ref = np.linalg.cholesky(a.astype(np.complex128 if "complex" in dtype else np.float64))
    close(got, H(ref) if upper else ref, dtype, n, cond=10)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_cholesky_reads_one_triangle(device, rng, dtype):
    a = spd(rng, (2, 6, 6), dtype)
    garbage = random_array(rng, (2, 6, 6), dtype) * 1e3
    want = np.linalg.cholesky(a)
    lower_only = np.tril(a) + np.triu(garbage, 1)
    close(ts.linalg.cholesky(on(device, lower_only)), want, dtype, 6, 10)
    upper_only = np.triu(a) + np.tril(garbage, -1)
    close(ts.linalg.cholesky(on(device, upper_only), upper=True), H(want), dtype, 6, 10)


# Order 70 is above tessel's kernels and potrfBatched: on CUDA each matrix goes through Xpotrf,
# which factors LOWER (an upper request runs through two conjugate transposes).
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(70, 70), (2, 70, 70)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_one_matrix_at_a_time(device, rng, dtype, shape, upper):
    a = spd(rng, shape, dtype)
    garbage = random_array(rng, shape, dtype) * 1e3
    x = np.triu(a) + np.tril(garbage, -1) if upper else np.tril(a) + np.triu(garbage, 1)
    got = np.asarray(ts.linalg.cholesky(on(device, x), upper=upper))
    n = shape[-1]
    assert np.all((np.tril(got, -1) if upper else np.triu(got, 1)) == 0), "the other triangle must be zero"
    close(H(got) @ got if upper else got @ H(got), a, dtype, n)
    ref = np.linalg.cholesky(a.astype(np.complex128 if "complex" in dtype else np.float64))
    close(got, H(ref) if upper else ref, dtype, n, cond=10)
    bad = a.copy()
    bad[..., :, :] = -np.eye(n)
    _, info = ts.linalg.cholesky_ex(on(device, bad), upper=upper)
    assert np.all(np.asarray(info) == 1)


def test_cholesky_not_positive_definite_names_the_batch_index(device, rng):
    a = spd(rng, (2, 3, 4, 4), "float64")
    a[1, 2] = -np.eye(4)
    with pytest.raises(ts.linalg.LinAlgError, match=r"cholesky: the matrix at batch index \(1, 2\) is not positive definite") as e:
        ts.linalg.cholesky(on(device, a))
    assert e.value.batch_index == 5
    assert isinstance(e.value, ValueError) and isinstance(e.value, ts.TesselError)
    factor, info = ts.linalg.cholesky_ex(on(device, a))
    assert info.device == device and info.dtype == ts.int32 and info.shape == (2, 3)
    expect = np.zeros((2, 3), np.int32)
    expect[1, 2] = 1
    np.testing.assert_array_equal(np.asarray(info), expect)


# ---- inv / solve ----
@pytest.mark.parametrize("cond", [None, 1e3])
@pytest.mark.parametrize("shape", SQUARE_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_inv(device, rng, dtype, shape, cond):
    a = general(rng, shape, dtype, cond).astype(dtype)
    n = shape[-1]
    c = float(np.max(np.linalg.cond(a.astype(np.complex128)))) if a.size else 1.0
    got = ts.linalg.inv(on(device, a))
    assert got.dtype == getattr(ts, dtype)
    close(a.astype(np.complex128) @ np.asarray(got), np.broadcast_to(np.eye(n), a.shape), dtype, n, c)
    close(got, np.linalg.inv(a.astype(np.complex128)), dtype, n, c * c)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_matrix_vector_and_broadcasting(device, rng, dtype):
    ref_dtype = np.complex128 if "complex" in dtype else np.float64
    cases = [((4, 4), (4, 3)), ((3, 5, 5), (3, 5, 2)), ((2, 1, 4, 4), (3, 4, 2)), ((4, 4), (6, 4, 1)),
             ((3, 4, 4), (4,)), ((1, 1), (1,)), ((6, 6), (6, 0))]
    for sa, sb in cases:
        a = general(rng, sa, dtype, 10.0).astype(dtype)
        b = random_array(rng, sb, dtype)
        got = ts.linalg.solve(on(device, a), on(device, b))
        if len(sb) == 1:
            want = np.linalg.solve(a.astype(ref_dtype), b.astype(ref_dtype)[..., None])[..., 0]
        else:
            want = np.linalg.solve(a.astype(ref_dtype), b.astype(ref_dtype))
        assert got.dtype == getattr(ts, dtype)
        close(got, want, dtype, sa[-1], 100)


@pytest.mark.parametrize("n", [80, 300])
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_solve_inv_det(device, rng, dtype, n):
    """Orders above 64 take row-major copies (LAPACK/cuSOLVER solve with the transpose); on CUDA,
    orders from 256 end the solve with two triangular solves and the pivots' row permutation."""
    ref_t = np.complex128 if "complex" in dtype else np.float64
    a = general(rng, (2, n, n), dtype, 20.0).astype(dtype)
    b = random_array(rng, (2, n, 3), dtype)
    close(ts.linalg.solve(on(device, a), on(device, b)), np.linalg.solve(a.astype(ref_t), b.astype(ref_t)), dtype, n, 400)
    v = random_array(rng, (n,), dtype)
    close(ts.linalg.solve(on(device, a), on(device, v)),
          np.linalg.solve(a.astype(ref_t), np.broadcast_to(v.astype(ref_t)[:, None], (2, n, 1)))[..., 0], dtype, n, 400)
    close(ts.linalg.inv(on(device, a)), np.linalg.inv(a.astype(ref_t)), dtype, n, 400)
    sign, logabs = ts.linalg.slogdet(on(device, a))
    ws, wl = np.linalg.slogdet(a.astype(ref_t))
    close(sign, ws, dtype, n, 100)
    close(logabs, wl, dtype, n, 100)


def test_solve_promotes_and_mixes_dtypes(device, rng):
    a = rng.integers(-5, 5, size=(3, 3)) + 10 * np.eye(3, dtype=np.int64)
    b = rng.standard_normal(3).astype(np.float32)
    got = ts.linalg.solve(on(device, a), on(device, b))
    assert got.dtype == ts.float64  # int64 -> float64 (NumPy's promotion), then float64 with float32
    close(got, np.linalg.solve(a.astype(float), b.astype(float)), "float64", 3, 10)


def test_singular_inv_and_solve_name_the_batch_index(device, rng):
    a = general(rng, (3, 4, 4), "float64")
    a[2] = np.ones((4, 4))
    with pytest.raises(ts.linalg.LinAlgError, match=r"inv: the matrix at batch index \(2,\) is singular"):
        ts.linalg.inv(on(device, a))
    with pytest.raises(ts.linalg.LinAlgError, match=r"solve: the matrix at batch index \(2,\) is singular"):
        ts.linalg.solve(on(device, a), on(device, random_array(rng, (4,), "float64")))
    inverse, info = ts.linalg.inv_ex(on(device, a))
    assert list(np.asarray(info) > 0) == [False, False, True]
    result, info = ts.linalg.solve_ex(on(device, a), on(device, random_array(rng, (4, 2), "float64")))
    assert result.shape == (3, 4, 2) and list(np.asarray(info) > 0) == [False, False, True]
    with pytest.raises(ts.linalg.LinAlgError, match=r"inv: the matrix is singular"):
        ts.linalg.inv(on(device, np.zeros((2, 2))))
    assert np.all(np.isnan(np.asarray(inverse)[2])) or not np.all(np.isfinite(np.asarray(inverse)[2]))
    # A singular solve leaves nothing behind: a float32 eigh afterwards converges (OpenBLAS 0.3.21's
    # getrs with a zero pivot made the next ssyevd fail).
    h = hermitian(rng, (3, 8, 8), "float32")
    close(ts.linalg.eigvalsh(on(device, h)), np.linalg.eigvalsh(h.astype(np.float64)), "float32", 8, 10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_small_inv_and_solve_every_order_with_singular_entries(device, rng, dtype):
    """n = 1..32. On CUDA: tessel's Gauss-Jordan inverse (a warp or part of one per matrix), and for
    n <= 16 its LU solve, which reads x1's own C-order buffer. Entries 5 and 40 are singular (a
    zero column: an exact zero pivot): info names them, the plain functions raise for entry 5, and
    their inverses are not finite. A strided batch and a transposed view take the copying paths."""
    batch = 70
    good = [b for b in range(batch) if b not in (5, 40)]
    for n in range(1, 33):
        a = general(rng, (batch, n, n), dtype, 10.0).astype(dtype)
        a[5, :, -1] = 0
        a[40, :, 0] = 0
        x = on(device, a)
        inverse, info = ts.linalg.inv_ex(x)
        assert list(np.flatnonzero(np.asarray(info))) == [5, 40], n
        got = np.asarray(inverse)
        eye = np.broadcast_to(np.eye(n), (len(good), n, n))
        close(a[good].astype(np.float64) @ got[good], eye, dtype, n, 10)
        assert not np.all(np.isfinite(got[5])) and not np.all(np.isfinite(got[40]))
        with pytest.raises(ts.linalg.LinAlgError, match=r"inv: the matrix at batch index \(5,\) is singular") as e:
            ts.linalg.inv(x)
        assert e.value.batch_index == 5
        strided = on(device, np.repeat(a, 2, axis=0))[::2]  # not contiguous
        close(a[good].astype(np.float64) @ np.asarray(ts.linalg.inv_ex(strided)[0])[good], eye, dtype, n, 10)
        t = np.asarray(ts.linalg.inv_ex(x.mT)[0])
        close(np.swapaxes(a[good], -1, -2).astype(np.float64) @ t[good], eye, dtype, n, 10)
        if n > 16 and n != 32:
            continue  # the solve kernel's orders (each compiles for seconds), and one above them
        b = random_array(rng, (batch, n, 2), dtype)
        result, sinfo = ts.linalg.solve_ex(x, on(device, b))
        assert list(np.flatnonzero(np.asarray(sinfo))) == [5, 40], n
        close(a[good].astype(np.float64) @ np.asarray(result)[good], b[good], dtype, n, 10)
        np.testing.assert_array_equal(np.asarray(x), a)  # x1 is read, never overwritten
        with pytest.raises(ts.linalg.LinAlgError, match=r"solve: the matrix at batch index \(5,\) is singular"):
            ts.linalg.solve(x, on(device, b))
        v = random_array(rng, (n,), dtype)
        got = np.asarray(ts.linalg.solve(on(device, a[good]), on(device, v)))
        close(np.einsum("bij,bj->bi", a[good].astype(np.float64), got), np.broadcast_to(v, (len(good), n)), dtype, n, 10)
        got = np.asarray(ts.linalg.solve(strided[:1], on(device, b)))  # x1 broadcast over the batch
        close(a[:1].astype(np.float64) @ got, b, dtype, n, 10)


def test_solve_bad_shapes(device, rng):
    a = on(device, general(rng, (2, 4, 4), "float64"))
    with pytest.raises(ts.ShapeError, match=r"solve: the batch shapes of x1 \(2, 4, 4\) and x2 \(3, 4, 1\) do not broadcast"):
        ts.linalg.solve(a, on(device, random_array(rng, (3, 4, 1), "float64")))
    with pytest.raises(ts.ShapeError, match="solve"):
        ts.linalg.solve(a, on(device, random_array(rng, (5,), "float64")))
    with pytest.raises(ts.ShapeError, match="solve: needs square matrices"):
        ts.linalg.solve(on(device, random_array(rng, (4, 3), "float64")), on(device, random_array(rng, (4,), "float64")))


# ---- det / slogdet ----
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (4, 6, 6), (0, 3, 3), (2, 0, 0), (30, 30)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet(device, rng, dtype, shape):
    a = random_array(rng, shape, dtype)
    ref = a.astype(np.complex128 if "complex" in dtype else np.float64)
    n = shape[-1]
    d = ts.linalg.det(on(device, a))
    assert d.dtype == getattr(ts, dtype) and d.shape == shape[:-2]
    want = np.linalg.det(ref) if ref.size else np.ones(shape[:-2])
    close(d, want, dtype, n, 1e3)
    sign, logabs = ts.linalg.slogdet(on(device, a))
    assert sign.dtype == getattr(ts, dtype) and logabs.dtype == getattr(ts, REAL_OF[dtype])
    ws, wl = np.linalg.slogdet(ref) if ref.size else (np.ones(shape[:-2]), np.zeros(shape[:-2]))
    close(sign, ws, dtype, n, 1e3)
    close(logabs, wl, dtype, n, 1e3)


def test_det_of_a_singular_matrix(device):
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]])
    np.testing.assert_array_equal(np.asarray(ts.linalg.det(on(device, a))), [0.0, 0.0])
    sign, logabs = ts.linalg.slogdet(on(device, a))
    np.testing.assert_array_equal(np.asarray(sign), [0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(logabs), [-np.inf, -np.inf])


# ---- eigh / eig ----
@pytest.mark.parametrize("shape", SQUARE_SHAPES + [(0, 4, 4), (3, 0, 0)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_reconstructs(device, rng, dtype, shape):
    a = hermitian(rng, shape, dtype)
    n = shape[-1]
    w, v = ts.linalg.eigh(on(device, a))
    assert isinstance(ts.linalg.eigh(on(device, a)), ts.linalg.EighResult)
    assert w.dtype == getattr(ts, REAL_OF[dtype]) and v.dtype == getattr(ts, dtype)
    w, v = np.asarray(w), np.asarray(v)
    assert w.shape == shape[:-1] and v.shape == shape
    ref = a.astype(np.complex128)
    close(ref @ v, v * w[..., None, :], dtype, n, 10)
    close(H(v) @ v, np.broadcast_to(np.eye(n), shape), dtype, n)
    if a.size:
        close(w, np.linalg.eigvalsh(ref), dtype, n, 10)
        assert np.all(np.diff(w, axis=-1) >= 0)
    close(ts.linalg.eigvalsh(on(device, a)), w, dtype, n, 10)
    wx, vx, info = ts.linalg.eigh_ex(on(device, a))
    assert info.shape == shape[:-2] and not np.any(np.asarray(info))


@pytest.fixture
def linalg_streams_restored():
    """ts.set_linalg_streams is process-wide: each test that sets it gets the old value back."""
    before = ts.linalg_streams()
    yield
    ts.set_linalg_streams(before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_split_over_streams(device, rng, dtype, linalg_streams_restored):
    # 193 matrices of order 40: cuSOLVER's XsyevBatched on CUDA, split into 2 and 3 parts (4 asks
    # for more parts of 64 matrices than the batch has: 3). The CPU backend ignores the setting.
    a = hermitian(rng, (193, 40, 40), dtype)
    ref = a.astype(np.complex128)
    results = {}
    for streams in (1, 2, 3, 4):
        ts.set_linalg_streams(streams)
        assert ts.linalg_streams() == streams
        w, v = (np.asarray(r) for r in ts.linalg.eigh(on(device, a)))
        close(ref @ v, v * w[..., None, :], dtype, 40, 10)
        close(H(v) @ v, np.broadcast_to(np.eye(40), a.shape), dtype, 40)
        results[streams] = w
    for streams in (2, 3, 4):
        close(results[streams], results[1], dtype, 40, 10)


def test_set_linalg_streams_rejects_out_of_range(linalg_streams_restored):
    before = ts.linalg_streams()
    for bad in (0, -1, 65):
        with pytest.raises(ValueError, match=f"from 1 to 64, got {bad}"):
            ts.set_linalg_streams(bad)
    assert ts.linalg_streams() == before
    with pytest.raises(TypeError):
        ts.set_linalg_streams("2")


def test_eigh_reads_the_lower_triangle(device, rng):
    a = hermitian(rng, (5, 5), "complex128")
    garbage = np.triu(random_array(rng, (5, 5), "complex128"), 1)
    w = ts.linalg.eigvalsh(on(device, np.tril(a) + garbage))
    close(w, np.linalg.eigvalsh(a), "complex128", 5)


@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (3, 6, 6), (20, 20)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_eig(device, rng, dtype, shape):
    a = random_array(rng, shape, dtype)
    n = shape[-1]
    w, v = ts.linalg.eig(on(device, a))
    cdt = "complex64" if dtype in ("float32", "complex64") else "complex128"
    assert w.dtype == getattr(ts, cdt) and v.dtype == getattr(ts, cdt)
    w, v = np.asarray(w), np.asarray(v)
    ref = a.astype(np.complex128)
    cond = float(np.max(np.linalg.cond(np.linalg.eig(ref)[1])))
    close(ref @ v, v * w[..., None, :], dtype, n, 10 * cond)
    close(np.linalg.norm(v, axis=-2), np.ones(shape[:-1]), dtype, n)
    want = np.linalg.eigvals(ref).reshape(-1, n)
    close(matched(w.reshape(-1, n), want), want, dtype, n, 100 * cond)
    close(matched(np.asarray(ts.linalg.eigvals(on(device, a))).reshape(-1, n), want), want, dtype, n, 100 * cond)


def matched(got, want):
    """got's values reordered (per row) to the nearest of want's (greedy): eig has no order."""
    out = np.empty_like(want)
    for b in range(want.shape[0]):
        left = list(got[b])
        for i, value in enumerate(want[b]):
            j = int(np.argmin([abs(x - value) for x in left]))
            out[b, i] = left.pop(j)
    return out


# ---- QR / SVD ----
QR_SHAPES = [(1, 1), (5, 3), (3, 5), (4, 4), (2, 6, 4), (2, 4, 6), (0, 3, 2), (3, 0), (0, 3), (50, 20)]


@pytest.mark.parametrize("mode", ["reduced", "complete"])
@pytest.mark.parametrize("shape", QR_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_reconstructs(device, rng, dtype, shape, mode):
    a = random_array(rng, shape, dtype)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    q, r = ts.linalg.qr(on(device, a), mode=mode)
    q, r = np.asarray(q), np.asarray(r)
    qc = m if mode == "complete" else k
    assert q.shape == shape[:-2] + (m, qc) and r.shape == shape[:-2] + (qc, n)
    assert q.dtype == np.dtype(dtype) and r.dtype == np.dtype(dtype)
    assert np.all(np.tril(r, -1) == 0)
    close(q @ r, a, dtype, max(m, n))
    close(H(q) @ q, np.broadcast_to(np.eye(qc), shape[:-2] + (qc, qc)), dtype, max(m, n))


# On CUDA, 300 x 40 (and 40 x 300, transposed) take the per-matrix route of the SVD table: QR
# first, then gesvdj; the full U of a tall matrix goes direct.
SVD_SHAPES = QR_SHAPES + [(300, 40), (40, 300), (2, 300, 40)]


@pytest.mark.parametrize("rank_deficient", [False, True])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", SVD_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_reconstructs(device, rng, dtype, shape, full, rank_deficient):
    a = random_array(rng, shape, dtype)
    if rank_deficient:
        if min(shape[-2:]) < 2:
            pytest.skip("needs two columns and two rows")
        if shape[-2] >= shape[-1]:  # a repeated column (tall) or row (wide): U and Vh must stay orthonormal
            a[..., -1] = a[..., 0]
        else:
            a[..., -1, :] = a[..., 0, :]
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    u, s, vh = ts.linalg.svd(on(device, a), full_matrices=full)
    u, s, vh = np.asarray(u), np.asarray(s), np.asarray(vh)
    uc, vr = (m, n) if full else (k, k)
    assert u.shape == shape[:-2] + (m, uc) and vh.shape == shape[:-2] + (vr, n) and s.shape == shape[:-2] + (k,)
    assert s.dtype == np.dtype(REAL_OF[dtype]) and u.dtype == np.dtype(dtype)
    close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, dtype, max(m, n))
    close(H(u) @ u, np.broadcast_to(np.eye(uc), shape[:-2] + (uc, uc)), dtype, max(m, n))
    close(vh @ H(vh), np.broadcast_to(np.eye(vr), shape[:-2] + (vr, vr)), dtype, max(m, n))
    if a.size:
        close(s, np.linalg.svd(a.astype(np.complex128), compute_uv=False), dtype, max(m, n))
        assert np.all(np.diff(s, axis=-1) <= 0)
    close(ts.linalg.svdvals(on(device, a)), s, dtype, max(m, n))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ill_conditioned(device, rng, dtype):
    cond = 1e3 if dtype == "float32" else 1e8
    a = general(rng, (3, 12, 12), dtype, cond).astype(dtype)
    b = random_array(rng, (3, 12, 2), dtype)
    x = np.asarray(ts.linalg.solve(on(device, a), on(device, b))).astype(np.float64)
    # The backward error is small even where the forward error is cond * eps.
    residual = np.abs(a.astype(np.float64) @ x - b).max() / (np.abs(a).max() * np.abs(x).max())
    assert residual < tol(dtype, 12)
    close(x, np.linalg.solve(a.astype(np.float64), b.astype(np.float64)), dtype, 12, cond)
    s = ts.linalg.svdvals(on(device, a))
    close(s, np.linalg.svd(a.astype(np.float64), compute_uv=False), dtype, 12)
    assert list(np.asarray(ts.linalg.matrix_rank(on(device, a)))) == [12, 12, 12]


# One matrix past tessel's small kernels, on CUDA: 400 x 256 takes cuSOLVER's gesvdp, which
# perturbs a matrix with a singular value near zero (tessel then solves it again on the gesvdj
# route); the others take gesvdj, after a QR where tall. The ranks check that no perturbation is
# left in the small singular values: matrix_rank's default cut is max(M, N) * eps * the largest
# singular value.
@pytest.mark.parametrize("shape", [(300, 40), (40, 300), (160, 160), (400, 256)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_of_rank_deficient_graded_and_zero_matrices(device, rng, dtype, shape):
    m, n = shape
    k = min(m, n)
    r = k // 2
    low_rank = (random_array(rng, (m, r), "complex128" if "complex" in dtype else "float64")
                @ random_array(rng, (r, n), "complex128" if "complex" in dtype else "float64")).astype(dtype)
    graded = general(rng, shape, dtype, 1e3 if REAL_OF[dtype] == "float32" else 1e8).astype(dtype)
    for a, rank in ((low_rank, r), (graded, k), (np.zeros(shape, dtype), 0)):
        u, s, vh = (np.asarray(t) for t in ts.linalg.svd(on(device, a), full_matrices=False))
        close((u * s[None, :]) @ vh, a, dtype, max(m, n))
        close(H(u) @ u, np.eye(k), dtype, max(m, n))
        close(vh @ H(vh), np.eye(k), dtype, max(m, n))
        close(s, np.linalg.svd(a.astype(np.complex128), compute_uv=False), dtype, max(m, n))
        close(ts.linalg.svdvals(on(device, a)), s, dtype, max(m, n))
        assert int(ts.linalg.matrix_rank(on(device, a))) == rank


# Matrices past tessel's small kernels: cuSOLVER's per-matrix routes (the NaN/Inf flags and fills
# around them on CUDA); 161 x 161 has an odd element count (the flag kernel's scalar loop).
@pytest.mark.parametrize("n", [160, 161])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_large_svd_and_eigh_with_nan_or_inf(device, rng, bad, dtype, n):
    a = random_array(rng, (3, n, n - 20), dtype)
    a[1, 7, 9] = bad
    expect_nonfinite_in_matrix_1(on(device, a), [ts.linalg.svdvals, lambda v: ts.linalg.svd(v)[0],
                                                 lambda v: ts.linalg.svd(v)[1], lambda v: ts.linalg.svd(v)[2]])
    h = hermitian(rng, (3, n, n), dtype)
    h[1, n - 1, 2] = bad
    expect_nonfinite_in_matrix_1(on(device, h), [ts.linalg.eigvalsh, lambda v: ts.linalg.eigh(v)[0],
                                                 lambda v: ts.linalg.eigh(v)[1]])


# ---- composed functions ----
@pytest.mark.parametrize("dtype", DTYPES)
def test_rank_pinv_cond_lstsq(device, rng, dtype):
    ref_t = np.complex128 if "complex" in dtype else np.float64
    a = random_array(rng, (2, 6, 4), dtype)
    a[1, :, 3] = a[1, :, 0]  # rank 3
    np.testing.assert_array_equal(np.asarray(ts.linalg.matrix_rank(on(device, a))), [4, 3])
    close(ts.linalg.pinv(on(device, a)), np.linalg.pinv(a.astype(ref_t)), dtype, 6, 100)
    close(ts.linalg.pinv(on(device, a), rtol=1e-3), np.linalg.pinv(a.astype(ref_t), rtol=1e-3), dtype, 6, 100)
    sq = general(rng, (3, 5, 5), dtype, 50.0).astype(dtype)
    for p in [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf]:
        close(ts.linalg.cond(on(device, sq), p), np.linalg.cond(sq.astype(ref_t), p), dtype, 5, 100)
    b = random_array(rng, (6, 2), dtype)
    x, res, rank, s = ts.linalg.lstsq(on(device, a[0]), on(device, b))
    wx, wres, wrank, ws = np.linalg.lstsq(a[0].astype(ref_t), b.astype(ref_t), rcond=None)
    close(x, wx, dtype, 6, 100)
    close(res, wres, dtype, 6, 100)
    assert rank == wrank
    close(s, ws, dtype, 6)
    x, res, rank, s = ts.linalg.lstsq(on(device, a[1]), on(device, b[:, 0]))
    wx, wres, wrank, ws = np.linalg.lstsq(a[1].astype(ref_t), b[:, 0].astype(ref_t), rcond=None)
    close(x, wx, dtype, 6, 100)
    assert rank == wrank == 3 and res.shape == wres.shape == (0,)
    x, res, rank, s = ts.linalg.lstsq(on(device, a[0]), on(device, b[:, 1]))
    wx, wres, wrank, ws = np.linalg.lstsq(a[0].astype(ref_t), b[:, 1].astype(ref_t), rcond=None)
    close(x, wx, dtype, 6, 100)
    close(res, wres, dtype, 6, 100)
    assert res.shape == wres.shape == (1,) and rank == wrank == 4


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_norm_from_singular_values_and_matrix_power(device, rng, dtype):
    ref_t = np.complex128 if "complex" in dtype else np.float64
    a = random_array(rng, (3, 4, 5), dtype)
    for ord in ["nuc", 2, -2]:
        got = ts.linalg.matrix_norm(on(device, a), ord=ord)
        assert got.dtype == getattr(ts, REAL_OF[dtype])
        close(got, np.linalg.norm(a.astype(ref_t), ord=ord, axis=(-2, -1)), dtype, 5)
        assert ts.linalg.matrix_norm(on(device, a), ord=ord, keepdims=True).shape == (3, 1, 1)
    sq = general(rng, (2, 4, 4), dtype, 5.0).astype(dtype)
    for n in [-1, -3, 0, 2]:
        close(ts.linalg.matrix_power(on(device, sq), n), np.linalg.matrix_power(sq.astype(ref_t), n), dtype, 4, 200)


# ---- layouts ----
def test_non_contiguous_and_negative_stride_inputs(device, rng):
    a = spd(rng, (6, 6), "float64")
    t = on(device, a).mT  # a transposed view
    close(ts.linalg.cholesky(t), np.linalg.cholesky(a.T), "float64", 6)
    g = random_array(rng, (3, 5, 5), "float64")
    flipped = on(device, g)[::-1, :, ::-1]
    close(ts.linalg.det(flipped), np.linalg.det(g[::-1, :, ::-1]), "float64", 5, 100)
    close(ts.linalg.svdvals(on(device, g)[:, ::2, :]), np.linalg.svd(g[:, ::2, :], compute_uv=False), "float64", 5)


def test_results_are_fresh_arrays(device, rng):
    a = spd(rng, (4, 4), "float64")
    x = on(device, a)
    inverse = ts.linalg.inv(x)
    close(x, a, "float64", 4)  # the input is not overwritten
    close(np.asarray(inverse) @ a, np.eye(4), "float64", 4, 10)


# ---- bad input ----
def test_errors(device, rng):
    sq_only = [ts.linalg.cholesky, ts.linalg.inv, ts.linalg.det, ts.linalg.slogdet, ts.linalg.eigh,
               ts.linalg.eigvalsh, ts.linalg.eig, ts.linalg.eigvals, ts.linalg.cholesky_ex, ts.linalg.inv_ex,
               ts.linalg.eigh_ex]
    rect = on(device, random_array(rng, (2, 3, 4), "float64"))
    for f in sq_only:
        with pytest.raises(ts.ShapeError, match=r"needs square matrices, got shape \(2, 3, 4\)"):
            f(rect)
    vec = on(device, random_array(rng, (4,), "float64"))
    for f in sq_only + [ts.linalg.qr, ts.linalg.svd, ts.linalg.svdvals]:
        with pytest.raises(ts.ShapeError, match=r"needs a stack of matrices"):
            f(vec)
    flags = on(device, np.eye(3, dtype=bool))
    for f in [ts.linalg.inv, ts.linalg.cholesky, ts.linalg.svd, ts.linalg.qr, ts.linalg.eigh, ts.linalg.det]:
        with pytest.raises(ts.DTypeError, match=r"needs a floating-point or complex input .* got bool"):
            f(flags)
    with pytest.raises(TypeError, match="float16"):
        ts.linalg.inv(on(device, np.eye(3, dtype=np.float16)))
    ints = on(device, np.array([[2, 1], [1, 3]]))
    assert ts.linalg.inv(ints).dtype == ts.float64  # integers are promoted as NumPy does
    with pytest.raises(ts.ValueError, match=r'qr: mode must be "reduced" or "complete", got "r"'):
        ts.linalg.qr(on(device, np.eye(3)), mode="r")
    with pytest.raises(ValueError, match="matrix_norm: ord must be"):
        ts.linalg.matrix_norm(on(device, np.eye(3)), ord=3)
    with pytest.raises(ValueError, match="matrix_norm: ord must be"):
        ts.linalg.matrix_norm(on(device, np.eye(3)), ord="max")
    with pytest.raises(ValueError, match="vector_norm: ord must be a real number"):
        ts.linalg.vector_norm(on(device, np.ones(3)), ord="fro")


def expect_nonfinite_in_matrix_1(x, functions):
    """Each function of the batch x of 3, whose matrix 1 holds a NaN or Inf: a LinAlgError naming
    batch index (1,), or results that are not all finite for matrix 1 and finite for 0 and 2."""
    for f in functions:
        try:
            out = np.asarray(f(x))
        except ts.linalg.LinAlgError as e:
            assert "batch index (1,)" in str(e)
            continue
        assert not np.all(np.isfinite(out[1])), "a non-finite input must not give finite results"
        assert np.all(np.isfinite(out[0])) and np.all(np.isfinite(out[2]))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_inf_give_nan_or_linalg_error(device, rng, bad):
    a = hermitian(rng, (3, 5, 5), "float64")
    a[1, 2, 2] = bad
    x = on(device, a)
    expect_nonfinite_in_matrix_1(x, [ts.linalg.eigvalsh, ts.linalg.svdvals, ts.linalg.inv, ts.linalg.det,
                                     ts.linalg.eigvals, lambda v: ts.linalg.svd(v)[1], lambda v: ts.linalg.qr(v)[1],
                                     lambda v: ts.linalg.eigh(v)[0]])
    with pytest.raises(ts.linalg.LinAlgError, match=r"batch index \(1,\)"):
        ts.linalg.cholesky(on(device, np.stack([spd(rng, (5, 5), "float64"), a[1]])))


def test_linalg_error_class():
    assert issubclass(ts.linalg.LinAlgError, ValueError)
    assert issubclass(ts.linalg.LinAlgError, ts.TesselError)
    assert issubclass(ts.linalg.LinAlgError, ts.ValueError)


# ---- batches of small matrices: on CUDA, tessel's own kernels (n <= 16; the tuning table of
# src/backend/cuda/linalg_small.cpp starts them at batches of 64 to 4096 by op and order) ----
@pytest.mark.parametrize("n", [1, 2, 5, 8, 16])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_small_matrix_batches(device, rng, dtype, n):
    batch = 4096
    a = spd(rng, (batch, n, n), dtype)
    L = np.asarray(ts.linalg.cholesky(on(device, a)))
    close(L @ H(L), a, dtype, n)
    U = np.asarray(ts.linalg.cholesky(on(device, a), upper=True))
    close(H(U) @ U, a, dtype, n)
    g = general(rng, (batch, n, n), dtype, 10.0).astype(dtype)
    b = random_array(rng, (batch, n, 3), dtype)
    close(g.astype(np.float64) @ np.asarray(ts.linalg.solve(on(device, g), on(device, b))), b, dtype, n, 10)
    close(g.astype(np.float64) @ np.asarray(ts.linalg.inv(on(device, g))), np.broadcast_to(np.eye(n), g.shape), dtype, n, 10)
    close(ts.linalg.det(on(device, g)), np.linalg.det(g.astype(np.float64)), dtype, n, 100)
    s = hermitian(rng, (batch, n, n), dtype)
    w, v = ts.linalg.eigh(on(device, s))
    w, v = np.asarray(w), np.asarray(v)
    close(s.astype(np.float64) @ v, v * w[..., None, :], dtype, n, 10)
    close(H(v) @ v, np.broadcast_to(np.eye(n), s.shape), dtype, n)
    close(w, np.linalg.eigvalsh(s.astype(np.float64)), dtype, n, 10)
    for m in sorted({n, min(n + 3, 16)}):
        x = random_array(rng, (batch, m, n), dtype)
        x[:, :, -1] = x[:, :, 0]  # rank deficient: U must still be orthonormal
        for full in (False, True):
            u, sv, vh = (np.asarray(t) for t in ts.linalg.svd(on(device, x), full_matrices=full))
            k = min(m, n)
            close((u[..., :, :k] * sv[..., None, :]) @ vh[..., :k, :], x, dtype, m)
            close(H(u) @ u, np.broadcast_to(np.eye(u.shape[-1]), (batch,) + (u.shape[-1],) * 2), dtype, m)
            close(vh @ H(vh), np.broadcast_to(np.eye(vh.shape[-2]), (batch,) + (vh.shape[-2],) * 2), dtype, m)
            close(sv, np.linalg.svd(x.astype(np.float64), compute_uv=False), dtype, m)


# Entries whose squares overflow (huge) or vanish (tiny) in the dtype: the results scale with the
# input. 4096 matrices of 8 x 8, which on CUDA take tessel's per-thread kernels (they scale each
# matrix by a power of two first).
@pytest.mark.parametrize("magnitude", ["huge", "tiny"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eigh_and_svd_of_huge_and_tiny_entries(device, rng, dtype, magnitude):
    big = {"float32": 1e30, "float64": 1e200}[dtype]
    scale = big if magnitude == "huge" else 1 / big
    a = (hermitian(rng, (4096, 8, 8), "float64") * scale).astype(dtype)
    g = (random_array(rng, (4096, 8, 8), "float64") * scale).astype(dtype)
    a64, g64 = a.astype(np.float64) / scale, g.astype(np.float64) / scale
    w, v = (np.asarray(t).astype(np.float64) for t in ts.linalg.eigh(on(device, a)))
    w /= scale
    close(w, np.linalg.eigvalsh(a64), dtype, 8, 10)
    close(a64 @ v, v * w[..., None, :], dtype, 8, 10)
    close(H(v) @ v, np.broadcast_to(np.eye(8), a.shape), dtype, 8)
    u, sv, vh = (np.asarray(t).astype(np.float64) for t in ts.linalg.svd(on(device, g), full_matrices=False))
    sv /= scale
    close(sv, np.linalg.svd(g64, compute_uv=False), dtype, 8)
    close((u * sv[..., None, :]) @ vh, g64, dtype, 8)
    close(H(u) @ u, np.broadcast_to(np.eye(8), g.shape), dtype, 8)


# ---- orders above the per-thread kernels, small batches: on CUDA the tuning table sends these to
# cuSOLVER (tessel's team kernels take eigh from 1024 matrices of orders 9-32 and svd from 32 of
# order >= 33, as src/backend/cuda/linalg_small.cpp's table says; tests/cpp/ops/linalg_test.cpp's
# JacobiBlockOrders runs those batches) ----
def with_spectrum(rng, batch, n, w):
    q, _ = np.linalg.qr(rng.standard_normal((batch, n, n)))
    return (q * np.asarray(w)[..., None, :]) @ np.swapaxes(q, -1, -2)


@pytest.mark.parametrize("n", [17, 32, 33, 64, 128])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_block_jacobi_eigh(device, rng, dtype, n):
    cond = 1e3 if dtype == "float32" else 1e8
    repeated = np.where(np.arange(n) < n // 2, 2.0, np.where(np.arange(n) % 2, -1.0, 3.0))
    graded = np.logspace(0, -math.log10(cond), n) * np.where(np.arange(n) % 2, -1.0, 1.0)
    a = np.concatenate([hermitian(rng, (2, n, n), "float64"), with_spectrum(rng, 1, n, repeated),
                        with_spectrum(rng, 1, n, graded), np.zeros((1, n, n))]).astype(dtype)
    ref = a.astype(np.float64)
    w, v = (np.asarray(t) for t in ts.linalg.eigh(on(device, a)))
    close(ref @ v, v * w[..., None, :], dtype, n, 10)
    close(H(v) @ v, np.broadcast_to(np.eye(n), a.shape), dtype, n)
    close(w, np.linalg.eigvalsh(ref), dtype, n, 10)
    assert np.all(np.diff(w, axis=-1) >= 0)
    close(w[2], np.sort(repeated), dtype, n, 10)
    assert np.all(w[4] == 0)
    close(ts.linalg.eigvalsh(on(device, a)), w, dtype, n, 10)
    assert not np.any(np.asarray(ts.linalg.eigh_ex(on(device, a))[2]))


@pytest.mark.parametrize("n", [17, 32, 33, 64, 128])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_block_jacobi_svd(device, rng, dtype, n):
    cond = 1e3 if dtype == "float32" else 1e8
    for m in sorted({n, min(n + 7, 128)}):
        a = np.concatenate([random_array(rng, (2, m, n), dtype), general(rng, (1, m, n), dtype, cond),
                            random_array(rng, (1, m, n), dtype), np.zeros((1, m, n))]).astype(dtype)
        a[3, :, -1] = a[3, :, 0]  # rank deficient, and a zero column
        a[3, :, n // 2] = 0
        for x in (a, np.swapaxes(a, -1, -2).copy()):  # tall (or square) and wide
            rows, cols = x.shape[-2:]
            k = min(rows, cols)
            for full in (False, True):
                u, s, vh = (np.asarray(t) for t in ts.linalg.svd(on(device, x), full_matrices=full))
                close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], x, dtype, max(rows, cols))
                close(H(u) @ u, np.broadcast_to(np.eye(u.shape[-1]), (5,) + (u.shape[-1],) * 2), dtype, max(rows, cols))
                close(vh @ H(vh), np.broadcast_to(np.eye(vh.shape[-2]), (5,) + (vh.shape[-2],) * 2), dtype,
                      max(rows, cols))
                close(s, np.linalg.svd(x.astype(np.float64), compute_uv=False), dtype, max(rows, cols))
                assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s[4] == 0)
            close(ts.linalg.svdvals(on(device, x)), s, dtype, max(rows, cols))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("n", [17, 33, 128])
def test_block_jacobi_nan_and_inf(device, rng, n, bad):
    a = hermitian(rng, (3, n, n), "float32")
    a[1, n - 1, 2] = bad
    x = on(device, a)
    expect_nonfinite_in_matrix_1(x, [ts.linalg.eigvalsh, ts.linalg.svdvals, lambda v: ts.linalg.svd(v)[1],
                                     lambda v: ts.linalg.eigh(v)[0]])
    info = np.asarray(ts.linalg.eigh_ex(x)[2])
    assert info[0] == 0 and info[2] == 0


@pytest.mark.parametrize("n", [17, 64])
def test_block_jacobi_empty_batches(device, n):
    none = on(device, np.zeros((0, n, n), dtype="float32"))
    assert ts.linalg.eigh(none)[0].shape == (0, n)
    assert ts.linalg.svd(none)[1].shape == (0, n)
    assert ts.linalg.svdvals(on(device, np.zeros((0, n + 5, n), dtype="float64"))).shape == (0, n)


def test_svd_route_variable_rejects_unknown_values(gpu):
    variable, value, call = "TESSEL_LINALG_SVD", "polar", "ts.linalg.svd(x)"
    # The routes are read once per process, so each bad value gets a fresh interpreter. A 160x160
    # matrix is past tessel's small kernels and cuSOLVER's batched routines: it takes the route.
    code = (f"import numpy as np, tessel as ts\n"
            f"x = ts.asarray(np.eye(160, dtype='float32') * 2, device='{gpu}')\n"
            f"try:\n    {call}\nexcept ValueError as e:\n    print('ValueError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, variable: value},
                         capture_output=True, text=True, timeout=300)
    assert f"ValueError: svd: {variable} must be" in out.stdout, out.stdout + out.stderr
    assert f'got "{value}"' in out.stdout


def test_svd_polar_route_at_small_orders(gpu):
    # TESSEL_LINALG_SVD=gesvdp sends every thin SVD past tessel's kernels to cuSOLVER's gesvdp
    # (auto takes it for tall matrices from 384 x 256 up). The rank-deficient and graded matrices
    # are those it perturbs: tessel must solve them again on the gesvdj route, exact ranks and all.
    code = f"""
import numpy as np, tessel as ts
rng = np.random.default_rng(7)
for dtype in ("float32", "float64", "complex64", "complex128"):
    eps = np.finfo(np.dtype(dtype)).eps
    for m, n in ((300, 40), (120, 300), (200, 200)):
        k = min(m, n)
        real = rng.standard_normal((m, n))
        a = real + 1j * rng.standard_normal((m, n)) if "complex" in dtype else real
        u0, _, vh0 = np.linalg.svd(a, full_matrices=False)
        graded = (u0 * np.logspace(0, -6 if "32" in dtype or dtype == "complex64" else -12, k)) @ vh0
        low = a[:, : k // 2] @ a[: k // 2, :] if m >= n else a[:k // 2, :].T @ a[:k // 2, :]
        for x, rank in ((a, k), (graded, None), (low[:m, :n], k // 2), (np.zeros((m, n)), 0)):
            x = x.astype(dtype)
            u, s, vh = (np.asarray(t) for t in ts.linalg.svd(ts.asarray(x, device="{gpu}"), full_matrices=False))
            ref = np.linalg.svd(x.astype(np.complex128), compute_uv=False)
            scale = max(ref[0], 1.0)
            assert np.abs((u * s) @ vh - x).max() <= 50 * eps * max(m, n) * scale, (dtype, m, n)
            assert np.abs(u.conj().T @ u - np.eye(k)).max() <= 50 * eps * max(m, n), (dtype, m, n)
            assert np.abs(s - ref).max() <= 50 * eps * max(m, n) * scale, (dtype, m, n)
            if rank is not None:
                assert int(ts.linalg.matrix_rank(ts.asarray(x, device="{gpu}"))) == rank, (dtype, m, n, rank)
print("polar route ok")
"""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TESSEL_LINALG_SVD": "gesvdp"},
                         capture_output=True, text=True, timeout=600)
    assert "polar route ok" in out.stdout, out.stdout + out.stderr


def test_small_kernel_variable_rejects_unknown_values_and_forces_a_kernel(gpu):
    # Read once per process: a fresh interpreter per value. "eigh_warp" forces the warp kernel at
    # n 5, below the orders its table rows give it; the result must still be right.
    code = (f"import numpy as np, tessel as ts\n"
            f"a = np.random.default_rng(1).standard_normal((300, 5, 5)); a = a + a.transpose(0, 2, 1)\n"
            f"try:\n"
            f"    w, v = ts.linalg.eigh(ts.asarray(a, device='{gpu}'))\n"
            f"    print('err', float(np.abs(np.asarray(w) - np.linalg.eigvalsh(a)).max()))\n"
            f"except ValueError as e:\n    print('ValueError:', e)\n")

    def run(value):
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TESSEL_LINALG_SMALL": value},
                             capture_output=True, text=True, timeout=300)
        return out.stdout + out.stderr

    bad = run("warp")
    assert "ValueError: TESSEL_LINALG_SMALL=warp: expected 0 or a kernel (cholesky, lu_solve, eigh" in bad, bad
    forced = run("eigh_warp")
    assert "err " in forced, forced
    assert float(forced.split("err ")[1].split()[0]) < 1e-12


def test_small_kernel_variable_forces_the_tridiagonal_eigh(gpu):
    # TESSEL_LINALG_SMALL=eigh_tridiagonal (read once per process: a fresh interpreter) runs the
    # Householder + QR kernel at every order it takes (to 16) and every batch, beyond the orders
    # and batches (>= 4096) the tuning table gives it:
    # reconstruction, orthogonality, the float64 eigenvalues, and NaN input (NaN results, info 0).
    code = (f"import numpy as np, tessel as ts\n"
            f"rng = np.random.default_rng(3)\n"
            f"for dtype, eps in (('float32', 1.2e-7), ('float64', 2.3e-16)):\n"
            f"    for n in (1, 2, 3, 5, 8, 12, 16):\n"
            f"        a = rng.standard_normal((300, n, n)); a = (a + a.transpose(0, 2, 1)) / 2\n"
            f"        a[7] = np.eye(n); a[8] = 0; a[9] = np.outer(a[9, 0], a[9, 0])\n"
            f"        a[11, n - 1, 0] = np.nan; a[11, 0, n - 1] = np.nan\n"
            f"        a = a.astype(dtype)\n"
            f"        w, v, info = (np.asarray(t) for t in ts.linalg.eigh_ex(ts.asarray(a, device='{gpu}')))\n"
            f"        ok = np.arange(300) != 11\n"
            f"        a64, w64, v64 = a[ok].astype(np.float64), w[ok].astype(np.float64), v[ok].astype(np.float64)\n"
            f"        scale = np.maximum(np.abs(a64).max(axis=(1, 2)), 1e-30)\n"
            f"        tol = 20 * eps * n\n"
            f"        res = (np.abs(a64 @ v64 - v64 * w64[:, None, :]).max(axis=(1, 2)) / scale).max()\n"
            f"        orth = np.abs(v64.transpose(0, 2, 1) @ v64 - np.eye(n)).max()\n"
            f"        werr = (np.abs(w64 - np.linalg.eigvalsh(a64)).max(axis=1) / scale).max()\n"
            f"        bad = info[11] == 0 and np.isnan(w[11]).all() and np.isnan(v[11]).all()\n"
            f"        good = (info[ok] == 0).all() and (np.diff(w64, axis=1) >= 0).all()\n"
            f"        print(dtype, n, 'ok' if res < tol and orth < tol and werr < tol and bad and good else 'FAILED',\n"
            f"              res, orth, werr, bad, good)\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TESSEL_LINALG_SMALL": "eigh_tridiagonal"},
                         capture_output=True, text=True, timeout=600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("float")]
    assert len(lines) == 14 and all(line.split()[2] == "ok" for line in lines), out.stdout + out.stderr


# ---- batched routes: sizes and batches on both sides of each crossover of the route tables
# (src/backend/cuda/tuning/linalg_routes.hpp: tessel's kernels to n 16 / 32, the batched library
# entry points, one library call per matrix on streams above), on random, ill-conditioned,
# singular and non-finite inputs; residuals against NumPy in float64 / complex128 ----
ROUTE_ORDERS = [16, 17, 32, 33, 64, 65]
ROUTE_BATCHES = [1, 3, 70]


def _ref(a):
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


@pytest.mark.parametrize("batch", ROUTE_BATCHES)
@pytest.mark.parametrize("n", ROUTE_ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_routes_factorizations(device, rng, dtype, n, batch):
    shape = (batch, n, n)
    # cholesky (both triangles)
    a = spd(rng, shape, dtype)
    for upper in (False, True):
        f = np.asarray(ts.linalg.cholesky(on(device, a), upper=upper))
        rec = H(f) @ f if upper else f @ H(f)
        close(rec, a, dtype, n, 10)
    # inv, solve, det, slogdet, ill-conditioned (cond 1e3)
    g = general(rng, shape, dtype, 1e3).astype(dtype)
    c = float(np.max(np.linalg.cond(_ref(g))))
    x = on(device, g)
    close(_ref(g) @ np.asarray(ts.linalg.inv(x)), np.broadcast_to(np.eye(n), shape), dtype, n, c)
    b = random_array(rng, (batch, n, 2), dtype)
    close(_ref(g) @ np.asarray(ts.linalg.solve(x, on(device, b))), b, dtype, n, c)
    close(ts.linalg.det(x), np.linalg.det(_ref(g)), dtype, n, c)
    close(ts.linalg.slogdet(x)[1], np.linalg.slogdet(_ref(g))[1], dtype, n, c)
    # qr, reduced and complete
    q, r = (np.asarray(t) for t in ts.linalg.qr(x))
    close(q @ r, g, dtype, n)
    close(H(q) @ q, np.broadcast_to(np.eye(n), shape), dtype, n)
    assert np.all(np.tril(r, -1) == 0)


@pytest.mark.parametrize("batch", ROUTE_BATCHES)
@pytest.mark.parametrize("n", ROUTE_ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_routes_eigh_svd_and_composed(device, rng, dtype, n, batch):
    shape = (batch, n, n)
    h = hermitian(rng, shape, dtype)
    w, v = (np.asarray(t) for t in ts.linalg.eigh(on(device, h)))
    scale = float(np.abs(h).max())
    close(_ref(h) @ v, v * w[..., None, :], dtype, n, max(scale, 1.0))
    close(ts.linalg.eigvalsh(on(device, h)), np.linalg.eigvalsh(_ref(h)), dtype, n, max(scale, 1.0))
    g = random_array(rng, shape, dtype)
    u, s, vh = (np.asarray(t) for t in ts.linalg.svd(on(device, g), full_matrices=False))
    close((u * s[..., None, :]) @ vh, g, dtype, n, 10)
    close(ts.linalg.svdvals(on(device, g)), np.linalg.svd(_ref(g), compute_uv=False), dtype, n, 10)
    # composed: pinv, matrix_rank (of a rank-deficient batch), lstsq, matrix_power
    low = _ref(g)[..., :, : n // 2] @ _ref(g)[..., : n // 2, :]
    low = low.astype(dtype)
    assert np.all(np.asarray(ts.linalg.matrix_rank(on(device, low))) == n // 2)
    p = np.asarray(ts.linalg.pinv(on(device, g)))
    c = float(np.max(np.linalg.cond(_ref(g))))
    close(_ref(g) @ p @ _ref(g), g, dtype, n, c)
    if batch == 1:
        b = random_array(rng, (n, 1), dtype)
        xs = np.asarray(ts.linalg.lstsq(on(device, g[0]), on(device, b))[0])
        close(_ref(g[0]) @ xs, b, dtype, n, c)
    m = (g / np.sqrt(n)).astype(dtype)
    close(ts.linalg.matrix_power(on(device, m), 3), _ref(m) @ _ref(m) @ _ref(m), dtype, n, 10)


@pytest.mark.parametrize("n", [4, 17, 33, 65])
@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_routes_singular_inputs(device, rng, dtype, n):
    a = (random_array(rng, (70, n, n), dtype) / np.sqrt(n)).astype(dtype)  # determinants within float32
    a[5, :, 1] = 0  # singular: an exactly zero column
    x = on(device, a)
    with pytest.raises(ts.linalg.LinAlgError, match=r"batch index \(5,\)"):
        ts.linalg.inv(x)
    with pytest.raises(ts.linalg.LinAlgError, match=r"batch index \(5,\)"):
        ts.linalg.solve(x, on(device, random_array(rng, (70, n, 1), dtype)))
    d = np.asarray(ts.linalg.det(x))
    assert d[5] == 0
    close(np.delete(d, 5), np.delete(np.linalg.det(_ref(a)), 5), dtype, n, 1e3)
    s = spd(rng, (70, n, n), dtype)
    s[9] = -np.eye(n)  # not positive definite
    with pytest.raises(ts.linalg.LinAlgError, match=r"batch index \(9,\)"):
        ts.linalg.cholesky(on(device, s))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("n", [4, 8, 17, 33])
@pytest.mark.parametrize("batch", [3, 70])
@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_and_svd_of_non_finite_input_give_nan_on_every_backend(device, rng, dtype, batch, n, bad):
    # The CPU's (NumPy's) behaviour on every backend and route: NaN results for the matrix that
    # holds the NaN or Inf, no LinAlgError, finite results for the others.
    h = hermitian(rng, (batch, n, n), dtype)
    h[1, n - 1, 0] = bad
    h[1, 0, n - 1] = bad
    x = on(device, h)
    w, v = (np.asarray(t) for t in ts.linalg.eigh(x))
    assert np.all(np.isnan(w[1])) and np.all(np.isfinite(np.delete(w, 1, axis=0)))
    assert not np.all(np.isfinite(v[1]))
    assert np.all(np.isnan(np.asarray(ts.linalg.eigvalsh(x))[1]))
    assert np.all(np.asarray(ts.linalg.eigh_ex(x)[2]) == 0)
    s = np.asarray(ts.linalg.svdvals(x))
    assert not np.all(np.isfinite(s[1])) and np.all(np.isfinite(np.delete(s, 1, axis=0)))
