// What the decode CUDA graphs read between replays, as bytes: token ids,
// positions and the attention arrays (slot mapping, query starts, sequence
// lengths, block tables `width` wide), laid out once for the largest graph size
// so that every size reads the first rows of the same image. GraphInputMirror
// keeps a host copy of what the device image holds and, for each step, writes
// the step padded to its graph size and reports only the byte ranges that
// changed: a decode step changes each row's position, slot and length and now
// and then one table entry, not the batch x width tables. Host code only
// (tested without a GPU); CudaGraphRunner copies the ranges to the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "platforms/cuda/cuda_attention.hpp"
#include "troupe/model.hpp"

namespace troupe::cuda {

struct GraphInputsLayout {
  size_t ids = 0, positions = 0, image = 0, bytes = 0;  // byte offsets; image: the attention arrays
  AttentionInputsLayout attention;                      // offsets inside the image
};
/// `rows` sequences of one token, tables `width` wide.
GraphInputsLayout graph_inputs_layout(int rows, size_t width);

struct ByteRange {
  size_t begin = 0, end = 0;
};

class GraphInputMirror {
 public:
  /// Copies per step at most this many ranges; more are merged into one.
  static constexpr size_t kMaxRanges = 16;

  GraphInputMirror(int rows, size_t width);
  const GraphInputsLayout& layout() const { return layout_; }
  int rows() const { return rows_; }
  size_t width() const { return width_; }

  /// Writes the image of no sequences into `mem` (layout().bytes bytes): every row padding
  /// (token 0, position 0, no KV slot (-1), length 1, an empty table), query starts 0..rows.
  /// The whole image is then to be copied.
  void reset(uint8_t* mem);
  /// Writes decode step `b` (one token per sequence, at most `size` <= rows sequences, tables
  /// at most width) padded to `size` rows into `mem`, which holds what reset() or the last
  /// update() wrote, and returns the byte ranges that changed (sorted, disjoint).
  std::vector<ByteRange> update(uint8_t* mem, const ForwardBatch& b, int size);

 private:
  int rows_;
  size_t width_;
  GraphInputsLayout layout_;
  std::vector<int32_t> table_len_;  // entries of each row's table that are not -1
};

}  // namespace troupe::cuda
