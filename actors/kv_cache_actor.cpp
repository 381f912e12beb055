#include "actors/kv_cache_actor.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <limits>
#include <memory>

#include "actors/messages.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

constexpr auto kWorkerTimeout = std::chrono::seconds(120);

struct KvCacheState {
  KvCacheSpec spec;
  int64_t num_blocks = 0;
  static inline const char* name = "troupe.kv_cache";
};

/// Fan-out bookkeeping of one sizing round.
struct Sizing {
  std::vector<caf::actor> workers;
  EngineConfig config;
  caf::response_promise promise;
  size_t pending = 0;
  bool failed = false;
  KvCacheSpec spec;
  int64_t min_available = std::numeric_limits<int64_t>::max();
};

void allocate_on_workers(caf::stateful_actor<KvCacheState>* self, std::shared_ptr<Sizing> sz) {
  int64_t blocks = blocks_for(sz->spec, sz->min_available, sz->config);
  if (blocks <= 0) {
    sz->promise.deliver(caf::make_error(
        caf::sec::runtime_error,
        "not enough memory for the KV cache: " + std::to_string(sz->min_available) + " bytes available, one block needs " +
            std::to_string(sz->spec.bytes_per_block()) + " bytes (raise TROUPE_CPU_KVCACHE_SPACE or kv_cache_memory_bytes)"));
    return;
  }
  int64_t tokens = blocks * sz->spec.block_size;
  TROUPE_LOG_INFO("KV cache size: {} tokens ({} blocks of {} tokens, {:.2f} GiB)", tokens, blocks,
                  sz->spec.block_size, static_cast<double>(blocks * sz->spec.bytes_per_block()) / (1 << 30));
  int64_t max_len = sz->config.model.max_model_len;
  if (max_len > 0)
    TROUPE_LOG_INFO("Maximum concurrency for {} tokens per request: {:.2f}x", max_len,
                    static_cast<double>(tokens) / static_cast<double>(max_len));
  sz->pending = sz->workers.size();
  for (auto& w : sz->workers) {
    self->request(w, kWorkerTimeout, init_kv_atom_v, sz->spec, blocks)
        .then(
            [=](bool) {
              if (--sz->pending == 0 && !sz->failed) {
                self->state.spec = sz->spec;
                self->state.num_blocks = blocks;
                sz->promise.deliver(sz->spec, blocks);
              }
            },
            [=](caf::error& err) {
              if (!sz->failed) sz->promise.deliver(std::move(err));
              sz->failed = true;
            });
  }
}

caf::behavior kv_cache_behavior(caf::stateful_actor<KvCacheState>* self) {
  return {
      [=](size_kv_atom, std::vector<caf::actor> workers, EngineConfig config)
          -> caf::response_promise {
        auto rp = self->make_response_promise();
        if (workers.empty()) {
          rp.deliver(caf::make_error(caf::sec::runtime_error, "no workers to size a KV cache for"));
          return rp;
        }
        auto sz = std::make_shared<Sizing>();
        sz->workers = std::move(workers);
        sz->config = std::move(config);
        sz->promise = rp;
        sz->pending = sz->workers.size();
        for (auto& w : sz->workers) {
          self->request(w, kWorkerTimeout, kv_spec_atom_v)
              .then(
                  [=](KvSizing& s) {
                    sz->spec = s.spec;  // every rank holds the same layers' geometry
                    sz->min_available = std::min(sz->min_available, s.available_bytes);
                    if (--sz->pending == 0 && !sz->failed) allocate_on_workers(self, sz);
                  },
                  [=](caf::error& err) {
                    if (!sz->failed) sz->promise.deliver(std::move(err));
                    sz->failed = true;
                  });
        }
        return sz->promise;
      },
  };
}

}  // namespace

int64_t blocks_for(const KvCacheSpec& spec, int64_t available_bytes, const EngineConfig& config) {
  if (config.cache.num_gpu_blocks_override > 0) return config.cache.num_gpu_blocks_override;
  int64_t per_block = spec.bytes_per_block();
  if (per_block <= 0 || available_bytes <= 0) return 0;
  return available_bytes / per_block;
}

caf::actor spawn_kv_cache_actor(caf::actor_system& system) { return system.spawn(kv_cache_behavior); }

}  // namespace troupe::actors
