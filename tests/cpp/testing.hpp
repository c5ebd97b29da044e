#pragma once
// Shared test helpers: one test body runs over backend x dtype.
//
//   class MyTest : public tessel::testing::BackendDTypeTest {};
//   TEST_P(MyTest, Works) { TESSEL_SKIP_UNAVAILABLE(device()); ... dtype() ... }
//   INSTANTIATE_TEST_SUITE_P(All, MyTest, tessel::testing::backend_dtype_cases(tessel::testing::all_dtypes()),
//                            tessel::testing::case_name);
//
// Every backend is always listed; a CUDA case on a machine without a GPU skips with the reason,
// so skips are visible in the test report. Random inputs come from seeded_rng(), whose seed is
// printed on failure (SCOPED_TRACE) and can be fixed with TESSEL_TEST_SEED.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tessel/array/dtype.hpp"
#include "tessel/core/device.hpp"

namespace tessel::testing {

// cpu, and cuda:0 (which skips when there is no GPU).
inline std::vector<Device> all_backends() { return {Device::cpu(), Device::cuda(0)}; }
// Only the backends that can run here.
inline std::vector<Device> available_backends() {
  std::vector<Device> devices{Device::cpu()};
  if (cuda_available()) devices.push_back(Device::cuda(0));
  return devices;
}

inline std::vector<DType> all_dtypes() {
  std::vector<DType> dtypes;
  for (const DTypeInfo& info : dtype_table) dtypes.push_back(info.dtype);
  return dtypes;
}

#define TESSEL_SKIP_UNAVAILABLE(device)                                                       \
  do {                                                                                        \
    if ((device).is_cuda() && !::tessel::cuda_available()) {                                  \
      GTEST_SKIP() << "no CUDA device: " << ::tessel::cuda_unavailable_reason();              \
    }                                                                                         \
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
