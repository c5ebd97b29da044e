#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"tessel: GPU arrays, kernels and tuned math"};
  app.set_version_flag("--version", tessel::version());
  app.require_subcommand(1);
  tessel::cli::add_info_command(app);
  tessel::cli::add_bench_command(app);
  tessel::cli::add_sim_command(app);
  tessel::cli::add_profile_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessel::Error& e) {
    std::fprintf(stderr, "tessel: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessel: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
