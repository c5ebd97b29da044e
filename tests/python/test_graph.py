"""ts.cuda.Graph / ts.cuda.graph(): replay equals eager, errors are clear, CPU fallback."""
import numpy as np
import pytest

import tessel as ts
from conftest import GPU, assert_close

needs_cuda = pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")


def chain(x, n=20):
    """20 small elementwise ops (the issue's graph benchmark shape)."""
    y = x
    for k in range(n):
        y = y * 1.01 + (k % 3) if k % 2 == 0 else ts.abs(y) - 0.5
    return y


def eager_reference(x_np, n=20):
    y = x_np.astype("float64")
    for k in range(n):
        y = y * 1.01 + (k % 3) if k % 2 == 0 else np.abs(y) - 0.5
    return y.astype("float32")


def test_graph_capture_replay_equals_eager(device, rng):
    a = rng.standard_normal(257).astype("float32")
    x = ts.asarray(a, device=device)
    out = {}

    def fn():
        out["y"] = chain(x)

    g = ts.cuda.Graph.capture(fn, device=device)
    assert g.defined and g.stream.device == device
    first = out["y"]
    g.replay()  # a CUDA capture only records the work: the first replay computes it
    assert_close(out["y"], eager_reference(a), rtol=1e-4)
    # New data in the captured input, then replay recomputes the output in place.
    b = rng.standard_normal(257).astype("float32")
    x[...] = ts.asarray(b, device=device)
    g.replay()
    assert out["y"] is first or device.type == "cpu"  # CUDA replays write the captured output
    assert_close(out["y"], eager_reference(b), rtol=1e-4)
    assert_close(out["y"], chain(x), rtol=1e-6)
    assert g.num_replays == 2


def test_graph_errors_propagate_from_fn(device):
    x = ts.ones(4, device=device)

    def bad():
        x + ts.ones(5, device=device)

    with pytest.raises(ts.ShapeError):
        ts.cuda.Graph.capture(bad, device=device)
    with pytest.raises(TypeError, match="callable"):
        ts.cuda.Graph.capture(3)
    with pytest.raises(ValueError, match="capture_error_mode"):
        ts.cuda.Graph.capture(lambda: None, device=device, capture_error_mode="loose")
    with pytest.raises(ValueError, match="empty"):
        ts.cuda.Graph().replay()


def test_with_form_on_cpu_points_to_capture():
    with pytest.raises(ts.DeviceError, match="Graph.capture"):
        with ts.cuda.graph(device="cpu"):
            pass


@needs_cuda
def test_with_form_replay_equals_eager(rng):
    a = rng.standard_normal(1000).astype("float32")
    x = ts.asarray(a, device=GPU)
    with ts.cuda.graph() as g:
        y = chain(x)
    assert g.num_nodes > 0
    b = rng.standard_normal(1000).astype("float32")
    x[...] = ts.asarray(b, device=GPU)
    g.replay()
    assert_close(y, eager_reference(b), rtol=1e-4)
    for _ in range(3):
        g.replay()
    assert_close(y, eager_reference(b), rtol=1e-4)
    assert g.num_replays == 4


@needs_cuda
def test_with_form_uncapturable_op_names_it():
    x = ts.ones(16, device=GPU)
    with pytest.raises(ts.TesselError) as info:
        with ts.cuda.graph():
            y = x * 2
            np.asarray(y)  # a host read waits on the GPU: cannot be captured
    assert "captur" in str(info.value)
    # The failed capture is discarded: tessel works normally afterwards.
    assert_close(x * 2, np.full(16, 2.0, "float32"))
    with pytest.raises(ts.TesselError):
        with ts.cuda.graph():
            ts.cuda.synchronize()


@needs_cuda
def test_replay_after_inputs_freed_raises():
    x = ts.ones(64, device=GPU)
    with ts.cuda.graph() as g:
        y = x + 1
    del x
    import gc

    gc.collect()
    with pytest.raises(ts.TesselError, match="freed"):
        g.replay()
    del y


@needs_cuda
def test_graph_context_misuse():
    ctx = ts.cuda.graph()
    with pytest.raises(RuntimeError, match="replay after"):
        ctx.replay()
    with ctx:
        pass
    with pytest.raises(RuntimeError, match="already used"):
        with ctx:
            pass
