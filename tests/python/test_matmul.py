"""ts.matmul / @ / vecdot / ts.linalg / ts.Matmul against NumPy in float64. Every body runs on cpu
and cuda (cuda skips without a GPU). Tolerances (METHOD): the error is measured against
|a| @ |b| (+ |bias|), the scale of the rounding errors: 2e-5 float32, 1e-12 float64, 2e-3 float16
and tf32, 1e-2 bfloat16 (one output rounding)."""
import math

import numpy as np
import pytest

import tessel as ts
from conftest import GPU, main_thread_stall, random_array

TOL = {"float32": 2e-5, "complex64": 2e-5, "float64": 1e-12, "complex128": 1e-12, "float16": 2e-3,
       "bfloat16": 1e-2, "tf32": 2e-3}
FLOAT_DTYPES = ["float32", "float64", "complex64", "complex128", "float16", "bfloat16"]
SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (1, 129, 3), (64, 1, 31), (5, 300, 4), (17, 9, 1)]
_erf = np.vectorize(math.erf)


def operand(rng, shape, dtype, device):
    """(tessel array, its exact values as float64/complex128 NumPy)."""
    if dtype == "bfloat16":
        x = ts.asarray(random_array(rng, shape, "float32"), device=device).astype(ts.bfloat16)
        return x, np.asarray(x).astype(np.float64)
    if dtype == "int8":
        v = rng.integers(-20, 20, size=shape).astype(np.int8)
        return ts.asarray(v, device=device), v.astype(np.int64)
    v = random_array(rng, shape, dtype)
    wide = np.complex128 if dtype.startswith("complex") else np.float64
    return ts.asarray(v, device=device), v.astype(wide)


def epilogue_ref(x, epilogue):
    if epilogue == "relu":
        return np.maximum(x, 0)
    if epilogue == "gelu":
        return 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    if epilogue == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x


def check(got, expected, scale, tol, dtype=None):
    """|got - expected| <= tol * scale elementwise (scale: |a| @ |b| + |bias| + ...)."""
    g = np.asarray(got)
    assert g.shape == np.shape(expected), f"shape {g.shape} != {np.shape(expected)}"
    if dtype is not None:
        want = "float32" if dtype == "bfloat16" else dtype
        assert g.dtype == np.dtype(want), f"dtype {g.dtype} != {want}"
    err = np.abs(g.astype(np.complex128) - expected)
    bound = tol * (np.asarray(scale) + 1e-30)
    assert np.all(err <= bound), f"max error / scale = {np.max(err / (np.asarray(scale) + 1e-30)):.3g} > {tol}"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("mkn", SHAPES)
def test_matmul_random_shapes(device, rng, dtype, mkn):
    m, k, n = mkn
    a, a64 = operand(rng, (m, k), dtype, device)
    b, b64 = operand(rng, (k, n), dtype, device)
    d = ts.matmul(a, b)
    assert d.device == device and d.dtype == getattr(ts, dtype)
    check(d, a64 @ b64, np.abs(a64) @ np.abs(b64), TOL[dtype], dtype)
    check(a @ b, a64 @ b64, np.abs(a64) @ np.abs(b64), TOL[dtype], dtype)
    check(ts.linalg.matmul(a, b), a64 @ b64, np.abs(a64) @ np.abs(b64), TOL[dtype], dtype)


def test_matmul_int8_into_an_int32_out_accumulates_in_int32(device, rng):
    a, a64 = operand(rng, (9, 70), "int8", device)
    b, b64 = operand(rng, (70, 5), "int8", device)
    if device.type == "cuda":
        pytest.skip("int8 on CUDA runs only where cuBLASLt offers the layout (B k-contiguous)")
    out = ts.full((9, 5), -7, dtype=ts.int32, device=device)
    d = ts.matmul(a, b, out=out)
    assert d.dtype == ts.int32
    np.testing.assert_array_equal(np.asarray(out), a64 @ b64)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
def test_matmul_small_integers_keep_their_dtype_exactly(device, rng, dtype):
    # The Array API: int8 @ int8 is int8 (NumPy's wrapping), whatever the layout; full-range values
    # and a long inner dimension, so every sum is exact only if computed exactly.
    info = np.iinfo(dtype)
    a_np = rng.integers(info.min, info.max, size=(2, 6, 700), endpoint=True).astype(dtype)
    b_np = rng.integers(info.min, info.max, size=(700, 3), endpoint=True).astype(dtype)
    a, b = ts.asarray(a_np, device=device), ts.asarray(b_np, device=device)
    for got in (a @ b, ts.matmul(a, b), ts.tensordot(a, b, axes=1), a[0, 0] @ b, a @ b[:, 1]):
        assert got.dtype == getattr(ts, dtype)
    np.testing.assert_array_equal(np.asarray(a @ b), a_np @ b_np)
    np.testing.assert_array_equal(np.asarray(ts.tensordot(a, b, axes=1)), np.tensordot(a_np, b_np, axes=1))
    np.testing.assert_array_equal(np.asarray(a[0, 0] @ b), a_np[0, 0] @ b_np)
    np.testing.assert_array_equal(np.asarray(a @ b[:, 1]), a_np @ b_np[:, 1])
    zero_d = ts.asarray(np.array(3, dtype), device=device)
    assert ts.tensordot(zero_d, zero_d, axes=((), ())).dtype == getattr(ts, dtype)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64", "uint8"])
def test_matmul_wide_integers_are_exact_and_wrap_as_numpy(device, rng, dtype):
    # Full-range values: every product and sum overflows, and NumPy's result is the wrapped exact sum.
    info = np.iinfo(dtype)
    a_np = rng.integers(info.min, info.max, size=(2, 5, 70), endpoint=True, dtype=dtype)
    b_np = rng.integers(info.min, info.max, size=(70, 3), endpoint=True, dtype=dtype)
    a, b = ts.asarray(a_np, device=device), ts.asarray(b_np, device=device)
    for got, want in [(a @ b, a_np @ b_np), (ts.matmul(a[0, 0], b), a_np[0, 0] @ b_np),
                      (ts.matmul(a, b[:, 0]), a_np @ b_np[:, 0]), (ts.matmul(a[0, 0], b[:, 1]), a_np[0, 0] @ b_np[:, 1]),
                      (a[:, ::-2, 1::2] @ b[::-2, ::-1], a_np[:, ::-2, 1::2] @ b_np[::-2, ::-1]),  # strided views
                      (a[:, :0] @ b, a_np[:, :0] @ b_np), (a[..., :0] @ b[:0], a_np[..., :0] @ b_np[:0])]:
        g = np.asarray(got)
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_array_equal(g, want)
    out = ts.full((2, 5, 3), 7, dtype=getattr(ts, dtype), device=device)
    assert ts.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(np.asarray(out), a_np @ b_np)
    with pytest.raises(ts.ShapeError, match=r"\(2, 5, 70\).*\(3, 3\)|\(3, 3\).*\(2, 5, 70\)"):
        ts.matmul(a, ts.asarray(np.ones((3, 3), dtype), device=device))
    with pytest.raises(ts.DTypeError, match=rf"matmul: out has dtype float64 but the result is {dtype}"):
        ts.matmul(a, b, out=ts.empty((2, 5, 3), dtype=ts.float64, device=device))
    with pytest.raises(ts.ShapeError, match=r"matmul: out has shape \(5, 3\)"):
        ts.matmul(a, b, out=ts.empty((5, 3), dtype=getattr(ts, dtype), device=device))
    with pytest.raises(ts.DTypeError, match=rf"matmul: {dtype} products take no bias, epilogue"):
        ts.matmul(a, b, epilogue="relu")


def test_matmul_integers_with_an_inner_dimension_past_the_exact_float64_sums(device, rng):
    # k > 2^21: the limb products are summed in chunks that the float64 GEMM adds exactly.
    k = 2**21 + 5
    a_np = rng.integers(-2**63, 2**63 - 1, size=k, endpoint=True, dtype=np.int64)
    b_np = rng.integers(-2**63, 2**63 - 1, size=(k, 2), endpoint=True, dtype=np.int64)
    got = ts.asarray(a_np, device=device) @ ts.asarray(b_np, device=device)
    np.testing.assert_array_equal(np.asarray(got), a_np @ b_np)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_matmul_vectors_and_broadcast_batches(device, rng, dtype):
    tol = TOL[dtype]
    cases = [((7,), (7, 4)), ((6, 7), (7,)), ((7,), (7,)), ((2, 1, 5, 7), (3, 7, 4)), ((3, 5, 7), (7, 4)),
             ((5, 7), (2, 3, 7, 4)), ((4, 7), (1, 7, 2)), ((0, 7), (7, 3)), ((2, 0, 4), (2, 4, 3)), ((5, 0), (0, 3))]
    for sa, sb in cases:
        a, a64 = operand(rng, sa, dtype, device)
        b, b64 = operand(rng, sb, dtype, device)
        check(a @ b, a64 @ b64, np.abs(a64) @ np.abs(b64), tol, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_matmul_transposed_sliced_and_reversed_views(device, rng, dtype):
    tol = TOL[dtype]
    at, at64 = operand(rng, (19, 11), dtype, device)   # a = at.T: (11, 19), k-strided
    bt, bt64 = operand(rng, (6, 19), dtype, device)    # b = bt.T: (19, 6)
    check(at.T @ bt.T, at64.T @ bt64.T, np.abs(at64.T) @ np.abs(bt64.T), tol, dtype)
    check(ts.matmul(at.T, bt.mT), at64.T @ bt64.T, np.abs(at64.T) @ np.abs(bt64.T), tol, dtype)
    big, big64 = operand(rng, (4, 30, 40), dtype, device)
    a = big[1:3, ::2, 5:24]      # (2, 15, 19): row step 2, column slice
    b, b64 = operand(rng, (19, 8), dtype, device)
    check(a @ b, big64[1:3, ::2, 5:24] @ b64, np.abs(big64[1:3, ::2, 5:24]) @ np.abs(b64), tol, dtype)
    a = big[:, ::-1, ::-2][..., :19]  # negative strides in both matrix dimensions
    ref = big64[:, ::-1, ::-2][..., :19]
    check(a @ b, ref @ b64, np.abs(ref) @ np.abs(b64), tol, dtype)
    check(ts.matrix_transpose(big) @ big[0], np.swapaxes(big64, -1, -2) @ big64[0],
          np.abs(np.swapaxes(big64, -1, -2)) @ np.abs(big64[0]), tol, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("epilogue", ["none", "relu", "gelu", "gelu_tanh"])
def test_matmul_epilogues_bias_alpha_beta_aux(device, rng, dtype, epilogue):
    m, k, n = 13, 37, 9
    a, a64 = operand(rng, (2, m, k), dtype, device)
    b, b64 = operand(rng, (k, n), dtype, device)
    bias, bias64 = operand(rng, (n,), dtype, device)
    c, c64 = operand(rng, (m, n), dtype, device)
    scale = np.abs(a64) @ np.abs(b64) + np.abs(bias64)
    tol = TOL[dtype]
    pre = a64 @ b64 + bias64
    check(ts.matmul(a, b, bias=bias, epilogue=epilogue), epilogue_ref(pre, epilogue), scale, tol, dtype)
    check(ts.matmul(a, b, epilogue=epilogue), epilogue_ref(a64 @ b64, epilogue), scale, tol, dtype)
    pre = 0.5 * (a64 @ b64) + 0.25 * c64 + bias64
    scale2 = 0.5 * np.abs(a64) @ np.abs(b64) + 0.25 * np.abs(c64) + np.abs(bias64)
    d = ts.matmul(a, b, bias=bias, epilogue=epilogue, alpha=0.5, beta=0.25, c=c)
    check(d, epilogue_ref(pre, epilogue), scale2, tol, dtype)
    if epilogue != "none":
        d, aux = ts.matmul(a, b, bias=bias, epilogue=epilogue, alpha=0.5, beta=0.25, c=c, aux=True)
        check(aux, pre, scale2, tol, dtype)
        check(d, epilogue_ref(pre, epilogue), scale2, tol, dtype)
        if epilogue == "relu":  # the mask is aux > 0
            np.testing.assert_array_equal(np.asarray(d) > 0, np.asarray(aux) > 0)


def activation_grad_ref(g, z, epilogue):
    """g * act'(z) in float64 (ReLU: where(z > 0, g, 0), as torch's threshold_backward)."""
    if epilogue == "relu_grad":
        return np.where(z > 0, g, 0.0)
    if epilogue == "gelu_grad":
        return g * (0.5 * (1 + _erf(z / math.sqrt(2))) + z * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi))
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (z + 0.044715 * z**3))
    return g * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("epilogue", ["relu_grad", "gelu_grad", "gelu_tanh_grad"])
@pytest.mark.parametrize("n", [9, 16])  # 16: an aux that cuBLASLt's DGELU can read (rows of 16 bytes)
def test_matmul_grad_epilogues_and_bias_grad(device, rng, dtype, epilogue, n):
    m, k = 21, 37
    a, a64 = operand(rng, (m, k), dtype, device)
    b, b64 = operand(rng, (k, n), dtype, device)
    z, z64 = operand(rng, (m, n), dtype, device)  # the forward's aux
    want = activation_grad_ref(a64 @ b64, z64, epilogue)
    scale = 1.2 * (np.abs(a64) @ np.abs(b64))  # |act'(z)| <= 1.13 for the GELUs, 1 for the ReLU
    tol = TOL[dtype]
    d = ts.matmul(a, b, epilogue=epilogue, aux=z)
    check(d, want, scale, tol, dtype)
    d, bias_grad = ts.matmul(a, b, epilogue=epilogue, aux=z, bias_grad=True)
    check(d, want, scale, tol, dtype)
    check(bias_grad, want.sum(axis=0), scale.sum(axis=0), tol, dtype)
    # alpha, beta and c come before the derivative; a transposed view of a runs too
    c, c64 = operand(rng, (m, n), dtype, device)
    aT = ts.asarray(np.ascontiguousarray(np.asarray(a).T), device=device).astype(a.dtype).T
    d, bias_grad = ts.matmul(aT, b, epilogue=epilogue, aux=z, alpha=0.5, beta=0.25, c=c, bias_grad=True)
    want = activation_grad_ref(0.5 * (a64 @ b64) + 0.25 * c64, z64, epilogue)
    scale = 1.2 * (0.5 * np.abs(a64) @ np.abs(b64) + 0.25 * np.abs(c64))
    check(d, want, scale, tol, dtype)
    check(bias_grad, want.sum(axis=0), scale.sum(axis=0), tol, dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_matmul_bias_grad_batches_empty_and_plain(device, rng, dtype):
    """bias_grad sums over every row of every batch; over no rows it is zeros; any epilogue."""
    a, a64 = operand(rng, (3, 5, 7), dtype, device)
    b, b64 = operand(rng, (7, 16), dtype, device)
    d, bias_grad = ts.matmul(a, b, bias_grad=True)
    want = a64 @ b64
    scale = np.abs(a64) @ np.abs(b64)
    check(d, want, scale, TOL[dtype], dtype)
    check(bias_grad, want.sum(axis=(0, 1)), scale.sum(axis=(0, 1)), TOL[dtype], dtype)
    z, z64 = operand(rng, (3, 5, 16), dtype, device)
    d, bias_grad = ts.matmul(a, b, epilogue="gelu_tanh_grad", aux=z, bias_grad=True)
    want = activation_grad_ref(a64 @ b64, z64, "gelu_tanh_grad")
    check(bias_grad, want.sum(axis=(0, 1)), 1.2 * scale.sum(axis=(0, 1)), TOL[dtype], dtype)
    v, v64 = operand(rng, (7,), dtype, device)  # a 1-D b: one column, one sum
    d, bias_grad = ts.matmul(a, v, bias_grad=True)
    assert d.shape == (3, 5) and bias_grad.shape == (1,)
    check(bias_grad, [(a64 @ v64).sum()], [(np.abs(a64) @ np.abs(v64)).sum()], TOL[dtype], dtype)
    empty, _ = operand(rng, (0, 7), dtype, device)
    d, bias_grad = ts.matmul(empty, b, bias_grad=True)
    assert d.shape == (0, 16) and bias_grad.shape == (16,)
    np.testing.assert_array_equal(np.asarray(bias_grad), np.zeros(16))
    no_k, _ = operand(rng, (4, 0), dtype, device)
    d, bias_grad = ts.matmul(no_k, ts.ones((0, 16), dtype=a.dtype, device=device), epilogue="relu_grad",
                             aux=ts.ones((4, 16), dtype=a.dtype, device=device), bias_grad=True)
    np.testing.assert_array_equal(np.asarray(d).astype(np.float64), np.zeros((4, 16)))
    np.testing.assert_array_equal(np.asarray(bias_grad).astype(np.float64), np.zeros(16))


def test_matmul_grad_epilogue_errors(device, rng):
    a, _ = operand(rng, (4, 5), "float32", device)
    b, _ = operand(rng, (5, 6), "float32", device)
    z, _ = operand(rng, (4, 6), "float32", device)
    with pytest.raises(ValueError, match="gelu_tanh_grad needs aux"):
        ts.matmul(a, b, epilogue="gelu_tanh_grad")
    with pytest.raises(ValueError, match="takes no bias"):
        ts.matmul(a, b, epilogue="relu_grad", aux=z, bias=ts.ones((6,), device=device))
    with pytest.raises(ValueError, match=r"aux has shape \(4, 5\)"):
        ts.matmul(a, b, epilogue="gelu_grad", aux=ts.ones((4, 5), device=device))
    with pytest.raises(TypeError, match="aux has dtype float64"):
        ts.matmul(a, b, epilogue="gelu_grad", aux=ts.ones((4, 6), dtype=ts.float64, device=device))
    with pytest.raises(TypeError, match="aux must be True or False with epilogue relu"):
        ts.matmul(a, b, epilogue="relu", aux=z)
    with pytest.raises(TypeError, match="bias_grad are supported for real floating dtypes only"):
        ts.matmul(a.astype(ts.complex64), b.astype(ts.complex64), bias_grad=True)
    with pytest.raises(ValueError, match="unknown epilogue"):
        ts.matmul(a, b, epilogue="swish_grad", aux=z)


def test_matmul_out_and_compute_modes(device, rng):
    a, a64 = operand(rng, (21, 40), "float32", device)
    b, b64 = operand(rng, (40, 10), "float32", device)
    ref, scale = a64 @ b64, np.abs(a64) @ np.abs(b64)
    out = ts.full((21, 10), float("nan"), device=device)
    r = ts.matmul(a, b, out=out)
    check(out, ref, scale, TOL["float32"])
    np.testing.assert_array_equal(np.asarray(r), np.asarray(out))
    check(ts.matmul(a, b, compute="fp32"), ref, scale, TOL["float32"])
    check(ts.matmul(a, b, compute="tf32"), ref, scale, TOL["tf32"])
    out_t = ts.full((10, 21), float("nan"), device=device)   # a transposed out view
    ts.matmul(a, b, out=out_t.T)
    check(out_t.T, ref, scale, TOL["float32"])
    x = ts.asarray(np.asarray(a), device=device)
    x @= ts.eye(40, device=device)
    check(x, a64, np.abs(a64), TOL["float32"])


def test_matmul_mixed_dtypes_promote_and_numpy_operands(device, rng):
    a, a64 = operand(rng, (6, 8), "float32", device)
    b_np = random_array(rng, (8, 3), "float64")
    b = ts.asarray(b_np, device=device)
    r = a @ b
    assert r.dtype == ts.float64
    check(r, a64 @ b_np, np.abs(a64) @ np.abs(b_np), 1e-12)
    if device.type == "cpu":
        r = b_np.T @ ts.asarray(a64.T, device=device)  # NumPy defers to Array.__rmatmul__
        assert isinstance(r, ts.Array)
        check(r, b_np.T @ a64.T, np.abs(b_np.T) @ np.abs(a64.T), 1e-12)
    assert (a.__matmul__(object())) is NotImplemented


def test_matmul_non_finite_propagates(device, rng):
    a_np = random_array(rng, (4, 6), "float32")
    a_np[1, 2] = np.nan
    a_np[2, 3] = np.inf
    b_np = np.abs(random_array(rng, (6, 5), "float32")) + 0.5
    d = np.asarray(ts.asarray(a_np, device=device) @ ts.asarray(b_np, device=device))
    assert np.all(np.isnan(d[1])) and np.all(np.isposinf(d[2]))
    assert np.all(np.isfinite(d[[0, 3]]))


def test_matmul_errors(device, rng):
    a = ts.asarray(random_array(rng, (3, 4), "float32"), device=device)
    b = ts.asarray(random_array(rng, (5, 2), "float32"), device=device)
    with pytest.raises(ts.ShapeError, match=r"\(3, 4\).*\(5, 2\)"):
        ts.matmul(a, b)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\)"):
        a @ b
    ok = ts.asarray(random_array(rng, (4, 2), "float32"), device=device)
    with pytest.raises(ValueError, match="epilogue"):
        ts.matmul(a, ok, epilogue="swish")
    with pytest.raises(ValueError, match="compute"):
        ts.matmul(a, ok, compute="fp8")
    with pytest.raises(ts.ShapeError, match="bias"):
        ts.matmul(a, ok, bias=ts.zeros(3, device=device))
    with pytest.raises(ts.DTypeError, match="bias"):
        ts.matmul(a, ok, bias=ts.zeros(2, dtype=ts.float64, device=device))
    with pytest.raises(ts.ShapeError, match="out"):
        ts.matmul(a, ok, out=ts.zeros((3, 3), device=device))
    with pytest.raises(ts.DTypeError, match="out"):
        ts.matmul(a, ok, out=ts.zeros((3, 2), dtype=ts.float64, device=device))
    with pytest.raises(ValueError, match="aux"):
        ts.matmul(a, ok, aux=True)
    with pytest.raises(ValueError, match="beta"):
        ts.matmul(a, ok, beta=1.0)
    with pytest.raises(ValueError, match="tf32"):
        ts.matmul(a.astype(ts.float64), ok.astype(ts.float64), compute="tf32")
    with pytest.raises(ts.DTypeError, match="complex64"):
        ts.matmul(a.astype(ts.complex64), ok.astype(ts.complex64), epilogue="relu")
    with pytest.raises(ts.DTypeError):
        ts.matmul(a > 0, ok > 0)
    with pytest.raises(ts.ShapeError):
        ts.matmul(ts.asarray(1.0, device=device), ok)
    with pytest.raises(TypeError):
        ts.matmul(a, ok, bogus=1)
    with pytest.raises(TypeError, match="out must be a tessel.Array"):
        ts.matmul(a, ok, out=np.zeros((3, 2), np.float32))
    with pytest.raises(TypeError):
        ts.matmul(a, 2.0)
    with pytest.raises(TypeError):
        a @ 2.0
    with pytest.raises(ts.ShapeError, match="__imatmul__"):
        x = ts.zeros((3, 4), device=device)
        x @= ok
    if device.type == "cuda":
        with pytest.raises(ts.DeviceError, match="cpu"):
            ts.matmul(a, ts.asarray(np.asarray(ok), device="cpu"))
        with pytest.raises(ts.DeviceError):
            ts.matmul(a, ok, bias=ts.zeros(2, device="cpu"))


def test_matmul_mixed_devices(rng):
    if not ts.cuda_available():
        pytest.skip(f"CUDA unavailable: {ts.cuda_unavailable_reason()}")
    a = ts.asarray(random_array(rng, (3, 4), "float32"), device=GPU)
    b = ts.asarray(random_array(rng, (4, 2), "float32"), device="cpu")
    with pytest.raises(ts.DeviceError, match=rf"{GPU}.*cpu|cpu.*{GPU}"):
        ts.matmul(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "int32"])
def test_vecdot(device, rng, dtype):
    x1_np = random_array(rng, (3, 1, 7), dtype)
    x2_np = random_array(rng, (4, 7), dtype)
    x1, x2 = ts.asarray(x1_np, device=device), ts.asarray(x2_np, device=device)
    want = np.sum(np.conj(x1_np.astype(np.complex128)) * x2_np, axis=-1)
    got = ts.vecdot(x1, x2)
    assert got.shape == (3, 4) and got.dtype == getattr(ts, dtype)
    scale = np.sum(np.abs(x1_np.astype(np.complex128)) * np.abs(x2_np), axis=-1)
    check(got, want, scale, TOL.get(dtype, 0))
    check(ts.linalg.vecdot(x1, x2), want, scale, TOL.get(dtype, 0))
    y1 = ts.asarray(random_array(rng, (5, 2), dtype), device=device)
    y1_np = np.asarray(y1)
    want0 = np.sum(np.conj(y1_np.astype(np.complex128)) * y1_np, axis=0)
    check(ts.vecdot(y1, y1, axis=-2), want0, np.sum(np.abs(y1_np.astype(np.complex128)) ** 2, axis=0), TOL.get(dtype, 0))
    with pytest.raises(ts.ShapeError, match=r"\(3, 1, 7\).*\(4, 6\)"):
        ts.vecdot(x1, ts.asarray(random_array(rng, (4, 6), dtype), device=device))


def test_linalg_composed_functions(device, rng):
    la = ts.linalg
    x_np = random_array(rng, (2, 4, 5), "float64")
    y_np = random_array(rng, (5, 3, 4), "float64")
    x, y = ts.asarray(x_np, device=device), ts.asarray(y_np, device=device)
    for axes in [1, ((1, 2), (2, 0)), ([2], [0])]:
        want = np.tensordot(x_np, y_np, axes=axes)
        check(la.tensordot(x, y, axes=axes), want, np.tensordot(np.abs(x_np), np.abs(y_np), axes=axes), 1e-12)
    check(ts.tensordot(x, x, axes=3), np.tensordot(x_np, x_np, axes=3), np.sum(x_np * x_np), 1e-12)
    check(ts.tensordot(x[0, 0], y[0, 0], axes=0), np.tensordot(x_np[0, 0], y_np[0, 0], axes=0),
          np.abs(np.multiply.outer(x_np[0, 0], y_np[0, 0])), 1e-12)
    with pytest.raises(ts.ShapeError, match="contracted"):
        la.tensordot(x, y, axes=((1,), (1,)))
    v, w = x[0, 0], y[0, :, 0]
    check(la.outer(v, w), np.outer(x_np[0, 0], y_np[0, :, 0]), 1.0, 1e-15)
    assert la.matrix_transpose(x).shape == (2, 5, 4)
    for offset in [0, 1, -2, 7]:
        check(la.diagonal(x, offset=offset), np.diagonal(x_np, offset, -2, -1), 1.0, 1e-15)
        check(la.trace(x, offset=offset), np.trace(x_np, offset, -2, -1), 10.0, 1e-14)
    c1, c2 = random_array(rng, (4, 3), "float64"), random_array(rng, (3,), "float64")
    check(la.cross(ts.asarray(c1, device=device), ts.asarray(c2, device=device)), np.cross(c1, c2), 10.0, 1e-14)
    check(la.cross(ts.asarray(c1.T.copy(), device=device), ts.asarray(c1.T.copy(), device=device), axis=-2),
          np.cross(c1.T, c1.T, axis=0), 10.0, 1e-14)
    sq_np = random_array(rng, (2, 4, 4), "float64") / 2
    sq = ts.asarray(sq_np, device=device)
    for n in [0, 1, 2, 5]:
        check(la.matrix_power(sq, n), np.linalg.matrix_power(sq_np, n), 10.0, 1e-12)
    check(la.matrix_power(sq, -1), np.linalg.inv(sq_np), 1e3, 1e-10)  # more in test_linalg.py
    z_np = random_array(rng, (3, 6), "complex128")
    z = ts.asarray(z_np, device=device)
    for ord in [2, 1, math.inf, -math.inf, 0, 3, 0.5]:
        check(la.vector_norm(z, ord=ord), np.linalg.norm(z_np.ravel(), ord=ord), np.linalg.norm(z_np.ravel(), ord=ord), 1e-12)
        check(la.vector_norm(z, axis=1, ord=ord, keepdims=True),
              np.linalg.norm(z_np, ord=ord, axis=1, keepdims=True), 10.0, 1e-12)
    for ord in ["fro", 1, -1, math.inf, -math.inf]:
        check(la.matrix_norm(x, ord=ord), np.linalg.norm(x_np, ord=ord, axis=(-2, -1)), 10.0, 1e-12)
        check(la.matrix_norm(x, ord=ord, keepdims=True),
              np.linalg.norm(x_np, ord=ord, axis=(-2, -1), keepdims=True), 10.0, 1e-12)
    check(la.matrix_norm(x, ord="nuc"), np.linalg.norm(x_np, ord="nuc", axis=(-2, -1)), 10.0, 1e-12)


def test_namespace_advertises_extensions():
    assert hasattr(ts, "linalg") and hasattr(ts, "fft")
    assert ts.__array_namespace_info__().extensions() == ["fft", "linalg"]
    import types
    assert isinstance(ts.fft, types.ModuleType) and isinstance(ts.linalg, types.ModuleType)
    assert ts.linalg.matmul is ts.matmul and ts.linalg.vecdot is ts.vecdot
    assert ts.matrix_transpose is ts.linalg.matrix_transpose and ts.tensordot is ts.linalg.tensordot


@pytest.fixture
def matmul_cache(tmp_path):
    """The autotune disk cache in a temporary folder (TESSEL_CACHE_DIR is read once per process,
    so setting it here would be too late), restored afterwards."""
    ts.set_matmul_cache_dir(str(tmp_path))
    ts.clear_matmul_memory_cache()
    yield tmp_path
    ts.set_matmul_cache_dir("")
    ts.clear_matmul_memory_cache()


@pytest.fixture
def autotune_on():
    """matmul autotuning on first use, on for one test (it is process-wide) and off after it."""
    assert not ts.matmul_autotune()
    ts.set_matmul_autotune(True)
    yield
    ts.set_matmul_autotune(False)


def test_matmul_autotune_on_first_use(device, rng, matmul_cache, autotune_on):
    assert ts.matmul_autotune()
    a, a64 = operand(rng, (48, 40), "float32", device)
    b, b64 = operand(rng, (40, 24), "float32", device)
    bias, bias64 = operand(rng, (24,), "float32", device)
    scale = np.abs(a64) @ np.abs(b64) + np.abs(bias64)
    check(ts.matmul(a, b, bias=bias, epilogue="relu"), np.maximum(a64 @ b64 + bias64, 0), scale, TOL["float32"])
    check(ts.matmul(a, b, bias=bias, epilogue="relu"), np.maximum(a64 @ b64 + bias64, 0), scale, TOL["float32"])
    plan = ts.Matmul(a, b, bias=bias, epilogue="relu")
    tuned = len(plan.algorithms) > 1  # CUDA; the CPU has one candidate and nothing to tune
    assert plan.from_cache == tuned
    assert len(list(matmul_cache.glob("*.json"))) == (1 if tuned else 0)
    # A derivative epilogue with bias_grad (tt.mlp's backward GEMM): the product and the column
    # sums are two products, each tuned on its first use.
    z, z64 = operand(rng, (48, 24), "float32", device)
    d, grad = ts.matmul(a, b, epilogue="relu_grad", aux=z, bias_grad=True)
    expected = (a64 @ b64) * (z64 > 0)
    check(d, expected, scale, TOL["float32"])
    check(grad, expected.sum(axis=0), np.abs(expected).sum(axis=0) + scale.sum(axis=0), TOL["float32"])
    # two more winners: the derivative product's, and the column sums' product's where cuBLASLt
    # offers that m = 1 product more than one algorithm
    stored = len(list(matmul_cache.glob("*.json")))
    assert stored in (2, 3) if tuned else stored == 0


def test_matmul_autotune_switch_takes_a_bool():
    with pytest.raises(TypeError):
        ts.set_matmul_autotune("yes")
    assert not ts.matmul_autotune()


def test_matmul_plan_execute_alpha_keeps_or_replaces(device, rng, matmul_cache):
    a, a64 = operand(rng, (12, 20), "float32", device)
    b, b64 = operand(rng, (20, 9), "float32", device)
    plan = ts.Matmul(a, b, alpha=2.0)
    scale = np.abs(a64) @ np.abs(b64)
    check(plan.execute(), 2.0 * (a64 @ b64), 2.0 * scale, TOL["float32"])           # planned alpha
    check(plan.execute(a, b), 2.0 * (a64 @ b64), 2.0 * scale, TOL["float32"])       # alpha not given
    check(plan.execute(a, b, alpha=1.0), a64 @ b64, scale, TOL["float32"])          # 1.0 is used, not "unset"
    assert str(matmul_cache) == ts.matmul_cache_dir()


def test_matmul_plan(device, rng, matmul_cache):
    a, a64 = operand(rng, (3, 24, 40), "float32", device)
    b, b64 = operand(rng, (40, 18), "float32", device)
    bias, bias64 = operand(rng, (18,), "float32", device)
    plan = ts.Matmul(a, b, bias=bias, epilogue="relu")
    names = [c.name for c in plan.algorithms]
    assert names and plan.selected.name in names and isinstance(plan.from_cache, bool)
    assert "Matmul(" in repr(plan) and plan.cache_key
    tuned = plan.autotune(iterations=3)
    assert [c.name for c in tuned] == names
    assert any(c.ok and c.time_ms >= 0 for c in tuned), tuned
    assert plan.selected.name in names
    scale = np.abs(a64) @ np.abs(b64) + np.abs(bias64)
    check(plan.execute(), np.maximum(a64 @ b64 + bias64, 0), scale, TOL["float32"])
    for _ in range(2):  # new data, same layout
        a2, a2_64 = operand(rng, (3, 24, 40), "float32", device)
        b2, b2_64 = operand(rng, (40, 18), "float32", device)
        out = ts.full((3, 24, 18), float("nan"), device=device)
        r = plan.execute(a2, b2, out=out)
        check(out, np.maximum(a2_64 @ b2_64 + bias64, 0), np.abs(a2_64) @ np.abs(b2_64) + np.abs(bias64), TOL["float32"])
        np.testing.assert_array_equal(np.asarray(r), np.asarray(out))
    bias2, bias2_64 = operand(rng, (18,), "float32", device)
    check(plan.execute(a, b, bias=bias2), np.maximum(a64 @ b64 + bias2_64, 0),
          np.abs(a64) @ np.abs(b64) + np.abs(bias2_64), TOL["float32"])
    runnable = [i for i, c in enumerate(tuned) if c.ok]  # a candidate may fail to run for a layout
    plan.pin(runnable[0])
    assert plan.selected.name == names[runnable[0]] and not plan.from_cache
    check(plan.execute(), np.maximum(a64 @ b64 + bias64, 0), scale, TOL["float32"])
    plan.pin(names[runnable[-1]])
    assert plan.selected.name == names[runnable[-1]]
    check(plan.execute(), np.maximum(a64 @ b64 + bias64, 0), scale, TOL["float32"])
    with pytest.raises(ts.IndexError, match="out of range"):
        plan.pin(len(names))
    with pytest.raises(ValueError, match="no candidate named"):
        plan.pin("nope")
    with pytest.raises(TypeError):
        plan.pin(1.5)
    with pytest.raises(ValueError, match="layout"):
        plan.execute(a.mT.copy().mT, b)  # same shape, other strides
    with pytest.raises(ValueError, match="layout|shape"):
        plan.execute(a[:, :20], b[:40])
    with pytest.raises(ValueError, match="both"):
        plan.execute(a)
    # A restarted process finds the winner on disk.
    ts.clear_matmul_memory_cache()
    again = ts.Matmul(a, b, bias=bias, epilogue="relu")
    assert again.cache_key == plan.cache_key
    assert again.from_cache, "the autotune winner was not read back from the disk cache"
    # The winner: the best back-to-back finalist when the autotune's second phase ran, else the
    # best single-run time.
    finalists = [c for c in tuned if c.sustained_ms >= 0]
    assert len(finalists) != 1 and len(finalists) <= 4, tuned
    if finalists:
        winner = min(finalists, key=lambda c: c.sustained_ms)
    else:
        winner = min((c for c in tuned if c.ok and c.time_ms >= 0), key=lambda c: c.time_ms)
    assert again.selected.name == winner.name


def test_matmul_plan_aux(device, rng):
    a, a64 = operand(rng, (9, 16), "float32", device)
    b, b64 = operand(rng, (16, 7), "float32", device)
    plan = ts.Matmul(a, b, epilogue="gelu", aux=True)
    plan.autotune(iterations=2)
    d1, aux1 = plan.execute()
    a2, a2_64 = operand(rng, (9, 16), "float32", device)
    d2, aux2 = plan.execute(a2, b)
    assert aux1.data_ptr != aux2.data_ptr  # each execute returns a fresh aux
    scale = np.abs(a64) @ np.abs(b64)
    check(aux1, a64 @ b64, scale, TOL["float32"])
    check(d1, epilogue_ref(a64 @ b64, "gelu"), scale, TOL["float32"])
    check(aux2, a2_64 @ b64, np.abs(a2_64) @ np.abs(b64), TOL["float32"])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_matmul_plan_grad_epilogue(device, rng, dtype):
    a, a64 = operand(rng, (24, 32), dtype, device)
    b, b64 = operand(rng, (32, 16), dtype, device)
    z, z64 = operand(rng, (24, 16), dtype, device)
    plan = ts.Matmul(a, b, epilogue="gelu_tanh_grad", aux=z, bias_grad=True)
    plan.autotune(iterations=2)
    scale = 1.2 * (np.abs(a64) @ np.abs(b64))
    for aux, aux64 in ((None, z64), operand(rng, (24, 16), dtype, device)):
        d, bias_grad = plan.execute(a, b, aux=aux)
        want = activation_grad_ref(a64 @ b64, aux64, "gelu_tanh_grad")
        check(d, want, scale, TOL[dtype])
        check(bias_grad, want.sum(axis=0), scale.sum(axis=0), TOL[dtype])
    if device == "cuda" and dtype == "bfloat16":
        # aligned rows: every candidate is cuBLASLt's fused DGELU, none runs a separate derivative kernel
        assert plan.algorithms and all(c.name.startswith("cublaslt:") and "unfused" not in c.name
                                       for c in plan.algorithms), [c.name for c in plan.algorithms]
    with pytest.raises(ValueError, match="aux= is the input of"):
        ts.Matmul(a, b, epilogue="gelu", aux=True).execute(a, b, aux=z)


def test_torch_interop_of_matmul_results():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available() or not ts.cuda_available():
        pytest.skip("torch interop of matmul results runs on the GPU machine (needs CUDA in torch and tessel)")
    ta = torch.randn(64, 48, device="cuda", dtype=torch.float32)
    tb = torch.randn(48, 32, device="cuda", dtype=torch.float32)
    bias = torch.randn(32, device="cuda", dtype=torch.float32)
    a, b, tbias = ts.from_dlpack(ta), ts.from_dlpack(tb), ts.from_dlpack(bias)
    d = torch.from_dlpack(ts.matmul(a, b, bias=tbias, epilogue="relu", compute="fp32"))
    want = torch.relu(ta.double() @ tb.double() + bias.double())
    scale = ta.double().abs() @ tb.double().abs() + bias.double().abs()
    assert d.shape == (64, 32) and d.dtype == torch.float32 and d.device.type == "cuda"
    assert bool(((d.double() - want).abs() <= TOL["float32"] * scale).all())
    hb = torch.randn(2, 16, 8, device="cuda", dtype=torch.bfloat16)
    hc = torch.randn(8, 4, device="cuda", dtype=torch.bfloat16)
    r = torch.from_dlpack(ts.from_dlpack(hb) @ ts.from_dlpack(hc))
    want = hb.double() @ hc.double()
    assert bool(((r.double() - want).abs() <= TOL["bfloat16"] * (hb.double().abs() @ hc.double().abs())).all())


def test_gil_is_released_while_products_and_cpu_ffts_run():
    import time

    def timed(op):
        t0 = time.perf_counter()
        op()
        return time.perf_counter() - t0

    def sized(make, sizes):
        """The first operation of `sizes` that takes >= 0.1 s (so a held GIL would be visible)."""
        for size in sizes:
            op = make(size)
            once = timed(op)
            if once >= 0.1:
                break
        return op, once

    def matmul_op(n):
        a = ts.random.uniform(-1, 1, (n, n), dtype=ts.float64, device="cpu")
        return lambda: ts.matmul(a, a)

    def plan_op(n):
        a = ts.random.uniform(-1, 1, (n, n), dtype=ts.float64, device="cpu")
        plan = ts.Matmul(a, a)
        return lambda: plan.execute(a, a)

    def fft_op(rows):
        x = ts.random.uniform(-1, 1, (rows, 30030), dtype=ts.float64, device="cpu").astype(ts.complex128)
        return lambda: ts.fft.fft(x)

    for name, make, sizes in [("matmul", matmul_op, [768, 1024, 1536, 2048, 3072, 4096]),
                              ("Matmul.execute", plan_op, [768, 1024, 1536, 2048, 3072, 4096]),
                              ("fft", fft_op, [32, 128, 512, 1024])]:
        op, once = sized(make, sizes)
        gap, _ = main_thread_stall(op)
        # Holding the GIL would stall the main thread for the whole call (gap ~ once).
        assert gap < 0.5 * once, f"{name}: the main thread stalled {gap:.3f} s during a {once:.3f} s call (GIL held?)"
