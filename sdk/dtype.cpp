#include "troupe/dtype.hpp"

#include <limits>

namespace troupe {

std::optional<DTypeTraits> dtype_traits(uint32_t id) {
  switch (static_cast<DType>(id)) {
    case DType::f32: return DTypeTraits{"f32", 1, 4, false};
    case DType::f16: return DTypeTraits{"f16", 1, 2, false};
    case DType::bf16: return DTypeTraits{"bf16", 1, 2, false};
    case DType::q4_0: return DTypeTraits{"q4_0", 32, 18, true};
    case DType::q4_1: return DTypeTraits{"q4_1", 32, 20, true};
    case DType::q5_0: return DTypeTraits{"q5_0", 32, 22, true};
    case DType::q5_1: return DTypeTraits{"q5_1", 32, 24, true};
    case DType::q8_0: return DTypeTraits{"q8_0", 32, 34, true};
    case DType::q8_1: return DTypeTraits{"q8_1", 32, 36, true};
    case DType::q2_k: return DTypeTraits{"q2_k", 256, 84, true};
    case DType::q3_k: return DTypeTraits{"q3_k", 256, 110, true};
    case DType::q4_k: return DTypeTraits{"q4_k", 256, 144, true};
    case DType::q5_k: return DTypeTraits{"q5_k", 256, 176, true};
    case DType::q6_k: return DTypeTraits{"q6_k", 256, 210, true};
    case DType::q8_k: return DTypeTraits{"q8_k", 256, 292, true};
    case DType::iq4_nl: return DTypeTraits{"iq4_nl", 32, 18, true};
    case DType::iq4_xs: return DTypeTraits{"iq4_xs", 256, 136, true};
  }
  return std::nullopt;
}

std::string_view to_string(DType t) {
  auto tr = dtype_traits(static_cast<uint32_t>(t));
  return tr ? tr->name : std::string_view("unknown");
}

int64_t row_bytes(DType t, int64_t n) {
  auto tr = dtype_traits(static_cast<uint32_t>(t));
  if (!tr || n < 0 || n % tr->block_elems != 0) return -1;
  int64_t blocks = n / tr->block_elems;
  if (blocks > std::numeric_limits<int64_t>::max() / tr->block_bytes) return -1;
  return blocks * tr->block_bytes;
}

}  // namespace troupe
