// State shared by the HTTP handlers of `troupe serve`: options, the engine
// (null while it loads), the asio context everything HTTP runs on, and what
// each open connection has in flight (aborted when it closes, and on shutdown).
// Internal to apps/serve.
#pragma once

#include <restinio/all.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "runtime/protocol/request_types.hpp"
#include "runtime/frontend/openai/errors.hpp"
#include "runtime/frontend/openai/protocol.hpp"
#include "troupe/io_processor.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {
class Engine;
}

namespace troupe::apps::serve {

struct ServeOptions {
  std::string host = "0.0.0.0";
  int port = 8000;
  std::string api_key;                      // empty: no authentication
  uint64_t max_body_bytes = 1u << 20;       // larger bodies get 413 (from Content-Length, unread)
  size_t max_connections = 1024;            // --max-connections: more get 503 (http_listener.hpp)
  openai::Limits limits;
  std::string model_path;                   // "root" in /v1/models
  bool log_requests = false;                // one info line per request
  /// --enable-auto-tool-choice with --tool-call-parser: the parser of tool_choice "auto"
  /// (empty: "auto" with tools is a 400, as vLLM).
  std::string tool_call_parser;
  /// --reasoning-parser: chat answers split into reasoning_content and content (empty: none).
  std::string reasoning_parser;
};

/// What the requests of each connection leave to cancel if their client goes away:
/// RESTinio reports a connection closed (a reset, a failed write, or a FIN with nothing in
/// flight: guarded_socket.hpp holds a half-close back) and every callback of that
/// connection runs. HTTP thread only.
class DisconnectWatch {
 public:
  struct Watched {
    bool streaming = false;                           // its answer is being streamed
    std::function<void()> left;                       // the client is gone
    std::function<void(const std::string&)> cut;     // shutdown: end it now, saying why
  };
  /// `w.left` runs if connection `connection_id` closes before forget(connection_id, token).
  uint64_t watch(uint64_t connection_id, Watched w);
  void forget(uint64_t connection_id, uint64_t token);
  /// Runs and forgets every `left` callback of the connection.
  void closed(uint64_t connection_id);
  /// Whether an answer of the connection is being streamed.
  bool streaming(uint64_t connection_id) const;
  /// Runs every `cut` callback (each forgets its entry).
  void cut_all(const std::string& why);
  /// Generations watched now (those in flight), over every connection.
  size_t watched() const {
    size_t n = 0;
    for (const auto& [id, callbacks] : by_connection_) n += callbacks.size();
    return n;
  }

 private:
  uint64_t next_token_ = 0;
  std::unordered_map<uint64_t, std::unordered_map<uint64_t, Watched>> by_connection_;
};

struct ServerContext {
  ServeOptions options;
  asio::io_context* io = nullptr;
  std::atomic<engine::Engine*> engine{nullptr};
  std::atomic<bool> stopping{false};
  std::atomic<bool> draining{false};  // shutting down: new requests are refused, those in flight go on
  std::atomic<uint64_t> next_request{0};
  std::string io_processor_name;              // --io-processor-plugin
  std::shared_ptr<IOProcessor> io_processor;  // /pooling goes through it when set
  DisconnectWatch disconnects;                // generations in flight, by connection
  std::function<std::string()> http_metrics;  // the listener's counts for /metrics (HTTP thread)
};

/// The callback of an answer's last write: its connection may close now (a half-closed
/// client gets its close once every answer is written; guarded_socket.hpp).
std::function<void(const asio::error_code&)> on_answered(const restinio::request_handle_t& req);

/// Writes a complete (non-streamed) response.
void respond(const restinio::request_handle_t& req, int http_status, const std::string& content_type,
             std::string body);
/// The one way an error reaches a client: the OpenAI envelope with its HTTP status.
void respond_error(const restinio::request_handle_t& req, const openai::ApiError& error);

/// Submits `request` to `e`; each of its outputs reaches `on_output` on the HTTP thread
/// (ctx.io), which owns all HTTP state: engine callbacks run on CAF threads and must not
/// block. A refusal's request field at fault lands in `refused_field`.
Result<std::string> submit_on_http_thread(ServerContext& ctx, engine::Engine& e, engine::GenerateRequest request,
                                          std::function<void(engine::RequestOutput)> on_output,
                                          std::string* refused_field);

/// POST /v1/completions and /v1/chat/completions (streamed or whole).
void handle_completions(ServerContext& ctx, const restinio::request_handle_t& req, bool chat);
/// POST /v1/responses: a chat answer as an OpenAI response object or its stream of events.
void handle_responses(ServerContext& ctx, const restinio::request_handle_t& req);
/// POST /v1/embeddings (vllm_pooling false) and /pooling (true): a pooling model's vectors.
void handle_embeddings(ServerContext& ctx, const restinio::request_handle_t& req, bool vllm_pooling);
/// POST /score and /v1/score: cosine similarity of text_1 to each text_2 under a pooling model.
void handle_score(ServerContext& ctx, const restinio::request_handle_t& req);
/// POST /rerank, /v1/rerank and /v2/rerank: documents ranked by the cosine of their
/// embedding to the query's (a bi-encoder, as vLLM serves embedding models).
void handle_rerank(ServerContext& ctx, const restinio::request_handle_t& req);
/// POST /sleep, POST /wake_up, GET /is_sleeping (404 without --enable-sleep-mode).
void handle_sleep_mode(ServerContext& ctx, const restinio::request_handle_t& req, const std::string& path,
                       engine::Engine& e);
/// POST /v1/load_lora_adapter and /v1/unload_lora_adapter (404 without --enable-lora).
void handle_lora(ServerContext& ctx, const restinio::request_handle_t& req, const std::string& path, engine::Engine& e);

}  // namespace troupe::apps::serve
