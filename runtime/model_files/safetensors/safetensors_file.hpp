// safetensors files (Hugging Face's weight format), memory-mapped and
// validated before use. The layout:
//   u64 N (little-endian), N bytes of JSON header, then the data section.
//   The header is an object: "__metadata__" -> {string: string} (optional),
//   and for every tensor  name -> {"dtype": "F32", "shape": [d0, d1, ...],
//   "data_offsets": [begin, end]}  with [begin, end) relative to the data
//   section and the shape in PyTorch order (slowest dimension first).
// Every length, offset, shape and size is checked before it is trusted, so a
// truncated or malicious file yields a data_loss Status and never an
// over-read. The reader does not log, so the fuzzer can link it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::safetensors {

/// Largest JSON header accepted (as the reference implementation: 100 MB).
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

/// One entry of the header, whatever its dtype.
struct TensorEntry {
  std::string name;
  std::string dtype;            // as written: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;   // as written: PyTorch order, slowest dimension first ([] = a scalar)
  uint64_t begin = 0;           // byte range [begin, end) inside the data section
  uint64_t end = 0;
  int weight_index = -1;        // index into SafetensorsFile::tensors(), -1 when troupe cannot use it
  std::string unsupported;      // why not, when weight_index is -1 ("dtype I64 ...")
};

class SafetensorsFile {
 public:
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  /// Map and validate the file at `path`. Errors name the path: not_found
  /// when it does not exist, data_loss ("<path>: safetensors byte N: ...")
  /// when it is malformed.
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  /// Validate a buffer the caller keeps alive (tests, the fuzzer); errors name `name`.
  static Result<std::unique_ptr<SafetensorsFile>> from_memory(const void* data, size_t size,
                                                              const std::string& name = "<memory>");

  /// The tensors troupe can use: dtype F32, F16 or BF16 and 0..4 dimensions,
  /// none of them 0 (a scalar becomes ne = {1}). The shape is reversed into
  /// ne (ne[0] is the fastest dimension), so a PyTorch Linear weight of shape
  /// [out, in] has ne = {in, out}. `data` points into the mapping (valid while
  /// this object lives); it is as aligned as the file makes it (8 + N + begin;
  /// writers pad the header so that N is a multiple of 8).
  /// Ordered by data offset (file order), then by name.
  const std::vector<WeightTensor>& tensors() const;
  /// A usable tensor by name, or nullptr (absent, or of a dtype/shape troupe cannot use).
  const WeightTensor* tensor(std::string_view name) const;
  /// Like tensor() but says why not: not_found ("<name>: no tensor 'x'") or
  /// not_supported naming the tensor and its dtype (or shape).
  Result<const WeightTensor*> require_tensor(std::string_view name) const;

  /// Every header entry (also I64 buffers such as BERT's position_ids), in the order of tensors().
  const std::vector<TensorEntry>& entries() const;
  const TensorEntry* entry(std::string_view name) const;
  /// The "__metadata__" string map (non-string values are skipped).
  const std::map<std::string, std::string, std::less<>>& metadata() const;

  /// The path given to open() (or the name given to from_memory()).
  const std::string& name() const;
  uint64_t file_size() const;
  /// N, the length of the JSON header; the data section starts at byte 8 + N.
  uint64_t header_bytes() const;
  /// Bytes of the data section (the file after the header).
  uint64_t data_bytes() const;

 private:
  SafetensorsFile();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::safetensors
