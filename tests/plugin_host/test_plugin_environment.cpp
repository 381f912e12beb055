// TROUPE_PLUGINS / TROUPE_PLUGIN_PATH parsing and manifest parsing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "plugin_host/manifest.hpp"
#include "plugin_host/plugin_host.hpp"

namespace ph = troupe::plugin_host;
namespace fs = std::filesystem;

TEST(PluginFilter, UnsetMeansAll) { EXPECT_FALSE(ph::parse_plugin_filter(nullptr).has_value()); }

TEST(PluginFilter, EmptyMeansNone) {
  auto f = ph::parse_plugin_filter("");
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->empty());
}

TEST(PluginFilter, CommaListIsTrimmed) {
  auto f = ph::parse_plugin_filter(" a , b,, c ");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(*f, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(PluginPath, SplitsOnColonsAndDropsEmpty) {
  EXPECT_EQ(ph::split_path_list("/a::/b:"), (std::vector<std::string>{"/a", "/b"}));
  EXPECT_TRUE(ph::split_path_list(nullptr).empty());
}

TEST(HostOptions, FromEnvironment) {
  setenv("TROUPE_BUILTIN_PLUGIN_DIR", "/builtin/dir", 1);
  setenv("TROUPE_PLUGIN_PATH", "/x:/y", 1);
  setenv("TROUPE_PLUGINS", "p1,p2", 1);
  auto o = ph::HostOptions::from_environment();
  EXPECT_EQ(o.plugin_dirs, (std::vector<std::string>{"/builtin/dir", "/x", "/y"}));
  EXPECT_EQ(o.builtin_dirs, (std::vector<std::string>{"/builtin/dir"}));
  ASSERT_TRUE(o.allowed.has_value());
  EXPECT_EQ(*o.allowed, (std::vector<std::string>{"p1", "p2"}));
  unsetenv("TROUPE_PLUGINS");
  unsetenv("TROUPE_PLUGIN_PATH");
  unsetenv("TROUPE_BUILTIN_PLUGIN_DIR");
  EXPECT_FALSE(ph::HostOptions::from_environment().allowed.has_value());
}

TEST(HostOptions, BuiltinDirDefaultsNextToTheLibrary) {
  unsetenv("TROUPE_BUILTIN_PLUGIN_DIR");
  // The test binary and libtroupe_plugin_host both live in the build tree's bin/ and lib/.
  EXPECT_EQ(fs::path(ph::builtin_plugin_dir()).lexically_normal(),
            (fs::path(TROUPE_BINARY_DIR) / "lib" / "troupe" / "plugins").lexically_normal());
}

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("troupe_manifest_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& file, const std::string& text) {
    auto p = dir_ / file;
    std::ofstream(p) << text;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(ManifestTest, ParsesAndResolvesLibraryAgainstItsDirectory) {
  auto path = write("x.troupe-plugin.json",
                    R"({"name": "x", "group": "troupe.general_plugins", "library": "libx.so", "symbol": "entry"})");
  ph::Manifest m;
  ASSERT_TRUE(ph::parse_manifest(path, &m).ok());
  EXPECT_EQ(m.name, "x");
  EXPECT_EQ(m.group, "troupe.general_plugins");
  EXPECT_EQ(m.library, (dir_ / "libx.so").string());
  EXPECT_EQ(m.symbol, "entry");
}

TEST_F(ManifestTest, SymbolDefaultsToTheEntryPoint) {
  auto path = write("y.troupe-plugin.json", R"({"name": "y", "group": "troupe.platform_plugins", "library": "/abs/liby.so"})");
  ph::Manifest m;
  ASSERT_TRUE(ph::parse_manifest(path, &m).ok());
  EXPECT_EQ(m.library, "/abs/liby.so");
  EXPECT_EQ(m.symbol, "troupe_plugin_entry");
}

TEST_F(ManifestTest, BadManifestsGiveReasons) {
  ph::Manifest m;
  auto st = ph::parse_manifest(write("a.troupe-plugin.json", "{oops"), &m);
  EXPECT_EQ(st.code(), troupe::StatusCode::data_loss);
  EXPECT_NE(st.message().find("not valid JSON"), std::string::npos) << st.message();

  st = ph::parse_manifest(write("b.troupe-plugin.json", R"(["list"])"), &m);
  EXPECT_NE(st.message().find("expected a JSON object"), std::string::npos) << st.message();

  st = ph::parse_manifest(write("c.troupe-plugin.json", R"({"name": "c", "group": "troupe.general_plugins"})"), &m);
  EXPECT_NE(st.message().find("missing field \"library\""), std::string::npos) << st.message();

  st = ph::parse_manifest(write("d.troupe-plugin.json", R"({"name": 3, "group": "g", "library": "l"})"), &m);
  EXPECT_NE(st.message().find("\"name\" must be a non-empty string"), std::string::npos) << st.message();

  st = ph::parse_manifest(write("e.troupe-plugin.json", R"({"name": "e", "group": "troupe.bogus", "library": "l"})"), &m);
  EXPECT_NE(st.message().find("unknown group \"troupe.bogus\""), std::string::npos) << st.message();

  st = ph::parse_manifest((dir_ / "absent.troupe-plugin.json").string(), &m);
  EXPECT_EQ(st.code(), troupe::StatusCode::not_found);
}

TEST_F(ManifestTest, ListsOnlyManifestsSorted) {
  write("b.troupe-plugin.json", "{}");
  write("a.troupe-plugin.json", "{}");
  write("readme.txt", "x");
  troupe::Status why;
  auto list = ph::list_manifests(dir_.string(), &why);
  ASSERT_TRUE(why.ok());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(fs::path(list[0]).filename(), "a.troupe-plugin.json");
  EXPECT_EQ(ph::name_from_manifest_path(list[1]), "b");

  auto none = ph::list_manifests((dir_ / "nowhere").string(), &why);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(why.code(), troupe::StatusCode::not_found);
}
