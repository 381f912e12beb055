#include "platforms/cuda/cuda_graph_runner.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "platforms/cuda/cuda_batches.hpp"
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
  TROUPE_RETURN_IF_ERROR(r->ctx_->make_current());
  const auto bytes = static_cast<int64_t>(r->mirror_.layout().bytes);
  TROUPE_RETURN_IF_ERROR(r->inputs_.allocate(memory, bytes));
  TROUPE_RETURN_IF_ERROR(r->out_.allocate(memory, max * vocab));
  void* host = nullptr;
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaMallocHost(&host, static_cast<size_t>(bytes)),
                                    "cudaMallocHost of the CUDA graphs' inputs"));
  r->host_ = static_cast<uint8_t*>(host);
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaEventCreateWithFlags(&r->uploaded_, cudaEventDisableTiming),
                                    "cudaEventCreate on " + r->ctx_->name()));
  r->mirror_.reset(r->host_);
  TROUPE_RETURN_IF_ERROR(r->upload({}));  // the whole image: the device buffer starts undefined
  return r;
}

CudaGraphRunner::~CudaGraphRunner() {
  drop_all();
  if (uploaded_ != nullptr) {
    (void)cudaEventSynchronize(uploaded_);  // no copy may still read host_
    (void)cudaEventDestroy(uploaded_);
  }
  if (host_ != nullptr) (void)cudaFreeHost(host_);
}

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

bool CudaGraphRunner::eligible(const ForwardBatch& b, int max_size, size_t width) {
  const int S = b.num_seqs();
  if (S <= 0 || S > max_size || b.num_tokens() != S || !b.lora_ids.empty()) return false;
  if (static_cast<int>(b.logits_indices.size()) != S || static_cast<int>(b.query_start.size()) != S + 1 ||
      static_cast<int>(b.block_tables.size()) != S || static_cast<int>(b.slot_mapping.size()) != S)
    return false;
  for (int s = 0; s < S; ++s)
    if (b.query_start[static_cast<size_t>(s)] != s || b.logits_indices[static_cast<size_t>(s)] != s ||
        b.block_tables[static_cast<size_t>(s)].size() > width)
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
  const ForwardBatch b = warm_up_decode_batch(
      size, BatchGeometry{vocab_, attention_->num_blocks(), attention_->spec().block_size}, false);
  if (b.num_seqs() != size) return unavailable("CUDA graph of decode batch " + std::to_string(size) + ": no KV cache");

  TROUPE_RETURN_IF_ERROR(ctx_->synchronize());  // nothing of an earlier step is in flight
  (void)ctx_->take_error();
  const int64_t n = size * static_cast<int64_t>(sizeof(int32_t));
  const GraphInputsLayout& l = mirror_.layout();
  ctx_->begin_graph_inputs({{b.token_ids.data(), n, inputs_.data() + l.ids},
                            {b.positions.data(), n, inputs_.data() + l.positions}});
  attention_->set_graph_image(inputs_.data() + l.image, mirror_.rows(), width_);
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
  attention_->set_graph_image(nullptr, 0, 0);
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

Status CudaGraphRunner::upload(const std::vector<ByteRange>& ranges) {
  const std::vector<ByteRange> all = {ByteRange{0, mirror_.layout().bytes}};
  const std::vector<ByteRange>& copy = device_matches_ && !ranges.empty() ? ranges : all;
  if (device_matches_ && ranges.empty()) return {};  // nothing changed
  device_matches_ = false;  // until every copy is enqueued
  for (const ByteRange& r : copy)
    TROUPE_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(inputs_.data() + r.begin, host_ + r.begin, r.end - r.begin,
                                                      cudaMemcpyHostToDevice, ctx_->stream()),
                                      "copy of a CUDA graph's inputs to " + ctx_->name()));
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaEventRecord(uploaded_, ctx_->stream()), "cudaEventRecord"));
  device_matches_ = true;
  return {};
}

Status CudaGraphRunner::run(const ForwardBatch& b, float* out, const Forward& forward) {
  const int S = b.num_seqs();
  const auto at = std::lower_bound(sizes_.begin(), sizes_.end(), S);
  if (at == sizes_.end()) return invalid_argument("a decode batch of " + std::to_string(S) + " has no CUDA graph");
  const int size = *at;
  Graph& g = graphs_[static_cast<size_t>(at - sizes_.begin())];
  if (g.exec != nullptr && g.epoch != ctx_->memory_epoch()) drop_all();  // memory moved under every graph
  if (g.exec == nullptr) TROUPE_RETURN_IF_ERROR(capture(size, forward));
  // The previous step's copies read host_: they are done by now (its logits came back), so
  // this wait normally returns at once, and the stream itself is never synchronized.
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaEventSynchronize(uploaded_), "cudaEventSynchronize on " + ctx_->name()));
  const std::vector<ByteRange> changed = mirror_.update(host_, b, size);
  TROUPE_RETURN_IF_ERROR(upload(changed));
  TROUPE_RETURN_IF_ERROR(cuda_check(cudaGraphLaunch(g.exec, ctx_->stream()), "cudaGraphLaunch on " + ctx_->name()));
  return cuda_check(cudaMemcpyAsync(out, out_.data(), static_cast<size_t>(S * vocab_) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, ctx_->stream()),
                    "copy of a CUDA graph's logits on " + ctx_->name());
}

}  // namespace troupe::cuda
