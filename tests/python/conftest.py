"""Shared fixtures: every test body that takes `device` runs on the CPU and on CUDA (skipped
with the reason when no GPU is usable)."""
import threading
import time

import numpy as np
import pytest

import tessel as ts


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    if request.param == "cuda" and not ts.cuda_available():
        pytest.skip(f"CUDA unavailable: {ts.cuda_unavailable_reason()}")
    return ts.Device("cpu") if request.param == "cpu" else ts.Device("cuda:0")


@pytest.fixture
def rng():
    return np.random.default_rng(20260522)


def random_array(rng, shape, dtype):
    """Fresh random values (never zeros) of a NumPy dtype name."""
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("int") or dtype.startswith("uint"):
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -100), min(int(info.max), 100)
        return rng.integers(lo, hi, size=shape).astype(dtype)
    if dtype.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def assert_close(actual, expected, rtol=None, atol=None):
    """Compare a tessel array (or anything np.asarray takes) to a NumPy reference: shape, dtype
    and values."""
    got = np.asarray(actual)
    want = np.asarray(expected)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    if rtol is None:
        rtol = {np.dtype("float16"): 1e-3, np.dtype("float32"): 1e-5, np.dtype("complex64"): 1e-5}.get(want.dtype, 1e-12)
    if atol is None:
        atol = rtol
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def main_thread_stall(work):
    """Runs work() in a second thread while this thread spins; returns (the longest pause of this
    thread's loop meanwhile, how long work took). A call that kept the GIL stalls this thread for
    its whole duration, one that releases it stalls it for at most a switch interval."""
    done = threading.Event()
    took = []

    def run():
        t0 = time.perf_counter()
        work()
        took.append(time.perf_counter() - t0)
        done.set()

    worker = threading.Thread(target=run)
    last = time.perf_counter()
    gap = 0.0
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    worker.join()
    return gap, took[0]
