// Writes GGUF v3 files: metadata entries in insertion order, then tensor
// infos, then each tensor's bytes at an offset aligned to 32. Tensor bytes are
// produced row by row by a callback, so a file is streamed without holding the
// whole model, and an in-memory image can be filled by several threads.
// Reading the result back is GgufFile's job (open or from_memory).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "troupe/dtype.hpp"
#include "troupe/status.hpp"

namespace troupe::gguf {

/// A GGUF image in memory: the GgufFile over page-aligned bytes that it owns.
struct GgufImage {
  std::shared_ptr<const GgufFile> file;
  uint64_t size = 0;  // bytes of the image (as a file)
};

class GgufBuilder {
 public:
  /// Writes rows [begin, end) of a tensor to `dst` (row_bytes each, contiguous). Called
  /// from any thread, possibly concurrently for disjoint ranges of one tensor.
  using FillRows = std::function<void(uint8_t* dst, int64_t begin, int64_t end)>;

  static constexpr uint64_t kAlignment = 32;

  // Metadata (GGUF value types: uint32, uint64, float32, bool, string, arrays of int32/float32/string).
  void set_u32(std::string key, uint32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_i32_array(std::string key, std::vector<int32_t> v);
  void set_f32_array(std::string key, std::vector<float> v);
  void set_string_array(std::string key, std::vector<std::string> v);

  /// A tensor of `type` with ne = {ne0, rows} (rows == 0: a vector of ne0 elements).
  /// invalid_argument when ne0 is not a whole number of `type`'s blocks, or the name repeats.
  Status add_tensor(std::string name, DType type, int64_t ne0, int64_t rows, FillRows fill);

  /// A tensor with ne = {ne0, ne1, ne2} (llama.cpp's merged experts: ne2 experts of ne1 rows);
  /// its rows, ne1 * ne2 of them, are filled as add_tensor's.
  Status add_tensor_3d(std::string name, DType type, int64_t ne0, int64_t ne1, int64_t ne2, FillRows fill);

  /// Bytes of the whole file.
  uint64_t size() const;
  size_t num_tensors() const { return tensors_.size(); }

  /// Writes the file (replacing `path`): header and metadata first, then each tensor's
  /// rows in chunks of a few MiB. Errors name the path.
  Status write_file(const std::string& path) const;
  /// Builds the image in memory, filling tensors on `threads` threads (0: hardware
  /// concurrency), and parses it with GgufFile::from_memory.
  Result<GgufImage> build_in_memory(int threads = 0) const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint8_t> value;  // type tag and encoded value
  };
  struct Tensor {
    std::string name;
    DType type;
    int64_t ne0 = 0, rows = 0;  // rows 0: 1-D
    int64_t ne1 = 0, ne2 = 0;   // ne2 > 0: 3-D, rows = ne1 * ne2
    uint64_t row_bytes = 0, nbytes = 0, offset = 0;
    FillRows fill;
  };
  /// Header, metadata and tensor infos, padded to the alignment.
  std::vector<uint8_t> header() const;
  Entry& entry(std::string key, uint32_t type);

  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  uint64_t data_bytes_ = 0;
};

}  // namespace troupe::gguf
