// The emulator's NCCL, part 1: unique ids, communicators over MPI, errors and the version.
// A communicator is an MPI communicator of the emulator's own, made by MPI_Comm_split of
// MPI_COMM_WORLD keyed by the unique id and ordered by the rank argument, so its messages never
// match the program's own MPI calls. ncclCommInitRank refuses two ranks on one emulated device
// of one host ("Duplicate GPU detected", as NCCL does). The all-reduce and groups: nccl.cpp.
// Model and limits: sim/docs/nccl.md; tests: tests/sim/test_sim_nccl.cu.
// Built where <mpi.h> is found (the project's Makefile compiles it with mpicxx); simcc's own
// runtime for standalone programs, compiled with g++, has no NCCL.
#if __has_include(<mpi.h>)
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <random>

#include "nccl_internal.h"
#include "sim/sim_api.h"

namespace sim::detail {

namespace {
constexpr char kIdMagic[8] = {'s', 'i', 'm', 'n', 'c', 'c', 'l', '\0'};
thread_local std::string tl_nccl_error;

// What each rank tells the others at ncclCommInitRank.
struct RankInfo {
  int rank, device, bus;
  char host[MPI_MAX_PROCESSOR_NAME];
};

int id_color(const ncclUniqueId& id) {  // MPI_Comm_split's colour: non-negative
  uint64_t h = 1469598103934665603ull;
  for (char c : id.internal) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<int>((h ^ (h >> 32)) & 0x7fffffff);
}

// The refusal every rank reaches from the same gathered table, or ncclSuccess.
ncclResult_t check_ranks(const std::vector<RankInfo>& all, int nranks) {
  const char* call = "ncclCommInitRank";
  if (static_cast<int>(all.size()) != nranks)
    return nccl_refuse(ncclInvalidUsage, call, "%zu processes called it with this unique id, but nranks is %d",
                       all.size(), nranks);
  for (int i = 0; i < nranks; ++i)
    if (all[i].rank != i)
      return nccl_refuse(ncclInvalidUsage, call, "two processes passed rank %d (each rank must be passed once)",
                         all[i].rank);
  for (int i = 0; i < nranks; ++i)
    for (int j = i + 1; j < nranks; ++j)
      if (all[i].bus == all[j].bus && std::strcmp(all[i].host, all[j].host) == 0)
        return nccl_refuse(ncclInvalidUsage, call,
                           "Duplicate GPU detected: rank %d and rank %d both on device %d (PCI bus %d) of "
                           "host %s; give each rank its own device (cudaSetDevice, SIM_DEVICES)",
                           i, j, all[j].device, all[j].bus + 1, all[j].host);
  return ncclSuccess;
}

ncclResult_t check_mpi(const char* call) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (!up || down)
    return nccl_refuse(ncclInvalidUsage, call, "MPI is %s: the emulator's NCCL runs over MPI",
                       up ? "finalized" : "not initialized");
  return ncclSuccess;
}
}  // namespace

const char* nccl_result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult?";
  }
}

ncclResult_t nccl_refuse(ncclResult_t r, const char* call, const char* why_fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, why_fmt);
  std::vsnprintf(buf, sizeof buf, why_fmt, ap);
  va_end(ap);
  tl_nccl_error = std::string(call) + ": " + buf;
  if (settings().fault_mode == FaultMode::Abort)
    std::fprintf(stderr, "sim: %s returned %s: %s\n", call, nccl_result_name(r), buf);
  return r;
}

}  // namespace sim::detail

using namespace sim::detail;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return nccl_refuse(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// The emulator keeps the last refusal's reason per host thread, whatever the communicator.
const char* ncclGetLastError(ncclComm_t) { return tl_nccl_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return nccl_refuse(ncclInvalidArgument, "ncclGetUniqueId", "uniqueId is NULL");
  static std::atomic<uint64_t> counter{0};
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdMagic, sizeof kIdMagic);
  std::random_device rd;
  const uint64_t words[4] = {(uint64_t(rd()) << 32) ^ rd(), static_cast<uint64_t>(getpid()), counter.fetch_add(1),
                             static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  std::memcpy(id->internal + sizeof kIdMagic, words, sizeof words);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  const char* call = "ncclCommInitRank";
  if (!comm) return nccl_refuse(ncclInvalidArgument, call, "comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return nccl_refuse(ncclInvalidArgument, call, "rank %d is out of range for nranks %d", rank, nranks);
  if (std::memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0)
    return nccl_refuse(ncclInvalidArgument, call, "the unique id was not made by ncclGetUniqueId");
  if (const ncclResult_t r = check_mpi(call)) return r;
  RankInfo me{};
  me.rank = rank;
  if (cudaGetDevice(&me.device) != cudaSuccess)
    return nccl_refuse(ncclUnhandledCudaError, call, "cudaGetDevice failed");
  me.bus = settings().bus[me.device];
  int len = 0;
  MPI_Get_processor_name(me.host, &len);
  MPI_Comm c = MPI_COMM_NULL;
  if (MPI_Comm_split(MPI_COMM_WORLD, id_color(id), rank, &c) != MPI_SUCCESS)
    return nccl_refuse(ncclSystemError, call, "MPI_Comm_split failed");
  int size = 0;
  MPI_Comm_size(c, &size);
  std::vector<RankInfo> all(static_cast<size_t>(size));
  MPI_Allgather(&me, sizeof me, MPI_BYTE, all.data(), sizeof me, MPI_BYTE, c);
  if (const ncclResult_t r = check_ranks(all, nranks)) {
    MPI_Comm_free(&c);
    return r;
  }
  auto* h = new ncclComm{std::make_shared<NcclState>()};
  h->st->comm = c;
  h->st->nranks = nranks;
  h->st->rank = rank;
  h->st->device = me.device;
  *comm = h;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // as NCCL: destroying NULL does nothing
  NcclState& st = *comm->st;
  if (!st.aborted.load()) {
    nccl_complete_all(st);
    int down = 0;
    MPI_Finalized(&down);
    if (!down) MPI_Comm_free(&st.comm);
  }
  delete comm;
  return ncclSuccess;
}

// Never waits for a peer and makes no MPI call: the communicator's operations are abandoned
// (their queue items do nothing; their MPI requests and communicator are left to the process's
// end), so it is safe from another thread while this one is blocked in MPI_Wait.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  nccl_abandon_all(*comm->st);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!comm || !async_error)
    return nccl_refuse(ncclInvalidArgument, "ncclCommGetAsyncError", "%s is NULL", comm ? "asyncError" : "comm");
  *async_error = static_cast<ncclResult_t>(comm->st->async_error.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm || !count) return nccl_refuse(ncclInvalidArgument, "ncclCommCount", "%s is NULL", comm ? "count" : "comm");
  *count = comm->st->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!comm || !device)
    return nccl_refuse(ncclInvalidArgument, "ncclCommCuDevice", "%s is NULL", comm ? "device" : "comm");
  *device = comm->st->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm || !rank) return nccl_refuse(ncclInvalidArgument, "ncclCommUserRank", "%s is NULL", comm ? "rank" : "comm");
  *rank = comm->st->rank;
  return ncclSuccess;
}

}  // extern "C"

#endif  // __has_include(<mpi.h>)
