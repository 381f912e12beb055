#include "runtime/frontend/openai/tools.hpp"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "runtime/rank/structured/grammar_cache.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

// OpenAI's rule for function names.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// Objects without additionalProperties get false, as xgrammar's strict mode (vLLM's default)
// reads them: a model is not let to invent keys (and to ramble in them until max_tokens).
void close_objects(ojson* schema, int depth = 0) {
  if (!schema->is_object() || depth > 64) return;
  if (schema->contains("properties") && !schema->contains("additionalProperties"))
    (*schema)["additionalProperties"] = false;
  for (const char* key : {"properties", "patternProperties", "$defs", "definitions"})
    if (auto p = schema->find(key); p != schema->end() && p->is_object())
      for (auto& [k, sub] : p->items()) close_objects(&sub, depth + 1);
  for (const char* key : {"items", "additionalProperties", "additionalItems", "propertyNames"})
    if (auto i = schema->find(key); i != schema->end()) {
      if (i->is_array()) {
        for (auto& sub : *i) close_objects(&sub, depth + 1);  // draft-04 tuple items
      } else {
        close_objects(&*i, depth + 1);
      }
    }
  for (const char* key : {"anyOf", "oneOf", "allOf", "prefixItems"})
    if (auto a = schema->find(key); a != schema->end() && a->is_array())
      for (auto& sub : *a) close_objects(&sub, depth + 1);
}

// A tool's parameters schema (objects closed), or vLLM's "no parameters" object.
ojson parameters_schema(const ojson& parameters) {
  ojson schema = parameters.is_null() ? ojson{{"type", "object"}, {"properties", ojson::object()}} : parameters;
  if (!schema.contains("type") && !schema.contains("$ref") && !schema.contains("anyOf"))
    schema["type"] = "object";  // parameters are an object (OpenAI)
  close_objects(&schema);
  return schema;
}

// Compiled in the process's grammar cache (the driver rank finds it there by text).
std::optional<ApiError> compile_schema(const std::string& text, const structured::GrammarLimits& limits,
                                       const std::string& param, const std::string& which) {
  structured::GrammarSpec spec;
  spec.kind = structured::GrammarKind::json_schema;
  spec.text = text;
  auto compiled = structured::GrammarCache::shared().get(spec, limits);
  if (!compiled.ok()) return invalid_param(param, fmt::format("{} cannot be enforced: {}", which, compiled.status().message()));
  return std::nullopt;
}

// vLLM's schema of tool_choice "required": a non-empty list of {"name", "parameters"},
// one branch per tool; with parallel_tool_calls false (OpenAI: at most one call) a list
// of one, so a model cannot go on writing calls until max_tokens cuts the list.
// A tool's local references ("#/...") re-rooted under `prefix` ("#/$defs/tool0"), where
// the "required" schema keeps the tool's whole parameters schema.
void reroot_refs(ojson* schema, const std::string& prefix, int depth = 0) {
  if (depth > 64) return;
  if (schema->is_object()) {
    for (auto& [k, v] : schema->items()) {
      if (k == "$ref" && v.is_string() && !v.get<std::string>().empty() && v.get<std::string>()[0] == '#') {
        v = prefix + v.get<std::string>().substr(1);
      } else {
        reroot_refs(&v, prefix, depth + 1);
      }
    }
  } else if (schema->is_array()) {
    for (auto& v : *schema) reroot_refs(&v, prefix, depth + 1);
  }
}

ojson required_schema(const ToolsRequest& t) {
  ojson branches = ojson::array();
  ojson defs = ojson::object();
  for (size_t i = 0; i < t.names.size(); ++i) {
    // Each tool's parameters under $defs, so their own references ($defs, definitions) resolve.
    const std::string def = "tool" + std::to_string(i);
    ojson params = parameters_schema(t.parameters[i]);
    reroot_refs(&params, "#/$defs/" + def);
    defs[def] = std::move(params);
    branches.push_back({{"properties",
                         {{"name", {{"type", "string"}, {"enum", ojson::array({t.names[i]})}}},
                          {"parameters", {{"$ref", "#/$defs/" + def}}}}},
                        {"required", ojson::array({"name", "parameters"})},
                        {"additionalProperties", false}});
  }
  ojson schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "object"}, {"anyOf", branches}}},
                  {"$defs", defs}};
  if (!t.parallel_calls) schema["maxItems"] = 1;
  return schema;
}

template <class Json>
void dump_python(const Json& v, std::string* out) {
  if (v.is_object()) {
    *out += '{';
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) *out += ", ";
      first = false;
      *out += Json(k).dump(-1, ' ', false, Json::error_handler_t::replace);
      *out += ": ";
      dump_python(x, out);
    }
    *out += '}';
  } else if (v.is_array()) {
    *out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) *out += ", ";
      dump_python(v[i], out);
    }
    *out += ']';
  } else {
    *out += v.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace

void close_schema_objects(ojson* schema) { close_objects(schema); }

std::string python_json_dumps(const json& value) {
  std::string out;
  dump_python(value, &out);
  return out;
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  dump_python(value, &out);
  return out;
}

std::optional<ApiError> parse_tools(const json& j, ToolsRequest* out, sampling::SamplingParams* s,
                                    const structured::GrammarLimits& limits, const ojson* ordered) {
  *out = ToolsRequest{};
  const json* tools = field(j, "tools");
  if (tools) {
    if (!tools->is_array()) return invalid_param("tools", "must be a list of tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& tool = (*tools)[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!tool.is_object()) return invalid_param("tools", at + " must be an object");
      const json* type = field(tool, "type");
      if (!type || *type != "function") return invalid_param("tools", at + ".type must be \"function\"");
      const json* fn = field(tool, "function");
      if (!fn || !fn->is_object()) return invalid_param("tools", at + ".function must be an object");
      const json* name = field(*fn, "name");
      if (!name || !name->is_string() || !valid_function_name(name->get<std::string>()))
        return invalid_param("tools", at + ".function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
      const json* params = field(*fn, "parameters");
      if (params && !params->is_object()) return invalid_param("tools", at + ".function.parameters must be an object");
      const json* desc = field(*fn, "description");
      if (desc && !desc->is_string()) return invalid_param("tools", at + ".function.description must be a string");
      const json* strict = field(*fn, "strict");
      if (strict && !strict->is_boolean()) return invalid_param("tools", at + ".function.strict must be a boolean");
      out->names.push_back(name->get<std::string>());
      // The schema with its keys in their written order (the engine writes properties so).
      const ojson::json_pointer in_body("/tools/" + std::to_string(i) + "/function/parameters");
      if (!params) out->parameters.push_back(ojson(nullptr));
      else if (ordered && ordered->contains(in_body)) out->parameters.push_back(ordered->at(in_body));
      else out->parameters.push_back(ojson::parse(params->dump()));
      out->strict.push_back(strict && strict->get<bool>());
      // A strict tool's schema must be enforceable whether or not this request forces a call.
      if (out->strict.back()) {
        if (auto e = compile_schema(parameters_schema(out->parameters.back()).dump(), limits, "tools",
                                    fmt::format("{}.function.parameters (strict)", at)))
          return e;
      }
    }
  }
  if (const json* parallel = field(j, "parallel_tool_calls"); parallel && !parallel->is_null()) {
    if (!parallel->is_boolean()) return invalid_param("parallel_tool_calls", "must be a boolean");
    out->parallel_calls = parallel->get<bool>();
  }
  const json* choice = field(j, "tool_choice");
  if (!choice) {
    out->choice = tools ? ToolChoice::automatic : ToolChoice::none;  // vLLM's defaults
  } else if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") out->choice = ToolChoice::none;
    else if (c == "auto") out->choice = ToolChoice::automatic;
    else if (c == "required") out->choice = ToolChoice::required;
    else return invalid_param("tool_choice", "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  } else if (choice->is_object()) {
    const json* fn = field(*choice, "function");
    const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (!name || !name->is_string())
      return invalid_param("tool_choice", "a named tool choice is {\"type\": \"function\", \"function\": {\"name\": ...}}");
    out->choice = ToolChoice::named;
    out->named = name->get<std::string>();
  } else {
    return invalid_param("tool_choice", "must be a string or an object");
  }
  if (!tools && out->choice != ToolChoice::none) return invalid_param("tool_choice", "When using `tool_choice`, `tools` must be set.");
  if (!out->forced()) return std::nullopt;
  if (out->names.empty()) return invalid_param("tools", "must not be empty with tool_choice \"required\" or a named function");

  if (!s->structured_output.empty())
    return invalid_param("tool_choice", "\"required\" and a named function are enforced by structured outputs: "
                                        "they cannot be combined with response_format, guided_* or structured_outputs");
  ojson schema;
  std::string which;
  if (out->choice == ToolChoice::named) {
    size_t i = 0;
    while (i < out->names.size() && out->names[i] != out->named) ++i;
    if (i == out->names.size())
      return invalid_param("tool_choice", fmt::format("Tool '{}' has not been passed in `tools`.", out->named));
    schema = parameters_schema(out->parameters[i]);
    which = fmt::format("the parameters of function '{}'", out->named);
  } else {
    schema = required_schema(*out);
    which = "the tools' parameters";
  }
  std::string text = schema.dump();
  if (auto e = compile_schema(text, limits, "tools", which)) return e;
  s->structured_output = "json_schema";
  s->structured_spec = std::move(text);
  return std::nullopt;
}

std::optional<ApiError> constrain_strict_tools(const ToolsRequest& tools, const std::string& parser,
                                               const structured::GrammarLimits& limits, sampling::SamplingParams* s) {
  if (tools.choice != ToolChoice::automatic || !s->structured_output.empty()) return std::nullopt;
  if (std::find(tools.strict.begin(), tools.strict.end(), true) == tools.strict.end()) return std::nullopt;
  if (parser != "hermes") return std::nullopt;  // other parsers' formats: not enforced (docs/serving.md)
  // Hermes: <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>; free text elsewhere.
  ojson structures = ojson::array();
  for (size_t i = 0; i < tools.names.size(); ++i) {
    if (!tools.strict[i]) continue;
    structures.push_back({{"begin", "<tool_call>\n{\"name\": \"" + tools.names[i] + "\", \"arguments\": "},
                          {"schema", parameters_schema(tools.parameters[i])},
                          {"end", "}\n</tool_call>"}});
  }
  sampling::SamplingParams constrained = *s;
  constrained.structured_output = "structural_tag";
  constrained.structured_spec =
      ojson{{"type", "structural_tag"}, {"structures", structures}, {"triggers", ojson::array({"<tool_call>"})}}.dump();
  structured::GrammarSpec spec;
  spec.kind = structured::GrammarKind::structural_tag;
  spec.text = constrained.structured_spec;
  auto compiled = structured::GrammarCache::shared().get(spec, limits);
  if (!compiled.ok())
    return invalid_param("tools", "the strict tools cannot be enforced: " + compiled.status().message());
  *s = std::move(constrained);
  return std::nullopt;
}

std::string make_tool_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-tool-{:016x}{:016x}", rng(), rng());
}

Result<std::vector<ToolCall>> forced_tool_calls(const ToolsRequest& tools, const std::string& text) {
  std::vector<ToolCall> calls;
  if (tools.choice == ToolChoice::named) {
    calls.push_back({make_tool_call_id(), tools.named, text});
    return calls;
  }
  const json list = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_array())
    return invalid_argument("the output is not a whole list of tool calls (was it cut short by max_tokens?)");
  for (const auto& call : list) {
    const json* name = call.is_object() ? field(call, "name") : nullptr;
    if (!name || !name->is_string() || !call.contains("parameters"))
      return invalid_argument("a tool call of the output has no name or parameters");
    calls.push_back({make_tool_call_id(), name->get<std::string>(), python_json_dumps(call["parameters"])});
  }
  return calls;
}

ForcedToolCallStream::ForcedToolCallStream(const ToolsRequest& tools, int choice_index)
    : choice_(tools.choice), named_(tools.named), choice_index_(choice_index) {}

std::vector<ToolCallDelta> ForcedToolCallStream::feed(std::string_view text) {
  if (choice_ != ToolChoice::named) return feed_required(text);
  // vLLM sends a delta for every output of a named choice, the first with the call's name.
  ToolCallDelta d;
  d.index = choice_index_;
  d.arguments = std::string(text);
  if (!streamed_) {
    d.id = make_tool_call_id();
    d.name = named_;
  }
  streamed_ = true;
  return {std::move(d)};
}

// The list is [ {"name": "...", "parameters": {...}} , ... ] (the constraint puts the name
// first). Depth 1 is the list, 2 a call object, 3 and more its parameters.
std::vector<ToolCallDelta> ForcedToolCallStream::feed_required(std::string_view text) {
  std::vector<ToolCallDelta> out;
  std::string args;  // this feed's text of the current call's arguments
  auto flush = [&] {
    if (!args.empty() && !out.empty() && out.back().index == calls_ - 1) out.back().arguments += args;
    else if (!args.empty()) out.push_back({calls_ - 1, std::nullopt, std::nullopt, args});
    args.clear();
  };
  for (char c : text) {
    if (in_arguments_) {
      args += c;
      if (in_string_) {
        if (escaped_) escaped_ = false;
        else if (c == '\\') escaped_ = true;
        else if (c == '"') in_string_ = false;
        continue;
      }
      if (c == '"') in_string_ = true;
      else if (c == '{' || c == '[') ++depth_;
      else if (c == '}' || c == ']') {
        if (--depth_ == 2) {
          in_arguments_ = false;
          flush();
        }
      }
      continue;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        // A string at the call object's level: a key, or the name's value.
        const json decoded = json::parse("\"" + string_ + "\"", nullptr, false);
        const std::string s = decoded.is_string() ? decoded.get<std::string>() : string_;
        if (expect_value_ && last_key_ == "name") name_ = s;
        else if (!expect_value_) last_key_ = s;
        expect_value_ = false;
        continue;
      }
      string_ += c;
      continue;
    }
    if (c == '"') {
      in_string_ = true;
      string_.clear();
    } else if (c == ':' && depth_ == 2) {
      expect_value_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
      if (depth_ == 3 && expect_value_ && last_key_ == "parameters") {
        expect_value_ = false;
        in_arguments_ = true;
        out.push_back({calls_, make_tool_call_id(), name_, ""});
        ++calls_;
        streamed_ = true;
        args += c;
      } else if (depth_ == 2) {
        name_.clear();
        last_key_.clear();
        expect_value_ = false;
      }
    } else if (c == '}' || c == ']') {
      --depth_;
    }
  }
  if (in_arguments_) flush();
  return out;
}

}  // namespace troupe::openai
