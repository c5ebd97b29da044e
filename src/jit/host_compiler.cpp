// Host C++ compilation and loading for the CPU backend (see host_compiler.hpp): the compiler runs
// through posix_spawn (no shell) in a private temporary folder; libraries are loaded from a
// memfd, never from a path another user could write.
#include "tessel/jit/host_compiler.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "jit/binary_format.hpp"
#include "jit/compile_error.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/version.hpp"
#include "tessel/profile/hooks.hpp"

extern char** environ;

namespace tessel::jit {

// One loaded shared object. The descriptor of its memfd stays open with it: the loader knows the
// library by the name "/proc/self/fd/N", and a later library loaded from the same number would
// be taken for this one if the number were reused.
struct HostLibrary {
  Hash128 key;
  std::string symbol;
  void* handle = nullptr;
  HostEntry entry = nullptr;
  int fd = -1;
};

namespace {

#ifdef MFD_EXEC
constexpr unsigned kMemfdExec = MFD_EXEC;
#else
constexpr unsigned kMemfdExec = 0x0010U;  // linux/memfd.h since 6.3
#endif

constexpr char kMagic[8] = {'T', 'S', 'L', 'H', 'O', 'S', 'T', 'K'};
constexpr std::uint32_t kFormat = 1;
constexpr const char* kExtension = ".hostlib";
constexpr double kSlowCompileMs = 5000.0;
constexpr const char* kDefaultFlags[] = {"-std=c++17", "-O3", "-march=native", "-fPIC", "-shared", "-fopenmp",
                                         "-fno-strict-aliasing"};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string errno_text(int error) { return std::strerror(error); }

// ---- running a program ----------------------------------------------------------------------

struct ProcessResult {
  int status = 0;      // waitpid's
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (a path) with argv, stdin from /dev/null, stdout and stderr into one pipe. Error when
// it cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw Error("jit: pipe2 failed: " + errno_text(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    throw Error("jit: cannot run " + argv[0] + ": " + errno_text(spawned));
  }
  ProcessResult result;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (got > 0) {
      result.output.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fds[0]);
  while (::waitpid(pid, &result.status, 0) < 0) {
    if (errno != EINTR) throw Error("jit: waitpid for " + argv[0] + " failed: " + errno_text(errno));
  }
  return result;
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string status_text(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// ---- finding the compiler -----------------------------------------------------------------

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// `name` looked up on PATH (as execvp would), or "".
std::string search_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return "";
}

const char* kInstallHint =
    "install the Debian package g++ (`make deps` and scripts/install-deps.sh install it) or set TESSEL_CXX to a "
    "C++17 compiler with OpenMP (a path, or a name on PATH)";

// The compiler's path for the current environment; Error when there is none.
std::string resolve_compiler_path() {
  const char* env = std::getenv("TESSEL_CXX");
  if (env != nullptr && *env != '\0') {
    const std::string value = env;
    const std::string path = value.find('/') != std::string::npos ? value : search_path(value);
    if (path.empty() || !is_executable_file(path)) {
      throw Error("jit: TESSEL_CXX=" + value + " is not an executable file" +
                  (value.find('/') != std::string::npos ? std::string() : std::string(" on PATH")) +
                  ", so CPU kernels cannot be compiled; " + kInstallHint + ", or unset TESSEL_CXX to use g++ from PATH");
    }
    return path;
  }
  for (const char* name : {"g++", "c++"}) {
    std::string path = search_path(name);
    if (!path.empty()) return path;
  }
  throw Error(std::string("jit: no host C++ compiler for CPU kernels: TESSEL_CXX is not set and neither g++ nor c++ "
                          "is on PATH; ") +
              kInstallHint);
}

// The first line of `<path> --version`, asked once per path.
std::string compiler_version(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::string>* versions = new std::map<std::string, std::string>();  // leaked
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = versions->find(path);
    if (it != versions->end()) return it->second;
  }
  const ProcessResult r = run_process({path, "--version"});
  if (!exited_ok(r.status)) {
    throw Error("jit: the host compiler " + path + " failed to report its version (`" + path + " --version`: " +
                status_text(r.status) + "):\n" + r.output);
  }
  std::string line = r.output.substr(0, r.output.find('\n'));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  std::lock_guard<std::mutex> lock(mutex);
  return versions->emplace(path, line).first->second;
}

// ---- files --------------------------------------------------------------------------------

// A private temporary folder (mkdtemp: mode 0700), removed with everything in it at scope exit.
struct PrivateTempDir {
  std::string path;
  PrivateTempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/tessel-cxx-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error("jit: cannot create a temporary folder for the host compiler (" + pattern + "): " + errno_text(errno));
    }
    path = pattern;
  }
  ~PrivateTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  PrivateTempDir(const PrivateTempDir&) = delete;
  PrivateTempDir& operator=(const PrivateTempDir&) = delete;
};

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t put = ::write(fd, data, size);
    if (put < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += put;
    size -= static_cast<std::size_t>(put);
  }
  return true;
}

// The whole contents of an open file of `size` bytes; nullopt on a read error or a short file.
std::optional<std::string> read_all(int fd, std::size_t size) {
  std::string data(size, '\0');
  std::size_t at = 0;
  while (at < size) {
    const ssize_t got = ::read(fd, data.data() + at, size - at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;
    at += static_cast<std::size_t>(got);
  }
  return data;
}

void write_file(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Error("jit: cannot create " + path + ": " + errno_text(errno));
  const bool ok = write_all(fd, contents.data(), contents.size());
  const int saved = errno;
  ::close(fd);
  if (!ok) throw Error("jit: cannot write " + path + ": " + errno_text(saved));
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("jit: cannot open " + path + ": " + errno_text(errno));
  struct stat st;
  std::optional<std::string> data;
  if (::fstat(fd, &st) == 0) data = read_all(fd, static_cast<std::size_t>(st.st_size));
  ::close(fd);
  if (!data) throw Error("jit: cannot read " + path);
  return *data;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// The CompileError message: the compiler and its output, then the source lines its errors name
// ("<file>:LINE:COL: error: ..." in GCC's and Clang's format).
std::string format_host_compile_error(const std::string& symbol, const std::string& compiler, const std::string& log,
                                      const std::string& source, const std::string& file) {
  std::ostringstream msg;
  msg << "jit: failed to compile host kernel '" << symbol << "' with " << compiler << "\n";
  msg << "compiler output:\n" << log;
  if (!log.empty() && log.back() != '\n') msg << "\n";
  std::set<int> lines;
  std::istringstream in(log);
  std::string line;
  const std::string prefix = file + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0 || line.find("error") == std::string::npos) continue;
    const int number = std::atoi(line.c_str() + prefix.size());
    if (number > 0) lines.insert(number);
  }
  msg << detail::source_excerpt(source, lines, 2);
  return msg.str();
}

// ---- loading ------------------------------------------------------------------------------

// Loads a shared object from its bytes through a memfd. Error when the loader rejects it or the
// symbol is missing.
std::shared_ptr<const HostLibrary> load_library(const std::string& bytes, const Hash128& key, const std::string& symbol) {
  const std::string what = "jit: host kernel '" + symbol + "'";
  // MFD_EXEC (Linux 6.3) keeps the file executable where vm.memfd_noexec makes that opt-in; older
  // kernels reject the flag, and their memfds are executable anyway.
  const std::string name = "tessel:" + symbol;
  int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | kMemfdExec);
  if (fd < 0 && errno == EINVAL) fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) throw Error(what + ": memfd_create failed: " + errno_text(errno));
  if (!write_all(fd, bytes.data(), bytes.size())) {
    const int saved = errno;
    ::close(fd);
    throw Error(what + ": writing the library into a memfd failed: " + errno_text(saved));
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    ::close(fd);
    throw Error(what + ": cannot load the compiled library: " + (why != nullptr ? why : "dlopen failed"));
  }
  ::dlerror();
  void* entry = ::dlsym(handle, symbol.c_str());
  if (entry == nullptr) {
    // The library stays loaded with its descriptor, as every other (see HostLibrary).
    throw Error(what + ": the compiled library has no symbol '" + symbol + "'; declare the entry as extern \"C\" int " +
                symbol + "(TsHostLaunch*, void**)");
  }
  auto library = std::make_shared<HostLibrary>();
  library->key = key;
  library->symbol = symbol;
  library->handle = handle;
  library->entry = reinterpret_cast<HostEntry>(entry);
  library->fd = fd;
  return library;
}

// ---- disk entries -------------------------------------------------------------------------

// Layout: magic, format, key, symbol, the library's bytes, then the checksum of all before it.
std::string serialize(const Hash128& key, const std::string& symbol, const std::string& library) {
  std::string out(kMagic, sizeof kMagic);
  detail::put_u64(out, kFormat);
  detail::put_u64(out, key.hi);
  detail::put_u64(out, key.lo);
  detail::put_string(out, symbol);
  detail::put_string(out, library);
  detail::seal(out);
  return out;
}

// The library's bytes, or nullopt (and `why`) when `data` is not a valid entry for key and symbol.
std::optional<std::string> deserialize(const std::string& data, const Hash128& key, const std::string& symbol,
                                       std::string& why) {
  std::size_t body = 0;
  if (!detail::check_sealed(data, kMagic, body, why)) return std::nullopt;
  detail::Reader r{data, sizeof kMagic};
  if (r.u64() != kFormat) {
    why = "other format version";
    return std::nullopt;
  }
  Hash128 stored;
  stored.hi = r.u64();
  stored.lo = r.u64();
  const std::string stored_symbol = r.string();
  std::string library = r.string();
  if (!r.ok || r.at != body || stored != key || stored_symbol != symbol || library.empty()) {
    why = "malformed contents";
    return std::nullopt;
  }
  return library;
}

}  // namespace

// ---- HostKernel -----------------------------------------------------------------------------

const std::string& HostKernel::symbol() const {
  static const std::string none;
  return library_ ? library_->symbol : none;
}

void HostKernel::launch(const LaunchConfig& config, void** params) const {
  TsHostLaunch record;
  record.grid[0] = config.grid.x;
  record.grid[1] = config.grid.y;
  record.grid[2] = config.grid.z;
  record.block[0] = config.block.x;
  record.block[1] = config.block.y;
  record.block[2] = config.block.z;
  record.shared_bytes = config.shared_mem;
  record.num_threads = 0;  // tessel::num_threads(), below
  launch(record, params);
}

void HostKernel::launch(TsHostLaunch& record, void** params) const {
  if (!defined()) throw ValueError("jit: launch of an undefined HostKernel");
  record.error_code = 0;
  record.error[0] = '\0';
  // 0: the process's CPU thread setting (TESSEL_NUM_THREADS, ts.set_num_threads).
  if (record.num_threads <= 0) record.num_threads = tessel::num_threads();
  const int status = entry_(&record, params);
  if (status == 0 && record.error_code == 0) return;
  record.error[sizeof record.error - 1] = '\0';
  std::string message = record.error;
  if (message.empty()) {
    message = "host kernel '" + symbol() + "' failed (error code " + std::to_string(record.error_code) +
              ", returned " + std::to_string(status) + ")";
  }
  if (record.error_code == 1) throw IndexError(message);
  throw Error(message);
}

// ---- compiler -------------------------------------------------------------------------------

HostCompilerInfo find_host_compiler() {
  HostCompilerInfo info;
  info.path = resolve_compiler_path();
  info.version = compiler_version(info.path);
  return info;
}

bool host_compiler_available() {
  try {
    (void)find_host_compiler();
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string host_compiler() {
  try {
    const HostCompilerInfo info = find_host_compiler();
    return info.path + ": " + info.version;
  } catch (const Error&) {
    return "";
  }
}

std::vector<std::string> host_compile_flags(const HostCompileRequest& request) {
  std::vector<std::string> flags(std::begin(kDefaultFlags), std::end(kDefaultFlags));
  flags.insert(flags.end(), request.options.begin(), request.options.end());
  return flags;
}

const std::string& host_cpu_model() {
  static const std::string model = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, out;
    std::set<std::string> seen;
    // x86: "model name" and "flags"; AArch64: "CPU implementer", "CPU part" and "Features".
    const char* keys[] = {"model name", "flags", "CPU implementer", "CPU part", "Features"};
    while (std::getline(in, line)) {
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
      for (const char* k : keys) {
        if (key == k && seen.insert(key).second) out += line + "\n";
      }
    }
    return out;
  }();
  return model;
}

Hash128 host_cache_key(const HostCompileRequest& request, const HostCompilerInfo& compiler) {
  Hasher h;
  h.field("tessel-host-kernel-v1");
  h.field(request.source);
  h.field(request.symbol);
  const std::vector<std::string> flags = host_compile_flags(request);
  h.u64(flags.size());
  for (const std::string& f : flags) h.field(f);
  h.field(compiler.path);
  h.field(compiler.version);
  h.field(host_cpu_model());
  h.field(tessel::version());
  return h.finish();
}

namespace {

HostCompileResult compile_with(const HostCompileRequest& request, const HostCompilerInfo& compiler) {
  if (!is_identifier(request.symbol)) {
    throw ValueError("jit: host kernel symbol '" + request.symbol + "' is not a C identifier");
  }
  const auto start = std::chrono::steady_clock::now();
  PrivateTempDir dir;
  const std::string file = request.symbol + ".cpp";
  const std::string source_path = dir.path + "/" + file;
  const std::string library_path = dir.path + "/" + request.symbol + ".so";
  write_file(source_path, request.source);
  std::vector<std::string> argv{compiler.path};
  for (const char* f : kDefaultFlags) argv.emplace_back(f);
  argv.push_back(source_path);
  // After the source, so that library flags (-lm) link in order.
  argv.insert(argv.end(), request.options.begin(), request.options.end());
  argv.emplace_back("-o");
  argv.push_back(library_path);
  ProcessResult run = run_process(argv);
  // Messages name the source as "<symbol>.cpp", not by the temporary folder.
  replace_all(run.output, dir.path + "/", "");
  if (!exited_ok(run.status)) {
    std::string log = run.output;
    if (!WIFEXITED(run.status)) log += "(the compiler was " + status_text(run.status) + ")\n";
    throw CompileError(format_host_compile_error(request.symbol, compiler.path, log, request.source, file), log);
  }
  HostCompileResult result;
  result.library = read_file(library_path);
  result.log = std::move(run.output);
  result.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

HostCompileResult compile_host_library(const HostCompileRequest& request) {
  return compile_with(request, find_host_compiler());
}

// ---- HostKernelCache ------------------------------------------------------------------------

HostKernelCache::HostKernelCache(std::string directory) : directory_(std::move(directory)) {}

HostKernelCache::~HostKernelCache() {
  if (directory_fd_ >= 0) ::close(directory_fd_);
}

HostKernelCache& HostKernelCache::global() {
  // Leaked on purpose, as KernelCache::global(): kernels may be requested from static destructors.
  static HostKernelCache* cache = [] {
    const std::string& base = config().cache_dir;
    return new HostKernelCache(base.empty() ? std::string() : base + "/host_kernels");
  }();
  return *cache;
}

std::string HostKernelCache::path_for(const Hash128& key) const {
  return directory_.empty() ? std::string() : directory_ + "/" + key.hex() + kExtension;
}

void HostKernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

CacheStats HostKernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

bool HostKernelCache::disk_enabled() { return open_directory() >= 0; }

int HostKernelCache::open_directory() {
  std::lock_guard<std::mutex> lock(directory_mutex_);
  if (directory_checked_) return directory_fd_;
  directory_checked_ = true;
  if (directory_.empty()) return -1;
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(directory_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // 0700 (the umask can only remove bits); an existing folder is checked as it is.
  if (::mkdir(directory_.c_str(), 0700) != 0 && errno != EEXIST) {
    TESSEL_LOG_WARN("jit: not using the host kernel cache " + directory_ + ": cannot create it (" + errno_text(errno) +
                    "); CPU kernels are compiled in each process");
    return -1;
  }
  // The checks are made on the open folder, and every entry is reached through this descriptor, so
  // replacing a folder on the path afterwards changes nothing.
  const int fd = ::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  std::string why;
  struct stat st;
  if (fd < 0) {
    why = "cannot open it (" + errno_text(errno) + ")";
  } else if (::fstat(fd, &st) != 0) {
    why = "cannot stat it (" + errno_text(errno) + ")";
  } else if (!S_ISDIR(st.st_mode)) {
    why = "it is not a directory";
  } else if (st.st_uid != ::geteuid()) {
    why = "it is owned by uid " + std::to_string(st.st_uid) + ", not by this process's user (uid " +
          std::to_string(::geteuid()) + ")";
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    why = std::string("its permissions are ") + mode + ", and loading native code from it needs 700 (chmod 700 " +
          directory_ + ")";
  }
  if (!why.empty()) {
    if (fd >= 0) ::close(fd);
    TESSEL_LOG_WARN("jit: not using the host kernel cache " + directory_ + ": " + why +
                    "; CPU kernels are compiled in each process");
    return -1;
  }
  directory_fd_ = fd;
  return fd;
}

std::shared_ptr<const HostLibrary> HostKernelCache::read_disk(const Hash128& key, const std::string& symbol) {
  const int dir = open_directory();
  if (dir < 0) return nullptr;
  const std::string name = key.hex() + kExtension;
  const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;  // not cached yet
  std::string why;
  std::optional<std::string> data;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    why = "not owned by this user, or writable by others";
  } else {
    data = read_all(fd, static_cast<std::size_t>(st.st_size));
    if (!data) why = "read failed";
  }
  ::close(fd);
  std::shared_ptr<const HostLibrary> library;
  if (data) {
    // Only the verified bytes are loaded: what the file holds from now on does not matter.
    if (std::optional<std::string> bytes = deserialize(*data, key, symbol, why)) {
      try {
        library = load_library(*bytes, key, symbol);
      } catch (const Error& e) {
        why = e.what();
      }
    }
  }
  if (!library) {
    TESSEL_LOG_DEBUG("jit host cache: ignoring " + path_for(key) + ": " + why + "; recompiling");
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.disk_errors;
  }
  return library;
}

void HostKernelCache::write_disk(const Hash128& key, const std::string& symbol, const std::string& library) {
  const int dir = open_directory();
  if (dir < 0) return;
  // Unique per process, thread and call: two writers never share a temporary file, and each
  // renames a complete one over the entry.
  static std::atomic<std::uint64_t> counter{0};
  const std::string name = key.hex() + kExtension;
  const std::string temp = name + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id())) + "." +
                           std::to_string(counter.fetch_add(1));
  const std::string contents = serialize(key, symbol, library);
  std::string failure;
  const int fd = ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    failure = "cannot create a temporary file: " + errno_text(errno);
  } else {
    if (!write_all(fd, contents.data(), contents.size())) failure = "write failed: " + errno_text(errno);
    if (::close(fd) != 0 && failure.empty()) failure = "close failed: " + errno_text(errno);
    if (failure.empty() && ::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
      failure = "rename failed: " + errno_text(errno);
    }
    if (!failure.empty()) ::unlinkat(dir, temp.c_str(), 0);
  }
  if (!failure.empty()) {
    TESSEL_LOG_DEBUG("jit host cache: cannot write " + path_for(key) + " (" + failure +
                     "); continuing without the disk cache for it");
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.disk_errors;
  }
}

HostKernel HostKernelCache::get(const HostCompileRequest& request) {
  const std::int64_t start_ns = profile::session_recording() ? profile::now_ns() : 0;
  if (!is_identifier(request.symbol)) {
    throw ValueError("jit: host kernel symbol '" + request.symbol + "' is not a C identifier");
  }
  const HostCompilerInfo compiler = find_host_compiler();
  const Hash128 key = host_cache_key(request, compiler);

  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = entries_[key];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard<std::mutex> entry_lock(entry->mutex);
  auto kernel_of = [](const std::shared_ptr<const HostLibrary>& library) {
    HostKernel k;
    k.library_ = library;
    k.entry_ = library->entry;
    return k;
  };
  if (entry->library) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.memory_hits;
    }
    profile::compile_event(request.symbol, "memory", start_ns, profile::now_ns());
    return kernel_of(entry->library);
  }
  if (auto library = read_disk(key, request.symbol)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.disk_hits;
    }
    TESSEL_LOG_DEBUG("jit host cache: disk hit '" + request.symbol + "' " + key.hex());
    entry->library = library;
    profile::compile_event(request.symbol, "disk", start_ns, profile::now_ns());
    return kernel_of(library);
  }
  TESSEL_LOG_DEBUG("jit host cache: miss '" + request.symbol + "' " + key.hex() + ", compiling with " + compiler.path);
  HostCompileResult compiled = compile_with(request, compiler);
  if (compiled.milliseconds > kSlowCompileMs) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.2f", compiled.milliseconds / 1000.0);
    TESSEL_LOG_WARN("jit: compiling host kernel '" + request.symbol + "' took " + seconds + " s (cached for next time)");
  }
  if (!compiled.log.empty()) TESSEL_LOG_DEBUG("jit: compiler output for '" + request.symbol + "':\n" + compiled.log);
  auto library = load_library(compiled.library, key, request.symbol);
  write_disk(key, request.symbol, compiled.library);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
  }
  entry->library = library;
  profile::compile_event(request.symbol, "host", start_ns, profile::now_ns());
  return kernel_of(library);
}

HostKernel get_host_kernel(const HostCompileRequest& request) { return HostKernelCache::global().get(request); }

}  // namespace tessel::jit
