// Thin RAII and helper layer over MPI (the only MPI user in the project): the session, the
// ranks' places, small reductions of flags and sums, broadcasts, the shards' scatter. The
// gradient's sums are in gradients.cpp. Tested by tests/comm/test_comm.cpp under mpirun at 1-4 ranks.
#include "comm/comm.h"
#include "comm/mpi_buffer.h"
#include "comm/mpi_check.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// Under AddressSanitizer (make SANITIZE=1), LeakSanitizer ignores what Open MPI allocates
// inside MPI_Init and MPI_Finalize: Open MPI keeps it until exit on purpose, and its plugins
// are dlclosed at finalize, so a suppression file could not name them. Our own allocations
// stay checked (tests run leak detection at 1 rank).
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define NN_LSAN_IGNORE_BEGIN() __lsan_disable()
#define NN_LSAN_IGNORE_END() __lsan_enable()
#else
#define NN_LSAN_IGNORE_BEGIN() ((void)0)
#define NN_LSAN_IGNORE_END() ((void)0)
#endif

namespace nn::comm {
using detail::check;
using detail::kMaxCount;

namespace {
// This rank's place on its node (MPI_COMM_TYPE_SHARED), found once: the split is collective.
struct NodeRanks {
  int rank = -1, size = 0;
};
NodeRanks g_node;
void find_node_ranks() {
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  NodeRanks n;
  check(MPI_Comm_rank(node, &n.rank), "MPI_Comm_rank");
  check(MPI_Comm_size(node, &n.size), "MPI_Comm_size");
  MPI_Comm_free(&node);
  g_node = n;
}
}  // namespace

Session::Session(int* argc, char*** argv) {
  int done = 0;
  MPI_Initialized(&done);
  if (!done) {
    NN_LSAN_IGNORE_BEGIN();
    const int rc = MPI_Init(argc, argv);
    NN_LSAN_IGNORE_END();
    check(rc, "MPI_Init");
  }
  find_node_ranks();  // every rank, at startup: local_rank() and local_size() never call MPI again
}

Session::~Session() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) {
    NN_LSAN_IGNORE_BEGIN();
    MPI_Finalize();
    NN_LSAN_IGNORE_END();
  }
}

int rank() {
  int r = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}

int size() {
  int n = 1;
  check(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size");
  return n;
}

int local_rank() {
  if (g_node.rank < 0) find_node_ranks();  // no Session: collective on this first call
  return g_node.rank;
}

int local_size() {
  if (g_node.rank < 0) find_node_ranks();
  return g_node.size;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  return std::string(name, static_cast<std::size_t>(len));
}

bool all_ok(bool ok) {
  int v = ok ? 1 : 0;
  check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD)), "MPI_Allreduce");
  return v != 0;
}

void any_of_each(std::vector<int>& flags) {
  if (flags.empty()) return;
  check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, flags.data(), static_cast<int>(flags.size()), MPI_INT, MPI_LOR,
                      MPI_COMM_WORLD)),
        "MPI_Allreduce");
}

void max_each(std::vector<int>& values) {
  if (values.empty()) return;
  check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT,
                                                     MPI_MAX, MPI_COMM_WORLD)),
        "MPI_Allreduce");
}

void sum(std::vector<double>& v) {
  if (v.empty()) return;
  check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD)),
        "MPI_Allreduce");
}

void sum(std::vector<float>& v) {
  if (v.empty()) return;
  check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD)),
        "MPI_Allreduce");
}

std::uint64_t sum(std::uint64_t value) {
  check((detail::Busy("MPI_Allreduce"), MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD)),
        "MPI_Allreduce");
  return value;
}

std::string broadcast(const std::string& s) {
  unsigned long long n = s.size();
  check((detail::Busy("MPI_Bcast"), MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD)), "MPI_Bcast");
  std::string out = s;
  out.resize(n);
  if (n > 0)
    check((detail::Busy("MPI_Bcast"), MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD)), "MPI_Bcast");
  return out;
}


void broadcast_bytes(void* p, std::size_t n) {
  auto* b = static_cast<unsigned char*>(p);
  for (std::size_t done = 0; done < n;) {
    const std::size_t m = std::min(kMaxCount, n - done);
    check((detail::Busy("MPI_Bcast"), MPI_Bcast(detail::mpi_buffer(b + done), static_cast<int>(m), MPI_BYTE, 0, MPI_COMM_WORLD)),
          "MPI_Bcast");
    done += m;
  }
}

void broadcast(std::vector<double>& v) {
  const std::uint64_t n = broadcast_value<std::uint64_t>(v.size());
  v.resize(n);
  broadcast_bytes(v.data(), n * sizeof(double));
}

namespace {

// Rank 0's scatter arguments: one count per rank, summing to the buffer's size. A mismatch is
// a programming error, so the job aborts. Returns the counts (zeros on the other ranks).
std::vector<std::uint64_t> root_counts(const std::vector<std::uint8_t>& send_on_root,
                                       const std::vector<std::size_t>& counts_on_root) {
  const int p = size();
  std::vector<std::uint64_t> counts(p, 0);
  if (rank() != 0) return counts;
  if (counts_on_root.size() != static_cast<std::size_t>(p)) {
    std::fprintf(stderr, "internal error: scatterv_bytes: %zu counts for %d ranks\n",
                 counts_on_root.size(), p);
    abort_job(4);
  }
  std::uint64_t total = 0;
  for (int r = 0; r < p; ++r) total += counts[r] = counts_on_root[r];
  if (total != send_on_root.size()) {
    std::fprintf(stderr, "internal error: scatterv_bytes: counts sum to %llu, buffer has %zu\n",
                 static_cast<unsigned long long>(total), send_on_root.size());
    abort_job(4);
  }
  return counts;
}

// Past 2 GiB: rank 0 sends each rank its block in INT_MAX-byte messages, in order.
void scatter_in_pieces(const std::vector<std::uint8_t>& send_on_root,
                       const std::vector<std::uint64_t>& counts, std::vector<std::uint8_t>& mine) {
  const int p = size();
  if (rank() != 0) {
    for (std::size_t done = 0; done < mine.size();) {
      const std::size_t m = std::min(kMaxCount, mine.size() - done);
      check((detail::Busy("MPI_Recv", 0), MPI_Recv(mine.data() + done, static_cast<int>(m), MPI_BYTE, 0, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE)),
            "MPI_Recv");
      done += m;
    }
    return;
  }
  if (counts[0]) std::memcpy(mine.data(), send_on_root.data(), counts[0]);
  std::size_t off = counts[0];
  for (int r = 1; r < p; ++r) {
    for (std::size_t done = 0; done < counts[r];) {
      const std::size_t m = std::min<std::size_t>(kMaxCount, counts[r] - done);
      check((detail::Busy("MPI_Send", r), MPI_Send(send_on_root.data() + off + done, static_cast<int>(m), MPI_BYTE, r, 0,
                     MPI_COMM_WORLD)),
            "MPI_Send");
      done += m;
    }
    off += counts[r];
  }
}

}  // namespace

std::vector<std::uint8_t> scatterv_bytes(const std::vector<std::uint8_t>& send_on_root,
                                         const std::vector<std::size_t>& counts_on_root) {
  const int p = size(), me = rank();
  std::vector<std::uint64_t> counts = root_counts(send_on_root, counts_on_root);
  broadcast_bytes(counts.data(), counts.size() * sizeof(std::uint64_t));
  std::uint64_t total = 0;
  for (const std::uint64_t c : counts) total += c;
  std::vector<std::uint8_t> mine(counts[me]);
  if (total > kMaxCount) {
    scatter_in_pieces(send_on_root, counts, mine);
    return mine;
  }
  // The common case: one collective (offsets are at most total, so they fit too).
  std::vector<int> icounts(p), displs(p);
  int off = 0;
  for (int r = 0; r < p; ++r) {
    icounts[r] = static_cast<int>(counts[r]);
    displs[r] = off;
    off += icounts[r];
  }
  check((detail::Busy("MPI_Scatterv"), MPI_Scatterv(me == 0 ? send_on_root.data() : nullptr, icounts.data(), displs.data(),
                     MPI_BYTE, mine.data(), icounts[me], MPI_BYTE, 0, MPI_COMM_WORLD)),
        "MPI_Scatterv");
  return mine;
}

std::vector<std::string> gather_strings(const std::string& mine) {
  const int p = size(), me = rank();
  int len = static_cast<int>(std::min(mine.size(), kMaxCount));
  std::vector<int> lens(me == 0 ? p : 0), displs(me == 0 ? p : 0);
  check((detail::Busy("MPI_Gather"), MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD)), "MPI_Gather");
  std::string all;
  if (me == 0) {
    std::size_t total = 0;
    for (int r = 0; r < p; ++r) {
      displs[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(lens[r]);
    }
    all.resize(total);
  }
  check((detail::Busy("MPI_Gatherv"), MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                    0, MPI_COMM_WORLD)),
        "MPI_Gatherv");
  std::vector<std::string> out;
  for (int r = 0; me == 0 && r < p; ++r) out.push_back(all.substr(displs[r], lens[r]));
  return out;
}

void barrier() { check((detail::Busy("MPI_Barrier"), MPI_Barrier(MPI_COMM_WORLD)), "MPI_Barrier"); }

// What Busy marks, read by the step timeout's thread (src/train/watchdog.cpp).
namespace {
std::atomic<const char*> g_call{nullptr};
std::atomic<int> g_peer{-1};
std::atomic<long long> g_since_ns{0};

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

detail::Busy::Busy(const char* call, int peer)
    : call_(g_call.load(std::memory_order_acquire)),
      peer_(g_peer.load(std::memory_order_relaxed)),
      since_ns_(g_since_ns.load(std::memory_order_relaxed)) {
  g_since_ns.store(now_ns(), std::memory_order_relaxed);
  g_peer.store(peer, std::memory_order_relaxed);
  g_call.store(call, std::memory_order_release);
}

detail::Busy::~Busy() {
  g_call.store(nullptr, std::memory_order_release);
  g_since_ns.store(since_ns_, std::memory_order_relaxed);
  g_peer.store(peer_, std::memory_order_relaxed);
  g_call.store(call_, std::memory_order_release);
}

Waiting waiting_in() {
  Waiting w;
  w.call = g_call.load(std::memory_order_acquire);
  w.peer = g_peer.load(std::memory_order_relaxed);
  if (w.call) w.seconds = double(now_ns() - g_since_ns.load(std::memory_order_relaxed)) * 1e-9;
  return w;
}

void abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

}  // namespace nn::comm
