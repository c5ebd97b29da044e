"""The CPU backend's loops (issue 43): the thread setting, and elementwise ops and reductions on
arrays large enough to take the threaded, vectorized paths, contiguous and not (strided, reversed,
transposed, broadcast rows, columns and scalars, in place), against NumPy, with one and two
threads giving the same bits. Reductions keep their pairwise accuracy."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tessel as ts

from conftest import assert_close, random_array

# Above the threading thresholds (64K elements for cheap ops, 8K for the costly ones), with a
# remainder that is no multiple of any vector width or chunk.
N = 300_007
DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "complex64", "bool"]


@pytest.fixture
def threads():
    """Restores the thread count a test changes."""
    before = ts.num_threads()
    yield
    ts.set_num_threads(before)


def test_num_threads_default_and_setting(threads):
    assert ts.num_threads() == (int(os.environ["TESSEL_NUM_THREADS"]) if os.environ.get("TESSEL_NUM_THREADS")
                                else len(os.sched_getaffinity(0)))
    ts.set_num_threads(1)
    assert ts.num_threads() == 1
    ts.set_num_threads(3)
    assert ts.num_threads() == 3
    for bad in (0, -1, 4097):
        with pytest.raises(ts.ValueError, match="set_num_threads: threads must be a whole number from 1 to 4096"):
            ts.set_num_threads(bad)
    assert ts.num_threads() == 3


@pytest.mark.parametrize("value, expected", [("1", 1), ("5", 5), ("", None)])
def test_num_threads_environment(value, expected):
    env = dict(os.environ, TESSEL_NUM_THREADS=value, TESSEL_LOG="off")
    code = "import os, tessel as ts; print(ts.num_threads(), len(os.sched_getaffinity(0)))"
    got, cpus = map(int, subprocess.check_output([sys.executable, "-c", code], env=env, text=True).split())
    assert got == (expected if expected is not None else cpus)


def test_num_threads_environment_malformed():
    env = dict(os.environ, TESSEL_NUM_THREADS="two", TESSEL_LOG="off")
    code = "import tessel as ts; ts.num_threads()"
    run = subprocess.run([sys.executable, "-c", code], env=env, text=True, capture_output=True)
    assert run.returncode != 0
    assert "TESSEL_NUM_THREADS='two' is malformed; expected a whole number from 1 to 4096" in run.stderr


def test_num_threads_under_taskset():
    """The default is the affinity mask's count, not the machine's."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    code = "import tessel as ts; print(ts.num_threads())"
    env = dict(os.environ, TESSEL_LOG="off")
    env.pop("TESSEL_NUM_THREADS", None)
    one = sorted(os.sched_getaffinity(0))[0]
    out = subprocess.check_output([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{one}}}); " + code],
                                  env=env, text=True)
    assert int(out) == 1


def _layouts(rng, dtype):
    """(name, NumPy operand a, NumPy operand b) of one broadcast shape, in many layouts."""
    base = random_array(rng, (2 * N + 3,), dtype)
    other = random_array(rng, (2 * N + 3,), dtype)
    square = random_array(rng, (700, 900), dtype)
    yield "contiguous", base[:N], other[:N]
    yield "strided", base[::2][:N], other[1::2][:N]
    yield "reversed", base[::-1][:N], other[:N]
    yield "transposed", square.T, random_array(rng, (900, 700), dtype)
    yield "row broadcast", square, random_array(rng, (900,), dtype)
    yield "column broadcast", square, random_array(rng, (700, 1), dtype)
    yield "scalar array", base[:N], random_array(rng, (), dtype)


def _cpu(x):
    return ts.asarray(np.ascontiguousarray(x) if x.ndim == 0 else x, device="cpu")


@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_large_layouts(dtype, rng, threads):
    """Cheap and costly ops over every layout, on 1 and 2 threads, against NumPy; the same bits on
    both thread counts."""
    binary = {"bool": ["logical_and", "equal", "not_equal"],
              "complex64": ["add", "multiply", "divide", "equal"]}.get(
        dtype, ["add", "subtract", "multiply", "maximum", "less"])
    unary = {"bool": ["logical_not"], "complex64": ["exp", "negative", "sqrt"],
             "int32": ["negative", "abs", "square"], "int64": ["negative", "abs", "square"],
             "uint8": ["square", "bitwise_invert"]}.get(dtype, ["exp", "sin", "tanh", "sqrt", "negative", "abs", "log1p"])
    for name, a, b in _layouts(rng, dtype):
        xa = ts.asarray(a, device="cpu")
        xb = _cpu(b)
        if dtype.startswith("float") or dtype == "complex64":
            a_pos = np.abs(a) + 1
            xa_pos = ts.abs(xa) + 1
        else:
            a_pos, xa_pos = a, xa
        results = {}
        for nt in (1, 2):
            ts.set_num_threads(nt)
            got = {}
            for op in binary:
                got[op] = np.asarray(getattr(ts, op)(xa, xb))
            for op in unary:
                arg = xa_pos if op in ("sqrt", "log1p") else xa
                got[op] = np.asarray(getattr(ts, op)(arg))
            results[nt] = got
        for op in binary:
            want = getattr(np, op)(a, b)
            assert_close(results[1][op], want)
            np.testing.assert_array_equal(results[2][op], results[1][op], err_msg=f"{op} {name}: threads differ")
        for op in unary:
            np_op = {"bitwise_invert": "invert"}.get(op, op)
            want = getattr(np, np_op)(a_pos if op in ("sqrt", "log1p") else a)
            got = results[1][op]
            if dtype == "float16":
                assert_close(got, want, rtol=2e-3, atol=2e-3)
            else:
                assert_close(got, want)
            np.testing.assert_array_equal(results[2][op], got, err_msg=f"{op} {name}: threads differ")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elementwise_in_place_and_scalars(dtype, rng, threads):
    a = random_array(rng, (N,), dtype)
    x = ts.asarray(a, device="cpu")
    assert_close(x * 2 + 1, a * 2 + 1)
    assert_close(3 - x, 3 - a)
    assert_close(ts.pow(ts.abs(x), 1.5), np.abs(a) ** 1.5)
    assert_close(ts.atan2(x, 0.5), np.arctan2(a, np.asarray(0.5, dtype)))
    y = ts.asarray(a.copy(), device="cpu")
    ts.multiply(y, y, out=y)  # out is the identical view of both inputs
    assert_close(y, a * a)
    ts.exp(y[::3])  # a strided costly op on its own
    assert_close(ts.where(x > 0, x, 0.5), np.where(a > 0, a, np.asarray(0.5, dtype)))
    assert_close(ts.where(x > 0, 0.25, x), np.where(a > 0, np.asarray(0.25, dtype), a))


def test_costly_op_bits_do_not_depend_on_layout(rng, threads):
    """Every element of exp, whatever the layout or position in a run, takes the same vectorized
    loop: a strided view's results are the contiguous results' elements, bit for bit."""
    a = rng.standard_normal(3 * N).astype(np.float32)
    x = ts.asarray(a, device="cpu")
    whole = np.asarray(ts.exp(x))
    for view in (slice(None, None, 3), slice(1, None, 7), slice(None, None, -1), slice(5, 1003)):
        np.testing.assert_array_equal(np.asarray(ts.exp(x[view])), whole[view])


def test_fused_matches_op_by_op_bit_for_bit(rng, threads):
    f = ts.fuse(lambda x, y: ts.where(x > 0, ts.exp(-x) * y, ts.tanh(y) - x * 3))
    x = rng.standard_normal((513, 1001)).astype(np.float32)
    y = rng.standard_normal((1001,)).astype(np.float64)
    xt, yt = ts.asarray(x, device="cpu"), ts.asarray(y, device="cpu")
    want = np.asarray(ts.where(xt > 0, ts.exp(-xt) * yt, ts.tanh(yt) - xt * 3))
    for nt in (1, 2):
        ts.set_num_threads(nt)
        np.testing.assert_array_equal(np.asarray(f(xt, yt)), want)
        np.testing.assert_array_equal(np.asarray(f(xt.T.T[:, ::-1], yt[::-1])), np.asarray(
            ts.where(xt[:, ::-1] > 0, ts.exp(-xt[:, ::-1]) * yt[::-1], ts.tanh(yt[::-1]) - xt[:, ::-1] * 3)))
    # float32 exp (a few ulp from NumPy's) promoted to float64: float32-level agreement.
    assert_close(want, np.where(x > 0, np.exp(-x) * y, np.tanh(y) - x * 3), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "float16"])
def test_reductions_large_layouts(dtype, rng, threads):
    a = random_array(rng, (1201, 777), dtype)
    if dtype.startswith("float"):
        a[3, 5] = np.nan
    views = {"contiguous": a, "transposed": a.T, "strided": a[::2, ::3], "reversed": a[::-1]}
    for name, v in views.items():
        x = ts.asarray(v, device="cpu")
        for nt in (1, 2):
            ts.set_num_threads(nt)
            for axis in (None, 0, 1, -1):
                for op in ("sum", "max", "min", "prod", "any", "all", "mean", "var", "argmax", "argmin",
                           "nansum", "nanmax"):
                    if op in ("mean", "var") and not dtype.startswith("float"):
                        continue
                    if op in ("nansum", "nanmax") and not dtype.startswith("float"):
                        continue
                    if op in ("argmax", "argmin") and axis is None:
                        continue
                    np_op = getattr(np, op)
                    want = np_op(v.astype(np.float64) if dtype == "float16" and op in ("sum", "mean", "var", "prod", "nansum") else v, axis=axis)
                    got = np.asarray(getattr(ts, op)(x, axis=axis))
                    if op == "prod":
                        # Products of 700 normal values over- and underflow: compare the finite,
                        # normal ones.
                        with np.errstate(over="ignore"):
                            want = np.asarray(want, dtype=got.dtype)
                        ok = np.isfinite(want) & (np.abs(want) > 1e-30) & (np.abs(want) < 1e30)
                        np.testing.assert_allclose(got[ok] if got.ndim else got, want[ok] if want.ndim else want,
                                                   rtol=1e-3 if dtype in ("float32", "float16") else 1e-9)
                        continue
                    if dtype.startswith("int") or dtype.startswith("uint") or op in ("any", "all", "argmax", "argmin", "max", "min", "nanmax"):
                        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype),
                                                      err_msg=f"{op} axis={axis} {name} threads={nt}")
                    else:
                        rtol = {"float16": 2e-3, "float32": 1e-5}.get(dtype, 1e-12)
                        np.testing.assert_allclose(got, np.asarray(want).astype(got.dtype), rtol=rtol,
                                                   atol=rtol * 10, equal_nan=True,
                                                   err_msg=f"{op} axis={axis} {name} threads={nt}")


def test_sum_is_pairwise_accurate_and_thread_independent(threads):
    """1e7 float32 values of 0.1: float32 accumulation in order would be off by about 10%; the
    pairwise sum in double is exact to float32 rounding, and the same on any thread count."""
    n = 10_000_000
    a = np.full(n, 0.1, dtype=np.float32)
    x = ts.asarray(a, device="cpu")
    exact = float(np.float32(0.1)) * n
    got = {}
    for nt in (1, 2, 3):
        ts.set_num_threads(nt)
        got[nt] = float(ts.sum(x))
        assert abs(got[nt] - exact) <= 1e-6 * exact
        assert abs(float(ts.mean(x)) - float(np.float32(0.1))) <= 1e-7
    assert got[1] == got[2] == got[3]
    # Column sums of a tall array (the reduced axis first) take the same pairwise shape.
    tall = np.full((1_000_000, 7), 0.1, dtype=np.float32)
    col = np.asarray(ts.sum(ts.asarray(tall, device="cpu"), axis=0))
    np.testing.assert_allclose(col, np.float32(0.1) * 1e6, rtol=1e-6)
    # float64: within a few ulp of the exact sum (math.fsum); a sum in order drifts by about
    # sqrt(n) ulp (1e-13 here), pairwise by about log2(n) at most.
    b = np.random.default_rng(5).random(2_000_001)
    exact = math.fsum(b)
    for nt in (1, 2):
        ts.set_num_threads(nt)
        assert abs(float(ts.sum(ts.asarray(b, device="cpu"))) - exact) <= 1e-14 * exact


def test_matmul_and_linalg_under_any_thread_count(rng, threads):
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 250)).astype(np.float32)
    batch = rng.standard_normal((64, 24, 24))
    for nt in (1, 2):
        ts.set_num_threads(nt)
        assert_close(ts.asarray(a, device="cpu") @ ts.asarray(b, device="cpu"), a @ b, rtol=1e-4, atol=1e-4)
        # A batch of small products and of small factorizations: one matrix per OpenMP thread.
        xb = ts.asarray(batch, device="cpu")
        assert_close(xb @ xb, batch @ batch, rtol=1e-10, atol=1e-10)
        spd = batch @ np.swapaxes(batch, 1, 2) + 24 * np.eye(24)
        assert_close(ts.linalg.cholesky(ts.asarray(spd, device="cpu")), np.linalg.cholesky(spd), rtol=1e-9, atol=1e-9)
