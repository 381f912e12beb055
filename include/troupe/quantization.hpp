// Weight formats: one registry of how weights are stored, which the built-in GGUF types
// and plugins' quantization methods fill the same way (vLLM's QuantizationConfig
// registry). A format names its block layout, its reference dequantization and, for a
// load-time method (vLLM's `--quantization fp8` on an unquantized checkpoint), how an
// f32 row becomes its blocks. The matmul of a plugin format is a kernel found by name,
// matmul_op_name(format) ("matmul.int8_channel.v1"), ggml's supports_op way: a
// platform offers it through Ops::find_op, or a plugin offers one to a platform by its
// device type (register_kernel). A platform without it refuses the model at load time
// with one line naming the format and the platform.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/dtype.hpp"
#include "troupe/model.hpp"
#include "troupe/ops.hpp"
#include "troupe/status.hpp"

namespace troupe {

/// Reference dequantization of one row: the `n` values stored at `row` as f32 into `out`.
using DequantizeRowFn = void (*)(const void* row, int64_t n, float* out);
/// Load-time quantization of one row: `n` f32 values into row_bytes(format, n) bytes at `row`.
using QuantizeRowFn = void (*)(const float* x, int64_t n, void* row);
/// The kernel behind matmul_op_name(format): y[t][o] = sum_i x[t][i] * W[o][i] for
/// t < n_tokens, W of that format with ne = {in, out} (rows may be row_stride apart).
/// `ops` is the platform's own Ops (named ops such as parallel_for.v1 are reached through it).
using WeightMatmulFn = void (*)(Ops& ops, const WeightTensor& w, const float* x, int64_t n_tokens, float* y);

/// One weight format. A row of n values takes row_header_bytes + n / block_elems * block_bytes
/// bytes: blocks of block_elems values, after a header of the row's own (a per-channel scale).
struct WeightFormat {
  std::string name;         // "q4_1", "int8_channel": what --quantization and errors say
  std::string description;  // one line for `troupe plugins` and error messages
  int64_t block_elems = 1;
  int64_t block_bytes = 0;
  int64_t row_header_bytes = 0;
  bool quantized = true;
  /// Reference dequantization (host memory); required for a plugin format. The built-in
  /// quantized GGUF types leave it to the CPU kernels (kernels/cpu/dequantize.cpp).
  DequantizeRowFn dequantize_row = nullptr;
  /// Set for a load-time method: f16, bf16 and f32 matrices of an unquantized file become
  /// this format as the worker loads them (--quantization NAME).
  QuantizeRowFn quantize_row = nullptr;
  /// The id weights of this format carry (WeightTensor::type): a GGUF type id for the
  /// built-ins, kFirstPluginFormatId and up for plugins. Set by register_format.
  DType id = DType::f32;
};

namespace weight_formats {

/// Plugin formats get ids from here up, above every ggml type id.
inline constexpr uint32_t kFirstPluginFormatId = 1024;

/// Registers a plugin format and returns its id. Registering the same format again (same
/// name, layout and functions) returns the same id. invalid_argument for a name already
/// taken by another format (a built-in type's included), a bad layout or no dequantization.
Result<DType> register_format(const WeightFormat& format);
/// Offers `fn` to platforms of `device_type` ("cpu") as their named op `op_name`
/// (matmul_op_name(format) for a format's matmul). A platform that consults the
/// registry (the CPU platform does) returns it from Ops::find_op. Idempotent; another
/// function under a taken name is invalid_argument.
Status register_kernel(std::string_view device_type, std::string_view op_name, OpFn fn);
/// The kernel a plugin offered to platforms of `device_type` as `op_name`, or nullptr.
OpFn find_kernel(std::string_view device_type, std::string_view op_name);

/// The format called `name` or with id `id`, or nullptr. Pointers stay valid for the process.
const WeightFormat* find(std::string_view name);
const WeightFormat* find(DType id);
/// Every format: the built-in GGUF types in id order, then plugin formats in registration order.
std::vector<const WeightFormat*> all();
/// The names of the load-time methods (formats with quantize_row), sorted.
std::vector<std::string> load_time_methods();
/// Whether `id` is one of the built-in GGUF types (below kFirstPluginFormatId).
bool is_builtin(DType id);
/// "matmul.<name>.v1": the named op of a plugin format's matmul (signature WeightMatmulFn).
std::string matmul_op_name(std::string_view format_name);
/// The platform's matmul kernel of plugin format `id`: ops.find_op(matmul_op_name(...)), or nullptr.
WeightMatmulFn find_matmul(const Ops& ops, DType id);
/// not_supported naming the format, the platform and the missing op (Ops::check_weight_type's
/// answer for a plugin format a platform has no kernel for).
Status no_kernel(DType id, std::string_view platform);

}  // namespace weight_formats
}  // namespace troupe
