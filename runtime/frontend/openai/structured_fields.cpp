// What a body asks of the output's form: the fields troupe refuses because it
// lacks them, and the structured outputs it enforces.
#include <fmt/format.h>

#include <string>
#include <utility>

#include "runtime/frontend/openai/common_fields.hpp"
#include "runtime/rank/structured/json_schema.hpp"

namespace troupe::openai::body {

using json = nlohmann::json;

Error refuse_unimplemented(const json& j, bool chat) {
  auto refuse = [](const char* key, const std::string& why) {
    return invalid_param(key, fmt::format("{} is not implemented in troupe yet{}", key, why));
  };
  if (const json* rf = field(j, "response_format")) {
    const json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string()) return invalid_param("response_format", "must be an object with a string 'type'");
    if (*type != "text" && *type != "json_object" && *type != "json_schema")
      return refuse("response_format", fmt::format(" for type '{}'; 'text', 'json_object' and 'json_schema' are",
                                                   type->get<std::string>()));
  }
  for (const char* key : {"guided_regex", "guided_grammar"})
    if (field(j, key)) return refuse(key, " (structured outputs)");
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

// The constraint a body names so far: a schema (from the field `param`) or a list of choices.
struct Constraint {
  const json* schema = nullptr;
  const char* param = "response_format";
  const json* choice = nullptr;
  const char* choice_param = "structured_outputs";
};

// vLLM's newer form, structured_outputs: {"json": schema}, {"json_object": true} or
// {"choice": [...]}; one constraint, and no other field of the body names one.
Error read_structured_outputs(const json& so, Constraint* c, sampling::SamplingParams* s) {
  if (c->schema || !s->structured_output.empty())
    return invalid_param("structured_outputs", "give only one of response_format, guided_json and structured_outputs");
  if (!so.is_object()) return invalid_param("structured_outputs", "must be an object");
  for (const auto& [key, v] : so.items()) {
    if (v.is_null()) continue;
    if (key == "json") {
      c->schema = &v;
      c->param = "structured_outputs";
    } else if (key == "json_object") {
      if (!v.is_boolean()) return invalid_param("structured_outputs", "json_object must be a boolean");
      if (v.get<bool>()) s->structured_output = "json_object";
    } else if (key == "choice") {
      c->choice = &v;
    } else if (key == "regex" || key == "grammar" || key == "structural_tag") {
      return invalid_param("structured_outputs",
                           fmt::format("structured_outputs.{} is not implemented in troupe yet (json, "
                                       "json_object and choice are)", key));
    } else if (key != "disable_any_whitespace" && key != "disable_fallback" && key != "disable_additional_properties" &&
               key != "whitespace_pattern") {
      return invalid_param("structured_outputs", fmt::format("unknown field '{}'", key));
    }
  }
  if ((c->schema != nullptr) + !s->structured_output.empty() + (c->choice != nullptr) > 1)
    return invalid_param("structured_outputs", "give one of json, json_object and choice");
  return std::nullopt;
}

Error set_choice(const json& choice, const char* param, sampling::SamplingParams* s) {
  if (!choice.is_array() || choice.empty() || choice.size() > 1024)
    return invalid_param(param, "choice must be a list of 1 to 1024 strings");
  for (const auto& c : choice) {
    if (!c.is_string() || c.get<std::string>().empty())
      return invalid_param(param, "choice must be a list of non-empty strings");
    s->choices.push_back(c.get<std::string>());
  }
  s->structured_output = "choice";
  return std::nullopt;
}

// A schema (an object, or its JSON text), compiled once here so that one troupe cannot
// enforce is refused naming why.
Error set_schema(const json& schema, const char* param, sampling::SamplingParams* s) {
  std::string text;
  if (schema.is_string()) {
    text = schema.get<std::string>();
  } else {
    text = schema.dump();
  }
  auto compiled = structured::compile_json_schema(text);
  if (!compiled.ok()) return invalid_param(param, compiled.status().message());
  s->structured_output = "json_schema";
  s->json_schema = std::move(text);
  return std::nullopt;
}

}  // namespace

Error parse_structured_output(const json& j, sampling::SamplingParams* s) {
  Constraint c;
  if (const json* rf = field(j, "response_format")) {
    const std::string type = field(*rf, "type")->get<std::string>();
    if (type == "json_object") s->structured_output = "json_object";
    if (type == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object() || !field(*js, "schema"))
        return invalid_param("response_format", "json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}");
      c.schema = field(*js, "schema");
    }
  }
  if (const json* g = field(j, "guided_json")) {
    if (c.schema || !s->structured_output.empty())
      return invalid_param("guided_json", "give only one of response_format, guided_json and structured_outputs");
    c.schema = g;
    c.param = "guided_json";
  }
  if (const json* so = field(j, "structured_outputs"))
    if (auto e = read_structured_outputs(*so, &c, s)) return e;
  if (const json* g = field(j, "guided_choice")) {
    if (c.schema || c.choice || !s->structured_output.empty())
      return invalid_param("guided_choice", "give only one of response_format, guided_json, guided_choice and "
                                            "structured_outputs");
    c.choice = g;
    c.choice_param = "guided_choice";
  }
  if (c.choice) return set_choice(*c.choice, c.choice_param, s);
  if (!c.schema) return std::nullopt;
  return set_schema(*c.schema, c.param, s);
}

}  // namespace troupe::openai::body
