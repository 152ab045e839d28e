// The emulator's NCCL, part 2: ncclAllReduce, groups and the hazards a GPU hides.
// When the all-reduce is issued (its call, or ncclGroupEnd), its stream's earlier work runs (an
// eager but legal schedule), the send bytes are copied and MPI_Iallreduce is posted on the
// communicator at once; the stream's queue item, when the stream reaches it, waits for it and
// writes recv. So a rank whose stream is lazy never holds back its peers: Open MPI progresses
// the posted collective inside any blocking MPI call, as a GPU progresses NCCL without the host.
// Between the call and the item the buffers are watched: a change of the send (or recv) bytes
// is a fault, and recv counts as not written, so a kernel or queued copy reading it first is a
// fault naming the all-reduce. Model and limits: sim/docs/nccl.md; tests/sim/test_sim_nccl.cu.
// Built where <mpi.h> is found (the project's Makefile compiles it with mpicxx); simcc's own
// runtime for standalone programs, compiled with g++, has no NCCL.
#if __has_include(<mpi.h>)
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>

#include "nccl_internal.h"

namespace sim::detail {

struct NcclOp {
  std::shared_ptr<NcclState> st;
  const void* send;  // the program's addresses
  void* recv;
  char *send_view = nullptr, *recv_view = nullptr;
  size_t count = 0, bytes = 0;
  ncclDataType_t type;
  ncclRedOp_t op;
  cudaStream_t stream;
  const void* pc;  // the call site
  std::vector<char> send_snap, recv_snap, result;
  std::vector<MPI_Request> reqs;
  unsigned long long seq = 0;  // position in the stream's queue (0: not queued)
  bool watched = false;        // in g_watched: recv marked unwritten, buffers compared at the item
  std::atomic<int> state{0};   // 0 posted, 1 completed, 2 abandoned or dropped
};

namespace {
std::mutex g_watch_mutex;
std::vector<NcclOp*> g_watched;  // queued operations whose item has not run

const char* type_name(ncclDataType_t t) {
  static const char* const names[] = {"ncclInt8",  "ncclUint8",   "ncclInt32",   "ncclUint32",  "ncclInt64",
                                      "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
  return t >= 0 && t < ncclNumTypes ? names[t] : "ncclDataType?";
}
const char* op_name(ncclRedOp_t o) {
  static const char* const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
  return o >= 0 && o < ncclNumOps ? names[o] : "ncclRedOp?";
}
MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;  // ncclFloat16, ncclBfloat16: not emulated
  }
}
size_t type_size(ncclDataType_t t) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return t >= 0 && t < ncclNumTypes ? sizes[t] : 0;
}
MPI_Op mpi_op(ncclRedOp_t o) {
  switch (o) {
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_SUM;  // ncclSum; ncclAvg: the sum, divided when it completes
  }
}
template <class T>
void divide(char* p, size_t n, int by) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    v = static_cast<T>(v / static_cast<T>(by));
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
  }
}
void average(NcclOp& o) {
  char* p = o.result.data();
  const int n = o.st->nranks;
  switch (o.type) {
    case ncclInt8: return divide<int8_t>(p, o.count, n);
    case ncclUint8: return divide<uint8_t>(p, o.count, n);
    case ncclInt32: return divide<int32_t>(p, o.count, n);
    case ncclUint32: return divide<uint32_t>(p, o.count, n);
    case ncclInt64: return divide<int64_t>(p, o.count, n);
    case ncclUint64: return divide<uint64_t>(p, o.count, n);
    case ncclFloat32: return divide<float>(p, o.count, n);
    case ncclFloat64: return divide<double>(p, o.count, n);
    default: return;
  }
}

std::string describe(const NcclOp& o) {
  const std::string at = code_line(o.pc);
  return strf("ncclAllReduce(%p, %p, %zu, %s, %s) on stream %p%s%s", o.send, o.recv, o.count, type_name(o.type),
              op_name(o.op), static_cast<void*>(o.stream), at.empty() ? "" : " called at ", at.c_str());
}

// checks.cpp's g_pending_write: the queued all-reduce that will write [a, a + n) of a device view.
std::string pending_write(uintptr_t a, size_t n) {
  std::lock_guard<std::mutex> lk(g_watch_mutex);
  for (const NcclOp* o : g_watched) {
    const uintptr_t r = reinterpret_cast<uintptr_t>(o->recv_view);
    if (a < r + o->bytes && r < a + n)
      return describe(*o) + " has not written it yet (the all-reduce's stream has not reached it): make the "
                            "reader wait for an event recorded after ncclAllReduce on that stream";
  }
  return "";
}

void unwatch(NcclOp* o) {
  std::lock_guard<std::mutex> lk(g_watch_mutex);
  g_watched.erase(std::remove(g_watched.begin(), g_watched.end(), o), g_watched.end());
}
void forget(NcclOp* o) {  // no longer one of its communicator's open operations
  std::lock_guard<std::mutex> lk(o->st->m);
  auto& v = o->st->ops;
  v.erase(std::remove_if(v.begin(), v.end(), [o](const std::shared_ptr<NcclOp>& p) { return p.get() == o; }), v.end());
}

// The first byte at which [now, now + n) differs from was, or n.
size_t first_change(const char* now, const char* was, size_t n) {
  if (std::memcmp(now, was, n) == 0) return n;
  size_t i = 0;
  while (now[i] == was[i]) ++i;
  return i;
}
// At the item: what changed the watched buffers since the call is another stream's (or the
// host's) unordered work.
void check_buffers(const NcclOp& o) {
  const size_t s = first_change(o.send_view, o.send_snap.data(), o.bytes);
  const bool in_place = o.send_view == o.recv_view;
  size_t r = o.bytes;
  if (!in_place) r = first_change(o.recv_view, o.recv_snap.data(), o.bytes);
  if (s == o.bytes && r == o.bytes) return;
  const bool send_side = s < o.bytes;
  report_fault(cudaErrorLaunchFailure,
               strf("%s: its %s buffer was written (byte %zu %s) after the call and before its stream reached "
                    "the all-reduce: another stream's kernel, copy or memset that does not wait for an event "
                    "recorded after ncclAllReduce on that stream races with it",
                    describe(o).c_str(), send_side ? "send" : "receive", send_side ? s : r, "changed"));
}

// The queue item: the all-reduce completes when its stream reaches it.
void complete(NcclOp& o) {
  unwatch(&o);
  if (o.state.load() != 0) return;
  if (o.st->aborted.load()) {
    o.state.store(2);
    return;
  }
  if (o.watched) check_buffers(o);
  if (MPI_Waitall(static_cast<int>(o.reqs.size()), o.reqs.data(), MPI_STATUSES_IGNORE) != MPI_SUCCESS)
    o.st->async_error.store(ncclSystemError);
  if (o.op == ncclAvg) average(o);
  std::memcpy(o.recv_view, o.result.data(), o.bytes);
  mark_written(o.recv_view, o.bytes);
  o.state.store(1);
  forget(&o);
}

ncclResult_t post(NcclOp& o) {
  o.send_snap.assign(o.send_view, o.send_view + o.bytes);
  if (o.send_view != o.recv_view) o.recv_snap.assign(o.recv_view, o.recv_view + o.bytes);
  o.result.resize(o.bytes);
  const size_t es = type_size(o.type);
  for (size_t off = 0; off < o.count;) {
    const size_t c = std::min<size_t>(o.count - off, INT_MAX);
    MPI_Request q;
    if (MPI_Iallreduce(o.send_snap.data() + off * es, o.result.data() + off * es, static_cast<int>(c),
                       mpi_type(o.type), mpi_op(o.op), o.st->comm, &q) != MPI_SUCCESS)
      return nccl_refuse(ncclSystemError, "ncclAllReduce", "MPI_Iallreduce failed");
    o.reqs.push_back(q);
    off += c;
  }
  return ncclSuccess;
}

// The stream's queue position up to which its work must run before o is posted: all of it,
// except a tail of queued all-reduces whose receive buffers o does not read (a group's
// operations are posted together, as a GPU starts them together).
unsigned long long runs_up_to(const NcclOp& o) {
  unsigned long long upto = o.stream->enqueued;
  std::lock_guard<std::mutex> lk(g_watch_mutex);
  for (bool more = true; more;) {
    more = false;
    for (const NcclOp* q : g_watched) {
      const uintptr_t r = reinterpret_cast<uintptr_t>(q->recv_view), s = reinterpret_cast<uintptr_t>(o.send_view);
      if (q->stream == o.stream && q->seq == upto && !(s < r + q->bytes && r < s + o.bytes)) {
        --upto;
        more = true;
        break;
      }
    }
  }
  return upto;
}

ncclResult_t issue_queued(const std::shared_ptr<NcclOp>& o) {
  lazy_drain(o->stream, runs_up_to(*o));
  if (const ncclResult_t r = post(*o)) return r;
  o->watched = true;
  mark_unwritten(o->recv_view, o->bytes);
  {
    std::lock_guard<std::mutex> lk(o->st->m);
    o->st->ops.push_back(o);
  }
  // The item owns o; dropped unrun (cudaDeviceReset deletes queues), it stops watching.
  struct Drop {
    std::shared_ptr<NcclOp> o;
    ~Drop() {
      if (!o) return;
      unwatch(o.get());
      int posted = 0;
      o->state.compare_exchange_strong(posted, 2);
    }
  };
  auto d = std::make_shared<Drop>();  // (a temporary Drop would drop o as it dies)
  d->o = o;
  std::lock_guard<std::mutex> lk(g_watch_mutex);  // o->seq is set before pending_write can see o
  o->seq = lazy_enqueue(o->stream, [d] { complete(*d->o); });
  g_watched.push_back(o.get());
  return ncclSuccess;
}

ncclResult_t issue(const std::shared_ptr<NcclOp>& o) {
  g_pending_write = pending_write;
  if (o->st->aborted.load()) return nccl_refuse(ncclInvalidUsage, "ncclAllReduce", "the communicator was aborted");
  if (capture_active_on(o->stream))
    return nccl_refuse(ncclInvalidUsage, "ncclAllReduce",
                       "stream %p is capturing a graph: the emulator does not record NCCL calls into graphs",
                       static_cast<void*>(o->stream));
  if (lazy_streams() && is_created_stream(o->stream) && !in_replay()) return issue_queued(o);
  // The legacy stream (after every stream's work) or the sync mode: the all-reduce at the call.
  if (capture_forbids(nullptr, true) != cudaSuccess)
    return nccl_refuse(ncclInvalidUsage, "ncclAllReduce", "the legacy stream cannot take work during a capture");
  if (const ncclResult_t r = post(*o)) return r;
  complete(*o);
  return ncclSuccess;
}

thread_local int tl_group_depth = 0;
thread_local std::vector<std::shared_ptr<NcclOp>> tl_group;

ncclResult_t check_args(const NcclOp& o) {
  const char* call = "ncclAllReduce";
  if (mpi_type(o.type) == MPI_DATATYPE_NULL)
    return nccl_refuse(ncclInvalidArgument, call, "datatype %d (%s) is not emulated (ncclFloat16 and "
                       "ncclBfloat16 have no MPI type)", static_cast<int>(o.type), type_name(o.type));
  if (o.op < 0 || o.op >= ncclNumOps) return nccl_refuse(ncclInvalidArgument, call, "op %d is not a reduction", o.op);
  if (!stream_valid(o.stream))
    return nccl_refuse(ncclInvalidArgument, call, "stream %p is not a live stream", static_cast<void*>(o.stream));
  if (!device_range(o.send, o.bytes) || !device_range(o.recv, o.bytes))
    return nccl_refuse(ncclInvalidArgument, call, "%s %p (%zu bytes) is not device memory",
                       device_range(o.send, o.bytes) ? "recvbuff" : "sendbuff",
                       device_range(o.send, o.bytes) ? o.recv : o.send, o.bytes);
  return ncclSuccess;
}

}  // namespace

void nccl_complete_all(NcclState& st) {
  std::vector<std::shared_ptr<NcclOp>> ops;
  {
    std::lock_guard<std::mutex> lk(st.m);
    ops = st.ops;
  }
  for (auto& o : ops) {
    if (o->state.load() == 0 && o->seq) lazy_drain(o->stream, o->seq);
    if (o->state.load() == 2 && !o->reqs.empty())  // dropped by cudaDeviceReset: finish the MPI side
      MPI_Waitall(static_cast<int>(o->reqs.size()), o->reqs.data(), MPI_STATUSES_IGNORE);
    forget(o.get());
  }
}

void nccl_abandon_all(NcclState& st) {
  st.aborted.store(true);
  std::vector<std::shared_ptr<NcclOp>> ops;
  {
    std::lock_guard<std::mutex> lk(st.m);
    ops.swap(st.ops);
  }
  // Their MPI requests may still be in progress: the buffers they use are kept to the end.
  static std::mutex m;
  static auto* kept = new std::vector<std::shared_ptr<NcclOp>>();
  std::lock_guard<std::mutex> lk(m);
  for (auto& o : ops) {
    unwatch(o.get());
    kept->push_back(o);
  }
}

}  // namespace sim::detail

using namespace sim::detail;

extern "C" {

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return nccl_refuse(ncclInvalidArgument, "ncclAllReduce", "comm is NULL");
  auto o = std::make_shared<NcclOp>();
  o->st = comm->st;
  o->send = send, o->recv = recv, o->count = count, o->type = type, o->op = op, o->stream = stream;
  o->bytes = count * type_size(type);
  o->pc = __builtin_return_address(0);
  if (const ncclResult_t r = check_args(*o)) return r;
  if (count == 0) return ncclSuccess;
  o->send_view = static_cast<char*>(device_view(send));
  o->recv_view = static_cast<char*>(device_view(recv));
  if (tl_group_depth > 0) {
    tl_group.push_back(std::move(o));
    return ncclSuccess;
  }
  return issue(o);
}

ncclResult_t ncclGroupStart(void) {
  ++tl_group_depth;
  return ncclSuccess;
}

// The group's calls are issued in call order when the outermost group ends.
ncclResult_t ncclGroupEnd(void) {
  if (tl_group_depth == 0) return nccl_refuse(ncclInvalidUsage, "ncclGroupEnd", "no ncclGroupStart is open");
  if (--tl_group_depth > 0) return ncclSuccess;
  std::vector<std::shared_ptr<NcclOp>> ops;
  ops.swap(tl_group);
  ncclResult_t first = ncclSuccess;
  for (auto& o : ops)
    if (const ncclResult_t r = issue(o); r && !first) first = r;
  return first;
}

}  // extern "C"

#endif  // __has_include(<mpi.h>)
