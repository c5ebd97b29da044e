// The route choices of linalg_route.hpp.
#include "backend/cuda/linalg_route.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/tuning/linalg_drivers.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cuda {
namespace {

// TESSEL_LINALG_ROUTE: unset or "auto", the table; "batched", the batched entry point wherever one
// exists; "matrix", one library call chain per matrix (on streams) everywhere: for
// bench/peers/linalg_grid.py, which times both to suggest the table's crossovers.
enum class ForcedRoute { none, batched, matrix };
ForcedRoute forced_route() {
  static const ForcedRoute chosen = [] {
    const char* v = std::getenv("TESSEL_LINALG_ROUTE");
    const std::string name(v ? v : "");
    if (name.empty() || name == "auto") return ForcedRoute::none;
    if (name == "batched") return ForcedRoute::batched;
    if (name == "matrix") return ForcedRoute::matrix;
    throw ValueError(fmt::format("TESSEL_LINALG_ROUTE must be auto, batched or matrix, got \"{}\"", name));
  }();
  return chosen;
}

}  // namespace

bool batched_route(LinalgOp op, const LinalgBatch& p) {
  const std::int64_t n = std::max(p.m, p.n);
  if (op == LinalgOp::svd && n > tuning::kGesvdjBatchedMaxN) return false;  // no batched entry point
  if (p.batch < 2) return false;
  switch (forced_route()) {
    case ForcedRoute::batched: return true;
    case ForcedRoute::matrix: return false;
    case ForcedRoute::none: break;
  }
  for (const auto& row : tuning::kLibraryRoutes) {
    if (row.op == op && (row.dtypes & tuning::dtype_bit(p.dtype)) != 0 && n <= row.max_n) return p.batch >= row.min_batch;
  }
  return false;
}


bool solve_legacy_api(std::int64_t n) { return n <= tuning::kSolveLegacyMaxN; }
bool solve_by_triangular_solves(std::int64_t n) { return n >= tuning::kTrsmSolveMinN && n <= kMaxPermutedRows; }

using tuning::kPolarMinN;

SvdRoute svd_route(const LinalgBatch& p, bool vectors, bool full) {
  const bool full_u_of_tall = vectors && full && p.m > p.n;
  const bool tall = p.m > p.n && !full_u_of_tall;
  static const std::string forced = [] {
    const char* v = std::getenv("TESSEL_LINALG_SVD");
    return std::string(v ? v : "");
  }();
  if (forced.empty() || forced == "auto") {
    if (full_u_of_tall) return {false, SvdDriver::gesvd};
    if (2 * p.m >= 3 * p.n && p.n >= kPolarMinN) return {false, SvdDriver::gesvdp};
    return {tall, SvdDriver::gesvdj};
  }
  if (forced == "gesvdp") return full_u_of_tall ? SvdRoute{false, SvdDriver::gesvd} : SvdRoute{false, SvdDriver::gesvdp};
  if (forced == "gesvdj") return full_u_of_tall ? SvdRoute{false, SvdDriver::gesvd} : SvdRoute{tall, SvdDriver::gesvdj};
  if (forced == "gesvd") return {false, SvdDriver::gesvd};
  if (forced == "qr+gesvd") return {tall, SvdDriver::gesvd};
  throw ValueError(
      fmt::format("svd: TESSEL_LINALG_SVD must be auto, gesvdp, gesvdj, gesvd or qr+gesvd, got \"{}\"", forced));
}

}  // namespace tessel::backend::cuda
