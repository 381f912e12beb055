// The compute thread pools of this process: one per thread count, created on
// first use and never destroyed, so workers and ops can come and go (tests,
// failed loads) without starting and joining threads each time.
#pragma once

#include "kernels/cpu/thread_pool.hpp"

namespace troupe::cpu {

/// The pool of `threads` threads (<= 0: all cores). Thread-safe; lives until the process exits.
kernels::cpu::ThreadPool* process_pool(int threads);

}  // namespace troupe::cpu
