#include "runtime/config/engine_config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>

namespace troupe {
namespace {

// --- values as text (troupe/config_view.hpp's rules) -------------------------

std::string to_text(const std::string& v) { return v; }
std::string to_text(bool v) { return v ? "true" : "false"; }
std::string to_text(int v) { return std::to_string(v); }
std::string to_text(int64_t v) { return std::to_string(v); }
std::string to_text(uint64_t v) { return std::to_string(v); }
std::string to_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back the same
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}
std::string to_text(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& item : v) out += (out.empty() ? "" : ",") + item;
  return out;
}

Status parse_error(std::string_view key, std::string_view value, const char* type) {
  return invalid_argument("setting " + std::string(key) + " takes " + type + ", got '" + std::string(value) + "'");
}

Status from_text(std::string_view key, std::string_view text, std::string& out) {
  (void)key;
  out = std::string(text);
  return {};
}
Status from_text(std::string_view key, std::string_view text, bool& out) {
  if (text == "true") out = true;
  else if (text == "false") out = false;
  else return parse_error(key, text, "true or false");
  return {};
}
template <class Int>
  requires std::is_integral_v<Int>
Status from_text(std::string_view key, std::string_view text, Int& out) {
  Int v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return parse_error(key, text, "an integer");
  out = v;
  return {};
}
Status from_text(std::string_view key, std::string_view text, double& out) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return parse_error(key, text, "a number");
  out = v;
  return {};
}
Status from_text(std::string_view key, std::string_view text, std::vector<std::string>& out) {
  (void)key;
  out.clear();
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    if (comma > start) out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return {};
}

// --- the table: one row per setting --------------------------------------------

struct Field {
  std::string_view key;
  std::function<std::string(const EngineConfig&)> get;
  std::function<Status(EngineConfig&, std::string_view key, std::string_view text)> set;
};

template <class T>
Field top(std::string_view key, T EngineConfig::*member) {
  return {key, [member](const EngineConfig& c) { return to_text(c.*member); },
          [member](EngineConfig& c, std::string_view k, std::string_view t) { return from_text(k, t, c.*member); }};
}

template <class Section, class T>
Field nested(std::string_view key, Section EngineConfig::*section, T Section::*member) {
  return {key, [section, member](const EngineConfig& c) { return to_text(c.*section.*member); },
          [section, member](EngineConfig& c, std::string_view k, std::string_view t) {
            return from_text(k, t, c.*section.*member);
          }};
}

// Sorted by key (keys() answers in this order; a test checks it).
const std::vector<Field>& fields() {
  using E = EngineConfig;
  static const std::vector<Field> table = {
      nested("cache.block_size", &E::cache, &CacheConfig::block_size),
      nested("cache.cache_dtype", &E::cache, &CacheConfig::cache_dtype),
      nested("cache.enable_prefix_caching", &E::cache, &CacheConfig::enable_prefix_caching),
      nested("cache.kv_cache_memory_bytes", &E::cache, &CacheConfig::kv_cache_memory_bytes),
      nested("cache.memory_utilization", &E::cache, &CacheConfig::memory_utilization),
      nested("cache.num_gpu_blocks_override", &E::cache, &CacheConfig::num_gpu_blocks_override),
      nested("compilation.enforce_eager", &E::compilation, &CompilationConfig::enforce_eager),
      nested("compilation.graph_mode", &E::compilation, &CompilationConfig::graph_mode),
      top("device", &E::device),
      nested("lora.enable_lora", &E::lora, &LoraConfig::enable_lora),
      nested("lora.max_lora_rank", &E::lora, &LoraConfig::max_lora_rank),
      nested("lora.max_loras", &E::lora, &LoraConfig::max_loras),
      nested("model.architecture", &E::model, &ModelConfig::architecture),
      nested("model.dtype", &E::model, &ModelConfig::dtype),
      nested("model.enable_sleep_mode", &E::model, &ModelConfig::enable_sleep_mode),
      nested("model.generation_config", &E::model, &ModelConfig::generation_config),
      nested("model.load_format", &E::model, &ModelConfig::load_format),
      nested("model.logits_processors", &E::model, &ModelConfig::logits_processors),
      nested("model.max_model_len", &E::model, &ModelConfig::max_model_len),
      nested("model.model_path", &E::model, &ModelConfig::model_path),
      nested("model.model_shape", &E::model, &ModelConfig::model_shape),
      nested("model.pooling_matryoshka", &E::model, &ModelConfig::pooling_matryoshka),
      nested("model.pooling_normalize", &E::model, &ModelConfig::pooling_normalize),
      nested("model.pooling_type", &E::model, &ModelConfig::pooling_type),
      nested("model.quantization", &E::model, &ModelConfig::quantization),
      nested("model.runner", &E::model, &ModelConfig::runner),
      nested("model.seed", &E::model, &ModelConfig::seed),
      nested("model.served_model_name", &E::model, &ModelConfig::served_model_name),
      nested("model.sleep_wait_timeout_s", &E::model, &ModelConfig::sleep_wait_timeout_s),
      nested("model.weight_type", &E::model, &ModelConfig::weight_type),
      nested("parallel.communicator_host", &E::parallel, &ParallelConfig::communicator_host),
      nested("parallel.communicator_id", &E::parallel, &ParallelConfig::communicator_id),
      nested("parallel.communicator_secret", &E::parallel, &ParallelConfig::communicator_secret),
      nested("parallel.data_parallel_size", &E::parallel, &ParallelConfig::data_parallel_size),
      nested("parallel.enable_expert_parallel", &E::parallel, &ParallelConfig::enable_expert_parallel),
      nested("parallel.num_threads", &E::parallel, &ParallelConfig::num_threads),
      nested("parallel.pipeline_parallel_size", &E::parallel, &ParallelConfig::pipeline_parallel_size),
      nested("parallel.tensor_parallel_size", &E::parallel, &ParallelConfig::tensor_parallel_size),
      nested("parallel.worker_cls", &E::parallel, &ParallelConfig::worker_cls),
      nested("scheduler.max_num_batched_tokens", &E::scheduler, &SchedulerConfig::max_num_batched_tokens),
      nested("scheduler.max_num_queued_requests", &E::scheduler, &SchedulerConfig::max_num_queued_requests),
      nested("scheduler.max_num_seqs", &E::scheduler, &SchedulerConfig::max_num_seqs),
      nested("scheduler.scheduler_cls", &E::scheduler, &SchedulerConfig::scheduler_cls),
      nested("speculative.method", &E::speculative, &SpeculativeConfig::method),
      nested("speculative.num_speculative_tokens", &E::speculative, &SpeculativeConfig::num_speculative_tokens),
      nested("speculative.prompt_lookup_max", &E::speculative, &SpeculativeConfig::prompt_lookup_max),
      nested("speculative.prompt_lookup_min", &E::speculative, &SpeculativeConfig::prompt_lookup_min),
      nested("structured_outputs.compile_timeout_s", &E::structured_outputs, &StructuredOutputsConfig::compile_timeout_s),
      nested("structured_outputs.mask_timeout_ms", &E::structured_outputs, &StructuredOutputsConfig::mask_timeout_ms),
      nested("structured_outputs.max_memory_mib", &E::structured_outputs, &StructuredOutputsConfig::max_memory_mib),
  };
  return table;
}

const Field* find_field(std::string_view key) {
  const auto& table = fields();
  auto it = std::lower_bound(table.begin(), table.end(), key, [](const Field& f, std::string_view k) { return f.key < k; });
  return it != table.end() && it->key == key ? &*it : nullptr;
}

constexpr std::string_view kExtra = "extra.";
constexpr std::string_view kParallel = "parallel.";

}  // namespace

std::optional<std::string> ParallelConfig::get(std::string_view key) const {
  if (!key.starts_with(kParallel)) return std::nullopt;
  const Field* f = find_field(key);
  if (!f) return std::nullopt;
  EngineConfig holder;  // the table reads through an EngineConfig; parallel settings are few and read rarely
  holder.parallel = *this;
  return f->get(holder);
}

std::vector<std::string> ParallelConfig::keys() const {
  std::vector<std::string> out;
  for (const auto& f : fields())
    if (f.key.starts_with(kParallel)) out.emplace_back(f.key);
  return out;
}

std::optional<std::string> EngineConfig::get(std::string_view key) const {
  if (key.starts_with(kExtra)) {
    auto it = extra.find(std::string(key.substr(kExtra.size())));
    if (it == extra.end()) return std::nullopt;
    return it->second;
  }
  const Field* f = find_field(key);
  if (!f) return std::nullopt;
  return f->get(*this);
}

std::vector<std::string> EngineConfig::keys() const {
  std::vector<std::string> out;
  for (const auto& f : fields()) out.emplace_back(f.key);
  for (const auto& [name, value] : extra) out.push_back(std::string(kExtra) + name);
  std::sort(out.begin(), out.end());
  return out;
}

Status EngineConfig::set(std::string_view key, std::string_view value) {
  if (key.starts_with(kExtra)) {
    if (key.size() == kExtra.size()) return invalid_argument("setting 'extra.' needs a name after the dot");
    extra.insert_or_assign(std::string(key.substr(kExtra.size())), std::string(value));
    return {};
  }
  const Field* f = find_field(key);
  if (!f) return invalid_argument("the engine has no setting named '" + std::string(key) + "'");
  return f->set(*this, key, value);
}

}  // namespace troupe
