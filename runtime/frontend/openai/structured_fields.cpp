// What a body asks of the output's form: the fields troupe refuses because it
// lacks them, and the structured outputs it enforces (every kind vLLM takes,
// through the one grammar engine, compiled here at admission).
#include <fmt/format.h>

#include <string>
#include <utility>

#include "runtime/frontend/openai/common_fields.hpp"
#include "runtime/frontend/openai/tools.hpp"
#include "runtime/rank/structured/grammar_cache.hpp"
#include "troupe/log.hpp"

namespace troupe::openai::body {

using json = nlohmann::json;

Error refuse_unimplemented(const json& j, bool chat) {
  auto refuse = [](const char* key, const std::string& why) {
    return invalid_param(key, fmt::format("{} is not implemented in troupe yet{}", key, why));
  };
  if (const json* rf = field(j, "response_format")) {
    const json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string()) return invalid_param("response_format", "must be an object with a string 'type'");
    if (*type != "text" && *type != "json_object" && *type != "json_schema" && *type != "structural_tag")
      return refuse("response_format", fmt::format(" for type '{}'; 'text', 'json_object', 'json_schema' and "
                                                   "'structural_tag' are",
                                                   type->get<std::string>()));
  }
  if (chat) {
    // OpenAI's deprecated functions/function_call (tools replaced them; vLLM has neither).
    if (field(j, "functions") || field(j, "function_call"))
      return refuse(field(j, "functions") ? "functions" : "function_call", "; send tools and tool_choice");
  } else {
    if (const json* suffix = field(j, "suffix"))
      if (!suffix->is_string() || !suffix->get<std::string>().empty()) return refuse("suffix", "");
  }
  if (field(j, "prompt_logprobs")) return refuse("prompt_logprobs", "");
  // vLLM's defaults (false, 1.0, null) are accepted; anything else asks for what troupe lacks.
  if (const json* beam = field(j, "use_beam_search")) {
    if (!beam->is_boolean()) return invalid_param("use_beam_search", "must be a boolean");
    if (beam->get<bool>()) return refuse("use_beam_search", " (beam search)");
  }
  if (const json* lp = field(j, "length_penalty")) {
    if (!lp->is_number()) return invalid_param("length_penalty", "must be a number");
    if (lp->get<double>() != 1.0) return refuse("length_penalty", " (it applies to beam search only)");
  }
  if (field(j, "logprob_token_ids")) return refuse("logprob_token_ids", "");  // vLLM refuses [] too
  if (const json* best_of = field(j, "best_of")) {
    const json* n = field(j, "n");
    if (!(best_of->is_number_integer() && best_of->get<int64_t>() == (n && n->is_number_integer() ? n->get<int64_t>() : 1)))
      return refuse("best_of", " (other than best_of = n)");
  }
  return std::nullopt;
}

namespace {

// The one constraint a body names: its kind (SamplingParams::structured_output), its
// value in the body and the field that named it (for errors).
struct Constraint {
  std::string kind;
  const json* value = nullptr;
  std::string param;
  std::string pointer;  // where the value is in the body (its keys' order is read there)
};

// Whitespace and schema options (vLLM's structured_outputs options and guided_whitespace_pattern).
struct Options {
  bool compact = false;
  std::string whitespace_pattern;
  bool close_objects = false;  // disable_additional_properties
};

Error take(Constraint* c, const char* kind, const json* value, const std::string& param, std::string pointer) {
  if (!c->kind.empty())
    return invalid_param(param, fmt::format("give one structured output: {} already names one ({})", c->param, c->kind));
  *c = Constraint{kind, value, param, std::move(pointer)};
  return std::nullopt;
}

Error read_response_format(const json& j, Constraint* c) {
  const json* rf = field(j, "response_format");
  if (!rf) return std::nullopt;
  const std::string type = field(*rf, "type")->get<std::string>();
  if (type == "json_object") return take(c, "json_object", nullptr, "response_format", "");
  if (type == "json_schema") {
    const json* js = field(*rf, "json_schema");
    if (!js || !js->is_object() || !field(*js, "schema"))
      return invalid_param("response_format", "json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}");
    // strict true or false alike: the schema is enforced (as vLLM does).
    if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean())
      return invalid_param("response_format", "json_schema.strict must be a boolean");
    return take(c, "json_schema", field(*js, "schema"), "response_format", "/response_format/json_schema/schema");
  }
  if (type == "structural_tag") {
    if (field(*rf, "format"))
      return invalid_param("response_format", "structural_tag with 'format' (xgrammar's newer structural tags) is not "
                                              "implemented in troupe yet; give 'structures' and 'triggers'");
    return take(c, "structural_tag", rf, "response_format", "/response_format");
  }
  return std::nullopt;  // text
}

Error read_string(const json& v, const std::string& param, std::string* out) {
  if (!v.is_string()) return invalid_param(param, "must be a string");
  *out = v.get<std::string>();
  return std::nullopt;
}

// vLLM's structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object" |
// "structural_tag": ..., and options}.
Error read_structured_outputs(const json& so, Constraint* c, Options* o) {
  if (!so.is_object()) return invalid_param("structured_outputs", "must be an object");
  for (const auto& [key, v] : so.items()) {
    if (v.is_null()) continue;
    const std::string param = "structured_outputs";
    if (key == "json") {
      if (auto e = take(c, "json_schema", &v, param, "/structured_outputs/json")) return e;
    } else if (key == "regex" || key == "grammar" || key == "choice" || key == "structural_tag") {
      if (auto e = take(c, key.c_str(), &v, param, "/structured_outputs/" + key)) return e;
    } else if (key == "json_object") {
      if (!v.is_boolean()) return invalid_param(param, "json_object must be a boolean");
      if (v.get<bool>())
        if (auto e = take(c, "json_object", nullptr, param, "")) return e;
    } else if (key == "disable_any_whitespace" || key == "disable_fallback" ||
               key == "disable_additional_properties") {
      if (!v.is_boolean()) return invalid_param(param, key + " must be a boolean");
      if (key == "disable_any_whitespace") o->compact = v.get<bool>();
      if (key == "disable_additional_properties") o->close_objects = v.get<bool>();
    } else if (key == "whitespace_pattern") {
      if (auto e = read_string(v, param + ".whitespace_pattern", &o->whitespace_pattern)) return e;
    } else if (key == "backend") {
      // vLLM's per-request backend: troupe has one engine.
    } else {
      return invalid_param(param, fmt::format("unknown field '{}'", key));
    }
  }
  return std::nullopt;
}

// Every field that names a constraint; more than one is an error naming the second.
Error read_constraint(const json& j, Constraint* c, Options* o) {
  if (auto e = read_response_format(j, c)) return e;
  if (const json* g = field(j, "guided_json"))
    if (auto e = take(c, "json_schema", g, "guided_json", "/guided_json")) return e;
  if (const json* g = field(j, "guided_regex"))
    if (auto e = take(c, "regex", g, "guided_regex", "/guided_regex")) return e;
  if (const json* g = field(j, "guided_grammar"))
    if (auto e = take(c, "grammar", g, "guided_grammar", "/guided_grammar")) return e;
  if (const json* g = field(j, "guided_choice"))
    if (auto e = take(c, "choice", g, "guided_choice", "/guided_choice")) return e;
  if (const json* g = field(j, "structural_tag"))
    if (auto e = take(c, "structural_tag", g, "structural_tag", "/structural_tag")) return e;
  if (const json* so = field(j, "structured_outputs"))
    if (auto e = read_structured_outputs(*so, c, o)) return e;
  if (const json* w = field(j, "guided_whitespace_pattern"))
    if (auto e = read_string(*w, "guided_whitespace_pattern", &o->whitespace_pattern)) return e;
  if (const json* b = field(j, "guided_decoding_backend")) {
    if (!b->is_string()) return invalid_param("guided_decoding_backend", "must be a string");
    TROUPE_LOG_DEBUG("guided_decoding_backend '{}' ignored: troupe has one structured-output engine",
                     b->get<std::string>());
  }
  return std::nullopt;
}

Error set_choice(const json& choice, const std::string& param, sampling::SamplingParams* s) {
  if (!choice.is_array() || choice.empty() || choice.size() > 1024)
    return invalid_param(param, "choice must be a list of 1 to 1024 strings");
  for (const auto& c : choice) {
    if (!c.is_string() || c.get<std::string>().empty())
      return invalid_param(param, "choice must be a list of non-empty strings");
    s->choices.push_back(c.get<std::string>());
  }
  return std::nullopt;
}

// The constraint's value with its keys in their written order: its JSON text parsed, or
// the same place in the body parsed keeping the order.
nlohmann::ordered_json in_order(const Constraint& c, const nlohmann::ordered_json* ordered) {
  if (c.value->is_string())
    return nlohmann::ordered_json::parse(c.value->get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (ordered) {
    const nlohmann::ordered_json::json_pointer at(c.pointer);
    if (ordered->contains(at)) return ordered->at(at);
  }
  return nlohmann::ordered_json::parse(c.value->dump());
}

// The constraint's text into `s` (a schema or structural tag as an object or its JSON text).
Error set_spec(const Constraint& c, const Options& o, sampling::SamplingParams* s,
               const nlohmann::ordered_json* ordered) {
  s->structured_output = c.kind;
  if (c.kind == "choice") return set_choice(*c.value, c.param, s);
  if (c.kind == "json_schema" || c.kind == "structural_tag") {
    nlohmann::ordered_json value = in_order(c, ordered);
    if (value.is_discarded()) return invalid_param(c.param, fmt::format("the {} is not valid JSON", c.kind));
    if (!value.is_object() && !(c.kind == "json_schema" && value.is_boolean()))
      return invalid_param(c.param, fmt::format("the {} must be a JSON object", c.kind));
    if (c.kind == "json_schema" && o.close_objects) close_schema_objects(&value);
    s->structured_spec = value.dump();
  } else if (c.kind == "regex" || c.kind == "grammar") {
    if (auto e = read_string(*c.value, c.param, &s->structured_spec)) return e;
    if (s->structured_spec.empty()) return invalid_param(c.param, fmt::format("the {} is empty", c.kind));
  }
  // Whitespace options shape JSON only; with a regex, grammar or choice they change nothing.
  if (c.kind == "json_object" || c.kind == "json_schema" || c.kind == "structural_tag") {
    s->structured_compact = o.compact;
    if (!o.compact) s->structured_whitespace_pattern = o.whitespace_pattern;
  }
  return std::nullopt;
}

}  // namespace

Error compile_structured_output(const sampling::SamplingParams& s, const structured::GrammarLimits& limits,
                                const std::string& param) {
  auto spec = structured::grammar_spec(s);
  if (!spec) return std::nullopt;
  auto grammar = structured::GrammarCache::shared().get(*spec, limits);
  if (!grammar.ok()) return invalid_param(param, grammar.status().message());
  return std::nullopt;
}

nlohmann::ordered_json ordered_body(std::string_view body, const json& j) {
  for (const char* key : {"response_format", "guided_json", "structured_outputs", "structural_tag", "tools"})
    if (field(j, key)) return nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
}

Error parse_structured_output(const json& j, const Limits& limits, sampling::SamplingParams* s,
                              const nlohmann::ordered_json* ordered) {
  Constraint c;
  Options o;
  if (auto e = read_constraint(j, &c, &o)) return e;
  if (c.kind.empty()) return std::nullopt;
  if (auto e = set_spec(c, o, s, ordered)) return e;
  return compile_structured_output(*s, limits.grammar, c.param);
}

}  // namespace troupe::openai::body
