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

// A name is logged, listed by /v1/models and matched per request; a path is a file path.
constexpr size_t kMaxLoraNameBytes = 256;
constexpr size_t kMaxLoraPathBytes = 4096;  // PATH_MAX

// The string field `key` of `body` (at most `max_bytes`, no NUL byte: a C path would end
// there and name another file), or an error naming it.
bool string_field(const nlohmann::json& body, const char* key, size_t max_bytes, std::string* out,
                  openai::ApiError* err) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string() || it->get<std::string>().empty()) {
    *err = openai::invalid_param(key, std::string(key) + " is required (a non-empty string)");
    return false;
  }
  const auto& text = it->get_ref<const std::string&>();
  if (text.size() > max_bytes) {
    *err = openai::invalid_param(key, std::string(key) + " is longer than " + std::to_string(max_bytes) + " bytes");
    return false;
  }
  if (text.find('\0') != std::string::npos) {
    *err = openai::invalid_param(key, std::string(key) + " contains a NUL byte");
    return false;
  }
  *out = text;
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
  if (!string_field(body, "lora_name", kMaxLoraNameBytes, &name, &err)) return respond_error(req, err);
  if (path == "/v1/load_lora_adapter") {
    std::string file;
    if (!string_field(body, "lora_path", kMaxLoraPathBytes, &file, &err)) return respond_error(req, err);
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
