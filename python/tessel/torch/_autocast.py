"""Autocast rules that follow the active autocast dtype.

torch.library.register_autocast casts to one dtype fixed at registration; torch's own linear
instead runs in whatever dtype the autocast region asks for (bfloat16 or float16). This
registers the same kind of kernel on the Autocast<Device> dispatch keys, but reads the dtype
from the region at call time, with the rule torch uses for its lower-precision ops: floating
tensors on that device type other than float64 are cast, everything else passes through.
"""
from __future__ import annotations

import torch

_lib = torch.library.Library("tessel", "FRAGMENT")


def _cast(value, device_type, dtype):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.device.type == device_type and value.dtype is not torch.float64:
            return value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def register_autocast_to_region_dtype(op, name: str, device_types=("cpu", "cuda")) -> None:
    """Registers `op` (the OpOverloadPacket's default overload runs) on the autocast keys of
    `device_types`; `name` is the op's name in the tessel namespace."""
    for device_type in device_types:
        if not torch.amp.is_autocast_available(device_type):
            continue
        key = "Autocast" + torch._C._dispatch_key_for_device(device_type)
        excluded = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))

        def kernel(_keyset, *args, _device_type=device_type, _excluded=excluded):
            dtype = torch.get_autocast_dtype(_device_type)
            with torch._C._ExcludeDispatchKeyGuard(_excluded):
                return op(*_cast(args, _device_type, dtype))

        _lib.impl(name, kernel, key, with_keyset=True)
