// `troupe plugins --json` as a user runs it: a real process per scenario, so
// per-process behaviour (TROUPE_PLUGINS, once-per-process registration) is
// exercised exactly as in production.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  json report;
};

std::string dir(const std::string& plugin) { return std::string(TROUPE_TEST_PLUGIN_ROOT) + "/" + plugin; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// env: "NAME=value" to set. TROUPE_* variables not named are unset. `command`: the
// troupe subcommand and its arguments.
CliRun run_cli(const std::vector<std::string>& env, const std::string& command) {
  static int counter = 0;
  fs::path base = fs::temp_directory_path() / ("troupe_cli_test_" + std::to_string(::getpid()) + "_" +
                                               std::to_string(counter++));
  std::string cmd =
      "env -u TROUPE_PLUGINS -u TROUPE_PLUGIN_PATH -u TROUPE_BUILTIN_PLUGIN_DIR -u TROUPE_LOG_LEVEL -u TROUPE_DEVICE";
  for (const auto& e : env) cmd += " '" + e + "'";
  cmd += std::string(" timeout -s KILL 120 '") + TROUPE_EXE + "' " + command + " >'" + base.string() + ".out' 2>'" +
         base.string() + ".err'";
  CliRun r;
  int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(base.string() + ".out");
  r.err = slurp(base.string() + ".err");
  fs::remove(base.string() + ".out");
  fs::remove(base.string() + ".err");
  return r;
}

CliRun run_plugins(const std::vector<std::string>& env, const std::string& args = "--json") {
  CliRun r = run_cli(env, "plugins " + args);
  if (args == "--json") r.report = json::parse(r.out, nullptr, false);
  return r;
}

const json* plugin(const CliRun& r, const std::string& group, const std::string& name) {
  for (const auto& p : r.report["groups"][group])
    if (p["name"] == name) return &p;
  return nullptr;
}

std::string status_of(const CliRun& r, const std::string& group, const std::string& name) {
  const json* p = plugin(r, group, name);
  return p ? (*p)["status"].get<std::string>() : "(absent)";
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) ++n;
  return n;
}

constexpr const char* kGeneral = "troupe.general_plugins";
constexpr const char* kPlatform = "troupe.platform_plugins";

}  // namespace

TEST(PluginsCli, BuiltinsOnly) {
  CliRun r = run_plugins({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.report.is_discarded()) << r.out;
  for (const char* g : {"troupe.general_plugins", "troupe.platform_plugins", "troupe.io_processor_plugins",
                        "troupe.stat_logger_plugins"}) {
    ASSERT_TRUE(r.report["groups"].contains(g)) << g;
    EXPECT_TRUE(r.report["groups"][g].is_array());
  }
  const json* cpu = plugin(r, kPlatform, "cpu");
  ASSERT_NE(cpu, nullptr) << r.out;
  EXPECT_EQ((*cpu)["status"], "loaded");
  EXPECT_EQ(cpu->size(), 4u) << cpu->dump();
  for (const char* key : {"name", "library", "status", "reason"}) EXPECT_TRUE(cpu->contains(key)) << key;
  // cpu, unless this build has a CUDA platform whose probe found a GPU.
  std::string expected = "cpu";
  for (const auto& c : r.report["platform"]["candidates"]) {
    for (const char* key : {"name", "available", "out_of_tree", "device_type", "reason"})
      EXPECT_TRUE(c.contains(key)) << key;
    if (c["name"] == "cuda" && c["available"] == true) expected = "cuda";
  }
  EXPECT_EQ(r.report["platform"]["activated"], expected);
  EXPECT_NE(r.err.find("Platform plugin " + expected + " is activated"), std::string::npos) << r.err;
}

TEST(PluginsCli, AllPluginsLoadWhenTroupePluginsIsUnset) {
  CliRun r = run_plugins({"TROUPE_PLUGIN_PATH=" + dir("good_general") + ":" + TROUPE_EXAMPLES_PLUGIN_DIR});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(status_of(r, kGeneral, "good_general"), "loaded");
  EXPECT_EQ(status_of(r, kGeneral, "gpt2_model"), "loaded");
  EXPECT_EQ(status_of(r, "troupe.stat_logger_plugins", "stat_logger_jsonl"), "loaded");
  EXPECT_EQ(r.report["platform"]["activated"], "dummy");
  EXPECT_EQ(r.report["platform"]["device_name"], "DummyDevice");
  // vLLM's log lines.
  EXPECT_NE(r.err.find("Available plugins for group troupe.general_plugins:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("- good_general -> " + dir("good_general") + "/libtroupe_plugin_good_general.so"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plugin good_general loaded."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Platform plugin dummy is activated"), std::string::npos) << r.err;
  // General plugins register once per process.
  EXPECT_EQ(count(r.err, "good_general register call"), 1u) << r.err;
  EXPECT_EQ(count(r.err, "good_general register call 1"), 1u) << r.err;
}

TEST(PluginsCli, EmptyTroupePluginsLoadsNoPluginButBuiltins) {
  CliRun r = run_plugins({"TROUPE_PLUGIN_PATH=" + dir("good_general") + ":" + TROUPE_EXAMPLES_PLUGIN_DIR, "TROUPE_PLUGINS="});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(status_of(r, kGeneral, "good_general"), "filtered");
  EXPECT_EQ(status_of(r, kGeneral, "gpt2_model"), "filtered");
  EXPECT_EQ(status_of(r, kPlatform, "dummy"), "filtered");
  EXPECT_EQ(status_of(r, kPlatform, "cpu"), "loaded");  // built-in, as vLLM's built-in platforms
  EXPECT_NE(r.report["platform"]["activated"], "dummy");
  EXPECT_EQ(count(r.err, "good_general register call"), 0u) << r.err;
}

TEST(PluginsCli, ListedPluginsOnlyAndWarningForUnknownNames) {
  CliRun r = run_plugins({"TROUPE_PLUGIN_PATH=" + dir("good_general") + ":" + TROUPE_EXAMPLES_PLUGIN_DIR,
                       "TROUPE_PLUGINS= good_general , no_such_plugin "});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(status_of(r, kGeneral, "good_general"), "loaded");
  EXPECT_EQ(status_of(r, kGeneral, "gpt2_model"), "filtered");
  EXPECT_EQ(status_of(r, kPlatform, "dummy"), "filtered");
  EXPECT_NE(r.err.find("WARNING"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plugin no_such_plugin is named in TROUPE_PLUGINS but was not found"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.report["allowed"], json({"good_general", "no_such_plugin"}));
}

TEST(PluginsCli, TwoOutOfTreePlatformsReportAnErrorAndExitZero) {
  CliRun r = run_plugins({"TROUPE_PLUGIN_PATH=" + dir("oot_a") + ":" + dir("oot_b")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.report["platform"]["activated"].is_null());
  std::string reason = r.report["platform"]["reason"];
  EXPECT_NE(reason.find("oot_a"), std::string::npos) << reason;
  EXPECT_NE(reason.find("oot_b"), std::string::npos) << reason;
  // Choosing one with TROUPE_PLUGINS resolves it.
  CliRun one = run_plugins({"TROUPE_PLUGIN_PATH=" + dir("oot_a") + ":" + dir("oot_b"), "TROUPE_PLUGINS=oot_b"});
  EXPECT_EQ(one.report["platform"]["activated"], "oot_b");
}

TEST(PluginsCli, BrokenPluginsAreListedWithReasons) {
  CliRun r = run_plugins({"TROUPE_PLUGIN_PATH=" + dir("abi_mismatch") + ":" + dir("missing_symbol") + ":" +
                       dir("throws_register") + ":" + dir("malformed") + ":" + dir("declining") + ":" +
                       dir("good_general")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(status_of(r, kGeneral, "abi_mismatch"), "refused");
  EXPECT_EQ(status_of(r, kGeneral, "missing_symbol"), "failed");
  EXPECT_EQ(status_of(r, kGeneral, "throws_register"), "failed");
  EXPECT_EQ(status_of(r, "unknown", "malformed"), "failed");
  EXPECT_EQ(status_of(r, kGeneral, "good_general"), "loaded");
  EXPECT_NE((*plugin(r, kGeneral, "throws_register"))["reason"].get<std::string>().find("boom"), std::string::npos);
  EXPECT_NE(r.err.find("plugin abi_mismatch refused"), std::string::npos) << r.err;
  bool declined = false;
  for (const auto& c : r.report["platform"]["candidates"])
    if (c["name"] == "declining") declined = c["available"] == false && c["reason"] == "probe returned no platform: no declining device in this test machine";
  EXPECT_TRUE(declined) << r.out;
}

TEST(PluginsCli, TextModeIsReadable) {
  CliRun r = run_plugins({"TROUPE_PLUGIN_PATH=" + dir("declining")}, "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("troupe.platform_plugins:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("declining: declined (probe returned no platform: no declining device in this test machine)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Activated platform:"), std::string::npos) << r.out;
}

// Issue 9's bug: an accelerator platform that cannot run the model (fake_accel has no
// quantizations, as cuda before its worker) must not stop troupe from running on the CPU.
TEST(DeviceChoice, AnAcceleratorThatCannotRunTheModelLeavesItToTheCpu) {
  const std::string gen = std::string("generate ") + TROUPE_STORIES_PATH + " -p 'Once upon a time' -n 4 --json";
  CliRun r = run_cli({"TROUPE_PLUGIN_PATH=" + dir("fake_accel")}, gen);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("Platform fake_accel is available but cannot run stories260K.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Platform plugin cpu is activated"), std::string::npos) << r.err;
  json out = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_EQ(out["token_ids"].size(), 4u) << r.out;

  // The same on an explicit --device cpu, and through TROUPE_DEVICE.
  CliRun cpu = run_cli({"TROUPE_PLUGIN_PATH=" + dir("fake_accel")}, gen + " --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(json::parse(cpu.out, nullptr, false)["token_ids"], out["token_ids"]);
  CliRun env = run_cli({"TROUPE_PLUGIN_PATH=" + dir("fake_accel"), "TROUPE_DEVICE=cpu"}, gen);
  ASSERT_EQ(env.exit_code, 0) << env.err;

  // Asking for the accelerator names the weight type, the platform, and who could.
  CliRun accel = run_cli({"TROUPE_PLUGIN_PATH=" + dir("fake_accel")}, gen + " --device fake_accel");
  EXPECT_EQ(accel.exit_code, 1);
  EXPECT_NE(accel.err.find("platform fake_accel cannot run stories260K.gguf: quantization f32 is not supported by "
                           "platform fake_accel"),
            std::string::npos)
      << accel.err;
  EXPECT_NE(accel.err.find("platforms that could: cpu"), std::string::npos) << accel.err;
  CliRun accel_env = run_cli({"TROUPE_PLUGIN_PATH=" + dir("fake_accel"), "TROUPE_DEVICE=fake_accel"}, gen);
  EXPECT_EQ(accel_env.exit_code, 1);
  EXPECT_NE(accel_env.err.find("platforms that could: cpu"), std::string::npos) << accel_env.err;
}

TEST(DeviceChoice, AnUnknownDeviceIsAClearError) {
  CliRun r = run_cli({}, std::string("generate ") + TROUPE_STORIES_PATH + " -p hi -n 2 --device tpu9");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("device 'tpu9' was requested (--device or TROUPE_DEVICE), but no platform plugin provides it"),
            std::string::npos)
      << r.err;
}

#if TROUPE_HAVE_CUDA
// Where the CUDA probe finds no device (this machine: no driver), `troupe plugins` says
// why, and asking for cuda fails with that reason instead of starting on another device.
TEST(DeviceChoice, TheCudaProbesReasonIsShownWhenThereIsNoGpu) {
  CliRun r = run_plugins({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json* cuda = nullptr;
  for (const auto& c : r.report["platform"]["candidates"])
    if (c["name"] == "cuda") cuda = &c;
  ASSERT_NE(cuda, nullptr) << r.out;
  if ((*cuda)["available"].get<bool>()) GTEST_SKIP() << "a CUDA device is present: the probe found it";
  const std::string reason = (*cuda)["reason"];
  EXPECT_EQ(reason.rfind("probe returned no platform: cudaGetDeviceCount", 0), 0u) << reason;
  EXPECT_EQ(r.report["platform"]["activated"], "cpu");

  CliRun gen = run_cli({}, std::string("generate ") + TROUPE_STORIES_PATH + " -p hi -n 2 --device cuda");
  EXPECT_EQ(gen.exit_code, 1);
  EXPECT_NE(gen.err.find("but platform cuda is not available: probe returned no platform: cudaGetDeviceCount"),
            std::string::npos)
      << gen.err;
}
#endif

#if TROUPE_HAVE_EXAMPLES
// examples/counting_custom_op overrides rms_norm, rotary_embedding and silu_and_mul with
// counting wrappers around the platform's ops: what runs changes (the counts, and the
// unfused gate/up projections), what comes out does not.
TEST(CustomOps, AnOutOfTreeOverrideRunsInTheForwardPassAndKeepsTheOutput) {
  const std::string gen = std::string("generate ") + TROUPE_STORIES_PATH + " -p 'Once upon a time' -n 24";
  CliRun plain = run_cli({"TROUPE_PLUGINS=cpu"}, gen);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const fs::path counts = fs::temp_directory_path() / ("troupe_custom_op_counts_" + std::to_string(::getpid()));
  CliRun counted = run_cli({"TROUPE_PLUGIN_PATH=" + std::string(TROUPE_EXAMPLES_PLUGIN_DIR),
                            "TROUPE_PLUGINS=cpu,counting_custom_op", "COUNTING_CUSTOM_OP_FILE=" + counts.string()},
                           gen);
  ASSERT_EQ(counted.exit_code, 0) << counted.err;
  EXPECT_FALSE(plain.out.empty());
  EXPECT_EQ(counted.out, plain.out);
  EXPECT_NE(counted.err.find("custom ops: rms_norm oot, rotary_embedding oot, silu_and_mul oot"), std::string::npos)
      << counted.err;
  std::istringstream in(slurp(counts));
  fs::remove(counts);
  std::map<std::string, long> calls;
  std::string name;
  long n = 0;
  while (in >> name >> n) calls[name] = n;
  // stories260K: 5 layers; 25 steps (the warm-up, the prompt, then one per further token): 2
  // norms a layer plus the final one, 2 rotations and 1 silu_and_mul a layer, once per step.
  EXPECT_EQ(calls["rms_norm"], 11 * 25);
  EXPECT_EQ(calls["rotary_embedding"], 10 * 25);
  EXPECT_EQ(calls["silu_and_mul"], 5 * 25);
}
#endif
