"""Indexing with NumPy's full rules (getitem and setitem with integers, slices, None, Ellipsis,
integer arrays, boolean masks, lists), take, take_along_axis, put_along_axis, nonzero and
where(condition): property tests against NumPy over both backends, every dtype, 0-d, zero-size,
broadcast, non-contiguous and negative-stride inputs, plus the errors."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessel as ts

settings.register_profile("tessel_indexing", max_examples=80, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile("tessel_indexing")

ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]


def random_host(rng, shape, dtype):
    """Fresh random values of `dtype` (never all zeros), as a NumPy array (bfloat16 as float32)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("uint"):
        return rng.integers(1, 100, size=shape).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-100, 100, size=shape).astype(dtype)
    if dtype.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    host = rng.standard_normal(shape) * 10
    return host.astype("float32" if dtype == "bfloat16" else dtype)


def make_input(rng, shape, dtype, layout, device):
    """A tessel array of `shape` laid out contiguous, strided (every other element of a larger
    array) or reversed (negative strides), and its NumPy twin (same values)."""
    if layout == "strided" and len(shape) > 0:
        big = tuple(shape[:-1]) + (2 * shape[-1] + 1,)
        x = ts.asarray(random_host(rng, big, dtype), dtype=dtype, device=device)[..., 1::2]
    elif layout == "reversed" and len(shape) > 0:
        x = ts.asarray(random_host(rng, shape, dtype), dtype=dtype, device=device)[::-1]
    else:
        x = ts.asarray(random_host(rng, shape, dtype), dtype=dtype, device=device)
    assert x.shape == tuple(shape)
    return x, np.asarray(x)


def assert_same(got, want):
    got_host = np.asarray(got)
    assert got_host.shape == want.shape, (got_host.shape, want.shape)
    np.testing.assert_array_equal(got_host, want)


@st.composite
def index_cases(draw):
    """(shape, dtype, layout, seed, key builder): a key of NumPy's indexing forms for `shape`.
    Integer arrays broadcast to a common shape; with a boolean mask the other index arrays have
    one element, so that every key is valid."""
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    mask_mode = draw(st.booleans())
    base = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    entries = []
    axis = 0
    ellipsis = False
    have_mask = False
    for _ in range(ndim + 3):
        kinds = []
        if axis < ndim:
            kinds += ["slice", "slice", "int"] if shape[axis] > 0 else ["slice"]
            if shape[axis] > 0:
                kinds += ["intarr", "intarr"]
            if mask_mode and not have_mask:
                kinds += ["mask", "mask"]
        kinds += ["none"]
        if mask_mode and not have_mask:
            kinds += ["bool0"]
        if not ellipsis:
            kinds += ["ellipsis"]
        if not ellipsis or axis == ndim:
            kinds += ["stop"]
        kind = draw(st.sampled_from(kinds))
        if kind == "stop":
            break
        if kind == "slice":
            entries.append(("slice", draw(st.slices(shape[axis]))))
            axis += 1
        elif kind == "int":
            entries.append(("int", draw(st.integers(-shape[axis], shape[axis] - 1))))
            axis += 1
        elif kind == "intarr":
            if mask_mode:
                ishape = draw(st.sampled_from([(), (1,)]))
            else:
                cut = draw(st.integers(0, len(base)))
                ishape = tuple(s if draw(st.booleans()) else 1 for s in base[cut:])
            dtype = draw(st.sampled_from(INDEX_DTYPES))
            lo = 0 if dtype.startswith("uint") else -shape[axis]
            form = draw(st.sampled_from(["numpy", "tessel", "list"]))
            entries.append(("intarr", (ishape, dtype, lo, shape[axis], form)))
            axis += 1
        elif kind == "mask":
            k = draw(st.integers(1, ndim - axis))
            form = draw(st.sampled_from(["numpy", "tessel", "list"]))
            entries.append(("mask", (tuple(shape[axis:axis + k]), form)))
            have_mask = True
            axis += k
        elif kind == "bool0":
            entries.append(("bool0", draw(st.booleans())))
            have_mask = True
        elif kind == "none":
            entries.append(("none", None))
        else:
            entries.append(("ellipsis", None))
            ellipsis = True
            axis += draw(st.integers(0, ndim - axis))  # the axes it stands for
    # An ellipsis stands for every axis the rest leaves: make the rest cover the remaining axes.
    if ellipsis:
        while axis < ndim:
            entries.append(("slice", slice(None)))
            axis += 1
    dtype = draw(st.sampled_from(ALL_DTYPES))
    layout = draw(st.sampled_from(["contiguous", "strided", "reversed"]))
    seed = draw(st.integers(0, 2**32 - 1))
    as_tuple = len(entries) != 1 or draw(st.booleans())
    return shape, dtype, layout, seed, entries, as_tuple


def build_keys(entries, as_tuple, rng, device):
    """The same key for tessel and for NumPy."""
    ts_key, np_key = [], []
    for kind, spec in entries:
        if kind in ("slice", "int"):
            ts_key.append(spec)
            np_key.append(spec)
        elif kind == "none":
            ts_key.append(None)
            np_key.append(None)
        elif kind == "ellipsis":
            ts_key.append(Ellipsis)
            np_key.append(Ellipsis)
        elif kind == "bool0":
            ts_key.append(spec)
            np_key.append(spec)
        elif kind == "intarr":
            ishape, dtype, lo, n, form = spec
            host = rng.integers(lo, n, size=ishape).astype(dtype)
            np_key.append(host)
            if form == "tessel":
                ts_key.append(ts.asarray(host, device=device))
            elif form == "list" and host.size > 0:
                ts_key.append(host.tolist())
            else:
                ts_key.append(host)
        else:
            mshape, form = spec
            host = rng.random(mshape) < 0.5
            np_key.append(host)
            ts_key.append(ts.asarray(host, device=device) if form == "tessel" else
                          host.tolist() if form == "list" and host.size > 0 else host)
    if not as_tuple:
        return ts_key[0], np_key[0]
    return tuple(ts_key), tuple(np_key)


@given(case=index_cases())
def test_getitem_matches_numpy(device, case):
    shape, dtype, layout, seed, entries, as_tuple = case
    rng = np.random.default_rng(seed)
    x, a = make_input(rng, shape, dtype, layout, device)
    ts_key, np_key = build_keys(entries, as_tuple, rng, device)
    want = a[np_key]
    got = x[ts_key]
    assert_same(got, np.asarray(want))
    if isinstance(got, ts.Array):
        assert str(got.dtype) == dtype


@given(case=index_cases(), scalar_value=st.booleans(), drop=st.integers(0, 2))
def test_setitem_matches_numpy(device, case, scalar_value, drop):
    shape, dtype, layout, seed, entries, as_tuple = case
    rng = np.random.default_rng(seed)
    x, a = make_input(rng, shape, dtype, layout, device)
    ts_key, np_key = build_keys(entries, as_tuple, rng, device)
    result_shape = np.asarray(a[np_key]).shape
    # Which elements the key writes: repeated ones get one of their values (CUDA: unspecified
    # which), so those cases write one value everywhere.
    positions = np.arange(a.size).reshape(a.shape)[np_key]
    repeated = np.unique(positions).size != np.size(positions)
    if scalar_value or repeated:
        # A Python scalar the dtype holds exactly (bfloat16 rounds it first).
        value = np.asarray(ts.asarray(random_host(rng, (), dtype), dtype=dtype))[()].item()
        ts_value = np_value = value
    else:
        vshape = result_shape[min(drop, len(result_shape)):]
        np_value = random_host(rng, vshape, dtype)
        ts_value = ts.asarray(np_value, dtype=dtype, device=device)
        np_value = np.asarray(ts_value)  # bfloat16 rounding
    want = a.copy()
    want[np_key] = np_value
    x[ts_key] = ts_value
    assert_same(x, want)


def test_transposition_rule(device):
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype("float32")
    x = ts.asarray(a, device=device)
    i, j = np.array([0, 1, -1]), np.array([[1], [-2]])
    # Adjacent index arrays replace their axes in place; separated ones go first.
    for key in [(slice(None), i, j), (slice(None), i, j, 0), (i, slice(None), j), (0, slice(None), i),
                (Ellipsis, i, slice(None), j[:, :, None][0]), (i, None, j), (slice(None), i, Ellipsis, 1),
                # an ellipsis that stands for no axis still separates (NumPy's rule)
                (slice(None), slice(None), i, Ellipsis, j), (slice(None), slice(None), 0, Ellipsis, i)]:
        got = x[tuple(ts.asarray(k, device=device) if isinstance(k, np.ndarray) else k for k in key)]
        assert_same(got, a[key])
    b = np.ones((1, 1), bool)
    assert_same(ts.asarray(b, device=device)[0:0, 0, ..., True, None], b[0:0, 0, ..., True, None])


def test_masks(device):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 5, 6)).astype("float32")
    x = ts.asarray(a, device=device)
    m = a > 0
    assert_same(x[x > 0], a[m])
    assert_same(x[ts.asarray(m[:, :, 0], device=device)], a[m[:, :, 0]])
    assert_same(x[ts.asarray(m[:, :, 0], device=device), 1:], a[m[:, :, 0], 1:])
    assert_same(x[:, ts.asarray(m[0], device=device)], a[:, m[0]])
    assert_same(x[1, ts.asarray(m[0, :, 0], device=device), ::-2], a[1, m[0, :, 0], ::-2])
    assert_same(x[True], a[True])
    assert_same(x[False], a[False])
    y = x.copy()
    y[y > 0] = 0
    b = a.copy()
    b[b > 0] = 0
    assert_same(y, b)
    y[ts.asarray(m[:, :, 0], device=device)] = ts.asarray(np.arange(6, dtype="float32"), device=device)
    b[m[:, :, 0]] = np.arange(6, dtype="float32")
    assert_same(y, b)
    n = int(m[:, 0, 0].sum())
    vals = rng.standard_normal((n, 5, 6)).astype("float32")
    y[ts.asarray(m[:, 0, 0], device=device)] = ts.asarray(vals, device=device)
    b[m[:, 0, 0]] = vals
    assert_same(y, b)


def test_zero_d_and_zero_size(device):
    x0 = ts.asarray(np.float32(3.5), device=device)
    assert_same(x0[()], np.float32(3.5)[()])
    assert_same(x0[True], np.asarray(np.float32(3.5))[True])
    assert_same(x0[False], np.asarray(np.float32(3.5))[False])
    assert_same(x0[None], np.asarray(np.float32(3.5))[None])
    e = ts.zeros((0, 3), device=device)
    assert e[ts.asarray(np.zeros(0, dtype=bool), device=device)].shape == (0, 3)
    assert e[:, [0, 2]].shape == (0, 2)
    assert e[[]].shape == (0, 3)
    x = ts.asarray(np.arange(6.0, dtype="float32").reshape(2, 3), device=device)
    assert x[[], 1].shape == (0,)
    x[[]] = 1.0
    assert_same(x, np.arange(6.0, dtype="float32").reshape(2, 3))


def test_numpy_integer_scalars_index_like_ints(device):
    """np.argmax's result and a shape's entries are NumPy integer scalars: they index as ints do, in
    getitem and setitem, alone and in tuples; a NumPy float scalar is refused as a float is."""
    a = np.arange(24.0, dtype="float32").reshape(2, 3, 4)
    x = ts.asarray(a, device=device)
    for key in (np.int64(1), (np.int32(0), np.uint8(2)), (slice(None), np.int16(-1)), (Ellipsis, np.int64(3)),
                (np.intp(1), [0, 2], np.int8(1))):
        assert_same(x[key], a[key])
    y = ts.asarray(a, device=device)
    b = a.copy()
    y[np.int64(1), np.uint16(2)] = -1.0
    b[1, 2] = -1.0
    assert_same(y, b)
    with pytest.raises(IndexError, match="only integers"):
        x[np.float64(1.0)]


def test_broadcast_index_arrays(device):
    a = np.arange(60).reshape(3, 4, 5)
    x = ts.asarray(a, device=device)
    r = np.array([[0], [2], [-1]])
    c = np.array([1, -2, 3, 0])
    assert_same(x[r, c], a[r, c])
    assert_same(x[r, :, c[:1]], a[r, :, c[:1]])
    y = x.copy()
    y[r, c] = -7
    b = a.copy()
    b[r, c] = -7
    assert_same(y, b)


@given(dtype=st.sampled_from(ALL_DTYPES), shape=st.lists(st.integers(0, 5), min_size=1, max_size=3),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_take_matches_numpy(device, dtype, shape, seed, data):
    rng = np.random.default_rng(seed)
    layout = data.draw(st.sampled_from(["contiguous", "strided", "reversed"]))
    x, a = make_input(rng, tuple(shape), dtype, layout, device)
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    n = a.size if axis is None else a.shape[axis]
    if n == 0:
        return
    ishape = tuple(data.draw(st.lists(st.integers(0, 4), max_size=2)))
    idx = rng.integers(-n, n, size=ishape)
    got = ts.take(x, ts.asarray(idx, device=device), axis=axis)
    assert_same(got, np.take(a, idx, axis=axis))


@given(dtype=st.sampled_from(ALL_DTYPES), shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_take_and_put_along_axis_match_numpy(device, dtype, shape, seed, data):
    rng = np.random.default_rng(seed)
    layout = data.draw(st.sampled_from(["contiguous", "strided", "reversed"]))
    x, a = make_input(rng, tuple(shape), dtype, layout, device)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = list(shape)
    ishape[axis] = data.draw(st.integers(0, 4))
    for d in range(len(shape)):  # broadcast some of the other axes
        if d != axis % len(shape) and data.draw(st.booleans()):
            ishape[d] = 1
    n = shape[axis]
    idx = rng.integers(-n, n, size=ishape)
    got = ts.take_along_axis(x, ts.asarray(idx, device=device), axis=axis)
    assert_same(got, np.take_along_axis(a, idx, axis=axis))
    # put_along_axis with distinct positions along the axis (no repeated writes).
    count = data.draw(st.integers(0, n))
    order = np.argsort(rng.random(a.shape), axis=axis)
    uniq = np.take(order, np.arange(count), axis=axis)
    values = random_host(rng, uniq.shape, dtype)
    tv = ts.asarray(values, dtype=dtype, device=device)
    values = np.asarray(tv)
    want = a.copy()
    np.put_along_axis(want, uniq, values, axis=axis)
    y = x.copy()
    ts.put_along_axis(y, ts.asarray(uniq, device=device), tv, axis)
    assert_same(y, want)
    # A scalar value, and indices broadcast along the other axes.
    bidx = np.take(order, np.arange(min(count, 1)), axis=axis)
    bidx = np.take(bidx, [0], axis=(axis + 1) % len(shape)) if len(shape) > 1 else bidx
    want = a.copy()
    np.put_along_axis(want, bidx, want.flat[0], axis=axis)
    y = x.copy()
    ts.put_along_axis(y, ts.asarray(bidx, device=device), want.flat[0].item(), axis)
    assert_same(y, want)


@given(dtype=st.sampled_from(ALL_DTYPES), shape=st.lists(st.integers(0, 5), min_size=1, max_size=4),
       seed=st.integers(0, 2**32 - 1), layout=st.sampled_from(["contiguous", "strided", "reversed"]))
def test_nonzero_and_one_argument_where(device, dtype, shape, seed, layout):
    rng = np.random.default_rng(seed)
    x, a = make_input(rng, tuple(shape), dtype, layout, device)
    if dtype != "bool":  # put zeros in
        zero = rng.random(a.shape) < 0.4
        a = np.where(zero, np.zeros((), a.dtype), a)
        x = ts.asarray(a, dtype=dtype, device=device)
    want = np.nonzero(a)
    for got in (ts.nonzero(x), ts.where(x)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert str(g.dtype) == "int64"
            assert_same(g, w)


def test_setitem_value_broadcast_and_cast(device):
    a = np.arange(12, dtype="float32").reshape(3, 4)
    x = ts.asarray(a, device=device)
    x[[0, 2]] = ts.asarray(np.array([1, 2, 3, 4], dtype="int64"), device=device)
    b = a.copy()
    b[[0, 2]] = np.array([1, 2, 3, 4])
    assert_same(x, b)
    x[x > 5] = ts.asarray(np.array(-1.5, dtype="float64"), device=device)
    b[b > 5] = -1.5
    x[ts.asarray(np.array([True, False, True]), device=device), 1:] = ts.asarray(np.array([7, 8, 9], dtype="int8"), device=device)
    b[np.array([True, False, True]), 1:] = np.array([7, 8, 9])
    assert_same(x, b)
    x[[1, 2], 1:3] = x[[0, 0], :2]  # the value aliases the target
    b[[1, 2], 1:3] = b[[0, 0], :2]
    assert_same(x, b)


def test_mask_with_zero_size_dimensions(device):
    """The Array API standard (boolean array indexing): each dimension of the mask equals the
    indexed array's or is 0; the mask's dimensions become one of size count(True), here 0."""
    rng = np.random.default_rng(2)
    for shape, mask_shape in [((1,), (0,)), ((3,), (0,)), ((3, 4), (0,)), ((3, 4), (0, 4)), ((3, 4), (3, 0)),
                              ((2, 3, 4), (0, 0)), ((1, 1), (0, 0))]:
        a = rng.standard_normal(shape).astype("float32")
        m = np.zeros(mask_shape, dtype=bool)
        x = ts.asarray(a, device=device)
        mask = ts.asarray(m, device=device)
        got = x[mask]
        assert got.shape == (0,) + shape[len(mask_shape):]
        assert_same(got, a[m])
        y = x.copy()
        y[mask] = 5.0  # selects nothing
        assert_same(y, a)
    # Beside other indices the standard is silent; tessel does as NumPy.
    a = rng.standard_normal((3, 4)).astype("float32")
    m = np.zeros(0, dtype=bool)
    assert_same(ts.asarray(a, device=device)[1:, ts.asarray(m, device=device)], a[1:, m])


def test_mask_dimension_neither_equal_nor_zero_raises(device):
    """The standard: a mask dimension that is neither the array's nor 0 is an IndexError, as is a
    mask with more dimensions than the array."""
    x = ts.zeros((1,), device=device)
    with pytest.raises(IndexError):
        x[ts.asarray(np.zeros(2, dtype=bool), device=device)]
    with pytest.raises(IndexError):
        ts.zeros((0,), device=device)[ts.asarray(np.zeros(1, dtype=bool), device=device)]
    with pytest.raises(IndexError):
        x[ts.asarray(np.zeros((1, 1), dtype=bool), device=device)]


# ---- errors ----
def test_mask_shape_mismatch_names_both_shapes(device):
    x = ts.zeros((3, 4), device=device)
    with pytest.raises(IndexError, match=r"\(4,\).*\(3,\)"):
        x[ts.asarray(np.ones(4, dtype=bool), device=device)]
    with pytest.raises(IndexError, match=r"\(3, 3\).*\(3, 4\)"):
        x[ts.asarray(np.ones((3, 3), dtype=bool), device=device)] = 1.0


def test_float_index_array(device):
    x = ts.zeros((3, 4), device=device)
    with pytest.raises(IndexError, match="integer.*float32"):
        x[ts.asarray(np.array([0.0, 1.0], dtype="float32"), device=device)]
    with pytest.raises(IndexError, match="integer.*float64"):
        x[[0.5, 1.0]]
    with pytest.raises(IndexError, match="integer.*float32"):
        ts.take(x, ts.asarray(np.array([0.0], dtype="float32"), device=device), axis=0)
    with pytest.raises(IndexError, match="integer"):
        ts.take_along_axis(x, ts.ones((3, 1), device=device), axis=1)


def test_out_of_range_indices(device):
    x = ts.asarray(np.arange(12.0, dtype="float32").reshape(3, 4), device=device)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        x[ts.asarray(np.array([0, 3]), device=device)]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        x[:, [1, -5]]
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 4"):
        x[ts.asarray(np.array([True, False, True]), device=device), [4]]
    before = np.asarray(x)
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 1 with size 4"):
        x[[0, 1], [1, 7]] = 5.0
    assert_same(x, before)  # checked before anything is written
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        x[[0, 3]] = ts.zeros((2, 4), device=device)
    with pytest.raises(IndexError, match="take: index 12 is out of bounds for axis 0 with size 12"):
        ts.take(x, ts.asarray(np.array([12]), device=device))
    with pytest.raises(IndexError, match="take: index 4 is out of bounds for axis 1 with size 4"):
        ts.take(x, ts.asarray(np.array([4]), device=device), axis=1)
    with pytest.raises(IndexError, match="take_along_axis: index -4 is out of bounds for axis 0 with size 3"):
        ts.take_along_axis(x, ts.asarray(np.array([[-4]]), device=device), axis=0)
    with pytest.raises(IndexError, match="put_along_axis: index 9 is out of bounds for axis 1 with size 4"):
        ts.put_along_axis(x, ts.asarray(np.array([[9]]), device=device), 1.0, 1)
    assert_same(x, before)
    # The stream stays usable after a reported failure.
    assert_same(x[[2, -1]], before[[2, -1]])


def test_too_many_indices_and_other_errors(device):
    x = ts.zeros((3, 4), device=device)
    with pytest.raises(IndexError, match="too many indices.*2-dimensional, but 3"):
        x[[0], 1, 2]
    with pytest.raises(IndexError, match="too many indices"):
        x[ts.asarray(np.ones((3, 4), dtype=bool), device=device), 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., [0], ...]
    with pytest.raises(IndexError, match="could not be broadcast together with shapes \\(2,\\) \\(3,\\)"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ValueError, match="could not be broadcast to indexing result"):
        x[[0, 1]] = ts.zeros((3, 4), device=device)
    with pytest.raises(IndexError, match="valid indices"):
        x["a"]
    with pytest.raises(ValueError, match="0-d"):
        ts.nonzero(ts.zeros((), device=device))
    with pytest.raises(TypeError, match="both x1 and x2"):
        ts.where(x > 0, x)


def test_array_api_capability():
    assert ts.__array_namespace_info__().capabilities()["boolean indexing"] is True
