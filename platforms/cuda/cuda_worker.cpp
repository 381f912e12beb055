#include "platforms/cuda/cuda_worker.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "platforms/cuda/cuda_attention.hpp"
#include "platforms/cuda/cuda_batches.hpp"
#include "troupe/log.hpp"

namespace troupe::cuda {

CudaWorker::CudaWorker(const ConfigView& config, int rank, const Platform& platform, int device_count)
    : ModelRunnerWorker(config, rank, platform), device_(device_count > 0 ? rank % device_count : 0) {}

Status CudaWorker::init_device() {
  if (!claim_ && !devices_shared_on_purpose()) {
    char bus_id[64] = {};
    TROUPE_RETURN_IF_ERROR(cuda_check(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device_),
                                      "cudaDeviceGetPCIBusId of cuda:" + std::to_string(device_)));
    auto claim = DeviceClaim::acquire(bus_id, "cuda:" + std::to_string(device_) + " (" + bus_id + ")", rank());
    if (!claim.ok()) return claim.status();
    claim_ = std::move(*claim);
  }
  auto ctx = CudaContext::for_device(device_);
  if (!ctx.ok()) return ctx.status();
  ctx_ = *ctx;
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  (void)ctx_->take_error();  // a failure of an earlier worker on this device is not ours
  return ModelRunnerWorker::init_device();
}

Status CudaWorker::load_model(const ModelSource& source) {
  if (!ctx_) return unavailable("load_model before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  const Status loaded = ModelRunnerWorker::load_model(source);
  const Status recorded = ctx_->take_error();  // e.g. a kernel the model's set-up launched
  TROUPE_RETURN_IF_ERROR(loaded);
  if (!recorded.ok()) return recorded;
  return ctx_->synchronize();
}

Result<int64_t> CudaWorker::determine_available_memory() {
  if (settings().cache.kv_cache_memory_bytes > 0) return settings().cache.kv_cache_memory_bytes;
  const double share = settings().cache.memory_utilization;
  if (!(share > 0 && share <= 1))
    return invalid_argument("gpu memory utilization " + std::to_string(share) + " must be in (0, 1]");
  if (!ctx_) return unavailable("determine_available_memory before init_device");
  if (model_info() == nullptr) return unavailable("determine_available_memory before load_model");
  TROUPE_RETURN_IF_ERROR(ctx_->synchronize());
  const DeviceMemory mem = platform().memory_info(device_);
  if (mem.total_bytes <= 0) return unavailable("cudaMemGetInfo failed on " + ctx_->name());
  const int64_t in_use = mem.total_bytes - std::max<int64_t>(0, mem.free_bytes);
  const LaterAllocations later = later_allocations(settings(), *model_info(), graphs_planned());
  const auto budget = static_cast<int64_t>(static_cast<double>(mem.total_bytes) * share) - in_use - later.total();
  const auto gib = [](int64_t b) { return static_cast<double>(b) / (1 << 30); };
  TROUPE_LOG_INFO("{}: {:.2f} GiB total, {:.2f} GiB in use (weights, activations, other processes), {:.2f} GiB "
                  "kept for later allocations (logits {:.2f}, sampling {:.2f}, cuBLAS {:.2f}, CUDA graphs {:.2f}); "
                  "--gpu-memory-utilization {} leaves {:.2f} GiB for the KV cache",
                  ctx_->name(), gib(mem.total_bytes), gib(in_use), gib(later.total()), gib(later.logits),
                  gib(later.sampling), gib(later.cublas), gib(later.graphs), share, gib(budget));
  if (budget <= 0)
    return resource_exhausted("no memory of " + ctx_->name() + " is left for the KV cache: " +
                              std::to_string(in_use >> 20) + " MiB of " + std::to_string(mem.total_bytes >> 20) +
                              " MiB are in use, " + std::to_string(later.total() >> 20) +
                              " MiB are kept for buffers made later, and --gpu-memory-utilization is " +
                              std::to_string(share));
  return budget;
}

bool CudaWorker::graphs_planned() const {
  return !settings().enforce_eager && settings().parallel.world_size() == 1 && !settings().enable_lora &&
         settings().runner != "pooling";
}

Status CudaWorker::sleep(int level) {
  if (ctx_) TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  return ModelRunnerWorker::sleep(level);
}

Status CudaWorker::wake_up(const std::vector<std::string>& tags) {
  if (!ctx_) return unavailable("wake_up before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  const Status woken = ModelRunnerWorker::wake_up(tags);
  const Status recorded = ctx_->take_error();
  TROUPE_RETURN_IF_ERROR(woken);
  return recorded;
}

BatchGeometry CudaWorker::geometry() const {
  BatchGeometry g;
  g.vocab = model_info() != nullptr ? model_info()->vocab_size : 0;
  g.num_blocks = attention() != nullptr ? attention()->num_blocks() : 0;
  g.block_size = attention() != nullptr ? attention()->spec().block_size : 0;
  return g;
}

Status CudaWorker::run_warm_up(const ForwardBatch& batch, const char* what) {
  if (batch.num_seqs() == 0) return internal_error(std::string("no ") + what + " warm-up batch for this cache");
  ExecuteModelRequest req;
  req.batch = batch;
  auto out = execute_model(req);
  if (!out.ok()) return Status(out.status().code(), std::string(what) + " warm-up step: " + out.status().message());
  recycle_output(std::move(*out));
  return {};
}

Status CudaWorker::compile_or_warm_up_model() {
  if (!ctx_) return unavailable("compile_or_warm_up_model before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  const bool decodes = attention() != nullptr && attention()->num_blocks() > 0 && settings().runner != "pooling";
  if (attention() != nullptr && attention()->num_blocks() > 0) {
    // The largest step's arrays, tables as wide as the longest sequence's (max_model_len).
    const int64_t tokens = std::max<int64_t>(1, settings().max_num_batched_tokens);
    const int64_t seqs = std::max<int64_t>(1, std::min<int64_t>(settings().max_num_seqs, tokens));
    const size_t width = decode_graph_shape(settings(), model_info()->context_length, geometry()).width;
    TROUPE_RETURN_IF_ERROR(ctx_->reserve_staging(staging_bytes_per_step(tokens, seqs, width)));
  }
  if (decodes) {
    // A prefill of max_num_batched_tokens tokens: every matmul at its largest, so the cuBLAS
    // scratch and the activations reach their final size before any graph records an address
    // (growing them later would free captured memory and drop every graph)...
    TROUPE_RETURN_IF_ERROR(run_warm_up(
        warm_up_prefill_batch(settings().max_num_batched_tokens, geometry(), settings().max_num_seqs),
        "prefill"));
    // ... and a one-token decode (the GEMV path).
    TROUPE_RETURN_IF_ERROR(run_warm_up(warm_up_decode_batch(1, geometry()), "decode"));
  } else {
    TROUPE_RETURN_IF_ERROR(execute_dummy_batch());  // the SDK's: what a pooling step looks like
  }
  TROUPE_RETURN_IF_ERROR(ctx_->synchronize());
  std::string why_eager;
  if (settings().enforce_eager) {
    why_eager = "--enforce-eager";
  } else if (!decodes) {
    why_eager = "a pooling model has no decode steps";
  } else if (settings().parallel.world_size() > 1) {
    why_eager = "CUDA graphs over several ranks (NCCL inside a graph) are not implemented yet";
  } else if (settings().enable_lora) {
    why_eager = "CUDA graphs with LoRA adapters are not implemented yet";
  } else if (Status s = set_up_graphs(); !s.ok()) {
    graphs_.reset();
    (void)ctx_->take_error();
    TROUPE_RETURN_IF_ERROR(ctx_->synchronize());
    TROUPE_LOG_WARNING("{}: CUDA graphs turned off, decode steps run eagerly: {}", ctx_->name(), s.message());
    return {};
  }
  if (!why_eager.empty()) TROUPE_LOG_INFO("{}: warmed up eagerly, no CUDA graphs ({})", ctx_->name(), why_eager);
  return {};
}

Status CudaWorker::set_up_graphs() {
  auto* attention_backend = dynamic_cast<CudaAttentionBackend*>(attention());
  if (attention_backend == nullptr) return not_supported("the attention backend is not cuda_paged");
  const auto start = std::chrono::steady_clock::now();
  const DecodeGraphShape shape = decode_graph_shape(settings(), model_info()->context_length, geometry());
  if (shape.sizes.empty()) return invalid_argument("max_num_seqs leaves no decode batch size to capture");
  auto runner = CudaGraphRunner::create(ctx_, attention_backend, *allocator(), shape.sizes, shape.width,
                                        model_info()->vocab_size);
  if (!runner.ok()) return runner.status();
  // The largest decode runs eagerly first (graphs_ is still null), so scratch and buffers are
  // at their decode size before any graph records their addresses; then the graphs, largest first.
  TROUPE_RETURN_IF_ERROR(run_warm_up(warm_up_decode_batch((*runner)->max_size(), geometry()), "largest decode"));
  TROUPE_RETURN_IF_ERROR(ctx_->synchronize());
  graphs_ = std::move(*runner);
  const CudaGraphRunner::Forward forward = [this](const ForwardBatch& b, float* out) {
    return model()->forward(b, out);
  };
  for (auto it = graphs_->sizes().rbegin(); it != graphs_->sizes().rend(); ++it)
    TROUPE_RETURN_IF_ERROR(graphs_->capture(*it, forward));
  // A replay must give what the eager step gives: a padded size and the largest one.
  TROUPE_RETURN_IF_ERROR(compare_replay_with_eager(std::min(3, graphs_->max_size())));
  TROUPE_RETURN_IF_ERROR(compare_replay_with_eager(graphs_->max_size()));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  TROUPE_LOG_INFO("{}: captured {} CUDA graphs of decode batches 1..{} (block tables {} wide) in {:.0f} ms; a "
                  "replay matches the eager step",
                  ctx_->name(), graphs_->captured(), graphs_->max_size(), shape.width, ms);
  return {};
}

Status CudaWorker::compare_replay_with_eager(int num_seqs) {
  const int64_t vocab = model_info()->vocab_size;
  const ForwardBatch b = graph_validation_batch(num_seqs, geometry());
  const int n = b.num_seqs();
  if (n == 0 || !graphs_->eligible(b)) return internal_error("the validation batch is not one the CUDA graphs take");
  DeviceArray<float> eager, replayed;
  TROUPE_RETURN_IF_ERROR(eager.allocate(*allocator(), n * vocab));
  TROUPE_RETURN_IF_ERROR(replayed.allocate(*allocator(), n * vocab));
  TROUPE_RETURN_IF_ERROR(model()->forward(b, eager.data()));
  TROUPE_RETURN_IF_ERROR(graphs_->run(b, replayed.data(), [this](const ForwardBatch& fb, float* out) {
    return model()->forward(fb, out);
  }));
  TROUPE_RETURN_IF_ERROR(ctx_->take_error());
  std::vector<float> want(static_cast<size_t>(n * vocab)), got(want.size());
  const int64_t bytes = n * vocab * static_cast<int64_t>(sizeof(float));
  TROUPE_RETURN_IF_ERROR(allocator()->copy(want.data(), eager.data(), bytes, CopyKind::device_to_host));
  TROUPE_RETURN_IF_ERROR(allocator()->copy(got.data(), replayed.data(), bytes, CopyKind::device_to_host));
  // A tolerance on the logits, not an equal argmax: random bench weights give near-ties that
  // a different but equally valid summation order may flip.
  const ReplayDifference d = compare_logits(want, got, n, vocab, kReplayTolerance);
  if (!d.within)
    return internal_error("a replay of the CUDA graph of " + std::to_string(n) + " rows differs from the eager "
                          "step at row " + std::to_string(d.row) + ": max difference " + std::to_string(d.worst) +
                          ", more than " + std::to_string(kReplayTolerance) + " x the row's largest logit " +
                          std::to_string(d.scale));
  return {};
}

int CudaWorker::cuda_graphs() const { return graphs_ ? graphs_->captured() : 0; }

Status CudaWorker::run_forward(const ForwardBatch& batch, float* out) {
  if (graphs_ && out != nullptr && graphs_->eligible(batch)) {
    auto* current = dynamic_cast<CudaAttentionBackend*>(attention());
    if (current != graphs_->attention()) graphs_->rebind(current);  // woken from sleep: a new cache
    if (current != nullptr) {
      const Status s = graphs_->run(batch, out, [this](const ForwardBatch& b, float* o) {
        return model()->forward(b, o);
      });
      if (s.ok()) return s;
      // A graph that cannot be captured now (or replayed) must not stop serving.
      TROUPE_LOG_WARNING("{}: CUDA graphs off from now on, decode steps run eagerly: {}", ctx_->name(),
                         s.message());
      graphs_.reset();
      (void)ctx_->take_error();
      TROUPE_RETURN_IF_ERROR(ctx_->synchronize());
    }
  }
  return ModelRunnerWorker::run_forward(batch, out);
}

Result<ModelRunnerOutput> CudaWorker::execute_model(const ExecuteModelRequest& request) {
  if (!ctx_) return unavailable("execute_model before init_device");
  TROUPE_RETURN_IF_ERROR(ctx_->make_current());
  auto out = ModelRunnerWorker::execute_model(request);
  // An op or attention call that failed recorded why; its outputs are not to be trusted.
  Status recorded = ctx_->take_error();
  if (!recorded.ok()) return recorded;
  return out;
}

Result<DType> CudaWorker::kv_cache_dtype(const std::string& cache_dtype) const {
  return cuda_kv_cache_dtype(cache_dtype);
}

std::string CudaWorker::describe_device() const {
  return platform().device_name(device_) + " (" + (ctx_ ? ctx_->name() : "cuda:" + std::to_string(device_)) + ")";
}

}  // namespace troupe::cuda
