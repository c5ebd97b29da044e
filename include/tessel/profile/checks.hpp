#pragma once
// Checked mode, for finding which op went wrong. Off by default; then it costs nothing beyond the
// op ranges' one load. Set from TESSEL_CHECK (read when the library loads) or set_checks():
//   sync    synchronize after every op; an asynchronous CUDA error names the op and its arguments;
//   nan     count NaN/Inf in every op's floating result and raise at the first op producing one;
//   bounds  compile RawKernel/ElementwiseKernel launches with bounds checks of their array
//           arguments (an out-of-range index traps and the launch's synchronize names the kernel).
// Items are comma separated; "" or "off" turns checks off. An unknown item raises ValueError.
#include <string>

namespace tessel::profile {

enum Check : unsigned { check_sync = 1u, check_nan = 2u, check_bounds = 4u };

// Parses "sync,nan,bounds"; ValueError naming `what` and the item for an unknown one.
unsigned parse_checks(const std::string& items, const char* what = "set_checks");
void set_checks(const std::string& items);
void set_checks(unsigned checks);
unsigned checks();
std::string checks_str();  // "sync,nan" or ""

}  // namespace tessel::profile
