// Element types of weights and caches. Values follow GGUF's ggml_type ids so
// a GGUF tensor's type converts without a table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe {

enum class DType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq4_nl = 20,
  iq4_xs = 23,
  bf16 = 30,
};

/// Storage layout of one type: `block_elems` values packed in `block_bytes`.
struct DTypeTraits {
  std::string_view name;  // "f32", "q4_1", ...
  int64_t block_elems;
  int64_t block_bytes;
  bool quantized;
};

/// Traits of a type we know, or nullopt for an id we do not support.
std::optional<DTypeTraits> dtype_traits(uint32_t ggml_type_id);
inline DTypeTraits traits(DType t) { return *dtype_traits(static_cast<uint32_t>(t)); }
std::string_view to_string(DType t);

/// Bytes taken by `n` elements of `t` (n must be a multiple of the block size),
/// or -1 when n is not a whole number of blocks or the size overflows.
int64_t row_bytes(DType t, int64_t n);

}  // namespace troupe
