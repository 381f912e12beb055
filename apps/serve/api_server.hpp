// `troupe serve`'s HTTP side: a RESTinio server on its own asio thread.
// It listens before the engine is ready (/health answers 503 while the model
// loads), then routes the OpenAI endpoints to the engine.
#pragma once

#include "troupe/io_processor.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "apps/serve/server_context.hpp"
#include "troupe/status.hpp"

namespace troupe::apps::serve {

class ApiServer {
 public:
  explicit ApiServer(ServeOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  /// Bind and listen (error when the address is taken); `on_signal` runs on
  /// SIGINT/SIGTERM from the HTTP thread. Once stopped, the process ignores both (its
  /// shutdown is under way and bounded).
  Status start(std::function<void()> on_signal);
  /// The engine is ready (or null again before it is destroyed).
  void set_engine(engine::Engine* engine);
  /// /pooling goes through this IO processor plugin (set before the engine).
  void set_io_processor(std::string name, std::shared_ptr<IOProcessor> processor);
  /// Refuse new requests (503, /health too) while those in flight go on (a graceful shutdown).
  void drain();
  /// Generations in flight now (asked on the HTTP thread).
  size_t in_flight();
  /// Ends every generation in flight now (shutdown): aborted in the engine, a stream ends
  /// with finish_reason "abort" per unfinished choice, an error event naming `why` and
  /// [DONE]; a whole answer is a 503 naming `why`.
  void cut_in_flight(const std::string& why);
  /// Waits until every answer handed to the server was written (false after `timeout`).
  bool wait_answers_written(std::chrono::milliseconds timeout);
  /// Stop listening, end open streams, join the HTTP thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::apps::serve
