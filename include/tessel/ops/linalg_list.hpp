#pragma once
// Every function of tessel.linalg that is a C++ linear-algebra op, one row each: the one place
// where its Python name, parameters, result and docstring are written. The Python bindings
// (python/bindings/linalg.cpp), tessel.linalg's __all__ and docstrings (python/tessel/linalg.py),
// the stubs (python/tessel/linalg.pyi, by scripts/gen_op_stubs.py) and the API reference follow
// from the rows. The functions composed in Python (matrix_rank, pinv, cond, lstsq, the norms,
// tensordot, ...) are written in linalg.py and linalg.pyi by hand.
//
//   X(name, "python_name", shape, Result, "docstring")
//
// name: the C++ function tessel::linalg::name (include/tessel/ops/linalg.hpp), with its shape's
//   parameters, so a row without that declaration does not compile
// shape: the parameters, in C++ (after the array; the stream is last) and in Python:
//   matrix         (); Python: x, /
//   upper          (upper); Python: x, /, *, upper=False
//   two_matrices   (x2); Python: x1, x2, /
//   mode           (mode); Python: x, /, *, mode="reduced"
//   full_matrices  (full_matrices); Python: x, /, *, full_matrices=True
// Result: what the Python function returns: Array, or the named tuple of linalg.py that wraps the
//   binding's tuple of the C++ result's fields (in their order)
// docstring: the Python function's (its binding's __doc__, tessel.linalg's function, stub and API
//   reference entry): the Array API standard's linalg extension description, then what tessel adds.

#define TESSEL_LINALG_OPS(X) \
  X(cholesky, "cholesky", upper, Array, \
    "Returns the lower (upper) Cholesky decomposition of a complex Hermitian or real symmetric " \
    "positive-definite matrix (or a stack of matrices) x: L with x = L @ L^H (upper=True: U with " \
    "x = U^H @ U). LinAlgError names the first matrix that is not positive definite.") \
  X(cholesky_ex, "cholesky_ex", upper, CholeskyExResult, \
    "cholesky without the check: (L, info), info > 0 where a matrix is not positive definite. " \
    "Never synchronizes.") \
  X(det, "det", matrix, Array, \
    "Returns the determinant of a square matrix (or a stack of square matrices) x (from LU factors).") \
  X(slogdet, "slogdet", matrix, SlogdetResult, \
    "Returns the sign and the natural logarithm of the absolute value of the determinant of a square " \
    "matrix (or a stack of square matrices) x: det = sign * exp(logabsdet). Singular: (0, -inf).") \
  X(eigh, "eigh", matrix, EighResult, \
    "Returns an eigenvalue decomposition of a complex Hermitian or real symmetric matrix (or a stack " \
    "of matrices) x: eigenvalues (ascending, real) and eigenvectors (columns), read from the lower " \
    "triangle.") \
  X(eigh_ex, "eigh_ex", matrix, EighExResult, \
    "eigh without the check: (eigenvalues, eigenvectors, info). Never synchronizes.") \
  X(eigvalsh, "eigvalsh", matrix, Array, \
    "Returns the eigenvalues (ascending, real) of a complex Hermitian or real symmetric matrix (or a " \
    "stack of matrices) x.") \
  X(eig, "eig", matrix, EigResult, \
    "Returns an eigenvalue decomposition of a real or complex square matrix (or a stack of matrices) " \
    "x: eigenvalues and right eigenvectors (unit-norm columns), both complex, in no particular order.") \
  X(eigvals, "eigvals", matrix, Array, \
    "Returns the eigenvalues (complex, in no particular order) of a real or complex square matrix (or " \
    "a stack of matrices) x.") \
  X(inv, "inv", matrix, Array, \
    "Returns the multiplicative inverse of a square matrix (or a stack of square matrices) x (LU " \
    "with partial pivoting). LinAlgError names the first singular matrix.") \
  X(inv_ex, "inv_ex", matrix, InvExResult, \
    "inv without the check: (inverse, info), info > 0 where a matrix is singular. Never " \
    "synchronizes.") \
  X(solve, "solve", two_matrices, Array, \
    "Returns the solution of a square system of linear equations with a unique solution: x1 @ " \
    "result = x2. x2 is a vector (M,) when it is 1-D, else a stack of (M, K) matrices whose batch " \
    "dimensions broadcast against x1's.") \
  X(solve_ex, "solve_ex", two_matrices, SolveExResult, \
    "solve without the check: (result, info), info > 0 where a matrix is singular. Never " \
    "synchronizes.") \
  X(qr, "qr", mode, QRResult, \
    "Returns the QR decomposition x = Q @ R of a full column rank matrix (or a stack of matrices), " \
    "Q orthonormal and R upper-triangular: mode \"reduced\" (Q (..., M, K), R (..., K, N), K = " \
    "min(M, N)) or \"complete\" (Q (..., M, M), R (..., M, N)).") \
  X(svd, "svd", full_matrices, SVDResult, \
    "Returns a singular value decomposition x = U @ diag(S) @ Vh of a matrix (or a stack of " \
    "matrices) x, S descending. full_matrices: U (..., M, M) and Vh (..., N, N); else (..., M, K) " \
    "and (..., K, N), K = min(M, N).") \
  X(svdvals, "svdvals", matrix, Array, \
    "Returns the singular values (descending, real) of a matrix (or a stack of matrices) x.")
