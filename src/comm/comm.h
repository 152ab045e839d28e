// The communication layer: the only code in the project that calls MPI.
// Session owns MPI_Init/Finalize; the helpers reduce, broadcast, gather and scatter plain
// values and byte blocks (the training shards, scattered once).
// Tested by tests/comm/test_comm.cpp at 1-4 ranks (make test).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace nn::comm {

// RAII MPI session. Constructing it initialises MPI (once per process); destroying it
// finalises. Errors inside MPI abort the job (MPI_ERRORS_ARE_FATAL), as an internal fault.
class Session {
 public:
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

int rank();
int size();
// Rank within the node (MPI_COMM_TYPE_SHARED): the index to choose a GPU with. Found once,
// collectively, when the Session starts (without one: at the first call, on every rank).
int local_rank();
// Ranks on this node (the same communicator): how many share its cores (--device cpu).
int local_size();
std::string processor_name();

// True on every rank iff `ok` is true on every rank.
bool all_ok(bool ok);
// Element-wise logical OR over ranks, in place (all ranks pass the same length).
void any_of_each(std::vector<int>& flags);
// Element-wise maximum over ranks, in place (MPI_MAX; all ranks pass the same length).
void max_each(std::vector<int>& values);
// Sums over ranks, in place.
void sum(std::vector<double>& values);
void sum(std::vector<float>& values);
std::uint64_t sum(std::uint64_t value);
// Rank 0's string reaches every rank.
std::string broadcast(const std::string& s);

// ---- the gradient's sums: the exchange engines' MPI calls (gradients.cpp) ----
// Each sums n values over the ranks in place and returns a Request: complete on return for the
// blocking ones (wait() is then free), in flight for iallreduce_sum. V is float, double or
// std::uint64_t (integers add modulo 2^64, so a sum of them is exact and any order gives the
// same bits). Every rank passes the same n; buffers longer than INT_MAX values go in several
// calls. Host or pinned memory, or device memory with a CUDA-aware MPI (mpi_buffer.h).
class Request {
 public:
  Request();  // complete
  ~Request();  // waits, so a request is never abandoned with its buffer still in use
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  bool test();  // lets MPI progress it (call it while the host waits for something else)
  void wait();
  struct Impl;  // MPI's handles; defined in gradients.cpp only
  Impl& impl();

 private:
  std::unique_ptr<Impl> impl_;
};
// MPI_Allreduce (MPI_IN_PLACE, MPI_SUM), blocking.
template <class V>
Request allreduce_sum(V* buf, std::size_t n);
// MPI_Iallreduce: the buffer must stay untouched until wait() returns. Its result is bitwise the
// same whether waited for at once or later, but not always MPI_Allreduce's: Open MPI's blocking
// and nonblocking all-reduce add in other orders at 3 or more ranks.
template <class V>
Request iallreduce_sum(V* buf, std::size_t n);
// Parameter server over point-to-point messages: every rank sends its n values to rank 0,
// which adds them in rank order (so the result is deterministic and the same for any split of
// the buffer) and sends the sum back. Blocking.
template <class V>
Request ps_sum(V* buf, std::size_t n);

// How a region of the gradient is summed, chosen once for a run: start() begins a sum that
// wait() completes (the parameter server's is complete at once), now() sums before it returns.
// range: the NVTX range of an exchange's sums, as the course's profiles name it.
template <class V>
struct Reduction {
  Request (*start)(V* buf, std::size_t n);
  Request (*now)(V* buf, std::size_t n);
  const char* range;
};
// --strategy allreduce: start = MPI_Iallreduce, now = MPI_Allreduce.
template <class V>
Reduction<V> allreduce_reduction() {
  return {&iallreduce_sum<V>, &allreduce_sum<V>, "MPI_Allreduce"};
}
// --strategy ps: the parameter server, both ways.
template <class V>
Reduction<V> ps_reduction() {
  return {&ps_sum<V>, &ps_sum<V>, "MPI_Send/MPI_Recv parameter server"};
}

// ---- what the other strategies need (strategies.cpp) ----
// Every rank's values, concatenated in rank order, on rank 0 (empty elsewhere). The counts
// may differ per rank (model parallelism: each rank's slice of the hidden layer).
std::vector<double> gather_to_root(const std::vector<double>& mine);
// Can MPI read and write device memory (CUDA-aware MPI, MPIX_Query_cuda_support)?
// "" if yes, else why not. The emulator build models a CUDA-aware MPI (src/comm/mpi_buffer.h)
// unless SIM_MPI_CUDA_AWARE=0 pretends otherwise (to test the refusal).
std::string device_pointer_support();

// ---- memory the ranks of one node share (MPI-3 shared windows; src/comm/node_shared.cpp) ----
// True when every rank of the job runs on this node (MPI_COMM_TYPE_SHARED spans them all).
// Collective: every rank calls it.
bool one_node();
// A window of memory that every rank maps: this rank brings `bytes` of it (0 allowed: of(q) is
// then null) and of(q) is rank q's part as this process sees it, page-aligned, at least the
// bytes asked for. Collective over all ranks, which must all be on this node (one_node()). sync() is the
// fence between writers and readers: every rank's stores before it are seen by every rank
// after it (MPI_Win_sync, MPI_Barrier, MPI_Win_sync under a lock_all epoch). Freed by the
// destructor (collective too: every rank destroys its NodeShared at the same point).
class NodeShared {
 public:
  explicit NodeShared(std::size_t bytes);
  ~NodeShared();
  NodeShared(const NodeShared&) = delete;
  NodeShared& operator=(const NodeShared&) = delete;
  void* of(int rank) const;
  void* mine() const { return of(my_rank_); }
  void sync() const;
  // MPI_Win_sync alone: a memory fence. fence(); a collective every rank is in; fence() is
  // sync() with that collective as its barrier.
  void fence() const;
  struct Impl;  // MPI's handles; node_shared.cpp only

 private:
  std::unique_ptr<Impl> impl_;
  int my_rank_ = 0;
};

// Rank 0's n bytes at p reach every rank (p must hold n bytes everywhere); chunked past INT_MAX.
void broadcast_bytes(void* p, std::size_t n);
// Rank 0's vector (length and contents) reaches every rank.
void broadcast(std::vector<double>& v);
// Rank 0's value of a trivially copyable object reaches every rank.
template <class T>
T broadcast_value(T v) {
  static_assert(std::is_trivially_copyable_v<T>, "broadcast_value needs a trivially copyable type");
  broadcast_bytes(&v, sizeof v);
  return v;
}
// Scatter of variable-sized byte blocks from rank 0: on rank 0, counts_on_root[r] bytes
// for rank r, packed in rank order in send_on_root (other ranks pass empty vectors).
// Returns this rank's block. MPI_Scatterv when every count and offset fits an int, else
// point-to-point messages of at most INT_MAX bytes.
std::vector<std::uint8_t> scatterv_bytes(const std::vector<std::uint8_t>& send_on_root,
                                         const std::vector<std::size_t>& counts_on_root);
// Every rank's string, in rank order, on rank 0 (empty vector elsewhere).
std::vector<std::string> gather_strings(const std::string& mine);
void barrier();
// The blocking MPI call this process is in right now, for the step timeout (src/train/
// watchdog.h): call is nullptr when none; peer is the rank a point-to-point receive waits for
// (-1 for a collective); seconds since it began. Safe to call from any thread.
struct Waiting {
  const char* call = nullptr;
  int peer = -1;
  double seconds = 0;
};
Waiting waiting_in();
// Ends the whole job at once (internal fault on one rank).
[[noreturn]] void abort_job(int code);

}  // namespace nn::comm
