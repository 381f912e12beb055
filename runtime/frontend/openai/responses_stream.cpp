#include "runtime/frontend/openai/responses_stream.hpp"

#include <utility>

namespace troupe::openai {

using json = nlohmann::json;

ResponsesEventStream::ResponsesEventStream(std::string id, int64_t created_at, std::string model, json echo)
    : id_(std::move(id)), created_at_(created_at), model_(std::move(model)), echo_(std::move(echo)) {}

// "event: TYPE\ndata: JSON\n\n" (bytes that are not UTF-8 replaced, as chat's chunks).
std::string ResponsesEventStream::event(json body) {
  body["sequence_number"] = sequence_++;
  const std::string type = body["type"].get<std::string>();
  return "event: " + type + "\ndata: " + body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json ResponsesEventStream::snapshot(const std::string& status, const std::optional<ResponseUsage>& usage) const {
  return response_object(id_, created_at_, model_, echo_, status, output_, usage);
}

std::string ResponsesEventStream::start() {
  std::string out = event({{"type", "response.created"}, {"response", snapshot("in_progress", std::nullopt)}});
  out += event({{"type", "response.in_progress"}, {"response", snapshot("in_progress", std::nullopt)}});
  return out;
}

std::string ResponsesEventStream::open_item(Open kind) {
  std::string out = close_item();
  open_ = kind;
  text_.clear();
  const int index = static_cast<int>(output_.size());
  if (kind == Open::reasoning) {
    item_ = {{"id", make_response_item_id("rs")}, {"type", "reasoning"}, {"summary", json::array()},
             {"content", json::array()}, {"encrypted_content", nullptr}, {"status", "in_progress"}};
  } else {
    item_ = {{"id", make_response_item_id("msg")}, {"type", "message"}, {"role", "assistant"},
             {"status", "in_progress"}, {"content", json::array()}};
  }
  out += event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item_}});
  if (kind == Open::message)
    out += event({{"type", "response.content_part.added"},
                  {"item_id", item_["id"]},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
  if (kind == Open::reasoning)
    out += event({{"type", "response.content_part.added"},
                  {"item_id", item_["id"]},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  return out;
}

std::string ResponsesEventStream::close_item() {
  if (open_ == Open::none) return "";
  std::string out;
  const int index = static_cast<int>(output_.size());
  const json item_id = item_["id"];
  if (open_ == Open::message) {
    json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}, {"logprobs", json::array()}};
    out += event({{"type", "response.output_text.done"}, {"item_id", item_id}, {"output_index", index},
                  {"content_index", 0}, {"text", text_}, {"logprobs", json::array()}});
    out += event({{"type", "response.content_part.done"}, {"item_id", item_id}, {"output_index", index},
                  {"content_index", 0}, {"part", part}});
    item_["content"] = json::array({part});
  } else {
    json part = {{"type", "reasoning_text"}, {"text", text_}};
    out += event({{"type", "response.reasoning_text.done"}, {"item_id", item_id}, {"output_index", index},
                  {"content_index", 0}, {"text", text_}});
    out += event({{"type", "response.content_part.done"}, {"item_id", item_id}, {"output_index", index},
                  {"content_index", 0}, {"part", part}});
    item_["content"] = json::array({part});
  }
  item_["status"] = "completed";
  out += event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item_}});
  output_.push_back(std::move(item_));
  item_ = json();
  open_ = Open::none;
  return out;
}

std::string ResponsesEventStream::piece(std::string_view reasoning, std::string_view text,
                                        const std::vector<ToolCallDelta>& calls) {
  std::string out;
  if ((!reasoning.empty() || !text.empty()) && !calls_.empty()) out += close_calls();
  if (!reasoning.empty()) {
    if (open_ != Open::reasoning) out += open_item(Open::reasoning);
    text_.append(reasoning);
    out += event({{"type", "response.reasoning_text.delta"}, {"item_id", item_["id"]},
                  {"output_index", static_cast<int>(output_.size())}, {"content_index", 0},
                  {"delta", std::string(reasoning)}});
  }
  if (!text.empty()) {
    if (open_ != Open::message) out += open_item(Open::message);
    text_.append(text);
    out += event({{"type", "response.output_text.delta"}, {"item_id", item_["id"]},
                  {"output_index", static_cast<int>(output_.size())}, {"content_index", 0},
                  {"delta", std::string(text)}, {"logprobs", json::array()}});
  }
  if (!calls.empty()) out += close_item();
  for (const auto& call : calls) {
    size_t k = 0;
    while (k < calls_.size() && calls_[k].tool_index != call.index) ++k;
    if (call.id || k == calls_.size()) {
      // A call begins (a delta without an id for an unknown call begins one too).
      const int index = static_cast<int>(output_.size() + calls_.size());
      OpenCall open{call.index,
                    {{"id", make_response_item_id("fc")}, {"type", "function_call"}, {"call_id", call.id.value_or("")},
                     {"name", call.name.value_or("")}, {"arguments", ""}, {"status", "in_progress"}},
                    ""};
      out += event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", open.item}});
      calls_.push_back(std::move(open));
      k = calls_.size() - 1;
    }
    if (call.arguments.empty()) continue;
    calls_[k].arguments += call.arguments;
    out += event({{"type", "response.function_call_arguments.delta"}, {"item_id", calls_[k].item["id"]},
                  {"output_index", static_cast<int>(output_.size() + k)}, {"delta", call.arguments}});
  }
  return out;
}

std::string ResponsesEventStream::close_calls() {
  std::string out;
  for (auto& call : calls_) {
    const int index = static_cast<int>(output_.size());
    out += event({{"type", "response.function_call_arguments.done"}, {"item_id", call.item["id"]},
                  {"output_index", index}, {"name", call.item["name"]}, {"arguments", call.arguments}});
    call.item["arguments"] = call.arguments;
    call.item["status"] = "completed";
    out += event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", call.item}});
    output_.push_back(std::move(call.item));
  }
  calls_.clear();
  return out;
}

std::string ResponsesEventStream::finish(const std::string& status, const ResponseUsage& usage) {
  std::string out = close_item();
  out += close_calls();
  const char* type = status == "incomplete" ? "response.incomplete"
                     : status == "failed"   ? "response.failed"
                                            : "response.completed";
  out += event({{"type", type}, {"response", snapshot(status, usage)}});
  return out;
}

std::string ResponsesEventStream::error(const std::string& message) {
  return event({{"type", "error"}, {"code", nullptr}, {"message", message}, {"param", nullptr}});
}

}  // namespace troupe::openai
