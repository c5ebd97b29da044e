"""Property tests: random shapes, dtypes and broadcasting against NumPy."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tessel as ts
from conftest import assert_close

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "float32", "float64"]
settings.register_profile("tessel", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])
settings.load_profile("tessel")


@st.composite
def broadcast_pair(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=5))
    d1 = draw(st.sampled_from(DTYPES))
    d2 = draw(st.sampled_from(DTYPES))
    def elements(d):
        return st.integers(0, 50) if d.startswith("uint") else st.integers(-50, 50)

    a = draw(hnp.arrays(d1, shapes.input_shapes[0], elements=elements(d1)))
    b = draw(hnp.arrays(d2, shapes.input_shapes[1], elements=elements(d2)))
    return a, b


@given(pair=broadcast_pair(), op=st.sampled_from(["add", "subtract", "multiply", "maximum", "less", "equal"]))
def test_binary_broadcast_and_promotion(device, pair, op):
    a, b = pair
    want = getattr(np, op)(a, b)
    got = getattr(ts, op)(ts.asarray(a, device=device), ts.asarray(b, device=device))
    assert got.shape == want.shape
    assert str(got.dtype) == want.dtype.name
    if want.dtype.kind in "iub":
        # integer overflow wraps in both libraries
        np.testing.assert_array_equal(np.asarray(got), want)
    else:
        assert_close(got, want)


@given(a=hnp.arrays(st.sampled_from(["float32", "float64"]), hnp.array_shapes(min_dims=1, max_dims=4, max_side=6),
                    elements=st.floats(-100, 100, width=32)),
       data=st.data())
def test_reductions_random_axes(device, a, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1)))
    keepdims = data.draw(st.booleans())
    x = ts.asarray(a, device=device)
    rtol = 1e-4 if a.dtype == np.float32 else 1e-10
    assert_close(ts.sum(x, axis=axis, keepdims=keepdims), np.sum(a, axis=axis, keepdims=keepdims), rtol=rtol, atol=1e-3)
    assert_close(ts.max(x, axis=axis, keepdims=keepdims), np.max(a, axis=axis, keepdims=keepdims))


@given(a=hnp.arrays("float64", hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=st.floats(-10, 10)),
       data=st.data())
def test_slicing_views(device, a, data):
    key = tuple(
        data.draw(st.one_of(st.integers(-n, n - 1), st.slices(n))) if n > 0 else slice(None) for n in a.shape
    )
    x = ts.asarray(a, device=device)
    assert_close(x[key], a[key])


@given(a=hnp.arrays(st.sampled_from(["float32", "int32", "int64"]), hnp.array_shapes(min_dims=1, max_dims=3, max_side=8),
                    elements=st.integers(-1000, 1000)))
def test_sort_random(device, a):
    assert_close(ts.sort(ts.asarray(a, device=device)), np.sort(a))


@given(scalar=st.one_of(st.integers(-100, 100), st.floats(-100, 100), st.booleans()),
       dtype=st.sampled_from(["int8", "int32", "float16", "float32", "float64"]))
def test_weak_scalar_promotion(device, scalar, dtype):
    a = np.arange(1, 5).astype(dtype)
    x = ts.asarray(a, device=device)
    got = x * scalar
    want = a * scalar  # NumPy 2: Python scalars are weak (NEP 50)
    if isinstance(scalar, int) and not isinstance(scalar, bool) and np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        if not info.min <= scalar <= info.max:
            return
    assert str(got.dtype) == want.dtype.name
    assert_close(got, want, rtol=1e-3 if dtype == "float16" else None)


@st.composite
def matmul_operands(draw):
    """Random matmul operands: 1-D or batched, mutually broadcastable batch shapes, any m/k/n >= 1."""
    m, k, n = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3))
    a_shape = (k,) if draw(st.booleans()) and not batch.input_shapes[0] else batch.input_shapes[0] + (m, k)
    b_shape = (k,) if draw(st.booleans()) and not batch.input_shapes[1] else batch.input_shapes[1] + (k, n)
    dtype = draw(st.sampled_from(["float32", "float64", "complex64"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    def values(shape):
        v = rng.standard_normal(shape)
        if dtype == "complex64":
            v = v + 1j * rng.standard_normal(shape)
        return v.astype(dtype)
    return values(a_shape), values(b_shape)


@given(operands=matmul_operands())
def test_matmul_shapes_and_broadcasting(device, operands):
    a, b = operands
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    want = a.astype(wide) @ b.astype(wide)
    got = np.asarray(ts.asarray(a, device=device) @ ts.asarray(b, device=device))
    assert got.shape == want.shape and got.dtype == a.dtype
    scale = np.abs(a.astype(wide)) @ np.abs(b.astype(wide))
    tol = 1e-12 if a.dtype == np.float64 else 2e-5
    assert np.all(np.abs(got - want) <= tol * scale + 1e-30)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12), data=st.data())
def test_fft_along_random_axes_and_lengths(device, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.one_of(st.none(), st.integers(1, 20)))
    norm = data.draw(st.sampled_from(["backward", "ortho", "forward"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    want = np.fft.fft(x, n=n, axis=axis, norm=norm)
    got = np.asarray(ts.fft.fft(ts.asarray(x, device=device), n=n, axis=axis, norm=norm))
    assert got.shape == want.shape and got.dtype == np.complex128
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(np.max(np.abs(want)), 1.0))
    r = x.real
    want = np.fft.rfft(r, n=n, axis=axis, norm=norm)
    got = np.asarray(ts.fft.rfft(ts.asarray(r, device=device), n=n, axis=axis, norm=norm))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(np.max(np.abs(want)), 1.0))
