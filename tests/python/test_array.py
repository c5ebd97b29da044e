"""Array API namespace against NumPy: creation, indexing views, elementwise ops with promotion,
reductions, sorting, manipulation. Every body runs on cpu and cuda."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tessel as ts
from conftest import assert_close, random_array


def test_import_and_namespace():
    assert ts.__array_api_version__ == "2025.12"
    x = ts.zeros(3)
    assert x.__array_namespace__() is ts
    info = ts.__array_namespace_info__()
    assert info.default_device() == ts.default_device()
    # Only Array API dtypes: float16 and bfloat16 are tessel extras.
    assert "float32" in info.dtypes() and "bfloat16" not in info.dtypes() and "float16" not in info.dtypes()
    assert info.dtypes(kind="integral").keys() == {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    assert ts.Device("cpu") in info.devices()
    assert ts.newaxis is None and ts.e == math.e and ts.pi == math.pi and math.isinf(ts.inf) and math.isnan(ts.nan)
    assert ts.bool is not bool and str(ts.bool) == "bool"


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool", "complex64", "float16"])
def test_creation_and_roundtrip(device, rng, dtype):
    ref = random_array(rng, (3, 4), dtype)
    x = ts.asarray(ref, device=device)
    assert x.device == device and x.shape == (3, 4) and x.dtype == getattr(ts, dtype) and x.ndim == 2 and x.size == 12
    assert_close(x, ref)
    assert x.tolist() == ref.tolist()
    assert_close(ts.zeros((2, 3), dtype=dtype, device=device), np.zeros((2, 3), dtype))
    assert_close(ts.ones((2,), dtype=dtype, device=device), np.ones((2,), dtype))
    assert_close(ts.empty_like(x).shape and ts.zeros_like(x), np.zeros_like(ref))
    assert_close(ts.ones_like(x), np.ones_like(ref))


def test_creation_functions(device):
    assert_close(ts.arange(5, device=device), np.arange(5))
    assert_close(ts.arange(1, 10, 3, device=device), np.arange(1, 10, 3))
    assert_close(ts.arange(0.0, 1.0, 0.25, device=device), np.arange(0.0, 1.0, 0.25, dtype="float32"))
    assert_close(ts.linspace(0, 1, 5, device=device), np.linspace(0, 1, 5, dtype="float32"))
    assert_close(ts.eye(3, 4, k=1, dtype=ts.float64, device=device), np.eye(3, 4, k=1))
    assert_close(ts.full((2, 2), 7, device=device), np.full((2, 2), 7))
    assert_close(ts.full((2, 2), 1.5, dtype=ts.float64, device=device), np.full((2, 2), 1.5))
    assert_close(ts.full_like(ts.zeros(3, device=device), 2.5), np.full(3, 2.5, "float32"))
    a = np.arange(12.0).reshape(3, 4)
    assert_close(ts.tril(ts.asarray(a, device=device), k=0), np.tril(a))
    assert_close(ts.triu(ts.asarray(a, device=device), k=1), np.triu(a, 1))
    xs, ys = ts.meshgrid(ts.arange(3, device=device), ts.arange(2, device=device))
    want_x, want_y = np.meshgrid(np.arange(3), np.arange(2))
    assert_close(xs, want_x)
    assert_close(ys, want_y)


@pytest.mark.parametrize("n_rows, n_cols, k", [(3, 4, 1), (3, 4, -2), (4, 3, 3), (4, 3, -4), (3, None, 5), (0, None, 2**63),
                                             (3, None, 2**70), (3, 4, -2**70), (2, 5, 2**63 - 1), (5, 2, -2**63)])
def test_eye_takes_any_diagonal(device, n_rows, n_cols, k):
    # The Array API's k is any Python int; one past an edge (or far past, beyond int64) is all zeros.
    assert_close(ts.eye(n_rows, n_cols, k=k, dtype=ts.float64, device=device), np.eye(n_rows, n_cols, k=k))


def test_full_takes_a_zero_dimensional_array(device):
    """fill_value may be a 0-d array (tessel's or NumPy's) or a NumPy scalar, as NumPy's full takes
    them: its value fills, and its dtype is the default."""
    x = ts.asarray([False, True], device=device)
    got = ts.full((3,), x[1], dtype=x.dtype, device=device)
    assert got.dtype == ts.bool and got.tolist() == [True, True, True]
    got = ts.full((2,), ts.asarray(2.5, dtype=ts.float64, device=device), device=device)
    assert got.dtype == ts.float64 and got.tolist() == [2.5, 2.5]
    for value in (np.float32(1.25), np.asarray(-3, dtype=np.int16)):
        got = ts.full((2, 2), value, device=device)
        want = np.full((2, 2), value)
        assert got.dtype == want.dtype
        assert_close(got, want)
    like = ts.zeros((2,), dtype=ts.int32, device=device)
    got = ts.full_like(like, ts.asarray(7, device=device))
    assert got.dtype == ts.int32 and got.tolist() == [7, 7]
    with pytest.raises(TypeError, match=r"full: fill_value must be a Python scalar or a 0-d array.*1 dimensions"):
        ts.full((2,), ts.asarray([1.0], device=device))
    with pytest.raises(TypeError, match=r"full_like: fill_value must be .*got str"):
        ts.full_like(like, "7")


def test_asarray_python_values(device):
    assert ts.asarray(3, device=device).dtype == ts.int64
    assert ts.asarray(2.5, device=device).dtype == ts.float32  # tessel's default float
    assert ts.asarray(True, device=device).dtype == ts.bool
    assert ts.asarray([[1, 2], [3, 4]], device=device).shape == (2, 2)
    assert ts.asarray([1.0, 2.0], dtype=ts.float64, device=device).dtype == ts.float64
    x = ts.asarray([1, 2, 3], device=device)
    assert ts.asarray(x) is x
    assert ts.asarray(x, copy=True) is not x
    assert ts.asarray(x, dtype=ts.float32).dtype == ts.float32
    assert ts.asarray(np.float32(1.5), device=device).dtype == ts.float32
    assert ts.asarray(ts.zeros(2, device=device), device="cpu").device == ts.Device("cpu")


def test_numpy_view_is_zero_copy():
    ref = np.arange(6.0)
    x = ts.asarray(ref, device="cpu")  # the default device is CUDA where there is one
    ref[0] = 42.0
    assert x[0].item() == 42.0  # shares memory
    y = ts.asarray(ref, copy=True, device="cpu")
    ref[1] = -1.0
    assert y[1].item() == 1.0


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                   "float16", "float32", "float64", "complex64", "complex128"])
def test_numpy_views_of_every_dtype_and_layout(rng, dtype):
    base = (rng.standard_normal((5, 6)) * 50).astype(dtype)
    for ref in (base, base[::-2, 1::2], base.T, base[3, 2:2], base[0, 0, ...]):
        x = ts.asarray(ref, device="cpu")
        assert str(x.dtype) == dtype and x.shape == ref.shape
        np.testing.assert_array_equal(np.asarray(x), ref)
        if ref.size:
            changed = np.logical_not(ref.flat[0]) if dtype == "bool" else ref.flat[0] + 1
            ref.flat[0] = changed
            assert np.asarray(x).flat[0] == changed  # a view, not a copy


def test_numpy_layouts_a_view_cannot_take_are_copied_or_refused():
    packed = np.zeros(4, dtype=[("a", "<f4"), ("b", "i1")])["a"]  # stride 5: not whole float32s
    packed[:] = [1, 2, 3, 4]
    misaligned = np.arange(17, dtype=np.uint8)[1:].view(np.float32)
    for ref in (packed, misaligned):
        x = ts.asarray(ref, device="cpu")
        np.testing.assert_array_equal(np.asarray(x), ref)
        with pytest.raises(ValueError, match="copy=False"):
            ts.asarray(ref, device="cpu", copy=False)
    with pytest.raises(TypeError, match="big-endian"):
        ts.asarray(np.arange(3, dtype=">f4"), device="cpu")
    with pytest.raises(TypeError, match="<U1"):
        ts.asarray(np.array(["a"]), device="cpu")
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    with pytest.raises(ValueError):
        ts.asarray(frozen, device="cpu")[0] = 1.0


def test_basic_indexing_views(device, rng):
    ref = random_array(rng, (4, 5, 6), "float32")
    x = ts.asarray(ref, device=device)
    for key in [0, -1, (1, 2), (slice(1, 3),), (slice(None, None, -1), 2), (Ellipsis, 1), (None, 0, slice(1, 5, 2)),
                (slice(None), None, Ellipsis), (1, 2, 3), (slice(5, 1, -2), slice(None), -2), ()]:
        assert_close(x[key], ref[key])
    assert x[1, 2, 3].shape == ()
    v = x[1]
    v[0, 0] = 100.0  # a view: writes through
    ref[1][0, 0] = 100.0
    assert_close(x, ref)
    with pytest.raises(IndexError):
        x[4]
    with pytest.raises(IndexError):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match=r"boolean index of shape \(3,\)"):
        x[ts.asarray([True, False, True], device=device)]  # x has 4 rows (more in tests/python/test_indexing.py)


def test_setitem(device):
    x = ts.zeros((3, 4), dtype=ts.float64, device=device)
    x[1] = 5.0
    x[:, 0] = ts.asarray([1.0, 2.0, 3.0], device=device)
    x[2, 1:3] = np.array([7, 8])
    want = np.zeros((3, 4))
    want[1] = 5.0
    want[:, 0] = [1, 2, 3]
    want[2, 1:3] = [7, 8]
    assert_close(x, want)
    x[...] = 1
    assert_close(x, np.ones((3, 4)))


BINARY = [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("divide", np.divide),
    ("maximum", np.maximum), ("minimum", np.minimum), ("pow", np.power), ("atan2", np.arctan2),
    ("equal", np.equal), ("less", np.less), ("greater_equal", np.greater_equal), ("not_equal", np.not_equal),
]


@pytest.mark.parametrize("name,ref_fn", BINARY)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_functions(device, rng, name, ref_fn, dtype):
    a = random_array(rng, (3, 4), dtype)
    b = random_array(rng, (4,), dtype)  # broadcasting
    if name == "pow":
        a = np.abs(a)
    got = getattr(ts, name)(ts.asarray(a, device=device), ts.asarray(b, device=device))
    assert_close(got, ref_fn(a, b), rtol=1e-4 if dtype == "float32" else 1e-12)


def _numpy_float(a):
    """The floating dtype NumPy computes a transcendental function of `a` in (int8 -> float16, ...)."""
    return np.exp(a[:0]).dtype


def _in_float64(formula):
    """A reference computed in float64 and rounded to NumPy's floating dtype for the input."""
    return lambda a: formula(a.astype(np.float64)).astype(_numpy_float(a))


_erf = np.vectorize(math.erf, otypes=[np.float64])

# Every unary function of the op list: (name, reference, the input kinds it takes: b bool, i integer,
# f real floating, c complex). NumPy is the reference; the kinds are written here, apart from the
# op list, so that a wrong row fails. test_unary_functions runs each on every backend and dtype.
UNARY = [
    ("negative", np.negative, "ifc"), ("positive", np.positive, "ifc"), ("abs", np.abs, "bifc"),
    ("logical_not", np.logical_not, "bifc"), ("bitwise_invert", np.invert, "bi"), ("square", np.square, "bifc"),
    ("reciprocal", np.reciprocal, "fc"), ("sign", np.sign, "ifc"), ("exp", np.exp, "bifc"), ("exp2", np.exp2, "bifc"),
    ("expm1", np.expm1, "bifc"), ("log", np.log, "bifc"), ("log2", np.log2, "bifc"), ("log10", np.log10, "bifc"),
    ("log1p", np.log1p, "bifc"), ("sqrt", np.sqrt, "bifc"), ("rsqrt", _in_float64(lambda x: 1 / np.sqrt(x)), "bif"),
    ("cbrt", np.cbrt, "bif"), ("sin", np.sin, "bifc"), ("cos", np.cos, "bifc"), ("tan", np.tan, "bifc"),
    ("asin", np.arcsin, "bifc"), ("acos", np.arccos, "bifc"), ("atan", np.arctan, "bifc"),
    ("sinh", np.sinh, "bifc"), ("cosh", np.cosh, "bifc"), ("tanh", np.tanh, "bifc"), ("asinh", np.arcsinh, "bifc"),
    ("acosh", np.arccosh, "bifc"), ("atanh", np.arctanh, "bifc"),
    ("sigmoid", _in_float64(lambda x: 1 / (1 + np.exp(-x))), "bif"),
    ("relu", lambda a: np.maximum(a, a.dtype.type(0)), "if"),
    ("gelu", _in_float64(lambda x: x * (1 + _erf(x / np.sqrt(2))) / 2), "bif"),
    ("erf", _in_float64(_erf), "bif"),
    ("softplus", _in_float64(lambda x: np.logaddexp(0.0, x)), "bif"),
    ("floor", np.floor, "if"), ("ceil", np.ceil, "if"), ("trunc", np.trunc, "if"), ("round", np.round, "ifc"),
    ("isnan", np.isnan, "bifc"), ("isinf", np.isinf, "bifc"), ("isfinite", np.isfinite, "bifc"),
    ("real", np.real, "bifc"), ("imag", np.imag, "bifc"),
    ("conj", lambda a: np.conj(a) if a.dtype.kind == "c" else a, "bifc"),  # NumPy's conj of bool is int8
    # np.angle is arctan2(0, x), but of bool in float64: its ufunc's dtype is float16.
    ("angle", lambda a: np.angle(a).astype(np.float16) if a.dtype == bool else np.angle(a), "bifc"),
    ("signbit", np.signbit, "bif"),
]
UNARY_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                "float32", "float64", "complex64", "complex128"]


def test_every_unary_function_is_in_unary():
    """A unary op of the op list is tested by its row in UNARY (the C++ elementwise test checks
    only the ops it has a reference for)."""
    assert sorted(name for name, _, _ in UNARY) == sorted(ts._tessel._unary_functions)


@pytest.mark.parametrize("dtype", UNARY_DTYPES)
@pytest.mark.parametrize("name,ref_fn,kinds", UNARY)
def test_unary_functions(device, rng, name, ref_fn, kinds, dtype):
    a = random_array(rng, (5, 3), dtype)
    if a.dtype.kind == "f":  # the special values a formula must get right too
        a.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.5]
    x = ts.asarray(a, device=device)[:, ::-1]  # a strided view
    if a.dtype.kind.replace("u", "i") not in kinds:
        with pytest.raises(ts.DTypeError):
            getattr(ts, name)(x)
        return
    with np.errstate(all="ignore"):
        want = ref_fn(a[:, ::-1])
    assert_close(getattr(ts, name)(x), want)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_tanh_and_tan_near_the_poles_of_tan(device, dtype):
    """tanh(x + iy) near y = pi/2 (and tan near x = pi/2) is i tan(y) to the dtype's precision, not
    a cancellation of cos(2y) + cosh(2x); the reference is the exact input in complex128."""
    half_pi = np.float32(np.pi / 2) if dtype == "complex64" else np.pi / 2
    ys = np.array([half_pi, np.nextafter(half_pi, 0), np.nextafter(half_pi, 4), 1.5746397, -1.5717645])
    z = np.concatenate([1j * ys, 1e-3 + 1j * ys, -0.5 + 1j * ys]).astype(dtype)
    want = np.tanh(z.astype(np.complex128)).astype(dtype)
    assert_close(ts.tanh(ts.asarray(z, device=device)), want, rtol=8 * np.finfo(dtype).eps)
    w = (z * -1j).astype(dtype)  # tan(w) = -i tanh(i w) = -i tanh(z)
    assert_close(ts.tan(ts.asarray(w, device=device)), np.tan(w.astype(np.complex128)).astype(dtype), rtol=8 * np.finfo(dtype).eps)


def test_integer_and_bitwise(device, rng):
    a = random_array(rng, (6,), "int32")
    b = np.abs(random_array(rng, (6,), "int32")) % 5 + 1
    x, y = ts.asarray(a, device=device), ts.asarray(b, device=device)
    assert_close(ts.bitwise_and(x, y), a & b)
    assert_close(ts.bitwise_left_shift(x, y), np.left_shift(a, b))
    assert_close(ts.bitwise_right_shift(x, y), np.right_shift(a, b))
    assert_close(ts.bitwise_invert(x), ~a)
    assert_close(x // y, a // b)
    assert_close(x % y, a % b)
    assert_close(x << 1, a << 1)
    assert_close(x ^ y, a ^ b)


def test_operators_and_weak_scalars(device, rng):
    a = random_array(rng, (2, 3), "float32")
    x = ts.asarray(a, device=device)
    # Python scalars are weak: float32 stays float32.
    assert_close(x + 1, a + np.float32(1))
    assert_close(2.5 * x, np.float32(2.5) * a)
    assert_close(1 - x, np.float32(1) - a)
    assert_close(x / 2, a / np.float32(2))
    assert_close(2 ** x, np.float32(2) ** a, rtol=1e-5)
    assert_close(-x, -a)
    assert_close(abs(x), np.abs(a))
    assert_close(x > 0, a > 0)
    assert_close(x == x, a == a)
    i8 = ts.asarray(np.array([1, 2, 3], "int8"), device=device)
    assert (i8 + 1).dtype == ts.int8
    assert (i8 + 1.0).dtype == ts.float64  # NEP 50: int array + Python float -> default float64
    assert (ts.asarray([True, False], device=device) + 1).dtype == ts.int64
    assert (x + 1j).dtype == ts.complex64
    # array-array promotion
    assert (i8 + ts.asarray(np.array([1, 2, 3], "int32"), device=device)).dtype == ts.int32
    # NumPy arrays on the right or the left convert (and numpy defers to tessel)
    assert_close(x + a, a + a)
    r = a + x
    assert isinstance(r, ts.Array)
    assert_close(r, a + a)


def test_operator_slots(device, rng):
    """Operators are C++ type slots: operand order, NotImplemented and error translation."""
    a = random_array(rng, (3,), "float32")
    x = ts.asarray(a, device=device, copy=True)
    assert_close(3.0 - x, np.float32(3) - a)  # the scalar on the left keeps its place
    assert_close(x - 3.0, a - np.float32(3))
    assert_close(2.0 / x, np.float32(2) / a)
    assert_close(2.0 < x, np.float32(2) < a)  # reflected comparison: x > 2.0
    assert_close(x ** 2, a ** 2, rtol=1e-5)
    i = ts.asarray(np.array([6, 5, 12], "int32"), device=device)
    assert_close(~i, ~np.array([6, 5, 12], "int32"))
    assert_close(3 & i, 3 & np.array([6, 5, 12], "int32"))
    assert_close(1 << i % 4, 1 << np.array([6, 5, 12], "int32") % 4)
    assert type(x).__add__ is not None and type(x).__radd__ is not None
    with pytest.raises(TypeError, match="unsupported operand"):
        x + object()
    with pytest.raises(TypeError):
        pow(x, 2, 3)  # no modulus for arrays
    assert (x == None) is False and (x != None) is True  # noqa: E711  (Python's fallback)
    with pytest.raises(TypeError):
        x < "text"
    # C++ errors raised inside a slot come out as the tessel exceptions.
    with pytest.raises(ts.ShapeError, match="add"):
        x + ts.ones((2,), device=device)
    with pytest.raises(ts.ShapeError):
        x += ts.ones((2,), device=device)
    with pytest.raises(ts.DTypeError, match="bitwise_not"):
        ~x
    assert_close(x, a)  # nothing was written by the failed in-place op


def test_inplace_operators(device, rng):
    a = random_array(rng, (4,), "float64")
    x = ts.asarray(a, device=device, copy=True)  # on the CPU asarray(a) would share a's memory
    y = x
    x += 1
    x *= 2.0
    x -= ts.asarray(a, device=device)
    assert y is x
    assert_close(x, (a + 1) * 2 - a)
    i = ts.asarray([1, 2, 3], device=device)
    with pytest.raises(TypeError):
        i += 1.5  # int64 array cannot hold the float64 result (DTypeError is a TypeError)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_reductions(device, rng, dtype):
    a = random_array(rng, (3, 4, 5), dtype)
    x = ts.asarray(a, device=device)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for axis in [None, 0, 1, -1, (0, 2)]:
        assert_close(ts.sum(x, axis=axis), np.sum(a, axis=axis), rtol=rtol)
        assert_close(ts.max(x, axis=axis), np.max(a, axis=axis))
        assert_close(ts.min(x, axis=axis, keepdims=True), np.min(a, axis=axis, keepdims=True))
        if dtype.startswith("float"):
            assert_close(ts.mean(x, axis=axis), np.mean(a, axis=axis), rtol=rtol)
            assert_close(ts.var(x, axis=axis), np.var(a, axis=axis), rtol=1e-4 if dtype == "float32" else 1e-10)
            assert_close(ts.std(x, axis=axis, correction=1), np.std(a, axis=axis, ddof=1), rtol=1e-4 if dtype == "float32" else 1e-10)
    assert_close(ts.argmax(x, axis=1), np.argmax(a, axis=1))
    assert_close(ts.argmin(x), np.argmin(a))
    assert_close(x.sum(axis=0), a.sum(axis=0), rtol=rtol)
    assert_close(ts.cumulative_sum(x, axis=1), np.cumsum(a, axis=1), rtol=rtol)
    assert_close(ts.cumulative_sum(x[0, 0], include_initial=True), np.concatenate([[0], np.cumsum(a[0, 0])]).astype(np.cumsum(a[0, 0]).dtype), rtol=rtol)


@pytest.mark.parametrize("name", list(ts._tessel._reduction_functions))
def test_every_reduction_row_is_numpys(device, rng, name):
    """Each reduction row (include/tessel/ops/reduce_list.hpp) as the namespace function and the
    Array method, along one axis and over all of a float64 array, against NumPy's function."""
    a = random_array(rng, (3, 4), "float64")
    x = ts.asarray(a, device=device)
    for axis in (1, None):
        want = getattr(np, name)(a, axis=axis)
        assert_close(getattr(ts, name)(x, axis=axis), want, rtol=1e-12)
        assert_close(getattr(x, name)(axis), want, rtol=1e-12)


@pytest.mark.parametrize("name", ["sum", "prod", "nansum", "nanprod"])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_reduction_dtype_is_the_result_dtype(device, rng, name, dtype):
    """A given dtype is the result's, for the function and the method, as NumPy's (an int32 sum is
    int64 without one); integer values wrap as NumPy's do."""
    a = rng.integers(-(1 << 20), 1 << 20, size=(3, 5)).astype(np.int64)
    x = ts.asarray(a, device=device)
    for got in (getattr(ts, name)(x, axis=1, dtype=getattr(ts, dtype)), getattr(x, name)(1, dtype=getattr(ts, dtype))):
        want = getattr(np, name)(a.astype(dtype), axis=1, dtype=dtype)
        assert got.dtype == getattr(ts, dtype), f"{name}(dtype={dtype}) gave {got.dtype}"
        assert_close(got, want, rtol=1e-6 if dtype == "float32" else 0)


def test_all_any_prod(device):
    a = np.array([[True, False], [True, True]])
    x = ts.asarray(a, device=device)
    assert_close(ts.all(x, axis=1), a.all(axis=1))
    assert_close(ts.any(x, axis=0), a.any(axis=0))
    assert bool(ts.any(x)) and not bool(ts.all(x))
    f = np.array([1.5, 2.0, -3.0])
    assert_close(ts.prod(ts.asarray(f, device=device)), np.prod(f))


# NumPy's order: NaNs last; a stable sort keeps the input order of equal keys (-0.0 and +0.0 too),
# for every real dtype (float16/bfloat16 and the narrow integers are widened for the sort), on rows
# long enough for the CPU sort's threads and on many short rows.
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
                                   "uint16", "uint32", "uint64", "bool"])
def test_sort_stable_nan_last_large(device, rng, dtype):
    for shape in [(300001,), (2, 100003), (500, 300)]:
        if dtype.startswith("float"):
            a = rng.integers(-8, 8, size=shape).astype(dtype)
            special = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], dtype=dtype)
            mask = rng.integers(0, 4, size=shape) == 0
            a[mask] = rng.choice(special, size=int(mask.sum()))
        else:
            a = random_array(rng, shape, dtype)
        x = ts.asarray(a, device=device)
        order = np.argsort(a, axis=-1, kind="stable")
        assert np.array_equal(np.asarray(ts.argsort(x)), order)
        got = np.asarray(ts.sort(x))
        want = np.take_along_axis(a, order, axis=-1)
        if dtype.startswith("float"):
            # Bits too: zeros keep their sign in stable order, NaNs their sign.
            assert np.array_equal(got.view(f"u{a.itemsize}"), want.view(f"u{a.itemsize}"))
        else:
            assert np.array_equal(got, want)


@pytest.mark.parametrize("strategy", ["keys", "records"])
def test_cpu_sort_of_32_bit_keys_by_either_strategy(strategy):
    # TESSEL_CPU_SORT32 picks the path that is otherwise timed per CPU: both must give NumPy's stable
    # order bit for bit (zeros keep their signs in input order, NaNs last with their payloads), on rows
    # long enough for the threads' chunks and merges.
    code = """
import numpy as np, tessel as ts
rng = np.random.default_rng(5)
for dtype in ("float32", "int32", "uint32", "float16", "int16"):
    for shape in [(300001,), (3, 70001)]:
        if dtype.startswith("float"):
            a = rng.integers(-8, 8, size=shape).astype(dtype)
            mask = rng.integers(0, 4, size=shape) == 0
            a[mask] = rng.choice(np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], dtype), int(mask.sum()))
        else:
            info = np.iinfo(dtype)
            a = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
        got = np.asarray(ts.sort(ts.asarray(a, device="cpu")))
        want = np.take_along_axis(a, np.argsort(a, axis=-1, kind="stable"), axis=-1)
        assert np.array_equal(got.view(f"u{a.itemsize}"), want.view(f"u{a.itemsize}")), (dtype, shape)
print("ok")
"""
    env = dict(os.environ, TESSEL_CPU_SORT32=strategy, TESSEL_NUM_THREADS="2")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_sort_bfloat16_nan_last(device):
    values = [2.5, float("nan"), -1.0, 0.0, -0.0, float("-inf"), 2.5, float("nan"), 1.0]
    x = ts.asarray(values, dtype=ts.bfloat16, device=device)
    assert np.asarray(ts.argsort(x)).tolist() == [5, 2, 3, 4, 8, 0, 6, 1, 7]
    got = np.asarray(ts.sort(x).astype(ts.float32))
    assert got[:7].tolist() == [float("-inf"), -1.0, 0.0, -0.0, 1.0, 2.5, 2.5] and np.isnan(got[7:]).all()
    assert np.signbit(got[3]) and not np.signbit(got[2])


def test_sort_and_search(device, rng):
    a = random_array(rng, (4, 7), "float32")
    x = ts.asarray(a, device=device)
    assert_close(ts.sort(x), np.sort(a))
    assert_close(ts.sort(x, axis=0, descending=True), -np.sort(-a, axis=0))
    assert_close(ts.argsort(x, axis=1), np.argsort(a, axis=1, kind="stable"))
    assert_close(ts.argsort(x, descending=True), np.argsort(-a, axis=1, kind="stable"))
    ints = ts.asarray(np.array([3, 1, 3, 2, 1, 3]), device=device)
    assert_close(ts.unique_values(ints), np.array([1, 2, 3]))
    values, counts = ts.unique_counts(ints)
    assert_close(values, np.array([1, 2, 3]))
    assert counts.tolist() == [2, 1, 3]
    (nz,) = ts.nonzero(ts.asarray(np.array([0, 1, 0, 2]), device=device))
    assert nz.tolist() == [1, 3]
    c = np.array([True, False, True])
    assert_close(ts.where(ts.asarray(c, device=device), ts.asarray(np.array([1.0, 2, 3]), device=device), 0.0),
                 np.where(c, [1.0, 2, 3], 0.0))
    s = ts.asarray(np.array([1.0, 2.0, 3.0]), device=device)
    assert ts.searchsorted(s, ts.asarray(np.array([2.5]), device=device)).tolist() == [2]


def test_manipulation(device, rng):
    a = random_array(rng, (2, 3, 4), "float64")
    x = ts.asarray(a, device=device)
    assert_close(ts.reshape(x, (6, 4)), a.reshape(6, 4))
    assert_close(x.reshape(4, -1), a.reshape(4, -1))
    assert_close(ts.permute_dims(x, (2, 0, 1)), np.transpose(a, (2, 0, 1)))
    assert_close(ts.expand_dims(x, axis=1), np.expand_dims(a, 1))
    assert_close(ts.squeeze(ts.expand_dims(x, axis=0), axis=0), a)
    assert_close(ts.broadcast_to(x[:, :1, :], (2, 5, 4)), np.broadcast_to(a[:, :1, :], (2, 5, 4)))
    assert_close(ts.concat([x, x], axis=1), np.concatenate([a, a], axis=1))
    assert_close(ts.concat([x, x], axis=None), np.concatenate([a.ravel(), a.ravel()]))
    assert_close(ts.stack([x, x], axis=0), np.stack([a, a]))
    assert_close(ts.flip(x, axis=1), np.flip(a, 1))
    assert_close(ts.flip(x), np.flip(a))
    assert_close(ts.roll(x, 2, axis=2), np.roll(a, 2, axis=2))
    assert_close(ts.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1))
    p, q = ts.broadcast_arrays(x, ts.asarray(np.ones((4,)), device=device))
    assert p.shape == q.shape == (2, 3, 4)
    assert [u.shape for u in ts.unstack(x, axis=1)] == [(2, 4)] * 3
    m = x[0]
    assert_close(m.T, a[0].T)
    assert_close(x.mT, np.swapaxes(a, -1, -2))
    assert_close(ts.astype(x, ts.float32), a.astype("float32"))
    assert_close(x.astype("int32"), a.astype("int32"))


def test_numpy_integer_scalars_as_axes_shifts_and_counts(device, rng):
    """NumPy integer scalars (a shape's entries, np.argmax's result) work wherever a Python int does:
    axes, shifts, shapes, counts."""
    a = random_array(rng, (2, 3, 4), "float64")
    x = ts.asarray(a, device=device)
    i0, i1, i2 = np.int64(0), np.int32(1), np.uint8(2)
    assert_close(ts.sum(x, axis=i1), a.sum(axis=1))
    assert_close(ts.flip(x, axis=i0), np.flip(a, 0))
    assert_close(ts.roll(x, i2, axis=i1), np.roll(a, 2, axis=1))
    assert_close(ts.roll(x, np.int64(-3)), np.roll(a, -3))
    assert_close(ts.expand_dims(x, axis=i2), np.expand_dims(a, 2))
    assert_close(ts.reshape(x, np.int64(24)), a.reshape(24))
    assert ts.zeros(np.int64(3), device=device).shape == (3,)
    assert_close(ts.diff(x, n=i2, axis=i2), np.diff(a, n=2, axis=2))
    assert ts.broadcast_shapes(np.int64(4), (3, 1)) == (3, 4)
    assert_close(ts.linalg.matrix_power(x[:, :, :3], np.int64(2)), np.linalg.matrix_power(a[:, :, :3], 2))
    with pytest.raises(ValueError, match="diff: n must be a non-negative integer"):
        ts.diff(x, n=True)


def test_dtype_functions():
    assert ts.result_type(ts.int8, ts.uint8) == ts.int16
    assert ts.result_type(ts.float32, 1.0) == ts.float32
    assert ts.result_type(ts.zeros(1, dtype=ts.int32), ts.float16) == ts.float64
    assert ts.can_cast(ts.int8, ts.int32) and not ts.can_cast(ts.float64, ts.float32)
    assert ts.finfo(ts.float32).eps == np.finfo(np.float32).eps
    assert ts.finfo(ts.bfloat16).bits == 16
    assert ts.iinfo(ts.int16).max == 32767
    assert ts.isdtype(ts.float32, "real floating") and ts.isdtype(ts.int8, ("integral", "bool"))
    assert not ts.isdtype(ts.complex64, "real floating")
    with pytest.raises(TypeError):
        ts.iinfo(ts.float32)


def test_printing_and_scalars(device):
    x = ts.asarray(np.array([1.5, 2.0]), device=device)
    assert repr(x).startswith("array(") and "1.5" in repr(x)
    assert str(x) == str(np.array([1.5, 2.0]))
    assert float(x[0]) == 1.5 and int(x[1]) == 2 and x[0].item() == 1.5
    assert len(x) == 2
    assert complex(ts.asarray(np.array(1 + 2j), device=device)) == 1 + 2j
    with pytest.raises(ValueError):
        x.item()
    assert np.asarray(ts.asarray(np.array([1, 2], "int16"), device=device)).dtype == np.int16


def test_bfloat16(device):
    x = ts.asarray([1.0, 2.5, -3.0], dtype=ts.bfloat16, device=device)
    assert x.dtype == ts.bfloat16
    assert np.asarray(x).dtype == np.float32  # NumPy has no bfloat16
    assert_close(np.asarray(x * 2), np.array([2.0, 5.0, -6.0], "float32"))


def test_random(device):
    ts.random.seed(7)
    a = ts.random.uniform(size=(1000,), device=device)
    ts.random.seed(7)
    b = ts.random.uniform(size=(1000,), device=device)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert 0.0 <= float(ts.min(a)) and float(ts.max(a)) < 1.0
    n = ts.random.normal(size=(20000,), dtype=ts.float64, device=device)
    assert abs(float(ts.mean(n))) < 0.05


def test_random_numpy_legacy_names(device):
    """rand, randn, random_sample, standard_normal and randint as NumPy's (and CuPy's) legacy API
    spells them, on the same generator."""
    ts.random.seed(3)
    u = ts.random.rand(40, 50, device=device)
    ts.random.seed(3)
    assert u.shape == (40, 50) and np.array_equal(np.asarray(u), np.asarray(ts.random.random((40, 50), device=device)))
    assert 0.0 <= float(ts.min(u)) and float(ts.max(u)) < 1.0
    n = ts.random.randn(100, 200, dtype=ts.float64, device=device)
    assert n.shape == (100, 200) and abs(float(ts.mean(n))) < 0.05 and abs(float(ts.std(n)) - 1.0) < 0.05
    assert ts.random.random_sample(device=device).shape == () and ts.random.standard_normal(5, device=device).shape == (5,)
    k = ts.random.randint(3, 9, size=(1000,), device=device)
    assert k.dtype == ts.int64 and int(ts.min(k)) >= 3 and int(ts.max(k)) < 9
    assert int(ts.max(ts.random.randint(4, size=100, device=device))) < 4


def test_dtype_pickle_and_identity():
    import pickle

    assert pickle.loads(pickle.dumps(ts.float16)) is ts.float16
    assert ts.arange(3).dtype is ts.int64
    assert (ts.arange(3) == None) is False  # noqa: E711  (NotImplemented -> identity comparison)


def test_dlpack_of_transposed_view():
    x = ts.reshape(ts.arange(6, device="cpu"), (2, 3))  # NumPy imports host memory only
    np.testing.assert_array_equal(np.from_dlpack(x.T), np.arange(6).reshape(2, 3).T)


def test_clip_and_numpy_scalars(device):
    a = np.array([-2.0, 0.5, 3.0], "float32")
    x = ts.asarray(a, device=device)
    assert_close(ts.clip(x, -1, 1), np.clip(a, -1, 1))
    assert_close(ts.clip(x, min=0.0), np.clip(a, 0.0, None))
    # NumPy scalars are strongly typed (NEP 50), Python floats are weak.
    assert (x + np.float64(1)).dtype == ts.float64
    assert (x + 1.0).dtype == ts.float32
    with pytest.raises(ValueError):
        np.asarray(x, copy=False)
