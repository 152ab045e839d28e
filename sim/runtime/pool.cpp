// Kernel launches: configuration checks, pointer-argument checks, block order,
// and the pool of worker OS threads (the calling thread is worker 0; SIM_WORKERS=N
// adds N-1 helpers, created once and reused). Tested by tests/sim and examples.
#include <cstring>
#include <unistd.h>
#include <condition_variable>
#include <numeric>
#include <thread>
#include "internal.h"

namespace sim::detail {

unsigned long long Launch::block_at(unsigned long long i) const {
  switch (order) {
    case Order::Forward: return i;
    case Order::Reverse: return nblocks - 1 - i;
    case Order::Random:
      if (!perm.empty()) return perm[i];
      // Very large grids: an affine permutation (odd multiplier, power-of-two walk).
      {
        unsigned long long p2 = 1;
        while (p2 < nblocks) p2 <<= 1;
        unsigned long long x = i;
        do x = (x * (seed | 1) * 2654435761ull + (seed >> 7)) & (p2 - 1);
        while (x >= nblocks);
        return x;
      }
  }
  return i;
}

bool launch_prepare(LaunchParams& p) {
  if (const cudaError_t e = sticky_error()) {
    set_error(e);
    return false;
  }
  if (tl_worker && tl_worker->in_block)
    device_fault("kernel launch from device code (dynamic parallelism is not emulated)");
  if (!launch_config_ok(p)) return false;  // refused, and why printed in abort mode (api.cpp)
  if (!cluster_config_ok(p)) return false;  // cluster shape refused (cluster.cpp)
  if (!stream_valid(p.stream)) {
    launch_refused(p, cudaErrorInvalidResourceHandle,
                   "stream %p is not a live stream (destroyed, or never created)",
                   static_cast<void*>(p.stream));
    return false;
  }
  // Shared memory over the limit: CUDA refuses the launch with "invalid argument".
  const size_t dyn_limit = dyn_smem_limit(p.fn);
  const size_t known_static = known_static_smem(kernel_key(p));
  if (p.shmem > dyn_limit || known_static + p.shmem > total_smem_limit(p.fn)) {
    if (settings().fault_mode == FaultMode::Abort)
      std::fprintf(stderr,
                   "sim: launch of kernel '%s' at %s:%d refused (cudaErrorInvalidValue): %zu bytes "
                   "of dynamic shared memory (limit %zu)%s\n",
                   p.name, p.file, p.line, p.shmem, dyn_limit,
                   known_static ? strf(" + %zu bytes of static shared memory", known_static).c_str() : "");
    set_error(cudaErrorInvalidValue);
    return false;
  }
  return true;
}

void refuse_launch(Launch& L, const std::string& msg) {
  int none = 0;
  if (L.refused.compare_exchange_strong(none, cudaErrorInvalidValue) &&
      settings().fault_mode == FaultMode::Abort)
    std::fprintf(stderr, "sim: %s\n", msg.c_str());
  L.aborted.store(true);
}

bool check_pointer_arg(const LaunchParams& p, int index, const void* ptr, const char* type_name,
                       const void** view) {
  *view = ptr;
  if (ptr == nullptr) return true;
  if (resolve_kernel_pointer(ptr, view)) {
    const std::string t = type_name_of(type_name);
    // "volatile unsigned int*", "const volatile int*": the pointee's own qualifiers.
    const size_t star = t.rfind('*');
    const std::string pointee = star == std::string::npos ? t : t.substr(0, star);
    if (pointee.find("volatile") != std::string::npos) global_race_volatile_arg(*view);
    if (std::strncmp(t.c_str(), "const ", 6) != 0) global_race_arg(*view);
    else global_race_const_arg(*view);
    return true;
  }
  if (const std::string freed = freed_description(ptr); !freed.empty()) {
    report_fault(cudaErrorIllegalAddress,
                 strf("kernel '%s' argument %d (%s) = %p is not a device pointer: it lies in %s, "
                      "launched at %s:%d",
                      p.name, index,
                      type_name_of(type_name).c_str(), ptr, freed.c_str(), p.file, p.line));
    return false;
  }
  report_fault(cudaErrorIllegalAddress,
               strf("kernel '%s' argument %d (%s) = %p is not a device pointer (host memory?), "
                    "launched at %s:%d",
                    p.name, index, type_name_of(type_name).c_str(), ptr, p.file, p.line));
  return false;
}

namespace {
std::mutex& launch_mutex() {
  static std::mutex m;
  return m;
}

void work(Launch& L) {
  Worker* w = this_worker();
  for (;;) {
    if (L.aborted.load(std::memory_order_relaxed)) break;
    const unsigned long long i = L.next.fetch_add(1);
    if (i >= L.nblocks) break;
    w->run_block(L, L.block_at(i));
  }
}

struct Pool {
  pid_t owner = getpid();  // after fork() (e.g. gtest death tests) the helpers are gone
  std::mutex m;
  std::condition_variable wake, done;
  std::vector<std::thread> threads;
  Launch* job = nullptr;
  unsigned long long generation = 0;
  int running = 0;
  bool stop = false;

  // `seen`: the generation when the helper was created (earlier launches are done).
  void helper(unsigned long long seen) {
    std::unique_lock<std::mutex> lk(m);
    for (;;) {
      wake.wait(lk, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      Launch* L = job;
      if (!L) continue;
      lk.unlock();
      work(*L);
      lk.lock();
      if (--running == 0) done.notify_all();
    }
  }
  bool usable() const { return owner == getpid(); }
  void resize(int helpers) {
    if (!usable()) return;
    {
      std::lock_guard<std::mutex> lk(m);
      stop = true;
    }
    wake.notify_all();
    for (auto& t : threads) t.join();
    threads.clear();
    stop = false;
    for (int i = 0; i < helpers; ++i)
      threads.emplace_back([this, g = generation] { helper(g); });
  }
  void run(Launch& L) {
    {
      std::lock_guard<std::mutex> lk(m);
      job = &L;
      running = static_cast<int>(threads.size());
      ++generation;
    }
    wake.notify_all();
    work(L);
    std::unique_lock<std::mutex> lk(m);
    done.wait(lk, [&] { return running == 0; });
    job = nullptr;
  }
};

// Never destroyed: idle helpers just vanish at exit, and a forked child (whose
// copies of the helpers' condition variables have waiters) never tears it down.
Pool& pool() {
  static Pool* p = new Pool();
  return *p;
}
}  // namespace

void resize_pool(int workers) {
  std::lock_guard<std::mutex> lk(launch_mutex());
  settings().workers = workers;
  pool().resize(workers - 1);
}

void launch_execute(const LaunchParams& p, void (*invoke)(void*), void* state) {
  std::lock_guard<std::mutex> lk(launch_mutex());
  const Settings& s = settings();
  Launch L;
  L.invoke = invoke;
  L.state = state;
  L.grid = p.grid;
  L.block = p.block;
  L.nthreads = p.block.x * p.block.y * p.block.z;
  L.nblocks = static_cast<unsigned long long>(p.grid.x) * p.grid.y * p.grid.z;
  L.dyn_bytes = p.shmem;
  L.smem_limit = total_smem_limit(p.fn);
  L.name = p.name;
  L.file = p.file;
  L.line = p.line;
  L.order = s.order;
  L.seed = s.seed;
  L.index = next_launch_index();
  L.racecheck = racecheck_launch(p);
  L.cooperative = p.cooperative;
  L.cluster = dim3(p.cluster[0] ? p.cluster[0] : 1, p.cluster[1] ? p.cluster[1] : 1, p.cluster[2] ? p.cluster[2] : 1);
  L.csize = L.cluster.x * L.cluster.y * L.cluster.z;
  if (L.order == Order::Random && L.nblocks <= (1ull << 24)) {
    L.perm.resize(L.nblocks);
    std::iota(L.perm.begin(), L.perm.end(), 0u);
    unsigned long long r = L.seed * 0x9e3779b97f4a7c15ull + L.index * 0xd1b54a32d192ed03ull + 1;
    for (unsigned long long i = L.nblocks; i > 1; --i) {
      r ^= r << 13;
      r ^= r >> 7;
      r ^= r << 17;
      std::swap(L.perm[i - 1], L.perm[(r >> 11) % i]);
    }
  }
  count_launch();
  pdl_launch_begin(L, p);
  global_race_begin(L);  // clears the list of arguments in any case
  Pool& P = pool();
  if (static_cast<int>(P.threads.size()) != s.workers - 1) P.resize(s.workers - 1);
  if (L.csize > 1)
    run_clusters(L);  // cooperative or not
  else if (L.cooperative)
    run_cooperative(L);
  else if (s.workers <= 1 || L.nblocks == 1 || !P.usable())
    work(L);
  else
    P.run(L);
  global_race_end();
  pdl_launch_end(L, p);
  close_opened_host_views();
  check_launch_redzones(L.name, L.file, L.line);
  if (L.max_static.load()) record_static_smem(kernel_key(p), L.max_static.load());
  if (const int e = L.refused.load()) set_error(static_cast<cudaError_t>(e));
}

}  // namespace sim::detail
