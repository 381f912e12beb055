#include "platforms/cuda/cuda_graph_inputs.hpp"

#include <algorithm>

namespace troupe::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kMergeGap = 64;  // bytes: copying a small gap is cheaper than another copy call

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Writes value(i) to array[i] for i < n, adding the byte range of the changed elements.
template <class T, class Value>
void write_array(uint8_t* mem, size_t offset, int n, Value value, std::vector<ByteRange>& ranges) {
  auto* a = reinterpret_cast<T*>(mem + offset);
  int lo = -1, hi = -1;
  for (int i = 0; i < n; ++i) {
    const T v = value(i);
    if (a[i] == v) continue;
    a[i] = v;
    if (lo < 0) lo = i;
    hi = i;
  }
  if (lo >= 0)
    ranges.push_back({offset + static_cast<size_t>(lo) * sizeof(T), offset + static_cast<size_t>(hi + 1) * sizeof(T)});
}

}  // namespace

GraphInputsLayout graph_inputs_layout(int rows, size_t width) {
  GraphInputsLayout l;
  const size_t ints = static_cast<size_t>(std::max(rows, 0)) * sizeof(int32_t);
  l.ids = 0;
  l.positions = align_up(ints);
  l.image = align_up(l.positions + ints);
  l.attention = attention_inputs_layout(rows, rows, width);
  l.bytes = l.image + l.attention.bytes;
  return l;
}

GraphInputMirror::GraphInputMirror(int rows, size_t width)
    : rows_(rows), width_(width), layout_(graph_inputs_layout(rows, width)),
      table_len_(static_cast<size_t>(std::max(rows, 0)), 0) {}

void GraphInputMirror::reset(uint8_t* mem) {
  std::fill(mem, mem + layout_.bytes, uint8_t{0});
  uint8_t* image = mem + layout_.image;
  auto* slots = reinterpret_cast<int64_t*>(image);
  auto* starts = reinterpret_cast<int32_t*>(image + layout_.attention.query_start);
  auto* lens = reinterpret_cast<int32_t*>(image + layout_.attention.seq_lens);
  auto* tables = reinterpret_cast<int32_t*>(image + layout_.attention.block_tables);
  for (int s = 0; s < rows_; ++s) {
    slots[s] = -1;
    lens[s] = 1;
    starts[s] = s;
  }
  starts[rows_] = rows_;  // constant: row s is token s in every graph size
  std::fill(tables, tables + static_cast<size_t>(rows_) * width_, -1);
  std::fill(table_len_.begin(), table_len_.end(), 0);
}

std::vector<ByteRange> GraphInputMirror::update(uint8_t* mem, const ForwardBatch& b, int size) {
  std::vector<ByteRange> ranges;
  const int S = std::min(b.num_seqs(), size);
  size = std::min(size, rows_);
  const auto at = [](const auto& v, int i) { return v[static_cast<size_t>(i)]; };
  write_array<int32_t>(mem, layout_.ids, size, [&](int i) { return i < S ? at(b.token_ids, i) : 0; }, ranges);
  write_array<int32_t>(mem, layout_.positions, size, [&](int i) { return i < S ? at(b.positions, i) : 0; }, ranges);
  const size_t image = layout_.image;
  // Padding rows write no KV slot and read one (empty) position.
  write_array<int64_t>(mem, image, size, [&](int i) { return i < S ? at(b.slot_mapping, i) : int64_t{-1}; }, ranges);
  write_array<int32_t>(mem, image + layout_.attention.seq_lens, size,
                       [&](int i) { return i < S ? at(b.seq_lens, i) : 1; }, ranges);
  const size_t tables = image + layout_.attention.block_tables;
  for (int s = 0; s < size; ++s) {
    static const std::vector<int32_t> kNone;
    const std::vector<int32_t>& t = s < S ? at(b.block_tables, s) : kNone;
    const int now = static_cast<int>(std::min(t.size(), width_));
    const int before = table_len_[static_cast<size_t>(s)];
    write_array<int32_t>(mem, tables + static_cast<size_t>(s) * width_ * sizeof(int32_t), std::max(now, before),
                         [&](int j) { return j < now ? t[static_cast<size_t>(j)] : -1; }, ranges);
    table_len_[static_cast<size_t>(s)] = now;
  }
  std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& c) { return a.begin < c.begin; });
  std::vector<ByteRange> merged;
  for (const ByteRange& r : ranges) {
    if (!merged.empty() && r.begin <= merged.back().end + kMergeGap)
      merged.back().end = std::max(merged.back().end, r.end);
    else
      merged.push_back(r);
  }
  if (merged.size() > kMaxRanges) merged = {ByteRange{merged.front().begin, merged.back().end}};
  return merged;
}

}  // namespace troupe::cuda
