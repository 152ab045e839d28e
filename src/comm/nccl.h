// NCCL, the GPU's own all-reduce (--comm nccl; src/exchange/nccl.h is its engine): one
// communicator over every rank of the job, made from MPI (rank 0's unique id broadcast over
// MPI_COMM_WORLD), summing device memory in the order of a CUDA stream, no host copy. Which NCCL
// is the build's: NVIDIA's where the CUDA build found one (NN_HAVE_NCCL, .ci/deps.sh), the
// emulator's in the emulator build (sim/include/nccl.h, sim/docs/nccl.md). A CUDA build without
// one refuses --comm nccl in one line. No CUDA or NCCL type in this header: streams are void*.
// Tested by tests/comm/test_nccl.cpp at 1-4 ranks (make test) and, on a GPU, at one rank.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "comm/comm.h"

namespace nn::comm {

// "" when --comm nccl can run in this build, else why not (one line).
std::string nccl_support();
// NCCL's version as ncclGetVersion reports it ("2.21.5"), or "" without NCCL.
std::string nccl_version();
// What the header and the report call it: "NCCL 2.21.5", or "the emulator's NCCL 2.21.0".
std::string nccl_name();

// The job's communicator (one at a time). open() is collective: every rank calls it with its
// CUDA device selected. It refuses two ranks on one GPU of one host (UserError, the same line on
// every rank) before NCCL starts: NCCL itself cannot run them.
class Nccl {
 public:
  static std::unique_ptr<Nccl> open();
  ~Nccl();  // ncclCommDestroy (the step timeout aborts a hung one instead: abort_nccl)
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;

  // Queues the sum of n values at buf (device memory; V float, double or uint64_t) over the
  // ranks, in place, on stream (a cudaStream_t). Every rank queues the same sums in the same order.
  template <class V>
  void sum_on(V* buf, std::size_t n, void* stream);
  // The host waits for stream (marked as waiting in ncclAllReduce for the step timeout's
  // message: comm::waiting_in), then checks the communicator's asynchronous error.
  void wait(void* stream);
  // n values in host memory summed through a device buffer of the communicator's: copied up,
  // summed, copied down, before it returns (--exact on's words, comm::nccl_reduction).
  template <class V>
  void sum_host(V* buf, std::size_t n);

  struct Impl;  // NCCL's and CUDA's handles; nccl.cpp only

 private:
  Nccl() = default;
  std::unique_ptr<Impl> impl_;
};

// The open communicator's sum_host as a Reduction (comm.h): --exact on's words under --comm nccl.
// Needs an open communicator (its calls throw without one).
template <class V>
Reduction<V> nccl_reduction();

// The step timeout's last act before it ends the job: ncclCommAbort of the open communicator
// (never a destroy, which waits for the hung peers). Safe from any thread; nothing without one.
void abort_nccl();

}  // namespace nn::comm
