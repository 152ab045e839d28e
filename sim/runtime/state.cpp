// Process-wide emulator state: settings from SIM_* variables, the per-thread last
// error and the sticky error, fault reporting, statistics, shared-memory limits and
// sim/sim_api.h. Tested by tests/sim and sim/examples/checks.cu.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <thread>
#include "internal.h"

namespace sim::detail {

Global::Global() {
  if (const char* e = std::getenv("SIM_ORDER")) {
    if (!strcasecmp(e, "forward")) s.order = Order::Forward;
    else if (!strcasecmp(e, "reverse")) s.order = Order::Reverse;
    else if (!strcasecmp(e, "random")) s.order = Order::Random;
    else std::fprintf(stderr, "sim: SIM_ORDER=%s is not forward|reverse|random; using random\n", e);
  }
  if (const char* e = std::getenv("SIM_SEED")) s.seed = std::strtoull(e, nullptr, 0);
  if (const char* e = std::getenv("SIM_WORKERS")) {
    int w = std::atoi(e);
    if (w <= 0) w = static_cast<int>(std::thread::hardware_concurrency());
    s.workers = w < 1 ? 1 : w;
  }
  for (int d = 0; d < kMaxDevices; ++d) s.bus[d] = d;
  // Under Slurm (gres gpu) each rank sees the node GPUs it was given, as a GPU process would:
  // as many devices as CUDA_VISIBLE_DEVICES lists, each on the bus of its index on the node.
  // SIM_DEVICES, when set, wins.
  if (const char* e = std::getenv("CUDA_VISIBLE_DEVICES"); e && !std::getenv("SIM_DEVICES")) {
    int n = 0;
    for (const char* c = e; *c && n < kMaxDevices; ++n) {
      char* end = nullptr;
      const long k = std::strtol(c, &end, 10);
      s.bus[n] = end != c && k >= 0 ? static_cast<int>(k) : n;  // a UUID: its position
      c = std::strchr(c, ',');
      if (!c) { ++n; break; }
      ++c;
    }
    s.devices = n;
  }
  if (const char* e = std::getenv("SIM_DEVICES"); e && *e) {
    // Devices per process, as CUDA_VISIBLE_DEVICES would show a multi-GPU node. A typo here
    // would silently map every rank to device 0: stop instead.
    char* end = nullptr;
    const long k = std::strtol(e, &end, 10);
    if (*end || k < 1 || k > kMaxDevices) {
      std::fprintf(stderr, "sim: SIM_DEVICES=%s is not a device count 1..%d\n", e, kMaxDevices);
      std::fflush(stderr);
      std::_Exit(1);  // not exit(): static destructors could reach G(), still being built
    }
    s.devices = static_cast<int>(k);
  }
  if (const char* e = std::getenv("SIM_COMPUTE_CAPABILITY"); e && *e) {
    // The compute capability the devices report (default 9.0), so that code refusing a feature
    // on an older GPU (--gemm 5 below 8.0) runs its refusal here. Nothing else changes.
    int major = 0, minor = 0;
    char extra = 0;
    if (std::sscanf(e, "%d.%d%c", &major, &minor, &extra) != 2 || major < 1 || major > 99 || minor < 0 || minor > 9) {
      std::fprintf(stderr, "sim: SIM_COMPUTE_CAPABILITY=%s is not MAJOR.MINOR (e.g. 7.5)\n", e);
      std::fflush(stderr);
      std::_Exit(1);
    }
    s.cc_major = major;
    s.cc_minor = minor;
  }
  if (const char* e = std::getenv("SIM_STACK_KB")) {
    long kb = std::atol(e);
    s.stack_bytes = static_cast<size_t>(kb < 16 ? 16 : kb) * 1024;
  }
}

Global& G() {
  static Global* g = new Global();  // never destroyed: usable from static destructors
  return *g;
}
thread_local cudaError_t tl_last_error = cudaSuccess;

namespace {
const char* order_name(Order o) {
  return o == Order::Forward ? "forward" : o == Order::Reverse ? "reverse" : "random";
}
}  // namespace

Settings& settings() { return G().s; }
unsigned long long next_launch_index() { return G().launch_index.fetch_add(1); }

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) tl_last_error = e;
  return e;
}
cudaError_t sticky_error() {
  return static_cast<cudaError_t>(G().sticky.load(std::memory_order_relaxed));
}

std::string strf(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < static_cast<int>(sizeof buf)) return std::string(buf, n < 0 ? 0 : n);
  std::string s(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(s.data(), s.size(), fmt, ap);
  va_end(ap);
  s.resize(static_cast<size_t>(n));
  return s;
}

std::string type_name_of(const char* pretty) {
  // GCC: "const char* sim::detail::type_name() [with T = float*]"
  const char* a = std::strstr(pretty, "T = ");
  if (!a) return pretty;
  a += 4;
  const char* b = std::strrchr(a, ']');
  return std::string(a, b ? static_cast<size_t>(b - a) : std::strlen(a));
}

void report_fault(cudaError_t err, const std::string& msg) {
  Global& g = G();
  const std::string full = "sim: " + msg + " [" + sim::describe_schedule() + "]";
  if (g.s.fault_mode == FaultMode::Abort) {
    std::fprintf(stderr, "%s\n", full.c_str());
    std::fflush(stderr);
    std::abort();
  }
  std::lock_guard<std::mutex> lk(g.m);
  if (g.sticky.load() == 0) {
    g.sticky.store(err);
    g.last_fault = full;
  }
  set_error(err);
}

void add_stats(unsigned long long blocks, unsigned long long threads, unsigned long long barriers,
               unsigned long long switches) {
  Global& g = G();
  g.blocks.fetch_add(blocks, std::memory_order_relaxed);
  g.threads.fetch_add(threads, std::memory_order_relaxed);
  g.barriers.fetch_add(barriers, std::memory_order_relaxed);
  g.switches.fetch_add(switches, std::memory_order_relaxed);
}
void count_launch() { G().launches.fetch_add(1, std::memory_order_relaxed); }

size_t dyn_smem_limit(const void* fn) {
  Global& g = G();
  std::lock_guard<std::mutex> lk(g.m);
  if (fn) {
    auto it = g.dyn_limits.find(fn);
    return it == g.dyn_limits.end() ? kDefaultSmem : static_cast<size_t>(it->second);
  }
  // Kernel known only through deduction: allow the largest limit set for any kernel.
  size_t m = kDefaultSmem;
  for (auto& [f, v] : g.dyn_limits) m = std::max(m, static_cast<size_t>(v));
  return m;
}
// Static + dynamic: 48 KiB, or the opt-in maximum once the kernel's dynamic limit has
// been set with cudaFuncSetAttribute (to any value).
size_t total_smem_limit(const void* fn) {
  Global& g = G();
  std::lock_guard<std::mutex> lk(g.m);
  const bool set = fn ? g.dyn_limits.count(fn) != 0 : !g.dyn_limits.empty();
  return set ? kOptinSmem : kDefaultSmem;
}
std::string kernel_key(const LaunchParams& p) {
  return p.fn ? strf("%p", p.fn) : strf("%s@%s:%d", p.name, p.file, p.line);
}
size_t known_static_smem(const std::string& key) {
  std::lock_guard<std::mutex> lk(G().m);
  auto it = G().static_smem.find(key);
  return it == G().static_smem.end() ? 0 : it->second;
}
void record_static_smem(const std::string& key, size_t bytes) {
  std::lock_guard<std::mutex> lk(G().m);
  size_t& v = G().static_smem[key];
  v = std::max(v, bytes);
}
void reset_func_attributes() {
  {
    std::lock_guard<std::mutex> lk(G().m);
    G().dyn_limits.clear();
  }
  cluster_reset_attributes();  // cluster.cpp: all but the shapes of __cluster_dims__
}

bool stream_valid(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return true;
  std::lock_guard<std::mutex> lk(G().m);
  return G().streams.count(s) != 0;
}

}  // namespace sim::detail

using namespace sim::detail;

// ---- sim/sim_api.h ----
namespace sim {
void set_order(Order o, unsigned long long seed) {
  Global& g = G();
  g.s.order = o;
  g.s.seed = seed;
  g.launch_index.store(0);  // replaying a schedule does not depend on earlier launches
}
Order order() { return G().s.order; }
unsigned long long seed() { return G().s.seed; }
std::string describe_schedule() {
  const Settings& s = G().s;
  return strf("order=%s seed=%llu workers=%d streams=%s", order_name(s.order), s.seed, s.workers,
              stream_mode() == StreamMode::Lazy ? "lazy" : "sync");
}
void set_fault_mode(FaultMode m) { G().s.fault_mode = m; }
FaultMode fault_mode() { return G().s.fault_mode; }
std::string last_fault() {
  std::lock_guard<std::mutex> lk(G().m);
  return G().last_fault;
}
void reset() { cudaDeviceReset(); }
void set_workers(int n) { resize_pool(n < 1 ? 1 : n); }
void set_devices(int k) { G().s.devices = k < 1 ? 1 : k > detail::kMaxDevices ? detail::kMaxDevices : k; }
int devices() { return G().s.devices; }
int workers() { return G().s.workers; }
Stats stats() {
  Global& g = G();
  return Stats{g.launches.load(), g.blocks.load(), g.threads.load(), g.barriers.load(),
               g.switches.load()};
}
}  // namespace sim
