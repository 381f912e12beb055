#include "runtime/core/kv_events/kv_events_config.hpp"

#include <nlohmann/json.hpp>

#include <charconv>

namespace troupe::engine {
namespace {

constexpr const char* kKeys =
    "enable_kv_cache_events, publisher, endpoint, replay_endpoint, buffer_steps, hwm, max_queue_size, topic";

Status wrong_type(const std::string& key, const char* want) {
  return invalid_argument("--kv-events-config: \"" + key + "\" must be " + want);
}

Status read_key(const std::string& key, const nlohmann::json& v, KvEventsConfig& c, bool* publisher_set) {
  auto positive = [&](int64_t* out) -> Status {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) return wrong_type(key, "a positive integer");
    *out = v.get<int64_t>();
    return {};
  };
  if (key == "enable_kv_cache_events") {
    if (!v.is_boolean()) return wrong_type(key, "true or false");
    c.enable_kv_cache_events = v.get<bool>();
  } else if (key == "publisher") {
    if (v.is_null()) return {};
    if (!v.is_string() || (v.get<std::string>() != "zmq" && v.get<std::string>() != "null"))
      return wrong_type(key, "\"zmq\" or \"null\" (the publishers troupe has)");
    c.publisher = v.get<std::string>();
    *publisher_set = true;
  } else if (key == "endpoint" || key == "topic") {
    if (!v.is_string()) return wrong_type(key, "a string");
    (key == "endpoint" ? c.endpoint : c.topic) = v.get<std::string>();
  } else if (key == "replay_endpoint") {
    if (v.is_null()) c.replay_endpoint.reset();
    else if (!v.is_string()) return wrong_type(key, "a string or null");
    else c.replay_endpoint = v.get<std::string>();
  } else if (key == "buffer_steps") {
    return positive(&c.buffer_steps);
  } else if (key == "hwm") {
    return positive(&c.hwm);
  } else if (key == "max_queue_size") {
    return positive(&c.max_queue_size);
  } else {
    return invalid_argument("--kv-events-config: unknown key \"" + key + "\" (vLLM's keys: " + kKeys + ")");
  }
  return {};
}

}  // namespace

Result<KvEventsConfig> KvEventsConfig::parse(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument("--kv-events-config must be a JSON object (vLLM's KVEventsConfig), got: " + text);
  KvEventsConfig c;
  bool publisher_set = false;
  for (const auto& [key, value] : j.items()) TROUPE_RETURN_IF_ERROR(read_key(key, value, c, &publisher_set));
  // vLLM's __post_init__: no publisher named means zmq when events are on.
  if (!publisher_set) c.publisher = c.enable_kv_cache_events ? "zmq" : "null";
  if (c.endpoint.empty()) return invalid_argument("--kv-events-config: \"endpoint\" is empty");
  if (c.replay_endpoint && c.replay_endpoint->empty())
    return invalid_argument("--kv-events-config: \"replay_endpoint\" is empty");
  return c;
}

Result<std::string> offset_endpoint(const std::string& endpoint, int32_t replica) {
  if (replica == 0) return endpoint;
  if (endpoint.find("inproc") != std::string::npos) return endpoint + "_dp" + std::to_string(replica);
  if (endpoint.find("tcp") != std::string::npos) {
    const size_t colon = endpoint.rfind(':');
    int port = 0;
    const char* first = endpoint.data() + colon + 1;
    const char* last = endpoint.data() + endpoint.size();
    auto parsed = std::from_chars(first, last, port);
    if (colon == std::string::npos || parsed.ec != std::errc() || parsed.ptr != last || port <= 0)
      return invalid_argument("--kv-events-config: endpoint " + endpoint + " has no port to offset for replica " +
                              std::to_string(replica));
    if (port + replica > 65535)
      return invalid_argument("--kv-events-config: endpoint " + endpoint + " + replica " + std::to_string(replica) +
                              " passes port 65535");
    return endpoint.substr(0, colon + 1) + std::to_string(port + replica);
  }
  return invalid_argument("--kv-events-config: endpoint " + endpoint +
                          " cannot be offset per replica (vLLM's rule: it must be tcp:// or inproc://)");
}

}  // namespace troupe::engine
