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
