"""The Array API's inspection utilities: __array_namespace_info__()."""
from __future__ import annotations

from .. import _tessel
from .._tessel import Device
from ._helpers import dtype_named
from .dtypes import ARRAY_API_DTYPE_NAMES, DEFAULT_COMPLEX, DEFAULT_FLOAT, KINDS


def _kind_dtypes(kind):
    """The Array API dtype names of one kind string or a tuple of them (ValueError otherwise)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    chars = set()
    for k in kinds:
        if not isinstance(k, str) or k not in KINDS:
            raise ValueError(f"dtypes: unknown kind {k!r} (kinds: {', '.join(repr(n) for n in KINDS)})")
        chars.update(KINDS[k])
    return [n for n in ARRAY_API_DTYPE_NAMES if dtype_named(n).kind in chars]


class _Info:
    """What __array_namespace_info__() returns (Array API inspection utilities)."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def extensions(self):
        """The Array API extensions tessel provides (not a standard inspection function: the
        standard detects extensions with hasattr(xp, "linalg") / hasattr(xp, "fft"), which holds)."""
        return ["fft", "linalg"]

    def default_device(self):
        return _tessel.default_device()

    def _check_device(self, device, op):
        if device is not None and Device(str(device)) not in self.devices():
            raise ValueError(f"{op}: device {device} is not available (devices: {', '.join(map(str, self.devices()))})")

    def default_dtypes(self, *, device=None):
        self._check_device(device, "default_dtypes")
        return {"real floating": dtype_named(DEFAULT_FLOAT), "complex floating": dtype_named(DEFAULT_COMPLEX),
                "integral": dtype_named("int64"), "indexing": dtype_named("int64")}

    def dtypes(self, *, device=None, kind=None):
        self._check_device(device, "dtypes")
        names = ARRAY_API_DTYPE_NAMES if kind is None else _kind_dtypes(kind)
        return {n: dtype_named(n) for n in names}

    def devices(self):
        devices = [Device("cpu")]
        if _tessel.cuda_available():
            devices += [Device(f"cuda:{i}") for i in range(_tessel.device_count())]
        return tuple(devices)


def __array_namespace_info__():
    return _Info()
