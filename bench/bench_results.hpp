#pragma once
// What the benchmark programs share:
//  - results: bench/results/<device>-<date>.json, one top-level key per benchmark, merged into
//    the file so several benchmarks (and the Python peers) of one day share it;
//  - median(): the median convention of every benchmark (the upper middle of an even count, as
//    tessel::profile::time_on_stream does);
//  - device_copy_ms(): the copy ceiling (cudaMemcpyAsync timed with CUDA events).
// Event-timed regions use tessel::profile::time_on_stream (include/tessel/profile/timer.hpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/profile/timer.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessel::bench {

inline std::string device_slug() {
  std::string name = cuda_available() ? device_properties(current_device().index).name : std::string("cpu");
  std::string slug;
  for (char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) slug += c;
    else if (c >= 'A' && c <= 'Z') slug += static_cast<char>(c - 'A' + 'a');
    else if (!slug.empty() && slug.back() != '-') slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug;
}

inline std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

// The results folder: $TESSEL_BENCH_RESULTS, else bench/results of the source tree.
inline std::string results_dir() {
  if (const char* dir = std::getenv("TESSEL_BENCH_RESULTS")) return dir;
  return TESSEL_SOURCE_DIR "/bench/results";
}

// The error text of a failed or skipped Google Benchmark run, "" when it ran. Version 1.8
// renamed error_occurred/error_message to skipped/skip_message; this accepts either.
template <class Run>
auto run_error(const Run& run, int) -> decltype(run.error_occurred, std::string()) {
  return run.error_occurred ? run.error_message : std::string();
}
template <class Run>
auto run_error(const Run& run, long) -> decltype(run.skipped, std::string()) {
  return run.skipped ? run.skip_message : std::string();
}

// Today's results file for this device.
inline std::string results_path() { return results_dir() + "/" + device_slug() + "-" + today() + ".json"; }

// Everything in today's results file (the peers' numbers included); an empty object when the
// file is missing or not valid JSON.
inline nlohmann::json read_results() {
  nlohmann::json all = nlohmann::json::object();
  if (std::ifstream in(results_path()); in) {
    try {
      in >> all;
    } catch (const nlohmann::json::exception&) {
      all = nlohmann::json::object();
    }
  }
  return all;
}

// Merges `results` under `name` into today's file for this device and returns the file's path.
inline std::string write_results(const std::string& name, const nlohmann::json& results) {
  const std::string path = results_path();
  nlohmann::json all = read_results();
  all[name] = results;
  std::ofstream out(path);
  out << all.dump(2) << "\n";
  std::fprintf(stderr, "results: %s [%s]\n", path.c_str(), name.c_str());
  return path;
}

// True (after printing "<program>: skipped: no CUDA device (<why>)") when there is no usable GPU:
// a benchmark then exits 0 so that CI without a GPU passes.
inline bool skip_without_cuda(const char* program) {
  if (cuda_available()) return false;
  std::printf("%s: skipped: no CUDA device (%s)\n", program, cuda_unavailable_reason().c_str());
  return true;
}

// The median of host-timed samples (0 when there are none).
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

#if defined(TESSEL_HAVE_CUDA)
// Median ms of one cudaMemcpyAsync of `bytes` on `stream`, CUDA-event timed after the warm-up
// copies: the bandwidth ceiling the benchmarks compare against. Exits on a failed copy.
inline double device_copy_ms(void* dst, const void* src, std::int64_t bytes, cudaMemcpyKind kind, const Stream& stream,
                             profile::TimingOptions options) {
  return profile::time_on_stream([&] {
    const cudaError_t status = cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), kind,
                                               static_cast<cudaStream_t>(stream.handle()));
    if (status != cudaSuccess) {
      std::fprintf(stderr, "benchmark: cudaMemcpyAsync of %lld bytes failed: %s\n", static_cast<long long>(bytes),
                   cudaGetErrorString(status));
      std::exit(1);
    }
  }, stream, options).median_ms;
}
#endif

}  // namespace tessel::bench
