"""``numba.cuda.cudadrv.devicearray``: the same module as ``tessel.numba.cuda.devicearray``."""
from ..devicearray import *  # noqa: F401,F403
from ..devicearray import DeviceNDArray, DeviceNDArrayBase, DeviceRecord, MappedNDArray  # noqa: F401
