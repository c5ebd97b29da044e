"""tessel.torch's compiled autograd op (python/torch_ops/fuse_autograd.cpp): the library that
PyTorch loads from this package when tessel was built with PyTorch importable. tt.fuse's eager
calls with grad run through it: the forward and the backward kernels are called from C++, and the
backward, which PyTorch's autograd engine runs on its own thread, never enters Python.

Without the library (tessel built where PyTorch was not importable, a PyTorch whose C++ ABI it
does not match, or TESSEL_TORCH_OPS=0), those calls run through tt.fuse's registered Python ops,
the path torch.compile traces: the same kernels and results, at a higher host cost per call.
"""
from __future__ import annotations

import os
import warnings

import torch

from tessel import _tessel

LIBRARY = os.path.join(os.path.dirname(__file__), "libtessel_torch_ops.so")


def _load():
    if os.environ.get("TESSEL_TORCH_OPS", "1") == "0" or not os.path.exists(LIBRARY):
        return None
    try:
        torch.ops.load_library(LIBRARY)
        torch.ops.tessel_torch.set_api(_tessel._fused_c_api())
    except (OSError, RuntimeError) as e:
        warnings.warn(f"tessel.torch: {LIBRARY} could not be loaded ({e}); tt.fuse's eager calls with grad "
                      "run through its registered Python ops", RuntimeWarning, stacklevel=2)
        return None
    return torch.ops.tessel_torch


_ops = _load()
# The op and plan registration; None without the library. The op is the overload's C++ callable
# itself (OpOverload._op): OpOverload.__call__ is one more Python frame per call.
fuse = getattr(_ops.fuse.default, "_op", _ops.fuse.default) if _ops is not None else None
add_plan = _ops.add_plan.default if _ops is not None else None
