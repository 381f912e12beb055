// Malformed model files given to the real `troupe generate` and `troupe serve`:
// garbage bytes renamed to .gguf and truncated copies of a real GGUF each give
// a one-line error naming the file and the problem, a non-zero exit, no crash
// and no hang (every run is bounded by `timeout`).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// A loopback port nobody listens on now (serve must fail before it listens anyway).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 18765;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

struct Run {
  int exit_code = -1;  // -1: killed by a signal (a crash) or by the timeout
  std::string err;
};

Run run(const std::string& args) {
  // Per process: ctest runs the generate and serve cases at the same time.
  const std::string err_file = ::testing::TempDir() + "troupe_malformed_stderr." + std::to_string(::getpid()) + ".txt";
  const std::string cmd = "timeout -s KILL 120 " + std::string(TROUPE_EXE) + " " + args + " >/dev/null 2>" + err_file;
  Run r;
  const int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  {
    std::ifstream e(err_file);
    r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  }
  std::remove(err_file.c_str());
  return r;
}

std::vector<std::string> error_lines(const std::string& err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.find("error:") != std::string::npos) out.push_back(line);
  return out;
}

std::string write_file(const std::string& name, const std::vector<char>& bytes) {
  const std::string path = ::testing::TempDir() + std::to_string(::getpid()) + "." + name;
  std::ofstream o(path, std::ios::binary);
  o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::vector<char> stories() {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Case {
  std::string name;
  std::vector<char> bytes;
  std::string problem;  // a phrase the error must contain
};

std::vector<Case> cases() {
  std::mt19937 rng(7);
  std::vector<char> garbage(8192);
  for (auto& c : garbage) c = static_cast<char>(rng());
  std::vector<char> magic_then_garbage = garbage;
  std::copy_n("GGUF\3\0\0\0", 8, magic_then_garbage.begin());
  auto whole = stories();
  std::vector<char> half(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2));
  std::vector<char> header(whole.begin(), whole.begin() + 100);
  return {{"garbage.gguf", garbage, "not a GGUF file"},
          {"magic_then_garbage.gguf", magic_then_garbage, "GGUF byte"},
          {"truncated_half.gguf", half, "GGUF byte"},
          {"truncated_header.gguf", header, "GGUF byte"}};
}

void expect_one_line_error(const std::string& command, const Case& c) {
  SCOPED_TRACE(command + " " + c.name);
  const std::string path = write_file(c.name, c.bytes);
  const std::string args = command == "serve" ? "serve " + path + " --host 127.0.0.1 --port " + std::to_string(free_port()) : "generate " + path + " -p hi";
  Run r = run(args);
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 1) << "crashed, hung or succeeded:\n" << r.err;
  auto lines = error_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  const std::string& line = lines[0];
  EXPECT_EQ(line.rfind("troupe " + command + ": error: data_loss: " + path + ": ", 0), 0u) << line;
  EXPECT_NE(line.find(c.problem), std::string::npos) << line;
}

TEST(MalformedModel, GenerateSaysWhichFileAndWhatIsWrong) {
  for (const auto& c : cases()) expect_one_line_error("generate", c);
}

TEST(MalformedModel, ServeSaysWhichFileAndWhatIsWrong) {
  for (const auto& c : cases()) expect_one_line_error("serve", c);
}

}  // namespace
