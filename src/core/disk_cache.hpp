#pragma once
// A folder of cache files, one per key (internal): <directory>/<key><extension>. The jit kernel
// cache (cubins) and the matmul autotune cache (JSON winners) keep their entries this way.
// Writes are atomic: a unique temporary file in the same folder, then a rename, so a reader sees
// the old file or the whole new one, and concurrent writers (threads or processes) of one key
// each rename a complete file. What a file holds, and checking it, is the caller's business.
#include <optional>
#include <string>
#include <string_view>

namespace tessel::detail {

class DiskCache {
 public:
  // `directory` "" is a disabled cache: reads find nothing and writes do nothing.
  DiskCache(std::string directory, std::string extension);

  bool enabled() const { return !directory_.empty(); }
  const std::string& directory() const { return directory_; }
  // The file of `key` ("" when disabled). ValueError for a key that is empty or is not a plain
  // file name (a path separator, "." or "..").
  std::string path(std::string_view key) const;
  // The contents of key's file, or nullopt when there is none (or it cannot be read).
  std::optional<std::string> read(std::string_view key) const;
  // Creates the folder when missing and replaces key's file atomically. Error naming the file and
  // the reason when it cannot be written (the temporary file is removed).
  void write(std::string_view key, std::string_view contents) const;

 private:
  std::string directory_;
  std::string extension_;
};

}  // namespace tessel::detail
