// The multi-stream pipeline workload: 1 GiB of float32 in pinned host memory -> x*2+1 (one fused
// kernel) -> host, through tessel's Pipeline, against the pinned one-direction copy ceiling; the
// bound the job really has (H2D and D2H of the same bytes at the same time, chunked like the
// pipeline, on its device) is measured too and reported in the note and `extra`.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/core/event.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/ops/fuse.hpp"
#include "tessel/pipeline/pipeline.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessel::cli::bench {
namespace {

#if defined(TESSEL_HAVE_CUDA)
// GB/s (bytes of one direction per second) of `bytes` H2D on one stream and `bytes` D2H on
// another at the same time, in chunks of `chunk`, on `device`: median of 5 after a warm-up;
// 0 when a copy fails.
double bidirectional_GBps(Device device, const void* host_in, void* host_out, std::int64_t bytes, std::int64_t chunk) {
  DeviceGuard guard(device);
  Stream up = Stream::create(device), down = Stream::create(device);
  auto dev_in = Buffer::allocate(device, bytes, up);
  auto dev_out = Buffer::allocate(device, bytes, down);
  if (cudaMemsetAsync(dev_out->data(), 0, static_cast<std::size_t>(bytes), static_cast<cudaStream_t>(down.handle())) != cudaSuccess) {
    return 0;
  }
  std::vector<double> ms;
  for (int rep = 0; rep < 6; ++rep) {
    Event start(device), up_done(device), down_done(device);
    start.record(up);
    down.wait(start);
    for (std::int64_t off = 0; off < bytes; off += chunk) {
      const auto len = static_cast<std::size_t>(std::min(chunk, bytes - off));
      if (cudaMemcpyAsync(static_cast<char*>(dev_in->data()) + off, static_cast<const char*>(host_in) + off, len,
                          cudaMemcpyHostToDevice, static_cast<cudaStream_t>(up.handle())) != cudaSuccess ||
          cudaMemcpyAsync(static_cast<char*>(host_out) + off, static_cast<const char*>(dev_out->data()) + off, len,
                          cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(down.handle())) != cudaSuccess) {
        up.synchronize();
        down.synchronize();
        return 0;
      }
    }
    up_done.record(up);
    down_done.record(down);
    const double t = std::max(start.elapsed_ms(up_done), start.elapsed_ms(down_done));
    if (rep > 0) ms.push_back(t);
  }
  up.synchronize();
  down.synchronize();
  std::sort(ms.begin(), ms.end());
  return static_cast<double>(bytes) / ms[ms.size() / 2] / 1e6;
}
#endif

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
#if defined(TESSEL_HAVE_CUDA)
  if (ctx.device.is_cuda()) {
    // After the timing: y is overwritten by the D2H copies of this measurement.
    const double bidir = bidirectional_GBps(ctx.device, x.data(), y.data(), n * 4, std::max<std::int64_t>(pipe.report().chunk_bytes, 1));
    if (bidir > 0) {
      r.extra["bidirectional_GBps"] = bidir;
      r.extra["pct_of_bidirectional"] = 100 * r.rate / bidir;
      r.note += fmt::format("; {:.1f}% of H2D+D2H at once ({:.2f} GB/s each way)", 100 * r.rate / bidir, bidir);
    }
  }
#endif
  return {r};
}

}  // namespace

std::vector<Workload> pipeline_workloads() {
  return {{"pipeline", "1 GiB float32 host -> x*2+1 -> host over several streams", pipeline}};
}

}  // namespace tessel::cli::bench
