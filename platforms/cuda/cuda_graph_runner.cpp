#include "platforms/cuda/cuda_graph_runner.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "troupe/log.hpp"

namespace troupe::cuda {

std::vector<int> CudaGraphRunner::capture_sizes(int max_batch) {
  std::vector<int> sizes;
  for (int s : {1, 2, 4})
    if (s <= max_batch) sizes.push_back(s);
  for (int s = 8; s <= max_batch; s += 8) sizes.push_back(s);
  return sizes;
}

Result<std::unique_ptr<CudaGraphRunner>> CudaGraphRunner::create(std::shared_ptr<CudaContext> ctx,
                                                                  CudaAttentionBackend* attention,
                                                                  DeviceAllocator& memory, std::vector<int> sizes,
                                                                  size_t width, int64_t vocab) {
  if (sizes.empty() || width == 0 || vocab <= 0 || attention == nullptr)
    return invalid_argument("CUDA graphs need capture sizes, a table width, a vocabulary and the cuda attention backend");
  std::sort(sizes.begin(), sizes.end());
  std::unique_ptr<CudaGraphRunner> r(new CudaGraphRunner(std::move(ctx), attention, std::move(sizes), width, vocab));
  const int max = r->max_size();
  r->graphs_.resize(r->sizes_.size());
  TROUPE_RETURN_IF_ERROR(r->ids_.allocate(memory, max));
  TROUPE_RETURN_IF_ERROR(r->positions_.allocate(memory, max));
  TROUPE_RETURN_IF_ERROR(
      r->image_.allocate(memory, static_cast<int64_t>(attention_inputs_layout(max, max, width).bytes)));
  TROUPE_RETURN_IF_ERROR(r->out_.allocate(memory, max * vocab));
  return r;
}

CudaGraphRunner::~CudaGraphRunner() { drop_all(); }

void CudaGraphRunner::drop_all() {
  for (Graph& g : graphs_) {
    if (g.exec != nullptr) (void)cudaGraphExecDestroy(g.exec);
    g = Graph();
  }
}

int CudaGraphRunner::captured() const {
  int n = 0;
  for (const Graph& g : graphs_) n += g.exec != nullptr && g.epoch == ctx_->memory_epoch();
  return n;
}

bool CudaGraphRunner::eligible(const ForwardBatch& b) const {
  const int S = b.num_seqs();
  if (S <= 0 || S > max_size() || b.num_tokens() != S || !b.lora_ids.empty()) return false;
  if (static_cast<int>(b.logits_indices.size()) != S || static_cast<int>(b.query_start.size()) != S + 1 ||
      static_cast<int>(b.block_tables.size()) != S || static_cast<int>(b.slot_mapping.size()) != S)
    return false;
  for (int s = 0; s < S; ++s)
    if (b.query_start[static_cast<size_t>(s)] != s || b.logits_indices[static_cast<size_t>(s)] != s ||
        b.block_tables[static_cast<size_t>(s)].size() > width_)
      return false;
  return true;
}

Status CudaGraphRunner::capture(int size, const Forward& forward) {
  const auto at = std::find(sizes_.begin(), sizes_.end(), size);
  if (at == sizes_.end()) return invalid_argument("no CUDA graph size " + std::to_string(size));
  Graph& slot = graphs_[static_cast<size_t>(at - sizes_.begin())];
  if (slot.exec != nullptr) (void)cudaGraphExecDestroy(slot.exec);
  slot = Graph();
  // A decode batch of `size` one-token sequences; its values do not matter (nothing runs
  // while capturing), only its shape and that ids and positions are the bound host arrays.
  ForwardBatch b;
  b.token_ids.assign(static_cast<size_t>(size), 0);
  b.positions.assign(static_cast<size_t>(size), 0);
  b.slot_mapping.assign(static_cast<size_t>(size), -1);
  b.seq_lens.assign(static_cast<size_t>(size), 1);
  b.block_tables.assign(static_cast<size_t>(size), std::vector<int32_t>{0});
  for (int i = 0; i <= size; ++i) b.query_start.push_back(i);
  for (int i = 0; i < size; ++i) b.logits_indices.push_back(i);

  TROUPE_RETURN_IF_ERROR(ctx_->synchronize());  // nothing of an earlier step is in flight
  (void)ctx_->take_error();
  const int64_t n = size * static_cast<int64_t>(sizeof(int32_t));
  ctx_->begin_graph_inputs({{b.token_ids.data(), n, ids_.data()}, {b.positions.data(), n, positions_.data()}});
  attention_->set_graph_image(image_.data(), width_);
  ctx_->mark_capture();  // from now on, freeing anything that exists may leave this graph dangling
  const uint64_t epoch = ctx_->memory_epoch();
  cudaGraph_t graph = nullptr;
  Status st = cuda_check(cudaStreamBeginCapture(ctx_->stream(), cudaStreamCaptureModeThreadLocal),
                         "cudaStreamBeginCapture on " + ctx_->name());
  if (st.ok()) {
    st = forward(b, out_.data());
    const Status ended = cuda_check(cudaStreamEndCapture(ctx_->stream(), &graph), "cudaStreamEndCapture");
    if (st.ok()) st = ended;
  }
  ctx_->end_graph_inputs();
  attention_->set_graph_image(nullptr, 0);
  const Status recorded = ctx_->take_error();  // an op that failed while being captured
  if (st.ok() && !recorded.ok()) st = recorded;
  if (st.ok() && ctx_->memory_epoch() != epoch) st = unavailable("device memory was freed while capturing");
  if (st.ok()) {
    cudaGraphExec_t exec = nullptr;
    st = cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (st.ok()) slot = Graph{exec, epoch};
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (!st.ok()) {
    (void)cudaGetLastError();  // the capture's error is reported, not left for the next call
    return Status(st.code(), "CUDA graph of decode batch " + std::to_string(size) + ": " + st.message());
  }
  return {};
}

void CudaGraphRunner::pack(const ForwardBatch& b, int size) {
  const int S = b.num_seqs();
  ids_host_.assign(static_cast<size_t>(size), 0);
  positions_host_.assign(static_cast<size_t>(size), 0);
  std::copy(b.token_ids.begin(), b.token_ids.end(), ids_host_.begin());
  std::copy(b.positions.begin(), b.positions.end(), positions_host_.begin());
  // The attention image of the padded batch: padding rows write no slot and have no table.
  const AttentionInputsLayout l = attention_inputs_layout(size, size, width_);
  image_host_.assign(l.bytes, 0);
  auto* slots = reinterpret_cast<int64_t*>(image_host_.data());
  auto* starts = reinterpret_cast<int32_t*>(image_host_.data() + l.query_start);
  auto* lens = reinterpret_cast<int32_t*>(image_host_.data() + l.seq_lens);
  auto* tables = reinterpret_cast<int32_t*>(image_host_.data() + l.block_tables);
  std::fill(tables, tables + static_cast<size_t>(size) * width_, -1);
  for (int s = 0; s < size; ++s) {
    starts[s] = s;
    slots[s] = s < S ? b.slot_mapping[static_cast<size_t>(s)] : -1;
    lens[s] = s < S ? b.seq_lens[static_cast<size_t>(s)] : 1;
    if (s < S) {
      const auto& t = b.block_tables[static_cast<size_t>(s)];
      std::copy(t.begin(), t.end(), tables + static_cast<size_t>(s) * width_);
    }
  }
  starts[size] = size;
}

Status CudaGraphRunner::upload(void* device, const void* host, int64_t bytes) {
  auto staged = ctx_->stage(host, bytes);
  if (!staged.ok()) return staged.status();
  return cuda_check(cudaMemcpyAsync(device, *staged, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                    ctx_->stream()),
                    "copy of a CUDA graph's inputs on " + ctx_->name());
}

Status CudaGraphRunner::run(const ForwardBatch& b, float* out, const Forward& forward) {
  const int S = b.num_seqs();
  const auto at = std::lower_bound(sizes_.begin(), sizes_.end(), S);
  if (at == sizes_.end()) return invalid_argument("a decode batch of " + std::to_string(S) + " has no CUDA graph");
  const int size = *at;
  Graph& g = graphs_[static_cast<size_t>(at - sizes_.begin())];
  if (g.exec != nullptr && g.epoch != ctx_->memory_epoch()) drop_all();  // memory moved under every graph
  if (g.exec == nullptr) TROUPE_RETURN_IF_ERROR(capture(size, forward));
  pack(b, size);
  const int64_t n = size * static_cast<int64_t>(sizeof(int32_t));
  TROUPE_RETURN_IF_ERROR(upload(ids_.data(), ids_host_.data(), n));
  TROUPE_RETURN_IF_ERROR(upload(positions_.data(), positions_host_.data(), n));
  TROUPE_RETURN_IF_ERROR(upload(image_.data(), image_host_.data(), static_cast<int64_t>(image_host_.size())));
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaGraphLaunch(g.exec, ctx_->stream()), "cudaGraphLaunch on " + ctx_->name()));
  return cuda_check(cudaMemcpyAsync(out, out_.data(), static_cast<size_t>(S * vocab_) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, ctx_->stream()),
                    "copy of a CUDA graph's logits on " + ctx_->name());
}

}  // namespace troupe::cuda
