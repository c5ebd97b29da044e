#include <gtest/gtest.h>
#include "tessel/core/config.hpp"
TEST(Config, Placeholder) { EXPECT_EQ(1, 1); }
