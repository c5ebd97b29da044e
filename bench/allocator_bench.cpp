// A cached allocate+free pair against cudaMalloc+cudaFree and against cudaMallocAsync+cudaFreeAsync
// from a pool that keeps its memory (release threshold = max). Target (issue 2, H100): a cached
// pair <= 1 us and >= 50x faster than cudaMalloc+cudaFree. Writes bench/results/<device>-<date>.json
// under "allocator". Without a GPU it benchmarks the host allocator only and says so.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/memory/host_allocator.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

constexpr std::int64_t KiB = 1024;
constexpr std::int64_t MiB = 1024 * KiB;
const std::vector<std::int64_t> kDeviceSizes = {512, 64 * KiB, 4 * MiB, 64 * MiB};
const std::vector<std::int64_t> kHostSizes = {512, 64 * KiB};

// Keeps every finished run (name -> ns per iteration) and prints as usual.
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration) continue;
      if (const std::string error = tessel::bench::run_error(run, 0); !error.empty()) {
        errors[run.benchmark_name()] = error;
        continue;
      }
      ns[run.benchmark_name()] = run.GetAdjustedRealTime();  // the unit is ns
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> ns;
  std::map<std::string, std::string> errors;
};

std::string name(const char* method, std::int64_t bytes) { return fmt::format("{}/{}", method, bytes); }

benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b) {
  return b->UseRealTime()->Unit(benchmark::kNanosecond)->MinTime(0.3);
}

// Registered names get "/min_time:.../real_time" appended: look runs up by prefix.
const double* find_ns(const Collector& c, const std::string& prefix) {
  for (const auto& [key, value] : c.ns) {
    if (key.rfind(prefix + "/", 0) == 0 || key == prefix) return &value;
  }
  return nullptr;
}

void register_host() {
  for (std::int64_t bytes : kHostSizes) {
    configure(benchmark::RegisterBenchmark(name("host_allocate", bytes).c_str(), [bytes](benchmark::State& state) {
      for (auto _ : state) {
        void* p = tessel::host_allocate(bytes);
        benchmark::DoNotOptimize(p);
        tessel::host_free(p);
      }
    }));
    configure(benchmark::RegisterBenchmark(name("malloc", bytes).c_str(), [bytes](benchmark::State& state) {
      for (auto _ : state) {
        void* p = std::malloc(static_cast<std::size_t>(bytes));
        benchmark::DoNotOptimize(p);
        std::free(p);
      }
    }));
  }
}

#if defined(TESSEL_HAVE_CUDA)
struct DeviceContext {
  tessel::Stream stream;
  cudaMemPool_t pool = nullptr;
};

void register_device(DeviceContext& ctx) {
  for (std::int64_t bytes : kDeviceSizes) {
    configure(benchmark::RegisterBenchmark(name("cached", bytes).c_str(), [bytes, &ctx](benchmark::State& state) {
      auto& alloc = tessel::device_allocator(0);
      const tessel::StreamRef ref = tessel::stream_ref(ctx.stream);
      alloc.free(alloc.allocate(bytes, ref));  // warm: the segment is cached from here on
      for (auto _ : state) {
        void* p = alloc.allocate(bytes, ref);
        benchmark::DoNotOptimize(p);
        alloc.free(p);
      }
    }));
    configure(benchmark::RegisterBenchmark(name("cudaMalloc", bytes).c_str(), [bytes](benchmark::State& state) {
      for (auto _ : state) {
        void* p = nullptr;
        if (cudaMalloc(&p, static_cast<std::size_t>(bytes)) != cudaSuccess || cudaFree(p) != cudaSuccess) {
          state.SkipWithError("cudaMalloc/cudaFree failed");
          break;
        }
      }
    }));
    configure(benchmark::RegisterBenchmark(name("cudaMallocAsync", bytes).c_str(), [bytes, &ctx](benchmark::State& state) {
      auto stream = static_cast<cudaStream_t>(ctx.stream.handle());
      void* p = nullptr;
      if (cudaMallocFromPoolAsync(&p, static_cast<std::size_t>(bytes), ctx.pool, stream) != cudaSuccess ||
          cudaFreeAsync(p, stream) != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess) {
        state.SkipWithError("cudaMallocFromPoolAsync failed");
        return;
      }
      for (auto _ : state) {
        if (cudaMallocFromPoolAsync(&p, static_cast<std::size_t>(bytes), ctx.pool, stream) != cudaSuccess ||
            cudaFreeAsync(p, stream) != cudaSuccess) {
          state.SkipWithError("cudaMallocFromPoolAsync/cudaFreeAsync failed");
          break;
        }
      }
      (void)cudaStreamSynchronize(stream);
    }));
  }
}

bool make_pool(DeviceContext& ctx) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  if (cudaMemPoolCreate(&ctx.pool, &props) != cudaSuccess) return false;
  std::uint64_t keep_everything = UINT64_MAX;  // never trim at synchronization: a real cache
  return cudaMemPoolSetAttribute(ctx.pool, cudaMemPoolAttrReleaseThreshold, &keep_everything) == cudaSuccess;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  nlohmann::json results;
  results["unit"] = "ns per allocate+free pair (real time)";
  results["target"] = "cached pair <= 1000 ns and >= 50x faster than cudaMalloc+cudaFree (H100)";
  const bool gpu = tessel::cuda_available();
#if defined(TESSEL_HAVE_CUDA)
  DeviceContext ctx;
  if (gpu) {
    ctx.stream = tessel::Stream::create(tessel::Device::cuda(0));
    if (!make_pool(ctx)) {
      std::fprintf(stderr, "allocator_bench: could not create a CUDA memory pool\n");
      return 1;
    }
    register_device(ctx);
  }
#endif
  if (!gpu) {
    const std::string why = tessel::cuda_unavailable_reason();
    std::printf("allocator_bench: GPU benchmarks skipped: no CUDA device (%s); benchmarking the host allocator only\n",
                why.c_str());
    results["skipped"] = "no CUDA device: " + why;
  }
  register_host();

  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  benchmark::Shutdown();

  results["device"] = gpu ? tessel::device_properties(0).name : std::string("cpu");
  if (gpu) {
    const auto& opt = tessel::device_allocator(0).options();
    results["allocator"] = {{"caching", opt.caching},
                            {"memory_fraction", opt.memory_fraction},
                            {"max_split_size", opt.max_split_size}};
    std::printf("\n%-10s %12s %14s %18s %10s %12s  %s\n", "bytes", "cached ns", "cudaMalloc ns", "cudaMallocAsync ns",
                "x malloc", "x async", "target");
    nlohmann::json rows = nlohmann::json::array();
    for (std::int64_t bytes : kDeviceSizes) {
      const double* cached = find_ns(collector, name("cached", bytes));
      const double* raw = find_ns(collector, name("cudaMalloc", bytes));
      const double* async = find_ns(collector, name("cudaMallocAsync", bytes));
      if (!cached) continue;  // filtered out or failed
      nlohmann::json row = {{"bytes", bytes}, {"cached_ns", *cached}};
      double vs_malloc = 0, vs_async = 0;
      if (raw) {
        vs_malloc = *raw / *cached;
        row["cudaMalloc_ns"] = *raw;
        row["speedup_vs_cudaMalloc"] = vs_malloc;
      }
      if (async) {
        vs_async = *async / *cached;
        row["cudaMallocAsync_ns"] = *async;
        row["speedup_vs_cudaMallocAsync"] = vs_async;
      }
      const bool met = *cached <= 1000.0 && raw && vs_malloc >= 50.0;
      row["target_met"] = met;
      rows.push_back(row);
      std::printf("%-10lld %12.1f %14.1f %18.1f %10.1f %12.2f  %s\n", static_cast<long long>(bytes), *cached,
                  raw ? *raw : 0.0, async ? *async : 0.0, vs_malloc, vs_async, met ? "met" : "NOT met");
    }
    results["device_pairs"] = rows;
  }
  nlohmann::json host = nlohmann::json::array();
  for (std::int64_t bytes : kHostSizes) {
    const double* mine = find_ns(collector, name("host_allocate", bytes));
    const double* libc = find_ns(collector, name("malloc", bytes));
    if (!mine) continue;
    nlohmann::json row = {{"bytes", bytes}, {"host_allocate_ns", *mine}};
    if (libc) row["malloc_ns"] = *libc;
    host.push_back(row);
  }
  results["host_pairs"] = host;
  if (!collector.errors.empty()) results["errors"] = collector.errors;
  tessel::bench::write_results("allocator", results);
#if defined(TESSEL_HAVE_CUDA)
  if (ctx.pool) (void)cudaMemPoolDestroy(ctx.pool);
#endif
  return collector.errors.empty() ? 0 : 1;
}
