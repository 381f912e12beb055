// Black-box test helper: runs the real `troupe` CLI once, bounded by
// `timeout`, and returns its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace troupe::testing {

struct CmdResult {
  int exit_code = -1;  // -1: killed by a signal (a crash) or by the timeout
  std::string out, err;
};

/// `env` is put in front of the command (e.g. "env -u TROUPE_PLUGINS").
inline CmdResult run_troupe(const std::string& args, const std::string& env = "") {
  // Per process: ctest runs tests of one binary in parallel processes.
  static int calls = 0;
  const std::string err_file =
      "/tmp/troupe_cli_stderr_" + std::to_string(::getpid()) + "_" + std::to_string(calls++) + ".txt";
  const std::string cmd = env + " timeout -s KILL 300 " + std::string(TROUPE_EXE) + " " + args + " 2>" + err_file;
  CmdResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  std::remove(err_file.c_str());
  return r;
}

}  // namespace troupe::testing
