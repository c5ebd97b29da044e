"""Several GPUs from Python: asarray / to_device between cuda:0 and cuda:1 both ways, host copies
to either, ops on cuda:1 while cuda:0 is busy, two threads each driving a device, Pipeline and the
simulation on cuda:1, a device changed behind tessel's back, and the errors for a missing device or
mixed devices. Tests that need two GPUs skip with the reason on a machine with fewer."""
import os
import threading
import time

import numpy as np
import pytest

import tessel as ts
from conftest import assert_close, needs_two_gpus

_SPIN = r"""
extern "C" __global__ void spin(long long cycles, float* out) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  out[0] = 1.0f;
}
"""


def keep_busy(device, seconds):
    """Queues a kernel that keeps the device's current stream busy for at least `seconds` (clock64
    runs at no more than 2 GHz); returns the array it writes 1 into when done."""
    flag = ts.zeros((1,), dtype=ts.float32, device=device)
    ts.RawKernel(_SPIN, "spin")((1,), (1,), (np.int64(int(seconds * 2e9)), flag))
    return flag


@needs_two_gpus
@pytest.mark.parametrize("n", [0, 1, 1001, 65537, 1 << 26])
@pytest.mark.parametrize("direction", [("cuda:0", "cuda:1"), ("cuda:1", "cuda:0")])
def test_copies_between_gpus_both_ways(n, direction):
    before = ts.current_device()
    source_device, target_device = direction
    host = np.arange(n, dtype=np.int32)
    x = ts.asarray(host, device=source_device)
    for moved in (ts.asarray(x, device=target_device), x.to_device(target_device),
                  x.to_device(target_device, stream=ts.current_stream(ts.Device(source_device)))):
        assert moved.device == ts.Device(target_device)
        np.testing.assert_array_equal(np.asarray(moved), host)
    reversed_view = x[::-1].to_device(target_device)
    np.testing.assert_array_equal(np.asarray(reversed_view), host[::-1])
    assert ts.current_device() == before


@needs_two_gpus
def test_asarray_from_numpy_onto_either_device_after_a_device_switch():
    host = np.random.default_rng(1).standard_normal((257, 3)).astype(np.float32)
    before = ts.current_device()
    try:
        for current in (1, 0):
            ts.set_current_device(current)
            for target in ("cuda:0", "cuda:1"):
                x = ts.asarray(host, device=target)
                assert x.device == ts.Device(target)
                assert_close(x * 2 + 1, host * 2 + 1)
                pinned = ts.cuda.pinned_empty(host.shape, "float32")
                pinned[...] = host
                assert_close(ts.asarray(pinned, device=target), host)
            assert ts.current_device() == ts.Device(f"cuda:{current}")
    finally:
        ts.set_current_device(before.index)


@needs_two_gpus
def test_copy_above_4_gib_both_ways():
    """One copy of more than 4 GiB each way (byte offsets past 2^32); skipped when the GPUs lack
    the memory (about 9 GB on cuda:0 and 5 GB on cuda:1)."""
    n = (4 << 30) + 4099
    try:
        x = ts.full((n,), 7, dtype=ts.uint8, device="cuda:0")
        marks = [0, (1 << 32) - 1, 1 << 32, n - 1]
        for i, m in enumerate(marks):
            x[m] = i + 1
        y = x.to_device("cuda:1")
        del x
        z = y.to_device("cuda:0")
    except ts.OutOfMemory as error:
        pytest.skip(f"not enough GPU memory for two 4 GiB copies: {error}")
    for a in (y, z):
        assert [int(a[m]) for m in marks] == [1, 2, 3, 4]
        assert int(ts.sum(a, dtype=ts.int64)) == 7 * (n - 4) + 10


@needs_two_gpus
def test_ops_on_device_1_while_device_0_is_busy():
    before = ts.current_device()
    n = 1 << 20

    def work():
        x = ts.arange(n, dtype=ts.int64, device="cuda:1")
        assert int(ts.sum(x * 2 + 1)) == n * n
        assert int(ts.sort(-x)[0]) == -(n - 1)
        m = ts.matmul(ts.ones((64, 32), device="cuda:1"), ts.ones((32, 16), device="cuda:1"))
        assert float(m[0, 0]) == 32.0
        assert complex(ts.fft.fft(ts.ones(256, dtype=ts.complex64, device="cuda:1"))[0]) == 256
        assert float(ts.max(ts.random.uniform(size=(n,), device="cuda:1"))) < 1.0

    work()  # compiles and loads the kernels first, so the part below is only their work
    flag = keep_busy("cuda:0", 3.0)
    work()
    assert not ts.current_stream(ts.Device("cuda:0")).query(), "cuda:1's work waited for cuda:0"
    assert float(flag[0]) == 1.0  # waits for the busy kernel
    assert ts.current_device() == before


@needs_two_gpus
def test_pinned_source_freed_while_its_copy_to_another_device_is_pending():
    n = (1 << 22) + 1
    for device in ("cuda:1", "cuda:0"):
        keep_busy(device, 1.0)
        pinned = ts.cuda.pinned_empty((n,), "int32", numpy=False)
        np.from_dlpack(pinned)[...] = np.arange(n, dtype=np.int32)
        moved = pinned.to_device(device)  # queued behind the busy kernel
        del pinned
        for _ in range(4):  # new pinned blocks must not be the one the pending copy reads
            np.from_dlpack(ts.cuda.pinned_empty((n,), "int32", numpy=False))[...] = -1
        np.testing.assert_array_equal(np.asarray(moved), np.arange(n, dtype=np.int32))


@needs_two_gpus
def test_two_threads_on_two_devices_run_mixed_ops():
    """Each thread drives one device for TESSEL_MULTI_GPU_SECONDS (default 30) with the other
    device current, so every op depends on the guards."""
    seconds = float(os.environ.get("TESSEL_MULTI_GPU_SECONDS") or 30)
    failures, rounds = [], [0, 0]

    def work(mine, other):
        try:
            ts.set_current_device(ts.Device(other).index)
            stop = time.monotonic() + seconds
            i = 0
            while time.monotonic() < stop:
                n = (1 << 16) + i % 7
                host = np.arange(n, dtype=np.float64)
                x = ts.asarray(host, device=mine)
                y = x * 2.0 + 1.0
                assert float(ts.sum(y)) == float(n) * n
                assert int(ts.argsort(-x)[0]) == n - 1
                m = ts.matmul(ts.ones((48, 40), device=mine), ts.full((40, 24), 0.5, device=mine))
                assert float(ts.min(m)) == 20.0 == float(ts.max(m))
                assert abs(complex(ts.fft.fft(ts.asarray(np.ones(n, np.complex128), device=mine))[0]) - n) < 1e-6
                there = ts.asarray(y, device=other)
                assert there.device == ts.Device(other)
                np.testing.assert_array_equal(np.asarray(there.to_device(mine)), host * 2 + 1)
                assert ts.current_device() == ts.Device(other)
                rounds[ts.Device(mine).index] += 1
                i += 1
        except BaseException as error:  # reported by the main thread
            failures.append(f"{mine}: {error!r}")

    threads = [threading.Thread(target=work, args=("cuda:0", "cuda:1")),
               threading.Thread(target=work, args=("cuda:1", "cuda:0"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert min(rounds) > 0


@needs_two_gpus
def test_pipeline_on_device_1():
    before = ts.current_device()
    host = np.random.default_rng(2).standard_normal((10_000, 33)).astype(np.float32)
    devices = []

    def compute(x):
        devices.append(x.device)
        return x * 2 + 1

    p = ts.Pipeline(compute, chunk_size=997, streams=3, device="cuda:1")
    assert_close(p.run(host), host * 2 + 1)
    assert set(devices) == {ts.Device("cuda:1")}
    assert p.report.device == "cuda:1"
    assert ts.current_device() == before


@needs_two_gpus
def test_particles_benchmark_setup_on_device_1():
    on1 = ts.sim.Particles.benchmark_setup(100_000, "cuda:1")
    on0 = ts.sim.Particles.benchmark_setup(100_000, "cuda:0")
    on1.step(20)
    on0.step(20)
    a, b = on0.diagnostics(), on1.diagnostics()
    assert b["step"] == 20
    assert b["kinetic"] == pytest.approx(a["kinetic"], rel=1e-4)
    assert b["total_energy"] == pytest.approx(a["total_energy"], rel=1e-4)


@needs_two_gpus
def test_device_changed_by_another_library_is_respected():
    """PyTorch changes the current device between tessel calls: tessel's ops still run on their
    arrays' device and leave PyTorch's device as it was."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs PyTorch with two GPUs")
    x0 = ts.arange(1000, dtype=ts.float32, device="cuda:0")
    previous = torch.cuda.current_device()
    try:
        torch.cuda.set_device(1)
        y0 = x0 * 2 + 1
        assert y0.device == ts.Device("cuda:0")
        assert_close(y0, np.arange(1000, dtype=np.float32) * 2 + 1)
        assert torch.cuda.current_device() == 1
        t1 = torch.arange(10, dtype=torch.float32, device="cuda:1")
        x1 = ts.asarray(t1)
        assert x1.device == ts.Device("cuda:1")
        assert_close(x1 + 1, np.arange(10, dtype=np.float32) + 1)
        back = torch.from_dlpack(ts.asarray(x1 * 3))
        assert back.device == torch.device("cuda:1")
        assert torch.equal(back.cpu(), torch.arange(10, dtype=torch.float32) * 3)
        assert torch.cuda.current_device() == 1
    finally:
        torch.cuda.set_device(previous)


def test_missing_device_is_a_clear_error_everywhere():
    if ts.cuda_available() and ts.device_count() > 7:
        pytest.skip("cuda:7 exists here")
    for make in (lambda: ts.zeros(2, device="cuda:7"),
                 lambda: ts.asarray(np.ones(2), device="cuda:7"),
                 lambda: ts.asarray(ts.ones(2, device="cpu"), device="cuda:7"),
                 lambda: ts.ones(2, device="cpu").to_device("cuda:7"),
                 lambda: ts.Stream(ts.Device("cuda:7")),
                 lambda: ts.Pipeline(lambda x: x, device="cuda:7"),
                 lambda: ts.random.uniform(size=(2,), device="cuda:7")):
        with pytest.raises(ts.DeviceError, match="7"):
            make()


@needs_two_gpus
def test_mixed_devices_in_one_op_name_both():
    a0 = ts.ones((4, 4), device="cuda:0")
    a1 = ts.ones((4, 4), device="cuda:1")
    both = r"cuda:0.*cuda:1|cuda:1.*cuda:0"
    for op in (lambda: a0 + a1,
               lambda: ts.add(a0, 1.0, out=a1),
               lambda: ts.where(a0 > 0, a0, a1),
               lambda: ts.matmul(a0, a1),
               lambda: a0 @ a1,
               lambda: ts.concat([a0, a1]),
               lambda: ts.stack([a0, a1]),
               lambda: ts.fft.Plan(a0.astype(ts.complex64), "fft").execute(a1.astype(ts.complex64))):
        with pytest.raises(ts.DeviceError, match=both):
            op()
    host = np.ones((8, 4), np.float32)
    with pytest.raises(ts.DeviceError, match=both):
        ts.Pipeline(lambda x: x + a0, device="cuda:1").run(host)
    with pytest.raises(ts.DeviceError, match=both):  # compute returns an array on another device
        ts.Pipeline(lambda x: ts.ones(x.shape, device="cuda:0"), device="cuda:1").run(host)
