// safetensors parsing and validation. Nothing from the file is trusted before
// it is checked: the header length against the file, the JSON (parsed without
// exceptions), every field's JSON type, each shape against its dtype's size,
// and each byte range against the data section and the other tensors.
#include "runtime/model_files/safetensors/safetensors_file.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "runtime/model_files/gguf/mapped_file.hpp"
#include "runtime/text/json/json_io.hpp"

namespace troupe::safetensors {

namespace {

using json = nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "the safetensors reader copies the little-endian header length as it is");

/// The dtypes of the format: bits per element, and the troupe type when there is one.
struct DtypeInfo {
  std::string_view name;
  int bits;
  bool usable;  // troupe computes with it
  DType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F32", 32, true, DType::f32},     {"F16", 16, true, DType::f16},      {"BF16", 16, true, DType::bf16},
    {"F64", 64, false, DType::f32},    {"I64", 64, false, DType::f32},     {"U64", 64, false, DType::f32},
    {"I32", 32, false, DType::f32},    {"U32", 32, false, DType::f32},     {"I16", 16, false, DType::f32},
    {"U16", 16, false, DType::f32},    {"I8", 8, false, DType::f32},       {"U8", 8, false, DType::f32},
    {"BOOL", 8, false, DType::f32},    {"F8_E4M3", 8, false, DType::f32},  {"F8_E5M2", 8, false, DType::f32},
    {"F8_E8M0", 8, false, DType::f32}, {"C64", 64, false, DType::f32},     {"F6_E2M3", 6, false, DType::f32},
    {"F6_E3M2", 6, false, DType::f32}, {"F4", 4, false, DType::f32},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

// Names come from untrusted bytes: keep messages printable and short.
std::string quote_name(std::string_view s) {
  std::string out = "'";  // built in steps: g++ 12 warns (-Wrestrict) on "'" + std::string
  out += json_io::printable(s, 96);
  out += '\'';
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    if (i == 8) {
      s += "... " + std::to_string(shape.size()) + " dims";
      break;
    }
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// Everything parsed from one file; SafetensorsFile::Impl is this plus nothing.
struct FileState {
  std::unique_ptr<gguf::detail::MappedFile> mapping;  // null for from_memory
  std::string name;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t header_bytes = 0;
  std::vector<TensorEntry> entries;
  std::vector<WeightTensor> tensors;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> entry_index;
  std::map<std::string, std::string, std::less<>> metadata;

  const TensorEntry* find(std::string_view n) const {
    auto it = entry_index.find(n);
    return it == entry_index.end() ? nullptr : &entries[it->second];
  }
};

class Parser {
 public:
  explicit Parser(FileState& f) : f_(f) {}

  Status run() {
    if (f_.size < 8) {
      return fail(0, "file ends (at " + std::to_string(f_.size) + " bytes) inside the 8-byte header length");
    }
    uint64_t n = 0;
    std::memcpy(&n, f_.data, sizeof(n));
    if (n > kMaxHeaderBytes) {
      return fail(0, "header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(kMaxHeaderBytes) + " bytes (not a safetensors file?)");
    }
    if (n > f_.size - 8) {
      return fail(0, "header length " + std::to_string(n) + " runs past the end of the file (" +
                         std::to_string(f_.size) + " bytes)");
    }
    f_.header_bytes = n;
    data_start_ = 8 + n;
    section_ = f_.size - data_start_;
    TROUPE_RETURN_IF_ERROR(parse_header());
    return place_tensors();
  }

 private:
  static Status fail(uint64_t at, const std::string& what) {
    return data_loss("safetensors byte " + std::to_string(at) + ": " + what);
  }
  static Status bad_header(const std::string& what) { return data_loss("safetensors header: " + what); }

  Status parse_header() {
    const std::string_view text(reinterpret_cast<const char*>(f_.data + 8), static_cast<size_t>(f_.header_bytes));
    json_io::ParseError error;
    json header = json_io::parse(text, &error);
    if (header.is_discarded()) return fail(8 + error.offset, "the header is not valid JSON: " + error.message);
    if (!header.is_object()) {
      return fail(8, std::string("the header is a JSON ") + header.type_name() + ", expected an object");
    }
    f_.entries.reserve(std::min<size_t>(header.size(), 4096));
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        TROUPE_RETURN_IF_ERROR(parse_metadata(it.value()));
        continue;
      }
      TROUPE_RETURN_IF_ERROR(parse_entry(it.key(), it.value()));
    }
    return {};
  }

  Status parse_metadata(const json& m) {
    if (!m.is_object()) {
      return bad_header(std::string("__metadata__ is a JSON ") + m.type_name() + ", expected an object of strings");
    }
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it.value().is_string()) f_.metadata.emplace(it.key(), it.value().get_ref<const std::string&>());
    }
    return {};
  }

  /// A non-negative JSON integer that fits in int64, else nullopt.
  static std::optional<int64_t> non_negative(const json& v) {
    const std::optional<uint64_t> u = json_io::non_negative_integer(v);
    if (!u || *u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }

  static std::string describe(const json& v) {
    if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
    return std::string("a JSON ") + v.type_name();
  }

  Status parse_entry(const std::string& name, const json& v) {
    const std::string what = "tensor " + quote_name(name);
    if (!v.is_object()) {
      return bad_header(what + " is a JSON " + v.type_name() +
                        ", expected an object with \"dtype\", \"shape\" and \"data_offsets\"");
    }
    TensorEntry e;
    e.name = name;

    auto dtype = v.find("dtype");
    if (dtype == v.end() || !dtype->is_string()) {
      return bad_header(what + (dtype == v.end() ? " has no \"dtype\"" : " has a \"dtype\" that is not a string"));
    }
    e.dtype = dtype->get<std::string>();

    auto shape = v.find("shape");
    if (shape == v.end() || !shape->is_array()) {
      return bad_header(what + (shape == v.end() ? " has no \"shape\"" : " has a \"shape\" that is not an array"));
    }
    e.shape.reserve(std::min<size_t>(shape->size(), 8));
    int64_t elems = 1;
    for (size_t d = 0; d < shape->size(); ++d) {
      const json& dim = (*shape)[d];
      std::optional<int64_t> n = non_negative(dim);
      if (!n) {
        return bad_header(what + " has shape[" + std::to_string(d) + "] = " + describe(dim) +
                          ", expected an integer in 0..2^63-1");
      }
      e.shape.push_back(*n);
      if (__builtin_mul_overflow(elems, *n, &elems)) {
        return bad_header(what + " has shape " + shape_text(e.shape) + "..., more elements than fit in 64 bits");
      }
    }

    auto offsets = v.find("data_offsets");
    if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
      return bad_header(what + (offsets == v.end() ? " has no \"data_offsets\""
                                                   : " has \"data_offsets\" that are not an array [begin, end]"));
    }
    std::optional<int64_t> begin = non_negative((*offsets)[0]);
    std::optional<int64_t> end = non_negative((*offsets)[1]);
    if (!begin || !end) {
      return bad_header(what + " has data_offsets [" + describe((*offsets)[0]) + ", " + describe((*offsets)[1]) +
                        "], expected two integers in 0..2^63-1");
    }
    e.begin = static_cast<uint64_t>(*begin);
    e.end = static_cast<uint64_t>(*end);
    if (e.begin > e.end) {
      return bad_header(what + " has data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                        "]: begin is after end");
    }
    if (e.end > section_) {
      return bad_header(what + " has data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                        "] but the data section holds " + std::to_string(section_) + " bytes (the file has " +
                        std::to_string(f_.size) + ")");
    }

    const DtypeInfo* info = find_dtype(e.dtype);
    if (info == nullptr) {
      e.unsupported = "has dtype " + quote_name(e.dtype) + ", which is not a safetensors dtype troupe knows";
    } else {
      // elems < 2^63 and bits <= 64: the bit count fits in unsigned 128 bits, checked in 64.
      uint64_t bits = 0;
      if (__builtin_mul_overflow(static_cast<uint64_t>(elems), static_cast<uint64_t>(info->bits), &bits)) {
        return bad_header(what + " (" + e.dtype + ", shape " + shape_text(e.shape) + ") is larger than 2^64 bits");
      }
      if (bits % 8 != 0) {
        return bad_header(what + " (" + e.dtype + ", shape " + shape_text(e.shape) +
                          ") is not a whole number of bytes");
      }
      if (bits / 8 != e.end - e.begin) {
        return bad_header(what + " (" + e.dtype + ", shape " + shape_text(e.shape) + ") needs " +
                          std::to_string(bits / 8) + " bytes but its data_offsets [" + std::to_string(e.begin) +
                          ", " + std::to_string(e.end) + "] span " + std::to_string(e.end - e.begin));
      }
      if (!info->usable) {
        e.unsupported = "has dtype " + e.dtype + ", which troupe does not support (supported: F32, F16, BF16)";
      } else if (e.shape.size() > 4) {
        e.unsupported = "has " + std::to_string(e.shape.size()) + " dimensions " + shape_text(e.shape) +
                        " (troupe supports at most 4)";
      } else if (elems == 0) {
        e.unsupported = "has an empty shape " + shape_text(e.shape) + " (a dimension is 0)";
      }
    }
    if (f_.entry_index.count(name) != 0) return bad_header("duplicate " + what);  // nlohmann keeps one; defensive
    f_.entry_index.emplace(name, f_.entries.size());
    f_.entries.push_back(std::move(e));
    return {};
  }

  /// Orders the entries by offset, rejects overlapping ranges, builds the WeightTensors.
  Status place_tensors() {
    std::sort(f_.entries.begin(), f_.entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
    });
    // Overlapping tensors would alias weights: a sign of a corrupt file (empty ranges overlap nothing).
    const TensorEntry* prev = nullptr;
    for (const TensorEntry& e : f_.entries) {
      if (e.begin == e.end) continue;
      if (prev != nullptr && prev->end > e.begin) {
        return fail(data_start_ + e.begin, "tensor " + quote_name(e.name) + " (data bytes [" + std::to_string(e.begin) +
                                               ", " + std::to_string(e.end) + ")) overlaps tensor " +
                                               quote_name(prev->name) + " ([" + std::to_string(prev->begin) + ", " +
                                               std::to_string(prev->end) + "))");
      }
      prev = &e;
    }
    f_.entry_index.clear();
    f_.tensors.reserve(f_.entries.size());
    for (size_t i = 0; i < f_.entries.size(); ++i) {
      TensorEntry& e = f_.entries[i];
      f_.entry_index.emplace(e.name, i);
      if (!e.unsupported.empty()) continue;
      WeightTensor t;
      t.name = e.name;
      t.type = find_dtype(e.dtype)->type;
      t.n_dims = e.shape.empty() ? 1 : static_cast<int>(e.shape.size());
      for (size_t d = 0; d < e.shape.size(); ++d) t.ne[d] = e.shape[e.shape.size() - 1 - d];
      t.data = f_.data + data_start_ + e.begin;
      t.nbytes = e.end - e.begin;
      e.weight_index = static_cast<int>(f_.tensors.size());
      f_.tensors.push_back(std::move(t));
    }
    return {};
  }

  FileState& f_;
  uint64_t data_start_ = 0;
  uint64_t section_ = 0;
};

}  // namespace

struct SafetensorsFile::Impl : FileState {};

SafetensorsFile::SafetensorsFile() : impl_(std::make_unique<Impl>()) {}
SafetensorsFile::~SafetensorsFile() = default;

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::from_memory(const void* data, size_t size,
                                                                      const std::string& name) {
  if (data == nullptr && size != 0) return invalid_argument(name + ": null buffer");
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->impl_->name = name;
  file->impl_->data = static_cast<const uint8_t*>(data);
  file->impl_->size = size;
  Status st = Parser(*file->impl_).run();
  if (!st.ok()) return Status(st.code(), name + ": " + st.message());
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto mapped = gguf::detail::MappedFile::open(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->impl_->name = path;
  file->impl_->data = mapped.value()->data();
  file->impl_->size = mapped.value()->size();
  file->impl_->mapping = std::move(mapped.value());
  Status st = Parser(*file->impl_).run();
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  return file;
}

const std::vector<WeightTensor>& SafetensorsFile::tensors() const { return impl_->tensors; }

const WeightTensor* SafetensorsFile::tensor(std::string_view name) const {
  const TensorEntry* e = impl_->find(name);
  return e == nullptr || e->weight_index < 0 ? nullptr : &impl_->tensors[static_cast<size_t>(e->weight_index)];
}

Result<const WeightTensor*> SafetensorsFile::require_tensor(std::string_view name) const {
  const TensorEntry* e = impl_->find(name);
  if (e == nullptr) return not_found(impl_->name + ": no tensor " + quote_name(name));
  if (e->weight_index < 0) return not_supported(impl_->name + ": tensor " + quote_name(name) + " " + e->unsupported);
  return &impl_->tensors[static_cast<size_t>(e->weight_index)];
}

const std::vector<TensorEntry>& SafetensorsFile::entries() const { return impl_->entries; }
const TensorEntry* SafetensorsFile::entry(std::string_view name) const { return impl_->find(name); }
const std::map<std::string, std::string, std::less<>>& SafetensorsFile::metadata() const { return impl_->metadata; }
const std::string& SafetensorsFile::name() const { return impl_->name; }
uint64_t SafetensorsFile::file_size() const { return impl_->size; }
uint64_t SafetensorsFile::header_bytes() const { return impl_->header_bytes; }
uint64_t SafetensorsFile::data_bytes() const { return impl_->size - 8 - impl_->header_bytes; }

}  // namespace troupe::safetensors
