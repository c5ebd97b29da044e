"""Numba's ``cuda.fp16`` for tessel: ``hadd``, ``hsub``, ``hmul``, ``hdiv``, ``hneg``, ``habs``,
``hfma`` (rounded once), ``hsqrt``, ``hrsqrt``, ``hrcp``, ``hexp``, ``hexp2``, ``hexp10``,
``hlog``, ``hlog2``, ``hlog10``, ``hsin``, ``hcos``, ``hceil``, ``hfloor``, ``hrint``,
``htrunc``, the comparisons ``heq``, ``hne``, ``hge``, ``hgt``, ``hle``, ``hlt`` and ``hmax``,
``hmin`` (a NaN gives the other operand, as CUDA's), for float16 values inside kernels, on CUDA
and on the CPU backend. Arguments of other real types are converted to float16. The functions are
tessel's kernel intrinsics (``tessel.kernel.fp16``)."""
from ._tablemodule import resolver

__getattr__, __dir__ = resolver("fp16", "fp16", "FP16")
