// FFT benchmarks (cuFFT through tessel), every result checked against the CPU backend first:
//  (a) one 8192-point complex64 FFT called from C++: wall time per call including host
//      overhead, median over many calls with the stream synchronized per call ("latency"), and
//      the mean of back-to-back calls synchronized once ("throughput"); the same for the
//      stateful fft::Plan and for the bare cufftExecC2C on the cached plan. Target <= 10 us.
//  (b) a batched 16384 x 8192 complex64 transform: bytes read + written per second against
//      the device-to-device copy bandwidth and the bare cufftExecC2C on the same plan, both
//      measured in the same run, and against PyTorch's cuFFT when bench/peers/torch_fft.py has
//      written "fft_peers" into today's results file (target: >= 95% of it).
//  (c) a plan-cache hit: the lookup alone, CPU timer, median over 1e5 lookups (target <= 1 us).
// Results go to bench/results/<device>-<date>.json under "fft".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/ops/backend_entry_points.hpp"
#include "tessel/tessel.hpp"

#if !defined(TESSEL_HAVE_CUDA)
int main() {
  std::printf("fft_bench: skipped: tessel was built without CUDA\n");
  return 0;
}
#else
#include <cuda_runtime_api.h>

using namespace tessel;
using Clock = std::chrono::steady_clock;

namespace {

using bench::median;

// Median wall time of one call followed by a stream synchronize, in microseconds.
double latency_us(const std::function<void()>& body, const Stream& stream, int calls = 5000) {
  for (int i = 0; i < 200; ++i) body();
  stream.synchronize();
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const auto t0 = Clock::now();
    body();
    stream.synchronize();
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median(times);
}

// Mean wall time per call of `calls` back-to-back calls and one synchronize (median of 5 runs).
double throughput_us(const std::function<void()>& body, const Stream& stream, int calls = 2000) {
  for (int i = 0; i < 200; ++i) body();
  stream.synchronize();
  std::vector<double> per_call;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) body();
    stream.synchronize();
    per_call.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  return median(per_call);
}

// max |got - want| / max |want| over the rows `rows` of a (batch, n) complex64 result.
double max_rel_error(const Array& got, const Array& input, const std::vector<std::int64_t>& rows) {
  double worst = 0, scale = 1e-30;
  for (std::int64_t r : rows) {
    const Array in_row = input[r].to(Device::cpu());
    const auto want = fft::fft(in_row).to_vector<std::complex<float>>();
    const auto have = got[r].to(Device::cpu()).to_vector<std::complex<float>>();
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (!std::isfinite(have[i].real()) || !std::isfinite(have[i].imag())) return INFINITY;
      worst = std::max(worst, double(std::abs(have[i] - want[i])));
      scale = std::max(scale, double(std::abs(want[i])));
    }
  }
  return worst / scale;
}

Array random_complex64(const Shape& shape, Device device) {
  return add(astype(random::uniform(shape, -1, 1, DType::float32, device), DType::complex64),
             multiply(astype(random::uniform(shape, -1, 1, DType::float32, device), DType::complex64),
                      Scalar(std::complex<double>(0, 1))));
}

}  // namespace

int main() {
  if (bench::skip_without_cuda("fft_bench")) return 0;
  const Device gpu = Device::cuda(0);
  const Stream stream = current_stream(gpu);
  nlohmann::json results;
  results["device"] = device_properties(0).name;
  bool all_ok = true;
  constexpr double kTol = 2e-5;

  // ---- (a) one 8192-point complex64 FFT ----
  {
    const std::int64_t n = 8192;
    Array x = random_complex64({n}, gpu);
    Array y = fft::fft(x);
    const double err = max_rel_error(y.reshape({1, n}), x.reshape({1, n}), {0});
    nlohmann::json row{{"n", n}, {"max_rel_error", err}};
    if (!(err < kTol)) {
      row["status"] = "FAILED";
      all_ok = false;
      std::printf("fft 8192: FAILED check (max rel error %.3g)\n", err);
    } else {
      fft::Plan plan(x, fft::Transform::fft);
      Array out = empty({n}, DType::complex64, gpu);
      const internal::CufftC2C raw(x, out, stream);
      const std::shared_ptr<void> raw_plan = raw.plan();
      const double fn_lat = latency_us([&] { y = fft::fft(x); }, stream);
      const double fn_thr = throughput_us([&] { y = fft::fft(x); }, stream);
      const double plan_lat = latency_us([&] { y = plan.execute(x); }, stream);
      const double plan_thr = throughput_us([&] { y = plan.execute(x); }, stream);
      const double raw_lat = latency_us([&] { raw.exec_raw(raw_plan); }, stream);
      const double raw_thr = throughput_us([&] { raw.exec_raw(raw_plan); }, stream);
      const double gpu_ms =
          profile::time_on_stream([&] { raw.exec_raw(raw_plan); }, stream, {3, 200})
              .median_ms;
      row.update({{"fft_latency_us", fn_lat}, {"fft_throughput_us", fn_thr}, {"plan_latency_us", plan_lat},
                  {"plan_throughput_us", plan_thr}, {"raw_cufft_latency_us", raw_lat},
                  {"raw_cufft_throughput_us", raw_thr}, {"gpu_kernel_us", gpu_ms * 1e3}, {"target_us", 10.0},
                  {"meets_target", fn_lat <= 10.0}});
      std::printf("fft 8192 c64: fft() %.2f us/call synchronized, %.2f us/call back-to-back; Plan %.2f / %.2f us; "
                  "raw cufftExecC2C %.2f / %.2f us; GPU time %.2f us (target <= 10 us)\n",
                  fn_lat, fn_thr, plan_lat, plan_thr, raw_lat, raw_thr, gpu_ms * 1e3);
    }
    results["single_8192"] = row;
  }

  // ---- (b) batched 16384 x 8192 complex64 ----
  {
    const std::int64_t batch = 16384, n = 8192;
    const std::int64_t bytes = batch * n * 8;
    Array x = random_complex64({batch, n}, gpu);
    Array copy_dst = empty({batch, n}, DType::complex64, gpu);
    const double copy_ms =
        bench::device_copy_ms(copy_dst.data(), x.data(), bytes, cudaMemcpyDeviceToDevice, stream, {3, 20});
    const double copy_tbs = 2.0 * bytes / copy_ms / 1e9;
    copy_dst = Array();
    Array y = fft::fft(x);
    const double err = max_rel_error(y, x, {0, 777, batch - 1});
    nlohmann::json row{{"shape", {batch, n}}, {"max_rel_error", err}, {"copy_TBps", copy_tbs}};
    if (!(err < kTol)) {
      row["status"] = "FAILED";
      all_ok = false;
      std::printf("fft 16384x8192: FAILED check (max rel error %.3g)\n", err);
    } else {
      const double ms = profile::time_on_stream([&] { y = fft::fft(x); }, stream, {3, 20}).median_ms;
      Array out = empty({batch, n}, DType::complex64, gpu);
      const internal::CufftC2C raw(x, out, stream);
      const std::shared_ptr<void> raw_plan = raw.plan();
      const double raw_ms =
          profile::time_on_stream([&] { raw.exec_raw(raw_plan); }, stream, {3, 20})
              .median_ms;
      const double tbs = 2.0 * bytes / ms / 1e9, raw_tbs = 2.0 * bytes / raw_ms / 1e9;
      row.update({{"ms", ms}, {"TBps", tbs}, {"pct_of_copy", 100 * tbs / copy_tbs}, {"raw_cufft_ms", raw_ms},
                  {"raw_cufft_TBps", raw_tbs}, {"pct_of_raw_cufft", 100 * tbs / raw_tbs}});
      std::printf("fft 16384x8192 c64: %.3f ms, %.3f TB/s (read + write), %.1f%% of copy (%.3f TB/s), %.1f%% of "
                  "raw cufftExecC2C (%.3f TB/s)\n",
                  ms, tbs, 100 * tbs / copy_tbs, copy_tbs, 100 * tbs / raw_tbs, raw_tbs);
      // PyTorch's number, when bench/peers/torch_fft.py ran first on this machine today.
      const std::string path = bench::results_path();
      if (std::ifstream(path)) {
        try {
          const nlohmann::json all = bench::read_results();
          const auto& peer = all.at("fft_peers").at("torch").at("batched_16384x8192");
          const double torch_tbs = peer.at("TBps").get<double>();
          row["torch_TBps"] = torch_tbs;
          row["pct_of_torch"] = 100 * tbs / torch_tbs;
          row["meets_target"] = tbs >= 0.95 * torch_tbs;
          std::printf("  vs PyTorch (same day, same device): %.1f%% (target >= 95%%)\n", 100 * tbs / torch_tbs);
        } catch (const nlohmann::json::exception&) {
          std::printf("  no PyTorch result in %s: run bench/peers/torch_fft.py first for the ratio\n", path.c_str());
        }
      }
    }
    results["batched_16384x8192"] = row;
  }

  // ---- (c) plan-cache hit ----
  {
    const std::int64_t n = 8192;
    Array x = empty({n}, DType::complex64, gpu), out = empty({n}, DType::complex64, gpu);
    const internal::CufftC2C raw(x, out, stream);
    raw.plan();  // the miss
    const int lookups = 100000;
    std::vector<double> times;
    times.reserve(lookups);
    for (int i = 0; i < lookups; ++i) {
      const auto t0 = Clock::now();
      std::shared_ptr<void> plan = raw.plan();
      const auto t1 = Clock::now();
      times.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    // The clock's own cost, to subtract nothing but to report alongside.
    std::vector<double> clock_cost;
    for (int i = 0; i < 10000; ++i) {
      const auto t0 = Clock::now();
      const auto t1 = Clock::now();
      clock_cost.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    const double hit_ns = median(times);
    results["plan_cache_hit"] = {{"median_ns", hit_ns}, {"clock_overhead_ns", median(clock_cost)},
                                 {"lookups", lookups}, {"target_ns", 1000}, {"meets_target", hit_ns <= 1000}};
    std::printf("plan-cache hit: %.0f ns median over %d lookups (clock overhead %.0f ns; target <= 1000 ns)\n", hit_ns,
                lookups, median(clock_cost));
  }
  const auto info = fft::plan_cache_info(gpu);
  results["plan_cache"] = {{"plans", info.plans}, {"workspace_bytes", info.workspace_bytes}, {"hits", info.hits},
                           {"misses", info.misses}};
  bench::write_results("fft", results);
  return all_ok ? 0 : 1;
}
#endif
