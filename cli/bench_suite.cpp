#include "bench_suite.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tessel/core/error.hpp"
#include "tessel/ops/cast.hpp"

namespace tessel::cli::bench {

std::vector<Workload> all_workloads() {
  std::vector<Workload> all;
  for (auto list : {elementwise_workloads, matmul_workloads, fft_workloads, linalg_workloads, sim_workloads,
                    pipeline_workloads, profile_workloads}) {
    for (Workload& w : list()) all.push_back(std::move(w));
  }
  return all;
}

Row failed_row(const std::string& workload, const std::string& variant, const std::string& why) {
  Row r;
  r.workload = workload;
  r.variant = variant;
  r.status = "FAILED";
  r.note = why;
  return r;
}

Row skipped_row(const std::string& workload, const std::string& variant, const std::string& why) {
  Row r = failed_row(workload, variant, why);
  r.status = "skipped";
  return r;
}

std::vector<double> host_doubles(const Array& a) {
  const Array f = astype(a, DType::float64).to(Device::cpu());
  return f.to_vector<double>();
}

double max_relative_error(const Array& got, const std::vector<double>& want, double floor) {
  const std::vector<double> values = host_doubles(got);
  if (values.size() != want.size()) {
    throw ShapeError("bench: result has " + std::to_string(values.size()) + " elements, reference " +
                     std::to_string(want.size()));
  }
  double worst = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double err = std::abs(values[i] - want[i]) / (std::abs(want[i]) + floor);
    if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;  // NaN never passes
  }
  return worst;
}

}  // namespace tessel::cli::bench
