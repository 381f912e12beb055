// Running an IO processor plugin against an engine (a pooling model): parse,
// pre-process into prompts, pool them as one batch, post-process, render.
// The host side of the IOProcessor contract: every call into the plugin is
// guarded, so a plugin that throws gives an internal error, never a crash.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "troupe/io_processor.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

class Engine;

/// Called once with the response body, or the error (its code says 400 or 500).
using IOProcessorDone = std::function<void(Result<std::string>)>;

/// Runs `request_json` through `processor` on `engine`; `done` is called once,
/// on an engine thread or the caller's. `processor` must outlive the call.
void run_io_processor_async(Engine& engine, IOProcessor& processor, const std::string& plugin_name,
                            std::string request_json, IOProcessorDone done);

/// The same, waiting for the answer (offline use).
Result<std::string> run_io_processor(Engine& engine, IOProcessor& processor, const std::string& plugin_name,
                                     const std::string& request_json);

}  // namespace troupe::engine
