// getitem / setitem with index arrays and masks, take, take_along_axis, put_along_axis and
// nonzero: one body over backend x dtype against a host reference on fresh random values,
// including strided and reversed inputs, broadcast index arrays, zero-size and the errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "array/array_testing.hpp"
#include "backend/indexing.hpp"
#include "jit/jit_test_util.hpp"
#include "tessel/jit/compiler.hpp"
#include "tessel/ops/indexing.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

class IndexingTest : public BackendDTypeTest {};

Array int64_array(const std::vector<std::int64_t>& v, const Shape& shape, Device device) {
  return from_vector(v, shape, device);
}
Array bool_array(const std::vector<bool>& v, const Shape& shape, Device device) {
  std::vector<unsigned char> bytes(v.begin(), v.end());
  return from_host(bytes.data(), shape, DType::bool_, device);
}

// x (3, 4, 5) of random values, viewed reversed along axis 0 and strided along axis 2.
struct Input {
  Array x;
  std::vector<Value> values;  // C order of x's view
  Value at(std::int64_t i, std::int64_t j, std::int64_t k) const { return values[static_cast<std::size_t>((i * 4 + j) * 5 + k)]; }
};

Input make_input(std::mt19937_64& rng, DType dt, Device device) {
  const Array base = make_array(random_values(rng, dt, 3 * 4 * 10), {3, 4, 10}, dt, device);
  Input in;
  in.x = base.index({Slice(none, none, -1), Slice(), Slice(1, none, 2)});
  in.values = read_values(in.x);
  return in;
}

TEST_P(IndexingTest, IntegerArraysBroadcastAndTranspose) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  const Array rows = int64_array({0, -1, 2}, {3, 1}, device());
  const Array cols = int64_array({1, -2}, {2}, device());
  // x[rows, cols]: (3, 2, 5).
  Array r = getitem(in.x, {rows, cols});
  ASSERT_EQ(r.shape(), (Shape{3, 2, 5}));
  EXPECT_TRUE(r.is_contiguous());
  const std::vector<Value> got = read_values(r);
  const std::int64_t ri[3] = {0, 2, 2}, ci[2] = {1, 2};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int k = 0; k < 5; ++k) EXPECT_TRUE(same_value(got[static_cast<std::size_t>((a * 2 + b) * 5 + k)], in.at(ri[a], ci[b], k)));
  // x[rows, :, cols]: separated by a slice, the index dimensions go first: (3, 2, 4).
  r = getitem(in.x, {rows, Slice(), int64_array({4, 0}, {2}, device())});
  ASSERT_EQ(r.shape(), (Shape{3, 2, 4}));
  const std::vector<Value> sep = read_values(r);
  const std::int64_t ki[2] = {4, 0};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int j = 0; j < 4; ++j) EXPECT_TRUE(same_value(sep[static_cast<std::size_t>((a * 2 + b) * 4 + j)], in.at(ri[a], j, ki[b])));
  // An integer next to an index array counts as one: x[1, :, cols] -> (2, 4).
  EXPECT_EQ(getitem(in.x, {1, Slice(), cols}).shape(), (Shape{2, 4}));
  EXPECT_EQ(getitem(in.x, {Slice(), cols, 1}).shape(), (Shape{3, 2}));
}

TEST_P(IndexingTest, MasksSelectAndAssign) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  std::vector<bool> m(60);
  std::int64_t count = 0;
  for (std::size_t i = 0; i < m.size(); ++i) count += (m[i] = (rng() % 2) == 0);
  const Array mask = bool_array(m, {3, 4, 5}, device());
  const Array selected = getitem(in.x, {mask});
  ASSERT_EQ(selected.shape(), (Shape{count}));
  const std::vector<Value> got = read_values(selected);
  std::size_t n = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i]) {
      EXPECT_TRUE(same_value(got[n++], in.values[i])) << "element " << i;
    }
  }
  // A 2-d mask over the leading axes, then a slice: x[m2, 1:] -> (count2, 4) of the last axis.
  std::vector<bool> m2(12);
  std::int64_t count2 = 0;
  for (std::size_t i = 0; i < m2.size(); ++i) count2 += (m2[i] = (rng() % 3) != 0);
  const Array rows = getitem(in.x, {bool_array(m2, {3, 4}, device()), Slice(1, none)});
  ASSERT_EQ(rows.shape(), (Shape{count2, 4}));
  const std::vector<Value> row_values = read_values(rows);
  n = 0;
  for (std::int64_t i = 0; i < 12; ++i) {
    if (!m2[static_cast<std::size_t>(i)]) continue;
    for (std::int64_t k = 1; k < 5; ++k) EXPECT_TRUE(same_value(row_values[n++], in.at(i / 4, i % 4, k)));
  }
  // x[m] = scalar writes exactly the selected elements.
  Array y = in.x.copy();
  const Value v = random_values(rng, dtype(), 1)[0];
  setitem(y, {mask}, scalar_of(v, dtype()));
  const std::vector<Value> after = read_values(y);
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_TRUE(same_value(after[i], m[i] ? v : in.values[i])) << i;
  // x[m] = array of the selected count.
  Array z = in.x.copy();
  const std::vector<Value> fresh = random_values(rng, dtype(), count);
  setitem(z, {mask}, make_array(fresh, {count}, dtype(), device()));
  const std::vector<Value> z_values = read_values(z);
  n = 0;
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_TRUE(same_value(z_values[i], m[i] ? fresh[n++] : in.values[i]));
}

TEST_P(IndexingTest, SetitemWithIntegerArrays) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  Array y = in.x.copy();
  const std::vector<Value> fresh = random_values(rng, dtype(), 2 * 5);
  // y[[2, -3], 1] = fresh (2, 5)
  setitem(y, {int64_array({2, -3}, {2}, device()), 1}, make_array(fresh, {2, 5}, dtype(), device()));
  const std::vector<Value> after = read_values(y);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 5; ++k) {
        Value want = in.at(i, j, k);
        if (j == 1 && i == 2) want = fresh[static_cast<std::size_t>(k)];
        if (j == 1 && i == 0) want = fresh[static_cast<std::size_t>(5 + k)];
        EXPECT_TRUE(same_value(after[static_cast<std::size_t>((i * 4 + j) * 5 + k)], want));
      }
}

TEST_P(IndexingTest, TakeTakeAlongAxisPutAlongAxis) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  const Array t = take(in.x, int64_array({4, 0, -1}, {3}, device()), 2);
  ASSERT_EQ(t.shape(), (Shape{3, 4, 3}));
  const std::vector<Value> tv = read_values(t);
  const std::int64_t ks[3] = {4, 0, 4};
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (int c = 0; c < 3; ++c) EXPECT_TRUE(same_value(tv[static_cast<std::size_t>((i * 4 + j) * 3 + c)], in.at(i, j, ks[c])));
  const Array flat = take(in.x, int64_array({59, 7}, {2}, device()));
  const std::vector<Value> fv = read_values(flat);
  EXPECT_TRUE(same_value(fv[0], in.values[59]));
  EXPECT_TRUE(same_value(fv[1], in.values[7]));
  // take_along_axis along axis 1 with indices (3, 2, 1) broadcast over the last axis.
  std::vector<std::int64_t> idx(6);
  for (auto& v : idx) v = static_cast<std::int64_t>(rng() % 4);
  const Array along = take_along_axis(in.x, int64_array(idx, {3, 2, 1}, device()), 1);
  ASSERT_EQ(along.shape(), (Shape{3, 2, 5}));
  const std::vector<Value> av = read_values(along);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t k = 0; k < 5; ++k)
        EXPECT_TRUE(same_value(av[static_cast<std::size_t>((i * 2 + j) * 5 + k)], in.at(i, idx[static_cast<std::size_t>(i * 2 + j)], k)));
  // put_along_axis writes one value per (i, k) at row idx[i].
  Array y = in.x.copy();
  const std::vector<Value> fresh = random_values(rng, dtype(), 3 * 5);
  std::vector<std::int64_t> one(3);
  for (auto& v : one) v = static_cast<std::int64_t>(rng() % 4);
  put_along_axis(y, int64_array(one, {3, 1, 1}, device()), make_array(fresh, {3, 1, 5}, dtype(), device()), 1);
  const std::vector<Value> yv = read_values(y);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 5; ++k) {
        const Value want = j == one[static_cast<std::size_t>(i)] ? fresh[static_cast<std::size_t>(i * 5 + k)] : in.at(i, j, k);
        EXPECT_TRUE(same_value(yv[static_cast<std::size_t>((i * 4 + j) * 5 + k)], want));
      }
}

TEST_P(IndexingTest, Nonzero) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  std::vector<Value> values = random_values(rng, dtype(), 24);
  for (std::size_t i = 0; i < values.size(); i += 3) values[i] = 0;
  const Array x = make_array(values, {2, 3, 4}, dtype(), device());
  const std::vector<Array> nz = nonzero(x);
  ASSERT_EQ(nz.size(), 3u);
  std::vector<std::vector<std::int64_t>> coords(3);
  for (int d = 0; d < 3; ++d) coords[static_cast<std::size_t>(d)] = nz[static_cast<std::size_t>(d)].to_vector<std::int64_t>();
  std::size_t n = 0;
  for (std::int64_t i = 0; i < 24; ++i) {
    if (values[static_cast<std::size_t>(i)] == Value(0)) continue;
    ASSERT_LT(n, coords[0].size());
    EXPECT_EQ(coords[0][n], i / 12);
    EXPECT_EQ(coords[1][n], (i / 4) % 3);
    EXPECT_EQ(coords[2][n], i % 4);
    ++n;
  }
  EXPECT_EQ(n, coords[0].size());
  EXPECT_EQ(nonzero(zeros({0, 3}, dtype(), device()))[0].shape(), (Shape{0}));
}

TEST_P(IndexingTest, Errors) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array x = zeros({3, 4}, dtype(), device());
  expect_error<IndexError>([&] { getitem(x, {bool_array({true, false, true, true}, {4}, device())}); },
                           {"boolean index of shape (4,)", "(3,)"});
  expect_error<IndexError>([&] { getitem(x, {zeros({2}, DType::float32, device())}); }, {"integer", "float32"});
  expect_error<IndexError>([&] { getitem(x, {int64_array({0, 3}, {2}, device())}); },
                           {"index 3 is out of bounds for axis 0 with size 3"});
  expect_error<IndexError>([&] { setitem(x, {Slice(), int64_array({-5}, {1}, device())}, Scalar(1)); },
                           {"index -5 is out of bounds for axis 1 with size 4"});
  expect_error<IndexError>([&] { take(x, int64_array({4}, {1}, device()), 1); },
                           {"take", "index 4 is out of bounds for axis 1 with size 4"});
  expect_error<IndexError>([&] { take_along_axis(x, int64_array({3}, {1, 1}, device()), 0); },
                           {"take_along_axis", "out of bounds for axis 0 with size 3"});
  expect_error<IndexError>([&] { getitem(x, {int64_array({0}, {1}, device()), 1, 2}); }, {"too many indices"});
  expect_error<IndexError>([&] { getitem(x, {int64_array({0, 1}, {2}, device()), int64_array({0, 1, 2}, {3}, device())}); },
                           {"could not be broadcast together", "(2,)", "(3,)"});
  expect_error<ValueError>([&] { nonzero(zeros({}, dtype(), device())); }, {"nonzero", "0-d"});
  // Still usable after the failures.
  EXPECT_EQ(getitem(x, {int64_array({2, -1}, {2}, device())}).shape(), (Shape{2, 4}));
}

#if defined(TESSEL_HAVE_CUDA)
// Every kind of generated gather / scatter / check kernel compiles under NVRTC (no GPU needed),
// for every dtype, in both layouts (and index widths for float32), with plain and mask index operands.
TEST(IndexingKernels, GeneratedSourcesCompile) {
  TESSEL_REQUIRE_NVRTC();
  for (DType dt : all_dtypes()) {
    for (DType index_dtype : {DType::int64, DType::uint8, DType::int32}) {
      if (index_dtype != DType::int64 && dt != DType::float32) continue;  // index dtypes: one element dtype
      backend::GatherProblem p;
      p.dtype = dt;
      backend::IndexOperand plain;
      plain.dtype = index_dtype;
      plain.axes = {{5, 3}};
      backend::IndexOperand mask;
      mask.dtype = DType::int64;
      mask.from_mask = true;
      mask.axes = {{2, 7}, {3, 1}};
      p.indices = {plain, mask};
      for (backend::cuda::IndexKernel kind :
           {backend::cuda::IndexKernel::gather, backend::cuda::IndexKernel::scatter, backend::cuda::IndexKernel::check}) {
        for (bool scalar : {false, true}) {
          if (scalar && kind == backend::cuda::IndexKernel::check) continue;
          p.value_is_scalar = scalar;
          // Gathers read the source through a strided pointer operand, or by address when every
          // result axis comes from the indices.
          p.base_strides = {0, scalar ? 0 : 4, 0};
          std::vector<jit::ElementwiseSpec> specs = {backend::cuda::index_kernel_spec(kind, p)};
          if (kind == backend::cuda::IndexKernel::scatter && index_dtype == DType::int64) {
            specs.push_back(backend::cuda::masked_assign_spec(dt, scalar));
          }
          for (jit::ElementwiseSpec& spec : specs)
          for (int layout = 0; layout < 3; ++layout) {
            if (layout == 1 && dt != DType::float32) continue;  // 32-bit index math: one element dtype
            spec.layout = layout == 0 ? jit::ElementwiseLayout::contiguous : jit::ElementwiseLayout::strided;
            spec.rank = layout == 2 ? 3 : 1;
            spec.index32 = layout == 1;
            jit::CompileRequest r;
            r.source = jit::generate_elementwise_source(spec);
            r.name = jit::elementwise_kernel_name(spec);
            r.arch = jit::test::kTestArch;
            try {
              EXPECT_FALSE(jit::compile_to_cubin(r).cubin.empty());
            } catch (const CompileError& e) {
              ADD_FAILURE() << e.what() << "\n----\n" << r.source;
            }
          }
        }
      }
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(All, IndexingTest, ::testing::ValuesIn(backend_dtype_cases(all_dtypes())), case_name);

}  // namespace
}  // namespace tessel::testing
