#pragma once
// Shared test helpers: one test body runs over backend x dtype.
//
//   class MyTest : public tessel::testing::BackendDTypeTest {};
//   TEST_P(MyTest, Works) { TESSEL_SKIP_UNAVAILABLE(device()); ... dtype() ... }
//   INSTANTIATE_TEST_SUITE_P(All, MyTest, tessel::testing::backend_dtype_cases(tessel::testing::all_dtypes()),
//                            tessel::testing::case_name);
//
// The backends are the CPU and each test GPU (test_gpus(): cuda:0, cuda:1 and any further GPU, or
// those TESSEL_TEST_DEVICES lists). Every one is always listed; a case whose GPU is missing skips
// with the reason, so skips are visible in the test report. Random inputs come from seeded_rng(), whose seed is
// printed on failure (SCOPED_TRACE) and can be fixed with TESSEL_TEST_SEED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tessel/array/dtype.hpp"
#include "tessel/core/device.hpp"

namespace tessel::testing {

// The CUDA devices GPU tests run on: those TESSEL_TEST_DEVICES lists (indices or cuda:N, comma
// separated: "1" runs every GPU test on cuda:1 alone, as the memcheck of device 1 does), else
// cuda:0, cuda:1 and every further visible GPU. cuda:1 is always listed so that a one-GPU machine
// reports it as skipped.
inline std::vector<Device> test_gpus() {
  std::vector<Device> devices;
  if (const char* list = std::getenv("TESSEL_TEST_DEVICES"); list != nullptr && *list != '\0') {
    std::string text(list);
    for (std::size_t start = 0; start <= text.size();) {
      const std::size_t end = std::min(text.find(',', start), text.size());
      std::string item = text.substr(start, end - start);
      if (item.rfind("cuda:", 0) == 0) item = item.substr(5);
      if (!item.empty()) devices.push_back(Device::cuda(std::stoi(item)));
      start = end + 1;
    }
    if (!devices.empty()) return devices;
  }
  const int count = std::max(2, cuda_available() ? device_count() : 0);
  for (int i = 0; i < count; ++i) devices.push_back(Device::cuda(i));
  return devices;
}
// Where a test that needs one GPU runs: the first of test_gpus().
inline Device test_gpu() { return test_gpus().front(); }

// cpu, then each test GPU (a GPU this machine lacks skips with the reason).
inline std::vector<Device> all_backends() {
  std::vector<Device> devices{Device::cpu()};
  for (Device gpu : test_gpus()) devices.push_back(gpu);
  return devices;
}
// Only the backends that can run here.
inline std::vector<Device> available_backends() {
  std::vector<Device> devices{Device::cpu()};
  for (Device gpu : test_gpus()) {
    if (cuda_available() && gpu.index < device_count()) devices.push_back(gpu);
  }
  return devices;
}

// When the first test GPU is not cuda:0 (TESSEL_TEST_DEVICES=1), it becomes the current device
// for the whole test program, so that tests using the current device (raw kernels, default
// streams, ops without a device) run on it too. Registered once per program (an inline variable).
class CurrentTestGpu : public ::testing::Environment {
 public:
  void SetUp() override {
    const Device gpu = test_gpu();
    if (gpu.index != 0 && cuda_available() && gpu.index < device_count()) set_current_device(gpu.index);
  }
};
inline ::testing::Environment* const current_test_gpu = ::testing::AddGlobalTestEnvironment(new CurrentTestGpu);

// Why `device` cannot run here ("" when it can).
inline std::string unavailable_reason(Device device) {
  if (!device.is_cuda()) return "";
  if (!cuda_available()) return "no CUDA device: " + cuda_unavailable_reason();
  if (device.index >= device_count()) {
    return device.str() + " is not present: this machine has " + std::to_string(device_count()) + " CUDA device" +
           (device_count() == 1 ? "" : "s");
  }
  return "";
}

inline std::vector<DType> all_dtypes() {
  std::vector<DType> dtypes;
  for (const DTypeInfo& info : dtype_table) dtypes.push_back(info.dtype);
  return dtypes;
}

#define TESSEL_SKIP_UNAVAILABLE(device)                                                       \
  do {                                                                                        \
    const std::string tessel_skip_reason = ::tessel::testing::unavailable_reason(device);     \
    if (!tessel_skip_reason.empty()) GTEST_SKIP() << tessel_skip_reason;                      \
  } while (0)

// Skips unless cuda:0 and cuda:1 are both present.
#define TESSEL_SKIP_UNLESS_TWO_GPUS()                                                                      \
  do {                                                                                                     \
    if (!::tessel::cuda_available() || ::tessel::device_count() < 2) {                                     \
      GTEST_SKIP() << "needs two CUDA devices, found " << (::tessel::cuda_available() ? ::tessel::device_count() : 0); \
    }                                                                                                      \
  } while (0)

using BackendDType = std::tuple<Device, DType>;

inline std::vector<BackendDType> backend_dtype_cases(const std::vector<DType>& dtypes,
                                                     const std::vector<Device>& devices = all_backends()) {
  std::vector<BackendDType> cases;
  for (Device device : devices) {
    for (DType dtype : dtypes) cases.emplace_back(device, dtype);
  }
  return cases;
}

inline std::string device_label(Device device) {
  return device.is_cpu() ? "cpu" : "cuda" + std::to_string(device.index);
}

// "cpu_float32" for a test name (gtest allows only [A-Za-z0-9_]).
inline std::string case_name(const ::testing::TestParamInfo<BackendDType>& info) {
  return device_label(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
}

class BackendDTypeTest : public ::testing::TestWithParam<BackendDType> {
 protected:
  Device device() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

// A backend-only parameterization.
class BackendTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};
inline std::string backend_name(const ::testing::TestParamInfo<Device>& info) { return device_label(info.param); }

// A fresh seed per call (or TESSEL_TEST_SEED), recorded in the failure message.
inline std::uint64_t test_seed() {
  if (const char* fixed = std::getenv("TESSEL_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  return (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

#define TESSEL_SEEDED_RNG(name)                                                         \
  const std::uint64_t name##_seed = ::tessel::testing::test_seed();                    \
  SCOPED_TRACE("random seed " + std::to_string(name##_seed) + " (set TESSEL_TEST_SEED to repeat)"); \
  std::mt19937_64 name(name##_seed)

// Expects `fn` to throw `Exception` whose message contains every one of `parts`.
template <class Exception, class Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception, none was thrown";
  } catch (const Exception& error) {
    const std::string message = error.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "message \"" << message << "\" lacks \"" << part << "\"";
    }
  } catch (const std::exception& other) {
    ADD_FAILURE() << "threw the wrong exception type: " << other.what();
  }
}

}  // namespace tessel::testing
