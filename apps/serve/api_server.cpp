#include "apps/serve/api_server.hpp"

#include <chrono>
#include <csignal>
#include <future>
#include <optional>

#include <nlohmann/json.hpp>

#include "actors/engine.hpp"
#include "apps/serve/http_listener.hpp"
#include "net/crypto.hpp"
#include "runtime/frontend/openai/render.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "troupe/log.hpp"

namespace troupe::runtime {
const char* version();
}

namespace troupe::apps::serve {
namespace {

// RESTinio reads a connection only while it may take another request: with one request in
// flight and the default limit of one, nobody reads the socket and a client's hang-up goes
// unseen until a write fails (never, for a whole response). With room for more, the read of
// the next request stays posted, sees the FIN/RST and closes the connection, which the
// listener above hears. Pipelining clients get their responses in order, as before.
constexpr std::size_t kMaxPipelinedRequests = 16;

bool authorized(const ServerContext& ctx, const restinio::request_handle_t& req) {
  if (ctx.options.api_key.empty()) return true;
  std::string auth = req->header().get_field_or(restinio::http_field::authorization, "");
  const std::string prefix = "Bearer ";
  std::string_view token = auth;
  if (token.size() >= prefix.size() && token.substr(0, prefix.size()) == prefix) token.remove_prefix(prefix.size());
  else token = {};
  return crypto::equal_constant_time(token, ctx.options.api_key);  // no early exit: timing reveals nothing
}

engine::Engine* ready_engine(ServerContext& ctx, const restinio::request_handle_t& req) {
  engine::Engine* e = ctx.engine.load();
  if (!e) {
    openai::ApiError err = openai::from_status(unavailable("the model is still loading; retry shortly"));
    respond_error(req, err);
  }
  return e;
}

int64_t max_model_len(const engine::Engine& e) {
  int64_t n = e.config().model.max_model_len;
  return n > 0 ? n : e.model_info().context_length;
}

std::string model_error(const engine::Engine& e, const std::string& model, std::optional<openai::ApiError>* out) {
  if (!e.serves_model(model)) *out = openai::model_not_found(model);
  return model;
}

void handle_tokenize(ServerContext& ctx, const restinio::request_handle_t& req) {
  engine::Engine* e = ready_engine(ctx, req);
  if (!e) return;
  openai::TokenizeRequest r;
  std::optional<openai::ApiError> err = openai::parse_tokenize_request(req->body(), ctx.options.limits, &r);
  if (!err) model_error(*e, r.model, &err);
  if (err) return respond_error(req, *err);
  std::string text = r.prompt;
  bool add_special = r.add_special_tokens;
  if (r.has_messages) {
    auto rendered = e->render_chat(r.chat);
    if (!rendered.ok())
      return respond_error(req, openai::from_status(rendered.status(), r.chat.chat_template.empty() ? "messages" : "chat_template"));
    text = *rendered;
    const auto& tok = e->tokenizer();
    const std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
    if (!bos.empty() && text.rfind(bos, 0) == 0) add_special = false;  // the template wrote BOS
  }
  auto ids = e->tokenizer().encode(text, add_special, /*parse_special=*/true);
  respond(req, 200, "application/json", openai::render_tokenize(ids, max_model_len(*e)));
}

void handle_detokenize(ServerContext& ctx, const restinio::request_handle_t& req) {
  engine::Engine* e = ready_engine(ctx, req);
  if (!e) return;
  openai::DetokenizeRequest r;
  std::optional<openai::ApiError> err = openai::parse_detokenize_request(req->body(), ctx.options.limits, &r);
  if (!err) model_error(*e, r.model, &err);
  if (err) return respond_error(req, *err);
  const int64_t vocab = e->tokenizer().vocab_size();
  for (int32_t t : r.tokens) {
    if (t < 0 || t >= vocab)
      return respond_error(req, openai::invalid_param("tokens", fmt::format("token id {} is out of vocabulary (size {})", t, vocab)));
  }
  respond(req, 200, "application/json", openai::render_detokenize(e->tokenizer().decode(r.tokens)));
}

// /health's 200 body: empty while every replica serves (vLLM's), else the replicas that do
// not and why ({"status": "degraded", "unhealthy_replicas": [{"replica": 1, "reason": ...}]}).
std::string replicas_health_body(const engine::Engine& e) {
  nlohmann::json down = nlohmann::json::array();
  const auto health = e.replica_health();
  for (size_t r = 0; r < health.size(); ++r)
    if (!health[r].ok()) down.push_back({{"replica", r}, {"reason", health[r].message()}});
  if (down.empty()) return "";
  return nlohmann::json{{"status", "degraded"}, {"serving_replicas", health.size() - down.size()},
                        {"unhealthy_replicas", down}}
      .dump();
}

// /health and /ping (vLLM's SageMaker probe), /version and /metrics: the routes without a
// key, answered the same past the connection cap (http_listener.hpp). nullopt for others.
std::optional<PlainAnswer> open_route_answer(ServerContext& ctx, std::string_view path) {
  if (path == "/version") return PlainAnswer{200, "application/json", openai::render_version(runtime::version())};
  if (ctx.draining && (path == "/health" || path == "/ping"))
    return PlainAnswer{503, "application/json",
                       openai::render_error(openai::from_status(unavailable("the server is shutting down")))};
  engine::Engine* e = ctx.engine.load();
  if (path == "/health" || path == "/ping") {
    if (!e) return PlainAnswer{503, "application/json", R"({"status":"loading"})"};
    if (!e->healthy())
      return PlainAnswer{503, "application/json",
                         openai::render_error(
                             openai::from_status(unavailable("the engine is unhealthy: " + e->unhealthy_reason())))};
    return PlainAnswer{200, "application/json", replicas_health_body(*e)};
  }
  if (path == "/metrics") {
    if (!e)
      return PlainAnswer{503, "application/json",
                         openai::render_error(openai::from_status(unavailable("the model is still loading; retry shortly")))};
    return PlainAnswer{200, "text/plain; version=0.0.4; charset=utf-8",
                       e->metrics_text() + (ctx.http_metrics ? ctx.http_metrics() : std::string())};
  }
  return std::nullopt;
}

void route(ServerContext& ctx, const restinio::request_handle_t& req) {
  const auto method = req->header().method();
  const std::string path(req->header().path());
  const bool get = method == restinio::http_method_get();
  const bool post = method == restinio::http_method_post();
  if (ctx.options.log_requests)
    TROUPE_LOG_INFO("{}:{} {} {}", req->remote_endpoint().address().to_string(), req->remote_endpoint().port(), method.c_str(), path);

  struct Route {
    const char* path;
    bool post;
    bool open;         // no API key needed
    bool get_or_post = false;  // either method (vLLM's /ping)
  };
  static const Route routes[] = {
      {"/health", false, true},         {"/metrics", false, true},
      {"/version", false, true},        {"/v1/models", false, false},
      {"/v1/completions", true, false}, {"/v1/chat/completions", true, false},
      {"/v1/responses", true, false},
      {"/tokenize", true, false},       {"/detokenize", true, false},
      {"/v1/embeddings", true, false},  {"/pooling", true, false},
      {"/score", true, false},          {"/v1/score", true, false},
      {"/rerank", true, false},         {"/v1/rerank", true, false},
      {"/v2/rerank", true, false},      {"/ping", false, true, true},
      {"/sleep", true, false},          {"/wake_up", true, false},
      {"/is_sleeping", false, false},
      {"/v1/load_lora_adapter", true, false}, {"/v1/unload_lora_adapter", true, false},
  };
  const Route* found = nullptr;
  for (const auto& r : routes)
    if (path == r.path) found = &r;
  if (!found) return respond_error(req, openai::route_not_found(std::string(method.c_str()), path));
  if (found->get_or_post ? !(get || post) : (found->post && !post) || (!found->post && !get))
    return respond_error(req, openai::method_not_allowed(std::string(method.c_str()), path));
  if (!found->open && !authorized(ctx, req)) return respond_error(req, openai::unauthorized());
  if (req->body().size() > ctx.options.max_body_bytes)
    return respond_error(req, openai::payload_too_large(ctx.options.max_body_bytes));

  if (ctx.draining && path != "/metrics" && path != "/version")
    return respond_error(req, openai::from_status(unavailable("the server is shutting down")));
  if (found->open) {
    auto answer = open_route_answer(ctx, path);
    if (answer) return respond(req, answer->status, answer->content_type, std::move(answer->body));
  }
  engine::Engine* e = ready_engine(ctx, req);
  if (!e) return;
  if (path == "/v1/models") {
    std::vector<openai::LoraCard> loras;
    for (const auto& a : e->lora_adapters()) loras.push_back({a.name, a.path});
    return respond(req, 200, "application/json",
                   openai::render_models(e->served_model_name(), ctx.options.model_path, openai::unix_time_now(),
                                         max_model_len(*e), loras));
  }
  if (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") return handle_lora(ctx, req, path, *e);
  if (path == "/v1/completions") return handle_completions(ctx, req, /*chat=*/false);
  if (path == "/v1/chat/completions") return handle_completions(ctx, req, /*chat=*/true);
  if (path == "/v1/responses") return handle_responses(ctx, req);
  if (path == "/tokenize") return handle_tokenize(ctx, req);
  if (path == "/detokenize") return handle_detokenize(ctx, req);
  if (path == "/v1/embeddings") return handle_embeddings(ctx, req, /*vllm_pooling=*/false);
  if (path == "/pooling") return handle_embeddings(ctx, req, /*vllm_pooling=*/true);
  if (path == "/score" || path == "/v1/score") return handle_score(ctx, req);
  if (path == "/rerank" || path == "/v1/rerank" || path == "/v2/rerank") return handle_rerank(ctx, req);
  if (path == "/sleep" || path == "/wake_up" || path == "/is_sleeping") return handle_sleep_mode(ctx, req, path, *e);
}

}  // namespace

std::function<void(const asio::error_code&)> on_answered(const restinio::request_handle_t& req) {
  return [id = req->connection_id()](const asio::error_code&) { http_request_answered(id); };
}

void respond(const restinio::request_handle_t& req, int http_status, const std::string& content_type,
             std::string body) {
  req->create_response(restinio::http_status_line_t{restinio::http_status_code_t{static_cast<std::uint16_t>(http_status)},
                                                    openai::reason_phrase(http_status)})
      .append_header(restinio::http_field::content_type, content_type)
      .append_header(restinio::http_field::server, "troupe")
      .set_body(std::move(body))
      .done(on_answered(req));
}

void ConnectionListener::state_changed(const restinio::connection_state::notice_t& notice) noexcept {
  if (!restinio::holds_alternative<restinio::connection_state::closed_t>(notice.cause())) return;
  try {
    ctx->disconnects.closed(notice.connection_id());
  } catch (const std::exception& ex) {
    TROUPE_LOG_ERROR("connection {} closed: cancelling its requests failed: {}", notice.connection_id(), ex.what());
  } catch (...) {
  }
}

uint64_t DisconnectWatch::watch(uint64_t connection_id, Watched w) {
  const uint64_t token = next_token_++;
  by_connection_[connection_id].emplace(token, std::move(w));
  return token;
}

bool DisconnectWatch::streaming(uint64_t connection_id) const {
  auto it = by_connection_.find(connection_id);
  if (it == by_connection_.end()) return false;
  for (const auto& [token, w] : it->second)
    if (w.streaming) return true;
  return false;
}

void DisconnectWatch::cut_all(const std::string& why) {
  std::vector<std::function<void(const std::string&)>> cuts;
  for (auto& [id, entries] : by_connection_)
    for (auto& [token, w] : entries)
      if (w.cut) cuts.push_back(w.cut);
  for (auto& cut : cuts) cut(why);
}

void DisconnectWatch::forget(uint64_t connection_id, uint64_t token) {
  auto it = by_connection_.find(connection_id);
  if (it == by_connection_.end()) return;
  it->second.erase(token);
  if (it->second.empty()) by_connection_.erase(it);
}

void DisconnectWatch::closed(uint64_t connection_id) {
  auto it = by_connection_.find(connection_id);
  if (it == by_connection_.end()) return;
  auto callbacks = std::move(it->second);  // a callback may forget() its own entry
  by_connection_.erase(it);
  for (auto& [token, w] : callbacks)
    if (w.left) w.left();
}

Result<std::string> submit_on_http_thread(ServerContext& ctx, engine::Engine& e, engine::GenerateRequest request,
                                          std::function<void(engine::RequestOutput)> on_output,
                                          std::string* refused_field) {
  asio::io_context* io = ctx.io;
  auto deliver = std::make_shared<std::function<void(engine::RequestOutput)>>(std::move(on_output));
  return e.submit(
      std::move(request),
      [io, deliver](engine::RequestOutput o) {
        asio::post(*io, [deliver, o = std::move(o)]() mutable { (*deliver)(std::move(o)); });
      },
      refused_field);
}

void respond_error(const restinio::request_handle_t& req, const openai::ApiError& error) {
  if (error.http_status >= 500) TROUPE_LOG_WARNING("{} {}: {}", error.http_status, error.type, error.message);
  else TROUPE_LOG_DEBUG("{} {}: {}", error.http_status, error.type, error.message);
  respond(req, error.http_status, "application/json", openai::render_error(error));
}

struct ApiServer::Impl {
  ServerContext ctx;
  asio::io_context io;
  std::unique_ptr<HttpListener> listener;
  std::unique_ptr<asio::signal_set> signals;
  std::thread thread;
  bool stopped = false;
};

namespace {

// The listener's counts, appended to the engine's /metrics (HTTP thread).
std::string render_http_metrics(const ListenerStats& s) {
  return fmt::format(
      "# HELP troupe:http_connections HTTP connections open (at most --max-connections).\n"
      "# TYPE troupe:http_connections gauge\n"
      "troupe:http_connections {}\n"
      "# HELP troupe:http_max_connections The cap on open HTTP connections (--max-connections).\n"
      "# TYPE troupe:http_max_connections gauge\n"
      "troupe:http_max_connections {}\n"
      "# HELP troupe:http_connections_refused_total Connections answered 503 and closed: past "
      "--max-connections, or while the process was out of file descriptors.\n"
      "# TYPE troupe:http_connections_refused_total counter\n"
      "troupe:http_connections_refused_total{{reason=\"max_connections\"}} {}\n"
      "troupe:http_connections_refused_total{{reason=\"out_of_descriptors\"}} {}\n"
      "# HELP troupe:http_accept_errors_total Failed accepts (each logged at most once a second and re-armed).\n"
      "# TYPE troupe:http_accept_errors_total counter\n"
      "troupe:http_accept_errors_total {}\n"
      "# HELP troupe:http_requests_refused_total Requests refused by a limit before they were read.\n"
      "# TYPE troupe:http_requests_refused_total counter\n"
      "troupe:http_requests_refused_total{{status=\"413\"}} {}\n"
      "troupe:http_requests_refused_total{{status=\"431\"}} {}\n"
      "troupe:http_requests_refused_total{{status=\"400\"}} {}\n",
      s.open, s.max_connections, s.over_limit - s.probes_answered, s.shed, s.accept_errors, s.refused_413,
      s.refused_431, s.refused_400);
}

restinio::server_settings_t<Traits> http_settings(ServerContext* ctx) {
  restinio::server_settings_t<Traits> settings;
  settings.port(static_cast<std::uint16_t>(ctx->options.port))
      .address(ctx->options.host)
      // The limiter of guarded_socket.hpp refuses larger bodies first, with a 413.
      .incoming_http_msg_limits(restinio::incoming_http_msg_limits_t{}.max_body_size(ctx->options.max_body_bytes))
      // Generation can take long; streams are ended by us, never by a timer.
      .handle_request_timeout(std::chrono::hours(24))
      .write_http_response_timelimit(std::chrono::seconds(60))
      .read_next_http_message_timelimit(std::chrono::seconds(60))
      .max_pipelined_requests(kMaxPipelinedRequests)
      .connection_state_listener(std::make_shared<ConnectionListener>(ConnectionListener{ctx}))
      .request_handler([ctx](restinio::request_handle_t req) {
        http_request_started(req->connection_id());
        try {
          route(*ctx, req);
        } catch (const std::exception& ex) {
          TROUPE_LOG_ERROR("request handler failed: {}", ex.what());
          try {
            respond_error(req, openai::from_status(internal_error(ex.what())));
          } catch (...) {
          }
        }
        return restinio::request_accepted();
      });
  return settings;
}

}  // namespace

ApiServer::ApiServer(ServeOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->ctx.options = std::move(options);
  impl_->ctx.io = &impl_->io;
}

ApiServer::~ApiServer() {
  stop();
  impl_->listener.reset();
}

Status ApiServer::start(std::function<void()> on_signal) {
  auto& im = *impl_;
  ServerContext* ctx = &im.ctx;
  ListenerOptions lo;
  lo.host = ctx->options.host;
  lo.port = static_cast<uint16_t>(ctx->options.port);
  lo.max_connections = ctx->options.max_connections;
  lo.limits.max_body_bytes = ctx->options.max_body_bytes;
  try {
    im.listener = std::make_unique<HttpListener>(
        im.io, lo, http_settings(ctx),
        [ctx](std::string_view method, std::string_view path) -> std::optional<PlainAnswer> {
          if (method != "GET" && !(method == "POST" && path == "/ping")) return std::nullopt;
          return open_route_answer(*ctx, path);
        });
  } catch (const std::exception& ex) {
    return invalid_argument(fmt::format("cannot set up the HTTP server on {}:{}: {}", ctx->options.host,
                                        ctx->options.port, ex.what()));
  }
  if (Status st = im.listener->open(); !st.ok()) {
    im.listener.reset();
    return st;
  }
  HttpListener* listener = im.listener.get();
  ctx->http_metrics = [listener] { return render_http_metrics(listener->stats()); };
  listener->registry()->hooks.may_probe = [ctx](uint64_t id) { return !ctx->disconnects.streaming(id); };
  im.signals = std::make_unique<asio::signal_set>(im.io, SIGINT, SIGTERM);
  im.signals->async_wait([cb = std::move(on_signal)](const asio::error_code& ec, int sig) {
    if (ec) return;
    TROUPE_LOG_INFO("received signal {}: shutting down", sig);
    if (cb) cb();
  });
  im.thread = std::thread([&io = im.io, registry = listener->registry()] {
    ConnectionRegistry::set_current(registry.get());
    auto guard = asio::make_work_guard(io);
    try {
      io.run();
    } catch (const std::exception& ex) {
      TROUPE_LOG_ERROR("HTTP thread stopped: {}", ex.what());
    }
    ConnectionRegistry::set_current(nullptr);
  });
  return {};
}

void ApiServer::set_engine(engine::Engine* engine) { impl_->ctx.engine.store(engine); }
void ApiServer::set_io_processor(std::string name, std::shared_ptr<IOProcessor> processor) {
  impl_->ctx.io_processor_name = std::move(name);
  impl_->ctx.io_processor = std::move(processor);
}

void ApiServer::drain() { impl_->ctx.draining = true; }

namespace {

// Runs `fn` on the HTTP thread and waits for its answer (`busy` if that thread does not
// answer within 5 s).
template <class T, class F>
T on_http_thread(asio::io_context& io, F fn, T busy) {
  auto answer = std::make_shared<std::promise<T>>();
  auto got = answer->get_future();
  asio::post(io, [answer, fn = std::move(fn)]() mutable { answer->set_value(fn()); });
  if (got.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return busy;
  return got.get();
}

}  // namespace

size_t ApiServer::in_flight() {
  auto& im = *impl_;
  if (im.stopped || !im.thread.joinable()) return 0;
  return on_http_thread<size_t>(im.io, [ctx = &im.ctx] { return ctx->disconnects.watched(); }, 1);
}

void ApiServer::cut_in_flight(const std::string& why) {
  auto& im = *impl_;
  if (im.stopped || !im.thread.joinable()) return;
  on_http_thread<bool>(
      im.io,
      [ctx = &im.ctx, why] {
        ctx->disconnects.cut_all(why);
        return true;
      },
      false);
}

bool ApiServer::wait_answers_written(std::chrono::milliseconds timeout) {
  auto& im = *impl_;
  if (im.stopped || !im.thread.joinable()) return true;
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const size_t busy = on_http_thread<size_t>(
        im.io, [listener = im.listener.get()] { return listener->registry()->busy(); }, 1);
    if (busy == 0) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ApiServer::stop() {
  auto& im = *impl_;
  if (im.stopped) return;
  im.stopped = true;
  im.ctx.stopping = true;
  im.ctx.engine.store(nullptr);
  if (im.thread.joinable()) {
    std::promise<void> closed;
    asio::post(im.io, [&] {
      if (im.listener) im.listener->close();
      if (im.signals) {
        asio::error_code ec;
        im.signals->cancel(ec);
      }
      closed.set_value();
    });
    closed.get_future().wait();
    im.io.stop();
    im.thread.join();
  }
  // Destroying the signal set gives SIGINT/SIGTERM back their default action, so a
  // second SIGTERM (a supervisor repeating itself) would kill a process that is already
  // on its way out and turn exit 0 into death by signal. The shutdown under way is
  // bounded (answers 2 s, engine 15 s), so later signals are ignored; SIGKILL remains.
  if (im.signals) {
    im.signals.reset();
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);
  }
}

}  // namespace troupe::apps::serve
