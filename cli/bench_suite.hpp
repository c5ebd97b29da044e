#pragma once
// `tessel bench`: the seeds' workloads, each timed honestly and reported against a ceiling
// measured in the same run (device copy bandwidth, cuBLAS GEMM rate, pinned copy bandwidth).
//
// A workload checks its output against a reference before it times anything; a failed check
// is reported as FAILED, never timed. Workloads run on the CUDA device when there is one, else
// on the CPU backend (the table says which).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessel/array/array.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/profile/timer.hpp"

namespace tessel::cli::bench {

// One line of the table.
struct Row {
  std::string workload;
  std::string variant;         // "fp32", "tf32", "1e7 elements", ...
  std::string status = "ok";   // ok, FAILED, skipped
  std::string note;            // why it failed or was skipped, or a remark
  double ms = 0;               // median time of one repetition
  double rate = 0;             // in `unit`
  std::string unit;            // "GB/s", "TFLOP/s", "Mparticle-steps/s"
  std::string ceiling;         // name of the ceiling the rate is compared with
  double pct_of_ceiling = 0;
  nlohmann::json extra = nlohmann::json::object();
};

// Ceilings measured once per run, before the workloads.
struct Ceilings {
  double copy_GBps = 0;       // device-to-device (or host memcpy) bytes read + written per second
  double gemm_fp32_TFLOPs = 0;
  double gemm_tf32_TFLOPs = 0;
  double gemm_bf16_TFLOPs = 0;
  double h2d_GBps = 0;        // pinned, one direction
  double d2h_GBps = 0;
  nlohmann::json to_json() const;
};

struct Context {
  Device device;
  Stream stream;
  bool quick = false;
  Ceilings ceilings;
  profile::TimingOptions timing() const { return quick ? profile::TimingOptions{2, 7} : profile::TimingOptions{3, 25}; }
  // The median of repeats of body() on the context's stream.
  double median_ms(const std::function<void()>& body) const;
};

struct Workload {
  std::string name;
  std::string description;
  std::function<std::vector<Row>(Context&)> run;
};

// Every workload of the suite, in table order.
std::vector<Workload> all_workloads();
Ceilings measure_ceilings(Context& ctx);

// Helpers for workloads.
Row failed_row(const std::string& workload, const std::string& variant, const std::string& why);
Row skipped_row(const std::string& workload, const std::string& variant, const std::string& why);
// Largest |got - want| / (|want| + floor) over all elements, both as float64 on the host.
double max_relative_error(const Array& got, const std::vector<double>& want, double floor = 1e-30);
std::vector<double> host_doubles(const Array& a);

// Per-area workload lists (one file each), concatenated by all_workloads().
std::vector<Workload> elementwise_workloads();
std::vector<Workload> matmul_workloads();
std::vector<Workload> fft_workloads();
std::vector<Workload> linalg_workloads();
std::vector<Workload> sim_workloads();
std::vector<Workload> pipeline_workloads();
std::vector<Workload> profile_workloads();

}  // namespace tessel::cli::bench
