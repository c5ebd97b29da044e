// FFT tests: one body over backend (cpu, cuda:0) x dtype, against an O(n^2) DFT in long double
// on the host for small and medium sizes, and round-trip / Parseval / single-tone identities
// for large ones (where the O(n^2) reference is too slow).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "../memory/fake_runtime.hpp"
#include "testing.hpp"
#include "tessel/tessel.hpp"

namespace tessel {
namespace {

using testing::expect_error;
using cld = std::complex<long double>;
constexpr long double kPi = 3.141592653589793238462643383279502884L;

// ---- host reference ----
std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Pads with zeros or crops axis to `length` (C order data).
std::vector<cld> ref_resize(const std::vector<cld>& x, Shape& shape, std::int64_t axis, std::int64_t length) {
  Shape out_shape = shape;
  out_shape[static_cast<std::size_t>(axis)] = length;
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < axis; ++i) outer *= shape[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  const std::int64_t m = shape[static_cast<std::size_t>(axis)];
  std::vector<cld> out(static_cast<std::size_t>(numel(out_shape)), cld(0, 0));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < std::min(m, length); ++j)
      for (std::int64_t i = 0; i < inner; ++i)
        out[static_cast<std::size_t>((o * length + j) * inner + i)] = x[static_cast<std::size_t>((o * m + j) * inner + i)];
  shape = out_shape;
  return out;
}

// Unnormalized DFT along axis (sign -1 forward, +1 inverse), O(n^2) in long double.
std::vector<cld> ref_dft(const std::vector<cld>& x, const Shape& shape, std::int64_t axis, bool inverse) {
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < axis; ++i) outer *= shape[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  const std::int64_t n = shape[static_cast<std::size_t>(axis)];
  std::vector<cld> roots(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    const long double angle = (inverse ? 2 : -2) * kPi * static_cast<long double>(k) / static_cast<long double>(n);
    roots[static_cast<std::size_t>(k)] = cld(std::cos(angle), std::sin(angle));
  }
  std::vector<cld> out(x.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i)
      for (std::int64_t k = 0; k < n; ++k) {
        cld sum(0, 0);
        for (std::int64_t j = 0; j < n; ++j) sum += x[static_cast<std::size_t>((o * n + j) * inner + i)] * roots[static_cast<std::size_t>((j * k) % n)];
        out[static_cast<std::size_t>((o * n + k) * inner + i)] = sum;
      }
  return out;
}

void ref_scale(std::vector<cld>& x, long double s) {
  for (auto& v : x) v *= s;
}

long double norm_factor(const std::string& norm, std::int64_t n, bool inverse) {
  if (norm == "ortho") return 1.0L / std::sqrt(static_cast<long double>(n));
  if (norm == "forward") return inverse ? 1.0L : 1.0L / n;
  return inverse ? 1.0L / n : 1.0L;
}

// Hermitian extension along axis: m = n/2+1 given values -> n values.
std::vector<cld> ref_hermitian(const std::vector<cld>& x, Shape& shape, std::int64_t axis, std::int64_t n) {
  std::vector<cld> half = ref_resize(x, shape, axis, n / 2 + 1);
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < axis; ++i) outer *= shape[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  const std::int64_t m = n / 2 + 1;
  Shape full_shape = shape;
  full_shape[static_cast<std::size_t>(axis)] = n;
  std::vector<cld> out(static_cast<std::size_t>(numel(full_shape)));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i)
      for (std::int64_t k = 0; k < n; ++k) {
        cld v = k < m ? half[static_cast<std::size_t>((o * m + k) * inner + i)]
                      : std::conj(half[static_cast<std::size_t>((o * m + (n - k)) * inner + i)]);
        // The imaginary parts of DC and (even n) Nyquist do not contribute to a real signal.
        if (k == 0 || (n % 2 == 0 && k == n / 2)) v = cld(v.real(), 0);
        out[static_cast<std::size_t>((o * n + k) * inner + i)] = v;
      }
  shape = full_shape;
  return out;
}

// ---- arrays ----
bool is_single(DType dtype) { return dtype == DType::complex64 || dtype == DType::float32; }

std::vector<cld> random_values(std::mt19937_64& rng, std::int64_t count, bool real) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<cld> v(static_cast<std::size_t>(count));
  for (auto& x : v) x = cld(u(rng), real ? 0.0 : u(rng));
  return v;
}

// An array of `dtype` holding the values (rounded to the dtype first, and the reference gets the
// rounded values back, so only the transform's error is measured).
Array make(std::vector<cld>& values, const Shape& shape, DType dtype, Device device) {
  if (is_complex(dtype)) {
    std::vector<std::complex<double>> v(values.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::complex<double>(double(values[i].real()), double(values[i].imag()));
    Array a = astype(from_vector(v, shape, Device::cpu()), dtype);
    const auto back = astype(a, DType::complex128).to_vector<std::complex<double>>();
    for (std::size_t i = 0; i < v.size(); ++i) values[i] = cld(back[i].real(), back[i].imag());
    return a.to(device);
  }
  std::vector<double> v(values.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = double(values[i].real());
  Array a = astype(from_vector(v, shape, Device::cpu()), dtype);
  const auto back = astype(a, DType::float64).to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) values[i] = cld(back[i], 0);
  return a.to(device);
}

std::vector<cld> read(const Array& a) {
  const Array host = a.to(Device::cpu());
  std::vector<cld> out;
  if (is_complex(a.dtype())) {
    for (auto v : astype(host, DType::complex128).to_vector<std::complex<double>>()) out.emplace_back(v.real(), v.imag());
  } else {
    for (auto v : astype(host, DType::float64).to_vector<double>()) out.emplace_back(v, 0);
  }
  return out;
}

// max |got - want| / max |want|: error relative to the signal's scale.
double rel_error(const std::vector<cld>& got, const std::vector<cld>& want) {
  EXPECT_EQ(got.size(), want.size());
  long double worst = 0, scale = 1e-300L;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  for (const auto& g : got) {
    if (!std::isfinite(double(g.real())) || !std::isfinite(double(g.imag()))) return INFINITY;
  }
  return static_cast<double>(worst / scale);
}

double tolerance(DType dtype, std::int64_t n) {
  // Single precision: a few roundings times log2(n); double: the same in double.
  const double logn = std::log2(static_cast<double>(std::max<std::int64_t>(n, 2)));
  return (is_single(dtype) ? 3e-7 : 5e-16) * 4 * logn + (is_single(dtype) ? 1e-6 : 1e-14);
}

class FFTComplexTest : public testing::BackendDTypeTest {};
class FFTRealTest : public testing::BackendDTypeTest {};

// ---- c2c against the O(n^2) reference: power-of-two, prime and composite lengths, every norm ----
TEST_P(FFTComplexTest, MatchesReferenceForManyLengthsAndNorms) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {1, 2, 3, 5, 8, 12, 17, 64, 101, 360, 1000, 1009}) {
    for (const std::string norm : {"backward", "ortho", "forward"}) {
      SCOPED_TRACE("n " + std::to_string(n) + " norm " + norm);
      const Shape shape{3, n};
      auto values = random_values(rng, numel(shape), false);
      Array x = make(values, shape, dtype(), device());
      for (bool inverse : {false, true}) {
        Array y = inverse ? fft::ifft(x, std::nullopt, -1, norm) : fft::fft(x, std::nullopt, -1, norm);
        EXPECT_EQ(y.dtype(), dtype());
        EXPECT_EQ(y.shape(), shape);
        auto want = ref_dft(values, shape, 1, inverse);
        ref_scale(want, norm_factor(norm, n, inverse));
        EXPECT_LT(rel_error(read(y), want), tolerance(dtype(), n)) << (inverse ? "ifft" : "fft");
      }
    }
  }
}

// ---- large lengths: round trip, Parseval and a single tone (exact answer) ----
TEST_P(FFTComplexTest, LargeLengthsRoundTripParsevalAndTone) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {4096 * 3, 1 << 16, 65537, 2 * 3 * 5 * 7 * 11 * 13}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto values = random_values(rng, n, false);
    Array x = make(values, {n}, dtype(), device());
    const auto spectrum = read(fft::fft(x));
    const auto back = read(fft::ifft(fft::fft(x)));
    EXPECT_LT(rel_error(back, values), tolerance(dtype(), n));
    long double energy_x = 0, energy_spectrum = 0;
    for (const auto& v : values) energy_x += std::norm(v);
    for (const auto& v : spectrum) energy_spectrum += std::norm(v);
    EXPECT_NEAR(double(energy_spectrum / (energy_x * n)), 1.0, 20 * tolerance(dtype(), n));
    // exp(2 pi i k0 j / n) transforms to n at k0 and 0 elsewhere.
    const std::int64_t k0 = n / 3 + 1;
    std::vector<cld> tone(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n), cld(0, 0));
    for (std::int64_t j = 0; j < n; ++j) {
      const long double angle = 2 * kPi * static_cast<long double>((k0 * j) % n) / n;
      tone[static_cast<std::size_t>(j)] = cld(std::cos(angle), std::sin(angle));
    }
    want[static_cast<std::size_t>(k0)] = cld(n, 0);
    Array t = make(tone, {n}, dtype(), device());
    EXPECT_LT(rel_error(read(fft::fft(t)), want), 8 * tolerance(dtype(), n));
  }
}

// ---- batched and non-contiguous inputs over every axis ----
TEST_P(FFTComplexTest, StridedAndBatchedOverEachAxis) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Shape base{6, 10, 14};
  auto values = random_values(rng, numel(base), false);
  Array x = make(values, base, dtype(), device());
  // Views: transposed, a step-2 slice, a negative-stride slice.
  struct View {
    const char* name;
    Array array;
  };
  std::vector<View> views{{"contiguous", x},
                          {"transposed", x.permute({2, 0, 1})},
                          {"step2", x.slice(2, Slice(0, std::nullopt, 2))},
                          {"reversed", x.slice(1, Slice(std::nullopt, std::nullopt, -1))}};
  for (const View& v : views) {
    const Shape shape = v.array.shape();
    auto view_values = read(v.array);
    for (std::int64_t axis = 0; axis < 3; ++axis) {
      SCOPED_TRACE(std::string(v.name) + " axis " + std::to_string(axis));
      Array y = fft::fft(v.array, std::nullopt, axis);
      EXPECT_EQ(y.shape(), shape);
      EXPECT_LT(rel_error(read(y), ref_dft(view_values, shape, axis, false)), tolerance(dtype(), 16));
    }
  }
}

// ---- n pads with zeros or crops ----
TEST_P(FFTComplexTest, LengthPadsAndCrops) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Shape shape{4, 9};
  auto values = random_values(rng, numel(shape), false);
  Array x = make(values, shape, dtype(), device());
  for (std::int64_t n : {5, 9, 16, 23}) {
    SCOPED_TRACE("n " + std::to_string(n));
    Shape s = shape;
    auto resized = ref_resize(values, s, 1, n);
    EXPECT_LT(rel_error(read(fft::fft(x, n)), ref_dft(resized, s, 1, false)), tolerance(dtype(), n));
    // Along axis 0 too.
    Shape s0 = shape;
    auto resized0 = ref_resize(values, s0, 0, n);
    EXPECT_LT(rel_error(read(fft::fft(x, n, 0)), ref_dft(resized0, s0, 0, false)), tolerance(dtype(), n));
  }
}

// ---- fftn / ifftn / fft2 over 2 and 3 axes, with s ----
TEST_P(FFTComplexTest, MultiAxisTransforms) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Shape shape{3, 5, 8};
  auto values = random_values(rng, numel(shape), false);
  Array x = make(values, shape, dtype(), device());
  {
    auto want = ref_dft(ref_dft(ref_dft(values, shape, 2, false), shape, 1, false), shape, 0, false);
    EXPECT_LT(rel_error(read(fft::fftn(x)), want), tolerance(dtype(), 120));
    auto inv = ref_dft(ref_dft(ref_dft(values, shape, 2, true), shape, 1, true), shape, 0, true);
    ref_scale(inv, 1.0L / 120);
    EXPECT_LT(rel_error(read(fft::ifftn(x)), inv), tolerance(dtype(), 120));
  }
  {
    auto want = ref_dft(ref_dft(values, shape, 2, false), shape, 1, false);
    ref_scale(want, 1.0L / std::sqrt(40.0L));
    EXPECT_LT(rel_error(read(fft::fft2(x, std::nullopt, std::vector<std::int64_t>{-2, -1}, "ortho")), want),
              tolerance(dtype(), 40));
  }
  {
    // s pads axis 0 to 4 and crops axis 2 to 6, axes given out of order.
    Shape s = shape;
    auto resized = ref_resize(values, s, 2, 6);
    resized = ref_resize(resized, s, 0, 4);
    auto want = ref_dft(ref_dft(resized, s, 0, false), s, 2, false);
    Array y = fft::fftn(x, std::vector<std::int64_t>{6, 4}, std::vector<std::int64_t>{2, 0});
    EXPECT_EQ(y.shape(), s);
    EXPECT_LT(rel_error(read(y), want), tolerance(dtype(), 24));
  }
  // Round trip over all axes.
  EXPECT_LT(rel_error(read(fft::ifftn(fft::fftn(x))), values), tolerance(dtype(), 120));
}

// ---- real transforms: odd and even n, round trips, irfft against the Hermitian reference ----
TEST_P(FFTRealTest, RfftIrfftOddAndEven) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType complex_dtype = to_complex(dtype());
  for (std::int64_t n : {1, 2, 7, 8, 17, 100, 101, 1000}) {
    for (const std::string norm : {"backward", "ortho", "forward"}) {
      SCOPED_TRACE("n " + std::to_string(n) + " norm " + norm);
      const Shape shape{2, n};
      auto values = random_values(rng, numel(shape), true);
      Array x = make(values, shape, dtype(), device());
      Array spectrum = fft::rfft(x, std::nullopt, -1, norm);
      EXPECT_EQ(spectrum.dtype(), complex_dtype);
      Shape half_shape = shape;
      auto full = ref_dft(values, shape, 1, false);
      ref_scale(full, norm_factor(norm, n, false));
      auto want = ref_resize(full, half_shape, 1, n / 2 + 1);
      EXPECT_LT(rel_error(read(spectrum), want), tolerance(dtype(), n));
      // irfft(rfft(x), n) == x
      Array back = fft::irfft(spectrum, n, -1, norm);
      EXPECT_EQ(back.dtype(), dtype());
      EXPECT_LT(rel_error(read(back), values), tolerance(dtype(), n));
      // irfft of arbitrary complex input (not Hermitian-consistent at DC/Nyquist).
      if (n >= 2) {
        const Shape cshape{2, n / 2 + 1};
        auto cvalues = random_values(rng, numel(cshape), false);
        Array c = make(cvalues, cshape, complex_dtype, device());
        Shape hs = cshape;
        auto herm = ref_hermitian(cvalues, hs, 1, n);
        auto inv = ref_dft(herm, hs, 1, true);
        ref_scale(inv, norm_factor(norm, n, true));
        for (auto& v : inv) v = cld(v.real(), 0);
        EXPECT_LT(rel_error(read(fft::irfft(c, n, -1, norm)), inv), tolerance(dtype(), n));
      }
    }
  }
}

TEST_P(FFTRealTest, RealMultiAxisAndHermitian) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Shape shape{4, 6, 9};
  auto values = random_values(rng, numel(shape), true);
  Array x = make(values, shape, dtype(), device());
  // rfftn over all axes: the full fftn cropped to 9/2+1 on the last axis.
  auto full = ref_dft(ref_dft(ref_dft(values, shape, 2, false), shape, 1, false), shape, 0, false);
  Shape half = shape;
  auto want = ref_resize(full, half, 2, 5);
  Array spectrum = fft::rfftn(x);
  EXPECT_EQ(spectrum.shape(), half);
  EXPECT_LT(rel_error(read(spectrum), want), tolerance(dtype(), 216));
  EXPECT_LT(rel_error(read(fft::irfftn(spectrum, std::vector<std::int64_t>{4, 6, 9})), values), tolerance(dtype(), 216));
  // rfft2 / irfft2 over the last two axes, with an even last length from s.
  Array spectrum2 = fft::rfft2(x, std::vector<std::int64_t>{6, 8});
  EXPECT_EQ(spectrum2.shape(), (Shape{4, 6, 5}));
  Shape s2 = shape;
  auto cropped = ref_resize(values, s2, 2, 8);
  EXPECT_LT(rel_error(read(fft::irfft2(spectrum2, std::vector<std::int64_t>{6, 8})), cropped), tolerance(dtype(), 48));
  // rfftn over axes (0, 1): the real axis is axis 1.
  Array spectrum01 = fft::rfftn(x, std::nullopt, std::vector<std::int64_t>{0, 1});
  EXPECT_EQ(spectrum01.shape(), (Shape{4, 4, 9}));
  // ihfft(x) = conj(rfft(x)) / n; hfft(ihfft(x), n) = x.
  const std::int64_t n = 9;
  Array h = fft::ihfft(x);
  auto hwant = ref_dft(values, shape, 2, false);
  Shape hs = shape;
  hwant = ref_resize(hwant, hs, 2, n / 2 + 1);
  for (auto& v : hwant) v = std::conj(v) / static_cast<long double>(n);
  EXPECT_LT(rel_error(read(h), hwant), tolerance(dtype(), n));
  EXPECT_LT(rel_error(read(fft::hfft(h, n)), values), tolerance(dtype(), n));
  EXPECT_EQ(fft::hfft(h, n).dtype(), dtype());
}

// ---- odd lengths against the O(n^2) reference: primes, 2^k 3^m 5^n and products with 7..13 ----
TEST_P(FFTComplexTest, OddLengthsMatchReference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {7, 11, 13, 31, 97, 127, 251, 509, 1021, 4099,  // primes
                         243, 625, 2 * 2 * 2 * 3 * 3 * 5, 2 * 27 * 25,     // 2^k 3^m 5^n
                         7 * 11 * 13, 2 * 3 * 5 * 7 * 11, 4097, 2 * 1021}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const Shape shape{2, n};
    auto values = random_values(rng, numel(shape), false);
    Array x = make(values, shape, dtype(), device());
    for (bool inverse : {false, true}) {
      Array y = inverse ? fft::ifft(x, std::nullopt, -1, "forward") : fft::fft(x);
      EXPECT_LT(rel_error(read(y), ref_dft(values, shape, 1, inverse)), tolerance(dtype(), n)) << (inverse ? "ifft" : "fft");
    }
  }
}

// Bins of the DFT along the last axis of rows (rows, n), summed directly in long double: the
// sampled bins of every row, their error relative to the spectrum's rms magnitude.
double sampled_bin_error(const std::vector<cld>& x, const std::vector<cld>& got, std::int64_t rows, std::int64_t n,
                         bool inverse, std::mt19937_64& rng) {
  std::vector<cld> roots(static_cast<std::size_t>(n));
  for (std::int64_t e = 0; e < n; ++e) {
    const long double angle = (inverse ? 2 : -2) * kPi * static_cast<long double>(e) / static_cast<long double>(n);
    roots[static_cast<std::size_t>(e)] = cld(std::cos(angle), std::sin(angle));
  }
  std::uniform_int_distribution<std::int64_t> any_bin(0, n - 1);
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const cld* row = x.data() + r * n;
    long double energy = 0;
    for (std::int64_t j = 0; j < n; ++j) energy += std::norm(row[j]);
    const long double rms = std::sqrt(std::max(energy, 1e-300L));
    std::vector<std::int64_t> bins{0, 1, n / 2, n - 1};
    for (int i = 0; i < 6; ++i) bins.push_back(any_bin(rng));
    for (std::int64_t k : bins) {
      cld sum(0, 0);
      std::int64_t e = 0;  // j * k mod n, stepped
      for (std::int64_t j = 0; j < n; ++j) {
        sum += row[j] * roots[static_cast<std::size_t>(e)];
        e += k;
        if (e >= n) e -= n;
      }
      worst = std::max(worst, double(std::abs(got[static_cast<std::size_t>(r * n + k)] - sum) / rms));
    }
  }
  return worst;
}

// ---- long rows (the CPU splits one long complex row over its threads, four-step) ----
TEST_P(FFTComplexTest, LongRowsMatchDirectSumsAtSampledBins) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  struct Case {
    std::int64_t rows, n;
  };
  for (const Case c : {Case{1, 1 << 20}, Case{1, 3 * 5 * 7 * 11 * 13 * 17}, Case{3, 3 << 15}, Case{1, 1 << 14},
                       Case{1, 1000003} /* prime: no split */}) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + " n " + std::to_string(c.n));
    const Shape shape{c.rows, c.n};
    auto values = random_values(rng, numel(shape), false);
    Array x = make(values, shape, dtype(), device());
    for (bool inverse : {false, true}) {
      const auto got = read(inverse ? fft::ifft(x, std::nullopt, -1, "forward") : fft::fft(x));
      EXPECT_LT(sampled_bin_error(values, got, c.rows, c.n, inverse, rng), tolerance(dtype(), c.n))
          << (inverse ? "ifft" : "fft");
    }
    EXPECT_LT(rel_error(read(fft::ifft(fft::fft(x))), values), tolerance(dtype(), c.n));
  }
  // A strided batch of long rows: axis 0 of an (n, 3) array (element stride 3 and row distance 1),
  // and a step-2 view along it.
  const std::int64_t n = 1 << 16;
  auto values = random_values(rng, n * 3, false);
  Array x = make(values, {n, 3}, dtype(), device());
  std::vector<cld> columns(static_cast<std::size_t>(3 * n));
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t col = 0; col < 3; ++col) columns[static_cast<std::size_t>(col * n + j)] = values[static_cast<std::size_t>(j * 3 + col)];
  }
  const Array y = fft::fft(x, std::nullopt, 0);
  EXPECT_LT(sampled_bin_error(columns, read(y.permute({1, 0})), 3, n, false, rng), tolerance(dtype(), n));
  const Array half = x.slice(0, Slice(0, std::nullopt, 2));
  std::vector<cld> half_columns(static_cast<std::size_t>(3 * (n / 2)));
  for (std::int64_t j = 0; j < n / 2; ++j) {
    for (std::int64_t col = 0; col < 3; ++col) {
      half_columns[static_cast<std::size_t>(col * (n / 2) + j)] = values[static_cast<std::size_t>(2 * j * 3 + col)];
    }
  }
  EXPECT_LT(sampled_bin_error(half_columns, read(fft::fft(half, std::nullopt, 0).permute({1, 0})), 3, n / 2, false, rng),
            tolerance(dtype(), n / 2));
}

// ---- long real rows: sampled bins of rfft, and the round trip ----
TEST_P(FFTRealTest, LongRowsMatchDirectSumsAtSampledBins) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {std::int64_t{1} << 20, std::int64_t{177147} /* 3^11 */, std::int64_t{1000003}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto values = random_values(rng, n, true);
    Array x = make(values, {n}, dtype(), device());
    const Array spectrum = fft::rfft(x);
    // Only bins below n/2+1 exist in the output: take the full-length spectrum by symmetry.
    const auto half = read(spectrum);
    std::vector<cld> full(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) {
      full[static_cast<std::size_t>(k)] = k <= n / 2 ? half[static_cast<std::size_t>(k)] : std::conj(half[static_cast<std::size_t>(n - k)]);
    }
    EXPECT_LT(sampled_bin_error(values, full, 1, n, false, rng), tolerance(dtype(), n));
    EXPECT_LT(rel_error(read(fft::irfft(spectrum, n)), values), tolerance(dtype(), n));
  }
}

INSTANTIATE_TEST_SUITE_P(All, FFTComplexTest,
                         ::testing::ValuesIn(testing::backend_dtype_cases({DType::complex64, DType::complex128})),
                         testing::case_name);
INSTANTIATE_TEST_SUITE_P(All, FFTRealTest,
                         ::testing::ValuesIn(testing::backend_dtype_cases({DType::float32, DType::float64})),
                         testing::case_name);

// ---- dtype casts ----
class FFTBackendTest : public testing::BackendTest {};

TEST_P(FFTBackendTest, CastsLikeNumPy) {
  TESSEL_SKIP_UNAVAILABLE(device());
  Array ints = arange(0, 8, 1, DType::int64, device());
  EXPECT_EQ(fft::fft(ints).dtype(), DType::complex128);
  EXPECT_EQ(fft::rfft(ints).dtype(), DType::complex128);
  EXPECT_EQ(fft::fft(astype(ints, DType::bool_)).dtype(), DType::complex128);
  EXPECT_EQ(fft::fft(astype(ints, DType::float32)).dtype(), DType::complex64);
  EXPECT_EQ(fft::fft(astype(ints, DType::float16)).dtype(), DType::complex64);
  EXPECT_EQ(fft::rfft(astype(ints, DType::bfloat16)).dtype(), DType::complex64);
  EXPECT_EQ(fft::irfft(astype(ints, DType::float32)).dtype(), DType::float32);
  // sum of 0..7 at DC
  const auto y = fft::fft(ints).to(Device::cpu()).to_vector<std::complex<double>>();
  EXPECT_NEAR(y[0].real(), 28.0, 1e-12);
  EXPECT_NEAR(y[4].real(), -4.0, 1e-12);
}

TEST_P(FFTBackendTest, BadInputRaisesNamedErrors) {
  TESSEL_SKIP_UNAVAILABLE(device());
  Array x = zeros({4, 8}, DType::complex64, device());
  Array r = zeros({4, 8}, DType::float32, device());
  expect_error<ValueError>([&] { fft::fft(x, 0); }, {"fft", "invalid number of data points 0"});
  expect_error<ValueError>([&] { fft::ifft(x, -3); }, {"ifft", "-3"});
  expect_error<IndexError>([&] { fft::fft(x, std::nullopt, 2); }, {"fft", "axis 2"});
  expect_error<IndexError>([&] { fft::rfft(r, std::nullopt, -3); }, {"rfft", "axis -3"});
  expect_error<IndexError>([&] { fft::fft(zeros({}, DType::complex64, device())); }, {"fft", "0-d"});
  expect_error<DTypeError>([&] { fft::rfft(x); }, {"rfft", "complex64"});
  expect_error<DTypeError>([&] { fft::rfftn(x); }, {"rfftn", "complex64"});
  expect_error<DTypeError>([&] { fft::ihfft(x); }, {"ihfft", "complex64"});
  expect_error<ValueError>([&] { fft::fft(zeros({4, 0}, DType::complex64, device())); }, {"fft", "empty", "(4, 0)"});
  expect_error<ValueError>([&] { fft::fftn(x, std::vector<std::int64_t>{4, 8}, std::vector<std::int64_t>{0}); },
                           {"fftn", "same length"});
  expect_error<ValueError>([&] { fft::fft(x, std::nullopt, -1, "unitary"); }, {"fft", "norm", "unitary"});
  expect_error<ValueError>([&] { fft::irfft(zeros({3, 1}, DType::complex64, device())); }, {"irfft", "m >= 2"});
  expect_error<ValueError>([&] { fft::fftfreq(0); }, {"fftfreq", "n must be >= 1"});
  expect_error<DTypeError>([&] { fft::rfftfreq(8, 1.0, DType::int32, device()); }, {"rfftfreq", "int32"});
  expect_error<ValueError>([&] { fft::fftn(x, std::vector<std::int64_t>{2, 2, 2}); }, {"fftn", "more entries", "(4, 8)"});
  expect_error<ValueError>([&] { fft::Plan(x, fft::Transform::fft, std::nullopt, std::nullopt, "sideways"); },
                           {"fft.Plan", "sideways"});
  expect_error<ValueError>([&] { fft::parse_transform("dct"); }, {"fft.Plan", "dct"});
}

TEST_P(FFTBackendTest, ZeroBatchGivesEmptyResult) {
  TESSEL_SKIP_UNAVAILABLE(device());
  Array y = fft::fft(zeros({0, 8}, DType::complex64, device()));
  EXPECT_EQ(y.shape(), (Shape{0, 8}));
  Array z = fft::rfft(zeros({0, 8}, DType::float64, device()));
  EXPECT_EQ(z.shape(), (Shape{0, 5}));
}

// ---- fftfreq / rfftfreq / fftshift / ifftshift against known values ----
std::vector<double> as_doubles(const Array& a) { return astype(a.to(Device::cpu()), DType::float64).to_vector<double>(); }

void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "index " << i;
}

TEST_P(FFTBackendTest, FrequenciesAndShifts) {
  TESSEL_SKIP_UNAVAILABLE(device());
  expect_values(as_doubles(fft::fftfreq(8, 0.1, DType::float64, device())), {0, 1.25, 2.5, 3.75, -5, -3.75, -2.5, -1.25});
  expect_values(as_doubles(fft::fftfreq(5, 1.0, DType::float32, device())), {0, 0.2, 0.4, -0.4, -0.2});
  EXPECT_EQ(fft::fftfreq(5, 1.0, DType::float32, device()).dtype(), DType::float32);
  expect_values(as_doubles(fft::rfftfreq(8, 0.1, DType::float64, device())), {0, 1.25, 2.5, 3.75, 5});
  expect_values(as_doubles(fft::rfftfreq(5, 1.0, DType::float64, device())), {0, 0.2, 0.4});
  Array f10 = fft::fftfreq(10, 0.1, DType::float64, device());
  expect_values(as_doubles(fft::fftshift(f10)), {-5, -4, -3, -2, -1, 0, 1, 2, 3, 4});
  expect_values(as_doubles(fft::ifftshift(fft::fftshift(f10))), as_doubles(f10));
  Array f5 = fft::fftfreq(5, 0.2, DType::float64, device());
  expect_values(as_doubles(fft::fftshift(f5)), {-2, -1, 0, 1, 2});
  expect_values(as_doubles(fft::ifftshift(fft::fftshift(f5))), {0, 1, 2, -2, -1});
  // 2-D: numpy.fft.fftshift(arange(9).reshape(3,3)) and with axes=(1,).
  Array m = arange(0, 9, 1, DType::float64, device()).reshape({3, 3});
  expect_values(as_doubles(fft::fftshift(m)), {8, 6, 7, 2, 0, 1, 5, 3, 4});
  expect_values(as_doubles(fft::fftshift(m, std::vector<std::int64_t>{1})), {2, 0, 1, 5, 3, 4, 8, 6, 7});
  expect_values(as_doubles(fft::ifftshift(m)), {4, 5, 3, 7, 8, 6, 1, 2, 0});
}

// ---- the stateful plan ----
TEST_P(FFTBackendTest, PlanExecutesManyTimesAndChecksLayout) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Shape shape{5, 64};
  std::vector<cld> v1 = random_values(rng, numel(shape), false), v2 = random_values(rng, numel(shape), false);
  Array a = make(v1, shape, DType::complex64, device());
  Array b = make(v2, shape, DType::complex64, device());
  fft::Plan plan(a, fft::Transform::fft, std::nullopt, std::vector<std::int64_t>{-1}, "ortho");
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(rel_error(read(plan.execute(a)), read(fft::fft(a, std::nullopt, -1, "ortho"))), 1e-6);
    EXPECT_LT(rel_error(read(plan.execute(b)), read(fft::fft(b, std::nullopt, -1, "ortho"))), 1e-6);
  }
  expect_error<ValueError>([&] { plan.execute(astype(a, DType::complex128)); },
                           {"fft.Plan.execute", "shape (5, 64) strides (64, 1) complex64", "complex128"});
  expect_error<ValueError>([&] { plan.execute(zeros({64, 5}, DType::complex64, device()).T()); },
                           {"fft.Plan.execute", "strides (64, 1)", "strides (1, 5)"});
  expect_error<ValueError>([&] { plan.execute(zeros({5, 32}, DType::complex64, device())); }, {"shape (5, 32)"});
  // A real plan over two axes.
  Array r = make(v1, shape, DType::float64, device());
  fft::Plan rplan(r, fft::Transform::rfft);
  EXPECT_LT(rel_error(read(rplan.execute(r)), read(fft::rfftn(r))), 1e-12);
  fft::Plan iplan(rplan.execute(r), fft::parse_transform("irfft"), std::vector<std::int64_t>{5, 64});
  EXPECT_LT(rel_error(read(iplan.execute(rplan.execute(r))), v1), 1e-12);
}

// ---- CPU against GPU ----
TEST(FFTCrossBackend, CpuMatchesGpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  TESSEL_SEEDED_RNG(rng);
  for (DType dtype : {DType::complex64, DType::complex128}) {
    for (std::int64_t n : {8192, 1009, 360, 4096 * 3}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n " + std::to_string(n));
      auto values = random_values(rng, 4 * n, false);
      Array cpu = make(values, {4, n}, dtype, Device::cpu());
      Array gpu = cpu.to(testing::test_gpu());
      EXPECT_LT(rel_error(read(fft::fft(gpu)), read(fft::fft(cpu))), tolerance(dtype, n));
      EXPECT_LT(rel_error(read(fft::fft(gpu, std::nullopt, 0)), read(fft::fft(cpu, std::nullopt, 0))), tolerance(dtype, n));
      Array rcpu = fft::irfft(fft::rfft(astype(cpu, to_real(dtype))));
      Array rgpu = fft::irfft(fft::rfft(astype(gpu, to_real(dtype))));
      EXPECT_LT(rel_error(read(rgpu), read(rcpu)), tolerance(dtype, n));
    }
  }
  // A plan made for one device refuses an array on another, naming both layouts.
  Array cpu = zeros({4, 16}, DType::complex64, Device::cpu());
  fft::Plan plan(cpu, fft::Transform::fft);
  expect_error<DeviceError>([&] { plan.execute(cpu.to(testing::test_gpu())); },
                            {"fft.Plan.execute", "for cpu", "on " + testing::test_gpu().str()});
}

TEST(FFTPlanCache, BoundedByCountAndWorkspaceAndReusesPlans) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Device gpu = testing::test_gpu();
  fft::clear_plan_cache(gpu);
  fft::set_plan_cache_limits(gpu, 3, std::size_t(1) << 30);
  Array x = zeros({4, 512}, DType::complex64, gpu);
  fft::fft(x);
  fft::fft(x);
  auto info = fft::plan_cache_info(gpu);
  EXPECT_EQ(info.plans, 1u);
  EXPECT_GE(info.hits, 1u);
  for (std::int64_t n : {100, 200, 300, 400}) fft::fft(x, n);
  info = fft::plan_cache_info(gpu);
  EXPECT_EQ(info.plans, 3u);
  EXPECT_GE(info.evictions, 2u);
  // A workspace limit of 0 keeps only the newest plan.
  fft::set_plan_cache_limits(gpu, 3, 0);
  info = fft::plan_cache_info(gpu);
  EXPECT_LE(info.plans, 3u);
  fft::set_plan_cache_limits(gpu, 64, std::size_t(1) << 30);
  fft::clear_plan_cache(gpu);
  EXPECT_EQ(fft::plan_cache_info(gpu).plans, 0u);
  // Still correct after eviction.
  EXPECT_NEAR(std::abs(fft::fft(ones({512}, DType::complex64, gpu)).to(Device::cpu()).to_vector<std::complex<float>>()[0]), 512.0, 1e-3);
}

// One cached cuFFT plan (and its workspace) used from two streams in turn: each stream change
// orders the workspace's use with an event, and results stay right.
TEST(FFTPlanCache, OnePlanSharedByTwoStreams) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  TESSEL_SEEDED_RNG(rng);
  const Device gpu = testing::test_gpu();
  const std::int64_t n = 1009 * 16;  // a size whose cuFFT plan needs a workspace
  auto values = random_values(rng, 8 * n, false);
  Array x = make(values, {8, n}, DType::complex64, gpu);
  const auto want = read(fft::fft(x.to(Device::cpu())));
  Stream other = Stream::create(gpu);
  for (int i = 0; i < 4; ++i) {
    Array a = fft::fft(x);  // the current stream
    Array b = fft::fft(x, std::nullopt, -1, "backward", other);
    EXPECT_LT(rel_error(read(a), want), tolerance(DType::complex64, n));
    EXPECT_LT(rel_error(read(b), want), tolerance(DType::complex64, n));
  }
  other.synchronize();
}

INSTANTIATE_TEST_SUITE_P(All, FFTBackendTest, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

// ---- the allocator's free-memory callbacks (what the cuFFT plan cache registers) ----
TEST(FreeMemoryCallback, RetriesAfterACallbackReleasesMemory) {
  auto f = testing::make_fake(64 << 20);
  const StreamRef stream{7, nullptr};
  void* held = f.alloc->allocate(48 << 20, stream);
  int calls = 0;
  const auto id = f.alloc->add_free_memory_callback([&] {
    ++calls;
    if (!held) return false;
    f.alloc->free(held);  // runs outside the allocator's lock
    held = nullptr;
    return true;
  });
  void* big = f.alloc->allocate(40 << 20, stream);  // fails until the callback frees `held`
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(calls, 1);
  // Now nothing is left to release: OutOfMemory, and the callback was asked.
  expect_error<OutOfMemory>([&] { f.alloc->allocate(40 << 20, stream); }, {"callbacks released nothing"});
  EXPECT_EQ(calls, 2);
  f.alloc->remove_free_memory_callback(id);
  expect_error<OutOfMemory>([&] { f.alloc->allocate(40 << 20, stream); }, {"out of memory"});
  EXPECT_EQ(calls, 2);
  f.alloc->free(big);
}

}  // namespace
}  // namespace tessel
