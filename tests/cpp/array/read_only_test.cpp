// Read-only arrays: the flag belongs to the storage (every view shares it), and every write path
// into a caller's array refuses it with a ValueError naming the op, the dtype, shape and device.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tessel/ops/cast.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/fuse.hpp"
#include "tessel/ops/matmul.hpp"
#include "tessel/pipeline/pipeline.hpp"
#include "testing.hpp"

namespace tessel {
namespace {

using testing::expect_error;

class ReadOnlyTest : public testing::BackendTest {};

// The parts every refusal names: the op, the reason, and the array's dtype, shape and device.
std::vector<std::string> refusal(const char* op, const Array& a) {
  return {std::string(op) + ": output array is read-only", dtype_name(a.dtype()), shape_str(a.shape()),
          a.device().str()};
}

TEST(ReadOnly, FlagIsSharedByEveryViewAndCopiesAreWritable) {
  Array a = arange(6, DType::float32, Device::cpu()).reshape({2, 3});
  const Array earlier = a[1];
  EXPECT_FALSE(a.is_read_only());
  EXPECT_FALSE(earlier.is_read_only());
  a.set_read_only();
  EXPECT_TRUE(a.is_read_only());
  EXPECT_TRUE(earlier.is_read_only());  // views made before
  EXPECT_TRUE(a.T().is_read_only());    // and after
  EXPECT_TRUE(a.index({Slice(none, none, -1), 1}).is_read_only());
  EXPECT_TRUE(a.reshape({6}).is_read_only());
  EXPECT_TRUE(a.broadcast_to({4, 2, 3}).is_read_only());
  EXPECT_FALSE(a.copy().is_read_only());
  EXPECT_FALSE(astype(a, DType::float64).is_read_only());
  EXPECT_FALSE(Array().is_read_only());
  expect_error<ValueError>([] { Array().set_read_only(); }, {"set_read_only", "undefined"});
}

TEST(ReadOnly, ForeignMemoryWrappedReadOnly) {
  std::vector<float> host{1, 2, 3, 4};
  auto buffer = Buffer::wrap(host.data(), 16, Device::cpu(), MemoryKind::host, nullptr);
  const Array a(std::make_shared<detail::Storage>(buffer, /*read_only=*/true), {4}, {1}, 0, DType::float32);
  EXPECT_TRUE(a.is_read_only());
  expect_error<ValueError>([&] { fill(a, 9); }, refusal("fill", a));
  expect_error<ValueError>([&] { add(a, a, a); }, refusal("add", a));
  EXPECT_EQ(host, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(add(a, a).to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));  // reading is fine
}

TEST_P(ReadOnlyTest, EveryWritePathRefuses) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array x = arange(4, DType::float32, device());
  Array ro = ones({4}, DType::float32, device());
  ro.set_read_only();
  const Array row = ro.index({Slice(1, 3)});  // a view of it

  expect_error<ValueError>([&] { copyto(ro, x); }, refusal("copyto", ro));
  expect_error<ValueError>([&] { copyto(row, zeros({2}, DType::float32, device())); }, refusal("copyto", row));
  expect_error<ValueError>([&] { fill(ro, 7); }, refusal("fill", ro));
  expect_error<ValueError>([&] { fill(row, 7); }, refusal("fill", row));
  // Elementwise ops, out= and in place (out is an input too), with arrays and scalars.
  expect_error<ValueError>([&] { add(x, x, ro); }, refusal("add", ro));
  expect_error<ValueError>([&] { multiply(ro, 2.0, ro); }, refusal("multiply", ro));
  expect_error<ValueError>([&] { subtract(1.0, x, ro); }, refusal("subtract", ro));
  expect_error<ValueError>([&] { negative(x, ro); }, refusal("negative", ro));
  expect_error<ValueError>([&] { where(greater(x, 1.0), x, x, ro); }, refusal("where", ro));
  expect_error<ValueError>([&] { clip(x, 0.0, 1.0, ro); }, refusal("clip", ro));
  expect_error<ValueError>([&] { clip(x, x, x, ro); }, refusal("clip", ro));
  expect_error<ValueError>([&] { add(astype(x, DType::float64), x, ro); }, refusal("add", ro));  // through a cast
  const FusedKernel fused = fuse([](const std::vector<Sym>& v) { return v[0] * v[1] + 1.0; }, 2);
  expect_error<ValueError>([&] { fused({x, x}, ro); }, refusal("fused", ro));

  // matmul: out and aux.
  Array m_ro = zeros({2, 2}, DType::float32, device());
  m_ro.set_read_only();
  const Array m = ones({2, 2}, DType::float32, device());
  expect_error<ValueError>([&] { matmul(m, m, {}, m_ro); }, refusal("matmul", m_ro));
  MatmulOptions with_aux;
  with_aux.epilogue = MatmulEpilogue::relu;
  with_aux.aux = m_ro;
  expect_error<ValueError>([&] { matmul(m, m, with_aux); }, refusal("matmul", m_ro));

  // Nothing was written.
  EXPECT_EQ(ro.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(m_ro.to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  // Reading a read-only array still works, as an input anywhere.
  EXPECT_EQ(add(ro, x).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  Array dst = zeros({4}, DType::float32, device());
  copyto(dst, ro);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(matmul(m_ro, m).to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
}

TEST_P(ReadOnlyTest, PipelineOutputRefuses) {
  TESSEL_SKIP_UNAVAILABLE(device());
  PipelineOptions options;
  options.device = device();
  Pipeline pipeline([](const Array& chunk, const Stream& stream) { return add(chunk, 1.0, std::nullopt, stream); },
                    options);
  const Array input = arange(8, DType::float32, Device::cpu()).reshape({4, 2});
  Array output = zeros({4, 2}, DType::float32, Device::cpu());
  output.set_read_only();
  expect_error<ValueError>([&] { pipeline.run(input, output); }, refusal("Pipeline.run", output));
  EXPECT_EQ(output.to_vector<float>(), std::vector<float>(8, 0.0f));
}

INSTANTIATE_TEST_SUITE_P(All, ReadOnlyTest, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

}  // namespace
}  // namespace tessel
