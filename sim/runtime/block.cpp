// Runs one block on one worker: the round-based fiber scheduler, __syncthreads
// (with barrier-divergence detection) and per-block __shared__ memory. Warp
// intrinsics are in warp.cpp. Tested by tests/sim and sim/examples.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include "fiber.h"

namespace sim::detail {

namespace {
inline unsigned long long splitmix(unsigned long long& s) {
  unsigned long long z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// xorshift64* step (state never 0), scaled to [0, n) by a multiply.
inline unsigned bounded(unsigned long long& s, unsigned n) {
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return static_cast<unsigned>((((s * 0x2545f4914f6cdd1dull) >> 32) * n) >> 32);
}
}  // namespace

std::string Worker::where() const {
  if (!L) return "host code";
  return strf("kernel '%s' (block (%u,%u,%u)), launched at %s:%d", L->name, block.block_idx.x,
              block.block_idx.y, block.block_idx.z, L->file, L->line);
}

void Worker::fault_here(cudaError_t err, const std::string& msg) {
  report_fault(err, msg);
  failed = true;
}

void Worker::fiber_fault(cudaError_t err, const std::string& msg) {
  report_fault(err, msg);  // does not return in FaultMode::Abort
  throw FiberAbort{};      // caught in run_thread; the block is then abandoned
}

void Worker::run_block(Launch& l, unsigned long long b) {
  L = &l;
  const dim3 G = l.grid, B = l.block;
  block.block_idx = uint3{static_cast<unsigned>(b % G.x), static_cast<unsigned>((b / G.x) % G.y),
                          static_cast<unsigned>(b / (static_cast<unsigned long long>(G.x) * G.y))};
  block.block_dim = B;
  block.grid_dim = G;
  block.static_bytes = 0;
  // In the worker's shared window (checks.cpp): red zones around every array, a shadow that
  // the per-access checks read; none at all without dynamic shared memory.
  race = racecheck_block(l, b);
  arena_begin_block(*this, l.dyn_bytes);

  n = l.nthreads;
  ensure_fibers(static_cast<int>(n));
  unsigned t = 0;
  for (unsigned z = 0; z < B.z; ++z)
    for (unsigned y = 0; y < B.y; ++y)
      for (unsigned x = 0; x < B.x; ++x, ++t) {
        ctx[t].thread_idx = uint3{x, y, z};
        ctx[t].state = kReady;
        ctx[t].pdl_waited = 0;
        ctx[t].spin_word = 0;
        ctx[t].spin_reads = 0;
        ctx[t].nflags = 0;
        list[t] = static_cast<int>(t);
      }
  const unsigned nw = (n + 31) / 32;
  for (unsigned w = 0; w < nw; ++w) {
    warps[w].exist = (w == nw - 1 && (n & 31)) ? ((1u << (n & 31)) - 1) : ~0u;
    warps[w].exited = 0;
    warps[w].ngroups = 0;
  }
  rng = l.seed ^ (l.index * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);
  rng = splitmix(rng) | 1;

  failed = false;
  pdl_triggered = false;
  if (l.clusters) cluster_block_begin(*this, b);
  async_block_begin(*this);
  in_block = true;
  tl_block = &block;
  sim_blockDim_ = block.block_dim;
  sim_gridDim_ = block.grid_dim;
  schedule();
  tl_thread = nullptr;
  tl_block = nullptr;
  in_block = false;
  if (cluster) cluster_block_end(*this);  // before the block's shared memory is released
  async_block_end(*this);
  if (failed) {
    for (unsigned i = 0; i < n; ++i)
      if (ctx[i].state != kExited) reset_fiber(static_cast<int>(i));
    l.aborted.store(true);
  }
  size_t seen = l.max_static.load(std::memory_order_relaxed);
  while (block.static_bytes > seen && !l.max_static.compare_exchange_weak(seen, block.static_bytes)) {
  }
  free_block_memory();
  if (cluster) cluster_block_done(*this);
  add_stats(1, n, n_barriers, n_switches);
  n_barriers = n_switches = 0;
}

void Worker::free_block_memory() {
  for (int id : block.used_slots) block.slot_store[id] = nullptr;
  block.used_slots.clear();
  arena_end_block(*this);
}

// Rounds: run every runnable fiber (in the chosen order) until it blocks at a
// barrier or warp op, or exits. When nothing is runnable, resolve the barrier.
void Worker::schedule() {
  int m = static_cast<int>(n);
  int nbar = 0, nexit = 0;
  Site bar_site{nullptr, 0};
  bool bar_mixed = false;  // threads wait at different barriers (maybe)
  const Order ord = L->order;
  bool sorted = true;
  for (;;) {
    if (ord == Order::Random) {
      for (int i = m - 1; i > 0; --i) std::swap(list[i], list[bounded(rng, static_cast<unsigned>(i + 1))]);
    } else {
      if (!sorted) std::sort(list.get(), list.get() + m);
      if (ord == Order::Reverse) std::reverse(list.get(), list.get() + m);
    }
    nready = 0;
    for (int k = 0; k < m; ++k) {
      const int t = list[k];
      ThreadCtx* c = &ctx[t];
      tl_thread = c;
      resume(t);
      ++n_switches;
      const uint8_t st = c->state;
      if (st == kAtBarrier) {
        if (nbar++ == 0) {
          bar_site = c->site;
        } else if (c->site.line != bar_site.line || c->site.file != bar_site.file) {
          bar_mixed = true;
        }
      } else if (st == kExited) {
        ++nexit;
        on_exit(t);
      } else if (st == kFaulted) {
        failed = true;
      }
      if (failed) return;
    }
    if (nready > 0) {  // lanes released by completed warp ops
      std::swap(list, ready);
      m = nready;
      sorted = false;
      continue;
    }
    for (unsigned w = 0; w < (n + 31) / 32; ++w)
      if (warps[w].ngroups) {
        deadlock_fault();
        return;
      }
    if (std::string u = take_pending_uninit(*this); !u.empty()) {  // racecheck's blocks (checks.cpp)
      fault_here(cudaErrorLaunchFailure, u);
      return;
    }
    if (nbar == 0) return;  // every thread exited
    if (nexit > 0 || bar_mixed) {
      if (!release_barrier(nexit)) return;
    } else {
      release_fast(bar_site);
    }
    nbar = 0;
    bar_mixed = false;
    m = static_cast<int>(n);
    for (int i = 0; i < m; ++i) list[i] = i;
    sorted = true;
  }
}

// Every thread waits at the same barrier site.
void Worker::release_fast(Site s) {
  const int kind = ctx[0].bar_kind;
  if (kind) {
    int cnt = 0;
    for (unsigned t = 0; t < n; ++t) cnt += ctx[t].pred != 0;
    const int r = kind == 1 ? cnt : kind == 2 ? (cnt == static_cast<int>(n)) : (cnt > 0);
    for (unsigned t = 0; t < n; ++t) ctx[t].result = static_cast<unsigned long long>(r);
  }
  for (unsigned t = 0; t < n; ++t) ctx[t].state = kReady;
  (void)s;
  ++n_barriers;
  ++arena.gen;  // a new interval for the race check
}

bool Worker::release_barrier(int nexit) {
  int first = -1;
  for (unsigned t = 0; t < n; ++t)
    if (ctx[t].state == kAtBarrier) {
      first = static_cast<int>(t);
      break;
    }
  const Site s0 = ctx[first].site;
  const std::string blk = strf("(block (%u,%u,%u))", block.block_idx.x, block.block_idx.y,
                               block.block_idx.z);
  if (nexit > 0) {
    int ex = -1;
    for (unsigned t = 0; t < n && ex < 0; ++t)
      if (ctx[t].state == kExited) ex = static_cast<int>(t);
    const int waiting = static_cast<int>(n) - nexit;
    fault_here(cudaErrorLaunchFailure,
               strf("barrier divergence in kernel '%s' at %s:%d: %d thread%s wait%s here, %d "
                    "thread%s exited %s; e.g. thread %s exited; launched at %s:%d",
                    L->name, s0.file, s0.line, waiting, waiting == 1 ? "" : "s",
                    waiting == 1 ? "s" : "", nexit, nexit == 1 ? "" : "s", blk.c_str(),
                    tid_str(ctx[ex]).c_str(), L->file, L->line));
    return false;
  }
  for (unsigned t = 0; t < n; ++t) {
    if (same_site(ctx[t].site, s0)) continue;
    // Different barriers: count threads per site (a few sites are enough to explain).
    std::vector<std::pair<Site, int>> sites;
    for (unsigned u = 0; u < n; ++u) {
      auto it = std::find_if(sites.begin(), sites.end(),
                             [&](const auto& p) { return same_site(p.first, ctx[u].site); });
      if (it == sites.end()) sites.push_back({ctx[u].site, 1});
      else ++it->second;
    }
    std::string parts;
    for (size_t i = 0; i < sites.size() && i < 4; ++i)
      parts += strf("%s%d thread%s wait at %s:%d", i ? ", " : "", sites[i].second,
                    sites[i].second == 1 ? "" : "s", sites[i].first.file, sites[i].first.line);
    fault_here(cudaErrorLaunchFailure,
               strf("barrier divergence in kernel '%s' at %s:%d: %s %s; e.g. thread %s waits at "
                    "%s:%d; launched at %s:%d",
                    L->name, s0.file, s0.line, parts.c_str(), blk.c_str(), tid_str(ctx[t]).c_str(),
                    ctx[t].site.file, ctx[t].site.line, L->file, L->line));
    return false;
  }
  release_fast(s0);  // same site after all (the file names were different pointers)
  return true;
}

void Worker::on_exit(int t) {
  WarpState& ws = warps[t >> 5];
  const unsigned bit = 1u << (t & 31);
  ws.exited |= bit;
  for (int i = 0; i < ws.ngroups; ++i) {
    const WarpGroup& g = ws.groups[i];
    if (!(g.mask & bit)) continue;
    fault_here(cudaErrorLaunchFailure,
               strf("thread %s (lane %d of warp %d) exited while lanes 0x%08x wait for it at %s "
                    "(mask 0x%08x) at %s:%d in %s",
                    tid_str(ctx[t]).c_str(), t & 31, t >> 5, g.arrived, kind_name(g.kind), g.mask,
                    g.site.file, g.site.line, where().c_str()));
    return;
  }
}

// ---- entry points called from kernels (declared in sim/device.h) ----

void outside_kernel(const char* what, Site s) {
  std::fprintf(stderr, "sim: %s called outside a kernel at %s:%d\n", what, s.file, s.line);
  std::abort();
}

void syncthreads(Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("__syncthreads()", s);
  ThreadCtx* c = &w->ctx[w->cur];
  c->site = s;
  c->bar_kind = 0;
  c->state = kAtBarrier;
  w->yield();
}

int syncthreads_pred(Site s, int kind, int pred) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("__syncthreads_count/and/or()", s);
  ThreadCtx* c = &w->ctx[w->cur];
  c->site = s;
  c->bar_kind = static_cast<uint8_t>(kind);
  c->pred = pred;
  c->state = kAtBarrier;
  w->yield();
  return static_cast<int>(c->result);
}

void device_fault(const char* what) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) {
    std::fprintf(stderr, "sim: %s (outside a kernel)\n", what);
    std::abort();
  }
  w->fiber_fault(cudaErrorLaunchFailure, strf("%s in %s", what, w->where().c_str()));
}

void* shared_alloc(SharedSite* site, size_t bytes, size_t align) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("__shared__ variable used", Site{site->file, site->line});
  int id = site->id.load(std::memory_order_acquire);
  if (id < 0) {
    static std::atomic<int> next_id{0};
    int want = next_id.fetch_add(1);
    if (site->id.compare_exchange_strong(id, want, std::memory_order_acq_rel)) id = want;
  }
  BlockCtx& b = w->block;
  if (static_cast<size_t>(id) >= b.slot_store.size()) {
    b.slot_store.resize(static_cast<size_t>(id) + 16, nullptr);
    b.slots = b.slot_store.data();
    b.nslots = static_cast<unsigned>(b.slot_store.size());
  }
  if (b.slot_store[id]) return b.slot_store[id];
  b.static_bytes += bytes;
  const Launch& l = *w->L;
  if (b.static_bytes > kDefaultSmem)
    w->fiber_fault(cudaErrorLaunchFailure,
                   strf("kernel '%s' uses %zu bytes of static __shared__ memory (including '%s' at "
                        "%s:%d), over the 48 KiB a block may declare statically (use dynamic "
                        "shared memory and cudaFuncSetAttribute for more); %s",
                        l.name, b.static_bytes, site->name, site->file, site->line,
                        w->where().c_str()));
  if (b.static_bytes + l.dyn_bytes > l.smem_limit) {
    // A GPU would refuse this launch; the static size is only known now. The block
    // is abandoned (before most kernels do anything: __shared__ declarations come first).
    refuse_launch(*w->L,
                  strf("launch of kernel '%s' at %s:%d refused (cudaErrorInvalidValue): %zu bytes "
                       "of shared memory (static %zu, including '%s' at %s:%d, + dynamic %zu) are "
                       "over the limit of %zu bytes (raise it with cudaFuncSetAttribute(kernel, "
                       "cudaFuncAttributeMaxDynamicSharedMemorySize, n))",
                       l.name, l.file, l.line, b.static_bytes + l.dyn_bytes, b.static_bytes,
                       site->name, site->file, site->line, l.dyn_bytes, l.smem_limit));
    throw FiberAbort{};
  }
  std::unique_lock<std::mutex> lk = cluster_lock(*w);
  void* p = arena_static(*w, bytes, align, site->name, site->file, site->line);
  if (lk.owns_lock()) {
    lk.unlock();
    cluster_shared_added(*w);
  }
  b.slot_store[id] = p;
  b.used_slots.push_back(id);
  return p;
}

void* dynamic_shared_base() {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("extern __shared__ memory used", Site{"?", 0});
  return w->block.dyn_smem;
}

}  // namespace sim::detail
