// The public linear-algebra functions: validation, dtype resolution, batch broadcasting, the
// column-major working copies the backends factor in place, and the parts composed from other
// ops (triangles, determinants from LU factors, info checks).
//
// solve, inv and eigh hand the backend their inputs in the compute dtype (broadcast views for
// solve) and the backend lays them out for the route it takes (backend/linalg.hpp). For the other
// ops every input is copied once into a fresh batch (LAPACK and cuSOLVER overwrite their input);
// the copy also casts and broadcasts. It is column-major (a strided transpose of the input) except
// where the transpose is free to use instead: Cholesky (x Hermitian) and determinants
// (det x^T = det x). Matrix results are the backends' column-major buffers seen through a swap of
// the last two axes: no second copy.
#include "tessel/ops/linalg.hpp"

#include <algorithm>
#include <complex>
#include <utility>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/linalg.hpp"
#include "ops/op_stream.hpp"
#include "backend/indexing.hpp"
#include "tessel/memory/capture.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/reduce.hpp"

namespace tessel::linalg {
namespace {

struct Matrices {
  Shape batch_shape;
  std::int64_t batch = 1;
  std::int64_t m = 0, n = 0;
  DType dtype = DType::float64;  // the compute dtype
};

std::int64_t product(const Shape& shape) {
  std::int64_t p = 1;
  for (std::int64_t d : shape) p *= d;
  return p;
}

Shape batch_of(const Array& x) { return Shape(x.shape().begin(), x.shape().end() - 2); }

Matrices inspect(const Array& x, const char* op, bool square) {
  if (x.ndim() < 2) {
    throw ShapeError(fmt::format("{}: needs a stack of matrices (..., M, N), got shape {}", op, shape_str(x.shape())));
  }
  Matrices mat;
  mat.m = x.dim(-2);
  mat.n = x.dim(-1);
  if (square && mat.m != mat.n) {
    throw ShapeError(fmt::format("{}: needs square matrices, got shape {} ({} x {})", op, shape_str(x.shape()), mat.m,
                                 mat.n));
  }
  mat.batch_shape = batch_of(x);
  mat.batch = product(mat.batch_shape);
  mat.dtype = compute_dtype(x.dtype(), op);
  return mat;
}

Shape with_tail(Shape shape, std::initializer_list<std::int64_t> tail) {
  shape.insert(shape.end(), tail.begin(), tail.end());
  return shape;
}

// x (broadcast to batch_shape + (rows, cols), cast to dtype) copied into a fresh buffer of
// batch_shape + (cols, rows): each matrix column-major.
Array column_major_copy(const Array& x, const Shape& batch_shape, DType dtype, const Stream& stream) {
  const std::int64_t rows = x.dim(-2), cols = x.dim(-1);
  Array work = empty(with_tail(batch_shape, {cols, rows}), dtype, x.device(), stream);
  if (work.size() > 0) copyto(work.swapaxes(-1, -2), x, stream);
  return work;
}

// x (broadcast to batch_shape + its matrix shape, cast to dtype) copied into a fresh row-major
// buffer: read column-major, each matrix is x^T.
Array row_major_copy(const Array& x, const Shape& batch_shape, DType dtype, const Stream& stream) {
  Array work = empty(with_tail(batch_shape, {x.dim(-2), x.dim(-1)}), dtype, x.device(), stream);
  if (work.size() > 0) copyto(work, x, stream);
  return work;
}

// The matrices of a column-major buffer batch + (cols, rows), as batch + (rows, cols).
Array matrices_of(const Array& column_major) { return column_major.swapaxes(-1, -2); }

backend::LinalgBatch batch_desc(const Matrices& mat) {
  backend::LinalgBatch p;
  p.dtype = mat.dtype;
  p.batch = mat.batch;
  p.m = mat.m;
  p.n = mat.n;
  return p;
}

std::int32_t* info_data(const Array& info) { return static_cast<std::int32_t*>(info.data()); }

// Backend calls: the same function in backend::cpu and backend::cuda. Waits for the operands'
// pending writes first and marks the written arrays afterwards.
void before(const Stream& stream, std::initializer_list<const Array*> arrays) {
  for (const Array* a : arrays) {
    if (a && a->defined()) a->storage()->wait_on_stream(stream);
  }
}
void after(const Stream& stream, std::initializer_list<const Array*> arrays) {
  for (const Array* a : arrays) {
    if (a && a->defined()) a->storage()->record_pending_write(stream);
  }
}

// The row-major (..., rows, cols) mask of the lower (i >= j + k) or upper (j >= i + k) triangle.
Array triangle_mask(std::int64_t rows, std::int64_t cols, bool lower, Device device, const Stream& stream) {
  const Array r = arange(Scalar(std::int64_t{0}), Scalar(rows), Scalar(std::int64_t{1}), DType::int64, device, stream)
                      .reshape({rows, 1});
  const Array c = arange(Scalar(std::int64_t{0}), Scalar(cols), Scalar(std::int64_t{1}), DType::int64, device, stream)
                      .reshape({1, cols});
  return lower ? greater_equal(r, c, std::nullopt, stream) : less_equal(r, c, std::nullopt, stream);
}

Array keep_triangle(const Array& matrices, bool lower, const Stream& stream) {
  const Array mask = triangle_mask(matrices.dim(-2), matrices.dim(-1), lower, matrices.device(), stream);
  const Array zero = zeros({}, matrices.dtype(), matrices.device(), stream);
  return where(mask, matrices, zero, std::nullopt, stream);
}

std::string batch_index_str(std::int64_t flat, const Shape& batch_shape) {
  std::vector<std::int64_t> index(batch_shape.size());
  for (std::size_t i = batch_shape.size(); i-- > 0;) {
    const std::int64_t d = batch_shape[i];
    index[i] = d > 0 ? flat % d : 0;
    flat = d > 0 ? flat / d : 0;
  }
  if (index.size() == 1) return fmt::format("({},)", index[0]);
  return fmt::format("({})", fmt::join(index, ", "));
}

// Raises LinAlgError for the first matrix whose info is positive; describe(info) says what went
// wrong. A negative info is a bug in tessel. On CUDA one small reduction on the op's stream
// (backend::cuda::first_failure) writes the first failing index into the stream's page-locked
// status words (the ones indexing reads sizes and bounds through), read after one stream
// synchronize; only a failure reads back more (its one info value). On the CPU a host loop.
template <class Describe>
void check_info(const Array& info_arg, const char* op, Describe&& describe, const OptionalStream& stream_arg) {
  if (info_arg.size() == 0) return;
  const Stream stream = detail::op_stream(info_arg, stream_arg, op);
  const Array info = info_arg.contiguous(stream);  // the backends' info arrays already are
  std::int64_t first = -1;
  std::int32_t v = 0;
  if (info.device().is_cuda()) {
    detail::check_not_capturing("linalg (reads the info array's first failure back)");
    {
      backend::StatusLease lease = backend::cuda::lease_status(stream);
      before(stream, {&info});
      backend::cuda::first_failure(info_data(info), info.size(), lease.words, stream);
      backend::cuda::read_status(lease, stream);
      if (lease.host[1] != 0) {
        first = lease.host[1] - 1;
        backend::cuda::clear_status(lease, stream);
      }
    }
    if (first < 0) return;
    v = info.reshape({info.size()}).slice(0, Slice(first, first + 1)).to_vector<std::int32_t>()[0];
  }
  if (info.device().is_cpu()) {
    const std::vector<std::int32_t> values = info.to_vector<std::int32_t>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] != 0) {
        first = static_cast<std::int64_t>(i);
        v = values[i];
        break;
      }
    }
    if (first < 0) return;
  }
  const std::string where = info.ndim() == 0 ? "the matrix" : fmt::format("the matrix at batch index {}",
                                                                             batch_index_str(first, info.shape()));
  if (v < 0) {
    throw Error(fmt::format("{}: internal error: LAPACK argument {} was rejected for {}", op, -v, where));
  }
  throw LinAlgError(fmt::format("{}: {} {}", op, where, describe(v)), first, v);
}

auto not_positive_definite = [](std::int32_t v) {
  return fmt::format("is not positive definite (its leading minor of order {} is not)", v);
};
auto singular = [](std::int32_t v) { return fmt::format("is singular (U[{0}, {0}] of its LU factors is zero)", v - 1); };
auto no_convergence = [](std::int32_t v) { return fmt::format("did not converge (info {})", v); };

// LU factors (column-major buffer, factored in place) and pivots (batch_shape + (n,)) of x.
struct LU {
  Array factors;  // batch + (n, n), column-major matrices
  Array pivots;   // batch + (n,), 1-based, int32 or int64
  Array info;
};
LU lu_factor(const Array& x, const Matrices& mat, const Stream& stream) {
  LU r;
  r.factors = row_major_copy(x, mat.batch_shape, mat.dtype, stream);  // LU of x^T: the same determinant
  r.info = zeros(mat.batch_shape, DType::int32, x.device(), stream);
  if (mat.batch > 0 && mat.n > 0) {
    backend::LinalgBatch p = batch_desc(mat);
    before(stream, {&r.factors});
    backend::dispatch::lu(x.device(), p, r.factors.data(), r.pivots, info_data(r.info), stream);
    after(stream, {&r.factors, &r.pivots, &r.info});
    r.pivots = r.pivots.reshape(with_tail(mat.batch_shape, {mat.n}));
  } else {
    r.pivots = zeros(with_tail(mat.batch_shape, {mat.n}), DType::int32, x.device(), stream);
  }
  return r;
}

// (diagonal of U, the sign of the row permutation as a dtype array of the batch shape).
struct LUParts {
  Array diagonal;
  Array permutation_sign;
};
LUParts lu_parts(const LU& lu, const Matrices& mat, const Stream& stream) {
  LUParts parts;
  Strides strides(lu.factors.strides().begin(), lu.factors.strides().end() - 2);
  strides.push_back(mat.n + 1);
  parts.diagonal = lu.factors.as_strided(with_tail(mat.batch_shape, {mat.n}), strides, lu.factors.offset());
  const Array expected =
      arange(Scalar(std::int64_t{1}), Scalar(mat.n + 1), Scalar(std::int64_t{1}), lu.pivots.dtype(), lu.factors.device(), stream);
  const Array swaps = sum(not_equal(lu.pivots, expected, std::nullopt, stream), std::vector<std::int64_t>{-1}, false, stream);
  const Array odd = astype(remainder(swaps, Scalar(std::int64_t{2}), std::nullopt, stream), mat.dtype, stream);
  parts.permutation_sign = subtract(Scalar(1.0), multiply(odd, Scalar(2.0), std::nullopt, stream), std::nullopt, stream);
  return parts;
}

// The product of complex values along the last axis as (exp(i * sum of angles), sum of log |z|):
// tessel's reductions take real inputs only.
std::pair<Array, Array> complex_log_product(const Array& z, const Stream& stream) {
  const std::vector<std::int64_t> last{-1};
  const Array theta = sum(angle(z, std::nullopt, stream), last, false, stream);
  const Array logabs = sum(log(abs(z, std::nullopt, stream), std::nullopt, stream), last, false, stream);
  const Array phase = exp(multiply(astype(theta, z.dtype(), stream), Scalar(std::complex<double>(0.0, 1.0)),
                                   std::nullopt, stream),
                          std::nullopt, stream);
  return {phase, logabs};
}

}  // namespace

DType compute_dtype(DType dtype, const char* op) {
  switch (dtype) {
    case DType::float32:
    case DType::float64:
    case DType::complex64:
    case DType::complex128:
      return dtype;
    default:
      break;
  }
  if (is_integer(dtype)) return DType::float64;  // NumPy's promotion
  throw DTypeError(fmt::format("{}: needs a floating-point or complex input (float32, float64, complex64, complex128; "
                               "integers are promoted to float64), got {}",
                               op, dtype_name(dtype)));
}

QRMode parse_qr_mode(std::string_view mode, const char* op) {
  if (mode == "reduced") return QRMode::reduced;
  if (mode == "complete") return QRMode::complete;
  throw ValueError(fmt::format("{}: mode must be \"reduced\" or \"complete\", got \"{}\"", op, mode));
}

// ---- Cholesky ----
CholeskyExResult cholesky_ex(const Array& x, bool upper, const OptionalStream& stream_arg) {
  TESSEL_RANGE("linalg.cholesky_ex");
  const char* op = "cholesky";
  const Matrices mat = inspect(x, op, true);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  // A plain (row-major) copy, no transpose: read column-major it is x^T, whose other triangle
  // holds the triangle of x that LAPACK should read. The Hermitian matrix it defines is conj(x)
  // (x for real input), whose factor with the other `upper` is, read row-major again, the factor
  // of x asked for: (U')^T = L when conj(x) = U'^H U'. This saves a strided transpose of x.
  Array work = empty(x.shape(), mat.dtype, x.device(), stream);
  if (work.size() > 0) copyto(work, x, stream);
  Array info = zeros(mat.batch_shape, DType::int32, x.device(), stream);
  if (mat.batch > 0 && mat.n > 0) {
    before(stream, {&work, &info});
    backend::dispatch::cholesky(x.device(), batch_desc(mat), work.data(), !upper, info_data(info), stream);
    after(stream, {&work, &info});
  }
  return {keep_triangle(work, !upper, stream), info};
}

Array cholesky(const Array& x, bool upper, const OptionalStream& stream) {
  CholeskyExResult r = cholesky_ex(x, upper, stream);
  check_info(r.info, "cholesky", not_positive_definite, stream);
  return r.factor;
}

// ---- inv / solve ----
InvExResult inv_ex(const Array& x, const OptionalStream& stream_arg) {
  TESSEL_RANGE("linalg.inv_ex");
  const char* op = "inv";
  const Matrices mat = inspect(x, op, true);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  if (mat.batch == 0 || mat.n == 0) {
    return {empty(x.shape(), mat.dtype, x.device(), stream), zeros(mat.batch_shape, DType::int32, x.device(), stream)};
  }
  // The backend chooses its route and lays the matrices out for it (backend/linalg.hpp).
  const Array in = x.dtype() == mat.dtype ? x : astype(x, mat.dtype, stream);
  backend::InvArrays r = backend::dispatch::inv(x.device(), batch_desc(mat), in, stream);
  return {r.inverse, r.info};
}

Array inv(const Array& x, const OptionalStream& stream) {
  InvExResult r = inv_ex(x, stream);
  check_info(r.info, "inv", singular, stream);
  return r.inverse;
}

SolveExResult solve_ex(const Array& x1, const Array& x2, const OptionalStream& stream_arg) {
  TESSEL_RANGE("linalg.solve_ex");
  const char* op = "solve";
  Matrices mat = inspect(x1, op, true);
  if (x2.device() != x1.device()) {
    throw DeviceError(fmt::format("solve: x1 is on {} but x2 is on {}", x1.device().str(), x2.device().str()));
  }
  if (x2.ndim() == 0) throw ShapeError("solve: x2 must have at least one dimension, got a 0-d array");
  mat.dtype = compute_dtype(result_type(compute_dtype(x1.dtype(), op), compute_dtype(x2.dtype(), op)), op);
  const Stream stream = detail::op_stream(x1, stream_arg, op);
  const bool vector = x2.ndim() == 1;
  const std::int64_t rows = vector ? x2.dim(0) : x2.dim(-2);
  if (rows != mat.n) {
    throw ShapeError(fmt::format("solve: x1 {} needs x2 with {} rows ({}), got shape {}", shape_str(x1.shape()), mat.n,
                                 vector ? "a vector (M,)" : "(..., M, K)", shape_str(x2.shape())));
  }
  if (!vector) {
    const Shape b2 = batch_of(x2);
    try {
      mat.batch_shape = broadcast_shapes(mat.batch_shape, b2, op);
    } catch (const ShapeError&) {
      throw ShapeError(fmt::format("solve: the batch shapes of x1 {} and x2 {} do not broadcast", shape_str(x1.shape()),
                                   shape_str(x2.shape())));
    }
    mat.batch = product(mat.batch_shape);
  }
  const std::int64_t nrhs = vector ? 1 : x2.dim(-1);
  if (mat.batch == 0 || mat.n == 0 || nrhs == 0) {
    const Shape shape = vector ? with_tail(mat.batch_shape, {mat.n}) : with_tail(mat.batch_shape, {mat.n, nrhs});
    return {empty(shape, mat.dtype, x1.device(), stream), zeros(mat.batch_shape, DType::int32, x1.device(), stream)};
  }
  // The backend chooses its route and lays the systems out for it (backend/linalg.hpp).
  const auto cast = [&](const Array& x) { return x.dtype() == mat.dtype ? x : astype(x, mat.dtype, stream); };
  const Array a = cast(x1).broadcast_to(with_tail(mat.batch_shape, {mat.n, mat.n}));
  const Array b = cast(vector ? x2.reshape({mat.n, 1}) : x2).broadcast_to(with_tail(mat.batch_shape, {mat.n, nrhs}));
  backend::SolveArrays r = backend::dispatch::solve_systems(x1.device(), batch_desc(mat), a, b, stream);
  Array result = vector ? r.x.reshape(with_tail(mat.batch_shape, {mat.n}), stream) : r.x;
  return {result, r.info};
}

Array solve(const Array& x1, const Array& x2, const OptionalStream& stream) {
  SolveExResult r = solve_ex(x1, x2, stream);
  check_info(r.info, "solve", singular, stream);
  return r.result;
}

// ---- det / slogdet ----
Array det(const Array& x, const OptionalStream& stream_arg) {
  TESSEL_RANGE("linalg.det");
  const char* op = "det";
  const Matrices mat = inspect(x, op, true);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  const LU lu = lu_factor(x, mat, stream);
  const LUParts parts = lu_parts(lu, mat, stream);
  if (is_complex(mat.dtype)) {  // tessel has no complex products: polar form
    const auto [phase, logabsdet] = complex_log_product(parts.diagonal, stream);
    const Array magnitude = astype(exp(logabsdet, std::nullopt, stream), mat.dtype, stream);
    return multiply(multiply(phase, magnitude, std::nullopt, stream), parts.permutation_sign, std::nullopt, stream);
  }
  const Array product_of_diagonal = prod(parts.diagonal, std::vector<std::int64_t>{-1}, false, stream);
  return multiply(product_of_diagonal, parts.permutation_sign, std::nullopt, stream);
}

SlogdetResult slogdet(const Array& x, const OptionalStream& stream_arg) {
  TESSEL_RANGE("linalg.slogdet");
  const char* op = "slogdet";
  const Matrices mat = inspect(x, op, true);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  const LU lu = lu_factor(x, mat, stream);
  const LUParts parts = lu_parts(lu, mat, stream);
  const std::vector<std::int64_t> last{-1};
  const Array magnitude = abs(parts.diagonal, std::nullopt, stream);
  const Array logabsdet = sum(log(magnitude, std::nullopt, stream), last, false, stream);
  const Array unit = is_complex(mat.dtype) ? complex_log_product(parts.diagonal, stream).first
                                           : prod(sign(parts.diagonal, std::nullopt, stream), last, false, stream);
  Array s = multiply(unit, parts.permutation_sign, std::nullopt, stream);
  // A zero pivot: sign 0 (the complex 0/0 above is NaN).
  const Array has_zero = any(equal(parts.diagonal, Scalar(0.0), std::nullopt, stream), last, false, stream);
  s = where(has_zero, zeros({}, mat.dtype, x.device(), stream), s, std::nullopt, stream);
  return {s, logabsdet};
}

// ---- eigh ----
namespace {
EighExResult eigh_impl(const Array& x, bool vectors, const OptionalStream& stream_arg, const char* op) {
  const Matrices mat = inspect(x, op, true);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  if (mat.batch == 0 || mat.n == 0) {
    return {empty(with_tail(mat.batch_shape, {mat.n}), to_real(mat.dtype), x.device(), stream),
            vectors ? empty(x.shape(), mat.dtype, x.device(), stream) : Array(),
            zeros(mat.batch_shape, DType::int32, x.device(), stream)};
  }
  // The backend chooses its route and lays the matrices out for it (backend/linalg.hpp).
  const Array in = x.dtype() == mat.dtype ? x : astype(x, mat.dtype, stream);
  backend::EighArrays r = backend::dispatch::eigh(x.device(), batch_desc(mat), in, vectors, stream);
  return {r.w, r.v, r.info};
}
}  // namespace

EighExResult eigh_ex(const Array& x, const OptionalStream& stream) {
  TESSEL_RANGE("linalg.eigh_ex");
  return eigh_impl(x, true, stream, "eigh");
}

EighResult eigh(const Array& x, const OptionalStream& stream) {
  TESSEL_RANGE("linalg.eigh");
  EighExResult r = eigh_impl(x, true, stream, "eigh");
  check_info(r.info, "eigh", no_convergence, stream);
  return {r.eigenvalues, r.eigenvectors};
}

Array eigvalsh(const Array& x, const OptionalStream& stream) {
  TESSEL_RANGE("linalg.eigvalsh");
  EighExResult r = eigh_impl(x, false, stream, "eigvalsh");
  check_info(r.info, "eigvalsh", no_convergence, stream);
  return r.eigenvalues;
}

// ---- eig ----
namespace {
EigResult eig_impl(const Array& x, bool vectors, const OptionalStream& stream_arg, const char* op) {
  Matrices mat = inspect(x, op, true);
  mat.dtype = to_complex(mat.dtype);  // real input runs as complex: the results are complex anyway
  const Stream stream = detail::op_stream(x, stream_arg, op);
  Array work = column_major_copy(x, mat.batch_shape, mat.dtype, stream);
  Array w = empty(with_tail(mat.batch_shape, {mat.n}), mat.dtype, x.device(), stream);
  Array v = vectors ? empty(with_tail(mat.batch_shape, {mat.n, mat.n}), mat.dtype, x.device(), stream) : Array();
  Array info = zeros(mat.batch_shape, DType::int32, x.device(), stream);
  if (mat.batch > 0 && mat.n > 0) {
    // NaN or inf: cuSOLVER's geev fails with an internal error, and NumPy rejects such input for
    // eig; tessel names the first matrix that has one, on both backends.
    const Array bad = astype(logical_not(all(isfinite(x, std::nullopt, stream), std::vector<std::int64_t>{-2, -1},
                                             false, stream),
                                         std::nullopt, stream),
                             DType::int32, stream);
    check_info(bad, op, [](std::int32_t) { return std::string("has non-finite entries (NaN or inf)"); }, stream);
    before(stream, {&work, &w, &v, &info});
    backend::dispatch::eig(x.device(), batch_desc(mat), work.data(), w.data(), vectors ? v.data() : nullptr, vectors,
                          info_data(info), stream);
    after(stream, {&work, &w, &v, &info});
  }
  check_info(info, op, no_convergence, stream);
  return {w, vectors ? matrices_of(v) : Array()};
}
}  // namespace

EigResult eig(const Array& x, const OptionalStream& stream) {
  TESSEL_RANGE("linalg.eig");
  return eig_impl(x, true, stream, "eig");
}
Array eigvals(const Array& x, const OptionalStream& stream) {
  TESSEL_RANGE("linalg.eigvals");
  return eig_impl(x, false, stream, "eigvals").eigenvalues;
}

// ---- QR ----
QRResult qr(const Array& x, std::string_view mode_arg, const OptionalStream& stream_arg) {
  TESSEL_RANGE("linalg.qr");
  const char* op = "qr";
  const QRMode mode = parse_qr_mode(mode_arg, op);
  const Matrices mat = inspect(x, op, false);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  const std::int64_t k = std::min(mat.m, mat.n);
  const std::int64_t qcols = mode == QRMode::complete ? mat.m : k;
  const std::int64_t rrows = qcols;
  Array work = column_major_copy(x, mat.batch_shape, mat.dtype, stream);
  Array q = empty(with_tail(mat.batch_shape, {qcols, mat.m}), mat.dtype, x.device(), stream);
  if (mat.batch > 0 && k > 0) {
    before(stream, {&work, &q});
    backend::dispatch::qr(x.device(), batch_desc(mat), work.data(), q.data(), qcols, stream);
    after(stream, {&work, &q});
  } else if (q.size() > 0) {
    copyto(q, eye(qcols, mat.m, 0, mat.dtype, x.device(), stream), stream);  // k == 0: Q = I
  }
  const Array r = matrices_of(work).slice(-2, Slice(0, rrows));
  return {matrices_of(q), keep_triangle(r, false, stream)};
}

// ---- SVD ----
namespace {
struct SvdOut {
  Array U, S, Vh, info;
};
SvdOut svd_impl(const Array& x, bool vectors, bool full, const OptionalStream& stream_arg, const char* op) {
  const Matrices mat = inspect(x, op, false);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  const std::int64_t k = std::min(mat.m, mat.n);
  if (x.device().is_cuda() && mat.m < mat.n) {
    // cuSOLVER's gesvd takes m >= n: x^H = U' S V'^H gives x = V' S U'^H.
    const Array xh = is_complex(x.dtype()) ? conj(x.swapaxes(-1, -2), std::nullopt, stream) : x.swapaxes(-1, -2);
    SvdOut t = svd_impl(xh, vectors, full, stream, op);
    if (!vectors) return t;
    const auto herm = [&](const Array& a) {
      return is_complex(a.dtype()) ? conj(a.swapaxes(-1, -2), std::nullopt, stream) : a.swapaxes(-1, -2);
    };
    return {herm(t.Vh), t.S, herm(t.U), t.info};
  }
  const std::int64_t ucols = full ? mat.m : k, vrows = full ? mat.n : k;
  Array work = column_major_copy(x, mat.batch_shape, mat.dtype, stream);
  SvdOut out;
  out.S = empty(with_tail(mat.batch_shape, {k}), to_real(mat.dtype), x.device(), stream);
  if (vectors) {
    out.U = empty(with_tail(mat.batch_shape, {ucols, mat.m}), mat.dtype, x.device(), stream);
    out.Vh = empty(with_tail(mat.batch_shape, {mat.n, vrows}), mat.dtype, x.device(), stream);
  }
  out.info = zeros(mat.batch_shape, DType::int32, x.device(), stream);
  if (mat.batch > 0 && k > 0) {
    before(stream, {&work, &out.S, &out.U, &out.Vh, &out.info});
    backend::dispatch::svd(x.device(), batch_desc(mat), work.data(), out.S.data(),
                          vectors ? out.U.data() : nullptr, vectors ? out.Vh.data() : nullptr, vectors, full,
                          info_data(out.info), stream);
    after(stream, {&work, &out.S, &out.U, &out.Vh, &out.info});
  } else if (vectors) {  // k == 0: the full factors are identities
    if (out.U.size() > 0) copyto(out.U, eye(ucols, mat.m, 0, mat.dtype, x.device(), stream), stream);
    if (out.Vh.size() > 0) copyto(out.Vh, eye(mat.n, vrows, 0, mat.dtype, x.device(), stream), stream);
  }
  if (vectors) {
    out.U = matrices_of(out.U);
    out.Vh = matrices_of(out.Vh);
  }
  return out;
}
}  // namespace

SVDResult svd(const Array& x, bool full_matrices, const OptionalStream& stream) {
  TESSEL_RANGE("linalg.svd");
  SvdOut r = svd_impl(x, true, full_matrices, stream, "svd");
  check_info(r.info, "svd", no_convergence, stream);
  return {r.U, r.S, r.Vh};
}

Array svdvals(const Array& x, const OptionalStream& stream) {
  TESSEL_RANGE("linalg.svdvals");
  SvdOut r = svd_impl(x, false, false, stream, "svdvals");
  check_info(r.info, "svdvals", no_convergence, stream);
  return r.S;
}

}  // namespace tessel::linalg
