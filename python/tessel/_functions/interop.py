"""Host copies and NumPy/CuPy interop helpers: to_numpy, asnumpy and get_array_module. DLPack
(from_dlpack, export_to) is in the C++ bindings."""
from __future__ import annotations

from .._tessel import Array


def to_numpy(x):
    """A NumPy copy of x (bfloat16 becomes float32)."""
    return x.__array__()


def asnumpy(a, /):
    """A NumPy copy of a on the host (CuPy's name; ``np.asarray(a)`` does the same)."""
    import numpy

    return numpy.asarray(a)


def get_array_module(*args):
    """CuPy's get_array_module: tessel when any argument is a tessel array, else NumPy, for code
    that runs on either."""
    for a in args:
        if isinstance(a, Array):
            import tessel

            return tessel
    import numpy

    return numpy
