"""Random numbers (counter-based Philox; the same seed gives the same values on CPU and CUDA)."""
from __future__ import annotations

from . import _tessel

__all__ = ["seed", "uniform", "normal", "integers", "random", "rand", "randn", "random_sample", "standard_normal",
           "randint"]


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


# NumPy's legacy names (numpy.random.rand, ...), which CuPy keeps too; the same generator.
def rand(*shape, dtype=None, device=None):
    """Uniform values in [0, 1) of the given shape (``rand(2, 3)``)."""
    return random(shape, dtype=dtype, device=device)


def randn(*shape, dtype=None, device=None):
    """Standard normal values of the given shape (``randn(2, 3)``)."""
    return normal(0.0, 1.0, shape, dtype=dtype, device=device)


def random_sample(size=None, *, dtype=None, device=None):
    return random(() if size is None else size, dtype=dtype, device=device)


def standard_normal(size=None, *, dtype=None, device=None):
    return normal(0.0, 1.0, () if size is None else size, dtype=dtype, device=device)


def randint(low, high=None, size=None, dtype=None, *, device=None):
    """Integers in [low, high) (or [0, low)), as numpy.random.randint."""
    return integers(low, high, () if size is None else size, dtype=dtype, device=device)
