#include "tessel/core/profile_range.hpp"

#if defined(TESSEL_HAVE_NVTX) && defined(TESSEL_HAVE_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace tessel {

#if defined(TESSEL_HAVE_NVTX) && defined(TESSEL_HAVE_CUDA)
ProfileRange::ProfileRange(const char* name) { nvtxRangePushA(name); }
ProfileRange::~ProfileRange() { nvtxRangePop(); }
#else
ProfileRange::ProfileRange(const char*) {}
ProfileRange::~ProfileRange() {}
#endif

}  // namespace tessel
