#pragma once
// Benchmarks record their results in bench/results/<device>-<date>.json, one top-level key per
// benchmark, merged into the file so several benchmarks of one day share it.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tessel/core/device.hpp"

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

// Merges `results` under `name` into today's file for this device and returns the file's path.
inline std::string write_results(const std::string& name, const nlohmann::json& results) {
  const std::string path = results_dir() + "/" + device_slug() + "-" + today() + ".json";
  nlohmann::json all = nlohmann::json::object();
  if (std::ifstream in(path); in) {
    try {
      in >> all;
    } catch (const nlohmann::json::exception&) {
      all = nlohmann::json::object();
    }
  }
  all[name] = results;
  std::ofstream out(path);
  out << all.dump(2) << "\n";
  std::fprintf(stderr, "results: %s [%s]\n", path.c_str(), name.c_str());
  return path;
}

}  // namespace tessel::bench
