// Per-access checks of kernel memory accesses (runtime/checks.cpp): simcc compiles .cu files
// with GCC's -fsanitize=kernel-address in call mode, so every load and store of a .cu file
// calls __asan_{load,store}N_noabort, which this runtime defines. Inside a kernel they check:
//  - shared memory: bounds against the block's arrays (red zones between them, empty space
//    around them), and races between warps (racecheck);
//  - device memory (cudaMalloc allocations): bounds, reads of never-written bytes (initcheck);
//  - globals of .cu files (__device__/__constant__ variables): bounds (GCC's red zones).
// Outside kernels they return at once. Private to the runtime; tested by tests/sim and
// sim/examples/bugs, sim/examples/standard.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sim::detail {

struct Worker;

// Each worker's shared window: its block's shared arrays, at fixed places, with red zones.
inline constexpr size_t kSharedWindowBytes = size_t(1) << 20;

// One block's shared memory on one worker: a reserved window, the block's arrays inside it
// with red zones around each, a byte shadow (1 = addressable) and a race record per byte.
struct RaceByte {  // per byte: different threads may own neighbouring bytes
  uint64_t wgen, rgen;           // barrier interval of the last write / of the reads
  const void *wpc, *rpc, *r2pc;  // code addresses of the writer, a reader, another thread's read
  uint32_t wws, rws, r2ws;       // the warp's sync stamp at each of those accesses
  uint16_t wtid, rtid, r2tid;    // linear thread ids (r2tid: 0xffff when none)
  uint16_t wfence;               // the writer's fence.proxy.async count at the write (wgmma's reads)
  // The byte's value at the latest read seen (snap) and whose it was (lastr: 1 the reader, 2 the
  // other reader, 0 none, or a write seen since). GCC checks the store of a read-modify-write
  // (s[i] += x) only through its load, so a value that changed since a read seen is a store of
  // that reader's that was not seen: it is recorded as that reader's write when noticed.
  uint8_t snap, lastr;
};
struct SharedArray {
  size_t off, size;  // offset from the block's shared base (may be negative: statics sit below)
  const char* name;
  const char* file;
  int line;
};
struct SharedArena {
  char* window = nullptr;  // kWindow bytes, NORESERVE
  char* base = nullptr;    // the dynamic shared memory starts here; static arrays lie below
  uint8_t* ok = nullptr;   // per byte of the window: 0 not addressable, 1 addressable, 2 written
                           // (2 only in race-checked blocks: the uninitialised-read check)
  RaceByte* race = nullptr;  // per byte of the window
  uint64_t gen = 1;        // current barrier interval (never reused)
  uint64_t block_gen = 1;  // the interval the block started in: older race records are stale
  // Per thread of the block: fence.proxy.async calls so far (mod 2^16). A shared byte whose
  // writer has not fenced since writing it is not yet visible to the async proxy (wgmma).
  uint16_t proxy_fences[1024] = {};
  // Per warp of the block: a stamp that changes whenever a warp intrinsic (__syncwarp, a
  // shuffle, a vote, ...) completes for some of its lanes. Two accesses by lanes of one warp in
  // one barrier interval are ordered only if the stamp changed between them.
  uint32_t wstamp[32] = {};
  uint32_t stamps = 0;
  // The first read of shared bytes no thread of the block had written (racecheck's blocks). It
  // is reported when the threads next stop at a barrier (or exit), so that a write by another
  // thread in the same interval is reported as the race it is (a missing barrier) instead.
  bool pu_set = false;
  uintptr_t pu_addr = 0;
  size_t pu_n = 0, pu_first = 0;
  const void* pu_pc = nullptr;
  int pu_tid = 0;
  size_t low = 0;          // bytes used below base (static arrays + red zones)
  size_t dyn = 0;          // dynamic bytes at base
  size_t static_bytes = 0;
  std::vector<SharedArray> arrays;
};
void arena_begin_block(Worker& w, size_t dyn_bytes);  // sets w.block.dyn_smem
void* arena_static(Worker& w, size_t bytes, size_t align, const char* name, const char* file,
                   int line);
void arena_end_block(Worker& w);
// The fault message of a pending uninitialised shared read ("" when none); clears it.
std::string take_pending_uninit(Worker& w);

// Asynchronous copies into shared memory (async_copy.cpp): bytes an issued copy will write are
// pending until the issuing thread waits for it; any access to them before is a fault.
std::string shared_mark_pending(Worker& w, void* p, size_t n);  // "" or why the destination is wrong
void shared_unmark_pending(Worker& w, void* p, size_t n);
std::string async_pending_owner(const Worker& w, uintptr_t addr);  // "thread (3,0,0) issued it at f.cu:12"
void async_block_begin(Worker& w);
void async_block_end(Worker& w);
void async_free(Worker& w);  // ~Worker

// Device allocations (memory.cpp calls these).
struct DevRec;
DevRec* track_device(uintptr_t dev_lo, size_t size, uintptr_t prog, uintptr_t pages_lo,
                     size_t pages_len);
void untrack_device(DevRec* r, uintptr_t pages_lo, size_t pages_len);
// Host-side device work wrote [p, p + n) of a device view (copies, memsets, cuBLAS, MPI).
void mark_written(const void* p, size_t n);
// A device-to-device copy: dst's bytes are as initialised as src's were.
void copy_written(void* dst, const void* src, size_t n);
void mark_allocation_written(const void* p);  // the whole allocation containing p
// A queued collective (runtime/nccl.cpp) will write [p, p + n) of a device view: its bytes count
// as not written until it runs. g_pending_write (set by nccl.cpp, null until then) describes the
// pending writer of a range, "" when none: an initcheck fault or a queued copy on such bytes
// names it.
void mark_unwritten(const void* p, size_t n);
extern std::string (*g_pending_write)(uintptr_t view, size_t n);

// The global-memory race check (checks.cpp): a kernel's writable pointer argument (pointee not
// const) in a race-checked launch; launch_execute brackets the launch with begin/end.
void global_race_arg(const void* view);
// Read-only pointer arguments (pointee const): recorded for the PDL hazard only (a kernel that
// starts early may write what this one still reads), from the first trigger on or, in a PDL
// launch, from the start. volatile pointees: flags (strong accesses, spins watched) in every launch.
void global_race_const_arg(const void* view);
void global_race_volatile_arg(const void* view);
struct Launch;
void global_race_begin(Launch& L);
void global_race_end();

bool racecheck_on();
bool initcheck_on();
// "f.cu:12" (or "function+0x1c in module") for a code address; "" if nothing is known.
std::string code_line(const void* pc);

}  // namespace sim::detail
