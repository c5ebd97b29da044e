from typing import Any, Optional, Sequence, Union
from . import Array

def seed(value: int) -> None:
    """Resets the default generator to ``value``."""
def uniform(low: float = 0.0, high: float = 1.0, size: Union[int, Sequence[int]] = (), *, dtype: Any = None, device: Any = None) -> Array:
    """Uniform values in [low, high) of a floating dtype (float32 by default)."""
def random(size: Union[int, Sequence[int]] = (), *, dtype: Any = None, device: Any = None) -> Array:
    """Uniform values in [0, 1)."""
def normal(loc: float = 0.0, scale: float = 1.0, size: Union[int, Sequence[int]] = (), *, dtype: Any = None, device: Any = None) -> Array:
    """Normal values with mean ``loc`` and standard deviation ``scale``."""
def integers(low: int, high: Optional[int] = None, size: Union[int, Sequence[int]] = (), *, dtype: Any = None, device: Any = None) -> Array:
    """Integers in [low, high) (or [0, low) with one bound), int64 by default."""
def rand(*shape: int, dtype: Any = None, device: Any = None) -> Array:
    """Uniform values in [0, 1) of the given shape (NumPy's and CuPy's ``rand(2, 3)``)."""
def randn(*shape: int, dtype: Any = None, device: Any = None) -> Array:
    """Standard normal values of the given shape (``randn(2, 3)``)."""
def random_sample(size: Optional[Union[int, Sequence[int]]] = None, *, dtype: Any = None, device: Any = None) -> Array:
    """Uniform values in [0, 1) (None: a 0-d array)."""
def standard_normal(size: Optional[Union[int, Sequence[int]]] = None, *, dtype: Any = None, device: Any = None) -> Array:
    """Standard normal values (None: a 0-d array)."""
def randint(low: int, high: Optional[int] = None, size: Optional[Union[int, Sequence[int]]] = None, dtype: Any = None, *, device: Any = None) -> Array:
    """Integers in [low, high) (or [0, low)), as numpy.random.randint."""
