#pragma once
// The whole public API of tessel.
#include "tessel/core/config.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/log.hpp"
#include "tessel/core/profile_range.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/core/version.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/memory/host_allocator.hpp"
#include "tessel/memory/stats.hpp"
