// LoRA adapters by name (vLLM's LoRARequest names): which names requests may
// use, the id each one has on the ranks, the names being loaded or unloaded
// now, and how many unfinished requests hold each adapter. Ids are never
// reused, so no cached KV block of an unloaded adapter matches a new one.
// Thread-safe; the engine's process owns one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/protocol/request_types.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

class LoraRegistry : public std::enable_shared_from_this<LoraRegistry> {
 public:
  /// One request's hold on an adapter: while any is held the adapter cannot be
  /// unloaded. Released by release() or, at the latest, by the destructor.
  class Lease {
   public:
    Lease(std::shared_ptr<LoraRegistry> registry, int64_t id) : registry_(std::move(registry)), id_(id) {}
    ~Lease() { release(); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    int64_t id() const { return id_; }
    void release();

   private:
    std::shared_ptr<LoraRegistry> registry_;
    int64_t id_;
    std::once_flag released_;
  };

  enum class UnloadOutcome {
    started,  // the name is now being unloaded: call finish_unload once the ranks dropped it
    unknown,  // no adapter of that name is loaded (or it is being loaded or unloaded now)
    in_use,   // unfinished requests hold it
  };
  struct Unload {
    UnloadOutcome outcome = UnloadOutcome::unknown;
    LoraAdapterInfo info;  // with started and in_use
    int64_t users = 0;     // with in_use: the unfinished requests that hold it
  };

  /// Reserves `name` for an adapter that is being loaded and gives it a fresh id.
  /// invalid_argument for an empty name or path, `reserved_name` (the base model's)
  /// or a name already loaded or being loaded.
  Result<LoraAdapterInfo> begin_load(const std::string& name, const std::string& path,
                                     const std::string& reserved_name);
  /// Ends a load with what the ranks answered: ok, and requests may name it; else the
  /// name is free again. Returns the status to report: a file the client named that
  /// is missing, malformed or does not fit the model becomes invalid_argument (the
  /// caller's mistake, vLLM's 400); a rank that failed keeps its code.
  Status finish_load(const LoraAdapterInfo& info, const Status& ranks);

  Unload begin_unload(const std::string& name);
  /// The ranks were asked to drop it (whatever they answered, the engine's
  /// scheduler no longer knows the id): no request may name it again.
  void finish_unload(const std::string& name);

  /// The loaded adapter `name` for one request; not_found with vLLM's wording
  /// for a name that is not loaded (or is being unloaded).
  Result<std::shared_ptr<Lease>> acquire(const std::string& name);

  /// The loaded adapters, by name.
  std::vector<LoraAdapterInfo> list() const;

 private:
  void release(int64_t id);

  mutable std::mutex mu_;
  std::map<std::string, LoraAdapterInfo> loaded_;
  std::set<std::string> changing_;     // names being loaded or unloaded now
  std::map<int64_t, int64_t> users_;   // adapter id -> unfinished requests holding it
  int64_t next_id_ = 1;
};

}  // namespace troupe::engine
