// libFuzzer target for the GGUF reader: parse arbitrary bytes, then use
// everything a caller could use. ASan/UBSan turn any over-read or overflow
// into a crash; explicit checks trap on broken post-conditions.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/model_files/gguf/gguf_file.hpp"

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

void touch_metadata(const troupe::gguf::GgufFile& f) {
  (void)f.version();
  (void)f.architecture();
  for (const std::string& key : f.keys()) {
    require(f.has(key));
    require(f.type_of(key).has_value());
    (void)f.get_int(key);
    (void)f.get_float(key);
    (void)f.get_bool(key);
    if (auto s = f.get_string(key)) require(s->size() <= f.file_size());
    if (auto a = f.get_string_array(key)) require(a->size() <= f.file_size());
    if (auto a = f.get_float_array(key)) require(a->size() <= f.file_size());
    if (auto a = f.get_int_array(key)) require(a->size() <= f.file_size());
  }
}

void touch_tensors(const troupe::gguf::GgufFile& f, const uint8_t* data, size_t size) {
  uint64_t total = 0;
  volatile uint8_t sink = 0;
  for (const troupe::WeightTensor& t : f.tensors()) {
    require(f.tensor(t.name) == &t);
    require(t.n_dims >= 1 && t.n_dims <= 4);
    const int64_t row = troupe::row_bytes(t.type, t.ne[0]);
    require(row > 0 && static_cast<uint64_t>(row) * static_cast<uint64_t>(t.rows()) == t.nbytes);
    const auto* p = static_cast<const uint8_t*>(t.data);
    require(p >= data && t.nbytes <= size && p - data <= static_cast<ptrdiff_t>(size - t.nbytes));
    uint8_t acc = 0;
    for (uint64_t i = 0; i < t.nbytes; ++i) acc ^= p[i];  // every byte: ASan checks each one
    sink = sink ^ acc;
    total += t.nbytes;
  }
  require(total == f.tensor_data_bytes());
  require(total <= size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = troupe::gguf::GgufFile::from_memory(data, size);
  if (!r.ok()) {
    require(!r.status().message().empty());
    return 0;
  }
  std::shared_ptr<const troupe::gguf::GgufFile> file(std::move(r.value()));
  require(file->file_size() == size);
  touch_metadata(*file);
  touch_tensors(*file, data, size);
  troupe::gguf::GgufModelSource source(file);
  (void)source.architecture();
  (void)source.get_int("general.alignment");
  return 0;
}
