// Linear-algebra workloads: batches of small matrices (issue 20's rows where tessel's own kernels
// run): eigh of 8x8 float32 (bytes read + written against the copy ceiling), solve and Cholesky of
// 8x8 float32. The *_ex variants are timed (no info read, so no synchronization inside the timed
// region). Results are checked by reconstruction on sampled matrices first.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/linalg.hpp"
#include "tessel/ops/matmul.hpp"
#include "tessel/ops/random.hpp"

namespace tessel::cli::bench {
namespace {

constexpr std::int64_t kN = 8;

// Symmetric (x + x^T) / 2, or positive definite x x^T + n I, float32 batch x n x n.
Array batch_matrices(std::int64_t batch, bool positive_definite, const Context& ctx) {
  const Array x = random::normal({batch, kN, kN}, 0.0, 1.0, DType::float32, ctx.device, ctx.stream);
  if (positive_definite) {
    const Array eye_n = multiply(eye(kN, kN, 0, DType::float32, ctx.device, ctx.stream), Scalar(double(kN)),
                                 std::nullopt, ctx.stream);
    return add(linalg_matmul(x, x.swapaxes(-1, -2), ctx.stream), eye_n, std::nullopt, ctx.stream);
  }
  return multiply(add(x, x.swapaxes(-1, -2), std::nullopt, ctx.stream), Scalar(0.5), std::nullopt, ctx.stream);
}

// max |got - want| / max |want| over the first `count` matrices.
double sampled_error(const Array& got, const Array& want, std::int64_t count) {
  const auto g = host_doubles(got.slice(0, Slice(0, count)));
  const auto w = host_doubles(want.slice(0, Slice(0, count)));
  double err = 0, scale = 1e-30;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double e = std::abs(g[i] - w[i]);
    err = std::isnan(e) ? INFINITY : std::max(err, e);
    scale = std::max(scale, std::abs(w[i]));
  }
  return err / scale;
}

Row timed_row(const std::string& variant, double ms, double bytes, const Context& ctx, const std::string& note) {
  Row r;
  r.workload = "linalg";
  r.variant = variant;
  r.ms = ms;
  r.unit = "GB/s";
  r.rate = bytes / ms / 1e6;
  r.ceiling = "copy";
  r.pct_of_ceiling = ctx.ceilings.copy_GBps > 0 ? 100 * r.rate / ctx.ceilings.copy_GBps : 0;
  r.note = note;
  return r;
}

std::vector<Row> linalg_workloads_run(Context& ctx) {
  std::vector<Row> rows;
  const std::int64_t batch = ctx.quick || ctx.device.is_cpu() ? 10000 : 100000;
  const std::int64_t sample = 64;
  const double matrix_bytes = double(batch) * kN * kN * 4;
  {
    const std::string variant = fmt::format("eigh {} x 8x8 f32", batch);
    const Array a = batch_matrices(batch, false, ctx);
    auto r = linalg::eigh_ex(a, ctx.stream);
    const Array av = linalg_matmul(a, r.eigenvectors, ctx.stream);
    const Array vw = multiply(r.eigenvectors, r.eigenvalues.expand_dims(-2), std::nullopt, ctx.stream);
    const double err = sampled_error(av, vw, sample);
    if (!(err <= 1e-4)) {
      rows.push_back(failed_row("linalg", variant, fmt::format("A v - v w: relative error {:.3g}", err)));
    } else {
      const double ms = ctx.median_ms([&] { r = linalg::eigh_ex(a, ctx.stream); });
      rows.push_back(timed_row(variant, ms, 2 * matrix_bytes + double(batch) * kN * 4, ctx,
                               "eigh_ex; bytes: input + eigenvalues + eigenvectors; target >= 70% of copy"));
    }
  }
  {
    const std::string variant = fmt::format("solve {} x 8x8 f32", batch);
    const Array a = batch_matrices(batch, true, ctx);
    const Array b = random::normal({batch, kN, 1}, 0.0, 1.0, DType::float32, ctx.device, ctx.stream);
    auto r = linalg::solve_ex(a, b, ctx.stream);
    const double err = sampled_error(linalg_matmul(a, r.result, ctx.stream), b, sample);
    if (!(err <= 1e-4)) {
      rows.push_back(failed_row("linalg", variant, fmt::format("A x - b: relative error {:.3g}", err)));
    } else {
      const double ms = ctx.median_ms([&] { r = linalg::solve_ex(a, b, ctx.stream); });
      rows.push_back(timed_row(variant, ms, matrix_bytes + 2.0 * batch * kN * 4, ctx, "solve_ex"));
    }
  }
  {
    const std::string variant = fmt::format("cholesky {} x 8x8 f32", batch);
    const Array a = batch_matrices(batch, true, ctx);
    auto r = linalg::cholesky_ex(a, false, ctx.stream);
    const double err = sampled_error(linalg_matmul(r.factor, r.factor.swapaxes(-1, -2), ctx.stream), a, sample);
    if (!(err <= 1e-4)) {
      rows.push_back(failed_row("linalg", variant, fmt::format("L L^T - A: relative error {:.3g}", err)));
    } else {
      const double ms = ctx.median_ms([&] { r = linalg::cholesky_ex(a, false, ctx.stream); });
      rows.push_back(timed_row(variant, ms, 2 * matrix_bytes, ctx, "cholesky_ex"));
    }
  }
  return rows;
}

}  // namespace

std::vector<Workload> linalg_workloads() {
  return {{"linalg", "batched 8x8 float32 eigh, solve and Cholesky (tessel's small-matrix kernels on CUDA)",
           linalg_workloads_run}};
}

}  // namespace tessel::cli::bench
