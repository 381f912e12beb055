#include "platforms/cpu/shm_communicator.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TROUPE_SHM_RELAX() _mm_pause()
#else
#define TROUPE_SHM_RELAX() std::this_thread::yield()
#endif

namespace troupe::cpu {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kMagic = 0x6873657075'6f7274ull;  // "troupesh"
constexpr uint32_t kVersion = 1;
// Pauses before a waiter sleeps on the futex: tens of microseconds, about the
// skew between ranks that arrive together; longer waits must not burn a core
// that another rank of the same host needs.
constexpr int kSpins = 2000;
constexpr auto kSleepSlice = milliseconds(20);  // futex sleep between deadline checks
constexpr auto kPeerCheck = milliseconds(100);  // how often a waiter looks for its peer's process

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "the shared counters must be lock-free to work between processes");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futexes wait on the counters' own words");

struct Header {
  uint64_t magic;
  uint32_t version;
  uint32_t world;
  uint64_t slot_bytes;
  uint64_t mailbox_bytes;
  uint64_t total_bytes;
  std::atomic<uint32_t> ready;     // 1 once the creator has initialised every field
  std::atomic<uint32_t> attached;  // ranks attached so far
};

struct alignas(64) RankState {
  std::atomic<uint32_t> arrived;  // collective round this rank has published
  char pad0[60];
  std::atomic<uint32_t> done;     // collective round this rank has finished reading
  char pad1[60];
  std::atomic<int32_t> pid;       // its process; 0 before it attaches, -1 once it has left
  uint32_t pad2;
  uint64_t tag;                   // op of its current round, written before `arrived`
  std::atomic<uint64_t> pid_ns;   // inode of its pid namespace (0: unknown)
};

struct alignas(64) Mailbox {
  std::atomic<uint32_t> sent;     // chunks the sender has written
  char pad0[60];
  std::atomic<uint32_t> taken;    // chunks the receiver has consumed
  char pad1[60];
  uint64_t chunk_bytes;           // bytes of the chunk in the mailbox
  uint64_t message_bytes;         // bytes of the whole message the chunk belongs to
};

constexpr size_t page_up(size_t x) { return (x + 4095) & ~size_t{4095}; }

struct Layout {
  size_t ranks, mailboxes, slots, mail_data, total;
  explicit Layout(int w) {
    const auto W = static_cast<size_t>(w);
    ranks = page_up(sizeof(Header));
    mailboxes = ranks + page_up(sizeof(RankState) * W);
    slots = mailboxes + page_up(sizeof(Mailbox) * W * W);
    mail_data = slots + static_cast<size_t>(ShmCommunicator::kSlotBytes) * W;
    total = mail_data + static_cast<size_t>(ShmCommunicator::kMailboxBytes) * W * W;
  }
};

Header* header_of(void* base) { return static_cast<Header*>(base); }
RankState* state_of(void* base, int r) {
  return reinterpret_cast<RankState*>(static_cast<uint8_t*>(base) + page_up(sizeof(Header))) + r;
}

void futex_wake(const void* word) {
  syscall(SYS_futex, const_cast<void*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}
void futex_wait(const void* word, uint32_t seen, milliseconds slice) {
  timespec ts{0, static_cast<long>(std::chrono::nanoseconds(slice).count())};
  syscall(SYS_futex, const_cast<void*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

std::string errno_text() { return std::strerror(errno); }

// Processes that share /dev/shm may still live in different pid namespaces (containers with a
// shared IPC namespace): a pid is only looked up when both sides see the same namespace.
uint64_t pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// What one round runs: op, root and the bytes of this round per rank. Ranks compare tags,
// so ranks that call different collectives (a bug above us) fail instead of mixing data.
uint64_t make_tag(uint64_t op, int root, int64_t bytes) {
  return (op << 56) | (static_cast<uint64_t>(root & 0xff) << 48) | static_cast<uint64_t>(bytes);
}
std::string tag_text(uint64_t tag) {
  return std::string(op_name(tag >> 56)) + " (root " + std::to_string((tag >> 48) & 0xff) + ", " +
         std::to_string(tag & ((uint64_t{1} << 48) - 1)) + " bytes this round)";
}

}  // namespace

Result<std::unique_ptr<ShmCommunicator>> ShmCommunicator::create(const ShmOptions& o) {
  const std::string& name = o.name;
  if (name.size() < 2 || name.size() > 250 || name[0] != '/' || name.find('/', 1) != std::string::npos)
    return invalid_argument("cpu communicator: '" + name + "' is not a shared memory name (one leading '/', at most 250)");
  if (o.world_size < 1 || o.world_size > 256 || o.rank < 0 || o.rank >= o.world_size)
    return invalid_argument("cpu communicator: rank " + std::to_string(o.rank) + " is outside a world of " +
                            std::to_string(o.world_size) + " ranks (at most 256)");
  const Layout L(o.world_size);
  const std::string t = seconds_text(o.timeout);
  void* base = nullptr;
  if (o.rank == 0) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      if (errno == EEXIST)
        return invalid_argument("cpu communicator " + name +
                                " already exists: a communicator id serves one world (make a new one with "
                                "Platform::make_communicator_id)");
      return unavailable("cpu communicator: shm_open(" + name + ") failed: " + errno_text());
    }
    if (ftruncate(fd, static_cast<off_t>(L.total)) != 0) {
      Status s = resource_exhausted("cpu communicator: cannot size " + name + " to " + std::to_string(L.total) +
                                    " bytes: " + errno_text());
      close(fd);
      shm_unlink(name.c_str());
      return s;
    }
    base = mmap(nullptr, L.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
      Status s = resource_exhausted("cpu communicator: cannot map " + name + ": " + errno_text());
      shm_unlink(name.c_str());
      return s;
    }
    auto* h = new (base) Header{};
    h->magic = kMagic;
    h->version = kVersion;
    h->world = static_cast<uint32_t>(o.world_size);
    h->slot_bytes = kSlotBytes;
    h->mailbox_bytes = kMailboxBytes;
    h->total_bytes = L.total;
    for (int r = 0; r < o.world_size; ++r) new (state_of(base, r)) RankState{};
    auto* boxes = reinterpret_cast<Mailbox*>(static_cast<uint8_t*>(base) + L.mailboxes);
    for (int i = 0; i < o.world_size * o.world_size; ++i) new (boxes + i) Mailbox{};
    h->ready.store(1, std::memory_order_release);
  } else {
    const auto deadline = Clock::now() + o.timeout;
    int fd = -1;
    for (;;) {
      fd = shm_open(name.c_str(), O_RDWR, 0);
      if (fd >= 0) break;
      if (errno != ENOENT) return unavailable("cpu communicator: shm_open(" + name + ") failed: " + errno_text());
      if (Clock::now() >= deadline)
        return unavailable("rank 0 did not create the cpu communicator " + name + " within " + t +
                           " s (or it ended before every rank attached)");
      std::this_thread::sleep_for(milliseconds(2));
    }
    for (;;) {  // rank 0 sizes the segment right after creating it
      struct stat st {};
      if (fstat(fd, &st) != 0) {
        Status s = unavailable("cpu communicator: fstat(" + name + ") failed: " + errno_text());
        close(fd);
        return s;
      }
      if (static_cast<size_t>(st.st_size) == L.total) break;
      if (st.st_size != 0) {
        close(fd);
        return invalid_argument("cpu communicator " + name + " holds " + std::to_string(st.st_size) +
                                " bytes but a world of " + std::to_string(o.world_size) + " ranks needs " +
                                std::to_string(L.total) + ": the ranks disagree on the world size");
      }
      if (Clock::now() >= deadline) {
        close(fd);
        return unavailable("rank 0 did not set up the cpu communicator " + name + " within " + t + " s");
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    base = mmap(nullptr, L.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return resource_exhausted("cpu communicator: cannot map " + name + ": " + errno_text());
    Header* h = header_of(base);
    while (h->ready.load(std::memory_order_acquire) != 1) {
      if (Clock::now() >= deadline) {
        munmap(base, L.total);
        return unavailable("rank 0 did not set up the cpu communicator " + name + " within " + t + " s");
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (h->magic != kMagic || h->version != kVersion || h->world != static_cast<uint32_t>(o.world_size) ||
        h->slot_bytes != static_cast<uint64_t>(kSlotBytes) || h->mailbox_bytes != static_cast<uint64_t>(kMailboxBytes) ||
        h->total_bytes != L.total) {
      munmap(base, L.total);
      return invalid_argument("cpu communicator " + name + " was made by another troupe build or for another world (" +
                              std::to_string(h->world) + " ranks, this rank expects " +
                              std::to_string(o.world_size) + ")");
    }
  }
  int32_t nobody = 0;
  if (!state_of(base, o.rank)->pid.compare_exchange_strong(nobody, static_cast<int32_t>(getpid()))) {
    munmap(base, L.total);
    if (o.rank == 0) shm_unlink(name.c_str());
    return invalid_argument("rank " + std::to_string(o.rank) + " of cpu communicator " + name +
                            " is already taken (pid " + std::to_string(nobody) + ")");
  }
  state_of(base, o.rank)->pid_ns.store(pid_namespace(), std::memory_order_release);
  header_of(base)->attached.fetch_add(1, std::memory_order_acq_rel);
  return std::unique_ptr<ShmCommunicator>(new ShmCommunicator(o, base, L.total, o.rank == 0));
}

ShmCommunicator::ShmCommunicator(ShmOptions options, void* base, size_t size, bool creator)
    : HostCommunicator(options.name, options.rank, options.world_size, std::numeric_limits<int64_t>::max()),
      options_(std::move(options)),
      base_(base),
      size_(size),
      creator_(creator),
      sent_(static_cast<size_t>(world_), 0),
      taken_(static_cast<size_t>(world_), 0) {
  maybe_unlink();
}

ShmCommunicator::~ShmCommunicator() {
  RankState* me = state_of(base_, rank_);
  me->pid.store(-1, std::memory_order_release);  // waiting peers learn at once that this rank left
  futex_wake(&me->arrived);
  futex_wake(&me->done);
  munmap(base_, size_);
  if (creator_ && !unlinked_) shm_unlink(options_.name.c_str());
}

uint8_t* ShmCommunicator::slot(int r) const {
  return static_cast<uint8_t*>(base_) + Layout(world_).slots + static_cast<size_t>(r) * kSlotBytes;
}
uint8_t* ShmCommunicator::mailbox_data(int src, int dst) const {
  return static_cast<uint8_t*>(base_) + Layout(world_).mail_data +
         static_cast<size_t>(src * world_ + dst) * kMailboxBytes;
}

void ShmCommunicator::maybe_unlink() {
  if (!creator_ || unlinked_) return;
  if (header_of(base_)->attached.load(std::memory_order_acquire) < static_cast<uint32_t>(world_)) return;
  // Every rank has mapped the segment: the name is no longer needed, and unlinking now leaves
  // nothing in /dev/shm whatever happens to the processes later.
  shm_unlink(options_.name.c_str());
  unlinked_ = true;
}

bool ShmCommunicator::peer_gone(int peer, int* pid) const {
  *pid = state_of(base_, peer)->pid.load(std::memory_order_acquire);
  if (*pid == -1) return true;  // it destroyed its communicator
  if (*pid <= 0) return false;  // not attached yet: only the deadline tells
  const uint64_t ns = state_of(base_, peer)->pid_ns.load(std::memory_order_acquire);
  if (ns == 0 || ns != pid_namespace()) return false;  // its pid means nothing here
  if (kill(*pid, 0) != 0 && errno == ESRCH) return true;
  // A process that has exited but is not reaped yet still answers kill(): read its state.
  std::ifstream stat("/proc/" + std::to_string(*pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

Status ShmCommunicator::wait_until(Wait what, int peer, const void* word_ptr, uint32_t target) {
  const auto* word = static_cast<const std::atomic<uint32_t>*>(word_ptr);
  auto reached = [&] { return static_cast<int32_t>(word->load(std::memory_order_acquire) - target) >= 0; };
  for (int i = 0; i < kSpins; ++i) {
    if (reached()) return {};
    TROUPE_SHM_RELAX();
  }
  const auto start = Clock::now();
  auto next_check = start + kPeerCheck;
  for (;;) {
    const uint32_t seen = word->load(std::memory_order_acquire);
    if (static_cast<int32_t>(seen - target) >= 0) return {};
    futex_wait(word, seen, kSleepSlice);
    if (reached()) return {};
    const auto now = Clock::now();
    if (now >= next_check) {
      next_check = now + kPeerCheck;
      int pid = 0;
      if (peer_gone(peer, &pid)) {
        if (reached()) return {};
        const std::string who =
            "rank " + std::to_string(peer) + (pid > 0 ? " (pid " + std::to_string(pid) + ")" : std::string());
        const std::string me = std::to_string(rank_);
        const std::string left = pid > 0 ? " exited" : " left the communicator";
        switch (what) {
          case Wait::collective: return unavailable(who + left + " before reaching the collective");
          case Wait::send: return unavailable(who + left + " before receiving from rank " + me);
          case Wait::recv: return unavailable(who + left + " before sending to rank " + me);
        }
      }
    }
    if (now - start >= options_.timeout) {
      if (reached()) return {};
      return timed_out(what, peer, options_.timeout);
    }
  }
}

template <class Write, class Read>
Status ShmCommunicator::round(uint64_t tag, Write&& write, Read&& read) {
  const uint32_t n = round_ + 1;
  // 1. Every rank has read the previous round: the slots are free.
  for (int r = 0; r < world_; ++r)
    if (r != rank_) TROUPE_RETURN_IF_ERROR(wait_until(Wait::collective, r, &state_of(base_, r)->done, n - 1));
  // 2. Publish this rank's part.
  RankState* me = state_of(base_, rank_);
  write(slot(rank_));
  me->tag = tag;
  me->arrived.store(n, std::memory_order_release);
  futex_wake(&me->arrived);
  // 3. Every rank has published the same op.
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    TROUPE_RETURN_IF_ERROR(wait_until(Wait::collective, r, &state_of(base_, r)->arrived, n));
    const uint64_t theirs = state_of(base_, r)->tag;
    if (theirs != tag)
      return internal_error("cpu communicator: rank " + std::to_string(r) + " runs " + tag_text(theirs) +
                            " while rank " + std::to_string(rank_) + " runs " + tag_text(tag));
  }
  // 4. Read, then release the slots.
  read();
  me->done.store(n, std::memory_order_release);
  futex_wake(&me->done);
  round_ = n;
  maybe_unlink();
  return {};
}

Status ShmCommunicator::run_all_reduce(float* x, int64_t count) {
  constexpr int64_t per_round = kSlotBytes / int64_t{sizeof(float)};
  std::vector<const float*> slots(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) slots[static_cast<size_t>(r)] = reinterpret_cast<const float*>(slot(r));
  for (int64_t off = 0; off < count; off += per_round) {
    const int64_t n = std::min(per_round, count - off);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    TROUPE_RETURN_IF_ERROR(round(
        make_tag(kAllReduce, 0, static_cast<int64_t>(bytes)), [&](uint8_t* mine) { std::memcpy(mine, x + off, bytes); },
        // The same additions in the same order (rank 0, 1, ...) on every rank: identical sums.
        [&] { ordered_sum(x + off, slots, n); }));
  }
  return {};
}

Status ShmCommunicator::run_reduce_scatter(const float* x, float* y, int64_t count) {
  const int64_t per_round = kSlotBytes / int64_t{sizeof(float)} / world_;  // each rank sends W pieces per round
  std::vector<const float*> pieces(static_cast<size_t>(world_));
  for (int64_t off = 0; off < count; off += per_round) {
    const int64_t n = std::min(per_round, count - off);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    TROUPE_RETURN_IF_ERROR(round(
        make_tag(kReduceScatter, 0, static_cast<int64_t>(bytes) * world_),
        [&](uint8_t* mine) {
          for (int q = 0; q < world_; ++q) std::memcpy(mine + q * bytes, x + q * count + off, bytes);
        },
        [&] {
          for (int r = 0; r < world_; ++r)
            pieces[static_cast<size_t>(r)] = reinterpret_cast<const float*>(slot(r) + rank_ * bytes);
          ordered_sum(y + off, pieces, n);
        }));
  }
  return {};
}

Status ShmCommunicator::run_gather(const uint8_t* in, uint8_t* out, int64_t bytes, int root) {
  const uint64_t op = root < 0 ? kAllGather : kGather;
  for (int64_t off = 0; off < bytes; off += kSlotBytes) {
    const auto n = static_cast<size_t>(std::min(kSlotBytes, bytes - off));
    TROUPE_RETURN_IF_ERROR(round(
        make_tag(op, std::max(root, 0), static_cast<int64_t>(n)), [&](uint8_t* mine) { std::memcpy(mine, in + off, n); },
        [&] {
          if (root >= 0 && rank_ != root) return;
          for (int r = 0; r < world_; ++r) std::memcpy(out + r * bytes + off, slot(r), n);
        }));
  }
  return {};
}

Status ShmCommunicator::run_broadcast(uint8_t* x, int64_t bytes, int root) {
  for (int64_t off = 0; off < bytes; off += kSlotBytes) {
    const auto n = static_cast<size_t>(std::min(kSlotBytes, bytes - off));
    TROUPE_RETURN_IF_ERROR(round(
        make_tag(kBroadcast, root, static_cast<int64_t>(n)),
        [&](uint8_t* mine) {
          if (rank_ == root) std::memcpy(mine, x + off, n);
        },
        [&] {
          if (rank_ != root) std::memcpy(x + off, slot(root), n);
        }));
  }
  return {};
}

Status ShmCommunicator::run_send(const uint8_t* src, int64_t bytes, int peer) {
  auto* box = reinterpret_cast<Mailbox*>(static_cast<uint8_t*>(base_) + Layout(world_).mailboxes) +
              (rank_ * world_ + peer);
  uint8_t* data = mailbox_data(rank_, peer);
  for (int64_t off = 0; off < bytes; off += kMailboxBytes) {
    const auto n = static_cast<size_t>(std::min(kMailboxBytes, bytes - off));
    // The mailbox is free once the receiver has taken every chunk sent so far.
    TROUPE_RETURN_IF_ERROR(wait_until(Wait::send, peer, &box->taken, sent_[peer]));
    std::memcpy(data, src + off, n);
    box->chunk_bytes = n;
    box->message_bytes = static_cast<uint64_t>(bytes);
    box->sent.store(++sent_[peer], std::memory_order_release);
    futex_wake(&box->sent);
  }
  maybe_unlink();
  return {};
}

Status ShmCommunicator::run_recv(uint8_t* dst, int64_t bytes, int peer) {
  auto* box = reinterpret_cast<Mailbox*>(static_cast<uint8_t*>(base_) + Layout(world_).mailboxes) +
              (peer * world_ + rank_);
  const uint8_t* data = mailbox_data(peer, rank_);
  for (int64_t off = 0; off < bytes; off += kMailboxBytes) {
    const auto n = static_cast<size_t>(std::min(kMailboxBytes, bytes - off));
    TROUPE_RETURN_IF_ERROR(wait_until(Wait::recv, peer, &box->sent, taken_[peer] + 1));
    if (box->message_bytes != static_cast<uint64_t>(bytes) || box->chunk_bytes != n)
      return internal_error("cpu communicator: rank " + std::to_string(peer) + " sent a message of " +
                            std::to_string(box->message_bytes) + " bytes, rank " + std::to_string(rank_) +
                            " expected " + std::to_string(bytes));
    std::memcpy(dst + off, data, n);
    box->taken.store(++taken_[peer], std::memory_order_release);
    futex_wake(&box->taken);
  }
  maybe_unlink();
  return {};
}

Result<std::unique_ptr<DeviceCommunicator>> ShmCommunicator::make_group(const std::vector<int>& ranks, int index,
                                                                       int k) {
  std::string name = options_.name + ".g" + std::to_string(k);
  for (size_t i = 0; i < ranks.size(); ++i) {
    name.push_back(i ? '_' : '-');
    name.append(std::to_string(ranks[i]));
  }
  ShmOptions o;
  o.name = name;
  o.world_size = static_cast<int>(ranks.size());
  o.rank = index;
  o.timeout = options_.timeout;
  auto group = create(o);
  if (!group.ok()) return group.status();
  return std::unique_ptr<DeviceCommunicator>(std::move(*group));
}

}  // namespace troupe::cpu
