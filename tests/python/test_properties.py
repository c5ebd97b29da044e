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
