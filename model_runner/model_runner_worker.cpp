#include "troupe/model_runner/model_runner_worker.hpp"

#include <algorithm>
#include <string>

#include "troupe/log.hpp"
#include "troupe/model_registry.hpp"
#include "troupe/named_ops/named_ops.hpp"

namespace troupe {

ModelRunnerWorker::ModelRunnerWorker(const ConfigView& config, int rank, const Platform& platform)
    : Worker(platform.device_type()),
      config_(config),
      settings_(RunnerSettings::from(config)),
      rank_(rank),
      platform_(platform) {}
ModelRunnerWorker::~ModelRunnerWorker() = default;

Status ModelRunnerWorker::init_device() {
  model_.reset();  // it would point at the parts replaced below
  device_out_ = {};
  kv_config_.reset();
  sleep_level_ = 0;
  weights_asleep_ = kv_asleep_ = false;
  tp_comm_.reset();  // a communicator id serves one world: leave the old one before meeting again
  comm_.reset();
  const std::string& dev = platform_.device_type();
  const ParallelSettings& parallel = settings_.parallel;
  const int tp = parallel.tensor_parallel_size, pp = parallel.pipeline_parallel_size;
  if (tp < 1 || pp < 1 || rank_ < 0 || rank_ >= parallel.world_size())
    return invalid_argument("rank " + std::to_string(rank_) + " is outside the world of " +
                            std::to_string(std::max(0, parallel.world_size())) + " ranks (tensor_parallel_size " +
                            std::to_string(tp) + " x pipeline_parallel_size " + std::to_string(pp) + ")");
  auto made = platform_.make_device_communicator(config_, rank_);
  if (!made.ok()) return made.status();
  if (!*made) return internal_error("platform " + dev + " returned an empty communicator");
  // Metered, so every step reports its communication (groups made from it share the meter).
  meter_ = std::make_shared<CommunicatorMeter>();
  std::unique_ptr<DeviceCommunicator> comm(new MeteredCommunicator(std::move(*made), meter_));
  if (comm->world_size() != parallel.world_size() || comm->rank() != rank_)
    return internal_error("platform " + dev + " returned a communicator for rank " + std::to_string(comm->rank()) +
                          " of " + std::to_string(comm->world_size()) + ", not rank " + std::to_string(rank_) +
                          " of " + std::to_string(parallel.world_size()));
  tp_rank_ = rank_ % tp;
  pp_rank_ = rank_ / tp;
  std::unique_ptr<DeviceCommunicator> tp_comm;
  if (pp > 1) {
    // The tensor-parallel group of this pipeline stage: global ranks pp_rank * tp + [0, tp).
    std::vector<int> stage;
    for (int t = 0; t < tp; ++t) stage.push_back(pp_rank_ * tp + t);
    auto group = comm->new_group(stage);
    if (!group.ok()) return group.status();
    tp_comm = std::move(*group);
  }
  auto allocator = platform_.make_allocator(config_);
  if (!allocator.ok()) return allocator.status();
  auto ops = platform_.make_ops(config_);
  if (!ops.ok()) return ops.status();
  auto attention = platform_.make_attention_backend(config_);
  if (!attention.ok()) return attention.status();
  if (!*allocator || !*ops || !*attention)
    return internal_error("platform " + dev + " returned an empty allocator, ops or attention backend");
  tp_comm_ = std::move(tp_comm);
  comm_ = std::move(comm);
  allocator_ = std::move(*allocator);
  ops_ = std::move(*ops);
  attention_ = std::move(*attention);
  TROUPE_LOG_INFO("{} worker rank {} of {} (tensor rank {}/{}, pipeline stage {}/{}): {}, memory {}, attention {}", dev,
                  rank_, parallel.world_size(), tp_rank_, tp, pp_rank_, pp, describe_device(), allocator_->name(),
                  attention_->name());
  return {};
}

std::string ModelRunnerWorker::describe_device() const { return platform_.device_name(0); }

Status ModelRunnerWorker::load_model(const ModelSource& source) {
  if (!ops_ || !attention_ || !allocator_) return unavailable("load_model before init_device");
  model_.reset();
  ModelContext ctx;
  ctx.ops = ops_.get();
  ctx.attention = attention_.get();
  ctx.allocator = allocator_.get();
  ctx.max_num_batched_tokens = std::max<int64_t>(1, settings_.max_num_batched_tokens);
  ctx.communicator = comm_.get();
  ctx.tp_communicator = tp_comm_ ? tp_comm_.get() : comm_.get();
  ctx.tp_rank = tp_rank_;
  ctx.tp_size = settings_.parallel.tensor_parallel_size;
  ctx.pp_rank = pp_rank_;
  ctx.pp_size = settings_.parallel.pipeline_parallel_size;
  if (settings_.enable_lora) ctx.loras = &loras_;
  ctx.settings = &config_;
  auto model = model_registry::create(source.architecture(), source, ctx);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);
  source_ = &source;
  weights_asleep_ = false;
  return {};
}

Result<DType> ModelRunnerWorker::kv_cache_dtype(const std::string& cache_dtype) const {
  const std::string& d = cache_dtype;
  if (d == "auto" || d == "fp16" || d == "float16" || d == "f16" || d == "half") return DType::f16;
  if (d == "fp32" || d == "float32" || d == "f32" || d == "float") return DType::f32;
  return invalid_argument("KV cache dtype '" + d + "' is not supported by platform " + platform_.device_type() +
                          " (choose auto, fp16 or fp32)");
}

Result<KvCacheSpec> ModelRunnerWorker::get_kv_cache_spec() const {
  if (!model_) return unavailable("get_kv_cache_spec before load_model");
  KvCacheSpec spec;
  spec.block_size = settings_.cache.block_size > 0 ? settings_.cache.block_size : 16;
  // This rank's share: its pipeline stage's layers, its tensor-parallel slice of the kv heads.
  const KvCacheShape shape = model_->kv_cache_shape();
  spec.num_layers = shape.num_layers;
  spec.num_kv_heads = shape.num_kv_heads;
  spec.head_dim = shape.head_dim;
  auto dtype = kv_cache_dtype(settings_.cache.cache_dtype);
  if (!dtype.ok()) return dtype.status();
  spec.dtype = *dtype;
  return spec;
}

Result<int64_t> ModelRunnerWorker::determine_available_memory() {
  if (settings_.cache.kv_cache_memory_bytes > 0) return settings_.cache.kv_cache_memory_bytes;
  const double share = settings_.cache.memory_utilization;
  if (!(share > 0 && share <= 1))
    return invalid_argument("memory utilization " + std::to_string(share) + " must be in (0, 1]");
  const DeviceMemory mem = platform_.memory_info(0);
  if (mem.total_bytes <= 0) return unavailable("platform " + platform_.device_type() + " reports no device memory");
  const int64_t in_use = mem.total_bytes - std::max<int64_t>(0, mem.free_bytes);
  const auto budget = static_cast<int64_t>(static_cast<double>(mem.total_bytes) * share) - in_use;
  if (budget <= 0)
    return resource_exhausted("no device memory is left for the KV cache: " + std::to_string(in_use >> 20) +
                              " MiB of " + std::to_string(mem.total_bytes >> 20) + " MiB are in use, and memory " +
                              "utilization is " + std::to_string(share));
  return budget;
}

Status ModelRunnerWorker::initialize_from_config(const KvCacheConfig& config) {
  if (!attention_) return unavailable("initialize_from_config before init_device");
  auto want = get_kv_cache_spec();
  if (!want.ok()) return want.status();
  const KvCacheSpec& s = config.spec;
  // Pipeline stages hold different numbers of layers, while the engine sizes one cache for
  // every rank (the block count is shared: block ids are the scheduler's): a stage keeps its
  // own layer count and takes the block size and dtype of the plan.
  const bool layers_ok = s.num_layers == want->num_layers || settings_.parallel.pipeline_parallel_size > 1;
  if (!layers_ok || s.num_kv_heads != want->num_kv_heads || s.head_dim != want->head_dim)
    return invalid_argument("KV cache config does not match the loaded model (layers, kv heads or head dim differ)");
  if (want->num_layers == 0) return {};  // an encoder keeps no KV cache: the blocks are bookkeeping only
  KvCacheSpec mine = s;
  mine.num_layers = want->num_layers;
  TROUPE_RETURN_IF_ERROR(attention_->allocate(mine, config.num_blocks));
  kv_config_ = KvCacheConfig{mine, config.num_blocks};
  return {};
}

void* ModelRunnerWorker::get_extension(std::string_view name) {
  if (name == SleepModeExtension::kName) return static_cast<SleepModeExtension*>(this);
  if (name == LoraExtension::kName && settings_.enable_lora) return static_cast<LoraExtension*>(this);
  return nullptr;
}

Status ModelRunnerWorker::add_lora(int64_t lora_id, const LoraAdapterSpec& adapter) {
  if (!settings_.enable_lora) return not_supported("LoRA is off: start the engine with --enable-lora");
  if (settings_.parallel.world_size() > 1)
    return not_supported("LoRA with tensor or pipeline parallelism (world size " +
                         std::to_string(settings_.parallel.world_size()) + ") is not implemented yet");
  TROUPE_RETURN_IF_ERROR(check_awake());
  if (!model_ || source_ == nullptr) return unavailable("add_lora before load_model");
  TROUPE_RETURN_IF_ERROR(loras_.add(lora_id, adapter, *source_, *model_, *allocator_, settings_.max_lora_rank));
  TROUPE_LOG_INFO("rank {}: LoRA adapter {} ({}) loaded, {} tensors, {:.2f} MiB on {}", rank_, lora_id, adapter.path,
                  adapter.targets.size() * 2, static_cast<double>(loras_.device_bytes()) / (1 << 20),
                  allocator_->name());
  return {};
}

Status ModelRunnerWorker::remove_lora(int64_t lora_id) { return loras_.remove(lora_id); }

Result<std::vector<int64_t>> ModelRunnerWorker::list_loras() const { return loras_.ids(); }

Status ModelRunnerWorker::pin_lora(int64_t lora_id) { return loras_.pin(lora_id); }

Status ModelRunnerWorker::sleep(int level) {
  if (level != 1 && level != 2) return invalid_argument("sleep level must be 1 or 2, got " + std::to_string(level));
  if (!model_ && !weights_asleep_) return unavailable("sleep before load_model");
  if (level <= sleep_level_ && weights_asleep_ && kv_asleep_) return {};
  // The model points at the attention backend: free it first. A fresh, empty backend takes
  // the old one's place, so waking the weights alone can build the model again.
  model_.reset();
  device_out_ = {};
  weights_asleep_ = true;
  auto fresh = platform_.make_attention_backend(config_);
  if (!fresh.ok()) return fresh.status();
  attention_ = std::move(*fresh);
  kv_asleep_ = kv_config_.has_value();
  if (level == 2 && source_ != nullptr) {
    if (Status s = source_->release_pages(); !s.ok())
      TROUPE_LOG_WARNING("sleep level 2 keeps the weights in host memory: {}", s.message());
  }
  sleep_level_ = std::max(sleep_level_, level);
  return {};
}

Status ModelRunnerWorker::wake_up(const std::vector<std::string>& tags) {
  bool weights = tags.empty(), kv = tags.empty();
  for (const std::string& t : tags) {
    if (t == "weights") weights = true;
    else if (t == "kv_cache") kv = true;
    else return invalid_argument("wake_up tag '" + t + "' is unknown (weights, kv_cache)");
  }
  if (weights && weights_asleep_) {
    if (source_ == nullptr) return unavailable("wake_up: the worker never loaded a model");
    TROUPE_RETURN_IF_ERROR(load_model(*source_));
  }
  if (kv && kv_asleep_) {
    TROUPE_RETURN_IF_ERROR(attention_->allocate(kv_config_->spec, kv_config_->num_blocks));
    kv_asleep_ = false;
  }
  if (!weights_asleep_ && !kv_asleep_) sleep_level_ = 0;
  return {};
}

Status ModelRunnerWorker::execute_dummy_batch() {
  TROUPE_RETURN_IF_ERROR(check_awake());
  if (!model_) return unavailable("execute_dummy_batch before load_model");
  ExecuteModelRequest req;
  req.batch = dummy_batch(attention_->spec().block_size, settings_.max_num_batched_tokens);
  req.return_hidden_states = settings_.runner == "pooling";  // what this engine's steps will ask for
  auto out = execute_model(req);
  return out.status();
}

Status ModelRunnerWorker::compile_or_warm_up_model() { return execute_dummy_batch(); }

ForwardBatch ModelRunnerWorker::dummy_batch(int block_size, int64_t max_num_batched_tokens) {
  // One short sequence in block 0; any later sequence overwrites its own slots before reading them.
  const int n = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(block_size, max_num_batched_tokens)));
  ForwardBatch b;
  for (int i = 0; i < n; ++i) {
    b.token_ids.push_back(0);
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
  }
  b.query_start = {0, n};
  b.seq_lens = {n};
  b.block_tables = {{0}};
  b.logits_indices = {n - 1};
  return b;
}

// Runs `run` writing `count` floats into `host`: straight into it when device memory is the
// host's, else into device_out_ and then copied out.
Status ModelRunnerWorker::copy_out(std::vector<float>& host, int64_t count,
                                   Status (Model::*run)(const ForwardBatch&, float*), const ForwardBatch& batch) {
  host.resize(static_cast<size_t>(count));
  if (allocator_->host_addressable() || count == 0) return (model_.get()->*run)(batch, host.data());
  TROUPE_RETURN_IF_ERROR(device_out_.reserve(*allocator_, count));
  TROUPE_RETURN_IF_ERROR((model_.get()->*run)(batch, device_out_.data()));
  return allocator_->copy(host.data(), device_out_.data(), count * static_cast<int64_t>(sizeof(float)),
                          CopyKind::device_to_host);
}

Status ModelRunnerWorker::check_awake() const {
  if (weights_asleep_ || kv_asleep_)
    return unavailable("the " + platform_.device_type() + " worker of rank " + std::to_string(rank_) +
                       " is asleep (sleep level " + std::to_string(sleep_level_) + "): wake it up first");
  return {};
}

Result<ModelRunnerOutput> ModelRunnerWorker::execute_model(const ExecuteModelRequest& request) {
  TROUPE_RETURN_IF_ERROR(check_awake());
  if (!model_) return unavailable("execute_model before load_model");
  if (model_->kv_cache_shape().num_layers > 0) TROUPE_RETURN_IF_ERROR(attention_->check_batch(request.batch));
  ModelRunnerOutput out;
  out.vocab_size = model_->info().vocab_size;
  meter_->reset();
  // Only the driver (rank 0) samples: the other ranks run their share and return no logits.
  // Buffers come back through recycle_output: resizing them allocates only when a step needs more.
  if (request.return_hidden_states) {
    out.hidden_size = model_->info().hidden_size;
    out.hidden_states = std::move(spare_hidden_);
    TROUPE_RETURN_IF_ERROR(copy_out(out.hidden_states, request.batch.num_tokens() * out.hidden_size,
                                    &Model::forward_hidden, request.batch));
  } else if (rank_ == 0) {
    TROUPE_RETURN_IF_ERROR(forward_on_device(request, out));
  } else {
    TROUPE_RETURN_IF_ERROR(run_forward(request.batch, nullptr));
  }
  out.communicator_bytes = meter_->bytes.load();
  out.communicator_seconds = static_cast<double>(meter_->nanoseconds.load()) * 1e-9;
  return out;
}

Status ModelRunnerWorker::run_forward(const ForwardBatch& batch, float* out) { return model_->forward(batch, out); }

Status ModelRunnerWorker::forward_on_device(const ExecuteModelRequest& request, ModelRunnerOutput& out) {
  const ForwardBatch& batch = request.batch;
  const auto rows = static_cast<int64_t>(batch.logits_indices.size());
  const int64_t count = rows * out.vocab_size;
  if (allocator_->host_addressable() || count == 0) {
    out.logits = std::move(spare_logits_);
    // The host sampler reads these logits where they are: nothing to save by choosing on the device.
    out.logits.resize(static_cast<size_t>(count));
    return run_forward(batch, out.logits.data());
  }
  TROUPE_RETURN_IF_ERROR(device_out_.reserve(*allocator_, count));
  TROUPE_RETURN_IF_ERROR(run_forward(batch, device_out_.data()));
  if (static_cast<int64_t>(request.token_selection.size()) == rows) {
    TROUPE_RETURN_IF_ERROR(device_tokens_.reserve(*allocator_, rows));
    const auto select_tokens = named_ops::find<named_ops::SelectTokens>(*ops_);
    if (select_tokens && select_tokens(*ops_, device_out_.data(), rows, out.vocab_size,
                                       request.token_selection.data(), device_tokens_.data())) {
      out.sampled_token_ids.resize(static_cast<size_t>(rows));
      return allocator_->copy(out.sampled_token_ids.data(), device_tokens_.data(),
                              rows * static_cast<int64_t>(sizeof(int32_t)), CopyKind::device_to_host);
    }
  }
  out.logits = std::move(spare_logits_);
  out.logits.resize(static_cast<size_t>(count));
  return allocator_->copy(out.logits.data(), device_out_.data(), count * static_cast<int64_t>(sizeof(float)),
                          CopyKind::device_to_host);
}

void ModelRunnerWorker::recycle_output(ModelRunnerOutput&& used) {
  // A step whose tokens were chosen on the device returned no logits: keep the older buffer.
  if (used.logits.capacity() > 0) spare_logits_ = std::move(used.logits);
  if (used.hidden_states.capacity() > 0) spare_hidden_ = std::move(used.hidden_states);
}

}  // namespace troupe
