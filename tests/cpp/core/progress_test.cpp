// ProgressBar: off draws nothing, on draws into a log one line per tenth, and the last update is
// always drawn.
#include <gtest/gtest.h>

#include <string>

#include "tessel/core/progress.hpp"

namespace tessel {
namespace {

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(ProgressBar, OffDrawsNothing) {
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar("job", 100, ProgressMode::off);
    EXPECT_FALSE(bar.enabled());
    for (int i = 0; i <= 100; ++i) bar.update(i, "note");
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(ProgressBar, OnWritesALinePerTenthIntoALogAndAlwaysTheEnd) {
  ::testing::internal::CaptureStderr();  // not a terminal: one line per tenth
  {
    ProgressBar bar("job", 1000, ProgressMode::on);
    EXPECT_TRUE(bar.enabled());
    for (int i = 0; i <= 1000; ++i) bar.update(i, "rate 1.0");
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_lines(err), 11) << err;  // 0%, 10%, ..., 100%
  EXPECT_NE(err.find("job ["), std::string::npos) << err;
  EXPECT_NE(err.find("100%"), std::string::npos) << err;
  EXPECT_NE(err.find("rate 1.0"), std::string::npos) << err;
}

TEST(ProgressBar, AutomaticFollowsTesselProgress) {
  ::setenv("TESSEL_PROGRESS", "1", 1);
  EXPECT_TRUE(ProgressBar("job", 10).enabled());
  ::setenv("TESSEL_PROGRESS", "0", 1);
  EXPECT_FALSE(ProgressBar("job", 10).enabled());
  ::unsetenv("TESSEL_PROGRESS");
}

}  // namespace
}  // namespace tessel
