// Thread block clusters (compute capability 9.0): the launch's cluster shape and its checks, the
// execution of a clustered launch and the cluster barrier (cooperative_groups::this_cluster()).
// The blocks of one cluster run at once, each on an OS thread of its own with its own fibers, so
// a block waiting at the cluster barrier holds only its own thread; clusters run one after
// another (all at once in a launch that is cooperative too). Checked, as a GPU refuses or leaves
// undefined:
//   - the shape: each dimension divides the grid's, at most 8 blocks (16 with
//     cudaFuncAttributeNonPortableClusterSizeAllowed), the attribute agreeing with the kernel's
//     __cluster_dims__; else the launch is refused with cudaErrorInvalidClusterSize;
//   - a block that exits while the others wait at a cluster barrier, or blocks waiting at
//     different call sites, are a fault naming the barrier (on a GPU they hang).
// Distributed shared memory and its checks: dsmem.cpp. Described in sim/docs/clusters.md; tested
// by tests/sim/test_sim_cluster*.cu.
#include "cluster.h"

#include <algorithm>
#include <latch>
#include <numeric>
#include <thread>

#include "sim/launch_ex.h"

namespace sim::detail {

namespace {
struct FuncCluster {
  unsigned dims[3] = {0, 0, 0};  // __cluster_dims__ or cudaFuncAttributeRequiredCluster*; 0: none
  bool compiled = false;         // dims come from __cluster_dims__ (read only then)
  bool must_be_set = false, non_portable = false;
};
std::mutex g_func_m;
std::map<const void*, FuncCluster>& funcs() {
  static auto* m = new std::map<const void*, FuncCluster>();  // kernels may launch at exit
  return *m;
}
FuncCluster func_cluster(const void* fn) {
  std::lock_guard<std::mutex> lk(g_func_m);
  const auto it = funcs().find(fn);
  return it == funcs().end() ? FuncCluster{} : it->second;
}
}  // namespace

bool register_cluster_dims(const void* fn, const ClusterDims& d, const char* file, int line) {
  if (!fn) return false;
  if (d.x < 1 || d.y < 1 || d.z < 1 || d.x * d.y * d.z > kMaxCluster) {
    std::fprintf(stderr, "sim: %s:%d: __cluster_dims__(%lld, %lld, %lld) is not a cluster shape (1 to %u blocks)\n",
                 file, line, d.x, d.y, d.z, kMaxCluster);
    std::exit(1);  // nvcc rejects it at compile time
  }
  std::lock_guard<std::mutex> lk(g_func_m);
  FuncCluster& f = funcs()[fn];
  f.dims[0] = unsigned(d.x), f.dims[1] = unsigned(d.y), f.dims[2] = unsigned(d.z);
  f.compiled = true;
  return true;
}

cudaError_t cluster_func_attribute(const void* fn, cudaFuncAttribute attr, int value) {
  std::lock_guard<std::mutex> lk(g_func_m);
  FuncCluster& f = funcs()[fn];
  switch (attr) {
    case cudaFuncAttributeNonPortableClusterSizeAllowed: f.non_portable = value != 0; return cudaSuccess;
    case cudaFuncAttributeClusterDimMustBeSet: f.must_be_set = value != 0; return cudaSuccess;
    case cudaFuncAttributeClusterSchedulingPolicyPreference:
      if (value >= 0 && value <= 2) return cudaSuccess;
      return refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute",
                    "cudaFuncAttributeClusterSchedulingPolicyPreference = %d is not in 0..2", value);
    default: break;
  }
  const int i = int(attr) - int(cudaFuncAttributeRequiredClusterWidth);  // width, height, depth
  if (f.compiled)
    return refuse(cudaErrorNotPermitted, "cudaFuncSetAttribute",
                  "the kernel's cluster shape is fixed by __cluster_dims__(%u, %u, %u)", f.dims[0], f.dims[1],
                  f.dims[2]);
  if (value < 0 || unsigned(value) > kMaxCluster)
    return refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute", "required cluster dimension %d is not in 0..%u",
                  value, kMaxCluster);
  f.dims[i] = unsigned(value);
  return cudaSuccess;
}

void cluster_reset_attributes() {
  std::lock_guard<std::mutex> lk(g_func_m);
  for (auto it = funcs().begin(); it != funcs().end();) {
    if (!it->second.compiled) {
      it = funcs().erase(it);
      continue;
    }
    it->second.must_be_set = it->second.non_portable = false;
    ++it;
  }
}

namespace {
bool refuse_cluster(LaunchParams& p, const std::string& why) {
  launch_refused(p, cudaErrorInvalidClusterSize, "cluster shape %ux%ux%u: %s", p.cluster[0], p.cluster[1],
                 p.cluster[2], why.c_str());
  return false;
}
}  // namespace

bool cluster_config_ok(LaunchParams& p) {
  const FuncCluster f = p.fn ? func_cluster(p.fn) : FuncCluster{};
  const bool given = p.cluster[0] != 0, fixed = f.dims[0] && f.dims[1] && f.dims[2];
  if (given && fixed && (p.cluster[0] != f.dims[0] || p.cluster[1] != f.dims[1] || p.cluster[2] != f.dims[2]))
    return refuse_cluster(p, strf("the kernel requires %ux%ux%u (%s), and a launch may not change it", f.dims[0],
                                  f.dims[1], f.dims[2], f.compiled ? "__cluster_dims__" : "cudaFuncAttributeRequiredCluster*"));
  if (!given && !fixed && f.must_be_set)
    return refuse_cluster(p, "the kernel has cudaFuncAttributeClusterDimMustBeSet and the launch gives no cluster shape");
  if (!given)
    for (int i = 0; i < 3; ++i) p.cluster[i] = fixed ? f.dims[i] : 1;
  const unsigned n = p.cluster[0] * p.cluster[1] * p.cluster[2];
  if (n > kMaxCluster)
    return refuse_cluster(p, strf("%u blocks, over the %u a cluster may have on the device", n, kMaxCluster));
  if (n > kPortableCluster && !f.non_portable)
    return refuse_cluster(p, strf("%u blocks, over the portable %u; larger clusters need cudaFuncSetAttribute(kernel, "
                                  "cudaFuncAttributeNonPortableClusterSizeAllowed, 1)",
                                  n, kPortableCluster));
  const unsigned g[3] = {p.grid.x, p.grid.y, p.grid.z};
  for (int i = 0; i < 3; ++i)
    if (g[i] % p.cluster[i])
      return refuse_cluster(p, strf("the grid %ux%ux%u is not a whole number of clusters (dimension %c: %u is no "
                                    "multiple of %u)",
                                    g[0], g[1], g[2], "xyz"[i], g[i], p.cluster[i]));
  return true;
}

cudaError_t occupancy_max_active_clusters(int* n, const void* fn, const cudaLaunchConfig_t* cfg) {
  if (!n || !cfg) return refuse(cudaErrorInvalidValue, "cudaOccupancyMaxActiveClusters", "an argument is NULL");
  LaunchParams p{"kernel", "?", 0, cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes, nullptr, fn};
  for (unsigned i = 0; i < cfg->numAttrs && cfg->attrs; ++i)
    if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      p.cluster[0] = cfg->attrs[i].val.clusterDim.x;
      p.cluster[1] = cfg->attrs[i].val.clusterDim.y;
      p.cluster[2] = cfg->attrs[i].val.clusterDim.z;
    }
  p.grid = dim3(kMaxCluster, kMaxCluster, kMaxCluster);  // any multiple: the grid is not asked about
  if (!cluster_config_ok(p)) return cudaPeekAtLastError();
  int per_sm = 0, sms = 0, dev = 0;
  cudaGetDevice(&dev);
  const int threads = int(cfg->blockDim.x * cfg->blockDim.y * cfg->blockDim.z);
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, cfg->dynamicSmemBytes) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return cudaPeekAtLastError();
  *n = per_sm * sms / int(p.cluster[0] * p.cluster[1] * p.cluster[2]);
  return cudaSuccess;
}

// ---- places of blocks in clusters ----------------------------------------------------------
unsigned long long cluster_block(const Launch& L, unsigned long long c, unsigned r) {
  const dim3 C = L.cluster, G = L.grid;
  const unsigned long long gx = G.x / C.x, gy = G.y / C.y;  // the grid of clusters
  const unsigned long long cx = c % gx, cy = (c / gx) % gy, cz = c / (gx * gy);
  const unsigned long long x = cx * C.x + r % C.x, y = cy * C.y + (r / C.x) % C.y, z = cz * C.z + r / (C.x * C.y);
  return x + G.x * (y + static_cast<unsigned long long>(G.y) * z);
}
void cluster_place(const Launch& L, unsigned long long b, unsigned long long* c, unsigned* r) {
  const dim3 C = L.cluster, G = L.grid;
  const unsigned long long x = b % G.x, y = (b / G.x) % G.y, z = b / (static_cast<unsigned long long>(G.x) * G.y);
  const unsigned long long gx = G.x / C.x, gy = G.y / C.y;
  *c = x / C.x + gx * (y / C.y + gy * (z / C.z));
  *r = unsigned(x % C.x + C.x * ((y % C.y) + C.y * (z % C.z)));
}
std::string cluster_block_name(const Launch& L, unsigned long long b) {
  const dim3 G = L.grid;
  return strf("(%llu,%llu,%llu)", b % G.x, (b / G.x) % G.y, b / (static_cast<unsigned long long>(G.x) * G.y));
}

// ---- execution -------------------------------------------------------------------------------
void cluster_block_begin(Worker& w, unsigned long long b) {
  Launch& L = *w.L;
  unsigned long long c = 0;
  unsigned r = 0;
  cluster_place(L, b, &c, &r);
  ClusterState& cs = L.clusters[c];
  {
    std::lock_guard<std::mutex> lk(cs.m);
    ClusterMember& m = cs.mem[r];
    m.w = &w;
    m.started = true;
    m.block = b;
  }
  cs.cv.notify_all();
  w.cluster = &cs;
  w.crank = r;
}

// At the very end of a block (its shared memory released): the block's worker, and so its
// shared window, stays until every block of the cluster has ended (an aborted launch may leave
// some unstarted: its rank threads keep their workers until all are done, run_clusters).
void cluster_block_done(Worker& w) {
  ClusterState& cs = *w.cluster;
  const Launch& L = *w.L;
  std::unique_lock<std::mutex> lk(cs.m);
  while (cs.finished < L.csize && !(L.aborted.load() && !L.cooperative))
    cs.cv.wait_for(lk, std::chrono::milliseconds(50));
  w.cluster = nullptr;
}

std::unique_lock<std::mutex> cluster_lock(Worker& w) {
  return w.cluster ? std::unique_lock<std::mutex>(w.cluster->m) : std::unique_lock<std::mutex>();
}
void cluster_shared_added(Worker& w) {
  if (w.cluster) w.cluster->cv.notify_all();  // a block may wait for the array in map_shared_rank
}

void run_clusters(Launch& L) {
  const unsigned long long nclusters = L.nblocks / L.csize;
  std::unique_ptr<ClusterState[]> states(new ClusterState[nclusters]);
  L.clusters = states.get();
  if (L.cooperative) {
    run_cooperative(L);  // every block at once: every cluster at once
  } else {
    std::vector<unsigned long long> order(nclusters);
    std::iota(order.begin(), order.end(), 0ull);
    if (L.order == Order::Reverse) std::reverse(order.begin(), order.end());
    if (L.order == Order::Random) {
      unsigned long long s = L.seed * 0x9e3779b97f4a7c15ull + L.index * 0xd1b54a32d192ed03ull + 7;
      for (unsigned long long i = nclusters; i > 1; --i) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        std::swap(order[i - 1], order[(s >> 11) % i]);
      }
    }
    // One OS thread per rank: thread r runs the block of rank r of every cluster in turn.
    // Each keeps its worker (its shared window) until every rank is done.
    std::vector<std::thread> ranks;
    std::latch done(L.csize);
    ranks.reserve(L.csize);
    for (unsigned r = 0; r < L.csize; ++r)
      ranks.emplace_back([&L, &order, &done, r] {
        Worker* w = this_worker();
        for (const unsigned long long c : order) {
          if (L.aborted.load()) break;
          w->run_block(L, cluster_block(L, c, r));
        }
        done.arrive_and_wait();
      });
    for (std::thread& t : ranks) t.join();
  }
  L.clusters = nullptr;
}

// ---- the cluster barrier -----------------------------------------------------------------------
namespace {
[[noreturn]] void barrier_fault(Worker& w, std::unique_lock<std::mutex>& lk, const std::string& msg) {
  lk.unlock();
  w.L->aborted.store(true);
  w.cluster->cv.notify_all();
  w.fiber_fault(cudaErrorLaunchFailure, msg);
}

// Thread 0 of a block, once its whole block has arrived: wait for every block of the cluster.
void wait_for_cluster(Worker& w, Site s) {
  Launch& L = *w.L;
  ClusterState& cs = *w.cluster;
  std::unique_lock<std::mutex> lk(cs.m);
  const std::string me = cluster_block_name(L, cs.mem[w.crank].block);
  if (cs.arrived == 0) cs.site = s;
  if (!same_site(cs.site, s))
    barrier_fault(w, lk,
                  strf("cluster barrier divergence: block %s (rank %u) waits at cluster.sync() at %s:%d while other "
                       "blocks of its cluster wait at %s:%d (every block of a cluster must reach the same "
                       "cluster.sync()); thread %s of %s",
                       me.c_str(), w.crank, s.file, s.line, cs.site.file, cs.site.line,
                       tid_str(w.ctx[w.cur]).c_str(), w.where().c_str()));
  const unsigned long long my_gen = cs.gen;
  cs.mem[w.crank].at_barrier = true;
  cs.cv.notify_all();  // a block waiting for one of this block's arrays in map_shared_rank
  if (++cs.arrived == L.csize) {
    cs.arrived = 0;
    ++cs.gen;
    cs.syncs.push_back(note_cluster_sync());
    // Every block's thread 0 waits here now, between its block's two barriers: each block's
    // accesses from now on lie in a later interval than its mark (dsmem.cpp).
    for (unsigned r = 0; r < L.csize; ++r) {
      cs.mem[r].epoch = cs.gen;
      cs.mem[r].mark = cs.mem[r].w->arena.gen;
    }
    cs.cv.notify_all();
  }
  while (cs.gen == my_gen) {
    if (L.aborted.load()) {
      lk.unlock();
      throw FiberAbort{};  // another block faulted; its fault was reported
    }
    if (cs.finished > 0 && cs.arrived + cs.finished == L.csize)
      barrier_fault(w, lk,
                    strf("cluster.sync() at %s:%d can never complete: %u of the %u blocks of the cluster of block %s "
                         "exited without reaching it (on a GPU the waiting blocks hang); thread %s of %s",
                         s.file, s.line, cs.finished, L.csize, me.c_str(), tid_str(w.ctx[w.cur]).c_str(),
                         w.where().c_str()));
    cs.cv.wait(lk);
  }
  cs.mem[w.crank].at_barrier = false;
}
}  // namespace

bool cluster_synced_between(unsigned long long x, uint64_t after, unsigned long long y, uint64_t before) {
  const Worker* w = tl_worker;
  if (!w || !w->L || !w->L->clusters) return false;
  const Launch& L = *w->L;
  unsigned long long cx = 0, cy = 0;
  unsigned r = 0;
  cluster_place(L, x, &cx, &r);
  cluster_place(L, y, &cy, &r);
  if (cx != cy) return false;
  ClusterState& cs = L.clusters[cx];
  std::lock_guard<std::mutex> lk(cs.m);
  const auto it = std::upper_bound(cs.syncs.begin(), cs.syncs.end(), after);
  return it != cs.syncs.end() && *it <= before;
}

void cluster_sync(Site s) {
  Worker* w = tl_worker;
  if (!w || !w->in_block) outside_kernel("cooperative_groups::cluster_group::sync()", s);
  syncthreads(s);  // the whole block has arrived (divergence within the block is checked here)
  if (!w->cluster) return;  // a launch without clusters: each block is a cluster of one
  if (w->cur == 0) wait_for_cluster(*w, s);
  syncthreads(s);  // the block goes on once thread 0 has seen every block of its cluster arrive
}

dim3 cluster_shape() {
  const Worker* w = tl_worker;
  return w && w->in_block && w->L ? w->L->cluster : dim3(1, 1, 1);
}
}  // namespace sim::detail
