// `troupe chat [--url URL]`: an interactive chat with a running OpenAI-compatible
// server (troupe serve, vLLM, ...), as `vllm chat`; `troupe chat MODEL` first
// starts `troupe serve MODEL` of its own on a free loopback port (its log in a
// temporary file, shown when it fails to start) and stops it at the end, so a
// model can be tried without a server or curl. Each stdin line is a user
// message; the answer streams to stdout as it is generated (the reasoning of a
// --reasoning-parser server first, in brackets); the conversation is kept and
// sent whole each turn, so the server's chat template renders it. `--quick MSG`
// asks once and exits. End of input ends the chat.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "apps/command.hpp"

namespace troupe::apps {
namespace {

using json = nlohmann::json;

extern "C" char** environ;

struct Options {
  std::string model;       // set: serve this model locally for the chat
  std::vector<std::string> serve_args;  // more `troupe serve` flags for the local server
  double start_timeout_s = 300;
  bool url_given = false;
  std::string url = "http://localhost:8000/v1";
  std::string model_name;  // empty: the server's first model
  std::string api_key;
  std::string system_prompt;
  std::string quick;
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature;
  double timeout_s = 600;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe chat: error: %s\n", message.c_str());
  return 1;
}

class ChatClient {
 public:
  ChatClient(const Options& o, http::Url url) : o_(o), url_(std::move(url)) {
    headers_ = {{"Content-Type", "application/json"}};
    if (!o.api_key.empty()) headers_.push_back({"Authorization", "Bearer " + o.api_key});
    if (!o.system_prompt.empty()) messages_.push_back({{"role", "system"}, {"content", o.system_prompt}});
  }

  // The served model's name from /models (the first one), unless given.
  Status resolve_model() {
    if (!o_.model_name.empty()) {
      model_ = o_.model_name;
      return {};
    }
    auto r = http::request(url_.host, url_.port, "GET", url_.base_path + "/models", "", headers_, {}, timeout());
    if (!r.ok()) return unavailable("cannot reach " + o_.url + ": " + r.status().message());
    if (r->status != 200) return unavailable(fmt_status("GET /models", r->status, r->body));
    json models = json::parse(r->body, nullptr, false);
    if (!models.is_object() || !models["data"].is_array() || models["data"].empty() ||
        !models["data"][0]["id"].is_string())
      return unavailable("GET /models answered without a model: " + r->body);
    model_ = models["data"][0]["id"].get<std::string>();
    return {};
  }

  // One turn: the answer streamed to stdout; on success it joins the conversation.
  Status ask(const std::string& text) {
    messages_.push_back({{"role", "user"}, {"content", text}});
    json body = {{"model", model_}, {"messages", messages_}, {"stream", true}};
    if (o_.max_tokens) body["max_tokens"] = *o_.max_tokens;
    if (o_.temperature) body["temperature"] = *o_.temperature;
    std::string answer, raw, stream_error;
    bool in_reasoning = false;
    http::SseParser sse;
    auto r = http::request(
        url_.host, url_.port, "POST", url_.base_path + "/chat/completions", body.dump(), headers_,
        [&](std::string_view piece) {
          raw.append(piece.substr(0, std::min<size_t>(piece.size(), 1 << 16)));
          sse.feed(piece, [&](std::string_view data) {
            if (data == "[DONE]") return;
            json chunk = json::parse(data, nullptr, false);
            if (!chunk.is_object()) return;
            if (chunk.contains("error")) {
              stream_error = chunk["error"].value("message", chunk.dump());
              return;
            }
            if (!chunk["choices"].is_array() || chunk["choices"].empty()) return;
            const json& delta = chunk["choices"][0]["delta"];
            if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string()) {
              if (!in_reasoning) std::fputs("[", stdout);
              in_reasoning = true;
              std::fputs(delta["reasoning_content"].get<std::string>().c_str(), stdout);
            }
            if (delta.contains("content") && delta["content"].is_string()) {
              const std::string c = delta["content"].get<std::string>();
              if (in_reasoning && !c.empty()) {
                std::fputs("]\n", stdout);
                in_reasoning = false;
              }
              answer += c;
              std::fputs(c.c_str(), stdout);
            }
            std::fflush(stdout);
          });
          return true;
        },
        timeout());
    if (in_reasoning) std::fputs("]", stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    Status st;
    if (!r.ok()) st = unavailable("cannot reach " + o_.url + ": " + r.status().message());
    else if (r->status != 200) st = unavailable(fmt_status("POST /chat/completions", r->status, raw));
    else if (!stream_error.empty()) st = unavailable("the server ended the answer with an error: " + stream_error);
    if (!st.ok()) {
      messages_.erase(messages_.end() - 1);  // the turn failed: it is not part of the conversation
      return st;
    }
    messages_.push_back({{"role", "assistant"}, {"content", answer}});
    return {};
  }

 private:
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000));
  }
  static std::string fmt_status(const std::string& what, int status, const std::string& body) {
    json j = json::parse(body, nullptr, false);
    std::string message = body;
    if (j.is_object() && j["error"].is_object() && j["error"]["message"].is_string())
      message = j["error"]["message"].get<std::string>();
    return what + " answered " + std::to_string(status) + ": " + message;
  }

  const Options& o_;
  http::Url url_;
  http::Headers headers_;
  std::string model_;
  json messages_ = json::array();
};

/// A `troupe serve MODEL` child on 127.0.0.1, stopped (SIGTERM, then SIGKILL) when destroyed.
class LocalServer {
 public:
  ~LocalServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 100 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (::waitpid(pid_, nullptr, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    if (!log_.empty()) std::remove(log_.c_str());
  }

  /// Starts it and waits (bounded) until /health answers 200. Errors carry the end of its log.
  Status start(const Options& o) {
    const int port = free_port();
    if (port <= 0) return unavailable("no free loopback port for the local server");
    port_ = port;
    log_ = "/tmp/troupe-chat-serve-" + std::to_string(::getpid()) + ".log";
    std::vector<std::string> args = {"troupe", "serve", o.model, "--host", "127.0.0.1", "--port", std::to_string(port),
                                     "--disable-log-stats"};
    args.insert(args.end(), o.serve_args.begin(), o.serve_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    const int rc = posix_spawn(&pid_, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = -1;
      return unavailable("cannot start troupe serve: " + std::string(std::strerror(rc)));
    }
    std::fprintf(stderr, "troupe chat: starting troupe serve %s (log: %s) ...\n", o.model.c_str(), log_.c_str());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.start_timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return unavailable("troupe serve " + o.model + " exited before it served: " + log_tail());
      }
      auto r = http::request("127.0.0.1", port_, "GET", "/health", "", {}, {}, std::chrono::seconds(2));
      if (r.ok() && r->status == 200) return {};
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return unavailable("troupe serve " + o.model + " did not become healthy within " +
                       std::to_string(static_cast<int>(o.start_timeout_s)) + " s: " + log_tail());
  }
  int port() const { return port_; }

 private:
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
    return port;
  }
  // The last error line of the log (the serve command's one-line error), else its last line.
  std::string log_tail() const {
    std::ifstream in(log_);
    std::string line, last, error;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      last = line;
      if (line.find("error") != std::string::npos) error = line;
    }
    return error.empty() ? last : error;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

int run_chat(Options o) {
  if (!o.model.empty() && o.url_given) return fail("give a MODEL to serve or --url of a running server, not both");
  std::unique_ptr<LocalServer> local;
  if (!o.model.empty()) {
    local = std::make_unique<LocalServer>();
    if (Status st = local->start(o); !st.ok()) return fail(st.message());
    o.url = "http://127.0.0.1:" + std::to_string(local->port()) + "/v1";
  }
  auto url = http::parse_url(o.url);
  if (!url.ok()) return fail("--url " + o.url + ": " + url.status().message());
  if (o.timeout_s <= 0) return fail("--timeout must be positive");
  ChatClient client(o, *url);
  if (Status st = client.resolve_model(); !st.ok()) return fail(st.message());
  if (!o.quick.empty()) {
    Status st = client.ask(o.quick);
    return st.ok() ? 0 : fail(st.message());
  }
  std::string line;
  for (;;) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    // A failed turn is reported and the chat goes on (the server may come back).
    if (Status st = client.ask(line); !st.ok()) std::fprintf(stderr, "troupe chat: error: %s\n", st.message().c_str());
  }
  std::fputs("\n", stdout);
  return 0;
}

const CommandRegistration kRegistration(
    "chat", "Chat in the terminal: with MODEL served locally, or with a running server (--url, as vllm chat)",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("model", o->model,
                     "A model (GGUF file or Hugging Face folder) to serve locally for the chat; without it, "
                     "chat with --url");
      auto* url = sub.add_option("--url", o->url, "The server's OpenAI base URL (default http://localhost:8000/v1)");
      sub.add_option("--model-name", o->model_name, "The model to ask (default: the server's first model)");
      sub.add_option("--api-key", o->api_key, "Sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY)")
          ->envname("OPENAI_API_KEY");
      sub.add_option("--system-prompt", o->system_prompt, "A system message that starts the conversation");
      sub.add_option("-q,--quick", o->quick, "Ask this one message, print the answer and exit");
      sub.add_option("--max-tokens", o->max_tokens, "max_tokens of each answer (default: the server's)");
      sub.add_option("--temperature", o->temperature, "temperature of each answer (default: the server's)");
      sub.add_option("--timeout", o->timeout_s, "Seconds one answer may take (default 600)");
      sub.add_option("--serve-arg", o->serve_args,
                     "A flag for the local troupe serve (repeat it: --serve-arg=--threads --serve-arg=2)");
      sub.add_option("--start-timeout", o->start_timeout_s,
                     "Seconds the local server may take to load the model (default 300)");
      return [o, url]() {
        o->url_given = url->count() > 0;
        return run_chat(*o);
      };
    });

}  // namespace
}  // namespace troupe::apps
