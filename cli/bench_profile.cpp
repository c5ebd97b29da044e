// The profiler's own cost in the suite: host time a recording profile::Session adds to a
// 1-element add (session on and off in alternating rounds), and on a GPU how far the kernel
// durations of the trace are from CUDA-event timings of the same adds (bench/profile_bench.cpp
// measures more cases, and the 10-second simulation trace).
#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/profile/hooks.hpp"
#include "tessel/profile/session.hpp"

namespace tessel::cli::bench {
namespace {

double host_us_per_add(const Array& x, const Array& out, const Stream& stream, int calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) add(x, x, out, stream);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  stream.synchronize();
  return us;
}

std::vector<Row> profiling(Context& ctx) {
  const std::string variant = "1-element add, session on vs off";
  if (profile::session_recording()) {
    return {skipped_row("profiling", variant, "a profile session is already recording (tessel bench --trace)")};
  }
  const Array x = full({1}, 1.5, DType::float32, ctx.device, ctx.stream);
  const Array out = empty({1}, DType::float32, ctx.device, ctx.stream);
  add(x, x, out, ctx.stream);
  if (out.to(Device::cpu()).item<float>() != 3.0f) return {failed_row("profiling", variant, "1.5 + 1.5 != 3")};
  constexpr int kCalls = 200;
  const int rounds = ctx.quick ? 7 : 25;
  std::vector<double> off, on, added;
  for (int i = 0; i < 3; ++i) host_us_per_add(x, out, ctx.stream, kCalls);
  for (int r = 0; r < rounds; ++r) {
    const double a = host_us_per_add(x, out, ctx.stream, kCalls);
    profile::Session session;
    const double b = host_us_per_add(x, out, ctx.stream, kCalls);
    session.stop();
    off.push_back(a);
    on.push_back(b);
    added.push_back(b - a);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  Row r;
  r.workload = "profiling";
  r.variant = variant;
  r.ms = median(on) * 1e-3;
  r.rate = median(added);
  r.unit = "us added/op";
  r.note = fmt::format("off {:.3f} us/op; target <= 1.5 us added", median(off));
  r.extra = {{"off_us", median(off)}, {"on_us", median(on)}, {"added_us", median(added)}, {"rounds", rounds}};
  std::vector<Row> rows{r};
  if (ctx.device.is_cuda()) {
    // The trace's kernel time of an add on 1e7 elements against CUDA events around the same add.
    const std::int64_t n = 10'000'000;
    const Array a = full({n}, 1.0, DType::float32, ctx.device, ctx.stream);
    const Array c = empty({n}, DType::float32, ctx.device, ctx.stream);
    // Back to back, as vector_add times it: one call's events would hold its launch submission.
    constexpr int kBatch = 20;
    const double event_ms = ctx.median_ms([&] {
      for (int i = 0; i < kBatch; ++i) add(a, a, c, ctx.stream);
    }) / kBatch;
    profile::Session session;
    for (int i = 0; i < 25; ++i) add(a, a, c, ctx.stream);
    session.stop();
    std::vector<double> kernel_ms;
    for (const auto& g : session.gpu()) {
      if (g.kind == profile::GpuEventKind::kernel) kernel_ms.push_back(double(g.end_ns - g.start_ns) * 1e-6);
    }
    Row t;
    t.workload = "profiling";
    t.variant = "trace vs events, add 1e7";
    if (kernel_ms.empty()) return {r, skipped_row("profiling", t.variant, "no GPU activity: " + session.cupti_status())};
    const double trace_ms = median(kernel_ms);
    const double diff_us = std::abs(trace_ms - event_ms) * 1e3;
    t.ms = trace_ms;
    t.rate = 100.0 * (trace_ms - event_ms) / event_ms;
    t.unit = "% vs events";
    t.note = fmt::format("events {:.4f} ms, diff {:.2f} us; target 5% or 2 us{}", event_ms, diff_us,
                         diff_us <= 2.0 || diff_us <= 0.05 * event_ms * 1e3 ? "" : " MISSED");
    rows.push_back(t);
  }
  return rows;
}

}  // namespace

std::vector<Workload> profile_workloads() {
  return {{"profiling", "host time a recording profile session adds per op; trace kernel times vs CUDA events",
           profiling}};
}

}  // namespace tessel::cli::bench
