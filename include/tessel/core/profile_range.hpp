#pragma once
// An NVTX range for the life of a scope. Every public op opens one; building with
// -DTESSEL_NVTX=OFF removes them.

namespace tessel {

class ProfileRange {
 public:
  explicit ProfileRange(const char* name);
  ~ProfileRange();
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};

}  // namespace tessel

#if defined(TESSEL_HAVE_NVTX)
#define TESSEL_OP_RANGE(name) ::tessel::ProfileRange tessel_op_range_(name)
#else
#define TESSEL_OP_RANGE(name) ((void)0)
#endif
