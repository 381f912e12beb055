// libFuzzer target for the safetensors reader: parse arbitrary bytes, then use
// everything a caller could use. ASan/UBSan turn any over-read or overflow
// into a crash; explicit checks trap on broken post-conditions.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/model_files/safetensors/safetensors_file.hpp"

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

int64_t elem_bytes(troupe::DType t) { return t == troupe::DType::f32 ? 4 : 2; }

void touch(const troupe::safetensors::SafetensorsFile& f, const uint8_t* data, size_t size) {
  require(f.file_size() == size);
  require(8 + f.header_bytes() + f.data_bytes() == size);
  const uint8_t* section = data + 8 + f.header_bytes();
  volatile uint8_t sink = 0;
  size_t usable = 0;
  uint64_t prev_end = 0;
  for (const troupe::safetensors::TensorEntry& e : f.entries()) {
    require(f.entry(e.name) == &e);
    require(e.begin <= e.end && e.end <= f.data_bytes());
    if (e.begin != e.end) {
      require(e.begin >= prev_end);  // no overlaps
      prev_end = e.end;
    }
    auto r = f.require_tensor(e.name);
    if (e.weight_index < 0) {
      require(!e.unsupported.empty() && !r.ok() && f.tensor(e.name) == nullptr);
      continue;
    }
    ++usable;
    require(r.ok() && *r == f.tensor(e.name));
    const troupe::WeightTensor& t = **r;
    require(t.n_dims >= 1 && t.n_dims <= 4);
    int64_t elems = 1;
    for (int d = 0; d < 4; ++d) {
      require(t.ne[d] >= 1);
      elems *= t.ne[d];
    }
    require(static_cast<uint64_t>(elems * elem_bytes(t.type)) == t.nbytes);
    require(t.nbytes == e.end - e.begin);
    const auto* p = static_cast<const uint8_t*>(t.data);
    require(p == section + e.begin);
    uint8_t acc = 0;
    for (uint64_t i = 0; i < t.nbytes; ++i) acc ^= p[i];  // every byte: ASan checks each one
    sink = sink ^ acc;
  }
  require(usable == f.tensors().size());
  for (const auto& [key, value] : f.metadata()) require(key.size() + value.size() <= size);
  require(f.require_tensor("no such tensor \xff").status().code() == troupe::StatusCode::not_found);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = troupe::safetensors::SafetensorsFile::from_memory(data, size, "fuzz");
  if (!r.ok()) {
    require(r.status().message().rfind("fuzz: ", 0) == 0);
    return 0;
  }
  touch(**r, data, size);
  return 0;
}
