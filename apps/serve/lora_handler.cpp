// LoRA adapters over HTTP, as vLLM serves them: POST /v1/load_lora_adapter
// {"lora_name", "lora_path"} and POST /v1/unload_lora_adapter {"lora_name"}.
// The routes need the API key and --enable-lora. Every rank reads the file
// itself; a file that is missing or does not fit the model is a 400 naming
// the problem, an unknown name to unload a 404.
#include <nlohmann/json.hpp>

#include <string>

#include "actors/engine.hpp"
#include "apps/serve/server_context.hpp"

namespace troupe::apps::serve {
namespace {

// The string field `key` of `body`, or an error naming it.
bool string_field(const nlohmann::json& body, const char* key, std::string* out, openai::ApiError* err) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string() || it->get<std::string>().empty()) {
    *err = openai::invalid_param(key, std::string(key) + " is required (a non-empty string)");
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

}  // namespace

void handle_lora(ServerContext& ctx, const restinio::request_handle_t& req, const std::string& path, engine::Engine& e) {
  (void)ctx;
  if (!e.config().lora.enable_lora)
    return respond_error(req, openai::ApiError{404, "NotFoundError",
                                               "LoRA is off: start troupe serve with --enable-lora", ""});
  auto body = nlohmann::json::parse(req->body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) return respond_error(req, openai::invalid_json("expected a JSON object"));
  openai::ApiError err;
  std::string name;
  if (!string_field(body, "lora_name", &name, &err)) return respond_error(req, err);
  if (path == "/v1/load_lora_adapter") {
    std::string file;
    if (!string_field(body, "lora_path", &file, &err)) return respond_error(req, err);
    auto loaded = e.load_lora_adapter(name, file);
    if (!loaded.ok()) {
      // A missing, malformed or mismatched adapter is invalid_argument (engine::LoraRegistry): vLLM's 400.
      const bool clients = loaded.status().code() == StatusCode::invalid_argument;
      return respond_error(req, openai::from_status(loaded.status(), clients ? "lora_path" : ""));
    }
    return respond(req, 200, "text/plain; charset=utf-8",
                   "Success: LoRA adapter '" + name + "' added successfully.");
  }
  if (Status s = e.unload_lora_adapter(name); !s.ok()) return respond_error(req, openai::from_status(s, "lora_name"));
  return respond(req, 200, "text/plain; charset=utf-8", "Success: LoRA adapter '" + name + "' removed successfully.");
}

}  // namespace troupe::apps::serve
