#pragma once
// Checked mode's NaN/Inf count of an op result (see tessel/profile/checks.hpp). Declared in
// namespace tessel so the op ranges' Range::result finds it by argument-dependent lookup.
#include <cstdint>

#include "tessel/array/array.hpp"

namespace tessel {

// The number of NaN/Inf elements of a floating or complex array (synchronizes on the result);
// -1 for other dtypes, undefined arrays, and calls made from inside a check.
std::int64_t count_nonfinite(const Array& a);

}  // namespace tessel
