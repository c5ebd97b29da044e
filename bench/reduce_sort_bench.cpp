// Reductions and sort on the GPU against ceilings measured in the same run:
//   sum over 2^28 float32 vs a device-to-device cudaMemcpy of the same bytes (target >= 90% of
//   copy bandwidth, where copy bandwidth counts read + write and sum counts its read);
//   argsort of 1e8 int32 keys vs the bare cub::DeviceRadixSort::SortPairs call on the same keys
//   (target: tessel time / CUB time <= 1.2).
// Times are CUDA-event times per iteration (manual time). Without a GPU this prints a note and
// exits 0.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/device.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/random.hpp"
#include "tessel/ops/reduce.hpp"
#include "tessel/ops/sort.hpp"
#include "tessel/profile/timer.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "tessel/ops/backend_entry_points.hpp"
#endif

namespace {

#if defined(TESSEL_HAVE_CUDA)
constexpr std::int64_t sum_elements = std::int64_t{1} << 28;
constexpr std::int64_t sort_elements = 100'000'000;

std::map<std::string, double> seconds_per_iteration;  // the last (longest) run of each benchmark

// Times `body` per iteration with CUDA events on `stream` (tessel's timer, one repeat per
// Google Benchmark iteration, reported as manual time).
template <class Body>
void time_iterations(benchmark::State& state, const std::string& name, const tessel::Stream& stream, Body&& body) {
  const std::function<void()> timed = body;
  timed();  // warm-up (allocator cache, CUB temp sizing)
  stream.synchronize();
  double total = 0;
  std::int64_t count = 0;
  for (auto _ : state) {
    const double seconds = tessel::profile::time_on_stream(timed, stream, {0, 1}).median_ms / 1e3;
    state.SetIterationTime(seconds);
    total += seconds;
    ++count;
  }
  if (count > 0) seconds_per_iteration[name] = total / static_cast<double>(count);
}

void register_benchmarks() {
  const tessel::Device gpu = tessel::Device::cuda(0);
  auto stream = std::make_shared<tessel::Stream>(tessel::current_stream(gpu));
  auto raw = static_cast<cudaStream_t>(stream->handle());
  auto x = std::make_shared<tessel::Array>(tessel::random::uniform({sum_elements}, -1.0, 1.0, tessel::DType::float32, gpu));
  auto keys = std::make_shared<tessel::Array>(
      tessel::random::integers({sort_elements}, -1'000'000'000, 1'000'000'000, tessel::DType::int32, gpu));
  x->wait();
  keys->wait();

  benchmark::RegisterBenchmark("copy_d2d_2^28_float32", [=](benchmark::State& state) {
    auto dst = tessel::Buffer::allocate(gpu, x->nbytes(), *stream);
    time_iterations(state, "copy", *stream, [&] {
      cudaMemcpyAsync(dst->data(), x->data(), static_cast<std::size_t>(x->nbytes()), cudaMemcpyDeviceToDevice, raw);
    });
    state.SetBytesProcessed(state.iterations() * 2 * x->nbytes());
  })->UseManualTime()->Unit(benchmark::kMicrosecond);

  benchmark::RegisterBenchmark("sum_2^28_float32", [=](benchmark::State& state) {
    time_iterations(state, "sum", *stream,
                    [&] { benchmark::DoNotOptimize(tessel::sum(*x, std::nullopt, false, *stream)); });
    state.SetBytesProcessed(state.iterations() * x->nbytes());
  })->UseManualTime()->Unit(benchmark::kMicrosecond);

  benchmark::RegisterBenchmark("argsort_1e8_int32", [=](benchmark::State& state) {
    time_iterations(state, "argsort", *stream, [&] { benchmark::DoNotOptimize(tessel::argsort(*keys, -1, *stream)); });
    state.SetItemsProcessed(state.iterations() * sort_elements);
  })->UseManualTime()->Unit(benchmark::kMillisecond);

  benchmark::RegisterBenchmark("cub_SortPairs_1e8_int32", [=](benchmark::State& state) {
    auto keys_out = tessel::Buffer::allocate(gpu, keys->nbytes(), *stream);
    // The values CUB sorts along: row positions 0..n-1, as argsort uses.
    const tessel::Array iota = tessel::arange(0, sort_elements, 1, tessel::DType::int64, gpu, *stream);
    auto values_out = tessel::Buffer::allocate(gpu, sort_elements * 8, *stream);
    std::size_t temp_bytes = 0;
    tessel::internal::cub_sort_pairs_int32(nullptr, temp_bytes, nullptr, nullptr, nullptr, nullptr, sort_elements,
                                           *stream);
    auto temp = tessel::Buffer::allocate(gpu, static_cast<std::int64_t>(temp_bytes), *stream);
    iota.wait();
    time_iterations(state, "cub", *stream, [&] {
      tessel::internal::cub_sort_pairs_int32(
          temp->data(), temp_bytes, keys->data_as<std::int32_t>(), static_cast<std::int32_t*>(keys_out->data()),
          iota.data_as<std::int64_t>(), static_cast<std::int64_t*>(values_out->data()), sort_elements, *stream);
    });
    state.SetItemsProcessed(state.iterations() * sort_elements);
  })->UseManualTime()->Unit(benchmark::kMillisecond);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (tessel::bench::skip_without_cuda("reduce_sort_bench")) return 0;
#if defined(TESSEL_HAVE_CUDA)
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  nlohmann::json results;
  results["device"] = tessel::device_properties(0).name;
  results["unit"] = "seconds per iteration (CUDA events)";
  auto has = [](const char* key) { return seconds_per_iteration.count(key) > 0; };
  if (has("copy") && has("sum")) {
    const double bytes = static_cast<double>(sum_elements) * 4;
    const double copy_gbs = 2 * bytes / seconds_per_iteration["copy"] / 1e9;
    const double sum_gbs = bytes / seconds_per_iteration["sum"] / 1e9;
    results["sum_2^28_float32"] = {{"sum_s", seconds_per_iteration["sum"]},
                                   {"copy_s", seconds_per_iteration["copy"]},
                                   {"sum_GBps", sum_gbs},
                                   {"copy_GBps_read_plus_write", copy_gbs},
                                   {"percent_of_copy_bandwidth", 100 * sum_gbs / copy_gbs},
                                   {"target_percent", 90}};
    std::printf("sum 2^28 float32: %.1f GB/s, copy %.1f GB/s (read+write): %.1f%% of copy bandwidth (target >= 90%%)\n",
                sum_gbs, copy_gbs, 100 * sum_gbs / copy_gbs);
  }
  if (has("argsort") && has("cub")) {
    const double ratio = seconds_per_iteration["argsort"] / seconds_per_iteration["cub"];
    results["argsort_1e8_int32"] = {{"tessel_s", seconds_per_iteration["argsort"]},
                                    {"cub_SortPairs_s", seconds_per_iteration["cub"]},
                                    {"ratio_tessel_over_cub", ratio},
                                    {"target_ratio", 1.2}};
    std::printf("argsort 1e8 int32: %.2f ms vs CUB SortPairs %.2f ms: ratio %.3f (target <= 1.2)\n",
                1e3 * seconds_per_iteration["argsort"], 1e3 * seconds_per_iteration["cub"], ratio);
  }
  tessel::bench::write_results("reduce_sort", results);
#endif
  return 0;
}
