// Asynchronous global-to-shared copies (sim/include/sim/async_copy.h): per block, the copies
// each thread issued and the commit group each belongs to. An issued copy's destination bytes
// are pending (checks.cpp: any access to them is a fault) until the issuing thread waits for its
// group; the wait hands the copies back to the thread, which performs them with its own checked
// loads and stores. Copies a thread never waited for are dropped when the block ends (their
// bytes stay pending for the rest of the block, so a read of them after a barrier is reported).
// Tested by tests/sim/test_sim_async_copy.cu.
#include <algorithm>
#include "internal.h"
#include "sim/async_copy.h"

namespace sim::detail {

struct AsyncState {
  struct Pending {
    AsyncCopyRec c;
    int tid;
    unsigned long long group;  // 0: not committed yet
    Site site;
  };
  std::vector<Pending> q;                       // in issue order
  std::vector<unsigned long long> committed;    // per thread: groups committed so far
};

void async_block_begin(Worker& w) {
  if (!w.async) w.async = new AsyncState();
  w.async->q.clear();
  w.async->committed.assign(w.L ? w.L->nthreads : 0, 0);
}
void async_block_end(Worker& w) {
  if (w.async) w.async->q.clear();
}
void async_free(Worker& w) {
  delete w.async;
  w.async = nullptr;
}

std::string async_pending_owner(const Worker& w, uintptr_t addr) {
  if (!w.async) return "an asynchronous copy";
  for (const AsyncState::Pending& p : w.async->q) {
    const uintptr_t d = reinterpret_cast<uintptr_t>(p.c.dst);
    if (addr >= d && addr < d + p.c.bytes)
      return strf("thread (%u,%u,%u) issued it at %s:%d%s", w.ctx[p.tid].thread_idx.x, w.ctx[p.tid].thread_idx.y,
                  w.ctx[p.tid].thread_idx.z, p.site.file, p.site.line,
                  p.group ? "" : " (not yet committed)");
  }
  return "an asynchronous copy";
}

namespace {
Worker& in_kernel(const char* what, Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block || w->cur < 0) outside_kernel(what, s);
  return *w;
}
}  // namespace

void async_issue(void* dst, const void* src, size_t bytes, size_t copy, size_t align, const char* what, Site s) {
  Worker& w = in_kernel(what, s);
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst), sa = reinterpret_cast<uintptr_t>(src);
  const uintptr_t win = reinterpret_cast<uintptr_t>(w.arena.window);
  if (align && ((d | sa) % align) != 0)
    w.fiber_fault(cudaErrorMisalignedAddress,
                  strf("misaligned address: %s at %s:%d copies %zu bytes from %p to %p, which both need %zu-byte "
                       "alignment; %s",
                       what, s.file, s.line, bytes, src, dst, align, w.where().c_str()));
  if (copy && sa - win < (size_t(1) << 20))
    w.fiber_fault(cudaErrorLaunchFailure, strf("%s at %s:%d: its source %p is shared memory (it copies global "
                                               "memory into shared memory); %s",
                                               what, s.file, s.line, src, w.where().c_str()));
  if (bytes == 0) return;
  const std::string why = shared_mark_pending(w, dst, bytes);
  if (!why.empty())
    w.fiber_fault(cudaErrorIllegalAddress,
                  strf("%s at %s:%d of %zu bytes to %p: %s; thread (%u,%u,%u) of %s", what, s.file, s.line, bytes, dst,
                       why.c_str(), w.ctx[w.cur].thread_idx.x, w.ctx[w.cur].thread_idx.y, w.ctx[w.cur].thread_idx.z,
                       w.where().c_str()));
  w.async->q.push_back({AsyncCopyRec{dst, src, static_cast<uint32_t>(bytes), static_cast<uint32_t>(copy)}, w.cur, 0, s});
}

void async_commit(Site s) {
  Worker& w = in_kernel("__pipeline_commit()", s);
  const unsigned long long g = ++w.async->committed[w.cur];
  for (AsyncState::Pending& p : w.async->q)
    if (p.tid == w.cur && p.group == 0) p.group = g;
}

unsigned long long async_committed() {
  Worker& w = in_kernel("cuda::pipeline", Site{"?", 0});
  return w.async->committed[w.cur];
}

int async_take(size_t keep, AsyncCopyRec* out, int max) {
  Worker& w = in_kernel("__pipeline_wait_prior()", Site{"?", 0});
  const unsigned long long done = w.async->committed[w.cur];
  const unsigned long long upto = done > keep ? done - keep : 0;  // groups 1..upto complete
  int k = 0;
  auto& q = w.async->q;
  for (size_t i = 0; i < q.size() && k < max;) {
    const AsyncState::Pending& p = q[i];
    if (p.tid == w.cur && p.group != 0 && p.group <= upto) {
      shared_unmark_pending(w, p.c.dst, p.c.bytes);
      out[k++] = p.c;
      q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return k;
}

}  // namespace sim::detail
