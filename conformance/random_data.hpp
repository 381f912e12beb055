// Random test data for the kernel checks: floats, and weights of any GGUF type
// with valid blocks (finite, modest scales; random quants), so every platform
// that claims a type can be fed the same bytes.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "troupe/dtype.hpp"
#include "troupe/status.hpp"

namespace troupe::conformance {

using Rng = std::mt19937_64;

/// `n` floats uniform in [lo, hi).
std::vector<float> random_floats(Rng& rng, int64_t n, float lo = -1.0f, float hi = 1.0f);
/// `rows` rows of `cols` elements of `type` (cols a whole number of blocks); each row
/// `row_stride` bytes apart (0: packed), padding random. not_supported for a type this
/// generator does not know.
Result<std::vector<uint8_t>> random_weight(Rng& rng, DType type, int64_t rows, int64_t cols, int64_t row_stride = 0);
/// Elements per block of `type` (1 for f32/f16/bf16).
int64_t block_elems(DType type);

}  // namespace troupe::conformance
