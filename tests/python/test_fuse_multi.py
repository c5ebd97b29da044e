"""ts.fuse of a function returning a tuple: one kernel, a tuple of arrays, against NumPy."""
import numpy as np
import pytest

import tessel as ts
from conftest import assert_close


@ts.fuse
def _three(x, y, z):
    t = x * y  # shared by the outputs: computed once per element
    return t + z, t > z, z * 3  # the last reads only z: it still has the common shape


def _three_numpy(x, y, z):
    shape = np.broadcast_shapes(x.shape, y.shape, z.shape)
    t = x * y
    return t + z, t > z, np.broadcast_to(z * z.dtype.type(3), shape)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
@pytest.mark.parametrize("shapes", [
    ((), (), ()),                       # 0-d
    ((0,), (0,), (1,)),                 # zero-size
    ((3, 1), (1, 4), (4,)),             # broadcast
    ((2, 3), (2, 3), ()),               # z 0-d
    ((5, 40000), (1, 40000), (5, 1)),   # CPU: several blocks
])
def test_tuple_of_outputs_matches_numpy(device, rng, dtype, shapes):
    x, y, z = (rng.integers(-4, 5, size=s).astype(dtype) for s in shapes)
    got = _three(*(ts.asarray(v, device=device) for v in (x, y, z)))
    assert isinstance(got, tuple) and len(got) == 3
    for g, w in zip(got, _three_numpy(x, y, z)):
        assert g.shape == w.shape
        assert str(g.dtype) == str(w.dtype)
        np.testing.assert_array_equal(g.numpy(), w)  # small integers: exact in every dtype


def test_non_contiguous_and_negative_strides(device, rng):
    x = rng.standard_normal((6, 5)).astype("float32")
    y = rng.standard_normal((5, 6)).astype("float32")
    z = rng.standard_normal((5,)).astype("float32")
    tx, ty, tz = (ts.asarray(v, device=device) for v in (x, y, z))
    got = _three(tx[::-1], ty.T, tz[::-1])
    for g, w in zip(got, _three_numpy(x[::-1], y.T, z[::-1])):
        assert_close(g, w, rtol=1e-6)


def test_outputs_of_different_dtypes_and_shared_work(device, rng):
    @ts.fuse
    def swish_and_grad(x, g):
        s = ts.sigmoid(x)
        return x * s * g, g * s * (1 + x * (1 - s)), ts.isnan(x)

    x = rng.standard_normal((300, 7)).astype("float64")
    g = rng.standard_normal((7,)).astype("float32")
    y, dx, nan = swish_and_grad(ts.asarray(x, device=device), ts.asarray(g, device=device))
    s = 1 / (1 + np.exp(-x))
    assert (y.dtype, dx.dtype, nan.dtype) == (ts.float64, ts.float64, ts.bool)
    assert_close(y, x * s * g, rtol=1e-12)
    assert_close(dx, g * s * (1 + x * (1 - s)), rtol=1e-12)
    assert not nan.numpy().any()
    # The same outputs, fused one at a time, agree.
    one = ts.fuse(lambda x, g: g * ts.sigmoid(x) * (1 + x * (1 - ts.sigmoid(x))))
    assert_close(dx, one(ts.asarray(x, device=device), ts.asarray(g, device=device)).numpy(), rtol=1e-12)


def test_one_element_tuple_and_outputs_that_are_inputs(device, rng):
    x = rng.standard_normal((4, 1)).astype("float32")
    y = rng.standard_normal((3,)).astype("float32")
    tx, ty = ts.asarray(x, device=device), ts.asarray(y, device=device)
    (only,) = ts.fuse(lambda a, b: (a + b,))(tx, ty)
    assert_close(only, x + y, rtol=1e-6)
    a, b = ts.fuse(lambda a, b: (a, b))(tx, ty)  # copies, broadcast to the common shape
    np.testing.assert_array_equal(a.numpy(), np.broadcast_to(x, (4, 3)))
    np.testing.assert_array_equal(b.numpy(), np.broadcast_to(y, (4, 3)))


def test_constants_are_traced_into_every_output(device, rng):
    @ts.fuse
    def f(x, k):
        return x * k, x + k

    x = rng.standard_normal((5,)).astype("float32")
    p, s = f(ts.asarray(x, device=device), 2.5)
    assert_close(p, x * np.float32(2.5), rtol=1e-6)
    assert_close(s, x + np.float32(2.5), rtol=1e-6)


def test_source_is_one_kernel_with_every_output():
    if not ts.cuda_available() and not hasattr(ts._tessel, "FusedKernel"):
        pytest.skip("no fused kernels")
    x = ts.ones((2,), dtype="float32")
    try:
        src = _three.source(x, x, x)
    except ts.DeviceError:
        pytest.skip("this build has no CUDA backend")
    assert "// ---- kernel" not in src
    for name in ("out0", "out1", "out2", "in0", "in1", "in2"):
        assert name in src


def test_bad_input(device):
    a = ts.ones((2,), dtype="float32", device=device)
    with pytest.raises(ts.ShapeError, match=r"\(2,\).*\(3,\)"):
        _three(a, a, ts.ones((3,), dtype="float32", device=device))
    with pytest.raises(TypeError, match="output 1 of the function"):
        ts.fuse(lambda x: (x + 1, "no"))(a)
    with pytest.raises(ValueError, match="empty tuple"):
        ts.fuse(lambda x: ())(a)
    with pytest.raises(TypeError, match="output 1 of the function"):
        ts.fuse(lambda x: (x + 1, 2.0))(a)  # a constant output: C++ FusedKernel rejects a scalar Sym too
    with pytest.raises(ts.DTypeError, match="bitwise_and"):
        ts.fuse(lambda x: (x + 1, x & x))(a)


def test_fusion_off_gives_the_same_outputs(device, rng):
    x, y, z = (rng.standard_normal(s).astype("float32") for s in ((40, 2000), (2000,), (40, 1)))
    args = [ts.asarray(v, device=device) for v in (x, y, z)]
    fused = _three(*args)
    saved = ts.fusion_enabled()
    ts.set_fusion_enabled(False)
    try:
        unfused = _three(*args)
    finally:
        ts.set_fusion_enabled(saved)
    for f, u, w in zip(fused, unfused, _three_numpy(x, y, z)):
        if device.type == "cpu":  # the same loops, bit for bit (CUDA may contract x * y + z)
            np.testing.assert_array_equal(f.numpy(), u.numpy())
        assert_close(f, u.numpy(), rtol=1e-6)
        assert_close(f, w, rtol=1e-6)
