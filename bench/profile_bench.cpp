// What profiling costs and whether its GPU times are right (issue 21 targets, on the GPU):
//   1. host time added per op while a profile::Session records: a 1-element add, batches of
//      200 back to back, session on and off in alternating rounds (target <= 1.5 us per op),
//      split into rows measured in the same rounds: host op records only (SessionOptions::gpu =
//      false), CUPTI activity without the link callbacks (TESSEL_PROFILE_CUPTI=link=off), the
//      link callbacks without activity (activity=off), the full session (its first batch, and a
//      later batch of a session already recording), the alternatives that TESSEL_PROFILE_CUPTI
//      selects, and the floor: raw cuLaunchKernel of an empty kernel, bare and under a session;
//   2. kernel durations in the trace against CUDA-event timings of the same ops queued back to
//      back behind a held stream (add on 1e6..1e8 float32, a 4096^3 float32 matmul, a 1e7 sum):
//      medians, within 5% or 2 us;
//   3. a 10-second profile of the particle simulation at 1e6 particles: the trace is exported,
//      its size, event counts and dropped events are reported (the cap keeps it bounded).
// The cost with nothing listening against a build with the ranges compiled out is measured from
// Python (bench/peers/profile_ab.py, scripts/ab-bench.sh profile-ab), since it needs two builds.
// Results go to bench/results/<device>-<date>.json under "profile"; `--overhead` runs part 1
// only, and a run with TESSEL_PROFILE_CUPTI set (the process-wide per_thread_buffers, say) is
// recorded under a key naming it, beside the default run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/profile/hooks.hpp"  // profile::now_ns, the session's clock
#include "tessel/tessel.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

using namespace tessel;

namespace {

constexpr int kBatch = 200;

double host_us_per_op(const Array& x, const Array& y, const Array& out, const Stream& stream) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kBatch; ++i) add(x, y, out, stream);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kBatch;
  stream.synchronize();
  return us;
}

#if defined(TESSEL_HAVE_CUDA)
// The launch floor: cuLaunchKernel of an empty kernel straight from the driver (no op, no range,
// no device guard), the entry points found as jit::Kernel finds them.
class RawLaunch {
 public:
  explicit RawLaunch(Device device) : kernel_(R"(extern "C" __global__ void tessel_empty_kernel() {})", "tessel_empty_kernel") {
    const jit::Kernel k = kernel_.kernel(device);
    void* get_function = nullptr;
    void* launch = nullptr;
    cudaDriverEntryPointQueryResult q1{}, q2{};
    check(cudaGetDriverEntryPointByVersion("cuKernelGetFunction", &get_function, 12000, cudaEnableDefault, &q1) ==
                  cudaSuccess &&
              q1 == cudaDriverEntryPointSuccess &&
              cudaGetDriverEntryPointByVersion("cuLaunchKernel", &launch, 12000, cudaEnableDefault, &q2) ==
                  cudaSuccess &&
              q2 == cudaDriverEntryPointSuccess,
          "cudaGetDriverEntryPointByVersion(cuKernelGetFunction, cuLaunchKernel)");
    launch_ = reinterpret_cast<LaunchFn>(launch);
    DeviceGuard guard(device);
    check(reinterpret_cast<GetFunctionFn>(get_function)(&function_, static_cast<CUkernel>(k.handle())) == CUDA_SUCCESS,
          "cuKernelGetFunction(tessel_empty_kernel)");
  }
  double us_per_launch(const Stream& stream) const {
    const auto s = static_cast<CUstream>(stream.handle());
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    for (int i = 0; i < kBatch; ++i) ok = (launch_(function_, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr) == CUDA_SUCCESS) && ok;
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kBatch;
    check(ok, "cuLaunchKernel(tessel_empty_kernel)");
    stream.synchronize();
    return us;
  }

 private:
  using GetFunctionFn = CUresult (*)(CUfunction*, CUkernel);
  using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**);
  static void check(bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "profile_bench: %s failed\n", what);
      std::exit(1);
    }
  }
  jit::RawKernel kernel_;
  CUfunction function_ = nullptr;
  LaunchFn launch_ = nullptr;
};
#endif

// One row of the host-cost breakdown: per round, a batch without a session, then a batch while a
// session of this kind records; the row's figure is the median of the differences.
struct CostRow {
  std::string key;     // JSON key
  std::string label;   // printed
  bool gpu = true;     // SessionOptions::gpu
  std::string cupti;   // TESSEL_PROFILE_CUPTI items for the session (after the run's own)
  bool steady = false;  // time the session's second batch, not its first
  bool raw = false;     // raw launches (the floor) instead of adds
  std::vector<double> off, on, diff;
  std::size_t kernels = 0, unlinked = 0;  // of the timed batches: the speed must not come from unlinked kernels
  bool gpu_recorded = true, gpu_linked = true;
  std::string status;  // the last session's cupti_status
};

void set_cupti_env(const std::string& base, const std::string& items) {
  const std::string value = base.empty() ? items : items.empty() ? base : base + "," + items;
  if (value.empty()) {
    unsetenv("TESSEL_PROFILE_CUPTI");
  } else {
    setenv("TESSEL_PROFILE_CUPTI", value.c_str(), 1);
  }
}

nlohmann::json added_host_time(Device device, int rounds) {
  const Stream stream = current_stream(device);
  const Array x = full({1}, 1.5, DType::float32, device), y = full({1}, 2.0, DType::float32, device);
  const Array out = empty({1}, DType::float32, device);
  // The run's own TESSEL_PROFILE_CUPTI (process-wide settings) comes first in every session's.
  const char* env = std::getenv("TESSEL_PROFILE_CUPTI");
  const std::string base = env ? env : "";
  std::vector<CostRow> rows;
  auto row = [&](std::string key, std::string label) {
    rows.push_back({});
    rows.back().key = std::move(key);
    rows.back().label = std::move(label);
    return &rows.back();
  };
  row("full", "full session (first batch)");
  std::function<double()> raw_batch;
  if (device.is_cuda()) {
    row("full_steady", "full session, later batch")->steady = true;
    row("host_only", "host op records only (gpu=false)")->gpu = false;
    row("activity_only", "CUPTI activity, no links")->cupti = "link=off";
    row("links_only", "link callbacks, no activity")->cupti = "activity=off";
    row("buffers_malloc", "full, buffers=malloc")->cupti = "buffers=malloc";
    row("link_launch", "full, link=launch")->cupti = "link=launch";
    row("activity_serial", "full, activity=serial")->cupti = "activity=serial";
    row("hw_trace", "full, hw_trace=1")->cupti = "hw_trace=1";
    row("raw_launch", "raw cuLaunchKernel (off: the floor)")->raw = true;
#if defined(TESSEL_HAVE_CUDA)
    auto raw = std::make_shared<RawLaunch>(device);
    raw_batch = [raw, stream] { return raw->us_per_launch(stream); };
#endif
  }
  auto add_batch = [&] { return host_us_per_op(x, y, out, stream); };
  for (int i = 0; i < 5; ++i) {
    add_batch();
    if (raw_batch) raw_batch();
  }
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < rows.size(); ++k) {
      CostRow& c = rows[(k + static_cast<std::size_t>(r)) % rows.size()];  // no row always first
      const auto& batch = c.raw ? raw_batch : std::function<double()>(add_batch);
      const double a = batch();
      profile::SessionOptions options;
      options.gpu = c.gpu;
      set_cupti_env(base, c.cupti);
      double b = 0;
      {
        profile::Session session(options);
        if (c.steady) batch();
        const std::int64_t timed_from = profile::now_ns();
        b = batch();
        session.stop();
        c.gpu_recorded = c.gpu_recorded && session.gpu_recorded();
        c.gpu_linked = c.gpu_linked && session.gpu_linked();
        c.status = session.cupti_status();
        for (const auto& g : session.gpu()) {
          if (g.kind != profile::GpuEventKind::kernel || g.start_ns < timed_from) continue;
          ++c.kernels;
          if (g.op_id == 0 && !c.raw) ++c.unlinked;  // raw launches are outside any op
        }
      }
      c.off.push_back(a);
      c.on.push_back(b);
      c.diff.push_back(b - a);
    }
  }
  set_cupti_env(base, "");
  std::printf("host time added per %s (batches of %d, %d alternating rounds; median of on - off):\n",
              device.is_cuda() ? "op (1-element add)" : "op (1-element add, CPU backend)", kBatch, rounds);
  std::printf("  %-36s %8s %8s %8s %8s %8s  %s\n", "row", "off us", "on us", "added", "kernels", "unlinked",
              "status");
  nlohmann::json by_row = nlohmann::json::object();
  for (const CostRow& c : rows) {
    const double added = bench::median(c.diff);
    std::printf("  %-36s %8.3f %8.3f %8.3f %8zu %8zu  %s\n", c.label.c_str(), bench::median(c.off),
                bench::median(c.on), added, c.kernels, c.unlinked, c.status.c_str());
    by_row[c.key] = {{"off_us", bench::median(c.off)}, {"on_us", bench::median(c.on)}, {"added_us", added},
                     {"kernels", c.kernels},          {"unlinked_kernels", c.unlinked},
                     {"gpu_recorded", c.gpu_recorded}, {"gpu_linked", c.gpu_linked},
                     {"cupti", c.cupti},               {"status", c.status}};
  }
  const CostRow& full = rows.front();
  const double added = bench::median(full.diff);
  std::printf("profile on: %.3f us/op, off: %.3f us/op, added %.3f us/op (target <= 1.5); kernels recorded %zu, "
              "not linked to an op %zu\n",
              bench::median(full.on), bench::median(full.off), added, full.kernels, full.unlinked);
  nlohmann::json result = {{"off_us", bench::median(full.off)}, {"on_us", bench::median(full.on)},
                           {"added_us", added}, {"target_us", 1.5}, {"ok", added <= 1.5}, {"rounds", rounds},
                           {"batch", kBatch}, {"kernels", full.kernels}, {"unlinked_kernels", full.unlinked},
                           {"gpu_linked", full.gpu_linked}, {"rows", by_row}};
  if (!base.empty()) result["TESSEL_PROFILE_CUPTI"] = base;
  return result;
}

// Holds a stream until released, so the calls queued behind it run back to back on the GPU and
// CUDA events around them time the kernels rather than the host's submission: a 1e6-element add
// runs ~3 us on the H100, less than the host takes to submit one, so events around unheld calls
// measured the host (6.5 us per add against 2.8 us in the trace).
class StreamHold {
 public:
  explicit StreamHold(Device device)
      : flag_(Buffer::allocate_pinned(sizeof(int))),
        kernel_(R"(
extern "C" __global__ void tessel_hold_stream(volatile int* flag, long long max_cycles) {
  const long long start = clock64();
  while (*flag == 0 && clock64() - start < max_cycles) {
  }
})",
                "tessel_hold_stream") {
    (void)kernel_.kernel(device);  // compiled before any timing
  }
  void hold(const Stream& stream) {
    *static_cast<volatile int*>(flag_->data()) = 0;
    int* flag = static_cast<int*>(flag_->data());  // page-locked, so the GPU reads it directly
    const long long max_cycles = 4'000'000'000LL;  // about 2 s: a call that waits on the host cannot hang
    kernel_.launch(jit::Dim3(1), jit::Dim3(1), {flag, max_cycles}, 0, stream);
  }
  void release() { *static_cast<volatile int*>(flag_->data()) = 1; }

 private:
  std::shared_ptr<Buffer> flag_;
  jit::RawKernel kernel_;
};

// An op's GPU time, by CUDA events and by the trace, over calls queued back to back behind a
// StreamHold (so the GPU runs them without waiting for the host, and both clocks see the same
// gaps). Events: the batch's elapsed time over its calls, without a session and, for the same
// kernels the trace holds, with one recording. Trace: per call, the span from the first start to
// the last end of the activities its op (and the ops inside it) launched. The span, not the sum
// of the durations: an op of several kernels (sum of 1e7 float32 is a partials pass and a finish
// pass) keeps the GPU for its kernels and the gaps between them, and that is what events around
// it measure; the sum of the durations leaves those gaps out (2.05-2.87 us of the sum's 12 us on
// the H100). What remains between the two is the gap after each call's last kernel, which the
// events' per-call share includes (about 1 us: add 1e6, one kernel, traced 2.56 against 3.68 us).
// The sum of the durations (what the table's gpu columns add up) is reported beside it.
nlohmann::json trace_vs_events(const std::string& label, const std::function<Array()>& op, const Stream& stream) {
  constexpr int kRepeats = 30, kWarmup = 3, kBackToBack = 20;
  StreamHold hold(stream.device());
  using Window = std::pair<std::int64_t, std::int64_t>;  // host start/end of one call
  auto batch = [&](std::vector<Window>* windows) {
    Event start(stream.device()), end(stream.device());
    hold.hold(stream);
    start.record(stream);
    for (int i = 0; i < kBackToBack; ++i) {
      const std::int64_t t0 = profile::now_ns();
      (void)op();
      if (windows) windows->push_back({t0, profile::now_ns()});
    }
    end.record(stream);
    hold.release();
    end.synchronize();
    return start.elapsed_ms(end) / kBackToBack;
  };
  std::vector<double> per_call, per_call_traced;
  for (int r = 0; r < kWarmup + kRepeats; ++r) {
    const double ms = batch(nullptr);
    if (r >= kWarmup) per_call.push_back(ms);
  }
  std::vector<Window> windows;
  profile::Session session;
  for (int r = 0; r < kRepeats; ++r) per_call_traced.push_back(batch(&windows));
  session.stop();
  // The call each op belongs to: the one whose host window holds its start (nested ops too).
  std::map<std::uint64_t, std::size_t> call_of_op;
  for (const auto& o : session.ops()) {
    auto it = std::upper_bound(windows.begin(), windows.end(), Window{o.start_ns, INT64_MAX});
    if (it == windows.begin()) continue;
    --it;
    if (o.start_ns <= it->second) call_of_op[o.id] = static_cast<std::size_t>(it - windows.begin());
  }
  std::vector<std::int64_t> first(windows.size(), INT64_MAX), last(windows.size(), INT64_MIN), busy(windows.size(), 0);
  std::size_t activities = 0, unlinked = 0;
  for (const auto& g : session.gpu()) {
    if (g.op_id == 0) {
      if (g.name.rfind("tessel_hold_stream", 0) != 0) ++unlinked;  // the hold is launched outside the calls
      continue;
    }
    const auto it = call_of_op.find(g.op_id);
    if (it == call_of_op.end()) continue;  // the hold's own op
    ++activities;
    first[it->second] = std::min(first[it->second], g.start_ns);
    last[it->second] = std::max(last[it->second], g.end_ns);
    busy[it->second] += g.end_ns - g.start_ns;
  }
  std::vector<double> spans, sums;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    if (first[i] == INT64_MAX) continue;
    spans.push_back(double(last[i] - first[i]) * 1e-6);
    sums.push_back(double(busy[i]) * 1e-6);
  }
  const double event_ms = bench::median(per_call), event_traced_ms = bench::median(per_call_traced);
  const double trace_ms = bench::median(spans), trace_sum_ms = bench::median(sums);
  auto within = [](double a_ms, double b_ms) {
    const double diff_us = std::abs(a_ms - b_ms) * 1e3;
    return diff_us <= 2.0 || diff_us <= 0.05 * b_ms * 1e3;
  };
  const double diff_us = std::abs(trace_ms - event_traced_ms) * 1e3;
  const bool ok = spans.size() == windows.size() && unlinked == 0 && within(trace_ms, event_traced_ms);
  std::printf("%-24s events %9.4f ms (traced run %9.4f)  trace span %9.4f ms  diff %6.2f us (vs untraced %6.2f)  "
              "sum of durations %9.4f ms  %s%s\n",
              label.c_str(), event_ms, event_traced_ms, trace_ms, diff_us, std::abs(trace_ms - event_ms) * 1e3,
              trace_sum_ms, ok ? "ok" : "OUT OF TOLERANCE",
              unlinked ? fmt::format(" ({} activities not linked to an op)", unlinked).c_str() : "");
  return {{"case", label},
          {"event_ms", event_ms},
          {"event_traced_ms", event_traced_ms},
          {"trace_ms", trace_ms},
          {"trace_sum_ms", trace_sum_ms},
          {"diff_us", diff_us},
          {"diff_untraced_us", std::abs(trace_ms - event_ms) * 1e3},
          {"ok", ok},
          {"ok_untraced", within(trace_ms, event_ms)},
          {"calls", windows.size()},
          {"traced_calls", spans.size()},
          {"activities", activities},
          {"unlinked_activities", unlinked},
          {"gpu_recorded", session.gpu_recorded()},
          {"gpu_linked", session.gpu_linked()}};
}

nlohmann::json sim_profile(double seconds, const std::string& trace_path) {
  sim::BenchmarkSetup setup = sim::benchmark_setup(1000000);
  sim::Particles particles(setup.state, setup.config, Device::cuda(0));
  particles.step(5);
  synchronize(Device::cuda(0));
  profile::Session session;
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t steps = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    particles.step(10);
    steps += 10;
    synchronize(Device::cuda(0));
  }
  session.stop();
  session.export_chrome_trace(trace_path);
  const auto bytes = std::filesystem::file_size(trace_path);
  std::size_t unlinked = 0;
  for (const auto& g : session.gpu()) unlinked += g.op_id == 0 ? 1 : 0;
  std::printf("sim 1e6 particles, %.0f s: %lld steps, trace %s: %.1f MiB, %zu ops, %zu GPU activities (%zu not "
              "linked to an op), %zu memory, %llu dropped\n",
              seconds, static_cast<long long>(steps), trace_path.c_str(), double(bytes) / (1 << 20),
              session.ops().size(), session.gpu().size(), unlinked, session.memory().size(),
              static_cast<unsigned long long>(session.dropped()));
  return {{"seconds", seconds},
          {"steps", steps},
          {"trace_bytes", bytes},
          {"ops", session.ops().size()},
          {"gpu_activities", session.gpu().size()},
          {"memory_events", session.memory().size()},
          {"dropped", session.dropped()},
          {"max_events_per_kind", profile::SessionOptions{}.max_events},
          {"gpu_recorded", session.gpu_recorded()},
          {"gpu_linked", session.gpu_linked()},
          {"unlinked_gpu_activities", unlinked}};
}

int run(int argc, char** argv) {
  bool quick = false, overhead_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--overhead") {
      overhead_only = true;
    } else {
      std::fprintf(stderr, "usage: profile_bench [--quick] [--overhead]\n");
      return 2;
    }
  }
  // A run with its own CUPTI settings, or of part 1 only, is kept beside the default run's results.
  std::string key = overhead_only ? "profile_overhead" : "profile";
  if (const char* env = std::getenv("TESSEL_PROFILE_CUPTI"); env && *env) key += fmt::format("[TESSEL_PROFILE_CUPTI={}]", env);
  nlohmann::json results;
  if (!cuda_available()) {
    // The CPU backend: only the host cost (no kernels to compare).
    results["added_host_time_cpu"] = added_host_time(Device::cpu(), quick ? 5 : 21);
    std::printf("profile_bench: no CUDA device (%s): measured the CPU backend's host cost only\n",
                cuda_unavailable_reason().c_str());
    bench::write_results(key, results);
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const Stream stream = current_stream(gpu);
  results["device"] = device_properties(0).name;
  results["added_host_time"] = added_host_time(gpu, quick ? 5 : 41);
  if (overhead_only) {
    bench::write_results(key, results);
    return 0;
  }
  nlohmann::json cases = nlohmann::json::array();
  bool all_ok = true;
  for (std::int64_t n : {std::int64_t(1000000), std::int64_t(10000000), std::int64_t(100000000)}) {
    const Array a = full({n}, 1.0, DType::float32, gpu), b = full({n}, 2.0, DType::float32, gpu);
    const Array c = empty({n}, DType::float32, gpu);
    cases.push_back(trace_vs_events(fmt::format("add {:.0e} float32", double(n)), [&] { return add(a, b, c, stream); },
                                    stream));
  }
  {
    const Array a = random::uniform({4096, 4096}, -1, 1, DType::float32, gpu);
    const Array b = random::uniform({4096, 4096}, -1, 1, DType::float32, gpu);
    cases.push_back(trace_vs_events("matmul 4096^3 float32", [&] { return matmul(a, b, {}, Array(), stream); }, stream));
    const Array x = random::uniform({10000000}, -1, 1, DType::float32, gpu);
    cases.push_back(trace_vs_events("sum 1e7 float32", [&] { return sum(x, std::nullopt, false, stream); }, stream));
  }
  for (const auto& c : cases) all_ok = all_ok && c["ok"].get<bool>();
  results["trace_vs_events"] = cases;
  results["trace_vs_events_ok"] = all_ok;
  const std::string trace_path = (std::filesystem::temp_directory_path() / "tessel-profile-sim.json").string();
  results["sim_10s"] = sim_profile(quick ? 2.0 : 10.0, trace_path);
  bench::write_results(key, results);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "profile_bench: %s\n", e.what());
    return 1;
  }
}
