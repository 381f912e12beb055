#include "troupe/dtype.hpp"

#include <limits>

#include "troupe/quantization.hpp"

namespace troupe {

// The traits come from the weight-format registry (troupe/quantization.hpp): the built-in
// GGUF types and plugin formats alike.
std::optional<DTypeTraits> dtype_traits(uint32_t id) {
  const WeightFormat* f = weight_formats::find(static_cast<DType>(id));
  if (f == nullptr) return std::nullopt;
  return DTypeTraits{f->name, f->block_elems, f->block_bytes, f->quantized};
}

std::string_view to_string(DType t) {
  auto tr = dtype_traits(static_cast<uint32_t>(t));
  return tr ? tr->name : std::string_view("unknown");
}

int64_t row_bytes(DType t, int64_t n) {
  const WeightFormat* f = weight_formats::find(t);
  if (f == nullptr || n < 0 || n % f->block_elems != 0) return -1;
  const int64_t blocks = n / f->block_elems;
  if (blocks > (std::numeric_limits<int64_t>::max() - f->row_header_bytes) / f->block_bytes) return -1;
  return f->row_header_bytes + blocks * f->block_bytes;
}

}  // namespace troupe
