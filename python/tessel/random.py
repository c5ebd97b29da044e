"""Random numbers (counter-based Philox; the same seed gives the same values on CPU and CUDA)."""
from __future__ import annotations

from . import _tessel

__all__ = ["seed", "uniform", "normal", "integers", "random"]


def seed(value):
    _tessel._random_seed(int(value))


def uniform(low=0.0, high=1.0, size=(), *, dtype=None, device=None):
    return _tessel._random_uniform(size, float(low), float(high), dtype, device)


def random(size=(), *, dtype=None, device=None):
    return uniform(0.0, 1.0, size, dtype=dtype, device=device)


def normal(loc=0.0, scale=1.0, size=(), *, dtype=None, device=None):
    return _tessel._random_normal(size, float(loc), float(scale), dtype, device)


def integers(low, high=None, size=(), *, dtype=None, device=None):
    if high is None:
        low, high = 0, low
    return _tessel._random_integers(size, int(low), int(high), dtype, device)
