#include "platforms/cpu/tcp_communicator.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "troupe/log.hpp"

namespace troupe::cpu {

using tcp::Clock;
using net::Stream;
using std::chrono::milliseconds;

namespace {

// -- Data messages ---------------------------------------------------------------------

constexpr int kBytesBits = 40;
constexpr int64_t kMaxBytes = (int64_t{1} << kBytesBits) - 1;
// What a round runs: op, phase (all_reduce in two rounds), root and the bytes of the whole
// call per rank. Every rank of a round computes the same tag.
uint64_t make_tag(uint64_t op, int phase, int root, int64_t bytes) {
  return (op << 56) | (static_cast<uint64_t>(phase & 0xff) << 48) | (static_cast<uint64_t>(root & 0xff) << 40) |
         static_cast<uint64_t>(bytes);
}
std::string tag_text(uint64_t tag) {
  const uint64_t op = tag >> 56;
  const uint64_t bytes = tag & ((uint64_t{1} << kBytesBits) - 1);
  if (op == kSend) return "a message of " + std::to_string(bytes) + " bytes";
  return std::string(op_name(op)) + " (root " + std::to_string((tag >> 40) & 0xff) + ", " + std::to_string(bytes) +
         " bytes" + (((tag >> 48) & 0xff) ? ", round " + std::to_string((tag >> 48) & 0xff) : std::string()) + ")";
}

constexpr size_t kHeaderBytes = 16;
void put_header(uint8_t* h, uint64_t tag, uint64_t bytes) {
  for (int i = 0; i < 8; ++i) {
    h[i] = static_cast<uint8_t>(tag >> (8 * i));
    h[8 + i] = static_cast<uint8_t>(bytes >> (8 * i));
  }
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

}  // namespace

Result<std::unique_ptr<TcpCommunicator>> TcpCommunicator::create(const TcpOptions& o) {
  if (o.world_size < 2 || o.world_size > 256 || o.rank < 0 || o.rank >= o.world_size)
    return invalid_argument("cpu communicator: rank " + std::to_string(o.rank) + " is outside a world of " +
                            std::to_string(o.world_size) + " ranks (2 to 256)");
  auto mesh = tcp::join_world(o.id, o.where, o.rank, o.world_size, o.timeout, o.secret);
  if (!mesh.ok()) return mesh.status();
  const bool tls = std::any_of(mesh->links.begin(), mesh->links.end(), [](const Stream& l) { return l.is_tls(); });
  TROUPE_LOG_INFO("cpu communicator {}: rank {} connected to {} rank(s) over {}", o.id, o.rank, o.world_size - 1,
                  tls ? "TLS" : "TCP");
  return std::unique_ptr<TcpCommunicator>(new TcpCommunicator(o.id, o.rank, o.world_size, o.timeout,
                                                              std::move(mesh->endpoint), "", std::move(mesh->table),
                                                              std::move(mesh->links)));
}

TcpCommunicator::TcpCommunicator(std::string name, int rank, int world, milliseconds timeout,
                                 std::shared_ptr<tcp::Endpoint> endpoint, std::string channel,
                                 std::vector<tcp::Address> table, std::vector<Stream> links)
    : HostCommunicator(std::move(name), rank, world, kMaxBytes),
      timeout_(timeout),
      endpoint_(std::move(endpoint)),
      channel_(std::move(channel)),
      table_(std::move(table)),
      links_(std::move(links)) {}

TcpCommunicator::~TcpCommunicator() = default;  // closing the links tells every peer at once

Result<std::unique_ptr<DeviceCommunicator>> TcpCommunicator::make_group(const std::vector<int>& ranks, int index,
                                                                       int k) {
  std::string channel = channel_ + "/" + std::to_string(k) + ":";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) channel += ',';
    channel += std::to_string(ranks[i]);
  }
  std::vector<tcp::Address> table;
  for (int r : ranks) table.push_back(table_[static_cast<size_t>(r)]);
  const std::string world_name = name().substr(0, name().find(" group "));
  const std::string group_name = world_name + " group " + channel;
  auto links = tcp::join_group(*endpoint_, table, channel, index, timeout_, group_name);
  if (!links.ok()) return Status(links.status().code(), "new_group: " + links.status().message());
  return std::unique_ptr<DeviceCommunicator>(new TcpCommunicator(group_name, index, static_cast<int>(ranks.size()),
                                                                 timeout_, endpoint_, channel, std::move(table),
                                                                 std::move(*links)));
}

// -- Data path ------------------------------------------------------------------------------

/// One peer's share of a round: one message to write and/or one to read.
struct TcpCommunicator::Part {
  int peer = -1;
  bool sending = false;
  uint8_t out_head[kHeaderBytes] = {};
  const uint8_t* out = nullptr;
  size_t out_bytes = 0;
  size_t out_done = 0;  // of kHeaderBytes + out_bytes
  bool receiving = false;
  uint64_t in_tag = 0;
  uint8_t in_head[kHeaderBytes] = {};
  uint8_t* in = nullptr;
  size_t in_bytes = 0;
  size_t in_done = 0;   // of kHeaderBytes + in_bytes
  bool checked = false;

  void send(uint64_t tag, const void* data, size_t bytes) {
    sending = true;
    put_header(out_head, tag, bytes);
    out = static_cast<const uint8_t*>(data);
    out_bytes = bytes;
  }
  void receive(uint64_t tag, void* data, size_t bytes) {
    receiving = true;
    in_tag = tag;
    in = static_cast<uint8_t*>(data);
    in_bytes = bytes;
  }
  bool send_pending() const { return sending && out_done < kHeaderBytes + out_bytes; }
  bool recv_pending() const { return receiving && in_done < kHeaderBytes + in_bytes; }
};

std::string TcpCommunicator::who(int peer) const { return tcp::rank_text(peer, table_[static_cast<size_t>(peer)]); }

uint8_t* TcpCommunicator::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

Status TcpCommunicator::progress_send(Part& p, const char* op) {
  Stream& link = links_[static_cast<size_t>(p.peer)];
  const int fd = link.fd();
  while (p.send_pending() && link.is_tls()) {
    // TLS: the header, then the payload (no gather-write through a TLS session).
    const bool head = p.out_done < kHeaderBytes;
    const uint8_t* from = head ? p.out_head + p.out_done : p.out + (p.out_done - kHeaderBytes);
    const size_t n = head ? kHeaderBytes - p.out_done : kHeaderBytes + p.out_bytes - p.out_done;
    size_t put = 0;
    const auto r = link.write(from, n, &put);
    if (r == Stream::Io::done) {
      p.out_done += put;
      continue;
    }
    if (r == Stream::Io::again) return {};
    return unavailable(who(p.peer) + " closed its connection to rank " + std::to_string(rank_) + " during " + op +
                       " (" + link.error() + "): its process ended or it left the communicator");
  }
  while (p.send_pending()) {
    iovec iov[2];
    int n = 0;
    if (p.out_done < kHeaderBytes) iov[n++] = {p.out_head + p.out_done, kHeaderBytes - p.out_done};
    const size_t data_done = p.out_done > kHeaderBytes ? p.out_done - kHeaderBytes : 0;
    if (p.out_bytes > data_done) iov[n++] = {const_cast<uint8_t*>(p.out) + data_done, p.out_bytes - data_done};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p.out_done += static_cast<size_t>(w);
      continue;
    }
    const int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) return {};
    if (e == EINTR) continue;
    return unavailable(who(p.peer) + " closed its connection to rank " + std::to_string(rank_) + " during " + op +
                       " (" + std::strerror(e) + "): its process ended or it left the communicator");
  }
  return {};
}

Status TcpCommunicator::progress_recv(Part& p, const char* op) {
  Stream& link = links_[static_cast<size_t>(p.peer)];
  const int fd = link.fd();
  while (p.recv_pending()) {
    ssize_t r = 0;
    if (link.is_tls()) {
      // TLS: into the header, then the payload; never past what this round expects.
      const bool head = p.in_done < kHeaderBytes;
      uint8_t* to = head ? p.in_head + p.in_done : p.in + (p.in_done - kHeaderBytes);
      const size_t n = head ? kHeaderBytes - p.in_done : kHeaderBytes + p.in_bytes - p.in_done;
      size_t got = 0;
      const auto io = link.read(to, n, &got);
      if (io == Stream::Io::again) return {};
      if (io == Stream::Io::closed) r = 0;
      else if (io == Stream::Io::failed)
        return unavailable(who(p.peer) + " broke its TLS connection to rank " + std::to_string(rank_) + " during " +
                           op + " (" + link.error() + ")");
      else r = static_cast<ssize_t>(got);
    } else {
      iovec iov[2];
      int n = 0;
      if (p.in_done < kHeaderBytes) iov[n++] = {p.in_head + p.in_done, kHeaderBytes - p.in_done};
      const size_t data_done = p.in_done > kHeaderBytes ? p.in_done - kHeaderBytes : 0;
      if (p.in_bytes > data_done) iov[n++] = {p.in + data_done, p.in_bytes - data_done};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(n);
      r = ::recvmsg(fd, &m, MSG_DONTWAIT);
    }
    if (r > 0) {
      p.in_done += static_cast<size_t>(r);
      if (!p.checked && p.in_done >= kHeaderBytes) {
        p.checked = true;
        const uint64_t tag = get_u64(p.in_head), bytes = get_u64(p.in_head + 8);
        // A header other than the one this round expects: a peer out of step, or one
        // sending garbage. Nothing more is read from it (what was read went into the
        // receiver's own buffer, never past its size), and the link is closed.
        auto violation = [&](std::string message) {
          TROUPE_LOG_ERROR("cpu communicator {}: closed the link to {}: {}", name(), who(p.peer), message);
          links_[static_cast<size_t>(p.peer)].close();
          return internal_error(std::move(message));
        };
        if (tag != p.in_tag) {
          const bool p2p = (tag >> 56) == kSend && (p.in_tag >> 56) == kSend;
          if (p2p)
            return violation("cpu communicator: rank " + std::to_string(p.peer) + " sent a message of " +
                                  std::to_string(bytes) + " bytes, rank " + std::to_string(rank_) + " expected " +
                                  std::to_string(p.in_bytes));
          return violation("cpu communicator: rank " + std::to_string(p.peer) + " runs " + tag_text(tag) +
                                " while rank " + std::to_string(rank_) + " runs " + tag_text(p.in_tag));
        }
        if (bytes != p.in_bytes)
          return violation("cpu communicator: rank " + std::to_string(p.peer) + " sent " + std::to_string(bytes) +
                                " bytes of " + tag_text(tag) + ", rank " + std::to_string(rank_) + " expected " +
                                std::to_string(p.in_bytes));
      }
      continue;
    }
    if (r == 0)
      return unavailable(who(p.peer) + " closed its connection to rank " + std::to_string(rank_) + " during " + op +
                         ": its process ended or it left the communicator");
    const int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) return {};
    if (e == EINTR) continue;
    return unavailable(who(p.peer) + " reset its connection to rank " + std::to_string(rank_) + " during " + op +
                       " (" + std::strerror(e) + "): its process ended or it left the communicator");
  }
  return {};
}

Status TcpCommunicator::exchange(std::vector<Part>& parts, Wait what, const char* op) {
  // Write what fits at once; then one poll() over every connection still busy.
  for (Part& p : parts) TROUPE_RETURN_IF_ERROR(progress_send(p, op));
  auto idle_deadline = Clock::now() + timeout_;
  std::vector<pollfd> fds;
  std::vector<Part*> busy;
  for (;;) {
    fds.clear();
    busy.clear();
    bool buffered = false;  // TLS holds decrypted bytes poll() cannot see
    for (Part& p : parts) {
      if (!p.send_pending() && !p.recv_pending()) continue;
      const Stream& link = links_[static_cast<size_t>(p.peer)];
      fds.push_back({link.fd(), link.events(p.recv_pending(), p.send_pending()), 0});
      busy.push_back(&p);
      buffered |= p.recv_pending() && link.pending();
    }
    if (busy.empty()) return {};
    const auto left = std::chrono::duration_cast<milliseconds>(idle_deadline - Clock::now()).count();
    const int ready = ::poll(fds.data(), fds.size(),
                             buffered ? 0 : static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000)));
    if (ready < 0 && errno != EINTR)
      return unavailable(std::string("cpu communicator: poll failed: ") + std::strerror(errno));
    bool progress = false;
    for (size_t i = 0; (ready > 0 || buffered) && i < fds.size(); ++i) {
      if (fds[i].revents == 0 && !links_[static_cast<size_t>(busy[i]->peer)].pending()) continue;
      Part& p = *busy[i];
      const size_t before = p.out_done + p.in_done;
      if (p.recv_pending()) TROUPE_RETURN_IF_ERROR(progress_recv(p, op));
      if (p.send_pending()) TROUPE_RETURN_IF_ERROR(progress_send(p, op));
      progress |= p.out_done + p.in_done != before;
    }
    const auto now = Clock::now();
    if (progress) {
      idle_deadline = now + timeout_;
      continue;
    }
    if (now < idle_deadline) continue;
    // Name a peer that holds the round up: one that sent nothing yet, else any still busy.
    const Part* late = busy.front();
    for (const Part* p : busy)
      if (p->recv_pending() && p->in_done == 0) {
        late = p;
        break;
      }
    return timed_out(what, late->peer, timeout_);
  }
}

Status TcpCommunicator::run_all_reduce(float* x, int64_t count) {
  const int64_t b = count * int64_t{sizeof(float)};
  const auto bytes = static_cast<size_t>(b);
  const int W = world_;
  std::vector<Part> parts;
  if (W == 2 || b <= kDirectAllReduceBytes) {
    // One round: every rank sends its whole buffer to every other rank and sums them all.
    uint8_t* space = scratch(bytes * static_cast<size_t>(W));
    std::vector<const float*> src(static_cast<size_t>(W));
    for (int r = 0; r < W; ++r) {
      src[static_cast<size_t>(r)] =
          r == rank_ ? x : reinterpret_cast<const float*>(space + bytes * static_cast<size_t>(r));
      if (r == rank_) continue;
      Part p;
      p.peer = r;
      p.send(make_tag(kAllReduce, 0, 0, b), x, bytes);
      p.receive(make_tag(kAllReduce, 0, 0, b), space + bytes * static_cast<size_t>(r), bytes);
      parts.push_back(p);
    }
    TROUPE_RETURN_IF_ERROR(exchange(parts, Wait::collective, "all_reduce"));
    if (rank_ == 0) {
      ordered_sum(x, src, count);
    } else {
      auto* acc = reinterpret_cast<float*>(space);  // rank 0's part: the sum starts there
      ordered_sum(acc, src, count);
      std::memcpy(x, acc, bytes);
    }
    return {};
  }
  // Two rounds: rank q sums block q of every rank (in rank order), then every rank gathers
  // every sum. Each rank sends 2 (W-1)/W of the buffer instead of W-1 times it.
  auto start = [&](int q) { return count * q / W; };
  const int64_t mine = start(rank_ + 1) - start(rank_);
  const size_t mine_bytes = static_cast<size_t>(mine) * sizeof(float);
  uint8_t* space = scratch(mine_bytes * static_cast<size_t>(W));
  std::vector<const float*> src(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    src[static_cast<size_t>(r)] =
        r == rank_ ? x + start(rank_) : reinterpret_cast<const float*>(space + mine_bytes * static_cast<size_t>(r));
    if (r == rank_) continue;
    Part p;
    p.peer = r;
    p.send(make_tag(kAllReduce, 1, 0, b), x + start(r), static_cast<size_t>(start(r + 1) - start(r)) * sizeof(float));
    p.receive(make_tag(kAllReduce, 1, 0, b), space + mine_bytes * static_cast<size_t>(r), mine_bytes);
    parts.push_back(p);
  }
  TROUPE_RETURN_IF_ERROR(exchange(parts, Wait::collective, "all_reduce"));
  if (rank_ == 0) {
    ordered_sum(x + start(0), src, mine);
  } else {
    auto* acc = reinterpret_cast<float*>(space);
    ordered_sum(acc, src, mine);
    std::memcpy(x + start(rank_), acc, mine_bytes);
  }
  parts.clear();
  for (int r = 0; r < W; ++r) {
    if (r == rank_) continue;
    Part p;
    p.peer = r;
    p.send(make_tag(kAllReduce, 2, 0, b), x + start(rank_), mine_bytes);
    p.receive(make_tag(kAllReduce, 2, 0, b), x + start(r),
              static_cast<size_t>(start(r + 1) - start(r)) * sizeof(float));
    parts.push_back(p);
  }
  return exchange(parts, Wait::collective, "all_reduce");
}

Status TcpCommunicator::run_reduce_scatter(const float* x, float* y, int64_t count) {
  const int64_t b = count * int64_t{sizeof(float)};
  const auto bytes = static_cast<size_t>(b);
  uint8_t* space = scratch(bytes * static_cast<size_t>(world_ + 1));
  std::vector<const float*> src(static_cast<size_t>(world_));
  std::vector<Part> parts;
  for (int r = 0; r < world_; ++r) {
    src[static_cast<size_t>(r)] = reinterpret_cast<const float*>(space + bytes * static_cast<size_t>(r));
    if (r == rank_) continue;
    Part p;
    p.peer = r;
    p.send(make_tag(kReduceScatter, 0, 0, b), x + count * r, bytes);
    p.receive(make_tag(kReduceScatter, 0, 0, b), space + bytes * static_cast<size_t>(r), bytes);
    parts.push_back(p);
  }
  TROUPE_RETURN_IF_ERROR(exchange(parts, Wait::collective, "reduce_scatter"));
  // This rank's own block may overlap `out`: sum into scratch, then copy.
  const float* own = x + count * rank_;
  if (overlaps(own, bytes, y, bytes)) {
    std::memcpy(space + bytes * static_cast<size_t>(rank_), own, bytes);
  } else {
    src[static_cast<size_t>(rank_)] = own;
  }
  auto* acc = reinterpret_cast<float*>(space + bytes * static_cast<size_t>(world_));
  ordered_sum(acc, src, count);
  std::memcpy(y, acc, bytes);
  return {};
}

Status TcpCommunicator::run_gather(const uint8_t* in, uint8_t* out, int64_t b, int root) {
  const uint64_t op = root < 0 ? kAllGather : kGather;
  const auto bytes = static_cast<size_t>(b);
  const uint64_t tag = make_tag(op, 0, std::max(root, 0), b);
  std::vector<Part> parts;
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    const bool to_them = root < 0 || r == root, to_me = root < 0 || rank_ == root;
    Part p;
    p.peer = r;
    p.send(tag, in, to_them ? bytes : 0);
    p.receive(tag, to_me ? out + bytes * static_cast<size_t>(r) : nullptr, to_me ? bytes : 0);
    parts.push_back(p);
  }
  TROUPE_RETURN_IF_ERROR(exchange(parts, Wait::collective, op_name(op)));
  if (root < 0 || rank_ == root) std::memmove(out + bytes * static_cast<size_t>(rank_), in, bytes);
  return {};
}

Status TcpCommunicator::run_broadcast(uint8_t* buf, int64_t b, int root) {
  const auto bytes = static_cast<size_t>(b);
  const uint64_t tag = make_tag(kBroadcast, 0, root, b);
  std::vector<Part> parts;
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    Part p;
    p.peer = r;
    p.send(tag, buf, rank_ == root ? bytes : 0);
    p.receive(tag, r == root ? buf : nullptr, r == root ? bytes : 0);
    parts.push_back(p);
  }
  return exchange(parts, Wait::collective, "broadcast");
}

Status TcpCommunicator::run_send(const uint8_t* buf, int64_t b, int peer) {
  std::vector<Part> parts(1);
  parts[0].peer = peer;
  parts[0].send(make_tag(kSend, 0, 0, b), buf, static_cast<size_t>(b));
  return exchange(parts, Wait::send, "send");
}

Status TcpCommunicator::run_recv(uint8_t* buf, int64_t b, int peer) {
  std::vector<Part> parts(1);
  parts[0].peer = peer;
  parts[0].receive(make_tag(kSend, 0, 0, b), buf, static_cast<size_t>(b));
  return exchange(parts, Wait::recv, "recv");
}

}  // namespace troupe::cpu
