// GGUF v2/v3 model files, memory-mapped and validated before use: every
// count, offset, size and type is checked, so a truncated or malicious file
// yields a data_loss Status and never an over-read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::gguf {

/// GGUF metadata value types (gguf_type).
enum class ValueType : uint32_t {
  uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6,
  boolean = 7, string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

class GgufFile {
 public:
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  /// Map and validate the file at `path`.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  /// Validate a buffer the caller keeps alive (tests, the fuzzer).
  static Result<std::unique_ptr<GgufFile>> from_memory(const void* data, size_t size);

  uint32_t version() const;
  /// general.architecture ("llama", "qwen2", ...), or "" when absent.
  std::string architecture() const;

  bool has(std::string_view key) const;
  std::optional<ValueType> type_of(std::string_view key) const;
  /// Scalars: any integer type converts to int64 (uint64 beyond int64 max: nullopt);
  /// floats convert to double; bools are ints 0/1 for get_int and true/false for get_bool.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  /// Arrays; nullopt when absent or of another element type.
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;   // float32 elements
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;   // any integer elements
  /// All metadata keys in file order.
  std::vector<std::string> keys() const;

  /// Tensors in file order; data points into the mapping (valid while this object lives).
  const std::vector<WeightTensor>& tensors() const;
  const WeightTensor* tensor(std::string_view name) const;
  /// Bytes of the whole file / of all tensor data.
  uint64_t file_size() const;
  uint64_t tensor_data_bytes() const;
  /// Drops the resident pages of a mapped file (they come back from the file when read);
  /// not_supported for a buffer (from_memory), whose bytes have nowhere to come back from.
  Status release_pages() const;

 private:
  GgufFile();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// troupe::ModelSource over a GgufFile (for Worker::load_model).
class GgufModelSource final : public ModelSource {
 public:
  explicit GgufModelSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}
  std::string architecture() const override { return file_->architecture(); }
  const WeightTensor* tensor(std::string_view name) const override { return file_->tensor(name); }
  std::optional<int64_t> get_int(std::string_view key) const override { return file_->get_int(key); }
  std::optional<double> get_float(std::string_view key) const override { return file_->get_float(key); }
  std::optional<std::string> get_string(std::string_view key) const override { return file_->get_string(key); }
  Status release_pages() const override { return file_->release_pages(); }
  const GgufFile& file() const { return *file_; }

 private:
  std::shared_ptr<const GgufFile> file_;
};

}  // namespace troupe::gguf
