"""Type stubs of tessel.linalg (Array API linalg extension)."""
from typing import Any, Literal, NamedTuple, Optional, Sequence, Tuple, Union
from . import Array, matmul as matmul, vecdot as vecdot

def matrix_transpose(x: Array, /) -> Array: ...
def tensordot(x1: Array, x2: Array, /, *, axes: Union[int, Tuple[Sequence[int], Sequence[int]]] = 2) -> Array: ...
def outer(x1: Array, x2: Array, /) -> Array: ...
def diagonal(x: Array, /, *, offset: int = 0) -> Array: ...
def trace(x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array: ...
def cross(x1: Array, x2: Array, /, *, axis: int = -1) -> Array: ...
def matrix_power(x: Array, n: int, /) -> Array: ...
def vector_norm(x: Array, /, *, axis: Union[int, Tuple[int, ...], None] = None, keepdims: bool = False,
                ord: Union[int, float] = 2) -> Array: ...
def matrix_norm(x: Array, /, *, keepdims: bool = False, ord: Union[int, float, Literal["fro", "nuc"]] = "fro") -> Array: ...

class LinAlgError(ValueError):
    batch_index: int
    info: int

class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array

class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array

class QRResult(NamedTuple):
    Q: Array
    R: Array

class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array

class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array

class LstsqResult(NamedTuple):
    solution: Array
    residuals: Array
    rank: Union[int, Array]
    singular_values: Array

class CholeskyExResult(NamedTuple):
    L: Array
    info: Array

class InvExResult(NamedTuple):
    inverse: Array
    info: Array

class SolveExResult(NamedTuple):
    result: Array
    info: Array

class EighExResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array
    info: Array

# ---- factorizations and solvers: generated from the linalg rows by scripts/gen_op_stubs.py ----
def cholesky(x: Array, /, *, upper: bool = False) -> Array:
    """Returns the lower (upper) Cholesky decomposition of a complex Hermitian or real symmetric
    positive-definite matrix (or a stack of matrices) x: L with x = L @ L^H (upper=True: U with x
    = U^H @ U). LinAlgError names the first matrix that is not positive definite.
    """
def cholesky_ex(x: Array, /, *, upper: bool = False) -> CholeskyExResult:
    """cholesky without the check: (L, info), info > 0 where a matrix is not positive definite.
    Never synchronizes.
    """
def det(x: Array, /) -> Array:
    """Returns the determinant of a square matrix (or a stack of square matrices) x (from LU
    factors).
    """
def slogdet(x: Array, /) -> SlogdetResult:
    """Returns the sign and the natural logarithm of the absolute value of the determinant of a
    square matrix (or a stack of square matrices) x: det = sign * exp(logabsdet). Singular: (0,
    -inf).
    """
def eigh(x: Array, /) -> EighResult:
    """Returns an eigenvalue decomposition of a complex Hermitian or real symmetric matrix (or a
    stack of matrices) x: eigenvalues (ascending, real) and eigenvectors (columns), read from the
    lower triangle.
    """
def eigh_ex(x: Array, /) -> EighExResult:
    """eigh without the check: (eigenvalues, eigenvectors, info). Never synchronizes."""
def eigvalsh(x: Array, /) -> Array:
    """Returns the eigenvalues (ascending, real) of a complex Hermitian or real symmetric matrix (or
    a stack of matrices) x.
    """
def eig(x: Array, /) -> EigResult:
    """Returns an eigenvalue decomposition of a real or complex square matrix (or a stack of
    matrices) x: eigenvalues and right eigenvectors (unit-norm columns), both complex, in no
    particular order.
    """
def eigvals(x: Array, /) -> Array:
    """Returns the eigenvalues (complex, in no particular order) of a real or complex square matrix
    (or a stack of matrices) x.
    """
def inv(x: Array, /) -> Array:
    """Returns the multiplicative inverse of a square matrix (or a stack of square matrices) x (LU
    with partial pivoting). LinAlgError names the first singular matrix.
    """
def inv_ex(x: Array, /) -> InvExResult:
    """inv without the check: (inverse, info), info > 0 where a matrix is singular. Never
    synchronizes.
    """
def solve(x1: Array, x2: Array, /) -> Array:
    """Returns the solution of a square system of linear equations with a unique solution: x1 @
    result = x2. x2 is a vector (M,) when it is 1-D, else a stack of (M, K) matrices whose batch
    dimensions broadcast against x1's.
    """
def solve_ex(x1: Array, x2: Array, /) -> SolveExResult:
    """solve without the check: (result, info), info > 0 where a matrix is singular. Never
    synchronizes.
    """
def qr(x: Array, /, *, mode: Literal["reduced", "complete"] = "reduced") -> QRResult:
    """Returns the QR decomposition x = Q @ R of a full column rank matrix (or a stack of matrices),
    Q orthonormal and R upper-triangular: mode "reduced" (Q (..., M, K), R (..., K, N), K =
    min(M, N)) or "complete" (Q (..., M, M), R (..., M, N)).
    """
def svd(x: Array, /, *, full_matrices: bool = True) -> SVDResult:
    """Returns a singular value decomposition x = U @ diag(S) @ Vh of a matrix (or a stack of
    matrices) x, S descending. full_matrices: U (..., M, M) and Vh (..., N, N); else (..., M, K)
    and (..., K, N), K = min(M, N).
    """
def svdvals(x: Array, /) -> Array:
    """Returns the singular values (descending, real) of a matrix (or a stack of matrices) x."""
# ---- end of the generated factorizations and solvers ----
def matrix_rank(x: Array, /, *, rtol: Union[float, Array, None] = None) -> Array: ...
def pinv(x: Array, /, *, rtol: Union[float, Array, None] = None) -> Array: ...
def cond(x: Array, p: Union[int, float, Literal["fro", "nuc"], None] = None) -> Array: ...
def lstsq(a: Array, b: Array, /, rcond: Optional[float] = None) -> LstsqResult: ...
