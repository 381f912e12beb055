#include "actors/worker_actor.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <unordered_map>

#include "actors/messages.hpp"
#include "runtime/gguf/gguf_file.hpp"
#include "runtime/sampling/sampler.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

caf::error to_error(const Status& status) { return caf::make_error(caf::sec::runtime_error, status.to_string()); }

struct WorkerState {
  Platform* platform = nullptr;
  std::unique_ptr<Worker> worker;
  std::shared_ptr<const gguf::GgufFile> file;
  std::unique_ptr<gguf::GgufModelSource> source;
  std::unordered_map<std::string, SamplingState> requests;  // request id → sampling state
  static inline const char* name = "troupe.worker";
};

caf::result<WorkerInitReply> init(caf::stateful_actor<WorkerState>* self, EngineConfig config, int32_t rank) {
  auto& st = self->state;
  auto start = Clock::now();
  auto worker = st.platform->make_worker(config, rank);
  if (!worker) return to_error(worker.status());
  st.worker = std::move(worker).value();
  if (auto s = st.worker->init_device(); !s) return to_error(s);
  auto file = gguf::GgufFile::open(config.model.model_path);
  if (!file) return to_error(file.status());
  st.file = std::shared_ptr<const gguf::GgufFile>(std::move(file).value());
  st.source = std::make_unique<gguf::GgufModelSource>(st.file);
  if (auto s = st.worker->load_model(*st.source); !s) return to_error(s);
  WorkerInitReply reply;
  reply.info = *st.worker->model_info();
  reply.platform = st.platform->device_type();
  reply.device_name = st.platform->device_name(rank);
  reply.load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return reply;
}

caf::result<StepOutput> execute(caf::stateful_actor<WorkerState>* self, StepInput& in) {
  auto& st = self->state;
  if (!st.worker) return caf::make_error(caf::sec::runtime_error, "worker has no model loaded");
  for (auto& id : in.finished_ids) st.requests.erase(id);
  for (auto& r : in.new_requests) st.requests[r.request_id] = std::move(r);
  StepOutput out;
  out.step = in.step;
  auto t0 = Clock::now();
  ExecuteModelRequest request{std::move(in.batch)};
  auto result = st.worker->execute_model(request);
  if (!result) return to_error(result.status());
  auto t1 = Clock::now();
  const auto& logits = result->logits;
  int64_t vocab = result->vocab_size;
  if (static_cast<int64_t>(logits.size()) != vocab * static_cast<int64_t>(in.sample_ids.size()))
    return caf::make_error(caf::sec::runtime_error, "worker returned a logits buffer of the wrong size");
  out.tokens.resize(in.sample_ids.size());
  for (size_t i = 0; i < in.sample_ids.size(); ++i) {
    auto it = st.requests.find(in.sample_ids[i]);
    if (it == st.requests.end())
      return caf::make_error(caf::sec::runtime_error, "no sampling state for request " + in.sample_ids[i]);
    auto& req = it->second;
    uint64_t step_seed = sampling::derive_step_seed(req.seed, req.output_token_ids.size());
    auto s = sampling::sample(logits.data() + i * vocab, vocab, req.params, req.prompt_token_ids,
                              req.output_token_ids, step_seed);
    req.output_token_ids.push_back(s.token);
    auto& tok = out.tokens[i];
    tok.token = s.token;
    tok.logprob = s.logprob;
    for (auto& [id, lp] : s.top_logprobs) {
      tok.top_ids.push_back(id);
      tok.top_logprobs.push_back(lp);
    }
  }
  out.model_seconds = std::chrono::duration<double>(t1 - t0).count();
  out.sample_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return out;
}

caf::behavior worker_behavior(caf::stateful_actor<WorkerState>* self, Platform* platform) {
  self->state.platform = platform;
  return {
      [=](init_atom, EngineConfig config, int32_t rank) { return init(self, std::move(config), rank); },
      [=](kv_spec_atom) -> caf::result<KvSizing> {
        auto& w = self->state.worker;
        if (!w) return caf::make_error(caf::sec::runtime_error, "worker has no model loaded");
        auto spec = w->get_kv_cache_spec();
        if (!spec) return to_error(spec.status());
        auto avail = w->determine_available_memory();
        if (!avail) return to_error(avail.status());
        return KvSizing{*spec, *avail};
      },
      [=](init_kv_atom, KvCacheSpec spec, int64_t num_blocks) -> caf::result<bool> {
        auto& w = self->state.worker;
        if (!w) return caf::make_error(caf::sec::runtime_error, "worker has no model loaded");
        if (auto s = w->initialize_from_config(KvCacheConfig{spec, num_blocks}); !s) return to_error(s);
        return true;
      },
      [=](warmup_atom) -> caf::result<bool> {
        auto& w = self->state.worker;
        if (!w) return caf::make_error(caf::sec::runtime_error, "worker has no model loaded");
        if (auto s = w->compile_or_warm_up_model(); !s) return to_error(s);
        return true;
      },
      [=](execute_atom, StepInput& in) { return execute(self, in); },
  };
}

}  // namespace

caf::actor spawn_worker_actor(caf::actor_system& system, Platform* platform) {
  return system.spawn<caf::detached>(worker_behavior, platform);
}

}  // namespace troupe::actors
