// The multi-stream pipeline workload: 1 GiB of float32 in pinned host memory -> x*2+1 (one fused
// kernel) -> host, through tessel's Pipeline, against the pinned one-direction copy ceiling.
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/ops/fuse.hpp"
#include "tessel/pipeline/pipeline.hpp"

namespace tessel::cli::bench {
namespace {

std::vector<Row> pipeline(Context& ctx) {
  const std::int64_t n = ctx.device.is_cpu() ? (std::int64_t{1} << 24) : ctx.quick ? (std::int64_t{1} << 26) : (std::int64_t{1} << 28);
  const std::string variant = fmt::format("{} MiB host -> x*2+1 -> host", n * 4 >> 20);
  Array x = empty_pinned({n}, DType::float32);
  {
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
    float* xs = x.data_as<float>();
    for (std::int64_t i = 0; i < n; ++i) xs[i] = dist(rng);
  }
  const FusedKernel twice_plus_one = fuse([](const std::vector<Sym>& v) { return v[0] * 2 + 1; }, 1);
  PipelineOptions options;
  options.device = ctx.device;
  options.progress = ProgressMode::off;
  Pipeline pipe([&](const Array& chunk, const Stream& s) { return twice_plus_one({chunk}, std::nullopt, s); }, options);
  Array y = pipe.run(x);
  y.wait();
  const float* xs = x.data_as<float>();
  const float* ys = y.data_as<float>();
  for (std::int64_t i = 0; i < n; i += 9973) {
    if (ys[i] != xs[i] * 2.0f + 1.0f) {
      return {failed_row("pipeline", variant, fmt::format("element {}: {} != {} * 2 + 1", i, ys[i], xs[i]))};
    }
  }
  const double ms = profile::time_on_host([&] { y = pipe.run(x); y.wait(); }, ctx.timing()).median_ms;
  Row r;
  r.workload = "pipeline";
  r.variant = variant;
  r.ms = ms;
  r.unit = "GB/s";
  r.rate = static_cast<double>(n) * 4 / ms / 1e6;  // input processed per second
  if (ctx.ceilings.h2d_GBps > 0) {
    r.ceiling = "pinned H2D";
    r.pct_of_ceiling = 100 * r.rate / ctx.ceilings.h2d_GBps;
  }
  r.note = pipe.report().str();
  return {r};
}

}  // namespace

std::vector<Workload> pipeline_workloads() {
  return {{"pipeline", "1 GiB float32 host -> x*2+1 -> host over several streams", pipeline}};
}

}  // namespace tessel::cli::bench
