// Private declarations shared by the emulator runtime's .cpp files: per-thread and
// per-block records, the Worker (one per OS thread that runs blocks, owning its
// fibers), global settings and fault reporting. Exercised by tests/sim.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include "sim/cuda_sim.h"
#include "checks.h"

#if SIM_FIBER_UCONTEXT
#include <ucontext.h>
#else
#include <boost/context/detail/fcontext.hpp>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif

struct CUstream_st {
  unsigned flags;
  // Lazy stream mode (runtime/lazy.cpp): work queued on this stream and not yet run. Item k
  // (1-based, in enqueue order) has run once done >= k. Guarded by lazy.cpp's mutex.
  std::deque<std::function<void()>> pending{};
  unsigned long long enqueued = 0, done = 0;
};
struct CUevent_st {
  unsigned flags;
  bool recorded;
  std::chrono::steady_clock::time_point t;
  // Lazy stream mode: the stream and queue position of the latest record still to run.
  CUstream_st* lazy_stream = nullptr;
  unsigned long long lazy_seq = 0;
  bool in_graph = false;  // recorded inside a captured graph: its position is not tracked
};


namespace sim::detail {

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

constexpr int kMaxThreads = 1024;
constexpr size_t kDefaultSmem = 49152;   // sharedMemPerBlock
constexpr size_t kOptinSmem = 232448;    // sharedMemPerBlockOptin (227 KiB)
constexpr int kMaxDevices = 64;          // SIM_DEVICES at most

enum ThreadState : uint8_t { kReady, kAtBarrier, kAtWarp, kExited, kFaulted };

struct ThreadCtx : ThreadPub {
  uint8_t state;
  uint8_t bar_kind;  // 0 __syncthreads, 1 _count, 2 _and, 3 _or
  int pred;
  Site site;  // barrier or warp-op call site
  int wkind;
  unsigned wmask;
  int wparam, wwidth;
  unsigned wsize;
  unsigned long long wvalue, result;
  // Programmatic dependent launch (launch_ex.cpp): this thread called
  // cudaGridDependencySynchronize(), so the kernels before it on its stream are complete for it.
  uint8_t pdl_waited;
  // A spin on a volatile word (checks.cpp): the word, the value it kept and how many reads in a row.
  uintptr_t spin_word;
  uint32_t spin_value, spin_reads;
  std::chrono::steady_clock::time_point spin_since;
  // Flag words (volatile) read since the thread's last __threadfence() (race-checked launches).
  uintptr_t flags_read[8];
  uint8_t nflags;
};

struct WarpGroup {  // lanes that have arrived at one warp op (same kind, mask, site)
  unsigned mask, arrived;
  int kind;
  unsigned size;
  Site site;
};
struct WarpState {
  unsigned exist, exited;
  int ngroups;
  WarpGroup groups[32];
};

struct Launch {  // one kernel launch, shared by all workers
  void (*invoke)(void*);
  void* state;
  dim3 grid, block;
  unsigned nthreads;
  unsigned long long nblocks;
  size_t dyn_bytes, smem_limit;
  const char* name;
  const char* file;
  int line;
  Order order;
  unsigned long long seed, index;
  std::vector<unsigned> perm;  // block order in random mode
  std::atomic<unsigned long long> next{0};
  std::atomic<bool> aborted{false};
  std::atomic<int> refused{0};            // cudaError_t of a launch refused while running
  std::atomic<size_t> max_static{0};      // largest static __shared__ use of a block
  bool racecheck = false;                 // shared-memory race check on (checks.cpp)
  bool cooperative = false;               // cudaLaunchCooperativeKernel: all blocks at once (coop.cpp)
  struct GridBarrier* grid_bar = nullptr; // its grid barrier's state (coop.cpp)
  // Thread block clusters (cluster.cpp): the shape, its block count, and one state per cluster
  // (null when the launch is not clustered: every block is a cluster of one).
  dim3 cluster{1, 1, 1};
  unsigned csize = 1;
  struct ClusterState* clusters = nullptr;
  // Programmatic dependent launch (launch_ex.cpp, checks.cpp). race_id: this launch's records in
  // the global race check (0: not race-checked). pdl_primary: the race-checked launches whose
  // accesses may overlap what a thread does before cudaGridDependencySynchronize() (the previous
  // kernel of the stream, and the one before it when that kernel let its successor start before
  // it waited itself).
  bool pdl = false;
  uint64_t race_id = 0;
  uint64_t pdl_primary[2] = {0, 0};
  std::atomic<bool> triggered{false};     // some block called cudaTriggerProgrammaticLaunchCompletion()
  std::atomic<bool> early_trigger{false}; // ... before its thread's own cudaGridDependencySynchronize()
  unsigned long long block_at(unsigned long long i) const;
};
// A cooperative launch: every block on an OS thread of its own, all resident at once, so a
// grid barrier can wait for all of them (coop.cpp).
void run_cooperative(Launch& L);
// A clustered launch (cluster.cpp): the blocks of one cluster run at once, each on an OS thread
// of its own; clusters run one after another (all at once when the launch is cooperative too).
void run_clusters(Launch& L);
// Around one block of a clustered launch (called by Worker::run_block): its place in its
// cluster; at its end, the checks of distributed shared memory still in use.
void cluster_block_begin(Worker& w, unsigned long long b);
void cluster_block_end(Worker& w);
void cluster_block_done(Worker& w);  // after its shared memory is released: waits for the cluster
// Held around a static __shared__ allocation of a clustered block (another block of the
// cluster may look its arrays up); an empty lock otherwise.
std::unique_lock<std::mutex> cluster_lock(Worker& w);
void cluster_shared_added(Worker& w);  // after such an allocation, the lock released
// A load or store at a that lies in the shared window of another block of w's cluster:
// checked (races, an owner gone) and true; false when a is no such address.
bool cluster_remote_access(Worker& w, uintptr_t a, size_t n, bool write, const void* pc);
// The block's own race-checked shared access: checked against other blocks' accesses to it.
void cluster_local_access(Worker& w, size_t off, size_t n, bool write, const void* pc);
cudaError_t cluster_func_attribute(const void* fn, cudaFuncAttribute attr, int value);
void cluster_reset_attributes();  // cudaDeviceReset: what cudaFuncSetAttribute set is gone
// The global race check's view of a released grid barrier: accesses before it in any block are
// ordered before accesses after it in any block (checks.cpp).
void note_grid_sync();
// The same for a released cluster barrier: its place in the check's order (checks.cpp); and
// whether one of the cluster of blocks x and y was released after `after` and no later than
// `before` (cluster.cpp; false for blocks of different clusters).
uint64_t note_cluster_sync();
bool cluster_synced_between(unsigned long long x, uint64_t after, unsigned long long y, uint64_t before);

// Thrown by a fault found inside a fiber (FaultMode::Record): unwinds the kernel's
// frames back to Worker::run_thread, so nothing the fiber owns leaks.
struct FiberAbort {};

struct Fiber {
#if SIM_FIBER_UCONTEXT
  ucontext_t uc;
#else
  boost::context::detail::fcontext_t fc = nullptr;
#endif
  void* fake_stack = nullptr;  // AddressSanitizer's fake stack of this fiber
  char* map = nullptr;         // mmap'd region, guard page first
  size_t map_size = 0;
  char* stack_lo = nullptr;
  size_t stack_size = 0;
};

struct BlockCtx : BlockPub {
  size_t static_bytes = 0;
  std::vector<void*> slot_store;
  std::vector<int> used_slots;
};

struct Worker {
  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // --- scheduler side (block.cpp) ---
  void run_block(Launch& L, unsigned long long b);
  // --- fiber side ---
  [[noreturn]] void fiber_fault(cudaError_t err, const std::string& msg);
  unsigned long long warp_arrive(Site s, int kind, unsigned mask, unsigned long long v,
                                 unsigned size, int param, int width);
  std::string where() const;  // "kernel 'k' (launched at f:l), block (x,y,z)"

  // --- fibers (fiber.cpp) ---
  void ensure_fibers(int n);
  void reset_fiber(int i);
  inline void resume(int i);  // scheduler -> fiber i, until it yields
  inline void yield();        // fiber -> scheduler
  void run_thread();          // body of a fiber: run the kernel for ctx[cur]

  // state of the block being run
  Launch* L = nullptr;
  bool in_block = false;
  bool failed = false;
  int cur = -1;
  unsigned n = 0;
  std::unique_ptr<ThreadCtx[]> ctx;
  std::unique_ptr<WarpState[]> warps;
  BlockCtx block;
  SharedArena arena;  // the block's shared memory, its shadow and race records (checks.cpp)
  bool race = false;  // this block's shared accesses are race-checked (racecheck_block)
  bool pdl_triggered = false;  // the block called cudaTriggerProgrammaticLaunchCompletion()
  struct AsyncState* async = nullptr;  // the block's asynchronous copies in flight (async_copy.cpp)
  struct ClusterState* cluster = nullptr;  // the block's cluster in a clustered launch (cluster.cpp)
  unsigned crank = 0;                       // its rank in that cluster
  std::unique_ptr<int[]> ready, list;
  int nready = 0;
  bool ready_sorted = true;
  unsigned long long rng = 1;

  // fibers
  std::unique_ptr<Fiber[]> fibers;
  int nfibers = 0;
#if SIM_FIBER_UCONTEXT
  ucontext_t sched_uc;
#else
  boost::context::detail::fcontext_t sched_fc = nullptr;
#endif
  void* sched_fake = nullptr;
  const void* sched_stack_lo = nullptr;
  size_t sched_stack_size = 0;

  // statistics, flushed to the global counters after each block
  unsigned long long n_switches = 0, n_barriers = 0;

 private:
  void schedule();
  bool release_barrier(int nexit);
  void release_fast(Site s);
  void on_exit(int t);
  void complete(int warp, const WarpGroup& g, int self);
  void deadlock_fault();
  void fault_here(cudaError_t err, const std::string& msg);  // scheduler side
  void free_block_memory();
};

inline bool same_site(Site a, Site b) {
  return a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}
inline std::string tid_str(const ThreadCtx& c) {
  return strf("(%u,%u,%u)", c.thread_idx.x, c.thread_idx.y, c.thread_idx.z);
}
[[noreturn]] void outside_kernel(const char* what, Site s);

extern __thread Worker* tl_worker;
Worker* this_worker();  // the calling OS thread's worker, created on first use

// ---- global state (state.cpp) ----
struct Settings {
  Order order = Order::Random;
  unsigned long long seed = 1;
  FaultMode fault_mode = FaultMode::Abort;
  int workers = 1;
  int devices = 1;  // SIM_DEVICES: devices the runtime presents (one host memory underneath)
  int bus[64] = {};  // CUDA_VISIBLE_DEVICES: each device's index on the node (its PCI bus - 1)
  int cc_major = 9, cc_minor = 0;  // SIM_COMPUTE_CAPABILITY: what the devices answer
  size_t stack_bytes = 256 * 1024;
};
Settings& settings();
struct Global {  // process-wide emulator state
  std::mutex m;
  Settings s;
  std::atomic<int> sticky{0};
  std::string last_fault;
  std::atomic<unsigned long long> launch_index{0};
  std::atomic<unsigned long long> launches{0}, blocks{0}, threads{0}, barriers{0}, switches{0};
  std::map<const void*, int> dyn_limits;     // cudaFuncAttributeMaxDynamicSharedMemorySize
  std::map<std::string, size_t> static_smem;  // largest static __shared__ use seen, by kernel
  std::map<int, size_t> limits;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;

  Global();  // reads SIM_ORDER, SIM_SEED, SIM_WORKERS, SIM_DEVICES, SIM_STACK_KB
};
Global& G();
extern thread_local cudaError_t tl_last_error;
unsigned long long next_launch_index();
cudaError_t set_error(cudaError_t e);  // sets the calling thread's last error, returns e
cudaError_t sticky_error();            // cudaSuccess unless a kernel fault happened
// Reports a fault: prints and aborts (FaultMode::Abort), or records it and makes
// `err` sticky (FaultMode::Record).
void report_fault(cudaError_t err, const std::string& msg);
// A call the emulator refuses: sets e as the calling thread's last error (not sticky) and, in
// abort mode only, prints one line to stderr, "sim: <call> returned <error name>: <why>"; the
// program goes on. Record mode stays silent (tests provoke these errors on purpose). Returns e.
// Defined in api.cpp.
cudaError_t refuse(cudaError_t e, const char* call, const char* why_fmt, ...)
    __attribute__((format(printf, 3, 4)));
void add_stats(unsigned long long blocks, unsigned long long threads,
               unsigned long long barriers, unsigned long long switches);
void count_launch();
std::string type_name_of(const char* pretty_function);
const char* kind_name(int warp_kind);

// Stream capture (graph.cpp). capture_forbids: cudaSuccess, or -- when a global-mode capture
// is active (or a thread-local one on this thread) and the call is not part of a replay --
// the capture is invalidated and cudaErrorStreamCaptureUnsupported set and returned, as CUDA
// does for synchronous calls (cudaMalloc, cudaDeviceSynchronize, ...). Given the capturing
// stream itself (cudaStreamSynchronize), any capture mode refuses. legacy_work: the call puts
// work on the legacy stream (cudaMemcpy, cudaMemset): CUDA 13.0 answers
// cudaErrorStreamCaptureImplicit for those (seen on an H200, driver 580.159.04).
cudaError_t capture_forbids(cudaStream_t stream = nullptr, bool legacy_work = false);
// The same check without the lazy mode's draining (cudaEventSynchronize drains only up to
// its event's record).
cudaError_t capture_check(cudaStream_t stream = nullptr, bool legacy_work = false);
bool in_replay();                          // inside a graph replay or a lazy node's work
bool is_created_stream(cudaStream_t s);   // not the legacy or per-thread stream
bool capture_active_on(cudaStream_t s);   // s is being captured into a graph
// Lazy stream mode (lazy.cpp; the default; sim::set_stream_mode, SIM_STREAMS=sync|lazy). Work
// queued on a created stream runs only when something forces it, in stream order; a wait node
// forces the waited stream up to the event's record. So a missing cudaStreamWaitEvent shows up
// as stale data, which the synchronous mode can never show.
bool lazy_streams();
// Queues `node` on stream s (not the legacy stream); returns its position (1-based).
unsigned long long lazy_enqueue(CUstream_st* s, std::function<void()> node);
unsigned long long lazy_last_enqueued();  // position of this thread's latest lazy_enqueue
void lazy_drain(CUstream_st* s, unsigned long long upto);  // run s's work up to position upto
// One step of the device: runs s's next queued item if its position is <= upto; false when
// there was none (s is done up to upto). cudaStreamQuery/cudaEventQuery call it.
bool lazy_step(CUstream_st* s, unsigned long long upto);
bool lazy_step_any();  // one item of some stream; false when every queue is empty
void lazy_drain_all();
void lazy_forget_stream(CUstream_st* s);  // before delete: events stop pointing at it
// The queues assume one host thread drives a given stream at a time (as the trainer does per
// rank): a drain on another thread may return while this one still runs a node.
// While one lives on a thread, that thread's synchronous calls are a replay's or an async
// call's own work, not the program's: capture_forbids lets them through.
struct ReplayScope {
  ReplayScope();
  ~ReplayScope();
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;
};

// shared memory limits (api.cpp)
size_t dyn_smem_limit(const void* fn);
size_t total_smem_limit(const void* fn);
std::string kernel_key(const LaunchParams& p);
size_t known_static_smem(const std::string& key);
void record_static_smem(const std::string& key, size_t bytes);
// A launch found invalid only while it runs (static + dynamic shared memory over the
// limit): like CUDA's refused launch, a non-sticky error for the launching thread.
void refuse_launch(Launch& L, const std::string& msg);
void reset_func_attributes();

// ---- device memory views (devmem.cpp) ----
// A cudaMalloc allocation is one memfd mapped twice: `host` (PROT_NONE; the program's
// pointer is host + kRedzone) and `dev` (read-write between two guard pages; device work uses
// dev + kRedzone). Both views hold kRedzone bytes of kRedzoneByte before the data and at
// least kRedzone after it, up to file_bytes.
struct DeviceMapping {
  char* host = nullptr;
  char* dev = nullptr;
  size_t file_bytes = 0;
};
constexpr size_t kRedzone = 256;  // also keeps cudaMalloc's 256-byte alignment
constexpr unsigned char kRedzoneByte = 0xFB;
bool map_device(size_t size, DeviceMapping* m);  // false: out of memory
void unmap_device(const DeviceMapping& m);
// "" if both red zones are intact; else what was overwritten (and the zones are restored).
std::string check_redzones(const DeviceMapping& m, size_t size);
void close_opened_host_views();  // after a launch: re-fence host views a kernel had to open
void install_segv_handler();
// For the SIGSEGV handler (lock-free or try-lock only): the allocation whose host view, red
// zones or guard pages contain address a.
struct FaultedAlloc {
  uintptr_t base = 0;       // the program's pointer
  size_t size = 0;
  DeviceMapping map;
  bool in_host_view = false;
  uintptr_t host_addr = 0;  // a, as an address of the host view (what the program sees)
};
bool lookup_fault_address(uintptr_t a, FaultedAlloc* out);
bool describe_stack_overflow(uintptr_t a);  // fiber.cpp: prints and returns true if a is one

// ---- pinned memory under queued async copies (pinned.cpp) ----
void* pinned_alloc(size_t size);  // cudaMallocHost memory: its own pages (mmap)
void pinned_free(void* p, size_t size);
// A cudaMemcpyAsync queued in the lazy mode whose host side [host, host + n) lies in pinned
// memory: its pages are protected until pin_release(id) (the copy runs). 0: nothing armed.
unsigned long long pin_arm(const void* host, size_t n, bool copy_writes, uintptr_t alloc, size_t alloc_size,
                           const void* dst, const void* src, int kind, const void* stream, const void* pc);
void pin_release(unsigned long long id);

// ---- memory registry (memory.cpp) ----
bool is_kernel_accessible(const void* p);
// [p, p + bytes) lies inside one live device-accessible allocation (device, managed, symbol).
bool device_range(const void* p, size_t bytes);
// For messages: the address the program knows for p (a device-view address becomes the
// cudaMalloc address it stands for); p itself otherwise.
const void* program_address(const void* p);
// A kernel's pointer argument: false if it is not device-accessible memory; else *view is the
// address the kernel uses, and the allocation is remembered for the launch's red-zone check.
bool resolve_kernel_pointer(const void* p, const void** view);
// "freed device memory (cudaMalloc allocation 0x... of N bytes, freed by cudaFree at f.cu:9)"
// when p lies in a recently freed allocation and in no live one; "" otherwise.
std::string freed_description(const void* p);
// After a launch: report an out-of-bounds write into a red zone of an allocation the launch
// was given (cudaErrorIllegalAddress, naming the kernel and the allocation).
void check_launch_redzones(const char* kernel, const char* file, int line);
void check_all_redzones(const char* when);  // every allocation (cudaDeviceSynchronize)
// The address device work uses for p (its allocation's device view; p when p is not device
// memory). Host-side implementations of device work (copies, the emulated cuBLAS) call it on
// every device pointer before touching memory.
void* device_view(const void* p);
void free_all_allocations();
// How many cudaDeviceReset (sim::reset) calls this process has made: a cuBLAS handle remembers
// the count at its creation, and one created before a reset is refused after it.
unsigned long long device_resets();
// ---- streams/events (state.cpp) ----
bool stream_valid(cudaStream_t s);

// Whether this launch's shared accesses are race-checked (checks.cpp): SIM_RACECHECK.
struct LaunchParams;
bool racecheck_launch(const LaunchParams& p);
// Within a race-checked launch: every block with SIM_RACECHECK=all, else the first and last
// kRaceEdgeBlocks blocks (by linear index: the edge tiles are where shapes differ).
bool racecheck_block(const Launch& L, unsigned long long b);

// ---- programmatic dependent launch and launch attributes (launch_ex.cpp) ----
// Before a launch runs: its PDL primaries from the stream's previous kernel; after it: the stream
// remembers it. A copy or memset on the stream (or anything on the legacy stream: every
// stream) ends the overlap, since PDL applies between kernels only.
void pdl_launch_begin(Launch& L, const LaunchParams& p);
void pdl_launch_end(const Launch& L, const LaunchParams& p);
void pdl_stream_op(cudaStream_t s);
void pdl_reset();  // cudaDeviceReset

// ---- workers (pool.cpp) ----
void run_launch(Launch& L);
void resize_pool(int workers);

}  // namespace sim::detail
