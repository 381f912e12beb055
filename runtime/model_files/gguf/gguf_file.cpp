// GGUF parsing and validation. The layout (all little-endian):
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x { string key, u32 type, value },
//   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset },
//   padding to general.alignment, then the data section (offsets are relative to it).
// Every field is checked against the bytes that remain before it is trusted:
// llama.cpp's gguf_init had integer-overflow and heap-overflow CVEs on exactly
// these counts and lengths. The reader does not log, so the fuzzer can link it alone.
#include "runtime/model_files/gguf/gguf_file.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "runtime/model_files/gguf/byte_cursor.hpp"
#include "runtime/model_files/gguf/mapped_file.hpp"

namespace troupe::gguf {

namespace {

using detail::ByteCursor;

constexpr uint32_t kMaxValueType = static_cast<uint32_t>(ValueType::float64);
constexpr uint64_t kDefaultAlignment = 32;
// Smallest possible encodings, used to bound counts by the bytes that remain.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                // key length, type, a 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, ne[0], type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;                 // element type, count
// An array may hold arrays, but those may not hold arrays again: bounded recursion.
constexpr int kMaxArrayDepth = 2;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::uint8: return "uint8";
    case ValueType::int8: return "int8";
    case ValueType::uint16: return "uint16";
    case ValueType::int16: return "int16";
    case ValueType::uint32: return "uint32";
    case ValueType::int32: return "int32";
    case ValueType::float32: return "float32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::uint64: return "uint64";
    case ValueType::int64: return "int64";
    case ValueType::float64: return "float64";
  }
  return "?";
}

/// Bytes of one scalar value, 0 for string and array.
uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::uint8:
    case ValueType::int8:
    case ValueType::boolean: return 1;
    case ValueType::uint16:
    case ValueType::int16: return 2;
    case ValueType::uint32:
    case ValueType::int32:
    case ValueType::float32: return 4;
    case ValueType::uint64:
    case ValueType::int64:
    case ValueType::float64: return 8;
    case ValueType::string:
    case ValueType::array: return 0;
  }
  return 0;
}

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::uint8:
    case ValueType::int8:
    case ValueType::uint16:
    case ValueType::int16:
    case ValueType::uint32:
    case ValueType::int32:
    case ValueType::uint64:
    case ValueType::int64: return true;
    default: return false;
  }
}

/// ggml type names, so a refusal names the type a user would recognise.
const char* ggml_type_name(uint32_t id) {
  static constexpr const char* kNames[] = {
      "f32",     "f16",    "q4_0",    "q4_1",  "q4_2 (removed)", "q4_3 (removed)", "q5_0",
      "q5_1",    "q8_0",   "q8_1",    "q2_k",  "q3_k",           "q4_k",           "q5_k",
      "q6_k",    "q8_k",   "iq2_xxs", "iq2_xs", "iq3_xxs",       "iq1_s",          "iq4_nl",
      "iq3_s",   "iq2_s",  "iq4_xs",  "i8",    "i16",            "i32",            "i64",
      "f64",     "iq1_m",  "bf16",    "q4_0_4_4 (removed)", "q4_0_4_8 (removed)",
      "q4_0_8_8 (removed)", "tq1_0",  "tq2_0", "iq4_nl_4_4 (removed)", "iq4_nl_4_8 (removed)",
      "iq4_nl_8_8 (removed)", "mxfp4"};
  return id < std::size(kNames) ? kNames[id] : nullptr;
}

/// The types whose storage layout troupe knows (dtype_traits), for messages: "f32, f16, ...".
/// Which of them a platform can compute is the platform's answer (Platform::verify_quantization).
std::string known_layouts() {
  std::string list;
  for (uint32_t id = 0; id < 256; ++id)
    if (auto tr = dtype_traits(id)) list += (list.empty() ? "" : ", ") + std::string(tr->name);
  return list;
}

std::string quoted(std::string_view s) {
  // Names come from untrusted bytes: keep messages printable and short.
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 96; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > 96) out += "...";
  return out + "'";
}

struct KvEntry {
  std::string key;
  ValueType type;
  ValueType elem_type;  // arrays only
  uint64_t count;       // arrays only
  uint64_t value_pos;   // scalar/string: the value; array: the first element
};

/// Everything parsed from one file; GgufFile::Impl is this plus nothing.
struct GgufState {
  std::unique_ptr<detail::MappedFile> mapping;  // null for from_memory
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint32_t version = 0;
  std::vector<KvEntry> kvs;
  StringMap<size_t> kv_index;
  std::vector<WeightTensor> tensors;
  StringMap<size_t> tensor_index;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_start = 0;
  uint64_t tensor_bytes = 0;

  const KvEntry* find(std::string_view key) const {
    auto it = kv_index.find(key);
    return it == kv_index.end() ? nullptr : &kvs[it->second];
  }

  template <class T>
  T load(uint64_t pos) const {
    T v;
    std::memcpy(&v, data + pos, sizeof(T));
    return v;
  }

  /// An integer value already validated at `pos`; nullopt for a uint64 past int64.
  std::optional<int64_t> int_at(ValueType t, uint64_t pos) const {
    switch (t) {
      case ValueType::uint8: return load<uint8_t>(pos);
      case ValueType::int8: return load<int8_t>(pos);
      case ValueType::boolean: return load<uint8_t>(pos) != 0 ? 1 : 0;
      case ValueType::uint16: return load<uint16_t>(pos);
      case ValueType::int16: return load<int16_t>(pos);
      case ValueType::uint32: return load<uint32_t>(pos);
      case ValueType::int32: return load<int32_t>(pos);
      case ValueType::int64: return load<int64_t>(pos);
      case ValueType::uint64: {
        auto v = load<uint64_t>(pos);
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return static_cast<int64_t>(v);
      }
      default: return std::nullopt;
    }
  }

  std::string_view string_at(uint64_t pos) const {
    auto len = load<uint64_t>(pos);
    return {reinterpret_cast<const char*>(data + pos + 8), static_cast<size_t>(len)};
  }
};

}  // namespace

struct GgufFile::Impl : GgufState {};

namespace {

/// One pass over the header, metadata and tensor infos, filling an Impl.
class Parser {
 public:
  explicit Parser(GgufState& f) : f_(f), cur_(f.data, f.size) {}

  Status run() {
    TROUPE_RETURN_IF_ERROR(parse_header());
    for (uint64_t i = 0; i < kv_count_; ++i) TROUPE_RETURN_IF_ERROR(parse_kv(i));
    TROUPE_RETURN_IF_ERROR(read_alignment());
    std::vector<uint64_t> offsets;
    offsets.reserve(reserve_hint(tensor_count_));
    f_.tensors.reserve(reserve_hint(tensor_count_));
    for (uint64_t i = 0; i < tensor_count_; ++i) TROUPE_RETURN_IF_ERROR(parse_tensor_info(i, &offsets));
    return place_tensors(offsets);
  }

 private:
  // Counts are bounded by the file's bytes, yet a lying header should not make
  // us allocate several times the file size up front: grow past this instead.
  static size_t reserve_hint(uint64_t count) { return static_cast<size_t>(std::min<uint64_t>(count, 4096)); }

  static Status fail(uint64_t at, const std::string& what) {
    return data_loss("GGUF byte " + std::to_string(at) + ": " + what);
  }
  Status truncated(uint64_t at, const std::string& what) const {
    return fail(at, "file ends (at " + std::to_string(f_.size) + " bytes) inside " + what);
  }

  Status parse_header() {
    char magic[4];
    if (!cur_.read(&magic)) return truncated(0, "the magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) {
      return fail(0, "not a GGUF file: magic is " + quoted(std::string_view(magic, 4)) +
                         ", expected 'GGUF'");
    }
    uint32_t version = 0;
    if (!cur_.read(&version)) return truncated(4, "the version");
    if (version == 1) {
      return fail(4, "GGUF version 1 is not supported (only versions 2 and 3); "
                     "re-convert the model with a recent llama.cpp");
    }
    if (version != 2 && version != 3) {
      std::string hint;
      // A big-endian file has its version bytes reversed.
      if ((version & 0xffffu) == 0 && (version >> 24) <= 3) hint = " (a big-endian file? only little-endian is supported)";
      return fail(4, "unsupported GGUF version " + std::to_string(version) + hint);
    }
    f_.version = version;
    if (!cur_.read(&tensor_count_)) return truncated(8, "the tensor count");
    if (!cur_.read(&kv_count_)) return truncated(16, "the metadata count");
    const uint64_t left = cur_.remaining();
    if (tensor_count_ > left / kMinTensorInfoBytes) {
      return fail(8, "tensor count " + std::to_string(tensor_count_) + " cannot fit in the " +
                         std::to_string(left) + " bytes that follow the header");
    }
    if (kv_count_ > left / kMinKvBytes ||
        kv_count_ * kMinKvBytes + tensor_count_ * kMinTensorInfoBytes > left) {
      return fail(16, "metadata count " + std::to_string(kv_count_) + " (with " +
                          std::to_string(tensor_count_) + " tensors) cannot fit in the " +
                          std::to_string(left) + " bytes that follow the header");
    }
    f_.kvs.reserve(reserve_hint(kv_count_));
    return {};
  }

  Status read_string(const std::string& what, std::string_view* out) {
    const uint64_t at = cur_.pos();
    uint64_t len = 0;
    if (cur_.read_string(out, &len)) return {};
    return string_error(at, len, what);
  }

  Status string_error(uint64_t at, uint64_t len, const std::string& what) const {
    if (cur_.remaining() < 8) return truncated(at, "the length of " + what);
    return fail(at, "length " + std::to_string(len) + " of " + what + " exceeds the " +
                        std::to_string(cur_.remaining() - 8) + " bytes left in the file");
  }

  Status read_value_type(const std::string& what, ValueType* out) {
    const uint64_t at = cur_.pos();
    uint32_t raw = 0;
    if (!cur_.read(&raw)) return truncated(at, "the type of " + what);
    if (raw > kMaxValueType) return fail(at, "unknown value type " + std::to_string(raw) + " for " + what);
    *out = static_cast<ValueType>(raw);
    return {};
  }

  /// Steps over one value of type `t`, checking every length; `depth` counts enclosing arrays.
  Status skip_value(ValueType t, const std::string& what, int depth) {
    const uint64_t at = cur_.pos();
    if (t == ValueType::string) {
      std::string_view s;
      return read_string(what, &s);
    }
    if (t != ValueType::array) {
      if (!cur_.skip(scalar_size(t))) return truncated(at, std::string(value_type_name(t)) + " value of " + what);
      return {};
    }
    if (depth + 1 > kMaxArrayDepth) {
      return fail(at, what + " nests arrays more than " + std::to_string(kMaxArrayDepth) + " deep");
    }
    ValueType elem{};
    uint64_t count = 0;
    TROUPE_RETURN_IF_ERROR(read_array_header(what, &elem, &count));
    return skip_elements(elem, count, what, depth + 1);
  }

  Status read_array_header(const std::string& what, ValueType* elem, uint64_t* count) {
    TROUPE_RETURN_IF_ERROR(read_value_type("the elements of " + what, elem));
    const uint64_t at = cur_.pos();
    if (!cur_.read(count)) return truncated(at, "the element count of " + what);
    const uint64_t left = cur_.remaining();
    const uint64_t min_elem = *elem == ValueType::string  ? 8
                              : *elem == ValueType::array ? kMinArrayBytes
                                                          : scalar_size(*elem);
    if (*count > left / min_elem) {
      return fail(at, "array " + what + " claims " + std::to_string(*count) + " " +
                          value_type_name(*elem) + " elements but only " + std::to_string(left) +
                          " bytes are left");
    }
    return {};
  }

  Status skip_elements(ValueType elem, uint64_t count, const std::string& what, int depth) {
    const uint64_t fixed = scalar_size(elem);
    if (fixed != 0) {
      // The count was bounded by the bytes left, so this cannot overflow or over-run.
      if (!cur_.skip(count * fixed)) return truncated(cur_.pos(), what);
      return {};
    }
    for (uint64_t i = 0; i < count; ++i) {
      if (elem == ValueType::string) {
        // Hot path for vocabularies: build the element's name only on failure.
        const uint64_t at = cur_.pos();
        std::string_view s;
        uint64_t len = 0;
        if (!cur_.read_string(&s, &len)) return string_error(at, len, "element " + std::to_string(i) + " of " + what);
        continue;
      }
      TROUPE_RETURN_IF_ERROR(skip_value(elem, "element " + std::to_string(i) + " of " + what, depth));
    }
    return {};
  }

  Status parse_kv(uint64_t index) {
    const uint64_t at = cur_.pos();
    std::string_view key;
    TROUPE_RETURN_IF_ERROR(read_string("the key of metadata entry " + std::to_string(index), &key));
    const std::string what = "key " + quoted(key);
    if (f_.kv_index.count(key) != 0) return fail(at, "duplicate metadata " + what);
    KvEntry kv{std::string(key), ValueType::uint8, ValueType::uint8, 0, 0};
    TROUPE_RETURN_IF_ERROR(read_value_type(what, &kv.type));
    if (kv.type == ValueType::array) {
      TROUPE_RETURN_IF_ERROR(read_array_header(what, &kv.elem_type, &kv.count));
      kv.value_pos = cur_.pos();
      TROUPE_RETURN_IF_ERROR(skip_elements(kv.elem_type, kv.count, what, 1));
    } else {
      kv.value_pos = cur_.pos();
      TROUPE_RETURN_IF_ERROR(skip_value(kv.type, what, 0));
    }
    f_.kv_index.emplace(kv.key, f_.kvs.size());
    f_.kvs.push_back(std::move(kv));
    return {};
  }

  Status read_alignment() {
    const KvEntry* kv = f_.find("general.alignment");
    if (kv == nullptr) return {};
    std::optional<int64_t> v = is_integer(kv->type) ? f_.int_at(kv->type, kv->value_pos) : std::nullopt;
    if (!v || *v <= 0 || (*v & (*v - 1)) != 0 || *v > (int64_t{1} << 30)) {
      return fail(kv->value_pos, "general.alignment must be a power of two integer up to 2^30, got " +
                                     (v ? std::to_string(*v) : std::string(value_type_name(kv->type))));
    }
    f_.alignment = static_cast<uint64_t>(*v);
    return {};
  }

  Status parse_tensor_info(uint64_t index, std::vector<uint64_t>* offsets) {
    const uint64_t at = cur_.pos();
    std::string_view name;
    TROUPE_RETURN_IF_ERROR(read_string("the name of tensor " + std::to_string(index), &name));
    const std::string what = "tensor " + quoted(name);
    if (f_.tensor_index.count(name) != 0) return fail(at, "duplicate " + what);

    WeightTensor t;
    t.name = std::string(name);
    uint64_t pos = cur_.pos();
    uint32_t n_dims = 0;
    if (!cur_.read(&n_dims)) return truncated(pos, "n_dims of " + what);
    if (n_dims < 1 || n_dims > 4) {
      return fail(pos, what + " has n_dims " + std::to_string(n_dims) + " (must be 1..4)");
    }
    t.n_dims = static_cast<int>(n_dims);
    int64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      pos = cur_.pos();
      uint64_t ne = 0;
      if (!cur_.read(&ne)) return truncated(pos, "the shape of " + what);
      if (ne < 1 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return fail(pos, what + " has ne[" + std::to_string(d) + "] = " + std::to_string(ne) +
                             " (must be 1..2^63-1)");
      }
      t.ne[d] = static_cast<int64_t>(ne);
      if (__builtin_mul_overflow(elems, t.ne[d], &elems)) {
        return fail(pos, what + " has more elements than fit in 64 bits");
      }
    }

    pos = cur_.pos();
    uint32_t type_id = 0;
    if (!cur_.read(&type_id)) return truncated(pos, "the type of " + what);
    if (!dtype_traits(type_id)) {
      const char* known = ggml_type_name(type_id);
      if (known == nullptr) {
        return fail(pos, what + " has unknown ggml type id " + std::to_string(type_id));
      }
      return not_supported("GGUF byte " + std::to_string(pos) + ": " + what + " has type " + known +
                           " (id " + std::to_string(type_id) + "), whose storage layout troupe does not know (known: " +
                           known_layouts() + ")");
    }
    t.type = static_cast<DType>(type_id);
    const DTypeTraits tr = traits(t.type);
    if (t.ne[0] % tr.block_elems != 0) {
      return fail(pos, what + " has ne[0] = " + std::to_string(t.ne[0]) + ", not a multiple of the " +
                           std::to_string(tr.block_elems) + "-element blocks of " + std::string(tr.name));
    }
    const int64_t row = row_bytes(t.type, t.ne[0]);
    int64_t nbytes = 0;
    if (row < 0 || __builtin_mul_overflow(row, t.rows(), &nbytes)) {
      return fail(pos, what + " is larger than 2^63 bytes");
    }
    t.nbytes = static_cast<uint64_t>(nbytes);

    pos = cur_.pos();
    uint64_t offset = 0;
    if (!cur_.read(&offset)) return truncated(pos, "the data offset of " + what);
    if (offset % f_.alignment != 0) {
      return fail(pos, what + " has data offset " + std::to_string(offset) + ", not a multiple of the alignment " +
                           std::to_string(f_.alignment));
    }
    offsets->push_back(offset);
    f_.tensor_index.emplace(t.name, f_.tensors.size());
    f_.tensors.push_back(std::move(t));
    return {};
  }

  /// Checks each tensor's byte range against the data section and the others, then sets data pointers.
  Status place_tensors(const std::vector<uint64_t>& offsets) {
    const uint64_t end_of_infos = cur_.pos();
    // end_of_infos <= size <= 2^64-1 and alignment <= 2^30: round up without overflow.
    uint64_t start = end_of_infos;
    if (start % f_.alignment != 0) {
      const uint64_t pad = f_.alignment - start % f_.alignment;
      start = start > std::numeric_limits<uint64_t>::max() - pad ? std::numeric_limits<uint64_t>::max() : start + pad;
    }
    if (f_.tensors.empty()) {
      f_.data_start = std::min(start, f_.size);  // vocab-only files may end right after their metadata
      return {};
    }
    if (start > f_.size) {
      return fail(end_of_infos, "the tensor data section would start at byte " + std::to_string(start) +
                                    ", past the end of the file (" + std::to_string(f_.size) + " bytes)");
    }
    f_.data_start = start;
    const uint64_t section = f_.size - start;
    for (size_t i = 0; i < f_.tensors.size(); ++i) {
      WeightTensor& t = f_.tensors[i];
      if (offsets[i] > section || t.nbytes > section - offsets[i]) {
        return fail(start, "tensor " + quoted(t.name) + " spans data bytes [" + std::to_string(offsets[i]) + ", " +
                               std::to_string(offsets[i]) + " + " + std::to_string(t.nbytes) +
                               ") but the data section holds " + std::to_string(section) + " bytes");
      }
      t.data = f_.data + start + offsets[i];
    }
    // Overlapping tensors would alias weights: a sign of a corrupt file.
    std::vector<size_t> order(f_.tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
    for (size_t k = 1; k < order.size(); ++k) {
      const size_t prev = order[k - 1], cur = order[k];
      if (offsets[prev] + f_.tensors[prev].nbytes > offsets[cur]) {
        return fail(start + offsets[cur], "tensor " + quoted(f_.tensors[cur].name) + " overlaps tensor " +
                                              quoted(f_.tensors[prev].name));
      }
    }
    // Disjoint ranges inside the file: the sum cannot overflow.
    for (const WeightTensor& t : f_.tensors) f_.tensor_bytes += t.nbytes;
    return {};
  }

  GgufState& f_;
  ByteCursor cur_;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
};

}  // namespace

GgufFile::GgufFile() : impl_(std::make_unique<Impl>()) {}
GgufFile::~GgufFile() = default;

Status GgufFile::release_pages() const {
  if (!impl_->mapping)
    return not_supported("a model held in memory (not mapped from a file) cannot drop its weights: they would have "
                         "nowhere to come back from");
  return impl_->mapping->release_pages();
}

Result<std::unique_ptr<GgufFile>> GgufFile::from_memory(const void* data, size_t size) {
  if (data == nullptr && size != 0) return invalid_argument("GGUF: null buffer");
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->impl_->data = static_cast<const uint8_t*>(data);
  file->impl_->size = size;
  TROUPE_RETURN_IF_ERROR(Parser(*file->impl_).run());
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  auto mapped = detail::MappedFile::open(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->impl_->data = mapped.value()->data();
  file->impl_->size = mapped.value()->size();
  file->impl_->mapping = std::move(mapped.value());
  Status st = Parser(*file->impl_).run();
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  return file;
}

uint32_t GgufFile::version() const { return impl_->version; }

std::string GgufFile::architecture() const { return get_string("general.architecture").value_or(""); }

bool GgufFile::has(std::string_view key) const { return impl_->find(key) != nullptr; }

std::optional<ValueType> GgufFile::type_of(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr) return std::nullopt;
  return kv->type;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr || (!is_integer(kv->type) && kv->type != ValueType::boolean)) return std::nullopt;
  return impl_->int_at(kv->type, kv->value_pos);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr) return std::nullopt;
  if (kv->type == ValueType::float32) return impl_->load<float>(kv->value_pos);
  if (kv->type == ValueType::float64) return impl_->load<double>(kv->value_pos);
  return std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr || kv->type != ValueType::boolean) return std::nullopt;
  return impl_->load<uint8_t>(kv->value_pos) != 0;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr || kv->type != ValueType::string) return std::nullopt;
  return std::string(impl_->string_at(kv->value_pos));
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr || kv->type != ValueType::array || kv->elem_type != ValueType::string) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(kv->count);
  uint64_t pos = kv->value_pos;
  for (uint64_t i = 0; i < kv->count; ++i) {
    std::string_view s = impl_->string_at(pos);
    out.emplace_back(s);
    pos += 8 + s.size();
  }
  return out;
}

std::optional<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr || kv->type != ValueType::array || kv->elem_type != ValueType::float32) return std::nullopt;
  std::vector<float> out(kv->count);
  if (!out.empty()) std::memcpy(out.data(), impl_->data + kv->value_pos, out.size() * sizeof(float));
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const KvEntry* kv = impl_->find(key);
  if (kv == nullptr || kv->type != ValueType::array || !is_integer(kv->elem_type)) return std::nullopt;
  const uint64_t step = scalar_size(kv->elem_type);
  std::vector<int64_t> out;
  out.reserve(kv->count);
  for (uint64_t i = 0; i < kv->count; ++i) {
    std::optional<int64_t> v = impl_->int_at(kv->elem_type, kv->value_pos + i * step);
    if (!v) return std::nullopt;  // a uint64 element past int64
    out.push_back(*v);
  }
  return out;
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(impl_->kvs.size());
  for (const KvEntry& kv : impl_->kvs) out.push_back(kv.key);
  return out;
}

const std::vector<WeightTensor>& GgufFile::tensors() const { return impl_->tensors; }

const WeightTensor* GgufFile::tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

uint64_t GgufFile::file_size() const { return impl_->size; }
uint64_t GgufFile::tensor_data_bytes() const { return impl_->tensor_bytes; }

}  // namespace troupe::gguf
