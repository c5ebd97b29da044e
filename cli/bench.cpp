// `tessel bench [--quick] [--only NAME] [--json FILE] [--trace FILE] [--no-record]`: runs the suite, prints the
// table, and records the results in bench/results/<device>-<date>.json under "suite".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "bench_suite.hpp"
#include "commands.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/core/version.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/profile/session.hpp"

namespace tessel::cli {
namespace {

struct BenchOptions {
  bool quick = false;
  std::vector<std::string> only;
  std::string json_path;
  std::string trace_path;
  bool record = true;
};

nlohmann::json row_json(const bench::Row& r) {
  nlohmann::json j{{"workload", r.workload}, {"variant", r.variant}, {"status", r.status}, {"note", r.note}};
  if (r.status == "ok") {
    j.update({{"ms", r.ms}, {"rate", r.rate}, {"unit", r.unit}, {"ceiling", r.ceiling}, {"pct_of_ceiling", r.pct_of_ceiling}});
  }
  if (!r.extra.empty()) j["extra"] = r.extra;
  return j;
}

void print_table(const std::vector<bench::Row>& rows) {
  std::printf("%-22s %-26s %10s %14s %-22s %s\n", "workload", "variant", "time ms", "rate", "of ceiling", "note");
  for (const bench::Row& r : rows) {
    if (r.status != "ok") {
      std::printf("%-22s %-26s %10s %14s %-22s %s\n", r.workload.c_str(), r.variant.c_str(), r.status.c_str(), "", "",
                  r.note.c_str());
      continue;
    }
    const std::string rate = fmt::format("{:.1f} {}", r.rate, r.unit);
    const std::string pct = r.ceiling.empty() ? std::string() : fmt::format("{:.1f}% {}", r.pct_of_ceiling, r.ceiling);
    std::printf("%-22s %-26s %10.4f %14s %-22s %s\n", r.workload.c_str(), r.variant.c_str(), r.ms, rate.c_str(),
                pct.c_str(), r.note.c_str());
  }
}

int run_bench(const BenchOptions& options) {
  const std::vector<bench::Workload> workloads = bench::all_workloads();
  std::vector<const bench::Workload*> selected;
  for (const bench::Workload& w : workloads) {
    if (options.only.empty() || std::find(options.only.begin(), options.only.end(), w.name) != options.only.end()) {
      selected.push_back(&w);
    }
  }
  for (const std::string& name : options.only) {
    const bool known = std::any_of(workloads.begin(), workloads.end(), [&](const bench::Workload& w) { return w.name == name; });
    if (!known) {
      std::string valid;
      for (const bench::Workload& w : workloads) valid += "\n  " + w.name + ": " + w.description;
      throw ValueError("bench: unknown workload '" + name + "'; valid names are:" + valid);
    }
  }

  bench::Context ctx{cuda_available() ? Device::cuda(0) : Device::cpu(), Stream::cpu(), options.quick, {}};
  ctx.stream = current_stream(ctx.device);
  if (ctx.device.is_cpu()) {
    std::printf("tessel bench: no CUDA device (%s): running the table on the CPU backend\n",
                cuda_unavailable_reason().c_str());
  } else {
    std::printf("tessel bench on %s (%s)\n", device_properties(0).name.c_str(), ctx.device.str().c_str());
  }

  ProgressBar progress("bench", static_cast<std::int64_t>(selected.size()) + 1);
  progress.update(0, "ceilings");
  ctx.ceilings = bench::measure_ceilings(ctx);
  std::printf("ceilings: copy %.1f GB/s (read + write)", ctx.ceilings.copy_GBps);
  if (ctx.ceilings.gemm_bf16_TFLOPs > 0) std::printf(", bf16 GEMM %.1f TFLOP/s", ctx.ceilings.gemm_bf16_TFLOPs);
  if (ctx.ceilings.gemm_fp32_TFLOPs > 0) std::printf(", fp32 GEMM %.1f TFLOP/s", ctx.ceilings.gemm_fp32_TFLOPs);
  if (ctx.ceilings.h2d_GBps > 0) std::printf(", pinned H2D %.1f / D2H %.1f GB/s", ctx.ceilings.h2d_GBps, ctx.ceilings.d2h_GBps);
  std::printf("\n\n");

  // --trace: one profile session over the workloads, each inside a range named by the workload.
  std::unique_ptr<profile::Session> session;
  if (!options.trace_path.empty()) {
    std::FILE* probe = std::fopen(options.trace_path.c_str(), "w");
    if (!probe) throw ValueError("bench: cannot write --trace file '" + options.trace_path + "'");
    std::fclose(probe);
    session = std::make_unique<profile::Session>();
  }
  std::vector<bench::Row> rows;
  std::int64_t done = 1;
  for (const bench::Workload* w : selected) {
    progress.update(done, w->name);
    try {
      const std::string range_name = "bench." + w->name;
      TESSEL_RANGE(range_name.c_str());
      for (bench::Row& r : w->run(ctx)) rows.push_back(std::move(r));
    } catch (const std::exception& e) {
      rows.push_back(bench::failed_row(w->name, "", e.what()));
    }
    ++done;
  }
  progress.finish();
  print_table(rows);
  if (session) {
    session->export_chrome_trace(options.trace_path);
    std::printf("\ntrace: %s (%zu ops, %zu GPU activities%s)\n", options.trace_path.c_str(), session->ops().size(),
                session->gpu().size(), session->gpu_recorded() ? "" : "; host ops only");
    std::printf("%s", session->table("gpu_time", "op", 15).c_str());
  }

  nlohmann::json out{{"tessel", version()},
                     {"device", ctx.device.is_cuda() ? device_properties(0).name : std::string("cpu")},
                     {"backend", ctx.device.str()},
                     {"quick", options.quick},
                     {"ceilings", ctx.ceilings.to_json()},
                     {"rows", nlohmann::json::array()}};
  for (const bench::Row& r : rows) out["rows"].push_back(row_json(r));
  if (!options.json_path.empty()) {
    std::ofstream file(options.json_path);
    if (!file) throw ValueError("bench: cannot write --json file '" + options.json_path + "'");
    file << out.dump(2) << "\n";
  }
  if (options.record) tessel::bench::write_results(options.quick ? "suite_quick" : "suite", out);
  const bool any_failed = std::any_of(rows.begin(), rows.end(), [](const bench::Row& r) { return r.status == "FAILED"; });
  return any_failed ? 1 : 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "run the benchmark suite against ceilings measured in the same run");
  cmd->add_flag("--quick", options->quick, "smaller sizes and fewer repeats (about a minute)");
  cmd->add_option("--only", options->only, "run only these workloads (repeatable)");
  cmd->add_option("--json", options->json_path, "also write the results to this file");
  cmd->add_option("--trace", options->trace_path, "also profile the suite and write a Chrome trace (Perfetto) here");
  cmd->add_flag("!--no-record", options->record, "do not merge the results into bench/results/<device>-<date>.json");
  cmd->callback([options] {
    const int status = run_bench(*options);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace tessel::cli
