"""Shared fixtures: every test body that takes `device` runs on the CPU and on each test GPU,
and one that takes `gpu` on each test GPU (a GPU this machine lacks skips with the reason).

The test GPUs are cuda:0, cuda:1 and every further visible GPU, or those TESSEL_TEST_DEVICES
lists ("1" runs every GPU test on cuda:1 alone, as the C++ tests read it too)."""
import os
import threading
import time

import numpy as np
import pytest

import tessel as ts


def _test_gpus():
    listed = [item.strip().removeprefix("cuda:") for item in os.environ.get("TESSEL_TEST_DEVICES", "").split(",")]
    listed = [int(item) for item in listed if item]
    if listed:
        return [f"cuda:{i}" for i in listed]
    count = max(2, ts.device_count() if ts.cuda_available() else 0)
    return [f"cuda:{i}" for i in range(count)]


TEST_GPUS = _test_gpus()
# Where tests that need one GPU run: the first test GPU.
GPU = TEST_GPUS[0]


def unavailable_reason(name):
    """Why a device cannot run here ("" when it can)."""
    if name == "cpu":
        return ""
    if not ts.cuda_available():
        return f"CUDA unavailable: {ts.cuda_unavailable_reason()}"
    index = ts.Device(name).index
    if index >= ts.device_count():
        count = ts.device_count()
        return f"{name} is not present: this machine has {count} CUDA device{'' if count == 1 else 's'}"
    return ""


def _use(name):
    reason = unavailable_reason(name)
    if reason:
        pytest.skip(reason)
    return ts.Device(name)


@pytest.fixture(params=["cpu"] + TEST_GPUS)
def device(request):
    return _use(request.param)


@pytest.fixture(params=TEST_GPUS)
def gpu(request):
    return _use(request.param)


@pytest.fixture(autouse=True, scope="session")
def _current_device_is_the_test_gpu():
    """When the first test GPU is not cuda:0 (TESSEL_TEST_DEVICES=1), it is made the current
    device of tessel and of the PyTorch and CuPy that interop tests use, so that their defaults
    ("cuda", new streams) land on it too."""
    index = ts.Device(GPU).index
    if index != 0 and not unavailable_reason(GPU):
        ts.set_current_device(index)
        for use in (lambda: __import__("torch").cuda.set_device(index),
                    lambda: __import__("cupy").cuda.Device(index).use()):
            try:
                use()
            except Exception:  # not installed or without a GPU: its tests skip
                pass
    yield


needs_two_gpus = pytest.mark.skipif(not ts.cuda_available() or ts.device_count() < 2,
                                    reason=f"needs two CUDA devices, found {ts.device_count() if ts.cuda_available() else 0}")


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
