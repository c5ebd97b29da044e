// sim::benchmark_setup: the issue 8 configuration that sim_bench, `tessel bench` and Python share.
#include <gtest/gtest.h>

#include <cmath>

#include "tessel/sim/particles.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

TEST(SimBenchmarkSetup, IsTheDocumentedConfiguration) {
  const sim::BenchmarkSetup s = sim::benchmark_setup(1000);
  const double side = std::cbrt(1000 / 1e6);  // the density of 1e6 particles in the unit box
  ASSERT_EQ(s.state.size(), 1000);
  EXPECT_NEAR(s.config.box_hi[0], side, 1e-12);
  EXPECT_TRUE(s.config.walls);
  EXPECT_EQ(s.config.model, sim::ContactModel::linear);
  EXPECT_EQ(s.config.stiffness, 1000.0);
  EXPECT_EQ(s.config.damping_ratio, 0.3);
  EXPECT_EQ(s.config.dt, 1e-4);
  EXPECT_LT(s.config.gravity[2], 0.0);
  for (std::int64_t i = 0; i < s.state.size(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    EXPECT_FLOAT_EQ(s.state.radius[k], 0.004f);
    for (float c : {s.state.x[k], s.state.y[k], s.state.z[k]}) {
      EXPECT_GE(c, 0.0f);
      EXPECT_LE(c, static_cast<float>(side));
    }
    for (float v : {s.state.vx[k], s.state.vy[k], s.state.vz[k]}) EXPECT_LE(std::abs(v), 0.05f);
  }
  expect_error<ValueError>([] { sim::benchmark_setup(0); }, {"benchmark_setup", "positive"});
}

}  // namespace
}  // namespace tessel::testing
