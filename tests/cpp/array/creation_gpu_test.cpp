// arange and linspace on a CUDA device are generated there (src/backend/cuda/copy.cu) with the CPU
// backend's formulas: the same bytes as the CPU for every dtype, including the NumPy corner
// cases (float steps into integer dtypes, endpoint handling, an underflowing step, flooring).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "array_testing.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/device.hpp"
#include "tessel/ops/cast.hpp"

namespace tessel {
namespace {

void expect_same_bytes(const Array& cpu, const Array& gpu, const std::string& what) {
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what;
  ASSERT_EQ(cpu.dtype(), gpu.dtype()) << what;
  const Array back = gpu.to(Device::cpu());
  back.wait();  // data() is a raw read: wait for the copy to land
  ASSERT_TRUE(back.is_contiguous());
  ASSERT_TRUE(cpu.is_contiguous());
  if (std::memcmp(cpu.data(), back.data(), static_cast<std::size_t>(cpu.nbytes())) != 0) {
    ADD_FAILURE() << what << ": CPU " << cpu.str() << "\nGPU " << back.str();
  }
}

TEST(CreationOnDevice, ArangeAndLinspaceMatchTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Device gpu = testing::test_gpu();
  const std::vector<DType> dtypes = {DType::bool_,   DType::int8,     DType::uint8,   DType::int32,   DType::int64,
                                     DType::uint64,  DType::float16,  DType::bfloat16, DType::float32, DType::float64,
                                     DType::complex64, DType::complex128};
  using Make = std::function<Array(DType, Device)>;
  const std::vector<std::pair<std::string, Make>> cases = {
      {"arange(0, 100003, 1)", [](DType d, Device v) { return arange(0, 100003, 1, d, v); }},
      {"arange(5, -7, -3)", [](DType d, Device v) { return arange(5, -7, -3, d, v); }},
      {"arange(0.5, 3, 0.5)", [](DType d, Device v) { return arange(0.5, 3, 0.5, d, v); }},
      {"arange(-1, 1, 0.1)", [](DType d, Device v) { return arange(-1, 1, 0.1, d, v); }},
      {"arange(0.3, 77777.7, 0.7)", [](DType d, Device v) { return arange(0.3, 77777.7, 0.7, d, v); }},
      {"linspace(0, 1, 5)", [](DType d, Device v) { return linspace(0, 1, 5, true, d, v); }},
      {"linspace(-3, 3, 7)", [](DType d, Device v) { return linspace(-3, 3, 7, true, d, v); }},
      {"linspace(-2.5, 9.25, 100001)", [](DType d, Device v) { return linspace(-2.5, 9.25, 100001, true, d, v); }},
      {"linspace(1, 0, 10, endpoint=false)", [](DType d, Device v) { return linspace(1, 0, 10, false, d, v); }},
      {"linspace(4, 9, 1)", [](DType d, Device v) { return linspace(4, 9, 1, true, d, v); }},
      {"linspace(0, 1e-320, 6)", [](DType d, Device v) { return linspace(0, 1e-320, 6, true, d, v); }},  // step underflows
  };
  for (DType d : dtypes) {
    for (const auto& [name, make] : cases) {
      Array cpu;
      try {
        cpu = make(d, Device::cpu());
      } catch (const Error&) {
        EXPECT_ANY_THROW(make(d, gpu)) << name << " " << dtype_name(d);  // same rejection
        continue;
      }
      expect_same_bytes(cpu, make(d, gpu), name + " " + dtype_name(d));
    }
  }
  // Complex bounds for linspace.
  expect_same_bytes(linspace(std::complex<double>(1, -2), std::complex<double>(-3, 5), 1001, true, DType::complex128, Device::cpu()),
                    linspace(std::complex<double>(1, -2), std::complex<double>(-3, 5), 1001, true, DType::complex128, gpu),
                    "complex linspace");
  // Zero-length results and a strided write target through the public API.
  EXPECT_EQ(arange(3, 3, 1, DType::float32, gpu).size(), 0);
  EXPECT_EQ(linspace(0, 1, 0, true, DType::float32, gpu).size(), 0);
}

}  // namespace
}  // namespace tessel
