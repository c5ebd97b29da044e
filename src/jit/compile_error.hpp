#pragma once
// Compile error messages (internal): the NVRTC and the host compiler errors both quote the
// offending lines of the source.
#include <set>
#include <string>

namespace tessel::jit::detail {

// The 1-based `lines` of `source`, each with `context` lines around it, "> " marking the line
// itself and "  ..." between groups that do not touch; "" when `lines` is empty or out of range.
std::string source_excerpt(const std::string& source, const std::set<int>& lines, int context);

}  // namespace tessel::jit::detail
