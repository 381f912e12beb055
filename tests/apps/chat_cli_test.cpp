// `troupe chat` against a real `troupe serve` with SmolLM2 (TROUPE_TEST_MODEL): stdin
// lines are the user's turns, each answer is the server's (greedy) chat answer to the
// conversation so far, so the history is kept; --quick asks once; a server that is
// not there is a one-line error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"
#include "tests/run_troupe.hpp"

#include <cstdlib>

namespace troupe {
namespace {

using json = nlohmann::json;

std::string chat_answer(const tests::ServeProcess& s, const json& messages) {
  json r = tests::post_json(s, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 16}, {"temperature", 0}});
  return r["choices"][0]["message"]["content"].get<std::string>();
}

class ChatCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shared_.start({"--max-model-len", "1024"}); }
  static void TearDownTestSuite() { shared_.stop(); }
  void SetUp() override { TROUPE_REQUIRE_SERVER(shared_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(shared_->port()) + "/v1"; }
  static tests::SharedModelServer shared_;
};
tests::SharedModelServer ChatCli::shared_;

TEST_F(ChatCli, TurnsFromStdinKeepTheConversation) {
  const std::string input = "/tmp/troupe_chat_cli_input_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(input) << "What is the capital of France?\n\nAnd of Italy?\n";
  auto r = testing::run_troupe("chat --url " + url() + " --system-prompt 'Answer briefly.' --max-tokens 16 "
                               "--temperature 0 < " + input);
  std::remove(input.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json messages = {{{"role", "system"}, {"content", "Answer briefly."}},
                   {{"role", "user"}, {"content", "What is the capital of France?"}}};
  const std::string first = chat_answer(*shared_, messages);
  messages.push_back({{"role", "assistant"}, {"content", first}});
  messages.push_back({{"role", "user"}, {"content", "And of Italy?"}});
  const std::string second = chat_answer(*shared_, messages);
  // A prompt and the first answer, a prompt for the skipped empty line, a prompt and the
  // second answer, the prompt that met the end of input.
  EXPECT_EQ(r.out, "> " + first + "\n> > " + second + "\n> \n") << r.out;
}

TEST_F(ChatCli, QuickAsksOnceAndErrorsAreOneLine) {
  auto r = testing::run_troupe("chat --url " + url() + " -q 'What is the capital of France?' --max-tokens 16 "
                               "--temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, chat_answer(*shared_, {{{"role", "user"}, {"content", "What is the capital of France?"}}}) + "\n");
  r = testing::run_troupe("chat --url " + url() + " -q hi --model-name nope");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("troupe chat: error: POST /chat/completions answered 404"), std::string::npos) << r.err;
  r = testing::run_troupe("chat --url http://127.0.0.1:1/v1 -q hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("troupe chat: error: cannot reach http://127.0.0.1:1/v1", 0), 0u) << r.err;
}

// `troupe chat MODEL` serves the model itself on loopback: the same answer as the
// shared server of that model gives; a model that cannot load is one line, naming it.
TEST_F(ChatCli, AModelGivenIsServedLocallyForTheChat) {
  const std::string model = std::getenv("TROUPE_TEST_MODEL");  // set: the shared server started
  auto r = testing::run_troupe("chat " + model + " -q 'What is the capital of France?' --max-tokens 16 "
                               "--temperature 0 --serve-arg=--max-model-len --serve-arg=1024");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, chat_answer(*shared_, {{{"role", "user"}, {"content", "What is the capital of France?"}}}) + "\n");
  EXPECT_NE(r.err.find("troupe chat: starting troupe serve " + model), std::string::npos) << r.err;

  r = testing::run_troupe("chat /nonexistent/model.gguf -q hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("troupe chat: error: troupe serve /nonexistent/model.gguf exited before it served"),
            std::string::npos)
      << r.err;
  r = testing::run_troupe("chat " + model + " --url " + url() + " -q hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace troupe
