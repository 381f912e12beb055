// Test-only GGUF writer: builds files in memory, valid ones and (through its
// raw hooks and the recorded field positions) every kind of corruption.
// Header-only so the fuzzer's seed generator can use it without GTest.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::gguf::testing {

/// Little-endian byte builder with in-place patching.
class Bytes {
 public:
  template <class T>
  size_t put(T v) {
    size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
    return at;
  }
  size_t u8(uint8_t v) { return put(v); }
  size_t u32(uint32_t v) { return put(v); }
  size_t u64(uint64_t v) { return put(v); }
  size_t str(std::string_view s) {
    size_t at = u64(s.size());
    raw(s.data(), s.size());
    return at;
  }
  void raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b_.insert(b_.end(), c, c + n);
  }
  void pad_to(size_t alignment, uint8_t fill = 0) {
    while (b_.size() % alignment != 0) b_.push_back(fill);
  }
  template <class T>
  void patch(size_t at, T v) {
    std::memcpy(b_.data() + at, &v, sizeof(T));
  }
  size_t size() const { return b_.size(); }
  std::vector<uint8_t>& vec() { return b_; }

 private:
  std::vector<uint8_t> b_;
};

// GGUF value type ids (match troupe::gguf::ValueType).
enum Vt : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kStr = 8, kArr = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

/// Bytes of `n` elements of ggml type `type` for the types the tests use (0 if unknown).
inline uint64_t test_type_bytes(uint32_t type, uint64_t n) {
  switch (type) {
    case 0: return n * 4;             // f32
    case 1: case 30: return n * 2;    // f16, bf16
    case 2: return n / 32 * 18;       // q4_0
    case 3: return n / 32 * 20;       // q4_1
    case 6: return n / 32 * 22;       // q5_0
    case 7: return n / 32 * 24;       // q5_1
    case 8: return n / 32 * 34;       // q8_0
    case 9: return n / 32 * 36;       // q8_1
    case 10: return n / 256 * 84;     // q2_k
    case 11: return n / 256 * 110;    // q3_k
    case 12: return n / 256 * 144;    // q4_k
    case 13: return n / 256 * 176;    // q5_k
    case 20: return n / 32 * 18;      // iq4_nl
    case 23: return n / 256 * 136;    // iq4_xs
    case 14: return n / 256 * 210;    // q6_k
    case 15: return n / 256 * 292;    // q8_k
    default: return 0;
  }
}

/// Builds a GGUF file: metadata entries are written as raw callbacks into a
/// Bytes, tensors get aligned sequential offsets unless one is forced.
class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<uint64_t> ne;
    std::optional<uint64_t> offset;  // forced data offset
    uint64_t nbytes = 0;             // bytes reserved in the data section
  };
  /// Positions of fields in the last build(), for patching corruptions.
  struct Layout {
    size_t version = 0, tensor_count = 0, kv_count = 0;
    std::vector<size_t> kv_start;          // each entry's key length field
    std::vector<size_t> tensor_start;      // each tensor info's name length field
    std::vector<size_t> tensor_n_dims, tensor_type, tensor_offset;
    size_t data_start = 0;
  };

  uint32_t version = 3;
  uint32_t alignment = 32;  // used for layout; write general.alignment yourself to change the file's
  std::optional<uint64_t> tensor_count_override, kv_count_override;

  // Metadata.
  void kv_u8(std::string_view k, uint8_t v) { scalar(k, kU8, v); }
  void kv_i8(std::string_view k, int8_t v) { scalar(k, kI8, v); }
  void kv_u16(std::string_view k, uint16_t v) { scalar(k, kU16, v); }
  void kv_i16(std::string_view k, int16_t v) { scalar(k, kI16, v); }
  void kv_u32(std::string_view k, uint32_t v) { scalar(k, kU32, v); }
  void kv_i32(std::string_view k, int32_t v) { scalar(k, kI32, v); }
  void kv_u64(std::string_view k, uint64_t v) { scalar(k, kU64, v); }
  void kv_i64(std::string_view k, int64_t v) { scalar(k, kI64, v); }
  void kv_f32(std::string_view k, float v) { scalar(k, kF32, v); }
  void kv_f64(std::string_view k, double v) { scalar(k, kF64, v); }
  void kv_bool(std::string_view k, bool v) { scalar(k, kBool, static_cast<uint8_t>(v ? 1 : 0)); }
  void kv_str(std::string_view k, std::string_view v) {
    begin_kv(k, kStr);
    meta_.str(v);
  }
  void kv_str_array(std::string_view k, const std::vector<std::string>& v) {
    begin_kv(k, kArr);
    meta_.u32(kStr);
    meta_.u64(v.size());
    for (const auto& s : v) meta_.str(s);
  }
  template <class T>
  void kv_array(std::string_view k, uint32_t elem_type, const std::vector<T>& v) {
    begin_kv(k, kArr);
    meta_.u32(elem_type);
    meta_.u64(v.size());
    for (const T& x : v) meta_.put(x);
  }
  /// Starts an entry and returns the builder so a test can write any value bytes.
  Bytes& kv_raw(std::string_view k, uint32_t type) {
    begin_kv(k, type);
    return meta_;
  }

  // Tensors.
  void tensor(std::string name, uint32_t type, std::vector<uint64_t> ne,
              std::optional<uint64_t> offset = std::nullopt, std::optional<uint64_t> nbytes = std::nullopt) {
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    Tensor t{std::move(name), type, std::move(ne), offset, nbytes ? *nbytes : test_type_bytes(type, n)};
    tensors_.push_back(std::move(t));
  }

  std::vector<uint8_t> build() {
    Bytes b;
    layout_ = Layout{};
    b.raw("GGUF", 4);
    layout_.version = b.u32(version);
    layout_.tensor_count = b.u64(tensor_count_override.value_or(tensors_.size()));
    layout_.kv_count = b.u64(kv_count_override.value_or(kv_starts_.size()));
    const size_t meta_base = b.size();
    b.raw(meta_.vec().data(), meta_.size());
    for (size_t s : kv_starts_) layout_.kv_start.push_back(meta_base + s);
    uint64_t next = 0;
    std::vector<uint64_t> offsets;
    for (const Tensor& t : tensors_) {
      layout_.tensor_start.push_back(b.str(t.name));
      layout_.tensor_n_dims.push_back(b.u32(static_cast<uint32_t>(t.ne.size())));
      for (uint64_t d : t.ne) b.u64(d);
      layout_.tensor_type.push_back(b.u32(t.type));
      uint64_t off = t.offset ? *t.offset : next;
      offsets.push_back(off);
      layout_.tensor_offset.push_back(b.u64(off));
      if (!t.offset) next = (next + t.nbytes + alignment - 1) / alignment * alignment;
    }
    if (!tensors_.empty()) {
      b.pad_to(alignment);
      layout_.data_start = b.size();
      // Data: a recognisable byte pattern per tensor at its (non-forced) offset.
      uint64_t end = 0;
      for (size_t i = 0; i < tensors_.size(); ++i) {
        if (!tensors_[i].offset) end = std::max(end, offsets[i] + tensors_[i].nbytes);
      }
      b.vec().resize(layout_.data_start + end, 0);
      for (size_t i = 0; i < tensors_.size(); ++i) {
        if (tensors_[i].offset) continue;
        for (uint64_t j = 0; j < tensors_[i].nbytes; ++j) {
          b.vec()[layout_.data_start + offsets[i] + j] = static_cast<uint8_t>(i * 31 + j);
        }
      }
    }
    return std::move(b.vec());
  }
  const Layout& layout() const { return layout_; }

 private:
  void begin_kv(std::string_view k, uint32_t type) {
    kv_starts_.push_back(meta_.str(k));
    meta_.u32(type);
  }
  template <class T>
  void scalar(std::string_view k, uint32_t type, T v) {
    begin_kv(k, type);
    meta_.put(v);
  }

  Bytes meta_;
  std::vector<size_t> kv_starts_;
  std::vector<Tensor> tensors_;
  Layout layout_;
};

}  // namespace troupe::gguf::testing
