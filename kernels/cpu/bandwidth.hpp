// Streaming-read bandwidth of this machine, the bound a memory-bound decode
// matmul is measured against (benchmarks print ratios to it, never raw times).
#pragma once

#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {

/// Best-of-several GB/s (1e9 bytes/s) reading a buffer well beyond the last-level
/// cache, split over `pool` (nullptr: one thread). Takes ~0.1-0.3 s.
double measure_read_bandwidth_gbs(ThreadPool* pool);

}  // namespace troupe::kernels::cpu
