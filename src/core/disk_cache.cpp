#include "core/disk_cache.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <system_error>
#include <thread>

#include "tessel/core/error.hpp"

namespace tessel::detail {

namespace fs = std::filesystem;

DiskCache::DiskCache(std::string directory, std::string extension)
    : directory_(std::move(directory)), extension_(std::move(extension)) {}

std::string DiskCache::path(std::string_view key) const {
  if (key.empty() || key == "." || key == ".." || key.find('/') != std::string_view::npos) {
    throw ValueError("disk cache: the key \"" + std::string(key) + "\" is not a plain file name (in " + directory_ + ")");
  }
  if (!enabled()) return "";
  return directory_ + "/" + std::string(key) + extension_;
}

std::optional<std::string> DiskCache::read(std::string_view key) const {
  const std::string file = path(key);
  if (file.empty()) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return contents.str();
}

void DiskCache::write(std::string_view key, std::string_view contents) const {
  const std::string file = path(key);
  if (file.empty()) return;
  // Unique per process, thread and call: two writers never share a temporary file.
  static std::atomic<std::uint64_t> counter{0};
  const std::string temp = file + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id())) + "." +
                           std::to_string(counter.fetch_add(1));
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) throw Error("disk cache: cannot create the folder " + directory_ + ": " + ec.message());
  std::string failure;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      failure = std::string("cannot open a temporary file: ") + std::strerror(errno);
    } else {
      out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
      out.close();
      if (!out) failure = "writing the temporary file failed";
    }
  }
  if (failure.empty()) {
    fs::rename(temp, file, ec);
    if (ec) failure = "rename failed: " + ec.message();
  }
  if (!failure.empty()) {
    fs::remove(temp, ec);
    throw Error("disk cache: cannot write " + file + " (" + failure + ")");
  }
}

}  // namespace tessel::detail
