"""The Array API 2025.12 namespace: dtype objects, __array_namespace_info__, the set functions,
repeat, tile, diff, the cumulative and counting reductions, nextafter, broadcast_shapes, can_cast,
searchsorted and the dtype rules of sum/prod/var/std. Property tests against NumPy on every
device (the `device` fixture), over every dtype and the layouts: 0-d, zero-size, broadcast,
non-contiguous and negative-stride inputs."""
import inspect
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tessel as ts

REAL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64"]
NUMERIC_DTYPES = [d for d in REAL_DTYPES if d != "bool"]
LAYOUTS = ["contiguous", "transposed", "negative", "strided", "broadcast"]
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def elements(dtype, allow_nan=True):
    if dtype == "bool":
        return st.booleans()
    if dtype.startswith("uint"):
        return st.integers(0, 6)
    if dtype.startswith("int"):
        return st.integers(-6, 6)
    # Few distinct values so that duplicates, signed zeros, infinities and NaN all occur.
    values = [-2.5, -1.0, -0.0, 0.0, 1.0, 3.0, np.inf, -np.inf] + ([np.nan] if allow_nan else [])
    return st.sampled_from(values)


def arrays(dtype, min_dims=0, max_dims=3, max_side=5, allow_nan=True):
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side),
                      elements=elements(dtype, allow_nan))


def as_layout(a, device, layout):
    """(a', x): x a tessel array with the values a' in the given memory layout (a' is a, except for
    the broadcast layout, whose rows all repeat a's first row through a zero stride)."""
    if layout == "transposed" and a.ndim >= 2:
        return a, ts.permute_dims(ts.asarray(np.ascontiguousarray(a.T), device=device), tuple(reversed(range(a.ndim))))
    if layout == "negative" and a.ndim >= 1:
        return a, ts.flip(ts.asarray(np.ascontiguousarray(np.flip(a)), device=device))
    if layout == "strided" and a.ndim >= 1:
        return a, ts.asarray(np.repeat(a, 2, axis=-1), device=device)[..., ::2]
    if layout == "broadcast" and a.ndim >= 1 and a.shape[0] > 0:
        row = np.ascontiguousarray(a[:1])
        return np.broadcast_to(row, a.shape).copy(), ts.broadcast_to(ts.asarray(row, device=device), a.shape)
    return a, ts.asarray(a, device=device)


def host(x):
    return np.asarray(x.__array__())


def assert_same(got, want, dtype=None):
    got = host(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_array_equal(got, want)


# ---- dtype objects ---------------------------------------------------------------------------
ALL_DTYPE_NAMES = REAL_DTYPES + ["bfloat16", "complex64", "complex128"]


@pytest.mark.parametrize("name", ALL_DTYPE_NAMES)
def test_dtype_equality_hash_and_repr(name):
    d = getattr(ts, name)
    assert d == d and not (d != d)
    assert d == name and name == d
    assert hash(d) == hash(getattr(ts, name))
    assert {d: 1}[getattr(ts, name)] == 1
    assert repr(d) == f"ts.{name}"
    assert pickle.loads(pickle.dumps(d)) == d
    if name != "bfloat16":
        assert d == np.dtype(name) and np.dtype(name) == d
        assert d == getattr(np, name if name != "bool" else "bool_")
        assert getattr(np, name if name != "bool" else "bool_") == d
    for other in (None, object(), 1, 1.5, "not a dtype", [], (), ts, np.dtype("S3"), np.ndarray):
        assert (d == other) is False
        assert (d != other) is True
    for other_name in ALL_DTYPE_NAMES:
        if other_name != name:
            assert d != getattr(ts, other_name)
            assert d != other_name
            if other_name != "bfloat16":
                assert d != np.dtype(other_name)


def test_dtype_python_types_as_numpy():
    assert ts.float64 == float and ts.int64 == int and ts.bool == bool and ts.complex128 == complex
    assert ts.float32 != float and ts.int32 != int
    assert ts.float32 == np.float32 and ts.float32 == "float32" and np.float32 == ts.float32
    assert np.dtype(ts.float32) == np.float32 and np.dtype(ts.bool) == np.bool_


# ---- namespace information --------------------------------------------------------------------
def test_version_and_namespace():
    assert ts.__array_api_version__ == "2025.12"
    x = ts.asarray([1.0])
    assert x.__array_namespace__() is ts
    assert x.__array_namespace__(api_version="2025.12") is ts
    with pytest.raises(ValueError, match="2025.12"):
        x.__array_namespace__(api_version="2019.01")


def test_namespace_info():
    info = ts.__array_namespace_info__()
    caps = info.capabilities()
    assert set(caps) == {"boolean indexing", "data-dependent shapes", "max dimensions"}
    assert isinstance(caps["boolean indexing"], bool) and caps["data-dependent shapes"] is True
    assert isinstance(caps["max dimensions"], int) and caps["max dimensions"] >= 8
    assert info.default_device() == ts.default_device()
    devices = info.devices()
    assert isinstance(devices, tuple) and ts.Device("cpu") in devices
    for device in (None, *devices):
        defaults = info.default_dtypes(device=device)
        assert defaults == {"real floating": ts.float32, "complex floating": ts.complex64,
                            "integral": ts.int64, "indexing": ts.int64}
    all_dtypes = info.dtypes()
    assert list(all_dtypes) == ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                "float32", "float64", "complex64", "complex128"]
    assert all(all_dtypes[n] == getattr(ts, n) for n in all_dtypes)
    kinds = {
        "bool": ["bool"], "signed integer": ["int8", "int16", "int32", "int64"],
        "unsigned integer": ["uint8", "uint16", "uint32", "uint64"],
        "integral": ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"],
        "real floating": ["float32", "float64"], "complex floating": ["complex64", "complex128"],
        "numeric": ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
                    "complex64", "complex128"],
    }
    for kind, names in kinds.items():
        assert list(info.dtypes(kind=kind)) == names
        assert list(info.dtypes(kind=kind, device="cpu")) == names
    assert list(info.dtypes(kind=("bool", "complex floating"))) == ["bool", "complex64", "complex128"]
    assert list(info.dtypes(kind=("signed integer", "integral"))) == kinds["integral"]
    assert info.dtypes(kind=()) == {}
    with pytest.raises(ValueError, match="unknown kind 'float'"):
        info.dtypes(kind="float")
    with pytest.raises(ValueError, match="not available"):
        info.dtypes(device="cuda:99")


SIGNATURES = {
    "unique_all": "(x, /)", "unique_counts": "(x, /)", "unique_inverse": "(x, /)", "unique_values": "(x, /)",
    "isin": "(x1, x2, /, *, invert=False)", "repeat": "(x, repeats, /, *, axis=None)",
    "tile": "(x, repetitions, /)", "diff": "(x, /, *, axis=-1, n=1, prepend=None, append=None)",
    "cumulative_sum": "(x, /, *, axis=None, dtype=None, include_initial=False)",
    "cumulative_prod": "(x, /, *, axis=None, dtype=None, include_initial=False)",
    "count_nonzero": "(x, /, *, axis=None, keepdims=False)", "broadcast_shapes": "(*shapes)",
    "searchsorted": "(x1, x2, /, *, side='left', sorter=None)", "expand_dims": "(x, /, axis=0)",
    "sum": "(x, /, *, axis=None, dtype=None, keepdims=False)", "prod": "(x, /, *, axis=None, dtype=None, keepdims=False)",
    "mean": "(x, /, *, axis=None, keepdims=False)", "astype": "(x, dtype, /, *, copy=True, device=None)",
    "asarray": "(obj, /, *, dtype=None, device=None, copy=None)", "flip": "(x, /, *, axis=None)",
    "roll": "(x, /, shift, *, axis=None)", "moveaxis": "(x, source, destination, /)", "unstack": "(x, /, *, axis=0)",
    "sort": "(x, /, *, axis=-1, descending=False, stable=True)", "finfo": "(type, /)", "iinfo": "(type, /)",
    "all": "(x, /, *, axis=None, keepdims=False)", "any": "(x, /, *, axis=None, keepdims=False)",
    "linspace": "(start, stop, /, num, *, dtype=None, device=None, endpoint=True)",
    "clip": "(x, /, min=None, max=None)",
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_python_signatures_match_the_standard(name):
    assert str(inspect.signature(getattr(ts, name))).startswith(SIGNATURES[name])


def test_can_cast_signature():
    params = list(inspect.signature(ts.can_cast).parameters.values())
    assert [p.name for p in params[:2]] == ["from_", "to"]
    assert all(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in params[:2])


# ---- set functions ----------------------------------------------------------------------------
def numpy_unique_all(a):
    """NumPy's unique_all with the Array API's index dtype."""
    r = np.unique_all(a)
    return r.values, r.indices.astype(np.int64), r.inverse_indices.astype(np.int64).reshape(a.shape), r.counts


@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES), layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_unique_all_matches_numpy(device, data, dtype, layout):
    a = data.draw(arrays(dtype))
    a, x = as_layout(a, device, layout)
    values, indices, inverse, counts = ts.unique_all(x)
    want_values, want_indices, want_inverse, want_counts = numpy_unique_all(a)
    assert values.dtype == getattr(ts, dtype) and values.device == device
    assert inverse.dtype == ts.int64 and counts.dtype == ts.int64 and indices.dtype == ts.int64
    # Signed zeros are one value; which of them is kept is implementation-defined.
    got_values = host(values)
    np.testing.assert_array_equal(got_values, want_values)
    assert_same(counts, want_counts)
    assert_same(inverse, want_inverse)
    # indices: the first occurrence of each value (NaNs: each its own, in input order)
    flat = a.reshape(-1)
    got_indices = host(indices)
    np.testing.assert_array_equal(flat[got_indices], want_values)
    nan = np.isnan(want_values.astype("float64")) if dtype != "bool" else np.zeros(len(want_values), bool)
    np.testing.assert_array_equal(got_indices[~nan], want_indices[~nan])
    # the parts alone agree with the whole
    assert_same(ts.unique_values(x), got_values)
    v, c = ts.unique_counts(x)
    assert_same(v, got_values)
    assert_same(c, want_counts)
    v, inv = ts.unique_inverse(x)
    assert_same(v, got_values)
    assert_same(inv, want_inverse)


def test_unique_nan_and_signed_zero_rules(device):
    a = np.array([np.nan, 1.0, -0.0, 0.0, np.nan, 1.0], dtype=np.float32)
    values, indices, inverse, counts = ts.unique_all(ts.asarray(a, device=device))
    got = host(values)
    assert got[0] == 0 and got[1] == 1 and np.isnan(got[2:]).all() and len(got) == 4
    assert_same(counts, [2, 2, 1, 1])
    assert_same(indices[:2], [2, 1])
    assert sorted(host(indices[2:]).tolist()) == [0, 4]
    assert_same(inverse[1:4], [1, 0, 0])


def complex_elements(dtype):
    """Few distinct complex values (so duplicates occur), with signed zeros and NaN components."""
    parts = [-1.0, -0.0, 0.0, 2.0, np.nan]
    return st.builds(complex, st.sampled_from(parts), st.sampled_from(parts))


@given(data=st.data(), dtype=st.sampled_from(["complex64", "complex128"]), layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_unique_complex(device, data, dtype, layout):
    """The set functions take every dtype: complex values are equal when both components are; an
    element with a NaN component is distinct from every other one (the standard leaves the order of
    the unique values unspecified)."""
    a = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
                             elements=complex_elements(dtype)))
    a, x = as_layout(a, device, layout)
    values, indices, inverse, counts = ts.unique_all(x)
    assert values.dtype == getattr(ts, dtype) and values.device == device
    assert indices.dtype == inverse.dtype == counts.dtype == ts.int64
    got_values, got_indices, got_inverse, got_counts = host(values), host(indices), host(inverse), host(counts)
    flat = a.reshape(-1)
    nan = np.isnan(flat)
    finite_values = got_values[~np.isnan(got_values)]
    # each non-NaN value once, each NaN element its own value with count 1
    assert len(set(finite_values.tolist())) == len(finite_values) == len(set(flat[~nan].tolist()))
    assert np.isnan(got_values).sum() == nan.sum()
    assert got_inverse.shape == a.shape and got_counts.sum() == a.size
    for value, index, count in zip(got_values, got_indices, got_counts):
        if np.isnan(value):
            assert count == 1 and np.isnan(flat[index])
        else:
            assert index == np.flatnonzero(flat == value)[0]  # the first occurrence
            assert count == (flat == value).sum()
    rebuilt = got_values[got_inverse.reshape(-1)]
    assert ((rebuilt == flat) | (np.isnan(rebuilt) & nan)).all()
    assert_same(ts.unique_values(x), got_values)
    assert_same(ts.unique_counts(x).counts, got_counts)
    assert_same(ts.unique_inverse(x).inverse_indices, got_inverse)


@given(data=st.data(), d1=st.sampled_from(["complex64", "complex128", "float32", "float64"]),
       d2=st.sampled_from(["complex64", "complex128"]), invert=st.booleans())
@PROPERTY
def test_isin_complex(device, data, d1, d2, invert):
    """isin compares complex elements after type promotion; NaN is in nothing."""
    elements = complex_elements(d1) if d1.startswith("complex") else st.sampled_from([-1.0, -0.0, 2.0, np.nan])
    a = data.draw(hnp.arrays(d1, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5), elements=elements))
    b = data.draw(hnp.arrays(d2, hnp.array_shapes(min_dims=1, max_dims=1, min_side=0, max_side=6),
                             elements=complex_elements(d2)))
    got = ts.isin(ts.asarray(a, device=device), ts.asarray(b, device=device), invert=invert)
    assert got.dtype == ts.bool
    assert_same(got, np.isin(a, b, invert=invert))
    assert_same(ts.isin(ts.asarray(np.array([1 + 2j, 3j], d2), device=device), 3j), [False, True])


@given(data=st.data(), d1=st.sampled_from(REAL_DTYPES), d2=st.sampled_from(REAL_DTYPES),
       layout=st.sampled_from(LAYOUTS), invert=st.booleans())
@PROPERTY
def test_isin_matches_numpy(device, data, d1, d2, layout, invert):
    a = data.draw(arrays(d1))
    b = data.draw(arrays(d2, max_dims=2))
    a, x1 = as_layout(a, device, layout)
    b, x2 = as_layout(b, device, layout)
    got = ts.isin(x1, x2, invert=invert)
    assert got.dtype == ts.bool and got.device == device
    # NumPy compares in the promoted dtype too; its NaN is in nothing.
    assert_same(got, np.isin(a, b, invert=invert))


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32", "float32", "float64"])
def test_isin_large_sets(device, dtype):
    """Sets large enough for the CUDA search to narrow through every 64th sorted key first."""
    rng = np.random.default_rng(5)
    for n1, n2 in ((20000, 4096), (5000, 100003), (1, 70000)):
        a = rng.integers(0, 2 * n2, n1).astype(dtype)
        b = rng.integers(0, 2 * n2, n2).astype(dtype)
        if dtype.startswith("float"):
            a[::17] = np.nan
            b[::23] = np.nan
        for invert in (False, True):
            assert_same(ts.isin(ts.asarray(a, device=device), ts.asarray(b, device=device), invert=invert),
                        np.isin(a, b, invert=invert))


def test_isin_scalars(device):
    x = ts.asarray(np.array([1, 5, 7], np.int32), device=device)
    assert_same(ts.isin(x, 5), [False, True, False])
    assert_same(ts.isin(5, x), np.array(True))
    assert_same(ts.isin(4, x, invert=True), np.array(True))
    with pytest.raises(TypeError, match="x1 or x2 must be a tessel array"):
        ts.isin(1, 2)


# ---- repeat, tile, diff -------------------------------------------------------------------------
@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES + ["complex64", "complex128"]),
       layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_repeat_matches_numpy(device, data, dtype, layout):
    real = dtype if not dtype.startswith("complex") else "float32"
    a = data.draw(arrays(real)).astype(dtype)
    a, x = as_layout(a, device, layout)
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1))) if a.ndim else None
    n = a.size if axis is None else a.shape[axis]
    form = data.draw(st.sampled_from(["int", "array", "one"]))
    if form == "int":
        repeats = data.draw(st.integers(0, 3))
        got, want = ts.repeat(x, repeats, axis=axis), np.repeat(a, repeats, axis=axis)
    else:
        counts = np.array(data.draw(st.lists(st.integers(0, 3), min_size=1 if form == "one" else n,
                                             max_size=1 if form == "one" else n)), dtype=np.int64)
        rdtype = data.draw(st.sampled_from(["int8", "int32", "int64", "uint8"]))
        got = ts.repeat(x, ts.asarray(counts.astype(rdtype), device=device), axis=axis)
        want = np.repeat(a, counts if form != "one" else counts[0], axis=axis)
    assert got.dtype == getattr(ts, dtype) and got.device == device
    assert_same(got, want)


def test_repeat_errors(device):
    x = ts.asarray(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    with pytest.raises(ValueError, match="repeat: repeats must be non-negative, got -1"):
        ts.repeat(x, -1)
    with pytest.raises(ValueError, match="repeat: repeats must be non-negative, got -2"):
        ts.repeat(x, ts.asarray([1, -2, 0], device=device), axis=1)
    with pytest.raises(ts.DTypeError, match="repeat: repeats must have an integer dtype, got float32"):
        ts.repeat(x, ts.asarray([1.0, 2.0], device=device), axis=0)
    with pytest.raises(ValueError, match=r"repeat: repeats of shape \(2,\) does not broadcast to the 3 elements"):
        ts.repeat(x, ts.asarray([1, 2], device=device), axis=1)
    with pytest.raises(IndexError):
        ts.repeat(x, 2, axis=2)
    with pytest.raises(TypeError, match="repeats must be an int or an integer array"):
        ts.repeat(x, 1.5)


@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES), layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_tile_matches_numpy(device, data, dtype, layout):
    a = data.draw(arrays(dtype))
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=0, max_size=4)))
    a, x = as_layout(a, device, layout)
    got = ts.tile(x, reps)
    assert got.device == device
    assert_same(got, np.tile(a, reps), dtype)


def test_tile_errors_and_copy(device):
    x = ts.asarray(np.arange(3, dtype=np.int32), device=device)
    with pytest.raises(ValueError, match=r"tile: repetitions must be non-negative, got -1 at position 1 of \(2, -1\)"):
        ts.tile(x, (2, -1))
    with pytest.raises(TypeError, match="tile: repetitions must be a tuple of integers"):
        ts.tile(x, (1.5,))
    same = ts.tile(x, (1,))
    same[0] = 7  # a copy: x is unchanged
    assert_same(x, [0, 1, 2])


@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES), layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_diff_matches_numpy(device, data, dtype, layout):
    a = data.draw(arrays(dtype, min_dims=1, allow_nan=False))
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = data.draw(st.integers(0, 3))
    kwargs = {}
    shape = list(a.shape)
    shape[axis] = 2
    if data.draw(st.booleans()):
        kwargs["prepend"] = data.draw(st.sampled_from(["scalar", "array"]))
    if data.draw(st.booleans()):
        kwargs["append"] = data.draw(st.sampled_from(["scalar", "array"]))
    np_kwargs, ts_kwargs = {}, {}
    for key, form in kwargs.items():
        value = np.ones(shape, dtype) if form == "array" else (True if dtype == "bool" else 1)
        # A Python scalar takes x's dtype (NumPy would widen it to int64 / float64 first).
        np_kwargs[key] = value if form == "array" else np.full(shape[:axis % a.ndim] + [1] + shape[axis % a.ndim + 1:],
                                                               value, dtype)
        ts_kwargs[key] = ts.asarray(value, device=device) if form == "array" else value
    a, x = as_layout(a, device, layout)
    with np.errstate(over="ignore"):
        want = np.diff(a, n=n, axis=axis, **np_kwargs)
    got = ts.diff(x, n=n, axis=axis, **ts_kwargs)
    assert got.device == device
    assert_same(got, want, want.dtype)


def test_diff_errors(device):
    x = ts.asarray(np.arange(4, dtype=np.float32), device=device)
    with pytest.raises(ValueError, match="diff: n must be a non-negative integer, got -1"):
        ts.diff(x, n=-1)
    with pytest.raises(ValueError, match="diff: x must have at least one dimension"):
        ts.diff(ts.asarray(1.0, device=device))
    with pytest.raises(IndexError, match="diff: axis 1 is out of bounds"):
        ts.diff(x, axis=1)


# ---- reductions and scans ------------------------------------------------------------------------
def default_accumulator(dtype):
    if dtype == "bool" or dtype.startswith("int"):
        return "int64"
    if dtype.startswith("uint"):
        return "uint64"
    return dtype


@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES), layout=st.sampled_from(LAYOUTS),
       op=st.sampled_from(["sum", "prod"]))
@PROPERTY
def test_sum_prod_dtype_rules(device, data, dtype, layout, op):
    a = data.draw(arrays(dtype, allow_nan=False))
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1) if a.ndim else st.none(),
                               st.just(tuple(range(a.ndim)))))
    keepdims = data.draw(st.booleans())
    out_dtype = data.draw(st.sampled_from([None, "int32", "uint16", "float64", dtype]))
    if dtype.startswith("float") and out_dtype is not None and out_dtype.startswith(("int", "uint")):
        out_dtype = None  # float -> int of inf is undefined
    a, x = as_layout(a, device, layout)
    got = getattr(ts, op)(x, axis=axis, dtype=out_dtype, keepdims=keepdims)
    want_dtype = out_dtype or default_accumulator(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        want = getattr(np, op)(a.astype(want_dtype), axis=axis, keepdims=keepdims).astype(want_dtype)
    assert got.dtype == getattr(ts, want_dtype), (got.dtype, want_dtype)
    if want_dtype.startswith("float"):
        np.testing.assert_allclose(host(got), want, rtol=2e-3 if want_dtype == "float16" else 1e-5)
    else:
        assert_same(got, want)


def test_complex_sum_and_mean(device):
    a = (np.arange(6) + 1j * np.arange(6)[::-1]).astype(np.complex64).reshape(2, 3)
    x = ts.asarray(a, device=device)
    np.testing.assert_allclose(host(ts.sum(x, axis=1)), a.sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(host(ts.mean(x)), a.mean(), rtol=1e-6)
    assert ts.sum(x).dtype == ts.complex64


@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES), layout=st.sampled_from(LAYOUTS),
       op=st.sampled_from(["cumulative_sum", "cumulative_prod"]))
@PROPERTY
def test_cumulative_matches_numpy(device, data, dtype, layout, op):
    a = data.draw(arrays(dtype, min_dims=1, allow_nan=False))
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1)) if a.ndim > 1 else data.draw(st.sampled_from([None, 0, -1]))
    include_initial = data.draw(st.booleans())
    out_dtype = data.draw(st.sampled_from([None, "int32", "float64"]))
    if dtype.startswith("float") and out_dtype == "int32":
        out_dtype = None  # float -> int of inf is undefined
    a, x = as_layout(a, device, layout)
    got = getattr(ts, op)(x, axis=axis, dtype=out_dtype, include_initial=include_initial)
    want_dtype = out_dtype or default_accumulator(dtype)
    np_op = np.cumsum if op == "cumulative_sum" else np.cumprod
    with np.errstate(over="ignore", invalid="ignore"):
        want = np_op(a.astype(want_dtype), axis=0 if axis is None else axis).astype(want_dtype)
    if include_initial:
        ax = 0 if axis is None else axis % a.ndim
        shape = list(a.shape)
        shape[ax] = 1
        want = np.concatenate([np.full(shape, 0 if op == "cumulative_sum" else 1, want_dtype), want], axis=ax)
    assert got.dtype == getattr(ts, want_dtype)
    if want_dtype.startswith("float"):
        np.testing.assert_allclose(host(got), want, rtol=2e-3 if want_dtype == "float16" else 1e-5)
    else:
        assert_same(got, want)


def test_complex_cumulative_sum(device):
    a = (np.arange(6) - 1j * np.arange(6)).astype(np.complex64).reshape(2, 3)
    got = ts.cumulative_sum(ts.asarray(a, device=device), axis=1, include_initial=True)
    assert got.dtype == ts.complex64
    np.testing.assert_allclose(host(got), np.concatenate([np.zeros((2, 1), np.complex64), np.cumsum(a, axis=1)], axis=1))


def test_complex_prod_and_cumulative_prod(device):
    """prod and cumulative_prod take every numeric dtype, complex included (the standard)."""
    rng = np.random.default_rng(3)
    for dtype, rtol in (("complex64", 1e-5), ("complex128", 1e-12)):
        a = (rng.normal(size=(2, 3, 5)) + 1j * rng.normal(size=(2, 3, 5))).astype(dtype)
        x = ts.asarray(a, device=device)
        for axis in (None, 0, -1, (0, 2), (1,), ()):
            for keepdims in (False, True):
                got = ts.prod(x, axis=axis, keepdims=keepdims)
                assert got.dtype == getattr(ts, dtype)
                np.testing.assert_allclose(host(got), np.prod(a, axis=axis, keepdims=keepdims), rtol=rtol)
        np.testing.assert_allclose(host(ts.prod(x[:, :0], axis=1)), np.ones((2, 5)))  # the empty product
        assert_same(ts.prod(ts.asarray(np.array(2 + 1j, dtype), device=device)), np.array(2 + 1j, dtype))
        real = {"complex64": "float32", "complex128": "float64"}[dtype]
        got = ts.prod(ts.asarray(a.real.astype(real), device=device), axis=-1, dtype=getattr(ts, dtype))
        assert got.dtype == getattr(ts, dtype)
        np.testing.assert_allclose(host(got), np.prod(a.real, axis=-1), rtol=rtol)
        for axis in (0, 1, -1):
            for include_initial in (False, True):
                got = ts.cumulative_prod(x, axis=axis, include_initial=include_initial)
                want = np.cumprod(a, axis=axis)
                if include_initial:
                    shape = list(a.shape)
                    shape[axis] = 1
                    want = np.concatenate([np.ones(shape, dtype), want], axis=axis)
                assert got.dtype == getattr(ts, dtype)
                np.testing.assert_allclose(host(got), want, rtol=rtol * 10)
    assert_same(ts.cumulative_prod(ts.asarray(np.full(5, 1j, np.complex64), device=device)),
                np.array([1j, -1, -1j, 1, 1j], np.complex64))


def test_all_any_complex_and_mean_of_integers(device):
    """all/any take every dtype (a complex element is true when nonzero, NaN included); the mean of
    an integer array has the default real floating-point dtype (float32)."""
    c = ts.asarray(np.array([[1j, 0j], [complex(np.nan, 0), -0.0 + 0j]], np.complex128), device=device)
    assert_same(ts.all(c, axis=0), [True, False])
    assert_same(ts.any(c, axis=1, keepdims=True), [[True], [True]])
    assert_same(ts.any(c[1:, 1:]), np.array(False))
    assert ts.all(ts.asarray(np.zeros((2, 0), np.complex64), device=device)).shape == ()
    # The array methods and NumPy's functions (through __array_function__) take complex too.
    assert_same(c.all(axis=0), [True, False])
    assert_same(c[1:, 1:].any(), np.array(False))
    assert_same(np.any(c, axis=1), [True, True])
    for dtype in ("int8", "uint16", "int64"):
        got = ts.mean(ts.asarray(np.array([[1, 2], [4, 8]], dtype), device=device), axis=0)
        assert got.dtype == ts.float32
        assert_same(got, np.array([2.5, 5.0], np.float32))
        # var and std of integers: the default real floating-point dtype too (the standard's notes).
        ints = ts.asarray(np.array([[1, 2], [4, 8]], dtype), device=device)
        assert_same(ts.var(ints, axis=0, correction=1), np.array([4.5, 18.0], np.float32))
        assert_same(ts.std(ints, axis=1, keepdims=True), np.array([[0.5], [2.0]], np.float32))
        assert ts.var(ints).dtype == ts.float32 and ts.std(ints).dtype == ts.float32


def test_complex_sum_mean_and_cumulative_sum_keep_infinite_parts(device):
    """sum, mean and cumulative_sum of complex values add the real and imaginary parts apart: an
    infinite imaginary part leaves the real part finite, through the namespace, the array methods
    and NumPy's functions."""
    a = np.array([[1 + 2j, complex(-3, np.inf), 0.5 - 1j], [0j, 2 + 0j, complex(0, -0.0)]], np.complex64)
    x = ts.asarray(a, device=device)
    assert_same(ts.sum(x, axis=1), np.sum(a, axis=1))
    assert_same(x.sum(axis=1), np.sum(a, axis=1))
    assert_same(np.sum(x, axis=1), np.sum(a, axis=1))
    # The mean divides each part by the count (NumPy's complex division by 2 + 0j gives NaN + inf j).
    means = np.array([0.5 + 1j, complex(-0.5, np.inf), 0.25 - 0.5j], np.complex64)
    assert_same(ts.mean(x, axis=0), means)
    assert_same(x.mean(axis=0), means)
    assert_same(ts.cumulative_sum(x, axis=1), np.cumsum(a, axis=1))
    assert ts.sum(x, dtype=ts.complex128).dtype == ts.complex128


def test_cumulative_errors(device):
    x = ts.asarray(np.ones((2, 3), np.float32), device=device)
    for fn in (ts.cumulative_sum, ts.cumulative_prod):
        with pytest.raises(ValueError, match="axis is required"):
            fn(x)
        with pytest.raises(IndexError, match="axis 2 is out of bounds"):
            fn(x, axis=2)


@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES + ["complex64"]), layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_count_nonzero_matches_numpy(device, data, dtype, layout):
    real = dtype if dtype != "complex64" else "float32"
    a = data.draw(arrays(real)).astype(dtype)
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1) if a.ndim else st.none(),
                               st.just(tuple(range(a.ndim)))))
    keepdims = data.draw(st.booleans())
    a, x = as_layout(a, device, layout)
    got = ts.count_nonzero(x, axis=axis, keepdims=keepdims)
    want = np.count_nonzero(a, axis=axis, keepdims=keepdims)
    assert got.dtype == ts.int64
    assert_same(got, np.asarray(want).astype(np.int64))


@given(data=st.data(), dtype=st.sampled_from(["float16", "float32", "float64"]), layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_var_std_corrections_and_axes(device, data, dtype, layout):
    a = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                             elements=st.floats(-8, 8, width=16)))
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1), st.just(tuple(range(a.ndim))),
                               st.just(tuple(range(0, a.ndim, 2)))))
    correction = data.draw(st.sampled_from([0, 1, 0.5, 1.5, 2.0]))
    keepdims = data.draw(st.booleans())
    a, x = as_layout(a, device, layout)
    for op in ("var", "std"):
        got = getattr(ts, op)(x, axis=axis, correction=correction, keepdims=keepdims)
        with np.errstate(divide="ignore", invalid="ignore"):
            want = getattr(np, op)(a.astype("float64"), axis=axis, ddof=correction, keepdims=keepdims)
        count = a.size if axis is None else int(np.prod([a.shape[i] for i in np.atleast_1d(axis)]))
        if count - correction <= 0:
            want = np.full_like(want, np.nan)  # the standard: NaN where N - correction <= 0
        assert got.dtype == getattr(ts, dtype) and got.shape == np.shape(want)
        np.testing.assert_allclose(host(got).astype("float64"), want, rtol=5e-3 if dtype == "float16" else 1e-4,
                                   atol=1e-2 if dtype == "float16" else 1e-5)


def test_var_rejects_negative_correction(device):
    with pytest.raises(ValueError, match="correction must be a non-negative number"):
        ts.var(ts.asarray([1.0, 2.0], device=device), correction=-1)


# ---- elementwise: nextafter -----------------------------------------------------------------------
@given(data=st.data(), dtype=st.sampled_from(["float16", "float32", "float64"]), layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_nextafter_matches_numpy(device, data, dtype, layout):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4))
    tiny = float(np.finfo(dtype).smallest_subnormal)
    values = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, np.inf, -np.inf, np.nan, tiny, -tiny,
                              float(np.finfo(dtype).max), float(np.finfo(dtype).smallest_normal), 1e-3, -7.25])
    a = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=values))
    b = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=values))
    a, x = as_layout(a, device, layout)
    got = ts.nextafter(x, ts.asarray(b, device=device))
    want = np.nextafter(a, b)
    assert got.dtype == getattr(ts, dtype)
    got = host(got)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    # Equal inputs give x2 (C's nextafter; NumPy's float16 loop gives x1, which differs for 0 and -0).
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.where(a == b, b, want)))


def test_nextafter_bfloat16_steps_one_unit(device):
    x = ts.asarray(np.array([1.0, 0.0, -2.0, 3.0], np.float32), device=device).astype(ts.bfloat16)
    y = ts.asarray(np.array([2.0, -1.0, 0.0, 3.0], np.float32), device=device).astype(ts.bfloat16)
    got = host(ts.nextafter(x, y).astype(ts.float32))
    np.testing.assert_array_equal(got, [1.0 + 2.0 ** -7, -(2.0 ** -133), -2.0 + 2.0 ** -7, 3.0])


# ---- broadcast_shapes, expand_dims, can_cast, searchsorted ---------------------------------------------
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=4))
@settings(max_examples=40, deadline=None)
def test_broadcast_shapes_matches_numpy(shapes):
    assert ts.broadcast_shapes(*shapes.input_shapes) == np.broadcast_shapes(*shapes.input_shapes)


def test_broadcast_shapes_errors_and_edges():
    assert ts.broadcast_shapes() == ()
    assert ts.broadcast_shapes((2, 0), (1, 1)) == (2, 0)
    with pytest.raises(ValueError, match=r"axis 1: 3 vs 4"):
        ts.broadcast_shapes((2, 3), (4,))


def test_expand_dims_tuples(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = ts.asarray(a, device=device)
    for axis in [0, -1, (0,), (0, 1), (-1, 0), (1, 3), (0, -1)]:
        assert_same(ts.expand_dims(x, axis), np.expand_dims(a, axis))
        assert_same(ts.expand_dims(x, axis=axis), np.expand_dims(a, axis))
    with pytest.raises(IndexError, match="out of bounds"):
        ts.expand_dims(x, (0, 4))
    with pytest.raises(ValueError, match="repeated axis"):
        ts.expand_dims(x, (1, 1))


SPEC_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("source", SPEC_DTYPES)
def test_can_cast_follows_type_promotion(source):
    def promotable(a, b):
        ka, kb = np.dtype(a).kind, np.dtype(b).kind
        if a == b:
            return True
        if "b" in (ka, kb):
            return False
        if ka in "iu" and kb in "iu":
            return np.promote_types(a, b) == np.dtype(b)
        if ka in "iu" or kb in "iu":
            return False
        return np.promote_types(a, b) == np.dtype(b)

    for target in SPEC_DTYPES:
        want = promotable(source, target)
        assert ts.can_cast(getattr(ts, source), getattr(ts, target)) is want, (source, target)
        assert ts.can_cast(ts.zeros((2,), dtype=getattr(ts, source)), getattr(ts, target)) is want
    assert ts.can_cast(ts.int8, ts.float32, casting="safe") is True  # NumPy's rule when asked for


@given(data=st.data(), dtype=st.sampled_from(NUMERIC_DTYPES), side=st.sampled_from(["left", "right"]),
       layout=st.sampled_from(LAYOUTS))
@PROPERTY
def test_searchsorted_matches_numpy(device, data, dtype, side, layout):
    a = np.sort(data.draw(arrays(dtype, min_dims=1, max_dims=1, max_side=8)))
    v = data.draw(arrays(dtype))
    x1 = ts.asarray(a, device=device)
    v, x2 = as_layout(v, device, layout)
    got = ts.searchsorted(x1, x2, side=side)
    assert_same(got, np.searchsorted(a, v, side=side).astype(np.int64))
    # with sorter: x1 in any order
    perm = np.array(data.draw(st.permutations(range(a.size))), dtype=np.int64)
    shuffled = a[perm]
    sorter = np.argsort(shuffled, kind="stable")
    got = ts.searchsorted(ts.asarray(shuffled, device=device), ts.asarray(v, device=device), side=side,
                          sorter=ts.asarray(sorter, device=device))
    assert_same(got, np.searchsorted(shuffled, v, side=side, sorter=sorter).astype(np.int64))


def test_searchsorted_scalar_and_errors(device):
    x1 = ts.asarray(np.array([1.0, 2.0, 2.0, 5.0], np.float32), device=device)
    assert_same(ts.searchsorted(x1, 2.0), np.array(1))
    assert_same(ts.searchsorted(x1, 2, side="right"), np.array(3))
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        ts.searchsorted(x1, 2.0, side="middle")
    with pytest.raises(TypeError, match="searchsorted: x1 must be a tessel array"):
        ts.searchsorted([1, 2], 2.0)


# ---- __dlpack__ keywords ----------------------------------------------------------------------------
class _Capsule:
    """A producer that hands out one prepared capsule (what NumPy's from_dlpack consumes)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 1)])
def test_dlpack_keywords_per_the_standard(device, max_version):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = ts.asarray(a, device=device)
    kind, index = x.__dlpack_device__()
    assert (kind, index) == ((2, device.index) if device.type == "cuda" else (1, 0))
    extra = {} if max_version is None else {"max_version": max_version}
    # The same device, with and without a copy, on the legacy default stream or none.
    for kwargs in ({}, {"copy": True}, {"copy": False}, {"dl_device": (kind, index)}, {"stream": None},
                   *([{"stream": 1}, {"stream": -1}] if device.type == "cuda" else [])):
        y = ts.from_dlpack(_Producer(x, {**kwargs, **extra}))
        assert y.device == device
        assert_same(y, a)
    # To the host: dl_device=(kDLCPU, 0) copies (copy=False refuses).
    host_copy = np.from_dlpack(_Capsule(x.__dlpack__(dl_device=(1, 0), **extra)))
    np.testing.assert_array_equal(host_copy, a)
    if device.type == "cuda":
        with pytest.raises(BufferError, match="copy=False"):
            x.__dlpack__(dl_device=(1, 0), copy=False, **extra)
        with pytest.raises(ValueError, match="stream 0 is ambiguous"):
            x.__dlpack__(stream=0, **extra)


class _Producer:
    """Forwards __dlpack__ to a tessel array with fixed keywords."""

    def __init__(self, array, kwargs):
        self.array, self.kwargs = array, kwargs

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**self.kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_linspace_complex_bounds_default_to_complex64(device):
    """dtype=None with a complex start or stop gives the default complex dtype."""
    got = ts.linspace(0j, 2 + 4j, 3, device=device)
    assert got.dtype == ts.complex64
    assert_same(got, np.array([0, 1 + 2j, 2 + 4j], np.complex64))
    assert ts.linspace(1, 2j, 2, endpoint=False, device=device).dtype == ts.complex64
    assert ts.linspace(0, 1, 3, device=device).dtype == ts.float32


def test_astype_copy_false_returns_the_input(device):
    """copy=False with the array's own dtype returns the input array itself; otherwise a new array."""
    x = ts.asarray(np.arange(3, dtype=np.int32), device=device)
    assert ts.astype(x, ts.int32, copy=False) is x
    assert ts.astype(x, "int32", copy=False, device=device) is x
    assert ts.astype(x, ts.int32) is not x
    y = ts.astype(x, ts.int64, copy=False)
    assert y.dtype == ts.int64 and y is not x


def test_moveaxis_validates_axes(device):
    x = ts.asarray(np.zeros((2, 3, 4), np.float32), device=device)
    assert ts.moveaxis(x, (0, -1), (-1, 0)).shape == (4, 3, 2)
    with pytest.raises(IndexError, match="out of bounds"):
        ts.moveaxis(x, 0, 3)
    with pytest.raises(IndexError, match="out of bounds"):
        ts.moveaxis(x, -4, 0)
    with pytest.raises(ValueError, match="repeated axis"):
        ts.moveaxis(x, (0, 0), (1, 2))
    with pytest.raises(ValueError, match="same number of axes"):
        ts.moveaxis(x, (0, 1), (2,))


def test_clip_keeps_the_dtype_of_x(device):
    """min and max (positional or keyword) do not take part in type promotion: the result has x's
    dtype, and its shape is that of x, min and max broadcast together."""
    x = ts.asarray(np.array([1, 5, 9], np.int8), device=device)
    got = ts.clip(x, ts.asarray(np.array([2], np.int16), device=device), 7)
    assert got.dtype == ts.int8
    assert_same(got, np.array([2, 5, 7], np.int8))
    assert_same(ts.clip(x, min=3), np.array([3, 5, 9], np.int8))
    got = ts.clip(x, max=ts.asarray(np.array([[4], [6]], np.int8), device=device))
    assert got.shape == (2, 3) and got.dtype == ts.int8
    f = ts.asarray(np.array([1.0, 5.0, np.nan], np.float32), device=device)
    got = ts.clip(f, ts.asarray(np.array(2.0), device=device), 4.0)
    assert got.dtype == ts.float32
    assert_same(got, np.array([2.0, 4.0, np.nan], np.float32))
    assert_same(ts.clip(f), host(f))


def test_meshgrid_returns_a_tuple(device):
    """The standard (2025.12): meshgrid returns a tuple of arrays, of shape (N, M) for xy and
    (M, N) for ij indexing of 1-D inputs of sizes M and N."""
    x, y = ts.arange(3, device=device), ts.arange(2, device=device)
    for indexing, shape in (("xy", (2, 3)), ("ij", (3, 2))):
        grids = ts.meshgrid(x, y, indexing=indexing)
        assert isinstance(grids, tuple)
        assert [g.shape for g in grids] == [shape, shape]
        for got, want in zip(grids, np.meshgrid(np.arange(3), np.arange(2), indexing=indexing)):
            np.testing.assert_array_equal(np.asarray(got), want)
    assert ts.meshgrid() == ()
