// Launch-shape helpers shared by the .cu files (internal to kernels/cuda).
#pragma once

#include <cstdint>

namespace troupe::kernels::cuda::detail {

/// Blocks of `threads` covering n items with a grid-stride loop: at most
/// 65536 blocks, the kernels loop over the rest.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

}  // namespace troupe::kernels::cuda::detail
