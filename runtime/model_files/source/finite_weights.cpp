#include "runtime/model_files/source/finite_weights.hpp"

#include <cstring>
#include <string>

namespace troupe::engine {

namespace {

// Offsets of the f16 scale fields inside one block of each quantized type
// (GGUF's block layouts; -1 ends the list).
struct ScaleFields {
  int offsets[3];
};

ScaleFields scale_fields(DType t) {
  switch (t) {
    case DType::q4_0:
    case DType::q5_0:
    case DType::q8_0:
    case DType::iq4_nl:
    case DType::iq4_xs:
      return {{0, -1, -1}};
    case DType::q4_1:
    case DType::q5_1:
    case DType::q8_1:
    case DType::q4_k:
    case DType::q5_k:
      return {{0, 2, -1}};
    case DType::q2_k:  // scales[16], qs[64], then d, dmin
      return {{80, 82, -1}};
    case DType::q3_k:  // hmask[32], qs[64], scales[12], then d
      return {{108, -1, -1}};
    case DType::q6_k:  // ql[128], qh[64], scales[16], then d
      return {{208, -1, -1}};
    default:
      return {{-1, -1, -1}};
  }
}

uint16_t load16(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

bool f16_finite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

/// Index of the first of `n` IEEE values whose exponent bits (`exp_mask`) are all ones,
/// or -1. Chunks are scanned without an early exit so the compiler vectorizes them:
/// an 8B f16 model is 8G values, checked at load.
template <typename Bits>
int64_t first_bad(const unsigned char* p, uint64_t n, Bits exp_mask) {
  constexpr uint64_t kChunk = 4096;
  Bits buf[kChunk];
  for (uint64_t begin = 0; begin < n; begin += kChunk) {
    const uint64_t len = n - begin < kChunk ? n - begin : kChunk;
    std::memcpy(buf, p + begin * sizeof(Bits), len * sizeof(Bits));
    unsigned bad = 0;
    for (uint64_t i = 0; i < len; ++i) bad |= static_cast<unsigned>((buf[i] & exp_mask) == exp_mask);
    if (bad == 0) continue;
    for (uint64_t i = 0; i < len; ++i)
      if ((buf[i] & exp_mask) == exp_mask) return static_cast<int64_t>(begin + i);
  }
  return -1;
}

/// Index of the first non-finite element (float types) or block (quantized), or -1.
int64_t first_non_finite(const WeightTensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data);
  if (p == nullptr) return -1;
  switch (t.type) {
    case DType::f32:
      return first_bad<uint32_t>(p, t.nbytes / 4, 0x7f800000u);
    case DType::f16:
      return first_bad<uint16_t>(p, t.nbytes / 2, 0x7c00u);
    case DType::bf16:
      return first_bad<uint16_t>(p, t.nbytes / 2, 0x7f80u);
    default:
      break;
  }
  const auto tr = dtype_traits(static_cast<uint32_t>(t.type));
  if (!tr || !tr->quantized) return -1;
  const ScaleFields f = scale_fields(t.type);
  const int64_t blocks = static_cast<int64_t>(t.nbytes) / tr->block_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const unsigned char* block = p + b * tr->block_bytes;
    for (int off : f.offsets) {
      if (off < 0) break;
      if (!f16_finite(load16(block + off))) return b;
    }
  }
  return -1;
}

}  // namespace

Status check_finite_weights(const std::vector<WeightTensor>& tensors, const std::string& where) {
  for (const WeightTensor& t : tensors) {
    const int64_t bad = first_non_finite(t);
    if (bad < 0) continue;
    const bool blocks = traits(t.type).quantized;
    return data_loss(where + ": tensor '" + t.name + "' (" + std::string(to_string(t.type)) +
                     ") holds a non-finite value (NaN or infinity) at " + (blocks ? "block " : "element ") +
                     std::to_string(bad) + "; the model cannot be served");
  }
  return {};
}

}  // namespace troupe::engine
