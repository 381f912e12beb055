// What a process listens on, read from /proc as any local user could (its open
// descriptors' socket inodes, matched against /proc/net/tcp, tcp6 and unix):
// the doors a local process could knock on.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace troupe::testing {

/// The socket inodes among `pid`'s open descriptors.
inline std::set<uint64_t> socket_inodes(pid_t pid) {
  std::set<uint64_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) out.insert(std::stoull(target.substr(8)));
  }
  return out;
}

/// The TCP ports `pid` listens on (IPv4 and IPv6).
inline std::set<int> listening_tcp_ports(pid_t pid) {
  const auto inodes = socket_inodes(pid);
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retrans, uid, timeout;
      uint64_t inode = 0;
      f >> sl >> local >> remote >> state >> queues >> timer >> retrans >> uid >> timeout >> inode;
      if (state != "0A" || !inodes.count(inode)) continue;  // 0A: LISTEN
      ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

/// The listening Unix sockets of `pid` (their paths; "@..." for abstract ones, "" unnamed).
inline std::set<std::string> listening_unix_sockets(pid_t pid) {
  const auto inodes = socket_inodes(pid);
  std::set<std::string> out;
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, refs, protocol, flags, type, st, path;
    uint64_t inode = 0;
    f >> num >> refs >> protocol >> flags >> type >> st >> inode;
    std::getline(f, path);
    if (!inodes.count(inode) || flags != "00010000") continue;  // __SO_ACCEPTCON: listening
    const size_t start = path.find_first_not_of(' ');
    out.insert(start == std::string::npos ? "" : path.substr(start));
  }
  return out;
}

}  // namespace troupe::testing
