#include <gtest/gtest.h>

#include "tessel/array/shape.hpp"
#include "tessel/core/error.hpp"
#include "testing.hpp"

namespace tessel {
namespace {

TEST(Shape, NumelAndStrides) {
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(numel({2, 0, 5}), 0);
  EXPECT_EQ(numel({2, 3, 4}), 24);
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), Strides{});
  testing::expect_error<ValueError>([] { numel({1LL << 40, 1LL << 40}); }, {"(1099511627776, 1099511627776)"});
  testing::expect_error<ShapeError>([] { numel({2, -1}); }, {"negative dimension -1"});
  EXPECT_EQ(shape_str({5}), "(5,)");
  EXPECT_EQ(shape_str({}), "()");
  EXPECT_EQ(shape_str({2, 3}), "(2, 3)");
}

TEST(Shape, Contiguity) {
  EXPECT_TRUE(is_contiguous({2, 3}, {3, 1}));
  EXPECT_FALSE(is_contiguous({2, 3}, {1, 2}));
  EXPECT_TRUE(is_f_contiguous({2, 3}, {1, 2}));
  EXPECT_TRUE(is_contiguous({2, 1, 3}, {3, 99, 1}));  // size-one axes don't count
  EXPECT_TRUE(is_contiguous({0, 3}, {7, 7}));
  EXPECT_FALSE(is_contiguous({3}, {-1}));
}

TEST(Shape, Broadcasting) {
  EXPECT_EQ(broadcast_shapes({3, 1, 5}, {4, 1}), (Shape{3, 4, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2}), (Shape{2}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 4}), (Shape{0, 4}));
  EXPECT_EQ(broadcast_shapes(std::vector<Shape>{{2, 1}, {1, 3}, {3}}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes(std::vector<Shape>{}), Shape{});
  EXPECT_EQ(broadcast_shapes(std::vector<Shape>{{4, 1, 2}, {4, 1, 2}, {4, 1, 2}}), (Shape{4, 1, 2}));
  // The pointer form: equal shapes, a 0-d among them, more shapes than fit on the stack, a mismatch.
  const Shape a{2, 1}, b{1, 3}, scalar{}, bad{4};
  const Shape* mixed[] = {&a, &b, &scalar};
  EXPECT_EQ(broadcast_shape_list(mixed, 3, "op"), (Shape{2, 3}));
  std::vector<const Shape*> many(20, &a);
  EXPECT_EQ(broadcast_shape_list(many.data(), many.size(), "op"), a);
  many.push_back(&b);
  EXPECT_EQ(broadcast_shape_list(many.data(), many.size(), "op"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shape_list(mixed, 0, "op"), Shape{});
  const Shape* clash[] = {&a, &b, &bad};
  testing::expect_error<ShapeError>([&] { broadcast_shape_list(clash, 3, "fused"); }, {"fused", "(2, 3)", "(4,)"});
  testing::expect_error<ShapeError>([] { broadcast_shapes({2, 3}, {4, 3}, "add"); },
                                    {"add", "(2, 3)", "(4, 3)", "axis 0", "sizes 2 and 4"});
  testing::expect_error<ShapeError>([] { broadcast_shapes({5, 2, 3}, {4}); }, {"(5, 2, 3)", "(4,)", "axis 2"});
  EXPECT_EQ(broadcast_strides({3, 1}, {1, 1}, {2, 3, 4}), (Strides{0, 1, 0}));
  testing::expect_error<ShapeError>([] { broadcast_strides({3}, {1}, {4}); }, {"(3,)", "(4,)", "axis 0"});
}

TEST(Shape, CollapseDims) {
  // A contiguous 3-d layout becomes one axis.
  CollapsedDims all = collapse_dims({2, 3, 4}, {{12, 4, 1}, {12, 4, 1}});
  EXPECT_EQ(all.shape, (Shape{24}));
  EXPECT_EQ(all.strides[0], (Strides{1}));
  // A transposed operand keeps its axes apart.
  CollapsedDims mixed = collapse_dims({2, 3}, {{3, 1}, {1, 2}});
  EXPECT_EQ(mixed.shape, (Shape{2, 3}));
  // A sliced row stride merges only the inner axes; size-one axes disappear.
  CollapsedDims sliced = collapse_dims({2, 1, 3, 4}, {{24, 5, 4, 1}});
  EXPECT_EQ(sliced.shape, (Shape{2, 12}));
  EXPECT_EQ(sliced.strides[0], (Strides{24, 1}));
  // Negative strides merge as well.
  CollapsedDims reversed = collapse_dims({2, 3}, {{-3, -1}});
  EXPECT_EQ(reversed.shape, (Shape{6}));
  EXPECT_EQ(reversed.strides[0], (Strides{-1}));
  EXPECT_EQ(collapse_dims({}, {{}}).shape, (Shape{1}));
  EXPECT_EQ(collapse_dims({4, 0}, {{0, 1}}).shape, (Shape{0}));
}

TEST(Shape, NormalizeAxis) {
  EXPECT_EQ(normalize_axis(-1, 3, "sum"), 2);
  testing::expect_error<IndexError>([] { normalize_axis(3, 3, "sum"); }, {"sum", "axis 3", "dimension 3"});
}

}  // namespace
}  // namespace tessel
