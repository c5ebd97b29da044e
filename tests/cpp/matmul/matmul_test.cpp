// matmul, vecdot and MatmulPlan against a float64 host reference (a naive triple loop), over
// backend x dtype. Inputs are fresh random values rounded to the dtype; the reference uses the
// rounded values, so the error measured is the product's own.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <filesystem>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "array/array_testing.hpp"
#include "tessel/core/config.hpp"
#include "tessel/ops/matmul.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

const std::vector<DType> kMatmulDTypes = {DType::float16, DType::bfloat16, DType::float32, DType::float64,
                                          DType::complex64, DType::complex128, DType::int8};
const std::vector<DType> kRealFloat = {DType::float16, DType::bfloat16, DType::float32, DType::float64};

Array random_array(std::mt19937_64& rng, const Shape& shape, DType dtype, Device device) {
  std::vector<Value> values(static_cast<std::size_t>(numel(shape)));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::uniform_int_distribution<int> small(-8, 8);
  for (Value& v : values) {
    if (dtype == DType::int8) v = small(rng);
    else if (is_complex(dtype)) v = Value(uniform(rng), uniform(rng));
    else v = uniform(rng);
  }
  return make_array(values, shape, dtype, device);
}

double activation(double x, MatmulEpilogue e) {
  switch (e) {
    case MatmulEpilogue::none: return x;
    case MatmulEpilogue::relu: return std::isnan(x) ? x : std::max(x, 0.0);
    case MatmulEpilogue::gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case MatmulEpilogue::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return x;  // the *_grad epilogues: activation_grad
  }
  return x;
}

// g * act'(z) of the *_grad epilogues (the ReLU's: where(z > 0, g, 0)).
double activation_grad(double g, double z, MatmulEpilogue e) {
  const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
  switch (e) {
    case MatmulEpilogue::relu_grad: return z > 0 ? g : 0.0;
    case MatmulEpilogue::gelu_grad:
      return g * (0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI));
    case MatmulEpilogue::gelu_tanh_grad: {
      const double t = std::tanh(c * (z + k * z * z * z));
      return g * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * c * (1.0 + 3.0 * k * z * z));
    }
    default: return g;
  }
}

struct Reference {
  std::vector<Value> d, aux, bias_grad;
};

// The float64 reference of matmul(a, b, options), in the result's C order.
Reference reference(const Array& a_in, const Array& b_in, const MatmulOptions& o) {
  Array a = a_in.to(Device::cpu()), b = b_in.to(Device::cpu());
  const bool a1 = a.ndim() == 1, b1 = b.ndim() == 1;
  if (a1) a = a.expand_dims(0);
  if (b1) b = b.expand_dims(1);
  const std::int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2));
  Shape af = batch, bf = batch, full = batch;
  af.insert(af.end(), {m, k});
  bf.insert(bf.end(), {k, n});
  full.insert(full.end(), {m, n});
  Shape result = batch;
  if (!a1) result.push_back(m);
  if (!b1) result.push_back(n);
  const std::vector<Value> av = read_values(a.broadcast_to(af)), bv = read_values(b.broadcast_to(bf));
  std::vector<Value> cv, biasv;
  if (o.beta != 0.0) cv = read_values(o.c.to(Device::cpu()).broadcast_to(result).reshape(full));
  if (o.bias.defined()) biasv = read_values(o.bias.to(Device::cpu()));
  const bool grad = is_matmul_grad_epilogue(o.epilogue);
  std::vector<Value> zv;
  if (grad) zv = read_values(o.aux.to(Device::cpu()).reshape(full));
  const std::int64_t nb = numel(batch);
  Reference r;
  r.d.resize(static_cast<std::size_t>(nb * m * n));
  r.aux.resize(r.d.size());
  for (std::int64_t bi = 0; bi < nb; ++bi) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        Value sum = 0;
        for (std::int64_t kk = 0; kk < k; ++kk) {
          sum += av[static_cast<std::size_t>((bi * m + i) * k + kk)] * bv[static_cast<std::size_t>((bi * k + kk) * n + j)];
        }
        const auto idx = static_cast<std::size_t>((bi * m + i) * n + j);
        Value v = o.alpha * sum;
        if (o.beta != 0.0) v += o.beta * cv[idx];
        if (!biasv.empty()) v += biasv[static_cast<std::size_t>(j)];
        r.aux[idx] = grad ? zv[idx] : v;
        if (grad) {
          r.d[idx] = activation_grad(v.real(), zv[idx].real(), o.epilogue);
        } else {
          r.d[idx] = is_complex(a.dtype()) ? v : Value(activation(v.real(), o.epilogue));
        }
      }
    }
  }
  r.bias_grad.assign(static_cast<std::size_t>(n), Value(0));
  for (std::size_t idx = 0; idx < r.d.size(); ++idx) r.bias_grad[idx % static_cast<std::size_t>(n)] += r.d[idx];
  return r;
}

double tolerance(DType dtype, MatmulCompute compute) {
  switch (dtype) {
    case DType::float16: return 5e-3;
    case DType::bfloat16: return 1.5e-2;
    case DType::float32: case DType::complex64: return compute == MatmulCompute::tf32 ? 2e-3 : 1e-5;
    case DType::float64: case DType::complex128: return 1e-12;
    default: return 0.0;  // int8: exact
  }
}

// Norm-wise relative error ||got - want|| / ||want||.
void expect_close(const std::vector<Value>& got, const std::vector<Value>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i].real()) || std::isnan(got[i].imag())) << what << ": NaN at " << i;
    diff += std::norm(got[i] - want[i]);
    norm += std::norm(want[i]);
  }
  const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  EXPECT_LE(rel, tol) << what << ": norm-wise relative error " << rel;
}

// int8 products accumulate in int32: every element must equal the exact sum (the reference's
// doubles hold these sums exactly; a float32 accumulation would be off beyond 2^24).
void expect_exact(const std::vector<Value>& got, const std::vector<Value>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && wrong++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i].real() << ", exact " << want[i].real();
    }
  }
  EXPECT_EQ(wrong, 0u) << what << ": elements differing from the exact int32 sum";
}

// The int8 layout cuBLASLt must run ("TN": a row-major, b k-contiguous, sizes multiples of 4).
bool int8_layout_cublaslt_runs(const Array& a, const Array& b) {
  if (a.ndim() < 2 || b.ndim() < 2) return false;
  const std::int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  const Strides& as = a.strides();
  const Strides& bs = b.strides();
  const std::size_t na = as.size(), nb = bs.size();
  return as[na - 1] == 1 && bs[nb - 2] == 1 && m % 4 == 0 && n % 4 == 0 && k % 4 == 0 && as[na - 2] % 4 == 0 &&
         bs[nb - 1] % 4 == 0;
}

void check(const Array& a, const Array& b, const MatmulOptions& o = {}, const std::string& what = "") {
  Array got;
  if (a.dtype() == DType::int8 && a.device().is_cuda()) {
    // cuBLASLt offers int8 for some layouts only; the others must say so clearly, and the one
    // it documents must run.
    try {
      got = matmul(a, b, o);
    } catch (const DTypeError& error) {
      EXPECT_NE(std::string(error.what()).find("int8"), std::string::npos) << error.what();
      EXPECT_FALSE(int8_layout_cublaslt_runs(a, b)) << what << ": the TN int8 layout must run: " << error.what();
      return;
    }
  } else {
    got = matmul(a, b, o);
  }
  const Reference r = reference(a, b, o);
  const std::string label = what + " a" + shape_str(a.shape()) + " b" + shape_str(b.shape());
  if (a.dtype() == DType::int8) {
    EXPECT_EQ(got.dtype(), DType::int32) << label;
    expect_exact(read_values(got), r.d, label);
    return;
  }
  expect_close(read_values(got), r.d, tolerance(a.dtype(), o.compute), label);
  if (o.aux.defined()) expect_close(read_values(o.aux), r.aux, tolerance(a.dtype(), o.compute), what + " aux");
  if (o.bias_grad.defined()) {
    expect_close(read_values(o.bias_grad), r.bias_grad, tolerance(a.dtype(), o.compute), what + " bias_grad");
  }
}

class MatmulTest : public BackendDTypeTest {};

TEST_P(MatmulTest, ShapesIncludingOddAndUnitAndLongK) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::vector<std::array<std::int64_t, 3>> shapes = {{1, 1, 1},  {7, 5, 3},   {33, 17, 65}, {1, 19, 23},
                                                           {13, 1, 9}, {5, 6, 700}, {2, 3, 1},    {130, 129, 31}};
  for (const auto& [m, n, k] : shapes) {
    const Array a = random_array(rng, {m, k}, dtype(), device());
    const Array b = random_array(rng, {k, n}, dtype(), device());
    check(a, b);
  }
}

TEST_P(MatmulTest, TransposedAndSlicedInputs) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t m = 11, n = 9, k = 21;
  const Array at = random_array(rng, {k, m}, dtype(), device()).T();  // column-major a
  const Array bt = random_array(rng, {n, k}, dtype(), device()).T();  // column-major b
  const Array a = random_array(rng, {m, k}, dtype(), device());
  const Array b = random_array(rng, {k, n}, dtype(), device());
  check(at, b, {}, "a^T");
  check(a, bt, {}, "b^T");
  check(at, bt, {}, "a^T b^T");
  const Array a_rows = random_array(rng, {2 * m, k + 5}, dtype(), device()).index({Slice(1, none, 2), Slice(2, k + 2)});
  const Array b_cols = random_array(rng, {k, 2 * n}, dtype(), device()).slice(1, Slice(none, none, 2));  // copied
  const Array b_rev = random_array(rng, {k, n}, dtype(), device()).slice(0, Slice(none, none, -1));    // copied
  check(a_rows, b, {}, "row slice");
  check(a, b_cols, {}, "strided columns");
  check(a, b_rev, {}, "reversed rows");
}

TEST_P(MatmulTest, BatchedAndBroadcastBatches) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType t = dtype();
  const Device dev = device();
  check(random_array(rng, {2, 3, 5, 7}, t, dev), random_array(rng, {7, 4}, t, dev), {}, "batched @ matrix");
  check(random_array(rng, {5, 7}, t, dev), random_array(rng, {3, 7, 4}, t, dev), {}, "matrix @ batched");
  check(random_array(rng, {3, 1, 5, 7}, t, dev), random_array(rng, {1, 4, 7, 6}, t, dev), {}, "broadcast both");
  check(random_array(rng, {4, 6, 3}, t, dev).permute({1, 0, 2}), random_array(rng, {6, 3, 2}, t, dev), {},
        "non-collapsing batch strides");
}

TEST_P(MatmulTest, OneDimensionalOperands) {
  TESSEL_SKIP_UNAVAILABLE(device());
  if (dtype() == DType::int8 && device().is_cuda()) {
    GTEST_SKIP() << "int8 on CUDA needs a k-contiguous b (see MatmulInt8.TransposedBOnCuda)";
  }
  TESSEL_SEEDED_RNG(rng);
  const DType t = dtype();
  const Device dev = device();
  const Array v = random_array(rng, {7}, t, dev), w = random_array(rng, {7}, t, dev);
  const Array mat = random_array(rng, {7, 4}, t, dev), mat2 = random_array(rng, {3, 7}, t, dev);
  EXPECT_EQ(matmul(v, mat).shape(), Shape({4}));
  EXPECT_EQ(matmul(mat2, v).shape(), Shape({3}));
  EXPECT_EQ(matmul(v, w).shape(), Shape({}));
  check(v, mat, {}, "vec @ mat");
  check(mat2, v, {}, "mat @ vec");
  check(v, w, {}, "vec @ vec");
  check(random_array(rng, {2, 3, 7}, t, dev), v, {}, "batched @ vec");
}

TEST_P(MatmulTest, AlphaBetaC) {
  TESSEL_SKIP_UNAVAILABLE(device());
  if (dtype() == DType::int8) GTEST_SKIP() << "int8 takes alpha=1, beta=0 only (tested in Errors)";
  TESSEL_SEEDED_RNG(rng);
  const Array a = random_array(rng, {2, 9, 13}, dtype(), device()), b = random_array(rng, {13, 6}, dtype(), device());
  MatmulOptions o;
  o.alpha = 0.5;
  o.beta = -1.5;
  o.c = random_array(rng, {2, 9, 6}, dtype(), device());
  check(a, b, o, "full c");
  o.c = random_array(rng, {6}, dtype(), device());
  check(a, b, o, "broadcast c");
}

TEST_P(MatmulTest, OutArgument) {
  TESSEL_SKIP_UNAVAILABLE(device());
  if (dtype() == DType::int8 && device().is_cuda()) {
    GTEST_SKIP() << "int8 on CUDA needs a k-contiguous b (see MatmulInt8.TransposedBOnCuda)";
  }
  TESSEL_SEEDED_RNG(rng);
  const DType od = dtype() == DType::int8 ? DType::int32 : dtype();
  const Array a = random_array(rng, {5, 8}, dtype(), device()), b = random_array(rng, {8, 7}, dtype(), device());
  const Reference r = reference(a, b, {});
  Array out = empty({5, 7}, od, device());
  poison(out);
  Array got = matmul(a, b, {}, out);
  EXPECT_EQ(got.data(), out.data());
  expect_close(read_values(out), r.d, tolerance(dtype(), MatmulCompute::default_), "out");
  Array out_t = empty({7, 5}, od, device()).T();  // a transposed view: written through a copy
  poison(out_t);
  matmul(a, b, {}, out_t);
  expect_close(read_values(out_t), r.d, tolerance(dtype(), MatmulCompute::default_), "transposed out");
  if (od == dtype()) {
    // out= is an input: the result must be the product of the values before the call.
    Array sq = random_array(rng, {6, 6}, dtype(), device());
    const Array sq_before = sq.copy();
    const Reference rs = reference(sq_before, sq_before, {});
    matmul(sq, sq, {}, sq);
    expect_close(read_values(sq), rs.d, tolerance(dtype(), MatmulCompute::default_), "out aliasing both inputs");
  }
}

TEST_P(MatmulTest, ZeroLengthDimensions) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Array empty_m = matmul(random_array(rng, {0, 4}, dtype(), device()), random_array(rng, {4, 3}, dtype(), device()));
  EXPECT_EQ(empty_m.shape(), Shape({0, 3}));
  const Array empty_batch = matmul(random_array(rng, {0, 2, 4}, dtype(), device()), random_array(rng, {4, 3}, dtype(), device()));
  EXPECT_EQ(empty_batch.shape(), Shape({0, 2, 3}));
  // K = 0: zeros (plus the bias and epilogue)
  const Array a = random_array(rng, {3, 0}, dtype(), device()), b = random_array(rng, {0, 5}, dtype(), device());
  check(a, b, {}, "k=0");
  if (std::find(kRealFloat.begin(), kRealFloat.end(), dtype()) != kRealFloat.end()) {
    MatmulOptions o;
    o.bias = random_array(rng, {5}, dtype(), device());
    o.epilogue = MatmulEpilogue::relu;
    check(a, b, o, "k=0 relu(bias)");
  }
}

INSTANTIATE_TEST_SUITE_P(All, MatmulTest, ::testing::ValuesIn(backend_dtype_cases(kMatmulDTypes)), case_name);

class MatmulEpilogueTest : public BackendDTypeTest {};

TEST_P(MatmulEpilogueTest, EveryEpilogueWithAndWithoutBiasAndAux) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (MatmulEpilogue e : {MatmulEpilogue::none, MatmulEpilogue::relu, MatmulEpilogue::gelu, MatmulEpilogue::gelu_tanh}) {
    for (bool bias : {false, true}) {
      for (bool aux : {false, true}) {
        if (aux && e == MatmulEpilogue::none) continue;
        const Array a = random_array(rng, {2, 19, 24}, dtype(), device());
        const Array b = random_array(rng, {24, 16}, dtype(), device());
        MatmulOptions o;
        o.epilogue = e;
        if (bias) o.bias = random_array(rng, {16}, dtype(), device());
        if (aux) {
          o.aux = empty({2, 19, 16}, dtype(), device());
          poison(o.aux);
        }
        check(a, b, o, std::string(matmul_epilogue_name(e)) + (bias ? "+bias" : "") + (aux ? "+aux" : ""));
      }
    }
  }
}

// The derivative epilogues read the forward's aux, fused (cuBLASLt's DGELU: gelu_tanh_grad with
// 16-byte rows) or not (the others, odd rows); bias_grad sums the result over its rows, batches too.
TEST_P(MatmulEpilogueTest, DerivativeEpiloguesAndBiasGrad) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (MatmulEpilogue e : {MatmulEpilogue::relu_grad, MatmulEpilogue::gelu_grad, MatmulEpilogue::gelu_tanh_grad,
                           MatmulEpilogue::none}) {
    for (const Shape& a_shape : {Shape{37, 24}, Shape{2, 19, 24}}) {
      for (std::int64_t n : {16, 9}) {
        Shape d_shape(a_shape.begin(), a_shape.end() - 1);
        d_shape.push_back(n);
        const Array a = random_array(rng, a_shape, dtype(), device());
        const Array b = random_array(rng, {24, n}, dtype(), device());
        MatmulOptions o;
        o.epilogue = e;
        if (e != MatmulEpilogue::none) o.aux = random_array(rng, d_shape, dtype(), device());
        o.bias_grad = empty({n}, dtype(), device());
        poison(o.bias_grad);
        const std::string what = std::string(matmul_epilogue_name(e)) + " n=" + std::to_string(n);
        check(a, b, o, what);
        if (a_shape.size() == 2) {
          o.alpha = 0.5;
          o.beta = 0.25;
          o.c = random_array(rng, d_shape, dtype(), device());
          check(a.T().contiguous().T(), b, o, what + " transposed a, alpha, beta");
        }
      }
    }
  }
  // Over no rows the sums are zeros.
  MatmulOptions o;
  o.epilogue = MatmulEpilogue::gelu_tanh_grad;
  o.aux = random_array(rng, {0, 16}, dtype(), device());
  o.bias_grad = empty({16}, dtype(), device());
  poison(o.bias_grad);
  check(random_array(rng, {0, 8}, dtype(), device()), random_array(rng, {8, 16}, dtype(), device()), o, "no rows");
  // Errors name the epilogue and what is wrong.
  const Array a = random_array(rng, {4, 5}, dtype(), device()), b = random_array(rng, {5, 6}, dtype(), device());
  MatmulOptions no_aux;
  no_aux.epilogue = MatmulEpilogue::gelu_grad;
  expect_error<ValueError>([&] { matmul(a, b, no_aux); }, {"gelu_grad", "needs aux"});
  MatmulOptions with_bias = no_aux;
  with_bias.aux = random_array(rng, {4, 6}, dtype(), device());
  with_bias.bias = random_array(rng, {6}, dtype(), device());
  expect_error<ValueError>([&] { matmul(a, b, with_bias); }, {"takes no bias"});
  MatmulOptions wrong_sums;
  wrong_sums.bias_grad = empty({5}, dtype(), device());
  expect_error<ShapeError>([&] { matmul(a, b, wrong_sums); }, {"bias_grad", "(5,)", "(6,)"});
}

TEST_P(MatmulEpilogueTest, NonFiniteValuesPropagate) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t m = 6, n = 5, k = 7;
  std::vector<Value> av(static_cast<std::size_t>(m * k), 0.5), bv(static_cast<std::size_t>(k * n), 0.25);
  av[0] = std::numeric_limits<double>::quiet_NaN();                // row 0 -> NaN
  av[static_cast<std::size_t>(2 * k)] = std::numeric_limits<double>::infinity();  // row 2 -> +Inf
  const Array a = make_array(av, {m, k}, dtype(), device()), b = make_array(bv, {k, n}, dtype(), device());
  for (MatmulEpilogue e : {MatmulEpilogue::gelu, MatmulEpilogue::gelu_tanh}) {
    // GELU of NaN is NaN and of +Inf is +Inf (or NaN where a library forms inf - inf): never
    // finite, never a crash; the finite row stays exact. With a bias, fused where offered.
    MatmulOptions o;
    o.epilogue = e;
    o.bias = make_array(std::vector<Value>(static_cast<std::size_t>(n), 0.125), {n}, dtype(), device());
    const std::vector<Value> d = read_values(matmul(a, b, o));
    for (std::int64_t j = 0; j < n; ++j) {
      EXPECT_TRUE(std::isnan(d[static_cast<std::size_t>(j)].real())) << matmul_epilogue_name(e) << " column " << j;
      EXPECT_FALSE(std::isfinite(d[static_cast<std::size_t>(2 * n + j)].real())) << matmul_epilogue_name(e) << " column " << j;
      EXPECT_NEAR(d[static_cast<std::size_t>(n + j)].real(), activation(0.5 * 0.25 * k + 0.125, e), 2e-2);
    }
  }
  for (MatmulEpilogue e : {MatmulEpilogue::none, MatmulEpilogue::relu}) {
    MatmulOptions o;
    o.epilogue = e;
    const std::vector<Value> d = read_values(matmul(a, b, o));
    for (std::int64_t j = 0; j < n; ++j) {
      const double nan_row = d[static_cast<std::size_t>(j)].real();
      if (e == MatmulEpilogue::relu && device().is_cuda()) {
        // cuBLASLt's fused RELU may clamp NaN to 0 (max(x, 0)); either is a propagation, not a crash.
        EXPECT_TRUE(std::isnan(nan_row) || nan_row == 0.0) << "relu column " << j << ": " << nan_row;
      } else {
        EXPECT_TRUE(std::isnan(nan_row)) << matmul_epilogue_name(e) << " column " << j;
      }
      EXPECT_EQ(d[static_cast<std::size_t>(2 * n + j)].real(), std::numeric_limits<double>::infinity());
      EXPECT_NEAR(d[static_cast<std::size_t>(n + j)].real(), 0.5 * 0.25 * k, 1e-2);
    }
  }
}

TEST_P(MatmulEpilogueTest, Tf32AndFp32Compute) {
  TESSEL_SKIP_UNAVAILABLE(device());
  if (dtype() != DType::float32) GTEST_SKIP() << "compute modes apply to float32";
  TESSEL_SEEDED_RNG(rng);
  const Array a = random_array(rng, {37, 45}, dtype(), device()), b = random_array(rng, {45, 29}, dtype(), device());
  for (MatmulCompute c : {MatmulCompute::fp32, MatmulCompute::tf32}) {
    MatmulOptions o;
    o.compute = c;
    check(a, b, o, matmul_compute_name(c));
  }
}

// Every candidate the autotuner may pick (cuBLASLt algorithms, SIMT and sm90 configurations),
// pinned and run on its own, on odd and aligned shapes (sm90 needs 16-byte aligned rows), with
// and without bias, with the aux output (fused in the sm90 kernel and cuBLASLt's GELU_AUX).
TEST_P(MatmulEpilogueTest, EveryCandidateOnItsOwn) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  struct Variant {
    MatmulEpilogue epilogue;
    bool bias, aux;
  };
  const std::vector<Variant> variants = {{MatmulEpilogue::relu, true, false},
                                         {MatmulEpilogue::gelu, true, true},
                                         {MatmulEpilogue::relu, false, true},
                                         {MatmulEpilogue::gelu_tanh, true, true}};
  // The last two: b k-contiguous (x @ W.T, W n x k) with an odd n, which the sm90 kernel writes
  // with element stores.
  for (const auto& [m, n, k, b_t] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>>{
           {37, 29, 45, false}, {128, 64, 96, false}, {200, 72, 136, false}, {200, 77, 136, true}, {130, 1, 64, true}}) {
    const Array a = random_array(rng, {m, k}, dtype(), device());
    const Array b = b_t ? random_array(rng, {n, k}, dtype(), device()).T() : random_array(rng, {k, n}, dtype(), device());
    for (const Variant& v : variants) {
      MatmulOptions o;
      if (v.bias) o.bias = random_array(rng, {n}, dtype(), device());
      o.epilogue = v.epilogue;
      if (v.aux) o.aux = empty({m, n}, dtype(), device());
      const Reference r = reference(a, b, o);
      MatmulPlan plan(a, b, o);
      for (std::size_t i = 0; i < plan.candidates().size(); ++i) {
        const std::string what = fmt::format("{} {}x{}x{}{} {}{}{}", plan.candidates()[i].name, m, n, k, b_t ? " b^T" : "",
                                             matmul_epilogue_name(v.epilogue), v.bias ? "+bias" : "", v.aux ? "+aux" : "");
        plan.pin(static_cast<int>(i));
        Array out = empty({m, n}, dtype(), device());
        poison(out);
        MatmulExecuteOptions run;
        if (v.aux) {
          run.aux = empty({m, n}, dtype(), device());
          poison(run.aux);
        }
        plan.execute(a, b, run, out);
        expect_close(read_values(out), r.d, tolerance(dtype(), MatmulCompute::default_), what);
        if (v.aux) expect_close(read_values(run.aux), r.aux, tolerance(dtype(), MatmulCompute::default_), what + " aux");
      }
    }
  }
}

// int8 x int8 -> int32 with values in [-127, 127] and a long K: the sums reach ~6.6e7, beyond
// float32's exact integers, so only a true int32 accumulation matches element for element. On
// CUDA in the layout cuBLASLt documents for int8 (b k-contiguous); on the CPU in every layout.
TEST(MatmulInt8, ExactInt32AccumulationEveryBackend) {
  for (const Device dev : {Device::cpu(), testing::test_gpu()}) {
    if (dev.is_cuda() && !cuda_available()) continue;
    TESSEL_SEEDED_RNG(rng);
    auto full_range = [&](const Shape& shape) {
      std::vector<Value> values(static_cast<std::size_t>(numel(shape)));
      std::uniform_int_distribution<int> dist(-127, 127);
      for (Value& v : values) v = dist(rng);
      return make_array(values, shape, DType::int8, dev);
    };
    for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{32, 16, 64}, {64, 32, 4096}, {8, 12, 4}}) {
      const Array a = full_range({m, k});
      const Array bt = full_range({n, k}).T();  // k-contiguous b
      const Array got = matmul(a, bt);
      ASSERT_EQ(got.dtype(), DType::int32);
      expect_exact(read_values(got), reference(a, bt, {}).d, fmt::format("int8 TN {}x{}x{} on {}", m, n, k, dev.str()));
    }
    // batched (3 batches of the TN layout)
    const Array a3 = full_range({3, 16, 256});
    const Array bt3 = full_range({3, 8, 256}).permute({0, 2, 1});
    expect_exact(read_values(matmul(a3, bt3)), reference(a3, bt3, {}).d, "int8 TN batched on " + dev.str());
    if (dev.is_cpu()) {
      const Array a = full_range({7, 1000}), b = full_range({1000, 5});  // row-major b, odd sizes
      expect_exact(read_values(matmul(a, b)), reference(a, b, {}).d, "int8 NN odd sizes on cpu");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, MatmulEpilogueTest, ::testing::ValuesIn(backend_dtype_cases(kRealFloat)), case_name);

class MatmulBackendTest : public BackendTest {};

TEST_P(MatmulBackendTest, VecdotRealAndComplex) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (DType t : {DType::float64, DType::complex128}) {
    const Array x = random_array(rng, {3, 1, 6}, t, device()), y = random_array(rng, {4, 6}, t, device());
    const Array got = vecdot(x, y);
    ASSERT_EQ(got.shape(), Shape({3, 4}));
    const std::vector<Value> xv = read_values(x.to(Device::cpu())), yv = read_values(y.to(Device::cpu()));
    std::vector<Value> want;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        Value s = 0;
        for (int kk = 0; kk < 6; ++kk) s += std::conj(xv[static_cast<std::size_t>(i * 6 + kk)]) * yv[static_cast<std::size_t>(j * 6 + kk)];
        want.push_back(s);
      }
    expect_close(read_values(got), want, 1e-12, std::string("vecdot ") + dtype_name(t));
  }
  // a non-last axis
  const Array x = random_array(rng, {5, 3}, DType::float64, device()), y = random_array(rng, {5, 3}, DType::float64, device());
  const std::vector<Value> xv = read_values(x.to(Device::cpu())), yv = read_values(y.to(Device::cpu()));
  std::vector<Value> want(3, 0.0);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) want[static_cast<std::size_t>(j)] += xv[static_cast<std::size_t>(i * 3 + j)] * yv[static_cast<std::size_t>(i * 3 + j)];
  expect_close(read_values(vecdot(x, y, -2)), want, 1e-12, "vecdot axis=-2");
}

TEST_P(MatmulBackendTest, WideIntegerProductsAreExactAndWrap) {
  // Full-range int64 operands: every product overflows; the result is the exact sum modulo 2^64.
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t m = 3, k = 40, n = 2;
  std::vector<std::int64_t> av(m * k), bv(k * n);
  for (auto& v : av) v = static_cast<std::int64_t>(rng());
  for (auto& v : bv) v = static_cast<std::int64_t>(rng());
  const Array got = matmul(from_vector(av, {m, k}, device()), from_vector(bv, {k, n}, device()));
  ASSERT_EQ(got.dtype(), DType::int64);
  const std::vector<std::int64_t> values = got.to(Device::cpu()).to_vector<std::int64_t>();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      std::uint64_t want = 0;
      for (std::int64_t p = 0; p < k; ++p) want += static_cast<std::uint64_t>(av[i * k + p]) * static_cast<std::uint64_t>(bv[p * n + j]);
      EXPECT_EQ(static_cast<std::uint64_t>(values[i * n + j]), want) << i << "," << j;
    }
  }
}

TEST_P(MatmulBackendTest, BadInputsHaveClearErrors) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  const Array a = random_array(rng, {3, 4}, DType::float32, dev), b = random_array(rng, {5, 6}, DType::float32, dev);
  expect_error<ShapeError>([&] { matmul(a, b); }, {"matmul", "(3, 4)", "(5, 6)"});
  const Array b46 = random_array(rng, {4, 6}, DType::float32, dev);
  MatmulOptions bad_bias;
  bad_bias.bias = random_array(rng, {5}, DType::float32, dev);
  expect_error<ShapeError>([&] { matmul(a, b46, bad_bias); }, {"matmul", "bias", "(5,)", "6"});
  expect_error<DTypeError>([&] { matmul(a, random_array(rng, {4, 6}, DType::float64, dev)); },
                           {"matmul", "float32", "float64"});
  expect_error<DTypeError>([&] { matmul(random_array(rng, {3, 4}, DType::bool_, dev), random_array(rng, {4, 2}, DType::bool_, dev)); },
                           {"matmul", "bool"});
  MatmulOptions int_relu;
  int_relu.epilogue = MatmulEpilogue::relu;
  expect_error<DTypeError>([&] { matmul(random_array(rng, {3, 4}, DType::int32, dev), random_array(rng, {4, 2}, DType::int32, dev), int_relu); },
                           {"matmul", "int32", "epilogue"});
  expect_error<ShapeError>([&] { matmul(a, b46, {}, empty({3, 5}, DType::float32, dev)); }, {"matmul", "out", "(3, 5)", "(3, 6)"});
  expect_error<DTypeError>([&] { matmul(a, b46, {}, empty({3, 6}, DType::float64, dev)); }, {"matmul", "out", "float64", "float32"});
  expect_error<ValueError>([&] { parse_matmul_epilogue("swish"); }, {"epilogue", "swish"});
  MatmulOptions tf32;
  tf32.compute = MatmulCompute::tf32;
  expect_error<ValueError>([&] { matmul(random_array(rng, {2, 2}, DType::float64, dev), random_array(rng, {2, 2}, DType::float64, dev), tf32); },
                           {"tf32", "float64"});
  MatmulOptions complex_relu;
  complex_relu.epilogue = MatmulEpilogue::relu;
  expect_error<DTypeError>([&] { matmul(random_array(rng, {2, 2}, DType::complex64, dev), random_array(rng, {2, 2}, DType::complex64, dev), complex_relu); },
                           {"matmul", "complex64"});
  MatmulOptions beta_without_c;
  beta_without_c.beta = 1.0;
  expect_error<ValueError>([&] { matmul(a, b46, beta_without_c); }, {"beta", "c"});
  expect_error<ShapeError>([&] { matmul(random_array(rng, {2, 3, 4}, DType::float32, dev), random_array(rng, {3, 4, 5}, DType::float32, dev)); },
                           {"matmul", "(2, 3, 4)", "(3, 4, 5)"});
  // a plan run on a different layout
  MatmulPlan plan(a, b46);
  expect_error<ValueError>([&] { plan.execute(a.T().copy().T(), b46); }, {"MatmulPlan", "layout", "planned"});
  expect_error<ValueError>([&] { plan.execute(random_array(rng, {3, 5}, DType::float32, dev), random_array(rng, {5, 6}, DType::float32, dev)); },
                           {"MatmulPlan", "(3, 5)"});
  expect_error<IndexError>([&] { plan.pin(1000); }, {"MatmulPlan.pin", "1000"});
  expect_error<ValueError>([&] { plan.pin("no-such-algorithm"); }, {"no-such-algorithm"});
  // mixed devices: every array argument
  if (cuda_available()) {
    const Device other = dev.is_cpu() ? testing::test_gpu() : Device::cpu();
    const std::string gpu = (dev.is_cpu() ? other : dev).str();
    expect_error<DeviceError>([&] { matmul(a, b46.to(other)); }, {"matmul", "cpu", gpu});
    MatmulOptions other_bias;
    other_bias.bias = random_array(rng, {6}, DType::float32, other);
    expect_error<DeviceError>([&] { matmul(a, b46, other_bias); }, {"matmul", "bias", "cpu", gpu});
    MatmulOptions other_c;
    other_c.beta = 1.0;
    other_c.c = random_array(rng, {3, 6}, DType::float32, other);
    expect_error<DeviceError>([&] { matmul(a, b46, other_c); }, {"matmul", "c", "cpu", gpu});
    MatmulOptions other_aux;
    other_aux.epilogue = MatmulEpilogue::relu;
    other_aux.aux = empty({3, 6}, DType::float32, other);
    expect_error<DeviceError>([&] { matmul(a, b46, other_aux); }, {"matmul", "aux", "cpu", gpu});
    expect_error<DeviceError>([&] { matmul(a, b46, {}, empty({3, 6}, DType::float32, other)); },
                              {"matmul", "out", "cpu", gpu});
    MatmulPlan device_plan(a, b46);
    expect_error<DeviceError>([&] { device_plan.execute(a.to(other), b46.to(other)); },
                              {"MatmulPlan.execute", "cpu", gpu});
  }
}

// The rest of issue 5's "bad input" list, each with the op, shapes and dtypes in the message.
TEST_P(MatmulBackendTest, MoreBadInputsHaveClearErrors) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  const Array a = random_array(rng, {3, 4}, DType::float32, dev), b = random_array(rng, {4, 6}, DType::float32, dev);
  // mismatched inner dimensions, batched and 1-D
  expect_error<ShapeError>([&] { matmul(random_array(rng, {2, 3, 4}, DType::float32, dev), random_array(rng, {2, 5, 6}, DType::float32, dev)); },
                           {"matmul", "inner", "(2, 3, 4)", "(2, 5, 6)"});
  expect_error<ShapeError>([&] { matmul(random_array(rng, {5}, DType::float32, dev), b); }, {"matmul", "(5,)", "(4, 6)"});
  expect_error<ShapeError>([&] { matmul(random_array(rng, {}, DType::float32, dev), b); }, {"matmul", "1-D"});
  // bias: wrong length, 2-D, wrong dtype
  MatmulOptions bias_2d;
  bias_2d.bias = random_array(rng, {1, 6}, DType::float32, dev);
  expect_error<ShapeError>([&] { matmul(a, b, bias_2d); }, {"matmul", "bias", "(1, 6)", "(6,)"});
  MatmulOptions long_bias;
  long_bias.bias = random_array(rng, {7}, DType::float32, dev);
  expect_error<ShapeError>([&] { matmul(a, b, long_bias); }, {"matmul", "bias", "(7,)", "(6,)"});
  MatmulOptions bias_f64;
  bias_f64.bias = random_array(rng, {6}, DType::float64, dev);
  expect_error<DTypeError>([&] { matmul(a, b, bias_f64); }, {"matmul", "bias", "float64", "float32"});
  // unsupported dtype combinations
  expect_error<DTypeError>([&] { matmul(random_array(rng, {3, 4}, DType::float16, dev), random_array(rng, {4, 6}, DType::bfloat16, dev)); },
                           {"matmul", "float16", "bfloat16"});
  expect_error<DTypeError>([&] { matmul(random_array(rng, {3, 4}, DType::int8, dev), b); }, {"matmul", "int8", "float32"});
  expect_error<DTypeError>([&] { matmul(random_array(rng, {3, 4}, DType::bool_, dev), random_array(rng, {4, 6}, DType::bool_, dev)); },
                           {"matmul", "bool"});
  MatmulOptions int8_alpha;
  int8_alpha.alpha = 2.0;
  expect_error<DTypeError>([&] { matmul(random_array(rng, {4, 4}, DType::int8, dev), random_array(rng, {4, 4}, DType::int8, dev), int8_alpha); },
                           {"matmul", "int8", "alpha"});
  MatmulOptions int8_bias;
  int8_bias.bias = empty({4}, DType::int32, dev);
  expect_error<DTypeError>([&] { matmul(random_array(rng, {4, 4}, DType::int8, dev), random_array(rng, {4, 4}, DType::int8, dev), int8_bias); },
                           {"matmul", "int8"});
  // out= and aux: wrong shape or dtype
  expect_error<ShapeError>([&] { matmul(a, b, {}, empty({6, 3}, DType::float32, dev)); }, {"matmul", "out", "(6, 3)", "(3, 6)"});
  expect_error<ShapeError>([&] { matmul(a, b, {}, empty({1, 3, 6}, DType::float32, dev)); }, {"matmul", "out", "(1, 3, 6)", "(3, 6)"});
  expect_error<DTypeError>([&] { matmul(random_array(rng, {4, 4}, DType::int8, dev), random_array(rng, {4, 4}, DType::int8, dev), {}, empty({4, 4}, DType::int8, dev)); },
                           {"matmul", "out", "int8", "int32"});
  MatmulOptions bad_aux;
  bad_aux.epilogue = MatmulEpilogue::gelu;
  bad_aux.aux = empty({3, 5}, DType::float32, dev);
  expect_error<ShapeError>([&] { matmul(a, b, bad_aux); }, {"matmul", "aux", "(3, 5)", "(3, 6)"});
  bad_aux.aux = empty({3, 6}, DType::float16, dev);
  expect_error<DTypeError>([&] { matmul(a, b, bad_aux); }, {"matmul", "aux", "float16", "float32"});
  MatmulOptions aux_no_epilogue;
  aux_no_epilogue.aux = empty({3, 6}, DType::float32, dev);
  expect_error<ValueError>([&] { matmul(a, b, aux_no_epilogue); }, {"matmul", "aux", "epilogue"});
  // c that does not broadcast to the result
  MatmulOptions bad_c;
  bad_c.beta = 1.0;
  bad_c.c = random_array(rng, {4, 6}, DType::float32, dev);
  expect_error<ShapeError>([&] { matmul(a, b, bad_c); }, {"matmul", "c", "(4, 6)", "(3, 6)"});
  // undefined operands, parse errors
  expect_error<ValueError>([&] { matmul(Array(), b); }, {"matmul", "defined"});
  expect_error<ValueError>([&] { parse_matmul_compute("tf16"); }, {"compute", "tf16"});
  expect_error<ValueError>([&] { MatmulPlan(a, b).autotune(0); }, {"autotune", "iterations", "0"});
  // vecdot
  expect_error<ShapeError>([&] { vecdot(random_array(rng, {3, 4}, DType::float32, dev), random_array(rng, {3, 5}, DType::float32, dev)); },
                           {"vecdot", "(3, 4)", "(3, 5)"});
}

// Plan reuse with anything that selects other kernels (layout, dtype, epilogue, compute, bias or
// c presence) is a ValueError naming what differs, never a silent run of the planned kernels.
TEST_P(MatmulBackendTest, PlanReuseWithDifferentLayoutIsAnError) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  const Array a = random_array(rng, {8, 12}, DType::float32, dev), b = random_array(rng, {12, 16}, DType::float32, dev);
  MatmulOptions o;
  o.bias = random_array(rng, {16}, DType::float32, dev);
  o.epilogue = MatmulEpilogue::relu;
  MatmulPlan plan(a, b, o);
  MatmulExecuteOptions bias64;
  bias64.bias = random_array(rng, {16}, DType::float64, dev);
  expect_error<ValueError>([&] { plan.execute(random_array(rng, {8, 12}, DType::float64, dev), random_array(rng, {12, 16}, DType::float64, dev), bias64); },
                           {"MatmulPlan.execute", "layout", "float32", "float64"});
  expect_error<ValueError>([&] { plan.execute(random_array(rng, {2, 8, 12}, DType::float32, dev), b); },
                           {"MatmulPlan.execute", "layout", "(2, 8, 12)"});
  expect_error<ValueError>([&] { plan.execute(a, random_array(rng, {16, 12}, DType::float32, dev).T()); },
                           {"MatmulPlan.execute", "layout", "planned"});
  MatmulOptions gelu = o;
  gelu.epilogue = MatmulEpilogue::gelu;
  expect_error<ValueError>([&] { plan.execute(a, b, gelu); }, {"MatmulPlan.execute", "epilogue", "gelu", "relu"});
  MatmulOptions tf32 = o;
  tf32.compute = MatmulCompute::tf32;
  expect_error<ValueError>([&] { plan.execute(a, b, tf32); }, {"MatmulPlan.execute", "compute", "tf32", "default"});
  MatmulExecuteOptions with_beta;
  with_beta.beta = 0.5;
  with_beta.c = random_array(rng, {8, 16}, DType::float32, dev);
  expect_error<ValueError>([&] { plan.execute(a, b, with_beta); }, {"MatmulPlan.execute", "beta=0.5", "beta=0"});
  MatmulExecuteOptions bias_f64;
  bias_f64.bias = random_array(rng, {16}, DType::float64, dev);
  expect_error<DTypeError>([&] { plan.execute(a, b, bias_f64); }, {"matmul", "bias", "float64"});
  // The plan still runs correctly after the refused calls.
  expect_close(read_values(plan.execute(a, b)), reference(a, b, o).d, 1e-5, "after refused executes");
}

// execute's options: unset fields keep the planned values; a MatmulOptions sets alpha/beta as
// written (1 and 0 by default, as matmul()); arrays replace the planned ones when defined.
TEST_P(MatmulBackendTest, PlanExecuteOptionSemantics) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  const Array a = random_array(rng, {9, 14}, DType::float32, dev), b = random_array(rng, {14, 11}, DType::float32, dev);
  MatmulOptions planned;
  planned.bias = random_array(rng, {11}, DType::float32, dev);
  planned.epilogue = MatmulEpilogue::gelu;
  planned.alpha = 2.0;
  planned.beta = 0.5;
  planned.c = random_array(rng, {9, 11}, DType::float32, dev);
  MatmulPlan plan(a, b, planned);
  // nothing given: every planned option
  expect_close(read_values(plan.execute(a, b)), reference(a, b, planned).d, 1e-5, "planned options");
  expect_close(read_values(plan.execute()), reference(a, b, planned).d, 1e-5, "planned arrays");
  // alpha given as 1.0 (the default value) is used, not taken for "not given"
  MatmulExecuteOptions alpha_one;
  alpha_one.alpha = 1.0;
  MatmulOptions want = planned;
  want.alpha = 1.0;
  expect_close(read_values(plan.execute(a, b, alpha_one)), reference(a, b, want).d, 1e-5, "alpha=1 given");
  // new bias and c, planned alpha/beta
  MatmulExecuteOptions new_arrays;
  new_arrays.bias = random_array(rng, {11}, DType::float32, dev);
  new_arrays.c = random_array(rng, {9, 11}, DType::float32, dev);
  want = planned;
  want.bias = new_arrays.bias;
  want.c = new_arrays.c;
  expect_close(read_values(plan.execute(a, b, new_arrays)), reference(a, b, want).d, 1e-5, "new bias and c");
  // a full MatmulOptions: its alpha and beta as written
  MatmulOptions full = planned;
  full.alpha = 1.0;
  full.beta = 0.25;
  expect_close(read_values(plan.execute(a, b, full)), reference(a, b, full).d, 1e-5, "MatmulOptions as written");
  // a MatmulOptions without beta on a plan with beta: refused (the plan reads c)
  MatmulOptions no_beta;
  no_beta.bias = planned.bias;
  no_beta.epilogue = planned.epilogue;
  expect_error<ValueError>([&] { plan.execute(a, b, no_beta); }, {"MatmulPlan.execute", "beta=0", "beta=0.5"});
}

// Points the autotune disk cache at a fresh temporary folder for one test (never ~/.cache).
class TemporaryMatmulCacheDir {
 public:
  TemporaryMatmulCacheDir() {
    std::random_device entropy;
    folder_ = (std::filesystem::temp_directory_path() /
               fmt::format("tessel-matmul-test-{}-{:x}", ::testing::UnitTest::GetInstance()->random_seed(), entropy()))
                  .string();
    std::filesystem::create_directories(folder_);
    set_matmul_cache_dir(folder_);
    clear_matmul_memory_cache();
  }
  ~TemporaryMatmulCacheDir() {
    set_matmul_cache_dir("");
    clear_matmul_memory_cache();
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
  }
  const std::string& folder() const { return folder_; }
  // The autotune winners stored in the folder (one .json file each).
  int winner_files() const {
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder_)) files += entry.path().extension() == ".json";
    return files;
  }

 private:
  std::string folder_;
};

// Random float32 operands of relu(a @ b + bias), m x k and k x n, on `device`: the autotune tests' problem.
struct ReluProblem {
  Array a, b;
  MatmulOptions o;
};
ReluProblem relu_problem(std::mt19937_64& rng, std::int64_t m, std::int64_t n, std::int64_t k, Device device) {
  ReluProblem p;
  p.a = random_array(rng, {m, k}, DType::float32, device);
  p.b = random_array(rng, {k, n}, DType::float32, device);
  p.o.bias = random_array(rng, {n}, DType::float32, device);
  p.o.epilogue = MatmulEpilogue::relu;
  return p;
}

TEST_P(MatmulBackendTest, PlanAutotunePinAndDiskCache) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const TemporaryMatmulCacheDir cache_dir;
  ASSERT_EQ(matmul_cache_dir(), cache_dir.folder());
  const std::int64_t m = 23 + static_cast<std::int64_t>(rng() % 50), n = 41, k = 67;
  const auto [a, b, o] = relu_problem(rng, m, n, k, device());
  const Reference r = reference(a, b, o);
  MatmulPlan plan(a, b, o);
  ASSERT_FALSE(plan.candidates().empty());
  const auto& timed = plan.autotune(3);
  bool any_timed = false;
  double best_single = -1;
  for (const auto& c : timed) {
    any_timed = any_timed || (c.ok && c.time_ms >= 0);
    if (c.ok && c.time_ms >= 0 && (best_single < 0 || c.time_ms < best_single)) best_single = c.time_ms;
  }
  EXPECT_TRUE(any_timed);
  // The winner: the best back-to-back finalist when the second phase ran (it needs two finalists
  // and TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS > 0), else the best single-run time.
  std::string winner;
  double best_sustained = -1;
  int finalists = 0;
  for (const auto& c : timed) {
    if (c.sustained_ms < 0) continue;
    ++finalists;
    EXPECT_TRUE(c.ok) << c.name;
    EXPECT_LE(c.time_ms, best_single * 1.06 + 1e-9) << c.name << " is a finalist but not within 6% of the best";
    if (best_sustained < 0 || c.sustained_ms < best_sustained) {
      best_sustained = c.sustained_ms;
      winner = c.name;
    }
  }
  EXPECT_NE(finalists, 1) << "a second phase with one finalist";
  EXPECT_LE(finalists, 4);
  if (finalists == 0) {
    for (const auto& c : timed) {
      if (c.ok && c.time_ms == best_single) winner = c.name;
    }
  }
  EXPECT_EQ(plan.selected().name, winner);
  EXPECT_FALSE(plan.from_cache());
  // execute on new data of the same layout
  const auto [a2, b2, o2] = relu_problem(rng, m, n, k, device());
  expect_close(read_values(plan.execute(a2, b2, o2)), reference(a2, b2, o2).d, 1e-5, "execute on new data");
  expect_close(read_values(plan.execute()), r.d, 1e-5, "execute on the planned data");
  // every candidate on its own, pinned
  for (std::size_t i = 0; i < plan.candidates().size(); ++i) {
    if (!plan.candidates()[i].ok) continue;  // failed during autotune (reported there)
    plan.pin(static_cast<int>(i));
    EXPECT_EQ(plan.selected().name, plan.candidates()[i].name);
    Array out = empty({m, n}, DType::float32, device());
    poison(out);
    plan.execute(a, b, {}, out);
    expect_close(read_values(out), r.d, 1e-5, "pinned " + plan.candidates()[i].name);
  }
  plan.pin(plan.candidates().front().name);
  // the winner is on disk: a new plan with the memory cache cleared reads it
  clear_matmul_memory_cache();
  MatmulPlan reloaded(a, b, o);
  EXPECT_TRUE(reloaded.from_cache());
  EXPECT_EQ(reloaded.selected().name, winner);
  EXPECT_EQ(reloaded.cache_key(), plan.cache_key());
  // exactly one cache file, in the temporary folder
  EXPECT_EQ(cache_dir.winner_files(), 1);
  // matmul() uses the cached winner too and gives the same result
  expect_close(read_values(matmul(a, b, o)), r.d, 1e-5, "matmul after autotune");
}

// Turns matmul autotuning on first use on for one scope (it is process-wide), off after it.
class MatmulAutotuneOn {
 public:
  MatmulAutotuneOn() { set_matmul_autotune(true); }
  ~MatmulAutotuneOn() { set_matmul_autotune(false); }
};

TEST_P(MatmulBackendTest, AutotuneOnFirstUse) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const TemporaryMatmulCacheDir cache_dir;
  const std::int64_t m = 19 + static_cast<std::int64_t>(rng() % 40), n = 37, k = 53;
  const auto [a, b, o] = relu_problem(rng, m, n, k, device());
  const Reference r = reference(a, b, o);
  // Off (the default): the heuristic choice runs and nothing is stored.
  ASSERT_FALSE(config().matmul_autotune);
  expect_close(read_values(matmul(a, b, o)), r.d, 1e-5, "autotune off");
  EXPECT_EQ(cache_dir.winner_files(), 0);
  {
    // Turned on after the layout's first call: its next call tunes it.
    const MatmulAutotuneOn on;
    EXPECT_TRUE(config().matmul_autotune);
    // (Without out=: a call with out= is a layout of its own, tuned on its own first use.)
    expect_close(read_values(matmul(a, b, o)), r.d, 1e-5, "the call that autotunes");
    expect_close(read_values(matmul(a, b, o)), r.d, 1e-5, "the call after it");
    MatmulPlan plan(a, b, o);
    if (plan.candidates().size() > 1) {  // CUDA: the winner is in the caches
      EXPECT_TRUE(plan.from_cache());
      EXPECT_EQ(cache_dir.winner_files(), 1);
    } else {  // the CPU's one candidate: nothing to tune or store
      EXPECT_FALSE(plan.from_cache());
      EXPECT_EQ(cache_dir.winner_files(), 0);
    }
  }
  EXPECT_FALSE(config().matmul_autotune);
}

INSTANTIATE_TEST_SUITE_P(All, MatmulBackendTest, ::testing::ValuesIn(all_backends()), backend_name);

TEST(MatmulNames, EpilogueAndComputeStrings) {
  for (const char* name : {"none", "relu", "gelu", "gelu_tanh", "relu_grad", "gelu_grad", "gelu_tanh_grad"}) {
    EXPECT_STREQ(matmul_epilogue_name(parse_matmul_epilogue(name)), name);
  }
  for (const char* name : {"default", "fp32", "tf32"}) {
    EXPECT_STREQ(matmul_compute_name(parse_matmul_compute(name)), name);
  }
  expect_error<ValueError>([] { parse_matmul_compute("fp8"); }, {"compute", "fp8"});
}

}  // namespace
}  // namespace tessel::testing
