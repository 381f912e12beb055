// Sleep mode over HTTP, as vLLM serves it: POST /sleep?level=N, POST
// /wake_up[?tags=weights&tags=kv_cache] and GET /is_sleeping. The routes exist
// only with --enable-sleep-mode and need the API key. Sleeping and waking take
// milliseconds on the CPU (the weights stay mapped), so they answer inline.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "apps/serve/server_context.hpp"

namespace troupe::apps::serve {
namespace {

// The values of `key` in the request's query string.
std::vector<std::string> query_values(const restinio::request_handle_t& req, std::string_view key) {
  std::vector<std::string> out;
  const auto q = restinio::parse_query(req->header().query());
  for (const auto& [k, v] : q) {
    if (k == key) out.emplace_back(v);
  }
  return out;
}

}  // namespace

void handle_sleep_mode(ServerContext& ctx, const restinio::request_handle_t& req, const std::string& path,
                       engine::Engine& e) {
  if (!e.config().model.enable_sleep_mode)
    return respond_error(req, openai::ApiError{404, "NotFoundError",
                                               "sleep mode is off: start troupe serve with --enable-sleep-mode", ""});
  (void)ctx;
  if (path == "/is_sleeping") {
    const int level = e.sleep_level();
    return respond(req, 200, "application/json",
                   fmt::format(R"({{"is_sleeping":{},"level":{}}})", level != 0 ? "true" : "false", level));
  }
  if (path == "/sleep") {
    int level = 1;
    const auto given = query_values(req, "level");
    if (given.size() > 1) return respond_error(req, openai::invalid_param("level", "level is given more than once"));
    if (!given.empty()) {
      if (given[0] == "1") level = 1;
      else if (given[0] == "2") level = 2;
      else return respond_error(req, openai::invalid_param("level", "sleep level must be 1 or 2, got '" + given[0] + "'"));
    }
    auto freed = e.sleep(level);
    if (!freed.ok()) return respond_error(req, openai::from_status(freed.status()));
    return respond(req, 200, "application/json",
                   fmt::format(R"({{"is_sleeping":true,"level":{},"freed_resident_bytes":{}}})", level, *freed));
  }
  // /wake_up
  std::vector<std::string> tags = query_values(req, "tags");
  for (const std::string& t : tags)
    if (t != "weights" && t != "kv_cache")
      return respond_error(req, openai::invalid_param("tags", "wake_up tag '" + t + "' is unknown (weights, kv_cache)"));
  if (Status s = e.wake_up(tags); !s.ok()) return respond_error(req, openai::from_status(s));
  const int level = e.sleep_level();
  return respond(req, 200, "application/json",
                 fmt::format(R"({{"is_sleeping":{},"level":{}}})", level != 0 ? "true" : "false", level));
}

}  // namespace troupe::apps::serve
