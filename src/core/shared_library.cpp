// open_shared_library and library_symbol (shared_library.hpp).
#include "core/shared_library.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include <fmt/format.h>

namespace tessel::detail {

SharedLibrary open_shared_library(const char* env_var, const std::vector<std::string>& names, bool global) {
  std::vector<std::string> candidates;
  if (const char* chosen = env_var != nullptr ? std::getenv(env_var) : nullptr; chosen != nullptr && *chosen) {
    candidates.emplace_back(chosen);
  } else {
    candidates = names;
  }
  SharedLibrary lib;
  for (const std::string& name : candidates) {
    lib.handle = dlopen(name.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (lib.handle != nullptr) {
      lib.path = name;
      break;
    }
    const char* why = dlerror();
    lib.tried += fmt::format("{}{} ({})", lib.tried.empty() ? "" : "; ", name, why != nullptr ? why : "not found");
  }
  return lib;
}

void* library_symbol(void* handle, const char* symbol) {
  return handle != nullptr ? dlsym(handle, symbol) : nullptr;
}

}  // namespace tessel::detail
