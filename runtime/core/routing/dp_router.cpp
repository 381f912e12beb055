#include "runtime/core/routing/dp_router.hpp"

#include <utility>

#include "troupe/check.hpp"

namespace troupe::engine {

DpRouter::DpRouter(int32_t num_replicas, int32_t block_size, std::unique_ptr<routing::RoutingPolicy> policy,
                   std::string policy_name)
    : block_size_(block_size), policy_(std::move(policy)), policy_name_(std::move(policy_name)) {
  TROUPE_CHECK(num_replicas >= 1 && block_size >= 1 && policy_, "a router needs replicas, a block size and a policy");
  replicas_.resize(static_cast<size_t>(num_replicas));
  states_.resize(static_cast<size_t>(num_replicas));
  for (int32_t r = 0; r < num_replicas; ++r) states_[static_cast<size_t>(r)].index = r;
}

int64_t DpRouter::cached_prefix_blocks(int32_t r, const std::vector<sched::BlockHash>& hashes) const {
  const auto& cached = replicas_.at(static_cast<size_t>(r)).cached;
  int64_t n = 0;
  for (const auto& h : hashes) {
    if (!cached.count(h)) break;
    ++n;
  }
  return n;
}

std::string DpRouter::describe_not_serving() const {
  std::string out;
  for (size_t r = 0; r < replicas_.size(); ++r)
    if (!replicas_[r].health.ok())
      out += (out.empty() ? "" : "; ") + ("replica " + std::to_string(r) + ": " + replicas_[r].health.message());
  return out;
}

Result<int32_t> DpRouter::route(const CoreRequest& request) {
  const int32_t n = num_replicas();
  int32_t chosen = request.data_parallel_rank;
  if (chosen >= n)
    return invalid_argument("X-data-parallel-rank " + std::to_string(chosen) + " is out of range: the server runs " +
                            std::to_string(n) + " replica(s), 0.." + std::to_string(n - 1));
  if (chosen >= 0) {
    const Status& h = replicas_[static_cast<size_t>(chosen)].health;
    if (!h.ok()) return unavailable("replica " + std::to_string(chosen) + " (X-data-parallel-rank) does not serve: " + h.message());
  } else {
    bool any = false;
    for (auto& s : states_) any = any || s.serving;
    if (!any) return unavailable("no replica serves: " + describe_not_serving());
    routing::RoutingRequest rr;
    rr.request_id = request.request_id;
    rr.num_prompt_tokens = static_cast<int64_t>(request.prompt_token_ids.size());
    rr.num_prompt_blocks = rr.num_prompt_tokens / block_size_;
    rr.block_size = block_size_;
    std::vector<sched::BlockHash> hashes;
    if (policy_->uses_prefix_cache()) {
      std::optional<std::string> salt;
      if (!request.cache_salt.empty()) salt = request.cache_salt;
      sched::extend_block_hashes(hashes, request.prompt_token_ids, block_size_, salt, request.lora_id);
    }
    for (int32_t r = 0; r < n; ++r)
      states_[static_cast<size_t>(r)].num_cached_prompt_blocks = hashes.empty() ? 0 : cached_prefix_blocks(r, hashes);
    chosen = policy_->choose(rr, states_);
    if (chosen < 0 || chosen >= n || !states_[static_cast<size_t>(chosen)].serving)
      return unavailable("routing policy '" + policy_name_ + "' chose replica " + std::to_string(chosen) +
                         ", which is not a serving replica (0.." + std::to_string(n - 1) + ")");
  }
  states_[static_cast<size_t>(chosen)].num_in_flight++;
  live_[request.request_id] = chosen;
  return chosen;
}

void DpRouter::update(const ReplicaUpdate& u) {
  if (u.replica < 0 || u.replica >= num_replicas()) return;
  const auto r = static_cast<size_t>(u.replica);
  routing::ReplicaState& s = states_[r];
  if (u.has_stats) {
    s.num_running = u.num_running;
    s.num_waiting = u.num_waiting;
    s.kv_cache_usage = u.kv_cache_usage;
  }
  sched::apply_kv_events(u.kv_events, replicas_[r].cached);
  for (const std::string& id : u.finished_ids) {
    auto it = live_.find(id);
    if (it == live_.end() || it->second != u.replica) continue;
    live_.erase(it);
    if (s.num_in_flight > 0) s.num_in_flight--;
  }
  replicas_[r].health = u.health;
  s.serving = u.health.ok();
}

int32_t DpRouter::replica_of(const std::string& request_id) const {
  auto it = live_.find(request_id);
  return it == live_.end() ? -1 : it->second;
}

}  // namespace troupe::engine
