#include "conformance/session.hpp"

namespace troupe::conformance {

Result<std::unique_ptr<Session>> Session::open(const Platform& platform, int num_threads) {
  ConfigValues config;  // the engine's defaults but for the thread count
  TROUPE_RETURN_IF_ERROR(config.set_int("parallel.num_threads", num_threads));
  TROUPE_RETURN_IF_ERROR(platform.check_and_update_config(config));
  std::unique_ptr<Session> s(new Session(platform, std::move(config)));
  auto memory = platform.make_allocator(s->config_);
  if (!memory.ok()) return memory.status();
  auto ops = platform.make_ops(s->config_);
  if (!ops.ok()) return ops.status();
  if (!*memory || !*ops)
    return internal_error("platform " + platform.device_type() + " returned an empty allocator or ops");
  s->memory_ = std::move(*memory);
  s->ops_ = std::move(*ops);
  return s;
}

Result<std::unique_ptr<AttentionBackend>> Session::attention() const {
  auto a = platform_.make_attention_backend(config_);
  if (a.ok() && !*a) return internal_error("platform " + platform_.device_type() + " returned no attention backend");
  return a;
}

Result<std::unique_ptr<DeviceCommunicator>> Session::communicator() const {
  ConfigValues one = config_;
  TROUPE_RETURN_IF_ERROR(one.set_int("parallel.tensor_parallel_size", 1));
  TROUPE_RETURN_IF_ERROR(one.set_int("parallel.pipeline_parallel_size", 1));
  auto c = platform_.make_device_communicator(one, 0);
  if (c.ok() && !*c) return internal_error("platform " + platform_.device_type() + " returned no communicator");
  return c;
}

Result<void*> Session::scratch(int64_t bytes) {
  auto b = memory_->allocate(bytes);
  if (!b.ok()) return b.status();
  void* p = (*b)->data();
  buffers_.push_back(std::move(*b));
  return p;
}

Result<void*> Session::put(const void* host, int64_t bytes) {
  auto p = scratch(bytes);
  if (!p.ok()) return p.status();
  TROUPE_RETURN_IF_ERROR(memory_->copy(*p, host, bytes, CopyKind::host_to_device));
  return *p;
}

Result<float*> Session::put(const std::vector<float>& host) {
  auto p = put(host.data(), static_cast<int64_t>(host.size() * sizeof(float)));
  if (!p.ok()) return p.status();
  return static_cast<float*>(*p);
}

Status Session::get_bytes(void* host, const void* device, int64_t bytes) {
  return memory_->copy(host, device, bytes, CopyKind::device_to_host);
}

Result<std::vector<float>> Session::get(const float* device, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  TROUPE_RETURN_IF_ERROR(get_bytes(out.data(), device, count * static_cast<int64_t>(sizeof(float))));
  return out;
}

}  // namespace troupe::conformance
