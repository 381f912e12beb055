// Where plugins come from: the built-in directory and the environment
// (TROUPE_BUILTIN_PLUGIN_DIR, TROUPE_PLUGIN_PATH, TROUPE_PLUGINS, TROUPE_DEVICE).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "plugin_host/plugin_host.hpp"

namespace troupe::plugin_host {
namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string::size_type start = 0;
  while (true) {
    auto pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

// Directory of the shared object holding this function: libtroupe_plugin_host
// lives in <prefix>/<libdir> both in the build tree and when installed, and
// also when an embedder's executable lives elsewhere.
std::string this_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&builtin_plugin_dir), &info) == 0 || !info.dli_fname) return "";
  std::error_code ec;
  fs::path p = fs::canonical(info.dli_fname, ec);
  return ec ? "" : p.parent_path().string();
}

std::string executable_dir() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : p.parent_path().string();
}

}  // namespace

std::string builtin_plugin_dir() {
  if (const char* env = std::getenv("TROUPE_BUILTIN_PLUGIN_DIR"); env && *env) return env;
  std::error_code ec;
  std::string from_exe;
  if (auto exe = executable_dir(); !exe.empty())
    from_exe = (fs::path(exe) / ".." / "lib" / "troupe" / "plugins").lexically_normal().string();
  if (auto lib = this_library_dir(); !lib.empty()) {
    std::string from_lib = (fs::path(lib) / "troupe" / "plugins").lexically_normal().string();
    if (fs::is_directory(from_lib, ec) || from_exe.empty()) return from_lib;
  }
  return from_exe;
}

std::optional<std::vector<std::string>> parse_plugin_filter(const char* value) {
  if (!value) return std::nullopt;
  std::vector<std::string> names;
  for (auto& item : split(value, ',')) {
    std::string name = trim(item);
    if (!name.empty()) names.push_back(std::move(name));
  }
  return names;
}

std::vector<std::string> split_path_list(const char* value) {
  std::vector<std::string> dirs;
  if (!value) return dirs;
  for (auto& item : split(value, ':'))
    if (!item.empty()) dirs.push_back(item);
  return dirs;
}

HostOptions HostOptions::from_environment() {
  HostOptions o;
  std::string builtin = builtin_plugin_dir();
  if (!builtin.empty()) {
    o.plugin_dirs.push_back(builtin);
    o.builtin_dirs.push_back(builtin);
  }
  for (auto& d : split_path_list(std::getenv("TROUPE_PLUGIN_PATH"))) o.plugin_dirs.push_back(d);
  o.allowed = parse_plugin_filter(std::getenv("TROUPE_PLUGINS"));
  if (const char* device = std::getenv("TROUPE_DEVICE")) o.device = device;
  return o;
}

}  // namespace troupe::plugin_host
