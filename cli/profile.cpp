// `tessel profile [--out PREFIX] -- <command> [args...]`: runs any program that uses tessel (a C++
// program, `python script.py`, `tessel bench ...`) with TESSEL_PROFILE=PREFIX, which makes the
// library record a profile session from its first op to exit and write PREFIX.json (Chrome trace)
// and PREFIX.txt (the op table). Prints the table and exits with the command's status.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "tessel/core/error.hpp"

namespace tessel::cli {
namespace {

struct ProfileOptions {
  std::string out = "tessel-profile";
  std::vector<std::string> command;
};

int run_profiled(const ProfileOptions& o) {
  if (o.command.empty()) throw ValueError("profile: no command given (usage: tessel profile -- <command> [args...])");
  // Fail before running anything when the outputs cannot be written.
  {
    const std::string probe = o.out + ".json";
    std::FILE* f = std::fopen(probe.c_str(), "a");
    if (!f) throw Error(fmt::format("profile: cannot write '{}': {}", probe, std::strerror(errno)));
    std::fclose(f);
    std::remove(probe.c_str());
  }
  std::remove((o.out + ".txt").c_str());
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(fmt::format("profile: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    setenv("TESSEL_PROFILE", o.out.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "tessel: error: profile: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("profile: waitpid failed: {}", std::strerror(errno)));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream table(o.out + ".txt");
  if (table) {
    std::stringstream text;
    text << table.rdbuf();
    std::cout << text.str();
    std::cout << fmt::format("trace: {}.json (open in https://ui.perfetto.dev or chrome://tracing), table: {}.txt\n",
                             o.out, o.out);
  } else {
    std::cerr << fmt::format("tessel: profile: '{}' wrote no profile (it ran no tessel op, or did not exit "
                             "normally; status {})\n",
                             o.command[0], code);
  }
  return code;
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto options = std::make_shared<ProfileOptions>();
  CLI::App* sub = app.add_subcommand(
      "profile", "Profile a program that uses tessel: writes a Chrome trace (PREFIX.json) and an op table (PREFIX.txt)");
  sub->add_option("--out", options->out, "Output prefix (default: tessel-profile)");
  sub->add_option("command", options->command, "The command to run, after --")->required();
  sub->callback([options] {
    const int code = run_profiled(*options);
    std::fflush(nullptr);
    std::exit(code);
  });
}

}  // namespace tessel::cli
