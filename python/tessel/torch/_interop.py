"""Tensors across the torch/tessel boundary: zero-copy DLPack both ways, on torch's current stream.

Every op of tessel.torch converts its torch inputs with `to_tessel` and its tessel results with
`to_torch`. On a CUDA device it runs inside `on_torch_stream`, which makes torch's current stream
tessel's current stream for the op, so tessel's kernels queue behind torch's work and torch's
later kernels behind tessel's, with no synchronization and no copies.
"""
from __future__ import annotations

import torch

import tessel as ts

_ts_streams = {}  # (device index, CUDA stream handle) -> (the adopted tessel Stream, its tessel Device)


def ts_device(device: torch.device):
    """The tessel device of a torch device (cpu or cuda:N); others are a ValueError."""
    if device.type == "cpu":
        return ts.Device("cpu")
    if device.type == "cuda":
        return ts.Device(f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}")
    raise ValueError(f"tessel.torch: tensors on {device} are not supported (cpu and cuda only)")


class _OnTorchStream:
    """Makes torch's current stream of a CUDA device tessel's current stream of that device for
    the body of a with statement, and restores tessel's previous one after it."""
    __slots__ = ("stream", "device", "previous")

    def __init__(self, stream, device):
        self.stream, self.device = stream, device

    def __enter__(self):
        self.previous = ts.current_stream(self.device)
        ts.set_current_stream(self.stream)

    def __exit__(self, *exc):
        ts.set_current_stream(self.previous)


class _Nothing:
    __slots__ = ()

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


_NOTHING = _Nothing()


def _current_stream_handle(index):
    return torch.cuda.current_stream(index).cuda_stream


# The handle as an int without building a torch.cuda.Stream object per call (a few us each).
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _current_stream_handle)


def on_torch_stream(device: torch.device):
    """A context manager: tessel's work inside runs on torch's current stream of `device` (CPU: no-op)."""
    if device.type != "cuda":
        return _NOTHING
    return on_cuda_stream(device.index if device.index is not None else torch.cuda.current_device())


def on_cuda_stream(index: int):
    """on_torch_stream of CUDA device `index`: for callers that know the device from
    Tensor.is_cuda and Tensor.get_device() (tens of ns each), where torch.device.type costs about
    0.2 us per call (CPU measurement)."""
    handle = _current_raw_stream(index)
    adopted = _ts_streams.get((index, handle))
    if adopted is None:
        # torch keeps its streams alive for the process (its pool), so adopting is safe.
        stream = ts.Stream.from_handle(handle, f"cuda:{index}")
        adopted = _ts_streams[(index, handle)] = (stream, stream.device)
    return _OnTorchStream(*adopted)


def _from_dlpack_detached(t):
    # torch's __dlpack__ refuses tensors that require grad; the data is what crosses
    return ts.from_dlpack(t.detach() if t.requires_grad else t)


# Through torch's DLPack C exchange table tessel imports tensors that require grad as they are
# (no detach per call); through __dlpack__ they must be detached first.
try:
    ts.from_dlpack(torch.zeros(1, requires_grad=True))
    _import = ts.from_dlpack
except (RuntimeError, TypeError, BufferError):
    _import = _from_dlpack_detached


def to_tessel(t: torch.Tensor):
    """A tessel array viewing `t`'s memory (no copy)."""
    return _import(t)


# torch's DLPack C exchange table avoids a Python __dlpack__ call per result; older torch lacks it.
try:
    ts.export_to(ts.zeros((1,), device="cpu"), torch.Tensor)
    _exchange = True
except TypeError:
    _exchange = False

_export_to = ts.export_to
_Tensor = torch.Tensor

if _exchange:
    # One Python call, not three (to_torch -> _export -> _export_to): 0.12 us less per result on
    # the CPU (0.52 against 0.64 us); tt.fuse's eager forward and backward export one each.
    def to_torch(a) -> torch.Tensor:
        """A torch tensor viewing tessel array `a`'s memory (no copy)."""
        return _export_to(a, _Tensor)
else:
    def to_torch(a) -> torch.Tensor:
        """A torch tensor viewing tessel array `a`'s memory (no copy)."""
        return torch.from_dlpack(a)


def check_same_device(op: str, tensors, names) -> torch.device:
    """The common device of `tensors` (None entries skipped); a ValueError naming the op and every
    device otherwise."""
    device = None
    for t in tensors:
        if t is None:
            continue
        if device is None:
            device = t.device
        elif t.device != device:
            listed = ", ".join(f"{n} on {t.device}" for n, t in zip(names, tensors) if t is not None)
            raise ValueError(f"{op}: all tensors must be on one device, got {listed}")
    return device
