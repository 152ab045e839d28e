// Per-access checks of kernel loads and stores (see checks.h): shared-memory bounds and races,
// device-memory bounds and initialisation, bounds of .cu globals. GCC's -fsanitize=kernel-address
// (simcc's flags for .cu files) checks an ASan-style shadow byte inline before every access
// (shadow of a = (a >> 3) + kShadowOffset; 0: the 8 bytes are plain memory, 1..7: the first k
// are, negative: look closer) and calls __asan_report_*_noabort, defined here, only for a
// poisoned granule. Poisoned: the shared window (all of it in a race-checked launch, else its
// red zones), device red zones and guard pages, device granules not yet written, the red zones
// of .cu globals. The report functions then do the exact checks, and let the access proceed.
// Tested by tests/sim/test_sim_checks_*.cu, sim/examples/bugs and sim/examples/standard.
#include "checks.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <strings.h>
#include <thread>

#include "internal.h"

#if SIM_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace sim::detail {

// ---- settings ------------------------------------------------------------------------
namespace {
bool env_on(const char* name) {
  const char* e = std::getenv(name);
  return !(e && (!std::strcmp(e, "0") || !strcasecmp(e, "off") || !strcasecmp(e, "no")));
}
// SIM_RACECHECK: 0 off; default: the first kRaceLaunches launches of each kernel configuration
// (name, launch site, grid, block, dynamic shared size); "all": every launch.
int race_mode_from_env() {
  const char* e = std::getenv("SIM_RACECHECK");
  if (e && !strcasecmp(e, "all")) return 2;
  return env_on("SIM_RACECHECK") ? 1 : 0;
}
std::atomic<int> g_racecheck{race_mode_from_env()};
constexpr int kRaceLaunches = 3;
std::atomic<bool> g_initcheck{env_on("SIM_INITCHECK")};
}  // namespace
bool racecheck_on() { return g_racecheck.load(std::memory_order_relaxed) != 0; }

bool racecheck_launch(const LaunchParams& p) {
  const int mode = g_racecheck.load(std::memory_order_relaxed);
  if (mode != 1) return mode == 2;
  static std::mutex m;
  static std::map<std::string, int> seen;
  const std::string key = strf("%s@%s:%d/%u,%u,%u/%u,%u,%u/%zu", p.name, p.file, p.line, p.grid.x, p.grid.y,
                               p.grid.z, p.block.x, p.block.y, p.block.z, p.shmem);
  std::lock_guard<std::mutex> lk(m);
  return seen[key]++ < kRaceLaunches;
}

bool racecheck_block(const Launch& L, unsigned long long b) {
  constexpr unsigned long long kRaceEdgeBlocks = 4;
  if (!L.racecheck) return false;
  return g_racecheck.load(std::memory_order_relaxed) == 2 || b < kRaceEdgeBlocks ||
         b + kRaceEdgeBlocks >= L.nblocks;
}

// ---- the shadow ------------------------------------------------------------------------
#if !SIM_ASAN
namespace {
constexpr uintptr_t kShadowOffset = 0x7fff8000;  // as simcc's -fasan-shadow-offset
constexpr size_t kShadowBytes = size_t(1) << 44;  // shadow of the 47-bit user address space
constexpr int8_t kUnwritten = -6, kDeviceRedzone = -5, kSharedPoison = -8, kGlobalRedzone = -7;
inline int8_t* shadow(uintptr_t a) { return reinterpret_cast<int8_t*>((a >> 3) + kShadowOffset); }

// Before every constructor (.preinit_array): instrumented code reads the shadow from its first
// access on. MAP_NORESERVE: only the pages written (poisoned) take memory.
void map_shadow(int, char**, char**) {
  void* want = reinterpret_cast<void*>(kShadowOffset);
  void* got = mmap(want, kShadowBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (got != want) {
    std::fprintf(stderr, "sim: cannot reserve %zu TiB of address space at %p for the per-access "
                 "checks' shadow (ulimit -v? or something mapped there); build the .cu files with "
                 "-fno-sanitize=kernel-address to run without them\n", kShadowBytes >> 40, want);
    std::_Exit(1);
  }
}
__attribute__((section(".preinit_array"), used)) void (*g_map_shadow)(int, char**, char**) = map_shadow;
}  // namespace

// Shadow of [a, a + n): v for every granule (a granule-aligned).
void shadow_fill(uintptr_t a, size_t n, int8_t v) { std::memset(shadow(a), v, (n + 7) >> 3); }
// [a, a + n) plain memory: 0 for whole granules, the byte count for a partial last one.
void shadow_open(uintptr_t a, size_t n) {
  std::memset(shadow(a), 0, n >> 3);
  if (n & 7) *shadow(a + (n & ~size_t(7))) = static_cast<int8_t>(n & 7);
}
#else
void shadow_fill(uintptr_t, size_t, int8_t) {}
void shadow_open(uintptr_t, size_t) {}
namespace {
constexpr int8_t kUnwritten = 0, kDeviceRedzone = 0, kSharedPoison = 0, kGlobalRedzone = 0;
}
#endif
bool initcheck_on() { return g_initcheck.load(std::memory_order_relaxed); }

// ---- code addresses to source lines ---------------------------------------------------
namespace {
// One line of addr2line's output as "file:line", or "" when it names no usable line.
std::string usable_frame(const char* line) {
  std::string s = line;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (const size_t d = s.find(" (discriminator"); d != std::string::npos) s.resize(d);
  // simcc's temporary copy of a .cu (its #line directives failed for this address): the line
  // would be misleading.
  const bool tmp_copy = s.find("/simcc-") != std::string::npos;
  if (s.empty() || s[0] == '?' || s.find(":?") != std::string::npos || s.find(":0") + 2 == s.size() || tmp_copy)
    return "";
  return s;
}
}  // namespace

std::string code_line(const void* pc) {
  if (!pc) return "";
  static std::mutex m;
  static std::map<const void*, std::string> cache;
  std::lock_guard<std::mutex> lk(m);
  if (auto it = cache.find(pc); it != cache.end()) return it->second;
  std::string out;
  Dl_info info{};
  if (dladdr(pc, &info) && info.dli_fname) {
    const uintptr_t rel = reinterpret_cast<uintptr_t>(pc) - 1 - reinterpret_cast<uintptr_t>(info.dli_fbase);
    std::string exe = info.dli_fname;
    if (exe.empty() || exe.find('/') == std::string::npos) exe = "/proc/self/exe";
    if (access("/usr/bin/addr2line", X_OK) == 0 && exe.find('\'') == std::string::npos) {
      // -i: the inline chain, innermost first. The emulator's own headers (sim::load_whole
      // under __ldg) are skipped; when the access itself is in another header (a helper such
      // as kernels/common/vector_access.h), its caller is named too: "h:15 (inlined into f.cu:33)".
      const std::string cmd = strf("/usr/bin/addr2line -i -e '%s' 0x%lx 2>/dev/null", exe.c_str(),
                                   static_cast<unsigned long>(rel));
      if (FILE* f = popen(cmd.c_str(), "r")) {
        std::vector<std::string> frames;  // usable "file:line", emulator headers left out
        std::string first_any;            // the innermost frame, if every one is the emulator's
        char line[1024] = {};
        while (frames.size() < 2 && std::fgets(line, sizeof line, f)) {
          std::string fr = usable_frame(line);
          if (fr.empty()) continue;
          if (first_any.empty()) first_any = fr;
          if (fr.find("sim/include/sim/") == std::string::npos) frames.push_back(fr);
        }
        if (frames.empty() && !first_any.empty()) frames.push_back(first_any);
        if (!frames.empty()) {
          out = frames[0];
          const std::string file0 = out.substr(0, out.rfind(':'));
          const bool header = file0.ends_with(".h") || file0.ends_with(".cuh") || file0.ends_with(".hpp");
          if (header && frames.size() > 1) out += " (inlined into " + frames[1] + ")";
        }
        pclose(f);
      }
    }
    if (out.empty() && info.dli_sname)
      out = strf("%s+0x%lx", info.dli_sname,
                 static_cast<unsigned long>(reinterpret_cast<uintptr_t>(pc) -
                                            reinterpret_cast<uintptr_t>(info.dli_saddr)));
  }
  cache[pc] = out;
  return out;
}

namespace {
std::string at_line(const void* pc) {
  std::string s = code_line(pc);
  if (s.empty()) return s;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) {
    const std::string d = std::string(cwd) + "/";
    for (size_t k = s.find(d); k != std::string::npos; k = s.find(d, k)) s.erase(k, d.size());
  }
  return " at " + s;
}
std::string past(size_t d) { return d ? strf("%zu bytes past the end of", d) : "right after the end of"; }
std::string thread_str(const Worker& w, unsigned t) {
  const dim3 B = w.block.block_dim;
  return strf("(%u,%u,%u)", t % B.x, (t / B.x) % B.y, t / (B.x * B.y));
}
std::string who(const Worker& w) {  // "thread (x,y,z) of kernel 'k' (block ...), launched at f:l"
  return "thread " + thread_str(w, static_cast<unsigned>(w.cur)) + " of " + w.where();
}
}  // namespace

// ---- shared memory ---------------------------------------------------------------------
namespace {
constexpr size_t kWindow = kSharedWindowBytes;  // per worker
constexpr size_t kBelow = size_t(1) << 19;   // the base sits half-way: statics go below it
constexpr size_t kSharedRedzone = 1024;           // between and around shared arrays

void ensure_arena(SharedArena& a) {
  if (a.window) return;
  void* w = mmap(nullptr, kWindow, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  void* ok = mmap(nullptr, kWindow, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* race = mmap(nullptr, kWindow * sizeof(RaceByte), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (w == MAP_FAILED || ok == MAP_FAILED || race == MAP_FAILED) {
    std::fprintf(stderr, "sim: out of address space for shared memory\n");
    std::abort();
  }
  a.window = static_cast<char*>(w);
  a.base = a.window + kBelow;
  a.ok = static_cast<uint8_t*>(ok);
  a.race = static_cast<RaceByte*>(race);
#if SIM_ASAN
  __asan_poison_memory_region(a.window, kWindow);
#endif
  shadow_fill(reinterpret_cast<uintptr_t>(a.window), kWindow, kSharedPoison);
}
// An array of the block: addressable; plain memory for the inline checks unless the launch is
// race-checked (then every access must reach shared_access).
void open_range(Worker& w, char* p, size_t n) {
  SharedArena& a = w.arena;
#if SIM_ASAN
  __asan_unpoison_memory_region(p, n);
#endif
  std::memset(p, 0xFF, n);  // fresh shared memory is all-ones bytes (NaN for float)
  std::memset(a.ok + (p - a.window), 1, n);
  if (!w.race) shadow_open(reinterpret_cast<uintptr_t>(p), n);
}
}  // namespace

void arena_begin_block(Worker& w, size_t dyn_bytes) {
  SharedArena& a = w.arena;
  ensure_arena(a);
  a.pu_set = false;
  ++a.gen;  // race records of earlier blocks are stale
  a.block_gen = a.gen;
  std::memset(a.proxy_fences, 0, sizeof a.proxy_fences);
  a.low = 0;
  a.static_bytes = 0;
  a.arrays.clear();
  a.dyn = std::min(dyn_bytes, kWindow - kBelow - kSharedRedzone);
  if (a.dyn) open_range(w, a.base, a.dyn);
  // None at all without dynamic shared memory: using it then is out of bounds at once.
  w.block.dyn_smem = dyn_bytes ? a.base : nullptr;
  if (dyn_bytes) a.arrays.push_back(SharedArray{0, a.dyn, "extern __shared__ (dynamic)", nullptr, 0});
}

void* arena_static(Worker& w, size_t bytes, size_t align, const char* name, const char* file,
                   int line) {
  SharedArena& a = w.arena;
  if (align < 16) align = 16;
  size_t low = a.low + kSharedRedzone + bytes;
  low = (low + align - 1) / align * align;
  if (low + kSharedRedzone > kBelow) {
    std::fprintf(stderr, "sim: __shared__ '%s' does not fit the emulator's shared window\n", name);
    std::abort();
  }
  a.low = low;
  a.static_bytes += bytes;
  char* p = a.base - low;
  open_range(w, p, bytes);
  a.arrays.push_back(SharedArray{static_cast<size_t>(p - a.base), bytes, name, file, line});
  return p;
}

void arena_end_block(Worker& w) {
  SharedArena& a = w.arena;
  if (!a.window) return;
  char* lo = a.base - a.low;
  const size_t n = a.low + a.dyn;
  if (n) std::memset(a.ok + (lo - a.window), 0, n);
  if (n) shadow_fill(reinterpret_cast<uintptr_t>(lo), n, kSharedPoison);
#if SIM_ASAN
  if (n) __asan_poison_memory_region(lo, n);
#endif
  a.low = a.dyn = 0;
  w.block.dyn_smem = nullptr;
}

namespace {
// "12 bytes past the end of __shared__ 'tile' (1024 bytes, f.cu:8)" for shared offset off.
std::string shared_relation(const SharedArena& a, long long off, size_t n) {
  const SharedArray* best = nullptr;
  long long dist = 0;
  for (const SharedArray& s : a.arrays) {
    const long long lo = static_cast<long long>(s.off), hi = lo + static_cast<long long>(s.size);
    const long long d = off < lo ? lo - off : off >= hi ? off - hi : 0;
    if (!best || d < dist) best = &s, dist = d;
  }
  const size_t total = a.static_bytes + a.dyn;
  const std::string blk = strf("the block has %zu bytes of shared memory", total);
  if (!best) return "the block has no shared memory";
  const std::string arr =
      best->file ? strf("__shared__ '%s' (%zu bytes, %s:%d)", best->name, best->size, best->file, best->line)
                 : strf("the dynamic shared memory (%zu bytes at launch)", best->size);
  const long long lo = static_cast<long long>(best->off), hi = lo + static_cast<long long>(best->size);
  if (off < lo) return strf("%lld bytes before the start of %s; %s", lo - off, arr.c_str(), blk.c_str());
  if (off >= hi) return strf("%s %s; %s", past(static_cast<size_t>(off - hi)).c_str(), arr.c_str(), blk.c_str());
  return strf("bytes %lld..%lld of %s run past its end; %s", off - lo, off - lo + static_cast<long long>(n) - 1,
              arr.c_str(), blk.c_str());
}

[[noreturn]] __attribute__((noinline)) void shared_oob(Worker& w, uintptr_t addr, size_t n, bool write,
                                                       const void* pc) {
  const SharedArena& a = w.arena;
  const long long off = static_cast<long long>(addr - reinterpret_cast<uintptr_t>(a.base));
  w.fiber_fault(cudaErrorIllegalAddress,
                strf("out-of-bounds shared memory %s%s: %zu bytes %s, %s (cudaErrorIllegalAddress)",
                     write ? "write" : "read", at_line(pc).c_str(), n,
                     shared_relation(a, off, n).c_str(), who(w).c_str()));
}

std::string shared_name(const SharedArena& a, uintptr_t addr) {
  const long long off = static_cast<long long>(addr - reinterpret_cast<uintptr_t>(a.base));
  for (const SharedArray& s : a.arrays)
    if (off >= static_cast<long long>(s.off) && off < static_cast<long long>(s.off + s.size))
      return s.file ? strf("'%s' (%s:%d) byte %lld", s.name, s.file, s.line, off - static_cast<long long>(s.off))
                    : strf("dynamic shared byte %lld", off);
  return strf("shared offset %lld", off);
}

[[noreturn]] __attribute__((noinline)) void race_fault(Worker& w, const char* kind, uintptr_t addr,
                                                       bool write, unsigned other, const void* other_pc,
                                                       bool other_write, const void* pc) {
  const unsigned me = static_cast<unsigned>(w.cur);
  const bool same_warp = me / 32 == other / 32;
  w.fiber_fault(
      cudaErrorLaunchFailure,
      strf("shared memory race (%s hazard) in %s: thread %s (warp %u) %s %s%s, but thread %s (warp %u%s) "
           "%s it%s, with no %s (racecheck; SIM_RACECHECK=0 turns it off)",
           kind, w.where().c_str(), thread_str(w, me).c_str(), me / 32, write ? "wrote" : "read",
           shared_name(w.arena, addr).c_str(), at_line(pc).c_str(), thread_str(w, other).c_str(),
           other / 32, same_warp ? ", the same warp" : "", other_write ? "had written" : "had read",
           at_line(other_pc).c_str(),
           same_warp ? "__syncthreads() or __syncwarp() (or shuffle or vote) between them: the lanes of "
                       "a warp do not run in lockstep since Volta"
                     : "__syncthreads() between them"));
}

// Every byte addressable (1 or 2).
inline bool all_ok(const uint8_t* s, size_t n) {
  if (n == 4) {
    uint32_t v;
    std::memcpy(&v, s, 4);
    return ((v | v >> 1) & 0x01010101u) == 0x01010101u;
  }
  if (n == 8) {
    uint64_t v;
    std::memcpy(&v, s, 8);
    return ((v | v >> 1) & 0x0101010101010101ull) == 0x0101010101010101ull;
  }
  for (size_t i = 0; i < n; ++i)
    if (!s[i]) return false;
  return true;
}

__attribute__((noinline)) void shared_uninit(Worker& w, uintptr_t addr, size_t n, size_t first,
                                             const void* pc) {
  SharedArena& a = w.arena;
  if (a.pu_set) return;
  a.pu_set = true;
  a.pu_addr = addr, a.pu_n = n, a.pu_first = first, a.pu_pc = pc, a.pu_tid = w.cur;
}
}  // namespace

std::string take_pending_uninit(Worker& w) {
  SharedArena& a = w.arena;
  if (!a.pu_set) return "";
  a.pu_set = false;
  const int cur = w.cur;
  w.cur = a.pu_tid;
  const uintptr_t addr = a.pu_addr;
  const size_t n = a.pu_n, first = a.pu_first;
  const void* pc = a.pu_pc;
  std::string msg = strf("uninitialised shared memory read%s: %zu bytes of %s, and no thread of the block has "
                     "written byte %zu of them since the launch; %s (a GPU reads whatever the last block "
                     "left there; initcheck of shared memory in racecheck's blocks, SIM_RACECHECK=0 "
                     "turns it off)",
                     at_line(pc).c_str(), n, shared_name(w.arena, addr).c_str(), first, who(w).c_str());
  w.cur = cur;
  return msg;
}

namespace {

constexpr uint16_t kNone = 0xffff;

// Thread `other` accessed the byte in barrier interval `ogen` with its warp's stamp `ostamp`:
// unordered with the current thread's access (a hazard if one of them writes) when it is
// another thread in the same interval and either of another warp, or of the same warp with
// no warp intrinsic completed for that warp since (lanes are not in lockstep).
inline bool unordered(const Worker& w, uint64_t gen, unsigned me, uint64_t ogen, unsigned other,
                      uint32_t ostamp) {
  if (ogen != gen || other == me || other == kNone) return false;
  return (other >> 5) != (me >> 5) || ostamp == w.arena.wstamp[me >> 5];
}

// The byte changed since reader `who` (1: r, 2: r2) read it and no write was seen: that reader's
// store (the unseen half of a read-modify-write) is checked against the other accesses of
// the interval and becomes the last write.
void inferred_write(Worker& w, RaceByte& r, uintptr_t addr, int who, const void* pc_now) {
  const unsigned x = who == 1 ? r.rtid : r.r2tid;
  const uint64_t xgen = r.rgen;
  const uint32_t xst = who == 1 ? r.rws : r.r2ws;
  const void* xpc = who == 1 ? r.rpc : r.r2pc;
  const int cur = w.cur;
  auto check = [&](uint64_t ogen, unsigned other, uint32_t ost, const void* opc, bool owrite) {
    if (ogen != xgen || ogen != w.arena.gen || other == x || other == kNone) return;
    // The store happened at some time after x's read: it certainly races with `other` only if
    // no warp intrinsic of their warp completed since either access.
    if ((other >> 5) != (x >> 5) || (ost == xst && xst == w.arena.wstamp[x >> 5])) {
      w.cur = static_cast<int>(x);  // the message names the writer as the accessing thread
      race_fault(w, owrite ? "write-after-write" : "write-after-read", addr, true, other, opc, owrite, xpc);
    }
  };
  check(r.wgen, r.wtid, r.wws, r.wpc, true);
  if (who == 1) check(r.rgen, r.r2tid, r.r2ws, r.r2pc, false);
  else check(r.rgen, r.rtid, r.rws, r.rpc, false);
  w.cur = cur;
  (void)pc_now;
  r.wgen = xgen;
  r.wtid = static_cast<uint16_t>(x);
  r.wpc = xpc;
  r.wws = xst;
  r.wfence = w.arena.proxy_fences[x];
}

void race_byte(Worker& w, RaceByte& r, uintptr_t addr, bool write, const void* pc) {
  const uint64_t gen = w.arena.gen;
  const unsigned me = static_cast<unsigned>(w.cur), warp = me >> 5;
  const uint32_t stamp = w.arena.wstamp[warp];
  const uint8_t now = *reinterpret_cast<const uint8_t*>(addr);
  if (r.lastr && r.rgen == gen && now != r.snap) inferred_write(w, r, addr, r.lastr, pc);
  r.lastr = 0;
  if (write) {
    if (unordered(w, gen, me, r.wgen, r.wtid, r.wws))
      race_fault(w, "write-after-write", addr, true, r.wtid, r.wpc, true, pc);
    if (unordered(w, gen, me, r.rgen, r.rtid, r.rws))
      race_fault(w, "write-after-read", addr, true, r.rtid, r.rpc, false, pc);
    if (r.rgen == gen && unordered(w, gen, me, r.rgen, r.r2tid, r.r2ws))
      race_fault(w, "write-after-read", addr, true, r.r2tid, r.r2pc, false, pc);
    r.wgen = gen;
    r.wtid = static_cast<uint16_t>(me);
    r.wpc = pc;
    r.wws = stamp;
    r.wfence = w.arena.proxy_fences[me];
  } else {
    if (unordered(w, gen, me, r.wgen, r.wtid, r.wws))
      race_fault(w, "read-after-write", addr, false, r.wtid, r.wpc, true, pc);
    r.snap = now;
    if (r.rgen != gen) {
      r.rgen = gen;
      r.rtid = static_cast<uint16_t>(me);
      r.rpc = pc;
      r.rws = stamp;
      r.r2tid = kNone;
      r.lastr = 1;
    } else if (r.rtid == me) {
      r.rws = stamp;  // its latest read
      r.rpc = pc;
      r.lastr = 1;
    } else if (r.r2tid == kNone || r.r2tid == me ||
               ((r.r2tid >> 5) == (r.rtid >> 5) && warp != (r.rtid >> 5u))) {  // prefer another warp
      r.r2tid = static_cast<uint16_t>(me);
      r.r2pc = pc;
      r.r2ws = stamp;
      r.lastr = 2;
    }
  }
}

// Shared bytes an asynchronous copy (async_copy.cpp) still writes are marked kPending: any access
// before the issuing thread's wait is a fault, in every block (their granules are poisoned).
constexpr uint8_t kPending = 4;
[[noreturn]] __attribute__((noinline)) void pending_fault(Worker& w, uintptr_t addr, size_t n, bool write,
                                                          const void* pc) {
  size_t i = 0;
  const uint8_t* ok = w.arena.ok + (addr - reinterpret_cast<uintptr_t>(w.arena.window));
  while (i < n && ok[i] != kPending) ++i;
  w.fiber_fault(cudaErrorLaunchFailure,
                strf("shared memory %s%s of %zu bytes at %s before the asynchronous copy that writes it "
                     "completed: %s, and that thread has not waited for it (__pipeline_wait_prior, "
                     "cuda::pipeline's consumer_wait, cp.async.wait_group) with a __syncthreads() after the wait "
                     "for other threads; on a GPU the %s stale data; %s",
                     write ? "write" : "read", at_line(pc).c_str(), n, shared_name(w.arena, addr).c_str(),
                     async_pending_owner(w, addr + i).c_str(),
                     write ? "copy may land after this write and overwrite it with" : "read sees", who(w).c_str()));
}
inline void shared_access(Worker& w, size_t off, uintptr_t addr, size_t n, bool write, const void* pc) {
  SharedArena& a = w.arena;
  if (__builtin_expect(off + n > kWindow || !all_ok(a.ok + off, n), 0)) {
    if (off + n <= kWindow && std::memchr(a.ok + off, kPending, n)) pending_fault(w, addr, n, write, pc);
    shared_oob(w, addr, n, write, pc);
  }
  if (!w.race) return;
  uint8_t* ok = a.ok + off;
  if (write) {
    std::memset(ok, 2, n);
  } else {
    for (size_t i = 0; i < n; ++i)
      if (__builtin_expect(ok[i] != 2, 0)) shared_uninit(w, addr, n, i, pc);
  }
  for (size_t i = 0; i < n; ++i) race_byte(w, a.race[off + i], addr + i, write, pc);
  if (w.cluster) cluster_local_access(w, off, n, write, pc);  // other blocks' DSMEM accesses (cluster.cpp)
}
}  // namespace

// ---- the async proxy: wgmma's shared-memory reads (sim/include/mma.h) ------------------------
// fence.proxy.async by the running thread: its earlier shared stores become visible to the
// async proxy.
void async_proxy_fence() {
  Worker* w = tl_worker;
  if (w && w->in_block && w->cur >= 0) ++w->arena.proxy_fences[w->cur];
}
// The async proxy reads [p, p + n) for `what` at file:line (race-checked blocks only, where every
// shared store is recorded): a byte whose last writer of this block has not executed
// fence.proxy.async since writing it is a fault, as the tensor cores may not see that store.
void async_proxy_read(const void* p, size_t n, const char* what, const char* file, int line) {
  Worker* w = tl_worker;
  if (!w || !w->in_block || w->cur < 0 || !w->race) return;
  SharedArena& a = w->arena;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const size_t off = addr - reinterpret_cast<uintptr_t>(a.window);
  if (off >= kWindow || n > kWindow - off) return;
  for (size_t i = 0; i < n; ++i) {
    const RaceByte& r = a.race[off + i];
    if (r.wgen < a.block_gen || r.wtid == kNone || r.wfence != a.proxy_fences[r.wtid]) continue;
    w->fiber_fault(cudaErrorLaunchFailure,
                   strf("%s at %s:%d in %s reads %s, which thread %s stored%s with no fence.proxy.async by "
                        "that thread after the store: the tensor cores read shared memory through the async "
                        "proxy, which need not see such a store (thread %s waits for the result)",
                        what, file, line, w->where().c_str(), shared_name(a, addr + i).c_str(),
                        thread_str(*w, r.wtid).c_str(), at_line(r.wpc).c_str(), thread_str(*w, w->cur).c_str()));
  }
}

// An asynchronous copy into [p, p + n) of this block's shared memory was issued (pending) or has
// completed (written by the waiting thread next). Pending: "" if every byte lies in one of the
// block's arrays and none is pending already, else why not.
std::string shared_mark_pending(Worker& w, void* p, size_t n) {
  SharedArena& a = w.arena;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const size_t off = addr - reinterpret_cast<uintptr_t>(a.window);
  if (off >= kWindow || off + n > kWindow) return "its destination is not shared memory";
  uint8_t* ok = a.ok + off;
  for (size_t i = 0; i < n; ++i) {
    if (ok[i] == kPending) return strf("byte %zu of its destination is still written by an earlier asynchronous copy (%s)", i,
                                       async_pending_owner(w, addr + i).c_str());
    if (!ok[i]) return strf("its destination runs out of the block's shared arrays: %s",
                            shared_relation(a, static_cast<long long>(addr + i - reinterpret_cast<uintptr_t>(a.base)), n - i).c_str());
  }
  std::memset(ok, kPending, n);
  shadow_fill((addr & ~uintptr_t(7)), ((addr + n + 7) & ~uintptr_t(7)) - (addr & ~uintptr_t(7)), kSharedPoison);
  return "";
}
void shared_unmark_pending(Worker& w, void* p, size_t n) {
  SharedArena& a = w.arena;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const size_t off = addr - reinterpret_cast<uintptr_t>(a.window);
  if (off >= kWindow || off + n > kWindow) return;
  std::memset(a.ok + off, 1, n);
  if (w.race) return;  // the whole window stays poisoned for racecheck
  for (uintptr_t g = addr & ~uintptr_t(7); g < addr + n; g += 8) {
    const uint8_t* gok = a.ok + (g - reinterpret_cast<uintptr_t>(a.window));
    bool open = true;
    for (int i = 0; i < 8 && open; ++i) open = gok[i] != 0 && gok[i] != kPending;
    if (open) shadow_open(g, 8);
  }
}

std::uint64_t block_serial() {
  Worker* w = tl_worker;
  return w ? w->arena.block_gen : 0;
}

// ---- device memory ---------------------------------------------------------------------
// Per 4-byte word of an allocation under the global race check: the last write and the last
// read of the launch (the read's value in snap while no write was seen since it).
struct GlobalRace {
  uint64_t launch;          // the race-checked launch of the records; stale otherwise
  uint64_t wseq, rseq;      // g_seq when they happened (cross-block ordering through fences)
  const void *wpc, *rpc;
  uint32_t wblock, rblock;  // linear block index
  uint32_t wgen, rgen;      // the block's barrier interval (low bits)
  uint32_t wws, rws;        // the warp's sync stamp
  uint32_t snap;
  uint16_t wtid, rtid;      // linear thread index, 0xffff none
  uint8_t lastr, winferred;
  uint8_t atomic;  // an atomic touched the word in this launch: its changes are no plain store
  // For programmatic dependent launch: what this launch did to the word (kWrote, kReadLate: read
  // after its block's cudaTriggerProgrammaticLaunchCompletion()), and the same of the launch that
  // touched it before (plaunch), kept when the record is started for this one.
  uint8_t cflags, pflags;
  uint64_t plaunch;
};
constexpr uint8_t kWrote = 1, kReadLate = 2;
struct DevRec {
  uintptr_t lo;   // device view of byte 0
  size_t size;
  uintptr_t prog;  // the program's address of byte 0
  uint8_t* init;   // 1 per byte written
  GlobalRace* race = nullptr;   // size / 4 records, NORESERVE, made at the first race-checked launch
  uint64_t racing = 0;          // the race-checked launch running with it poisoned, else 0
  uint64_t pdl_rec = 0;         // a read-only argument recorded for the PDL hazard only (that launch)
  uint64_t vol = 0;             // a volatile argument of the running launch: flags (strong accesses)
  bool watched() const { return racing || pdl_rec || vol; }  // poisoned for the launch
};

namespace {
constexpr int kPageBits = 12;
constexpr int kL2Bits = 18;  // 1 GiB of pages per second-level table
constexpr size_t kL1 = size_t(1) << (47 - kPageBits - kL2Bits);
std::atomic<std::atomic<DevRec*>*> g_pages[kL1];
std::mutex g_pages_mutex;

inline DevRec* lookup(uintptr_t a) {
  const uintptr_t pg = a >> kPageBits;
  const uintptr_t i1 = pg >> kL2Bits;
  if (i1 >= kL1) return nullptr;
  std::atomic<DevRec*>* l2 = g_pages[i1].load(std::memory_order_acquire);
  if (!l2) return nullptr;
  return l2[pg & ((uintptr_t(1) << kL2Bits) - 1)].load(std::memory_order_relaxed);
}
void set_pages(uintptr_t lo, size_t len, DevRec* r) {
  std::lock_guard<std::mutex> lk(g_pages_mutex);
  for (uintptr_t pg = lo >> kPageBits; pg < (lo + len + (1u << kPageBits) - 1) >> kPageBits; ++pg) {
    const uintptr_t i1 = pg >> kL2Bits;
    if (i1 >= kL1) return;
    std::atomic<DevRec*>* l2 = g_pages[i1].load();
    if (!l2) {
      if (!r) continue;
      l2 = static_cast<std::atomic<DevRec*>*>(std::calloc(size_t(1) << kL2Bits, sizeof *l2));
      if (!l2) {
        std::fprintf(stderr, "sim: out of memory for the device page map\n");
        std::abort();
      }
      g_pages[i1].store(l2, std::memory_order_release);
    }
    l2[pg & ((uintptr_t(1) << kL2Bits) - 1)].store(r, std::memory_order_relaxed);
  }
}
// The record of a device-view address inside the allocation's data, or null.
inline DevRec* data_rec(uintptr_t a, size_t n) {
  DevRec* r = lookup(a);
  return r && a - r->lo < r->size && n <= r->size - (a - r->lo) ? r : nullptr;
}
}  // namespace

DevRec* track_device(uintptr_t dev_lo, size_t size, uintptr_t prog, uintptr_t pages_lo, size_t pages_len) {
  auto* r = new DevRec{dev_lo, size, prog, static_cast<uint8_t*>(std::calloc(size ? size : 1, 1)), nullptr, 0};
  if (!r->init) {
    delete r;
    return nullptr;
  }
  set_pages(pages_lo, pages_len, r);
  shadow_fill(pages_lo, pages_len, kDeviceRedzone);
  if (initcheck_on()) shadow_fill(dev_lo, size, kUnwritten);
  else shadow_open(dev_lo, size);
  return r;
}
void untrack_device(DevRec* r, uintptr_t pages_lo, size_t pages_len) {
  if (!r) return;
  set_pages(pages_lo, pages_len, nullptr);
  shadow_fill(pages_lo, pages_len, 0);  // the addresses may hold anything next
  std::free(r->init);
  if (r->race) munmap(r->race, (r->size / 4 + 1) * sizeof(GlobalRace));
  delete r;
}
namespace {
// After r->init changed in data bytes [lo, hi): granules whose bytes are all written become
// plain memory for the inline checks. `whole`: every byte of [lo, hi) is known to be written.
void refresh_granules(const DevRec& r, size_t lo, size_t hi, bool whole) {
  if (r.watched()) return;  // every granule stays poisoned until the launch ends (global_race_end)
  for (size_t g = lo & ~size_t(7); g < hi; g += 8) {
    const size_t end = std::min(g + 8, r.size);
    if (whole && g >= lo && g + 8 <= hi && end == g + 8) {  // interior: open a run at once
      size_t run_end = std::min(hi & ~size_t(7), r.size & ~size_t(7));
      shadow_open(r.lo + g, run_end - g);
      g = run_end - 8;
      continue;
    }
    bool all = true;
    for (size_t i = g; i < end && all; ++i) all = r.init[i] != 0;
    if (all) shadow_open(r.lo + g, end - g);
  }
}
}  // namespace

void mark_written(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (DevRec* r = data_rec(a, n)) {
    std::memset(r->init + (a - r->lo), 1, n);
    refresh_granules(*r, a - r->lo, a - r->lo + n, true);
  }
}
void copy_written(void* dst, const void* src, size_t n) {
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  DevRec* rd = data_rec(d, n);
  if (!rd) return;
  if (DevRec* rs = data_rec(s, n)) {
    std::memmove(rd->init + (d - rd->lo), rs->init + (s - rs->lo), n);
    refresh_granules(*rd, d - rd->lo, d - rd->lo + n, false);
  } else {
    mark_written(dst, n);
  }
}
void mark_allocation_written(const void* p) {
  if (DevRec* r = lookup(reinterpret_cast<uintptr_t>(p))) mark_written(reinterpret_cast<void*>(r->lo), r->size);
}
void mark_unwritten(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  DevRec* r = data_rec(a, n);
  if (!r || n == 0) return;
  std::memset(r->init + (a - r->lo), 0, n);
  // The granules that hold these bytes reach the runtime again (their other bytes keep their
  // state in r->init); a watched record is restored from r->init when its launch ends.
  if (initcheck_on() && !r->watched()) {
    const uintptr_t lo = a & ~uintptr_t(7), hi = (a + n + 7) & ~uintptr_t(7);
    shadow_fill(lo, hi - lo, kUnwritten);
  }
}
std::string (*g_pending_write)(uintptr_t view, size_t n) = nullptr;

namespace {
[[noreturn]] __attribute__((noinline)) void global_oob(Worker& w, const DevRec& r, uintptr_t a, size_t n,
                                                       bool write, const void* pc) {
  const uintptr_t prog = r.prog + (a - r.lo);
  std::string rel;
  if (a < r.lo) rel = strf("%zu bytes before the start of", static_cast<size_t>(r.lo - a));
  else if (a >= r.lo + r.size) rel = past(static_cast<size_t>(a - r.lo - r.size));
  else rel = strf("bytes %zu..%zu (past the end) of", static_cast<size_t>(a - r.lo), static_cast<size_t>(a - r.lo + n - 1));
  w.fiber_fault(cudaErrorIllegalAddress,
                strf("out-of-bounds global memory %s%s: %zu bytes at %p, %s cudaMalloc allocation %p "
                     "(%zu bytes), %s (cudaErrorIllegalAddress)",
                     write ? "write" : "read", at_line(pc).c_str(), n, reinterpret_cast<void*>(prog),
                     rel.c_str(), reinterpret_cast<void*>(r.prog), r.size, who(w).c_str()));
}
[[noreturn]] __attribute__((noinline)) void uninit_read(Worker& w, const DevRec& r, uintptr_t a, size_t n,
                                                        const void* pc) {
  size_t first = 0;
  while (first < n && r.init[a - r.lo + first]) ++first;
  if (g_pending_write) {  // bytes a queued collective (ncclAllReduce) has still to write
    const std::string why = g_pending_write(a, n);
    if (!why.empty())
      w.fiber_fault(cudaErrorLaunchFailure,
                    strf("global memory read%s before the collective that writes it ran: %zu bytes at "
                         "byte offset %zu of cudaMalloc allocation %p (%zu bytes), %s; %s",
                         at_line(pc).c_str(), n, static_cast<size_t>(a - r.lo), reinterpret_cast<void*>(r.prog),
                         r.size, why.c_str(), who(w).c_str()));
  }
  w.fiber_fault(cudaErrorLaunchFailure,
                strf("uninitialised global memory read%s: %zu bytes at byte offset %zu of cudaMalloc "
                     "allocation %p (%zu bytes), and no kernel, memset or copy has written byte %zu; %s "
                     "(initcheck; SIM_INITCHECK=0 turns it off)",
                     at_line(pc).c_str(), n, static_cast<size_t>(a - r.lo), reinterpret_cast<void*>(r.prog),
                     r.size, static_cast<size_t>(a - r.lo + first), who(w).c_str()));
}
inline bool all_set(const uint8_t* s, size_t n) {
  if (n == 4) {
    uint32_t v;
    std::memcpy(&v, s, 4);
    return v == 0x01010101u;
  }
  for (size_t i = 0; i < n; ++i)
    if (!s[i]) return false;
  return true;
}
// ---- global-memory races ---------------------------------------------------------------
constexpr uint16_t kNoThread = 0xffff;
std::atomic<uint8_t> g_race_locks[4096];
struct RaceLock {
  std::atomic<uint8_t>& l;
  explicit RaceLock(uintptr_t word) : l(g_race_locks[(word >> 2) & 4095]) {
    while (l.exchange(1, std::memory_order_acquire)) {
    }
  }
  ~RaceLock() { l.store(0, std::memory_order_release); }
};
struct Access {  // one side of a global race
  unsigned long long block;
  unsigned tid;
  uint32_t gen, stamp;
  const void* pc;
  uint64_t seq;
};
// Cross-block ordering (the "last block done" pattern: partials written, __threadfence, an
// atomic on a counter; the block whose atomic comes last reads them all): an access of block X
// is ordered before a later access of block Y when X executed a __threadfence after it and Y
// executed an atomic after that fence. g_seq orders fences, atomics and accesses.
std::atomic<uint64_t> g_seq{1};
std::mutex g_sync_m;
std::vector<std::vector<uint64_t>> g_fences;   // per linear block of the race-checked launch
std::vector<uint64_t> g_last_atomic;           // per linear block
bool g_sync_on = false;                        // the launch's blocks are tracked (not too many)
std::vector<uint64_t> g_grid_syncs;            // g_seq of each grid barrier's release, ascending
// A grid barrier released after `after` and no later than `before` orders the two accesses.
bool grid_synced_between(uint64_t after, uint64_t before) {
  std::lock_guard<std::mutex> lk(g_sync_m);
  const auto it = std::upper_bound(g_grid_syncs.begin(), g_grid_syncs.end(), after);
  return it != g_grid_syncs.end() && *it <= before;
}
bool fenced_between(unsigned long long x, uint64_t after, unsigned long long y) {
  std::lock_guard<std::mutex> lk(g_sync_m);
  if (!g_sync_on || x >= g_fences.size() || y >= g_last_atomic.size()) return false;
  const uint64_t before = g_last_atomic[y];
  for (uint64_t f : g_fences[x])
    if (f > after && f < before) return true;
  return false;
}
// The hand-off through a volatile flag, as the CUDA Programming Guide writes it: block X writes
// the data, __threadfence(), stores the flag; block Y reads the flag (seeing that store),
// __threadfence(), reads the data. Volatile accesses are strong (they never race with each
// other). A fence of Y's after it read a flag word another block stored counts as an atomic of Y
// at that fence (g_last_atomic): what any block fenced before it is ordered before Y's later
// accesses, as for the "last block done" pattern, which also makes a hand-made barrier (atomic
// arrivals, a flag released by the last) order every block's writes before every block's reads.
// Lenient like that rule: it may miss a race, never reports a correct hand-off.
unsigned long long linear_block(const Worker& w) {
  const uint3 b = w.block.block_idx;
  const dim3 g = w.block.grid_dim;
  return b.x + static_cast<unsigned long long>(g.x) * (b.y + static_cast<unsigned long long>(g.y) * b.z);
}
std::string block_str(const Worker& w, unsigned long long b) {
  const dim3 g = w.block.grid_dim;
  return strf("(%llu,%llu,%llu)", b % g.x, (b / g.x) % g.y, b / (static_cast<unsigned long long>(g.x) * g.y));
}
// Two accesses of one launch are ordered when one thread made both, when a __syncthreads of
// their block separated them, or when they are lanes of one warp and a warp intrinsic of that
// warp completed between them. Threads of different blocks are ordered by a grid barrier
// released between the two accesses, or by the fence-and-atomic pattern above.
inline bool ordered(const Access& x, const Access& y) {  // x came first
  if (x.block != y.block)
    return grid_synced_between(x.seq, y.seq) || fenced_between(x.block, x.seq, y.block) ||
           cluster_synced_between(x.block, x.seq, y.block, y.seq);  // blocks of one cluster (cluster.cpp)
  if (x.tid == y.tid) return true;
  if (x.gen != y.gen) return true;
  return (x.tid >> 5) == (y.tid >> 5) && x.stamp != y.stamp;
}
[[noreturn]] __attribute__((noinline)) void global_race_fault(Worker& w, const DevRec& r, uintptr_t word,
                                                              const char* kind, const Access& me, bool me_write,
                                                              const Access& other, bool other_write,
                                                              bool other_inferred) {
  const bool same_warp = me.block == other.block && (me.tid >> 5) == (other.tid >> 5);
  const bool lost = other_inferred && code_line(me.pc) == code_line(other.pc);
  const std::string why =
      me.block != other.block
          ? "threads of different blocks are ordered within a launch only by a grid barrier between the two "
            "accesses (a cooperative launch's grid.sync()), or by a __threadfence() of the first block after "
            "its access and an atomic of the second block after that fence (or a volatile flag the second "
            "block read after the first stored it, with a __threadfence() on each side): use atomics, a grid "
            "barrier, or split the kernel"
      : same_warp ? "no __syncwarp(), shuffle, vote or __syncthreads() between them (the lanes of a warp do "
                    "not run in lockstep since Volta)"
                  : "no __syncthreads() between them";
  w.fiber_fault(
      cudaErrorLaunchFailure,
      strf("global memory race (%s hazard) in kernel '%s' (launched at %s:%d): thread %s of block %s %s "
           "4 bytes at byte offset %zu of cudaMalloc allocation %p (%zu bytes)%s, but thread %s of block %s "
           "had %s it%s%s, and %s%s (global racecheck; SIM_RACECHECK=0 turns it off)",
           kind, w.L->name, w.L->file, w.L->line, thread_str(w, me.tid).c_str(), block_str(w, me.block).c_str(),
           me_write ? "wrote" : "read", static_cast<size_t>(word - r.lo), reinterpret_cast<void*>(r.prog),
           r.size, at_line(me.pc).c_str(), thread_str(w, other.tid).c_str(), block_str(w, other.block).c_str(),
           other_write ? "written" : "read", at_line(other.pc).c_str(),
           other_inferred ? " (the store of its read-modify-write)" : "", why.c_str(),
           lost ? "; both read-modify-write the word without atomics, so one update is lost" : ""));
}

// Starts the record of a word for this launch, keeping what the launch before did to it.
inline void fresh_record(GlobalRace& g, uint64_t launch) {
  if (g.launch == launch) return;
  const uint64_t prev = g.launch;
  const uint8_t flags = g.cflags;
  g = GlobalRace{};
  g.launch = launch;
  g.wtid = g.rtid = kNoThread;
  g.plaunch = prev;
  g.pflags = flags;
}
// A thread of a PDL launch before its cudaGridDependencySynchronize(): may the kernel before it
// on the stream (still running, as far as this thread knows) have touched the word in a way
// this access conflicts with?
inline bool pdl_pending(const Worker& w) { return w.L->pdl && !w.ctx[w.cur].pdl_waited; }
[[noreturn]] __attribute__((noinline)) void pdl_fault(Worker& w, const DevRec& r, uintptr_t word, bool write,
                                                      const GlobalRace& g, const void* pc) {
  const bool wrote = g.pflags & kWrote;
  w.fiber_fault(
      cudaErrorLaunchFailure,
      strf("programmatic dependent launch hazard in kernel '%s' (launched at %s:%d with "
           "cudaLaunchAttributeProgrammaticStreamSerialization): thread %s of block %s %s 4 bytes at byte "
           "offset %zu of cudaMalloc allocation %p (%zu bytes)%s before its cudaGridDependencySynchronize(), "
           "but the kernel before it on the stream %s that word, and may still be running: %s; call "
           "cudaGridDependencySynchronize() before the first access to what the kernels before it write (or "
           "read late) (global racecheck; SIM_RACECHECK=0 turns it off)",
           w.L->name, w.L->file, w.L->line, thread_str(w, static_cast<unsigned>(w.cur)).c_str(),
           block_str(w, linear_block(w)).c_str(), write ? "wrote" : "read", static_cast<size_t>(word - r.lo),
           reinterpret_cast<void*>(r.prog), r.size, at_line(pc).c_str(),
           wrote ? "wrote" : "read (after its cudaTriggerProgrammaticLaunchCompletion())",
           write ? (wrote ? "which value stays is a matter of timing"
                          : "on a GPU it may read this kernel's value instead of the one it expects")
                 : "on a GPU this read may see the value from before that kernel's write (stale data)"));
}
inline void pdl_check(Worker& w, const DevRec& r, uintptr_t word, bool write, const GlobalRace& g, const void* pc) {
  if (!g.plaunch || (g.plaunch != w.L->pdl_primary[0] && g.plaunch != w.L->pdl_primary[1])) return;
  if ((g.pflags & kWrote) || (write && (g.pflags & kReadLate))) pdl_fault(w, r, word, write, g, pc);
}
inline void note_flags(const Worker& w, GlobalRace& g, bool write) {
  if (write) g.cflags |= kWrote;
  else if (w.pdl_triggered) g.cflags |= kReadLate;
}
// A read-only argument's word (DevRec::pdl_rec): only the PDL records, no race check.
void pdl_word(Worker& w, DevRec& r, uintptr_t word, bool write, const void* pc) {
  GlobalRace& g = r.race[(word - r.lo) >> 2];
  RaceLock lock(word);
  fresh_record(g, r.pdl_rec);
  if (pdl_pending(w)) pdl_check(w, r, word, write, g, pc);
  note_flags(w, g, write);
}

void global_race_word(Worker& w, DevRec& r, uintptr_t word, bool write, const void* pc) {
  GlobalRace& g = r.race[(word - r.lo) >> 2];
  const uint64_t launch = r.racing;
  const Access me{linear_block(w), static_cast<unsigned>(w.cur), static_cast<uint32_t>(w.arena.gen),
                  w.arena.wstamp[static_cast<unsigned>(w.cur) >> 5], pc, g_seq.load(std::memory_order_relaxed)};
  const uint32_t now = __atomic_load_n(reinterpret_cast<const uint32_t*>(word), __ATOMIC_RELAXED);
  RaceLock lock(word);
  fresh_record(g, launch);
  if (pdl_pending(w)) pdl_check(w, r, word, write, g, pc);
  note_flags(w, g, write);
  const Access wr{g.wblock, g.wtid, g.wgen, g.wws, g.wpc, g.wseq}, rd{g.rblock, g.rtid, g.rgen, g.rws, g.rpc, g.rseq};
  // A change that an atomic may have made (another worker's atomic can land between a plain
  // read's record and the next check) is no evidence of a plain store: no inference on a word
  // an atomic touched in this launch (its flag is set under the lock before the atomic runs).
  if (g.lastr && !g.atomic && now != g.snap && g.rtid != kNoThread) {
    // The word changed since that read and no store was seen: the reader's own (the store of a
    // read-modify-write, which GCC checks only through its load).
    // The store came some time after the read: within one block it certainly races with the
    // last write only if no barrier (or, in one warp, no warp intrinsic) completed since the read.
    const bool certain = wr.block != rd.block ||
                         (rd.block == me.block && rd.gen == me.gen &&
                          ((wr.tid >> 5) != (rd.tid >> 5) || rd.stamp == w.arena.wstamp[rd.tid >> 5]));
    if (g.wtid != kNoThread && certain && !ordered(wr, rd))
      global_race_fault(w, r, word, "write-after-write", rd, true, wr, true, g.winferred);
    g.wblock = g.rblock, g.wtid = g.rtid, g.wgen = g.rgen, g.wws = g.rws, g.wpc = g.rpc, g.wseq = g.rseq;
    g.winferred = 1;
  }
  g.lastr = 0;
  const Access w2{g.wblock, g.wtid, g.wgen, g.wws, g.wpc, g.wseq};
  if (g.wtid != kNoThread && !ordered(w2, me))
    global_race_fault(w, r, word, write ? "write-after-write" : "read-after-write", me, write, w2, true, g.winferred);
  if (write) {
    if (g.rtid != kNoThread && !ordered(rd, me)) global_race_fault(w, r, word, "write-after-read", me, true, rd, false, false);
    g.wblock = static_cast<uint32_t>(me.block), g.wtid = static_cast<uint16_t>(me.tid), g.wgen = me.gen;
    g.wws = me.stamp, g.wpc = pc, g.winferred = 0, g.wseq = me.seq;
  } else {
    g.rblock = static_cast<uint32_t>(me.block), g.rtid = static_cast<uint16_t>(me.tid), g.rgen = me.gen;
    g.rws = me.stamp, g.rpc = pc, g.rseq = me.seq;
    g.snap = now;
    g.lastr = 1;
  }
}
// An atomic changes the word: no plain store to infer.
void global_race_atomic(DevRec& r, uintptr_t a, size_t n) {
  for (uintptr_t word = a & ~uintptr_t(3); word < a + n; word += 4) {
    if (word < r.lo || word + 4 > r.lo + r.size) continue;
    GlobalRace& g = r.race[(word - r.lo) >> 2];
    RaceLock lock(word);
    fresh_record(g, r.racing);
    g.lastr = 0;
    g.atomic = 1;
    g.cflags |= kWrote;
  }
}

// ---- volatile flags ------------------------------------------------------------------------
// Reads of one volatile word that keep returning the same value: a spin. In a launch whose blocks
// are not all resident (not cooperative) the block it waits for may never run, here as on a GPU;
// in a cooperative one the OS thread yields to the other blocks, and a spin no block ends is a
// fault after SIM_SPIN_TIMEOUT_S seconds (default 30) instead of a hang.
constexpr uint32_t kSpinYield = 4096, kSpinLimit = uint32_t(1) << 20;
// The same holds for atomics that return the word's value and leave it unchanged (atomicAdd(p, 0),
// atomicOr(p, 0), atomicCAS(p, x, y) that fails, atomicMax below the value, atomicExch of the value it
// holds), with the same operands each time: a barrier or lock polled with atomics. An atomic that
// changes the word, or one with other operands, ends the count (a counter, or an atomicMax over
// the elements of an array, is no spin).
[[noreturn]] __attribute__((noinline)) void spin_fault(Worker& w, const DevRec& r, uintptr_t a, const void* pc,
                                                       bool atomic, const std::string& why) {
  w.fiber_fault(cudaErrorLaunchFailure,
                strf("thread %s of block %s read the %s at byte offset %zu of cudaMalloc allocation "
                     "%p%s %u times in a row without its value changing: %s",
                     thread_str(w, static_cast<unsigned>(w.cur)).c_str(), block_str(w, linear_block(w)).c_str(),
                     atomic ? "word (with atomics that left it unchanged)" : "volatile word",
                     static_cast<size_t>(a - r.lo), reinterpret_cast<void*>(r.prog), at_line(pc).c_str(),
                     w.ctx[w.cur].spin_reads, why.c_str()));
}
__attribute__((noinline)) void spinning(Worker& w, const DevRec& r, uintptr_t a, const void* pc,
                                        bool atomic = false) {
  ThreadCtx& c = w.ctx[w.cur];
  const Launch& L = *w.L;
  if (!L.cooperative) {
    if (c.spin_reads < kSpinLimit) return;
    int sms = 1;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const unsigned long long per_sm = std::min<unsigned>(32, 2048 / std::max(1u, L.nthreads));
    const unsigned long long fit = per_sm * static_cast<unsigned long long>(sms);
    const std::string n = strf("kernel '%s' (launched at %s:%d) has %llu blocks of %u threads, and at most %llu per "
                               "SM x %d SMs = %llu can be resident at once",
                               L.name, L.file, L.line, L.nblocks, L.nthreads, per_sm, sms, fit);
    spin_fault(w, r, a, pc, atomic,
               L.nblocks > fit
                   ? strf("a hand-made barrier or flag wait over more blocks than can be resident: %s, so the "
                          "block it waits for may never start until this one ends (on a GPU, a hang); launch at "
                          "most %llu blocks with cudaLaunchCooperativeKernel",
                          n.c_str(), fit)
                   : strf("it waits for a block (or a thread of its own block) that is not running: %s, but "
                          "nothing makes them resident together, as it was not launched with "
                          "cudaLaunchCooperativeKernel (the emulator runs a few blocks at a time, a GPU "
                          "promises nothing more)",
                          n.c_str()));
  }
  if (L.aborted.load(std::memory_order_relaxed)) throw FiberAbort{};  // another block faulted
  if (c.spin_reads == kSpinYield) c.spin_since = std::chrono::steady_clock::now();
  std::this_thread::yield();
  if ((c.spin_reads & 0xfff) != 0) return;
  const char* env = std::getenv("SIM_SPIN_TIMEOUT_S");
  const double limit = env && *env ? std::atof(env) : 30.0;
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.spin_since).count();
  if (waited > limit)
    spin_fault(w, r, a, pc, atomic,
               strf("no block of the cooperative launch of '%s' changed it in %.0f s (SIM_SPIN_TIMEOUT_S): a "
                    "hand-made barrier or flag wait that can never complete (on a GPU, a hang)",
                    L.name, waited));
}
// A store or load of a flag word in a race-checked launch: strong, never a race. A load is noted
// for the thread's next fence (note_threadfence).
void volatile_word(Worker& w, DevRec& r, uintptr_t word, bool write) {
  GlobalRace& g = r.race[(word - r.lo) >> 2];
  {
    RaceLock lock(word);
    fresh_record(g, r.racing);
    note_flags(w, g, write);
    if (write) {
      g.wblock = static_cast<uint32_t>(linear_block(w));
      g.wtid = static_cast<uint16_t>(w.cur);
      g.wseq = ++g_seq;
      return;
    }
  }
  ThreadCtx& c = w.ctx[w.cur];
  for (unsigned i = 0; i < c.nflags; ++i)
    if (c.flags_read[i] == word) return;
  if (c.nflags < sizeof c.flags_read / sizeof c.flags_read[0]) c.flags_read[c.nflags++] = word;
}
void volatile_access(Worker& w, DevRec& r, uintptr_t a, size_t n, bool write, const void* pc) {
  ThreadCtx& c = w.ctx[w.cur];
  if (write) {
    c.spin_reads = 0;
  } else if (n == 4 || n == 8) {
    const uint32_t v = __atomic_load_n(reinterpret_cast<const uint32_t*>(a), __ATOMIC_RELAXED);
    if (c.spin_word == a && c.spin_value == v) {
      if (++c.spin_reads >= kSpinYield) spinning(w, r, a, pc);
    } else {
      c.spin_word = a, c.spin_value = v, c.spin_reads = 1;
    }
  }
  if (r.racing && n >= 4 && !(a & 3))
    for (uintptr_t word = a; word < a + n; word += 4) volatile_word(w, r, word, write);
}

inline void global_access(Worker& w, DevRec& r, uintptr_t a, size_t n, bool write, const void* pc,
                          bool atomic = false) {
  const uintptr_t off = a - r.lo;
  if (__builtin_expect(off >= r.size || n > r.size - off, 0)) global_oob(w, r, a, n, write, pc);
  uint8_t* s = r.init + off;
  if (write) {
    if (!all_set(s, n)) {
      std::memset(s, 1, n);
      refresh_granules(r, off, off + n, false);
    }
  } else if (__builtin_expect(!all_set(s, n), 0) && initcheck_on()) {
    uninit_read(w, r, a, n, pc);
  }
  // 1- and 2-byte accesses are not race-checked (neighbouring bytes of one word may belong to
  // different threads).
  if (atomic) return;
  if (r.vol) return volatile_access(w, r, a, n, write, pc);
  if (n < 4 || (a & 3)) return;
  if (r.racing)
    for (uintptr_t word = a; word < a + n; word += 4) global_race_word(w, r, word, write, pc);
  else if (r.pdl_rec)
    for (uintptr_t word = a; word < a + n; word += 4) pdl_word(w, r, word, write, pc);
}

// The writable arguments of the launch being prepared (device views), on the launching thread.
thread_local std::vector<uintptr_t> tl_race_args;
std::vector<DevRec*> g_racing;  // under the launch mutex (pool.cpp)
constexpr int8_t kRacePoison = -4;
void restore_shadow(const DevRec& r) {
#if !SIM_ASAN
  if (!initcheck_on()) return shadow_open(r.lo, r.size);
  const size_t whole = r.size & ~size_t(7);
  for (size_t g = 0; g < whole; g += 8) {
    uint64_t v;
    std::memcpy(&v, r.init + g, 8);
    *shadow(r.lo + g) = v == 0x0101010101010101ull ? 0 : kUnwritten;
  }
  if (whole < r.size) {
    bool all = true;
    for (size_t i = whole; i < r.size; ++i) all = all && r.init[i];
    if (all) shadow_open(r.lo + whole, r.size - whole);
    else shadow_fill(r.lo + whole, r.size - whole, kUnwritten);
  }
#else
  (void)r;
#endif
}
}  // namespace

// ---- globals of .cu files (GCC registers them with red zones) ------------------------
namespace {
struct AsanGlobal {  // GCC's layout (libsanitizer's __asan_global)
  uintptr_t beg;
  uintptr_t size;
  uintptr_t size_with_redzone;
  const char* name;
  const char* module_name;
  uintptr_t has_dynamic_init;
  struct Loc {
    const char* file;
    int line, column;
  } * location;
  uintptr_t odr_indicator;
};
struct GlobalVar {
  uintptr_t beg, size, end;  // end: past the red zone
  const char* name;
  const char* file;
  int line;
};
std::vector<GlobalVar>* g_globals;  // sorted by beg; built by constructors before main
std::atomic<uintptr_t> g_glo{~uintptr_t(0)}, g_ghi{0};

[[noreturn]] __attribute__((noinline)) void global_var_oob(Worker& w, const GlobalVar& g, uintptr_t a, size_t n,
                                                           bool write, const void* pc) {
  w.fiber_fault(cudaErrorIllegalAddress,
                strf("out-of-bounds global memory %s%s: %zu bytes at %p, %s __device__ variable '%s' "
                     "(%zu bytes%s%s), %s (cudaErrorIllegalAddress)",
                     write ? "write" : "read", at_line(pc).c_str(), n, reinterpret_cast<void*>(a),
                     past(static_cast<size_t>(a - g.beg - g.size)).c_str(), g.name,
                     static_cast<size_t>(g.size), g.file ? ", " : "",
                     g.file ? strf("%s:%d", g.file, g.line).c_str() : "", who(w).c_str()));
}
inline void globals_access(Worker& w, uintptr_t a, size_t n, bool write, const void* pc) {
  const std::vector<GlobalVar>& v = *g_globals;
  auto it = std::upper_bound(v.begin(), v.end(), a, [](uintptr_t x, const GlobalVar& g) { return x < g.beg; });
  if (it == v.begin()) return;
  --it;
  if (a + n > it->beg + it->size && a < it->end) global_var_oob(w, *it, a < it->beg + it->size ? it->beg + it->size : a, n, write, pc);
}
}  // namespace

// An atomic: bounds and initialisation, never a race (called from sim/strict.h's
// SIM_ATOMIC_CHECK_; the atomics themselves are not instrumented).
namespace {
thread_local bool tl_global_atomic = false;  // atomic_access saw a device-memory atomic
thread_local DevRec* tl_atomic_rec = nullptr;  // its allocation and call site
thread_local const void* tl_atomic_pc = nullptr;
void note_atomic(const Worker& w) {
  if (!w.L || !w.L->racecheck) return;
  std::lock_guard<std::mutex> lk(g_sync_m);
  const unsigned long long b = linear_block(w);
  if (g_sync_on && b < g_last_atomic.size()) g_last_atomic[b] = ++g_seq;
}
}  // namespace

// Called after every atomic operation (sim/device.h's after_atomic). A global atomic counts
// for the "last block done" ordering from here on: were it noted before the operation, a
// fence another block makes between the note and the operation (which the operation then
// sees) would be taken for one after it, and correct code reported as a race.
// It also counts the spins of atomics ("volatile flags" above): `old` is the value the atomic
// returned; the word holding it still is what an atomic that changed nothing leaves (one that
// changed it, or whose change another thread undid in between, resets the count).
void atomic_done(const void* p, unsigned n, unsigned long long old, unsigned long long operands) {
  if (!tl_global_atomic) return;
  tl_global_atomic = false;
  Worker* w = tl_worker;
  if (!w || !w->in_block || w->cur < 0) return;
  note_atomic(*w);
  ThreadCtx& c = w->ctx[w->cur];
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  unsigned long long now = 0;
  if (n == 8) now = __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
  else if (n == 4) now = __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_RELAXED);
  else now = __atomic_load_n(reinterpret_cast<const uint16_t*>(p), __ATOMIC_RELAXED);
  if (now != old) {
    c.spin_reads = 0;
    return;
  }
  const uint64_t key = (old ^ operands * 0xff51afd7ed558ccdull) * 0xc4ceb9fe1a85ec53ull;
  const uint32_t v = static_cast<uint32_t>(key ^ (key >> 32));
  if (c.spin_word == a && c.spin_value == v) {
    if (++c.spin_reads >= kSpinYield && tl_atomic_rec) spinning(*w, *tl_atomic_rec, a, tl_atomic_pc, true);
  } else {
    c.spin_word = a, c.spin_value = v, c.spin_reads = 1;
  }
}

uint64_t note_cluster_sync() {
  std::lock_guard<std::mutex> lk(g_sync_m);
  return ++g_seq;
}

void note_grid_sync() {
  std::lock_guard<std::mutex> lk(g_sync_m);
  g_grid_syncs.push_back(++g_seq);
}

void note_threadfence() {
  Worker* w = tl_worker;
  if (!w || !w->in_block || w->cur < 0 || !w->L || !w->L->racecheck) return;
  const unsigned long long b = linear_block(*w);
  // The flags this thread read since its last fence: if another block stored one, this fence
  // acquires like an atomic (see "The hand-off through a volatile flag" above). The word locks
  // are taken before g_sync_m, as global_race_word takes them.
  ThreadCtx& c = w->ctx[w->cur];
  bool acquire = false;
  for (unsigned i = 0; i < c.nflags && !acquire; ++i) {
    DevRec* r = lookup(c.flags_read[i]);
    if (!r || !r->racing || !r->race) continue;
    const GlobalRace& g = r->race[(c.flags_read[i] - r->lo) >> 2];
    RaceLock lock(c.flags_read[i]);
    acquire = g.launch == r->racing && g.wtid != kNoThread && g.wblock != b;
  }
  c.nflags = 0;
  std::lock_guard<std::mutex> lk(g_sync_m);
  if (!g_sync_on || b >= g_fences.size()) return;
  const uint64_t f = ++g_seq;
  if (g_fences[b].size() < 4096) g_fences[b].push_back(f);
  if (acquire) g_last_atomic[b] = f;
}

void atomic_access(const void* p, size_t n) {
  Worker* w = tl_worker;
  if (!w || !w->in_block || w->cur < 0) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const void* pc = __builtin_return_address(0);
  const size_t off = a - reinterpret_cast<uintptr_t>(w->arena.window);
  if (off < kWindow) {
    if (off + n > kWindow || !all_ok(w->arena.ok + off, n)) {
      if (off + n <= kWindow && std::memchr(w->arena.ok + off, kPending, n)) pending_fault(*w, a, n, true, pc);
      shared_oob(*w, a, n, true, pc);
    }
    if (w->race) {  // an atomic reads the old value: it must have been written
#if !SIM_ASAN  // under ASan the inline checks are off: plain stores never mark shared bytes written
      const uint8_t* ok = w->arena.ok + off;
      for (size_t i = 0; i < n; ++i)
        if (ok[i] != 2) shared_uninit(*w, a, n, i, pc);
#endif
      for (size_t i = 0; i < n; ++i) w->arena.race[off + i].lastr = 0;  // its change is no plain store
    }
    return;
  }
  if (DevRec* r = lookup(a)) {
    // No race record for an atomic (bounds and initialisation only).
    global_access(*w, *r, a, n, false, pc, true);  // an atomic reads the old value
    global_access(*w, *r, a, n, true, pc, true);
    if (r->racing) global_race_atomic(*r, a, n);
    tl_global_atomic = true;  // atomic_done notes it once the operation has taken place
    tl_atomic_rec = r;
    tl_atomic_pc = pc;
    return;
  }
  if (g_globals && a - g_glo.load() < g_ghi.load() - g_glo.load()) globals_access(*w, a, n, true, pc);
}

void global_race_arg(const void* view) { tl_race_args.push_back(reinterpret_cast<uintptr_t>(view)); }
namespace {
thread_local std::vector<uintptr_t> tl_const_args, tl_volatile_args;
std::vector<DevRec*> g_const_recs;  // the launch's read-only arguments not racing (their records wait)
uint64_t g_launch_race_id = 0;
std::mutex g_watch_m;
bool ensure_records(DevRec* r) {
  if (r->race) return true;
  void* m = mmap(nullptr, (r->size / 4 + 1) * sizeof(GlobalRace), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return false;
  r->race = static_cast<GlobalRace*>(m);
  return true;
}
void watch_const(DevRec* r) {
  if (r->watched() || !ensure_records(r)) return;
  r->pdl_rec = g_launch_race_id;
  shadow_fill(r->lo, r->size, kRacePoison);
  g_racing.push_back(r);
}
}  // namespace
void global_race_const_arg(const void* view) { tl_const_args.push_back(reinterpret_cast<uintptr_t>(view)); }
void global_race_volatile_arg(const void* view) { tl_volatile_args.push_back(reinterpret_cast<uintptr_t>(view)); }

void global_race_begin(Launch& L) {
  std::vector<uintptr_t> args, cargs, vargs;
  args.swap(tl_race_args);
  cargs.swap(tl_const_args);
  vargs.swap(tl_volatile_args);
#if !SIM_ASAN
  g_racing.clear();
  g_const_recs.clear();
  {
    std::lock_guard<std::mutex> lk(g_sync_m);
    g_sync_on = L.racecheck && L.nblocks <= (1u << 16);
    g_fences.assign(g_sync_on ? L.nblocks : 0, {});
    g_last_atomic.assign(g_sync_on ? L.nblocks : 0, 0);
    g_grid_syncs.clear();
  }
  // Volatile flags in every launch: their spins are watched (volatile_access).
  for (uintptr_t v : vargs) {
    DevRec* r = lookup(v);
    if (!r || r->size < 4 || r->vol) continue;
    r->vol = L.index + 1;
    shadow_fill(r->lo, r->size, kRacePoison);
    g_racing.push_back(r);
  }
  L.race_id = 0;
  if (!L.racecheck) return;
  // Never reused (L.index restarts at every cudaDeviceReset): stale records stay stale.
  static std::atomic<uint64_t> g_race_launches{0};
  const uint64_t race_launch = ++g_race_launches;
  L.race_id = g_launch_race_id = race_launch;
  for (uintptr_t v : args) {
    DevRec* r = lookup(v);
    if (!r || r->size < 4 || r->racing || !ensure_records(r)) continue;
    r->racing = race_launch;
    shadow_fill(r->lo, r->size, kRacePoison);  // every access reaches global_access
    if (std::find(g_racing.begin(), g_racing.end(), r) == g_racing.end()) g_racing.push_back(r);
  }
  for (uintptr_t v : cargs) {
    DevRec* r = lookup(v);
    if (r && r->size >= 4 && !r->racing && std::find(g_const_recs.begin(), g_const_recs.end(), r) == g_const_recs.end())
      g_const_recs.push_back(r);
  }
  // A PDL launch's reads before its wait are checked from its first access.
  if (L.pdl)
    for (DevRec* r : g_const_recs) watch_const(r);
#else
  (void)L;
#endif
}

// The first block of a race-checked launch called cudaTriggerProgrammaticLaunchCompletion(): its
// read-only arguments are recorded from now on (a PDL successor must not write them before it waits).
void global_race_watch_const_reads() {
#if !SIM_ASAN
  std::lock_guard<std::mutex> lk(g_watch_m);
  for (DevRec* r : g_const_recs) watch_const(r);
  g_const_recs.clear();
#endif
}

void global_race_end() {
  for (DevRec* r : g_racing) {
    r->racing = r->pdl_rec = r->vol = 0;
    restore_shadow(*r);
  }
  g_racing.clear();
  g_const_recs.clear();
}

}  // namespace sim::detail

// ---- the entry points GCC's instrumentation calls ------------------------------------
#if !SIM_ASAN
using namespace sim::detail;

namespace {
__attribute__((always_inline)) inline void on_access(uintptr_t a, size_t n, bool write, const void* pc) {
  Worker* w = tl_worker;
  if (__builtin_expect(!w || !w->in_block || w->cur < 0, 1)) return;
  const size_t off = a - reinterpret_cast<uintptr_t>(w->arena.window);
  if (off < kWindow) return shared_access(*w, off, a, n, write, pc);
  if (__builtin_expect(w->cluster != nullptr, 0) && cluster_remote_access(*w, a, n, write, pc)) return;
  if (DevRec* r = lookup(a)) return global_access(*w, *r, a, n, write, pc);
  if (a - g_glo.load(std::memory_order_relaxed) < g_ghi.load(std::memory_order_relaxed) - g_glo.load(std::memory_order_relaxed))
    globals_access(*w, a, n, write, pc);
}
}  // namespace

extern "C" {
// Called by the inline checks for a poisoned granule (and, past GCC's call threshold, for
// every access: the plain entry points). The access proceeds after they return.
#define SIM_HOOK(N)                                                                           \
  void __asan_load##N##_noabort(uintptr_t a) { on_access(a, N, false, __builtin_return_address(0)); } \
  void __asan_store##N##_noabort(uintptr_t a) { on_access(a, N, true, __builtin_return_address(0)); } \
  void __asan_report_load##N##_noabort(uintptr_t a) { on_access(a, N, false, __builtin_return_address(0)); } \
  void __asan_report_store##N##_noabort(uintptr_t a) { on_access(a, N, true, __builtin_return_address(0)); }
SIM_HOOK(1)
SIM_HOOK(2)
SIM_HOOK(4)
SIM_HOOK(8)
SIM_HOOK(16)
#undef SIM_HOOK
void __asan_loadN_noabort(uintptr_t a, size_t n) { on_access(a, n, false, __builtin_return_address(0)); }
void __asan_storeN_noabort(uintptr_t a, size_t n) { on_access(a, n, true, __builtin_return_address(0)); }
void __asan_report_load_n_noabort(uintptr_t a, size_t n) { on_access(a, n, false, __builtin_return_address(0)); }
void __asan_report_store_n_noabort(uintptr_t a, size_t n) { on_access(a, n, true, __builtin_return_address(0)); }

void __asan_register_globals(AsanGlobal* g, size_t n) {
  if (!g_globals) g_globals = new std::vector<GlobalVar>();
  for (size_t i = 0; i < n; ++i) {
    g_globals->push_back(GlobalVar{g[i].beg, g[i].size, g[i].beg + g[i].size_with_redzone, g[i].name,
                                   g[i].location ? g[i].location->file : nullptr,
                                   g[i].location ? g[i].location->line : 0});
    shadow_fill(g[i].beg, g[i].size_with_redzone, kGlobalRedzone);
    shadow_open(g[i].beg, g[i].size);
  }
  std::sort(g_globals->begin(), g_globals->end(),
            [](const GlobalVar& x, const GlobalVar& y) { return x.beg < y.beg; });
  if (!g_globals->empty()) {
    g_glo.store(g_globals->front().beg);
    uintptr_t hi = 0;
    for (const GlobalVar& v : *g_globals) hi = std::max(hi, v.end);
    g_ghi.store(hi);
  }
}
void __asan_unregister_globals(AsanGlobal*, size_t) {}  // at exit: kernels no longer run
void __asan_before_dynamic_init(const char*) {}
void __asan_after_dynamic_init() {}
void __asan_handle_no_return() {}
}
#endif

// Public switches (sim/sim_api.h).
namespace sim {
void set_racecheck(bool on) { detail::g_racecheck.store(on ? 1 : 0); }
void set_racecheck_all() { detail::g_racecheck.store(2); }
bool racecheck() { return detail::racecheck_on(); }
void set_initcheck(bool on) { detail::g_initcheck.store(on); }
bool initcheck() { return detail::initcheck_on(); }
}  // namespace sim
