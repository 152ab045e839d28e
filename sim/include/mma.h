// CUDA's WMMA API (<mma.h>, namespace nvcuda::wmma) for the SIMT CPU emulator: the TF32
// subset, m16n16k8 only (what kernels/gemm/5_tf32x3.cu uses). Documented in sim/docs/tensor-cores.md
// ("WMMA (tensor cores)"); tested by tests/sim/test_sim_wmma.cu.
//
//  - fragment<matrix_a, 16, 16, 8, precision::tf32, row_major|col_major> (16x8, M x K, 4 per
//    lane), fragment<matrix_b, 16, 16, 8, precision::tf32, row_major|col_major> (8x16, K x N,
//    4 per lane), fragment<accumulator, 16, 16, 8, float> (16x16, 8 per lane): CUDA's
//    per-lane counts; the elements are float (x[], num_elements).
//  - Which lane holds which element is unspecified in CUDA. Here (g = lane / 4, t = lane % 4),
//    the layout of PTX's mma.m16n8k8 tf32 fragments, twice along N:
//      matrix_a    x[0] (g, t)   x[1] (g+8, t)   x[2] (g, t+4)   x[3] (g+8, t+4)      (row, k)
//      matrix_b    x[0] (t, g)   x[1] (t+4, g)   x[2] (t, g+8)   x[3] (t+4, g+8)      (k, col)
//      accumulator x[0] (g, 2t)  x[1] (g, 2t+1)  x[2] (g+8, 2t)  x[3] (g+8, 2t+1),
//                  x[4..7]: the same with col + 8                                      (row, col)
//    The mapping does not depend on the fragment's layout (only the addresses do).
//  - load_matrix_sync, store_matrix_sync and mma_sync are warp-collective: every lane of a
//    full warp must reach the same call (same file:line) with the same pointer, ldm and layout;
//    otherwise the rendezvous faults like a divergent __shfl_sync (kinds kWmmaLoad,
//    kWmmaStore, kWmmaMma in runtime/warp.cpp; one rendezvous per call). The pointer must be
//    32-byte aligned and ldm a multiple of 4 floats (16 bytes): else a sticky
//    cudaErrorMisalignedAddress. Each lane then reads or writes its own elements with plain
//    loads and stores in the kernel's own code, so they get the per-access checks (bounds,
//    initcheck, racecheck) under the lane's own thread. The rendezvous happens before the
//    accesses: lanes' earlier shared-memory writes are ordered before a load_matrix_sync (as
//    any completed warp op orders them), but a store_matrix_sync is not ordered before another
//    lane's later read without a __syncwarp/__syncthreads.
//  - mma_sync(d, a, b, c): D = A*B + C. Each A and B element counts with its top 19 bits
//    only (the low 13 mantissa bits are dropped, as the tensor cores read only the TF32 bits of
//    unconverted input); each D(i,j) = C(i,j), then fmaf(A(i,k), B(k,j), .) for k = 0..7 in
//    order. The products are exact in FP32; the GPU's accumulation order and rounding inside
//    the tensor core are NOT modelled bit for bit (compare with a bound). d may alias c.
//  - fill_fragment and elementwise access to x[] are per lane (no rendezvous).
//  - wmma::__float_to_tf32: cvt.rna.tf32.f32, to nearest with ties away from zero, low 13
//    bits cleared (a carry may reach the next binade or infinity); Inf and NaN keep their
//    top 19 bits (truncated: on an H200 the NaN 0x7f800001, whose payload is all in the low 13
//    bits, became +Inf; tests/sim/test_sim_wmma.cu).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "sim/device.h"

namespace sim {

// The reference definitions (host and device): FP32 to TF32 as cvt.rna.tf32.f32, and the
// truncation a tensor core applies to an unconverted FP32 input. Inf and NaN are truncated in
// both (an H200's cvt.rna.tf32.f32 turned the NaN 0x7f800001 into +Inf).
inline float tf32_round_reference(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;  // half of the 13 dropped bits, added to
                                                        // the magnitude: ties away from zero
  u &= 0xffffe000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
// PTX's cvt.rn.tf32.f32 (sm_90 and later; kernels/gemm/mma_tf32.h's tf32_rn): to nearest,
// ties to even, low 13 bits cleared (a carry may reach the next binade or infinity); Inf stays
// Inf; NaN stays NaN (made quiet; its exact bits on the GPU are not modelled).
inline float tf32_rn_reference(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) {
    if (u & 0x007fffffu) u |= 0x00400000u;  // NaN: quiet, so clearing the low bits keeps it NaN
  } else {
    u += 0x0fffu + ((u >> 13) & 1u);
  }
  u &= 0xffffe000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline float tf32_truncate_reference(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u &= 0xffffe000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

namespace detail::wmma {

// Position (row, col) of element i of lane `lane` (see the table above).
inline void a_pos(int lane, int i, int& r, int& c) {
  const int g = lane >> 2, t = lane & 3;
  r = g + ((i & 1) ? 8 : 0);
  c = t + ((i & 2) ? 4 : 0);
}
inline void b_pos(int lane, int i, int& r, int& c) {
  const int g = lane >> 2, t = lane & 3;
  r = t + ((i & 1) ? 4 : 0);
  c = g + ((i & 2) ? 8 : 0);
}
inline void acc_pos(int lane, int i, int& r, int& c) {
  const int g = lane >> 2, t = lane & 3;
  r = g + ((i & 2) ? 8 : 0);
  c = 2 * t + (i & 1) + ((i & 4) ? 8 : 0);
}

inline int lane_id() {
  const ThreadPub* th = tl_thread;
  const BlockPub* bl = tl_block;
  if (!th || !bl) return 0;  // outside a kernel: the rendezvous reports it
  const unsigned t = th->thread_idx.x +
                     bl->block_dim.x * (th->thread_idx.y + bl->block_dim.y * th->thread_idx.z);
  return static_cast<int>(t & 31);
}

// What every lane passes to a load or store rendezvous.
struct MemRec {
  WarpCall call;
  const void* p;
  unsigned ldm;
  int layout;  // 0 row major, 1 col major
  const char* op;
  const char* file;
  int line;
};

[[noreturn]] inline void mem_mismatch(const MemRec& r0, int l0, const MemRec& r, int l) {
  char buf[512];
  const long long off = static_cast<const char*>(r.p) - static_cast<const char*>(r0.p);
  std::snprintf(buf, sizeof buf,
                "%s at %s:%d: the lanes of a warp must pass the same pointer, ldm and layout, but "
                "lane %d passed ldm %u, %s, and lane %d a pointer %lld bytes after lane %d's, ldm "
                "%u, %s",
                r0.op, r0.file, r0.line, l0, r0.ldm, r0.layout ? "col major" : "row major", l, off,
                l0, r.ldm, r.layout ? "col major" : "row major");
  device_fault(buf);
}

inline void mem_check_lanes(void* const* lanes, unsigned mask) {
  const int l0 = __builtin_ctz(mask);
  const MemRec& r0 = *static_cast<const MemRec*>(lanes[l0]);
  for (unsigned m = mask & (mask - 1); m; m &= m - 1) {
    const int l = __builtin_ctz(m);
    const MemRec& r = *static_cast<const MemRec*>(lanes[l]);
    if (r.p != r0.p || r.ldm != r0.ldm || r.layout != r0.layout) mem_mismatch(r0, l0, r, l);
  }
}

// The pointer and ldm rules of load/store_matrix_sync (CUDA: mptr 256-bit aligned, ldm a
// multiple of 16 bytes), then the rendezvous.
__attribute__((always_inline)) inline void mem_sync(int kind, const char* op, const void* p,
                                                    unsigned ldm, int layout, const char* file,
                                                    int line) {
  if (reinterpret_cast<std::uintptr_t>(p) & 31) misaligned_access(p, 32, op, file, line);
  if (ldm % 4 != 0) {
    char what[160];
    std::snprintf(what, sizeof what, "%s with ldm = %u (not a multiple of 4 floats, 16 bytes): "
                  "its second row or column", op, ldm);
    misaligned_access(static_cast<const float*>(p) + ldm, 16, what, file, line);
  }
  MemRec rec{WarpCall{&mem_check_lanes}, p, ldm, layout, op, file, line};
  warp_op(Site{file, line}, kind, 0xffffffffu, reinterpret_cast<std::uintptr_t>(&rec), 0, 0, 32);
}

struct MmaRec {
  WarpCall call;
  const float* a;  // the lane's fragments (x[])
  const float* b;
  const float* c;
  float* d;
};

// D += A * B: D(i,j) = fmaf(A(i,k), B(k,j), D(i,j)) for k = 0..7 in order. The same bits
// with the CPU's FMA instruction (mma_tile_hw, 40% faster) as with libm's fmaf.
inline void mma_tile(const float (&A)[16][8], const float (&B)[8][16], float (&D)[16][16]) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float acc = D[i][j];
      for (int k = 0; k < 8; ++k) acc = std::fmaf(A[i][k], B[k][j], acc);
      D[i][j] = acc;
    }
}
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("fma"))) inline void mma_tile_hw(const float (&A)[16][8], const float (&B)[8][16],
                                                       float (&D)[16][16]) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float acc = D[i][j];
      for (int k = 0; k < 8; ++k) acc = __builtin_fmaf(A[i][k], B[k][j], acc);
      D[i][j] = acc;
    }
}
#define SIM_WMMA_HW_FMA_ 1
#endif

inline void mma_lanes(void* const* lanes, unsigned /*mask: always the full warp*/) {
  float A[16][8], B[8][16], D[16][16];
  for (int l = 0; l < 32; ++l) {
    const MmaRec& r = *static_cast<const MmaRec*>(lanes[l]);
    int i, j;
    for (int e = 0; e < 4; ++e) {
      a_pos(l, e, i, j);
      A[i][j] = tf32_truncate_reference(r.a[e]);
      b_pos(l, e, i, j);
      B[i][j] = tf32_truncate_reference(r.b[e]);
    }
    for (int e = 0; e < 8; ++e) {
      acc_pos(l, e, i, j);
      D[i][j] = r.c[e];
    }
  }
#ifdef SIM_WMMA_HW_FMA_
  static const bool hw_fma = __builtin_cpu_supports("fma");
  if (hw_fma)
    mma_tile_hw(A, B, D);
  else
#endif
    mma_tile(A, B, D);
  for (int l = 0; l < 32; ++l) {
    const MmaRec& r = *static_cast<const MmaRec*>(lanes[l]);
    int i, j;
    for (int e = 0; e < 8; ++e) {
      acc_pos(l, e, i, j);
      r.d[e] = D[i][j];
    }
  }
}

// PTX mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (kernels/gemm/mma_tf32.h): the
// fragments of PTX's documentation (a_pos, b_pos for elements 0..1, acc_pos for 0..3), the
// inputs truncated to TF32 as the tensor cores read them, D(i,j) = fmaf(A(i,k), B(k,j), .)
// for k = 0..7 in order from C(i,j).
struct Mma1688Rec {
  WarpCall call;
  const float* a;
  const float* b;
  float* d;
};
inline void mma1688_lanes(void* const* lanes, unsigned /*mask: always the full warp*/) {
  float A[16][8], B[8][8], D[16][8];
  for (int l = 0; l < 32; ++l) {
    const Mma1688Rec& r = *static_cast<const Mma1688Rec*>(lanes[l]);
    int i, j;
    for (int e = 0; e < 4; ++e) {
      a_pos(l, e, i, j);
      A[i][j] = tf32_truncate_reference(r.a[e]);
      acc_pos(l, e, i, j);
      D[i][j] = r.d[e];
    }
    for (int e = 0; e < 2; ++e) {
      b_pos(l, e, i, j);
      B[i][j] = tf32_truncate_reference(r.b[e]);
    }
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      float acc = D[i][j];
      for (int k = 0; k < 8; ++k) acc = std::fmaf(A[i][k], B[k][j], acc);
      D[i][j] = acc;
    }
  for (int l = 0; l < 32; ++l) {
    const Mma1688Rec& r = *static_cast<const Mma1688Rec*>(lanes[l]);
    int i, j;
    for (int e = 0; e < 4; ++e) {
      acc_pos(l, e, i, j);
      r.d[e] = D[i][j];
    }
  }
}

}  // namespace detail::wmma

// d += a * b over the warp (see Mma1688Rec): a rendezvous of all 32 lanes at one call site.
inline void mma_m16n8k8_tf32(float (&d)[4], const float (&a)[4], const float (&b)[2], const char* file,
                             int line) {
  detail::wmma::Mma1688Rec rec{detail::WarpCall{&detail::wmma::mma1688_lanes}, a, b, d};
  detail::warp_op(detail::Site{file, line}, detail::kMmaSync, 0xffffffffu, reinterpret_cast<std::uintptr_t>(&rec),
                  0, 0, 32);
}

// ---- wgmma (Hopper's warpgroup MMA; kernels/gemm/wgmma_tf32.h) -----------------------------
// wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 with both operands in shared memory,
// K-major, no swizzle, as PTX documents them: a 64-bit matrix descriptor (bits 0-13: the
// start address >> 4; 16-29: the leading dimension byte offset (LBO) >> 4; 32-45: the stride
// dimension byte offset (SBO) >> 4; 62-63: the swizzle mode, 0 here). Element (row, k) of an
// R x 8 operand (A: row = m, 64 rows; B: row = n, N rows) is the float at byte
//   start + (row / 8) * SBO + (k / 4) * LBO + (row % 8) * 16 + (k % 4) * 4
// (core matrices of 8 rows x 16 bytes; SBO steps 8 rows, LBO steps 4 k). The accumulator
// fragment: warp w of the warpgroup (w = warp % 4), g = lane / 4, t = lane % 4, for j < N/8:
//   d[4j] (16w+g, 8j+2t)  d[4j+1] (16w+g, 8j+2t+1)  d[4j+2] (16w+g+8, 8j+2t)  d[4j+3] (16w+g+8, 8j+2t+1)
// Asynchrony: an mma is only recorded when issued; commit_group closes the thread's open
// group and wait_group(n) runs every committed group but the newest n, in issue order, each
// thread computing its own fragment with its own loads (so racecheck and the bounds checks see
// them, at the time of the wait: the latest a GPU could read them; mmas never waited for are
// dropped when the thread's next block begins). Reading d before the wait
// sees the old values, and shared memory overwritten before the wait is what the mma reads:
// both wrong on a GPU too. Each element: D(i,j) = scale_d ? D(i,j) : 0, then fmaf over
// k = 0..7 in order, the inputs truncated to TF32 (the GPU's internal rounding is not modelled
// bit for bit). Each call is a rendezvous of the warp (__syncwarp at the call's line); the
// block must be whole warpgroups. Fences: an mma issued with no wgmma.fence before it in the
// thread, or on an accumulator that a wait completed since the thread's last wgmma.fence,
// faults; in race-checked blocks, an mma reading a shared byte whose writer has not executed
// fence.proxy.async since the store faults (runtime/checks.cpp, async_proxy_read). Not
// modelled: other shapes, types, swizzles and A in registers.
namespace detail {
// runtime/checks.cpp: fence.proxy.async by the running thread; the async proxy's read of
// shared bytes (a fault if a writer of the block has not fenced since its store; race-checked
// blocks only).
void async_proxy_fence();
void async_proxy_read(const void* p, std::size_t n, const char* what, const char* file, int line);
// A number that differs for every block a worker (OS thread) runs.
std::uint64_t block_serial();
}  // namespace detail

namespace detail::wgmma {

struct Mma {
  float* d;
  int n;
  std::uint64_t da, db;
  bool scale_d;
  const char* file;
  int line;
};
struct Pending {
  std::uint64_t block = 0;  // block_serial() of the block it belongs to
  bool fenced = false;  // a wgmma.fence since the block began
  float* waited[8];     // accumulators of mmas a wait completed since the last wgmma.fence
  int nwaited = 0;
  Mma open[64];
  int nopen = 0;
  Mma done[256];  // committed, in issue order
  int group_end[64];  // end index in done of each committed group
  int ngroups = 0;
};
// One record per CUDA thread (fiber): keyed by its ThreadPub on the OS thread running the block.
inline Pending& pending() {
  thread_local std::unordered_map<const ThreadPub*, Pending> map;
  Pending& p = map[tl_thread];
  const std::uint64_t serial = block_serial();
  if (p.block != serial) {  // a new block: whatever an earlier one left (it ended or faulted) is gone
    p.block = serial;
    p.fenced = false;
    p.nwaited = 0;
    p.nopen = 0;
    p.ngroups = 0;
  }
  return p;
}
inline int linear_tid() {
  const uint3 t = tl_thread->thread_idx;
  const dim3 b = tl_block->block_dim;
  return static_cast<int>(t.x + b.x * (t.y + b.y * t.z));
}
inline float element(std::uint64_t desc, int row, int k, const Mma& m) {
  const std::size_t start = (desc & 0x3fffu) << 4, lbo = ((desc >> 16) & 0x3fffu) << 4,
                    sbo = ((desc >> 32) & 0x3fffu) << 4;
  const char* base = static_cast<const char*>(tl_block->dyn_smem);
  const float* p =
      reinterpret_cast<const float*>(base + start + (row / 8) * sbo + (k / 4) * lbo + (row % 8) * 16 + (k % 4) * 4);
  async_proxy_read(p, sizeof(float), "wgmma.mma_async", m.file, m.line);
  return tf32_truncate_reference(*p);
}
inline void run(const Mma& m) {
  const int tid = linear_tid(), w = (tid / 32) % 4, g = (tid % 32) / 4, t = tid % 4;
  for (int j = 0; j < m.n / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * w + g + (e >> 1) * 8, col = 8 * j + 2 * t + (e & 1);
      float acc = m.scale_d ? m.d[4 * j + e] : 0.0f;
      for (int k = 0; k < 8; ++k)
        acc = std::fmaf(element(m.da, row, k, m), element(m.db, col, k, m), acc);
      m.d[4 * j + e] = acc;
    }
}

}  // namespace detail::wgmma

// The shared-memory address a descriptor holds (cvta.to.shared): here the offset into the
// block's dynamic shared memory, which must hold every wgmma operand.
inline unsigned wgmma_smem_address(const void* p, const char* file, int line) {
  const char* base = static_cast<const char*>(detail::tl_block ? detail::tl_block->dyn_smem : nullptr);
  const long long off = base ? static_cast<const char*>(p) - base : -1;
  if (off < 0 || off >= (1 << 18) || off % 16) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "wgmma operand at %s:%d is not 16-byte aligned dynamic shared memory (offset %lld)", file, line, off);
    detail::device_fault(buf);
  }
  return static_cast<unsigned>(off);
}

inline void wgmma_m64nNk8_tf32(float* d, int n, std::uint64_t da, std::uint64_t db, bool scale_d, const char* file,
                              int line) {
  detail::warp_sync(detail::Site{file, line});
  const dim3 bd = detail::tl_block->block_dim;
  const unsigned threads = bd.x * bd.y * bd.z;
  char buf[256];
  if (threads % 128) {
    std::snprintf(buf, sizeof buf, "wgmma.mma_async at %s:%d in a block of %u threads: not whole warpgroups of 128",
                  file, line, threads);
    detail::device_fault(buf);
  }
  if ((da >> 62) || (db >> 62)) {
    std::snprintf(buf, sizeof buf, "wgmma.mma_async at %s:%d: only the no-swizzle layout is modelled", file, line);
    detail::device_fault(buf);
  }
  detail::wgmma::Pending& p = detail::wgmma::pending();
  // PTX: a wgmma.fence before the first wgmma.mma_async, and between any other access to its
  // registers (here: an accumulator a wait completed, which the thread then reads) and the
  // next wgmma.mma_async on them.
  bool reused = false;
  for (int i = 0; i < p.nwaited; ++i) reused = reused || p.waited[i] == d;
  if (!p.fenced || reused) {
    std::snprintf(buf, sizeof buf,
                  "wgmma.mma_async at %s:%d %s: registers other instructions access need a wgmma.fence first",
                  file, line,
                  !p.fenced ? "with no wgmma.fence before it in this thread"
                            : "accumulates into registers that a completed wgmma wrote (the thread may have read "
                              "them since), with no wgmma.fence after the wait");
    detail::device_fault(buf);
  }
  if (p.nopen == 64) detail::device_fault("wgmma: more than 64 wgmma.mma_async without wgmma.commit_group");
  p.open[p.nopen++] = detail::wgmma::Mma{d, n, da, db, scale_d, file, line};
}
// wgmma.fence.sync.aligned: orders the thread's register accesses before the next wgmmas.
inline void wgmma_fence(const char* file, int line) {
  detail::warp_sync(detail::Site{file, line});
  detail::wgmma::Pending& p = detail::wgmma::pending();
  p.fenced = true;
  p.nwaited = 0;
}
// fence.proxy.async.shared::cta: the thread's shared stores so far become visible to wgmma.
inline void fence_proxy_async() { detail::async_proxy_fence(); }
inline void wgmma_commit(const char* file, int line) {
  detail::warp_sync(detail::Site{file, line});
  detail::wgmma::Pending& p = detail::wgmma::pending();
  const int used = p.ngroups ? p.group_end[p.ngroups - 1] : 0;
  if (p.ngroups == 64 || used + p.nopen > 256)
    detail::device_fault("wgmma: too many wgmma groups committed and not waited for");
  for (int i = 0; i < p.nopen; ++i) p.done[used + i] = p.open[i];
  p.group_end[p.ngroups++] = used + p.nopen;
  p.nopen = 0;
}
inline void wgmma_wait(int keep, const char* file, int line) {
  detail::warp_sync(detail::Site{file, line});
  detail::wgmma::Pending& p = detail::wgmma::pending();
  if (p.ngroups <= keep) return;
  const int run_groups = p.ngroups - keep, end = p.group_end[run_groups - 1];
  for (int i = 0; i < end; ++i) {
    detail::wgmma::run(p.done[i]);
    bool known = false;
    for (int j = 0; j < p.nwaited; ++j) known = known || p.waited[j] == p.done[i].d;
    if (!known && p.nwaited < 8) p.waited[p.nwaited++] = p.done[i].d;
  }
  const int total = p.group_end[p.ngroups - 1];
  for (int i = end; i < total; ++i) p.done[i - end] = p.done[i];
  for (int gi = run_groups; gi < p.ngroups; ++gi) p.group_end[gi - run_groups] = p.group_end[gi] - end;
  p.ngroups = keep;
}

}  // namespace sim

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}  // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <class T>
inline constexpr bool sim_always_false_ = false;

template <class Use, int m, int n, int k, class T, class Layout = void>
class fragment {
  static_assert(sim_always_false_<Use>,
                "the emulator's <mma.h> has only the m16n16k8 TF32 fragments: "
                "fragment<matrix_a|matrix_b, 16, 16, 8, precision::tf32, row_major|col_major> and "
                "fragment<accumulator, 16, 16, 8, float> (sim/docs/tensor-cores.md)");
};

template <int N>
struct sim_frag_base_ {
  using element_type = float;
  using storage_element_type = float;
  static constexpr int num_elements = N;
  static constexpr int num_storage_elements = N;
  float x[N];
};

template <class Layout>
class fragment<matrix_a, 16, 16, 8, precision::tf32, Layout> : public sim_frag_base_<4> {
  static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>,
                "matrix_a fragment needs row_major or col_major");
};
template <class Layout>
class fragment<matrix_b, 16, 16, 8, precision::tf32, Layout> : public sim_frag_base_<4> {
  static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>,
                "matrix_b fragment needs row_major or col_major");
};
template <>
class fragment<accumulator, 16, 16, 8, float, void> : public sim_frag_base_<8> {};

// CUDA declares it in nvcuda::wmma: FP32 rounded to TF32 as cvt.rna.tf32.f32 (see the top).
inline float __float_to_tf32(float in) { return ::sim::tf32_round_reference(in); }

template <class Use, class T, class Layout>
inline void fill_fragment(fragment<Use, 16, 16, 8, T, Layout>& f, float v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

// matrix_a (16x8) or matrix_b (8x16): element (r, c) at p[r * ldm + c] (row_major) or
// p[c * ldm + r] (col_major).
template <class Use, class Layout>
__attribute__((always_inline)) inline void load_matrix_sync(
    fragment<Use, 16, 16, 8, precision::tf32, Layout>& f, const float* p, unsigned ldm,
    const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  constexpr bool is_a = std::is_same_v<Use, matrix_a>;
  constexpr int layout = std::is_same_v<Layout, col_major> ? 1 : 0;
  ::sim::detail::wmma::mem_sync(::sim::detail::kWmmaLoad, "wmma::load_matrix_sync", p, ldm, layout,
                                file, line);
  const int lane = ::sim::detail::wmma::lane_id();
  for (int i = 0; i < 4; ++i) {
    int r, c;
    if constexpr (is_a)
      ::sim::detail::wmma::a_pos(lane, i, r, c);
    else
      ::sim::detail::wmma::b_pos(lane, i, r, c);
    f.x[i] = layout ? p[static_cast<std::size_t>(c) * ldm + r] : p[static_cast<std::size_t>(r) * ldm + c];
  }
}

// Accumulator (16x16): element (r, c) at p[r * ldm + c] (mem_row_major) or p[c * ldm + r].
__attribute__((always_inline)) inline void load_matrix_sync(
    fragment<accumulator, 16, 16, 8, float>& f, const float* p, unsigned ldm, layout_t layout,
    const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const int lay = layout == mem_col_major ? 1 : 0;
  ::sim::detail::wmma::mem_sync(::sim::detail::kWmmaLoad, "wmma::load_matrix_sync", p, ldm, lay,
                                file, line);
  const int lane = ::sim::detail::wmma::lane_id();
  for (int i = 0; i < 8; ++i) {
    int r, c;
    ::sim::detail::wmma::acc_pos(lane, i, r, c);
    f.x[i] = lay ? p[static_cast<std::size_t>(c) * ldm + r] : p[static_cast<std::size_t>(r) * ldm + c];
  }
}

__attribute__((always_inline)) inline void store_matrix_sync(
    float* p, const fragment<accumulator, 16, 16, 8, float>& f, unsigned ldm, layout_t layout,
    const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const int lay = layout == mem_col_major ? 1 : 0;
  ::sim::detail::wmma::mem_sync(::sim::detail::kWmmaStore, "wmma::store_matrix_sync", p, ldm, lay,
                                file, line);
  const int lane = ::sim::detail::wmma::lane_id();
  for (int i = 0; i < 8; ++i) {
    int r, c;
    ::sim::detail::wmma::acc_pos(lane, i, r, c);
    (lay ? p[static_cast<std::size_t>(c) * ldm + r] : p[static_cast<std::size_t>(r) * ldm + c]) = f.x[i];
  }
}

// D = A * B + C (see the top for what is modelled). d may alias c.
template <class LayoutA, class LayoutB>
inline void mma_sync(fragment<accumulator, 16, 16, 8, float>& d,
                     const fragment<matrix_a, 16, 16, 8, precision::tf32, LayoutA>& a,
                     const fragment<matrix_b, 16, 16, 8, precision::tf32, LayoutB>& b,
                     const fragment<accumulator, 16, 16, 8, float>& c,
                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::sim::detail::wmma::MmaRec rec{::sim::detail::WarpCall{&::sim::detail::wmma::mma_lanes}, a.x,
                                  b.x, c.x, d.x};
  ::sim::detail::warp_op(::sim::detail::Site{file, line}, ::sim::detail::kWmmaMma, 0xffffffffu,
                         reinterpret_cast<std::uintptr_t>(&rec), 0, 0, 32);
}

}  // namespace wmma
}  // namespace nvcuda
