// The README's promise as a test: every request field vLLM documents for completions,
// chat, embeddings, score and rerank (tests/data/vllm_request_fields.json, taken from
// vLLM's protocol.py) is sent to a real `troupe serve` on loopback, once at vLLM's
// default (a 200) and once at another value: a field troupe implements answers 200 and
// passes the file's checks, a field it does not is a 400 whose param is the field and
// whose message says it is not implemented. A field left out of the file fails here
// only if it is silently ignored by code that someone reads; adding vLLM's new fields
// to the file is how a new field gets its verdict.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;

json field_table() {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/vllm_request_fields.json");
  return json::parse(in);
}

struct Answer {
  int status = 0;
  std::string body;
  json parsed;  // discarded when not JSON (a stream)
};

// The body arrives through on_data, as the streaming tests read it (a stream's body
// is whole once the server ends it).
Answer post(const ServeProcess& s, const std::string& path, const json& body) {
  std::string text;
  auto r = apps::http::request("127.0.0.1", s.port(), "POST", path, body.dump(), {{"Content-Type", "application/json"}},
                               [&](std::string_view piece) {
                                 text.append(piece);
                                 return text.find("data: [DONE]") == std::string::npos;  // a stream's end
                               },
                               std::chrono::seconds(30));
  if (!r.ok()) return {0, r.status().to_string(), json()};
  if (text.empty()) text = r->body;
  return {r->status, text, json::parse(text, nullptr, false)};
}

// error.param / error.message of an answer ("" when absent or null).
std::string error_field(const json& answer, const char* key) {
  if (!answer.is_object() || !answer.contains("error") || !answer["error"].is_object()) return "";
  const json& e = answer["error"];
  return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : "";
}

// The file's checks of one answer; failures name the endpoint and the field.
void check_expectations(const json& expect, const Answer& a, const std::string& what) {
  for (const auto& x : expect) {
    if (x.contains("sse")) {
      EXPECT_EQ(a.body.rfind("data: ", 0), 0u) << what << ": not a stream: " << a.body.substr(0, 200);
      EXPECT_NE(a.body.find("data: [DONE]"), std::string::npos) << what;
      continue;
    }
    ASSERT_FALSE(a.parsed.is_discarded()) << what << ": not JSON: " << a.body.substr(0, 200);
    const json::json_pointer ptr(x["pointer"].get<std::string>());
    const bool present = a.parsed.contains(ptr);
    if (x.contains("exists")) {
      EXPECT_EQ(present, x["exists"].get<bool>()) << what << ": " << ptr << " in " << a.body;
      continue;
    }
    ASSERT_TRUE(present) << what << ": no " << ptr << " in " << a.body;
    const json& v = a.parsed[ptr];
    if (x.contains("equals")) {
      EXPECT_EQ(v, x["equals"]) << what << ": " << ptr;
    }
    if (x.contains("is_string")) {
      EXPECT_TRUE(v.is_string()) << what << ": " << ptr << " = " << v;
    }
    if (x.contains("starts_with")) {
      ASSERT_TRUE(v.is_string()) << what << ": " << ptr << " = " << v;
      EXPECT_EQ(v.get<std::string>().rfind(x["starts_with"].get<std::string>(), 0), 0u)
          << what << ": " << ptr << " = " << v;
    }
    if (x.contains("one_of")) {
      bool found = false;
      for (const auto& o : x["one_of"]) found = found || o == v;
      EXPECT_TRUE(found) << what << ": " << ptr << " = " << v << ", expected one of " << x["one_of"];
    }
  }
}

// Walks one endpoint's fields of the table against `server`.
void walk_endpoint(const ServeProcess& server, const std::string& endpoint) {
  const json table = field_table()["endpoints"][endpoint];
  const std::string path = table["path"];
  const json base = table["base"];
  {
    // Baseline, and a field vLLM does not document: ignored (logged at debug), as vLLM does.
    json body = base;
    body["not_a_vllm_field"] = {{"x", 1}};
    Answer a = post(server, path, body);
    EXPECT_EQ(a.status, 200) << endpoint << ": base request with an unknown field: " << a.body;
  }
  int refused = 0, implemented = 0;
  for (const auto& f : table["fields"]) {
    const std::string name = f["name"];
    const std::string what = endpoint + "." + name;
    SCOPED_TRACE(what);
    if (f.value("required", false)) {
      json body = base;
      body.erase(name);
      Answer a = post(server, path, body);
      EXPECT_EQ(a.status, 400) << what << " left out: " << a.body;
      EXPECT_EQ(error_field(a.parsed, "param"), name) << what << ": " << a.body;
      continue;
    }
    if (f.contains("default")) {
      json body = base;
      body[name] = f["default"];
      Answer a = post(server, path, body);
      EXPECT_EQ(a.status, 200) << what << " at vLLM's default " << f["default"] << ": " << a.body;
    }
    if (!f.contains("other")) continue;
    json body = base;
    const json with = f.value("with", json::object());  // named: items() of a temporary would dangle
    for (const auto& [k, v] : with.items()) body[k] = v;
    body[name] = f["other"];
    Answer a = post(server, path, body);
    const std::string verdict = f["troupe"];
    if (verdict == "refused") {
      ++refused;
      EXPECT_EQ(a.status, 400) << what << " = " << f["other"] << " must be refused: " << a.body.substr(0, 300);
      ASSERT_FALSE(a.parsed.is_discarded()) << a.body;
      EXPECT_EQ(error_field(a.parsed, "param"), name) << a.body;
      const std::string message = error_field(a.parsed, "message");
      EXPECT_NE(message.find(name), std::string::npos) << message;
      EXPECT_NE(message.find("not implemented"), std::string::npos) << message;
    } else {
      ASSERT_EQ(verdict, "implemented") << what << ": unknown verdict in the table";
      ++implemented;
      if (f.value("invalid_for_this_model", false)) {
        EXPECT_EQ(a.status, 400) << what << " = " << f["other"] << ": " << a.body.substr(0, 300);
        EXPECT_EQ(error_field(a.parsed, "param"), name) << a.body;
        EXPECT_EQ(a.body.find("not implemented"), std::string::npos) << a.body;
        continue;
      }
      EXPECT_EQ(a.status, 200) << what << " = " << f["other"] << ": " << a.body.substr(0, 300);
      if (a.status == 200) check_expectations(f.value("expect", json::array()), a, what);
    }
  }
  std::printf("%s: %d fields implemented, %d refused off their default\n", endpoint.c_str(), implemented, refused);
}

class GenerationFields : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // stories260K (no chat template of its own): chatml renders the messages.
    server_ = new ServeProcess({"--disable-log-stats", "--chat-template", "chatml", "--max-model-len", "256"});
    healthy_ = server_->wait_healthy();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(healthy_) << server_->log(); }
  static inline ServeProcess* server_ = nullptr;
  static inline bool healthy_ = false;
};

TEST_F(GenerationFields, CompletionsFieldsAreImplementedOrRefusedByName) { walk_endpoint(*server_, "completions"); }
TEST_F(GenerationFields, ChatFieldsAreImplementedOrRefusedByName) { walk_endpoint(*server_, "chat"); }

TEST_F(GenerationFields, ContinuousUsageStatsRefusedByName) {
  json body = field_table()["endpoints"]["completions"]["base"];
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  Answer a = post(*server_, "/v1/completions", body);
  EXPECT_EQ(a.status, 400) << a.body;
  EXPECT_EQ(error_field(a.parsed, "param"), "stream_options.continuous_usage_stats");
  body["stream_options"]["continuous_usage_stats"] = false;
  EXPECT_EQ(post(*server_, "/v1/completions", body).status, 200);
}

TEST_F(GenerationFields, RequestIdIsBoundedAndPrintable) {
  json body = field_table()["endpoints"]["completions"]["base"];
  body["request_id"] = std::string(10000, 'a');
  Answer a = post(*server_, "/v1/completions", body);
  EXPECT_EQ(a.status, 400) << a.body.substr(0, 300);
  EXPECT_EQ(error_field(a.parsed, "param"), "request_id");
  body["request_id"] = std::string("a\nb");
  EXPECT_EQ(post(*server_, "/v1/completions", body).status, 400);
  // Two requests may share one request_id: the engine's ids stay distinct.
  body["request_id"] = "same";
  body["n"] = 2;
  Answer x = post(*server_, "/v1/completions", body);
  Answer y = post(*server_, "/v1/completions", body);
  EXPECT_EQ(x.status, 200) << x.body;
  EXPECT_EQ(y.status, 200) << y.body;
  EXPECT_EQ(x.parsed.value("id", std::string()), "cmpl-same");
}

class PoolingFields : public ::testing::Test {
 protected:
  static const char* minilm_dir() {
    const char* d = std::getenv("TROUPE_MINILM_DIR");
    return d && *d ? d : nullptr;
  }
  static void SetUpTestSuite() {
    if (!minilm_dir()) return;
    server_ = new ServeProcess({"--disable-log-stats"}, minilm_dir());
    healthy_ = server_->wait_healthy();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/test.sh sets it)";
    ASSERT_TRUE(healthy_) << server_->log();
  }
  static inline ServeProcess* server_ = nullptr;
  static inline bool healthy_ = false;
};

TEST_F(PoolingFields, EmbeddingsFieldsAreImplementedOrRefusedByName) { walk_endpoint(*server_, "embeddings"); }
TEST_F(PoolingFields, ScoreFieldsAreImplementedOrRefusedByName) { walk_endpoint(*server_, "score"); }
TEST_F(PoolingFields, RerankFieldsAreImplementedOrRefusedByName) { walk_endpoint(*server_, "rerank"); }

}  // namespace
}  // namespace troupe::tests
