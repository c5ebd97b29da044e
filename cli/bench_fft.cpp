// FFT workloads: one 8192-point complex64 transform (host wall time per call, the seeds' latency
// case) and a batched 16384 x 8192 complex64 transform (bytes read + written against the copy
// ceiling).
#include <cmath>
#include <complex>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/fft.hpp"
#include "tessel/ops/random.hpp"

namespace tessel::cli::bench {
namespace {

Array random_complex64(const Shape& shape, const Context& ctx) {
  const Array re = random::uniform(shape, -1, 1, DType::float32, ctx.device, ctx.stream);
  const Array im = random::uniform(shape, -1, 1, DType::float32, ctx.device, ctx.stream);
  return add(astype(re, DType::complex64, ctx.stream), multiply(astype(im, DType::complex64, ctx.stream),
                                                              Scalar(std::complex<double>(0, 1)), std::nullopt, ctx.stream),
             std::nullopt, ctx.stream);
}

// Norm-wise error of rows of y = fft(x) against a float64 DFT of the same rows.
double row_error(const Array& x, const Array& y, const std::vector<std::int64_t>& rows) {
  double worst = 0, scale = 1e-30;
  for (std::int64_t r : rows) {
    const auto in = astype(x[r].to(Device::cpu()), DType::complex128).to_vector<std::complex<double>>();
    const auto out = astype(y[r].to(Device::cpu()), DType::complex128).to_vector<std::complex<double>>();
    const std::size_t n = in.size();
    for (std::size_t k = 0; k < n; k += 37) {  // a sample of bins; each is an O(n) sum
      std::complex<double> want = 0;
      for (std::size_t j = 0; j < n; ++j) want += in[j] * std::polar(1.0, -2 * M_PI * double((j * k) % n) / double(n));
      if (!std::isfinite(out[k].real())) return INFINITY;
      worst = std::max(worst, std::abs(out[k] - want));
      scale = std::max(scale, std::abs(want));
    }
  }
  return worst / scale;
}

std::vector<Row> fft_workloads_run(Context& ctx) {
  std::vector<Row> rows;
  const std::int64_t n = 8192;
  {
    const std::string variant = "8192 c64, one call";
    Array x = random_complex64({1, n}, ctx);
    Array y = fft::fft(x, std::nullopt, -1, "backward", ctx.stream);
    const double err = row_error(x, y, {0});
    if (!(err <= 1e-5)) {
      rows.push_back(failed_row("fft", variant, fmt::format("relative error {:.3g}", err)));
    } else {
      // Back-to-back calls, the device synchronized at the end: the per-call cost a loop sees.
      const int calls = 200;
      const double ms = profile::time_on_host([&] {
        for (int i = 0; i < calls; ++i) y = fft::fft(x, std::nullopt, -1, "backward", ctx.stream);
        ctx.stream.synchronize();
      }, ctx.timing()).median_ms / calls;
      Row r;
      r.workload = "fft";
      r.variant = variant;
      r.ms = ms;
      r.rate = ms * 1e3;
      r.unit = "us/call";
      r.note = "wall time per call, back to back; target <= 10 us";
      rows.push_back(r);
    }
  }
  {
    const std::int64_t batch = ctx.quick || ctx.device.is_cpu() ? 2048 : 16384;
    const std::string variant = fmt::format("{}x8192 c64 batched", batch);
    Array x = random_complex64({batch, n}, ctx);
    Array y = fft::fft(x, std::nullopt, -1, "backward", ctx.stream);
    const double err = row_error(x, y, {0, batch / 3, batch - 1});
    if (!(err <= 1e-5)) {
      rows.push_back(failed_row("fft", variant, fmt::format("relative error {:.3g}", err)));
    } else {
      Row r;
      r.workload = "fft";
      r.variant = variant;
      r.ms = ctx.median_ms([&] { y = fft::fft(x, std::nullopt, -1, "backward", ctx.stream); });
      r.unit = "GB/s";
      r.rate = 2.0 * batch * n * 8 / r.ms / 1e6;
      r.ceiling = "copy";
      r.pct_of_ceiling = 100 * r.rate / ctx.ceilings.copy_GBps;
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace

std::vector<Workload> fft_workloads() {
  return {{"fft", "8192-point complex64 FFT, one call and batched 16384 x 8192", fft_workloads_run}};
}

}  // namespace tessel::cli::bench
