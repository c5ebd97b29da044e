#pragma once
// Each `tessel` subcommand registers itself on the CLI11 app.
#include <CLI/CLI.hpp>

namespace tessel::cli {

void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_sim_command(CLI::App& app);
void add_profile_command(CLI::App& app);

}  // namespace tessel::cli
