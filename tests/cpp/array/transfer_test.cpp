// Transfers between host and device: synchronous and asynchronous, staging through pinned
// memory, pending-write events, copies between GPUs, and a copy of more than 2^31 elements.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "array_testing.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"
#include "tessel/ops/cast.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessel {
namespace {

class Transfers : public testing::BackendDTypeTest {};

TEST_P(Transfers, RoundTripThroughEveryBackend) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{3, 0, 2}, Shape{7}, Shape{3, 5, 2}}) {
    SCOPED_TRACE(shape_str(shape));
    const std::vector<testing::Value> values = testing::random_values(rng, dtype(), numel(shape));
    const Array host = testing::make_array(values, shape, dtype(), Device::cpu());
    const Array moved = host.to(device());
    EXPECT_EQ(moved.device(), device());
    EXPECT_EQ(moved.shape(), shape);
    EXPECT_EQ(testing::read_values(moved), values);
    const Array back = moved.to(Device::cpu());
    EXPECT_EQ(testing::read_values(back), values);
    // A non-contiguous view moves as its elements in C order.
    if (shape.size() == 3 && numel(shape) > 0) {
      const Array view = moved.index({Slice(none, none, -1)}).T();
      const Array returned = view.to(Device::cpu());
      if (device().is_cuda()) {
        EXPECT_TRUE(returned.is_contiguous());
      } else {
        EXPECT_EQ(returned.buffer(), view.buffer());  // to() the same device returns the array itself
      }
      EXPECT_EQ(testing::read_values(returned), testing::read_values(view));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, Transfers, ::testing::ValuesIn(testing::backend_dtype_cases(testing::all_dtypes())),
                         testing::case_name);

#if defined(TESSEL_HAVE_CUDA)

#define REQUIRE_CUDA()                                                              \
  do {                                                                              \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason(); \
  } while (0)

TEST(CudaTransfers, AsyncHostToDeviceIsStagedAndPending) {
  REQUIRE_CUDA();
  const Stream stream = Stream::create(testing::test_gpu());
  std::vector<float> host(1 << 22);
  std::iota(host.begin(), host.end(), 0.0f);
  // Hold the stream so the copy cannot finish before we look: from_host must return anyway.
  Event gate(testing::test_gpu(), false);
  const Stream blocker = Stream::create(testing::test_gpu());
  std::vector<float> big(1 << 24, 1.0f);
  const Array slow = from_vector(big, {static_cast<std::int64_t>(big.size())}, testing::test_gpu(), blocker);
  gate.record(blocker);
  stream.wait(gate);
  const Array device_array = from_vector(host, {static_cast<std::int64_t>(host.size())}, testing::test_gpu(), stream);
  // The caller's pageable memory may be reused at once: it was staged.
  std::fill(host.begin(), host.end(), -1.0f);
  const std::vector<float> read = device_array.to_vector<float>();  // waits for the pending copy
  for (std::size_t i = 0; i < read.size(); i += 4099) ASSERT_EQ(read[i], static_cast<float>(i));
  EXPECT_EQ(slow.to_vector<float>()[123], 1.0f);
}

TEST(CudaTransfers, AsyncDeviceToHostLandsInPinnedMemoryAndReadsWait) {
  REQUIRE_CUDA();
  const Stream stream = Stream::create(testing::test_gpu());
  const Array source = arange(0, 1 << 24, 1, DType::float32, testing::test_gpu(), stream);
  const Array host = source.to(Device::cpu(), stream);
  EXPECT_EQ(host.device(), Device::cpu());
  EXPECT_EQ(host.buffer()->kind(), MemoryKind::pinned_host);
  const std::vector<float> values = host.to_vector<float>();
  for (std::size_t i = 0; i < values.size(); i += 65537) ASSERT_EQ(values[i], static_cast<float>(i));
  EXPECT_FALSE(host.storage()->has_pending_write());
}

TEST(CudaTransfers, CopyBetweenStreamsOrdersOnPendingWrite) {
  REQUIRE_CUDA();
  const Stream first = Stream::create(testing::test_gpu());
  const Stream second = Stream::create(testing::test_gpu());
  const Array a = full({1 << 20}, 3, DType::int32, testing::test_gpu(), first);
  const Array b = a.copy(second);  // must wait for the fill on `first`
  const std::vector<std::int32_t> values = b.to_vector<std::int32_t>();
  for (std::size_t i = 0; i < values.size(); i += 1001) ASSERT_EQ(values[i], 3);
}

TEST(CudaTransfers, BetweenTwoGpus) {
  REQUIRE_CUDA();
  if (device_count() < 2) {
    GTEST_SKIP() << "needs two CUDA devices, found " << device_count();
  }
  const Array a = arange(0, 1000, 1, DType::float64, Device::cuda(0));
  const Array b = a.index({Slice(none, none, -1)}).to(Device::cuda(1));
  EXPECT_EQ(b.device(), Device::cuda(1));
  const std::vector<double> values = b.to_vector<double>();
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], 999.0 - static_cast<double>(i));
  const Array c = b.to(Device::cuda(0), current_stream(Device::cuda(1)));
  EXPECT_EQ(c.to_vector<double>(), values);
}

TEST(CudaTransfers, StridedCopyOfMoreThan2To31Elements) {
  REQUIRE_CUDA();
  const std::int64_t count = (std::int64_t{1} << 31) + 4096;  // int8: 2 GiB + a bit per array
  std::size_t free_bytes = 0, total_bytes = 0;
  TESSEL_SKIP_UNAVAILABLE(testing::test_gpu());
  {
    DeviceGuard guard(testing::test_gpu());
    cudaMemGetInfo(&free_bytes, &total_bytes);
  }
  const std::int64_t needed = 2 * (2 * count) + (std::int64_t{1} << 30);
  if (static_cast<std::int64_t>(free_bytes) < needed) {
    GTEST_SKIP() << "needs " << needed << " free bytes on " << testing::test_gpu().str() << ", has " << free_bytes;
  }
  // A (count, 2) int8 array; column 1 is a strided view with 2^31+ elements, so the kernel
  // needs 64-bit indexing.
  const Array source = empty({count, 2}, DType::int8, testing::test_gpu());
  fill(source.index({Slice(), 0}), 1);
  fill(source.index({Slice(), 1}), 2);
  fill(source.index({Slice(count - 1, count), 1}), 5);
  const Array column = source.index({Slice(), 1}).copy();
  EXPECT_EQ(column.size(), count);
  EXPECT_EQ(column[0].item<int>(), 2);
  EXPECT_EQ(column[std::int64_t{1} << 31].item<int>(), 2);
  EXPECT_EQ(column[count - 1].item<int>(), 5);
  const Array reversed = source.index({Slice(none, none, -1), 1}).copy();
  EXPECT_EQ(reversed[0].item<int>(), 5);
  EXPECT_EQ(reversed[count - 1].item<int>(), 2);
}

#endif

}  // namespace
}  // namespace tessel
