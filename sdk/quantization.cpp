#include "troupe/quantization.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

namespace troupe::weight_formats {
namespace {

// Exact conversions for the reference dequantization of the unquantized built-ins.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

void dequantize_f32(const void* row, int64_t n, float* out) {
  std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
}
void dequantize_f16(const void* row, int64_t n, float* out) {
  const auto* h = static_cast<const uint8_t*>(row);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, h + 2 * i, 2);
    out[i] = half_to_float(v);
  }
}
void dequantize_bf16(const void* row, int64_t n, float* out) {
  const auto* h = static_cast<const uint8_t*>(row);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, h + 2 * i, 2);
    out[i] = std::bit_cast<float>(static_cast<uint32_t>(v) << 16);
  }
}

WeightFormat builtin(DType id, const char* name, int64_t elems, int64_t bytes, bool quantized,
                     DequantizeRowFn dequantize = nullptr) {
  WeightFormat f;
  f.name = name;
  f.description = quantized ? std::string("GGUF block type ") + name : std::string("GGUF ") + name;
  f.block_elems = elems;
  f.block_bytes = bytes;
  f.quantized = quantized;
  f.dequantize_row = dequantize;
  f.id = id;
  return f;
}

// The built-in GGUF types, in ggml id order: immutable, read without a lock.
const std::vector<WeightFormat>& builtins() {
  static const std::vector<WeightFormat> b = {
      builtin(DType::f32, "f32", 1, 4, false, &dequantize_f32),
      builtin(DType::f16, "f16", 1, 2, false, &dequantize_f16),
      builtin(DType::q4_0, "q4_0", 32, 18, true),
      builtin(DType::q4_1, "q4_1", 32, 20, true),
      builtin(DType::q5_0, "q5_0", 32, 22, true),
      builtin(DType::q5_1, "q5_1", 32, 24, true),
      builtin(DType::q8_0, "q8_0", 32, 34, true),
      builtin(DType::q8_1, "q8_1", 32, 36, true),
      builtin(DType::q2_k, "q2_k", 256, 84, true),
      builtin(DType::q3_k, "q3_k", 256, 110, true),
      builtin(DType::q4_k, "q4_k", 256, 144, true),
      builtin(DType::q5_k, "q5_k", 256, 176, true),
      builtin(DType::q6_k, "q6_k", 256, 210, true),
      builtin(DType::q8_k, "q8_k", 256, 292, true),
      builtin(DType::iq4_nl, "iq4_nl", 32, 18, true),
      builtin(DType::iq4_xs, "iq4_xs", 256, 136, true),
      builtin(DType::bf16, "bf16", 1, 2, false, &dequantize_bf16),
      // GGUF type 39 (ggml's GGML_TYPE_MXFP4, gpt-oss's experts): {u8 e, u8 qs[16]} per 32
      // values, an E8M0 scale and E2M1 codes. No DType enumerator: the id is enough.
      builtin(static_cast<DType>(39), "mxfp4", 32, 17, true),
  };
  return b;
}

struct Registry {
  std::mutex mu;
  std::deque<WeightFormat> plugins;  // index = id - kFirstPluginFormatId; a deque keeps addresses
  std::map<std::pair<std::string, std::string>, OpFn, std::less<>> kernels;  // (device type, op) -> fn
};
Registry& registry() {
  static Registry r;
  return r;
}

bool same(const WeightFormat& a, const WeightFormat& b) {
  return a.name == b.name && a.block_elems == b.block_elems && a.block_bytes == b.block_bytes &&
         a.row_header_bytes == b.row_header_bytes && a.quantized == b.quantized &&
         a.dequantize_row == b.dequantize_row && a.quantize_row == b.quantize_row;
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

}  // namespace

Result<DType> register_format(const WeightFormat& format) {
  if (!valid_name(format.name))
    return invalid_argument("weight format name '" + format.name +
                            "' must be 1 to 64 characters of a-z, 0-9 and _ (it is part of op names)");
  if (format.block_elems < 1 || format.block_bytes < 1 || format.row_header_bytes < 0)
    return invalid_argument("weight format " + format.name + ": blocks of " + std::to_string(format.block_elems) +
                            " values in " + std::to_string(format.block_bytes) + " bytes with a row header of " +
                            std::to_string(format.row_header_bytes) + " bytes is not a layout");
  if (format.dequantize_row == nullptr)
    return invalid_argument("weight format " + format.name + " has no reference dequantization (dequantize_row)");
  if (format.name == "gguf")
    return invalid_argument("weight format name gguf is taken: --quantization gguf means the file's own types");
  for (const WeightFormat& b : builtins())
    if (b.name == format.name)
      return invalid_argument("weight format " + format.name +
                              " is a built-in GGUF type; a plugin format needs its own name");
  auto& r = registry();
  std::lock_guard lock(r.mu);
  for (const WeightFormat& f : r.plugins) {
    if (f.name != format.name) continue;
    if (same(f, format)) return f.id;  // the same registration again (plugins may register twice)
    return invalid_argument("weight format " + format.name + " is already registered with another layout or functions");
  }
  WeightFormat added = format;
  added.id = static_cast<DType>(kFirstPluginFormatId + static_cast<uint32_t>(r.plugins.size()));
  r.plugins.push_back(std::move(added));
  return r.plugins.back().id;
}

Status register_kernel(std::string_view device_type, std::string_view op_name, OpFn fn) {
  if (device_type.empty() || op_name.empty() || fn == nullptr)
    return invalid_argument("register_kernel needs a device type, an op name and a function");
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto key = std::make_pair(std::string(device_type), std::string(op_name));
  auto it = r.kernels.find(key);
  if (it != r.kernels.end()) {
    if (it->second == fn) return {};
    return invalid_argument("a kernel " + key.second + " for platform " + key.first + " is already registered");
  }
  r.kernels.emplace(std::move(key), fn);
  return {};
}

OpFn find_kernel(std::string_view device_type, std::string_view op_name) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.kernels.find(std::make_pair(std::string(device_type), std::string(op_name)));
  return it == r.kernels.end() ? nullptr : it->second;
}

const WeightFormat* find(std::string_view name) {
  for (const WeightFormat& b : builtins())
    if (b.name == name) return &b;
  auto& r = registry();
  std::lock_guard lock(r.mu);
  for (const WeightFormat& f : r.plugins)
    if (f.name == name) return &f;
  return nullptr;
}

const WeightFormat* find(DType id) {
  const auto v = static_cast<uint32_t>(id);
  if (v < kFirstPluginFormatId) {
    for (const WeightFormat& b : builtins())
      if (b.id == id) return &b;
    return nullptr;
  }
  auto& r = registry();
  std::lock_guard lock(r.mu);
  const uint32_t index = v - kFirstPluginFormatId;
  return index < r.plugins.size() ? &r.plugins[index] : nullptr;
}

std::vector<const WeightFormat*> all() {
  std::vector<const WeightFormat*> out;
  for (const WeightFormat& b : builtins()) out.push_back(&b);
  auto& r = registry();
  std::lock_guard lock(r.mu);
  for (const WeightFormat& f : r.plugins) out.push_back(&f);
  return out;
}

std::vector<std::string> load_time_methods() {
  std::vector<std::string> out;
  for (const WeightFormat* f : all())
    if (f->quantize_row != nullptr) out.push_back(f->name);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_builtin(DType id) { return static_cast<uint32_t>(id) < kFirstPluginFormatId && find(id) != nullptr; }

std::string matmul_op_name(std::string_view format_name) { return "matmul." + std::string(format_name) + ".v1"; }

WeightMatmulFn find_matmul(const Ops& ops, DType id) {
  const WeightFormat* f = find(id);
  if (f == nullptr || is_builtin(id)) return nullptr;
  return reinterpret_cast<WeightMatmulFn>(ops.find_op(matmul_op_name(f->name)));
}

Status no_kernel(DType id, std::string_view platform) {
  const WeightFormat* f = find(id);
  if (f == nullptr)
    return not_supported("weights of type id " + std::to_string(static_cast<uint32_t>(id)) +
                         " are of no registered format (is the plugin that adds it loaded? see `troupe plugins`)");
  return not_supported("weight format " + f->name + " has no kernel on platform " + std::string(platform) +
                       " (it offers no op " + matmul_op_name(f->name) + ")");
}

}  // namespace troupe::weight_formats
