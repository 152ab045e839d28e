// What the emulator's NCCL files share (nccl_comm.cpp: communicators, errors, version;
// nccl.cpp: the all-reduce, groups, the hazard checks). Private to the runtime; tested by
// tests/sim/test_sim_nccl.cu. The model: sim/docs/nccl.md.
#pragma once
#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "internal.h"
#include "nccl.h"

namespace sim::detail {

struct NcclOp;

// A communicator's state. The handle (struct ncclComm) owns one reference; every posted
// operation another, so ncclCommAbort can drop the handle while a stream still holds work.
struct NcclState {
  MPI_Comm comm = MPI_COMM_NULL;  // the emulator's own (MPI_Comm_split of MPI_COMM_WORLD)
  int nranks = 0, rank = 0, device = 0;
  std::atomic<bool> aborted{false};
  std::atomic<int> async_error{ncclSuccess};
  std::mutex m;
  std::vector<std::shared_ptr<NcclOp>> ops;  // posted and not yet completed or abandoned
};

// Refuses a call: records "call: why" for ncclGetLastError and, in abort mode only (as the
// emulator's CUDA refusals do), prints "sim: <call> returned <result>: <why>". Returns r.
ncclResult_t nccl_refuse(ncclResult_t r, const char* call, const char* why_fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char* nccl_result_name(ncclResult_t r);

// ncclCommDestroy: runs the streams up to every queued operation of st, then waits for the
// MPI side of any whose queue item was dropped (cudaDeviceReset); blocks only where the
// operation's peers have not posted it.
void nccl_complete_all(NcclState& st);
// ncclCommAbort: every operation of st abandoned (no MPI call; its queue item does nothing).
void nccl_abandon_all(NcclState& st);

}  // namespace sim::detail

struct ncclComm {
  std::shared_ptr<sim::detail::NcclState> st;
};
