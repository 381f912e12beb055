#include "actors/io_processing.hpp"

#include <future>
#include <mutex>

#include "actors/engine.hpp"

namespace troupe::engine {
namespace {

/// Calls into the plugin; an exception becomes an internal error naming the plugin.
template <class T, class F>
Result<T> guarded(const std::string& plugin, const char* step, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return internal_error("IO processor plugin " + plugin + " threw in " + step + ": " + e.what());
  } catch (...) {
    return internal_error("IO processor plugin " + plugin + " threw in " + step);
  }
}

struct Run {
  Engine* engine = nullptr;
  IOProcessor* processor = nullptr;
  std::string plugin;
  std::string parsed;
  IOProcessorDone done;
  std::mutex mu;
  std::vector<PoolingOutput> outputs;
  std::vector<std::string> ids;
  size_t remaining = 0;
  bool finished = false;

  void fail(Status s) {
    {
      std::lock_guard lock(mu);
      if (finished) return;
      finished = true;
    }
    for (const auto& id : ids)
      if (!id.empty()) engine->abort(id);
    done(std::move(s));
  }

  void post_process() {
    try {
      processor->post_process_async(outputs, parsed, [this](Result<std::string> out) {
        if (!out) return done(out.status());
        done(guarded<std::string>(plugin, "output_to_response", [&] { return processor->output_to_response(*out); }));
      });
    } catch (const std::exception& e) {
      done(internal_error("IO processor plugin " + plugin + " threw in post_process: " + e.what()));
    }
  }
};

}  // namespace

void run_io_processor_async(Engine& engine, IOProcessor& processor, const std::string& plugin_name,
                            std::string request_json, IOProcessorDone done) {
  auto run = std::make_shared<Run>();
  run->engine = &engine;
  run->processor = &processor;
  run->plugin = plugin_name;
  run->done = std::move(done);
  auto parsed = guarded<std::string>(plugin_name, "parse_request", [&] { return processor.parse_request(request_json); });
  if (!parsed) return run->done(parsed.status());
  run->parsed = std::move(parsed).value();
  auto on_prompts = [run](Result<std::vector<std::string>> prompts) {
    if (!prompts) return run->done(prompts.status());
    if (prompts->empty()) return run->done(internal_error("IO processor plugin " + run->plugin + " made no prompts"));
    run->outputs.resize(prompts->size());
    run->ids.resize(prompts->size());
    run->remaining = prompts->size();
    for (size_t i = 0; i < prompts->size(); ++i) {
      GenerateRequest g;
      g.prompt = (*prompts)[i];
      g.pooling = PoolingParams{};
      auto id = run->engine->submit(std::move(g), [run, i](RequestOutput o) {
        if (!o.finished) return;
        if (o.finish_reason == FinishReason::error || o.embedding.empty())
          return run->fail(o.error.ok() ? internal_error("pooling failed") : o.error);
        bool last = false;
        {
          std::lock_guard lock(run->mu);
          if (run->finished) return;
          run->outputs[i] = PoolingOutput{std::move(o.embedding), o.num_prompt_tokens};
          last = --run->remaining == 0;
          if (last) run->finished = true;
        }
        if (last) run->post_process();
      });
      if (!id) return run->fail(id.status());
      std::lock_guard lock(run->mu);
      run->ids[i] = *id;
    }
  };
  try {
    processor.pre_process_async(run->parsed, on_prompts);
  } catch (const std::exception& e) {
    run->done(internal_error("IO processor plugin " + plugin_name + " threw in pre_process: " + e.what()));
  }
}

Result<std::string> run_io_processor(Engine& engine, IOProcessor& processor, const std::string& plugin_name,
                                     const std::string& request_json) {
  auto promise = std::make_shared<std::promise<Result<std::string>>>();
  auto future = promise->get_future();
  run_io_processor_async(engine, processor, plugin_name, request_json,
                         [promise](Result<std::string> r) { promise->set_value(std::move(r)); });
  return future.get();
}

}  // namespace troupe::engine
