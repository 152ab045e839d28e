// Distributed shared memory: cluster_group::map_shared_rank(p, rank), the address of the same
// shared variable in another block of the cluster, and the checks of accesses through it. Each
// block's shared memory is its worker's shared window (checks.cpp); a mapped address points into
// the owner's window, so loads and stores through it are plain host accesses, seen by the
// per-access hooks wherever the owner's window is poisoned (a race-checked owner, or one that
// has exited). Faults, each naming kernel, block, thread and line:
//   - a rank outside the cluster, or an address that is not the block's shared memory;
//   - an access (or a mapping) after the owner block exited, and an owner that exits while
//     another block mapped or accessed its memory since the last cluster barrier (on a GPU its
//     shared memory may be gone, or given to the next block, under the access);
//   - races (race-checked owners): a remote read of bytes the owner (or a third block) wrote
//     since the last cluster barrier, a remote write of bytes it read or wrote, and the owner's
//     access of bytes another block wrote (or read, for its write) in the same interval.
// Described in sim/docs/clusters.md; tested by tests/sim/test_sim_cluster_faults.cu.
#include <cstring>

#include "cluster.h"

namespace sim::detail {

namespace {
constexpr size_t kWin = kSharedWindowBytes;

std::string thread_of(const Worker& w) {
  return strf("thread %s of %s", tid_str(w.ctx[w.cur]).c_str(), w.where().c_str());
}
std::string use_str(const Launch& L, const ClusterState& cs, const RemoteUse& u) {
  const std::string blk = cluster_block_name(L, cs.mem[u.rank].block);
  const std::string at = u.pc ? code_line(u.pc) : u.site.file ? strf("%s:%d", u.site.file, u.site.line) : "";
  return strf("%s by thread (%u,%u,%u) of block %s (rank %u)%s%s",
              u.write ? "a write" : u.pc ? "a read" : "map_shared_rank", u.tid.x, u.tid.y, u.tid.z, blk.c_str(), u.rank,
              at.empty() ? "" : " at ", at.c_str());
}
const SharedArray* array_at(const SharedArena& a, ptrdiff_t rel) {
  for (const SharedArray& s : a.arrays) {
    const ptrdiff_t lo = static_cast<ptrdiff_t>(s.off);
    if (rel >= lo && rel < lo + static_cast<ptrdiff_t>(s.size)) return &s;
  }
  return nullptr;
}
const SharedArray* same_array(const SharedArena& a, const SharedArray& x) {
  for (const SharedArray& s : a.arrays)
    if (s.line == x.line && s.size == x.size && std::strcmp(s.name, x.name) == 0 &&
        (s.file == x.file || (s.file && x.file && std::strcmp(s.file, x.file) == 0)))
      return &s;
  return nullptr;
}
[[noreturn]] void fault(Worker& w, std::unique_lock<std::mutex>* lk, const std::string& msg) {
  if (lk && lk->owns_lock()) lk->unlock();
  w.fiber_fault(cudaErrorLaunchFailure, msg);
}
std::string owner_gone(const Launch& L, const ClusterState& cs, unsigned r) {
  return strf("block %s (rank %u) has exited: its shared memory is no longer the cluster's (on a GPU it may belong "
              "to another block by now; a cluster.sync() before the owner's exit keeps it)",
              cluster_block_name(L, cs.mem[r].block).c_str(), r);
}
}  // namespace

void* cluster_map(const void* p, int rank, Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("cooperative_groups::cluster_group::map_shared_rank()", s);
  const unsigned csize = w->cluster ? w->L->csize : 1;
  if (rank < 0 || unsigned(rank) >= csize)
    fault(*w, nullptr,
          strf("map_shared_rank(%p, %d) at %s:%d: rank %d is outside the cluster of %u block%s (ranks 0..%u)%s; %s", p,
               rank, s.file, s.line, rank, csize, csize == 1 ? "" : "s", csize - 1,
               w->cluster ? "" : " (a launch without clusters is a cluster of one block)", thread_of(*w).c_str()));
  const SharedArena& a = w->arena;
  const size_t off = static_cast<const char*>(p) - a.window;
  if (off >= kWin || a.ok[off] == 0)
    fault(*w, nullptr,
          strf("map_shared_rank(%p, %d) at %s:%d: the address is not in the block's shared memory (it maps the address "
               "of a __shared__ variable); %s",
               p, rank, s.file, s.line, thread_of(*w).c_str()));
  if (!w->cluster || unsigned(rank) == w->crank) return const_cast<void*>(p);
  const ptrdiff_t rel = static_cast<const char*>(p) - a.base;
  const SharedArray* mine = array_at(a, rel);
  ClusterState& cs = *w->cluster;
  std::unique_lock<std::mutex> lk(cs.m);
  ClusterMember& o = cs.mem[rank];
  while (!o.started) {  // the blocks of a cluster start together on a GPU
    if (w->L->aborted.load()) throw FiberAbort{};
    cs.cv.wait(lk);
  }
  if (o.exited)
    fault(*w, &lk, strf("map_shared_rank(%p, %d) at %s:%d after the owner exited: %s; %s", p, rank, s.file, s.line,
                        owner_gone(*w->L, cs, unsigned(rank)).c_str(), thread_of(*w).c_str()));
  // The owner places its static arrays as it first uses them: wait until it has this one, or
  // cannot get it before this block goes on (it waits at a cluster barrier, or is gone).
  const SharedArray* theirs = nullptr;
  while (mine && !(theirs = same_array(o.w->arena, *mine)) && !o.exited && !o.at_barrier) {
    if (w->L->aborted.load()) throw FiberAbort{};
    cs.cv.wait(lk);
  }
  if (o.exited)
    fault(*w, &lk, strf("map_shared_rank(%p, %d) at %s:%d after the owner exited: %s; %s", p, rank, s.file, s.line,
                        owner_gone(*w->L, cs, unsigned(rank)).c_str(), thread_of(*w).c_str()));
  if (!theirs)
    fault(*w, &lk,
          strf("map_shared_rank(%p, %d) at %s:%d: block %s (rank %d) has not used __shared__ '%s' yet (the emulator "
               "places a block's static shared arrays as the block first uses them: use the array in every block "
               "before the cluster.sync() after which another maps it); %s",
               p, rank, s.file, s.line, cluster_block_name(*w->L, o.block).c_str(), rank, mine ? mine->name : "?",
               thread_of(*w).c_str()));
  RemoteUse u;
  u.set = true, u.rank = w->crank, u.epoch = cs.mem[w->crank].epoch, u.tid = w->ctx[w->cur].thread_idx, u.site = s;
  o.last_map = u;
  return o.w->arena.base + static_cast<ptrdiff_t>(theirs->off) + (rel - static_cast<ptrdiff_t>(mine->off));
}

unsigned cluster_query_rank(const void* p, Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("cooperative_groups::cluster_group::query_shared_rank()", s);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a - reinterpret_cast<uintptr_t>(w->arena.window) < kWin) return w->crank;
  if (w->cluster) {
    std::lock_guard<std::mutex> lk(w->cluster->m);
    for (unsigned r = 0; r < w->L->csize; ++r) {
      const Worker* o = w->cluster->mem[r].w;
      if (o && a - reinterpret_cast<uintptr_t>(o->arena.window) < kWin) return r;
    }
  }
  fault(*w, nullptr, strf("query_shared_rank(%p) at %s:%d: not shared memory of a block of the cluster; %s", p, s.file,
                          s.line, thread_of(*w).c_str()));
}

namespace {
// The owner's own accesses of byte i (its race records) in the current interval, against a
// remote access: the message, or "".
std::string owner_conflict(const Worker& ow, const ClusterMember& o, size_t off, bool write) {
  const SharedArena& oa = ow.arena;
  const RaceByte& rb = oa.race[off];
  if (rb.wgen >= oa.block_gen && rb.wgen > o.mark)
    return strf("the owner's thread %u wrote it at %s", rb.wtid, code_line(rb.wpc).c_str());
  if (write && rb.rgen >= oa.block_gen && rb.rgen > o.mark)
    return strf("the owner's thread %u read it at %s", rb.rtid, code_line(rb.rpc).c_str());
  return "";
}
}  // namespace

bool cluster_remote_access(Worker& w, uintptr_t a, size_t n, bool write, const void* pc) {
  ClusterState& cs = *w.cluster;
  const Launch& L = *w.L;
  std::unique_lock<std::mutex> lk(cs.m);
  unsigned r = 0;
  size_t off = kWin;
  for (; r < L.csize; ++r) {
    const Worker* o = cs.mem[r].w;
    if (r != w.crank && o && (off = a - reinterpret_cast<uintptr_t>(o->arena.window)) < kWin) break;
  }
  if (r == L.csize) return false;
  ClusterMember& o = cs.mem[r];
  const auto what = [&] {  // only for a fault: naming the line is slow
    return strf("distributed shared memory %s at %s of %zu bytes in block %s (rank %u)", write ? "write" : "read",
                code_line(pc).c_str(), n, cluster_block_name(L, o.block).c_str(), r);
  };
  if (o.exited) fault(w, &lk, strf("%s after that block exited: %s; %s", what().c_str(), owner_gone(L, cs, r).c_str(),
                                   thread_of(w).c_str()));
  const Worker& ow = *o.w;
  for (size_t i = 0; i < n; ++i)
    if (off + i >= kWin || ow.arena.ok[off + i] == 0)
      fault(w, &lk, strf("%s: byte %zu lies outside that block's shared arrays; %s", what().c_str(), i,
                         thread_of(w).c_str()));
  const unsigned long long epoch = cs.mem[w.crank].epoch;
  RemoteUse u;
  u.set = true, u.write = write, u.rank = w.crank, u.epoch = epoch, u.tid = w.ctx[w.cur].thread_idx, u.pc = pc;
  for (size_t i = 0; i < n; ++i) {
    std::string why = ow.race ? owner_conflict(ow, o, off + i, write) : "";
    RemoteByte& x = o.remote[off + i];
    if (why.empty() && x.w.set && x.w.rank != w.crank && x.w.epoch == epoch) why = use_str(L, cs, x.w);
    if (why.empty() && write && x.r.set && x.r.rank != w.crank && x.r.epoch == epoch) why = use_str(L, cs, x.r);
    if (!why.empty())
      fault(w, &lk, strf("distributed shared memory race (%s hazard): %s, while %s with no cluster.sync() between; %s",
                         write ? "write-after-access" : "read-after-write", what().c_str(), why.c_str(),
                         thread_of(w).c_str()));
    (write ? x.w : x.r) = u;
  }
  if (write && ow.race) std::memset(ow.arena.ok + off, 2, n);  // written, for the owner's initcheck
  return true;
}

void cluster_local_access(Worker& w, size_t off, size_t n, bool write, const void* pc) {
  ClusterState& cs = *w.cluster;
  std::unique_lock<std::mutex> lk(cs.m);
  ClusterMember& me = cs.mem[w.crank];
  if (me.remote.empty()) return;
  for (size_t i = 0; i < n; ++i) {
    const auto it = me.remote.find(off + i);
    if (it == me.remote.end()) continue;
    const RemoteUse* u = it->second.w.set && it->second.w.epoch == me.epoch ? &it->second.w
                         : write && it->second.r.set && it->second.r.epoch == me.epoch ? &it->second.r
                                                                                       : nullptr;
    if (u)
      fault(w, &lk,
            strf("distributed shared memory race (%s hazard): shared memory %s at %s of %zu bytes of block %s (rank %u), "
                 "while %s touched it with no cluster.sync() between; %s",
                 write ? (u->write ? "write-after-write" : "write-after-read") : "read-after-write",
                 write ? "write" : "read", code_line(pc).c_str(), n, cluster_block_name(*w.L, me.block).c_str(),
                 w.crank, use_str(*w.L, cs, *u).c_str(), thread_of(w).c_str()));
  }
}

void cluster_block_end(Worker& w) {
  ClusterState& cs = *w.cluster;
  const Launch& L = *w.L;
  std::string msg;
  {
    std::lock_guard<std::mutex> lk(cs.m);
    ClusterMember& me = cs.mem[w.crank];
    const RemoteUse* u = me.last_map.set && me.last_map.epoch == me.epoch ? &me.last_map : nullptr;
    for (auto it = me.remote.begin(); !u && it != me.remote.end(); ++it) {
      if (it->second.w.set && it->second.w.epoch == me.epoch) u = &it->second.w;
      else if (it->second.r.set && it->second.r.epoch == me.epoch) u = &it->second.r;
    }
    if (u && !w.failed && !L.aborted.load())
      msg = strf("block %s (rank %u) of kernel '%s' exited while another block may still use its shared memory: %s "
                 "came after the last cluster.sync() the owner passed (on a GPU the owner's shared memory may be gone "
                 "under it; end with cluster.sync()); launched at %s:%d",
                 cluster_block_name(L, me.block).c_str(), w.crank, L.name, use_str(L, cs, *u).c_str(), L.file, L.line);
    me.exited = true;
    ++cs.finished;
  }
  cs.cv.notify_all();
  if (!msg.empty()) {
    report_fault(cudaErrorLaunchFailure, msg);
    w.failed = true;
  }
}

}  // namespace sim::detail
