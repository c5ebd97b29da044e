// profile::Session, op ranges and checked mode, on every backend: host ops with their shapes,
// allocator events, the Chrome trace and the table; on a GPU, kernels linked to their ops.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tessel/tessel.hpp"
#include "temp_dir.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

class ProfileSession : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

const profile::OpEvent* find_op(const profile::Session& s, const std::string& name) {
  for (const auto& e : s.ops()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST_P(ProfileSession, RecordsOpsWithShapesMemoryAndExports) {
  TESSEL_SKIP_UNAVAILABLE(device());
  random::Generator gen(7);
  const Array a = gen.uniform({3, 5}, -1, 1, DType::float32, device());
  const Array b = gen.uniform({5}, -1, 1, DType::float32, device());
  profile::Session session;
  EXPECT_TRUE(profile::ranges_active());
  Array c;
  {
    TESSEL_RANGE("user.step");
    c = add(a, b);
    c = sum(multiply(c, c));
  }
  const double host = c.to(Device::cpu()).item<float>();
  EXPECT_TRUE(std::isfinite(host));
  session.stop();
  EXPECT_FALSE(session.recording());

  const profile::OpEvent* op = find_op(session, "add");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->args, "float32[3,5], float32[5]");
  EXPECT_EQ(op->device, device().str());
  EXPECT_GT(op->id, 0u);
  EXPECT_LE(op->start_ns, op->end_ns);
  const profile::OpEvent* user = find_op(session, "user.step");
  ASSERT_NE(user, nullptr);
  EXPECT_EQ(op->depth, user->depth + 1);  // add ran inside the user's range
  EXPECT_LE(user->start_ns, op->start_ns);
  EXPECT_GE(user->end_ns, op->end_ns);
  EXPECT_NE(find_op(session, "sum"), nullptr);
  EXPECT_NE(find_op(session, "multiply"), nullptr);

  // Every result allocated in the session shows up as an allocator event with the pool's totals.
  bool saw_alloc = false;
  for (const auto& m : session.memory()) {
    if (m.kind == profile::MemoryEventKind::alloc || m.kind == profile::MemoryEventKind::cache_hit ||
        m.kind == profile::MemoryEventKind::cache_miss) {
      saw_alloc = true;
      EXPECT_GT(m.bytes, 0);
      EXPECT_GE(m.reserved, m.allocated);
    }
  }
  EXPECT_TRUE(saw_alloc);

  if (device().is_cuda() && session.gpu_recorded()) {
    // The add kernel is on a stream track, linked to the add op by its correlation id.
    bool linked = false;
    for (const auto& g : session.gpu()) {
      if (g.op_id == op->id && g.kind == profile::GpuEventKind::kernel) {
        linked = true;
        EXPECT_LT(g.start_ns, g.end_ns);
      }
    }
    EXPECT_TRUE(linked);
  } else if (device().is_cuda()) {
    ADD_FAILURE() << "no GPU activity recorded: " << session.cupti_status();
  }

  const std::string table = session.table("gpu_time", "op");
  EXPECT_NE(table.find("add"), std::string::npos) << table;
  EXPECT_NE(table.find("user.step"), std::string::npos) << table;
  const std::string by_args = session.table("cpu_time", "op_args");
  EXPECT_NE(by_args.find("add(float32[3,5], float32[5])"), std::string::npos) << by_args;
  EXPECT_THROW(session.table("bogus"), ValueError);

  TempDir dir;
  const std::string path = dir.path + "/trace.json";
  session.export_chrome_trace(path);
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  bool host_add = false, counter = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "add" && e["pid"] == 1) host_add = true;
    if (e["ph"] == "C") counter = true;
  }
  EXPECT_TRUE(host_add);
  EXPECT_TRUE(counter);
}

TEST_P(ProfileSession, CapBoundsTheRecordsAndCountsTheRest) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array a = full({4}, 1.0, DType::float32, device());
  profile::SessionOptions options;
  options.max_events = 3;
  profile::Session session(options);
  for (int i = 0; i < 10; ++i) (void)add(a, a);
  session.stop();
  EXPECT_EQ(session.ops().size(), 3u);
  EXPECT_GE(session.dropped(), 7u);
  EXPECT_NE(session.table().find("dropped"), std::string::npos);
}

TEST_P(ProfileSession, CheckedModeNamesTheOpThatMadeNaN) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array a = full({2, 3}, -1.0, DType::float32, device());
  profile::set_checks("nan,sync");
  try {
    (void)add(a, a);  // finite: passes
    (void)log(a);
    profile::set_checks(0u);
    FAIL() << "log of negative numbers passed the nan check";
  } catch (const ValueError& e) {
    profile::set_checks(0u);
    const std::string what = e.what();
    EXPECT_NE(what.find("checked mode (nan): log(float32[2,3])"), std::string::npos) << what;
    EXPECT_NE(what.find("produced 6 NaN/Inf values"), std::string::npos) << what;
  }
  EXPECT_EQ(profile::checks(), 0u);
  (void)log(a);  // off again: no check
}

INSTANTIATE_TEST_SUITE_P(All, ProfileSession, ::testing::ValuesIn(all_backends()),
                         [](const ::testing::TestParamInfo<Device>& info) { return device_label(info.param); });

TEST(ProfileSessionErrors, SessionsDoNotNest) {
  profile::Session outer;
  try {
    profile::Session inner;
    FAIL() << "a nested session started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sessions do not nest"), std::string::npos) << e.what();
  }
  outer.stop();
  profile::Session after;  // the first one stopped: a new one may start
  EXPECT_TRUE(after.recording());
}

TEST(ProfileSessionErrors, UnwritableTracePathNamesThePath) {
  profile::Session session;
  try {
    session.export_chrome_trace("/proc/tessel-no-such-dir/trace.json");
    FAIL() << "wrote to an unwritable path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '/proc/tessel-no-such-dir/trace.json'"), std::string::npos)
        << e.what();
  }
}

TEST(ProfileSessionErrors, WithoutCuptiHostOpsStillRecord) {
  profile::SessionOptions options;
  options.gpu = false;
  profile::Session session(options);
  (void)add(full({2}, 1.0, DType::float32, Device::cpu()), 1.0);
  session.stop();
  EXPECT_FALSE(session.gpu_recorded());
  EXPECT_FALSE(session.cupti_status().empty());
  EXPECT_NE(find_op(session, "add"), nullptr);
}

TEST(ProfileChecks, ParsesItemsAndRejectsUnknownOnes) {
  EXPECT_EQ(profile::parse_checks("sync, nan"), profile::check_sync | profile::check_nan);
  EXPECT_EQ(profile::parse_checks("bounds"), unsigned(profile::check_bounds));
  EXPECT_EQ(profile::parse_checks(""), 0u);
  EXPECT_EQ(profile::parse_checks("off"), 0u);
  try {
    profile::parse_checks("sync,nans", "TESSEL_CHECK");
    FAIL() << "an unknown item parsed";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("TESSEL_CHECK: unknown check 'nans'"), std::string::npos) << e.what();
  }
  profile::set_checks("sync");
  EXPECT_EQ(profile::checks_str(), "sync");
  EXPECT_TRUE(profile::ranges_active());
  profile::set_checks("");
  EXPECT_EQ(profile::checks(), 0u);
}

}  // namespace
}  // namespace tessel::testing
