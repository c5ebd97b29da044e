"""``numba.cuda.cudadrv``: only ``devicearray`` (``from numba.cuda.cudadrv.devicearray import DeviceNDArray``)."""
from .. import devicearray  # noqa: F401
from .._devices import CudaSupportError  # noqa: F401


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    from .. import _unsupported

    raise _unsupported.error(f"cudadrv.{name}", "of numba.cuda.cudadrv, tessel provides devicearray only")
