// profile::Session, op ranges and checked mode, on every backend: host ops with their shapes,
// allocator events, the Chrome trace and the table; on a GPU, kernels linked to their ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#if defined(TESSEL_HAVE_CUDA)
#include <cupti_callbacks.h>
#include <dlfcn.h>
#include <link.h>
#endif

#include "profile/recorder.hpp"
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
  if (device().is_cuda()) synchronize(device());  // no kernel from before the session is in flight
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
    // Every kernel of the session was launched inside an op, so each is linked to a recorded op
    // (CUPTI's launch callbacks noted its correlation id); the add kernel to the add op, not to
    // the user's range around it. The result's copy to the host is linked to its op too.
    EXPECT_TRUE(session.gpu_linked()) << session.cupti_status();
    EXPECT_TRUE(session.cupti_status().empty()) << session.cupti_status();
    std::map<std::uint64_t, const profile::OpEvent*> by_id;
    for (const auto& o : session.ops()) by_id[o.id] = &o;
    std::set<std::string> ops_with_kernels;
    int add_kernels = 0, dtoh = 0, dtoh_linked = 0;
    for (const auto& g : session.gpu()) {
      if (g.kind == profile::GpuEventKind::memcpy && g.name == "memcpy DtoH") {
        ++dtoh;
        if (g.op_id != 0) ++dtoh_linked;
      }
      if (g.kind == profile::GpuEventKind::kernel) {
        EXPECT_NE(g.op_id, 0u) << g.name << " (correlation " << g.correlation << ") is not linked to an op";
      }
      const auto it = by_id.find(g.op_id);
      if (g.op_id != 0) {
        EXPECT_NE(it, by_id.end()) << g.name << " is linked to op " << g.op_id << ", which was not recorded";
      }
      if (it != by_id.end() && g.kind == profile::GpuEventKind::kernel) ops_with_kernels.insert(it->second->name);
      if (g.kind != profile::GpuEventKind::kernel) continue;
      EXPECT_LT(g.start_ns, g.end_ns);
      if (g.op_id == op->id) ++add_kernels;
      if (g.name.rfind("tessel_add", 0) == 0) {
        EXPECT_EQ(g.op_id, op->id) << g.name;  // the JIT add kernel
      }
    }
    EXPECT_GE(add_kernels, 1);
    if (dtoh > 0) {
      EXPECT_GE(dtoh_linked, 1);
    }
    EXPECT_EQ(ops_with_kernels.count("user.step"), 0u) << "a kernel was linked to the outer range";
    EXPECT_EQ(ops_with_kernels.count("multiply"), 1u);
    EXPECT_EQ(ops_with_kernels.count("sum"), 1u);
  } else if (device().is_cuda() && std::getenv("TESSEL_UNDER_SANITIZER") == nullptr) {
    // compute-sanitizer holds CUPTI itself: the session then records host ops only and says so.
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

// The calls whose correlation ids are noted, by name from libcupti's callback table: every
// kernel launch, graph launch, copy and set of the runtime and the driver (also without a GPU).
TEST(ProfileCupti, LinkCallbacksCoverLaunchesCopiesAndSets) {
  std::string error;
  const std::vector<std::string> names = profile::detail::cupti_link_callback_names(&error);
  if (names.empty()) GTEST_SKIP() << "no libcupti: " << error;
  const std::set<std::string> have(names.begin(), names.end());
  for (const char* name :
       {"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernelExC_v11060",
        "cudaLaunchCooperativeKernel_v9000", "cudaGraphLaunch_v10000", "cudaGraphLaunch_ptsz_v10000",
        "cudaMemcpy_v3020", "cudaMemcpyAsync_v3020", "cudaMemcpyAsync_ptsz_v7000", "cudaMemcpy2DAsync_v3020",
        "cudaMemcpyPeerAsync_v4000", "cudaMemset_v3020", "cudaMemsetAsync_v3020", "cuLaunchKernel",
        "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch", "cuMemcpyAsync",
        "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD8Async",
        "cuMemsetD32Async"}) {
    EXPECT_EQ(have.count(name), 1u) << name << " is not among the linked calls";
  }
  for (const char* name : {"cudaLaunchHostFunc_v10000", "cuLaunchHostFunc", "cudaGraphAddMemcpyNode_v10000",
                           "cudaMalloc_v3020", "cuMemAlloc_v2", "cudaStreamSynchronize_v3020"}) {
    EXPECT_EQ(have.count(name), 0u) << name << " starts no GPU activity but is linked";
  }
}

// TESSEL_PROFILE_CUPTI for one scope (sessions read it when they start).
class CuptiSettingsEnv {
 public:
  explicit CuptiSettingsEnv(const char* value) {
    if (const char* old = std::getenv("TESSEL_PROFILE_CUPTI")) old_ = old;
    setenv("TESSEL_PROFILE_CUPTI", value, 1);
  }
  ~CuptiSettingsEnv() {
    if (old_) {
      setenv("TESSEL_PROFILE_CUPTI", old_->c_str(), 1);
    } else {
      unsetenv("TESSEL_PROFILE_CUPTI");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(ProfileCupti, SettingsParseAndRejectUnknownItems) {
  using S = profile::detail::CuptiSettings;
  const S defaults = profile::detail::parse_cupti_settings("");
  EXPECT_EQ(defaults.link, S::Link::all);
  EXPECT_EQ(defaults.activity, S::Activity::concurrent);
  EXPECT_FALSE(defaults.cupti_zeroes_buffers);
  EXPECT_FALSE(defaults.hw_trace);
  EXPECT_EQ(defaults.per_thread_buffers, -1);
  const S s = profile::detail::parse_cupti_settings(
      " link=launch, activity=serial,buffers=malloc , hw_trace=1,per_thread_buffers=0,link=off");
  EXPECT_EQ(s.link, S::Link::off);  // a later item wins
  EXPECT_EQ(s.activity, S::Activity::serial);
  EXPECT_TRUE(s.cupti_zeroes_buffers);
  EXPECT_TRUE(s.hw_trace);
  EXPECT_EQ(s.per_thread_buffers, 0);
  EXPECT_EQ(profile::detail::parse_cupti_settings("activity=off").activity, S::Activity::off);
  for (const char* bad : {"link", "link=some", "activity=on", "buffers=pinned", "hw_trace=yes", "per_thread_buffers=2",
                          "flush=10"}) {
    try {
      profile::detail::parse_cupti_settings(std::string("link=all,") + bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const ValueError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("TESSEL_PROFILE_CUPTI: '" + std::string(bad) + "'"), std::string::npos) << what;
    }
  }
}

// A malformed TESSEL_PROFILE_CUPTI fails the session's start (on every backend) and leaves no
// session behind.
TEST(ProfileSessionErrors, MalformedCuptiSettingsFailTheStart) {
  {
    CuptiSettingsEnv env("link=sometimes");
    try {
      profile::Session session;
      FAIL() << "a session started with TESSEL_PROFILE_CUPTI=link=sometimes";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("TESSEL_PROFILE_CUPTI: 'link=sometimes'"), std::string::npos) << e.what();
    }
    profile::SessionOptions host_only;
    host_only.gpu = false;  // CUPTI is not started, so its settings are not read
    profile::Session session(host_only);
    EXPECT_TRUE(session.recording());
  }
  profile::Session after;
  EXPECT_TRUE(after.recording());
}

// Every setting of TESSEL_PROFILE_CUPTI either links the add kernel to the add op or says in
// cupti_status why not; afterwards a default session links again (nothing is left enabled).
TEST(ProfileCupti, SettingsLinkKernelsOrSayWhyNot) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Array a = full({256}, 1.0, DType::float32, Device::cuda(0));
  (void)add(a, a);  // warm-up: compiled and loaded before any session
  synchronize(Device::cuda(0));
  struct Case {
    const char* settings;
    bool recorded, linked;
    const char* status;  // a part of cupti_status; "" when it must be empty
  };
  const Case cases[] = {{"buffers=mapped", true, true, ""},
                        {"buffers=malloc", true, true, ""},
                        {"link=launch", true, true, ""},
                        {"activity=serial", true, true, ""},
                        {"hw_trace=1", true, true, nullptr},  // applied on Blackwell; elsewhere cupti_status says so
                        {"link=off", true, false, "link=off"},
                        {"activity=off", false, false, "activity=off"},
                        {"", true, true, ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.settings);
    CuptiSettingsEnv env(c.settings);
    profile::Session session;
    const Array b = add(a, a);
    synchronize(Device::cuda(0));
    session.stop();
    if (!session.gpu_recorded() && c.recorded) GTEST_SKIP() << "no GPU activity: " << session.cupti_status();
    EXPECT_EQ(session.gpu_recorded(), c.recorded) << session.cupti_status();
    EXPECT_EQ(session.gpu_linked(), c.linked) << session.cupti_status();
    if (c.status && *c.status) {
      EXPECT_NE(session.cupti_status().find(c.status), std::string::npos) << session.cupti_status();
    } else if (c.status) {
      EXPECT_TRUE(session.cupti_status().empty()) << session.cupti_status();
    } else if (!session.cupti_status().empty()) {
      EXPECT_NE(session.cupti_status().find("hw_trace=1 was not applied"), std::string::npos)
          << session.cupti_status();
    }
    const profile::OpEvent* op = find_op(session, "add");
    ASSERT_NE(op, nullptr);
    int kernels = 0, linked = 0;
    for (const auto& g : session.gpu()) {
      if (g.kind != profile::GpuEventKind::kernel) continue;
      ++kernels;
      EXPECT_LT(g.start_ns, g.end_ns) << g.name;
      if (g.op_id == op->id) ++linked;
    }
    EXPECT_EQ(kernels, c.recorded ? 1 : 0);
    EXPECT_EQ(linked, c.linked ? 1 : 0);
  }
}

// More kernels than one 8 MiB activity buffer holds (about 38,800 kernel records): every one is
// handed over, once, and linked to its op.
TEST(ProfileCupti, RecordsBeyondOneBufferAreAllKept) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Array a = full({1}, 1.0, DType::float32, Device::cuda(0));
  const Array out = empty({1}, DType::float32, Device::cuda(0));
  (void)add(a, a, out);
  synchronize(Device::cuda(0));
  constexpr int kAdds = 45000;
  profile::Session session;
  for (int i = 0; i < kAdds; ++i) (void)add(a, a, out);
  synchronize(Device::cuda(0));
  session.stop();
  if (!session.gpu_recorded()) GTEST_SKIP() << "no GPU activity: " << session.cupti_status();
  std::set<std::uint64_t> add_ops;
  for (const auto& o : session.ops()) {
    if (o.name == "add") add_ops.insert(o.id);
  }
  ASSERT_EQ(add_ops.size(), std::size_t(kAdds));
  std::set<std::uint64_t> linked;
  int kernels = 0;
  for (const auto& g : session.gpu()) {
    if (g.kind != profile::GpuEventKind::kernel) continue;
    ++kernels;
    EXPECT_EQ(add_ops.count(g.op_id), 1u) << g.name << " (correlation " << g.correlation << ")";
    linked.insert(g.op_id);
  }
  EXPECT_EQ(kernels, kAdds);
  EXPECT_EQ(linked.size(), std::size_t(kAdds));
  EXPECT_EQ(session.dropped(), 0u);
}

// A graph's kernels carry the correlation id of its launch: they are linked to Graph.replay.
TEST(ProfileCupti, GraphReplayKernelsLinkToTheReplay) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  if (!device_allocator(0).options().caching) GTEST_SKIP() << "TESSEL_ALLOCATOR=direct: graph capture is refused";
  const Stream s = Stream::create(Device::cuda(0));
  const Array x = full({1000}, 1.5, DType::float32, Device::cuda(0));
  Array y = add(multiply(x, Scalar(2.0f), std::nullopt, s), Scalar(1.0f), std::nullopt, s);  // warm-up
  Graph g =
      Graph::capture(s, [&] { y = add(multiply(x, Scalar(2.0f), std::nullopt, s), Scalar(1.0f), std::nullopt, s); });
  s.synchronize();
  profile::Session session;
  g.replay(s);
  g.replay(s);
  s.synchronize();
  session.stop();
  if (!session.gpu_recorded()) GTEST_SKIP() << "no GPU activity: " << session.cupti_status();
  std::set<std::uint64_t> replays;
  for (const auto& o : session.ops()) {
    if (o.name == "Graph.replay") replays.insert(o.id);
  }
  ASSERT_EQ(replays.size(), 2u);
  int kernels = 0;
  for (const auto& e : session.gpu()) {
    if (e.kind != profile::GpuEventKind::kernel) continue;
    ++kernels;
    EXPECT_EQ(replays.count(e.op_id), 1u) << e.name << " (correlation " << e.correlation << ") has op " << e.op_id;
  }
  EXPECT_GE(kernels, 4);  // two kernels a replay
}

#if defined(TESSEL_HAVE_CUDA)
// Another CUPTI subscriber holds the Callback API (as Nsight does): the session still records
// the GPU activity, says that it cannot link it to ops, and the next session links again.
int find_cupti(struct dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name && std::string(info->dlpi_name).find("libcupti") != std::string::npos) {
    *static_cast<std::string*>(out) = info->dlpi_name;
    return 1;
  }
  return 0;
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

TEST(ProfileCupti, AnotherSubscriberLeavesActivitiesUnlinkedAndSaysSo) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Array a = full({64}, 1.0, DType::float32, Device::cuda(0));
  (void)add(a, a);  // warm-up
  {
    profile::Session first;  // loads libcupti
    if (!first.gpu_recorded()) GTEST_SKIP() << "no GPU activity: " << first.cupti_status();
  }
  std::string path;
  dl_iterate_phdr(find_cupti, &path);
  ASSERT_FALSE(path.empty()) << "libcupti is not loaded after a session recorded GPU activity";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);  // tessel's own copy of CUPTI
  ASSERT_NE(lib, nullptr) << dlerror();
  auto subscribe = reinterpret_cast<decltype(&cuptiSubscribe)>(dlsym(lib, "cuptiSubscribe"));
  auto unsubscribe = reinterpret_cast<decltype(&cuptiUnsubscribe)>(dlsym(lib, "cuptiUnsubscribe"));
  ASSERT_TRUE(subscribe && unsubscribe);
  CUpti_SubscriberHandle other = nullptr;
  if (const CUptiResult r = subscribe(&other, ignore_callback, nullptr); r != CUPTI_SUCCESS) {
    dlclose(lib);
    GTEST_SKIP() << "this test cannot hold CUPTI's Callback API itself (cuptiSubscribe: " << int(r) << ")";
  }

  profile::Session held;
  (void)add(a, a);
  held.stop();
  ASSERT_EQ(unsubscribe(other), CUPTI_SUCCESS);
  dlclose(lib);
  EXPECT_TRUE(held.gpu_recorded()) << held.cupti_status();
  EXPECT_FALSE(held.gpu_linked());
  EXPECT_NE(held.cupti_status().find("cannot be linked to the ops"), std::string::npos) << held.cupti_status();
  EXPECT_NE(held.cupti_status().find("cuptiSubscribe"), std::string::npos) << held.cupti_status();
  EXPECT_NE(held.table().find("cannot be linked"), std::string::npos) << held.table();
  int kernels = 0;
  for (const auto& e : held.gpu()) {
    if (e.kind != profile::GpuEventKind::kernel) continue;
    ++kernels;
    EXPECT_EQ(e.op_id, 0u) << e.name;
  }
  EXPECT_GE(kernels, 1);
  ASSERT_NE(find_op(held, "add"), nullptr);

  profile::Session again;  // the other subscriber is gone: linked again
  (void)add(a, a);
  again.stop();
  EXPECT_TRUE(again.gpu_linked()) << again.cupti_status();
  const profile::OpEvent* op = find_op(again, "add");
  ASSERT_NE(op, nullptr);
  bool linked = false;
  for (const auto& e : again.gpu()) linked = linked || (e.kind == profile::GpuEventKind::kernel && e.op_id == op->id);
  EXPECT_TRUE(linked);
}
#endif

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
