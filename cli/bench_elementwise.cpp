// Elementwise workloads: the seeds' vector add and a fused elementwise chain.
#include <cmath>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/fuse.hpp"
#include "tessel/ops/random.hpp"

namespace tessel::cli::bench {
namespace {

std::vector<Row> vector_add(Context& ctx) {
  const std::int64_t n = 10'000'000;
  const std::string variant = "1e7 float32";
  Array a = random::uniform({n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  Array b = random::uniform({n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  Array c = full({n}, NAN, DType::float32, ctx.device, ctx.stream);  // poison
  add(a, b, c, ctx.stream);
  const std::vector<double> av = host_doubles(a), bv = host_doubles(b);
  std::vector<double> want(av.size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<double>(static_cast<float>(av[i] + bv[i]));
  const double err = max_relative_error(c, want);
  if (err > 0) return {failed_row("vector_add", variant, fmt::format("max relative error {:.3g}", err))};
  // Timed two ways. Per call, the events also hold the host's submission of the launch, which
  // an idle GPU waits for (~3.5 us on the H100 VM, as long as cudaLaunchKernel itself; PyTorch
  // pays it too). Back to back (kBatch adds between one pair of events, as METHOD.md advises for
  // small launches) the GPU time of the kernel shows, comparable with the 1 GiB copy ceiling,
  // whose own submission is negligible.
  constexpr int kBatch = 20;
  const double per_call_ms = ctx.median_ms([&] { add(a, b, c, ctx.stream); });
  const double back_to_back_ms = ctx.median_ms([&] {
    for (int i = 0; i < kBatch; ++i) add(a, b, c, ctx.stream);
  }) / kBatch;
  std::vector<Row> rows;
  for (const bool batched : {true, false}) {
    Row r;
    r.workload = "vector_add";
    r.variant = variant + (batched ? ", back to back" : ", per call");
    r.ms = batched ? back_to_back_ms : per_call_ms;
    r.unit = "GB/s";
    r.rate = 3.0 * n * 4 / r.ms / 1e6;
    r.ceiling = "copy";
    r.pct_of_ceiling = 100 * r.rate / ctx.ceilings.copy_GBps;
    if (!batched && ctx.device.is_cuda()) r.note = "includes the launch's host submission";
    rows.push_back(r);
  }
  return rows;
}

// relu(a*x + b) * c, one generated kernel, against the same chain op by op.
std::vector<Row> fused_chain(Context& ctx) {
  const std::int64_t n = ctx.quick ? 20'000'000 : 100'000'000;
  const std::string size = ctx.quick ? "2e7" : "1e8";
  Array x = random::uniform({n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  Array b = random::uniform({n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  Array c = random::uniform({n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  const double a = 1.75;
  FusedKernel chain = fuse([a](const std::vector<Sym>& v) { return relu(v[0] * Sym(a) + v[1]) * v[2]; }, 3);
  const std::vector<double> xv = host_doubles(x), bv = host_doubles(b), cv = host_doubles(c);
  std::vector<Row> rows;
  double fused_ms = 0;
  for (const bool fused : {true, false}) {
    set_fusion_enabled(fused);
    const std::string variant = size + (fused ? " float32, fused" : " float32, op by op");
    Array y = chain({x, b, c}, std::nullopt, ctx.stream);  // a fresh result, never zeros
    // Bound in float32 roundings of the terms: a*x + b can cancel, so scale by |a*x| + |b|.
    const std::vector<double> got = host_doubles(y);
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double want = std::max(a * xv[i] + bv[i], 0.0) * cv[i];
      const double scale = (std::abs(a * xv[i]) + std::abs(bv[i])) * std::abs(cv[i]) * 1.2e-7 + 1e-30;
      const double e = std::abs(got[i] - want) / scale;
      if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
    }
    if (!(worst <= 4.0)) {
      rows.push_back(failed_row("fused_chain", variant, fmt::format("error {:.3g} float32 roundings", worst)));
      continue;
    }
    Row r;
    r.workload = "fused_chain";
    r.variant = variant;
    r.ms = ctx.median_ms([&] { y = chain({x, b, c}, std::nullopt, ctx.stream); });
    r.unit = "GB/s";
    r.rate = 4.0 * n * 4 / r.ms / 1e6;  // the fused minimum: read x, b, c, write y
    r.ceiling = "copy";
    r.pct_of_ceiling = 100 * r.rate / ctx.ceilings.copy_GBps;
    if (fused) fused_ms = r.ms;
    else if (fused_ms > 0 && r.ms >= fused_ms) r.note = fmt::format("fused is {:.2f}x faster", r.ms / fused_ms);
    else if (fused_ms > 0) r.note = fmt::format("fused is {:.2f}x slower", fused_ms / r.ms);
    rows.push_back(r);
  }
  set_fusion_enabled(true);
  return rows;
}

}  // namespace

std::vector<Workload> elementwise_workloads() {
  return {
      {"vector_add", "c = a + b over 1e7 float32", vector_add},
      {"fused_chain", "relu(a*x + b) * c as one fused kernel and op by op", fused_chain},
  };
}

}  // namespace tessel::cli::bench
