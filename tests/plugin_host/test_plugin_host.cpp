// PluginHost with explicit options over real test plugin libraries.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/stats/engine_stat_logger.hpp"
#include "plugin_host/loader.hpp"
#include "plugin_host/manifest.hpp"
#include "plugin_host/plugin_host.hpp"
#include "troupe/custom_op.hpp"
#include "troupe/model_registry.hpp"
#include "troupe/plugin.hpp"

namespace ph = troupe::plugin_host;
namespace fs = std::filesystem;
using ph::PluginStatus;

namespace {

std::string dir(const std::string& plugin) { return std::string(TROUPE_TEST_PLUGIN_ROOT) + "/" + plugin; }

ph::HostOptions opts(std::vector<std::string> plugins, std::optional<std::vector<std::string>> allowed = std::nullopt) {
  ph::HostOptions o;
  for (auto& p : plugins) o.plugin_dirs.push_back(dir(p));
  o.allowed = std::move(allowed);
  return o;
}

const ph::PluginRecord& find(const ph::PluginHost& host, const std::string& name) {
  for (const auto& r : host.records())
    if (r.name == name) return r;
  ADD_FAILURE() << "no record for " << name;
  static ph::PluginRecord none;
  return none;
}

const ph::PlatformCandidate* candidate(const ph::PluginHost& host, const std::string& name) {
  for (const auto& c : host.platform_candidates())
    if (c.name == name) return &c;
  return nullptr;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int good_general_calls() {
  const char* v = std::getenv("TROUPE_TEST_GOOD_GENERAL_CALLS");
  return v ? std::atoi(v) : 0;
}

}  // namespace

TEST(PluginHost, LoadsAGoodGeneralPluginAndRunsItsRegistration) {
  ph::PluginHost host(opts({"good_general"}));
  host.load_all();
  ASSERT_EQ(host.records().size(), 1u);
  const auto& r = host.records()[0];
  EXPECT_EQ(r.name, "good_general");
  EXPECT_EQ(r.group, troupe::kGroupGeneral);
  EXPECT_EQ(r.status, PluginStatus::loaded) << r.reason;
  EXPECT_TRUE(r.reason.empty());
  EXPECT_EQ(r.library, dir("good_general") + "/libtroupe_plugin_good_general.so");
  EXPECT_EQ(r.manifest, dir("good_general") + "/good_general.troupe-plugin.json");
  EXPECT_FALSE(r.builtin);
  EXPECT_TRUE(troupe::model_registry::is_registered("TestGoodArch"));
}

TEST(PluginHost, GeneralPluginsRegisterOncePerProcess) {
  ph::PluginHost host(opts({"good_general"}));
  host.load_all();
  host.load_all();  // idempotent: nothing is discovered or registered again
  EXPECT_EQ(host.records().size(), 1u);
  EXPECT_EQ(good_general_calls(), 1);
  // A second host in the same process loads the library but does not re-register.
  ph::PluginHost other(opts({"good_general"}));
  other.load_all();
  EXPECT_EQ(find(other, "good_general").status, PluginStatus::loaded);
  EXPECT_EQ(good_general_calls(), 1);
}

// ABI 2 added slots to the vtables of AttentionBackend and Ops: an out-of-tree platform
// built against the previous version must be refused, never activated over the CPU.
TEST(PluginHost, PlatformOfThePreviousAbiIsRefusedAndNeverActivated) {
  ph::PluginHost host(opts({"previous_abi_platform", "fake_cpu"}));
  host.load_all();
  const auto& old = find(host, "previous_abi_platform");
  EXPECT_EQ(old.status, PluginStatus::refused);
  EXPECT_TRUE(contains(old.reason, "ABI version " + std::to_string(TROUPE_ABI_VERSION - 1) + ",")) << old.reason;
  EXPECT_TRUE(contains(old.reason, "this troupe uses ABI version " + std::to_string(TROUPE_ABI_VERSION))) << old.reason;
  EXPECT_EQ(candidate(host, "previous_abi_platform"), nullptr);
  auto p = host.activate_platform();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->device_type(), "fake_cpu");
}

TEST(PluginHost, BrokenPluginsAreReportedAndOthersStillLoad) {
  ph::PluginHost host(opts({"missing_symbol", "abi_mismatch", "throws_register", "fails_register", "wrong_group",
                            "missing_library", "malformed", "missing_field", "unknown_group", "good_general"}));
  host.load_all();
  EXPECT_EQ(host.records().size(), 10u);
  EXPECT_EQ(find(host, "good_general").status, PluginStatus::loaded);

  const auto& sym = find(host, "missing_symbol");
  EXPECT_EQ(sym.status, PluginStatus::failed);
  EXPECT_TRUE(contains(sym.reason, "has no symbol troupe_plugin_entry")) << sym.reason;
  EXPECT_TRUE(contains(sym.reason, "libtroupe_plugin_missing_symbol.so")) << sym.reason;

  const auto& abi = find(host, "abi_mismatch");
  EXPECT_EQ(abi.status, PluginStatus::refused);
  EXPECT_TRUE(contains(abi.reason, "libtroupe_plugin_abi_mismatch.so")) << abi.reason;
  EXPECT_TRUE(contains(abi.reason, "ABI version " + std::to_string(TROUPE_ABI_VERSION + 41))) << abi.reason;
  EXPECT_TRUE(contains(abi.reason, "this troupe uses ABI version " + std::to_string(TROUPE_ABI_VERSION))) << abi.reason;

  const auto& thr = find(host, "throws_register");
  ASSERT_EQ(thr.name, "throws_register");
  EXPECT_EQ(thr.status, PluginStatus::failed);
  EXPECT_TRUE(contains(thr.reason, "boom from throws_register")) << thr.reason;

  const auto& fails = find(host, "fails_register");
  EXPECT_EQ(fails.status, PluginStatus::failed);
  EXPECT_TRUE(contains(fails.reason, "fails_register cannot register today")) << fails.reason;

  const auto& group = find(host, "wrong_group");
  EXPECT_EQ(group.status, PluginStatus::refused);
  EXPECT_TRUE(contains(group.reason, "declares group troupe.platform_plugins")) << group.reason;

  const auto& lib = find(host, "missing_library");
  EXPECT_EQ(lib.status, PluginStatus::failed);
  EXPECT_TRUE(contains(lib.reason, "libtroupe_plugin_nope.so not found")) << lib.reason;

  const auto& bad = find(host, "malformed");
  EXPECT_EQ(bad.status, PluginStatus::failed);
  EXPECT_TRUE(contains(bad.reason, "not valid JSON")) << bad.reason;
  EXPECT_EQ(bad.group, "");

  const auto& field = find(host, "missing_field");
  EXPECT_EQ(field.status, PluginStatus::failed);
  EXPECT_EQ(field.group, troupe::kGroupPlatform);
  EXPECT_TRUE(contains(field.reason, "missing field \"library\"")) << field.reason;

  const auto& unknown = find(host, "unknown_group");
  EXPECT_EQ(unknown.status, PluginStatus::failed);
  EXPECT_TRUE(contains(unknown.reason, "unknown group")) << unknown.reason;
}

TEST(PluginHost, AllowedListFiltersByName) {
  ph::PluginHost none(opts({"good_general", "oot_a"}, std::vector<std::string>{}));
  none.load_all();
  EXPECT_EQ(find(none, "good_general").status, PluginStatus::filtered);
  EXPECT_EQ(find(none, "oot_a").status, PluginStatus::filtered);
  EXPECT_TRUE(contains(find(none, "oot_a").reason, "TROUPE_PLUGINS")) << find(none, "oot_a").reason;

  ph::PluginHost some(opts({"good_general", "oot_a", "oot_b"}, std::vector<std::string>{"oot_b", "not_there"}));
  some.load_all();
  EXPECT_EQ(find(some, "good_general").status, PluginStatus::filtered);
  EXPECT_EQ(find(some, "oot_a").status, PluginStatus::filtered);
  EXPECT_EQ(find(some, "oot_b").status, PluginStatus::loaded);
  auto p = some.activate_platform();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(some.activated_platform_name(), "oot_b");
}

TEST(PluginHost, BuiltinDirectoriesAreNotFiltered) {
  auto o = opts({"fake_cpu", "oot_a"}, std::vector<std::string>{});
  o.builtin_dirs = {dir("fake_cpu")};
  ph::PluginHost host(o);
  host.load_all();
  EXPECT_EQ(find(host, "fake_cpu").status, PluginStatus::loaded);
  EXPECT_TRUE(find(host, "fake_cpu").builtin);
  EXPECT_EQ(find(host, "oot_a").status, PluginStatus::filtered);
  ASSERT_TRUE(host.activate_platform().ok());
  EXPECT_EQ(host.activated_platform_name(), "fake_cpu");
}

TEST(PluginHost, ADirectoryListedTwiceIsSearchedOnce) {
  ph::PluginHost host(opts({"oot_a", "oot_a"}));
  host.load_all();
  ASSERT_EQ(host.records().size(), 1u);
  EXPECT_EQ(host.records()[0].status, PluginStatus::loaded);
}

TEST(PluginHost, DuplicateNamesKeepTheFirst) {
  // A second directory whose manifest reuses the name oot_a.
  fs::path other = fs::temp_directory_path() / ("troupe_dup_" + std::to_string(::getpid()));
  fs::create_directories(other);
  std::ofstream(other / "oot_a.troupe-plugin.json")
      << R"({"name": "oot_a", "group": "troupe.platform_plugins", "library": ")" << dir("oot_b")
      << R"(/libtroupe_plugin_oot_b.so"})";
  auto o = opts({"oot_a"});
  o.plugin_dirs.push_back(other.string());
  ph::PluginHost host(o);
  host.load_all();
  fs::remove_all(other);
  ASSERT_EQ(host.records().size(), 2u);
  EXPECT_EQ(host.records()[0].status, PluginStatus::loaded);
  EXPECT_EQ(host.records()[1].status, PluginStatus::failed);
  EXPECT_TRUE(contains(host.records()[1].reason, "was found first")) << host.records()[1].reason;
}

TEST(PluginHost, MissingDirectoryIsNotAnError) {
  ph::PluginHost host(opts({"no_such_directory"}));
  host.load_all();
  EXPECT_TRUE(host.records().empty());
  auto p = host.activate_platform();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), troupe::StatusCode::not_found);
  EXPECT_TRUE(contains(p.status().message(), "no platform plugin was loaded")) << p.status().message();
}

TEST(PlatformResolution, OneOutOfTreePlatformWinsOverBuiltins) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel", "oot_a"}));
  auto p = host.activate_platform();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->device_type(), "oot_a");
  EXPECT_EQ(host.activated_platform_name(), "oot_a");
  EXPECT_EQ(troupe::custom_op_registry::active_device_type(), "oot_a");
  ASSERT_NE(candidate(host, "oot_a"), nullptr);
  EXPECT_TRUE(candidate(host, "oot_a")->out_of_tree);
  ASSERT_NE(candidate(host, "fake_cpu"), nullptr);
  EXPECT_TRUE(candidate(host, "fake_cpu")->available);
  EXPECT_FALSE(candidate(host, "fake_cpu")->out_of_tree);
  EXPECT_TRUE(contains(candidate(host, "fake_cpu")->reason, "oot_a was activated"));
  // Cached: asking again gives the same platform object.
  auto again = host.activate_platform();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *p);
}

TEST(PlatformResolution, TwoOutOfTreePlatformsAreAnErrorNamingBoth) {
  ph::PluginHost host(opts({"fake_cpu", "oot_a", "oot_b"}));
  auto p = host.activate_platform();
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.status().message(), "oot_a")) << p.status().message();
  EXPECT_TRUE(contains(p.status().message(), "oot_b")) << p.status().message();
  EXPECT_FALSE(host.activated_platform_name().has_value());
  EXPECT_EQ(host.platform_candidates().size(), 3u);
}

TEST(PlatformResolution, AcceleratorBeatsCpuAmongBuiltins) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel"}));
  auto p = host.activate_platform();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "fake_accel");
  EXPECT_EQ(troupe::custom_op_registry::active_device_type(), "fake_accel");
}

TEST(PlatformResolution, DecliningAndThrowingProbesAreCandidatesThatLost) {
  ph::PluginHost host(opts({"declining", "throwing_probe", "fake_cpu"}));
  auto p = host.activate_platform();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "fake_cpu");
  const auto* d = candidate(host, "declining");
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->available);
  EXPECT_EQ(d->reason, "probe returned no platform: no declining device in this test machine");
  const auto* t = candidate(host, "throwing_probe");
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->available);
  EXPECT_TRUE(contains(t->reason, "probe exploded in throwing_probe")) << t->reason;
}

TEST(PlatformResolution, NoAvailablePlatformIsAClearError) {
  ph::PluginHost host(opts({"declining"}));
  auto p = host.activate_platform();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), troupe::StatusCode::not_found);
  EXPECT_TRUE(contains(p.status().message(), "no platform is available")) << p.status().message();
  EXPECT_TRUE(contains(p.status().message(), "declining: probe returned no platform: no declining device in this test machine")) << p.status().message();
}

// Each field the host checks before it trusts a descriptor refuses the library on its own.
TEST(PluginHost, DescriptorsOfAnotherLayoutAreRefused) {
  ph::PluginHost host(opts({"size_mismatch", "cxx_abi_mismatch", "layout_mismatch", "good_general"}));
  host.load_all();
  EXPECT_EQ(find(host, "good_general").status, PluginStatus::loaded);

  const auto& size = find(host, "size_mismatch");
  EXPECT_EQ(size.status, PluginStatus::refused);
  EXPECT_TRUE(contains(size.reason, "has a plugin descriptor of " + std::to_string(sizeof(troupe::PluginDescriptor) - 8) +
                                        " bytes, expected " + std::to_string(sizeof(troupe::PluginDescriptor))))
      << size.reason;

  const auto& cxx = find(host, "cxx_abi_mismatch");
  EXPECT_EQ(cxx.status, PluginStatus::refused);
  EXPECT_TRUE(contains(cxx.reason, "built with C++ ABI libc++/abi=1, but this troupe uses " TROUPE_CXX_ABI_TAG))
      << cxx.reason;

  const auto& layout = find(host, "layout_mismatch");
  EXPECT_EQ(layout.status, PluginStatus::refused);
  EXPECT_TRUE(contains(layout.reason, "type layouts differ")) << layout.reason;
  EXPECT_TRUE(contains(layout.reason, "expected " + std::to_string(troupe::sdk_layout_fingerprint()))) << layout.reason;
}

TEST(PluginHost, LayoutFingerprintFollowsTheSdkTypes) {
  // Stamped into every descriptor at the plugin's build: the built-in builders agree.
  constexpr auto d = troupe::general_plugin("x", nullptr);
  static_assert(d.layout_fingerprint == troupe::sdk_layout_fingerprint());
  EXPECT_NE(troupe::sdk_layout_fingerprint(), 0u);
}

namespace {

// TROUPE_SDK_FINGERPRINT_HEX of a generated sdk_fingerprint.hpp.
std::string fingerprint_in(const std::string& header) {
  std::ifstream in(header);
  std::string line;
  const std::string key = "#define TROUPE_SDK_FINGERPRINT_HEX \"";
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return line.substr(key.size(), 16);
  ADD_FAILURE() << "no TROUPE_SDK_FINGERPRINT_HEX in " << header;
  return "";
}

}  // namespace

// The headers' text changed (one more virtual in Platform, which moves every later slot)
// while TROUPE_ABI_VERSION and all sizes stayed: only the SDK fingerprint tells.
TEST(PluginHost, PlatformBuiltAgainstOtherSdkHeadersIsRefusedAndNeverActivated) {
  const std::string theirs = fingerprint_in(TROUPE_TEST_ALTERED_SDK_FINGERPRINT);
  ASSERT_EQ(theirs.size(), 16u);
  ASSERT_NE(theirs, TROUPE_SDK_FINGERPRINT_HEX);  // else the altered copy altered nothing

  ph::PluginHost host(opts({"altered_sdk_platform", "fake_cpu"}));
  host.load_all();
  const auto& altered = find(host, "altered_sdk_platform");
  EXPECT_EQ(altered.status, PluginStatus::refused);
  EXPECT_TRUE(contains(altered.reason, "library " + dir("altered_sdk_platform") +
                                           "/libtroupe_plugin_altered_sdk_platform.so "))
      << altered.reason;
  EXPECT_TRUE(contains(altered.reason, "built against SDK headers with fingerprint " + theirs +
                                           ", but this troupe's SDK headers have fingerprint " TROUPE_SDK_FINGERPRINT_HEX))
      << altered.reason;
  EXPECT_TRUE(contains(altered.reason, "both ABI version " + std::to_string(TROUPE_ABI_VERSION))) << altered.reason;
  EXPECT_FALSE(contains(altered.reason, "type layouts differ")) << altered.reason;
  EXPECT_EQ(candidate(host, "altered_sdk_platform"), nullptr);
  auto p = host.activate_platform();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->device_type(), "fake_cpu");
}

TEST(PluginHost, PluginsBuiltAgainstTheseHeadersCarryTheHostsSdkFingerprint) {
  static_assert(troupe::general_plugin("x", nullptr).sdk_fingerprint == TROUPE_SDK_FINGERPRINT);
  static_assert(troupe::platform_plugin("x", nullptr).sdk_fingerprint == TROUPE_SDK_FINGERPRINT);
  static_assert(troupe::io_processor_plugin("x", nullptr).sdk_fingerprint == TROUPE_SDK_FINGERPRINT);
  static_assert(troupe::stat_logger_plugin("x", nullptr).sdk_fingerprint == TROUPE_SDK_FINGERPRINT);

  // What the libraries stamped at their own build, read back through the loader.
  std::vector<std::string> manifests = {dir("good_general") + "/good_general.troupe-plugin.json",
                                        dir("fake_cpu") + "/fake_cpu.troupe-plugin.json",
                                        dir("echo_io") + "/echo_io.troupe-plugin.json"};
#if TROUPE_HAVE_EXAMPLES
  manifests.push_back(std::string(TROUPE_EXAMPLES_PLUGIN_DIR) + "/gpt2_model.troupe-plugin.json");
#endif
  for (const auto& path : manifests) {
    ph::Manifest m;
    ASSERT_TRUE(ph::parse_manifest(path, &m).ok()) << path;
    ph::LoadOutcome out = ph::load_library(m);
    ASSERT_EQ(out.status, PluginStatus::loaded) << path << ": " << out.reason;
    ASSERT_NE(out.descriptor, nullptr);
    EXPECT_EQ(out.descriptor->sdk_fingerprint, TROUPE_SDK_FINGERPRINT) << path;
  }
}

namespace {

// A model only platforms of the given device types can run, as the engine asks it.
ph::PlatformRequest model_for(std::vector<std::string> runs_on, std::string device = "") {
  ph::PlatformRequest r;
  r.device = std::move(device);
  r.what = "m.gguf";
  r.can_serve = [runs_on](const troupe::Platform& p) -> troupe::Status {
    for (const auto& t : runs_on)
      if (p.device_type() == t) return {};
    return troupe::not_supported("quantization q4_1 is not supported by platform " + p.device_type());
  };
  return r;
}

}  // namespace

// The CUDA bug of issue 9: an accelerator that cannot run the model must not win over the CPU.
TEST(PlatformChoice, AcceleratorThatCannotRunTheModelIsPassedOver) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel"}));
  auto p = host.activate_platform(model_for({"fake_cpu"}));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "fake_cpu");
}

// An out-of-tree platform wins only for models it can run (the sim accelerator has no
// quantized kernels): automatically it is passed over, explicitly its refusal is the answer.
TEST(PlatformChoice, OutOfTreePlatformThatCannotRunTheModelIsPassedOver) {
  ph::PluginHost host(opts({"fake_cpu", "oot_a"}));
  auto p = host.activate_platform(model_for({"fake_cpu"}));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "fake_cpu");
  ph::PluginHost forced(opts({"fake_cpu", "oot_a"}));
  auto f = forced.activate_platform(model_for({"fake_cpu"}, "oot_a"));
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(contains(f.status().message(), "platform oot_a cannot run m.gguf")) << f.status().message();
  EXPECT_TRUE(contains(f.status().message(), "platforms that could: fake_cpu")) << f.status().message();
}

// A platform by name without activating it (platform-check's reference).
TEST(PlatformChoice, APlatformByNameActivatesNothing) {
  ph::PluginHost host(opts({"fake_cpu", "oot_a", "declining"}));
  auto cpu = host.platform("fake_cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ((*cpu)->device_type(), "fake_cpu");
  EXPECT_FALSE(host.activated_platform_name().has_value());
  auto active = host.activate_platform();
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(host.activated_platform_name(), "oot_a");
  auto again = host.platform("fake_cpu");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *cpu);
  EXPECT_EQ(host.platform("declining").status().code(), troupe::StatusCode::unavailable);
  EXPECT_EQ(host.platform("tpu9").status().code(), troupe::StatusCode::not_found);
}

TEST(PlatformChoice, AcceleratorThatCanRunTheModelWins) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel"}));
  auto p = host.activate_platform(model_for({"fake_cpu", "fake_accel"}));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "fake_accel");
}

TEST(PlatformChoice, AnExplicitDeviceIsActivated) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel"}));
  auto p = host.activate_platform(model_for({"fake_cpu", "fake_accel"}, "fake_cpu"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "fake_cpu");
  // Later requests must agree with it: one platform per process.
  auto other = host.activate_platform(model_for({"fake_cpu", "fake_accel"}, "fake_accel"));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), troupe::StatusCode::invalid_argument);
  EXPECT_TRUE(contains(other.status().message(), "platform fake_cpu is already active")) << other.status().message();
  EXPECT_TRUE(host.activate_platform(model_for({"fake_cpu"}, "auto")).ok());
}

TEST(PlatformChoice, TheDeviceFromTheEnvironmentAppliesWhenTheRequestNamesNone) {
  auto o = opts({"fake_cpu", "fake_accel"});
  o.device = "fake_cpu";  // TROUPE_DEVICE=fake_cpu
  ph::PluginHost host(o);
  auto p = host.activate_platform(model_for({"fake_cpu", "fake_accel"}, "auto"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "fake_cpu");
}

TEST(PlatformChoice, AnExplicitDeviceThatCannotRunTheModelNamesThoseThatCould) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel"}));
  auto p = host.activate_platform(model_for({"fake_cpu"}, "fake_accel"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), troupe::StatusCode::not_supported);
  const std::string m = p.status().message();
  EXPECT_TRUE(contains(m, "platform fake_accel cannot run m.gguf")) << m;
  EXPECT_TRUE(contains(m, "quantization q4_1 is not supported by platform fake_accel")) << m;
  EXPECT_TRUE(contains(m, "platforms that could: fake_cpu")) << m;
  EXPECT_FALSE(host.activated_platform_name().has_value());
}

TEST(PlatformChoice, AnExplicitDeviceThatIsAbsentGivesTheProbesReason) {
  ph::PluginHost host(opts({"declining", "fake_cpu"}));
  auto p = host.activate_platform(model_for({"fake_cpu"}, "declining"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), troupe::StatusCode::unavailable);
  EXPECT_TRUE(contains(p.status().message(), "platform declining is not available: probe returned no platform: "
                                             "no declining device in this test machine"))
      << p.status().message();
  auto unknown = host.activate_platform(model_for({"fake_cpu"}, "tpu9"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), troupe::StatusCode::not_found);
  EXPECT_TRUE(contains(unknown.status().message(), "no platform plugin provides it (platforms: declining (not "
                                                   "available), fake_cpu)"))
      << unknown.status().message();
}

TEST(PlatformChoice, NoPlatformThatCanRunTheModelIsAClearError) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel"}));
  auto p = host.activate_platform(model_for({}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), troupe::StatusCode::not_supported);
  EXPECT_TRUE(contains(p.status().message(), "no available platform can run m.gguf")) << p.status().message();
  EXPECT_TRUE(contains(p.status().message(), "fake_accel: quantization q4_1")) << p.status().message();
}

TEST(PlatformChoice, PreviewActivatesNothing) {
  ph::PluginHost host(opts({"fake_cpu", "fake_accel"}));
  auto name = host.preview_platform(model_for({"fake_cpu"}));
  ASSERT_TRUE(name.ok()) << name.status().to_string();
  EXPECT_EQ(*name, "fake_cpu");
  EXPECT_FALSE(host.activated_platform_name().has_value());
  ASSERT_TRUE(host.activate_platform(model_for({"fake_cpu", "fake_accel"}, "fake_accel")).ok());
  EXPECT_EQ(host.activated_platform_name(), "fake_accel");
}

TEST(IOProcessors, MadeByName) {
  ph::PluginHost host(opts({"echo_io"}));
  troupe::EngineConfig config;
  auto io = host.make_io_processor("echo_io", config);
  ASSERT_TRUE(io.ok()) << io.status().to_string();
  auto parsed = (*io)->parse_request("{\"x\": 1}");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, "{\"x\": 1}");
  auto missing = host.make_io_processor("nope", config);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), troupe::StatusCode::not_found);
  EXPECT_TRUE(contains(missing.status().message(), "echo_io")) << missing.status().message();
}

#if TROUPE_HAVE_EXAMPLES
TEST(Examples, DummyPlatformWinsAndChangesTheConfig) {
  ph::HostOptions o;
  o.plugin_dirs = {dir("fake_cpu"), TROUPE_EXAMPLES_PLUGIN_DIR};
  ph::PluginHost host(o);
  auto p = host.activate_platform();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(host.activated_platform_name(), "dummy");
  EXPECT_EQ((*p)->device_type(), "dummy");
  EXPECT_EQ((*p)->device_name(0), "DummyDevice");
  troupe::EngineConfig config;
  ASSERT_TRUE((*p)->check_and_update_config(config).ok());
  EXPECT_EQ(config.cache.block_size, 32);
  EXPECT_EQ(config.parallel.worker_cls, "dummy.DummyWorker");
  EXPECT_EQ(config.extra["dummy_platform"], "configured");
  auto worker = (*p)->make_worker(config, 0);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.status().code(), troupe::StatusCode::not_supported);
  // The example general plugin registered its architecture in this process.
  EXPECT_TRUE(troupe::model_registry::is_registered("gpt2"));
}

TEST(Examples, JsonlStatLoggerAppendsOneLinePerInterval) {
  auto file = fs::temp_directory_path() / ("troupe_stats_" + std::to_string(::getpid()) + ".jsonl");
  fs::remove(file);
  setenv("TROUPE_STAT_LOG_FILE", file.c_str(), 1);
  ph::HostOptions o;
  o.plugin_dirs = {TROUPE_EXAMPLES_PLUGIN_DIR};
  o.allowed = std::vector<std::string>{"stat_logger_jsonl"};
  ph::PluginHost host(o);
  auto loggers = host.make_stat_loggers(troupe::EngineConfig{}, 0);
  ASSERT_EQ(loggers.size(), 1u);
  // As the engine calls it: its step structs, seen by the plugin as a StepStatsView.
  troupe::stats::PluginStatLogger logger(std::move(loggers[0]));
  troupe::SchedulerStats s;
  s.num_running_reqs = 2;
  s.kv_cache_usage = 0.25;
  troupe::IterationStats it;
  it.num_prompt_tokens = 10;
  it.num_generation_tokens = 3;
  it.finished_requests.resize(1);
  logger.record(&s, &it, 0);
  logger.record(&s, &it, 0);
  logger.log();
  logger.record(&s, nullptr, 0);
  logger.log();
  unsetenv("TROUPE_STAT_LOG_FILE");

  std::ifstream in(file);
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  fs::remove(file);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["steps"], 2);
  EXPECT_EQ(lines[0]["prompt_tokens"], 20);
  EXPECT_EQ(lines[0]["generation_tokens"], 6);
  EXPECT_EQ(lines[0]["finished_requests"], 2);
  EXPECT_EQ(lines[0]["running"], 2);
  EXPECT_DOUBLE_EQ(lines[0]["kv_cache_usage"].get<double>(), 0.25);
  EXPECT_EQ(lines[1]["interval"], 2);
  EXPECT_EQ(lines[1]["steps"], 1);
  EXPECT_EQ(lines[1]["prompt_tokens"], 0);
}
#endif
