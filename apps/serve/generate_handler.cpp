// POST /v1/completions and /v1/chat/completions: parse, tokenize, submit one
// engine request per (prompt, choice) (the engine admits each), then either stream
// each delta as a server-sent event or answer once everything finished.
// Engine callbacks arrive on CAF threads and are posted to the HTTP thread;
// all state below is touched on the HTTP thread only. A client that hangs up
// before its answer (whole or streamed) has every choice aborted: the connection's
// close reaches DisconnectWatch, and a stream's failed write says so too.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "apps/serve/server_context.hpp"
#include "runtime/frontend/openai/chat_answer.hpp"
#include "runtime/frontend/openai/reasoning_parsers.hpp"
#include "runtime/frontend/openai/render.hpp"
#include "runtime/frontend/openai/responses.hpp"
#include "runtime/frontend/openai/responses_stream.hpp"
#include "runtime/frontend/openai/tool_parsers.hpp"
#include "runtime/rank/structured/grammar_cache.hpp"
#include "runtime/frontend/openai/tools.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "troupe/log.hpp"

namespace troupe::apps::serve {
namespace {

using ChunkedResponse = restinio::response_builder_t<restinio::chunked_output_t>;

// The base model (empty or its served name) or a loaded LoRA adapter's name.
bool known_model(const engine::Engine& e, const std::string& model) {
  if (e.serves_model(model)) return true;
  for (const auto& a : e.lora_adapters())
    if (a.name == model) return true;
  return false;
}

struct ChoiceState {
  std::string engine_id;
  int prompt_index = 0;
  openai::Choice choice;       // accumulated text/logprobs for a whole answer
  int64_t text_len = 0;        // streamed text so far (completions logprobs offsets)
  int64_t completion_tokens = 0;
  bool finished = false;
  bool first_chunk_sent = false;
  std::optional<openai::ForcedToolCallStream> tool_stream;  // streaming a forced tool choice
  std::optional<openai::ChatAnswerStreamer> answer_stream;  // streaming reasoning and/or tool_choice "auto"
  Status error;                 // ok unless the request ended with an error
  std::string reasoning_text;   // streamed reasoning (Responses' reasoning_tokens)
};

struct Generation : std::enable_shared_from_this<Generation> {
  ServerContext* ctx = nullptr;
  engine::Engine* engine = nullptr;
  restinio::request_handle_t req;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  bool return_token_ids = false;            // vLLM: prompt and output ids on each choice
  bool return_tokens_as_token_ids = false;  // vLLM: logprobs' tokens as "token_id:N"
  openai::ToolsRequest tools;  // chat: "required" or a named function answers with tool_calls
  std::unique_ptr<openai::ToolParser> tool_parser;  // chat with tools and tool_choice "auto"
  // --reasoning-parser: reasoning_content split from the content (tool calls are parsed
  // from the content after it); include_reasoning false drops the reasoning.
  std::unique_ptr<openai::ReasoningParser> reasoning_parser;
  bool include_reasoning = true;
  // POST /v1/responses: the chat answer as a response object, or as its stream of events.
  bool responses = false;
  nlohmann::json responses_echo;
  std::optional<openai::ResponsesEventStream> events;
  std::string id;
  int64_t created = 0;
  std::string model;
  // Per prompt: the ids admission took (text is tokenized there, once), from the first output.
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> prompt_texts;         // per prompt, for echo
  std::vector<ChoiceState> choices;
  int remaining = 0;
  bool client_gone = false;
  bool responded = false;
  std::optional<uint64_t> watch_token;  // in ctx->disconnects until the answer is written
  std::unique_ptr<ChunkedResponse> out;  // streaming only

  openai::TokenText token_text() const {
    if (return_tokens_as_token_ids) return [](int32_t id) { return fmt::format("token_id:{}", id); };
    const auto* tok = &engine->tokenizer();
    return [tok](int32_t id) { return tok->token_to_piece(id, true); };
  }

  int64_t prompt_tokens() const {
    int64_t n = 0;
    for (const auto& p : prompt_ids) n += static_cast<int64_t>(p.size());
    return n;
  }

  openai::ChatAnswerParsers answer_parsers() const {
    return {reasoning_parser.get(), include_reasoning, tool_parser.get()};
  }

  // Responses' reasoning_tokens: the reasoning text's tokens, as the tokenizer reads it back.
  int64_t count_tokens(const std::string& text) const {
    if (text.empty()) return 0;
    return static_cast<int64_t>(engine->tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/true).size());
  }

  int64_t completion_tokens() const {
    int64_t n = 0;
    for (const auto& c : choices) n += c.completion_tokens;
    return n;
  }

  void abort_all() {
    for (auto& c : choices)
      if (!c.finished && !c.engine_id.empty()) engine->abort(c.engine_id);
  }

  // The client is gone (its connection closed, or a write failed): abort every choice.
  void client_left() {
    if (client_gone) return;
    client_gone = true;
    watch_token.reset();  // the watch runs once
    TROUPE_LOG_INFO("{}: client disconnected, aborting its requests", id);
    abort_all();
  }

  // Called once every choice was submitted: a hang-up from now on aborts them, and so
  // does a shutdown whose --shutdown-timeout passed (cut).
  void watch_connection() {
    std::weak_ptr<Generation> weak = shared_from_this();
    DisconnectWatch::Watched w;
    w.streaming = stream;
    w.left = [weak] {
      if (auto self = weak.lock()) self->client_left();
    };
    w.cut = [weak](const std::string& why) {
      if (auto self = weak.lock()) self->cut(why);
    };
    watch_token = ctx->disconnects.watch(req->connection_id(), std::move(w));
  }

  // The server is shutting down: every unfinished choice is aborted in the engine and ends
  // with finish_reason "abort" (vLLM's word for an aborted request); a stream then gets an
  // error event naming `why` and [DONE], a whole answer a 503 naming it.
  void cut(const std::string& why) {
    if (responded || client_gone) return;
    TROUPE_LOG_WARNING("{}: cut: {}", id, why);
    const Status error = unavailable(why);
    std::vector<size_t> cut_choices;
    for (size_t k = 0; k < choices.size(); ++k) {
      ChoiceState& c = choices[k];
      if (c.finished) continue;
      if (!c.engine_id.empty()) engine->abort(c.engine_id);
      c.finished = true;
      --remaining;
      c.choice.finish_reason = "abort";
      cut_choices.push_back(k);
    }
    if (stream && !responses) {
      for (size_t k : cut_choices) stream_delta(choices[k], "", {}, {}, /*finished=*/true);
      write(openai::sse_event(openai::render_error(openai::from_status(error))));
    } else if (stream) {
      write(events->error(why));
    }
    for (size_t k : cut_choices) choices[k].error = error;  // a whole answer: the 503; Responses: "failed"
    finish();
  }

  // Streams: one write per engine delta, so a vanished client also shows up as a
  // failed write within a step or two.
  void write(std::string data) {
    if (client_gone || !out) return;
    out->append_chunk(std::move(data));
    std::weak_ptr<Generation> weak = shared_from_this();
    out->flush([weak](const asio::error_code& ec) {
      if (!ec) return;
      if (auto self = weak.lock()) self->client_left();
    });
  }

  void on_output(size_t index, engine::RequestOutput o) {
    ChoiceState& c = choices[index];
    if (c.finished) return;
    // The prompt as admitted (truncate_prompt_tokens may have cut it): usage and prompt_token_ids.
    if (!o.prompt_token_ids.empty()) prompt_ids[c.prompt_index] = o.prompt_token_ids;
    c.completion_tokens = o.num_generated_tokens;
    if (c.completion_tokens < static_cast<int64_t>(o.new_token_ids.size()))
      c.completion_tokens = static_cast<int64_t>(o.new_token_ids.size());
    std::vector<openai::LogprobEntry> lps;
    for (const auto& lp : o.new_logprobs) {
      openai::LogprobEntry entry{lp.token_id, lp.logprob, {}};
      for (size_t t = 0; t < lp.top_ids.size() && t < lp.top_logprobs.size(); ++t)
        entry.top.emplace_back(lp.top_ids[t], lp.top_logprobs[t]);
      lps.push_back(std::move(entry));
    }
    if (o.finished) {
      c.finished = true;
      --remaining;
      c.choice.finish_reason = to_string(o.finish_reason);
      c.choice.stop_reason = o.stop_reason;
      if (o.finish_reason == FinishReason::error)
        c.error = o.error.ok() ? internal_error("generation failed") : o.error;
    }
    if (stream) {
      stream_delta(c, o.new_text, std::move(lps), o.new_token_ids, o.finished);
    } else {
      c.choice.text += o.new_text;
      if (return_token_ids) {
        if (!c.choice.token_ids) c.choice.token_ids.emplace();
        c.choice.token_ids->insert(c.choice.token_ids->end(), o.new_token_ids.begin(), o.new_token_ids.end());
      }
      for (auto& lp : lps) c.choice.logprobs.push_back(std::move(lp));
    }
    if (remaining == 0) finish();
  }

  void stream_delta(ChoiceState& c, const std::string& text, std::vector<openai::LogprobEntry> lps,
                    const std::vector<int32_t>& token_ids, bool finished) {
    if (client_gone) return;
    openai::Choice piece;
    piece.index = c.choice.index;
    piece.text = text;
    // Echo: the prompt leads the first chunk, and the tokens' text offsets count it.
    const bool echo_now = !c.first_chunk_sent && echo && !chat;
    if (echo_now) piece.text = prompt_texts[c.prompt_index] + piece.text;
    piece.has_logprobs = c.choice.has_logprobs;
    piece.logprobs = std::move(lps);
    if (return_token_ids) {
      piece.token_ids = token_ids;
      if (!c.first_chunk_sent) piece.prompt_token_ids = prompt_ids[c.prompt_index];
    }
    piece.text_offset = c.text_len + (echo_now ? static_cast<int64_t>(prompt_texts[c.prompt_index].size()) : 0);
    c.text_len += static_cast<int64_t>(piece.text.size());
    if (finished) {
      piece.finish_reason = c.choice.finish_reason;
      piece.stop_reason = c.choice.stop_reason;
    }
    // A step with no visible text (e.g. half a UTF-8 character): still write
    // an SSE comment, so a vanished client is noticed within a step or two.
    if (piece.text.empty() && piece.logprobs.empty() && (!piece.token_ids || piece.token_ids->empty()) && !finished &&
        c.first_chunk_sent) {
      write(": \n\n");
      return;
    }
    if (!c.error.ok()) {
      if (responses) {
        write(events->error(c.error.message()));
        c.first_chunk_sent = true;
        return;
      }
      write(openai::sse_event(openai::render_error(openai::from_status(c.error))));
      c.first_chunk_sent = true;
      return;
    }
    auto tt = token_text();
    if (c.answer_stream) {
      // Reasoning, then content until a call may begin, then the calls as they complete.
      auto d = c.answer_stream->feed(piece.text, finished);
      if (finished && c.answer_stream->called()) piece.finish_reason = "tool_calls";
      c.reasoning_text += d.reasoning;
      if (include_reasoning && !d.reasoning.empty()) piece.reasoning = std::move(d.reasoning);
      piece.text = std::move(d.content);
      piece.tool_call_deltas = std::move(d.calls);
      if (piece.text.empty() && piece.tool_call_deltas.empty() && !piece.reasoning && piece.logprobs.empty() &&
          !finished && c.first_chunk_sent && (!piece.token_ids || piece.token_ids->empty())) {
        write(": \n\n");
        return;
      }
    }
    if (c.tool_stream) {
      // vLLM: a first chunk with the role and empty content, then the text as tool-call
      // deltas; the end is "tool_calls" once a call was streamed.
      if (!c.first_chunk_sent && !responses) {
        openai::Choice role;
        role.index = piece.index;
        if (piece.prompt_token_ids) role.prompt_token_ids = std::move(piece.prompt_token_ids);
        piece.prompt_token_ids.reset();
        write(openai::sse_event(openai::render_chat_chunk(id, created, model, role, true, tt)));
        c.first_chunk_sent = true;
      }
      piece.tool_call_deltas = c.tool_stream->feed(piece.text);
      piece.text.clear();
      if (finished && c.tool_stream->streamed()) piece.finish_reason = "tool_calls";
      if (piece.tool_call_deltas.empty() && piece.logprobs.empty() && !finished) {
        write(": \n\n");
        return;
      }
    }
    if (responses) {
      std::string events_text = events->piece(piece.reasoning.value_or(""), piece.text, piece.tool_call_deltas);
      write(events_text.empty() ? std::string(": \n\n") : std::move(events_text));
      c.first_chunk_sent = true;
      return;
    }
    write(openai::sse_event(chat ? openai::render_chat_chunk(id, created, model, piece, !c.first_chunk_sent, tt)
                                 : openai::render_completion_chunk(id, created, model, piece, tt)));
    c.first_chunk_sent = true;
  }

  void finish() {
    if (responded) return;
    responded = true;
    if (watch_token) ctx->disconnects.forget(req->connection_id(), *watch_token);
    watch_token.reset();
    if (client_gone) return;  // nobody to answer
    openai::Usage usage{prompt_tokens(), completion_tokens()};
    if (stream && responses) {
      const auto& c = choices.front();
      // A generation that failed mid-stream (its error event was sent) ends as "failed".
      write(events->finish(c.error.ok() ? openai::response_status(c.choice.finish_reason) : "failed",
                           {usage.prompt_tokens, usage.completion_tokens, count_tokens(c.reasoning_text)}));
      out->done(on_answered(req));
      return;
    }
    if (stream) {
      if (include_usage) write(openai::sse_event(openai::render_usage_chunk(id, created, model, chat, usage)));
      write(openai::sse_done());
      out->done(on_answered(req));
      return;
    }
    for (const auto& c : choices) {
      if (!c.error.ok()) return respond_error(req, openai::from_status(c.error));
    }
    std::vector<openai::Choice> all;
    for (auto& c : choices) {
      if (chat && tools.forced()) {
        // vLLM: the calls replace the content; the finish_reason stays the engine's.
        auto calls = openai::forced_tool_calls(tools, c.choice.text);
        if (!calls.ok()) return respond_error(req, openai::from_status(calls.status(), "tool_choice"));
        c.choice.tool_calls = std::move(calls).value();
        c.choice.text.clear();
      }
      if (chat && (reasoning_parser || tool_parser)) openai::parse_chat_answer(answer_parsers(), &c.choice);
      if (echo && !chat) {
        c.choice.text_offset = static_cast<int64_t>(prompt_texts[c.prompt_index].size());
        c.choice.text = prompt_texts[c.prompt_index] + c.choice.text;
      }
      if (return_token_ids) {
        c.choice.prompt_token_ids = prompt_ids[c.prompt_index];
        if (!c.choice.token_ids) c.choice.token_ids.emplace();
      }
      all.push_back(c.choice);
    }
    if (responses) {
      const auto& c = all.front();
      const int64_t reasoning_tokens = c.reasoning ? count_tokens(*c.reasoning) : 0;
      return respond(req, 200, "application/json",
                     openai::response_object(id, created, model, responses_echo,
                                             openai::response_status(c.finish_reason),
                                             openai::response_output_items(c),
                                             openai::ResponseUsage{usage.prompt_tokens, usage.completion_tokens,
                                                                   reasoning_tokens})
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    auto tt = token_text();
    respond(req, 200, "application/json",
            chat ? openai::render_chat_completion(id, created, model, all, usage, tt)
                 : openai::render_completion(id, created, model, all, usage, tt));
  }
};

// Whether the engine adds the tokenizer's special tokens (BOS) to `text`: not when the
// text already starts with BOS (e.g. a chat template wrote it).
bool add_special_tokens(const engine::Engine& e, const std::string& text) {
  const auto& tok = e.tokenizer();
  const std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  return bos.empty() || text.rfind(bos, 0) != 0;
}

// vLLM's X-data-parallel-rank header: the replica that must serve the request. Absent:
// nullopt; not a whole number: a 400 naming the header (its range is admission's).
std::optional<openai::ApiError> data_parallel_rank(const restinio::request_handle_t& req, std::optional<int32_t>* out) {
  const auto value = req->header().opt_value_of("X-data-parallel-rank");
  if (!value) return std::nullopt;
  const std::string text(value->data(), value->size());
  int32_t rank = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (text.empty() || parsed.ec != std::errc() || parsed.ptr != text.data() + text.size())
    return openai::invalid_param("X-data-parallel-rank",
                                 "the X-data-parallel-rank header must be a replica index (0, 1, ...), got '" + text + "'");
  *out = rank;
  return std::nullopt;
}

}  // namespace

namespace {

// Completions, chat completions and responses (a chat request answered as a response).
void generate(ServerContext& ctx, const restinio::request_handle_t& req, bool chat, bool responses) {
  engine::Engine* e = ctx.engine.load();
  auto gen = std::make_shared<Generation>();
  gen->ctx = &ctx;
  gen->engine = e;
  gen->req = req;
  gen->chat = chat;

  // The model's generation_config.json defaults (vLLM's --generation-config auto).
  openai::Limits limits = ctx.options.limits;
  const GenerationDefaults& defaults = e->config().model.generation_defaults;
  limits.sampling_defaults = {defaults.temperature, defaults.top_p, defaults.min_p, defaults.repetition_penalty,
                              defaults.top_k};
  // Structured outputs compile at admission under the engine's limits (--structured-outputs-*).
  limits.grammar = structured::grammar_limits(e->config().structured_outputs);

  std::optional<int32_t> pinned_replica;
  if (auto err = data_parallel_rank(req, &pinned_replica)) return respond_error(req, *err);
  openai::CommonFields common;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  std::vector<bool> text_prompt;  // per prompt: text (else token ids)
  if (chat) {
    openai::ChatCompletionRequest r;
    if (responses) {
      openai::ResponsesRequest rr;
      if (auto err = openai::parse_responses_request(req->body(), limits, &rr))
        return respond_error(req, *err);
      r = std::move(rr.chat);
      gen->responses = true;
      gen->responses_echo = std::move(rr.echo);
      gen->id = rr.request_id.empty() ? openai::make_response_item_id("resp") : rr.request_id;
    } else if (auto err = openai::parse_chat_request(req->body(), limits, &r)) {
      return respond_error(req, *err);
    }
    common = std::move(r.common);
    if (!known_model(*e, common.model)) return respond_error(req, openai::model_not_found(common.model));
    if (r.tools.choice == openai::ToolChoice::automatic) {
      if (ctx.options.tool_call_parser.empty())
        return respond_error(req, openai::invalid_param("tool_choice", "\"auto\" tool choice requires "
                                                                       "--enable-auto-tool-choice and --tool-call-parser to be set"));
      auto parser = openai::make_tool_parser(ctx.options.tool_call_parser);
      if (!parser.ok()) return respond_error(req, openai::from_status(parser.status(), "tool_choice"));
      gen->tool_parser = std::move(parser).value();
      if (auto err = openai::constrain_strict_tools(r.tools, ctx.options.tool_call_parser, limits.grammar,
                                                    &r.common.sampling))
        return respond_error(req, *err);
    }
    // The engine constrains structured output (forced tools, response_format) from the first
    // token, so there is no reasoning to split from it: those answers are all content.
    if (!ctx.options.reasoning_parser.empty() && !r.tools.forced() && common.sampling.structured_output.empty()) {
      auto parser = openai::make_reasoning_parser(ctx.options.reasoning_parser, r.chat.kwargs);
      if (!parser.ok()) return respond_error(req, openai::from_status(parser.status()));
      gen->reasoning_parser = std::move(parser).value();
      gen->include_reasoning = r.include_reasoning;
    }
    gen->tools = std::move(r.tools);
    auto text = e->render_chat(r.chat);
    if (!text.ok())
      return respond_error(req, openai::from_status(text.status(), r.chat.chat_template.empty() ? "messages" : "chat_template"));
    ids.emplace_back();  // admission tokenizes the text; its ids come back with the first output
    texts.push_back(*text);
    text_prompt.push_back(true);
  } else {
    openai::CompletionRequest r;
    if (auto err = openai::parse_completion_request(req->body(), limits, &r))
      return respond_error(req, *err);
    common = std::move(r.common);
    if (!known_model(*e, common.model)) return respond_error(req, openai::model_not_found(common.model));
    gen->echo = r.echo;
    for (auto& p : r.prompts) {
      if (p.is_tokens) {
        texts.push_back(e->tokenizer().decode(p.token_ids, /*skip_special=*/false));
        ids.push_back(std::move(p.token_ids));
        text_prompt.push_back(false);
      } else {
        ids.emplace_back();  // as above: tokenized once, at admission
        texts.push_back(std::move(p.text));
        text_prompt.push_back(true);
      }
    }
  }

  gen->stream = common.stream;
  gen->include_usage = common.include_usage;
  gen->return_token_ids = common.return_token_ids;
  gen->return_tokens_as_token_ids = common.return_tokens_as_token_ids;
  // vLLM's request_id names the response ("chatcmpl-ID"); the engine's ids stay random
  // so that two requests sent with one request_id never meet in the engine.
  const std::string engine_id = openai::make_request_id(chat ? "chatcmpl" : "cmpl");
  if (!responses)
    gen->id = common.request_id.empty() ? engine_id : fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", common.request_id);
  gen->created = openai::unix_time_now();
  // A LoRA adapter's name picks the adapter (vLLM); the response names what was asked for.
  const bool lora = !e->serves_model(common.model);  // a LoRA adapter's name (known_model said it is one)
  gen->model = lora ? common.model : e->served_model_name();
  gen->prompt_texts = texts;
  gen->prompt_ids = ids;
  for (size_t p = 0; p < ids.size(); ++p) {
    for (int i = 0; i < common.n; ++i) {
      ChoiceState c;
      c.prompt_index = static_cast<int>(p);
      c.choice.index = static_cast<int>(gen->choices.size());
      c.choice.has_logprobs = common.sampling.logprobs >= 0;
      if (chat && common.stream && gen->tools.forced()) c.tool_stream.emplace(gen->tools, c.choice.index);
      if (chat && common.stream && (gen->tool_parser || gen->reasoning_parser))
        c.answer_stream.emplace(gen->answer_parsers());
      gen->choices.push_back(std::move(c));
    }
  }
  gen->remaining = static_cast<int>(gen->choices.size());

  // Submit every choice; the engine admits each (vocabulary, context length, queue, ...);
  // if one is refused the others are aborted.
  for (size_t k = 0; k < gen->choices.size(); ++k) {
    auto& c = gen->choices[k];
    engine::GenerateRequest g;
    g.request_id = fmt::format("{}-{}", engine_id, k);
    // Text goes to admission as text, which tokenizes it and truncates it (truncate_prompt_tokens)
    // keeping the special tokens; the ids it admitted come back on the first output.
    if (text_prompt[c.prompt_index]) {
      g.prompt = texts[c.prompt_index];
      g.add_special_tokens = add_special_tokens(*e, g.prompt);
    } else {
      g.prompt_token_ids = ids[c.prompt_index];
    }
    g.truncate_prompt_tokens = common.truncate_prompt_tokens;
    g.bad_words = common.bad_words;
    g.sampling = openai::choice_sampling(common.sampling, static_cast<int>(k % common.n));
    if (common.max_tokens)
      g.sampling.max_tokens = static_cast<int32_t>(std::min<int64_t>(*common.max_tokens, INT32_MAX));
    else
      g.max_tokens_fills_context = true;
    g.priority = common.priority;
    g.cache_salt = common.cache_salt;
    g.data_parallel_rank = pinned_replica;
    if (lora) g.lora_name = common.model;
    // The engine holds this callback until the choice finished; its strong
    // reference keeps the generation state alive exactly that long.
    std::string refused_field;
    auto submitted = submit_on_http_thread(
        ctx, *e, std::move(g), [gen, k](engine::RequestOutput o) { gen->on_output(k, std::move(o)); }, &refused_field);
    if (!submitted.ok()) {
      gen->abort_all();
      gen->responded = true;
      return respond_error(req, openai::admission_error(submitted.status(), refused_field, common));
    }
    c.engine_id = *submitted;
  }
  gen->watch_connection();

  if (gen->stream) {
    gen->out = std::make_unique<ChunkedResponse>(req->create_response<restinio::chunked_output_t>());
    gen->out->append_header(restinio::http_field::content_type, "text/event-stream; charset=utf-8")
        .append_header(restinio::http_field::cache_control, "no-cache")
        .append_header(restinio::http_field::server, "troupe");
    gen->out->flush();
    if (responses) {
      gen->events.emplace(gen->id, gen->created, gen->model, gen->responses_echo);
      gen->write(gen->events->start());
    }
  }
}

}  // namespace

void handle_completions(ServerContext& ctx, const restinio::request_handle_t& req, bool chat) {
  generate(ctx, req, chat, /*responses=*/false);
}

void handle_responses(ServerContext& ctx, const restinio::request_handle_t& req) {
  generate(ctx, req, /*chat=*/true, /*responses=*/true);
}

}  // namespace troupe::apps::serve
