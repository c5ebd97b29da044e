// Elementwise throughput against the device-to-device copy bandwidth measured in the same run:
//   vector add of 1e7 and 1e8 float32 (reads 2, writes 1 array),
//   relu(a*x+b)*c over 1e8 float32 as separate ops and as one runtime-compiled kernel.
//   a sweep of the launch shape (jit::ElementwiseTuning: block, unroll, waves) for the 1e7 and 1e8
//   add, each configuration checked before it is timed, timed per call and back to back;
//   host time per call of a tiny add (an upper bound of the dispatch overhead).
// Every result is checked against a host reference before it is timed. Times are medians of
// CUDA-event-timed repeats after 3 warm-up runs (compile, load, first touch).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <chrono>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/tessel.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/ops/elementwise.hpp"

#if !defined(TESSEL_HAVE_CUDA)
int main() {
  std::printf("elementwise_bench: skipped: tessel was built without CUDA\n");
  return 0;
}
#else
#include <cuda_runtime_api.h>

using namespace tessel;

namespace {

// Largest relative error of `got` against `want` over a strided sample of indices.
double max_rel_error(const std::vector<float>& got, const std::function<double(std::size_t)>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); i += 997) {
    const double w = want(i);
    worst = std::max(worst, std::abs(double(got[i]) - w) / std::max(1e-30, std::abs(w)));
  }
  if (!std::isfinite(got.back()) || std::isnan(got.front())) return INFINITY;
  return worst;
}

}  // namespace

int main() {
  if (bench::skip_without_cuda("elementwise_bench")) return 0;
  const Device gpu = Device::cuda(0);
  const Stream stream = current_stream(gpu);
  nlohmann::json results;
  results["device"] = device_properties(0).name;
  bool all_ok = true;

  // Ceiling: device-to-device copy of 1e8 float32 (bytes read + written).
  const std::int64_t big = 100'000'000;
  Array copy_src = random::uniform({big}, -1, 1, DType::float32, gpu);
  Array copy_dst = empty({big}, DType::float32, gpu);
  const double copy_ms =
      bench::device_copy_ms(copy_dst.data(), copy_src.data(), big * 4, cudaMemcpyDeviceToDevice, stream, {3, 25});
  const double copy_gbs = 2.0 * big * 4 / copy_ms / 1e6;
  results["copy_GBps"] = copy_gbs;
  std::printf("device copy: %.1f GB/s (read + write)\n", copy_gbs);

  for (std::int64_t n : {std::int64_t{10'000'000}, big}) {
    Array a = random::uniform({n}, -1, 1, DType::float32, gpu);
    Array b = random::uniform({n}, -1, 1, DType::float32, gpu);
    Array c = full({n}, NAN, DType::float32, gpu);  // poison
    add(a, b, c);
    const auto av = a.to(Device::cpu()).to_vector<float>(), bv = b.to(Device::cpu()).to_vector<float>();
    const double err = max_rel_error(c.to(Device::cpu()).to_vector<float>(), [&](std::size_t i) { return double(av[i]) + bv[i]; });
    nlohmann::json row{{"n", n}, {"max_rel_error", err}};
    if (err > 1e-6) {
      row["status"] = "FAILED";
      all_ok = false;
      std::printf("add n=%lld: FAILED check (max rel error %.3g)\n", static_cast<long long>(n), err);
    } else {
      const double ms = profile::time_on_stream([&] { add(a, b, c); }, stream, {3, 25}).median_ms;
      const double gbs = 3.0 * n * 4 / ms / 1e6;
      row.update({{"ms", ms}, {"GBps", gbs}, {"pct_of_copy", 100 * gbs / copy_gbs}});
      std::printf("add n=%lld: %.4f ms, %.1f GB/s, %.1f%% of copy\n", static_cast<long long>(n), ms, gbs, 100 * gbs / copy_gbs);
    }
    results["vector_add"].push_back(row);
  }

  // Launch-shape sweep for the vector add. "per_call" brackets each call with events (host gaps
  // count, as a user sees them); "back_to_back" times 20 calls between two events (host work
  // overlaps the GPU), which isolates the kernel when the host is faster than it.
  {
    const jit::ElementwiseTuning default_tuning = jit::elementwise_tuning();
    results["default_tuning"] = {{"block", default_tuning.block}, {"unroll", default_tuning.unroll}, {"waves", default_tuning.waves}};
    const std::vector<jit::ElementwiseTuning> configs = {
        {512, 1, 4}, {256, 1, 8}, {256, 2, 8}, {256, 4, 8}, {256, 8, 8}, {128, 4, 8},
        {512, 4, 8}, {256, 4, 2}, {256, 4, 64}, {128, 2, 64}, {1024, 2, 4}, default_tuning};
    for (std::int64_t n : {std::int64_t{10'000'000}, big}) {
      Array a = random::uniform({n}, -1, 1, DType::float32, gpu);
      Array b = random::uniform({n}, -1, 1, DType::float32, gpu);
      Array c = empty({n}, DType::float32, gpu);
      const auto av = a.to(Device::cpu()).to_vector<float>(), bv = b.to(Device::cpu()).to_vector<float>();
      for (const auto& t : configs) {
        jit::set_elementwise_tuning(t);
        nlohmann::json row{{"n", n}, {"block", t.block}, {"unroll", t.unroll}, {"waves", t.waves}};
        fill(c, NAN);
        add(a, b, c);
        const auto got = c.to(Device::cpu()).to_vector<float>();
        double err = max_rel_error(got, [&](std::size_t i) { return double(av[i]) + bv[i]; });
        // The sample above strides by 997; check the last 4096 elements too (the tail paths).
        for (std::size_t i = got.size() - 4096; i < got.size(); ++i) {
          if (got[i] != av[i] + bv[i]) err = INFINITY;
        }
        row["max_rel_error"] = err;
        if (err > 1e-6) {
          row["status"] = "FAILED";
          all_ok = false;
          std::printf("sweep n=%lld block=%d unroll=%d waves=%d: FAILED check\n", static_cast<long long>(n), t.block, t.unroll, t.waves);
        } else {
          const double ms = profile::time_on_stream([&] { add(a, b, c); }, stream, {3, 25}).median_ms;
          const double ms_b2b =
              profile::time_on_stream([&] { for (int r = 0; r < 20; ++r) add(a, b, c); }, stream, {3, 9}).median_ms / 20;
          const double gbs = 3.0 * n * 4 / ms / 1e6, gbs_b2b = 3.0 * n * 4 / ms_b2b / 1e6;
          row.update({{"per_call_ms", ms}, {"per_call_pct_of_copy", 100 * gbs / copy_gbs},
                      {"back_to_back_ms", ms_b2b}, {"back_to_back_pct_of_copy", 100 * gbs_b2b / copy_gbs}});
          std::printf("sweep n=%lld block=%4d unroll=%d waves=%2d: per call %.4f ms (%.1f%% of copy), back to back %.4f ms (%.1f%%)\n",
                      static_cast<long long>(n), t.block, t.unroll, t.waves, ms, 100 * gbs / copy_gbs, ms_b2b, 100 * gbs_b2b / copy_gbs);
        }
        results["tuning_sweep"].push_back(row);
      }
    }
    jit::set_elementwise_tuning(default_tuning);

    // Host time per call: 4000 tiny adds enqueued back to back (the GPU needs ~2 us each, so this
    // is max(host, GPU) per call: an upper bound of the C++ dispatch overhead).
    Array a = random::uniform({1024}, -1, 1, DType::float32, gpu), b = random::uniform({1024}, -1, 1, DType::float32, gpu);
    Array c = empty({1024}, DType::float32, gpu);
    for (int i = 0; i < 100; ++i) add(a, b, c);
    stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 4000; ++i) add(a, b, c);
    const auto t1 = std::chrono::steady_clock::now();
    stream.synchronize();
    const double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / 4000;
    results["tiny_add_host_us_per_call"] = host_us;
    std::printf("tiny add (1024 float32, out= given): %.2f us host time per call\n", host_us);
  }

  // relu(a*x+b)*c with arrays x, b, c and a scalar a: unfused ops vs one compiled kernel.
  {
    const std::int64_t n = big;
    Array x = random::uniform({n}, -1, 1, DType::float32, gpu);
    Array b = random::uniform({n}, -1, 1, DType::float32, gpu);
    Array c = random::uniform({n}, -1, 1, DType::float32, gpu);
    Array out = full({n}, NAN, DType::float32, gpu);
    const float a = 1.75f;
    jit::ElementwiseKernel fused("float32 x, float32 b, float32 c, float32 a", "float32 y",
                                 "y = fmaxf(a * x + b, 0.0f) * c", "fused_relu_axpb_c");
    auto run_fused = [&] {
      fused.launch({n}, {jit::ElementwiseArg::array(x.data_as<float>(), {1}), jit::ElementwiseArg::array(b.data_as<float>(), {1}),
                         jit::ElementwiseArg::array(c.data_as<float>(), {1}), jit::ElementwiseArg::value(a),
                         jit::ElementwiseArg::array(out.data_as<float>(), {1})},
                   gpu, stream);
    };
    auto run_unfused = [&] { out = multiply(relu(add(multiply(x, Scalar(double(a))), b)), c); };
    const auto xv = x.to(Device::cpu()).to_vector<float>(), bv = b.to(Device::cpu()).to_vector<float>(),
               cv = c.to(Device::cpu()).to_vector<float>();
    auto reference = [&](std::size_t i) { return std::max(double(a) * xv[i] + bv[i], 0.0) * cv[i]; };
    nlohmann::json row{{"n", n}};
    for (auto& [name, body] : std::vector<std::pair<std::string, std::function<void()>>>{{"fused", run_fused}, {"unfused", run_unfused}}) {
      fill(out, NAN);
      body();
      const auto got = out.to(Device::cpu()).to_vector<float>();
      // Error in units of the float32 rounding the terms allow: a*x+b can cancel, so the bound
      // scales with |a*x| + |b| rather than with the result.
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); i += 997) {
        const double scale = (std::abs(double(a) * xv[i]) + std::abs(double(bv[i]))) * std::abs(double(cv[i]));
        worst = std::max(worst, std::abs(double(got[i]) - reference(i)) / (1.2e-7 * scale + 1e-30));
      }
      if (!(worst <= 4.0)) {
        row[name] = {{"status", "FAILED"}, {"max_error_in_float32_roundings", worst}};
        all_ok = false;
        std::printf("relu(a*x+b)*c %s: FAILED check (%.3g)\n", name.c_str(), worst);
        continue;
      }
      const double ms = profile::time_on_stream(body, stream, {3, 15}).median_ms;
      const double gbs = 4.0 * n * 4 / ms / 1e6;  // the fused minimum: read x, b, c, write y
      row[name] = {{"ms", ms}, {"effective_GBps", gbs}, {"pct_of_copy", 100 * gbs / copy_gbs}, {"max_error_in_float32_roundings", worst}};
      std::printf("relu(a*x+b)*c %s: %.3f ms, %.1f GB/s effective, %.1f%% of copy\n", name.c_str(), ms, gbs, 100 * gbs / copy_gbs);
    }
    results["relu_axpb_c"] = row;
  }
  tessel::bench::write_results("elementwise", results);
  return all_ok ? 0 : 1;
}
#endif
