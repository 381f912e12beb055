#include "runtime/core/engine_core/lora_registry.hpp"

namespace troupe::engine {

void LoraRegistry::Lease::release() {
  std::call_once(released_, [this] { registry_->release(id_); });
}

Result<LoraAdapterInfo> LoraRegistry::begin_load(const std::string& name, const std::string& path,
                                                 const std::string& reserved_name) {
  if (name.empty()) return invalid_argument("lora_name: a LoRA adapter needs a name");
  if (path.empty()) return invalid_argument("lora_path: a LoRA adapter needs the path of its GGUF file");
  if (name == reserved_name) return invalid_argument("lora_name: '" + name + "' is the base model's name");
  std::lock_guard lock(mu_);
  if (loaded_.contains(name) || changing_.contains(name))
    return invalid_argument("The lora adapter '" + name + "' has already been loaded.");
  changing_.insert(name);
  return LoraAdapterInfo{name, next_id_++, path};
}

Status LoraRegistry::finish_load(const LoraAdapterInfo& info, const Status& ranks) {
  std::lock_guard lock(mu_);
  changing_.erase(info.name);
  if (ranks.ok()) {
    loaded_[info.name] = info;
    return {};
  }
  switch (ranks.code()) {
    case StatusCode::not_found:      // no such file
    case StatusCode::data_loss:      // not a GGUF file, or a truncated one
    case StatusCode::out_of_range:   // a rank larger than --max-lora-rank
    case StatusCode::not_supported:  // targets or types this model cannot take
      return invalid_argument(ranks.message());
    default:
      return ranks;
  }
}

LoraRegistry::Unload LoraRegistry::begin_unload(const std::string& name) {
  std::lock_guard lock(mu_);
  Unload out;
  auto it = loaded_.find(name);
  if (it == loaded_.end() || changing_.contains(name)) return out;
  out.info = it->second;
  if (auto u = users_.find(out.info.id); u != users_.end() && u->second > 0) {
    out.outcome = UnloadOutcome::in_use;
    out.users = u->second;
    return out;
  }
  changing_.insert(name);
  out.outcome = UnloadOutcome::started;
  return out;
}

void LoraRegistry::finish_unload(const std::string& name) {
  std::lock_guard lock(mu_);
  changing_.erase(name);
  loaded_.erase(name);
}

Result<std::shared_ptr<LoraRegistry::Lease>> LoraRegistry::acquire(const std::string& name) {
  int64_t id = 0;
  {
    std::lock_guard lock(mu_);
    auto it = loaded_.find(name);
    // An adapter being unloaded takes no new requests: its unload checked it was unused.
    if (it == loaded_.end() || changing_.contains(name)) return not_found("The model `" + name + "` does not exist.");
    id = it->second.id;
    ++users_[id];
  }
  return std::make_shared<Lease>(shared_from_this(), id);
}

void LoraRegistry::release(int64_t id) {
  std::lock_guard lock(mu_);
  auto it = users_.find(id);
  if (it != users_.end() && --it->second <= 0) users_.erase(it);
}

std::vector<LoraAdapterInfo> LoraRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<LoraAdapterInfo> out;
  for (const auto& [name, info] : loaded_) out.push_back(info);
  return out;
}

}  // namespace troupe::engine
