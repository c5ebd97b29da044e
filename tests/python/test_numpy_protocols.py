"""NumPy's dispatch protocols (__array_ufunc__, __array_function__) on tessel arrays: NumPy calls
run on the array's device and return tessel arrays; what tessel lacks raises TypeError naming it.
Dask arrays of tessel chunks (the CPU backend) use both."""
import numpy as np
import pytest

import tessel as ts


def host(x):
    return np.asarray(x.__array__())


def sample(device, shape=(3, 4), dtype=np.float32, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return a, ts.asarray(a, device=device)


@pytest.mark.parametrize("ufunc", [np.exp, np.sin, np.sqrt, np.negative, np.absolute, np.isnan, np.floor])
def test_unary_ufuncs_run_on_the_device(device, ufunc):
    a, x = sample(device)
    a = np.abs(a) if ufunc is np.sqrt else a
    x = ts.abs(x) if ufunc is np.sqrt else x
    got = ufunc(x)
    assert isinstance(got, ts.Array) and got.device == device
    np.testing.assert_allclose(host(got), ufunc(a), rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.true_divide, np.maximum, np.power,
                                   np.arctan2, np.less, np.equal, np.hypot, np.logaddexp, np.copysign])
def test_binary_ufuncs_with_arrays_numpy_arrays_and_scalars(device, ufunc):
    a, x = sample(device)
    b, y = sample(device, seed=1)
    b = np.abs(b) + 0.5
    y = ts.asarray(b, device=device)
    for got, want in ((ufunc(x, y), ufunc(a, b)), (ufunc(x, b), ufunc(a, b)), (ufunc(a, y), ufunc(a, b)),
                      (ufunc(x, np.float32(2)), ufunc(a, np.float32(2))), (ufunc(x, 2.0), ufunc(a, np.float32(2)))):
        assert isinstance(got, ts.Array) and got.device == device
        np.testing.assert_allclose(host(got), want, rtol=2e-6, atol=1e-6)


def test_ufunc_out_and_dtype(device):
    a, x = sample(device)
    out = ts.full((3, 4), -7.0, device=device)
    result = np.add(x, 1.0, out=out)
    assert result is out
    np.testing.assert_allclose(host(out), a + 1, rtol=1e-6)
    got = np.multiply(x, 2.0, dtype="float64")
    assert got.dtype == ts.float64


def test_ufunc_reduce_and_accumulate(device):
    a, x = sample(device)
    np.testing.assert_allclose(host(np.add.reduce(x)), np.add.reduce(a), rtol=1e-5)
    np.testing.assert_allclose(host(np.maximum.reduce(x, axis=1, keepdims=True)), np.maximum.reduce(a, axis=1,
                                                                                                       keepdims=True))
    np.testing.assert_allclose(host(np.add.accumulate(x, axis=1)), np.add.accumulate(a, axis=1), rtol=1e-5)


def test_functions_run_on_the_device(device):
    a, x = sample(device)
    b, y = sample(device, seed=1)
    m = a > 0
    cases = [
        (np.sum(x, axis=0), np.sum(a, axis=0)),
        (np.sum(x), np.sum(a)),
        (np.mean(x, axis=1, keepdims=True), np.mean(a, axis=1, keepdims=True)),
        (np.std(x, ddof=1), np.std(a, ddof=1)),
        (np.max(x, axis=(0, 1)), np.max(a, axis=(0, 1))),
        (np.concatenate([x, y]), np.concatenate([a, b])),
        (np.concatenate([x, y], axis=1), np.concatenate([a, b], axis=1)),
        (np.stack([x, y], axis=-1), np.stack([a, b], axis=-1)),
        (np.where(ts.asarray(m, device=device), x, y), np.where(m, a, b)),
        (np.where(ts.asarray(m, device=device), x, 0.0), np.where(m, a, np.float32(0))),
        (np.reshape(x, (4, 3)), np.reshape(a, (4, 3))),
        (np.transpose(x), np.transpose(a)),
        (np.cumsum(x, axis=1), np.cumsum(a, axis=1)),
        (np.cumsum(x), np.cumsum(a)),
        (np.sort(x, axis=0), np.sort(a, axis=0)),
        (np.clip(x, -0.5, 0.5), np.clip(a, -0.5, 0.5)),
        (np.zeros_like(x), np.zeros_like(a)),
        (np.full_like(x, 3.0), np.full_like(a, 3.0)),
        (np.tile(x, 2), np.tile(a, 2)),
        (np.repeat(x, 2, axis=0), np.repeat(a, 2, axis=0)),
        (np.diff(x, axis=0), np.diff(a, axis=0)),
        (np.flip(x, axis=1), np.flip(a, axis=1)),
        (np.expand_dims(x, 0), np.expand_dims(a, 0)),
        (np.matmul(x, ts.permute_dims(y, (1, 0))), a @ b.T),
    ]
    for got, want in cases:
        assert isinstance(got, ts.Array) and got.device == device
        np.testing.assert_allclose(host(got), want, rtol=1e-5, atol=1e-6)
    assert np.shape(x) == (3, 4) and np.ndim(x) == 2 and np.size(x) == 12
    values, counts = np.unique(ts.asarray(np.array([3, 1, 3], np.int32), device=device), return_counts=True)
    assert isinstance(values, ts.Array)
    np.testing.assert_array_equal(host(values), [1, 3])
    np.testing.assert_array_equal(host(counts), [1, 2])
    assert isinstance(np.isin(x, y), ts.Array)
    assert int(np.count_nonzero(ts.asarray([0, 1, 2], device=device))) == 2


def test_numpy_spellings_in_the_namespace_and_as_methods(device):
    """Code written against NumPy or CuPy: NumPy's names in the namespace, ndarray methods, and
    NumPy scalar types as dtypes; each result on x's device, as NumPy computes it."""
    a, x = sample(device)
    for name, args in [("concatenate", ([x, x],)), ("transpose", (x,)), ("ravel", (x,)), ("dot", (x, x.T)),
                       ("isclose", (x, x + 1e-9)), ("around", (x,)), ("amax", (x,)), ("amin", (x,))]:
        got = getattr(ts, name)(*args)
        want = getattr(np, name)(*[[host(v) for v in a_] if isinstance(a_, list) else host(a_) for a_ in args])
        assert isinstance(got, ts.Array) and got.device == x.device, name
        np.testing.assert_allclose(host(got), want, rtol=1e-6, err_msg=name)
    assert ts.allclose(x, x) is True and ts.array_equal(x, x) is True and ts.array_equal(x, x + 1) is False
    np.testing.assert_allclose(host(x.clip(-0.5, 0.5)), a.clip(-0.5, 0.5))
    np.testing.assert_allclose(host(x.clip(max=0.0)), a.clip(max=0.0))
    np.testing.assert_allclose(host(x.round()), a.round())
    np.testing.assert_allclose(host(x.dot(x.T)), a.dot(a.T), rtol=1e-5)
    np.testing.assert_allclose(host(x[0].dot([1.0, 2.0, 3.0, 4.0])), a[0].dot([1.0, 2.0, 3.0, 4.0]), rtol=1e-6)
    assert [host(i).tolist() for i in (x > 0).nonzero()] == [i.tolist() for i in (a > 0).nonzero()]
    assert host(x.argsort(axis=0)).tolist() == a.argsort(axis=0, kind="stable").tolist()
    assert host(x.take([0, 5])).tolist() == a.take([0, 5]).tolist()
    assert host(x.take([1], axis=1)).tolist() == a.take([1], axis=1).tolist()
    assert host(x.repeat(2, axis=0)).tolist() == a.repeat(2, axis=0).tolist()
    y = ts.asarray(a, device=device)
    assert y.fill(7.0) is None and host(y).tolist() == np.full_like(a, 7.0).tolist()
    assert y.sort() is None
    z = ts.asarray(a, device=device)
    z.sort(axis=0)
    assert host(z).tolist() == np.sort(a, axis=0).tolist()
    for t in (np.float64, np.int16, np.complex64, np.bool_):
        assert x.astype(t).dtype == t
        assert ts.zeros(2, dtype=t, device=device).dtype == np.dtype(t)
    np.testing.assert_allclose(host(x.round(2)), a.round(2), rtol=1e-6)


def test_stacking_splitting_and_the_rest_of_numpys_basics(device):
    """vstack, hstack, argwhere, outer, trace, cross, split and array_split as NumPy computes them,
    from the tessel namespace and through NumPy's protocol; CuPy's asnumpy and get, NumPy's array
    (a copy), divmod, and pickling (the host copy, back on the same device)."""
    import pickle

    a, x = sample(device)
    v, r = x[0], a[0]
    cases = [("vstack", ([v, v],), ([r, r],)), ("vstack", ([x, v],), ([a, r],)), ("hstack", ([v, v],), ([r, r],)),
             ("hstack", ([x, x],), ([a, a],)), ("argwhere", (x > 0,), (a > 0,)), ("outer", (v, v), (r, r)),
             ("trace", (x,), (a,)), ("trace", (x, 1), (a, 1)), ("cross", (x[:, :3], x[:, 1:]), (a[:, :3], a[:, 1:]))]
    for name, args, host_args in cases:
        want = getattr(np, name)(*host_args)
        for got in (getattr(ts, name)(*args), getattr(np, name)(*args)):
            assert isinstance(got, ts.Array) and got.device == x.device, name
            np.testing.assert_allclose(host(got), want, rtol=1e-6, err_msg=name)
    for name in ("split", "array_split"):
        for sections in (2, [1, 3], [3, 1]):
            got, want = getattr(ts, name)(x, sections, axis=1), getattr(np, name)(a, sections, axis=1)
            assert [host(g).tolist() for g in got] == [w.tolist() for w in want], (name, sections)
    assert [p.shape for p in ts.array_split(x, 3, axis=1)] == [p.shape for p in np.array_split(a, 3, axis=1)]
    with pytest.raises(ValueError, match="split: an axis of 4 does not split into 3 equal sections"):
        ts.split(x, 3, axis=1)
    q, m = divmod(x, 0.5)
    np.testing.assert_allclose(host(q), a // 0.5)
    np.testing.assert_allclose(host(m), a % 0.5, atol=1e-6)
    assert isinstance(ts.asnumpy(x), np.ndarray) and ts.asnumpy(x).tolist() == a.tolist()
    assert isinstance(x.get(), np.ndarray) and x.get().tolist() == a.tolist()
    y = ts.array(x)
    y[0, 0] = 100.0
    assert host(x)[0, 0] == a[0, 0]  # ts.array copies
    assert isinstance(x, ts.ndarray) and ts.ndarray is ts.Array
    assert ts.get_array_module(a, x) is ts and ts.get_array_module(a, 1.0) is np and ts.get_array_module() is np
    z = pickle.loads(pickle.dumps(x))
    assert isinstance(z, ts.Array) and z.device == x.device and host(z).tolist() == a.tolist()
    for dtype in (ts.bfloat16, ts.float16, ts.bool, ts.complex64, ts.uint64):
        w = pickle.loads(pickle.dumps(ts.asarray([1, 0, 3], dtype=dtype, device=device)))
        assert w.dtype == dtype and w.device == x.device and w.tolist() == ts.asarray([1, 0, 3], dtype=dtype).tolist()


def test_statistics_padding_and_counting_as_numpy(device):
    """median, quantile, percentile (linear interpolation; NaN propagates), nan_to_num, diag, pad
    (constant), bincount, float_power, triu_indices and tril_indices, against NumPy."""
    a, x = sample(device, shape=(5, 6))
    b = a.copy()
    b[1, 2], b[0, 0], b[2, 3] = np.nan, np.inf, -np.inf
    nb = ts.asarray(b, device=device)

    def same(got, want, rtol=1e-6):
        assert isinstance(got, ts.Array) and got.device == x.device
        assert host(got).shape == np.shape(want)
        np.testing.assert_allclose(host(got), want, rtol=rtol, equal_nan=True)

    same(ts.median(x), np.median(a))
    same(ts.median(x, axis=0, keepdims=True), np.median(a, axis=0, keepdims=True))
    same(np.median(nb, axis=1), np.median(b, axis=1))
    same(ts.quantile(x, [0.1, 0.9], axis=1), np.quantile(a, [0.1, 0.9], axis=1), 1e-5)
    same(ts.percentile(x, [25, 50, 75], axis=0, keepdims=True), np.percentile(a, [25, 50, 75], axis=0, keepdims=True),
         1e-5)
    same(ts.median(ts.asarray([4, 1, 3, 2], device=device)), np.median([4, 1, 3, 2]))
    same(ts.nan_to_num(nb), np.nan_to_num(b))
    same(ts.nan_to_num(nb, nan=1.0, posinf=2.0, neginf=-3.0), np.nan_to_num(b, nan=1.0, posinf=2.0, neginf=-3.0))
    for k in (0, 2, -1):
        same(ts.diag(x, k), np.diag(a, k))
        same(ts.diag(x[0], k), np.diag(a[0], k))
    same(ts.pad(x, 1), np.pad(a, 1))
    same(np.pad(x, ((1, 2), (0, 3)), constant_values=7.0), np.pad(a, ((1, 2), (0, 3)), constant_values=7.0))
    same(ts.pad(x[0], (2, 1)), np.pad(a[0], (2, 1)))
    i = np.array([0, 3, 3, 1, 7])
    same(ts.bincount(ts.asarray(i, device=device), minlength=10), np.bincount(i, minlength=10))
    same(ts.float_power(x, 2), np.float_power(a, 2))
    assert ts.float_power(x, 2).dtype == ts.float64
    for got, want in zip(ts.triu_indices(4, 1), np.triu_indices(4, 1)):
        assert host(got).tolist() == want.tolist()
    for got, want in zip(ts.tril_indices(3, 0, 5), np.tril_indices(3, 0, 5)):
        assert host(got).tolist() == want.tolist()
    with pytest.raises(ValueError, match="bincount: x must be non-negative"):
        ts.bincount(ts.asarray([-1, 2], device=device))
    with pytest.raises(ValueError, match="quantiles must be in"):
        ts.quantile(x, 1.5)
    with pytest.raises(ValueError, match="diag: needs a 1-D or 2-D array"):
        ts.diag(ts.zeros((2, 2, 2), device=device))
    with pytest.raises(TypeError, match="numpy.pad with mode='edge'"):
        ts.pad(x, 1, mode="edge")


def test_numpy_linalg_runs_tessel_linalg(device):
    """numpy.linalg's functions on tessel arrays run tessel.linalg on the array's device, with
    NumPy's parameters (UPLO, compute_uv, mode="r", rcond, norm's ord and axis) and results."""
    rng = np.random.default_rng(5)
    a, b, x3 = rng.standard_normal((4, 4)), rng.standard_normal((4, 2)), rng.standard_normal((2, 3, 4))
    s = a + a.T
    A, S, B, X3 = (ts.asarray(v, device=device) for v in (a, s, b, x3))

    def same(got, want, rtol=1e-9):
        assert isinstance(got, ts.Array) and got.device == A.device
        np.testing.assert_allclose(host(got), want, rtol=rtol, atol=1e-12)

    same(np.linalg.solve(A, B), np.linalg.solve(a, b))
    same(np.linalg.inv(A), np.linalg.inv(a))
    same(np.linalg.det(A), np.linalg.det(a))
    sign, logdet = np.linalg.slogdet(A)
    same(sign, np.linalg.slogdet(a)[0])
    same(logdet, np.linalg.slogdet(a)[1])
    same(np.linalg.eigvalsh(S), np.linalg.eigvalsh(s))
    upper = ts.asarray(np.triu(s), device=device)
    same(np.linalg.eigvalsh(upper, UPLO="U"), np.linalg.eigvalsh(np.triu(s), UPLO="U"))
    w, v = np.linalg.eigh(S)
    np.testing.assert_allclose(s @ host(v), host(v) * host(w), atol=1e-10)
    same(np.linalg.svd(A, compute_uv=False), np.linalg.svd(a, compute_uv=False))
    u, sv, vh = np.linalg.svd(A)
    np.testing.assert_allclose((host(u) * host(sv)) @ host(vh), a, atol=1e-10)
    q, r = np.linalg.qr(A)
    np.testing.assert_allclose(host(q) @ host(r), a, atol=1e-10)
    np.testing.assert_allclose(np.abs(host(np.linalg.qr(A, mode="r"))), np.abs(np.linalg.qr(a, mode="r")), atol=1e-10)
    same(np.linalg.pinv(A), np.linalg.pinv(a), 1e-8)
    assert int(np.linalg.matrix_rank(A)) == np.linalg.matrix_rank(a)
    for args, kwargs in [((), {}), ((1,), {}), (("nuc",), {}), ((2,), {}), ((-np.inf,), {})]:
        same(np.linalg.norm(A, *args, **kwargs), np.linalg.norm(a, *args, **kwargs))
    for kwargs in [{"axis": (1, 2)}, {"axis": 2, "ord": 3}, {"axis": (0, 2), "keepdims": True}, {"axis": -1}]:
        same(np.linalg.norm(X3, **kwargs), np.linalg.norm(x3, **kwargs))
    same(np.linalg.cond(A), np.linalg.cond(a), 1e-8)
    same(np.linalg.matrix_power(A, 3), np.linalg.matrix_power(a, 3))
    same(np.linalg.multi_dot([A, A, B]), np.linalg.multi_dot([a, a, b]))
    spd = a @ a.T + 4 * np.eye(4)
    same(np.linalg.cholesky(ts.asarray(spd, device=device)), np.linalg.cholesky(spd))
    with pytest.raises(TypeError, match="numpy.linalg.matrix_rank with an absolute tol"):
        np.linalg.matrix_rank(A, tol=1e-3)
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U'"):
        np.linalg.eigvalsh(S, UPLO="X")


def test_rounding_atleast_ptp_average_and_like_creation(device):
    """round with decimals (integers too, to tens), atleast_1d/2d/3d, ptp, average (weights,
    returned) and np.zeros/ones/empty/full(..., like=x) on x's device, as NumPy computes them."""
    a, x = sample(device)
    a = a * 10
    x = ts.asarray(a, device=device)
    for d in (1, 2, -1):
        np.testing.assert_allclose(host(np.round(x, d)), np.round(a, d), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(host(ts.around(x, d)), np.around(a, d), rtol=1e-6, atol=1e-6)
    ints = np.array([15, 25, 34, -45, 5])
    assert host(np.round(ts.asarray(ints, device=device), -1)).tolist() == np.round(ints, -1).tolist()
    for v in (x[0, 0], x[0], x):
        for n in (1, 2, 3):
            assert getattr(ts, f"atleast_{n}d")(v).shape == getattr(np, f"atleast_{n}d")(host(v)).shape
    np.testing.assert_allclose(host(ts.ptp(x, axis=0)), np.ptp(a, axis=0))
    np.testing.assert_allclose(host(np.ptp(x)), np.ptp(a))
    np.testing.assert_allclose(host(ts.average(x)), np.average(a), rtol=1e-6)
    w = [1.0, 2.0, 3.0, 4.0]
    np.testing.assert_allclose(host(np.average(x, axis=1, weights=w)), np.average(a, axis=1, weights=w), rtol=1e-6)
    avg, total = np.average(x, axis=0, weights=np.ones_like(a), returned=True)
    want_avg, want_total = np.average(a, axis=0, weights=np.ones_like(a), returned=True)
    np.testing.assert_allclose(host(avg), want_avg, rtol=1e-6)
    np.testing.assert_allclose(host(total), want_total)
    for made, want in [(np.zeros(3, like=x), np.zeros(3)), (np.ones((2, 2), dtype=np.int32, like=x),
                                                             np.ones((2, 2), dtype=np.int32)),
                       (np.full((2,), 7, like=x), np.full((2,), 7))]:
        assert isinstance(made, ts.Array) and made.device == x.device and made.dtype == want.dtype
        assert host(made).tolist() == want.tolist()
    with pytest.raises(ValueError, match="numpy.average: weights of shape"):
        np.average(x, axis=1, weights=[1.0, 2.0])


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ij->ji", [(3, 4)]), ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]), ("ij,jk,k->i", [(3, 4), (4, 5), (5,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(5,), (3,)]),
    ("ijk->kji", [(2, 3, 4)]), ("...ij,...jk->...ik", [(1, 3, 4), (5, 4, 2)]), ("...j,j", [(3, 4), (4,)]),
    ("ij,ij->i", [(3, 4), (3, 4)]), ("...i->...", [(6, 2, 3)]), ("xbij,bjk->xbik", [(6, 2, 3, 4), (2, 4, 5)]),
    ("iij->ij", [(3, 3, 2)]), ("ji,jk->ki", [(4, 3), (4, 5)]), ("ab,cd->abcd", [(2, 3), (4, 1)]),
]


@pytest.mark.parametrize("subscripts, shapes", EINSUM_CASES)
def test_einsum_matches_numpy(device, subscripts, shapes):
    """Labels, ellipses (broadcast), repeated labels (diagonals), implicit and explicit output,
    several operands; the namespace's and np.einsum's dispatch."""
    rng = np.random.default_rng(len(subscripts))
    hosts = [rng.standard_normal(s) for s in shapes]
    arrays = [ts.asarray(h, device=device) for h in hosts]
    want = np.einsum(subscripts, *hosts)
    for got in (ts.einsum(subscripts, *arrays), np.einsum(subscripts, *arrays)):
        assert isinstance(got, ts.Array) and got.device == arrays[0].device
        assert host(got).shape == want.shape
        np.testing.assert_allclose(host(got), want, rtol=1e-10, atol=1e-12)


def test_histogram_and_interp_match_numpy(device):
    rng = np.random.default_rng(4)
    a = rng.standard_normal(1000).astype(np.float32)
    x = ts.asarray(a, device=device)
    for kwargs in [{}, {"bins": 7}, {"bins": 5, "range": (-1, 1)}, {"bins": [-3, -1, 0, 0.5, 3]}, {"density": True}]:
        for counts, edges in (ts.histogram(x, **kwargs), np.histogram(x, **kwargs)):
            want_counts, want_edges = np.histogram(a, **kwargs)
            assert isinstance(counts, ts.Array) and counts.device == x.device and counts.dtype == want_counts.dtype
            np.testing.assert_allclose(host(counts), want_counts, rtol=1e-12)
            np.testing.assert_allclose(host(edges), want_edges, rtol=1e-12)
    ints = np.array([1, 2, 2, 3, 5])
    assert host(ts.histogram(ts.asarray(ints, device=device), bins=4)[0]).tolist() == np.histogram(ints, bins=4)[0].tolist()
    assert host(ts.histogram(ts.asarray([2.0, 2.0], device=device), bins=3)[0]).tolist() == [0, 2, 0]
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([0.0, 10.0, 30.0])
    q = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
    got = ts.interp(ts.asarray(q, device=device), ts.asarray(xp, device=device), ts.asarray(fp, device=device))
    np.testing.assert_allclose(host(got), np.interp(q, xp, fp))
    got = np.interp(ts.asarray(q, device=device), xp, fp, left=-5, right=99)
    assert isinstance(got, ts.Array)
    np.testing.assert_allclose(host(got), np.interp(q, xp, fp, left=-5, right=99))
    with pytest.raises(ValueError, match="histogram: bin edges must be at least two, increasing"):
        ts.histogram(x, bins=[1.0, 0.0])
    with pytest.raises(ValueError, match="interp: xp and fp must be 1-D of one nonzero length"):
        ts.interp(x, ts.asarray([0.0, 1.0], device=device), ts.asarray([0.0], device=device))


def test_gradient_matches_numpy_to_the_bit(device):
    rng = np.random.default_rng(6)
    a, v = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(9)
    cases = [((v,), {}), ((v, 0.5), {}), ((v,), {"edge_order": 2}), ((a,), {}), ((a, 2.0, 0.5), {}),
             ((a,), {"axis": 1}), ((a,), {"axis": 0, "edge_order": 2}), ((np.arange(6),), {}), ((v[:2],), {})]
    for args, kwargs in cases:
        want = np.gradient(*args, **kwargs)
        for got in (ts.gradient(ts.asarray(args[0], device=device), *args[1:], **kwargs),
                    np.gradient(ts.asarray(args[0], device=device), *args[1:], **kwargs)):
            wants = want if isinstance(want, tuple) else (want,)
            gots = got if isinstance(got, tuple) else (got,)
            assert len(gots) == len(wants), kwargs
            for g, w in zip(gots, wants):
                assert g.dtype == w.dtype and host(g).tolist() == w.tolist(), kwargs
    with pytest.raises(ValueError, match="fewer than edge_order"):
        ts.gradient(ts.asarray([1.0, 2.0], device=device), edge_order=2)
    with pytest.raises(TypeError, match="numpy.gradient with coordinate arrays"):
        ts.gradient(ts.asarray(v, device=device), [0.0, 1.0])


@pytest.mark.parametrize("n, m", [(10, 3), (3, 10), (5, 5), (1, 4), (6, 4), (4, 7)])
def test_convolve_and_correlate_match_numpy(device, n, m):
    rng = np.random.default_rng(n * 10 + m)
    for complex_ in (False, True):
        a, v = rng.standard_normal(n), rng.standard_normal(m)
        if complex_:
            a, v = a + 1j * rng.standard_normal(n), v + 1j * rng.standard_normal(m)
        ta, tv = ts.asarray(a, device=device), ts.asarray(v, device=device)
        for mode in ("full", "same", "valid"):
            for name in ("convolve", "correlate"):
                want = getattr(np, name)(a, v, mode)
                for got in (getattr(ts, name)(ta, tv, mode), getattr(np, name)(ta, tv, mode)):
                    assert isinstance(got, ts.Array) and host(got).shape == want.shape, (name, mode)
                    np.testing.assert_allclose(host(got), want, rtol=1e-12, atol=1e-12, err_msg=f"{name} {mode}")
    with pytest.raises(ValueError, match="convolve: mode must be"):
        ts.convolve(ts.asarray([1.0], device=device), ts.asarray([1.0], device=device), "middle")


def test_dtypes_are_callable_as_numpys_scalar_types():
    x = ts.float32(3)
    assert isinstance(x, ts.Array) and x.dtype == ts.float32 and x.shape == () and float(x) == 3.0
    assert ts.int16([1, 2]).dtype == ts.int16 and ts.float64().tolist() == 0.0 and ts.bool(1).tolist() is True


def test_einsum_errors(device):
    x = ts.ones((3, 4), device=device)
    with pytest.raises(ValueError, match="einsum: label 'j' has sizes 4 and 3"):
        ts.einsum("ij,jk->ik", x, x)
    with pytest.raises(ValueError, match="output subscript 'k' does not occur"):
        ts.einsum("ij->k", x)
    with pytest.raises(ValueError, match="2 operand subscripts for 1 operands"):
        ts.einsum("ij,jk", x)
    with pytest.raises(ValueError, match="name 2 axes of an operand with 3"):
        ts.einsum("ij", ts.ones((2, 2, 2), device=device))


def test_comparisons_of_whole_arrays(device):
    a, x = sample(device)
    y = ts.asarray(a + 1e-7, device=device)
    assert np.allclose(x, y) is True and np.allclose(x, x + 1.0) is False
    np.testing.assert_array_equal(host(np.isclose(x, y)), np.isclose(a, a + np.float32(1e-7)))
    nan = ts.asarray(np.array([np.nan, 1.0]), device=device)
    assert np.allclose(nan, nan) is False and np.allclose(nan, nan, equal_nan=True) is True
    assert np.array_equal(x, x) is True and np.array_equal(x, x[:1]) is False
    assert np.array_equal(nan, nan) is False and np.array_equal(nan, nan, equal_nan=True) is True
    ints = ts.asarray(np.array([1, 2, 3]), device=device)
    assert np.allclose(ints, np.array([1, 2, 3])) is True


def test_missing_numpy_functions_raise_type_error_naming_them(device):
    _, x = sample(device)
    with pytest.raises(TypeError, match=r"numpy\.polyfit"):
        np.polyfit(x[0], x[1], 1)
    with pytest.raises(TypeError, match=r"numpy\.linalg\.tensorinv"):
        np.linalg.tensorinv(ts.reshape(ts.eye(4, device=device), (4, 2, 2)), ind=1)
    with pytest.raises(TypeError, match=r"numpy\.percentile with method='nearest'"):
        np.percentile(x, 50, method="nearest")
    with pytest.raises(TypeError, match=r"numpy\.add\.outer"):
        np.add.outer(x, x)
    with pytest.raises(TypeError, match=r"numpy\.spacing"):
        np.spacing(x)
    with pytest.raises(TypeError, match=r"numpy\.sum with initial="):
        np.sum(x, initial=1.0)


def test_numpy_array_on_the_left_gives_a_tessel_array(device):
    a, x = sample(device)
    got = a + x
    assert isinstance(got, ts.Array) and got.device == device
    np.testing.assert_allclose(host(got), a + a, rtol=1e-6)


def test_explicit_host_conversion_still_works(device):
    a, x = sample(device)
    np.testing.assert_array_equal(np.asarray(x), a)


def test_dask_array_of_tessel_chunks():
    da = pytest.importorskip("dask.array")
    import dask

    a = np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32)
    x = ts.asarray(a, device="cpu")
    d = da.from_array(x, chunks=(4, 3), asarray=False)
    with dask.config.set(scheduler="synchronous"):
        blocks = d.map_blocks(lambda b: np.exp(b) * 2, dtype=np.float32)
        got = blocks.compute()
        assert isinstance(got, ts.Array)
        np.testing.assert_allclose(host(got), np.exp(a) * 2, rtol=1e-6)
        total = d.sum(axis=0).compute()
        assert isinstance(total, ts.Array)
        np.testing.assert_allclose(host(total), a.sum(axis=0), rtol=1e-5)
        np.testing.assert_allclose(float(host(d.mean().compute())), a.mean(), rtol=1e-5)
        np.testing.assert_allclose(host(da.concatenate([d, d], axis=1).max(axis=1).compute()), a.max(axis=1))
